//! The decision: one step request against the bundle, the task's grants, the intent lock and
//! the iteration ceiling, in one call.
//!
//! INVARIANT: every path out of [`Bundle::decide`] that is not a clean Cedar `Allow` (with no
//! evaluation error, or an error let through by an honoured fail-open) is a `Deny` or a
//! `RequiresApproval`. Unknown capabilities, unsafe targets, evaluation errors and entity or
//! request construction failures all deny.

use std::collections::HashMap;

use cedar_policy::{Decision as CedarDecision, PolicySet};
use craik_contracts::{PolicyProfile, Timestamp, Truncated};
use globset::GlobBuilder;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::path::TargetPath;
use crate::policy::bundle::{Bundle, SliceKey, hex};
use crate::policy::command::{analyse, argument_paths, check_argument_paths, split};
use crate::policy::effect::{Effect, operations_of};
use crate::policy::eval::{self, Evaluation, Slice};
use crate::policy::grant::{CompiledGrant, GrantSet, PathPattern};
use crate::policy::inputs::{Attr, EntitySpec, Inputs, Kind, Spec};
use crate::policy::request::{
    Approval, Decision, DecisionRequest, DenyKind, EnvelopeRules, IntentScope, Mode, Verdict,
};

/// What the caller supplies besides the request: the clock, the workspace, the mode.
#[derive(Debug, Clone)]
pub struct DecideOptions {
    /// Now, as the caller's clock says (the kernel has none).
    pub now: OffsetDateTime,
    /// Absolute workspace root, `/`-separated.
    pub workspace_root: String,
    /// Enforce, or shadow.
    pub mode: Mode,
    /// The project's immutable paths (`resource.protected == "immutable"`).
    pub immutable: crate::path::ImmutablePaths,
}

/// The resource as the kernel understood it.
struct Resource {
    entity: EntitySpec<'static>,
    /// Canonical spelling for the request hash.
    canonical: Value,
    path: Option<TargetPath>,
    /// Why a command is unvetted (its first argument off its program's allow-list): shown
    /// beside the policy reasons whenever the verdict went through the approval step.
    unvetted: Option<String>,
}

/// The canonical hash of a request: what an approval binds to. Covers runner, task,
/// capability, operation, profile and the *normalised* target, so an approval for one action
/// never covers another spelling of a different one.
pub fn request_hash(
    bundle: &Bundle,
    request: &DecisionRequest,
    workspace_root: &str,
) -> Result<String, String> {
    let resource = build_resource(
        bundle,
        request,
        workspace_root,
        &[],
        &crate::path::ImmutablePaths::default(),
    )?;
    Ok(hash_of(request, &resource.canonical))
}

fn hash_of(request: &DecisionRequest, target: &Value) -> String {
    // Canonical JSON with keys in sorted order, written directly into one buffer. `payload`
    // is present only when the action carries one, so hashes of payload-free requests are
    // unchanged.
    fn field<T: serde::Serialize + ?Sized>(text: &mut Vec<u8>, key: &str, value: &T) {
        text.push(if text.is_empty() { b'{' } else { b',' });
        text.push(b'"');
        text.extend_from_slice(key.as_bytes());
        text.extend_from_slice(b"\":");
        // Writing a string or a JSON value into a Vec cannot fail.
        let _ = serde_json::to_writer(text, value);
    }
    let mut text: Vec<u8> = Vec::with_capacity(256);
    field(&mut text, "capability", request.capability.as_str());
    field(&mut text, "operation", request.operation.as_str());
    if let Some(payload) = request.payload.as_deref() {
        field(&mut text, "payload", payload);
    }
    field(&mut text, "profile", request.profile.as_str());
    field(&mut text, "runner", request.runner.id.as_str());
    field(&mut text, "target", target);
    field(&mut text, "task_id", request.task_id.as_str());
    text.push(b'}');
    format!("sha256:{}", hex(&Sha256::digest(&text)))
}

/// Every policy and every grant in one Cedar set: the naive baseline the benchmarks compare
/// the sliced decision against. Verdicts are identical (a law the tests check); only the cost
/// differs.
#[derive(Debug)]
pub struct NaivePolicies {
    decision: PolicySet,
    approvals: PolicySet,
}

/// Evaluates a slice plus grants by prepared conditions; debug builds (every test) check the
/// result against cedar-policy-core's authorizer over the same policies.
fn evaluate_sliced(slice: Option<&Slice>, grants: &[CompiledGrant], inputs: &Inputs) -> Evaluation {
    let prepared = slice
        .map(|s| s.prepared.as_slice())
        .unwrap_or_default()
        .iter()
        .chain(grants.iter().map(|g| &g.prepared));
    let outcome = eval::evaluate(prepared, inputs);
    if cfg!(debug_assertions) {
        let mut set = slice.map(|s| s.set.clone()).unwrap_or_default();
        for grant in grants {
            // Grant ids are unique and carry a reserved prefix.
            let _ = set.add(grant.policy.clone());
        }
        assert_eq!(
            outcome,
            eval::evaluate_with_authorizer(&set, inputs),
            "prepared evaluation differs from Cedar's authorizer"
        );
    }
    outcome
}

