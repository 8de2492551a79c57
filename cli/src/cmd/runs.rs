//! `craik run`, `craik runs …`, `craik handoff show`, `craik approvals …`, `craik memory …`.

use std::path::{Path, PathBuf};

use craik_contracts::{
    CapabilityGrant, Contract, FixtureScenario, Handoff, IntentLock, PolicyEnvelope, PolicyProfile,
    RunnerCapabilityMatrix, TaskRequest, TaskRun, Timestamp,
};
use craik_kernel::{
    DecidedByKind, Decision, Ed25519Signer, KeyRing, VerifyOptions, verify_journal_with,
};
use serde::Serialize;
use time::OffsetDateTime;

use crate::cli::RunnerArg;
use crate::exit::{Exit, Failure};
use crate::files::{DEFAULT_MAX_BYTES, Input, read_bounded};
use crate::output::{Format, Out};
use crate::prompt::{Answer, Prompter};
use craik_host::launch::build_runner;
use craik_host::run::approvals::{ApprovalRecord, ApprovalStatus, all_approvals, find_approval};
use craik_host::run::driver::{Host, OperatorAct, Setup, Tally};
use craik_host::run::locked::LockedRun;
use craik_host::run::memory::proposals;
use craik_host::run::store::{HANDOFF, Home, RUN, RunDir, RunStore, RunStoreExt};
use craik_host::run::{Inputs, RunnerOptions, exec::digest};

/// What `craik run` was asked.
#[derive(Debug)]
pub(crate) struct RunArgs<'a> {
    pub(crate) task: &'a Path,
    pub(crate) runner: Option<&'a RunnerArg>,
    pub(crate) profile: Option<PolicyProfile>,
    /// The profile when neither `profile` nor the envelope names one (craik.toml's).
    pub(crate) default_profile: Option<PolicyProfile>,
    pub(crate) grants: &'a [PathBuf],
    pub(crate) intent: Option<&'a Path>,
    pub(crate) envelope: Option<&'a Path>,
    pub(crate) max_iterations: Option<u32>,
    pub(crate) budget_secs: Option<u64>,
    pub(crate) token_budget: Option<u64>,
    pub(crate) shadow: bool,
    pub(crate) workspace: Option<&'a Path>,
    pub(crate) home: Option<&'a Path>,
    pub(crate) policies: Option<&'a Path>,
    pub(crate) custom: &'a [PathBuf],
    /// For `--runner adapter:PROGRAM`: the shipped matrix it runs under.
    pub(crate) runner_matrix: Option<&'a str>,
    /// Per-step timeout for adapter runners.
    pub(crate) step_timeout_secs: Option<u64>,
    /// Line limit for adapter runners.
    pub(crate) max_line_bytes: Option<usize>,
    /// Extra paths an adapter process may read.
    pub(crate) adapter_read: &'a [PathBuf],
    pub(crate) toolchains: &'a [String],
    pub(crate) command_read: &'a [PathBuf],
    /// The project's immutable paths (craik.toml's), signed into the run's inputs.
    pub(crate) immutable_paths: &'a [String],
    /// craik.toml's project grant files: those of the task's project are loaded beside the
    /// task's grants (and signed with them); those of another project apply to nothing.
    pub(crate) project_grants: &'a [PathBuf],
    /// What craik.toml names as run inputs (itself, project grant dirs, custom policy dirs),
    /// existing or not: immutable to a run whose workspace holds them.
    pub(crate) config_inputs: &'a [PathBuf],
    /// The project profile (the task's project_profile.json, else craik.toml's); `None`:
    /// the run's workspace with its README and docs stands in (not signed as a profile).
    pub(crate) project: Option<&'a craik_host::project::Profile>,
    /// Who approves inline when the run parks on a terminal (`--by`, else craik.toml's
    /// operator); `None`: nobody is asked, the run parks (exit 6).
    pub(crate) approver: Option<&'a str>,
}

/// A file holding exactly one contract of type `T`.
pub(crate) fn read_one<T: Contract>(path: &Path) -> Result<T, Failure> {
    decode_one(path, &read_file(path)?)
}

fn read_file(path: &Path) -> Result<Vec<u8>, Failure> {
    read_bounded(&Input::File(path.to_owned()), DEFAULT_MAX_BYTES)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

/// `bytes` (read from `path`) as exactly one `T`; every problem names the file and field.
pub(crate) fn decode_one<T: Contract>(path: &Path, bytes: &[u8]) -> Result<T, Failure> {
    craik_contracts::decode_single_located(bytes).map_err(|problems| {
        let first = problems.first().cloned();
        let mut lines = problems
            .into_iter()
            .map(|p| format!("{}: {p}", path.display()));
        let message = lines.next().unwrap_or_default();
        // The first problem's place as fields too (issue 30: `--format json` errors carried
        // the line and column only inside the message's prose).
        let mut failure = Failure::invalid(message, lines.collect());
        failure.location = Some(Box::new(crate::exit::Location {
            file: Some(path.display().to_string()),
            field: first.as_ref().map(|p| p.path.clone()),
            position: first.as_ref().and_then(|p| p.line.zip(p.column)),
        }));
        failure
    })
}

/// An example directory's files, with the command line's flags taking precedence.
struct Resolved {
    task: PathBuf,
    /// `NAME` of the runner (`fixture`, `fixture-adapter`, `codex`, ...), or
    /// `adapter:PROGRAM`.
    runner: String,
    scenario: Option<PathBuf>,
    intent: Option<PathBuf>,
    envelope: Option<PathBuf>,
    grants: Vec<PathBuf>,
    workspace_seed: Option<PathBuf>,
    /// A task directory's `run.json` iteration ceiling (`craik task new --max-iterations`).
    max_iterations: Option<u32>,
}

/// A task directory's `run.json`: run settings `craik task new` wrote.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RunSettings {
    #[serde(default)]
    max_iterations: Option<u32>,
}

fn run_settings(dir: &Path) -> Result<Option<u32>, Failure> {
    let path = dir.join(crate::cmd::scaffold::RUN_SETTINGS);
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = read_file(&path)?;
    let settings: RunSettings = serde_json::from_slice(&bytes)
        .map_err(|e| Failure::invalid(format!("{}: {e}", path.display()), Vec::new()))?;
    Ok(settings.max_iterations)
}

/// `adapter:PROGRAM [ARG]...` with the program resolved (a path, or a bare name on the fixed
/// PATH) and arguments naming existing files made absolute, since the adapter runs in its own
/// directory.
fn adapter_runner(command: &str) -> Result<String, Failure> {
    let mut words = command.split_whitespace();
    let first = words.next().unwrap_or_default();
    let cwd =
        std::env::current_dir().map_err(|e| Failure::usage(format!("current directory: {e}")))?;
    let program = if first.contains('/') {
        PathBuf::from(first)
            .canonicalize()
            .map_err(|e| e.to_string())
    } else {
        craik_host::run::exec::resolve_program(first, &cwd).map_err(|e| e.to_string())
    }
    .map_err(|e| Failure::usage(format!("--runner adapter:{command}: {e}")))?;
    let mut parts = vec![program.display().to_string()];
    for arg in words {
        let path = Path::new(arg);
        parts.push(if !arg.starts_with('-') && path.exists() {
            path.canonicalize()
                .map_or_else(|_| arg.to_owned(), |p| p.display().to_string())
        } else {
            arg.to_owned()
        });
    }
    Ok(format!("adapter:{}", parts.join(" ")))
}

fn resolve(args: &RunArgs<'_>) -> Result<Resolved, Failure> {
    let (runner, scenario_flag) = match args.runner {
        Some(RunnerArg::Provider { api, model }) => (format!("provider:{api}:{model}"), None),
        Some(RunnerArg::Adapter { command }) => (adapter_runner(command)?, None),
        Some(RunnerArg::Registered { id, scenario }) => (id.clone(), scenario.clone()),
        None => ("fixture".to_owned(), None),
    };
    if args.task.is_dir() {
        let dir = args.task;
        let opt = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        let mut grants: Vec<PathBuf> = args.grants.to_vec();
        if grants.is_empty() {
            grants.extend(opt("capability_grant.json"));
            if let Ok(entries) = std::fs::read_dir(dir.join("grants")) {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .collect();
                found.sort();
                grants.extend(found);
            }
        }
        let scenario = scenario_flag.or_else(|| opt("scenario.json"));
        let task = opt("task_request.json")
            .ok_or_else(|| Failure::usage(format!("{}: no task_request.json", dir.display())))?;
        Ok(Resolved {
            task,
            runner,
            scenario,
            intent: args
                .intent
                .map(Path::to_owned)
                .or_else(|| opt("intent_lock.json")),
            envelope: args
                .envelope
                .map(Path::to_owned)
                .or_else(|| opt("policy_envelope.json")),
            grants,
            workspace_seed: Some(dir.join("workspace")).filter(|p| p.is_dir()),
            max_iterations: run_settings(dir)?,
        })
    } else {
        Ok(Resolved {
            task: args.task.to_owned(),
            runner,
            scenario: scenario_flag,
            intent: args.intent.map(Path::to_owned),
            envelope: args.envelope.map(Path::to_owned),
            grants: args.grants.to_vec(),
            workspace_seed: None,
            max_iterations: None,
        })
    }
}

