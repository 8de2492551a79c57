//! What a command changed in the workspace: a manifest taken before and after every command
//! (`lstat` of every entry, never following a link; hashing only what changed), the write
//! scope the command was given, and the restoration of anything it changed outside that scope
//! or in a protected path.
//!
//! The operating system enforces the scope first (Landlock grants only the scope's
//! directories, carved around protected paths); this check is the second line and the record:
//! every outcome receipt lists the files its command created, changed or removed.
//!
//! INVARIANT: a walk never follows a symlink and never leaves the workspace; a restore never
//! writes through a symlink (every directory on the way is checked with `lstat`, a file is
//! replaced by rename).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use craik_kernel::TargetPath;
use sha2::{Digest as _, Sha256};

/// Most entries a workspace may hold for a command to run in it (more is refused: the check
/// after the command could not be made).
pub const MAX_ENTRIES: usize = 1_000_000;
/// Largest file the after-command check hashes (1 GiB); a larger changed file is listed
/// with its change but no `sha256`.
pub const MAX_HASHED_BYTES: u64 = 1 << 30;
/// Deepest directory level the manifest walks (relative to the workspace root); a directory
/// below it is a [`Kind::Deep`] entry. Far deeper than source trees go, and far from
/// `PATH_MAX`.
pub const MAX_DEPTH: usize = 64;
/// Longest workspace-relative path (bytes) of a directory the manifest walks; a longer one is
/// a [`Kind::Deep`] entry. The same bound as the paths a runner may name
/// ([`craik_kernel::MAX_PATH_BYTES`]), so nothing a runner's write makes lies beyond the walk
/// (outside testing: a runner-made 3.3 KB path hid what a later command planted under it).
pub const MAX_PATH_BYTES: usize = craik_kernel::MAX_PATH_BYTES;
/// Most files hard-linked outside the workspace a command's write scope may hold: each is
/// carved out of its write rules (kept read-only); more is refused, naming the first.
pub const MAX_LINKED_OUTSIDE: usize = 256;
/// Most bytes of protected files kept as pre-images for one command.
pub const MAX_PREIMAGE_BYTES: u64 = 64 * 1024 * 1024;
/// Most bytes of one protected file kept as a pre-image.
const MAX_PREIMAGE_FILE: u64 = 8 * 1024 * 1024;

/// One entry as `lstat` saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: Kind,
    size: u64,
    mode: u32,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    link: Option<PathBuf>,
    /// Hard links to the file: more than one, and a write through a name in scope changes
    /// every other name too.
    nlink: u64,
    /// The device, with `ino` the file's identity (names of one file are counted by it).
    dev: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Link,
    Other,
    /// A directory deeper than [`MAX_DEPTH`] or longer than [`MAX_PATH_BYTES`]: recorded,
    /// not walked. Created or changed by a
    /// command, it is forbidden and removed whole (a tree too deep to walk would otherwise
    /// hide what it holds, or fail the whole check and with it every restore; found by
    /// outside testing).
    Deep,
}

/// Every entry of a workspace, by path relative to its root (`/`-separated).
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// Keyed by the exact relative path (its bytes, never a lossy rendering).
    entries: BTreeMap<PathBuf, Entry>,
    /// The workspace root's own mode (a command may not change it).
    root_mode: u32,
}

/// A write scope: `**` (the whole workspace but protected paths), `DIR/**` (everything under
/// a directory) or a file's exact path. Nothing else: the OS could not enforce it exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Under(String),
    File(String),
}

/// Why a write-scope pattern cannot be enforced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error(
        "write scope `{0}`: only `**`, `DIR/**` or a file's exact path can be enforced by the sandbox"
    )]
    Unenforceable(String),
    #[error("write scope `{pattern}`: {why}")]
    Path { pattern: String, why: String },
    #[error("write scope `{pattern}` names a protected path ({name})")]
    Protected { pattern: String, name: &'static str },
}

/// Why the workspace could not be walked, or a forbidden change not undone. Paths are shown
/// as Craik walked them (never text a command wrote but a file name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// A system call failed on `path` (its kind kept; the words are the OS's).
    #[error("`{path}`: {detail}")]
    Os {
        path: String,
        kind: std::io::ErrorKind,
        detail: String,
    },
    #[error("`{0}` holds more than {MAX_ENTRIES} entries; too many to check after a command")]
    TooMany(String),
    #[error("`{0}` is not a directory any more")]
    NotDirectoryAnyMore(String),
    #[error("`{0}` is now a symlink")]
    NowSymlink(String),
    #[error("`{0}` was put back but reads otherwise")]
    ReadsOtherwise(String),
    #[error("`{0}`: no file name")]
    NoFileName(String),
    /// Craik kept no copy of the file's bytes to put back.
    #[error("{}no pre-image (not a protected file, or too large to keep)", if *.mode_restored { "its mode was put back, but not its content: " } else { "" })]
    NoPreImage { mode_restored: bool },
}

impl ManifestError {
    fn os(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Self::Os {
            path: path.to_string(),
            kind: source.kind(),
            detail: source.to_string(),
        }
    }
}

impl Scope {
    /// Parses one write-scope pattern, refusing what cannot be enforced exactly.
    pub fn parse(root: &str, pattern: &str) -> Result<Self, ScopeError> {
        if pattern == "**" {
            return Ok(Self::All);
        }
        let (body, under) = match pattern.strip_suffix("/**") {
            Some(body) => (body, true),
            None => (pattern, false),
        };
        if body.is_empty() || body.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            return Err(ScopeError::Unenforceable(pattern.to_owned()));
        }
        let path = TargetPath::normalize(root, body).map_err(|e| ScopeError::Path {
            pattern: pattern.to_owned(),
            why: e.to_string(),
        })?;
        if let Some(p) = path.protected() {
            return Err(ScopeError::Protected {
                pattern: pattern.to_owned(),
                name: p.name(),
            });
        }
        let rel = path.as_str().to_owned();
        Ok(if under {
            Self::Under(rel)
        } else {
            Self::File(rel)
        })
    }

    /// The pattern this scope was parsed from, normalised (`**`, `DIR/**` or a file's path).
    pub fn pattern(&self) -> String {
        match self {
            Self::All => "**".to_owned(),
            Self::Under(dir) => format!("{dir}/**"),
            Self::File(file) => file.clone(),
        }
    }

    /// A scope back from [`Scope::pattern`] (a persisted, signed record: already checked
    /// when it was parsed).
    pub fn from_pattern(pattern: &str) -> Self {
        if pattern == "**" {
            Self::All
        } else if let Some(dir) = pattern.strip_suffix("/**") {
            Self::Under(dir.to_owned())
        } else {
            Self::File(pattern.to_owned())
        }
    }

    /// Whether `rel` (as [`shown`]) lies in this scope.
    pub fn holds(&self, rel: &str) -> bool {
        match self {
            Self::All => true,
            Self::Under(dir) => {
                rel == dir
                    || rel
                        .strip_prefix(dir.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            }
            Self::File(file) => rel == file,
        }
    }
}

/// Why a changed path was not the command's to change.
fn forbidden(
    rel: &str,
    scopes: &[Scope],
    immutable: &craik_kernel::ImmutablePaths,
) -> Option<String> {
    let Ok(path) = TargetPath::normalize("/w", rel) else {
        // A name Craik cannot normalise (control characters, look-alikes…) is never in scope.
        return Some("a path no grant can name".into());
    };
    if let Some(p) = path.protected() {
        return Some(format!("protected ({})", p.name()));
    }
    if immutable.covers(rel) {
        return Some("immutable (the project's immutable paths)".into());
    }
    if !scopes.iter().any(|s| s.holds(rel)) {
        return Some("outside the command's write scope".into());
    }
    None
}

/// True for a path the sandbox keeps out of every command's write grant.
pub fn is_protected(rel: &str, immutable: &craik_kernel::ImmutablePaths) -> bool {
    TargetPath::normalize("/w", rel)
        .ok()
        .is_some_and(|p| p.protected().is_some())
        || immutable.covers(rel)
}

/// Names that are protected wherever they would be created: kept out of a write grant even
/// when absent, so nothing can create them.
pub const PROTECTED_NAMES: &[&str] = &[
    ".git",
    ".craik",
    ".envrc",
    ".vscode",
    ".github",
    "craik.toml",
    ".craik-tasks",
    ".craik-grants",
];

