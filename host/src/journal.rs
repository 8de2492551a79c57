//! The host side of a journal: a run's `receipts.jsonl`, opened append-only, one `write` and
//! one `fsync` per entry, never truncated or rewritten. The kernel decides what the bytes are;
//! this only puts them on disk, durably, in order.

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
        Ok(Self { file, path })
    }

    /// Opens an existing `dir/receipts.jsonl` for appending (a resumed run).
    pub fn open(dir: &Path) -> io::Result<Self> {
        let path = dir.join(JOURNAL_NAME);
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok(Self { file, path })
    }

    /// Appends one or more complete lines and waits until they are on disk (write-ahead: the
    /// caller acts only after this returns).
    pub fn append(&mut self, lines: &[u8]) -> io::Result<()> {
        if !lines.ends_with(b"\n") {
            return Err(io::Error::other("refusing to append a partial line"));
        }
        self.file.write_all(lines)?;
        self.file.sync_data()
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