/// Which policies a decision evaluates.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The slice for the request's capability plus the task's grants for it.
    Sliced,
    /// Everything, prebuilt.
    Naive(&'a NaivePolicies),
}

impl Bundle {
    /// A deny the kernel decides on its own (invalid request, invalid grant), with the
    /// pseudo-policy `determining` naming why.
    pub fn refusal(&self, mode: Mode, determining: &str, reason: String) -> Verdict {
        Verdict {
            decision: Decision::Deny,
            deny_kind: Some(DenyKind::InvalidRequest),
            determining: vec![determining.to_owned()],
            reasons: vec![reason],
            grants: Vec::new(),
            permitted_by: Vec::new(),
            grant_notes: Vec::new(),
            approval: None,
            errors: Vec::new(),
            policy_exception: false,
            mode,
            request_hash: String::new(),
            policy_set: self.hash().to_owned(),
        }
    }

    /// Builds the naive baseline: every decision policy and every compiled grant in one set.
    pub fn naive(&self, grants: &GrantSet) -> NaivePolicies {
        let mut decision = self.decision_all.clone();
        for grant in grants.all() {
            let _ = decision.add(grant.policy.clone());
        }
        let mut approvals = PolicySet::new();
        for slice in self.approval_slices.values().flat_map(HashMap::values) {
            for policy in slice.set.policies() {
                let _ = approvals.add(policy.clone());
            }
        }
        NaivePolicies {
            decision,
            approvals,
        }
    }

    /// Decides one request. Never fails: every problem is a denying verdict.
    ///
    /// Cost does not grow with unrelated grants or policies: only the policies whose action
    /// scope covers the capability, and the task's grants for that capability, are evaluated.
    pub fn decide(
        &self,
        grants: &GrantSet,
        request: &DecisionRequest,
        options: &DecideOptions,
    ) -> Verdict {
        let verdict = self.decide_from(Source::Sliced, grants, request, options, None);
        self.apply_envelope(verdict, request, options.now)
    }

    /// [`Bundle::decide`], and for each permit that could apply (the slice's and the task's
    /// grants for the capability) whether it matched and, if not, why
    /// (`craik policy explain --trace`). Empty when the request was refused before Cedar.
    pub fn decide_traced(
        &self,
        grants: &GrantSet,
        request: &DecisionRequest,
        options: &DecideOptions,
    ) -> (Verdict, Vec<crate::policy::trace::PermitTrace>) {
        let mut trace = Vec::new();
        let verdict = self.decide_from(Source::Sliced, grants, request, options, Some(&mut trace));
        (self.apply_envelope(verdict, request, options.now), trace)
    }

    /// The same decision evaluated against [`NaivePolicies`] (for benchmarks and tests).
    pub fn decide_naive(
        &self,
        naive: &NaivePolicies,
        grants: &GrantSet,
        request: &DecisionRequest,
        options: &DecideOptions,
    ) -> Verdict {
        let verdict = self.decide_from(Source::Naive(naive), grants, request, options, None);
        self.apply_envelope(verdict, request, options.now)
    }

    fn decide_from(
        &self,
        source: Source<'_>,
        grants: &GrantSet,
        request: &DecisionRequest,
        options: &DecideOptions,
        trace: Option<&mut Vec<crate::policy::trace::PermitTrace>>,
    ) -> Verdict {
        let mut verdict = self.refusal(options.mode, "kernel.invalid-request", String::new());
        verdict.reasons.clear();
        let invalid = |mut verdict: Verdict, why: String| {
            verdict.determining = vec!["kernel.invalid-request".into()];
            verdict.reasons = vec![why];
            verdict
        };

        if !self.knows(&request.capability) {
            return invalid(
                verdict,
                format!("unknown capability `{}`", Truncated(&request.capability)),
            );
        }
        for (field, value) in [
            ("runner.id", &request.runner.id),
            ("task_id", &request.task_id),
        ] {
            if let Some(why) = craik_contracts::id_problem(value) {
                return invalid(
                    verdict,
                    format!("invalid {field} `{}`: {why}", Truncated(value)),
                );
            }
        }
        if request.operation.is_empty()
            || !request
                .operation
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return invalid(
                verdict,
                format!("invalid operation `{}`", Truncated(&request.operation)),
            );
        }
        if Effect::of(&request.capability, &request.operation).is_none() {
            return invalid(
                verdict,
                format!(
                    "operation `{}` does not belong to capability `{}` (it admits {})",
                    Truncated(&request.operation),
                    request.capability,
                    operations_of(&request.capability)
                        .map(|ops| format!("`{}`", ops.join("`, `")))
                        .unwrap_or_else(|| "no operation".into())
                ),
            );
        }
        let candidates = grants.for_request(&request.task_id, &request.capability);
        let Resource {
            entity,
            canonical,
            path,
            unvetted,
        } = match build_resource(
            self,
            request,
            &options.workspace_root,
            candidates,
            &options.immutable,
        ) {
            Ok(resource) => resource,
            Err(why) => return invalid(verdict, why),
        };
        verdict.request_hash = hash_of(request, &canonical);

