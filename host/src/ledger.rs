//! The home ledger: one signed, append-only, Merkle-checkpointed journal per home
//! (`<home>/ledger.jsonl`) naming every journal the home holds: a run's when it starts and
//! when it closes (with its final checkpoint), a review's when it closes, each signing key
//! when it first signs. Verifying a home checks the ledger first, then that every journal it
//! names exists and ends at the recorded root, and that it names every journal there is.
//!
//! Owns: the ledger's entries, appending them (under an exclusive `flock`, one write, one
//! fsync, a checkpoint after every entry) and the cross-check. Must not: decide anything
//! about a run, or repair anything but a torn last line (moved to `ledger.jsonl.torn`).
//!
//! Entries are `craik.capability_receipt` payloads in the run journals' envelope, chain and
//! checkpoint format, with the journal id `ledger` (receipt ids `receipt_ledger_<seq>`): any
//! verifier of a run journal verifies the ledger. docs/receipts.md specifies them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use craik_contracts::{Object, PolicyProfile, ReceiptResult, ReceiptStatus};
use craik_kernel::{
    CHECKPOINT_PAYLOAD_TYPE, Checkpoint, DecidedBy, DecidedByKind, Decision, Ed25519Signer,
    Envelope, JournalWriter, KeyRing, Mode, ReceiptDraft, ReceiptPayload, Report, Signer,
    VerifyOptions,
};
use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::Error;
use crate::journal::{Decoded, JOURNAL_NAME, decode_all};
use crate::run::store::{Home, io_at as io, sync_dir};

/// The ledger's file name in a home.
pub const LEDGER_NAME: &str = "ledger.jsonl";
/// The lock file appends hold (the ledger itself is never opened for anything but appends).
const LOCK_NAME: &str = "ledger.lock";
/// The ledger's journal id (its receipts' `run_id`).
pub const LEDGER_ID: &str = "ledger";

/// A run started: its journal's first receipt (`run.inputs`) is on disk.
pub const RUN_STARTED: &str = "ledger.run_started";
/// A run's journal closed: its final checkpoint (tree size and root).
pub const RUN_CLOSED: &str = "ledger.run_closed";
/// An open run's journal reached a point the host acts from (a park awaiting approval, an
/// approval consumed): its tree size and root. Resume, recovery and `receipts verify HOME`
/// refuse a journal that does not extend the last one recorded (issue 31 item 1: a run
/// directory put back from a copy saved while parked consumed the same approval twice).
pub const RUN_CHECKPOINT: &str = "ledger.run_checkpoint";
/// A review journal (an approval's or a memory proposal's decision) closed.
pub const REVIEW_CLOSED: &str = "ledger.review_closed";
/// A signing key signed its first ledger entry (a new home, or a new key file).
pub const KEY_ADDED: &str = "ledger.key_added";
/// The home's signing key was rotated: signed by the key it retires, naming its successor.
pub const KEY_ROTATED: &str = "ledger.key_rotated";

/// One entry, before it is signed.
#[derive(Debug, Clone)]
pub struct Entry {
    /// One of [`RUN_STARTED`], [`RUN_CLOSED`], [`REVIEW_CLOSED`], [`KEY_ADDED`],
    /// [`KEY_ROTATED`].
    pub kind: &'static str,
    /// The run id, review id or key id the entry is about.
    pub target: String,
    pub task_id: String,
    pub actor: String,
    pub profile: PolicyProfile,
    pub policy_set: String,
    pub request_hash: String,
    pub reason: String,
    pub metadata: Object,
}

/// A side effect about to start, as a `ledger.run_checkpoint` (why `executing`) names it: the
/// action and, for a file write, the file's hashes before and after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Starting {
    pub action: String,
    pub pre: Option<String>,
    pub post: Option<String>,
    /// For a command whose check found forbidden changes (why `undoing`): the `sha256:` of
    /// its persisted findings (`precommand/<action>.found`), recorded before anything is
    /// undone, so recovery knows they existed though the file be deleted (outside testing
    /// round 17b M5).
    pub findings: Option<String>,
}

/// `runs/<run id>/receipts.jsonl`, relative to the home.
pub fn run_journal(run_id: &str) -> String {
    format!("runs/{run_id}/{JOURNAL_NAME}")
}

/// `reviews/<review id>/receipts.jsonl`, relative to the home.
pub fn review_journal(review_id: &str) -> String {
    format!("reviews/{review_id}/{JOURNAL_NAME}")
}

fn meta(pairs: &[(&str, Value)]) -> Object {
    let mut object = Object::new();
    for (k, v) in pairs {
        object.0.insert((*k).to_owned(), v.clone());
    }
    object
}

impl Entry {
    /// A run's journal holds its first receipt, `run.inputs` (`inputs_sha256` is that
    /// receipt's `request_hash`); `operator` is the task's `requested_by`.
    pub fn run_started(first: &ReceiptPayload, operator: &str) -> Self {
        Self {
            kind: RUN_STARTED,
            target: first.run_id.clone(),
            task_id: first.task_id.clone(),
            actor: first.actor.clone(),
            profile: first.policy_profile,
            policy_set: first.policy_set.clone(),
            request_hash: first.request_hash.clone(),
            reason: "a run started".into(),
            metadata: meta(&[
                ("journal", json!(run_journal(&first.run_id))),
                ("run_id", json!(first.run_id)),
                ("inputs_sha256", json!(first.request_hash)),
                ("operator", json!(operator)),
            ]),
        }
    }

    /// A run's journal closed at `checkpoint`; `ending` is its signed closing receipt's
    /// status and reason, when it has one.
    pub fn run_closed(
        first: &ReceiptPayload,
        checkpoint: &Checkpoint,
        ending: Option<(&str, &str)>,
    ) -> Self {
        let (status, reason) = ending.unwrap_or(("unsigned", ""));
        Self {
            kind: RUN_CLOSED,
            target: first.run_id.clone(),
            task_id: first.task_id.clone(),
            actor: first.actor.clone(),
            profile: first.policy_profile,
            policy_set: first.policy_set.clone(),
            request_hash: checkpoint.root_hash.clone(),
            reason: "a run's journal closed".into(),
            metadata: meta(&[
                ("journal", json!(run_journal(&first.run_id))),
                ("run_id", json!(first.run_id)),
                ("tree_size", json!(checkpoint.tree_size)),
                ("root_hash", json!(checkpoint.root_hash)),
                ("last_receipt_hash", json!(checkpoint.last_receipt_hash)),
                ("status", json!(status)),
                ("status_reason", json!(reason)),
            ]),
        }
    }

    /// An open run's journal at `tree_size` receipts with Merkle root `root_hash` (what a
    /// checkpoint at that size would sign); `why`: `parked`, `approval_used`, `executing` or `undoing`;
    /// for `executing`, `starting` names the side effect about to start (recovery knows it
    /// started whatever `events.jsonl` says: outside testing round 17).
    pub fn run_checkpoint(
        first: &ReceiptPayload,
        tree_size: u64,
        root_hash: &str,
        last_receipt_hash: Option<&str>,
        why: &str,
        starting: Option<&Starting>,
    ) -> Self {
        let mut metadata = meta(&[
            ("journal", json!(run_journal(&first.run_id))),
            ("run_id", json!(first.run_id)),
            ("tree_size", json!(tree_size)),
            ("root_hash", json!(root_hash)),
            ("last_receipt_hash", json!(last_receipt_hash)),
            ("why", json!(why)),
        ]);
        if let Some(s) = starting {
            metadata.0.insert("action".into(), json!(s.action));
            metadata.0.insert("pre".into(), json!(s.pre));
            metadata.0.insert("post".into(), json!(s.post));
            if let Some(findings) = &s.findings {
                metadata.0.insert("findings_sha256".into(), json!(findings));
            }
        }
        Self {
            kind: RUN_CHECKPOINT,
            target: first.run_id.clone(),
            task_id: first.task_id.clone(),
            actor: first.actor.clone(),
            profile: first.policy_profile,
            policy_set: first.policy_set.clone(),
            request_hash: root_hash.to_owned(),
            reason: format!("an open run's journal reached a point the host acts from ({why})"),
            metadata,
        }
    }

    /// What makes two entries the same for [`record`]'s idempotence: kind and target (a run
    /// checkpoint is judged against its run's latest: [`Recorded::admit`]).
    fn key(&self) -> (String, String) {
        seen_key(self.kind, &self.target)
    }

    /// A review journal closed at `checkpoint` (`kind`: `approval` or `memory`).
    pub fn review_closed(
        review_id: &str,
        receipt: &ReceiptPayload,
        checkpoint: &Checkpoint,
    ) -> Self {
        let kind = if review_id.starts_with("approval_") {
            "approval"
        } else {
            "memory"
        };
        Self {
            kind: REVIEW_CLOSED,
            target: review_id.to_owned(),
            task_id: receipt.task_id.clone(),
            actor: receipt.actor.clone(),
            profile: receipt.policy_profile,
            policy_set: receipt.policy_set.clone(),
            request_hash: checkpoint.root_hash.clone(),
            reason: format!("an {kind} review closed"),
            metadata: meta(&[
                ("journal", json!(review_journal(review_id))),
                ("review_id", json!(review_id)),
                ("review", json!(kind)),
                ("tree_size", json!(checkpoint.tree_size)),
                ("root_hash", json!(checkpoint.root_hash)),
            ]),
        }
    }

    /// A signing key's first ledger entry.
    pub fn key_added(key_id: &str) -> Self {
        Self {
            kind: KEY_ADDED,
            target: key_id.to_owned(),
            task_id: String::new(),
            actor: "craik".into(),
            profile: PolicyProfile::Strict,
            policy_set: String::new(),
            request_hash: key_id.to_owned(),
            reason: "a signing key was added to the home".into(),
            metadata: meta(&[("key_id", json!(key_id))]),
        }
    }

    /// The home's key `retired` hands over to `successor` (signed by `retired`: the last
    /// ledger line it signs). `by` is the operator who rotated it (asserted, not
    /// authenticated).
    pub fn key_rotated(retired: &[u8; 32], successor: &[u8; 32], by: &str, reason: &str) -> Self {
        let (old, new) = (
            craik_kernel::key_id_of(retired),
            craik_kernel::key_id_of(successor),
        );
        Self {
            kind: KEY_ROTATED,
            target: new.clone(),
            task_id: String::new(),
            actor: by.to_owned(),
            profile: PolicyProfile::Strict,
            policy_set: String::new(),
            request_hash: new.clone(),
            reason: format!("the home's signing key was rotated: {reason}"),
            metadata: meta(&[
                ("retired_key_id", json!(old)),
                ("retired_public_key", json!(craik_kernel::to_hex(retired))),
                ("key_id", json!(new)),
                ("public_key", json!(craik_kernel::to_hex(successor))),
                ("by", json!(by)),
            ]),
        }
    }

