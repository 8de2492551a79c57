//! Backends that really run (issue 22 item 3): a Node adapter packed with `npm pack` and
//! installed as an `npx` entry, the Python example built into a wheel and installed as a `uvx`
//! entry, a `cli` entry around a stand-in agent CLI, a `program` entry and the `provider`
//! backend against a loopback server — each passing `craik runners conformance ID` (the same
//! canonical scenarios, launched as a run launches it) and a governed run of
//! `examples/docs-review` whose receipts verify. Nothing reaches the network: npm runs
//! `--offline` against an unreachable registry, pip with `--no-index`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::adapters::adapter_bin;
use crate::provider::{Recorded, phase_of, serve, wire_with};
use crate::registry::{ok, runners};
use crate::runs::{example, receipts, run_example, verify_run};
use crate::{craik, repo_root, transcript};

/// The host's fixed PATH: what `craik runners install` finds `npm`, `node` and `python3` on.
const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `program ARGS` runs on the host's PATH. Missing in CI (`CI` set) is a failure, never a
/// silent skip; on a developer machine the test says so and returns.
fn tool(program: &str, args: &[&str]) -> bool {
    let found = Command::new(program)
        .args(args)
        .env("PATH", SAFE_PATH)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "`{program}` is needed on {SAFE_PATH} (.ci/run installs it)"
    );
    #[allow(clippy::print_stderr, reason = "a skip must be seen")]
    if !found {
        eprintln!("skipped: `{program}` not on {SAFE_PATH}");
    }
    found
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

/// `npm pack` of examples/adapters/node (from a copy), into `dir`: the tarball's path.
fn node_tarball(dir: &Path) -> PathBuf {
    let src = dir.join("node-src");
    copy_dir(&repo_root().join("examples/adapters/node"), &src);
    let out = Command::new("npm")
        .args(["pack", "--offline", "--silent", "--pack-destination"])
        .arg(dir)
        .current_dir(&src)
        .env("PATH", SAFE_PATH)
        .env("npm_config_cache", dir.join("npm-cache"))
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let tarball = dir.join("craik-node-example-0.1.0.tgz");
    assert!(tarball.is_file(), "{}", transcript(&out));
    tarball
}

/// A wheel of examples/adapters/python (built from a copy, offline): its path.
fn python_wheel(dir: &Path) -> PathBuf {
    let src = dir.join("python-src");
    copy_dir(&repo_root().join("examples/adapters/python"), &src);
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-w",
        ])
        .arg(dir.join("dist"))
        .arg(&src)
        .env("PATH", SAFE_PATH)
        .env("PIP_NO_CACHE_DIR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let wheel = dir.join("dist/craik_python_example-0.1.0-py3-none-any.whl");
    assert!(wheel.is_file(), "{}", transcript(&out));
    wheel
}

