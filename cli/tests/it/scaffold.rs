//! Issue 19 items 3 and 6: `craik task new`, `craik grants new`, project grants, inline
//! approvals on a terminal (driven through a pty by util-linux `script`), and
//! `craik approvals approve RUN --all`.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::runs::{example, run_example, run_json, stopped, workspace_text};

/// `craik ARGS` in `cwd` with `craik.toml` discovered there (no CRAIK_HOME, the state
/// directory under `state`), stdin empty (not a terminal).
fn craik_in(cwd: &Path, state: &Path, args: &[&str]) -> Output {
    let mut cmd = crate::craik();
    cmd.env_remove("CRAIK_CONFIG")
        .env_remove("CRAIK_HOME")
        .env("XDG_STATE_HOME", state)
        .current_dir(cwd)
        .args(args);
    cmd.output().unwrap()
}

/// A fresh repository with `craik init --operator alice` done; returns (tempdir, repo, state).
fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (repo, state) = (dir.path().join("repo"), dir.path().join("state"));
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(repo.join("docs/status.md"), "Status: stale\n").unwrap();
    let out = craik_in(&repo, &state, &["init", "--operator", "alice"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    (dir, repo, state)
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `task new` with every required flag: the status-page task of examples/approval.
fn new_task(repo: &Path, state: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "task",
        "new",
        "--title",
        "Fix the status page",
        "--goal",
        "Bring docs/status.md up to date",
        "--allowed-path",
        "docs/",
        "--forbid-path",
        "docs/adr/",
        "--approve",
        "repo.write.docs",
    ];
    args.extend_from_slice(extra);
    craik_in(repo, state, &args)
}

const TASK_DIR: &str = ".craik-tasks/task_fix_the_status_page";

/// The docs grant of the status-page task.
fn docs_grant(repo: &Path, state: &Path) -> Output {
    craik_in(
        repo,
        state,
        &[
            "grants",
            "new",
            "--task",
            TASK_DIR,
            "--capability",
            "repo.write.docs",
            "--path",
            "docs/**",
            "--exclude",
            "docs/adr/**",
            "--op",
            "write,patch",
            "--expires",
            "8h",
            "--reason",
            "status page fix",
        ],
    )
}

#[test]
fn issue_19_task_new_writes_files_a_run_decodes_and_never_overwrites() {
    let (_dir, repo, state) = project();
    let out = new_task(&repo, &state, &["--max-iterations", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    insta::assert_snapshot!("task_new", text);
    let dir = repo.join(TASK_DIR);
    let task = json_file(&dir.join("task_request.json"));
    assert_eq!(task["id"], "task_fix_the_status_page");
    // The project and requester come from craik.toml (init wrote them).
    assert_eq!(task["project_id"], "project_repo");
    assert_eq!(task["requested_by"], "user:alice");
    let intent = json_file(&dir.join("intent_lock.json"));
    assert_eq!(intent["in_scope"], serde_json::json!(["docs/"]));
    assert_eq!(intent["out_of_scope"], serde_json::json!(["docs/adr/"]));
    let envelope = json_file(&dir.join("policy_envelope.json"));
    assert_eq!(
        envelope["approval_required"],
        serde_json::json!(["repo.write.docs"])
    );
    assert_eq!(envelope["profile"], "strict");
    assert_eq!(json_file(&dir.join("run.json"))["max_iterations"], 3);
    // Every file is a valid contract, round-tripping exactly.
    let files: Vec<String> = [
        "task_request.json",
        "intent_lock.json",
        "policy_envelope.json",
    ]
    .iter()
    .map(|f| format!("{TASK_DIR}/{f}"))
    .collect();
    let mut args = vec!["contracts", "validate", "--roundtrip"];
    args.extend(files.iter().map(String::as_str));
    let check = crate::run_in(&repo, &args);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        crate::transcript(&check)
    );
    // Never overwritten without --force.
    let before = std::fs::read(dir.join("task_request.json")).unwrap();
    let again = new_task(&repo, &state, &["--constraint", "something else"]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        crate::transcript(&again)
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(
        std::fs::read(dir.join("task_request.json")).unwrap(),
        before
    );
    let forced = new_task(&repo, &state, &["--force"]);
    assert_eq!(
        forced.status.code(),
        Some(0),
        "{}",
        crate::transcript(&forced)
    );
}

#[test]
fn issue_19_task_new_off_a_terminal_names_the_missing_flag_and_refuses_bad_values() {
    let (_dir, repo, state) = project();
    let out = craik_in(&repo, &state, &["task", "new", "--title", "T"]);
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--goal is required"), "{err}");
    // With --format json, the same failure as one object.
    let out = craik_in(
        &repo,
        &state,
        &["task", "new", "--title", "T", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(
        "task_new_missing_goal_json",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!repo.join(".craik-tasks").exists(), "nothing is written");
    for (flag, value, says) in [
        ("--allowed-path", "docs/**", "not a glob"),
        ("--forbid-path", "../elsewhere", "`..`"),
        ("--approve", "repo.", "repo."),
        (
            "--project",
            "repo",
            "expected an id starting with `project_`",
        ),
    ] {
        let out = craik_in(
            &repo,
            &state,
            &["task", "new", "--title", "T", "--goal", "G", flag, value],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flag}: {}",
            crate::transcript(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag) && err.contains(says), "{flag}: {err}");
    }
    // A task id the contract refuses is refused before anything is written, naming the field.
    let out = craik_in(
        &repo,
        &state,
        &[
            "task", "new", "--title", "T", "--goal", "G", "--id", "docs fix",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("$.id"));
    assert!(!repo.join(".craik-tasks").exists(), "nothing is written");
}

#[test]
fn issue_19_grants_new_checks_capability_globs_operations_and_expiry() {
    let (_dir, repo, state) = project();
    assert_eq!(new_task(&repo, &state, &[]).status.code(), Some(0));
    let out = docs_grant(&repo, &state);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("principal in Craik::Task::\"task_fix_the_status_page\""),
        "{text}"
    );
    // Checked against the profile: under strict a docs write still needs an approval.
    assert!(
        text.contains(
            "note: under `strict`, each `repo.write.docs` write still needs a human approval"
        ),
        "{text}"
    );
    let file = repo
        .join(TASK_DIR)
        .join("grants/grant_fix_the_status_page_repo_write_docs.json");
    let grant = json_file(&file);
    assert_eq!(grant["task_id"], "task_fix_the_status_page");
    assert!(
        grant.get("project_id").is_none(),
        "absent, not null: {grant}"
    );
    assert_eq!(grant["approved_by"], "user:alice");
    let expires = grant["expires_at"].as_str().unwrap();
    let at = time::OffsetDateTime::parse(expires, &time::format_description::well_known::Rfc3339)
        .unwrap();
    let left = at - time::OffsetDateTime::now_utc();
    assert!(
        left > time::Duration::hours(7) && left <= time::Duration::hours(8),
        "{expires}"
    );
    // A second grant of the same capability gets the next free id; nothing is replaced.
    assert_eq!(docs_grant(&repo, &state).status.code(), Some(0));
    assert!(
        file.with_file_name("grant_fix_the_status_page_repo_write_docs_2.json")
            .is_file()
    );

    let base = ["grants", "new", "--task", TASK_DIR, "--reason", "r"];
    let cases: [(&[&str], i32, &str); 6] = [
        (
            &[
                "--capability",
                "repo.nope",
                "--path",
                "x",
                "--op",
                "read",
                "--expires",
                "1h",
            ],
            3,
            "unknown capability `repo.nope`",
        ),
        (
            &[
                "--capability",
                "repo.read",
                "--path",
                "../**",
                "--op",
                "read",
                "--expires",
                "1h",
            ],
            3,
            "$.target.paths[0]",
        ),
        (
            &[
                "--capability",
                "repo.read",
                "--path",
                "docs/**",
                "--op",
                "execute",
                "--expires",
                "1h",
            ],
            2,
            "--op `execute`",
        ),
        (
            &[
                "--capability",
                "repo.read",
                "--path",
                "docs/**",
                "--op",
                "read",
                "--expires",
                "2020-01-01T00:00:00Z",
            ],
            2,
            "in the past",
        ),
        (
            &[
                "--capability",
                "repo.read",
                "--path",
                "docs/**",
                "--op",
                "read",
                "--expires",
                "8 hours",
            ],
            2,
            "--expires `8 hours`",
        ),
        (
            &[
                "--capability",
                "repo.read",
                "--path",
                "docs/**",
                "--op",
                "read",
            ],
            2,
            "--expires is required",
        ),
    ];
    for (extra, code, says) in cases {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = craik_in(&repo, &state, &args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{extra:?}: {}",
            crate::transcript(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    // A grant the profile forbids whatever it says is written, and said to be useless.
    let args: Vec<&str> = base
        .iter()
        .copied()
        .chain([
            "--capability",
            "shell.execute",
            "--path",
            "make",
            "--op",
            "execute",
            "--expires",
            "1h",
        ])
        .collect();
    let out = craik_in(&repo, &state, &args);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("under `strict`, `shell.execute` execute `make` is forbidden by strict.deny.shell-execute"),
        "{}",
        crate::transcript(&out)
    );
    // RFC 3339 is accepted as well as durations.
    let at = (time::OffsetDateTime::now_utc() + time::Duration::days(2))
        .replace_nanosecond(0)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let args: Vec<&str> = base
        .iter()
        .copied()
        .chain([
            "--capability",
            "repo.read",
            "--path",
            "docs/**",
            "--op",
            "read",
            "--expires",
            &at,
        ])
        .collect();
    let out = craik_in(&repo, &state, &args);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let read = json_file(
        &repo
            .join(TASK_DIR)
            .join("grants/grant_fix_the_status_page_repo_read.json"),
    );
    assert_eq!(read["expires_at"], at.as_str());
}

/// A project grant file for `project` written by `grants new --project` into `.craik-grants`.
fn project_grant(repo: &Path, state: &Path, project: &str, capability: &str) -> PathBuf {
    let out = craik_in(
        repo,
        state,
        &[
            "grants",
            "new",
            "--project",
            project,
            "--capability",
            capability,
            "--path",
            "docs/**",
            "--op",
            "write,patch",
            "--expires",
            "7d",
            "--reason",
            "docs are ours",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let file = repo.join(".craik-grants").join(format!(
        "grant_{}_{}.json",
        project.trim_start_matches("project_"),
        capability.replace('.', "_")
    ));
    assert!(file.is_file(), "{}", crate::transcript(&out));
    file
}

#[test]
fn issue_19_project_grants_apply_to_their_project_only_and_are_signed_into_the_run() {
    let (_dir, repo, state) = project();
    assert_eq!(new_task(&repo, &state, &[]).status.code(), Some(0));
    let mine = project_grant(&repo, &state, "project_repo", "repo.write.docs");
    let grant = json_file(&mine);
    assert!(grant.get("task_id").is_none(), "absent, not null: {grant}");
    assert_eq!(grant["project_id"], "project_repo");
    // The contract: a task_id or a project_id, exactly one.
    for (edit, says) in [
        (
            serde_json::json!({"task_id": "task_x"}),
            "$.project_id: a grant names a task_id or a project_id, not both",
        ),
        (
            serde_json::json!({"project_id": null}),
            "$.task_id: missing",
        ),
        (
            serde_json::json!({"project_id": "repo"}),
            "$.project_id: invalid id `repo`, expected an id starting with `project_`",
        ),
    ] {
        let mut bad = grant.clone();
        for (k, v) in edit.as_object().unwrap() {
            bad[k] = v.clone();
        }
        let file = repo.join("bad.json");
        std::fs::write(&file, serde_json::to_vec(&bad).unwrap()).unwrap();
        let out = crate::run_in(&repo, &["contracts", "validate", "bad.json"]);
        assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(says)
                || String::from_utf8_lossy(&out.stderr).contains(says),
            "{says}: {}",
            crate::transcript(&out)
        );
        std::fs::remove_file(&file).unwrap();
    }
    let scenario = example("approval").join("scenario.json");
    let runner = format!("fixture:{}", scenario.display());
    let home = state.join("craik");

    // The project's own grant, from craik.toml: loaded, signed into the inputs, and it is
    // what allows the (approved) docs write.
    let out = craik_in(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner, "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(6), "{}", crate::transcript(&out));
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inputs = json_file(&home.join("runs").join(&id).join("inputs.json"));
    assert_eq!(
        inputs["grants"],
        serde_json::json!([grant]),
        "signed as written, not bound"
    );
    let run_dir = home.join("runs").join(&id);
    let verify = craik_in(
        &repo,
        &state,
        &[
            "receipts",
            "verify",
            "--allow-open",
            run_dir.to_str().unwrap(),
            "--grants",
            mine.to_str().unwrap(),
        ],
    );
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        crate::transcript(&verify)
    );

    // Another project's grant never applies: from craik.toml it is not loaded (and said so);
    // named with --grants it is refused before anything runs.
    std::fs::remove_file(&mine).unwrap();
    let theirs = project_grant(&repo, &state, "project_other", "repo.write.docs");
    let out = craik_in(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner, "--format", "json"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("for another project than `project_repo`"),
        "{err}"
    );
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inputs = json_file(&home.join("runs").join(&id).join("inputs.json"));
    assert_eq!(inputs["grants"], serde_json::json!([]));
    let explicit = craik_in(
        &repo,
        &state,
        &[
            "run",
            TASK_DIR,
            "--runner",
            &runner,
            "--grants",
            theirs.to_str().unwrap(),
        ],
    );
    assert_eq!(
        explicit.status.code(),
        Some(3),
        "{}",
        crate::transcript(&explicit)
    );
    let err = String::from_utf8_lossy(&explicit.stderr);
    assert!(
        err.contains("a project grant for `project_other`, but the task `task_fix_the_status_page` belongs to `project_repo`"),
        "{err}"
    );
    // And a task grant listed in project.grants is refused, naming the file.
    std::fs::remove_file(&theirs).unwrap();
    assert_eq!(docs_grant(&repo, &state).status.code(), Some(0));
    let task_grant = repo
        .join(TASK_DIR)
        .join("grants/grant_fix_the_status_page_repo_write_docs.json");
    std::fs::copy(&task_grant, repo.join(".craik-grants/copied.json")).unwrap();
    let out = craik_in(&repo, &state, &["run", TASK_DIR, "--runner", &runner]);
    assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "copied.json: grant `grant_fix_the_status_page_repo_write_docs` is a task grant"
    ));
}

/// Runs `craik ARGS` in `cwd` under a pty (util-linux `script`), `answers` fed on its stdin;
/// returns the exit code and everything the terminal showed.
fn on_terminal(cwd: &Path, state: &Path, args: &[&str], answers: &str) -> (i32, String) {
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = std::iter::once(exe.display().to_string())
        .chain(args.iter().map(|a| (*a).to_owned()))
        .map(|a| quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    let input = cwd.join(".answers");
    std::fs::write(&input, answers).unwrap();
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(cwd)
        .env_remove("CRAIK_CONFIG")
        .env_remove("CRAIK_HOME")
        .env("XDG_STATE_HOME", state)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    std::fs::remove_file(&input).unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace('\r', ""),
    )
}

/// The status-page task of a fresh project with its docs grant, and the fixture runner
/// proposing a docs patch whose replacement text holds an escape sequence.
fn attended_project() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let (dir, repo, state) = project();
    assert_eq!(new_task(&repo, &state, &[]).status.code(), Some(0));
    assert_eq!(docs_grant(&repo, &state).status.code(), Some(0));
    let mut scenario = json_file(&example("approval").join("scenario.json"));
    scenario["steps"][1]["proposed_actions"][0]["edits"] =
        serde_json::json!([{"old": "Status: stale", "new": "Status: current\u{1b}[2J"}]);
    let path = dir.path().join("scenario.json");
    std::fs::write(&path, serde_json::to_vec(&scenario).unwrap()).unwrap();
    let runner = format!("fixture:{}", path.display());
    (dir, repo, state, runner)
}

fn run_id_in(screen: &str) -> String {
    // The summary's first line (`run run_…: status — reason`), after any progress redraw.
    screen
        .lines()
        .find_map(|l| {
            l.split_once("run run_")
                .and_then(|(_, r)| r.split(':').next())
                .map(|r| format!("run_{r}"))
        })
        .unwrap_or_default()
}

#[test]
fn issue_19_an_attended_run_asks_inline_and_continues_in_the_same_process() {
    let (_dir, repo, state, runner) = attended_project();
    // `maybe` is asked again; `y`, then the default reason.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner],
        "maybe\ny\n\n",
    );
    assert_eq!(code, 0, "{screen}");
    // The exact action, with the runner's escape sequence shown escaped, never sent raw.
    assert!(
        screen.contains("action     action_1_0 repo.write.docs patch docs/status.md"),
        "{screen}"
    );
    assert!(
        screen.contains(r#"+ "Status: current\u{1b}[2J""#),
        "{screen}"
    );
    assert!(
        !screen.contains("\u{1b}[2J"),
        "a runner's escape reached the terminal"
    );
    assert!(
        screen.contains("approve as user:alice? [y/n]: answer y or n"),
        "{screen}"
    );
    assert!(screen.contains(": completed"), "{screen}");
    let id = run_id_in(&screen);
    let home = state.join("craik");
    assert_eq!(stopped(&home, &id).0, "completed");
    assert_eq!(
        workspace_text_in(&repo, "docs/status.md"),
        "Status: current\u{1b}[2J\n"
    );
    // Recorded as the same signed review `approvals approve` writes, by the operator from
    // craik.toml, with the default reason.
    let approvals: Value = serde_json::from_slice(
        &craik_in(
            &repo,
            &state,
            &["approvals", "list", "--all", "--format", "json"],
        )
        .stdout,
    )
    .unwrap();
    let a = &approvals[0];
    assert_eq!(a["status"], "consumed", "{a}");
    assert_eq!(a["decided_by"], "user:alice");
    assert_eq!(a["reason"], "approved at the terminal");
    assert_eq!(a["tampered"], false);
    let audit = craik_in(&repo, &state, &["audit", &id, "--format", "json"]);
    assert_eq!(
        audit.status.code(),
        Some(0),
        "{}",
        crate::transcript(&audit)
    );
    assert!(String::from_utf8_lossy(&audit.stdout).contains("approved at the terminal"));
    let _ = run_json(&home, &id);
}

fn workspace_text_in(repo: &Path, rel: &str) -> String {
    std::fs::read_to_string(repo.join(rel)).unwrap()
}

#[test]
fn issue_19_an_attended_run_denied_inline_ends_blocked_and_without_an_approver_parks() {
    let (_dir, repo, state, runner) = attended_project();
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner, "--by", "user:bob"],
        "n\nnot today\n",
    );
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("approve as user:bob?"), "{screen}");
    let id = run_id_in(&screen);
    let (status, reason) = stopped(&state.join("craik"), &id);
    assert_eq!(status, "blocked");
    assert!(reason.contains("denied by user:bob: not today"), "{reason}");
    assert_eq!(
        workspace_text_in(&repo, "docs/status.md"),
        "Status: stale\n"
    );

    // No approver anywhere: nothing is asked, the run parks (exit 6) and says how to set one.
    let toml = std::fs::read_to_string(repo.join("craik.toml")).unwrap();
    std::fs::write(
        repo.join("craik.toml"),
        toml.replace("operator = \"alice\"", ""),
    )
    .unwrap();
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner],
        "y\n",
    );
    assert_eq!(code, 6, "{screen}");
    assert!(
        screen.contains("no approver (pass --by user:NAME, or set `operator` in craik.toml"),
        "{screen}"
    );
    assert!(!screen.contains("[y/n]"), "{screen}");
    // A runner-named approver is never one: the fixture runner cannot approve itself.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &[
            "run",
            TASK_DIR,
            "--runner",
            &runner,
            "--by",
            "user:runner_fixture",
        ],
        "y\n\n",
    );
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.contains("can never review its own request"),
        "{screen}"
    );
}

