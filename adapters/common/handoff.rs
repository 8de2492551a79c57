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

    /// The arguments: never the prompt, which goes to the CLI's standard input (issue 30: an
    /// argument is readable by every local user in `/proc/PID/cmdline`, and a prompt over
    /// 128 KiB failed to start with "Argument list too long"). Each CLI is told to propose,
    /// not act (issue 32), with the flags its own `--help` documents (checked against
    /// `@openai/codex` 0.169.0, `@anthropic-ai/claude-code` 2.1.328, `@google/gemini-cli`
    /// 0.61.0): codex's read-only sandbox, no session files, no user config or rules, outside
    /// a git repository; claude with no built-in tools, plan mode, no MCP servers but the
    /// (empty) configured set, no session files; gemini in read-only plan mode with JSON events.
    /// Whatever the CLI still does on its own ends the step as a runner violation ([`acted`]).
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
                "-",
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
        // A private, writable temporary directory for the CLI (issue 32: claude could not
        // create its own under a read-only /tmp): under the adapter's HOME, which the host
        // makes new and empty for each run.
        let mut command = Command::new(&program);
        if let Some(home) = std::env::var_os("HOME") {
            let tmp = std::path::Path::new(&home).join(".craik-cli-tmp");
            if std::fs::create_dir_all(&tmp).is_ok() {
                command.env("TMPDIR", &tmp);
            }
        }
        let started = std::time::Instant::now();
        let mut child = command
            .args(self.cli.args())
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
        let tail = std::thread::spawn(move || stderr_tail(stderr));
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| error(codes::RUNNER_FAILED, "no stdout"))?;
        let mut read = Read::default();
        let mut acted = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                events.log("warn", "the CLI wrote a line that is not JSON");
                continue;
            };
            if let Err(what) = map_event(self.cli, &value, events, &mut read) {
                acted = Some(what);
                break;
            }
        }
        if acted.is_some() {
            let _ = child.kill();
        }
        let status = child
            .wait()
            .map_err(|e| error(codes::RUNNER_FAILED, format!("waiting for the CLI: {e}")))?;
        let stderr_tail = tail.join().unwrap_or_default();
        // Usage first: what the CLI spent is reported whatever happens next (unknown when it
        // said nothing; never zero).
        events.model_step(self.report(
            request,
            &read,
            started.elapsed(),
            acted.is_none() && status.success(),
        ));
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
        Ok(crate::answer::result_from_text(
            request,
            &read.text,
            serde_json::Map::new(),
        ))
    }

    /// The model-step report of one CLI invocation: the tokens its own events reported
    /// (`None`, unknown, when it reported none that can be read exactly), the model it named
    /// (else `unknown`), and the sha256 of the prompt handed to it (the request bodies the CLI
    /// builds are its own; the endpoint is its configuration's, `unknown` here).
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
            model: read
                .model
                .clone()
                .filter(|m| {
                    !m.is_empty() && m.len() <= 200 && m.chars().all(|c| c.is_ascii_graphic())
                })
                .unwrap_or_else(|| "unknown".into()),
            endpoint_host: "unknown".into(),
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
        let Some((i, o)) = turn else {
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
                    other => Err(format!(
                        "a codex `{}` item",
                        craik_contracts::one_line(other)
                    )),
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
            other => Err(format!(
                "a codex `{}` event",
                craik_contracts::one_line(other)
            )),
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
                                craik_contracts::one_line(other),
                                if name.is_empty() {
                                    String::new()
                                } else {
                                    format!(" (`{}`)", craik_contracts::one_line(&name))
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
            other => Err(format!(
                "a claude `{}` event",
                craik_contracts::one_line(other)
            )),
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
            other => Err(format!(
                "a gemini `{}` event",
                craik_contracts::one_line(other)
            )),
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
