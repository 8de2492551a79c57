//! `craik audit RUN|HOME`: who did what under which policy, read from verified journals only,
//! streamed so that memory stays flat whatever the home's size.
//!
//! Every fact shown comes from a receipt whose signature, chain and checkpoints verified, or
//! from a verified review journal; the few facts that do not (the run's state file, paths on
//! this machine) are marked "not signed" in every format.
//!
//! Each journal is read twice and never held: the first pass verifies it (the same streaming
//! verifier as `craik receipts verify`) and collects the run's header (policy sets, signed
//! inputs, signed status) from the lines the verifier has passed; the second decodes those
//! lines again, checks that they chain to the head the first pass verified (so what is
//! explained is exactly what was verified, even if the file changed in between), and explains
//! them one at a time. Only the current receipt, the run's header and the summary's counters
//! are kept; the HTML report writes its per-run sections to a temporary file so that its
//! summary can come first.

pub(crate) mod bench;
mod html;
pub(crate) mod summary;

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use craik_kernel::{
    DecidedByKind, Envelope, KeyRing, RECEIPT_PAYLOAD_TYPE, ReceiptPayload, Report, Verifier,
    VerifyOptions,
};
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cmd::receipts::{self, Expected, JOURNAL_NAME};
use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};
use craik_host::run::store::Home;

use summary::Counts;

/// What `craik audit` is asked.
pub(crate) struct AuditArgs<'a> {
    pub(crate) target: &'a str,
    pub(crate) home: &'a Path,
    pub(crate) keys: &'a [PathBuf],
    pub(crate) policies: Option<&'a Path>,
    pub(crate) custom: &'a [PathBuf],
    pub(crate) grants: &'a [PathBuf],
    pub(crate) html: Option<&'a Path>,
    pub(crate) filters: &'a Filters,
    /// `--summary` (with `--summary-out`, if given): print the counts only, and sign them.
    pub(crate) summary: Option<Option<&'a Path>>,
    /// `--format jsonl`: one event per line.
    pub(crate) jsonl: bool,
}

/// What the audit is narrowed to. Verification is never narrowed: every journal selected
/// (all of them but for `--run`) is verified whole and a failure is always reported; the
/// filters only choose which verified receipts are explained and counted.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Filters {
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    run: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    actor: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    approver: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    capability: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    verdict: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    status: Vec<String>,
    #[serde(skip)]
    since_at: Option<OffsetDateTime>,
    #[serde(skip)]
    until_at: Option<OffsetDateTime>,
}

/// `--since`/`--until`: RFC 3339, or a date (its midnight UTC).
fn parse_time(flag: &str, value: &str) -> Result<OffsetDateTime, Failure> {
    if let Ok(t) = OffsetDateTime::parse(value, &Rfc3339) {
        return Ok(t.to_offset(time::UtcOffset::UTC));
    }
    let date = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(value, &date)
        .map(|d| d.midnight().assume_utc())
        .map_err(|_| {
            Failure::usage(format!(
                "--{flag} `{}`: not an RFC 3339 time (2026-11-22T02:25:02Z) or a date (2026-11-22)",
                craik_contracts::Truncated(value)
            ))
        })
}

fn utc_text(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_else(|_| t.to_string())
}

impl Filters {
    pub(crate) fn parse(a: &crate::cli::AuditCmd) -> Result<Self, Failure> {
        let since_at = a
            .since
            .as_deref()
            .map(|v| parse_time("since", v))
            .transpose()?;
        let until_at = a
            .until
            .as_deref()
            .map(|v| parse_time("until", v))
            .transpose()?;
        if let (Some(s), Some(u)) = (since_at, until_at)
            && u <= s
        {
            return Err(Failure::usage(format!(
                "--until `{}` is not after --since `{}`: no receipt could match",
                utc_text(u),
                utc_text(s)
            )));
        }
        Ok(Self {
            since: since_at.map(utc_text),
            until: until_at.map(utc_text),
            run: a.runs.clone(),
            actor: a.actors.clone(),
            approver: a.approvers.clone(),
            capability: a.capabilities.clone(),
            verdict: a.verdicts.clone(),
            status: a.statuses.clone(),
            since_at,
            until_at,
        })
    }

    /// A journal `--run` selects (by its run directory's name).
    fn journal_ok(&self, journal: &Path) -> bool {
        self.run.is_empty()
            || journal
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .is_some_and(|n| self.run.iter().any(|r| r == n))
    }

    /// A run `--status` selects (its signed status, or `unsigned`).
    fn status_ok(&self, status: &str) -> bool {
        self.status.is_empty() || self.status.iter().any(|s| s == status)
    }

    /// A receipt the receipt filters select.
    fn receipt_ok(&self, r: &ReceiptPayload, approval: Option<&ApprovalAudit>) -> bool {
        if self.since_at.is_some() || self.until_at.is_some() {
            let Ok(at) = OffsetDateTime::parse(&r.created_at, &Rfc3339) else {
                return false;
            };
            if self.since_at.is_some_and(|s| at < s) || self.until_at.is_some_and(|u| at >= u) {
                return false;
            }
        }
        let any = |list: &[String], hit: &dyn Fn(&str) -> bool| {
            list.is_empty() || list.iter().any(|v| hit(v))
        };
        any(&self.actor, &|a| r.actor == a)
            && any(&self.approver, &|a| {
                approval.is_some_and(|x| x.approver == a)
            })
            && any(&self.capability, &|c| match c.strip_suffix('*') {
                Some(prefix) => r.capability.starts_with(prefix),
                None => r.capability == c,
            })
            && any(&self.verdict, &|v| verdict_key(r) == v)
    }
}

/// `allow`, `requires_approval`, `deny`, or `outcome` (an outcome receipt).
fn verdict_key(r: &ReceiptPayload) -> &'static str {
    if r.decided_by.kind == DecidedByKind::Outcome {
        "outcome"
    } else {
        craik_host::policytest::decision_name(r.decision)
    }
}

