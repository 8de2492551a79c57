//! The driver: asks the runner for steps, decides every proposed action with the kernel,
//! performs allowed side effects with write-ahead receipts, parks for approvals, halts, writes
//! the handoff; and recovery, which rebuilds all of that from the run's journals.
//!
//! Durability order for a side effect, by group commit (`docs/runs.md`, "Durability and
//! recovery"): decision receipt → `executing` event (file pre/post hashes), both durable before
//! the effect starts → the effect → outcome receipt, durable before anything reaches the runner
//! → `outcome` event. A crash anywhere leaves a state recovery can classify: undecided,
//! decided but not started, *uncertain* (started, no outcome), or done.
//!
//! INVARIANT (group commit): an event reaches `events.jsonl` only when every receipt written
//! before it is durable (events are held in memory while the journal has unsynced lines), so
//! no crash or power loss leaves an event naming a receipt the journal lost; and an `act`
//! step's result (its actions) is durable before the first of their receipts is written, so
//! no receipt names an action the events lost.

use std::collections::{BTreeMap, HashMap, HashSet};
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

mod budget;
pub use budget::{
    BudgetReport, MAX_RUN_TOKENS, MAX_WALL_CLOCK_SECS, MODEL_STEP, TokenUsage, check_reports,
    unknown_note,
};
mod decisions;
use decisions::{STEP_ACTIONS, decision_draft, decision_name, target_text};
mod executors;
mod human;
pub use human::{
    APPROVAL_EXPIRED, APPROVAL_REVIEW, OperatorAct, is_human_decision, operator_request_hash,
};
mod observe;
pub use observe::{DecisionNote, Observed, Observer, STREAMED_SHOWN};
mod outputs;
mod recovery;
pub use recovery::Replay;

use crate::Error;
use crate::journal::JournalFile;
use crate::run::approvals::{
    ApprovalRecord, ApprovalStatus, read_approvals, signed_review, write_approval,
};
use crate::run::exec::{self, FileState, Workspace};
use crate::run::memory::write_memory;
pub use crate::run::signed::{RUN_CLOSED, RUN_INPUTS, RUN_PARKED, action_digest, bound_inputs};
use crate::run::store::{CrashPoints, EVENTS, HANDOFF, Home, OUTPUTS, RUN, RunStore, RunStoreExt};
use crate::run::{
    ActionRecord, Event, Inputs, Outcome, RunnerError, StepRunner, compact, directives, json,
    may_act, may_propose,
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
    home: Home,
    dir: Box<dyn RunStore>,
    inputs: Inputs,
    /// The run's driver lock, held for the host's life.
    _lock: crate::run::store::RunLock,
    bundle: Bundle,
    grants: GrantSet,
    signer: Ed25519Signer,
    /// The keys this home trusts (a pre-command record is verified against them).
    keys: KeyRing,
    journal: JournalWriter,
    journal_file: JournalFile,
    machine: RunLoop,
    runner: Box<dyn StepRunner>,
    matrix: craik_contracts::RunnerCapabilityMatrix,
    /// The runner's handshake is done (lazily, before its first step).
    runner_started: bool,
    /// The runner (this process of it) has answered a step: from then on an `unavailable`
    /// answer is its failure, not the operator's setup (outside testing round 11: an adapter
    /// chose "setup failure" by answering error code 3 after steps it had answered).
    runner_answered: bool,
    workspace: Workspace,
    /// The project's immutable paths (from the signed inputs).
    immutable: craik_kernel::ImmutablePaths,
    /// What commands may not change: [`Host::immutable`] and the intent lock's out-of-scope
    /// paths.
    command_immutable: craik_kernel::ImmutablePaths,
    clock: std::sync::Arc<dyn crate::Clock>,
    crash: CrashPoints,
    step_count: usize,
    /// The operator a recovery settles for (`runs resume`): signed (`run.recover`) before the
    /// first receipt the settling signs (outside testing round 17 N8: a resume whose recovery
    /// ended the run named no one).
    settling_for: Option<(String, String)>,
    /// Recovered without replaying `events.jsonl` ([`Replay::ReceiptsOnly`]): the run is only
    /// ever closed, never driven.
    from_receipts: bool,
    pending: Vec<ActionRecord>,
    /// The `sha256:` of the canonical action list of the act step `pending` came from: each
    /// decision of one of them signs it (`step_actions_sha256`), so recovery can tell an edited,
    /// renamed, added or cut step in `events.jsonl` (outside testing round 17b M2/M3).
    step_actions: Option<String>,
    outcomes: Vec<Outcome>,
    all_outcomes: Vec<Outcome>,
    executing: BTreeMap<String, (Option<String>, Option<String>)>,
    step_result_ids: Vec<String>,
    memory_ids: Vec<String>,
    policy_exceptions: Vec<String>,
    /// Receipts by action (decisions, then outcome), from the journal.
    receipts_by_action: BTreeMap<String, Vec<ReceiptPayload>>,
    used_approvals: HashSet<String>,
    /// The signed reason of each park (recovery: never the events' text).
    parked_reasons: HashMap<String, String>,
    /// Run outputs already written (a step re-asked after a crash is not written twice).
    output_ids: HashSet<String>,
    halted: Option<(TaskRunStatus, String)>,
    /// An operator cancelled the run (a `run.cancel` receipt is signed): what the closing
    /// receipt's `cancelled` says — from the act, never from the reason's words.
    cancelled: bool,
    closed: bool,
    notes: Vec<String>,
    /// The run's first receipt (`run.inputs`), for its ledger entries.
    first: Option<ReceiptPayload>,
    /// The compiled prompt's text (`compiled_prompt.json`, checked against its signed
    /// sha256); every step request carries it with the host's `Step` section.
    prompt: Option<String>,
    /// The ending the journal's signed closing receipt names, once there is one.
    signed_end: Option<(TaskRunStatus, String)>,
    /// Time spent appending to the home ledger (for `craik bench run`).
    ledger_time: Duration,
    /// Event lines waiting for the journal's unsynced receipts to be durable (see the
    /// module's group-commit invariant).
    held: Vec<u8>,
    /// The held events themselves, kept only while an observer is installed (it is told
    /// each once it is written).
    held_events: Vec<Event>,
    /// Told what is recorded as it is recorded ([`Host::observe`]).
    observer: Option<observe::Shared>,
    /// The runner's streamed text in the step in flight, while observed.
    streamed: Option<observe::Streamed>,
    /// `events.jsonl` / `outputs.jsonl` have lines written since their last sync.
    events_dirty: bool,
    outputs_dirty: bool,
    /// Tokens the run's model steps used (its `model.step` receipts).
    tokens: TokenUsage,
    /// When the run parked for a person, while it waits (see `budget::note_wait`).
    parked_at: Option<OffsetDateTime>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("run", &self.inputs.run_id)
            .finish_non_exhaustive()
    }
}

