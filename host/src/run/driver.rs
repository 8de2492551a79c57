//! The driver: asks the runner for steps, decides every proposed action with the kernel,
//! performs allowed side effects with write-ahead receipts, parks for approvals, halts, writes
//! the handoff; and recovery, which rebuilds all of that from the run's journals.
//!
//! Durability order for a side effect (each line fsynced before the next step):
//! decision receipt → `executing` event (file pre/post hashes) → the effect → outcome receipt
//! → `outcome` event. A crash anywhere leaves a state recovery can classify: undecided,
//! decided but not started, *uncertain* (started, no outcome), or done.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use craik_contracts::{
    EvidenceKind, EvidenceReference, Handoff, HandoffStatus, MemoryProposal, MemoryProposalSpec,
    Object, Phase, PolicyProfile, ProposalStatus, ReceiptResult, ReceiptStatus, RunOutput,
    RunnerStepRequest, RunnerStepResult, SelfAudit, TaskRun, TaskRunStatus, Timestamp, Truncated,
};
use craik_kernel::{
    Approval, Bundle, DecideOptions, DecidedBy, DecidedByKind, Decision, DecisionRequest, DenyKind,
    Ed25519Signer, Effect, EnvelopeRules, Gate, GrantSet, IntentScope, JournalWriter, KeyRing,
    Mode, Next, ReceiptDraft, ReceiptPayload, RunLoop, RunnerRef, RunnerSupport, TargetPath,
    Verdict, is_terminal, redact_checked, redact_value,
};
use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::Error;
use crate::journal::JournalFile;
use crate::run::approvals::{
    ApprovalRecord, ApprovalStatus, read_approvals, signed_review, write_approval,
};
use crate::run::exec::{self, FileState, Workspace};
use crate::run::memory::write_memory;
pub use crate::run::signed::{RUN_INPUTS, action_digest, bound_inputs};
use crate::run::store::{CANCEL, CrashPoints, EVENTS, HANDOFF, Home, OUTPUTS, RUN, RunDir};
use crate::run::{
    ActionRecord, Event, Inputs, Outcome, StepRunner, compact, directives, json, may_act,
    may_propose,
};

/// Most actions one step may propose (each is decided and receipted: a runner cannot flood
/// the journal).
pub const MAX_ACTIONS_PER_STEP: usize = 64;
/// Most memory proposals one step may make.
pub const MAX_MEMORY_PER_STEP: usize = 16;

/// Receipts between periodic checkpoints.
pub const CHECKPOINT_EVERY: u64 = 64;

/// What the loop does next.
enum Flow {
    Go,
    Stop,
}

/// Counters for the closing summary: steps and side effects from the run's events, verdicts
/// from its journal.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    pub steps: usize,
    pub allow: usize,
    pub approval: usize,
    pub deny: usize,
    pub executed: usize,
}

/// One run being driven (or recovered).
pub struct Host {
    pub home: Home,
    pub dir: RunDir,
    pub inputs: Inputs,
    bundle: Bundle,
    grants: GrantSet,
    signer: Ed25519Signer,
    journal: JournalWriter,
    journal_file: JournalFile,
    pub machine: RunLoop,
    runner: Box<dyn StepRunner>,
    matrix: craik_contracts::RunnerCapabilityMatrix,
    /// The runner's handshake is done (lazily, before its first step).
    runner_started: bool,
    workspace: Workspace,
    clock: std::sync::Arc<dyn crate::Clock>,
    crash: CrashPoints,
    step_count: usize,
    pending: Vec<ActionRecord>,
    outcomes: Vec<Outcome>,
    all_outcomes: Vec<Outcome>,
    executing: BTreeMap<String, (Option<String>, Option<String>)>,
    step_result_ids: Vec<String>,
    memory_ids: Vec<String>,
    policy_exceptions: Vec<String>,
    /// Receipts by action (decisions, then outcome), from the journal.
    receipts_by_action: BTreeMap<String, Vec<ReceiptPayload>>,
    used_approvals: HashSet<String>,
    /// Run outputs already written (a step re-asked after a crash is not written twice).
    output_ids: HashSet<String>,
    halted: Option<(TaskRunStatus, String)>,
    closed: bool,
    pub notes: Vec<String>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("run", &self.inputs.run_id)
            .finish_non_exhaustive()
    }
}

fn ts(at: OffsetDateTime) -> Timestamp {
    Timestamp::new(at)
}

use crate::run::store::io_at as io;

/// The id suffix of a run (`run_x` → `x`).
fn suffix(run_id: &str) -> &str {
    run_id.trim_start_matches("run_")
}

/// The bundle, grants and key a run needs, loaded by the caller.
pub struct Setup {
    pub bundle: Bundle,
    pub grants: GrantSet,
    pub signer: Ed25519Signer,
    pub keys: KeyRing,
    /// The runner, and its capability matrix (trusted data: identity, trust, support).
    pub runner: Box<dyn StepRunner>,
    pub matrix: craik_contracts::RunnerCapabilityMatrix,
    /// Where the run's time comes from (every receipt, state change and decision).
    pub clock: std::sync::Arc<dyn crate::Clock>,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("policy_set", &self.bundle.hash())
            .field("runner", &self.matrix.runner.id)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Starts a new run in a fresh directory.
    pub fn start(home: Home, dir: RunDir, inputs: Inputs, setup: Setup) -> Result<Self, Error> {
        let run_id = inputs.run_id.clone();
        let journal_file = JournalFile::create(&dir.path).map_err(io(&dir.path))?;
        dir.write_json(crate::run::store::INPUTS, &inputs, true)
            .map_err(io(&dir.path))?;
        let run = initial_run(&inputs);
        let workspace = Workspace::open(&inputs.workspace).map_err(Error::usage)?;
        let budget = budget_of(&inputs);
        let mut host = Self::assemble(
            home,
            dir,
            inputs,
            setup,
            JournalWriter::new(&run_id, CHECKPOINT_EVERY),
            journal_file,
            RunLoop::new(run, budget),
            workspace,
        );
        let at = host.clock.now();
        host.machine
            .start(at)
            .map_err(|e| Error::internal(e.to_string()))?;
        // The run's first receipt binds inputs.json (task, profile, grants, envelope, intent
        // lock, workspace, runner) to the signed journal: a resume refuses edited inputs.
        let path = host.dir.file(crate::run::store::INPUTS);
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let draft = inputs_draft(&host.inputs, &bytes, &host.runner_ref().id);
        host.receipt(draft)?;
        host.save_run()?;
        Ok(host)
    }

    /// A host with empty derived state.
    #[allow(clippy::too_many_arguments, reason = "one constructor, called twice")]
    fn assemble(
        home: Home,
        dir: RunDir,
        inputs: Inputs,
        setup: Setup,
        journal: JournalWriter,
        journal_file: JournalFile,
        machine: RunLoop,
        workspace: Workspace,
    ) -> Self {
        Self {
            runner: setup.runner,
            matrix: setup.matrix,
            clock: setup.clock,
            runner_started: false,
            journal,
            home,
            dir,
            bundle: setup.bundle,
            grants: setup.grants,
            signer: setup.signer,
            journal_file,
            machine,
            workspace,
            crash: CrashPoints::from_env(),
            step_count: 0,
            pending: Vec::new(),
            outcomes: Vec::new(),
            all_outcomes: Vec::new(),
            executing: BTreeMap::new(),
            step_result_ids: Vec::new(),
            memory_ids: Vec::new(),
            policy_exceptions: Vec::new(),
            receipts_by_action: BTreeMap::new(),
            used_approvals: HashSet::new(),
            output_ids: HashSet::new(),
            halted: None,
            closed: false,
            notes: Vec::new(),
            inputs,
        }
    }

