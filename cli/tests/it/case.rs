//! Issue 21: project profiles (`craik project show`) and case files (`craik case build`, and
//! the one every `craik run` assembles and binds to its signed inputs).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::{craik, repo_root, transcript};

/// git with a fixed identity, dates and branch, and no configuration of the machine's.
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .args([
            "-c",
            "user.name=Craik Test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", transcript(&out));
}

fn repo(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
}

fn commit_all(dir: &Path) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "snapshot"]);
}

fn in_dir(cwd: &Path, args: &[&str]) -> Output {
    craik().current_dir(cwd).args(args).output().unwrap()
}

/// craik with the craik.toml of `cwd` (or above) in effect.
fn with_config(cwd: &Path, args: &[&str]) -> Output {
    craik()
        .env_remove("CRAIK_CONFIG")
        .env_remove("CRAIK_HOME")
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", transcript(out)))
}

#[test]
fn issue_21_case_build_on_a_fresh_clone_of_docs_review_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    repo(&clone);
    crate::policy::copy_dir(
        &repo_root().join("examples/docs-review"),
        &clone.join("examples/docs-review"),
    );
    commit_all(&clone);
    let home = dir.path().join("home");
    let home = home.to_str().unwrap();
    let args = [
        "case",
        "build",
        "examples/docs-review",
        "--format",
        "json",
        "--home",
        home,
    ];
    let first = in_dir(&clone, &args);
    assert_eq!(first.status.code(), Some(0), "{}", transcript(&first));
    let second = in_dir(&clone, &args);
    assert_eq!(second.status.code(), Some(0), "{}", transcript(&second));
    assert!(first.stdout == second.stdout, "two builds differ");
    // --out writes the same bytes as are printed.
    let out_file = dir.path().join("case.json");
    let mut with_out = args.to_vec();
    with_out.extend(["--out", out_file.to_str().unwrap()]);
    let third = in_dir(&clone, &with_out);
    assert_eq!(third.status.code(), Some(0), "{}", transcript(&third));
    assert!(std::fs::read(&out_file).unwrap() == first.stdout);
    // What it holds, whole: the committed example, from a commit made at a fixed time.
    insta::assert_snapshot!(
        "docs_review_case_file",
        String::from_utf8(first.stdout).unwrap()
    );
    // And the human summary.
    let human = in_dir(
        &clone,
        &["case", "build", "examples/docs-review", "--home", home],
    );
    insta::assert_snapshot!("docs_review_case_summary", transcript(&human));
}

#[test]
fn issue_21_a_run_signs_the_profile_hash_and_binds_its_case_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let example = repo_root().join("examples/docs-review");
    let (exit, id, text) = crate::runs::run_example(&home, &example, &[]);
    assert_eq!(exit, 0, "{text}");
    let run_dir = home.join("runs").join(&id);
    let case_bytes = std::fs::read(run_dir.join("case_file.json")).unwrap();
    let case: Value = serde_json::from_slice(&case_bytes).unwrap();
    assert_eq!(case["schema"], "craik.case_file");
    assert_eq!(case["task_id"], "task_docs_review");
    let shown = in_dir(
        &repo_root(),
        &[
            "project",
            "show",
            "examples/docs-review",
            "--format",
            "json",
        ],
    );
    assert_eq!(shown.status.code(), Some(0), "{}", transcript(&shown));
    let profile_sha = json(&shown)["sha256"].as_str().unwrap().to_owned();
    let first = in_dir(
        &repo_root(),
        &[
            "receipts",
            "show",
            run_dir.to_str().unwrap(),
            "0",
            "--format",
            "json",
        ],
    );
    assert_eq!(first.status.code(), Some(0), "{}", transcript(&first));
    let receipt = json(&first);
    let meta = receipt
        .pointer("/result/metadata")
        .or_else(|| receipt.pointer("/receipt/result/metadata"))
        .unwrap_or_else(|| panic!("{receipt}"));
    assert_eq!(meta["project_profile_sha256"], profile_sha.as_str());
    let digest = {
        use sha2::Digest as _;
        format!("sha256:{:x}", sha2::Sha256::digest(&case_bytes))
    };
    assert_eq!(meta["case_file_sha256"], digest.as_str());
}

