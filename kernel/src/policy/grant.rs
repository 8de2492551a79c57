//! Compiling `craik.capability_grant`s to reviewable Cedar.
//!
//! Owns: the path-pattern language of grants and its exact translation to Cedar, the argv
//! prefixes of command grants, and the index of grants by task and capability. A pattern that
//! cannot be enforced exactly is refused, never approximated.
//!
//! Patterns (workspace-relative, `/`-separated; `*` matches within one segment, `**` any number
//! of segments):
//!
//! | pattern | meaning | Cedar (grant, case as written) |
//! |---|---|---|
//! | `README.md` | that file | `resource.path == "README.md"` |
//! | `docs/**` | everything under `docs/` | `resource in Craik::Dir::"docs"` |
//! | `**` | every path | `resource in Craik::Dir::"."` |
//! | `docs/*.md` | `.md` files directly in `docs/` | `resource.path like "docs/*.md" && !(resource.path like "docs/*/*")` |
//! | `docs/**/*.md` | `.md` files at any depth under `docs/` | `resource in Craik::Dir::"docs" && resource.name like "*.md"` |
//! | `**/*.md` | `.md` files anywhere | `resource.name like "*.md"` |
//!
//! Exclusions use the same forms on the ASCII-lowercased path (`resource.fold`), so a case
//! variant can never slip past an exclusion on a case-insensitive filesystem. Anything else
//! (`?`, `[...]`, `{a,b}`, `*` in a middle segment, `**` not as a whole segment, `..`, absolute
//! paths, backslashes, trailing `/`) is refused.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;

use cedar_policy::{Policy, PolicyId, PolicySet, ValidationMode};
use craik_contracts::{CapabilityGrant, Truncated, id_problem};
use time::format_description::well_known::Rfc3339;

use crate::path::check_segment;
use crate::policy::bundle::{Bundle, GRANT_ID_PREFIX};
use crate::policy::eval::Prepared;

/// Why a grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grant `{grant}`: {field}: {message}")]
pub struct GrantError {
    /// The grant's id.
    pub grant: String,
    /// JSON path of the offending field (`$.target.paths[1]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// A grant compiled to one Cedar policy.
#[derive(Debug, Clone)]
pub struct CompiledGrant {
    /// The grant's id (`grant_docs_write`); the policy's `@id` is `grant.<id>`.
    pub id: String,
    /// The task it is bound to.
    pub task_id: String,
    /// The capability it grants.
    pub capability: String,
    /// The reviewable Cedar text.
    pub cedar: String,
    /// Exact (wildcard-free) paths it names: the only way a grant reaches a protected path.
    pub exact_paths: Vec<String>,
    pub(crate) policy: Policy,
    /// The policy with its condition built once, for the sliced decision.
    pub(crate) prepared: Prepared,
    pub(crate) grant: CapabilityGrant,
}

/// The grants of one task for one capability: with the bundle's slice for the capability and
/// profile, exactly the policies a decision evaluates.
#[derive(Debug, Clone, Default)]
struct Bucket {
    grants: Vec<CompiledGrant>,
}

/// Grants indexed by task, then capability (looked up by `&str`, without allocating), so a
/// decision sees only the grants that can apply.
#[derive(Debug, Clone, Default)]
pub struct GrantSet {
    by_task: HashMap<String, HashMap<String, Bucket>>,
}

impl GrantSet {
    /// Compiles every grant; refuses the whole set on the first bad grant or duplicate id.
    pub fn compile(bundle: &Bundle, grants: &[CapabilityGrant]) -> Result<Self, GrantError> {
        let mut set = Self::default();
        let mut seen = std::collections::HashSet::new();
        for grant in grants {
            if !seen.insert(grant.id.clone()) {
                return Err(GrantError {
                    grant: grant.id.clone(),
                    field: "$.id".into(),
                    message: "duplicate grant id".into(),
                });
            }
            let compiled = compile(bundle, grant)?;
            let bucket = set
                .by_task
                .entry(compiled.task_id.clone())
                .or_default()
                .entry(compiled.capability.clone())
                .or_default();
            bucket.grants.push(compiled);
        }
        Ok(set)
    }