    /// Reopens an existing run from its journals: repairs torn tails, verifies the receipts,
    /// replays the events, and classifies every action of the last act step.
    pub fn recover(home: Home, dir: RunDir, setup: Setup) -> Result<Self, Error> {
        let inputs: Inputs = dir
            .read_json(crate::run::store::INPUTS)
            .map_err(|e| Error::invalid(e, Vec::new()))?;
        let mut notes = Vec::new();
        for name in [EVENTS, OUTPUTS, crate::journal::JOURNAL_NAME] {
            let torn = dir.repair_torn(name).map_err(io(&dir.path))?;
            if torn > 0 {
                notes.push(format!(
                    "{name}: a torn last line ({torn} bytes, never acknowledged) moved to {name}.torn"
                ));
            }
        }
        let journal_path = dir.file(crate::journal::JOURNAL_NAME);
        let bytes = std::fs::read(&journal_path).map_err(io(&journal_path))?;
        let receipts = decode_receipts(&bytes);
        let closed = receipts.closed;
        let journal = if closed {
            JournalWriter::new(&inputs.run_id, CHECKPOINT_EVERY)
        } else {
            JournalWriter::resume(&inputs.run_id, &bytes, &setup.keys, CHECKPOINT_EVERY).map_err(
                |why| {
                    Error::invalid(
                        format!(
                            "{}: cannot continue the journal: {why}",
                            journal_path.display()
                        ),
                        Vec::new(),
                    )
                },
            )?
        };
        let journal_file = JournalFile::open(&dir.path).map_err(io(&dir.path))?;
        let events: Vec<Event> = dir
            .read_lines(EVENTS)
            .map_err(|e| Error::invalid(e, Vec::new()))?;
        let output_ids: HashSet<String> = dir
            .read_lines::<RunOutput>(OUTPUTS)
            .map_err(|e| Error::invalid(e, Vec::new()))?
            .into_iter()
            .map(|o| o.id)
            .collect();
        let workspace = Workspace::open(&inputs.workspace).map_err(Error::usage)?;
        let budget = budget_of(&inputs);
        let mut run = initial_run(&inputs);
        run.status = TaskRunStatus::Running;
        let mut host = Self::assemble(
            home,
            dir,
            inputs,
            setup,
            journal,
            journal_file,
            RunLoop::new(run, budget),
            workspace,
        );
        host.receipts_by_action = receipts.by_action;
        host.used_approvals = receipts.approvals_used;
        host.output_ids = output_ids;
        host.closed = closed;
        host.notes = notes;
        for id in receipts.ids {
            host.machine.note_receipt(id);
        }
        host.replay(events)?;
        if host.bundle.hash() != host.inputs.policy_set {
            host.notes.push(format!(
                "the policy set changed since the run started ({} → {}); every further decision uses the current one",
                host.inputs.policy_set,
                host.bundle.hash()
            ));
        }
        Ok(host)
    }

    fn replay(&mut self, events: Vec<Event>) -> Result<(), Error> {
        for event in events {
            match event {
                Event::StepRequest { .. } => {}
                Event::StepResult {
                    at,
                    result,
                    actions,
                    next,
                } => {
                    self.step_count += 1;
                    self.step_result_ids.push(result.id.clone());
                    self.memory_ids.extend(result.memory_proposal_ids.clone());
                    let next = next.map(|n| match n {
                        craik_contracts::NextStep::Continue => Next::Continue,
                        craik_contracts::NextStep::Stop => Next::Stop,
                    });
                    // Replaying what was accepted before cannot fail differently now; if it
                    // does, the journal was edited.
                    self.machine
                        .accept(result.phase, result.status, next, at.get())
                        .map_err(|e| {
                            Error::invalid(
                                format!("{}: replay refused: {e}", self.dir.file(EVENTS).display()),
                                Vec::new(),
                            )
                        })?;
                    if result.phase == Phase::Act {
                        self.pending = actions;
                        self.outcomes.clear();
                    }
                }
                Event::Executing {
                    action, pre, post, ..
                } => {
                    self.executing.insert(action, (pre, post));
                }
                Event::Outcome { outcome, .. } => {
                    self.pending.retain(|a| a.id != outcome.action);
                    self.outcomes.push(outcome.clone());
                    self.all_outcomes.push(outcome);
                }
                Event::Parked { at, reason, .. } => self.machine.park(reason, at.get()),
                Event::Reopened { at, .. } => self.machine.reopen(at.get()),
                Event::Recovered { .. } => {}
                Event::Halted { at, status, reason } => {
                    self.machine.halt(status, reason.clone(), at.get());
                    self.halted = Some((status, reason));
                }
            }
        }
        Ok(())
    }

    /// Steps answered and side effects performed so far (verdicts come from the journal).
    pub fn tally(&self) -> Tally {
        Tally {
            steps: self.step_result_ids.len(),
            executed: self.all_outcomes.iter().filter(|o| o.ok).count(),
            ..Tally::default()
        }
    }

    /// True when the run ended for good (handoff written, journal closed).
    pub fn is_final(&self) -> bool {
        self.halted.is_some()
    }

    /// Resolves what a crash left behind: finishes an interrupted finalisation, and records
    /// every uncertain action (decided, started, no outcome). Returns what it found.
    pub fn settle(&mut self) -> Result<Vec<String>, Error> {
        let mut found = std::mem::take(&mut self.notes);
        let run = self.machine.run();
        if self.halted.is_none() && run.ended_at.is_some() {
            // The last step ended the run; the process stopped before recording the halt.
            let (status, reason) = (run.status, run.stop_reason.clone().unwrap_or_default());
            found.push(format!(
                "the run had ended ({}) but was not finalised; finalising",
                status.as_str()
            ));
            self.finish_halt(status, reason)?;
            return Ok(found);
        }
        if let Some((status, reason)) = self.halted.clone() {
            // Finalisation is idempotent: each of its steps is skipped once done.
            if !self.closed || !self.dir.file(HANDOFF).is_file() {
                found.push("the run had halted but was not finalised; finalising".into());
            }
            self.finalize(status, &reason)?;
            return Ok(found);
        }
        let pending = self.pending.clone();
        for action in &pending {
            let receipts = self
                .receipts_by_action
                .get(&action.id)
                .cloned()
                .unwrap_or_default();
            if let Some(outcome) = receipts
                .iter()
                .rev()
                .find(|r| r.decided_by.kind == DecidedByKind::Outcome)
            {
                // Outcome receipted, event lost: restore the event from the receipt.
                let restored = Outcome {
                    action: action.id.clone(),
                    label: action.proposed.id.clone(),
                    decision: "allow".into(),
                    ok: outcome.result.status == ReceiptStatus::Passed,
                    summary: outcome.result.summary.clone(),
                    output: None,
                    receipt: outcome.id.clone(),
                };
                self.record_outcome(restored)?;
                found.push(format!("{}: outcome was receipted; restored", action.id));
                continue;
            }
            let Some((pre, post)) = self.executing.get(&action.id).cloned() else {
                let last = receipts
                    .iter()
                    .rev()
                    .find(|r| r.decided_by.kind != DecidedByKind::Outcome);
                if last.is_none() {
                    found.push(format!("{}: not decided yet; will be decided", action.id));
                } else if last.is_some_and(|r| r.decision != Decision::Allow) {
                    found.push(format!(
                        "{}: was {}; will be decided again (with any approval recorded since)",
                        action.id,
                        decision_name(last.map_or(Decision::Deny, |r| r.decision))
                    ));
                } else {
                    found.push(format!(
                        "{}: decided but never started; needs a fresh decision",
                        action.id
                    ));
                }
                continue;
            };
            let effect = Effect::of(&action.proposed.capability, &action.proposed.operation);
            if effect.is_some_and(|e| !e.is_side_effect()) {
                // A read has no side effect: nothing is uncertain, it is decided afresh.
                self.executing.remove(&action.id);
                found.push(format!(
                    "{}: a read was interrupted; it has no side effect and will be decided again",
                    action.id
                ));
                continue;
            }
            // Started, no outcome: uncertain.
            let file_action = matches!(effect, Some(Effect::WriteFile | Effect::PatchFile));
            let target = action.proposed.target.clone().unwrap_or_default();
            if file_action {
                let current = TargetPath::normalize(&self.workspace_root(), &target)
                    .map_err(|e| e.to_string())
                    .and_then(|p| self.workspace.state(p.as_str()));
                match current {
                    Ok(state) if state.hash() == post.as_deref() => {
                        let summary = format!(
                            "found applied during recovery ({}); not executed again",
                            post.as_deref().unwrap_or("?")
                        );
                        self.outcome_receipt(action, true, &summary, None)?;
                        found.push(format!(
                            "{}: uncertain; the file holds the intended bytes, recorded as done",
                            action.id
                        ));
                        continue;
                    }
                    Ok(state) if state.hash() == pre.as_deref() => {
                        self.executing.remove(&action.id);
                        found.push(format!(
                            "{}: uncertain; the file is unchanged, so it never ran: needs a fresh decision",
                            action.id
                        ));
                        continue;
                    }
                    Ok(_) | Err(_) => {}
                }
            }
            let summary = if file_action {
                "uncertain: the process stopped during the write and the file holds neither the old nor the new bytes; not retried".to_owned()
            } else {
                "uncertain: the process stopped while this ran; it is never re-run blindly"
                    .to_owned()
            };
            self.outcome_receipt(action, false, &summary, None)?;
            found.push(format!("{}: {summary}", action.id));
            self.halt(
                TaskRunStatus::Blocked,
                format!(
                    "uncertain side effect {} ({}): an operator must check it",
                    action.id, action.proposed.capability
                ),
            )?;
            return Ok(found);
        }
        if !found.is_empty() || self.machine.run().status == TaskRunStatus::Running {
            let at = self.clock.now();
            self.event(&Event::Recovered {
                at: ts(at),
                notes: found.clone(),
            })?;
        }
        Ok(found)
    }

    fn workspace_root(&self) -> String {
        self.workspace.root.display().to_string()
    }

