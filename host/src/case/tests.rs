//! Case-file laws: the same inputs give the same bytes, whatever the order a filesystem
//! lists directories in and whatever the modification times no rule reads.

use std::path::Path;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;

const FILES: &[(&str, &str)] = &[
    ("README.md", "# Readme\n\nSee `docs/a.md`.\n"),
    (
        "docs/a.md",
        "# A\n\nThe code is in `src/named.rs`; `src/gone.rs` was removed.\n",
    ),
    ("docs/b.md", "# B\n\nNothing named here.\n"),
    ("docs/adr/0001.md", "# ADR 1\n"),
    ("src/named.rs", "// named\n"),
    ("src/x1.rs", "// 1\n"),
    ("src/x2.rs", "// 2\n"),
    ("src/deep/x3.rs", "// 3\n"),
    ("src/deep/x4.rs", "// 4\n"),
    ("tests/x5.rs", "// 5\n"),
];

/// Files whose modification time a rule reads: `docs/a.md` names `src/named.rs`, and
/// `README.md` names `docs/a.md`.
const READ_MTIME: &[&str] = &["README.md", "docs/a.md", "src/named.rs"];

fn task() -> TaskRequest {
    serde_json::from_value(serde_json::json!({
        "id": "task_p", "title": "t", "objective": "o", "project_id": "project_p",
        "requested_by": "user:p", "mode": "review", "created_at": "2026-11-26T00:00:00Z"
    }))
    .unwrap()
}

fn set_mtime(path: &Path, secs: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// Creates the files at `root` in `order`, read-by-a-rule mtimes fixed, the others `other`.
fn populate(root: &Path, order: &[usize], other: &[u64]) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).unwrap();
    for (k, &i) in order.iter().enumerate() {
        let (rel, text) = FILES[i];
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let fixed = READ_MTIME.iter().position(|r| *r == rel);
        set_mtime(
            &path,
            match fixed {
                Some(p) => 1_700_000_000 + p as u64 * 1000,
                None => other[k % other.len()],
            },
        );
    }
}

fn build_at(root: &Path) -> Vec<u8> {
    let profile = Profile::implicit(root, "project_p", &["docs/adr/**".to_owned()]);
    let task = task();
    build(&Request {
        profile: &profile,
        task: &task,
        intent: None,
        envelope: None,
        home: None,
        keys: None,
        max_tokens: DEFAULT_MAX_TOKENS,
        strict: false,
    })
    .unwrap()
    .bytes
}

#[test]
fn issue_21_permuted_directory_order_and_unread_mtimes_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let natural: Vec<usize> = (0..FILES.len()).collect();
    populate(&root, &natural, &[1_600_000_000]);
    let baseline = build_at(&root);
    let text = String::from_utf8(baseline.clone()).unwrap();
    // The rules did run on this tree: what is compared is not an empty case file.
    assert!(
        text.contains("missing-path: docs/a.md names `src/gone.rs`"),
        "{text}"
    );
    assert!(text.contains("\"docs/adr/0001.md\""), "{text}");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(
                Just(natural.clone()).prop_shuffle(),
                proptest::collection::vec(0u64..4_000_000_000, 1..8),
            ),
            |(order, mtimes)| {
                populate(&root, &order, &mtimes);
                prop_assert_eq!(String::from_utf8(build_at(&root)).unwrap(), text.clone());
                Ok(())
            },
        )
        .unwrap();
    // A time a rule does read does change the case file (the law is not vacuous).
    set_mtime(&root.join("src/named.rs"), 1_000);
    set_mtime(&root.join("docs/a.md"), 2_000);
    assert_ne!(build_at(&root), baseline);
}

#[test]
fn issue_21_the_budget_cuts_lowest_priority_first_and_lists_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    for i in 0..200 {
        std::fs::write(
            root.join(format!("docs/d{i:03}.md")),
            format!("# Doc {i}\n\nSee `src/missing{i}.rs`.\n"),
        )
        .unwrap();
    }
    let profile = Profile::implicit(&root, "project_p", &[]);
    let task = task();
    let built = build(&Request {
        profile: &profile,
        task: &task,
        intent: None,
        envelope: None,
        home: None,
        keys: None,
        max_tokens: 3_000,
        strict: false,
    })
    .unwrap();
    let case = &built.case;
    let budget = &case.context_budget.0;
    let estimated = budget["estimated_tokens"].as_u64().unwrap();
    assert!(estimated <= 3_000, "{budget:?}");
    assert_eq!(budget["within_budget"], serde_json::json!(true));
    // The compact form is what the estimate measures (the estimate's own digits aside).
    let actual = tokens_of(serde_json::to_vec(case).unwrap().len());
    assert!(
        actual <= estimated && estimated - actual <= 1,
        "{actual} {budget:?}"
    );
    // Docs (lower priority) are all cut before stale risks (higher) are.
    let omissions = budget["context_omissions"].as_array().unwrap();
    let cut = |section: &str| {
        omissions
            .iter()
            .find(|o| {
                o["section"] == section && o["reason"].as_str().unwrap().starts_with("token budget")
            })
            .map(|o| o["count"].as_u64().unwrap())
    };
    assert_eq!(cut("docs"), Some(200), "{omissions:?}");
    assert!(case.docs.is_empty() && case.evidence.is_empty());
    let risks_cut = cut("stale_risks").unwrap_or(0);
    assert_eq!(
        case.stale_risks.len() as u64 + risks_cut,
        201,
        "{omissions:?}"
    );
    assert!(!case.stale_risks.is_empty());
    // Kept risks are the first ones, in order.
    assert!(
        case.stale_risks[0].starts_with("missing-path: docs/d000.md"),
        "{:?}",
        case.stale_risks
    );
}
