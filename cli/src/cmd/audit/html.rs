//! The HTML report of `craik audit --html`: one self-contained page (no external resource;
//! its CSP admits its one script by hash), the summary first (runs by status, approvals by
//! approver, denials, cancellations, memory reviews, files changed), then a section per run.
//!
//! Sections are written to a temporary file beside the page as the journals are read, and
//! copied after the summary at the end: memory holds the counters and the summary's capped
//! lists, never every receipt. Every runner-influenced string is made one line (controls and
//! bidi overrides escaped), then HTML-escaped.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use craik_kernel::{DecidedByKind, Report};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::summary::Summary;
use super::{
    BOUND_CHECKS, Entry, RunHead, Shown, approval_line, decided_by, file_changes, memory_line,
    meta, step_of, verdict,
};
use crate::exit::Failure;

/// The report's one script: a filter box, and a mark that it ran (`data-audit-ready`, the
/// number of receipt rows) or why it failed (`data-script-error`). The page's
/// Content-Security-Policy admits this script by its hash and nothing else.
const SCRIPT: &str = r"
window.addEventListener('error', function (e) {
  document.documentElement.setAttribute('data-script-error', String(e.message));
});
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll('tr.receipt'));
  var box = document.getElementById('filter');
  var shown = document.getElementById('shown');
  function apply() {
    var q = box.value.toLowerCase();
    var n = 0;
    rows.forEach(function (r) {
      var hit = r.textContent.toLowerCase().indexOf(q) >= 0;
      r.hidden = !hit;
      if (hit) { n += 1; }
    });
    shown.textContent = n + ' of ' + rows.length + ' receipts shown';
  }
  box.addEventListener('input', apply);
  apply();
  document.documentElement.setAttribute('data-audit-ready', String(rows.length));
})();
";

