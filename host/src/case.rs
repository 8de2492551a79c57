//! Case files: the task context the host assembles before a run (and `craik case build`
//! prints) — repository state, the docs inventory under the profile's docs paths, immutable
//! paths, recent handoffs of the project, approved memory facts with their trust class, open
//! contradictions between them, stale risks and the verification plan — deterministic (the
//! same inputs give the same bytes: sorted, no clock), bounded (a token budget that cuts the
//! lowest-priority material first and lists every cut) and safe (no link followed, no
//! `.git/`/`.craik/` internals or protected file read, every excerpt redacted).
//! docs/context.md is the user-facing description; keep it in step.

pub mod git;
pub mod scan;
pub mod stale;

use craik_contracts::{
    CaseFile, ContradictionReport, ContradictionStatus, EvidenceKind, EvidenceReference, Fact,
    Handoff, IntentLock, MemoryProposal, Object, PolicyEnvelope, ProposalStatus, TaskRequest,
};
use craik_kernel::KeyRing;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::Error;
use crate::project::Profile;
use crate::run::store::Home;

/// The budget when none is given (tokens).
pub const DEFAULT_MAX_TOKENS: u64 = 24_000;
pub use crate::run::store::CASE_FILE;
/// Most handoffs listed.
pub const MAX_HANDOFFS: usize = 5;
/// Longest excerpt (a heading, a handoff summary, a fact value), in characters.
pub const MAX_EXCERPT: usize = 160;

/// What a case file is built from.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub profile: &'a Profile,
    pub task: &'a TaskRequest,
    pub intent: Option<&'a IntentLock>,
    pub envelope: Option<&'a PolicyEnvelope>,
    /// Craik's home: handoffs and memory of earlier runs (none: no history).
    pub home: Option<&'a Home>,
    /// The home's keys: approved facts are taken only when their signed review verifies.
    pub keys: Option<&'a KeyRing>,
    pub max_tokens: u64,
    /// `craik case build`: what the profile check finds is an error. A run records it as a
    /// stale risk instead and goes on.
    pub strict: bool,
}

/// A case file and its exact bytes (pretty JSON and a newline).
#[derive(Debug, Clone)]
pub struct Built {
    pub case: CaseFile,
    pub bytes: Vec<u8>,
}

