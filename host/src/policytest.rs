//! `craik policy test`: suites of sample requests with expected verdicts, and Cedar's own
//! `run-tests` format, with coverage of the loaded policies.
//!
//! A suite file is one JSON object (`policy-tests/README.md` documents it); a file whose
//! top level is an array is in Cedar's `run-tests` format and runs unchanged against the
//! bundle's decision policies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use craik_contracts::{CapabilityGrant, Timestamp};
use craik_kernel::{
    Bundle, DecideOptions, Decision, DecisionRequest, DenyKind, GrantSet, Mode, Verdict,
    request_hash,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Error;
use crate::policies::{decode_grants, read_file_bounded as read_bounded};

/// Default clock for cases that name none.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";
/// Default workspace root for cases that name none.
pub const DEFAULT_ROOT: &str = "/workspace";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    suite: String,
    #[serde(default)]
    #[allow(dead_code, reason = "documentation for readers of the suite")]
    description: Option<String>,
    #[serde(default)]
    now: Option<Timestamp>,
    #[serde(default)]
    workspace_root: Option<String>,
    #[serde(default)]
    grants: Vec<Value>,
    #[serde(default)]
    defaults: Map<String, Value>,
    /// Extra policy directories (relative to the suite file) loaded on top of the bundle for
    /// this suite only, e.g. a deliberately erroring policy.
    #[serde(default)]
    custom: Vec<String>,
    /// The project's immutable paths for every case of the suite (craik.toml's
    /// `project.immutable_paths`).
    #[serde(default)]
    immutable_paths: Vec<String>,
    cases: Vec<CaseFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: String,
    #[serde(default)]
    request: Map<String, Value>,
    #[serde(default)]
    grants: Option<Vec<Value>>,
    #[serde(default)]
    now: Option<Timestamp>,
    #[serde(default)]
    shadow: bool,
    expect: Expect,
}

/// What a case expects.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_kind: Option<DenyKind>,
    /// Exactly these determining policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determining: Option<Vec<String>>,
    /// At least these determining policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determining_includes: Option<Vec<String>>,
    /// Exactly these grants permitted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_exception: Option<bool>,
}

/// Cedar's `run-tests` case, as the Cedar CLI reads it (unknown fields ignored, as there;
/// `entities` inline or a file next to the tests file; `reason` a subset of the actual one).
#[derive(Debug, Deserialize)]
struct CedarCase {
    #[serde(default)]
    name: Option<String>,
    request: CedarRequest,
    entities: Value,
    decision: CedarDecision,
    reason: Vec<String>,
    num_errors: usize,
}

#[derive(Debug, Deserialize)]
struct CedarRequest {
    principal: String,
    action: String,
    resource: String,
    #[serde(default)]
    context: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum CedarDecision {
    Allow,
    Deny,
}

/// One runnable case, loaded and resolved.
#[derive(Debug, Clone)]
pub struct Case {
    pub file: String,
    pub suite: String,
    pub name: String,
    /// Extra policy directories for this case's suite.
    pub custom: Vec<PathBuf>,
    kind: CaseKind,
}

#[derive(Debug, Clone)]
enum CaseKind {
    Craik {
        request: Box<DecisionRequest>,
        grants: std::sync::Arc<Vec<CapabilityGrant>>,
        now: Timestamp,
        root: String,
        shadow: bool,
        immutable: craik_kernel::ImmutablePaths,
        expect: Expect,
    },
    Cedar {
        principal: String,
        action: String,
        resource: String,
        context: Value,
        entities: Value,
        allow: bool,
        reason: Vec<String>,
        errors: usize,
    },
}

impl Case {
    pub fn id(&self) -> String {
        format!("{} :: {}", self.suite, self.name)
    }
}

/// What a case produced, comparable across bundles (for `policy diff`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub decision: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_kind: Option<DenyKind>,
    pub determining: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Evaluation errors, worded as Cedar words them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// A case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub file: String,
    pub suite: String,
    pub name: String,
    pub passed: bool,
    pub micros: u128,
    pub actual: Outcome,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
}

