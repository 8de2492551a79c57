//! The adapter side of `craik.channel/1` (docs/protocol.md), shared by the shipped adapters
//! through `#[path]` (each adapter still links `craik-contracts` only).
//!
//! One request at a time: a line in, zero or more `event` lines and one answer out. Lines
//! longer than the limit, lines that are not JSON, unknown methods and invalid params are
//! answered with structured errors and the adapter keeps serving; `shutdown` (or EOF on stdin)
//! ends it with exit status 0.

use std::io::{self, BufRead, Read, Write};

use craik_contracts::channel::{
    self, CancelNotification, ChannelError, ErrorResponse, EventKind, EventMethod,
    EventNotification, EventParams, InitializeRequest, InitializeResponse, InitializeResult,
    PROTOCOL_VERSION, ShutdownRequest, ShutdownResponse, StepOutcome, StepRequest, StepResponse,
    codes,
};
use craik_contracts::{Object, RunnerCapabilityMatrix, RunnerStepRequest, RunnerStepResult};
use serde::Serialize;

/// What a runner behind the channel implements.
pub(crate) trait Runner {
    /// The handshake answer (protocol version is filled in by [`serve`]).
    fn initialize(&mut self) -> Result<InitializeResult, ChannelError>;
    /// One step; `events` streams notifications while it runs.
    fn step(
        &mut self,
        request: RunnerStepRequest,
        events: &mut Events<'_>,
    ) -> Result<RunnerStepResult, ChannelError>;
}

/// Writes `event` notifications for the request in flight.
pub(crate) struct Events<'a> {
    out: &'a mut dyn Write,
    request: u64,
}

impl Events<'_> {
    fn emit(&mut self, params: EventParams) {
        let _ = write_line(
            self.out,
            &EventNotification {
                method: EventMethod::Name,
                params,
            },
        );
    }

    /// A piece of model text.
    pub(crate) fn text(&mut self, text: &str) {
        self.emit(EventParams {
            request: self.request,
            kind: EventKind::TextDelta,
            text: Some(text.to_owned()),
            name: None,
            arguments: None,
            level: None,
            message: None,
            model_step: None,
        });
    }

    /// A tool call the model asked for (a proposal; Craik decides).
    #[allow(dead_code, reason = "not every adapter streams tool calls")]
    pub(crate) fn tool_call(&mut self, name: &str, arguments: Object) {
        self.emit(EventParams {
            request: self.request,
            kind: EventKind::ToolCall,
            text: None,
            name: Some(name.to_owned()),
            arguments: Some(arguments),
            level: None,
            message: None,
            model_step: None,
        });
    }

    /// A diagnostic line.
    #[allow(dead_code, reason = "not every adapter logs")]
    pub(crate) fn log(&mut self, level: &str, message: &str) {
        self.emit(EventParams {
            request: self.request,
            kind: EventKind::Log,
            text: None,
            name: None,
            arguments: None,
            level: Some(level.to_owned()),
            message: Some(message.to_owned()),
            model_step: None,
        });
    }

    /// One model exchange and its usage (the host signs a `model.step` receipt for it).
    #[allow(
        dead_code,
        reason = "only adapters that call a model report model steps"
    )]
    pub(crate) fn model_step(&mut self, report: craik_contracts::channel::ModelStepReport) {
        self.emit(EventParams {
            request: self.request,
            kind: EventKind::ModelStep,
            text: None,
            name: None,
            arguments: None,
            level: None,
            message: None,
            model_step: Some(report),
        });
    }
}

/// An adapter's own copy of its shipped matrix (the host checks it against its own).
pub(crate) fn embedded_matrix(text: &str) -> Result<RunnerCapabilityMatrix, String> {
    craik_contracts::decode_single(text.as_bytes())
        .map_err(|problems| format!("the embedded matrix is invalid: {}", problems.join("; ")))
}

/// A scenario file for fixture mode.
#[allow(dead_code, reason = "the provider adapter has no fixture mode")]
pub(crate) fn load_scenario(path: &str) -> Result<craik_contracts::FixtureScenario, String> {
    use craik_contracts::FixtureScenario;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    craik_contracts::decode_single::<FixtureScenario>(&bytes)
        .map_err(|problems| format!("{path}: {}", problems.join("; ")))
}

/// The `initialize` answer of an adapter whose identity is `matrix` (the protocol version is
/// filled in by [`serve`]).
pub(crate) fn handshake(matrix: &RunnerCapabilityMatrix) -> InitializeResult {
    InitializeResult {
        protocol_version: String::new(),
        runner: matrix.runner.clone(),
        matrix: matrix.clone(),
    }
}

/// A structured error.
pub(crate) fn error(code: i64, message: impl Into<String>) -> ChannelError {
    ChannelError {
        code,
        message: message.into(),
        data: Object::new(),
    }
}

fn write_line<T: Serialize>(out: &mut dyn Write, message: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

fn answer_error(out: &mut dyn Write, id: Option<u64>, error: ChannelError) -> io::Result<()> {
    write_line(out, &ErrorResponse { id, error })
}

fn strict<T: serde::de::DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(line);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        format!("{path}: {}", e.into_inner())
    })
}