/// A run's header: what its verified receipts say about it as a whole.
#[derive(Serialize, Default)]
struct RunHead {
    journal: String,
    /// Signed run id (from the receipts).
    run_id: Option<String>,
    /// Distinct policy-set hashes the receipts name, in order of first use.
    policy_sets: Vec<String>,
    /// The signed `run.inputs` receipt's metadata: hashes of inputs, grants, envelope and
    /// intent lock, the runner and workspace.
    inputs: Option<Value>,
    /// The status the verified journal signs: its closing receipt's, or a park's when its
    /// last receipt is one.
    status: Option<SignedStatus>,
    /// From the run's state file: NOT covered by a signature.
    unsigned: Option<Unsigned>,
    /// Issue 21: the case file and compiled prompt `run.inputs` signs, checked against the
    /// run directory's files.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    context: Vec<BoundFile>,
    /// The run's model steps and its token budget, when it has either (signed receipts;
    /// the counts are adapter-reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_steps: Option<ModelSteps>,
    /// The home ledger names this journal only through `craik ledger rebuild` (its entries
    /// carry `rebuilt: true`): it vouches for it from the rebuild on (issue 31 item 4).
    rebuilt: bool,
}

/// A file of the run directory whose sha256 the run's `run.inputs` receipt signs.
#[derive(Serialize, Clone)]
struct BoundFile {
    file: &'static str,
    /// The signed digest.
    sha256: String,
    /// `matches`, `changed` (the file's digest differs) or `missing`.
    state: &'static str,
    /// The compiled prompt's text, only when the file matches its signed digest (the HTML
    /// page lets it be opened).
    #[serde(skip)]
    prompt: Option<String>,
}

/// The bound files of the run whose journal is `journal`, from the signed `inputs`.
fn bound_files(journal: &Path, inputs: Option<&Value>) -> Vec<BoundFile> {
    let mut out = Vec::new();
    let Some(inputs) = inputs else {
        return out;
    };
    for (file, key) in [
        (craik_host::case::CASE_FILE, "case_file_sha256"),
        (craik_host::prompt::PROMPT_FILE, "compiled_prompt_sha256"),
    ] {
        let Some(signed) = inputs.get(key).and_then(Value::as_str) else {
            continue;
        };
        use craik_host::run::signed::{Bound, bound};
        let bytes = std::fs::read(journal.with_file_name(file)).ok();
        let state = match bound(bytes.as_deref(), Some(signed)) {
            Bound::Matches => "matches",
            Bound::Changed(_) => "changed",
            _ => "missing",
        };
        let prompt = match (&bytes, state, key) {
            (Some(b), "matches", "compiled_prompt_sha256") => craik_host::prompt::text_of(b).ok(),
            _ => None,
        };
        out.push(BoundFile {
            file,
            sha256: signed.to_owned(),
            state,
            prompt,
        });
    }
    out
}

/// What a run's `model.step` receipts add up to, against the budget its `run.inputs` signs.
#[derive(Serialize, Clone)]
struct ModelSteps {
    #[serde(flatten)]
    usage: craik_host::run::driver::TokenUsage,
    provider_token_budget: Option<u64>,
    tokens_left: Option<u64>,
    reported_by: &'static str,
}

impl ModelSteps {
    fn of(facts: &Facts) -> Option<Self> {
        let budget = match &facts.inputs {
            Some(Value::Object(i)) => i.get("provider_token_budget").and_then(Value::as_u64),
            _ => None,
        };
        (facts.tokens.model_steps > 0 || budget.is_some()).then(|| Self {
            usage: facts.tokens,
            provider_token_budget: budget,
            tokens_left: budget.map(|b| b.saturating_sub(facts.tokens.total_tokens)),
            reported_by: "adapter",
        })
    }

    fn line(&self) -> String {
        let u = &self.usage;
        format!(
            "{} model step(s), {} tokens ({} in, {} out){}{} — adapter-reported",
            u.model_steps,
            u.total_tokens,
            u.input_tokens,
            u.output_tokens,
            craik_host::run::driver::unknown_note(u),
            match (self.provider_token_budget, self.tokens_left) {
                (Some(b), Some(left)) => format!("; budget {b}, {left} left"),
                _ => "; no token budget".to_owned(),
            }
        )
    }
}

/// A `model.step` receipt, one line: what the adapter reported, escaped.
fn model_step_line(r: &ReceiptPayload) -> Option<String> {
    if r.capability != craik_host::run::driver::MODEL_STEP {
        return None;
    }
    let m = &r.result.metadata.0;
    let n = |k: &str| m.get(k).and_then(Value::as_u64).unwrap_or(0);
    let t = |k: &str| craik_contracts::one_line(m.get(k).and_then(Value::as_str).unwrap_or("-"));
    let used = if m.get("usage").and_then(Value::as_str) == Some("unknown") {
        "UNKNOWN usage".to_owned()
    } else {
        format!(
            "{} tokens ({} in, {} out)",
            n("total_tokens"),
            n("input_tokens"),
            n("output_tokens")
        )
    };
    Some(format!(
        "model step: {used}, {} ms, {} retr{}, {}, {} at {}{}; run total {}{} ({}-reported)",
        n("latency_ms"),
        n("retries"),
        if n("retries") == 1 { "y" } else { "ies" },
        if m.get("streamed").and_then(Value::as_bool) == Some(true) {
            "streamed"
        } else {
            "not streamed"
        },
        t("outcome"),
        t("endpoint_host"),
        m.get("response_id")
            .and_then(Value::as_str)
            .map(|id| format!(", response {}", craik_contracts::one_line(id)))
            .unwrap_or_default(),
        n("cumulative_total_tokens"),
        m.get("provider_token_budget")
            .and_then(Value::as_u64)
            .map(|b| format!(" of a budget of {b}"))
            .unwrap_or_default(),
        t("reported_by"),
    ))
}

#[derive(Serialize, Clone)]
struct SignedStatus {
    status: String,
    reason: String,
    receipt: String,
    /// A park awaiting approval: the run may continue.
    may_continue: bool,
}

/// One verified receipt and what explains it.
#[derive(Serialize)]
struct Entry {
    line: usize,
    receipt: ReceiptPayload,
    /// The grant among the determining policies (`grant.<id>` → `<id>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    grant: Option<String>,
    /// For a receipt decided by an approval: the approval's verified review.
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalAudit>,
    /// For a memory proposal the run made: its signed review, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_review: Option<MemoryReviewAudit>,
}