    /// Continues a parked or recovered run: a pending approval refuses; a denied one halts.
    pub fn reopen(&mut self) -> Result<(), Error> {
        if self.is_final() {
            return Ok(());
        }
        let status = self.machine.run().status;
        if status == TaskRunStatus::Blocked {
            // Parked awaiting an approval: it must be decided.
            let approvals = self.approvals()?;
            let parked_for: Vec<&ApprovalRecord> = approvals
                .iter()
                .filter(|a| self.pending.iter().any(|p| p.id == a.action.id))
                .collect();
            if let Some(pending) = parked_for
                .iter()
                .find(|a| a.status == ApprovalStatus::Pending)
            {
                return Err(Error::usage(format!(
                    "approval {} is still pending: `craik approvals approve {} --by user:NAME --reason TEXT` (or deny)",
                    pending.id, pending.id
                ))
                .with_kind(crate::ErrorKind::Refused));
            }
            if let Some(denied) = parked_for
                .iter()
                .rev()
                .find(|a| a.status == ApprovalStatus::Denied)
            {
                let reason = format!(
                    "approval {} denied by {}: {}",
                    denied.id,
                    denied.decided_by.as_deref().unwrap_or("?"),
                    denied.reason.as_deref().unwrap_or("")
                );
                self.halt(TaskRunStatus::Blocked, reason)?;
                return Ok(());
            }
        }
        let at = self.clock.now();
        self.event(&Event::Reopened {
            at: ts(at),
            why: format!("resumed from {}", status.as_str()),
        })?;
        self.machine.reopen(at);
        self.save_run()
    }

