//! Secret rules as data: loads rule files in gitleaks' shape, translates their RE2 patterns to
//! `regex` syntax, and finds secrets the way gitleaks does (keyword prefilter, secret group,
//! entropy floor, global and per-rule allowlists). It finds; it does not replace (`redact.rs`).
//!
//! Two files are compiled in: gitleaks' default configuration (`kernel/rules/gitleaks/`,
//! vendored at [`GITLEAKS_VERSION`], see its PROVENANCE.md) and Craik's own rules
//! (`kernel/rules/craik.toml`). Where this departs from gitleaks, and why:
//! - no `gitleaks:allow` comment: the text is runner- or repository-controlled, and a marker it
//!   can write must not switch detection off;
//! - no decoding passes (base64/hex/percent): out of scope for this layer, written down in
//!   SECURITY.md;
//! - allowlists that need a file path or a commit never allow (there is none to match), so an
//!   `AND` allowlist naming paths is inert and an `OR` allowlist's paths are ignored;
//! - path-only rules (`pkcs12-file`) are loaded and listed but cannot match text;
//! - RE2 classes `\w \d \s \b` are ASCII as in Go, written as explicit ASCII classes (see
//!   [`translate`]); Rust's Unicode `(?i)` still folds `ſ` and `K` into `s`/`k`, which only
//!   widens a match;
//! - glued prefixes (red team round 12, F1): a rule whose pattern opens with `\b` right
//!   before its secret, when the secret starts with a distinctive literal prefix, is compiled
//!   without that `\b`, so `id_AKIA…`, `_sk-ant-api03-…` or `xAIza…` is found. gitleaks wants
//!   the boundary to keep false positives out of repository scans; a redactor that misses a
//!   token because a word character was printed before it fails open. Distinctive (decided
//!   at load from the pattern, by [`unglued`]): every literal the secret can start with (the
//!   `regex-syntax` prefix extractor) is at least 4 bytes (`AKIA`, `ghp_`, `AIza`, `dapi`,
//!   `sk_live_`), or 3 bytes that are not a run of one case of letters and digits (`hf_`,
//!   `SG.`, `eyJ`) in a secret of at least 24 bytes. Rules whose secret follows a keyword
//!   (`generic-api-key`, `key=value` rules), short or common prefixes (`sk-` alone, which
//!   `risk-assessment-…` holds; `MII`, which any base64 text holds) and alternations with one
//!   short branch (`craik-provider-token-piece`'s `SK`) keep their `\b`. Over 256 MB of
//!   source (the cargo registry and this repository) the relaxed rules found 5 secrets after
//!   a word character: two base64 OpenSSH keys and three spellings of a rule's own pattern.
//!   [`SecretRules::glued_ids`] lists them; `pattern` gives the compiled (relaxed) pattern.
//!
//! Cost, never what is found (the tests compare every path below with every enabled rule
//! run over the whole text by the `regex` crate): the keywords, the literals every match of a
//! costly rule holds and the fold hazards are found in one pass (`literals.rs`); a costly
//! rule (no literal prefix to skip ahead with, [`is_heavy`], or too many, [`wide`]) runs over
//! windows around those literals (`window.rs`); heavy rules without such literals are first
//! tried together in one [`RegexSet`]; a later pass looks again only where replacing changed
//! the text ([`SecretRules::respans`]).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use aho_corasick::AhoCorasick;
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use regex_automata::util::captures::Captures;
use regex_automata::{Input, meta};
use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::{Capture, Hir, HirKind, Look};
use serde::Deserialize;

use super::literals::Literals;
use super::window::{self, Anchor};

/// The gitleaks release whose default rule set is vendored.
pub const GITLEAKS_VERSION: &str = "v8.30.1";

const GITLEAKS_FILE: &str = "rules/gitleaks/gitleaks.toml";
const GITLEAKS_TOML: &str = include_str!("../../rules/gitleaks/gitleaks.toml");
const CRAIK_FILE: &str = "rules/craik.toml";
const CRAIK_TOML: &str = include_str!("../../rules/craik.toml");

/// Key names whose `key=value` / `key: value` values are secrets (case-insensitive; `-`, `_`
/// and nothing are interchangeable). Substituted for `{secret_keys}` in Craik's rules.
pub(crate) const SECRET_KEYS: &str = r"(?:api[-_]?key|apikey|account[-_]?key|shared[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|secret(?:[-_]?access)?(?:[-_]?key)?|client[-_]?secret|aws[-_]?secret[-_]?access[-_]?key|auth[-_]?token|access[-_]?token|refresh[-_]?token|id[-_]?token|token|password|passwd|pwd|passphrase|private[-_]?key(?:[-_]?id)?|credentials?|session[-_]?token)";

