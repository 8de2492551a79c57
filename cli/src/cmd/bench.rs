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
use craik_host::run::store::io_at;

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
    /// Receipts verified per CPU second of the process (every thread, user + system) while
    /// verifying: one core's rate, steadier than wall time on a shared machine. Medians of
    /// three alternating rounds.
    verify_one_by_one_per_core_s: f64,
    verify_batch_per_core_s: f64,
    verify_parallel_per_core_s: f64,
    /// Issue 20's bound on `verify_batch_per_core_s`.
    verify_per_core_target: f64,
    /// `verify_batch_per_core_s` / `verify_one_by_one_per_core_s`: against the single-verify
    /// path, in the same run.
    batch_vs_one_by_one_per_core: f64,
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
            let mut journal_file = craik_host::journal::JournalFile::create(dir).map_err(|e| {
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
    // Sign + chain + append to a scratch file (no fsync), verified from it in chunks: memory
    // stays flat whatever --count (outside testing round 17 N9: the journal held in memory
    // took 561 MB at 200 000 receipts, 2.7 GB at the million an audit claim is about).
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| Failure::internal(format!("no randomness: {e}")))?;
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "craik-bench-receipts-{}",
        craik_kernel::to_hex(&random)
    )));
    std::fs::create_dir(&scratch.0).map_err(io_at(&scratch.0))?;
    let journal_path = scratch.0.join("receipts.jsonl");
    let mut writer = JournalWriter::new("run_bench", checkpoint_every);
    let mut journal = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&journal_path).map_err(io_at(&journal_path))?,
    );
    let mut journal_bytes = 0usize;
    let started = Instant::now();
    for n in 0..count {
        let line = writer
            .append(draft(n), now, &signer)
            .map_err(|e| Failure::internal(e.to_string()))?;
        std::io::Write::write_all(&mut journal, &line).map_err(io_at(&journal_path))?;
        journal_bytes += line.len();
        if progress && n % 100_000 == 0 && n > 0 {
            out.progress(format_args!("{n}/{count} receipts signed"))?;
        }
    }
    let close = writer
        .close(now, &signer)
        .map_err(|e| Failure::internal(e.to_string()))?;
    std::io::Write::write_all(&mut journal, &close).map_err(io_at(&journal_path))?;
    journal_bytes += close.len();
    std::io::Write::flush(&mut journal).map_err(io_at(&journal_path))?;
    drop(journal);
    let appended = count as f64 / started.elapsed().as_secs_f64();

    let mut ring = KeyRing::new();
    ring.add(&signer.public_key()).map_err(Failure::internal)?;
    let threads = crate::cmd::receipts::threads();
    // (receipts per wall second, receipts per CPU second)
    let rate = |threads: usize, batch: bool| -> std::result::Result<(f64, f64), Failure> {
        let cpu = craik_host::confine::cpu_time_us();
        let started = Instant::now();
        let options = VerifyOptions {
            policy_set: None,
            threads,
            batch,
            allow_open: false,
        };
        let mut verifier = craik_kernel::Verifier::new(&ring, options);
        let mut file = std::fs::File::open(&journal_path).map_err(io_at(&journal_path))?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = std::io::Read::read(&mut file, &mut buf).map_err(io_at(&journal_path))?;
            if n == 0 || !verifier.feed(buf.get(..n).unwrap_or_default()) {
                break;
            }
        }
        let report = verifier.finish();
        let per_s = count as f64 / started.elapsed().as_secs_f64();
        let cpu_s = ((craik_host::confine::cpu_time_us() - cpu) / 1e6).max(1e-6);
        if report.is_valid() {
            Ok((per_s, count as f64 / cpu_s))
        } else {
            Err(Failure::internal(format!(
                "the benchmark's own journal failed verification: {:?}",
                report.failure
            )))
        }
    };
    // Three rounds, the three ways alternating (a busy machine slows all alike); medians.
    let (mut one, mut bat, mut par) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        one.push(rate(1, false)?);
        bat.push(rate(1, true)?);
        par.push(rate(threads, true)?);
    }
    let wall = |v: &[(f64, f64)]| median(&mut v.iter().map(|r| r.0).collect::<Vec<_>>());
    let core = |v: &[(f64, f64)]| median(&mut v.iter().map(|r| r.1).collect::<Vec<_>>());
    let (one_by_one, batched, parallel) = (wall(&one), wall(&bat), wall(&par));
    let (one_core, batch_core, parallel_core) = (core(&one), core(&bat), core(&par));
    if let Some(file) = file {
        // Copied beside, then renamed: never a partial journal under the name.
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let tmp = file.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        std::fs::copy(&journal_path, &tmp)
            .and_then(|_| std::fs::rename(&tmp, file))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Failure::usage(format!("{}: cannot write: {e}", file.display()))
            })?;
    }
    let result = Result {
        receipts: count,
        journal_bytes,
        sign_only_per_s: sign_only,
        sign_chain_append_per_s: appended,
        append_vs_sign_only: appended / sign_only,
        verify_one_by_one_per_s: one_by_one,
        verify_batch_per_s: batched,
        verify_parallel_per_s: parallel,
        verify_one_by_one_per_core_s: one_core,
        verify_batch_per_core_s: batch_core,
        verify_parallel_per_core_s: parallel_core,
        verify_per_core_target: 40_000.0,
        batch_vs_one_by_one_per_core: batch_core / one_core,
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
                "  verify one by one    {:>10.0}/s  {:>8.0}/s per core  (baseline: the single-verify path)",
                one_by_one, one_core
            ))?;
            out.line(format_args!(
                "  verify batched       {:>10.0}/s  {:>8.0}/s per core  ({:.2}x one by one; {:.2}x per core; target ≥ {:.0} per core: {})",
                batched,
                batch_core,
                result.batch_vs_one_by_one,
                result.batch_vs_one_by_one_per_core,
                result.verify_per_core_target,
                if batch_core >= result.verify_per_core_target {
                    "met"
                } else {
                    "NOT met"
                }
            ))?;
            out.line(format_args!(
                "  verify, {threads} threads   {:>10.0}/s  {:>8.0}/s per core  ({:.2}x one by one)",
                parallel, parallel_core, result.parallel_vs_one_by_one
            ))?;
            out.line(format_args!(
                "  per core = receipts ÷ CPU seconds of the process (all threads, user + system) while verifying; medians of 3 alternating rounds"
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

#[derive(Serialize)]
struct RunResult {
    steps: usize,
    iterations: usize,
    side_effects: usize,
    decisions: usize,
    governed_s: f64,
    ungoverned_s: f64,
    governed_steps_per_s: f64,
    ungoverned_steps_per_s: f64,
    overhead_per_step_us: f64,
    governed_vs_ungoverned: f64,
    fsyncs: u64,
    fsyncs_per_step: f64,
    /// Measured over the whole run (its start and end included) / iterations.
    fsyncs_per_iteration: f64,
    /// Issue 20's bound on `fsyncs_per_step` for this mix.
    fsyncs_per_step_target: f64,
    /// By design (group commit, `docs/runs.md`): a file write's own fsyncs — its decision
    /// receipt and `executing` event committed before it starts, the file's data and its
    /// directory; its outcome receipt rides on the commit before the next runner request.
    fsyncs_per_write_side_effect: u64,
    /// By design: a read has none of its own; its receipts and events ride on the commits.
    fsyncs_per_read: u64,
    journal_valid: bool,
    /// Of `governed_s`: appending the run's entries to the home ledger (started, closed),
    /// in a home whose ledger already names `ledger_prefilled_runs` runs.
    ledger_s: f64,
    ledger_share_of_run: f64,
    ledger_prefilled_runs: usize,
    /// What `runs resume`/`recover` check before they append (issue 31 item 1): the whole
    /// home ledger verified, the run's record read from it, the journal's Merkle leaves
    /// checked against every point the ledger recorded. Median of 3, in the bench home.
    resume_checks_s: f64,
    resume_checks_share_of_run: f64,
    resume_checks_target: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter_steps_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adapter_overhead_per_step_us: Option<f64>,
    /// Commands spawned plainly and confined, in the same run.
    confinement: Confinement,
}

#[derive(Serialize)]
struct Confinement {
    applied: String,
    commands: usize,
    plain_us_per_command: f64,
    confined_us_per_command: f64,
    overhead_us_per_command: f64,
    /// Of the confined time: building the plan in Craik's process (Landlock ruleset, mount
    /// list, filters) before the fork.
    planning_us_per_command: f64,
    /// The same for a sandbox no command before had, whose Landlock ruleset and mount
    /// namespace are made rather than reused.
    built_overhead_us_per_command: f64,
    built_planning_us_per_command: f64,
    /// CPU time (user + system, Craik and its children) per command: steadier than wall
    /// time on a busy machine.
    plain_cpu_us_per_command: f64,
    confined_cpu_us_per_command: f64,
}

/// Spawns `/bin/true` `n` times plainly, `n` times with the same confinement and sandbox a
/// governed command gets (workspace write, HOME/TMPDIR), and `n` times under a sandbox no
/// command had before (its Landlock ruleset and mount namespace made, not reused), alternately: the per-command
/// cost of confinement (medians), measured in the same run.
fn confinement_overhead(
    root: &std::path::Path,
    n: usize,
) -> std::result::Result<Confinement, Failure> {
    let ws = root.join("confined-ws");
    let (home, tmp) = (root.join("confined-home"), root.join("confined-tmp"));
    for dir in [&ws, &home, &tmp] {
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    }
    let sandbox = craik_host::confine::Sandbox::new(
        Vec::new(),
        vec![ws.clone()],
        vec![home, tmp],
        &craik_host::confine::Limits::hiding(vec![root.join("no-home")]),
        craik_host::confine::Network::None,
        false,
    )
    .map_err(Failure::internal)?;
    let program = std::path::Path::new("/bin/true");
    let null = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(io_at(std::path::Path::new("/dev/null")))?;
    let null = std::os::fd::AsFd::as_fd(&null);
    // Plain and confined spawns alternate, so both see the same machine (a busy machine slows
    // both alike); medians, so a stall of either does not count. Both start the way their
    // kind starts in Craik: plain as `std` does (`posix_spawn`), confined as a governed
    // command is (`Sandbox::spawn`: prepared, then `clone(CLONE_VM | CLONE_VFORK)`).
    let spawn = |confined: Option<&craik_host::confine::Sandbox>| -> std::result::Result<(f64, f64, f64), Failure> {
        let cpu = craik_host::confine::cpu_time_us();
        let t = Instant::now();
        let (code, planned) = if let Some(sandbox) = confined {
            let prepared = sandbox
                .prepare(program, "true", &[], &ws, &[])
                .map_err(Failure::internal)?;
            let planned = t.elapsed().as_secs_f64() * 1e6;
            let started = prepared
                .start([null, null, null])
                .map_err(Failure::internal)?;
            let code = craik_host::confine::wait_exit(&started).map_err(Failure::internal)?;
            (code, planned)
        } else {
            let status = std::process::Command::new(program)
                .current_dir(&ws)
                .env_clear()
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .map_err(|e| Failure::internal(format!("/bin/true: {e}")))?;
            (status.code(), 0.0)
        };
        if code != Some(0) {
            return Err(Failure::internal(format!("/bin/true exited {code:?}")));
        }
        Ok((
            t.elapsed().as_secs_f64() * 1e6,
            craik_host::confine::cpu_time_us() - cpu,
            planned,
        ))
    };
    let (mut plain, mut confined, mut planning) = (Vec::new(), Vec::new(), Vec::new());
    let (mut plain_cpu, mut confined_cpu) = (Vec::new(), Vec::new());
    let (mut built, mut built_planning) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (wall, cpu, _) = spawn(None)?;
        plain.push(wall);
        plain_cpu.push(cpu);
        // The same sandbox as the command before: its ruleset and namespace are reused.
        let (wall, cpu, planned) = spawn(Some(&sandbox))?;
        confined.push(wall);
        confined_cpu.push(cpu);
        planning.push(planned);
        // A sandbox no command had (a scratch directory of its own): both are made.
        let fresh = root.join(format!("confined-fresh-{i}"));
        std::fs::create_dir_all(&fresh).map_err(io_at(&fresh))?;
        let other = craik_host::confine::Sandbox::new(
            Vec::new(),
            vec![ws.clone()],
            vec![fresh],
            &craik_host::confine::Limits::hiding(vec![root.join("no-home")]),
            craik_host::confine::Network::None,
            false,
        )
        .map_err(Failure::internal)?;
        let (wall, _, planned) = spawn(Some(&other))?;
        built.push(wall);
        built_planning.push(planned);
    }
    let (plain, confined) = (median(&mut plain), median(&mut confined));
    let built = median(&mut built);
    Ok(Confinement {
        applied: sandbox.describe(),
        commands: n,
        plain_us_per_command: plain,
        confined_us_per_command: confined,
        overhead_us_per_command: confined - plain,
        planning_us_per_command: median(&mut planning),
        built_overhead_us_per_command: built - plain,
        built_planning_us_per_command: median(&mut built_planning),
        plain_cpu_us_per_command: median(&mut plain_cpu),
        confined_cpu_us_per_command: median(&mut confined_cpu),
    })
}

/// The median of `values` (0 for none).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Removes the bench's scratch directory however the bench ends.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bench scenario: per iteration plan, act (one file write and three reads, each decided
/// and receipted), observe, evaluate.
fn bench_scenario(steps: usize) -> craik_contracts::FixtureScenario {
    use craik_contracts::{FixtureStep, NextStep, Phase, ProposedAction, ResultStatus};
    let iterations = steps / 4;
    let step = |phase, summary: String, actions, next| FixtureStep {
        phase,
        status: ResultStatus::Completed,
        summary,
        outputs: Object::new(),
        proposed_actions: actions,
        memory_proposals: Vec::new(),
        diagnostics: Vec::new(),
        next,
        model_steps: Vec::new(),
    };
    let action =
        |id: String, capability: &str, operation: &str, target: String, content| ProposedAction {
            id,
            capability: capability.into(),
            operation: operation.into(),
            target: Some(target),
            argv: None,
            content,
            edits: Vec::new(),
            timeout_ms: None,
            reason: None,
        };
    let mut out = Vec::with_capacity(steps);
    for i in 0..iterations {
        out.push(step(
            Phase::Plan,
            format!("iteration {i}"),
            Vec::new(),
            None,
        ));
        let mut actions = vec![action(
            format!("action_w{i}"),
            "repo.write.docs",
            "write",
            format!("docs/page-{i}.md"),
            Some(format!("# Page {i}\n")),
        )];
        for r in 0..3 {
            actions.push(action(
                format!("action_r{i}_{r}"),
                "repo.read",
                "read",
                "README.md".into(),
                None,
            ));
        }
        out.push(step(Phase::Act, "act".into(), actions, None));
        out.push(step(Phase::Observe, "observe".into(), Vec::new(), None));
        let next = if i + 1 == iterations {
            NextStep::Stop
        } else {
            NextStep::Continue
        };
        out.push(step(
            Phase::Evaluate,
            "evaluate".into(),
            Vec::new(),
            Some(next),
        ));
    }
    craik_contracts::FixtureScenario {
        schema: Default::default(),
        version: Default::default(),
        id: "scenario_bench".into(),
        description: "bench".into(),
        runner_trust: craik_contracts::RunnerTrustLevel::Medium,
        steps: out,
    }
}

/// The same scenario with governance switched off: the fixture runner's answers parsed and
/// their actions performed by the same executors, with no decision, receipt, journal or
/// redaction.
fn ungoverned(
    scenario: &craik_contracts::FixtureScenario,
    workspace: &Path,
) -> std::result::Result<(), Failure> {
    use craik_host::run::{StepRunner, directives};
    let _ = ();
    let ws = craik_host::run::exec::Workspace::open(workspace).map_err(Failure::internal)?;
    let mut runner = craik_host::run::FixtureStepRunner::new(scenario.clone());
    let metadata = craik_host::runners::matrix("fixture")?.runner;
    let now = craik_contracts::Timestamp::new(time::OffsetDateTime::now_utc());
    for (n, s) in scenario.steps.iter().enumerate() {
        let request = craik_contracts::RunnerStepRequest {
            schema: Default::default(),
            version: Default::default(),
            id: format!("runner_step_request_bench_{n}"),
            run_id: "run_bench".into(),
            task_id: "task_bench".into(),
            phase: s.phase,
            runner: metadata.clone(),
            policy_envelope_id: "policy_bench".into(),
            intent_lock_id: None,
            capability_grant_ids: Vec::new(),
            expected_output_schemas: Vec::new(),
            input_prompt: String::new(),
            context: Object(
                [("step".to_owned(), serde_json::json!(n))]
                    .into_iter()
                    .collect(),
            ),
            redaction_required: false,
            created_at: now,
        };
        let mut result = runner
            .step(&request)
            .map_err(|e| Failure::internal(e.to_string()))?;
        let found = directives(&mut result.observed_output).map_err(Failure::internal)?;
        for a in found.actions {
            let target = a.target.unwrap_or_default();
            match a.operation.as_str() {
                "write" => ws
                    .write(&target, a.content.unwrap_or_default().as_bytes(), &a.id)
                    .map_err(|e| Failure::internal(e.to_string()))?,
                _ => {
                    black_box(ws.read_text(&target).map_err(Failure::internal)?);
                }
            }
        }
        black_box(result);
    }
    Ok(())
}

/// `craik bench run`: a governed fixture run of `steps` steps against the same scenario with
/// governance off, measured in the same process.
pub(crate) fn run(
    out: &mut Out,
    format: Format,
    steps: usize,
    adapter: bool,
) -> std::result::Result<Exit, Failure> {
    if steps < 4 || !steps.is_multiple_of(4) {
        return Err(Failure::usage(
            "--steps must be a positive multiple of 4 (plan, act, observe, evaluate)",
        ));
    }
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| Failure::internal(format!("no randomness: {e}")))?;
    let scratch = Scratch(
        std::env::temp_dir().join(format!("craik-bench-{}", craik_kernel::to_hex(&random))),
    );
    let root = &scratch.0;
    let scenario = bench_scenario(steps);
    let scenario_path = root.join("scenario.json");
    let make_ws = |name: &str| -> std::result::Result<std::path::PathBuf, Failure> {
        let ws = root.join(name);
        std::fs::create_dir_all(ws.join("docs")).map_err(io_at(&ws))?;
        std::fs::write(ws.join("README.md"), "# bench\n").map_err(io_at(&ws))?;
        Ok(ws)
    };
    let plain_ws = make_ws("plain")?;
    let scenario_bytes =
        serde_json::to_vec(&scenario).map_err(|e| Failure::internal(e.to_string()))?;
    write_atomic(&scenario_path, &scenario_bytes).map_err(io_at(&scenario_path))?;
    let governed_ws = make_ws("governed")?;
    let in_process = governed_run(
        &root.join("in-process"),
        &governed_ws,
        &scenario_path,
        &scenario_bytes,
        steps,
        Box::new(craik_host::run::FixtureStepRunner::new(scenario.clone())),
    )?;
    let (governed_s, fsyncs, journal_valid, receipts, ledger_s, resume_checks_s) = in_process;
    let through_adapter = if adapter {
        let program = craik_host::runners::shipped("fixture").map_err(Failure::usage)?;
        let spec = craik_host::adapter::AdapterSpec::new(
            program,
            vec!["--fixture".into(), scenario_path.display().to_string()],
        );
        let ws = make_ws("governed-adapter")?;
        Some(governed_run(
            &root.join("adapter"),
            &ws,
            &scenario_path,
            &scenario_bytes,
            steps,
            Box::new(craik_host::adapter::AdapterRunner::new(spec)),
        )?)
        .map(|(s, f, v, r, l, _)| (s, f, v, r, l))
    } else {
        None
    };
    let t = Instant::now();
    ungoverned(&scenario, &plain_ws)?;
    let ungoverned_s = t.elapsed().as_secs_f64();
    let iterations = steps / 4;
    let steps_f = steps as f64;
    let confinement = confinement_overhead(root, iterations.clamp(10, 250))?;
    let result = RunResult {
        steps,
        iterations,
        side_effects: iterations,
        decisions: iterations * 4,
        governed_s,
        ungoverned_s,
        governed_steps_per_s: steps_f / governed_s,
        ungoverned_steps_per_s: steps_f / ungoverned_s,
        overhead_per_step_us: (governed_s - ungoverned_s) / steps_f * 1e6,
        governed_vs_ungoverned: governed_s / ungoverned_s,
        fsyncs,
        fsyncs_per_step: fsyncs as f64 / steps_f,
        fsyncs_per_iteration: fsyncs as f64 / iterations as f64,
        fsyncs_per_step_target: 2.5,
        // Group commit (host/src/run/driver/mod.rs, docs/runs.md "Durability and recovery"):
        // receipts + events before the write starts, the ledger's checkpoint of the journal,
        // the file's data + its directory.
        fsyncs_per_write_side_effect: 5,
        fsyncs_per_read: 0,
        journal_valid,
        ledger_s,
        ledger_share_of_run: ledger_s / governed_s,
        resume_checks_s,
        resume_checks_share_of_run: resume_checks_s / governed_s,
        resume_checks_target: 0.05,
        ledger_prefilled_runs: LEDGER_PREFILL,
        adapter_s: through_adapter.as_ref().map(|t| t.0),
        adapter_steps_per_s: through_adapter.as_ref().map(|t| steps_f / t.0),
        adapter_overhead_per_step_us: through_adapter
            .as_ref()
            .map(|t| (t.0 - governed_s) / steps_f * 1e6),
        confinement,
    };
    match format {
        Format::Human => {
            out.line(format_args!(
                "{} steps ({} iterations; {} decisions, each receipted; {} file writes), this machine, one process",
                result.steps, result.iterations, result.decisions, result.side_effects
            ))?;
            out.line(format_args!(
                "  governed     {:>9.0} steps/s  ({:.3} s)",
                result.governed_steps_per_s, result.governed_s
            ))?;
            out.line(format_args!(
                "  ungoverned   {:>9.0} steps/s  ({:.3} s)  same scenario and executors, no kernel, receipts or journal",
                result.ungoverned_steps_per_s, result.ungoverned_s
            ))?;
            out.line(format_args!(
                "  ratio        {:.1}× slower governed; {:.0} µs overhead per step",
                result.governed_vs_ungoverned, result.overhead_per_step_us
            ))?;
            out.line(format_args!(
                "  durability   {} fsyncs: {:.2} per step (target ≤ {}: {}), {:.2} per iteration; group commit: {} per file write (receipts + events before it starts, the ledger's checkpoint, file, directory), {} per read (its receipts ride on the commit before the next runner request), 2 per act step result (outputs, events), 1 before the observe request (receipts)",
                result.fsyncs,
                result.fsyncs_per_step,
                result.fsyncs_per_step_target,
                if result.fsyncs_per_step <= result.fsyncs_per_step_target {
                    "met"
                } else {
                    "NOT met"
                },
                result.fsyncs_per_iteration,
                result.fsyncs_per_write_side_effect,
                result.fsyncs_per_read
            ))?;
            out.line(format_args!(
                "  journal      {} receipts, {}",
                receipts,
                if result.journal_valid {
                    "verified"
                } else {
                    "INVALID"
                }
            ))?;
            out.line(format_args!(
                "  ledger       {:.2} ms of the governed run's {:.0} ms ({:.2} %) appending its home-ledger entries (started, closed), the ledger already naming {} runs",
                result.ledger_s * 1000.0,
                result.governed_s * 1000.0,
                result.ledger_share_of_run * 100.0,
                result.ledger_prefilled_runs
            ))?;
            out.line(format_args!(
                "  checks       {:.2} ms ({:.2} % of the run; target ≤ {:.0} %: {}) for what a resume or recovery checks before it appends: the whole ledger verified, the run's record read, its journal checked against every point the ledger recorded",
                result.resume_checks_s * 1000.0,
                result.resume_checks_share_of_run * 100.0,
                result.resume_checks_target * 100.0,
                if result.resume_checks_share_of_run <= result.resume_checks_target {
                    "met"
                } else {
                    "NOT met"
                }
            ))?;
            let c = &result.confinement;
            out.line(format_args!(
                "  confinement  {:.0} µs per command confined vs {:.0} µs plain (medians of {} each, alternating): {:.2} ms overhead per spawned command ({:.0} µs of it planning in Craik's process, its Landlock ruleset and mount namespace reused); {:.2} ms when the sandbox is new, both made ({:.0} µs planning); CPU {:.0} vs {:.0} µs per command [{}]",
                c.confined_us_per_command,
                c.plain_us_per_command,
                c.commands,
                c.overhead_us_per_command / 1000.0,
                c.planning_us_per_command,
                c.built_overhead_us_per_command / 1000.0,
                c.built_planning_us_per_command,
                c.confined_cpu_us_per_command,
                c.plain_cpu_us_per_command,
                craik_contracts::one_line(&c.applied)
            ))?;
            if let (Some(a), Some(per_s), Some(over)) = (
                result.adapter_s,
                result.adapter_steps_per_s,
                result.adapter_overhead_per_step_us,
            ) {
                out.line(format_args!(
                    "  via adapter  {per_s:>9.0} steps/s  ({a:.3} s)  the same governed run, the fixture runner as an adapter process: {over:.0} µs per step for the channel"
                ))?;
            }
        }
        Format::Json | Format::Junit => out.json(&result)?,
    }
    Ok(if result.journal_valid {
        Exit::Ok
    } else {
        Exit::Internal
    })
}

