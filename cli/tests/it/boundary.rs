//! The reference monitor's boundary (issues 11 and 12): what is decided is exactly what runs.
//! Each test names the attack class it closes and runs generated variants through the real
//! binary.

use serde_json::{Value, json};

use crate::policy::copy_dir;
use crate::runs::{act, receipts, run_example, run_json, scratch_example, verify_run};

/// Issue 11 item 1 (label vs effect): a capability carrying another capability's operation is
/// refused by the kernel and no executor runs, under every profile, whatever the grants.
#[test]
fn issue_11_a_capability_never_runs_another_capabilitys_executor() {
    let files = [
        ("AGENTS.md", "agent rules\n"),
        ("src/lib.rs", "fn main() {}\n"),
        ("docs/adr/0001.md", "decision\n"),
    ];
    let mut variants: Vec<Value> = Vec::new();
    for target in ["AGENTS.md", "src/lib.rs", "docs/adr/0001.md"] {
        for capability in ["repo.read", "shell.test", "memory.read", "net.fetch"] {
            variants.push(
                json!({"id":"action_x","capability":capability,"operation":"write",
                "target":target,"content":"pwned\n"}),
            );
            variants.push(
                json!({"id":"action_x","capability":capability,"operation":"patch",
                "target":target,"edits":[{"old":"\n","new":"pwned\n"}]}),
            );
        }
    }
    for capability in ["repo.read", "repo.write.docs", "memory.propose"] {
        variants.push(
            json!({"id":"action_x","capability":capability,"operation":"execute",
            "argv":["touch","src/lib.rs"],"target":"src/lib.rs"}),
        );
    }
    for profile in ["strict", "trusted-local", "automation"] {
        for action in &variants {
            let dir = tempfile::tempdir().unwrap();
            let ex = scratch_example(
                dir.path(),
                profile,
                &[
                    (
                        "repo.write.docs",
                        &["**"],
                        &["read", "write", "patch", "execute"],
                    ),
                    ("shell.test", &["touch"], &["execute", "write"]),
                ],
                act(json!([action])),
                &files,
            );
            let home = dir.path().join("home");
            let (exit, id, text) = run_example(&home, &ex, &[]);
            assert_eq!(exit, 1, "{profile} {action}: {text}");
            assert_eq!(run_json(&home, &id)["status"], "blocked", "{action}");
            let ws = home.join("runs").join(&id).join("workspace");
            for (path, text) in files {
                assert_eq!(
                    std::fs::read_to_string(ws.join(path)).unwrap(),
                    text,
                    "{profile} {action}: {path} changed"
                );
            }
            let rs = receipts(&home, &id);
            let decision = rs
                .iter()
                .find(|r| r["decided_by"]["kind"] != "outcome" && r["capability"] != "run.inputs")
                .unwrap();
            assert_eq!(decision["decision"], "deny", "{action}");
            assert_eq!(
                decision["determining_policies"],
                json!(["kernel.invalid-request"]),
                "{action}"
            );
            assert!(
                rs.iter()
                    .filter(|r| r["decided_by"]["kind"] == "outcome")
                    .all(|r| r["result"]["status"] != "passed"),
                "{action}: an executor ran"
            );
            verify_run(&home, &id, false);
        }
    }
}

/// Processes whose command line holds `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let raw = std::fs::read(e.path().join("cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(marker).then_some(line)
        })
        .collect()
}