impl Manifest {
    /// Walks `root` with `lstat`, never following a link.
    pub fn scan(root: &Path) -> Result<Self, ManifestError> {
        let root_mode = std::fs::symlink_metadata(root)
            .map_err(|e| ManifestError::os(root.display(), e))?
            .mode();
        let mut entries = BTreeMap::new();
        let mut todo: Vec<(PathBuf, PathBuf)> = vec![(root.to_path_buf(), PathBuf::new())];
        while let Some((dir, rel)) = todo.pop() {
            let read = std::fs::read_dir(&dir).map_err(|e| ManifestError::os(dir.display(), e))?;
            for item in read {
                let item = item.map_err(|e| ManifestError::os(dir.display(), e))?;
                let child_rel = rel.join(item.file_name());
                let path = item.path();
                let meta = std::fs::symlink_metadata(&path)
                    .map_err(|e| ManifestError::os(path.display(), e))?;
                let kind = if meta.file_type().is_symlink() {
                    Kind::Link
                } else if meta.is_dir()
                    && (child_rel.components().count() >= MAX_DEPTH
                        || child_rel.as_os_str().len() > MAX_PATH_BYTES)
                {
                    Kind::Deep
                } else if meta.is_dir() {
                    Kind::Dir
                } else if meta.is_file() {
                    Kind::File
                } else {
                    Kind::Other
                };
                let entry = Entry {
                    kind,
                    size: meta.size(),
                    mode: meta.mode(),
                    ino: meta.ino(),
                    mtime: (meta.mtime(), meta.mtime_nsec()),
                    ctime: (meta.ctime(), meta.ctime_nsec()),
                    link: (kind == Kind::Link)
                        .then(|| std::fs::read_link(&path).ok())
                        .flatten(),
                    nlink: meta.nlink(),
                    dev: meta.dev(),
                };
                if kind == Kind::Dir {
                    todo.push((path, child_rel.clone()));
                }
                entries.insert(child_rel, entry);
                if entries.len() > MAX_ENTRIES {
                    return Err(ManifestError::TooMany(root.display().to_string()));
                }
            }
        }
        Ok(Self { entries, root_mode })
    }

    /// Regular files with a hard link outside the workspace: more links than names here (a
    /// pnpm store, a `cp -al` tree). A command writing one in place writes outside the
    /// workspace (outside testing: a granted script appended to the store's copy through
    /// `node_modules/`), so they are kept read-only like protected paths.
    pub fn linked_outside(&self) -> Vec<PathBuf> {
        let mut names: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for e in self.entries.values().filter(|e| e.kind == Kind::File) {
            *names.entry((e.dev, e.ino)).or_default() += 1;
        }
        self.entries
            .iter()
            .filter(|(_, e)| {
                e.kind == Kind::File && e.nlink > names.get(&(e.dev, e.ino)).copied().unwrap_or(0)
            })
            .map(|(rel, _)| rel.clone())
            .collect()
    }

    /// The configuration files of every git directory present: `config` and
    /// `config.worktree` in a `.git/` at any depth or in a directory of `marked`
    /// ([`marked_dirs`]: a git directory under any name, a common directory).
    pub fn git_config_files(&self, root: &Path, marked: &[(PathBuf, &str)]) -> Vec<PathBuf> {
        self.entries
            .iter()
            .filter(|(rel, e)| {
                e.kind == Kind::File
                    && rel
                        .file_name()
                        .is_some_and(|n| n == "config" || n == "config.worktree")
                    && rel.parent().is_some_and(|dir| {
                        dir.file_name()
                            .is_some_and(|n| n.eq_ignore_ascii_case(".git"))
                            || marked.iter().any(|(m, _)| m == dir)
                    })
            })
            .map(|(rel, _)| root.join(rel))
            .collect()
    }

    /// Regular files sharing their inode with a file `protected` says is protected, under
    /// another name (outside testing round 7: `.github/workflows/ci.yml`, `.envrc`, an ADR and
    /// a git object hard-linked into the write scope were written through those names).
    pub fn linked_to_protected(&self, protected: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
        let shared: std::collections::BTreeSet<(u64, u64)> = self
            .entries
            .iter()
            .filter(|(rel, e)| e.kind == Kind::File && e.nlink > 1 && protected(rel))
            .map(|(_, e)| (e.dev, e.ino))
            .collect();
        if shared.is_empty() {
            return Vec::new();
        }
        self.entries
            .iter()
            .filter(|(rel, e)| {
                e.kind == Kind::File && shared.contains(&(e.dev, e.ino)) && !protected(rel)
            })
            .map(|(rel, _)| rel.clone())
            .collect()
    }

    /// The protected entries present (top-most only: `.git`, not `.git/config`).
    pub fn protected(&self, immutable: &craik_kernel::ImmutablePaths) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for rel in self.entries.keys() {
            if out.iter().any(|p| rel.starts_with(p)) {
                continue;
            }
            if is_protected(&shown(rel), immutable) {
                out.push(rel.clone());
            }
        }
        out
    }
}

/// The bytes of protected files before a command, to put back what it changed.
#[derive(Debug, Default)]
pub struct Preimages {
    files: BTreeMap<PathBuf, (Vec<u8>, u32)>,
    /// Protected files too large (or beyond the budget) to keep.
    pub skipped: Vec<String>,
}

impl Preimages {
    /// Keeps the protected regular files of `manifest` (git objects excepted: they are
    /// content-addressed and the sandbox never grants `.git/`), and every file with more
    /// than one hard link (a write through a name in scope changes the names outside it:
    /// outside testing), within the budget.
    pub fn take(
        root: &Path,
        manifest: &Manifest,
        immutable: &craik_kernel::ImmutablePaths,
    ) -> Self {
        let mut out = Self::default();
        let mut budget = MAX_PREIMAGE_BYTES;
        let marked = marked_dirs(root, &[manifest]);
        for (rel, entry) in &manifest.entries {
            let in_marked = marked
                .iter()
                .any(|(dir, _)| rel.starts_with(dir) && rel != dir);
            if entry.kind != Kind::File
                || !(in_marked || entry.nlink > 1 || is_protected(&shown(rel), immutable))
            {
                continue;
            }
            let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
            if parts.windows(2).any(|w| w == [".git", "objects"]) {
                continue;
            }
            if entry.size > MAX_PREIMAGE_FILE || entry.size > budget {
                out.skipped.push(shown(rel));
                continue;
            }
            match read_no_follow(&root.join(rel)) {
                Ok(bytes) => {
                    budget = budget.saturating_sub(bytes.len() as u64);
                    out.files.insert(rel.clone(), (bytes, entry.mode & 0o7777));
                }
                Err(_) => out.skipped.push(shown(rel)),
            }
        }
        out
    }
}

fn read_no_follow(path: &Path) -> Result<Vec<u8>, ManifestError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| ManifestError::os(path.display(), e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ManifestError::os(path.display(), e))?;
    Ok(bytes)
}

fn hash_file(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    // Bounded cost: a file larger than this is listed without a hash.
    if file.metadata().ok()?.len() > MAX_HASHED_BYTES {
        return None;
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n)?);
    }
    Some(format!(
        "sha256:{}",
        craik_kernel::to_hex(&hasher.finalize())
    ))
}

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Changed,
    Removed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Changed => "changed",
            Self::Removed => "removed",
        }
    }
}

/// One path a command changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The path as shown (non-UTF-8 bytes as `\xNN`).
    pub path: String,
    /// The exact path.
    pub rel: PathBuf,
    pub change: Change,
    /// `sha256:` of a regular file after the change (`None` for a removal, a directory or a
    /// link).
    pub sha256: Option<String>,
    /// Why the command may not make it; `None` when it was in scope.
    pub forbidden: Option<String>,
    /// For a forbidden change: how it is undone.
    pub undo: Option<Undo>,
    /// For a forbidden change: whether it was undone.
    pub restored: Option<Result<(), ManifestError>>,
}

/// The names whose company makes a directory a git directory: git takes one holding `HEAD`
/// and `objects` and `refs` of any kind (a directory, an executable file, a link: it only
/// `access(X_OK)`s them), or `HEAD` with a `commondir` file naming where they are.
const GIT_DIR_NAMES: [&str; 3] = ["objects", "refs", "commondir"];

/// Whether a directory holding `names` may be taken for a git directory: `HEAD` and any one
/// of [`GIT_DIR_NAMES`] (broader than git's own test on purpose: outside testing split one
/// with `commondir`, and made `refs` an executable file and `objects` a link).
fn git_like<'a>(mut names: impl Iterator<Item = &'a std::ffi::OsStr>) -> bool {
    let (mut head, mut other) = (false, false);
    for n in names.by_ref() {
        head |= n == "HEAD";
        other |= GIT_DIR_NAMES.iter().any(|g| n == *g);
    }
    head && other
}

/// Why a runner's write of `rel` must be refused for the layout it would make, not its name:
/// it would make a git directory (`HEAD` with `objects`, `refs` or `commondir`, of any kind,
/// under any name: git then runs that `config`'s hooks and pager) or write into a Craik task
/// directory (one holding `task_request.json`). Outside testing planted a bare repository
/// with `repo.write.docs` alone.
pub fn layout_refusal(root: &Path, rel: &str) -> Option<&'static str> {
    let rel = Path::new(rel);
    let exists = |p: &Path| std::fs::symlink_metadata(root.join(p)).is_ok();
    let mut ancestor = rel.parent();
    while let Some(a) = ancestor {
        let made = rel
            .strip_prefix(a)
            .ok()
            .and_then(|r| r.iter().next())
            .map(std::ffi::OsStr::to_os_string);
        let names: Vec<std::ffi::OsString> = std::iter::once("HEAD")
            .chain(GIT_DIR_NAMES)
            .map(std::ffi::OsString::from)
            .filter(|n| made.as_ref() == Some(n) || exists(&a.join(n)))
            .collect();
        if git_like(names.iter().map(std::ffi::OsString::as_os_str)) {
            return Some(
                "it would make a git directory (HEAD with objects, refs or commondir in one directory)",
            );
        }
        if rel == a.join("task_request.json") || exists(&a.join("task_request.json")) {
            return Some(
                "it lies in a Craik task directory (a directory holding task_request.json)",
            );
        }
        ancestor = a.parent();
    }
    None
}