#[test]
fn issue_21_resume_and_verify_refuse_an_edited_case_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) =
        crate::runs::run_example(&home, &repo_root().join("examples/approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let case = home.join("runs").join(&id).join("case_file.json");
    let mut bytes = std::fs::read(&case).unwrap();
    bytes.extend_from_slice(b" ");
    std::fs::write(&case, bytes).unwrap();
    let h = home.to_str().unwrap();
    let resume = in_dir(
        dir.path(),
        &["runs", "resume", &id, "--by", "user:alice", "--home", h],
    );
    assert_ne!(resume.status.code(), Some(0), "{}", transcript(&resume));
    let err = String::from_utf8_lossy(&resume.stderr);
    assert!(
        err.contains("case_file.json: changed since the run started"),
        "{}",
        transcript(&resume)
    );
    let verify = in_dir(
        dir.path(),
        &[
            "receipts",
            "verify",
            home.join("runs").join(&id).to_str().unwrap(),
            "--allow-open",
            "--home",
            h,
        ],
    );
    assert_eq!(verify.status.code(), Some(1), "{}", transcript(&verify));
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("inputs: seq 0: case_file.json: changed"),
        "{}",
        transcript(&verify)
    );
    // Deleting it is caught too.
    std::fs::remove_file(&case).unwrap();
    let verify = in_dir(
        dir.path(),
        &[
            "receipts",
            "verify",
            home.join("runs").join(&id).to_str().unwrap(),
            "--allow-open",
            "--home",
            h,
        ],
    );
    assert_eq!(verify.status.code(), Some(1), "{}", transcript(&verify));
}