/// Rough token count of `bytes` of JSON: one token per 4 bytes, rounded up.
pub fn tokens_of(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

fn tokens<T: serde::Serialize>(v: &T) -> u64 {
    // The item and its separating comma.
    tokens_of(serde_json::to_vec(v).map_or(0, |b| b.len()) + 1)
}

fn sha_hex(bytes: &[u8]) -> String {
    craik_kernel::to_hex(&sha2::Sha256::digest(bytes))
}

/// Text from the repository or a runner, made safe to place in a case file: redacted (a
/// remaining secret-looking value replaced whole), on one line, cut to [`MAX_EXCERPT`].
pub fn excerpt(text: &str) -> String {
    let clean = match craik_kernel::redact_checked(text) {
        Ok(r) => r.text,
        Err(_) => return craik_kernel::REDACTED.to_owned(),
    };
    let line = craik_contracts::one_line(clean.trim());
    let mut out: String = line.chars().take(MAX_EXCERPT).collect();
    if line.chars().count() > MAX_EXCERPT {
        out.push('…');
    }
    out
}

/// Issue 30: every string of the case file (stale risks, headings, file names, handoffs,
/// facts, ...) through the secret rules once more, whatever section built it.
fn redact_case(case: &mut CaseFile) -> Result<(), Error> {
    let mut value = serde_json::to_value(&*case).map_err(|e| Error::internal(e.to_string()))?;
    let replaced = craik_kernel::redact_value(&mut value)
        .map_err(|what| Error::internal(format!("the case file cannot be redacted: {what}")))?;
    if replaced > 0 {
        *case = serde_json::from_value(value)
            .map_err(|e| Error::internal(format!("the redacted case file does not decode: {e}")))?;
    }
    Ok(())
}

/// One docs inventory entry.
#[derive(Debug, Clone)]
struct Doc {
    path: String,
    size: u64,
    sha256: Option<String>,
    heading: Option<String>,
    binary: bool,
    immutable: bool,
    protected: Option<&'static str>,
    unreadable: Option<String>,
}

impl Doc {
    fn evidence(&self) -> EvidenceReference {
        let summary = if let Some(p) = self.protected {
            format!("protected ({p}): listed, contents not read")
        } else if let Some(why) = &self.unreadable {
            format!("unreadable: {}", excerpt(why))
        } else if self.binary {
            format!("binary file, {} bytes (summarised, not inlined)", self.size)
        } else {
            self.heading
                .clone()
                .unwrap_or_else(|| "(no heading)".to_owned())
        };
        let mut meta = Object::new();
        meta.0.insert("binary".into(), json!(self.binary));
        if let Some(h) = &self.heading {
            meta.0.insert("first_heading".into(), json!(h));
        }
        meta.0.insert("immutable".into(), json!(self.immutable));
        if let Some(p) = self.protected {
            meta.0.insert("protected".into(), json!(p));
        }
        meta.0.insert("sha256".into(), json!(self.sha256));
        meta.0.insert("size".into(), json!(self.size));
        EvidenceReference {
            schema: Default::default(),
            version: Default::default(),
            id: format!(
                "evidence_doc_{}",
                sha_hex(self.path.as_bytes()).get(..16).unwrap_or_default()
            ),
            source: self.path.clone(),
            kind: EvidenceKind::File,
            locator: self.path.clone(),
            summary,
            captured_at: None,
            metadata: meta,
        }
    }
}

/// Reads one doc (once, bounded) and applies the doc rules to its first bytes, which are
/// dropped before the next doc is read: memory stays flat whatever the docs hold.
fn read_doc(
    root: &std::path::Path,
    path: &str,
    (size, immutable): (u64, bool),
    tree: &scan::Tree,
    risks: &mut Vec<String>,
) -> Doc {
    let protected = craik_kernel::TargetPath::normalize("/r", path)
        .ok()
        .and_then(|t| t.protected())
        .map(craik_kernel::Protected::name);
    let mut doc = Doc {
        path: path.to_owned(),
        size,
        sha256: None,
        heading: None,
        binary: false,
        immutable,
        protected,
        unreadable: None,
    };
    if protected.is_some() {
        return doc;
    }
    match scan::read_file(root, path) {
        Err(why) => doc.unreadable = Some(why),
        Ok(read) => {
            doc.size = read.size;
            doc.sha256 = read.sha256;
            let text = match std::str::from_utf8(&read.head) {
                Ok(t) => Some(t),
                // Cut inside a character at the end of the head: the valid part.
                Err(e) if e.error_len().is_none() => read
                    .head
                    .get(..e.valid_up_to())
                    .and_then(|h| std::str::from_utf8(h).ok()),
                Err(_) => None,
            };
            match text.filter(|t| !t.contains('\0')) {
                None => doc.binary = true,
                Some(t) => {
                    doc.heading = t
                        .lines()
                        .map(str::trim_start)
                        .find(|l| l.starts_with('#'))
                        .map(|l| excerpt(l.trim_start_matches('#')))
                        .filter(|h| !h.is_empty());
                    risks.extend(stale::doc_rules(
                        &[stale::DocText {
                            path,
                            text: Some(t),
                        }],
                        tree,
                    ));
                }
            }
        }
    }
    doc
}

/// Reads `wanted` docs (path, size, immutable) on up to 4 threads, each a contiguous run of
/// the list; results (and the doc rules' findings) are joined in the list's order, so the
/// outcome does not depend on which thread finished first.
fn read_docs(
    root: &std::path::Path,
    wanted: &[(&str, u64, bool)],
    tree: &scan::Tree,
    risks: &mut Vec<String>,
) -> Result<Vec<Doc>, Error> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 4);
    let chunk = wanted.len().div_ceil(threads).max(1);
    let read = |part: &[(&str, u64, bool)]| {
        let mut found = Vec::new();
        let docs: Vec<Doc> = part
            .iter()
            .map(|(rel, size, imm)| read_doc(root, rel, (*size, *imm), tree, &mut found))
            .collect();
        (docs, found)
    };
    // A reader that panicked fails the case file: never a case file short of its docs.
    type Part = (Vec<Doc>, Vec<String>);
    let parts: Result<Vec<Part>, Error> = std::thread::scope(|scope| {
        let handles: Vec<_> = wanted
            .chunks(chunk)
            .map(|part| scope.spawn(move || read(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| Error::internal("a docs reader thread panicked"))
            })
            .collect()
    });
    let mut docs = Vec::with_capacity(wanted.len());
    for (d, r) in parts? {
        docs.extend(d);
        risks.extend(r);
    }
    Ok(docs)
}

