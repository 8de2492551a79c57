//! The kernel's laws, as property tests over the committed bundle:
//! - compiled grants match exactly the paths their globs match (globset is the oracle), and
//!   exclusions always win, case-insensitively;
//! - adding a forbid never turns a Deny into an Allow, and never loosens any verdict;
//! - a policy that errors during evaluation never yields an Allow (outside honoured fail-open);
//! - every verdict is one of the three, ordered Allow < RequiresApproval < Deny.

use craik_kernel::{Bundle, Decision, DenyKind, GrantSet, SourceFile, glob_matches};
use proptest::prelude::*;
use serde_json::json;

use crate::{bundle, options, request, sources};

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("A".to_owned()),
        Just("ab".to_owned()),
        Just("a.md".to_owned()),
        Just("b.rs".to_owned()),
        Just("A.MD".to_owned()),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 1..5).prop_map(|s| s.join("/"))
}

fn dir() -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("A")], 0..3)
        .prop_map(|s| s.join("/"))
}

fn name_pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*.md"),
        Just("a*"),
        Just("*"),
        Just("*.rs"),
        Just("a.md"),
        Just("*b*")
    ]
    .prop_map(str::to_owned)
}

fn pattern() -> impl Strategy<Value = String> {
    let join = |d: String, rest: &str| {
        if d.is_empty() {
            rest.to_owned()
        } else {
            format!("{d}/{rest}")
        }
    };
    prop_oneof![
        path(),
        dir().prop_map(move |d| join(d, "**")),
        (dir(), name_pattern()).prop_map(move |(d, n)| join(d, &n)),
        (dir(), name_pattern()).prop_map(move |(d, n)| join(d, &format!("**/{n}"))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A compiled grant allows a path iff one of its globs matches it and no exclusion does
    /// (exclusions case-insensitively). Checked through the whole decision, against globset.
    #[test]
    fn compiled_grants_agree_with_globset(
        paths in prop::collection::vec(pattern(), 1..3),
        exclude in prop::collection::vec(pattern(), 0..2),
        targets in prop::collection::vec(path(), 1..8),
    ) {
        let b = bundle();
        let grant = json!([{
            "id": "grant_prop", "task_id": "task_docs", "capability": "repo.write.code",
            "target": {"paths": paths, "exclude": exclude}, "operations": ["write"],
            "reason": "property test", "approved_by": "user:prop"
        }]);
        let grants: Vec<craik_contracts::CapabilityGrant> = serde_json::from_value(grant).unwrap();
        let set = GrantSet::compile(&b, &grants).unwrap();
        for target in &targets {
            let v = b.decide(&set, &request(json!({"capability": "repo.write.code", "target": target, "profile": "trusted-local"})), &options());
            let allowed = paths.iter().any(|p| glob_matches(p, target, false))
                && !exclude.iter().any(|x| glob_matches(x, target, true));
            prop_assert_eq!(v.decision == Decision::Allow, allowed, "{} vs paths {:?} exclude {:?}: {:?}", target, paths, exclude, v);
        }
    }
}

fn with_extra(extra: &str) -> Bundle {
    let (schema, mut files) = sources();
    files.push(SourceFile::new("extra.cedar", extra));
    Bundle::load(&schema, &files).unwrap()
}

fn sample_requests() -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for profile in ["strict", "trusted-local", "automation", "custom"] {
        for (cap, target, op) in [
            ("repo.read", "src/lib.rs", "read"),
            ("repo.write.docs", "docs/guide.md", "write"),
            ("repo.write.docs", "docs/adr/1.md", "write"),
            ("repo.write.code", ".git/config", "write"),
            ("shell.test", "cargo test", "execute"),
            ("memory.propose", "team", "write"),
            ("net.fetch", "https://example.org", "read"),
            ("git.push", "origin", "write"),
        ] {
            for iteration in [0, 7] {
                out.push(json!({"capability": cap, "target": target, "operation": op, "profile": profile, "iteration": iteration}));
            }
        }
    }
    out
}

fn all_grants(b: &Bundle) -> GrantSet {
    crate::grants(
        b,
        json!([
            {"id": "grant_docs", "task_id": "task_docs", "capability": "repo.write.docs", "target": {"paths": ["**"]}, "operations": ["write"], "reason": "r", "approved_by": "user:x"},
            {"id": "grant_code", "task_id": "task_docs", "capability": "repo.write.code", "target": {"paths": ["**"]}, "operations": ["write"], "reason": "r", "approved_by": "user:x"},
            {"id": "grant_test", "task_id": "task_docs", "capability": "shell.test", "target": {"paths": ["cargo test"]}, "operations": ["execute"], "reason": "r", "approved_by": "user:x"},
            {"id": "grant_push", "task_id": "task_docs", "capability": "git.push", "target": {}, "operations": ["write"], "reason": "r", "approved_by": "user:x"},
            {"id": "grant_net", "task_id": "task_docs", "capability": "net.fetch", "target": {}, "operations": ["read"], "reason": "r", "approved_by": "user:x"}
        ]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Adding any forbid (on any action, with any simple condition) never makes a verdict
    /// less strict.
    #[test]
    fn adding_a_forbid_never_loosens_a_verdict(
        action in prop_oneof![Just(""), Just("action == Craik::Action::\"repo.write.docs\","), Just("action in Craik::Action::\"repo\","), Just("action in Craik::Action::\"shell\",")],
        condition in prop_oneof![Just("true"), Just("context.profile == \"strict\""), Just("context.iteration > 3"), Just("principal.trust == \"medium\"")],
    ) {
        let base = bundle();
        let action = if action.is_empty() { "action," } else { action };
        let stricter = with_extra(&format!("@id(\"extra.forbid\")\n@reason(\"x\")\nforbid (principal, {action} resource) when {{ {condition} }};\n"));
        let (g1, g2) = (all_grants(&base), all_grants(&stricter));
        for r in sample_requests() {
            let before = base.decide(&g1, &request(r.clone()), &options());
            let after = stricter.decide(&g2, &request(r.clone()), &options());
            prop_assert!(after.decision >= before.decision, "{r}: {:?} -> {:?}", before.decision, after.decision);
        }
    }

    /// A policy that fails to evaluate never yields Allow unless trusted-local fail-open was
    /// asked for, and then the verdict is flagged as a policy exception.
    #[test]
    fn an_erroring_policy_never_allows(effect in prop_oneof![Just("permit"), Just("forbid")], fail_open in any::<bool>()) {
        let erroring = with_extra(&format!(
            "@id(\"extra.erroring\")\n@reason(\"x\")\n{effect} (principal, action, resource) when {{ context.iteration * 4611686018427387904 < 0 }};\n"
        ));
        let g = all_grants(&erroring);
        for mut r in sample_requests() {
            r["iteration"] = json!(2);
            r["fail_open"] = json!(fail_open);
            let v = erroring.decide(&g, &request(r.clone()), &options());
            if fail_open && r["profile"] == "trusted-local" {
                prop_assert!(v.policy_exception || v.errors.is_empty(), "{r}: {v:?}");
            } else if !v.errors.is_empty() {
                prop_assert_eq!(v.decision, Decision::Deny, "{}: {:?}", r, v);
                prop_assert_eq!(v.deny_kind, Some(DenyKind::EvaluationError));
                prop_assert!(v.determining.contains(&"extra.erroring".to_owned()));
            }
            if v.decision == Decision::Allow {
                prop_assert!(v.errors.is_empty() || v.policy_exception, "{r}: {v:?}");
            }
        }
    }
}

/// Slicing by capability, profile and task never changes a verdict: the sliced decision equals
/// the naive one (every policy and grant in one Cedar set), including with extra policies
/// whose profile guard is not first and so must not be sliced away.
#[test]
fn slicing_never_changes_a_verdict() {
    let extra = with_extra(
        "@id(\"extra.guard-first\")\n@reason(\"x\")\nforbid (principal, action, resource) when { context.profile == \"strict\" && context.iteration > 5 };\n\
         @id(\"extra.guard-second\")\n@reason(\"x\")\nforbid (principal, action, resource) when { context.iteration > 5 && context.profile == \"automation\" };\n\
         @id(\"extra.erroring-unguarded\")\n@reason(\"x\")\npermit (principal, action, resource) when { context.iteration * 4611686018427387904 < 0 && context.profile == \"custom\" };\n",
    );
    for b in [bundle(), extra] {
        let g = all_grants(&b);
        let naive = b.naive(&g);
        for r in sample_requests() {
            let intents = [
                serde_json::Value::Null,
                json!({"out_of_scope": ["docs/"]}),
                json!({"in_scope": ["src/"]}),
                json!({"stop_conditions": ["capability:repo.write"]}),
                json!({"in_scope": ["src/"], "out_of_scope": ["docs/adr/"], "stop_conditions": ["path:docs/"]}),
            ];
            for iteration in [0, 2, 7] {
                for intent in &intents {
                    let mut r = r.clone();
                    r["iteration"] = json!(iteration);
                    r["intent"] = intent.clone();
                    let req = request(r.clone());
                    assert_eq!(
                        b.decide(&g, &req, &options()),
                        b.decide_naive(&naive, &g, &req, &options()),
                        "{r}"
                    );
                }
            }
        }
    }
}

/// A bundle with extra policies over every kind of action scope (`==`, `in` a family, `in` a
/// list mixing leaves and families, none), on principal, resource and context attributes, one
/// of them erroring: what the sliced fast path prepares differently from Cedar's own condition.
fn scoped_extra() -> Bundle {
    static EXTRA: std::sync::LazyLock<Bundle> = std::sync::LazyLock::new(|| {
        with_extra(
            "@id(\"extra.eq\")\n@reason(\"x\")\nforbid (principal, action == Craik::Action::\"repo.write.code\", resource is Craik::Path) when { resource.name like \"*.lock\" };\n\
             @id(\"extra.in-family\")\n@reason(\"x\")\npermit (principal, action in Craik::Action::\"repo.read\", resource) when { principal.trust == \"high\" };\n\
             @id(\"extra.in-list\")\n@reason(\"x\")\nforbid (principal, action in [Craik::Action::\"net\", Craik::Action::\"repo.write.docs\", Craik::Action::\"git.push\"], resource) when { context.iteration > 4 && context.operation != \"read\" };\n\
             @id(\"extra.any\")\n@reason(\"x\")\nforbid (principal, action, resource) when { context.phase == \"plan\" && principal.mode == \"live\" };\n\
             @id(\"extra.erroring\")\n@reason(\"x\")\npermit (principal, action in Craik::Action::\"shell\", resource) when { context.iteration * 4611686018427387904 < 0 };\n",
        )
    });
    EXTRA.clone()
}

fn one_of(values: &[&str]) -> BoxedStrategy<String> {
    prop::sample::select(values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>()).boxed()
}

fn any_target(capability: &str) -> BoxedStrategy<Option<String>> {
    let tricky_paths = [
        "docs/adr/0001.md",
        ".git/config",
        ".craik/keys/x",
        "AGENTS.md",
        "docs/../src/Cargo.lock",
        "/workspace/docs/a.md",
        "/etc/passwd",
        "docs//a.md",
    ];
    let commands = [
        "cargo test",
        "sh -c 'rm -rf /'",
        "env FOO=1 cargo test",
        "cargo test -- a; b",
    ];
    match capability.split('.').next().unwrap_or_default() {
        "repo" => prop_oneof![path(), one_of(&tricky_paths)]
            .prop_map(Some)
            .boxed(),
        "shell" => one_of(&commands).prop_map(Some).boxed(),
        "net" => one_of(&["https://example.org/x", "not a url"])
            .prop_map(Some)
            .boxed(),
        _ => prop_oneof![Just(None), Just(Some("team".to_owned()))].boxed(),
    }
}

fn any_request() -> impl Strategy<Value = serde_json::Value> {
    let capabilities: Vec<String> = bundle().capabilities().map(str::to_owned).collect();
    prop::sample::select(capabilities).prop_flat_map(|capability| {
        (
            any_target(&capability),
            (
                prop_oneof![
                    Just("strict"),
                    Just("trusted-local"),
                    Just("automation"),
                    Just("custom")
                ],
                prop_oneof![Just("read"), Just("write"), Just("patch"), Just("execute")],
                prop_oneof![Just("low"), Just("medium"), Just("high")],
                prop_oneof![Just("fixture"), Just("live")],
            ),
            (
                prop_oneof![Just("plan"), Just("act"), Just("observe")],
                0u32..9,
                prop_oneof![Just("task_docs"), Just("task_other")],
                prop_oneof![
                    Just(serde_json::Value::Null),
                    Just(json!({"out_of_scope": ["docs/"]})),
                    Just(
                        json!({"in_scope": ["src/"], "stop_conditions": ["capability:repo.write"]})
                    ),
                ],
            ),
            any::<bool>(),
        )
            .prop_map(
                move |(
                    target,
                    (profile, op, trust, mode),
                    (phase, iteration, task, intent),
                    fail_open,
                )| {
                    json!({
                        "capability": capability, "target": target, "operation": op,
                        "profile": profile, "phase": phase, "iteration": iteration,
                        "max_iterations": 6, "task_id": task, "intent": intent,
                        "runner": {"id": "runner_fixture", "trust": trust, "mode": mode},
                        "fail_open": fail_open,
                    })
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The sliced fast path (core-built inputs, prepared conditions with the action scope
    /// taken as established) decides every generated request exactly as the naive baseline
    /// (public-API inputs, every policy and grant in one set, Cedar's own authorizer), with
    /// the committed bundle and with extra policies over every kind of action scope.
    #[test]
    fn the_fast_path_decides_exactly_as_cedar(r in any_request(), extra in any::<bool>()) {
        let b = if extra { scoped_extra() } else { bundle() };
        let g = all_grants(&b);
        let naive = b.naive(&g);
        let req = request(r.clone());
        prop_assert_eq!(
            b.decide(&g, &req, &options()),
            b.decide_naive(&naive, &g, &req, &options()),
            "{}", r
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Issue 11 item 1: a (capability, operation) pair outside the kernel's table is refused as
    /// an invalid request before any policy, under every profile and whatever the grants; a
    /// pair inside it is never refused for its operation, and names exactly one effect.
    #[test]
    fn the_operation_belongs_to_the_capability(
        cap in 0usize..64,
        operation in prop_oneof![
            Just("read".to_owned()), Just("write".to_owned()), Just("patch".to_owned()),
            Just("create".to_owned()), Just("delete".to_owned()), Just("execute".to_owned()),
            Just("propose".to_owned()), "[a-z_]{1,8}",
        ],
        profile in prop_oneof![Just("strict"), Just("trusted-local"), Just("automation")],
    ) {
        let b = bundle();
        let caps: Vec<String> = b.capabilities().map(str::to_owned).collect();
        let capability = caps[cap % caps.len()].clone();
        let target = match capability.split('.').next().unwrap() {
            "repo" => json!({"target": "docs/a.md"}),
            "shell" => json!({"argv": ["cargo", "test"]}),
            "net" => json!({"target": "https://example.com/"}),
            _ => json!({}),
        };
        let mut spec = json!({"capability": capability, "operation": operation, "profile": profile});
        for (k, v) in target.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let paths = match capability.split('.').next().unwrap() {
            "repo" => json!(["**"]),
            "shell" => json!(["cargo"]),
            _ => json!([]),
        };
        let grants = crate::grants(&b, json!([{
            "id": "grant_all", "task_id": "task_docs", "capability": capability,
            "target": {"paths": paths, "exclude": []},
            "operations": [operation], "reason": "law", "approved_by": "user:law"
        }]));
        let verdict = b.decide(&grants, &request(spec), &options());
        let refused_for_operation = verdict.deny_kind == Some(DenyKind::InvalidRequest)
            && verdict.reasons.iter().any(|r| r.contains("does not belong to capability"));
        match craik_kernel::Effect::of(&capability, &operation) {
            None => {
                prop_assert_eq!(verdict.decision, Decision::Deny);
                prop_assert!(refused_for_operation, "{:?}", verdict);
            }
            Some(_) => prop_assert!(!refused_for_operation, "{:?}", verdict),
        }
    }
}
