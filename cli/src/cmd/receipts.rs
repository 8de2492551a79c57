//! `craik receipts verify|list|show`: auditors' view of signed journals.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use craik_kernel::{
    Envelope, KeyRing, RECEIPT_PAYLOAD_TYPE, ReceiptPayload, Report, Verifier, VerifyOptions,
};
use serde::Serialize;

use crate::cmd::keys::default_public;
use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

pub(crate) use craik_host::journal::{Decoded, JOURNAL_NAME, decode_all};

/// Journals named by `paths`: files as given; a directory holding `receipts.jsonl`; or every
/// `*/receipts.jsonl` one level below a directory (a `runs/` directory).
fn journals(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_file() {
            out.push(path.clone());
        } else if path.join(JOURNAL_NAME).is_file() {
            out.push(path.join(JOURNAL_NAME));
        } else if path.is_dir() {
            let runs = if path.join("runs").is_dir() {
                path.join("runs")
            } else {
                path.clone()
            };
            let found = run_journals(&runs)?;
            // A home whose runs were all deleted still has its ledger to say so.
            let ledger = path.join(craik_host::ledger::LEDGER_NAME);
            if found.is_empty() && !(runs != *path && ledger.is_file()) {
                return Err(Failure::usage(format!(
                    "{}: no {JOURNAL_NAME} found",
                    path.display()
                )));
            }
            out.extend(found);
            // A home: its review journals too (each approval's own signed decision), and its
            // signed audit summaries.
            for sub in ["reviews", "audits"] {
                if runs != *path
                    && let Ok(entries) = std::fs::read_dir(path.join(sub))
                {
                    let mut found: Vec<PathBuf> = entries
                        .filter_map(Result::ok)
                        .map(|e| e.path().join(JOURNAL_NAME))
                        .filter(|p| p.is_file())
                        .collect();
                    found.sort();
                    out.extend(found);
                }
            }
        } else {
            return Err(Failure::usage(format!(
                "{}: no such file or directory",
                path.display()
            )));
        }
    }
    Ok(out)
}

