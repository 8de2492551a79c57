//! What the operator's git will run or read as configuration in the workspace, asked of git
//! itself: a hooks directory and every hook in it (through its links), an included file, a
//! script behind an alias, a filter, a pager, an editor, an fsmonitor, a diff or merge driver.
//! The configuration itself is protected (`.git/`, a git directory under any name); what it
//! names must be too, or a command rewrites the script and the operator's next `git commit`
//! runs it unconfined (outside testing rounds 7 and 8; issue 30 item 2).
//!
//! Nothing here parses git's configuration syntax (a BOM, a comment ending in `\`, a key past
//! the first MiB were read differently by the parser this replaced): the machine's `git` is
//! run, hardened the way [`crate::case`] runs it (fixed `PATH`, scrubbed environment, no
//! pager, no prompt, no optional locks, a timeout), with the operator's configuration
//! variables (`HOME`, `XDG_CONFIG_HOME`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`,
//! `GIT_CONFIG_NOSYSTEM`): `git config --list --show-origin --show-scope -z` (all scopes,
//! includes followed) and `git rev-parse --path-format=absolute --git-path hooks`. Neither
//! runs a hook, an fsmonitor, a pager or a filter (tested with planted ones).
//!
//! Fail closed: when git cannot answer for a repository (no git, a configuration git refuses,
//! a repository owned by another user, output too large, a timeout), the survey says why and
//! the caller protects the whole work tree (the workspace, for the workspace's own
//! repository). What a hook script runs in turn (a wrapper hook, husky calling tracked
//! scripts) is not known without modelling a shell, which is not attempted: `craik run`
//! names the hooks it found and says so.
//!
//! Commands in values (aliases, filters, pagers) are split into shell words only to name more
//! paths to protect, never fewer: every word that may be a workspace file is protected.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Keys whose value is a path (a directory may be named): the rest are commands, and only the
/// regular files they name are taken.
const PATH_KEYS: &[&str] = &[
    "core.hookspath",
    "core.excludesfile",
    "core.attributesfile",
    "core.worktree",
    "include.path",
    "commit.template",
    "init.templatedir",
    "blame.ignorerevsfile",
    "mailmap.file",
];

/// Where git is looked for (as the case builder looks for it).
const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Largest output read from one git command; more fails closed.
const MAX_OUTPUT: u64 = 16 << 20;
/// How long one git command may take; longer fails closed (an include naming a FIFO).
const GIT_TIMEOUT: Duration = Duration::from_secs(20);
/// How deep includes git did not read (a condition false now) are followed.
const MAX_INCLUDE_DEPTH: usize = 8;
/// Most entries of a hooks directory looked at; more fails closed.
const MAX_HOOK_ENTRIES: usize = 4096;
/// Most symbolic links followed on one path (as the kernel's `MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;

/// The operator's environment variables that choose git's configuration files: the only ones
/// git is given besides the fixed hardening.
const PASSED: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
];

/// Why git could not say what it runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("cannot run git: {0}")]
    Spawn(String),
    #[error("`git {args}` failed: {why}")]
    Failed { args: String, why: String },
    #[error("`git {args}` printed more than {MAX_OUTPUT} bytes")]
    TooLarge { args: String },
    #[error("`git {args}` took longer than {}s", GIT_TIMEOUT.as_secs())]
    Timeout { args: String },
    #[error("`git {args}` printed a path or entry craik cannot read")]
    Unreadable { args: String },
    #[error("hooks directory `{0}` holds more than {MAX_HOOK_ENTRIES} entries")]
    TooManyHooks(String),
}

/// The variables git is asked with (the operator's, see [`PASSED`]).
#[derive(Debug, Clone, Default)]
pub struct GitEnv {
    vars: Vec<(&'static str, OsString)>,
}

impl GitEnv {
    /// Craik's own values of the variables: the operator's, who runs `git commit` next.
    pub fn from_process() -> Self {
        Self {
            vars: PASSED
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (*k, v)))
                .collect(),
        }
    }

    /// Given values (tests: a `HOME` of their own); names not in [`PASSED`] are dropped.
    pub fn with(vars: &[(&str, &Path)]) -> Self {
        Self {
            vars: PASSED
                .iter()
                .filter_map(|k| {
                    vars.iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| (*k, v.as_os_str().to_owned()))
                })
                .collect(),
        }
    }

    fn home(&self) -> Option<PathBuf> {
        self.vars
            .iter()
            .find(|(k, _)| *k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
    }
}

