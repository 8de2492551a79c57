//! `craik audit --summary`: counts over the verified receipts an audit explained, signed with
//! the home's key as a one-receipt `craik.audit_summary` journal, and the check `craik
//! receipts verify` makes of such a journal.
//!
//! What a verified summary proves: this key asserted these counts, under these filters, over
//! the journals it verified with these trusted keys, when the home's ledger had this head. It
//! does not prove the counts are right (re-run the audit for that); it pins what was claimed,
//! when, and over which state of the home.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use craik_contracts::{Object, PolicyProfile, ReceiptResult, ReceiptStatus};
use craik_kernel::{
    DecidedBy, DecidedByKind, Decision, Ed25519Signer, JournalWriter, Mode, ReceiptDraft,
    ReceiptPayload,
};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Entry, Filters, RunHead, file_changes, verdict_key};
use crate::exit::Failure;
use crate::output::Out;

/// The summary receipt's capability.
pub(crate) const CAPABILITY: &str = "audit.summary";
/// The contract its metadata carries.
pub(crate) const SCHEMA: &str = "craik.audit_summary";
/// Distinct keys one count map holds; the rest are counted under [`OTHER`] (memory stays
/// flat whatever a runner named its capabilities).
const MAX_KEYS: usize = 10_000;
const OTHER: &str = "(other)";

/// What the audit counted: only receipts the filters selected, of runs `--run`/`--status`
/// selected.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Counts {
    /// Journals audited (the runs selected, invalid ones included).
    pub(super) journals: u64,
    /// Of those, journals that did not verify (or changed during the audit, or are missing).
    pub(super) invalid_journals: u64,
    /// Runs by the status their journal signs (`unsigned` when none).
    pub(super) runs_by_status: BTreeMap<String, u64>,
    /// Receipts counted.
    pub(super) receipts: u64,
    /// `allow`, `requires_approval`, `deny`, or `outcome`.
    pub(super) by_verdict: BTreeMap<String, u64>,
    pub(super) by_capability: BTreeMap<String, u64>,
    /// Approvals, each counted once (its review's receipt and the decision it decided are
    /// one approval: issue 30 found each counted twice), by approver.
    pub(super) by_approver: BTreeMap<String, u64>,
    /// (journal, approval id) already counted.
    #[serde(skip)]
    approvals_seen: std::collections::BTreeSet<(String, String)>,
    /// Decisions that denied (policy, default, kernel, operator or a reviewer).
    pub(super) denials: u64,
    /// `run.cancel` receipts.
    pub(super) cancellations: u64,
    /// Memory proposals the runs made, by their signed review (`approved`, `rejected`,
    /// `pending`, `invalid`).
    pub(super) memory_reviews: BTreeMap<String, u64>,
    /// Files created, changed or removed, as outcome receipts sign them.
    pub(super) files_changed: u64,
    /// Of those, changes outside the command's write scope.
    pub(super) forbidden_changes: u64,
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    let key = if map.len() >= MAX_KEYS && !map.contains_key(key) {
        OTHER
    } else {
        key
    };
    *map.entry(key.to_owned()).or_default() += 1;
}

impl Counts {
    /// Memory proposals reviewed or not.
    pub(super) fn memory_proposals(&self) -> u64 {
        self.memory_reviews.values().sum()
    }

    /// A journal with no run to count (missing).
    pub(super) fn journal(&mut self, valid: bool) {
        self.journals += 1;
        if !valid {
            self.invalid_journals += 1;
        }
    }

    pub(super) fn run(&mut self, status: &str, valid: bool) {
        self.journal(valid);
        bump(&mut self.runs_by_status, status);
    }

    pub(super) fn entry(&mut self, head: &RunHead, entry: &Entry) {
        let r = &entry.receipt;
        self.receipts += 1;
        bump(&mut self.by_verdict, verdict_key(r));
        bump(&mut self.by_capability, &r.capability);
        if let Some(a) = &entry.approval
            && self
                .approvals_seen
                .insert((head.journal.clone(), a.id.clone()))
        {
            bump(&mut self.by_approver, &a.approver);
        }
        if is_denial(r) {
            self.denials += 1;
        }
        if r.capability == "run.cancel" {
            self.cancellations += 1;
        }
        if let Some(m) = &entry.memory_review {
            bump(&mut self.memory_reviews, m.decision);
        }
        for f in file_changes(r) {
            self.files_changed += 1;
            if !f.forbidden.is_empty() {
                self.forbidden_changes += 1;
            }
        }
    }
}

/// A decision that denied (not an outcome).
pub(super) fn is_denial(r: &ReceiptPayload) -> bool {
    r.decided_by.kind != DecidedByKind::Outcome && r.decision == Decision::Deny
}

/// The home ledger's head when the audit checked it: its size and last entry's hash.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LedgerHead {
    entries: u64,
    last_hash: String,
}