/// Runs the bench home's ledger names before the measured run.
const LEDGER_PREFILL: usize = 1000;

/// One governed run of the bench scenario in `root`: (seconds, fsyncs, journal valid, receipts,
/// seconds of it spent appending to the home ledger, seconds of the checks a resume of it
/// makes before appending).
fn governed_run(
    root: &Path,
    workspace: &Path,
    scenario_path: &Path,
    scenario_bytes: &[u8],
    steps: usize,
    runner: Box<dyn craik_host::run::StepRunner>,
) -> std::result::Result<(f64, u64, bool, u64, f64, f64), Failure> {
    use craik_host::run::driver::Setup;
    use craik_host::run::store::Home;
    let grant: craik_contracts::CapabilityGrant = serde_json::from_value(serde_json::json!({
        "id": "grant_bench", "task_id": "task_bench", "capability": "repo.write.docs",
        "target": {"paths": ["docs/**"], "exclude": []}, "operations": ["write"],
        "reason": "bench", "approved_by": "user:bench"
    }))
    .map_err(|e| Failure::internal(e.to_string()))?;
    let task: craik_contracts::TaskRequest = serde_json::from_value(serde_json::json!({
        "id": "task_bench", "title": "bench", "objective": "bench", "project_id": "project_bench",
        "requested_by": "user:bench", "mode": "implement", "created_at": "2026-01-01T00:00:00Z"
    }))
    .map_err(|e| Failure::internal(e.to_string()))?;
    let home = Home::new(&root.join("home"));
    let loaded = crate::bundle::load(None, &[])?;
    let grants =
        crate::bundle::compile_grants(&loaded.bundle, std::slice::from_ref(&grant), "bench")?;
    let (private, public, _) = crate::cmd::keys::create_pair(&home.keys())?;
    let signer = read_signer(&private)?;
    let mut keys = KeyRing::new();
    keys.add(&crate::cmd::keys::read_public(&public)?)
        .map_err(Failure::internal)?;
    let started = time::OffsetDateTime::now_utc();
    // The home's ledger already names LEDGER_PREFILL runs (synthetic entries), so the bench
    // run's appends pay what they pay in a home with history (an append hashes every line).
    let prefill: Vec<craik_host::ledger::Entry> = (0..LEDGER_PREFILL)
        .map(|i| {
            let mut e = craik_host::ledger::Entry::key_added(&format!("sha256:bench{i}"));
            e.kind = craik_host::ledger::RUN_STARTED;
            e.target = format!("run_bench_history_{i}");
            e
        })
        .collect();
    std::fs::create_dir_all(&home.root).map_err(io_at(&home.root))?;
    craik_host::ledger::record(&home.root, &signer, started, prefill)?;
    let inputs = craik_host::run::Inputs {
        run_id: "run_bench".into(),
        task,
        intent: None,
        envelope: None,
        grants: vec![grant],
        runner: "fixture".into(),
        runner_options: craik_host::run::RunnerOptions::default(),
        runner_adapter: None,
        scenario_path: Some(scenario_path.to_owned()),
        scenario_digest: Some(craik_host::run::exec::digest(scenario_bytes)),
        profile: PolicyProfile::TrustedLocal,
        policies: None,
        custom: Vec::new(),
        policy_set: loaded.bundle.hash().to_owned(),
        workspace: workspace.to_owned(),
        toolchains: Vec::new(),
        immutable_paths: Vec::new(),
        max_iterations: u32::try_from(steps / 4 + 1).unwrap_or(u32::MAX),
        budget_secs: None,
        shadow: false,
        started_at: craik_contracts::Timestamp::new(started),
        started_by: None,
        project_profile_sha256: None,
        case_file_sha256: None,
        compiled_prompt_sha256: None,
        token_budget: None,
    };
    let setup = Setup {
        bundle: loaded.bundle,
        grants,
        signer,
        keys: keys.clone(),
        runner,
        matrix: craik_host::runners::matrix("fixture")?,
        clock: std::sync::Arc::new(craik_host::SystemClock),
    };
    let t = Instant::now();
    let mut host = craik_host::run::plan::RunPlan {
        home,
        inputs,
        seed: None,
        workspace: Some(workspace.to_owned()),
        case_file: None,
        compiled_prompt: None,
        input_files: Vec::new(),
    }
    .start(setup)?;
    host.drive(&mut |_| {})?;
    let governed_s = t.elapsed().as_secs_f64();
    let status = host.machine().run().status;
    if status != craik_contracts::TaskRunStatus::Completed {
        return Err(Failure::internal(format!(
            "the bench run ended {}: {}",
            status.as_str(),
            host.machine().run().stop_reason.clone().unwrap_or_default()
        )));
    }
    let journal = std::fs::read(host.journal_path()).map_err(io_at(&host.journal_path()))?;
    let report = verify_journal_with(&journal, &keys, VerifyOptions::default(), &mut |_, _| {});
    let fsyncs = host.fsyncs();
    let ledger_s = host.ledger_time().as_secs_f64();
    drop(host);
    let home_root = root.join("home");
    let mut checks = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let record = craik_host::ledger::run_record(&home_root, &keys, "run_bench")?
            .ok_or_else(|| Failure::internal("the bench home has no ledger"))?;
        let tree = craik_kernel::JournalTree::from_verified(&journal).map_err(Failure::internal)?;
        record
            .extended_by(&tree.leaves)
            .map_err(Failure::internal)?;
        checks.push(t.elapsed().as_secs_f64());
    }
    Ok((
        governed_s,
        fsyncs,
        report.is_valid(),
        report.receipts,
        ledger_s,
        median(&mut checks),
    ))
}