/// One hook git would run (or a file in the hooks directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Its name in the hooks directory (`pre-commit`).
    pub name: String,
    /// Where git finds it.
    pub path: PathBuf,
    /// What it resolves to when it is a link.
    pub target: Option<PathBuf>,
}

/// What git says it runs or reads, as workspace paths to protect.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// Workspace paths (relative to the root) git runs or reads as configuration.
    pub named: BTreeSet<PathBuf>,
    /// The hooks found (sample hooks left out).
    pub hooks: Vec<Hook>,
    /// Why git could not answer for the workspace's repository: everything is protected.
    pub unread: Vec<AskError>,
    /// Outside any repository, git could not be run: there is no configuration git reads
    /// and no git to run a hook; said at the start of a run, nothing protected for it.
    pub no_git: Option<AskError>,
}

impl Survey {
    /// Asks git about the repository `root` lies in (and the operator's configuration, read
    /// for every repository), and about the git directories whose `config` files `more`
    /// lists (nested repositories a manifest shows).
    pub fn of(root: &Path, more: Vec<PathBuf>, env: &GitEnv) -> Self {
        let mut survey = Self::default();
        let Some(root_real) = root.canonicalize().ok() else {
            survey.unread.push(AskError::Spawn(format!(
                "workspace `{}` cannot be resolved",
                root.display()
            )));
            return survey;
        };
        let places = Places {
            root,
            root_real: &root_real,
            home: env.home(),
        };
        let repository = in_repository(env, &root_real);
        let main = match ask(env, root, None, repository) {
            Ok(facts) => {
                survey.take(&places, &facts, env);
                facts.git_dir
            }
            Err(e @ AskError::Spawn(_)) if !repository => {
                survey.no_git = Some(e);
                None
            }
            Err(e) => {
                survey.unread.push(e);
                None
            }
        };
        for config in more {
            let Some(git_dir) = config.parent() else {
                continue;
            };
            let real = git_dir.canonicalize().ok();
            if real.is_some() && real == main {
                continue;
            }
            // A work tree's `.git` is asked from the work tree (git takes the current
            // directory as the top when given `--git-dir`); another git directory (bare, or
            // under another name) as itself.
            let facts = if git_dir
                .file_name()
                .is_some_and(|n| n.eq_ignore_ascii_case(".git"))
            {
                git_dir
                    .parent()
                    .map_or(Err(AskError::Spawn("no work tree".into())), |tree| {
                        ask(env, tree, None, true)
                    })
            } else {
                ask(env, git_dir, Some(git_dir), true)
            };
            match facts {
                Ok(facts) => survey.take(&places, &facts, env),
                Err(_) => {
                    // Fail closed for that repository: its work tree (or the git directory
                    // itself, for a bare one) is protected whole.
                    let tree = if git_dir
                        .file_name()
                        .is_some_and(|n| n.eq_ignore_ascii_case(".git"))
                    {
                        git_dir.parent().unwrap_or(git_dir)
                    } else {
                        git_dir
                    };
                    survey.named.extend(places.on_the_way(tree));
                }
            }
        }
        survey.hooks.sort_by(|a, b| a.path.cmp(&b.path));
        survey.hooks.dedup();
        survey
    }