/// No column is clipped at 1280 px: fixed table layout, every cell wraps anywhere (long
/// unbroken paths included), times never wrap.
const STYLE: &str = "
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #111; overflow-wrap: anywhere; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; margin-top: 1.4em; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; margin: 0.4em 0; }
th, td { border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; text-align: left; overflow-wrap: anywhere; word-break: break-word; }
th { background: #f3f3f3; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
.time { white-space: nowrap; font-family: ui-monospace, monospace; font-size: 12px; }
col.seq { width: 4em; } col.time { width: 19.5em; } col.step { width: 10%; } col.cap { width: 13%; }
col.target { width: 19%; } col.by { width: 20%; } col.key { width: 14em; } col.n { width: 7em; }
.invalid { color: #a00; font-weight: bold; } .valid { color: #060; font-weight: bold; }
.unsigned { background: #fff4d6; } .badge { font-size: 11px; padding: 1px 4px; border: 1px solid #b80; color: #850; }
.deny { color: #a00; } .requires_approval { color: #a60; } .allow { color: #060; }
tr.cancel td, tr.denied td { background: #fdecec; } tr.memory td { background: #eef4fd; }
.files { margin: 2px 0 0 1.2em; padding: 0; }
pre.prompt { white-space: pre-wrap; max-height: 40em; overflow: auto; font-size: 12px; background: #fafafa; padding: 6px; }
";

/// HTML text: runner-influenced strings are made one line (controls and bidi overrides
/// escaped), then HTML-escaped.
fn esc(text: &str) -> String {
    // Most text (hashes, ids, times, plain paths) needs nothing: printable ASCII without
    // markup characters is its own escape.
    if text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && !matches!(b, b'&' | b'<' | b'>' | b'"' | b'\''))
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for c in craik_contracts::one_line(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Rows a summary list keeps (the rest are counted: "and N more").
const MAX_LISTED: usize = 200;
/// Runs listed in the summary's run table.
const MAX_RUNS_LISTED: usize = 10_000;

/// A summary list: its first rows (rendered) and how many more there were.
#[derive(Default)]
struct Listed {
    rows: Vec<String>,
    more: u64,
}

impl Listed {
    fn push(&mut self, cap: usize, row: impl FnOnce() -> String) {
        if self.rows.len() < cap {
            self.rows.push(row());
        } else {
            self.more += 1;
        }
    }

    fn table(&self, h: &mut String, title: &str, total: u64, head: &str, cols: &str) {
        let _ = write!(h, "<h3>{title}: {total}</h3>");
        if self.rows.is_empty() {
            return;
        }
        let _ = write!(
            h,
            "<table class=\"summary\"><colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead><tbody>"
        );
        for row in &self.rows {
            h.push_str(row);
        }
        let _ = write!(h, "</tbody></table>");
        if self.more > 0 {
            let _ = write!(h, "<p>and {} more (see the runs below)</p>", self.more);
        }
    }
}

/// The HTML report being written: per-run sections go to a temporary file beside the page as
/// they are read; [`Page::finish`] writes the summary first, then copies them after it.
pub(super) struct Page {
    path: PathBuf,
    sections_path: PathBuf,
    sections: std::io::BufWriter<std::fs::File>,
    runs: Listed,
    denials: Listed,
    cancellations: Listed,
    memory: Listed,
    files: Listed,
    /// Run id of the section being written.
    run: String,
}

fn tmp_beside(path: &Path, what: &str) -> Result<PathBuf, Failure> {
    craik_host::fsio::tmp_beside(path, what)
        .map_err(|_| Failure::usage(format!("--html {}: not a file name", path.display())))
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> Failure + '_ {
    move |e| Failure::usage(format!("--html {}: cannot write: {e}", path.display()))
}

impl Page {
    pub(super) fn create(path: &Path) -> Result<Self, Failure> {
        let sections_path = tmp_beside(path, "sections")?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&sections_path)
            .map_err(write_err(path))?;
        Ok(Self {
            path: path.to_owned(),
            sections_path,
            sections: std::io::BufWriter::new(file),
            runs: Listed::default(),
            denials: Listed::default(),
            cancellations: Listed::default(),
            memory: Listed::default(),
            files: Listed::default(),
            run: String::new(),
        })
    }

    fn put(&mut self, text: &str) -> Result<(), Failure> {
        self.sections
            .write_all(text.as_bytes())
            .map_err(write_err(&self.path))
    }

    pub(super) fn run_start(
        &mut self,
        run: &RunHead,
        v: &Report,
        shown: &Shown,
    ) -> Result<(), Failure> {
        self.run = run.run_id.clone().unwrap_or_else(|| "?".to_owned());
        let mut h = String::new();
        let _ = write!(
            h,
            "<section class=\"run\"><h2>Run <code>{}</code></h2><table class=\"facts\"><colgroup><col class=\"key\"><col></colgroup>",
            esc(&self.run)
        );
        let verdict = match &v.failure {
            None => format!(
                "<span class=\"valid\">valid</span>, {}: {} receipts, {} checkpoints",
                if v.closed { "closed" } else { "open" },
                v.receipts,
                v.checkpoints
            ),
            Some(f) => format!(
                "<span class=\"invalid\">INVALID</span> at line {}: {}: {} — {}",
                f.line,
                esc(&f.what),
                esc(&f.why),
                if BOUND_CHECKS.contains(&f.what.as_str()) || f.line == 0 {
                    "every signature verified; all receipts are listed"
                } else {
                    "only the receipts before it are listed"
                }
            ),
        };
        let _ = write!(
            h,
            "<tr><th>journal</th><td>{verdict}<br><span class=\"unsigned\"><code>{}</code> <span class=\"badge\">not signed</span> (the path on this machine)</span></td></tr>",
            esc(&run.journal)
        );
        if run.rebuilt {
            h.push_str("<tr><th>ledger</th><td><span class=\"badge\">rebuilt</span> entered by <code>craik ledger rebuild</code>: the ledger vouches for this journal from the rebuild on, not from when it was written</td></tr>");
        }
        let compared = match (shown.expected_policy_set, v.is_valid()) {
            (true, true) => " — matches the bundle given",
            (true, false) => "",
            (false, _) => " — not compared (pass --policies/--custom)",
        };
        let _ = write!(
            h,
            "<tr><th>policy set</th><td><code>{}</code>{compared}</td></tr>",
            esc(&run.policy_sets.join(", "))
        );
        if let Some(Value::Object(inputs)) = &run.inputs {
            let _ = write!(h, "<tr><th>inputs (receipt 0)</th><td>");
            for (k, val) in inputs {
                let text = val.as_str().map_or_else(|| val.to_string(), str::to_owned);
                let _ = write!(h, "{}: <code>{}</code><br>", esc(k), esc(&text));
            }
            let _ = write!(h, "</td></tr>");
        }
        // Issue 21: the case file and prompt the run signed; the prompt opens in place (only
        // when the file matches the signed digest).
        for f in &run.context {
            let state = match f.state {
                "matches" => "<span class=\"valid\">matches the signed digest</span>",
                "changed" => "<span class=\"invalid\">CHANGED since the run signed it</span>",
                _ => "<span class=\"invalid\">MISSING</span>",
            };
            let _ = write!(
                h,
                "<tr><th>{}</th><td><code>{}</code> <code>{}</code> — {state}",
                esc(f.file),
                esc(f.file),
                esc(&f.sha256)
            );
            if let Some(text) = &f.prompt {
                let _ = write!(
                    h,
                    "<details><summary>open the prompt the runner was told ({} bytes)</summary><pre class=\"prompt\">{}</pre></details>",
                    text.len(),
                    text.lines().map(esc).collect::<Vec<_>>().join("\n")
                );
            }
            let _ = write!(h, "</td></tr>");
        }
        if let Some(m) = &run.model_steps {
            let _ = write!(
                h,
                "<tr><th>model steps</th><td>{}</td></tr>",
                esc(&m.line())
            );
        }
        let status = if let Some(s) = &run.status {
            let _ = write!(
                h,
                "<tr><th>status</th><td>{} — {} (signed: <code>{}</code>{})</td></tr>",
                esc(&s.status),
                esc(&s.reason),
                esc(&s.receipt),
                if s.may_continue {
                    "; parked, may continue once its approval is decided"
                } else {
                    ""
                }
            );
            esc(&s.status)
        } else if let Some(u) = &run.unsigned {
            let _ = write!(
                h,
                "<tr class=\"unsigned\"><th>status</th><td>{} — {} <span class=\"badge\">not signed</span> ({})</td></tr>",
                esc(u.status.as_deref().unwrap_or("?")),
                esc(u.stop_reason.as_deref().unwrap_or("-")),
                esc(u.note)
            );
            format!(
                "{} <span class=\"badge\">not signed</span>",
                esc(u.status.as_deref().unwrap_or("?"))
            )
        } else {
            "?".to_owned()
        };
        let _ = write!(
            h,
            "</table><table class=\"timeline\"><colgroup><col class=\"seq\"><col class=\"time\"><col class=\"step\">\
             <col class=\"cap\"><col class=\"target\"><col><col class=\"by\"></colgroup>\
             <thead><tr><th>seq</th><th>time (UTC)</th><th>step / action</th>\
             <th>capability / operation</th><th>target</th><th>verdict / outcome</th>\
             <th>decided by / grant / review</th></tr></thead><tbody>"
        );
        let valid = if v.is_valid() {
            "<span class=\"valid\">valid</span>".to_owned()
        } else {
            format!(
                "<span class=\"invalid\">INVALID</span> {}",
                v.failure.as_ref().map(|f| esc(&f.what)).unwrap_or_default()
            )
        };
        let run_cell = esc(&self.run);
        let receipts = v.receipts;
        self.runs.push(MAX_RUNS_LISTED, || {
            format!(
                "<tr><td><code>{run_cell}</code></td><td>{status}</td><td>{valid}</td><td>{receipts}</td></tr>"
            )
        });
        self.put(&h)
    }

    pub(super) fn entry(&mut self, _head: &RunHead, entry: &Entry) -> Result<(), Failure> {
        let r = &entry.receipt;
        let run = esc(&self.run);
        let class = if r.decided_by.kind == DecidedByKind::Outcome {
            "outcome"
        } else {
            craik_host::policytest::decision_name(r.decision)
        };
        let row_class = if r.capability == "run.cancel" {
            "receipt cancel"
        } else if super::summary::is_denial(r) {
            "receipt denied"
        } else if entry.memory_review.is_some() {
            "receipt memory"
        } else {
            "receipt"
        };
        let (verdict, by) = (verdict(r), decided_by(r));
        let mut review = String::new();
        if let Some(g) = &entry.grant {
            let _ = write!(review, "<br>grant <code>{}</code>", esc(g));
        }
        if let Some(a) = &entry.approval {
            let _ = write!(review, "<br>{}", esc(&approval_line(a)));
        }
        if let Some(m) = &entry.memory_review {
            let _ = write!(review, "<br>{}", esc(&memory_line(m)));
        }
        if let Some(line) = super::model_step_line(r) {
            let _ = write!(review, "<br>{}", esc(&line));
        }
        let mut files = String::new();
        for f in file_changes(r) {
            let _ = write!(
                files,
                "<li>{} <code>{}</code>{}{}</li>",
                esc(f.change),
                esc(f.path),
                if f.sha256.is_empty() {
                    String::new()
                } else {
                    format!(" <code>{}</code>", esc(f.sha256))
                },
                esc(&f.forbidden_note())
            );
            let (change, path, note) = (esc(f.change), esc(f.path), esc(&f.forbidden_note()));
            let seq = r.seq;
            self.files.push(MAX_LISTED, || {
                format!(
                    "<tr><td><code>{run}</code></td><td>{seq}</td><td>{change}</td><td><code>{path}</code>{note}</td></tr>"
                )
            });
        }
        if !files.is_empty() {
            files = format!("<ul class=\"files\">{files}</ul>");
        }
        let time = esc(&r.created_at);
        if super::summary::is_denial(r) {
            let (cap, target, why, by) =
                (esc(&r.capability), esc(&r.target), esc(&r.reason), esc(&by));
            let seq = r.seq;
            self.denials.push(MAX_LISTED, || {
                format!(
                    "<tr><td><code>{run}</code></td><td>{seq}</td><td class=\"time\">{time}</td><td><code>{cap}</code></td><td><code>{target}</code></td><td>{why} (by {by})</td></tr>"
                )
            });
        }
        if r.capability == "run.cancel" {
            let (by, why) = (esc(&r.decided_by.by), esc(&r.reason));
            let seq = r.seq;
            self.cancellations.push(MAX_LISTED, || {
                format!(
                    "<tr><td><code>{run}</code></td><td>{seq}</td><td class=\"time\">{time}</td><td>{by}</td><td>{why}</td></tr>"
                )
            });
        }
        if let Some(m) = &entry.memory_review {
            let (id, line) = (
                esc(r.action.as_deref().unwrap_or_default()),
                esc(&memory_line(m)),
            );
            self.memory.push(MAX_LISTED, || {
                format!(
                    "<tr><td><code>{run}</code></td><td><code>{id}</code></td><td>{line}</td></tr>"
                )
            });
        }
        let row = format!(
            "<tr class=\"{row_class}\" id=\"{}\"><td>{}</td><td class=\"time\">{time}</td><td>{}<br><code>{}</code></td>\
             <td><code>{}</code>{}</td><td><code>{}</code></td><td class=\"{class}\">{}{files}</td>\
             <td>{}{review}</td></tr>",
            esc(&r.id),
            r.seq,
            step_of(r.action.as_deref())
                .map(|s| format!("step {s}"))
                .unwrap_or_default(),
            esc(r.action.as_deref().unwrap_or_default()),
            esc(&r.capability),
            meta(r, "operation")
                .map(|o| format!(" / {}", esc(o)))
                .unwrap_or_default(),
            esc(&r.target),
            esc(&verdict),
            esc(&by),
        );
        self.put(&row)
    }

    pub(super) fn run_end(&mut self, _v: &Report, changed: Option<&str>) -> Result<(), Failure> {
        let mut h = String::from("</tbody></table>");
        if let Some(why) = changed {
            let _ = write!(
                h,
                "<p><span class=\"invalid\">INVALID</span>: the journal changed during the audit: {}</p>",
                esc(why)
            );
        }
        h.push_str("</section>");
        self.put(&h)
    }

    /// Writes the page (atomically: a temporary file renamed into place): summary, ledger,
    /// then the per-run sections; returns its path.
    pub(super) fn finish(
        mut self,
        summary: &Summary<'_>,
        ledger: Option<&craik_host::ledger::HomeCheck>,
        shown: &Shown,
    ) -> Result<PathBuf, Failure> {
        use std::io::{Seek, Write as _};
        self.sections.flush().map_err(write_err(&self.path))?;
        let head = self.head(summary, ledger, shown);
        let tmp = tmp_beside(&self.path, "tmp")?;
        let result = (|| -> std::io::Result<()> {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(head.as_bytes())?;
            let sections = self.sections.get_mut();
            sections.seek(std::io::SeekFrom::Start(0))?;
            let mut reader = std::fs::File::open(&self.sections_path)?;
            std::io::copy(&mut reader, &mut file)?;
            writeln!(file, "<script>{SCRIPT}</script></body></html>")?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(write_err(&self.path))?;
        Ok(self.path.clone())
    }

    /// Everything before the per-run sections: the summary first.
    fn head(
        &self,
        summary: &Summary<'_>,
        ledger: Option<&craik_host::ledger::HomeCheck>,
        shown: &Shown,
    ) -> String {
        let hash =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()));
        let c = summary.counts();
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{hash}'\">\
             <title>Craik audit</title><style>{STYLE}</style></head><body>\
             <h1>Craik audit</h1>\
             <p>Every row below comes from a receipt whose ed25519 signature, hash chain and \
             checkpoints verified with the trusted key(s) <code>{}</code>, or from a verified \
             review journal. Cells marked <span class=\"badge\">not signed</span> are not covered \
             by any signature. This page itself is not signed: re-run <code>craik audit</code> or \
             <code>craik receipts verify</code> to check.</p>",
            esc(&shown.trusted_keys)
        );
        let filters = serde_json::to_string(summary.filters()).unwrap_or_default();
        let _ = write!(
            h,
            "<h2>Summary</h2><p>{} journal(s) audited, <span class=\"{}\">{} invalid</span>; {} receipt(s) explained{}.</p>",
            c.journals,
            if c.invalid_journals == 0 {
                "valid"
            } else {
                "invalid"
            },
            c.invalid_journals,
            c.receipts,
            if filters == "{}" {
                String::new()
            } else {
                format!(" (filters <code>{}</code>)", esc(&filters))
            }
        );
        let counts = |h: &mut String,
                      title: &str,
                      key: &str,
                      m: &std::collections::BTreeMap<String, u64>| {
            let _ = write!(
                h,
                "<h3>{title}</h3><table class=\"summary\"><colgroup><col><col class=\"n\"></colgroup><thead><tr><th>{key}</th><th>count</th></tr></thead><tbody>"
            );
            for (k, v) in m {
                let _ = write!(h, "<tr><td><code>{}</code></td><td>{v}</td></tr>", esc(k));
            }
            if m.is_empty() {
                let _ = write!(h, "<tr><td>none</td><td>0</td></tr>");
            }
            let _ = write!(h, "</tbody></table>");
        };
        counts(&mut h, "Runs by status", "signed status", &c.runs_by_status);
        self.runs.table(
            &mut h,
            "Runs",
            c.journals,
            "<th>run</th><th>status</th><th>journal</th><th>receipts</th>",
            "<col><col><col><col class=\"n\">",
        );
        counts(&mut h, "Approvals by approver", "approver", &c.by_approver);
        self.denials.table(
            &mut h,
            "Denials",
            c.denials,
            "<th>run</th><th>seq</th><th>time (UTC)</th><th>capability</th><th>target</th><th>reason</th>",
            "<col><col class=\"seq\"><col class=\"time\"><col><col><col>",
        );
        self.cancellations.table(
            &mut h,
            "Cancellations",
            c.cancellations,
            "<th>run</th><th>seq</th><th>time (UTC)</th><th>by</th><th>reason</th>",
            "<col><col class=\"seq\"><col class=\"time\"><col><col>",
        );
        self.memory.table(
            &mut h,
            "Memory reviews",
            c.memory_proposals(),
            "<th>run</th><th>proposal</th><th>review</th>",
            "<col><col><col>",
        );
        self.files.table(
            &mut h,
            "Files changed",
            c.files_changed,
            "<th>run</th><th>seq</th><th>change</th><th>path</th>",
            "<col><col class=\"seq\"><col class=\"n\"><col>",
        );
        counts(&mut h, "Receipts by verdict", "verdict", &c.by_verdict);
        counts(
            &mut h,
            "Receipts by capability",
            "capability",
            &c.by_capability,
        );
        let _ = write!(
            h,
            "<h2>Runs</h2><p><label>Filter: <input id=\"filter\" type=\"search\"></label> <span id=\"shown\"></span></p>"
        );
        if let Some(check) = ledger {
            let _ = write!(
                h,
                "<h2>Home ledger <code>{}</code></h2><ul>",
                esc(&check.ledger.display().to_string())
            );
            match &check.report {
                Some(r) if check.is_valid() => {
                    let _ = write!(
                        h,
                        "<li>valid: {} entries ({} recorded by <code>craik ledger rebuild</code>); every journal of the home named and ending at its recorded root</li>",
                        r.receipts, check.rebuilt
                    );
                }
                _ => {
                    for p in &check.problems {
                        let _ = write!(
                            h,
                            "<li><span class=\"invalid\">INVALID</span> <code>{}</code>: {}: {}</li>",
                            esc(&p.journal.display().to_string()),
                            esc(&p.what),
                            esc(&p.why)
                        );
                    }
                }
            }
            let _ = write!(h, "</ul>");
        }
        h
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.sections_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_text_is_escaped_and_kept_on_one_line() {
        let hostile = "<script>alert(1)</script>\"' &amp;\n\u{1b}[2J\u{202e}";
        let got = esc(hostile);
        assert!(!got.contains('<') && !got.contains('>') && !got.contains('"'));
        assert!(!got.contains('\n') && !got.contains('\u{1b}') && !got.contains('\u{202e}'));
        assert!(got.contains("&lt;script&gt;") && got.contains("&amp;amp;"));
    }
}
