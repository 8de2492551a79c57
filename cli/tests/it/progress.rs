//! Issue 22 item 4: a run's live progress. On a terminal (a pty made by util-linux `script`),
//! progress lines on stderr; piped or `--quiet`, none; `--format jsonl`, one JSON object per
//! recorded event, ending with the summary, valid against `docs/run-events.schema.json`.

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::{craik, repo_root, transcript};

/// `craik ARGS` on a 200-column pseudo-terminal (`script -qec`), stdout and stderr both to it: exit code
/// and everything the terminal received.
fn on_terminal(dir: &Path, args: &[&str]) -> (i32, String) {
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    // A wide terminal: the status line is cut to the terminal's width.
    let mut line = format!(
        "stty rows 50 cols 200; {}",
        quote(&exe.display().to_string())
    );
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(dir)
        .env("CRAIK_CONFIG", "none")
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The lines a terminal shows: our own "clear line" sequences removed, split at `\r` and `\n`.
fn screen_lines(raw: &str) -> Vec<String> {
    raw.replace("\x1b[2K", "")
        .split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn position(lines: &[String], starts: &str) -> usize {
    lines
        .iter()
        .position(|l| l.starts_with(starts))
        .unwrap_or_else(|| panic!("no line starting {starts:?} in:\n{}", lines.join("\n")))
}

fn stream(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every line valid against the documented schema, numbered 0, 1, 2, ..., the last the summary.
fn assert_documented(lines: &[Value]) {
    let text = std::fs::read_to_string(repo_root().join("docs/run-events.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::meta::validate(&schema).unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    for (n, line) in lines.iter().enumerate() {
        let errors: Vec<String> = validator.iter_errors(line).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "line {n}: {line}: {errors:?}");
        assert_eq!(line["seq"], json!(n), "line {n}: {line}");
        assert!(line["event"].is_string(), "line {n}: {line}");
    }
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "summary", "{last}");
    assert_eq!(
        lines.iter().filter(|l| l["event"] == "summary").count(),
        1,
        "one summary"
    );
}

fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == kind).collect()
}

