//! Issue 19: `craik init`, the project config (`craik.toml`), read-only commands that never
//! create a home, pinned custom policy directories, and immutable paths as paths.

use std::path::Path;
use std::process::Output;

use serde_json::json;

use crate::boundary::confinement_available;
use crate::runs::{act, receipts, scratch_example};

/// `craik` run in `cwd` with `craik.toml` discovered from there and the state directory
/// under `state`.
fn craik_in(cwd: &Path, state: &Path, args: &[&str]) -> Output {
    let mut cmd = crate::craik();
    cmd.env_remove("CRAIK_CONFIG")
        .env_remove("CRAIK_HOME")
        .env("XDG_STATE_HOME", state)
        .current_dir(cwd)
        .args(args);
    cmd.output().unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn issue_19_init_writes_a_config_and_a_home_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, state) = (dir.path().join("repo"), dir.path().join("state"));
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    let out = craik_in(&repo, &state, &["init"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("wrote"), "{text}");
    let home = state.join("craik");
    assert!(home.join("keys/signing.key.pem").is_file());
    assert_eq!(
        std::fs::read_to_string(home.join(".gitignore")).unwrap(),
        craik_host::run::store::HOME_GITIGNORE
    );
    // Only the config is the repository's.
    git(&repo, &["add", "-A"]);
    assert_eq!(git(&repo, &["ls-files"]).trim(), "craik.toml");
    // A second init refuses to overwrite.
    let again = craik_in(&repo, &state, &["init"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    // Every setting, with where it came from.
    let show = craik_in(&repo, &state, &["config", "show", "--format", "json"]);
    assert_eq!(show.status.code(), Some(0), "{}", crate::transcript(&show));
    let settings: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let setting = |key: &str| {
        settings
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()
            .clone()
    };
    assert_eq!(setting("run.profile")["value"], "strict");
    assert!(
        setting("run.profile")["source"]["file"]
            .as_str()
            .unwrap()
            .ends_with("craik.toml: run.profile")
    );
    assert_eq!(setting("home")["value"], home.display().to_string());
    // A flag wins over the file.
    let flag = craik_in(&repo, &state, &["config", "show", "--home", "/elsewhere"]);
    assert!(String::from_utf8_lossy(&flag.stdout).contains("/elsewhere  [flag --home]"));
    // A home inside the project is refused before anything is written.
    let inside = craik_in(&repo, &state, &["init", "--force", "--home", "inner-home"]);
    assert_eq!(
        inside.status.code(),
        Some(2),
        "{}",
        crate::transcript(&inside)
    );
    assert!(!repo.join("inner-home").exists());
}

#[test]
fn issue_19_a_home_made_inside_a_git_work_tree_is_never_staged() {
    let dir = tempfile::tempdir().unwrap();
    let outer = dir.path().join("outer");
    let project = outer.join("project");
    std::fs::create_dir_all(&project).unwrap();
    git(&outer, &["init", "-q"]);
    let out = craik_in(
        &project,
        &dir.path().join("state"),
        &["init", "--home", "../craik-home"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    assert!(outer.join("craik-home/keys/signing.key.pem").is_file());
    git(&outer, &["add", "-A"]);
    let staged = git(&outer, &["ls-files"]);
    assert!(!staged.contains("signing"), "{staged}");
    assert_eq!(staged.trim(), "project/craik.toml");
}

#[test]
fn issue_19_read_only_commands_never_create_a_home_or_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo-home");
    let commands: [&[&str]; 6] = [
        &["runs", "list"],
        &["approvals", "list"],
        &["memory", "list"],
        &["runs", "show", "run_x"],
        &["handoff", "show", "run_x"],
        &[
            "approvals",
            "approve",
            "approval_x",
            "--by",
            "user:a",
            "--reason",
            "r",
        ],
    ];
    for args in commands {
        let out = crate::craik()
            .args(args)
            .arg("--home")
            .arg(&typo)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            crate::transcript(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no Craik home at"), "{args:?}: {err}");
        assert!(err.contains(&typo.display().to_string()), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!typo.exists(), "{args:?} created the home");
    }
    // A home directory without a key is not given one by a read-only command either.
    std::fs::create_dir_all(&typo).unwrap();
    let out = crate::craik()
        .args([
            "approvals",
            "approve",
            "approval_x",
            "--by",
            "user:a",
            "--reason",
            "r",
        ])
        .arg("--home")
        .arg(&typo)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!typo.join("keys").exists(), "{}", crate::transcript(&out));
}

const ADR: &str = "# ADR 1\nDecided.\n";

/// A scratch example (under `dir`) whose one action is `action`, with a grant for `cap`
/// naming every path and the ADR exactly.
fn adr_example(dir: &Path, cap: &str, action: serde_json::Value) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let (paths, ops): (&[&str], &[&str]) = if cap == "shell.test" {
        (&["./rewrite.sh"], &["execute"])
    } else {
        (&["**", "docs/adr/0001-record.md"], &["write", "create"])
    };
    let ex = scratch_example(
        dir,
        "trusted-local",
        &[(cap, paths, ops)],
        act(json!([action])),
        &[
            ("docs/adr/0001-record.md", ADR),
            ("docs/guide.md", "guide\n"),
            (
                "rewrite.sh",
                "#!/bin/sh\necho tampered > docs/adr/0001-record.md\nexit 0\n",
            ),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        ex.join("workspace/rewrite.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    ex
}

#[test]
fn issue_19_immutable_paths_hold_for_every_write_label_and_every_command() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("craik.toml"),
        "[project]\nimmutable_paths = [\"docs/adr/**\"]\n",
    )
    .unwrap();
    let home = dir.path().join("home");
    let state = dir.path().join("state");
    let run = |ex: &Path| {
        let out = craik_in(
            &project,
            &state,
            &[
                "run",
                &ex.display().to_string(),
                "--home",
                &home.display().to_string(),
            ],
        );
        let id = crate::run_id_of(&out.stdout);
        (out, id)
    };
    let adr_of = |id: &str| {
        std::fs::read_to_string(
            home.join("runs")
                .join(id)
                .join("workspace/docs/adr/0001-record.md"),
        )
        .unwrap()
    };
    for (i, cap) in [
        "repo.write.code",
        "repo.write.docs",
        "repo.write.adr",
        "repo.write.immutable",
    ]
    .iter()
    .enumerate()
    {
        for target in [
            "docs/adr/0001-record.md",
            "DOCS/ADR/0001-record.md",
            "docs/adr/new.md",
        ] {
            let ex = adr_example(
                &dir.path().join(format!("w{i}-{}", target.len())),
                cap,
                json!({"id":"action_w","capability":cap,"operation":"write","target":target,"content":"rewritten\n"}),
            );
            let (out, id) = run(&ex);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{cap} {target}: {}",
                crate::transcript(&out)
            );
            assert!(
                text.contains("base.protect.immutable"),
                "{cap} {target}: {text}"
            );
            assert_eq!(adr_of(&id), ADR);
            assert!(
                !home
                    .join("runs")
                    .join(&id)
                    .join("workspace/docs/adr/new.md")
                    .exists()
            );
        }
    }
    // A granted command that rewrites the ADR cannot: the sandbox carves the immutable
    // directory out of the command's write rules (its neighbours stay writable), and the
    // outcome lists no changed file. (A change that got through anyway would fail the step
    // and be restored: `run::manifest` tests.)
    let ex = adr_example(
        &dir.path().join("cmd"),
        "shell.test",
        json!({"id":"action_cmd","capability":"shell.test","operation":"execute","argv":["./rewrite.sh"]}),
    );
    let (out, id) = run(&ex);
    assert_eq!(adr_of(&id), ADR, "{}", crate::transcript(&out));
    let outcome = receipts(&home, &id)
        .into_iter()
        .find(|r| r["decided_by"]["kind"] == "outcome")
        .unwrap_or_else(|| panic!("{}", crate::transcript(&out)));
    let summary = outcome["result"]["summary"].as_str().unwrap();
    assert!(summary.contains("workspace/docs/guide.md`"), "{summary}");
    assert!(!summary.contains("docs/adr"), "{summary}");
    assert_eq!(
        outcome["result"]["metadata"]["files"],
        json!([]),
        "{outcome}"
    );
    // The immutable globs are part of the signed inputs.
    let inputs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.join("runs").join(&id).join("inputs.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(inputs["immutable_paths"], json!(["docs/adr/**"]));
}

#[test]
fn issue_19_a_custom_dir_is_pinned_and_a_changed_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let org = project.join("org");
    std::fs::create_dir_all(&org).unwrap();
    std::fs::write(
        org.join("org.cedar"),
        "@id(\"org.no-lockfile\")\n@reason(\"the lockfile is the release team's\")\nforbid (\n  principal,\n  action in Craik::Action::\"repo.write\",\n  resource\n)\nwhen { resource is Craik::Path && resource.path == \"Cargo.lock\" };\n",
    )
    .unwrap();
    std::fs::write(
        project.join("craik.toml"),
        "# the org's policies\n[[policy.custom]]\npath = \"org\"\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let home = dir.path().join("home");
    let example = crate::repo_root().join("examples/docs-review");
    let run = |project: &Path| {
        craik_in(
            project,
            &state,
            &[
                "run",
                &example.display().to_string(),
                "--home",
                &home.display().to_string(),
            ],
        )
    };
    let unpinned = run(&project);
    assert_eq!(
        unpinned.status.code(),
        Some(2),
        "{}",
        crate::transcript(&unpinned)
    );
    assert!(String::from_utf8_lossy(&unpinned.stderr).contains("is not pinned"));
    assert!(!home.exists(), "a refused run wrote nothing");
    let pin = craik_in(&project, &state, &["policy", "pin"]);
    assert_eq!(pin.status.code(), Some(0), "{}", crate::transcript(&pin));
    assert!(String::from_utf8_lossy(&pin.stdout).contains("pinned `org` sha256"));
    let config = std::fs::read_to_string(project.join("craik.toml")).unwrap();
    assert!(config.starts_with("# the org's policies\n"), "{config}");
    let pinned = run(&project);
    assert_eq!(
        pinned.status.code(),
        Some(0),
        "{}",
        crate::transcript(&pinned)
    );
    // An edit to the directory is refused, naming the file, the entry and both hashes.
    std::fs::write(org.join("org.cedar"), "// emptied\n").unwrap();
    let changed = run(&project);
    assert_eq!(
        changed.status.code(),
        Some(2),
        "{}",
        crate::transcript(&changed)
    );
    let err = String::from_utf8_lossy(&changed.stderr);
    assert!(
        err.contains("craik.toml: policy.custom[0] `org` changed since it was pinned"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn issue_19_json_errors_are_one_object_with_kind_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, state) = (dir.path().join("repo"), dir.path().join("state"));
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("craik.toml"), "[run]\nprofile = \"bogus\"\n").unwrap();
    let config = repo.join("craik.toml").canonicalize().unwrap();
    for args in [
        &["config", "show", "--format", "json"][..],
        &["--format", "json", "config", "show"][..],
    ] {
        let out = craik_in(&repo, &state, args);
        assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
        assert!(out.stdout.is_empty(), "{}", crate::transcript(&out));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let error: serde_json::Value = serde_json::from_str(&stderr).unwrap();
        assert_eq!(error["error"]["kind"], "invalid_input", "{error}");
        assert_eq!(error["error"]["file"], json!(config.display().to_string()));
        assert_eq!(error["error"]["field"], "run.profile", "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`bogus`"),
            "{error}"
        );
    }
    // A failure naming no file: the same shape, `null` file and field, the same exit code as
    // in human form.
    let missing = dir.path().join("no-home");
    std::fs::remove_file(repo.join("craik.toml")).unwrap();
    let out = craik_in(
        &repo,
        &state,
        &[
            "approvals",
            "list",
            "--format",
            "json",
            "--home",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    let error: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(error["error"]["kind"], "usage", "{error}");
    assert_eq!(error["error"]["file"], serde_json::Value::Null, "{error}");
    assert!(!missing.exists());
}

#[test]
fn issue_21_run_budgets_come_from_craik_toml_and_flags_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("craik.toml"),
        "[run]\ntoken_budget = 5000\nwall_clock_budget_seconds = 3600\n",
    )
    .unwrap();
    let ex = crate::runs::scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        json!([{"phase":"plan","summary":"p"},{"phase":"act","summary":"a"},
               {"phase":"observe","summary":"o"},{"phase":"evaluate","summary":"e","next":"stop"}]),
        &[],
    );
    let (home, state) = (dir.path().join("home"), dir.path().join("state"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run".to_owned(),
            ex.display().to_string(),
            "--home".to_owned(),
            home.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = craik_in(&project, &state, &args);
        assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
        crate::run_id_of(&out.stdout)
    };
    let signed = |id: &str| {
        let rs = crate::runs::receipts(&home, id);
        (
            rs[0]["result"]["metadata"]["provider_token_budget"].clone(),
            rs[0]["result"]["metadata"]["wall_clock_budget_seconds"].clone(),
        )
    };
    let id = run(&[]);
    assert_eq!(signed(&id), (json!(5000), json!(3600)));
    let run_state = crate::runs::run_json(&home, &id);
    assert_eq!(run_state["provider_token_budget"], 5000);
    assert_eq!(run_state["wall_clock_budget_seconds"], 3600);
    let id = run(&["--token-budget", "70", "--wall-clock-budget", "600"]);
    assert_eq!(signed(&id), (json!(70), json!(600)));
}
