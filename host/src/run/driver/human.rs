//! Human decisions, signed into the run's own journal: an operator cancelling, resuming or
//! recovering the run (`decided_by` `operator`), and each approval's review as the run picks
//! it up (`approval.review`: granted or denied, naming the signed review journal), or finds it
//! expired (`approval.expired`). Who the operator is is asserted by whoever ran the command
//! (`--by`, or craik.toml's `operator`), never authenticated; the receipt signs what was said.
//! Nothing here runs a step or decides an action.

use super::*;

/// Capability of the receipt of an approval's review, picked up by the run.
pub const APPROVAL_REVIEW: &str = "approval.review";
/// Capability of the receipt of an approval that expired before the run could use it.
pub const APPROVAL_EXPIRED: &str = "approval.expired";

/// True when a receipt of this capability records a human decision (or an approval's
/// expiry), not a verdict on an action the runner proposed: summaries count verdicts without
/// them.
pub fn is_human_decision(capability: &str) -> bool {
    matches!(
        capability,
        "run.cancel" | "run.resume" | "run.recover" | APPROVAL_REVIEW | APPROVAL_EXPIRED
    )
}

/// What an operator did to the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorAct {
    Cancel,
    Resume,
    Recover,
}

impl OperatorAct {
    /// The receipt's capability (`run.cancel`, `run.resume`, `run.recover`).
    pub fn capability(self) -> &'static str {
        match self {
            Self::Cancel => "run.cancel",
            Self::Resume => "run.resume",
            Self::Recover => "run.recover",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Resume => "resume",
            Self::Recover => "recover",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Self::Cancel => "cancelled",
            Self::Resume => "resumed",
            Self::Recover => "recovered",
        }
    }
}

/// The `request_hash` of an operator's act: `sha256:` of the canonical JSON
/// `{"act", "by", "reason", "run_id"}` (the reason as signed, redacted).
pub fn operator_request_hash(
    act: OperatorAct,
    by: &str,
    reason: &str,
    run_id: &str,
) -> Result<String, String> {
    crate::digest::Digest::of_canonical(&json!({
        "act": act.word(),
        "by": by,
        "reason": reason,
        "run_id": run_id,
    }))
    .map(|d| d.as_str().to_owned())
}

/// A reason as it may be signed and shown: secrets redacted, else withheld.
fn signable(reason: &str) -> String {
    redact_checked(reason)
        .map(|r| r.text)
        .unwrap_or_else(|what| format!("(reason withheld: it held {what})"))
}

impl Host {
    /// The runner's id (from its capability matrix): no operator may be it.
    pub fn runner_id(&self) -> String {
        self.runner_ref().id
    }