/// Loads the signing key under the home; with `create` (a run starting), creates the home's
/// `.gitignore` and then the key the first time, saying what it did. Every other command
/// refuses a home without a key: it never creates one.
fn keys(home: &Home, out: &mut Out, create: bool) -> Result<(Ed25519Signer, KeyRing), Failure> {
    let private = home.keys().join(craik_host::keys::PRIVATE_NAME);
    if create {
        craik_host::run::store::create_home(&home.root)
            .map_err(craik_host::run::store::home_io(&home.root))?;
    } else if !private.exists() {
        return Err(Failure::usage(format!(
            "`{}`: no signing key in this home (is it the home you meant? a home gets its key from `craik init` or its first `craik run`)",
            private.display()
        )));
    }
    let (signer, ring, notes) = craik_host::keys::load_or_create(&home.keys())?;
    for note in notes {
        out.diag(format_args!("craik: {note}"))?;
    }
    Ok((signer, ring))
}

fn setup(
    inputs_policies: Option<&Path>,
    custom: &[PathBuf],
    (task, grants): (&TaskRequest, &[CapabilityGrant]),
    runner: (Box<dyn craik_host::run::StepRunner>, RunnerCapabilityMatrix),
    home: &Home,
    out: &mut Out,
    create: bool,
) -> Result<Setup, Failure> {
    let loaded = crate::bundle::load(inputs_policies, custom)?;
    // Project grants are compiled bound to this run's task (signed as written).
    let bound = craik_host::run::bound_grants(task, grants)?;
    let grants = crate::bundle::compile_grants(&loaded.bundle, &bound, "grants")?;
    let (signer, keys) = keys(home, out, create)?;
    Ok(Setup {
        bundle: loaded.bundle,
        grants,
        signer,
        keys,
        runner: runner.0,
        matrix: runner.1,
        clock: std::sync::Arc::new(craik_host::SystemClock),
    })
}

fn read_scenario(path: &Path) -> Result<(FixtureScenario, String), Failure> {
    // One read: the bytes decoded are the bytes hashed.
    let bytes = read_file(path)?;
    Ok((decode_one(path, &bytes)?, digest(&bytes)))
}

/// The toolchains of `--toolchain` and `--command-read`, resolved against the operator's
/// environment now (and signed into the run's inputs).
fn resolve_toolchains(
    names: &[String],
    extra: &[PathBuf],
) -> Result<Vec<craik_host::confine::toolchains::Toolchain>, Failure> {
    use craik_host::confine::toolchains;
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let var = |k: &str| std::env::var(k).ok();
    let mut out = Vec::new();
    for name in names {
        out.push(toolchains::preset(name, user_home.as_deref(), &var).map_err(Failure::usage)?);
    }
    for path in extra {
        out.push(toolchains::extra_read(path).map_err(Failure::usage)?);
    }
    Ok(out)
}

/// What a run is made of, read and checked before anything is written: the same for
/// `craik run` and `craik prompt compile`.
struct Prepared {
    resolved: Resolved,
    task: TaskRequest,
    scenario_path: Option<PathBuf>,
    scenario_digest: Option<String>,
    intent: Option<IntentLock>,
    envelope: Option<PolicyEnvelope>,
    grants: Vec<CapabilityGrant>,
    profile: PolicyProfile,
    max_iterations: u32,
}

fn prepare(out: &mut Out, args: &RunArgs<'_>) -> Result<Prepared, Failure> {
    let resolved = resolve(args)?;
    let task: TaskRequest = read_one(&resolved.task)?;
    let (scenario_path, scenario_digest) = match &resolved.scenario {
        Some(path) => {
            let (_, digest) = read_scenario(path)?;
            let absolute = path
                .canonicalize()
                .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
            (Some(absolute), Some(digest))
        }
        None => (None, None),
    };
    let intent: Option<IntentLock> = resolved.intent.as_deref().map(read_one).transpose()?;
    let envelope: Option<PolicyEnvelope> =
        resolved.envelope.as_deref().map(read_one).transpose()?;
    let mut grants = crate::bundle::read_grants(&resolved.grants)?;
    let mut elsewhere = 0usize;
    for file in args.project_grants {
        for grant in crate::bundle::read_grants(std::slice::from_ref(file))? {
            match (&grant.task_id, &grant.project_id) {
                (None, Some(p)) if *p == task.project_id => {
                    if !grants.contains(&grant) {
                        grants.push(grant);
                    }
                }
                // Another project's grant applies to nothing here.
                (None, Some(_)) => elsewhere += 1,
                _ => {
                    return Err(Failure::invalid(
                        format!(
                            "{}: grant `{}` is a task grant; craik.toml's project.grants holds project grants only (`craik grants new --project`)",
                            file.display(),
                            craik_contracts::Truncated(&grant.id)
                        ),
                        Vec::new(),
                    ));
                }
            }
        }
    }
    if elsewhere > 0 {
        out.diag(format_args!(
            "craik: {elsewhere} project grant(s) in craik.toml's project.grants are for another project than `{}` and do not apply",
            task.project_id
        ))?;
    }
    // A grant that cannot be signed (a float or an oversized integer anywhere in it) is
    // refused here, never hashed as "".
    craik_host::run::grants_digest(&grants).map_err(Failure::usage)?;
    craik_host::run::check_task_bindings(&task, intent.as_ref(), envelope.as_ref(), &grants)?;
    let profile = args
        .profile
        .or_else(|| envelope.as_ref().map(|e| e.profile))
        .or(args.default_profile)
        .unwrap_or(PolicyProfile::Strict);
    if profile == PolicyProfile::Custom && args.custom.is_empty() {
        return Err(Failure::usage(
            "--profile custom needs at least one --custom DIR of operator policies",
        ));
    }
    craik_kernel::ImmutablePaths::new(args.immutable_paths).map_err(|e| {
        Failure::invalid(
            format!("craik.toml: project.immutable_paths: {e}"),
            Vec::new(),
        )
    })?;
    let max_iterations = args.max_iterations.or(resolved.max_iterations).unwrap_or(5);
    if max_iterations == 0 {
        return Err(Failure::usage("--max-iterations: must be at least 1"));
    }
    Ok(Prepared {
        resolved,
        task,
        scenario_path,
        scenario_digest,
        intent,
        envelope,
        grants,
        profile,
        max_iterations,
    })
}

/// The workspace the run will have, when it is not yet made: `--workspace`, else (no example
/// seed, which is copied into the run directory) the current directory.
fn planned_workspace(args: &RunArgs<'_>, p: &Prepared) -> Result<Option<PathBuf>, Failure> {
    match (args.workspace, p.resolved.workspace_seed.as_deref()) {
        (Some(ws), _) => Ok(Some(ws.to_path_buf())),
        (None, Some(_)) => Ok(None),
        (None, None) => std::env::current_dir()
            .map(Some)
            .map_err(|e| Failure::usage(format!("current directory: {e}"))),
    }
}

/// The case file (from the declared profile's repository, else from the workspace the run will
/// have: an example's seed, `--workspace`, the current directory) and the prompt compiled
/// from it and the run's inputs. `home`: the run's home and its keys (approved memory is
/// taken only when its signed review verifies).
fn assemble_context(
    args: &RunArgs<'_>,
    p: &Prepared,
    (home, keys): (&Home, Option<&craik_kernel::KeyRing>),
    (matrix, matrix_from_project): (&RunnerCapabilityMatrix, bool),
    planned_ws: Option<&Path>,
) -> Result<(craik_host::case::Built, craik_host::prompt::Compiled), Failure> {
    let implicit;
    let project_profile = match args.project {
        Some(profile) => profile,
        None => {
            let root = args
                .workspace
                .or(p.resolved.workspace_seed.as_deref())
                .or(planned_ws)
                .unwrap_or(Path::new("."));
            implicit = craik_host::project::Profile::implicit(
                root,
                &p.task.project_id,
                args.immutable_paths,
            );
            &implicit
        }
    };
    let case = craik_host::case::build(&craik_host::case::Request {
        profile: project_profile,
        task: &p.task,
        intent: p.intent.as_ref(),
        envelope: p.envelope.as_ref(),
        home: home.root.is_dir().then_some(home),
        keys,
        max_tokens: craik_host::case::DEFAULT_MAX_TOKENS,
        strict: false,
    })?;
    let compiled = craik_host::prompt::compile(&craik_host::prompt::Request {
        task: &p.task,
        matrix,
        matrix_from_project,
        profile: p.profile,
        envelope: p.envelope.as_ref(),
        intent: p.intent.as_ref(),
        grants: &p.grants,
        max_iterations: p.max_iterations,
        case: &case.case,
        case_bytes: &case.bytes,
    })?;
    Ok((case, compiled))
}

/// `craik prompt compile`: what a `craik run` with the same arguments would tell its runner,
/// compiled exactly as the run would, printed (the prompt text; `--format json`: the
/// `craik.compiled_prompt` file's bytes) and, with `--out`, written. Nothing else is written:
/// no home, key or run is created.
pub(crate) fn prompt_compile(
    out: &mut Out,
    format: Format,
    args: &RunArgs<'_>,
    file: Option<&Path>,
) -> Result<Exit, Failure> {
    let prepared = prepare(out, args)?;
    let planned = planned_workspace(args, &prepared)?;
    let planned_ws = planned.as_deref();
    let home = Home::for_run(args.home, planned_ws)?;
    let keys = if home.keys().join(craik_host::keys::PRIVATE_NAME).is_file() {
        Some(craik_host::keys::load_or_create(&home.keys())?.1)
    } else {
        None
    };
    let registry = crate::cmd::runners::registry(&home.root)?;
    let options = RunnerOptions {
        matrix: args.runner_matrix.map(str::to_owned),
        ..RunnerOptions::default()
    };
    let (matrix, from_project) =
        craik_host::launch::matrix_for(&prepared.resolved.runner, &options, &registry)?;
    let (_, compiled) = assemble_context(
        args,
        &prepared,
        (&home, keys.as_ref()),
        (&matrix, from_project),
        planned_ws,
    )?;
    if let Some(file) = file {
        craik_host::fsio::write_atomic(file, &compiled.bytes)
            .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    }
    if format == Format::Json {
        out.text(&String::from_utf8_lossy(&compiled.bytes))?;
    } else {
        out.text(&compiled.prompt.prompt)?;
    }
    Ok(Exit::Ok)
}