    /// Drives the run until it halts or parks.
    pub fn drive(&mut self, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
        loop {
            if self.is_final() {
                return Ok(());
            }
            if self.dir.file(CANCEL).exists() {
                return self.halt(
                    TaskRunStatus::Interrupted,
                    "cancelled by the operator".into(),
                );
            }
            if !self.pending.is_empty() {
                match self.process_actions()? {
                    Flow::Go => continue,
                    Flow::Stop => return Ok(()),
                }
            }
            match self.machine.gate(self.clock.now()) {
                Gate::Over => return Ok(()),
                Gate::Stop(status, reason) => return self.halt(status, reason),
                Gate::Ask(phase) => {
                    progress(&format!(
                        "iteration {} · {}",
                        self.machine.run().iteration + 1,
                        phase.as_str()
                    ));
                    if let Flow::Stop = self.step(phase)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn event(&mut self, event: &Event) -> Result<(), Error> {
        self.dir
            .append(EVENTS, event, true)
            .map_err(io(&self.dir.path))?;
        self.crash.synced(1);
        self.crash.point();
        Ok(())
    }

    /// A step request is recorded for the audit trail only: a crash that loses it loses
    /// nothing (the step is asked again), so it is not fsynced on its own; the next fsync of
    /// the same file makes it durable.
    fn event_unsynced(&mut self, event: &Event) -> Result<(), Error> {
        self.dir
            .append(EVENTS, event, false)
            .map_err(io(&self.dir.path))?;
        self.crash.point();
        Ok(())
    }

    /// `run.json` is derived from the events (recovery rewrites it), so it is replaced
    /// atomically but fsynced only when the run parks or ends.
    fn save_run(&mut self) -> Result<(), Error> {
        let sync = self.machine.run().status != TaskRunStatus::Running;
        self.dir
            .write_json(RUN, self.machine.run(), sync)
            .map_err(io(&self.dir.path))?;
        if sync {
            self.crash.synced(2);
        }
        self.crash.point();
        Ok(())
    }

    /// Appends signed journal bytes, fsynced.
    fn journal_line(&mut self, line: &[u8]) -> Result<(), Error> {
        self.journal_file
            .append(line)
            .map_err(io(self.journal_file.path()))?;
        self.crash.synced(1);
        self.crash.point();
        Ok(())
    }

    fn receipt(&mut self, draft: ReceiptDraft) -> Result<String, Error> {
        let id = self.journal.next_id();
        let line = self
            .journal
            .append(draft, self.clock.now(), &self.signer)
            .map_err(|e| Error::internal(format!("receipt: {e}")))?;
        self.machine.note_receipt(id.clone());
        self.journal_line(&line)?;
        Ok(id)
    }

    /// The principal: identity, trust and mode from the matrix, never from the runner.
    fn runner_ref(&self) -> RunnerRef {
        RunnerRef {
            id: self.matrix.runner.id.clone(),
            trust: self.matrix.trust.level,
            mode: self.matrix.runner.mode,
        }
    }

    fn request_for(&self, phase: Phase) -> RunnerStepRequest {
        let run = self.machine.run();
        let n = self.step_count;
        let mut context = Object::new();
        context.0.insert("step".into(), json!(n));
        context.0.insert("iteration".into(), json!(run.iteration));
        context
            .0
            .insert("max_iterations".into(), json!(run.max_iterations));
        context
            .0
            .insert("profile".into(), json!(self.inputs.profile.as_str()));
        if phase == Phase::Observe {
            context.0.insert("outcomes".into(), json(&self.outcomes));
        }
        RunnerStepRequest {
            schema: Default::default(),
            version: Default::default(),
            id: format!("runner_step_request_{}_{n}", suffix(&self.inputs.run_id)),
            run_id: self.inputs.run_id.clone(),
            task_id: self.inputs.task.id.clone(),
            phase,
            runner: self.matrix.runner.clone(),
            policy_envelope_id: run.policy_envelope_id.clone(),
            intent_lock_id: run.intent_lock_id.clone(),
            capability_grant_ids: self.inputs.grants.iter().map(|g| g.id.clone()).collect(),
            expected_output_schemas: vec!["craik.runner_step_result".into()],
            input_prompt: format!(
                "{} — phase {}: {}",
                self.inputs.task.title,
                phase.as_str(),
                self.inputs.task.objective
            ),
            context,
            redaction_required: true,
            created_at: ts(self.clock.now()),
        }
    }

    fn step(&mut self, phase: Phase) -> Result<Flow, Error> {
        let request = self.request_for(phase);
        self.event_unsynced(&Event::StepRequest {
            at: request.created_at,
            request: Box::new(request.clone()),
        })?;
        if !self.runner_started {
            if let Err(why) = self.runner.start(&self.matrix.runner) {
                if why.starts_with(crate::run::SETUP_FAILED) {
                    return self.violation(&request, &why);
                }
                return self.violation(&request, &format!("runner handshake failed: {why}"));
            }
            self.runner_started = true;
        }
        let result = self.runner.step(&request);
        let runner_diagnostics = self.runner.take_diagnostics();
        let mut result = match result {
            Ok(r) => r,
            Err(why) if why.starts_with(crate::run::SETUP_FAILED) => {
                return self.violation(&request, &why);
            }
            Err(why) => {
                let mut why = format!("runner failed: {why}");
                if let Some(last) = runner_diagnostics.last() {
                    why.push_str(&format!(" (last diagnostic: {last})"));
                }
                return self.violation(&request, &why);
            }
        };
        result.diagnostics.extend(runner_diagnostics);
        if let Err(why) = check_result(&request, &result) {
            return self.violation(&request, &why);
        }
        let found = match directives(&mut result.observed_output) {
            Ok(d) => d,
            Err(why) => return self.violation(&request, &why),
        };
        if found.actions.len() > MAX_ACTIONS_PER_STEP || found.memory.len() > MAX_MEMORY_PER_STEP {
            return self.violation(
                &request,
                &format!(
                    "{} actions and {} memory proposals in one step; at most {MAX_ACTIONS_PER_STEP} and {MAX_MEMORY_PER_STEP}",
                    found.actions.len(),
                    found.memory.len()
                ),
            );
        }
        if !found.actions.is_empty() && !may_act(phase) {
            return self.violation(
                &request,
                &format!(
                    "{} action(s) proposed in phase `{}`; side effects are proposed in `act` only",
                    found.actions.len(),
                    phase.as_str()
                ),
            );
        }
        let n = self.step_count;
        let actions: Vec<ActionRecord> = found
            .actions
            .into_iter()
            .enumerate()
            .map(|(k, proposed)| ActionRecord::new(format!("action_{n}_{k}"), proposed))
            .collect();
        // Redact everything the runner said before it is persisted or shown.
        let mut diagnostics = Vec::new();
        redact_result(&mut result, &mut diagnostics);
        // Memory proposals: only from completed/partial steps, only from explicit specs.
        let mut memory_ids = Vec::new();
        let mut receipt_ids = Vec::new();
        if may_propose(result.status) {
            for (k, spec) in found.memory.iter().enumerate() {
                if let Some((memprop, receipt)) = self.propose_memory(&result, n, k, spec)? {
                    memory_ids.push(memprop);
                    receipt_ids.push(receipt);
                }
            }
        } else if !found.memory.is_empty() {
            diagnostics.push(format!(
                "{} memory proposal spec(s) ignored: a `{}` step may not propose memory",
                found.memory.len(),
                result.status.as_str()
            ));
        }
        result.memory_proposal_ids = memory_ids.clone();
        result.diagnostics.extend(diagnostics);
        result.redacted = true;
        self.write_output(&result, &actions, receipt_ids)?;
        let at = self.clock.now();
        self.event(&Event::StepResult {
            at: ts(at),
            result: Box::new(result.clone()),
            actions: actions.clone(),
            next: found.next,
        })?;
        self.step_count += 1;
        self.step_result_ids.push(result.id.clone());
        self.memory_ids.extend(memory_ids);
        let next = found.next.map(|n| match n {
            craik_contracts::NextStep::Continue => Next::Continue,
            craik_contracts::NextStep::Stop => Next::Stop,
        });
        match self.machine.accept(phase, result.status, next, at) {
            Ok(_) => {}
            Err(e) => {
                return self.violation(&request, &e.to_string());
            }
        }
        if let Some(reason) = self.machine.run().stop_reason.clone()
            && is_terminal(self.machine.run().status)
        {
            if self.machine.run().status == TaskRunStatus::Completed
                && let Some((status, why)) = self.unmet_obligations()
            {
                self.machine
                    .refuse_completion(status, why, self.clock.now());
            }
            let status = self.machine.run().status;
            let reason = self.machine.run().stop_reason.clone().unwrap_or(reason);
            self.finish_halt(status, reason)?;
            return Ok(Flow::Stop);
        }
        if phase == Phase::Act {
            self.pending = actions;
            self.outcomes.clear();
        }
        self.save_run()?;
        Ok(Flow::Go)
    }

    fn write_output(
        &mut self,
        result: &RunnerStepResult,
        actions: &[ActionRecord],
        receipt_ids: Vec<String>,
    ) -> Result<(), Error> {
        let mut observed = result.observed_output.clone();
        if !actions.is_empty() {
            let listed: Vec<Value> = actions
                .iter()
                .map(|a| {
                    json!({
                        "id": a.id,
                        "label": a.proposed.id,
                        "capability": a.proposed.capability,
                        "operation": a.proposed.operation,
                        "target": a.proposed.target,
                    })
                })
                .collect();
            observed.0.insert("actions".into(), Value::Array(listed));
        }
        let output = RunOutput {
            schema: Default::default(),
            version: Default::default(),
            id: result.id.replacen("runner_step_result_", "runout_", 1),
            run_id: result.run_id.clone(),
            step_result_id: result.id.clone(),
            task_id: result.task_id.clone(),
            phase: result.phase,
            summary: result.summary.clone(),
            observed_output: observed,
            diagnostics: result.diagnostics.clone(),
            receipt_ids,
            memory_proposal_ids: result.memory_proposal_ids.clone(),
            artifacts: result.artifacts.clone(),
            redacted: true,
            created_at: result.created_at,
        };
        // Idempotent across a crash: a step re-asked after recovery has the same ids.
        if self.output_ids.contains(&output.id) {
            return Ok(());
        }
        self.dir
            .append(OUTPUTS, &output, true)
            .map_err(io(&self.dir.path))?;
        self.output_ids.insert(output.id.clone());
        self.crash.synced(1);
        self.crash.point();
        Ok(())
    }

    /// A channel/contract violation by the runner: a denying kernel receipt, run failed.
    fn violation(&mut self, request: &RunnerStepRequest, why: &str) -> Result<Flow, Error> {
        let why = redact_checked(why)
            .map(|r| r.text)
            .unwrap_or_else(|what| format!("(diagnostic withheld: it held {what})"));
        // A setup failure is the operator's to fix, not the runner's doing: its own
        // pseudo-policy and wording.
        let setup = why.starts_with(crate::run::SETUP_FAILED);
        let draft = ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.matrix.runner.id.clone(),
            capability: "runner.step".into(),
            target: request.id.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: why.clone(),
            result: result(ReceiptStatus::Failed, &why),
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: exec::digest(compact(&json(request)).as_bytes()),
            decision: Decision::Deny,
            determining_policies: vec![if setup {
                "kernel.runner-setup".into()
            } else {
                "kernel.runner-violation".into()
            }],
            decided_by: DecidedBy {
                kind: DecidedByKind::Kernel,
                by: String::new(),
            },
            mode: self.mode(),
            action: None,
        };
        self.receipt(draft)?;
        let reason = if setup {
            why
        } else {
            format!("runner violation: {why}")
        };
        self.halt(TaskRunStatus::Failed, reason)?;
        Ok(Flow::Stop)
    }

    fn mode(&self) -> Mode {
        if self.inputs.shadow {
            Mode::Shadow
        } else {
            Mode::Enforce
        }
    }

    fn decision_request(&self, action: &ActionRecord, approvals: Vec<Approval>) -> DecisionRequest {
        let p = &action.proposed;
        let payload = match (p.content.as_ref(), p.edits.is_empty(), p.argv.as_ref()) {
            (Some(content), _, _) => Some(exec::digest(content.as_bytes())),
            (None, false, _) => Some(exec::digest(compact(&json(&p.edits)).as_bytes())),
            // A command's identity is what runs: the resolved program and the cwd, so an
            // approval never covers a different binary behind the same name.
            (None, true, Some(argv)) => Some(exec::digest(
                compact(&json!({"argv": argv, "run": self.command_identity(argv)})).as_bytes(),
            )),
            (None, true, None) => None,
        };
        let run = self.machine.run();
        DecisionRequest {
            runner: self.runner_ref(),
            task_id: self.inputs.task.id.clone(),
            capability: p.capability.clone(),
            target: p.target.clone(),
            argv: p.argv.clone(),
            operation: p.operation.clone(),
            profile: self.inputs.profile,
            phase: Phase::Act,
            iteration: run.iteration,
            max_iterations: run.max_iterations,
            task_mode: self.inputs.task.mode,
            intent: self.inputs.intent.as_ref().map(IntentScope::from),
            approvals,
            payload,
            fail_open: self.inputs.envelope.as_ref().is_some_and(|e| e.fail_open),
            envelope: self.inputs.envelope.as_ref().map(EnvelopeRules::from),
        }
    }

    /// Why a run the runner says is done may not end `completed`: an allowed side effect
    /// that failed (`failed`, naming it), or a capability the envelope lists under
    /// `verification_required` that never ran and passed (`blocked`). Shadow runs perform
    /// nothing, so they owe nothing.
    fn unmet_obligations(&self) -> Option<(TaskRunStatus, String)> {
        if self.inputs.shadow {
            return None;
        }
        let actions = self.actions_by_id();
        let failed: Vec<String> = self
            .all_outcomes
            .iter()
            .filter(|o| o.decision == "allow" && !o.ok)
            .map(|o| {
                let what = actions
                    .get(&o.action)
                    .map(|a| format!("{} {}", a.proposed.capability, a.shown()))
                    .unwrap_or_default();
                format!("{} ({what}): {}", o.action, o.summary)
            })
            .collect();
        if !failed.is_empty() {
            return Some((
                TaskRunStatus::Failed,
                format!(
                    "the runner said done, but {} side effect(s) failed: {}",
                    failed.len(),
                    failed.join("; ")
                ),
            ));
        }
        let required = self
            .inputs
            .envelope
            .as_ref()
            .map(|e| e.verification_required.clone())
            .unwrap_or_default();
        let unmet: Vec<String> = required
            .into_iter()
            .filter(|entry| {
                !self.all_outcomes.iter().any(|o| {
                    o.ok && o.decision == "allow"
                        && actions.get(&o.action).is_some_and(|a| {
                            EnvelopeRules::covering(
                                std::slice::from_ref(entry),
                                &a.proposed.capability,
                            )
                            .is_some()
                        })
                })
            })
            .collect();
        if unmet.is_empty() {
            return None;
        }
        Some((
            TaskRunStatus::Blocked,
            format!(
                "the runner said done, but the policy envelope's verification_required never ran and passed: {}",
                unmet.join(", ")
            ),
        ))
    }

    /// What a command resolves to here: `program <real path>, cwd <workspace>`.
    fn command_identity(&self, argv: &[String]) -> String {
        let program = argv.first().map_or_else(
            || Err("empty argv".to_owned()),
            |p| exec::resolve_program(p, &self.workspace.root),
        );
        match program {
            Ok(path) => format!(
                "program {}, cwd {}",
                path.display(),
                self.workspace.root.display()
            ),
            Err(e) => format!(
                "program unresolved ({e}), cwd {}",
                self.workspace.root.display()
            ),
        }
    }

    /// The host's own preconditions on an action's shape (what the executors need).
    fn shape_problem(&self, action: &ActionRecord) -> Option<String> {
        if let Some(refused) = &action.refused {
            return Some(refused.clone());
        }
        let p = &action.proposed;
        // The executor is the one the (capability, operation) pair names in the kernel's
        // table; a pair outside it is refused here and again by the kernel.
        let problem = match Effect::of(&p.capability, &p.operation) {
            None => Some("operation does not belong to this capability"),
            Some(Effect::ReadFile) if p.target.is_none() => Some("`read` needs a `target`"),
            Some(Effect::WriteFile) if p.content.is_none() || p.target.is_none() => {
                Some("`write` needs `target` and `content`")
            }
            Some(Effect::PatchFile) if p.edits.is_empty() || p.target.is_none() => {
                Some("`patch` needs `target` and `edits`")
            }
            Some(Effect::ReadFile | Effect::WriteFile | Effect::PatchFile) => None,
            Some(Effect::Execute) if p.argv.as_ref().is_none_or(Vec::is_empty) => {
                Some("shell actions need a non-empty `argv`")
            }
            Some(Effect::Execute) => None,
            Some(Effect::CreateFile | Effect::DeleteFile | Effect::External) => {
                Some("Craik has no executor for this capability in a governed run")
            }
        };
        if let Some(problem) = problem {
            return Some(format!("{}: {problem}", action.id));
        }
        None
    }

    /// The approvals the kernel may honour: only those whose signed review journal verifies
    /// under this home's key and names this approval, this run, an approving `user:`, and
    /// the request hash. Every fact handed to the kernel (hash, approver, profile, task,
    /// expiry) comes from the signed review receipt, never from the plain approval file, so
    /// editing `approvals/<id>.json` grants nothing. Single use comes from the run's own
    /// journal (`used_approvals`).
    fn approvals_as_facts(&self) -> Result<Vec<Approval>, Error> {
        use craik_kernel::Signer as _;
        let mut ring = KeyRing::new();
        ring.add(&self.signer.public_key())
            .map_err(|e| Error::internal(format!("signing key: {e}")))?;
        Ok(self
            .approvals()?
            .into_iter()
            .filter(|a| {
                a.status == ApprovalStatus::Approved || a.status == ApprovalStatus::Consumed
            })
            .filter_map(|a| {
                let signed = signed_review(&self.home, &ring, &a.id, &self.inputs.run_id)?;
                Some(Approval {
                    used: a.status == ApprovalStatus::Consumed
                        || self.used_approvals.contains(&a.id),
                    id: a.id,
                    request_hash: signed.request_hash,
                    approved_by: signed.approved_by,
                    profile: signed.profile,
                    task_id: signed.task_id,
                    expires_at: signed.expires_at,
                })
            })
            .collect())
    }

    fn process_actions(&mut self) -> Result<Flow, Error> {
        while let Some(action) = self.pending.first().cloned() {
            let approvals = self.approvals_as_facts()?;
            let request = self.decision_request(&action, approvals.clone());
            let options = DecideOptions {
                now: self.clock.now(),
                workspace_root: self.workspace_root(),
                mode: self.mode(),
            };
            let verdict = match self.shape_problem(&action) {
                Some(why) => self
                    .bundle
                    .refusal(self.mode(), "kernel.invalid-request", why),
                None => self.bundle.decide_for_runner(
                    &self.grants,
                    &request,
                    &options,
                    RunnerSupport::of(&self.matrix, &request.capability),
                ),
            };
            let approver = verdict.approval.as_ref().and_then(|id| {
                approvals
                    .iter()
                    .find(|a| &a.id == id)
                    .map(|a| format!("{} via {id}", a.approved_by))
            });
            let mut draft = decision_draft(
                &self.inputs,
                &self.runner_ref().id,
                &action,
                &verdict,
                approver,
            );
            if let Some(argv) = &action.proposed.argv {
                draft.target = format!("{} ({})", draft.target, self.command_identity(argv));
            }
            // The exact action decided (ids, content, edits, argv): what an approval file
            // shows must hash to this.
            draft
                .result
                .metadata
                .0
                .insert("action_sha256".into(), json!(action_digest(&action)));
            draft
                .result
                .metadata
                .0
                .insert("operation".into(), json!(action.proposed.operation));
            let receipt = self.receipt(draft)?;
            if let Some(id) = &verdict.approval {
                self.used_approvals.insert(id.clone());
                self.set_approval_status(id, ApprovalStatus::Consumed)?;
            }
            if verdict.policy_exception {
                self.policy_exceptions.push(format!(
                    "{}: fail-open let an evaluation error through ({})",
                    action.id,
                    verdict.errors.join("; ")
                ));
            }
            if verdict.mode == Mode::Shadow {
                let outcome = Outcome {
                    action: action.id.clone(),
                    label: action.proposed.id.clone(),
                    decision: decision_name(verdict.decision).into(),
                    ok: false,
                    summary: format!(
                        "shadow: would be {}; not executed",
                        decision_name(verdict.decision)
                    ),
                    output: None,
                    receipt,
                };
                self.record_outcome(outcome)?;
                continue;
            }
            match verdict.decision {
                Decision::Allow => self.execute(&action, &verdict)?,
                Decision::RequiresApproval => {
                    self.park_for_approval(&action, &verdict)?;
                    return Ok(Flow::Stop);
                }
                Decision::Deny => {
                    let outcome = Outcome {
                        action: action.id.clone(),
                        label: action.proposed.id.clone(),
                        decision: "deny".into(),
                        ok: false,
                        summary: verdict.reasons.join("; "),
                        output: None,
                        receipt,
                    };
                    self.record_outcome(outcome)?;
                    let (status, what) = if verdict.is_intent_stop() {
                        (TaskRunStatus::Interrupted, "intent lock")
                    } else {
                        (TaskRunStatus::Blocked, "denied")
                    };
                    // When no grant applied, say why each of the task's grants did not
                    // (expired, another capability, operation, excluded, no pattern matched).
                    let notes = if verdict.grant_notes.is_empty() {
                        String::new()
                    } else {
                        format!("; grants: {}", verdict.grant_notes.join("; "))
                    };
                    self.halt(
                        status,
                        format!(
                            "{what}: {} {} {} — {} [{}]{notes}",
                            action.id,
                            action.proposed.capability,
                            action.shown(),
                            verdict.reasons.join("; "),
                            verdict.determining.join(", ")
                        ),
                    )?;
                    return Ok(Flow::Stop);
                }
            }
        }
        self.save_run()?;
        Ok(Flow::Go)
    }

    fn record_outcome(&mut self, outcome: Outcome) -> Result<(), Error> {
        self.event(&Event::Outcome {
            at: ts(self.clock.now()),
            outcome: outcome.clone(),
        })?;
        self.pending.retain(|a| a.id != outcome.action);
        self.outcomes.push(outcome.clone());
        self.all_outcomes.push(outcome);
        Ok(())
    }

    fn outcome_receipt(
        &mut self,
        action: &ActionRecord,
        ok: bool,
        summary: &str,
        output: Option<String>,
    ) -> Result<(), Error> {
        let request = self.decision_request(action, Vec::new());
        let hash = craik_kernel::request_hash(&self.bundle, &request, &self.workspace_root())
            .unwrap_or_default();
        let status = if ok {
            ReceiptStatus::Passed
        } else {
            ReceiptStatus::Failed
        };
        let draft = ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.runner_ref().id,
            capability: action.proposed.capability.clone(),
            target: target_text(action),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: format!("outcome of {}", action.id),
            result: result(status, summary),
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: hash,
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Outcome,
                by: String::new(),
            },
            mode: self.mode(),
            action: Some(action.id.clone()),
        };
        let receipt = self.receipt(draft)?;
        self.record_outcome(Outcome {
            action: action.id.clone(),
            label: action.proposed.id.clone(),
            decision: "allow".into(),
            ok,
            summary: summary.to_owned(),
            output,
            receipt,
        })
    }

    /// Performs an allowed action, write-ahead: the decision receipt is already on disk.
    fn execute(&mut self, action: &ActionRecord, verdict: &Verdict) -> Result<(), Error> {
        let p = action.proposed.clone();
        let root = self.workspace_root();
        let target = match p.target.as_deref().map(|t| TargetPath::normalize(&root, t)) {
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                return self.outcome_receipt(action, false, &format!("refused target: {e}"), None);
            }
            None => None,
        };
        let rel = target
            .as_ref()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default();
        // The executor comes from the pair the kernel decided, never from the label alone.
        let effect = Effect::of(&p.capability, &p.operation);
        if verdict.decision != Decision::Allow {
            return self.outcome_receipt(action, false, "not allowed; not executed", None);
        }
        match effect {
            Some(Effect::ReadFile) => {
                self.event(&Event::Executing {
                    at: ts(self.clock.now()),
                    action: action.id.clone(),
                    pre: None,
                    post: None,
                })?;
                match self.workspace.read_text(&rel) {
                    Ok(text) => {
                        let shown = match redact_checked(&text) {
                            Ok(r) => r.text,
                            Err(what) => format!("[withheld: the file holds {what}]"),
                        };
                        let shown: String = shown.chars().take(16 * 1024).collect();
                        let summary = format!("read {rel} ({} bytes)", text.len());
                        self.outcome_receipt(action, true, &summary, Some(shown))
                    }
                    Err(e) => {
                        self.outcome_receipt(action, false, &format!("read failed: {e}"), None)
                    }
                }
            }
            Some(effect @ (Effect::WriteFile | Effect::PatchFile)) => {
                let pre = match self.workspace.state(&rel) {
                    Ok(s) => s,
                    Err(e) => {
                        return self.outcome_receipt(action, false, &format!("refused: {e}"), None);
                    }
                };
                let new_text = if effect == Effect::WriteFile {
                    Ok(p.content.clone().unwrap_or_default())
                } else {
                    self.workspace
                        .read_text(&rel)
                        .and_then(|t| exec::apply_edits(&t, &p.edits))
                };
                let new_text = match new_text {
                    Ok(t) => t,
                    Err(e) => {
                        return self.outcome_receipt(
                            action,
                            false,
                            &format!("patch failed: {e}"),
                            None,
                        );
                    }
                };
                let post = exec::digest(new_text.as_bytes());
                self.event(&Event::Executing {
                    at: ts(self.clock.now()),
                    action: action.id.clone(),
                    pre: pre.hash().map(str::to_owned),
                    post: Some(post.clone()),
                })?;
                match self.workspace.write(&rel, new_text.as_bytes(), &action.id) {
                    Ok(()) => {
                        self.crash.synced(2);
                        self.crash.point();
                        let verb = if pre == FileState::Missing {
                            "created"
                        } else {
                            "updated"
                        };
                        self.outcome_receipt(
                            action,
                            true,
                            &format!("{verb} {rel} ({} bytes, {post})", new_text.len()),
                            None,
                        )
                    }
                    Err(e) if e.starts_with(exec::UNCERTAIN_PREFIX) => {
                        // Not "write failed": the rename happened. Check the bytes now and
                        // record what is true: written, durability uncertain.
                        let landed = self.workspace.state(&rel).ok();
                        let ok = landed.as_ref().and_then(FileState::hash) == Some(post.as_str());
                        let summary = if ok {
                            format!("wrote {rel} ({post}), but {e}")
                        } else {
                            format!("write of {rel} uncertain: {e}; the file does not hold {post}")
                        };
                        self.outcome_receipt(action, ok, &summary, None)
                    }
                    Err(e) => {
                        self.outcome_receipt(action, false, &format!("write failed: {e}"), None)
                    }
                }
            }
            Some(Effect::Execute) => {
                let argv = p.argv.clone().unwrap_or_default();
                let env = match self.command_env(&action.id) {
                    Ok(env) => env,
                    Err(e) => {
                        return self.outcome_receipt(
                            action,
                            false,
                            &format!("not run: confinement: {e}"),
                            None,
                        );
                    }
                };
                let confinement = env.sandbox.describe();
                self.event(&Event::Executing {
                    at: ts(self.clock.now()),
                    action: action.id.clone(),
                    pre: None,
                    post: None,
                })?;
                let timeout = p
                    .timeout_ms
                    .map_or(exec::MAX_TIMEOUT, Duration::from_millis);
                let ran = exec::run_command(&argv, &self.workspace.root, timeout, &env);
                // The command's HOME and TMPDIR die with it.
                let _ = std::fs::remove_dir_all(env.home.parent().unwrap_or(&env.home));
                match ran {
                    Ok(done) => {
                        self.crash.point();
                        let ok = done.exit_code == Some(0) && !done.timed_out;
                        let capture = format!("{}{}", done.stdout, done.stderr);
                        let shown = match redact_checked(&capture) {
                            Ok(r) => r.text,
                            Err(what) => format!("[withheld: the output held {what}]"),
                        };
                        let summary = if done.timed_out {
                            format!("{} timed out; its process group was killed", done.program)
                        } else {
                            format!(
                                "{} exited {}{}",
                                done.program,
                                done.exit_code.map_or("by signal".into(), |c| c.to_string()),
                                if done.truncated {
                                    " (output truncated)"
                                } else {
                                    ""
                                }
                            )
                        };
                        let summary = format!("{summary}; confinement: {confinement}");
                        self.outcome_receipt(action, ok, &summary, Some(shown))
                    }
                    Err(e) => self.outcome_receipt(
                        action,
                        false,
                        &format!("not run: {e}; confinement: {confinement}"),
                        None,
                    ),
                }
            }
            Some(Effect::CreateFile | Effect::DeleteFile | Effect::External) | None => {
                self.outcome_receipt(action, false, "no executor", None)
            }
        }
    }

