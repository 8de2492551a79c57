//! `craik bench receipts`: the cost of signing, chaining and verifying receipts, as rates and
//! as ratios against signing alone, all measured in the same run.

use std::hint::black_box;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

use craik_contracts::{Object, PolicyProfile, ReceiptResult, ReceiptStatus};
use craik_kernel::{
    DecidedBy, DecidedByKind, Decision, Ed25519Signer, JournalWriter, KeyRing, Mode,
    RECEIPT_PAYLOAD_TYPE, ReceiptDraft, Signer, VerifyOptions, pae, verify_journal_with,
};
use serde::Serialize;

use crate::cmd::keys::read_signer;
use crate::exit::{Exit, Failure};
use crate::files::write_atomic;
use crate::output::{Format, Out};

#[derive(Serialize)]
struct Result {
    receipts: u64,
    journal_bytes: usize,
    sign_only_per_s: f64,
    sign_chain_append_per_s: f64,
    append_vs_sign_only: f64,
    verify_one_by_one_per_s: f64,
    verify_batch_per_s: f64,
    verify_parallel_per_s: f64,
    threads: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    append_with_fsync_per_s: Option<f64>,
    batch_vs_one_by_one: f64,
    parallel_vs_one_by_one: f64,
}

fn draft(n: u64) -> ReceiptDraft {
    ReceiptDraft {
        task_id: "task_bench".into(),
        actor: "runner_bench".into(),
        capability: "repo.write.docs".into(),
        target: format!("docs/page-{n}.md"),
        policy_profile: PolicyProfile::TrustedLocal,
        fail_open: false,
        reason: "granted by grant_bench".into(),
        result: ReceiptResult {
            status: ReceiptStatus::Passed,
            summary: "wrote the page".into(),
            metadata: Object::new(),
        },
        redacted: true,
        policy_set: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
            .into(),
        request_hash: format!("sha256:{n:064x}"),
        decision: Decision::Allow,
        determining_policies: vec!["grant.grant_bench".into()],
        decided_by: DecidedBy {
            kind: DecidedByKind::Policy,
            by: String::new(),
        },
        mode: Mode::Enforce,
        action: None,
    }
}

/// What `craik bench receipts` was asked.
#[derive(Debug)]
pub(crate) struct ReceiptsArgs<'a> {
    pub(crate) count: u64,
    pub(crate) key: Option<&'a Path>,
    pub(crate) file: Option<&'a Path>,
    pub(crate) checkpoint_every: u64,
    pub(crate) run_dir: Option<&'a Path>,
}

