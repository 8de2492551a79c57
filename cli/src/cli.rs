//! The command line, as clap types. Parsing only; the commands live in `cmd/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::files::DEFAULT_MAX_BYTES;
use crate::output::Format;

/// Craik: a governance kernel for AI-agent runs.
///
/// Exit codes: 0 ok, 1 check failed, 2 usage or unreadable path, 3 invalid input,
/// 4 internal error.
#[derive(Debug, Parser)]
#[command(name = "craik", version, about, long_about = None, propagate_version = true)]
pub(crate) struct Cli {
    /// Output format.
    #[arg(long, global = true, value_enum, default_value = "human")]
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
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
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
