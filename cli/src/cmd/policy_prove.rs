//! `craik policy diff --prove`, `craik policy validate --prove never-errors`, `craik policy
//! prove 'QUERY'` and `craik bench prove`: the CLI edge of `craik-prove` (loading sides,
//! finding the solver, printing, writing emitted tests, exit codes). Proofs happen there;
//! every finding is replayed through the kernel there.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use craik_contracts::CapabilityGrant;
use craik_prove::{ProveError, Side, SolverConfig};
use serde::Serialize;

use crate::bundle::{Sources, read_grants};
use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// The embedded bundle's property library (`policies/properties.toml`).
pub(crate) const EMBEDDED_LIBRARY: &str = include_str!("../../../policies/properties.toml");

/// What every proving command takes.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProveArgs<'a> {
    pub(crate) solver: Option<&'a Path>,
    pub(crate) allow_solver_version: bool,
    pub(crate) grants: &'a [PathBuf],
    pub(crate) timeout_secs: u64,
}

impl ProveArgs<'_> {
    fn config(&self) -> Result<SolverConfig, Failure> {
        let mut config = SolverConfig::discover(
            self.solver.map(Path::to_path_buf),
            std::env::var_os(craik_prove::SOLVER_ENV),
            std::env::var_os("PATH"),
        )
        .map_err(failure)?;
        config.allow_version = self.allow_solver_version;
        config.per_query = Duration::from_secs(self.timeout_secs.max(1));
        Ok(config)
    }

    fn grants(&self) -> Result<Vec<CapabilityGrant>, Failure> {
        Ok(read_grants(self.grants)?)
    }
}

/// The one place a proof error becomes an exit code.
pub(crate) fn failure(e: ProveError) -> Failure {
    let exit = match &e {
        ProveError::SolverUnavailable(_) | ProveError::Unknown(_) => Exit::SolverUnavailable,
        ProveError::Compile(_) | ProveError::Bundle(_) => Exit::InvalidInput,
        ProveError::Solver(_) | ProveError::Unsound(_) | ProveError::Internal(_) => Exit::Internal,
    };
    Failure::internal(e).with_exit(exit)
}

/// A loaded side: the kernel's bundle and the files it came from.
pub(crate) struct Loaded {
    pub(crate) bundle: craik_kernel::Bundle,
    pub(crate) sources: Sources,
}

impl Loaded {
    pub(crate) fn load(policies: Option<&Path>, custom: &[PathBuf]) -> Result<Self, Failure> {
        let (loaded, sources) = crate::bundle::load_with_sources(policies, custom)?;
        Ok(Self {
            bundle: loaded.bundle,
            sources,
        })
    }

    fn side(&self) -> Side<'_> {
        Side {
            bundle: &self.bundle,
            schema: &self.sources.schema,
            files: &self.sources.files,
        }
    }
}

fn print(out: &mut Out, text: &str) -> Result<(), Failure> {
    for line in text.lines() {
        out.line(line)?;
    }
    Ok(())
}

/// `policy diff OLD NEW --prove [--emit-tests DIR]`.
pub(crate) fn diff(
    out: &mut Out,
    format: Format,
    (old, new): (&Loaded, &Loaded),
    args: &ProveArgs<'_>,
    emit: Option<&Path>,
) -> Result<Exit, Failure> {
    let config = args.config()?;
    let grants = args.grants()?;
    let report = craik_prove::diff(old.side(), new.side(), &grants, &config).map_err(failure)?;
    let mut written = Vec::new();
    if let Some(dir) = emit {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::usage(format!("--emit-tests {}: {e}", dir.display())))?;
        for suite in craik_prove::emit_tests(&report, &grants) {
            let path = dir.join(&suite.file_name);
            let bytes = serde_json::to_vec_pretty(&suite.suite)
                .map_err(|e| Failure::internal(format!("emitted suite: {e}")))?;
            craik_host::fsio::write_atomic(&path, &bytes)
                .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
            written.push(Emitted {
                path: path.display().to_string(),
                cases: suite.cases,
            });
        }
    }
    match format {
        Format::Json | Format::Junit => {
            #[derive(Serialize)]
            struct Report<'a> {
                method: &'static str,
                old: &'a str,
                new: &'a str,
                #[serde(flatten)]
                report: &'a craik_prove::DiffReport,
                emitted: &'a [Emitted],
            }
            out.json(&Report {
                method: "proved",
                old: &old.sources.origin,
                new: &new.sources.origin,
                report: &report,
                emitted: &written,
            })?;
        }
        Format::Human => {
            out.line(format_args!(
                "policy diff --prove: {} -> {}",
                old.sources.origin, new.sources.origin
            ))?;
            print(out, &craik_prove::render_diff(&report))?;
            for e in &written {
                out.line(format_args!("wrote {} case(s) to {}", e.cases, e.path))?;
            }
        }
    }
    Ok(if report.rows.iter().any(craik_prove::Row::confirmed) {
        Exit::CheckFailed
    } else {
        Exit::Ok
    })
}

/// A suite file `--emit-tests` wrote.
#[derive(Debug, Serialize)]
struct Emitted {
    path: String,
    cases: usize,
}