        let (out_of_scope, outside_scope, stop) =
            intent_facts(self, request, path.as_ref(), &options.workspace_root);
        // Bit order of `INTENT_FLAGS`.
        let facts = u8::from(out_of_scope) | (u8::from(outside_scope) << 1) | (u8::from(stop) << 2);
        let spec = Spec {
            principal: EntitySpec {
                kind: Kind::Runner,
                id: request.runner.id.as_str().into(),
                attrs: vec![
                    ("trust", Attr::Str(request.runner.trust.as_str().into())),
                    ("mode", Attr::Str(request.runner.mode.as_str().into())),
                ],
                // The task needs no entity of its own: the runner's ancestor set names it.
                ancestors: vec![(Kind::Task, request.task_id.as_str().into())],
            },
            action: &request.capability,
            resource: entity,
            context: vec![
                ("profile", Attr::Str(request.profile.as_str().into())),
                ("phase", Attr::Str(request.phase.as_str().into())),
                ("iteration", Attr::Long(i64::from(request.iteration))),
                (
                    "max_iterations",
                    Attr::Long(i64::from(request.max_iterations)),
                ),
                ("operation", Attr::Str(request.operation.as_str().into())),
                ("now", Attr::Datetime(cedar_datetime(options.now))),
                ("task_mode", Attr::Str(request.task_mode.as_str().into())),
                ("intent_out_of_scope", Attr::Bool(out_of_scope)),
                ("intent_outside_scope", Attr::Bool(outside_scope)),
                ("intent_stop", Attr::Bool(stop)),
            ],
        };
        // The store holds only this capability's action and its families.
        let built = match self.action_stores.get(&request.capability) {
            None => Err("no action entity".to_owned()),
            // The naive baseline takes the public API's construction, so the law tests
            // (sliced == naive) compare the two constructions too.
            Some(store) => match source {
                Source::Sliced => spec.build(&self.types, store, &self.schema),
                Source::Naive(_) => spec.build_public(&self.types, store, &self.schema),
            },
        };
        let inputs = match built {
            Ok(inputs) => inputs,
            Err(e) => {
                return invalid(
                    verdict,
                    format!(
                        "request does not fit the schema: {}",
                        craik_contracts::one_line(&e)
                    ),
                );
            }
        };

        let slice = self
            .decision_slices
            .get(&SliceKey {
                profile: request.profile,
                facts,
            })
            .and_then(|m| m.get(&request.capability));
        if let Some(trace) = trace {
            *trace = crate::policy::trace::trace(
                slice
                    .into_iter()
                    .flat_map(|s| s.set.policies())
                    .chain(candidates.iter().map(|g| &g.policy)),
                &inputs,
            );
        }
        let outcome = match source {
            // One evaluation over exactly the policies that can apply: the slice for this
            // capability, profile and intent facts, plus the task's grants for the capability.
            Source::Sliced => evaluate_sliced(slice, candidates, &inputs),
            Source::Naive(naive) => eval::evaluate_with_authorizer(&naive.decision, &inputs),
        };
        let errors = outcome.errors;
        let fail_open = request.fail_open && request.profile == PolicyProfile::TrustedLocal;
        if !errors.is_empty() {
            verdict.errors = errors.iter().map(|(_, m)| m.clone()).collect();
            if !fail_open {
                verdict.deny_kind = Some(DenyKind::EvaluationError);
                let mut ids: Vec<String> = errors.iter().map(|(id, _)| id.clone()).collect();
                ids.sort();
                ids.dedup();
                self.explain(&mut verdict, ids);
                return verdict;
            }
            verdict.policy_exception = true;
        }
        let reason = outcome.reason;
        match outcome.decision {
            CedarDecision::Deny => {
                if reason.is_empty() {
                    verdict.deny_kind = Some(DenyKind::NotPermitted);
                    verdict.determining = Vec::new();
                    verdict.reasons = vec![format!(
                        "not permitted: no policy or grant allows `{}` on `{}`",
                        request.capability,
                        target_display(&canonical)
                    )];
                    verdict.grant_notes = grant_notes(grants, request, path.as_ref(), options.now);
                } else {
                    verdict.deny_kind = Some(DenyKind::ForbiddenBy);
                    self.explain(&mut verdict, reason);
                }
                verdict
            }
            CedarDecision::Allow => {
                verdict.grants = reason
                    .iter()
                    .filter_map(|id| {
                        id.strip_prefix(crate::policy::bundle::GRANT_ID_PREFIX)
                            .map(str::to_owned)
                    })
                    .collect();
                let mut verdict = self.approval_step(
                    source,
                    verdict,
                    request,
                    (&inputs, facts),
                    options.now,
                    reason,
                );
                // The approver (or, in automation, the operator reading the denial) sees which
                // argument was not on the allow-list, not only the policy's class.
                let approval_step = verdict.decision == Decision::RequiresApproval
                    || verdict.deny_kind == Some(DenyKind::ApprovalUnavailable)
                    || verdict.approval.is_some();
                grant_reasons(&mut verdict, candidates);
                if let Some(why) = unvetted.filter(|_| approval_step) {
                    verdict.reasons.push(why);
                }
                verdict
            }
        }
    }

    fn approval_step(
        &self,
        source: Source<'_>,
        mut verdict: Verdict,
        request: &DecisionRequest,
        (inputs, facts): (&Inputs, u8),
        now: OffsetDateTime,
        allow_reason: Vec<String>,
    ) -> Verdict {
        let response = match source {
            Source::Sliced => {
                let rules = self
                    .approval_slices
                    .get(&SliceKey {
                        profile: request.profile,
                        facts,
                    })
                    .and_then(|m| m.get(&request.capability))
                    .filter(|rules| !rules.is_empty());
                match rules {
                    Some(rules) => evaluate_sliced(Some(rules), &[], inputs),
                    None => Evaluation::default(),
                }
            }
            Source::Naive(naive) => eval::evaluate_with_authorizer(&naive.approvals, inputs),
        };
        if !response.errors.is_empty() {
            let mut ids: Vec<String> = response.errors.iter().map(|(id, _)| id.clone()).collect();
            verdict
                .errors
                .extend(response.errors.into_iter().map(|(_, message)| message));
            verdict.deny_kind = Some(DenyKind::EvaluationError);
            ids.sort();
            self.explain(&mut verdict, ids);
            return verdict;
        }
        let rule_ids = response.reason;
        if response.decision == CedarDecision::Deny || rule_ids.is_empty() {
            verdict.decision = Decision::Allow;
            verdict.deny_kind = None;
            self.explain(&mut verdict, allow_reason);
            return verdict;
        }
        verdict.permitted_by = allow_reason.clone();
        if request.profile == PolicyProfile::Automation {
            verdict.decision = Decision::Deny;
            verdict.deny_kind = Some(DenyKind::ApprovalUnavailable);
            self.explain(&mut verdict, rule_ids);
            verdict.reasons.push(
                "automation: no approval is possible, so approval-required means deny".into(),
            );
            return verdict;
        }
        match find_approval(&request.approvals, request, &verdict.request_hash, now) {
            Some(approval) => {
                verdict.decision = Decision::Allow;
                verdict.deny_kind = None;
                verdict.approval = Some(approval.id.clone());
                let mut ids = allow_reason;
                ids.extend(rule_ids);
                ids.sort();
                self.explain(&mut verdict, ids);
                verdict.reasons.push(format!(
                    "approved by {} ({})",
                    approval.approved_by, approval.id
                ));
            }
            None => {
                verdict.decision = Decision::RequiresApproval;
                verdict.deny_kind = None;
                self.explain(&mut verdict, rule_ids);
            }
        }
        verdict
    }

    fn explain(&self, verdict: &mut Verdict, ids: Vec<String>) {
        verdict.reasons = ids
            .iter()
            .map(|id| match self.policy(id) {
                Some(info) => info
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("{id} (no @reason)")),
                None => id.clone(),
            })
            .collect();
        verdict.determining = ids;
    }
}

