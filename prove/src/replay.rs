//! Replaying a solver's counterexample through Craik's own decision path: the `Env` symcc
//! returns becomes a `DecisionRequest`, which `Bundle::decide` (the sliced decision, with the
//! same grants) decides on each side. The solver sees only Cedar; the kernel also normalises
//! paths, derives attributes, analyses commands and computes the intent flags, so a model it
//! cannot reach is reported as spurious, never as a finding.

use cedar_policy::{Authorizer, EntityUid, EvalResult, PolicySet};
use cedar_policy_symcc::Env;
use craik_contracts::CapabilityGrant;
use craik_kernel::{
    Bundle, DecideOptions, DecisionRequest, GrantSet, ImmutablePaths, IntentScope, Mode, RunnerRef,
    Verdict,
};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// The workspace root replayed requests are decided under.
pub const WORKSPACE_ROOT: &str = "/workspace";

/// A counterexample as Craik would be asked it.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub request: DecisionRequest,
    pub now: OffsetDateTime,
    /// What the solver's model said the Cedar request was (one line, escaped).
    pub model: String,
}

impl Replayed {
    /// The verdict `bundle` gives this request with `grants`.
    pub fn decide(&self, bundle: &Bundle, grants: &[CapabilityGrant]) -> Result<Verdict, String> {
        let set = GrantSet::compile(bundle, grants).map_err(|e| format!("grants: {e}"))?;
        Ok(bundle.decide(&set, &self.request, &self.options()))
    }

    fn options(&self) -> DecideOptions {
        DecideOptions {
            now: self.now,
            workspace_root: WORKSPACE_ROOT.to_owned(),
            mode: Mode::Enforce,
            immutable: ImmutablePaths::default(),
        }
    }

    /// A grant that lets exactly this request's target through (for `for any grant`
    /// properties): the capability, the task, the exact path (or every target), the operation.
    pub fn synthetic_grant(&self) -> Option<CapabilityGrant> {
        // A repo grant names the exact path, a shell grant the exact command line (an argv
        // prefix), the others no target (they are scoped by capability and task alone).
        let paths = match self.request.capability.split('.').next() {
            Some("repo" | "shell") => vec![self.request.target.clone()?],
            _ => Vec::new(),
        };
        let expires = self.now.checked_add(time::Duration::days(1))?;
        let expires = expires
            .format(&time::format_description::well_known::Rfc3339)
            .ok()?;
        serde_json::from_value(json!({
            "schema": "craik.capability_grant",
            "version": "0.1.0",
            "id": "grant_prove_witness",
            "task_id": self.request.task_id,
            "capability": self.request.capability,
            "target": {"paths": paths, "exclude": []},
            "operations": [self.request.operation],
            "expires_at": expires,
            "reason": "synthesised by craik policy prove to replay a `for any grant` witness",
            "approved_by": "user:prove"
        }))
        .ok()
    }
}

/// A confirmed witness made readable: each edit (a plain clock, phase, task mode, runner,
/// iteration, target, no intent lock) is kept only when `keeps` (the replay) still confirms
/// the finding, so the request shown and emitted is one a reviewer recognises, and still a
/// counterexample.
pub(crate) fn simplify(mut r: Replayed, keeps: &dyn Fn(&Replayed) -> bool) -> Replayed {
    use craik_contracts::{Phase, RunnerMode, RunnerTrustLevel, TaskMode};
    let target = match r.request.capability.split('.').next() {
        Some("repo") => ["README.md", "docs/guide.md", "src/main.rs"],
        Some("shell") => ["cargo test", "ls docs", "make"],
        Some("memory") => ["team", "local", "team"],
        Some("net") => [
            "https://example.com/",
            "https://example.com/",
            "https://example.com/",
        ],
        _ => ["origin", "origin", "origin"],
    };
    type Edit = Box<dyn Fn(&mut Replayed)>;
    // Groups of alternatives: the first alternative the replay keeps wins its group.
    let mut groups: Vec<Vec<Edit>> = vec![
        vec![Box::new(|c| {
            c.now = time::macros::datetime!(2026-11-20 10:00 UTC);
        })],
        vec![Box::new(|c| c.request.phase = Phase::Act)],
        vec![Box::new(|c| c.request.task_mode = TaskMode::Implement)],
        vec![Box::new(|c| c.request.runner.mode = RunnerMode::Fixture)],
        vec![Box::new(|c| {
            c.request.runner.trust = RunnerTrustLevel::Medium
        })],
        vec![
            Box::new(|c| (c.request.iteration, c.request.max_iterations) = (0, 5)),
            Box::new(|c| (c.request.iteration, c.request.max_iterations) = (5, 5)),
        ],
        vec![Box::new(|c| c.request.intent = None)],
    ];
    groups.push(
        target
            .into_iter()
            .map(|t| -> Edit { Box::new(move |c| c.request.target = Some(t.to_owned())) })
            .collect(),
    );
    for group in &groups {
        for edit in group {
            let mut candidate = r.clone();
            edit(&mut candidate);
            if candidate.request == r.request && candidate.now == r.now {
                break; // already this alternative
            }
            if keeps(&candidate) {
                r = candidate;
                break;
            }
        }
    }
    r
}