/// The immutable paths of the declared `profile`, as globs of the run's workspace, when the
/// run's workspace (`source`: `--workspace`, or the example's seed it is copied from) is the
/// profile's repository; none otherwise (they name paths of another tree).
fn profile_immutable(
    profile: Option<&craik_host::project::Profile>,
    source: Option<&Path>,
) -> Result<Vec<String>, Failure> {
    let (Some(profile), Some(source)) = (profile, source) else {
        return Ok(Vec::new());
    };
    let same = match (profile.root.canonicalize(), source.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        return Ok(Vec::new());
    }
    // The entries mean what they mean in the case file's inventory (`Specs`).
    let globs: Vec<String> = profile
        .profile
        .docs
        .immutable_paths
        .iter()
        .flat_map(|entry| craik_host::project::Specs::globs_of(entry))
        .collect();
    craik_kernel::ImmutablePaths::new(&globs).map_err(|e| {
        Failure::invalid(
            format!("{}: docs.immutable_paths: {e}", profile.file.display()),
            Vec::new(),
        )
    })?;
    Ok(globs)
}

/// Room a step request needs beside its prompt: ids, the context, and the observed outcomes
/// twice (in `context` and in the Step section, ASCII-escaped: up to 6 bytes a character, then
/// JSON-escaped), each at most `craik_host::prompt::MAX_OUTCOMES_CHARS` characters.
const REQUEST_ROOM: usize = 512 * 1024;

/// A step request carries the compiled prompt on one channel line: refuses a line limit
/// (`--max-line-bytes`) it cannot fit in, before anything is written.
fn prompt_fits(
    compiled: &craik_host::prompt::Compiled,
    max_line_bytes: Option<usize>,
) -> Result<(), Failure> {
    let limit = max_line_bytes.unwrap_or(craik_contracts::channel::DEFAULT_MAX_LINE_BYTES);
    // As a JSON string (escapes can double a character).
    let encoded = serde_json::to_string(&compiled.prompt.prompt)
        .map_or(usize::MAX, |s| s.len())
        .saturating_add(REQUEST_ROOM);
    if encoded > limit {
        return Err(Failure::usage(format!(
            "--max-line-bytes {limit}: a step request carries the compiled prompt ({} bytes) on one line; give at least {encoded}",
            compiled.prompt.prompt.len()
        )));
    }
    Ok(())
}

/// `craik run`.
pub(crate) fn run(out: &mut Out, format: Format, args: &RunArgs<'_>) -> Result<Exit, Failure> {
    // From here a first signal stops the run cleanly, also while it is being set up (outside
    // testing round 9: a Ctrl-C in the first quarter second left a run directory half made).
    craik_host::confine::set_graceful(true);
    let prepared = prepare(out, args)?;
    // The workspace the run will have (an example's is a fresh copy inside the run
    // directory); the home is chosen, or refused, against it before anything is written.
    let planned = planned_workspace(args, &prepared)?;
    let planned_ws = planned.as_deref();
    let toolchains = resolve_toolchains(args.toolchains, args.command_read)?;
    let home = Home::for_run(args.home, planned_ws)?;
    // A `--home` naming nothing is a new home with a new key — say so, loudly: a typo
    // would otherwise leave a second home whose receipts no existing key verifies.
    if let Some(given) = args.home
        && !home.root.join("keys").exists()
    {
        out.diag(format_args!(
            "craik: no Craik home at `{}` (--home {}): creating a new one with a new signing key; if you meant an existing home, check the path",
            home.root.display(),
            given.display()
        ))?;
    }
    if args.home.is_none() && std::path::absolute(".craik").is_ok_and(|local| home.root != local) {
        out.diag(format_args!(
            "craik: home `{}` (the default `./.craik` would lie inside the workspace)",
            home.root.display()
        ))?;
    }
    let started = OffsetDateTime::now_utc();
    let run_id = craik_host::run::store::new_run_id(started)?;
    let runner_options = RunnerOptions {
        matrix: args.runner_matrix.map(str::to_owned),
        step_timeout_secs: args.step_timeout_secs,
        max_line_bytes: args.max_line_bytes,
        adapter_read: args
            .adapter_read
            .iter()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
            .collect(),
    };
    let scenario = match prepared.resolved.scenario.as_deref() {
        Some(path) => Some((path, read_scenario(path)?.0)),
        None => None,
    };
    let registry = crate::cmd::runners::registry(&home.root)?;
    let (runner, matrix, runner_adapter) = build_runner(
        &prepared.resolved.runner,
        scenario,
        &home.runs().join(&run_id),
        &runner_options,
        prepared.profile,
        &registry,
    )?;
    let setup = setup(
        args.policies,
        args.custom,
        (&prepared.task, &prepared.grants),
        (runner, matrix),
        &home,
        out,
        true,
    )?;
    // An envelope entry naming no declared capability or family would match nothing (issue
    // 30: `repo.write.doc` under approval_required let the write run without approval):
    // refused before anything is written (the kernel also denies every request while one is
    // there, on every other path).
    if let Some(envelope) = &prepared.envelope
        && let Some((field, entry)) = setup
            .bundle
            .undeclared_envelope_entry(&craik_kernel::EnvelopeRules::from(envelope))
    {
        return Err(Failure::invalid(
            format!(
                "{}: policy envelope `{}`: {field}: `{}` names no capability the policy schema declares; use a declared capability (`repo.write.docs`) or family (`repo.write`), see policies/README.md",
                prepared
                    .resolved
                    .envelope
                    .as_deref()
                    .map_or_else(|| "policy envelope".to_owned(), |p| p.display().to_string()),
                craik_contracts::one_line(&envelope.id),
                craik_contracts::one_line(entry)
            ),
            Vec::new(),
        ));
    }
    // The case file and the prompt, assembled before anything of the run is written.
    let from_project = runner_adapter
        .as_ref()
        .is_some_and(|r| r.origin == "project");
    let (case, compiled) = assemble_context(
        args,
        &prepared,
        (&home, Some(&setup.keys)),
        (&setup.matrix, from_project),
        planned_ws,
    )?;
    let project_profile_sha256 = match args.project {
        Some(p) => Some(p.digest().map_err(Failure::internal)?.as_str().to_owned()),
        None => None,
    };
    prompt_fits(&compiled, runner_options.max_line_bytes)?;
    if let Some(signal) = craik_host::confine::interrupted() {
        return Err(Failure::usage(format!(
            "interrupted by {} before the run started; nothing was written",
            craik_host::confine::signal_name(signal)
        )));
    }
    // Craik's inputs that lie in the workspace (policies, custom policies, grant files, the
    // intent lock and envelope, configuration, registry files) are immutable to the run (the
    // plan finds which): no command or write capability may change what the next run reads.
    // The declared profile's immutable paths (ADRs) are immutable to the run too, when the
    // run works on the profile's repository (or an example's copy of it).
    let mut immutable_paths = args.immutable_paths.to_vec();
    immutable_paths.extend(profile_immutable(
        args.project,
        args.workspace
            .or(prepared.resolved.workspace_seed.as_deref()),
    )?);
    let input_files: Vec<PathBuf> = args
        .policies
        .into_iter()
        .chain(args.custom.iter().map(PathBuf::as_path))
        .chain(args.grants.iter().map(PathBuf::as_path))
        .chain(args.project_grants.iter().map(PathBuf::as_path))
        .chain(args.intent)
        .chain(args.envelope)
        .chain(args.config_inputs.iter().map(PathBuf::as_path))
        .chain(registry.input_paths().iter().map(PathBuf::as_path))
        .map(Path::to_owned)
        .collect();
    let Prepared {
        resolved,
        task,
        scenario_path,
        scenario_digest,
        intent,
        envelope,
        grants,
        profile,
        max_iterations,
    } = prepared;
    let inputs = Inputs {
        run_id: run_id.clone(),
        task,
        intent,
        envelope,
        grants,
        runner: resolved.runner.clone(),
        runner_options,
        runner_adapter,
        scenario_path,
        scenario_digest,
        profile,
        policies: args.policies.map(Path::to_owned),
        custom: args.custom.to_vec(),
        // Set by the plan: the workspace as created, the loaded policy set, the bound files.
        policy_set: String::new(),
        workspace: PathBuf::new(),
        toolchains,
        immutable_paths,
        max_iterations,
        budget_secs: args.budget_secs,
        shadow: args.shadow,
        started_at: Timestamp::new(started),
        started_by: args.approver.map(str::to_owned),
        project_profile_sha256,
        case_file_sha256: None,
        compiled_prompt_sha256: None,
        token_budget: args.token_budget,
    };
    let keys = setup.keys.clone();
    let mut host = craik_host::run::plan::RunPlan {
        home,
        inputs,
        seed: resolved.workspace_seed.clone(),
        workspace: args.workspace.map(Path::to_owned),
        case_file: Some(case.bytes),
        compiled_prompt: Some(compiled.bytes),
        input_files,
    }
    .start(setup)?;
    // What the operator's git runs here, as git says (issue 30 item 2): the hooks found, and
    // the limit that what a hook runs in turn is not modelled; or why everything is protected.
    let workspace = host.inputs().workspace.clone();
    let git = craik_host::run::gitconfig::Survey::of(
        &workspace,
        Vec::new(),
        &craik_host::run::gitconfig::GitEnv::from_process(),
    );
    for line in git.notice(&workspace) {
        out.diag(line)?;
    }
    let watching = watch(out, &mut host)?;
    drive(&mut host, watching)?;
    let ask = Prompter::for_terminal(format);
    if ask.interactive() && !host.is_final() && awaiting_approval(host.machine().run()).is_some() {
        match args.approver {
            Some(by) => {
                let (home, run_id) = (host.home().root.clone(), host.inputs().run_id.clone());
                // The lock is released: deciding and continuing take the same paths as
                // `craik approvals approve` and `craik runs resume`.
                drop(host);
                return attended(out, format, &home, &run_id, by, &ask);
            }
            None => out.diag(
                "craik: the run waits for an approval; not asking here: no approver (pass --by user:NAME, or set `operator` in craik.toml, e.g. `craik init --operator NAME`)",
            )?,
        }
    }
    summary(out, format, &host, &keys)
}