/// A compiled grant's reason is its grant's (`grant `grant_docs_write` approved by
/// user:maintainer: Documentation reconciliation.`), not its policy id.
fn grant_reasons(verdict: &mut Verdict, candidates: &[CompiledGrant]) {
    for (id, reason) in verdict.determining.iter().zip(verdict.reasons.iter_mut()) {
        let Some(grant_id) = id.strip_prefix(crate::policy::bundle::GRANT_ID_PREFIX) else {
            continue;
        };
        if let Some(g) = candidates.iter().find(|g| g.id == grant_id) {
            *reason = craik_contracts::one_line(&format!(
                "grant `{grant_id}` approved by {}: {}",
                g.grant.approved_by, g.grant.reason
            ));
        }
    }
}

/// The first approval that binds to exactly this request and is still usable.
fn find_approval<'a>(
    approvals: &'a [Approval],
    request: &DecisionRequest,
    hash: &str,
    now: OffsetDateTime,
) -> Option<&'a Approval> {
    approvals.iter().find(|a| {
        a.request_hash == hash
            && !a.used
            && a.profile == request.profile
            && a.task_id == request.task_id
            && a.approved_by.starts_with("user:")
            && a.approved_by.len() > "user:".len()
            && a.approved_by != request.runner.id
            && a.expires_at.is_none_or(|t: Timestamp| now < t.get())
    })
}