/// A repository with `craik init` done; docs/guide.md and README.md committed.
fn initialised(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("repo");
    repo(&root);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("README.md"), "# Readme\n").unwrap();
    std::fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\nSee `src/main.rs`.\n",
    )
    .unwrap();
    let state = dir.join("state");
    let out = craik()
        .env_remove("CRAIK_CONFIG")
        .env("XDG_STATE_HOME", &state)
        .current_dir(&root)
        .args(["init"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    commit_all(&root);
    root
}

fn set_docs_paths(root: &Path, line: &str) {
    let file = root.join("craik.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let start = text.find("docs_paths = ").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    std::fs::write(&file, format!("{}{line}{}", &text[..start], &text[end..])).unwrap();
}

#[test]
fn issue_21_project_show_reads_craik_toml_and_refuses_a_bad_profile_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = initialised(dir.path());
    let text = std::fs::read_to_string(root.join("craik.toml")).unwrap();
    assert!(
        text.contains("docs_paths = [\"docs/**\", \"README.md\"]"),
        "init writes the docs paths that exist: {text}"
    );
    let ok = with_config(&root, &["project", "show", "--format", "json"]);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let shown = json(&ok);
    assert_eq!(
        shown["profile"]["docs"]["paths"],
        serde_json::json!(["docs/**", "README.md"])
    );
    assert_eq!(
        shown["profile"]["docs"]["immutable_paths"],
        serde_json::json!(["docs/adr/**"])
    );
    assert_eq!(
        shown["discovery"]["exclude"],
        serde_json::json!(["target/**", "node_modules/**"])
    );
    let sha = shown["sha256"].as_str().unwrap().to_owned();
    assert!(sha.starts_with("sha256:") && sha.len() == 71, "{sha}");
    // The hash follows the profile: another docs path, another hash.
    set_docs_paths(&root, "docs_paths = [\"docs/**\"]");
    let changed = json(&with_config(
        &root,
        &["project", "show", "--format", "json"],
    ));
    assert_ne!(changed["sha256"].as_str().unwrap(), sha);

    let refused = |line: &str| {
        set_docs_paths(&root, line);
        let out = with_config(&root, &["project", "show"]);
        assert_eq!(out.status.code(), Some(3), "{line}: {}", transcript(&out));
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        err
    };
    let err = refused("docs_paths = [\"docs/**\", \"nope/**\"]");
    assert!(
        err.contains(
            "craik.toml: project.docs_paths[1] `nope/**`: matches no file in the repository"
        ),
        "{err}"
    );
    std::os::unix::fs::symlink("/etc", root.join("linked")).unwrap();
    let err = refused("docs_paths = [\"linked/**\"]");
    assert!(
        err.contains("project.docs_paths[0] `linked/**`: leads through a symbolic link"),
        "{err}"
    );
    let err = refused("docs_paths = [\"../outside/**\"]");
    assert!(
        err.contains("project.docs_paths[0] `../outside/**`"),
        "{err}"
    );
    // No git repository.
    set_docs_paths(&root, "docs_paths = [\"docs/**\"]");
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    let out = with_config(&root, &["project", "show"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("project.repository `.`: no git repository"),
        "{err}"
    );
    // case build refuses the same way; a run goes on and records it as a stale risk.
    let out = with_config(&root, &["case", "build", "--help"]);
    assert_eq!(out.status.code(), Some(0));
}

/// A repository whose own configuration would run a command on any careless git call.
#[test]
fn issue_21_a_hostile_git_configuration_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    repo(&root);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/a.md"), "# A\n").unwrap();
    std::fs::write(root.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    commit_all(&root);
    let marker = dir.path().join("MARKER");
    let m = marker.display();
    for (key, value) in [
        ("core.fsmonitor", format!("touch {m}.fsmonitor; false")),
        ("core.pager", format!("touch {m}.pager; cat")),
        ("filter.evil.clean", format!("touch {m}.clean; cat")),
        ("filter.evil.process", format!("touch {m}.process")),
        ("diff.evil.textconv", format!("touch {m}.textconv; cat")),
        (
            "core.hooksPath",
            dir.path().join("hooks").display().to_string(),
        ),
    ] {
        git(&root, &["config", key, &value]);
    }
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    std::fs::write(root.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    // A modified tracked file, written after the index so git must look at its content.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(root.join("docs/a.md"), "# A, changed\n").unwrap();
    let out = build_docs_case(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let case = json(&out);
    assert_eq!(
        case["repo_state"]["dirty"],
        serde_json::json!([".M docs/a.md"]),
        "{case}"
    );
    let planted: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("MARKER"))
        .collect();
    assert!(
        planted.is_empty(),
        "git ran the repository's commands: {planted:?}"
    );
    // The same git, called carelessly, does run them: the test would catch a regression.
    std::process::Command::new("git")
        .current_dir(&root)
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("MARKER")),
        "the hostile configuration is not hostile"
    );
}

/// Links out and in loops, names with control characters, secrets, a binary file, a 1 GB
/// file, `.craik/` and agent instructions among the docs.
/// `case build` (JSON) of `dir/repo` with a profile whose docs are `docs/` and a review task.
fn build_docs_case(dir: &Path) -> Output {
    let profile = serde_json::json!({
        "schema": "craik.project_profile", "id": "project_h", "name": "h",
        "repo": {"type": "git", "local_path": "repo"},
        "docs": {"paths": ["docs/"]}, "memory": {"backend": "local"}
    });
    std::fs::write(dir.join("project_profile.json"), profile.to_string()).unwrap();
    std::fs::write(
        dir.join("task_request.json"),
        serde_json::json!({
            "id": "task_h", "title": "t", "objective": "o", "project_id": "project_h",
            "requested_by": "user:h", "mode": "review", "created_at": "2026-11-26T00:00:00Z"
        })
        .to_string(),
    )
    .unwrap();
    in_dir(
        dir,
        &["case", "build", ".", "--format", "json", "--home", "nohome"],
    )
}

#[test]
fn issue_21_a_hostile_repository_is_listed_safely() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    repo(&root);
    let docs = root.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("ok.md"), "# Fine\n").unwrap();
    let secret = "ghp_0123456789abcdefghij0123456789abcdef";
    std::fs::write(docs.join("deploy.md"), format!("# Deploy with {secret}\n")).unwrap();
    std::fs::write(docs.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0binary").unwrap();
    std::fs::write(docs.join("evil\x1b[31m.md"), "# red\n").unwrap();
    std::fs::write(docs.join("new\nline.md"), "# forged\n").unwrap();
    std::fs::File::create(docs.join("huge.bin"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::os::unix::fs::symlink(".", docs.join("loop")).unwrap();
    std::os::unix::fs::symlink("b", docs.join("a")).unwrap();
    std::os::unix::fs::symlink("a", docs.join("b")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", docs.join("passwd.md")).unwrap();
    std::fs::write(docs.join("AGENTS.md"), "# AGENTS-MARKER\n").unwrap();
    std::fs::create_dir_all(docs.join(".craik")).unwrap();
    std::fs::write(docs.join(".craik/state.md"), "# CRAIK-STATE-MARKER\n").unwrap();
    let out = build_docs_case(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    for absent in [
        secret,
        "AGENTS-MARKER",
        "CRAIK-STATE-MARKER",
        "root:",
        "forged",
        "\\u001b",
        "evil",
    ] {
        assert!(!text.contains(absent), "`{absent}` leaked: {text}");
    }
    let case = json(&out);
    let entry = |path: &str| {
        case["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["source"] == path)
            .cloned()
            .unwrap_or_else(|| panic!("no {path}: {case}"))
    };
    assert_eq!(entry("docs/deploy.md")["summary"], "Deploy with [REDACTED]");
    assert_eq!(entry("docs/logo.png")["metadata"]["binary"], true);
    assert!(
        entry("docs/logo.png")["summary"]
            .as_str()
            .unwrap()
            .starts_with("binary file")
    );
    let huge = entry("docs/huge.bin");
    assert_eq!(huge["metadata"]["size"], 1u64 << 30);
    assert_eq!(huge["metadata"]["sha256"], Value::Null);
    assert_eq!(
        entry("docs/AGENTS.md")["metadata"]["protected"],
        "agent-config"
    );
    assert_eq!(entry("docs/AGENTS.md")["metadata"]["sha256"], Value::Null);
    let listed: Vec<&str> = case["docs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        vec![
            "docs/AGENTS.md",
            "docs/deploy.md",
            "docs/huge.bin",
            "docs/logo.png",
            "docs/ok.md"
        ]
    );
    let omissions = case["context_budget"]["context_omissions"]
        .as_array()
        .unwrap();
    let count = |reason: &str| {
        omissions
            .iter()
            .find(|o| o["reason"].as_str().unwrap().starts_with(reason))
            .map(|o| o["count"].as_u64().unwrap())
    };
    assert_eq!(count("symbolic links"), Some(4), "{omissions:?}");
    assert_eq!(count("names that are not valid"), Some(2), "{omissions:?}");
    // The repository's `.git` and `docs/.craik`.
    assert_eq!(count("`.git` and `.craik`"), Some(2), "{omissions:?}");
    assert_eq!(count("protected paths"), Some(1), "{omissions:?}");
    assert_eq!(count("larger than 256 MiB"), Some(1), "{omissions:?}");
}

/// 100 000 files: within the budget, every cut listed, under 200 MB of memory.
#[test]
fn issue_21_a_repository_of_100_000_files_stays_within_budget_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    repo(&root);
    for d in 0..100 {
        let sub = root.join(format!("docs/d{d:02}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("f{f:03}.md")), format!("# {d} {f}\n")).unwrap();
        }
    }
    let profile = serde_json::json!({
        "schema": "craik.project_profile", "id": "project_h", "name": "h",
        "repo": {"type": "git", "local_path": "repo"},
        "docs": {"paths": ["docs/"]}, "memory": {"backend": "local"}
    });
    std::fs::write(dir.path().join("project_profile.json"), profile.to_string()).unwrap();
    std::fs::write(
        dir.path().join("task_request.json"),
        serde_json::json!({
            "id": "task_h", "title": "t", "objective": "o", "project_id": "project_h",
            "requested_by": "user:h", "mode": "review", "created_at": "2026-11-26T00:00:00Z"
        })
        .to_string(),
    )
    .unwrap();
    let out = std::process::Command::new("/usr/bin/time")
        .current_dir(dir.path())
        .env("CRAIK_CONFIG", "none")
        .args(["-f", "maxrss %M"])
        .arg(assert_cmd::cargo::cargo_bin("craik"))
        .args([
            "case",
            "build",
            ".",
            "--format",
            "json",
            "--max-tokens",
            "8000",
            "--home",
            "nohome",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kb: u64 = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("maxrss "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(kb < 200 * 1024, "max RSS {kb} KiB");
    let case = json(&out);
    let budget = &case["context_budget"];
    assert!(
        budget["estimated_tokens"].as_u64().unwrap() <= 8000,
        "{budget}"
    );
    assert_eq!(budget["within_budget"], true);
    let kept = case["docs"].as_array().unwrap().len() as u64;
    let cut = budget["context_omissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| {
            o["section"] == "docs" && o["reason"].as_str().unwrap().starts_with("token budget")
        })
        .map(|o| o["count"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("{budget}"));
    assert_eq!(kept + cut, 100_000, "{budget}");
    assert!(kept > 0);
}

/// Two runs of the project whose approved facts disagree: both facts, with their trust class,
/// one open contradiction, both handoffs; a fact whose file was edited after its review is
/// left out and counted.
#[test]
fn issue_21_handoffs_approved_facts_and_contradictions_come_from_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let example = repo_root().join("examples/docs-review");
    let (exit, _, text) = crate::runs::run_example(&home, &example, &[]);
    assert_eq!(exit, 0, "{text}");
    // The same task, its runner observing another value for the same fact.
    let other = dir.path().join("docs-review-2");
    crate::policy::copy_dir(&example, &other);
    let scenario = other.join("scenario.json");
    let edited = std::fs::read_to_string(&scenario).unwrap().replace(
        "parse() returns the input length in bytes",
        "parse() returns the input length in characters",
    );
    std::fs::write(&scenario, edited).unwrap();
    let (exit, _, text) = crate::runs::run_example(&home, &other, &[]);
    assert_eq!(exit, 0, "{text}");
    let list = crate::runs::json_out(&home, &["memory", "list"]);
    let ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{list}");
    for id in &ids {
        let out = craik()
            .args([
                "memory",
                "approve",
                id,
                "--by",
                "user:alice",
                "--reason",
                "checked",
                "--home",
            ])
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    }
    let build = || {
        let out = in_dir(
            &repo_root(),
            &[
                "case",
                "build",
                "examples/docs-review",
                "--format",
                "json",
                "--home",
                home.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        json(&out)
    };
    let case = build();
    let facts = case["facts"].as_array().unwrap();
    assert_eq!(facts.len(), 2, "{case}");
    assert!(facts.iter().all(|f| f["trust_class"] == "observed"));
    let contradictions = case["contradictions"].as_array().unwrap();
    assert_eq!(contradictions.len(), 1, "{case}");
    assert_eq!(contradictions[0]["status"], "open");
    let mut named: Vec<String> = contradictions[0]["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    named.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(named, expected);
    let handoffs = case["recent_handoffs"].as_array().unwrap();
    assert_eq!(handoffs.len(), 2, "{case}");
    assert!(
        handoffs
            .iter()
            .all(|h| h.as_str().unwrap().contains("completed"))
    );
    // An approved fact edited after its review is not taken.
    let path = home.join("memory").join(format!("{}.json", ids[0]));
    let mut forged: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    forged["fact"]["value"] = Value::from("forged after review");
    std::fs::write(&path, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    let case = build();
    assert_eq!(case["facts"].as_array().unwrap().len(), 1, "{case}");
    assert!(case["contradictions"].as_array().unwrap().is_empty());
    assert!(!case.to_string().contains("forged after review"));
    let omissions = case["context_budget"]["context_omissions"]
        .as_array()
        .unwrap();
    assert!(
        omissions.iter().any(|o| o["section"] == "facts"
            && o["count"] == 1
            && o["reason"].as_str().unwrap().contains("signed review")),
        "{omissions:?}"
    );
}

/// `craik project add`, `craik case build` and `craik prompt compile` on a fresh clone of
/// `examples/docs-review`: each prints the same bytes twice; `project add` registers the
/// project in the home once per repository.
#[test]
fn issue_21_project_add_case_build_and_prompt_compile_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    repo(&clone);
    crate::policy::copy_dir(
        &repo_root().join("examples/docs-review"),
        &clone.join("examples/docs-review"),
    );
    commit_all(&clone);
    let home = dir.path().join("home");
    let home = home.to_str().unwrap();
    for args in [
        &["project", "add", "examples/docs-review", "--home", home][..],
        &["case", "build", "examples/docs-review", "--home", home],
        &["prompt", "compile", "examples/docs-review", "--home", home],
        &[
            "--format",
            "json",
            "project",
            "add",
            "examples/docs-review",
            "--home",
            home,
        ],
    ] {
        let first = in_dir(&clone, args);
        assert_eq!(
            first.status.code(),
            Some(0),
            "{args:?}: {}",
            transcript(&first)
        );
        let second = in_dir(&clone, args);
        assert!(
            first.stdout == second.stdout,
            "{args:?}: two outputs differ"
        );
    }
    let index: Value =
        serde_json::from_slice(&std::fs::read(Path::new(home).join("projects.json")).unwrap())
            .unwrap();
    let entry = &index["project_example"];
    assert!(
        entry["root"]
            .as_str()
            .unwrap()
            .ends_with("examples/docs-review/workspace"),
        "{index}"
    );
    assert!(entry["sha256"].as_str().unwrap().starts_with("sha256:"));
    let list = in_dir(&clone, &["project", "list", "--home", home]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.starts_with("project_example ") && text.contains("(unchanged)"),
        "{text}"
    );
    // The same id from another repository is refused, naming both.
    let other = dir.path().join("other");
    repo(&other);
    crate::policy::copy_dir(
        &repo_root().join("examples/docs-review"),
        &other.join("examples/docs-review"),
    );
    commit_all(&other);
    let out = in_dir(
        &other,
        &["project", "add", "examples/docs-review", "--home", home],
    );
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("project `project_example` is registered for")
            && err.contains("one id names one repository"),
        "{err}"
    );
    // An edited profile shows as changed.
    let profile = clone.join("examples/docs-review/project_profile.json");
    let text = std::fs::read_to_string(&profile)
        .unwrap()
        .replace("\"name\": \"example\"", "\"name\": \"renamed\"");
    std::fs::write(&profile, text).unwrap();
    let list = in_dir(&clone, &["project", "list", "--home", home]);
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("(CHANGED since added)"),
        "{}",
        transcript(&list)
    );
}

/// `craik bench case` (small): the ratio, RSS and the prompt compile time are printed; piped,
/// no progress line reaches stderr.
#[test]
fn issue_21_bench_case_reports_the_prompt_compile_and_stays_quiet_when_piped() {
    let out = craik()
        .args([
            "--format",
            "json",
            "bench",
            "case",
            "--files",
            "40",
            "--megabytes",
            "1",
            "--runs",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(out.stderr.is_empty(), "{}", transcript(&out));
    let v = json(&out);
    assert!(v["prompt_compile_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["prompt_bytes"].as_u64().unwrap() > 1000, "{v}");
    assert!(v["ratio"].as_f64().unwrap() > 0.0, "{v}");
}

/// Issue 30 item 6: the case walk leaves out what git ignores — asked of git, so its own rules
/// hold (per-directory files, negation, anchoring, `.git/info/exclude`) — and says how many;
/// a tracked file that matches an ignore pattern is still the project's.
#[test]
fn issue_30_the_case_walk_honours_what_git_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    repo(&root);
    let docs = root.join("docs");
    std::fs::create_dir_all(docs.join("build/deep")).unwrap();
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(root.join(".gitignore"), "*.log\n!keep.log\n/docs/build/\n").unwrap();
    std::fs::write(docs.join("sub/.gitignore"), "private-*.md\n").unwrap();
    std::fs::write(root.join(".git/info/exclude"), "docs/local.md\n").unwrap();
    std::fs::write(docs.join("ok.md"), "# OK-MARKER\n").unwrap();
    std::fs::write(docs.join("tracked.log"), "# TRACKED-LOG-MARKER\n").unwrap();
    git(&root, &["add", "-f", "docs/tracked.log"]);
    std::fs::write(docs.join("debug.log"), "# DEBUG-LOG-MARKER\n").unwrap();
    std::fs::write(docs.join("keep.log"), "# KEEP-LOG-MARKER\n").unwrap();
    std::fs::write(docs.join("build/deep/out.md"), "# BUILD-MARKER\n").unwrap();
    std::fs::write(docs.join("sub/private-notes.md"), "# PRIVATE-MARKER\n").unwrap();
    std::fs::write(docs.join("sub/public.md"), "# PUBLIC-MARKER\n").unwrap();
    std::fs::write(docs.join("local.md"), "# LOCAL-MARKER\n").unwrap();
    let out = build_docs_case(dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    for present in [
        "OK-MARKER",
        "TRACKED-LOG-MARKER",
        "KEEP-LOG-MARKER",
        "PUBLIC-MARKER",
    ] {
        assert!(text.contains(present), "`{present}` missing: {text}");
    }
    for absent in [
        "DEBUG-LOG-MARKER",
        "BUILD-MARKER",
        "PRIVATE-MARKER",
        "LOCAL-MARKER",
        "debug.log",
        "docs/build",
    ] {
        assert!(
            !text.contains(absent),
            "`{absent}` listed though git ignores it: {text}"
        );
    }
    assert!(text.contains("files and directories git ignores"), "{text}");
}
