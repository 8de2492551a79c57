//! `craik bench audit`: the cost of `craik audit` against `craik receipts verify` over the
//! same journals, measured in the same run, with the peak resident memory of each.
//!
//! The journals are generated first (signed and chained as runs write them, streamed to
//! disk), then verified, then audited (`--format jsonl`, and the HTML report) in this process
//! with stdout discarded. Peak memory is the process's `VmHWM`, reset before each phase
//! through `/proc/self/clear_refs` (Linux): each phase's own peak, not the generator's.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use craik_contracts::{Object, PolicyProfile, ReceiptResult, ReceiptStatus};
use craik_kernel::{DecidedBy, DecidedByKind, Decision, JournalWriter, Mode, ReceiptDraft};
use serde::Serialize;
use serde_json::json;

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// What `craik bench audit` was asked.
#[derive(Debug)]
pub(crate) struct BenchArgs<'a> {
    pub(crate) count: u64,
    pub(crate) journals: u64,
    /// Keep the generated home here instead of a scratch directory.
    pub(crate) keep: Option<&'a Path>,
    /// Also time the HTML report.
    pub(crate) html: bool,
}

#[derive(Serialize)]
struct BenchResult {
    receipts: u64,
    journals: u64,
    journal_bytes: u64,
    generate_s: f64,
    verify_s: f64,
    verify_per_s: f64,
    verify_max_rss_kb: Option<u64>,
    audit_jsonl_s: f64,
    audit_jsonl_per_s: f64,
    audit_jsonl_max_rss_kb: Option<u64>,
    /// Audit time over verify time (issue 20: at most 2).
    audit_vs_verify: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_html_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_html_max_rss_kb: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    html_bytes: Option<u64>,
    /// Whether each phase's peak was measured on its own (`/proc/self/clear_refs`).
    peaks_reset: bool,
}

/// A mix like a home's: allowed writes with their outcomes (a file changed), reads, denials.
fn draft(n: u64) -> ReceiptDraft {
    let (capability, decision, kind, policies) = match n % 8 {
        0..=2 => (
            "repo.read",
            Decision::Allow,
            DecidedByKind::Policy,
            vec!["profile.read"],
        ),
        3 => (
            "repo.write.docs",
            Decision::Allow,
            DecidedByKind::Policy,
            vec!["grant.grant_bench"],
        ),
        4 => (
            "repo.write.docs",
            Decision::Allow,
            DecidedByKind::Outcome,
            vec![],
        ),
        5 => (
            "shell.test",
            Decision::Allow,
            DecidedByKind::Policy,
            vec!["grant.grant_bench"],
        ),
        6 => (
            "shell.test",
            Decision::Allow,
            DecidedByKind::Outcome,
            vec![],
        ),
        _ => (
            "git.force_push",
            Decision::Deny,
            DecidedByKind::Policy,
            vec!["strict.no_force_push"],
        ),
    };
    let mut metadata = Object::new();
    metadata.0.insert("operation".into(), json!("patch"));
    if kind == DecidedByKind::Outcome {
        metadata.0.insert(
            "files".into(),
            json!([{"change": "changed", "path": format!("docs/page-{n}.md"),
                    "sha256": format!("sha256:{n:064x}")}]),
        );
    }
    ReceiptDraft {
        task_id: "task_bench".into(),
        actor: "runner_bench".into(),
        capability: capability.into(),
        target: format!("docs/page-{n}.md"),
        policy_profile: PolicyProfile::Strict,
        fail_open: false,
        reason: "decided by the bench's policy".into(),
        result: ReceiptResult {
            status: if decision == Decision::Deny {
                ReceiptStatus::Denied
            } else {
                ReceiptStatus::Passed
            },
            summary: "bench".into(),
            metadata,
        },
        redacted: true,
        policy_set: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
            .into(),
        request_hash: format!("sha256:{n:064x}"),
        decision,
        determining_policies: policies.into_iter().map(str::to_owned).collect(),
        decided_by: DecidedBy {
            kind,
            by: String::new(),
        },
        mode: Mode::Enforce,
        action: Some(format!("action_{}_0", n / 4)),
    }
}