/// Whatever ends a host's life (an error returned mid-step included) commits what it wrote,
/// best effort: the explicit commits (`drive`, `settle`, every durable event) are what the
/// guarantees rest on.
impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.commit();
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

/// The digest every decision of an act step's actions signs (`step_actions_sha256`): the
/// canonical JSON of the step's whole action list, ids and proposals.
fn step_actions_digest(actions: &[ActionRecord]) -> Result<String, Error> {
    crate::digest::Digest::of_canonical(actions)
        .map(|d| d.as_str().to_owned())
        .map_err(|e| Error::internal(format!("an act step's actions have no canonical form: {e}")))
}

/// The stop reason of a run a signal stopped (`craik run` interrupted on its terminal).
fn interrupted_reason(signal: i32) -> String {
    format!(
        "interrupted by {} while it was driven; the step in flight was abandoned, nothing after it ran",
        crate::confine::signal_name(signal)
    )
}

impl Host {
    /// Starts a new run in a fresh directory (locked, its home outside its workspace).
    pub fn start(run: crate::run::locked::LockedRun, setup: Setup) -> Result<Self, Error> {
        let (home, dir, inputs, lock) = run.into_parts();
        let run_id = inputs.run_id.clone();
        let journal_file = dir.create_journal().map_err(io(dir.root()))?;
        dir.write_json(crate::run::store::INPUTS, &inputs, true)
            .map_err(io(dir.root()))?;
        let run = initial_run(&inputs, &setup.matrix);
        let workspace = Workspace::open(&inputs.workspace).map_err(Error::usage)?;
        let budget = budget_of(&inputs);
        let mut host = Self::assemble(
            home,
            dir,
            inputs,
            lock,
            setup,
            JournalWriter::new(&run_id, CHECKPOINT_EVERY),
            journal_file,
            RunLoop::new(run, budget),
            workspace,
        );
        host.load_prompt()?;
        let at = host.clock.now();
        host.machine
            .start(at)
            .map_err(|e| Error::internal(e.to_string()))?;
        // The run's first receipt binds inputs.json (task, profile, grants, envelope, intent
        // lock, workspace, runner) to the signed journal: a resume refuses edited inputs.
        let path = host.dir.file(crate::run::store::INPUTS);
        let bytes = host
            .dir
            .read_bytes(crate::run::store::INPUTS)
            .map_err(io(&path))?
            .ok_or_else(|| {
                Error::internal(format!("{}: just written, now missing", path.display()))
            })?;
        // Inputs that cannot be signed leave nothing behind: no receipt names the directory
        // yet (outside testing round 9: an unsignable budget left a run no command could read).
        let first = inputs_draft(&host.inputs, &bytes, &host.runner_ref().id)
            .map_err(Error::usage)
            .and_then(|draft| host.receipt(draft));
        if let Err(e) = first {
            let root = host.dir.root().to_path_buf();
            drop(host);
            let _ = std::fs::remove_dir_all(&root);
            return Err(e);
        }
        // The home ledger names the run from its first receipt on: a journal deleted later
        // is caught by `receipts verify HOME` (docs/receipts.md, "The home ledger").
        let journal = host.journal_path();
        let bytes = std::fs::read(&journal).map_err(io(&journal))?;
        host.first = crate::journal::decode_all(&bytes)
            .into_iter()
            .find_map(|(_, d)| match d {
                crate::journal::Decoded::Receipt(r) => Some(*r),
                _ => None,
            });
        host.ledger_started()?;
        host.save_run()?;
        Ok(host)
    }

    /// Appends ledger entries (idempotent), timed and counted as a durable write.
    fn ledger(&mut self, entries: Vec<crate::ledger::Entry>) -> Result<(), Error> {
        let started = std::time::Instant::now();
        let written =
            crate::ledger::record(&self.home.root, &self.signer, self.clock.now(), entries)?;
        self.ledger_time += started.elapsed();
        if written > 0 {
            self.crash.synced(1);
            self.crash.point();
        }
        Ok(())
    }

    /// The run's `ledger.run_started` entry (skipped when recorded).
    fn ledger_started(&mut self) -> Result<(), Error> {
        let Some(first) = self.first.clone() else {
            return Ok(());
        };
        self.ledger(vec![crate::ledger::Entry::run_started(
            &first,
            &self.inputs.task.requested_by,
        )])
    }

    /// A `ledger.run_checkpoint` entry at the journal's current size (synced first): the host
    /// is about to act from this point (`why`: `parked`, `approval_used`, `executing` before a
    /// side effect, `undoing` before a check undoes what it found), and a journal put back from an earlier copy or cut can then never be
    /// continued (issue 31 item 1). An entry the ledger records otherwise (another copy of the
    /// run reached this size first) refuses: the effect does not start.
    fn ledger_checkpoint(
        &mut self,
        why: &str,
        starting: Option<&crate::ledger::Starting>,
    ) -> Result<(), Error> {
        let Some(first) = self.first.clone() else {
            return Ok(());
        };
        self.sync_journal()?;
        let (size, root) = (self.journal.len(), self.journal.root_hash());
        let last = self.journal.last_hash().map(str::to_owned);
        self.ledger(vec![
            crate::ledger::Entry::run_started(&first, &self.inputs.task.requested_by),
            crate::ledger::Entry::run_checkpoint(
                &first,
                size,
                &root,
                last.as_deref(),
                why,
                starting,
            ),
        ])
    }

