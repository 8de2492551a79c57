//! The Cedar policy sets a proof compares, built from a bundle's own source files: the
//! decision policies and compiled grants, the approval rules turned into forbids for the two
//! verdict levels, and the domain guards shared by both sides of a diff.
//!
//! Nothing here decides: the kernel's `Bundle::decide` stays the judge of every finding.

use std::collections::BTreeMap;
use std::str::FromStr;

use cedar_policy::{Policy, PolicyId, PolicySet, RequestEnv, Schema};
use craik_kernel::{Bundle, SourceFile};
use serde_json::json;

use crate::ProveError;

/// Which verdicts a level counts as "let through".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Verdict `allow` (no approval rule holds it).
    Allow,
    /// Verdict `allow` or `requires_approval` (not denied; under `automation` an approval
    /// rule denies, since nobody can approve).
    NotDenied,
}

impl Level {
    pub const ALL: [Self; 2] = [Self::NotDenied, Self::Allow];

    /// Whether a kernel decision counts as let through at this level.
    pub fn admits(self, decision: craik_kernel::Decision) -> bool {
        use craik_kernel::Decision;
        match (self, decision) {
            (Self::Allow, Decision::Allow) => true,
            (Self::Allow, Decision::RequiresApproval | Decision::Deny) => false,
            (Self::NotDenied, Decision::Allow | Decision::RequiresApproval) => true,
            (Self::NotDenied, Decision::Deny) => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::NotDenied => "not-denied",
        }
    }
}

/// One side's policies, as Cedar sees them.
#[derive(Debug, Clone)]
pub struct CedarBundle {
    /// Decision policies and compiled grants, by `@id`.
    pub decision: BTreeMap<String, Policy>,
    /// Approval rules (`@approval("required")`), by `@id`.
    pub approval: BTreeMap<String, Policy>,
}

impl CedarBundle {
    /// Parses `files` as the kernel does (each policy renamed to its `@id`) and adds the
    /// compiled grants' Cedar (`grant.<id>`). `bundle` is the kernel's load of the same files:
    /// it says which policies are approval rules.
    pub fn new(
        bundle: &Bundle,
        files: &[SourceFile],
        grants: &[craik_kernel::CompiledGrant],
    ) -> Result<Self, ProveError> {
        let mut decision = BTreeMap::new();
        let mut approval = BTreeMap::new();
        let texts = files
            .iter()
            .map(|f| (f.name.as_str(), f.text.as_str()))
            .chain(grants.iter().map(|g| (g.id.as_str(), g.cedar.as_str())));
        for (name, text) in texts {
            let set = PolicySet::from_str(text)
                .map_err(|e| ProveError::Bundle(format!("{name}: {e}")))?;
            for policy in set.policies() {
                let id = policy
                    .annotation("id")
                    .ok_or_else(|| ProveError::Bundle(format!("{name}: a policy has no @id")))?
                    .to_owned();
                let renamed = policy.new_id(PolicyId::new(&id));
                let is_approval = bundle.policy(&id).is_some_and(|i| i.approval);
                let target = if is_approval {
                    &mut approval
                } else {
                    &mut decision
                };
                if target.insert(id.clone(), renamed).is_some() {
                    return Err(ProveError::Bundle(format!("{name}: duplicate @id `{id}`")));
                }
            }
        }
        Ok(Self { decision, approval })
    }

    /// The set whose Cedar `allow` is the kernel's `level` (before envelope, runner matrix
    /// and approvals recorded for the exact request), with the shared `guards`.
    pub fn level_set(&self, level: Level, guards: &[Policy]) -> Result<PolicySet, ProveError> {
        let mut policies: Vec<Policy> = self.decision.values().cloned().collect();
        for (id, rule) in &self.approval {
            policies.push(as_forbid(id, rule, level)?);
        }
        policies.extend(guards.iter().cloned());
        PolicySet::from_policies(policies).map_err(|e| ProveError::Internal(e.to_string()))
    }

    /// The moved policies (as [`Self::moved`] spells them) whose action scope covers
    /// `capability` on either side: the ones a row's change can come from.
    pub fn moved_for(
        &self,
        other: &Self,
        moved: &[String],
        capability: &str,
        families: &[String],
    ) -> Vec<String> {
        moved
            .iter()
            .filter(|m| {
                let id = m.get(1..).unwrap_or_default();
                [self, other].iter().any(|side| {
                    side.decision
                        .get(id)
                        .or_else(|| side.approval.get(id))
                        .is_some_and(|p| applies(p, capability, families))
                })
            })
            .cloned()
            .collect()
    }

