//! The run's observer: a callback the driver calls right after it records something (an
//! event written to `events.jsonl`, a decision receipt appended to the journal), so a front
//! end shows exactly what was recorded, as it is recorded; and the runner's streamed text,
//! which is shown, never recorded. It must not print or decide anything here: what is shown,
//! and how it is escaped, is the front end's.

use std::cell::RefCell;
use std::rc::Rc;

use craik_contracts::Timestamp;
use craik_kernel::{Mode, Verdict};
use serde::Serialize;

use super::decisions::decision_name;
use super::*;

/// What the observer is told.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// An event of the run's own journal, just written to `events.jsonl`.
    Event(&'a Event),
    /// A decision receipt, just appended to the receipt journal.
    Decision(&'a DecisionNote),
    /// What the runner is streaming during a step (an adapter's `text_delta` events), as it
    /// may be shown: the last line so far, up to its last whitespace (a secret still
    /// arriving is never shown in part), redacted, at most [`STREAMED_SHOWN`] characters.
    /// Not recorded anywhere: for a status line.
    Text(&'a str),
}

/// A decision as its receipt records it.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionNote {
    pub at: Timestamp,
    /// The action's id (`action_<step>_<k>`).
    pub action: String,
    /// The runner's own label for it (untrusted).
    pub label: String,
    pub capability: String,
    pub operation: String,
    /// The target path, or the argv as JSON (untrusted, redacted).
    pub target: String,
    /// `allow`, `requires_approval` or `deny`.
    pub decision: &'static str,
    /// `enforce`, or `shadow` (decided and receipted, nothing performed).
    pub mode: &'static str,
    pub policies: Vec<String>,
    pub reasons: Vec<String>,
    /// The decision receipt's id.
    pub receipt: String,
}

impl DecisionNote {
    pub(super) fn of(
        at: Timestamp,
        action: &ActionRecord,
        verdict: &Verdict,
        receipt: &str,
    ) -> Self {
        Self {
            at,
            action: action.id.clone(),
            label: action.proposed.id.clone(),
            capability: action.proposed.capability.clone(),
            operation: action.proposed.operation.clone(),
            target: action.shown(),
            decision: decision_name(verdict.decision),
            mode: match verdict.mode {
                Mode::Enforce => "enforce",
                Mode::Shadow => "shadow",
            },
            policies: verdict.determining.clone(),
            reasons: verdict.reasons.clone(),
            receipt: receipt.to_owned(),
        }
    }
}

/// The callback a front end installs with [`Host::observe`].
pub type Observer = Box<dyn FnMut(Observed<'_>)>;

/// The observer, shared by the host and (for streamed text) its runner.
pub(super) type Shared = Rc<RefCell<Observer>>;

/// Most characters of streamed text [`Observed::Text`] carries.
pub const STREAMED_SHOWN: usize = 240;
/// Most characters of the streamed line kept for redaction (a longer line loses its start).
const STREAMED_KEPT: usize = 4096;

/// The runner's streamed text in the step in flight (the host empties it before each step).
pub(super) type Streamed = Rc<RefCell<String>>;

/// Appends `delta` to the streamed line, keeping only its last line and at most
/// [`STREAMED_KEPT`] characters; returns what may be shown of it now.
fn stream(line: &mut String, delta: &str) -> Option<String> {
    line.push_str(delta);
    if let Some(end) = line.rfind('\n') {
        *line = line
            .get(end.saturating_add(1)..)
            .unwrap_or_default()
            .to_owned();
    }
    let extra = line.chars().count().saturating_sub(STREAMED_KEPT);
    if extra > 0 {
        *line = line.chars().skip(extra).collect();
    }
    // Up to the last whitespace: a word still arriving (a token, a key) waits for its end.
    let complete = line.get(..line.rfind(char::is_whitespace)?)?.trim();
    if complete.is_empty() {
        return None;
    }
    // Its controls are shown escaped (the runner's attempt stays visible), so only a secret
    // changes it.
    let redacted = match craik_kernel::redact_record(complete) {
        Ok(r) => r.text,
        Err(_) => "[streamed text withheld: it looks like a secret]".to_owned(),
    };
    let skip = redacted.chars().count().saturating_sub(STREAMED_SHOWN);
    Some(redacted.chars().skip(skip).collect())
}

/// Calls the observer; a call made while it is already running (it cannot be, the driver is
/// single-threaded) is dropped rather than panicking.
pub(super) fn tell(observer: &Shared, what: Observed<'_>) {
    if let Ok(mut f) = observer.try_borrow_mut() {
        f(what);
    }
}

impl Host {
    /// Installs `observer`: from now on it is called right after each event is written to
    /// `events.jsonl` and each decision receipt is appended to the journal (in the order they
    /// are written), and with the text the runner streams during a step.
    pub fn observe(&mut self, observer: Observer) {
        let shared: Shared = Rc::new(RefCell::new(observer));
        let for_runner = Rc::clone(&shared);
        let streamed: Streamed = Rc::default();
        let line = Rc::clone(&streamed);
        let mut last = String::new();
        self.runner.stream_text(Box::new(move |delta| {
            let shown = match line.try_borrow_mut() {
                Ok(mut line) => stream(&mut line, delta),
                Err(_) => None,
            };
            if let Some(shown) = shown
                && shown != last
            {
                tell(&for_runner, Observed::Text(&shown));
                last = shown;
            }
        }));
        self.streamed = Some(streamed);
        self.observer = Some(shared);
    }

    /// A new step: the runner's streamed text starts afresh.
    pub(super) fn new_stream(&self) {
        if let Some(streamed) = &self.streamed
            && let Ok(mut line) = streamed.try_borrow_mut()
        {
            line.clear();
        }
    }

    /// Tells the observer about a decision receipt just appended.
    pub(super) fn observe_decision(&self, note: impl FnOnce() -> DecisionNote) {
        if let Some(observer) = &self.observer {
            tell(observer, Observed::Decision(&note()));
        }
    }

    /// Tells the observer about events just written.
    pub(super) fn observe_events(&mut self, events: Vec<Event>) {
        if let Some(observer) = &self.observer {
            for event in &events {
                tell(observer, Observed::Event(event));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_22_streamed_text_is_shown_by_whole_words_from_its_last_line_and_redacted() {
        let mut line = String::new();
        assert_eq!(stream(&mut line, "thinking"), None, "a word still arriving");
        assert_eq!(
            stream(&mut line, " about it"),
            Some("thinking about".into())
        );
        assert_eq!(stream(&mut line, "\nnext "), Some("next".into()));
        // A key arriving in pieces is never shown in part, and redacted once whole.
        let mut line = String::new();
        for piece in ["use sk-proj-", "abcdefghij", "klmnopqrstuvwxyz0123456789"] {
            let shown = stream(&mut line, piece).unwrap_or_default();
            assert!(!shown.contains("sk-proj"), "{shown}");
        }
        let shown = stream(&mut line, " now").unwrap();
        assert!(!shown.contains("abcdefghij"), "{shown}");
        let long = "word ".repeat(2000);
        assert!(stream(&mut String::new(), &long).unwrap().chars().count() <= STREAMED_SHOWN);
    }
}
