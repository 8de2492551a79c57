//! `craik`: the host binary. Parses the command line, runs one command, maps the outcome to
//! the documented exit codes. Panics are bugs: they print one line and exit 4, never a
//! backtrace.

mod bundle;
mod cli;
mod cmd;
mod exit;
mod files;
mod live;
mod output;
mod prompt;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{
    ApprovalsCommand, BenchCommand, CaseCommand, Cli, Command, ConfigCommand, ContractsCommand,
    GrantsCommand, HandoffCommand, KeysCommand, LedgerCommand, MemoryCommand, PolicyCommand,
    ProfileArg, ProjectCommand, PromptCommand, ReceiptsCommand, RunnersCommand, RunsCommand,
    SchemaCommand, TaskCommand,
};
use crate::exit::{Exit, Failure};
use crate::output::Out;

// mimalloc: glibc malloc consolidated its fast bins on the decision path, so a decision cost
// more the more (unrelated) grants were loaded; with mimalloc it does not (`cargo bench -p
// craik-kernel --bench decide` runs with the same allocator).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(
            io::stderr(),
            "craik: internal error: {info}; please report this bug"
        );
        std::process::exit(i32::from(Exit::Internal.code()));
    }));

    // No core file, no same-user ptrace-class access to this process (it holds the key).
    // First of all, so the confinement probe below runs exactly as confined children start
    // (a probe that differed once claimed mounts a child could not make; found by outside
    // testing).
    if let Err(why) = craik_host::confine::harden_self() {
        let _ = writeln!(io::stderr(), "craik: cannot harden the process: {why}");
        return Exit::Internal.into();
    }
    let mut args = std::env::args_os();
    if args
        .nth(1)
        .is_some_and(|a| a == craik_host::confine::TRAMPOLINE)
    {
        craik_host::confine::trampoline(args);
    }
    // Whatever a governed command or an adapter leaves behind is re-parented here and killed.
    craik_host::confine::become_subreaper();
    craik_host::confine::install_exit_handler();

    let mut cli = Cli::parse();
    cli.format = cli.format_arg.common();
    let mut out = Out::new();
    // A run's live progress (crate::live): on a terminal unless --quiet; as JSON lines with
    // --format jsonl (--quiet: the summary line only); else none.
    out.jsonl = cli.format_arg == crate::output::FormatArg::Jsonl;
    out.live = match cli.format_arg {
        crate::output::FormatArg::Jsonl if !cli.quiet => crate::live::Live::Jsonl,
        crate::output::FormatArg::Human if !cli.quiet && io::stderr().is_terminal() => {
            crate::live::Live::Human
        }
        _ => crate::live::Live::Off,
    };
    let result = run(&cli, &mut out).and_then(|exit| {
        out.flush()?;
        Ok(exit)
    });
    // A run stopped cleanly by a signal exits as a process stopped by it would (128 + N),
    // after its summary: scripts see the same code as for the hard path.
    if let (Ok(_), Some(signal)) = (&result, craik_host::confine::interrupted()) {
        return std::process::ExitCode::from(u8::try_from(128 + signal).unwrap_or(1));
    }
    match result {
        Ok(exit) => exit.into(),
        Err(failure) if failure.broken_pipe => Exit::Ok.into(),
        Err(failure) if cli.format == crate::output::Format::Json => {
            let _ = out.flush();
            // One JSON object on stderr, same exit code: tools parse it instead of prose.
            let (file, field) = failure.located();
            let error = serde_json::json!({"error": {
                "kind": failure.exit.kind(),
                "message": craik_contracts::one_line(&failure.message),
                "details": failure.details.iter().map(|d| craik_contracts::one_line(d)).collect::<Vec<_>>(),
                "file": file,
                "field": field,
                "line": failure.location.as_ref().and_then(|l| l.position).map(|p| p.0),
                "column": failure.location.as_ref().and_then(|l| l.position).map(|p| p.1),
            }});
            let _ = writeln!(io::stderr(), "{error}");
            failure.exit.into()
        }
        Err(failure) => {
            let _ = out.flush();
            for line in &failure.details {
                if failure.multi_line {
                    let _ = writeln!(io::stderr(), "{line}");
                } else {
                    let _ = writeln!(io::stderr(), "{}", craik_contracts::one_line(line));
                }
            }
            let _ = writeln!(
                io::stderr(),
                "craik: {}",
                craik_contracts::one_line(&failure.message)
            );
            failure.exit.into()
        }
    }
}

