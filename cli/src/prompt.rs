//! Asking the operator on a terminal: only when stdin and stderr are both terminals and the
//! output is for a person; otherwise nothing is ever asked and a missing answer is a usage
//! error naming the flag that gives it.

use std::io::{BufRead, IsTerminal, Write};

use crate::exit::Failure;
use crate::output::Format;

/// Asks questions on stderr and reads answers from stdin, or refuses to.
#[derive(Debug)]
pub(crate) struct Prompter {
    interactive: bool,
}

impl Prompter {
    /// A prompter that asks only on a terminal (stdin and stderr) with human output.
    pub(crate) fn for_terminal(format: Format) -> Self {
        Self {
            interactive: format == Format::Human
                && std::io::stdin().is_terminal()
                && std::io::stderr().is_terminal(),
        }
    }

    /// True when questions can be asked.
    pub(crate) fn interactive(&self) -> bool {
        self.interactive
    }

    /// One line of answer to `question` (trimmed); an empty answer takes `default`, or asks
    /// again when there is none. Off a terminal: a usage error naming `flag`.
    pub(crate) fn ask(
        &self,
        flag: &str,
        question: &str,
        default: Option<&str>,
    ) -> Result<String, Failure> {
        if !self.interactive {
            return Err(Failure::usage(format!(
                "{flag} is required (nothing is asked when stdin or stderr is not a terminal)"
            )));
        }
        loop {
            let shown = match default {
                Some(d) => format!("{question} [{}]: ", craik_contracts::one_line(d)),
                None => format!("{question}: "),
            };
            let answer = self
                .read_line(&shown)?
                .ok_or_else(|| Failure::usage(format!("{flag}: no answer (end of input)")))?;
            let answer = answer.trim();
            if !answer.is_empty() {
                return Ok(answer.to_owned());
            }
            if let Some(d) = default {
                return Ok(d.to_owned());
            }
        }
    }

    /// Writes `prompt` to stderr and reads one line from stdin (`None` at end of input).
    pub(crate) fn read_line(&self, prompt: &str) -> Result<Option<String>, Failure> {
        let mut err = std::io::stderr();
        write!(err, "{prompt}")
            .and_then(|()| err.flush())
            .map_err(|e| Failure::usage(format!("stderr: {e}")))?;
        let mut line = String::new();
        let n = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Failure::usage(format!("stdin: {e}")))?;
        Ok((n > 0).then_some(line))
    }

    /// A yes/no question: `y`/`yes` is true, `n`/`no` false, anything else asks again. End
    /// of input is `None`.
    pub(crate) fn yes_no(&self, question: &str) -> Result<Option<bool>, Failure> {
        loop {
            let Some(answer) = self.read_line(&format!("{question} [y/n]: "))? else {
                return Ok(None);
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(Some(true)),
                "n" | "no" => return Ok(Some(false)),
                _ => {
                    let mut err = std::io::stderr();
                    let _ = writeln!(err, "answer y or n");
                }
            }
        }
    }
}
