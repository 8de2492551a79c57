//! The host runtime of a governed run: what a run is started with, its event journal, the
//! runner interface, and the driver ([`host`]).

pub mod approvals;
pub mod driver;
pub mod exec;
pub mod gitconfig;
pub mod locked;
pub mod manifest;
pub mod memory;
pub mod plan;
pub mod precommand;
pub mod signed;
pub mod store;

use std::path::PathBuf;

use craik_contracts::{
    CapabilityGrant, FixtureScenario, IntentLock, MEMORY_PROPOSALS, MemoryProposalSpec, NEXT,
    NextStep, Object, PROPOSED_ACTIONS, Phase, PolicyEnvelope, PolicyProfile, ProposedAction,
    ResultStatus, RunnerMetadata, RunnerStepRequest, RunnerStepResult, TaskRequest, TaskRunStatus,
    Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Everything a run was started with; written once as `inputs.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inputs {
    pub run_id: String,
    pub task: TaskRequest,
    pub intent: Option<IntentLock>,
    pub envelope: Option<PolicyEnvelope>,
    pub grants: Vec<CapabilityGrant>,
    /// The runner's name (`fixture`, `codex`, ..., or `adapter:PROGRAM`).
    pub runner: String,
    #[serde(default)]
    pub runner_options: RunnerOptions,
    // -- issue 22 (runner registry) --
    /// The runner as launched: registry id, backend, version, package and the `sha256:` of
    /// the adapter checked against its pin (signed with the inputs; `run.inputs` names it).
    /// `None` for the in-process fixture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_adapter: Option<RunnerRecord>,
    // -- end issue 22 --
    /// The scenario file (absolute) and the `sha256:` of its bytes, for fixture runners.
    /// The scenario itself is not copied (it is the operator's input and may hold anything);
    /// a resume re-reads it and refuses one that changed.
    pub scenario_path: Option<PathBuf>,
    pub scenario_digest: Option<String>,
    pub profile: PolicyProfile,
    pub policies: Option<PathBuf>,
    pub custom: Vec<PathBuf>,
    /// The policy set hash when the run started (a resume re-decides under the bundle loaded
    /// then, and says so if it differs).
    pub policy_set: String,
    pub workspace: PathBuf,
    /// Toolchains commands may use (`--toolchain`, `--command-read`), resolved when the run
    /// started: signed with the rest of the inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<crate::confine::toolchains::Toolchain>,
    /// The project's immutable paths (craik.toml `project.immutable_paths`): globs no write
    /// capability and no command may touch, whatever the label. Signed with the inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub immutable_paths: Vec<String>,
    pub max_iterations: u32,
    pub budget_secs: Option<u64>,
    pub shadow: bool,
    pub started_at: Timestamp,
    /// Who started the run (`user:NAME`: `--by`, else craik.toml's `operator`), when known;
    /// asserted, not authenticated. Signed with the inputs (`run.inputs` names it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
    // Issue 21 (project profile, case file): kept together at the end for merges.
    /// `sha256:` of the project profile's canonical JSON (`craik project show`), when the run
    /// has a declared profile; `run.inputs` signs it as `project_profile_sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_profile_sha256: Option<String>,
    /// `sha256:` of the bytes of the run's `case_file.json`, assembled when it started;
    /// `run.inputs` signs it as `case_file_sha256`, so a resume and `receipts verify`
    /// refuse an edited case file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_file_sha256: Option<String>,
    /// `sha256:` of the bytes of the run's `compiled_prompt.json` (the prompt the host compiled
    /// when it started); `run.inputs` signs it as `compiled_prompt_sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled_prompt_sha256: Option<String>,
    // Issue 21 item 4 (model steps, budgets): kept together at the end for merges. The
    // wall-clock budget is `budget_secs` above (`--wall-clock-budget`).
    /// The provider token budget (`--token-budget`, craik.toml `[run] token_budget`): the
    /// most tokens all model steps together may report. Signed with the inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
}

