//! Live progress of a run (`craik run`, `craik runs resume`): what the driver records, shown as
//! it is recorded. On a terminal, lines on stderr (phase, each proposed action with its
//! verdict, approvals awaited, side-effect outcomes) under one status line redrawn in place
//! (the phase and the runner's streamed text); with `--format jsonl`, one JSON object per
//! event on stdout, ending with the run's summary (docs/runs.md, "Live progress"). Piped,
//! `--quiet` or `--format json`: nothing. Everything a runner influenced is escaped here.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::rc::Rc;

use craik_contracts::{Timestamp, Truncated, one_line};
use craik_host::run::driver::{DecisionNote, Observed, Observer};
use craik_host::run::{Event, Outcome};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// How a run's progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Live {
    /// Nothing (stderr is not a terminal, `--quiet`, `--format json`).
    #[default]
    Off,
    /// Lines and a status line on stderr (a terminal).
    Human,
    /// JSON lines on stdout (`--format jsonl`).
    Jsonl,
}

/// The stream's numbering, shared by the observer and the closing summary.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seq(Rc<Cell<u64>>);

impl Seq {
    fn next(&self) -> u64 {
        let n = self.0.get();
        self.0.set(n.saturating_add(1));
        n
    }
}

/// One line of the JSON-lines stream: `event`, `seq`, `at`, then the kind's fields.
pub(crate) fn record(seq: &Seq, event: &str, at: Timestamp, body: Value) -> Value {
    let mut map = Map::new();
    map.insert("event".into(), json!(event));
    map.insert("seq".into(), json!(seq.next()));
    map.insert("at".into(), json!(at));
    if let Value::Object(fields) = body {
        map.extend(fields);
    }
    Value::Object(map)
}

/// The closing line of a JSON-lines run: the summary `--format json` prints, as one record.
pub(crate) fn summary_record<T: Serialize>(seq: &Seq, summary: &T) -> Value {
    record(
        seq,
        "summary",
        Timestamp::new(time::OffsetDateTime::now_utc()),
        serde_json::to_value(summary).unwrap_or(Value::Null),
    )
}

/// The observer to install for `live` (`None`: show nothing).
pub(crate) fn observer(live: Live, seq: &Seq) -> Option<(Observer, Done)> {
    let flag = Rc::new(Cell::new(false));
    let stopped = Rc::clone(&flag);
    match live {
        Live::Off => None,
        Live::Jsonl => {
            let seq = seq.clone();
            let observer: Observer = Box::new(move |what| {
                if stopped.get() {
                    return;
                }
                for line in jsonl(&seq, what) {
                    let mut stdout = std::io::stdout().lock();
                    // A closed reader ends the stream, not the run (the summary says so).
                    let _ = crate::output::json_line_to(&mut stdout, &line);
                    let _ = stdout.flush();
                }
            });
            Some((observer, Done(flag, None)))
        }
        Live::Human => {
            let screen = Rc::new(RefCell::new(Screen::new()));
            let for_done = Rc::clone(&screen);
            let observer: Observer = Box::new(move |what| {
                if stopped.get() {
                    return;
                }
                if let Ok(mut screen) = screen.try_borrow_mut() {
                    screen.show(what);
                }
            });
            Some((observer, Done(flag, Some(for_done))))
        }
    }
}

/// Ends a live display: the observer shows nothing more, the status line is cleared.
#[derive(Debug)]
pub(crate) struct Done(Rc<Cell<bool>>, Option<Rc<RefCell<Screen>>>);

impl Done {
    /// Ends the display now (dropping it does the same: an error mid-run leaves no status
    /// line behind its message).
    pub(crate) fn finish(self) {}
}

impl Drop for Done {
    fn drop(&mut self) {
        if self.0.get() {
            return;
        }
        self.0.set(true);
        if let Some(screen) = &self.1
            && let Ok(screen) = screen.try_borrow()
        {
            screen.clear();
        }
    }
}

/// The JSON-lines records of one observation.
fn jsonl(seq: &Seq, what: Observed<'_>) -> Vec<Value> {
    match what {
        Observed::Text(text) => vec![record(
            seq,
            "text",
            Timestamp::new(time::OffsetDateTime::now_utc()),
            json!({"text": text}),
        )],
        Observed::Decision(note) => vec![record(seq, "verdict", note.at, verdict(note))],
        Observed::Event(event) => match event {
            Event::StepRequest { at, request } => vec![record(
                seq,
                "phase",
                *at,
                json!({
                    "step": request.context.0.get("step"),
                    "iteration": request.context.0.get("iteration"),
                    "phase": request.phase.as_str(),
                    "request": request.id,
                }),
            )],
            Event::StepResult {
                at,
                result,
                actions,
                next,
            } => {
                let mut lines = vec![record(
                    seq,
                    "step",
                    *at,
                    json!({
                        "phase": result.phase.as_str(),
                        "status": result.status.as_str(),
                        "summary": result.summary,
                        "actions": actions.len(),
                        "next": next.map(|n| match n {
                            craik_contracts::NextStep::Continue => "continue",
                            craik_contracts::NextStep::Stop => "stop",
                        }),
                        "result": result.id,
                    }),
                )];
                for a in actions {
                    lines.push(record(
                        seq,
                        "action",
                        *at,
                        json!({
                            "action": a.id,
                            "label": a.proposed.id,
                            "capability": a.proposed.capability,
                            "operation": a.proposed.operation,
                            "target": a.shown(),
                            "refused": a.refused,
                        }),
                    ));
                }
                lines
            }
            Event::Executing { at, action, .. } => {
                vec![record(seq, "executing", *at, json!({"action": action}))]
            }
            Event::Outcome { at, outcome } => {
                vec![record(seq, "outcome", *at, outcome_body(outcome))]
            }
            Event::Parked {
                at,
                reason,
                approval,
            } => vec![record(
                seq,
                "awaiting_approval",
                *at,
                json!({"approval": approval, "reason": reason}),
            )],
            Event::Reopened { at, why } => {
                vec![record(seq, "reopened", *at, json!({"why": why}))]
            }
            Event::Recovered { at, notes } => {
                vec![record(seq, "recovered", *at, json!({"notes": notes}))]
            }
            Event::Halted { at, status, reason } => vec![record(
                seq,
                "halted",
                *at,
                json!({"status": status.as_str(), "reason": reason}),
            )],
        },
    }
}

