//! Issue 21 item 4: one signed `model.step` receipt per model step a runner reports; the
//! provider token budget and the wall-clock budget end a run `interrupted` with a handoff;
//! lying usage is a runner violation; `runs show` and `craik audit` report tokens and budgets.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::runs::{json_out, receipts, run_example, run_json, scratch_example, verify_run};
use crate::{craik, transcript};

/// A scripted model step of `input` + `output` tokens.
fn model_step(input: u64, output: u64) -> Value {
    json!({"provider":"fixture","model":"fixture-model-1","endpoint_host":"fixture.invalid",
           "request_sha256": format!("sha256:{}", "ab".repeat(32)),
           "response_id":"resp_fixture","input_tokens":input,"output_tokens":output,
           "total_tokens":input + output,"latency_ms":5,"retries":0,"streamed":false,
           "outcome":"ok"})
}

/// plan (100 tokens) → act (950 tokens, one write proposed) → observe → evaluate.
fn expensive_act() -> Value {
    json!([
        {"phase":"plan","summary":"plan","model_steps":[model_step(60, 40)]},
        {"phase":"act","summary":"act","model_steps":[model_step(500, 200), model_step(150, 100)],
         "proposed_actions":[{"id":"action_w","capability":"repo.write.docs","operation":"write",
                              "target":"docs/out.md","content":"written\n"}]},
        {"phase":"observe","summary":"observe"},
        {"phase":"evaluate","summary":"done","next":"stop"}
    ])
}

fn model_receipts(home: &Path, id: &str) -> Vec<Value> {
    receipts(home, id)
        .into_iter()
        .filter(|r| r["capability"] == "model.step")
        .collect()
}

fn docs_grant() -> [(
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
); 1] {
    [("repo.write.docs", &["docs/**"], &["write"])]
}