/// Why the rule set could not be built. Any of these means nothing is let through.
#[derive(Debug, thiserror::Error)]
pub enum RuleSetError {
    #[error("rule file `{file}` does not parse")]
    Parse {
        file: &'static str,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("rule `{id}` in `{file}`: {what}")]
    Unsupported {
        file: &'static str,
        id: String,
        what: &'static str,
    },
    #[error("rule `{id}` in `{file}` does not compile")]
    Regex {
        file: &'static str,
        id: String,
        #[source]
        source: Box<regex::Error>,
    },
    #[error("rule `{id}` in `{file}` does not compile")]
    Build {
        file: &'static str,
        id: String,
        #[source]
        source: Box<meta::BuildError>,
    },
    #[error("rule `{id}` in `{file}` does not parse")]
    Syntax {
        file: &'static str,
        id: String,
        #[source]
        source: Box<regex_syntax::Error>,
    },
    #[error("rule `{id}` in `{file}` names secret group {group}, its regex has {groups}")]
    SecretGroup {
        file: &'static str,
        id: String,
        group: usize,
        groups: usize,
    },
    #[error("rule id `{id}` appears twice")]
    DuplicateId { id: String },
    #[error("the keyword prefilter cannot be built")]
    Prefilter(#[source] aho_corasick::BuildError),
}

// The files' shape (gitleaks' `config.ViperConfig`, the fields its default set uses).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileSpec {
    #[serde(default)]
    #[expect(dead_code, reason = "part of gitleaks' shape, not used")]
    title: Option<String>,
    #[serde(default)]
    #[expect(dead_code, reason = "part of gitleaks' shape, not used")]
    min_version: Option<String>,
    #[serde(default)]
    allowlist: Option<AllowlistSpec>,
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleSpec {
    id: String,
    #[serde(default)]
    #[expect(dead_code, reason = "part of gitleaks' shape, not used")]
    description: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    #[expect(dead_code, reason = "path-only rules name files, not text")]
    path: Option<String>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    secret_group: Option<usize>,
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
    #[serde(default)]
    #[expect(dead_code, reason = "part of gitleaks' shape, not used")]
    tags: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AllowlistSpec {
    #[serde(default)]
    #[expect(dead_code, reason = "part of gitleaks' shape, not used")]
    description: Option<String>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

#[derive(Debug)]
struct Allowlist {
    and: bool,
    target: Target,
    regexes: Vec<Regex>,
    stopwords: Option<AhoCorasick>,
    /// Paths or commits are named: those conditions can never hold on bare text.
    needs_location: bool,
}

#[derive(Debug)]
struct Rule {
    file: &'static str,
    id: String,
    what: String,
    keywords: Vec<String>,
    /// `None` for path-only rules.
    regex: Option<Lazy>,
    has_groups: bool,
    /// The search engine has no literal to skip ahead with: the pattern is run over every
    /// byte (see [`is_heavy`]). Such rules run over windows when they have an anchor, else
    /// are first tried together, in one [`RegexSet`].
    heavy: bool,
    /// Its leading `\b` was dropped: a word character glued before its secret's distinctive
    /// prefix does not hide it (see [`unglued`]).
    glued: bool,
    /// For a rule whose search is costly (heavy, or [`wide`]) and whose pattern has one: the
    /// literals every match holds and how far a match reaches around them (`window.rs`).
    /// Such a rule is run over the windows of a text around those literals, not all of it.
    anchor: Option<Anchor>,
    secret_group: usize,
    entropy: Option<f64>,
    allowlists: Vec<Allowlist>,
    /// Gitleaks' global allowlist applies (gitleaks' rules only).
    global: bool,
}

/// A rule's pattern, checked (parsed) at load and compiled the first time a text enables the
/// rule: most texts enable a few of ~250 rules, and compiling all of them costs every process
/// that redacts anything tens of MB and (debug) a second.
#[derive(Debug)]
struct Lazy {
    pattern: String,
    compiled: OnceLock<Option<meta::Regex>>,
}

impl Lazy {
    /// What `regex::RegexBuilder::new(pattern).size_limit(64 << 20)` builds, on the engine
    /// behind it, whose searches can be given a span of the text (`window.rs`).
    fn build(&self) -> Result<meta::Regex, Box<meta::BuildError>> {
        meta::Builder::new()
            .configure(
                meta::Config::new()
                    .match_kind(regex_automata::MatchKind::LeftmostFirst)
                    .utf8_empty(true)
                    .nfa_size_limit(Some(64 << 20))
                    .hybrid_cache_capacity(2 << 20),
            )
            .syntax(regex_automata::util::syntax::Config::new().utf8(true))
            .build(&self.pattern)
            .map_err(Box::new)
    }

    /// The compiled pattern; `None` if it does not compile (the caller fails closed).
    fn get(&self) -> Option<&meta::Regex> {
        self.compiled.get_or_init(|| self.build().ok()).as_ref()
    }
}

/// How far around a replaced secret a later pass looks again for rules that matched nothing.
/// A match longer than this that exists only after replacing needs a rule whose pattern
/// spans it (a key block): such rules match in the first pass and are scanned again whole.
const RECHECK_MARGIN: usize = 1024;

/// One redaction pass: what to replace, and what the next pass needs.
#[derive(Debug)]
pub(crate) struct Pass {
    pub(crate) spans: Vec<Range<usize>>,
    /// A rule that had to be tried did not compile: nothing can be let through.
    pub(crate) broken: bool,
    found: Found,
    /// Rules whose pattern matched (a finding or not).
    hit: Vec<bool>,
}

/// What the keyword automaton's pass over a text found.
#[derive(Debug, Clone)]
struct Found {
    /// The rules its keywords enable (and those without keywords).
    enabled: Vec<bool>,
    /// Every occurrence of an anchor literal (`window.rs`): where it starts, and its
    /// prefilter pattern.
    anchors: Vec<(usize, usize)>,
    /// A fold hazard (`window.rs`) is in the text: no rule is run over windows of it.
    hazard: bool,
}

/// One secret found in a text: which rule, and the byte range to replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFinding<'r> {
    pub rule_id: &'r str,
    pub span: Range<usize>,
}

/// The loaded rule sets: gitleaks' default set and Craik's own.
#[derive(Debug)]
pub struct SecretRules {
    rules: Vec<Rule>,
    global: Vec<Allowlist>,
    /// One pass finds every keyword, every anchor literal and every fold hazard
    /// (`window.rs`), ASCII-case-insensitively (`literals.rs`).
    literals: Literals,
    /// Per prefilter pattern: the rules it enables as a keyword.
    by_keyword: Vec<Vec<usize>>,
    /// Per prefilter pattern: the rules whose anchor has it as a literal.
    by_literal: Vec<Vec<usize>>,
    /// Per prefilter pattern: its length in bytes.
    pattern_len: Vec<usize>,
    /// Per prefilter pattern: whether it is a fold hazard.
    hazard: Vec<bool>,
    /// The longest anchor literal (bytes).
    longest_literal: usize,
    /// Rules without keywords: always tried.
    always: Vec<usize>,
    /// Rules the replacement text's own keywords enable.
    marker_enabled: Vec<bool>,
    gitleaks_ids: Vec<String>,
    /// The heavy rules (indices into `rules`).
    heavy: Vec<usize>,
    /// Sets of heavy rules tried together (see [`SecretRules::heavy_absent`]), by the rules
    /// they hold, compiled on first use; `None` for a set that does not compile (its rules
    /// are then scanned one by one). At most [`HEAVY_SETS`] are kept.
    heavy_sets: Mutex<Vec<(Vec<usize>, HeavySet)>>,
}

/// What one prefilter pattern is to the rules.
#[derive(Default)]
struct PatternUse {
    /// The rules it enables as a keyword.
    keyword_of: Vec<usize>,
    /// The rules whose anchor has it as a literal.
    literal_of: Vec<usize>,
    /// It is a fold hazard.
    hazard: bool,
}

/// A compiled set of heavy rules, shared; `None` if it did not compile.
type HeavySet = Arc<Option<RegexSet>>;

/// How many sets of heavy rules are kept compiled; the rules of texts that need another set
/// are scanned one by one. A text enables a few heavy rules, the same few in most texts.
const HEAVY_SETS: usize = 32;

/// Sets of more rules than this are not built (each rule is scanned alone).
const HEAVY_SET_MAX: usize = 16;

impl SecretRules {
    /// Loads and compiles both compiled-in rule files.
    pub fn load() -> Result<SecretRules, RuleSetError> {
        let gitleaks = parse(GITLEAKS_FILE, GITLEAKS_TOML)?;
        let craik = parse(CRAIK_FILE, CRAIK_TOML)?;
        let mut global = Vec::new();
        for a in gitleaks.allowlist.iter().chain(&gitleaks.allowlists) {
            global.push(allowlist(GITLEAKS_FILE, "(global)", a)?);
        }
        let gitleaks_ids = gitleaks.rules.iter().map(|r| r.id.clone()).collect();
        let mut rules = Vec::new();
        let mut patterns: BTreeMap<Vec<u8>, PatternUse> = BTreeMap::new();
        let mut always = Vec::new();
        for (file, spec, is_gitleaks) in craik
            .rules
            .iter()
            .map(|r| (CRAIK_FILE, r, false))
            .chain(gitleaks.rules.iter().map(|r| (GITLEAKS_FILE, r, true)))
        {
            if rules.iter().any(|r: &Rule| r.id == spec.id) {
                return Err(RuleSetError::DuplicateId {
                    id: spec.id.clone(),
                });
            }
            let index = rules.len();
            rules.push(rule(file, spec, is_gitleaks)?);
            if spec.keywords.is_empty() {
                if spec.regex.is_some() {
                    always.push(index);
                }
            } else {
                for k in &spec.keywords {
                    if k.is_empty() {
                        // Every text holds it (the literal pass reports no empty match).
                        always.push(index);
                        continue;
                    }
                    let k = k.to_lowercase().into_bytes();
                    patterns.entry(k).or_default().keyword_of.push(index);
                }
            }
        }
        for (index, rule) in rules.iter().enumerate() {
            for l in rule.anchor.iter().flat_map(|a| &a.literals) {
                patterns
                    .entry(l.clone())
                    .or_default()
                    .literal_of
                    .push(index);
            }
        }
        for h in window::FOLD_HAZARDS {
            patterns.entry(h.as_bytes().to_vec()).or_default().hazard = true;
        }
        let literals = Literals::new(&patterns.keys().cloned().collect::<Vec<_>>())
            .map_err(RuleSetError::Prefilter)?;
        let longest_literal = patterns
            .iter()
            .filter(|(_, u)| !u.literal_of.is_empty())
            .map(|(p, _)| p.len())
            .max()
            .unwrap_or(0);
        let pattern_len = patterns.keys().map(Vec::len).collect();
        let hazard = patterns.values().map(|u| u.hazard).collect();
        let mut by_keyword = Vec::with_capacity(patterns.len());
        let mut by_literal = Vec::with_capacity(patterns.len());
        for u in patterns.into_values() {
            by_keyword.push(u.keyword_of);
            by_literal.push(u.literal_of);
        }
        let heavy = (0..rules.len())
            .filter(|&i| rules.get(i).is_some_and(|r| r.heavy))
            .collect();
        let mut set = SecretRules {
            heavy,
            heavy_sets: Mutex::new(Vec::new()),
            marker_enabled: Vec::new(),
            rules,
            global,
            literals,
            by_keyword,
            by_literal,
            pattern_len,
            hazard,
            longest_literal,
            always,
            gitleaks_ids,
        };
        set.marker_enabled = set.found(super::REDACTED).enabled;
        Ok(set)
    }

    /// Every rule id, Craik's first, then gitleaks' in file order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.id.as_str())
    }

    /// The ids of the vendored gitleaks default set, in file order.
    pub fn gitleaks_ids(&self) -> &[String] {
        &self.gitleaks_ids
    }

    /// The compiled (translated) pattern of rule `id`, if it has one.
    pub fn pattern(&self, id: &str) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.id == id)
            .and_then(|r| r.regex.as_ref())
            .map(|l| l.pattern.as_str())
    }

