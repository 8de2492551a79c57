//! File reads with a size cap, and durable writes for the host's own files.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

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

/// Writes `bytes` to `path` via a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("no file name"))?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes `dir` an empty directory: created if missing, its entries removed if not (the
/// directory itself is kept: same inode). A symlink in it is removed, never followed; `dir`
/// itself must not be a symlink. An entry that cannot be removed makes the directory be
/// removed whole and created again. Its mode is set to `0700` (what a command changed it to
/// does not outlive the command).
pub fn empty_dir(dir: &Path) -> io::Result<()> {
    emptied(dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
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
    let emptied = std::fs::read_dir(dir).and_then(|entries| {
        for entry in entries {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            } else {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(())
    });
    if emptied.is_err() {
        std::fs::remove_dir_all(dir)?;
        std::fs::create_dir_all(dir)?;
    }
    Ok(())
}
