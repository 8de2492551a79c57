//! One problem with one record: where it is and what is wrong, ready to print on one line.

use std::fmt;

use serde::Serialize;

use crate::display::one_line;

/// Longest JSON path shown, in characters; deeper paths are cut with `…`.
const MAX_PATH_CHARS: usize = 120;

/// A located problem in a contract document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// JSON path of the offending value, `$` for the whole record (`$.runner.mode`,
    /// `$.findings[0].severity`).
    pub path: String,
    /// What is wrong and what was expected; one line, user values quoted in backticks.
    pub message: String,
    /// 1-based line in the file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column in the file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl Problem {
    /// A problem at `path` with no file position.
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        let mut path = one_line(&path.into());
        if path.chars().count() > MAX_PATH_CHARS {
            path = path
                .chars()
                .take(MAX_PATH_CHARS)
                .chain(std::iter::once('…'))
                .collect();
        }
        Self {
            path,
            message: one_line(&message.into()),
            line: None,
            column: None,
        }
    }

    /// Adds a 1-based file position.
    #[must_use]
    pub fn with_position(mut self, line: usize, column: usize) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}