    fn take(&mut self, places: &Places<'_>, facts: &Facts, env: &GitEnv) {
        let base = facts.top.as_deref().unwrap_or(places.root);
        let mut seen: BTreeSet<PathBuf> = facts
            .entries
            .iter()
            .filter_map(|e| e.origin.as_ref())
            .filter_map(|o| o.canonicalize().ok())
            .collect();
        let mut todo: Vec<(Entry, usize)> = facts.entries.iter().cloned().map(|e| (e, 0)).collect();
        while let Some((entry, depth)) = todo.pop() {
            let Some(value) = entry.value.as_deref() else {
                continue;
            };
            let key = entry.key.to_ascii_lowercase();
            let include =
                key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"));
            let path_key = include || PATH_KEYS.contains(&key.as_str());
            let words = if path_key {
                path_words(value, places.home.as_deref())
            } else {
                command_words(value, places.home.as_deref())
            };
            let dir = entry
                .origin
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(base);
            for word in words {
                // Includes are relative to the including file's directory; everything else
                // to the working tree's top (hooks, aliases, filters and pagers run there).
                let place = if word.is_absolute() {
                    word
                } else if include {
                    dir.join(&word)
                } else {
                    base.join(&word)
                };
                let found = places.on_the_way(&place);
                // A command's word is taken when it may be a file (or a link): one there that
                // is not a directory, or a name that may be created (a `/` or a `.` in it).
                let may_be_file = path_key
                    || match std::fs::symlink_metadata(&place) {
                        Ok(m) => !m.is_dir(),
                        Err(_) => {
                            let w = place.to_string_lossy();
                            let rel = w.strip_prefix(&*base.to_string_lossy()).unwrap_or(&w);
                            rel.trim_start_matches('/').contains(['/', '.'])
                        }
                    };
                if may_be_file {
                    self.named.extend(found);
                }
                // An include git did not read (its condition is false now, or it is new):
                // what it would name is asked of git too.
                if include
                    && depth < MAX_INCLUDE_DEPTH
                    && let Ok(real) = place.canonicalize()
                    && real.is_file()
                    && seen.insert(real.clone())
                {
                    match list_file(env, places.root, &real) {
                        Ok(more) => todo.extend(more.into_iter().map(|e| (e, depth + 1))),
                        Err(e) => {
                            self.unread.push(e);
                        }
                    }
                }
            }
        }
        if let Some(hooks) = &facts.hooks {
            self.named.extend(places.on_the_way(hooks));
            match hook_entries(hooks) {
                Ok(entries) => {
                    for (name, path) in entries {
                        let found = places.on_the_way(&path);
                        self.named.extend(found);
                        if !name.ends_with(".sample") {
                            let target = std::fs::symlink_metadata(&path)
                                .ok()
                                .filter(|m| m.file_type().is_symlink())
                                .and_then(|_| path.canonicalize().ok());
                            self.hooks.push(Hook { name, path, target });
                        }
                    }
                }
                Err(e) => self.unread.push(e),
            }
        }
    }

    /// The immutable paths for a command: `base` plus what git names; everything when git
    /// could not answer.
    pub fn immutable(&self, base: &craik_kernel::ImmutablePaths) -> craik_kernel::ImmutablePaths {
        if !self.unread.is_empty() {
            return craik_kernel::ImmutablePaths::everything();
        }
        if self.named.is_empty() {
            return base.clone();
        }
        let mut globs = base.globs().to_vec();
        globs.extend(globs_of(&self.named));
        craik_kernel::ImmutablePaths::new(&globs)
            .unwrap_or_else(|_| craik_kernel::ImmutablePaths::everything())
    }

    /// Whether `rel` (a workspace path) is protected by what git names (everything when git
    /// could not answer).
    pub fn covers(&self, rel: &str) -> bool {
        if !self.unread.is_empty() {
            return true;
        }
        !self.named.is_empty()
            && craik_kernel::ImmutablePaths::new(&globs_of(&self.named))
                .map_or(true, |paths| paths.covers(rel))
    }

    /// What `craik run` says at its start: the hooks found and the limit of what is known,
    /// or why everything is protected. Lines for people (paths relative to `root` when in it).
    pub fn notice(&self, root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &self.no_git {
            out.push(format!(
                "craik: the workspace is in no git repository and git cannot be run ({e}): nothing git would run is known"
            ));
        }
        for e in &self.unread {
            out.push(format!(
                "craik: git could not say what it runs here ({e}); every workspace path is protected from commands"
            ));
        }
        if self.hooks.is_empty() {
            return out;
        }
        let shown = |p: &Path| {
            let real = root.canonicalize().ok();
            p.strip_prefix(root)
                .ok()
                .or_else(|| real.as_deref().and_then(|r| p.strip_prefix(r).ok()))
                .unwrap_or(p)
                .display()
                .to_string()
        };
        let list: Vec<String> = self
            .hooks
            .iter()
            .map(|h| match &h.target {
                Some(t) => format!("{} -> {}", shown(&h.path), shown(t)),
                None => shown(&h.path),
            })
            .collect();
        out.push(format!(
            "craik: git hooks found (protected from commands): {}",
            list.join(", ")
        ));
        out.push(
            "craik: what a hook runs in turn (a script it calls, husky's tracked scripts) is not modelled and not protected: review the hooks".to_owned(),
        );
        out
    }
}