#[derive(Serialize)]
struct ApprovalAudit {
    id: String,
    approver: String,
    /// False when no verified review journal names this run, request and approver.
    verified: bool,
    /// The review denied the approval (an `approval.review` receipt of a denial).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    denied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reviewed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

/// A memory proposal's review (`reviews/review_<id>/`), verified.
#[derive(Serialize)]
struct MemoryReviewAudit {
    /// `approved`, `rejected`, `pending` (no review journal) or `invalid` (see `problem`).
    decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<String>,
    /// The reviewer's signed reason (issue 31: shown like an approval's).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reviewed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

#[derive(Serialize)]
struct Unsigned {
    note: &'static str,
    status: Option<String>,
    stop_reason: Option<String>,
    ended_at: Option<String>,
}

const UNSIGNED_NOTE: &str = "from run.json, which is not signed: the host's own account";

/// The top of the report (`--format json`), before its runs.
#[derive(Serialize)]
struct Top<'a> {
    schema: &'static str,
    version: &'static str,
    /// Key ids the journals were verified with.
    trusted_keys: &'a [String],
    /// The policy-set hash every receipt had to name (`--policies`/`--custom`), if asked.
    expected_policy_set: Option<&'a str>,
    /// The grants hash the run's inputs had to sign (`--grants`), if asked.
    expected_grants: Option<&'a str>,
    filters: &'a Filters,
    /// The home ledger, checked first when the target is a home.
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger: Option<&'a craik_host::ledger::HomeCheck>,
}

/// One `--format jsonl` line: `event` is `ledger`, `run`, `receipt`, `journal_changed` or
/// `summary` (docs/receipts.md#audit-events).
#[derive(Serialize)]
struct Event<'a, T: Serialize> {
    schema: &'static str,
    version: &'static str,
    event: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

/// How the report is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Human,
    Json,
    Jsonl,
    /// `--summary`: the counts only (in the format asked).
    Summary,
}

/// Where a run's parts go as they are read.
struct Emitter<'o> {
    out: &'o mut Out,
    shape: Shape,
    format: Format,
    /// Runs written so far (JSON separators).
    runs: usize,
    /// Entries of the current run written so far.
    entries: usize,
    shown: Shown,
}

/// What every run's header repeats: the keys and whether bundles were compared.
struct Shown {
    trusted_keys: String,
    expected_policy_set: bool,
    expected_grants: bool,
}

fn event<T: Serialize>(out: &mut Out, event: &'static str, body: &T) -> Result<(), Failure> {
    out.json_line(&Event {
        schema: "craik.audit_event",
        version: "0.1.0",
        event,
        body,
    })
}

#[derive(Serialize)]
struct RunEvent<'a> {
    #[serde(flatten)]
    head: &'a RunHead,
    valid: bool,
    verification: &'a Report,
}

#[derive(Serialize)]
struct ReceiptEvent<'a> {
    journal: &'a str,
    run_id: Option<&'a str>,
    #[serde(flatten)]
    entry: &'a Entry,
}

#[derive(Serialize)]
struct ChangedEvent<'a> {
    journal: &'a str,
    run_id: Option<&'a str>,
    why: &'a str,
}

impl Emitter<'_> {
    fn begin(&mut self, top: &Top<'_>) -> Result<(), Failure> {
        match self.shape {
            Shape::Json => {
                self.out.json_open(top)?;
                self.out.text(",\"runs\":[")?;
            }
            Shape::Jsonl => {
                if let Some(ledger) = top.ledger {
                    event(self.out, "ledger", ledger)?;
                }
            }
            Shape::Human => {
                if let Some(check) = top.ledger {
                    human_ledger(self.out, check)?;
                }
            }
            Shape::Summary => {
                if let Some(check) = top.ledger.filter(|c| !c.is_valid())
                    && self.format == Format::Human
                {
                    human_ledger(self.out, check)?;
                }
            }
        }
        Ok(())
    }

    fn run_start(&mut self, head: &RunHead, report: &Report) -> Result<(), Failure> {
        self.entries = 0;
        match self.shape {
            Shape::Json => {
                if self.runs > 0 {
                    self.out.text(",")?;
                }
                self.out.json_open(head)?;
                self.out.text(",\"timeline\":[")?;
            }
            Shape::Jsonl => event(
                self.out,
                "run",
                &RunEvent {
                    head,
                    valid: report.is_valid(),
                    verification: report,
                },
            )?,
            Shape::Human => human_head(self.out, &self.shown, head, report)?,
            Shape::Summary => {
                if !report.is_valid() && self.format == Format::Human {
                    human_head(self.out, &self.shown, head, report)?;
                }
            }
        }
        self.runs += 1;
        Ok(())
    }

    fn entry(&mut self, head: &RunHead, entry: &Entry) -> Result<(), Failure> {
        match self.shape {
            Shape::Json => {
                if self.entries > 0 {
                    self.out.text(",")?;
                }
                self.out.json_piece(entry)?;
            }
            Shape::Jsonl => event(
                self.out,
                "receipt",
                &ReceiptEvent {
                    journal: &head.journal,
                    run_id: head.run_id.as_deref(),
                    entry,
                },
            )?,
            Shape::Human => human_entry(self.out, entry)?,
            Shape::Summary => {}
        }
        self.entries += 1;
        Ok(())
    }

    /// The run's verdict: the first pass's, or why the second pass found other bytes.
    fn run_end(
        &mut self,
        head: &RunHead,
        report: &Report,
        changed: Option<&str>,
    ) -> Result<(), Failure> {
        match self.shape {
            Shape::Json => {
                self.out.text("],\"valid\":")?;
                self.out.json_piece(&report.is_valid())?;
                self.out.text(",\"verification\":")?;
                self.out.json_piece(report)?;
                self.out.text("}")?;
            }
            Shape::Jsonl => {
                if let Some(why) = changed {
                    event(
                        self.out,
                        "journal_changed",
                        &ChangedEvent {
                            journal: &head.journal,
                            run_id: head.run_id.as_deref(),
                            why,
                        },
                    )?;
                }
            }
            Shape::Human | Shape::Summary => {
                if let Some(why) = changed.filter(|_| self.format == Format::Human) {
                    self.out.line(format_args!(
                        "  journal     INVALID: changed during the audit: {why}"
                    ))?;
                }
            }
        }
        Ok(())
    }

    fn finish(
        &mut self,
        summary: &summary::Summary<'_>,
        written: Option<&Path>,
    ) -> Result<(), Failure> {
        match self.shape {
            Shape::Json => {
                self.out.text("],\"summary\":")?;
                self.out.json_piece(summary)?;
                self.out.text("}\n")?;
            }
            Shape::Jsonl => {
                #[derive(Serialize)]
                struct Wrapped<'a> {
                    summary: &'a summary::Summary<'a>,
                }
                event(self.out, "summary", &Wrapped { summary })?;
            }
            Shape::Human => {}
            Shape::Summary => match self.format {
                Format::Json | Format::Junit => {
                    #[derive(Serialize)]
                    struct Shown<'a> {
                        #[serde(flatten)]
                        summary: &'a summary::Summary<'a>,
                        signed: Option<String>,
                    }
                    self.out.json(&Shown {
                        summary,
                        signed: written.map(|p| p.display().to_string()),
                    })?;
                }
                Format::Human => summary::human(self.out, summary, written)?,
            },
        }
        Ok(())
    }
}

