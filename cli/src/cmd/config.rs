//! `craik init`, `craik config show`, `craik policy pin`, and how every command finds its
//! project configuration and home.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use craik_host::config::Loaded;
use serde::Serialize;

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// This invocation's `craik.toml` (loaded once). A broken one is an error wherever a command
/// uses it, never silently ignored.
pub(crate) fn project() -> Result<Option<&'static Loaded>, Failure> {
    static LOADED: OnceLock<Result<Option<Loaded>, (String, Exit)>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let cwd = std::env::current_dir()
            .map_err(|e| (format!("current directory: {e}"), Exit::Usage))?;
        craik_host::config::discover(&cwd).map_err(|e| {
            let failure = Failure::from(e);
            (failure.message, failure.exit)
        })
    });
    match loaded {
        Ok(config) => Ok(config.as_ref()),
        Err((message, exit)) => Err(Failure::usage(message.clone()).with_exit(*exit)),
    }
}

/// Where a setting came from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// A command-line flag.
    Flag(String),
    /// An environment variable.
    Env(String),
    /// The config file (its path and key).
    File(String),
    /// The built-in default.
    Default(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Flag(name) => write!(f, "flag {name}"),
            Self::Env(name) => write!(f, "environment {name}"),
            Self::File(at) => write!(f, "{at}"),
            Self::Default(why) => write!(f, "default ({why})"),
        }
    }
}

/// The home a command uses and where that came from: `--home`/`CRAIK_HOME`, else the config's
/// `home`, else `./.craik` when it exists, else the user's state directory when it exists,
/// else `./.craik`. Always absolute (issue 30: a relative `--home` gave commands a relative
/// `HOME`/`TMPDIR`, which resolved inside the workspace they ran in).
pub(crate) fn home(given: Option<&Path>) -> Result<(PathBuf, Source), Failure> {
    let (root, source) = home_as_given(given)?;
    let root = std::path::absolute(&root).map_err(|e| {
        Failure::usage(format!(
            "the home `{}` (from {source}): cannot make it absolute: {e}",
            root.display()
        ))
    })?;
    Ok((root, source))
}

fn home_as_given(given: Option<&Path>) -> Result<(PathBuf, Source), Failure> {
    if let Some(given) = given {
        let from_env = std::env::var_os("CRAIK_HOME").is_some_and(|v| Path::new(&v) == given);
        let source = if from_env {
            Source::Env("CRAIK_HOME".into())
        } else {
            Source::Flag("--home".into())
        };
        return Ok((given.to_owned(), source));
    }
    if let Some(config) = project()?
        && let Some(home) = config.home()
    {
        return Ok((
            home,
            Source::File(format!("{}: home", config.path.display())),
        ));
    }
    let root = craik_host::run::store::default_root(None);
    let why = if root == Path::new(".craik") {
        "./.craik"
    } else {
        "the user's state directory"
    };
    Ok((root, Source::Default(why.into())))
}

/// The home of a command that only reads or decides: it must exist (such a command never
/// creates a home or a key); a missing one is an error naming the path tried and why.
pub(crate) fn existing_home(given: Option<&Path>) -> Result<PathBuf, Failure> {
    let (root, source) = home(given)?;
    if root.is_dir() {
        return Ok(root);
    }
    Err(Failure::usage(format!(
        "no Craik home at `{}` (from {source}); check --home/CRAIK_HOME, or create one with `craik init` or a first `craik run`",
        root.display()
    )))
}

pub(crate) struct InitArgs<'a> {
    pub(crate) dir: Option<&'a Path>,
    pub(crate) home: Option<&'a Path>,
    pub(crate) profile: &'a str,
    pub(crate) force: bool,
    /// The operator (`NAME` or `user:NAME`) written as `operator`.
    pub(crate) operator: Option<&'a str>,
}

#[derive(Serialize)]
struct Initialised {
    config: String,
    home: String,
    home_created: bool,
    notes: Vec<String>,
}

