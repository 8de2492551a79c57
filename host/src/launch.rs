//! Launching the runner a run names: the in-process fixture, or an adapter process under its
//! shipped capability matrix.

use std::path::{Path, PathBuf};

use craik_contracts::{FixtureScenario, PolicyProfile, RunnerCapabilityMatrix};

use crate::Error;
use crate::run::RunnerOptions;

/// The environment variables a runner's matrix names (`runner.metadata.env`): the only ones
/// its adapter process receives besides PATH, HOME and LANG.
fn passed_env(matrix: &RunnerCapabilityMatrix) -> Vec<String> {
    matrix
        .runner
        .metadata
        .0
        .get("env")
        .and_then(serde_json::Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the runner a run names: the in-process fixture, or an adapter process (fixture mode
/// with a scenario, live mode without). Identity and trust come from the shipped matrix.
///
/// `scenario` is the fixture scenario's file and its decoded contents (read once by the caller,
/// which also hashed those bytes).
pub fn build_runner(
    name: &str,
    scenario: Option<(&Path, FixtureScenario)>,
    run_dir: &Path,
    options: &RunnerOptions,
    profile: PolicyProfile,
) -> Result<(Box<dyn crate::run::StepRunner>, RunnerCapabilityMatrix), Error> {
    // An adapter process under `matrix`: its env is what the matrix names, its cwd its own.
    let adapter = |program: PathBuf, args: Vec<String>, matrix: RunnerCapabilityMatrix| {
        let mut spec = crate::adapter::AdapterSpec::new(program, args, run_dir.join("adapter"));
        if let Some(secs) = options.step_timeout_secs {
            spec.step_timeout = std::time::Duration::from_secs(secs);
        }
        if let Some(max) = options.max_line_bytes {
            spec.max_line_bytes = max;
        }
        spec.extra_read.clone_from(&options.adapter_read);
        spec.env = passed_env(&matrix);
        // `<home>/runs/<run id>`: the adapter's sandbox never reaches the home.
        spec.home = run_dir
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        spec.confinement_required = profile != PolicyProfile::TrustedLocal;
        let runner: Box<dyn crate::run::StepRunner> =
            Box::new(crate::adapter::AdapterRunner::new(spec));
        Ok((runner, matrix))
    };
    let shipped = |binary: &str| crate::adapter::shipped(binary).map_err(Error::usage);
    if let Some(rest) = name.strip_prefix("provider:") {
        let (api, model) = rest.split_once(':').unwrap_or((rest, ""));
        let args = ["--api", api, "--model", model, "--stream"]
            .map(str::to_owned)
            .to_vec();
        return adapter(
            shipped("provider")?,
            args,
            crate::runners::matrix("provider")?,
        );
    }
    if let Some(command) = name.strip_prefix("adapter:") {
        let matrix = crate::runners::matrix(options.matrix.as_deref().unwrap_or("fixture"))?;
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = PathBuf::from(words.next().unwrap_or_default());
        return adapter(program, words.collect(), matrix);
    }
    let binary = if name == "fixture-adapter" {
        "fixture"
    } else {
        name
    };
    let matrix = crate::runners::matrix(binary)?;
    match (name, scenario) {
        ("fixture", Some((_, decoded))) => Ok((
            Box::new(crate::run::FixtureStepRunner::new(decoded)),
            matrix,
        )),
        ("fixture" | "fixture-adapter", None) => Err(Error::usage(format!(
            "--runner {name}: a fixture runner needs a scenario (`{name}:SCENARIO.json`, or scenario.json in the example directory)"
        ))),
        (_, scenario) => {
            let mut args = Vec::new();
            if let Some((path, _)) = scenario {
                let absolute = path
                    .canonicalize()
                    .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
                args.push("--fixture".to_owned());
                args.push(absolute.display().to_string());
            }
            adapter(shipped(binary)?, args, matrix)
        }
    }
}
