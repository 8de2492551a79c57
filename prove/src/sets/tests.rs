//! Unit tests of the Cedar sets (no solver): the approval rewrite, the guards, what moved.

use cedar_policy::{Effect, Schema};
use craik_kernel::{Bundle, SourceFile};

use super::*;

fn embedded(edit: &dyn Fn(&str, String) -> String) -> (Bundle, Vec<SourceFile>, Schema) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let schema_text = std::fs::read_to_string(dir.join("schema.cedarschema")).unwrap();
    let schema_file = SourceFile::new("schema.cedarschema", schema_text.clone());
    let mut files = Vec::new();
    for sub in ["approvals", "base", "profiles"] {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        for n in names {
            let rel = format!("{sub}/{n}");
            let text = std::fs::read_to_string(dir.join(&rel)).unwrap();
            files.push(SourceFile::new(rel.clone(), edit(&rel, text)));
        }
    }
    let bundle = Bundle::load(&schema_file, &files).unwrap();
    let (schema, _) = Schema::from_cedarschema_str(&schema_text).unwrap();
    (bundle, files, schema)
}

#[test]
fn approval_rules_become_forbids_and_only_under_automation_for_not_denied() {
    let (bundle, files, _) = embedded(&|_, t| t);
    let c = CedarBundle::new(&bundle, &files, &[]).unwrap();
    assert_eq!(c.decision.len(), 22);
    assert_eq!(c.approval.len(), 4);
    for level in Level::ALL {
        let set = c.level_set(level, &[]).unwrap();
        let rule = set
            .policy(&PolicyId::new("approval.strict.side-effects"))
            .unwrap();
        assert_eq!(rule.effect(), Effect::Forbid);
        let text = rule.to_string();
        assert_eq!(
            text.contains("\"automation\""),
            level == Level::NotDenied,
            "{level:?}: {text}"
        );
    }
}

#[test]
fn every_guard_and_level_set_compiles_for_every_request_environment() {
    let (bundle, files, schema) = embedded(&|_, t| t);
    let c = CedarBundle::new(&bundle, &files, &[]).unwrap();
    let guards = guards(&schema).unwrap();
    assert_eq!(guards.len(), 17);
    for level in Level::ALL {
        let set = c.level_set(level, &guards).unwrap();
        for env in schema.request_envs() {
            crate::solver::compile(&set, &env, &schema).unwrap();
            for p in c.decision.values() {
                let guarded = within_env(p, &env).unwrap();
                cedar_policy_symcc::CompiledPolicy::compile(&guarded, &env, &schema).unwrap();
            }
        }
    }
}

#[test]
fn moved_names_changed_added_and_removed_policies_and_ignores_reformatting() {
    let (b1, f1, _) = embedded(&|_, t| t);
    let (b2, f2, _) = embedded(&|name, t| {
        if name == "base/intent.cedar" {
            t.replace(
                "forbid (principal, action, resource)\nwhen { context.intent_stop };",
                "forbid (principal, action, resource) when { context.intent_stop && true };",
            )
        } else if name == "profiles/strict.cedar" {
            t.replace("\n  resource\n)", "\n        resource )")
        } else {
            t
        }
    });
    let (c1, c2) = (
        CedarBundle::new(&b1, &f1, &[]).unwrap(),
        CedarBundle::new(&b2, &f2, &[]).unwrap(),
    );
    assert_eq!(c1.moved(&c2), vec!["~intent.stop-condition".to_owned()]);
    assert!(c1.moved(&c1).is_empty());
}
