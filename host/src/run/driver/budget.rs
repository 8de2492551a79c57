//! Model steps and budgets: checks the model steps a runner reports during a step, signs one
//! `model.step` receipt for each (adapter-reported), keeps the run's cumulative token count,
//! and ends the run `interrupted` when it exceeds `provider_token_budget`. Also the wall-clock
//! accounting that leaves time spent waiting for a person out of the budget.
//!
//! It never trusts a report beyond its shape and bounds: a malformed or lying report is a
//! runner violation, like any other hostile adapter output.

use craik_contracts::channel::{MAX_MODEL_STEPS_PER_STEP, ModelStepOutcome, ModelStepReport};

use super::*;

/// The capability of a model-step receipt (one per model step a runner reported).
pub const MODEL_STEP: &str = "model.step";

/// A `model.step` receipt's `usage` when the counts are unknown (they are then absent).
pub(super) const USAGE_UNKNOWN: &str = "unknown";
/// A `model.step` receipt's `usage` when the adapter reported the counts.
pub(super) const USAGE_REPORTED: &str = "reported";

/// The largest cumulative token count a run may reach (the largest integer signed data may
/// hold, 2^53 − 1): a report that would go past it is a violation.
pub const MAX_RUN_TOKENS: u64 = (1 << 53) - 1;
/// The largest wall-clock budget, in seconds (ten years: any larger is a mistake, and every
/// value must stay exactly signable).
pub const MAX_WALL_CLOCK_SECS: u64 = 10 * 366 * 24 * 3600;

/// Token usage as the journal's `model.step` receipts record it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    pub model_steps: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The total of the model steps whose usage is known.
    pub total_tokens: u64,
    /// Model steps whose usage is unknown (the provider gave no exact count, or the exchange
    /// was cut): never counted as zero — under a token budget one ends the run.
    pub unknown_steps: u64,
}

impl TokenUsage {
    /// Adds one receipt's counts (saturating: the journal is verified, the counts bounded).
    pub fn add_receipt(&mut self, r: &ReceiptPayload) {
        if r.capability != MODEL_STEP {
            return;
        }
        let count = |key: &str| {
            r.result
                .metadata
                .0
                .get(key)
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        self.model_steps = self.model_steps.saturating_add(1);
        if r.result.metadata.0.get("usage").and_then(Value::as_str) == Some(USAGE_UNKNOWN) {
            self.unknown_steps = self.unknown_steps.saturating_add(1);
            return;
        }
        self.input_tokens = self.input_tokens.saturating_add(count("input_tokens"));
        self.output_tokens = self.output_tokens.saturating_add(count("output_tokens"));
        self.total_tokens = self.total_tokens.saturating_add(count("total_tokens"));
    }
}

/// Checks the reports of one runner step against the usage so far: each report's shape and
/// bounds, at most [`MAX_MODEL_STEPS_PER_STEP`], and a cumulative total that stays within
/// [`MAX_RUN_TOKENS`] (it only grows: every count is a non-negative integer). `Err` is the
/// violation.
pub fn check_reports(
    reports: &[ModelStepReport],
    so_far: u64,
) -> Result<(), crate::run::Violation> {
    use crate::run::Violation;
    if reports.len() > MAX_MODEL_STEPS_PER_STEP {
        return Err(Violation(format!(
            "{} model steps reported in one step; at most {MAX_MODEL_STEPS_PER_STEP}",
            reports.len()
        )));
    }
    let mut total = so_far;
    for (k, report) in reports.iter().enumerate() {
        if let Some(problem) = report.problem() {
            return Err(Violation(format!("model step {k}: {problem}")));
        }
        total = total
            .checked_add(report.counts().map_or(0, |c| c.total))
            .filter(|t| *t <= MAX_RUN_TOKENS)
            .ok_or_else(|| {
                Violation(format!(
                    "model step {k}: the run's cumulative total_tokens would pass {MAX_RUN_TOKENS}"
                ))
            })?;
    }
    Ok(())
}

impl Host {
    /// Tokens the run's model steps used so far (from its signed receipts).
    pub fn token_usage(&self) -> TokenUsage {
        self.tokens
    }

