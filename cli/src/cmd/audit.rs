//! `craik audit RUN|HOME`: who did what under which policy, read from verified journals only.
//!
//! Every fact shown comes from a receipt whose signature, chain and checkpoints verified, or
//! from a verified review journal; the few facts that do not (the run's state file, paths on
//! this machine) are marked "not signed" in every format.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use craik_kernel::{DecidedByKind, KeyRing, ReceiptPayload, Report, VerifyOptions};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::cmd::receipts::{self, Decoded, Expected, JOURNAL_NAME};
use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};
use craik_host::run::store::Home;

/// What `craik audit` is asked.
pub(crate) struct AuditArgs<'a> {
    pub(crate) target: &'a str,
    pub(crate) home: &'a Path,
    pub(crate) keys: &'a [PathBuf],
    pub(crate) policies: Option<&'a Path>,
    pub(crate) custom: &'a [PathBuf],
    pub(crate) grants: &'a [PathBuf],
    pub(crate) html: Option<&'a Path>,
}

/// The whole report (`--format json`).
#[derive(Serialize)]
struct Audit {
    schema: &'static str,
    version: &'static str,
    /// Key ids the journals were verified with.
    trusted_keys: Vec<String>,
    /// The policy-set hash every receipt had to name (`--policies`/`--custom`), if asked.
    expected_policy_set: Option<String>,
    /// The grants hash the run's inputs had to sign (`--grants`), if asked.
    expected_grants: Option<String>,
    /// The home ledger, checked first when the target is a home.
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger: Option<craik_host::ledger::HomeCheck>,
    runs: Vec<RunAudit>,
}

#[derive(Serialize)]
struct RunAudit {
    journal: String,
    /// Signed run id (from the receipts).
    run_id: Option<String>,
    valid: bool,
    /// What verification found (receipts, checkpoints, closed, first failure).
    verification: Report,
    /// Distinct policy-set hashes the receipts name, in order of first use.
    policy_sets: Vec<String>,
    /// The signed `run.inputs` receipt's metadata: hashes of inputs, grants, envelope and
    /// intent lock, the runner and workspace.
    inputs: Option<Value>,
    /// Every verified receipt, in order, with what explains it.
    timeline: Vec<Entry>,
    /// The status the verified journal signs: its closing receipt's, or a park's when its
    /// last receipt is one.
    status: Option<SignedStatus>,
    /// From the run's state file: NOT covered by a signature.
    unsigned: Option<Unsigned>,
}

#[derive(Serialize)]
struct SignedStatus {
    status: String,
    reason: String,
    receipt: String,
    /// A park awaiting approval: the run may continue.
    may_continue: bool,
}

#[derive(Serialize)]
struct Entry {
    line: usize,
    receipt: ReceiptPayload,
    /// The grant among the determining policies (`grant.<id>` → `<id>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    grant: Option<String>,
    /// For a receipt decided by an approval: the approval's verified review.
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalAudit>,
}

