//! A pinned tree (a `prebundled` entry's directory, an `npx`/`uvx` install): its digest, what
//! it looked like on disk when that digest was taken, and whether what its launcher loads
//! stays inside it (issue 32, outside testing round r32 F5/F6).
//!
//! - [`digest`]: every file's path, permission bits and sha256 (read in chunks: claude's
//!   native binary is 373 MB), and every directory, empty ones included. Links are refused.
//! - [`TreeStat`]: the `stat` of every entry (device, inode, type and mode, size, mtime and
//!   ctime to the nanosecond), taken before and after the digest; equal, they say the digest
//!   is of the bytes that were there. The supervisor compares the tree with it before and
//!   after every step: a file rewritten, replaced, restored or re-moded changes its ctime,
//!   which no process without root can set back, so a CLI re-executed at each step runs the
//!   pinned bytes or the step is refused.
//! - [`npm_escape`]: for a launcher inside an npm package, every dependency named by the
//!   package manifests it reaches (`dependencies`, `optionalDependencies`,
//!   `peerDependencies`, transitively) is resolved as node does — the `node_modules`
//!   directories of the requiring package's ancestors, nearest first, then node's global
//!   folders — and must resolve inside the tree (or nowhere, for an optional one): codex's
//!   launcher starts the native binary of a sibling package, which a tree one level too deep
//!   left unpinned.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use sha2::Digest as _;

/// The most entries a pinned tree may hold (gemini-cli 0.61.0 with its dependencies: ~930).
const MAX_ENTRIES: usize = 1_000_000;

/// The most packages [`npm_escape`] follows.
const MAX_PACKAGES: usize = 50_000;

/// How recent a change [`TreeStat::around`] waits out: well over a coarse clock tick.
const RACY: std::time::Duration = std::time::Duration::from_millis(50);

/// How long [`TreeStat::around`] waits for a tree to stop changing.
const RACY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The tree's entries, sorted by path relative to it, links refused.
fn entries(root: &Path) -> Result<BTreeMap<PathBuf, std::fs::Metadata>, String> {
    let meta = std::fs::symlink_metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "{}: not a directory (a link is not followed)",
            root.display()
        ));
    }
    let mut found = BTreeMap::new();
    found.insert(PathBuf::new(), meta);
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let listing = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in listing {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = entry.path();
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if meta.is_dir() {
                todo.push(path.clone());
            } else if !meta.is_file() {
                return Err(format!(
                    "{}: neither a file nor a directory (links are refused)",
                    path.display()
                ));
            }
            let rel = path
                .strip_prefix(root)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .to_path_buf();
            found.insert(rel, meta);
            if found.len() > MAX_ENTRIES {
                return Err(format!(
                    "{}: more than {MAX_ENTRIES} entries",
                    root.display()
                ));
            }
        }
    }
    Ok(found)
}

/// `sha256:` of the tree: over the sorted lines `d <path>` (a directory) and
/// `f <path> NUL <mode, octal> NUL <sha256 of the file>` (a file), each ending in a newline,
/// paths relative to the tree.
pub fn digest(root: &Path) -> Result<String, String> {
    let mut hasher = sha2::Sha256::new();
    for (rel, meta) in entries(root)? {
        let name = rel.to_string_lossy();
        if meta.is_dir() {
            hasher.update(format!("d {name}\n").as_bytes());
        } else {
            let path = root.join(&rel);
            let file =
                std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let sha =
                super::pin::digest_reader(file).map_err(|e| format!("{}: {e}", path.display()))?;
            hasher.update(format!("f {name}\0{:o}\0{sha}\n", meta.mode() & 0o7777).as_bytes());
        }
    }
    Ok(format!(
        "sha256:{}",
        craik_kernel::to_hex(&hasher.finalize())
    ))
}

/// One entry's `stat`, as far as a change of its content, kind or mode shows in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A pinned tree as it was on disk ([`TreeStat::around`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeStat {
    root: PathBuf,
    entries: BTreeMap<PathBuf, Stat>,
}

impl TreeStat {
    /// The stat of `root`, a directory (every entry) or a single file.
    fn take(root: &Path) -> Result<Self, String> {
        let meta =
            std::fs::symlink_metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
        let entries = if meta.is_file() {
            BTreeMap::from([(PathBuf::new(), Stat::of(&meta))])
        } else {
            entries(root)?
                .iter()
                .map(|(rel, meta)| (rel.clone(), Stat::of(meta)))
                .collect()
        };
        Ok(Self {
            root: root.to_path_buf(),
            entries,
        })
    }

    /// The newest ctime among the entries.
    fn newest(&self) -> Option<(i64, i64)> {
        self.entries.values().map(|s| s.ctime).max()
    }

