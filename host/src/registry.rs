//! The runner registry (issue 22): which runners `--runner NAME` may name, how each is
//! started, what it receives, and the pin its adapter is checked against before every launch.
//!
//! Three layers, later ones overriding earlier ones by id: the built-in registry (the shipped
//! runners, compiled in), the home's `HOME/runners.toml` (the operator's), and the project's
//! `runners.toml` beside its `craik.toml` (a repository is runner-writable, so a project file
//! may only narrow: never more trust than the home allows, never an environment variable the
//! home did not allow, never a read path outside the project). Every entry is checked when
//! its file loads: an unknown backend or key, a missing exact version for `npx`/`uvx`, a
//! `CRAIK_*` variable, a matrix claiming more than its trust permits, are refused naming the
//! file, line, key and value. This module reads and checks; it never starts a process
//! (launching is [`crate::launch`]'s, installing [`install`]'s).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use craik_contracts::{
    Check, Checker, RunnerCapability, RunnerCapabilityMatrix, RunnerCapabilitySupport,
    RunnerGrantPosture, RunnerMetadata, RunnerMode, RunnerTrustLevel, RunnerTrustProfile,
    Truncated,
};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::Error;

mod edit;
mod package;
mod pin;
mod tree;
pub use edit::{NewEntry, add_to_text, remove_from_text};
pub use pin::{
    Launch, PIN_FILE, Pin, RunnerRecord, digest_file, digest_reader, entry_dir, install, read_pin,
    resolve_command, uninstall, verify,
};
pub use tree::{TreeStat, digest as tree_digest};

/// The registry file's name, in the home and beside a project's `craik.toml`.
pub const FILE_NAME: &str = "runners.toml";
/// Largest registry or matrix file read.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// The handoff adapters a `cli` entry may wrap a CLI with.
pub const CLI_ADAPTERS: &[&str] = &["codex", "claude", "gemini"];
/// The model-provider APIs the provider adapter speaks.
pub const PROVIDER_APIS: &[&str] = &["openai-responses", "anthropic-messages", "chat-completions"];
/// Capabilities a `low` trust runner may mark `supported` (everything else at most
/// `prompt-handoff`): nothing that writes, runs or reaches out.
pub const LOW_TRUST_SUPPORTED: &[&str] = &[
    "repo.read",
    "memory.read",
    "memory.propose",
    "git.diff_check",
];
/// Capabilities (and families) only a `high` trust runner may mark `supported`.
pub const HIGH_TRUST_ONLY: &[&str] = &["git.push", "git.force_push", "github", "net"];
/// Variables Craik sets itself for an adapter: never passed from the operator's environment.
const SET_BY_CRAIK: &[&str] = &["PATH", "HOME", "LANG"];

/// How a runner is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A wrapped agent CLI behind a shipped handoff adapter (`adapter`: codex, claude, gemini).
    Cli,
    /// The shipped model-provider adapter (`api`, `model`).
    Provider,
    /// An npm adapter package (`package = "@scope/pkg@1.2.3"`), installed offline from a local
    /// tarball and run with `node` (not `npx`: see `registry/package.rs`).
    Npx,
    /// A Python adapter package (`package = "pkg==1.2.3"`), installed offline from a local
    /// wheel and run with `python3` (not `uvx`: see `registry/package.rs`).
    Uvx,
    /// Any executable speaking docs/protocol.md.
    Program,
    /// The deterministic fixture runner inside Craik (built-in only).
    #[serde(skip_deserializing)]
    InProcess,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cli => "cli",
            Self::Provider => "provider",
            Self::Npx => "npx",
            Self::Uvx => "uvx",
            Self::Program => "program",
            Self::InProcess => "in-process",
        }
    }
}

/// How what an entry names gets onto the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Install {
    /// Already installed where `command` names it; the pin is of that file.
    #[default]
    Installed,
    /// Copied (or, for a package, fetched) into `HOME/runners/<id>/` by `craik runners
    /// install`; runs from there.
    Cache,
    /// A directory shipped with its dependencies (`source`); the pin covers the whole tree.
    Prebundled,
}

impl Install {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Installed => "installed",
            Self::Cache => "cache",
            Self::Prebundled => "prebundled",
        }
    }
}

/// Which layer an entry comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "file", rename_all = "lowercase")]
pub enum Origin {
    Builtin,
    Home(PathBuf),
    Project(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Builtin => f.write_str("built-in"),
            Self::Home(p) => write!(f, "home ({})", p.display()),
            Self::Project(p) => write!(f, "project ({})", p.display()),
        }
    }
}

// ---- the file as written ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    /// The most trust any entry of this file may claim.
    #[serde(default)]
    max_trust: Option<Spanned<RunnerTrustLevel>>,
    /// Home file only: variables a project file's entries may ask for.
    #[serde(default)]
    allow_project_env: Vec<Spanned<String>>,
    #[serde(default)]
    runner: BTreeMap<String, Spanned<RawEntry>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    name: Option<String>,
    backend: Spanned<Backend>,
    #[serde(default)]
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<Spanned<String>>,
    #[serde(default)]
    scenario_arg: Option<String>,
    #[serde(default)]
    adapter: Option<Spanned<String>>,
    #[serde(default)]
    api: Option<Spanned<String>>,
    #[serde(default)]
    model: Option<Spanned<String>>,
    /// `cli`: the model endpoint the CLI talks to (its base URL).
    #[serde(default)]
    endpoint: Option<Spanned<String>>,
    /// `cli`: the name of the variable in Craik's environment holding the CLI's key.
    #[serde(default)]
    key_env: Option<Spanned<String>>,
    /// `cli`: further flags for the CLI, from its allow-list (`craik_contracts::agent_cli`).
    #[serde(default)]
    cli_args: Vec<Spanned<String>>,
    #[serde(default)]
    package: Option<Spanned<String>>,
    #[serde(default)]
    version: Option<Spanned<String>>,
    #[serde(default)]
    source: Option<Spanned<String>>,
    #[serde(default)]
    install: Option<Spanned<Install>>,
    #[serde(default)]
    matrix: Option<Spanned<String>>,
    #[serde(default)]
    capabilities: Option<Spanned<RawInline>>,
    #[serde(default)]
    env: Vec<Spanned<String>>,
    #[serde(default)]
    read: Vec<Spanned<String>>,
}