fn verdict(note: &DecisionNote) -> Value {
    json!({
        "action": note.action,
        "label": note.label,
        "capability": note.capability,
        "operation": note.operation,
        "target": note.target,
        "decision": note.decision,
        "mode": note.mode,
        "policies": note.policies,
        "reasons": note.reasons,
        "receipt": note.receipt,
    })
}

fn outcome_body(o: &Outcome) -> Value {
    json!({
        "action": o.action,
        "decision": o.decision,
        "ok": o.ok,
        "summary": o.summary,
        "receipt": o.receipt,
    })
}

/// The terminal display: finished lines scroll up, one status line stays at the bottom.
#[derive(Debug)]
pub(crate) struct Screen {
    /// `iteration N · phase`.
    phase: String,
    /// The runner's streamed text in this step, as the host lets it be shown.
    text: String,
    width: usize,
}

impl Screen {
    fn new() -> Self {
        let width = terminal_size::terminal_size_of(std::io::stderr())
            .map_or(80, |(w, _)| usize::from(w.0))
            .max(20);
        Self {
            phase: String::new(),
            text: String::new(),
            width,
        }
    }

    fn show(&mut self, what: Observed<'_>) {
        match what {
            Observed::Text(text) => {
                // Already its last line, whole words, redacted and bounded by the host.
                text.clone_into(&mut self.text);
                self.redraw();
            }
            Observed::Decision(note) => {
                let mut line = format!(
                    "  {:<17} {} {} {}",
                    if note.mode == "shadow" {
                        format!("shadow {}", note.decision)
                    } else {
                        note.decision.to_owned()
                    },
                    note.action,
                    note.capability,
                    Truncated(&note.target)
                );
                if !note.policies.is_empty() {
                    line.push_str(&format!(" [{}]", note.policies.join(", ")));
                }
                if note.decision != "allow"
                    && let Some(why) = note.reasons.first()
                {
                    line.push_str(&format!(" — {}", Truncated(why)));
                }
                self.line(&line);
            }
            Observed::Event(event) => self.event(event),
        }
    }

    fn event(&mut self, event: &Event) {
        match event {
            Event::StepRequest { request, .. } => {
                let iteration = request
                    .context
                    .0
                    .get("iteration")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .saturating_add(1);
                self.phase = format!("iteration {iteration} · {}", request.phase.as_str());
                self.text.clear();
                self.line(&format!("▸ {}", self.phase));
            }
            Event::StepResult {
                result, actions, ..
            } => {
                self.text.clear();
                self.line(&format!(
                    "  step {} {}: {}",
                    result.phase.as_str(),
                    result.status.as_str(),
                    Truncated(&result.summary)
                ));
                for a in actions {
                    self.line(&format!(
                        "  proposed          {} {} {} {}",
                        a.id,
                        a.proposed.capability,
                        a.proposed.operation,
                        Truncated(&a.shown())
                    ));
                }
            }
            Event::Executing { .. } => {}
            Event::Outcome { outcome, .. } => {
                // A denial's outcome repeats its verdict line; only performed effects here.
                if outcome.decision == "allow" {
                    self.line(&format!(
                        "    {} {}: {}",
                        if outcome.ok { "done  " } else { "FAILED" },
                        outcome.action,
                        Truncated(&outcome.summary)
                    ));
                }
            }
            Event::Parked { approval, .. } => {
                self.line(&format!("  awaiting approval {approval}"));
            }
            Event::Reopened { why, .. } => self.line(&format!("  reopened: {}", Truncated(why))),
            Event::Recovered { notes, .. } => {
                for note in notes {
                    self.line(&format!("  recovered: {}", Truncated(note)));
                }
            }
            Event::Halted { status, reason, .. } => {
                self.phase.clear();
                self.text.clear();
                self.line(&format!("■ {}: {}", status.as_str(), Truncated(reason)));
            }
        }
    }

    /// A finished line (escaped), then the status line again below it.
    fn line(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\x1b[2K\r{}\n", one_line(text));
        drop(err);
        self.redraw();
    }

    /// The status line, cut to the terminal's width so it never wraps.
    fn redraw(&self) {
        let status = if self.text.trim().is_empty() {
            self.phase.clone()
        } else {
            format!("{} · {}", self.phase, self.text.trim())
        };
        let status: String = one_line(&status)
            .chars()
            .take(self.width.saturating_sub(1))
            .collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\x1b[2K\r{status}");
        let _ = err.flush();
    }

    fn clear(&self) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\x1b[2K\r");
        let _ = err.flush();
    }
}