#[test]
fn issue_22_a_run_on_a_terminal_shows_phases_verdicts_and_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let example = repo_root().join("examples/docs-review");
    let (code, raw) = on_terminal(
        dir.path(),
        &["run", &example.display().to_string(), "--home", "home"],
    );
    assert_eq!(code, 0, "{raw}");
    let lines = screen_lines(&raw);
    let plan = position(&lines, "▸ iteration 1 · plan");
    let act = position(&lines, "▸ iteration 1 · act");
    let proposed = position(
        &lines,
        "  proposed          action_1_0 repo.read read README.md",
    );
    let verdict = position(
        &lines,
        "  allow             action_1_0 repo.read README.md [trusted-local.read]",
    );
    let done = position(&lines, "    done   action_1_0: read README.md (104 bytes)");
    let write = position(
        &lines,
        "  allow             action_5_0 repo.write.docs docs/status.md [grant.grant_docs_write]",
    );
    let halted = position(&lines, "■ completed: runner evaluated the task as done");
    let summary = position(&lines, "run run_");
    assert!(
        plan < act && act < proposed && proposed < verdict && verdict < done,
        "{lines:#?}"
    );
    assert!(
        done < write && write < halted && halted < summary,
        "{lines:#?}"
    );
    // The progress lines that do not depend on the machine (outcomes name confinement
    // details, the summary run ids and times), as an operator sees them.
    let shown: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| {
            [
                "▸ ",
                "■ ",
                "  step ",
                "  proposed ",
                "  allow ",
                "  deny ",
                "  requires_approval ",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .collect();
    insta::assert_snapshot!(shown.join("\n"));
    // The summary stays what a piped run prints, line for line.
    assert!(
        lines[summary..]
            .iter()
            .any(|l| l.starts_with("  verdicts  7 allow, 0 requires approval, 0 deny")),
        "{lines:#?}"
    );
}

#[test]
fn issue_22_a_piped_or_quiet_run_prints_no_progress() {
    let dir = tempfile::tempdir().unwrap();
    let example = repo_root().join("examples/docs-review");
    let out = craik()
        .current_dir(dir.path())
        .args(["run", &example.display().to_string(), "--home", "home"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Only the new home and the key generated on first use (issue 30: a `--home` naming
    // nothing says so): no progress line, no terminal sequence.
    assert_eq!(stderr.lines().count(), 2, "{}", transcript(&out));
    assert!(stderr.starts_with("craik: no Craik home at "), "{stderr}");
    assert!(
        stderr.contains("\ncraik: generated a receipt signing key"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b') && !stderr.contains('▸'));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("run run_"), "{stdout}");
    assert_eq!(stdout.lines().count(), 5, "{stdout}");

    // On a terminal, --quiet: the summary only.
    let (code, raw) = on_terminal(
        dir.path(),
        &[
            "run",
            &example.display().to_string(),
            "--home",
            "home",
            "--quiet",
        ],
    );
    assert_eq!(code, 0, "{raw}");
    assert!(!raw.contains('\x1b') && !raw.contains('▸'), "{raw:?}");
    assert!(raw.starts_with("run run_"), "{raw}");
}

#[test]
fn issue_22_jsonl_stream_of_the_approval_example_validates_and_ends_with_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let out = craik()
        .arg("run")
        .arg(repo_root().join("examples/approval"))
        .arg("--home")
        .arg(&home)
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", transcript(&out));
    let lines = stream(&out.stdout);
    assert_documented(&lines);
    let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "phase",
            "step",
            "phase",
            "step",
            "action",
            "verdict",
            "awaiting_approval",
            "summary"
        ]
    );
    let verdict = events(&lines, "verdict")[0];
    assert_eq!(verdict["action"], "action_1_0", "{verdict}");
    assert_eq!(verdict["decision"], "requires_approval", "{verdict}");
    assert_eq!(verdict["target"], "docs/status.md", "{verdict}");
    let parked = events(&lines, "awaiting_approval")[0];
    let approval = parked["approval"].as_str().unwrap().to_owned();
    assert!(
        parked["reason"]
            .as_str()
            .unwrap()
            .contains("for action_1_0 repo.write.docs docs/status.md"),
        "{parked}"
    );
    let summary = lines.last().unwrap();
    let id = summary["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(summary["tally"]["approval"], 1, "{summary}");
    assert_eq!(summary["journal_valid"], true, "{summary}");
    // The decision line names the receipt the journal holds for that action.
    let receipts = crate::runs::receipts(&home, &id);
    assert!(
        receipts
            .iter()
            .any(|r| r["id"] == verdict["receipt"] && r["action"] == "action_1_0"),
        "{verdict}"
    );

    // Approved, the resumed run streams the rest, each line documented.
    assert_eq!(
        crate::runs::approve(&home, &approval, "user:alice")
            .status
            .code(),
        Some(0)
    );
    let out = craik()
        .args([
            "runs", "resume", &id, "--by", "user:op", "--format", "jsonl", "--home",
        ])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let resumed = stream(&out.stdout);
    assert_documented(&resumed);
    // The two streams show exactly the events the run recorded, in order.
    let recorded: Vec<String> =
        std::fs::read_to_string(home.join("runs").join(&id).join("events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let e: Value = serde_json::from_str(l).unwrap();
                match e["event"].as_str().unwrap() {
                    "step_request" => "phase".to_owned(),
                    "step_result" => "step".to_owned(),
                    "parked" => "awaiting_approval".to_owned(),
                    other => other.to_owned(),
                }
            })
            .collect();
    let shown: Vec<String> = lines
        .iter()
        .chain(&resumed)
        .map(|l| l["event"].as_str().unwrap().to_owned())
        .filter(|k| !["action", "verdict", "text", "summary"].contains(&k.as_str()))
        .collect();
    assert_eq!(shown, recorded);
    let lines = resumed;
    let verdict = events(&lines, "verdict")[0];
    assert_eq!(
        (&verdict["action"], &verdict["decision"]),
        (&json!("action_1_0"), &json!("allow")),
        "{verdict}"
    );
    assert_eq!(events(&lines, "executing")[0]["action"], "action_1_0");
    let outcome = events(&lines, "outcome")[0];
    assert_eq!(
        (&outcome["action"], &outcome["ok"]),
        (&json!("action_1_0"), &json!(true))
    );
    assert_eq!(events(&lines, "halted")[0]["status"], "completed");
    assert_eq!(lines.last().unwrap()["run"]["status"], "completed");

    // --quiet: the summary line only.
    let out = craik()
        .arg("run")
        .arg(repo_root().join("examples/approval"))
        .arg("--home")
        .arg(&home)
        .args(["--format", "jsonl", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", transcript(&out));
    let lines = stream(&out.stdout);
    assert_eq!(lines.len(), 1, "{}", transcript(&out));
    assert_documented(&lines);
}

/// Display forgery (DESIGN.md §9) on the live display: a runner's summaries, and the text it
/// streams (the fixture adapter streams each summary as `text_delta`s), hold ESC sequences, an
/// OSC title, a bidi override and newlines; the terminal receives none of them raw and no line
/// of its own.
#[test]
fn issue_22_live_progress_escapes_what_the_runner_said() {
    crate::ensure_adapters();
    let forged = "run run_forged: completed — pre-approved by user:security";
    // Words after the sequences: streamed text is shown up to its last whitespace.
    let hostile = format!("ok\n{forged}\r\x1b[2J\x1b]0;pwned\x07\u{202e}evil\x1b[0m and more");
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([
        {"phase":"plan","summary": hostile},
        {"phase":"act","summary": hostile, "proposed_actions":[
            {"id":"action_x","capability":"repo.write.docs","operation":"write",
             "target":"docs/a.md","content":"x\n","reason": hostile}
        ]},
        {"phase":"observe","summary": hostile},
        {"phase":"evaluate","summary": hostile, "next":"stop"}
    ]);
    let ex = crate::runs::scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.write.docs", &["docs/**"], &["write"])],
        steps,
        &[("docs/a.md", "a\n")],
    );
    let (code, raw) = on_terminal(
        dir.path(),
        &[
            "run",
            &ex.display().to_string(),
            "--home",
            "home",
            "--runner",
            "fixture-adapter",
        ],
    );
    let lines = screen_lines(&raw);
    // The run got as far as showing the runner's words (escaped) on the status line and in
    // its progress lines.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  step plan completed: ok\\nrun run_forged")),
        "{code}: {lines:#?}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with("iteration 1 · plan · run run_forged: completed")
                && l.contains(r"\r\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}evil\u{1b}[0m and")
        ),
        "the streamed text on the status line: {lines:#?}"
    );
    for line in &lines {
        assert!(
            !line.chars().any(|c| c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "a raw control character reached the terminal: {line:?}"
        );
        assert!(
            !line.starts_with("run run_forged"),
            "a forged line: {line:?}"
        );
    }
}

/// `craik` as a std command (to signal it), with no configuration and its own state dir.
fn std_craik(dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"));
    cmd.env("CRAIK_CONFIG", "none")
        .env("XDG_STATE_HOME", dir.join("state"));
    cmd
}

/// Sends `signal` to `pid` (the `kill` utility: the tests link no libc binding).
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until `path` holds `needle` (at most 60 s).
fn wait_for(path: &std::path::Path, needle: &str) {
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(60) {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never held {needle}", path.display());
}

/// The one run directory under `home`.
fn only_run(home: &std::path::Path) -> std::path::PathBuf {
    let started = std::time::Instant::now();
    loop {
        if let Some(dir) = std::fs::read_dir(home.join("runs"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
        {
            return dir.path();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Issue 22 item 4: Ctrl-C stops a run cleanly — the adapter call or the command in flight
/// ends at once, and the run is signed `interrupted` (not a runner violation, not a run left
/// "running" for `craik runs recover`); a second signal takes the hard path.
#[test]
fn issue_22_ctrl_c_stops_a_run_cleanly_and_signs_it_interrupted() {
    crate::ensure_adapters();
    // 1. While the adapter thinks (it never answers its first step).
    let dir = tempfile::tempdir().unwrap();
    let adapter = crate::adapters::hostile(dir.path(), "hang");
    let home = dir.path().join("home");
    let child = std_craik(dir.path())
        .arg("run")
        .arg(crate::runs::example("docs-review"))
        .arg("--home")
        .arg(&home)
        .arg("--runner")
        .arg(format!("adapter:{}", adapter.display()))
        .args(["--step-timeout-secs", "120"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let run_dir = only_run(&home);
    wait_for(&run_dir.join("events.jsonl"), "\"step_request\"");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the step in flight ends at once"
    );
    let text = crate::transcript(&out);
    assert!(text.contains("SIGINT (Ctrl-C): stopping the run"), "{text}");
    assert_eq!(
        out.status.code(),
        Some(130),
        "as a process stopped by SIGINT: {text}"
    );
    let id = run_dir.file_name().unwrap().to_str().unwrap().to_owned();
    let run = crate::runs::run_json(&home, &id);
    assert_eq!(run["status"], "interrupted", "{text}");
    let reason = run["stop_reason"].as_str().unwrap();
    assert!(
        reason.contains("interrupted by SIGINT (Ctrl-C)"),
        "{reason}"
    );
    let receipts = crate::runs::receipts(&home, &id);
    assert!(
        !receipts
            .iter()
            .any(|r| r["capability"] == "kernel.runner-violation"),
        "stopping the run is not the runner's violation: {receipts:?}"
    );
    crate::runs::verify_run(&home, &id, false);

    // 2. While a command runs: it is killed, its outcome signed, nothing after it runs.
    let dir = tempfile::tempdir().unwrap();
    let steps = crate::runs::act(serde_json::json!([
        {"id":"action_sleep","capability":"shell.test","operation":"execute","argv":["sleep","60"],"timeout_ms":100000},
        {"id":"action_after","capability":"shell.test","operation":"execute","argv":["sleep","0"]},
    ]));
    let ex = crate::runs::scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["sleep"], &["execute"])],
        steps,
        &[],
    );
    let home = dir.path().join("home");
    let child = std_craik(dir.path())
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let run_dir = only_run(&home);
    wait_for(&run_dir.join("events.jsonl"), r#""argv":["sleep","60"]"#);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the command ends at once: {}",
        crate::transcript(&out)
    );
    let id = run_dir.file_name().unwrap().to_str().unwrap().to_owned();
    let run = crate::runs::run_json(&home, &id);
    assert_eq!(run["status"], "interrupted", "{}", crate::transcript(&out));
    let receipts = crate::runs::receipts(&home, &id);
    let outcome = receipts
        .iter()
        .find(|r| r["decided_by"]["kind"] == "outcome")
        .expect("the killed command's outcome is signed");
    assert!(
        outcome.to_string().contains("interrupted by SIGINT"),
        "{outcome}"
    );
    assert_eq!(
        receipts
            .iter()
            .filter(|r| r["capability"] == "shell.test")
            .count(),
        2,
        "the interrupted command's decision and outcome; nothing after it is decided or done: {receipts:?}"
    );
    crate::runs::verify_run(&home, &id, false);
}
