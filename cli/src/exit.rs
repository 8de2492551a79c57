//! Exit codes (the README's table) and the error type commands return.

use std::fmt;
use std::process::ExitCode;

/// What a command's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// 0: everything checked out.
    Ok,
    /// 1: a check ran and failed (later: denied, test failed, verification failed).
    CheckFailed,
    /// 2: the command line was wrong, or a named path could not be read or written.
    Usage,
    /// 3: an input was invalid (bad payload, too large, not UTF-8, ...).
    InvalidInput,
    /// 4: a bug or an environment failure inside Craik.
    Internal,
    /// 5: reading or writing Craik's own files failed (disk full, I/O error, permission):
    /// nothing acknowledged was lost; fix the cause, then `craik runs recover RUN`.
    Io,
    /// 6: a run is parked awaiting an approval (decide it, then `craik runs resume RUN`);
    /// distinct from 1, a run that ended blocked, denied, failed or interrupted.
    AwaitingApproval,
    /// 7: a proof (`--prove`, `policy prove`) found no usable solver: none installed, the
    /// wrong version, a failed canary, or no answer in time. Nothing was claimed.
    SolverUnavailable,
}

impl Exit {
    pub(crate) const fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::CheckFailed => 1,
            Self::Usage => 2,
            Self::InvalidInput => 3,
            Self::Internal => 4,
            Self::Io => 5,
            Self::AwaitingApproval => 6,
            Self::SolverUnavailable => 7,
        }
    }

    /// The word `--format json` errors carry as their `kind`.
    pub(crate) const fn kind(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::CheckFailed => "check_failed",
            Self::Usage => "usage",
            Self::InvalidInput => "invalid_input",
            Self::Internal => "internal",
            Self::Io => "io",
            Self::AwaitingApproval => "awaiting_approval",
            Self::SolverUnavailable => "solver_unavailable",
        }
    }

    /// The stricter of two outcomes, for commands that check many things.
    pub(crate) fn worst(self, other: Self) -> Self {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    const fn rank(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::AwaitingApproval => 1,
            Self::CheckFailed => 2,
            Self::InvalidInput => 3,
            Self::Usage => 4,
            Self::Io => 5,
            Self::SolverUnavailable => 6,
            Self::Internal => 7,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

/// A command that could not do its job: one line for the user and the exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
    /// Set when the failure is a closed stdout pipe, which is not an error.
    pub(crate) broken_pipe: bool,
    /// Lines printed before the message (one problem each).
    pub(crate) details: Vec<String>,
    /// The details are multi-line reports (drawn for a terminal), printed as they are.
    pub(crate) multi_line: bool,
    /// Where in which file the failure is, when known (for `--format json` errors).
    pub(crate) location: Option<Box<Location>>,
}

/// The file, field and position a failure is about.
#[derive(Debug, Default)]
pub(crate) struct Location {
    pub(crate) file: Option<String>,
    pub(crate) field: Option<String>,
    /// The 1-based line and column in the file.
    pub(crate) position: Option<(usize, usize)>,
}

impl Failure {
    pub(crate) fn usage(message: impl fmt::Display) -> Self {
        Self {
            exit: Exit::Usage,
            message: message.to_string(),
            broken_pipe: false,
            details: Vec::new(),
            multi_line: false,
            location: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>, details: Vec<String>) -> Self {
        Self {
            exit: Exit::InvalidInput,
            message: message.into(),
            broken_pipe: false,
            details,
            multi_line: false,
            location: None,
        }
    }

    /// Marks the details as multi-line reports, printed as they are.
    pub(crate) fn multi_line_details(mut self, multi_line: bool) -> Self {
        self.multi_line = multi_line;
        self
    }

    pub(crate) fn with_exit(mut self, exit: Exit) -> Self {
        self.exit = exit;
        self
    }

    pub(crate) fn internal(message: impl fmt::Display) -> Self {
        Self {
            exit: Exit::Internal,
            message: message.to_string(),
            broken_pipe: false,
            details: Vec::new(),
            multi_line: false,
            location: None,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The one place a host error becomes an exit code.
impl From<craik_host::Error> for Failure {
    fn from(e: craik_host::Error) -> Self {
        use craik_host::ErrorKind;
        let exit = match e.kind {
            ErrorKind::Usage => Exit::Usage,
            ErrorKind::Refused => Exit::CheckFailed,
            ErrorKind::Invalid => Exit::InvalidInput,
            ErrorKind::Io => Exit::Io,
            ErrorKind::Internal => Exit::Internal,
        };
        Self {
            exit,
            message: e.message,
            broken_pipe: false,
            details: e.details,
            multi_line: false,
            location: None,
        }
    }
}

impl Failure {
    /// The file and field a message names, when it follows the house form
    /// `FILE[:LINE]: FIELD `VALUE`: why` (the one-line errors of config, contract and
    /// grant loading): what `--format json` errors carry beside the message.
    pub(crate) fn located(&self) -> (Option<String>, Option<String>) {
        if let Some(l) = &self.location {
            return (l.file.clone(), l.field.clone());
        }
        let message = self.message.as_str();
        let Some((head, rest)) = message.split_once(": ") else {
            return (None, None);
        };
        let head = head.trim_matches('`');
        if !(head.starts_with('/')
            || head.starts_with("./")
            || head.contains(".json")
            || head.contains(".toml"))
        {
            return (None, None);
        }
        let file = head
            .rsplit_once(':')
            .filter(|(_, line)| !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()))
            .map_or(head, |(file, _)| file)
            .to_owned();
        let field = rest
            .split_once(" `")
            .map(|(field, _)| field)
            .filter(|f| !f.is_empty() && !f.contains(' '))
            .map(str::to_owned);
        (Some(file), field)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self {
            broken_pipe: e.kind() == std::io::ErrorKind::BrokenPipe,
            ..Self::internal(format!("i/o error: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use craik_host::{Error, ErrorKind};

    #[test]
    fn each_host_error_kind_has_its_documented_exit_code() {
        for (kind, code) in [
            (ErrorKind::Usage, 2),
            (ErrorKind::Refused, 1),
            (ErrorKind::Invalid, 3),
            (ErrorKind::Internal, 4),
            (ErrorKind::Io, 5),
        ] {
            let failure = Failure::from(Error::usage("x").with_kind(kind));
            assert_eq!(failure.exit.code(), code, "{kind:?}");
            assert_eq!(failure.message, "x");
        }
    }
}
