//! `craik runners matrix` (and, with the channel, `craik runners conformance`).

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// `craik runners matrix [--runner ID]`.
pub(crate) fn matrix(out: &mut Out, format: Format, runner: Option<&str>) -> Result<Exit, Failure> {
    let names: Vec<&str> = match runner {
        Some(r) => vec![r],
        None => craik_host::runners::names().collect(),
    };
    let matrices = names
        .iter()
        .map(|n| craik_host::runners::matrix(n))
        .collect::<Result<Vec<_>, _>>()?;
    match format {
        Format::Json | Format::Junit => out.json(&matrices)?,
        Format::Human => {
            for (i, m) in matrices.iter().enumerate() {
                if i > 0 {
                    out.line("")?;
                }
                out.line(format_args!(
                    "{} ({}) — mode {}, trust {}, {}",
                    m.runner.id,
                    m.runner.name,
                    m.runner.mode.as_str(),
                    m.trust.level.as_str(),
                    m.trust.default_grant_posture.as_str()
                ))?;
                out.line(format_args!("  boundary: {}", m.trust.boundary))?;
                out.line(format_args!(
                    "  confinement: {}",
                    craik_host::confine::adapter_summary()
                ))?;
                out.line(format_args!(
                    "  receipts required: {}; redaction required: {}",
                    m.trust.requires_receipts, m.trust.requires_redaction
                ))?;
                let width = m
                    .capabilities
                    .iter()
                    .map(|c| c.name.len())
                    .max()
                    .unwrap_or(0);
                for c in &m.capabilities {
                    let effect = match c.support {
                        craik_contracts::RunnerCapabilitySupport::Unsupported => {
                            "blocked before policy"
                        }
                        craik_contracts::RunnerCapabilitySupport::PromptHandoff => {
                            "review: needs approval"
                        }
                        craik_contracts::RunnerCapabilitySupport::Supported => {
                            "policy and grants decide"
                        }
                    };
                    out.line(format_args!(
                        "  {:<width$}  {:<14} {:<22} {}{}",
                        c.name,
                        c.support.as_str(),
                        effect,
                        if c.grant_required {
                            "grant required"
                        } else {
                            "no grant needed"
                        },
                        c.notes
                            .as_deref()
                            .map(|n| format!(" — {n}"))
                            .unwrap_or_default()
                    ))?;
                }
                for note in &m.policy_notes {
                    out.line(format_args!("  policy: {note}"))?;
                }
            }
            out.line("")?;
            out.line("Capabilities not listed are unsupported. A family entry (`repo.write`) covers its members.")?;
        }
    }
    Ok(Exit::Ok)
}

/// One conformance scenario's outcome.
#[derive(Debug, serde::Serialize)]
struct Check {
    scenario: &'static str,
    passed: bool,
    /// Not run: an earlier scenario failed and conformance stopped there.
    skipped: bool,
    detail: String,
}

/// Every conformance scenario, in the order they run.
const SCENARIOS: [&str; 10] = [
    "handshake",
    "normal step",
    "act step",
    "structured error: unknown method",
    "structured error: invalid params",
    "malformed line",
    "oversize line",
    "cancellation",
    "timeout behaviour",
    "clean shutdown",
];

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
    let found = craik_host::run::directives(&mut result.observed_output)?;
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