    /// A command's sandbox: it reads the system paths and the workspace, writes only the
    /// workspace and its own fresh HOME and TMPDIR (under the run directory, outside the
    /// workspace), never Craik's home otherwise, and has no network (no shell capability is a
    /// network one). Required outside `trusted-local`.
    fn command_env(&self, action_id: &str) -> Result<exec::CommandEnv, String> {
        let base = self.dir.path.join("sandbox").join(action_id);
        let _ = std::fs::remove_dir_all(&base);
        let (home, tmp) = (base.join("home"), base.join("tmp"));
        for dir in [&home, &tmp] {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let sandbox = crate::confine::Sandbox::for_profile(
            Vec::new(),
            vec![self.workspace.root.clone(), home.clone(), tmp.clone()],
            Some(&self.home.root),
            false,
            self.inputs.profile == PolicyProfile::TrustedLocal,
        )?;
        Ok(exec::CommandEnv { sandbox, home, tmp })
    }

    fn park_for_approval(&mut self, action: &ActionRecord, verdict: &Verdict) -> Result<(), Error> {
        let existing = self.approvals()?;
        let n = existing.iter().filter(|a| a.action.id == action.id).count();
        let id = format!(
            "approval_{}_{}_{n}",
            suffix(&self.inputs.run_id),
            action.id.trim_start_matches("action_")
        );
        let record = ApprovalRecord {
            id: id.clone(),
            run_id: self.inputs.run_id.clone(),
            task_id: self.inputs.task.id.clone(),
            runner_id: self.runner_ref().id,
            profile: self.inputs.profile,
            action: action.clone(),
            request_hash: verdict.request_hash.clone(),
            policies: verdict.determining.clone(),
            reasons: verdict.reasons.clone(),
            status: ApprovalStatus::Pending,
            requested_at: ts(self.clock.now()),
            decided_by: None,
            decided_at: None,
            reason: None,
            expires_at: None,
            review: None,
        };
        if !existing.iter().any(|a| a.id == id) {
            write_approval(&self.dir, &record)?;
            self.crash.synced(2);
            self.crash.point();
        }
        let reason = format!(
            "awaiting approval {id} for {} {} {}",
            action.id,
            action.proposed.capability,
            action.shown()
        );
        let at = self.clock.now();
        self.event(&Event::Parked {
            at: ts(at),
            reason: reason.clone(),
            approval: id,
        })?;
        self.machine.park(reason, at);
        // A checkpoint, so a truncation of what is written is caught while the journal is open.
        let line = self
            .journal
            .checkpoint_now(self.clock.now(), &self.signer)
            .map_err(|e| Error::internal(format!("checkpoint: {e}")))?;
        self.journal_line(&line)?;
        self.save_run()
    }

    /// Halts the run for good: event, then finalisation.
    pub fn halt(&mut self, status: TaskRunStatus, reason: String) -> Result<(), Error> {
        self.machine.halt(status, reason, self.clock.now());
        let status = self.machine.run().status;
        let reason = self.machine.run().stop_reason.clone().unwrap_or_default();
        self.finish_halt(status, reason)
    }

    fn finish_halt(&mut self, status: TaskRunStatus, reason: String) -> Result<(), Error> {
        if self.halted.is_some() {
            return Ok(());
        }
        self.event(&Event::Halted {
            at: ts(self.clock.now()),
            status,
            reason: reason.clone(),
        })?;
        self.halted = Some((status, reason.clone()));
        self.finalize(status, &reason)
    }

    /// Closes the journal, writes the handoff, links memory proposals to it, saves the run.
    fn finalize(&mut self, status: TaskRunStatus, reason: &str) -> Result<(), Error> {
        let handoff_id = format!("handoff_{}", suffix(&self.inputs.run_id));
        self.machine.set_handoff(handoff_id.clone());
        if !self.closed {
            let line = self
                .journal
                .close(self.clock.now(), &self.signer)
                .map_err(|e| Error::internal(format!("closing the journal: {e}")))?;
            self.closed = true;
            self.journal_line(&line)?;
        }
        if !self.dir.file(HANDOFF).is_file() {
            let handoff = self.handoff(handoff_id.clone(), status, reason);
            self.dir
                .write_json(HANDOFF, &handoff, true)
                .map_err(io(&self.dir.path))?;
            self.crash.synced(2);
            self.crash.point();
        }
        // A run that ended leaves nothing to approve: its pending approvals close with it.
        for approval in self.approvals()? {
            if approval.status == ApprovalStatus::Pending {
                self.set_approval_status(&approval.id, ApprovalStatus::Closed)?;
            }
        }
        for id in self.memory_ids.clone() {
            let path = self.home.memory().join(format!("{id}.json"));
            if let Ok(mut proposal) = crate::run::store::read_json::<MemoryProposal>(&path)
                && proposal.handoff_id.is_none()
            {
                proposal.handoff_id = Some(handoff_id.clone());
                write_memory(&self.home, &proposal)?;
            }
        }
        self.save_run()
    }

    fn handoff(&self, id: String, status: TaskRunStatus, reason: &str) -> Handoff {
        let run = self.machine.run();
        let done: Vec<&Outcome> = self.all_outcomes.iter().filter(|o| o.ok).collect();
        let actions = self.actions_by_id();
        let action_of = |o: &Outcome| -> Option<&ActionRecord> { actions.get(&o.action) };
        let mut files_changed = Vec::new();
        let mut commands_run = Vec::new();
        let mut tests_run = Vec::new();
        let mut completed_actions = Vec::new();
        for o in &done {
            completed_actions.push(format!("{}: {}", o.action, o.summary));
            if let Some(a) = action_of(o) {
                match (
                    a.proposed.capability.as_str(),
                    a.proposed.operation.as_str(),
                ) {
                    (c, "write" | "patch") if c.starts_with("repo.write") => {
                        files_changed.push(a.proposed.target.clone().unwrap_or_default());
                    }
                    (c, "execute") => {
                        let line = a.proposed.argv.clone().unwrap_or_default().join(" ");
                        if c == "shell.test" {
                            tests_run.push(line.clone());
                        }
                        commands_run.push(line);
                    }
                    _ => {}
                }
            }
        }
        let mut risks = Vec::new();
        let mut next_steps = Vec::new();
        let mut context_debt = Vec::new();
        for o in self.all_outcomes.iter().filter(|o| !o.ok) {
            risks.push(format!(
                "{} ({}) did not complete: {}",
                o.action, o.decision, o.summary
            ));
        }
        for a in &self.pending {
            context_debt.push(format!(
                "{} ({} {}) was proposed and never completed",
                a.id,
                a.proposed.capability,
                a.shown()
            ));
        }
        match status {
            TaskRunStatus::Completed => {}
            TaskRunStatus::Blocked => {
                next_steps.push(format!("Review why the run was blocked: {reason}"));
            }
            TaskRunStatus::Interrupted => {
                next_steps.push(format!(
                    "The run was interrupted: {reason}. Re-scope or start a new run."
                ));
            }
            _ => next_steps.push(format!("Investigate the failure: {reason}")),
        }
        if !self.memory_ids.is_empty() {
            next_steps.push(format!(
                "Review {} memory proposal(s): `craik memory list`",
                self.memory_ids.len()
            ));
        }
        let handoff_status = match status {
            TaskRunStatus::Completed => HandoffStatus::Completed,
            TaskRunStatus::Blocked => HandoffStatus::Blocked,
            TaskRunStatus::Failed => HandoffStatus::Failed,
            _ => HandoffStatus::Incomplete,
        };
        Handoff {
            schema: Default::default(),
            version: Default::default(),
            id,
            task_id: self.inputs.task.id.clone(),
            project_id: self.inputs.task.project_id.clone(),
            intent_lock_id: run.intent_lock_id.clone(),
            agent: self.matrix.runner.id.clone(),
            status: handoff_status,
            summary: format!(
                "Run {} {} after {} step(s) in phase {} (iteration {} of {}): {reason}. {} action(s) completed.",
                run.id,
                status.as_str(),
                self.step_result_ids.len(),
                run.phase.as_str(),
                run.iteration,
                run.max_iterations,
                done.len()
            ),
            self_audit: SelfAudit {
                schema_validated: true,
                redaction_reviewed: true,
                receipts_reviewed: true,
                assumptions_reviewed: false,
                validation_recorded: !tests_run.is_empty(),
                policy_exceptions_disclosed: true,
                notes: vec![format!(
                    "written by craik {} from the run's journals; the runner's own claims are not trusted",
                    env!("CARGO_PKG_VERSION")
                )],
            },
            completed_actions,
            files_changed,
            artifacts: self.step_result_ids.clone(),
            commands_run,
            tests_run,
            assumptions: Vec::new(),
            context_debt,
            policy_exceptions: self.policy_exceptions.clone(),
            facts_learned: Vec::new(),
            facts_invalidated: Vec::new(),
            contradictions_opened: Vec::new(),
            adjudication_ids: Vec::new(),
            unresolved_disagreements: Vec::new(),
            open_human_delegation_ids: Vec::new(),
            scope_change_request_ids: Vec::new(),
            scope_change_result_ids: Vec::new(),
            risks,
            next_steps,
            receipt_ids: run.receipt_ids.clone(),
            memory_proposal_ids: self.memory_ids.clone(),
            created_at: ts(self.clock.now()),
        }
    }

    fn actions_by_id(&self) -> BTreeMap<String, ActionRecord> {
        let events: Vec<Event> = self.dir.read_lines(EVENTS).unwrap_or_default();
        events
            .into_iter()
            .filter_map(|e| match e {
                Event::StepResult { actions, .. } => Some(actions),
                _ => None,
            })
            .flatten()
            .map(|a| (a.id.clone(), a))
            .collect()
    }

    fn propose_memory(
        &mut self,
        result: &RunnerStepResult,
        step: usize,
        k: usize,
        spec: &MemoryProposalSpec,
    ) -> Result<Option<(String, String)>, Error> {
        let id = format!("memprop_{}_{step}_{k}", suffix(&self.inputs.run_id));
        let action = ActionRecord::new(
            id.clone(),
            craik_contracts::ProposedAction {
                id: id.clone(),
                capability: "memory.propose".into(),
                operation: "propose".into(),
                target: Some(spec.fact.scope.as_str().into()),
                argv: None,
                content: None,
                edits: Vec::new(),
                timeout_ms: None,
                reason: Some(spec.rationale.clone()),
            },
        );
        let request = self.decision_request(&action, Vec::new());
        let options = DecideOptions {
            now: self.clock.now(),
            workspace_root: self.workspace_root(),
            mode: self.mode(),
        };
        let verdict = self.bundle.decide_for_runner(
            &self.grants,
            &request,
            &options,
            RunnerSupport::of(&self.matrix, &request.capability),
        );
        let receipt = self.receipt(decision_draft(
            &self.inputs,
            &self.runner_ref().id,
            &action,
            &verdict,
            None,
        ))?;
        if verdict.decision != Decision::Allow || verdict.mode == Mode::Shadow {
            return Ok(None);
        }
        let mut fact = spec.fact.clone();
        let mut rationale = spec.rationale.clone();
        for text in [
            &mut fact.entity,
            &mut fact.relation,
            &mut fact.value,
            &mut fact.source,
            &mut rationale,
        ] {
            match redact_checked(text) {
                Ok(r) => *text = r.text,
                Err(_) => return Ok(None),
            }
        }
        let runout = result.id.replacen("runner_step_result_", "runout_", 1);
        let proposal = MemoryProposal {
            schema: Default::default(),
            version: Default::default(),
            id: id.clone(),
            task_id: self.inputs.task.id.clone(),
            run_id: Some(self.inputs.run_id.clone()),
            step_result_id: Some(result.id.clone()),
            handoff_id: None,
            operation: spec.operation,
            fact,
            evidence: vec![EvidenceReference {
                schema: Default::default(),
                version: Default::default(),
                id: format!("evidence_{}", id.trim_start_matches("memprop_")),
                source: format!("craik run {}", self.inputs.run_id),
                kind: EvidenceKind::Other,
                locator: format!("runs/{}/{OUTPUTS}#{runout}", self.inputs.run_id),
                summary: rationale,
                captured_at: Some(result.created_at),
                metadata: Object::new(),
            }],
            requires_approval: true,
            status: ProposalStatus::Pending,
            decision_reason: None,
            decided_by: None,
            decided_at: None,
        };
        let path = self.home.memory().join(format!("{id}.json"));
        if !path.exists() {
            write_memory(&self.home, &proposal)?;
            self.crash.synced(2);
            self.crash.point();
        }
        Ok(Some((id, receipt)))
    }

    fn approvals(&self) -> Result<Vec<ApprovalRecord>, Error> {
        read_approvals(&self.dir)
    }

    fn set_approval_status(&mut self, id: &str, status: ApprovalStatus) -> Result<(), Error> {
        if let Some(mut record) = self.approvals()?.into_iter().find(|a| a.id == id) {
            record.status = status;
            write_approval(&self.dir, &record)?;
            self.crash.synced(2);
            self.crash.point();
        }
        Ok(())
    }

    /// fsyncs this process made for the run.
    pub fn fsyncs(&self) -> u64 {
        self.crash.fsyncs()
    }

    /// The run's receipts journal path.
    pub fn journal_path(&self) -> PathBuf {
        self.journal_file.path().to_owned()
    }
}

fn budget_of(inputs: &Inputs) -> Option<time::Duration> {
    inputs
        .budget_secs
        .map(|s| time::Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX)))
}

