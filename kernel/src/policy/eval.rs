//! Cedar evaluation of prepared policies: Cedar's own evaluator and Cedar's combining rule,
//! without rebuilding each policy's condition on every request.
//!
//! cedar-policy-core's authorizer asks every policy for its `condition()` — a new expression
//! joining the scope constraints and the `when`/`unless` clauses — each time it evaluates it.
//! A [`Prepared`] policy holds that expression, built once when a bundle or grant is loaded;
//! [`evaluate`] interprets it with cedar-policy-core's `Evaluator` and combines the results
//! exactly as the authorizer does: any satisfied `forbid` denies and determines; otherwise any
//! satisfied `permit` allows and determines; otherwise deny with nothing determining. A policy
//! that errors is skipped and reported.
//!
//! INVARIANT: [`evaluate`] returns what cedar-policy-core's `Authorizer::is_authorized`
//! returns for the same policies. Debug builds (every test) run both on every sliced decision
//! and panic on any difference ([`crate::policy::decide`]).

use cedar_policy::{Effect, Policy, PolicySet};
use cedar_policy_core::ast;
use cedar_policy_core::authorizer::{AuthorizationError, Decision};
use cedar_policy_core::evaluator::Evaluator;
use cedar_policy_core::extensions::Extensions;

use crate::policy::inputs::Inputs;

/// One Cedar evaluation: decision, determining policies (sorted), errors by policy (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evaluation {
    pub(crate) decision: Decision,
    pub(crate) reason: Vec<String>,
    pub(crate) errors: Vec<(String, String)>,
}

impl Default for Evaluation {
    /// No policies: Cedar denies with no reason.
    fn default() -> Self {
        Self {
            decision: Decision::Deny,
            reason: Vec::new(),
            errors: Vec::new(),
        }
    }
}

impl Evaluation {
    /// Cedar's combining rule over what each policy evaluated to.
    fn combine(
        satisfied: Vec<(String, bool)>,
        errors: Vec<(ast::PolicyID, cedar_policy_core::evaluator::EvaluationError)>,
    ) -> Self {
        let forbidden: Vec<String> = satisfied
            .iter()
            .filter(|(_, forbid)| *forbid)
            .map(|(id, _)| id.clone())
            .collect();
        let (decision, mut reason) = if forbidden.is_empty() {
            let permits: Vec<String> = satisfied.into_iter().map(|(id, _)| id).collect();
            let decision = if permits.is_empty() {
                Decision::Deny
            } else {
                Decision::Allow
            };
            (decision, permits)
        } else {
            (Decision::Deny, forbidden)
        };
        reason.sort();
        let mut errors: Vec<(String, String)> = errors
            .into_iter()
            .map(|(id, error)| error_line(AuthorizationError::PolicyEvaluationError { id, error }))
            .collect();
        errors.sort();
        Self {
            decision,
            reason,
            errors,
        }
    }
}

/// An authorization error as `(policy id, one line worded as cedar-policy words it)`.
pub(crate) fn error_line(error: AuthorizationError) -> (String, String) {
    let e = cedar_policy::authorization_errors::PolicyEvaluationError::from(error);
    let id = e.policy_id().to_string();
    let message = cedar_policy::AuthorizationError::from(e).to_string();
    (id, craik_contracts::one_line(&message))
}

/// A policy with its condition built once.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The `@id`, as `PolicyId::to_string` spells it.
    id: String,
    policy: ast::Policy,
    condition: ast::Expr,
    forbid: bool,
}

impl Prepared {
    /// `policy` for a set whose every request has an action its action scope covers (a slice
    /// for one capability holds only such policies, and a grant names exactly its capability):
    /// Cedar's condition with the action scope replaced by `true`, which is what it evaluates
    /// to for every such request.
    ///
    /// Built by the same recipe as Cedar's `TemplateBody::condition` (principal && (action &&
    /// (resource && body))), and checked against it: if the recipe with the real action scope
    /// does not rebuild Cedar's own condition exactly, Cedar's condition is used unchanged.
    pub(crate) fn for_known_action(policy: &Policy) -> Self {
        let policy: &ast::Policy = policy.as_ref();
        let cedar = policy.condition();
        let recipe = |action: ast::Expr| {
            let loc = policy.loc().cloned();
            let body = policy
                .non_scope_constraints()
                .cloned()
                .unwrap_or_else(|| ast::Expr::val(true));
            ast::Expr::and(
                policy.template().principal_constraint().as_expr(),
                ast::Expr::and(
                    action,
                    ast::Expr::and(policy.template().resource_constraint().as_expr(), body)
                        .with_maybe_source_loc(loc.clone()),
                )
                .with_maybe_source_loc(loc.clone()),
            )
            .with_maybe_source_loc(loc)
        };
        let condition = if recipe(policy.action_constraint().as_expr()) == cedar {
            recipe(ast::Expr::val(true))
        } else {
            cedar
        };
        Self {
            id: policy.id().to_string(),
            condition,
            forbid: policy.effect() == Effect::Forbid,
            policy: policy.clone(),
        }
    }
}