fn wait_until_gone(marker: &str, within: std::time::Duration) -> Vec<String> {
    let start = std::time::Instant::now();
    loop {
        let alive = alive_with(marker);
        if alive.is_empty() || start.elapsed() > within {
            return alive;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[expect(
    clippy::print_stderr,
    reason = "a skipped security test must say so loudly"
)]
pub(crate) fn confinement_available() -> bool {
    let out = crate::craik()
        .args(["__craik-confine", "--probe"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ok = text.starts_with("landlock abi ");
    if !ok {
        eprintln!(
            "\n!!!!! SKIPPED: this kernel has no Landlock ({}); confinement tests cannot run !!!!!\n",
            text.trim()
        );
    }
    ok
}

fn make_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).unwrap();
}

/// Issue 12: planted code run by an allowed command cannot read the signing key or Craik's
/// environment, write outside the workspace or into Craik's home, reach the network, keep
/// config in HOME for the next command, or outlive its step.
#[test]
fn issue_12_an_allowed_command_runs_confined() {
    if !confinement_available() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // trusted-local: the weakest profile still confines whenever the kernel can (strict
    // would park these commands for approval first).
    for profile in ["trusted-local"] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let outside = dir.path().join("outside.txt");
        let marker = format!("craik-survivor-{}-{profile}", std::process::id());
        let script = format!(
            r#"#!/bin/sh
key="{home}/keys/signing.key.pem"
if cat "$key" > out/stolen-key.txt 2>/dev/null; then echo READ > out/key-result.txt; else echo DENIED > out/key-result.txt; fi
cat /proc/$PPID/environ > out/environ.txt 2>/dev/null || echo DENIED > out/environ.txt
for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done | tr '\0' '\n' | grep -c CRAIK_TEST_PLANTED > out/environ-count.txt
echo pwned > "{outside}" 2>/dev/null
echo pwned > "{home}/keys/planted" 2>/dev/null
echo "$HOME" > out/home.txt
if [ -e "$HOME/.gitconfig" ]; then echo PLANTED > out/home-state.txt; else echo EMPTY > out/home-state.txt; fi
# A planted ~/.gitconfig with core.fsmonitor would run at the next command's `git status`.
git init -q . >/dev/null 2>&1; git status >/dev/null 2>&1
printf '[core]\n\tfsmonitor = "touch out/fsmonitor-ran"\n[safe]\n\tdirectory = *\n' > "$HOME/.gitconfig"
cp "$HOME/.gitconfig" out/.gitconfig
/usr/bin/python3 -c 'import socket; s=socket.create_connection(("127.0.0.1", {port}), timeout=2); print("CONNECTED")' > out/net.txt 2>&1
setsid sh -c 'sleep 3; echo late > out/late.txt' {marker} &
(sh -c 'exec sleep 30' {marker} &) &
exit 0
"#,
            home = home.display(),
            outside = outside.display(),
        );
        let steps = act(json!([
            {"id":"action_one","capability":"shell.test","operation":"execute","argv":["./check.sh"]},
            {"id":"action_two","capability":"shell.test","operation":"execute","argv":["./check.sh"]},
        ]));
        let ex = scratch_example(
            dir.path(),
            profile,
            &[("shell.test", &["./check.sh"], &["execute"])],
            steps,
            &[("check.sh", &script), ("out/.keep", "")],
        );
        make_executable(&ex.join("workspace/check.sh"));
        let out = crate::craik()
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(&home)
            .env("CRAIK_TEST_PLANTED", "operator-token-hunter2")
            .output()
            .unwrap();
        let text = crate::transcript(&out);
        assert_eq!(out.status.code(), Some(0), "{profile}: {text}");
        let id = crate::run_id_of(&out.stdout);
        let ws = home.join("runs").join(&id).join("workspace");
        let read =
            |name: &str| std::fs::read_to_string(ws.join("out").join(name)).unwrap_or_default();
        assert_eq!(read("key-result.txt").trim(), "DENIED", "{profile}");
        assert!(!read("stolen-key.txt").contains("PRIVATE KEY"), "{profile}");
        assert!(!read("environ.txt").contains("hunter2"), "{profile}");
        assert_eq!(read("environ-count.txt").trim(), "0", "{profile}");
        assert!(!outside.exists(), "{profile}: wrote outside the workspace");
        assert!(
            !home.join("keys/planted").exists(),
            "{profile}: wrote into the home"
        );
        let cmd_home = read("home.txt");
        assert!(
            !cmd_home.trim().is_empty() && !cmd_home.contains("/workspace"),
            "{cmd_home}"
        );
        // The second command starts with a fresh, empty HOME: nothing the first planted.
        assert_eq!(read("home-state.txt").trim(), "EMPTY", "{profile}");
        assert!(
            !ws.join("out/fsmonitor-ran").exists(),
            "{profile}: a planted gitconfig ran code in the next command"
        );
        assert!(
            !read("net.txt").contains("CONNECTED"),
            "{profile}: {}",
            read("net.txt")
        );
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{profile}: a connection reached the listener"
        );
        // Nothing it started outlives the step: the setsid and double-forked sleepers are gone
        // when `craik run` returns, and nothing writes afterwards.
        assert_eq!(alive_with(&marker), Vec::<String>::new(), "{profile}");
        std::thread::sleep(std::time::Duration::from_millis(3500));
        assert!(
            !ws.join("out/late.txt").exists(),
            "{profile}: a survivor wrote after the run"
        );
        // Every outcome receipt names the confinement applied.
        let rs = receipts(&home, &id);
        let outcomes: Vec<&Value> = rs
            .iter()
            .filter(|r| r["decided_by"]["kind"] == "outcome")
            .collect();
        assert_eq!(outcomes.len(), 2, "{rs:?}");
        for o in outcomes {
            let summary = o["result"]["summary"].as_str().unwrap();
            assert!(summary.contains("confinement: landlock abi"), "{summary}");
            assert!(summary.contains("no sockets (seccomp)"), "{summary}");
            assert!(summary.contains("no capabilities"), "{summary}");
        }
        verify_run(&home, &id, false);
    }
}

/// Starts `craik run` in the background.
fn spawn_run(ex: &std::path::Path, home: &std::path::Path, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
        .arg("run")
        .arg(ex)
        .arg("--home")
        .arg(home)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(marker: &str) {
    let start = std::time::Instant::now();
    while alive_with(marker).is_empty() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "`{marker}` never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Issue 12: whatever a command or an adapter started (double forks, `setsid` daemons) dies
/// with the run — when `craik` is stopped by SIGTERM or SIGINT mid-step, and when an adapter
/// breaks the protocol.
#[test]
fn issue_12_nothing_a_run_started_outlives_it() {
    let hang = |marker: &str| {
        format!(
            "#!/bin/sh\n(sh -c 'sleep 45; true' {marker}-double &) &\nsetsid sh -c 'sleep 45' {marker}-setsid &\nsleep 45\n"
        )
    };
    for signal in [libc_signal::TERM, libc_signal::INT] {
        // A command mid-step.
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("craik-cmd-{}-{signal}", std::process::id());
        let steps = act(json!([
            {"id":"action_hang","capability":"shell.test","operation":"execute","argv":["./hang.sh"],"timeout_ms":60000},
        ]));
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[("shell.test", &["./hang.sh"], &["execute"])],
            steps,
            &[("hang.sh", &hang(&marker))],
        );
        make_executable(&ex.join("workspace/hang.sh"));
        let mut craik = spawn_run(&ex, &dir.path().join("home"), &[]);
        wait_for(&format!("{marker}-setsid"));
        wait_for(&format!("{marker}-double"));
        send(craik.id(), signal);
        let status = craik.wait().unwrap();
        assert_eq!(status.code(), Some(128 + signal), "{status:?}");
        assert_eq!(
            wait_until_gone(&marker, std::time::Duration::from_secs(5)),
            Vec::<String>::new(),
            "signal {signal}: the command's processes survived craik"
        );

        // An adapter that forks and never answers.
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("craik-adapter-{}-{signal}", std::process::id());
        let adapter = dir.path().join("adapter.sh");
        std::fs::write(&adapter, hang(&marker)).unwrap();
        make_executable(&adapter);
        let ex = scratch_example(dir.path(), "trusted-local", &[], act(json!([])), &[]);
        let runner = format!("adapter:{}", adapter.display());
        let mut craik = spawn_run(&ex, &dir.path().join("home"), &["--runner", &runner]);
        wait_for(&format!("{marker}-setsid"));
        wait_for(&format!("{marker}-double"));
        send(craik.id(), signal);
        craik.wait().unwrap();
        assert_eq!(
            wait_until_gone(&marker, std::time::Duration::from_secs(5)),
            Vec::<String>::new(),
            "signal {signal}: the adapter's processes survived craik"
        );
    }
}

/// An adapter that forks helpers and then breaks the protocol: when the run ends, none of its
/// processes is alive.
#[test]
fn issue_12_a_broken_adapters_helpers_die_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("craik-broken-{}", std::process::id());
    let adapter = dir.path().join("adapter.sh");
    std::fs::write(
        &adapter,
        format!(
            "#!/bin/sh\n(sh -c 'sleep 45; true' {marker}-double &) &\nsetsid sh -c 'sleep 45' {marker}-setsid &\nsleep 0.3\necho 'not json'\nsleep 45\n"
        ),
    )
    .unwrap();
    make_executable(&adapter);
    let ex = scratch_example(dir.path(), "trusted-local", &[], act(json!([])), &[]);
    let home = dir.path().join("home");
    let runner = format!("adapter:{}", adapter.display());
    let (exit, id, text) = run_example(&home, &ex, &["--runner", &runner]);
    assert_eq!(exit, 1, "{text}");
    assert_eq!(run_json(&home, &id)["status"], "failed", "{text}");
    assert_eq!(alive_with(&marker), Vec::<String>::new());
}

mod libc_signal {
    pub(super) const INT: i32 = 2;
    pub(super) const TERM: i32 = 15;
}

fn send(pid: u32, signal: i32) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Issue 11 item 11: a journal moved under another run's directory does not verify there.
#[test]
fn issue_11_a_journal_verifies_only_in_its_own_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) =
        run_example(&home, &crate::repo_root().join("examples/docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    verify_run(&home, &id, false);
    let moved = home.join("runs").join("run_20000101t000000_000000");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::copy(
        home.join("runs").join(&id).join("receipts.jsonl"),
        moved.join("receipts.jsonl"),
    )
    .unwrap();
    let out = crate::craik()
        .args(["receipts", "verify"])
        .arg(&moved)
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("INVALID") && stdout.contains(&id),
        "{stdout}"
    );
}

