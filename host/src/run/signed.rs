//! What a run's signed journal binds: its receipts (read only once the journal verifies), its
//! inputs (`inputs.json` must hash to the first receipt's `request_hash`) and the exact action
//! each decision names.

use craik_kernel::{KeyRing, ReceiptPayload};

use crate::Error;
use crate::run::exec;
use crate::run::store::{RunStore, RunStoreExt, io_at as io};
use crate::run::{ActionRecord, Inputs};

/// The capability a run's first receipt names: it binds `inputs.json` to the journal.
pub const RUN_INPUTS: &str = "run.inputs";

/// The capability of a run's closing receipt, the last before its final checkpoint: its
/// `result.metadata.status` is the run's terminal status (`completed`, `blocked`, `failed`,
/// `interrupted`), `reason` why, `metadata.cancelled` true for an operator's cancel. Nothing
/// changes a run after it: resume, recover and cancel read it and refuse.
pub const RUN_CLOSED: &str = "run.closed";

/// The capability of the receipt a run signs when it parks awaiting an approval: status
/// `blocked`, `metadata.may_continue` true, `metadata.awaiting_approval` the approval id.
pub const RUN_PARKED: &str = "run.parked";

/// The terminal status and reason a run's signed closing receipt names, from its verified
/// receipts (`None`: the run has not ended, or ended before closing receipts existed).
pub fn signed_ending(
    receipts: &[ReceiptPayload],
) -> Option<(craik_contracts::TaskRunStatus, String, String)> {
    let closing = receipts.iter().rev().find(|r| r.capability == RUN_CLOSED)?;
    let status = closing.result.metadata.0.get("status")?.as_str()?;
    let status: craik_contracts::TaskRunStatus =
        serde_json::from_value(serde_json::Value::String(status.to_owned())).ok()?;
    Some((status, closing.reason.clone(), closing.id.clone()))
}

/// `sha256:` of an action record's canonical JSON (RFC 8785); an action with no canonical
/// form (a number beyond ±(2^53−1)) has no digest and is refused, never "".
pub fn action_digest(action: &ActionRecord) -> Result<crate::digest::Digest, String> {
    crate::digest::Digest::of_canonical(action)
}

/// The run's journal, whole lines only (a torn tail is recovery's to repair), verified under
/// `keys` (open allowed), decoded to its receipts; the error names the failure.
pub fn verified_receipts(
    dir: &dyn RunStore,
    keys: &KeyRing,
) -> Result<Vec<ReceiptPayload>, String> {
    let path = dir.file(crate::journal::JOURNAL_NAME);
    let bytes = dir
        .read_bytes(crate::journal::JOURNAL_NAME)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .ok_or_else(|| format!("{}: no journal", path.display()))?;
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .and_then(|end| bytes.get(..=end))
        .unwrap_or_default();
    let report = craik_kernel::verify_open_journal(whole, keys);
    if let Some(f) = report.failure {
        return Err(format!(
            "{}:{}: the run's journal does not verify ({}: {})",
            path.display(),
            f.line,
            f.what,
            f.why
        ));
    }
    Ok(crate::journal::decode_all(whole)
        .into_iter()
        .filter_map(|(_, d)| match d {
            crate::journal::Decoded::Receipt(r) => Some(*r),
            _ => None,
        })
        .collect())
}