    /// Signs an operator's act on the run into its journal; `None` when the journal is
    /// already closed (the run had ended: there is nothing left to act on).
    pub fn operator_receipt(
        &mut self,
        act: OperatorAct,
        by: &str,
        reason: &str,
    ) -> Result<Option<String>, Error> {
        if self.closed {
            return Ok(None);
        }
        let reason = signable(reason);
        let run_id = self.inputs.run_id.clone();
        let request_hash =
            operator_request_hash(act, by, &reason, &run_id).map_err(Error::internal)?;
        let mut metadata = Object::new();
        metadata.0.insert("run_id".into(), json!(run_id));
        metadata.0.insert("by".into(), json!(by));
        metadata.0.insert(
            "status_before".into(),
            json!(self.machine.run().status.as_str()),
        );
        let (decision, status) = match act {
            OperatorAct::Cancel => (Decision::Deny, ReceiptStatus::Denied),
            OperatorAct::Resume | OperatorAct::Recover => (Decision::Allow, ReceiptStatus::Passed),
        };
        let draft = ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: by.to_owned(),
            capability: act.capability().into(),
            target: run_id.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: reason.clone(),
            result: ReceiptResult {
                status,
                summary: format!("{} by {by}", act.past()),
                metadata,
            },
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash,
            decision,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Operator,
                by: by.to_owned(),
            },
            mode: self.mode(),
            action: None,
        };
        self.receipt(draft).map(Some)
    }

    /// Cancels the run for operator `by`: the signed `run.cancel` receipt, then the halt
    /// (interrupted), its reason naming who and why.
    pub fn cancel(&mut self, by: &str, reason: &str) -> Result<(), Error> {
        if self.is_final() {
            return Ok(());
        }
        self.operator_receipt(OperatorAct::Cancel, by, reason)?;
        self.cancelled = true;
        self.halt(
            TaskRunStatus::Interrupted,
            format!("cancelled by {by}: {}", signable(reason)),
        )
    }

    /// Signs into the run's journal each review of `approvals` (bound to the parked actions)
    /// not signed there yet, as read from its verified review journal: `approval.review`
    /// (granted or denied), then `approval.expired` for a granted one past its expiry and
    /// unused. An approval with no verified review journal signs nothing (the kernel never
    /// honours it either). Returns the verified denial, if one was found.
    pub(super) fn record_reviews(
        &mut self,
        approvals: &[ApprovalRecord],
    ) -> Result<Option<(String, crate::run::approvals::SignedReview)>, Error> {
        use craik_kernel::Signer as _;
        let mut ring = KeyRing::new();
        ring.add(&self.signer.public_key())
            .map_err(|e| Error::internal(format!("signing key: {e}")))?;
        let mut denial = None;
        for record in approvals {
            if record.status == ApprovalStatus::Pending || record.status == ApprovalStatus::Closed {
                continue;
            }
            let Some(review) = crate::run::approvals::decided_review(
                &self.home,
                &ring,
                &record.id,
                &self.inputs.run_id,
            ) else {
                continue;
            };
            // A review acted on must be one the home ledger names (it is recorded before the
            // approval file says decided): one it does not name means the ledger was put back
            // to before the decision (outside testing round 13). With no ledger at all, the
            // recovery check has refused any run past its first receipt already.
            crate::run::approvals::review_agrees(&self.home, &ring, &record.id)?;
            // Signed already (a resume after an earlier one): the journal, read at recovery.
            let signed_here = self.receipts_by_action.get(&record.id);
            let has =
                |cap: &str| signed_here.is_some_and(|rs| rs.iter().any(|r| r.capability == cap));
            let (has_review, has_expired) = (has(APPROVAL_REVIEW), has(APPROVAL_EXPIRED));
            if !has_review {
                let draft = self.review_draft(record, &review);
                self.receipt(draft)?;
            }
            let used = record.status == ApprovalStatus::Consumed
                || self.used_approvals.contains(&record.id);
            let expired = review
                .expires_at
                .is_some_and(|t| t.get() <= self.clock.now());
            if review.approved && expired && !used && !has_expired {
                let draft = self.expired_draft(record, &review);
                self.receipt(draft)?;
            }
            if !review.approved {
                denial = Some((record.id.clone(), review));
            }
        }
        Ok(denial)
    }

    fn review_draft(
        &self,
        record: &ApprovalRecord,
        review: &crate::run::approvals::SignedReview,
    ) -> ReceiptDraft {
        let (word, decision, status) = if review.approved {
            ("approved", Decision::Allow, ReceiptStatus::Passed)
        } else {
            ("denied", Decision::Deny, ReceiptStatus::Denied)
        };
        let mut metadata = self.approval_metadata(record);
        metadata.0.insert("decision".into(), json!(word));
        metadata
            .0
            .insert("review_sha256".into(), json!(review.receipt_sha256));
        metadata
            .0
            .insert("reviewed_at".into(), json!(review.reviewed_at));
        metadata.0.insert(
            "expires_at".into(),
            serde_json::to_value(review.expires_at).unwrap_or(Value::Null),
        );
        ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: review.approved_by.clone(),
            capability: APPROVAL_REVIEW.into(),
            target: review.target.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: review.reason.clone(),
            result: ReceiptResult {
                status,
                summary: format!("approval {} {word} by {}", record.id, review.approved_by),
                metadata,
            },
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: review.request_hash.clone(),
            decision,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Approval,
                by: review.approved_by.clone(),
            },
            mode: self.mode(),
            action: Some(record.id.clone()),
        }
    }

    /// What every receipt about an approval names: the approval, the run, the action.
    fn approval_metadata(&self, record: &ApprovalRecord) -> Object {
        let mut metadata = Object::new();
        metadata.0.insert("approval".into(), json!(record.id));
        metadata
            .0
            .insert("run_id".into(), json!(self.inputs.run_id));
        metadata
            .0
            .insert("action_id".into(), json!(record.action.id));
        metadata
    }

    fn expired_draft(
        &self,
        record: &ApprovalRecord,
        review: &crate::run::approvals::SignedReview,
    ) -> ReceiptDraft {
        let expires = review.expires_at.map(|t| t.to_string()).unwrap_or_default();
        let mut metadata = self.approval_metadata(record);
        metadata.0.insert("expires_at".into(), json!(expires));
        ReceiptDraft {
            task_id: self.inputs.task.id.clone(),
            actor: self.runner_ref().id,
            capability: APPROVAL_EXPIRED.into(),
            target: review.target.clone(),
            policy_profile: self.inputs.profile,
            fail_open: false,
            reason: format!(
                "approval {} by {} expired at {expires} before the run used it",
                record.id, review.approved_by
            ),
            result: ReceiptResult {
                status: ReceiptStatus::Skipped,
                summary: format!("approval {} expired unused", record.id),
                metadata,
            },
            redacted: true,
            policy_set: self.bundle.hash().to_owned(),
            request_hash: review.request_hash.clone(),
            decision: Decision::Deny,
            determining_policies: vec!["kernel.approval-expired".into()],
            decided_by: DecidedBy {
                kind: DecidedByKind::Kernel,
                by: String::new(),
            },
            mode: self.mode(),
            action: Some(record.id.clone()),
        }
    }
}