/// The pending approvals of run `run_id`, with the run's directory.
fn pending_of(home: &Home, run_id: &str) -> Result<Vec<(RunDir, ApprovalRecord)>, Failure> {
    Ok(all_approvals(home)?
        .into_iter()
        .filter(|(_, a)| a.run_id == run_id && a.status == ApprovalStatus::Pending)
        .collect())
}

/// What an inline decision defaults to when the operator gives no reason.
const INLINE_APPROVED: &str = "approved at the terminal";
const INLINE_DENIED: &str = "denied at the terminal";

/// A parked run attended on a terminal: each pending approval is shown (the exact action,
/// escaped) and decided by `by` (`y`/`n`, then a reason), signed exactly as `craik approvals
/// approve|deny` signs it; the run then continues as `craik runs resume` continues it, and
/// asks again should it park again. End of input leaves the run parked.
fn attended(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
    by: &str,
    ask: &Prompter,
) -> Result<Exit, Failure> {
    loop {
        let home_h = Home::new(home);
        let (_, ring) = keys(&home_h, out, false)?;
        let mut decided = 0usize;
        let mut stopped = false;
        for (dir, a) in pending_of(&home_h, run_id)? {
            let bound = craik_host::run::approvals::approval_bound(&dir, &a, &ring);
            out.diag("")?;
            out.diag("craik: the run asks for approval:")?;
            for line in describe_approval(&a, bound.as_ref().err().map(String::as_str)) {
                out.diag(format_args!("  {line}"))?;
            }
            if bound.is_err() {
                out.diag("craik: not asking: the approval file does not show what the run parked; the run stays parked")?;
                stopped = true;
                break;
            }
            // Refused before anyone answers: not a `user:`, or the runner itself.
            craik_host::run::approvals::reviewer(by, &a.runner_id)?;
            // While it waits, a decision made elsewhere (`craik approvals approve|deny` in
            // another shell) settles the question: the run continues with that decision.
            let mut elsewhere = || {
                find_approval(&home_h, &a.id)
                    .is_ok_and(|(_, r)| r.status != ApprovalStatus::Pending)
            };
            let approve = match ask.yes_no_or(&format!("approve as {by}?"), &mut elsewhere)? {
                Answer::Line(yes) => yes == "y",
                Answer::End => {
                    stopped = true;
                    break;
                }
                Answer::Elsewhere => {
                    if let Ok((_, r)) = find_approval(&home_h, &a.id) {
                        out.diag(format_args!(
                            "craik: {} was {} elsewhere by {}; continuing",
                            a.id,
                            r.status.as_str(),
                            r.decided_by.as_deref().unwrap_or("?")
                        ))?;
                    }
                    decided += 1;
                    continue;
                }
            };
            let reason = ask.ask(
                "--reason",
                "reason",
                Some(if approve {
                    INLINE_APPROVED
                } else {
                    INLINE_DENIED
                }),
            )?;
            decide_one(
                out,
                format,
                home,
                &a.id,
                by,
                &reason,
                approve,
                DEFAULT_APPROVAL_SECS,
            )?;
            decided += 1;
        }
        if stopped || decided == 0 {
            let (mut host, keys) = open_locked(home, run_id, out)?;
            let found = host.settle()?;
            host.set_notes(found);
            return summary(out, format, &host, &keys);
        }
        // Should another process have taken the run on (`approvals approve --resume`,
        // `runs resume`), wait for it to let go, then show where the run stands.
        wait_for_lock(out, home, run_id)?;
        let (host, keys) = continue_run(out, home, run_id, by)?;
        if !host.is_final() && awaiting_approval(host.machine().run()).is_some() {
            drop(host);
            continue;
        }
        return summary(out, format, &host, &keys);
    }
}

/// Waits while another live process holds run `run_id`'s lock, saying so once.
fn wait_for_lock(out: &mut Out, home: &Path, run_id: &str) -> Result<(), Failure> {
    let dir = Home::new(home).run_dir(run_id)?;
    let mut said = false;
    while let Some(pid) = dir.locked_by_live() {
        if !said {
            out.diag(format_args!(
                "craik: process {pid} is continuing {run_id}; waiting for it"
            ))?;
            said = true;
        }
        std::thread::sleep(crate::prompt::POLL);
    }
    Ok(())
}

/// Shows the run's progress live from now on (`crate::live`), if the output asks for it.
fn watch(out: &mut Out, host: &mut Host) -> Result<Option<crate::live::Done>, Failure> {
    // What is on stdout so far goes before the stream.
    out.flush()?;
    Ok(
        crate::live::observer(out.live, &out.seq).map(|(observer, done)| {
            host.observe(observer);
            done
        }),
    )
}

/// Drives the run until it halts or parks, shown live as `watching` (see [`watch`]) says.
fn drive(host: &mut Host, watching: Option<crate::live::Done>) -> Result<(), Failure> {
    // A first Ctrl-C (SIGINT, SIGTERM, SIGHUP) stops the run cleanly, signed interrupted; a
    // second takes the hard path (everything killed, `craik runs recover`).
    craik_host::confine::set_graceful(true);
    let result = host.drive(&mut |_| {});
    craik_host::confine::set_graceful(false);
    if let Some(done) = watching {
        done.finish();
    }
    Ok(result?)
}

#[derive(Debug, Serialize)]
struct Summary<'a> {
    run: &'a TaskRun,
    /// Parked for a person (an approval, a crash to recover): `run.status` says `blocked`, as
    /// the contract has it, but the run is not over — it resumes.
    parked: bool,
    tally: &'a Tally,
    receipts: u64,
    journal: String,
    journal_valid: bool,
    journal_closed: bool,
    handoff: Option<String>,
    notes: &'a [String],
}

