//! Repository state by git plumbing, hardened against the repository it reads: a fixed argv,
//! no system or global configuration, no pager, no fsmonitor, no hooks, no attributes from the
//! work tree, every filter driver the configuration names switched off, a scrubbed
//! environment and no optional locks. A hostile `.git/config` or `.gitattributes` must not run
//! anything (a `core.fsmonitor`, `core.pager` or `filter.*.clean` command); it may only make
//! git fail, which is reported, never ignored.
//!
//! Why plumbing and not `gix`: `gix` is not in the offline registry this project builds from
//! and adds some 150 crates to the trusted host; the `git` binary is already what the
//! operator's repository is managed with, and these few read-only queries pin its behaviour.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The empty tree: attributes are read from it instead of the work tree's `.gitattributes`.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Largest output read from one git command (a status of 100 000 dirty paths fits).
const MAX_OUTPUT: usize = 64 << 20;

/// Where git is looked for.
const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The state of a repository, as the case file records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoState {
    /// `HEAD`'s commit id (`None`: no commit yet).
    pub head: Option<String>,
    /// The checked-out branch (`None`: detached or unborn without a name).
    pub branch: Option<String>,
    /// Paths (relative to the profile's root) with uncommitted changes or untracked, with
    /// their two-letter porcelain status (`.M`: changed in the work tree; `??`: untracked),
    /// sorted.
    pub dirty: Vec<(String, String)>,
    /// Paths under the root git reported that are not valid names (control characters,
    /// not UTF-8): counted, never listed.
    pub unlisted: usize,
}

fn base(root: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", GIT_PATH)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_ATTR_SOURCE", EMPTY_TREE)
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("HOME", "/nonexistent")
        .env("LC_ALL", "C")
        .current_dir(root)
        .stdin(Stdio::null())
        .args([
            "--no-pager",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.pager=cat",
            "-c",
            "core.untrackedCache=false",
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "status.showUntrackedFiles=all",
            "-c",
            "diff.external=",
        ]);
    cmd
}

/// Runs git with `args` in `root`; stdout on success, else why (one line).
fn git(root: &Path, extra: &[String], args: &[&str]) -> Result<Vec<u8>, String> {
    let mut cmd = base(root);
    cmd.args(extra).args(args);
    let child = crate::confine::spawn_managed(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()))
        .map_err(|e| format!("cannot run git: {e}"))?;
    let pid = child.id();
    let out = child.wait_with_output();
    crate::confine::release(Some(pid));
    let out = out.map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let first = why.lines().next().unwrap_or("git failed").trim();
        return Err(craik_contracts::one_line(first));
    }
    if out.stdout.len() > MAX_OUTPUT {
        return Err(format!("git printed more than {MAX_OUTPUT} bytes"));
    }
    Ok(out.stdout)
}

/// The work tree `root` lies in, if any.
pub fn toplevel(root: &Path) -> Result<PathBuf, String> {
    let out = git(root, &[], &["rev-parse", "--show-toplevel"])?;
    let text = String::from_utf8(out).map_err(|_| "git printed a path that is not UTF-8")?;
    let top = text.trim_end_matches('\n');
    if top.is_empty() {
        return Err("not inside a git work tree".into());
    }
    Ok(PathBuf::from(top))
}

/// `-c filter.NAME.clean= ...` for every filter driver the repository's configuration names:
/// a clean or process filter runs a command when git compares a file's content.
fn filters_off(root: &Path) -> Vec<String> {
    let Ok(out) = git(root, &[], &["config", "-z", "--get-regexp", r"^filter\."]) else {
        // No filter configured (git exits 1) or the config cannot be read: status fails then.
        return Vec::new();
    };
    let mut names: Vec<String> = out
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let key = entry.split(|b| *b == b'\n').next()?;
            let key = std::str::from_utf8(key).ok()?;
            let rest = key.strip_prefix("filter.")?;
            let (name, _) = rest.rsplit_once('.')?;
            Some(name.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
        .iter()
        .flat_map(|n| {
            ["clean", "smudge", "process"]
                .into_iter()
                .flat_map(move |k| ["-c".to_owned(), format!("filter.{n}.{k}=")])
                .chain(["-c".to_owned(), format!("filter.{n}.required=false")])
        })
        .collect()
}

/// HEAD, branch and the dirty paths under `root` (relative to it).
pub fn state(root: &Path) -> Result<RepoState, String> {
    let prefix = String::from_utf8(git(root, &[], &["rev-parse", "--show-prefix"])?)
        .map_err(|_| "git printed a prefix that is not UTF-8")?
        .trim_end_matches('\n')
        .to_owned();
    let head = git(
        root,
        &[],
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
    )
    .ok()
    .and_then(|o| String::from_utf8(o).ok())
    .map(|s| s.trim().to_owned())
    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()));
    let branch = git(root, &[], &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .ok()
        .and_then(|o| String::from_utf8(o).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let extra = filters_off(root);
    let out = git(
        root,
        &extra,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--no-renames",
            "--",
            ".",
        ],
    )?;
    let mut state = RepoState {
        head,
        branch: branch.map(|b| craik_contracts::one_line(&b)),
        ..RepoState::default()
    };
    for entry in out.split(|b| *b == 0).filter(|e| e.len() > 3) {
        let (code, path) = entry.split_at(3);
        // Porcelain v1's `XY` with an unchanged side as `.` (as porcelain v2 writes it).
        let code = String::from_utf8_lossy(code).trim_end().replace(' ', ".");
        match std::str::from_utf8(path) {
            Ok(p) if !p.chars().any(char::is_control) => {
                // Porcelain paths are relative to the top of the work tree.
                let rel = p.strip_prefix(prefix.as_str()).unwrap_or(p);
                state.dirty.push((rel.to_owned(), code));
            }
            _ => state.unlisted += 1,
        }
    }
    state.dirty.sort();
    state.dirty.dedup();
    Ok(state)
}

/// The untracked paths under `root` that git ignores (`.gitignore` files at any depth,
/// `.git/info/exclude`; the operator's global excludes file is not read, as nothing global
/// is), relative to `root`: files as they are, whole ignored directories with a trailing `/`.
/// Asked of git itself (`ls-files --others --ignored --exclude-standard --directory`), never
/// modelled: git's ignore rules (negation, anchoring, `**`, per-directory files) are its own.
pub fn ignored(root: &Path) -> Result<Vec<String>, String> {
    let out = git(
        root,
        &[],
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ],
    )?;
    Ok(out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::str::from_utf8(p).ok().map(str::to_owned))
        .collect())
}