/// How an adapter runner is configured beyond its name.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerOptions {
    /// The shipped matrix an `adapter:PROGRAM` runs under (default: fixture).
    #[serde(default)]
    pub matrix: Option<String>,
    #[serde(default)]
    pub step_timeout_secs: Option<u64>,
    /// Largest line an adapter may write (default 1 MiB).
    #[serde(default)]
    pub max_line_bytes: Option<usize>,
    /// Extra paths the adapter may read (`--adapter-read`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapter_read: Vec<PathBuf>,
}

/// An action as the host tracks it: its own id, the runner's proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionRecord {
    /// `action_<step>_<k>`, assigned by the host (runner ids are only labels).
    pub id: String,
    pub proposed: ProposedAction,
    /// Set when the proposal held something secret-looking: the stored copy is redacted and
    /// the action is refused without being decided on its (lost) bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl ActionRecord {
    /// What the action touches, as shown to people and written into receipts: a shell
    /// action's argv (as a JSON array: every argument visible, quoted and escaped), never
    /// its free-form `target`; otherwise the target.
    pub fn shown(&self) -> String {
        match (&self.proposed.argv, &self.proposed.target) {
            (Some(argv), _) => serde_json::to_string(argv).unwrap_or_default(),
            (None, Some(t)) => t.clone(),
            (None, None) => String::new(),
        }
    }

    /// Records a proposal; a secret anywhere in it is redacted out and the action refused.
    /// What Craik would write or run (`refuse`: content, edits, argv, target) is kept byte for
    /// byte when it holds no secret: canonicalisation (escape sequences, invisible characters
    /// removed) is for text shown or sent, not for bytes written to the workspace or passed to
    /// a command; a secret found in the canonical form or its view refuses the action.
    pub fn new(id: String, mut proposed: ProposedAction) -> Self {
        let mut found = None;
        let mut clean = |text: &mut String, refuse: bool| {
            let r = craik_kernel::redact_text(text);
            let still = craik_kernel::still_secret(&r.text);
            if (r.replaced > 0 || still.is_some()) && refuse && found.is_none() {
                found = Some(still.unwrap_or("a secret").to_owned());
            }
            if still.is_some() {
                *text = craik_kernel::REDACTED.to_owned();
            } else if r.replaced > 0 || !refuse {
                *text = r.text;
            }
        };
        if let Some(t) = proposed.target.as_mut() {
            clean(t, true);
        }
        if let Some(c) = proposed.content.as_mut() {
            clean(c, true);
        }
        for e in &mut proposed.edits {
            clean(&mut e.old, true);
            clean(&mut e.new, true);
        }
        for a in proposed.argv.iter_mut().flatten() {
            clean(a, true);
        }
        if let Some(r) = proposed.reason.as_mut() {
            clean(r, false);
        }
        clean(&mut proposed.id, false);
        let refused = found
            .map(|what| {
                format!(
                    "{id}: the proposal holds {what}; Craik never writes, runs or stores secrets (the stored copy is redacted)"
                )
            })
            .or_else(|| {
                // What is decided must have one signed form: no float, no integer beyond
                // ±(2^53−1) (a `timeout_ms` of 2^53 once hid an edited approval).
                craik_kernel::canonical_bytes(&proposed).err().map(|e| {
                    format!("{id}: the proposal has no canonical form Craik can sign ({e})")
                })
            });
        Self {
            id,
            proposed,
            refused,
        }
    }
}

/// What happened to an action, as the runner is told in the next step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    pub action: String,
    pub label: String,
    pub decision: String,
    pub ok: bool,
    pub summary: String,
    #[serde(default)]
    pub output: Option<String>,
    pub receipt: String,
}

/// The run's own journal (`events.jsonl`): the run's state is a fold over it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    StepRequest {
        at: Timestamp,
        request: Box<RunnerStepRequest>,
    },
    StepResult {
        at: Timestamp,
        /// Redacted.
        result: Box<RunnerStepResult>,
        actions: Vec<ActionRecord>,
        next: Option<NextStep>,
    },
    /// Written (fsync) after the decision receipt and before the side effect.
    Executing {
        at: Timestamp,
        action: String,
        /// `sha256:` of the target file before and after (file actions).
        pre: Option<String>,
        post: Option<String>,
    },
    Outcome {
        at: Timestamp,
        outcome: Outcome,
    },
    Parked {
        at: Timestamp,
        reason: String,
        approval: String,
    },
    Reopened {
        at: Timestamp,
        why: String,
    },
    Recovered {
        at: Timestamp,
        notes: Vec<String>,
    },
    Halted {
        at: Timestamp,
        status: TaskRunStatus,
        reason: String,
    },
}

