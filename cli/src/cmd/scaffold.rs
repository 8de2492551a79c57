//! `craik task new` and `craik grants new`: the operator's task directory and grant files from
//! flags (asking on a terminal for what is missing and required), each file decoded and
//! checked exactly as `craik run` reads it before anything is written; nothing is
//! overwritten without `--force`; every write is atomic.

use std::path::{Path, PathBuf};

use craik_contracts::{
    CapabilityGrant, IntentLock, PolicyEnvelope, PolicyProfile, TaskRequest, Timestamp,
};
use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};
use crate::prompt::Prompter;

/// Where `craik task new` writes by default: `.craik-tasks/<task id>/`.
pub(crate) const TASKS_DIR: &str = ".craik-tasks";
/// Where `craik grants new --project` writes when craik.toml names no grants directory.
pub(crate) const PROJECT_GRANTS_DIR: &str = ".craik-grants";
/// The task directory file `craik run DIR` reads run settings from.
pub(crate) const RUN_SETTINGS: &str = "run.json";

/// What `craik task new` was given.
#[derive(Debug, Default)]
pub(crate) struct TaskNewArgs<'a> {
    pub(crate) id: Option<&'a str>,
    pub(crate) title: Option<&'a str>,
    pub(crate) goal: Option<&'a str>,
    pub(crate) project: Option<&'a str>,
    pub(crate) mode: Option<&'a str>,
    pub(crate) requested_by: Option<&'a str>,
    pub(crate) constraints: &'a [String],
    pub(crate) allowed_paths: &'a [String],
    pub(crate) forbid_paths: &'a [String],
    pub(crate) stops: &'a [String],
    pub(crate) profile: Option<PolicyProfile>,
    pub(crate) allow: &'a [String],
    pub(crate) deny: &'a [String],
    pub(crate) approve: &'a [String],
    pub(crate) verify: &'a [String],
    pub(crate) verify_writes: &'a [String],
    pub(crate) max_iterations: Option<u32>,
    pub(crate) out: Option<&'a Path>,
    pub(crate) force: bool,
}

#[derive(Serialize)]
struct Written {
    dir: String,
    files: Vec<String>,
    next: Vec<String>,
}

/// `task_` + the title's words, lowercased, joined by `_` (letters and digits only).
fn slug(prefix: &str, text: &str) -> String {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(6)
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        format!("{prefix}new")
    } else {
        format!("{prefix}{}", words.join("_"))
    }
}

/// The operator as `user:NAME` from craik.toml, if it names one.
fn config_operator() -> Result<Option<String>, Failure> {
    Ok(crate::cmd::config::project()?
        .and_then(|c| c.config.operator.as_deref())
        .map(|o| {
            if o.starts_with("user:") {
                o.to_owned()
            } else {
                format!("user:{o}")
            }
        }))
}

fn config_project_id() -> Result<Option<String>, Failure> {
    Ok(crate::cmd::config::project()?.and_then(|c| c.config.project.id.clone()))
}

/// An intent-lock scope entry: a workspace-relative path (`docs`, `docs/adr/`, `Makefile`),
/// no glob, no whitespace, nothing that escapes the workspace.
fn scope_path(flag: &str, entry: &str) -> Result<String, Failure> {
    let bad = |why: &str| {
        Failure::usage(format!(
            "{flag} `{}`: {why}",
            craik_contracts::one_line(entry)
        ))
    };
    if entry.chars().any(char::is_whitespace) {
        return Err(bad("a workspace-relative path without spaces"));
    }
    match craik_kernel::intent_entry_problem(entry) {
        Some(why) => Err(bad(why)),
        None => Ok(entry.to_owned()),
    }
}

/// A capability entry of an envelope list (`repo.write.docs` or a family `shell`).
fn envelope_entry(flag: &str, entry: &str) -> Result<String, Failure> {
    match craik_kernel::envelope_entry_problem(entry) {
        Some(problem) => Err(Failure::usage(format!("{flag}: {problem}"))),
        None => Ok(entry.to_owned()),
    }
}

/// Now, to the second (what the files say is read by people).
fn now_seconds() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0).unwrap_or(now)
}

