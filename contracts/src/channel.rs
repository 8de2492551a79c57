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