fn target_display(canonical: &Value) -> String {
    match canonical {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn family(bundle: &Bundle, capability: &str) -> String {
    bundle
        .families_of(capability)
        .first()
        .cloned()
        .unwrap_or_default()
}

/// An entity with no ancestors.
fn leaf(kind: Kind, id: &str, attrs: Vec<(&'static str, Attr<'static>)>) -> EntitySpec<'static> {
    EntitySpec {
        kind,
        id: id.to_owned().into(),
        attrs,
        ancestors: Vec::new(),
    }
}

/// A Cedar `datetime` literal for an instant, in UTC to the millisecond
/// (`2026-11-20T10:00:00.000Z`). A year Cedar cannot write gives an empty literal, which fails
/// to build the request (a deny).
pub(crate) fn cedar_datetime(at: time::OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    if !(0..=9999).contains(&at.year()) {
        return String::new();
    }
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// Every directory a command's path arguments name or lie in: for `cat src/a/b.rs`, `.`,
/// `src`, `src/a` and `src/a/b.rs` (an argument may name a directory), so
/// `resource.dirs.contains(Craik::Dir::"src")` holds for anything under `src`.
fn dirs_of(paths: &[String]) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    if !paths.is_empty() {
        dirs.insert(".".to_owned());
    }
    for path in paths {
        for (at, _) in path.match_indices('/') {
            dirs.insert(path.get(..at).unwrap_or_default().to_owned());
        }
        dirs.insert(path.clone());
    }
    dirs.into_iter().collect()
}

fn build_resource(
    bundle: &Bundle,
    request: &DecisionRequest,
    root: &str,
    grants: &[CompiledGrant],
    immutable: &crate::path::ImmutablePaths,
) -> Result<Resource, String> {
    let target = request.target.as_deref();
    match family(bundle, &request.capability).as_str() {
        "repo" => {
            let raw = target.ok_or("repo capabilities need a `target` path")?;
            let path = TargetPath::normalize(root, raw)
                .map_err(|e| format!("target `{}` refused: {e}", Truncated(raw)))?;
            let named = grants
                .iter()
                .any(|g| g.exact_paths.iter().any(|p| p == path.as_str()));
            // Immutable whatever a grant names; other protected areas only a grant naming
            // the exact path reaches.
            let protected = if immutable.covers(path.as_str()) {
                crate::path::Protected::Immutable.name()
            } else if named {
                ""
            } else {
                path.protected().map_or("", |p| p.name())
            };
            let text = path.as_str();
            let name = text.rsplit('/').next().unwrap_or(text);
            // The path is `in` every directory above it, listed directly (".", then "a",
            // "a/b", ... — the prefixes before each `/` of the normalised path): the ancestor
            // set is closed, so no Dir entities need to exist for
            // `resource in Craik::Dir::"docs"` to hold.
            let ancestors = std::iter::once(".")
                .chain(text.match_indices('/').map(|(at, _)| &text[..at]))
                .map(|dir| (Kind::Dir, dir.to_owned().into()))
                .collect();
            Ok(Resource {
                entity: EntitySpec {
                    kind: Kind::Path,
                    id: text.to_owned().into(),
                    attrs: vec![
                        ("path", Attr::Str(text.to_owned().into())),
                        ("fold", Attr::Str(text.to_ascii_lowercase().into())),
                        ("name", Attr::Str(name.to_owned().into())),
                        ("fold_name", Attr::Str(name.to_ascii_lowercase().into())),
                        ("protected", Attr::Str(protected.to_owned().into())),
                    ],
                    ancestors,
                },
                canonical: json!(text),
                path: Some(path),
                unvetted: None,
            })
        }
        "shell" => {
            let argv = match (&request.argv, target) {
                // One command, named once: a `target` beside argv that says something else
                // would show one command and run another.
                (Some(argv), Some(line)) if *line != argv.join(" ") => {
                    return Err(format!(
                        "target `{}` disagrees with argv `{}`; name a command once, as argv",
                        Truncated(line),
                        Truncated(&argv.join(" "))
                    ));
                }
                (Some(argv), _) => argv.clone(),
                (None, Some(line)) => split(line),
                (None, None) => {
                    return Err("shell capabilities need `argv` or a `target` command line".into());
                }
            };
            let facts = analyse(&argv).map_err(|e| format!("command refused: {e}"))?;
            let paths = argument_paths(&argv, root);
            let dirs = dirs_of(&paths);
            if !facts.shell && !facts.wrapper {
                // (Shell syntax and wrappers are forbidden by policy whatever they name. An
                // unvetted command may still run once approved, so its paths are checked.)
                check_argument_paths(&argv, root).map_err(|e| format!("command refused: {e}"))?;
            }
            Ok(Resource {
                entity: leaf(
                    Kind::Command,
                    &facts.line,
                    vec![
                        ("program", Attr::Str(facts.program.into())),
                        ("line", Attr::Str(facts.line.clone().into())),
                        ("shell", Attr::Bool(facts.shell)),
                        ("wrapper", Attr::Bool(facts.wrapper)),
                        ("unvetted", Attr::Bool(facts.unvetted)),
                        ("paths", Attr::Uids(Kind::Path, paths)),
                        ("dirs", Attr::Uids(Kind::Dir, dirs)),
                    ],
                ),
                canonical: json!(argv),
                path: None,
                unvetted: facts.unvetted_because,
            })
        }
        "memory" => {
            let scope = target.unwrap_or("team");
            Ok(Resource {
                entity: leaf(
                    Kind::Memory,
                    scope,
                    vec![("scope", Attr::Str(scope.to_owned().into()))],
                ),
                canonical: json!(scope),
                path: None,
                unvetted: None,
            })
        }
        "net" => {
            let url = target.ok_or("net capabilities need a `target` URL")?;
            let (scheme, rest) = url
                .split_once("://")
                .ok_or_else(|| format!("target `{}` is not a URL", Truncated(url)))?;
            let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let host = host.rsplit('@').next().unwrap_or(host).to_ascii_lowercase();
            if scheme.is_empty() || host.is_empty() || url.chars().any(char::is_control) {
                return Err(format!("target `{}` is not a URL", Truncated(url)));
            }
            Ok(Resource {
                entity: leaf(
                    Kind::Url,
                    url,
                    vec![
                        ("scheme", Attr::Str(scheme.to_ascii_lowercase().into())),
                        ("host", Attr::Str(host.into())),
                    ],
                ),
                canonical: json!(url),
                path: None,
                unvetted: None,
            })
        }
        "git" | "github" => {
            let repo = target.unwrap_or("origin");
            Ok(Resource {
                entity: leaf(Kind::Repo, repo, Vec::new()),
                canonical: json!(repo),
                path: None,
                unvetted: None,
            })
        }
        other => Err(format!(
            "capability `{}` is in no known family (`{other}`)",
            request.capability
        )),
    }
}

/// What is wrong with an intent-lock scope entry (or a `path:` stop condition's path), if
/// anything. An entry is a workspace-relative path prefix (`src`, `Makefile`, `docs/adr/`) or
/// prose (words separated by spaces, kept for the record, checked by nothing). Refused: what
/// would look like a path and protect nothing — leading or trailing whitespace, a
/// backslash, a control character, an absolute path, `..`, a glob, a character outside ASCII,
/// percent-encoding, a stop condition's `path:`/`capability:` form, prose naming a path
/// (outside testing rounds 6–8: each of `/src/vendor/`, ` src/vendor/`, `../src/vendor/`,
/// `src\vendor/`, `ｓrc/vendor/`, `src%2Fvendor/`, `path:src/vendor/`,
/// `src/vendor/ (third party)` let commands write there). Paths with other characters cannot
/// be named in an intent lock.
pub fn intent_entry_problem(entry: &str) -> Option<&'static str> {
    if entry.is_empty() {
        return Some("empty");
    }
    if entry.chars().any(char::is_control) {
        return Some("a control character");
    }
    if entry.trim() != entry {
        return Some("leading or trailing whitespace (a path has none)");
    }
    if entry.contains('\\') {
        return Some("a backslash (paths are `/`-separated, relative to the workspace root)");
    }
    if ["path:", "capability:"]
        .iter()
        .any(|p| entry.starts_with(p))
    {
        return Some("a stop condition's form; a scope entry is a path (`src/vendor/`) or prose");
    }
    if entry.chars().any(char::is_whitespace) {
        // Prose protects nothing: one that names a path would look like protection.
        return entry
            .contains('/')
            .then_some("prose naming a path protects nothing; write the path alone");
    }
    if entry.contains(['*', '?', '[', ']', '{', '}']) {
        return Some("a path prefix, not a glob (`docs/` covers everything under docs)");
    }
    if !entry.is_ascii() {
        return Some(
            "a path in ASCII characters (a look-alike of `/` or of a letter names another path, which protects nothing)",
        );
    }
    if entry.contains('%') {
        return Some("percent-encoding (a path is written as it is)");
    }
    if entry.starts_with('/') {
        return Some("a path relative to the workspace root, not an absolute one");
    }
    if entry.split('/').any(|part| part == "..") {
        return Some("a path inside the workspace (no `..`)");
    }
    if TargetPath::normalize("/workspace", entry.trim_end_matches('/')).is_err() {
        return Some("not a workspace path");
    }
    None
}

