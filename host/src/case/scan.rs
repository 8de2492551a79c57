//! The bounded walk of a repository a case file is built from, and the bounded read of one
//! file. Nothing here follows a symbolic link: directories are listed by name (sorted, so the
//! order a filesystem returns them in never matters), entries are `lstat`ed, files are opened
//! `O_NOFOLLOW | O_NONBLOCK` and checked to be regular files on the open descriptor. `.git/`
//! and `.craik/` (at any depth) are never entered; names that are not valid target names
//! (control characters, not UTF-8, what `TargetPath` refuses) are counted, never listed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use sha2::Digest as _;

/// Most directory entries one walk visits (files, directories, links, anything).
pub const MAX_ENTRIES: usize = 250_000;
/// Deepest directory the walk enters.
pub const MAX_DEPTH: usize = 64;
/// Bytes of a file kept for its heading, the paths it names and the binary check.
pub const HEAD_BYTES: usize = 64 << 10;
/// Largest file whose sha256 is computed (streamed); a larger one is listed with its size.
pub const MAX_HASH_BYTES: u64 = 256 << 20;

/// What a file's `lstat` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    pub size: u64,
    /// Modification time (seconds, nanoseconds): read only by the `older-than-named` rule.
    pub mtime: (i64, i64),
}

/// Why entries were left out of a walk (counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub symlinks: usize,
    pub bad_names: usize,
    pub special: usize,
    pub state_dirs: usize,
    pub too_deep: usize,
    pub unreadable_dirs: usize,
    /// Directories git ignores, not entered.
    pub ignored: usize,
    /// The walk stopped at [`MAX_ENTRIES`].
    pub truncated: bool,
}

/// Everything under a root, relative to it (`/`-separated).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub files: BTreeMap<String, FileMeta>,
    pub dirs: BTreeSet<String>,
    pub links: BTreeSet<String>,
    pub skipped: Skipped,
}

impl Tree {
    /// Whether `rel` names anything the walk saw (a file, a directory or a link).
    pub fn exists(&self, rel: &str) -> bool {
        self.files.contains_key(rel) || self.dirs.contains(rel) || self.links.contains(rel)
    }
}

/// Whether `name` may be listed: what a target path may hold.
fn valid_name(rel: &str) -> bool {
    craik_kernel::TargetPath::normalize("/r", rel).is_ok_and(|t| t.as_str() == rel)
}

/// Walks `root` (a directory, not followed if it is a link), at most `limit` entries.
pub fn walk(root: &Path, limit: usize) -> Result<Tree, String> {
    walk_pruned(root, limit, &BTreeSet::new())
}

/// [`walk`], never entering (nor listing) the directories in `prune` (relative, no trailing
/// `/`): what git ignores as a whole, so an ignored build tree never uses up the walk's limit.
pub fn walk_pruned(root: &Path, limit: usize, prune: &BTreeSet<String>) -> Result<Tree, String> {
    let meta = std::fs::symlink_metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "{}: not a directory (a link is not followed)",
            root.display()
        ));
    }
    let mut tree = Tree::default();
    let mut visited = 0usize;
    // Depth-first, each directory's entries in name order, so a truncated walk is the same
    // prefix whatever order the filesystem lists them in.
    let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
    while let Some((rel_dir, depth)) = stack.pop() {
        let abs = if rel_dir.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel_dir)
        };
        let Ok(entries) = std::fs::read_dir(&abs) else {
            tree.skipped.unreadable_dirs += 1;
            continue;
        };
        let mut listed: Vec<(std::ffi::OsString, std::fs::DirEntry)> = Vec::new();
        for entry in entries.flatten() {
            listed.push((entry.file_name(), entry));
        }
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut subdirs = Vec::new();
        for (name, entry) in listed {
            visited += 1;
            if visited > limit {
                tree.skipped.truncated = true;
                return Ok(tree);
            }
            let Some(name) = name.to_str() else {
                tree.skipped.bad_names += 1;
                continue;
            };
            let rel = if rel_dir.is_empty() {
                name.to_owned()
            } else {
                format!("{rel_dir}/{name}")
            };
            if !valid_name(&rel) {
                tree.skipped.bad_names += 1;
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                tree.skipped.special += 1;
                continue;
            };
            if kind.is_symlink() {
                tree.skipped.symlinks += 1;
                tree.links.insert(rel);
            } else if kind.is_dir() {
                let lower = name.to_ascii_lowercase();
                if prune.contains(&rel) {
                    tree.skipped.ignored += 1;
                } else if lower == ".git" || lower == ".craik" {
                    tree.skipped.state_dirs += 1;
                } else if depth + 1 >= MAX_DEPTH {
                    tree.skipped.too_deep += 1;
                } else {
                    tree.dirs.insert(rel.clone());
                    subdirs.push((rel, depth + 1));
                }
            } else if kind.is_file() {
                match entry.metadata() {
                    Ok(m) => {
                        tree.files.insert(
                            rel,
                            FileMeta {
                                size: m.len(),
                                mtime: (m.mtime(), m.mtime_nsec()),
                            },
                        );
                    }
                    Err(_) => tree.skipped.special += 1,
                }
            } else if name == ".git" {
                // A `.git` file (a worktree or submodule pointer) is git's, never read.
                tree.skipped.state_dirs += 1;
            } else {
                tree.skipped.special += 1;
            }
        }
        // Pushed in reverse so the first name is walked first.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(tree)
}

/// One file read once: its size, sha256 (up to [`MAX_HASH_BYTES`]) and first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read1 {
    pub size: u64,
    /// `sha256:<hex>`; `None` when larger than [`MAX_HASH_BYTES`].
    pub sha256: Option<String>,
    /// The first [`HEAD_BYTES`] bytes.
    pub head: Vec<u8>,
}

/// Reads `root/rel` without following a link anywhere in `rel`'s last component (the walk
/// never entered a linked directory), refusing anything but a regular file; streamed, so a
/// file of any size costs [`HEAD_BYTES`] of memory.
pub fn read_file(root: &Path, rel: &str) -> Result<Read1, String> {
    let path = root.join(rel);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let size = meta.len();
    let hash = size <= MAX_HASH_BYTES;
    let mut hasher = sha2::Sha256::new();
    let mut head = Vec::with_capacity(HEAD_BYTES.min(usize::try_from(size).unwrap_or(HEAD_BYTES)));
    let mut buf = vec![0u8; 64 << 10];
    let mut reader = file.take(if hash {
        MAX_HASH_BYTES.saturating_add(1)
    } else {
        HEAD_BYTES as u64
    });
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
        let Some(chunk) = buf.get(..n) else { break };
        if chunk.is_empty() {
            break;
        }
        total = total.saturating_add(n as u64);
        if head.len() < HEAD_BYTES {
            let room = HEAD_BYTES - head.len();
            head.extend_from_slice(chunk.get(..room.min(n)).unwrap_or_default());
        }
        if hash {
            hasher.update(chunk);
        }
    }
    // A file that grew past the limit while read is not hashed either.
    let sha256 = (hash && total <= MAX_HASH_BYTES && total == size)
        .then(|| format!("sha256:{}", craik_kernel::to_hex(&hasher.finalize())));
    Ok(Read1 { size, sha256, head })
}
