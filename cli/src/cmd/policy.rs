//! `craik policy validate|fmt|explain|test|diff` and `craik grants show`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use craik_contracts::Timestamp;
use craik_kernel::{Decision, DecisionRequest};
use serde::Serialize;

use crate::bundle::{cedar_files, compile_grants, load, read_grants};
use crate::cli::{BundleArgs, PolicyTestArgs};
use crate::exit::{Exit, Failure};
use crate::files::{DEFAULT_MAX_BYTES, Input, read_bounded, write_atomic};
use crate::output::{Format, Out};
use craik_host::policytest::{self, CaseResult, Outcome};

pub(crate) fn validate(
    out: &mut Out,
    format: Format,
    args: &BundleArgs,
    now: Option<&str>,
) -> Result<Exit, Failure> {
    let loaded = crate::bundle::load_args(out, args)?;
    let now = parse_now(now)?;
    let lints = loaded.bundle.lints(now.get().unix_timestamp());
    let policies: Vec<_> = loaded.bundle.policies().collect();
    #[derive(Serialize)]
    struct Finding<'a> {
        rule: &'a str,
        severity: craik_kernel::Severity,
        policy: &'a str,
        file: &'a str,
        line: usize,
        message: &'a str,
    }
    #[derive(Serialize)]
    struct Report<'a> {
        origin: &'a str,
        policy_set: &'a str,
        policies: usize,
        capabilities: Vec<&'a str>,
        lints: Vec<Finding<'a>>,
    }
    let errors = lints
        .iter()
        .filter(|l| l.severity == craik_kernel::Severity::Error)
        .count();
    let report = Report {
        origin: &loaded.origin,
        policy_set: loaded.bundle.hash(),
        policies: policies.len(),
        capabilities: loaded.bundle.capabilities().collect(),
        lints: lints
            .iter()
            .map(|l| Finding {
                rule: l.rule,
                severity: l.severity,
                policy: &l.policy,
                file: &l.at.file,
                line: l.at.line,
                message: &l.at.message,
            })
            .collect(),
    };
    match format {
        Format::Human => {
            for l in &lints {
                let level = match l.severity {
                    craik_kernel::Severity::Error => "error",
                    craik_kernel::Severity::Warning => "warning",
                };
                out.line(format_args!(
                    "{}:{}:{}: {level}[{}]: {}",
                    l.at.file, l.at.line, l.at.column, l.rule, l.at.message
                ))?;
            }
            if errors > 0 {
                out.line(format_args!(
                    "{}: {errors} lint error(s), policy set {}",
                    report.origin, report.policy_set
                ))?;
            } else {
                out.line(format_args!(
                    "{}: ok, {} policies, {} capabilities, policy set {}",
                    report.origin,
                    report.policies,
                    report.capabilities.len(),
                    report.policy_set
                ))?;
            }
        }
        Format::Json | Format::Junit => out.json(&report)?,
    }
    Ok(if errors > 0 {
        Exit::CheckFailed
    } else {
        Exit::Ok
    })
}

/// `--now TIME` (RFC 3339), or the clock.
fn parse_now(now: Option<&str>) -> Result<Timestamp, Failure> {
    match now {
        Some(text) => Timestamp::parse(text).map_err(|e| {
            Failure::usage(format!(
                "--now `{}`: {e}; expected RFC 3339",
                craik_contracts::Truncated(text)
            ))
        }),
        None => Ok(Timestamp::new(time::OffsetDateTime::now_utc())),
    }
}