/// An omission entry of `context_budget.context_omissions`.
fn omission(section: &str, count: usize, reason: &str, tokens: u64) -> Value {
    json!({"count": count, "reason": reason, "section": section, "tokens": tokens})
}

/// The project's handoffs in the home, newest first (as written: read the run's verified
/// journal for what is signed), and the project id of every run that left one.
fn handoffs(
    home: &Home,
    project: &str,
    omitted: &mut Vec<Value>,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut listed = Vec::new();
    let mut projects = Vec::new();
    let mut unreadable = 0usize;
    // Runs that cannot be listed are said, never read as "no handoffs".
    let ids = match home.run_ids() {
        Ok(ids) => ids,
        Err(_) => {
            omitted.push(omission(
                "recent_handoffs",
                0,
                "the home's runs cannot be listed",
                0,
            ));
            Vec::new()
        }
    };
    for run in ids.iter().rev() {
        let path = home.runs().join(run).join(crate::run::store::HANDOFF);
        let Ok(bytes) = crate::fsio::read_bounded(&path, 1 << 20) else {
            if path.exists() {
                unreadable += 1;
            }
            continue;
        };
        let Ok(h) = craik_contracts::decode_single::<Handoff>(&bytes) else {
            unreadable += 1;
            continue;
        };
        projects.push((run.clone(), h.project_id.clone()));
        if h.project_id == project && listed.len() < MAX_HANDOFFS {
            listed.push(format!(
                "{} ({run}, {}): {}",
                excerpt(&h.id),
                h.status.as_str(),
                excerpt(&h.summary)
            ));
        }
    }
    if unreadable > 0 {
        omitted.push(omission(
            "recent_handoffs",
            unreadable,
            "handoff files that are not a readable craik.handoff",
            0,
        ));
    }
    (listed, projects)
}

