//! The host side of a journal: a run's `receipts.jsonl`, opened append-only, one `write` and
//! one `fsync` per entry, never truncated or rewritten. The kernel decides what the bytes are;
//! this only puts them on disk, durably, in order.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::cmd::receipts::JOURNAL_NAME;

/// An open journal.
#[derive(Debug)]
pub(crate) struct JournalFile {
    file: File,
    path: PathBuf,
}

impl JournalFile {
    /// Creates `dir/receipts.jsonl` (and `dir`); refuses an existing journal.
    pub(crate) fn create(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(JOURNAL_NAME);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)?;
        Ok(Self { file, path })
    }

    /// Opens an existing `dir/receipts.jsonl` for appending (a resumed run).
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        let path = dir.join(JOURNAL_NAME);
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok(Self { file, path })
    }

    /// Appends one or more complete lines and waits until they are on disk (write-ahead: the
    /// caller acts only after this returns).
    pub(crate) fn append(&mut self, lines: &[u8]) -> io::Result<()> {
        if !lines.ends_with(b"\n") {
            return Err(io::Error::other("refusing to append a partial line"));
        }
        self.file.write_all(lines)?;
        self.file.sync_data()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}