/// An inline capability matrix.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInline {
    /// The runner id the adapter announces in its handshake (default `runner_<id>`).
    #[serde(default)]
    runner_id: Option<String>,
    #[serde(default)]
    mode: Option<RunnerMode>,
    trust: Spanned<RunnerTrustLevel>,
    #[serde(default)]
    posture: Option<RunnerGrantPosture>,
    #[serde(default)]
    boundary: Option<String>,
    #[serde(default)]
    support: BTreeMap<String, Spanned<RunnerCapabilitySupport>>,
}

// ---- the registry as loaded ----

/// One runner a run may name.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: String,
    pub name: String,
    pub backend: Backend,
    pub origin: Origin,
    /// The program (`program`), the wrapped CLI (`cli`), the package's binary (`npx`/`uvx`).
    pub command: Option<String>,
    pub args: Vec<String>,
    /// The flag a fixture scenario is passed with (`--fixture`), when the run has one.
    pub scenario_arg: Option<String>,
    /// `cli`: the handoff adapter (codex, claude, gemini).
    pub adapter: Option<String>,
    /// `provider`: API and model; `cli`: the model the CLI is told to use (optional).
    pub api: Option<String>,
    pub model: Option<String>,
    /// `cli`: the model endpoint (base URL) the CLI is pointed at, from the home's registry
    /// only. (Left out of the definition digest when absent, so entries installed before it
    /// existed keep their digest.)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `cli`: the variable of Craik's environment holding the CLI's key (a name; the value
    /// reaches only the adapter, which hands it to the CLI under the name the CLI reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// `cli`: further CLI flags, checked against the CLI's allow-list, as passed on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cli_args: Vec<String>,
    /// `npx`/`uvx`: the package spec with its exact version.
    pub package: Option<String>,
    /// The exact version (from `package`, or `version`).
    pub version: Option<String>,
    /// A local package file (`npx`/`uvx`) or the prebundled directory, absolute.
    pub source: Option<PathBuf>,
    pub install: Install,
    /// Where the matrix came from (`shipped:NAME`, a file, `inline`).
    pub matrix_source: String,
    pub matrix: RunnerCapabilityMatrix,
    /// Variable names passed from the operator's environment (nothing else is).
    pub env: Vec<String>,
    /// Extra paths the adapter may read.
    pub read: Vec<PathBuf>,
}

impl Entry {
    /// The variables of Craik's environment passed to the adapter: `env`, then a `cli`
    /// entry's `key_env` (the adapter hands its value to the CLI under the name the CLI reads).
    pub fn adapter_env(&self) -> Vec<String> {
        let mut env = self.env.clone();
        if let Some(k) = &self.key_env
            && !env.contains(k)
        {
            env.push(k.clone());
        }
        env
    }

    /// A `cli` entry's configuration as the handoff adapter's arguments: `--endpoint URL`,
    /// `--model MODEL`, `--key-env NAME` (a name, never a value) and `--cli-arg ARG` for each
    /// allowed flag. Empty for other backends.
    pub fn cli_config_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.backend != Backend::Cli {
            return args;
        }
        for (flag, value) in [
            ("--endpoint", &self.endpoint),
            ("--model", &self.model),
            ("--key-env", &self.key_env),
        ] {
            if let Some(v) = value {
                args.push(flag.to_owned());
                args.push(v.clone());
            }
        }
        for a in &self.cli_args {
            args.push("--cli-arg".to_owned());
            args.push(a.clone());
        }
        args
    }
}

/// The merged registry.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
    /// The files loaded (home, project), for reports.
    pub files: Vec<PathBuf>,
}

/// What a home file allows the project file beneath it.
#[derive(Debug, Clone)]
struct Allowance {
    max_trust: RunnerTrustLevel,
    env: Vec<String>,
}

impl Registry {
    /// The built-in registry only.
    pub fn builtin() -> Result<Self, Error> {
        let mut entries = BTreeMap::new();
        for entry in builtin_entries()? {
            entries.insert(entry.id.clone(), entry);
        }
        Ok(Self {
            entries,
            files: Vec::new(),
        })
    }

    /// Built-ins, then `home/runners.toml`, then `project_dir/runners.toml` (each if it
    /// exists; the project file only when it is not the home's).
    pub fn load(home: &Path, project_dir: Option<&Path>) -> Result<Self, Error> {
        Self::load_with(home, project_dir, None)
    }