/// Every `*/receipts.jsonl` one level below `runs` (a `runs/` directory), sorted.
pub(crate) fn run_journals(runs: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(runs)
        .map_err(|e| Failure::usage(format!("{}: cannot list: {e}", runs.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path().join(JOURNAL_NAME))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

#[derive(Serialize)]
struct Verified {
    path: String,
    #[serde(flatten)]
    report: Report,
    /// The home ledger names this journal only through `craik ledger rebuild` (issue 31 item
    /// 4): it vouches for it from the rebuild on, not from when the journal was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    rebuilt: bool,
}

/// A check on what a journal binds that failed: the journal line of the receipt concerned,
/// what, and why.
type Unbound = (usize, &'static str, String);

/// For a run's journal (`<home>/runs/<run>/receipts.jsonl`), what its receipts bind that
/// does not hold, at the line of the receipt concerned: `inputs.json` is not what the
/// `run.inputs` receipt signs (naming the field); a receipt decided by an approval whose
/// review journal (`<home>/reviews/<approval>/`) does not verify under `ring` or does not
/// name this run, this request and this approver; an `approval.review` receipt its review
/// journal does not back (decision, reviewer, request, review hash); a memory proposal the run
/// made whose file disagrees with its signed review. Read line by line, so memory stays flat.
fn unbound(journal: &Path, ring: &KeyRing) -> Option<Unbound> {
    use std::io::BufRead;
    let run_dir = journal.parent()?;
    let run_id = run_dir.file_name()?.to_str()?.to_owned();
    let runs = run_dir.parent()?;
    if !run_id.starts_with("run_") || runs.file_name()? != "runs" {
        return None;
    }
    let home = craik_host::run::store::Home::new(runs.parent()?);
    // First pass: the content each memory proposal was signed with when proposed (a step
    // re-asked after a crash may have signed it twice).
    let mut proposed: std::collections::BTreeMap<String, Vec<String>> =
        std::collections::BTreeMap::new();
    let file = std::fs::File::open(journal).ok()?;
    for line in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
    {
        for (_, decoded) in decode_all(&line) {
            if let Decoded::Receipt(r) = decoded
                && let Some(id) = r.action.as_deref().filter(|a| a.starts_with("memprop_"))
            {
                let found = craik_host::run::memory::proposed_contents([&*r], id);
                proposed.entry(id.to_owned()).or_default().extend(found);
            }
        }
    }
    let file = std::fs::File::open(journal).ok()?;
    // Each approval unlocks one decision: approval id → the seq that used it.
    let mut used: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for (index, line) in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
        .enumerate()
    {
        let line_no = index + 1;
        for (_, decoded) in decode_all(&line) {
            let Decoded::Receipt(r) = decoded else {
                continue;
            };
            if r.decided_by.kind == craik_kernel::DecidedByKind::Approval
                && let Some((_, id)) = r.decided_by.by.rsplit_once(" via ")
                && let Some(first) = used.insert(id.to_owned(), r.seq)
            {
                return Some((
                    line_no,
                    "approval",
                    format!(
                        "seq {}: approval {id} already unlocked seq {first}: an approval is single-use",
                        r.seq
                    ),
                ));
            }
            if let Some((what, why)) =
                receipt_unbound(&r, (&home, run_dir, &run_id), ring, &proposed)
            {
                return Some((line_no, what, format!("seq {}: {why}", r.seq)));
            }
        }
    }
    None
}

/// What one verified receipt of run `run_id` binds that does not hold (see [`unbound`]).
fn receipt_unbound(
    r: &ReceiptPayload,
    (home, run_dir, run_id): (&craik_host::run::store::Home, &Path, &str),
    ring: &KeyRing,
    proposed: &std::collections::BTreeMap<String, Vec<String>>,
) -> Option<(&'static str, String)> {
    use craik_host::run::driver::{APPROVAL_REVIEW, RUN_INPUTS};
    // Every run's journal begins with the receipt that binds its inputs: a run journal
    // without it binds nothing (a bench or foreign journal planted under `runs/`).
    if r.seq == 0 && r.capability != RUN_INPUTS {
        return Some((
            "inputs",
            format!(
                "the run's first receipt is `{}`, not `{RUN_INPUTS}`: nothing binds the run's inputs to its journal",
                craik_contracts::one_line(&r.capability)
            ),
        ));
    }
    if r.seq == 0 {
        let inputs = run_dir.join(craik_host::run::store::INPUTS);
        return match std::fs::read(&inputs) {
            Ok(bytes) => craik_host::run::signed::inputs_mismatch(&bytes, r)
                .map(|why| ("inputs", why))
                .or_else(|| {
                    craik_host::run::signed::bound_files_mismatch(run_dir, r)
                        .map(|why| ("inputs", why))
                }),
            Err(e) => Some((
                "inputs",
                format!(
                    "{}: {e}; the run.inputs receipt signs {}",
                    craik_host::run::store::INPUTS,
                    r.request_hash
                ),
            )),
        };
    }
    if r.capability == "memory.propose" && r.decision == craik_kernel::Decision::Allow {
        let id = r.action.as_deref()?;
        if !id.starts_with("memprop_") || craik_contracts::id_problem(id).is_some() {
            return None;
        }
        let path = home.memory().join(format!("{id}.json"));
        return match std::fs::read(&path) {
            Ok(bytes) => {
                match craik_contracts::decode_single::<craik_contracts::MemoryProposal>(&bytes) {
                    Ok(m) => craik_host::run::memory::memory_tampered_given(
                        home,
                        ring,
                        &m,
                        proposed.get(id).map_or(&[][..], Vec::as_slice),
                    )
                    .map(|why| ("memory", why)),
                    Err(_) => Some((
                        "memory",
                        format!("memory/{id}.json: not a craik.memory_proposal any more"),
                    )),
                }
            }
            // Never written (redaction withheld it), or removed: only a signed review of it
            // makes its absence a finding.
            Err(_) => match craik_host::run::memory::signed_memory_review(home, ring, id) {
                Ok(None) => None,
                Ok(Some(_)) => Some((
                    "memory",
                    format!("memory/{id}.json: missing, but a signed review decided it"),
                )),
                Err(why) => Some(("memory", why)),
            },
        };
    }
    if r.decided_by.kind != craik_kernel::DecidedByKind::Approval {
        return None;
    }
    if r.capability == APPROVAL_REVIEW {
        let id = r.action.as_deref().unwrap_or_default();
        let want = r.decision == craik_kernel::Decision::Allow;
        let signed_hash = r
            .result
            .metadata
            .0
            .get("review_sha256")
            .and_then(serde_json::Value::as_str);
        return match craik_host::run::approvals::decided_review(home, ring, id, run_id) {
            Some(review)
                if review.approved == want
                    && review.approved_by == r.decided_by.by
                    && review.request_hash == r.request_hash
                    && Some(review.receipt_sha256.as_str()) == signed_hash =>
            {
                None
            }
            Some(_) => Some((
                "approval",
                format!(
                    "approval {id}'s review journal does not say what the run signed (decision, reviewer, request or review hash)"
                ),
            )),
            None => Some((
                "approval",
                format!(
                    "approval {id} has no verified review journal (reviews/{id}/) naming this run"
                ),
            )),
        };
    }
    let Some((approver, id)) = r.decided_by.by.rsplit_once(" via ") else {
        return Some(("approval", "approval receipt names no approval".into()));
    };
    match craik_host::run::approvals::signed_review(home, ring, id, run_id) {
        Some(review) if review.approved_by == approver && review.request_hash == r.request_hash => {
            // Compared as instants: the decision must be signed before the approval expired.
            let Ok(signed) = craik_contracts::Timestamp::parse(&r.created_at) else {
                return Some((
                    "approval",
                    format!(
                        "`created_at` `{}` is not an RFC 3339 instant: approval {id}'s expiry cannot be checked",
                        craik_contracts::one_line(&r.created_at)
                    ),
                ));
            };
            review
                .expires_at
                .filter(|expires| signed.get() >= expires.get())
                .map(|expires| {
                    (
                        "approval",
                        format!(
                            "approval {id} expired at {}; this decision was signed at {} (the kernel honours an approval only before its expiry)",
                            craik_contracts::one_line(&expires.to_string()),
                            craik_contracts::one_line(&r.created_at)
                        ),
                    )
                })
        }
        Some(_) => Some((
            "approval",
            format!("approval {id}'s review journal names another approver or request"),
        )),
        None => Some((
            "approval",
            format!("approval {id} has no verified review journal (reviews/{id}/) naming this run"),
        )),
    }
}

/// The public key of the Craik home `path` is (or lies in: the nearest directory at or above
/// it holding `keys/signing.pub.pem`), else of `home`. The journal's own home first (issue
/// 30: `receipts verify OTHER-HOME` checked against the default home's key and reported a
/// valid home INVALID).
fn find_public(home: &Path, path: Option<&Path>) -> Result<PathBuf, Failure> {
    let own = default_public(home);
    let start = path.and_then(|p| p.canonicalize().ok());
    if let Some(found) = start
        .iter()
        .flat_map(|p| p.ancestors())
        .map(default_public)
        .find(|k| k.is_file())
    {
        return Ok(found);
    }
    if own.is_file() {
        return Ok(own);
    }
    Err(Failure::usage(format!(
        "no public key to verify with: `{}` does not exist and no Craik home lies above the journal; pass the key you trust with --key PUB.pem",
        own.display()
    )))
}

/// Whether a signed fact says the journal's run has not ended, so it may be open under
/// `--allow-open`: its last receipt is `run.parked` (the verification that called this checked
/// every line's signature), or its home's ledger — verified here with `ring` and held by a
/// trusted key — records it as started and not closed. Never the unsigned `run.json`.
fn signed_open(journal: &Path, ring: &KeyRing) -> bool {
    // The last receipt, from the file's tail (a checkpoint may follow it).
    let parked = (|| {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(journal).ok()?;
        let len = file.metadata().ok()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)))
            .ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        tail.split(|&b| b == b'\n')
            .rev()
            .filter(|l| !l.is_empty())
            .find_map(decode_receipt)?
            .ok()
    })()
    .is_some_and(|r| r.capability == "run.parked");
    if parked {
        return true;
    }
    let Some(root) = journal
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .filter(|r| r.join(craik_host::ledger::LEDGER_NAME).is_file())
    else {
        return false;
    };
    craik_host::ledger::check_home(&craik_host::run::store::Home::new(root), ring, threads())
        .records_open(journal)
}

/// Whether the run owning a journal says it is still going or parked (its unsigned
/// `run.json`): only for a hint, never a verdict.
fn run_not_ended(journal: &Path) -> bool {
    let Some(state) = journal.parent().map(|d| d.join("run.json")) else {
        return false;
    };
    std::fs::read(state)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|run| run.get("ended_at").is_none_or(serde_json::Value::is_null))
}

