//! The runner registry (issue 22 items 1 and 2): `runners.toml` refusals located by file, line,
//! key and value; `craik runners add|list|show|remove|install|check`; the `program`, `cli`
//! and `provider` backends really running from the registry; a changed adapter refused before
//! launch naming both digests; the digest, version and backend signed in `run.inputs` and
//! shown by `craik audit`; a project registry that can only narrow.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::adapters::{adapter_bin, fake_cli, simple_steps};
use crate::provider::{Recorded, phase_of, serve, wire};
use crate::runs::{example, receipts, run_example, run_json, scratch_example, verify_run};
use crate::{craik, repo_root, transcript};

pub(crate) fn runners(home: &Path, args: &[&str]) -> Output {
    craik()
        .arg("runners")
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .unwrap()
}

pub(crate) fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", transcript(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `craik` in `cwd` with craik.toml discovery on (the project registry beside it).
fn craik_in(cwd: &Path, args: &[&str]) -> Output {
    craik()
        .env_remove("CRAIK_CONFIG")
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

/// A copy of the shipped fixture adapter (so a test may change its bytes).
fn adapter_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("my-adapter");
    std::fs::copy(adapter_bin("fixture"), &copy).unwrap();
    copy
}

fn flip_byte(path: &Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x01]).unwrap();
}

/// `craik run` expected to refuse before any run exists: (exit, stdout + stderr).
fn refused_run(home: &Path, target: &Path, extra: &[&str]) -> (i32, String) {
    let out = craik()
        .arg("run")
        .arg(target)
        .arg("--home")
        .arg(home)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn sha256_file(path: &Path) -> String {
    craik_host::registry::digest_file(path).unwrap()
}

fn sha256_field(text: &str, after: &str) -> String {
    let start = text.find(after).unwrap() + after.len();
    text[start..start + 71].to_owned()
}

fn run_id_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(':')
        .to_owned()
}