fn prove_args(a: &crate::cli::ProveArgs) -> cmd::policy_prove::ProveArgs<'_> {
    cmd::policy_prove::ProveArgs {
        solver: a.solver.as_deref(),
        allow_solver_version: a.allow_solver_version,
        grants: &a.prove_grants,
        timeout_secs: a.timeout,
    }
}

/// The bundle a proving command loads: the same set as every policy command
/// (craik.toml's pinned custom directories plus `--custom`), with its files.
fn policy_side(args: &crate::cli::BundleArgs) -> Result<cmd::policy_prove::Loaded, Failure> {
    let custom = match cmd::config::project()? {
        Some(c) => c.custom_set(&args.custom)?,
        None => args.custom.clone(),
    };
    cmd::policy_prove::Loaded::load(args.policies.as_deref(), &custom)
}

fn run(cli: &Cli, out: &mut Out) -> Result<Exit, Failure> {
    match &cli.command {
        Command::Contracts(ContractsCommand::Validate(args)) => {
            cmd::contracts::validate(out, cli.format, args)
        }
        Command::Schema(SchemaCommand::List) => cmd::schema::list(out, cli.format),
        Command::Schema(SchemaCommand::Show { name }) => cmd::schema::show(out, name),
        Command::Schema(SchemaCommand::Export { dir }) => cmd::schema::export(out, cli.format, dir),
        Command::Policy(PolicyCommand::Validate {
            bundle,
            now,
            prove,
            solver,
        }) => match prove {
            None => cmd::policy::validate(out, cli.format, bundle, now.as_deref()),
            Some(crate::cli::ValidateProof::NeverErrors) => {
                let side = policy_side(bundle)?;
                cmd::policy_prove::never_errors(out, cli.format, &side, &prove_args(solver))
            }
        },
        Command::Policy(PolicyCommand::Prove {
            queries,
            library,
            bundle,
            solver,
        }) => {
            let side = policy_side(bundle)?;
            let what = match library {
                Some(p) if p.as_os_str() == "embedded" => {
                    cmd::policy_prove::Properties::Library(None)
                }
                Some(p) => cmd::policy_prove::Properties::Library(Some(p)),
                None => cmd::policy_prove::Properties::Queries(queries),
            };
            cmd::policy_prove::prove(out, cli.format, &side, &what, &prove_args(solver))
        }
        Command::Bench(BenchCommand::Prove { solver }) => {
            cmd::policy_prove::bench(out, cli.format, &prove_args(solver))
        }
        Command::Policy(PolicyCommand::Export { dir, force }) => {
            cmd::policy::export(out, cli.format, dir, *force)
        }
        Command::Policy(PolicyCommand::Fmt {
            dir,
            check,
            diff,
            line_width,
        }) => cmd::policy::fmt(out, dir, *check, *diff, usize::from(*line_width)),
        Command::Policy(PolicyCommand::Explain {
            request,
            grants,
            now,
            workspace_root,
            shadow,
            trace,
            bundle,
        }) => {
            let args = cmd::policy::ExplainArgs {
                request,
                grants,
                now: now.as_deref(),
                workspace_root: workspace_root.as_deref(),
                shadow: *shadow,
                trace: *trace,
                bundle,
            };
            cmd::policy::explain(out, cli.format, &args)
        }
        Command::Policy(PolicyCommand::Test(args)) => cmd::policy::test(out, cli.format, args),
        Command::Policy(PolicyCommand::Diff {
            old,
            new,
            cases,
            custom,
            old_custom,
            new_custom,
            prove,
            emit_tests,
            solver,
        }) => cmd::policy::diff(
            out,
            cli.format,
            &cmd::policy::DiffArgs {
                old,
                new,
                cases,
                custom,
                old_custom,
                new_custom,
                prove: prove.then(|| prove_args(solver)),
                emit_tests: emit_tests.as_deref(),
            },
        ),
        Command::Task(TaskCommand::New(t)) => cmd::scaffold::task_new(
            out,
            cli.format,
            &cmd::scaffold::TaskNewArgs {
                id: t.id.as_deref(),
                title: t.title.as_deref(),
                goal: t.goal.as_deref(),
                project: t.project.as_deref(),
                mode: Some(t.mode.as_str()),
                requested_by: t.requested_by.as_deref(),
                constraints: &t.constraint,
                allowed_paths: &t.allowed_path,
                forbid_paths: &t.forbid_path,
                stops: &t.stop,
                profile: t.profile.map(profile_of),
                allow: &t.allow,
                deny: &t.deny,
                approve: &t.approve,
                verify: &t.verify,
                verify_writes: &t.verify_writes,
                max_iterations: t.max_iterations,
                out: t.out.as_deref(),
                force: t.force,
            },
        ),
        Command::Grants(GrantsCommand::New(g)) => cmd::scaffold::grants_new(
            out,
            cli.format,
            &cmd::scaffold::GrantNewArgs {
                task: g.task.as_deref(),
                project: g
                    .project
                    .as_deref()
                    .map(|p| Some(p).filter(|p| !p.is_empty())),
                id: g.id.as_deref(),
                capability: g.capability.as_deref(),
                paths: &g.path,
                exclude: &g.exclude,
                writes: &g.writes,
                operations: &g.operations,
                expires: g.expires.as_deref(),
                reason: g.reason.as_deref(),
                by: g.by.as_deref(),
                out: g.out.as_deref(),
                force: g.force,
                bundle: &g.bundle,
            },
        ),
        Command::Grants(GrantsCommand::Show { files, bundle }) => {
            cmd::policy::show_grants(out, cli.format, files, bundle)
        }
        Command::Keys(KeysCommand::Generate { out: dir }) => {
            cmd::keys::generate(out, cli.format, dir)
        }
        Command::Keys(KeysCommand::Show { file }) => cmd::keys::show(out, cli.format, file),
        Command::Keys(KeysCommand::Rotate { by, reason, home }) => cmd::keys::rotate(
            out,
            cli.format,
            &existing_home(&home.home)?,
            (&reviewer(by.as_deref())?, reason),
        ),
        Command::Receipts(ReceiptsCommand::Verify {
            paths,
            keys,
            home,
            policies,
            custom,
            grants,
            allow_open,
        }) => cmd::receipts::verify(
            out,
            cli.format,
            &cmd::receipts::VerifyArgs {
                paths,
                keys,
                home: &home_root(home)?,
                policies: policies.as_deref(),
                custom,
                grants,
                allow_open: *allow_open,
            },
        ),
        Command::Audit(a) => cmd::audit::audit(
            out,
            cli.format,
            &cmd::audit::AuditArgs {
                target: &match &a.target {
                    Some(t) => t.clone(),
                    None => existing_home(&a.home)?.display().to_string(),
                },
                home: &home_root(&a.home)?,
                keys: &a.keys,
                policies: a.policies.as_deref(),
                custom: &a.custom,
                grants: &a.grants,
                html: a.html.as_deref(),
                filters: &cmd::audit::Filters::parse(a)?,
                summary: a.summary.then_some(a.summary_out.as_deref()),
                jsonl: cli.format_arg == crate::output::FormatArg::Jsonl,
            },
        ),
        Command::Receipts(ReceiptsCommand::List { run, home }) => {
            cmd::receipts::list(out, cli.format, run, &home_root(home)?)
        }
        Command::Receipts(ReceiptsCommand::Prove {
            run,
            seq,
            checkpoint,
            keys,
            home,
        }) => cmd::proofs::prove(
            out,
            cli.format,
            run,
            *seq,
            *checkpoint,
            keys,
            &home_root(home)?,
        ),
        Command::Receipts(ReceiptsCommand::Consistency {
            old,
            current,
            keys,
            verifier_keys,
            origin,
            home,
        }) => cmd::proofs::consistency(
            out,
            cli.format,
            old,
            current,
            keys,
            verifier_keys,
            origin.as_deref(),
            &home_root(home)?,
        ),
        Command::Receipts(ReceiptsCommand::Checkpoint {
            run,
            origin,
            key_name,
            home,
        }) => cmd::proofs::checkpoint_note(
            out,
            cli.format,
            run,
            origin.as_deref(),
            key_name.as_deref(),
            &home_root(home)?,
        ),
        Command::Receipts(ReceiptsCommand::Show { run, seq, home }) => {
            cmd::receipts::show(out, cli.format, run, *seq, &home_root(home)?)
        }
        Command::Bench(BenchCommand::Receipts {
            count,
            key,
            out: file,
            checkpoint_every,
            run_dir,
        }) => {
            let args = cmd::bench::ReceiptsArgs {
                count: *count,
                key: key.as_deref(),
                file: file.as_deref(),
                checkpoint_every: *checkpoint_every,
                run_dir: run_dir.as_deref(),
            };
            cmd::bench::receipts(out, cli.format, &args)
        }
        Command::Run(args) => run_command(args, |run| cmd::runs::run(out, cli.format, run)),
        Command::Prompt(PromptCommand::Compile(args)) => run_command(&args.run, |run| {
            cmd::runs::prompt_compile(out, cli.format, run, args.out.as_deref())
        }),
        Command::Project(ProjectCommand::Add(args)) => cmd::case::project_add(
            out,
            cli.format,
            args.project.task.as_deref(),
            args.project.project_profile.as_deref(),
            args.home.home.as_deref(),
        ),
        Command::Project(ProjectCommand::List(home)) => {
            cmd::case::project_list(out, cli.format, home.home.as_deref())
        }
        Command::Project(ProjectCommand::Show(args)) => cmd::case::project_show(
            out,
            cli.format,
            args.task.as_deref(),
            args.project_profile.as_deref(),
        ),
        Command::Case(CaseCommand::Build(args)) => cmd::case::build(
            out,
            cli.format,
            &cmd::case::BuildArgs {
                task: &args.task,
                max_tokens: args.max_tokens,
                project_profile: args.project_profile.as_deref(),
                out: args.out.as_ref(),
                home: args.home.home.as_deref(),
            },
        ),
        Command::Bench(BenchCommand::Case {
            files,
            megabytes,
            runs,
        }) => cmd::bench::case(out, cli.format, *files, *megabytes, *runs),
        Command::Init(args) => cmd::config::init(
            out,
            cli.format,
            &cmd::config::InitArgs {
                dir: args.dir.as_deref(),
                home: args.home.as_deref(),
                profile: match args.profile {
                    ProfileArg::Strict => "strict",
                    ProfileArg::TrustedLocal => "trusted-local",
                    ProfileArg::Automation => "automation",
                    ProfileArg::Custom => "custom",
                },
                force: args.force,
                operator: args.operator.as_deref(),
            },
        ),
        Command::Config(ConfigCommand::Show(home)) => {
            cmd::config::show(out, cli.format, home.home.as_deref())
        }
        Command::Policy(PolicyCommand::Pin) => cmd::config::pin(out, cli.format),
        Command::Runs(RunsCommand::List(home)) => {
            cmd::runs::list(out, cli.format, &existing_home(&home.home)?)
        }
        Command::Runs(RunsCommand::Show { run, home }) => {
            cmd::runs::show(out, cli.format, &existing_home(&home.home)?, run)
        }
        Command::Runs(RunsCommand::Cancel {
            run,
            by,
            reason,
            from_receipts,
            home,
        }) => cmd::runs::cancel(
            out,
            cli.format,
            &existing_home(&home.home)?,
            run,
            (&reviewer(by.as_deref())?, reason),
            if *from_receipts {
                craik_host::run::driver::Replay::ReceiptsOnly
            } else {
                craik_host::run::driver::Replay::Events
            },
        ),
        Command::Runs(RunsCommand::Recover { run, by, home }) => cmd::runs::recover(
            out,
            cli.format,
            &existing_home(&home.home)?,
            run,
            &reviewer(by.as_deref())?,
        ),
        Command::Runs(RunsCommand::Resume { run, by, home }) => cmd::runs::resume(
            out,
            cli.format,
            &existing_home(&home.home)?,
            run,
            &reviewer(by.as_deref())?,
        ),
        Command::Ledger(LedgerCommand::Rebuild(home)) => {
            cmd::runs::ledger_rebuild(out, cli.format, &existing_home(&home.home)?)
        }
        Command::Handoff(HandoffCommand::Show { run, home }) => {
            cmd::runs::handoff(out, cli.format, &existing_home(&home.home)?, run)
        }
        Command::Approvals(ApprovalsCommand::List { all, home }) => {
            cmd::runs::approvals_list(out, cli.format, &existing_home(&home.home)?, *all)
        }
        Command::Approvals(ApprovalsCommand::Show { id, home }) => {
            cmd::runs::approvals_show(out, cli.format, &existing_home(&home.home)?, id)
        }
        Command::Approvals(ApprovalsCommand::Approve {
            review,
            expires_in,
            all,
            yes,
            resume,
        }) => cmd::runs::approvals_decide(
            out,
            cli.format,
            &existing_home(&review.home.home)?,
            &cmd::runs::DecideArgs {
                id: &review.id,
                by: &reviewer(review.by.as_deref())?,
                reason: &review.reason,
                approve: true,
                expires_in_secs: *expires_in,
                all: *all,
                yes: *yes,
                resume: *resume,
            },
        ),
        Command::Approvals(ApprovalsCommand::Deny { review, resume }) => {
            cmd::runs::approvals_decide(
                out,
                cli.format,
                &existing_home(&review.home.home)?,
                &cmd::runs::DecideArgs {
                    id: &review.id,
                    by: &reviewer(review.by.as_deref())?,
                    reason: &review.reason,
                    approve: false,
                    expires_in_secs: 0,
                    all: false,
                    yes: false,
                    resume: *resume,
                },
            )
        }
        Command::Memory(MemoryCommand::List(home)) => {
            cmd::runs::memory_list(out, cli.format, &existing_home(&home.home)?)
        }
        Command::Memory(MemoryCommand::Show { id, home }) => {
            cmd::runs::memory_show(out, cli.format, &existing_home(&home.home)?, id)
        }
        Command::Memory(MemoryCommand::Approve(r)) => cmd::runs::memory_decide(
            out,
            &existing_home(&r.home.home)?,
            &r.id,
            &reviewer(r.by.as_deref())?,
            &r.reason,
            true,
        ),
        Command::Memory(MemoryCommand::Reject(r)) => cmd::runs::memory_decide(
            out,
            &existing_home(&r.home.home)?,
            &r.id,
            &reviewer(r.by.as_deref())?,
            &r.reason,
            false,
        ),
        Command::Runners(RunnersCommand::Matrix { runner }) => {
            cmd::runners::matrix(out, cli.format, runner.as_deref())
        }
        Command::Runners(RunnersCommand::List(h)) => {
            cmd::runners::list(out, cli.format, &home_root(&h.home)?)
        }
        Command::Runners(RunnersCommand::Show { id, home }) => {
            cmd::runners::show(out, cli.format, &home_root(&home.home)?, id)
        }
        Command::Runners(RunnersCommand::Add(a)) => {
            let absolute =
                |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
            let entry = craik_host::registry::NewEntry {
                id: a.id.clone(),
                backend: a.backend.clone(),
                name: a.name.clone(),
                command: a.command.as_deref().map(|c| {
                    // Relative to the bundle for `prebundled`, else to the current directory.
                    if c.contains('/') && a.install.as_deref() != Some("prebundled") {
                        absolute(std::path::Path::new(c)).display().to_string()
                    } else {
                        c.to_owned()
                    }
                }),
                args: a.args.clone(),
                scenario_arg: a.scenario_arg.clone(),
                adapter: a.adapter.clone(),
                api: a.api.clone(),
                model: a.model.clone(),
                endpoint: a.endpoint.clone(),
                key_env: a.key_env.clone(),
                cli_args: a.cli_args.clone(),
                package: a.package.clone(),
                version: a.version.clone(),
                source: a.source.as_deref().map(absolute),
                install: a.install.clone(),
                matrix: a.matrix.as_deref().map(|m| {
                    if m.contains('/') || m.ends_with(".json") {
                        absolute(std::path::Path::new(m)).display().to_string()
                    } else {
                        m.to_owned()
                    }
                }),
                trust: a.trust.clone(),
                support: a.support.clone(),
                env: a.env.clone(),
                read: a.read.iter().map(|p| absolute(p)).collect(),
            };
            cmd::runners::add(
                out,
                cli.format,
                &home_root(&a.home.home)?,
                &entry,
                a.project,
                a.force,
            )
        }
        Command::Runners(RunnersCommand::Remove { id, project, home }) => {
            cmd::runners::remove(out, cli.format, &home_root(&home.home)?, id, *project)
        }
        Command::Runners(RunnersCommand::Install { id, home }) => {
            cmd::runners::install(out, cli.format, &home_root(&home.home)?, id)
        }
        Command::Runners(RunnersCommand::Check {
            id,
            handshake,
            home,
        }) => cmd::runners::check(
            out,
            cli.format,
            &home_root(&home.home)?,
            id.as_deref(),
            *handshake,
        ),
        Command::Runners(RunnersCommand::Conformance { id, command, home }) => match id {
            Some(id) => {
                cmd::runners::conformance_entry(out, cli.format, &home_root(&home.home)?, id)
            }
            None => cmd::runners::conformance(out, cli.format, command),
        },
        Command::Bench(BenchCommand::Run { steps, adapter }) => {
            cmd::bench::run(out, cli.format, *steps, *adapter)
        }
        Command::Bench(BenchCommand::Channel { count }) => {
            cmd::bench::channel(out, cli.format, *count)
        }
        Command::Bench(BenchCommand::Audit {
            count,
            journals,
            keep,
            html,
        }) => cmd::audit::bench::audit(
            out,
            cli.format,
            &cmd::audit::bench::BenchArgs {
                count: *count,
                journals: *journals,
                keep: keep.as_deref(),
                html: *html,
            },
        ),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "craik", &mut buf);
            out.text(&String::from_utf8_lossy(&buf))?;
            Ok(Exit::Ok)
        }
    }
}