/// What the host expects a run's signed inputs to say (`receipts verify --grants`, `audit
/// --grants`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Expected {
    /// `grants_sha256` of the run's `run.inputs` receipt must be this.
    pub(crate) grants: Option<String>,
}

impl Expected {
    pub(crate) fn of(grant_files: &[PathBuf]) -> Result<Self, Failure> {
        if grant_files.is_empty() {
            return Ok(Self::default());
        }
        let grants = crate::bundle::read_grants(grant_files)?;
        Ok(Self {
            grants: Some(
                crate::bundle::grants_digest(&grants)
                    .map_err(|e| Failure::usage(format!("--grants: {e}")))?
                    .as_str()
                    .to_owned(),
            ),
        })
    }
}

/// The checks beyond the chain that a journal found by path must pass: an open journal only
/// for a run that has not ended, the signed run id naming its directory, every approval
/// backed by its verified review journal, and the signed inputs matching `expect`.
pub(crate) fn checked(
    path: &Path,
    mut report: Report,
    ring: &KeyRing,
    expect: &Expected,
) -> Report {
    let fail = |what: &str, line: usize, why: String| craik_kernel::Failure {
        line,
        seq: None,
        what: what.into(),
        why,
    };
    if report.failure.is_none() && !report.closed && !signed_open(path, ring) {
        report.failure = Some(fail(
            "not closed",
            // The journal's last line (after which its final checkpoint is missing), as the
            // kernel's verifier reports it: one line number for one finding (issue 31 item 5).
            usize::try_from(report.receipts.saturating_add(report.checkpoints))
                .unwrap_or(usize::MAX),
            "journal not closed, and nothing signed says its run is parked or running (truncated?); --allow-open accepts only a journal ending in a `run.parked` receipt or one its home ledger records as started and not closed".into(),
        ));
    }
    // A run's journal lives in `runs/<run id>/`: the signed run_id must be that directory's,
    // or a journal was moved under another run's name. A review journal lives in
    // `reviews/<id>/` and its signed journal id is `run_<id>`.
    let dir_name = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str());
    let in_reviews = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "reviews");
    let want = dir_name.and_then(|dir| {
        if in_reviews && (dir.starts_with("approval_") || dir.starts_with("review_")) {
            Some((dir, format!("run_{dir}")))
        } else {
            dir.starts_with("run_").then(|| (dir, dir.to_owned()))
        }
    });
    if let (None, Some((dir, want)), Some(signed)) = (&report.failure, want, &report.run_id)
        && want != *signed
    {
        report.failure = Some(fail(
            "run_id",
            1,
            format!(
                "the receipts are signed for journal `{signed}` but sit in `{dir}` (its journal id is `{want}`)"
            ),
        ));
    }
    if report.failure.is_none()
        && let Some((line, what, why)) = unbound(path, ring)
    {
        report.failure = Some(fail(what, line, why));
    }
    // A signed audit summary (`craik audit --summary`): its own contract and ledger head.
    if report.failure.is_none()
        && let Some(first) =
            first_receipt(path).filter(|r| r.capability == crate::cmd::audit::summary::CAPABILITY)
        && let Some(why) = crate::cmd::audit::summary::problem(path, &first, &report)
    {
        report.failure = Some(fail("audit summary", 1, why));
    }
    if report.failure.is_none()
        && let Some(want) = &expect.grants
    {
        let signed = first_receipt(path)
            .filter(|r| r.capability == craik_host::run::driver::RUN_INPUTS)
            .and_then(|r| {
                r.result
                    .metadata
                    .0
                    .get("grants_sha256")
                    .and_then(|v| v.as_str().map(str::to_owned))
            });
        match signed {
            Some(got) if got == *want => {}
            Some(got) => {
                report.failure = Some(fail(
                    "grants",
                    1,
                    format!(
                        "the run was signed with grants {got}; the --grants files hash to {want}"
                    ),
                ));
            }
            None => {
                report.failure = Some(fail(
                    "grants",
                    1,
                    "the journal's first receipt is not a run.inputs receipt naming grants_sha256"
                        .into(),
                ));
            }
        }
    }
    report
}