    /// The run's `ledger.run_closed` entry from its journal's final checkpoint (with the
    /// started entry, should a crash have lost it).
    fn ledger_closed(&mut self) -> Result<(), Error> {
        let Some(first) = self.first.clone() else {
            return Ok(());
        };
        let path = self.journal_path();
        let checkpoint = crate::ledger::last_checkpoint(&path)
            .filter(|c| c.is_final)
            .ok_or_else(|| {
                Error::internal(format!(
                    "{}: closed, but its last line is not a final checkpoint",
                    path.display()
                ))
            })?;
        let ending = self
            .signed_end
            .clone()
            .map(|(s, r)| (s.as_str().to_owned(), r));
        self.ledger(vec![
            crate::ledger::Entry::run_started(&first, &self.inputs.task.requested_by),
            crate::ledger::Entry::run_closed(
                &first,
                &checkpoint,
                ending.as_ref().map(|(s, r)| (s.as_str(), r.as_str())),
            ),
        ])
    }

    /// Reads the run's compiled prompt (`compiled_prompt.json`), checked against the sha256
    /// its inputs sign; a run started without one keeps the one-line task prompt.
    fn load_prompt(&mut self) -> Result<(), Error> {
        let Some(signed) = self.inputs.compiled_prompt_sha256.clone() else {
            return Ok(());
        };
        let path = self.dir.file(crate::prompt::PROMPT_FILE);
        let bytes = self
            .dir
            .read_bytes(crate::prompt::PROMPT_FILE)
            .map_err(io(&path))?;
        use crate::run::signed::{Bound, bound};
        let why = match (bound(bytes.as_deref(), Some(&signed)), &bytes) {
            (Bound::Matches, Some(bytes)) => {
                let text = crate::prompt::text_of(bytes)
                    .map_err(|e| Error::invalid(format!("{}: {e}", path.display()), Vec::new()))?;
                self.prompt = Some(text);
                return Ok(());
            }
            (Bound::Changed(digest), _) => format!(
                "changed since the run started ({digest}; the run.inputs receipt signs {signed})"
            ),
            _ => format!("missing; the run.inputs receipt signs {signed}"),
        };
        Err(Error::invalid(
            format!("{}: {why}", path.display()),
            Vec::new(),
        ))
    }

    /// Time this process spent appending to the home ledger.
    pub fn ledger_time(&self) -> Duration {
        self.ledger_time
    }

    /// The terminal status and reason the run's signed closing receipt names.
    pub fn signed_end(&self) -> Option<&(TaskRunStatus, String)> {
        self.signed_end.as_ref()
    }

    /// Craik's home this run belongs to.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The run's directory.
    pub fn dir(&self) -> &dyn RunStore {
        self.dir.as_ref()
    }

    /// The run's inputs (as signed by its first receipt).
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The run's loop state.
    pub fn machine(&self) -> &RunLoop {
        &self.machine
    }

    /// What recovery or the driver noted for the operator.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Replaces the notes shown to the operator.
    pub fn set_notes(&mut self, notes: Vec<String>) {
        self.notes = notes;
    }