/// A runner, as the loop sees it: in-process (the fixture) or an adapter process behind the
/// channel (`crate::adapter`). Everything it returns is checked by the host as hostile input.
/// How a setup failure is shown (the words before its reason).
pub const SETUP_FAILED: &str = "runner setup failed: ";

/// Why a runner gave no step result. The kind comes from where the failure happened, as a
/// type; the text is for people and is never read back to decide anything (issue 30: an
/// adapter that wrote a setup failure's words on its stderr had its own violation signed as
/// the operator's setup failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerError {
    /// A setup failure on the operator's side (the program cannot start, the sandbox refused
    /// it, its pin does not match, a live CLI or API key is missing: error code 3), not
    /// something the runner did: it fails the run without calling it a violation.
    Setup(String),
    /// The host's own finding, at any step: what the runner runs changed on disk since its
    /// pin was checked (a setup failure too, never the adapter's word: unlike `Setup` after
    /// the first answer, it is not turned into a violation).
    Changed(String),
    /// No answer within the step's timeout (the adapter was killed).
    Timeout(String),
    /// The runner failed or broke the protocol.
    Failed(String),
}

impl std::fmt::Display for RunnerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(why) | Self::Changed(why) => write!(f, "{SETUP_FAILED}{why}"),
            Self::Timeout(why) | Self::Failed(why) => f.write_str(why),
        }
    }
}