pub(crate) fn audit(out: &mut Out, format: Format, args: &AuditArgs<'_>) -> Result<Exit, Failure> {
    let (journals, home_target) = targets(args.target, args.home)?;
    let (ring, trusted_keys) = receipts::trusted_keys(
        out,
        args.keys,
        args.home,
        journals.first().map(PathBuf::as_path),
    )?;
    let journals: Vec<PathBuf> = journals
        .into_iter()
        .filter(|j| args.filters.journal_ok(j))
        .collect();
    let expected_policy_set = receipts::expected_policy_set(args.policies, args.custom)?;
    let expect = Expected::of(args.grants)?;
    // The key the summary is signed with, and where it goes: refused before any work.
    let signing = args
        .summary
        .map(|to| summary::Signing::prepare(home_target.as_deref().unwrap_or(args.home), to))
        .transpose()?;
    // A home: its ledger first, then every journal against it.
    let homes = home_target
        .as_ref()
        .map(|h| receipts::home_checks(std::slice::from_ref(h), &ring))
        .unwrap_or_default();
    let shape = match (args.summary.is_some(), args.jsonl, format) {
        (true, _, _) => Shape::Summary,
        (false, true, _) => Shape::Jsonl,
        (false, false, Format::Json | Format::Junit) => Shape::Json,
        (false, false, Format::Human) => Shape::Human,
    };
    let mut emit = Emitter {
        out,
        shape,
        format,
        runs: 0,
        entries: 0,
        shown: Shown {
            trusted_keys: trusted_keys.join(", "),
            expected_policy_set: expected_policy_set.is_some(),
            expected_grants: expect.grants.is_some(),
        },
    };
    let ledger = homes.first();
    emit.begin(&Top {
        schema: "craik.audit",
        version: "0.1.0",
        trusted_keys: &trusted_keys,
        expected_policy_set: expected_policy_set.as_deref(),
        expected_grants: expect.grants.as_deref(),
        filters: args.filters,
        ledger,
    })?;
    let mut page = args.html.map(html::Page::create).transpose()?;
    let mut counts = Counts::default();
    // A run audited alone is checked against its home's ledger too (issue 31 item 1), as
    // `receipts verify` does; the ledger's own section stays for a home audit.
    let enclosing = if home_target.is_none() {
        receipts::enclosing_homes(&journals, &homes, &ring)
    } else {
        Vec::new()
    };
    let mut checked_against = homes.clone();
    checked_against.extend(enclosing.iter().cloned());
    let ctx = Ctx {
        ring: &ring,
        policy_set: expected_policy_set.as_deref(),
        expect: &expect,
        homes: &checked_against,
        enclosing: &enclosing,
        filters: args.filters,
    };
    let mut all_valid = ledger.is_none_or(craik_host::ledger::HomeCheck::is_valid);
    for journal in &journals {
        // A home's journals verify with its ledger's keys (earlier keys its rotations vouch
        // for), as `receipts verify` does.
        let ctx = Ctx {
            ring: receipts::ring_for(&checked_against, journal, &ring),
            ..ctx
        };
        let valid = audit_run(&ctx, journal, &mut emit, page.as_mut(), &mut counts)?;
        all_valid &= valid;
    }
    // Run journals the ledger names that are gone (missing review journals are shown in
    // the ledger's section).
    let runs_dir = ledger
        .and_then(|c| c.ledger.parent())
        .map(|h| h.join("runs"))
        .unwrap_or_default();
    for problem in homes
        .iter()
        .flat_map(|c| c.problems.iter())
        .filter(|p| p.what == "missing" && p.journal.starts_with(&runs_dir))
        .filter(|p| args.filters.journal_ok(&p.journal))
    {
        let head = RunHead {
            journal: problem.journal.display().to_string(),
            ..RunHead::default()
        };
        let report = receipts::missing_report(problem);
        emit.run_start(&head, &report)?;
        emit.run_end(&head, &report, None)?;
        if let Some(page) = page.as_mut() {
            page.run_start(&head, &report, &emit.shown)?;
            page.run_end(&report, None)?;
        }
        counts.journal(false);
        all_valid = false;
    }
    let head = ledger.and_then(summary::LedgerHead::of);
    let summary = summary::Summary::new(args.target, &trusted_keys, args.filters, head, &counts);
    let written = match &signing {
        Some(s) => Some(s.sign(&summary)?),
        None => None,
    };
    if let Some(page) = page {
        let file = page.finish(&summary, ledger, &emit.shown)?;
        emit.out
            .diag(format_args!("craik: wrote {}", file.display()))?;
    }
    emit.finish(&summary, written.as_deref())?;
    if let Some(w) = &written
        && shape != Shape::Summary
    {
        emit.out
            .diag(format_args!("craik: signed summary {}", w.display()))?;
    }
    Ok(if all_valid {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// What every run of one audit is checked against.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    ring: &'a KeyRing,
    policy_set: Option<&'a str>,
    expect: &'a Expected,
    homes: &'a [craik_host::ledger::HomeCheck],
    /// The homes that hold a run audited alone: a missing or broken ledger fails its journal.
    enclosing: &'a [craik_host::ledger::HomeCheck],
    filters: &'a Filters,
}

/// Journals named by `target`: every run of a home (a directory holding `runs/`, or `runs/`
/// itself), else one run (id under `home`, run directory or journal file).
fn targets(target: &str, home: &Path) -> Result<(Vec<PathBuf>, Option<PathBuf>), Failure> {
    let path = Path::new(target);
    let home_target = path.join("runs").is_dir().then(|| path.to_owned());
    let runs = if path.join("runs").is_dir() {
        Some(path.join("runs"))
    } else if path.is_dir() && !path.join(JOURNAL_NAME).exists() && path.ends_with("runs") {
        Some(path.to_owned())
    } else {
        None
    };
    let Some(runs) = runs else {
        return Ok((vec![receipts::resolve(target, home)?], None));
    };
    let found = receipts::run_journals(&runs)?;
    let has_ledger = home_target
        .as_ref()
        .is_some_and(|h| h.join(craik_host::ledger::LEDGER_NAME).is_file());
    if found.is_empty() && !has_ledger {
        return Err(Failure::usage(format!(
            "{}: no run journals ({JOURNAL_NAME}) found",
            runs.display()
        )));
    }
    Ok((found, home_target))
}

/// The home a run journal sits in (`<home>/runs/<run>/receipts.jsonl`).
fn home_of(journal: &Path) -> Option<Home> {
    let runs = journal.parent()?.parent()?;
    if runs.file_name()? != "runs" {
        return None;
    }
    Some(Home::new(runs.parent()?))
}

/// What [`receipts::checked`] reports about what signed receipts bind (not the chain).
const BOUND_CHECKS: [&str; 4] = ["approval", "inputs", "memory", "not closed"];

/// Bytes read at a time.
const CHUNK: usize = 1 << 20;

/// A journal line's receipt: its payload's hash (`sha256:`) and the payload decoded; `None`
/// for another envelope (a checkpoint) or a line that is not one.
fn decode_line(line: &[u8]) -> Option<(String, ReceiptPayload)> {
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.payload_type != RECEIPT_PAYLOAD_TYPE {
        return None;
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&envelope.payload)
        .ok()?;
    let mut receipt: ReceiptPayload = serde_json::from_slice(&payload).ok()?;
    // Issue 30: a journal signed before the current rule set (or by another build) may hold a
    // secret in its free text; the audit (human, JSON, HTML) shows it redacted. The hash is of
    // the signed bytes.
    for text in [
        &mut receipt.target,
        &mut receipt.reason,
        &mut receipt.result.summary,
    ] {
        // As signed unless a secret is in it (`--format json` is the signed receipt).
        *text = craik_kernel::redact_record(text)
            .map_or_else(|_| craik_kernel::REDACTED.to_owned(), |r| r.text);
    }
    Some((craik_kernel::receipt_hash(&payload), receipt))
}

/// The run's header facts, from the receipts the verifier has passed.
#[derive(Default)]
struct Facts {
    policy_sets: Vec<String>,
    inputs: Option<Value>,
    closing: Option<SignedStatus>,
    park: Option<SignedStatus>,
    /// The last receipt seen is a park.
    last_is_park: bool,
    /// What the `model.step` receipts add up to.
    tokens: craik_host::run::driver::TokenUsage,
}

/// Policy-set hashes kept per run (a run names one; more is shown as "and more").
const MAX_POLICY_SETS: usize = 64;

impl Facts {
    fn add(&mut self, r: &ReceiptPayload) {
        if !self.policy_sets.contains(&r.policy_set) && self.policy_sets.len() < MAX_POLICY_SETS {
            self.policy_sets.push(r.policy_set.clone());
        }
        if r.seq == 0 && r.capability == craik_host::run::driver::RUN_INPUTS {
            self.inputs = Some(Value::Object(
                r.result.metadata.0.clone().into_iter().collect(),
            ));
        }
        let status = || {
            Some(SignedStatus {
                status: meta(r, "status")?.to_owned(),
                reason: r.reason.clone(),
                receipt: r.id.clone(),
                may_continue: r.capability == craik_host::run::driver::RUN_PARKED,
            })
        };
        self.last_is_park = false;
        self.tokens.add_receipt(r);
        if r.capability == craik_host::run::driver::RUN_CLOSED {
            self.closing = status();
        } else if r.capability == craik_host::run::driver::RUN_PARKED {
            self.park = status();
            self.last_is_park = true;
        }
    }

    fn status(&self) -> Option<SignedStatus> {
        self.closing
            .clone()
            .or_else(|| self.park.clone().filter(|_| self.last_is_park))
    }
}

/// First pass: verify the journal as `receipts verify` does, streamed, and collect the
/// header facts from each receipt the verifier passes (it hands them over parsed: no second
/// decode). Memory: one chunk and one verifier window.
fn verify_pass(journal: &Path, ctx: &Ctx<'_>) -> Result<(Report, Facts), Failure> {
    let mut file = std::fs::File::open(journal)
        .map_err(|e| Failure::usage(format!("{}: {e}", journal.display())))?;
    let mut facts = Facts::default();
    let mut verifier = Verifier::new(
        ctx.ring,
        VerifyOptions {
            policy_set: ctx.policy_set,
            threads: receipts::threads(),
            batch: true,
            allow_open: true,
        },
    )
    .visiting(|_, r| facts.add(r));
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::usage(format!("{}: {e}", journal.display()))),
        };
        if !verifier.feed(buf.get(..n).unwrap_or_default()) {
            break;
        }
    }
    let report = verifier.finish();
    Ok((report, facts))
}