/// A scope entry that names a path, normalised; `Some(None)` when it is not a valid entry
/// ([`intent_entry_problem`]: refused at load; should one still arrive, an out-of-scope one
/// puts every path out of scope). Prose entries (with inner whitespace) give `None`.
fn scope_entry(entry: &str, root: &str) -> Option<Option<TargetPath>> {
    if intent_entry_problem(entry).is_some() {
        return Some(None);
    }
    if entry.chars().any(char::is_whitespace) {
        return None;
    }
    Some(TargetPath::normalize(root, entry.trim_end_matches('/')).ok())
}

fn scope_path(entry: &str, root: &str) -> Option<TargetPath> {
    scope_entry(entry, root).flatten()
}

fn folded(path: &TargetPath, root: &str) -> Option<TargetPath> {
    TargetPath::normalize(root, &path.as_str().to_ascii_lowercase()).ok()
}

fn intent_facts(
    bundle: &Bundle,
    request: &DecisionRequest,
    path: Option<&TargetPath>,
    root: &str,
) -> (bool, bool, bool) {
    let Some(IntentScope {
        in_scope,
        out_of_scope,
        stop_conditions,
    }) = &request.intent
    else {
        return (false, false, false);
    };
    let under_folded =
        |p: &TargetPath, scope: &TargetPath| match (folded(p, root), folded(scope, root)) {
            (Some(a), Some(b)) => a.is_under(&b),
            _ => true,
        };
    // Fail closed: an out-of-scope entry that names no normalisable path (`..`, `/etc`)
    // puts every path out of scope rather than none.
    let out = path.is_some_and(|p| {
        out_of_scope
            .iter()
            .filter_map(|e| scope_entry(e, root))
            .any(|s| s.is_none_or(|s| under_folded(p, &s)))
    });
    let scopes: Vec<TargetPath> = in_scope
        .iter()
        .filter_map(|e| scope_path(e, root))
        .collect();
    let outside = match path {
        Some(p) if !scopes.is_empty() => !scopes.iter().any(|s| p.is_under(s)),
        _ => false,
    };
    let families = bundle.families_of(&request.capability);
    let stop = stop_conditions.iter().any(|condition| {
        if let Some(cap) = condition.strip_prefix("capability:") {
            cap == request.capability || families.iter().any(|f| f == cap)
        } else if let Some(prefix) = condition.strip_prefix("path:").map(str::trim_start) {
            match (
                path,
                scope_path(prefix, root).or_else(|| TargetPath::normalize(root, prefix).ok()),
            ) {
                (Some(p), Some(s)) => under_folded(p, &s),
                _ => false,
            }
        } else {
            false
        }
    });
    (out, outside, stop)
}