/// Loads every suite under `paths` (files or directories of `*.json`).
pub fn load_cases(paths: &[PathBuf]) -> Result<Vec<Case>, Error> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            collect(path, &mut files)
                .map_err(|e| Error::usage(format!("{}: cannot list: {e}", path.display())))?;
        } else {
            files.push(path.clone());
        }
    }
    files.sort();
    let mut cases = Vec::new();
    let mut problems = Vec::new();
    for file in &files {
        match load_file(file) {
            Ok(mut c) => cases.append(&mut c),
            Err(mut p) => problems.append(&mut p),
        }
    }
    if !problems.is_empty() {
        return Err(Error::invalid(
            format!("{} invalid case file problem(s)", problems.len()),
            problems,
        )
        .with_kind(crate::ErrorKind::Usage));
    }
    Ok(cases)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json")
            && !path.to_string_lossy().ends_with(".entities.json")
        {
            // `*.entities.json` are entity files that Cedar-format tests point at.
            out.push(path);
        }
    }
    Ok(())
}

fn load_file(path: &Path) -> Result<Vec<Case>, Vec<String>> {
    let label = path.display().to_string();
    let bytes = read_bounded(path).map_err(|e| vec![format!("{label}: {e}")])?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        vec![format!(
            "{label}: not valid UTF-8 at byte {}",
            e.valid_up_to()
        )]
    })?;
    let first = text.trim_start().chars().next();
    if first == Some('[') {
        return load_cedar(&label, path.parent().unwrap_or(Path::new(".")), text);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let suite: SuiteFile =
        serde_path_to_error_deserialize(&mut de).map_err(|e| vec![format!("{label}: {e}")])?;
    let base = path.parent().unwrap_or(Path::new("."));
    // Shared by every case of the suite that names no grants of its own, so they compile once.
    let suite_grants = std::sync::Arc::new(resolve_grants(&label, base, &suite.grants)?);
    let now = suite.now.map_or_else(
        || Timestamp::parse(DEFAULT_NOW).map_err(|e| vec![e.to_string()]),
        Ok,
    )?;
    let root = suite
        .workspace_root
        .clone()
        .unwrap_or_else(|| DEFAULT_ROOT.to_owned());
    let immutable = craik_kernel::ImmutablePaths::new(&suite.immutable_paths)
        .map_err(|e| vec![format!("{label}: $.immutable_paths: {e}")])?;
    let mut cases = Vec::new();
    let mut problems = Vec::new();
    for (i, case) in suite.cases.into_iter().enumerate() {
        let mut merged = suite.defaults.clone();
        for (k, v) in case.request {
            merged.insert(k, v);
        }
        let request: DecisionRequest = match serde_json::from_value(Value::Object(merged)) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!(
                    "{label}: $.cases[{i}] ({}): request: {e}",
                    case.name
                ));
                continue;
            }
        };
        let grants = match &case.grants {
            Some(list) => match resolve_grants(&label, base, list) {
                Ok(g) => std::sync::Arc::new(g),
                Err(mut p) => {
                    problems.append(&mut p);
                    continue;
                }
            },
            None => suite_grants.clone(),
        };
        cases.push(Case {
            file: label.clone(),
            suite: suite.suite.clone(),
            name: case.name,
            custom: suite.custom.iter().map(|c| base.join(c)).collect(),
            kind: CaseKind::Craik {
                request: Box::new(request),
                grants,
                now: case.now.unwrap_or(now),
                root: root.clone(),
                shadow: case.shadow,
                immutable: immutable.clone(),
                expect: case.expect,
            },
        });
    }
    if problems.is_empty() {
        Ok(cases)
    } else {
        Err(problems)
    }
}

fn serde_path_to_error_deserialize<'de, T: Deserialize<'de>>(
    de: &mut serde_json::Deserializer<serde_json::de::StrRead<'de>>,
) -> Result<T, String> {
    T::deserialize(de).map_err(|e| craik_contracts::one_line(&e.to_string()))
}