/// Second pass: decode the verified lines again (up to `last_good`), check they chain to the
/// head the first pass verified, and hand each to `each`. Returns why the bytes differ from
/// the verified ones, if they do.
fn explain_pass(
    journal: &Path,
    last_good: usize,
    report: &Report,
    each: &mut dyn FnMut(usize, ReceiptPayload) -> Result<(), Failure>,
) -> Result<Option<String>, Failure> {
    if last_good == 0 {
        return Ok(None);
    }
    let file = std::fs::File::open(journal)
        .map_err(|e| Failure::usage(format!("{}: {e}", journal.display())))?;
    let mut reader = std::io::BufReader::with_capacity(CHUNK, file);
    let mut line = Vec::new();
    let mut line_no = 0usize;
    let mut prev: Option<String> = None;
    let mut seq = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::usage(format!("{}: {e}", journal.display())))?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        line_no += 1;
        if line_no > last_good {
            break;
        }
        let Some((hash, r)) = decode_line(line.strip_suffix(b"\n").unwrap_or(&line)) else {
            continue;
        };
        if r.seq != seq || r.prev != prev {
            return Ok(Some(format!(
                "line {line_no}: seq {} does not chain to the receipts verified before it",
                r.seq
            )));
        }
        prev = Some(hash);
        seq += 1;
        each(line_no, r)?;
    }
    if seq != report.receipts || prev != report.last_hash {
        return Ok(Some(format!(
            "{seq} receipts read back ending at {}, but {} verified ending at {}",
            prev.as_deref().unwrap_or("nothing"),
            report.receipts,
            report.last_hash.as_deref().unwrap_or("nothing")
        )));
    }
    Ok(None)
}