    /// Marks an entry as recorded by `craik ledger rebuild`, not when it happened.
    fn rebuilt(mut self) -> Self {
        self.metadata.0.insert("rebuilt".into(), json!(true));
        self
    }

    fn draft(self) -> ReceiptDraft {
        ReceiptDraft {
            task_id: self.task_id,
            actor: self.actor,
            capability: self.kind.to_owned(),
            target: self.target,
            policy_profile: self.profile,
            fail_open: false,
            reason: self.reason,
            result: ReceiptResult {
                status: ReceiptStatus::Passed,
                summary: "recorded in the home ledger".into(),
                metadata: self.metadata,
            },
            redacted: true,
            policy_set: self.policy_set,
            request_hash: self.request_hash,
            decision: Decision::Allow,
            determining_policies: Vec::new(),
            decided_by: DecidedBy {
                kind: DecidedByKind::Kernel,
                by: String::new(),
            },
            mode: Mode::Enforce,
            action: None,
        }
    }
}

/// The exclusive ledger lock, held while this lives.
struct LedgerLock {
    _file: File,
}

fn lock(root: &Path) -> Result<LedgerLock, Error> {
    let path = root.join(LOCK_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io(&path)(io::Error::from(e)))?;
    Ok(LedgerLock { _file: file })
}

/// The ledger's bytes, a torn last line (an append a crash cut short, never acknowledged)
/// moved to `ledger.jsonl.torn` first. Missing: empty.
fn read_repaired(path: &Path) -> Result<Vec<u8>, Error> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path)(e)),
    };
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(bytes);
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let torn_path = path.with_extension("jsonl.torn");
    let mut torn = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&torn_path)
        .map_err(io(&torn_path))?;
    torn.write_all(bytes.get(keep..).unwrap_or_default())
        .and_then(|()| torn.sync_all())
        .map_err(io(&torn_path))?;
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io(path))?;
    file.set_len(u64::try_from(keep).unwrap_or(u64::MAX))
        .and_then(|()| file.sync_all())
        .map_err(io(path))?;
    Ok(bytes.get(..keep).unwrap_or_default().to_vec())
}

/// What a ledger records: each entry's identity (kind, target) → its `request_hash` (the
/// root, inputs hash or key id it signs), so an append can tell "already recorded" from
/// "recorded otherwise"; and of each open run only its latest `ledger.run_checkpoint` (tree
/// size, root). Earlier checkpoints and a closed run's are not kept: a run's checkpoints only
/// grow and none follows its close, so the latest is all an append needs to decide.
///
/// Read from the signed head it is `partial`: the home's keys and its open runs only, so the
/// head a step's append re-signs is the size of what is running, not of the home's history
/// (issue 31: re-signing every entry a home of 1000 runs recorded at each of a run's appends
/// cost 19 % of `craik bench run`); an entry about anything else takes the full read.
#[derive(Default)]
struct Recorded {
    named: BTreeMap<(String, String), String>,
    latest: BTreeMap<String, (u64, String)>,
    partial: bool,
}

/// What [`Recorded::admit`] makes of an entry.
enum Admit {
    /// Not recorded: append it.
    New,
    /// Recorded with the same hash: skip it (appends are idempotent).
    Same,
    /// Recorded otherwise: refuse, saying why.
    Conflict(String),
}

impl Recorded {
    fn contains_key(&self, key: &(String, String)) -> bool {
        self.named.contains_key(key)
    }

    /// The runs started and not closed, with the inputs hash their start records.
    fn open_runs(&self) -> impl Iterator<Item = (&String, &String)> {
        self.named.iter().filter_map(|((kind, run), hash)| {
            (kind == RUN_STARTED
                && !self
                    .named
                    .contains_key(&(RUN_CLOSED.to_owned(), run.clone())))
            .then_some((run, hash))
        })
    }

    /// Whether this (perhaps partial) record can decide `entry`: a full one always; one
    /// from the head only for an entry about a run it holds open.
    fn answers(&self, entry: &Entry) -> bool {
        !self.partial
            || ([RUN_STARTED, RUN_CHECKPOINT, RUN_CLOSED].contains(&entry.kind)
                && self
                    .named
                    .contains_key(&(RUN_STARTED.to_owned(), entry.target.clone())))
    }

    /// Folds one recorded entry in, in ledger order.
    fn fold(&mut self, kind: &str, target: &str, size: Option<u64>, hash: &str) {
        match kind {
            RUN_CHECKPOINT => {
                let size = size.unwrap_or(u64::MAX);
                let newer = self.latest.get(target).is_none_or(|(s, _)| size >= *s);
                if newer
                    && !self
                        .named
                        .contains_key(&(RUN_CLOSED.to_owned(), target.to_owned()))
                {
                    self.latest
                        .insert(target.to_owned(), (size, hash.to_owned()));
                }
            }
            _ => {
                if kind == RUN_CLOSED {
                    self.latest.remove(target);
                }
                self.named
                    .insert((kind.to_owned(), target.to_owned()), hash.to_owned());
            }
        }
    }

    /// Whether `entry` is new, a repeat or a contradiction of what is recorded.
    fn admit(&self, entry: &Entry) -> Admit {
        if entry.kind == RUN_CHECKPOINT {
            let size = entry
                .metadata
                .0
                .get("tree_size")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            if self.contains_key(&(RUN_CLOSED.to_owned(), entry.target.clone())) {
                return Admit::Conflict("closed, and this is a point of it still open".into());
            }
            return match self.latest.get(&entry.target) {
                None => Admit::New,
                Some((s, _)) if size > *s => Admit::New,
                // A side effect starting at a point recorded already (an approval consumed
                // just before) is recorded too: recovery must know it started.
                Some((s, h)) if size == *s && *h == entry.request_hash => {
                    if entry.metadata.0.contains_key("action") {
                        Admit::New
                    } else {
                        Admit::Same
                    }
                }
                Some((s, h)) => Admit::Conflict(format!(
                    "at {s} receipts with root {h}, and this is a point at {size} receipts"
                )),
            };
        }
        match self.named.get(&entry.key()) {
            None => Admit::New,
            Some(hash) if *hash == entry.request_hash => Admit::Same,
            Some(hash) => Admit::Conflict(format!("as {hash}")),
        }
    }
}

/// An entry's identity for idempotent appends: (kind, target).
fn seen_key(kind: &str, target: &str) -> (String, String) {
    (kind.to_owned(), target.to_owned())
}

/// What the entries of a ledger's bytes record (decoded; the caller verified).
fn recorded(bytes: &[u8]) -> Recorded {
    let mut out = Recorded::default();
    for (_, d) in decode_all(bytes) {
        if let Decoded::Receipt(r) = d {
            let size = r.result.metadata.0.get("tree_size").and_then(Value::as_u64);
            out.fold(&r.capability, &r.target, size, &r.request_hash);
        }
    }
    out
}

/// Appends `entries` to the home's ledger, each followed by its checkpoint, in one write and
/// one fsync, skipping any already recorded (same kind and target: appends are idempotent,
/// so recovery may repeat them). A key that has not signed the ledger before gets its
/// `ledger.key_added` entry first. Returns how many entries were written.
pub fn record(
    root: &Path,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
    entries: Vec<Entry>,
) -> Result<usize, Error> {
    let held = lock(root)?;
    append(&held, root, signer, now, entries)
}

/// [`record`] under a lock the caller holds.
fn append(
    _held: &LedgerLock,
    root: &Path,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
    entries: Vec<Entry>,
) -> Result<usize, Error> {
    let mut ring = KeyRing::new();
    ring.add(&signer.public_key())
        .map_err(|e| Error::invalid(format!("signing key: {e}"), Vec::new()))?;
    let path = root.join(LEDGER_NAME);
    let key = (KEY_ADDED.to_owned(), signer.key_id().to_owned());
    let fast = from_head(root, &path, &ring)
        .filter(|(_, seen, _)| seen.contains_key(&key) && entries.iter().all(|e| seen.answers(e)));
    let (mut writer, mut seen, empty) = match fast {
        Some(fast) => fast,
        None => {
            let bytes = read_repaired(&path)?;
            let cannot = |why: String| {
                Error::invalid(
                    format!(
                        "{}: the home ledger cannot be continued: {why}; check it with `craik receipts verify {}`",
                        path.display(),
                        root.display()
                    ),
                    Vec::new(),
                )
            };
            // Earlier keys (rotated out) verify their own lines; only the key the ledger
            // expects next may append.
            let history = key_history(&bytes, &ring).map_err(cannot)?;
            if let Some(next) = &history.next
                && next != signer.key_id()
            {
                return Err(cannot(format!(
                    "its key is `{next}`, this home signs with `{}` (rotate keys with `craik keys rotate`, never by replacing the key file)",
                    signer.key_id()
                )));
            }
            let ring = history.ring;
            // A new ledger only in a home whose journals it is about to name: one holding
            // others had its ledger deleted or emptied, and a fresh one would leave them
            // unnamed for good (outside testing round 13: a run resumed against a deleted
            // ledger signed into a new one).
            let rebuilding = entries
                .iter()
                .any(|e| e.metadata.0.get("rebuilt") == Some(&Value::Bool(true)));
            if bytes.is_empty() && !rebuilding {
                let naming: BTreeSet<String> = entries
                    .iter()
                    .filter_map(|e| e.metadata.0.get("journal").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect();
                if let Some(why) = unledgered(root, &naming) {
                    return Err(cannot(why));
                }
            }
            let writer = if bytes.is_empty() {
                JournalWriter::new(LEDGER_ID, 1)
            } else {
                JournalWriter::resume_at_checkpoint(LEDGER_ID, &bytes, &ring, 1)
                    .map_err(|why| cannot(why.to_string()))?
            };
            (writer, recorded(&bytes), bytes.is_empty())
        }
    };
    let mut todo = Vec::new();
    if !seen.contains_key(&key) {
        seen.fold(KEY_ADDED, signer.key_id(), None, signer.key_id());
        todo.push(Entry::key_added(signer.key_id()));
    }
    for entry in entries {
        // Recorded already: skipped when it says the same, refused when it says otherwise (a
        // second journal of one run or review, a copy continued beside the original: outside
        // testing round 14 forked a run directory and both copies used one approval).
        match seen.admit(&entry) {
            Admit::Same => {}
            Admit::Conflict(recorded) => {
                return Err(Error::refused(format!(
                    "{}: the home ledger already records {} `{}` {recorded}, and this says {}: another copy of this run or review was continued (a directory put back, copied or forked). Nothing was recorded; check the home with `craik receipts verify {}`",
                    path.display(),
                    entry.kind,
                    entry.target,
                    entry.request_hash,
                    root.display()
                )));
            }
            Admit::New => {
                let size = entry.metadata.0.get("tree_size").and_then(Value::as_u64);
                seen.fold(entry.kind, &entry.target, size, &entry.request_hash);
                todo.push(entry);
            }
        }
    }
    if todo.is_empty() {
        return Ok(0);
    }
    // Time in the ledger never runs backwards, whatever the runs' clocks did.
    let at = writer.last_time().map_or(now, |last| last.max(now));
    let mut lines = Vec::new();
    let count = todo.len();
    for entry in todo {
        lines.extend(
            writer
                .append(entry.draft(), at, signer)
                .map_err(|e| Error::internal(format!("{}: {e}", path.display())))?,
        );
    }
    let created = empty && !path.exists();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io(&path))?;
    file.write_all(&lines)
        .and_then(|()| file.sync_data())
        .map_err(io(&path))?;
    crate::fsio::durable_point();
    if created {
        sync_dir(root).map_err(io(root))?;
    }
    // The head cache: advisory, unsigned, never fsynced (a stale or broken one only sends
    // the next append to the full read).
    if let Ok(len) = file.metadata().map(|m| m.len()) {
        save_head(root, len, &writer, &seen, signer);
    }
    Ok(count)
}