/// Gives the owner back `rwx` on every directory of the workspace a command left without it
/// (`chmod 000`, `chmod 555`), before the check: a process without `CAP_DAC_OVERRIDE` (an
/// unprivileged Craik) could otherwise neither walk nor undo what lies inside (outside
/// testing: `chmod 000 src/zzz` failed the check, `chmod 555 src/sub` kept a planted
/// `src/sub/.git`). Links are never followed; only directories this process owns change,
/// and the new mode shows in the manifest as the command's change. Nothing to do as root.
pub fn unlock_dirs(root: &Path) {
    if rustix::process::geteuid().is_root() {
        return;
    }
    let me = rustix::process::geteuid().as_raw();
    let mut todo: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = todo.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for item in read.flatten() {
            let path = item.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            if meta.uid() == me && meta.mode() & 0o700 != 0o700 {
                let _ = std::fs::set_permissions(
                    &path,
                    std::fs::Permissions::from_mode((meta.mode() | 0o700) & 0o7777),
                );
            }
            if depth + 1 < MAX_DEPTH {
                todo.push((path, depth + 1));
            }
        }
    }
}

/// When the after-command manifest cannot be made (more than [`MAX_ENTRIES`] entries, an
/// unreadable directory): a sweep that keeps nothing but what must be undone, so a command
/// cannot switch the restore off by flooding the workspace. Every entry the command may not
/// have made (protected, immutable, outside `scopes`) that `before` does not hold is removed
/// (directories whole), and every kept pre-image is put back. Returns what it undid and what
/// it could not.
pub fn sweep_forbidden(
    root: &Path,
    before: &Manifest,
    scopes: &[Scope],
    immutable: &craik_kernel::ImmutablePaths,
    pre: &Preimages,
) -> (Vec<String>, Vec<String>) {
    let (mut undone, mut failed) = (Vec::new(), Vec::new());
    let mut todo: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = todo.pop() {
        let Ok(read) = std::fs::read_dir(root.join(&rel)) else {
            failed.push(format!("`{}`: unreadable", shown(&rel)));
            continue;
        };
        for item in read.flatten() {
            let child = rel.join(item.file_name());
            let is_dir = item.file_type().is_ok_and(|t| t.is_dir());
            let known = before.entries.contains_key(&child);
            if !known && forbidden(&shown(&child), scopes, immutable).is_some() {
                match remove_created(root, &child) {
                    Ok(()) => undone.push(shown(&child)),
                    Err(e) => failed.push(format!("`{}`: {e}", shown(&child))),
                }
                continue;
            }
            if is_dir && (depth + 1 < MAX_DEPTH) {
                todo.push((child, depth + 1));
            } else if is_dir && !known {
                // Too deep to look into and new: removed whole, like a `Kind::Deep` entry.
                match remove_created(root, &child) {
                    Ok(()) => undone.push(shown(&child)),
                    Err(e) => failed.push(format!("`{}`: {e}", shown(&child))),
                }
            }
        }
    }
    for (rel, (bytes, mode)) in &pre.files {
        if read_no_follow(&root.join(rel)).ok().as_deref() != Some(bytes.as_slice()) {
            match put_back(root, rel, bytes, *mode) {
                Ok(()) => undone.push(shown(rel)),
                Err(e) => failed.push(format!("`{}`: {e}", shown(rel))),
            }
        }
    }
    (undone, failed)
}

/// Directories protected by what they hold in any of `manifests`: a git directory under any
/// name (`HEAD` with `objects`, `refs` or `commondir`, of any kind) and the directory its
/// `commondir` file names when that lies in `root` (the `config` git reads is there), and a
/// Craik task directory (`task_request.json`), with why.
pub fn marked_dirs(root: &Path, manifests: &[&Manifest]) -> Vec<(PathBuf, &'static str)> {
    let mut children: BTreeMap<&Path, Vec<&std::ffi::OsStr>> = BTreeMap::new();
    for rel in manifests.iter().flat_map(|m| m.entries.keys()) {
        if let (Some(dir), Some(name)) = (rel.parent(), rel.file_name()) {
            children.entry(dir).or_default().push(name);
        }
    }
    let mut marked: Vec<(PathBuf, &'static str)> = Vec::new();
    for (dir, names) in &children {
        if names.iter().any(|n| *n == "task_request.json") {
            marked.push((dir.to_path_buf(), "a Craik task directory"));
        }
        if git_like(names.iter().copied()) {
            marked.push((dir.to_path_buf(), "a git directory"));
            match common_dir(root, dir) {
                Some(Common::Inside(common)) => {
                    marked.push((common, "the common directory a git directory names"));
                }
                // Fail closed: the whole workspace is protected while it is there.
                Some(Common::Unknown) => marked.push((
                    PathBuf::new(),
                    "the workspace holds a git directory whose commondir Craik cannot resolve",
                )),
                Some(Common::Outside) | None => {}
            }
        }
    }
    marked.sort();
    marked.dedup();
    marked
}

/// Where a git directory's `commondir` leads.
enum Common {
    /// A directory of the workspace (relative to its root).
    Inside(PathBuf),
    /// Outside the workspace: nothing of it to protect here.
    Outside,
    /// Not resolvable as git would (through `/proc`, unreadable, a FIFO, the workspace root
    /// itself): the caller fails closed.
    Unknown,
}

/// Resolves `dir/commondir` as git does: the file read through links, its path taken
/// relative to the git directory's real path, links followed (outside testing round 7: a
/// `commondir` that was a link, named `/proc/self/cwd/..`, or went out of the workspace and
/// back in through a link hid the common directory). `None`: no `commondir`.
fn common_dir(root: &Path, dir: &Path) -> Option<Common> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = root.join(dir).join("commondir");
    std::fs::symlink_metadata(&file).ok()?;
    let read = || -> Option<String> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&file)
            .ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        f.take(4097).read_to_end(&mut bytes).ok()?;
        (bytes.len() <= 4096).then_some(())?;
        String::from_utf8(bytes).ok()
    };
    let Some(text) = read() else {
        return Some(Common::Unknown);
    };
    let named = Path::new(text.trim_end_matches(['\n', '\r']));
    if named.as_os_str().is_empty() || named.starts_with("/proc") {
        return Some(Common::Unknown);
    }
    let (Ok(real_root), Ok(real_dir)) = (root.canonicalize(), root.join(dir).canonicalize()) else {
        return Some(Common::Unknown);
    };
    let target = real_dir.join(named);
    let resolved = match target.canonicalize() {
        Ok(real) => real,
        // Not there (yet): where it would be, lexically from the real directory.
        Err(_) => crate::fsio::lexical(&target),
    };
    if resolved.components().any(|c| c.as_os_str() == "proc") && resolved.starts_with("/proc") {
        return Some(Common::Unknown);
    }
    match resolved.strip_prefix(&real_root) {
        Ok(rel) if rel.as_os_str().is_empty() => Some(Common::Unknown),
        Ok(rel) => Some(Common::Inside(rel.to_path_buf())),
        Err(_) => Some(Common::Outside),
    }
}

/// The changes between two manifests of `root`, forbidden ones restored from `pre`:
/// [`findings`], then [`undo`].
pub fn settle(
    root: &Path,
    before: &Manifest,
    after: &Manifest,
    scopes: &[Scope],
    immutable: &craik_kernel::ImmutablePaths,
    pre: &Preimages,
) -> Vec<FileChange> {
    let mut changes = findings(root, before, after, scopes, immutable, pre);
    undo(root, before, &mut changes, pre);
    changes
}

/// How a forbidden change is undone (decided when it is found, so a check cut short by a
/// crash is finished the same way from its persisted findings).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Undo {
    /// A created entry, removed. `rank`: what marks a directory goes last (see [`undo`]).
    Remove { rank: u8 },
    /// A directory made a directory again with its mode from before.
    Dir,
    /// A file hard-linked outside the workspace, rewritten in place from its pre-image.
    InPlace,
    /// A file put back from its pre-image.
    PutBack,
    /// A file without a pre-image: only its mode from before is put back.
    ModeOnly,
    /// Nothing Craik can put back.
    Nothing,
    /// A set-id bit stripped.
    StripSetId,
    /// The workspace root's mode from before.
    RootMode,
}