fn load_cedar(label: &str, base: &Path, text: &str) -> Result<Vec<Case>, Vec<String>> {
    let parsed: Vec<CedarCase> = serde_json::from_str(text)
        .map_err(|e| vec![format!("{label}: Cedar run-tests format: {e}")])?;
    let mut cases = Vec::with_capacity(parsed.len());
    for (i, mut c) in parsed.into_iter().enumerate() {
        if let Value::String(file) = &c.entities {
            c.entities = cedar_entities_file(base, file)
                .map_err(|e| vec![format!("{label}: [{i}].entities: {e}")])?;
        }
        cases.push(c);
    }
    Ok(cases
        .into_iter()
        .enumerate()
        .map(|(i, c)| Case {
            file: label.to_owned(),
            suite: format!("cedar:{label}"),
            name: c.name.unwrap_or_else(|| format!("test {i}")),
            custom: Vec::new(),
            kind: CaseKind::Cedar {
                principal: c.request.principal,
                action: c.request.action,
                resource: c.request.resource,
                context: if c.request.context.is_null() {
                    Value::Object(Map::new())
                } else {
                    c.request.context
                },
                entities: c.entities,
                allow: c.decision == CedarDecision::Allow,
                reason: c.reason,
                errors: c.num_errors,
            },
        })
        .collect())
}

/// An entities file named by a Cedar test, which must stay inside the tests' directory.
fn cedar_entities_file(base: &Path, file: &str) -> Result<Value, String> {
    let dir = base
        .canonicalize()
        .map_err(|e| format!("{}: {e}", base.display()))?;
    let path = base
        .join(file)
        .canonicalize()
        .map_err(|e| format!("`{file}`: {e}"))?;
    if !path.starts_with(&dir) {
        return Err(format!(
            "entities file `{}` is outside the tests' directory",
            path.display()
        ));
    }
    let bytes = read_bounded(&path).map_err(|e| format!("`{file}`: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("`{file}`: {e}"))
}

fn resolve_grants(
    label: &str,
    base: &Path,
    refs: &[Value],
) -> Result<Vec<CapabilityGrant>, Vec<String>> {
    let mut grants = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let found = match r {
            Value::String(rel) => {
                let path = base.join(rel);
                let bytes = read_bounded(&path)
                    .map_err(|e| vec![format!("{label}: grants[{i}]: {}: {e}", path.display())])?;
                decode_grants(&path.display().to_string(), &bytes)
            }
            other => decode_grants(
                &format!("{label}: grants[{i}]"),
                other.to_string().as_bytes(),
            ),
        };
        match found {
            Ok(mut g) => grants.append(&mut g),
            Err(f) => {
                return Err(if f.details.is_empty() {
                    vec![f.message]
                } else {
                    f.details
                });
            }
        }
    }
    Ok(grants)
}

/// Compiled grant sets, keyed by the identity of the grant list they came from, so a suite's
/// grants compile once rather than once per case.
#[derive(Debug, Default)]
pub struct GrantCache(std::collections::HashMap<usize, Result<GrantSet, String>>);

/// Runs one case against a bundle.
pub fn run_case(bundle: &Bundle, case: &Case, cache: &mut GrantCache) -> CaseResult {
    let started = Instant::now();
    let (actual, mismatches) = match &case.kind {
        CaseKind::Craik {
            request,
            grants,
            now,
            root,
            shadow,
            immutable,
            expect,
        } => {
            let key = std::sync::Arc::as_ptr(grants) as usize;
            let compiled = cache
                .0
                .entry(key)
                .or_insert_with(|| GrantSet::compile(bundle, grants).map_err(|e| e.to_string()));
            let verdict = decide_compiled(
                bundle,
                request,
                compiled.as_ref().map_err(String::clone),
                (*now, root, *shadow),
                immutable,
                None,
            );
            let outcome = outcome_of(&verdict);
            let mut mismatches = compare(expect, &verdict);
            // A capability the schema does not declare tests nothing (a typo would pass as a
            // deny): an error, unless the case says it tests exactly that refusal
            // (`deny_kind: invalid_request`).
            if !bundle.knows(&request.capability)
                && expect.deny_kind != Some(DenyKind::InvalidRequest)
            {
                mismatches.insert(
                    0,
                    format!(
                        "error: unknown capability `{}`: the schema declares no such action, so this case tests nothing",
                        craik_contracts::Truncated(&request.capability)
                    ),
                );
            }
            (outcome, mismatches)
        }
        CaseKind::Cedar {
            principal,
            action,
            resource,
            context,
            entities,
            allow,
            reason,
            errors,
        } => run_cedar(
            bundle,
            [principal, action, resource],
            (context, entities),
            (*allow, reason, *errors),
        ),
    };
    CaseResult {
        file: case.file.clone(),
        suite: case.suite.clone(),
        name: case.name.clone(),
        passed: mismatches.is_empty(),
        micros: started.elapsed().as_micros(),
        actual,
        mismatches,
    }
}

/// A case in Cedar's `run-tests` format, evaluated exactly as Cedar would: the decision,
/// the declared reason a subset of the actual one, the number of errors.
fn run_cedar(
    bundle: &Bundle,
    [principal, action, resource]: [&String; 3],
    (context, entities): (&Value, &Value),
    (allow, reason, errors): (bool, &[String], usize),
) -> (Outcome, Vec<String>) {
    let raw = match bundle.evaluate_raw(
        principal,
        action,
        resource,
        context.clone(),
        entities.clone(),
    ) {
        Ok(raw) => raw,
        Err(e) => {
            let outcome = Outcome {
                decision: "error".into(),
                deny_kind: None,
                determining: Vec::new(),
                grants: Vec::new(),
                reasons: vec![e.clone()],
                errors: Vec::new(),
            };
            return (outcome, vec![format!("request is invalid: {e}")]);
        }
    };
    let mut m = Vec::new();
    if raw.allow != allow {
        m.push(format!(
            "decision: expected {}, got {}",
            word(allow),
            word(raw.allow)
        ));
    }
    let missing: Vec<&String> = reason.iter().filter(|r| !raw.reason.contains(r)).collect();
    if !missing.is_empty() {
        m.push(format!("reason: missing {missing:?}, got {:?}", raw.reason));
    }
    if raw.errors != errors {
        m.push(format!("num_errors: expected {errors}, got {}", raw.errors));
    }
    let outcome = Outcome {
        decision: word(raw.allow).into(),
        deny_kind: None,
        determining: raw.reason,
        grants: Vec::new(),
        reasons: Vec::new(),
        errors: raw.error_messages,
    };
    (outcome, m)
}

fn word(allow: bool) -> &'static str {
    if allow { "allow" } else { "deny" }
}

