//! Where commands write: stdout for results, stderr for diagnostics. A closed pipe is not an
//! error (`craik schema list | head -1` exits 0).

use std::io::{self, Write};

use serde::Serialize;

use crate::exit::Failure;

/// `--format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Lines for people.
    #[default]
    Human,
    /// One JSON document on stdout.
    Json,
    /// JUnit XML (`craik policy test` only; elsewhere the same as json).
    Junit,
}

/// `--format` as given: [`Format`], or `jsonl`, which `craik audit`, `craik run` and `craik
/// runs resume` stream (one event per line); every other command treats it as json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatArg {
    /// Lines for people.
    Human,
    /// One JSON document on stdout.
    Json,
    /// JUnit XML (`craik policy test` only; elsewhere the same as json).
    Junit,
    /// One JSON event per line (`craik audit`, `craik run`, `craik runs resume`; elsewhere the
    /// same as json).
    Jsonl,
}

impl FormatArg {
    /// The format commands see (`jsonl` is json but for `craik audit`).
    pub(crate) fn common(self) -> Format {
        match self {
            Self::Human => Format::Human,
            Self::Json | Self::Jsonl => Format::Json,
            Self::Junit => Format::Junit,
        }
    }
}

/// Buffered stdout and stderr.
pub(crate) struct Out {
    stdout: Pipe,
    stderr: io::Stderr,
    /// Diagnostics are dropped (a command run in process by a benchmark).
    quiet: bool,
    /// How a run's progress is shown (`craik run`, `craik runs resume`).
    pub(crate) live: crate::live::Live,
    /// `--format jsonl`: a run's summary is the last line of its JSON-lines stream.
    pub(crate) jsonl: bool,
    /// The numbering of a run's JSON-lines stream.
    pub(crate) seq: crate::live::Seq,
}

/// Buffered stdout that treats a closed reader as the end of output, not an error: the
/// command runs to its end and keeps its exit code (`craik policy diff … | head -1` still
/// exits 1 for a change).
struct Pipe {
    inner: io::BufWriter<io::Stdout>,
    closed: bool,
}

impl Pipe {
    fn swallow(&mut self, result: io::Result<()>) -> io::Result<()> {
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let result = self.inner.write_all(buf);
        self.swallow(result).map(|()| buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let result = self.inner.flush();
        self.swallow(result)
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Out")
    }
}

impl Out {
    pub(crate) fn new() -> Self {
        Self {
            stdout: Pipe {
                inner: io::BufWriter::new(io::stdout()),
                closed: false,
            },
            stderr: io::stderr(),
            quiet: false,
            live: crate::live::Live::Off,
            jsonl: false,
            seq: crate::live::Seq::default(),
        }
    }

    /// A line of results. Every control character (newline and ESC included) and every
    /// bidirectional control is escaped: runner-influenced text can neither start a line of
    /// its own nor drive the terminal, so no display can be forged. One call, one line.
    pub(crate) fn line(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(
            self.stdout,
            "{}",
            craik_contracts::one_line(&text.to_string())
        )
    }

    /// Raw text on stdout.
    pub(crate) fn text(&mut self, text: &str) -> io::Result<()> {
        self.stdout.write_all(text.as_bytes())
    }

    /// A diagnostic line (flushes stdout first so the two streams interleave in order).
    pub(crate) fn diag(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        self.stdout.flush()?;
        writeln!(
            self.stderr,
            "{}",
            craik_contracts::one_line(&text.to_string())
        )
    }

    /// A progress line on stderr, redrawn in place; nothing unless stderr is a terminal (and
    /// not `--quiet`): piped, long operations stay quiet.
    pub(crate) fn progress(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        if self.quiet || !std::io::IsTerminal::is_terminal(&self.stderr) {
            return Ok(());
        }
        let text = craik_contracts::one_line(&text.to_string());
        write!(self.stderr, "\x1b[2K\r{text}")?;
        self.stderr.flush()
    }