    /// [`Registry::load`] with `candidate` (a file and the text it would get) read in place of
    /// that file: how `craik runners add` checks an edit before writing it.
    pub fn load_with(
        home: &Path,
        project_dir: Option<&Path>,
        candidate: Option<(&Path, &str)>,
    ) -> Result<Self, Error> {
        let text_of = |file: &Path| -> Option<String> {
            candidate
                .filter(|(c, _)| *c == file)
                .map(|(_, t)| (*t).to_owned())
        };
        let mut registry = Self::builtin()?;
        let home_file = home.join(FILE_NAME);
        let mut allowance = Allowance {
            max_trust: RunnerTrustLevel::High,
            env: Vec::new(),
        };
        if home_file.is_file() || text_of(&home_file).is_some() {
            let (entries, allowed) = load_file(&home_file, text_of(&home_file), None, &registry)?;
            allowance = allowed;
            registry.files.push(home_file.clone());
            registry.entries.extend(entries);
        }
        if let Some(dir) = project_dir {
            let file = dir.join(FILE_NAME);
            let same = match (file.canonicalize(), home_file.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if (file.is_file() || text_of(&file).is_some()) && !same {
                let (entries, _) = load_file(&file, text_of(&file), Some(&allowance), &registry)?;
                registry.files.push(file);
                registry.entries.extend(entries);
            }
        }
        Ok(registry)
    }

    /// Every path the registry reads or names as something run or trusted: its files, and
    /// each entry's matrix file, command, package source and read paths. A run keeps the ones
    /// in its workspace immutable (outside testing round 8: a project entry's matrix file and
    /// a `cli` entry's pinned CLI in the workspace were rewritten by a command mid-run).
    pub fn input_paths(&self) -> Vec<PathBuf> {
        let mut paths = self.files.clone();
        for e in self.entries.values() {
            let matrix = Path::new(&e.matrix_source);
            if matrix.is_absolute() {
                paths.push(matrix.to_path_buf());
            }
            if let Some(command) = e.command.as_deref().map(Path::new)
                && command.is_absolute()
            {
                paths.push(command.to_path_buf());
            }
            paths.extend(e.source.iter().cloned());
            paths.extend(e.read.iter().filter(|p| p.is_absolute()).cloned());
        }
        paths
    }

    /// Every entry, by id.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// The registered ids.
    pub fn ids(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    /// One entry; an unknown id lists the registered ones.
    pub fn get(&self, id: &str) -> Result<&Entry, Error> {
        self.entries.get(id).ok_or_else(|| {
            Error::usage(format!(
                "unknown runner `{}`; registered runners: {} (or `provider:API:MODEL`, `adapter:PROGRAM`; add one with `craik runners add`)",
                Truncated(id),
                self.ids().join(", ")
            ))
        })
    }

    /// Whether `id` is registered.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }
}

/// A runner id: lowercase ASCII letters, digits, `-`, `_`, `.`, starting with a letter or
/// digit, at most 64 bytes.
pub fn id_problem(id: &str) -> Option<&'static str> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && id.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        });
    (!ok).then_some(
        "a runner id is 1 to 64 lowercase ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit",
    )
}

fn trust_rank(level: RunnerTrustLevel) -> u8 {
    match level {
        RunnerTrustLevel::Low => 0,
        RunnerTrustLevel::Medium => 1,
        RunnerTrustLevel::High => 2,
    }
}

/// Whether capability `name` is `family` or one of its members, or a family holding it.
fn overlaps(name: &str, family: &str) -> bool {
    let within = |a: &str, b: &str| a == b || a.strip_prefix(b).is_some_and(|r| r.starts_with('.'));
    within(name, family) || within(family, name)
}

/// Why `matrix` claims more than its own trust level permits (`None`: it does not).
pub fn trust_problem(matrix: &RunnerCapabilityMatrix) -> Option<(String, String)> {
    let level = matrix.trust.level;
    for c in &matrix.capabilities {
        // A capability or family exactly as the kernel spells it: `Git.Push` or `git.push `
        // would pass a check of `git.push` and mean nothing (outside testing round 8).
        if let Some(why) = craik_kernel::envelope_entry_problem(&c.name) {
            return Some((c.name.clone(), why));
        }
        if c.support != RunnerCapabilitySupport::Supported {
            continue;
        }
        let refused = match level {
            RunnerTrustLevel::Low => !LOW_TRUST_SUPPORTED.contains(&c.name.as_str()),
            RunnerTrustLevel::Medium => HIGH_TRUST_ONLY.iter().any(|f| overlaps(&c.name, f)),
            RunnerTrustLevel::High => false,
        };
        if refused {
            let allowed = match level {
                RunnerTrustLevel::Low => format!(
                    "a `low` trust runner may be `supported` only for {}",
                    LOW_TRUST_SUPPORTED.join(", ")
                ),
                _ => format!(
                    "only a `high` trust runner may be `supported` for {}",
                    HIGH_TRUST_ONLY.join(", ")
                ),
            };
            return Some((
                c.name.clone(),
                format!(
                    "`supported` on a `{}` trust runner claims more than its trust allows: {allowed} (use `prompt-handoff` or `unsupported`)",
                    level.as_str()
                ),
            ));
        }
    }
    None
}

/// Why `name` may not be passed to an adapter (`None`: it may).
pub fn env_problem(name: &str) -> Option<&'static str> {
    if let Some(why) = craik_contracts::agent_cli::variable_name_problem(name) {
        Some(why)
    } else if name.starts_with("CRAIK_") {
        Some("Craik's own variables (`CRAIK_*`) never reach an adapter")
    } else if SET_BY_CRAIK.contains(&name) {
        Some("Craik sets PATH, HOME and LANG for the adapter itself")
    } else if name.starts_with("LD_") || name.starts_with("DYLD_") {
        Some("loader variables (`LD_*`) are never passed")
    } else {
        None
    }
}

/// `@scope/pkg@1.2.3` → `1.2.3`; a range, tag or missing version is an error.
pub fn npm_version(spec: &str) -> Result<String, String> {
    let (name, version) = match spec.strip_prefix('@') {
        Some(rest) => rest
            .rsplit_once('@')
            .map(|(n, v)| (format!("@{n}"), v))
            .ok_or("no `@VERSION`")?,
        None => spec
            .split_once('@')
            .map(|(n, v)| (n.to_owned(), v))
            .ok_or("no `@VERSION`")?,
    };
    if name.is_empty() || name == "@" || (name.starts_with('@') && !name.contains('/')) {
        return Err("expected `pkg@1.2.3` or `@scope/pkg@1.2.3`".into());
    }
    exact_version(version).map(|()| version.to_owned())
}

/// `pkg==1.2.3` → `1.2.3`.
pub fn pypi_version(spec: &str) -> Result<String, String> {
    let (name, version) = spec.split_once("==").ok_or("no `==VERSION`")?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("expected `pkg==1.2.3`".into());
    }
    exact_version(version).map(|()| version.to_owned())
}

