//! What the home ledger names beyond what `ledger::check_home` checks: the journals `craik
//! ledger rebuild` entered, each `ledger.run_closed` entry's signed ending (it must be the
//! journal's closing receipt's), and signed audit summaries (`craik audit --summary`): each summary
//! written under `<home>/audits/` gets a `ledger.audit_written` entry naming its file and the
//! SHA-256 of its bytes, and a home's check requires every file under `audits/` to be named,
//! to hash to what its entry signs, and every named one to exist (issue 31 item 4: nothing
//! checked `audits/`, so a summary could be deleted, replaced or planted unseen).
//!
//! Owns: the entry, the check of `audits/` against the verified ledger, and recording
//! summaries a crash (or an older release) left unnamed. Must not: judge a summary's content
//! (`craik receipts verify` checks each summary journal as a journal and as a summary).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use craik_contracts::{Object, PolicyProfile};
use craik_kernel::{Ed25519Signer, KeyRing, ReceiptPayload, Verifier, VerifyOptions};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::Error;
use crate::ledger::{Entry, HomeCheck, LEDGER_NAME, Problem};
use crate::run::store::{Home, io_at as io};

/// A signed audit summary was written under `audits/`.
pub const AUDIT_WRITTEN: &str = "ledger.audit_written";
/// The directory of a home that holds audit summaries.
pub const AUDITS_DIR: &str = "audits";
/// What a problem with `audits/` is called (`Problem::what`).
pub const PROBLEM: &str = "audit";
/// At most this many files under `audits/` are looked at; more is itself a problem (the walk
/// stays bounded whatever was planted there).
const MAX_FILES: usize = 100_000;
/// Directory depth below `audits/` walked (`audits/<id>/receipts.jsonl` is depth 2).
const MAX_DEPTH: usize = 4;

/// `sha256:<hex>` of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", craik_kernel::to_hex(&Sha256::digest(bytes)))
}

/// The ledger entry naming the summary `audit_id` written at `file` (relative to the home,
/// `audits/…`) whose bytes hash to `sha256`.
pub fn entry(audit_id: &str, file: &str, sha256: &str) -> Entry {
    let mut metadata = Object::new();
    for (k, v) in [
        ("journal", json!(file)),
        ("audit_id", json!(audit_id)),
        ("sha256", json!(sha256)),
    ] {
        metadata.0.insert(k.to_owned(), v);
    }
    Entry {
        kind: AUDIT_WRITTEN,
        target: audit_id.to_owned(),
        task_id: String::new(),
        actor: "craik".into(),
        profile: PolicyProfile::Strict,
        policy_set: String::new(),
        request_hash: sha256.to_owned(),
        reason: "an audit summary was written".into(),
        metadata,
    }
}

/// `path` relative to the home's root, as the ledger names it (`audits/…`, `/`-separated);
/// `None` when it is not a plain path below `<home>/audits/`.
pub fn relative(home: &Path, path: &Path) -> Option<String> {
    let real = |p: &Path| p.canonicalize().ok();
    // The file itself may not exist yet: its directory does.
    let dir = real(path.parent()?)?;
    let root = real(home)?;
    let rel = dir.strip_prefix(&root).ok()?.join(path.file_name()?);
    plain(&rel).filter(|r| r.starts_with(&format!("{AUDITS_DIR}/")))
}

/// A relative path of normal components, `/`-separated (no `..`, no root, valid UTF-8).
fn plain(rel: &Path) -> Option<String> {
    let parts: Option<Vec<&str>> = rel
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    parts.filter(|p| !p.is_empty()).map(|p| p.join("/"))
}

/// Records the summary just written at `path` (under `<home>/audits/`) in the home's ledger;
/// `Ok(false)` when `path` is not under the home's `audits/` (a `--summary-out` elsewhere is
/// the caller's to keep: no ledger names it).
pub fn record_written(
    home: &Path,
    path: &Path,
    audit_id: &str,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
) -> Result<bool, Error> {
    let Some(rel) = relative(home, path) else {
        return Ok(false);
    };
    let bytes = fs::read(path).map_err(io(path))?;
    crate::ledger::record(
        home,
        signer,
        now,
        vec![entry(audit_id, &rel, &sha256(&bytes))],
    )?;
    Ok(true)
}

/// What the verified ledger names under `audits/` (relative path → (sha256, ledger line)),
/// and the journals (relative paths) whose entries `craik ledger rebuild` wrote. `Err` when
/// the ledger no longer verifies as it did for `check` (changed meanwhile).
type Named = (
    BTreeMap<String, (String, usize)>,
    BTreeSet<String>,
    Vec<ClosedEntry>,
);