/// `policy export DIR`: the embedded bundle's files, byte for byte, so `--policies DIR`
/// loads a bundle with the embedded default's policy-set hash.
pub(crate) fn export(
    out: &mut Out,
    format: Format,
    dir: &Path,
    force: bool,
) -> Result<Exit, Failure> {
    let files: Vec<(&str, &str)> = std::iter::once(craik_host::embedded::SCHEMA)
        .chain(craik_host::embedded::POLICIES.iter().copied())
        .collect();
    let mut conflicts = Vec::new();
    for (name, text) in &files {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.is_file() => conflicts.push(format!(
                "{}: exists and is not a regular file",
                path.display()
            )),
            Ok(_) if force => {}
            Ok(_) => match std::fs::read(&path) {
                Ok(bytes) if bytes == text.as_bytes() => {}
                Ok(_) => conflicts.push(format!("{}: exists with other content", path.display())),
                Err(e) => conflicts.push(format!("{}: cannot read: {e}", path.display())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => conflicts.push(format!("{}: {e}", path.display())),
        }
    }
    if !conflicts.is_empty() {
        return Err(Failure::invalid(
            format!(
                "{}: {} file(s) would be overwritten; pass --force to replace them, or export into an empty directory",
                dir.display(),
                conflicts.len()
            ),
            conflicts,
        )
        .with_exit(Exit::Usage));
    }
    for (name, text) in &files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Failure::usage(format!("{}: cannot create: {e}", parent.display()))
                    .with_exit(Exit::Io)
            })?;
        }
        write_atomic(&path, text.as_bytes()).map_err(|e| {
            Failure::usage(format!("{}: cannot write: {e}", path.display())).with_exit(Exit::Io)
        })?;
    }
    let (schema, policies) = (
        craik_host::embedded::SCHEMA.1,
        craik_host::embedded::POLICIES,
    );
    let hash = craik_kernel::policy_set_hash(
        schema,
        &policies.iter().map(|(_, t)| *t).collect::<Vec<_>>(),
    );
    #[derive(Serialize)]
    struct Report<'a> {
        dir: String,
        files: Vec<&'a str>,
        policy_set: &'a str,
    }
    match format {
        Format::Human => out.line(format_args!(
            "{}: wrote {} files of the embedded default, policy set {hash}",
            dir.display(),
            files.len()
        ))?,
        Format::Json | Format::Junit => out.json(&Report {
            dir: dir.display().to_string(),
            files: files.iter().map(|(n, _)| *n).collect(),
            policy_set: &hash,
        })?,
    }
    Ok(Exit::Ok)
}

pub(crate) fn fmt(
    out: &mut Out,
    dir: &Path,
    check: bool,
    diff: bool,
    line_width: usize,
) -> Result<Exit, Failure> {
    let files = cedar_files(dir, true)?;
    let config = cedar_policy_formatter::Config {
        line_width,
        indent_width: 2,
    };
    let mut changed = Vec::new();
    let mut problems = Vec::new();
    for file in &files {
        match cedar_policy_formatter::policies_str_to_pretty(&file.text, &config) {
            Ok(pretty) if pretty == file.text => {}
            Ok(pretty) => changed.push((file.name.clone(), pretty)),
            Err(e) => problems.push(format!(
                "{}: cannot format: {}",
                file.name,
                craik_contracts::one_line(&format!("{e:#}"))
            )),
        }
    }
    if !problems.is_empty() {
        return Err(Failure::invalid(
            format!("{} file(s) cannot be formatted", problems.len()),
            problems,
        ));
    }
    for (name, pretty) in &changed {
        if check {
            out.line(format_args!("{name}: not formatted"))?;
            if diff {
                let original = files
                    .iter()
                    .find(|f| &f.name == name)
                    .map_or("", |f| f.text.as_str());
                // The file's own bytes are shown, so control characters are defused first.
                let text = similar::TextDiff::from_lines(original, pretty.as_str())
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{name}"), &format!("b/{name}"))
                    .to_string();
                out.text(&defuse(&text))?;
            }
        } else {
            write_atomic(Path::new(name), pretty.as_bytes())
                .map_err(|e| Failure::usage(format!("{name}: cannot write: {e}")))?;
            out.line(format_args!("{name}: formatted"))?;
        }
    }
    if check && !changed.is_empty() {
        return Ok(Exit::CheckFailed);
    }
    if changed.is_empty() {
        out.line(format_args!("{} files already formatted", files.len()))?;
    }
    Ok(Exit::Ok)
}

/// Control characters other than newline and tab drawn as `?`, so a policy file's bytes
/// cannot drive the terminal.
fn defuse(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '?'
            } else {
                c
            }
        })
        .collect()
}

pub(crate) struct ExplainArgs<'a> {
    pub(crate) request: &'a Path,
    pub(crate) grants: &'a [PathBuf],
    pub(crate) now: Option<&'a str>,
    pub(crate) workspace_root: Option<&'a str>,
    pub(crate) shadow: bool,
    pub(crate) trace: bool,
    pub(crate) bundle: &'a BundleArgs,
}