impl LedgerHead {
    pub(super) fn of(check: &craik_host::ledger::HomeCheck) -> Option<Self> {
        let report = check.report.as_ref().filter(|r| r.is_valid())?;
        Some(Self {
            entries: report.receipts,
            last_hash: report.last_hash.clone()?,
        })
    }
}

/// `craik.audit_summary`: what is signed (the receipt's metadata).
#[derive(Debug, Serialize)]
pub(crate) struct Summary<'a> {
    schema: &'static str,
    version: &'static str,
    /// What was audited, as given.
    target: String,
    /// The keys the journals were verified with.
    trusted_keys: &'a [String],
    filters: &'a Filters,
    /// The home ledger's head the audit checked (absent: not a home, or an invalid ledger).
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger: Option<LedgerHead>,
    counts: &'a Counts,
}

impl<'a> Summary<'a> {
    pub(super) fn new(
        target: &str,
        trusted_keys: &'a [String],
        filters: &'a Filters,
        ledger: Option<LedgerHead>,
        counts: &'a Counts,
    ) -> Self {
        Self {
            schema: SCHEMA,
            version: "0.1.0",
            target: target.to_owned(),
            trusted_keys,
            filters,
            ledger,
            counts,
        }
    }

    pub(super) fn counts(&self) -> &Counts {
        self.counts
    }

    pub(super) fn filters(&self) -> &Filters {
        self.filters
    }
}

/// The key a summary is signed with and where its journal goes, settled before the audit.
pub(super) struct Signing {
    signer: Ed25519Signer,
    id: String,
    path: PathBuf,
    home: PathBuf,
}

impl Signing {
    pub(super) fn prepare(home: &Path, to: Option<&Path>) -> Result<Self, Failure> {
        let key = home.join("keys").join(craik_host::keys::PRIVATE_NAME);
        if !key.is_file() {
            return Err(Failure::usage(format!(
                "--summary signs with the home's key and `{}` does not exist: audit a home that has one (--home DIR), or leave out --summary",
                key.display()
            )));
        }
        craik_host::keys::hold_key_use(&home.join("keys"))?;
        let signer = crate::cmd::keys::read_signer(&key)?;
        let now = time::OffsetDateTime::now_utc();
        let run_like = craik_host::run::store::new_run_id(now)?;
        let id = format!("audit_{}", run_like.trim_start_matches("run_"));
        let path = match to {
            Some(p) => p.to_owned(),
            None => home
                .join("audits")
                .join(&id)
                .join(craik_host::journal::JOURNAL_NAME),
        };
        if path.exists() {
            return Err(Failure::usage(format!(
                "--summary-out {}: already exists; refusing to overwrite a signed summary",
                path.display()
            )));
        }
        Ok(Self {
            signer,
            id,
            path,
            home: home.to_owned(),
        })
    }

    /// Signs `summary` as a one-receipt, closed journal and writes it; returns its path.
    pub(super) fn sign(&self, summary: &Summary<'_>) -> Result<PathBuf, Failure> {
        let Value::Object(map) = serde_json::to_value(summary)
            .map_err(|e| Failure::internal(format!("cannot encode the summary: {e}")))?
        else {
            return Err(Failure::internal("the summary is not a JSON object"));
        };
        let metadata = Object(map.into_iter().collect());
        let request_hash = content_hash(&metadata)?;
        let draft = ReceiptDraft {
            task_id: String::new(),
            actor: "craik".into(),
            capability: CAPABILITY.into(),
            target: summary.target.clone(),
            policy_profile: PolicyProfile::Strict,
            fail_open: false,
            reason: "counts over the receipts a verified audit explained".into(),
            result: ReceiptResult {
                status: ReceiptStatus::Passed,
                summary: "audit summary".into(),
                metadata,
            },
            redacted: false,
            policy_set: String::new(),
            request_hash,
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Kernel,
                by: String::new(),
            },
            mode: Mode::Enforce,
            action: None,
        };
        let now = time::OffsetDateTime::now_utc();
        let mut writer = JournalWriter::new(&self.id, 0);
        let mut bytes = writer
            .append(draft, now, &self.signer)
            .map_err(|e| Failure::internal(e.to_string()))?;
        bytes.extend(
            writer
                .close(now, &self.signer)
                .map_err(|e| Failure::internal(e.to_string()))?,
        );
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Failure::usage(format!("{}: cannot create: {e}", dir.display())))?;
        }
        if self.path.exists() {
            return Err(Failure::usage(format!(
                "{}: appeared during the audit; refusing to overwrite a signed summary",
                self.path.display()
            )));
        }
        craik_host::fsio::write_atomic(&self.path, &bytes)
            .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", self.path.display())))?;
        // A summary in the home's `audits/` is named by the home's ledger (issue 31 item 4), so
        // deleting, replacing or planting one is caught; one written elsewhere is the caller's.
        craik_host::audits::record_written(&self.home, &self.path, &self.id, &self.signer, now)?;
        Ok(self.path.clone())
    }
}