/// Approved memory facts of the project's runs whose signed review verifies, each with its
/// proposal id; redacted.
fn facts(
    home: &Home,
    keys: Option<&KeyRing>,
    runs: &[(String, String)],
    project: &str,
    omitted: &mut Vec<Value>,
) -> Vec<(String, Fact)> {
    let Ok(all) = crate::run::memory::proposals(home) else {
        omitted.push(omission("facts", 0, "the home's memory cannot be read", 0));
        return Vec::new();
    };
    let approved: Vec<MemoryProposal> = all
        .into_iter()
        .filter(|m| m.status == ProposalStatus::Approved)
        .filter(|m| {
            m.run_id
                .as_deref()
                .is_some_and(|r| runs.iter().any(|(id, p)| id == r && p == project))
        })
        .collect();
    let Some(keys) = keys else {
        if !approved.is_empty() {
            omitted.push(omission(
                "facts",
                approved.len(),
                "no signing key in the home: approved facts cannot be checked against their signed reviews",
                0,
            ));
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut refused = 0usize;
    for m in approved {
        if crate::run::memory::memory_tampered(home, keys, &m).is_some() {
            refused += 1;
            continue;
        }
        let mut fact = m.fact.clone();
        for text in [
            &mut fact.entity,
            &mut fact.relation,
            &mut fact.value,
            &mut fact.source,
        ] {
            *text = excerpt(text);
        }
        out.push((m.id.clone(), fact));
    }
    if refused > 0 {
        omitted.push(omission(
            "facts",
            refused,
            "approved facts whose file disagrees with its signed review",
            0,
        ));
    }
    out.sort_by(|a, b| {
        (&a.1.entity, &a.1.relation, &a.1.value, &a.0).cmp(&(
            &b.1.entity,
            &b.1.relation,
            &b.1.value,
            &b.0,
        ))
    });
    out
}

/// Open contradictions: approved facts with the same entity and relation but different values.
fn contradictions(task: &str, facts: &[(String, Fact)]) -> Vec<ContradictionReport> {
    let mut groups: std::collections::BTreeMap<(&str, &str), Vec<(&str, &str)>> =
        std::collections::BTreeMap::new();
    for (id, f) in facts {
        groups
            .entry((f.entity.as_str(), f.relation.as_str()))
            .or_default()
            .push((id.as_str(), f.value.as_str()));
    }
    let mut out = Vec::new();
    for ((entity, relation), members) in groups {
        let mut values: Vec<&str> = members.iter().map(|(_, v)| *v).collect();
        values.sort_unstable();
        values.dedup();
        if values.len() < 2 {
            continue;
        }
        let mut ids: Vec<String> = members.iter().map(|(i, _)| (*i).to_owned()).collect();
        ids.sort();
        let key = format!("{entity}\0{relation}");
        out.push(ContradictionReport {
            schema: Default::default(),
            version: Default::default(),
            id: format!(
                "contradiction_{}",
                sha_hex(key.as_bytes()).get(..16).unwrap_or_default()
            ),
            task_id: Some(task.to_owned()),
            facts: ids,
            summary: excerpt(&format!(
                "`{entity}` `{relation}` has {} approved values: {}",
                values.len(),
                values.join(" | ")
            )),
            affected_artifacts: Vec::new(),
            evidence_ids: Vec::new(),
            proposed_resolution: None,
            status: ContradictionStatus::Open,
            owner: None,
            stigmem_conflict_id: None,
            created_at: None,
            resolved_at: None,
        });
    }
    out
}

/// Removes from `tree` every path git ignores (`ignored`: files, and directories with a
/// trailing `/`); returns how many entries went.
fn drop_ignored(tree: &mut scan::Tree, ignored: &[String]) -> usize {
    let (dirs, files): (Vec<&String>, Vec<&String>) =
        ignored.iter().partition(|p| p.ends_with('/'));
    let files: std::collections::BTreeSet<&str> = files.iter().map(|f| f.as_str()).collect();
    let under = |rel: &str| {
        dirs.iter()
            .any(|d| rel.starts_with(d.as_str()) || format!("{rel}/") == **d)
    };
    let before = tree.files.len() + tree.dirs.len() + tree.links.len();
    tree.files
        .retain(|rel, _| !files.contains(rel.as_str()) && !under(rel));
    tree.dirs.retain(|rel| !under(rel));
    tree.links
        .retain(|rel| !files.contains(rel.as_str()) && !under(rel));
    before - (tree.files.len() + tree.dirs.len() + tree.links.len())
}

/// Builds the case file of `req`.
pub fn build(req: &Request<'_>) -> Result<Built, Error> {
    let profile = req.profile;
    profile.check_structure()?;
    let (docs_specs, immutable, include, exclude) = profile.specs()?;
    let root = &profile.root;
    let top = git::toplevel(root);
    // What git ignores is not the project's (build output, local secrets such as `.env`,
    // dependencies): left out as git leaves it out (issue 30: the walk ignored `.gitignore`).
    // A repository whose ignore rules git cannot read is an error, never a silent walk of all.
    let ignored = match &top {
        Ok(_) => git::ignored(root).map_err(|why| {
            Error::invalid(
                format!(
                    "{}: git cannot list the ignored files: {why}",
                    root.display()
                ),
                Vec::new(),
            )
        })?,
        Err(_) => Vec::new(),
    };
    let prune: std::collections::BTreeSet<String> = ignored
        .iter()
        .filter_map(|d| d.strip_suffix('/').map(str::to_owned))
        .collect();
    let mut tree = scan::walk_pruned(root, scan::MAX_ENTRIES, &prune)
        .map_err(|why| Error::invalid(why, Vec::new()))?;
    let ignored_count = tree.skipped.ignored + drop_ignored(&mut tree, &ignored);
    let findings = profile.findings(&tree, top.as_deref().map_err(String::as_str));
    if req.strict
        && let Some(first) = findings.first()
    {
        return Err(Error::invalid(
            first.clone(),
            findings.iter().skip(1).cloned().collect(),
        ));
    }
    let mut omitted: Vec<Value> = Vec::new();
    if ignored_count > 0 {
        omitted.push(omission(
            "inventory",
            ignored_count,
            "files and directories git ignores (.gitignore, .git/info/exclude)",
            0,
        ));
    }
    let mut risks: Vec<String> = findings.iter().map(|f| format!("profile: {f}")).collect();

    // Repository state.
    let mut repo_state = Object::new();
    let mut dirty: Vec<(String, String)> = Vec::new();
    match &top {
        Ok(_) => match git::state(root) {
            Ok(s) => {
                repo_state.0.insert("branch".into(), json!(s.branch));
                repo_state
                    .0
                    .insert("dirty_count".into(), json!(s.dirty.len()));
                repo_state.0.insert("git".into(), json!(true));
                repo_state.0.insert("head".into(), json!(s.head));
                if s.unlisted > 0 {
                    omitted.push(omission(
                        "repo_state.dirty",
                        s.unlisted,
                        "dirty paths whose names are not valid target names",
                        0,
                    ));
                }
                dirty = s.dirty;
            }
            Err(why) => {
                if req.strict {
                    return Err(Error::invalid(
                        format!("{}: git status failed: {why}", root.display()),
                        Vec::new(),
                    ));
                }
                repo_state.0.insert("git".into(), json!(false));
                risks.push(format!("profile: git status failed: {why}"));
            }
        },
        Err(_) => {
            repo_state.0.insert("git".into(), json!(false));
        }
    }

    // Docs inventory and immutable paths, in path order.
    let included = |rel: &str| {
        (include.is_empty() || include.matching(rel).is_some()) && exclude.matching(rel).is_none()
    };
    let mut adrs: Vec<String> = Vec::new();
    let mut wanted: Vec<(&str, u64, bool)> = Vec::new();
    for (rel, meta) in &tree.files {
        if !included(rel) {
            continue;
        }
        let is_immutable = immutable.matching(rel).is_some();
        if is_immutable {
            adrs.push(rel.clone());
        }
        if docs_specs.matching(rel).is_some() {
            wanted.push((rel.as_str(), meta.size, is_immutable));
        }
    }
    let docs = read_docs(root, &wanted, &tree, &mut risks)?;
    let walk_notes = [
        (
            tree.skipped.symlinks,
            "symbolic links: listed by name only, never followed",
        ),
        (
            tree.skipped.bad_names,
            "names that are not valid target names (control characters, not UTF-8, `$`, `~`, ...): not listed",
        ),
        (
            tree.skipped.special,
            "entries that are neither files nor directories",
        ),
        (
            tree.skipped.state_dirs,
            "`.git` and `.craik` entries: never entered",
        ),
        (tree.skipped.too_deep, "directories deeper than 64 levels"),
        (
            tree.skipped.unreadable_dirs,
            "directories that could not be listed",
        ),
    ];
    for (count, why) in walk_notes {
        if count > 0 {
            omitted.push(omission("walk", count, why, 0));
        }
    }
    if tree.skipped.truncated {
        omitted.push(omission(
            "walk",
            scan::MAX_ENTRIES,
            "the walk stopped at its entry limit: later paths are not listed and the path rules did not run",
            0,
        ));
    }
    let protected = docs.iter().filter(|d| d.protected.is_some()).count();
    if protected > 0 {
        omitted.push(omission(
            "docs",
            protected,
            "protected paths: listed, contents not read",
            0,
        ));
    }
    let unhashed = docs
        .iter()
        .filter(|d| d.protected.is_none() && d.unreadable.is_none() && d.sha256.is_none())
        .count();
    if unhashed > 0 {
        omitted.push(omission(
            "docs",
            unhashed,
            "larger than 256 MiB (or changed while read): not hashed",
            0,
        ));
    }

    // Stale risks (the doc rules ran as each doc was read).
    risks.extend(stale::immutable_rules(&dirty, &immutable));
    risks.sort();
    risks.dedup();

    // History from the home.
    let project = profile.profile.id.as_str();
    let (recent, runs) = match req.home {
        Some(home) => handoffs(home, project, &mut omitted),
        None => (Vec::new(), Vec::new()),
    };
    let facts = match req.home {
        Some(home) => facts(home, req.keys, &runs, project, &mut omitted),
        None => Vec::new(),
    };
    let contradictions = contradictions(&req.task.id, &facts);

    let verification_plan: Vec<String> = req
        .envelope
        .map(|e| {
            e.verification_required
                .iter()
                .map(|cap| {
                    format!(
                        "`{cap}` must pass before the run completes (policy envelope `{}`)",
                        e.id
                    )
                })
                .collect()
        })
        .unwrap_or_default();

    let mut case = CaseFile {
        schema: Default::default(),
        version: Default::default(),
        // As long as the final id, so the estimate measures the final size.
        id: format!("case_{}", "0".repeat(16)),
        task_id: req.task.id.clone(),
        objective: req.task.objective.clone(),
        policy_envelope_id: req
            .envelope
            .map_or_else(|| "policy_none".to_owned(), |e| e.id.clone()),
        intent_lock_id: req.intent.map(|i| i.id.clone()),
        facts: facts.into_iter().map(|(_, f)| f).collect(),
        evidence: Vec::new(),
        assumptions: Vec::new(),
        docs: Vec::new(),
        adrs,
        repo_state,
        github_state: Object::new(),
        recent_handoffs: recent,
        stale_risks: risks,
        contradictions,
        verification_plan,
        context_budget: Object::new(),
    };
    let dirty_lines: Vec<String> = dirty.iter().map(|(p, c)| format!("{c} {p}")).collect();
    // Docs are placed into what the higher-priority sections leave (never all built first:
    // 100 000 evidence entries would hold hundreds of MB); dirty paths and handoffs, lower
    // than docs, are placed after them and cut first.
    let handoffs = std::mem::take(&mut case.recent_handoffs);
    place(&mut case, &[], &[], &omitted, req.max_tokens, 0);
    let base = tokens_of(serde_json::to_vec(&case).map_or(0, |b| b.len()));
    let mut room = req.max_tokens.saturating_sub(base + OMISSION_RESERVE);
    let mut docs_cut = (0usize, 0u64);
    for d in docs {
        let evidence = d.evidence();
        let cost = tokens(&d.path) + tokens(&evidence);
        if docs_cut.0 == 0 && cost <= room {
            room -= cost;
            case.docs.push(d.path);
            case.evidence.push(evidence);
        } else {
            docs_cut.0 += 1;
            docs_cut.1 += cost;
        }
    }
    case.recent_handoffs = handoffs;
    fit(&mut case, dirty_lines, req.max_tokens, &omitted, docs_cut);
    let bytes = finish(&mut case)?;
    Ok(Built { case, bytes })
}

/// Tokens kept free for the omission entries the cuts add.
const OMISSION_RESERVE: u64 = 256;

/// The sections the budget cuts, lowest priority first.
const CUT_ORDER: &[&str] = &[
    "repo_state.dirty",
    "recent_handoffs",
    "docs",
    "facts",
    "contradictions",
    "stale_risks",
    "adrs",
];

/// Fits `case` (with the dirty paths still to place) into `max` tokens, cutting the
/// lowest-priority material first, each section from its end; records every cut and the
/// estimate in `context_budget`.
fn fit(
    case: &mut CaseFile,
    mut dirty: Vec<String>,
    max: u64,
    omitted: &[Value],
    docs_cut: (usize, u64),
) {
    let mut cuts: Vec<(usize, u64)> = vec![(0, 0); CUT_ORDER.len()];
    if let Some(c) = cuts.get_mut(2) {
        *c = docs_cut;
    }
    if docs_cut.0 > 0 {
        // A doc was cut: nothing of lower priority stays.
        let dropped: u64 = dirty.iter().map(tokens).sum();
        if let Some(c) = cuts.first_mut() {
            *c = (dirty.len(), dropped);
        }
        dirty.clear();
        let dropped: u64 = case.recent_handoffs.iter().map(tokens).sum();
        if let Some(c) = cuts.get_mut(1) {
            *c = (case.recent_handoffs.len(), dropped);
        }
        case.recent_handoffs.clear();
    }
    // Each pass measures the whole, then cuts at least the excess, item by item (each
    // item's cost measured as it is cut); the omission entries the cuts add cost tokens too,
    // so a later pass trims what is still over.
    for _ in 0..8 {
        place(case, &dirty, &cuts, omitted, max, 0);
        let whole = tokens_of(serde_json::to_vec(case).map_or(0, |b| b.len()));
        if whole <= max {
            break;
        }
        let mut over = whole - max;
        for (k, section) in CUT_ORDER.iter().enumerate() {
            while over > 0 {
                let cost = match *section {
                    "repo_state.dirty" => dirty.pop().map(|d| tokens(&d)),
                    "recent_handoffs" => case.recent_handoffs.pop().map(|h| tokens(&h)),
                    "docs" => case
                        .docs
                        .pop()
                        .map(|d| tokens(&d) + case.evidence.pop().map_or(0, |e| tokens(&e))),
                    "facts" => case.facts.pop().map(|f| tokens(&f)),
                    "contradictions" => case.contradictions.pop().map(|c| tokens(&c)),
                    "stale_risks" => case.stale_risks.pop().map(|r| tokens(&r)),
                    _ => case.adrs.pop().map(|a| tokens(&a)),
                };
                let Some(cost) = cost else { break };
                if let Some(c) = cuts.get_mut(k) {
                    c.0 += 1;
                    c.1 += cost;
                }
                over = over.saturating_sub(cost);
            }
        }
    }
    // Measured as it will be: the dirty paths left and the omissions placed.
    place(case, &dirty, &cuts, omitted, max, 0);
    let whole = tokens_of(serde_json::to_vec(case).map_or(0, |b| b.len()));
    place(case, &dirty, &cuts, omitted, max, whole);
}

/// Writes the dirty paths and `context_budget` (omissions, estimate) into `case`.
fn place(
    case: &mut CaseFile,
    dirty: &[String],
    cuts: &[(usize, u64)],
    omitted: &[Value],
    max: u64,
    estimate: u64,
) {
    case.repo_state.0.shift_remove("dirty");
    if case.repo_state.0.contains_key("git") {
        // Keys in sorted order: `branch`, `dirty`, `dirty_count`, `git`, `head`.
        let mut sorted = Object::new();
        let old = std::mem::take(&mut case.repo_state.0);
        let mut inserted = false;
        for (k, v) in old {
            if !inserted && k.as_str() > "dirty" {
                sorted.0.insert("dirty".into(), json!(dirty));
                inserted = true;
            }
            sorted.0.insert(k, v);
        }
        if !inserted {
            sorted.0.insert("dirty".into(), json!(dirty));
        }
        case.repo_state = sorted;
    }
    let mut all: Vec<Value> = CUT_ORDER
        .iter()
        .zip(cuts)
        .filter(|(_, (n, _))| *n > 0)
        .map(|(s, (n, t))| {
            omission(
                s,
                *n,
                "token budget: lowest priority first, from the end",
                *t,
            )
        })
        .collect();
    all.extend(omitted.iter().cloned());
    let mut budget = Object::new();
    budget
        .0
        .insert("context_omissions".into(), Value::Array(all));
    budget.0.insert(
        "estimate".into(),
        json!("ceil(bytes of the compact JSON / 4)"),
    );
    budget
        .0
        .insert("estimated_tokens".into(), json!(estimate.max(max)));
    budget.0.insert("max_tokens".into(), json!(max));
    if estimate > 0 {
        budget.0.insert("estimated_tokens".into(), json!(estimate));
        budget
            .0
            .insert("within_budget".into(), json!(estimate <= max));
    } else {
        budget.0.insert("within_budget".into(), json!(true));
    }
    case.context_budget = budget;
}

/// Sets the case id from its content and returns its bytes.
fn finish(case: &mut CaseFile) -> Result<Vec<u8>, Error> {
    redact_case(case)?;
    case.id = "case_".into();
    let compact = serde_json::to_vec(case).map_err(|e| Error::internal(e.to_string()))?;
    case.id = format!("case_{}", sha_hex(&compact).get(..16).unwrap_or_default());
    let mut bytes = serde_json::to_vec_pretty(case).map_err(|e| Error::internal(e.to_string()))?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests;