pub(crate) fn explain(
    out: &mut Out,
    format: Format,
    args: &ExplainArgs<'_>,
) -> Result<Exit, Failure> {
    let loaded = crate::bundle::load_args(out, args.bundle)?;
    let label = args.request.display().to_string();
    let input = if args.request.as_os_str() == "-" {
        Input::Stdin
    } else {
        Input::File(args.request.to_owned())
    };
    let bytes = read_bounded(&input, DEFAULT_MAX_BYTES)
        .map_err(|e| Failure::usage(format!("{label}: {e}")))?;
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let request: DecisionRequest = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." {
            "$".to_owned()
        } else {
            format!("$.{path}")
        };
        Failure::invalid(
            format!(
                "{label}: {path}: {}",
                craik_contracts::one_line(&e.into_inner().to_string())
            ),
            Vec::new(),
        )
    })?;
    let grants = read_grants(args.grants)?;
    compile_grants(&loaded.bundle, &grants, "--grants")?;
    let now = parse_now(args.now)?;
    let root = match args.workspace_root {
        Some(root) => root.to_owned(),
        None => std::env::current_dir()
            .map_err(|e| Failure::internal(format!("current directory: {e}")))?
            .display()
            .to_string(),
    };
    let mut permits = Vec::new();
    let verdict = policytest::decide_traced(
        &loaded.bundle,
        &request,
        &grants,
        now,
        &root,
        args.shadow,
        args.trace.then_some(&mut permits),
    );
    let at = |id: &str| {
        loaded
            .bundle
            .policy(id)
            .map(|p| format!(" ({}:{})", p.file, p.line))
            .unwrap_or_default()
    };
    match format {
        Format::Json | Format::Junit if args.trace => {
            #[derive(Serialize)]
            struct Traced<'a> {
                #[serde(flatten)]
                verdict: &'a craik_kernel::Verdict,
                trace: &'a [craik_kernel::PermitTrace],
            }
            out.json(&Traced {
                verdict: &verdict,
                trace: &permits,
            })?
        }
        Format::Json | Format::Junit => out.json(&verdict)?,
        Format::Human => {
            let mut head = policytest::decision_name(verdict.decision).to_owned();
            if let Some(kind) = verdict.deny_kind {
                head.push_str(&format!(
                    " ({})",
                    serde_json::to_value(kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                ));
            }
            if verdict.mode == craik_kernel::Mode::Shadow {
                head.push_str(" [shadow: not enforced]");
            }
            out.line(format_args!("verdict: {head}"))?;
            for (id, reason) in verdict.determining.iter().zip(&verdict.reasons) {
                out.line(format_args!("  {id}{}: {reason}", at(id)))?;
            }
            for reason in verdict.reasons.iter().skip(verdict.determining.len()) {
                out.line(format_args!("  {reason}"))?;
            }
            // The permit an approval rule held back is shown, not hidden behind the rule.
            for id in &verdict.permitted_by {
                let reason = match id.strip_prefix(craik_kernel::GRANT_ID_PREFIX) {
                    Some(grant) => grants
                        .iter()
                        .find(|g| g.id == grant)
                        .map(|g| {
                            craik_contracts::one_line(&format!(
                                "grant `{grant}` approved by {}: {}",
                                g.approved_by, g.reason
                            ))
                        })
                        .unwrap_or_default(),
                    None => loaded
                        .bundle
                        .policy(id)
                        .and_then(|p| p.reason.clone())
                        .unwrap_or_default(),
                };
                let reason = if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                };
                out.line(format_args!(
                    "  permitted by {id}{}{reason}, held for approval",
                    at(id)
                ))?;
            }
            if !verdict.grants.is_empty() {
                out.line(format_args!(
                    "grants matched: {}",
                    verdict.grants.join(", ")
                ))?;
            }
            for note in &verdict.grant_notes {
                out.line(format_args!("  {note}"))?;
            }
            if let Some(a) = &verdict.approval {
                out.line(format_args!("approval used: {a}"))?;
            }
            for e in &verdict.errors {
                out.line(format_args!("error: {e}"))?;
            }
            if verdict.policy_exception {
                out.line("policy exception: evaluation errors let through under fail-open")?;
            }
            if args.trace {
                out.line(format_args!(
                    "trace: {} permit(s) could apply",
                    permits.len()
                ))?;
                for p in &permits {
                    if p.matched {
                        out.line(format_args!("  matched     {}{}", p.id, at(&p.id)))?;
                    } else {
                        out.line(format_args!(
                            "  not matched {}{}: {}",
                            p.id,
                            at(&p.id),
                            craik_contracts::one_line(&p.why)
                        ))?;
                    }
                }
            }
            out.line(format_args!("request {}", verdict.request_hash))?;
            out.line(format_args!("policy set {}", verdict.policy_set))?;
        }
    }
    Ok(match verdict.decision {
        Decision::Allow => Exit::Ok,
        Decision::RequiresApproval | Decision::Deny => Exit::CheckFailed,
    })
}

