//! Launching the runner a run names: the in-process fixture, or an adapter process under its
//! registry entry's capability matrix, checked against its pin before it starts.

use std::path::{Path, PathBuf};

use craik_contracts::{FixtureScenario, PolicyProfile, RunnerCapabilityMatrix};

use crate::Error;
use crate::registry::{self, Backend, Launch, Origin, Registry, RunnerRecord};
use crate::run::RunnerOptions;

/// What a run launches: the step runner, the matrix it runs under, and what the run records
/// about it (registry id, backend, version, digest) in its signed inputs.
pub type Built = (
    Box<dyn crate::run::StepRunner>,
    RunnerCapabilityMatrix,
    Option<RunnerRecord>,
);

/// Builds the runner a run names: a registry id (`fixture` in process; `fixture-adapter`,
/// `codex`, ... or any registered runner as an adapter process, checked against its pin
/// first), or the ad-hoc forms `provider:API:MODEL` and `adapter:PROGRAM [ARG]...` (hashed
/// and recorded, not pinned). Identity and trust come from the registry's matrix.
///
/// `scenario` is the fixture scenario's file and its decoded contents (read once by the caller,
/// which also hashed those bytes).
pub fn build_runner(
    name: &str,
    scenario: Option<(&Path, FixtureScenario)>,
    run_dir: &Path,
    options: &RunnerOptions,
    profile: PolicyProfile,
    registry: &Registry,
) -> Result<Built, Error> {
    // `<home>/runs/<run id>`: the adapter's sandbox never reaches the home.
    let home = run_dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| Error::internal(format!("{}: not under a home", run_dir.display())))?;
    // An adapter process: its env is what the registry names, its cwd its own.
    let adapter =
        |launch: Launch, env: Vec<String>, read: &[PathBuf], matrix| -> Result<Built, Error> {
            let mut spec = crate::adapter::AdapterSpec::new(launch.program, launch.args);
            if let Some(secs) = options.step_timeout_secs {
                spec.step_timeout = std::time::Duration::from_secs(secs);
            }
            if let Some(max) = options.max_line_bytes {
                spec.max_line_bytes = max;
            }
            spec.extra_read.clone_from(&options.adapter_read);
            spec.extra_read.extend(read.iter().cloned());
            spec.extra_read.extend(launch.read.iter().cloned());
            spec.env = env;
            spec.home = Some(home.clone());
            spec.home_read = launch.home_read;
            spec.exec_sha256 = Some(launch.program_sha256);
            spec.tree = launch.watch;
            spec.confinement_required = profile != PolicyProfile::TrustedLocal;
            let runner: Box<dyn crate::run::StepRunner> =
                Box::new(crate::adapter::AdapterRunner::new(spec));
            Ok((runner, matrix, Some(launch.record)))
        };
    if let Some(rest) = name.strip_prefix("provider:") {
        let (api, model) = rest.split_once(':').unwrap_or((rest, ""));
        // The shipped provider adapter (pinned, if `provider` was ever installed, under that id);
        // the record names the ad-hoc form.
        let entry = registry::provider_entry(api, model)?;
        let mut launch = registry::verify(&entry, &home)?;
        launch.record.id = format!("provider:{api}:{model}");
        launch.record.origin = "ad-hoc".into();
        let (env, matrix) = (entry.env.clone(), entry.matrix.clone());
        return adapter(launch, env, &[], matrix);
    }
    if let Some(command) = name.strip_prefix("adapter:") {
        let matrix = crate::runners::matrix(options.matrix.as_deref().unwrap_or("fixture"))?;
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = PathBuf::from(words.next().unwrap_or_default());
        let sha256 = registry::digest_file(&program).map_err(Error::usage)?;
        let launch = Launch {
            program: program.clone(),
            program_sha256: sha256.clone(),
            args: words.collect(),
            home_read: Vec::new(),
            read: Vec::new(),
            watch: None,
            record: RunnerRecord {
                id: "adapter".into(),
                backend: "program".into(),
                origin: "ad-hoc".into(),
                version: Some(matrix.runner.adapter_version.clone()),
                package: None,
                path: program,
                sha256,
                pinned: false,
                exec: None,
                exec_sha256: None,
                entry_sha256: None,
            },
        };
        let env = passed_env(&matrix);
        return adapter(launch, env, &[], matrix);
    }
    let entry = registry.get(name)?;
    let matrix = entry.matrix.clone();
    match (entry.backend, scenario) {
        (Backend::InProcess, Some((_, decoded))) => Ok((
            Box::new(crate::run::FixtureStepRunner::new(decoded)),
            matrix,
            None,
        )),
        (Backend::InProcess, None) => Err(fixture_needs_scenario(name)),
        (_, None) if entry.origin == Origin::Builtin && entry.backend == Backend::Program => {
            Err(fixture_needs_scenario(name))
        }
        (_, scenario) => {
            let mut launch = registry::verify(entry, &home)?;
            if let (Some(flag), Some((path, _))) = (&entry.scenario_arg, scenario) {
                let absolute = path
                    .canonicalize()
                    .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
                launch.args.push(flag.clone());
                launch.args.push(absolute.display().to_string());
            }
            adapter(launch, entry.adapter_env(), &entry.read, matrix)
        }
    }
}