    /// The keywords of rule `id` (empty: always tried).
    pub fn keywords(&self, id: &str) -> &[String] {
        self.rules
            .iter()
            .find(|r| r.id == id)
            .map_or(&[], |r| r.keywords.as_slice())
    }

    /// Ids of rules whose leading word boundary was dropped, so that a word character glued
    /// before the secret's distinctive prefix does not hide it (module docs).
    pub fn glued_ids(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().filter(|r| r.glued).map(|r| r.id.as_str())
    }

    /// Ids of rules that can match text (all but path-only rules).
    pub fn text_rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .filter(|r| r.regex.is_some())
            .map(|r| r.id.as_str())
    }

    /// Every secret in `text`, in rule order then position. Spans may overlap.
    pub fn find(&self, text: &str) -> Vec<SecretFinding<'_>> {
        let mut out = Vec::new();
        let _complete = self.each(text, |rule, span| {
            out.push(SecretFinding {
                rule_id: rule.id.as_str(),
                span,
            });
            true
        });
        out
    }

    /// The merged byte ranges to replace in `text`, sorted and disjoint: a first pass.
    pub(crate) fn spans(&self, text: &str) -> Pass {
        let found = self.found(text);
        let (spans, hit, broken) = self.scan(text, &found, None);
        Pass {
            spans: merge(spans),
            broken,
            found,
            hit,
        }
    }

    /// The next pass over `text`, the previous pass's text with `markers` (ranges in `text`)
    /// put where its secrets were. Only what replacing can have changed is scanned again:
    /// rules whose pattern matched anything in the previous pass (a match it hid may now
    /// appear), everywhere; every other rule (it matched nothing) only in the lines within
    /// [`RECHECK_MARGIN`] bytes of a marker, the only places its input changed.
    pub(crate) fn respans(&self, text: &str, previous: &Pass, markers: &[Range<usize>]) -> Pass {
        let mut found = self.refound(text, previous, markers);
        for (e, m) in found.enabled.iter_mut().zip(&self.marker_enabled) {
            *e |= *m;
        }
        let windows = merge(
            markers
                .iter()
                .map(|m| {
                    let start = line_start(text, m.start.saturating_sub(RECHECK_MARGIN));
                    let end = line_end(text, m.end.saturating_add(RECHECK_MARGIN));
                    start..end
                })
                .collect(),
        );
        let (spans, hit, broken) = self.scan(text, &found, Some((&previous.hit, &windows)));
        Pass {
            spans: merge(spans),
            broken,
            found,
            hit,
        }
    }

    /// Scans every enabled rule: the spans found (unmerged), the rules whose pattern
    /// matched, and whether a rule that had to be tried does not compile. With `recheck`,
    /// rules without a previous hit only in its windows.
    fn scan(
        &self,
        text: &str,
        found: &Found,
        recheck: Option<(&[bool], &[Range<usize>])>,
    ) -> (Vec<Range<usize>>, Vec<bool>, bool) {
        let mut spans = Vec::new();
        let mut hit = vec![false; self.rules.len()];
        let mut broken = false;
        let full_scan =
            |i: usize| recheck.is_none_or(|(hit, _)| hit.get(i).copied().unwrap_or(true));
        let enabled = |i: usize| found.enabled.get(i).copied().unwrap_or(false);
        let absent = self.heavy_absent(text, |i| {
            enabled(i) && full_scan(i) && self.windows_for(found, i).is_none()
        });
        let starts = self.starts(found, |i| enabled(i) && full_scan(i));
        for (i, rule) in self.rules.iter().enumerate() {
            if !enabled(i) {
                continue;
            }
            let full = full_scan(i);
            // The set found no match of this rule anywhere in `text`: its scan finds none.
            if full && absent.get(i).copied().unwrap_or(false) {
                continue;
            }
            let Some(lazy) = &rule.regex else { continue };
            let Some(regex) = lazy.get() else {
                broken = true;
                continue;
            };
            if !full {
                let windows = recheck.map_or(&[][..], |(_, w)| w);
                for window in windows {
                    let Some(hay) = text.get(window.clone()) else {
                        continue;
                    };
                    for caps in regex.captures_iter(hay) {
                        set(&mut hit, i);
                        if let Some(span) = self.check(rule, hay, &caps) {
                            spans.push(span.start + window.start..span.end + window.start);
                        }
                    }
                }
                continue;
            }
            let windows = self.search_windows(text, found, &starts, i);
            each_match(regex, text, &windows, |caps| {
                set(&mut hit, i);
                if let Some(span) = self.check(rule, text, caps) {
                    spans.push(span);
                }
                true
            });
        }
        (spans, hit, broken)
    }

    /// The anchor rule `i` is run with over `found`'s text, if it is run over windows: it
    /// has one, and no fold hazard is in the text.
    fn windows_for(&self, found: &Found, i: usize) -> Option<&Anchor> {
        if found.hazard {
            return None;
        }
        self.rules.get(i)?.anchor.as_ref()
    }

    /// Where rule `i` is searched for in `text` (every match is inside one of them): the
    /// windows around its anchor literals (`window.rs`), else the whole text.
    fn search_windows(
        &self,
        text: &str,
        found: &Found,
        starts: &[Vec<(usize, usize)>],
        i: usize,
    ) -> Vec<Range<usize>> {
        match self.windows_for(found, i) {
            Some(anchor) => anchor.windows(text, starts.get(i).map_or(&[], Vec::as_slice)),
            None => std::iter::once(0..text.len()).collect(),
        }
    }

    /// Per rule `wanted`: its anchor literals' occurrences (where one starts, its length),
    /// sorted (empty for the others).
    fn starts(&self, found: &Found, wanted: impl Fn(usize) -> bool) -> Vec<Vec<(usize, usize)>> {
        let mut starts = vec![Vec::new(); self.rules.len()];
        let wanted: Vec<bool> = (0..self.rules.len()).map(wanted).collect();
        for &(at, k) in &found.anchors {
            for &i in self.by_literal.get(k).into_iter().flatten() {
                if wanted.get(i).copied().unwrap_or(false)
                    && let Some(s) = starts.get_mut(i)
                {
                    s.push((at, self.pattern_len.get(k).copied().unwrap_or(0)));
                }
            }
        }
        for s in &mut starts {
            // Nearly sorted already (the automaton reports by where a literal ends), which
            // this sort takes in linear time.
            s.sort();
            s.dedup();
        }
        starts
    }

    /// Per rule: whether it is heavy and has no match anywhere in `text`, decided by one run of
    /// a set of the heavy rules `wanted` (enabled, to be scanned whole) when there are at
    /// least two; all false otherwise. A rule marked here would find nothing: skipping it
    /// changes no result, only the cost (one pass over `text` for all of them instead of one
    /// each: their patterns step through every byte, and a set steps through it once).
    fn heavy_absent(&self, text: &str, wanted: impl Fn(usize) -> bool) -> Vec<bool> {
        let mut absent = vec![false; self.rules.len()];
        let members: Vec<usize> = self.heavy.iter().copied().filter(|&i| wanted(i)).collect();
        if members.len() < 2 || members.len() > HEAVY_SET_MAX {
            return absent;
        }
        let Some(set) = self.heavy_set(&members) else {
            return absent;
        };
        let Some(set) = set.as_ref() else {
            return absent;
        };
        // INVARIANT: heavy rules all have a pattern, so the set's pattern k is rule members[k].
        if set.len() != members.len() {
            return absent;
        }
        let matched = set.matches(text);
        for (k, &i) in members.iter().enumerate() {
            if !matched.matched(k)
                && let Some(a) = absent.get_mut(i)
            {
                *a = true;
            }
        }
        absent
    }

    /// The compiled set of rules `members`; `None` when it is not kept (too many sets).
    fn heavy_set(&self, members: &[usize]) -> Option<HeavySet> {
        if let Some((_, set)) = self
            .heavy_sets
            .lock()
            .ok()?
            .iter()
            .find(|(m, _)| m.as_slice() == members)
        {
            return Some(Arc::clone(set));
        }
        // Compiled outside the lock; two threads may both compile the same set.
        let set = RegexSetBuilder::new(
            members
                .iter()
                .filter_map(|&i| self.rules.get(i)?.regex.as_ref())
                .map(|l| l.pattern.as_str()),
        )
        .size_limit(64 << 20)
        .dfa_size_limit(8 << 20)
        .build()
        .ok();
        let set = Arc::new(set);
        let mut sets = self.heavy_sets.lock().ok()?;
        if sets.len() >= HEAVY_SETS {
            return None;
        }
        sets.push((members.to_vec(), Arc::clone(&set)));
        Some(set)
    }

    /// What the first secret in `text` is, if there is one.
    pub(crate) fn first(&self, text: &str) -> Option<&str> {
        let mut what = None;
        let complete = self.each(text, |rule, _| {
            what = Some(rule.what.as_str());
            false
        });
        if !complete {
            return Some("text a secret rule that does not compile had to check");
        }
        what
    }

    /// The keyword automaton's pass over `text`: the rules its keywords enable (and those
    /// without keywords), where anchor literals occur, whether a fold hazard does.
    fn found(&self, text: &str) -> Found {
        let mut enabled = vec![false; self.rules.len()];
        for &i in &self.always {
            set(&mut enabled, i);
        }
        let mut seen = vec![false; self.by_keyword.len()];
        // Per part of the text (`literals.rs`), so that they come out nearly sorted.
        let mut parts: [Vec<(usize, usize)>; Literals::PARTS] = Default::default();
        let mut hazard = false;
        self.literals.each(text.as_bytes(), |start, k, part| {
            if let Some(s) = seen.get_mut(k)
                && !*s
            {
                *s = true;
                for &i in self.by_keyword.get(k).into_iter().flatten() {
                    set(&mut enabled, i);
                }
                hazard |= self.hazard.get(k).copied().unwrap_or(false);
            }
            if self.by_literal.get(k).is_some_and(|r| !r.is_empty())
                && let Some(part) = parts.get_mut(part)
            {
                part.push((start, k));
            }
        });
        let anchors = parts.concat();
        Found {
            enabled,
            anchors,
            hazard,
        }
    }

    /// What [`SecretRules::found`] finds in `text`, the previous pass's text with its spans
    /// replaced by `markers`, without a pass over all of it: the previous pass's keywords,
    /// and its anchor literals moved to where they now are, but those near a marker, which
    /// are looked for again. Exact: an occurrence wholly inside a range within
    /// [`SecretRules::longest_literal`] bytes of a marker is found by the search of that
    /// range; any other overlaps no marker (it would lie inside that range), so its bytes
    /// are the previous text's, where the previous pass found it and no span overlapped it.
    /// Replacing adds no fold hazard (the marker is ASCII); one the previous text held is
    /// kept (no windows: the cost of a full scan, never a miss). Rules are enabled as they
    /// were (`respans`).
    fn refound(&self, text: &str, previous: &Pass, markers: &[Range<usize>]) -> Found {
        let spans = &previous.spans;
        if spans.len() != markers.len() {
            // INVARIANT: one marker per span; if not, the whole pass is run again.
            let mut found = self.found(text);
            found.enabled.clone_from(&previous.found.enabled);
            return found;
        }
        let reach = self.longest_literal;
        let near = merge(
            markers
                .iter()
                .map(|m| {
                    window::floor_boundary(text, m.start.saturating_sub(reach))
                        ..window::ceil_boundary(text, m.end.saturating_add(reach))
                })
                .collect(),
        );
        let wholly_near = |r: Range<usize>| {
            let j = near.partition_point(|n| n.start <= r.start);
            j > 0 && near.get(j - 1).is_some_and(|n| r.end <= n.end)
        };
        let mut anchors = Vec::with_capacity(previous.found.anchors.len());
        for &(at, k) in &previous.found.anchors {
            let len = self.pattern_len.get(k).copied().unwrap_or(0);
            // The spans before it move it; one overlapping it removed it.
            let before = spans.partition_point(|s| s.end <= at);
            if spans.get(before).is_some_and(|s| s.start < at + len) {
                continue;
            }
            let moved = match before.checked_sub(1) {
                None => at,
                Some(j) => match (spans.get(j), markers.get(j)) {
                    (Some(s), Some(m)) => m.end + (at - s.end),
                    _ => continue,
                },
            };
            if !wholly_near(moved..moved + len) {
                anchors.push((moved, k));
            }
        }
        for n in &near {
            let Some(hay) = text.get(n.clone()) else {
                continue;
            };
            self.literals.each(hay.as_bytes(), |start, k, _| {
                if self.by_literal.get(k).is_some_and(|r| !r.is_empty()) {
                    anchors.push((n.start + start, k));
                }
            });
        }
        Found {
            enabled: previous.found.enabled.clone(),
            anchors,
            hazard: previous.found.hazard,
        }
    }

    /// Calls `found` for every finding until it returns false; false if a rule that had to
    /// be tried does not compile.
    fn each<'s>(
        &'s self,
        text: &str,
        mut found: impl FnMut(&'s Rule, Range<usize>) -> bool,
    ) -> bool {
        let pass = self.found(text);
        let enabled = |i: usize| pass.enabled.get(i).copied().unwrap_or(false);
        let absent =
            self.heavy_absent(text, |i| enabled(i) && self.windows_for(&pass, i).is_none());
        let starts = self.starts(&pass, enabled);
        for (i, rule) in self.rules.iter().enumerate() {
            if !enabled(i) || absent.get(i).copied().unwrap_or(false) {
                continue;
            }
            let Some(lazy) = &rule.regex else { continue };
            let Some(regex) = lazy.get() else {
                return false;
            };
            let windows = self.search_windows(text, &pass, &starts, i);
            let complete = each_match(regex, text, &windows, |caps| {
                self.check(rule, text, caps)
                    .is_none_or(|span| found(rule, span))
            });
            if !complete {
                return true;
            }
        }
        true
    }

    /// Compiles every rule now (tests: every rule compiles; a lazily compiled rule that does
    /// not makes every text it must check refused).
    pub fn compile_all(&self) -> Result<(), RuleSetError> {
        for rule in &self.rules {
            if let Some(lazy) = &rule.regex {
                lazy.build().map_err(|source| RuleSetError::Build {
                    file: rule.file,
                    id: rule.id.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }

    /// The span to replace for one match, or `None` when gitleaks' semantics drop it.
    fn check(&self, rule: &Rule, text: &str, caps: &impl Groups) -> Option<Range<usize>> {
        let whole = caps.group(0)?;
        let whole_text = text.get(whole.clone())?;
        // gitleaks trims newlines off the match.
        let trimmed = whole_text.trim_matches('\n');
        let lead = whole_text.len() - whole_text.trim_start_matches('\n').len();
        let matched = whole.start + lead..whole.start + lead + trimmed.len();
        let span = if rule.has_groups && rule.secret_group > 0 {
            // A named group that did not take part: the whole match goes.
            caps.group(rule.secret_group).unwrap_or(matched.clone())
        } else if rule.has_groups {
            (1..caps.groups())
                .filter_map(|g| caps.group(g))
                .find(|m| !m.is_empty())
                .unwrap_or(matched.clone())
        } else {
            matched.clone()
        };
        let secret = text.get(span.clone())?;
        // Already replaced: nothing left to hide.
        if secret.replace(super::REDACTED, "").is_empty() {
            return None;
        }
        if let Some(floor) = rule.entropy
            && shannon_entropy(secret) <= floor
        {
            return None;
        }
        let matched_text = text.get(matched.clone()).unwrap_or(secret);
        let line = line_around(text, matched);
        let global = if rule.global {
            self.global.as_slice()
        } else {
            &[]
        };
        if global
            .iter()
            .chain(&rule.allowlists)
            .any(|a| a.allows(secret, matched_text, line))
        {
            return None;
        }
        Some(span)
    }
}

/// Calls `found` for each match of `regex` in `text` inside `windows` (sorted, disjoint),
/// searched over the whole text (look-arounds see past a window's edges), until it returns
/// false; false then. A window is first asked whether it holds a match at all, without
/// capture groups: most hold none.
fn each_match(
    regex: &meta::Regex,
    text: &str,
    windows: &[Range<usize>],
    mut found: impl FnMut(&Captures) -> bool,
) -> bool {
    for window in windows {
        let Some(input) = (window.end <= text.len() && window.start <= window.end)
            .then(|| Input::new(text).span(window.clone()))
        else {
            continue;
        };
        if !regex.is_match(input.clone()) {
            continue;
        }
        for caps in regex.captures_iter(input) {
            if !found(&caps) {
                return false;
            }
        }
    }
    true
}

/// The groups of one match, as the engine reports them (the tests' reference path runs the
/// `regex` crate itself).
trait Groups {
    /// Where group `i` matched (0: the whole match).
    fn group(&self, i: usize) -> Option<Range<usize>>;
    /// How many groups the pattern has, the whole match included.
    fn groups(&self) -> usize;
}

impl Groups for Captures {
    fn group(&self, i: usize) -> Option<Range<usize>> {
        self.get_group(i).map(|s| s.range())
    }

    fn groups(&self) -> usize {
        self.group_len()
    }
}

fn set(enabled: &mut [bool], i: usize) {
    if let Some(e) = enabled.get_mut(i) {
        *e = true;
    }
}

impl Allowlist {
    /// gitleaks' `checkFindingAllowed` for one allowlist, without paths and commits.
    fn allows(&self, secret: &str, matched: &str, line: &str) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        let regex = !target.is_empty() && self.regexes.iter().any(|r| r.is_match(target));
        let stopword = !secret.is_empty()
            && self
                .stopwords
                .as_ref()
                .is_some_and(|s| s.is_match(&secret.to_lowercase()));
        if self.and {
            if self.needs_location {
                return false;
            }
            let mut checks = Vec::new();
            if !self.regexes.is_empty() {
                checks.push(regex);
            }
            if self.stopwords.is_some() {
                checks.push(stopword);
            }
            checks.iter().all(|c| *c)
        } else {
            regex || stopword
        }
    }
}

/// The start of the line holding byte `at` (at most `text.len()`).
fn line_start(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.get(..at)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1)
}

/// The end (before its newline) of the line holding byte `at`.
fn line_end(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    text.get(at..)
        .and_then(|t| t.find('\n'))
        .map_or(text.len(), |i| at + i)
}

fn line_around(text: &str, span: Range<usize>) -> &str {
    let before = text.get(..span.start).unwrap_or("");
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let after = text.get(span.end..).unwrap_or("");
    let end = after.find('\n').map_or(text.len(), |i| span.end + i);
    text.get(start..end).unwrap_or("")
}

/// Sorted, with overlapping and touching ranges joined.
pub(crate) fn merge(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|s| (s.start, s.end));
    let mut out: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

/// gitleaks' `shannonEntropy`: counts by character, divides by the length in bytes.
pub(crate) fn shannon_entropy(data: &str) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts: BTreeMap<char, u32> = BTreeMap::new();
    for c in data.chars() {
        *counts.entry(c).or_default() += 1;
    }
    #[expect(clippy::cast_precision_loss, reason = "lengths far below 2^52")]
    let inv = 1.0 / data.len() as f64;
    counts
        .values()
        .map(|&n| {
            let f = f64::from(n) * inv;
            -f * f.log2()
        })
        .sum()
}

