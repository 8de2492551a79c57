//! The project configuration, `craik.toml`: where the home is, which operator policy
//! directories every run loads (pinned by content hash), the default profile and runner, the
//! project profile (docs, immutable paths, discovery globs), toolchains and extra read paths
//! for governed commands, and the operator's name for approvals.
//!
//! Found by walking up from the working directory (the first `craik.toml`), or named by
//! `CRAIK_CONFIG` (which must then exist). Relative paths in it are relative to the file's
//! directory. Flags and `CRAIK_HOME` override it; `craik config show` prints the effective
//! settings with where each came from. Every key is optional; unknown keys are refused, and
//! a bad value is an error naming the file, line, key and value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::error::Error;

/// The file name looked for.
pub const FILE_NAME: &str = "craik.toml";
/// The environment variable that names the file instead.
pub const ENV: &str = "CRAIK_CONFIG";

/// The profiles a config may name.
pub const PROFILES: &[&str] = &["strict", "trusted-local", "automation", "custom"];

/// `craik.toml`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Craik's home (default: `./.craik` when it exists, else the user's state directory).
    #[serde(default)]
    pub home: Option<PathBuf>,
    /// The operator's name, recorded as the approver of inline approvals (asserted, not
    /// authenticated).
    #[serde(default)]
    pub operator: Option<String>,
    /// Defaults of `craik run`.
    #[serde(default)]
    pub run: RunSection,
    /// Operator policy directories.
    #[serde(default)]
    pub policy: PolicySection,
    /// The project profile.
    #[serde(default)]
    pub project: ProjectSection,
}

/// `[run]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// The profile when neither `--profile` nor the envelope names one.
    #[serde(default)]
    pub profile: Option<String>,
    /// The runner when `--runner` is not given.
    #[serde(default)]
    pub runner: Option<String>,
    /// Toolchain presets governed commands may use (`rust`, `node`, `python`, `local-bin`).
    #[serde(default)]
    pub toolchains: Vec<String>,
    /// Extra directories governed commands may read.
    #[serde(default)]
    pub command_read: Vec<PathBuf>,
    // Issue 21 item 4: budgets (`--token-budget`, `--wall-clock-budget` override them).
    /// The provider token budget of a run: the most tokens its model steps may use.
    #[serde(default)]
    pub token_budget: Option<u64>,
    /// The wall-clock budget of a run, in seconds (waiting for approvals not counted).
    #[serde(default)]
    pub wall_clock_budget_seconds: Option<u64>,
}

/// `[policy]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// Operator policy directories every run loads on top of the bundle, each pinned.
    #[serde(default)]
    pub custom: Vec<CustomDir>,
    /// Whether `--custom DIR` may add directories to the pinned set (default: no). It never
    /// removes or replaces a pinned directory.
    #[serde(default)]
    pub allow_extra_custom: bool,
}

/// One `[[policy.custom]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomDir {
    /// The directory.
    pub path: PathBuf,
    /// The sha256 of its content ([`dir_digest`]), written by `craik policy pin`.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// `[project]`: the project profile.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectSection {
    /// The project's id (`project_…`): the default project of `craik task new` and of
    /// `craik grants new --project`.
    #[serde(default)]
    pub id: Option<String>,
    /// The repository the profile describes (default: this file's directory); case files
    /// and `craik project show` read it.
    #[serde(default)]
    pub repository: Option<PathBuf>,
    /// Project grant files, or directories of `*.json` project grants, every run of a task of
    /// this project loads (signed into its inputs like task grants). A missing directory
    /// holds no grants.
    #[serde(default)]
    pub grants: Vec<PathBuf>,
    /// Where the project's documentation lives.
    #[serde(default)]
    pub docs_paths: Vec<String>,
    /// Paths no write capability and no command may change, whatever the label (globs,
    /// relative to the workspace root: `docs/adr/**`).
    #[serde(default)]
    pub immutable_paths: Vec<String>,
    /// What case files look at (globs).
    #[serde(default)]
    pub discovery_include: Vec<String>,
    /// What case files never look at (globs).
    #[serde(default)]
    pub discovery_exclude: Vec<String>,
}