fn default_cases(paths: &[PathBuf]) -> Vec<PathBuf> {
    if paths.is_empty() {
        vec![PathBuf::from("policy-tests")]
    } else {
        paths.to_vec()
    }
}

pub(crate) fn test(out: &mut Out, format: Format, args: &PolicyTestArgs) -> Result<Exit, Failure> {
    let loaded =
        crate::bundle::load_args(out, &args.bundle).map_err(|f| f.with_exit(Exit::Usage))?;
    let filter = match &args.run {
        Some(re) => Some(regex::Regex::new(re).map_err(|e| {
            Failure::usage(format!(
                "--run: {}",
                craik_contracts::one_line(&e.to_string())
            ))
        })?),
        None => None,
    };
    let mut cases = policytest::load_cases(&default_cases(&args.paths))?;
    if let Some(re) = &filter {
        cases.retain(|c| re.is_match(&c.id()));
    }
    if cases.is_empty() {
        return Err(Failure::usage(
            "no policy test cases found (or none matched --run)",
        ));
    }
    let progress =
        std::io::stderr().is_terminal() && cases.len() >= 1000 && format == Format::Human;
    let mut extra: std::collections::HashMap<Vec<PathBuf>, craik_kernel::Bundle> =
        std::collections::HashMap::new();
    let mut results = Vec::with_capacity(cases.len());
    let mut caches: std::collections::HashMap<Vec<PathBuf>, policytest::GrantCache> =
        std::collections::HashMap::new();
    for (i, case) in cases.iter().enumerate() {
        let bundle = if case.custom.is_empty() {
            &loaded.bundle
        } else {
            if !extra.contains_key(&case.custom) {
                let mut dirs = args.bundle.custom.clone();
                dirs.extend(case.custom.iter().cloned());
                let b = load(args.bundle.policies.as_deref(), &dirs)
                    .map_err(|f| f.with_exit(Exit::Usage))?
                    .bundle;
                extra.insert(case.custom.clone(), b);
            }
            extra
                .get(&case.custom)
                .ok_or_else(|| Failure::internal("bundle cache"))?
        };
        let cache = caches.entry(case.custom.clone()).or_default();
        results.push(policytest::run_case(bundle, case, cache));
        if progress && i % 500 == 0 {
            out.progress(format_args!("{}/{} cases", i, cases.len()))?;
        }
    }
    if progress && cases.len() > 500 {
        out.end_progress()?;
    }
    let (mut covered, mut missed) = policytest::coverage(
        std::iter::once(&loaded.bundle).chain(extra.values()),
        &results,
    );
    if !args.coverage_of.is_empty() {
        let scopes = args
            .coverage_of
            .iter()
            .map(|d| {
                d.canonicalize()
                    .map_err(|e| Failure::usage(format!("--coverage-of {}: {e}", d.display())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bundles: Vec<&craik_kernel::Bundle> = std::iter::once(&loaded.bundle)
            .chain(extra.values())
            .collect();
        let in_scope = |id: &String| {
            bundles
                .iter()
                .find_map(|b| b.policy(id))
                .and_then(|p| Path::new(&p.file).canonicalize().ok())
                .is_some_and(|f| scopes.iter().any(|s| f.starts_with(s)))
        };
        covered.retain(in_scope);
        missed.retain(in_scope);
        if covered.is_empty() && missed.is_empty() {
            return Err(Failure::usage(format!(
                "--coverage-of: no loaded policy comes from {}; load it with --policies, --custom or a suite's `custom`",
                args.coverage_of
                    .iter()
                    .map(|d| format!("`{}`", d.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let total = covered.len() + missed.len();
    let pct = if total == 0 {
        100.0
    } else {
        covered.len() as f64 * 100.0 / total as f64
    };
    let failed = results.iter().filter(|r| !r.passed).count();

    if let Some(path) = &args.junit {
        write_atomic(path, policytest::junit(&results).as_bytes())
            .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", path.display())))?;
    }
    #[derive(Serialize)]
    struct Report<'a> {
        policy_set: &'a str,
        cases: usize,
        passed: usize,
        failed: usize,
        coverage_percent: f64,
        uncovered: &'a [String],
        results: &'a [CaseResult],
    }
    match format {
        Format::Junit => out.text(&policytest::junit(&results))?,
        Format::Json => out.json(&Report {
            policy_set: loaded.bundle.hash(),
            cases: results.len(),
            passed: results.len() - failed,
            failed,
            coverage_percent: pct,
            uncovered: &missed,
            results: &results,
        })?,
        Format::Human => {
            for r in results.iter().filter(|r| args.verbose || !r.passed) {
                if r.passed {
                    out.line(format_args!(
                        "ok   {} :: {} ({}, {} µs)",
                        r.suite, r.name, r.file, r.micros
                    ))?;
                    for e in &r.actual.errors {
                        out.line(format_args!("     {e}"))?;
                    }
                    continue;
                }
                out.line(format_args!("FAIL {} :: {} ({})", r.suite, r.name, r.file))?;
                for m in &r.mismatches {
                    out.line(format_args!("     {m}"))?;
                }
                out.line(format_args!(
                    "     actual determining: {:?}",
                    r.actual.determining
                ))?;
                for e in &r.actual.errors {
                    out.line(format_args!("     {e}"))?;
                }
            }
            let micros: u128 = results.iter().map(|r| r.micros).sum();
            out.line(format_args!(
                "{} cases: {} passed, {} failed ({:.1} ms in decisions)",
                results.len(),
                results.len() - failed,
                failed,
                micros as f64 / 1000.0
            ))?;
            let scope = if args.coverage_of.is_empty() {
                String::new()
            } else {
                format!(
                    " of {}",
                    args.coverage_of
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            out.line(format_args!(
                "coverage{scope}: {}/{} policies exercised ({pct:.1}%)",
                covered.len(),
                total
            ))?;
            for id in &missed {
                let at = std::iter::once(&loaded.bundle)
                    .chain(extra.values())
                    .find_map(|b| b.policy(id))
                    .map(|p| format!("{}:{}", p.file, p.line))
                    .unwrap_or_default();
                out.line(format_args!("  not exercised: {id} ({at})"))?;
            }
        }
    }
    let below = args.min_coverage.is_some_and(|min| pct + 1e-9 < min);
    if below && format == Format::Human {
        out.line(format_args!(
            "coverage {pct:.1}% is below --min-coverage {}",
            args.min_coverage.unwrap_or_default()
        ))?;
    }
    Ok(if failed > 0 || below {
        Exit::CheckFailed
    } else {
        Exit::Ok
    })
}

/// A side of `policy diff`: `embedded` names the embedded bundle, anything else a directory
/// (`./embedded` for a directory of that name).
fn side(arg: &Path) -> Option<&Path> {
    (arg.as_os_str() != "embedded").then_some(arg)
}

/// The name a custom directory is matched by: its own (real) directory name.
fn dir_name(dir: &Path) -> Option<std::ffi::OsString> {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(ToOwned::to_owned))
}

/// The custom directories one side of a diff loads for a case: the side's own, plus the
/// suite's, except that a suite directory named like one of either side's `--old-custom` /
/// `--new-custom` directories is left to the sides (the operator took it over: the old side
/// loads only its version, the new side only its). What the suite loads on both sides
/// unchanged is returned in `shared`, so the report can say so.
fn diff_dirs(
    common: &[PathBuf],
    own: &[PathBuf],
    either: &[PathBuf],
    suite: &[PathBuf],
    shared: &mut std::collections::BTreeSet<String>,
) -> Vec<PathBuf> {
    let taken: Vec<_> = either.iter().filter_map(|d| dir_name(d)).collect();
    let mut dirs: Vec<PathBuf> = common.iter().chain(own).cloned().collect();
    let mut real: Vec<_> = dirs.iter().filter_map(|d| d.canonicalize().ok()).collect();
    for dir in suite {
        if dir_name(dir).is_some_and(|n| taken.contains(&n)) {
            continue;
        }
        let canonical = dir.canonicalize().ok();
        if canonical.as_ref().is_some_and(|c| real.contains(c)) {
            continue;
        }
        shared.insert(dir.display().to_string());
        real.extend(canonical);
        dirs.push(dir.clone());
    }
    dirs
}

pub(crate) struct DiffArgs<'a> {
    pub(crate) old: &'a Path,
    pub(crate) new: &'a Path,
    pub(crate) cases: &'a [PathBuf],
    pub(crate) custom: &'a [PathBuf],
    pub(crate) old_custom: &'a [PathBuf],
    pub(crate) new_custom: &'a [PathBuf],
    /// `--prove`: the solver's proof instead of the sampled cases.
    pub(crate) prove: Option<crate::cmd::policy_prove::ProveArgs<'a>>,
    pub(crate) emit_tests: Option<&'a Path>,
}

pub(crate) fn diff(out: &mut Out, format: Format, args: &DiffArgs<'_>) -> Result<Exit, Failure> {
    let (old, new) = (side(args.old), side(args.new));
    // Both sides hold the set a run would: craik.toml's pinned custom directories (checked
    // against their pins) and what `--custom` adds where it allows (issue 31 item 3; outside
    // testing round 14: `policy diff` compared the embedded set without them).
    let config = crate::cmd::config::project()?;
    let common: Vec<PathBuf> = match &config {
        Some(c) => c.custom_set(args.custom)?,
        None => args.custom.to_vec(),
    };
    if let Some(c) = config
        .as_ref()
        .filter(|c| !c.config.policy.custom.is_empty())
    {
        out.diag(format_args!(
            "craik: policies: both sides hold the pinned set of {}",
            c.path.display()
        ))?;
    }
    let old_dirs = [common.as_slice(), args.old_custom].concat();
    let new_dirs = [common.as_slice(), args.new_custom].concat();
    if let Some(prove) = &args.prove {
        let before = crate::cmd::policy_prove::Loaded::load(old, &old_dirs)
            .map_err(|f| f.with_exit(Exit::Usage))?;
        let after = crate::cmd::policy_prove::Loaded::load(new, &new_dirs)
            .map_err(|f| f.with_exit(Exit::Usage))?;
        return crate::cmd::policy_prove::diff(
            out,
            format,
            (&before, &after),
            prove,
            args.emit_tests,
        );
    }
    let before = load(old, &old_dirs).map_err(|f| f.with_exit(Exit::Usage))?;
    let after = load(new, &new_dirs).map_err(|f| f.with_exit(Exit::Usage))?;
    let cases = policytest::load_cases(&default_cases(args.cases))?;
    #[derive(Serialize)]
    struct Change {
        case: String,
        file: String,
        old: Outcome,
        new: Outcome,
    }
    let mut changes = Vec::new();
    let (mut old_cache, mut new_cache) = (
        policytest::GrantCache::default(),
        policytest::GrantCache::default(),
    );
    let either: Vec<PathBuf> = [args.old_custom, args.new_custom].concat();
    let mut shared = std::collections::BTreeSet::new();
    let mut bundles: std::collections::HashMap<
        Vec<PathBuf>,
        (craik_kernel::Bundle, craik_kernel::Bundle),
    > = std::collections::HashMap::new();
    for case in &cases {
        let (a, b) = if case.custom.is_empty() {
            (
                policytest::run_case(&before.bundle, case, &mut old_cache).actual,
                policytest::run_case(&after.bundle, case, &mut new_cache).actual,
            )
        } else {
            if !bundles.contains_key(&case.custom) {
                let o = diff_dirs(&common, args.old_custom, &either, &case.custom, &mut shared);
                let n = diff_dirs(&common, args.new_custom, &either, &case.custom, &mut shared);
                let old_b = load(old, &o).map_err(|f| f.with_exit(Exit::Usage))?.bundle;
                let new_b = load(new, &n).map_err(|f| f.with_exit(Exit::Usage))?.bundle;
                bundles.insert(case.custom.clone(), (old_b, new_b));
            }
            let (old_b, new_b) = bundles
                .get(&case.custom)
                .ok_or_else(|| Failure::internal("bundle cache"))?;
            (
                policytest::run_case(old_b, case, &mut policytest::GrantCache::default()).actual,
                policytest::run_case(new_b, case, &mut policytest::GrantCache::default()).actual,
            )
        };
        if (&a.decision, &a.deny_kind, &a.determining)
            != (&b.decision, &b.deny_kind, &b.determining)
        {
            changes.push(Change {
                case: case.id(),
                file: case.file.clone(),
                old: a,
                new: b,
            });
        }
    }
    // Never silent: what both sides load from the suites themselves is not compared.
    let mut notes: Vec<String> = shared
        .iter()
        .map(|d| format!("suite custom directory `{d}` is loaded on both sides (not compared); to compare it, pass its versions with --old-custom and --new-custom"))
        .collect();
    if before.bundle.hash() == after.bundle.hash() && either.is_empty() {
        notes.push(format!(
            "both sides are the same policy set ({}): nothing differs between them; name the bundle before the change as OLD (`craik policy export DIR`, or a checkout)",
            before.bundle.hash()
        ));
    }
    #[derive(Serialize)]
    struct Side<'a> {
        origin: &'a str,
        policy_set: &'a str,
    }
    #[derive(Serialize)]
    struct Report<'a> {
        /// `sampled`: the cases were decided on both sides; not a proof (`--prove` is one).
        method: &'static str,
        old: Side<'a>,
        new: Side<'a>,
        cases: usize,
        changed: usize,
        changes: &'a [Change],
        notes: &'a [String],
    }
    match format {
        Format::Json | Format::Junit => out.json(&Report {
            method: "sampled",
            old: Side {
                origin: &before.origin,
                policy_set: before.bundle.hash(),
            },
            new: Side {
                origin: &after.origin,
                policy_set: after.bundle.hash(),
            },
            cases: cases.len(),
            changed: changes.len(),
            changes: &changes,
            notes: &notes,
        })?,
        Format::Human => {
            for c in &changes {
                out.line(format_args!("changed: {} ({})", c.case, c.file))?;
                out.line(format_args!(
                    "  old: {} {:?}",
                    c.old.decision, c.old.determining
                ))?;
                out.line(format_args!(
                    "  new: {} {:?}",
                    c.new.decision, c.new.determining
                ))?;
            }
            for note in &notes {
                out.line(format_args!("note: {note}"))?;
            }
            out.line(format_args!(
                "{} of {} cases changed ({} {} -> {} {}); sampled from the cases, not a proof (`--prove` proves it)",
                changes.len(),
                cases.len(),
                before.origin,
                before.bundle.hash(),
                after.origin,
                after.bundle.hash()
            ))?;
        }
    }
    Ok(if changes.is_empty() {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

pub(crate) fn show_grants(
    out: &mut Out,
    format: Format,
    files: &[PathBuf],
    bundle: &BundleArgs,
) -> Result<Exit, Failure> {
    let loaded = crate::bundle::load_args(out, bundle)?;
    let grants = read_grants(files)?;
    let label = files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut compiled = Vec::new();
    for grant in &grants {
        let g = craik_kernel::compile_grant(&loaded.bundle, grant)
            .map_err(|e| Failure::invalid(format!("{label}: {e}"), Vec::new()))?;
        compiled.push(g);
    }
    match format {
        Format::Human => {
            for g in &compiled {
                out.text(&g.cedar)?;
            }
        }
        Format::Json | Format::Junit => {
            #[derive(Serialize)]
            struct Shown<'a> {
                id: &'a str,
                task_id: &'a str,
                capability: &'a str,
                cedar: &'a str,
            }
            let shown: Vec<Shown<'_>> = compiled
                .iter()
                .map(|g| Shown {
                    id: &g.id,
                    task_id: &g.task_id,
                    capability: &g.capability,
                    cedar: &g.cedar,
                })
                .collect();
            out.json(&shown)?;
        }
    }
    Ok(Exit::Ok)
}