fn parse(file: &'static str, text: &str) -> Result<FileSpec, RuleSetError> {
    toml::from_str(text).map_err(|e| RuleSetError::Parse {
        file,
        source: Box::new(e),
    })
}

fn compile(file: &'static str, id: &str, pattern: &str) -> Result<Regex, RuleSetError> {
    let translated = translate(pattern).map_err(|what| RuleSetError::Unsupported {
        file,
        id: id.to_owned(),
        what,
    })?;
    RegexBuilder::new(&translated)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| RuleSetError::Regex {
            file,
            id: id.to_owned(),
            source: Box::new(e),
        })
}

/// The translated pattern, parsed as `regex` parses it (so only its compiled size is left to
/// fail).
fn checked(file: &'static str, id: &str, pattern: &str) -> Result<(String, Hir), RuleSetError> {
    let translated = translate(pattern).map_err(|what| RuleSetError::Unsupported {
        file,
        id: id.to_owned(),
        what,
    })?;
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&translated)
        .map_err(|e| RuleSetError::Syntax {
            file,
            id: id.to_owned(),
            source: Box::new(e),
        })?;
    Ok((translated, hir))
}

/// A secret's literal prefix this long (bytes) is distinctive on its own (`AKIA`, `ghp_`,
/// `AIza`, `dapi`, `sk_live_`) ...
const DISTINCT_PREFIX: usize = 4;
/// ... and one this long is when it is not a run of one case of letters and digits (`hf_`,
/// `SG.`, `eyJ`; not `MII`, which any base64 text holds) and the secret is at least
/// [`SHORT_PREFIX_MIN_LEN`] bytes long.
const SHORT_PREFIX: usize = 3;
const SHORT_PREFIX_MIN_LEN: usize = 24;