/// A journal's first receipt, decoded (the caller has verified the journal).
fn first_receipt(path: &Path) -> Option<ReceiptPayload> {
    Receipts::open(path).ok()?.next()?.1.ok()
}

/// What `receipts verify` is asked to check.
pub(crate) struct VerifyArgs<'a> {
    pub(crate) paths: &'a [PathBuf],
    pub(crate) keys: &'a [PathBuf],
    pub(crate) home: &'a Path,
    pub(crate) policies: Option<&'a Path>,
    pub(crate) custom: &'a [PathBuf],
    pub(crate) grants: &'a [PathBuf],
    pub(crate) allow_open: bool,
}

/// The trusted public keys: `keys`, else the home's (or the nearest home's above `near`),
/// named on stderr. A private key is refused.
pub(crate) fn trusted_keys(
    out: &mut Out,
    keys: &[PathBuf],
    home: &Path,
    near: Option<&Path>,
) -> Result<(KeyRing, Vec<String>), Failure> {
    let keys: Vec<PathBuf> = if keys.is_empty() {
        let found = find_public(home, near)?;
        out.diag(format_args!(
            "craik: no --key given; trusting {} (an auditor passes the key they trust: --key PUB.pem)",
            found.display()
        ))?;
        vec![found]
    } else {
        keys.to_vec()
    };
    let mut ring = KeyRing::new();
    let mut ids = Vec::new();
    for key in &keys {
        let public = craik_host::keys::read_verifying_key(key)?;
        ids.push(
            ring.add(&public)
                .map_err(|e| Failure::invalid(format!("{}: {e}", key.display()), Vec::new()))?,
        );
    }
    Ok((ring, ids))
}

/// The policy-set hash every receipt must name, when `--policies` or `--custom` is given
/// (`--custom` alone: on top of the embedded bundle, as `craik run` loads it).
pub(crate) fn expected_policy_set(
    policies: Option<&Path>,
    custom: &[PathBuf],
) -> Result<Option<String>, Failure> {
    if policies.is_none() && custom.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        crate::bundle::load(policies, custom)?
            .bundle
            .hash()
            .to_owned(),
    ))
}

