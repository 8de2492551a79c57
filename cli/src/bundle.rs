//! Loading policy bundles for the CLI (`craik_host::policies` reads the files): a refused
//! bundle's problems are drawn with miette over their source lines on a terminal.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use craik_kernel::{Bundle, SourceFile};

pub(crate) use craik_host::policies::{
    Loaded, Sources, cedar_files, compile_grants, read_grants, sources,
};

use crate::exit::Failure;

/// The bundle a policy command (`validate`, `explain`, `test`, `diff`, `show-grants`) loads:
/// the same set a run here would — craik.toml's pinned custom directories plus `--custom`
/// where the file allows it ([`craik_host::config::Loaded::custom_set`]) — and its origin
/// says so. `CRAIK_CONFIG=none` loads the flags alone.
pub(crate) fn load_args(
    out: &mut crate::output::Out,
    args: &crate::cli::BundleArgs,
) -> Result<Loaded, Failure> {
    let config = crate::cmd::config::project()?;
    let custom = match config {
        Some(c) => c.custom_set(&args.custom)?,
        None => args.custom.clone(),
    };
    let mut loaded = load(args.policies.as_deref(), &custom)?;
    if let Some(c) = config.filter(|c| !c.config.policy.custom.is_empty()) {
        loaded.origin = format!("{} (the pinned set of {})", loaded.origin, c.path.display());
        // Said where every policy command's output goes to a person (issue 31 item 3).
        out.diag(format_args!("craik: policies: {}", loaded.origin))?;
    }
    Ok(loaded)
}

/// Loads a bundle; a refused bundle lists every problem, one per line (exit 3). On a
/// terminal each problem is also drawn as a miette report over its source line.
pub(crate) fn load(policies: Option<&Path>, custom: &[PathBuf]) -> Result<Loaded, Failure> {
    load_with_sources(policies, custom).map(|(loaded, _)| loaded)
}

/// [`load`], and the files the bundle was loaded from (read once): what a proof compiles.
pub(crate) fn load_with_sources(
    policies: Option<&Path>,
    custom: &[PathBuf],
) -> Result<(Loaded, Sources), Failure> {
    let crate_sources = sources(policies, custom)?;
    let Sources {
        schema,
        files,
        origin,
        ..
    } = &crate_sources;
    let bundle = Bundle::load(schema, files)
        .and_then(|b| match craik_host::policies::required(&b) {
            problems if problems.is_empty() => Ok(b),
            problems => Err(craik_kernel::LoadError { problems }),
        })
        .map_err(|e| {
            let n = e.problems.len();
            let all: Vec<&SourceFile> = std::iter::once(schema).chain(files.iter()).collect();
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
    let loaded = Loaded {
        bundle,
        origin: origin.clone(),
    };
    Ok((loaded, crate_sources))
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

pub(crate) use craik_host::run::grants_digest;

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