/// Cedar's own authorizer on the model (a check of the solver and of symcc's decoding,
/// independent of both): `true` when `set` allows it.
pub(crate) fn cedar_allows(env: &Env, set: &PolicySet) -> bool {
    Authorizer::new()
        .is_authorized(&env.request, set, &env.entities)
        .decision()
        == cedar_policy::Decision::Allow
}

/// Maps a model to a request. `Err` says why the kernel could never be asked it.
pub fn to_request(env: &Env) -> Result<Replayed, String> {
    let request = &env.request;
    let model = crate::escape(&env.to_string());
    let action = request.action().ok_or("the model has no action")?;
    let capability = action.id().unescaped().to_owned();
    let principal = request.principal().ok_or("the model has no principal")?;
    let resource = request.resource().ok_or("the model has no resource")?;
    // An id the kernel would refuse is replaced by a valid one: policies and grants name
    // tasks, not runners, and the replay shows whether the verdict still differs.
    let runner_id = Some(principal.id().unescaped())
        .filter(|id| craik_contracts::id_problem(id).is_none())
        .unwrap_or("runner_prove")
        .to_owned();
    let task_id = task_of(env, principal)?;
    let runner = RunnerRef {
        id: runner_id,
        trust: word(attr(env, principal, "trust")?, "principal.trust")?,
        mode: word(attr(env, principal, "mode")?, "principal.mode")?,
    };
    let ctx = |key: &str| -> Result<EvalResult, String> {
        request
            .context()
            .and_then(|c| c.get(key))
            .ok_or_else(|| format!("the model's context has no `{key}`"))
    };
    let now = datetime(&ctx("now")?)?;
    let target = target_of(env, resource)?;
    let flag = |key: &str| -> Result<bool, String> {
        match ctx(key)? {
            EvalResult::Bool(b) => Ok(b),
            other => Err(format!("context.{key} is `{other}`, not a boolean")),
        }
    };
    let intent = intent_for(
        &capability,
        target.as_deref(),
        [
            flag("intent_out_of_scope")?,
            flag("intent_outside_scope")?,
            flag("intent_stop")?,
        ],
    );
    let request = DecisionRequest {
        runner,
        task_id,
        capability,
        target,
        argv: None,
        operation: string(&ctx("operation")?, "context.operation")?,
        profile: word(ctx("profile")?, "context.profile")?,
        phase: word(ctx("phase")?, "context.phase")?,
        iteration: long_u32(&ctx("iteration")?, "context.iteration")?,
        max_iterations: long_u32(&ctx("max_iterations")?, "context.max_iterations")?,
        task_mode: word(ctx("task_mode")?, "context.task_mode")?,
        intent,
        approvals: Vec::new(),
        payload: None,
        fail_open: false,
        envelope: None,
    };
    Ok(Replayed {
        request,
        now,
        model,
    })
}

/// The task the runner acts for: its one `Task` ancestor.
fn task_of(env: &Env, principal: &EntityUid) -> Result<String, String> {
    let tasks: Vec<String> = env
        .entities
        .ancestors(principal)
        .map(|it| {
            it.filter(|a| a.type_name().to_string() == "Craik::Task")
                .map(|a| a.id().unescaped().to_owned())
                .collect()
        })
        .unwrap_or_default();
    match tasks.as_slice() {
        [] => Ok("task_prove_unbound".to_owned()),
        [one] if craik_contracts::id_problem(one).is_none() => Ok(one.clone()),
        // No grant names an invalid task id: any valid id unbound to grants decides alike.
        [_] => Ok("task_prove_unbound".to_owned()),
        _ => Err("the runner is in several tasks; the kernel puts it in one".into()),
    }
}