/// Resets this process's peak RSS (`VmHWM`); false where Linux does not allow it.
pub(crate) fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// This process's peak RSS in KiB since the last reset.
pub(crate) fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Removes the generated home however the bench ends (unless kept).
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub(crate) fn audit(out: &mut Out, format: Format, args: &BenchArgs<'_>) -> Result<Exit, Failure> {
    if args.count == 0 || args.journals == 0 || args.journals > args.count {
        return Err(Failure::usage(
            "--count and --journals must be at least 1, with no more journals than receipts",
        ));
    }
    let root = match args.keep {
        Some(dir) => {
            if dir.exists() {
                return Err(Failure::usage(format!(
                    "--keep {}: already exists; refusing to write into it",
                    dir.display()
                )));
            }
            dir.to_owned()
        }
        None => std::env::temp_dir().join(format!("craik-bench-audit-{}", std::process::id())),
    };
    let _scratch = Scratch(args.keep.is_none().then(|| root.clone()));
    let runs = root.join("runs");
    std::fs::create_dir_all(&runs)
        .map_err(|e| Failure::usage(format!("{}: cannot create: {e}", runs.display())))?;
    // The key beside, not in `keys/`: the directory is no Craik home (one without a ledger
    // fails every journal it holds), only journals to verify.
    let (private, public, _) = craik_host::keys::create_pair(&root.join("bench-keys"))?;
    let signer = crate::cmd::keys::read_signer(&private)?;

    // Generate: journals named like runs' directories but not `run_*`, so no run-bound check
    // (inputs.json, reviews) applies; every line is signed and chained as a run's.
    let started = Instant::now();
    let now = time::OffsetDateTime::now_utc();
    let mut bytes = 0u64;
    let per = args.count / args.journals;
    for j in 0..args.journals {
        let n = if j + 1 == args.journals {
            args.count - per * (args.journals - 1)
        } else {
            per
        };
        let dir = runs.join(format!("bench_{j:05}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Failure::usage(format!("{}: cannot create: {e}", dir.display())))?;
        let path = dir.join(craik_host::journal::JOURNAL_NAME);
        let file = std::fs::File::create(&path)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut writer = JournalWriter::new(&format!("run_bench_{j:05}"), 1000);
        let io = |e: std::io::Error| Failure::usage(format!("{}: {e}", path.display()));
        for k in 0..n {
            let line = writer
                .append(draft(k), now, &signer)
                .map_err(|e| Failure::internal(e.to_string()))?;
            bytes += line.len() as u64;
            file.write_all(&line).map_err(io)?;
        }
        let line = writer
            .close(now, &signer)
            .map_err(|e| Failure::internal(e.to_string()))?;
        bytes += line.len() as u64;
        file.write_all(&line).map_err(io)?;
        file.flush().map_err(io)?;
    }
    let generate_s = started.elapsed().as_secs_f64();
    let keys = [public];
    let runs_arg = [runs.clone()];

    // Verify, as `craik receipts verify RUNS --key PUB`.
    let peaks_reset = reset_peak();
    let started = Instant::now();
    let verified = crate::cmd::receipts::verify(
        &mut Out::discard(),
        Format::Json,
        &crate::cmd::receipts::VerifyArgs {
            paths: &runs_arg,
            keys: &keys,
            home: &root,
            policies: None,
            custom: &[],
            grants: &[],
            allow_open: false,
        },
    )?;
    let verify_s = started.elapsed().as_secs_f64();
    let verify_max_rss_kb = peak_kb();

    let target = runs.display().to_string();
    let filters = super::Filters::default();
    let jsonl = super::AuditArgs {
        target: &target,
        home: &root,
        keys: &keys,
        policies: None,
        custom: &[],
        grants: &[],
        html: None,
        filters: &filters,
        summary: None,
        jsonl: true,
    };
    // Audit, as `craik audit RUNS --key PUB --format jsonl`.
    reset_peak();
    let started = Instant::now();
    let audited = super::audit(&mut Out::discard(), Format::Json, &jsonl)?;
    let audit_jsonl_s = started.elapsed().as_secs_f64();
    let audit_jsonl_max_rss_kb = peak_kb();

    // And with the HTML report.
    let mut html = None;
    if args.html {
        let page = root.join("audit.html");
        reset_peak();
        let started = Instant::now();
        super::audit(
            &mut Out::discard(),
            Format::Json,
            &super::AuditArgs {
                html: Some(&page),
                ..jsonl
            },
        )?;
        let seconds = started.elapsed().as_secs_f64();
        html = Some((
            seconds,
            peak_kb(),
            std::fs::metadata(&page).map(|m| m.len()).unwrap_or(0),
        ));
    }
    if verified != Exit::Ok || audited != Exit::Ok {
        return Err(Failure::internal(
            "the benchmark's own journals failed verification or audit",
        ));
    }
    let result = BenchResult {
        receipts: args.count,
        journals: args.journals,
        journal_bytes: bytes,
        generate_s,
        verify_s,
        verify_per_s: args.count as f64 / verify_s,
        verify_max_rss_kb,
        audit_jsonl_s,
        audit_jsonl_per_s: args.count as f64 / audit_jsonl_s,
        audit_jsonl_max_rss_kb,
        audit_vs_verify: audit_jsonl_s / verify_s,
        audit_html_s: html.map(|h| h.0),
        audit_html_max_rss_kb: html.and_then(|h| h.1),
        html_bytes: html.map(|h| h.2),
        peaks_reset,
    };
    let rss =
        |kb: Option<u64>| kb.map_or_else(|| "?".to_owned(), |kb| format!("{} MiB", kb / 1024));
    match format {
        Format::Json | Format::Junit => out.json(&result)?,
        Format::Human => {
            out.line(format_args!(
                "{} receipts in {} journals, {} bytes (generated in {:.1} s)",
                result.receipts, result.journals, result.journal_bytes, result.generate_s
            ))?;
            out.line(format_args!(
                "  receipts verify     {:>8.2} s  {:>9.0}/s  max RSS {}  (baseline)",
                verify_s,
                result.verify_per_s,
                rss(verify_max_rss_kb)
            ))?;
            out.line(format_args!(
                "  audit --format jsonl {:>7.2} s  {:>9.0}/s  max RSS {}  ({:.2}x verify)",
                audit_jsonl_s,
                result.audit_jsonl_per_s,
                rss(audit_jsonl_max_rss_kb),
                result.audit_vs_verify
            ))?;
            if let Some((seconds, kb, bytes)) = html {
                out.line(format_args!(
                    "  audit --html        {:>8.2} s  {:>9} B   max RSS {}  ({:.2}x verify)",
                    seconds,
                    bytes,
                    rss(kb),
                    seconds / verify_s
                ))?;
            }
            if !peaks_reset {
                out.line("  (max RSS is the process's peak since it started: /proc/self/clear_refs refused)")?;
            }
            if let Some(dir) = args.keep {
                out.line(format_args!("home kept in {}", dir.display()))?;
            }
        }
    }
    Ok(Exit::Ok)
}