/// The home a command that may look elsewhere uses (verification, listing a journal file):
/// `--home`/`CRAIK_HOME`, else craik.toml's, else the default ([`cmd::config::home`]).
fn home_root(given: &Option<std::path::PathBuf>) -> Result<std::path::PathBuf, Failure> {
    cmd::config::home(given.as_deref()).map(|(root, _)| root)
}

/// The home of a command that reads or decides runs, approvals or memory: it must exist.
fn existing_home(given: &Option<std::path::PathBuf>) -> Result<std::path::PathBuf, Failure> {
    cmd::config::existing_home(given.as_deref())
}

/// The reviewer: `--by`, else craik.toml's `operator` as `user:NAME` (asserted by whoever
/// runs the command, not authenticated; never the runner's).
fn reviewer(by: Option<&str>) -> Result<String, Failure> {
    if let Some(by) = by {
        return Ok(by.to_owned());
    }
    match cmd::config::project()?.and_then(|c| c.config.operator.as_deref()) {
        Some(name) if name.starts_with("user:") => Ok(name.to_owned()),
        Some(name) => Ok(format!("user:{name}")),
        None => Err(Failure::usage(
            "--by user:NAME is required (or set `operator` in craik.toml)",
        )),
    }
}

fn profile_of(p: ProfileArg) -> craik_contracts::PolicyProfile {
    match p {
        ProfileArg::Strict => craik_contracts::PolicyProfile::Strict,
        ProfileArg::TrustedLocal => craik_contracts::PolicyProfile::TrustedLocal,
        ProfileArg::Automation => craik_contracts::PolicyProfile::Automation,
        ProfileArg::Custom => craik_contracts::PolicyProfile::Custom,
    }
}