/// `craik init`.
pub(crate) fn init(out: &mut Out, format: Format, args: &InitArgs<'_>) -> Result<Exit, Failure> {
    let dir = match args.dir {
        Some(d) => d.to_owned(),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(format!("current directory: {e}")))?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| Failure::usage(format!("`{}`: {e}", dir.display())))?;
    let file = dir.join(craik_host::config::FILE_NAME);
    if file.exists() && !args.force {
        return Err(Failure::usage(format!(
            "`{}` exists; pass --force to replace it",
            file.display()
        )));
    }
    let home = match args.home {
        Some(h) if h.is_absolute() => h.to_owned(),
        Some(h) => dir.join(h),
        None => craik_host::run::store::state_root().ok_or_else(|| {
            Failure::usage(
                "neither XDG_STATE_HOME nor HOME names a state directory: pass --home DIR",
            )
        })?,
    };
    let real_home = craik_host::run::store::prospective_real(&home)?;
    if real_home.starts_with(&dir) {
        return Err(Failure::usage(format!(
            "--home `{}` lies inside the project `{}`; runs on the project would refuse it (Craik's home is never inside a workspace): choose a home outside it, or leave --home out for `{}`",
            home.display(),
            dir.display(),
            craik_host::run::store::state_root()
                .map_or_else(|| "the state directory".into(), |s| s.display().to_string())
        )));
    }
    if craik_host::confine::in_system_tree(&real_home) {
        return Err(Failure::usage(format!(
            "--home `{}` lies in a system tree every confined process may read; choose a home elsewhere",
            home.display()
        )));
    }
    let operator = args
        .operator
        .map(|o| {
            let name = o.strip_prefix("user:").unwrap_or(o);
            craik_host::run::approvals::reviewer(&format!("user:{name}"), "runner_none")
                .map(|()| name.to_owned())
                .map_err(|_| {
                    Failure::usage(format!(
                        "--operator `{}`: expected a name of letters, digits, - _ . @",
                        craik_contracts::one_line(o)
                    ))
                })
        })
        .transpose()?;
    let project_id = craik_host::config::project_id_for(&dir);
    let text = craik_host::config::template_with_docs(
        args.home,
        args.profile,
        &project_id,
        operator.as_deref(),
        &craik_host::config::default_docs_paths(&dir),
    );
    craik_host::fsio::write_atomic(&file, text.as_bytes())
        .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    // The file just written must load (it is what every command will read).
    craik_host::config::load(&file)?;
    let created = craik_host::run::store::create_home(&home)
        .map_err(craik_host::run::store::home_io(&home))?;
    let keys = craik_host::run::store::Home::new(&home).keys();
    let (_, _, notes) = craik_host::keys::load_or_create(&keys)?;
    let report = Initialised {
        config: file.display().to_string(),
        home: home.display().to_string(),
        home_created: created,
        notes,
    };
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.line(format_args!("wrote {}", report.config))?;
            out.line(format_args!(
                "home {} ({})",
                report.home,
                if created {
                    "created, with a .gitignore"
                } else {
                    "exists"
                }
            ))?;
            for note in &report.notes {
                out.line(note)?;
            }
            out.line("next: edit craik.toml (profile, operator, toolchains, immutable paths, policy.custom), `craik config show`, then `craik task new` and `craik run TASK_DIR`")?;
        }
    }
    Ok(Exit::Ok)
}

#[derive(Serialize)]
struct Setting {
    key: &'static str,
    value: serde_json::Value,
    source: Source,
}