/// The capability matrix a run of runner `name` runs under (what [`build_runner`] would use),
/// without resolving, pinning or starting anything: for `craik prompt compile`. The flag says
/// whether the matrix comes from the project's own `runners.toml` (repository content).
pub fn matrix_for(
    name: &str,
    options: &RunnerOptions,
    registry: &Registry,
) -> Result<(RunnerCapabilityMatrix, bool), Error> {
    if let Some(rest) = name.strip_prefix("provider:") {
        let (api, model) = rest.split_once(':').unwrap_or((rest, ""));
        return Ok((registry::provider_entry(api, model)?.matrix, false));
    }
    if name.starts_with("adapter:") {
        return Ok((
            crate::runners::matrix(options.matrix.as_deref().unwrap_or("fixture"))?,
            false,
        ));
    }
    let entry = registry.get(name)?;
    Ok((
        entry.matrix.clone(),
        matches!(entry.origin, Origin::Project(_)),
    ))
}

fn fixture_needs_scenario(name: &str) -> Error {
    Error::usage(format!(
        "--runner {name}: a fixture runner needs a scenario (`{name}:SCENARIO.json`, or scenario.json in the example directory)"
    ))
}

/// The environment variables a matrix names (`runner.metadata.env`): what an `adapter:`
/// form passes (a registry entry names its own).
fn passed_env(matrix: &RunnerCapabilityMatrix) -> Vec<String> {
    crate::registry::matrix_env(matrix)
}

/// How `entry`'s adapter starts outside a run (`runners check --handshake`, `runners
/// conformance NAME`): as a run starts it — pin checked, executed through the descriptor it
/// hashed, its environment and read paths, confined where the kernel can. An entry that takes
/// a scenario gets one of `steps` written in `scratch` (created; outside the home, which the
/// adapter cannot read).
pub fn entry_spec(
    entry: &registry::Entry,
    home: &Path,
    scratch: &Path,
    steps: &serde_json::Value,
) -> Result<crate::adapter::AdapterSpec, Error> {
    let home =
        &std::path::absolute(home).map_err(|e| Error::usage(format!("{}: {e}", home.display())))?;
    // The scenario's path is passed to the adapter: absolute.
    let scratch = &std::path::absolute(scratch)
        .map_err(|e| Error::usage(format!("{}: {e}", scratch.display())))?;
    let mut launch = registry::verify(entry, home)?;
    std::fs::create_dir_all(scratch)
        .map_err(|e| Error::io(format!("{}: cannot create: {e}", scratch.display())))?;
    if let Some(flag) = &entry.scenario_arg {
        let scenario = scratch.join("scenario.json");
        let text = serde_json::json!({
            "schema": "craik.fixture_scenario", "id": "scenario_check",
            "description": "craik runners check/conformance",
            "steps": steps
        });
        std::fs::write(&scenario, text.to_string())
            .map_err(|e| Error::io(format!("{}: {e}", scenario.display())))?;
        launch.args.push(flag.clone());
        launch.args.push(scenario.display().to_string());
    }
    let mut spec = crate::adapter::AdapterSpec::new(launch.program, launch.args);
    spec.env = entry.adapter_env();
    spec.extra_read.clone_from(&entry.read);
    // The pinned tree a `cli` entry's CLI runs from, as a run grants it (outside testing round
    // r32b F5: without it, conformance could not start codex or gemini at all).
    spec.extra_read.extend(launch.read.iter().cloned());
    spec.home = Some(home.clone());
    spec.home_read = launch.home_read;
    spec.exec_sha256 = Some(launch.program_sha256);
    spec.tree = launch.watch;
    // Confined where the kernel can; a check on a kernel without Landlock still runs — but
    // not a real agent CLI, which holds the operator's key: confined, or not at all.
    spec.confinement_required = entry.backend == registry::Backend::Cli;
    Ok(spec)
}

/// `craik runners check --handshake`: starts `entry`'s adapter as a run would (pin checked,
/// executed through the descriptor it hashed, its environment and read paths, confined where
/// the kernel can), runs the `initialize` handshake against the registry's matrix (the adapter
/// must announce the matrix's runner id) and shuts it down. An entry that takes a scenario
/// gets a one-step one in its scratch directory. Returns what the adapter announced.
pub fn handshake(entry: &registry::Entry, home: &Path) -> Result<String, String> {
    let scratch = tempfile::Builder::new()
        .prefix("craik-handshake-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let steps = serde_json::json!([{"phase": "plan", "summary": "handshake only"}]);
    let result = (|| {
        let spec = entry_spec(entry, home, scratch.path(), &steps).map_err(|e| e.message)?;
        let mut adapter = crate::adapter::Adapter::spawn(spec).map_err(|e| e.to_string())?;
        adapter
            .initialize(Some(&entry.matrix.runner))
            .map_err(|e| e.to_string())?;
        let announced = adapter
            .claimed
            .as_ref()
            .map(|c| format!("{} {}", c.result.runner.id, c.result.runner.adapter_version))
            .unwrap_or_default();
        let _ = adapter.shutdown(std::time::Duration::from_secs(2));
        Ok(announced)
    })();
    // An entry that was never installed leaves no directory behind (only an empty one goes).
    let _ = std::fs::remove_dir(registry::entry_dir(home, &entry.id));
    result
}