/// Issue 11 item 8: one driver per run. While another process holds the run's lock, `runs
/// resume` refuses; two resumes started together never both drive (the approval is used once,
/// the action runs once, the journal does not fork).
#[test]
fn issue_11_one_driver_per_run() {
    use std::io::BufRead;
    for trial in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path();
        let (exit, id, text) = run_example(h, &crate::repo_root().join("examples/approval"), &[]);
        assert_eq!(exit, 6, "{text}");
        let approval = crate::runs::pending_approval(h);
        assert_eq!(
            crate::runs::approve(h, &approval, "user:alice")
                .status
                .code(),
            Some(0)
        );
        if trial == 0 {
            // Another process holds the lock: resume refuses and changes nothing.
            let lock = h.join("runs").join(&id).join("lock");
            let mut holder = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(30)",
                ])
                .arg(&lock)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(holder.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "locked");
            let before = receipts(h, &id).len();
            let refused = crate::runs::resume(h, &id);
            let _ = holder.kill();
            let _ = holder.wait();
            assert_ne!(
                refused.status.code(),
                Some(0),
                "{}",
                crate::transcript(&refused)
            );
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("being driven"),
                "{}",
                crate::transcript(&refused)
            );
            assert_eq!(receipts(h, &id).len(), before);
        }
        let spawn = || {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
                .args(["runs", "resume", &id, "--by", "user:op", "--home"])
                .arg(h)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        assert!(
            a.status.success() || b.status.success(),
            "{}\n{}",
            crate::transcript(&a),
            crate::transcript(&b)
        );
        for out in [&a, &b] {
            if !out.status.success() {
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("being driven"),
                    "{}",
                    crate::transcript(out)
                );
            }
        }
        verify_run(h, &id, false);
        let rs = receipts(h, &id);
        let by_approval = rs
            .iter()
            .filter(|r| {
                r["decided_by"]["kind"] == "approval" && r["capability"] != "approval.review"
            })
            .count();
        assert_eq!(
            by_approval, 1,
            "trial {trial}: the approval was used {by_approval} times"
        );
        let mut outcomes: Vec<&str> = rs
            .iter()
            .filter(|r| r["decided_by"]["kind"] == "outcome")
            .map(|r| r["action"].as_str().unwrap())
            .collect();
        let n = outcomes.len();
        outcomes.sort_unstable();
        outcomes.dedup();
        assert_eq!(outcomes.len(), n, "trial {trial}: an action ran twice");
    }
}

fn approval_file(home: &std::path::Path, run: &str, approval: &str) -> std::path::PathBuf {
    home.join("runs")
        .join(run)
        .join("approvals")
        .join(format!("{approval}.json"))
}

