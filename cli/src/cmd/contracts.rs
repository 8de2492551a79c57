//! `craik contracts validate`: decode and check contract files, one line per problem.

use craik_contracts::{
    Document, Kind, Locator, Problem, RoundTrip, compare_roundtrip, decode_document,
};
use serde::Serialize;

use crate::cli::ValidateArgs;
use crate::cmd::schema::lookup;
use crate::exit::{Exit, Failure};
use crate::files::{Input, ReadError, expand, read_bounded};
use crate::output::{Format, Out};

#[derive(Debug, Serialize)]
struct FileReport {
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Problem>,
    records: Vec<RecordReport>,
    #[serde(skip)]
    exit: Exit,
}

#[derive(Debug, Serialize)]
struct RecordReport {
    /// `$` for a single-object file, `$[i]` for array elements, `line N` for JSON lines.
    record: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema: Option<&'static str>,
    valid: bool,
    problems: Vec<Problem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    roundtrip: Option<RoundTrip>,
}

#[derive(Debug, Serialize)]
struct Summary {
    files: usize,
    records: usize,
    valid: usize,
    invalid: usize,
    unreadable: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    files: Vec<FileReport>,
    summary: Summary,
}

pub(crate) fn validate(
    out: &mut Out,
    format: Format,
    args: &ValidateArgs,
) -> Result<Exit, Failure> {
    let forced = args.schema.as_deref().map(lookup).transpose()?;
    let inputs =
        expand(&args.files).map_err(|e| Failure::usage(format!("cannot list inputs: {e}")))?;
    if inputs.is_empty() {
        return Err(Failure::usage(
            "no *.json or *.jsonl files found in the given directories",
        ));
    }

    let mut exit = Exit::Ok;
    let mut files = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let report = check_file(input, forced, args);
        exit = exit.worst(report.exit);
        if format == Format::Human {
            print_file(out, &report)?;
        }
        files.push(report);
    }

    let records = files.iter().map(|f| f.records.len()).sum();
    let valid = files
        .iter()
        .flat_map(|f| &f.records)
        .filter(|r| r.valid)
        .count();
    let summary = Summary {
        files: files.len(),
        records,
        valid,
        invalid: records - valid,
        unreadable: files.iter().filter(|f| f.error.is_some()).count(),
    };
    match format {
        Format::Json | Format::Junit => out.json(&Report { files, summary })?,
        Format::Human => {
            let mut line = format!(
                "{} file{}, {} record{}: {} valid",
                summary.files,
                plural(summary.files),
                summary.records,
                plural(summary.records),
                summary.valid
            );
            if summary.invalid > 0 {
                line.push_str(&format!(", {} invalid", summary.invalid));
            }
            if summary.unreadable > 0 {
                line.push_str(&format!(
                    ", {} file{} rejected whole",
                    summary.unreadable,
                    plural(summary.unreadable)
                ));
            }
            out.line(line)?;
        }
    }
    Ok(exit)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn check_file(input: &Input, forced: Option<Kind>, args: &ValidateArgs) -> FileReport {
    let path = input.label();
    let bytes = match read_bounded(input, args.max_bytes) {
        Ok(bytes) => bytes,
        Err(e) => {
            let exit = match e {
                ReadError::Io(_) => Exit::Usage,
                ReadError::TooLarge { .. } => Exit::InvalidInput,
            };
            return FileReport {
                path,
                error: Some(Problem::at("$", e.to_string())),
                records: Vec::new(),
                exit,
            };
        }
    };
    let Document { records, error } = decode_document(&bytes, forced);
    let mut exit = if error.is_some() {
        Exit::InvalidInput
    } else {
        Exit::Ok
    };
    let records = records
        .into_iter()
        .map(|record| {
            let label = match record.locator {
                Locator::Whole => "$".to_owned(),
                Locator::Element(i) => format!("$[{i}]"),
                Locator::Line(n) => format!("line {n}"),
            };
            match record.outcome {
                Ok(contract) => {
                    let roundtrip = args.roundtrip.then(|| roundtrip(&record.text, &contract));
                    let mut problems = Vec::new();
                    if let Some(rt) = &roundtrip {
                        for changed in &rt.changed {
                            problems
                                .push(Problem::at(changed.clone(), "changed by re-serialisation"));
                        }
                        if !rt.is_faithful() {
                            exit = exit.worst(Exit::CheckFailed);
                        }
                    }
                    RecordReport {
                        record: label,
                        schema: Some(contract.kind().schema_name()),
                        valid: true,
                        problems,
                        roundtrip,
                    }
                }
                Err(problems) => {
                    exit = exit.worst(Exit::InvalidInput);
                    let problems = problems
                        .into_iter()
                        .map(|mut p| {
                            if let Locator::Element(i) = record.locator {
                                p.path = format!(
                                    "$[{i}]{}",
                                    p.path.strip_prefix('$').unwrap_or(&p.path)
                                );
                            }
                            p
                        })
                        .collect();
                    RecordReport {
                        record: label,
                        schema: None,
                        valid: false,
                        problems,
                        roundtrip: None,
                    }
                }
            }
        })
        .collect();
    FileReport {
        path,
        error,
        records,
        exit,
    }
}

fn roundtrip(text: &str, contract: &craik_contracts::AnyContract) -> RoundTrip {
    let input: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return RoundTrip {
                changed: vec![format!("$ (cannot re-read input: {e})")],
                defaults_added: Vec::new(),
            };
        }
    };
    match contract.to_value() {
        Ok(output) => compare_roundtrip(&input, &output),
        Err(e) => RoundTrip {
            changed: vec![format!("$ (cannot serialise: {e})")],
            defaults_added: Vec::new(),
        },
    }
}

fn print_file(out: &mut Out, report: &FileReport) -> std::io::Result<()> {
    if let Some(problem) = &report.error {
        // A file rejected before any record was read has no path inside it to name.
        return if problem.line.is_none() {
            out.diag(format_args!("{}: {}", report.path, problem.message))
        } else {
            out.diag(format_args!("{}: {problem}", report.path))
        };
    }
    for record in &report.records {
        for problem in &record.problems {
            out.diag(format_args!("{}: {problem}", report.path))?;
        }
    }
    let ok: Vec<&RecordReport> = report.records.iter().filter(|r| r.valid).collect();
    if ok.len() == report.records.len() {
        let mut kinds: Vec<&str> = ok.iter().filter_map(|r| r.schema).collect();
        kinds.dedup();
        let what = if report.records.len() == 1 {
            kinds.join(", ")
        } else {
            format!("{} records: {}", report.records.len(), kinds.join(", "))
        };
        out.line(format_args!("{}: ok ({what})", report.path))?;
    } else if report.records.len() > 1 {
        out.line(format_args!(
            "{}: {} of {} records valid",
            report.path,
            ok.len(),
            report.records.len()
        ))?;
    }
    Ok(())
}