fn summary(out: &mut Out, format: Format, host: &Host, keys: &KeyRing) -> Result<Exit, Failure> {
    let journal = host.journal_path();
    let bytes = std::fs::read(&journal)
        .map_err(|e| Failure::internal(format!("{}: {e}", journal.display())))?;
    let report = verify_journal_with(
        &bytes,
        keys,
        VerifyOptions {
            allow_open: true,
            ..VerifyOptions::default()
        },
        &mut |_, _| {},
    );
    // Verdicts as the journal records them (every decision, across resumes).
    let mut tally = host.tally();
    for (_, line) in crate::cmd::receipts::decode_all(&bytes) {
        if let crate::cmd::receipts::Decoded::Receipt(r) = line
            && r.decided_by.kind != DecidedByKind::Outcome
            && r.capability != craik_host::run::driver::RUN_INPUTS
            && !craik_host::run::driver::is_human_decision(&r.capability)
            && r.capability != craik_host::run::driver::RUN_CLOSED
            && r.capability != craik_host::run::driver::RUN_PARKED
            && r.capability != craik_host::run::driver::MODEL_STEP
        {
            match r.decision {
                Decision::Allow => tally.allow += 1,
                Decision::RequiresApproval => tally.approval += 1,
                Decision::Deny => tally.deny += 1,
            }
        }
    }
    let run = host.machine().run();
    let handoff = host.dir().file(HANDOFF);
    let handoff = handoff.is_file().then(|| handoff.display().to_string());
    let s = Summary {
        run,
        parked: is_parked(run),
        tally: &tally,
        receipts: report.receipts,
        journal: journal.display().to_string(),
        journal_valid: report.is_valid(),
        journal_closed: report.closed,
        handoff: handoff.clone(),
        notes: host.notes(),
    };
    match format {
        Format::Human => {
            out.line(format_args!(
                "run {}: {} — {}",
                run.id,
                if awaiting_approval(run).is_some() {
                    "awaiting-approval"
                } else {
                    run.status.as_str()
                },
                run.stop_reason.as_deref().unwrap_or("")
            ))?;
            out.line(format_args!(
                "  steps     {} (iteration {} of {}, phase {})",
                tally.steps,
                run.iteration,
                run.max_iterations,
                run.phase.as_str()
            ))?;
            if host.inputs().shadow {
                out.line(format_args!(
                    "  verdicts  {} allow, {} requires approval, {} deny — SHADOW: decided and receipted, nothing performed",
                    tally.allow, tally.approval, tally.deny
                ))?;
            } else {
                out.line(format_args!(
                    "  verdicts  {} allow, {} requires approval, {} deny; {} side effects performed",
                    tally.allow, tally.approval, tally.deny, tally.executed
                ))?;
            }
            // Issue 21 item 4: the run's model steps against its token budget.
            let tokens = host.token_usage();
            if tokens.model_steps > 0 || host.inputs().token_budget.is_some() {
                let budget = host.inputs().token_budget;
                out.line(format_args!(
                    "  tokens    {}",
                    match budget {
                        Some(b) => format!(
                            "{} of {b} tokens used, {} left ({} in, {} out; {} model step(s), adapter-reported){}",
                            tokens.total_tokens,
                            b.saturating_sub(tokens.total_tokens),
                            tokens.input_tokens,
                            tokens.output_tokens,
                            tokens.model_steps,
                            craik_host::run::driver::unknown_note(&tokens)
                        ),
                        None => format!(
                            "{} tokens used, no budget ({} in, {} out; {} model step(s), adapter-reported){}",
                            tokens.total_tokens,
                            tokens.input_tokens,
                            tokens.output_tokens,
                            tokens.model_steps,
                            craik_host::run::driver::unknown_note(&tokens)
                        ),
                    }
                ))?;
            }
            match &report.failure {
                None => out.line(format_args!(
                    "  receipts  {} signed, verified ({}): {}",
                    report.receipts,
                    if report.closed {
                        "closed"
                    } else {
                        "open: the run can resume"
                    },
                    journal.display()
                ))?,
                Some(f) => out.line(format_args!(
                    "  receipts  INVALID at line {}: {}: {}",
                    f.line, f.what, f.why
                ))?,
            }
            match &handoff {
                Some(h) => out.line(format_args!("  handoff   {h}"))?,
                None => out.line(format_args!(
                    "  handoff   none yet (the run is {})",
                    run.status.as_str()
                ))?,
            }
            for note in host.notes() {
                out.line(format_args!("  note      {note}"))?;
            }
            if let Some(id) = awaiting_approval(run) {
                out.line(format_args!(
                    "  next      craik approvals approve {id} --by user:NAME --reason TEXT --resume (or then craik runs resume {})",
                    run.id
                ))?;
            }
        }
        Format::Json | Format::Junit if out.jsonl => {
            let line = crate::live::summary_record(&out.seq, &s);
            out.json_line(&line)?;
        }
        Format::Json | Format::Junit => out.json(&s)?,
    }
    if !report.is_valid() {
        return Ok(Exit::Internal);
    }
    Ok(if run.status == craik_contracts::TaskRunStatus::Completed {
        Exit::Ok
    } else if awaiting_approval(run).is_some() {
        Exit::AwaitingApproval
    } else {
        Exit::CheckFailed
    })
}

/// The approval a parked run waits for (`None`: it is not parked).
/// Blocked but not ended: the run waits (an approval, a recovery) and resumes.
fn is_parked(run: &craik_contracts::TaskRun) -> bool {
    run.status == craik_contracts::TaskRunStatus::Blocked && run.ended_at.is_none()
}

fn awaiting_approval(run: &craik_contracts::TaskRun) -> Option<&str> {
    run.stop_reason
        .as_deref()
        .and_then(|r| r.strip_prefix("awaiting approval "))
        .and_then(|rest| rest.split(' ').next())
        .filter(|id| !id.is_empty())
}

/// Takes the run's lock, checks its inputs against its signed journal, then reopens it; the
/// returned host holds the lock for its life.
fn open_locked(home: &Path, run_id: &str, out: &mut Out) -> Result<(Host, KeyRing), Failure> {
    open_locked_with(home, run_id, out, craik_host::run::driver::Replay::Events)
}

fn open_locked_with(
    home: &Path,
    run_id: &str,
    out: &mut Out,
    replay: craik_host::run::driver::Replay,
) -> Result<(Host, KeyRing), Failure> {
    let home = Home::new(home);
    let dir = home.run_dir(run_id)?;
    let (_, ring) = keys(&home, out, false)?;
    let run_path = dir.path.clone();
    let run = LockedRun::open(Home::new(&home.root), dir, &ring)?;
    let inputs = run.inputs().clone();
    let mut scenario = None;
    if let (Some(path), Some(digest)) = (&inputs.scenario_path, &inputs.scenario_digest) {
        let (decoded, digest_now) = read_scenario(path)?;
        scenario = Some((path.as_path(), decoded));
        if &digest_now != digest {
            return Err(Failure::invalid(
                format!(
                    "{}: the scenario changed since the run started ({digest} → {digest_now}); a run continues only with the runner it started with",
                    path.display(),
                ),
                Vec::new(),
            ));
        }
    }
    let registry = crate::cmd::runners::registry(&home.root)?;
    let (runner, matrix, adapter_now) = build_runner(
        &inputs.runner,
        scenario,
        &run_path,
        &inputs.runner_options,
        inputs.profile,
        &registry,
    )?;
    // A run continues only with the adapter it started with (the bytes, not the name).
    if let (Some(then), Some(now)) = (&inputs.runner_adapter, &adapter_now)
        && (then.sha256 != now.sha256 || then.path != now.path)
    {
        return Err(Failure::from(craik_host::Error::refused(format!(
            "runner `{}`: the adapter changed since the run started (`{}` {} then, `{}` {} now); a run continues only with the runner it started with",
            then.id,
            then.path.display(),
            then.sha256,
            now.path.display(),
            now.sha256
        ))));
    }
    // ... and under the registry entry it started with (arguments, variables, read paths,
    // matrix): not whatever the project's runners.toml says now.
    if let (Some(then), Some(now)) = (&inputs.runner_adapter, &adapter_now)
        && let Some(recorded) = &then.entry_sha256
        && now.entry_sha256.as_ref() != Some(recorded)
    {
        return Err(Failure::from(craik_host::Error::refused(format!(
            "runner `{}`: its registry entry changed since the run started (definition {recorded} then, {} now); a run continues only with the runner it started with — restore the entry in {}",
            then.id,
            now.entry_sha256.as_deref().unwrap_or("none"),
            if registry.files.is_empty() {
                "the registry".to_owned()
            } else {
                registry
                    .files
                    .iter()
                    .map(|f| format!("`{}`", f.display()))
                    .collect::<Vec<_>>()
                    .join(" or ")
            }
        ))));
    }
    let setup = setup(
        inputs.policies.as_deref(),
        &inputs.custom,
        (&inputs.task, &inputs.grants),
        (runner, matrix),
        &home,
        out,
        false,
    )?;
    let keys = setup.keys.clone();
    Ok((Host::recover_with(run, setup, replay)?, keys))
}

/// `craik runs recover RUN`: repair and classify, continue nothing.
pub(crate) fn recover(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
    by: &str,
) -> Result<Exit, Failure> {
    {
        let home = Home::new(home);
        let (_, ring) = keys(&home, out, false)?;
        if craik_host::run::locked::discard_never_started(&home, run_id, &ring)? {
            out.line(format_args!(
                "{run_id}: never started (killed before its first receipt: nothing was signed or performed); its directory was removed"
            ))?;
            return Ok(Exit::Ok);
        }
    }
    let (mut host, keys) = open_locked(home, run_id, out)?;
    operator(&host, by)?;
    // Who recovered it, signed first, while the journal is open: settling may end the run
    // (a command killed mid-way), and then it was never said who recovered it (issue 31).
    host.operator_receipt(OperatorAct::Recover, by, "recovered by the operator")?;
    let found = host.settle()?;
    if format == Format::Human {
        if found.is_empty() {
            out.line(format_args!("{run_id}: nothing to recover"))?;
        }
        for line in &found {
            out.line(format_args!("{run_id}: {line}"))?;
        }
    }
    host.set_notes(found);
    summary(out, format, &host, &keys)
}

/// `craik runs resume RUN`: recover, then continue (with decided approvals as facts).
pub(crate) fn resume(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
    by: &str,
) -> Result<Exit, Failure> {
    let (host, keys) = continue_run(out, home, run_id, by)?;
    summary(out, format, &host, &keys)
}

/// The operator acting on a run: a `user:NAME` who is not its runner.
fn operator(host: &Host, by: &str) -> Result<(), Failure> {
    craik_host::run::approvals::reviewer(by, &host.runner_id())?;
    Ok(())
}

/// Recovers run `run_id`, then continues it with its decided approvals as facts (what
/// `craik runs resume` and an attended run do after a decision); operator `by`'s resume is
/// signed into the run's journal first.
fn continue_run(
    out: &mut Out,
    home: &Path,
    run_id: &str,
    by: &str,
) -> Result<(Host, KeyRing), Failure> {
    let (mut host, keys) = open_locked(home, run_id, out)?;
    operator(&host, by)?;
    let ended = host.is_final();
    let watching = if ended { None } else { watch(out, &mut host)? };
    let found = host.settle_for(by)?;
    if ended {
        return Err(ended_refusal(&host, run_id, "resumed").into());
    } else if !host.is_final() {
        // Refused before anything is signed (a pending approval): no `run.resume` then.
        host.check_reopen()?;
        host.operator_receipt(OperatorAct::Resume, by, "resumed by the operator")?;
        host.reopen()?;
        drive(&mut host, watching)?;
    } else if let Some(done) = watching {
        done.finish();
    }
    host.set_notes(found);
    Ok((host, keys))
}