/// An exact version: `MAJOR.MINOR.PATCH` with an optional `-pre`/`+build` (or a PEP 440
/// suffix such as `rc1`, `.post1`), never a range, wildcard or tag.
fn exact_version(v: &str) -> Result<(), String> {
    let mut parts = v.splitn(3, '.');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let (major, minor, rest) = (parts.next(), parts.next(), parts.next());
    let patch_ok = rest.is_some_and(|r| {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0
            && r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
    });
    if numeric(major) && numeric(minor) && patch_ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not an exact version (expected `1.2.3`; no ranges, wildcards or tags)",
            Truncated(v)
        ))
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or_default().matches('\n').count() + 1
}

/// A problem at `span` of `file`: `FILE:LINE: KEY `VALUE`: WHY`.
fn located(file: &Path, text: &str, span: std::ops::Range<usize>, key: &str, why: &str) -> Error {
    let value = text.get(span.clone()).unwrap_or_default();
    Error::invalid(
        format!(
            "{}:{}: {key} {}: {why}",
            file.display(),
            line_of(text, span.start),
            shown_value(value)
        ),
        Vec::new(),
    )
}

fn shown_value(raw: &str) -> String {
    let raw = raw.trim();
    let raw = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    let first = raw.lines().next().unwrap_or_default();
    let cut = if first.len() < raw.len() {
        format!("{first} …")
    } else {
        first.to_owned()
    };
    format!(
        "`{}`",
        craik_contracts::one_line(&Truncated(&cut).to_string())
    )
}

/// The key a parse error's span sits at: the `key =` on its line under the nearest
/// `[table]` header above it.
fn key_at(text: &str, offset: usize) -> String {
    let upto = text.get(..offset).unwrap_or_default();
    let start = upto.rfind('\n').map_or(0, |i| i + 1);
    let line = text
        .get(start..)
        .and_then(|l| l.lines().next())
        .unwrap_or_default();
    let header = upto
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_owned())
        .filter(|k| !k.starts_with('['));
    match (header, key) {
        (Some(h), Some(k)) => format!("{h}.{k}"),
        (Some(h), None) => h,
        (None, Some(k)) => k,
        (None, None) => "(top level)".into(),
    }
}

