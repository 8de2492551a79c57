//! Reading inputs with a size cap, expanding directories, and writing files atomically.
//!
//! Nothing here ever leaves a partial file behind: writes go to a temporary file in the target
//! directory and are renamed into place.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Default largest input, in bytes (`--max-bytes`).
pub(crate) const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// An input named on the command line, or found under a directory named there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Stdin => "<stdin>".to_owned(),
            Self::File(path) => path.display().to_string(),
        }
    }
}

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    #[error("is {size} bytes, larger than the {max}-byte limit (raise it with --max-bytes)")]
    TooLarge { size: u64, max: u64 },
}

/// Expands `paths`: `-` is stdin, a directory contributes its `*.json` and `*.jsonl` files
/// (recursively, sorted, symlinked directories not followed; npm's own files — `package.json`,
/// `package-lock.json`, `node_modules/` — are never Craik contracts and are passed over, as in
/// `examples/adapters/node/`), anything else (named explicitly) is itself.
pub(crate) fn expand(paths: &[PathBuf]) -> io::Result<Vec<Input>> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            out.push(Input::Stdin);
        } else if path.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            out.extend(found.into_iter().map(Input::File));
        } else {
            out.push(Input::File(path.clone()));
        }
    }
    Ok(out)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        let npm = matches!(
            path.file_name().and_then(|n| n.to_str()),
            Some("package.json" | "package-lock.json" | "node_modules")
        );
        if npm {
            continue;
        }
        if kind.is_dir() {
            walk(&path, found)?;
        } else if kind.is_file()
            && matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "jsonl")
            )
        {
            found.push(path);
        }
    }
    Ok(())
}

/// Reads at most `max` bytes; more is an error, never a silent truncation. Files are read by
/// `craik_host::fsio::read_bounded`.
pub(crate) fn read_bounded(input: &Input, max: u64) -> Result<Vec<u8>, ReadError> {
    let path = match input {
        Input::Stdin => None,
        Input::File(path) => Some(path),
    };
    if let Some(path) = path {
        return craik_host::fsio::read_bounded(path, max).map_err(|e| match e {
            craik_host::fsio::ReadError::Io(e) => ReadError::Io(e),
            craik_host::fsio::ReadError::TooLarge { size, max } => {
                ReadError::TooLarge { size, max }
            }
        });
    }
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > max {
        return Err(ReadError::TooLarge { size: read, max });
    }
    Ok(bytes)
}

pub(crate) use craik_host::fsio::write_atomic;