/// The changes between two manifests of `root`, each forbidden one with how it is undone
/// ([`FileChange::undo`]); nothing is undone yet.
pub fn findings(
    root: &Path,
    before: &Manifest,
    after: &Manifest,
    scopes: &[Scope],
    immutable: &craik_kernel::ImmutablePaths,
    pre: &Preimages,
) -> Vec<FileChange> {
    let mut changes = Vec::new();
    // Directories protected by what they hold, not by their name (outside testing): a bare
    // git repository under any name (`HEAD`, `objects/`, `refs/`: git runs its `config`'s
    // `core.fsmonitor` there) and a Craik task directory (`task_request.json`: the next run
    // of that task reads its grants and envelope).
    let marked = marked_dirs(root, &[before, after]);
    // A file hard-linked outside the workspace, changed in place (the same file after): the
    // write reached outside, whatever the scope said (the sandbox keeps them read-only; this
    // holds where it could not).
    let outside: Vec<PathBuf> = before
        .linked_outside()
        .into_iter()
        .filter(|rel| {
            let same = |m: &Manifest| m.entries.get(rel).map(|e| (e.dev, e.ino));
            same(before) == same(after)
        })
        .collect();
    let change_of = |rel: &Path, change: Change, sha256: Option<String>| {
        FileChange {
        path: shown(rel),
        rel: rel.to_path_buf(),
        change,
        sha256,
        forbidden: forbidden(&shown(rel), scopes, immutable)
            .or_else(|| {
                marked
                    .iter()
                    .find(|(dir, _)| rel.starts_with(dir) && rel != dir.as_path())
                    .map(|(_, why)| format!("protected ({why})"))
            })
            .or_else(|| {
                (change == Change::Changed && outside.iter().any(|o| o == rel)).then(|| {
                    "a hard link to a file outside the workspace (a write through it writes outside)".to_owned()
                })
            }),
        undo: None,
        restored: None,
    }
    };
    let too_deep = |rel: &Path, change: Change| FileChange {
        forbidden: Some(format!(
            "a directory deeper than {MAX_DEPTH} levels, too deep to check"
        )),
        ..change_of(rel, change, None)
    };
    for (rel, now) in &after.entries {
        let change = match before.entries.get(rel) {
            None => Change::Created,
            Some(was)
                if was != now
                    && !(was.kind == Kind::Dir
                        && now.kind == Kind::Dir
                        && was.ino == now.ino
                        && was.mode == now.mode) =>
            {
                Change::Changed
            }
            Some(_) => continue,
        };
        if now.kind == Kind::Deep {
            changes.push(too_deep(rel, change));
            continue;
        }
        let sha256 = (now.kind == Kind::File)
            .then(|| hash_file(&root.join(rel)))
            .flatten();
        changes.push(change_of(rel, change, sha256));
    }
    for rel in before.entries.keys() {
        if !after.entries.contains_key(rel) {
            changes.push(change_of(rel, Change::Removed, None));
        }
    }
    changes.sort_by(|a, b| a.rel.cmp(&b.rel));
    for c in changes.iter_mut().filter(|c| c.forbidden.is_some()) {
        let was = before.entries.get(&c.rel);
        // A file is put back from its pre-image whenever it changed, whatever its size and
        // times say (outside testing: rewritten in place at the same size, its mtime set back,
        // a "mode only" guess chmod-ed it and signed it restored), and read back to prove it.
        // Without a pre-image, only the mode can be put back, and that is said.
        c.undo = Some(if c.change == Change::Created {
            // INVARIANT: what marks a directory (`HEAD` and `objects`/`refs`/`commondir`, a
            // `task_request.json`) is removed last, `HEAD` and `task_request.json` very last:
            // an undo cut short by a crash leaves a layout still marked (and the rest of it
            // listed in the persisted findings), or only inert markers — never a planted
            // `config` in a directory no longer taken for a git directory (found by the
            // kill-at-every-durable-write test).
            let in_marked = c
                .rel
                .parent()
                .is_some_and(|p| marked.iter().any(|(d, _)| d == p));
            let rank = match c.rel.file_name() {
                Some(n) if in_marked && (n == "HEAD" || n == "task_request.json") => 2,
                Some(n) if in_marked && GIT_DIR_NAMES.iter().any(|g| n == *g) => 1,
                _ => 0,
            };
            Undo::Remove { rank }
        } else {
            match (was, pre.files.get(&c.rel)) {
                (Some(w), _) if w.kind == Kind::Dir => Undo::Dir,
                (_, Some(_)) if outside.contains(&c.rel) => Undo::InPlace,
                (_, Some(_)) => Undo::PutBack,
                (Some(w), None) if w.kind == Kind::File => Undo::ModeOnly,
                _ => Undo::Nothing,
            }
        });
    }
    // A set-id bit is never the command's to set, in scope or not: stripped and named.
    for (rel, now) in &after.entries {
        let had = before.entries.get(rel).map_or(0, |e| e.mode & 0o6000);
        if now.kind == Kind::File && now.mode & 0o6000 & !had != 0 {
            if let Some(c) = changes.iter_mut().find(|c| c.rel == *rel) {
                // A created entry removed whole needs no stripping.
                if !matches!(c.undo, Some(Undo::Remove { .. })) {
                    c.forbidden = Some("a set-id bit".into());
                    c.undo = Some(Undo::StripSetId);
                }
            } else {
                let mut c = change_of(rel, Change::Changed, None);
                c.forbidden = Some("a set-id bit".into());
                c.undo = Some(Undo::StripSetId);
                changes.push(c);
            }
        }
    }
    if after.root_mode != before.root_mode {
        let mut c = change_of(Path::new(""), Change::Changed, None);
        c.path = ".".into();
        c.forbidden = Some("the workspace root's mode".into());
        c.undo = Some(Undo::RootMode);
        changes.push(c);
    }
    changes
}

/// Undoes every forbidden change of `changes` as its [`Undo`] says, recording each result in
/// [`FileChange::restored`]: removals of created entries first (deepest first, what marks a
/// directory last), then restores in order, set-id bits, the root's mode. Everything it
/// writes comes from `before` and `pre` (never from the change itself): run again on the same
/// findings — a check a crash cut short — it does the same, and what is already undone stays.
pub fn undo(root: &Path, before: &Manifest, changes: &mut [FileChange], pre: &Preimages) {
    // A directory goes no earlier than anything it holds: its rank is the highest of what is
    // removed under it.
    let mut rank_of: BTreeMap<&Path, u8> = changes
        .iter()
        .filter_map(|c| match c.undo {
            Some(Undo::Remove { rank }) => Some((c.rel.as_path(), rank)),
            _ => None,
        })
        .collect();
    let ranked: Vec<(&Path, u8)> = rank_of.iter().map(|(p, r)| (*p, *r)).collect();
    for (rel, rank) in ranked {
        for up in rel.ancestors().skip(1) {
            if let Some(r) = rank_of.get_mut(up) {
                *r = (*r).max(rank);
            }
        }
    }
    let mut removals: Vec<(u8, usize)> = changes
        .iter()
        .enumerate()
        .rev()
        .filter_map(|(i, c)| Some((*rank_of.get(c.rel.as_path())?, i)))
        .collect();
    // Stable: deepest first within a rank (the changes are sorted by path).
    removals.sort_by_key(|(rank, _)| *rank);
    for (_, i) in removals {
        if let Some(c) = changes.get_mut(i) {
            // Only what was not there before is ever removed.
            c.restored = Some(if before.entries.contains_key(&c.rel) {
                Err(ManifestError::NoPreImage {
                    mode_restored: false,
                })
            } else {
                remove_created(root, &c.rel)
            });
        }
    }
    let mode_of = |rel: &Path| before.entries.get(rel).map(|e| e.mode);
    for c in changes.iter_mut() {
        let Some(how) = c.undo.clone() else {
            continue;
        };
        let image = pre.files.get(&c.rel);
        let restored = match (how, image, mode_of(&c.rel)) {
            (Undo::Remove { .. }, _, _) => continue,
            (Undo::Dir, _, Some(mode)) => {
                ensure_dir(root, &c.rel).and_then(|()| set_mode(root, &c.rel, mode))
            }
            (Undo::InPlace, Some((bytes, mode)), _) => rewrite_in_place(root, &c.rel, bytes, *mode)
                .and_then(|()| same_content(root, &c.rel, bytes)),
            (Undo::PutBack, Some((bytes, mode)), _) => put_back(root, &c.rel, bytes, *mode)
                .and_then(|()| same_content(root, &c.rel, bytes)),
            (Undo::ModeOnly, _, Some(mode)) => {
                set_mode(root, &c.rel, mode).and(Err(ManifestError::NoPreImage {
                    mode_restored: true,
                }))
            }
            (Undo::StripSetId, _, _) => std::fs::symlink_metadata(root.join(&c.rel))
                .map_err(|e| ManifestError::os(&c.path, e))
                .and_then(|m| set_mode(root, &c.rel, m.mode() & !0o6000)),
            (Undo::RootMode, _, _) => std::fs::set_permissions(
                root,
                std::fs::Permissions::from_mode(before.root_mode & 0o7777),
            )
            .map_err(|e| ManifestError::os(".", e)),
            (Undo::Dir | Undo::InPlace | Undo::PutBack | Undo::ModeOnly | Undo::Nothing, _, _) => {
                Err(ManifestError::NoPreImage {
                    mode_restored: false,
                })
            }
        };
        c.restored = Some(restored);
    }
}

/// A relative path as shown to people and classified: UTF-8 as it is; any other byte as
/// `\xNN` (a backslash never names a path a grant can reach, so such a path is never in
/// scope, and two different names never show the same).
pub fn shown(rel: &Path) -> String {
    use std::fmt::Write as _;
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in rel.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Every directory on the way to `rel` is a real directory (no link): nothing is removed or
/// written through one.
fn real_ancestors(root: &Path, rel: &Path) -> Result<(), ManifestError> {
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        let meta =
            std::fs::symlink_metadata(&at).map_err(|e| ManifestError::os(at.display(), e))?;
        if !meta.is_dir() {
            return Err(ManifestError::NotDirectoryAnyMore(at.display().to_string()));
        }
    }
    Ok(())
}