/// For a request no grant permitted: why each of the task's grants did not apply.
fn grant_notes(
    grants: &GrantSet,
    request: &DecisionRequest,
    path: Option<&TargetPath>,
    now: OffsetDateTime,
) -> Vec<String> {
    let mut notes: Vec<String> = grants
        .for_task(&request.task_id)
        .map(|g| {
            let grant = &g.grant;
            if g.capability != request.capability {
                return format!(
                    "{}: grants `{}`, not `{}`",
                    g.id, g.capability, request.capability
                );
            }
            if let Some(expires) = grant.expires_at.filter(|t| now >= t.get()) {
                return format!("{}: expired at {expires}", g.id);
            }
            if !grant.operations.contains(&request.operation) {
                return format!(
                    "{}: allows operations {:?}, not `{}`",
                    g.id, grant.operations, request.operation
                );
            }
            if let Some(p) = path {
                if let Some(x) = grant
                    .target
                    .exclude
                    .iter()
                    .find(|x| glob_matches(x, p.as_str(), true))
                {
                    return format!("{}: `{p}` is excluded by `{x}`", g.id);
                }
                if !grant
                    .target
                    .paths
                    .iter()
                    .any(|pat| glob_matches(pat, p.as_str(), false))
                {
                    return format!("{}: `{p}` matches none of {:?}", g.id, grant.target.paths);
                }
            }
            format!(
                "{}: matches, but the request is outside it in another way",
                g.id
            )
        })
        .collect();
    if notes.is_empty() {
        notes.push(format!("no grant for task `{}`", request.task_id));
    }
    notes.sort();
    notes
}

/// Glob semantics of grant patterns, via globset: `*` within a segment, `**` any depth.
pub fn glob_matches(pattern: &str, path: &str, case_insensitive: bool) -> bool {
    if PathPattern::parse(pattern).is_err() {
        return false;
    }
    match GlobBuilder::new(pattern)
        .literal_separator(true)
        .case_insensitive(case_insensitive)
        .build()
    {
        Ok(glob) => glob.compile_matcher().is_match(path),
        Err(_) => false,
    }
}

/// How a runner's capability matrix treats a capability (`craik.runner_capability_matrix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerSupport {
    /// Not in the matrix, or `unsupported`: denied before any policy is evaluated.
    Unsupported,
    /// `prompt-handoff`: the runner may propose it; a human reviews it before it runs.
    PromptHandoff,
    /// `supported`: decided by policy and grants as usual.
    Supported,
}

