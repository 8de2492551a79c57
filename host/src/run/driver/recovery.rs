//! Recovery: reopening a run from its directory, replaying its events against its verified
//! journal, settling actions a crash left uncertain (never replaying a side effect blindly).

use super::*;

/// What recovery believes of `events.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The events are replayed, each checked against what the journal signs.
    Events,
    /// Nothing of the events is believed: the run can only be closed, from its receipts
    /// (`craik runs cancel --from-receipts`, for a run whose events no longer replay).
    ReceiptsOnly,
}

impl Host {
    /// Reopens an existing run from its journals: repairs torn tails, verifies the receipts,
    /// replays the events, and classifies every action of the last act step.
    /// The inputs are the ones [`crate::run::locked::LockedRun::open`] verified against the
    /// signed journal, never re-read here.
    pub fn recover(run: crate::run::locked::LockedRun, setup: Setup) -> Result<Self, Error> {
        Self::recover_with(run, setup, Replay::Events)
    }

    /// [`Host::recover`], replaying the events (`Replay::Events`) or not at all
    /// (`Replay::ReceiptsOnly`: the run is then only ever closed, from what its receipts sign;
    /// see [`Host::settle_from_receipts`]). Every check against the home's ledger applies
    /// either way.
    pub fn recover_with(
        run: crate::run::locked::LockedRun,
        setup: Setup,
        replay: Replay,
    ) -> Result<Self, Error> {
        let (home, dir, inputs, lock) = run.into_parts();
        // A run continues only under the policy set it started with (issue 31 item 3): the
        // set its `run.inputs` receipt signed (the inputs were verified against it), not
        // whatever the policy directories hold now. Refused before anything is written.
        if setup.bundle.hash() != inputs.policy_set {
            return Err(Error::refused(format!(
                "{}: the policy set changed since the run started (signed {}, loaded now {}); a run is resumed, recovered or cancelled only under the policies it started with: restore the policy files (`--policies` {}, custom {}) to their content at the start",
                inputs.run_id,
                inputs.policy_set,
                setup.bundle.hash(),
                inputs
                    .policies
                    .as_ref()
                    .map_or_else(|| "embedded".to_owned(), |p| format!("`{}`", p.display())),
                if inputs.custom.is_empty() {
                    "none".to_owned()
                } else {
                    inputs
                        .custom
                        .iter()
                        .map(|c| format!("`{}`", c.display()))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
        let mut notes = Vec::new();
        // The caller holds the run lock: a `.NAME.tmp-PID` here is an atomic write a crash
        // interrupted before its rename (the file it would have replaced is intact).
        for name in dir.clean_leftovers().map_err(io(dir.root()))? {
            notes.push(format!(
                "{name}: an interrupted atomic write's temporary file, removed"
            ));
        }
        for name in [EVENTS, OUTPUTS, crate::journal::JOURNAL_NAME] {
            let torn = dir.repair_torn(name).map_err(io(dir.root()))?;
            if torn > 0 {
                notes.push(format!(
                    "{name}: a torn last line ({torn} bytes, never acknowledged) moved to {name}.torn"
                ));
            }
        }
        let journal_path = dir.file(crate::journal::JOURNAL_NAME);
        let bytes = dir
            .read_bytes(crate::journal::JOURNAL_NAME)
            .map_err(io(&journal_path))?
            .ok_or_else(|| {
                Error::invalid(
                    format!("{}: the run has no receipt journal", journal_path.display()),
                    Vec::new(),
                )
            })?;
        let receipts = decode_receipts(&bytes);
        // Nothing is continued against the home's signed ledger (issue 31 item 1): a run the
        // ledger records closed is continued only from that very journal, and a run from the
        // journal whose start it records. A run directory put back from an earlier copy (a
        // backup, a sync conflict) is refused here, before anything is signed or performed —
        // which also keeps a restored `approved` file from authorising a second execution.
        let record = crate::ledger::run_record(&home.root, &setup.keys, &inputs.run_id)?;
        // The ledger names a run from its first receipt on (the entry is appended right after
        // it): a journal past that first receipt whose run the ledger does not record started
        // means the ledger was deleted, emptied, cut or replaced by an older copy (outside
        // testing round 13: the rolled-back run then performed its approved action again).
        if receipts.ids.len() > 1 && record.as_ref().is_none_or(|r| r.started.is_none()) {
            return Err(Error::refused(format!(
                "{}: its journal holds {} receipts but the home ledger {} its start: the ledger was deleted, cut or replaced by an older copy. Nothing was signed or performed; check the home with `craik receipts verify {}` (`craik ledger rebuild` only once you know why)",
                inputs.run_id,
                receipts.ids.len(),
                if record.is_none() {
                    "(missing or empty) cannot record"
                } else {
                    "does not record"
                },
                home.root.display()
            )));
        }
        // A journal of one receipt the ledger does not record is a start a crash cut short —
        // unless the directory holds what only a run past its start writes: then it is a run
        // cut back to its first receipt (outside testing round 17b M4: "recovered" as a start,
        // it was recorded anew and the trace of the cut was gone). Deleting those too is
        // deleting the run, which only a ledger head kept elsewhere shows (SECURITY.md).
        if receipts.ids.len() == 1 && record.as_ref().is_none_or(|r| r.started.is_none()) {
            let later = if dir.file(HANDOFF).exists() {
                Some(HANDOFF.to_owned())
            } else {
                dir.list(crate::run::precommand::DIR)
                    .map_err(io(&dir.file(crate::run::precommand::DIR)))?
                    .into_iter()
                    .next()
                    .map(|f| format!("{}/{f}", crate::run::precommand::DIR))
            };
            if let Some(later) = later {
                return Err(Error::refused(format!(
                    "{}: its journal holds only its first receipt, which the home ledger does not record, yet the run directory holds `{later}`, which only a run past its start writes: the journal (and the ledger) were cut back. Nothing was signed or performed; check the home with `craik receipts verify {}`",
                    inputs.run_id,
                    home.root.display()
                )));
            }
        }
        if let Some(first) = record.as_ref().and_then(|r| r.unnamed.first()) {
            return Err(Error::refused(format!(
                "{}: the home ledger does not name {} journal(s) of this home (first {first}): it is older than the home (an older copy put back, or cut). Nothing was signed or performed; check the home with `craik receipts verify {}` (a killed `approvals approve|deny` or `memory approve|reject` is finished by running it again; a run killed at its start, by `craik runs recover RUN`)",
                inputs.run_id,
                record.as_ref().map_or(0, |r| r.unnamed.len()),
                home.root.display()
            )));
        }
        // A run `ledger rebuild` recorded open is never continued: the ledger vouches for its
        // journal only from the rebuild, so a run directory put back before it (its approval
        // then used again) cannot be told from the original (outside testing round 14).
        // Closing it from its receipts alone performs nothing and stays allowed (outside
        // testing round r31d P3: such a run could never be closed, and blocked key rotation).
        if record
            .as_ref()
            .is_some_and(|r| r.rebuilt && r.closed.is_none())
            && !receipts.closed
            && replay == Replay::Events
        {
            return Err(Error::refused(format!(
                "{}: the home ledger records this run's start from `craik ledger rebuild`, which vouches for its journal only from the rebuild: an open run it recorded is not continued (nothing was signed or performed); start the task again, and close this one with `craik runs cancel {} --from-receipts --by user:NAME --reason TEXT`",
                inputs.run_id, inputs.run_id
            )));
        }
        if let Some(record) = &record {
            let put_back = |what: String| {
                Error::refused(format!(
                    "{}: {what}; the run directory was put back from an earlier copy or edited. Nothing was signed or performed; check the home with `craik receipts verify {}`",
                    inputs.run_id,
                    home.root.display()
                ))
            };
            if let Some((size, root)) = &record.closed {
                let here = crate::ledger::last_checkpoint(&journal_path)
                    .filter(|c| c.is_final)
                    .map(|c| (c.tree_size, c.root_hash));
                if here.as_ref() != Some(&(*size, root.clone())) {
                    return Err(put_back(format!(
                        "the home ledger records this run closed (tree size {size}, root {root}), but its journal here {}",
                        match here {
                            Some((s, r)) => format!("closed at tree size {s}, root {r}"),
                            None => "is not closed".to_owned(),
                        }
                    )));
                }
            }
            if let (Some(started), Some(first)) = (&record.started, &receipts.first)
                && *started != first.request_hash
            {
                return Err(put_back(format!(
                    "the home ledger records this run started from inputs {started}, its journal here from {}",
                    first.request_hash
                )));
            }
        }
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
        // The journal (verified above when open, by the run's opening when closed) must extend
        // every point the ledger recorded the host acting from: a park, an approval consumed.
        // A copy saved while parked, put back after the approval was used, holds fewer
        // receipts or others (outside testing round 13: the approval was used twice).
        if let Some(record) = &record
            && !record.checkpoints.is_empty()
        {
            let tree = craik_kernel::JournalTree::from_verified(&bytes).map_err(|why| {
                Error::invalid(format!("{}: {why}", journal_path.display()), Vec::new())
            })?;
            if let Err(why) = record.extended_by(&tree.leaves) {
                return Err(Error::refused(format!(
                    "{}: {why}; the run directory was put back from an earlier copy or edited. Nothing was signed or performed; check the home with `craik receipts verify {}`",
                    inputs.run_id,
                    home.root.display()
                )));
            }
        }
        let journal_file = dir.open_journal().map_err(io(dir.root()))?;
        // Events and outputs are read one line at a time (their size is the runner's to
        // drive): the outputs only for their ids, the events as they are replayed.
        let events = crate::run::store::json_lines::<Event>(&dir.file(EVENTS))
            .map_err(|e| Error::invalid(e, Vec::new()))?;
        let output_ids: HashSet<String> =
            crate::run::store::json_lines::<OutputId>(&dir.file(OUTPUTS))
                .map_err(|e| Error::invalid(e, Vec::new()))?
                .map(|o| o.map(|o| o.id))
                .collect::<Result<_, _>>()
                .map_err(|e| Error::invalid(e, Vec::new()))?;
        let workspace = Workspace::open(&inputs.workspace).map_err(Error::usage)?;
        let budget = budget_of(&inputs);
        let mut run = initial_run(&inputs, &setup.matrix);
        run.status = TaskRunStatus::Running;
        let mut host = Self::assemble(
            home,
            dir,
            inputs,
            lock,
            setup,
            journal,
            journal_file,
            RunLoop::new(run, budget),
            workspace,
        );
        host.load_prompt()?;
        host.receipts_by_action = receipts.by_action;
        host.used_approvals = receipts.approvals_used;
        host.cancelled = receipts.cancelled;
        host.output_ids = output_ids;
        host.closed = closed;
        host.notes = notes;
        host.first = receipts.first;
        host.tokens = receipts.tokens;
        host.parked_reasons = receipts.parked;
        for id in receipts.ids {
            host.machine.note_receipt(id);
        }
        if replay == Replay::ReceiptsOnly {
            drop(events);
            host.from_receipts = true;
            host.notes.push(
                "events.jsonl was not replayed: the run is closed from what its receipts sign"
                    .to_owned(),
            );
        } else {
            // A closed journal signs nothing more: its events may show how a run from before
            // closing receipts ended.
            let waits = SignedWaits {
                parks: receipts.park_times,
                resumes: receipts.resumes.into(),
            };
            host.replay(events, receipts.ending.is_some() || closed, waits)?;
        }
        // A side effect the ledger records starting did start, whatever events.jsonl says
        // (outside testing round 17 N1: with the `executing` event deleted after a kill, the
        // command was decided and run again): its file hashes come from the ledger, and one
        // the events no longer propose means they were cut or edited.
        if let Some(record) = &record
            && !closed
            && receipts.ending.is_none()
            && replay == Replay::Events
        {
            host.believe_ledger_starts(&record.starting)?;
        }
        if receipts.ending.is_none() && !closed && replay == Replay::Events {
            host.pending_as_decided()?;
        }
        // The signed closing receipt names the ending; the events and run.json are the host's
        // own account and never override it.
        if let Some((status, reason)) = receipts.ending {
            if host
                .halted
                .as_ref()
                .is_some_and(|(s, r)| *s != status || *r != reason)
            {
                host.notes.push(format!(
                    "the run's events say it ended {}; its signed closing receipt says {}: the signed ending stands",
                    host.halted.as_ref().map_or("?", |(s, _)| s.as_str()),
                    status.as_str()
                ));
            }
            let at = host.clock.now();
            host.machine.restore_end(status, reason.clone(), at);
            host.halted = Some((status, reason.clone()));
            host.signed_end = Some((status, reason));
        }
        host.ledger_started()?;
        Ok(host)
    }

    /// Replays the run's events. `signed_ending`: whether a closing receipt signs an ending;
    /// without one, a `halted` event is not believed (the ending is signed before that event
    /// is written, so only an edit of events.jsonl makes one), and its status and reason are
    /// never what the host signs.
    pub(super) fn replay(
        &mut self,
        events: impl Iterator<Item = Result<Event, String>>,
        signed_ending: bool,
        mut waits: SignedWaits,
    ) -> Result<(), Error> {
        // Every outcome event names its receipt, which is durable before the event is written:
        // one naming a receipt the journal does not hold means the journal was cut or the
        // events edited (outside testing round 14: a journal cut to its first receipt was
        // closed `completed` from outcomes no receipt signed), and nothing is continued.
        let signed: HashSet<String> = self.machine.run().receipt_ids.iter().cloned().collect();
        // The actions of every act step replayed: each signed decision of an act step's
        // action must be of one of them.
        let mut replayed: HashSet<String> = HashSet::new();
        for event in events {
            let event = event.map_err(|e| Error::invalid(e, Vec::new()))?;
            if let Event::Outcome { outcome, .. } = &event
                && !signed.contains(&outcome.receipt)
            {
                return Err(self.events_disagree(format!(
                    "events.jsonl records an outcome of {} whose receipt {} the journal does not hold: the journal was cut or the events edited",
                    craik_contracts::one_line(&outcome.action),
                    craik_contracts::one_line(&outcome.receipt),
                )));
            }
            match event {
                Event::StepRequest { .. } => {}
                Event::StepResult {
                    at,
                    result,
                    actions,
                    next,
                } => {
                    let next = next.map(|n| match n {
                        craik_contracts::NextStep::Continue => Next::Continue,
                        craik_contracts::NextStep::Stop => Next::Stop,
                    });
                    let before = self.machine.clone();
                    // Replaying what was accepted before cannot fail differently now; if it
                    // does, the events were edited. A closing receipt signs how the run ended
                    // whatever they say: the replay stops there and the run is finalised from
                    // that receipt (outside testing round 17: an edited step left a run whose
                    // `run.closed` was signed unrecoverable, its home invalid for good).
                    if let Err(e) = self
                        .machine
                        .accept(result.phase, result.status, next, at.get())
                    {
                        if signed_ending {
                            self.notes.push(format!(
                                "events.jsonl does not replay ({e}); the run's signed closing receipt stands"
                            ));
                            break;
                        }
                        return Err(self
                            .events_disagree(format!(
                                "{}: replay refused: {e}",
                                self.dir.file(EVENTS).display()
                            ))
                            .with_kind(crate::ErrorKind::Invalid));
                    }
                    // An ending only the runner's answer reached, no receipt signing it, is an
                    // unsigned claim (outside testing round 17 N3: a `step_result` edited to
                    // `failed` was signed as the run's ending): that answer is set aside and
                    // the step is asked again when the run is resumed.
                    if !signed_ending && self.machine.run().ended_at.is_some() {
                        // Not when the journal signs decisions of that step's actions: then
                        // the host acted on another answer of it (outside testing round 17b:
                        // an act step edited to `failed` after a kill mid-command was asked
                        // again, and the command ran twice).
                        if let Some(decided) = actions
                            .iter()
                            .find(|a| self.receipts_by_action.contains_key(&a.id))
                        {
                            return Err(self.events_disagree(format!(
                                "events.jsonl says the runner's answer to step {} ended the run, but the journal signs a decision of its action {}: the events were edited",
                                self.step_count,
                                craik_contracts::one_line(&decided.id),
                            )));
                        }
                        self.machine = before;
                        self.notes.push(format!(
                            "the runner's answer to step {} ({}) ended the run, but no receipt signs that ending: the step will be asked again",
                            self.step_count,
                            result.phase.as_str()
                        ));
                        continue;
                    }
                    self.step_count += 1;
                    self.step_result_ids.push(result.id.clone());
                    self.memory_ids.extend(result.memory_proposal_ids.clone());
                    if result.phase == Phase::Act {
                        let step = super::step_actions_digest(&actions)?;
                        self.step_binds(&step, &actions)?;
                        replayed.extend(actions.iter().map(|a| a.id.clone()));
                        self.step_actions = Some(step);
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
                    let outcome = self.signed_outcome_of(outcome)?;
                    self.pending.retain(|a| a.id != outcome.action);
                    self.outcomes.push(outcome.clone());
                    self.all_outcomes.push(outcome);
                }
                // The reason shown is the one the park's receipt signs (outside testing round
                // 13: an edited `parked` event's reason was shown and saved as the run's
                // state); a park no receipt signs yet (a crash between the event and its
                // receipt) is shown by its approval id alone.
                Event::Parked {
                    at,
                    reason,
                    approval,
                } => {
                    let signed = self.parked_reasons.get(&approval).cloned();
                    if signed.is_none() {
                        self.notes.push(format!(
                            "events.jsonl records a park that no receipt signs (`{}`): its reason is not believed",
                            craik_contracts::Truncated(&craik_contracts::one_line(&reason))
                        ));
                    }
                    let reason = signed.unwrap_or_else(|| {
                        format!(
                            "awaiting approval {}",
                            craik_contracts::Truncated(&craik_contracts::one_line(&approval))
                        )
                    });
                    // A wait starts at the time its `run.parked` receipt signs, never at the
                    // event's (an unsigned park credits no wait).
                    let signed_at = waits.parks.get(&approval).copied();
                    self.machine.park(reason, signed_at.unwrap_or(at.get()));
                    if self.parked_at.is_none() {
                        self.parked_at = signed_at;
                    }
                }
                // A reopening is believed only with a `run.resume` receipt signed for it, and
                // its time is that receipt's (outside testing round r31f D1: a forged
                // `reopened` event had a parked run's pending approval skipped on resume).
                Event::Reopened { .. } => match waits.resumes.pop_front() {
                    Some(at) => {
                        if let Some(since) = self.parked_at.take() {
                            self.machine
                                .credit_wait((at - since).max(time::Duration::ZERO));
                        }
                        self.machine.reopen(at);
                    }
                    None => self.notes.push(
                        "events.jsonl records a reopening that no `run.resume` receipt signs: not believed"
                            .to_owned(),
                    ),
                },
                Event::Recovered { .. } => {}
                Event::Halted { at, status, reason } if signed_ending => {
                    // The recorded ending stands over one the replayed steps reached (a
                    // completion the host refused: a required verification never ran); the
                    // signed one is restored over both below.
                    self.machine.restore_end(status, reason.clone(), at.get());
                    self.halted = Some((status, reason));
                }
                Event::Halted { status, reason, .. } => {
                    self.notes.push(format!(
                        "events.jsonl records an ending ({}: {}) that no closing receipt signs: not believed; the run is recovered from what its receipts sign",
                        status.as_str(),
                        craik_contracts::Truncated(&craik_contracts::one_line(&reason))
                    ));
                }
            }
        }
        // Every signed outcome of an earlier step counts, whether or not its event survived
        // (outside testing round r31g O3: a failed command's outcome event deleted from an
        // earlier iteration let the run be signed `passed`); the current step's are settled.
        let known: HashSet<String> = self
            .all_outcomes
            .iter()
            .map(|o| o.receipt.clone())
            .collect();
        let missing: Vec<Outcome> = self
            .receipts_by_action
            .iter()
            .filter(|(action, _)| !self.pending.iter().any(|p| &p.id == *action))
            .flat_map(|(action, rs)| {
                rs.iter()
                    .filter(|r| {
                        r.decided_by.kind == DecidedByKind::Outcome && !known.contains(&r.id)
                    })
                    .map(|r| Outcome {
                        action: action.clone(),
                        label: action.clone(),
                        decision: "allow".into(),
                        ok: r.result.status == ReceiptStatus::Passed,
                        summary: r.result.summary.clone(),
                        output: None,
                        receipt: r.id.clone(),
                    })
            })
            .collect();
        self.all_outcomes.extend(missing);
        // A decision the journal signs for an act step's action that no replayed step proposes:
        // the step was cut from the events or renamed (outside testing round 17b M2/M3: it was
        // asked again, and actions with signed outcomes were signed `failed`, or a renamed one
        // was decided and performed as new).
        if !signed_ending
            && let Some((action, _)) = self.receipts_by_action.iter().find(|(id, rs)| {
                !replayed.contains(*id)
                    && rs
                        .iter()
                        .any(|r| r.result.metadata.0.contains_key(STEP_ACTIONS))
            })
        {
            return Err(self.events_disagree(format!(
                "the journal signs a decision of {}, which no step in events.jsonl proposes: the events were cut or edited",
                craik_contracts::one_line(action)
            )));
        }
        Ok(())
    }

    /// The refusal when `events.jsonl` disagrees with what the journal signs: nothing is
    /// continued from it, and the operator's way out is named — a cancel that closes the run
    /// from its signed receipts alone (outside testing round 17b M7: an edited earlier step
    /// left a run no command could finish).
    fn events_disagree(&self, what: String) -> Error {
        Error::refused(format!(
            "{}: {what}. Nothing was signed or performed; check the home with `craik receipts verify {}`; to end the run without its events, `craik runs cancel {} --from-receipts --by user:NAME --reason TEXT` closes it from its signed receipts alone",
            self.inputs.run_id,
            self.home.root.display(),
            self.inputs.run_id,
        ))
    }

    /// An outcome event as its receipt signs it: the receipt it names must be that action's
    /// signed outcome, and what it says (passed or not, the summary) comes from the receipt,
    /// never from the event (outside testing round r31e Q1/Q2: an outcome event naming the
    /// command's decision receipt closed a run killed mid-command `completed`; one flipped to
    /// failed had the host sign `failed` with the attacker's text). The output shown to the
    /// runner is the event's only when its digest is the receipt's `output_sha256`.
    fn signed_outcome_of(&mut self, outcome: Outcome) -> Result<Outcome, Error> {
        let signed = self
            .receipts_by_action
            .get(&outcome.action)
            .and_then(|rs| rs.iter().find(|r| r.id == outcome.receipt))
            .cloned();
        // The receipt must be the action's own: its signed outcome, or — for an action not
        // performed (denied, awaiting approval, shadow) — the decision that stopped it. An
        // allow decided in enforcement is never an outcome (outside testing round r31e Q1).
        let performed = signed
            .as_ref()
            .is_some_and(|r| r.decided_by.kind == DecidedByKind::Outcome);
        let stopped = signed.as_ref().is_some_and(|r| {
            r.decided_by.kind != DecidedByKind::Outcome
                && (r.decision != Decision::Allow || r.mode == Mode::Shadow)
        });
        let Some(signed) = signed.filter(|_| performed || stopped) else {
            return Err(self.events_disagree(format!(
                "events.jsonl records an outcome of {} naming receipt {}, which is not its signed outcome: the events were edited",
                craik_contracts::one_line(&outcome.action),
                craik_contracts::one_line(&outcome.receipt),
            )));
        };
        // The output shown to the runner must be the one the receipt binds: one it does not
        // bind is not shown, one it binds otherwise is an edit (r31f O1).
        let bound = signed
            .result
            .metadata
            .0
            .get(super::executors::OUTPUT_SHA256)
            .and_then(Value::as_str);
        let output = match (&outcome.output, bound) {
            (Some(text), Some(digest)) if exec::digest(text.as_bytes()) == digest => {
                outcome.output.clone()
            }
            (Some(_), Some(_)) => {
                return Err(self.events_disagree(format!(
                    "events.jsonl records an output of {} other than the one its signed outcome binds: the events were edited",
                    craik_contracts::one_line(&outcome.action),
                )));
            }
            (Some(_), None) => {
                self.notes.push(format!(
                    "{}: its output in events.jsonl is bound by no receipt: not shown",
                    craik_contracts::one_line(&outcome.action)
                ));
                None
            }
            (None, _) => None,
        };
        // Every field the ending is judged on comes from the receipt (outside testing round
        // r31g O2: a failed command's outcome edited to `deny` was not counted as failed).
        let (ok, decision, summary) = if performed {
            (
                signed.result.status == ReceiptStatus::Passed,
                "allow".to_owned(),
                signed.result.summary.clone(),
            )
        } else {
            (
                false,
                decision_name(signed.decision).to_owned(),
                outcome.summary,
            )
        };
        Ok(Outcome {
            ok,
            decision,
            summary,
            output,
            ..outcome
        })
    }

    /// Refuses when a replayed act step's `actions` are not the list its signed decisions
    /// bind (`step_actions_sha256`, digest `step`): an action added, renamed, removed or
    /// edited in `events.jsonl` after the host decided one of them.
    fn step_binds(&self, step: &str, actions: &[ActionRecord]) -> Result<(), Error> {
        for action in actions {
            let Some(rs) = self.receipts_by_action.get(&action.id) else {
                continue;
            };
            if let Some(signed) = rs.iter().find_map(|r| {
                r.result
                    .metadata
                    .0
                    .get(STEP_ACTIONS)
                    .and_then(Value::as_str)
                    .filter(|s| *s != step)
            }) {
                return Err(self.events_disagree(format!(
                    "events.jsonl holds the act step of {} with actions other than those its signed decisions bind ({signed}, here {step}): the events were edited",
                    craik_contracts::one_line(&action.id)
                )));
            }
        }
        Ok(())
    }

    /// Refuses when an action the events propose has a signed decision of another request
    /// (its `request_hash`): the events were edited after the host decided it — started or
    /// not (outside testing round 17b: a started write's content and a command's argv were
    /// edited, and the outcome signed for the edited request).
    fn pending_as_decided(&self) -> Result<(), Error> {
        for action in &self.pending {
            let Some(signed) = self.receipts_by_action.get(&action.id).and_then(|rs| {
                rs.iter()
                    .rev()
                    .find(|r| r.decided_by.kind != DecidedByKind::Outcome)
            }) else {
                continue;
            };
            let request = self.decision_request(action, Vec::new());
            let here = craik_kernel::request_hash(&self.bundle, &request, &self.workspace_root());
            if here.as_deref() != Ok(signed.request_hash.as_str()) {
                return Err(self.events_disagree(format!(
                    "events.jsonl proposes {} as a request other than the one its signed decision {} hashes ({}): the events were edited",
                    craik_contracts::one_line(&action.id),
                    signed.id,
                    signed.request_hash,
                )));
            }
        }
        Ok(())
    }

    /// Marks each side effect `starting` (from the ledger) that has no signed outcome as
    /// started; refuses when the events do not propose it.
    fn believe_ledger_starts(&mut self, starting: &[crate::ledger::Starting]) -> Result<(), Error> {
        let has_outcome = |host: &Self, action: &str| {
            host.receipts_by_action.get(action).is_some_and(|rs| {
                rs.iter()
                    .any(|r| r.decided_by.kind == DecidedByKind::Outcome)
            })
        };
        // The `executing` checkpoints (an `undoing` one names findings, not a start).
        let starts: Vec<&crate::ledger::Starting> =
            starting.iter().filter(|s| s.findings.is_none()).collect();
        for s in &starts {
            if has_outcome(self, &s.action) {
                continue;
            }
            // A start the events record must name the file hashes the ledger signs
            // (outside testing round r31e Q4: a forged `post` had the attacker's bytes
            // signed "found applied", a forged `pre` a started write performed again).
            if let Some((pre, post)) = self.executing.get(&s.action) {
                if (pre, post) != (&s.pre, &s.post) {
                    return Err(self.events_disagree(format!(
                        "events.jsonl records {} starting with other file hashes than the home ledger signs: the events were edited",
                        craik_contracts::one_line(&s.action),
                    )));
                }
                continue;
            }
            if !self.pending.iter().any(|a| a.id == s.action) {
                return Err(self.events_disagree(format!(
                    "the home ledger records that {} started, and events.jsonl neither proposes it nor records its outcome: the events were cut or edited",
                    craik_contracts::one_line(&s.action),
                )));
            }
            self.executing
                .insert(s.action.clone(), (s.pre.clone(), s.post.clone()));
            self.notes.push(format!(
                "{}: events.jsonl does not record that it started; the home ledger signs that it did",
                craik_contracts::one_line(&s.action)
            ));
        }
        // A side effect the events say started, which the ledger does not record starting
        // (its entry precedes every side effect): it never started, and the event's file
        // hashes are not believed.
        let unrecorded: Vec<String> = self
            .executing
            .keys()
            .filter(|a| !starts.iter().any(|s| &s.action == *a) && !has_outcome(self, a))
            .filter(|a| {
                self.pending.iter().any(|p| {
                    &p.id == *a
                        && Effect::of(&p.proposed.capability, &p.proposed.operation)
                            .is_some_and(|e| e.is_side_effect())
                })
            })
            .cloned()
            .collect();
        for action in unrecorded {
            self.executing.remove(&action);
            self.notes.push(format!(
                "{}: events.jsonl records that it started, but the home ledger does not: it never started",
                craik_contracts::one_line(&action)
            ));
        }
        Ok(())
    }

    /// [`Host::settle`] for operator `by` resuming the run: the first receipt settling signs
    /// (an uncertain outcome, an ending) comes after a `run.recover` naming them.
    pub fn settle_for(&mut self, by: &str) -> Result<Vec<String>, Error> {
        self.settle_because(by, "recovered by the operator on resuming")
    }

    /// [`Host::settle_for`], the `run.recover` receipt giving `why` (a cancel's reason: a
    /// cancel whose settling ends the run has no `run.cancel` to carry it; outside testing
    /// round 17b M8).
    pub fn settle_because(&mut self, by: &str, why: &str) -> Result<Vec<String>, Error> {
        self.settling_for = Some((by.to_owned(), why.to_owned()));
        let found = self.settle();
        self.settling_for = None;
        found
    }

    /// Settles a run recovered with [`Replay::ReceiptsOnly`] for operator `by`, who then
    /// closes it: an ending the journal signs is finalised; otherwise every action whose last
    /// signed decision is an allow and that has no signed outcome gets one, failed and
    /// uncertain (whether it ran cannot be told without the events; it is never run again).
    /// Nothing is decided or performed. Signed after a `run.recover` naming `by`.
    pub fn settle_from_receipts(&mut self, by: &str) -> Result<Vec<String>, Error> {
        if !self.from_receipts {
            return Err(Error::internal(
                "settle_from_receipts: the run was recovered with its events",
            ));
        }
        self.settling_for = Some((
            by.to_owned(),
            "closing the run from its signed receipts".to_owned(),
        ));
        let settled = self.close_unsettled();
        self.settling_for = None;
        let committed = self.commit();
        settled.and_then(|found| committed.map(|()| found))
    }

    fn close_unsettled(&mut self) -> Result<Vec<String>, Error> {
        let mut found = std::mem::take(&mut self.notes);
        if self.finish_ended(&mut found)? {
            return Ok(found);
        }
        // What started is what the home ledger records starting (durably, before every side
        // effect): a decision it does not name never took effect; a review or a memory
        // proposal is no side effect (outside testing round r31d P2: they were signed
        // "uncertain").
        let record = crate::ledger::run_record(&self.home.root, &self.keys, &self.inputs.run_id)?;
        let mut started: Vec<crate::ledger::Starting> = Vec::new();
        for s in record.map(|r| r.starting).into_iter().flatten() {
            if !started.iter().any(|t| t.action == s.action) {
                started.push(s);
            }
        }
        for s in started {
            let Some(receipts) = self.receipts_by_action.get(&s.action) else {
                continue;
            };
            if receipts
                .iter()
                .any(|r| r.decided_by.kind == DecidedByKind::Outcome)
            {
                continue;
            }
            let Some(decision) = receipts
                .iter()
                .rev()
                .find(|r| r.decided_by.kind != DecidedByKind::Outcome)
                .filter(|r| r.decision == Decision::Allow)
                .cloned()
            else {
                continue;
            };
            let of = super::executors::OutcomeOf::decided(&s.action, &decision);
            let summary = self.close_started(&of, &s)?;
            found.push(format!(
                "{}: {summary}",
                craik_contracts::one_line(&s.action)
            ));
        }
        Ok(found)
    }

    /// The outcome of side effect `s`, started with no signed outcome, when the run is closed
    /// from its receipts: a command is checked against its signed pre-command record (what it
    /// may not change undone, every change named: outside testing round r31d P1), a file write
    /// by the file's bytes; anything else is uncertain. Never run again.
    fn close_started(
        &mut self,
        of: &super::executors::OutcomeOf,
        s: &crate::ledger::Starting,
    ) -> Result<String, Error> {
        // A start with no file hashes is a command's (a file write's names both): checked
        // against its pre-command record, which says TAMPERED OR LOST when it is missing
        // (outside testing round r31e Q3).
        let record = crate::run::precommand::name(&s.action)
            .is_some_and(|name| self.dir.file(&name).is_file());
        if record || (s.pre.is_none() && s.post.is_none()) {
            return self.recover_command(of);
        }
        if let Some(post) = &s.post {
            let now = TargetPath::normalize(&self.workspace_root(), &of.target)
                .map_err(|e| e.to_string())
                .and_then(|p| self.workspace.state(p.as_str()).map_err(|e| e.to_string()));
            match now {
                Ok(state) if state.hash() == Some(post.as_str()) => {
                    let summary = format!(
                        "found applied when the run was closed from its receipts ({post}); not executed again"
                    );
                    self.signed_outcome(of, true, &summary, None, Object::new())?;
                    return Ok(summary);
                }
                Ok(state) if state.hash() == s.pre.as_deref() => {
                    let summary =
                        "the file is unchanged: it never ran; not executed again".to_owned();
                    self.signed_outcome(of, false, &summary, None, Object::new())?;
                    return Ok(summary);
                }
                Ok(_) | Err(_) => {}
            }
        }
        let summary = "uncertain: closed from the run's signed receipts (events.jsonl does not replay), so whether it took effect is not known here; it is never run again: check the workspace".to_owned();
        self.signed_outcome(of, false, &summary, None, Object::new())?;
        Ok(summary)
    }

    /// Resolves what a crash left behind: finishes an interrupted finalisation, and records
    /// every uncertain action (decided, started, no outcome). Returns what it found.
    pub fn settle(&mut self) -> Result<Vec<String>, Error> {
        let settled = self.settle_pending();
        let committed = self.commit();
        settled.and_then(|found| committed.map(|()| found))
    }

    fn settle_pending(&mut self) -> Result<Vec<String>, Error> {
        let mut found = std::mem::take(&mut self.notes);
        self.sweep_precommand(&mut found)?;
        if self.finish_ended(&mut found)? {
            return Ok(found);
        }
        let pending = self.pending.clone();
        for action in &pending {
            if self.settle_action(action, &mut found)? {
                return Ok(found);
            }
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

    /// Removes the pre-command records of actions whose outcome is signed (the process
    /// stopped between the outcome and the removal) or that never started; keeps those of
    /// commands that started and have no outcome ([`Self::settle_started`] uses them).
    fn sweep_precommand(&mut self, found: &mut Vec<String>) -> Result<(), Error> {
        let names = self
            .dir
            .list(crate::run::precommand::DIR)
            .map_err(io(&self.dir.file(crate::run::precommand::DIR)))?;
        for file in names {
            let Some(action) = crate::run::precommand::action_of(&file) else {
                continue;
            };
            let signed = self.receipts_by_action.get(action).is_some_and(|rs| {
                rs.iter()
                    .any(|r| r.decided_by.kind == DecidedByKind::Outcome)
            });
            let started = self.executing.contains_key(action);
            if signed || !started {
                let action = action.to_owned();
                self.drop_precommand(&action);
                found.push(format!(
                    "{action}: its pre-command record removed ({})",
                    if signed {
                        "its outcome is signed"
                    } else {
                        "it never started"
                    }
                ));
            }
        }
        Ok(())
    }

    /// A run that had ended or halted but was not finalised is finalised (idempotently).
    /// Returns whether it was.
    fn finish_ended(&mut self, found: &mut Vec<String>) -> Result<bool, Error> {
        let run = self.machine.run();
        if self.halted.is_none() && run.ended_at.is_some() {
            // The last step ended the run; the process stopped before recording the halt.
            let (status, reason) = (run.status, run.stop_reason.clone().unwrap_or_default());
            found.push(format!(
                "the run had ended ({}) but was not finalised; finalising",
                status.as_str()
            ));
            self.finish_halt(status, reason)?;
            return Ok(true);
        }
        if let Some((status, reason)) = self.halted.clone() {
            // Finalisation is idempotent: each of its steps is skipped once done.
            if !self.closed || !self.dir.file(HANDOFF).is_file() {
                found.push("the run had halted but was not finalised; finalising".into());
            }
            self.finalize(status, &reason)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// One pending action after a crash: its outcome restored from its receipt, decided
    /// afresh, or (started, no outcome) settled by [`Self::settle_started`]. Returns whether
    /// the run halted.
    fn settle_action(
        &mut self,
        action: &ActionRecord,
        found: &mut Vec<String>,
    ) -> Result<bool, Error> {
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
            // Its pre-command record (a command killed after its outcome was signed) has
            // served.
            self.drop_precommand(&action.id);
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
            return Ok(false);
        }
        let Some((pre, post)) = self.executing.get(&action.id).cloned() else {
            // Never started: a pre-command record persisted just before is stale (the
            // command is decided again, and a new one is made if it runs).
            self.drop_precommand(&action.id);
            let last = receipts
                .iter()
                .rev()
                .find(|r| r.decided_by.kind != DecidedByKind::Outcome);
            // (Its request is the one its signed decision hashes: checked on reopening,
            // `Host::pending_as_decided`; outside testing round 17 N2.)
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
            return Ok(false);
        };
        self.settle_started(action, (pre, post), found)
    }

    /// An action that started and has no outcome: a read is decided afresh; a write whose file
    /// holds the intended bytes is recorded as done, an unchanged file means it never ran;
    /// anything else is uncertain and halts the run for an operator (never re-run blindly).
    /// Returns whether the run halted.
    fn settle_started(
        &mut self,
        action: &ActionRecord,
        (pre, post): (Option<String>, Option<String>),
        found: &mut Vec<String>,
    ) -> Result<bool, Error> {
        let effect = Effect::of(&action.proposed.capability, &action.proposed.operation);
        if effect.is_some_and(|e| !e.is_side_effect()) {
            // A read has no side effect: nothing is uncertain, it is decided afresh.
            self.executing.remove(&action.id);
            found.push(format!(
                "{}: a read was interrupted; it has no side effect and will be decided again",
                action.id
            ));
            return Ok(false);
        }
        // Started, no outcome: uncertain.
        let file_action = matches!(effect, Some(Effect::WriteFile | Effect::PatchFile));
        let target = action.proposed.target.clone().unwrap_or_default();
        if file_action {
            let current = TargetPath::normalize(&self.workspace_root(), &target)
                .map_err(|e| e.to_string())
                .and_then(|p| self.workspace.state(p.as_str()).map_err(|e| e.to_string()));
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
                    return Ok(false);
                }
                Ok(state) if state.hash() == pre.as_deref() => {
                    self.executing.remove(&action.id);
                    found.push(format!(
                    "{}: uncertain; the file is unchanged, so it never ran: needs a fresh decision",
                    action.id
                ));
                    return Ok(false);
                }
                Ok(_) | Err(_) => {}
            }
        }
        let summary = if file_action {
            let summary = "uncertain: the process stopped during the write and the file holds neither the old nor the new bytes; not retried".to_owned();
            self.outcome_receipt(action, false, &summary, None)?;
            summary
        } else if effect == Some(Effect::Execute) {
            // Checked against its persisted pre-command manifest (issue 31 item 2).
            let of = self.outcome_of(action)?;
            self.recover_command(&of)?
        } else {
            let summary =
                "uncertain: the process stopped while this ran; it is never re-run blindly"
                    .to_owned();
            self.outcome_receipt(action, false, &summary, None)?;
            summary
        };
        found.push(format!("{}: {summary}", action.id));
        self.halt(
            TaskRunStatus::Blocked,
            format!(
                "uncertain side effect {} ({}): an operator must check it",
                action.id, action.proposed.capability
            ),
        )?;
        Ok(true)
    }

    /// Continues a parked or recovered run: a pending approval refuses; a denied one halts.
    /// Why the run cannot be reopened now (a parked run's approval still pending), checked
    /// before anything is signed: a refused resume signs no `run.resume` (issue 31).
    pub fn check_reopen(&self) -> Result<(), Error> {
        if self.is_final() || self.machine.run().status != TaskRunStatus::Blocked {
            return Ok(());
        }
        let approvals = self.approvals()?;
        if let Some(pending) = approvals.iter().find(|a| {
            a.status == ApprovalStatus::Pending && self.pending.iter().any(|p| p.id == a.action.id)
        }) {
            return Err(Error::usage(format!(
                "approval {} is still pending: `craik approvals approve {} --by user:NAME --reason TEXT` (or deny)",
                pending.id, pending.id
            ))
            .with_kind(crate::ErrorKind::Refused));
        }
        // A decided review the run would act on must be named by the home ledger (recorded
        // before the approval file says decided): one it does not name means the ledger was
        // put back to before the decision (outside testing round 13). Checked before anything
        // is signed.
        let ring = {
            use craik_kernel::Signer as _;
            let mut ring = KeyRing::new();
            ring.add(&self.signer.public_key())
                .map_err(|e| Error::internal(format!("signing key: {e}")))?;
            ring
        };
        for decided in approvals.iter().filter(|a| {
            matches!(a.status, ApprovalStatus::Approved | ApprovalStatus::Denied)
                && self.pending.iter().any(|p| p.id == a.action.id)
        }) {
            crate::run::approvals::review_agrees(&self.home, &ring, &decided.id)?;
        }
        Ok(())
    }

    pub fn reopen(&mut self) -> Result<(), Error> {
        if self.is_final() {
            return Ok(());
        }
        let status = self.machine.run().status;
        self.check_reopen()?;
        if status == TaskRunStatus::Blocked {
            let approvals = self.approvals()?;
            let parked_for: Vec<&ApprovalRecord> = approvals
                .iter()
                .filter(|a| self.pending.iter().any(|p| p.id == a.action.id))
                .collect();
            // Each review is signed into the run's own journal as the run picks it up; a
            // denial's halt reason comes from its signed review, never from the plain file.
            let parked: Vec<ApprovalRecord> = parked_for.into_iter().cloned().collect();
            if let Some((id, review)) = self.record_reviews(&parked)? {
                let reason = format!(
                    "approval {id} denied by {}: {}",
                    review.approved_by, review.reason
                );
                self.halt(TaskRunStatus::Blocked, reason)?;
                return Ok(());
            }
            if let Some(denied) = parked
                .iter()
                .rev()
                .find(|a| a.status == ApprovalStatus::Denied)
            {
                let reason = format!(
                    "approval {} is marked denied but no verified review journal signs it (reviews/{}/); the run stays blocked",
                    denied.id, denied.id
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
}

/// The signed times waits for a person are credited from, as replay consumes them.
pub(super) struct SignedWaits {
    parks: HashMap<String, OffsetDateTime>,
    resumes: std::collections::VecDeque<OffsetDateTime>,
}

/// A run output's id, all recovery reads of it.
#[derive(serde::Deserialize)]
struct OutputId {
    id: String,
}

/// Receipts of a journal, indexed for recovery.
pub(super) struct Indexed {
    /// The first receipt (`run.inputs`).
    first: Option<ReceiptPayload>,
    /// The status and reason the signed closing receipt names.
    ending: Option<(TaskRunStatus, String)>,
    by_action: BTreeMap<String, Vec<ReceiptPayload>>,
    approvals_used: HashSet<String>,
    /// A `run.cancel` receipt is signed.
    cancelled: bool,
    ids: Vec<String>,
    closed: bool,
    /// What the `model.step` receipts count: each receipt once, whether or not its step's
    /// result survived (the tokens were spent either way).
    tokens: TokenUsage,
    /// The signed reason of each `run.parked` receipt, by the approval it awaits.
    parked: HashMap<String, String>,
    /// When each `run.parked` receipt was signed, by the approval it awaits, and when each
    /// `run.resume` was, in journal order: the only times a wait for a person is credited
    /// from (outside testing round r31f C1: forged `parked`/`reopened` events had a run's
    /// wall-clock budget credited back).
    park_times: HashMap<String, OffsetDateTime>,
    resumes: Vec<OffsetDateTime>,
}

pub(super) fn decode_receipts(bytes: &[u8]) -> Indexed {
    let mut out = Indexed {
        first: None,
        ending: None,
        by_action: BTreeMap::new(),
        approvals_used: HashSet::new(),
        cancelled: false,
        ids: Vec::new(),
        closed: false,
        tokens: TokenUsage::default(),
        parked: HashMap::new(),
        park_times: HashMap::new(),
        resumes: Vec::new(),
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
                if r.capability == super::human::OperatorAct::Cancel.capability() {
                    out.cancelled = true;
                }
                out.tokens.add_receipt(&r);
                if out.first.is_none() {
                    out.first = Some((*r).clone());
                }
                if r.capability == RUN_PARKED
                    && let Some(approval) = r
                        .result
                        .metadata
                        .0
                        .get("awaiting_approval")
                        .and_then(Value::as_str)
                {
                    out.parked.insert(approval.to_owned(), r.reason.clone());
                    if let Some(at) = signed_time(&r) {
                        out.park_times.insert(approval.to_owned(), at);
                    }
                }
                if r.capability == super::human::OperatorAct::Resume.capability()
                    && let Some(at) = signed_time(&r)
                {
                    out.resumes.push(at);
                }
                if r.capability == RUN_CLOSED
                    && let Some((status, reason, _)) =
                        crate::run::signed::signed_ending(std::slice::from_ref(&*r))
                {
                    out.ending = Some((status, reason));
                }
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

/// When receipt `r` was signed.
fn signed_time(r: &ReceiptPayload) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(
        &r.created_at,
        &time::format_description::well_known::Rfc3339,
    )
    .ok()
}