/// Pretty JSON with a final newline.
fn pretty(value: &Value) -> Result<Vec<u8>, Failure> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| Failure::internal(format!("cannot encode: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes each `(path, bytes)` atomically, none if any exists and `force` is off.
fn write_all(files: &[(PathBuf, Vec<u8>)], force: bool) -> Result<(), Failure> {
    if !force && let Some((path, _)) = files.iter().find(|(p, _)| p.exists()) {
        return Err(Failure::usage(format!(
            "`{}` exists; pass --force to replace it",
            path.display()
        )));
    }
    for (path, bytes) in files {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Failure::usage(format!("{}: {e}", dir.display())))?;
        }
        craik_host::fsio::write_atomic(path, bytes)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// `craik task new`.
pub(crate) fn task_new(
    out: &mut Out,
    format: Format,
    args: &TaskNewArgs<'_>,
) -> Result<Exit, Failure> {
    let ask = Prompter::for_terminal(format);
    let title = ask.given_or_ask(args.title, None, "--title", "Title (one line)")?;
    let goal = ask.given_or_ask(args.goal, None, "--goal", "Goal (what done looks like)")?;
    let project = ask.given_or_ask(
        args.project,
        config_project_id()?,
        "--project",
        "Project id (project_…; set project.id in craik.toml to skip this)",
    )?;
    let requested_by = ask.given_or_ask(
        args.requested_by,
        config_operator()?,
        "--requested-by",
        "Requested by (user:NAME; set operator in craik.toml to skip this)",
    )?;
    if craik_contracts::id_problem(&project).is_some()
        || !project.starts_with("project_")
        || project.len() == "project_".len()
    {
        return Err(Failure::usage(format!(
            "--project `{}`: expected an id starting with `project_` (ASCII letters, digits, `_ - . :`)",
            craik_contracts::one_line(&project)
        )));
    }
    let mode = args.mode.unwrap_or("implement");
    let id = args.id.map_or_else(|| slug("task_", &title), str::to_owned);
    let profile = match args.profile {
        Some(p) => p,
        None => match crate::cmd::config::project()?.and_then(|c| c.config.run.profile.clone()) {
            Some(name) => serde_json::from_value(json!(name))
                .map_err(|e| Failure::usage(format!("craik.toml: run.profile: {e}")))?,
            None => PolicyProfile::Strict,
        },
    };
    let in_scope = args
        .allowed_paths
        .iter()
        .map(|p| scope_path("--allowed-path", p))
        .collect::<Result<Vec<_>, _>>()?;
    let out_of_scope = args
        .forbid_paths
        .iter()
        .map(|p| scope_path("--forbid-path", p))
        .collect::<Result<Vec<_>, _>>()?;
    let list = |flag: &str, items: &[String]| {
        items
            .iter()
            .map(|e| envelope_entry(flag, e))
            .collect::<Result<Vec<_>, _>>()
    };
    let allowed = list("--allow", args.allow)?;
    let denied = list("--deny", args.deny)?;
    let approval = list("--approve", args.approve)?;
    if args.max_iterations == Some(0) {
        return Err(Failure::usage("--max-iterations: must be at least 1"));
    }
    let mut verification = Vec::new();
    if !args.verify.is_empty() {
        verification.push("shell.test".to_owned());
    }
    let now = Timestamp::new(now_seconds());
    let suffix = id.strip_prefix("task_").unwrap_or(&id).to_owned();
    let task = json!({
        "schema": "craik.task_request",
        "version": "0.1.0",
        "id": id,
        "title": title,
        "objective": goal,
        "project_id": project,
        "requested_by": requested_by,
        "priority": "normal",
        "mode": mode,
        "constraints": args.constraints,
        "expected_outputs": ["handoff"],
        "created_at": now,
    });
    let intent = json!({
        "schema": "craik.intent_lock",
        "version": "0.1.0",
        "id": format!("intent_{suffix}"),
        "task_id": id,
        "original_request": goal,
        "objective": goal,
        "accepted_interpretation": goal,
        "in_scope": in_scope,
        "out_of_scope": out_of_scope,
        "allowed_autonomy": [],
        "stop_conditions": args.stops,
        "scope_change_rules": [],
        "created_at": now,
    });
    let envelope = json!({
        "schema": "craik.policy_envelope",
        "version": "0.1.0",
        "id": format!("policy_{suffix}"),
        "task_id": id,
        "actor": "runner:any",
        "profile": profile,
        "fail_open": false,
        "allowed_capabilities": allowed,
        "denied_capabilities": denied,
        "approval_required": approval,
        "verification_required": verification,
        "handoff_required": true,
        "receipt_required": true,
        "redaction_required": true,
    });
    let dir = args
        .out
        .map_or_else(|| Path::new(TASKS_DIR).join(&id), Path::to_owned);
    let mut files = vec![
        (dir.join("task_request.json"), pretty(&task)?),
        (dir.join("intent_lock.json"), pretty(&intent)?),
        (dir.join("policy_envelope.json"), pretty(&envelope)?),
    ];
    // Validated as written: the bytes decoded here, exactly as `craik run` decodes them, are
    // the bytes written.
    let Some((task_path, task_bytes)) = files.first() else {
        return Err(Failure::internal("no task file"));
    };
    let decoded_task: TaskRequest = crate::cmd::runs::decode_one(task_path, task_bytes)?;
    let Some((intent_path, intent_bytes)) = files.get(1) else {
        return Err(Failure::internal("no intent file"));
    };
    let decoded_intent: IntentLock = crate::cmd::runs::decode_one(intent_path, intent_bytes)?;
    let Some((envelope_path, envelope_bytes)) = files.get(2) else {
        return Err(Failure::internal("no envelope file"));
    };
    let decoded_envelope: PolicyEnvelope =
        crate::cmd::runs::decode_one(envelope_path, envelope_bytes)?;
    let mut grants = Vec::new();
    for (i, command) in args.verify.iter().enumerate() {
        // Issue 30 item 8: a test grant with no write scope ran read-only, so `cargo test`
        // failed under strict once approved. The operator's scope, else the tool's own.
        let writes: Vec<String> = if args.verify_writes.is_empty() {
            default_verify_writes(command)
        } else {
            args.verify_writes.to_vec()
        };
        let mut target = serde_json::Map::new();
        target.insert("repo".into(), Value::Null);
        target.insert("paths".into(), json!([command]));
        target.insert("exclude".into(), json!([]));
        if !writes.is_empty() {
            target.insert("writes".into(), json!(writes));
        }
        target.insert("metadata".into(), json!({}));
        let grant = json!({
            "schema": "craik.capability_grant",
            "version": "0.1.0",
            "id": format!("grant_{suffix}_verify{}", if i == 0 { String::new() } else { format!("_{}", i + 1) }),
            "task_id": id,
            "capability": "shell.test",
            "target": target,
            "operations": ["execute"],
            "expires_at": Timestamp::new(now.get() + time::Duration::days(30)),
            "reason": format!("verification command of {id}"),
            "approved_by": decoded_task.requested_by,
        });
        let path = dir.join("grants").join(format!(
            "{}.json",
            grant.get("id").and_then(Value::as_str).unwrap_or("grant")
        ));
        let bytes = pretty(&grant)?;
        grants.extend(craik_host::policies::decode_grants(
            &path.display().to_string(),
            &bytes,
        )?);
        files.push((path, bytes));
    }
    craik_host::run::check_task_bindings(
        &decoded_task,
        Some(&decoded_intent),
        Some(&decoded_envelope),
        &grants,
    )?;
    check_grants_compile(&grants, None)?;
    if let Some(n) = args.max_iterations {
        files.push((
            dir.join(RUN_SETTINGS),
            pretty(&json!({"max_iterations": n}))?,
        ));
    }
    write_all(&files, args.force)?;
    let written = Written {
        dir: dir.display().to_string(),
        files: files.iter().map(|(p, _)| p.display().to_string()).collect(),
        next: vec![
            format!(
                "craik grants new --task {} --capability CAP --path GLOB --op OP --expires 8h --reason TEXT",
                dir.display()
            ),
            format!("craik run {}", dir.display()),
        ],
    };
    match format {
        Format::Json | Format::Junit => out.json(&written)?,
        Format::Human => {
            for f in &written.files {
                out.line(format_args!("wrote {f}"))?;
            }
            out.line(format_args!(
                "task {} ({}) under {}",
                decoded_task.id,
                decoded_task.mode.as_str(),
                decoded_envelope.profile.as_str()
            ))?;
            for n in &written.next {
                out.line(format_args!("next: {n}"))?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// Compiles grants against the bundle `craik run` would load (the embedded one with
/// craik.toml's pinned custom directories), as a run does: an unknown capability or a glob the
/// kernel cannot enforce exactly is refused, naming the grant and field.
fn check_grants_compile(
    grants: &[CapabilityGrant],
    bundle: Option<&crate::cli::BundleArgs>,
) -> Result<craik_host::policies::Loaded, Failure> {
    let custom = match bundle {
        Some(b) if !b.custom.is_empty() => b.custom.clone(),
        _ => match crate::cmd::config::project()? {
            Some(c) => c.custom_dirs()?,
            None => Vec::new(),
        },
    };
    let loaded = crate::bundle::load(bundle.and_then(|b| b.policies.as_deref()), &custom)?;
    for grant in grants {
        craik_kernel::compile_grant(&loaded.bundle, grant)
            .map_err(|e| Failure::invalid(e.to_string(), Vec::new()))?;
    }
    craik_host::run::check_grant_scopes(grants)?;
    Ok(loaded)
}

/// What `craik grants new` was given.
#[derive(Debug)]
pub(crate) struct GrantNewArgs<'a> {
    pub(crate) task: Option<&'a Path>,
    /// `Some(None)`: `--project` without a value (craik.toml's `project.id`).
    pub(crate) project: Option<Option<&'a str>>,
    pub(crate) id: Option<&'a str>,
    pub(crate) capability: Option<&'a str>,
    pub(crate) paths: &'a [String],
    pub(crate) exclude: &'a [String],
    pub(crate) writes: &'a [String],
    pub(crate) operations: &'a [String],
    pub(crate) expires: Option<&'a str>,
    pub(crate) reason: Option<&'a str>,
    pub(crate) by: Option<&'a str>,
    pub(crate) out: Option<&'a Path>,
    pub(crate) force: bool,
    pub(crate) bundle: &'a crate::cli::BundleArgs,
}

/// An expiry: RFC 3339 (`2026-12-01T18:00:00Z`) or a duration from now (`90m`, `8h`, `7d`,
/// `2w`), strictly in the future and at most a year away.
pub(crate) fn parse_expiry(text: &str, now: OffsetDateTime) -> Result<Timestamp, Failure> {
    let bad = |why: &str| {
        Failure::usage(format!(
            "--expires `{}`: {why}",
            craik_contracts::one_line(text)
        ))
    };
    let at = if let Ok(t) = Timestamp::parse(text) {
        t.get()
    } else {
        let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| {
            bad("expected RFC 3339 (2026-12-01T18:00:00Z) or a duration such as 8h or 7d")
        })?;
        let (number, unit) = text.split_at(split);
        let n: i64 = number.parse().map_err(|_| {
            bad("expected RFC 3339 (2026-12-01T18:00:00Z) or a duration such as 8h or 7d")
        })?;
        let secs_per = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(bad("a duration's unit is one of s, m, h, d, w")),
        };
        now + time::Duration::seconds(n.saturating_mul(secs_per))
    };
    if at <= now {
        return Err(bad("in the past; a grant's expiry must be in the future"));
    }
    if at > now + time::Duration::days(366) {
        return Err(bad("more than a year away; grant for less and renew"));
    }
    Ok(Timestamp::new(at))
}

/// The task a `--task` path names: a task directory (its `task_request.json`) or a task file;
/// returns the task and the directory its grants go in.
fn task_of(path: &Path) -> Result<(TaskRequest, PathBuf), Failure> {
    let (file, dir) = if path.is_dir() {
        (path.join("task_request.json"), path.join("grants"))
    } else {
        (
            path.to_owned(),
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .join("grants"),
        )
    };
    let bytes = std::fs::read(&file)
        .map_err(|e| Failure::usage(format!("--task `{}`: {e}", file.display())))?;
    Ok((crate::cmd::runs::decode_one(&file, &bytes)?, dir))
}

/// The first directory craik.toml's `project.grants` names (else `.craik-grants` beside it,
/// else in the current directory).
fn project_grants_dir() -> Result<PathBuf, Failure> {
    let Some(config) = crate::cmd::config::project()? else {
        return Ok(PathBuf::from(PROJECT_GRANTS_DIR));
    };
    Ok(config
        .config
        .project
        .grants
        .iter()
        .find(|p| p.extension().is_none_or(|e| e != "json"))
        .map_or_else(
            || config.dir.join(PROJECT_GRANTS_DIR),
            |p| config.resolve(p),
        ))
}

/// `craik grants new`.
pub(crate) fn grants_new(
    out: &mut Out,
    format: Format,
    args: &GrantNewArgs<'_>,
) -> Result<Exit, Failure> {
    let ask = Prompter::for_terminal(format);
    let now = now_seconds();
    // Whose grant: one task's, or the project's.
    let (task_id, project_id, dir) = match (args.task, args.project) {
        (Some(_), Some(_)) => {
            return Err(Failure::usage(
                "--task and --project: a grant is for one task or for a whole project, not both",
            ));
        }
        (Some(path), None) => {
            let (task, dir) = task_of(path)?;
            (Some(task.id), None, dir)
        }
        (None, Some(project)) => {
            let project = match (project, config_project_id()?) {
                (Some(p), _) => p.to_owned(),
                (None, Some(p)) => p,
                (None, None) => ask.ask(
                    "--project",
                    "Project id (project_…; set project.id in craik.toml to skip this)",
                    None,
                )?,
            };
            (None, Some(project), project_grants_dir()?)
        }
        (None, None) => {
            return Err(Failure::usage(
                "--task DIR (a task directory from `craik task new`) or --project [ID] is required",
            ));
        }
    };
    let capability = match args.capability {
        Some(c) => c.to_owned(),
        None => ask.ask(
            "--capability",
            "Capability (e.g. repo.write.docs, shell.test)",
            None,
        )?,
    };
    let shell = capability.starts_with("shell.");
    let mut paths = args.paths.to_vec();
    if paths.is_empty() && (shell || capability.starts_with("repo.")) {
        let (flag, question) = if shell {
            (
                "--path",
                "Command prefix it may run (argv words, e.g. `cargo test`)",
            )
        } else {
            ("--path", "Path glob it covers (e.g. docs/**)")
        };
        paths.push(ask.ask(flag, question, None)?);
    }
    let mut operations = args.operations.to_vec();
    if operations.is_empty() {
        let known = craik_kernel::operations_of(&capability)
            .map(|ops| ops.join(","))
            .unwrap_or_default();
        let answer = ask.ask(
            "--op",
            "Operations, comma-separated",
            (!known.is_empty()).then_some(known.as_str()),
        )?;
        operations = answer
            .split(',')
            .map(|o| o.trim().to_owned())
            .filter(|o| !o.is_empty())
            .collect();
    }
    if let Some(known) = craik_kernel::operations_of(&capability)
        && let Some(op) = operations.iter().find(|o| !known.contains(&o.as_str()))
    {
        return Err(Failure::usage(format!(
            "--op `{}`: `{capability}` admits {}",
            craik_contracts::one_line(op),
            known.join(", ")
        )));
    }
    let expires = match args.expires {
        Some(e) => e.to_owned(),
        None => ask.ask(
            "--expires",
            "Expires (RFC 3339, or a duration: 8h, 7d)",
            Some("8h"),
        )?,
    };
    let expires_at = parse_expiry(&expires, now)?;
    let reason = match args.reason {
        Some(r) => r.to_owned(),
        None => ask.ask("--reason", "Reason (why this is granted)", None)?,
    };
    if reason.trim().is_empty() {
        return Err(Failure::usage("--reason: must not be empty"));
    }
    let by = match (args.by, config_operator()?) {
        (Some(b), _) => b.to_owned(),
        (None, Some(b)) => b,
        (None, None) => ask.ask(
            "--by",
            "Approved by (user:NAME; set operator in craik.toml to skip this)",
            None,
        )?,
    };
    craik_host::run::approvals::reviewer(&by, "runner_none")?;
    let owner = task_id
        .as_deref()
        .and_then(|t| t.strip_prefix("task_"))
        .or_else(|| {
            project_id
                .as_deref()
                .and_then(|p| p.strip_prefix("project_"))
        })
        .unwrap_or("x")
        .to_owned();
    let explicit_id = args.id.is_some();
    let base_id = args.id.map_or_else(
        || format!("grant_{owner}_{}", capability.replace('.', "_")),
        str::to_owned,
    );
    // A generated id never replaces a file: the next free `_2`, `_3`, ...
    let mut id = base_id.clone();
    if !explicit_id && args.out.is_none() {
        let mut n = 2;
        while dir.join(format!("{id}.json")).exists() {
            id = format!("{base_id}_{n}");
            n += 1;
        }
    }
    let mut grant = serde_json::Map::new();
    grant.insert("schema".into(), json!("craik.capability_grant"));
    grant.insert("version".into(), json!("0.1.0"));
    grant.insert("id".into(), json!(id));
    if let Some(t) = &task_id {
        grant.insert("task_id".into(), json!(t));
    }
    if let Some(p) = &project_id {
        grant.insert("project_id".into(), json!(p));
    }
    grant.insert("capability".into(), json!(capability));
    let mut target = serde_json::Map::new();
    target.insert("repo".into(), Value::Null);
    target.insert("paths".into(), json!(paths));
    target.insert("exclude".into(), json!(args.exclude));
    if !args.writes.is_empty() {
        target.insert("writes".into(), json!(args.writes));
    }
    target.insert("metadata".into(), json!({}));
    grant.insert("target".into(), Value::Object(target));
    grant.insert("operations".into(), json!(operations));
    grant.insert("expires_at".into(), json!(expires_at));
    grant.insert("reason".into(), json!(reason));
    grant.insert("approved_by".into(), json!(by));
    let path = args
        .out
        .map_or_else(|| dir.join(format!("{id}.json")), Path::to_owned);
    let bytes = pretty(&Value::Object(grant))?;
    // Validated as written: decoded as `craik run` decodes grant files, then compiled against
    // the bundle a run loads.
    let grants = craik_host::policies::decode_grants(&path.display().to_string(), &bytes)?;
    let loaded = check_grants_compile(&grants, Some(args.bundle))?;
    let compiled = grants
        .first()
        .map(|g| craik_kernel::compile_grant(&loaded.bundle, g))
        .transpose()
        .map_err(|e| Failure::invalid(e.to_string(), Vec::new()))?;
    let profile = match (args.task, crate::cmd::config::project()?) {
        (Some(task), _) if task.join("policy_envelope.json").is_file() => {
            let file = task.join("policy_envelope.json");
            let bytes = std::fs::read(&file)
                .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
            let envelope: PolicyEnvelope = crate::cmd::runs::decode_one(&file, &bytes)?;
            envelope.profile
        }
        (_, Some(c)) => match c.config.run.profile.as_deref() {
            Some(name) => serde_json::from_value(json!(name))
                .map_err(|e| Failure::usage(format!("craik.toml: run.profile: {e}")))?,
            None => PolicyProfile::Strict,
        },
        (_, None) => PolicyProfile::Strict,
    };
    let notes = match grants.first() {
        Some(g) => profile_notes(&loaded.bundle, g, profile, now)?,
        None => Vec::new(),
    };
    write_all(&[(path.clone(), bytes)], args.force)?;
    #[derive(Serialize)]
    struct GrantWritten<'a> {
        file: String,
        grant: Option<&'a CapabilityGrant>,
        cedar: Option<&'a str>,
        profile: PolicyProfile,
        notes: &'a [String],
    }
    let shown = GrantWritten {
        file: path.display().to_string(),
        grant: grants.first(),
        cedar: compiled.as_ref().map(|c| c.cedar.as_str()),
        profile,
        notes: &notes,
    };
    match format {
        Format::Json | Format::Junit => out.json(&shown)?,
        Format::Human => {
            out.line(format_args!("wrote {}", shown.file))?;
            out.line(format_args!(
                "{} {} for {}, expires {}; it compiles to:",
                id,
                capability,
                task_id.as_deref().map_or_else(
                    || format!("every task of {}", project_id.as_deref().unwrap_or("")),
                    |t| format!("task {t}")
                ),
                expires_at
            ))?;
            if let Some(cedar) = shown.cedar {
                for line in cedar.lines() {
                    out.line(format_args!("  {line}"))?;
                }
            }
            for note in &notes {
                out.line(format_args!("note: {note}"))?;
            }
            if project_id.is_some() {
                let listed = crate::cmd::config::project()?.is_some_and(|c| {
                    c.project_grant_files()
                        .is_ok_and(|files| files.iter().any(|f| same_file(f, &path)))
                });
                if listed {
                    out.line("next: every `craik run` of a task of this project loads it (craik.toml project.grants)")?;
                } else {
                    out.line(format_args!(
                        "next: list it in craik.toml (`[project] grants = [\"{}\"]`) or pass `--grants {}` to `craik run`",
                        dir.display(),
                        path.display()
                    ))?;
                }
            } else {
                out.line(format_args!(
                    "next: craik run {}",
                    args.task
                        .map_or_else(String::new, |t| t.display().to_string())
                ))?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// A path a grant pattern covers, to ask the profile about: `**` and `*` segments filled in
/// (`docs/**` → `docs/x`, `src/*.rs` → `src/x.rs`).
fn sample_target(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| {
            if seg == "**" {
                "x".to_owned()
            } else {
                seg.replace('*', "x")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What the profile does with what the grant allows, asked of the kernel for each operation on
/// a sample target with only this grant loaded and the most trusted runner: a `forbid` that
/// beats the grant (the grant is useless under this profile), or an approval every use needs.
fn profile_notes(
    bundle: &craik_kernel::Bundle,
    grant: &CapabilityGrant,
    profile: PolicyProfile,
    now: OffsetDateTime,
) -> Result<Vec<String>, Failure> {
    const TASK: &str = "task_grant_check";
    let bound = match (&grant.task_id, &grant.project_id) {
        (None, Some(project)) => craik_kernel::bind_project_grant(grant, TASK, project),
        _ => {
            let mut g = grant.clone();
            g.task_id = Some(TASK.to_owned());
            Ok(g)
        }
    }
    .map_err(Failure::internal)?;
    let set = craik_kernel::GrantSet::compile(bundle, std::slice::from_ref(&bound))
        .map_err(|e| Failure::invalid(e.to_string(), Vec::new()))?;
    let target = grant.target.paths.first().map(|p| {
        if grant.capability.starts_with("shell.") {
            p.clone()
        } else {
            sample_target(p)
        }
    });
    let options = craik_kernel::DecideOptions {
        now,
        workspace_root: "/workspace".into(),
        mode: craik_kernel::Mode::Enforce,
        immutable: craik_kernel::ImmutablePaths::default(),
    };
    let mut notes = Vec::new();
    for op in &grant.operations {
        let request: craik_kernel::DecisionRequest = serde_json::from_value(json!({
            "runner": {"id": "runner_grant_check", "trust": "high", "mode": "live"},
            "task_id": TASK,
            "capability": grant.capability,
            "target": target,
            "operation": op,
            "profile": profile,
        }))
        .map_err(|e| Failure::internal(format!("grant check request: {e}")))?;
        let verdict = bundle.decide(&set, &request, &options);
        let on = target.as_deref().unwrap_or("");
        match verdict.decision {
            craik_kernel::Decision::Deny
                if verdict.deny_kind == Some(craik_kernel::DenyKind::ForbiddenBy) =>
            {
                notes.push(format!(
                    "under `{}`, `{}` {op} `{on}` is forbidden by {} whatever this grant says: {}",
                    profile.as_str(),
                    grant.capability,
                    verdict.determining.join(", "),
                    verdict.reasons.join("; ")
                ));
            }
            craik_kernel::Decision::RequiresApproval => notes.push(format!(
                "under `{}`, each `{}` {op} still needs a human approval ({})",
                profile.as_str(),
                grant.capability,
                verdict.determining.join(", ")
            )),
            _ => {}
        }
    }
    Ok(notes)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The write scope a known test tool needs to run at all: its build or cache directory.
fn default_verify_writes(command: &str) -> Vec<String> {
    let mut words = command.split_whitespace();
    let program = words
        .next()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or_default();
    let second = words.next().unwrap_or_default();
    let scope = match program {
        "cargo" => Some("target/**"),
        "pytest" | "py.test" => Some(".pytest_cache/**"),
        "python" | "python3" if second == "-m" => Some(".pytest_cache/**"),
        "npm" | "npx" | "yarn" | "pnpm" => Some("node_modules/.cache/**"),
        _ => None,
    };
    scope.map(|s| vec![s.to_owned()]).unwrap_or_default()
}