    /// A host with empty derived state.
    #[allow(clippy::too_many_arguments, reason = "one constructor, called twice")]
    fn assemble(
        home: Home,
        dir: Box<dyn RunStore>,
        inputs: Inputs,
        lock: crate::run::store::RunLock,
        setup: Setup,
        journal: JournalWriter,
        journal_file: JournalFile,
        machine: RunLoop,
        workspace: Workspace,
    ) -> Self {
        // Checked when the run started (`check_task_bindings`); should the signed inputs
        // still hold a glob that does not compile, every path is immutable: fail closed.
        let immutable = craik_kernel::ImmutablePaths::new(&inputs.immutable_paths)
            .unwrap_or_else(|_| craik_kernel::ImmutablePaths::everything());
        // For commands, the intent lock's out-of-scope paths too (a command that rewrote one
        // completed the run; found by outside testing): what decisions stop the run for (a
        // write capability on such a path interrupts it), the manifest check refuses a
        // command, and the sandbox keeps it read-only.
        // Prose entries protect nothing; an entry that is neither prose nor a valid path
        // (refused at load) makes everything immutable: fail closed.
        let mut globs = inputs.immutable_paths.clone();
        let mut invalid = false;
        for entry in inputs.intent.iter().flat_map(|i| i.out_of_scope.iter()) {
            if craik_kernel::intent_entry_problem(entry).is_some() {
                invalid = true;
            } else if entry.chars().any(char::is_whitespace) {
                continue;
            } else if let Ok(path) =
                craik_kernel::TargetPath::normalize("/w", entry.trim_end_matches('/'))
            {
                globs.push(craik_kernel::ImmutablePaths::glob_for(path.as_str(), false));
                globs.push(craik_kernel::ImmutablePaths::glob_for(path.as_str(), true));
            } else {
                invalid = true;
            }
        }
        let command_immutable = match craik_kernel::ImmutablePaths::new(&globs) {
            Ok(paths) if !invalid => paths,
            _ => craik_kernel::ImmutablePaths::everything(),
        };
        Self {
            immutable,
            command_immutable,
            runner: setup.runner,
            matrix: setup.matrix,
            clock: setup.clock,
            runner_started: false,
            runner_answered: false,
            journal,
            home,
            dir,
            bundle: setup.bundle,
            grants: setup.grants,
            signer: setup.signer,
            keys: setup.keys,
            journal_file,
            machine,
            workspace,
            crash: CrashPoints::from_env(),
            step_count: 0,
            settling_for: None,
            from_receipts: false,
            pending: Vec::new(),
            step_actions: None,
            outcomes: Vec::new(),
            all_outcomes: Vec::new(),
            executing: BTreeMap::new(),
            step_result_ids: Vec::new(),
            memory_ids: Vec::new(),
            policy_exceptions: Vec::new(),
            receipts_by_action: BTreeMap::new(),
            used_approvals: HashSet::new(),
            parked_reasons: HashMap::new(),
            output_ids: HashSet::new(),
            halted: None,
            cancelled: false,
            closed: false,
            notes: Vec::new(),
            first: None,
            signed_end: None,
            ledger_time: Duration::ZERO,
            held: Vec::new(),
            held_events: Vec::new(),
            observer: None,
            prompt: None,
            streamed: None,
            events_dirty: false,
            outputs_dirty: false,
            tokens: TokenUsage::default(),
            parked_at: None,
            inputs,
            _lock: lock,
        }
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

    fn workspace_root(&self) -> String {
        self.workspace.root.display().to_string()
    }

    /// Drives the run until it halts or parks; everything it wrote is durable when it returns.
    pub fn drive(&mut self, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
        if self.from_receipts && !self.is_final() {
            return Err(Error::internal(
                "a run recovered from its receipts alone is only ever closed, never driven",
            ));
        }
        let driven = self.drive_steps(progress);
        let committed = self.commit();
        driven.and(committed)
    }

    fn drive_steps(&mut self, progress: &mut dyn FnMut(&str)) -> Result<(), Error> {
        loop {
            if self.is_final() {
                return Ok(());
            }
            if let Some(request) = self.dir.cancel_request() {
                return self.cancel(&request.by, &request.reason);
            }
            if let Some(signal) = crate::confine::interrupted() {
                return self.halt(TaskRunStatus::Interrupted, interrupted_reason(signal));
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

    /// Records an event durably: a group commit of everything pending ([`Host::commit`]).
    fn event(&mut self, event: &Event) -> Result<(), Error> {
        self.event_lazy(event)?;
        self.commit()
    }

    /// Records an event that the next commit makes durable. It is written to `events.jsonl`
    /// at once when the journal has no unsynced receipt, else held until the journal is
    /// synced (the module's group-commit invariant). Losing it to a crash loses nothing that
    /// was acted on: a step request or result is asked again, a read decided again, an
    /// outcome restored from its receipt (`docs/runs.md`, "Durability and recovery").
    fn event_lazy(&mut self, event: &Event) -> Result<(), Error> {
        let redacted = redacted_event(event)?;
        let event = redacted.as_ref().unwrap_or(event);
        self.note_wait(event);
        let mut line =
            serde_json::to_vec(event).map_err(|e| Error::internal(format!("event: {e}")))?;
        line.push(b'\n');
        self.held.extend_from_slice(&line);
        if self.observer.is_some() {
            self.held_events.push(event.clone());
        }
        if !self.journal_file.is_dirty() {
            self.flush_held()?;
        }
        Ok(())
    }

    /// Writes the held events (unsynced): called only once the journal is durable.
    fn flush_held(&mut self) -> Result<(), Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        let lines = std::mem::take(&mut self.held);
        self.dir
            .append_bytes(EVENTS, &lines, false)
            .map_err(io(self.dir.root()))?;
        self.events_dirty = true;
        self.crash.point();
        let written = std::mem::take(&mut self.held_events);
        self.observe_events(written);
        Ok(())
    }

    /// Makes every receipt written so far durable (one `fdatasync` of the journal, none when
    /// nothing is pending), then writes the events held for them. Called before anything
    /// reaches the runner: no outcome is told before its receipt is durable.
    fn sync_journal(&mut self) -> Result<(), Error> {
        // Every commit comes before an effect: the run's directory must still be the one this
        // driver locked, or it was replaced under it and another driver may hold the copy.
        if !self._lock.still_at(self.dir.root()) {
            return Err(Error::refused(format!(
                "{}: the run's directory was moved or replaced while this process drove it; it stops here, before anything more takes effect: check the home with `craik receipts verify {}`",
                self.dir.root().display(),
                self.home.root.display()
            )));
        }
        let synced = self
            .journal_file
            .sync()
            .map_err(io(self.journal_file.path()))?;
        if synced {
            self.crash.synced(1);
            self.crash.durable(
                crate::journal::JOURNAL_NAME,
                self.journal_file.durable_len(),
            );
            self.crash.point();
        }
        self.flush_held()
    }

    /// A group commit: the journal, then `outputs.jsonl`, then `events.jsonl`, each with one
    /// `fdatasync` for every line written to it since its last (a file with nothing pending
    /// costs nothing). Outputs before events: an event's step never lacks its run output.
    pub(super) fn commit(&mut self) -> Result<(), Error> {
        self.sync_journal()?;
        for (name, dirty) in [(OUTPUTS, self.outputs_dirty), (EVENTS, self.events_dirty)] {
            if !dirty {
                continue;
            }
            self.dir.sync_file(name).map_err(io(self.dir.root()))?;
            if name == OUTPUTS {
                self.outputs_dirty = false;
            } else {
                self.events_dirty = false;
            }
            self.crash.synced(1);
            self.note_durable(name);
            self.crash.point();
        }
        Ok(())
    }

    /// For the crash-point hook only: the durable length of `name` after its sync.
    fn note_durable(&mut self, name: &'static str) {
        #[cfg(feature = "crash-points")]
        if let Ok(meta) = std::fs::metadata(self.dir.file(name)) {
            self.crash.durable(name, meta.len());
        }
        #[cfg(not(feature = "crash-points"))]
        let _ = name;
    }

    /// `run.json` is derived from the events (recovery rewrites it), so it is replaced
    /// atomically but fsynced only when the run parks or ends.
    fn save_run(&mut self) -> Result<(), Error> {
        let sync = self.machine.run().status != TaskRunStatus::Running;
        self.dir
            .write_json(RUN, self.machine.run(), sync)
            .map_err(io(self.dir.root()))?;
        if sync {
            self.crash.synced(2);
        }
        self.crash.point();
        Ok(())
    }

    /// Appends signed journal bytes, durably.
    fn journal_line(&mut self, line: &[u8]) -> Result<(), Error> {
        self.journal_line_lazy(line)?;
        self.sync_journal()
    }

    /// Appends signed journal bytes that the next commit makes durable.
    fn journal_line_lazy(&mut self, line: &[u8]) -> Result<(), Error> {
        self.journal_file
            .write(line)
            .map_err(io(self.journal_file.path()))?;
        self.crash.point();
        Ok(())
    }

    /// Signs and appends a receipt, durably.
    fn receipt(&mut self, draft: ReceiptDraft) -> Result<String, Error> {
        let id = self.receipt_lazy(draft)?;
        self.sync_journal()?;
        Ok(id)
    }

    /// Signs and appends a receipt that the next commit makes durable: the governed loop's
    /// decision and outcome receipts. A side effect commits its decision before it starts
    /// (`executors`), and [`Host::step`] commits every receipt before the runner is asked
    /// anything.
    fn receipt_lazy(&mut self, draft: ReceiptDraft) -> Result<String, Error> {
        if let Some((by, why)) = self.settling_for.take() {
            self.operator_receipt(human::OperatorAct::Recover, &by, &why)?;
        }
        let id = self.journal.next_id();
        let line = self
            .journal
            .append(draft, self.clock.now(), &self.signer)
            .map_err(|e| Error::internal(format!("receipt: {e}")))?;
        self.machine.note_receipt(id.clone());
        self.journal_line_lazy(&line)?;
        Ok(id)
    }

    /// Host paths in what is sent to the runner become named roles (issue 30: outcome
    /// summaries sent the home's and workspace's absolute paths — a username, the run id — to
    /// the model provider): the workspace as `<workspace>`, the home as `<home>`, the
    /// operator's home directory as `<user-home>`, the run's directory as `<run>`, each as
    /// given and as resolved.
    fn private_paths(&self, value: &mut Value) {
        let mut roles: Vec<(String, &str)> = Vec::new();
        let mut add = |path: &std::path::Path, role: &'static str| {
            for p in [Some(path.to_owned()), path.canonicalize().ok()]
                .into_iter()
                .flatten()
            {
                let text = p.display().to_string();
                if text.len() > 1 && !roles.iter().any(|(t, _)| *t == text) {
                    roles.push((text, role));
                }
            }
        };
        add(&self.workspace.root, "<workspace>");
        add(self.dir.root(), "<run>");
        add(self.home.root.as_path(), "<home>");
        if let Some(user) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            add(std::path::Path::new(&user), "<user-home>");
        }
        // Longest first: the workspace lies in the home, the home often in the user's.
        roles.sort_by_key(|r| std::cmp::Reverse(r.0.len()));
        // Any run of slashes between the components (outside testing round 11: `pwd | sed
        // 's#/#//#g'` sent the real path). Other encodings of a path (hex, base64) are what a
        // command may print of what it can read: not recognised (said in SECURITY.md).
        let roles: Vec<(regex::Regex, &str)> = roles
            .iter()
            .filter_map(|(path, role)| {
                let parts: Vec<String> = path
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(regex::escape)
                    .collect();
                (!parts.is_empty())
                    .then(|| regex::Regex::new(&format!("/+{}", parts.join("/+"))).ok())
                    .flatten()
                    .map(|re| (re, *role))
            })
            .collect();
        fn walk(v: &mut Value, roles: &[(regex::Regex, &str)]) {
            match v {
                Value::String(s) => {
                    for (path, role) in roles {
                        if path.is_match(s) {
                            *s = path.replace_all(s, *role).into_owned();
                        }
                    }
                }
                Value::Array(items) => items.iter_mut().for_each(|i| walk(i, roles)),
                Value::Object(map) => map.values_mut().for_each(|i| walk(i, roles)),
                _ => {}
            }
        }
        walk(value, &roles);
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
            // Host paths become roles before the cap cuts anything: a path cut in two no
            // longer matches, and its first half would reach the runner (outside testing
            // round 12).
            let mut outcomes = json(&self.outcomes);
            self.private_paths(&mut outcomes);
            context
                .0
                .insert("outcomes".into(), crate::prompt::capped(&outcomes));
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
            input_prompt: match &self.prompt {
                Some(compiled) => crate::prompt::step_text(compiled, phase, &context),
                None => format!(
                    "{} — phase {}: {}",
                    self.inputs.task.title,
                    phase.as_str(),
                    self.inputs.task.objective
                ),
            },
            context,
            redaction_required: true,
            created_at: ts(self.clock.now()),
        }
        .redacted()
    }