/// The rule's pattern without its leading word boundary, when that boundary stands right
/// before the secret and the secret starts with a distinctive literal prefix (module docs,
/// "glued prefixes"); `None` to keep the pattern as it is. `secret`: the secret group's
/// index, `None` when the whole match is the secret.
fn unglued(hir: &Hir, secret: Option<u32>) -> Option<Hir> {
    let (relaxed, secret_part) = drop_leading_boundary(hir, secret.is_none(), secret)?;
    let literals = Extractor::new().extract(&secret_part);
    let long = secret_part.properties().minimum_len().unwrap_or(0) >= SHORT_PREFIX_MIN_LEN;
    let distinctive = |l: &[u8]| {
        let mixed = l.iter().any(|b| !b.is_ascii_alphanumeric())
            || (l.iter().any(u8::is_ascii_uppercase) && l.iter().any(u8::is_ascii_lowercase));
        l.len() >= DISTINCT_PREFIX || (l.len() >= SHORT_PREFIX && mixed && long)
    };
    let lits = literals.literals()?;
    (!lits.is_empty() && lits.iter().all(|l| distinctive(l.as_bytes()))).then_some(relaxed)
}

/// `hir` without the word boundary it starts with, and the secret that follows that
/// boundary; `None` if it does not start with one, or the secret does not start right after.
fn drop_leading_boundary(hir: &Hir, in_secret: bool, secret: Option<u32>) -> Option<(Hir, Hir)> {
    match hir.kind() {
        HirKind::Capture(c) => {
            let in_secret = in_secret || Some(c.index) == secret;
            let (sub, secret_part) = drop_leading_boundary(&c.sub, in_secret, secret)?;
            let capture = Capture {
                index: c.index,
                name: c.name.clone(),
                sub: Box::new(sub),
            };
            Some((Hir::capture(capture), secret_part))
        }
        HirKind::Concat(subs) => {
            let (first, rest) = subs.split_first()?;
            if let HirKind::Look(Look::WordAscii | Look::WordUnicode) = first.kind() {
                let secret_part = if in_secret {
                    Hir::concat(rest.to_vec())
                } else {
                    match rest.first()?.kind() {
                        HirKind::Capture(c) if Some(c.index) == secret => (*c.sub).clone(),
                        _ => return None,
                    }
                };
                return Some((Hir::concat(rest.to_vec()), secret_part));
            }
            let (first, secret_part) = drop_leading_boundary(first, in_secret, secret)?;
            let mut all = vec![first];
            all.extend(rest.iter().cloned());
            Some((Hir::concat(all), secret_part))
        }
        _ => None,
    }
}

/// Whether a pattern has no prefix literal of at least 2 bytes for the search engine to skip
/// ahead with (a finite set of them), so that its search steps through every byte. Only a
/// cost estimate: it decides which rules are tried together first or run over windows,
/// never what matches. Two bytes (`SK`, `s.`) are enough: such a rule's scan alone costs
/// about a tenth of a set's pass over the text.
fn is_heavy(hir: &Hir) -> bool {
    let seq = Extractor::new().extract(hir);
    seq.literals()
        .is_none_or(|lits| lits.is_empty() || lits.iter().any(|l| l.as_bytes().len() < 2))
}