/// Loads one registry file; `allowance` is `Some` for a project file (what its home allows).
fn load_file(
    file: &Path,
    given: Option<String>,
    allowance: Option<&Allowance>,
    below: &Registry,
) -> Result<(BTreeMap<String, Entry>, Allowance), Error> {
    let text = match given {
        Some(text) => text,
        None => {
            let bytes = crate::fsio::read_bounded(file, MAX_FILE_BYTES)
                .map_err(|e| Error::usage(format!("{}: {e}", file.display())))?;
            String::from_utf8(bytes)
                .map_err(|_| Error::invalid(format!("{}: not UTF-8", file.display()), Vec::new()))?
        }
    };
    let raw: RawFile = toml::from_str(&text).map_err(|e| {
        let message = e.message().replace('\n', " ");
        match e.span() {
            Some(span) => {
                let key = key_at(&text, span.start);
                located(file, &text, span, &key, &message)
            }
            None => Error::invalid(format!("{}: {message}", file.display()), Vec::new()),
        }
    })?;
    let dir = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let at =
        |span: std::ops::Range<usize>, key: &str, why: &str| located(file, &text, span, key, why);
    let home_max = allowance.map_or(RunnerTrustLevel::High, |a| a.max_trust);
    let max_trust = match &raw.max_trust {
        Some(m) if trust_rank(*m.get_ref()) > trust_rank(home_max) => {
            return Err(at(
                m.span(),
                "max_trust",
                &format!(
                    "a project registry may only narrow: the home allows at most `{}`",
                    home_max.as_str()
                ),
            ));
        }
        Some(m) => *m.get_ref(),
        None => home_max,
    };
    if allowance.is_some()
        && let Some(first) = raw.allow_project_env.first()
    {
        return Err(at(
            first.span(),
            "allow_project_env",
            "only the home's runners.toml says what a project may ask for",
        ));
    }
    let mut allowed_env = Vec::new();
    for (i, name) in raw.allow_project_env.iter().enumerate() {
        if let Some(why) = env_problem(name.get_ref()) {
            return Err(at(name.span(), &format!("allow_project_env[{i}]"), why));
        }
        allowed_env.push(name.get_ref().clone());
    }
    let mut entries = BTreeMap::new();
    for (id, spanned) in &raw.runner {
        let key = |k: &str| format!("runner.{id}.{k}");
        if let Some(why) = id_problem(id) {
            return Err(Error::invalid(
                format!(
                    "{}:{}: runner {}: {why}",
                    file.display(),
                    line_of(&text, spanned.span().start),
                    shown_value(id)
                ),
                Vec::new(),
            ));
        }
        // A repository may not define what `--runner fixture` (or any shipped id) means: an
        // operator reading `--runner codex` in a run's record must get the shipped one or the
        // home's.
        if allowance.is_some() && is_builtin_id(id) {
            return Err(at(
                spanned.span(),
                &format!("runner.{id}"),
                &format!(
                    "a project registry may not override the built-in runner `{id}`; choose another id"
                ),
            ));
        }
        let r = spanned.get_ref();
        let backend = *r.backend.get_ref();
        let need = |v: &Option<Spanned<String>>, k: &str, why: &str| -> Result<String, Error> {
            v.as_ref().map(|s| s.get_ref().clone()).ok_or_else(|| {
                at(
                    r.backend.span(),
                    &key("backend"),
                    &format!("needs `{k}`: {why}"),
                )
            })
        };
        let refuse_key = |v: &Option<Spanned<String>>, k: &str| -> Result<(), Error> {
            match v {
                Some(s) => Err(at(
                    s.span(),
                    &key(k),
                    &format!("not a key of a `{}` entry", backend.as_str()),
                )),
                None => Ok(()),
            }
        };
        let install = r
            .install
            .as_ref()
            .map_or(Install::Installed, |i| *i.get_ref());
        let resolve = |p: &str| {
            let path = PathBuf::from(p);
            if path.is_absolute() {
                path
            } else {
                dir.join(path)
            }
        };
        let mut package = None;
        let mut version = r.version.as_ref().map(|v| v.get_ref().clone());
        let mut adapter = None;
        let (mut api, mut model) = (None, None);
        match backend {
            Backend::Program => {
                need(&r.command, "command", "the adapter program")?;
                refuse_key(&r.adapter, "adapter")?;
                refuse_key(&r.api, "api")?;
                refuse_key(&r.package, "package")?;
            }
            Backend::Cli => {
                let name = need(
                    &r.adapter,
                    "adapter",
                    &format!(
                        "the handoff adapter wrapping the CLI ({})",
                        CLI_ADAPTERS.join(", ")
                    ),
                )?;
                if !CLI_ADAPTERS.contains(&name.as_str())
                    && let Some(s) = &r.adapter
                {
                    return Err(at(
                        s.span(),
                        &key("adapter"),
                        &format!("one of {}", CLI_ADAPTERS.join(", ")),
                    ));
                }
                adapter = Some(name);
                refuse_key(&r.api, "api")?;
                refuse_key(&r.package, "package")?;
            }
            Backend::Provider => {
                let a = need(&r.api, "api", &PROVIDER_APIS.join(", "))?;
                if !PROVIDER_APIS.contains(&a.as_str())
                    && let Some(s) = &r.api
                {
                    return Err(at(
                        s.span(),
                        &key("api"),
                        &format!("one of {}", PROVIDER_APIS.join(", ")),
                    ));
                }
                api = Some(a);
                model = Some(
                    r.model
                        .as_ref()
                        .map(|m| m.get_ref().clone())
                        .filter(|m| !m.trim().is_empty())
                        .ok_or_else(|| {
                            at(
                                r.backend.span(),
                                &key("backend"),
                                "needs `model`: the provider's model name",
                            )
                        })?,
                );
                refuse_key(&r.command, "command")?;
                refuse_key(&r.package, "package")?;
            }
            Backend::Npx | Backend::Uvx => {
                let spec = r.package.as_ref().ok_or_else(|| {
                    at(
                        r.backend.span(),
                        &key("backend"),
                        if backend == Backend::Npx {
                            "needs `package` with an exact version (`@scope/pkg@1.2.3`)"
                        } else {
                            "needs `package` with an exact version (`pkg==1.2.3`)"
                        },
                    )
                })?;
                let parsed = if backend == Backend::Npx {
                    npm_version(spec.get_ref())
                } else {
                    pypi_version(spec.get_ref())
                };
                let v = parsed.map_err(|why| {
                    at(
                        spec.span(),
                        &key("package"),
                        &format!("a version pin is required: {why}"),
                    )
                })?;
                if let Some(given) = &r.version
                    && *given.get_ref() != v
                {
                    return Err(at(
                        given.span(),
                        &key("version"),
                        &format!("differs from the package's pinned `{v}`"),
                    ));
                }
                version = Some(v);
                package = Some(spec.get_ref().clone());
                refuse_key(&r.adapter, "adapter")?;
                refuse_key(&r.api, "api")?;
                if install == Install::Prebundled
                    && let Some(i) = &r.install
                {
                    return Err(at(
                        i.span(),
                        &key("install"),
                        "an `npx`/`uvx` package is always installed into `HOME/runners/ID/pkg/` by `craik runners install` (`cache` or `installed`)",
                    ));
                }
            }
            Backend::InProcess => {}
        }
        // What the CLI is told: its endpoint, model, key variable and further flags. Only a
        // `cli` entry has them, and only the operator's (home) file gives them: a repository
        // must not point the CLI, and the key with it, at another endpoint (issue 32).
        let mut endpoint = None;
        let mut key_env = None;
        let mut cli_args = Vec::new();
        if backend == Backend::Cli {
            let home_only = |span: std::ops::Range<usize>, k: &str| {
                at(
                    span,
                    &key(k),
                    "a project registry may not configure a CLI's endpoint, model, key or flags: only the home's runners.toml does",
                )
            };
            // Its adapter's own options come from the fields above alone: an `args` entry
            // could name another program as the CLI past its pin (outside testing round r32:
            // `--cli /bin/sh` ran the prompt as a script), and a variable (NODE_OPTIONS,
            // CODEX_HOME, …) could load code outside the pin or a configuration outside the
            // CLI's private home.
            if let Some(first) = r.args.first() {
                return Err(at(
                    first.span(),
                    &key("args[0]"),
                    "a `cli` entry takes no `args`: its CLI is configured by `endpoint`, `model`, `key_env` and `cli_args` (allow-listed)",
                ));
            }
            if let Some(first) = r.env.first() {
                return Err(at(
                    first.span(),
                    &key("env[0]"),
                    "a `cli` entry passes no variables to its CLI but its key (`key_env`): one such as NODE_OPTIONS or CODEX_HOME would load code outside the pin or a configuration outside the CLI's private home",
                ));
            }
            if let Some(a) = r.scenario_arg.as_deref().filter(|a| *a != "--fixture") {
                return Err(at(
                    spanned.span(),
                    &key("scenario_arg"),
                    &format!(
                        "`{}`: a `cli` entry's adapter takes its scenario as `--fixture`",
                        craik_contracts::Truncated(a)
                    ),
                ));
            }
            if allowance.is_some() {
                for (k, v) in [
                    ("endpoint", &r.endpoint),
                    ("model", &r.model),
                    ("key_env", &r.key_env),
                ] {
                    if let Some(v) = v {
                        return Err(home_only(v.span(), k));
                    }
                }
                if let Some(first) = r.cli_args.first() {
                    return Err(home_only(first.span(), "cli_args[0]"));
                }
            }
            if let Some(m) = &r.model {
                if let Some(why) = craik_contracts::agent_cli::model_problem(m.get_ref()) {
                    return Err(at(m.span(), &key("model"), why));
                }
                model = Some(m.get_ref().clone());
            }
            if let Some(e) = &r.endpoint {
                if let Some(why) = craik_contracts::agent_cli::endpoint_problem(e.get_ref()) {
                    return Err(at(e.span(), &key("endpoint"), why));
                }
                endpoint = Some(e.get_ref().clone());
            }
            if let Some(k) = &r.key_env {
                if let Some(why) = env_problem(k.get_ref()) {
                    return Err(at(k.span(), &key("key_env"), why));
                }
                key_env = Some(k.get_ref().clone());
            }
            let cli = adapter
                .as_deref()
                .and_then(craik_contracts::agent_cli::AgentCli::from_name);
            if let Some(cli) = cli {
                let given: Vec<String> = r.cli_args.iter().map(|a| a.get_ref().clone()).collect();
                cli_args =
                    craik_contracts::agent_cli::check_cli_args(cli, &given).map_err(|e| {
                        let span = r
                            .cli_args
                            .get(e.index)
                            .map_or_else(|| spanned.span(), Spanned::span);
                        at(span, &key(&format!("cli_args[{}]", e.index)), &e.why)
                    })?;
            }
        } else {
            for (k, v) in [("endpoint", &r.endpoint), ("key_env", &r.key_env)] {
                if let Some(v) = v {
                    return Err(at(
                        v.span(),
                        &key(k),
                        &format!(
                            "not a key of a `{}` entry (a `cli` entry's)",
                            backend.as_str()
                        ),
                    ));
                }
            }
            if let Some(first) = r.cli_args.first() {
                return Err(at(
                    first.span(),
                    &key("cli_args[0]"),
                    &format!(
                        "not a key of a `{}` entry (a `cli` entry's)",
                        backend.as_str()
                    ),
                ));
            }
        }
        if install == Install::Prebundled
            && r.source.is_none()
            && let Some(i) = &r.install
        {
            return Err(at(
                i.span(),
                &key("install"),
                "`prebundled` needs `source`, the bundle's directory",
            ));
        }
        if let Some(v) = &r.version
            && (v.get_ref().trim().is_empty() || v.get_ref().chars().any(char::is_control))
        {
            return Err(at(
                v.span(),
                &key("version"),
                "a version without control characters",
            ));
        }
        // A project file names files only inside the project (its matrix, its package or
        // bundle): nothing of the operator's machine is read on a repository's say-so.
        if allowance.is_some() {
            let outside = |v: &str| escapes(&dir, &resolve(v));
            if let Some(m) = &r.matrix
                && (m.get_ref().contains('/') || m.get_ref().ends_with(".json"))
                && outside(m.get_ref())
            {
                return Err(at(
                    m.span(),
                    &key("matrix"),
                    "a project registry may only name files inside the project",
                ));
            }
            if let Some(src) = &r.source
                && outside(src.get_ref())
            {
                return Err(at(
                    src.span(),
                    &key("source"),
                    "a project registry may only name files inside the project",
                ));
            }
        }
        // The matrix: a shipped one by name, a file, or inline; exactly one.
        let (matrix_source, mut matrix) = match (&r.matrix, &r.capabilities) {
            (Some(m), Some(_)) => {
                return Err(at(
                    m.span(),
                    &key("matrix"),
                    "give `matrix` or a `capabilities` table, not both",
                ));
            }
            (Some(m), None) => {
                matrix_named(m.get_ref(), &dir).map_err(|why| at(m.span(), &key("matrix"), &why))?
            }
            (None, Some(inline)) => (
                "inline".to_owned(),
                inline_matrix(id, inline.get_ref(), r.name.as_deref()),
            ),
            (None, None) => match backend {
                Backend::Cli => {
                    let name = adapter.clone().unwrap_or_default();
                    (format!("shipped:{name}"), crate::runners::matrix(&name)?)
                }
                Backend::Provider => (
                    "shipped:provider".to_owned(),
                    crate::runners::matrix("provider")?,
                ),
                _ => {
                    return Err(at(
                        spanned.span(),
                        &format!("runner.{id}"),
                        "needs `matrix` (a shipped matrix name or a craik.runner_capability_matrix file) or a `capabilities` table",
                    ));
                }
            },
        };
        let mut checker = Checker::new();
        matrix.check(&mut checker);
        if let Some(problem) = checker.into_problems().first() {
            let span = r
                .matrix
                .as_ref()
                .map_or_else(|| spanned.span(), Spanned::span);
            return Err(at(
                span,
                &key("matrix"),
                &format!("invalid matrix: {problem}"),
            ));
        }
        let trust_span = || {
            r.capabilities
                .as_ref()
                .map(|c| c.get_ref().trust.span())
                .or_else(|| r.matrix.as_ref().map(Spanned::span))
                .unwrap_or_else(|| spanned.span())
        };
        if trust_rank(matrix.trust.level) > trust_rank(max_trust) {
            return Err(at(
                trust_span(),
                &key(if r.capabilities.is_some() {
                    "capabilities.trust"
                } else {
                    "matrix"
                }),
                &format!(
                    "trust `{}` is more than this registry allows (max_trust `{}`)",
                    matrix.trust.level.as_str(),
                    max_trust.as_str()
                ),
            ));
        }
        if let Some((cap, why)) = trust_problem(&matrix) {
            let (span, k) = match r
                .capabilities
                .as_ref()
                .and_then(|c| c.get_ref().support.get(&cap))
            {
                Some(s) => (s.span(), key(&format!("capabilities.support.\"{cap}\""))),
                None => (trust_span(), key("matrix")),
            };
            return Err(at(span, &k, &format!("capability `{cap}`: {why}")));
        }
        // The environment: names only, never Craik's own; a project asks only for what the
        // home allows (or the entry it overrides already had).
        let overridden = below.entries.get(id);
        let mut env = Vec::new();
        for (i, name) in r.env.iter().enumerate() {
            let k = key(&format!("env[{i}]"));
            if let Some(why) = env_problem(name.get_ref()) {
                return Err(at(name.span(), &k, why));
            }
            if let Some(a) = allowance
                && !a.env.contains(name.get_ref())
                && !overridden.is_some_and(|o| o.env.contains(name.get_ref()))
            {
                return Err(at(
                    name.span(),
                    &k,
                    "a project registry may only narrow: the home's runners.toml does not allow this variable (`allow_project_env`)",
                ));
            }
            env.push(name.get_ref().clone());
        }
        if allowance.is_some()
            && let Some(o) = overridden
            && trust_rank(matrix.trust.level) > trust_rank(o.matrix.trust.level)
        {
            return Err(at(
                trust_span(),
                &key("matrix"),
                &format!(
                    "a project registry may only narrow: `{id}` has trust `{}` in the {}",
                    o.matrix.trust.level.as_str(),
                    o.origin
                ),
            ));
        }
        let mut read = Vec::new();
        for (i, p) in r.read.iter().enumerate() {
            let path = resolve(p.get_ref());
            if allowance.is_some() && escapes(&dir, &path) {
                return Err(at(
                    p.span(),
                    &key(&format!("read[{i}]")),
                    "a project registry may only name read paths inside the project",
                ));
            }
            read.push(path);
        }
        // What the matrix declares it passes, now the registry's list.
        matrix.runner.metadata.0.remove("env");
        if let Some(command) = &r.command
            && (command.get_ref().trim().is_empty()
                || command.get_ref().chars().any(char::is_control))
        {
            return Err(at(
                command.span(),
                &key("command"),
                "a program path or name without control characters",
            ));
        }
        let source = r.source.as_ref().map(|s| resolve(s.get_ref()));
        let origin = if allowance.is_some() {
            Origin::Project(file.to_path_buf())
        } else {
            Origin::Home(file.to_path_buf())
        };
        entries.insert(
            id.clone(),
            Entry {
                id: id.clone(),
                name: r.name.clone().unwrap_or_else(|| matrix.runner.name.clone()),
                backend,
                origin,
                // A path with a `/` is relative to the file (to the bundle for `prebundled`); a
                // bare name is looked up at install.
                command: r.command.as_ref().map(|c| {
                    let c = c.get_ref();
                    if c.contains('/') && install != Install::Prebundled {
                        resolve(c).display().to_string()
                    } else {
                        c.clone()
                    }
                }),
                args: r.args.iter().map(|a| a.get_ref().clone()).collect(),
                scenario_arg: r.scenario_arg.clone(),
                adapter,
                api,
                model,
                endpoint,
                key_env,
                cli_args,
                package,
                version,
                source,
                install,
                matrix_source,
                matrix,
                env,
                read,
            },
        );
    }
    Ok((
        entries,
        Allowance {
            max_trust,
            env: allowed_env,
        },
    ))
}

