//! Adapter conformance: the canonical scenarios any adapter must pass before Craik runs it
//! (`craik runners conformance`). Each scenario is one function; the first failure stops the
//! run (the rest are reported as not run, and the adapter is stopped), so one broken
//! behaviour is not reported as a cascade of unrelated ones.

use std::path::Path;
use std::time::{Duration, Instant};

use craik_contracts::RunnerMetadata;
use craik_contracts::channel::codes;

use crate::Error;
use crate::adapter::{Adapter, AdapterSpec};

/// One scenario's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub scenario: &'static str,
    pub passed: bool,
    /// Not run: an earlier scenario failed and conformance stopped there.
    pub skipped: bool,
    pub detail: String,
}

/// The scenarios after the handshake, in the order they run.
type Scenario = fn(&mut Adapter, &RunnerMetadata) -> Result<String, String>;

const AFTER_HANDSHAKE: [(&str, Scenario); 9] = [
    ("normal step", normal_step),
    ("act step", act_step),
    ("structured error: unknown method", unknown_method),
    ("structured error: invalid params", invalid_params),
    ("malformed line", malformed_line),
    ("oversize line", oversize_line),
    ("cancellation", cancellation),
    ("timeout behaviour", timeout_behaviour),
    ("clean shutdown", clean_shutdown),
];

/// How long a structured-error answer may take.
const WAIT: Duration = Duration::from_secs(2);

/// Every scenario's name, in order (the handshake first).
pub fn scenarios() -> impl Iterator<Item = &'static str> {
    std::iter::once("handshake").chain(AFTER_HANDSHAKE.iter().map(|(name, _)| *name))
}

/// Runs every scenario against the adapter `command` (program, then arguments; arguments
/// naming existing files are made absolute, since the adapter runs in its own scratch
/// directory). Returns one check per scenario, in order.
pub fn run(command: &[String]) -> Result<Vec<Check>, Error> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Error::usage("give the adapter command after `--`"))?;
    // As for `--runner adapter:PROGRAM`: a path (relative to the current directory), or a bare
    // name on the host's fixed PATH (never the caller's environment).
    let cwd =
        std::env::current_dir().map_err(|e| Error::usage(format!("current directory: {e}")))?;
    let program = crate::run::exec::resolve_program(program, &cwd).map_err(Error::usage)?;
    let args: Vec<String> = args
        .iter()
        .map(|a| match Path::new(a).canonicalize() {
            Ok(p) if !a.starts_with('-') => p.display().to_string(),
            _ => a.clone(),
        })
        .collect();
    run_spec(AdapterSpec::new(program, args), None)
}

/// `craik runners conformance NAME`: the same scenarios against a registry entry, launched
/// exactly as a run launches it (its pin checked first, the program executed through the
/// descriptor it hashed, its environment, read paths and sandbox), and it must announce its
/// matrix's runner id. An entry that takes a fixture scenario gets a plan and an act step.
pub fn run_entry(entry: &crate::registry::Entry, home: &Path) -> Result<Vec<Check>, Error> {
    let scratch = tempfile::Builder::new()
        .prefix("craik-conformance-")
        .tempdir()
        .map_err(|e| Error::io(format!("cannot create a temporary directory: {e}")))?;
    let steps = serde_json::json!([
        {"phase": "plan", "summary": "conformance: plan"},
        {"phase": "act", "summary": "conformance: act, proposing nothing"}
    ]);
    let spec = crate::launch::entry_spec(entry, home, scratch.path(), &steps)?;
    let checks = run_spec(spec, Some(&entry.matrix.runner));
    // An entry that was never installed leaves no directory behind (only an empty one goes).
    let _ = std::fs::remove_dir(crate::registry::entry_dir(home, &entry.id));
    checks
}

/// Runs every scenario against the adapter `spec` starts; `expected`: the runner it must
/// announce.
fn run_spec(mut spec: AdapterSpec, expected: Option<&RunnerMetadata>) -> Result<Vec<Check>, Error> {
    spec.initialize_timeout = Duration::from_secs(10);
    spec.step_timeout = Duration::from_secs(10);
    let mut adapter = Adapter::spawn(spec).map_err(Error::usage)?;
    let mut checks = Vec::new();
    let started = Instant::now();
    let handshake = adapter
        .initialize(expected)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            adapter
                .claimed
                .clone()
                .map(|c| c.result.runner)
                .ok_or_else(|| "the adapter claimed no runner".to_owned())
        });
    let shown = handshake
        .as_ref()
        .map(|r| {
            format!(
                "{} ({} {}), protocol {}, valid metadata and matrix, in {} ms",
                r.id,
                r.adapter,
                r.adapter_version,
                craik_contracts::channel::PROTOCOL_VERSION,
                started.elapsed().as_millis()
            )
        })
        .map_err(Clone::clone);
    if let (true, Ok(runner)) = (record(&mut checks, "handshake", shown), handshake) {
        for (name, scenario) in AFTER_HANDSHAKE {
            if !record(&mut checks, name, scenario(&mut adapter, &runner)) {
                break;
            }
        }
    }
    // Stopped early or done: the adapter is killed and reaped now.
    drop(adapter);
    for scenario in scenarios() {
        if !checks.iter().any(|c| c.scenario == scenario) {
            checks.push(Check {
                scenario,
                passed: false,
                skipped: true,
                detail: "not run: an earlier scenario failed".into(),
            });
        }
    }
    Ok(checks)
}