/// A `ledger.run_closed` entry's signed ending: the run journal (relative), status, reason
/// and the ledger line.
type ClosedEntry = (String, String, String, usize);

fn named(check: &HomeCheck) -> Result<Named, String> {
    let bytes = fs::read(&check.ledger).map_err(|e| format!("cannot read: {e}"))?;
    let mut found: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut rebuilt: BTreeSet<String> = BTreeSet::new();
    let mut closed: Vec<ClosedEntry> = Vec::new();
    let mut bad: Option<String> = None;
    let report = {
        let mut verifier = Verifier::new(
            &check.ring,
            VerifyOptions {
                allow_open: true,
                threads: std::thread::available_parallelism().map_or(1, usize::from),
                ..VerifyOptions::default()
            },
        )
        .visiting(|line, r: &ReceiptPayload| {
            let m = &r.result.metadata.0;
            let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or_default();
            if m.get("rebuilt") == Some(&Value::Bool(true)) {
                let journal = match r.capability.as_str() {
                    crate::ledger::RUN_STARTED | crate::ledger::RUN_CLOSED => {
                        Some(crate::ledger::run_journal(&r.target))
                    }
                    crate::ledger::REVIEW_CLOSED => Some(crate::ledger::review_journal(&r.target)),
                    AUDIT_WRITTEN => Some(text("journal").to_owned()),
                    _ => None,
                };
                rebuilt.extend(journal);
            }
            if r.capability == crate::ledger::RUN_CLOSED {
                closed.push((
                    crate::ledger::run_journal(&r.target),
                    text("status").to_owned(),
                    text("status_reason").to_owned(),
                    line,
                ));
            }
            if r.capability != AUDIT_WRITTEN {
                return;
            }
            match plain(Path::new(text("journal")))
                .filter(|p| p.starts_with(&format!("{AUDITS_DIR}/")))
            {
                Some(rel) => {
                    found.insert(rel, (text("sha256").to_owned(), line));
                }
                None => {
                    bad.get_or_insert_with(|| {
                        format!(
                            "line {line}: `{AUDIT_WRITTEN}` names `{}`, not a path under {AUDITS_DIR}/",
                            craik_contracts::one_line(text("journal"))
                        )
                    });
                }
            }
        });
        verifier.feed(&bytes);
        verifier.finish()
    };
    if let Some(f) = report.failure {
        return Err(format!(
            "line {}: {}: {} (it changed since it was verified)",
            f.line, f.what, f.why
        ));
    }
    bad.map_or(Ok((found, rebuilt, closed)), Err)
}

/// Every file below `dir` (relative to `root`), sorted; directories deeper than
/// [`MAX_DEPTH`], links and other non-files are returned as problems.
fn files_below(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Result<String, String>>) {
    if out.len() > MAX_FILES {
        return;
    }
    let mut entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(e) => {
            out.push(Err(format!("{}: cannot list: {e}", dir.display())));
            return;
        }
    };
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(root)
            .ok()
            .and_then(plain)
            .unwrap_or_else(|| path.display().to_string());
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => out.push(Ok(rel)),
            Ok(m) if m.is_dir() && depth < MAX_DEPTH => files_below(root, &path, depth + 1, out),
            Ok(_) => out.push(Err(format!(
                "{rel}: not a regular file (a link, a device, or nested too deep): audits/ holds only summaries"
            ))),
            Err(e) => out.push(Err(format!("{rel}: {e}"))),
        }
    }
}

/// Each `ledger.run_closed` entry's `status` and `status_reason` must be the journal's
/// closing receipt's (`run.closed`: its `result.metadata.status` and `reason`), or `unsigned`
/// and `""` for a journal closed without one (issue 31 item 5: a mismatch is invalid, as a
/// tree size or root that differs is). Reported on the run's journal (`what` `status`); a
/// journal that is gone is `check_home`'s to report.
fn closed_statuses(home: &Path, check: &mut HomeCheck, closed: &[ClosedEntry]) {
    let ledger = check.ledger.display().to_string();
    for (rel, status, reason, line) in closed {
        let path = home.join(rel);
        if !path.is_file() {
            continue;
        }
        let (got_status, got_reason) = if let Some(last) = closing_receipt(&path) {
            (
                last.result
                    .metadata
                    .0
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                last.reason.clone(),
            )
        } else {
            ("unsigned".to_owned(), String::new())
        };
        if (got_status.as_str(), got_reason.as_str()) != (status.as_str(), reason.as_str()) {
            check.problems.push(Problem {
                journal: path,
                what: "status".into(),
                why: format!(
                    "the ledger {ledger}:{line} records it closed `{}` ({}); its closing receipt signs `{}` ({})",
                    craik_contracts::one_line(status),
                    craik_contracts::one_line(reason),
                    craik_contracts::one_line(&got_status),
                    craik_contracts::one_line(&got_reason)
                ),
            });
        }
    }
}