#[test]
fn issue_21_over_the_token_budget_the_run_ends_interrupted_before_the_steps_actions() {
    for runner in ["fixture", "fixture-adapter"] {
        if runner == "fixture-adapter" {
            crate::ensure_adapters();
        }
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &docs_grant(),
            expensive_act(),
            &[("docs/keep.md", "k\n")],
        );
        let home = dir.path().join("home");
        let (exit, id, text) =
            run_example(&home, &ex, &["--runner", runner, "--token-budget", "1000"]);
        assert_eq!(exit, 1, "{runner}: {text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "interrupted", "{runner}: {text}");
        let reason = "provider token budget exceeded: 1050 of 1000 tokens used";
        assert_eq!(run["stop_reason"], reason, "{runner}");
        assert_eq!(run["provider_token_budget"], 1000);
        // The handoff names the budget.
        let handoff: Value = serde_json::from_str(
            &std::fs::read_to_string(home.join("runs").join(&id).join("handoff.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(handoff["status"], "incomplete");
        assert!(
            handoff["next_steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().starts_with("Raise --token-budget")),
            "{runner}: {handoff}"
        );
        assert!(
            handoff["summary"].as_str().unwrap().contains(reason),
            "{runner}: {}",
            handoff["summary"]
        );
        // One signed receipt per model step, adapter-reported, cumulative totals growing.
        let steps = model_receipts(&home, &id);
        assert_eq!(steps.len(), 3, "{runner}: {steps:?}");
        let totals: Vec<u64> = steps
            .iter()
            .map(|r| {
                r["result"]["metadata"]["cumulative_total_tokens"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(totals, [100, 800, 1050]);
        for r in &steps {
            let m = &r["result"]["metadata"];
            assert_eq!(m["reported_by"], "adapter");
            assert_eq!(m["provider_token_budget"], 1000);
            assert_eq!(m["endpoint_host"], "fixture.invalid");
            assert_eq!(r["target"], "fixture:fixture-model-1");
            assert_eq!(r["request_hash"], format!("sha256:{}", "ab".repeat(32)));
        }
        // Nothing of the offending act step was decided or done.
        let all = receipts(&home, &id);
        assert!(
            all.iter().all(|r| r["capability"] != "repo.write.docs"),
            "{runner}: {all:?}"
        );
        assert!(
            !home
                .join("runs")
                .join(&id)
                .join("workspace/docs/out.md")
                .exists()
        );
        let events =
            std::fs::read_to_string(home.join("runs").join(&id).join("events.jsonl")).unwrap();
        assert!(!events.contains("action_w"), "{runner}: {events}");
        // The budgets are signed with the inputs.
        assert_eq!(all[0]["capability"], "run.inputs");
        assert_eq!(all[0]["result"]["metadata"]["provider_token_budget"], 1000);
        verify_run(&home, &id, false);
        // `runs show`: used and left, both formats.
        let shown = json_out(&home, &["runs", "show", &id]);
        let b = &shown["budget"];
        assert_eq!(b["tokens"]["total_tokens"], 1050);
        assert_eq!(b["tokens"]["model_steps"], 3);
        assert_eq!(b["provider_token_budget"], 1000);
        assert_eq!(b["tokens_left"], 0);
        assert!(b["wall_clock_used_seconds"].is_u64());
        assert_eq!(b["wall_clock_budget_seconds"], Value::Null);
        let out = craik()
            .args(["runs", "show", &id, "--home"])
            .arg(&home)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let tokens = text.lines().find(|l| l.starts_with("tokens")).unwrap();
        insta::assert_snapshot!("issue_21_runs_show_tokens", tokens);
        assert!(
            text.lines()
                .any(|l| l.starts_with("wall clock ") && l.contains("no budget")),
            "{text}"
        );
    }
}

#[test]
fn issue_21_within_the_budget_the_run_completes_with_one_receipt_per_model_step() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &docs_grant(),
        expensive_act(),
        &[],
    );
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &ex, &["--token-budget", "1050"]);
    assert_eq!(exit, 0, "{text}");
    assert_eq!(run_json(&home, &id)["status"], "completed");
    let steps = model_receipts(&home, &id);
    assert_eq!(steps.len(), 3);
    // Model steps do not count as decisions in the run's tally.
    assert!(
        text.contains("verdicts  1 allow, 0 requires approval, 0 deny; 1 side effects"),
        "{text}"
    );
    assert!(
        text.contains("tokens    1050 of 1050 tokens used, 0 left (710 in, 340 out; 3 model step(s), adapter-reported)"),
        "{text}"
    );
    verify_run(&home, &id, false);
    let shown = json_out(&home, &["runs", "show", &id]);
    assert_eq!(shown["budget"]["tokens_left"], 0);
    // `craik audit`: human, JSON and HTML list the model steps with tokens and the budget.
    let out = craik()
        .args(["audit", &id, "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let human = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = human
        .lines()
        .filter(|l| l.trim_start().starts_with("model step:") || l.starts_with("  model "))
        .map(str::trim)
        .collect();
    insta::assert_snapshot!("issue_21_audit_model_steps", lines.join("\n"));
    let audit = json_out(&home, &["audit", &id]);
    let run = &audit["runs"][0];
    assert_eq!(run["model_steps"]["total_tokens"], 1050, "{run}");
    assert_eq!(run["model_steps"]["provider_token_budget"], 1050);
    assert_eq!(run["model_steps"]["tokens_left"], 0);
    let html = dir.path().join("audit.html");
    let out = craik()
        .args(["audit", &id, "--home"])
        .arg(&home)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("3 model step(s), 1050 tokens (710 in, 340 out); budget 1050, 0 left"),
        "the run's model steps"
    );
    assert!(page.contains("model step: 250 tokens (150 in, 100 out)"));
}

#[test]
fn issue_21_lying_usage_is_a_runner_violation() {
    let mut too_many: Vec<Value> = Vec::new();
    for _ in 0..65 {
        too_many.push(model_step(1, 1));
    }
    let mut sum_wrong = model_step(10, 10);
    sum_wrong["total_tokens"] = json!(5);
    let huge = model_step(20_000_000, 0);
    let mut url_host = model_step(1, 1);
    url_host["endpoint_host"] = json!("https://user:pw@api.example.com/v1?key=x");
    let mut control = model_step(1, 1);
    control["model"] = json!("gpt\u{1b}[2J");
    let cases = [
        (
            "total is not the sum",
            vec![sum_wrong],
            "total_tokens 5 is not input_tokens 10 + output_tokens 10",
        ),
        (
            "huge",
            vec![huge],
            "input_tokens 20000000 is above the ceiling",
        ),
        (
            "too many steps",
            too_many,
            "65 model steps reported in one step; at most 64",
        ),
        (
            "a URL for a host",
            vec![url_host],
            "endpoint_host `https://[REDACTED]@api.example.com/v1?key=x` has a character",
        ),
        ("control bytes", vec![control], "model `gpt"),
    ];
    for (what, reports, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let steps = json!([{"phase":"plan","summary":"plan","model_steps":reports}]);
        let ex = scratch_example(dir.path(), "trusted-local", &[], steps, &[]);
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &ex, &["--token-budget", "100000000"]);
        assert_eq!(exit, 1, "{what}: {text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "failed", "{what}");
        let reason = run["stop_reason"].as_str().unwrap();
        assert!(
            reason.starts_with("runner violation: ") && reason.contains(expect),
            "{what}: {reason}"
        );
        assert!(!reason.contains('\u{1b}'), "{what}: shown escaped");
        let rs = receipts(&home, &id);
        // Outside testing round 11: a refused report is no reason to sign nothing — each
        // reported exchange is signed by the host, usage unknown (never the adapter's counts).
        let steps: Vec<&Value> = rs
            .iter()
            .filter(|r| r["capability"] == "model.step")
            .collect();
        assert!(!steps.is_empty() && steps.len() <= 64, "{what}");
        for r in &steps {
            let m = &r["result"]["metadata"];
            assert_eq!(
                (&m["reported_by"], &m["usage"]),
                (&json!("host"), &json!("unknown")),
                "{what}"
            );
            assert!(m.get("total_tokens").is_none(), "{what}");
        }
        let violation = &rs[rs.len() - 2];
        assert_eq!(
            violation["determining_policies"],
            json!(["kernel.runner-violation"])
        );
        verify_run(&home, &id, false);
    }
}

/// An adapter that answers like the fixture adapter but first sends `event` (its
/// `request` filled in) during the first step; with `null`, it hangs at the first step.
fn lying_adapter(dir: &Path, event: &Value) -> PathBuf {
    crate::ensure_adapters();
    let fixture = assert_cmd::cargo::cargo_bin("craik").with_file_name("craik-adapter-fixture");
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is needed for this test");
    let python = String::from_utf8(python.stdout).unwrap().trim().to_owned();
    let script = dir.join("lying.py");
    std::fs::write(
        &script,
        format!(
            r#"#!{python}
import json, subprocess, sys, time
EVENT = json.loads({event:?})
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
sent = False
for line in sys.stdin.buffer:
    req = json.loads(line)
    if EVENT is None and req.get("method") == "step":
        time.sleep(60)
    child.stdin.write(line); child.stdin.flush()
    if "id" not in req: continue
    while True:
        out = child.stdout.readline()
        if not out: sys.exit(0)
        msg = json.loads(out)
        if req.get("method") == "step" and msg.get("id") == req["id"] and not sent:
            EVENT["params"]["request"] = req["id"]
            sys.stdout.buffer.write(json.dumps(EVENT).encode() + b"\n")
            sent = True
        sys.stdout.buffer.write(out); sys.stdout.flush()
        if msg.get("id") == req["id"]: break
"#,
            event = event.to_string()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _ = fixture;
    script
}

#[test]
fn issue_21_negative_or_malformed_usage_on_the_channel_is_a_runner_violation() {
    let mut negative = model_step(10, 10);
    negative["input_tokens"] = json!(-30);
    negative["total_tokens"] = json!(-20);
    let mut unknown = model_step(1, 1);
    unknown["cost_usd"] = json!(1);
    let event = |kind: &str, report: Option<Value>| {
        let mut params = json!({"request": 0, "kind": kind});
        if let Some(r) = report {
            params["model_step"] = r;
        }
        json!({"method":"event","params":params})
    };
    let cases = [
        (
            "negative tokens",
            event("model_step", Some(negative)),
            "input_tokens",
        ),
        (
            "an unknown field",
            event("model_step", Some(unknown)),
            "cost_usd",
        ),
        (
            "kind without a report",
            event("model_step", None),
            "without a `model_step` report",
        ),
        (
            "a report on a log event",
            event("log", Some(model_step(1, 1))),
            "with a `model_step` report",
        ),
    ];
    for (what, line, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[],
            json!([{"phase":"plan","summary":"plan"},{"phase":"act","summary":"act"},
                   {"phase":"observe","summary":"o"},{"phase":"evaluate","summary":"e","next":"stop"}]),
            &[],
        );
        let script = lying_adapter(dir.path(), &line);
        let fixture = assert_cmd::cargo::cargo_bin("craik").with_file_name("craik-adapter-fixture");
        let runner = format!(
            "adapter:{} {} --fixture {}",
            script.display(),
            fixture.display(),
            ex.join("scenario.json").display()
        );
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(
            &home,
            &ex,
            &["--runner", &runner, "--step-timeout-secs", "20"],
        );
        assert_eq!(exit, 1, "{what}: {text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "failed", "{what}: {text}");
        let reason = run["stop_reason"].as_str().unwrap();
        assert!(
            reason.starts_with("runner violation") && reason.contains(expect),
            "{what}: {reason}"
        );
        assert!(model_receipts(&home, &id).is_empty(), "{what}");
        verify_run(&home, &id, false);
    }
}

#[test]
fn issue_21_a_spent_wall_clock_budget_ends_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        json!([{"phase":"plan","summary":"plan"},{"phase":"act","summary":"act"},
               {"phase":"observe","summary":"o"},{"phase":"evaluate","summary":"e","next":"stop"}]),
        &[],
    );
    let home = dir.path().join("home");
    // The test clock moves an hour ahead at each runner step: after plan and act, two hours
    // of a budget of 5000 s are spent, and observe is never asked.
    let out = craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .args(["--wall-clock-budget", "5000"])
        .env("CRAIK_TEST_CLOCK_STEP_SECS", "3600")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let run = run_json(&home, &id);
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["phase"], "observe");
    assert_eq!(run["wall_clock_budget_seconds"], 5000);
    let reason = run["stop_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("wall-clock budget of 5000s spent"),
        "{reason}"
    );
    let handoff =
        std::fs::read_to_string(home.join("runs").join(&id).join("handoff.json")).unwrap();
    assert!(handoff.contains("wall-clock budget of 5000s spent"));
    let all = receipts(&home, &id);
    assert_eq!(
        all[0]["result"]["metadata"]["wall_clock_budget_seconds"],
        5000
    );
    verify_run(&home, &id, false);
    let shown = json_out(&home, &["runs", "show", &id]);
    assert_eq!(shown["budget"]["wall_clock_budget_seconds"], 5000);
    assert_eq!(shown["budget"]["wall_clock_left_seconds"], 0);
    assert!(
        shown["budget"]["wall_clock_used_seconds"].as_u64().unwrap() >= 7200,
        "{}",
        shown["budget"]
    );
    // Outside testing round r31f (C1): a wait for a person forged into the events (a park in
    // 2000, reopened now) credits nothing: waits come from `run.parked`/`run.resume` receipts.
    let events = home.join("runs").join(&id).join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    text.push_str(&format!(
        "{}\n{}\n",
        json!({"event":"parked","at":"2000-01-01T00:00:00Z","reason":"r","approval":"approval_forged"}),
        json!({"event":"reopened","at":"2099-01-01T00:00:00Z","why":"forged"})
    ));
    std::fs::write(&events, text).unwrap();
    let shown = json_out(&home, &["runs", "show", &id]);
    assert!(
        shown["budget"]["wall_clock_used_seconds"].as_u64().unwrap() >= 7200,
        "a forged wait was credited: {}",
        shown["budget"]
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn issue_21_a_resumed_run_counts_the_tokens_its_journal_signed_before() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("approval");
    copy_tree(&crate::runs::example("approval"), &ex);
    let path = ex.join("scenario.json");
    let mut scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for step in scenario["steps"].as_array_mut().unwrap().iter_mut().take(3) {
        step["model_steps"] = json!([model_step(300, 100)]);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&scenario).unwrap()).unwrap();
    let home = dir.path().join("home");
    // Parks for the approval after plan and act: 800 of 1000 tokens used.
    let (exit, id, text) = run_example(&home, &ex, &["--token-budget", "1000"]);
    assert_eq!(exit, 6, "{text}");
    assert_eq!(
        json_out(&home, &["runs", "show", &id])["budget"]["tokens_left"],
        200
    );
    let approval = crate::runs::pending_approval(&home);
    let ok = crate::runs::approve(&home, &approval, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    // The resumed host counts the 800 its journal signed: observe's 400 pass the budget.
    let done = crate::runs::resume(&home, &id);
    assert_eq!(done.status.code(), Some(1), "{}", transcript(&done));
    let run = run_json(&home, &id);
    assert_eq!(run["status"], "interrupted");
    assert_eq!(
        run["stop_reason"],
        "provider token budget exceeded: 1200 of 1000 tokens used"
    );
    assert_eq!(model_receipts(&home, &id).len(), 3);
    verify_run(&home, &id, false);
}

#[test]
fn issue_21_a_step_cut_off_by_the_wall_clock_budget_ends_the_run_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        json!([{"phase":"plan","summary":"plan"}]),
        &[],
    );
    let script = lying_adapter(dir.path(), &Value::Null);
    let fixture = assert_cmd::cargo::cargo_bin("craik").with_file_name("craik-adapter-fixture");
    let runner = format!(
        "adapter:{} {} --fixture {}",
        script.display(),
        fixture.display(),
        ex.join("scenario.json").display()
    );
    let home = dir.path().join("home");
    let started = std::time::Instant::now();
    // The step timeout is 60 s, but only 2 s of the budget are left: the step is cut off then.
    let (exit, id, text) = run_example(
        &home,
        &ex,
        &[
            "--runner",
            &runner,
            "--step-timeout-secs",
            "60",
            "--wall-clock-budget",
            "2",
        ],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{text}"
    );
    assert_eq!(exit, 1, "{text}");
    let run = run_json(&home, &id);
    assert_eq!(run["status"], "interrupted", "{text}");
    assert!(
        run["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("wall-clock budget of 2s spent"),
        "{}",
        run["stop_reason"]
    );
    // Not a runner violation.
    assert!(
        receipts(&home, &id)
            .iter()
            .all(|r| r["determining_policies"] != json!(["kernel.runner-violation"]))
    );
    verify_run(&home, &id, false);
}

/// Outside testing round 9: an `act` step answered in time had all its actions performed long
/// after the wall-clock budget was spent. Now no action is decided once it is spent.
#[test]
fn issue_21_no_action_runs_once_the_wall_clock_budget_is_spent() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.write.docs", &["docs/**"], &["write"])],
        json!([{"phase":"plan","summary":"plan"},
               {"phase":"act","summary":"act","proposed_actions":[
                   {"id":"action_w1","capability":"repo.write.docs","operation":"write","target":"docs/a.md","content":"a"},
                   {"id":"action_w2","capability":"repo.write.docs","operation":"write","target":"docs/b.md","content":"b"}]},
               {"phase":"observe","summary":"o"},{"phase":"evaluate","summary":"e","next":"stop"}]),
        &[],
    );
    let home = dir.path().join("home");
    // An hour per runner step: plan ends at 1 h (within 5000 s), act is asked, and answered at
    // 2 h: its actions come after the budget.
    let out = craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .args(["--wall-clock-budget", "5000"])
        .env("CRAIK_TEST_CLOCK_STEP_SECS", "3600")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let run = run_json(&home, &id);
    assert_eq!(run["status"], "interrupted");
    assert!(
        run["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("wall-clock budget of 5000s spent"),
        "{run}"
    );
    let all = receipts(&home, &id);
    assert!(
        !all.iter().any(|r| r["capability"] == "repo.write.docs"),
        "no action decided after the budget: {all:?}"
    );
    let ws = home.join("runs").join(&id).join("workspace");
    assert!(!ws.join("docs/a.md").exists() && !ws.join("docs/b.md").exists());
    verify_run(&home, &id, false);
}

/// Outside testing round 9: a budget too large to sign left a run directory no command could
/// read. craik.toml's and the flag's budgets are bounded; nothing is written.
#[test]
fn issue_21_a_budget_too_large_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        json!([{"phase":"plan","summary":"p"}]),
        &[],
    );
    let home = dir.path().join("home");
    for (key, value) in [
        ("wall_clock_budget_seconds", "9007199254740992"),
        ("token_budget", "9007199254740992"),
    ] {
        let project = dir.path().join(format!("p-{key}"));
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("craik.toml"),
            format!("[run]\n{key} = {value}\n"),
        )
        .unwrap();
        let out = craik()
            .env_remove("CRAIK_CONFIG")
            .current_dir(&project)
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("run.{key} `{value}`: at most")),
            "{err}"
        );
        assert!(
            !home.join("runs").exists()
                || std::fs::read_dir(home.join("runs")).unwrap().count() == 0
        );
    }
    let out = craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .args(["--wall-clock-budget", "18446744073709551615"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
}

/// A scripted adapter (`python3 SCRIPT PLAN MATRIX`): step k answers with `PLAN[k]`'s summary,
/// after sending its `events` (model-step reports), or with error `error` instead.
fn scripted_adapter(dir: &Path) -> PathBuf {
    let script = dir.join("scripted.py");
    std::fs::write(
        &script,
        r#"import json, sys
plan = json.load(open(sys.argv[1]))
matrix = json.load(open(sys.argv[2]))
n = 0
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    m = req.get("method")
    if m == "initialize":
        send({"id": req["id"], "result": {"protocol_version": "craik.channel/1", "runner": matrix["runner"], "matrix": matrix}}); continue
    if m == "shutdown":
        send({"id": req["id"], "result": {}}); break
    if m != "step": continue
    r = req["params"]["request"]
    step = plan[n] if n < len(plan) else {"summary": "done"}
    n += 1
    for ev in step.get("events", []):
        send({"method": "event", "params": {"request": req["id"], "kind": "model_step", "model_step": ev}})
    if "error" in step:
        send({"id": req["id"], "error": {"code": step["error"], "message": "unavailable, it says"}}); continue
    observed = {"next": step["next"]} if "next" in step else {}
    send({"id": req["id"], "result": {"result": {"schema": "craik.runner_step_result", "version": "0.1.0",
        "id": r["id"].replace("runner_step_request_", "runner_step_result_"), "request_id": r["id"],
        "run_id": r["run_id"], "task_id": r["task_id"], "phase": r["phase"], "runner": r["runner"],
        "status": "completed", "summary": step["summary"], "observed_output": observed,
        "diagnostics": [], "receipt_ids": [], "memory_proposal_ids": [], "artifacts": [],
        "redacted": False, "created_at": r["created_at"]}}})
"#,
    )
    .unwrap();
    script
}

/// Outside testing round 12: unknown is not zero for a live runner either. One that answers
/// without ever reporting a model step gets a host-signed step of unknown usage per answer
/// (a budgeted run ends `interrupted`, not "0 of 1000 used"); one that reports usage and then
/// answers `3 unavailable` has reached its provider — the budget ends the run, and nothing is
/// signed as the operator's setup failure.
#[test]
fn a_live_runner_that_reports_nothing_or_fails_after_reporting_is_held_to_its_budget() {
    let cases = [
        (
            "no report",
            json!([{"summary":"plan"},{"summary":"act"},{"summary":"o"},{"summary":"e","next":"stop"}]),
            "provider token budget cannot be enforced: 1 model step(s) of unknown usage",
        ),
        (
            "usage then unavailable",
            json!([{"summary":"plan","events":[model_step(900_000, 100_000)],"error":3}]),
            "provider token budget exceeded: 1000000 of 1000 tokens used",
        ),
    ];
    for (what, plan, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[],
            json!([{"phase":"plan","summary":"plan"}]),
            &[],
        );
        let script = scripted_adapter(dir.path());
        let plan_file = dir.path().join("plan.json");
        std::fs::write(&plan_file, plan.to_string()).unwrap();
        let matrix = crate::repo_root().join("runners/provider.json");
        let runner = format!(
            "adapter:/usr/bin/python3 {} {} {}",
            script.display(),
            plan_file.display(),
            matrix.display()
        );
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(
            &home,
            &ex,
            &[
                "--runner",
                &runner,
                "--runner-matrix",
                "provider",
                "--token-budget",
                "1000",
                "--step-timeout-secs",
                "20",
            ],
        );
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "interrupted", "{what}: {text}");
        assert!(
            run["stop_reason"].as_str().unwrap().starts_with(reason),
            "{what}: {}",
            run["stop_reason"]
        );
        assert_eq!(exit, 1, "{what}: {text}");
        let rs = receipts(&home, &id);
        assert!(
            rs.iter().all(|r| r["determining_policies"]
                .as_array()
                .is_none_or(|p| !p.contains(&json!("kernel.runner-setup")))),
            "{what}: signed as the operator's setup failure"
        );
        let steps = model_receipts(&home, &id);
        assert_eq!(steps.len(), 1, "{what}");
        if what == "no report" {
            assert_eq!(steps[0]["result"]["metadata"]["usage"], "unknown");
            assert_eq!(steps[0]["result"]["metadata"]["reported_by"], "host");
        }
        verify_run(&home, &id, false);
    }
}
