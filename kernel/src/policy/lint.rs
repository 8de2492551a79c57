//! Lints over a loaded bundle: what loads and validates but is almost certainly a mistake.
//!
//! Owns: the lint rules and their findings, each naming a policy's file and line. Must not:
//! refuse a bundle (loading is `bundle.rs`'s job), or read a clock (callers pass `now`).

use cedar_policy::{ActionConstraint, Effect, Policy, PrincipalConstraint, ResourceConstraint};

use crate::policy::bundle::{Bundle, Located};

/// How bad a finding is: an error fails `craik policy validate` (exit 1), a warning is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fails validation.
    Error,
    /// Shown only.
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// The rule's name (`unconstrained-permit`, `expired-bound`).
    pub rule: &'static str,
    /// Error or warning.
    pub severity: Severity,
    /// The policy's `@id`.
    pub policy: String,
    /// Where, and what is wrong (one line).
    pub at: Located,
}

impl Bundle {
    /// Every lint finding, in file order. `now` (seconds since the Unix epoch) is the clock the
    /// time-bound lint compares against.
    pub fn lints(&self, now: i64) -> Vec<Lint> {
        let mut out = Vec::new();
        for policy in &self.all {
            let id = policy.id().to_string();
            let Some(info) = self.info.get(&id) else {
                continue;
            };
            let at = |message: String| Located {
                file: info.file.clone(),
                line: info.line,
                column: 1,
                message,
            };
            if !info.approval && unconstrained_permit(policy) {
                out.push(Lint {
                    rule: "unconstrained-permit",
                    severity: Severity::Error,
                    policy: id.clone(),
                    at: at(format!(
                        "`{id}` permits every principal, action and resource with no condition: only a forbid can stop anything it lets through; name an action (`action == Craik::Action::\"repo.read\"`) or add a `when` condition"
                    )),
                });
            }
            for (bound, text) in crate::policy::bundle::upper_time_bounds(policy) {
                if bound <= now.saturating_mul(1000) {
                    out.push(Lint {
                        rule: "expired-bound",
                        severity: Severity::Warning,
                        policy: id.clone(),
                        at: at(format!(
                            "`{id}` holds only while `context.now` is before {text}, which has passed: the policy can never match again; remove it or move the bound"
                        )),
                    });
                }
            }
        }
        out.sort_by(|a, b| (&a.at.file, a.at.line).cmp(&(&b.at.file, b.at.line)));
        out
    }
}

/// `permit (principal, action, resource);` with no condition (or only `when { true }`).
fn unconstrained_permit(policy: &Policy) -> bool {
    if policy.effect() != Effect::Permit
        || policy.principal_constraint() != PrincipalConstraint::Any
        || policy.action_constraint() != ActionConstraint::Any
        || policy.resource_constraint() != ResourceConstraint::Any
    {
        return false;
    }
    let Ok(est) = policy.to_json() else {
        return false;
    };
    est.get("conditions")
        .and_then(|c| c.as_array())
        .is_none_or(|conditions| {
            conditions.iter().all(|c| {
                c.get("kind").and_then(|k| k.as_str()) == Some("when")
                    && c.get("body")
                        .and_then(|b| b.get("Value"))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true)
            })
        })
}
