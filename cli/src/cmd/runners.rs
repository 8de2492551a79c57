//! `craik runners matrix`, `craik runners conformance` (a command or a registry id) and the
//! runner registry's commands (issue 22).

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// `craik runners matrix [--runner ID]`.
pub(crate) fn matrix(out: &mut Out, format: Format, runner: Option<&str>) -> Result<Exit, Failure> {
    let names: Vec<&str> = match runner {
        Some(r) => vec![r],
        None => craik_host::runners::names().collect(),
    };
    let matrices = names
        .iter()
        .map(|n| craik_host::runners::matrix(n))
        .collect::<Result<Vec<_>, _>>()?;
    match format {
        Format::Json | Format::Junit => out.json(&matrices)?,
        Format::Human => {
            for (i, m) in matrices.iter().enumerate() {
                if i > 0 {
                    out.line("")?;
                }
                out.line(format_args!(
                    "{} ({}) — mode {}, trust {}, {}",
                    m.runner.id,
                    m.runner.name,
                    m.runner.mode.as_str(),
                    m.trust.level.as_str(),
                    m.trust.default_grant_posture.as_str()
                ))?;
                out.line(format_args!("  boundary: {}", m.trust.boundary))?;
                out.line(format_args!(
                    "  confinement: {}",
                    craik_host::confine::adapter_summary()
                ))?;
                out.line(format_args!(
                    "  receipts required: {}; redaction required: {}",
                    m.trust.requires_receipts, m.trust.requires_redaction
                ))?;
                let width = m
                    .capabilities
                    .iter()
                    .map(|c| c.name.len())
                    .max()
                    .unwrap_or(0);
                for c in &m.capabilities {
                    let effect = match c.support {
                        craik_contracts::RunnerCapabilitySupport::Unsupported => {
                            "blocked before policy"
                        }
                        craik_contracts::RunnerCapabilitySupport::PromptHandoff => {
                            "review: needs approval"
                        }
                        craik_contracts::RunnerCapabilitySupport::Supported => {
                            "policy and grants decide"
                        }
                    };
                    out.line(format_args!(
                        "  {:<width$}  {:<14} {:<22} {}{}",
                        c.name,
                        c.support.as_str(),
                        effect,
                        if c.grant_required {
                            "grant required"
                        } else {
                            "no grant needed"
                        },
                        c.notes
                            .as_deref()
                            .map(|n| format!(" — {n}"))
                            .unwrap_or_default()
                    ))?;
                }
                for note in &m.policy_notes {
                    out.line(format_args!("  policy: {note}"))?;
                }
            }
            out.line("")?;
            out.line("Capabilities not listed are unsupported. A family entry (`repo.write`) covers its members.")?;
        }
    }
    Ok(Exit::Ok)
}

/// `craik runners conformance -- CMD [ARGS]`.
pub(crate) fn conformance(
    out: &mut Out,
    format: Format,
    command: &[String],
) -> Result<Exit, Failure> {
    let checks = craik_host::conformance::run(command)?;
    report(out, format, &checks)
}

/// `craik runners conformance ID`: the same scenarios against a registry entry, launched as a
/// run launches it.
pub(crate) fn conformance_entry(
    out: &mut Out,
    format: Format,
    home: &std::path::Path,
    id: &str,
) -> Result<Exit, Failure> {
    let registry = registry(home)?;
    let entry = registry.get(id)?;
    if entry.backend == craik_host::registry::Backend::InProcess {
        return Err(craik_host::Error::usage(format!(
            "runner `{id}` runs inside Craik: there is no adapter to check"
        ))
        .into());
    }
    let checks = craik_host::conformance::run_entry(entry, home)?;
    report(out, format, &checks)
}