/// A run that has ended is never changed: one line naming its signed ending (exit 1).
fn ended_refusal(host: &Host, run_id: &str, verb: &str) -> craik_host::Error {
    let run = host.machine().run();
    let signed = if host.signed_end().is_some() {
        "signed by its closing receipt"
    } else {
        "recorded before closing receipts were signed"
    };
    craik_host::Error::refused(format!(
        "{run_id}: already ended {} ({signed}: {}); an ended run cannot be {verb}",
        run.status.as_str(),
        craik_contracts::one_line(run.stop_reason.as_deref().unwrap_or(""))
    ))
}

/// `craik ledger rebuild`: record every journal the home's ledger does not name yet.
pub(crate) fn ledger_rebuild(out: &mut Out, format: Format, home: &Path) -> Result<Exit, Failure> {
    let home = Home::new(home);
    let (signer, ring) = keys(&home, out, false)?;
    let mut done = craik_host::ledger::rebuild(&home, &signer, &ring, OffsetDateTime::now_utc())?;
    // Audit summaries the ledger does not name (written before it named them, or a crash).
    let (recorded, refused) =
        craik_host::audits::rebuild(&home, &signer, &ring, OffsetDateTime::now_utc())?;
    done.recorded.extend(recorded);
    done.refused.extend(refused);
    match format {
        Format::Human => {
            for line in &done.recorded {
                out.line(format_args!("recorded  {line} (rebuilt)"))?;
            }
            for line in &done.refused {
                out.line(format_args!(
                    "refused   {}",
                    craik_contracts::one_line(line)
                ))?;
            }
            out.line(format_args!(
                "{}: {} entr{} recorded, {} journal(s) left out; rebuilt entries vouch for their journals from now on: a journal deleted before this rebuild cannot be detected",
                done.ledger.display(),
                done.recorded.len(),
                if done.recorded.len() == 1 { "y" } else { "ies" },
                done.refused.len()
            ))?;
        }
        Format::Json | Format::Junit => out.json(&done)?,
    }
    Ok(if done.refused.is_empty() {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// `craik runs cancel RUN`.
pub(crate) fn cancel(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
    (by, reason): (&str, &str),
    replay: craik_host::run::driver::Replay,
) -> Result<Exit, Failure> {
    let dir = Home::new(home).run_dir(run_id)?;
    craik_host::run::approvals::reviewer(by, "")?;
    if reason.trim().is_empty() {
        return Err(Failure::usage("--reason: must not be empty"));
    }
    if let Some(pid) = dir.locked_by_live() {
        // The live driver signs who asked and why into the run's journal before it stops.
        let request = craik_host::run::store::CancelRequest {
            by: by.to_owned(),
            reason: reason.to_owned(),
        };
        dir.request_cancel(&request)
            .map_err(|e| Failure::usage(format!("{}: {e}", dir.path.display())))?;
        out.line(format_args!(
            "{run_id}: cancellation requested; process {pid} stops before its next step"
        ))?;
        return Ok(Exit::Ok);
    }
    drop(dir);
    // Closing from the receipts alone is the way out only for a run whose events no longer
    // replay: one whose events do is cancelled from them, its settling the full one (outside
    // testing round r31d P1: the weaker path could be chosen for any run).
    if replay == craik_host::run::driver::Replay::ReceiptsOnly
        && open_locked_with(home, run_id, out, craik_host::run::driver::Replay::Events).is_ok()
    {
        return Err(Failure::from(craik_host::Error::refused(format!(
            "{run_id}: its events replay against its journal: cancel it without --from-receipts (`craik runs cancel {run_id} --by {by}`)"
        ))));
    }
    let (mut host, keys) = open_locked_with(home, run_id, out, replay)?;
    operator(&host, by)?;
    // Ended before this command: refused. Ended by settling what a crash left (an uncertain
    // side effect blocks the run): that ending stands, the cancel's reason signed with the
    // recovery, and the command succeeds (outside testing round 17b M8: it refused, exit 1,
    // after closing the run itself).
    let ended = host.is_final();
    let why = format!(
        "recovered by the operator on cancelling: {}",
        craik_contracts::one_line(reason)
    );
    let found = match replay {
        craik_host::run::driver::Replay::Events => host.settle_because(by, &why)?,
        craik_host::run::driver::Replay::ReceiptsOnly => host.settle_from_receipts(by)?,
    };
    if ended {
        return Err(ended_refusal(&host, run_id, "cancelled").into());
    }
    if host.is_final() {
        host.set_notes(found);
        return summary(out, format, &host, &keys).map(|_| Exit::Ok);
    }
    {
        host.cancel(by, reason)?;
    }
    summary(out, format, &host, &keys).map(|_| Exit::Ok)
}

#[derive(Debug, Serialize)]
struct Listed {
    id: String,
    status: String,
    /// Blocked but not over: waiting for a person, it resumes.
    parked: bool,
    phase: String,
    iteration: u32,
    task_id: String,
    stop_reason: Option<String>,
    live: bool,
}

/// `craik runs list`.
pub(crate) fn list(out: &mut Out, format: Format, home: &Path) -> Result<Exit, Failure> {
    let home = Home::new(home);
    let ids = home
        .run_ids()
        .map_err(|e| Failure::usage(format!("{}: {e}", home.runs().display())))?;
    let mut rows = Vec::new();
    for id in ids {
        let dir = home.run_dir(&id)?;
        let run: Result<TaskRun, String> = dir.read_json(RUN);
        let live = dir.locked_by_live().is_some();
        rows.push(match run {
            Ok(r) => Listed {
                id,
                parked: is_parked(&r),
                status: r.status.as_str().into(),
                phase: r.phase.as_str().into(),
                iteration: r.iteration,
                task_id: r.task_id,
                stop_reason: r.stop_reason,
                live,
            },
            Err(e) => Listed {
                id,
                parked: false,
                status: "unreadable".into(),
                phase: String::new(),
                iteration: 0,
                task_id: String::new(),
                stop_reason: Some(e),
                live,
            },
        });
    }
    match format {
        Format::Human => {
            if rows.is_empty() {
                out.line(format_args!("no runs under {}", home.runs().display()))?;
            }
            for r in &rows {
                let stalled = r.status == "running" && !r.live;
                out.line(format_args!(
                    "{}  {:<11} {:<8} it {}  {}{}",
                    r.id,
                    if r.parked {
                        "parked"
                    } else {
                        r.status.as_str()
                    },
                    r.phase,
                    r.iteration,
                    r.stop_reason.as_deref().unwrap_or(""),
                    if stalled {
                        "(stopped unexpectedly: `craik runs recover`)"
                    } else {
                        ""
                    }
                ))?;
            }
        }
        Format::Json | Format::Junit => out.json(&rows)?,
    }
    Ok(Exit::Ok)
}

/// Lines of a failed action's output `runs show` prints (its last ones).
const FAILED_OUTPUT_LINES: usize = 20;

/// `craik runs show RUN`.
pub(crate) fn show(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
) -> Result<Exit, Failure> {
    let dir = Home::new(home).run_dir(run_id)?;
    let mut run: TaskRun = dir
        .read_json(RUN)
        .map_err(|e| Failure::invalid(e, Vec::new()))?;
    // The status comes from the run's signed journal (its closing or parking receipt) when
    // there is one; run.json is the host's unsigned account.
    let verified = verified(&Home::new(home), &dir);
    let signed = verified
        .as_ref()
        .map(|r| signed_status(r))
        .map_err(Clone::clone);
    // Budgets used and left: tokens from the verified `model.step` receipts, budgets from
    // the signed `run.inputs`, wall clock from the run's times and its waits for approvals.
    // One event in memory at a time; kept: failed outcomes (shown, each output capped when
    // it was recorded).
    let events: Vec<craik_host::run::Event> =
        craik_host::run::store::json_lines(&dir.file(craik_host::run::store::EVENTS))
            .map(|lines| {
                lines
                    .map_while(Result::ok)
                    .filter(|e| match e {
                        craik_host::run::Event::Outcome { outcome, .. } => !outcome.ok,
                        _ => false,
                    })
                    .collect()
            })
            .unwrap_or_default();
    let budget = verified.as_ref().ok().map(|receipts| {
        craik_host::run::driver::BudgetReport::of(&run, receipts, OffsetDateTime::now_utc())
    });
    let unsigned = (run.status, run.stop_reason.clone());
    if let Ok(Some(s)) = &signed {
        run.status = s.status;
        run.stop_reason = Some(s.reason.clone());
    }
    let source = match &signed {
        Ok(Some(s)) if unsigned.0 != s.status || unsigned.1.as_deref() != Some(s.reason.as_str()) => format!(
            "signed by {} (run.json, unsigned, says {}: ignored)",
            s.receipt,
            unsigned.0.as_str()
        ),
        Ok(Some(s)) => format!("signed by {}", s.receipt),
        Ok(None) => "from run.json, not signed (the run has not ended or parked, or predates closing receipts)".into(),
        Err(why) => format!("from run.json, NOT SIGNED: {why}"),
    };
    match format {
        Format::Human => {
            out.line(format_args!("run        {}", run.id))?;
            out.line(format_args!("task       {}", run.task_id))?;
            out.line(format_args!(
                "status     {} ({})",
                run.status.as_str(),
                craik_contracts::one_line(&source)
            ))?;
            if let Ok(Some(s)) = &signed
                && s.may_continue
            {
                out.line("           may continue once its approval is decided")?;
            }
            out.line(format_args!(
                "phase      {} (iteration {} of {})",
                run.phase.as_str(),
                run.iteration,
                run.max_iterations
            ))?;
            if let Some(r) = &run.stop_reason {
                out.line(format_args!("reason     {r}"))?;
            }
            out.line(format_args!("receipts   {}", run.receipt_ids.len()))?;
            match &budget {
                Some(b) => {
                    let [tokens, wall] = b.lines();
                    out.line(format_args!("tokens     {tokens}"))?;
                    out.line(format_args!("wall clock {wall}"))?;
                }
                None => out.line("budgets    unknown: the run's journal does not verify")?,
            }
            out.line(format_args!(
                "handoff    {}",
                run.handoff_id.as_deref().unwrap_or("-")
            ))?;
            // Issue 30 item 8: what a failed action said (a command's stderr was in
            // events.jsonl only): its summary and the last lines of its redacted output,
            // each line escaped (`Out::line`), from the run's unsigned event log.
            for event in &events {
                if let craik_host::run::Event::Outcome { outcome: o, .. } = event
                    && !o.ok
                {
                    out.line(format_args!(
                        "failed     {} ({}): {}",
                        o.action,
                        o.label,
                        craik_contracts::one_line(&o.summary)
                    ))?;
                    if let Some(output) = o.output.as_deref().filter(|t| !t.trim().is_empty()) {
                        let lines: Vec<&str> = output.lines().collect();
                        let from = lines.len().saturating_sub(FAILED_OUTPUT_LINES);
                        if from > 0 {
                            out.line(format_args!("           … {from} line(s) before"))?;
                        }
                        for line in lines.iter().skip(from) {
                            out.line(format_args!("           | {line}"))?;
                        }
                    }
                }
            }
            out.line(format_args!("directory  {}", dir.path.display()))?;
        }
        Format::Json | Format::Junit => out.json(&ShownRun {
            run: &run,
            status_source: source,
            signed_status: signed.ok().flatten(),
            budget,
        })?,
    }
    Ok(Exit::Ok)
}

#[derive(Debug, Serialize)]
struct ShownRun<'a> {
    #[serde(flatten)]
    run: &'a TaskRun,
    /// Where `status` and `stop_reason` come from.
    status_source: String,
    signed_status: Option<SignedStatus>,
    /// Budgets used and left (`null`: the journal does not verify).
    budget: Option<craik_host::run::driver::BudgetReport>,
}

/// The status a run's verified journal signs: its closing receipt's, or a park's when the
/// journal's last receipt is one.
#[derive(Debug, Serialize)]
struct SignedStatus {
    status: craik_contracts::TaskRunStatus,
    reason: String,
    receipt: String,
    may_continue: bool,
}

/// The run's receipts, once its journal verifies under the home's keys.
fn verified(home: &Home, dir: &RunDir) -> Result<Vec<craik_kernel::ReceiptPayload>, String> {
    let key = craik_host::keys::default_public(&home.root);
    let public = craik_host::keys::read_public(&key).map_err(|e| e.message)?;
    // A run closed before a key rotation was signed by an earlier key the ledger vouches for.
    let ring = craik_host::ledger::home_ring(&home.root, &public).map_err(|e| e.message)?;
    craik_host::run::signed::verified_receipts(dir, &ring)
}

fn signed_status(receipts: &[craik_kernel::ReceiptPayload]) -> Option<SignedStatus> {
    if let Some((status, reason, receipt)) = craik_host::run::signed::signed_ending(receipts) {
        return Some(SignedStatus {
            status,
            reason,
            receipt,
            may_continue: false,
        });
    }
    receipts
        .last()
        .filter(|r| r.capability == craik_host::run::driver::RUN_PARKED)
        .map(|r| SignedStatus {
            status: craik_contracts::TaskRunStatus::Blocked,
            reason: r.reason.clone(),
            receipt: r.id.clone(),
            may_continue: true,
        })
}

/// `craik handoff show RUN`.
pub(crate) fn handoff(
    out: &mut Out,
    format: Format,
    home: &Path,
    run_id: &str,
) -> Result<Exit, Failure> {
    let dir = Home::new(home).run_dir(run_id)?;
    let path = dir.file(HANDOFF);
    if !path.is_file() {
        return Err(Failure::usage(format!(
            "{}: no handoff yet (the run has not ended)",
            path.display()
        ))
        .with_exit(Exit::CheckFailed));
    }
    let handoff: Handoff =
        craik_host::run::store::read_json(&path).map_err(|e| Failure::invalid(e, Vec::new()))?;
    match format {
        Format::Human => {
            out.line(format_args!("{} ({})", handoff.id, handoff.status.as_str()))?;
            out.line(format_args!("{}", handoff.summary))?;
            let sections: [(&str, &Vec<String>); 7] = [
                ("completed", &handoff.completed_actions),
                ("files changed", &handoff.files_changed),
                ("commands run", &handoff.commands_run),
                ("risks", &handoff.risks),
                ("context debt", &handoff.context_debt),
                ("policy exceptions", &handoff.policy_exceptions),
                ("next steps", &handoff.next_steps),
            ];
            for (title, items) in sections {
                if !items.is_empty() {
                    out.line(format_args!("{title}:"))?;
                    for item in items {
                        out.line(format_args!("  - {item}"))?;
                    }
                }
            }
            out.line(format_args!(
                "receipts: {}; memory proposals: {}",
                handoff.receipt_ids.len(),
                handoff.memory_proposal_ids.len()
            ))?;
        }
        Format::Json | Format::Junit => out.json(&handoff)?,
    }
    Ok(Exit::Ok)
}

/// Content lines `approvals show` prints before saying how many it left out.
const APPROVAL_CONTENT_LINES: usize = 40;

/// `craik approvals list`.
pub(crate) fn approvals_list(
    out: &mut Out,
    format: Format,
    home: &Path,
    all: bool,
) -> Result<Exit, Failure> {
    let home = Home::new(home);
    let (_, ring) = keys(&home, out, false)?;
    let mut unbound = std::collections::BTreeMap::new();
    let rows: Vec<ApprovalRecord> = all_approvals(&home)?
        .into_iter()
        .filter(|(_, a)| all || a.status == ApprovalStatus::Pending)
        .map(|(dir, a)| {
            if let Err(why) = craik_host::run::approvals::approval_bound(&dir, &a, &ring) {
                unbound.insert(a.id.clone(), why);
            }
            a
        })
        .collect();
    match format {
        Format::Human => {
            if rows.is_empty() {
                out.line(if all {
                    "no approvals"
                } else {
                    "no pending approvals"
                })?;
            }
            for a in &rows {
                out.line(format_args!(
                    "{}  {:<9} {} {} {} ({})",
                    a.id,
                    if unbound.contains_key(&a.id) {
                        "TAMPERED"
                    } else {
                        a.status.as_str()
                    },
                    a.action.proposed.capability,
                    a.action.proposed.operation,
                    a.action.shown(),
                    a.run_id
                ))?;
            }
        }
        Format::Json | Format::Junit => out.json(
            &rows
                .iter()
                .map(|a| Checked::of(a, unbound.get(&a.id).cloned()))
                .collect::<Vec<_>>(),
        )?,
    }
    Ok(Exit::Ok)
}

/// An approval record as JSON, with whether its action is the one the run's signed journal
/// parked (`tampered: true` and why, when it is not).
#[derive(Serialize)]
struct Checked<'a> {
    #[serde(flatten)]
    record: &'a ApprovalRecord,
    tampered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tampered_because: Option<String>,
}

impl<'a> Checked<'a> {
    fn of(record: &'a ApprovalRecord, why: Option<String>) -> Self {
        Self {
            record,
            tampered: why.is_some(),
            tampered_because: why,
        }
    }
}

/// `craik approvals show ID`.
pub(crate) fn approvals_show(
    out: &mut Out,
    format: Format,
    home: &Path,
    id: &str,
) -> Result<Exit, Failure> {
    let home = Home::new(home);
    let (dir, a) = find_approval(&home, id)?;
    let (_, ring) = keys(&home, out, false)?;
    let bound = craik_host::run::approvals::approval_bound(&dir, &a, &ring);
    match format {
        Format::Human => {
            for line in describe_approval(&a, bound.as_ref().err().map(String::as_str)) {
                out.line(line)?;
            }
        }
        Format::Json | Format::Junit => out.json(&Checked::of(&a, bound.err()))?,
    }
    Ok(Exit::Ok)
}

/// An approval request as the lines a person reads before deciding: the exact action
/// (capability, operation, target or argv), the content or edits of a write, why it needs
/// approval, what it binds to. Every line is escaped where it is printed (`Out::line`, or
/// `one_line` on the prompt): a runner wrote most of it.
fn describe_approval(a: &ApprovalRecord, tampered: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    let p = &a.action.proposed;
    if let Some(why) = tampered {
        lines.push(format!(
            "TAMPERED   {}; what follows is not what the run asked to approve",
            craik_contracts::one_line(why)
        ));
    }
    lines.push(format!("approval   {} ({})", a.id, a.status.as_str()));
    lines.push(format!("run        {} (task {})", a.run_id, a.task_id));
    lines.push(format!(
        "runner     {} under {}",
        a.runner_id,
        a.profile.as_str()
    ));
    lines.push(format!(
        "action     {} {} {} {}",
        a.action.id,
        p.capability,
        p.operation,
        a.action.shown()
    ));
    if let Some(argv) = &p.argv {
        lines.push(format!("argv       {argv:?}"));
    }
    if let Some(content) = &p.content {
        lines.push(format!(
            "content    {} bytes, {}",
            content.len(),
            digest(content.as_bytes())
        ));
        let total = content.lines().count();
        for line in content.lines().take(APPROVAL_CONTENT_LINES) {
            lines.push(format!("  | {line}"));
        }
        if total > APPROVAL_CONTENT_LINES {
            lines.push(format!(
                "  | … {} more line(s) not shown (the digest above covers every byte; `--format json` shows all)",
                total - APPROVAL_CONTENT_LINES
            ));
        }
    }
    for edit in &p.edits {
        lines.push(format!("edit       - {:?}", edit.old));
        lines.push(format!("           + {:?}", edit.new));
    }
    if let Some(reason) = &p.reason {
        lines.push(format!("runner says {reason}"));
    }
    lines.push(format!("policies   {}", a.policies.join(", ")));
    lines.push(format!("why        {}", a.reasons.join("; ")));
    lines.push(format!("binds to   {}", a.request_hash));
    if let Some(by) = &a.decided_by {
        lines.push(format!(
            "decided    by {by}: {}",
            a.reason.as_deref().unwrap_or("")
        ));
    }
    lines
}

/// How long an approval stays usable unless `--expires-in` says otherwise.
pub(crate) const DEFAULT_APPROVAL_SECS: u64 = 3600;

/// Decides one approval (checked, signed as its own review journal, recorded) and says so on
/// stderr. The one path every decision takes: `approvals approve|deny`, `--all`, inline.
#[expect(
    clippy::too_many_arguments,
    reason = "one decision's facts, passed straight to `decide_approval`"
)]
fn decide_one(
    out: &mut Out,
    format: Format,
    home: &Path,
    id: &str,
    by: &str,
    reason: &str,
    approve: bool,
    expires_in_secs: u64,
) -> Result<ApprovalRecord, Failure> {
    let home = Home::new(home);
    let (signer, ring) = keys(&home, out, false)?;
    let (record, journal) = craik_host::run::approvals::decide_approval(
        &home,
        id,
        by,
        reason,
        approve,
        expires_in_secs,
        (&signer, &ring),
        OffsetDateTime::now_utc(),
    )?;
    if format == Format::Human {
        out.line(format_args!(
            "{id}: {} by {by}; receipt {}",
            record.status.as_str(),
            journal.display()
        ))?;
        out.flush()?;
    }
    Ok(record)
}

