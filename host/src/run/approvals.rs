//! Approvals: the records of parked actions, the reviews that decide them (each its own small
//! signed, closed journal under `reviews/`), and the checks that bind both to the run's signed
//! journal.

use std::path::{Path, PathBuf};

use craik_contracts::{PolicyProfile, ReceiptResult, ReceiptStatus, Timestamp};
use craik_kernel::{
    DecidedBy, DecidedByKind, Decision, Ed25519Signer, JournalWriter, KeyRing, Mode, ReceiptDraft,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::Error;
use crate::journal::{JOURNAL_NAME, JournalFile};
use crate::run::signed::{action_digest, verified_receipts};
use crate::run::store::{Home, RunDir, RunStore, RunStoreExt, io_at as io};
use crate::run::{ActionRecord, Inputs};

/// State of an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Consumed,
    /// The run ended (cancelled, blocked, ...) before anyone decided: nothing left to approve.
    Closed,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Consumed => "consumed",
            Self::Closed => "closed",
        }
    }
}

/// A pending or decided approval, bound to one action's request hash (`approvals/<id>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRecord {
    pub id: String,
    pub run_id: String,
    pub task_id: String,
    pub runner_id: String,
    pub profile: PolicyProfile,
    pub action: ActionRecord,
    pub request_hash: String,
    pub policies: Vec<String>,
    pub reasons: Vec<String>,
    pub status: ApprovalStatus,
    pub requested_at: Timestamp,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub decided_at: Option<Timestamp>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    /// The review journal that receipted the decision.
    #[serde(default)]
    pub review: Option<String>,
}

/// Checks that an approval file shows the action its run's journal decided: the run's
/// journal verifies under `keys`, and its requires-approval receipt for the same request hash
/// names the sha256 of exactly this action. Otherwise the file was edited after the park.
pub fn approval_bound(
    dir: &dyn RunStore,
    record: &ApprovalRecord,
    keys: &KeyRing,
) -> Result<(), String> {
    let want = action_digest(&record.action)
        .map_err(|e| format!("the approval's action has no canonical form: {e}"))?;
    let signed = verified_receipts(dir, keys)?.into_iter().any(|r| {
        r.decision == Decision::RequiresApproval
            && r.request_hash == record.request_hash
            && r.action.as_deref() == Some(record.action.id.as_str())
            && r.result
                .metadata
                .0
                .get("action_sha256")
                .and_then(Value::as_str)
                == Some(want.as_str())
    });
    if signed {
        Ok(())
    } else {
        Err(format!(
            "approval {}: its action ({want}) is not the one the run's journal parked; the file was changed",
            record.id
        ))
    }
}

/// What a verified review journal says about one approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedReview {
    pub request_hash: String,
    pub approved_by: String,
    pub profile: PolicyProfile,
    pub task_id: String,
    pub expires_at: Option<Timestamp>,
    /// The reviewer's reason, as signed.
    pub reason: String,
    /// When the review was signed.
    pub reviewed_at: String,
    /// True for an approval, false for a denial.
    pub approved: bool,
    /// What was reviewed, as the review receipt shows it.
    pub target: String,
    /// `sha256:` of the review receipt's signed payload (what the run's journal names).
    pub receipt_sha256: String,
}

/// The approving review of approval `id` for run `run_id`, from its signed, closed review
/// journal (`reviews/<id>/`), verified with `ring`; `None` when there is none, it does not
/// verify, it denies, or it names another approval or run.
pub fn signed_review(home: &Home, ring: &KeyRing, id: &str, run_id: &str) -> Option<SignedReview> {
    decided_review(home, ring, id, run_id).filter(|r| r.approved)
}

