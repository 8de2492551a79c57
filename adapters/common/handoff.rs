//! Prompt-handoff adapters (codex, claude, gemini), shared through `#[path]`.
//!
//! Each step hands off the prompt the host compiled (the request's `input_prompt`: the task,
//! the runner's capability notes, the policy, the case file as fenced data, the output contract
//! and the host's `Step` section; docs/context.md) verbatim — the adapter adds nothing:
//! - **fixture mode** (`--fixture SCENARIO.json`): to the scenario, deterministically;
//! - **live mode**: to the real CLI (`--cli PATH` or found on `PATH`), whose streamed output is
//!   mapped into events and a step result. The model's answer is read from the last JSON object
//!   in its final message; anything else becomes a `partial` step with no actions.
//!
//! The host persists the compiled prompt and signs its sha256 in the run's inputs; the result's
//! `observed_output.handoff` says which request was handed off, and how.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use craik_contracts::channel::{ChannelError, InitializeResult, codes};
use craik_contracts::{
    FixtureScenario, RunnerCapabilityMatrix, RunnerStepRequest, RunnerStepResult,
};
use serde_json::{Value, json};

use crate::serve::{Events, Runner, error};

/// Which CLI a live handoff wraps, and how its output is read. (Each adapter binary uses one.)
#[allow(
    dead_code,
    reason = "each adapter binary constructs its own variant only"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cli {
    /// `codex exec --json -` (the prompt on standard input): JSON lines; agent messages as
    /// `item.completed` / `agent_message` events.
    Codex,
    /// `claude -p --output-format stream-json --verbose` (the prompt on standard input): JSON
    /// lines; `assistant` messages with text and tool_use blocks, then a `result`.
    Claude,
    /// `gemini` (the prompt on standard input, which makes it non-interactive): plain text.
    Gemini,
}

impl Cli {
    fn program(self) -> &'static str {
        match self {
            Self::Codex => "codex",
            Self::Claude => "claude",
            Self::Gemini => "gemini",
        }
    }

    /// The arguments that make the CLI propose rather than act: never the prompt, which goes
    /// to the CLI's standard input (issue 30: an argument is readable by every local user in
    /// `/proc/PID/cmdline`, and a prompt over 128 KiB failed to start with "Argument list too
    /// long"). Each CLI is told to propose, not act (issue 32), with the flags its own `--help`
    /// documents (checked against `@openai/codex` 0.169.0, `@anthropic-ai/claude-code`
    /// 2.1.328, `@google/gemini-cli` 0.61.0): codex's read-only sandbox, no session files, no
    /// user config or rules, outside a git repository, and its tools that run or reach out
    /// turned off (0.169.0 runs its `exec_command` shell tool without reporting it in
    /// `exec --json`: it must not be offered at all); claude with no built-in tools, plan mode,
    /// no MCP servers but the (empty) configured set, no session files; gemini in read-only
    /// plan mode with JSON events (its tools are excluded in its settings: [`Self::settings`]).
    /// Whatever the CLI still does on its own ends the step as a runner violation ([`acted`]).
    /// codex's final `-` (the prompt from standard input) is added last, by [`Handoff::argv`].
    fn args(self) -> Vec<String> {
        let args: &[&str] = match self {
            Self::Codex => &[
                "exec",
                "--json",
                "--sandbox",
                "read-only",
                "--skip-git-repo-check",
                "--ephemeral",
                "--ignore-user-config",
                "--ignore-rules",
                "--color",
                "never",
                "--disable",
                "shell_tool",
                "--disable",
                "unified_exec",
                "--disable",
                "multi_agent",
                "--disable",
                "goals",
                "--disable",
                "image_generation",
                "-c",
                "web_search=\"disabled\"",
                // No AGENTS.md read, and no project root found above the working directory
                // (where a `.codex/config.toml` would be read).
                "-c",
                "project_doc_max_bytes=0",
                "-c",
                "project_root_markers=[]",
            ],
            Self::Claude => &[
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--tools",
                "",
                "--permission-mode",
                "plan",
                "--strict-mcp-config",
                "--no-session-persistence",
                // Settings of its private home only: no project or local settings (hooks,
                // environment) from a `.claude/` above the working directory.
                "--setting-sources",
                "user",
            ],
            // Plan mode holds only in a trusted folder (else 0.61.0 falls back to `default`,
            // saying so): the adapter's own working directory is trusted for this session.
            Self::Gemini => &[
                "--output-format",
                "stream-json",
                "--approval-mode",
                "plan",
                "--skip-trust",
            ],
        };
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    /// What the CLI would read from a directory above its working directory, by name: the
    /// project-root marker and instruction and configuration files of each (codex
    /// `core/src/agents_md.rs` and project config layers; claude's CLAUDE.md walk and project
    /// settings; gemini's GEMINI.md walk and `findEnvFile`). The first such entry found in an
    /// ancestor of `work` above the CLI's private home, if any — in a directory anyone may
    /// write to, only one of this user or root.
    fn read_from_ancestors(self, work: &std::path::Path) -> Option<std::path::PathBuf> {
        let names: &[&str] = match self {
            Self::Codex => &[".git", ".codex", "AGENTS.md", "AGENTS.override.md"],
            Self::Claude => &[
                ".git",
                ".claude",
                "CLAUDE.md",
                "CLAUDE.local.md",
                ".mcp.json",
            ],
            Self::Gemini => &[".git", ".gemini", "GEMINI.md", ".env"],
        };
        // `work` is `<scratch>/<private home>/work`: the walk starts at the scratch. In a
        // directory anyone may write to (a sticky, world-writable `/tmp`), an entry of another
        // user is not counted: the CLI's own switches keep it unread, and counting it would let
        // any local user stop every governed run (outside testing round r32b F2).
        // The walk is over the real path (a TMPDIR reached through a link is walked where it
        // leads: outside testing round r32c), and "anyone may write" is any directory another
        // user may write to: group- or world-writable, or another user's.
        let me = rustix::process::geteuid().as_raw();
        let work = work.canonicalize().unwrap_or_else(|_| work.to_path_buf());
        work.ancestors().skip(2).find_map(|dir| {
            use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
            let shared = std::fs::symlink_metadata(dir).is_ok_and(|m| {
                m.permissions().mode() & 0o022 != 0 || (m.uid() != me && m.uid() != 0)
            });
            names.iter().map(|name| dir.join(name)).find(|path| {
                std::fs::symlink_metadata(path)
                    .is_ok_and(|m| !shared || m.uid() == me || m.uid() == 0)
            })
        })
    }

    /// A system-wide configuration the CLI would read and that no switch of it skips (codex:
    /// anything in `/etc/codex/`), if there is one. Claude ignores an unreadable managed settings file;
    /// gemini's are pointed elsewhere by its variables.
    fn system_config(self) -> Option<std::path::PathBuf> {
        // Codex reads its config, managed config, requirements, hooks, rules, skills and agents
        // there (outside testing round r32c: `/etc/codex/rules/` alone stopped every run).
        let files: &[&str] = match self {
            Self::Codex => &["/etc/codex"],
            Self::Claude | Self::Gemini => &[],
        };
        files
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| std::fs::symlink_metadata(p).is_ok())
    }

    /// The variable the CLI reads its key from (the adapter sets it from the operator's
    /// `key_env`; for codex it is the one its provider entry names in `env_key`).
    fn key_variable(self) -> &'static str {
        match self {
            Self::Codex => "OPENAI_API_KEY",
            Self::Claude => "ANTHROPIC_API_KEY",
            Self::Gemini => "GEMINI_API_KEY",
        }
    }

    /// gemini's `settings.json` in its private home (0.61.0 reads `~/.gemini/settings.json`):
    /// the auth method when a key is given (without one it stops with "Invalid auth method
    /// selected"), every tool that reads, writes, runs or reaches out excluded (what is left
    /// only talks: `update_topic`, `exit_plan_mode`), no telemetry, usage statistics or
    /// update checks.
    fn settings(self, keyed: bool) -> Option<Value> {
        if self != Self::Gemini {
            return None;
        }
        let mut settings = json!({
            "tools": {"exclude": [
                "run_shell_command", "write_file", "replace", "read_file", "read_many_files",
                "list_directory", "glob", "grep_search", "google_web_search", "web_fetch",
                "save_memory", "invoke_agent"
            ]},
            // No GEMINI.md looked for above the working directory, no `.env` read but the
            // private home's.
            "context": {"memoryBoundaryMarkers": []},
            "advanced": {"ignoreLocalEnv": true},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
        });
        if keyed && let Some(object) = settings.as_object_mut() {
            object.insert(
                "security".into(),
                json!({"auth": {"selectedType": "gemini-api-key"}}),
            );
        }
        Some(settings)
    }

    /// The `provider` its model-step reports name (usage as the CLI reports it).
    fn provider(self) -> &'static str {
        match self {
            Self::Codex => "codex-cli",
            Self::Claude => "claude-code",
            Self::Gemini => "gemini-cli",
        }
    }
}