pub(crate) fn receipts(
    out: &mut Out,
    format: Format,
    args: &ReceiptsArgs<'_>,
) -> std::result::Result<Exit, Failure> {
    let ReceiptsArgs {
        count,
        key,
        file,
        checkpoint_every,
        run_dir,
    } = *args;
    if count == 0 {
        return Err(Failure::usage("--count must be at least 1"));
    }
    if let Some(file) = file.filter(|f| f.exists()) {
        return Err(Failure::usage(format!(
            "{}: already exists; refusing to overwrite a journal",
            file.display()
        )));
    }
    let signer = match key {
        Some(path) => read_signer(path)?,
        None => {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed)
                .map_err(|e| Failure::internal(format!("no randomness: {e}")))?;
            let signer = Ed25519Signer::from_seed(&seed);
            zeroize::Zeroize::zeroize(&mut seed);
            signer
        }
    };
    let progress = std::io::stderr().is_terminal() && format == Format::Human;
    let now = time::OffsetDateTime::now_utc();

    // Baseline: signing payload-sized messages alone.
    let sample = pae(RECEIPT_PAYLOAD_TYPE, &[b'x'; 900]);
    let started = Instant::now();
    for _ in 0..count {
        black_box(signer.sign(black_box(&sample)));
    }
    let sign_only = count as f64 / started.elapsed().as_secs_f64();

    // With the run's durability: one append + fsync per receipt, as the governed loop does.
    let fsynced = match run_dir {
        None => None,
        Some(dir) => {
            let mut journal_file = crate::journal::JournalFile::create(dir).map_err(|e| {
                Failure::usage(format!("{}: cannot create the journal: {e}", dir.display()))
            })?;
            let mut writer = JournalWriter::new("run_bench_fsync", checkpoint_every);
            let started = Instant::now();
            for n in 0..count {
                let line = writer
                    .append(draft(n), now, &signer)
                    .map_err(|e| Failure::internal(e.to_string()))?;
                journal_file.append(&line).map_err(|e| {
                    Failure::internal(format!("{}: {e}", journal_file.path().display()))
                })?;
            }
            let close = writer
                .close(now, &signer)
                .map_err(|e| Failure::internal(e.to_string()))?;
            journal_file.append(&close).map_err(|e| {
                Failure::internal(format!("{}: {e}", journal_file.path().display()))
            })?;
            Some(count as f64 / started.elapsed().as_secs_f64())
        }
    };
    // Sign + chain + append (to memory: no fsync).
    let mut writer = JournalWriter::new("run_bench", checkpoint_every);
    let mut journal = Vec::with_capacity(usize::try_from(count).unwrap_or(0).saturating_mul(1300));
    let started = Instant::now();
    for n in 0..count {
        let line = writer
            .append(draft(n), now, &signer)
            .map_err(|e| Failure::internal(e.to_string()))?;
        journal.extend_from_slice(&line);
        if progress && n % 100_000 == 0 && n > 0 {
            out.progress(format_args!("{n}/{count} receipts signed"))?;
        }
    }
    journal.extend(
        writer
            .close(now, &signer)
            .map_err(|e| Failure::internal(e.to_string()))?,
    );
    let appended = count as f64 / started.elapsed().as_secs_f64();

    let mut ring = KeyRing::new();
    ring.add(&signer.public_key()).map_err(Failure::internal)?;
    let threads = crate::cmd::receipts::threads();
    let rate = |threads: usize, batch: bool| -> std::result::Result<f64, Failure> {
        let started = Instant::now();
        let options = VerifyOptions {
            policy_set: None,
            threads,
            batch,
            allow_open: false,
        };
        let report = verify_journal_with(&journal, &ring, options, &mut |_, _| {});
        let per_s = count as f64 / started.elapsed().as_secs_f64();
        if report.is_valid() {
            Ok(per_s)
        } else {
            Err(Failure::internal(format!(
                "the benchmark's own journal failed verification: {:?}",
                report.failure
            )))
        }
    };
    let one_by_one = rate(1, false)?;
    let batched = rate(1, true)?;
    let parallel = rate(threads, true)?;
    if let Some(file) = file {
        write_atomic(file, &journal)
            .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", file.display())))?;
    }
    let result = Result {
        receipts: count,
        journal_bytes: journal.len(),
        sign_only_per_s: sign_only,
        sign_chain_append_per_s: appended,
        append_vs_sign_only: appended / sign_only,
        verify_one_by_one_per_s: one_by_one,
        verify_batch_per_s: batched,
        verify_parallel_per_s: parallel,
        threads,
        append_with_fsync_per_s: fsynced,
        batch_vs_one_by_one: batched / one_by_one,
        parallel_vs_one_by_one: parallel / one_by_one,
    };
    match format {
        Format::Json | Format::Junit => out.json(&result)?,
        Format::Human => {
            if progress {
                out.end_progress()?;
            }
            out.line(format_args!(
                "{count} receipts, {} bytes, one core, no fsync",
                result.journal_bytes
            ))?;
            out.line(format_args!(
                "  sign only            {:>10.0}/s  (baseline)",
                sign_only
            ))?;
            out.line(format_args!(
                "  sign+chain+append    {:>10.0}/s  ({:.2}x sign only)",
                appended, result.append_vs_sign_only
            ))?;
            if let Some(rate) = fsynced {
                out.line(format_args!(
                    "  ... + fsync each    {:>10.0}/s  ({:.2}x without fsync; 1 fsync per receipt)",
                    rate,
                    rate / appended
                ))?;
            }
            out.line(format_args!(
                "  verify one by one    {:>10.0}/s  (baseline for verification)",
                one_by_one
            ))?;
            out.line(format_args!(
                "  verify batched       {:>10.0}/s  ({:.2}x one by one)",
                batched, result.batch_vs_one_by_one
            ))?;
            out.line(format_args!(
                "  verify, {threads} threads   {:>10.0}/s  ({:.2}x one by one)",
                parallel, result.parallel_vs_one_by_one
            ))?;
            if let Some(file) = file {
                out.line(format_args!(
                    "journal written to {} (key {})",
                    file.display(),
                    signer.key_id()
                ))?;
            }
        }
    }
    Ok(Exit::Ok)
}
