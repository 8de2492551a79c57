//! `craik project show` and `craik case build`: the project profile and the case file the
//! host assembles (`craik_host::project`, `craik_host::case`). Everything shown that came
//! from the repository or a run is escaped (`one_line`) before it is printed.

use std::path::{Path, PathBuf};

use craik_contracts::{IntentLock, PolicyEnvelope, TaskRequest, one_line};
use craik_host::project::Profile;
use serde_json::json;

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// The profile for `task` (its directory's project_profile.json), `--project-profile FILE`,
/// else craik.toml's `[project]`; a failure when there is none.
pub(crate) fn profile_for(task: Option<&Path>, file: Option<&Path>) -> Result<Profile, Failure> {
    if let Some(file) = file {
        return Ok(Profile::from_file(file)?);
    }
    let config = crate::cmd::config::project()?;
    let found = match task {
        Some(t) => craik_host::project::for_task(t, config)?,
        None => config.map(Profile::from_config),
    };
    found.ok_or_else(|| {
        Failure::usage(
            "no project profile: no craik.toml here or above (write one with `craik init`), no project_profile.json beside the task, no --project-profile",
        )
    })
}

/// `craik project show`.
pub(crate) fn project_show(
    out: &mut Out,
    format: Format,
    task: Option<&Path>,
    file: Option<&Path>,
) -> Result<Exit, Failure> {
    let profile = profile_for(task, file)?;
    profile.validate()?;
    let digest = profile.digest().map_err(Failure::internal)?;
    let top = craik_host::case::git::toplevel(&profile.root).unwrap_or_default();
    if format == Format::Json {
        out.json(&json!({
            "file": profile.file.display().to_string(),
            "root": profile.root.display().to_string(),
            "git_toplevel": top.display().to_string(),
            "profile": profile.profile,
            "discovery": profile.discovery,
            "sha256": digest.as_str(),
        }))?;
        return Ok(Exit::Ok);
    }
    let p = &profile.profile;
    let list = |v: &[String]| {
        if v.is_empty() {
            "(none)".to_owned()
        } else {
            one_line(&v.join(", "))
        }
    };
    out.line(format_args!(
        "project {} ({})",
        one_line(&p.id),
        one_line(&p.name)
    ))?;
    out.line(format_args!(
        "  from        {}",
        one_line(&profile.file.display().to_string())
    ))?;
    out.line(format_args!(
        "  repository  {} (git work tree {})",
        one_line(&profile.root.display().to_string()),
        one_line(&top.display().to_string())
    ))?;
    out.line(format_args!("  docs paths  {}", list(&p.docs.paths)))?;
    out.line(format_args!(
        "  immutable   {}",
        list(&p.docs.immutable_paths)
    ))?;
    out.line(format_args!(
        "  discovery   include {}; exclude {}",
        list(&profile.discovery.include),
        list(&profile.discovery.exclude)
    ))?;
    out.line(format_args!("  sha256      {digest}"))?;
    Ok(Exit::Ok)
}

/// The home's project index (`craik project add`).
const PROJECTS: &str = "projects.json";

/// One registered project.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Registered {
    root: String,
    profile: String,
    sha256: String,
}

/// `HOME/projects.json`: registered projects by id (sorted).
fn read_index(home: &Path) -> Result<std::collections::BTreeMap<String, Registered>, Failure> {
    let path = home.join(PROJECTS);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| Failure::invalid(format!("{}: {e}", path.display()), Vec::new())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(Failure::usage(format!("{}: {e}", path.display()))),
    }
}

