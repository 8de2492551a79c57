//! The adapter channel (`craik.channel/1`): the messages Craik's host and a runner adapter
//! exchange, one JSON object per line over the adapter's stdin/stdout. `docs/protocol.md` is
//! the specification; these types are its machine-readable form, and
//! `contracts/schema/channel.schema.json` is generated from them.
//!
//! Every message rejects unknown fields and duplicate keys, like every contract.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::runner::{RunnerCapabilityMatrix, RunnerMetadata, RunnerStepRequest, RunnerStepResult};
use crate::value::Object;

/// The protocol this build speaks.
pub const PROTOCOL_VERSION: &str = "craik.channel/1";
/// Default largest line, in bytes, either way (newline excluded).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1024 * 1024;

/// JSON-RPC-style error codes.
pub mod codes {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The line is JSON but not a valid message (or too large).
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The runner could not produce a result.
    pub const RUNNER_FAILED: i64 = 1;
    /// The request was cancelled.
    pub const CANCELLED: i64 = 2;
    /// The request needs something the adapter is not configured for (e.g. a live CLI that
    /// is not installed, a missing API key).
    pub const UNAVAILABLE: i64 = 3;
}

macro_rules! method {
    ($name:ident, $wire:literal) => {
        #[doc = concat!("The method name `", $wire, "`.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            #[serde(rename = $wire)]
            Name,
        }
    };
}

method!(InitializeMethod, "initialize");
method!(StepMethod, "step");
method!(ShutdownMethod, "shutdown");
method!(CancelMethod, "cancel");
method!(EventMethod, "event");

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostInfo {
    pub name: String,
    pub version: String,
}

/// The limits the host enforces; an adapter should stay within them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest line either way, in bytes, newline excluded.
    pub max_line_bytes: u64,
    /// Time the host waits for the `initialize` answer, in milliseconds.
    pub initialize_timeout_ms: u64,
    /// Time the host waits for a `step` answer, in milliseconds.
    pub step_timeout_ms: u64,
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeParams {
    pub protocol_version: String,
    pub host: HostInfo,
    pub limits: Limits,
}

/// Host → adapter: the handshake; the first message, exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeRequest {
    pub id: u64,
    pub method: InitializeMethod,
    pub params: InitializeParams,
}

/// `initialize` result: who the adapter is and what its runner can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeResult {
    pub protocol_version: String,
    pub runner: RunnerMetadata,
    pub matrix: RunnerCapabilityMatrix,
}

/// Adapter → host: the answer to `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeResponse {
    pub id: u64,
    pub result: InitializeResult,
}

/// `step` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepParams {
    pub request: RunnerStepRequest,
}

/// Host → adapter: one governed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    pub id: u64,
    pub method: StepMethod,
    pub params: StepParams,
}

/// `step` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepOutcome {
    pub result: RunnerStepResult,
}

/// Adapter → host: the answer to `step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepResponse {
    pub id: u64,
    pub result: StepOutcome,
}

/// No fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Host → adapter: finish and exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownRequest {
    pub id: u64,
    pub method: ShutdownMethod,
    #[serde(default)]
    pub params: Empty,
}

/// Adapter → host: the answer to `shutdown`; the adapter exits after writing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownResponse {
    pub id: u64,
    pub result: Empty,
}

/// `cancel` params: the request to abandon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub id: u64,
}

/// Host → adapter notification (no answer): abandon a request. The adapter answers the
/// cancelled request with error `2` if it is still running, and ignores unknown ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelNotification {
    pub method: CancelMethod,
    pub params: CancelParams,
}

/// A streamed event's kind, normalised across backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Model text as it arrives (`text`).
    TextDelta,
    /// The model asked for a tool (`name`, `arguments`); Craik decides, never the adapter.
    ToolCall,
    /// A diagnostic line (`level`, `message`).
    Log,
    /// One model exchange and what it cost (`model_step`): sent during the step, before its
    /// answer; the host signs one `model.step` receipt per report and counts its tokens
    /// against the run's budget.
    ModelStep,
}