/// Records a scenario's result; returns whether it passed.
fn record(checks: &mut Vec<Check>, scenario: &'static str, result: Result<String, String>) -> bool {
    let (passed, detail) = match result {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    checks.push(Check {
        scenario,
        passed,
        skipped: false,
        detail,
    });
    passed
}

/// A plan step whose result must echo the request.
fn normal_step(a: &mut Adapter, runner: &RunnerMetadata) -> Result<String, String> {
    let t = Instant::now();
    let request = conformance_request(runner, 0);
    let r = a.step_call(&request).map_err(|e| e.to_string())?;
    let mut wrong = Vec::new();
    if r.request_id != request.id {
        wrong.push("request_id");
    }
    if r.run_id != request.run_id {
        wrong.push("run_id");
    }
    if r.task_id != request.task_id {
        wrong.push("task_id");
    }
    if r.phase != request.phase {
        wrong.push("phase");
    }
    if r.runner.id != runner.id {
        wrong.push("runner.id");
    }
    if !r.id.starts_with("runner_step_result_") {
        wrong.push("id");
    }
    if !r.receipt_ids.is_empty() || !r.memory_proposal_ids.is_empty() {
        wrong.push("claimed receipt/memory ids");
    }
    if !wrong.is_empty() {
        return Err(format!(
            "the result does not echo the request: {}",
            wrong.join(", ")
        ));
    }
    Ok(format!(
        "{} result `{}` in {} ms, {} event(s)",
        r.status.as_str(),
        r.summary.chars().take(60).collect::<String>(),
        t.elapsed().as_millis(),
        a.events.len()
    ))
}

/// An act step: what the adapter proposes must be actions Craik can decide.
fn act_step(a: &mut Adapter, runner: &RunnerMetadata) -> Result<String, String> {
    let mut act = conformance_request(runner, 1);
    act.phase = craik_contracts::Phase::Act;
    act.input_prompt = "Conformance check: propose the actions of this step.".into();
    let r = a.step_call(&act).map_err(|e| e.to_string())?;
    act_answer(&act, r)
}

/// An error answer with `code` for the request `id` (`None`: id null).
fn expect_error(
    answer: Result<Option<Vec<u8>>, String>,
    id: Option<u64>,
    code: i64,
) -> Result<(), String> {
    match answer.and_then(error_of)? {
        (got_id, got) if got == code && (id.is_none() || got_id == id) => Ok(()),
        (got_id, got) => Err(format!(
            "expected error {code} for id {}, got {got} for {}",
            id.map_or("(any)".to_owned(), |i| i.to_string()),
            got_id.map_or("null".to_owned(), |i| i.to_string())
        )),
    }
}

fn unknown_method(a: &mut Adapter, _: &RunnerMetadata) -> Result<String, String> {
    let answer = a.raw_exchange(
        b"{\"id\":901,\"method\":\"frobnicate\",\"params\":{}}\n",
        WAIT,
    );
    expect_error(answer, Some(901), codes::METHOD_NOT_FOUND)?;
    Ok("error -32601 with the request's id".into())
}

fn invalid_params(a: &mut Adapter, _: &RunnerMetadata) -> Result<String, String> {
    let answer = a.raw_exchange(
        b"{\"id\":902,\"method\":\"step\",\"params\":{\"bogus\":1}}\n",
        WAIT,
    );
    expect_error(answer, Some(902), codes::INVALID_PARAMS)?;
    Ok("error -32602 with the request's id".into())
}

fn malformed_line(a: &mut Adapter, _: &RunnerMetadata) -> Result<String, String> {
    match a.raw_exchange(b"{not json\n", WAIT).and_then(error_of)? {
        (None, c) if c == codes::PARSE_ERROR => Ok("error -32700 with id null".into()),
        (id, c) => Err(format!(
            "expected error -32700 with id null, got {c} for {id:?}"
        )),
    }
}

fn oversize_line(a: &mut Adapter, _: &RunnerMetadata) -> Result<String, String> {
    let max = usize::try_from(a.limits().max_line_bytes).unwrap_or(usize::MAX);
    let mut big = Vec::with_capacity(max + 64);
    big.extend_from_slice(b"{\"id\":903,\"method\":\"step\",\"params\":{\"pad\":\"");
    big.resize(max + 16, b'x');
    big.extend_from_slice(b"\"}}\n");
    expect_error(a.raw_exchange(&big, WAIT), None, codes::INVALID_REQUEST)?;
    Ok(format!("a {}-byte line refused with -32600", big.len() - 1))
}

/// A cancel for an unknown id is ignored (never answered), and the adapter keeps serving.
fn cancellation(a: &mut Adapter, runner: &RunnerMetadata) -> Result<String, String> {
    let cancel = a.raw_exchange(
        b"{\"method\":\"cancel\",\"params\":{\"id\":424242}}\n",
        Duration::from_millis(300),
    )?;
    if let Some(line) = cancel {
        return Err(format!(
            "answered a notification: {}",
            String::from_utf8_lossy(&line)
                .chars()
                .take(120)
                .collect::<String>()
        ));
    }
    a.step_call(&conformance_request(runner, 0))
        .map(|_| "ignored a cancel for an unknown request and kept serving".to_owned())
        .map_err(|e| format!("after a cancel: {e}"))
}

/// Answers arrive well within the announced limits.
fn timeout_behaviour(a: &mut Adapter, runner: &RunnerMetadata) -> Result<String, String> {
    let t = Instant::now();
    a.step_call(&conformance_request(runner, 0))
        .map_err(|e| e.to_string())?;
    let took = t.elapsed();
    if took >= Duration::from_secs(10) {
        return Err(format!("took {} ms", took.as_millis()));
    }
    Ok(format!(
        "answered in {} ms (limit {} ms)",
        took.as_millis(),
        a.limits().step_timeout_ms
    ))
}

fn clean_shutdown(a: &mut Adapter, _: &RunnerMetadata) -> Result<String, String> {
    a.shutdown(Duration::from_secs(2))
        .map(|()| "answered `shutdown` and exited 0".to_owned())
        .map_err(|e| e.to_string())
}

/// Checks an `act` step's answer: it echoes the request, its reserved `observed_output` keys
/// parse, and every proposed action names a capability/operation pair the kernel knows and the
/// fields its executor needs. Returns how many actions it proposed.
fn act_answer(
    request: &craik_contracts::RunnerStepRequest,
    mut result: craik_contracts::RunnerStepResult,
) -> Result<String, String> {
    if result.request_id != request.id || result.phase != request.phase {
        return Err(format!(
            "the act result does not echo the request (request_id `{}`, phase `{}`)",
            craik_contracts::Truncated(&result.request_id),
            result.phase.as_str()
        ));
    }
    if !result.receipt_ids.is_empty() {
        return Err("an act result claimed receipt ids: only Craik signs receipts".into());
    }
    let found = crate::run::directives(&mut result.observed_output).map_err(|v| v.0)?;
    for (k, a) in found.actions.iter().enumerate() {
        let Some(effect) = craik_kernel::Effect::of(&a.capability, &a.operation) else {
            return Err(format!(
                "proposed_actions[{k}]: operation `{}` does not belong to capability `{}`",
                craik_contracts::Truncated(&a.operation),
                craik_contracts::Truncated(&a.capability)
            ));
        };
        let missing = match effect {
            craik_kernel::Effect::Execute => a.argv.as_ref().is_none_or(Vec::is_empty),
            craik_kernel::Effect::WriteFile => a.target.is_none() || a.content.is_none(),
            craik_kernel::Effect::PatchFile => a.target.is_none() || a.edits.is_empty(),
            _ => a.target.is_none(),
        };
        if missing {
            return Err(format!(
                "proposed_actions[{k}] ({} {}): lacks what its executor needs (target, content, edits or argv)",
                a.capability, a.operation
            ));
        }
    }
    Ok(format!(
        "{} result, {} well-formed proposed action(s)",
        result.status.as_str(),
        found.actions.len()
    ))
}

fn conformance_request(
    runner: &craik_contracts::RunnerMetadata,
    n: u64,
) -> craik_contracts::RunnerStepRequest {
    let mut context = craik_contracts::Object::new();
    context.0.insert("step".into(), serde_json::json!(n));
    context.0.insert("iteration".into(), serde_json::json!(0));
    context
        .0
        .insert("max_iterations".into(), serde_json::json!(5));
    context
        .0
        .insert("profile".into(), serde_json::json!("strict"));
    craik_contracts::RunnerStepRequest {
        schema: Default::default(),
        version: Default::default(),
        id: format!("runner_step_request_conformance_{n}"),
        run_id: "run_conformance".into(),
        task_id: "task_conformance".into(),
        phase: craik_contracts::Phase::Plan,
        runner: runner.clone(),
        policy_envelope_id: "policy_conformance".into(),
        intent_lock_id: None,
        capability_grant_ids: Vec::new(),
        expected_output_schemas: vec!["craik.runner_step_result".into()],
        input_prompt: "Conformance check: plan the next step.".into(),
        context,
        redaction_required: true,
        created_at: craik_contracts::Timestamp::new(time::OffsetDateTime::now_utc()),
    }
}

fn error_of(line: Option<Vec<u8>>) -> Result<(Option<u64>, i64), String> {
    let line = line.ok_or("no answer within 2 s")?;
    let e: craik_contracts::channel::ErrorResponse =
        serde_json::from_slice(&line).map_err(|e| {
            format!(
                "not an error response: {e}: {}",
                String::from_utf8_lossy(&line)
                    .chars()
                    .take(200)
                    .collect::<String>()
            )
        })?;
    Ok((e.id, e.error.code))
}