/// A config file, loaded and checked.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// Its directory (what relative paths in it are relative to).
    pub dir: PathBuf,
    /// What it says.
    pub config: Config,
}

impl Loaded {
    /// `p` as the config means it: absolute as written, else relative to the file.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.dir.join(p)
        }
    }

    /// The home it names.
    pub fn home(&self) -> Option<PathBuf> {
        self.config.home.as_deref().map(|h| self.resolve(h))
    }

    /// The project grant files, resolved: each named file, and the `*.json` files of each
    /// named directory (sorted); a directory that does not exist yet adds nothing.
    pub fn project_grant_files(&self) -> Result<Vec<PathBuf>, Error> {
        let mut files = Vec::new();
        for (i, entry) in self.config.project.grants.iter().enumerate() {
            let path = self.resolve(entry);
            if path.is_dir() {
                let listed = std::fs::read_dir(&path).map_err(|e| {
                    Error::usage(format!(
                        "{}: project.grants[{i}] `{}`: {e}",
                        self.path.display(),
                        entry.display()
                    ))
                })?;
                let mut found: Vec<PathBuf> = listed
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
                    .collect();
                found.sort();
                files.extend(found);
            } else if path.is_file() {
                files.push(path);
            } else if entry.extension().is_some_and(|e| e == "json") {
                return Err(Error::usage(format!(
                    "{}: project.grants[{i}] `{}`: no such file",
                    self.path.display(),
                    entry.display()
                )));
            }
        }
        Ok(files)
    }

    /// Extra read directories for commands, resolved.
    pub fn command_read(&self) -> Vec<PathBuf> {
        self.config
            .run
            .command_read
            .iter()
            .map(|p| self.resolve(p))
            .collect()
    }

    /// The operator policy directories, each checked against its pin: a directory whose
    /// content changed (or that was never pinned) is refused until `craik policy pin`.
    /// Every path this config names as an input of runs (the config itself, project grant
    /// files and directories, custom policy directories), existing or not: a run keeps the
    /// ones inside its workspace immutable, so no command prepares the next run's inputs.
    pub fn input_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.path.clone()];
        paths.extend(self.config.project.grants.iter().map(|g| self.resolve(g)));
        paths.extend(
            self.config
                .policy
                .custom
                .iter()
                .map(|c| self.resolve(&c.path)),
        );
        paths
    }

    /// The custom policy set a command loads under this config (issue 31 item 3): the pinned
    /// directories, each checked against its pin, plus `flags` (`--custom DIR`). A flag naming
    /// a pinned directory (however spelled) is that directory, pin checked; one naming another
    /// directory is added only where `policy.allow_extra_custom = true` — or where this config
    /// pins none — and never replaces the pinned set.
    pub fn custom_set(&self, flags: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
        let mut dirs = self.custom_dirs()?;
        let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let pinned: Vec<PathBuf> = dirs.iter().map(|d| real(d)).collect();
        for flag in flags {
            if pinned.contains(&real(flag)) {
                continue;
            }
            if !dirs.is_empty() && !self.config.policy.allow_extra_custom {
                return Err(Error::usage(format!(
                    "--custom `{}`: {} pins the custom policy set ({}); add the directory as a [[policy.custom]] entry and run `craik policy pin`, or set policy.allow_extra_custom = true",
                    flag.display(),
                    self.path.display(),
                    self.config
                        .policy
                        .custom
                        .iter()
                        .map(|c| format!("`{}`", c.path.display()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            dirs.push(flag.clone());
        }
        Ok(dirs)
    }

    pub fn custom_dirs(&self) -> Result<Vec<PathBuf>, Error> {
        let mut dirs = Vec::new();
        for (i, entry) in self.config.policy.custom.iter().enumerate() {
            let dir = self.resolve(&entry.path);
            let now = dir_digest(&dir).map_err(|why| {
                Error::usage(format!(
                    "{}: policy.custom[{i}].path `{}`: {why}",
                    self.path.display(),
                    entry.path.display()
                ))
            })?;
            match entry.sha256.as_deref() {
                Some(pinned) if pinned == now => dirs.push(dir),
                Some(pinned) => {
                    return Err(Error::usage(format!(
                        "{}: policy.custom[{i}] `{}` changed since it was pinned (sha256 {now}, pinned {pinned}); review the change, then run `craik policy pin`",
                        self.path.display(),
                        entry.path.display()
                    )));
                }
                None => {
                    return Err(Error::usage(format!(
                        "{}: policy.custom[{i}] `{}` is not pinned (no sha256); run `craik policy pin`",
                        self.path.display(),
                        entry.path.display()
                    )));
                }
            }
        }
        Ok(dirs)
    }
}

/// The config that applies in `cwd`: `CRAIK_CONFIG` when set (it must exist; `none` means no
/// config at all), else the first `craik.toml` in `cwd` or above it; `None` when there is none.
pub fn discover(cwd: &Path) -> Result<Option<Loaded>, Error> {
    if let Some(named) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        if named == "none" {
            return Ok(None);
        }
        let path = PathBuf::from(named);
        if !path.is_file() {
            return Err(Error::usage(format!(
                "{ENV}=`{}`: no such file",
                path.display()
            )));
        }
        return load(&path).map(Some);
    }
    for dir in cwd.ancestors() {
        let candidate = dir.join(FILE_NAME);
        if candidate.is_file() {
            return load(&candidate).map(Some);
        }
    }
    Ok(None)
}

/// Loads and checks one config file.
pub fn load(path: &Path) -> Result<Loaded, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
    let config: Config = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| {
            text.get(..s.start)
                .unwrap_or_default()
                .matches('\n')
                .count()
                + 1
        });
        let message = e.message().replace('\n', " ");
        Error::invalid(
            match line {
                Some(line) => format!("{}:{line}: {message}", path.display()),
                None => format!("{}: {message}", path.display()),
            },
            Vec::new(),
        )
    })?;
    let absolute =
        std::path::absolute(path).map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
    let loaded = Loaded {
        dir: absolute.parent().unwrap_or(Path::new("/")).to_owned(),
        path: path.to_owned(),
        config,
    };
    check(&loaded)?;
    Ok(loaded)
}