pub(crate) fn verify(
    out: &mut Out,
    format: Format,
    args: &VerifyArgs<'_>,
) -> Result<Exit, Failure> {
    let (ring, _) = trusted_keys(
        out,
        args.keys,
        args.home,
        args.paths.first().map(PathBuf::as_path),
    )?;
    let policy_set = expected_policy_set(args.policies, args.custom)?;
    let expect = Expected::of(args.grants)?;
    let (paths, allow_open) = (args.paths, args.allow_open);
    let progress = std::io::stderr().is_terminal() && format == Format::Human;
    let mut results = Vec::new();
    let mut exit = Exit::Ok;
    // A home: its ledger first, then every journal against it.
    let homes = home_checks(paths, &ring);
    // A journal inside a home given alone (`verify HOME/runs/RUN`) is checked against that
    // home's ledger too (issue 31 item 1: a run cut back to a parked copy verified as "valid,
    // open" though the ledger records it closed); said either way.
    let enclosing = enclosing_homes(paths, &homes, &ring);
    if format == Format::Human {
        for path in paths.iter().filter(|p| !is_home(p)) {
            match enclosing.iter().find(|c| inside(c, path)) {
                Some(c) => out.diag(format_args!(
                    "craik: {}: checked against the home ledger {}",
                    path.display(),
                    c.ledger.display()
                ))?,
                None => out.diag(format_args!(
                    "craik: {}: no home ledger above it: not checked against one",
                    path.display()
                ))?,
            }
        }
    }
    for check in &homes {
        let verified = ledger_result(check);
        if !verified.report.is_valid() {
            exit = Exit::CheckFailed;
        }
        if format == Format::Human {
            print_result(out, &verified, allow_open)?;
        }
        results.push(verified);
    }
    for path in journals(paths)? {
        // A journal being written (its run driven by a live process, or written in the last
        // moments) that does not verify is read again for a short while: read just before its
        // closing checkpoint and its ledger just after the close entry, it looked "not closed";
        // a review journal made and not yet filled looked empty (outside testing round 14: 7
        // of 305 healthy states of a live home were reported INVALID). One that stays so is
        // reported; waiting never hides a problem.
        let started = std::time::Instant::now();
        let report = loop {
            // Streamed: memory stays at one chunk and one window of lines, whatever the size.
            let mut file = std::fs::File::open(&path)
                .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
            let total = file
                .metadata()
                .map(|m| usize::try_from(m.len()).unwrap_or(usize::MAX))
                .unwrap_or(0)
                .max(1);
            let show = progress && total > 16 * 1024 * 1024;
            let options = VerifyOptions {
                policy_set: policy_set.as_deref(),
                threads: threads(),
                batch: true,
                allow_open,
            };
            // A home's journals verify with its ledger's keys (earlier keys its rotations vouch for).
            let ring = ring_for(&homes, &path, ring_for(&enclosing, &path, &ring));
            let mut verifier = Verifier::new(ring, options);
            let mut buf = vec![0u8; 8 * 1024 * 1024];
            let mut done = 0usize;
            loop {
                let n = match std::io::Read::read(&mut file, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Failure::usage(format!("{}: {e}", path.display()))),
                };
                done += n;
                if !verifier.feed(buf.get(..n).unwrap_or_default()) {
                    break;
                }
                if show {
                    let pct = done.saturating_mul(100) / total;
                    out.progress(format_args!(
                        "{}: {pct:>3}%  {} lines verified",
                        path.display(),
                        verifier.lines()
                    ))?;
                }
            }
            let report = ledger_unusable(
                &enclosing,
                &path,
                against_ledger(
                    &enclosing,
                    &path,
                    against_ledger(
                        &homes,
                        &path,
                        checked(&path, verifier.finish(), ring, &expect),
                    ),
                ),
            );
            if show {
                out.end_progress()?;
            }
            if !report.is_valid()
                && started.elapsed() < craik_host::ledger::LIVE_WINDOW
                && craik_host::ledger::being_written(&path).is_some()
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            break report;
        };
        if !report.is_valid() {
            exit = Exit::CheckFailed;
        }
        let rebuilt = homes
            .iter()
            .chain(&enclosing)
            .any(|c| craik_host::audits::entered_by_rebuild(c, &path));
        let verified = Verified {
            path: path.display().to_string(),
            report,
            rebuilt,
        };
        if format == Format::Human {
            print_result(out, &verified, allow_open)?;
        }
        results.push(verified);
    }
    // Journals the ledger names that are gone, and files under `audits/` that are no journal
    // (a journal there is reported above, with its problem).
    for problem in homes.iter().flat_map(|c| c.problems.iter()).filter(|p| {
        p.what == "missing"
            || (p.what == craik_host::audits::PROBLEM && !p.journal.ends_with(JOURNAL_NAME))
    }) {
        let verified = Verified {
            path: problem.journal.display().to_string(),
            report: missing_report(problem),
            rebuilt: false,
        };
        exit = Exit::CheckFailed;
        if format == Format::Human {
            print_result(out, &verified, allow_open)?;
        }
        results.push(verified);
    }
    match format {
        Format::Json | Format::Junit => out.json(&results)?,
        Format::Human => {
            let bad = results.iter().filter(|r| !r.report.is_valid()).count();
            out.line(format_args!(
                "{} journal{}: {} valid, {bad} invalid",
                results.len(),
                if results.len() == 1 { "" } else { "s" },
                results.len() - bad
            ))?;
        }
    }
    Ok(exit)
}

