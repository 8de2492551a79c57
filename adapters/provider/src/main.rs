//! `craik-adapter-provider --api openai-responses|anthropic-messages|chat-completions
//! --model MODEL [--base-url URL] [--key-env NAME] [--stream] [--max-retries N]
//! [--retry-base-ms MS]`: a model API as a runner over craik.channel/1.
//!
//! Each step sends the host's compiled prompt (the request's `input_prompt`, verbatim) with one tool, `propose_action` (its parameters are a
//! Craik proposed action), and asks for a final JSON answer (`status`, `summary`, `next`,
//! `memory_proposals`). The response — plain or streamed (SSE) — is normalised into text,
//! tool calls, structured output and usage: text deltas and tool calls are streamed to Craik as
//! events, tool calls become `proposed_actions`, usage lands in `observed_output.usage`.
//! Every HTTP exchange that got a response (a retried error answer included) is reported as a
//! `model_step` event: provider family, model, endpoint host, sha256 of the request body,
//! response id, usage, latency, retries, streamed, outcome (docs/protocol.md).
//! Requests are retried with exponential backoff (honouring `retry-after`) on 408, 409, 429
//! and 5xx, and on Anthropic's 529. The API key is read only from the variable `--key-env`
//! names, which the host passes through (runners/provider.json); without it a step is a
//! structured `unavailable` error: no live call happens by default.

#[path = "../../common/answer.rs"]
mod answer;
#[path = "../../common/serve.rs"]
mod serve;

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use craik_contracts::channel::{
    ChannelError, InitializeResult, MAX_MODEL_STEP_LATENCY_MS, MAX_MODEL_STEP_RETRIES,
    MAX_MODEL_STEP_TEXT, ModelStepOutcome, ModelStepReport, codes,
};
use craik_contracts::{Object, RunnerCapabilityMatrix, RunnerStepRequest, RunnerStepResult};
use serde_json::{Map, Value, json};

use serve::{Events, Runner, error};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAiResponses,
    AnthropicMessages,
    ChatCompletions,
}

impl Api {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "openai-responses" => Ok(Self::OpenAiResponses),
            "anthropic-messages" => Ok(Self::AnthropicMessages),
            "chat-completions" => Ok(Self::ChatCompletions),
            other => Err(format!(
                "--api `{other}`: expected openai-responses, anthropic-messages or chat-completions"
            )),
        }
    }

    fn default_base(self) -> &'static str {
        match self {
            Self::OpenAiResponses | Self::ChatCompletions => "https://api.openai.com",
            Self::AnthropicMessages => "https://api.anthropic.com",
        }
    }

    fn default_key_env(self) -> &'static str {
        match self {
            Self::OpenAiResponses | Self::ChatCompletions => "OPENAI_API_KEY",
            Self::AnthropicMessages => "ANTHROPIC_API_KEY",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::OpenAiResponses => "/v1/responses",
            Self::AnthropicMessages => "/v1/messages",
            Self::ChatCompletions => "/v1/chat/completions",
        }
    }

    /// The provider family, as `model_step` reports name it.
    fn name(self) -> &'static str {
        match self {
            Self::OpenAiResponses => "openai-responses",
            Self::AnthropicMessages => "anthropic-messages",
            Self::ChatCompletions => "chat-completions",
        }
    }

    fn retryable(self, status: u16) -> bool {
        matches!(status, 408 | 409 | 429 | 500..=599)
            || (self == Self::AnthropicMessages && status == 529)
    }
}

struct Config {
    api: Api,
    model: String,
    base_url: String,
    key_env: String,
    stream: bool,
    max_retries: u32,
    retry_base: Duration,
}

fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut api = None;
    let mut model = None;
    let mut base_url = None;
    let mut key_env = None;
    let mut stream = false;
    let mut max_retries = 3;
    let mut retry_base = Duration::from_millis(500);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--api" => api = Some(Api::parse(&value()?)?),
            "--model" => model = Some(value()?),
            "--base-url" => base_url = Some(value()?),
            "--key-env" => key_env = Some(value()?),
            "--stream" => stream = true,
            "--max-retries" => {
                max_retries = value()?.parse().map_err(|_| "--max-retries: a number")?;
            }
            "--retry-base-ms" => {
                retry_base = Duration::from_millis(
                    value()?.parse().map_err(|_| "--retry-base-ms: a number")?,
                );
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let api = api.ok_or("--api is required")?;
    Ok(Config {
        api,
        model: model.ok_or("--model is required")?,
        base_url: base_url
            .unwrap_or_else(|| api.default_base().to_owned())
            .trim_end_matches('/')
            .to_owned(),
        key_env: key_env.unwrap_or_else(|| api.default_key_env().to_owned()),
        stream,
        max_retries,
        retry_base,
    })
}