/// Values serde cannot check: profile names, toolchain names, hashes, globs.
fn check(loaded: &Loaded) -> Result<(), Error> {
    let file = loaded.path.display();
    let bad = |key: &str, value: &str, why: &str| {
        Err(Error::invalid(
            format!("{file}: {key} `{value}`: {why}"),
            Vec::new(),
        ))
    };
    let c = &loaded.config;
    if let Some(profile) = &c.run.profile
        && !PROFILES.contains(&profile.as_str())
    {
        return bad(
            "run.profile",
            profile,
            &format!("one of {}", PROFILES.join(", ")),
        );
    }
    for (i, name) in c.run.toolchains.iter().enumerate() {
        let presets = crate::confine::toolchains::PRESETS;
        if !presets.contains(&name.as_str()) {
            return bad(
                &format!("run.toolchains[{i}]"),
                name,
                &format!("not a toolchain preset ({})", presets.join(", ")),
            );
        }
    }
    if let Some(id) = &c.project.id
        && (craik_contracts::id_problem(id).is_some()
            || !id.starts_with("project_")
            || id.len() == "project_".len())
    {
        return bad(
            "project.id",
            id,
            "an id starting with `project_` (ASCII letters, digits, `_ - . :`)",
        );
    }
    if let Some(operator) = &c.operator
        && (operator.trim().is_empty() || operator.chars().any(char::is_control))
    {
        return bad("operator", operator, "a name without control characters");
    }
    for (i, entry) in c.policy.custom.iter().enumerate() {
        if let Some(sha) = &entry.sha256
            && !(sha.len() == 64
                && sha
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        {
            return bad(
                &format!("policy.custom[{i}].sha256"),
                sha,
                "64 lowercase hex digits",
            );
        }
    }
    let globs = [
        ("project.immutable_paths", &c.project.immutable_paths),
        ("project.discovery_include", &c.project.discovery_include),
        ("project.discovery_exclude", &c.project.discovery_exclude),
        ("project.docs_paths", &c.project.docs_paths),
    ];
    for (key, list) in globs {
        for (i, glob) in list.iter().enumerate() {
            if let Err(why) = workspace_glob(glob) {
                return bad(&format!("{key}[{i}]"), glob, &why);
            }
        }
    }
    Ok(())
}

/// A glob over workspace-relative paths: relative, no `..`, compiles.
pub fn workspace_glob(glob: &str) -> Result<globset::GlobMatcher, String> {
    if glob.is_empty() || glob.starts_with('/') {
        return Err("a path relative to the workspace root".into());
    }
    if glob.split('/').any(|part| part == ".." || part == ".") {
        return Err("no `.` or `..` components".into());
    }
    globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.to_string())
}

