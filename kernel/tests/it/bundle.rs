use craik_kernel::{Bundle, SourceFile};

use crate::{bundle, sources};

#[test]
fn committed_bundle_loads_with_unique_ids_and_reasons() {
    let b = bundle();
    let ids: Vec<&str> = b.policies().map(|p| p.id.as_str()).collect();
    assert!(ids.len() >= 15, "{ids:?}");
    for p in b.policies() {
        assert!(p.reason.is_some(), "{} has no @reason", p.id);
    }
    assert!(b.hash().starts_with("sha256:") && b.hash().len() == 71);
}

#[test]
fn hash_is_stable_under_file_order_and_changes_with_content() {
    let (schema, mut files) = sources();
    let a = Bundle::load(&schema, &files).unwrap();
    files.reverse();
    let b = Bundle::load(&schema, &files).unwrap();
    assert_eq!(a.hash(), b.hash());
    files[0]
        .text
        .push_str("\n// a comment changes the reviewed text\n");
    let c = Bundle::load(&schema, &files).unwrap();
    assert_ne!(a.hash(), c.hash());
}

fn refused(extra: &str) -> Vec<String> {
    let (schema, mut files) = sources();
    files.push(SourceFile::new("custom/extra.cedar", extra));
    Bundle::load(&schema, &files)
        .unwrap_err()
        .problems
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn bad_bundles_are_refused_with_file_and_line() {
    let p = refused("\n\npermit (principal, action, resource);\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("custom/extra.cedar:3:1: policy has no @id"),
        "{p:?}"
    );

    let p =
        refused("@id(\"strict.read\")\n@reason(\"x\")\npermit (principal, action, resource);\n");
    assert!(p[0].starts_with("custom/extra.cedar:1:1: duplicate @id `strict.read`, first defined at profiles/strict.cedar:"), "{p:?}");

    let p = refused("@id(\"x.y\")\npermit (principal, action, resource) when { context.nope };\n");
    assert!(p[0].starts_with("custom/extra.cedar:2:"), "{p:?}");
    assert!(p[0].contains("nope"), "{p:?}");

    let p = refused("@id(\"x.y\")\npermit (principal, action, resource) when { ");
    assert!(p[0].starts_with("custom/extra.cedar:"), "{p:?}");

    let p = refused("@id(\"grant.sneaky\")\npermit (principal, action, resource);\n");
    assert!(
        p[0].contains("reserved for compiled capability grants"),
        "{p:?}"
    );

    let p =
        refused("@id(\"x.y\")\n@approval(\"required\")\nforbid (principal, action, resource);\n");
    assert!(p[0].contains("must be a permit"), "{p:?}");

    let p = refused("@id(\"x.y\")\npermit (principal == ?principal, action, resource);\n");
    assert!(p[0].contains("templates"), "{p:?}");
}

#[test]
fn broken_schema_and_empty_set_are_refused() {
    let (_, files) = sources();
    let bad = SourceFile::new("schema.cedarschema", "namespace Craik { entity ; }");
    let err = Bundle::load(&bad, &files).unwrap_err();
    assert!(
        err.problems[0]
            .to_string()
            .starts_with("schema.cedarschema:1:"),
        "{err}"
    );
    let (schema, _) = sources();
    let err = Bundle::load(&schema, &[]).unwrap_err();
    assert!(err.to_string().contains("no policies loaded"), "{err}");
}

/// Issue 19 item 5: the policy-set hash is content-addressed per file: names and directories
/// take no part; a file's bytes do.
#[test]
fn issue_19_hash_ignores_file_names() {
    let (schema, files) = sources();
    let a = Bundle::load(&schema, &files).unwrap();
    let renamed: Vec<SourceFile> = files
        .iter()
        .enumerate()
        .map(|(i, f)| SourceFile::new(format!("elsewhere/{i}/x.cedar"), f.text.clone()))
        .collect();
    let schema_renamed = SourceFile::new("other/schema.cedarschema", schema.text.clone());
    let b = Bundle::load(&schema_renamed, &renamed).unwrap();
    assert_eq!(a.hash(), b.hash());
    let texts: Vec<&str> = files.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(
        a.hash(),
        craik_kernel::policy_set_hash(&schema.text, &texts)
    );
    let mut changed = schema.clone();
    changed.text.push('\n');
    assert_ne!(Bundle::load(&changed, &files).unwrap().hash(), a.hash());
}

/// Issue 19 item 5: lints. An unconstrained decision permit is an error (an unconstrained
/// approval rule is not: it holds everything for approval); a passed upper time bound warns,
/// judged at the `now` given.
#[test]
fn issue_19_lints() {
    let (schema, mut files) = sources();
    files.push(SourceFile::new(
        "custom/lint.cedar",
        "@id(\"x.open\")\n@reason(\"x\")\npermit (principal, action, resource);\n\n\
         @id(\"x.approve-all\")\n@reason(\"x\")\n@approval(\"required\")\npermit (principal, action, resource);\n\n\
         @id(\"x.trial\")\n@reason(\"x\")\npermit (principal, action == Craik::Action::\"repo.read\", resource)\nwhen { principal.trust == \"high\" && context.now <= datetime(\"2026-11-01T00:00:00Z\") };\n",
    ));
    let b = Bundle::load(&schema, &files).unwrap();
    assert!(
        bundle().lints(0).is_empty(),
        "the shipped bundle lints clean"
    );
    let at = |now: i64| {
        b.lints(now)
            .iter()
            .map(|l| (l.rule, l.policy.clone(), l.at.line))
            .collect::<Vec<_>>()
    };
    // 2026-10-01 and 2026-11-02.
    assert_eq!(
        at(1_790_812_800),
        [("unconstrained-permit", "x.open".to_owned(), 1)]
    );
    assert_eq!(
        at(1_793_577_600),
        [
            ("unconstrained-permit", "x.open".to_owned(), 1),
            ("expired-bound", "x.trial".to_owned(), 10)
        ]
    );
}