/// The review of approval `id` for run `run_id`, approving or denying, from its signed,
/// closed review journal verified with `ring`; `None` when there is none, it does not verify,
/// or it names another approval or run.
pub fn decided_review(home: &Home, ring: &KeyRing, id: &str, run_id: &str) -> Option<SignedReview> {
    let path = home.reviews().join(id).join(crate::journal::JOURNAL_NAME);
    let bytes = std::fs::read(path).ok()?;
    let report = craik_kernel::verify_journal(&bytes, ring, None);
    if !report.is_valid() || !report.closed || report.receipts != 1 {
        return None;
    }
    let receipt = crate::journal::decode_all(&bytes)
        .into_iter()
        .find_map(|(_, d)| match d {
            crate::journal::Decoded::Receipt(r) => Some(r),
            _ => None,
        })?;
    let meta = &receipt.result.metadata.0;
    let text = |k: &str| meta.get(k).and_then(Value::as_str);
    let approved_by = receipt.decided_by.by.clone();
    let valid = matches!(receipt.decision, Decision::Allow | Decision::Deny)
        && receipt.decided_by.kind == DecidedByKind::Approval
        && receipt.action.as_deref() == Some(id)
        && text("approval") == Some(id)
        && text("run_id") == Some(run_id)
        && approved_by.starts_with("user:");
    if !valid {
        return None;
    }
    let expires_at = match meta.get("expires_at") {
        Some(Value::String(t)) => Some(serde_json::from_value(json!(t)).ok()?),
        _ => None,
    };
    let receipt_sha256 = crate::digest::Digest::of_canonical(&*receipt)
        .ok()?
        .as_str()
        .to_owned();
    Some(SignedReview {
        request_hash: receipt.request_hash.clone(),
        approved_by,
        profile: receipt.policy_profile,
        task_id: receipt.task_id.clone(),
        expires_at,
        reason: receipt.reason.clone(),
        reviewed_at: receipt.created_at.clone(),
        approved: receipt.decision == Decision::Allow,
        target: receipt.target.clone(),
        receipt_sha256,
    })
}

/// The run's approval records (`approvals/<id>.json`), by id.
pub fn read_approvals(dir: &dyn RunStore) -> Result<Vec<ApprovalRecord>, Error> {
    let mut out = Vec::new();
    let names = dir.list("approvals").map_err(io(&dir.file("approvals")))?;
    for name in names
        .iter()
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
    {
        let record: ApprovalRecord = dir
            .read_json(&format!("approvals/{name}"))
            .map_err(|e| Error::invalid(e, Vec::new()))?;
        out.push(record);
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Replaces an approval record, durably.
pub fn write_approval(dir: &dyn RunStore, record: &ApprovalRecord) -> Result<(), Error> {
    let name = format!("approvals/{}.json", record.id);
    dir.write_json(&name, record, true)
        .map_err(io(&dir.file(&name)))
}

/// `dir/<id>.json`, pretty, replaced atomically and fsynced with its directory.
pub(crate) fn write_record<T: Serialize>(dir: &Path, id: &str, value: &T) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| Error::internal(e.to_string()))?;
    text.push(b'\n');
    let file = dir.join(format!("{id}.json"));
    crate::fsio::write_atomic(&file, &text).map_err(io(&file))?;
    crate::run::store::sync_dir(dir).map_err(io(dir))
}

/// A `user:NAME` reviewer who is not the runner (compared case-insensitively, with and
/// without the `runner_` prefix).
pub fn reviewer(by: &str, runner: &str) -> Result<(), Error> {
    let name = by.strip_prefix("user:").unwrap_or_default();
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    if !ok {
        return Err(Error::usage(format!(
            "--by `{}`: expected `user:NAME` (letters, digits, - _ . @)",
            craik_contracts::Truncated(by)
        )));
    }
    let (by_l, name_l, runner_l) = (
        by.to_ascii_lowercase(),
        name.to_ascii_lowercase(),
        runner.to_ascii_lowercase(),
    );
    if by_l == runner_l
        || name_l == runner_l
        || runner_l.strip_prefix("runner_") == Some(name_l.as_str())
        || name_l
            .strip_prefix("runner_")
            .is_some_and(|n| runner_l.strip_prefix("runner_") == Some(n))
    {
        return Err(Error::usage(format!(
            "--by `{by}`: the runner `{runner}` can never review its own request"
        )));
    }
    Ok(())
}

/// What a reviewer decides about one request, before it is signed.
#[derive(Debug, Clone)]
pub struct Review<'a> {
    pub task_id: &'a str,
    /// The reviewer (`user:NAME`).
    pub by: &'a str,
    pub capability: &'a str,
    pub target: &'a str,
    pub profile: PolicyProfile,
    pub request_hash: &'a str,
    pub approve: bool,
    pub reason: &'a str,
    pub policy_set: &'a str,
}