#[derive(Serialize)]
struct ApprovalAudit {
    id: String,
    approver: String,
    /// False when no verified review journal names this run, request and approver.
    verified: bool,
    /// The review denied the approval (an `approval.review` receipt of a denial).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    denied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reviewed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

#[derive(Serialize)]
struct Unsigned {
    note: &'static str,
    status: Option<String>,
    stop_reason: Option<String>,
    ended_at: Option<String>,
}

const UNSIGNED_NOTE: &str = "from run.json, which is not signed: the host's own account";

pub(crate) fn audit(out: &mut Out, format: Format, args: &AuditArgs<'_>) -> Result<Exit, Failure> {
    let (journals, home_target) = targets(args.target, args.home)?;
    let (ring, trusted_keys) = receipts::trusted_keys(
        out,
        args.keys,
        args.home,
        journals.first().map(PathBuf::as_path),
    )?;
    let expected_policy_set = receipts::expected_policy_set(args.policies, args.custom)?;
    let expect = Expected::of(args.grants)?;
    // A home: its ledger first, then every journal against it.
    let homes = home_target
        .map(|h| receipts::home_checks(&[h], &ring))
        .unwrap_or_default();
    let mut runs = Vec::new();
    for journal in &journals {
        runs.push(audit_run(
            journal,
            &ring,
            expected_policy_set.as_deref(),
            &expect,
            &homes,
        )?);
    }
    // Run journals the ledger names that are gone (missing review journals are shown in
    // the ledger's section).
    let runs_dir = homes
        .first()
        .and_then(|c| c.ledger.parent())
        .map(|h| h.join("runs"))
        .unwrap_or_default();
    for problem in homes
        .iter()
        .flat_map(|c| c.problems.iter())
        .filter(|p| p.what == "missing" && p.journal.starts_with(&runs_dir))
    {
        runs.push(RunAudit {
            journal: problem.journal.display().to_string(),
            run_id: None,
            valid: false,
            verification: receipts::missing_report(problem),
            policy_sets: Vec::new(),
            inputs: None,
            timeline: Vec::new(),
            status: None,
            unsigned: None,
        });
    }
    let ledger = homes.into_iter().next();
    let report = Audit {
        schema: "craik.audit",
        version: "0.1.0",
        trusted_keys,
        expected_policy_set,
        expected_grants: expect.grants,
        ledger,
        runs,
    };
    if let Some(file) = args.html {
        let page = html(&report);
        crate::files::write_atomic(file, page.as_bytes())
            .map_err(|e| Failure::usage(format!("--html {}: cannot write: {e}", file.display())))?;
        out.diag(format_args!("craik: wrote {}", file.display()))?;
    }
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => human(out, &report)?,
    }
    Ok(
        if report.runs.iter().all(|r| r.valid)
            && report
                .ledger
                .as_ref()
                .is_none_or(craik_host::ledger::HomeCheck::is_valid)
        {
            Exit::Ok
        } else {
            Exit::CheckFailed
        },
    )
}

/// Journals named by `target`: every run of a home (a directory holding `runs/`, or `runs/`
/// itself), else one run (id under `home`, run directory or journal file).
fn targets(target: &str, home: &Path) -> Result<(Vec<PathBuf>, Option<PathBuf>), Failure> {
    let path = Path::new(target);
    let home_target = path.join("runs").is_dir().then(|| path.to_owned());
    let runs = if path.join("runs").is_dir() {
        Some(path.join("runs"))
    } else if path.is_dir() && !path.join(JOURNAL_NAME).exists() && path.ends_with("runs") {
        Some(path.to_owned())
    } else {
        None
    };
    let Some(runs) = runs else {
        return Ok((vec![receipts::resolve(target, home)?], None));
    };
    let found = receipts::run_journals(&runs)?;
    let has_ledger = home_target
        .as_ref()
        .is_some_and(|h| h.join(craik_host::ledger::LEDGER_NAME).is_file());
    if found.is_empty() && !has_ledger {
        return Err(Failure::usage(format!(
            "{}: no run journals ({JOURNAL_NAME}) found",
            runs.display()
        )));
    }
    Ok((found, home_target))
}

/// The home a run journal sits in (`<home>/runs/<run>/receipts.jsonl`).
fn home_of(journal: &Path) -> Option<Home> {
    let runs = journal.parent()?.parent()?;
    if runs.file_name()? != "runs" {
        return None;
    }
    Some(Home::new(runs.parent()?))
}

/// What [`receipts::checked`] reports about what signed receipts bind (not the chain).
const BOUND_CHECKS: [&str; 4] = ["approval", "inputs", "memory", "not closed"];

