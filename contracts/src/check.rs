//! Rules serde's derive cannot express: id prefixes and charset, list minimums, cross-field
//! constraints. Each rule reports a [`Problem`] at a JSON path; nothing here mutates a contract.

use crate::display::Truncated;
use crate::problem::Problem;

/// Longest accepted id, in bytes.
pub const MAX_ID_LEN: usize = 200;

/// Collects problems while walking a contract.
#[derive(Debug, Default)]
pub struct Checker {
    path: Vec<Segment>,
    problems: Vec<Problem>,
}

#[derive(Debug, Clone)]
enum Segment {
    Field(&'static str),
    Index(usize),
}

impl Checker {
    /// A checker at the document root (`$`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The problems found, in document order.
    pub fn into_problems(self) -> Vec<Problem> {
        self.problems
    }

    fn path_to(&self, last: Option<&'static str>) -> String {
        let mut out = String::from("$");
        let segments = self.path.iter().cloned().chain(last.map(Segment::Field));
        for segment in segments {
            match segment {
                Segment::Field(name) => {
                    out.push('.');
                    out.push_str(name);
                }
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// Records a problem at `field` under the current path.
    pub fn report(&mut self, field: &'static str, message: impl Into<String>) {
        let path = self.path_to(Some(field));
        self.problems.push(Problem::at(path, message));
    }

    /// Runs `f` with `field` pushed onto the path.
    pub fn field(&mut self, field: &'static str, f: impl FnOnce(&mut Self)) {
        self.path.push(Segment::Field(field));
        f(self);
        self.path.pop();
    }

    /// Checks every element of a list, with its index on the path.
    pub fn each<T: Check>(&mut self, field: &'static str, items: &[T]) {
        self.path.push(Segment::Field(field));
        for (i, item) in items.iter().enumerate() {
            self.path.push(Segment::Index(i));
            item.check(self);
            self.path.pop();
        }
        self.path.pop();
    }

    /// Checks a nested contract.
    pub fn nested<T: Check>(&mut self, field: &'static str, item: &T) {
        self.field(field, |c| item.check(c));
    }

    /// The contract's own `id`: non-empty, limited charset, the contract's prefix.
    pub fn id(&mut self, id: &str, prefix: &'static str) {
        if let Some(why) = id_problem(id) {
            self.report("id", format!("invalid id `{}`: {why}", Truncated(id)));
        } else if !id.starts_with(prefix) || id.len() == prefix.len() {
            self.report(
                "id",
                format!(
                    "invalid id `{}`, expected an id starting with `{prefix}`",
                    Truncated(id)
                ),
            );
        }
    }

    /// A list that must hold at least `min` entries.
    pub fn min_len<T>(&mut self, field: &'static str, items: &[T], min: usize) {
        if items.len() < min {
            let noun = if min == 1 { "entry" } else { "entries" };
            self.report(
                field,
                format!(
                    "has {} entries, expected at least {min} {noun}",
                    items.len()
                ),
            );
        }
    }
}

/// Why `id` is not an acceptable id, if it is not.
pub fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("empty");
    }
    if id.len() > MAX_ID_LEN {
        return Some("longer than 200 bytes");
    }
    let ok = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if !ok {
        return Some("only ASCII letters, digits and `_` `-` `.` `:` are allowed");
    }
    None
}

/// A contract (or part of one) with rules beyond its serde shape.
pub trait Check {
    /// Reports every rule this value breaks.
    fn check(&self, c: &mut Checker);
}