/// Whether a pattern's prefix literals are more than the search engine's fast searcher for
/// several literals takes (Teddy: 64), as `(?i)` makes of a word (`(?i)bearer` is 64): its
/// search then checks many places one by one. Only a cost estimate, like [`is_heavy`]: such a
/// rule is run over windows (`window.rs`).
fn wide(hir: &Hir) -> bool {
    Extractor::new().extract(hir).len().is_none_or(|n| n > 64)
}

fn rule(file: &'static str, spec: &RuleSpec, is_gitleaks: bool) -> Result<Rule, RuleSetError> {
    let secret_group = spec.secret_group.unwrap_or(0);
    let (regex, groups, heavy, glued, anchor) = match &spec.regex {
        Some(p) => {
            let (pattern, hir) = checked(file, &spec.id, &p.replace("{secret_keys}", SECRET_KEYS))?;
            let groups = hir.properties().explicit_captures_len();
            let secret = match (groups, secret_group) {
                (0, _) => None,
                (_, 0) => Some(1),
                (_, g) => u32::try_from(g).ok(),
            };
            // The relaxed pattern is printed from its HIR; kept only if that text parses back
            // with the same groups (else the pattern stays as written).
            let relaxed = unglued(&hir, secret).map(|h| h.to_string()).and_then(|p| {
                let h = regex_syntax::ParserBuilder::new().build().parse(&p).ok()?;
                (h.properties().explicit_captures_len() == groups).then_some((p, h))
            });
            let glued = relaxed.is_some();
            let (pattern, hir) = relaxed.unwrap_or((pattern, hir));
            let lazy = Lazy {
                pattern,
                compiled: OnceLock::new(),
            };
            let heavy = is_heavy(&hir);
            let anchor = if heavy || wide(&hir) {
                window::anchor(&hir)
            } else {
                None
            };
            (Some(lazy), groups, heavy, glued, anchor)
        }
        None => (None, 0, false, false, None),
    };
    if secret_group > groups {
        return Err(RuleSetError::SecretGroup {
            file,
            id: spec.id.clone(),
            group: secret_group,
            groups,
        });
    }
    let allowlists = spec
        .allowlists
        .iter()
        .map(|a| allowlist(file, &spec.id, a))
        .collect::<Result<_, _>>()?;
    let what = format!("a secret (rule `{}`)", spec.id);
    Ok(Rule {
        file,
        id: spec.id.clone(),
        what,
        keywords: spec.keywords.clone(),
        regex,
        has_groups: groups > 0,
        heavy,
        glued,
        anchor,
        secret_group,
        entropy: spec.entropy.filter(|e| *e != 0.0),
        allowlists,
        global: is_gitleaks,
    })
}

fn allowlist(
    file: &'static str,
    id: &str,
    spec: &AllowlistSpec,
) -> Result<Allowlist, RuleSetError> {
    let unsupported = |what| RuleSetError::Unsupported {
        file,
        id: id.to_owned(),
        what,
    };
    let and = match spec
        .condition
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("OR") => false,
        Some("AND") => true,
        Some(_) => return Err(unsupported("allowlist condition is neither OR nor AND")),
    };
    let target = match spec.regex_target.as_deref() {
        None | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(_) => {
            return Err(unsupported(
                "allowlist regexTarget is not secret, match or line",
            ));
        }
    };
    let regexes = spec
        .regexes
        .iter()
        .map(|r| compile(file, id, r))
        .collect::<Result<_, _>>()?;
    let stopwords = if spec.stopwords.is_empty() {
        None
    } else {
        Some(
            AhoCorasick::new(spec.stopwords.iter().map(|s| s.to_lowercase()))
                .map_err(RuleSetError::Prefilter)?,
        )
    };
    Ok(Allowlist {
        and,
        target,
        regexes,
        stopwords,
        needs_location: !spec.paths.is_empty() || !spec.commits.is_empty(),
    })
}

/// Translates an RE2 (Go `regexp`) pattern to `regex` syntax with the same meaning: Go's
/// `\w \d \s \b` and their negations are ASCII, `regex`'s are Unicode. Everything else the
/// rule files use is the same in both. What cannot be translated is an error (fail closed).
pub(crate) fn translate(pattern: &str) -> Result<String, &'static str> {
    const WORD: &str = "0-9A-Za-z_";
    const DIGIT: &str = "0-9";
    const SPACE: &str = r"\t\n\x0C\r ";
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    // Inside `[...]`; `class_start` is true right after `[` or `[^` (a `]` there is literal).
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    return Err("pattern ends in a backslash");
                };
                class_start = false;
                match (in_class, e) {
                    (false, 'w') => out.push_str(&format!("[{WORD}]")),
                    (false, 'W') => out.push_str(&format!("[^{WORD}]")),
                    (false, 'd') => out.push_str(&format!("[{DIGIT}]")),
                    (false, 'D') => out.push_str(&format!("[^{DIGIT}]")),
                    (false, 's') => out.push_str(&format!("[{SPACE}]")),
                    (false, 'S') => out.push_str(&format!("[^{SPACE}]")),
                    (false, 'b') => out.push_str(r"(?-u:\b)"),
                    (false, 'B') => out.push_str(r"(?-u:\B)"),
                    (true, 'w') => out.push_str(WORD),
                    (true, 'd') => out.push_str(DIGIT),
                    (true, 's') => out.push_str(SPACE),
                    // A nested class: `regex` unions it into the enclosing one.
                    (true, 'W') => out.push_str(&format!("[^{WORD}]")),
                    (true, 'D') => out.push_str(&format!("[^{DIGIT}]")),
                    (true, 'S') => out.push_str(&format!("[^{SPACE}]")),
                    (_, 'Q' | 'C' | 'p' | 'P') => {
                        return Err("an RE2 escape with no checked translation");
                    }
                    (_, e) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // A POSIX class `[:name:]` (ASCII in both engines).
                out.push('[');
                class_start = false;
                for p in chars.by_ref() {
                    out.push(p);
                    if p == ']' {
                        break;
                    }
                }
            }
            '[' => {
                // A literal `[` inside a class: `regex` reads it as a nested class.
                out.push_str(r"\[");
                class_start = false;
            }
            ']' if in_class && !class_start => {
                in_class = false;
                out.push(']');
            }
            '{' if !in_class && !is_repetition(chars.clone()) => {
                // RE2 reads a `{` that starts no repetition as a literal; `regex` refuses it.
                out.push_str(r"\{");
            }
            '&' | '~' | '-' if in_class && chars.peek() == Some(&c) => {
                // `regex` reads `&&`, `~~` and `--` in a class as set operations.
                out.push('\\');
                out.push(c);
                class_start = false;
            }
            c => {
                class_start = false;
                out.push(c);
            }
        }
    }
    if in_class {
        return Err("an unterminated class");
    }
    Ok(out)
}