/// `craik project add`: validates the profile and registers it in the home's index. The
/// output is the same every time for the same profile (idempotent).
pub(crate) fn project_add(
    out: &mut Out,
    format: Format,
    task: Option<&Path>,
    file: Option<&Path>,
    home: Option<&Path>,
) -> Result<Exit, Failure> {
    let profile = profile_for(task, file)?;
    profile.validate()?;
    let digest = profile.digest().map_err(Failure::internal)?;
    let (root, _) = crate::cmd::config::home(home)?;
    let id = profile.profile.id.clone();
    let entry = Registered {
        root: profile.root.display().to_string(),
        profile: profile
            .file
            .canonicalize()
            .unwrap_or_else(|_| profile.file.clone())
            .display()
            .to_string(),
        sha256: digest.as_str().to_owned(),
    };
    let mut index = read_index(&root)?;
    if let Some(known) = index.get(&id)
        && known.root != entry.root
    {
        return Err(Failure::usage(format!(
            "{}: project `{}` is registered for `{}`, not `{}`; one id names one repository",
            root.join(PROJECTS).display(),
            one_line(&id),
            one_line(&known.root),
            one_line(&entry.root)
        )));
    }
    if index.get(&id) != Some(&entry) {
        craik_host::run::store::create_home(&root)
            .map_err(|e| Failure::usage(format!("{}: {e}", root.display())))?;
        index.insert(id.clone(), entry.clone());
        let mut bytes =
            serde_json::to_vec_pretty(&index).map_err(|e| Failure::internal(e.to_string()))?;
        bytes.push(b'\n');
        let path = root.join(PROJECTS);
        craik_host::fsio::write_atomic(&path, &bytes)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    }
    if format == Format::Json {
        out.json(&json!({"id": id, "root": entry.root, "profile": entry.profile, "sha256": entry.sha256, "index": root.join(PROJECTS).display().to_string()}))?;
        return Ok(Exit::Ok);
    }
    out.line(format_args!(
        "project {} registered: {} ({})",
        one_line(&id),
        one_line(&entry.root),
        entry.sha256
    ))?;
    out.line(format_args!(
        "  index       {}",
        one_line(&root.join(PROJECTS).display().to_string())
    ))?;
    Ok(Exit::Ok)
}

/// `craik project list`: every registered project, its profile re-hashed now.
pub(crate) fn project_list(
    out: &mut Out,
    format: Format,
    home: Option<&Path>,
) -> Result<Exit, Failure> {
    let (root, _) = crate::cmd::config::home(home)?;
    let index = read_index(&root)?;
    let mut rows = Vec::new();
    for (id, entry) in &index {
        let file = Path::new(&entry.profile);
        let profile = if file.file_name().is_some_and(|n| n == "craik.toml") {
            craik_host::config::load(file).map(|c| Profile::from_config(&c))
        } else {
            Profile::from_file(file)
        };
        let now = profile
            .ok()
            .and_then(|p| p.digest().ok())
            .map(|d| d.as_str().to_owned());
        let state = match &now {
            Some(d) if *d == entry.sha256 => "unchanged",
            Some(_) => "CHANGED since added",
            None => "unreadable",
        };
        rows.push(json!({"id": id, "root": entry.root, "profile": entry.profile, "sha256": entry.sha256, "state": state}));
        if format != Format::Json {
            out.line(format_args!(
                "{} {} {} ({state})",
                one_line(id),
                one_line(&entry.root),
                entry.sha256
            ))?;
        }
    }
    if format == Format::Json {
        out.json(&rows)?;
    } else if index.is_empty() {
        out.line(format_args!(
            "no projects registered in {} (`craik project add`)",
            one_line(&root.display().to_string())
        ))?;
    }
    Ok(Exit::Ok)
}

/// What a task path holds: the task, and for a directory its intent lock and envelope.
pub(crate) fn task_parts(
    task: &Path,
) -> Result<(TaskRequest, Option<IntentLock>, Option<PolicyEnvelope>), Failure> {
    if task.is_dir() {
        let file = task.join("task_request.json");
        if !file.is_file() {
            return Err(Failure::usage(format!(
                "{}: no task_request.json",
                task.display()
            )));
        }
        let opt = |name: &str| Some(task.join(name)).filter(|p| p.is_file());
        let intent = opt("intent_lock.json")
            .as_deref()
            .map(crate::cmd::runs::read_one)
            .transpose()?;
        let envelope = opt("policy_envelope.json")
            .as_deref()
            .map(crate::cmd::runs::read_one)
            .transpose()?;
        Ok((crate::cmd::runs::read_one(&file)?, intent, envelope))
    } else {
        Ok((crate::cmd::runs::read_one(task)?, None, None))
    }
}

/// The home's history for a case file: the home, if it exists, and its keys, if it has any.
pub(crate) fn history(
    given: Option<&Path>,
) -> Result<
    (
        Option<craik_host::run::store::Home>,
        Option<craik_kernel::KeyRing>,
    ),
    Failure,