/// The tool every API is offered: a Craik proposed action.
fn action_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "action_<short name>"},
            "capability": {"type": "string", "description": "e.g. repo.read, repo.write.docs, shell.test"},
            "operation": {"type": "string", "enum": ["read", "write", "patch", "execute"]},
            "target": {"type": "string", "description": "workspace-relative path"},
            "content": {"type": "string", "description": "write: the whole new content"},
            "edits": {"type": "array", "items": {"type": "object", "properties": {"old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}},
            "argv": {"type": "array", "items": {"type": "string"}, "description": "execute: the command, no shell"},
            "reason": {"type": "string"}
        },
        "required": ["id", "capability", "operation"]
    })
}

const TOOL_DESCRIPTION: &str = "Propose one side effect. You do not perform it: Craik decides it against policy and, if allowed, performs it and reports the outcome in the next observe step.";

/// The structured final answer.
fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["completed", "partial", "blocked", "failed"]},
            "summary": {"type": "string"},
            "next": {"type": "string", "enum": ["continue", "stop"]},
            "memory_proposals": {"type": "array"}
        },
        "required": ["status", "summary"]
    })
}

/// The API's system / instructions slot: only how this interface works (the tool, the final
/// JSON object). Everything the model is told about the task, policy and context is the host's
/// compiled prompt, handed off verbatim as the user message.
fn system_prompt(request: &RunnerStepRequest) -> String {
    format!(
        "You are a runner governed by Craik. Phase: {}. The user message is Craik's compiled prompt for this step; follow it. Use the propose_action tool for side effects (act phase only). Finish with one JSON object matching: {}",
        request.phase.as_str(),
        answer_schema()
    )
}

fn user_prompt(request: &RunnerStepRequest) -> String {
    request.input_prompt.clone()
}

fn payload(config: &Config, request: &RunnerStepRequest) -> Value {
    let mut body = match config.api {
        Api::OpenAiResponses => json!({
            "model": config.model,
            "instructions": system_prompt(request),
            "input": user_prompt(request),
            "tools": [{"type": "function", "name": "propose_action", "description": TOOL_DESCRIPTION, "parameters": action_schema(), "strict": false}],
            "text": {"format": {"type": "json_schema", "name": "craik_step", "schema": answer_schema(), "strict": false}},
            "stream": config.stream,
        }),
        Api::AnthropicMessages => json!({
            "model": config.model,
            "max_tokens": 4096,
            "system": system_prompt(request),
            "messages": [{"role": "user", "content": user_prompt(request)}],
            "tools": [{"name": "propose_action", "description": TOOL_DESCRIPTION, "input_schema": action_schema()}],
            "stream": config.stream,
        }),
        Api::ChatCompletions => json!({
            "model": config.model,
            "messages": [
                {"role": "system", "content": system_prompt(request)},
                {"role": "user", "content": user_prompt(request)}
            ],
            "tools": [{"type": "function", "function": {"name": "propose_action", "description": TOOL_DESCRIPTION, "parameters": action_schema()}}],
            "stream": config.stream,
        }),
    };
    // A chat-completions stream carries usage only when asked (a last chunk with `usage`);
    // without it every streamed step's usage would be unknown.
    if config.stream
        && config.api == Api::ChatCompletions
        && let Some(o) = body.as_object_mut()
    {
        o.insert("stream_options".into(), json!({"include_usage": true}));
    }
    body
}

/// What a model answered, normalised across APIs.
#[derive(Debug, Default)]
struct Normalised {
    text: String,
    tool_calls: Vec<(String, Map<String, Value>)>,
    /// `None`: the provider gave no exact count.
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    /// The provider's id for the response, when it gave one.
    response_id: Option<String>,
}

fn args_object(v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m.clone(),
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default(),
        _ => Map::new(),
    }
}

/// A tool call's `name` and its arguments (an object, or a JSON string of one) under `args`.
fn tool_call(v: &Value, args: &str) -> (String, Map<String, Value>) {
    (
        v.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        args_object(v.get(args).unwrap_or(&Value::Null)),
    )
}

/// The count at `path`, when it is there as a non-negative integer: anything else (absent,
/// negative, fractional, a string) is unknown, never 0 (issue 30).
fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_u64)
}

