//! `policy validate --prove never-errors`: for every policy (decision policies, approval
//! rules, compiled grants) and every request environment, whether evaluation can error.
//! Cedar (and symcc) skip an erroring policy; Craik denies the request instead, so a policy
//! that can error turns requests into `deny / evaluation_error`. Each counterexample is
//! replayed through the kernel; a clean result is cross-checked on sampled requests.

use cedar_policy::Policy;
use cedar_policy_symcc::CompiledPolicy;
use craik_contracts::CapabilityGrant;
use craik_kernel::DenyKind;
use serde::Serialize;

use crate::classify::{Side, Status, envs};
use crate::replay::to_request;
use crate::solver::{SolverCheck, SolverConfig, canaries};
use crate::{ProveError, block_on, bounded, escape};

/// A policy that can error, with its counterexample.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyError {
    pub policy: String,
    pub action: String,
    pub status: Status,
    pub request: Option<craik_kernel::DecisionRequest>,
    pub verdict: Option<craik_kernel::Verdict>,
    pub model: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NeverErrorsReport {
    pub solver: SolverCheck,
    /// Policy × environment pairs proven.
    pub checked: usize,
    pub errors: Vec<PolicyError>,
    /// Requests decided by the kernel to cross-check a clean result (0 when a policy errors).
    pub sampled: usize,
}

impl NeverErrorsReport {
    pub fn confirmed(&self) -> usize {
        self.errors
            .iter()
            .filter(|e| e.status == Status::Confirmed)
            .count()
    }
}

/// Proves that no policy of `side` (with `grants`) errors on any request.
pub fn never_errors(
    side: Side<'_>,
    grants: &[CapabilityGrant],
    config: &SolverConfig,
) -> Result<NeverErrorsReport, ProveError> {
    let schema = side.schema()?;
    let cedar = side.cedar(grants)?;
    let policies: Vec<(&String, &Policy)> =
        cedar.decision.iter().chain(cedar.approval.iter()).collect();
    let (solver, checked, found) = block_on(|| async {
        let check = canaries(config, &schema).await?;
        let mut compiler = config.start()?;
        let mut checked = 0;
        let mut found = Vec::new();
        for env in envs(&schema) {
            let action = env.action().id().unescaped().to_owned();
            for (id, policy) in &policies {
                let guarded = crate::sets::within_env(policy, &env)?;
                let compiled = CompiledPolicy::compile(&guarded, &env, &schema)
                    .map_err(|e| ProveError::Compile(format!("{id} on {action}: {e}")))?;
                checked += 1;
                let cex = bounded(
                    config.per_query,
                    &format!("never-errors {id} on {action}"),
                    compiler.check_never_errors_with_counterexample_opt(&compiled),
                )
                .await?;
                if let Some(cex) = cex {
                    cedar_errors(&cex, &guarded, id, &action)?;
                    found.push(((*id).clone(), action.clone(), cex));
                }
            }
        }
        Ok::<_, ProveError>((check, checked, found))
    })?;
    let errors: Vec<PolicyError> = found
        .into_iter()
        .map(|(policy, action, cex)| replay_error(side, grants, policy, action, &cex))
        .collect();
    let sampled = if errors.is_empty() {
        crate::sample::never_errors_check(side.bundle, grants)?
    } else {
        0
    };
    Ok(NeverErrorsReport {
        solver,
        checked,
        errors,
        sampled,
    })
}

/// Cedar's own authorizer must see the error the solver claims, or nothing is reported.
fn cedar_errors(
    cex: &cedar_policy_symcc::Env,
    policy: &Policy,
    id: &str,
    action: &str,
) -> Result<(), ProveError> {
    let set = cedar_policy::PolicySet::from_policies([policy.clone()])
        .map_err(|e| ProveError::Internal(e.to_string()))?;
    let response = cedar_policy::Authorizer::new().is_authorized(&cex.request, &set, &cex.entities);
    if response.diagnostics().errors().next().is_none() {
        return Err(ProveError::Unsound(format!(
            "never-errors {} on {action}: the solver's counterexample does not error under Cedar's authorizer; the solver or its decoding is broken, nothing is reported",
            escape(id)
        )));
    }
    Ok(())
}

fn replay_error(
    side: Side<'_>,
    grants: &[CapabilityGrant],
    policy: String,
    action: String,
    cex: &cedar_policy_symcc::Env,
) -> PolicyError {
    let model = escape(&cex.to_string());
    let (status, request, verdict) = match to_request(cex) {
        Err(why) => (
            Status::Spurious(format!(
                "no request the kernel decides maps to this model: {why}"
            )),
            None,
            None,
        ),
        Ok(r) => match r.decide(side.bundle, grants) {
            Err(e) => (
                Status::Spurious(format!("replay refused: {e}")),
                Some(r.request),
                None,
            ),
            Ok(v) if v.deny_kind == Some(DenyKind::EvaluationError) => {
                (Status::Confirmed, Some(r.request), Some(v))
            }
            Ok(v) => (
                Status::Spurious(format!(
                    "the kernel decides it {} without an evaluation error",
                    crate::classify::word(v.decision)
                )),
                Some(r.request),
                Some(v),
            ),
        },
    };
    PolicyError {
        policy,
        action,
        status,
        request,
        verdict,
        model,
    }
}