/// Decides a case's request, resolving `"request_hash": "@self"` in its approvals.
pub fn decide(
    bundle: &Bundle,
    request: &DecisionRequest,
    grants: &[CapabilityGrant],
    now: Timestamp,
    root: &str,
    shadow: bool,
) -> Verdict {
    decide_traced(bundle, request, grants, now, root, shadow, None)
}

/// [`decide`], and with `trace` each permit that could apply and why it did not match
/// (`craik policy explain --trace`).
pub fn decide_traced(
    bundle: &Bundle,
    request: &DecisionRequest,
    grants: &[CapabilityGrant],
    now: Timestamp,
    root: &str,
    shadow: bool,
    trace: Option<&mut Vec<craik_kernel::PermitTrace>>,
) -> Verdict {
    let compiled = GrantSet::compile(bundle, grants).map_err(|e| e.to_string());
    decide_compiled(
        bundle,
        request,
        compiled.as_ref().map_err(String::clone),
        (now, root, shadow),
        &craik_kernel::ImmutablePaths::default(),
        trace,
    )
}

fn decide_compiled(
    bundle: &Bundle,
    request: &DecisionRequest,
    grants: Result<&GrantSet, String>,
    (now, root, shadow): (Timestamp, &str, bool),
    immutable: &craik_kernel::ImmutablePaths,
    trace: Option<&mut Vec<craik_kernel::PermitTrace>>,
) -> Verdict {
    let options = DecideOptions {
        now: now.get(),
        workspace_root: root.to_owned(),
        mode: if shadow { Mode::Shadow } else { Mode::Enforce },
        immutable: immutable.clone(),
    };
    let grant_set = match grants {
        Ok(g) => g,
        Err(e) => return bundle.refusal(options.mode, "kernel.invalid-grant", e),
    };
    let mut request = request.clone();
    if request.approvals.iter().any(|a| a.request_hash == "@self") {
        let hash = request_hash(bundle, &request, root).unwrap_or_default();
        for a in &mut request.approvals {
            if a.request_hash == "@self" {
                a.request_hash.clone_from(&hash);
            }
        }
    }
    match trace {
        Some(out) => {
            let (verdict, permits) = bundle.decide_traced(grant_set, &request, &options);
            *out = permits;
            verdict
        }
        None => bundle.decide(grant_set, &request, &options),
    }
}

pub fn outcome_of(v: &Verdict) -> Outcome {
    Outcome {
        decision: decision_name(v.decision).into(),
        deny_kind: v.deny_kind,
        determining: v.determining.clone(),
        grants: v.grants.clone(),
        reasons: v.reasons.clone(),
        errors: v.errors.clone(),
    }
}