/// Whether `journal` (relative to the home at `root`) is a run's ahead of the ledger by
/// design: a run starting (its first receipt written, its ledger entry not yet: driven by a
/// live process), or killed there (one receipt, which `runs recover` records). Two first runs
/// on a fresh home race here.
fn starting(root: &Path, journal: &str) -> bool {
    // By its size alone, never by a lock: a run past its first receipt is named by the ledger
    // (its entry follows that receipt), and a lock any process of the user can hold must not
    // hide a journal the ledger lost (outside testing round 16: a `flock` on a later run's
    // directory let a cut ledger's lost denial be decided again).
    journal.starts_with("runs/") && at_most_one_line(&root.join(journal))
}

/// Whether the file at `path` holds at most one complete line (read until a second newline).
fn at_most_one_line(path: &Path) -> bool {
    let Ok(mut file) = File::open(path) else {
        return false;
    };
    let mut buf = [0u8; 64 * 1024];
    let mut lines = 0;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => {
                lines += buf
                    .get(..n)
                    .unwrap_or_default()
                    .iter()
                    .filter(|&&c| c == b'\n')
                    .count();
                if lines > 1 {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Why a new ledger may not be started in the home at `root` (`None`: it may): the home
/// holds journals other than `naming` (the ones the first entries name), so its ledger was
/// deleted or emptied, and a new one would leave them unnamed for good.
fn unledgered(root: &Path, naming: &BTreeSet<String>) -> Option<String> {
    let others: Vec<String> = journals_on_disk(&Home::new(root))
        .into_iter()
        .filter(|j| !naming.contains(j) && !starting(root, j))
        .collect();
    others.first().map(|first| {
        format!(
            "it is missing or empty, and the home holds {} journal(s) it does not name (first {first}): it was deleted or emptied; nothing was recorded (`craik ledger rebuild --home {}` records them once you know why)",
            others.len(),
            root.display()
        )
    })
}

/// Refuses a new run in a home whose ledger was deleted or emptied while it holds journals,
/// before the run's directory exists (its start could never be recorded).
pub fn ready_for_new_run(root: &Path) -> Result<(), Error> {
    let path = root.join(LEDGER_NAME);
    let empty = match fs::metadata(&path) {
        Ok(m) => m.len() == 0,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(io(&path)(e)),
    };
    if !empty {
        return Ok(());
    }
    match unledgered(root, &BTreeSet::new()) {
        Some(why) => Err(Error::invalid(
            format!(
                "{}: the home ledger cannot be continued: {why}",
                path.display()
            ),
            Vec::new(),
        )),
        None => Ok(()),
    }
}

/// `ledger.head`: the ledger's length, its Merkle subtree roots, the keys that signed it and
/// its open runs (each with its inputs hash and latest checkpoint), so a running step's
/// append reads one line instead of the whole ledger. The nodes must fold to the root the
/// last checkpoint signs; and since what the head records decides what an append skips
/// (issue 31: a pair added by hand made the host skip a run's close entry, and a rolled-back
/// journal then passed the home audit), the whole head is signed by the key that appends. A
/// head that does not verify under it is ignored, and an entry about anything it does not
/// hold (a new run, a review, a closed run, a new key) is decided by reading the ledger.
const HEAD_NAME: &str = "ledger.head";

/// The DSSE payload type of a signed head: its signature can never pass for a receipt's or
/// a checkpoint's.
const HEAD_PAYLOAD_TYPE: &str = "application/vnd.craik.ledger-head+json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Head {
    /// The signed bytes: a [`HeadBody`] as JSON.
    body: String,
    key_id: String,
    /// Base64 ed25519 signature over the DSSE pre-authentication encoding of `body`.
    sig: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct HeadBody {
    len: u64,
    nodes: Vec<String>,
    /// The key ids that have signed the ledger.
    keys: Vec<String>,
    /// (run, inputs hash) of each run started and not closed.
    open: Vec<(String, String)>,
    /// (run, tree size, root) of each open run's latest checkpoint.
    latest: Vec<(String, u64, String)>,
}

fn save_head(
    root: &Path,
    len: u64,
    writer: &JournalWriter,
    seen: &Recorded,
    signer: &Ed25519Signer,
) {
    let body = HeadBody {
        len,
        nodes: writer
            .tree_nodes()
            .iter()
            .map(|n| craik_kernel::to_hex(n))
            .collect(),
        keys: seen
            .named
            .keys()
            .filter(|(kind, _)| kind == KEY_ADDED)
            .map(|(_, id)| id.clone())
            .collect(),
        open: seen
            .open_runs()
            .map(|(run, inputs)| (run.clone(), inputs.clone()))
            .collect(),
        latest: seen
            .latest
            .iter()
            .map(|(run, (size, root))| (run.clone(), *size, root.clone()))
            .collect(),
    };
    let Ok(body) = serde_json::to_string(&body) else {
        return;
    };
    let sig = signer.sign(&craik_kernel::pae(HEAD_PAYLOAD_TYPE, body.as_bytes()));
    let head = Head {
        body,
        key_id: signer.key_id().to_owned(),
        sig: base64::engine::general_purpose::STANDARD.encode(sig),
    };
    let Ok(bytes) = serde_json::to_vec(&head) else {
        return;
    };
    // Rewritten in place, never renamed over: ext4 writes a file renamed over another out at
    // once (auto_da_alloc), which cost each append twice its own fdatasync. A head torn by a
    // crash fails its signature and sends the next append to the full read. Never through a
    // link or onto a file someone placed there (outside testing round 6: a planted link made
    // a root Craik overwrite any file): opened without following a link, and written only if
    // it is a regular file of this user with one name; else removed and created exclusively.
    use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
    let path = root.join(HEAD_NAME);
    let euid = rustix::process::geteuid().as_raw();
    let ours = |file: &File| {
        file.metadata()
            .is_ok_and(|m| m.is_file() && m.nlink() == 1 && m.uid() == euid)
    };
    let open = |fresh: bool| {
        OpenOptions::new()
            .write(true)
            .create(!fresh)
            .create_new(fresh)
            .mode(0o600)
            // Never blocked by a FIFO placed there (no reader: refused at once).
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
    };
    let file = match open(false) {
        Ok(file) if ours(&file) => Some(file),
        _ => {
            let _ = fs::remove_file(&path);
            open(true).ok().filter(ours)
        }
    };
    let Some(file) = file else {
        return;
    };
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if file
        .write_all_at(&bytes, 0)
        .and_then(|()| file.set_len(len))
        .is_ok()
    {
        crate::fsio::durable_point();
    }
}

/// The head's bytes: only a regular file (never through a link, never a FIFO or device that
/// would block or never end: outside testing round 17b hung a run on a FIFO and grew one to
/// 536 MB on a link to `/dev/zero`), of at most [`HEAD_MAX`] bytes.
fn read_head(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > HEAD_MAX {
        return None;
    }
    let mut bytes = Vec::new();
    Read::take(file, HEAD_MAX).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The largest head read (it holds the home's keys and open runs: far less).
const HEAD_MAX: u64 = 16 * 1024 * 1024;

/// The writer and recorded pairs from the head cache and the ledger's last line, when the
/// cache matches the ledger (same length, nodes folding to the signed root); else `None`.
fn from_head(root: &Path, path: &Path, ring: &KeyRing) -> Option<(JournalWriter, Recorded, bool)> {
    let signed: Head = serde_json::from_slice(&read_head(&root.join(HEAD_NAME))?).ok()?;
    // Only a head this home's appending key signed is believed (strict ed25519).
    let key = ring.get(&signed.key_id)?;
    let sig: [u8; 64] = base64::engine::general_purpose::STANDARD
        .decode(&signed.sig)
        .ok()?
        .try_into()
        .ok()?;
    key.verify_strict(
        &craik_kernel::pae(HEAD_PAYLOAD_TYPE, signed.body.as_bytes()),
        &ed25519_dalek::Signature::from_bytes(&sig),
    )
    .ok()?;
    let head: HeadBody = serde_json::from_str(&signed.body).ok()?;
    let len = fs::metadata(path).ok()?.len();
    if len != head.len {
        return None;
    }
    let line = last_line(path)?;
    let nodes: Vec<[u8; 32]> = head
        .nodes
        .iter()
        .map(|h| {
            let bytes: Vec<u8> = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                .collect::<Option<_>>()?;
            bytes.try_into().ok()
        })
        .collect::<Option<_>>()?;
    let writer = JournalWriter::resume_from_head(LEDGER_ID, &line, &nodes, ring, 1).ok()?;
    let keys = head
        .keys
        .into_iter()
        .map(|id| ((KEY_ADDED.to_owned(), id.clone()), id));
    let open = head
        .open
        .into_iter()
        .map(|(run, inputs)| ((RUN_STARTED.to_owned(), run), inputs));
    let recorded = Recorded {
        named: keys.chain(open).collect(),
        latest: head
            .latest
            .into_iter()
            .map(|(run, size, root)| (run, (size, root)))
            .collect(),
        partial: true,
    };
    Some((writer, recorded, false))
}

/// The last complete line of a file, from its tail (`None` if it does not end in a newline).
fn last_line(path: &Path) -> Option<Vec<u8>> {
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))
        .ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    let body = tail.strip_suffix(b"\n")?;
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    body.get(start..).map(<[u8]>::to_vec)
}

/// The last line of a journal, decoded as a checkpoint (not verified: the caller verifies the
/// journal itself); `None` when the file is missing or its last line is not a checkpoint.
pub fn last_checkpoint(path: &Path) -> Option<Checkpoint> {
    let line = last_line(path)?;
    let envelope: Envelope = serde_json::from_slice(&line).ok()?;
    if envelope.payload_type != CHECKPOINT_PAYLOAD_TYPE {
        return None;
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&envelope.payload)
        .ok()?;
    serde_json::from_slice(&payload).ok()
}

/// The keys that held a home's ledger, in order, and the ring to verify it with.
#[derive(Debug, Clone, Default)]
pub struct KeyHistory {
    /// `trusted`, and every key a rotation entry names (its public key is in the entry).
    pub ring: KeyRing,
    /// Each key that signed at least one line: its id and the first and last line it signed.
    pub periods: Vec<(String, usize, usize)>,
    /// The key that signs the ledger's next line (after a rotation with no line of its
    /// successor yet: the successor).
    pub next: Option<String>,
}

impl KeyHistory {
    /// The key that held the ledger at `line` (1-based).
    pub fn key_at(&self, line: usize) -> Option<&str> {
        self.periods
            .iter()
            .find(|(_, first, last)| (*first..=*last).contains(&line))
            .map(|(id, _, _)| id.as_str())
    }
}

/// Reads who held the ledger, line by line (signatures are not checked here: the caller
/// verifies the ledger with the ring returned). The first line's key holds it until a
/// `ledger.key_rotated` entry, signed by that key and naming it as retired, hands it over:
/// the checkpoint right after the entry is still the retired key's, every line after that
/// the successor's. A line signed by any other key, or a rotation entry whose key ids and
/// public keys disagree, is an error naming the line.
pub fn key_history(bytes: &[u8], trusted: &KeyRing) -> Result<KeyHistory, String> {
    let mut history = KeyHistory {
        ring: trusted.clone(),
        ..KeyHistory::default()
    };
    let mut active: Option<String> = None;
    let mut pending: Option<String> = None;
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let n = index + 1;
        if line.is_empty() {
            continue;
        }
        // Unreadable lines are the verifier's to name.
        let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
            break;
        };
        let Some(keyid) = envelope.signatures.first().map(|s| s.keyid.clone()) else {
            break;
        };
        let is_receipt = envelope.payload_type == craik_kernel::RECEIPT_PAYLOAD_TYPE;
        if is_receipt && let Some(next) = pending.take() {
            active = Some(next);
        }
        match &active {
            None => active = Some(keyid.clone()),
            Some(holder) if *holder != keyid => {
                return Err(format!(
                    "line {n}: signed by key `{keyid}` while the ledger's key is `{holder}` (a key hands over only through a `{KEY_ROTATED}` entry)"
                ));
            }
            Some(_) => {}
        }
        match history.periods.last_mut() {
            Some((id, _, last)) if *id == keyid => *last = n,
            _ => history.periods.push((keyid.clone(), n, n)),
        }
        if !is_receipt {
            continue;
        }
        let Some(receipt) = base64::engine::general_purpose::STANDARD
            .decode(&envelope.payload)
            .ok()
            .and_then(|p| serde_json::from_slice::<ReceiptPayload>(&p).ok())
        else {
            break;
        };
        if receipt.capability != KEY_ROTATED {
            continue;
        }
        let m = &receipt.result.metadata.0;
        let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or_default();
        let public = |k: &str| -> Result<[u8; 32], String> {
            let hex = text(k);
            let bytes: Option<Vec<u8>> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect();
            bytes
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| format!("line {n}: `{k}` is not a 32-byte hex public key"))
        };
        let (retired, successor) = (public("retired_public_key")?, public("public_key")?);
        let retired_id = history
            .ring
            .add(&retired)
            .map_err(|e| format!("line {n}: retired_public_key: {e}"))?;
        let successor_id = history
            .ring
            .add(&successor)
            .map_err(|e| format!("line {n}: public_key: {e}"))?;
        if retired_id != keyid || text("retired_key_id") != retired_id {
            return Err(format!(
                "line {n}: a rotation signed by `{keyid}` retires `{}` (public key of `{retired_id}`): a key retires only itself",
                craik_contracts::one_line(text("retired_key_id"))
            ));
        }
        if text("key_id") != successor_id || receipt.target != successor_id {
            return Err(format!(
                "line {n}: the successor's key id `{}` is not its public key's (`{successor_id}`)",
                craik_contracts::one_line(text("key_id"))
            ));
        }
        pending = Some(successor_id);
    }
    history.next = pending.or(active);
    Ok(history)
}