/// The sha256 of a policy directory's content: of the sorted list of `relative path`, NUL,
/// sha256 of the file, newline, over every file beneath it (links refused, not followed).
/// Independent of the directory's own name and place.
pub fn dir_digest(dir: &Path) -> Result<String, String> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory (a link is not followed)".into());
    }
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(current) = todo.pop() {
        let entries =
            std::fs::read_dir(&current).map_err(|e| format!("{}: {e}", current.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", current.display()))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() {
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let rel = path
                    .strip_prefix(dir)
                    .map_err(|e| e.to_string())?
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, hex(&Sha256::digest(&bytes)));
            } else {
                return Err(format!(
                    "{}: neither a file nor a directory (links are refused)",
                    path.display()
                ));
            }
        }
    }
    let mut hasher = Sha256::new();
    for (rel, digest) in &files {
        hasher.update(rel.as_bytes());
        hasher.update([0]);
        hasher.update(digest.as_bytes());
        hasher.update(b"\n");
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One pin `craik policy pin` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// The directory as the config names it.
    pub path: PathBuf,
    /// The pin before (`None`: none).
    pub before: Option<String>,
    /// The pin now.
    pub after: String,
}

/// Pins every `[[policy.custom]]` directory to its current content, rewriting only the
/// `sha256` values of the file (comments and layout kept), atomically.
pub fn pin(loaded: &Loaded) -> Result<Vec<Pin>, Error> {
    let file = &loaded.path;
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::usage(format!("{}: {e}", file.display())))?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| Error::invalid(format!("{}: {e}", file.display()), Vec::new()))?;
    let mut pins = Vec::new();
    let entries = doc
        .get_mut("policy")
        .and_then(|p| p.get_mut("custom"))
        .and_then(toml_edit::Item::as_array_of_tables_mut);
    if let Some(entries) = entries {
        for (i, (table, entry)) in entries
            .iter_mut()
            .zip(&loaded.config.policy.custom)
            .enumerate()
        {
            let after = dir_digest(&loaded.resolve(&entry.path)).map_err(|why| {
                Error::usage(format!(
                    "{}: policy.custom[{i}].path `{}`: {why}",
                    file.display(),
                    entry.path.display()
                ))
            })?;
            table["sha256"] = toml_edit::value(after.clone());
            pins.push(Pin {
                path: entry.path.clone(),
                before: entry.sha256.clone(),
                after,
            });
        }
    }
    crate::fsio::write_atomic(file, doc.to_string().as_bytes())
        .map_err(|e| Error::usage(format!("{}: {e}", file.display())))?;
    Ok(pins)
}

/// A project id from a directory's name: `project_` and the name with every character but
/// ASCII letters, digits, `-` and `.` replaced by `_` (lowercased, at most 64 of them).
pub fn project_id_for(dir: &Path) -> String {
    let name: String = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let name = name.trim_matches(|c| c == '_' || c == '.');
    if name.is_empty() {
        "project_local".to_owned()
    } else {
        format!("project_{name}")
    }
}

/// The immutable paths of a project with no `craik.toml` (and what `craik init` writes):
/// architecture decision records.
pub const DEFAULT_IMMUTABLE: &str = "docs/adr/**";

/// The `craik.toml` `craik init` writes: every key, with its default, documented.
pub fn template(
    home: Option<&Path>,
    profile: &str,
    project_id: &str,
    operator: Option<&str>,
) -> String {
    template_with_docs(
        home,
        profile,
        project_id,
        operator,
        &["docs/**".to_owned(), "README.md".to_owned()],
    )
}