> {
    let (root, _) = crate::cmd::config::home(given)?;
    if !root.is_dir() {
        return Ok((None, None));
    }
    let home = craik_host::run::store::Home::new(&root);
    let private = home.keys().join(craik_host::keys::PRIVATE_NAME);
    let keys = if private.is_file() {
        Some(craik_host::keys::load_or_create(&home.keys())?.1)
    } else {
        None
    };
    Ok((Some(home), keys))
}

/// What `craik case build` was asked.
pub(crate) struct BuildArgs<'a> {
    pub(crate) task: &'a Path,
    pub(crate) max_tokens: u64,
    pub(crate) project_profile: Option<&'a Path>,
    pub(crate) out: Option<&'a PathBuf>,
    pub(crate) home: Option<&'a Path>,
}

/// `craik case build`.
pub(crate) fn build(out: &mut Out, format: Format, args: &BuildArgs<'_>) -> Result<Exit, Failure> {
    let (task, intent, envelope) = task_parts(args.task)?;
    let profile = profile_for(Some(args.task), args.project_profile)?;
    let (home, keys) = history(args.home)?;
    let built = craik_host::case::build(&craik_host::case::Request {
        profile: &profile,
        task: &task,
        intent: intent.as_ref(),
        envelope: envelope.as_ref(),
        home: home.as_ref(),
        keys: keys.as_ref(),
        max_tokens: args.max_tokens,
        strict: true,
    })?;
    if let Some(file) = args.out {
        craik_host::fsio::write_atomic(file, &built.bytes)
            .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    }
    if format == Format::Json {
        out.text(&String::from_utf8_lossy(&built.bytes))?;
        return Ok(Exit::Ok);
    }
    summary(out, &built.case)?;
    if let Some(file) = args.out {
        out.line(format_args!(
            "  written     {}",
            one_line(&file.display().to_string())
        ))?;
    }
    Ok(Exit::Ok)
}

/// The human summary of a case file.
pub(crate) fn summary(out: &mut Out, case: &craik_contracts::CaseFile) -> Result<(), Failure> {
    let get = |k: &str| case.repo_state.0.get(k).cloned().unwrap_or_default();
    let text = |v: serde_json::Value| v.as_str().map_or_else(|| "-".to_owned(), one_line);
    out.line(format_args!(
        "case {} for task {}",
        case.id,
        one_line(&case.task_id)
    ))?;
    if get("git").as_bool() == Some(true) {
        out.line(format_args!(
            "  repository  branch {}, head {}, {} dirty path(s)",
            text(get("branch")),
            text(get("head")),
            get("dirty_count").as_u64().unwrap_or(0)
        ))?;
    } else {
        out.line("  repository  no git repository")?;
    }
    let immutable = case
        .evidence
        .iter()
        .filter(|e| {
            e.metadata
                .0
                .get("immutable")
                .and_then(serde_json::Value::as_bool)
                == Some(true)
        })
        .count();
    out.line(format_args!(
        "  docs        {} ({} immutable); {} immutable path(s)",
        case.docs.len(),
        immutable,
        case.adrs.len()
    ))?;
    out.line(format_args!(
        "  history     {} handoff(s), {} approved fact(s), {} open contradiction(s)",
        case.recent_handoffs.len(),
        case.facts.len(),
        case.contradictions.len()
    ))?;
    out.line(format_args!("  stale risks {}", case.stale_risks.len()))?;
    for risk in &case.stale_risks {
        out.line(format_args!("    {}", one_line(risk)))?;
    }
    out.line(format_args!(
        "  verify      {}",
        case.verification_plan.len()
    ))?;
    for step in &case.verification_plan {
        out.line(format_args!("    {}", one_line(step)))?;
    }
    let b = &case.context_budget.0;
    let num = |k: &str| b.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let omissions = b
        .get("context_omissions")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    out.line(format_args!(
        "  budget      {} of {} tokens; {} omission(s)",
        num("estimated_tokens"),
        num("max_tokens"),
        omissions.len()
    ))?;
    for o in omissions {
        out.line(format_args!(
            "    {}: {} — {}",
            text(o.get("section").cloned().unwrap_or_default()),
            o.get("count")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            text(o.get("reason").cloned().unwrap_or_default())
        ))?;
    }
    Ok(())
}
