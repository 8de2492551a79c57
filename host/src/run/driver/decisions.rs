//! Deciding a step's proposed actions: the request the kernel sees, its verdict and receipt,
//! approvals (parked, used), and the obligations a run must meet before it may complete.

use super::*;

impl Host {
    pub(super) fn process_actions(&mut self) -> Result<Flow, Error> {
        while let Some(action) = self.pending.first().cloned() {
            // Stopped by a signal: nothing more is decided or done (the driver halts the run).
            if crate::confine::interrupted().is_some() {
                self.save_run()?;
                return Ok(Flow::Go);
            }
            // A spent wall-clock budget stops the actions of a step accepted in time too
            // (outside testing round 9: writes performed 40 s past the budget).
            if self
                .machine
                .wall_clock_left(self.clock.now())
                .is_some_and(|left| left.is_zero())
                && let craik_kernel::Gate::Stop(status, reason) =
                    self.machine.gate(self.clock.now())
            {
                self.halt(status, reason)?;
                return Ok(Flow::Stop);
            }
            let (verdict, receipt) = self.decide_and_receipt(&action)?;
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
                    self.halt_on_denial(&action, &verdict, receipt)?;
                    return Ok(Flow::Stop);
                }
            }
        }
        self.save_run()?;
        Ok(Flow::Go)
    }

    /// Decides one action (a malformed one is refused by the kernel before policies) and
    /// signs the decision receipt, which names the exact action (`action_sha256`) and its
    /// operation; an approval it used is consumed. Returns the verdict and the receipt id.
    fn decide_and_receipt(&mut self, action: &ActionRecord) -> Result<(Verdict, String), Error> {
        let approvals = self.approvals_as_facts()?;
        let request = self.decision_request(action, approvals.clone());
        let options = DecideOptions {
            now: self.clock.now(),
            workspace_root: self.workspace_root(),
            mode: self.mode(),
            immutable: self.immutable.clone(),
        };
        let verdict = match self.shape_problem(action) {
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
            action,
            &verdict,
            approver,
        );
        if let Some(argv) = &action.proposed.argv {
            draft.target = format!("{} ({})", draft.target, self.command_identity(argv));
        }
        // The exact action decided (ids, content, edits, argv): what an approval file shows
        // must hash to this.
        let meta = &mut draft.result.metadata.0;
        // Every recorded action has a canonical form (checked when it was recorded); one that
        // had none would end the run here rather than sign an empty digest.
        let digest = action_digest(action).map_err(Error::internal)?;
        meta.insert("action_sha256".into(), json!(digest.as_str()));
        meta.insert("operation".into(), json!(action.proposed.operation));
        // ... and the act step it belongs to: recovery never believes another step.
        if let Some(step) = &self.step_actions {
            meta.insert(STEP_ACTIONS.into(), json!(step));
        }
        // Durable before the effect starts (its `executing` event commits it), before the
        // runner hears of it (`Host::step`), before an approval is marked consumed.
        let at = ts(self.clock.now());
        let receipt = self.receipt_lazy(draft)?;
        self.observe_decision(|| observe::DecisionNote::of(at, action, &verdict, &receipt));
        if let Some(id) = &verdict.approval {
            self.used_approvals.insert(id.clone());
            // The ledger records the journal with the consuming receipt before the approval
            // file says consumed and before the effect: a copy of the run from before it can
            // never be resumed to use the approval again.
            self.ledger_checkpoint("approval_used", None)?;
            self.set_approval_status(id, ApprovalStatus::Consumed)?;
        }
        if verdict.policy_exception {
            self.policy_exceptions.push(format!(
                "{}: fail-open let an evaluation error through ({})",
                action.id,
                verdict.errors.join("; ")
            ));
        }
        Ok((verdict, receipt))
    }

    /// A denied action stops the run: interrupted by the intent lock, else blocked; the reason
    /// names the action, why, the determining policies and, when no grant applied, why each
    /// of the task's grants did not (expired, another capability, operation, excluded).
    fn halt_on_denial(
        &mut self,
        action: &ActionRecord,
        verdict: &Verdict,
        receipt: String,
    ) -> Result<(), Error> {
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
        )
    }

    pub(super) fn decision_request(
        &self,
        action: &ActionRecord,
        approvals: Vec<Approval>,
    ) -> DecisionRequest {
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

    /// The host's own preconditions on an action's shape (what the executors need).
    pub(super) fn shape_problem(&self, action: &ActionRecord) -> Option<String> {
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
    pub(super) fn approvals_as_facts(&self) -> Result<Vec<Approval>, Error> {
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

    pub(super) fn park_for_approval(
        &mut self,
        action: &ActionRecord,
        verdict: &Verdict,
    ) -> Result<(), Error> {
        // The decision that asks for the approval is durable before the approval file names it.
        self.sync_journal()?;
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
            write_approval(self.dir.as_ref(), &record)?;
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
            approval: id.clone(),
        })?;
        self.machine.park(reason.clone(), at);
        // Signed: the run is blocked and may continue once the approval is decided.
        let draft = self.parked_draft(&reason, &id);
        self.receipt(draft)?;
        // A checkpoint, so a truncation of what is written is caught while the journal is open.
        let line = self
            .journal
            .checkpoint_now(self.clock.now(), &self.signer)
            .map_err(|e| Error::internal(format!("checkpoint: {e}")))?;
        self.journal_line(&line)?;
        self.ledger_checkpoint("parked", None)?;
        self.save_run()
    }

    /// The receipt of a park: status `blocked`, `may_continue` true, the approval awaited.
    fn parked_draft(&self, reason: &str, approval: &str) -> ReceiptDraft {
        let mut metadata = craik_contracts::Object::new();
        metadata.0.insert("status".into(), json!("blocked"));
        metadata.0.insert("may_continue".into(), json!(true));
        metadata
            .0
            .insert("awaiting_approval".into(), json!(approval));
        self.ending_draft(
            RUN_PARKED,
            reason,
            ReceiptResult {
                status: ReceiptStatus::Blocked,
                summary: format!("parked awaiting approval {approval}; the run may continue"),
                metadata,
            },
            exec::digest(format!("blocked:{reason}").as_bytes()),
        )
    }

    /// Why a run the runner says is done may not end `completed`: an allowed side effect
    /// that failed (`failed`, naming it), or a capability the envelope lists under
    /// `verification_required` that never ran and passed (`blocked`). Shadow runs perform
    /// nothing, so they owe nothing.
    pub(super) fn unmet_obligations(&self) -> Option<(TaskRunStatus, String)> {
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

    pub(super) fn approvals(&self) -> Result<Vec<ApprovalRecord>, Error> {
        read_approvals(self.dir.as_ref())
    }

    pub(super) fn set_approval_status(
        &mut self,
        id: &str,
        status: ApprovalStatus,
    ) -> Result<(), Error> {
        // The receipt that used or closed it is durable first.
        self.sync_journal()?;
        if let Some(mut record) = self.approvals()?.into_iter().find(|a| a.id == id) {
            record.status = status;
            write_approval(self.dir.as_ref(), &record)?;
            self.crash.synced(2);
            self.crash.point();
        }
        Ok(())
    }
}

pub(super) fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::RequiresApproval => "requires_approval",
        Decision::Deny => "deny",
    }
}

pub(super) fn target_text(action: &ActionRecord) -> String {
    action.shown()
}

/// The decision metadata naming the act step's action list digest.
pub(super) const STEP_ACTIONS: &str = "step_actions_sha256";

pub(super) fn decision_draft(
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