/// The request's target, from the resource the model names.
fn target_of(env: &Env, resource: &EntityUid) -> Result<Option<String>, String> {
    let kind = resource.type_name().to_string();
    let s = |name: &str| -> Result<String, String> {
        string(&attr(env, resource, name)?, &format!("resource.{name}"))
    };
    Ok(Some(match kind.as_str() {
        "Craik::Path" => s("path")?,
        "Craik::Command" => s("line")?,
        "Craik::Memory" => s("scope")?,
        "Craik::Url" => format!("{}://{}/", s("scheme")?, s("host")?),
        "Craik::Repo" => resource.id().unescaped().to_owned(),
        other => {
            return Err(format!(
                "resource type `{other}` is never a request's resource"
            ));
        }
    }))
}

/// An intent lock under which the kernel computes exactly the model's three flags (when it
/// can: the replay decides whether it did).
fn intent_for(
    capability: &str,
    target: Option<&str>,
    [out, outside, stop]: [bool; 3],
) -> Option<IntentScope> {
    if !(out || outside || stop) {
        return None;
    }
    let mut scope = IntentScope::default();
    if let Some(path) = target.filter(|_| capability.starts_with("repo.")) {
        if out {
            scope.out_of_scope.push(path.to_owned());
        }
        if outside {
            let elsewhere = if path.starts_with("craik-prove-elsewhere") {
                "craik-prove-other"
            } else {
                "craik-prove-elsewhere"
            };
            scope.in_scope.push(elsewhere.to_owned());
        }
    }
    if stop {
        scope
            .stop_conditions
            .push(format!("capability:{capability}"));
    }
    Some(scope)
}

fn attr(env: &Env, uid: &EntityUid, name: &str) -> Result<EvalResult, String> {
    let entity = env.entities.get(uid).ok_or_else(|| {
        format!(
            "the model has no entity `{}`",
            crate::escape(&uid.to_string())
        )
    })?;
    match entity.attr(name) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(format!("`{name}`: {e}")),
        None => Err(format!("the model's `{}` has no `{name}`", uid.type_name())),
    }
}

fn string(v: &EvalResult, what: &str) -> Result<String, String> {
    match v {
        EvalResult::String(s) => Ok(s.clone()),
        other => Err(format!("{what} is `{other}`, not a string")),
    }
}

/// A string the kernel reads as one of its enums (`profile`, `trust`, ...).
fn word<T: serde::de::DeserializeOwned>(v: EvalResult, what: &str) -> Result<T, String> {
    let s = string(&v, what)?;
    serde_json::from_value(Value::String(s.clone())).map_err(|_| {
        format!(
            "{what} `{}` is not a value the kernel builds",
            crate::escape(&s)
        )
    })
}

fn long_u32(v: &EvalResult, what: &str) -> Result<u32, String> {
    match v {
        EvalResult::Long(n) => {
            u32::try_from(*n).map_err(|_| format!("{what} {n} is outside the kernel's u32"))
        }
        other => Err(format!("{what} is `{other}`, not a Long")),
    }
}

/// `offset(datetime("1970-01-01"), duration("<ms>ms"))`, Cedar's canonical datetime form.
fn datetime(v: &EvalResult) -> Result<OffsetDateTime, String> {
    let EvalResult::ExtensionValue(text) = v else {
        return Err(format!("context.now is `{v}`, not a datetime"));
    };
    let ms: i64 = text
        .split("duration(\"")
        .nth(1)
        .and_then(|rest| rest.split("ms\"").next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("context.now `{}`: unrecognised form", crate::escape(text)))?;
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .map_err(|_| format!("context.now {ms} ms is outside the kernel's clock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_decode_from_cedars_canonical_form() {
        let v = EvalResult::ExtensionValue(
            "offset(datetime(\"1970-01-01\"), duration(\"1795176000000ms\"))".into(),
        );
        let t = datetime(&v).unwrap();
        assert_eq!(t.unix_timestamp(), 1_795_176_000);
        assert!(datetime(&EvalResult::Bool(true)).is_err());
    }

    #[test]
    fn intent_flags_become_an_intent_lock() {
        assert_eq!(intent_for("repo.read", Some("a"), [false; 3]), None);
        let s = intent_for("repo.read", Some("a/b"), [true, true, true]).unwrap();
        assert_eq!(s.out_of_scope, vec!["a/b".to_owned()]);
        assert_eq!(s.in_scope, vec!["craik-prove-elsewhere".to_owned()]);
        assert_eq!(s.stop_conditions, vec!["capability:repo.read".to_owned()]);
        let s = intent_for("shell.test", Some("ls"), [false, false, true]).unwrap();
        assert!(s.out_of_scope.is_empty() && s.in_scope.is_empty());
    }
}