fn initial_run(inputs: &Inputs) -> TaskRun {
    TaskRun {
        schema: Default::default(),
        version: Default::default(),
        id: inputs.run_id.clone(),
        task_id: inputs.task.id.clone(),
        case_file_id: format!("case_{}", inputs.task.id.trim_start_matches("task_")),
        policy_envelope_id: inputs.envelope.as_ref().map_or_else(
            || format!("policy_{}", inputs.profile.as_str().replace('-', "_")),
            |e| e.id.clone(),
        ),
        intent_lock_id: inputs.intent.as_ref().map(|i| i.id.clone()),
        runner_id: "runner_fixture".into(),
        runner_mode: craik_contracts::RunnerMode::Fixture,
        status: TaskRunStatus::Pending,
        phase: Phase::Plan,
        iteration: 0,
        max_iterations: inputs.max_iterations,
        started_at: inputs.started_at,
        phase_started_at: inputs.started_at,
        updated_at: inputs.started_at,
        ended_at: None,
        stop_reason: None,
        receipt_ids: Vec::new(),
        handoff_id: None,
        runner_metadata: Vec::new(),
    }
}

fn check_result(request: &RunnerStepRequest, result: &RunnerStepResult) -> Result<(), String> {
    let mut wrong = Vec::new();
    if result.request_id != request.id {
        wrong.push(format!(
            "request_id `{}` (expected `{}`)",
            Truncated(&result.request_id),
            request.id
        ));
    }
    if result.run_id != request.run_id {
        wrong.push(format!("run_id `{}`", Truncated(&result.run_id)));
    }
    if result.task_id != request.task_id {
        wrong.push(format!("task_id `{}`", Truncated(&result.task_id)));
    }
    if result.runner.id != request.runner.id {
        wrong.push(format!("runner.id `{}`", Truncated(&result.runner.id)));
    }
    if result.phase != request.phase {
        wrong.push(format!(
            "phase `{}` (asked `{}`)",
            result.phase.as_str(),
            request.phase.as_str()
        ));
    }
    if !result.receipt_ids.is_empty() {
        wrong.push("receipt_ids (a runner never issues receipts)".into());
    }
    if !result.memory_proposal_ids.is_empty() {
        wrong.push("memory_proposal_ids (a runner only proposes specs)".into());
    }
    if craik_contracts::id_problem(&result.id).is_some()
        || !result.id.starts_with("runner_step_result_")
    {
        wrong.push(format!("id `{}`", Truncated(&result.id)));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("step result has wrong {}", wrong.join(", ")))
    }
}