    fn step(&mut self, phase: Phase) -> Result<Flow, Error> {
        let request = self.request_for(phase);
        // Nothing reaches the runner before the receipts of what it is told are durable (the
        // outcomes an `observe` request carries; everything before).
        self.sync_journal()?;
        // Recorded with the compiled prompt by reference (it is the run's signed
        // compiled_prompt.json, the same for every step): the text sent is that file's prompt
        // followed by what is recorded after the reference.
        let mut recorded = request.clone();
        if let (Some(compiled), Some(signed)) = (&self.prompt, &self.inputs.compiled_prompt_sha256)
            && let Some(step) = recorded.input_prompt.strip_prefix(compiled.as_str())
        {
            recorded.input_prompt = format!("{}{signed}]{step}", crate::prompt::PROMPT_REFERENCE);
        }
        self.event_lazy(&Event::StepRequest {
            at: request.created_at,
            request: Box::new(recorded),
        })?;
        self.new_stream();
        // A step may take at most what is left of the wall-clock budget.
        let left = self
            .machine
            .wall_clock_left(self.clock.now())
            .map(|d| d.unsigned_abs());
        self.runner.cap_step_time(left);
        let asked = self.ask_runner(&request);
        // The model steps the runner reported (whether it answered or not): checked, then
        // signed, durable before anything of the step is accepted.
        let reports = self.runner.take_model_steps();
        // An adapter that reported a model exchange has reached its provider: `unavailable`
        // now is its own failure, not the operator's setup (outside testing round 12).
        let asked = match asked {
            Err(RunnerError::Setup(why)) if !reports.is_empty() => Err(RunnerError::Failed(
                format!("after reporting {} model step(s): {why}", reports.len()),
            )),
            other => other,
        };
        if let Err(why) = check_reports(&reports, self.tokens.total_tokens) {
            self.record_refused_reports(&request, reports.len(), &why.0)?;
            return self.violation(&request, why);
        }
        self.record_model_steps(&request, &reports)?;
        if asked.is_ok()
            && reports.is_empty()
            && self.matrix.runner.mode == craik_contracts::RunnerMode::Live
        {
            self.record_unreported_step(&request)?;
        }
        let mut result = match asked {
            Ok(r) => r,
            Err(why) => {
                // A step cut off may have left a model exchange in flight: its usage is
                // unknown, and signed so (issue 30).
                if matches!(why, RunnerError::Timeout(_)) {
                    self.record_cut_step(&request)?;
                    if let Some(reason) = self.token_budget_exceeded() {
                        self.halt(TaskRunStatus::Interrupted, reason)?;
                        return Ok(Flow::Stop);
                    }
                }
                // Over the token budget with what it reported before failing: the budget ends
                // the run, whatever the runner says went wrong.
                if let Some(reason) = self.token_budget_exceeded() {
                    self.halt(TaskRunStatus::Interrupted, reason)?;
                    return Ok(Flow::Stop);
                }
                // Abandoned because the operator stopped the run: not the runner's doing.
                if let Some(signal) = crate::confine::interrupted() {
                    self.halt(TaskRunStatus::Interrupted, interrupted_reason(signal))?;
                    return Ok(Flow::Stop);
                }
                // A step cut off by the budget's cap ends the run for the budget.
                if matches!(why, RunnerError::Timeout(_))
                    && left.is_some()
                    && let Gate::Stop(status, reason) = self.machine.gate(self.clock.now())
                {
                    return self.halt(status, reason).map(|()| Flow::Stop);
                }
                return self.runner_failed(&request, &why);
            }
        };
        // Over the token budget: the run ends before anything of this step is accepted (an
        // `act` step's actions are neither decided nor performed).
        if let Some(reason) = self.token_budget_exceeded() {
            self.halt(TaskRunStatus::Interrupted, reason)?;
            return Ok(Flow::Stop);
        }
        let found = match checked_directives(phase, &request, &mut result) {
            Ok(d) => d,
            Err(why) => return self.violation(&request, why),
        };
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
        let (memory_ids, receipt_ids) =
            self.step_memory(&result, &found.memory, &mut diagnostics)?;
        result.memory_proposal_ids = memory_ids.clone();
        result.diagnostics.extend(diagnostics);
        result.redacted = true;
        self.write_output(&result, &actions, receipt_ids)?;
        let at = self.clock.now();
        let result_event = Event::StepResult {
            at: ts(at),
            result: Box::new(result.clone()),
            actions: actions.clone(),
            next: found.next,
        };
        if actions.is_empty() {
            // Lost to a crash, the step is asked again: nothing was decided or done for it.
            self.event_lazy(&result_event)?;
        } else {
            // Its actions are durable before any receipt names them (group-commit invariant).
            self.event(&result_event)?;
        }
        self.step_count += 1;
        self.step_result_ids.push(result.id.clone());
        self.memory_ids.extend(memory_ids);
        let next = found.next.map(|n| match n {
            craik_contracts::NextStep::Continue => Next::Continue,
            craik_contracts::NextStep::Stop => Next::Stop,
        });
        if let Err(e) = self.machine.accept(phase, result.status, next, at) {
            return self.violation(&request, crate::run::Violation(e.to_string()));
        }
        if self.stopped_by_step()? {
            return Ok(Flow::Stop);
        }
        if phase == Phase::Act {
            self.step_actions = Some(step_actions_digest(&actions)?);
            self.pending = actions;
            self.outcomes.clear();
        }
        self.save_run()?;
        Ok(Flow::Go)
    }