/// A prompt-handoff adapter's whole `main`: parse the arguments, serve the channel.
pub(crate) fn main(binary: &str, cli: Cli, matrix_json: &str) -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match Handoff::from_args(cli, matrix_json, &args) {
        Ok(mut runner) => crate::serve::serve(&mut runner),
        Err(why) => {
            #[allow(
                clippy::print_stderr,
                reason = "the host captures stderr as diagnostics"
            )]
            {
                eprintln!("{binary}: {why}");
            }
            std::process::ExitCode::from(2)
        }
    }
}

pub(crate) struct Handoff {
    cli: Cli,
    matrix: RunnerCapabilityMatrix,
    scenario: Option<FixtureScenario>,
    cli_path: Option<String>,
    config: CliConfig,
}

/// What the operator's registry entry tells the CLI (issue 32), checked again here by the
/// same rules the registry applied (`craik_contracts::agent_cli`).
#[derive(Debug, Default)]
struct CliConfig {
    /// The model endpoint (base URL).
    endpoint: Option<String>,
    model: Option<String>,
    /// The variable of the adapter's environment holding the key (a name).
    key_env: Option<String>,
    /// Further flags, allow-listed.
    cli_args: Vec<String>,
}

impl Handoff {
    /// From the command line: `[--fixture SCENARIO.json] [--cli PATH] [--endpoint URL]
    /// [--model MODEL] [--key-env NAME] [--cli-arg ARG]...`.
    pub(crate) fn from_args(cli: Cli, matrix_json: &str, args: &[String]) -> Result<Self, String> {
        use craik_contracts::agent_cli;
        let matrix = crate::serve::embedded_matrix(matrix_json)?;
        let mut scenario = None;
        let mut cli_path = None;
        let mut config = CliConfig::default();
        let mut given_cli_args = Vec::new();
        let mut it = args.iter();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(arg) = it.next() {
            // Each option once: a second `--cli` or `--endpoint` silently replacing the first
            // ran an unpinned program (outside testing round r32).
            if arg != "--cli-arg" && !seen.insert(arg.as_str()) {
                return Err(format!("{arg} given twice"));
            }
            let mut value = |what: &str| {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{arg} needs {what}"))
            };
            match arg.as_str() {
                "--fixture" => {
                    scenario = Some(crate::serve::load_scenario(&value("a path")?)?);
                }
                "--cli" => cli_path = Some(value("a path")?),
                "--endpoint" => {
                    let url = value("a URL")?;
                    if let Some(why) = agent_cli::endpoint_problem(&url) {
                        return Err(format!(
                            "--endpoint `{}`: {why}",
                            craik_contracts::Truncated(&url)
                        ));
                    }
                    config.endpoint = Some(url);
                }
                "--model" => {
                    let model = value("a model")?;
                    if let Some(why) = agent_cli::model_problem(&model) {
                        return Err(format!(
                            "--model `{}`: {why}",
                            craik_contracts::Truncated(&model)
                        ));
                    }
                    config.model = Some(model);
                }
                "--key-env" => {
                    let name = value("a variable name")?;
                    if let Some(why) = agent_cli::variable_name_problem(&name) {
                        return Err(format!(
                            "--key-env `{}`: {why}",
                            craik_contracts::Truncated(&name)
                        ));
                    }
                    config.key_env = Some(name);
                }
                "--cli-arg" => given_cli_args.push(value("a flag")?),
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        let which = match cli {
            Cli::Codex => agent_cli::AgentCli::Codex,
            Cli::Claude => agent_cli::AgentCli::Claude,
            Cli::Gemini => agent_cli::AgentCli::Gemini,
        };
        config.cli_args = agent_cli::check_cli_args(which, &given_cli_args)
            .map_err(|e| format!("--cli-arg: {e}"))?;
        Ok(Self {
            cli,
            matrix,
            scenario,
            cli_path,
            config,
        })
    }

    /// The CLI's whole argv after its program: the propose-only flags ([`Cli::args`]), the
    /// operator's endpoint and model as the CLI reads them, the allowed further flags, and for
    /// codex the final `-`. Never a key, never the prompt.
    fn argv(&self) -> Vec<String> {
        let mut argv = self.cli.args();
        let quoted = |v: &str| format!("\"{v}\"");
        match self.cli {
            Cli::Codex => {
                // A provider of its own: `OPENAI_BASE_URL` is ignored by 0.169.0, and a
                // `config.toml` is not read (`--ignore-user-config`); `-c` overrides are.
                // The values are checked to hold no `"` or `\` (endpoint, model rules).
                if self.config.endpoint.is_some() || self.config.key_env.is_some() {
                    let base = self
                        .config
                        .endpoint
                        .as_deref()
                        .unwrap_or("https://api.openai.com/v1");
                    let mut settings = vec![
                        "model_provider=\"craik\"".to_owned(),
                        "model_providers.craik.name=\"craik\"".to_owned(),
                        format!("model_providers.craik.base_url={}", quoted(base)),
                        "model_providers.craik.wire_api=\"responses\"".to_owned(),
                    ];
                    if self.config.key_env.is_some() {
                        settings.push(format!(
                            "model_providers.craik.env_key={}",
                            quoted(self.cli.key_variable())
                        ));
                    }
                    for setting in settings {
                        argv.push("-c".into());
                        argv.push(setting);
                    }
                }
                if let Some(model) = &self.config.model {
                    argv.push("-c".into());
                    argv.push(format!("model={}", quoted(model)));
                }
                argv.extend(self.config.cli_args.iter().cloned());
                argv.push("-".into());
            }
            Cli::Claude | Cli::Gemini => {
                if let Some(model) = &self.config.model {
                    argv.push("--model".into());
                    argv.push(model.clone());
                }
                argv.extend(self.config.cli_args.iter().cloned());
            }
        }
        argv
    }

    /// The variables set for the CLI beyond the adapter's own environment: its endpoint as the
    /// CLI reads it (claude `ANTHROPIC_BASE_URL`, gemini `GOOGLE_GEMINI_BASE_URL`), and for
    /// claude no non-essential traffic (telemetry, update checks). The key is set separately.
    fn cli_env(&self) -> Vec<(&'static str, String)> {
        let mut env = Vec::new();
        match self.cli {
            Cli::Codex => {}
            Cli::Claude => {
                if let Some(url) = &self.config.endpoint {
                    env.push(("ANTHROPIC_BASE_URL", url.clone()));
                }
                env.push(("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()));
                // No CLAUDE.md read from the directories above its working directory, and
                // no memory of its own.
                env.push(("CLAUDE_CODE_DISABLE_CLAUDE_MDS", "1".into()));
                env.push(("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1".into()));
                env.push(("DISABLE_AUTOUPDATER", "1".into()));
            }
            Cli::Gemini => {
                if let Some(url) = &self.config.endpoint {
                    env.push(("GOOGLE_GEMINI_BASE_URL", url.clone()));
                }
            }
        }
        env
    }

    /// The host a model-step report names: the configured endpoint's (codex's default
    /// provider when only a key is given), else `unknown` (the CLI's own default).
    fn endpoint_host(&self) -> String {
        let url = match (self.cli, &self.config.endpoint, &self.config.key_env) {
            (_, Some(url), _) => Some(url.as_str()),
            (Cli::Codex, None, Some(_)) => Some("https://api.openai.com/v1"),
            _ => None,
        };
        url.and_then(craik_contracts::agent_cli::endpoint_host)
            .unwrap_or_else(|| "unknown".into())
    }

    fn live(
        &self,
        request: &RunnerStepRequest,
        events: &mut Events<'_>,
    ) -> Result<RunnerStepResult, ChannelError> {
        let program = self
            .cli_path
            .clone()
            .or_else(|| find_on_path(self.cli.program()))
            .ok_or_else(|| {
                error(
                    codes::UNAVAILABLE,
                    format!(
                        "live mode needs the `{}` CLI on PATH (or --cli PATH); use --fixture for deterministic runs",
                        self.cli.program()
                    ),
                )
            })?;
        // The key, from the variable the operator named (the host passes it to this process
        // only): handed to the CLI under the name it reads, the original name removed. A named
        // variable that is unset or empty stops here: the CLI would fail less clearly.
        let key = match &self.config.key_env {
            Some(name) => Some(
                std::env::var(name)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| {
                        error(
                            codes::UNAVAILABLE,
                            format!(
                                "the CLI's key variable `{name}` (`key_env`) is not set in Craik's environment"
                            ),
                        )
                    })?,
            ),
            None => None,
        };
        // As written and as JSON escapes it (a key holding `\` or `"`: outside testing round
        // r32 found such a key verbatim in the run's records once its line was decoded).
        let escaped = key.as_ref().and_then(|k| {
            serde_json::to_string(k)
                .ok()
                .map(|q| q.trim_matches('"').to_owned())
                .filter(|e| e != k)
        });
        let scrub = |text: &str| match &key {
            Some(k) => {
                let text = text.replace(k.as_str(), "[key]");
                match &escaped {
                    Some(e) => text.replace(e.as_str(), "[key]"),
                    None => text,
                }
            }
            None => text.to_owned(),
        };
        // A private, writable home, temporary and working directory for the CLI (issue 32:
        // claude could not create its temp directory under a read-only /tmp; gemini found no
        // settings): in the scratch directory the host gives this process as its TMPDIR —
        // outside the run's record (outside testing round r32: codex's shell snapshot quoting
        // the key, and anything a CLI wrote to its working directory, stayed in the run's
        // directory), outside any repository (the CLIs read AGENTS.md, CLAUDE.md, GEMINI.md,
        // `.codex/`, `.gemini/.env` from the ancestors of their working directory: from the
        // project holding Craik's home), removed by the host with this process. So what the
        // CLI writes (codex's CODEX_HOME, claude's ~/.claude, gemini's ~/.gemini) never
        // reaches the operator's own, and the settings written there are the adapter's.
        let home = std::env::var_os("TMPDIR")
            .map(std::path::PathBuf::from)
            .filter(|t| t.is_absolute())
            .map(|t| t.join(craik_contracts::agent_cli::PRIVATE_HOME))
            .ok_or_else(|| {
                error(
                    codes::UNAVAILABLE,
                    "no private scratch directory (TMPDIR) from the host for the CLI",
                )
            })?;
        let tmp = home.join("tmp");
        let work = home.join("work");
        // New for each invocation, and removed after it (below): nothing the CLI wrote (its
        // session files, a config quoting the key) outlives the invocation.
        let _ = std::fs::remove_dir_all(&home);
        for dir in [&tmp, &work] {
            std::fs::create_dir_all(dir).map_err(|e| {
                error(
                    codes::UNAVAILABLE,
                    format!(
                        "{}: cannot create the CLI's private directories: {e}",
                        dir.display()
                    ),
                )
            })?;
        }
        // What the CLI would read from above its working directory, found there: refused
        // rather than run (its own switches, below, turn that reading off; this is the check
        // that they did not have to).
        if let Some(found) = self.cli.read_from_ancestors(&work) {
            return Err(error(
                codes::UNAVAILABLE,
                format!(
                    "`{}` lies above the CLI's private working directory, and {} would read it: remove it, or give Craik another TMPDIR",
                    found.display(),
                    self.cli.program()
                ),
            ));
        }
        // A system-wide configuration codex always reads, and has no switch to skip: Craik's
        // confinement keeps it unreadable, on which codex stops. Said here, as the operator's
        // setup, rather than as the CLI's failure (outside testing round r32b F3).
        if let Some(found) = self.cli.system_config() {
            return Err(error(
                codes::UNAVAILABLE,
                format!(
                    "`{}` is a system configuration {} reads and a governed run does not pass it (it may start tools and servers of its own): run it where that file is absent",
                    found.display(),
                    self.cli.program()
                ),
            ));
        }
        let mut system_settings = None;
        if let Some(settings) = self.cli.settings(key.is_some()) {
            let dir = home.join(".gemini");
            // Gemini's system settings and defaults (`/etc/gemini-cli/…`, which confinement
            // keeps unreadable: gemini stops on it) point at empty ones of its private home.
            let empty = dir.join("system-settings.json");
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join("settings.json"), settings.to_string()))
                .and_then(|()| std::fs::write(&empty, "{}"))
                .map_err(|e| {
                    error(
                        codes::UNAVAILABLE,
                        format!("{}: cannot write the CLI's settings: {e}", dir.display()),
                    )
                })?;
            system_settings = Some(empty);
        }
        let mut command = Command::new(&program);
        if let Some(empty) = &system_settings {
            command
                .env("GEMINI_CLI_SYSTEM_SETTINGS_PATH", empty)
                .env("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", empty);
        }
        // A process group of its own, killed whole: codex's launcher is a node shim running a
        // native binary, which a kill of the shim alone leaves running (holding the pipes open).
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // Killed with this process, whatever kills it (Craik killed with SIGKILL takes its
        // adapter with it: outside testing round r32b left the CLI running, key in hand).
        craik_spawn::die_with_parent(&mut command);
        command
            .current_dir(&work)
            .env("HOME", &home)
            .env("TMPDIR", &tmp);
        for (name, value) in self.cli_env() {
            command.env(name, value);
        }
        if let (Some(name), Some(k)) = (&self.config.key_env, &key) {
            command.env_remove(name);
            command.env(self.cli.key_variable(), k);
        }
        let started = std::time::Instant::now();
        let mut child = command
            .args(self.argv())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| error(codes::UNAVAILABLE, format!("`{program}`: {e}")))?;
        // The prompt on standard input, written beside the reading of the output (a CLI that
        // streams before it has read everything must not dead-lock), then closed.
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| error(codes::RUNNER_FAILED, "no stdin"))?;
        let prompt = request.input_prompt.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write as _;
            let mut stdin = stdin;
            stdin.write_all(prompt.as_bytes())
        });
        // The CLI's stderr: its last lines kept (bounded) for when it fails.
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| error(codes::RUNNER_FAILED, "no stderr"))?;
        let (tail_tx, tail_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tail_tx.send(stderr_tail(stderr));
        });
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| error(codes::RUNNER_FAILED, "no stdout"))?;
        let mut read = Read::default();
        let mut acted = None;
        let mut broken = None;
        let mut reader = BufReader::new(stdout);
        let mut bytes = Vec::new();
        loop {
            // Bounded lines, read as bytes: a line past the bound or not UTF-8 breaks the
            // stream, and is never the end of reading that lets what follows go unseen
            // (outside testing round r32: one byte that was not UTF-8 hid a later tool event,
            // and a 400 MiB line cost the adapter twice its size).
            bytes.clear();
            match std::io::BufRead::read_until(
                &mut std::io::Read::take(&mut reader, MAX_CLI_LINE + 1),
                b'\n',
                &mut bytes,
            ) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    broken = Some(format!("its output could not be read: {e}"));
                    break;
                }
            }
            if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_CLI_LINE {
                broken = Some(format!("a line of its output is over {MAX_CLI_LINE} bytes"));
                break;
            }
            let Ok(line) = std::str::from_utf8(&bytes) else {
                broken = Some("a line of its output is not UTF-8".to_owned());
                break;
            };
            let line = line.trim_end_matches(['\n', '\r']);
            // The key never travels on: a CLI echoing it (an error quoting its request) has it
            // replaced before anything of the line is read.
            let line = scrub(line);
            if line.trim().is_empty() {
                continue;
            }
            // Every line of the CLI's event stream is one JSON event: one that is not (an event
            // spread over several lines) would hide what it says (outside testing round r32:
            // a tool event printed over several lines passed as "not JSON").
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                broken = Some("a line of its output is not one JSON event".to_owned());
                break;
            };
            if let Err(what) = map_event(self.cli, &value, events, &mut read) {
                acted = Some(what);
                break;
            }
        }
        let group = rustix::process::Pid::from_child(&child);
        let kill_group = || {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        };
        if acted.is_some() || broken.is_some() {
            kill_group();
        }
        let status = child
            .wait()
            .map_err(|e| error(codes::RUNNER_FAILED, format!("waiting for the CLI: {e}")))?;
        // Whatever it started goes with it (a process that left the group is the host's to
        // sweep when the adapter stops); its stderr is then read to its end, or for at most
        // two seconds more.
        kill_group();
        let _ = std::fs::remove_dir_all(&home);
        let stderr_tail = scrub(
            &tail_rx
                .recv_timeout(std::time::Duration::from_secs(2))
                .unwrap_or_default(),
        );
        // Usage first: what the CLI spent is reported whatever happens next (unknown when it
        // said nothing; never zero).
        if broken.is_some() {
            // What it reported before the break is not the invocation's usage.
            read.unreadable = true;
        }
        events.model_step(self.report(
            request,
            &read,
            started.elapsed(),
            acted.is_none() && broken.is_none() && status.success(),
        ));
        if let Some(why) = broken {
            return Err(error(
                codes::RUNNER_FAILED,
                format!("`{program}` broke its event stream: {why}"),
            ));
        }
        if let Some(what) = acted {
            return Err(error(
                codes::RUNNER_FAILED,
                format!(
                    "`{program}` acted on its own ({what}); a runner only proposes, and Craik executes what it decides"
                ),
            ));
        }
        match writer.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(error(
                    codes::RUNNER_FAILED,
                    format!(
                        "`{program}` did not read the whole prompt from its standard input: {e}{}",
                        shown_tail(&stderr_tail)
                    ),
                ));
            }
            Err(_) => return Err(error(codes::RUNNER_FAILED, "the prompt writer failed")),
        }
        if !status.success() {
            return Err(error(
                codes::RUNNER_FAILED,
                format!(
                    "`{program}` exited with {status}{}",
                    shown_tail(&stderr_tail)
                ),
            ));
        }
        // And the answer as joined: a key a provider streamed in two pieces is whole only
        // here (outside testing round r32, gemini).
        Ok(crate::answer::result_from_text(
            request,
            &scrub(&read.text),
            serde_json::Map::new(),
        ))
    }

    /// The model-step report of one CLI invocation: the tokens its own events reported
    /// (`None`, unknown, when it reported none that can be read exactly), the model it named
    /// (else the configured one, else `unknown`), the configured endpoint's host (else
    /// `unknown`), and the sha256 of the prompt handed to it (the request bodies the CLI
    /// builds are its own).
    fn report(
        &self,
        request: &RunnerStepRequest,
        read: &Read,
        took: std::time::Duration,
        completed: bool,
    ) -> craik_contracts::channel::ModelStepReport {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(request.input_prompt.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let (input, output) = read
            .usage()
            .map_or((None, None), |(i, o)| (Some(i), Some(o)));
        craik_contracts::channel::ModelStepReport {
            provider: self.cli.provider().into(),
            // The model the CLI named, else the one it was told to use, else unknown.
            model: read
                .model
                .clone()
                .filter(|m| {
                    !m.is_empty() && m.len() <= 200 && m.chars().all(|c| c.is_ascii_graphic())
                })
                .or_else(|| self.config.model.clone())
                .unwrap_or_else(|| "unknown".into()),
            endpoint_host: self.endpoint_host(),
            request_sha256: format!("sha256:{hex}"),
            response_id: None,
            input_tokens: input,
            output_tokens: output,
            total_tokens: input.zip(output).and_then(|(i, o)| i.checked_add(o)),
            latency_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            retries: 0,
            streamed: true,
            outcome: if completed {
                craik_contracts::channel::ModelStepOutcome::Ok
            } else {
                craik_contracts::channel::ModelStepOutcome::Failed
            },
        }
    }
}