/// `fixture` (a shipped matrix) or a path to a `craik.runner_capability_matrix` file.
fn matrix_named(name: &str, dir: &Path) -> Result<(String, RunnerCapabilityMatrix), String> {
    if !name.contains('/') && !name.ends_with(".json") {
        return crate::runners::matrix(name)
            .map(|m| (format!("shipped:{name}"), m))
            .map_err(|e| e.message);
    }
    let path = if Path::new(name).is_absolute() {
        PathBuf::from(name)
    } else {
        dir.join(name)
    };
    let bytes = crate::fsio::read_bounded(&path, MAX_FILE_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    craik_contracts::decode_single::<RunnerCapabilityMatrix>(&bytes)
        .map(|m| (path.display().to_string(), m))
        .map_err(|problems| format!("{}: {}", path.display(), problems.join("; ")))
}

fn inline_matrix(id: &str, raw: &RawInline, name: Option<&str>) -> RunnerCapabilityMatrix {
    let runner_id = raw
        .runner_id
        .clone()
        .unwrap_or_else(|| format!("runner_{}", id.replace(['-', '.'], "_")));
    let capabilities: Vec<RunnerCapability> = raw
        .support
        .iter()
        .map(|(name, support)| RunnerCapability {
            name: name.clone(),
            support: *support.get_ref(),
            grant_required: true,
            notes: None,
        })
        .collect();
    RunnerCapabilityMatrix {
        schema: Default::default(),
        version: Default::default(),
        runner: RunnerMetadata {
            schema: Default::default(),
            version: Default::default(),
            id: runner_id,
            name: name.unwrap_or(id).to_owned(),
            adapter: id.to_owned(),
            adapter_version: "registry".into(),
            mode: raw.mode.unwrap_or(RunnerMode::Live),
            capabilities: capabilities.iter().map(|c| c.name.clone()).collect(),
            metadata: Default::default(),
        },
        trust: RunnerTrustProfile {
            level: *raw.trust.get_ref(),
            boundary: raw
                .boundary
                .clone()
                .unwrap_or_else(|| "declared in the runner registry".into()),
            default_grant_posture: raw.posture.unwrap_or(RunnerGrantPosture::DenyByDefault),
            requires_receipts: true,
            requires_redaction: true,
            notes: Vec::new(),
        },
        capabilities,
        policy_notes: Vec::new(),
    }
}

/// The environment variables a matrix names (`runner.metadata.env`).
pub(crate) fn matrix_env(matrix: &craik_contracts::RunnerCapabilityMatrix) -> Vec<String> {
    matrix
        .runner
        .metadata
        .0
        .get("env")
        .and_then(serde_json::Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The shipped provider adapter for `provider:API:MODEL` (an ad-hoc entry).
pub fn provider_entry(api: &str, model: &str) -> Result<Entry, Error> {
    if !PROVIDER_APIS.contains(&api) || model.trim().is_empty() {
        return Err(Error::usage(format!(
            "expected `provider:API:MODEL` (API: {})",
            PROVIDER_APIS.join(", ")
        )));
    }
    let matrix = crate::runners::matrix("provider")?;
    let env = matrix_env(&matrix);
    Ok(Entry {
        id: "provider".into(),
        name: matrix.runner.name.clone(),
        backend: Backend::Provider,
        origin: Origin::Builtin,
        command: None,
        args: Vec::new(),
        scenario_arg: None,
        adapter: None,
        api: Some(api.to_owned()),
        model: Some(model.to_owned()),
        endpoint: None,
        key_env: None,
        cli_args: Vec::new(),
        package: None,
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        source: None,
        install: Install::Installed,
        matrix_source: "shipped:provider".into(),
        matrix,
        env,
        read: Vec::new(),
    })
}

/// `sha256:` of an entry's whole definition as loaded (its JSON form: backend, which layer,
/// command, arguments, scenario flag, package, source, variable names, read paths, matrix):
/// what a run records so `craik runs resume` continues only under the same one. The layer's
/// file path is left out (the same home named `./h` or `/abs/h` is the same definition; the
/// paths an entry resolves are absolute already). Empty if it cannot be encoded (never: every
/// field is plain data).
pub fn definition_digest(entry: &Entry) -> String {
    use sha2::Digest as _;
    let layer = match entry.origin {
        Origin::Builtin => "builtin",
        Origin::Home(_) => "home",
        Origin::Project(_) => "project",
    };
    serde_json::to_value(entry)
        .and_then(|mut value| {
            if let Some(object) = value.as_object_mut() {
                object.insert("origin".into(), serde_json::Value::from(layer));
            }
            serde_json::to_vec(&value)
        })
        .map(|bytes| {
            format!(
                "sha256:{}",
                craik_kernel::to_hex(&sha2::Sha256::digest(&bytes))
            )
        })
        .unwrap_or_default()
}

/// Whether `id` is a shipped runner's (what [`builtin_entries`] registers).
fn is_builtin_id(id: &str) -> bool {
    id == "fixture" || id == "fixture-adapter" || CLI_ADAPTERS.contains(&id)
}

/// Whether `path` (absolute) leaves the project directory `dir`: lexically (`..`), or through
/// a link, for the part of it that exists now (a link that does not resolve counts as leaving).
fn escapes(dir: &Path, path: &Path) -> bool {
    let root = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let lexical = crate::fsio::lexical(path);
    if !(lexical.starts_with(dir) || lexical.starts_with(&root)) {
        return true;
    }
    // The longest part of it that is there (a link counts, followed or not).
    let mut existing = lexical.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return true,
        }
    }
    existing
        .canonicalize()
        .map_or(true, |real| !real.starts_with(&root))
}

/// The shipped runners as registry entries: one code path for every `--runner NAME`.
fn builtin_entries() -> Result<Vec<Entry>, Error> {
    let base = |id: &str, backend: Backend, matrix_name: &str| -> Result<Entry, Error> {
        let matrix = crate::runners::matrix(matrix_name)?;
        let env = matrix_env(&matrix);
        Ok(Entry {
            id: id.to_owned(),
            name: matrix.runner.name.clone(),
            backend,
            origin: Origin::Builtin,
            command: None,
            args: Vec::new(),
            scenario_arg: None,
            adapter: None,
            api: None,
            model: None,
            endpoint: None,
            key_env: None,
            cli_args: Vec::new(),
            package: None,
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            source: None,
            install: Install::Installed,
            matrix_source: format!("shipped:{matrix_name}"),
            matrix,
            env,
            read: Vec::new(),
        })
    };
    let mut entries = vec![base("fixture", Backend::InProcess, "fixture")?];
    let mut adapter = base("fixture-adapter", Backend::Program, "fixture")?;
    adapter.command = Some("craik-adapter-fixture".into());
    adapter.scenario_arg = Some("--fixture".into());
    entries.push(adapter);
    for cli in CLI_ADAPTERS {
        let mut e = base(cli, Backend::Cli, cli)?;
        e.adapter = Some((*cli).to_owned());
        e.command = Some((*cli).to_owned());
        e.scenario_arg = Some("--fixture".into());
        entries.push(e);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_22_shipped_matrices_keep_the_trust_rule() {
        for name in crate::runners::names() {
            let m = crate::runners::matrix(name).unwrap();
            assert_eq!(trust_problem(&m), None, "{name}");
        }
        let mut gemini = crate::runners::matrix("gemini").unwrap();
        gemini.capabilities.push(RunnerCapability {
            name: "shell.test".into(),
            support: RunnerCapabilitySupport::Supported,
            grant_required: true,
            notes: None,
        });
        assert_eq!(trust_problem(&gemini).unwrap().0, "shell.test");
        let mut codex = crate::runners::matrix("codex").unwrap();
        codex.capabilities.push(RunnerCapability {
            name: "git".into(),
            support: RunnerCapabilitySupport::Supported,
            grant_required: true,
            notes: None,
        });
        assert!(trust_problem(&codex).is_some());
    }

    #[test]
    fn issue_22_version_pins_are_exact() {
        assert_eq!(npm_version("@scope/pkg@1.2.3").unwrap(), "1.2.3");
        assert_eq!(npm_version("pkg@0.10.0-rc.1").unwrap(), "0.10.0-rc.1");
        assert_eq!(pypi_version("pkg==1.2.3").unwrap(), "1.2.3");
        for bad in [
            "pkg",
            "@scope/pkg",
            "pkg@^1.2.3",
            "pkg@latest",
            "pkg@1.x",
            "pkg@1.2",
            "@pkg@1.2.3",
            "pkg@~1.2.3",
        ] {
            assert!(npm_version(bad).is_err(), "{bad}");
        }
        for bad in ["pkg", "pkg>=1.2.3", "pkg==1.*", "pkg==", "==1.2.3"] {
            assert!(pypi_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn issue_22_env_names_exclude_craiks_own() {
        assert_eq!(env_problem("OPENAI_API_KEY"), None);
        for bad in [
            "CRAIK_HOME",
            "CRAIK_CONFIG",
            "PATH",
            "HOME",
            "LD_PRELOAD",
            "lower",
            "A-B",
            "",
            "X=1",
        ] {
            assert!(env_problem(bad).is_some(), "{bad}");
        }
    }
}
