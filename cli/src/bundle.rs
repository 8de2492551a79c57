//! Finding and loading policy bundles and grants for the CLI: a directory (`--policies DIR`)
//! or the embedded default, plus operator `--custom DIR`s loaded on top, never instead.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use craik_contracts::{CapabilityGrant, Kind, decode_document};
use craik_kernel::{Bundle, GrantSet, SourceFile};

use crate::embedded;
use crate::exit::{Exit, Failure};
use crate::files::{DEFAULT_MAX_BYTES, Input, read_bounded};

/// A loaded bundle and where it came from.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) bundle: Bundle,
    /// `policies/` or `embedded default`.
    pub(crate) origin: String,
}

/// The schema and policy files of a directory (or the embedded default), plus custom dirs.
pub(crate) fn sources(
    policies: Option<&Path>,
    custom: &[PathBuf],
) -> Result<(SourceFile, Vec<SourceFile>, String), Failure> {
    let (schema, mut files, origin) = match policies {
        None => (
            SourceFile::new(embedded::SCHEMA.0, embedded::SCHEMA.1),
            embedded::POLICIES
                .iter()
                .map(|(n, t)| SourceFile::new(*n, *t))
                .collect(),
            "embedded default".to_owned(),
        ),
        Some(dir) => {
            // Names are relative to the directory, so the policy-set hash does not depend on
            // where the bundle sits (the embedded default hashes the same as `policies/`).
            let text = read_text(&dir.join("schema.cedarschema"))?;
            (
                SourceFile::new("schema.cedarschema", text),
                cedar_files(dir, false)?,
                dir.display().to_string(),
            )
        }
    };
    let mut names = std::collections::BTreeSet::new();
    for dir in custom {
        let base = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        let base = base.unwrap_or_else(|| dir.display().to_string());
        if !names.insert(base.clone()) {
            return Err(Failure::usage(format!(
                "--custom {}: another custom directory is also named `{base}`; custom policies are named by their directory, so the names must differ",
                dir.display()
            )));
        }
        // Named by the directory's own name, not by how its path was typed: `custom-sec` and
        // `./custom-sec` give the same policy-set hash (issue 13 item 2).
        files.extend(cedar_files(dir, false)?.into_iter().map(|mut f| {
            f.name = format!("custom/{base}/{}", f.name);
            f
        }));
    }
    Ok((schema, files, origin))
}

/// Loads a bundle; a refused bundle lists every problem, one per line (exit 3). On a
/// terminal each problem is also drawn as a miette report over its source line.
pub(crate) fn load(policies: Option<&Path>, custom: &[PathBuf]) -> Result<Loaded, Failure> {
    let (schema, files, origin) = sources(policies, custom)?;
    let bundle = Bundle::load(&schema, &files).map_err(|e| {
        let n = e.problems.len();
        let all: Vec<&SourceFile> = std::iter::once(&schema).chain(files.iter()).collect();
        let details = if std::io::stderr().is_terminal() {
            e.problems.iter().map(|p| report(p, &all)).collect()
        } else {
            e.problems.iter().map(ToString::to_string).collect()
        };
        Failure::invalid(
            format!(
                "policy bundle {origin} refused: {n} problem{}",
                if n == 1 { "" } else { "s" }
            ),
            details,
        )
        .multi_line_details(std::io::stderr().is_terminal())
    })?;
    Ok(Loaded { bundle, origin })
}

/// A problem drawn by miette over its file's text (a plain line when the file is unknown).
fn report(problem: &craik_kernel::Located, files: &[&SourceFile]) -> String {
    let Some(file) = files.iter().find(|f| f.name == problem.file) else {
        return problem.to_string();
    };
    if problem.line == 0 {
        return problem.to_string();
    }
    let offset: usize = file
        .text
        .split_inclusive('\n')
        .take(problem.line - 1)
        .map(str::len)
        .sum::<usize>()
        + problem.column.saturating_sub(1);
    let offset = offset.min(file.text.len());
    let diagnostic = miette::MietteDiagnostic::new(problem.message.clone())
        .with_label(miette::LabeledSpan::at(offset..offset, "here"));
    // Control characters (a hostile file's terminal escapes) are drawn as `?`, byte for byte,
    // so offsets stay right.
    let text: String = file
        .text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                "?".repeat(c.len_utf8())
            } else {
                c.to_string()
            }
        })
        .collect();
    let report = miette::Report::new(diagnostic)
        .with_source_code(miette::NamedSource::new(file.name.clone(), text));
    let mut out = String::new();
    let handler = miette::GraphicalReportHandler::new();
    match handler.render_report(&mut out, report.as_ref()) {
        Ok(()) => out,
        Err(_) => problem.to_string(),
    }
}

