//! The host's errors: what went wrong, and what kind of failure it is. Front ends map the
//! kind to their own codes (the CLI: exit codes, in one place).

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request cannot be done as asked: a missing or unreadable path, an unknown id, a
    /// state that does not allow it.
    Usage,
    /// A check ran and refused (an approval already decided, a profile that admits none).
    Refused,
    /// An input was invalid: a bad payload, edited state, a journal that does not verify.
    Invalid,
    /// Reading or writing the host's own files failed (disk full, I/O error, permission):
    /// nothing acknowledged was lost; after fixing the cause, recover the run.
    Io,
    /// A bug or an environment failure.
    Internal,
}

/// A host operation that could not do its job: one line for a person, its kind, and the
/// problems behind it (one each).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub details: Vec<String>,
}

impl Error {
    fn new(kind: ErrorKind, message: impl std::fmt::Display) -> Self {
        Self {
            kind,
            message: message.to_string(),
            details: Vec::new(),
        }
    }

    pub fn usage(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    pub fn invalid(message: impl Into<String>, details: Vec<String>) -> Self {
        Self {
            details,
            ..Self::new(ErrorKind::Invalid, message.into())
        }
    }

    pub fn refused(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Refused, message)
    }

    pub fn io(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Io, message)
    }

    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The same error as another kind.
    #[must_use]
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Self::internal(format!("i/o error: {e}"))
    }
}