/// What was read of a CLI's events: its answer's text, the usage it reported (input, output
/// tokens, summed over its turns) and the model it named.
#[derive(Debug, Default)]
struct Read {
    text: String,
    /// Summed usage; `None` before any turn reported one.
    summed: Option<(u64, u64)>,
    /// A turn reported usage that cannot be read exactly (missing, negative, fractional, not a
    /// number, overflowing): the whole invocation's usage is unknown, never a partial sum.
    unreadable: bool,
    model: Option<String>,
}

impl Read {
    /// Adds one turn's usage (`None`: a count that cannot be read exactly).
    fn add_usage(&mut self, turn: Option<(u64, u64)>) {
        // A turn that read no input tokens read nothing: the CLI turned a usage its provider
        // did not report into zeros (all three do: outside testing round r32 signed every
        // step of such a provider as 0 tokens, and the token budget never tripped). Unknown.
        let Some((i, o)) = turn.filter(|(i, _)| *i > 0) else {
            self.unreadable = true;
            return;
        };
        let (pi, po) = self.summed.unwrap_or((0, 0));
        match pi.checked_add(i).zip(po.checked_add(o)) {
            Some(sum) => self.summed = Some(sum),
            None => self.unreadable = true,
        }
    }

    /// The invocation's usage: `None` (unknown) when no turn reported one or any was
    /// unreadable.
    fn usage(&self) -> Option<(u64, u64)> {
        self.summed.filter(|_| !self.unreadable)
    }
}