/// Audits one journal; returns whether it is valid.
fn audit_run(
    ctx: &Ctx<'_>,
    journal: &Path,
    emit: &mut Emitter<'_>,
    mut page: Option<&mut html::Page>,
    counts: &mut Counts,
) -> Result<bool, Failure> {
    let (report, facts) = verify_pass(journal, ctx)?;
    let mut report = receipts::ledger_unusable(
        ctx.enclosing,
        journal,
        receipts::against_ledger(
            ctx.homes,
            journal,
            receipts::checked(journal, report, ctx.ring, ctx.expect),
        ),
    );
    // Lines before the first failing line verified. A failure of what the receipts bind (an
    // approval without its review, an edited inputs.json or memory file, an unclosed journal)
    // leaves every line signed: all are shown, the one concerned marked by its line.
    let last_good = match &report.failure {
        Some(f) if BOUND_CHECKS.contains(&f.what.as_str()) => usize::MAX,
        Some(f) if f.line > 0 => f.line - 1,
        _ => usize::MAX,
    };
    // INVARIANT: a check after the chain fails either what receipts bind (all lines shown),
    // the whole journal (line 0, all shown) or its first receipt (line 1, none shown): the
    // facts of the first pass hold exactly for the lines shown, or are dropped.
    let facts = if last_good == 0 {
        Facts::default()
    } else {
        facts
    };
    let valid = report.is_valid();
    let status = facts.status();
    let unsigned = std::fs::read(journal.with_file_name("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|run| {
            let text = |k: &str| run.get(k).and_then(Value::as_str).map(str::to_owned);
            Unsigned {
                note: UNSIGNED_NOTE,
                status: text("status"),
                stop_reason: text("stop_reason"),
                ended_at: text("ended_at"),
            }
        });
    let status_key = status
        .as_ref()
        .map_or_else(|| "unsigned".to_owned(), |s| s.status.clone());
    // `--status` narrows valid runs; an invalid journal is always reported.
    if valid && !ctx.filters.status_ok(&status_key) {
        return Ok(true);
    }
    let context = bound_files(journal, facts.inputs.as_ref());
    let model_steps = ModelSteps::of(&facts);
    let head = RunHead {
        model_steps,
        rebuilt: ctx
            .homes
            .iter()
            .any(|c| craik_host::audits::entered_by_rebuild(c, journal)),
        journal: journal.display().to_string(),
        run_id: report.run_id.clone(),
        policy_sets: facts.policy_sets,
        inputs: facts.inputs,
        status,
        unsigned,
        context,
    };
    emit.run_start(&head, &report)?;
    if let Some(p) = page.as_deref_mut() {
        p.run_start(&head, &report, &emit.shown)?;
    }
    let home = home_of(journal);
    let run_id = report.run_id.clone();
    let explained = valid || ctx.filters.status_ok(&status_key);
    let changed = if explained {
        explain_pass(journal, last_good, &report, &mut |line, receipt| {
            let entry = explain(line, receipt, home.as_ref(), ctx.ring, run_id.as_deref());
            if !ctx
                .filters
                .receipt_ok(&entry.receipt, entry.approval.as_ref())
            {
                return Ok(());
            }
            counts.entry(&head, &entry);
            emit.entry(&head, &entry)?;
            if let Some(p) = page.as_deref_mut() {
                p.entry(&head, &entry)?;
            }
            Ok(())
        })?
    } else {
        None
    };
    if let Some(why) = &changed {
        report.failure = Some(craik_kernel::Failure {
            line: 0,
            seq: None,
            what: "changed".into(),
            why: format!("the journal changed during the audit: {why}"),
        });
    }
    emit.run_end(&head, &report, changed.as_deref())?;
    if let Some(p) = page {
        p.run_end(&report, changed.as_deref())?;
    }
    counts.run(&status_key, report.is_valid());
    Ok(report.is_valid())
}

/// A verified receipt with what explains it.
fn explain(
    line: usize,
    receipt: ReceiptPayload,
    home: Option<&Home>,
    ring: &KeyRing,
    run_id: Option<&str>,
) -> Entry {
    let grant = receipt
        .determining_policies
        .iter()
        .find_map(|p| p.strip_prefix("grant."))
        .map(str::to_owned);
    let approval = (receipt.decided_by.kind == DecidedByKind::Approval)
        .then(|| approval_of(&receipt, home, ring, run_id));
    let memory_review = memory_review_of(&receipt, home, ring);
    Entry {
        line,
        receipt,
        grant,
        approval,
        memory_review,
    }
}

/// The signed review of a memory proposal the run made (allowed `memory.propose`).
fn memory_review_of(
    r: &ReceiptPayload,
    home: Option<&Home>,
    ring: &KeyRing,
) -> Option<MemoryReviewAudit> {
    if r.capability != "memory.propose"
        || r.decision != craik_kernel::Decision::Allow
        || r.decided_by.kind == DecidedByKind::Outcome
    {
        return None;
    }
    let id = r.action.as_deref().filter(|a| a.starts_with("memprop_"))?;
    if craik_contracts::id_problem(id).is_some() {
        return None;
    }
    let home = home?;
    Some(
        match craik_host::run::memory::signed_memory_review(home, ring, id) {
            Ok(Some(review)) => MemoryReviewAudit {
                decision: if review.approved {
                    "approved"
                } else {
                    "rejected"
                },
                by: Some(review.by),
                reason: Some(review.reason),
                reviewed_at: Some(review.reviewed_at),
                problem: None,
            },
            Ok(None) => MemoryReviewAudit {
                decision: "pending",
                by: None,
                reason: None,
                reviewed_at: None,
                problem: None,
            },
            Err(why) => MemoryReviewAudit {
                decision: "invalid",
                by: None,
                reason: None,
                reviewed_at: None,
                problem: Some(why),
            },
        },
    )
}

/// The verified review behind an approval-decided receipt (`by` = `user:x via approval_id`).
fn approval_of(
    receipt: &ReceiptPayload,
    home: Option<&Home>,
    ring: &KeyRing,
    run_id: Option<&str>,
) -> ApprovalAudit {
    // A review the run picked up (`approval.review`) names its approval as its action.
    let review_receipt = receipt.capability == craik_host::run::driver::APPROVAL_REVIEW;
    let (approver, id) = if review_receipt {
        (
            receipt.decided_by.by.as_str(),
            receipt.action.as_deref().unwrap_or_default(),
        )
    } else {
        receipt
            .decided_by
            .by
            .rsplit_once(" via ")
            .map_or((receipt.decided_by.by.as_str(), ""), |(a, i)| (a, i))
    };
    let mut audit = ApprovalAudit {
        id: id.to_owned(),
        approver: approver.to_owned(),
        verified: false,
        denied: review_receipt && receipt.decision != craik_kernel::Decision::Allow,
        reason: None,
        reviewed_at: None,
        expires_at: None,
        problem: None,
    };
    let review = match (home, run_id) {
        (Some(home), Some(run)) if !id.is_empty() && review_receipt => {
            craik_host::run::approvals::decided_review(home, ring, id, run)
                .filter(|r| r.approved == (receipt.decision == craik_kernel::Decision::Allow))
        }
        (Some(home), Some(run)) if !id.is_empty() => {
            craik_host::run::approvals::signed_review(home, ring, id, run)
        }
        _ => None,
    };
    match review {
        Some(r) if r.approved_by == approver && r.request_hash == receipt.request_hash => {
            audit.verified = true;
            audit.reason = Some(r.reason);
            audit.reviewed_at = Some(r.reviewed_at);
            audit.expires_at = r.expires_at.map(|t| t.to_string());
        }
        Some(_) => {
            audit.problem = Some("the review journal names another approver or request".to_owned());
        }
        None => {
            audit.problem = Some(format!(
                "no verified review journal (reviews/{id}/) names this run"
            ));
        }
    }
    audit
}