/// Puts a mode back on `rel` (never through a link: a link in its place is not chmod-ed).
fn set_mode(root: &Path, rel: &Path, mode: u32) -> Result<(), ManifestError> {
    real_ancestors(root, rel)?;
    let path = root.join(rel);
    let shown = shown(rel);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| ManifestError::os(&shown, e))?;
    if meta.file_type().is_symlink() {
        return Err(ManifestError::NowSymlink(shown));
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
        .map_err(|e| ManifestError::os(&shown, e))
}

fn remove_created(root: &Path, rel: &Path) -> Result<(), ManifestError> {
    match real_ancestors(root, rel) {
        // A directory on the way is gone: so is what it held (an undo finished again).
        Err(ManifestError::Os {
            kind: std::io::ErrorKind::NotFound,
            ..
        }) => return Ok(()),
        other => other?,
    }
    let path = root.join(rel);
    let rel = shown(rel);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ManifestError::os(&rel, e)),
    };
    // `remove_dir_all` does not follow links inside what it removes.
    if meta.is_dir() {
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    }
    .map_err(|e| ManifestError::os(&rel, e))?;
    crate::fsio::durable_point();
    Ok(())
}

/// Makes every directory on the way to `rel` (inclusive) a real directory: a link or file in
/// its place is removed first.
fn ensure_dir(root: &Path, rel: &Path) -> Result<(), ManifestError> {
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => std::fs::remove_file(&at).map_err(|e| ManifestError::os(at.display(), e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ManifestError::os(at.display(), e)),
        }
        std::fs::create_dir(&at).map_err(|e| ManifestError::os(at.display(), e))?;
    }
    Ok(())
}

/// Whether `rel` now reads exactly `bytes` (after a put-back).
fn same_content(root: &Path, rel: &Path, bytes: &[u8]) -> Result<(), ManifestError> {
    match read_no_follow(&root.join(rel)) {
        Ok(now) if now == bytes => Ok(()),
        Ok(_) => Err(ManifestError::ReadsOtherwise(shown(rel))),
        Err(e) => Err(e),
    }
}

/// Puts `bytes` back into the file at `rel` itself, not a new one: its other names (outside
/// the workspace) read them again. Never through a link.
fn rewrite_in_place(root: &Path, rel: &Path, bytes: &[u8], mode: u32) -> Result<(), ManifestError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    real_ancestors(root, rel)?;
    let shown = shown(rel);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(root.join(rel))
        .map_err(|e| ManifestError::os(&shown, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
        .map_err(|e| ManifestError::os(&shown, e))
}

fn put_back(root: &Path, rel: &Path, bytes: &[u8], mode: u32) -> Result<(), ManifestError> {
    let name = rel
        .file_name()
        .ok_or_else(|| ManifestError::NoFileName(shown(rel)))?;
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        ensure_dir(root, parent)?;
    }
    let dir = parent.map_or_else(|| root.to_path_buf(), |p| root.join(p));
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".craik-restore-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    std::fs::write(&tmp, bytes).map_err(|e| ManifestError::os(tmp.display(), e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(|e| ManifestError::os(tmp.display(), e))?;
    let target = dir.join(name);
    if std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&target).map_err(|e| ManifestError::os(target.display(), e))?;
    }
    // A rename replaces a link in the way; it never writes through it.
    std::fs::rename(&tmp, &target).map_err(|e| ManifestError::os(target.display(), e))?;
    crate::fsio::durable_point();
    Ok(())
}

/// A [`Manifest`] as persisted before a command ([`crate::run::precommand`]): every entry with
/// its name's exact bytes (base64), so a recovery after a crash diffs the workspace against
/// exactly what the command started from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedManifest {
    root_mode: u32,
    entries: Vec<SavedEntry>,
}

/// One [`Entry`] as persisted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedEntry {
    /// The relative path's bytes, base64 (standard, padded).
    path: String,
    kind: SavedKind,
    size: u64,
    mode: u32,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link: Option<String>,
    nlink: u64,
    dev: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum SavedKind {
    File,
    Dir,
    Link,
    Other,
    Deep,
}

/// One kept pre-image as persisted: its bytes follow the record's header, in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPreimage {
    /// The relative path's bytes, base64 (standard, padded).
    path: String,
    mode: u32,
    len: u64,
}

/// Why a persisted manifest or its pre-images cannot be taken back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SavedError {
    #[error("a path is not base64: {0}")]
    Base64(String),
    #[error("`{0}` is not a relative path inside the workspace")]
    NotRelative(String),
    #[error("the pre-images hold {held} bytes, their list names {named}")]
    Length { held: u64, named: u64 },
    #[error("`{0}` is not a change (created, changed, removed)")]
    Change(String),
}

fn path_b64(rel: &Path) -> String {
    use base64::Engine as _;
    use std::os::unix::ffi::OsStrExt;
    base64::engine::general_purpose::STANDARD.encode(rel.as_os_str().as_bytes())
}

/// A persisted path back: only plain relative components (never `..`, `/` or `.`).
fn path_from_b64(text: &str) -> Result<PathBuf, SavedError> {
    use base64::Engine as _;
    use std::os::unix::ffi::OsStrExt;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| SavedError::Base64(e.to_string()))?;
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
    let plain = !bytes.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(SavedError::NotRelative(shown(&path)));
    }
    Ok(path)
}

/// A [`FileChange`] as persisted after a command and before its undo (its findings; see
/// [`crate::run::precommand`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedChange {
    /// The relative path's bytes, base64 (empty: the workspace root).
    path: String,
    change: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forbidden: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    undo: Option<Undo>,
}

impl FileChange {
    /// This change, to persist (what was undone is not: the findings come before the undo).
    pub fn saved(&self) -> SavedChange {
        SavedChange {
            path: if self.rel.as_os_str().is_empty() {
                String::new()
            } else {
                path_b64(&self.rel)
            },
            change: self.change.as_str().to_owned(),
            sha256: self.sha256.clone(),
            forbidden: self.forbidden.clone(),
            undo: self.undo.clone(),
        }
    }

    /// A persisted change back (its path checked; only the root's mode names the root).
    pub fn from_saved(saved: SavedChange) -> Result<Self, SavedError> {
        let (rel, path) = if saved.path.is_empty() && saved.undo == Some(Undo::RootMode) {
            (PathBuf::new(), ".".to_owned())
        } else {
            let rel = path_from_b64(&saved.path)?;
            let path = shown(&rel);
            (rel, path)
        };
        let change = match saved.change.as_str() {
            "created" => Change::Created,
            "changed" => Change::Changed,
            "removed" => Change::Removed,
            other => return Err(SavedError::Change(other.to_owned())),
        };
        Ok(Self {
            path,
            rel,
            change,
            sha256: saved.sha256,
            forbidden: saved.forbidden,
            undo: saved.undo,
            restored: None,
        })
    }
}

impl Manifest {
    /// This manifest, to persist.
    pub fn saved(&self) -> SavedManifest {
        SavedManifest {
            root_mode: self.root_mode,
            entries: self
                .entries
                .iter()
                .map(|(rel, e)| SavedEntry {
                    path: path_b64(rel),
                    kind: match e.kind {
                        Kind::File => SavedKind::File,
                        Kind::Dir => SavedKind::Dir,
                        Kind::Link => SavedKind::Link,
                        Kind::Other => SavedKind::Other,
                        Kind::Deep => SavedKind::Deep,
                    },
                    size: e.size,
                    mode: e.mode,
                    ino: e.ino,
                    mtime: e.mtime,
                    ctime: e.ctime,
                    link: e.link.as_deref().map(|l| {
                        use base64::Engine as _;
                        use std::os::unix::ffi::OsStrExt;
                        base64::engine::general_purpose::STANDARD.encode(l.as_os_str().as_bytes())
                    }),
                    nlink: e.nlink,
                    dev: e.dev,
                })
                .collect(),
        }
    }

    /// A persisted manifest back (its paths checked: relative, plain components).
    pub fn from_saved(saved: SavedManifest) -> Result<Self, SavedError> {
        use base64::Engine as _;
        use std::os::unix::ffi::OsStrExt;
        let mut entries = BTreeMap::new();
        for e in saved.entries {
            let link = match e.link {
                Some(l) => Some(PathBuf::from(std::ffi::OsStr::from_bytes(
                    &base64::engine::general_purpose::STANDARD
                        .decode(l)
                        .map_err(|e| SavedError::Base64(e.to_string()))?,
                ))),
                None => None,
            };
            entries.insert(
                path_from_b64(&e.path)?,
                Entry {
                    kind: match e.kind {
                        SavedKind::File => Kind::File,
                        SavedKind::Dir => Kind::Dir,
                        SavedKind::Link => Kind::Link,
                        SavedKind::Other => Kind::Other,
                        SavedKind::Deep => Kind::Deep,
                    },
                    size: e.size,
                    mode: e.mode,
                    ino: e.ino,
                    mtime: e.mtime,
                    ctime: e.ctime,
                    link,
                    nlink: e.nlink,
                    dev: e.dev,
                },
            );
        }
        Ok(Self {
            entries,
            root_mode: saved.root_mode,
        })
    }
}