/// Whether `path` lies in the home `check` is about.
fn inside(check: &craik_host::ledger::HomeCheck, path: &Path) -> bool {
    let root = check.ledger.parent().and_then(|p| p.canonicalize().ok());
    let real = path.canonicalize().ok();
    root.zip(real)
        .is_some_and(|(root, real)| real.starts_with(root))
}

/// A journal of a home whose ledger is missing or does not verify fails with that (a run cut
/// back, its ledger deleted, verified "valid" alone before: outside testing round 13).
pub(crate) fn ledger_unusable(
    homes: &[craik_host::ledger::HomeCheck],
    path: &Path,
    mut report: Report,
) -> Report {
    if report.failure.is_some() {
        return report;
    }
    if let Some(problem) = homes
        .iter()
        .filter(|c| inside(c, path))
        .find_map(|c| c.problems.iter().find(|p| p.what == "ledger"))
    {
        report.failure = Some(craik_kernel::Failure {
            line: 0,
            seq: None,
            what: "ledger".to_owned(),
            why: format!(
                "the home's ledger {}: {}",
                problem.journal.display(),
                problem.why
            ),
        });
    }
    report
}

/// Whether `path` is a Craik home (a directory holding `runs/` or a ledger).
fn is_home(path: &Path) -> bool {
    path.join("runs").is_dir() || path.join(craik_host::ledger::LEDGER_NAME).is_file()
}

/// The ledger checks of the homes that hold the non-home `paths` (the nearest directory above
/// one holding a ledger, with the path under its `runs/` or `reviews/`), leaving out homes
/// already among `given`.
pub(crate) fn enclosing_homes(
    paths: &[PathBuf],
    given: &[craik_host::ledger::HomeCheck],
    ring: &KeyRing,
) -> Vec<craik_host::ledger::HomeCheck> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in paths.iter().filter(|p| !is_home(p)) {
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        // A home by its layout (its keys, or a ledger), so a home whose ledger was deleted is
        // still one, and its journals fail against it (outside testing round 13).
        let Some(root) = real.ancestors().skip(1).find(|a| {
            (a.join(craik_host::ledger::LEDGER_NAME).is_file() || a.join("keys").is_dir())
                && (real.starts_with(a.join("runs")) || real.starts_with(a.join("reviews")))
        }) else {
            continue;
        };
        let root = root.to_path_buf();
        let known = given
            .iter()
            .any(|c| c.ledger.parent().and_then(|p| p.canonicalize().ok()) == Some(root.clone()));
        if !known && !roots.contains(&root) {
            roots.push(root);
        }
    }
    roots.iter().map(|r| check_home(r, ring)).collect()
}

/// The ledger check of every home among `paths` (a directory holding `runs/`).
pub(crate) fn home_checks(paths: &[PathBuf], ring: &KeyRing) -> Vec<craik_host::ledger::HomeCheck> {
    paths
        .iter()
        .filter(|p| p.join("runs").is_dir() || p.join(craik_host::ledger::LEDGER_NAME).is_file())
        .map(|p| check_home(p, ring))
        .collect()
}

/// The ledger check of the home at `root`, with what it names beyond run and review journals:
/// its signed audit summaries (every file under `audits/` named, as named) and the journals
/// `craik ledger rebuild` entered.
fn check_home(root: &Path, ring: &KeyRing) -> craik_host::ledger::HomeCheck {
    let mut check =
        craik_host::ledger::check_home(&craik_host::run::store::Home::new(root), ring, threads());
    craik_host::audits::check(root, &mut check);
    check
}

/// The keys to verify `journal` with: its home's (the trusted keys and those its ledger's
/// rotations vouch for), else `trusted`.
pub(crate) fn ring_for<'a>(
    homes: &'a [craik_host::ledger::HomeCheck],
    journal: &Path,
    trusted: &'a KeyRing,
) -> &'a KeyRing {
    homes
        .iter()
        .find(|c| c.holds(journal))
        .map_or(trusted, |c| &c.ring)
}