/// The ring a home's own commands verify its journals with: its current public key, and
/// every earlier key its ledger's rotations vouch for (a run closed before a rotation stays
/// readable by `runs show` and memory review after it).
pub fn home_ring(root: &Path, current: &[u8; 32]) -> Result<KeyRing, Error> {
    let mut ring = KeyRing::new();
    ring.add(current)
        .map_err(|e| Error::invalid(format!("signing key: {e}"), Vec::new()))?;
    let path = root.join(LEDGER_NAME);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ring),
        Err(e) => return Err(io(&path)(e)),
    };
    let history = key_history(&bytes, &ring)
        .map_err(|why| Error::invalid(format!("{}: {why}", path.display()), Vec::new()))?;
    // Only a history the current key holds: it then vouches, by its own lines chaining to
    // them, for the keys before it.
    if history.next.as_deref() == Some(craik_kernel::key_id_of(current).as_str()) {
        Ok(history.ring)
    } else {
        Ok(ring)
    }
}

/// One thing wrong with a home, named by the journal it concerns (the ledger itself, or a
/// journal the ledger names or should name) and, in `why`, the ledger line involved.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    pub journal: PathBuf,
    /// `ledger` (the ledger or a mismatch with it), `missing` (a named journal is gone).
    pub what: String,
    pub why: String,
}

/// What checking a home against its ledger found.
#[derive(Debug, Clone, Serialize)]
pub struct HomeCheck {
    pub ledger: PathBuf,
    /// The ledger's own verification (`None`: there is no ledger).
    pub report: Option<Report>,
    /// Entries recorded by `craik ledger rebuild` rather than when they happened.
    pub rebuilt: u64,
    pub problems: Vec<Problem>,
    /// The keys to verify this home's journals with: the trusted ones and, when the ledger
    /// verified and a trusted key holds part of it, every key its rotations name.
    #[serde(skip)]
    pub ring: KeyRing,
    /// Each journal the ledger names → the key that held the ledger when it first named it
    /// (the only key that may sign that journal), and that ledger line.
    #[serde(skip)]
    pub journal_keys: BTreeMap<PathBuf, (String, usize)>,
    /// The run journals the ledger records as started and not closed (signed: the run has
    /// not ended).
    #[serde(skip)]
    pub open: Vec<PathBuf>,
    /// The journals whose ledger entries `craik ledger rebuild` wrote (`rebuilt: true`): the
    /// ledger vouches for them only from the rebuild on. Filled by
    /// [`crate::audits::check`], which reads the verified ledger's entries.
    #[serde(skip)]
    pub rebuilt_journals: BTreeSet<PathBuf>,
}

impl HomeCheck {
    /// True when nothing is wrong.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    /// The problem concerning `journal`, if any.
    pub fn problem_for(&self, journal: &Path) -> Option<&Problem> {
        self.problems.iter().find(|p| same(&p.journal, journal))
    }

    /// Whether the ledger, verified and held by a trusted key, records `journal` as started
    /// and not closed.
    pub fn records_open(&self, journal: &Path) -> bool {
        self.report.as_ref().is_some_and(Report::is_valid)
            && self.problem_for(&self.ledger).is_none()
            && self.open.iter().any(|p| same(p, journal))
    }

    /// Whether `journal` belongs to this home (its `runs/` or `reviews/`).
    pub fn holds(&self, journal: &Path) -> bool {
        self.ledger.parent().is_some_and(|root| {
            let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            real(journal).starts_with(real(root))
        })
    }

    /// What is wrong with the keys that signed `journal` (`key_ids`, as its verification
    /// found them): each journal of a home is signed by one key, the one that held the ledger
    /// when the ledger first named it.
    pub fn key_problem(&self, journal: &Path, key_ids: &[String]) -> Option<String> {
        let (expected, line) = self
            .journal_keys
            .iter()
            .find(|(p, _)| same(p, journal))
            .map(|(_, k)| k)?;
        match key_ids {
            [] => None,
            [only] if only == expected => None,
            _ => Some(format!(
                "signed by {}; the ledger {}:{line} names it while its key was `{expected}` (a journal is signed by the key that held the ledger when it started)",
                key_ids
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.ledger.display()
            )),
        }
    }
}