fn audit_run(
    journal: &Path,
    ring: &KeyRing,
    policy_set: Option<&str>,
    expect: &Expected,
    homes: &[craik_host::ledger::HomeCheck],
) -> Result<RunAudit, Failure> {
    // Read once: what is verified is exactly what is explained.
    let bytes = std::fs::read(journal)
        .map_err(|e| Failure::usage(format!("{}: {e}", journal.display())))?;
    let report = craik_kernel::verify_journal_with(
        &bytes,
        ring,
        VerifyOptions {
            policy_set,
            threads: receipts::threads(),
            batch: true,
            allow_open: true,
        },
        &mut |_, _| {},
    );
    let report = receipts::against_ledger(
        homes,
        journal,
        receipts::checked(journal, report, ring, expect),
    );
    // Lines before the first failing line verified. A failure of what the receipts bind (an
    // approval without its review, an edited inputs.json or memory file, an unclosed journal)
    // leaves every line signed: all are shown, the one concerned marked by its line.
    let last_good = match &report.failure {
        Some(f) if BOUND_CHECKS.contains(&f.what.as_str()) => usize::MAX,
        Some(f) if f.line > 0 => f.line - 1,
        _ => usize::MAX,
    };
    let home = home_of(journal);
    let run_id = report.run_id.clone();
    let mut timeline = Vec::new();
    let mut policy_sets: Vec<String> = Vec::new();
    let mut inputs = None;
    for (line, decoded) in receipts::decode_all(&bytes) {
        if line > last_good {
            break;
        }
        let Decoded::Receipt(receipt) = decoded else {
            continue;
        };
        if !policy_sets.contains(&receipt.policy_set) {
            policy_sets.push(receipt.policy_set.clone());
        }
        if receipt.seq == 0 && receipt.capability == craik_host::run::driver::RUN_INPUTS {
            inputs = Some(Value::Object(
                receipt.result.metadata.0.clone().into_iter().collect(),
            ));
        }
        let grant = receipt
            .determining_policies
            .iter()
            .find_map(|p| p.strip_prefix("grant."))
            .map(str::to_owned);
        let approval = (receipt.decided_by.kind == DecidedByKind::Approval)
            .then(|| approval_of(&receipt, home.as_ref(), ring, run_id.as_deref()));
        timeline.push(Entry {
            line,
            receipt: *receipt,
            grant,
            approval,
        });
    }
    let unsigned = std::fs::read(journal.with_file_name("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|run| {
            let text = |k: &str| run.get(k).and_then(Value::as_str).map(str::to_owned);
            Unsigned {
                note: UNSIGNED_NOTE,
                status: text("status"),
                stop_reason: text("stop_reason"),
                ended_at: text("ended_at"),
            }
        });
    let closing = timeline
        .iter()
        .rev()
        .find(|e| e.receipt.capability == craik_host::run::driver::RUN_CLOSED)
        .or_else(|| {
            timeline
                .last()
                .filter(|e| e.receipt.capability == craik_host::run::driver::RUN_PARKED)
        });
    let status = closing.and_then(|e| {
        Some(SignedStatus {
            status: meta(&e.receipt, "status")?.to_owned(),
            reason: e.receipt.reason.clone(),
            receipt: e.receipt.id.clone(),
            may_continue: e.receipt.capability == craik_host::run::driver::RUN_PARKED,
        })
    });
    Ok(RunAudit {
        journal: journal.display().to_string(),
        status,
        run_id,
        valid: report.is_valid(),
        verification: report,
        policy_sets,
        inputs,
        timeline,
        unsigned,
    })
}

/// The verified review behind an approval-decided receipt (`by` = `user:x via approval_id`).
fn approval_of(
    receipt: &ReceiptPayload,
    home: Option<&Home>,
    ring: &KeyRing,
    run_id: Option<&str>,
) -> ApprovalAudit {
    // A review the run picked up (`approval.review`) names its approval as its action.
    let review_receipt = receipt.capability == craik_host::run::driver::APPROVAL_REVIEW;
    let (approver, id) = if review_receipt {
        (
            receipt.decided_by.by.as_str(),
            receipt.action.as_deref().unwrap_or_default(),
        )
    } else {
        receipt
            .decided_by
            .by
            .rsplit_once(" via ")
            .map_or((receipt.decided_by.by.as_str(), ""), |(a, i)| (a, i))
    };
    let mut audit = ApprovalAudit {
        id: id.to_owned(),
        approver: approver.to_owned(),
        verified: false,
        denied: review_receipt && receipt.decision != craik_kernel::Decision::Allow,
        reason: None,
        reviewed_at: None,
        expires_at: None,
        problem: None,
    };
    let review = match (home, run_id) {
        (Some(home), Some(run)) if !id.is_empty() && review_receipt => {
            craik_host::run::approvals::decided_review(home, ring, id, run)
                .filter(|r| r.approved == (receipt.decision == craik_kernel::Decision::Allow))
        }
        (Some(home), Some(run)) if !id.is_empty() => {
            craik_host::run::approvals::signed_review(home, ring, id, run)
        }
        _ => None,
    };
    match review {
        Some(r) if r.approved_by == approver && r.request_hash == receipt.request_hash => {
            audit.verified = true;
            audit.reason = Some(r.reason);
            audit.reviewed_at = Some(r.reviewed_at);
            audit.expires_at = r.expires_at.map(|t| t.to_string());
        }
        Some(_) => {
            audit.problem = Some("the review journal names another approver or request".to_owned());
        }
        None => {
            audit.problem = Some(format!(
                "no verified review journal (reviews/{id}/) names this run"
            ));
        }
    }
    audit
}