    /// The runner's answer to `request` (its handshake first, once); `Err` says why the
    /// runner failed, which the caller records as a violation (or a setup failure).
    fn ask_runner(&mut self, request: &RunnerStepRequest) -> Result<RunnerStepResult, RunnerError> {
        if !self.runner_started {
            match self.runner.start(&self.matrix.runner) {
                Ok(()) => {}
                Err(e @ (RunnerError::Setup(_) | RunnerError::Changed(_))) => return Err(e),
                Err(RunnerError::Timeout(why) | RunnerError::Failed(why)) => {
                    return Err(RunnerError::Failed(format!(
                        "runner handshake failed: {why}"
                    )));
                }
            }
            self.runner_started = true;
        }
        crate::clock::test_step_tick();
        let result = self.runner.step(request);
        let runner_diagnostics = self.runner.take_diagnostics();
        let mut result = match result {
            Ok(r) => {
                self.runner_answered = true;
                r
            }
            Err(RunnerError::Setup(why)) if !self.runner_answered => {
                return Err(RunnerError::Setup(why));
            }
            Err(e @ RunnerError::Changed(_)) => return Err(e),
            Err(e) => {
                let mut why = format!("runner failed: {e}");
                if let Some(last) = runner_diagnostics.last() {
                    why.push_str(&format!(" (last diagnostic: {last})"));
                }
                return Err(match e {
                    RunnerError::Timeout(_) => RunnerError::Timeout(why),
                    _ => RunnerError::Failed(why),
                });
            }
        };
        result.diagnostics.extend(runner_diagnostics);
        Ok(result)
    }