#[test]
fn issue_19_piped_and_json_runs_never_ask() {
    let (_dir, repo, state, runner) = attended_project();
    // Piped: parks as before, exit 6.
    let out = craik_in(&repo, &state, &["run", TASK_DIR, "--runner", &runner]);
    assert_eq!(out.status.code(), Some(6), "{}", crate::transcript(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("[y/n]"));
    // On a terminal but --format json: parks, exit 6, nothing asked.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["run", TASK_DIR, "--runner", &runner, "--format", "json"],
        "y\n\n",
    );
    assert_eq!(code, 6, "{screen}");
    assert!(!screen.contains("[y/n]"), "{screen}");
}

#[test]
fn issue_19_approve_all_lists_confirms_and_resumes() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (exit, id, _) = run_example(h, &example("approval"), &[]);
    assert_eq!(exit, 6);
    let all = |extra: &[&str]| {
        crate::craik()
            .args([
                "approvals",
                "approve",
                &id,
                "--all",
                "--by",
                "user:alice",
                "--reason",
                "batch",
            ])
            .args(extra)
            .arg("--home")
            .arg(h)
            .output()
            .unwrap()
    };
    // Off a terminal, without --yes: refused, nothing decided.
    let out = all(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
    assert_eq!(stopped(h, &id).0, "blocked");
    // --yes --resume: each listed, approved, and the run continues to the end.
    let out = all(&["--yes", "--resume"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("action     action_1_0 repo.write.docs patch docs/status.md"),
        "{text}"
    );
    assert!(text.contains(": approved by user:alice"), "{text}");
    assert!(text.contains(": completed"), "{text}");
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: current"));
    // Nothing left: a second --all says so (exit 1).
    let out = all(&["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no pending approvals"));
}

#[test]
fn issue_19_approve_all_on_a_terminal_confirms_each() {
    let (_dir, repo, state, runner) = attended_project();
    let out = craik_in(&repo, &state, &["run", TASK_DIR, "--runner", &runner]);
    assert_eq!(out.status.code(), Some(6), "{}", crate::transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    // `n`: left pending, nothing decided.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["approvals", "approve", &id, "--all", "--reason", "ok"],
        "n\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("left pending"), "{screen}");
    assert_eq!(stopped(&state.join("craik"), &id).0, "blocked");
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &[
            "approvals",
            "approve",
            &id,
            "--all",
            "--reason",
            "ok",
            "--resume",
        ],
        "y\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("approved by user:alice"), "{screen}");
    assert_eq!(stopped(&state.join("craik"), &id).0, "completed");
}

#[test]
fn issue_19_task_new_and_grants_new_ask_on_a_terminal_for_what_is_missing() {
    let (_dir, repo, state) = project();
    // Title, then an empty goal (asked again), then the goal.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &["task", "new"],
        "Tidy the docs\n\nEvery page current\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Title (one line): "), "{screen}");
    assert_eq!(
        screen.matches("Goal (what done looks like): ").count(),
        2,
        "{screen}"
    );
    let task = json_file(&repo.join(".craik-tasks/task_tidy_the_docs/task_request.json"));
    assert_eq!(task["objective"], "Every page current");
    // grants new: the expiry's default (8h) is taken with Enter; the operations are asked.
    let (code, screen) = on_terminal(
        &repo,
        &state,
        &[
            "grants",
            "new",
            "--task",
            ".craik-tasks/task_tidy_the_docs",
            "--capability",
            "repo.write.docs",
            "--path",
            "docs/**",
            "--reason",
            "tidy",
        ],
        "write\n\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Operations, comma-separated ["), "{screen}");
    assert!(
        screen.contains("Expires (RFC 3339, or a duration: 8h, 7d) [8h]: "),
        "{screen}"
    );
    let grant =
        json_file(&repo.join(
            ".craik-tasks/task_tidy_the_docs/grants/grant_tidy_the_docs_repo_write_docs.json",
        ));
    assert_eq!(grant["operations"], serde_json::json!(["write"]));
}