/// Whether the text after a `{` is `n}`, `n,}` or `n,m}`.
fn is_repetition(mut rest: impl Iterator<Item = char>) -> bool {
    let mut digits = 0;
    let mut comma = false;
    for c in rest.by_ref() {
        match c {
            '0'..='9' => digits += 1,
            ',' if digits > 0 && !comma => comma = true,
            '}' => return digits > 0,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn translation_keeps_go_meaning() {
        assert_eq!(
            translate(r"\bab\w[\w.-]").unwrap(),
            r"(?-u:\b)ab[0-9A-Za-z_][0-9A-Za-z_.-]"
        );
        assert_eq!(translate(r"[]a]").unwrap(), "[]a]");
        assert_eq!(translate(r"[[:alnum:]_]").unwrap(), "[[:alnum:]_]");
        assert_eq!(translate(r"[^\S]").unwrap(), r"[^[^\t\n\x0C\r ]]");
        assert_eq!(translate(r"^{\d+}a{2,}").unwrap(), r"^\{[0-9]+}a{2,}");
        let re = Regex::new(&translate(r"\bx\w+").unwrap()).unwrap();
        // Go: `é` is not a word character, so `\b` holds before `x`; `\w` stops at `é`.
        assert_eq!(re.find("éxabé").map(|m| m.as_str()), Some("xab"));
    }

    #[test]
    fn entropy_matches_gitleaks() {
        assert!((shannon_entropy("aaaa") - 0.0).abs() < 1e-9);
        assert!((shannon_entropy("abcd") - 2.0).abs() < 1e-9);
    }

    #[test]
    fn spans_merge() {
        assert_eq!(merge(vec![5..9, 0..3, 2..4, 9..10]), vec![0..4, 5..10]);
    }

    impl Groups for regex::Captures<'_> {
        fn group(&self, i: usize) -> Option<Range<usize>> {
            self.get(i).map(|m| m.range())
        }

        fn groups(&self) -> usize {
            self.len()
        }
    }

    /// Rule `rule`'s pattern compiled by the `regex` crate, as before windows: the reference
    /// engine, independent of how [`Lazy::build`] configures the engine behind it.
    fn oracle<'r>(rules: &SecretRules, rule: &Rule) -> &'r Regex {
        static ORACLE: OnceLock<Vec<OnceLock<Regex>>> = OnceLock::new();
        let all = ORACLE.get_or_init(|| (0..rules.rules.len()).map(|_| OnceLock::new()).collect());
        let i = rules.rules.iter().position(|r| r.id == rule.id).unwrap();
        all[i].get_or_init(|| {
            RegexBuilder::new(&rule.regex.as_ref().unwrap().pattern)
                .size_limit(64 << 20)
                .build()
                .unwrap()
        })
    }

    /// The reference path: every rule a keyword enables (found by a plain case-insensitive
    /// substring search) run alone over the whole text, with gitleaks' checks; no keyword
    /// automaton, no set of heavy rules, no windows.
    fn reference_spans(rules: &SecretRules, text: &str) -> Vec<Range<usize>> {
        let lower = text.to_ascii_lowercase();
        let mut spans = Vec::new();
        for rule in &rules.rules {
            if rule.regex.is_none() {
                continue;
            }
            if !rule.keywords.is_empty()
                && !rule
                    .keywords
                    .iter()
                    .any(|k| lower.contains(&k.to_lowercase()))
            {
                continue;
            }
            for caps in oracle(rules, rule).captures_iter(text) {
                spans.extend(rules.check(rule, text, &caps));
            }
        }
        merge(spans)
    }

    /// Reference redaction: the canonical form, then full passes of [`reference_spans`] until
    /// one finds nothing; then, while its view finds something, that replaced over the bytes
    /// that spell it and full passes again.
    fn reference_redact(rules: &SecretRules, text: &str) -> String {
        let replace = |out: &str, spans: Vec<Range<usize>>| {
            let mut next = String::new();
            let mut at = 0;
            for span in spans {
                next.push_str(&out[at..span.start]);
                next.push_str(super::super::REDACTED);
                at = span.end;
            }
            next.push_str(&out[at..]);
            next
        };
        let passes = |mut out: String| {
            for _ in 0..super::super::MAX_PASSES {
                let spans = reference_spans(rules, &out);
                if spans.is_empty() {
                    break;
                }
                out = replace(&out, spans);
            }
            out
        };
        let mut out = super::super::canon::canonical(text).unwrap().0.into_owned();
        for _ in 0..super::super::MAX_PASSES {
            let before = out.clone();
            if let Some(view) = super::super::View::of(&out) {
                let spans = reference_spans(rules, &view.text);
                if !spans.is_empty() {
                    let spans = merge(spans.iter().map(|s| view.original(s)).collect());
                    out = replace(&out, spans);
                }
            }
            out = passes(out);
            if out == before {
                break;
            }
        }
        out
    }

    #[derive(Deserialize)]
    struct Samples {
        sample: Vec<Sample>,
    }

    #[derive(Deserialize)]
    struct Sample {
        id: String,
        positive: String,
        negative: String,
    }

    fn samples() -> &'static [Sample] {
        static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
        SAMPLES.get_or_init(|| {
            toml::from_str::<Samples>(include_str!("../../tests/redaction/samples.toml"))
                .unwrap()
                .sample
        })
    }

    fn keywords() -> &'static [String] {
        static KEYWORDS: OnceLock<Vec<String>> = OnceLock::new();
        KEYWORDS.get_or_init(|| {
            let rules = super::super::secret_rules().unwrap();
            let mut all: Vec<String> = rules
                .rules
                .iter()
                .flat_map(|r| r.keywords.clone())
                .collect();
            all.sort();
            all.dedup();
            all
        })
    }

    /// One piece of a generated text: a rule's positive or negative sample, a near miss (a
    /// positive cut short or with a character dropped), a keyword in random case, noise,
    /// or unicode (including `ſ` and the Kelvin sign, which `(?i)` folds to `s`/`k`).
    fn piece() -> impl Strategy<Value = String> {
        let n = samples().len();
        let k = keywords().len();
        prop_oneof![
            (0..n).prop_map(|i| samples()[i].positive.clone()),
            (0..n).prop_map(|i| samples()[i].negative.clone()),
            (0..n, any::<prop::sample::Index>(), any::<bool>()).prop_map(|(i, cut, drop)| {
                let p = &samples()[i].positive;
                let at = cut.index(p.len() + 1);
                let at = (0..=at).rev().find(|&a| p.is_char_boundary(a)).unwrap_or(0);
                if drop {
                    let mut s = p.clone();
                    if at < s.len() {
                        s.remove(at);
                    }
                    s
                } else {
                    p[..at].to_owned()
                }
            }),
            (0..k, any::<u64>()).prop_map(|(i, case)| {
                keywords()[i]
                    .chars()
                    .enumerate()
                    .map(|(j, c)| {
                        if case >> (j % 64) & 1 == 1 {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect()
            }),
            "[A-Za-z0-9_=:'\" ./+-]{0,40}",
            "[ \t\n]{0,3}",
            "[\u{17F}\u{212A}é€😀\u{0}-\u{7F}]{0,6}",
            any::<String>().prop_map(|s| s.chars().take(12).collect()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]

        /// The fast path (keyword automaton, costly rules over windows around their anchor
        /// literals, the other heavy rules tried together first, later passes only where
        /// replacing changed the text) redacts exactly what the reference path (every enabled
        /// rule over the whole text, every pass) redacts.
        #[test]
        fn fast_path_redacts_exactly_what_the_reference_redacts(
            pieces in prop::collection::vec(piece(), 1..14),
            seps in prop::collection::vec("[ \n\t,;=:\"'/]{0,2}", 14),
        ) {
            let mut text = String::new();
            for (p, sep) in pieces.iter().zip(&seps) {
                text.push_str(p);
                text.push_str(sep);
            }
            let rules = super::super::secret_rules().unwrap();
            prop_assert_eq!(rules.spans(&text).spans, reference_spans(rules, &text));
            prop_assert_eq!(
                super::super::redact_text(&text).text,
                reference_redact(rules, &text)
            );
        }
    }

    /// Every match of rule `i`'s pattern in `text`, searched as the fast path searches it
    /// (over windows when the rule has an anchor and the text holds no fold hazard).
    fn fast_matches(rules: &SecretRules, i: usize, text: &str) -> Vec<Range<usize>> {
        let found = rules.found(text);
        let starts = rules.starts(&found, |j| j == i);
        let regex = rules.rules[i].regex.as_ref().unwrap().get().unwrap();
        let windows = rules.search_windows(text, &found, &starts, i);
        let mut out = Vec::new();
        each_match(regex, text, &windows, |caps| {
            out.push(caps.group(0).unwrap());
            true
        });
        out
    }

    /// Every match of rule `i`'s pattern in `text`, by the reference engine over all of it.
    fn full_matches(rules: &SecretRules, i: usize, text: &str) -> Vec<Range<usize>> {
        oracle(rules, &rules.rules[i])
            .find_iter(text)
            .map(|m| m.range())
            .collect()
    }

    fn anchored(rules: &SecretRules) -> Vec<usize> {
        (0..rules.rules.len())
            .filter(|&i| rules.rules[i].anchor.is_some())
            .collect()
    }

    /// Each rule run over windows finds every match a scan of the whole text finds, its
    /// own samples placed where a window's edge is: glued to long runs of word characters
    /// before and after (the runs a window reaches across), at the text's ends, twice in a
    /// row, next to key=value text.
    #[test]
    fn windows_find_every_match_a_full_scan_finds() {
        let rules = super::super::secret_rules().unwrap();
        let anchored = anchored(rules);
        assert!(
            anchored.len() > 100,
            "{} rules run over windows",
            anchored.len()
        );
        let by_id: BTreeMap<&str, &Sample> = samples().iter().map(|s| (s.id.as_str(), s)).collect();
        let mut matched = 0;
        for &i in &anchored {
            let id = rules.rules[i].id.as_str();
            let sample = by_id[id];
            for s in [&sample.positive, &sample.negative] {
                for text in [
                    s.clone(),
                    format!("{}{s}", "a_b-c.".repeat(12)),
                    format!("{s}{}", "x".repeat(200)),
                    format!("{s}{}", "0123456789abcdef".repeat(12)),
                    format!("x = 1\n{s}\ny = 2"),
                    format!("{s} {s}\n{s}"),
                    format!("api_key: {s}; token={s}, password = \"{s}\""),
                ] {
                    let full = full_matches(rules, i, &text);
                    matched += full.len();
                    assert_eq!(fast_matches(rules, i, &text), full, "{id}: {text:?}");
                }
            }
        }
        assert!(matched > 500, "{matched} matches");
    }

    /// A secret whose match starts far before its anchor literal and ends far after it is
    /// found whole: the window reaches back over the run a pattern allows before the
    /// literal and forwards over the value. If the reach stopped at the literal, the match
    /// (and the secret) would be missed or cut.
    #[test]
    fn a_secret_straddling_a_window_edge_is_found_whole() {
        let rules = super::super::secret_rules().unwrap();
        let value = "Zx9QwErTy7UiOpAs3DfGhJkL2zXcVbNm8QwErTyUiOpAs4DfGh";
        let cases = [
            // generic-api-key: up to 50 characters of `[\w.-]` before the keyword, then a
            // value of up to 150.
            (
                "generic-api-key",
                format!(
                    "{}_token = {value}{value}{}",
                    "a.b-c_".repeat(8),
                    &value[..40]
                ),
            ),
            // craik-secret-key-value: any number of `name-` / `name_` parts before the key.
            (
                "craik-secret-key-value",
                format!("{}api_key={value}", "service-region_".repeat(12)),
            ),
            // craik-auth-scheme: the credential after any run of spaces.
            (
                "craik-auth-scheme",
                format!("Authorization: Bearer{}{value}", " ".repeat(300)),
            ),
        ];
        for (id, text) in cases {
            let i = rules.rules.iter().position(|r| r.id == id).unwrap();
            assert!(rules.rules[i].anchor.is_some(), "{id} is run over windows");
            let full = full_matches(rules, i, &text);
            assert!(!full.is_empty(), "{id}: {text:?}");
            assert_eq!(full.last().unwrap().end, text.len(), "{id}: to the end");
            assert_eq!(fast_matches(rules, i, &text), full, "{id}");
            let out = super::super::redact_text(&text).text;
            assert!(!out.contains(&value[..20]), "{id}: {out:?}");
            assert_eq!(out, reference_redact(rules, &text), "{id}");
        }
    }

    /// `ſ` and `K` (Kelvin sign) are `s` and `k` to a case-insensitive rule, not to the
    /// literal search that places windows: a text holding one is scanned whole, so a key
    /// spelled with one is still found. Without that, these secrets would be missed.
    #[test]
    fn a_fold_hazard_turns_windows_off() {
        let rules = super::super::secret_rules().unwrap();
        for text in [
            "\u{17F}ecret_key = Zx9QwErTy7UiOpAs3DfGhJkL2zX",
            "api_\u{212A}ey: Zx9QwErTy7UiOpAs3DfGhJkL2zX",
            "token: none\npa\u{17F}\u{17F}word=Zx9QwErTy7UiOpAs3DfGhJkL2zX",
        ] {
            assert!(rules.found(text).hazard, "{text:?}");
            let out = super::super::redact_text(text).text;
            assert!(!out.contains("Zx9QwErTy7"), "{text:?}: {out:?}");
            assert_eq!(out, reference_redact(rules, text), "{text:?}");
            for i in anchored(rules) {
                assert_eq!(fast_matches(rules, i, text), full_matches(rules, i, text));
            }
        }
    }

    /// Lines of the kinds Craik redacts most, for generated texts.
    const LINES: [&str; 16] = [
        "   Compiling serde_json v1.0.140",
        "warning: unused variable: `token_count`",
        "test result: ok. 142 passed; 0 failed; 0 ignored",
        "fn load_key(path: &Path) -> Result<SigningKey, KeyError> {",
        "    // The access token is refreshed by the provider adapter.",
        "    let api_base = config.get(\"api_base\").unwrap_or(DEFAULT_API_BASE);",
        "    headers.insert(\"Authorization\", format!(\"Bearer {}\", self.key));",
        r#"{"level":"info","msg":"token bucket refilled","keys":12,"password_policy":"min 12"}"#,
        "DATABASE_URL=postgres://localhost:5432/app",
        "secret_store: vault # the key is read at start",
        "credentials_file = ~/.aws/credentials",
        "  access_log: /var/log/nginx/access.log",
        "export PASSWORD_MIN=12 AUTH_MODE=oidc",
        "| capability | operations | note |",
        "Привет, мир — naïve café ✓",
        "",
    ];

    /// A text of [`LINES`] and noise, with rule samples (positive, negative, cut short) put
    /// in at random places, inside words too; now and then a fold hazard.
    fn generated_text() -> impl Strategy<Value = String> {
        let n = samples().len();
        let line = prop_oneof![
            4 => (0..LINES.len()).prop_map(|i| LINES[i].to_owned()),
            1 => "[A-Za-z0-9_=:'\" ./+-]{0,60}",
            1 => "[\u{17F}\u{212A}a-z =_]{0,8}",
        ];
        let insert = (
            0..n,
            0..3u8,
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(i, kind, cut, at)| (i, kind, cut, at));
        (
            prop::collection::vec(line, 1..24),
            prop::collection::vec(insert, 0..6),
        )
            .prop_map(|(lines, inserts)| {
                let mut text = lines.join("\n");
                for (i, kind, cut, at) in inserts {
                    let s = &samples()[i];
                    let piece = match kind {
                        0 => s.positive.clone(),
                        1 => s.negative.clone(),
                        _ => {
                            let p = &s.positive;
                            let c = cut.index(p.len() + 1);
                            let c = (0..=c).rev().find(|&c| p.is_char_boundary(c)).unwrap();
                            p[..c].to_owned()
                        }
                    };
                    let at = at.index(text.len() + 1);
                    let at = (0..=at).rev().find(|&a| text.is_char_boundary(a)).unwrap();
                    text.insert_str(at, &piece);
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// On generated texts with samples at random offsets, redaction (windows, the
        /// keyword pass found again only near replacements) gives exactly the output of the
        /// reference path, which scans every enabled rule over the whole text with the
        /// `regex` crate; and every rule run over windows finds every match a full scan
        /// finds.
        #[test]
        fn windowed_redaction_equals_the_full_text_path(text in generated_text()) {
            let rules = super::super::secret_rules().unwrap();
            prop_assert_eq!(rules.spans(&text).spans, reference_spans(rules, &text));
            prop_assert_eq!(
                super::super::redact_text(&text).text,
                reference_redact(rules, &text)
            );
            let found = rules.found(&text);
            for i in anchored(rules) {
                if found.enabled[i] {
                    prop_assert_eq!(
                        fast_matches(rules, i, &text),
                        full_matches(rules, i, &text),
                        "{}", rules.rules[i].id
                    );
                }
            }
        }

        /// After a pass's secrets are replaced, the keyword pass found again only near the
        /// replacements finds exactly the anchor literals a new pass over the whole text
        /// finds.
        #[test]
        fn literals_found_again_near_replacements_equal_a_new_pass(text in generated_text()) {
            let rules = super::super::secret_rules().unwrap();
            let pass = rules.spans(&text);
            let (next, markers) = super::super::replace_spans(&text, &pass.spans).unwrap();
            let mut again = rules.refound(&next, &pass, &markers).anchors;
            let mut fresh = rules.found(&next).anchors;
            again.sort_unstable();
            fresh.sort_unstable();
            prop_assert_eq!(again, fresh);
        }
    }
}
