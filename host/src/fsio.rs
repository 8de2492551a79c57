//! File reads with a size cap, and durable writes for the host's own files.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    #[error("is {size} bytes, larger than the {max}-byte limit")]
    TooLarge { size: u64, max: u64 },
}

/// Reads a regular file of at most `max` bytes; more is an error, never a silent truncation.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ReadError::Io(io::Error::other("is a directory")));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > max {
        return Err(ReadError::TooLarge { size: read, max });
    }
    Ok(bytes)
}

/// A temporary name beside `path` (same directory, so a rename onto `path` is atomic):
/// `.<name>.<what>-<pid>`.
pub fn tmp_beside(path: &Path, what: &str) -> io::Result<std::path::PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("no file name"))?
        .to_string_lossy();
    Ok(dir.join(format!(".{name}.{what}-{}", std::process::id())))
}

/// The test hook at every durable write of the host's own files (keys, journals, ledger,
/// approvals, memory, run records, a command's undo), for every command: with the
/// `crash-points` feature (test builds only), `CRAIK_TEST_KILL_AT=N` makes the process stop
/// at the N-th, print `craik-test: paused at durable write N` on stderr and wait forever, so
/// a test can `kill -9` it there. Pausing never changes an outcome. Without the feature the
/// variable is never read. (The run driver's own points, `CRAIK_TEST_PAUSE_AT`, count only
/// the driver's writes: [`crate::run::store::CrashPoints`].)
pub fn durable_point() {
    #[cfg(feature = "crash-points")]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNT: AtomicU64 = AtomicU64::new(0);
        static AT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let at = *AT.get_or_init(|| {
            std::env::var("CRAIK_TEST_KILL_AT")
                .ok()
                .and_then(|v| v.parse().ok())
        });
        let n = COUNT.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        if at == Some(n) {
            let mut err = io::stderr();
            let _ = writeln!(err, "craik-test: paused at durable write {n}");
            let _ = err.flush();
            loop {
                std::thread::park();
            }
        }
    }
}

/// Writes `bytes` to `path` via a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_beside(path, "tmp")?;
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        durable_point();
        fs::rename(&tmp, path)?;
        durable_point();
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes `dir` an empty directory: created if missing, its entries removed if not (the
/// directory itself is kept: same inode). A symlink in it is removed, never followed; `dir`
/// itself must not be a symlink. A directory in it that its owner made unreadable or
/// unwritable (`chmod 000`) is given `0700` back first. An entry that still cannot be removed
/// makes the directory be removed whole and created again. Then the directory is reset: mode
/// `0700`, every extended attribute it can remove removed (ACLs are extended attributes), its
/// times set to now — what a command did to its HOME does not outlive the command (found by
/// outside testing: an unreadable subdirectory survived, and an xattr on `HOME` reached the
/// next command).
pub fn empty_dir(dir: &Path) -> io::Result<()> {
    emptied(dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    strip_xattrs(dir);
    let now = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        dir,
        &now,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(io::Error::from)
}

/// Removes every extended attribute of `path` (not following a link) that can be removed.
fn strip_xattrs(path: &Path) {
    let mut names = vec![0u8; 64 * 1024];
    let Ok(len) = rustix::fs::llistxattr(path, names.as_mut_slice()) else {
        return;
    };
    for name in names.get(..len).unwrap_or_default().split(|b| *b == 0) {
        if !name.is_empty() {
            let _ = rustix::fs::lremovexattr(path, name);
        }
    }
}

fn emptied(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            std::fs::remove_file(dir)?;
            return std::fs::create_dir_all(dir);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return std::fs::create_dir_all(dir),
        Err(e) => return Err(e),
    }
    if clear(dir, 0).is_err() {
        std::fs::remove_dir_all(dir)?;
        std::fs::create_dir_all(dir)?;
    }
    Ok(())
}

/// Removes everything in `dir`, giving each directory on the way `0700` first (bounded depth:
/// deeper trees fall back to the whole-directory removal).
fn clear(dir: &Path, depth: usize) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if depth > 256 {
        return Err(io::Error::other("too deep"));
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
            clear(&path, depth + 1)?;
            std::fs::remove_dir(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// `path` with `.` and `..` components resolved by name, no link followed (for a path that
/// need not exist, so `canonicalize` cannot); `..` at the top stays at the top.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Opens (creating, `0600`, never through a symlink) the lock file `path` and waits for its
/// exclusive `flock`, held until the file is dropped.
pub fn lock_exclusive(path: &Path) -> Result<fs::File, crate::Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| crate::Error::io(format!("{}: {e}", path.display())))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| crate::Error::io(format!("{}: {e}", path.display())))?;
    Ok(file)
}

/// A failure to create or write Craik's home (its directory, `.gitignore`, keys) at `path`:
/// an i/o failure (exit 5: disk full, quota, read-only, permission denied, an I/O error),
/// unless the path itself cannot be a home (a file on the way, an invalid name: usage,
/// exit 2). Names the path, the cause and the fix.
pub fn home_io(path: &Path) -> impl Fn(io::Error) -> crate::Error + '_ {
    move |e| {
        let advice = match e.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => "free disk space",
            io::ErrorKind::PermissionDenied => "check the permissions of Craik's home",
            io::ErrorKind::ReadOnlyFilesystem => "use a writable home (--home)",
            io::ErrorKind::NotADirectory
            | io::ErrorKind::NotFound
            | io::ErrorKind::InvalidInput
            | io::ErrorKind::InvalidFilename => {
                return crate::Error::usage(format!(
                    "{}: {e}; give a directory path for the home (--home)",
                    path.display()
                ));
            }
            _ => "check the disk",
        };
        crate::Error::io(format!("{}: {e}; {advice}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "tests fail loudly"
    )]

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// What a command may leave in or on its HOME: an unreadable tree, a link out (never
    /// followed), a changed mode, an extended attribute, an old time — all gone, the inode kept.
    #[test]
    fn an_emptied_directory_keeps_nothing_of_what_was_done_to_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(dir.join("lock/in")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::write(dir.join("lock/in/f"), "s").unwrap();
        std::fs::set_permissions(dir.join("lock/in"), std::fs::Permissions::from_mode(0o0))
            .unwrap();
        std::fs::set_permissions(dir.join("lock"), std::fs::Permissions::from_mode(0o0)).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("out")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let xattr =
            rustix::fs::setxattr(&dir, "user.msg", b"secret", rustix::fs::XattrFlags::empty());
        let old = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 1_234_567_890,
                tv_nsec: 0,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: 1_234_567_890,
                tv_nsec: 0,
            },
        };
        rustix::fs::utimensat(rustix::fs::CWD, &dir, &old, rustix::fs::AtFlags::empty()).unwrap();
        let inode = std::fs::metadata(&dir)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap();

        empty_dir(&dir).unwrap();

        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&meta), inode);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        assert!(std::os::unix::fs::MetadataExt::mtime(&meta) > 1_234_567_890);
        if xattr.is_ok() {
            let mut buf = [0u8; 64];
            assert!(rustix::fs::getxattr(&dir, "user.msg", &mut buf[..]).is_err());
        }
        assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "x");
        // A missing directory is made; a file in its place is replaced by one.
        let fresh = tmp.path().join("fresh");
        empty_dir(&fresh).unwrap();
        assert!(fresh.is_dir());
        std::fs::remove_dir(&fresh).unwrap();
        std::fs::write(&fresh, "f").unwrap();
        empty_dir(&fresh).unwrap();
        assert!(fresh.is_dir());
    }
}
