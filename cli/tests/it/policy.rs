//! `craik policy validate|fmt|explain|test|diff` and `craik grants show`, run as the real
//! binary on the committed bundle and on broken copies of it in temp directories.

use std::fs;
use std::path::Path;

use pretty_assertions::assert_eq;

use crate::{repo_root, run_in, transcript};

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            fs::copy(&path, &dest).unwrap();
        }
    }
}

fn policies_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo_root().join("policies"), &dir.path().join("policies"));
    dir
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn validate_embedded_and_directory_hash_the_same() {
    let embedded = run_in(&repo_root(), &["--format", "json", "policy", "validate"]);
    let dir = run_in(
        &repo_root(),
        &[
            "--format",
            "json",
            "policy",
            "validate",
            "--policies",
            "policies",
        ],
    );
    assert_eq!(embedded.status.code(), Some(0), "{}", transcript(&embedded));
    let a: serde_json::Value = serde_json::from_slice(&embedded.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&dir.stdout).unwrap();
    assert_eq!(a["policy_set"], b["policy_set"]);
    assert_eq!(a["policies"], 26);
}

#[test]
fn broken_bundles_give_one_line_per_problem_with_file_and_line() {
    let dir = policies_copy();
    let root = dir.path();
    fs::write(
        root.join("policies/base/broken.cedar"),
        "@id(\"broken.syntax\")\npermit (principal, action, resource) when { context.profile == };\n",
    )
    .unwrap();
    fs::write(
        root.join("policies/profiles/typo.cedar"),
        "@id(\"typo.attribute\")\n@reason(\"x\")\npermit (principal, action, resource)\nwhen { context.profil == \"strict\" };\n\npermit (principal, action, resource);\n",
    )
    .unwrap();
    let output = run_in(root, &["policy", "validate", "--policies", "policies"]);
    assert_eq!(output.status.code(), Some(3), "{}", transcript(&output));
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    // Each problem names the file as the operator can open it (issue 19 item 5).
    assert!(
        lines[0].starts_with("policies/base/broken.cedar:2:"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("policies/profiles/typo.cedar:4:"),
        "{err}"
    );
    assert!(lines[1].contains("profil"), "{err}");
    assert!(
        lines[2].starts_with("policies/profiles/typo.cedar:6:1: policy has no @id"),
        "{err}"
    );
    assert_eq!(
        lines[3],
        "craik: policy bundle policies refused: 3 problems"
    );
}

#[test]
fn custom_policies_load_on_top_and_cannot_replace_base_ids() {
    let dir = policies_copy();
    let custom = dir.path().join("custom");
    fs::create_dir_all(&custom).unwrap();
    fs::write(custom.join("mine.cedar"), "@id(\"base.deny.force-push\")\n@reason(\"override\")\npermit (principal, action, resource);\n").unwrap();
    let output = run_in(dir.path(), &["policy", "validate", "--custom", "custom"]);
    assert_eq!(output.status.code(), Some(3), "{}", transcript(&output));
    assert!(stderr(&output).contains("custom/mine.cedar:1:1: duplicate @id `base.deny.force-push`, first defined at base/immutable.cedar:"), "{}", stderr(&output));
}

#[test]
fn grants_show_prints_reviewable_cedar_and_refuses_unsafe_globs() {
    let output = run_in(
        &repo_root(),
        &[
            "grants",
            "show",
            "examples/docs-review/capability_grant.json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    insta::assert_snapshot!("grants_show", stdout(&output));

    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(repo_root().join("examples/docs-review/capability_grant.json"))
        .unwrap()
        .replace("\"docs/**\"", "\"docs/*/index.md\"");
    fs::write(dir.path().join("grant.json"), text).unwrap();
    let output = run_in(dir.path(), &["grants", "show", "grant.json"]);
    assert_eq!(output.status.code(), Some(3), "{}", transcript(&output));
    assert_eq!(
        stderr(&output),
        "craik: grant.json: grant `grant_docs_write`: $.target.paths[0]: pattern `docs/*/index.md` refused: wildcards are supported only in the last segment, or as `dir/**/name`\n"
    );
}

#[test]
fn explain_shows_verdict_policies_and_grants() {
    let dir = tempfile::tempdir().unwrap();
    let request = serde_json::json!({
        "runner": {"id": "runner_fixture"}, "task_id": "task_docs_review", "capability": "repo.write.docs",
        "target": "docs/adr/0001.md", "operation": "write", "profile": "strict"
    });
    fs::write(dir.path().join("req.json"), request.to_string()).unwrap();
    let grant = repo_root().join("examples/docs-review/capability_grant.json");
    let grant = grant.to_str().unwrap();
    let args = [
        "policy",
        "explain",
        "req.json",
        "--grants",
        grant,
        "--now",
        "2026-11-20T10:00:00Z",
        "--workspace-root",
        "/w",
    ];
    let output = run_in(dir.path(), &args);
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    insta::assert_snapshot!("explain_not_permitted", stdout(&output));

    let unknown = request
        .to_string()
        .replace("repo.write.docs", "repo.write.everything");
    fs::write(dir.path().join("req.json"), unknown).unwrap();
    let output = run_in(dir.path(), &args);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).starts_with("verdict: deny (invalid_request)\n  kernel.invalid-request: unknown capability `repo.write.everything`\n"), "{}", stdout(&output));

    fs::write(
        dir.path().join("req.json"),
        "{\"runner\": {\"id\": \"runner_x\"}, \"capability\": 3}",
    )
    .unwrap();
    let output = run_in(dir.path(), &args);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).starts_with("craik: req.json: $.capability: invalid type: integer `3`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn policy_test_is_green_with_full_coverage_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("report.xml");
    let output = run_in(
        &repo_root(),
        &[
            "policy",
            "test",
            "policy-tests",
            "--min-coverage",
            "100",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let out = stdout(&output);
    assert!(
        out.contains(" cases: ") && out.contains(" passed, 0 failed"),
        "{out}"
    );
    assert!(out.contains("(100.0%)"), "{out}");
    let xml = fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"craik policy test\" tests=\""));
    assert!(xml.contains("failures=\"0\""));
    assert!(
        xml.contains("<testsuite name=\"cedar:"),
        "Cedar run-tests format ran"
    );
    let cases: usize = out.split(" cases:").next().unwrap().trim().parse().unwrap();
    assert!(cases >= 150, "{cases}");
}

#[test]
fn policy_test_reports_failures_and_invalid_files() {
    let dir = tempfile::tempdir().unwrap();
    let suite = serde_json::json!({
        "suite": "wrong on purpose",
        "cases": [{
            "name": "strict read expected to be denied",
            "request": {"runner": {"id": "runner_fixture"}, "task_id": "task_x", "capability": "repo.read", "target": "README.md", "operation": "read", "profile": "strict"},
            "expect": {"decision": "deny", "deny_kind": "forbidden_by"}
        }]
    });
    fs::write(dir.path().join("suite.json"), suite.to_string()).unwrap();
    let output = run_in(dir.path(), &["policy", "test", "suite.json"]);
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    let out = stdout(&output);
    let head: Vec<&str> = out.lines().take(4).collect();
    insta::assert_snapshot!("policy_test_failure", head.join("\n"));
    assert!(out.contains("1 cases: 0 passed, 1 failed ("), "{out}");

    let output = run_in(
        dir.path(),
        &["policy", "test", "suite.json", "--run", "nothing-matches"],
    );
    assert_eq!(output.status.code(), Some(2));

    fs::write(
        dir.path().join("suite.json"),
        "{\"suite\": \"x\", \"cases\": [], \"extra\": 1}",
    )
    .unwrap();
    let output = run_in(dir.path(), &["policy", "test", "suite.json"]);
    assert_eq!(output.status.code(), Some(2), "{}", transcript(&output));
    assert!(
        stderr(&output).contains("suite.json: unknown field `extra`"),
        "{}",
        stderr(&output)
    );

    let output = run_in(
        dir.path(),
        &[
            "--format",
            "junit",
            "policy",
            "test",
            &repo_root()
                .join("policy-tests/cedar-run-tests.json")
                .display()
                .to_string(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    assert!(stdout(&output).contains("tests=\"5\" failures=\"0\""));
}

#[test]
fn diff_lists_every_case_a_policy_change_flips() {
    let dir = policies_copy();
    let root = dir.path();
    copy_dir(&root.join("policies"), &root.join("new"));
    let unchanged = run_in(
        root,
        &[
            "policy",
            "diff",
            "policies",
            "new",
            "--cases",
            &repo_root().join("policy-tests").display().to_string(),
        ],
    );
    assert_eq!(
        unchanged.status.code(),
        Some(0),
        "{}",
        transcript(&unchanged)
    );
    assert!(
        stdout(&unchanged)
            .lines()
            .last()
            .unwrap()
            .starts_with("0 of "),
        "{}",
        stdout(&unchanged)
    );

    let strict = root.join("new/profiles/strict.cedar");
    let text = fs::read_to_string(&strict).unwrap();
    let start = text.find("@id(\"strict.deny.network\")").unwrap();
    fs::write(&strict, &text[..start]).unwrap();
    let changed = run_in(
        root,
        &[
            "--format",
            "json",
            "policy",
            "diff",
            "policies",
            "new",
            "--cases",
            &repo_root().join("policy-tests").display().to_string(),
        ],
    );
    assert_eq!(changed.status.code(), Some(1), "{}", transcript(&changed));
    let report: serde_json::Value = serde_json::from_slice(&changed.stdout).unwrap();
    let changes = report["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    assert_eq!(report["changed"], changes.len());
    for c in changes {
        assert_eq!(
            c["old"]["determining"],
            serde_json::json!(["strict.deny.network"]),
            "{c}"
        );
        assert_ne!(c["new"]["determining"], c["old"]["determining"]);
    }

    // Issue 13 item 5: a reader that goes away (`| head -1`, here: before the first byte)
    // neither turns the change into exit 0 nor into an internal error.
    for format in ["human", "json"] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
            .current_dir(root)
            .args([
                "--format", format, "policy", "diff", "policies", "new", "--cases",
            ])
            .arg(repo_root().join("policy-tests"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}: {}", transcript(&out));
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("internal error"),
            "{format}: {}",
            transcript(&out)
        );
    }
}

#[test]
fn fmt_check_passes_on_the_bundle_and_changes_nothing_on_failure() {
    let output = run_in(&repo_root(), &["policy", "fmt", "--check", "policies"]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    // Issue 13 item 6: the width is exposed; at `cedar format`'s 80 some files would change.
    let narrow = run_in(
        &repo_root(),
        &["policy", "fmt", "--check", "--line-width", "80", "policies"],
    );
    assert_eq!(narrow.status.code(), Some(1), "{}", transcript(&narrow));
    let dir = tempfile::tempdir().unwrap();
    let ugly = "@id(\"a.b\")   permit(principal,action,resource);\n";
    fs::write(dir.path().join("ugly.cedar"), ugly).unwrap();
    let output = run_in(dir.path(), &["policy", "fmt", "--check", "."]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        fs::read_to_string(dir.path().join("ugly.cedar")).unwrap(),
        ugly
    );
    let output = run_in(dir.path(), &["policy", "fmt", "."]);
    assert_eq!(output.status.code(), Some(0));
    assert_ne!(
        fs::read_to_string(dir.path().join("ugly.cedar")).unwrap(),
        ugly
    );
}

/// Issue 13 item 2: the policy-set hash of a bundle with `--custom DIR` depends on the files'
/// content and bundle-relative names, not on how DIR was typed.
#[test]
fn issue_13_custom_policies_hash_the_same_however_the_path_is_typed() {
    let dir = tempfile::tempdir().unwrap();
    let custom = dir.path().join("custom-sec");
    fs::create_dir_all(&custom).unwrap();
    fs::write(
        custom.join("x.cedar"),
        "@id(\"custom.x\")\n@reason(\"x\")\nforbid (principal, action, resource)\nwhen { context.iteration > 100 };\n",
    )
    .unwrap();
    let hash = |cwd: &Path, spelled: &str| {
        let out = run_in(
            cwd,
            &[
                "--format", "json", "policy", "validate", "--custom", spelled,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["policy_set"].as_str().unwrap().to_owned()
    };
    let a = hash(dir.path(), "custom-sec");
    assert_eq!(hash(dir.path(), "./custom-sec/"), a);
    assert_eq!(hash(&repo_root(), custom.to_str().unwrap()), a);
    assert_ne!(a, hash(&repo_root(), "policy-tests/custom-erroring"));
}

/// Issue 13 item 6: a case naming a capability the schema does not declare fails (a typo would
/// otherwise pass as a deny), unless it tests exactly that refusal.
#[test]
fn issue_13_an_unknown_capability_is_a_test_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("typo.json"),
        r#"{"suite":"typo","defaults":{"runner":{"id":"runner_fixture"},"task_id":"task_docs","profile":"strict","operation":"write"},
 "cases":[{"name":"a typo","request":{"capability":"repo.writ.docs","target":"docs/a.md"},"expect":{"decision":"deny"}},
          {"name":"the refusal itself","request":{"capability":"repo.writ.docs","target":"docs/a.md"},"expect":{"decision":"deny","deny_kind":"invalid_request"}}]}"#,
    )
    .unwrap();
    let out = run_in(dir.path(), &["policy", "test", "."]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAIL typo :: a typo"), "{text}");
    assert!(
        text.contains("unknown capability `repo.writ.docs`"),
        "{text}"
    );
    assert!(!text.contains("FAIL typo :: the refusal itself"), "{text}");
}

/// Issue 13 item 6: `policy test -v` lists every case, passing ones included.
#[test]
fn issue_13_policy_test_verbose_lists_every_case() {
    let out = run_in(&repo_root(), &["policy", "test", "-v", "policy-tests"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let listed = text.lines().filter(|l| l.starts_with("ok   ")).count();
    let total: usize = text
        .lines()
        .find_map(|l| l.split_once(" cases: ").map(|(n, _)| n.parse().unwrap()))
        .unwrap();
    assert_eq!(listed, total, "{text}");
}

/// Issue 13 item 2: `policy diff --custom` loads operator policies on top of both bundles;
/// `--new-custom` on the new one only, so a custom policy change shows as flipped cases.
#[test]
fn issue_13_diff_loads_custom_policies() {
    let dir = policies_copy();
    let root = dir.path();
    let custom = root.join("custom-sec");
    fs::create_dir_all(&custom).unwrap();
    fs::write(
        custom.join("docs.cedar"),
        "@id(\"custom.forbid.docs\")\n@reason(\"custom: no docs writes\")\nforbid (\n  principal,\n  action == Craik::Action::\"repo.write.docs\",\n  resource\n);\n",
    )
    .unwrap();
    let cases = repo_root().join("policy-tests").display().to_string();
    let diff = |extra: &[&str]| {
        let mut args = vec!["--format", "json", "policy", "diff", "policies", "policies"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--cases", &cases]);
        run_in(root, &args)
    };
    let both = diff(&["--custom", "custom-sec"]);
    assert_eq!(both.status.code(), Some(0), "{}", transcript(&both));
    let only_new = diff(&["--new-custom", "custom-sec"]);
    assert_eq!(only_new.status.code(), Some(1), "{}", transcript(&only_new));
    let report: serde_json::Value = serde_json::from_slice(&only_new.stdout).unwrap();
    let changes = report["changes"].as_array().unwrap();
    assert!(!changes.is_empty());
    for c in changes {
        let new = c["new"]["determining"].as_array().unwrap();
        assert!(
            new.contains(&serde_json::json!("custom.forbid.docs")),
            "{c}"
        );
        assert!(
            !c["old"]["determining"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!("custom.forbid.docs"))
        );
    }
    let only_old = diff(&["--old-custom", "custom-sec"]);
    let back: serde_json::Value = serde_json::from_slice(&only_old.stdout).unwrap();
    assert_eq!(
        back["changes"].as_array().unwrap().len(),
        changes.len(),
        "the same cases flip the other way"
    );
}

/// Issue 13 item 6: `policy test` prints an evaluation error as Cedar words it, and counts
/// the policies of a suite's own `custom` directories in its coverage.
#[test]
fn issue_13_policy_test_shows_runtime_errors_and_covers_suite_custom_policies() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    copy_dir(
        &repo_root().join("policy-tests/custom-erroring"),
        &root.join("custom-erroring"),
    );
    let mut suite: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(repo_root().join("policy-tests/evaluation-errors.json")).unwrap(),
    )
    .unwrap();
    let cases = suite["cases"].as_array().unwrap().clone();
    let erroring = cases
        .iter()
        .find(|c| c["name"] == "erroring policy denies")
        .unwrap()
        .clone();
    // A case that expects the wrong thing: the failure shows Cedar's error text.
    let mut wrong = erroring.clone();
    wrong["expect"] = serde_json::json!({"decision": "allow"});
    suite["cases"] = serde_json::json!([wrong]);
    fs::write(root.join("wrong.json"), suite.to_string()).unwrap();
    let out = run_in(root, &["policy", "test", "wrong.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains(
            "error while evaluating policy `custom.overflow`: integer overflow while attempting to multiply"
        ),
        "{}",
        transcript(&out)
    );
    // Coverage: the suite's custom policy is one of the policies counted.
    let mut report = |cases: serde_json::Value| {
        suite["cases"] = cases;
        fs::write(root.join("suite.json"), suite.to_string()).unwrap();
        let out = run_in(root, &["--format", "json", "policy", "test", "suite.json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let quiet: Vec<serde_json::Value> = cases
        .iter()
        .filter(|c| c["name"] == "no error at iteration 1")
        .cloned()
        .collect();
    let missed = report(serde_json::json!(quiet));
    assert!(
        missed["uncovered"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("custom.overflow")),
        "{missed:#}"
    );
    let hit = report(serde_json::json!([erroring]));
    assert!(
        !hit["uncovered"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("custom.overflow")),
        "{hit:#}"
    );
}

fn json_of(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", transcript(output)))
}

/// A team's suite that loads its own custom directory (`custom-sec`), with one case that the
/// embedded default allows.
fn team_suite(root: &Path) {
    fs::create_dir_all(root.join("custom-sec")).unwrap();
    fs::write(
        root.join("suite.json"),
        r#"{"suite": "team", "custom": ["custom-sec"],
 "defaults": {"runner": {"id": "runner_fixture", "trust": "medium", "mode": "fixture"}, "task_id": "task_docs"},
 "cases": [{"name": "read the readme", "request": {"capability": "repo.read", "target": "README.md", "operation": "read", "profile": "trusted-local"}, "expect": {"decision": "allow"}}]}"#,
    )
    .unwrap();
    fs::write(
        root.join("custom-sec/a.cedar"),
        "@id(\"team.note\")\n@reason(\"team: an unrelated rule\")\nforbid (principal, action == Craik::Action::\"git.force_push\", resource);\n",
    )
    .unwrap();
}

const TEAM_FORBID_READS: &str = "@id(\"team.no-readme\")\n@reason(\"team: the readme is off limits\")\nforbid (principal, action == Craik::Action::\"repo.read\", resource)\nwhen { resource.path == \"README.md\" };\n";

/// Issue 19 item 5: `policy export DIR` writes the embedded bundle byte for byte (same
/// policy-set hash), and never overwrites an edited file unless told to.
#[test]
fn issue_19_policy_export_writes_the_embedded_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let out = run_in(root, &["--format", "json", "policy", "export", "bundle"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let exported = json_of(&out);
    let embedded = json_of(&run_in(root, &["--format", "json", "policy", "validate"]));
    assert_eq!(exported["policy_set"], embedded["policy_set"]);
    for name in exported["files"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        assert_eq!(
            fs::read(root.join("bundle").join(name)).unwrap(),
            fs::read(repo_root().join("policies").join(name)).unwrap(),
            "{name}"
        );
    }
    let loaded = json_of(&run_in(
        root,
        &[
            "--format",
            "json",
            "policy",
            "validate",
            "--policies",
            "bundle",
        ],
    ));
    assert_eq!(loaded["policy_set"], embedded["policy_set"]);
    // Exporting again over an identical copy is fine; over an edited file it is refused.
    let again = run_in(root, &["policy", "export", "bundle"]);
    assert_eq!(again.status.code(), Some(0), "{}", transcript(&again));
    let strict = root.join("bundle/profiles/strict.cedar");
    fs::write(&strict, "// mine\n").unwrap();
    let refused = run_in(root, &["policy", "export", "bundle"]);
    assert_eq!(refused.status.code(), Some(2), "{}", transcript(&refused));
    assert!(
        stderr(&refused).contains("bundle/profiles/strict.cedar: exists with other content"),
        "{}",
        transcript(&refused)
    );
    assert_eq!(fs::read_to_string(&strict).unwrap(), "// mine\n");
    let forced = run_in(root, &["policy", "export", "bundle", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", transcript(&forced));
    assert_ne!(fs::read_to_string(&strict).unwrap(), "// mine\n");
}

/// Issue 19 item 5: `policy diff` takes `embedded` as a side, and a suite's own custom
/// directory is never loaded on both sides silently: named by --old-custom/--new-custom it is
/// replaced per side, so a verdict-flipping change is never "0 changed".
#[test]
fn issue_19_diff_embedded_and_suite_custom_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    team_suite(root);
    // The old version of the team's directory, kept aside; the new one forbids the case.
    copy_dir(&root.join("custom-sec"), &root.join("old/custom-sec"));
    fs::write(root.join("custom-sec/b.cedar"), TEAM_FORBID_READS).unwrap();

    let diff = |extra: &[&str]| {
        let mut args = vec!["--format", "json", "policy", "diff", "embedded", "embedded"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--cases", "suite.json"]);
        run_in(root, &args)
    };
    let flipped = |out: &std::process::Output| {
        assert_eq!(out.status.code(), Some(1), "{}", transcript(out));
        let report = json_of(out);
        assert_eq!(report["changed"], 1, "{report}");
        assert_eq!(report["changes"][0]["old"]["decision"], "allow", "{report}");
        assert_eq!(report["changes"][0]["new"]["decision"], "deny", "{report}");
        assert_eq!(
            report["changes"][0]["new"]["determining"],
            serde_json::json!(["team.no-readme"])
        );
        assert_eq!(report["notes"], serde_json::json!([]), "{report}");
    };
    flipped(&diff(&[
        "--old-custom",
        "old/custom-sec",
        "--new-custom",
        "custom-sec",
    ]));
    // The same directory the suite names, on the new side only: the old side goes without it.
    flipped(&diff(&["--new-custom", "./custom-sec/"]));

    // Nothing named per side: both sides load the suite's directory, and the report says so.
    let same = diff(&[]);
    assert_eq!(same.status.code(), Some(0), "{}", transcript(&same));
    let report = json_of(&same);
    assert_eq!(report["changed"], 0);
    assert_eq!(report["old"]["origin"], "embedded default");
    let notes = report["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 2, "{report}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("custom-sec` is loaded on both sides"),
        "{report}"
    );
    // And `embedded embedded` compares a bundle with itself: said, not silently "0 changed".
    assert!(
        notes[1]
            .as_str()
            .unwrap()
            .starts_with("both sides are the same policy set (sha256:"),
        "{report}"
    );
    let human = run_in(
        root,
        &[
            "policy",
            "diff",
            "embedded",
            "embedded",
            "--cases",
            "suite.json",
        ],
    );
    assert!(
        stdout(&human)
            .contains("note: suite custom directory `custom-sec` is loaded on both sides"),
        "{}",
        transcript(&human)
    );

    // `embedded` against an exported copy with one policy removed.
    run_in(root, &["policy", "export", "bundle"]);
    let strict = root.join("bundle/profiles/strict.cedar");
    let text = fs::read_to_string(&strict).unwrap();
    let start = text.find("@id(\"strict.deny.network\")").unwrap();
    fs::write(&strict, &text[..start]).unwrap();
    let cases = repo_root().join("policy-tests").display().to_string();
    let out = run_in(
        root,
        &[
            "--format", "json", "policy", "diff", "embedded", "bundle", "--cases", &cases,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let report = json_of(&out);
    assert!(report["changed"].as_u64().unwrap() > 0);
    assert_eq!(report["new"]["origin"], "bundle");
}

/// Issue 19 item 5: a diagnostic names the file the operator passed (not
/// `custom/<basename>/...`), and a refused custom directory is not blamed on the embedded
/// default.
#[test]
fn issue_19_diagnostics_name_the_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("work")).unwrap();
    fs::create_dir_all(root.join("org-policies/sub")).unwrap();
    fs::write(
        root.join("org-policies/sub/bad.cedar"),
        "@id(\"org.bad\")\n@reason(\"x\")\nforbid (principal, action, resource)\nwhen { context.nope };\n",
    )
    .unwrap();
    let out = run_in(
        &root.join("work"),
        &["policy", "validate", "--custom", "../org-policies"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    let err = stderr(&out);
    let first = err.lines().next().unwrap();
    assert!(
        first.starts_with("../org-policies/sub/bad.cedar:4:"),
        "{err}"
    );
    let named = first.split(':').next().unwrap();
    assert!(
        root.join("work").join(named).is_file(),
        "{named} does not exist"
    );
    assert!(
        err.contains(
            "craik: policy bundle embedded default + custom ../org-policies refused: 1 problem"
        ),
        "{err}"
    );
}

/// Issue 19 item 5: the policy-set hash is content-addressed per file: the same files give
/// the same hash whatever their directories are called, and it is the documented
/// `craik.policy_set/2` digest.
#[test]
fn issue_19_policy_set_hash_is_content_addressed() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let rule = "@id(\"org.x\")\n@reason(\"x\")\nforbid (principal, action, resource)\nwhen { context.iteration > 100 };\n";
    for d in ["org-a", "elsewhere/org-b/nested"] {
        fs::create_dir_all(root.join(d)).unwrap();
        fs::write(root.join(d).join(format!("{}.cedar", d.len())), rule).unwrap();
    }
    let hash = |custom: &str| {
        json_of(&run_in(
            root,
            &["--format", "json", "policy", "validate", "--custom", custom],
        ))["policy_set"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let a = hash("org-a");
    assert_eq!(a, hash("elsewhere/org-b"));
    // The documented definition, recomputed from the files.
    let hex = |b: &[u8]| {
        Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    let policies = repo_root().join("policies");
    let mut lines: Vec<String> = ["approvals", "base", "profiles"]
        .iter()
        .flat_map(|d| fs::read_dir(policies.join(d)).unwrap())
        .map(|e| format!("policy {}\n", hex(&fs::read(e.unwrap().path()).unwrap())))
        .chain([format!("policy {}\n", hex(rule.as_bytes()))])
        .collect();
    lines.sort();
    let text = format!(
        "craik.policy_set/2\nschema {}\n{}",
        hex(&fs::read(policies.join("schema.cedarschema")).unwrap()),
        lines.concat()
    );
    assert_eq!(a, format!("sha256:{}", hex(text.as_bytes())));
}

/// Issue 19 item 5: a custom policy needs an `@reason`, as a shipped one does.
#[test]
fn issue_19_custom_policies_need_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("org")).unwrap();
    fs::write(
        root.join("org/x.cedar"),
        "// org rules\n@id(\"org.quiet\")\nforbid (principal, action, resource)\nwhen { context.iteration > 100 };\n",
    )
    .unwrap();
    let out = run_in(root, &["policy", "validate", "--custom", "org"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        stderr(&out).starts_with("org/x.cedar:2:1: policy `org.quiet` has no @reason"),
        "{}",
        transcript(&out)
    );
}

/// Issue 19 item 5: `policy validate` lints an unconstrained `permit (principal, action,
/// resource);` as an error (exit 1, naming file and line); a scoped permit passes.
#[test]
fn issue_19_validate_lints_an_unconstrained_permit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("org")).unwrap();
    fs::write(
        root.join("org/open.cedar"),
        "@id(\"org.scoped\")\n@reason(\"reads\")\npermit (principal, action == Craik::Action::\"repo.read\", resource);\n\n@id(\"org.open\")\n@reason(\"everything\")\npermit (principal, action, resource);\n",
    )
    .unwrap();
    let out = run_in(root, &["policy", "validate", "--custom", "org"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("org/open.cedar:5:1: error[unconstrained-permit]: `org.open` permits every principal, action and resource with no condition"),
        "{text}"
    );
    let json = json_of(&run_in(
        root,
        &["--format", "json", "policy", "validate", "--custom", "org"],
    ));
    assert_eq!(json["lints"][0]["rule"], "unconstrained-permit");
    assert_eq!(json["lints"][0]["policy"], "org.open");
    assert_eq!(json["lints"].as_array().unwrap().len(), 1);
    // `when { true }` is no constraint either; a real condition is.
    fs::write(
        root.join("org/open.cedar"),
        "@id(\"org.open\")\n@reason(\"everything\")\npermit (principal, action, resource) when { true };\n",
    )
    .unwrap();
    let out = run_in(root, &["policy", "validate", "--custom", "org"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    fs::write(
        root.join("org/open.cedar"),
        "@id(\"org.open\")\n@reason(\"high trust\")\npermit (principal, action, resource) when { principal.trust == \"high\" };\n",
    )
    .unwrap();
    let out = run_in(root, &["policy", "validate", "--custom", "org"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
}

/// Issue 19 item 5: `policy fmt --check --diff` prints what `fmt` would change as a unified
/// diff, and changes nothing.
#[test]
fn issue_19_fmt_check_diff_shows_the_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("org")).unwrap();
    let ugly = "@id(\"org.x\")\n@reason(\"x\")\nforbid (principal, action, resource) when {   context.iteration > 100 };\n";
    fs::write(root.join("org/x.cedar"), ugly).unwrap();
    let out = run_in(root, &["policy", "fmt", "--check", "--diff", "org"]);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    insta::assert_snapshot!("fmt_check_diff", stdout(&out));
    assert_eq!(fs::read_to_string(root.join("org/x.cedar")).unwrap(), ugly);
    // --diff needs --check.
    let out = run_in(root, &["policy", "fmt", "--diff", "org"]);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
}

/// Issue 19 item 5: `policy test --coverage-of DIR` counts coverage over one's own policies
/// only, so `--min-coverage 100` holds a team to its own rules, not the shipped bundle's.
#[test]
fn issue_19_coverage_scoped_to_own_policies() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    team_suite(root);
    fs::write(root.join("custom-sec/b.cedar"), TEAM_FORBID_READS).unwrap();
    let suite = fs::read_to_string(root.join("suite.json"))
        .unwrap()
        .replace(
            "\"expect\": {\"decision\": \"allow\"}",
            "\"expect\": {\"decision\": \"deny\"}",
        );
    fs::write(root.join("suite.json"), suite).unwrap();
    let out = run_in(
        root,
        &[
            "policy",
            "test",
            "suite.json",
            "--coverage-of",
            "custom-sec",
            "--min-coverage",
            "50",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("coverage of custom-sec: 1/2 policies exercised (50.0%)\n  not exercised: team.note (custom-sec/a.cedar:1)\n"),
        "{}",
        transcript(&out)
    );
    let out = run_in(
        root,
        &[
            "--format",
            "json",
            "policy",
            "test",
            "suite.json",
            "--coverage-of",
            "custom-sec",
            "--min-coverage",
            "100",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert_eq!(json_of(&out)["uncovered"], serde_json::json!(["team.note"]));
    // The suite's directory also given with --custom (spelled otherwise) loads once.
    let out = run_in(
        root,
        &[
            "policy",
            "test",
            "suite.json",
            "--custom",
            "./custom-sec/",
            "--coverage-of",
            "custom-sec",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // Unscoped, the shipped bundle counts too.
    let out = run_in(root, &["policy", "test", "suite.json"]);
    assert!(
        stdout(&out).contains("coverage: 1/28 policies"),
        "{}",
        transcript(&out)
    );
    // A directory none of whose policies is loaded is a usage error, not 100 % of nothing.
    fs::create_dir_all(root.join("elsewhere")).unwrap();
    let out = run_in(
        root,
        &["policy", "test", "suite.json", "--coverage-of", "elsewhere"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
}

/// Issue 19 item 5: a command's normalised path arguments reach Cedar (`resource.paths`,
/// `resource.dirs`), so `ls scripts` no longer escapes a rule on `scripts/`, and `context.now`
/// is a Cedar datetime; the examples suite in policy-tests/ runs green with its own policies
/// fully covered.
#[test]
fn issue_19_command_paths_and_datetime_now_reach_cedar() {
    let tests = repo_root().join("policy-tests");
    let out = run_in(
        &tests,
        &[
            "--format",
            "json",
            "policy",
            "test",
            "examples-paths-time.json",
            "--coverage-of",
            "custom-examples",
            "--min-coverage",
            "100",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let report = json_of(&out);
    assert_eq!(report["failed"], 0);
    assert!(report["cases"].as_u64().unwrap() >= 13);
    let determining: Vec<String> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["actual"]["determining"].to_string())
        .collect();
    for id in ["team.scripts", "team.lockfile", "team.freeze"] {
        assert!(
            determining.iter().any(|d| d.contains(id)),
            "{id}: {determining:?}"
        );
    }
    // The old spelling, epoch seconds, is refused when the bundle loads, naming the place.
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("org")).unwrap();
    fs::write(
        dir.path().join("org/old.cedar"),
        "@id(\"org.old\")\n@reason(\"x\")\nforbid (principal, action, resource)\nwhen { context.now > 1795251600 };\n",
    )
    .unwrap();
    let out = run_in(dir.path(), &["policy", "validate", "--custom", "org"]);
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    assert!(
        stderr(&out).starts_with("org/old.cedar:4:"),
        "{}",
        transcript(&out)
    );
    assert!(
        stderr(&out).contains("(help: `context.now` is a Cedar datetime; compare it with `datetime(\"2026-12-01T00:00:00Z\")`, not with epoch seconds)"),
        "{}",
        transcript(&out)
    );
}

/// Issue 19 item 5: `policy validate` warns about an upper time bound that has passed (the
/// policy can never match again), judged against --now; a lower bound or a future one is fine.
#[test]
fn issue_19_validate_warns_about_past_time_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("org")).unwrap();
    fs::write(
        root.join("org/trial.cedar"),
        "@id(\"org.trial\")\n@reason(\"a trial\")\npermit (principal, action == Craik::Action::\"repo.read\", resource)\nwhen { principal.trust == \"high\" && context.now < datetime(\"2026-11-01\") };\n\n@id(\"org.until\")\n@reason(\"until\")\nforbid (principal, action == Craik::Action::\"git.push\", resource)\nunless { context.now >= datetime(\"2026-10-01T12:00:00Z\") };\n\n@id(\"org.since\")\n@reason(\"since\")\nforbid (principal, action == Craik::Action::\"git.commit\", resource)\nwhen { context.now >= datetime(\"2026-01-01\") };\n",
    )
    .unwrap();
    let validate = |now: &str| {
        run_in(
            root,
            &[
                "--format", "json", "policy", "validate", "--custom", "org", "--now", now,
            ],
        )
    };
    let before = validate("2026-09-01T00:00:00Z");
    assert_eq!(before.status.code(), Some(0), "{}", transcript(&before));
    assert_eq!(json_of(&before)["lints"], serde_json::json!([]));
    let after = validate("2026-11-02T00:00:00Z");
    assert_eq!(
        after.status.code(),
        Some(0),
        "warnings do not fail: {}",
        transcript(&after)
    );
    let lints = json_of(&after)["lints"].clone();
    let found: Vec<(&str, &str, &str)> = lints
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["rule"].as_str().unwrap(),
                l["severity"].as_str().unwrap(),
                l["policy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("expired-bound", "warning", "org.trial"),
            ("expired-bound", "warning", "org.until")
        ]
    );
    let human = run_in(
        root,
        &[
            "policy",
            "validate",
            "--custom",
            "org",
            "--now",
            "2026-11-02T00:00:00Z",
        ],
    );
    assert!(
        stdout(&human).starts_with("org/trial.cedar:1:1: warning[expired-bound]: `org.trial` holds only while `context.now` is before 2026-11-01, which has passed"),
        "{}",
        transcript(&human)
    );
}

/// Issue 19 item 5: explain gives a grant's reason (not its id) and shows the permit an
/// approval rule holds back, instead of hiding it behind the rule.
#[test]
fn issue_19_explain_shows_grant_reasons_and_the_held_permit() {
    let dir = tempfile::tempdir().unwrap();
    let grant = repo_root().join("examples/docs-review/capability_grant.json");
    let explain = |profile: &str, format: &str| {
        let request = serde_json::json!({
            "runner": {"id": "runner_fixture"}, "task_id": "task_docs_review",
            "capability": "repo.write.docs", "target": "docs/guide.md", "operation": "write",
            "profile": profile
        });
        fs::write(dir.path().join("req.json"), request.to_string()).unwrap();
        run_in(
            dir.path(),
            &[
                "--format",
                format,
                "policy",
                "explain",
                "req.json",
                "--grants",
                grant.to_str().unwrap(),
                "--now",
                "2026-11-20T10:00:00Z",
                "--workspace-root",
                "/w",
            ],
        )
    };
    let allowed = explain("trusted-local", "human");
    assert_eq!(allowed.status.code(), Some(0), "{}", transcript(&allowed));
    assert!(
        stdout(&allowed).contains("  grant.grant_docs_write: grant `grant_docs_write` approved by user:maintainer: Documentation reconciliation.\n"),
        "{}",
        transcript(&allowed)
    );
    let held = explain("strict", "human");
    assert_eq!(held.status.code(), Some(1), "{}", transcript(&held));
    assert!(
        stdout(&held).contains("  permitted by grant.grant_docs_write: grant `grant_docs_write` approved by user:maintainer: Documentation reconciliation., held for approval\n"),
        "{}",
        transcript(&held)
    );
    let json = json_of(&explain("strict", "json"));
    assert_eq!(json["decision"], "requires_approval");
    assert_eq!(
        json["determining"],
        serde_json::json!(["approval.strict.side-effects"])
    );
    assert_eq!(
        json["permitted_by"],
        serde_json::json!(["grant.grant_docs_write"])
    );
}

/// Issue 19 item 5: `policy explain --trace` lists each permit that could apply and, for each
/// that did not match, the scope or clause that did not hold.
#[test]
fn issue_19_explain_trace_says_why_each_permit_did_not_match() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("org")).unwrap();
    fs::write(
        root.join("org/reads.cedar"),
        "@id(\"org.high-trust-reads\")\n@reason(\"high trust reads\")\npermit (principal, action == Craik::Action::\"repo.read\", resource)\nwhen { context.profile == \"custom\" }\nwhen { principal.trust == \"high\" };\n\n@id(\"org.docs-reads\")\n@reason(\"docs reads\")\npermit (principal, action == Craik::Action::\"repo.read\", resource in Craik::Dir::\"docs\")\nwhen { context.profile == \"custom\" };\n\n@id(\"org.not-secrets\")\n@reason(\"reads but secrets\")\npermit (principal, action == Craik::Action::\"repo.read\", resource)\nwhen { context.profile == \"custom\" }\nunless { resource.name like \"*.key\" };\n\n@id(\"org.team-reads\")\n@reason(\"the team's own task\")\npermit (principal in Craik::Task::\"task_team\", action == Craik::Action::\"repo.read\", resource)\nwhen { context.profile == \"custom\" };\n",
    )
    .unwrap();
    fs::write(
        root.join("req.json"),
        serde_json::json!({
            "runner": {"id": "runner_fixture", "trust": "medium"}, "task_id": "task_x",
            "capability": "repo.read", "target": "src/server.key", "operation": "read",
            "profile": "custom"
        })
        .to_string(),
    )
    .unwrap();
    let args = [
        "policy",
        "explain",
        "req.json",
        "--custom",
        "org",
        "--now",
        "2026-11-20T10:00:00Z",
        "--workspace-root",
        "/w",
        "--trace",
    ];
    let out = run_in(root, &args);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    insta::assert_snapshot!("explain_trace", stdout(&out));
    // JSON: the verdict with a `trace` array.
    let mut json_args = vec!["--format", "json"];
    json_args.extend_from_slice(&args);
    let json = json_of(&run_in(root, &json_args));
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["trace"].as_array().unwrap().len(), 4);
    assert!(
        json["trace"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["matched"] == false)
    );
    // Without --trace: no trace.
    let plain = run_in(root, &args[..args.len() - 1]);
    assert!(!stdout(&plain).contains("trace:"), "{}", transcript(&plain));
}