/// A set of policies, both as Cedar holds them and prepared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Slice {
    pub(crate) set: PolicySet,
    pub(crate) prepared: Vec<Prepared>,
}

impl Slice {
    /// `set` must hold only policies whose action scope covers every request evaluated
    /// against it ([`Prepared::for_known_action`]).
    pub(crate) fn for_known_action(set: PolicySet) -> Self {
        let prepared = set.policies().map(Prepared::for_known_action).collect();
        Self { set, prepared }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.prepared.is_empty()
    }
}

/// Evaluates `policies` (ids unique) against one request, as Cedar's authorizer would.
pub(crate) fn evaluate<'a>(
    policies: impl IntoIterator<Item = &'a Prepared>,
    inputs: &Inputs,
) -> Evaluation {
    let evaluator = Evaluator::new(
        inputs.request.clone(),
        &inputs.entities,
        Extensions::all_available(),
    );
    let mut satisfied = Vec::new();
    let mut errors = Vec::new();
    for p in policies {
        let outcome = match evaluator.interpret(&p.condition, p.policy.env()) {
            Ok(ast::Value {
                value: ast::ValueKind::Lit(ast::Literal::Bool(b)),
                ..
            }) => Ok(b),
            // Not a boolean (validation rules it out): let Cedar say so in its own words.
            Ok(_) => evaluator.evaluate(&p.policy),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(true) => satisfied.push((p.id.clone(), p.forbid)),
            Ok(false) => {}
            Err(e) => errors.push((p.policy.id().clone(), e)),
        }
    }
    Evaluation::combine(satisfied, errors)
}

/// The same evaluation by cedar-policy-core's authorizer (the reference [`evaluate`] is
/// checked against, and what Cedar-level tests use).
pub(crate) fn evaluate_with_authorizer(set: &PolicySet, inputs: &Inputs) -> Evaluation {
    let response = cedar_policy_core::authorizer::Authorizer::new().is_authorized(
        inputs.request.clone(),
        set.as_ref(),
        &inputs.entities,
    );
    let mut reason: Vec<String> = response
        .diagnostics
        .reason
        .iter()
        .map(ToString::to_string)
        .collect();
    reason.sort();
    let mut errors: Vec<(String, String)> = response
        .diagnostics
        .errors
        .into_iter()
        .map(error_line)
        .collect();
    errors.sort();
    Evaluation {
        decision: response.decision,
        reason,
        errors,
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use cedar_policy::PolicySet;
    use cedar_policy_core::ast::ActionConstraint;

    use super::Prepared;

    /// The recipe rebuilds Cedar's condition for every shipped policy, so each is specialized
    /// (a mismatch would fall back to Cedar's condition: still correct, but slower).
    #[test]
    fn every_shipped_policy_has_its_action_scope_specialized() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies");
        let mut seen = 0;
        for dir in ["base", "profiles", "approvals"] {
            for entry in std::fs::read_dir(format!("{root}/{dir}")).expect("policies dir") {
                let path = entry.expect("entry").path();
                let text = std::fs::read_to_string(&path).expect("policy file");
                let set = PolicySet::from_str(&text).expect("shipped policies parse");
                for policy in set.policies() {
                    let prepared = Prepared::for_known_action(policy);
                    let cedar = policy.as_ref().condition();
                    match policy.as_ref().action_constraint() {
                        // `action` alone: Cedar's condition already has `true` there.
                        ActionConstraint::Any => assert_eq!(prepared.condition, cedar),
                        _ => assert_ne!(prepared.condition, cedar, "{}", prepared.id),
                    }
                    seen += 1;
                }
            }
        }
        assert!(seen >= 20, "{seen} policies");
    }
}
