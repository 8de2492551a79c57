//! The held cases of issue 35: a single `when` clause (broader), a reordering (equivalent),
//! a forbid narrowed by a path glob (broader), the embedded bundle's never-errors and an
//! erroring custom policy, each classified and replayed through the kernel.

use craik_kernel::SourceFile;
use craik_prove::{Class, Direction, Level, Status};

use crate::Loaded;

fn with_file(mut l: Loaded, name: &str, text: &str) -> Loaded {
    l.files.push(SourceFile::new(name, text));
    l.bundle = craik_kernel::Bundle::load(&l.schema, &l.files).unwrap_or_else(|e| panic!("{e:?}"));
    l
}

/// A row of the report.
fn row<'a>(r: &'a craik_prove::DiffReport, action: &str, level: Level) -> &'a craik_prove::Row {
    r.rows
        .iter()
        .find(|row| row.action == action && row.level == level)
        .unwrap()
}

#[test]
fn issue_35_a_single_when_clause_is_broader_and_confirmed() {
    let Some(config) = crate::solver() else {
        return;
    };
    let old = Loaded::embedded();
    // One `when` clause more on the iteration ceiling: it no longer holds under trusted-local.
    let new = Loaded::new(&|name, text| {
        if name == "base/intent.cedar" {
            text.replace(
                "when { context.iteration >= context.max_iterations };",
                "when { context.iteration >= context.max_iterations }\nwhen { context.profile != \"trusted-local\" };",
            )
        } else {
            text
        }
    });
    let r = craik_prove::diff(old.side(), new.side(), &[], &config).unwrap();
    assert_eq!(r.moved, vec!["~loop.iteration-ceiling".to_owned()]);
    let read = row(&r, "repo.read", Level::NotDenied);
    assert_eq!(read.class, Class::Broader, "{read:?}");
    let f = &read.findings[0];
    assert_eq!(f.direction, Direction::Broader);
    assert_eq!(f.status, Status::Confirmed, "{f:?}");
    let req = f.request.as_ref().unwrap();
    assert_eq!(req.profile.as_str(), "trusted-local");
    assert!(req.iteration >= req.max_iterations, "{req:?}");
    // Nothing else can be let through by the change: every action with no permit stays
    // equivalent without grants (shell.execute has no permit in any profile).
    assert_eq!(
        row(&r, "shell.execute", Level::NotDenied).class,
        Class::Equivalent
    );
    // No row is narrower: the change only removes a forbid's reach.
    assert!(
        r.rows
            .iter()
            .all(|row| row.class != Class::Narrower && row.class != Class::Incomparable)
    );
    let text = craik_prove::render_diff(&r);
    assert!(
        text.contains(
            "repo.read              not-denied  broader       moved here: ~loop.iteration-ceiling\n"
        ),
        "{text}"
    );
    assert!(text.contains("+ confirmed; OLD deny [loop.iteration-ceiling] -> NEW allow [trusted-local.read]; repo.read `"), "{text}");
    assert_eq!(read.moved, vec!["~loop.iteration-ceiling".to_owned()]);
}

#[test]
fn issue_35_a_reordering_is_equivalent() {
    let Some(config) = crate::solver() else {
        return;
    };
    let old = Loaded::embedded();
    // The action lists reordered, the files' policies in reverse order: the policies'
    // JSON differs, so the solver (not the syntactic fast path) proves equivalence.
    let new = Loaded::new(&|name, text| {
        let text = text.replace(
            "[Craik::Action::\"repo.read\", Craik::Action::\"memory.read\", Craik::Action::\"git.diff_check\"]",
            "[Craik::Action::\"git.diff_check\", Craik::Action::\"repo.read\", Craik::Action::\"memory.read\"]",
        );
        if name == "base/protected.cedar" {
            let mut parts: Vec<&str> = text.split("\n\n").collect();
            parts.reverse();
            parts.join("\n\n")
        } else {
            text
        }
    });
    let r = craik_prove::diff(old.side(), new.side(), &[], &config).unwrap();
    assert!(!r.moved.is_empty(), "the reordering must reach the solver");
    assert!(r.queries > 0);
    for row in &r.rows {
        assert_eq!(row.class, Class::Equivalent, "{row:?}");
        assert!(!row.syntactic);
    }
    assert!(r.sampled > 0);
}