/// `craik runners conformance ID`: every canonical scenario passed.
fn conforms(home: &Path, id: &str) {
    let out = runners(home, &["conformance", id, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{id}: {}", transcript(&out));
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = checks
        .iter()
        .map(|c| c["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "handshake",
            "normal step",
            "act step",
            "structured error: unknown method",
            "structured error: invalid params",
            "malformed line",
            "oversize line",
            "cancellation",
            "timeout behaviour",
            "clean shutdown"
        ],
        "{id}"
    );
    assert!(
        checks.iter().all(|c| c["passed"] == true),
        "{id}: {checks:?}"
    );
    // The scratch it ran in is gone; the installed entry is untouched.
    assert!(!home.join("runners").join(id).join(".conformance").exists());
}

/// A governed run of examples/docs-review with `id` completes, its receipts verify, and its
/// signed inputs record the runner as registered. Returns the recorded `runner_adapter`.
fn docs_review(home: &Path, id: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--runner", id];
    args.extend(extra);
    let (exit, run, text) = run_example(home, &example("docs-review"), &args);
    assert_eq!(exit, 0, "{id}: {text}");
    assert!(text.contains(": completed"), "{id}: {text}");
    verify_run(home, &run, false);
    let rs = receipts(home, &run);
    let meta = rs[0]["result"]["metadata"]["runner_adapter"].clone();
    assert_eq!(meta["id"], id, "{meta}");
    assert_eq!(meta["pinned"], true, "{meta}");
    meta
}

fn add(home: &Path, args: &[&str]) {
    ok(&runners(home, &[&["add"], args].concat()));
}

#[test]
fn issue_22_npx_entry_from_a_packed_node_adapter_conforms_runs_and_refuses_a_changed_byte() {
    if !tool("npm", &["--version"]) || !tool("node", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let tarball = node_tarball(dir.path());
    add(
        &home,
        &[
            "node-example",
            "--backend",
            "npx",
            "--package",
            "craik-node-example@0.1.0",
            "--source",
            tarball.to_str().unwrap(),
            "--scenario-arg=--fixture",
            "--trust",
            "medium",
            "--support",
            "repo.read=supported",
            "--support",
            "repo.write.docs=supported",
            "--support",
            "shell.test=supported",
            "--support",
            "memory.propose=supported",
        ],
    );
    let pin: Value = serde_json::from_str(&ok(&runners(
        &home,
        &["install", "node-example", "--format", "json"],
    )))
    .unwrap();
    let tree = home.join("runners/node-example/pkg");
    assert_eq!(pin["path"], json!(tree));
    let script = tree.join("node_modules/craik-node-example/adapter.js");
    assert!(script.is_file());
    // The pin is of the whole installed tree, not of the tarball.
    assert_ne!(
        pin["sha256"],
        json!(craik_host::registry::digest_file(&tarball).unwrap())
    );
    // Nothing of npm's cache or staging is left beside the tree.
    let left: Vec<String> = std::fs::read_dir(home.join("runners/node-example"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    ok(&runners(&home, &["check", "node-example", "--handshake"]));
    // `show` says what a run starts: node on the installed package's bin, not npx, with no
    // global module folders (the adapter's HOME is writable to it).
    let shown = ok(&runners(&home, &["show", "node-example"]));
    let node = craik_host::registry::resolve_command("node").unwrap();
    assert!(
        shown.contains(&format!(
            "launches   [{},\"--no-global-search-paths\",{}]",
            json!(node.display().to_string()),
            json!(script.display().to_string())
        )),
        "{shown}"
    );
    conforms(&home, "node-example");
    let meta = docs_review(&home, "node-example", &[]);
    assert_eq!(meta["backend"], "npx");
    assert_eq!(meta["package"], "craik-node-example@0.1.0");
    assert_eq!(meta["sha256"], pin["sha256"]);
    // node itself is the program executed, hashed and recorded.
    assert_eq!(meta["exec"], json!(node));
    // One byte changed anywhere in the installed tree: refused before launch, both digests named.
    let bytes = std::fs::read(&script).unwrap();
    let mut changed = bytes.clone();
    let at = changed.len() - 2;
    changed[at] ^= 0x01;
    std::fs::write(&script, &changed).unwrap();
    let (exit, _, text) = {
        let out = craik()
            .arg("run")
            .arg(example("docs-review"))
            .arg("--home")
            .arg(&home)
            .args(["--runner", "node-example"])
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            (),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    assert_eq!(exit, 1, "{text}");
    let expected = pin["sha256"].as_str().unwrap();
    let found = craik_host::registry::tree_digest(&tree).unwrap();
    assert_ne!(expected, found);
    assert!(
        text.contains(&format!("(expected {expected}, found {found})")),
        "{text}"
    );
    assert!(text.contains("changed since it was installed"), "{text}");
    let out = runners(&home, &["conformance", "node-example"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    // A file added to the tree is a change too.
    std::fs::write(&script, &bytes).unwrap();
    ok(&runners(&home, &["check", "node-example"]));
    std::fs::write(tree.join("node_modules/craik-node-example/extra.js"), "1\n").unwrap();
    let out = runners(&home, &["check", "node-example"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    // Reinstalling pins the tree afresh (the planted file is gone with the old tree).
    ok(&runners(&home, &["install", "node-example"]));
    assert!(
        !tree
            .join("node_modules/craik-node-example/extra.js")
            .exists()
    );
    ok(&runners(&home, &["check", "node-example"]));
}

#[test]
fn issue_22_npx_install_never_fetches_and_checks_the_package_it_installed() {
    if !tool("npm", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // Packages that depend on another (from the registry, or from git at a loopback port that
    // must never be contacted): refused before npm runs, leaving no tree and no pin.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let pack = |name: &str, version: &str, deps: &str| {
        let src = dir.path().join(format!("{name}-src"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("package.json"),
            format!(r#"{{"name":"{name}","version":"{version}","bin":{{"{name}":"a.js"}}{deps}}}"#),
        )
        .unwrap();
        std::fs::write(src.join("a.js"), "1\n").unwrap();
        let out = Command::new("npm")
            .args(["pack", "--offline", "--silent", "--pack-destination"])
            .arg(dir.path())
            .current_dir(&src)
            .env("PATH", SAFE_PATH)
            .env("npm_config_cache", dir.path().join("npm-cache"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        dir.path().join(format!("{name}-{version}.tgz"))
    };
    let needy = pack("needy", "1.0.0", r#","dependencies":{"left-pad":"1.3.0"}"#);
    let gitty = pack(
        "gitty",
        "1.0.0",
        &format!(
            r#","optionalDependencies":{{"netdep":"git+http://127.0.0.1:{port}/netdep.git"}}"#
        ),
    );
    let plain = pack("plain", "1.0.0", "");
    for (id, spec, tarball) in [
        ("needy", "needy@1.0.0", &needy),
        ("gitty", "gitty@1.0.0", &gitty),
        ("liar", "plain@2.0.0", &plain),
    ] {
        add(
            &home,
            &[
                id,
                "--backend",
                "npx",
                "--package",
                spec,
                "--source",
                tarball.to_str().unwrap(),
                "--trust",
                "low",
            ],
        );
    }
    for (id, key, dep) in [
        ("needy", "dependencies", "left-pad"),
        ("gitty", "optionalDependencies", "netdep"),
    ] {
        let started = std::time::Instant::now();
        let out = runners(&home, &["install", id]);
        assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("runner `{id}`: `"))
                && err.contains(&format!("package.json {key} `{dep}` is not bundled")),
            "{err}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(120));
        assert!(!home.join(format!("runners/{id}/pkg")).exists());
        assert!(!home.join(format!("runners/{id}/pin.json")).exists());
    }
    assert!(
        listener.accept().is_err(),
        "nothing contacted the git dependency's host"
    );
    // The tarball holds another version than the entry names: refused.
    let out = runners(&home, &["install", "liar"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not `plain@2.0.0`"),
        "{}",
        transcript(&out)
    );
}

#[test]
fn issue_22_uvx_entry_from_a_local_wheel_conforms_and_runs() {
    if !tool("python3", &["-m", "pip", "--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let wheel = python_wheel(dir.path());
    add(
        &home,
        &[
            "python-example",
            "--backend",
            "uvx",
            "--package",
            "craik-python-example==0.1.0",
            "--command",
            "craik-python-example",
            "--source",
            wheel.to_str().unwrap(),
            "--scenario-arg=--fixture",
            "--matrix",
            "fixture",
        ],
    );
    let pin: Value = serde_json::from_str(&ok(&runners(
        &home,
        &["install", "python-example", "--format", "json"],
    )))
    .unwrap();
    let tree = home.join("runners/python-example/pkg");
    assert_eq!(pin["path"], json!(tree));
    // A source distribution would run its build at install, unconfined: refused before pip.
    let sdist = dir.path().join("craik-python-example-0.1.0.tar.gz");
    std::fs::write(&sdist, b"setup.py would run here").unwrap();
    add(
        &home,
        &[
            "from-source",
            "--backend",
            "uvx",
            "--package",
            "craik-python-example==0.1.0",
            "--source",
            sdist.to_str().unwrap(),
            "--matrix",
            "fixture",
        ],
    );
    let out = runners(&home, &["install", "from-source"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a wheel (`.whl`)"),
        "{}",
        transcript(&out)
    );
    assert!(!home.join("runners/from-source").exists());
    assert!(tree.join("adapter.py").is_file());
    conforms(&home, "python-example");
    let meta = docs_review(&home, "python-example", &[]);
    assert_eq!(meta["backend"], "uvx");
    assert_eq!(meta["sha256"], pin["sha256"]);
    // Running it wrote no bytecode into the pinned tree: it still checks.
    ok(&runners(&home, &["check", "python-example"]));
    let mut text = std::fs::read_to_string(tree.join("adapter.py")).unwrap();
    text.push('\n');
    std::fs::write(tree.join("adapter.py"), text).unwrap();
    let out = runners(&home, &["check", "python-example"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("changed since it was installed")
            || String::from_utf8_lossy(&out.stderr).contains("changed since it was installed"),
        "{}",
        transcript(&out)
    );
}

#[test]
fn issue_22_program_and_cli_entries_conform_and_run_docs_review() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let stand_in = repo_root().join("examples/adapters/cli/stand-in-agent");
    add(
        &home,
        &[
            "my-fixture",
            "--backend",
            "program",
            "--command",
            adapter_bin("fixture").to_str().unwrap(),
            "--install",
            "cache",
            "--scenario-arg=--fixture",
            "--matrix",
            "fixture",
        ],
    );
    add(
        &home,
        &[
            "my-agent",
            "--backend",
            "cli",
            "--adapter",
            "codex",
            "--command",
            stand_in.to_str().unwrap(),
            "--install",
            "cache",
        ],
    );
    for id in ["my-fixture", "my-agent"] {
        ok(&runners(&home, &["install", id]));
        conforms(&home, id);
    }
    let meta = docs_review(&home, "my-fixture", &[]);
    assert_eq!(meta["backend"], "program");
    // No scenario for the cli entry: its handoff adapter runs live, around the stand-in.
    let meta = docs_review(&home, "my-agent", &[]);
    assert_eq!(meta["backend"], "cli");
    assert_eq!(
        meta["sha256"],
        json!(craik_host::registry::digest_file(&stand_in).unwrap())
    );
}

#[test]
fn issue_22_provider_entry_conforms_and_runs_against_the_loopback_server() {
    crate::ensure_adapters();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // The model's answers do examples/docs-review's work: patch the status page, check it.
    let (port, seen) = serve(Arc::new(move |r: &Recorded, _| {
        let phase = phase_of(&r.body);
        let text = match phase {
            "act" => json!({"status":"completed","summary":"fix and check","proposed_actions":[
                {"id":"action_fix","capability":"repo.write.docs","operation":"patch",
                 "target":"docs/status.md","edits":[{"old":"Status: stale","new":"Status: current"}]},
                {"id":"action_check","capability":"shell.test","operation":"execute",
                 "argv":["grep","-q","current","docs/status.md"]}]}),
            "evaluate" => json!({"status":"completed","summary":"done","next":"stop"}),
            _ => json!({"status":"completed","summary":phase}),
        };
        let (headers, body) = wire_with("chat-completions", true, text.to_string(), None);
        (200, headers, body)
    }));
    let base = format!("--arg=http://127.0.0.1:{port}");
    add(
        &home,
        &[
            "loopback",
            "--backend",
            "provider",
            "--api",
            "chat-completions",
            "--model",
            "m",
            "--arg=--base-url",
            &base,
            "--env",
            "OPENAI_API_KEY",
        ],
    );
    ok(&runners(&home, &["install", "loopback"]));
    let out = craik()
        .args([
            "runners",
            "conformance",
            "loopback",
            "--format",
            "json",
            "--home",
        ])
        .arg(&home)
        .env("OPENAI_API_KEY", "test-key-123")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let checks: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(checks.len(), 10);
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    let calls = seen.lock().unwrap().len();
    assert!(calls >= 2, "{calls}");
    let out = craik()
        .arg("run")
        .arg(example("docs-review"))
        .arg("--home")
        .arg(&home)
        .args(["--runner", "loopback", "--step-timeout-secs", "20"])
        .env("OPENAI_API_KEY", "test-key-123")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let run = text
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    verify_run(&home, run, false);
    let meta = &receipts(&home, run)[0]["result"]["metadata"]["runner_adapter"];
    assert_eq!(meta["backend"], "provider");
    assert!(seen.lock().unwrap().len() > calls);
    for r in seen.lock().unwrap().iter() {
        assert_eq!(r.header("authorization"), Some("Bearer test-key-123"));
    }
}

/// The `sh` block under `heading` in docs/runners.md.
fn doc_block(heading: &str) -> String {
    let doc = std::fs::read_to_string(repo_root().join("docs/runners.md")).unwrap();
    let section = doc.split(heading).nth(1).unwrap();
    section
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn issue_22_the_node_example_added_from_docs_runners_md_alone() {
    if !tool("npm", &["--version"]) || !tool("node", &["--version"]) {
        return;
    }
    let block = doc_block("## Adding the Node example with `npx`, step by step");
    for step in [
        "npm pack",
        "craik runners add node-example --backend npx",
        "craik runners install node-example",
        "craik runners conformance node-example",
        "craik run examples/docs-review --runner node-example",
        "craik receipts verify",
    ] {
        assert!(block.contains(step), "{step}: {block}");
    }
    // A new user's checkout: the example and the adapter, nothing else.
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    for part in ["examples/docs-review", "examples/adapters/node"] {
        copy_dir(&repo_root().join(part), &cwd.join(part));
    }
    let bin = assert_cmd::cargo::cargo_bin("craik");
    let out = Command::new("sh")
        .args(["-e", "-c", &block])
        .current_dir(&cwd)
        .env_clear()
        .env(
            "PATH",
            format!("{}:{SAFE_PATH}", bin.parent().unwrap().display()),
        )
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("no-state"))
        .env("CRAIK_CONFIG", "none")
        // Offline: an npm that tried to fetch would fail at once, not hang.
        .env("npm_config_offline", "true")
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("10 scenario(s): 10 passed, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.contains(": completed"), "{stdout}");
    assert!(stdout.contains("1 journal: 1 valid"), "{stdout}");
    // Then the refusal the doc shows, for one changed byte of the installed adapter.
    let home = cwd.join(".craik");
    let script = home.join("runners/node-example/pkg/node_modules/craik-node-example/adapter.js");
    let mut bytes = std::fs::read(&script).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&script, &bytes).unwrap();
    let out = Command::new(&bin)
        .args(["run", "examples/docs-review", "--runner", "node-example"])
        .current_dir(&cwd)
        .env("XDG_STATE_HOME", dir.path().join("no-state"))
        .env("CRAIK_CONFIG", "none")
        .env_remove("CRAIK_HOME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let pin: Value =
        serde_json::from_slice(&std::fs::read(home.join("runners/node-example/pin.json")).unwrap())
            .unwrap();
    let found = craik_host::registry::tree_digest(&home.join("runners/node-example/pkg")).unwrap();
    assert!(
        err.contains(&format!(
            "runner `node-example`: `{}` changed since it was installed (expected {}, found {found})",
            home.join("runners/node-example/pkg").display(),
            pin["sha256"].as_str().unwrap()
        )),
        "{err}"
    );
    // Nothing ran: no second run directory.
    assert_eq!(std::fs::read_dir(home.join("runs")).unwrap().count(), 1);
}