/// `craik run` with craik.toml's defaults under its flags: a flag (or `CRAIK_HOME`) always
/// wins; custom policy directories from the file are checked against their pins.
/// `craik run`'s arguments with craik.toml's defaults applied, handed to `then` (`craik run`
/// itself, or `craik prompt compile`, which must see exactly what the run would).
fn run_command(
    args: &crate::cli::RunCmd,
    then: impl FnOnce(&cmd::runs::RunArgs<'_>) -> Result<Exit, Failure>,
) -> Result<Exit, Failure> {
    let config = cmd::config::project()?;
    let file_value = |key: &str, value: &str, why: String| {
        Failure::invalid(
            format!(
                "{}: {key} `{}`: {why}",
                config.map_or_else(String::new, |c| c.path.display().to_string()),
                craik_contracts::one_line(value)
            ),
            Vec::new(),
        )
    };
    let default_profile = match config.and_then(|c| c.config.run.profile.as_deref()) {
        Some(name) => Some(
            serde_json::from_value::<craik_contracts::PolicyProfile>(serde_json::json!(name))
                .map_err(|e| file_value("run.profile", name, e.to_string()))?,
        ),
        None => None,
    };
    let config_runner = match (
        &args.runner,
        config.and_then(|c| c.config.run.runner.as_deref()),
    ) {
        (None, Some(spec)) => Some(
            crate::cli::RunnerArg::parse(spec)
                .map_err(|why| file_value("run.runner", spec, why))?,
        ),
        _ => None,
    };
    let toolchains = match config {
        Some(c) if args.toolchains.is_empty() => c.config.run.toolchains.clone(),
        _ => args.toolchains.clone(),
    };
    let command_read = match config {
        Some(c) if args.command_read.is_empty() => c.command_read(),
        _ => args.command_read.clone(),
    };
    // craik.toml's pinned set, always; `--custom` only adds to it where the file allows
    // (issue 31 item 3: a flag naming another directory replaced the pinned set before).
    let custom = match config {
        Some(c) => c.custom_set(&args.bundle.custom)?,
        None => args.bundle.custom.clone(),
    };
    // Without a craik.toml, the default `craik init` writes: ADRs are immutable (a command
    // rewrote one in a repository without a config; found by outside testing).
    let immutable_paths = config.map_or_else(
        || vec![craik_host::config::DEFAULT_IMMUTABLE.to_owned()],
        |c| c.config.project.immutable_paths.clone(),
    );
    let project_grants = match config {
        Some(c) => c.project_grant_files()?,
        None => Vec::new(),
    };
    let config_inputs = config
        .map(craik_host::config::Loaded::input_paths)
        .unwrap_or_default();
    let home = args
        .home
        .home
        .clone()
        .or_else(|| config.and_then(craik_host::config::Loaded::home));
    // The inline approver: --by, else craik.toml's operator (never anything a runner said).
    let approver = match &args.by {
        Some(by) => Some(by.clone()),
        None => reviewer(None).ok(),
    };
    // craik.toml's budgets, bounded as the flags are (a larger value could not be signed).
    if let Some(c) = config {
        for (key, value, max) in [
            (
                "run.wall_clock_budget_seconds",
                c.config.run.wall_clock_budget_seconds,
                craik_host::run::driver::MAX_WALL_CLOCK_SECS,
            ),
            (
                "run.token_budget",
                c.config.run.token_budget,
                craik_host::run::driver::MAX_RUN_TOKENS,
            ),
        ] {
            if let Some(v) = value.filter(|v| *v > max) {
                return Err(file_value(key, &v.to_string(), format!("at most {max}")));
            }
        }
    }
    let project = craik_host::project::for_task(&args.task, config)?;
    let run = cmd::runs::RunArgs {
        project: project.as_ref(),
        approver: approver.as_deref(),
        task: &args.task,
        runner: args.runner.as_ref().or(config_runner.as_ref()),
        profile: args.profile.map(profile_of),
        default_profile,
        grants: &args.grants,
        intent: args.intent.as_deref(),
        envelope: args.envelope.as_deref(),
        max_iterations: args.max_iterations,
        budget_secs: args
            .budget_secs
            .or_else(|| config.and_then(|c| c.config.run.wall_clock_budget_seconds)),
        token_budget: args
            .token_budget
            .or_else(|| config.and_then(|c| c.config.run.token_budget)),
        shadow: args.shadow,
        workspace: args.workspace.as_deref(),
        toolchains: &toolchains,
        command_read: &command_read,
        immutable_paths: &immutable_paths,
        project_grants: &project_grants,
        config_inputs: &config_inputs,
        home: home.as_deref(),
        policies: args.bundle.policies.as_deref(),
        custom: &custom,
        runner_matrix: args.runner_matrix.as_deref(),
        step_timeout_secs: args.step_timeout_secs,
        max_line_bytes: args.max_line_bytes.and_then(|b| usize::try_from(b).ok()),
        adapter_read: &args.adapter_read,
    };
    then(&run)
}