    fn bucket(&self, task_id: &str, capability: &str) -> Option<&Bucket> {
        self.by_task
            .get(task_id)
            .and_then(|caps| caps.get(capability))
    }

    /// Grants for this task and capability.
    pub fn for_request(&self, task_id: &str, capability: &str) -> &[CompiledGrant] {
        self.bucket(task_id, capability)
            .map(|b| b.grants.as_slice())
            .unwrap_or_default()
    }

    /// Every grant for a task, any capability.
    pub fn for_task<'a>(&'a self, task_id: &str) -> impl Iterator<Item = &'a CompiledGrant> + 'a {
        self.by_task
            .get(task_id)
            .into_iter()
            .flat_map(|caps| caps.values())
            .flat_map(|b| &b.grants)
    }

    /// Every grant.
    pub fn all(&self) -> impl Iterator<Item = &CompiledGrant> {
        self.by_task
            .values()
            .flat_map(|caps| caps.values())
            .flat_map(|b| &b.grants)
    }

    /// Number of grants.
    pub fn len(&self) -> usize {
        self.all().count()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_task.is_empty()
    }
}

/// Compiles one grant and validates the result against the bundle's schema.
pub fn compile(bundle: &Bundle, grant: &CapabilityGrant) -> Result<CompiledGrant, GrantError> {
    let err = |field: &str, message: String| GrantError {
        grant: grant.id.clone(),
        field: field.to_owned(),
        message,
    };
    if let Some(why) = id_problem(&grant.id) {
        return Err(err(
            "$.id",
            format!("invalid id `{}`: {why}", Truncated(&grant.id)),
        ));
    }
    // A task grant's principal is its task. A project grant not yet bound to a task (a run
    // binds it with [`bind_project_grant`]) compiles to a principal no task can be: task ids
    // never hold `*`, so it shows what it would allow and applies to nothing.
    let principal = match (&grant.task_id, &grant.project_id) {
        (Some(task_id), _) => {
            if let Some(why) = id_problem(task_id) {
                return Err(err(
                    "$.task_id",
                    format!("invalid task id `{}`: {why}", Truncated(task_id)),
                ));
            }
            task_id.clone()
        }
        (None, Some(project_id)) => {
            if let Some(why) = id_problem(project_id) {
                return Err(err(
                    "$.project_id",
                    format!("invalid project id `{}`: {why}", Truncated(project_id)),
                ));
            }
            format!("{project_id}:*")
        }
        (None, None) => {
            return Err(err(
                "$.task_id",
                "missing; a grant names its task (`task_id`) or, as a project grant, its project (`project_id`)".into(),
            ));
        }
    };
    if !bundle.knows(&grant.capability) {
        return Err(err(
            "$.capability",
            format!(
                "unknown capability `{}`; the schema declares {}",
                Truncated(&grant.capability),
                list(bundle.capabilities())
            ),
        ));
    }
    if grant.operations.is_empty() {
        return Err(err(
            "$.operations",
            "empty; a grant must name the operations it allows (e.g. `read`, `write`)".into(),
        ));
    }
    for (i, op) in grant.operations.iter().enumerate() {
        if op.is_empty() || !op.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(err(
                &format!("$.operations[{i}]"),
                format!(
                    "invalid operation `{}`: lowercase letters and `_` only",
                    Truncated(op)
                ),
            ));
        }
    }
    let family = bundle
        .families_of(&grant.capability)
        .first()
        .cloned()
        .unwrap_or_default();
    let (resource_type, condition, exclusion, exact_paths) = match family.as_str() {
        "repo" => path_conditions(grant)?,
        "shell" => command_conditions(grant)?,
        _ => {
            if !grant.target.paths.is_empty() || !grant.target.exclude.is_empty() {
                return Err(err(
                    "$.target.paths",
                    format!(
                        "`{}` grants take no paths; paths apply to repo.* and shell.* capabilities",
                        grant.capability
                    ),
                ));
            }
            (resource_type_for(&family), None, None, Vec::new())
        }
    };

    let mut cedar = String::new();
    if let Some(project_id) = &grant.project_id {
        let _ = writeln!(
            cedar,
            "// project grant for {project_id}: {}",
            if grant.task_id.is_some() {
                "bound to this run's task"
            } else {
                "each run binds it to its own task of that project"
            }
        );
    }
    let _ = writeln!(cedar, "@id(\"{GRANT_ID_PREFIX}{}\")", grant.id);
    let _ = writeln!(
        cedar,
        "@reason(\"{}\")",
        escape(&format!(
            "{} (granted by {})",
            grant.reason, grant.approved_by
        ))
    );
    let _ = writeln!(cedar, "permit (");
    let _ = writeln!(cedar, "  principal in Craik::Task::\"{principal}\",");
    let _ = writeln!(
        cedar,
        "  action == Craik::Action::\"{}\",",
        grant.capability
    );
    let _ = writeln!(cedar, "  resource is Craik::{resource_type}");
    let _ = writeln!(cedar, ")");
    let ops: Vec<String> = grant
        .operations
        .iter()
        .map(|o| format!("\"{o}\""))
        .collect();
    let _ = writeln!(
        cedar,
        "when {{ [{}].contains(context.operation) }}",
        ops.join(", ")
    );
    if let Some(expires) = grant.expires_at {
        let at = expires.get();
        let text = at.format(&Rfc3339).unwrap_or_default();
        let _ = writeln!(
            cedar,
            "when {{ context.now < datetime(\"{}\") }} // expires {text}",
            crate::policy::decide::cedar_datetime(at)
        );
    }
    if let Some(condition) = condition {
        let _ = writeln!(cedar, "when {{ {condition} }}");
    }
    if let Some(exclusion) = exclusion {
        let _ = writeln!(cedar, "unless {{ {exclusion} }}");
    }
    cedar.push_str(";\n");

    let policy = Policy::from_str(&cedar)
        .map_err(|e| {
            err(
                "$",
                format!(
                    "compiled Cedar does not parse: {}",
                    craik_contracts::one_line(&e.to_string())
                ),
            )
        })?
        .new_id(PolicyId::new(format!("{GRANT_ID_PREFIX}{}", grant.id)));
    let mut set = PolicySet::new();
    set.add(policy.clone())
        .map_err(|e| err("$", e.to_string()))?;
    let result = bundle.validator.validate(&set, ValidationMode::Strict);
    if let Some(e) = result.validation_errors().next() {
        return Err(err(
            "$",
            format!(
                "compiled Cedar fails validation: {}",
                craik_contracts::one_line(&e.to_string())
            ),
        ));
    }
    Ok(CompiledGrant {
        id: grant.id.clone(),
        task_id: principal,
        capability: grant.capability.clone(),
        cedar,
        exact_paths,
        prepared: Prepared::for_known_action(&policy),
        policy,
        grant: grant.clone(),
    })
}