/// The input tokens of an Anthropic Messages `usage` object: `input_tokens` counts only what
/// came after the last cache breakpoint, so the tokens written to and read from the cache are
/// added (each billed; outside testing round 12: 900 000 cached tokens a call were receipted as
/// 2). Absent or `null` cache fields mean no caching (the API's documented meaning): 0. A
/// present field that is not a non-negative integer makes the count unknown, never 0.
fn anthropic_input(usage: &Value) -> Option<u64> {
    let mut total = usage.get("input_tokens").and_then(Value::as_u64)?;
    for key in ["cache_creation_input_tokens", "cache_read_input_tokens"] {
        match usage.get(key) {
            None | Some(Value::Null) => {}
            Some(v) => total = total.checked_add(v.as_u64()?)?,
        }
    }
    Some(total)
}

/// A complete (non-streamed) response body.
fn parse_body(api: Api, body: &Value) -> Normalised {
    let mut n = Normalised {
        response_id: body.get("id").and_then(Value::as_str).map(str::to_owned),
        ..Normalised::default()
    };
    match api {
        Api::OpenAiResponses => {
            for item in body
                .get("output")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match item.get("type").and_then(Value::as_str) {
                    Some("message") => {
                        for c in item
                            .get("content")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if let Some(t) = c.get("text").and_then(Value::as_str) {
                                n.text.push_str(t);
                            }
                        }
                    }
                    Some("function_call") => n.tool_calls.push(tool_call(item, "arguments")),
                    _ => {}
                }
            }
            n.input_tokens = u64_at(body, &["usage", "input_tokens"]);
            n.output_tokens = u64_at(body, &["usage", "output_tokens"]);
            n.stop_reason = body
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        Api::AnthropicMessages => {
            for c in body
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match c.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        n.text
                            .push_str(c.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    Some("tool_use") => n.tool_calls.push(tool_call(c, "input")),
                    _ => {}
                }
            }
            n.input_tokens = body.get("usage").and_then(anthropic_input);
            n.output_tokens = u64_at(body, &["usage", "output_tokens"]);
            n.stop_reason = body
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        Api::ChatCompletions => {
            let choice = body.get("choices").and_then(|c| c.get(0));
            let message = choice.and_then(|c| c.get("message"));
            if let Some(t) = message
                .and_then(|m| m.get("content"))
                .and_then(Value::as_str)
            {
                n.text.push_str(t);
            }
            for call in message
                .and_then(|m| m.get("tool_calls"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = call.get("function").unwrap_or(&Value::Null);
                n.tool_calls.push(tool_call(f, "arguments"));
            }
            n.input_tokens = u64_at(body, &["usage", "prompt_tokens"]);
            n.output_tokens = u64_at(body, &["usage", "completion_tokens"]);
            n.stop_reason = choice
                .and_then(|c| c.get("finish_reason"))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
    }
    n
}

/// The longest line of a streamed response read (bytes): far above any event a provider
/// sends (a whole completed response in one `data:` line included).
const MAX_SSE_LINE: usize = 4 * 1024 * 1024;

/// A streamed (SSE) response, event by event; text deltas and tool calls are forwarded.
fn parse_stream(
    api: Api,
    reader: impl Read,
    events: &mut Events<'_>,
) -> Result<Normalised, ChannelError> {
    let mut n = Normalised::default();
    // Partial tool calls by index: (name, arguments JSON text).
    let mut partial: Vec<(String, String)> = Vec::new();
    let mut event_name = String::new();
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        // Every line bounded (issue 30: a 300 MB line was buffered whole): one over the
        // limit fails the step, it is never cut and read on.
        buf.clear();
        let read = (&mut reader)
            .take(MAX_SSE_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| error(codes::RUNNER_FAILED, format!("reading the stream: {e}")))?;
        if read == 0 {
            break;
        }
        if buf.len() > MAX_SSE_LINE {
            return Err(error(
                codes::RUNNER_FAILED,
                format!("the provider's stream has a line over {MAX_SSE_LINE} bytes"),
            ));
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(name) = line.strip_prefix("event:") {
            event_name = name.trim().to_owned();
            continue;
        }
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            events.log("warn", "a stream event that is not JSON was skipped");
            continue;
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .map_or_else(|| event_name.clone(), str::to_owned);
        match api {
            Api::OpenAiResponses => match kind.as_str() {
                "response.output_text.delta" => {
                    let d = v.get("delta").and_then(Value::as_str).unwrap_or("");
                    events.text(d);
                }
                "response.completed" => {
                    if let Some(r) = v.get("response") {
                        let done = parse_body(api, r);
                        for (name, args) in &done.tool_calls {
                            events.tool_call(name, Object(args.clone()));
                        }
                        n = done;
                    }
                }
                "response.failed" | "error" => {
                    return Err(error(
                        codes::RUNNER_FAILED,
                        format!("the provider reported: {data}"),
                    ));
                }
                _ => {}
            },
            Api::AnthropicMessages => match kind.as_str() {
                "message_start" => {
                    n.input_tokens = v
                        .get("message")
                        .and_then(|m| m.get("usage"))
                        .and_then(anthropic_input);
                    n.response_id = v
                        .get("message")
                        .and_then(|m| m.get("id"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
                "content_block_start" => {
                    let block = v.get("content_block");
                    if block.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("tool_use")
                    {
                        let name = block
                            .and_then(|b| b.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        partial.push((name.to_owned(), String::new()));
                    } else {
                        partial.push((String::new(), String::new()));
                    }
                }
                "content_block_delta" => {
                    let delta = v.get("delta");
                    match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                        Some("text_delta") => {
                            let t = delta
                                .and_then(|d| d.get("text"))
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            events.text(t);
                            n.text.push_str(t);
                        }
                        Some("input_json_delta") => {
                            let j = delta
                                .and_then(|d| d.get("partial_json"))
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            if let Some(last) = partial.last_mut() {
                                last.1.push_str(j);
                            }
                        }
                        _ => {}
                    }
                }
                "message_delta" => {
                    n.output_tokens = u64_at(&v, &["usage", "output_tokens"]);
                    // Newer streams repeat the (cumulative) input counts here: the last word.
                    if let Some(usage) = v.get("usage").filter(|u| u.get("input_tokens").is_some())
                    {
                        n.input_tokens = anthropic_input(usage);
                    }
                    n.stop_reason = v
                        .get("delta")
                        .and_then(|d| d.get("stop_reason"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
                "error" => {
                    return Err(error(
                        codes::RUNNER_FAILED,
                        format!("the provider reported: {data}"),
                    ));
                }
                _ => {}
            },
            Api::ChatCompletions => {
                if n.response_id.is_none() {
                    n.response_id = v.get("id").and_then(Value::as_str).map(str::to_owned);
                }
                let choice = v.get("choices").and_then(|c| c.get(0));
                let delta = choice.and_then(|c| c.get("delta"));
                if let Some(t) = delta.and_then(|d| d.get("content")).and_then(Value::as_str) {
                    events.text(t);
                    n.text.push_str(t);
                }
                for call in delta
                    .and_then(|d| d.get("tool_calls"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                    let index = usize::try_from(index).unwrap_or(usize::MAX).min(64);
                    while partial.len() <= index {
                        partial.push((String::new(), String::new()));
                    }
                    if let Some(slot) = partial.get_mut(index) {
                        if let Some(name) = call
                            .get("function")
                            .and_then(|f| f.get("name"))
                            .and_then(Value::as_str)
                        {
                            slot.0.push_str(name);
                        }
                        if let Some(a) = call
                            .get("function")
                            .and_then(|f| f.get("arguments"))
                            .and_then(Value::as_str)
                        {
                            slot.1.push_str(a);
                        }
                    }
                }
                if let Some(r) = choice
                    .and_then(|c| c.get("finish_reason"))
                    .and_then(Value::as_str)
                {
                    n.stop_reason = Some(r.to_owned());
                }
                if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                    n.input_tokens = u64_at(u, &["prompt_tokens"]);
                    n.output_tokens = u64_at(u, &["completion_tokens"]);
                }
            }
        }
    }
    for (name, args) in partial.into_iter().filter(|(name, _)| !name.is_empty()) {
        let args = args_object(&Value::String(args));
        events.tool_call(&name, Object(args.clone()));
        n.tool_calls.push((name, args));
    }
    Ok(n)
}

struct Provider {
    config: Config,
    matrix: RunnerCapabilityMatrix,
    agent: ureq::Agent,
}

/// The host (and port) of `url`: no scheme, credentials, path, query or fragment.
fn endpoint_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(*c))
        .take(MAX_MODEL_STEP_TEXT)
        .collect();
    if host.is_empty() {
        "unknown".into()
    } else {
        host.to_ascii_lowercase()
    }
}

/// `text` kept only if the host accepts it in a report (printable ASCII, bounded).
fn printable(text: &str) -> Option<String> {
    (!text.is_empty()
        && text.len() <= MAX_MODEL_STEP_TEXT
        && text.chars().all(|c| c.is_ascii_graphic()))
    .then(|| text.to_owned())
}

impl Provider {
    /// The `model_step` report of one exchange that got a response (`n`: what it answered,
    /// when it answered and was read).
    fn report(
        &self,
        body: &str,
        attempt: u32,
        sent: std::time::Instant,
        n: Option<&Normalised>,
        outcome: ModelStepOutcome,
    ) -> ModelStepReport {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(body.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        // The provider's counts as they are, never clamped: a count above the host's ceiling
        // fails the step there (fail closed) rather than understating what was spent.
        // Unknown unless both counts are known (no answer read: unknown).
        let counts = n.and_then(|n| Some((n.input_tokens?, n.output_tokens?)));
        ModelStepReport {
            provider: self.config.api.name().into(),
            model: printable(&self.config.model).unwrap_or_else(|| "unnamed".into()),
            endpoint_host: endpoint_host(&self.config.base_url),
            request_sha256: format!("sha256:{hex}"),
            response_id: n.and_then(|n| n.response_id.as_deref()).and_then(printable),
            input_tokens: counts.map(|c| c.0),
            output_tokens: counts.map(|c| c.1),
            total_tokens: counts.and_then(|(i, o)| i.checked_add(o)),
            latency_ms: u64::try_from(sent.elapsed().as_millis())
                .unwrap_or(u64::MAX)
                .min(MAX_MODEL_STEP_LATENCY_MS),
            retries: attempt.min(MAX_MODEL_STEP_RETRIES),
            streamed: self.config.stream,
            outcome,
        }
    }

    fn call(
        &self,
        request: &RunnerStepRequest,
        events: &mut Events<'_>,
    ) -> Result<Normalised, ChannelError> {
        let key = std::env::var(&self.config.key_env).ok().filter(|k| !k.is_empty()).ok_or_else(|| {
            error(
                codes::UNAVAILABLE,
                format!(
                    "no API key: `{}` is not set (the host passes it only when the runner profile names it); no call was made",
                    self.config.key_env
                ),
            )
        })?;
        let url = format!("{}{}", self.config.base_url, self.config.api.path());
        let body = payload(&self.config, request).to_string();
        let mut attempt = 0u32;
        loop {
            let mut req = self
                .agent
                .post(&url)
                .set("content-type", "application/json");
            req = match self.config.api {
                Api::AnthropicMessages => req
                    .set("x-api-key", &key)
                    .set("anthropic-version", "2023-06-01"),
                _ => req.set("authorization", &format!("Bearer {key}")),
            };
            if self.config.stream {
                req = req.set("accept", "text/event-stream");
            }
            let sent = std::time::Instant::now();
            match req.send_string(&body) {
                Ok(response) => {
                    let parsed = if self.config.stream {
                        parse_stream(self.config.api, response.into_reader(), events)
                    } else {
                        (|| {
                            let mut text = String::new();
                            response
                                .into_reader()
                                .take(16 * 1024 * 1024)
                                .read_to_string(&mut text)
                                .map_err(|e| {
                                    error(
                                        codes::RUNNER_FAILED,
                                        format!("reading the response: {e}"),
                                    )
                                })?;
                            let value: Value = serde_json::from_str(&text).map_err(|e| {
                                error(
                                    codes::RUNNER_FAILED,
                                    format!("the provider's response is not JSON: {e}"),
                                )
                            })?;
                            let n = parse_body(self.config.api, &value);
                            if !n.text.is_empty() {
                                events.text(&n.text);
                            }
                            for (name, args) in &n.tool_calls {
                                events.tool_call(name, Object(args.clone()));
                            }
                            Ok(n)
                        })()
                    };
                    let (outcome, n) = match &parsed {
                        Ok(n) => (ModelStepOutcome::Ok, Some(n)),
                        Err(_) => (ModelStepOutcome::Failed, None),
                    };
                    events.model_step(self.report(&body, attempt, sent, n, outcome));
                    return parsed;
                }
                Err(ureq::Error::Status(status, response)) => {
                    let retry_after = response
                        .header("retry-after")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|s| Duration::from_secs(s.min(10)));
                    let text: String = response
                        .into_string()
                        .unwrap_or_default()
                        .chars()
                        .take(300)
                        .collect();
                    let retrying =
                        self.config.api.retryable(status) && attempt < self.config.max_retries;
                    // An HTTP error answer generated nothing, and the providers document that
                    // they do not bill one: its counts are known to be 0 (unlike a 200 whose
                    // body could not be read, or an exchange cut off: unknown).
                    let unbilled = Normalised {
                        input_tokens: Some(0),
                        output_tokens: Some(0),
                        ..Normalised::default()
                    };
                    events.model_step(self.report(
                        &body,
                        attempt,
                        sent,
                        Some(&unbilled),
                        if retrying {
                            ModelStepOutcome::Retried
                        } else {
                            ModelStepOutcome::Failed
                        },
                    ));
                    if retrying {
                        let backoff = self.config.retry_base.saturating_mul(1 << attempt.min(10));
                        let wait = retry_after.unwrap_or(backoff);
                        events.log(
                            "warn",
                            &format!(
                                "HTTP {status}; retry {} of {} in {} ms",
                                attempt + 1,
                                self.config.max_retries,
                                wait.as_millis()
                            ),
                        );
                        std::thread::sleep(wait);
                        attempt += 1;
                        continue;
                    }
                    return Err(error(
                        codes::RUNNER_FAILED,
                        format!(
                            "HTTP {status} from the provider after {attempt} retr{}: {text}",
                            if attempt == 1 { "y" } else { "ies" }
                        ),
                    ));
                }
                Err(ureq::Error::Transport(t)) => {
                    // Cut after the connection was made (a read timeout, a reset): the
                    // provider may have received and billed the request; its usage is
                    // unknown, and reported so (issue 30). Never connected: nothing was sent.
                    if !matches!(
                        t.kind(),
                        ureq::ErrorKind::Dns
                            | ureq::ErrorKind::ConnectionFailed
                            | ureq::ErrorKind::InvalidUrl
                            | ureq::ErrorKind::UnknownScheme
                            | ureq::ErrorKind::InvalidProxyUrl
                            | ureq::ErrorKind::ProxyConnect
                    ) {
                        events.model_step(self.report(
                            &body,
                            attempt,
                            sent,
                            None,
                            ModelStepOutcome::Cut,
                        ));
                    }
                    if attempt < self.config.max_retries {
                        let wait = self.config.retry_base.saturating_mul(1 << attempt.min(10));
                        events.log(
                            "warn",
                            &format!(
                                "transport error ({t}); retry {} in {} ms",
                                attempt + 1,
                                wait.as_millis()
                            ),
                        );
                        std::thread::sleep(wait);
                        attempt += 1;
                        continue;
                    }
                    return Err(error(
                        codes::RUNNER_FAILED,
                        format!("cannot reach the provider: {t}"),
                    ));
                }
            }
        }
    }
}

impl Runner for Provider {
    fn initialize(&mut self) -> Result<InitializeResult, ChannelError> {
        Ok(crate::serve::handshake(&self.matrix))
    }

    fn step(
        &mut self,
        request: RunnerStepRequest,
        events: &mut Events<'_>,
    ) -> Result<RunnerStepResult, ChannelError> {
        let n = self.call(&request, events)?;
        let mut observed = Map::new();
        let actions: Vec<Value> = n
            .tool_calls
            .iter()
            .filter(|(name, _)| name == "propose_action")
            .map(|(_, args)| Value::Object(args.clone()))
            .collect();
        if !actions.is_empty() {
            observed.insert("proposed_actions".into(), Value::Array(actions));
        }
        observed.insert(
            "usage".into(),
            json!({"input_tokens": n.input_tokens, "output_tokens": n.output_tokens}),
        );
        observed.insert(
            "provider".into(),
            json!({"model": self.config.model, "stop_reason": n.stop_reason, "streamed": self.config.stream}),
        );
        Ok(answer::result_from_text(&request, &n.text, observed))
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match parse_args(&args) {
        Ok(c) => c,
        Err(why) => {
            #[allow(
                clippy::print_stderr,
                reason = "the host captures stderr as diagnostics"
            )]
            {
                eprintln!("craik-adapter-provider: {why}");
            }
            return std::process::ExitCode::from(2);
        }
    };
    let Ok(matrix) = serve::embedded_matrix(include_str!("../../../runners/provider.json")) else {
        return std::process::ExitCode::from(4);
    };
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(10))
        .timeout(Duration::from_secs(110))
        .build();
    serve::serve(&mut Provider {
        config,
        matrix,
        agent,
    })
}