fn kind_name(kind: Option<DenyKind>) -> String {
    match kind.map(serde_json::to_value) {
        Some(Ok(Value::String(s))) => s,
        _ => "none".to_owned(),
    }
}

pub fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::RequiresApproval => "requires_approval",
        Decision::Deny => "deny",
    }
}

fn compare(expect: &Expect, v: &Verdict) -> Vec<String> {
    let mut m = Vec::new();
    if expect.decision != v.decision {
        m.push(format!(
            "decision: expected {}, got {}",
            decision_name(expect.decision),
            decision_name(v.decision)
        ));
    }
    if let Some(kind) = expect.deny_kind
        && v.deny_kind != Some(kind)
    {
        m.push(format!(
            "deny_kind: expected {}, got {}",
            kind_name(Some(kind)),
            kind_name(v.deny_kind)
        ));
    }
    if let Some(want) = &expect.determining {
        let mut want = want.clone();
        want.sort();
        if want != v.determining {
            m.push(format!(
                "determining: expected {want:?}, got {:?}",
                v.determining
            ));
        }
    }
    if let Some(want) = &expect.determining_includes {
        let missing: Vec<&String> = want.iter().filter(|w| !v.determining.contains(w)).collect();
        if !missing.is_empty() {
            m.push(format!(
                "determining: expected to include {missing:?}, got {:?}",
                v.determining
            ));
        }
    }
    if let Some(want) = &expect.grants {
        let mut want = want.clone();
        want.sort();
        let mut got = v.grants.clone();
        got.sort();
        if want != got {
            m.push(format!("grants: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &expect.approval
        && v.approval.as_ref() != Some(want)
    {
        m.push(format!("approval: expected {want:?}, got {:?}", v.approval));
    }
    if let Some(want) = expect.policy_exception
        && v.policy_exception != want
    {
        m.push(format!(
            "policy_exception: expected {want}, got {}",
            v.policy_exception
        ));
    }
    m
}

/// Which loaded policies no case exercised (as a determining policy): those of the bundle and
/// of every custom directory a suite loaded.
pub fn coverage<'a>(
    bundles: impl IntoIterator<Item = &'a Bundle>,
    results: &[CaseResult],
) -> (Vec<String>, Vec<String>) {
    let exercised: BTreeSet<&str> = results
        .iter()
        .flat_map(|r| r.actual.determining.iter().map(String::as_str))
        .collect();
    let all: BTreeMap<&str, ()> = bundles
        .into_iter()
        .flat_map(Bundle::policies)
        .map(|p| (p.id.as_str(), ()))
        .collect();
    let (covered, missed): (Vec<&str>, Vec<&str>) =
        all.keys().partition(|id| exercised.contains(*id));
    (
        covered.into_iter().map(str::to_owned).collect(),
        missed.into_iter().map(str::to_owned).collect(),
    )
}

/// JUnit XML, one `<testsuite>` per suite.
pub fn junit(results: &[CaseResult]) -> String {
    let mut suites: BTreeMap<&str, Vec<&CaseResult>> = BTreeMap::new();
    for r in results {
        suites.entry(&r.suite).or_default().push(r);
    }
    let failures = results.iter().filter(|r| !r.passed).count();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"craik policy test\" tests=\"{}\" failures=\"{failures}\">\n",
        results.len()
    );
    for (suite, cases) in suites {
        let f = cases.iter().filter(|r| !r.passed).count();
        let secs: f64 = cases.iter().map(|r| r.micros as f64 / 1e6).sum();
        xml.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" time=\"{secs:.6}\">\n",
            xml_escape(suite),
            cases.len()
        ));
        for r in cases {
            xml.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.6}\"",
                xml_escape(&r.file),
                xml_escape(&r.name),
                r.micros as f64 / 1e6
            ));
            if r.passed {
                xml.push_str("/>\n");
            } else {
                xml.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml_escape(r.mismatches.first().map_or("", String::as_str)),
                    xml_escape(&format!(
                        "{}\nactual: {}",
                        r.mismatches.join("\n"),
                        serde_json::to_string(&r.actual).unwrap_or_default()
                    ))
                ));
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry most control characters, even as references.
            c if c.is_control() && c != '\n' && c != '\t' => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out
}