fn same(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Every run and review journal on disk, relative to the home, sorted.
pub fn journals_on_disk(home: &Home) -> Vec<String> {
    let mut out = Vec::new();
    for (dir, prefix) in [(home.runs(), "runs"), (home.reviews(), "reviews")] {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if entry.path().join(JOURNAL_NAME).is_file() {
                out.push(format!(
                    "{prefix}/{}/{JOURNAL_NAME}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    out.sort();
    out
}

/// What the verified home ledger records of one run (issue 31 item 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRecord {
    /// The `inputs_sha256` its `ledger.run_started` entry signs (its journal's first
    /// receipt's `request_hash`).
    pub started: Option<String>,
    /// The tree size and root its `ledger.run_closed` entry signs.
    pub closed: Option<(u64, String)>,
    /// The tree size and root of each `ledger.run_checkpoint` entry, in ledger order.
    pub checkpoints: Vec<(u64, String)>,
    /// The side effects its `executing` checkpoints name, in ledger order: each started.
    pub starting: Vec<Starting>,
    /// Its `ledger.run_started` entry was written by `craik ledger rebuild`: the ledger vouches
    /// for the journal only from then.
    pub rebuilt: bool,
    /// Journals of the home the ledger does not name (other than this run's, one a run is
    /// starting with, and one holding a single receipt, a start a crash cut short): a ledger
    /// older than the home (outside testing round 14: an older ledger put back with a run
    /// directory let it use its approval again, though a newer journal sat beside it).
    pub unnamed: Vec<String>,
}

impl RunRecord {
    /// Whether a journal whose receipts' leaf hashes are `leaves` extends every checkpoint
    /// the ledger records of its run; `Err` names the first it does not.
    pub fn extended_by(&self, leaves: &[[u8; 32]]) -> Result<(), String> {
        for (size, root) in &self.checkpoints {
            let here = usize::try_from(*size)
                .ok()
                .and_then(|n| leaves.get(..n))
                .map(|prefix| {
                    format!(
                        "sha256:{}",
                        craik_kernel::to_hex(&craik_kernel::tree_root(prefix))
                    )
                });
            match here {
                Some(r) if r == *root => {}
                Some(r) => {
                    return Err(format!(
                        "the home ledger records this run's journal at {size} receipts with root {root}; its first {size} receipts here have root {r}"
                    ));
                }
                None => {
                    return Err(format!(
                        "the home ledger records this run's journal at {size} receipts (root {root}); it holds only {} here",
                        leaves.len()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What the home's ledger records of `run_id`, read only after the whole ledger verifies with
/// `keys` (and the keys its rotations vouch for); `None` when the home has no ledger (or an
/// empty one: a first append killed after creating it). A ledger that does not verify is an
/// error: the host acts on nothing it cannot check.
pub fn run_record(root: &Path, keys: &KeyRing, run_id: &str) -> Result<Option<RunRecord>, Error> {
    let Some((entries, unnamed)) = settled(root, keys, &run_journal(run_id))? else {
        return Ok(None);
    };
    let mut record = RunRecord {
        unnamed,
        ..RunRecord::default()
    };
    for r in entries.iter().filter(|r| r.target == run_id) {
        let m = &r.result.metadata.0;
        match r.capability.as_str() {
            RUN_STARTED => {
                record.started = m
                    .get("inputs_sha256")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                record.rebuilt = m.get("rebuilt") == Some(&Value::Bool(true));
            }
            RUN_CLOSED => {
                let size = m.get("tree_size").and_then(Value::as_u64);
                let root = m.get("root_hash").and_then(Value::as_str);
                record.closed = size.zip(root).map(|(s, r)| (s, r.to_owned()));
            }
            RUN_CHECKPOINT => {
                let size = m.get("tree_size").and_then(Value::as_u64);
                let root = m.get("root_hash").and_then(Value::as_str);
                record
                    .checkpoints
                    .extend(size.zip(root).map(|(s, r)| (s, r.to_owned())));
                let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
                if let Some(action) = text("action") {
                    record.starting.push(Starting {
                        action,
                        pre: text("pre"),
                        post: text("post"),
                        findings: text("findings_sha256"),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(Some(record))
}

/// The verified ledger's entries and the journals of the home it does not name (other than
/// `own`), read again for a short while when every one of those is being written (another
/// command's decision or run one append away from its entry: outside testing round 15, a
/// resume beside a concurrent approval was refused as "older ledger"). `None`: no ledger.
#[allow(clippy::type_complexity, reason = "a pair read at one moment")]
fn settled(
    root: &Path,
    keys: &KeyRing,
    own: &str,
) -> Result<Option<(Vec<ReceiptPayload>, Vec<String>)>, Error> {
    let started = std::time::Instant::now();
    loop {
        let Some(entries) = verified_entries(root, keys)? else {
            return Ok(None);
        };
        let unnamed = unnamed_in(root, &entries, own);
        let live = !unnamed.is_empty()
            && unnamed
                .iter()
                .all(|j| being_written(&root.join(j)).is_some());
        if !live || started.elapsed() >= LIVE_WINDOW {
            return Ok(Some((entries, unnamed)));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The journals of the home at `root` that `entries` (a verified ledger's) do not name, other
/// than `own` — a run's being started or cut short at its start included: [`settled`] waits
/// for one a live process is naming, and one a crash cut short stops decisions until
/// `craik runs recover` records it (outside testing round 17 N10: a newer run's journal cut
/// to its first line passed as "starting", and a denial the cut ledger lost was overturned).
fn unnamed_in(root: &Path, entries: &[ReceiptPayload], own: &str) -> Vec<String> {
    let named: BTreeSet<String> = entries
        .iter()
        .filter_map(|r| match r.capability.as_str() {
            RUN_STARTED | RUN_CLOSED | RUN_CHECKPOINT => Some(run_journal(&r.target)),
            REVIEW_CLOSED => Some(review_journal(&r.target)),
            _ => None,
        })
        .collect();
    journals_on_disk(&Home::new(root))
        .into_iter()
        .filter(|j| j != own && !named.contains(j))
        .collect()
}

/// What the verified home ledger says of review journal `review_id`, against the journal on
/// disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewState {
    /// The home has no ledger (or an empty one).
    NoLedger,
    /// The ledger records no review of this id.
    NotRecorded,
    /// The ledger records it, and the journal on disk closes at the recorded root.
    Matches,
    /// The ledger records it at `root`, and the journal on disk is missing or closes
    /// elsewhere: a decision deleted or replaced (outside testing round 14: a deleted denial
    /// was decided again as an approval, and the denied write ran).
    Differs { root: String },
    /// The ledger does not name journals the home holds (`unnamed`, the first): it is older
    /// than the home — cut or put back — so what it does not record may have been decided
    /// (outside testing round 15: a ledger cut before a denial's entry let it be decided
    /// again).
    OlderThanHome { unnamed: String },
}

/// [`ReviewState`] of review `review_id` (the whole ledger verified first).
pub fn review_state(root: &Path, keys: &KeyRing, review_id: &str) -> Result<ReviewState, Error> {
    let Some((entries, unnamed)) = settled(root, keys, &review_journal(review_id))? else {
        return Ok(ReviewState::NoLedger);
    };
    let Some(recorded) = entries
        .iter()
        .find(|r| r.capability == REVIEW_CLOSED && r.target == review_id)
        .map(|r| r.request_hash.clone())
    else {
        if let Some(first) = unnamed.first() {
            return Ok(ReviewState::OlderThanHome {
                unnamed: first.clone(),
            });
        }
        return Ok(ReviewState::NotRecorded);
    };
    let here = last_checkpoint(&root.join(review_journal(review_id)))
        .filter(|c| c.is_final)
        .map(|c| c.root_hash);
    Ok(if here.as_deref() == Some(recorded.as_str()) {
        ReviewState::Matches
    } else {
        ReviewState::Differs { root: recorded }
    })
}

/// Every entry of the home's ledger, after the whole ledger verified (`None`: no ledger, or
/// an empty one).
fn verified_entries(root: &Path, keys: &KeyRing) -> Result<Option<Vec<ReceiptPayload>>, Error> {
    let path = root.join(LEDGER_NAME);
    let bytes = match fs::read(&path) {
        Ok(b) if b.is_empty() => return Ok(None),
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    // A torn last line (an append cut short, never acknowledged) is the next append's to move
    // aside; what is complete must verify.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let bytes = bytes.get(..complete).unwrap_or_default();
    let refuse = |why: String| {
        Error::invalid(
            format!(
                "{}: the home ledger does not verify ({why}); nothing is continued against it: check the home with `craik receipts verify {}`",
                path.display(),
                root.display()
            ),
            Vec::new(),
        )
    };
    // The key history's structure holds (every key change is a rotation entry), and the last
    // checkpoint is signed by a key this home trusts: its signed Merkle root commits to every
    // entry's payload, and every line is hashed and chained against it — one signature check,
    // whatever the ledger's size (issue 31 item 1: these checks cost ≤ 5 % of a run; a full
    // verification of every signature is `receipts verify HOME`'s).
    key_history(bytes, keys).map_err(refuse)?;
    if !bytes.is_empty() {
        JournalWriter::resume_at_checkpoint(LEDGER_ID, bytes, keys, 1).map_err(refuse)?;
    }
    Ok(Some(
        decode_all(bytes)
            .into_iter()
            .filter_map(|(_, d)| match d {
                Decoded::Receipt(r) => Some(*r),
                _ => None,
            })
            .collect(),
    ))
}

/// What the ledger names: a journal (relative path) → (line, seq, kind) of the entry that
/// names it, and its recorded close (tree size, root, line).
#[derive(Debug, Default)]
struct Named {
    named_at: Option<(usize, u64)>,
    closed: Option<(u64, String, usize)>,
    /// Its `ledger.run_checkpoint` entries: tree size, root, ledger line.
    points: Vec<(u64, String, usize)>,
}

/// What is wrong when the open journal at `path` does not extend each recorded point (`None`
/// when it does, or holds none). Its receipts are hashed as written: whether they verify is
/// the journal's own check.
fn behind_ledger(path: &Path, points: &[(u64, String, usize)], shown: &str) -> Option<String> {
    if points.is_empty() {
        return None;
    }
    let leaves = match fs::read(path) {
        Ok(bytes) => {
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            match craik_kernel::JournalTree::from_verified(
                bytes.get(..complete).unwrap_or_default(),
            ) {
                Ok(tree) => tree.leaves,
                Err(why) => return Some(format!("cannot be read against the ledger: {why}")),
            }
        }
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    let record = RunRecord {
        checkpoints: points.iter().map(|(s, r, _)| (*s, r.clone())).collect(),
        ..RunRecord::default()
    };
    record.extended_by(&leaves).err().map(|why| {
        let line = points.last().map_or(0, |p| p.2);
        format!("{why} (ledger {shown}:{line}): put back from an earlier copy, cut or rewritten")
    })
}

/// Verifies the home's ledger with `keys`, then checks it against the journals on disk:
/// every journal it names exists and ends at its recorded close (a journal it records as not
/// yet closed must not be closed), and every journal on disk is named.
///
/// A home with a run going is checked at a consistent point (issue 31 item 6: a verifier
/// polling a live home reported 4 of 113 healthy states INVALID). The ledger is read before
/// the journals are listed, so a journal it names was on disk when it was named; and the two
/// moments a journal is ahead of the ledger by design (its first receipt written, its
/// `ledger.run_started` not yet; its final checkpoint written, its `ledger.run_closed` not
/// yet) last one ledger append: a problem about a journal whose run a live process drives, or
/// that was written in the last [`LIVE_WINDOW`], is checked again after a short wait, up to
/// that window, then reported with what holds it. Waiting never hides a problem: one that
/// persists is reported like any other.
pub fn check_home(home: &Home, keys: &KeyRing, threads: usize) -> HomeCheck {
    let started = std::time::Instant::now();
    loop {
        let mut check = check_home_once(home, keys, threads);
        let live: Vec<(usize, Option<String>)> = check
            .problems
            .iter()
            .enumerate()
            .filter_map(|(i, p)| being_written(&p.journal).map(|pid| (i, pid)))
            .collect();
        if live.is_empty() {
            return check;
        }
        if started.elapsed() >= LIVE_WINDOW {
            for (i, pid) in live {
                if let (Some(problem), Some(pid)) = (check.problems.get_mut(i), pid) {
                    problem.why.push_str(&format!(
                        " (process {pid} still drives this run: if it is writing, verify again once it ends)"
                    ));
                }
            }
            return check;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// How long [`check_home`] waits for a live writer to reach a consistent point.
pub const LIVE_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// How recently a journal no live process drives must have been written to be waited for (a
/// review journal's decision is one ledger append away from its entry).
const RECENT: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the journal at `path` may be mid-way between a write and its ledger entry: its run
/// is driven by a live process (`Some(Some(pid))`), or it was modified within [`RECENT`]
/// (`Some(None)`; an empty one within [`LIVE_WINDOW`]).
pub fn being_written(path: &Path) -> Option<Option<String>> {
    let dir = path.parent()?;
    let held = |p: &Path| {
        File::open(p).is_ok_and(|f| {
            rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
        })
    };
    if held(dir) || held(&dir.join(crate::run::store::LOCK)) {
        let pid = fs::read_to_string(dir.join(crate::run::store::LOCK)).unwrap_or_default();
        return Some(Some(pid.trim().to_owned()).filter(|p| !p.is_empty()));
    }
    let meta = fs::metadata(path).ok()?;
    let age = std::time::SystemTime::now()
        .duration_since(meta.modified().ok()?)
        .unwrap_or_default();
    // A journal just made and not yet filled (its directory synced before its first line:
    // slow on a loaded disk, outside testing round 17) is waited for as long as any writer.
    let window = if meta.len() == 0 { LIVE_WINDOW } else { RECENT };
    (age < window).then_some(None)
}

/// A home without a ledger (or with an empty one): a problem when it holds journals.
fn missing_ledger(mut check: HomeCheck, on_disk: &[String], home: &Home) -> HomeCheck {
    if !on_disk.is_empty() {
        check.problems.push(Problem {
            journal: check.ledger.clone(),
            what: "ledger".into(),
            why: format!(
                "missing or empty: the home holds {} journal(s) and no ledger names them (deleted, or a home written before the ledger: `craik ledger rebuild --home {}`)",
                on_disk.len(),
                home.root.display()
            ),
        });
    }
    check
}

fn check_home_once(home: &Home, keys: &KeyRing, threads: usize) -> HomeCheck {
    let ledger = home.root.join(LEDGER_NAME);
    let mut check = HomeCheck {
        ledger: ledger.clone(),
        report: None,
        rebuilt: 0,
        problems: Vec::new(),
        ring: keys.clone(),
        journal_keys: BTreeMap::new(),
        open: Vec::new(),
        rebuilt_journals: BTreeSet::new(),
    };
    let shown = ledger.display().to_string();
    let read = fs::read(&ledger);
    // After the ledger: every journal it names was on disk before this listing.
    let on_disk = journals_on_disk(home);
    let bytes = match read {
        // An empty ledger (a first append killed right after creating it) is no ledger: what
        // a missing one means holds for it.
        Ok(b) if !b.is_empty() => b,
        Ok(_) => return missing_ledger(check, &on_disk, home),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return missing_ledger(check, &on_disk, home);
        }
        Err(e) => {
            check.problems.push(Problem {
                journal: ledger.clone(),
                what: "ledger".into(),
                why: format!("cannot read: {e}"),
            });
            return check;
        }
    };
    let history = match key_history(&bytes, keys) {
        Ok(history) => history,
        Err(why) => {
            check.problems.push(Problem {
                journal: ledger.clone(),
                what: "ledger".into(),
                why,
            });
            return check;
        }
    };
    let report = craik_kernel::verify_journal_with(
        &bytes,
        &history.ring,
        VerifyOptions {
            threads,
            allow_open: true,
            ..VerifyOptions::default()
        },
        &mut |_, _| {},
    );
    // The ring holds keys the ledger itself names: one the verifier was given must have
    // signed part of it (its lines then vouch, by the chain, for the rest).
    let trusted_holder = history
        .periods
        .iter()
        .any(|(id, _, _)| keys.get(id).is_some());
    if let Some(f) = &report.failure {
        check.problems.push(Problem {
            journal: ledger.clone(),
            what: "ledger".into(),
            why: format!("line {}: {}: {}", f.line, f.what, f.why),
        });
    } else if !trusted_holder {
        check.problems.push(Problem {
            journal: ledger.clone(),
            what: "ledger".into(),
            why: format!(
                "no line is signed by a key you trust (signed by {})",
                history
                    .periods
                    .iter()
                    .map(|(id, first, last)| format!("`{id}` at lines {first}-{last}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    } else if report.run_id.as_deref() != Some(LEDGER_ID) || report.closed {
        check.problems.push(Problem {
            journal: ledger.clone(),
            what: "ledger".into(),
            why: format!(
                "journal id `{}`{}: not a home ledger",
                report.run_id.as_deref().unwrap_or("?"),
                if report.closed { ", closed" } else { "" }
            ),
        });
    } else if !bytes.is_empty() && last_checkpoint(&ledger).is_none() {
        // Every append writes its entries and a checkpoint in one write: a ledger whose last
        // line is an entry was cut (its checkpoint removed), and what that entry says would
        // be signed by no checkpoint (issue 31 item 4).
        check.problems.push(Problem {
            journal: ledger.clone(),
            what: "ledger".into(),
            why: "its last entry has no checkpoint after it (every append ends with one): the ledger was cut or edited".into(),
        });
    }
    check.report = Some(report);
    if !check.problems.is_empty() {
        return check;
    }
    check.ring = history.ring.clone();
    let mut named: BTreeMap<String, Named> = BTreeMap::new();
    for (line, decoded) in decode_all(&bytes) {
        let Decoded::Receipt(r) = decoded else {
            continue;
        };
        let m = &r.result.metadata.0;
        if m.get("rebuilt") == Some(&Value::Bool(true)) {
            check.rebuilt += 1;
        }
        let journal = match r.capability.as_str() {
            RUN_STARTED | RUN_CLOSED | RUN_CHECKPOINT => run_journal(&r.target),
            REVIEW_CLOSED => review_journal(&r.target),
            _ => continue,
        };
        if let Some(key) = history.key_at(line) {
            check
                .journal_keys
                .entry(home.root.join(&journal))
                .or_insert_with(|| (key.to_owned(), line));
        }
        let slot = named.entry(journal).or_default();
        slot.named_at.get_or_insert((line, r.seq));
        if r.capability == RUN_CHECKPOINT {
            let size = m.get("tree_size").and_then(Value::as_u64);
            let root = m.get("root_hash").and_then(Value::as_str);
            slot.points
                .extend(size.zip(root).map(|(s, r)| (s, r.to_owned(), line)));
        } else if r.capability != RUN_STARTED {
            let size = m
                .get("tree_size")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let root = m
                .get("root_hash")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            slot.closed = Some((size, root, line));
        }
    }
    for journal in &on_disk {
        if !named.contains_key(journal) {
            check.problems.push(Problem {
                journal: home.root.join(journal),
                what: "ledger".into(),
                why: format!(
                    "not named by the ledger {shown}: the ledger was replaced by an older copy or cut short, a crash came before its entry (`craik runs recover RUN` records it), or the home predates the ledger (`craik ledger rebuild`)"
                ),
            });
        }
    }
    for (journal, n) in &named {
        let path = home.root.join(journal);
        let (line, seq) = n.named_at.unwrap_or_default();
        if !path.is_file() {
            check.problems.push(Problem {
                journal: path,
                what: "missing".into(),
                why: format!("named by the ledger {shown}:{line} (seq {seq}) but missing: deleted"),
            });
            continue;
        }
        let found = last_checkpoint(&path).filter(|c| c.is_final);
        match (&n.closed, found) {
            (Some((size, root, at)), Some(cp)) if cp.tree_size == *size && cp.root_hash == *root => {
                let _ = at;
            }
            (Some((size, root, at)), found) => check.problems.push(Problem {
                journal: path,
                what: "ledger".into(),
                why: format!(
                    "the ledger {shown}:{at} records it closed at {size} receipts, root {root}; it {}: shortened or replaced",
                    found.map_or_else(
                        || "has no closing checkpoint".to_owned(),
                        |c| format!("closes at {} receipts, root {}", c.tree_size, c.root_hash)
                    )
                ),
            }),
            (None, Some(cp)) => check.problems.push(Problem {
                journal: path,
                what: "ledger".into(),
                why: format!(
                    "closed at {} receipts but the ledger {shown} records no close: the ledger was cut short or an older copy put back, or a crash came between the two writes (`craik runs recover RUN` records it)",
                    cp.tree_size
                ),
            }),
            (None, None) => {
                // Open: it must extend every point the ledger recorded the host acting from
                // (a copy saved while parked and put back after an approval was used holds
                // fewer receipts, or others).
                if let Some(why) = behind_ledger(&path, &n.points, &shown) {
                    check.problems.push(Problem {
                        journal: path,
                        what: "ledger".into(),
                        why,
                    });
                } else {
                    check.open.push(path);
                }
            }
        }
    }
    check
}

/// What `craik keys rotate` did.
#[derive(Debug, Clone, Serialize)]
pub struct Rotated {
    /// The key retired, and where its public key is kept.
    pub retired: String,
    pub retired_public: PathBuf,
    /// The key the home signs with from now on.
    pub key: String,
    /// An interrupted rotation was finished rather than a new one made.
    pub resumed: bool,
}

/// Rotates the home's signing key, under the ledger lock throughout (no run can record its
/// start meanwhile): refused while any run the ledger records as started is not closed (its
/// journal would need two keys). A new pair is made in `keys/next/`; a `ledger.key_rotated`
/// entry, signed by the old key, names the successor and both public keys; then the old
/// public key is kept as `keys/retired/<hex>.pub.pem`, the new pair renamed over
/// `keys/signing.{key,pub}.pem` (the old private key is unlinked), `keys/next/` removed, and
/// the new key signs its `ledger.key_added` entry. A crash anywhere leaves `keys/next/`,
/// which makes every command refuse the home until `craik keys rotate` is run again: it
/// finishes a rotation the ledger records, and discards one it does not.
pub fn rotate(home: &Home, by: &str, reason: &str, now: OffsetDateTime) -> Result<Rotated, Error> {
    use crate::keys::{PRIVATE_NAME, PUBLIC_NAME};
    let root = &home.root;
    let keys_dir = root.join("keys");
    let next = keys_dir.join(crate::keys::NEXT_DIR);
    // No process may be signing with the key being retired (it would write a journal of a
    // retired key no ledger entry names); then the ledger lock, throughout.
    let _in_use = crate::keys::exclusive_key_use(&keys_dir)?;
    let held = lock(root)?;
    let path = root.join(LEDGER_NAME);
    let bytes = read_repaired(&path)?;
    let mut resumed = false;
    if next.exists() {
        // Resumed only when what `next/` holds is the successor the ledger's LAST rotation
        // names (issue 31: a second rotation killed between the new private key and its public
        // half took the current key — an earlier rotation's successor — for the pending one,
        // and moved the unrecorded key over it).
        let pending = pending_successor(&next, &keys_dir);
        let last = rotations(&bytes).into_iter().last().map(|(new, _, _)| new);
        // An empty `next/` with the last successor in place is a hand-over cut short only
        // until that key's first entry: once the ledger records it (the hand-over's last
        // step), `next/` was made by a later rotation killed at once, which took nothing
        // over (outside testing round 17 N4: it was reported as the earlier rotation
        // finishing, and the rotation asked for never happened).
        let empty = fs::read_dir(&next).is_ok_and(|mut d| d.next().is_none());
        let handed_over = pending
            .as_ref()
            .is_some_and(|id| recorded(&bytes).contains_key(&(KEY_ADDED.to_owned(), id.clone())));
        if pending.is_some() && pending == last && !(empty && handed_over) {
            resumed = true;
        } else {
            // Never recorded: it never took effect.
            fs::remove_dir_all(&next).map_err(io(&next))?;
        }
    }
    if !resumed {
        let recorded = recorded(&bytes);
        let open: Vec<&str> = recorded
            .named
            .keys()
            .filter(|(kind, run)| {
                kind == RUN_STARTED && !recorded.contains_key(&(RUN_CLOSED.to_owned(), run.clone()))
            })
            .map(|(_, run)| run.as_str())
            .collect();
        if !open.is_empty() {
            return Err(Error::refused(format!(
                "{}: run(s) {} not closed: a key rotation waits until every run has ended (finish, cancel or `craik runs recover` them); a run's journal is signed by one key",
                path.display(),
                open.iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let old = crate::keys::read_signer(&keys_dir.join(PRIVATE_NAME))?;
        let (_, _, successor) = crate::keys::create_pair(&next)?;
        append(
            &held,
            root,
            &old,
            now,
            vec![Entry::key_rotated(
                &old.public_key(),
                &successor,
                by,
                reason,
            )],
        )?;
    }
    // From here the ledger names the successor: finish the hand-over from what it records —
    // its last rotation, and only with the key it names.
    let now_bytes = fs::read(&path).map_err(io(&path))?;
    let Some((new_id, retired_id, retired_hex)) = rotations(&now_bytes).into_iter().last() else {
        return Err(Error::internal(format!(
            "{}: records no rotation",
            path.display()
        )));
    };
    if pending_successor(&next, &keys_dir).as_deref() != Some(new_id.as_str()) {
        return Err(Error::internal(format!(
            "{}: does not hold the successor `{new_id}` the ledger's last rotation names; no key was moved",
            next.display()
        )));
    }
    let retired_dir = keys_dir.join(crate::keys::RETIRED_DIR);
    fs::create_dir_all(&retired_dir).map_err(io(&retired_dir))?;
    let retired_public = retired_dir.join(format!(
        "{}.pub.pem",
        retired_id.trim_start_matches("sha256:")
    ));
    if !retired_public.exists() {
        let bytes: Vec<u8> = (0..retired_hex.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(retired_hex.get(i..i + 2)?, 16).ok())
            .collect();
        let public = <[u8; 32]>::try_from(bytes)
            .map_err(|_| Error::internal(format!("{}: a malformed retired key", path.display())))?;
        crate::keys::write_public(&retired_public, &public)?;
    }
    for name in [PRIVATE_NAME, PUBLIC_NAME] {
        let from = next.join(name);
        if from.exists() {
            fs::rename(&from, keys_dir.join(name)).map_err(io(&from))?;
            crate::fsio::durable_point();
        }
    }
    sync_dir(&keys_dir).map_err(io(&keys_dir))?;
    if next.exists() {
        fs::remove_dir(&next).map_err(io(&next))?;
        crate::fsio::durable_point();
        sync_dir(&keys_dir).map_err(io(&keys_dir))?;
    }
    let signer = crate::keys::read_signer(&keys_dir.join(PRIVATE_NAME))?;
    if signer.key_id() != new_id {
        return Err(Error::internal(format!(
            "{}: holds key `{}`, the ledger's successor is `{new_id}`",
            keys_dir.display(),
            signer.key_id()
        )));
    }
    append(&held, root, &signer, now, Vec::new())?;
    Ok(Rotated {
        retired: retired_id,
        retired_public,
        key: new_id,
        resumed,
    })
}

/// The key id of the successor a rotation left in `next/`, from what `next/` holds alone: its
/// private key (which must parse: a torn one is no successor), else its public key (the
/// private one already moved into place), else — `next/` empty, both moved — the key now in
/// place. Never the current key while `next/` holds a file of its own.
fn pending_successor(next: &Path, keys_dir: &Path) -> Option<String> {
    use crate::keys::{PRIVATE_NAME, PUBLIC_NAME};
    let private = next.join(PRIVATE_NAME);
    if fs::symlink_metadata(&private).is_ok() {
        return crate::keys::read_signer(&private)
            .ok()
            .map(|s| s.key_id().to_owned());
    }
    let public = next.join(PUBLIC_NAME);
    if fs::symlink_metadata(&public).is_ok() {
        return crate::keys::read_public(&public)
            .ok()
            .map(|p| craik_kernel::key_id_of(&p));
    }
    if fs::read_dir(next).ok()?.next().is_some() {
        return None;
    }
    crate::keys::read_signer(&keys_dir.join(PRIVATE_NAME))
        .ok()
        .map(|s| s.key_id().to_owned())
}

/// Every rotation a ledger's bytes record: (successor, retired key id, retired public key
/// hex), in order.
fn rotations(bytes: &[u8]) -> Vec<(String, String, String)> {
    decode_all(bytes)
        .into_iter()
        .filter_map(|(_, d)| match d {
            Decoded::Receipt(r) if r.capability == KEY_ROTATED => {
                let m = &r.result.metadata.0;
                let text = |k: &str| {
                    m.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                Some((
                    r.target.clone(),
                    text("retired_key_id"),
                    text("retired_public_key"),
                ))
            }
            _ => None,
        })
        .collect()
}

/// What `craik ledger rebuild` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rebuilt {
    pub ledger: PathBuf,
    /// Entries appended, one line each (`kind target`).
    pub recorded: Vec<String>,
    /// Journals it could not vouch for and left unrecorded, with why.
    pub refused: Vec<String>,
}

/// Records in the home's ledger every journal on disk it does not name yet (a home written
/// before the ledger, or an entry a crash lost), each entry marked `rebuilt: true`: the
/// ledger vouches for them only from now on. Journals that do not verify under `keys` are
/// left out and listed. An existing ledger must verify first.
pub fn rebuild(
    home: &Home,
    signer: &Ed25519Signer,
    keys: &KeyRing,
    now: OffsetDateTime,
) -> Result<Rebuilt, Error> {
    let path = home.root.join(LEDGER_NAME);
    // Journals the ledger names verify with the key it vouches for at the time (closed
    // before a key rotation: a retired key); one it does not name only with the current key:
    // a journal of a retired key the ledger never named cannot be vouched for once that key
    // is retired (its private half may be what was lost; outside testing round 6).
    let mut ring = keys.clone();
    let mut named = Recorded::default();
    // When the ledger's first entry was signed: a journal begun after it, that it does not
    // name, was written while the ledger existed — the ledger was cut or put back, and the
    // rebuild would bless what it lost (outside testing round 14/15).
    let mut ledger_began: Option<OffsetDateTime> = None;
    // An empty ledger (a first append killed right after creating it) is no ledger.
    if path.is_file() && fs::metadata(&path).map_err(io(&path))?.len() > 0 {
        let bytes = fs::read(&path).map_err(io(&path))?;
        let whole = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .and_then(|end| bytes.get(..=end))
            .unwrap_or_default();
        ring = key_history(whole, keys)
            .map_err(|why| {
                Error::invalid(
                    format!("{}: {why}; nothing was rebuilt", path.display()),
                    Vec::new(),
                )
            })?
            .ring;
        named = recorded(whole);
        ledger_began = decode_all(whole).into_iter().find_map(|(_, d)| match d {
            Decoded::Receipt(r) => time::OffsetDateTime::parse(
                &r.created_at,
                &time::format_description::well_known::Rfc3339,
            )
            .ok(),
            _ => None,
        });
        let report = craik_kernel::verify_open_journal(whole, &ring);
        if let Some(f) = report.failure {
            return Err(Error::invalid(
                format!(
                    "{}:{}: the ledger does not verify ({}: {}); nothing was rebuilt: move it aside to rebuild from the journals alone",
                    path.display(),
                    f.line,
                    f.what,
                    f.why
                ),
                Vec::new(),
            ));
        }
    }
    let mut out = Rebuilt {
        ledger: path,
        ..Rebuilt::default()
    };
    let mut entries = Vec::new();
    for journal in journals_on_disk(home) {
        let file = home.root.join(&journal);
        let bytes = fs::read(&file).map_err(io(&file))?;
        let is_named = journal.split('/').nth(1).is_some_and(|id| {
            [RUN_STARTED, REVIEW_CLOSED]
                .iter()
                .any(|kind| named.contains_key(&((*kind).to_owned(), id.to_owned())))
        });
        let verify = |ring: &KeyRing| craik_kernel::verify_open_journal(&bytes, ring);
        let report = verify(if is_named { &ring } else { keys });
        if report.failure.is_some() && !is_named && verify(&ring).failure.is_none() {
            out.refused.push(format!(
                "{}: signed by a retired key and named by no ledger entry: a journal of a retired key cannot be vouched for once the key is retired; not recorded",
                file.display()
            ));
            continue;
        }
        if let Some(f) = report.failure {
            out.refused.push(format!(
                "{}:{}: does not verify ({}: {}); not recorded",
                file.display(),
                f.line,
                f.what,
                f.why
            ));
            continue;
        }
        // The journal must be where its signed id says: `runs/<run id>/`, or
        // `reviews/<id>/` for the journal id `run_<id>` (outside testing round 7: a review
        // journal copied under another approval id was recorded under that name).
        let expected = journal.split('/').nth(1).map(|dir| {
            if journal.starts_with("reviews/") {
                format!("run_{dir}")
            } else {
                dir.to_owned()
            }
        });
        if report.run_id.is_none() || report.run_id != expected {
            out.refused.push(format!(
                "{}: its signed journal id `{}` does not name this directory; not recorded",
                file.display(),
                report.run_id.as_deref().unwrap_or("none")
            ));
            continue;
        }
        let receipts: Vec<ReceiptPayload> = decode_all(&bytes)
            .into_iter()
            .filter_map(|(_, d)| match d {
                Decoded::Receipt(r) => Some(*r),
                _ => None,
            })
            .collect();
        let Some(first) = receipts.first() else {
            out.refused.push(format!(
                "{}: holds no receipt; not recorded",
                file.display()
            ));
            continue;
        };
        let begun = time::OffsetDateTime::parse(
            &first.created_at,
            &time::format_description::well_known::Rfc3339,
        )
        .ok();
        if let (Some(ledger), Some(begun)) = (ledger_began, begun)
            && begun >= ledger
        {
            out.refused.push(format!(
                "{}: begun {} while the ledger existed (its first entry {}), and not named by it: the ledger was cut or an older copy put back, and recording it would bless what the ledger lost; not recorded (a run killed at its start is recorded by `craik runs recover RUN`; a killed decision is finished by running it again)",
                file.display(),
                first.created_at,
                ledger
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            ));
            continue;
        }
        let checkpoint = last_checkpoint(&file).filter(|c| c.is_final);
        if let Some(review) = journal
            .strip_prefix("reviews/")
            .and_then(|r| r.split('/').next())
        {
            match checkpoint {
                Some(cp) => entries.push(Entry::review_closed(review, first, &cp).rebuilt()),
                None => out.refused.push(format!(
                    "{}: a review journal that is not closed; not recorded",
                    file.display()
                )),
            }
            continue;
        }
        let operator = first
            .result
            .metadata
            .0
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned();
        entries.push(Entry::run_started(first, &operator).rebuilt());
        if let Some(cp) = checkpoint {
            let ending = receipts
                .iter()
                .rev()
                .find(|r| r.capability == crate::run::signed::RUN_CLOSED)
                .and_then(|r| {
                    r.result
                        .metadata
                        .0
                        .get("status")
                        .and_then(Value::as_str)
                        .map(|s| (s.to_owned(), r.reason.clone()))
                });
            entries.push(
                Entry::run_closed(
                    first,
                    &cp,
                    ending.as_ref().map(|(s, r)| (s.as_str(), r.as_str())),
                )
                .rebuilt(),
            );
        }
    }
    let before = fs::read(home.root.join(LEDGER_NAME)).unwrap_or_default();
    let seen = recorded(&before);
    let fresh: Vec<Entry> = entries
        .into_iter()
        .filter(|e| !seen.contains_key(&e.key()))
        .collect();
    for e in &fresh {
        out.recorded.push(format!("{} {}", e.kind, e.target));
    }
    if !seen.contains_key(&(KEY_ADDED.to_owned(), signer.key_id().to_owned())) {
        out.recorded
            .insert(0, format!("{KEY_ADDED} {}", signer.key_id()));
    }
    record(&home.root, signer, now, fresh)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: &'static str, run: &str, size: Option<u64>, hash: &str) -> Entry {
        let mut pairs = vec![("run_id", json!(run))];
        if let Some(size) = size {
            pairs.push(("tree_size", json!(size)));
        }
        Entry {
            kind,
            target: run.to_owned(),
            task_id: "task".into(),
            actor: "host".into(),
            profile: PolicyProfile::Strict,
            policy_set: "sha256:00".into(),
            request_hash: hash.to_owned(),
            reason: "test".into(),
            metadata: meta(&pairs),
        }
    }

    fn admits(seen: &Recorded, e: &Entry) -> &'static str {
        match seen.admit(e) {
            Admit::New => "new",
            Admit::Same => "same",
            Admit::Conflict(_) => "conflict",
        }
    }

    #[test]
    fn a_run_keeps_only_its_latest_checkpoint_and_none_once_closed() {
        let mut seen = Recorded::default();
        seen.fold(RUN_STARTED, "r", None, "inputs");
        for size in [3, 5, 9] {
            seen.fold(RUN_CHECKPOINT, "r", Some(size), &format!("root{size}"));
        }
        assert_eq!(seen.latest.get("r"), Some(&(9, "root9".to_owned())));
        let cp = |size, hash| entry(RUN_CHECKPOINT, "r", Some(size), hash);
        assert_eq!(admits(&seen, &cp(9, "root9")), "same");
        assert_eq!(admits(&seen, &cp(9, "other")), "conflict");
        // Behind the latest point: a copy cut back, never a repeat (sizes only grow).
        assert_eq!(admits(&seen, &cp(5, "root5")), "conflict");
        assert_eq!(admits(&seen, &cp(10, "root10")), "new");
        assert_eq!(
            admits(&seen, &entry(RUN_STARTED, "r", None, "inputs")),
            "same"
        );
        assert_eq!(
            admits(&seen, &entry(RUN_STARTED, "r", None, "x")),
            "conflict"
        );

        seen.fold(RUN_CLOSED, "r", Some(12), "root12");
        assert!(seen.latest.is_empty(), "a closed run keeps no checkpoint");
        assert_eq!(admits(&seen, &cp(13, "root13")), "conflict");
        assert_eq!(
            admits(&seen, &entry(RUN_CLOSED, "r", Some(12), "root12")),
            "same"
        );
        // A checkpoint folded after the close (never written so) stays out.
        seen.fold(RUN_CHECKPOINT, "r", Some(14), "root14");
        assert!(seen.latest.is_empty());
    }

    #[test]
    fn the_head_stays_the_size_of_the_runs_not_of_their_checkpoints() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let signer = Ed25519Signer::from_seed(&[7; 32]);
        let now = OffsetDateTime::UNIX_EPOCH;
        let head = || fs::metadata(root.join(HEAD_NAME)).expect("head").len();
        // A home with history: 40 runs started and closed.
        for i in 0..40 {
            let old = format!("old{i}");
            let entries = vec![
                entry(RUN_STARTED, &old, None, "inputs"),
                entry(RUN_CLOSED, &old, Some(3), "closed"),
            ];
            record(root, &signer, now, entries).expect("history");
        }
        record(
            root,
            &signer,
            now,
            vec![entry(RUN_STARTED, "r", None, "inputs")],
        )
        .expect("start");
        let mut sizes = Vec::new();
        for size in 1..=60_u64 {
            let written = record(
                root,
                &signer,
                now,
                vec![entry(
                    RUN_CHECKPOINT,
                    "r",
                    Some(size),
                    &format!("root{size}"),
                )],
            )
            .expect("checkpoint");
            assert_eq!(written, 1);
            sizes.push(head());
        }
        // What the head records stays two entries and one latest point; only its Merkle
        // nodes vary (one per set bit of the entry count).
        let signed: Head =
            serde_json::from_slice(&fs::read(root.join(HEAD_NAME)).expect("read")).expect("head");
        let body: HeadBody = serde_json::from_str(&signed.body).expect("body");
        assert_eq!(
            (body.keys.len(), body.open.len(), body.latest.len()),
            (1, 1, 1),
            "{sizes:?}"
        );
        assert!(
            sizes.iter().all(|s| *s < 1200),
            "head grew with checkpoints: {sizes:?}"
        );
        // A repeat is skipped, a point behind the latest refused, both through the head.
        let again = vec![entry(RUN_CHECKPOINT, "r", Some(60), "root60")];
        assert_eq!(record(root, &signer, now, again).expect("repeat"), 0);
        let behind = vec![entry(RUN_CHECKPOINT, "r", Some(59), "root59")];
        assert!(record(root, &signer, now, behind.clone()).is_err());
        // And so without the head (the full read folds the same way).
        fs::remove_file(root.join(HEAD_NAME)).expect("rm head");
        assert!(record(root, &signer, now, behind).is_err());
        record(
            root,
            &signer,
            now,
            vec![entry(RUN_CLOSED, "r", Some(61), "root61")],
        )
        .expect("close");
        let after = vec![entry(RUN_CHECKPOINT, "r", Some(62), "root62")];
        assert!(record(root, &signer, now, after).is_err());
        // What the head leaves out (closed runs) is decided by the full read: a repeat is
        // skipped, a second start of a closed run refused.
        let repeat = vec![entry(RUN_STARTED, "old3", None, "inputs")];
        assert_eq!(record(root, &signer, now, repeat).expect("repeat"), 0);
        let fork = vec![entry(RUN_STARTED, "old3", None, "other")];
        assert!(record(root, &signer, now, fork).is_err());
        let reopened = vec![entry(RUN_CHECKPOINT, "old3", Some(4), "root4")];
        assert!(record(root, &signer, now, reopened).is_err());
    }

    #[test]
    fn the_head_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("home");
        fs::create_dir(&root).expect("home");
        let signer = Ed25519Signer::from_seed(&[9; 32]);
        let now = OffsetDateTime::UNIX_EPOCH;
        let victim = dir.path().join("victim");
        let step = |n: u64| {
            let e = entry(RUN_CHECKPOINT, "r", Some(n), &format!("root{n}"));
            record(&root, &signer, now, vec![e]).expect("append");
        };
        record(
            &root,
            &signer,
            now,
            vec![entry(RUN_STARTED, "r", None, "in")],
        )
        .expect("start");
        for (n, link) in [(1, "hard"), (2, "symbolic"), (3, "fifo"), (4, "/dev/zero")] {
            fs::write(&victim, b"precious").expect("victim");
            let head = root.join(HEAD_NAME);
            let _ = fs::remove_file(&head);
            match link {
                "hard" => fs::hard_link(&victim, &head).expect("link"),
                "fifo" => rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &head,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
                    0,
                )
                .expect("fifo"),
                "/dev/zero" => std::os::unix::fs::symlink("/dev/zero", &head).expect("symlink"),
                _ => std::os::unix::fs::symlink(&victim, &head).expect("symlink"),
            }
            step(n);
            assert_eq!(fs::read(&victim).expect("read"), b"precious", "{link}");
            let meta = fs::symlink_metadata(&head).expect("head");
            assert!(
                meta.is_file(),
                "{link}: the head is a file of its own again"
            );
        }
        // The head written in place is believed by the next append (no full read needed to
        // decide: a repeat is skipped).
        step(5);
        step(5);
    }
}