    /// Clears a progress line.
    pub(crate) fn end_progress(&mut self) -> io::Result<()> {
        if self.quiet || !std::io::IsTerminal::is_terminal(&self.stderr) {
            return Ok(());
        }
        write!(self.stderr, "\x1b[2K\r")?;
        self.stderr.flush()
    }

    /// A JSON document on stdout. DEL, C1 controls and bidirectional controls inside its
    /// strings (which JSON allows raw) are written as `\uXXXX` escapes: the same JSON, but
    /// nothing a terminal acts on.
    pub(crate) fn json<T: Serialize>(&mut self, value: &T) -> Result<(), Failure> {
        serde_json::to_writer_pretty(Escaping(&mut self.stdout), value)
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
        serde_json::Serializer::pretty(Escaping(&mut self.stdout))
            .collect_seq(items)
            .map_err(|e| Failure::internal(format!("cannot encode output: {e}")))?;
        writeln!(self.stdout)?;
        Ok(())
    }

    /// One compact JSON value on stdout, no newline (a piece of a document written as it is
    /// read), escaped as [`Out::json`] escapes.
    pub(crate) fn json_piece<T: Serialize>(&mut self, value: &T) -> Result<(), Failure> {
        serde_json::to_writer(Escaping(&mut self.stdout), value)
            .map_err(|e| Failure::internal(format!("cannot encode output: {e}")))
    }

    /// One compact JSON value and a newline (a JSON Lines event).
    pub(crate) fn json_line<T: Serialize>(&mut self, value: &T) -> Result<(), Failure> {
        self.json_piece(value)?;
        writeln!(self.stdout)?;
        Ok(())
    }

    /// A JSON object written without its closing brace, so that more fields can follow as
    /// they are read (`craik audit --format json` streams its timeline this way).
    pub(crate) fn json_open<T: Serialize>(&mut self, value: &T) -> Result<(), Failure> {
        let mut bytes = serde_json::to_vec(value)
            .map_err(|e| Failure::internal(format!("cannot encode output: {e}")))?;
        if bytes.last() == Some(&b'}') {
            bytes.pop();
        }
        Escaping(&mut self.stdout).write_all(&bytes)?;
        Ok(())
    }

    /// An `Out` whose stdout and diagnostics are discarded (a benchmark running a command in
    /// process).
    pub(crate) fn discard() -> Self {
        let mut out = Self::new();
        out.stdout.closed = true;
        out.quiet = true;
        out
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.stdout.flush()
    }
}

/// One compact JSON value and a newline on `w`, escaped as [`Out::json`] escapes (a run's
/// live JSON-lines stream, written as the driver records each event).
pub(crate) fn json_line_to<W: Write, T: Serialize>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer(Escaping(&mut *w), value).map_err(io::Error::other)?;
    writeln!(w)
}

/// Writes JSON text with DEL, C1 and bidirectional controls escaped as `\uXXXX`. serde_json
/// writes whole characters per call (string fragments between its own escapes), and those
/// characters only occur inside strings, where the escape means the same character.
struct Escaping<W>(W);

fn terminal_control(c: char) -> bool {
    c == '\u{7f}'
        || ('\u{80}'..='\u{9f}').contains(&c)
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if buf.iter().all(|b| *b < 0x7f) {
            return self.0.write_all(buf);
        }
        let text = String::from_utf8_lossy(buf);
        let mut out = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            if terminal_control(c) {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            } else {
                out.push(c);
            }
        }
        self.0.write_all(out.as_bytes())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_output_escapes_terminal_controls_and_stays_the_same_json() {
        let value = serde_json::json!({"v": "a\u{7f}b\u{9b}c\u{202e}d\u{2066}e\u{1b}f"});
        let mut buf = Vec::new();
        serde_json::to_writer_pretty(Escaping(&mut buf), &value).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && (c.is_control() || terminal_control(c))),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