    /// The policy ids (and their text) that differ between two sides, for the report.
    pub fn moved(&self, other: &Self) -> Vec<String> {
        let mut moved = Vec::new();
        for (mine, theirs) in [
            (&self.decision, &other.decision),
            (&self.approval, &other.approval),
        ] {
            for (id, p) in mine {
                match theirs.get(id) {
                    Some(q) if same(p, q) => {}
                    Some(_) => moved.push(format!("~{id}")),
                    None => moved.push(format!("-{id}")),
                }
            }
            for id in theirs.keys() {
                if !mine.contains_key(id) {
                    moved.push(format!("+{id}"));
                }
            }
        }
        moved.sort_by(|a, b| a.get(1..).cmp(&b.get(1..)));
        moved
    }
}

/// Whether `policy`'s action scope covers `capability` (itself or one of its `families`).
fn applies(policy: &Policy, capability: &str, families: &[String]) -> bool {
    use cedar_policy::ActionConstraint;
    let named = |uid: &cedar_policy::EntityUid| {
        let id = uid.id().unescaped();
        id == capability || families.iter().any(|f| f == id)
    };
    match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => uid.id().unescaped() == capability,
        ActionConstraint::In(uids) => uids.iter().any(named),
    }
}

/// Two policies with the same meaning as written (same JSON form, annotations aside).
fn same(a: &Policy, b: &Policy) -> bool {
    let strip = |p: &Policy| {
        p.to_json().ok().map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("annotations");
            }
            v
        })
    };
    matches!((strip(a), strip(b)), (Some(x), Some(y)) if x == y)
}

/// An approval rule as a forbid: always for [`Level::Allow`]; under `automation` only for
/// [`Level::NotDenied`] (elsewhere a held request is not denied).
fn as_forbid(id: &str, rule: &Policy, level: Level) -> Result<Policy, ProveError> {
    let mut est = rule
        .to_json()
        .map_err(|e| ProveError::Internal(format!("{id}: {e}")))?;
    let obj = est
        .as_object_mut()
        .ok_or_else(|| ProveError::Internal(format!("{id}: policy JSON is not an object")))?;
    obj.insert("effect".into(), json!("forbid"));
    if level == Level::NotDenied {
        let guard = json!({"kind": "when", "body": {"==": {
            "left": {".": {"left": {"Var": "context"}, "attr": "profile"}},
            "right": {"Value": "automation"}
        }}});
        match obj.get_mut("conditions").and_then(|c| c.as_array_mut()) {
            Some(conditions) => conditions.push(guard),
            None => {
                obj.insert("conditions".into(), json!([guard]));
            }
        }
    }
    Policy::from_json(Some(PolicyId::new(id)), est)
        .map_err(|e| ProveError::Internal(format!("{id} as a forbid: {e}")))
}