    /// Memory proposals of a step: only from completed/partial steps, only from explicit
    /// specs. Returns the proposal ids and their receipt ids.
    fn step_memory(
        &mut self,
        result: &RunnerStepResult,
        specs: &[MemoryProposalSpec],
        diagnostics: &mut Vec<String>,
    ) -> Result<(Vec<String>, Vec<String>), Error> {
        let mut memory_ids = Vec::new();
        let mut receipt_ids = Vec::new();
        if may_propose(result.status) {
            for (k, spec) in specs.iter().enumerate() {
                if let Some((memprop, receipt)) =
                    self.propose_memory(result, self.step_count, k, spec)?
                {
                    memory_ids.push(memprop);
                    receipt_ids.push(receipt);
                }
            }
        } else if !specs.is_empty() {
            diagnostics.push(format!(
                "{} memory proposal spec(s) ignored: a `{}` step may not propose memory",
                specs.len(),
                result.status.as_str()
            ));
        }
        Ok((memory_ids, receipt_ids))
    }

    /// After a step the loop accepted: a run it ended is finalised (a `completed` with unmet
    /// obligations is refused first). Returns whether the run stopped.
    fn stopped_by_step(&mut self) -> Result<bool, Error> {
        let Some(reason) = self.machine.run().stop_reason.clone() else {
            return Ok(false);
        };
        if !is_terminal(self.machine.run().status) {
            return Ok(false);
        }
        if self.machine.run().status == TaskRunStatus::Completed
            && let Some((status, why)) = self.unmet_obligations()
        {
            let at = self.clock.now();
            self.machine.refuse_completion(status, why, at);
        }
        let status = self.machine.run().status;
        let reason = self.machine.run().stop_reason.clone().unwrap_or(reason);
        self.finish_halt(status, reason)?;
        Ok(true)
    }

    /// A channel/contract violation by the runner: a denying kernel receipt, run failed.
    fn violation(
        &mut self,
        request: &RunnerStepRequest,
        why: crate::run::Violation,
    ) -> Result<Flow, Error> {
        self.runner_failed(request, &RunnerError::Failed(why.0))
    }