impl Review<'_> {
    /// The review's receipt draft (`decided_by` `approval` by the reviewer).
    pub fn draft(&self) -> ReceiptDraft {
        ReceiptDraft {
            task_id: self.task_id.to_owned(),
            actor: self.by.to_owned(),
            capability: self.capability.to_owned(),
            target: self.target.to_owned(),
            policy_profile: self.profile,
            fail_open: false,
            reason: self.reason.to_owned(),
            result: ReceiptResult {
                status: if self.approve {
                    ReceiptStatus::Passed
                } else {
                    ReceiptStatus::Denied
                },
                summary: if self.approve { "approved" } else { "rejected" }.into(),
                metadata: craik_contracts::Object::new(),
            },
            redacted: true,
            policy_set: self.policy_set.to_owned(),
            request_hash: self.request_hash.to_owned(),
            decision: if self.approve {
                Decision::Allow
            } else {
                Decision::Deny
            },
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Approval,
                by: self.by.to_owned(),
            },
            mode: Mode::Enforce,
            action: None,
        }
    }
}

/// Writes one review decision as its own small signed, closed journal under
/// `reviews/<review_id>/`; returns the journal's path.
pub fn write_review(
    home: &Home,
    review_id: &str,
    draft: ReceiptDraft,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
) -> Result<PathBuf, Error> {
    let run_id = format!("run_{review_id}");
    let dir = home.reviews().join(review_id);
    let mut file =
        JournalFile::create(&dir).map_err(|e| Error::usage(format!("{}: {e}", dir.display())))?;
    let mut writer = JournalWriter::new(&run_id, 0);
    let mut bytes = writer
        .append(draft, now, signer)
        .map_err(|e| Error::internal(e.to_string()))?;
    bytes.extend(
        writer
            .close(now, signer)
            .map_err(|e| Error::internal(e.to_string()))?,
    );
    file.append(&bytes)
        .map_err(|e| Error::io(format!("{}: {e}", file.path().display())))?;
    let path = dir.join(JOURNAL_NAME);
    record_review(home, review_id, &bytes, signer, now)?;
    Ok(path)
}

/// The home ledger records the closed review (idempotent): deleting it later is caught.
pub(crate) fn record_review(
    home: &Home,
    review_id: &str,
    bytes: &[u8],
    signer: &Ed25519Signer,
    now: OffsetDateTime,
) -> Result<(), Error> {
    let path = home.reviews().join(review_id).join(JOURNAL_NAME);
    let receipt = crate::journal::decode_all(bytes)
        .into_iter()
        .find_map(|(_, d)| match d {
            crate::journal::Decoded::Receipt(r) => Some(*r),
            _ => None,
        });
    if let (Some(receipt), Some(checkpoint)) = (receipt, crate::ledger::last_checkpoint(&path)) {
        crate::ledger::record(
            &home.root,
            signer,
            now,
            vec![crate::ledger::Entry::review_closed(
                review_id,
                &receipt,
                &checkpoint,
            )],
        )?;
    }
    Ok(())
}

/// The exclusive lock of one approval's decision (`runs/<run>/approvals/.<id>.lock`, beside
/// the approval's file; nothing reads hidden names there), waited for: two reviewers deciding
/// at once are served one after the other, and the second finds the first one's signed
/// review.
fn decision_lock(dir: &RunDir, id: &str) -> Result<std::fs::File, Error> {
    crate::fsio::lock_exclusive(&dir.path.join("approvals").join(format!(".{id}.lock")))
}

/// Every approval of every run under `home`, with its run directory.
pub fn all_approvals(home: &Home) -> Result<Vec<(RunDir, ApprovalRecord)>, Error> {
    let mut out = Vec::new();
    let ids = home
        .run_ids()
        .map_err(|e| Error::usage(format!("{}: {e}", home.runs().display())))?;
    for id in ids {
        let dir = home.run_dir(&id)?;
        for a in read_approvals(&dir)? {
            out.push((dir.clone(), a));
        }
    }
    Ok(out)
}

/// One approval by id.
pub fn find_approval(home: &Home, id: &str) -> Result<(RunDir, ApprovalRecord), Error> {
    all_approvals(home)?
        .into_iter()
        .find(|(_, a)| a.id == id)
        .ok_or_else(|| {
            Error::usage(format!(
                "approval `{}`: not found (see `craik approvals list`)",
                craik_contracts::Truncated(id)
            ))
        })
}