/// A kind or tool name the CLI (or its provider) chose, as the violation shows it: only a
/// short plain name is shown; anything else could read as more of the signed reason (outside
/// testing round r32: a tool named ``Bash`); the action was approved by user:… (`x`` did).
fn shown_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:/".contains(&b));
    if plain {
        name.to_owned()
    } else {
        format!("a name of {} bytes, not shown", name.len())
    }
}

/// The longest line of a CLI's output read (an event: an answer's text is far shorter).
const MAX_CLI_LINE: u64 = 4 * 1024 * 1024;

/// A token count as the CLI wrote it: a non-negative integer, else unreadable.
fn count(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64)
}

/// The last 4 KiB of a CLI's stderr, whole lines (the cause of a failure is rarely its last
/// line alone: issue 32).
fn stderr_tail(stderr: std::process::ChildStderr) -> String {
    const KEEP: usize = 4096;
    let mut kept: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut size = 0;
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let line: String = line.chars().take(KEEP).collect();
        size += line.len();
        kept.push_back(line);
        while size > KEEP {
            let Some(first) = kept.pop_front() else { break };
            size -= first.len();
        }
    }
    kept.into_iter().collect::<Vec<_>>().join("\n")
}

/// `; its stderr ended: …` (one line), or nothing.
fn shown_tail(tail: &str) -> String {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended: {}", lines.join(" | "))
    }
}