fn redact_result(result: &mut RunnerStepResult, diagnostics: &mut Vec<String>) {
    match redact_checked(&result.summary) {
        Ok(r) => result.summary = r.text,
        Err(what) => {
            result.summary = "[withheld]".into();
            diagnostics.push(format!(
                "summary withheld: after redaction it still held {what}"
            ));
        }
    }
    let mut kept = Vec::new();
    for d in std::mem::take(&mut result.diagnostics) {
        match redact_checked(&d) {
            Ok(r) => kept.push(r.text),
            Err(what) => kept.push(format!("[diagnostic withheld: it held {what}]")),
        }
    }
    result.diagnostics = kept;
    let mut observed = Value::Object(std::mem::take(&mut result.observed_output.0));
    match redact_value(&mut observed) {
        Ok(_) => {
            if let Value::Object(map) = observed {
                result.observed_output = Object(map);
            }
        }
        Err(what) => {
            result.observed_output = Object::new();
            diagnostics.push(format!(
                "observed_output withheld: after redaction it still held {what}"
            ));
        }
    }
}

fn result(status: ReceiptStatus, summary: &str) -> ReceiptResult {
    ReceiptResult {
        status,
        summary: summary.chars().take(1000).collect(),
        metadata: Object::new(),
    }
}

fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::RequiresApproval => "requires_approval",
        Decision::Deny => "deny",
    }
}