/// Issue 11 items 7 and 9: an approval is honoured only through its signed review journal —
/// an edited approval file grants nothing, another run's approval is not this run's; bad
/// `--expires-in` and runner look-alike reviewers write nothing; cancelling closes approvals.
#[test]
fn issue_11_approvals_are_bound_to_their_signed_review() {
    use crate::runs::{approve, pending_approval, resume, review, workspace_text};
    let example = crate::repo_root().join("examples/approval");
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path();
    let (_, id, _) = run_example(h, &example, &[]);
    let approval = pending_approval(h);
    let path = approval_file(h, &id, &approval);
    assert!(path.exists(), "{}", path.display());
    // Validation first, nothing written.
    for (by, extra) in [
        ("user:alice", &["--expires-in", "18446744073709551615"][..]),
        ("user:alice", &["--expires-in", "2592001"][..]),
        ("user:RUNNER_FIXTURE", &[][..]),
        ("user:Runner_Fixture", &[][..]),
        ("USER:runner_fixture", &[][..]),
    ] {
        let out = review(h, "approve", &approval, by, extra);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{by} {extra:?}: {}",
            crate::transcript(&out)
        );
    }
    assert!(
        !h.join("reviews").exists(),
        "a refused review wrote a journal"
    );
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(record["status"], "pending");

    // A forged approval file (no review journal) grants nothing.
    let mut forged = record.clone();
    forged["status"] = json!("approved");
    forged["decided_by"] = json!("user:mallory");
    forged["decided_at"] = json!("2026-11-20T10:00:00Z");
    forged["reason"] = json!("trust me");
    std::fs::write(&path, serde_json::to_string(&forged).unwrap()).unwrap();
    let _ = resume(h, &id);
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: stale"));
    assert!(
        receipts(h, &id)
            .iter()
            .all(|r| r["decided_by"]["kind"] != "approval"),
        "a forged approval was honoured"
    );

    // Another run's genuine approval (same home, same key) is not this run's.
    let (_, other_id, _) = run_example(h, &example, &[]);
    let other_approval = pending_approval_of(h, &other_id);
    assert_eq!(
        approve(h, &other_approval, "user:alice").status.code(),
        Some(0)
    );
    let mut grafted: Value = serde_json::from_str(
        &std::fs::read_to_string(approval_file(h, &other_id, &other_approval)).unwrap(),
    )
    .unwrap();
    grafted["run_id"] = json!(id);
    std::fs::write(
        approval_file(h, &id, &other_approval),
        serde_json::to_string(&grafted).unwrap(),
    )
    .unwrap();
    let _ = resume(h, &id);
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: stale"));
    assert!(
        receipts(h, &id)
            .iter()
            .all(|r| r["decided_by"]["kind"] != "approval"),
        "another run's approval was honoured"
    );
    // ... while its own run honours it.
    assert_eq!(resume(h, &other_id).status.code(), Some(0));
    assert!(!workspace_text(h, &other_id, "docs/status.md").contains("Status: stale"));

    // Cancelling a parked run closes its pending approvals.
    let third = tempfile::tempdir().unwrap();
    let t = third.path();
    let (_, tid, _) = run_example(t, &example, &[]);
    let pending = pending_approval(t);
    let out = crate::craik()
        .args(["runs", "cancel", &tid, "--by", "user:op", "--home"])
        .arg(t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(approval_file(t, &tid, &pending)).unwrap())
            .unwrap();
    assert_eq!(record["status"], "closed");
    assert_eq!(approve(t, &pending, "user:alice").status.code(), Some(1));
}

/// The pending approval of run `run` (several runs share the home).
fn pending_approval_of(home: &std::path::Path, run: &str) -> String {
    let dir = home.join("runs").join(run).join("approvals");
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    ids.sort();
    ids.remove(0)
}

/// Issue 11 item 7: `inputs.json` is bound to the run's first signed receipt. Editing it
/// (a forged grant, another workspace, another profile) makes resume, recover and cancel
/// refuse; the untouched file continues.
#[test]
fn issue_11_edited_run_inputs_are_refused() {
    let example = crate::repo_root().join("examples/approval");
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "a forged grant",
            Box::new(|v: &mut Value| {
                let task = v["task"]["id"].clone();
                v["grants"].as_array_mut().unwrap().push(json!({
                    "schema": "craik.capability_grant", "version": "0.1.0",
                    "id": "grant_forged", "task_id": task, "capability": "repo.write.code",
                    "target": {"paths": ["**"], "exclude": []}, "operations": ["write"],
                    "reason": "forged", "approved_by": "user:mallory"
                }));
            }),
        ),
        (
            "another workspace",
            Box::new(|v: &mut Value| v["workspace"] = json!("/tmp")),
        ),
        (
            "another profile",
            Box::new(|v: &mut Value| v["profile"] = json!("trusted-local")),
        ),
        ("whitespace only", Box::new(|_: &mut Value| {})),
    ];
    for (what, edit) in edits {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path();
        let (_, id, _) = run_example(h, &example, &[]);
        let path = h.join("runs").join(&id).join("inputs.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
        let before = receipts(h, &id).len();
        for verb in ["resume", "recover", "cancel"] {
            let out = crate::craik()
                .args(["runs", verb, &id, "--by", "user:op", "--home"])
                .arg(h)
                .output()
                .unwrap();
            assert_ne!(
                out.status.code(),
                Some(0),
                "{what}: {verb}: {}",
                crate::transcript(&out)
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("inputs.json"), "{what}: {verb}: {err}");
        }
        assert_eq!(receipts(h, &id).len(), before, "{what}");
    }
}