/// Immutable-path globs covering `named`: each path exactly and everything under it, and a
/// word the shell would expand (`s/x[5].sh`) as the glob it is.
pub fn globs_of(named: &BTreeSet<PathBuf>) -> Vec<String> {
    let mut out = Vec::new();
    for rel in named {
        let rel = crate::run::manifest::shown(rel);
        out.push(craik_kernel::ImmutablePaths::glob_for(&rel, false));
        out.push(craik_kernel::ImmutablePaths::glob_for(&rel, true));
        if rel.contains(['*', '?', '['])
            && craik_kernel::ImmutablePaths::new(std::slice::from_ref(&rel)).is_ok()
        {
            out.push(rel);
        }
    }
    out
}

/// The workspace, as given and as resolved, and `HOME` for `~/`.
struct Places<'a> {
    root: &'a Path,
    root_real: &'a Path,
    home: Option<PathBuf>,
}

impl Places<'_> {
    /// Every workspace path on the way to `path` (made absolute against the root): the path
    /// as spelled when it lies in the workspace, each link met while resolving it (a link's
    /// own name: retargeting it changes what runs), and where it finally leads, followed as
    /// the kernel follows it (chains, links in any directory, `..` after a link), relative to
    /// the root. Never the root itself.
    fn on_the_way(&self, path: &Path) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let lexical = crate::fsio::lexical(&path);
        out.extend(self.rel(&lexical));
        let mut todo: Vec<OsString> = Vec::new();
        push_components(&mut todo, &path);
        let mut cur = PathBuf::from("/");
        let mut hops = 0usize;
        let mut exists = true;
        while let Some(part) = todo.pop() {
            if part == ".." {
                cur.pop();
                continue;
            }
            if part == "." || part.is_empty() {
                continue;
            }
            let next = cur.join(&part);
            if exists && let Ok(m) = std::fs::symlink_metadata(&next) {
                if m.file_type().is_symlink() {
                    out.extend(self.rel(&next));
                    hops += 1;
                    match std::fs::read_link(&next) {
                        Ok(target) if hops <= MAX_LINK_HOPS => {
                            if target.is_absolute() {
                                cur = PathBuf::from("/");
                            }
                            push_components(&mut todo, &target);
                            continue;
                        }
                        // A loop or an unreadable link: what it leads to is unknown; the
                        // link (already named) cannot change, so nothing runs through it
                        // that is not protected.
                        _ => return out,
                    }
                }
            } else {
                exists = false;
            }
            cur = next;
        }
        out.extend(self.rel(&cur));
        out
    }

    /// `path` (absolute) relative to the workspace, as given or as resolved; never the root.
    fn rel(&self, path: &Path) -> Option<PathBuf> {
        [self.root, self.root_real]
            .into_iter()
            .find_map(|r| path.strip_prefix(r).ok())
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(Path::to_path_buf)
    }
}

/// `path`'s components onto a stack (the first on top), `/` dropped.
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

/// Whether `dir` (resolved) or a directory above it holds a `.git` that git takes for a
/// repository (`git rev-parse --resolve-git-dir`, which reads no configuration, asked from
/// `/`): git is then expected to answer, and a failure to answer fails closed. A `.git` git
/// does not take for one (a directory with only a `config`) is passed, as git's discovery
/// passes it; one git cannot be asked about counts as a repository.
fn in_repository(env: &GitEnv, dir: &Path) -> bool {
    dir.ancestors()
        .map(|d| d.join(".git"))
        .filter(|g| std::fs::symlink_metadata(g).is_ok())
        .any(|g| {
            let arg = g.as_os_str().to_owned();
            !matches!(
                git(
                    env,
                    Path::new("/"),
                    &[
                        OsString::from("rev-parse"),
                        OsString::from("--resolve-git-dir"),
                        arg
                    ],
                    &[],
                ),
                Err(AskError::Failed { .. })
            )
        })
}

/// One configuration entry as git lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The file it came from (absolute), when a file.
    origin: Option<PathBuf>,
    key: String,
    /// `None`: a bare key (`[alias] x`).
    value: Option<String>,
}

