//! Sampled requests through the kernel, the check of the solver's "nothing differs" answers:
//! every "equivalent" row of a diff and every "never errors" claim must also hold on a fixed,
//! deterministic sample of requests decided by `Bundle::decide`. A disagreement means the
//! solver (or a guard) is wrong, and nothing is reported.

use craik_contracts::CapabilityGrant;
use craik_kernel::{Bundle, DecisionRequest, DenyKind, GrantSet, IntentScope, RunnerRef};
use serde_json::json;
use time::OffsetDateTime;

use crate::classify::{Class, Row, Side};
use crate::replay::{Replayed, WORKSPACE_ROOT};
use crate::{ProveError, escape};

const PROFILES: [&str; 4] = ["strict", "trusted-local", "automation", "custom"];
const TRUSTS: [&str; 3] = ["low", "medium", "high"];

/// Targets per resource kind: ordinary, protected, prefix confusion, commands the analyser
/// flags.
fn targets(capability: &str) -> &'static [&'static str] {
    match capability.split('.').next() {
        Some("repo") => &[
            "README.md",
            "docs/guide.md",
            "docs/adr/0001-x.md",
            "src/main.rs",
            ".git/config",
            ".craik/keys/x",
            "AGENTS.md",
            ".github/workflows/ci.yml",
            "docs-evil/x",
        ],
        Some("shell") => &[
            "cargo test",
            "ls docs",
            "sh -c ls",
            "env ls",
            "git grep -O x",
            "pytest",
            "make",
        ],
        Some("memory") => &["team", "local"],
        Some("net") => &["https://example.com/x"],
        _ => &["origin"],
    }
}

/// The sample: each capability under each profile and trust, each target and operation, with
/// and without an intent stop and at the iteration ceiling, at a fixed clock.
pub(crate) fn requests(bundle: &Bundle) -> Vec<Replayed> {
    let now =
        OffsetDateTime::from_unix_timestamp(1_795_176_000).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let mut out = Vec::new();
    for capability in bundle.capabilities() {
        let Some(ops) = craik_kernel::operations_of(capability) else {
            continue;
        };
        for (i, (profile, trust)) in PROFILES
            .iter()
            .flat_map(|p| TRUSTS.iter().map(move |t| (*p, *t)))
            .enumerate()
        {
            for (j, target) in targets(capability).iter().enumerate() {
                for op in ops {
                    let variant = (i + j) % 3;
                    let request = one(capability, profile, trust, target, op, variant);
                    if let Some(request) = request {
                        out.push(Replayed {
                            request,
                            now,
                            model: String::new(),
                        });
                    }
                }
            }
        }
    }
    out
}

fn one(
    capability: &str,
    profile: &str,
    trust: &str,
    target: &str,
    op: &str,
    variant: usize,
) -> Option<DecisionRequest> {
    let runner: RunnerRef =
        serde_json::from_value(json!({"id": "runner_sample", "trust": trust, "mode": "fixture"}))
            .ok()?;
    let intent = (variant == 1).then(|| IntentScope {
        stop_conditions: vec![format!("capability:{capability}")],
        ..IntentScope::default()
    });
    let mut request: DecisionRequest = serde_json::from_value(json!({
        "runner": runner,
        "task_id": "task_sample",
        "capability": capability,
        "target": target,
        "operation": op,
        "profile": profile,
        "iteration": if variant == 2 { 5 } else { 0 },
        "max_iterations": 5,
    }))
    .ok()?;
    request.intent = intent;
    Some(request)
}

/// Every "equivalent" row must agree with the kernel on the sample. Returns the number of
/// requests decided (on each side).
pub(crate) fn cross_check(
    old: Side<'_>,
    new: Side<'_>,
    grants: &[CapabilityGrant],
    rows: &[Row],
) -> Result<usize, ProveError> {
    let (og, ng) = (compile(old.bundle, grants)?, compile(new.bundle, grants)?);
    let sample = requests(new.bundle);
    for r in &sample {
        let o = old.bundle.decide(&og, &r.request, &options(r));
        let n = new.bundle.decide(&ng, &r.request, &options(r));
        for row in rows
            .iter()
            .filter(|row| row.class == Class::Equivalent && row.action == r.request.capability)
        {
            if row.level.admits(o.decision) != row.level.admits(n.decision) {
                return Err(ProveError::Unsound(format!(
                    "the solver called {} ({}) equivalent, but the kernel decides `{}` `{}` under {:?} as {:?} on OLD and {:?} on NEW; the solver or a guard is wrong, nothing is reported",
                    row.action,
                    row.level.as_str(),
                    r.request.capability,
                    escape(r.request.target.as_deref().unwrap_or("")),
                    r.request.profile,
                    o.decision,
                    n.decision
                )));
            }
        }
    }
    Ok(sample.len())
}

/// "Never errors" must agree with the kernel on the sample: no evaluation error.
pub(crate) fn never_errors_check(
    bundle: &Bundle,
    grants: &[CapabilityGrant],
) -> Result<usize, ProveError> {
    let g = compile(bundle, grants)?;
    let sample = requests(bundle);
    for r in &sample {
        let v = bundle.decide(&g, &r.request, &options(r));
        if v.deny_kind == Some(DenyKind::EvaluationError) {
            return Err(ProveError::Unsound(format!(
                "the solver found no policy that can error, but the kernel denies `{}` `{}` with an evaluation error ({}); nothing is reported",
                r.request.capability,
                escape(r.request.target.as_deref().unwrap_or("")),
                escape(&v.errors.join("; "))
            )));
        }
    }
    Ok(sample.len())
}

fn compile(bundle: &Bundle, grants: &[CapabilityGrant]) -> Result<GrantSet, ProveError> {
    GrantSet::compile(bundle, grants).map_err(|e| ProveError::Bundle(format!("grants: {e}")))
}

fn options(r: &Replayed) -> craik_kernel::DecideOptions {
    craik_kernel::DecideOptions {
        now: r.now,
        workspace_root: WORKSPACE_ROOT.to_owned(),
        mode: craik_kernel::Mode::Enforce,
        immutable: craik_kernel::ImmutablePaths::default(),
    }
}