/// Issue 11 item 2: what is shown is what runs. A shell action whose `target` says another
/// command is refused; receipts, park reasons and `approvals list` show the argv that would
/// run, and the decision receipt names the resolved program and cwd.
#[test]
fn issue_11_receipts_and_displays_name_the_argv_that_runs() {
    for (target, argv) in [
        ("ls", json!(["rm", "-rf", "docs"])),
        ("cargo test", json!(["cargo", "test", "--", "--ignored"])),
        ("ls docs", json!(["ls", "docs "])),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[("shell.test", &["ls", "rm", "cargo"], &["execute"])],
            act(
                json!([{"id":"action_x","capability":"shell.test","operation":"execute",
                "argv": argv, "target": target}]),
            ),
            &[("docs/a.md", "a\n")],
        );
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &ex, &[]);
        assert_eq!(exit, 1, "{target}: {text}");
        let decision = receipts(&home, &id)
            .into_iter()
            .find(|r| r["decided_by"]["kind"] == "kernel" && r["capability"] == "shell.test")
            .unwrap();
        assert!(
            decision["reason"]
                .as_str()
                .unwrap()
                .contains("disagrees with argv"),
            "{decision}"
        );
        assert!(
            home.join("runs")
                .join(&id)
                .join("workspace/docs/a.md")
                .exists()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "strict",
        &[("shell.test", &["ls"], &["execute"])],
        act(
            json!([{"id":"action_x","capability":"shell.test","operation":"execute",
            "argv": ["ls", "docs"]}]),
        ),
        &[("docs/a.md", "a\n")],
    );
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &ex, &[]);
    assert_eq!(exit, 6, "{text}");
    assert!(text.contains(r#"["ls","docs"]"#), "{text}");
    let list = crate::craik()
        .args(["approvals", "list", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(r#"["ls","docs"]"#),
        "{}",
        crate::transcript(&list)
    );
    let decision = receipts(&home, &id)
        .into_iter()
        .find(|r| r["capability"] == "shell.test")
        .unwrap();
    let shown = decision["target"].as_str().unwrap();
    assert!(
        shown.starts_with(r#"["ls","docs"] (program /"#) && shown.contains("/ls, cwd /"),
        "{shown}"
    );
}

/// A copy of the docs-review example in `dir` with its envelope edited by `edit`.
fn docs_review_edited(dir: &std::path::Path, edit: impl Fn(&mut Value)) -> std::path::PathBuf {
    let ex = dir.join("docs-review");
    copy_dir(&crate::repo_root().join("examples/docs-review"), &ex);
    let path = ex.join("policy_envelope.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    ex
}

/// Runs the docs-review example with its envelope edited by `edit`.
pub(crate) fn docs_review_with(
    dir: &std::path::Path,
    edit: impl Fn(&mut Value),
) -> (i32, String, std::path::PathBuf) {
    let ex = docs_review_edited(dir, edit);
    let home = dir.join("home");
    let (exit, id, _) = run_example(&home, &ex, &[]);
    (exit, id, home)
}

/// Issue 11 item 4: the policy envelope decides in a real run — `approval_required` parks the
/// docs write, `denied_capabilities` blocks it, an empty-of-it `allowed_capabilities` blocks
/// it, and `verification_required` keeps a run from completing until the check ran and passed.
#[test]
fn issue_11_the_policy_envelope_decides() {
    let dir = tempfile::tempdir().unwrap();
    let (exit, id, home) = docs_review_with(dir.path(), |_| {});
    assert_eq!(exit, 0);
    assert_eq!(run_json(&home, &id)["status"], "completed");

    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: [(&str, Edit, &str, &str); 4] = [
        (
            "approval_required",
            Box::new(|v| v["approval_required"] = json!(["repo.write.docs"])),
            "blocked",
            "awaiting approval",
        ),
        (
            "denied_capabilities",
            Box::new(|v| v["denied_capabilities"] = json!(["repo.write"])),
            "blocked",
            "envelope.denied",
        ),
        (
            "allowed_capabilities",
            Box::new(|v| v["allowed_capabilities"] = json!(["repo.read", "memory"])),
            "blocked",
            "envelope.not-allowed",
        ),
        (
            "verification_required",
            Box::new(|v| v["verification_required"] = json!(["git.diff_check"])),
            "blocked",
            "verification_required never ran and passed: git.diff_check",
        ),
    ];
    for (what, edit, status, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (exit, id, home) = docs_review_with(dir.path(), edit);
        let parked = reason == "awaiting approval";
        assert_eq!(exit, if parked { 6 } else { 1 }, "{what}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], status, "{what}: {run}");
        assert!(
            run["stop_reason"].as_str().unwrap().contains(reason),
            "{what}: {}",
            run["stop_reason"]
        );
        verify_run(&home, &id, what == "approval_required");
    }
}

/// Issue 11 item 10: a run whose allowed side effect failed does not end `completed`.
#[test]
fn issue_11_a_failed_side_effect_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.write.docs", &["docs/**"], &["patch"])],
        act(
            json!([{"id":"action_p","capability":"repo.write.docs","operation":"patch",
            "target":"docs/a.md","edits":[{"old":"not there","new":"x"}]}]),
        ),
        &[("docs/a.md", "a\n")],
    );
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &ex, &[]);
    assert_eq!(exit, 1, "{text}");
    let run = run_json(&home, &id);
    assert_eq!(run["status"], "failed", "{text}");
    assert!(
        run["stop_reason"]
            .as_str()
            .unwrap()
            .contains("action_1_0 (repo.write.docs docs/a.md)"),
        "{}",
        run["stop_reason"]
    );
    verify_run(&home, &id, false);
}

/// Issue 11 item 10: a first-use key generation killed between the private and the public
/// half leaves a usable home: the public key is derived from the private one.
#[test]
fn issue_11_a_missing_public_key_is_derived_from_the_private_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let example = crate::repo_root().join("examples/docs-review");
    let (exit, _, _) = run_example(&home, &example, &[]);
    assert_eq!(exit, 0);
    let public = home.join("keys/signing.pub.pem");
    let before = std::fs::read_to_string(&public).unwrap();
    std::fs::remove_file(&public).unwrap();
    let (exit, id, text) = run_example(&home, &example, &[]);
    assert_eq!(exit, 0, "{text}");
    assert_eq!(std::fs::read_to_string(&public).unwrap(), before);
    verify_run(&home, &id, false);
}

/// Issue 11 item 5: a home inside the workspace is refused outside trusted-local unless it is
/// the protected `.craik/`; warned about loudly either way.
#[test]
fn issue_18_a_home_inside_the_workspace_is_refused_under_every_profile() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "strict",
        &[],
        act(json!([])),
        &[("a.md", "a\n")],
    );
    let ws = ex.join("workspace");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join("link")).unwrap();
    // Every spelling of a home inside the workspace, under every profile: refused before any
    // key or file is written.
    for home in [
        ws.join("state"),
        ws.join(".craik"),
        ws.join("sub/deeper/.craik"),
        ws.join("sub/../state3"),
        ws.clone(),
    ] {
        for profile in ["strict", "trusted-local", "automation"] {
            let out = crate::craik()
                .arg("run")
                .arg(&ex)
                .arg("--workspace")
                .arg(&ws)
                .arg("--home")
                .arg(&home)
                .args(["--profile", profile])
                .output()
                .unwrap();
            let text = crate::transcript(&out);
            assert_eq!(out.status.code(), Some(2), "{}: {text}", home.display());
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("inside the workspace"), "{err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(
                !home.join("keys").exists() && !home.join("runs").exists(),
                "{}: a refused run wrote into the home",
                home.display()
            );
        }
    }
    // No --home: the default `./.craik` would lie inside the workspace, so the run uses the
    // state directory (XDG_STATE_HOME) and says so.
    let state = dir.path().join("state-home");
    let out = crate::craik()
        .current_dir(&ws)
        .arg("run")
        .arg(&ex)
        .arg("--workspace")
        .arg(&ws)
        .env_remove("CRAIK_HOME")
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    assert!(state.join("craik/keys/signing.pub.pem").is_file());
    assert!(!ws.join(".craik").exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("state-home/craik"));
}

/// Issue 11 item 7: `approvals list/show` render the action the run's signed journal parked;
/// an approval file whose action was edited after the park shows as TAMPERED and cannot be
/// approved.
#[test]
fn issue_11_an_edited_approval_action_cannot_be_approved() {
    use crate::runs::{approve, pending_approval};
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path();
    let (_, id, _) = run_example(h, &crate::repo_root().join("examples/approval"), &[]);
    let approval = pending_approval(h);
    let path = approval_file(h, &id, &approval);
    let original = std::fs::read_to_string(&path).unwrap();
    let mut v: Value = serde_json::from_str(&original).unwrap();
    let proposed = &mut v["action"]["proposed"];
    if proposed.get("edits").is_some() {
        proposed["edits"] = json!([{"old": "Status: stale", "new": "Status: harmless"}]);
    } else {
        proposed["content"] = json!("harmless\n");
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let list = crate::craik()
        .args(["approvals", "list", "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("TAMPERED"),
        "{}",
        crate::transcript(&list)
    );
    let show = crate::craik()
        .args(["approvals", "show", &approval, "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).starts_with("TAMPERED"));
    // The JSON views say it too (issue 13: the flag was only in the human views).
    let listed = crate::runs::json_out(h, &["approvals", "list"]);
    assert_eq!(listed[0]["tampered"], true, "{listed:#}");
    assert!(
        listed[0]["tampered_because"]
            .as_str()
            .unwrap()
            .contains("not the one the run's journal parked")
    );
    let shown = crate::runs::json_out(h, &["approvals", "show", &approval]);
    assert_eq!(shown["tampered"], true);
    let out = approve(h, &approval, "user:alice");
    assert_ne!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not the one the run's journal parked"));
    assert!(!h.join("reviews").exists());
    // Restored, it approves.
    std::fs::write(&path, original).unwrap();
    assert_eq!(
        crate::runs::json_out(h, &["approvals", "list"])[0]["tampered"],
        false
    );
    assert_eq!(approve(h, &approval, "user:alice").status.code(), Some(0));
}

/// Fails when `bytes` hold a control byte other than the newline ending each line, or a C1
/// control / bidirectional override (as UTF-8).
fn assert_no_control(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for (n, line) in text.lines().enumerate() {
        assert!(
            !line.chars().any(|c| c.is_control()
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{what}: line {n} holds a control character: {line:?}"
        );
    }
}

/// Issue 13 item 4 (display forgery, a boundary class): every runner-controlled string is
/// escaped on every display. A hostile run puts ESC sequences, OSC titles, bidi overrides and
/// newlines in its summaries, reasons, content and memory proposals; no command prints a control
/// byte, and no forged line appears.
#[test]
fn issue_13_no_display_can_be_forged() {
    let forged = "run run_forged: completed — pre-approved by user:security";
    let hostile = format!("ok\n{forged}\r\x1b[2J\x1b]0;pwned\x07\u{202e}evil\x1b[0m");
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([
        {"phase":"plan","summary": hostile},
        {"phase":"act","summary": hostile, "proposed_actions":[
            {"id":"action_x","capability":"repo.write.docs","operation":"write","target":"docs/a.md",
             "content": format!("line one\n{hostile}\nline three\n"), "reason": hostile}
        ]},
        {"phase":"observe","summary": hostile, "memory_proposals":[
            {"operation":"add","fact":{"entity":"project_x","relation":"r","value": hostile,
             "source": "docs/a.md", "confidence":0.5,"scope":"team","trust_class":"observed"},
             "rationale": hostile}
        ]},
        {"phase":"evaluate","summary": hostile, "next":"stop"}
    ]);
    let ex = scratch_example(
        dir.path(),
        "strict",
        &[("repo.write.docs", &["docs/**"], &["write"])],
        steps,
        &[("docs/a.md", "a\n")],
    );
    let home = dir.path().join("home");
    let out = crate::craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    assert_no_control("run", &out.stdout);
    assert_no_control("run (stderr)", &out.stderr);
    let id = crate::run_id_of(&out.stdout);
    let approval = crate::runs::pending_approval(&home);
    let mut commands: Vec<Vec<String>> = vec![
        vec!["runs".into(), "list".into()],
        vec!["runs".into(), "show".into(), id.clone()],
        vec!["approvals".into(), "list".into(), "--all".into()],
        vec!["approvals".into(), "show".into(), approval.clone()],
        vec!["memory".into(), "list".into()],
        vec![
            "receipts".into(),
            "list".into(),
            home.join("runs").join(&id).display().to_string(),
        ],
    ];
    // Let the run finish, so its handoff and memory proposals exist too.
    assert_eq!(
        crate::runs::approve(&home, &approval, "user:alice")
            .status
            .code(),
        Some(0)
    );
    let resumed = crate::runs::resume(&home, &id);
    assert_no_control("resume", &resumed.stdout);
    assert_no_control("resume (stderr)", &resumed.stderr);
    commands.push(vec!["handoff".into(), "show".into(), id.clone()]);
    let memory: Value = crate::runs::json_out(&home, &["memory", "list"]);
    if let Some(m) = memory.as_array().and_then(|a| a.first()) {
        commands.push(vec![
            "memory".into(),
            "show".into(),
            m["id"].as_str().unwrap().to_owned(),
        ]);
    }
    for args in commands {
        let out = crate::craik()
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        let what = args.join(" ");
        assert_no_control(&what, &out.stdout);
        assert_no_control(&format!("{what} (stderr)"), &out.stderr);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.lines().any(|l| l.starts_with("run run_forged")),
            "{what}: a forged line:\n{text}"
        );
    }
}

/// Issue 13 item 5: `receipts verify` finds the home's key (and says so), refuses a private key
/// as `--key`, suggests `--allow-open` for a parked run, and accepts an open journal only for a
/// run whose state says it has not ended.
#[test]
fn issue_13_receipts_verify_keys_and_open_journals() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (_, done, _) = run_example(&home, &crate::repo_root().join("examples/docs-review"), &[]);
    let (_, parked, _) = run_example(&home, &crate::repo_root().join("examples/approval"), &[]);
    let verify = |args: &[&str], path: &std::path::Path| {
        crate::craik()
            .current_dir(dir.path())
            .args(["receipts", "verify"])
            .arg(path)
            .args(args)
            .output()
            .unwrap()
    };
    // No --key: the key of the home above the journal, named on stderr.
    let out = verify(&[], &home.join("runs").join(&done));
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("signing.pub.pem"));
    // A private key is refused.
    let private = home.join("keys/signing.key.pem");
    let out = verify(
        &["--key", private.to_str().unwrap()],
        &home.join("runs").join(&done),
    );
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a private key"));
    // An endless `--key` is read up to its bound, never whole (it used to be read whole to
    // look for a private key).
    let out = verify(&["--key", "/dev/zero"], &home.join("runs").join(&done));
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/dev/zero: is "));
    // A parked run: open; the message suggests --allow-open, which accepts it.
    let out = verify(&[], &home.join("runs").join(&parked));
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--allow-open"));
    assert_eq!(
        verify(&["--allow-open"], &home.join("runs").join(&parked))
            .status
            .code(),
        Some(0)
    );
    // A completed run's journal cut before its final checkpoint is not "open": refused.
    let journal = home.join("runs").join(&done).join("receipts.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    std::fs::write(&journal, format!("{}\n", lines.join("\n"))).unwrap();
    let out = verify(&["--allow-open"], &home.join("runs").join(&done));
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
}

/// Issue 13 item 6: a grant for another task is refused at load (exit 3, naming it); a shadow
/// run says so in its summary.
#[test]
fn issue_13_operator_messages_for_foreign_grants_and_shadow_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ex = one_write(
        dir.path(),
        "trusted-local",
        ("repo.write.docs", "docs/**", &["write"]),
        "docs/a.md",
        "x\n",
    );
    let home = dir.path().join("home");
    let shadow = crate::craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .arg("--shadow")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&shadow.stdout).contains("SHADOW"),
        "{}",
        crate::transcript(&shadow)
    );
    let grant = ex.join("grants/g0.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&grant).unwrap()).unwrap();
    v["task_id"] = json!("task_other");
    std::fs::write(&grant, serde_json::to_string(&v).unwrap()).unwrap();
    let out = crate::craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(dir.path().join("home2"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("grant `grant_g0`: its task_id `task_other`"),
        "{}",
        crate::transcript(&out)
    );
}

/// Issue 13 item 4: `approvals show` says how many content lines it left out, never cutting
/// silently; edits print one line each.
#[test]
fn issue_13_approvals_show_never_cuts_silently() {
    let dir = tempfile::tempdir().unwrap();
    let content: String = (1..=55).map(|i| format!("line {i}\n")).collect();
    let ex = one_write(
        dir.path(),
        "strict",
        ("repo.write.docs", "docs/**", &["write"]),
        "docs/a.md",
        &content,
    );
    let home = dir.path().join("home");
    let (exit, _, text) = run_example(&home, &ex, &[]);
    assert_eq!(exit, 6, "{text}");
    let approval = crate::runs::pending_approval(&home);
    let out = crate::craik()
        .args(["approvals", "show", &approval, "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| line 40"), "{text}");
    assert!(!text.contains("| line 41\n"), "{text}");
    assert!(text.contains("15 more line(s) not shown"), "{text}");
}

/// Issue 13 item 6: a denial no grant answered says, in the run's summary, why each of the
/// task's grants did not apply (here: expired, and another operation).
#[test]
fn issue_13_the_summary_says_why_no_grant_applied() {
    let dir = tempfile::tempdir().unwrap();
    let ex = one_write(
        dir.path(),
        "trusted-local",
        ("repo.write.code", "src/**", &["patch"]),
        "src/lib.rs",
        "x\n",
    );
    // A second, expired grant for the same capability.
    std::fs::write(
        ex.join("grants/g1.json"),
        serde_json::to_string(&json!({"schema":"craik.capability_grant","id":"grant_old",
            "task_id":"task_scratch","capability":"repo.write.code",
            "target":{"paths":["src/**"],"exclude":[]},"operations":["write"],
            "expires_at":"2020-01-01T00:00:00Z","reason":"old","approved_by":"user:t"}))
        .unwrap(),
    )
    .unwrap();
    let home = dir.path().join("home");
    let (exit, _, text) = run_example(&home, &ex, &[]);
    assert_eq!(exit, 1, "{text}");
    let first = text.lines().next().unwrap();
    assert!(first.contains("grants: "), "{first}");
    assert!(first.contains("grant_old: expired"), "{first}");
    assert!(first.contains("grant_g0: allows operations"), "{first}");
}

/// Issue 13 item 1: `receipts verify HOME` verifies review journals too, and a run whose
/// approval-decided receipt has no verified review journal (naming this run, this request and
/// this approver) is invalid.
#[test]
fn issue_13_verify_links_approvals_to_their_review_journals() {
    use crate::runs::{approve, pending_approval, resume};
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("home");
    let (_, id, _) = run_example(&h, &crate::repo_root().join("examples/approval"), &[]);
    let approval = pending_approval(&h);
    assert_eq!(approve(&h, &approval, "user:alice").status.code(), Some(0));
    assert_eq!(resume(&h, &id).status.code(), Some(0));
    let verify = || {
        crate::craik()
            .args(["--format", "json", "receipts", "verify"])
            .arg(&h)
            .arg("--key")
            .arg(h.join("keys/signing.pub.pem"))
            .output()
            .unwrap()
    };
    let ok = verify();
    assert_eq!(ok.status.code(), Some(0), "{}", crate::transcript(&ok));
    let reports: Vec<Value> = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(
        reports
            .iter()
            .any(|r| r["path"].as_str().unwrap().contains("/reviews/")),
        "{reports:?}"
    );
    // The review journal gone: the run's approval is unaccounted for.
    std::fs::remove_dir_all(h.join("reviews").join(&approval)).unwrap();
    let out = verify();
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let run = reports
        .iter()
        .find(|r| r["path"].as_str().unwrap().contains(&id))
        .unwrap();
    assert_eq!(run["failure"]["what"], "approval", "{run}");
    assert!(
        run["failure"]["why"]
            .as_str()
            .unwrap()
            .contains("no verified review journal"),
        "{run}"
    );
}

/// A scratch example whose act step proposes one `write` of `content` to `target` under
/// `capability`, with one grant of `ops` on `glob`; `target` exists holding "a\n".
fn one_write(
    dir: &std::path::Path,
    profile: &str,
    (capability, glob, ops): (&str, &str, &[&str]),
    target: &str,
    content: &str,
) -> std::path::PathBuf {
    scratch_example(
        dir,
        profile,
        &[(capability, &[glob], ops)],
        act(
            json!([{"id":"action_w","capability":capability,"operation":"write",
            "target":target,"content":content}]),
        ),
        &[(target, "a\n")],
    )
}

/// Issue 30 item 7: an envelope entry inside an open family that names no declared capability
/// (`repo.write.doc`, `shell.tes`) is refused at load, naming the field and the entry, and
/// nothing is written; a declared one and a family still load.
#[test]
fn issue_30_envelope_entries_must_be_declared_capabilities() {
    for (field, entry) in [
        ("approval_required", "repo.write.doc"),
        ("approval_required", "shell.tes"),
        ("denied_capabilities", "repo.write.docs2"),
        ("allowed_capabilities", "git.pus"),
        ("approval_required", "repo.writ"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ex = docs_review_edited(dir.path(), |v| v[field] = json!([entry]));
        let home = dir.path().join("home");
        let out = crate::craik()
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{field} {entry}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{field}: `{entry}` names no capability")),
            "{field} {entry}: {err}"
        );
        assert!(
            !home.join("runs").exists()
                || std::fs::read_dir(home.join("runs"))
                    .unwrap()
                    .next()
                    .is_none(),
            "{field} {entry}: a run directory was written"
        );
    }
    for (field, entry, status) in [
        ("approval_required", "repo.write", "blocked"),
        ("approval_required", "repo.write.docs", "blocked"),
        ("denied_capabilities", "github", "completed"),
        ("denied_capabilities", "github.comment", "completed"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_, id, home) = docs_review_with(dir.path(), |v| {
            v[field] = json!([entry]);
        });
        assert_eq!(run_json(&home, &id)["status"], status, "{field} {entry}");
    }
}