    /// The runner gave no acceptable answer: a denying kernel receipt, run failed. A setup
    /// failure is the operator's to fix, not the runner's doing: its own pseudo-policy and
    /// wording — decided by the error's kind, never by its text.
    fn runner_failed(
        &mut self,
        request: &RunnerStepRequest,
        error: &RunnerError,
    ) -> Result<Flow, Error> {
        let setup = matches!(error, RunnerError::Setup(_) | RunnerError::Changed(_));
        let why = redact_checked(&error.to_string())
            .map(|r| r.text)
            .unwrap_or_else(|what| format!("(diagnostic withheld: it held {what})"));
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
        // The ending is signed (durably) before it is written anywhere unsigned: recovery
        // believes an ending only from the closing receipt, so a `halted` event an attacker
        // adds to events.jsonl can never choose what the host signs (issue 31 item 1).
        if !self.closed && self.signed_end.is_none() {
            let draft = self.closing_draft(status, &reason);
            self.receipt(draft)?;
            self.signed_end = Some((status, reason.clone()));
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
        // A run finalised before (recovery, resume or cancel of an ended run) keeps its
        // run.json unless it no longer says the signed ending.
        let was_final = self.closed && self.dir.file(HANDOFF).is_file();
        self.machine.set_handoff(handoff_id.clone());
        if !self.closed {
            // The closing receipt signs the terminal status: what `runs show` and `audit`
            // report, and what resume, recover and cancel refuse to change.
            if self.signed_end.is_none() {
                let draft = self.closing_draft(status, reason);
                self.receipt(draft)?;
                self.signed_end = Some((status, reason.to_owned()));
            }
            let line = self
                .journal
                .close(self.clock.now(), &self.signer)
                .map_err(|e| Error::internal(format!("closing the journal: {e}")))?;
            self.closed = true;
            self.journal_line(&line)?;
        }
        self.ledger_closed()?;
        if !self.dir.file(HANDOFF).is_file() {
            let handoff = self.handoff(handoff_id.clone(), status, reason);
            self.dir
                .write_json(HANDOFF, &handoff, true)
                .map_err(io(self.dir.root()))?;
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
        if was_final
            && self.dir.read_json::<TaskRun>(RUN).is_ok_and(|saved| {
                saved.status == status && saved.stop_reason.as_deref() == Some(reason)
            })
        {
            return Ok(());
        }
        self.save_run()
    }

    /// The closing receipt: the run's terminal status and reason, signed.
    fn closing_draft(&self, status: TaskRunStatus, reason: &str) -> ReceiptDraft {
        let mut metadata = Object::new();
        metadata.0.insert("status".into(), json!(status.as_str()));
        metadata
            .0
            .insert("phase".into(), json!(self.machine.run().phase.as_str()));
        metadata
            .0
            .insert("iteration".into(), json!(self.machine.run().iteration));
        metadata.0.insert(
            "cancelled".into(),
            // An operator's cancellation (`Host::cancel`, or the live driver's).
            json!(self.cancelled),
        );
        metadata.0.insert("may_continue".into(), json!(false));
        self.ending_draft(
            RUN_CLOSED,
            reason,
            ReceiptResult {
                status: match status {
                    TaskRunStatus::Completed => ReceiptStatus::Passed,
                    TaskRunStatus::Blocked => ReceiptStatus::Blocked,
                    _ => ReceiptStatus::Failed,
                },
                summary: format!("the run ended {}", status.as_str()),
                metadata,
            },
            exec::digest(format!("{}:{}", status.as_str(), reason).as_bytes()),
        )
    }

    /// A receipt the kernel signs about the run itself (its closing or parking receipt):
    /// target the run id, decided by the kernel, allowed.
    pub(super) fn ending_draft(
        &self,
        capability: &str,
        reason: &str,
        result: ReceiptResult,
        request_hash: String,
    ) -> ReceiptDraft {
        ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.matrix.runner.id.clone(),
            capability: capability.into(),
            target: self.inputs.run_id.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: reason.to_owned(),
            result,
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash,
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Kernel,
                by: String::new(),
            },
            mode: self.mode(),
            action: None,
        }
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

/// A run's state before its first step. The runner is the one launched, as its matrix names
/// it: id and mode, the mode the host holds it to (issue 32: every run was recorded as
/// `runner_fixture` in fixture mode).
fn initial_run(inputs: &Inputs, matrix: &craik_contracts::RunnerCapabilityMatrix) -> TaskRun {
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
        runner_id: matrix.runner.id.clone(),
        runner_mode: matrix.runner.mode,
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
        provider_token_budget: inputs.token_budget,
        wall_clock_budget_seconds: inputs.budget_secs,
    }
}

fn check_result(
    request: &RunnerStepRequest,
    result: &RunnerStepResult,
) -> Result<(), crate::run::Violation> {
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
        Err(crate::run::Violation(format!(
            "step result has wrong {}",
            wrong.join(", ")
        )))
    }
}
/// A step result's echo and directives, checked: the result answers `request`, its reserved
/// keys parse, at most [`MAX_ACTIONS_PER_STEP`] actions and [`MAX_MEMORY_PER_STEP`] memory
/// proposals, and actions only in `act`. `Err` is the violation.
fn checked_directives(
    phase: Phase,
    request: &RunnerStepRequest,
    result: &mut RunnerStepResult,
) -> Result<crate::run::Directives, crate::run::Violation> {
    check_result(request, result)?;
    let found = directives(&mut result.observed_output)?;
    if found.actions.len() > MAX_ACTIONS_PER_STEP || found.memory.len() > MAX_MEMORY_PER_STEP {
        return Err(crate::run::Violation(format!(
            "{} actions and {} memory proposals in one step; at most {MAX_ACTIONS_PER_STEP} and {MAX_MEMORY_PER_STEP}",
            found.actions.len(),
            found.memory.len()
        )));
    }
    if !found.actions.is_empty() && !may_act(phase) {
        return Err(crate::run::Violation(format!(
            "{} action(s) proposed in phase `{}`; side effects are proposed in `act` only",
            found.actions.len(),
            phase.as_str()
        )));
    }
    // Every action a receipt will name must be signable: a number outside ±(2^53−1) in a
    // proposed action is the runner's violation, not a run left half-finished (outside testing
    // round 10).
    for (k, action) in found.actions.iter().enumerate() {
        if let Err(why) = crate::digest::Digest::of_canonical(action) {
            return Err(crate::run::Violation(format!(
                "proposed action {k} cannot be signed: {why}"
            )));
        }
    }
    Ok(found)
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

/// The first receipt of a run: `request_hash` is the `sha256:` of the exact bytes of
/// `inputs.json`; the metadata names the hashes of its parts an auditor cares about.
fn inputs_draft(inputs: &Inputs, bytes: &[u8], actor: &str) -> Result<ReceiptDraft, String> {
    let part = |what: &str, v: Result<crate::digest::Digest, String>| {
        v.map(|d| d.as_str().to_owned())
            .map_err(|e| format!("{what}: {e}"))
    };
    let mut metadata = craik_contracts::Object::new();
    metadata
        .0
        .insert("inputs_sha256".into(), json!(exec::digest(bytes)));
    metadata.0.insert(
        "grants_sha256".into(),
        json!(crate::run::grants_digest(&inputs.grants)?.as_str()),
    );
    metadata.0.insert(
        "envelope_sha256".into(),
        json!(part(
            "policy envelope",
            crate::digest::Digest::of_canonical(&inputs.envelope)
        )?),
    );
    metadata.0.insert(
        "intent_sha256".into(),
        json!(part(
            "intent lock",
            crate::digest::Digest::of_canonical(&inputs.intent)
        )?),
    );
    metadata.0.insert(
        "workspace".into(),
        json!(inputs.workspace.display().to_string()),
    );
    metadata.0.insert("runner".into(), json!(inputs.runner));
    if let Some(adapter) = &inputs.runner_adapter {
        metadata.0.insert("runner_adapter".into(), json!(adapter));
    }
    if let Some(by) = &inputs.started_by {
        metadata.0.insert("started_by".into(), json!(by));
    }
    for (key, value) in [
        ("project_profile_sha256", &inputs.project_profile_sha256),
        ("case_file_sha256", &inputs.case_file_sha256),
        ("compiled_prompt_sha256", &inputs.compiled_prompt_sha256),
    ] {
        if let Some(v) = value {
            metadata.0.insert(key.into(), json!(v));
        }
    }
    // Issue 21 item 4: the budgets the run is held to.
    for (key, value) in [
        ("provider_token_budget", inputs.token_budget),
        ("wall_clock_budget_seconds", inputs.budget_secs),
    ] {
        if let Some(v) = value {
            metadata.0.insert(key.into(), json!(v));
        }
    }
    Ok(ReceiptDraft {
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
    })
}

/// Issue 30: the last gate before `events.jsonl` (and the observer): every string of the
/// event through the secret rules. `None`: nothing was replaced.
fn redacted_event(event: &Event) -> Result<Option<Event>, Error> {
    let mut value =
        serde_json::to_value(event).map_err(|e| Error::internal(format!("event: {e}")))?;
    match redact_value(&mut value) {
        Ok(0) => Ok(None),
        Ok(_) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| Error::internal(format!("the redacted event does not decode: {e}"))),
        Err(what) => Err(Error::internal(format!(
            "an event cannot be redacted: {what}"
        ))),
    }
}

/// A step request with its prompt and context through the secret rules (issue 30: what
/// reaches the runner, and so the model provider).
trait RedactedRequest {
    fn redacted(self) -> Self;
}

impl RedactedRequest for RunnerStepRequest {
    fn redacted(mut self) -> Self {
        match redact_checked(&self.input_prompt) {
            Ok(r) if r.changed() => self.input_prompt = r.text,
            Ok(_) => {}
            Err(_) => self.input_prompt = craik_kernel::REDACTED.to_owned(),
        }
        let mut context = Value::Object(std::mem::take(&mut self.context.0));
        if redact_value(&mut context).is_err() {
            context = Value::Object(serde_json::Map::new());
        }
        if let Value::Object(map) = context {
            self.context.0 = map;
        }
        self
    }
}