/// Reads `inputs.json` only if its bytes are the ones the run's first signed receipt names.
pub fn bound_inputs(dir: &dyn RunStore, keys: &KeyRing) -> Result<Inputs, Error> {
    let path = dir.file(crate::run::store::INPUTS);
    let bytes = dir
        .read_bytes(crate::run::store::INPUTS)
        .map_err(io(&path))?
        .ok_or_else(|| Error::invalid(format!("{}: missing", path.display()), Vec::new()))?;
    let first = verified_receipts(dir, keys)
        .map_err(|why| Error::invalid(format!("{why}; it cannot be continued"), Vec::new()))?
        .into_iter()
        .next();
    let digest = exec::digest(&bytes);
    match first {
        Some(r) if r.capability == RUN_INPUTS && r.request_hash == digest => {}
        Some(r) if r.capability == RUN_INPUTS => {
            let field = mismatched_field(&bytes, &r)
                .map(|(f, _, _)| format!("; field `{f}` differs"))
                .unwrap_or_default();
            return Err(Error::invalid(
                format!(
                    "{}: changed since the run started ({digest}; the run's first signed receipt names {}){field}; a run continues only with the inputs it started with",
                    path.display(),
                    r.request_hash
                ),
                Vec::new(),
            ));
        }
        _ => {
            return Err(Error::invalid(
                format!(
                    "{}: no signed receipt binds these inputs (the run stopped before its first receipt, or its journal was replaced); nothing was done, start a new run",
                    path.display()
                ),
                Vec::new(),
            ));
        }
    }
    let inputs: Inputs = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display()), Vec::new()))?;
    if let Some(why) = case_file_mismatch(
        &dir.file(crate::run::store::CASE_FILE),
        inputs.case_file_sha256.as_deref(),
    )
    .or_else(|| {
        bound_file_mismatch(
            crate::run::store::PROMPT_FILE,
            &dir.file(crate::run::store::PROMPT_FILE),
            inputs.compiled_prompt_sha256.as_deref(),
        )
    }) {
        return Err(Error::invalid(
            format!("{why}; a run continues only with the inputs it started with"),
            Vec::new(),
        ));
    }
    Ok(inputs)
}

/// Why the run's `case_file.json` (at `path`) is not the one its signed inputs name
/// (`signed`: the `case_file_sha256` the run started with; `None`: a run without one, and
/// then no case file may have appeared); `None` when it is.
pub fn case_file_mismatch(path: &std::path::Path, signed: Option<&str>) -> Option<String> {
    bound_file_mismatch(crate::run::store::CASE_FILE, path, signed)
}

/// How a run file bound by a digest in the run's signed inputs stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// Its bytes hash to the signed digest.
    Matches,
    /// Its bytes hash to this other digest.
    Changed(String),
    /// The inputs sign a digest and there is no file.
    Missing,
    /// There is a file, and the inputs sign none.
    Unsigned,
    /// Neither a file nor a signed digest.
    None,
}

/// The one check of a bound file: `bytes` (the file's, if it could be read) against `signed`
/// (the digest its run's inputs sign, if any).
pub fn bound(bytes: Option<&[u8]>, signed: Option<&str>) -> Bound {
    match (bytes, signed) {
        (Some(b), Some(signed)) => {
            let digest = exec::digest(b);
            if digest == signed {
                Bound::Matches
            } else {
                Bound::Changed(digest)
            }
        }
        (None, Some(_)) => Bound::Missing,
        (Some(_), None) => Bound::Unsigned,
        (None, None) => Bound::None,
    }
}

/// Why the file `name` of a run (at `path`) is not the one the run signed (`signed`: its
/// sha256 in the run's inputs; `None`: the run has none, and then none may have appeared);
/// `None` when it is.
pub fn bound_file_mismatch(
    name: &str,
    path: &std::path::Path,
    signed: Option<&str>,
) -> Option<String> {
    let read = std::fs::read(path);
    match (bound(read.as_deref().ok(), signed), signed) {
        (Bound::Matches | Bound::None, _) => None,
        (Bound::Changed(digest), Some(signed)) => Some(format!(
            "{name}: changed since the run started ({digest}; the run.inputs receipt signs {signed})"
        )),
        (Bound::Unsigned, _) => Some(format!(
            "{name}: present, but the run's signed inputs name none"
        )),
        (_, signed) => Some(format!(
            "{name}: {}; the run.inputs receipt signs {}",
            read.err()
                .map_or_else(|| "unreadable".to_owned(), |e| e.to_string()),
            signed.unwrap_or("-")
        )),
    }
}

/// The first of the run's bound files (the case file, the compiled prompt) that is not what
/// its verified `run.inputs` receipt signs (`case_file_sha256`, `compiled_prompt_sha256`).
pub fn bound_files_mismatch(run_dir: &std::path::Path, receipt: &ReceiptPayload) -> Option<String> {
    let signed = |k: &str| {
        receipt
            .result
            .metadata
            .0
            .get(k)
            .and_then(serde_json::Value::as_str)
    };
    case_file_mismatch(
        &run_dir.join(crate::run::store::CASE_FILE),
        signed("case_file_sha256"),
    )
    .or_else(|| {
        bound_file_mismatch(
            crate::run::store::PROMPT_FILE,
            &run_dir.join(crate::run::store::PROMPT_FILE),
            signed("compiled_prompt_sha256"),
        )
    })
}