fn target_text(action: &ActionRecord) -> String {
    action.shown()
}

fn decision_draft(
    inputs: &Inputs,
    actor: &str,
    action: &ActionRecord,
    verdict: &Verdict,
    approver: Option<String>,
) -> ReceiptDraft {
    let (status, summary) = match verdict.decision {
        Decision::Allow => (ReceiptStatus::Passed, "allowed".to_owned()),
        Decision::RequiresApproval => (ReceiptStatus::Blocked, "requires approval".to_owned()),
        Decision::Deny => (ReceiptStatus::Denied, "denied".to_owned()),
    };
    let decided_by = match (&approver, verdict.deny_kind) {
        (Some(by), _) => DecidedBy {
            kind: DecidedByKind::Approval,
            by: by.clone(),
        },
        (None, Some(DenyKind::NotPermitted)) => DecidedBy {
            kind: DecidedByKind::Default,
            by: String::new(),
        },
        (None, Some(DenyKind::InvalidRequest)) => DecidedBy {
            kind: DecidedByKind::Kernel,
            by: String::new(),
        },
        _ => DecidedBy {
            kind: DecidedByKind::Policy,
            by: String::new(),
        },
    };
    let reason = if verdict.reasons.is_empty() {
        verdict.determining.join(", ")
    } else {
        verdict.reasons.join("; ")
    };
    ReceiptDraft {
        task_id: inputs.task.id.clone(),
        actor: actor.to_owned(),
        capability: action.proposed.capability.clone(),
        target: target_text(action),
        policy_profile: inputs.profile,
        fail_open: verdict.policy_exception,
        reason: redact_checked(&reason).map(|r| r.text).unwrap_or_default(),
        result: result(status, &summary),
        redacted: true,
        policy_set: verdict.policy_set.clone(),
        request_hash: verdict.request_hash.clone(),
        decision: verdict.decision,
        determining_policies: verdict.determining.clone(),
        decided_by,
        mode: verdict.mode,
        action: Some(action.id.clone()),
    }
}

/// Receipts of a journal, indexed for recovery.
struct Indexed {
    by_action: BTreeMap<String, Vec<ReceiptPayload>>,
    approvals_used: HashSet<String>,
    ids: Vec<String>,
    closed: bool,
}

/// The first receipt of a run: `request_hash` is the `sha256:` of the exact bytes of
/// `inputs.json`; the metadata names the hashes of its parts an auditor cares about.
fn inputs_draft(inputs: &Inputs, bytes: &[u8], actor: &str) -> ReceiptDraft {
    let part = |v: Result<Vec<u8>, String>| v.map(|b| exec::digest(&b)).unwrap_or_default();
    let mut metadata = craik_contracts::Object::new();
    metadata
        .0
        .insert("inputs_sha256".into(), json!(exec::digest(bytes)));
    metadata.0.insert(
        "grants_sha256".into(),
        json!(crate::run::grants_digest(&inputs.grants)),
    );
    metadata.0.insert(
        "envelope_sha256".into(),
        json!(part(craik_kernel::canonical_bytes(&inputs.envelope))),
    );
    metadata.0.insert(
        "intent_sha256".into(),
        json!(part(craik_kernel::canonical_bytes(&inputs.intent))),
    );
    metadata.0.insert(
        "workspace".into(),
        json!(inputs.workspace.display().to_string()),
    );
    metadata.0.insert("runner".into(), json!(inputs.runner));
    ReceiptDraft {
        task_id: inputs.task.id.clone(),
        actor: actor.to_owned(),
        capability: RUN_INPUTS.into(),
        target: crate::run::store::INPUTS.into(),
        policy_profile: inputs.profile,
        fail_open: false,
        reason: "the run's inputs, bound to its journal".into(),
        result: ReceiptResult {
            status: ReceiptStatus::Passed,
            summary: format!(
                "started with {} grant(s), {} envelope, {} intent lock",
                inputs.grants.len(),
                if inputs.envelope.is_some() {
                    "an"
                } else {
                    "no"
                },
                if inputs.intent.is_some() { "an" } else { "no" },
            ),
            metadata,
        },
        redacted: true,
        policy_set: inputs.policy_set.clone(),
        request_hash: exec::digest(bytes),
        decision: Decision::Allow,
        determining_policies: Vec::new(),
        decided_by: DecidedBy {
            kind: DecidedByKind::Kernel,
            by: String::new(),
        },
        mode: if inputs.shadow {
            Mode::Shadow
        } else {
            Mode::Enforce
        },
        action: None,
    }
}

fn decode_receipts(bytes: &[u8]) -> Indexed {
    let mut out = Indexed {
        by_action: BTreeMap::new(),
        approvals_used: HashSet::new(),
        ids: Vec::new(),
        closed: false,
    };
    for (_, decoded) in crate::journal::decode_all(bytes) {
        match decoded {
            crate::journal::Decoded::Receipt(r) => {
                if r.decided_by.kind == DecidedByKind::Approval
                    && let Some((_, id)) = r.decided_by.by.rsplit_once(" via ")
                {
                    out.approvals_used.insert(id.to_owned());
                }
                out.ids.push(r.id.clone());
                if let Some(action) = r.action.clone() {
                    out.by_action.entry(action).or_default().push(*r);
                }
            }
            crate::journal::Decoded::Checkpoint { is_final } => {
                if is_final {
                    out.closed = true;
                }
            }
            crate::journal::Decoded::Unreadable => {}
        }
    }
    out
}
