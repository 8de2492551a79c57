//! A document is the bytes of one file: one object, an array of objects, or JSON lines.
//! This splits it into records, detects each record's contract and decodes it, keeping file
//! positions so every problem can be printed as `file: $.path: message (line L, column C)`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::display::Truncated;
use crate::problem::Problem;
use crate::registry::{AnyContract, Contract, Kind, json_problem};

/// Where a record sits in its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locator {
    /// The document is this one object.
    Whole,
    /// Element `n` (0-based) of a top-level array.
    Element(usize),
    /// JSON line `n` (1-based).
    Line(usize),
}

/// One record of a document and what became of it.
#[derive(Debug, Clone)]
pub struct Record {
    /// Where it is.
    pub locator: Locator,
    /// The record's original JSON text.
    pub text: String,
    /// The decoded contract, or every problem found.
    pub outcome: Result<AnyContract, Vec<Problem>>,
}

/// A split and decoded document.
#[derive(Debug, Clone, Default)]
pub struct Document {
    /// Records in file order.
    pub records: Vec<Record>,
    /// A problem with the document as a whole (encoding, syntax, shape); when set, `records`
    /// holds only what could be split before it.
    pub error: Option<Problem>,
}

impl Document {
    /// True when the document and every record are valid.
    pub fn is_valid(&self) -> bool {
        self.error.is_none() && self.records.iter().all(|r| r.outcome.is_ok())
    }
}

/// `bytes` as exactly one contract of type `T`. Otherwise every problem found, in file order,
/// each one line (`$.path: message (line L, column C)`): the document's, each record's, a
/// second record, or no record at all.
pub fn decode_single<T: Contract>(bytes: &[u8]) -> Result<T, Vec<String>> {
    decode_single_located(bytes).map_err(|ps| ps.iter().map(ToString::to_string).collect())
}

/// [`decode_single`] with each problem as a [`Problem`] (path, line, column as fields, for
/// tools: `--format json` errors carry them).
pub fn decode_single_located<T: Contract>(bytes: &[u8]) -> Result<T, Vec<Problem>> {
    let doc = decode_document(bytes, Some(T::KIND));
    let mut problems: Vec<Problem> = doc.error.into_iter().collect();
    let mut found = None;
    for record in doc.records {
        match record.outcome {
            Ok(c) if found.is_none() => found = T::from_any(c),
            Ok(_) => problems.push(Problem::at("$", "holds more than one record")),
            Err(ps) => problems.extend(ps),
        }
    }
    match found {
        Some(v) if problems.is_empty() => Ok(v),
        _ if problems.is_empty() => Err(vec![Problem::at(
            "$",
            format!("not a {}", T::KIND.schema_name()),
        )]),
        _ => Err(problems),
    }
}

/// Splits and decodes `bytes`. With `forced`, every record must be that contract (and a
/// `schema` field, if present, must agree); without it, each record names its contract in
/// `schema`.
pub fn decode_document(bytes: &[u8], forced: Option<Kind>) -> Document {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let at = e.valid_up_to();
            let (line, column) = position(bytes.get(..at).unwrap_or_default());
            let problem = Problem::at(
                "$",
                format!("not valid UTF-8 at byte {at}, expected UTF-8 JSON"),
            )
            .with_position(line, column);
            return Document {
                records: Vec::new(),
                error: Some(problem),
            };
        }
    };
    if text.starts_with('\u{feff}') {
        return whole_error(
            Problem::at(
                "$",
                "starts with a byte-order mark, expected plain UTF-8 JSON",
            )
            .with_position(1, 1),
        );
    }
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return whole_error(Problem::at(
            "$",
            "empty document, expected a JSON object, an array of objects, or JSON lines",
        ));
    }

    match serde_json::from_str::<&RawValue>(text) {
        Ok(raw) => {
            let body = raw.get();
            if body.starts_with('[') {
                split_array(text, body, forced)
            } else {
                let record = decode_record(text, body, Locator::Whole, forced);
                Document {
                    records: vec![record],
                    error: None,
                }
            }
        }
        Err(e) if e.to_string().starts_with("trailing characters") => split_lines(text, forced),
        Err(e) => whole_error(syntax_problem(&e)),
    }
}