/// `craik runners conformance -- CMD [ARGS]`.
pub(crate) fn conformance(
    out: &mut Out,
    format: Format,
    command: &[String],
) -> Result<Exit, Failure> {
    use craik_contracts::channel::codes;
    use craik_host::adapter::{Adapter, AdapterSpec};
    use std::time::{Duration, Instant};
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::usage("give the adapter command after `--`"))?;
    let program = resolve_program(program)?;
    // The adapter runs in its own directory: arguments naming existing files are made absolute.
    let args: Vec<String> = args
        .iter()
        .map(|a| match std::path::Path::new(a).canonicalize() {
            Ok(p) if !a.starts_with('-') => p.display().to_string(),
            _ => a.clone(),
        })
        .collect();
    let scratch = std::env::temp_dir().join(format!("craik-conformance-{}", std::process::id()));
    let mut spec = AdapterSpec::new(program, args, scratch.clone());
    spec.initialize_timeout = Duration::from_secs(10);
    spec.step_timeout = Duration::from_secs(10);
    let max = spec.max_line_bytes;
    let mut checks: Vec<Check> = Vec::new();
    // Returns whether the scenario passed: the first failure ends the run of scenarios (the
    // rest are reported as skipped and the adapter is stopped), so one broken behaviour is
    // not reported as a cascade of unrelated ones.
    let mut record = |scenario: &'static str, result: Result<String, String>| {
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
    };
    let wait = Duration::from_secs(2);
    let mut adapter = Adapter::spawn(spec).map_err(Failure::usage)?;

    // 1. Handshake.
    let started = Instant::now();
    let (mut adapter, claimed) = match adapter.initialize(None) {
        Ok(()) => {
            let runner = adapter.claimed.clone().map(|c| c.result.runner);
            if let Some(r) = &runner {
                record(
                    "handshake",
                    Ok(format!(
                        "{} ({} {}), protocol {}, valid metadata and matrix, in {} ms",
                        r.id,
                        r.adapter,
                        r.adapter_version,
                        craik_contracts::channel::PROTOCOL_VERSION,
                        started.elapsed().as_millis()
                    )),
                );
            }
            (Some(adapter), runner)
        }
        Err(e) => {
            record("handshake", Err(e.to_string()));
            (None, None)
        }
    };
    'scenarios: {
        let (Some(a), Some(runner)) = (adapter.as_mut(), claimed.as_ref()) else {
            break 'scenarios;
        };
        // 2. A normal step.
        let t = Instant::now();
        let request = conformance_request(runner, 0);
        let passed = record(
            "normal step",
            a.step_call(&request)
                .map_err(|e| e.to_string())
                .and_then(|r| {
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
                    if wrong.is_empty() {
                        Ok(format!(
                            "{} result `{}` in {} ms, {} event(s)",
                            r.status.as_str(),
                            r.summary.chars().take(60).collect::<String>(),
                            t.elapsed().as_millis(),
                            a.events.len()
                        ))
                    } else {
                        Err(format!(
                            "the result does not echo the request: {}",
                            wrong.join(", ")
                        ))
                    }
                }),
        );
        if !passed {
            break 'scenarios;
        }
        // 3. An act step: what the adapter proposes must be actions Craik can decide.
        let mut act = conformance_request(runner, 1);
        act.phase = craik_contracts::Phase::Act;
        act.input_prompt = "Conformance check: propose the actions of this step.".into();
        let answer = a
            .step_call(&act)
            .map_err(|e| e.to_string())
            .and_then(|r| act_answer(&act, r));
        if !record("act step", answer) {
            break 'scenarios;
        }
        // 4. Structured errors.
        let unknown = a
            .raw_exchange(
                b"{\"id\":901,\"method\":\"frobnicate\",\"params\":{}}\n",
                wait,
            )
            .and_then(error_of);
        let passed = record(
            "structured error: unknown method",
            match unknown {
                Ok((Some(901), c)) if c == codes::METHOD_NOT_FOUND => {
                    Ok("error -32601 with the request's id".into())
                }
                Ok((id, c)) => Err(format!(
                    "expected error -32601 for id 901, got {c} for {id:?}"
                )),
                Err(e) => Err(e),
            },
        );
        if !passed {
            break 'scenarios;
        }
        let bad = a
            .raw_exchange(
                b"{\"id\":902,\"method\":\"step\",\"params\":{\"bogus\":1}}\n",
                wait,
            )
            .and_then(error_of);
        let passed = record(
            "structured error: invalid params",
            match bad {
                Ok((Some(902), c)) if c == codes::INVALID_PARAMS => {
                    Ok("error -32602 with the request's id".into())
                }
                Ok((id, c)) => Err(format!(
                    "expected error -32602 for id 902, got {c} for {id:?}"
                )),
                Err(e) => Err(e),
            },
        );
        if !passed {
            break 'scenarios;
        }
        let garbage = a.raw_exchange(b"{not json\n", wait).and_then(error_of);
        let passed = record(
            "malformed line",
            match garbage {
                Ok((None, c)) if c == codes::PARSE_ERROR => Ok("error -32700 with id null".into()),
                Ok((id, c)) => Err(format!(
                    "expected error -32700 with id null, got {c} for {id:?}"
                )),
                Err(e) => Err(e),
            },
        );
        if !passed {
            break 'scenarios;
        }
        // 4. Oversize.
        let mut big = Vec::with_capacity(max + 64);
        big.extend_from_slice(b"{\"id\":903,\"method\":\"step\",\"params\":{\"pad\":\"");
        big.resize(max + 16, b'x');
        big.extend_from_slice(b"\"}}\n");
        let over = a.raw_exchange(&big, wait).and_then(error_of);
        let passed = record(
            "oversize line",
            match over {
                Ok((_, c)) if c == codes::INVALID_REQUEST => {
                    Ok(format!("a {}-byte line refused with -32600", big.len() - 1))
                }
                Ok((id, c)) => Err(format!("expected error -32600, got {c} for {id:?}")),
                Err(e) => Err(e),
            },
        );
        if !passed {
            break 'scenarios;
        }
        // 5. Cancellation: an unknown id is ignored, and the adapter keeps serving.
        let cancel = a.raw_exchange(
            b"{\"method\":\"cancel\",\"params\":{\"id\":424242}}\n",
            Duration::from_millis(300),
        );
        let after = conformance_request(runner, 0);
        let passed = record(
            "cancellation",
            match cancel {
                Ok(Some(line)) => Err(format!(
                    "answered a notification: {}",
                    String::from_utf8_lossy(&line)
                        .chars()
                        .take(120)
                        .collect::<String>()
                )),
                Err(e) => Err(e),
                Ok(None) => a
                    .step_call(&after)
                    .map(|_| "ignored a cancel for an unknown request and kept serving".to_owned())
                    .map_err(|e| format!("after a cancel: {e}")),
            },
        );
        if !passed {
            break 'scenarios;
        }
        // 6. Timeout behaviour: answers arrive well within the announced limits.
        let t = Instant::now();
        let timed = a.step_call(&conformance_request(runner, 0));
        let took = t.elapsed();
        let passed = record(
            "timeout behaviour",
            match timed {
                Ok(_) if took < Duration::from_secs(10) => Ok(format!(
                    "answered in {} ms (limit {} ms)",
                    took.as_millis(),
                    a.limits().step_timeout_ms
                )),
                Ok(_) => Err(format!("took {} ms", took.as_millis())),
                Err(e) => Err(e.to_string()),
            },
        );
        if !passed {
            break 'scenarios;
        }
        // 7. Clean shutdown.
        record(
            "clean shutdown",
            a.shutdown(Duration::from_secs(2))
                .map(|()| "answered `shutdown` and exited 0".to_owned()),
        );
    }
    // Stopped early: the adapter is killed and reaped now, and every scenario not run says so.
    drop(adapter);
    for scenario in SCENARIOS {
        if !checks.iter().any(|c| c.scenario == scenario) {
            checks.push(Check {
                scenario,
                passed: false,
                skipped: true,
                detail: "not run: an earlier scenario failed".into(),
            });
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let failed = checks.iter().filter(|c| !c.passed && !c.skipped).count();
    let skipped = checks.iter().filter(|c| c.skipped).count();
    match format {
        Format::Json | Format::Junit => out.json(&checks)?,
        Format::Human => {
            for c in &checks {
                out.line(format_args!(
                    "{}  {:<34} {}",
                    if c.passed {
                        "pass"
                    } else if c.skipped {
                        "skip"
                    } else {
                        "FAIL"
                    },
                    c.scenario,
                    c.detail
                ))?;
            }
            out.line(format_args!(
                "{} scenario(s): {} passed, {failed} failed, {skipped} not run",
                checks.len(),
                checks.len() - failed - skipped
            ))?;
        }
    }
    Ok(
        if failed == 0 && skipped == 0 && checks.len() == SCENARIOS.len() {
            Exit::Ok
        } else {
            Exit::CheckFailed
        },
    )
}

/// A program path as given, or found on `PATH`.
fn resolve_program(program: &str) -> Result<std::path::PathBuf, Failure> {
    let path = std::path::Path::new(program);
    if program.contains('/') {
        return path
            .canonicalize()
            .map_err(|e| Failure::usage(format!("{program}: {e}")));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| Failure::usage(format!("{program}: not found on PATH")))
}