fn read_text(path: &Path) -> Result<String, Failure> {
    let bytes = read_bounded(&Input::File(path.to_owned()), DEFAULT_MAX_BYTES)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|e| {
        Failure::invalid(
            format!(
                "{}: not valid UTF-8 at byte {}",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
            Vec::new(),
        )
    })
}

/// Every `*.cedar` under `dir`, sorted, named by their path relative to `dir` (prefixed with
/// `dir` itself when `qualified`).
pub(crate) fn cedar_files(dir: &Path, qualified: bool) -> Result<Vec<SourceFile>, Failure> {
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "{}: not a directory",
            dir.display()
        )));
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths)
        .map_err(|e| Failure::usage(format!("{}: cannot list: {e}", dir.display())))?;
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let relative = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            let name = if qualified {
                format!("{}/{relative}", dir.display())
            } else {
                relative
            };
            Ok(SourceFile::new(name, read_text(&p)?))
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "cedar") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads `craik.capability_grant` files (objects, arrays or JSON lines).
pub(crate) fn read_grants(paths: &[PathBuf]) -> Result<Vec<CapabilityGrant>, Failure> {
    let mut grants = Vec::new();
    for path in paths {
        let bytes = read_bounded(&Input::File(path.clone()), DEFAULT_MAX_BYTES)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        grants.extend(decode_grants(&path.display().to_string(), &bytes)?);
    }
    Ok(grants)
}

pub(crate) use craik_host::run::grants_digest;

/// Decodes grants from bytes, naming `label` in every problem.
pub(crate) fn decode_grants(label: &str, bytes: &[u8]) -> Result<Vec<CapabilityGrant>, Failure> {
    let doc = decode_document(bytes, Some(Kind::CapabilityGrant));
    let mut problems: Vec<String> = doc.error.iter().map(|p| format!("{label}: {p}")).collect();
    let mut grants = Vec::new();
    for record in doc.records {
        match record.outcome {
            Ok(craik_contracts::AnyContract::CapabilityGrant(g)) => grants.push(*g),
            Ok(_) => problems.push(format!("{label}: not a craik.capability_grant")),
            Err(ps) => problems.extend(ps.iter().map(|p| format!("{label}: {p}"))),
        }
    }
    if problems.is_empty() {
        Ok(grants)
    } else {
        Err(Failure::invalid(
            format!("{label}: invalid grant"),
            problems,
        ))
    }
}

/// Compiles grants against a bundle; a refused grant is invalid input naming file and field.
pub(crate) fn compile_grants(
    bundle: &craik_kernel::Bundle,
    grants: &[CapabilityGrant],
    label: &str,
) -> Result<GrantSet, Failure> {
    GrantSet::compile(bundle, grants).map_err(|e| {
        Failure::invalid(format!("{label}: {e}"), Vec::new()).with_exit(Exit::InvalidInput)
    })
}

#[cfg(test)]
mod tests {
    use craik_kernel::{Located, SourceFile};

    #[test]
    fn a_report_points_at_the_line_and_defuses_escapes() {
        let file = SourceFile::new(
            "base/x.cedar",
            "permit (principal, action, resource)\nwhen { context.nope\u{1b}[2J };\n",
        );
        let problem = Located {
            file: "base/x.cedar".into(),
            line: 2,
            column: 8,
            message: "attribute `nope` not found".into(),
        };
        let text = super::report(&problem, &[&file]);
        assert!(text.contains("base/x.cedar:2:8"), "{text}");
        assert!(text.contains("context.nope"), "{text}");
        assert!(text.contains("attribute `nope` not found"), "{text}");
        assert!(
            !text.contains("\u{1b}[2J"),
            "a file's escape sequence reached the terminal"
        );
        // Unknown file or line: the one-line form.
        let bare = Located {
            line: 0,
            ..problem.clone()
        };
        assert_eq!(super::report(&bare, &[&file]), bare.to_string());
        let elsewhere = Located {
            file: "other.cedar".into(),
            ..problem
        };
        assert_eq!(super::report(&elsewhere, &[&file]), elsewhere.to_string());
    }
}
