//! What a run leaves for people: run outputs, memory proposals, the handoff.

use super::*;

impl Host {
    pub(super) fn write_output(
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
        // Durable at the next commit, before the step's event (`Host::commit`).
        self.dir
            .append(OUTPUTS, &output, false)
            .map_err(io(self.dir.root()))?;
        self.output_ids.insert(output.id.clone());
        self.outputs_dirty = true;
        self.crash.point();
        Ok(())
    }

    pub(super) fn handoff(&self, id: String, status: TaskRunStatus, reason: &str) -> Handoff {
        let run = self.machine.run();
        let done: Vec<&Outcome> = self.all_outcomes.iter().filter(|o| o.ok).collect();
        let work = self.work_done(&done);
        let open = self.left_open(status, reason);
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
                validation_recorded: !work.tests_run.is_empty(),
                policy_exceptions_disclosed: true,
                notes: vec![format!(
                    "written by craik {} from the run's journals; the runner's own claims are not trusted",
                    env!("CARGO_PKG_VERSION")
                )],
            },
            completed_actions: work.completed_actions,
            files_changed: work.files_changed,
            artifacts: self.step_result_ids.clone(),
            commands_run: work.commands_run,
            assumptions: Vec::new(),
            context_debt: open.context_debt,
            policy_exceptions: self.policy_exceptions.clone(),
            facts_learned: Vec::new(),
            facts_invalidated: Vec::new(),
            contradictions_opened: Vec::new(),
            adjudication_ids: Vec::new(),
            unresolved_disagreements: Vec::new(),
            open_human_delegation_ids: Vec::new(),
            scope_change_request_ids: Vec::new(),
            scope_change_result_ids: Vec::new(),
            tests_run: work.tests_run,
            risks: open.risks,
            next_steps: open.next_steps,
            receipt_ids: run.receipt_ids.clone(),
            memory_proposal_ids: self.memory_ids.clone(),
            created_at: ts(self.clock.now()),
        }
    }

    /// What the run's completed actions did, from its own records (never the runner's claims).
    fn work_done(&self, done: &[&Outcome]) -> WorkDone {
        let actions = self.actions_by_id();
        let mut work = WorkDone::default();
        for o in done {
            work.completed_actions
                .push(format!("{}: {}", o.action, o.summary));
            let Some(a) = actions.get(&o.action) else {
                continue;
            };
            match (
                a.proposed.capability.as_str(),
                a.proposed.operation.as_str(),
            ) {
                (c, "write" | "patch") if c.starts_with("repo.write") => {
                    work.files_changed
                        .push(a.proposed.target.clone().unwrap_or_default());
                }
                (c, "execute") => {
                    let line = a.proposed.argv.clone().unwrap_or_default().join(" ");
                    if c == "shell.test" {
                        work.tests_run.push(line.clone());
                    }
                    work.commands_run.push(line);
                }
                _ => {}
            }
        }
        work
    }

    /// What a person must look at next: actions that did not complete, actions never done,
    /// and why the run stopped.
    fn left_open(&self, status: TaskRunStatus, reason: &str) -> LeftOpen {
        let mut open = LeftOpen::default();
        for o in self.all_outcomes.iter().filter(|o| !o.ok) {
            open.risks.push(format!(
                "{} ({}) did not complete: {}",
                o.action, o.decision, o.summary
            ));
        }
        for a in &self.pending {
            open.context_debt.push(format!(
                "{} ({} {}) was proposed and never completed",
                a.id,
                a.proposed.capability,
                a.shown()
            ));
        }
        match status {
            TaskRunStatus::Completed => {}
            TaskRunStatus::Blocked => {
                open.next_steps
                    .push(format!("Review why the run was blocked: {reason}"));
            }
            TaskRunStatus::Interrupted => {
                open.next_steps.push(format!(
                    "The run was interrupted: {reason}. Re-scope or start a new run."
                ));
                // Issue 21 item 4: a spent budget says which knob it was — read from the
                // counts, never from the reason's words (issue 30).
                if self.token_budget_exceeded().is_some() {
                    open.next_steps.push(
                        "Raise --token-budget (craik.toml run.token_budget) or narrow the task; each model step's tokens are in the run's model.step receipts (`craik audit RUN`).".into(),
                    );
                } else if self
                    .machine
                    .wall_clock_left(self.clock.now())
                    .is_some_and(|left| left.is_zero())
                {
                    open.next_steps.push(
                        "Raise --wall-clock-budget (craik.toml run.wall_clock_budget_seconds) or narrow the task.".into(),
                    );
                }
            }
            _ => open
                .next_steps
                .push(format!("Investigate the failure: {reason}")),
        }
        if !self.memory_ids.is_empty() {
            open.next_steps.push(format!(
                "Review {} memory proposal(s): `craik memory list`",
                self.memory_ids.len()
            ));
        }
        open
    }

    pub(super) fn actions_by_id(&self) -> BTreeMap<String, ActionRecord> {
        // One event in memory at a time: only the actions are kept.
        let Ok(events) = crate::run::store::json_lines::<Event>(&self.dir.file(EVENTS)) else {
            return BTreeMap::new();
        };
        events
            .map_while(Result::ok)
            .filter_map(|e| match e {
                Event::StepResult { actions, .. } => Some(actions),
                _ => None,
            })
            .flatten()
            .map(|a| (a.id.clone(), a))
            .collect()
    }

    pub(super) fn propose_memory(
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
            immutable: self.immutable.clone(),
        };
        let verdict = self.bundle.decide_for_runner(
            &self.grants,
            &request,
            &options,
            RunnerSupport::of(&self.matrix, &request.capability),
        );
        let mut draft =
            decision_draft(&self.inputs, &self.runner_ref().id, &action, &verdict, None);
        let proposal = if verdict.decision != Decision::Allow || verdict.mode == Mode::Shadow {
            None
        } else {
            self.memory_proposal(result, &id, spec)
        };
        // The allowed proposal's content is signed with its decision: a later edit of the file
        // (before or after review) is caught (`memory::memory_tampered`).
        if let Some(p) = &proposal {
            let content = crate::run::memory::content_digest(p).map_err(Error::internal)?;
            draft
                .result
                .metadata
                .0
                .insert("content_sha256".into(), json!(content));
        }
        let receipt = self.receipt(draft)?;
        let Some(proposal) = proposal else {
            return Ok(None);
        };
        let path = self.home.memory().join(format!("{id}.json"));
        if !path.exists() {
            write_memory(&self.home, &proposal)?;
            self.crash.synced(2);
            self.crash.point();
        }
        Ok(Some((id, receipt)))
    }

    /// The proposal an allowed memory spec becomes (redacted, linked to its run, step result
    /// and run output); `None` when redaction cannot clean it (nothing is stored then).
    fn memory_proposal(
        &self,
        result: &RunnerStepResult,
        id: &str,
        spec: &MemoryProposalSpec,
    ) -> Option<MemoryProposal> {
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
                Err(_) => return None,
            }
        }
        let runout = result.id.replacen("runner_step_result_", "runout_", 1);
        Some(MemoryProposal {
            schema: Default::default(),
            version: Default::default(),
            id: id.to_owned(),
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
        })
    }
}

/// The handoff's account of what was done.
#[derive(Debug, Default)]
struct WorkDone {
    completed_actions: Vec<String>,
    files_changed: Vec<String>,
    commands_run: Vec<String>,
    tests_run: Vec<String>,
}

/// The handoff's account of what is left.
#[derive(Debug, Default)]
struct LeftOpen {
    risks: Vec<String>,
    next_steps: Vec<String>,
    context_debt: Vec<String>,
}
