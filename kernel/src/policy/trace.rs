//! `craik policy explain --trace`: for each permit that could apply to a request, whether it
//! matched and, if not, the first part of it that did not hold.
//!
//! Owns: re-evaluating one permit piece by piece against the decision's own inputs — its
//! scope (principal, then resource), then its conditions in order, each prefix as a policy of
//! its own — so the report names the clause that stopped it. Must not: change a verdict (it
//! runs after the decision, on a copy of the policies).

use cedar_policy::{Effect, Policy, PolicyId, PolicySet};
use cedar_policy_core::authorizer::Decision;
use serde::Serialize;

use crate::policy::eval;
use crate::policy::inputs::Inputs;

/// One permit and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermitTrace {
    /// The `@id` (`grant.<id>` for a compiled grant).
    pub id: String,
    /// True when it matched (it is among the verdict's permitting policies).
    pub matched: bool,
    /// Why not, one line (`when { ... }` is false, the principal is not in the task, ...);
    /// empty when it matched.
    pub why: String,
}

/// The trace of `permits` (decision permits of the slice and the task's grants).
pub(crate) fn trace<'a>(
    permits: impl IntoIterator<Item = &'a Policy>,
    inputs: &Inputs,
) -> Vec<PermitTrace> {
    let mut out: Vec<PermitTrace> = permits
        .into_iter()
        .filter(|p| p.effect() == Effect::Permit)
        .map(|p| {
            let id = p.id().to_string();
            match why_not(p, inputs) {
                None => PermitTrace {
                    id,
                    matched: true,
                    why: String::new(),
                },
                Some(why) => PermitTrace {
                    id,
                    matched: false,
                    why: craik_contracts::one_line(&why),
                },
            }
        })
        .collect();
    out.sort_by(|a, b| (!a.matched, &a.id).cmp(&(!b.matched, &b.id)));
    out
}

/// What one policy (built from `est`) does on `inputs`: `Ok(true)` matched, `Ok(false)` not,
/// `Err` the evaluation error.
fn holds(id: &PolicyId, est: serde_json::Value, inputs: &Inputs) -> Result<bool, String> {
    let policy = Policy::from_json(Some(id.clone()), est).map_err(|e| e.to_string())?;
    let mut set = PolicySet::new();
    set.add(policy).map_err(|e| e.to_string())?;
    let outcome = eval::evaluate_with_authorizer(&set, inputs);
    if let Some((_, message)) = outcome.errors.into_iter().next() {
        return Err(message);
    }
    Ok(outcome.decision == Decision::Allow)
}

fn why_not(policy: &Policy, inputs: &Inputs) -> Option<String> {
    let Ok(est) = policy.to_json() else {
        return Some("cannot be traced (no JSON form)".into());
    };
    let id = policy.id();
    let any = serde_json::json!({"op": "All"});
    let mut scope = est.clone();
    if let Some(obj) = scope.as_object_mut() {
        obj.insert("conditions".into(), serde_json::json!([]));
        obj.remove("annotations");
    }
    let mut principal_only = scope.clone();
    if let Some(obj) = principal_only.as_object_mut() {
        obj.insert("resource".into(), any.clone());
    }
    match holds(id, principal_only, inputs) {
        Ok(true) => {}
        Ok(false) => {
            return Some(format!(
                "principal scope `{}` does not hold",
                scope_text(&est, "principal")
            ));
        }
        Err(e) => return Some(format!("principal scope errors: {e}")),
    }
    match holds(id, scope.clone(), inputs) {
        Ok(true) => {}
        Ok(false) => {
            return Some(format!(
                "resource scope `{}` does not hold",
                scope_text(&est, "resource")
            ));
        }
        Err(e) => return Some(format!("resource scope errors: {e}")),
    }
    let conditions = est
        .get("conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    for i in 0..conditions.len() {
        let mut prefix = scope.clone();
        if let Some(obj) = prefix.as_object_mut() {
            obj.insert(
                "conditions".into(),
                serde_json::Value::Array(conditions.iter().take(i + 1).cloned().collect()),
            );
        }
        let clause = conditions.get(i).map(clause_text).unwrap_or_default();
        let unless = conditions
            .get(i)
            .and_then(|c| c.get("kind"))
            .and_then(|k| k.as_str())
            == Some("unless");
        match holds(id, prefix, inputs) {
            Ok(true) => {}
            Ok(false) if unless => return Some(format!("`{clause}` excludes it")),
            Ok(false) => return Some(format!("`{clause}` is false")),
            Err(e) => return Some(format!("`{clause}` errors: {e}")),
        }
    }
    None
}

/// A scope constraint as Cedar text (`principal in Craik::Task::"task_x"`).
fn scope_text(est: &serde_json::Value, var: &str) -> String {
    let Some(constraint) = est.get(var) else {
        return var.to_owned();
    };
    let uid = |v: &serde_json::Value| {
        let e = v.get("entity").unwrap_or(v);
        format!(
            "{}::\"{}\"",
            e.get("type").and_then(|t| t.as_str()).unwrap_or("?"),
            e.get("id").and_then(|t| t.as_str()).unwrap_or("?")
        )
    };
    match constraint.get("op").and_then(|o| o.as_str()) {
        Some("==") => format!("{var} == {}", uid(constraint)),
        Some("in") => format!("{var} in {}", uid(constraint)),
        Some("is") => format!(
            "{var} is {}",
            constraint
                .get("entity_type")
                .and_then(|t| t.as_str())
                .unwrap_or("?")
        ),
        _ => var.to_owned(),
    }
}

/// One `when`/`unless` clause as Cedar text, from a policy holding only that clause.
fn clause_text(condition: &serde_json::Value) -> String {
    let est = serde_json::json!({
        "effect": "permit",
        "principal": {"op": "All"},
        "action": {"op": "All"},
        "resource": {"op": "All"},
        "conditions": [condition],
    });
    let text = Policy::from_json(None, est)
        .map(|p| p.to_string())
        .unwrap_or_default();
    let start = text
        .find("when")
        .into_iter()
        .chain(text.find("unless"))
        .min()
        .unwrap_or(0);
    let clause = text
        .get(start..)
        .unwrap_or_default()
        .trim()
        .trim_end_matches(';');
    clause.split_whitespace().collect::<Vec<_>>().join(" ")
}