/// A journal's report with the first ledger problem about it, if it had none of its own:
/// what the ledger's check found, or a journal signed by another key than the one that held
/// the ledger when it started.
pub(crate) fn against_ledger(
    homes: &[craik_host::ledger::HomeCheck],
    path: &Path,
    mut report: Report,
) -> Report {
    if report.failure.is_some() {
        return report;
    }
    let problem = homes
        .iter()
        .find_map(|c| c.problem_for(path).filter(|p| p.what != "missing"))
        .map(|p| (p.what.clone(), p.why.clone()))
        .or_else(|| {
            homes
                .iter()
                .find_map(|c| c.key_problem(path, &report.key_ids))
                .map(|why| ("key_id".to_owned(), why))
        });
    if let Some((what, why)) = problem {
        report.failure = Some(craik_kernel::Failure {
            line: 0,
            seq: None,
            what,
            why,
        });
    }
    report
}

/// The ledger's own line: its verification, or what is wrong with it.
fn ledger_result(check: &craik_host::ledger::HomeCheck) -> Verified {
    let mut report = check.report.clone().unwrap_or_default();
    if report.failure.is_none()
        && let Some(problem) = check.problem_for(&check.ledger)
    {
        report.failure = Some(craik_kernel::Failure {
            line: 0,
            seq: None,
            what: problem.what.clone(),
            why: problem.why.clone(),
        });
    }
    Verified {
        path: check.ledger.display().to_string(),
        report,
        rebuilt: false,
    }
}

fn print_result(out: &mut Out, verified: &Verified, allow_open: bool) -> Result<(), Failure> {
    let (report, path) = (&verified.report, Path::new(&verified.path));
    match &report.failure {
        None => out.line(format_args!(
            "{}: valid — {} receipts, {} checkpoints, {} (run {}){}",
            path.display(),
            report.receipts,
            report.checkpoints,
            if report.closed { "closed" } else { "open" },
            report.run_id.as_deref().unwrap_or("?"),
            if verified.rebuilt {
                "; entered into the ledger by `craik ledger rebuild` (rebuilt): vouched for from the rebuild on"
            } else {
                ""
            }
        ))?,
        Some(f) => {
            let seq = f.seq.map(|s| format!(" (seq {s})")).unwrap_or_default();
            out.line(format_args!(
                "{}:{}: INVALID{seq}: {}: {}",
                path.display(),
                f.line,
                f.what,
                f.why
            ))?;
            out.line(format_args!(
                "  {} receipts verified before it",
                report.receipts
            ))?;
            // A run killed between making its journal and signing its first receipt: say what
            // to do (issue 31 item 2).
            if f.what == "empty"
                && report.receipts == 0
                && let Some(run) = path
                    .parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("run_"))
            {
                out.line(format_args!(
                    "  a run killed before its first receipt has nothing signed: `craik runs recover {run} --by user:NAME` removes it (refused if the ledger records its start)"
                ))?;
            }
            if f.what == "not closed" && !allow_open && run_not_ended(path) {
                out.line(
                    "  the run is parked or still going; to check what it has so far, pass --allow-open",
                )?;
            }
        }
    }
    Ok(())
}

/// Signature checks use every core the process may run on.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// A run id under `home/runs/`, a run directory, or a journal file.
pub(crate) fn resolve(run: &str, home: &Path) -> Result<PathBuf, Failure> {
    let direct = PathBuf::from(run);
    if direct.is_file() {
        return Ok(direct);
    }
    if direct.join(JOURNAL_NAME).is_file() {
        return Ok(direct.join(JOURNAL_NAME));
    }
    if craik_contracts::id_problem(run).is_none() {
        let path = home.join("runs").join(run).join(JOURNAL_NAME);
        if path.is_file() {
            return Ok(path);
        }
    }
    Err(Failure::usage(format!(
        "no journal for `{}` (looked for a file, a run directory and {}/runs/<id>)",
        craik_contracts::Truncated(run),
        home.display()
    )))
}

/// Longest journal line list/show decode (a receipt is a few KB; verification has its own
/// limit and reports the line).
const MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// A journal's receipts, decoded without verification (list/show say so), read one line at a
/// time: memory holds one line, whatever the journal's size. Items are `(line number, receipt
/// or why the line is not one)`; other envelopes (checkpoints) are skipped. A read error ends
/// the iteration and is kept in `error`.
struct Receipts {
    reader: std::io::BufReader<std::fs::File>,
    path: PathBuf,
    line: usize,
    buf: Vec<u8>,
    error: Option<Failure>,
}

impl Receipts {
    fn open(path: &Path) -> Result<Self, Failure> {
        let file = std::fs::File::open(path)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        Ok(Self {
            reader: std::io::BufReader::with_capacity(1 << 20, file),
            path: path.to_owned(),
            line: 0,
            buf: Vec::new(),
            error: None,
        })
    }

    /// The read error that ended the iteration, if one did.
    fn finish(self) -> Result<(), Failure> {
        self.error.map_or(Ok(()), Err)
    }
}

impl Iterator for Receipts {
    type Item = (usize, Result<ReceiptPayload, String>);

