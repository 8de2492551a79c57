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
    FixtureScenario, Object, RunnerCapabilityMatrix, RunnerStepRequest, RunnerStepResult,
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

    /// The arguments: never the prompt, which goes to the CLI's standard input (issue 30: an
    /// argument is readable by every local user in `/proc/PID/cmdline`, and a prompt over
    /// 128 KiB failed to start with "Argument list too long").
    fn args(self) -> Vec<String> {
        match self {
            Self::Codex => vec!["exec".into(), "--json".into(), "-".into()],
            Self::Claude => vec![
                "-p".into(),
                "--output-format".into(),
                "stream-json".into(),
                "--verbose".into(),
            ],
            Self::Gemini => Vec::new(),
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
}

impl Handoff {
    /// From the command line: `[--fixture SCENARIO.json] [--cli PATH]`.
    pub(crate) fn from_args(cli: Cli, matrix_json: &str, args: &[String]) -> Result<Self, String> {
        let matrix = crate::serve::embedded_matrix(matrix_json)?;
        let mut scenario = None;
        let mut cli_path = None;
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--fixture" => {
                    scenario = Some(crate::serve::load_scenario(
                        it.next().ok_or("--fixture needs a path")?,
                    )?);
                }
                "--cli" => cli_path = Some(it.next().ok_or("--cli needs a path")?.clone()),
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(Self {
            cli,
            matrix,
            scenario,
            cli_path,
        })
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
        let mut child = Command::new(&program)
            .args(self.cli.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| error(codes::RUNNER_FAILED, "no stdout"))?;
        let mut final_text = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match self.cli {
                Cli::Gemini => {
                    events.text(&format!("{line}\n"));
                    final_text.push_str(&line);
                    final_text.push('\n');
                }
                Cli::Codex | Cli::Claude => {
                    let Ok(value) = serde_json::from_str::<Value>(&line) else {
                        events.log("warn", "the CLI wrote a line that is not JSON");
                        continue;
                    };
                    map_event(self.cli, &value, events, &mut final_text);
                }
            }
        }
        let status = child
            .wait()
            .map_err(|e| error(codes::RUNNER_FAILED, format!("waiting for the CLI: {e}")))?;
        match writer.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(error(
                    codes::RUNNER_FAILED,
                    format!(
                        "`{program}` did not read the whole prompt from its standard input: {e}"
                    ),
                ));
            }
            Err(_) => return Err(error(codes::RUNNER_FAILED, "the prompt writer failed")),
        }
        if !status.success() {
            return Err(error(
                codes::RUNNER_FAILED,
                format!("`{program}` exited with {status}"),
            ));
        }
        Ok(crate::answer::result_from_text(
            request,
            &final_text,
            serde_json::Map::new(),
        ))
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

/// Maps one JSON event of a CLI into channel events; agent text accumulates in `text`.
fn map_event(cli: Cli, value: &Value, events: &mut Events<'_>, text: &mut String) {
    match cli {
        Cli::Codex => {
            // Current `codex exec --json`: {"type":"item.completed","item":{"type":"agent_message","text":...}};
            // older: {"msg":{"type":"agent_message","message":...}}.
            let item = value.get("item");
            let kind = item.and_then(|i| i.get("type")).and_then(Value::as_str);
            let message = match kind {
                Some("agent_message") => item.and_then(|i| i.get("text")).and_then(Value::as_str),
                _ => value
                    .get("msg")
                    .filter(|m| m.get("type").and_then(Value::as_str) == Some("agent_message"))
                    .and_then(|m| m.get("message"))
                    .and_then(Value::as_str),
            };
            if let Some(m) = message {
                events.text(m);
                text.clear();
                text.push_str(m);
            }
            if kind == Some("command_execution") || kind == Some("file_change") {
                events.log(
                    "warn",
                    "the CLI reported acting on its own; Craik only executes what it decides",
                );
            }
        }
        Cli::Claude => match value.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let blocks = value
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array);
                for block in blocks.into_iter().flatten() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(t) = block.get("text").and_then(Value::as_str) {
                                events.text(t);
                                text.push_str(t);
                            }
                        }
                        Some("tool_use") => {
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("?");
                            let args = block
                                .get("input")
                                .and_then(Value::as_object)
                                .cloned()
                                .map(Object)
                                .unwrap_or_default();
                            events.tool_call(name, args);
                        }
                        _ => {}
                    }
                }
            }
            Some("result") => {
                if let Some(r) = value.get("result").and_then(Value::as_str) {
                    text.clear();
                    text.push_str(r);
                }
            }
            _ => {}
        },
        Cli::Gemini => {}
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
