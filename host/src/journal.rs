//! The host side of a journal: a run's `receipts.jsonl`, opened append-only, never truncated or
//! rewritten. The kernel decides what the bytes are; this only puts them on disk in order,
//! durably either at once ([`JournalFile::append`]) or at the caller's next group commit
//! ([`JournalFile::write`] then [`JournalFile::sync`]: one `fdatasync` for every entry
//! written since the last).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use craik_kernel::{Envelope, RECEIPT_PAYLOAD_TYPE, ReceiptPayload};

/// The journal's file name inside a run directory.
pub const JOURNAL_NAME: &str = "receipts.jsonl";

/// An open journal.
#[derive(Debug)]
pub struct JournalFile {
    file: File,
    path: PathBuf,
    /// Bytes in the file (written, durable or not).
    len: u64,
    /// Bytes known durable: the length at the last `fdatasync`.
    durable: u64,
}

impl JournalFile {
    /// Creates `dir/receipts.jsonl` (and `dir`); refuses an existing journal. The new entry
    /// is fsynced into `dir` (and `dir` into its parent when it was created now).
    pub fn create(dir: &Path) -> io::Result<Self> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)?.sync_all()?;
            }
        }
        let path = dir.join(JOURNAL_NAME);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)?;
        File::open(dir)?.sync_all()?;
        crate::fsio::durable_point();
        Ok(Self {
            file,
            path,
            len: 0,
            durable: 0,
        })
    }

    /// Opens an existing `dir/receipts.jsonl` for appending (a resumed run).
    pub fn open(dir: &Path) -> io::Result<Self> {
        let path = dir.join(JOURNAL_NAME);
        let file = OpenOptions::new().append(true).open(&path)?;
        let len = file.metadata()?.len();
        Ok(Self {
            file,
            path,
            len,
            // What a crash left unsynced is on disk by now or lost; recovery decides which.
            durable: len,
        })
    }

    /// Appends one or more complete lines and waits until they are on disk (write-ahead: the
    /// caller acts only after this returns).
    pub fn append(&mut self, lines: &[u8]) -> io::Result<()> {
        self.write(lines)?;
        self.sync().map(|_| ())
    }

    /// Appends one or more complete lines without waiting for the disk: they are durable after
    /// the next [`JournalFile::sync`]. The caller must not act on them before that (nor let
    /// anything that names them reach the disk or the runner first).
    pub fn write(&mut self, lines: &[u8]) -> io::Result<()> {
        if !lines.ends_with(b"\n") {
            return Err(io::Error::other("refusing to append a partial line"));
        }
        self.file.write_all(lines)?;
        self.len = self
            .len
            .saturating_add(u64::try_from(lines.len()).unwrap_or(u64::MAX));
        Ok(())
    }

    /// Makes every line written so far durable (one `fdatasync`: the file only grows, and
    /// `fdatasync` flushes the size change with the data); nothing to do when nothing was
    /// written since the last. Returns whether it synced.
    pub fn sync(&mut self) -> io::Result<bool> {
        if !self.is_dirty() {
            return Ok(false);
        }
        self.file.sync_data()?;
        self.durable = self.len;
        crate::fsio::durable_point();
        Ok(true)
    }

    /// Whether lines were written since the last [`JournalFile::sync`].
    pub fn is_dirty(&self) -> bool {
        self.len != self.durable
    }

    /// Bytes known durable (the file's length at the last sync).
    pub fn durable_len(&self) -> u64 {
        self.durable
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One journal line, decoded without verification (recovery verifies first).
#[derive(Debug)]
pub enum Decoded {
    Receipt(Box<ReceiptPayload>),
    Checkpoint { is_final: bool },
    Unreadable,
}

/// Every line of a journal, decoded.
pub fn decode_all(bytes: &[u8]) -> Vec<(usize, Decoded)> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| {
            let decoded = serde_json::from_slice::<Envelope>(line)
                .ok()
                .and_then(|e| Some((e.payload_type.clone(), STANDARD.decode(&e.payload).ok()?)))
                .map_or(Decoded::Unreadable, |(kind, payload)| {
                    if kind == RECEIPT_PAYLOAD_TYPE {
                        serde_json::from_slice::<ReceiptPayload>(&payload)
                            .map_or(Decoded::Unreadable, |r| Decoded::Receipt(Box::new(r)))
                    } else {
                        serde_json::from_slice::<craik_kernel::Checkpoint>(&payload).map_or(
                            Decoded::Unreadable,
                            |c| Decoded::Checkpoint {
                                is_final: c.is_final,
                            },
                        )
                    }
                });
            (i + 1, decoded)
        })
        .collect()
}