    /// Signs one `model.step` receipt per report (checked by [`check_reports`]), durable
    /// before the caller accepts anything of the step.
    pub(super) fn record_model_steps(
        &mut self,
        request: &RunnerStepRequest,
        reports: &[ModelStepReport],
    ) -> Result<(), Error> {
        if reports.is_empty() {
            return Ok(());
        }
        for (k, report) in reports.iter().enumerate() {
            let draft = self.model_step_draft(request, k, report);
            self.receipt_lazy(draft)?;
            self.count(report);
        }
        self.sync_journal()
    }

    fn count(&mut self, report: &ModelStepReport) {
        let t = &mut self.tokens;
        t.model_steps = t.model_steps.saturating_add(1);
        match report.counts() {
            Some(c) => {
                t.input_tokens = t.input_tokens.saturating_add(c.input);
                t.output_tokens = t.output_tokens.saturating_add(c.output);
                t.total_tokens = t.total_tokens.saturating_add(c.total);
            }
            None => t.unknown_steps = t.unknown_steps.saturating_add(1),
        }
    }

    /// A step that ended without an answer (its timeout): an exchange with a provider may
    /// have been in flight, sent and billed, and no report of it will come. One `model.step`
    /// receipt, reported by the host, usage unknown, outcome `cut` — never nothing, never 0.
    pub(super) fn record_cut_step(&mut self, request: &RunnerStepRequest) -> Result<(), Error> {
        self.record_unknown_steps(
            request,
            1,
            ModelStepOutcome::Cut,
            &format!(
                "the runner gave no answer to {} within its timeout: a model exchange may have been in flight (sent, and billed) with its usage unknown; recorded by the host",
                request.id
            ),
        )
    }

    /// A live runner answered a step without reporting any model step: it talked to its model
    /// (that is what a live step is), so one exchange of unknown usage is signed by the host —
    /// never a silent 0 (outside testing round 12: an adapter that never reported ran a
    /// budgeted run to completion, "0 of 1000 tokens used").
    pub(super) fn record_unreported_step(
        &mut self,
        request: &RunnerStepRequest,
    ) -> Result<(), Error> {
        self.record_unknown_steps(
            request,
            1,
            ModelStepOutcome::Ok,
            &format!(
                "the live runner answered {} without reporting its model usage: unknown; recorded by the host",
                request.id
            ),
        )
    }

    /// Model steps the adapter reported but whose reports were refused (a count over its
    /// ceiling, a malformed field): the exchanges happened as far as anyone can tell, so each
    /// is signed — by the host, usage unknown — before the violation ends the run (outside
    /// testing round 11: a 20M-token report was refused and the run's record showed 0 spent).
    pub(super) fn record_refused_reports(
        &mut self,
        request: &RunnerStepRequest,
        reports: usize,
        why: &str,
    ) -> Result<(), Error> {
        self.record_unknown_steps(
            request,
            reports.clamp(1, MAX_MODEL_STEPS_PER_STEP),
            ModelStepOutcome::Failed,
            &format!(
                "the adapter reported a model step of {} that Craik refused ({}): its usage is unknown; recorded by the host",
                request.id,
                craik_contracts::one_line(why)
            ),
        )
    }