/// Reads one line of at most `max` bytes. `Ok(None)` at EOF; `Err(len)` for a longer line
/// (which is consumed up to its newline).
fn read_line(input: &mut dyn BufRead, max: usize) -> io::Result<Option<Result<Vec<u8>, usize>>> {
    let mut line = Vec::new();
    let n = (&mut *input)
        .take(u64::try_from(max).unwrap_or(u64::MAX) + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(Some(Ok(line)));
    }
    if line.len() <= max {
        return Ok(Some(Ok(line))); // last line without a newline
    }
    // Too long: skip to the end of the line.
    let mut skipped = line.len();
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                skipped += i;
                input.consume(i + 1);
                break;
            }
            None => {
                let len = buf.len();
                skipped += len;
                input.consume(len);
            }
        }
    }
    Ok(Some(Err(skipped)))
}

/// Serves the channel on stdin/stdout until `shutdown` or EOF.
pub(crate) fn serve(runner: &mut dyn Runner) -> std::process::ExitCode {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match serve_on(runner, &mut input, &mut out) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}

/// [`serve`] over any reader and writer.
pub(crate) fn serve_on(
    runner: &mut dyn Runner,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut max = channel::DEFAULT_MAX_LINE_BYTES;
    let mut initialized = false;
    loop {
        let line = match read_line(input, max)? {
            None => return Ok(()),
            Some(Err(len)) => {
                answer_error(
                    out,
                    None,
                    error(
                        codes::INVALID_REQUEST,
                        format!("line of {len} bytes is longer than {max}"),
                    ),
                )?;
                continue;
            }
            Some(Ok(line)) => line,
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: serde_json::Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                answer_error(
                    out,
                    None,
                    error(codes::PARSE_ERROR, format!("not JSON: {e}")),
                )?;
                continue;
            }
        };
        let id = value.get("id").and_then(serde_json::Value::as_u64);
        let Some(method) = value.get("method").and_then(serde_json::Value::as_str) else {
            answer_error(out, id, error(codes::INVALID_REQUEST, "no `method`"))?;
            continue;
        };
        match method {
            "initialize" => match strict::<InitializeRequest>(&line) {
                Err(why) => answer_error(out, id, error(codes::INVALID_PARAMS, why))?,
                Ok(request) if request.params.protocol_version != PROTOCOL_VERSION => answer_error(
                    out,
                    Some(request.id),
                    error(
                        codes::INVALID_REQUEST,
                        format!(
                            "protocol `{}` is not supported; this adapter speaks `{PROTOCOL_VERSION}`",
                            request.params.protocol_version
                        ),
                    ),
                )?,
                Ok(request) => {
                    max = usize::try_from(request.params.limits.max_line_bytes)
                        .unwrap_or(max)
                        .max(1024);
                    match runner.initialize() {
                        Ok(mut result) => {
                            result.protocol_version = PROTOCOL_VERSION.into();
                            initialized = true;
                            write_line(
                                out,
                                &InitializeResponse {
                                    id: request.id,
                                    result,
                                },
                            )?;
                        }
                        Err(e) => answer_error(out, Some(request.id), e)?,
                    }
                }
            },
            "step" => match strict::<StepRequest>(&line) {
                Err(why) => answer_error(out, id, error(codes::INVALID_PARAMS, why))?,
                Ok(request) if !initialized => answer_error(
                    out,
                    Some(request.id),
                    error(codes::INVALID_REQUEST, "`initialize` first"),
                )?,
                Ok(request) => {
                    let mut events = Events {
                        out: &mut *out,
                        request: request.id,
                    };
                    match runner.step(request.params.request, &mut events) {
                        Ok(result) => write_line(
                            out,
                            &StepResponse {
                                id: request.id,
                                result: StepOutcome { result },
                            },
                        )?,
                        Err(e) => answer_error(out, Some(request.id), e)?,
                    }
                }
            },
            "shutdown" => match strict::<ShutdownRequest>(&line) {
                Err(why) => answer_error(out, id, error(codes::INVALID_PARAMS, why))?,
                Ok(request) => {
                    write_line(
                        out,
                        &ShutdownResponse {
                            id: request.id,
                            result: channel::Empty {},
                        },
                    )?;
                    return Ok(());
                }
            },
            // Steps run to completion before the next line is read, so a `cancel` can only
            // name a request that is already answered: nothing to do.
            "cancel" => {
                if strict::<CancelNotification>(&line).is_err() {
                    answer_error(
                        out,
                        None,
                        error(codes::INVALID_PARAMS, "malformed `cancel`"),
                    )?;
                }
            }
            other => answer_error(
                out,
                id,
                error(
                    codes::METHOD_NOT_FOUND,
                    format!(
                        "unknown method `{}`",
                        other.chars().take(64).collect::<String>()
                    ),
                ),
            )?,
        }
    }
}