fn find_on_path(program: &str) -> Option<String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// Maps one JSON event of a CLI into channel events and what is read (text, usage, model).
/// `Err` names what the CLI did on its own: by an allow-list of what only talks (issue 32: a
/// codex `command_execution` was a warning and the run completed) — anything else a CLI
/// reports doing, tool use of any kind and every kind not known, ends the step.
fn map_event(
    cli: Cli,
    value: &Value,
    events: &mut Events<'_>,
    read: &mut Read,
) -> Result<(), String> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match cli {
        // `codex exec --json` (codex-rs exec_events.rs): thread.started, turn.started,
        // item.started|updated|completed {item: {type, …}}, turn.completed {usage},
        // turn.failed {error}, error {message}.
        Cli::Codex => match kind {
            "thread.started" | "turn.started" | "turn.failed" | "error" => Ok(()),
            "item.started" | "item.updated" | "item.completed" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                match item.get("type").and_then(Value::as_str).unwrap_or_default() {
                    "agent_message" => {
                        if kind == "item.completed"
                            && let Some(m) = text(item, "text")
                        {
                            events.text(&m);
                            read.text = m;
                        }
                        Ok(())
                    }
                    "reasoning" | "todo_list" | "error" => Ok(()),
                    other => Err(format!("a codex `{}` item", shown_name(other))),
                }
            }
            "turn.completed" => {
                let usage = value.get("usage");
                read.add_usage(
                    count(usage.and_then(|u| u.get("input_tokens")))
                        .zip(count(usage.and_then(|u| u.get("output_tokens")))),
                );
                Ok(())
            }
            other => Err(format!("a codex `{}` event", shown_name(other))),
        },
        // `claude -p --output-format stream-json --verbose`: system (init: model, tools),
        // assistant {message: {model, content: [blocks]}}, user (tool results), result
        // {result, usage}. Anthropic's input_tokens leave out the cache's: all three count.
        Cli::Claude => match kind {
            "system" => {
                if read.model.is_none() {
                    read.model = text(value, "model");
                }
                Ok(())
            }
            "assistant" => {
                let message = value.get("message").unwrap_or(&Value::Null);
                if let Some(model) = text(message, "model") {
                    read.model = Some(model);
                }
                let blocks = message.get("content").and_then(Value::as_array);
                for block in blocks.into_iter().flatten() {
                    match block
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                    {
                        "text" => {
                            if let Some(t) = text(block, "text") {
                                events.text(&t);
                                read.text.push_str(&t);
                            }
                        }
                        "thinking" | "redacted_thinking" => {}
                        other => {
                            let name = text(block, "name").unwrap_or_default();
                            return Err(format!(
                                "a claude `{}` block{}",
                                shown_name(other),
                                if name.is_empty() {
                                    String::new()
                                } else {
                                    format!(" (`{}`)", shown_name(&name))
                                }
                            ));
                        }
                    }
                }
                Ok(())
            }
            "result" => {
                if let Some(r) = text(value, "result") {
                    read.text = r;
                }
                let usage = value.get("usage");
                let field = |k: &str| count(usage.and_then(|u| u.get(k)));
                // The cache fields are absent when no cache was used: absent is 0 there, a
                // present unreadable one is not.
                let cache = |k: &str| match usage.and_then(|u| u.get(k)) {
                    None | Some(Value::Null) => Some(0),
                    Some(v) => v.as_u64(),
                };
                let input = field("input_tokens").and_then(|i| {
                    i.checked_add(cache("cache_creation_input_tokens")?)?
                        .checked_add(cache("cache_read_input_tokens")?)
                });
                read.add_usage(input.zip(field("output_tokens")));
                Ok(())
            }
            // What only informs (2.1.328's event kinds: rate limits, auth status, keep-alives,
            // partial-message stream events).
            "rate_limit_event" | "auth_status" | "keep_alive" | "stream_event" => Ok(()),
            // The CLI's tool results (a tool ran); `tool_progress`, `tool_use_summary`,
            // `control_request` (a permission asked) and any kind not known fall below.
            "user" => Err("a claude tool result (a tool ran)".into()),
            other => Err(format!("a claude `{}` event", shown_name(other))),
        },
        // `gemini --output-format stream-json` (gemini-cli JsonStreamEventType): init {model},
        // message {role, content, delta}, tool_use, tool_result, error, result {status,
        // stats: {input_tokens, output_tokens, total_tokens, …}}. Its total counts thoughts
        // and tool-use prompts beside input and output: what is above the input is output.
        Cli::Gemini => match kind {
            "init" => {
                read.model = text(value, "model");
                Ok(())
            }
            "message" => {
                if text(value, "role").as_deref() == Some("assistant")
                    && let Some(t) = text(value, "content")
                {
                    events.text(&t);
                    read.text.push_str(&t);
                }
                Ok(())
            }
            "error" => Ok(()),
            "result" => {
                let stats = value.get("stats");
                let input = count(stats.and_then(|s| s.get("input_tokens")));
                let total = count(stats.and_then(|s| s.get("total_tokens")));
                read.add_usage(input.zip(total.zip(input).and_then(|(t, i)| t.checked_sub(i))));
                Ok(())
            }
            other => Err(format!("a gemini `{}` event", shown_name(other))),
        },
    }
}