/// Why `inputs.json` (its bytes) is not what a run's signed `run.inputs` receipt binds,
/// naming the file and, where the receipt signs it separately, the field that differs
/// (`grants`, `envelope`, `intent`, `runner`, `workspace`, `policy_set`, `profile`,
/// `task.id`, `run_id`, `runner_adapter.sha256`, `case_file_sha256`, `project_profile_sha256`,
/// `compiled_prompt_sha256`);
/// `None` when its bytes hash to the receipt's `request_hash`.
pub fn inputs_mismatch(bytes: &[u8], receipt: &ReceiptPayload) -> Option<String> {
    use serde_json::Value;
    let digest = exec::digest(bytes);
    if digest == receipt.request_hash {
        return None;
    }
    let file = crate::run::store::INPUTS;
    let whole = format!(
        "{file}: changed since the run signed it ({digest}; the run.inputs receipt signs {})",
        receipt.request_hash
    );
    if serde_json::from_slice::<Value>(bytes).is_err() {
        return Some(format!("{whole}; it is not JSON any more"));
    }
    if let Some((field, now, was)) = mismatched_field(bytes, receipt) {
        return Some(format!(
            "{file}: field `{field}` is not what the run signed (now `{}`, signed `{}`)",
            craik_contracts::Truncated(&now),
            craik_contracts::Truncated(&was)
        ));
    }
    Some(format!(
        "{whole}; the separately signed fields (grants, envelope, intent, runner, workspace, policy_set, profile, task.id, run_id, runner_adapter.sha256) agree, so another field changed"
    ))
}

/// The first field of `inputs.json` (its bytes) that the `run.inputs` receipt signs
/// separately and that differs: (field, now, signed).
fn mismatched_field(
    bytes: &[u8],
    receipt: &ReceiptPayload,
) -> Option<(&'static str, String, String)> {
    use serde_json::Value;
    let doc = serde_json::from_slice::<Value>(bytes).ok()?;
    let meta = &receipt.result.metadata.0;
    let signed = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    let canonical = |v: Option<&Value>| {
        crate::digest::Digest::of_canonical(v.unwrap_or(&Value::Null))
            .map(|d| d.as_str().to_owned())
            .unwrap_or_default()
    };
    let grants = doc
        .get("grants")
        .cloned()
        .and_then(|g| serde_json::from_value::<Vec<craik_contracts::CapabilityGrant>>(g).ok())
        .and_then(|g| crate::run::grants_digest(&g).ok())
        .map(|d| d.as_str().to_owned())
        .unwrap_or_default();
    let text = |k: &str| {
        doc.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let workspace = text("workspace");
    // Issue 22: the adapter's digest (signed in the receipt's `runner_adapter`).
    let adapter_sha = |v: Option<&Value>| {
        v.and_then(|a| a.get("sha256"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let checks: [(&'static str, String, String); 13] = [
        ("grants", grants, signed("grants_sha256").to_owned()),
        (
            "envelope",
            canonical(doc.get("envelope")),
            signed("envelope_sha256").to_owned(),
        ),
        (
            "intent",
            canonical(doc.get("intent")),
            signed("intent_sha256").to_owned(),
        ),
        ("runner", text("runner"), signed("runner").to_owned()),
        ("workspace", workspace, signed("workspace").to_owned()),
        ("policy_set", text("policy_set"), receipt.policy_set.clone()),
        (
            "profile",
            text("profile"),
            receipt.policy_profile.as_str().to_owned(),
        ),
        (
            "task.id",
            doc.pointer("/task/id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            receipt.task_id.clone(),
        ),
        ("run_id", text("run_id"), receipt.run_id.clone()),
        (
            "runner_adapter.sha256",
            adapter_sha(doc.get("runner_adapter")),
            adapter_sha(meta.get("runner_adapter")),
        ),
        (
            "case_file_sha256",
            text("case_file_sha256"),
            signed("case_file_sha256").to_owned(),
        ),
        (
            "project_profile_sha256",
            text("project_profile_sha256"),
            signed("project_profile_sha256").to_owned(),
        ),
        (
            "compiled_prompt_sha256",
            text("compiled_prompt_sha256"),
            signed("compiled_prompt_sha256").to_owned(),
        ),
    ];
    checks.into_iter().find(|(_, now, was)| now != was)
}