/// The journal's closing receipt (`run.closed`), decoded from its tail: the last one near its
/// end (a `run.recover` may follow it when recovery closed the journal of a run that had
/// signed its end). Not verified here: the journal is verified on its own by the same
/// command.
fn closing_receipt(path: &Path) -> Option<ReceiptPayload> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    // The closing receipt is among the last lines: a small tail first (a home of many runs
    // reads a few KiB of each), a larger one only when it is not there.
    for tail_len in [16 * 1024, 256 * 1024] {
        file.seek(SeekFrom::Start(len.saturating_sub(tail_len)))
            .ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        if let Some(found) = closing_in(&tail) {
            return Some(found);
        }
        if len <= tail_len {
            break;
        }
    }
    None
}

/// The last `run.closed` receipt among the complete lines of `tail`.
fn closing_in(tail: &[u8]) -> Option<ReceiptPayload> {
    let lines: Vec<&[u8]> = tail.split(|&b| b == b'\n').collect();
    lines.iter().rev().find_map(|line| {
        match crate::journal::decode_all(line).into_iter().next()?.1 {
            crate::journal::Decoded::Receipt(r)
                if r.capability == crate::run::signed::RUN_CLOSED =>
            {
                Some(*r)
            }
            _ => None,
        }
    })
}

/// Notes which journals `craik ledger rebuild` entered (`HomeCheck::rebuilt_journals`), and
/// checks `<home>/audits/` against the verified ledger `check` was made of (only when the ledger
/// itself verified: one that does not names nothing), adding its problems to it:
/// a file no `ledger.audit_written` entry names, one whose bytes do not hash to what its entry
/// signs (`audit`), a named one that is gone (`missing`).
pub fn check(home: &Path, check: &mut HomeCheck) {
    let ledger_ok = check
        .report
        .as_ref()
        .is_some_and(craik_kernel::Report::is_valid)
        && check.problem_for(&check.ledger).is_none();
    if !ledger_ok {
        return;
    }
    let ledger = check.ledger.display().to_string();
    let named = match named(check) {
        Ok((named, rebuilt, closed)) => {
            check.rebuilt_journals = rebuilt.iter().map(|rel| home.join(rel)).collect();
            closed_statuses(home, check, &closed);
            named
        }
        Err(why) => {
            check.problems.push(Problem {
                journal: check.ledger.clone(),
                what: "ledger".into(),
                why,
            });
            return;
        }
    };
    let mut on_disk = Vec::new();
    let audits = home.join(AUDITS_DIR);
    if fs::symlink_metadata(&audits).is_ok_and(|m| m.is_dir()) {
        files_below(home, &audits, 1, &mut on_disk);
    } else if audits.exists() || fs::symlink_metadata(&audits).is_ok() {
        on_disk.push(Err(format!(
            "{AUDITS_DIR}: not a directory: audits/ holds only summaries"
        )));
    }
    if on_disk.len() > MAX_FILES {
        check.problems.push(Problem {
            journal: audits.clone(),
            what: PROBLEM.into(),
            why: format!("more than {MAX_FILES} files under it: not summaries Craik wrote"),
        });
        return;
    }
    let mut seen = BTreeSet::new();
    for file in on_disk {
        let rel = match file {
            Ok(rel) => rel,
            Err(why) => {
                check.problems.push(Problem {
                    journal: audits.clone(),
                    what: PROBLEM.into(),
                    why,
                });
                continue;
            }
        };
        let path = home.join(&rel);
        let Some((want, line)) = named.get(&rel) else {
            check.problems.push(Problem {
                journal: path,
                what: PROBLEM.into(),
                why: format!(
                    "not named by the ledger {ledger}: every audit summary is recorded when it is written (planted, or a crash came before its entry: `craik ledger rebuild` records a summary that verifies)"
                ),
            });
            continue;
        };
        seen.insert(rel.clone());
        match fs::read(&path) {
            Ok(bytes) if sha256(&bytes) == *want => {}
            Ok(bytes) => check.problems.push(Problem {
                journal: path,
                what: PROBLEM.into(),
                why: format!(
                    "the ledger {ledger}:{line} records it as {want}; it is {} now: replaced or changed",
                    sha256(&bytes)
                ),
            }),
            Err(e) => check.problems.push(Problem {
                journal: path,
                what: PROBLEM.into(),
                why: format!("cannot read: {e}"),
            }),
        }
    }
    for (rel, (_, line)) in &named {
        if !seen.contains(rel) {
            check.problems.push(Problem {
                journal: home.join(rel),
                what: "missing".into(),
                why: format!("named by the ledger {ledger}:{line} but missing: deleted"),
            });
        }
    }
}