/// `action_<step>_<k>` → step (the host's action ids carry the step that proposed them).
fn step_of(action: Option<&str>) -> Option<u64> {
    let rest = action?.strip_prefix("action_")?;
    rest.split('_').next()?.parse().ok()
}

fn meta<'a>(receipt: &'a ReceiptPayload, key: &str) -> Option<&'a str> {
    receipt.result.metadata.0.get(key).and_then(Value::as_str)
}

/// A receipt's verdict (`allow`, `deny [shadow]`, ...) and reason, or an outcome's status
/// and summary.
fn verdict(r: &ReceiptPayload) -> String {
    if r.decided_by.kind == DecidedByKind::Outcome {
        return format!("outcome {}: {}", r.result.status.as_str(), r.result.summary);
    }
    let shadow = if r.mode == craik_kernel::Mode::Shadow {
        " [shadow]"
    } else {
        ""
    };
    format!(
        "{}{shadow} — {}",
        craik_host::policytest::decision_name(r.decision),
        r.reason
    )
}

/// What decided a receipt.
fn decided_by(r: &ReceiptPayload) -> String {
    match r.decided_by.kind {
        DecidedByKind::Policy => format!("policy {}", r.determining_policies.join(", ")),
        DecidedByKind::Approval => format!("approval of {}", r.decided_by.by),
        DecidedByKind::Default => "default (no policy permitted it)".to_owned(),
        DecidedByKind::Kernel => "the kernel".to_owned(),
        DecidedByKind::Outcome => "outcome".to_owned(),
        DecidedByKind::Operator => format!("operator {}", r.decided_by.by),
    }
}

fn approval_line(a: &ApprovalAudit) -> String {
    if a.verified {
        format!(
            "{} by {} via {}: \"{}\" (signed review {}, expires {})",
            if a.denied { "denied" } else { "approved" },
            a.approver,
            a.id,
            a.reason.as_deref().unwrap_or_default(),
            a.reviewed_at.as_deref().unwrap_or("?"),
            a.expires_at.as_deref().unwrap_or("never")
        )
    } else {
        format!(
            "UNVERIFIED approval {} by {}: {}",
            a.id,
            a.approver,
            a.problem.as_deref().unwrap_or_default()
        )
    }
}

fn what(r: &ReceiptPayload) -> String {
    let op = meta(r, "operation")
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    format!("{}{op} {}", r.capability, r.target)
}