pub trait StepRunner {
    /// The handshake, before the first step (adapters: `initialize`).
    fn start(&mut self, expected: &RunnerMetadata) -> Result<(), RunnerError> {
        let _ = expected;
        Ok(())
    }
    /// One step.
    fn step(&mut self, request: &RunnerStepRequest) -> Result<RunnerStepResult, RunnerError>;
    /// Diagnostics gathered since the last call (adapters: redacted stderr, streamed logs).
    fn take_diagnostics(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Where to send the text the runner streams during a step, as it arrives (adapters:
    /// `text_delta` events); untrusted, shown only. Runners that stream nothing ignore it.
    fn stream_text(&mut self, sink: TextSink) {
        let _ = sink;
    }
    /// The model steps the runner reported during its last step (adapters: `model_step`
    /// events, whether the step answered or not), in order; untrusted: the host checks them.
    fn take_model_steps(&mut self) -> Vec<craik_contracts::channel::ModelStepReport> {
        Vec::new()
    }
    /// The longest the next step may take (what is left of the wall-clock budget); a runner
    /// that waits on a process caps its timeout to it. `None`: no cap.
    fn cap_step_time(&mut self, left: Option<std::time::Duration>) {
        let _ = left;
    }
}

/// Receives a runner's streamed text ([`StepRunner::stream_text`]).
pub type TextSink = Box<dyn FnMut(&str)>;

/// The deterministic scripted runner, in process: answers the request of step *n* (its
/// `context.step`) with the scenario's step *n*, so it needs no state across a crash.
#[derive(Debug)]
pub struct FixtureStepRunner {
    scenario: FixtureScenario,
    model_steps: Vec<craik_contracts::channel::ModelStepReport>,
}

impl FixtureStepRunner {
    pub fn new(scenario: FixtureScenario) -> Self {
        Self {
            scenario,
            model_steps: Vec::new(),
        }
    }
}

impl StepRunner for FixtureStepRunner {
    fn step(&mut self, request: &RunnerStepRequest) -> Result<RunnerStepResult, RunnerError> {
        self.model_steps = self.scenario.model_steps(request);
        self.scenario.answer(request).map_err(RunnerError::Failed)
    }

    fn take_model_steps(&mut self) -> Vec<craik_contracts::channel::ModelStepReport> {
        std::mem::take(&mut self.model_steps)
    }
}

/// Serialises one of our own types to a JSON value (`null` if it could not be, which our
/// types never do).
pub fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The reserved parts of a step result's `observed_output`, read strictly.
#[derive(Debug, Default)]
pub struct Directives {
    pub actions: Vec<ProposedAction>,
    pub memory: Vec<MemoryProposalSpec>,
    pub next: Option<NextStep>,
}

/// A runner broke the channel's contract: the type is the attribution (the step is a
/// runner violation, signed as one); the text, composed by Craik, names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

/// Splits the reserved keys off `observed_output`; a malformed one names its key and why.
pub fn directives(observed: &mut Object) -> Result<Directives, Violation> {
    fn take<T: serde::de::DeserializeOwned>(
        observed: &mut Object,
        key: &str,
    ) -> Result<Option<T>, Violation> {
        match observed.0.shift_remove(key) {
            None => Ok(None),
            Some(value) => serde_path_to_error::deserialize(value)
                .map(Some)
                .map_err(|e| {
                    Violation(format!(
                        "observed_output.{key}{}: {}",
                        match e.path().to_string().as_str() {
                            "." => String::new(),
                            p if p.starts_with('[') => p.to_owned(),
                            p => format!(".{p}"),
                        },
                        e.into_inner()
                    ))
                }),
        }
    }
    Ok(Directives {
        actions: take(observed, PROPOSED_ACTIONS)?.unwrap_or_default(),
        memory: take(observed, MEMORY_PROPOSALS)?.unwrap_or_default(),
        next: take(observed, NEXT)?,
    })
}

/// Status of a step result that may propose memory.
pub fn may_propose(status: ResultStatus) -> bool {
    matches!(status, ResultStatus::Completed | ResultStatus::Partial)
}

/// Phases in which a runner may propose side effects.
pub fn may_act(phase: Phase) -> bool {
    phase == Phase::Act
}

/// A JSON value as compact text (for summaries).
pub fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// `sha256:` of a set of grants, whatever their order or the files they came in: the
/// canonical JSON (RFC 8785) array of the grants, each sorted by its own canonical bytes. The
/// `run.inputs` receipt signs it as `grants_sha256`; `receipts verify --grants` recomputes it.
pub fn grants_digest(grants: &[CapabilityGrant]) -> Result<crate::digest::Digest, String> {
    let mut each: Vec<(Vec<u8>, serde_json::Value)> = Vec::with_capacity(grants.len());
    for g in grants {
        let value = serde_json::to_value(g).map_err(|e| format!("grant `{}`: {e}", g.id))?;
        let bytes =
            craik_kernel::canonical_bytes(&value).map_err(|e| format!("grant `{}`: {e}", g.id))?;
        each.push((bytes, value));
    }
    each.sort_by(|a, b| a.0.cmp(&b.0));
    let values: Vec<serde_json::Value> = each.into_iter().map(|(_, v)| v).collect();
    crate::digest::Digest::of_canonical(&values)
}

/// The grants as a run of `task` compiles them: task grants of this task as they are, project
/// grants of its project bound to it (`task_id` set). A grant of another task or project is
/// refused, naming it: it would never apply, or apply to the wrong run. The run's inputs sign
/// the grants as written, never the bound copies.
pub fn bound_grants(
    task: &TaskRequest,
    grants: &[CapabilityGrant],
) -> Result<Vec<CapabilityGrant>, crate::Error> {
    grants
        .iter()
        .map(|g| {
            craik_kernel::bind_project_grant(g, &task.id, &task.project_id)
                .map_err(|why| crate::Error::invalid(why, Vec::new()))
        })
        .collect()
}

/// A write scope the sandbox could not enforce exactly is refused when a grant is loaded,
/// naming the grant, not when its first command would run.
pub fn check_grant_scopes(grants: &[CapabilityGrant]) -> Result<(), crate::Error> {
    for g in grants {
        if !g.target.writes.is_empty() && !g.capability.starts_with("shell.") {
            return Err(crate::Error::invalid(
                format!(
                    "grant `{}`: target.writes applies to shell.* grants only (capability `{}`)",
                    g.id, g.capability
                ),
                Vec::new(),
            ));
        }
        for pattern in &g.target.writes {
            crate::run::manifest::Scope::parse("/w", pattern).map_err(|e| {
                crate::Error::invalid(format!("grant `{}`: target.writes: {e}", g.id), Vec::new())
            })?;
        }
    }
    Ok(())
}

/// An intent lock, policy envelope or grant written for another task would never apply (or
/// would apply to the wrong run): refused before the run starts, naming what differs.
pub fn check_task_bindings(
    task: &TaskRequest,
    intent: Option<&IntentLock>,
    envelope: Option<&PolicyEnvelope>,
    grants: &[CapabilityGrant],
) -> Result<(), crate::Error> {
    for (what, id) in [
        ("intent lock", intent.map(|i| &i.task_id)),
        ("policy envelope", envelope.map(|e| &e.task_id)),
    ] {
        if let Some(id) = id.filter(|id| **id != task.id) {
            return Err(crate::Error::invalid(
                format!(
                    "the {what}'s task_id `{id}` is not the task's `{}`",
                    task.id
                ),
                Vec::new(),
            ));
        }
    }
    bound_grants(task, grants)?;
    check_grant_scopes(grants)?;
    // An intent-lock scope entry is a workspace path prefix or prose (inner spaces: kept for
    // the record); anything that looks like a path and would protect nothing (a glob, an
    // absolute path, `..`, a backslash, edge whitespace) is refused, naming it (outside
    // testing: `out_of_scope: ["src/vendor/**"]`, `/src/vendor/`, ` src/vendor/` let commands
    // write there). The same rule for a `path:` stop condition.
    if let Some(lock) = intent {
        let stops: Vec<String> = lock
            .stop_conditions
            .iter()
            .filter_map(|c| c.strip_prefix("path:").map(|p| p.trim_start().to_owned()))
            .collect();
        for (field, list) in [
            ("in_scope", &lock.in_scope),
            ("out_of_scope", &lock.out_of_scope),
            ("stop_conditions path:", &stops),
        ] {
            if let Some((entry, why)) = list
                .iter()
                .find_map(|e| craik_kernel::intent_entry_problem(e).map(|why| (e, why)))
            {
                return Err(crate::Error::invalid(
                    format!(
                        "intent lock `{}`: {field}: `{}`: {why}",
                        craik_contracts::one_line(&lock.id),
                        craik_contracts::one_line(entry)
                    ),
                    Vec::new(),
                ));
            }
        }
    }
    // An envelope entry that names no capability would silently match nothing (a deny-list
    // entry `shell.*` denied nothing): refused, naming the field and the entry.
    if let Some(e) = envelope {
        for (field, list) in [
            ("allowed_capabilities", &e.allowed_capabilities),
            ("denied_capabilities", &e.denied_capabilities),
            ("approval_required", &e.approval_required),
            ("verification_required", &e.verification_required),
        ] {
            if let Some(problem) = list
                .iter()
                .find_map(|entry| craik_kernel::envelope_entry_problem(entry))
            {
                return Err(crate::Error::invalid(
                    format!("policy envelope `{}`: {field}: {problem}", e.id),
                    Vec::new(),
                ));
            }
        }
    }
    Ok(())
}

/// What a run records about its runner (signed in `run.inputs`, shown by `craik audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerRecord {
    /// The registry id (`fixture-adapter`, `my-runner`), or the ad-hoc form's kind.
    pub id: String,
    pub backend: String,
    /// `built-in`, `home`, `project`, or `ad-hoc` (`adapter:`/`provider:` forms).
    pub origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The file (or bundle) hashed.
    pub path: PathBuf,
    /// Its `sha256:` when the run started.
    pub sha256: String,
    /// Whether it was checked against a pin (`craik runners install`).
    pub pinned: bool,
    /// The adapter program actually executed and its `sha256:`, when it is not `path`
    /// (a `cli` entry's shipped handoff adapter, an `npx`/`uvx` launcher).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_sha256: Option<String>,
    /// `sha256:` of the registry entry as loaded when the run started (backend, origin,
    /// command, arguments, variable names, read paths, matrix, ...): `craik runs resume`
    /// continues only under the same definition. Absent for the ad-hoc `adapter:` form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_sha256: Option<String>,
}