#[derive(Serialize)]
struct ChannelResult {
    round_trips: usize,
    request_bytes: usize,
    channel_p50_us: f64,
    channel_p99_us: f64,
    in_process_p50_us: f64,
    in_process_p99_us: f64,
    channel_vs_in_process_p50: f64,
    target_p50_us: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(rank).copied().unwrap_or_default()
}

/// `craik bench channel`: step round trips to the fixture adapter process vs in process.
pub(crate) fn channel(
    out: &mut Out,
    format: Format,
    count: usize,
) -> std::result::Result<Exit, Failure> {
    use craik_host::run::StepRunner;
    if count == 0 {
        return Err(Failure::usage("--count must be at least 1"));
    }
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| Failure::internal(format!("no randomness: {e}")))?;
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "craik-bench-channel-{}",
        craik_kernel::to_hex(&random)
    )));
    std::fs::create_dir_all(&scratch.0).map_err(io_at(&scratch.0))?;
    let scenario = bench_scenario(4);
    let path = scratch.0.join("scenario.json");
    let bytes = serde_json::to_vec(&scenario).map_err(|e| Failure::internal(e.to_string()))?;
    write_atomic(&path, &bytes).map_err(io_at(&path))?;
    let matrix = craik_host::runners::matrix("fixture")?;
    // A plan-phase request whose context carries 4 KB, as a step of a real run would.
    let mut context = Object::new();
    context.0.insert("step".into(), serde_json::json!(0));
    context
        .0
        .insert("notes".into(), serde_json::json!("x".repeat(4000)));
    let request = craik_contracts::RunnerStepRequest {
        schema: Default::default(),
        version: Default::default(),
        id: "runner_step_request_bench_0".into(),
        run_id: "run_bench".into(),
        task_id: "task_bench".into(),
        phase: craik_contracts::Phase::Plan,
        runner: matrix.runner.clone(),
        policy_envelope_id: "policy_bench".into(),
        intent_lock_id: None,
        capability_grant_ids: Vec::new(),
        expected_output_schemas: vec!["craik.runner_step_result".into()],
        input_prompt: "bench".into(),
        context,
        redaction_required: true,
        created_at: craik_contracts::Timestamp::new(time::OffsetDateTime::now_utc()),
    };
    let request_bytes = serde_json::to_vec(&request)
        .map_err(|e| Failure::internal(e.to_string()))?
        .len();
    let program = craik_host::runners::shipped("fixture").map_err(Failure::usage)?;
    let spec = craik_host::adapter::AdapterSpec::new(
        program,
        vec!["--fixture".into(), path.display().to_string()],
    );
    let mut adapter = craik_host::adapter::AdapterRunner::new(spec);
    adapter
        .start(&matrix.runner)
        .map_err(|e| Failure::internal(e.to_string()))?;
    let mut inproc = craik_host::run::FixtureStepRunner::new(scenario);
    let mut channel_us = Vec::with_capacity(count);
    let mut local_us = Vec::with_capacity(count);
    // Warm both paths, then interleave so both see the same machine state.
    for _ in 0..100.min(count) {
        adapter
            .step(&request)
            .map_err(|e| Failure::internal(e.to_string()))?;
        black_box(
            inproc
                .step(&request)
                .map_err(|e| Failure::internal(e.to_string()))?,
        );
    }
    for _ in 0..count {
        let t = Instant::now();
        black_box(
            adapter
                .step(&request)
                .map_err(|e| Failure::internal(e.to_string()))?,
        );
        channel_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        black_box(
            inproc
                .step(&request)
                .map_err(|e| Failure::internal(e.to_string()))?,
        );
        local_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(adapter);
    channel_us.sort_by(f64::total_cmp);
    local_us.sort_by(f64::total_cmp);
    let result = ChannelResult {
        round_trips: count,
        request_bytes,
        channel_p50_us: percentile(&channel_us, 0.5),
        channel_p99_us: percentile(&channel_us, 0.99),
        in_process_p50_us: percentile(&local_us, 0.5),
        in_process_p99_us: percentile(&local_us, 0.99),
        channel_vs_in_process_p50: percentile(&channel_us, 0.5)
            / percentile(&local_us, 0.5).max(0.001),
        target_p50_us: 200.0,
    };
    match format {
        Format::Human => {
            out.line(format_args!(
                "{} step round trips, {}-byte request (4 KB context), this machine",
                result.round_trips, result.request_bytes
            ))?;
            out.line(format_args!(
                "  channel     p50 {:>8.1} µs   p99 {:>8.1} µs   (fixture adapter process, craik.channel/1)",
                result.channel_p50_us, result.channel_p99_us
            ))?;
            out.line(format_args!(
                "  in process  p50 {:>8.1} µs   p99 {:>8.1} µs   (the same answer, no channel)",
                result.in_process_p50_us, result.in_process_p99_us
            ))?;
            out.line(format_args!(
                "  ratio       {:.1}× at p50; target p50 ≤ {:.0} µs: {}",
                result.channel_vs_in_process_p50,
                result.target_p50_us,
                if result.channel_p50_us <= result.target_p50_us {
                    "met"
                } else {
                    "NOT met"
                }
            ))?;
        }
        Format::Json | Format::Junit => out.json(&result)?,
    }
    Ok(Exit::Ok)
}