/// Most tokens (input, output or total) one model step may report.
pub const MAX_MODEL_STEP_TOKENS: u64 = 10_000_000;
/// Longest latency one model step may report, in milliseconds (one day).
pub const MAX_MODEL_STEP_LATENCY_MS: u64 = 86_400_000;
/// Most retries one model step may report.
pub const MAX_MODEL_STEP_RETRIES: u32 = 100;
/// Most model steps one runner step may report.
pub const MAX_MODEL_STEPS_PER_STEP: usize = 64;
/// Longest `provider`, `model`, `endpoint_host` or `response_id`, in bytes.
pub const MAX_MODEL_STEP_TEXT: usize = 200;

/// How one model exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelStepOutcome {
    /// The answer the step used.
    Ok,
    /// An error answer (HTTP 429, 5xx, ...) the adapter retried.
    Retried,
    /// An error answer the step ended on.
    Failed,
    /// The exchange was cut off before its answer was read (a timeout, the step's or the
    /// connection's): the provider may have received, and billed, the request.
    Cut,
}

impl ModelStepOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Retried => "retried",
            Self::Failed => "failed",
            Self::Cut => "cut",
        }
    }
}

/// A `model_step` event's report: one exchange with a model provider, as the adapter saw it.
/// Adapter-reported, never trusted beyond its shape and bounds ([`ModelStepReport::problem`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelStepReport {
    /// The provider family (`openai-responses`, `anthropic-messages`, `chat-completions`,
    /// `fixture`, ...): lowercase letters, digits, `-`, `_`, `.`.
    pub provider: String,
    pub model: String,
    /// The endpoint's host (and port): never a scheme, path, query or credentials.
    pub endpoint_host: String,
    /// `sha256:` + 64 lowercase hex digits of the (redacted) request body sent.
    pub request_sha256: String,
    /// The provider's response id, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The provider's count of input tokens; `null` when it gave none that can be read
    /// exactly (missing, negative, fractional, a string, or the exchange was cut): unknown is
    /// never zero.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// The provider's count of output tokens; `null` when unknown, as `input_tokens`.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// `input_tokens + output_tokens`, exactly; `null` exactly when they are.
    #[serde(default)]
    pub total_tokens: Option<u64>,
    pub latency_ms: u64,
    /// Attempts before this one in the same step (0 for the first).
    pub retries: u32,
    pub streamed: bool,
    pub outcome: ModelStepOutcome,
}

/// A model step's token counts, when the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCounts {
    pub input: u64,
    pub output: u64,
    pub total: u64,
}

impl ModelStepReport {
    /// The counts, when all three are known (`None`: usage unknown). A report with some but
    /// not all of them is refused by [`ModelStepReport::problem`].
    pub fn counts(&self) -> Option<TokenCounts> {
        Some(TokenCounts {
            input: self.input_tokens?,
            output: self.output_tokens?,
            total: self.total_tokens?,
        })
    }