#[test]
fn issue_22_registry_refusals_name_file_line_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let file = home.join("runners.toml");
    let cases: &[(&str, &str)] = &[
        (
            "unknown backend",
            "[runner.x]\nbackend = \"docker\"\ncommand = \"/bin/true\"\n",
        ),
        (
            "npx without a version",
            "[runner.x]\nbackend = \"npx\"\npackage = \"@scope/pkg\"\n",
        ),
        (
            "npx with a range",
            "[runner.x]\nbackend = \"npx\"\npackage = \"@scope/pkg@^1.2.3\"\n",
        ),
        (
            "uvx without an exact version",
            "[runner.x]\nbackend = \"uvx\"\n\npackage = \"pkg>=1.0\"\n",
        ),
        (
            "npx without a package",
            "[runner.x]\nbackend = \"npx\"\ncommand = \"pkg\"\n",
        ),
        (
            "Craik's own variable",
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\nenv = [\"OPENAI_API_KEY\", \"CRAIK_HOME\"]\n",
        ),
        (
            "a loader variable",
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\nenv = [\"LD_PRELOAD\"]\n",
        ),
        (
            "low trust claiming shell",
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\n\n[runner.x.capabilities]\ntrust = \"low\"\nsupport = { \"repo.read\" = \"supported\", \"shell.test\" = \"supported\" }\n",
        ),
        (
            "medium trust claiming git",
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\n\n[runner.x.capabilities]\ntrust = \"medium\"\nsupport = { \"git\" = \"supported\" }\n",
        ),
        (
            "trust above the file's max",
            "max_trust = \"low\"\n\n[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\n",
        ),
        (
            "a misspelt key",
            "[runner.x]\nbackend = \"program\"\ncomand = \"/bin/true\"\n",
        ),
        (
            "a bad id",
            "[runner.Bad]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\n",
        ),
        (
            "program without a matrix",
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\n",
        ),
        (
            "cli with an unknown adapter",
            "[runner.x]\nbackend = \"cli\"\nadapter = \"hal\"\n",
        ),
    ];
    let mut shown = String::new();
    for (what, text) in cases {
        std::fs::write(&file, text).unwrap();
        let out = runners(&home, &["check"]);
        assert_eq!(out.status.code(), Some(3), "{what}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.trim_end();
        assert_eq!(line.lines().count(), 1, "{what}: one line: {err}");
        assert!(
            line.starts_with(&format!("craik: {}:", file.display())),
            "{what}: {err}"
        );
        shown.push_str(&format!(
            "{what}: {}\n",
            line.replace(&file.display().to_string(), "HOME/runners.toml")
        ));
        // `craik run` refuses the same way, before anything is written.
        let (exit, text) = refused_run(&home, &example("docs-review"), &[]);
        assert_eq!(exit, 3, "{what}: {text}");
        assert!(!home.join("runs").exists(), "{what}");
    }
    insta::assert_snapshot!(shown);
    // `--format json` carries the file and the key beside the message.
    std::fs::write(
        &file,
        "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\nenv = [\"CRAIK_KEY\"]\n",
    )
    .unwrap();
    let out = craik()
        .args(["runners", "check", "--format", "json", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "invalid_input");
    assert_eq!(err["error"]["file"], json!(file));
    assert_eq!(err["error"]["field"], "runner.x.env[0]");
}

#[test]
fn issue_22_program_runner_added_installed_checked_run_and_verified() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let adapter = adapter_copy(dir.path());
    let added = ok(&runners(
        &home,
        &[
            "add",
            "my-fixture",
            "--backend",
            "program",
            "--command",
            adapter.to_str().unwrap(),
            "--install",
            "cache",
            "--scenario-arg=--fixture",
            "--matrix",
            "fixture",
            "--runner-version",
            "0.1.0",
        ],
    ));
    assert!(added.contains("added runner `my-fixture`"), "{added}");
    // Not installed yet: the check fails and a run is refused before it starts.
    let out = runners(&home, &["check", "my-fixture"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("is not installed"),
        "{}",
        transcript(&out)
    );
    let (exit, text) = refused_run(&home, &example("docs-review"), &["--runner", "my-fixture"]);
    assert_eq!(exit, 2, "{text}");
    assert!(text.contains("craik runners install my-fixture"), "{text}");
    // Install: copied into the home's cache, pinned (0600).
    let pin_out = ok(&craik()
        .args([
            "runners",
            "install",
            "my-fixture",
            "--format",
            "json",
            "--home",
        ])
        .arg(&home)
        .output()
        .unwrap());
    let pin: Value = serde_json::from_str(&pin_out).unwrap();
    let cached = home.join("runners/my-fixture/bin/my-adapter");
    assert_eq!(pin["path"], json!(cached));
    let expected = sha256_file(&adapter);
    assert_eq!(pin["sha256"], json!(expected));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.join("runners/my-fixture/pin.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let checked = ok(&runners(&home, &["check"]));
    assert!(
        checked.contains("pass  my-fixture") && checked.contains("matches its pin"),
        "{checked}"
    );
    // list and show name it.
    let list: Value = serde_json::from_slice(
        &craik()
            .args(["runners", "list", "--format", "json", "--home"])
            .arg(&home)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "my-fixture")
        .unwrap();
    assert_eq!(row["backend"], "program");
    assert_eq!(row["version"], "0.1.0");
    assert_eq!(row["pin"]["sha256"], json!(expected));
    assert!(list.as_array().unwrap().iter().any(|r| r["id"] == "codex"));
    let shown = ok(&runners(&home, &["show", "my-fixture"]));
    assert!(shown.contains("install    cache"), "{shown}");
    // The run: the registry's adapter process, from the cache, completes and verifies.
    let (exit, id, text) = run_example(&home, &example("docs-review"), &["--runner", "my-fixture"]);
    assert_eq!(exit, 0, "{text}");
    verify_run(&home, &id, false);
    // The digest, version and backend are signed in run.inputs and shown by audit.
    let rs = receipts(&home, &id);
    let meta = &rs[0]["result"]["metadata"]["runner_adapter"];
    assert_eq!(rs[0]["capability"], "run.inputs");
    assert_eq!(meta["id"], "my-fixture");
    assert_eq!(meta["backend"], "program");
    assert_eq!(meta["version"], "0.1.0");
    assert_eq!(meta["sha256"], json!(expected));
    assert_eq!(meta["pinned"], true);
    let inputs: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join("runs").join(&id).join("inputs.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(&inputs["runner_adapter"], meta);
    let audit = craik()
        .arg("audit")
        .arg(home.join("runs").join(&id))
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    let audit_text = ok(&audit);
    assert!(
        audit_text.contains(&format!(
            "adapter     my-fixture (program 0.1.0, home) {} {expected} (checked against its pin)",
            cached.display()
        )),
        "{audit_text}"
    );
    // Remove: the entry, its pin and its cache.
    ok(&runners(&home, &["remove", "my-fixture"]));
    assert!(!home.join("runners/my-fixture").exists());
    let (exit, text) = refused_run(&home, &example("docs-review"), &["--runner", "my-fixture"]);
    assert_eq!(exit, 2, "{text}");
    assert!(text.contains("unknown runner `my-fixture`; registered runners: claude, codex, fixture, fixture-adapter, gemini"), "{text}");
}

#[test]
fn issue_22_a_changed_adapter_is_refused_before_launch_naming_both_digests() {
    crate::ensure_adapters();
    for install in ["cache", "installed"] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let adapter = adapter_copy(dir.path());
        ok(&runners(
            &home,
            &[
                "add",
                "pinned",
                "--backend",
                "program",
                "--command",
                adapter.to_str().unwrap(),
                "--install",
                install,
                "--scenario-arg=--fixture",
                "--matrix",
                "fixture",
            ],
        ));
        ok(&runners(&home, &["install", "pinned"]));
        let (exit, first, text) =
            run_example(&home, &example("docs-review"), &["--runner", "pinned"]);
        assert_eq!(exit, 0, "{install}: {text}");
        let runnable = if install == "cache" {
            home.join("runners/pinned/bin/my-adapter")
        } else {
            adapter.clone()
        };
        let before = sha256_file(&runnable);
        flip_byte(&runnable, 4096);
        let after = sha256_file(&runnable);
        assert_ne!(before, after);
        let (exit, text) = refused_run(&home, &example("docs-review"), &["--runner", "pinned"]);
        assert_eq!(exit, 1, "{install}: {text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("craik: runner `pinned`"))
            .unwrap_or(&text);
        assert!(
            line.contains(&format!("(expected {before}, found {after})"))
                && line.contains("refusing to launch it"),
            "{install}: {text}"
        );
        // Nothing was started: the one run is the first.
        let runs: Vec<_> = std::fs::read_dir(home.join("runs")).unwrap().collect();
        assert_eq!(runs.len(), 1, "{install}");
        let out = runners(&home, &["check", "pinned"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&after));
        // Re-installing after review pins the new bytes.
        ok(&runners(&home, &["install", "pinned"]));
        ok(&runners(&home, &["check", "pinned"]));
        let _ = first;
    }
}

#[test]
fn issue_22_cli_runner_wraps_a_stand_in_cli_from_the_cache() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let fake = fake_cli(dir.path(), "codex");
    ok(&runners(
        &home,
        &[
            "add",
            "my-codex",
            "--backend",
            "cli",
            "--adapter",
            "codex",
            "--command",
            fake.to_str().unwrap(),
            "--install",
            "cache",
        ],
    ));
    ok(&runners(&home, &["install", "my-codex"]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        simple_steps(),
        &[("README.md", "hello\n")],
    );
    let task = ex.join("task_request.json");
    let ws = ex.join("workspace");
    // No scenario: the adapter runs live, wrapping the cached CLI.
    let (exit, id, text) = run_example(
        &home,
        &task,
        &["--runner", "my-codex", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(exit, 0, "{text}");
    let outputs =
        std::fs::read_to_string(home.join("runs").join(&id).join("outputs.jsonl")).unwrap();
    assert!(outputs.contains("\"mode\":\"live\""), "{outputs}");
    assert!(outputs.contains("the README is short"), "{outputs}");
    verify_run(&home, &id, false);
    let rs = receipts(&home, &id);
    let meta = &rs[0]["result"]["metadata"]["runner_adapter"];
    assert_eq!(meta["backend"], "cli");
    assert_eq!(meta["sha256"], json!(sha256_file(&fake)));
    assert_eq!(
        meta["exec"],
        json!(adapter_bin("codex").canonicalize().unwrap())
    );
    // The cached CLI changed: refused before launch.
    let cached = home.join("runners/my-codex/bin/fake-codex");
    flip_byte(&cached, 12);
    let (exit, text) = refused_run(
        &home,
        &task,
        &["--runner", "my-codex", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(exit, 1, "{text}");
    assert!(text.contains("changed since it was installed"), "{text}");
}

#[test]
fn issue_22_provider_runner_receives_only_the_variables_it_names() {
    crate::ensure_adapters();
    for (env, key_seen) in [(Some("OPENAI_API_KEY"), true), (None, false)] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (port, seen) = serve(Arc::new(move |r: &Recorded, _| {
            let (headers, body) = wire("chat-completions", true, phase_of(&r.body));
            (200, headers, body)
        }));
        let base = format!("--arg=http://127.0.0.1:{port}");
        let mut args = vec![
            "add",
            "my-llm",
            "--backend",
            "provider",
            "--api",
            "chat-completions",
            "--model",
            "m",
            "--arg=--base-url",
            &base,
        ];
        if let Some(e) = env {
            args.extend(["--env", e]);
        }
        ok(&runners(&home, &args));
        ok(&runners(&home, &["install", "my-llm"]));
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[],
            simple_steps(),
            &[("README.md", "hello\n")],
        );
        let out = craik()
            .arg("run")
            .arg(ex.join("task_request.json"))
            .arg("--workspace")
            .arg(ex.join("workspace"))
            .arg("--home")
            .arg(&home)
            .args(["--runner", "my-llm", "--step-timeout-secs", "20"])
            .env("OPENAI_API_KEY", "test-key-123")
            .env("ANTHROPIC_API_KEY", "other-key")
            .output()
            .unwrap();
        let id = run_id_of(&out);
        let seen = seen.lock().unwrap().clone();
        if key_seen {
            assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
            assert_eq!(seen.len(), 4);
            for r in &seen {
                assert_eq!(r.header("authorization"), Some("Bearer test-key-123"));
                assert_eq!(r.body["model"], "m");
            }
            let meta = &receipts(&home, &id)[0]["result"]["metadata"]["runner_adapter"];
            assert_eq!(meta["backend"], "provider");
            assert_eq!(meta["sha256"], json!(sha256_file(&adapter_bin("provider"))));
        } else {
            // Not named: the key never reaches the adapter, which makes no call.
            assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
            assert!(seen.is_empty());
            assert!(
                run_json(&home, &id)["stop_reason"]
                    .as_str()
                    .unwrap()
                    .contains("no API key"),
                "{}",
                transcript(&out)
            );
        }
        verify_run(&home, &id, false);
    }
}

#[test]
fn issue_22_a_project_registry_may_only_narrow() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("craik.toml"), "home = \"../home\"\n").unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("runners.toml"),
        "max_trust = \"medium\"\nallow_project_env = [\"OPENAI_API_KEY\"]\n",
    )
    .unwrap();
    let adapter = adapter_copy(dir.path());
    let entry = |extra: &str| {
        format!(
            "[runner.p]\nbackend = \"program\"\ncommand = \"{}\"\nscenario_arg = \"--fixture\"\n{extra}",
            adapter.display()
        )
    };
    let refused: &[(&str, String, &str)] = &[
        (
            "raise max_trust",
            format!("max_trust = \"high\"\n{}", entry("matrix = \"fixture\"\n")),
            "may only narrow: the home allows at most `medium`",
        ),
        (
            "trust above the home's",
            entry(
                "\n[runner.p.capabilities]\ntrust = \"high\"\nsupport = { \"repo.read\" = \"supported\" }\n",
            ),
            "more than this registry allows (max_trust `medium`)",
        ),
        (
            "an env the home did not allow",
            entry("matrix = \"fixture\"\nenv = [\"AWS_SECRET_ACCESS_KEY\"]\n"),
            "does not allow this variable",
        ),
        (
            "a read path outside the project",
            entry("matrix = \"fixture\"\nread = [\"/root/.ssh\"]\n"),
            "only name read paths inside the project",
        ),
        (
            "allow_project_env in a project",
            format!(
                "allow_project_env = [\"X\"]\n{}",
                entry("matrix = \"fixture\"\n")
            ),
            "only the home's runners.toml",
        ),
        (
            "raise a built-in's trust",
            "[runner.gemini]\nbackend = \"cli\"\nadapter = \"gemini\"\nmatrix = \"fixture\"\n"
                .to_owned(),
            "a project registry may not override the built-in runner `gemini`",
        ),
        (
            "shadow a built-in id",
            "[runner.fixture]\nbackend = \"program\"\ncommand = \"x\"\nmatrix = \"fixture\"\n"
                .to_owned(),
            "runners.toml:1: runner.fixture `",
        ),
        (
            "a read path up out of the project",
            entry("matrix = \"fixture\"\nread = [\"..\"]\n"),
            "runner.p.read[0] `..`: a project registry may only name read paths inside the project",
        ),
        (
            "a read path that climbs out through a subdirectory",
            entry("matrix = \"fixture\"\nread = [\"docs\", \"docs/../../home\"]\n"),
            "runner.p.read[1] `docs/../../home`",
        ),
        (
            "a read path through a link out of the project",
            entry("matrix = \"fixture\"\nread = [\"out/keys\"]\n"),
            "runner.p.read[0] `out/keys`",
        ),
        (
            "a matrix file up out of the project",
            entry("matrix = \"../m.json\"\n"),
            "runner.p.matrix `../m.json`: a project registry may only name files inside the project",
        ),
    ];
    std::os::unix::fs::symlink(&home, project.join("out")).unwrap();
    std::fs::create_dir_all(project.join("docs")).unwrap();
    let file = project.join("runners.toml");
    for (what, text, why) in refused {
        std::fs::write(&file, text).unwrap();
        let out = craik_in(&project, &["runners", "check"]);
        assert_eq!(out.status.code(), Some(3), "{what}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&file.display().to_string()) && err.contains(why),
            "{what}: {err}"
        );
    }
    // What the home allows: loaded, overriding by id, installed by the operator, run.
    std::fs::write(
        &file,
        entry("matrix = \"fixture\"\nenv = [\"OPENAI_API_KEY\"]\n"),
    )
    .unwrap();
    let list = ok(&craik_in(&project, &["runners", "list"]));
    assert!(
        list.lines()
            .any(|l| l.starts_with("p ") && l.contains("project")),
        "{list}"
    );
    ok(&craik_in(&project, &["runners", "install", "p"]));
    assert!(home.join("runners/p/pin.json").is_file());
    let out = craik_in(
        &project,
        &[
            "run",
            example("docs-review").to_str().unwrap(),
            "--runner",
            "p",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let id = run_id_of(&out);
    let inputs: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join("runs").join(&id).join("inputs.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(inputs["runner_adapter"]["origin"], "project");
}

#[test]
fn issue_22_npx_and_uvx_entries_refuse_loose_versions_and_files_that_are_not_packages() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let tarball = dir.path().join("acme-reviewer-1.2.3.tgz");
    std::fs::write(&tarball, b"not really a tarball").unwrap();
    ok(&runners(
        &home,
        &[
            "add",
            "reviewer",
            "--backend",
            "npx",
            "--package",
            "@acme/reviewer@1.2.3",
            "--source",
            tarball.to_str().unwrap(),
            "--install",
            "cache",
            "--trust",
            "low",
            "--support",
            "repo.read=supported",
            "--support",
            "repo.write.docs=prompt-handoff",
        ],
    ));
    // Not a package npm can install: refused (exit 3), naming the runner, with no tree and no
    // pin left behind (a real tarball installs in backends.rs).
    let out = runners(&home, &["install", "reviewer"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("runner `reviewer`: "),
        "{}",
        transcript(&out)
    );
    assert!(!home.join("runners/reviewer").exists());
    // A version that is not exact is refused by `add` before anything is written.
    let text_before = std::fs::read_to_string(home.join("runners.toml")).unwrap();
    let out = runners(
        &home,
        &[
            "add",
            "loose",
            "--backend",
            "uvx",
            "--package",
            "pkg>=1.0",
            "--trust",
            "low",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a version pin is required"));
    assert_eq!(
        std::fs::read_to_string(home.join("runners.toml")).unwrap(),
        text_before
    );
    // A low-trust inline matrix claiming shell is refused by `add` too.
    let out = runners(
        &home,
        &[
            "add",
            "bold",
            "--backend",
            "uvx",
            "--package",
            "pkg==1.0.0",
            "--trust",
            "low",
            "--support",
            "shell.test=supported",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("claims more than its trust allows"));
}

#[test]
fn issue_22_a_runner_added_from_docs_runners_md_alone() {
    crate::ensure_adapters();
    let doc = std::fs::read_to_string(repo_root().join("docs/runners.md")).unwrap();
    let section = doc
        .split("## Adding a runner, step by step")
        .nth(1)
        .unwrap();
    let block = section
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    assert!(
        block.contains("craik runners add") && block.contains("craik run examples/docs-review")
    );
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    copy_dir(
        &repo_root().join("examples/docs-review"),
        &cwd.join("examples/docs-review"),
    );
    let bin = assert_cmd::cargo::cargo_bin("craik");
    let out = std::process::Command::new("sh")
        .args(["-e", "-c", block])
        .current_dir(&cwd)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", bin.parent().unwrap().display()),
        )
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("no-state"))
        .env("CRAIK_CONFIG", "none")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed, 0 failed") || stdout.contains("passed, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.contains(": completed"), "{stdout}");
    assert!(stdout.contains("1 journal: 1 valid"), "{stdout}");
    // Then the refusal the doc shows, for one changed byte.
    let home = cwd.join(".craik");
    flip_byte(
        &home.join("runners/my-fixture/bin/craik-adapter-fixture"),
        100,
    );
    let out = std::process::Command::new(&bin)
        .args(["run", "examples/docs-review", "--runner", "my-fixture"])
        .current_dir(&cwd)
        .env("XDG_STATE_HOME", dir.path().join("no-state"))
        .env("CRAIK_CONFIG", "none")
        .env_remove("CRAIK_HOME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let pinned = sha256_field(&err, "(expected ");
    assert!(
        err.contains(&format!("(expected {pinned}, found sha256:")),
        "{err}"
    );
    let _ = sha256_field;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[test]
fn issue_22_unknown_runner_names_list_the_registered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, text) = refused_run(&home, &example("docs-review"), &["--runner", "hal9000"]);
    assert_eq!(exit, 2, "{text}");
    assert!(
        text.contains("unknown runner `hal9000`; registered runners: claude, codex, fixture, fixture-adapter, gemini"),
        "{text}"
    );
    let out = runners(&home, &["show", "hal9000"]);
    assert_eq!(out.status.code(), Some(2));
    // A built-in cannot be removed; an entry id is checked before the file is touched.
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("runners.toml"), "").unwrap();
    let out = runners(&home, &["remove", "codex"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("built-in runners cannot be removed"));
    let out = runners(&home, &["add", "Bad Id", "--backend", "program"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn issue_22_a_run_resumes_only_with_the_adapter_bytes_it_started_with() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let adapter = adapter_copy(dir.path());
    ok(&runners(
        &home,
        &[
            "add",
            "parked",
            "--backend",
            "program",
            "--command",
            adapter.to_str().unwrap(),
            "--scenario-arg=--fixture",
            "--matrix",
            "fixture",
        ],
    ));
    ok(&runners(&home, &["install", "parked"]));
    let (exit, id, text) = run_example(&home, &example("approval"), &["--runner", "parked"]);
    assert_eq!(exit, 6, "{text}");
    let approval = crate::runs::pending_approval(&home);
    let out = crate::runs::approve(&home, &approval, "user:alice");
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // The adapter changed (and even re-pinned by the operator): the parked run does not
    // continue under other bytes than it started with.
    flip_byte(&adapter, 2048);
    let out = crate::runs::resume(&home, &id);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed since it was installed"));
    ok(&runners(&home, &["install", "parked"]));
    let out = crate::runs::resume(&home, &id);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the adapter changed since the run started")
            && err.contains(&sha256_file(&adapter)),
        "{err}"
    );
    // Back to the bytes it started with: it continues and completes.
    flip_byte(&adapter, 2048);
    ok(&runners(&home, &["install", "parked"]));
    let out = crate::runs::resume(&home, &id);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(run_json(&home, &id)["status"], "completed");
    verify_run(&home, &id, false);
    // An edited digest in inputs.json is named by verification.
    let path = home.join("runs").join(&id).join("inputs.json");
    let mut inputs: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    inputs["runner_adapter"]["sha256"] = json!(format!("sha256:{}", "0".repeat(64)));
    std::fs::write(&path, serde_json::to_vec_pretty(&inputs).unwrap()).unwrap();
    let out = craik()
        .args(["receipts", "verify"])
        .arg(home.join("runs").join(&id))
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("field `runner_adapter.sha256` is not what the run signed"),
        "{}",
        transcript(&out)
    );
}

#[test]
fn issue_22_a_prebundled_runner_pins_its_whole_tree() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(bundle.join("bin")).unwrap();
    std::fs::copy(adapter_bin("fixture"), bundle.join("bin/adapter")).unwrap();
    std::fs::write(bundle.join("lib.dat"), "dependency v1\n").unwrap();
    ok(&runners(
        &home,
        &[
            "add",
            "bundled",
            "--backend",
            "program",
            "--command",
            "bin/adapter",
            "--install",
            "prebundled",
            "--source",
            bundle.to_str().unwrap(),
            "--scenario-arg=--fixture",
            "--matrix",
            "fixture",
        ],
    ));
    ok(&runners(&home, &["install", "bundled"]));
    let (exit, id, text) = run_example(&home, &example("docs-review"), &["--runner", "bundled"]);
    assert_eq!(exit, 0, "{text}");
    let meta = &receipts(&home, &id)[0]["result"]["metadata"]["runner_adapter"];
    assert_eq!(meta["path"], json!(bundle.canonicalize().unwrap()));
    assert_eq!(
        meta["exec"],
        json!(bundle.join("bin/adapter").canonicalize().unwrap())
    );
    // Any file of the bundle changing (not only the program) refuses the launch.
    std::fs::write(bundle.join("lib.dat"), "dependency v2\n").unwrap();
    let (exit, text) = refused_run(&home, &example("docs-review"), &["--runner", "bundled"]);
    assert_eq!(exit, 1, "{text}");
    assert!(
        text.contains("changed since it was installed (expected sha256:"),
        "{text}"
    );
    // A command outside the bundle is refused, from the install on.
    std::fs::write(bundle.join("lib.dat"), "dependency v1\n").unwrap();
    std::fs::copy(adapter_bin("fixture"), dir.path().join("outside")).unwrap();
    ok(&runners(
        &home,
        &[
            "add",
            "escaping",
            "--backend",
            "program",
            "--command",
            "../outside",
            "--install",
            "prebundled",
            "--source",
            bundle.to_str().unwrap(),
            "--matrix",
            "fixture",
        ],
    ));
    let out = runners(&home, &["install", "escaping"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`../outside` lies outside the pinned tree"),
        "{}",
        transcript(&out)
    );
    let out = runners(&home, &["check", "escaping"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
}

#[test]
fn issue_22_check_handshake_starts_each_adapter_under_its_registry_identity() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let adapter = adapter_copy(dir.path());
    for (id, matrix) in [("honest", "fixture"), ("liar", "codex")] {
        ok(&runners(
            &home,
            &[
                "add",
                id,
                "--backend",
                "program",
                "--command",
                adapter.to_str().unwrap(),
                "--install",
                "cache",
                "--scenario-arg=--fixture",
                "--matrix",
                matrix,
            ],
        ));
        ok(&runners(&home, &["install", id]));
    }
    let out = runners(&home, &["check", "honest", "--handshake"]);
    let text = ok(&out);
    assert!(text.contains("handshake: runner_fixture 0.1.0"), "{text}");
    // The adapter announces another runner than the registry's matrix names: refused.
    let out = runners(&home, &["check", "liar", "--handshake"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("claims to be `runner_fixture` (matrix: `runner_fixture`), but was started as `runner_codex`"),
        "{}",
        transcript(&out)
    );
    // Without --handshake the pins alone pass; nothing of the checks is left in the home.
    ok(&runners(&home, &["check"]));
    assert!(!home.join("runners/honest/.handshake").exists());
    assert!(!home.join("runners/codex").exists());
    let out = runners(&home, &["check", "--handshake"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!home.join("runners/codex").exists());
}

#[test]
fn issue_22_a_run_resumes_only_under_the_registry_entry_it_started_with() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("craik.toml"), "home = \"../home\"\n").unwrap();
    let home = dir.path().join("home");
    let adapter = adapter_copy(dir.path());
    let file = project.join("runners.toml");
    let entry = format!(
        "[runner.parked]\nbackend = \"program\"\ncommand = \"{}\"\nscenario_arg = \"--fixture\"\nmatrix = \"fixture\"\n",
        adapter.display()
    );
    std::fs::write(&file, &entry).unwrap();
    ok(&craik_in(&project, &["runners", "install", "parked"]));
    let out = craik_in(
        &project,
        &[
            "run",
            example("approval").to_str().unwrap(),
            "--runner",
            "parked",
        ],
    );
    assert_eq!(out.status.code(), Some(6), "{}", transcript(&out));
    let id = run_id_of(&out);
    let inputs: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join("runs").join(&id).join("inputs.json")).unwrap(),
    )
    .unwrap();
    let recorded = inputs["runner_adapter"]["entry_sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(recorded.starts_with("sha256:"), "{inputs}");
    let approval = crate::runs::pending_approval(&home);
    let out = crate::runs::approve(&home, &approval, "user:alice");
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // Same adapter bytes, same pin, but the project's entry now gives the adapter another read
    // path: the parked run does not continue under a definition it did not start with.
    std::fs::create_dir_all(project.join("notes")).unwrap();
    std::fs::write(&file, format!("{entry}read = [\"notes\"]\n")).unwrap();
    let resume = || craik_in(&project, &["runs", "resume", &id, "--by", "user:op"]);
    let out = resume();
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    // Refused by the pin (the entry as installed, round 9), or by the run's own record.
    assert!(
        err.contains(&format!(
            "runner `parked`: its registry entry changed since the run started (definition {recorded} then, sha256:"
        )) && err.contains(&file.display().to_string())
            || err.contains(&format!(
                "runner `parked`: its registry entry changed since it was installed (expected {recorded}"
            )),
        "{err}"
    );
    assert_eq!(run_json(&home, &id)["status"], "blocked");
    // The entry as it was: the run continues and completes (the home named another way —
    // absolute now, `../home` from craik.toml then — is the same definition).
    std::fs::write(&file, &entry).unwrap();
    let out = craik_in(
        &project,
        &[
            "runs",
            "resume",
            &id,
            "--by",
            "user:op",
            "--home",
            home.canonicalize().unwrap().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(run_json(&home, &id)["status"], "completed");
    verify_run(&home, &id, false);
}

/// Outside testing round 9: the pin covers the registry entry as installed, not only the
/// adapter's bytes — a project matrix edited after `runners install` (more support, or words
/// for the prompt) is refused at the next launch, naming both digests.
#[test]
fn issue_22_an_entry_changed_after_install_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("craik.toml"), "home = \"../home\"\n").unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("runners.toml"), "max_trust = \"medium\"\n").unwrap();
    let adapter = adapter_copy(dir.path());
    let entry = |support: &str| {
        format!(
            "[runner.p]\nbackend = \"program\"\ncommand = \"{}\"\nscenario_arg = \"--fixture\"\n\n[runner.p.capabilities]\nrunner_id = \"runner_fixture\"\ntrust = \"medium\"\nsupport = {{ {support} }}\n",
            adapter.display()
        )
    };
    let file = project.join("runners.toml");
    std::fs::write(&file, entry("\"repo.read\" = \"supported\"")).unwrap();
    ok(&craik_in(&project, &["runners", "install", "p"]));
    let run = |project: &Path| {
        craik_in(
            project,
            &[
                "run",
                example("docs-review").to_str().unwrap(),
                "--runner",
                "p",
            ],
        )
    };
    let first = run(&project);
    assert_ne!(first.status.code(), Some(2), "{}", transcript(&first));
    std::fs::write(
        &file,
        entry("\"repo.read\" = \"supported\", \"repo.write.docs\" = \"supported\""),
    )
    .unwrap();
    let out = run(&project);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "runner `p`: its registry entry changed since it was installed (expected sha256:"
        ) && err.contains("found sha256:"),
        "{}",
        transcript(&out)
    );
    assert_ne!(out.status.code(), Some(0));
    // Reviewed and installed again: it runs.
    ok(&craik_in(&project, &["runners", "install", "p"]));
    let again = run(&project);
    assert!(
        !String::from_utf8_lossy(&again.stderr).contains("changed since it was installed"),
        "{}",
        transcript(&again)
    );
}

/// Issue 32 item 1: a `cli` entry is pinned whole. A launcher inside an npm package (a JS shim
/// that loads its chunks) is refused as a single-file pin, naming the fix; pinned as a tree
/// (`--install prebundled`), it runs live through the shipped handoff adapter, and a byte
/// appended to a file the launcher loads — not the launcher — is refused at launch.
#[test]
fn issue_32_a_cli_is_pinned_with_every_file_of_its_package() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let pkg = dir.path().join("prefix/node_modules/fake-agent");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::create_dir_all(pkg.join("lib")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"fake-agent","bin":{"fake-agent":"bin/cli"}}"#,
    )
    .unwrap();
    // The launcher runs its chunk, as a bundle imports one.
    let chunk = pkg.join("lib/chunk.sh");
    std::fs::copy(fake_cli(dir.path(), "codex"), &chunk).unwrap();
    std::fs::write(
        pkg.join("bin/cli"),
        "#!/bin/sh\nexec /bin/sh \"$(dirname \"$0\")/../lib/chunk.sh\" \"$@\"\n",
    )
    .unwrap();
    crate::adapters::make_executable(&pkg.join("bin/cli"));
    let launcher = pkg.join("bin/cli");
    for install in ["cache", "installed"] {
        let id = format!("agent-{install}");
        ok(&runners(
            &home,
            &[
                "add",
                &id,
                "--backend",
                "cli",
                "--adapter",
                "codex",
                "--command",
                launcher.to_str().unwrap(),
                "--install",
                install,
            ],
        ));
        let out = runners(&home, &["install", &id]);
        assert_ne!(
            out.status.code(),
            Some(0),
            "{install}: {}",
            transcript(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("a launcher inside an npm package")
                && err.contains("--install prebundled"),
            "{install}: {err}"
        );
    }
    let prefix = dir.path().join("prefix/node_modules");
    ok(&runners(
        &home,
        &[
            "add",
            "agent",
            "--backend",
            "cli",
            "--adapter",
            "codex",
            "--install",
            "prebundled",
            "--source",
            prefix.to_str().unwrap(),
            "--command",
            "fake-agent/bin/cli",
        ],
    ));
    ok(&runners(&home, &["install", "agent"]));
    ok(&runners(&home, &["check", "agent"]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        simple_steps(),
        &[("README.md", "hello\n")],
    );
    let task = ex.join("task_request.json");
    let ws = ex.join("workspace");
    let (exit, id, text) = run_example(
        &home,
        &task,
        &["--runner", "agent", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(exit, 0, "{text}");
    verify_run(&home, &id, false);
    // A file the launcher loads changes: refused at check and at launch.
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes.extend_from_slice(b"\necho injected >&2\n");
    std::fs::write(&chunk, bytes).unwrap();
    let out = runners(&home, &["check", "agent"]);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    let (exit, text) = refused_run(
        &home,
        &task,
        &["--runner", "agent", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(exit, 1, "{text}");
    assert!(text.contains("changed since it was installed"), "{text}");
}

/// Issue 32: a `cli` entry's endpoint, model, key variable and further CLI flags are checked
/// when the file loads (one line naming the file, line, field and value); only the home's file
/// may give them; flags come from the CLI's allow-list, never free text.
#[test]
fn issue_32_cli_configuration_is_checked_when_the_registry_loads() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let file = home.join("runners.toml");
    let entry = |adapter: &str, extra: &str| {
        format!(
            "[runner.x]\nbackend = \"cli\"\nadapter = \"{adapter}\"\ncommand = \"/bin/true\"\n{extra}"
        )
    };
    let cases: &[(String, &str)] = &[
        (
            entry("codex", "endpoint = \"https://user:pw@llm.example/v1\"\n"),
            "5: runner.x.endpoint `https://user:pw@llm.example/v1`: no user or password in an endpoint: name the variable holding the key in `key_env`",
        ),
        (
            entry("codex", "endpoint = \"https://llm.example/v1?key=sk-1\"\n"),
            "5: runner.x.endpoint `https://llm.example/v1?key=sk-1`: no query or fragment in an endpoint (a key there would be recorded: use `key_env`)",
        ),
        (
            entry("gemini", "endpoint = \"llm.example:443\"\n"),
            "5: runner.x.endpoint `llm.example:443`: an endpoint starts with `http://` or `https://`",
        ),
        (
            entry("claude", "model = \"--dangerously-skip-permissions\"\n"),
            "5: runner.x.model `--dangerously-skip-permissions`: a model name is 1 to 200 ASCII letters, digits and `-._:/@`, not starting with `-`",
        ),
        (
            entry("claude", "key_env = \"CRAIK_KEY\"\n"),
            "5: runner.x.key_env `CRAIK_KEY`: Craik's own variables (`CRAIK_*`) never reach an adapter",
        ),
        (
            entry("claude", "key_env = \"sk-ant-real-key\"\n"),
            "5: runner.x.key_env `sk-ant-real-key`: a variable name is uppercase ASCII letters, digits and `_` (names only, never values)",
        ),
        (
            entry(
                "claude",
                "cli_args = [\"--effort\", \"low\", \"--dangerously-skip-permissions\"]\n",
            ),
            "5: runner.x.cli_args[2] `--dangerously-skip-permissions`: not a flag Craik passes to claude (allowed: --effort (low|medium|high|xhigh|max), --max-budget-usd AMOUNT, --fallback-model MODEL, --exclude-dynamic-system-prompt-sections, --disable-slash-commands, --include-partial-messages, --safe-mode, --bare)",
        ),
        (
            entry("codex", "cli_args = [\"-c\", \"sandbox_mode=danger-full-access\"]\n"),
            "5: runner.x.cli_args[1] `sandbox_mode=danger-full-access`: -c model_reasoning_effort=none|minimal|low|medium|high|xhigh, -c model_reasoning_summary=auto|concise|detailed|none, -c model_verbosity=low|medium|high, -c model_context_window=N, -c model_auto_compact_token_limit=N, -c hide_agent_reasoning=true|false: `sandbox_mode` is not an allowed setting",
        ),
        (
            entry("gemini", "cli_args = [\"--yolo\"]\n"),
            "5: runner.x.cli_args[0] `--yolo`: not a flag Craik passes to gemini (allowed: -d)",
        ),
        // Outside testing round r32: `args` named another program as the CLI past its pin;
        // `env` passed NODE_OPTIONS and the like.
        (
            entry("codex", "args = [\"--cli\", \"/bin/sh\"]\n"),
            "5: runner.x.args[0] `--cli`: a `cli` entry takes no `args`: its CLI is configured by `endpoint`, `model`, `key_env` and `cli_args` (allow-listed)",
        ),
        (
            entry("claude", "env = [\"NODE_OPTIONS\"]\n"),
            "5: runner.x.env[0] `NODE_OPTIONS`: a `cli` entry passes no variables to its CLI but its key (`key_env`): one such as NODE_OPTIONS or CODEX_HOME would load code outside the pin or a configuration outside the CLI's private home",
        ),
        (
            "[runner.x]\nbackend = \"program\"\ncommand = \"/bin/true\"\nmatrix = \"fixture\"\nendpoint = \"http://127.0.0.1:1\"\n".to_owned(),
            "5: runner.x.endpoint `http://127.0.0.1:1`: not a key of a `program` entry (a `cli` entry's)",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&file, text).unwrap();
        let out = runners(&home, &["check"]);
        assert_eq!(out.status.code(), Some(3), "{want}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            format!("craik: {}:{want}", file.display()),
            "{text}"
        );
        // A run refuses the same way, before anything is written.
        let (exit, text) = refused_run(&home, &example("docs-review"), &[]);
        assert_eq!(exit, 3, "{text}");
        assert!(!home.join("runs").exists());
    }
    // `runners add` checks before it writes: nothing is written.
    std::fs::remove_file(&file).unwrap();
    let out = runners(
        &home,
        &[
            "add",
            "y",
            "--backend",
            "cli",
            "--adapter",
            "gemini",
            "--command",
            "/bin/true",
            "--cli-arg=--approval-mode=yolo",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "runner.y.cli_args[0] `--approval-mode=yolo`: not a flag Craik passes to gemini"
        ),
        "{}",
        transcript(&out)
    );
    assert!(!file.exists());
    // What is allowed is written as given and shown (the key by its variable's name).
    ok(&runners(
        &home,
        &[
            "add",
            "y",
            "--backend",
            "cli",
            "--adapter",
            "claude",
            "--command",
            "/bin/true",
            "--endpoint",
            "http://127.0.0.1:8080",
            "--model",
            "claude-x",
            "--key-env",
            "MY_ANTHROPIC_KEY",
            "--cli-arg=--effort=low",
            "--cli-arg=--bare",
        ],
    ));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("endpoint = \"http://127.0.0.1:8080\"")
            && text.contains("key_env = \"MY_ANTHROPIC_KEY\"")
            && text.contains("cli_args = [\"--effort=low\", \"--bare\"]"),
        "{text}"
    );
    let shown = ok(&runners(&home, &["show", "y"]));
    assert!(
        shown.contains("endpoint   http://127.0.0.1:8080")
            && shown.contains("model      claude-x")
            && shown.contains("key from   $MY_ANTHROPIC_KEY")
            && shown.contains("cli args   [\"--effort\",\"low\",\"--bare\"]"),
        "{shown}"
    );
    // A project file may not point a CLI (and its key) anywhere, nor pass it flags.
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("craik.toml"), "home = \"../home\"\n").unwrap();
    for (extra, field) in [
        ("endpoint = \"https://attacker.example/v1\"\n", "endpoint"),
        ("key_env = \"MY_ANTHROPIC_KEY\"\n", "key_env"),
        ("model = \"m\"\n", "model"),
        ("cli_args = [\"--bare\"]\n", "cli_args[0]"),
    ] {
        std::fs::write(
            project.join("runners.toml"),
            format!("[runner.p]\nbackend = \"cli\"\nadapter = \"claude\"\ncommand = \"/bin/true\"\n{extra}"),
        )
        .unwrap();
        let out = craik_in(&project, &["runners", "check"]);
        assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("runners.toml:5: runner.p.{field} `"))
                && err.contains("a project registry may not configure a CLI's endpoint, model, key or flags: only the home's runners.toml does"),
            "{err}"
        );
    }
}