/// A project grant bound to the task `task_id` of project `project_id`, as a run compiles it;
/// a task grant unchanged. `Err` says why it does not apply: a project grant of another
/// project, or a task grant of another task.
pub fn bind_project_grant(
    grant: &CapabilityGrant,
    task_id: &str,
    project_id: &str,
) -> Result<CapabilityGrant, String> {
    match (&grant.task_id, &grant.project_id) {
        (Some(t), _) if t == task_id => Ok(grant.clone()),
        (Some(t), _) => Err(format!(
            "grant `{}`: its task_id `{}` is not the task's `{task_id}`",
            Truncated(&grant.id),
            Truncated(t)
        )),
        (None, Some(p)) if p == project_id => {
            let mut bound = grant.clone();
            bound.task_id = Some(task_id.to_owned());
            Ok(bound)
        }
        (None, Some(p)) => Err(format!(
            "grant `{}`: a project grant for `{}`, but the task `{task_id}` belongs to `{project_id}`",
            Truncated(&grant.id),
            Truncated(p)
        )),
        (None, None) => Err(format!(
            "grant `{}`: names neither a task_id nor a project_id",
            Truncated(&grant.id)
        )),
    }
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn resource_type_for(family: &str) -> &'static str {
    match family {
        "repo" => "Path",
        "shell" => "Command",
        "memory" => "Memory",
        "net" => "Url",
        _ => "Repo",
    }
}