/// `action_<step>_<k>` → step (the host's action ids carry the step that proposed them).
fn step_of(action: Option<&str>) -> Option<u64> {
    let rest = action?.strip_prefix("action_")?;
    rest.split('_').next()?.parse().ok()
}

fn meta<'a>(receipt: &'a ReceiptPayload, key: &str) -> Option<&'a str> {
    receipt.result.metadata.0.get(key).and_then(Value::as_str)
}

/// A receipt's verdict (`allow`, `deny [shadow]`, ...) and reason, or an outcome's status
/// and summary.
fn verdict(r: &ReceiptPayload) -> String {
    if r.decided_by.kind == DecidedByKind::Outcome {
        return format!("outcome {}: {}", r.result.status.as_str(), r.result.summary);
    }
    let shadow = if r.mode == craik_kernel::Mode::Shadow {
        " [shadow]"
    } else {
        ""
    };
    format!(
        "{}{shadow} — {}",
        craik_host::policytest::decision_name(r.decision),
        r.reason
    )
}

/// What decided a receipt.
fn decided_by(r: &ReceiptPayload) -> String {
    match r.decided_by.kind {
        DecidedByKind::Policy => format!("policy {}", r.determining_policies.join(", ")),
        DecidedByKind::Approval => format!("approval of {}", r.decided_by.by),
        DecidedByKind::Default => "default (no policy permitted it)".to_owned(),
        DecidedByKind::Kernel => "the kernel".to_owned(),
        DecidedByKind::Outcome => "outcome".to_owned(),
        DecidedByKind::Operator => format!("operator {}", r.decided_by.by),
    }
}

fn approval_line(a: &ApprovalAudit) -> String {
    if a.verified {
        format!(
            "{} by {} via {}: \"{}\" (signed review {}, expires {})",
            if a.denied { "denied" } else { "approved" },
            a.approver,
            a.id,
            a.reason.as_deref().unwrap_or_default(),
            a.reviewed_at.as_deref().unwrap_or("?"),
            a.expires_at.as_deref().unwrap_or("never")
        )
    } else {
        format!(
            "UNVERIFIED approval {} by {}: {}",
            a.id,
            a.approver,
            a.problem.as_deref().unwrap_or_default()
        )
    }
}

fn what(r: &ReceiptPayload) -> String {
    let op = meta(r, "operation")
        .map(|o| format!(" {o}"))
        .unwrap_or_default();
    format!("{}{op} {}", r.capability, r.target)
}

fn human_ledger(out: &mut Out, check: &craik_host::ledger::HomeCheck) -> Result<(), Failure> {
    out.line(format_args!(
        "audit of the home ledger {}",
        check.ledger.display()
    ))?;
    match &check.report {
        Some(r) if check.is_valid() => out.line(format_args!(
            "  ledger      valid: {} entries ({} recorded by `craik ledger rebuild`), every journal of the home named and ending at its recorded root",
            r.receipts, check.rebuilt
        ))?,
        _ => {
            for p in &check.problems {
                out.line(format_args!(
                    "  ledger      INVALID: {}: {}: {}",
                    p.journal.display(),
                    p.what,
                    p.why
                ))?;
            }
        }
    }
    Ok(())
}

fn human_head(out: &mut Out, shown: &Shown, run: &RunHead, v: &Report) -> Result<(), Failure> {
    out.line(format_args!("audit of {}", run.journal))?;
    match &v.failure {
        None => out.line(format_args!(
            "  journal     valid, {}: {} receipts, {} checkpoints (keys {})",
            if v.closed { "closed" } else { "open" },
            v.receipts,
            v.checkpoints,
            shown.trusted_keys
        ))?,
        Some(f) if BOUND_CHECKS.contains(&f.what.as_str()) => out.line(format_args!(
            "  journal     INVALID at line {}: {}: {} — every signature verified; all {} receipt(s) are shown",
            f.line, f.what, f.why, v.receipts
        ))?,
        Some(f) => out.line(format_args!(
            "  journal     INVALID at line {}: {}: {} — only the {} receipt(s) before it are shown",
            f.line,
            f.what,
            f.why,
            if f.line == 1 { 0 } else { v.receipts }
        ))?,
    }
    out.line(format_args!(
        "  run         {}",
        run.run_id.as_deref().unwrap_or("?")
    ))?;
    if run.rebuilt {
        out.line(
            "  ledger      entered by `craik ledger rebuild` (rebuilt): the ledger vouches for this journal from the rebuild on, not from when it was written",
        )?;
    }
    out.line(format_args!(
        "  policy set  {}{}",
        run.policy_sets.join(", "),
        match (shown.expected_policy_set, v.is_valid()) {
            (true, true) => " (matches the --policies/--custom bundle)",
            (true, false) => "",
            (false, _) => " (not compared: pass --policies/--custom)",
        }
    ))?;
    if let Some(Value::Object(inputs)) = &run.inputs {
        let h = |k: &str| inputs.get(k).and_then(Value::as_str).unwrap_or("?");
        out.line(format_args!(
            "  inputs      inputs {}, grants {}{}, envelope {}, intent {} (runner {})",
            h("inputs_sha256"),
            h("grants_sha256"),
            if shown.expected_grants && v.is_valid() {
                " (matches --grants)"
            } else {
                ""
            },
            h("envelope_sha256"),
            h("intent_sha256"),
            h("runner")
        ))?;
        // Issue 22: the adapter as launched (signed in run.inputs): backend, version, digest.
        if let Some(Value::Object(a)) = inputs.get("runner_adapter") {
            let f = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("-");
            out.line(format_args!(
                "  adapter     {} ({} {}, {}{}) {} {}{}",
                craik_contracts::one_line(f("id")),
                craik_contracts::one_line(f("backend")),
                craik_contracts::one_line(f("version")),
                craik_contracts::one_line(f("origin")),
                a.get("package")
                    .and_then(Value::as_str)
                    .map(|p| format!(", package {}", craik_contracts::one_line(p)))
                    .unwrap_or_default(),
                craik_contracts::one_line(f("path")),
                craik_contracts::one_line(f("sha256")),
                if a.get("pinned").and_then(Value::as_bool) == Some(true) {
                    " (checked against its pin)"
                } else {
                    " (not pinned)"
                }
            ))?;
        }
    }
    // Issue 21: what the runner was told, and the case file it was built from.
    for f in &run.context {
        out.line(format_args!(
            "  {:<11} {} {} ({})",
            if f.file == craik_host::prompt::PROMPT_FILE {
                "prompt"
            } else {
                "case file"
            },
            f.file,
            f.sha256,
            match f.state {
                "matches" => "the file matches the signed digest",
                "changed" => "CHANGED since the run signed it",
                _ => "MISSING from the run directory",
            }
        ))?;
    }
    match (&run.status, &run.unsigned) {
        (Some(s), _) => out.line(format_args!(
            "  status      {} — {} (signed: {}{})",
            s.status,
            s.reason,
            s.receipt,
            if s.may_continue {
                "; parked, may continue once its approval is decided"
            } else {
                ", the run's closing receipt"
            }
        ))?,
        (None, Some(u)) => out.line(format_args!(
            "  status      {} — {} [NOT SIGNED: {}]",
            u.status.as_deref().unwrap_or("?"),
            u.stop_reason.as_deref().unwrap_or("-"),
            u.note
        ))?,
        (None, None) => {}
    }
    if let Some(m) = &run.model_steps {
        out.line(format_args!("  model       {}", m.line()))?;
    }
    Ok(())
}