    /// Runs `hash` over the file or tree at `root` between two stats of it: the digest and the
    /// stat it was taken at, or an error when it changed meanwhile.
    ///
    /// File times come from the kernel's coarse clock (a tick of up to 10 ms): a change in the
    /// same tick as an entry's last one would leave its ctime as it was. So an entry changed
    /// within [`RACY`] of the first stat is waited out (the stat taken again), as git treats a
    /// "racily clean" index entry; after [`RACY_WAIT`] of changes it is an error.
    pub fn around(
        root: &Path,
        hash: impl FnOnce() -> Result<String, String>,
    ) -> Result<(String, Self), String> {
        let waited = std::time::Instant::now();
        let before = loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|e| e.to_string())?;
            let stat = Self::take(root)?;
            let limit = now.saturating_sub(RACY);
            let limit = (
                i64::try_from(limit.as_secs()).unwrap_or(i64::MAX),
                i64::from(limit.subsec_nanos()),
            );
            if stat.newest().is_none_or(|newest| newest < limit) {
                break stat;
            }
            if waited.elapsed() > RACY_WAIT {
                return Err("it keeps changing".into());
            }
            std::thread::sleep(RACY);
        };
        let digest = hash()?;
        let after = Self::take(root)?;
        match before.difference(&after) {
            None => Ok((digest, before)),
            Some(what) => Err(format!("it changed while it was being hashed: {what}")),
        }
    }

    /// `None` when the tree on disk is as it was; else the first difference, named.
    pub fn changed(&self) -> Option<String> {
        match Self::take(&self.root) {
            Ok(now) => self.difference(&now),
            Err(why) => Some(why),
        }
    }

    fn difference(&self, now: &Self) -> Option<String> {
        let names: BTreeSet<&PathBuf> = self.entries.keys().chain(now.entries.keys()).collect();
        names.into_iter().find_map(|rel| {
            let path = self.root.join(rel);
            match (self.entries.get(rel), now.entries.get(rel)) {
                (Some(a), Some(b)) if a == b => None,
                (Some(_), Some(_)) => Some(format!("`{}` was modified", path.display())),
                (Some(_), None) => Some(format!("`{}` was removed", path.display())),
                (None, _) => Some(format!("`{}` was added", path.display())),
            }
        })
    }
}

/// The package directory holding `file` inside `tree`: its nearest ancestor (inside the tree)
/// with a `package.json`.
fn package_of(tree: &Path, file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .take_while(|d| d.starts_with(tree))
        .find(|d| d.join("package.json").is_file())
        .map(Path::to_path_buf)
}

/// Where node finds package `name` required from package directory `from`: the first
/// `<ancestor>/node_modules/<name>` that is a directory (ancestors named `node_modules`
/// skipped, as node does), else in node's global folders.
fn resolve(name: &str, from: &Path) -> Option<PathBuf> {
    let local = from
        .ancestors()
        .filter(|d| d.file_name().is_none_or(|n| n != "node_modules"))
        .map(|d| d.join("node_modules").join(name));
    let global = ["/usr/local/lib/node", "/usr/lib/node"]
        .into_iter()
        .map(|d| Path::new(d).join(name));
    local
        .chain(global)
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() || m.is_symlink()))
}

/// The dependencies a manifest names: (name, required).
fn dependencies(manifest: &Path) -> Result<Vec<(String, bool)>, String> {
    let bytes = crate::fsio::read_bounded(manifest, 16 << 20)
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut names = Vec::new();
    for (field, required) in [
        ("dependencies", true),
        ("optionalDependencies", false),
        ("peerDependencies", false),
    ] {
        match value.get(field) {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Object(map)) => {
                names.extend(map.keys().map(|k| (k.clone(), required)));
            }
            Some(other) => {
                return Err(format!(
                    "{}: `{field}` is not an object ({other})",
                    manifest.display()
                ));
            }
        }
    }
    Ok(names)
}

/// Why the npm package `launcher` lies in can load code from outside `tree` (`None`: every
/// dependency it reaches resolves inside the tree, or — an optional one — nowhere). A launcher
/// in no package has nothing to check.
pub(super) fn npm_escape(tree: &Path, launcher: &Path) -> Option<String> {
    let first = package_of(tree, launcher)?;
    let mut seen = BTreeSet::from([first.clone()]);
    let mut todo = VecDeque::from([first]);
    while let Some(package) = todo.pop_front() {
        let names = match dependencies(&package.join("package.json")) {
            Ok(names) => names,
            Err(why) => return Some(why),
        };
        for (name, required) in names {
            if name.is_empty()
                || name
                    .split('/')
                    .any(|part| part.is_empty() || part == "." || part == "..")
            {
                return Some(format!(
                    "{}: a dependency name `{}` that is not a package name",
                    package.join("package.json").display(),
                    craik_contracts::Truncated(&name)
                ));
            }
            match resolve(&name, &package).map(|p| p.canonicalize().unwrap_or(p)) {
                Some(found) if found.starts_with(tree) => {
                    if !seen.insert(found.clone()) {
                        continue;
                    }
                    if seen.len() > MAX_PACKAGES {
                        return Some(format!(
                            "{}: more than {MAX_PACKAGES} packages",
                            tree.display()
                        ));
                    }
                    todo.push_back(found);
                }
                Some(found) => {
                    return Some(format!(
                        "`{name}`, a dependency of `{}`, resolves to `{}`, outside the pinned tree `{}`: what the launcher loads would run unpinned; pin the install prefix's `node_modules` that holds it (`--source`)",
                        package.display(),
                        found.display(),
                        tree.display()
                    ));
                }
                None if required => {
                    return Some(format!(
                        "`{name}`, a dependency of `{}`, is not installed in the pinned tree `{}`",
                        package.display(),
                        tree.display()
                    ));
                }
                None => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
