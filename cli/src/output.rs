//! Where commands write: stdout for results, stderr for diagnostics. A closed pipe is not an
//! error (`craik schema list | head -1` exits 0).

use std::io::{self, Write};

use serde::Serialize;

use crate::exit::Failure;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Lines for people.
    Human,
    /// One JSON document on stdout.
    Json,
    /// JUnit XML (`craik policy test` only; elsewhere the same as json).
    Junit,
}

/// Buffered stdout and stderr.
pub(crate) struct Out {
    stdout: io::BufWriter<io::Stdout>,
    stderr: io::Stderr,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Out")
    }
}

impl Out {
    pub(crate) fn new() -> Self {
        Self {
            stdout: io::BufWriter::new(io::stdout()),
            stderr: io::stderr(),
        }
    }

    /// A line of results.
    pub(crate) fn line(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.stdout, "{text}")
    }

    /// Raw text on stdout.
    pub(crate) fn text(&mut self, text: &str) -> io::Result<()> {
        self.stdout.write_all(text.as_bytes())
    }

    /// A diagnostic line (flushes stdout first so the two streams interleave in order).
    pub(crate) fn diag(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        self.stdout.flush()?;
        writeln!(self.stderr, "{text}")
    }

    /// A progress line on stderr, redrawn in place (callers only use it on a terminal).
    pub(crate) fn progress(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        write!(self.stderr, "\x1b[2K\r{text}")?;
        self.stderr.flush()
    }

    /// Clears a progress line.
    pub(crate) fn end_progress(&mut self) -> io::Result<()> {
        write!(self.stderr, "\x1b[2K\r")?;
        self.stderr.flush()
    }

    /// A JSON document on stdout.
    pub(crate) fn json<T: Serialize>(&mut self, value: &T) -> Result<(), Failure> {
        serde_json::to_writer_pretty(&mut self.stdout, value)
            .map_err(|e| Failure::internal(format!("cannot encode output: {e}")))?;
        writeln!(self.stdout)?;
        Ok(())
    }

    /// A JSON array on stdout, each element written as the iterator yields it (the same text
    /// [`Out::json`] writes for the collected array).
    pub(crate) fn json_seq<T: Serialize>(
        &mut self,
        items: impl Iterator<Item = T>,
    ) -> Result<(), Failure> {
        use serde::Serializer as _;
        serde_json::Serializer::pretty(&mut self.stdout)
            .collect_seq(items)
            .map_err(|e| Failure::internal(format!("cannot encode output: {e}")))?;
        writeln!(self.stdout)?;
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.stdout.flush()
    }
}
