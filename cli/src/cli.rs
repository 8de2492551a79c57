//! The command line, as clap types. Parsing only; the commands live in `cmd/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::files::DEFAULT_MAX_BYTES;
use crate::output::{Format, FormatArg};

/// The longest an approval may stay usable: 30 days.
pub(crate) const MAX_APPROVAL_SECS: u64 = 30 * 24 * 3600;

/// Craik: a governance kernel for AI-agent runs.
///
/// Exit codes: 0 ok, 1 check failed, 2 usage or unreadable path, 3 invalid input,
/// 4 internal error, 7 no usable solver for a proof.
#[derive(Debug, Parser)]
#[command(name = "craik", version, about, long_about = None, propagate_version = true)]
pub(crate) struct Cli {
    /// Output format.
    #[arg(long = "format", global = true, value_enum, default_value = "human")]
    pub(crate) format_arg: FormatArg,
    /// No live progress of a run on stderr (`craik run`, `craik runs resume`); with
    /// `--format jsonl`, only the summary line.
    #[arg(long, global = true)]
    pub(crate) quiet: bool,
    /// The format commands see (`jsonl` is json but for `craik audit`), set from `format_arg`.
    #[arg(skip)]
    pub(crate) format: Format,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate craik.* contract payloads.
    #[command(subcommand)]
    Contracts(ContractsCommand),
    /// List, show and export the contracts' JSON Schemas.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Validate, format, explain, test and diff Cedar policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Write a task directory (task request, intent lock, policy envelope) from flags.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Write capability grants, or show them as the Cedar they compile to.
    #[command(subcommand)]
    Grants(GrantsCommand),
    /// Generate and inspect receipt signing keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Verify, list and show signed receipt journals.
    #[command(subcommand)]
    Receipts(ReceiptsCommand),
    /// Explain runs from their verified journals: each receipt's action, verdict, policies,
    /// grant, approval (approver and reason from the signed review) and outcome.
    ///
    /// Exit 0 when every journal verifies, 1 when one does not (what precedes the failure is
    /// still shown). Anything not covered by a signature is marked "not signed".
    Audit(AuditCmd),
    /// The home ledger: the signed log naming every journal of a home.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// Run a task under governance: every step decided, every side effect receipted.
    ///
    /// TASK is a craik.task_request file, or an example directory holding task_request.json,
    /// scenario.json and optionally intent_lock.json, policy_envelope.json, capability_grant.json,
    /// grants/*.json and workspace/ (copied into the run directory, so examples never touch
    /// your files).
    Run(RunCmd),
    /// List, show, cancel, recover and resume runs.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// The project profile (craik.toml's `[project]`, or a task's project_profile.json).
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Case files: the task context the host assembles before a run (docs/context.md).
    #[command(subcommand)]
    Case(CaseCommand),
    /// The prompt the host compiles for a run's runner (docs/context.md).
    #[command(subcommand)]
    Prompt(PromptCommand),
    /// Show a run's handoff.
    #[command(subcommand)]
    Handoff(HandoffCommand),
    /// List, show and decide approval requests of parked runs.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// List, show and review memory proposals.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Runner capability matrices and adapter conformance.
    #[command(subcommand)]
    Runners(RunnersCommand),
    /// Measure Craik's own costs, with ratios against baselines from the same run.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Write a documented `craik.toml` here (or in DIR) and set up the home it names.
    ///
    /// The home defaults to the user's state directory (`$XDG_STATE_HOME/craik`), outside the
    /// repository; a home created inside a git work tree gets a `.gitignore` first.
    Init(InitCmd),
    /// Show the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub(crate) struct InitCmd {
    /// The project directory (default: the current directory).
    #[arg(value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The home to write into the config (default: none written; the state directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
    /// The default profile to write.
    #[arg(long, value_enum, default_value = "strict")]
    pub(crate) profile: ProfileArg,
    /// Replace an existing craik.toml.
    #[arg(long)]
    pub(crate) force: bool,
    /// The operator who approves inline and with `craik approvals` (`NAME` or `user:NAME`),
    /// written as `operator`.
    #[arg(long, value_name = "NAME")]
    pub(crate) operator: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print every effective setting and where it came from (flag, environment, file, default).
    Show(HomeArg),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ContractsCommand {
    /// Validate files holding one contract object, an array of them, or JSON lines.
    ///
    /// The contract of each record comes from its `schema` field, or from --schema.
    /// Directories are searched for *.json and *.jsonl files; `-` reads stdin.
    Validate(ValidateArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Files or directories to validate (`-` for stdin).
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,

    /// Treat every record as this contract (`task_request` or `craik.task_request`).
    #[arg(long, value_name = "NAME")]
    pub(crate) schema: Option<String>,

    /// Also check that each record re-serialises to the same JSON (exit 1 if not).
    #[arg(long)]
    pub(crate) roundtrip: bool,

    /// Largest accepted input file, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BYTES)]
    pub(crate) max_bytes: u64,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SchemaCommand {
    /// List the contracts this build implements.
    List,
    /// Print one contract's JSON Schema (draft 2020-12).
    Show {
        /// `task_request` or `craik.task_request`.
        name: String,
    },
    /// Write every contract's JSON Schema into DIR as NAME.schema.json.
    Export {
        /// Target directory (created if missing).
        dir: PathBuf,
    },
}

/// Where the policy bundle comes from.
#[derive(Debug, Args)]
pub(crate) struct BundleArgs {
    /// Policy directory (schema.cedarschema + *.cedar); default: the embedded default bundle.
    #[arg(long, value_name = "DIR")]
    pub(crate) policies: Option<PathBuf>,
    /// Operator policy directories loaded on top of the bundle (never instead of it).
    #[arg(long, value_name = "DIR")]
    pub(crate) custom: Vec<PathBuf>,
}

/// How a proof finds its solver and what it assumes (issue 35; docs/policy-proofs.md).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct ProveArgs {
    /// The SMT solver: cvc5 1.3.1, or `tools/cvc5-pywheel` over the PyPI wheel; default:
    /// $CVC5, then `cvc5` on PATH. Without one a proof exits 7.
    #[arg(long, value_name = "PATH")]
    pub(crate) solver: Option<PathBuf>,
    /// Run with a solver reporting another version than 1.3.1 (the report says so).
    #[arg(long)]
    pub(crate) allow_solver_version: bool,
    /// craik.capability_grant files every side holds (compiled to Cedar, as a run would).
    #[arg(long = "grants", value_name = "FILE")]
    pub(crate) prove_grants: Vec<PathBuf>,
    /// Per-query time limit in seconds (cvc5's `--tlimit-per`; past it plus 10 s the solver
    /// is killed); an unanswered query exits 7, never "holds".
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub(crate) timeout: u64,
}

/// What `policy validate --prove` proves.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ValidateProof {
    /// No policy (decision, approval rule or grant) can error on a request the kernel builds.
    NeverErrors,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Load and strictly validate a policy bundle, then lint it (exit 1 on a lint error).
    Validate {
        #[command(flatten)]
        bundle: BundleArgs,
        /// The clock lints compare time bounds against (RFC 3339); default: now.
        #[arg(long, value_name = "TIME")]
        now: Option<String>,
        /// Prove a property of the bundle with the SMT solver (exit 1 if it fails, 7 without
        /// a usable solver).
        #[arg(long, value_enum, value_name = "PROPERTY")]
        prove: Option<ValidateProof>,
        #[command(flatten)]
        solver: ProveArgs,
    },
    /// Prove properties of a bundle: `deny repo.write under profile automation for any grant
    /// when resource.protected == "git"` (docs/policy-proofs.md has the query form).
    ///
    /// Every counterexample is replayed through the kernel; exit 0 all hold, 1 one fails or
    /// is not proven, 2 a bad query, 7 no usable solver.
    Prove {
        /// Queries (each one property).
        #[arg(value_name = "QUERY", conflicts_with = "library")]
        queries: Vec<String>,
        /// Prove a property library (TOML); without FILE, the embedded bundle's
        /// (policies/properties.toml).
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "embedded")]
        library: Option<PathBuf>,
        #[command(flatten)]
        bundle: BundleArgs,
        #[command(flatten)]
        solver: ProveArgs,
    },
    /// Pin every `[[policy.custom]]` directory of craik.toml to its current content.
    ///
    /// Review the change first: a run refuses a custom directory whose content no longer
    /// matches its pin.
    Pin,
    /// Write the embedded default bundle (schema + policies) into DIR, as `--policies DIR`
    /// reads it: a starting point to edit, or a side for `policy diff`.
    Export {
        /// Target directory (created if missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Overwrite files that exist with other content (default: refuse, naming them).
        #[arg(long)]
        force: bool,
    },
    /// Format .cedar files with Cedar's formatter (in place, or --check).
    Fmt {
        /// Directory of .cedar files (default: policies).
        #[arg(value_name = "DIR", default_value = "policies")]
        dir: PathBuf,
        /// Report files that would change; change nothing (exit 1 if any).
        #[arg(long)]
        check: bool,
        /// With --check: print a unified diff of each change (what `fmt` would write).
        #[arg(long, requires = "check")]
        diff: bool,
        /// Line width. Craik's policies use 100; `cedar format` defaults to 80, so pass
        /// `--line-width 80` to agree with it.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u16).range(40..=400))]
        line_width: u16,
    },
    /// Decide one request and explain the verdict.
    Explain {
        /// A decision request (JSON), or `-` for stdin.
        request: PathBuf,
        /// craik.capability_grant files.
        #[arg(long, value_name = "FILE")]
        grants: Vec<PathBuf>,
        /// The clock for the decision (RFC 3339); default: now.
        #[arg(long, value_name = "TIME")]
        now: Option<String>,
        /// Absolute workspace root targets are relative to; default: the current directory.
        #[arg(long, value_name = "DIR")]
        workspace_root: Option<String>,
        /// Report the verdict as shadow (would-enforce).
        #[arg(long)]
        shadow: bool,
        /// Also list every permit that could apply (the profile's and the task's grants for
        /// the capability) and, for each that did not match, the part of it that did not hold.
        #[arg(long)]
        trace: bool,
        #[command(flatten)]
        bundle: BundleArgs,
    },
    /// Run policy test suites (default: policy-tests/).
    Test(PolicyTestArgs),
    /// Show every case whose verdict or determining policies differ between two bundles.
    ///
    /// A suite's own `custom` directory named like an --old-custom/--new-custom directory is
    /// replaced by those on each side; one loaded on both sides unchanged is reported.
    Diff {
        /// The bundle before the change: a policy directory, or `embedded` for the embedded
        /// default (`./embedded` names a directory of that name).
        old: PathBuf,
        /// The bundle after the change: a policy directory, or `embedded`.
        new: PathBuf,
        /// Case files or directories (default: policy-tests/).
        #[arg(long, value_name = "DIR")]
        cases: Vec<PathBuf>,
        /// Operator policy directories loaded on top of both bundles.
        #[arg(long, value_name = "DIR")]
        custom: Vec<PathBuf>,
        /// Operator policy directories loaded on top of OLD only (before the change).
        #[arg(long, value_name = "DIR")]
        old_custom: Vec<PathBuf>,
        /// Operator policy directories loaded on top of NEW only (after the change).
        #[arg(long, value_name = "DIR")]
        new_custom: Vec<PathBuf>,
        /// Prove the change for every request of the schema with the SMT solver instead of
        /// sampling the cases: per action and level, equivalent / narrower / broader /
        /// incomparable, with counterexamples replayed through the kernel (exit 1 if one is
        /// confirmed, 7 without a usable solver).
        #[arg(long)]
        prove: bool,
        /// With --prove: write each confirmed counterexample as a `policy test` case (passes
        /// on NEW, fails on OLD) into DIR.
        #[arg(long, value_name = "DIR", requires = "prove")]
        emit_tests: Option<PathBuf>,
        #[command(flatten)]
        solver: ProveArgs,
    },
}

