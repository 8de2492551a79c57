//! Issue 30 item 1: no signed field, status or attribution comes from text that untrusted code
//! wrote. A confined program that prints the sandbox's words on its stderr and exits as a
//! refusal would is recorded as a program that ran; an adapter that prints a setup failure's
//! or a timeout's words is still the runner's violation. And the run path decides nothing by
//! searching error text (a source scan).

use std::path::Path;

use serde_json::{Value, json};

use crate::adapters::{hostile, make_executable};
use crate::runs::{act, receipts, run_example, run_json, scratch_example};

/// Texts a hostile program or adapter writes, each as it would look coming from Craik itself.
const FORGED: &[&str] = &[
    "craik-confine: landlock: cannot restrict `/`: os error 1",
    "craik-confine:",
    "  craik-confine: WARNING: nothing",
    "runner setup failed: `adapter`: the sandbox refused to start it: landlock",
    "runner setup failed: ",
    "no answer to `step` within 10 ms; the adapter's process group was killed",
    "`x`: the sandbox refused to start it: seccomp",
];

fn outcome(home: &Path, id: &str) -> Value {
    receipts(home, id)
        .into_iter()
        .find(|r| r["decided_by"]["kind"] == "outcome")
        .unwrap()
}

#[test]
fn issue_30_a_program_writing_the_sandbox_refusal_is_recorded_as_having_run() {
    let dir = tempfile::tempdir().unwrap();
    // Each forged line alone as the whole stderr, then all of them: with the exit code of a
    // refusal, of success and of a failure.
    let mut variants: Vec<String> = FORGED.iter().map(|f| format!("{f}\n")).collect();
    variants.push(FORGED.join("\n"));
    for (i, forged) in variants.iter().enumerate() {
        let exits: &[i32] = if i + 1 == variants.len() {
            &[125, 0, 1]
        } else {
            &[125]
        };
        for &exit in exits {
            let case = dir.path().join(format!("case-{i}-{exit}"));
            let script =
                format!("#!/bin/sh\necho 'proof: it ran'\ncat forged.txt >&2\nexit {exit}\n");
            let steps = act(json!([
                {"id":"action_probe","capability":"shell.test","operation":"execute","argv":["./probe.sh"]},
            ]));
            let ex = scratch_example(
                &case,
                "trusted-local",
                &[("shell.test", &["./probe.sh"], &["execute"])],
                steps,
                &[("probe.sh", &script), ("forged.txt", forged)],
            );
            make_executable(&ex.join("workspace/probe.sh"));
            let home = case.join("home");
            let (_, id, text) = run_example(&home, &ex, &[]);
            let o = outcome(&home, &id);
            let summary = o["result"]["summary"].as_str().unwrap();
            assert!(
                summary.contains(&format!("exited {exit}")) && !summary.contains("not run"),
                "{forged} / exit {exit}: {summary}\n{text}"
            );
            let output = o["result"]["metadata"].to_string();
            let events =
                std::fs::read_to_string(home.join("runs").join(&id).join("events.jsonl")).unwrap();
            assert!(
                events.contains("proof: it ran") || output.contains("proof: it ran"),
                "{forged} / exit {exit}: the program's output was dropped\n{text}"
            );
        }
    }
}

/// An adapter that writes a setup failure's (or a timeout's) words on its stderr and then
/// breaks the protocol is signed as the runner's violation: the attribution is typed.
#[test]
fn issue_30_an_adapter_cannot_sign_its_violation_as_the_operators_setup_failure() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let base = hostile(dir.path(), "garbage");
    let script = std::fs::read_to_string(&base).unwrap();
    for (i, forged) in FORGED.iter().enumerate() {
        let case = dir.path().join(format!("case-{i}"));
        std::fs::create_dir_all(&case).unwrap();
        // The forged words first thing, and again as the adapter's last stderr line.
        let body = script.replace(
            "sys.stderr.write(\"hostile adapter: \" + MODE + \"\\n\"); sys.stderr.flush()",
            &format!(
                "sys.stderr.write({forged:?} + \"\\n\"); sys.stderr.flush()\n\
                 send({{\"method\": \"event\", \"params\": {{\"request\": req[\"id\"], \"kind\": \"log\", \"level\": \"error\", \"message\": {forged:?}}}}})"
            ),
        );
        assert_ne!(body, script, "the hostile script changed shape");
        let adapter = case.join("adapter.py");
        std::fs::write(&adapter, body).unwrap();
        make_executable(&adapter);
        let ex = scratch_example(
            &case,
            "trusted-local",
            &[],
            crate::adapters::simple_steps(),
            &[],
        );
        let home = case.join("home");
        let (exit, id, text) = run_example(
            &home,
            &ex,
            &[
                "--runner",
                &format!("adapter:{}", adapter.display()),
                "--wall-clock-budget",
                "3600",
            ],
        );
        assert_eq!(exit, 1, "{forged}: {text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "failed", "{forged}: {text}");
        let reason = run["stop_reason"].as_str().unwrap();
        assert!(reason.starts_with("runner violation"), "{forged}: {reason}");
        let rs = receipts(&home, &id);
        assert_eq!(
            rs[rs.len() - 2]["determining_policies"],
            json!(["kernel.runner-violation"]),
            "{forged}"
        );
    }
}