    fn next(&mut self) -> Option<Self::Item> {
        use std::io::{BufRead, Read};
        loop {
            self.buf.clear();
            self.line += 1;
            let read = (&mut self.reader)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut self.buf);
            match read {
                Ok(0) => return None,
                Ok(_)
                    if self.buf.last() != Some(&b'\n')
                        && u64::try_from(self.buf.len()).unwrap_or(u64::MAX) > MAX_LINE_BYTES =>
                {
                    self.error = Some(Failure::usage(format!(
                        "{}:{}: line longer than {MAX_LINE_BYTES} bytes",
                        self.path.display(),
                        self.line
                    )));
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    self.error = Some(Failure::usage(format!("{}: {e}", self.path.display())));
                    return None;
                }
            }
            let line = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
            if line.is_empty() {
                continue;
            }
            if let Some(decoded) = decode_receipt(line) {
                return Some((self.line, decoded));
            }
        }
    }
}

/// One journal line as a receipt; `None` for another kind of envelope.
fn decode_receipt(line: &[u8]) -> Option<Result<ReceiptPayload, String>> {
    let envelope: Envelope = match serde_json::from_slice(line) {
        Ok(e) => e,
        Err(e) => return Some(Err(format!("not an envelope: {e}"))),
    };
    if envelope.payload_type != RECEIPT_PAYLOAD_TYPE {
        return None;
    }
    Some(
        STANDARD
            .decode(&envelope.payload)
            .map_err(|e| format!("payload is not base64: {e}"))
            .and_then(|p| {
                serde_json::from_slice::<ReceiptPayload>(&p)
                    .map_err(|e| format!("not a receipt: {e}"))
            }),
    )
}

pub(crate) fn list(out: &mut Out, format: Format, run: &str, home: &Path) -> Result<Exit, Failure> {
    let path = resolve(run, home)?;
    let mut receipts = Receipts::open(&path)?;
    match format {
        Format::Json | Format::Junit => {
            // One array, written as the receipts are read.
            out.json_seq(receipts.by_ref().filter_map(|(_, r)| r.ok()))?;
        }
        Format::Human => {
            out.line(format_args!(
                "{} (decoded, not verified: run `craik receipts verify`)",
                path.display()
            ))?;
            for (line, r) in receipts.by_ref() {
                match r {
                    Ok(r) => {
                        // A decision shows its verdict and policies; an outcome, what happened.
                        let (kind, detail) =
                            if r.decided_by.kind == craik_kernel::DecidedByKind::Outcome {
                                (
                                    format!("outcome:{}", r.result.status.as_str()),
                                    craik_contracts::Truncated(&r.result.summary).to_string(),
                                )
                            } else {
                                (
                                    craik_host::policytest::decision_name(r.decision).to_owned(),
                                    r.determining_policies.join(","),
                                )
                            };
                        out.line(format_args!(
                            "{:>6}  {}  {:<18} {:<17} {:<40} {}{}",
                            r.seq,
                            r.created_at,
                            kind,
                            r.capability,
                            craik_contracts::Truncated(&r.target).to_string(),
                            r.action
                                .as_deref()
                                .map(|a| format!("[{a}] "))
                                .unwrap_or_default(),
                            detail
                        ))?;
                    }
                    Err(e) => out.line(format_args!("  line {line}: {e}"))?,
                }
            }
        }
    }
    receipts.finish()?;
    Ok(Exit::Ok)
}

pub(crate) fn show(
    out: &mut Out,
    format: Format,
    run: &str,
    seq: u64,
    home: &Path,
) -> Result<Exit, Failure> {
    let path = resolve(run, home)?;
    let mut receipts = Receipts::open(&path)?;
    let found = receipts
        .by_ref()
        .find_map(|(_, r)| r.ok().filter(|r| r.seq == seq));
    receipts.finish()?;
    let receipt = found
        .ok_or_else(|| Failure::usage(format!("{}: no receipt with seq {seq}", path.display())))?;
    match format {
        Format::Json | Format::Junit => out.json(&receipt)?,
        Format::Human => {
            let text = serde_json::to_string_pretty(&receipt)
                .map_err(|e| Failure::internal(e.to_string()))?;
            out.line(format_args!(
                "{} seq {seq} (decoded, not verified: run `craik receipts verify`)",
                path.display()
            ))?;
            // Line by line: a line is escaped whole when it holds a control character, and
            // the pretty JSON's own newlines are not the receipt's (issue 30: the whole
            // receipt came out on one line of `\n`). JSON escapes any inside its strings.
            for line in text.lines() {
                out.line(line)?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// The report of a journal the ledger names but that is missing (no line to point at).
pub(crate) fn missing_report(problem: &craik_host::ledger::Problem) -> Report {
    Report {
        failure: Some(craik_kernel::Failure {
            line: 0,
            seq: None,
            what: problem.what.clone(),
            why: problem.why.clone(),
        }),
        ..Report::default()
    }
}