/// Cedar string-literal escaping.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A parsed grant path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPattern {
    /// A literal path.
    Exact(String),
    /// Everything under a directory (`dir/**`); `""` is the workspace root (`**`).
    Subtree(String),
    /// Names matching a one-segment pattern directly in a directory (`dir/*.md`).
    Children { dir: String, name: String },
    /// Names matching a one-segment pattern at any depth under a directory (`dir/**/*.md`).
    Deep { dir: String, name: String },
}

impl PathPattern {
    /// Parses a grant pattern, refusing anything that cannot be enforced exactly.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("empty pattern".into());
        }
        if let Some(c) = pattern
            .chars()
            .find(|c| matches!(c, '?' | '[' | ']' | '{' | '}' | '!' | '"' | '\\'))
        {
            return Err(format!(
                "`{c}` is not supported; use literal names, `*` within a segment and `**` as a whole segment"
            ));
        }
        if let Some(c) = pattern.chars().find(|c| c.is_control()) {
            return Err(format!(
                "control character U+{:04X} in pattern",
                u32::from(c)
            ));
        }
        if pattern.starts_with('/') {
            return Err(
                "absolute patterns are refused; write paths relative to the workspace root".into(),
            );
        }
        if pattern.ends_with('/') {
            return Err(format!(
                "trailing `/` is ambiguous; write `{}**` for everything under it",
                pattern
            ));
        }
        let segments: Vec<&str> = pattern.split('/').collect();
        for segment in &segments {
            match *segment {
                "" => return Err("empty segment (`//`)".into()),
                "." | ".." => {
                    return Err(format!(
                        "`{segment}` segments are refused; write the normalised path"
                    ));
                }
                "**" => {}
                s if s.contains("**") => {
                    return Err(format!("`**` must be a whole segment, found `{s}`"));
                }
                s => check_segment(s).map_err(|e| e.to_string())?,
            }
        }
        let (last, parents) = segments.split_last().ok_or("empty pattern")?;
        let dir_of = |parts: &[&str]| parts.join("/");
        let wild = |s: &str| s.contains('*');
        if parents.iter().any(|s| wild(s)) {
            // Only `dir/**/name` may have a wildcard before the last segment.
            let (second, rest) = parents.split_last().ok_or("empty pattern")?;
            if *second == "**" && !rest.iter().any(|s| wild(s)) && *last != "**" {
                return Ok(Self::Deep {
                    dir: dir_of(rest),
                    name: (*last).to_owned(),
                });
            }
            return Err(
                "wildcards are supported only in the last segment, or as `dir/**/name`".into(),
            );
        }
        Ok(match *last {
            "**" => Self::Subtree(dir_of(parents)),
            l if wild(l) => Self::Children {
                dir: dir_of(parents),
                name: l.to_owned(),
            },
            _ => Self::Exact(pattern.to_owned()),
        })
    }

    /// The Cedar condition: on `path`/`name` with the case as written (grants), or on
    /// `fold`/`fold_name` lowercased (exclusions).
    fn cedar(&self, folded: bool) -> String {
        let (path, name) = if folded {
            ("resource.fold", "resource.fold_name")
        } else {
            ("resource.path", "resource.name")
        };
        let case = |s: &str| {
            if folded {
                s.to_ascii_lowercase()
            } else {
                s.to_owned()
            }
        };
        let name_test = |n: &str| {
            if n.contains('*') {
                format!("{name} like \"{}\"", escape(&case(n)))
            } else {
                format!("{name} == \"{}\"", escape(&case(n)))
            }
        };
        match self {
            Self::Exact(p) => format!("{path} == \"{}\"", escape(&case(p))),
            Self::Subtree(d) if d.is_empty() => {
                if folded {
                    "true".into()
                } else {
                    "resource in Craik::Dir::\".\"".into()
                }
            }
            Self::Subtree(d) => {
                if folded {
                    format!("{path} like \"{}/*\"", escape(&case(d)))
                } else {
                    format!("resource in Craik::Dir::\"{}\"", escape(d))
                }
            }
            Self::Children { dir, name: n } if dir.is_empty() => {
                format!(
                    "({path} like \"{}\" && !({path} like \"*/*\"))",
                    escape(&case(n))
                )
            }
            Self::Children { dir, name: n } => format!(
                "({path} like \"{d}/{n}\" && !({path} like \"{d}/*/*\"))",
                d = escape(&case(dir)),
                n = escape(&case(n))
            ),
            Self::Deep { dir, name: n } if dir.is_empty() => name_test(n),
            Self::Deep { dir, name: n } => {
                let under = if folded {
                    format!("{path} like \"{}/*\"", escape(&case(dir)))
                } else {
                    format!("resource in Craik::Dir::\"{}\"", escape(dir))
                };
                format!("({under} && {})", name_test(n))
            }
        }
    }
}