/// What git says about one repository.
#[derive(Debug, Clone, Default)]
struct Facts {
    /// The resolved git directory.
    git_dir: Option<PathBuf>,
    /// The working tree's top (relative values are relative to it).
    top: Option<PathBuf>,
    /// The effective hooks directory (absolute).
    hooks: Option<PathBuf>,
    entries: Vec<Entry>,
}

/// Asks git, in `cwd` (or about `git_dir`), for the repository's facts; `repository`: whether
/// a repository is expected (else only the operator's configuration is listed).
fn ask(
    env: &GitEnv,
    cwd: &Path,
    git_dir: Option<&Path>,
    repository: bool,
) -> Result<Facts, AskError> {
    let mut pre: Vec<OsString> = Vec::new();
    if let Some(d) = git_dir {
        pre.push(OsString::from("--git-dir"));
        pre.push(d.as_os_str().to_owned());
    }
    let mut facts = Facts::default();
    if repository {
        let out = git(
            env,
            cwd,
            &pre,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                "hooks",
                "--git-common-dir",
                "--is-bare-repository",
            ],
        )?;
        let said = lines(&out, "rev-parse")?;
        let [hooks, common, bare] = said.as_slice() else {
            return Err(AskError::Unreadable {
                args: "rev-parse".into(),
            });
        };
        facts.hooks = Some(PathBuf::from(hooks));
        facts.git_dir = PathBuf::from(common).canonicalize().ok();
        if bare == "false" {
            let top = git(env, cwd, &pre, &["rev-parse", "--show-toplevel"])?;
            let top = lines(&top, "rev-parse --show-toplevel")?;
            facts.top = top.first().map(PathBuf::from);
        } else if let Some(d) = git_dir {
            facts.top = Some(d.to_path_buf());
        }
    }
    let out = git(
        env,
        cwd,
        &pre,
        &["config", "--list", "--show-origin", "--show-scope", "-z"],
    )?;
    facts.entries = entries(&out, cwd, "config --list")?;
    Ok(facts)
}

/// The entries of one configuration file (and what it includes), as git reads it.
fn list_file(env: &GitEnv, cwd: &Path, file: &Path) -> Result<Vec<Entry>, AskError> {
    let file = file.to_string_lossy().into_owned();
    let out = git(
        env,
        cwd,
        &[],
        &[
            "config",
            "--file",
            &file,
            "--includes",
            "--list",
            "--show-origin",
            "--show-scope",
            "-z",
        ],
    )?;
    entries(&out, cwd, "config --file")
}

fn lines(out: &[u8], args: &str) -> Result<Vec<String>, AskError> {
    let text = std::str::from_utf8(out).map_err(|_| AskError::Unreadable { args: args.into() })?;
    Ok(text.lines().map(str::to_owned).collect())
}

/// `scope NUL origin NUL key [LF value] NUL`, repeated.
fn entries(out: &[u8], cwd: &Path, args: &str) -> Result<Vec<Entry>, AskError> {
    let unreadable = || AskError::Unreadable { args: args.into() };
    let mut fields = out.split(|b| *b == 0);
    let mut list = Vec::new();
    while let Some(scope) = fields.next() {
        if scope.is_empty() {
            // The end (output ends with NUL).
            if fields.next().is_some() {
                return Err(unreadable());
            }
            break;
        }
        let origin = fields.next().ok_or_else(unreadable)?;
        let pair = fields.next().ok_or_else(unreadable)?;
        let origin = std::str::from_utf8(origin).map_err(|_| unreadable())?;
        let origin = origin.strip_prefix("file:").map(|p| cwd.join(p));
        let pair = std::str::from_utf8(pair).map_err(|_| unreadable())?;
        let (key, value) = match pair.split_once('\n') {
            Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
            None => (pair.to_owned(), None),
        };
        list.push(Entry { origin, key, value });
    }
    Ok(list)
}

/// Every entry of the hooks directory `dir` (none when it does not exist), by name.
fn hook_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, AskError> {
    let Ok(read) = std::fs::read_dir(dir) else {
        // Missing (git runs no hook then) or not a directory: the path itself is protected
        // (so it cannot be made); a directory git cannot list runs nothing either.
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in read.flatten() {
        if out.len() >= MAX_HOOK_ENTRIES {
            return Err(AskError::TooManyHooks(dir.display().to_string()));
        }
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
        ));
    }
    out.sort();
    Ok(out)
}