impl Preimages {
    /// The kept pre-images, to persist: their list, and their bytes one after another.
    pub fn saved(&self) -> (Vec<SavedPreimage>, Vec<&[u8]>) {
        self.files
            .iter()
            .map(|(rel, (bytes, mode))| {
                (
                    SavedPreimage {
                        path: path_b64(rel),
                        mode: *mode,
                        len: bytes.len() as u64,
                    },
                    bytes.as_slice(),
                )
            })
            .unzip()
    }

    /// Persisted pre-images back from their list and `blob` (their bytes one after another;
    /// it must hold exactly what the list names).
    pub fn from_saved(
        list: Vec<SavedPreimage>,
        blob: &[u8],
        skipped: Vec<String>,
    ) -> Result<Self, SavedError> {
        let named = list.iter().fold(0u64, |n, p| n.saturating_add(p.len));
        let held = blob.len() as u64;
        if named != held {
            return Err(SavedError::Length { held, named });
        }
        let mut files = BTreeMap::new();
        let mut rest = blob;
        for p in list {
            let len = usize::try_from(p.len).map_err(|_| SavedError::Length { held, named })?;
            let (bytes, after) = rest
                .split_at_checked(len)
                .ok_or(SavedError::Length { held, named })?;
            files.insert(path_from_b64(&p.path)?, (bytes.to_vec(), p.mode & 0o7777));
            rest = after;
        }
        Ok(Self { files, skipped })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The changes in `root` since `before`, settled with `src/**` as the write scope.
    fn settle_under_src(root: &Path, before: &Manifest, pre: &Preimages) -> Vec<FileChange> {
        let after = Manifest::scan(root).unwrap();
        let none = craik_kernel::ImmutablePaths::default();
        settle(
            root,
            before,
            &after,
            &[Scope::Under("src".into())],
            &none,
            pre,
        )
    }

    /// Outside testing (round 6): a file in the write scope hard-linked to a file outside the
    /// workspace, written in place, is a forbidden change put back in place, so the outside
    /// name reads its old bytes again; a file replaced by a new one (its link broken) is the
    /// command's change and nothing outside moved.
    #[test]
    fn issue_18_a_write_through_a_link_out_of_the_workspace_is_undone_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (root, store) = (dir.path().join("ws"), dir.path().join("store"));
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("a.js"), "a\n").unwrap();
        std::fs::write(store.join("b.js"), "b\n").unwrap();
        std::fs::hard_link(store.join("a.js"), root.join("src/a.js")).unwrap();
        std::fs::hard_link(store.join("b.js"), root.join("src/b.js")).unwrap();
        // Two names inside, none outside: not linked outside.
        std::fs::write(root.join("src/c.js"), "c\n").unwrap();
        std::fs::hard_link(root.join("src/c.js"), root.join("src/d.js")).unwrap();
        let before = Manifest::scan(&root).unwrap();
        assert_eq!(
            before.linked_outside(),
            vec![PathBuf::from("src/a.js"), PathBuf::from("src/b.js")]
        );
        let pre = Preimages::take(&root, &before, &craik_kernel::ImmutablePaths::default());
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("src/a.js"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"pwned\n"))
            .unwrap();
        std::fs::remove_file(root.join("src/b.js")).unwrap();
        std::fs::write(root.join("src/b.js"), "mine\n").unwrap();
        let changes = settle_under_src(&root, &before, &pre);
        let a = changes.iter().find(|c| c.path == "src/a.js").unwrap();
        assert!(
            a.forbidden
                .as_deref()
                .unwrap()
                .contains("outside the workspace"),
            "{a:?}"
        );
        assert_eq!(a.restored, Some(Ok(())));
        assert_eq!(std::fs::read_to_string(store.join("a.js")).unwrap(), "a\n");
        let b = changes.iter().find(|c| c.path == "src/b.js").unwrap();
        assert_eq!(b.forbidden, None, "{b:?}");
        assert_eq!(std::fs::read_to_string(store.join("b.js")).unwrap(), "b\n");
        assert_eq!(
            std::fs::read_to_string(root.join("src/b.js")).unwrap(),
            "mine\n"
        );
    }

    /// Outside testing (round 5): a protected file rewritten in place at the same size with
    /// its mtime set back is put back from its pre-image and proven; a file outside the scope
    /// changed through a hard link inside it is put back too (files with several links keep a
    /// pre-image); without a pre-image, "restored" is never claimed for content.
    #[test]
    fn an_undo_is_proven_whatever_the_times_and_links_say() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("src/a")).unwrap();
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("lib/f"), "good").unwrap();
        std::fs::hard_link(root.join("lib/f"), root.join("src/a/h")).unwrap();
        std::fs::write(root.join("lib/g"), "keep").unwrap();
        let none = craik_kernel::ImmutablePaths::default();
        let before = Manifest::scan(root).unwrap();
        let pre = Preimages::take(root, &before, &none);
        // Same size, mtime put back: only the change time moved.
        let stealth = |path: &Path, bytes: &str| {
            let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
            std::fs::write(path, bytes).unwrap();
            let f = std::fs::File::options().write(true).open(path).unwrap();
            f.set_times(std::fs::FileTimes::new().set_modified(mtime))
                .unwrap();
        };
        stealth(&root.join(".git/config"), "[evil]\n");
        stealth(&root.join("src/a/h"), "EVIL");
        let changes = settle_under_src(root, &before, &pre);
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(std::fs::read_to_string(root.join("lib/f")).unwrap(), "good");
        for path in [".git/config", "lib/f"] {
            let c = changes.iter().find(|c| c.path == path).unwrap();
            assert_eq!(c.restored, Some(Ok(())), "{path}: {changes:?}");
        }
        // No pre-image (a single-link file outside the scope, same size, mtime set back): the
        // mode goes back, the content is said not to.
        let before = Manifest::scan(root).unwrap();
        let empty = Preimages::default();
        stealth(&root.join("lib/g"), "BAD!");
        let changes = settle_under_src(root, &before, &empty);
        let c = changes.iter().find(|c| c.path == "lib/g").unwrap();
        assert!(
            c.restored.as_ref().is_some_and(|r| matches!(
                r,
                Err(ManifestError::NoPreImage {
                    mode_restored: true
                })
            )),
            "{c:?}"
        );
    }

    /// The paths of the forbidden changes.
    fn forbidden_paths(changes: &[FileChange]) -> Vec<&str> {
        changes
            .iter()
            .filter(|c| c.forbidden.is_some())
            .map(|c| c.path.as_str())
            .collect()
    }

    #[test]
    fn write_scopes_are_exact_or_refused() {
        assert_eq!(Scope::parse("/w", "**"), Ok(Scope::All));
        assert_eq!(
            Scope::parse("/w", "target/**"),
            Ok(Scope::Under("target".into()))
        );
        assert_eq!(
            Scope::parse("/w", "out.txt"),
            Ok(Scope::File("out.txt".into()))
        );
        for bad in [
            "*.log",
            "**/x",
            "src/*.rs",
            "../x/**",
            "/etc/**",
            ".git/**",
            ".github/workflows/**",
            "a/[b]/**",
            "",
        ] {
            assert!(Scope::parse("/w", bad).is_err(), "{bad}");
        }
        assert!(Scope::Under("target".into()).holds("target/debug/x"));
        assert!(!Scope::Under("target".into()).holds("target-evil/x"));
    }

    #[test]
    fn a_change_to_an_immutable_path_is_forbidden_and_undone_whatever_the_scope() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("docs/adr")).unwrap();
        std::fs::write(root.join("docs/adr/0001.md"), "decided").unwrap();
        let immutable = craik_kernel::ImmutablePaths::new(&["docs/adr/**".to_owned()]).unwrap();
        let before = Manifest::scan(root).unwrap();
        assert_eq!(
            before.protected(&immutable),
            vec![PathBuf::from("docs/adr")]
        );
        let pre = Preimages::take(root, &before, &immutable);
        std::fs::write(root.join("docs/adr/0001.md"), "rewritten").unwrap();
        std::fs::write(root.join("docs/adr/0002.md"), "new").unwrap();
        std::fs::write(root.join("docs/guide.md"), "fine").unwrap();
        let after = Manifest::scan(root).unwrap();
        let changes = settle(root, &before, &after, &[Scope::All], &immutable, &pre);
        let forbidden: Vec<(&str, bool)> = changes
            .iter()
            .map(|c| {
                (
                    c.path.as_str(),
                    c.forbidden
                        .as_deref()
                        .is_some_and(|w| w.contains("immutable")),
                )
            })
            .collect();
        assert_eq!(
            forbidden,
            vec![
                ("docs/adr/0001.md", true),
                ("docs/adr/0002.md", true),
                ("docs/guide.md", false)
            ]
        );
        assert_eq!(
            std::fs::read_to_string(root.join("docs/adr/0001.md")).unwrap(),
            "decided"
        );
        assert!(!root.join("docs/adr/0002.md").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("docs/guide.md")).unwrap(),
            "fine"
        );
    }

    #[test]
    fn issue_18_a_tree_too_deep_to_walk_never_disables_the_check() {
        // Outside testing: planted `.git/config` and `.envrc` in scope, then a tree deeper than
        // PATH_MAX made the whole after-check fail, so nothing was restored or recorded.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        let before = Manifest::scan(root).unwrap();
        let none = craik_kernel::ImmutablePaths::default();
        let pre = Preimages::take(root, &before, &none);
        std::fs::create_dir_all(root.join("src/sub/.git")).unwrap();
        std::fs::write(
            root.join("src/sub/.git/config"),
            "[core]\nfsmonitor = evil\n",
        )
        .unwrap();
        std::fs::write(root.join("src/.envrc"), "evil").unwrap();
        // Deeper than the depth bound, and longer than PATH_MAX from the root (built level by
        // level from descriptors).
        for (top, name, levels) in [
            ("src/a", "d".to_owned(), 70),
            ("src/b", "e".repeat(200), 30),
        ] {
            std::fs::create_dir_all(root.join(top)).unwrap();
            let mut fd = rustix::fs::open(
                root.join(top),
                rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            for _ in 0..levels {
                rustix::fs::mkdirat(&fd, name.as_str(), rustix::fs::Mode::RWXU).unwrap();
                fd = rustix::fs::openat(
                    &fd,
                    name.as_str(),
                    rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
                    rustix::fs::Mode::empty(),
                )
                .unwrap();
            }
            let hidden = rustix::fs::openat(
                &fd,
                ".git",
                rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY,
                rustix::fs::Mode::RUSR,
            );
            assert!(hidden.is_ok());
        }
        let changes = settle_under_src(root, &before, &pre);
        let forbidden = forbidden_paths(&changes);
        assert!(forbidden.contains(&"src/sub/.git"), "{forbidden:?}");
        assert!(forbidden.contains(&"src/.envrc"), "{forbidden:?}");
        assert!(
            changes
                .iter()
                .filter(|c| c.forbidden.is_some())
                .all(|c| c.restored == Some(Ok(()))),
            "{changes:?}"
        );
        assert!(!root.join("src/sub/.git").exists());
        assert!(!root.join("src/.envrc").exists());
        // Below the depth bound: the too-deep directory itself is forbidden and removed whole.
        let too_deep: Vec<&FileChange> = changes
            .iter()
            .filter(|c| {
                c.forbidden
                    .as_deref()
                    .is_some_and(|f| f.contains("too deep"))
            })
            .collect();
        assert_eq!(too_deep.len(), 2, "{changes:?}");
        for c in too_deep {
            assert!(
                c.rel.components().count() == MAX_DEPTH || c.rel.as_os_str().len() > MAX_PATH_BYTES,
                "{}",
                c.path
            );
            assert!(!root.join(&c.rel).exists());
        }
        // What is left verifies clean.
        let again = Manifest::scan(root).unwrap();
        assert!(
            settle(
                root,
                &before,
                &again,
                &[Scope::Under("src".into())],
                &none,
                &pre
            )
            .iter()
            .all(|c| c.forbidden.is_none())
        );
    }

    #[test]
    fn issue_18_when_the_check_cannot_run_the_sweep_still_undoes_what_is_forbidden() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("src.rs"), "fn main() {}\n").unwrap();
        let none = craik_kernel::ImmutablePaths::default();
        let before = Manifest::scan(root).unwrap();
        let pre = Preimages::take(root, &before, &none);
        // What a flooding command leaves besides its flood (which is in scope).
        std::fs::write(root.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::create_dir_all(root.join("out/sub/.git")).unwrap();
        std::fs::write(root.join("out/sub/.git/config"), "x").unwrap();
        std::fs::write(root.join("out/.envrc"), "x").unwrap();
        std::fs::write(root.join("out/fine.txt"), "x").unwrap();
        std::fs::write(root.join("src.rs"), "evil").unwrap();
        let (undone, failed) =
            sweep_forbidden(root, &before, &[Scope::Under("out".into())], &none, &pre);
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!root.join("out/sub/.git").exists());
        assert!(!root.join("out/.envrc").exists());
        assert!(root.join("out/fine.txt").exists());
        for u in ["out/sub/.git", "out/.envrc", ".git/config"] {
            assert!(undone.iter().any(|d| d == u), "{u}: {undone:?}");
        }
        // An out-of-scope change of a file with no pre-image is not undone by the sweep (the
        // step fails all the same).
        assert_eq!(
            std::fs::read_to_string(root.join("src.rs")).unwrap(),
            "evil"
        );
    }

    #[test]
    fn issue_18_a_bare_repository_or_a_task_directory_under_any_name_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/tasks/t1/grants")).unwrap();
        std::fs::write(root.join("src/tasks/t1/task_request.json"), "{}").unwrap();
        let none = craik_kernel::ImmutablePaths::default();
        let before = Manifest::scan(root).unwrap();
        let pre = Preimages::take(root, &before, &none);
        for d in ["src/b/objects", "src/b/refs"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("src/b/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("src/b/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::write(root.join("src/tasks/t1/grants/evil.json"), "{}").unwrap();
        std::fs::write(root.join("src/tasks/t1/task_request.json"), "{\"evil\":1}").unwrap();
        std::fs::write(root.join("src/ok.rs"), "x").unwrap();
        let changes = settle_under_src(root, &before, &pre);
        let bad = forbidden_paths(&changes);
        for p in [
            "src/b/HEAD",
            "src/b/config",
            "src/tasks/t1/grants/evil.json",
        ] {
            assert!(bad.contains(&p), "{p}: {bad:?}");
            assert!(!root.join(p).exists(), "{p}");
        }
        assert!(!bad.contains(&"src/ok.rs"));
        assert!(root.join("src/ok.rs").exists());
        // A changed file of a task directory is put back from its pre-image.
        assert_eq!(
            std::fs::read_to_string(root.join("src/tasks/t1/task_request.json")).unwrap(),
            "{}"
        );
    }

    /// How a command may make `dir` a git directory: `HEAD` (a file or a link) with one of
    /// `objects`, `refs` (a directory, an executable file, a link) or a `commondir` file.
    fn plant_git_dir(root: &Path, dir: &str, head_link: bool, other: &str, kind: &str) {
        use std::os::unix::fs::PermissionsExt;
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        if head_link {
            std::os::unix::fs::symlink("refs/heads/main", d.join("HEAD")).unwrap();
        } else {
            std::fs::write(d.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        let at = d.join(other);
        match kind {
            "dir" => std::fs::create_dir_all(&at).unwrap(),
            "file" => {
                std::fs::write(&at, "../common\n").unwrap();
                std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            _ => std::os::unix::fs::symlink("/tmp", &at).unwrap(),
        }
        std::fs::write(d.join("config"), "[core]\n\tpager = touch /tmp/pwned\n").unwrap();
    }

    /// Round 6 (R6-A), generated: every way a command may make a git directory under any name
    /// in its write scope — HEAD a file or a link, with objects, refs or commondir as a
    /// directory, an executable file or a link — is forbidden and removed whole; a runner's
    /// write completing one is refused; a `commondir`'s target in the workspace is protected.
    #[test]
    fn issue_18_every_git_directory_layout_is_protected() {
        let mut n = 0;
        for head_link in [false, true] {
            for other in GIT_DIR_NAMES {
                for kind in ["dir", "file", "link"] {
                    n += 1;
                    let dir = tempfile::tempdir().unwrap();
                    let root = dir.path();
                    std::fs::create_dir_all(root.join("src/lib")).unwrap();
                    let before = Manifest::scan(root).unwrap();
                    let pre =
                        Preimages::take(root, &before, &craik_kernel::ImmutablePaths::default());
                    plant_git_dir(root, "src/lib/v", head_link, other, kind);
                    let changes = settle_under_src(root, &before, &pre);
                    let what = format!("HEAD link {head_link}, {other} as {kind}");
                    for name in ["HEAD", other, "config"] {
                        let rel = format!("src/lib/v/{name}");
                        let c = changes.iter().find(|c| c.path == rel).unwrap();
                        assert!(c.forbidden.is_some(), "{what}: {c:?}");
                        assert_eq!(c.restored, Some(Ok(())), "{what}: {c:?}");
                        assert!(
                            std::fs::symlink_metadata(root.join(&rel)).is_err(),
                            "{what}: {rel}"
                        );
                    }
                    // A runner's write never completes one either.
                    let dir = tempfile::tempdir().unwrap();
                    let root = dir.path();
                    plant_git_dir(root, "docs/v", head_link, other, kind);
                    std::fs::remove_file(root.join("docs/v/HEAD")).unwrap();
                    assert!(layout_refusal(root, "docs/v/HEAD").is_some(), "{what}");
                    assert!(layout_refusal(root, "docs/v/x.md").is_none(), "{what}");
                    std::fs::write(root.join("docs/v/HEAD"), "x").unwrap();
                    assert!(layout_refusal(root, "docs/v/config").is_some(), "{what}");
                }
            }
        }
        assert_eq!(n, 18);
        // A split present before the command: both halves are marked (read-only, checked).
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        plant_git_dir(root, "src/vendor/lib", false, "commondir", "file");
        std::fs::write(root.join("src/vendor/lib/commondir"), "../.meta\n").unwrap();
        std::fs::create_dir_all(root.join("src/vendor/.meta/objects")).unwrap();
        std::fs::write(root.join("src/vendor/.meta/config"), "[core]\n").unwrap();
        let before = Manifest::scan(root).unwrap();
        let marked: Vec<PathBuf> = marked_dirs(root, &[&before])
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        assert!(
            marked.contains(&PathBuf::from("src/vendor/lib")),
            "{marked:?}"
        );
        assert!(
            marked.contains(&PathBuf::from("src/vendor/.meta")),
            "{marked:?}"
        );
        let pre = Preimages::take(root, &before, &craik_kernel::ImmutablePaths::default());
        std::fs::write(
            root.join("src/vendor/.meta/config"),
            "[core]\n\tpager = x\n",
        )
        .unwrap();
        let changes = settle_under_src(root, &before, &pre);
        let c = changes
            .iter()
            .find(|c| c.path == "src/vendor/.meta/config")
            .unwrap();
        assert!(c.forbidden.is_some(), "{c:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("src/vendor/.meta/config")).unwrap(),
            "[core]\n"
        );
        // A commondir naming something outside the workspace marks nothing outside.
        std::fs::write(root.join("src/vendor/lib/commondir"), "../../../../etc\n").unwrap();
        let again = Manifest::scan(root).unwrap();
        assert!(
            marked_dirs(root, &[&again])
                .iter()
                .all(|(d, _)| !d.starts_with(".."))
        );
    }

    /// Round 7 (R7-2), generated: however `commondir` leads to the common directory — a
    /// link to a file naming it, an absolute path through a link outside the workspace that
    /// points back in, `..` through a link — it is found and protected; what cannot be
    /// resolved as git would (`/proc/self/cwd/..`) protects the whole workspace.
    #[test]
    fn issue_18_a_common_directory_is_found_however_commondir_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("ws");
        std::fs::create_dir_all(root.join("src/common/objects")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(&root, base.join("elsewhere/back")).unwrap();
        std::fs::write(base.join("elsewhere/cd.txt"), "../common\n").unwrap();
        let abs_via_link = format!("{}/back/src/common\n", base.join("elsewhere").display());
        type Make<'a> = Box<dyn Fn(&Path) + 'a>;
        let cases: Vec<(&str, Make<'_>, Option<&str>)> = vec![
            (
                "plain",
                Box::new(|d: &Path| std::fs::write(d.join("commondir"), "../common\n").unwrap()),
                Some("src/common"),
            ),
            (
                "a link to a file",
                Box::new(|d: &Path| {
                    std::os::unix::fs::symlink(base.join("elsewhere/cd.txt"), d.join("commondir"))
                        .unwrap()
                }),
                Some("src/common"),
            ),
            (
                "absolute through a link back in",
                Box::new(move |d: &Path| {
                    std::fs::write(d.join("commondir"), &abs_via_link).unwrap()
                }),
                Some("src/common"),
            ),
            (
                "through /proc",
                Box::new(|d: &Path| {
                    std::fs::write(d.join("commondir"), "/proc/self/cwd/../common\n").unwrap()
                }),
                Some(""),
            ),
            (
                "a FIFO",
                Box::new(|d: &Path| {
                    rustix::fs::mknodat(
                        rustix::fs::CWD,
                        d.join("commondir"),
                        rustix::fs::FileType::Fifo,
                        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
                        0,
                    )
                    .unwrap()
                }),
                Some(""),
            ),
        ];
        for (what, make, want) in cases {
            let wt = root.join("src/wt");
            let _ = std::fs::remove_dir_all(&wt);
            std::fs::create_dir_all(&wt).unwrap();
            std::fs::write(wt.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            make(&wt);
            let m = Manifest::scan(&root).unwrap();
            let marked: Vec<PathBuf> = marked_dirs(&root, &[&m])
                .into_iter()
                .map(|(d, _)| d)
                .collect();
            assert!(
                marked.contains(&PathBuf::from("src/wt")),
                "{what}: {marked:?}"
            );
            if let Some(want) = want {
                assert!(marked.contains(&PathBuf::from(want)), "{what}: {marked:?}");
            }
        }
    }

    #[test]
    fn issue_18_a_runner_write_never_completes_a_bare_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("docs/guide/objects")).unwrap();
        std::fs::create_dir_all(root.join("docs/guide/refs")).unwrap();
        std::fs::create_dir_all(root.join("docs/t")).unwrap();
        std::fs::write(root.join("docs/t/task_request.json"), "{}").unwrap();
        assert!(layout_refusal(root, "docs/guide/HEAD").is_some());
        assert!(layout_refusal(root, "docs/guide/config").is_none());
        std::fs::write(root.join("docs/guide/HEAD"), "x").unwrap();
        assert!(layout_refusal(root, "docs/guide/config").is_some());
        assert!(layout_refusal(root, "docs/guide/objects/README.md").is_some());
        assert!(layout_refusal(root, "docs/t/grants/evil.json").is_some());
        assert!(layout_refusal(root, "docs/t/task_request.json").is_some());
        assert!(layout_refusal(root, "docs/other.md").is_none());
        assert!(layout_refusal(root, "README.md").is_none());
    }

    #[test]
    fn forbidden_changes_are_undone_and_allowed_ones_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        let before = Manifest::scan(root).unwrap();
        let pre = Preimages::take(root, &before, &craik_kernel::ImmutablePaths::default());
        std::fs::write(root.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/out"), "o").unwrap();
        std::fs::write(root.join(".envrc"), "evil").unwrap();
        let after = Manifest::scan(root).unwrap();
        let changes = settle(
            root,
            &before,
            &after,
            &[Scope::Under("target".into())],
            &craik_kernel::ImmutablePaths::default(),
            &pre,
        );
        let names: Vec<(&str, &str, bool)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change.as_str(), c.forbidden.is_some()))
            .collect();
        assert_eq!(
            names,
            vec![
                (".envrc", "created", true),
                (".git/config", "changed", true),
                (".git/hooks/pre-commit", "created", true),
                ("target", "created", false),
                ("target/out", "created", false),
            ]
        );
        assert!(
            changes
                .iter()
                .filter(|c| c.forbidden.is_some())
                .all(|c| c.restored == Some(Ok(())))
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(!root.join(".envrc").exists());
        assert!(root.join("target/out").exists());
        // Mode changes: a protected dir's, an out-of-scope file's, the root's, a set-id bit.
        let before = Manifest::scan(root).unwrap();
        let pre = Preimages::take(root, &before, &craik_kernel::ImmutablePaths::default());
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&root.join(".git"), 0o777);
        mode(&root.join("src/a.rs"), 0o666);
        mode(root, 0o777);
        mode(&root.join("target/out"), 0o4755);
        let after = Manifest::scan(root).unwrap();
        let changes = settle(
            root,
            &before,
            &after,
            &[Scope::Under("target".into())],
            &craik_kernel::ImmutablePaths::default(),
            &pre,
        );
        let bad: Vec<&str> = changes
            .iter()
            .filter(|c| c.forbidden.is_some())
            .map(|c| c.path.as_str())
            .collect();
        assert_eq!(
            bad,
            vec![".git", "src/a.rs", "target/out", "."],
            "{changes:?}"
        );
        // The out-of-scope file has no pre-image: its mode is put back, and the record says
        // its content could not be (a same-size rewrite with the mtime set back looks alike).
        assert!(
            changes
                .iter()
                .filter(|c| c.path != "src/a.rs")
                .all(|c| c.restored.as_ref().is_none_or(Result::is_ok)),
            "{changes:?}"
        );
        let a = changes.iter().find(|c| c.path == "src/a.rs").unwrap();
        assert!(
            a.restored.as_ref().is_some_and(|r| matches!(
                r,
                Err(ManifestError::NoPreImage {
                    mode_restored: true
                })
            )),
            "{a:?}"
        );
        let m = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(m(&root.join("src/a.rs")), 0o644);
        assert_eq!(m(&root.join("target/out")) & 0o6000, 0);
        assert_ne!(m(&root.join(".git")), 0o777);
        assert_ne!(m(root), 0o777);
    }

    /// Red-team round 2: a non-UTF-8 name and its lossy rendering were one key, and the
    /// restore followed a symlink named like the rendering to delete a `.git` outside.
    #[test]
    fn issue_18_names_are_exact_bytes_and_never_collide() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir_all(victim.join(".git")).unwrap();
        std::fs::write(victim.join(".git/HEAD"), "ref").unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("out")).unwrap();
        let before = Manifest::scan(&root).unwrap();
        let raw = root.join("out").join(std::ffi::OsStr::from_bytes(b"a\xff"));
        std::fs::create_dir_all(raw.join(".git")).unwrap();
        std::fs::write(raw.join(".git/config"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, root.join("out/a\u{fffd}")).unwrap();
        let after = Manifest::scan(&root).unwrap();
        let pre = Preimages::take(&root, &before, &craik_kernel::ImmutablePaths::default());
        let changes = settle(
            &root,
            &before,
            &after,
            &[Scope::Under("out".into())],
            &craik_kernel::ImmutablePaths::default(),
            &pre,
        );
        assert!(victim.join(".git/HEAD").exists(), "{changes:?}");
        assert!(!raw.exists(), "{changes:?}");
        let shown: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert!(shown.contains(&"out/a\\xff"), "{shown:?}");
        assert!(shown.contains(&"out/a\u{fffd}"), "{shown:?}");
    }
}