fn human(out: &mut Out, report: &Audit) -> Result<(), Failure> {
    if let Some(check) = &report.ledger {
        out.line(format_args!(
            "audit of the home ledger {}",
            check.ledger.display()
        ))?;
        match &check.report {
            Some(r) if check.is_valid() => out.line(format_args!(
                "  ledger      valid: {} entries ({} recorded by `craik ledger rebuild`), every journal of the home named and ending at its recorded root",
                r.receipts, check.rebuilt
            ))?,
            _ => {
                for p in &check.problems {
                    out.line(format_args!(
                        "  ledger      INVALID: {}: {}: {}",
                        p.journal.display(),
                        p.what,
                        p.why
                    ))?;
                }
            }
        }
    }
    for run in &report.runs {
        out.line(format_args!("audit of {}", run.journal))?;
        let v = &run.verification;
        match &v.failure {
            None => out.line(format_args!(
                "  journal     valid, {}: {} receipts, {} checkpoints (keys {})",
                if v.closed { "closed" } else { "open" },
                v.receipts,
                v.checkpoints,
                report.trusted_keys.join(", ")
            ))?,
            Some(f) if BOUND_CHECKS.contains(&f.what.as_str()) => out.line(format_args!(
                "  journal     INVALID at line {}: {}: {} — every signature verified; all {} receipt(s) are shown",
                f.line, f.what, f.why, run.timeline.len()
            ))?,
            Some(f) => out.line(format_args!(
                "  journal     INVALID at line {}: {}: {} — only the {} receipt(s) before it are shown",
                f.line, f.what, f.why, run.timeline.len()
            ))?,
        }
        out.line(format_args!(
            "  run         {}",
            run.run_id.as_deref().unwrap_or("?")
        ))?;
        out.line(format_args!(
            "  policy set  {}{}",
            run.policy_sets.join(", "),
            match &report.expected_policy_set {
                Some(_) if run.valid => " (matches the --policies/--custom bundle)",
                Some(_) => "",
                None => " (not compared: pass --policies/--custom)",
            }
        ))?;
        if let Some(Value::Object(inputs)) = &run.inputs {
            let h = |k: &str| inputs.get(k).and_then(Value::as_str).unwrap_or("?");
            out.line(format_args!(
                "  inputs      inputs {}, grants {}{}, envelope {}, intent {} (runner {})",
                h("inputs_sha256"),
                h("grants_sha256"),
                match &report.expected_grants {
                    Some(_) if run.valid => " (matches --grants)",
                    _ => "",
                },
                h("envelope_sha256"),
                h("intent_sha256"),
                h("runner")
            ))?;
        }
        match (&run.status, &run.unsigned) {
            (Some(s), _) => out.line(format_args!(
                "  status      {} — {} (signed: {}{})",
                s.status,
                s.reason,
                s.receipt,
                if s.may_continue {
                    "; parked, may continue once its approval is decided"
                } else {
                    ", the run's closing receipt"
                }
            ))?,
            (None, Some(u)) => out.line(format_args!(
                "  status      {} — {} [NOT SIGNED: {}]",
                u.status.as_deref().unwrap_or("?"),
                u.stop_reason.as_deref().unwrap_or("-"),
                u.note
            ))?,
            (None, None) => {}
        }
        for entry in &run.timeline {
            let r = &entry.receipt;
            let step = step_of(r.action.as_deref())
                .map(|s| format!("step {s} "))
                .unwrap_or_default();
            let action = r
                .action
                .as_deref()
                .map(|a| format!("{a} "))
                .unwrap_or_default();
            out.line(format_args!(
                "  #{:<4} {}  {step}{action}{}",
                r.seq,
                r.created_at,
                what(r)
            ))?;
            let grant = entry
                .grant
                .as_deref()
                .map(|g| format!(" [grant {g}]"))
                .unwrap_or_default();
            let r = &entry.receipt;
            let by = if r.decided_by.kind == DecidedByKind::Outcome {
                String::new()
            } else {
                format!(" (by {})", decided_by(r))
            };
            out.line(format_args!("        {}{by}{grant}", verdict(r)))?;
            // Which command changed which file: the signed list of an outcome's file changes.
            for f in r
                .result
                .metadata
                .0
                .get("files")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default();
                let hash = match field("sha256") {
                    "" => String::new(),
                    h => format!(" {h}"),
                };
                let forbidden = match field("forbidden") {
                    "" => String::new(),
                    why => format!(
                        " FORBIDDEN ({why}; {})",
                        if f.get("restored").and_then(Value::as_bool) == Some(true) {
                            "restored"
                        } else {
                            "NOT restored"
                        }
                    ),
                };
                out.line(format_args!(
                    "        file {} {}{hash}{forbidden}",
                    field("change"),
                    craik_contracts::one_line(field("path"))
                ))?;
            }
            if let Some(a) = &entry.approval {
                out.line(format_args!("        {}", approval_line(a)))?;
            }
        }
    }
    Ok(())
}

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

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #111; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
.invalid { color: #a00; font-weight: bold; } .valid { color: #060; font-weight: bold; }
.unsigned { background: #fff4d6; } .badge { font-size: 11px; padding: 1px 4px; border: 1px solid #b80; color: #850; }
.deny { color: #a00; } .requires_approval { color: #a60; } .allow { color: #060; }
";

/// HTML text: runner-influenced strings are made one line (controls and bidi overrides
/// escaped), then HTML-escaped.
fn esc(text: &str) -> String {
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

/// A self-contained page (no external resource; CSP forbids any).
fn html(report: &Audit) -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()));
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{hash}'\">\
         <title>Craik audit</title><style>{STYLE}</style></head><body>\
         <h1>Craik audit</h1>\
         <p>Every row below comes from a receipt whose ed25519 signature, hash chain and \
         checkpoints verified with the trusted key(s) <code>{}</code>, or from a verified \
         review journal. Cells marked <span class=\"badge\">not signed</span> are not covered \
         by any signature. This page itself is not signed: re-run <code>craik audit</code> or \
         <code>craik receipts verify</code> to check.</p>\
         <p><label>Filter: <input id=\"filter\" type=\"search\"></label> <span id=\"shown\"></span></p>",
        esc(&report.trusted_keys.join(", "))
    );
    if let Some(check) = &report.ledger {
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
    for run in &report.runs {
        run_html(&mut h, report, run);
    }
    let _ = writeln!(h, "<script>{SCRIPT}</script></body></html>");
    h
}

fn run_html(h: &mut String, report: &Audit, run: &RunAudit) {
    let v = &run.verification;
    let _ = write!(
        h,
        "<h2>Run <code>{}</code></h2><table class=\"facts\">",
        esc(run.run_id.as_deref().unwrap_or("?"))
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
            if BOUND_CHECKS.contains(&f.what.as_str()) {
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
    let compared = match &report.expected_policy_set {
        Some(_) if run.valid => " — matches the bundle given",
        Some(_) => "",
        None => " — not compared (pass --policies/--custom)",
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
    if let Some(s) = &run.status {
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
    } else if let Some(u) = &run.unsigned {
        let _ = write!(
            h,
            "<tr class=\"unsigned\"><th>status</th><td>{} — {} <span class=\"badge\">not signed</span> ({})</td></tr>",
            esc(u.status.as_deref().unwrap_or("?")),
            esc(u.stop_reason.as_deref().unwrap_or("-")),
            esc(u.note)
        );
    }
    let _ = write!(
        h,
        "</table><table class=\"timeline\"><thead><tr><th>seq</th><th>time (UTC)</th><th>step</th>\
         <th>action</th><th>capability / operation</th><th>target</th><th>verdict / outcome</th>\
         <th>decided by</th><th>grant</th><th>approval</th></tr></thead><tbody>"
    );
    for entry in &run.timeline {
        entry_html(h, entry);
    }
    let _ = write!(h, "</tbody></table>");
}

fn entry_html(h: &mut String, entry: &Entry) {
    let r = &entry.receipt;
    let class = if r.decided_by.kind == DecidedByKind::Outcome {
        "outcome"
    } else {
        craik_host::policytest::decision_name(r.decision)
    };
    let (verdict, by) = (verdict(r), decided_by(r));
    let approval = entry
        .approval
        .as_ref()
        .map(approval_line)
        .unwrap_or_default();
    let _ = write!(
        h,
        "<tr class=\"receipt\" id=\"{}\"><td>{}</td><td class=\"mono\">{}</td><td>{}</td>\
         <td class=\"mono\">{}</td><td>{}{}</td><td class=\"mono\">{}</td><td class=\"{class}\">{}</td>\
         <td class=\"mono\">{}</td><td>{}</td><td>{}</td></tr>",
        esc(&r.id),
        r.seq,
        esc(&r.created_at),
        step_of(r.action.as_deref())
            .map(|s| s.to_string())
            .unwrap_or_default(),
        esc(r.action.as_deref().unwrap_or_default()),
        esc(&r.capability),
        meta(r, "operation")
            .map(|o| format!(" / {}", esc(o)))
            .unwrap_or_default(),
        esc(&r.target),
        esc(&verdict),
        esc(&by),
        esc(entry.grant.as_deref().unwrap_or_default()),
        esc(&approval),
    );
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

    #[test]
    fn the_step_comes_from_the_host_action_id() {
        assert_eq!(step_of(Some("action_5_0")), Some(5));
        assert_eq!(step_of(Some("memprop_x_2_0")), None);
        assert_eq!(step_of(Some("action_x")), None);
        assert_eq!(step_of(None), None);
    }
}