/// For `craik ledger rebuild`: records every file under `<home>/audits/` the ledger does not
/// name that is a summary journal Craik writes — it verifies under `keys` (the current key),
/// is one `audit.summary` receipt, closed, and sits at `audits/<its journal id>/receipts.jsonl`
/// — marked `rebuilt: true`. Returns what it recorded (`kind target`) and what it left out.
pub fn rebuild(
    home: &Home,
    signer: &Ed25519Signer,
    keys: &KeyRing,
    now: OffsetDateTime,
) -> Result<(Vec<String>, Vec<String>), Error> {
    let root = &home.root;
    let audits = root.join(AUDITS_DIR);
    if !audits.is_dir() {
        return Ok((Vec::new(), Vec::new()));
    }
    let ledger = root.join(LEDGER_NAME);
    // What the ledger already names (read after `ledger::rebuild`, which verified it).
    let named: BTreeSet<String> = fs::read(&ledger)
        .map(|b| {
            crate::journal::decode_all(&b)
                .into_iter()
                .filter_map(|(_, d)| match d {
                    crate::journal::Decoded::Receipt(r) if r.capability == AUDIT_WRITTEN => r
                        .result
                        .metadata
                        .0
                        .get("journal")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut files = Vec::new();
    files_below(root, &audits, 1, &mut files);
    let (mut recorded, mut refused, mut entries) = (Vec::new(), Vec::new(), Vec::new());
    for file in files {
        let rel = match file {
            Ok(rel) if named.contains(&rel) => continue,
            Ok(rel) => rel,
            Err(why) => {
                refused.push(format!("{why}; not recorded"));
                continue;
            }
        };
        let path = root.join(&rel);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) => return Err(io(&path)(e)),
        };
        let report = craik_kernel::verify_journal(&bytes, keys, None);
        let dir_id = rel
            .strip_prefix(&format!("{AUDITS_DIR}/"))
            .and_then(|r| r.strip_suffix(&format!("/{}", crate::journal::JOURNAL_NAME)))
            .filter(|id| !id.contains('/'));
        let first = crate::journal::decode_all(&bytes)
            .into_iter()
            .find_map(|(_, d)| match d {
                crate::journal::Decoded::Receipt(r) => Some(r),
                _ => None,
            });
        let why = if let Some(f) = &report.failure {
            Some(format!(
                "line {}: does not verify under this home's key ({}: {})",
                f.line, f.what, f.why
            ))
        } else if report.receipts != 1
            || first
                .as_ref()
                .is_none_or(|r| r.capability != "audit.summary")
        {
            Some("not an audit summary (one `audit.summary` receipt, closed)".to_owned())
        } else if dir_id.is_none() || report.run_id.as_deref() != dir_id {
            Some(format!(
                "its signed journal id `{}` is not its directory's",
                report.run_id.as_deref().unwrap_or("none")
            ))
        } else {
            None
        };
        match (why, dir_id) {
            (None, Some(id)) => {
                let mut e = entry(id, &rel, &sha256(&bytes));
                e.metadata.0.insert("rebuilt".into(), json!(true));
                recorded.push(format!("{AUDIT_WRITTEN} {id}"));
                entries.push(e);
            }
            (why, _) => refused.push(format!(
                "{}: {}; not recorded (remove it if Craik did not write it)",
                path.display(),
                why.unwrap_or_default()
            )),
        }
    }
    if !entries.is_empty() {
        crate::ledger::record(root, signer, now, entries)?;
    }
    Ok((recorded, refused))
}

/// Whether `check`'s ledger entered `journal` through `craik ledger rebuild` (its entries carry
/// `rebuilt: true`), comparing real paths.
pub fn entered_by_rebuild(check: &HomeCheck, journal: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let journal = real(journal);
    check.rebuilt_journals.iter().any(|p| real(p) == journal)
}