/// `["a", "b"]`.
fn strings(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// What holds of every request the kernel evaluates in `env` (from the kernel's own tables),
/// as a Cedar condition: the enum domains, `u32` counters and the clock's range; the
/// capability's operations; for a `Path`, a protection value the kernel assigns and a
/// normalised path; intent path flags only for paths. Each part only excludes requests the
/// kernel refuses before any policy (or never builds), so a proof over the rest is a proof
/// over every request the kernel can evaluate.
pub(crate) fn env_condition(env: &RequestEnv) -> String {
    let mut parts = vec![
        format!(
            "{}.contains(context.profile)",
            strings(&["strict", "trusted-local", "automation", "custom"])
        ),
        format!(
            "{}.contains(context.phase)",
            strings(&["plan", "act", "observe", "evaluate", "continue", "stop"])
        ),
        format!(
            "{}.contains(context.task_mode)",
            strings(&["plan", "review", "implement", "verify"])
        ),
        format!(
            "{}.contains(principal.trust)",
            strings(&["low", "medium", "high"])
        ),
        format!(
            "{}.contains(principal.mode)",
            strings(&["fixture", "prompt-handoff", "live"])
        ),
        "0 <= context.iteration && context.iteration <= 4294967295".to_owned(),
        "0 <= context.max_iterations && context.max_iterations <= 4294967295".to_owned(),
        "context.now <= datetime(\"9999-12-31T23:59:59.999Z\")".to_owned(),
    ];
    let capability = env.action().id().unescaped().to_owned();
    // A capability with no operation in the kernel's table is refused (invalid request)
    // whatever the policies say (symcc has no empty-set literal, hence `false`).
    match craik_kernel::operations_of(&capability) {
        Some(ops) if !ops.is_empty() => {
            parts.push(format!("{}.contains(context.operation)", strings(ops)));
        }
        Some(_) | None => parts.push("false".to_owned()),
    }
    if env.resource().to_string() == "Craik::Path" {
        parts.push(format!(
            "{}.contains(resource.protected)",
            strings(&[
                "",
                "craik-state",
                "git",
                "agent-config",
                "exec-config",
                "immutable"
            ])
        ));
        parts.extend(
            [
                "resource.path != \"\"",
                "resource.path != \"..\"",
                "!(resource.path like \"/*\")",
                "!(resource.path like \"*/\")",
                "!(resource.path like \"*//*\")",
                "!(resource.path like \"*\\\\*\")",
                "!(resource.path like \"../*\")",
                "!(resource.path like \"*/..\")",
                "!(resource.path like \"*/../*\")",
                "!(resource.path like \"./*\")",
                "!(resource.path like \"*/./*\")",
                "!(resource.path like \"*/.\")",
            ]
            .map(str::to_owned),
        );
    } else {
        parts.push("!context.intent_out_of_scope".to_owned());
        parts.push("!context.intent_outside_scope".to_owned());
    }
    balanced(&parts)
}

/// `a && b && ...` as a balanced tree: symcc's compiler recurses over expressions, and a
/// left-leaning chain of 25 conjuncts is deeper than it needs to be.
fn balanced(parts: &[String]) -> String {
    match parts {
        [] => "true".to_owned(),
        [one] => format!("({one})"),
        _ => {
            let (a, b) = parts.split_at(parts.len() / 2);
            format!("({} && {})", balanced(a), balanced(b))
        }
    }
}

/// One forbid per request environment: everything outside [`env_condition`]. Identical on
/// both sides of a diff.
pub(crate) fn guards(schema: &Schema) -> Result<Vec<Policy>, ProveError> {
    schema
        .request_envs()
        .map(|env| {
            let capability = env.action().id().unescaped().to_owned();
            let id = format!("prove.guard.{capability}");
            let text = format!(
                "forbid (principal is {}, action == Craik::Action::{capability:?}, resource is {}) unless {{ {} }};",
                env.principal(),
                env.resource(),
                env_condition(&env)
            );
            Policy::parse(Some(PolicyId::new(&id)), &text)
                .map_err(|e| ProveError::Internal(format!("guard {id}: {e}")))
        })
        .collect()
}

/// `policy` evaluated only inside [`env_condition`]: the condition comes first, and Cedar's
/// `&&` does not evaluate the policy's own conditions when it is false, so an error the
/// solver finds in this policy is one a request the kernel builds can meet.
pub(crate) fn within_env(policy: &Policy, env: &RequestEnv) -> Result<Policy, ProveError> {
    let id = policy.id().clone();
    let mut est = policy
        .to_json()
        .map_err(|e| ProveError::Internal(format!("{id}: {e}")))?;
    let text = format!(
        "permit (principal, action, resource) when {{ {} }};",
        env_condition(env)
    );
    let guard = Policy::parse(None, text)
        .map_err(|e| ProveError::Internal(format!("guard: {e}")))?
        .to_json()
        .map_err(|e| ProveError::Internal(format!("guard: {e}")))?;
    let first = guard
        .get("conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.first())
        .cloned()
        .ok_or_else(|| ProveError::Internal("guard has no condition".into()))?;
    let obj = est
        .as_object_mut()
        .ok_or_else(|| ProveError::Internal(format!("{id}: policy JSON is not an object")))?;
    match obj.get_mut("conditions").and_then(|c| c.as_array_mut()) {
        Some(conditions) => conditions.insert(0, first),
        None => {
            obj.insert("conditions".into(), json!([first]));
        }
    }
    Policy::from_json(Some(id.clone()), est)
        .map_err(|e| ProveError::Internal(format!("{id} within its environment: {e}")))
}

#[cfg(test)]
mod tests;