/// A signed file change of an outcome (`files` metadata): (change, path, sha256, forbidden
/// why, restored).
fn file_changes(r: &ReceiptPayload) -> impl Iterator<Item = FileChange<'_>> {
    // A governed write's outcome: the file it names was written.
    let written = (r.decided_by.kind == DecidedByKind::Outcome
        && r.capability.starts_with("repo.write")
        && r.result.status.as_str() == "passed")
        .then(|| FileChange {
            change: "written",
            path: &r.target,
            sha256: "",
            forbidden: "",
            restored: false,
        });
    written.into_iter().chain(
        r.result
            .metadata
            .0
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|f| {
                let field = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default();
                FileChange {
                    change: field("change"),
                    path: field("path"),
                    sha256: field("sha256"),
                    forbidden: field("forbidden"),
                    restored: f.get("restored").and_then(Value::as_bool) == Some(true),
                }
            }),
    )
}

/// One file a command created, changed or removed, as its outcome receipt signs it.
struct FileChange<'a> {
    change: &'a str,
    path: &'a str,
    sha256: &'a str,
    forbidden: &'a str,
    restored: bool,
}

impl FileChange<'_> {
    /// ` FORBIDDEN (why; restored)`, or nothing.
    fn forbidden_note(&self) -> String {
        match self.forbidden {
            "" => String::new(),
            why => format!(
                " FORBIDDEN ({why}; {})",
                if self.restored {
                    "restored"
                } else {
                    "NOT restored"
                }
            ),
        }
    }
}

fn human_entry(out: &mut Out, entry: &Entry) -> Result<(), Failure> {
    let r = &entry.receipt;
    let step = step_of(r.action.as_deref())
        .map(|s| format!("step {s} "))
        .unwrap_or_default();
    let action = r
        .action
        .as_deref()
        .map(|a| format!("{a} "))
        .unwrap_or_default();
    out.line(format_args!(
        "  #{:<4} {}  {step}{action}{}",
        r.seq,
        r.created_at,
        what(r)
    ))?;
    let grant = entry
        .grant
        .as_deref()
        .map(|g| format!(" [grant {g}]"))
        .unwrap_or_default();
    let by = if r.decided_by.kind == DecidedByKind::Outcome {
        String::new()
    } else {
        format!(" (by {})", decided_by(r))
    };
    out.line(format_args!("        {}{by}{grant}", verdict(r)))?;
    if let Some(line) = model_step_line(r) {
        out.line(format_args!("        {line}"))?;
    }
    // Which command changed which file: the signed list of an outcome's file changes.
    for f in file_changes(r) {
        let hash = match f.sha256 {
            "" => String::new(),
            h => format!(" {h}"),
        };
        out.line(format_args!(
            "        file {} {}{hash}{}",
            f.change,
            craik_contracts::one_line(f.path),
            f.forbidden_note()
        ))?;
    }
    if let Some(a) = &entry.approval {
        out.line(format_args!("        {}", approval_line(a)))?;
    }
    if let Some(m) = &entry.memory_review {
        out.line(format_args!("        {}", memory_line(m)))?;
    }
    Ok(())
}

/// A memory proposal's review, one line.
fn memory_line(m: &MemoryReviewAudit) -> String {
    match (m.decision, &m.by, &m.problem) {
        (_, _, Some(why)) => format!("memory review INVALID: {why}"),
        ("pending", _, _) => "memory review: pending (no signed review yet)".to_owned(),
        (decision, by, _) => format!(
            "memory review: {decision} by {}: \"{}\" (signed review {})",
            by.as_deref().unwrap_or("?"),
            craik_contracts::one_line(m.reason.as_deref().unwrap_or_default()),
            m.reviewed_at.as_deref().unwrap_or("?")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_comes_from_the_host_action_id() {
        assert_eq!(step_of(Some("action_5_0")), Some(5));
        assert_eq!(step_of(Some("memprop_x_2_0")), None);
        assert_eq!(step_of(Some("action_x")), None);
        assert_eq!(step_of(None), None);
    }

    #[test]
    fn times_are_rfc3339_or_a_date_and_dates_mean_midnight_utc() {
        let t = parse_time("since", "2026-11-22").unwrap();
        assert_eq!(utc_text(t), "2026-11-22T00:00:00Z");
        let t = parse_time("since", "2026-11-22T03:00:00+02:00").unwrap();
        assert_eq!(utc_text(t), "2026-11-22T01:00:00Z");
        let e = parse_time("until", "yesterday").unwrap_err();
        assert!(e.message.contains("--until `yesterday`"), "{}", e.message);
    }
}