/// `craik config show`.
pub(crate) fn show(
    out: &mut Out,
    format: Format,
    given_home: Option<&Path>,
) -> Result<Exit, Failure> {
    let config = project()?;
    let mut settings = Vec::new();
    let file_source = |key: &str| -> Source {
        config.map_or_else(
            || Source::Default("no craik.toml".into()),
            |c| Source::File(format!("{}: {key}", c.path.display())),
        )
    };
    let (config_value, config_source) = match config {
        Some(c) => (
            serde_json::json!(c.path.display().to_string()),
            if std::env::var_os(craik_host::config::ENV).is_some_and(|v| !v.is_empty()) {
                Source::Env(craik_host::config::ENV.into())
            } else {
                Source::Default("the first craik.toml in the working directory or above".into())
            },
        ),
        None => (
            serde_json::Value::Null,
            Source::Default("no craik.toml in the working directory or above".into()),
        ),
    };
    settings.push(Setting {
        key: "config",
        value: config_value,
        source: config_source,
    });
    let (home, home_source) = home(given_home)?;
    settings.push(Setting {
        key: "home",
        value: serde_json::json!(home.display().to_string()),
        source: home_source,
    });
    let c = config.map(|c| &c.config);
    let pick = |key: &'static str,
                value: Option<serde_json::Value>,
                default: serde_json::Value,
                why: &str| Setting {
        key,
        source: if value.is_some() {
            file_source(key)
        } else {
            Source::Default(why.into())
        },
        value: value.unwrap_or(default),
    };
    settings.push(pick(
        "operator",
        c.and_then(|c| c.operator.clone())
            .map(serde_json::Value::from),
        serde_json::Value::Null,
        "none: --by is required",
    ));
    settings.push(pick(
        "project.id",
        c.and_then(|c| c.project.id.clone())
            .map(serde_json::Value::from),
        serde_json::Value::Null,
        "none: `craik task new` needs --project",
    ));
    settings.push(pick(
        "project.repository",
        config
            .filter(|c| c.config.project.repository.is_some())
            .and_then(|c| {
                c.config
                    .project
                    .repository
                    .as_ref()
                    .map(|r| serde_json::Value::from(c.resolve(r).display().to_string()))
            }),
        config.map_or(serde_json::Value::Null, |c| {
            serde_json::Value::from(
                c.path
                    .parent()
                    .unwrap_or(std::path::Path::new("."))
                    .display()
                    .to_string(),
            )
        }),
        "craik.toml's directory",
    ));
    settings.push(pick(
        "project.grants",
        config
            .filter(|c| !c.config.project.grants.is_empty())
            .map(|c| {
                serde_json::json!(
                    c.config
                        .project
                        .grants
                        .iter()
                        .map(|p| c.resolve(p).display().to_string())
                        .collect::<Vec<_>>()
                )
            }),
        serde_json::json!([]),
        "none: runs load only the grants they are given",
    ));
    settings.push(pick(
        "run.profile",
        c.and_then(|c| c.run.profile.clone())
            .map(serde_json::Value::from),
        serde_json::json!("strict"),
        "the envelope's, else strict",
    ));
    settings.push(pick(
        "run.runner",
        c.and_then(|c| c.run.runner.clone())
            .map(serde_json::Value::from),
        serde_json::json!("fixture"),
        "fixture",
    ));
    let list = |v: &[String]| (!v.is_empty()).then(|| serde_json::json!(v));
    settings.push(pick(
        "run.toolchains",
        c.and_then(|c| list(&c.run.toolchains)),
        serde_json::json!([]),
        "none",
    ));
    settings.push(pick(
        "run.command_read",
        config
            .map(Loaded::command_read)
            .filter(|v| !v.is_empty())
            .map(|v| {
                serde_json::json!(
                    v.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                )
            }),
        serde_json::json!([]),
        "none",
    ));
    let custom: Option<serde_json::Value> = config.filter(|c| !c.config.policy.custom.is_empty()).map(|c| {
        c.config
            .policy
            .custom
            .iter()
            .map(|entry| {
                let dir = c.resolve(&entry.path);
                let now = craik_host::config::dir_digest(&dir);
                let state = match (&now, &entry.sha256) {
                    (Err(why), _) => format!("unreadable: {why}"),
                    (Ok(_), None) => "not pinned".to_owned(),
                    (Ok(now), Some(pin)) if now == pin => "pinned, unchanged".to_owned(),
                    (Ok(_), Some(_)) => "CHANGED since pinned (runs refuse it)".to_owned(),
                };
                serde_json::json!({"path": dir.display().to_string(), "sha256": entry.sha256, "state": state})
            })
            .collect()
    });
    settings.push(pick("policy.custom", custom, serde_json::json!([]), "none"));
    for (key, value) in [
        ("project.docs_paths", c.map(|c| &c.project.docs_paths)),
        (
            "project.immutable_paths",
            c.map(|c| &c.project.immutable_paths),
        ),
        (
            "project.discovery_include",
            c.map(|c| &c.project.discovery_include),
        ),
        (
            "project.discovery_exclude",
            c.map(|c| &c.project.discovery_exclude),
        ),
    ] {
        settings.push(pick(
            key,
            value.and_then(|v| list(v)),
            serde_json::json!([]),
            "none",
        ));
    }
    match format {
        Format::Json | Format::Junit => out.json(&settings)?,
        Format::Human => {
            for s in &settings {
                let value = match &s.value {
                    serde_json::Value::String(text) => craik_contracts::one_line(text),
                    serde_json::Value::Null => "(none)".to_owned(),
                    other => craik_contracts::one_line(&other.to_string()),
                };
                out.line(format_args!("{:<26} {value}  [{}]", s.key, s.source))?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// `craik policy pin`.
pub(crate) fn pin(out: &mut Out, format: Format) -> Result<Exit, Failure> {
    let config = project()?.ok_or_else(|| {
        Failure::usage("no craik.toml in the working directory or above (and CRAIK_CONFIG unset): nothing to pin")
    })?;
    let pins = craik_host::config::pin(config)?;
    #[derive(Serialize)]
    struct Pinned {
        path: String,
        before: Option<String>,
        after: String,
    }
    let pinned: Vec<Pinned> = pins
        .into_iter()
        .map(|p| Pinned {
            path: p.path.display().to_string(),
            before: p.before,
            after: p.after,
        })
        .collect();
    match format {
        Format::Json | Format::Junit => out.json(&pinned)?,
        Format::Human => {
            if pinned.is_empty() {
                out.line(format_args!(
                    "{}: no [[policy.custom]] entries to pin",
                    config.path.display()
                ))?;
            }
            for p in &pinned {
                let was = match &p.before {
                    Some(b) if *b == p.after => "unchanged".to_owned(),
                    Some(b) => format!("was {b}"),
                    None => "was not pinned".to_owned(),
                };
                out.line(format_args!(
                    "pinned `{}` sha256 {} ({was})",
                    craik_contracts::one_line(&p.path),
                    p.after
                ))?;
            }
        }
    }
    Ok(Exit::Ok)
}