impl RunnerSupport {
    /// The support a matrix declares for `capability`: an exact entry, else a family entry
    /// (`repo.write` covers `repo.write.docs`), else unsupported.
    pub fn of(matrix: &craik_contracts::RunnerCapabilityMatrix, capability: &str) -> Self {
        use craik_contracts::RunnerCapabilitySupport as S;
        let entry = matrix
            .capabilities
            .iter()
            .filter(|c| {
                c.name == capability
                    || capability
                        .strip_prefix(c.name.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .max_by_key(|c| c.name.len());
        match entry.map(|c| c.support) {
            Some(S::Supported) => Self::Supported,
            Some(S::PromptHandoff) => Self::PromptHandoff,
            Some(S::Unsupported) | None => Self::Unsupported,
        }
    }
}

/// The pseudo-policy denying every request while the envelope names an undeclared capability.
pub const ENVELOPE_UNDECLARED: &str = "envelope.undeclared-entry";
/// The pseudo-policy naming a capability the run's envelope denies.
pub const ENVELOPE_DENIED: &str = "envelope.denied";
/// The pseudo-policy naming a capability outside the envelope's `allowed_capabilities`.
pub const ENVELOPE_NOT_ALLOWED: &str = "envelope.not-allowed";
/// The pseudo-policy sending a capability the envelope lists under `approval_required` to
/// review.
pub const ENVELOPE_APPROVAL: &str = "envelope.approval-required";

impl Bundle {
    /// [`apply_envelope`], after refusing an envelope with an entry that names no declared
    /// capability or family (it would match nothing: fail closed, every request denied).
    fn apply_envelope(
        &self,
        verdict: Verdict,
        request: &DecisionRequest,
        now: OffsetDateTime,
    ) -> Verdict {
        if let Some(envelope) = &request.envelope
            && let Some((field, entry)) = self.undeclared_envelope_entry(envelope)
        {
            let mut v = verdict;
            v.decision = Decision::Deny;
            v.deny_kind = Some(DenyKind::ForbiddenBy);
            v.determining = vec![ENVELOPE_UNDECLARED.to_owned()];
            v.reasons = vec![format!(
                "the policy envelope's {field} entry `{}` names no capability the schema declares",
                Truncated(entry)
            )];
            v.grants.clear();
            v.approval = None;
            return v;
        }
        apply_envelope(verdict, request, now)
    }
}

/// The envelope's tightening, after policies and grants decided: denied and not-allowed
/// capabilities deny; approval-required ones need an approval bound to this exact request
/// (none is possible under `automation`). Never loosens a verdict.
fn apply_envelope(mut verdict: Verdict, request: &DecisionRequest, now: OffsetDateTime) -> Verdict {
    let Some(envelope) = &request.envelope else {
        return verdict;
    };
    if verdict.decision == Decision::Deny {
        return verdict;
    }
    let cap = request.capability.as_str();
    let deny = |mut v: Verdict, kind: DenyKind, id: &str, why: String| {
        v.decision = Decision::Deny;
        v.deny_kind = Some(kind);
        v.determining = vec![id.to_owned()];
        v.reasons = vec![why];
        v.grants.clear();
        v.approval = None;
        v
    };
    if let Some(entry) = EnvelopeRules::covering(&envelope.denied, cap) {
        return deny(
            verdict,
            DenyKind::ForbiddenBy,
            ENVELOPE_DENIED,
            format!("the policy envelope denies `{cap}` (denied_capabilities: `{entry}`)"),
        );
    }
    if !envelope.allowed.is_empty() && EnvelopeRules::covering(&envelope.allowed, cap).is_none() {
        return deny(
            verdict,
            DenyKind::ForbiddenBy,
            ENVELOPE_NOT_ALLOWED,
            format!("`{cap}` is not among the policy envelope's allowed_capabilities"),
        );
    }
    let Some(entry) = EnvelopeRules::covering(&envelope.approval_required, cap) else {
        return verdict;
    };
    if verdict.decision != Decision::Allow || verdict.approval.is_some() {
        return verdict;
    }
    if request.profile == PolicyProfile::Automation {
        return deny(
            verdict,
            DenyKind::ApprovalUnavailable,
            ENVELOPE_APPROVAL,
            format!(
                "the policy envelope requires approval for `{cap}` (approval_required: `{entry}`), and automation admits none"
            ),
        );
    }
    match find_approval(&request.approvals, request, &verdict.request_hash, now) {
        Some(approval) => {
            verdict.approval = Some(approval.id.clone());
            verdict.reasons.push(format!(
                "envelope approval_required `{entry}`: approved by {} ({})",
                approval.approved_by, approval.id
            ));
        }
        None => {
            verdict.decision = Decision::RequiresApproval;
            verdict.determining = vec![ENVELOPE_APPROVAL.into()];
            verdict.reasons = vec![format!(
                "the policy envelope requires approval for `{cap}` (approval_required: `{entry}`)"
            )];
        }
    }
    verdict
}

/// The pseudo-policy naming a capability the runner's matrix does not support.
pub const RUNNER_UNSUPPORTED: &str = "runner.unsupported";
/// The pseudo-policy sending a prompt-handoff capability to review.
pub const RUNNER_PROMPT_HANDOFF: &str = "runner.prompt-handoff";

impl Bundle {
    /// [`Bundle::decide`] for a runner whose matrix says `support` for the capability: the
    /// matrix can only make a verdict stricter. Unsupported denies before Cedar;
    /// prompt-handoff turns an Allow into RequiresApproval unless an approval binds to this
    /// exact request (and, under `automation`, into a deny).
    pub fn decide_for_runner(
        &self,
        grants: &GrantSet,
        request: &DecisionRequest,
        options: &DecideOptions,
        support: RunnerSupport,
    ) -> Verdict {
        match support {
            RunnerSupport::Unsupported => {
                let mut verdict = self.refusal(
                    options.mode,
                    RUNNER_UNSUPPORTED,
                    format!(
                        "the runner's capability matrix does not support `{}`",
                        Truncated(&request.capability)
                    ),
                );
                verdict.deny_kind = Some(DenyKind::ForbiddenBy);
                verdict.request_hash =
                    request_hash(self, request, &options.workspace_root).unwrap_or_default();
                verdict
            }
            RunnerSupport::Supported => self.decide(grants, request, options),
            RunnerSupport::PromptHandoff => {
                let mut verdict = self.decide(grants, request, options);
                if verdict.decision != Decision::Allow || verdict.approval.is_some() {
                    return verdict;
                }
                if request.profile == PolicyProfile::Automation {
                    verdict.decision = Decision::Deny;
                    verdict.deny_kind = Some(DenyKind::ApprovalUnavailable);
                    verdict.determining = vec![RUNNER_PROMPT_HANDOFF.into()];
                    verdict.reasons = vec![
                        "prompt-handoff runner: its side effects need review, and automation admits none".into(),
                    ];
                    return verdict;
                }
                match find_approval(
                    &request.approvals,
                    request,
                    &verdict.request_hash,
                    options.now,
                ) {
                    Some(approval) => {
                        verdict.approval = Some(approval.id.clone());
                        verdict.reasons.push(format!(
                            "prompt-handoff reviewed and approved by {} ({})",
                            approval.approved_by, approval.id
                        ));
                    }
                    None => {
                        verdict.decision = Decision::RequiresApproval;
                        verdict.determining = vec![RUNNER_PROMPT_HANDOFF.into()];
                        verdict.reasons = vec![
                            "prompt-handoff runner: Craik routes its side effects through human review".into(),
                        ];
                    }
                }
                verdict
            }
        }
    }
}