/// Refuses to act on review `id` unless the home ledger records it at the root its journal
/// closes at: one it does not name means the ledger was put back to before the decision
/// (outside testing round 13); one it names otherwise, a decision deleted or replaced (round
/// 14). With no ledger at all, the recovery check has refused any run past its first receipt.
pub fn review_agrees(home: &Home, ring: &KeyRing, id: &str) -> Result<(), Error> {
    let refuse = |what: String| {
        Error::refused(format!(
            "approval {id}: {what}. Nothing was signed or performed; check the home with `craik receipts verify {}`",
            home.root.display()
        ))
    };
    match crate::ledger::review_state(&home.root, ring, id)? {
        crate::ledger::ReviewState::NoLedger | crate::ledger::ReviewState::Matches => Ok(()),
        crate::ledger::ReviewState::NotRecorded => Err(refuse(
            "its signed review is not named by the home ledger: the ledger was cut or replaced by an older copy".into(),
        )),
        crate::ledger::ReviewState::Differs { root } => Err(refuse(format!(
            "the home ledger records its review closed at root {root}, and the review journal here is missing or another: a decision was deleted or replaced"
        ))),
        crate::ledger::ReviewState::OlderThanHome { unnamed } => Err(refuse(format!(
            "its signed review is not named by the home ledger, which does not name {unnamed} either: the ledger is older than the home (cut or put back)"
        ))),
    }
}

/// Refuses a new decision on review `id` when the home ledger already records one (its
/// journal deleted or replaced): a recorded decision is final.
pub fn refuse_if_decided(home: &Home, ring: &KeyRing, id: &str, what: &str) -> Result<(), Error> {
    match crate::ledger::review_state(&home.root, ring, id)? {
        crate::ledger::ReviewState::NoLedger | crate::ledger::ReviewState::NotRecorded => Ok(()),
        crate::ledger::ReviewState::Matches | crate::ledger::ReviewState::Differs { .. } => {
            Err(Error::refused(format!(
                "{what} {id}: the home ledger records a decision of it already, and its review journal is missing or another: a recorded decision is final (deleted or replaced?). Nothing was signed; check the home with `craik receipts verify {}`",
                home.root.display()
            )))
        }
        crate::ledger::ReviewState::OlderThanHome { unnamed } => Err(Error::refused(format!(
            "{what} {id}: the home ledger does not name {unnamed}: it is older than the home (cut or put back), and a decision it lost may have been made. Nothing was signed; check the home with `craik receipts verify {}` (a killed decision is finished by running the same command again; a run killed at its start, by `craik runs recover RUN`)",
            home.root.display()
        ))),
    }
}