/// The docs paths `craik init` writes for the repository at `dir`: `docs/**` and
/// `README.md` where they exist (a docs path matching no file is refused by
/// `craik project show` and `craik case build`).
pub fn default_docs_paths(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if std::fs::symlink_metadata(dir.join("docs")).is_ok_and(|m| m.is_dir()) {
        out.push("docs/**".to_owned());
    }
    if std::fs::symlink_metadata(dir.join("README.md")).is_ok_and(|m| m.is_file()) {
        out.push("README.md".to_owned());
    }
    out
}

/// [`template`] with the docs paths given.
pub fn template_with_docs(
    home: Option<&Path>,
    profile: &str,
    project_id: &str,
    operator: Option<&str>,
    docs_paths: &[String],
) -> String {
    let docs_line = format!(
        "docs_paths = [{}]",
        docs_paths
            .iter()
            .map(|d| toml_edit::value(d.as_str()).to_string().trim().to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let home_line = match home {
        Some(h) => format!("home = {}", toml_edit::value(h.display().to_string())),
        None => "# home = \"/path/to/craik-home\"".to_owned(),
    };
    let operator_line = match operator {
        Some(o) => format!("operator = {}", toml_edit::value(o)),
        None => "# operator = \"alice@example.com\"".to_owned(),
    };
    format!(
        r#"# Craik project configuration (written by `craik init`; see `craik config show`).
# Every key is optional. Relative paths are relative to this file. Flags and the
# CRAIK_HOME / CRAIK_CONFIG environment variables override what is here.

# Craik's home: keys, run journals, approvals, memory. Never inside a run's workspace.
# Default: ./.craik when it exists, else $XDG_STATE_HOME/craik (~/.local/state/craik).
{home_line}

# Who approves inline and with `craik approvals approve` when --by is not given
# (recorded as asserted, not authenticated). Default: none (--by is then required).
{operator_line}

[run]
# The profile when neither --profile nor the task's envelope names one:
# strict | trusted-local | automation | custom.
profile = "{profile}"
# The runner when --runner is not given. Default: fixture.
# runner = "codex"
# Toolchains governed commands may read and run (credential files never readable):
# rust | node | python | local-bin. Default: none.
toolchains = []
# Extra directories governed commands may read (an installation, never ~ or /). Default: none.
command_read = []
# Budgets (--token-budget, --wall-clock-budget override them): the most provider tokens all
# model steps of a run may use, and its wall-clock seconds (waiting for approvals not
# counted). Exceeded, the run ends interrupted with a handoff. Default: none.
# token_budget = 200000
# wall_clock_budget_seconds = 3600

# Operator policy directories every run loads on top of the embedded bundle. Each is pinned
# by the sha256 of its content: a run refuses a directory that changed until
# `craik policy pin` records the new content.
# [[policy.custom]]
# path = "policies/org"
# sha256 = "…written by craik policy pin…"
# `--custom DIR` adds to the pinned set only where this is true (it never replaces it):
# [policy]
# allow_extra_custom = false

[project]
# The project's id: the default project of `craik task new` and `craik grants new --project`.
id = "{project_id}"
# Project grants (files, or directories of *.json) every run of a task of this project loads,
# signed into its inputs; `craik grants new --project` writes into the first directory here.
grants = [".craik-grants"]
# Where the project's documentation lives (globs relative to the repository root; each
# must match a file). `craik project show` checks them; `craik case build` lists them.
{docs_line}
# Paths no write capability and no command may change, whatever the label.
immutable_paths = ["{DEFAULT_IMMUTABLE}"]
# The repository the profile describes (default: this file's directory).
# repository = "."
# What case files look at, and never look at.
discovery_include = ["**"]
discovery_exclude = ["target/**", "node_modules/**"]
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_template_loads_and_every_section_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = load(&write(
            dir.path(),
            &template(None, "strict", "project_x", None),
        ))
        .unwrap();
        assert_eq!(loaded.config.run.profile.as_deref(), Some("strict"));
        assert_eq!(loaded.config.project.immutable_paths, vec!["docs/adr/**"]);
        assert!(loaded.home().is_none());
    }

    #[test]
    fn errors_name_the_file_line_key_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("[run]\nprofile = \"lax\"\n", "run.profile `lax`"),
            (
                "[run]\ntoolchains = [\"cobol\"]\n",
                "run.toolchains[0] `cobol`",
            ),
            (
                "\n\n[run]\nprofle = \"strict\"\n",
                ":4: unknown field `profle`",
            ),
            (
                "[project]\nimmutable_paths = [\"../x\"]\n",
                "project.immutable_paths[0] `../x`",
            ),
            (
                "[project]\nimmutable_paths = [\"/etc/**\"]\n",
                "immutable_paths[0] `/etc/**`",
            ),
            (
                "[[policy.custom]]\npath = \"p\"\nsha256 = \"XYZ\"\n",
                "policy.custom[0].sha256 `XYZ`",
            ),
            ("operator = \"a\\u001bb\"\n", "operator"),
        ];
        for (text, expected) in cases {
            let path = write(dir.path(), text);
            let err = load(&path).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.contains(FILE_NAME), "{err}");
        }
    }

    #[test]
    fn issue_31_custom_flags_add_to_the_pinned_set_only_where_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let org = dir.path().join("org");
        let other = dir.path().join("other");
        for d in [&org, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("p.cedar"), "// none\n").unwrap();
        }
        let path = dir.path().join("craik.toml");
        std::fs::write(&path, "[[policy.custom]]\npath = \"org\"\n").unwrap();
        pin(&load(&path).unwrap()).unwrap();
        let pinned = load(&path).unwrap();
        // Naming the pinned directory (another spelling) is the pinned one, pin checked.
        let again = dir.path().join("./org");
        assert_eq!(pinned.custom_set(&[again]).unwrap(), vec![org.clone()]);
        // Another directory neither replaces the pinned set nor is added.
        let err = pinned
            .custom_set(std::slice::from_ref(&other))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pins the custom policy set"), "{err}");
        // A pinned directory edited afterwards is refused whatever the flags say.
        std::fs::write(org.join("p.cedar"), "// edited\n").unwrap();
        let err = pinned
            .custom_set(std::slice::from_ref(&org))
            .unwrap_err()
            .to_string();
        assert!(err.contains("changed since it was pinned"), "{err}");
        std::fs::write(org.join("p.cedar"), "// none\n").unwrap();
        // Where the config allows extras, the flag adds to the pinned set.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text = format!("[policy]\nallow_extra_custom = true\n\n{text}");
        std::fs::write(&path, text).unwrap();
        let allowing = load(&path).unwrap();
        assert_eq!(
            allowing.custom_set(std::slice::from_ref(&other)).unwrap(),
            vec![org, other]
        );
    }

    #[test]
    fn a_changed_custom_dir_is_refused_until_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let policies = dir.path().join("org");
        std::fs::create_dir(&policies).unwrap();
        std::fs::write(policies.join("a.cedar"), "// one").unwrap();
        let path = write(dir.path(), "# keep me\n[[policy.custom]]\npath = \"org\"\n");
        let unpinned = load(&path).unwrap();
        assert!(
            unpinned
                .custom_dirs()
                .unwrap_err()
                .to_string()
                .contains("not pinned")
        );
        let pins = pin(&unpinned).unwrap();
        assert_eq!(pins.len(), 1);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# keep me\n"), "{text}");
        let pinned = load(&path).unwrap();
        assert_eq!(pinned.custom_dirs().unwrap(), vec![dir.path().join("org")]);
        std::fs::write(policies.join("a.cedar"), "// two").unwrap();
        let err = load(&path).unwrap().custom_dirs().unwrap_err().to_string();
        assert!(err.contains("changed since it was pinned"), "{err}");
        // Renaming the directory does not change its digest.
        let before = dir_digest(&policies).unwrap();
        let moved = dir.path().join("renamed");
        std::fs::rename(&policies, &moved).unwrap();
        assert_eq!(dir_digest(&moved).unwrap(), before);
    }

    #[test]
    fn a_link_inside_a_custom_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("x.cedar")).unwrap();
        assert!(
            dir_digest(dir.path())
                .unwrap_err()
                .contains("links are refused")
        );
    }
}