    fn record_unknown_steps(
        &mut self,
        request: &RunnerStepRequest,
        count: usize,
        outcome: ModelStepOutcome,
        reason: &str,
    ) -> Result<(), Error> {
        for k in 0..count {
            let report = unknown_report(request, outcome);
            let mut draft = self.model_step_draft(request, k, &report);
            draft.reason = reason.to_owned();
            draft
                .result
                .metadata
                .0
                .insert("reported_by".into(), json!("host"));
            self.receipt_lazy(draft)?;
            self.count(&report);
        }
        self.sync_journal()
    }
}

/// A model step the host records with nothing known of it but the request it belongs to.
fn unknown_report(request: &RunnerStepRequest, outcome: ModelStepOutcome) -> ModelStepReport {
    ModelStepReport {
        provider: "unknown".into(),
        model: "unknown".into(),
        endpoint_host: "unknown".into(),
        request_sha256: exec::digest(compact(&json(request)).as_bytes()),
        response_id: None,
        input_tokens: None,
        output_tokens: None,
        total_tokens: None,
        latency_ms: 0,
        retries: 0,
        streamed: false,
        outcome,
    }
}

impl Host {
    fn model_step_draft(
        &self,
        request: &RunnerStepRequest,
        k: usize,
        report: &ModelStepReport,
    ) -> ReceiptDraft {
        let counts = report.counts();
        let cumulative = self
            .tokens
            .total_tokens
            .saturating_add(counts.map_or(0, |c| c.total));
        let mut metadata = Object::new();
        let m = &mut metadata.0;
        m.insert("reported_by".into(), json!("adapter"));
        m.insert("step".into(), json!(request.id));
        m.insert("index".into(), json!(k));
        m.insert("provider".into(), json!(report.provider));
        m.insert("model".into(), json!(report.model));
        m.insert("endpoint_host".into(), json!(report.endpoint_host));
        m.insert("request_sha256".into(), json!(report.request_sha256));
        if let Some(id) = &report.response_id {
            m.insert("response_id".into(), json!(id));
        }
        match counts {
            Some(c) => {
                m.insert("usage".into(), json!(USAGE_REPORTED));
                m.insert("input_tokens".into(), json!(c.input));
                m.insert("output_tokens".into(), json!(c.output));
                m.insert("total_tokens".into(), json!(c.total));
            }
            None => {
                m.insert("usage".into(), json!(USAGE_UNKNOWN));
            }
        }
        m.insert("latency_ms".into(), json!(report.latency_ms));
        m.insert("retries".into(), json!(report.retries));
        m.insert("streamed".into(), json!(report.streamed));
        m.insert("outcome".into(), json!(report.outcome.as_str()));
        m.insert("cumulative_total_tokens".into(), json!(cumulative));
        if let Some(budget) = self.inputs.token_budget {
            m.insert("provider_token_budget".into(), json!(budget));
        }
        let used = match counts {
            Some(c) => format!("{} tokens ({} in, {} out)", c.total, c.input, c.output),
            None => "UNKNOWN usage".to_owned(),
        };
        let summary = format!(
            "{used} from {} at {}; {cumulative} known in the run{}",
            craik_contracts::one_line(&report.model),
            craik_contracts::one_line(&report.endpoint_host),
            self.inputs
                .token_budget
                .map(|b| format!(" of a budget of {b}"))
                .unwrap_or_default()
        );
        ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.matrix.runner.id.clone(),
            capability: MODEL_STEP.into(),
            target: format!("{}:{}", report.provider, report.model),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: format!(
                "model step {k} of {}, reported by the adapter (not verified by Craik)",
                request.id
            ),
            result: ReceiptResult {
                status: match report.outcome {
                    ModelStepOutcome::Ok => ReceiptStatus::Passed,
                    ModelStepOutcome::Retried
                    | ModelStepOutcome::Failed
                    | ModelStepOutcome::Cut => ReceiptStatus::Failed,
                },
                summary,
                metadata,
            },
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: report.request_sha256.clone(),
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

    /// The reason to end the run when its model steps used more tokens than its budget, or
    /// when the usage of one is unknown under a budget (unknown is not zero: the budget can
    /// no longer be shown to hold).
    pub(super) fn token_budget_exceeded(&self) -> Option<String> {
        let budget = self.inputs.token_budget?;
        if self.tokens.unknown_steps > 0 {
            return Some(format!(
                "provider token budget cannot be enforced: {} model step(s) of unknown usage ({} of {budget} tokens known used)",
                self.tokens.unknown_steps, self.tokens.total_tokens
            ));
        }
        (self.tokens.total_tokens > budget).then(|| {
            format!(
                "provider token budget exceeded: {} of {budget} tokens used",
                self.tokens.total_tokens
            )
        })
    }

    /// Time waiting for a person is not wall-clock budget: a `parked` event starts a wait,
    /// the next `reopened` ends it (credited to the loop). Called for every event written
    /// and every event replayed.
    pub(super) fn note_wait(&mut self, event: &Event) {
        match event {
            Event::Parked { at, .. } if self.parked_at.is_none() => {
                self.parked_at = Some(at.get());
            }
            Event::Reopened { at, .. } => {
                if let Some(since) = self.parked_at.take() {
                    self.machine.credit_wait(at.get() - since);
                }
            }
            _ => {}
        }
    }
}

/// A run's budgets, used and left, as `runs show` and `craik audit` report them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BudgetReport {
    /// Tokens of the run's `model.step` receipts (signed, adapter-reported).
    pub tokens: TokenUsage,
    /// The budget the run's signed inputs name, if any.
    pub provider_token_budget: Option<u64>,
    pub tokens_left: Option<u64>,
    /// Seconds since the run started (to its end, or now), waits for approvals excluded.
    pub wall_clock_used_seconds: u64,
    pub wall_clock_budget_seconds: Option<u64>,
    pub wall_clock_left_seconds: Option<u64>,
}

impl BudgetReport {
    /// From a run's verified receipts (tokens, the budgets its `run.inputs` receipt signs,
    /// waits for approvals between `run.parked` and `run.resume`) and its state (start and end). `now` ends a
    /// run that has not ended.
    pub fn of(run: &TaskRun, receipts: &[ReceiptPayload], now: OffsetDateTime) -> Self {
        let mut tokens = TokenUsage::default();
        for r in receipts {
            tokens.add_receipt(r);
        }
        let signed = |key: &str| {
            receipts
                .first()
                .filter(|r| r.capability == RUN_INPUTS)
                .and_then(|r| r.result.metadata.0.get(key))
                .and_then(Value::as_u64)
        };
        let token_budget = signed("provider_token_budget");
        let wall_budget = signed("wall_clock_budget_seconds");
        let end = run.ended_at.map_or(now, |e| e.get());
        // Waits for a person, from what receipts sign: a `run.parked` starts one, the next
        // `run.resume` ends it — never from the events' times (outside testing round r31f
        // C1: forged `parked`/`reopened` events showed a spent budget as unused).
        let mut waited = time::Duration::ZERO;
        let mut parked: Option<OffsetDateTime> = None;
        let signed_at = |r: &ReceiptPayload| {
            OffsetDateTime::parse(
                &r.created_at,
                &time::format_description::well_known::Rfc3339,
            )
            .ok()
        };
        for r in receipts {
            if r.capability == RUN_PARKED && parked.is_none() {
                parked = signed_at(r);
            } else if r.capability == super::human::OperatorAct::Resume.capability()
                && let Some(since) = parked.take()
                && let Some(at) = signed_at(r)
            {
                waited += (at - since).max(time::Duration::ZERO);
            }
        }
        if let Some(since) = parked {
            waited += (end - since).max(time::Duration::ZERO);
        }
        let used = ((end - run.started_at.get()) - waited).max(time::Duration::ZERO);
        let used = u64::try_from(used.whole_seconds()).unwrap_or(0);
        Self {
            tokens,
            provider_token_budget: token_budget,
            tokens_left: token_budget.map(|b| b.saturating_sub(tokens.total_tokens)),
            wall_clock_used_seconds: used,
            wall_clock_budget_seconds: wall_budget,
            wall_clock_left_seconds: wall_budget.map(|b| b.saturating_sub(used)),
        }
    }