type Conditions = (&'static str, Option<String>, Option<String>, Vec<String>);

/// Compiles every entry of `$.target.<field>` to a Cedar condition with `compile`, naming the
/// entry and its value when `compile` refuses it; the conditions are joined with `||`.
fn entries(
    grant: &CapabilityGrant,
    field: &str,
    mut compile: impl FnMut(&str) -> Result<String, String>,
) -> Result<Option<String>, GrantError> {
    let items = if field == "paths" {
        &grant.target.paths
    } else {
        &grant.target.exclude
    };
    let mut conditions = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        conditions.push(compile(item).map_err(|message| GrantError {
            grant: grant.id.clone(),
            field: format!("$.target.{field}[{i}]"),
            message,
        })?);
    }
    Ok((!conditions.is_empty()).then(|| conditions.join(" || ")))
}

fn no_paths(grant: &CapabilityGrant, what: &str) -> GrantError {
    GrantError {
        grant: grant.id.clone(),
        field: "$.target.paths".into(),
        message: format!("empty; {what}"),
    }
}

fn path_conditions(grant: &CapabilityGrant) -> Result<Conditions, GrantError> {
    if grant.target.paths.is_empty() {
        return Err(no_paths(
            grant,
            "a repo grant must name the paths it covers (`**` for all)",
        ));
    }
    let mut exact = Vec::new();
    let allow = entries(grant, "paths", |p| {
        let pattern = PathPattern::parse(p)
            .map_err(|m| format!("pattern `{}` refused: {m}", Truncated(p)))?;
        if let PathPattern::Exact(e) = &pattern {
            exact.push(e.clone());
        }
        Ok(pattern.cedar(false))
    })?;
    let deny = entries(grant, "exclude", |p| {
        let pattern = PathPattern::parse(p)
            .map_err(|m| format!("pattern `{}` refused: {m}", Truncated(p)))?;
        Ok(pattern.cedar(true))
    })?;
    Ok(("Path", allow, deny, exact))
}

/// Characters that make a command line need a shell.
pub(crate) const SHELL_META: &[char] = &[
    ';', '&', '|', '$', '`', '<', '>', '(', ')', '\n', '\r', '\\', '"', '\'', '*', '?', '[', ']',
    '{', '}', '~', '#', '!',
];

/// An argv prefix (`cargo test`), matched word-wise: the line equals it or continues with a space.
fn argv_prefix(p: &str) -> Result<String, String> {
    if p.trim() != p || p.split(' ').any(str::is_empty) {
        return Err(format!(
            "argv prefix `{}` must be words separated by single spaces",
            Truncated(p)
        ));
    }
    if let Some(c) = p.chars().find(|c| SHELL_META.contains(c) || c.is_control()) {
        return Err(format!(
            "argv prefix `{}` contains shell syntax `{}`",
            Truncated(p),
            c.escape_default()
        ));
    }
    let e = escape(p);
    Ok(format!(
        "resource.line == \"{e}\" || resource.line like \"{e} *\""
    ))
}

fn command_conditions(grant: &CapabilityGrant) -> Result<Conditions, GrantError> {
    if grant.target.paths.is_empty() {
        return Err(no_paths(
            grant,
            "a shell grant must name argv prefixes such as `cargo test`",
        ));
    }
    let allow = entries(grant, "paths", argv_prefix)?;
    let deny = entries(grant, "exclude", argv_prefix)?;
    Ok(("Command", allow, deny, Vec::new()))
}

#[cfg(test)]
mod tests;