/// What `craik approvals approve|deny` was asked.
#[derive(Debug)]
pub(crate) struct DecideArgs<'a> {
    /// The approval id, or with `all` the run id.
    pub(crate) id: &'a str,
    pub(crate) by: &'a str,
    pub(crate) reason: &'a str,
    pub(crate) approve: bool,
    pub(crate) expires_in_secs: u64,
    /// Every pending approval of the run `id`.
    pub(crate) all: bool,
    /// With `all` off a terminal: approve without asking.
    pub(crate) yes: bool,
    /// Continue the run afterwards, as `craik runs resume` does.
    pub(crate) resume: bool,
}

/// `craik approvals approve|deny ID --by user:NAME --reason TEXT [--resume]` and
/// `craik approvals approve RUN --all [--yes] [--resume]`.
pub(crate) fn approvals_decide(
    out: &mut Out,
    format: Format,
    home: &Path,
    args: &DecideArgs<'_>,
) -> Result<Exit, Failure> {
    let mut decided = Vec::new();
    let run_id = if args.all {
        let home_h = Home::new(home);
        home_h.run_dir(args.id)?;
        let pending = pending_of(&home_h, args.id)?;
        if pending.is_empty() {
            return Err(Failure::usage(format!(
                "run `{}` has no pending approvals (see `craik approvals list`)",
                craik_contracts::Truncated(args.id)
            ))
            .with_exit(Exit::CheckFailed));
        }
        let (_, ring) = keys(&home_h, out, false)?;
        let ask = Prompter::for_terminal(format);
        if !ask.interactive() && !args.yes {
            return Err(Failure::usage(format!(
                "--all: {} pending approval(s) of {}, and no terminal to confirm each on; list them with `craik approvals list`, then pass --yes to approve them all",
                pending.len(),
                args.id
            )));
        }
        let mut chosen = Vec::new();
        for (dir, a) in &pending {
            let bound = craik_host::run::approvals::approval_bound(dir, a, &ring);
            if format == Format::Human {
                for line in describe_approval(a, bound.as_ref().err().map(String::as_str)) {
                    out.line(line)?;
                }
            }
            if ask.interactive() && !args.yes {
                out.flush()?;
                match ask.yes_no(&format!("approve {} as {}?", a.id, args.by))? {
                    Some(true) => chosen.push(a.id.clone()),
                    Some(false) => out.line(format_args!("{}: left pending", a.id))?,
                    None => break,
                }
            } else {
                chosen.push(a.id.clone());
            }
        }
        for id in &chosen {
            decided.push(decide_one(
                out,
                format,
                home,
                id,
                args.by,
                args.reason,
                true,
                args.expires_in_secs,
            )?);
        }
        args.id.to_owned()
    } else {
        let record = decide_one(
            out,
            format,
            home,
            args.id,
            args.by,
            args.reason,
            args.approve,
            args.expires_in_secs,
        )?;
        let run_id = record.run_id.clone();
        decided.push(record);
        run_id
    };
    if args.resume {
        // With --format json the run's summary is the output (the decisions are in it).
        return resume(out, format, home, &run_id, args.by);
    }
    match format {
        Format::Human => out.line(format_args!("next: craik runs resume {run_id}"))?,
        Format::Json | Format::Junit => out.json(&decided)?,
    }
    Ok(Exit::Ok)
}