fn report(
    out: &mut Out,
    format: Format,
    checks: &[craik_host::conformance::Check],
) -> Result<Exit, Failure> {
    let failed = checks.iter().filter(|c| !c.passed && !c.skipped).count();
    let skipped = checks.iter().filter(|c| c.skipped).count();
    match format {
        Format::Json | Format::Junit => out.json(&checks)?,
        Format::Human => {
            for c in checks {
                out.line(format_args!(
                    "{}  {:<34} {}",
                    if c.passed {
                        "pass"
                    } else if c.skipped {
                        "skip"
                    } else {
                        "FAIL"
                    },
                    c.scenario,
                    one_line(&c.detail)
                ))?;
            }
            out.line(format_args!(
                "{} scenario(s): {} passed, {failed} failed, {skipped} not run",
                checks.len(),
                checks.len() - failed - skipped
            ))?;
        }
    }
    let all = craik_host::conformance::scenarios().count();
    Ok(if failed == 0 && skipped == 0 && checks.len() == all {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

// ---- the runner registry (issue 22) ----

use std::path::{Path, PathBuf};

use craik_contracts::one_line;
use craik_host::registry::{Backend, Entry, Origin, Registry};

/// The registry a command in this directory sees: built-ins, `HOME/runners.toml`, and the
/// project's `runners.toml` beside its `craik.toml`.
pub(crate) fn registry(home: &Path) -> Result<Registry, Failure> {
    let project = crate::cmd::config::project()?.map(|c| c.dir.clone());
    Ok(Registry::load(home, project.as_deref())?)
}

/// The file `add`/`remove` edit: the home's, or with `--project` the project's.
fn target_file(home: &Path, project: bool) -> Result<PathBuf, Failure> {
    if !project {
        return Ok(home.join(craik_host::registry::FILE_NAME));
    }
    match crate::cmd::config::project()? {
        Some(c) => Ok(c.dir.join(craik_host::registry::FILE_NAME)),
        None => Err(Failure::usage(
            "--project: no craik.toml here or above (the project registry lives beside it; `craik init` writes one)",
        )),
    }
}

fn origin_word(o: &Origin) -> &'static str {
    match o {
        Origin::Builtin => "built-in",
        Origin::Home(_) => "home",
        Origin::Project(_) => "project",
    }
}

#[derive(serde::Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    entry: &'a Entry,
    pin: Option<craik_host::registry::Pin>,
}

/// `craik runners list`.
pub(crate) fn list(out: &mut Out, format: Format, home: &Path) -> Result<Exit, Failure> {
    let registry = registry(home)?;
    let mut rows = Vec::new();
    for e in registry.entries() {
        rows.push(Listed {
            entry: e,
            pin: craik_host::registry::read_pin(home, &e.id)?,
        });
    }
    match format {
        Format::Json | Format::Junit => out.json(&rows)?,
        Format::Human => {
            out.line(format_args!(
                "{:<20} {:<10} {:<12} {:<9} {:<7} pin",
                "id", "backend", "version", "origin", "trust"
            ))?;
            for r in &rows {
                let e = r.entry;
                out.line(format_args!(
                    "{:<20} {:<10} {:<12} {:<9} {:<7} {}",
                    one_line(&e.id),
                    e.backend.as_str(),
                    one_line(e.version.as_deref().unwrap_or("-")),
                    origin_word(&e.origin),
                    e.matrix.trust.level.as_str(),
                    match (&r.pin, e.backend) {
                        (_, Backend::InProcess) => "-".to_owned(),
                        (Some(p), _) => p.sha256.clone(),
                        (None, _) if e.origin == Origin::Builtin => "(shipped with craik)".into(),
                        (None, _) => "NOT INSTALLED (craik runners install ID)".into(),
                    }
                ))?;
            }
            for f in &registry.files {
                out.line(format_args!("registry file: {}", f.display()))?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// `craik runners show ID`.
pub(crate) fn show(out: &mut Out, format: Format, home: &Path, id: &str) -> Result<Exit, Failure> {
    let registry = registry(home)?;
    let e = registry.get(id)?;
    let pin = craik_host::registry::read_pin(home, &e.id)?;
    match format {
        Format::Json | Format::Junit => out.json(&Listed { entry: e, pin })?,
        Format::Human => {
            let opt = |v: &Option<String>| one_line(v.as_deref().unwrap_or("-"));
            out.line(format_args!("{} — {}", one_line(&e.id), one_line(&e.name)))?;
            out.line(format_args!(
                "  origin     {}",
                one_line(&e.origin.to_string())
            ))?;
            out.line(format_args!("  backend    {}", e.backend.as_str()))?;
            out.line(format_args!("  command    {}", opt(&e.command)))?;
            if !e.args.is_empty() {
                out.line(format_args!(
                    "  args       {}",
                    one_line(&serde_json::to_string(&e.args).unwrap_or_default())
                ))?;
            }
            if let Some(a) = &e.adapter {
                out.line(format_args!("  adapter    {}", one_line(a)))?;
            }
            if e.api.is_some() {
                out.line(format_args!(
                    "  api        {} (model {})",
                    opt(&e.api),
                    opt(&e.model)
                ))?;
            }
            if e.backend == Backend::Cli {
                // What the CLI is told (the key by its variable's name, never its value).
                out.line(format_args!(
                    "  endpoint   {}",
                    one_line(e.endpoint.as_deref().unwrap_or("(the CLI's default)"))
                ))?;
                out.line(format_args!(
                    "  model      {}",
                    one_line(e.model.as_deref().unwrap_or("(the CLI's default)"))
                ))?;
                out.line(format_args!(
                    "  key from   {}",
                    e.key_env.as_deref().map_or_else(
                        || "(none: the CLI's own login, which a run's new HOME does not hold)"
                            .to_owned(),
                        |k| format!("${}", one_line(k))
                    )
                ))?;
                if !e.cli_args.is_empty() {
                    out.line(format_args!(
                        "  cli args   {}",
                        one_line(&serde_json::to_string(&e.cli_args).unwrap_or_default())
                    ))?;
                }
            }
            out.line(format_args!("  package    {}", opt(&e.package)))?;
            out.line(format_args!("  version    {}", opt(&e.version)))?;
            out.line(format_args!("  install    {}", e.install.as_str()))?;
            // How a run would start it now (only once it checks out against its pin).
            if e.backend != Backend::InProcess
                && let Ok(launch) = craik_host::registry::verify(e, home)
            {
                let mut words = vec![launch.program.display().to_string()];
                words.extend(launch.args.iter().cloned());
                out.line(format_args!(
                    "  launches   {}",
                    one_line(&serde_json::to_string(&words).unwrap_or_default())
                ))?;
            }
            if let Some(s) = &e.source {
                out.line(format_args!(
                    "  source     {}",
                    one_line(&s.display().to_string())
                ))?;
            }
            out.line(format_args!(
                "  env        {}",
                if e.env.is_empty() {
                    "(none)".to_owned()
                } else {
                    one_line(&e.env.join(", "))
                }
            ))?;
            for r in &e.read {
                out.line(format_args!(
                    "  read       {}",
                    one_line(&r.display().to_string())
                ))?;
            }
            out.line(format_args!(
                "  matrix     {} — {} ({}), trust {}, {}",
                one_line(&e.matrix_source),
                one_line(&e.matrix.runner.id),
                e.matrix.runner.mode.as_str(),
                e.matrix.trust.level.as_str(),
                e.matrix.trust.default_grant_posture.as_str()
            ))?;
            for c in &e.matrix.capabilities {
                out.line(format_args!(
                    "    {:<24} {}",
                    one_line(&c.name),
                    c.support.as_str()
                ))?;
            }
            match &pin {
                Some(p) => out.line(format_args!(
                    "  pin        {} of {} (installed {})",
                    p.sha256,
                    one_line(&p.path.display().to_string()),
                    one_line(&p.installed_at)
                ))?,
                None => out.line(format_args!(
                    "  pin        {}",
                    if e.origin == Origin::Builtin {
                        "none (shipped with craik; `craik runners install` pins it too)"
                    } else {
                        "none: `craik runners install ID` before a run can use it"
                    }
                ))?,
            }
        }
    }
    Ok(Exit::Ok)
}

/// `craik runners add ID --backend B ...`: one `[runner.ID]` table, checked with the whole
/// registry as a run would load it before the file is (atomically) written.
pub(crate) fn add(
    out: &mut Out,
    format: Format,
    home: &Path,
    entry: &craik_host::registry::NewEntry,
    project: bool,
    force: bool,
) -> Result<Exit, Failure> {
    if let Some(why) = craik_host::registry::id_problem(&entry.id) {
        return Err(Failure::usage(format!(
            "runner id `{}`: {why}",
            one_line(&entry.id)
        )));
    }
    let file = target_file(home, project)?;
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Failure::usage(format!("{}: {e}", file.display()))),
    };
    let new_text = craik_host::registry::add_to_text(&text, entry, force)
        .map_err(|why| Failure::usage(format!("{}: {why}", file.display())))?;
    let project_dir = crate::cmd::config::project()?.map(|c| c.dir.clone());
    Registry::load_with(home, project_dir.as_deref(), Some((&file, &new_text)))?;
    if !project {
        craik_host::run::store::create_home(home)
            .map_err(|e| Failure::usage(format!("{}: {e}", home.display())))?;
    }
    write(&file, &new_text)?;
    match format {
        Format::Json | Format::Junit => {
            out.json(&serde_json::json!({"added": entry.id, "file": file}))?;
        }
        Format::Human => {
            out.line(format_args!(
                "added runner `{}` to {}",
                entry.id,
                file.display()
            ))?;
            out.line(format_args!("next: craik runners install {}", entry.id))?;
        }
    }
    Ok(Exit::Ok)
}

fn write(file: &Path, text: &str) -> Result<(), Failure> {
    craik_host::fsio::write_atomic(file, text.as_bytes()).map_err(|e| {
        Failure::from(craik_host::Error::io(format!(
            "{}: cannot write: {e}",
            file.display()
        )))
    })
}

/// `craik runners remove ID [--project]`: the entry, and (home entries) its pin and cache.
pub(crate) fn remove(
    out: &mut Out,
    format: Format,
    home: &Path,
    id: &str,
    project: bool,
) -> Result<Exit, Failure> {
    let file = target_file(home, project)?;
    let text = std::fs::read_to_string(&file)
        .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    let new_text = craik_host::registry::remove_from_text(&text, id)
        .map_err(|why| Failure::invalid(format!("{}: {why}", file.display()), Vec::new()))?
        .ok_or_else(|| {
            Failure::usage(format!(
                "{}: no runner `{}` (built-in runners cannot be removed)",
                file.display(),
                one_line(id)
            ))
        })?;
    write(&file, &new_text)?;
    let uninstalled = !project && craik_host::registry::uninstall(home, id)?;
    match format {
        Format::Json | Format::Junit => {
            out.json(&serde_json::json!({"removed": id, "file": file, "uninstalled": uninstalled}))?
        }
        Format::Human => out.line(format_args!(
            "removed runner `{id}` from {}{}",
            file.display(),
            if uninstalled {
                " (and its pin and cache)"
            } else {
                ""
            }
        ))?,
    }
    Ok(Exit::Ok)
}

/// `craik runners install ID`.
pub(crate) fn install(
    out: &mut Out,
    format: Format,
    home: &Path,
    id: &str,
) -> Result<Exit, Failure> {
    let registry = registry(home)?;
    let entry = registry.get(id)?;
    craik_host::run::store::create_home(home)
        .map_err(|e| Failure::usage(format!("{}: {e}", home.display())))?;
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| Failure::internal(e.to_string()))?;
    let pin = craik_host::registry::install(entry, home, &now)?;
    match format {
        Format::Json | Format::Junit => out.json(&pin)?,
        Format::Human => out.line(format_args!(
            "installed runner `{}`: {} {} pinned ({})",
            pin.id,
            pin.path.display(),
            pin.sha256,
            entry_dir_note(home, id)
        ))?,
    }
    Ok(Exit::Ok)
}

fn entry_dir_note(home: &Path, id: &str) -> String {
    craik_host::registry::entry_dir(home, id)
        .join(craik_host::registry::PIN_FILE)
        .display()
        .to_string()
}

#[derive(serde::Serialize)]
struct Checked {
    id: String,
    passed: bool,
    detail: String,
}

/// `craik runners check [ID]`: the registry loads (a refusal is exit 3 naming file, line,
/// key and value), and every entry (or ID) resolves and matches its pin.
pub(crate) fn check(
    out: &mut Out,
    format: Format,
    home: &Path,
    id: Option<&str>,
    handshake: bool,
) -> Result<Exit, Failure> {
    let registry = registry(home)?;
    let entries: Vec<&Entry> = match id {
        Some(id) => vec![registry.get(id)?],
        None => registry.entries().collect(),
    };
    let mut results = Vec::new();
    for e in entries {
        let result = if e.backend == Backend::InProcess {
            Checked {
                id: e.id.clone(),
                passed: true,
                detail: "in process; nothing to launch".into(),
            }
        } else {
            match craik_host::registry::verify(e, home) {
                Ok(l) if handshake => match craik_host::launch::handshake(e, home) {
                    Ok(announced) => Checked {
                        id: e.id.clone(),
                        passed: true,
                        detail: format!("{}; handshake: {announced}", pinned_detail(&l.record)),
                    },
                    Err(why) => Checked {
                        id: e.id.clone(),
                        passed: false,
                        detail: format!("handshake failed: {why}"),
                    },
                },
                Ok(l) => Checked {
                    id: e.id.clone(),
                    passed: true,
                    detail: pinned_detail(&l.record),
                },
                Err(err) => Checked {
                    id: e.id.clone(),
                    passed: false,
                    detail: err.message,
                },
            }
        };
        results.push(result);
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    match format {
        Format::Json | Format::Junit => out.json(&results)?,
        Format::Human => {
            for r in &results {
                out.line(format_args!(
                    "{}  {:<20} {}",
                    if r.passed { "pass" } else { "FAIL" },
                    one_line(&r.id),
                    one_line(&r.detail)
                ))?;
            }
            out.line(format_args!(
                "{} runner(s): {} passed, {failed} failed; registry files: {}",
                results.len(),
                results.len() - failed,
                if registry.files.is_empty() {
                    "none (built-ins only)".to_owned()
                } else {
                    registry
                        .files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))?;
        }
    }
    Ok(if failed == 0 {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// What `runners check` says of a verified adapter: its path, digest and whether a pin
/// vouched for it.
fn pinned_detail(record: &craik_host::registry::RunnerRecord) -> String {
    format!(
        "{} {}{}",
        record.path.display(),
        record.sha256,
        if record.pinned {
            " (matches its pin)"
        } else {
            " (shipped, not pinned)"
        }
    )
}
