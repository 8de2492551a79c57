//! Asking the operator on a terminal: only when stdin and stderr are both terminals and the
//! output is for a person; otherwise nothing is ever asked and a missing answer is a usage
//! error naming the flag that gives it.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

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

    /// `given` (a flag's value), else `known` (from craik.toml), else the answer to
    /// `question` ([`Prompter::ask`]).
    pub(crate) fn given_or_ask(
        &self,
        given: Option<&str>,
        known: Option<String>,
        flag: &str,
        question: &str,
    ) -> Result<String, Failure> {
        match (given, known) {
            (Some(g), _) => Ok(g.to_owned()),
            (None, Some(k)) => Ok(k),
            (None, None) => self.ask(flag, question, None),
        }
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
        match self.read_line_or(prompt, &mut || false)? {
            Answer::Line(line) => Ok(Some(line)),
            Answer::End | Answer::Elsewhere => Ok(None),
        }
    }

    /// [`Prompter::read_line`], calling `settled` every [`POLL`] while no answer came; when it
    /// says the question was settled elsewhere, stops waiting (the line, if one comes later,
    /// answers the next question).
    pub(crate) fn read_line_or(
        &self,
        prompt: &str,
        settled: &mut dyn FnMut() -> bool,
    ) -> Result<Answer, Failure> {
        let mut err = std::io::stderr();
        write!(err, "{prompt}")
            .and_then(|()| err.flush())
            .map_err(|e| Failure::usage(format!("stderr: {e}")))?;
        let lines = lines()
            .lock()
            .map_err(|_| Failure::internal("the terminal reader failed"))?;
        loop {
            match lines.recv_timeout(POLL) {
                Ok(Some(line)) => return Ok(Answer::Line(line)),
                Ok(None) | Err(RecvTimeoutError::Disconnected) => return Ok(Answer::End),
                Err(RecvTimeoutError::Timeout) => {
                    if settled() {
                        let _ = writeln!(err);
                        return Ok(Answer::Elsewhere);
                    }
                }
            }
        }
    }

    /// A yes/no question: `y`/`yes` is true, `n`/`no` false, anything else asks again. End
    /// of input is `None`.
    pub(crate) fn yes_no(&self, question: &str) -> Result<Option<bool>, Failure> {
        match self.yes_no_or(question, &mut || false)? {
            Answer::Line(yes) => Ok(Some(yes == "y")),
            Answer::End | Answer::Elsewhere => Ok(None),
        }
    }

    /// [`Prompter::yes_no`] that stops waiting when `settled` says the question was decided
    /// elsewhere. A `Line` answer is `"y"` or `"n"`.
    pub(crate) fn yes_no_or(
        &self,
        question: &str,
        settled: &mut dyn FnMut() -> bool,
    ) -> Result<Answer, Failure> {
        loop {
            let answer = match self.read_line_or(&format!("{question} [y/n]: "), settled)? {
                Answer::Line(answer) => answer,
                other => return Ok(other),
            };
            match answer.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => return Ok(Answer::Line("y".into())),
                "n" | "no" => return Ok(Answer::Line("n".into())),
                _ => {
                    let mut err = std::io::stderr();
                    let _ = writeln!(err, "answer y or n");
                }
            }
        }
    }
}

/// What came of a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A line of answer.
    Line(String),
    /// End of input.
    End,
    /// Settled elsewhere while waiting.
    Elsewhere,
}

/// How often a waiting question checks whether it was settled elsewhere.
pub(crate) const POLL: Duration = Duration::from_millis(300);

/// The process's one stdin reader: a thread reading lines into a channel, so a question that
/// stops waiting never loses the line typed for the next one. `None` is end of input.
fn lines() -> &'static Mutex<Receiver<Option<String>>> {
    static LINES: OnceLock<Mutex<Receiver<Option<String>>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            loop {
                let mut line = String::new();
                match stdin.lock().read_line(&mut line) {
                    Ok(n) if n > 0 => {
                        if tx.send(Some(line)).is_err() {
                            return;
                        }
                    }
                    _ => {
                        let _ = tx.send(None);
                        return;
                    }
                }
            }
        });
        Mutex::new(rx)
    })
}