#[derive(Debug, Args)]
pub(crate) struct PolicyTestArgs {
    /// Suite files or directories (default: policy-tests).
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,
    /// Run only cases whose `suite :: name` matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub(crate) run: Option<String>,
    /// Fail (exit 1) when fewer than PCT percent of the loaded policies are exercised.
    #[arg(long, value_name = "PCT")]
    pub(crate) min_coverage: Option<f64>,
    /// Count coverage over the policies of these directories only (your own custom policies,
    /// not the shipped bundle); repeatable.
    #[arg(long, value_name = "DIR")]
    pub(crate) coverage_of: Vec<PathBuf>,
    /// Write JUnit XML here as well as the normal report.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// List every case (`ok` or `FAIL`), not only the failures.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    #[command(flatten)]
    pub(crate) bundle: BundleArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TaskCommand {
    /// Write a task directory `craik run DIR` runs: task_request.json, intent_lock.json,
    /// policy_envelope.json (and grants/ for --verify, run.json for --max-iterations).
    ///
    /// Everything comes from flags; on a terminal, what is missing and required is asked
    /// (off a terminal, a missing required flag is a usage error naming it). Every file is
    /// decoded and checked as `craik run` reads it before anything is written; nothing is
    /// replaced without --force. Default directory: .craik-tasks/<task id>/.
    New(TaskNewCmd),
}

#[derive(Debug, Args)]
pub(crate) struct TaskNewCmd {
    /// The task's title (one line).
    #[arg(long, value_name = "TEXT")]
    pub(crate) title: Option<String>,
    /// What done looks like: the task's objective and the intent lock's.
    #[arg(long, value_name = "TEXT")]
    pub(crate) goal: Option<String>,
    /// The task id (default: `task_` and the title's first words).
    #[arg(long, value_name = "task_ID")]
    pub(crate) id: Option<String>,
    /// The project (default: craik.toml's project.id).
    #[arg(long, value_name = "project_ID")]
    pub(crate) project: Option<String>,
    /// plan, review, implement or verify.
    #[arg(long, value_name = "MODE", default_value = "implement",
          value_parser = ["plan", "review", "implement", "verify"])]
    pub(crate) mode: String,
    /// Who asks (`user:NAME`; default: craik.toml's operator).
    #[arg(long, value_name = "user:NAME")]
    pub(crate) requested_by: Option<String>,
    /// A constraint the runner is told (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub(crate) constraint: Vec<String>,
    /// A path the task may touch (intent lock in_scope; a prefix such as `docs/`; repeatable).
    /// With any, a path outside all of them is out of scope.
    #[arg(long, value_name = "PATH")]
    pub(crate) allowed_path: Vec<String>,
    /// A path the task must never touch (intent lock out_of_scope; repeatable).
    #[arg(long, value_name = "PATH")]
    pub(crate) forbid_path: Vec<String>,
    /// A stop condition (`capability:git.force_push`, `path:docs/adr`; repeatable).
    #[arg(long, value_name = "COND")]
    pub(crate) stop: Vec<String>,
    /// The envelope's profile (default: craik.toml's run.profile, else strict).
    #[arg(long, value_enum)]
    pub(crate) profile: Option<ProfileArg>,
    /// A capability the envelope allows (repeatable; none listed: policies and grants decide).
    #[arg(long, value_name = "CAP")]
    pub(crate) allow: Vec<String>,
    /// A capability the envelope denies whatever grants say (repeatable).
    #[arg(long, value_name = "CAP")]
    pub(crate) deny: Vec<String>,
    /// A capability that always needs a human approval (repeatable).
    #[arg(long, value_name = "CAP")]
    pub(crate) approve: Vec<String>,
    /// A verification command (argv prefix, e.g. `cargo test`): granted as shell.test for
    /// this task, and the run may only complete once a shell.test ran and passed.
    #[arg(long, value_name = "CMD")]
    pub(crate) verify: Vec<String>,
    /// The write scope of the --verify commands (repeatable: `**`, `DIR/**` or a file). The
    /// default is the build directory of a known tool: `target/**` for cargo,
    /// `.pytest_cache/**` for pytest, `node_modules/.cache/**` for npm/npx/yarn/pnpm; none
    /// otherwise (the command then runs read-only).
    #[arg(long, value_name = "SCOPE")]
    pub(crate) verify_writes: Vec<String>,
    /// The run's iteration ceiling (written to run.json; `craik run DIR` uses it unless
    /// --max-iterations is given).
    #[arg(long, value_name = "N")]
    pub(crate) max_iterations: Option<u32>,
    /// The directory to write (default: .craik-tasks/<task id>).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Replace existing files.
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, Args)]
pub(crate) struct GrantNewCmd {
    /// The task directory (or task_request.json) the grant is for; written to its grants/.
    #[arg(long, value_name = "DIR", conflicts_with = "project")]
    pub(crate) task: Option<PathBuf>,
    /// A project grant for every task of project ID (default: craik.toml's project.id);
    /// written to the first directory of craik.toml's project.grants (else .craik-grants/).
    #[arg(long, value_name = "project_ID", num_args = 0..=1, default_missing_value = "")]
    pub(crate) project: Option<String>,
    /// The grant id (default: `grant_<task or project>_<capability>`, never replacing a file).
    #[arg(long, value_name = "grant_ID")]
    pub(crate) id: Option<String>,
    /// The capability, one the policy schema declares (`craik schema`… `repo.write.docs`).
    #[arg(long, value_name = "CAP")]
    pub(crate) capability: Option<String>,
    /// A path glob (repo.*: `docs/**`) or an argv prefix (shell.*: `cargo test`); repeatable.
    #[arg(long, value_name = "GLOB|CMD")]
    pub(crate) path: Vec<String>,
    /// Excluded globs or argv prefixes (an exclusion always wins); repeatable.
    #[arg(long, value_name = "GLOB|CMD")]
    pub(crate) exclude: Vec<String>,
    /// For shell.* grants: where the commands may write (`**`, `DIR/**`, a file).
    #[arg(long, value_name = "SCOPE")]
    pub(crate) writes: Vec<String>,
    /// An operation (`read`, `write`, `patch`, `execute`, ...); repeatable or comma-separated.
    #[arg(long = "op", value_name = "OP", value_delimiter = ',')]
    pub(crate) operations: Vec<String>,
    /// When it expires: RFC 3339, or a duration from now (`90m`, `8h`, `7d`, `2w`).
    #[arg(long, value_name = "WHEN")]
    pub(crate) expires: Option<String>,
    /// Why it is granted.
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// Who grants it (`user:NAME`; default: craik.toml's operator).
    #[arg(long, value_name = "user:NAME")]
    pub(crate) by: Option<String>,
    /// The file to write instead of the default.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Replace an existing file.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) bundle: BundleArgs,
}