/// A memory proposal as JSON, with whether its file agrees with its signed review
/// (`tampered: true` and why, when it does not).
#[derive(Serialize)]
struct CheckedMemory<'a> {
    #[serde(flatten)]
    proposal: &'a craik_contracts::MemoryProposal,
    tampered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    tampered_because: Option<String>,
}

/// Every proposal of the home, each with why its file disagrees with its signed review.
fn checked_proposals(
    home: &Home,
    out: &mut Out,
) -> Result<Vec<(craik_contracts::MemoryProposal, Option<String>)>, Failure> {
    let list = proposals(home)?;
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let (_, ring) = keys(home, out, false)?;
    Ok(list
        .into_iter()
        .map(|m| {
            let why = craik_host::run::memory::memory_tampered(home, &ring, &m);
            (m, why)
        })
        .collect())
}

/// `craik memory list`.
pub(crate) fn memory_list(out: &mut Out, format: Format, home: &Path) -> Result<Exit, Failure> {
    let list = checked_proposals(&Home::new(home), out)?;
    match format {
        Format::Human => {
            if list.is_empty() {
                out.line("no memory proposals")?;
            }
            for (m, why) in &list {
                out.line(format_args!(
                    "{}  {:<8} {} {} {} = {} ({} evidence)",
                    m.id,
                    if why.is_some() {
                        "TAMPERED"
                    } else {
                        m.status.as_str()
                    },
                    m.operation.as_str(),
                    m.fact.entity,
                    m.fact.relation,
                    m.fact.value,
                    m.evidence.len()
                ))?;
                if let Some(why) = why {
                    out.line(format_args!("  TAMPERED: {why}"))?;
                }
            }
        }
        Format::Json | Format::Junit => out.json(
            &list
                .iter()
                .map(|(m, why)| CheckedMemory {
                    proposal: m,
                    tampered: why.is_some(),
                    tampered_because: why.clone(),
                })
                .collect::<Vec<_>>(),
        )?,
    }
    Ok(Exit::Ok)
}

/// `craik memory show ID` (JSON, with `tampered`; on a terminal a TAMPERED line on stderr).
pub(crate) fn memory_show(
    out: &mut Out,
    _format: Format,
    home: &Path,
    id: &str,
) -> Result<Exit, Failure> {
    let (m, why) = checked_proposals(&Home::new(home), out)?
        .into_iter()
        .find(|(m, _)| m.id == id)
        .ok_or_else(|| {
            Failure::usage(format!(
                "memory proposal `{}`: not found",
                craik_contracts::Truncated(id)
            ))
        })?;
    if let Some(why) = &why {
        out.diag(format_args!("craik: TAMPERED: {why}"))?;
    }
    out.json(&CheckedMemory {
        proposal: &m,
        tampered: why.is_some(),
        tampered_because: why.clone(),
    })?;
    Ok(Exit::Ok)
}

/// `craik memory approve|reject ID --by user:NAME --reason TEXT`.
pub(crate) fn memory_decide(
    out: &mut Out,
    home: &Path,
    id: &str,
    by: &str,
    reason: &str,
    approve: bool,
) -> Result<Exit, Failure> {
    let home = Home::new(home);
    let (signer, _) = keys(&home, out, false)?;
    let (m, journal) = craik_host::run::memory::decide_memory(
        &home,
        (id, by, reason),
        approve,
        &signer,
        OffsetDateTime::now_utc(),
    )?;
    out.line(format_args!(
        "{id}: {} by {by}; receipt {}",
        m.status.as_str(),
        journal.display()
    ))?;
    Ok(Exit::Ok)
}