#[test]
fn issue_19_an_attended_run_continues_when_the_approval_is_decided_elsewhere() {
    use std::io::Read;
    let (_dir, repo, state, runner) = attended_project();
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let line = format!("'{}' run {TASK_DIR} --runner '{runner}'", exe.display());
    // stdin stays open and silent: the run waits at its question.
    let mut child = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(&repo)
        .env_remove("CRAIK_CONFIG")
        .env_remove("CRAIK_HOME")
        .env("XDG_STATE_HOME", &state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Held open until the run ends (`Child::wait` would close it: end of input).
    let stdin = child.stdin.take();
    let pending = || {
        let out = craik_in(&repo, &state, &["approvals", "list", "--format", "json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v[0]["id"].as_str().map(str::to_owned))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let id = loop {
        if let Some(id) = pending() {
            break id;
        }
        assert!(std::time::Instant::now() < deadline, "the run never parked");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let decided = craik_in(
        &repo,
        &state,
        &[
            "approvals",
            "approve",
            &id,
            "--by",
            "user:bob",
            "--reason",
            "from the other shell",
        ],
    );
    assert_eq!(
        decided.status.code(),
        Some(0),
        "{}",
        crate::transcript(&decided)
    );
    let status = child.wait().unwrap();
    let mut screen = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut screen)
        .unwrap();
    drop(stdin);
    let screen = screen.replace('\r', "");
    assert_eq!(status.code(), Some(0), "{screen}");
    assert!(
        screen.contains(&format!(
            "{id} was approved elsewhere by user:bob; continuing"
        )),
        "{screen}"
    );
    assert!(screen.contains(": completed"), "{screen}");
    assert_eq!(
        workspace_text_in(&repo, "docs/status.md"),
        "Status: current\u{1b}[2J\n"
    );
}

#[test]
fn issue_19_task_new_verify_grants_the_command_and_requires_it_to_pass() {
    let (_dir, repo, state) = project();
    let out = new_task(&repo, &state, &["--verify", "cargo test", "--out", "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let envelope = json_file(&repo.join("t/policy_envelope.json"));
    assert_eq!(
        envelope["verification_required"],
        serde_json::json!(["shell.test"])
    );
    let grant_file = repo.join("t/grants/grant_fix_the_status_page_verify.json");
    let grant = json_file(&grant_file);
    assert_eq!(grant["capability"], "shell.test");
    assert_eq!(grant["target"]["paths"], serde_json::json!(["cargo test"]));
    // Issue 30 item 8: cargo's build directory is writable, or the approved test fails.
    assert_eq!(grant["target"]["writes"], serde_json::json!(["target/**"]));
    assert_eq!(grant["operations"], serde_json::json!(["execute"]));
    assert_eq!(grant["task_id"], "task_fix_the_status_page");
    let show = crate::run_in(&repo, &["grants", "show", grant_file.to_str().unwrap()]);
    assert_eq!(show.status.code(), Some(0), "{}", crate::transcript(&show));
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("action == Craik::Action::\"shell.test\"")
    );
    // The operator's scope wins; an unknown tool gets none.
    let out = new_task(
        &repo,
        &state,
        &[
            "--verify",
            "make check",
            "--verify-writes",
            "out/**",
            "--out",
            "w",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let grant = json_file(&repo.join("w/grants/grant_fix_the_status_page_verify.json"));
    assert_eq!(grant["target"]["writes"], serde_json::json!(["out/**"]));
    let out = new_task(&repo, &state, &["--verify", "make check", "--out", "v"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let grant = json_file(&repo.join("v/grants/grant_fix_the_status_page_verify.json"));
    assert!(grant["target"].get("writes").is_none(), "{grant}");
    // A command the kernel cannot scope (shell syntax) is refused before anything is written.
    let out = new_task(&repo, &state, &["--verify", "make; rm -rf /", "--out", "u"]);
    assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
    assert!(!repo.join("u").exists());
}