/// What `craik bench case` measured.
#[derive(Debug, Serialize)]
struct CaseBench {
    files: usize,
    bytes: u64,
    runs: usize,
    case_build_ms: f64,
    baseline_ms: f64,
    ratio: f64,
    goal_ratio: f64,
    max_rss_kb: Option<u64>,
    rss_own_phase: bool,
    case_tokens: u64,
    docs_listed: usize,
    /// Compiling the prompt from the case file built (median of [`PROMPT_RUNS`]).
    prompt_compile_ms: f64,
    prompt_bytes: usize,
    goal_prompt_ms: f64,
}

/// Prompt compiles timed.
const PROMPT_RUNS: usize = 21;

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `craik bench case`: a generated git repository of `files` docs files (`megabytes` in
/// all); `case build` (in process, as `craik case build` runs it) against `git ls-files -z |
/// xargs -0 sha256sum` over the same repository, alternating, medians; the peak RSS of the
/// case builds.
pub(crate) fn case(
    out: &mut Out,
    format: Format,
    files: usize,
    megabytes: u64,
    runs: usize,
) -> std::result::Result<Exit, Failure> {
    if files == 0 || runs == 0 {
        return Err(Failure::usage("--files and --runs must be at least 1"));
    }
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| Failure::internal(format!("no randomness: {e}")))?;
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "craik-bench-case-{}",
        craik_kernel::to_hex(&random)
    )));
    let repo = scratch.0.join("repo");
    let total = megabytes.saturating_mul(1_000_000);
    let each = usize::try_from(total / files as u64)
        .unwrap_or(usize::MAX)
        .max(64);
    out.progress(format_args!(
        "generating {files} docs files, {megabytes} MB"
    ))?;
    let filler = "Craik keeps the boundary; the runner proposes and the kernel decides. ";
    for i in 0..files {
        let dir = repo.join(format!("docs/part{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
        }
        // Each names the doc before it; one in a hundred also names a path that does not exist.
        let next = (i + files - 1) % files;
        let mut text = format!(
            "# Document {i}\n\nSee `docs/part{:03}/doc{next:05}.md`{}.\n\n",
            next / 100,
            if i % 100 == 0 {
                format!(" and `src/missing{i}.rs`")
            } else {
                String::new()
            }
        );
        while text.len() < each {
            text.push_str(filler);
        }
        text.truncate(each);
        let path = dir.join(format!("doc{i:05}.md"));
        std::fs::write(&path, text.as_bytes()).map_err(io_at(&path))?;
    }
    let git = |args: &[&str]| -> std::result::Result<(), Failure> {
        let status = std::process::Command::new("git")
            .current_dir(&repo)
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.invalid",
            ])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| Failure::usage(format!("git: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(Failure::usage(format!("git {}: {status}", args.join(" "))))
        }
    };
    git(&["init", "-q"])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "bench"])?;
    // Files written in the same second as the index are "racily clean": git re-reads every
    // one of them on each status until the index is rewritten later. A checkout is not in
    // that state for long; refresh the index a second later, as any git command would.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    git(&["update-index", "-q", "--refresh"])?;
    let profile_file = scratch.0.join("project_profile.json");
    let profile = serde_json::json!({
        "schema": "craik.project_profile", "version": "0.1.0", "id": "project_bench",
        "name": "bench", "repo": {"type": "git", "local_path": "repo"},
        "docs": {"paths": ["docs/"], "immutable_paths": []},
        "memory": {"backend": "local", "scope": "team"}
    });
    let bytes = serde_json::to_vec(&profile).map_err(|e| Failure::internal(e.to_string()))?;
    write_atomic(&profile_file, &bytes).map_err(io_at(&profile_file))?;
    let profile = craik_host::project::Profile::from_file(&profile_file)?;
    let task: craik_contracts::TaskRequest = serde_json::from_value(serde_json::json!({
        "id": "task_bench", "title": "bench", "objective": "bench the case file",
        "project_id": "project_bench", "requested_by": "user:bench", "mode": "review",
        "created_at": "2026-11-26T00:00:00Z"
    }))
    .map_err(|e| Failure::internal(e.to_string()))?;
    let request = craik_host::case::Request {
        profile: &profile,
        task: &task,
        intent: None,
        envelope: None,
        home: None,
        keys: None,
        max_tokens: craik_host::case::DEFAULT_MAX_TOKENS,
        strict: false,
    };
    let baseline = || -> std::result::Result<f64, Failure> {
        let started = Instant::now();
        let status = std::process::Command::new("sh")
            .current_dir(&repo)
            .args(["-c", "git ls-files -z | xargs -0 sha256sum > /dev/null"])
            .status()
            .map_err(|e| Failure::usage(format!("sh: {e}")))?;
        if !status.success() {
            return Err(Failure::usage(format!("the baseline failed: {status}")));
        }
        Ok(started.elapsed().as_secs_f64() * 1e3)
    };
    // Warm the page cache for both sides.
    baseline()?;
    let own_phase = crate::cmd::audit::bench::reset_peak();
    let mut case_ms = Vec::with_capacity(runs);
    let mut base_ms = Vec::with_capacity(runs);
    let mut last = None;
    for k in 0..runs {
        out.progress(format_args!("run {} of {runs}", k + 1))?;
        let started = Instant::now();
        let built = craik_host::case::build(&request)?;
        case_ms.push(started.elapsed().as_secs_f64() * 1e3);
        last = Some(built);
        base_ms.push(baseline()?);
    }
    out.end_progress()?;
    let max_rss_kb = crate::cmd::audit::bench::peak_kb();
    let built = last.ok_or_else(|| Failure::internal("no run"))?;
    // Issue 21: compiling the prompt from this (full-budget) case file, as a run does.
    let matrix = craik_host::runners::matrix("fixture")?;
    let mut compile_ms = Vec::with_capacity(PROMPT_RUNS);
    let mut prompt_bytes = 0;
    for _ in 0..PROMPT_RUNS {
        let started = Instant::now();
        let compiled = craik_host::prompt::compile(&craik_host::prompt::Request {
            task: &task,
            matrix: &matrix,
            matrix_from_project: false,
            profile: craik_contracts::PolicyProfile::Strict,
            envelope: None,
            intent: None,
            grants: &[],
            max_iterations: 5,
            case: &built.case,
            case_bytes: &built.bytes,
        })?;
        compile_ms.push(started.elapsed().as_secs_f64() * 1e3);
        prompt_bytes = compiled.bytes.len();
    }
    let prompt_compile_ms = median_ms(compile_ms);
    let (case_build_ms, baseline_ms) = (median_ms(case_ms), median_ms(base_ms));
    let result = CaseBench {
        files,
        bytes: total,
        runs,
        case_build_ms,
        baseline_ms,
        ratio: if baseline_ms > 0.0 {
            case_build_ms / baseline_ms
        } else {
            0.0
        },
        goal_ratio: 1.5,
        max_rss_kb,
        rss_own_phase: own_phase,
        case_tokens: built
            .case
            .context_budget
            .0
            .get("estimated_tokens")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
        docs_listed: built.case.docs.len(),
        prompt_compile_ms,
        prompt_bytes,
        goal_prompt_ms: 5.0,
    };
    if format == Format::Json {
        out.json(&result)?;
        return Ok(Exit::Ok);
    }
    out.line(format_args!(
        "case build over {files} docs files ({megabytes} MB, git repository), median of {runs}:"
    ))?;
    out.line(format_args!(
        "  case build                         {case_build_ms:>10.1} ms"
    ))?;
    out.line(format_args!(
        "  git ls-files | xargs sha256sum     {baseline_ms:>10.1} ms"
    ))?;
    out.line(format_args!(
        "  ratio                              {:>10.2}x (goal <= 1.5x)",
        result.ratio
    ))?;
    match max_rss_kb {
        Some(kb) => out.line(format_args!(
            "  max RSS                            {:>10.1} MB{}",
            kb as f64 / 1024.0,
            if own_phase {
                ""
            } else {
                " (the process's peak: clear_refs refused)"
            }
        ))?,
        None => out.line("  max RSS                            unknown (no /proc/self/status)")?,
    }
    out.line(format_args!(
        "  case file                          {:>10} tokens, {} docs listed (budget {})",
        result.case_tokens,
        result.docs_listed,
        craik_host::case::DEFAULT_MAX_TOKENS
    ))?;
    out.line(format_args!(
        "  prompt compile (this case file)    {prompt_compile_ms:>10.2} ms, {prompt_bytes} bytes, median of {PROMPT_RUNS} (goal <= 5 ms)"
    ))?;
    Ok(Exit::Ok)
}