#[test]
fn issue_35_a_forbid_narrowed_by_a_path_glob_is_broader_and_confirmed() {
    let Some(config) = crate::solver() else {
        return;
    };
    let forbid = |glob: &str| {
        format!(
            "@id(\"team.no-secret-reads\")\nforbid (principal, action == Craik::Action::\"repo.read\", resource is Craik::Path)\nwhen {{ resource.path like \"{glob}\" }};\n"
        )
    };
    let old = with_file(
        Loaded::embedded(),
        "custom/secrets.cedar",
        &forbid("secrets/*"),
    );
    let new = with_file(
        Loaded::embedded(),
        "custom/secrets.cedar",
        &forbid("secrets/keys/*"),
    );
    let r = craik_prove::diff(old.side(), new.side(), &[], &config).unwrap();
    assert_eq!(r.moved, vec!["~team.no-secret-reads".to_owned()]);
    for level in Level::ALL {
        let read = row(&r, "repo.read", level);
        assert_eq!(read.class, Class::Broader, "{read:?}");
        let f = &read.findings[0];
        assert_eq!(f.status, Status::Confirmed, "{f:?}");
        let target = f.request.as_ref().unwrap().target.clone().unwrap();
        assert!(
            target.starts_with("secrets/") && !target.starts_with("secrets/keys/"),
            "{target}"
        );
    }
    // Only repo.read moved.
    for row in r.rows.iter().filter(|row| row.action != "repo.read") {
        assert_eq!(row.class, Class::Equivalent, "{row:?}");
    }
    let suites = craik_prove::emit_tests(&r, &[]);
    assert_eq!(suites.iter().map(|s| s.cases).sum::<usize>(), 2);
}

#[test]
fn issue_35_the_same_bundle_is_equivalent_without_solver_queries() {
    let Some(config) = crate::solver() else {
        return;
    };
    let b = Loaded::embedded();
    let r = craik_prove::diff(b.side(), b.side(), &[], &config).unwrap();
    assert_eq!(r.queries, 0);
    assert_eq!(r.rows.len(), 34);
    assert!(
        r.rows
            .iter()
            .all(|row| row.class == Class::Equivalent && row.syntactic)
    );
}

#[test]
fn issue_35_the_embedded_bundle_never_errors() {
    let Some(config) = crate::solver() else {
        return;
    };
    let b = Loaded::embedded();
    let r = craik_prove::never_errors(b.side(), &[], &config).unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.checked, 26 * 17);
    assert!(r.sampled > 0);
}

#[test]
fn issue_35_an_overflowing_policy_can_error_and_the_kernel_confirms() {
    let Some(config) = crate::solver() else {
        return;
    };
    let text =
        std::fs::read_to_string(crate::repo().join("policy-tests/custom-erroring/overflow.cedar"))
            .unwrap();
    let b = with_file(Loaded::embedded(), "custom-erroring/overflow.cedar", &text);
    let r = craik_prove::never_errors(b.side(), &[], &config).unwrap();
    assert!(r.confirmed() > 0, "{:?}", r.errors);
    let e = r
        .errors
        .iter()
        .find(|e| e.status == Status::Confirmed)
        .unwrap();
    assert_eq!(
        e.verdict.as_ref().unwrap().deny_kind,
        Some(craik_kernel::DenyKind::EvaluationError)
    );
}

#[test]
fn issue_35_moving_a_permit_to_another_profile_is_incomparable() {
    let Some(config) = crate::solver() else {
        return;
    };
    let old = Loaded::embedded();
    let new = Loaded::new(&|name, text| {
        if name == "profiles/strict.cedar" {
            text.replacen(
                "when { context.profile == \"strict\" };",
                "when { context.profile == \"custom\" };",
                1,
            )
        } else {
            text
        }
    });
    let r = craik_prove::diff(old.side(), new.side(), &[], &config).unwrap();
    let read = row(&r, "repo.read", Level::Allow);
    assert_eq!(read.class, Class::Incomparable, "{read:?}");
    let dirs: Vec<(Direction, &Status)> = read
        .findings
        .iter()
        .map(|f| (f.direction, &f.status))
        .collect();
    assert_eq!(
        dirs,
        vec![
            (Direction::Broader, &Status::Confirmed),
            (Direction::Narrower, &Status::Confirmed)
        ]
    );
    let profiles: Vec<&str> = read
        .findings
        .iter()
        .map(|f| f.request.as_ref().unwrap().profile.as_str())
        .collect();
    assert_eq!(profiles, vec!["custom", "strict"]);
}

#[test]
fn issue_35_a_witness_the_kernel_cannot_build_is_spurious_and_never_emitted() {
    let Some(config) = crate::solver() else {
        return;
    };
    // The kernel always sets `name` to the last segment of `path`: no request has name `x`
    // and path `y`, but Cedar (and the solver) can express one.
    let old = Loaded::embedded();
    let new = with_file(
        Loaded::embedded(),
        "custom/odd.cedar",
        "@id(\"team.odd\")\nforbid (principal, action == Craik::Action::\"repo.read\", resource is Craik::Path)\nwhen { resource.name == \"x\" && resource.path == \"y\" };\n",
    );
    let r = craik_prove::diff(old.side(), new.side(), &[], &config).unwrap();
    let read = row(&r, "repo.read", Level::NotDenied);
    assert_eq!(read.class, Class::Narrower, "{read:?}");
    assert!(
        matches!(&read.findings[0].status, Status::Spurious(why) if why.contains("the kernel decides it")),
        "{read:?}"
    );
    assert!(!r.rows.iter().any(craik_prove::Row::confirmed));
    assert!(craik_prove::emit_tests(&r, &[]).is_empty());
    let text = craik_prove::render_diff(&r);
    assert!(
        text.contains(
            "- spurious (solver only): the kernel decides it allow on OLD and allow on NEW"
        ),
        "{text}"
    );
}