/// A reviewer's decision on approval `id`: checked (a reviewer who is not the runner, a
/// reason, the record bound to what the signed journal parked, pending, a profile that admits
/// approvals), signed as its own review journal, then recorded. An approval expires
/// `expires_in_secs` after now. Returns the decided record and the review journal's path.
#[allow(
    clippy::too_many_arguments,
    reason = "one decision's facts, each checked"
)]
pub fn decide_approval(
    home: &Home,
    id: &str,
    by: &str,
    reason: &str,
    approve: bool,
    expires_in_secs: u64,
    (signer, ring): (&Ed25519Signer, &KeyRing),
    now: OffsetDateTime,
) -> Result<(ApprovalRecord, PathBuf), Error> {
    // One decision at a time, read afresh under the lock (issue 31 item 6: the loser of two
    // concurrent approvals got a raw EEXIST, exit 2).
    let (dir, _) = find_approval(home, id)?;
    let _deciding = decision_lock(&dir, id)?;
    let (dir, mut record) = find_approval(home, id)?;
    reviewer(by, &record.runner_id)?;
    // The signed review decides, whatever the approval file says (issue 31 item 2: a decision
    // killed after its review was written left the file `pending` and the approval
    // undecidable): the file is brought in line with it, the ledger entry recorded, and the
    // same decision asked again succeeds; another is refused naming who decided.
    let review_dir = home.reviews().join(id);
    let review_path = review_dir.join(JOURNAL_NAME);
    if let Some(signed) = decided_review(home, ring, id, &record.run_id) {
        if record.status == ApprovalStatus::Pending {
            record.status = if signed.approved {
                ApprovalStatus::Approved
            } else {
                ApprovalStatus::Denied
            };
            record.decided_by = Some(signed.approved_by.clone());
            record.decided_at = serde_json::from_value(json!(signed.reviewed_at)).ok();
            record.reason = Some(signed.reason.clone());
            record.expires_at = signed.expires_at;
            record.review = Some(review_path.display().to_string());
            write_approval(&dir, &record)?;
        }
        let bytes = std::fs::read(&review_path)
            .map_err(|e| Error::io(format!("{}: {e}", review_path.display())))?;
        record_review(home, id, &bytes, signer, now)?;
        if signed.approved == approve
            && signed.approved_by == by
            && record.status != ApprovalStatus::Consumed
        {
            return Ok((record, review_path));
        }
        return Err(Error::refused(format!(
            "approval {id} is already {} by {}; approvals are single use",
            record.status.as_str(),
            signed.approved_by
        )));
    }
    // No valid review here: a decision the ledger records was deleted or replaced, never
    // decided again.
    refuse_if_decided(home, ring, id, "approval")?;
    // A review journal that never got its bytes (killed between making it and writing it)
    // decided nothing: it goes. One with bytes that do not verify is evidence: refused.
    match std::fs::read(&review_path) {
        Ok(bytes) if bytes.is_empty() => {
            std::fs::remove_dir_all(&review_dir)
                .map_err(|e| Error::io(format!("{}: {e}", review_dir.display())))?;
        }
        Ok(_) => {
            return Err(Error::invalid(
                format!(
                    "{}: a review journal that does not verify as this approval's decision; check the home with `craik receipts verify {}`",
                    review_path.display(),
                    home.root.display()
                ),
                Vec::new(),
            ));
        }
        Err(_) if review_dir.exists() => {
            std::fs::remove_dir_all(&review_dir)
                .map_err(|e| Error::io(format!("{}: {e}", review_dir.display())))?;
        }
        Err(_) => {}
    }
    // A reviewer approves what the run's signed journal parked, nothing else.
    approval_bound(&dir, &record, ring).map_err(|why| Error::invalid(why, Vec::new()))?;
    if reason.trim().is_empty() {
        return Err(Error::usage("--reason: must not be empty"));
    }
    if record.status != ApprovalStatus::Pending {
        return Err(Error::refused(format!(
            "approval {id} is already {}; approvals are single use",
            record.status.as_str()
        )));
    }
    if record.profile == PolicyProfile::Automation {
        return Err(Error::refused(format!(
            "approval {id}: the automation profile admits no approvals"
        )));
    }
    let inputs: Inputs = dir
        .read_json(crate::run::store::INPUTS)
        .map_err(|e| Error::invalid(e, Vec::new()))?;
    // Everything the review decides is fixed before anything is written.
    let expires_at = approve
        .then(|| now + time::Duration::seconds(i64::try_from(expires_in_secs).unwrap_or(0)))
        .map(Timestamp::new);
    let shown = record.action.shown();
    let mut draft = Review {
        task_id: &record.task_id,
        by,
        capability: &record.action.proposed.capability,
        target: &shown,
        profile: record.profile,
        request_hash: &record.request_hash,
        approve,
        reason,
        policy_set: &inputs.policy_set,
    }
    .draft();
    // The signed review names the approval, the run and the expiry: the host honours an
    // approval only through these signed facts (see `signed_review`).
    draft.action = Some(record.id.clone());
    let meta = &mut draft.result.metadata.0;
    meta.insert("approval".into(), json!(record.id));
    meta.insert("run_id".into(), json!(record.run_id));
    meta.insert(
        "expires_at".into(),
        serde_json::to_value(expires_at).unwrap_or(Value::Null),
    );
    let journal = write_review(home, &record.id, draft, signer, now)?;
    record.status = if approve {
        ApprovalStatus::Approved
    } else {
        ApprovalStatus::Denied
    };
    record.decided_by = Some(by.to_owned());
    record.decided_at = Some(Timestamp::new(now));
    record.reason = Some(reason.to_owned());
    record.expires_at = expires_at;
    record.review = Some(journal.display().to_string());
    write_approval(&dir, &record)?;
    Ok((record, journal))
}