/// `sha256:` of the RFC 8785 form of the summary: the receipt's `request_hash`.
fn content_hash(metadata: &Object) -> Result<String, Failure> {
    let bytes = craik_kernel::canonical_bytes(metadata)
        .map_err(|e| Failure::internal(format!("the summary cannot be signed: {e}")))?;
    Ok(format!(
        "sha256:{}",
        craik_kernel::to_hex(&Sha256::digest(&bytes))
    ))
}

/// For `receipts verify`: what is wrong with a journal whose first receipt is an audit
/// summary (`None`: nothing). It must be one receipt, closed, carrying a
/// `craik.audit_summary` 0.1.0 whose hash is the receipt's `request_hash`; and when it sits in
/// a home (`HOME/audits/<id>/`), that home's ledger must still hold the head it names (the
/// ledger itself is verified by `receipts verify HOME`).
pub(crate) fn problem(
    path: &Path,
    first: &ReceiptPayload,
    report: &craik_kernel::Report,
) -> Option<String> {
    if report.receipts != 1 || !report.closed {
        return Some(format!(
            "an audit summary is one receipt in a closed journal; this has {} receipt(s){}",
            report.receipts,
            if report.closed { "" } else { " and is open" }
        ));
    }
    let meta = &first.result.metadata;
    let field = |k: &str| meta.0.get(k).and_then(Value::as_str);
    if field("schema") != Some(SCHEMA) || field("version") != Some("0.1.0") {
        return Some(format!(
            "the summary's metadata is not {SCHEMA} 0.1.0 (schema `{}`)",
            craik_contracts::Truncated(field("schema").unwrap_or("none"))
        ));
    }
    match content_hash(meta) {
        Ok(h) if h == first.request_hash => {}
        _ => {
            return Some(format!(
                "the summary does not hash to the receipt's request_hash {}",
                first.request_hash
            ));
        }
    }
    let head = meta.0.get("ledger")?;
    let entries = head.get("entries").and_then(Value::as_u64)?;
    let want = head.get("last_hash").and_then(Value::as_str)?;
    let home = home_of_summary(path)?;
    let ledger = home.join(craik_host::ledger::LEDGER_NAME);
    match ledger_hash_at(&ledger, entries) {
        Some(got) if got == want => None,
        Some(got) => Some(format!(
            "the summary was made over the ledger head {want} ({entries} entries); {} now has {got} there: the ledger was rewritten since",
            ledger.display()
        )),
        None => Some(format!(
            "the summary was made over the ledger head {want} ({entries} entries); {} has fewer entries now (cut short or replaced)",
            ledger.display()
        )),
    }
}

/// `HOME` of `HOME/audits/<id>/receipts.jsonl`.
fn home_of_summary(path: &Path) -> Option<PathBuf> {
    let audits = path.parent()?.parent()?;
    (audits.file_name()? == "audits").then(|| audits.parent().map(Path::to_owned))?
}

/// The hash (`sha256:`) of the ledger's receipt number `entries` (1-based), read line by line.
fn ledger_hash_at(ledger: &Path, entries: u64) -> Option<String> {
    use std::io::BufRead;
    let want = entries.checked_sub(1)?;
    let file = std::fs::File::open(ledger).ok()?;
    let mut seen = 0u64;
    for line in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
    {
        if let Some((hash, _)) = super::decode_line(&line) {
            if seen == want {
                return Some(hash);
            }
            seen += 1;
        }
    }
    None
}

/// `--summary` for people.
pub(super) fn human(
    out: &mut Out,
    summary: &Summary<'_>,
    written: Option<&Path>,
) -> Result<(), Failure> {
    let c = summary.counts;
    let list = |m: &BTreeMap<String, u64>| {
        if m.is_empty() {
            "none".to_owned()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    out.line(format_args!(
        "audit summary of {} ({} journal(s), {} invalid)",
        summary.target, c.journals, c.invalid_journals
    ))?;
    if let Some(head) = &summary.ledger {
        out.line(format_args!(
            "  ledger          {} entries, head {}",
            head.entries, head.last_hash
        ))?;
    }
    let filters = serde_json::to_string(summary.filters).unwrap_or_default();
    if filters != "{}" {
        out.line(format_args!("  filters         {filters}"))?;
    }
    out.line(format_args!(
        "  runs            {}",
        list(&c.runs_by_status)
    ))?;
    out.line(format_args!(
        "  receipts        {} ({})",
        c.receipts,
        list(&c.by_verdict)
    ))?;
    out.line(format_args!("  capabilities    {}", list(&c.by_capability)))?;
    out.line(format_args!("  approvers       {}", list(&c.by_approver)))?;
    out.line(format_args!(
        "  denials {}, cancellations {}, files changed {} ({} forbidden)",
        c.denials, c.cancellations, c.files_changed, c.forbidden_changes
    ))?;
    out.line(format_args!(
        "  memory reviews  {}",
        list(&c.memory_reviews)
    ))?;
    if let Some(path) = written {
        out.line(format_args!(
            "  signed          {} (check with `craik receipts verify {}`)",
            path.display(),
            path.display()
        ))?;
    }
    Ok(())
}