#[derive(Debug, Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing `new`'s arguments buys nothing"
)]
pub(crate) enum GrantsCommand {
    /// Write a grant file for a task (--task DIR) or a whole project (--project): capability,
    /// paths or commands, operations, expiry, reason.
    ///
    /// Checked before it is written as a run loads it: a capability the policy schema
    /// declares, operations that capability admits, globs the kernel enforces exactly, an
    /// expiry in the future. On a terminal, what is missing is asked.
    New(GrantNewCmd),
    /// Print the Cedar a grant compiles to.
    Show {
        /// craik.capability_grant files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        bundle: BundleArgs,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// Generate an ed25519 signing key: PKCS#8 PEM private key (mode 0600) and SPKI PEM public key.
    Generate {
        /// Directory for `signing.key.pem` and `signing.pub.pem` (created if missing).
        #[arg(long, value_name = "DIR", default_value = ".craik/keys")]
        out: PathBuf,
    },
    /// Print a key's id and fingerprint (never the private key).
    Show {
        /// A private or public key PEM file.
        file: PathBuf,
    },
    /// Rotate a home's signing key: a new pair replaces it, the home ledger records the
    /// hand-over (signed by the old key, naming the new one), the old public key is kept in
    /// `keys/retired/`. Refused while any run is not closed. Verifiers that trust either key
    /// then verify the whole home (docs/receipts.md, "Key rotation").
    Rotate {
        /// Who rotates, `user:NAME` (asserted, not authenticated); default: craik.toml's
        /// `operator`, else required.
        #[arg(long, value_name = "user:NAME")]
        by: Option<String>,
        /// Why.
        #[arg(long, value_name = "TEXT", default_value = "scheduled rotation")]
        reason: String,
        #[command(flatten)]
        home: HomeArg,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ReceiptsCommand {
    /// Verify journals offline: signatures, chain, checkpoints, closing checkpoint.
    Verify {
        /// Journal files, or directories holding `receipts.jsonl` (a run) or runs.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Trusted public key PEM files (default: the home's `keys/signing.pub.pem`, else the
        /// one of a Craik home above the first PATH; a private key is refused).
        #[arg(long = "key", value_name = "PUB.pem")]
        keys: Vec<PathBuf>,
        /// Craik's state directory, whose public key is used when no --key is given.
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
        /// Require every receipt's policy_set to be this bundle's hash (with --custom: on top
        /// of it, as `craik run --policies DIR --custom DIR` loads it).
        #[arg(long, value_name = "DIR")]
        policies: Option<PathBuf>,
        /// Operator policy directories the run loaded (`craik run --custom`); alone, on top of
        /// the embedded bundle.
        #[arg(long, value_name = "DIR")]
        custom: Vec<PathBuf>,
        /// The grant files the run was started with: their hash must be the one its first
        /// receipt (`run.inputs`) signed.
        #[arg(long, value_name = "FILE", num_args = 1..)]
        grants: Vec<PathBuf>,
        /// Accept journals without a final checkpoint (runs parked for approval or still
        /// going); reported as open.
        #[arg(long)]
        allow_open: bool,
    },
    /// List a journal's receipts (decoded; run `verify` to check them).
    List {
        /// A run id (under `--home`), a run directory, or a journal file.
        run: String,
        /// Craik's state directory.
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
    },
    /// Print an RFC 9162 inclusion proof of one receipt against a checkpoint of its verified
    /// journal (the last one unless --checkpoint), checked before it is printed.
    Prove {
        /// A run id (under `--home`), a run directory, or a journal file.
        run: String,
        /// The receipt's sequence number.
        seq: u64,
        /// The checkpoint's index (default: the journal's last checkpoint).
        #[arg(long, value_name = "INDEX")]
        checkpoint: Option<u64>,
        /// Trusted public key PEM files (default: the home's).
        #[arg(long = "key", value_name = "PUB.pem")]
        keys: Vec<PathBuf>,
        /// Craik's state directory.
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
    },
    /// Prove that a journal extends what was kept of it earlier (RFC 9162 consistency proof
    /// from the older tree to the current journal's last checkpoint); exit 1 when it does not.
    Consistency {
        /// What was kept, a file: a copy of the journal, its last checkpoint line (a DSSE
        /// envelope), or the C2SP signed note `receipts checkpoint` printed.
        old: String,
        /// The journal now: a run id (under `--home`), a run directory, a journal file, or a
        /// home (its ledger).
        current: String,
        /// Trusted public key PEM files (default: the home's).
        #[arg(long = "key", value_name = "PUB.pem")]
        keys: Vec<PathBuf>,
        /// A note's verifier key, `<name>+<hex hash>+<base64 key>`, as `receipts checkpoint`
        /// prints it (a note also verifies under any trusted --key).
        #[arg(long = "verifier-key", value_name = "VKEY")]
        verifier_keys: Vec<String>,
        /// The origin a note must carry (default: one ending in `/<journal id>`).
        #[arg(long)]
        origin: Option<String>,
        /// Craik's state directory.
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
    },
    /// Print a journal's last checkpoint as a C2SP signed note (`tlog-checkpoint`) signed by
    /// the home's key, for a witness or transparency log to co-sign (docs/receipts.md).
    Checkpoint {
        /// A run id (under `--home`), a run directory, or a journal file.
        run: String,
        /// The note's origin line (default `craik/<key fingerprint>/<run id>`).
        #[arg(long)]
        origin: Option<String>,
        /// The signing key's name in the note (default `craik/<key fingerprint>`).
        #[arg(long, value_name = "NAME")]
        key_name: Option<String>,
        /// Craik's state directory (its key signs the note).
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
    },
    /// Show one receipt, decoded.
    Show {
        /// A run id (under `--home`), a run directory, or a journal file.
        run: String,
        /// The receipt's sequence number.
        seq: u64,
        /// Craik's state directory.
        #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
        home: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct AuditCmd {
    /// A run id (under `--home`), a run directory, a journal file, or a Craik home (every
    /// run). Default: the home (`--home`, craik.toml's, else the default home).
    #[arg(value_name = "RUN|HOME")]
    pub(crate) target: Option<String>,
    /// Trusted public key PEM files (default: the home's `keys/signing.pub.pem`).
    #[arg(long = "key", value_name = "PUB.pem")]
    pub(crate) keys: Vec<PathBuf>,
    /// Craik's state directory.
    #[arg(long, value_name = "DIR", env = "CRAIK_HOME")]
    pub(crate) home: Option<PathBuf>,
    /// Require every receipt's policy_set to be this bundle's hash.
    #[arg(long, value_name = "DIR")]
    pub(crate) policies: Option<PathBuf>,
    /// Operator policy directories the run loaded (`craik run --custom`).
    #[arg(long, value_name = "DIR")]
    pub(crate) custom: Vec<PathBuf>,
    /// The grant files the run was started with: their hash must be the signed one.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub(crate) grants: Vec<PathBuf>,
    /// Also write a self-contained HTML report (one file, no external resources) here: the
    /// summary first, then one section per run.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Only receipts at or after this time (RFC 3339, or a date `YYYY-MM-DD`: its midnight UTC).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only receipts before this time (RFC 3339, or a date `YYYY-MM-DD`: its midnight UTC).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only these runs (run ids; repeatable). A home's ledger is still checked whole.
    #[arg(long = "run", value_name = "RUN")]
    pub(crate) runs: Vec<String>,
    /// Only receipts whose signed `actor` is this (repeatable).
    #[arg(long = "actor", value_name = "ACTOR")]
    pub(crate) actors: Vec<String>,
    /// Only receipts an approval by this approver decided (`user:NAME`; repeatable).
    #[arg(long = "approver", value_name = "USER")]
    pub(crate) approvers: Vec<String>,
    /// Only receipts of this capability (`repo.write.docs`, or a prefix `repo.*`; repeatable).
    #[arg(long = "capability", value_name = "CAP")]
    pub(crate) capabilities: Vec<String>,
    /// Only receipts with this verdict (repeatable); `outcome` selects outcome receipts.
    #[arg(long = "verdict", value_name = "VERDICT",
          value_parser = ["allow", "requires_approval", "deny", "outcome"])]
    pub(crate) verdicts: Vec<String>,
    /// Only runs whose signed status is this (`completed`, `blocked`, `failed`, `interrupted`,
    /// `awaiting-approval`, ...; `unsigned` for a run with no signed status; repeatable).
    #[arg(long = "status", value_name = "STATUS")]
    pub(crate) statuses: Vec<String>,
    /// Print only the counts (runs by status; receipts by verdict, capability and approver;
    /// denials, cancellations, memory reviews, files changed) and sign them with the home's
    /// key as a `craik.audit_summary` journal (`HOME/audits/<id>/receipts.jsonl`, or
    /// `--summary-out`) that `craik receipts verify` checks.
    #[arg(long)]
    pub(crate) summary: bool,
    /// Where `--summary` writes its signed journal (refuses to overwrite).
    #[arg(long, value_name = "FILE", requires = "summary")]
    pub(crate) summary_out: Option<PathBuf>,
}

/// Craik's state directory.
#[derive(Debug, Args)]
pub(crate) struct HomeArg {
    /// Craik's state directory (runs, keys, memory, reviews).
    #[arg(long, value_name = "DIR", env = "CRAIK_HOME", global = true)]
    pub(crate) home: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProjectCommand {
    /// Validate and print the project profile: repository, docs paths, immutable paths,
    /// discovery globs and its sha256 (what `run.inputs` signs). No git repository, a docs
    /// path through a link or a glob matching no file is exit 3, naming the field and value.
    Show(ProjectArgs),
    /// Validate the project profile (as `show`) and register it in the home's project index
    /// (`HOME/projects.json`: id, repository, profile file, sha256). An id already registered
    /// for another repository is refused; the same again updates its digest.
    Add(ProjectAddArgs),
    /// The home's registered projects, each checked against its registered digest.
    List(HomeArg),
}

#[derive(Debug, Args)]
pub(crate) struct ProjectAddArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) home: HomeArg,
}

#[derive(Debug, Args)]
pub(crate) struct ProjectArgs {
    /// A task directory whose project_profile.json to use (default: craik.toml's [project]).
    #[arg(value_name = "TASK")]
    pub(crate) task: Option<PathBuf>,
    /// A craik.project_profile file to use instead.
    #[arg(long, value_name = "FILE")]
    pub(crate) project_profile: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CaseCommand {
    /// Assemble TASK's case file as `craik run` does at its start: repository state, docs
    /// inventory, immutable paths, recent handoffs, approved facts, contradictions, stale
    /// risks, verification plan, within a token budget. The same inputs give the same bytes.
    Build(CaseBuildCmd),
}

#[derive(Debug, Args)]
pub(crate) struct CaseBuildCmd {
    /// A craik.task_request file, or a task or example directory.
    #[arg(value_name = "TASK")]
    pub(crate) task: PathBuf,
    /// The token budget (estimate: compact JSON bytes / 4, rounded up).
    #[arg(long, value_name = "N", default_value_t = craik_host::case::DEFAULT_MAX_TOKENS, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_tokens: u64,
    /// A craik.project_profile file to use (default: the task's project_profile.json, else
    /// craik.toml's [project]).
    #[arg(long, value_name = "FILE")]
    pub(crate) project_profile: Option<PathBuf>,
    /// Also write the case file here (atomically).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) home: HomeArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PromptCommand {
    /// Compile what `craik run` with the same arguments would tell its runner: sections Task,
    /// Runner, Policy, Context (the case file, fenced as untrusted data) and Output contract.
    /// Deterministic: the same inputs give the same bytes. Writes nothing but `--out`.
    Compile(PromptCompileCmd),
}

#[derive(Debug, Args)]
pub(crate) struct PromptCompileCmd {
    /// Also write the `craik.compiled_prompt` file here (atomically).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) run: RunCmd,
}

#[derive(Debug, Args)]
pub(crate) struct RunCmd {
    /// A craik.task_request file, or an example directory.
    #[arg(value_name = "TASK")]
    pub(crate) task: PathBuf,
    /// The runner: a registered id (`craik runners list`): `fixture[:SCENARIO.json]` (in
    /// process), `fixture-adapter`, `codex`, `claude`, `gemini` (adapter processes; with a
    /// scenario, in fixture mode), any id of runners.toml;
    /// `provider:API:MODEL` (API: openai-responses, anthropic-messages, chat-completions), or
    /// `adapter:PROGRAM` (any adapter speaking docs/protocol.md, under --runner-matrix).
    #[arg(long, value_name = "RUNNER", value_parser = RunnerArg::parse)]
    pub(crate) runner: Option<RunnerArg>,
    /// For `adapter:PROGRAM`: the shipped matrix (identity, trust, support) it runs under.
    #[arg(long, value_name = "NAME")]
    pub(crate) runner_matrix: Option<String>,
    /// Seconds an adapter has to answer one step (default 120; at most a day).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) step_timeout_secs: Option<u64>,
    /// Largest line an adapter may write, in bytes (default 1048576; at least 1024).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=(1u64 << 30)))]
    pub(crate) max_line_bytes: Option<u64>,
    /// A path (file or directory) the adapter process may also read: adapters are confined to
    /// the system paths, their own program and installation, the absolute paths on their
    /// command line and their working directory. Never Craik's home.
    #[arg(long, value_name = "PATH")]
    pub(crate) adapter_read: Vec<PathBuf>,
    /// Toolchains governed commands may use: `rust` (CARGO_HOME/RUSTUP_HOME), `node` (nvm),
    /// `python` (pyenv, user site-packages), `local-bin` (~/.local/bin). Read-only; their
    /// credential files never readable. Repeatable.
    #[arg(long = "toolchain", value_name = "NAME")]
    pub(crate) toolchains: Vec<String>,
    /// An extra directory governed commands may read (an installation, never `~` or `/`).
    #[arg(long, value_name = "DIR")]
    pub(crate) command_read: Vec<PathBuf>,
    /// Policy profile (default: the envelope's, else strict).
    #[arg(long, value_enum)]
    pub(crate) profile: Option<ProfileArg>,
    /// craik.capability_grant files.
    #[arg(long, value_name = "FILE")]
    pub(crate) grants: Vec<PathBuf>,
    /// A craik.intent_lock file.
    #[arg(long, value_name = "FILE")]
    pub(crate) intent: Option<PathBuf>,
    /// A craik.policy_envelope file.
    #[arg(long, value_name = "FILE")]
    pub(crate) envelope: Option<PathBuf>,
    /// The iteration ceiling (default 5).
    #[arg(long, value_name = "N")]
    pub(crate) max_iterations: Option<u32>,
    /// Wall-clock budget in seconds (waiting for approvals not counted); spent ⇒
    /// interrupted. Default: craik.toml's `run.wall_clock_budget_seconds`, else none.
    #[arg(
        long = "wall-clock-budget",
        visible_alias = "budget-secs",
        value_name = "SECS",
        value_parser = clap::value_parser!(u64).range(0..=craik_host::run::driver::MAX_WALL_CLOCK_SECS)
    )]
    pub(crate) budget_secs: Option<u64>,
    /// Provider token budget: the most tokens (input + output) all model steps of the run
    /// may use; exceeded ⇒ interrupted. Default: craik.toml's `run.token_budget`, else none.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=craik_host::run::driver::MAX_RUN_TOKENS))]
    pub(crate) token_budget: Option<u64>,
    /// Decide and receipt everything as shadow; perform nothing.
    #[arg(long)]
    pub(crate) shadow: bool,
    /// Who approves inline when the run parks on a terminal (`user:NAME`; default:
    /// craik.toml's operator). Off a terminal, or with --format json, nothing is asked.
    #[arg(long, value_name = "user:NAME")]
    pub(crate) by: Option<String>,
    /// The workspace actions act on (default: an example's copied workspace/, else the
    /// current directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) home: HomeArg,
    #[command(flatten)]
    pub(crate) bundle: BundleArgs,
}

/// `--profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProfileArg {
    Strict,
    TrustedLocal,
    Automation,
    Custom,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs.
    List(HomeArg),
    /// Show a run's state.
    Show {
        run: String,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Stop a run: a live one before its next step, a parked one at once (interrupted); who
    /// and why are signed into the run's journal (`run.cancel`).
    Cancel {
        run: String,
        /// Who cancels, `user:NAME` (asserted, not authenticated); default: craik.toml's
        /// `operator`, else required.
        #[arg(long, value_name = "user:NAME")]
        by: Option<String>,
        /// Why.
        #[arg(long, value_name = "TEXT", default_value = "cancelled by the operator")]
        reason: String,
        /// Close the run from its signed receipts alone, without replaying `events.jsonl`:
        /// for a run whose events no longer agree with its journal (recover, resume and a
        /// plain cancel refuse it). Every allowed action with no signed outcome gets one,
        /// failed and uncertain; nothing is decided or performed.
        #[arg(long)]
        from_receipts: bool,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Repair and classify what a crash left (torn lines, uncertain actions); continue nothing.
    /// Who recovered it is signed into the run's journal (`run.recover`) while it is open.
    Recover {
        run: String,
        /// Who recovers, `user:NAME` (asserted, not authenticated); default: craik.toml's
        /// `operator`, else required.
        #[arg(long, value_name = "user:NAME")]
        by: Option<String>,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Recover if needed, then continue a parked or stopped run; who resumed it is signed
    /// into the run's journal (`run.resume`).
    Resume {
        run: String,
        /// Who resumes, `user:NAME` (asserted, not authenticated); default: craik.toml's
        /// `operator`, else required.
        #[arg(long, value_name = "user:NAME")]
        by: Option<String>,
        #[command(flatten)]
        home: HomeArg,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum LedgerCommand {
    /// Record in the home's ledger every journal it does not name yet (a home written before
    /// the ledger, or an entry a crash lost), each entry marked `rebuilt`; journals that do
    /// not verify are left out and listed. An existing ledger must verify first.
    ///
    /// The rebuilt entries vouch for the journals only from now on: a journal deleted before
    /// the rebuild cannot be detected. Exit 0, or 1 when a journal was left out.
    Rebuild(HomeArg),
}

#[derive(Debug, Subcommand)]
pub(crate) enum HandoffCommand {
    /// Print a run's handoff.
    Show {
        run: String,
        #[command(flatten)]
        home: HomeArg,
    },
}

/// A human review decision.
#[derive(Debug, Args)]
pub(crate) struct ReviewArgs {
    /// The approval or proposal id.
    pub(crate) id: String,
    /// The reviewer, `user:NAME` (never the runner); default: craik.toml's `operator`.
    #[arg(long, value_name = "user:NAME")]
    pub(crate) by: Option<String>,
    /// Why.
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: String,
    #[command(flatten)]
    pub(crate) home: HomeArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// List pending approvals (--all: every one).
    List {
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Show one approval request: the exact action and what it binds to.
    Show {
        id: String,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Approve: single use, bound to the exact action, expiring. With --all, ID is a run and
    /// every pending approval of it is listed and approved (each confirmed on a terminal,
    /// or all with --yes).
    Approve {
        #[command(flatten)]
        review: ReviewArgs,
        /// Seconds the approval stays usable (0 to 2592000, i.e. at most 30 days).
        #[arg(long, value_name = "SECS", default_value_t = 3600,
              value_parser = clap::value_parser!(u64).range(0..=MAX_APPROVAL_SECS))]
        expires_in: u64,
        /// ID is a run id: approve every pending approval of that run.
        #[arg(long)]
        all: bool,
        /// With --all: approve each listed approval without asking (required off a terminal).
        #[arg(long, requires = "all")]
        yes: bool,
        /// Then continue the run, as `craik runs resume RUN` does.
        #[arg(long)]
        resume: bool,
    },
    /// Deny: the parked run ends blocked when resumed.
    Deny {
        #[command(flatten)]
        review: ReviewArgs,
        /// Then continue the run (it ends blocked), as `craik runs resume RUN` does.
        #[arg(long)]
        resume: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum MemoryCommand {
    /// List memory proposals.
    List(HomeArg),
    /// Show one proposal (JSON).
    Show {
        id: String,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Approve a proposal (needs evidence; the reviewer is never the runner).
    Approve(ReviewArgs),
    /// Reject a proposal.
    Reject(ReviewArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunnersCommand {
    /// Print the shipped runners' capability matrices (what each may be asked, at what trust).
    Matrix {
        /// One runner (`codex` or `runner_codex`); default: all.
        #[arg(long, value_name = "ID")]
        runner: Option<String>,
    },
    /// The registered runners (built-in, the home's runners.toml, the project's): id,
    /// backend, version, origin, trust, pin.
    List(HomeArg),
    /// One registered runner: how it starts, what it receives, its matrix and pin.
    Show {
        /// The runner id.
        id: String,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Add a runner to the home's runners.toml (or the project's, --project); checked as a run
    /// loads it before anything is written (docs/runners.md).
    Add(Box<RunnersAddArgs>),
    /// Remove a runner from the home's runners.toml (or --project), with its pin and cache.
    Remove {
        /// The runner id.
        id: String,
        /// Edit the project's runners.toml (beside craik.toml).
        #[arg(long)]
        project: bool,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Resolve (and, for `install = "cache"`, copy into HOME/runners/ID/) what the entry
    /// names, and pin its sha256 in HOME/runners/ID/pin.json; every launch re-checks it.
    Install {
        /// The runner id.
        id: String,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Load the registry (refusals name file, line, key and value) and check every runner (or
    /// ID) resolves and matches its pin. Exit 0 all pass, 1 any fails, 3 a refused file.
    Check {
        /// One runner; default: all.
        id: Option<String>,
        /// Also start each adapter (as a run would) and run the `initialize` handshake: it
        /// must announce the runner id of the registry's matrix.
        #[arg(long)]
        handshake: bool,
        #[command(flatten)]
        home: HomeArg,
    },
    /// Check an adapter against docs/protocol.md: handshake, a normal step, structured
    /// errors, malformed and oversize lines, cancellation, timeouts, clean shutdown. Give a
    /// registry id (launched as a run launches it: pin checked, confined, its environment) or
    /// a command after `--`.
    Conformance {
        /// A registry id.
        #[arg(
            value_name = "ID",
            required_unless_present = "command",
            conflicts_with = "command"
        )]
        id: Option<String>,
        /// The adapter command and its arguments, after `--`.
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
        #[command(flatten)]
        home: HomeArg,
    },
}

/// `craik runners add`.
#[derive(Debug, Args)]
pub(crate) struct RunnersAddArgs {
    /// The runner id (`--runner ID`): lowercase letters, digits, `-`, `_`, `.`.
    pub(crate) id: String,
    /// cli (a wrapped agent CLI), provider (the provider adapter), npx, uvx (an adapter
    /// package), program (any executable speaking docs/protocol.md).
    #[arg(long, value_name = "BACKEND")]
    pub(crate) backend: String,
    /// Display name.
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The program (program), the wrapped CLI (cli), the package's binary (npx/uvx): a path
    /// or a bare name (looked up beside craik, then on /usr/local/bin:/usr/bin:/bin).
    #[arg(long, value_name = "CMD")]
    pub(crate) command: Option<String>,
    /// An argument for the adapter (repeatable).
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
    /// The flag a run's fixture scenario is passed with (e.g. `--fixture`).
    #[arg(long, value_name = "FLAG", allow_hyphen_values = true)]
    pub(crate) scenario_arg: Option<String>,
    /// cli: the handoff adapter wrapping the CLI (codex, claude, gemini).
    #[arg(long)]
    pub(crate) adapter: Option<String>,
    /// provider: openai-responses, anthropic-messages or chat-completions.
    #[arg(long)]
    pub(crate) api: Option<String>,
    /// provider: the model; cli: the model the CLI is told to use.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// cli: the model endpoint (base URL) the CLI talks to, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL")]
    pub(crate) endpoint: Option<String>,
    /// cli: the variable of your environment holding the CLI's key (a name, never the key).
    #[arg(long, value_name = "NAME")]
    pub(crate) key_env: Option<String>,
    /// cli: a further flag for the CLI, from its allow-list (repeatable; docs/runners.md).
    #[arg(long = "cli-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) cli_args: Vec<String>,
    /// npx/uvx: the package with its exact version (`@scope/pkg@1.2.3`, `pkg==1.2.3`).
    #[arg(long, value_name = "SPEC")]
    pub(crate) package: Option<String>,
    /// The version recorded, `version` in the file (npx/uvx: must equal the package's).
    #[arg(id = "runner_version", long = "runner-version", value_name = "VERSION")]
    pub(crate) version: Option<String>,
    /// A local package file (npx/uvx) or the bundle directory (install = prebundled).
    #[arg(long, value_name = "PATH")]
    pub(crate) source: Option<PathBuf>,
    /// installed (pin it where it is), cache (copy into HOME/runners/ID/), prebundled.
    #[arg(long, value_name = "STRATEGY")]
    pub(crate) install: Option<String>,
    /// A shipped matrix by name, or a craik.runner_capability_matrix file.
    #[arg(long, value_name = "NAME|FILE")]
    pub(crate) matrix: Option<String>,
    /// An inline matrix's trust (low, medium, high).
    #[arg(long)]
    pub(crate) trust: Option<String>,
    /// An inline matrix's `CAPABILITY=SUPPORT` (repeatable).
    #[arg(long, value_name = "CAP=SUPPORT")]
    pub(crate) support: Vec<String>,
    /// A variable passed from your environment, by name (repeatable; never CRAIK_*).
    #[arg(long, value_name = "NAME")]
    pub(crate) env: Vec<String>,
    /// A path the adapter may also read (repeatable).
    #[arg(long, value_name = "PATH")]
    pub(crate) read: Vec<PathBuf>,
    /// Write the project's runners.toml (beside craik.toml) instead of the home's.
    #[arg(long)]
    pub(crate) project: bool,
    /// Replace an entry of the same id.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) home: HomeArg,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// The whole proof analysis of the embedded bundle (canaries, never-errors, the property
    /// library, a diff against itself and against a mutated copy), timed; target <= 10 s.
    Prove {
        #[command(flatten)]
        solver: ProveArgs,
    },
    /// A governed fixture run of N steps (every action decided and receipted, side effects
    /// fsynced) against the same scenario with governance off, measured in the same run.
    Run {
        /// Steps (a multiple of 4: plan, act, observe, evaluate).
        #[arg(long, default_value_t = 1000)]
        steps: usize,
        /// Also run it with the fixture runner as an adapter process (needs the adapters built).
        #[arg(long)]
        adapter: bool,
    },
    /// Generate a repository of N docs files (MB megabytes in all), then time `case build`
    /// against `git ls-files -z | xargs -0 sha256sum` over it, in the same run; max RSS.
    Case {
        /// Docs files.
        #[arg(long, default_value_t = 10_000)]
        files: usize,
        /// Their total size, in MB.
        #[arg(long, default_value_t = 100)]
        megabytes: u64,
        /// Runs of each side (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Round trips of a step with a 4 KB context over the channel to the fixture adapter
    /// process, against the same step answered in process, measured in the same run.
    Channel {
        /// Round trips.
        #[arg(long, default_value_t = 10_000)]
        count: usize,
    },
    /// Sign, chain and append N receipts, then verify them; prints rates and ratios against
    /// signing alone, measured in the same run. Writes the journal with --out.
    Receipts {
        /// Receipts to write.
        #[arg(long, default_value_t = 100_000)]
        count: u64,
        /// Signing key (PKCS#8 PEM); default: a fresh key that is discarded.
        #[arg(long, value_name = "KEY.pem")]
        key: Option<PathBuf>,
        /// Write the journal here (refuses to overwrite).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// A checkpoint every this many receipts.
        #[arg(long, default_value_t = 1000)]
        checkpoint_every: u64,
        /// Also append every receipt to DIR/receipts.jsonl with an fsync each, as a run does,
        /// and report the rate with fsync.
        #[arg(long, value_name = "DIR")]
        run_dir: Option<PathBuf>,
    },
    /// `craik audit` over N generated receipts against `craik receipts verify` of the same
    /// journals, measured in the same run: times, the ratio, and each one's peak memory.
    Audit {
        /// Receipts to generate (spread over --journals journals).
        #[arg(long, default_value_t = 100_000)]
        count: u64,
        /// Journals to spread them over.
        #[arg(long, default_value_t = 100)]
        journals: u64,
        /// Keep the generated journals in DIR (a new directory) instead of removing them.
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
        /// Also time `craik audit --html` over them.
        #[arg(long)]
        html: bool,
    },
}

/// `--runner`, validated by clap (the raw string never reaches a command). A registry id is
/// looked up when the run starts (the registry lives in the home and the project); the
/// adapter program of `adapter:` is resolved then too (it depends on the directory and PATH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunnerArg {
    /// A registered runner: a built-in (`fixture` in process, `fixture-adapter`, `codex`,
    /// `claude`, `gemini`) or one of `runners.toml`, with an optional scenario file (fixture
    /// mode).
    Registered {
        id: String,
        scenario: Option<PathBuf>,
    },
    /// `provider:API:MODEL`.
    Provider { api: String, model: String },
    /// `adapter:PROGRAM [ARG]...`: words split on whitespace, no quoting.
    Adapter { command: String },
}

/// The model-provider APIs the provider adapter speaks.
pub(crate) const PROVIDER_APIS: &[&str] = craik_host::registry::PROVIDER_APIS;

impl RunnerArg {
    pub(crate) fn parse(spec: &str) -> Result<Self, String> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match name {
            "provider" => match rest.split_once(':') {
                Some((api, model)) if PROVIDER_APIS.contains(&api) && !model.trim().is_empty() => {
                    Ok(Self::Provider {
                        api: api.to_owned(),
                        model: model.to_owned(),
                    })
                }
                _ => Err(format!(
                    "expected `provider:API:MODEL` (API: {})",
                    PROVIDER_APIS.join(", ")
                )),
            },
            "adapter" if !rest.trim().is_empty() => Ok(Self::Adapter {
                command: rest.to_owned(),
            }),
            "adapter" => Err("expected `adapter:PROGRAM [ARG]...`".into()),
            _ => match craik_host::registry::id_problem(name) {
                None => Ok(Self::Registered {
                    id: name.to_owned(),
                    scenario: (!rest.is_empty()).then(|| PathBuf::from(rest)),
                }),
                Some(why) => Err(format!(
                    "expected a registered runner id (`craik runners list`; {why}), optionally `:SCENARIO.json`, `provider:API:MODEL` or `adapter:PROGRAM`"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_specs_parse_or_name_what_was_expected() {
        assert_eq!(
            RunnerArg::parse("fixture:s.json"),
            Ok(RunnerArg::Registered {
                id: "fixture".into(),
                scenario: Some(PathBuf::from("s.json"))
            })
        );
        assert_eq!(
            RunnerArg::parse("codex"),
            Ok(RunnerArg::Registered {
                id: "codex".into(),
                scenario: None
            })
        );
        assert_eq!(
            RunnerArg::parse("provider:chat-completions:m-1"),
            Ok(RunnerArg::Provider {
                api: "chat-completions".into(),
                model: "m-1".into()
            })
        );
        for bad in [
            "HAL9000",
            "-x",
            "provider:x",
            "provider:smtp:m",
            "provider:chat-completions:",
            "adapter:",
            "adapter:  ",
            "",
        ] {
            assert!(RunnerArg::parse(bad).is_err(), "{bad}");
        }
    }
}