    /// What is wrong with the report, if anything: a string out of bounds or of the wrong
    /// form, a total that is not the sum, a count above its ceiling.
    pub fn problem(&self) -> Option<String> {
        let text = |field: &str, value: &str, ok: &dyn Fn(char) -> bool| {
            if value.is_empty() || value.len() > MAX_MODEL_STEP_TEXT {
                Some(format!(
                    "{field}: {} bytes, expected 1 to {MAX_MODEL_STEP_TEXT}",
                    value.len()
                ))
            } else if !value.chars().all(ok) {
                Some(format!(
                    "{field} `{}` has a character outside the allowed set",
                    crate::one_line(value)
                ))
            } else {
                None
            }
        };
        let name = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
        let printable = |c: char| c.is_ascii_graphic();
        let host = |c: char| c.is_ascii_alphanumeric() || "-.:[]".contains(c);
        let hex = self
            .request_sha256
            .strip_prefix("sha256:")
            .is_some_and(|h| {
                h.len() == 64
                    && h.chars()
                        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            });
        text("provider", &self.provider, &name)
            .or_else(|| text("model", &self.model, &printable))
            .or_else(|| text("endpoint_host", &self.endpoint_host, &host))
            .or_else(|| {
                self.response_id
                    .as_deref()
                    .and_then(|r| text("response_id", r, &printable))
            })
            .or_else(|| {
                (!hex).then(|| {
                    format!(
                        "request_sha256 `{}` is not `sha256:` and 64 lowercase hex digits",
                        crate::Truncated(&crate::one_line(&self.request_sha256))
                    )
                })
            })
            .or_else(|| {
                let known = [self.input_tokens, self.output_tokens, self.total_tokens]
                    .iter()
                    .filter(|n| n.is_some())
                    .count();
                (known != 0 && known != 3).then(|| {
                    "input_tokens, output_tokens and total_tokens are all known or all `null` (unknown)".to_owned()
                })
            })
            .or_else(|| {
                let c = self.counts()?;
                [
                    ("input_tokens", c.input),
                    ("output_tokens", c.output),
                    ("total_tokens", c.total),
                ]
                .into_iter()
                .find(|(_, n)| *n > MAX_MODEL_STEP_TOKENS)
                .map(|(field, n)| {
                    format!(
                        "{field} {n} is above the ceiling of {MAX_MODEL_STEP_TOKENS} per model step"
                    )
                })
            })
            .or_else(|| {
                let c = self.counts()?;
                (c.input.checked_add(c.output) != Some(c.total)).then(|| {
                    format!(
                        "total_tokens {} is not input_tokens {} + output_tokens {}",
                        c.total, c.input, c.output
                    )
                })
            })
            .or_else(|| {
                (self.latency_ms > MAX_MODEL_STEP_LATENCY_MS).then(|| {
                    format!(
                        "latency_ms {} is above the ceiling of {MAX_MODEL_STEP_LATENCY_MS}",
                        self.latency_ms
                    )
                })
            })
            .or_else(|| {
                (self.retries > MAX_MODEL_STEP_RETRIES).then(|| {
                    format!(
                        "retries {} is above the ceiling of {MAX_MODEL_STEP_RETRIES}",
                        self.retries
                    )
                })
            })
    }
}

/// `event` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    /// The `step` request this belongs to.
    pub request: u64,
    pub kind: EventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Object>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `model_step` events only: the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_step: Option<ModelStepReport>,
}

/// Adapter → host notification (no answer): a streamed event during a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventNotification {
    pub method: EventMethod,
    pub params: EventParams,
}

/// A structured error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Object::is_empty")]
    pub data: Object,
}

/// Either side: the answer to a request that failed. `id` is `null` when the request could
/// not be read (parse error, line too large).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorResponse {
    pub id: Option<u64>,
    pub error: ChannelError,
}

/// Every message of the channel, for the generated schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ChannelMessage {
    InitializeRequest(InitializeRequest),
    StepRequest(StepRequest),
    ShutdownRequest(ShutdownRequest),
    CancelNotification(CancelNotification),
    InitializeResponse(InitializeResponse),
    StepResponse(Box<StepResponse>),
    ShutdownResponse(ShutdownResponse),
    EventNotification(EventNotification),
    ErrorResponse(ErrorResponse),
}

/// The channel's JSON Schema (draft 2020-12), as committed in `contracts/schema/`.
pub fn channel_schema_text() -> String {
    crate::schema_text(&crate::schema_document::<ChannelMessage>(
        &format!("urn:craik:channel:{PROTOCOL_VERSION}"),
        "craik.channel/1 message",
        "One line of the Craik adapter channel (docs/protocol.md), either way.",
    ))
}