    /// Two lines for people: tokens, then wall clock.
    pub fn lines(&self) -> [String; 2] {
        let t = &self.tokens;
        let tokens = match (self.provider_token_budget, self.tokens_left) {
            (Some(b), Some(left)) => format!(
                "{} of {b} tokens used, {left} left ({} in, {} out; {} model step(s), adapter-reported){}",
                t.total_tokens,
                t.input_tokens,
                t.output_tokens,
                t.model_steps,
                unknown_note(t)
            ),
            _ => format!(
                "{} tokens used, no budget ({} in, {} out; {} model step(s), adapter-reported){}",
                t.total_tokens,
                t.input_tokens,
                t.output_tokens,
                t.model_steps,
                unknown_note(t)
            ),
        };
        let wall = match (self.wall_clock_budget_seconds, self.wall_clock_left_seconds) {
            (Some(b), Some(left)) => format!(
                "{}s of {b}s used, {left}s left (waiting for approvals not counted)",
                self.wall_clock_used_seconds
            ),
            _ => format!(
                "{}s used, no budget (waiting for approvals not counted)",
                self.wall_clock_used_seconds
            ),
        };
        [tokens, wall]
    }
}

/// `; N model step(s) of UNKNOWN usage, …` when some model steps' usage is unknown.
pub fn unknown_note(t: &TokenUsage) -> String {
    if t.unknown_steps == 0 {
        String::new()
    } else {
        format!(
            "; {} model step(s) of UNKNOWN usage, not in these counts",
            t.unknown_steps
        )
    }
}