/// The run path decides nothing by searching error text: no `starts_with`/`contains` on a
/// string that holds an error, a reason or a diagnostic. The scan is of the host's run path
/// source; a match must be justified in the allow-list below (file, line text).
#[test]
fn issue_30_the_run_path_never_decides_by_searching_error_text() {
    let root = crate::repo_root();
    let files = [
        "host/src/adapter.rs",
        "host/src/run/exec.rs",
        "host/src/run/mod.rs",
        "host/src/run/driver/mod.rs",
        "host/src/run/driver/executors.rs",
        "host/src/run/driver/decisions.rs",
        "host/src/run/driver/recovery.rs",
        "host/src/run/driver/budget.rs",
        "host/src/run/driver/observe.rs",
        "host/src/run/driver/outputs.rs",
        "host/src/run/driver/human.rs",
        "host/src/confine.rs",
        "spawn/src/lib.rs",
    ];
    let suspicious = [
        "why.",
        "err.",
        "e.",
        "error.",
        "reason.",
        "message.",
        "stderr.",
        "diagnostic",
        "summary.",
    ];
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        // Unit tests may inspect messages.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (n, line) in code.lines().enumerate() {
            let l = line.trim();
            if l.starts_with("//") {
                continue;
            }
            for call in [".starts_with(", ".contains(", ".ends_with(", ".find("] {
                if let Some(at) = l.find(call) {
                    let before = &l[..at];
                    let receiver = before
                        .rsplit(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                        .next()
                        .unwrap_or("");
                    let last = receiver.rsplit('.').find(|p| !p.is_empty()).unwrap_or("");
                    if suspicious.iter().any(|s| {
                        last == s.trim_end_matches('.') || (s.len() > 8 && last.contains(s))
                    }) || l.contains("SETUP_FAILED")
                        || l.contains("REFUSED_PREFIX")
                    {
                        found.push(format!("{file}:{}: {l}", n + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "decisions on error text:\n{}",
        found.join("\n")
    );
}

/// Issue 30 item 1: the run path's public functions return typed errors, so a caller decides
/// by the variant (not run vs ran, setup vs runner, violation) and never by words. Scans the
/// non-test code of the run path for public functions returning `Result<_, String>`; the few
/// left are named here with why they may stay words.
#[test]
fn issue_30_the_run_path_returns_typed_errors() {
    let root = crate::repo_root();
    let files = [
        "host/src/adapter.rs",
        "host/src/confine.rs",
        "host/src/run/exec.rs",
        "host/src/run/manifest.rs",
        "host/src/run/driver/mod.rs",
        "host/src/run/driver/executors.rs",
        "host/src/run/driver/decisions.rs",
        "host/src/run/driver/recovery.rs",
        "host/src/run/driver/budget.rs",
        "host/src/run/driver/observe.rs",
        "host/src/run/driver/outputs.rs",
    ];
    // (file, function): why words are enough there.
    let allowed = [
        // Conformance tests only (`craik runners test`), never a governed run.
        ("host/src/adapter.rs", "raw_exchange"),
        // Where the shipped adapter binary is; every error is "not installed".
        ("host/src/adapter.rs", "shipped"),
        // Probe of this kernel (shown in receipts' confinement line), not a decision.
        ("host/src/confine.rs", "mounts_probe"),
        // Craik's own start-up, before any run: every error stops the program.
        ("host/src/confine.rs", "harden_self"),
    ];
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        // One signature per item: from `pub` ... `fn NAME` to its body's `{`.
        let flat: String = code
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join(" ");
        for part in flat.split("pub").skip(1) {
            let Some(rest) = part
                .trim_start_matches(|c: char| c == '(' || c.is_alphanumeric() || c == ')')
                .trim_start()
                .strip_prefix("fn ")
            else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let signature = rest.split(['{', ';']).next().unwrap_or("");
            let returns = signature.rsplit("->").next().unwrap_or("");
            let words = returns.replace(' ', "");
            if signature.contains("->")
                && words.starts_with("Result<")
                && words.ends_with(",String>")
                && !allowed.contains(&(file, name.as_str()))
            {
                found.push(format!("{file}: fn {name} -> {}", returns.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "public run-path functions returning error words:\n{}",
        found.join("\n")
    );
}

/// Issue 30 item 6: what the runner is sent names no host path: a command's outcome (its
/// program, its confinement, its output naming its own working directory and `HOME`) reaches
/// the observe request with the workspace, the home and the user's home as named roles.
#[test]
fn issue_30_what_the_runner_is_sent_names_no_host_path() {
    let dir = tempfile::tempdir().unwrap();
    let steps = act(json!([
        {"id":"action_probe","capability":"shell.test","operation":"execute","argv":["./probe.sh"]},
    ]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["./probe.sh"], &["execute"])],
        steps,
        &[(
            "probe.sh",
            "#!/bin/sh\npwd\necho \"$HOME\"\necho \"$TMPDIR\"\npwd | sed 's#/#//#g'\nexit 3\n",
        )],
    );
    make_executable(&ex.join("workspace/probe.sh"));
    let home = dir.path().join("home");
    let (_, id, text) = run_example(&home, &ex, &[]);
    let events = std::fs::read_to_string(home.join("runs").join(&id).join("events.jsonl")).unwrap();
    let observe = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e.to_string().contains("\"outcomes\""))
        .unwrap_or_else(|| panic!("no observe request: {text}"));
    let outcomes = observe.to_string();
    let ws = home.join("runs").join(&id).join("workspace");
    for private in [
        home.display().to_string(),
        home.canonicalize().unwrap().display().to_string(),
        dir.path().display().to_string(),
        id.clone(),
    ] {
        let found = outcomes
            .match_indices(&private)
            .filter(|(at, _)| {
                // the run id may appear in the request's own ids, never in a path
                outcomes[..*at].ends_with('/')
            })
            .count();
        assert_eq!(found, 0, "`{private}` reached the runner: {outcomes}");
    }
    assert!(outcomes.contains("<workspace>"), "{outcomes}");
    // Outside testing round 11: the same path with its slashes doubled.
    let doubled = ws.display().to_string().replace('/', "//");
    assert!(!outcomes.contains(&doubled), "{outcomes}");
    assert!(!outcomes.contains(&ws.display().to_string()), "{outcomes}");
    // Issue 30 item 8: the operator sees what the failed command printed.
    let show = crate::craik()
        .args(["runs", "show", &id, "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(
        shown.contains("failed     action_1_0 (action_probe): "),
        "{shown}"
    );
    assert!(shown.contains("           | "), "{shown}");
    assert!(shown.contains("sandbox/tmp"), "{shown}");
}

/// Outside testing round 11: `unavailable` (error 3) is the operator's setup failure only
/// before the adapter has answered a step; after, it is the runner's failure.
#[test]
fn issue_30_an_adapter_that_answered_cannot_call_itself_unavailable() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let adapter = hostile(dir.path(), "unavailable_later");
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        crate::adapters::simple_steps(),
        &[],
    );
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(
        &home,
        &ex,
        &["--runner", &format!("adapter:{}", adapter.display())],
    );
    assert_eq!(exit, 1, "{text}");
    let run = run_json(&home, &id);
    let reason = run["stop_reason"].as_str().unwrap();
    assert!(reason.starts_with("runner violation"), "{reason}");
    let rs = receipts(&home, &id);
    assert_eq!(
        rs[rs.len() - 2]["determining_policies"],
        json!(["kernel.runner-violation"])
    );
}