/// `policy validate --prove never-errors`.
pub(crate) fn never_errors(
    out: &mut Out,
    format: Format,
    side: &Loaded,
    args: &ProveArgs<'_>,
) -> Result<Exit, Failure> {
    let config = args.config()?;
    let grants = args.grants()?;
    let report = craik_prove::never_errors(side.side(), &grants, &config).map_err(failure)?;
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.line(format_args!(
                "policy validate --prove never-errors: {}",
                side.sources.origin
            ))?;
            print(out, &craik_prove::render_never_errors(&report))?;
        }
    }
    Ok(if report.errors.is_empty() {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// Where `policy prove` takes its properties from.
#[derive(Debug)]
pub(crate) enum Properties<'a> {
    Queries(&'a [String]),
    /// `--library` (`None`: the embedded bundle's).
    Library(Option<&'a Path>),
}

fn properties(what: &Properties<'_>) -> Result<Vec<craik_prove::Property>, Failure> {
    match what {
        Properties::Queries([]) => Err(Failure::usage(
            "policy prove: give a QUERY or --library (docs/policy-proofs.md has the query form)",
        )),
        Properties::Queries(qs) => qs
            .iter()
            .enumerate()
            .map(|(i, q)| {
                craik_prove::parse_query(q).map_err(|e| Failure::usage(e.to_string()))?;
                Ok(craik_prove::Property {
                    name: format!("query {}", i + 1),
                    query: q.clone(),
                    why: None,
                })
            })
            .collect(),
        Properties::Library(file) => {
            let (label, text) = match file {
                None => (
                    "embedded policies/properties.toml".to_owned(),
                    EMBEDDED_LIBRARY.to_owned(),
                ),
                Some(path) => {
                    let bytes = crate::files::read_bounded(
                        &crate::files::Input::File(path.to_path_buf()),
                        crate::files::DEFAULT_MAX_BYTES,
                    )
                    .map_err(|e| Failure::usage(format!("--library {}: {e}", path.display())))?;
                    let text = String::from_utf8(bytes).map_err(|_| {
                        Failure::invalid(format!("{}: not UTF-8", path.display()), Vec::new())
                    })?;
                    (path.display().to_string(), text)
                }
            };
            craik_prove::parse_library(&label, &text)
                .map_err(|e| Failure::invalid(e.to_string(), Vec::new()))
        }
    }
}

/// `policy prove QUERY... | --library [FILE]`.
pub(crate) fn prove(
    out: &mut Out,
    format: Format,
    side: &Loaded,
    what: &Properties<'_>,
    args: &ProveArgs<'_>,
) -> Result<Exit, Failure> {
    let props = properties(what)?;
    let config = args.config()?;
    let grants = args.grants()?;
    let report = craik_prove::prove(side.side(), &props, &grants, &config).map_err(failure)?;
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.line(format_args!("policy prove: {}", side.sources.origin))?;
            print(out, &craik_prove::render_properties(&report))?;
        }
    }
    Ok(if report.results.iter().all(|r| r.holds) {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// `bench prove`: the whole analysis of the embedded bundle (canaries, never-errors, the
/// property library, a diff against itself and against a mutated copy), timed.
pub(crate) fn bench(out: &mut Out, format: Format, args: &ProveArgs<'_>) -> Result<Exit, Failure> {
    let config = args.config()?;
    let embedded = Loaded::load(None, &[])?;
    let mut mutated = Loaded::load(None, &[])?;
    for f in &mut mutated.sources.files {
        f.text = f.text.replace(
            "when { context.iteration >= context.max_iterations };",
            "when { context.iteration >= context.max_iterations }\nwhen { context.profile != \"trusted-local\" };",
        );
    }
    mutated.bundle = craik_kernel::Bundle::load(&mutated.sources.schema, &mutated.sources.files)
        .map_err(|e| Failure::internal(format!("mutated bundle: {e:?}")))?;
    let props = properties(&Properties::Library(None))?;
    let started = Instant::now();
    let t = |s: Instant| s.elapsed().as_secs_f64();
    let s = Instant::now();
    let ne = craik_prove::never_errors(embedded.side(), &[], &config).map_err(failure)?;
    let never_errors_s = t(s);
    let s = Instant::now();
    let pr = craik_prove::prove(embedded.side(), &props, &[], &config).map_err(failure)?;
    let library_s = t(s);
    let s = Instant::now();
    let same =
        craik_prove::diff(embedded.side(), embedded.side(), &[], &config).map_err(failure)?;
    let diff_same_s = t(s);
    let s = Instant::now();
    let changed =
        craik_prove::diff(embedded.side(), mutated.side(), &[], &config).map_err(failure)?;
    let diff_mutated_s = t(s);
    #[derive(Serialize)]
    struct Bench {
        total_s: f64,
        never_errors_s: f64,
        never_errors_pairs: usize,
        library_s: f64,
        properties: usize,
        properties_holding: usize,
        diff_same_s: f64,
        diff_mutated_s: f64,
        diff_mutated_queries: usize,
        target_s: f64,
        solver: String,
    }
    let b = Bench {
        total_s: t(started),
        never_errors_s,
        never_errors_pairs: ne.checked,
        library_s,
        properties: pr.results.len(),
        properties_holding: pr.results.iter().filter(|r| r.holds).count(),
        diff_same_s,
        diff_mutated_s,
        diff_mutated_queries: changed.queries + same.queries,
        target_s: 10.0,
        solver: format!("cvc5 {} ({})", ne.solver.version, ne.solver.program),
    };
    match format {
        Format::Json | Format::Junit => out.json(&b)?,
        Format::Human => out.line(format_args!(
            "prove bench: {:.2} s in all (target <= {:.0} s): never-errors {:.2} s ({} pairs), property library {:.2} s ({}/{} hold), diff same {:.2} s, diff mutated {:.2} s ({} queries); {}",
            b.total_s, b.target_s, b.never_errors_s, b.never_errors_pairs, b.library_s,
            b.properties_holding, b.properties, b.diff_same_s, b.diff_mutated_s,
            b.diff_mutated_queries, b.solver
        ))?,
    }
    Ok(Exit::Ok)
}