impl Runner for Handoff {
    fn initialize(&mut self) -> Result<InitializeResult, ChannelError> {
        Ok(crate::serve::handshake(&self.matrix))
    }

    fn step(
        &mut self,
        request: RunnerStepRequest,
        events: &mut Events<'_>,
    ) -> Result<RunnerStepResult, ChannelError> {
        let mut result = match &self.scenario {
            Some(scenario) => {
                let r = scenario
                    .answer(&request)
                    .map_err(|why| error(codes::RUNNER_FAILED, why))?;
                events.text(&r.summary);
                r
            }
            None => self.live(&request, events)?,
        };
        result.observed_output.0.insert(
            "handoff".into(),
            json!({
                "mode": if self.scenario.is_some() { "fixture" } else { "live" },
                "cli": self.cli.program(),
                "request_id": request.id,
                "prompt_bytes": request.input_prompt.len(),
            }),
        );
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff(cli: Cli, args: &[&str]) -> Result<Handoff, String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Handoff::from_args(cli, include_str!("../../runners/codex.json"), &args)
    }

    const CONFIGURED: &[&str] = &[
        "--cli",
        "/x/cli",
        "--endpoint",
        "http://127.0.0.1:8080/v1",
        "--model",
        "m-1",
        "--key-env",
        "MY_KEY",
    ];