fn whole_error(problem: Problem) -> Document {
    Document {
        records: Vec::new(),
        error: Some(problem),
    }
}

fn syntax_problem(e: &serde_json::Error) -> Problem {
    let mut problem = json_problem("$".into(), e);
    if e.is_eof() {
        problem.message = format!("truncated JSON: {}", problem.message);
    } else {
        problem.message = format!("malformed JSON: {}", problem.message);
    }
    problem
}

fn split_array(text: &str, body: &str, forced: Option<Kind>) -> Document {
    let elements: Vec<&RawValue> = match serde_json::from_str(body) {
        Ok(elements) => elements,
        Err(e) => return whole_error(shift(syntax_problem(&e), text, body, false)),
    };
    if elements.is_empty() {
        return whole_error(Problem::at(
            "$",
            "empty array, expected at least one contract object",
        ));
    }
    let records = elements
        .iter()
        .enumerate()
        .map(|(i, raw)| decode_record(text, raw.get(), Locator::Element(i), forced))
        .collect();
    Document {
        records,
        error: None,
    }
}

fn split_lines(text: &str, forced: Option<Kind>) -> Document {
    let mut records = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let locator = Locator::Line(i + 1);
        match serde_json::from_str::<&RawValue>(line) {
            Ok(raw) => records.push(decode_record(text, raw.get(), locator, forced)),
            Err(e) => records.push(Record {
                locator,
                text: line.to_owned(),
                outcome: Err(vec![shift(syntax_problem(&e), text, line, false)]),
            }),
        }
    }
    Document {
        records,
        error: None,
    }
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    schema: Option<Cow<'a, str>>,
}

fn decode_record(text: &str, body: &str, locator: Locator, forced: Option<Kind>) -> Record {
    let outcome = detect(body, forced)
        .and_then(|kind| kind.decode(body))
        .map_err(|problems| {
            let whole = locator == Locator::Whole;
            problems
                .into_iter()
                .map(|p| shift(p, text, body, whole))
                .collect()
        });
    Record {
        locator,
        text: body.to_owned(),
        outcome,
    }
}

fn detect(body: &str, forced: Option<Kind>) -> Result<Kind, Vec<Problem>> {
    if !body.starts_with('{') {
        let found = match body.as_bytes().first() {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return Err(vec![Problem::at(
            "$",
            format!("found {found}, expected a contract object"),
        )]);
    }
    if let Some(kind) = forced {
        return Ok(kind);
    }
    let peek: Peek<'_> =
        serde_json::from_str(body).map_err(|e| vec![json_problem("$.schema".into(), &e)])?;
    match peek.schema {
        None => Err(vec![Problem::at(
            "$.schema",
            "missing, so the contract is unknown; add `\"schema\": \"craik.<name>\"` or pass --schema NAME",
        )]),
        Some(name) => match name.strip_prefix("craik.").and_then(Kind::from_name) {
            Some(kind) => Ok(kind),
            None => Err(vec![Problem::at(
                "$.schema",
                format!(
                    "unknown contract `{}`, expected one of the {} names of `craik schema list`",
                    Truncated(&name),
                    Kind::ALL.len()
                ),
            )]),
        },
    }
}

/// Moves a problem's position from `body`'s coordinates to the document's.
fn shift(mut problem: Problem, text: &str, body: &str, whole: bool) -> Problem {
    let offset = (body.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    let (base_line, base_col) = position(text.as_bytes().get(..offset).unwrap_or_default());
    match (problem.line, problem.column) {
        (Some(1), Some(col)) => {
            problem.line = Some(base_line);
            problem.column = Some(base_col + col - 1);
        }
        (Some(line), col) => {
            problem.line = Some(base_line + line - 1);
            problem.column = col;
        }
        // A rule broken by the record as a whole: point at the record, unless the record is
        // the whole file (then a position would only say "line 1").
        (None, _) if !whole => {
            problem.line = Some(base_line);
            problem.column = Some(base_col);
        }
        (None, _) => {}
    }
    problem
}

/// 1-based line and column just after `prefix`.
fn position(prefix: &[u8]) -> (usize, usize) {
    let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = match prefix.iter().rposition(|&b| b == b'\n') {
        Some(nl) => prefix.len() - nl,
        None => prefix.len() + 1,
    };
    (line, column)
}
