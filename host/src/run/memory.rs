//! Memory proposals from runs, and the reviews that approve or reject them.

use std::path::PathBuf;

use craik_contracts::{MemoryProposal, PolicyProfile, ProposalStatus, TaskRun, Timestamp};
use craik_kernel::Ed25519Signer;
use time::OffsetDateTime;

use crate::Error;
use crate::run::approvals::{Review, reviewer, write_record, write_review};
use crate::run::store::{Home, RUN, RunStoreExt};

pub fn write_memory(home: &Home, proposal: &MemoryProposal) -> Result<(), Error> {
    write_record(&home.memory(), &proposal.id, proposal)
}

/// Every memory proposal under `home`, by id.
pub fn proposals(home: &Home) -> Result<Vec<MemoryProposal>, Error> {
    let dir = home.memory();
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::usage(format!("{}: {e}", dir.display()))),
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "json") {
            let bytes =
                std::fs::read(&p).map_err(|e| Error::usage(format!("{}: {e}", p.display())))?;
            let proposal =
                craik_contracts::decode_single::<MemoryProposal>(&bytes).map_err(|problems| {
                    let mut lines = problems
                        .into_iter()
                        .map(|q| format!("{}: {q}", p.display()));
                    let first = lines.next().unwrap_or_default();
                    Error::invalid(first, lines.collect())
                })?;
            out.push(proposal);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A reviewer's decision on memory proposal `id`: checked (a reviewer who is not the runner
/// that proposed it, a reason, pending, evidence to approve), signed as its own review
/// journal, then recorded. Returns the decided proposal and the review journal's path.
pub fn decide_memory(
    home: &Home,
    (id, by, reason): (&str, &str, &str),
    approve: bool,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
) -> Result<(MemoryProposal, PathBuf), Error> {
    let mut m = proposals(home)?
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(|| {
            Error::usage(format!(
                "memory proposal `{}`: not found",
                craik_contracts::Truncated(id)
            ))
        })?;
    // The reviewer must not be the runner that proposed it: a proposal from a run whose state
    // cannot be read is refused rather than checked against nobody.
    let runner = match m.run_id.as_deref() {
        Some(run_id) => {
            home.run_dir(run_id)?
                .read_json::<TaskRun>(RUN)
                .map_err(|e| {
                    Error::invalid(
                        format!("{id}: cannot tell which runner proposed it: {e}"),
                        Vec::new(),
                    )
                })?
                .runner_id
        }
        None => "runner_unknown".to_owned(),
    };
    reviewer(by, &runner)?;
    if reason.trim().is_empty() {
        return Err(Error::usage("--reason: must not be empty"));
    }
    if m.status != ProposalStatus::Pending {
        return Err(Error::refused(format!(
            "{id} is already {}",
            m.status.as_str()
        )));
    }
    if approve && m.evidence.is_empty() {
        return Err(Error::refused(format!(
            "{id}: has no evidence; a proposal without evidence cannot be approved (reject it)"
        )));
    }
    let target = format!("{}/{}", m.fact.scope.as_str(), m.fact.entity);
    let request_hash = crate::run::exec::digest(
        serde_json::to_string(&m.fact)
            .unwrap_or_default()
            .as_bytes(),
    );
    let draft = Review {
        task_id: &m.task_id,
        by,
        capability: "memory.write",
        target: &target,
        profile: PolicyProfile::Strict,
        request_hash: &request_hash,
        approve,
        reason,
        policy_set: "",
    }
    .draft();
    let review = format!("review_{}", id.trim_start_matches("memprop_"));
    let journal = write_review(home, &review, draft, signer, now)?;
    m.status = if approve {
        ProposalStatus::Approved
    } else {
        ProposalStatus::Rejected
    };
    m.decided_by = Some(by.to_owned());
    m.decided_at = Some(Timestamp::new(now));
    m.decision_reason = Some(reason.to_owned());
    write_memory(home, &m)?;
    Ok((m, journal))
}