    /// Issue 32: each CLI's whole argv, as a plan (the key never in it).
    #[test]
    fn issue_32_each_clis_argv_is_the_propose_only_flags_then_the_operators_configuration() {
        let mut codex = CONFIGURED.to_vec();
        codex.extend(["--cli-arg", "--config=model_verbosity=low"]);
        assert_eq!(
            handoff(Cli::Codex, &codex).unwrap().argv(),
            [
                "exec",
                "--json",
                "--sandbox",
                "read-only",
                "--skip-git-repo-check",
                "--ephemeral",
                "--ignore-user-config",
                "--ignore-rules",
                "--color",
                "never",
                "--disable",
                "shell_tool",
                "--disable",
                "unified_exec",
                "--disable",
                "multi_agent",
                "--disable",
                "goals",
                "--disable",
                "image_generation",
                "-c",
                "web_search=\"disabled\"",
                "-c",
                "project_doc_max_bytes=0",
                "-c",
                "project_root_markers=[]",
                "-c",
                "model_provider=\"craik\"",
                "-c",
                "model_providers.craik.name=\"craik\"",
                "-c",
                "model_providers.craik.base_url=\"http://127.0.0.1:8080/v1\"",
                "-c",
                "model_providers.craik.wire_api=\"responses\"",
                "-c",
                "model_providers.craik.env_key=\"OPENAI_API_KEY\"",
                "-c",
                "model=\"m-1\"",
                "-c",
                "model_verbosity=low",
                "-",
            ]
        );
        let mut claude = CONFIGURED.to_vec();
        claude.extend(["--cli-arg", "--effort", "--cli-arg", "high"]);
        let c = handoff(Cli::Claude, &claude).unwrap();
        assert_eq!(
            c.argv(),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--tools",
                "",
                "--permission-mode",
                "plan",
                "--strict-mcp-config",
                "--no-session-persistence",
                "--setting-sources",
                "user",
                "--model",
                "m-1",
                "--effort",
                "high",
            ]
        );
        assert_eq!(
            c.cli_env(),
            [
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080/v1".to_owned()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
                ("CLAUDE_CODE_DISABLE_CLAUDE_MDS", "1".to_owned()),
                ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1".to_owned()),
                ("DISABLE_AUTOUPDATER", "1".to_owned()),
            ]
        );
        assert_eq!(c.endpoint_host(), "127.0.0.1");
        let g = handoff(Cli::Gemini, CONFIGURED).unwrap();
        assert_eq!(
            g.argv(),
            [
                "--output-format",
                "stream-json",
                "--approval-mode",
                "plan",
                "--skip-trust",
                "--model",
                "m-1",
            ]
        );
        assert_eq!(
            g.cli_env(),
            [(
                "GOOGLE_GEMINI_BASE_URL",
                "http://127.0.0.1:8080/v1".to_owned()
            )]
        );
        // Unconfigured: the propose-only flags alone; the host unknown, not guessed.
        let bare = handoff(Cli::Codex, &["--cli", "/x/cli"]).unwrap();
        assert_eq!(bare.argv(), {
            let mut a = Cli::Codex.args();
            a.push("-".into());
            a
        });
        assert_eq!(bare.endpoint_host(), "unknown");
        // codex with a key and no endpoint: its provider at OpenAI's.
        let keyed = handoff(Cli::Codex, &["--key-env", "K"]).unwrap();
        assert!(
            keyed
                .argv()
                .contains(&"model_providers.craik.base_url=\"https://api.openai.com/v1\"".into())
        );
        assert_eq!(keyed.endpoint_host(), "api.openai.com");
    }

    /// Issue 32 (outside testing round r32 F11): what a CLI would read from above its private
    /// working directory is found, per CLI, from the scratch directory up; the private home
    /// itself (which holds the adapter's own settings) is not looked at.
    #[test]
    fn issue_32_what_a_cli_reads_from_above_its_working_directory_is_found() {
        let dir = std::env::temp_dir().join(format!("craik-handoff-test-{}", std::process::id()));
        let work = dir.join("scratch/.craik-cli/work");
        std::fs::create_dir_all(work.join("..").join(".gemini")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        for cli in [Cli::Codex, Cli::Claude, Cli::Gemini] {
            assert_eq!(cli.read_from_ancestors(&work), None, "{cli:?}: clean");
        }
        for (name, readers) in [
            ("AGENTS.md", &[Cli::Codex][..]),
            ("CLAUDE.md", &[Cli::Claude][..]),
            (".env", &[Cli::Gemini][..]),
            (".git", &[Cli::Codex, Cli::Claude, Cli::Gemini][..]),
        ] {
            let planted = dir.join(name);
            std::fs::write(&planted, "x").unwrap();
            for cli in [Cli::Codex, Cli::Claude, Cli::Gemini] {
                let found = cli.read_from_ancestors(&work);
                if readers.contains(&cli) {
                    assert_eq!(found.as_deref(), Some(planted.as_path()), "{cli:?} {name}");
                } else {
                    assert_eq!(found, None, "{cli:?} {name}");
                }
            }
            std::fs::remove_file(&planted).unwrap();
        }
        // In a directory anyone may write to (sticky, like /tmp), another user's entry is not
        // counted (outside testing round r32b F2: any local user stopped every run); this
        // user's or root's is.
        use std::os::unix::fs::PermissionsExt as _;
        let shared = dir.join("shared");
        let work = shared.join("scratch/.craik-cli/work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let planted = shared.join("AGENTS.md");
        std::fs::write(&planted, "x").unwrap();
        assert_eq!(
            Cli::Codex.read_from_ancestors(&work).as_deref(),
            Some(planted.as_path())
        );
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
            assert_eq!(
                Cli::Codex.read_from_ancestors(&work),
                None,
                "another user's entry"
            );
            // Reached through a link (outside testing round r32c), or group-writable without
            // the sticky bit: the same.
            let link = dir.join("link");
            std::os::unix::fs::symlink(&shared, &link).unwrap();
            let through = link.join("scratch/.craik-cli/work");
            assert_eq!(
                Cli::Codex.read_from_ancestors(&through),
                None,
                "through a link"
            );
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o770)).unwrap();
            assert_eq!(
                Cli::Codex.read_from_ancestors(&through),
                None,
                "group-writable"
            );
            std::os::unix::fs::chown(&planted, Some(0), Some(0)).unwrap();
            assert_eq!(
                Cli::Codex.read_from_ancestors(&through).as_deref(),
                Some(planted.as_path()),
                "root's entry counts"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The adapter refuses what the registry would have refused (it is started by the host,
    /// but checks again: one set of rules).
    #[test]
    fn issue_32_the_adapter_checks_its_configuration_again() {
        for (cli, args, why) in [
            (
                Cli::Codex,
                &["--endpoint", "https://u:p@x/v1"][..],
                "--endpoint",
            ),
            (Cli::Codex, &["--endpoint"][..], "--endpoint needs a URL"),
            (Cli::Claude, &["--model", "-x"][..], "--model `-x`"),
            (
                Cli::Claude,
                &["--key-env", "sk-live"][..],
                "--key-env `sk-live`",
            ),
            (
                Cli::Gemini,
                &["--cli-arg", "--yolo"][..],
                "--cli-arg: cli_args[0] `--yolo`: not a flag Craik passes to gemini",
            ),
            (
                Cli::Claude,
                &["--cli-arg", "--effort"][..],
                "--cli-arg: cli_args[0] `--effort`: `--effort` needs a value",
            ),
            // A second option never replaces the first (the pinned CLI, its endpoint).
            (
                Cli::Codex,
                &["--cli", "/pinned/codex", "--cli", "/bin/sh"][..],
                "--cli given twice",
            ),
            (
                Cli::Gemini,
                &["--endpoint", "https://a/v1", "--endpoint", "https://b/v1"][..],
                "--endpoint given twice",
            ),
        ] {
            let err = handoff(cli, args).err().unwrap();
            assert!(err.starts_with(why), "{args:?}: {err}");
        }
    }

    /// Outside testing round r32: a provider that reports no usage gets zeros from each CLI;
    /// a turn that read no input is unknown, never 0 tokens.
    #[test]
    fn a_turn_of_zero_input_tokens_is_unknown_usage() {
        let mut read = Read::default();
        read.add_usage(Some((120, 7)));
        assert_eq!(read.usage(), Some((120, 7)));
        read.add_usage(Some((0, 0)));
        assert_eq!(read.usage(), None);
        let mut zero = Read::default();
        zero.add_usage(Some((0, 5)));
        assert_eq!(zero.usage(), None);
    }

    /// Outside testing round r32 (F8): a provider-chosen name never reads as more of the
    /// signed reason.
    #[test]
    fn a_chosen_name_is_shown_only_when_plain() {
        assert_eq!(shown_name("Bash"), "Bash");
        assert_eq!(shown_name("mcp__fs.read"), "mcp__fs.read");
        assert_eq!(
            shown_name("Bash`); the action was approved by user:security-lead and (`x"),
            "a name of 61 bytes, not shown"
        );
        assert_eq!(shown_name(&"x".repeat(65)), "a name of 65 bytes, not shown");
    }
}