/// Runs the machine's git, hardened, with `pre` global options and `args`; its stdout.
fn git(env: &GitEnv, cwd: &Path, pre: &[OsString], args: &[&str]) -> Result<Vec<u8>, AskError> {
    let shown = args.iter().take(2).copied().collect::<Vec<_>>().join(" ");
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", GIT_PATH)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("LC_ALL", "C")
        .envs(env.vars.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .arg("--no-pager")
        .args(pre)
        .args(args);
    let mut child =
        crate::confine::spawn_managed(&mut cmd).map_err(|e| AskError::Spawn(e.to_string()))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(out) = stdout {
            let mut out = out;
            let _ = (&mut out).take(MAX_OUTPUT + 1).read_to_end(&mut buf);
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(err) = stderr {
            let mut err = err;
            let _ = (&mut err).take(64 * 1024).read_to_end(&mut buf);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        }
        buf
    });
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                crate::confine::release(Some(pid));
                return Err(AskError::Timeout { args: shown });
            }
        }
    };
    crate::confine::release(Some(pid));
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let why = String::from_utf8_lossy(&err);
        let first = why.lines().next().unwrap_or("git failed").trim();
        return Err(AskError::Failed {
            args: shown,
            why: craik_contracts::one_line(first),
        });
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(AskError::TooLarge { args: shown });
    }
    Ok(out)
}

/// The shell words of a command value, quotes removed the way `sh` removes them (`s''/x.sh`
/// is `s/x.sh`), split at unquoted blanks and operators; `!` of an alias dropped.
fn shell_words(value: &str) -> Vec<String> {
    let value = value.trim_start().trim_start_matches('!');
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() || ";|&()<>`=,".contains(c) => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// What a command value may run or read in the workspace, as paths relative to where git runs
/// it (the working tree's top) and to every directory it `cd`s into; a leading `$VAR/` (`$PWD`,
/// `${GIT_PREFIX}`, `$(pwd)`) read as that top. Words with another `$` cannot be known and are
/// skipped (said in SECURITY.md).
fn command_words(value: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let words = nested_words(value, 4);
    let mut bases = vec![PathBuf::new()];
    for pair in words.windows(2) {
        if let [cd, dir] = pair
            && (cd == "cd" || cd == "pushd")
        {
            bases.push(PathBuf::from(strip_variable(dir)));
        }
    }
    let mut out = Vec::new();
    for w in &words {
        let w = strip_variable(w);
        if w.is_empty() || w.starts_with('-') || w.contains('$') {
            continue;
        }
        let path = match w.strip_prefix("~/") {
            Some(rest) => match home {
                Some(h) => h.join(rest),
                None => continue,
            },
            None => PathBuf::from(w),
        };
        if path.is_absolute() {
            out.push(path);
        } else {
            out.extend(bases.iter().map(|b| b.join(&path)));
        }
    }
    out
}

/// [`shell_words`], and again the words of every word that is itself a script (a quoted
/// operand of `sh -c '…'`, `bash -c "…"`, `eval '…'`: it holds a blank or an operator), down
/// to `depth` levels (outside testing round 11: `core.pager = sh -c 'cd src && ./p.sh'` left
/// `src/p.sh` writable, and the operator's next `git log` ran what a command planted there).
/// More words is more protected paths, never fewer: no shell is modelled, every word is a
/// candidate.
fn nested_words(value: &str, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    for word in shell_words(value) {
        let script = word
            .chars()
            .any(|c| c.is_whitespace() || ";|&()<>`".contains(c));
        if script && depth > 0 {
            out.extend(nested_words(&word, depth - 1));
        }
        out.push(word);
    }
    out
}

/// `$VAR/rest`, `${VAR}/rest`, `$(cmd)/rest` as `rest` (relative to the top), else the word.
fn strip_variable(word: &str) -> &str {
    if word.starts_with('$')
        && let Some(slash) = word.find('/')
    {
        return word.get(slash + 1..).unwrap_or_default();
    }
    word
}

/// A path-valued setting's one path, `~/` expanded.
fn path_words(value: &str, home: Option<&Path>) -> Vec<PathBuf> {
    if value.is_empty() {
        return Vec::new();
    }
    match value.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)).into_iter().collect(),
        None => vec![PathBuf::from(value)],
    }
}

#[cfg(test)]
mod tests;
