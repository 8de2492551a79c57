//! The provider adapter against a loopback HTTP server that answers in each API's real wire
//! format — OpenAI Responses, Anthropic Messages, OpenAI-compatible Chat Completions — plain
//! and streamed (SSE), with rate limits and overload errors first. The adapter's real HTTP code
//! path runs; no live call is ever made.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::runs::{receipts, run_json, scratch_example, verify_run};
use crate::{craik, transcript};

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Recorded {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub(crate) type Responder =
    dyn Fn(&Recorded, usize) -> (u16, Vec<(String, String)>, String) + Send + Sync;

/// Serves until the test ends; returns the port and the requests it saw.
pub(crate) fn serve(respond: Arc<Responder>) -> (u16, Arc<Mutex<Vec<Recorded>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                continue;
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .to_owned();
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end().to_owned();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                }
            }
            let length: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            let recorded = Recorded {
                path,
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            };
            let n = {
                let mut seen = log.lock().unwrap();
                seen.push(recorded.clone());
                seen.len()
            };
            let (status, extra, text) = respond(&recorded, n);
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                text.len()
            );
            for (k, v) in extra {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(text.as_bytes());
        }
    });
    (port, seen)
}

pub(crate) fn phase_of(body: &Value) -> &'static str {
    let text = body.to_string();
    for phase in ["plan", "act", "observe", "evaluate"] {
        if text.contains(&format!("Phase: {phase}.")) {
            return phase;
        }
    }
    "unknown"
}

fn answer(phase: &str) -> (String, Option<Value>) {
    let text = match phase {
        "plan" => json!({"status":"completed","summary":"plan: read the README"}),
        "act" => json!({"status":"completed","summary":"proposed a read"}),
        "observe" => json!({"status":"completed","summary":"the README is short"}),
        _ => json!({"status":"completed","summary":"done","next":"stop"}),
    }
    .to_string();
    let tool = (phase == "act").then(|| {
        json!({"id":"action_read","capability":"repo.read","operation":"read","target":"README.md"})
    });
    (text, tool)
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| {
            if name.is_empty() {
                format!("data: {data}\n\n")
            } else {
                format!("event: {name}\ndata: {data}\n\n")
            }
        })
        .collect()
}

/// One successful answer in `api`'s wire format.
pub(crate) fn wire(api: &str, stream: bool, phase: &str) -> (Vec<(String, String)>, String) {
    let (text, tool) = answer(phase);
    wire_with(api, stream, text, tool)
}

/// [`wire`] with a given answer text and optional `propose_action` tool call.
pub(crate) fn wire_with(
    api: &str,
    stream: bool,
    text: String,
    tool: Option<Value>,
) -> (Vec<(String, String)>, String) {
    let args = tool.as_ref().map(Value::to_string);
    let ct = |t: &str| vec![("content-type".to_owned(), t.to_owned())];
    match (api, stream) {
        ("openai-responses", _) => {
            let mut output = Vec::new();
            if let Some(a) = &args {
                output.push(json!({"type":"function_call","id":"fc_1","call_id":"call_1","name":"propose_action","arguments":a,"status":"completed"}));
            }
            output.push(json!({"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":text,"annotations":[]}]}));
            let response = json!({"id":"resp_1","object":"response","status":"completed","model":"m","output":output,"usage":{"input_tokens":12,"output_tokens":7,"total_tokens":19}});
            if stream {
                let (a, b) = text.split_at(text.len() / 2);
                let body = sse(&[
                    (
                        "response.created",
                        json!({"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}),
                    ),
                    (
                        "response.output_text.delta",
                        json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":a}),
                    ),
                    (
                        "response.output_text.delta",
                        json!({"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":b}),
                    ),
                    (
                        "response.completed",
                        json!({"type":"response.completed","response":response}),
                    ),
                ]);
                (ct("text/event-stream"), body)
            } else {
                (ct("application/json"), response.to_string())
            }
        }
        ("anthropic-messages", false) => {
            let mut content = vec![json!({"type":"text","text":text})];
            if let Some(t) = &tool {
                content.push(
                    json!({"type":"tool_use","id":"toolu_1","name":"propose_action","input":t}),
                );
            }
            let body = json!({"id":"msg_1","type":"message","role":"assistant","model":"m","content":content,"stop_reason": if tool.is_some() {"tool_use"} else {"end_turn"},"usage":{"input_tokens":12,"output_tokens":7}});
            (ct("application/json"), body.to_string())
        }
        ("anthropic-messages", true) => {
            let mut events = vec![
                (
                    "message_start",
                    json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":12,"output_tokens":1}}}),
                ),
                (
                    "content_block_start",
                    json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
                ),
                ("ping", json!({"type":"ping"})),
                (
                    "content_block_delta",
                    json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
                ),
                (
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":0}),
                ),
            ];
            if let Some(a) = &args {
                let (x, y) = a.split_at(a.len() / 2);
                events.push(("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"propose_action","input":{}}})));
                events.push(("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":x}})));
                events.push(("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":y}})));
                events.push((
                    "content_block_stop",
                    json!({"type":"content_block_stop","index":1}),
                ));
            }
            events.push(("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}})));
            events.push(("message_stop", json!({"type":"message_stop"})));
            (ct("text/event-stream"), sse(&events))
        }
        (_, false) => {
            let mut message = json!({"role":"assistant","content":text});
            if let Some(a) = &args {
                message["tool_calls"] = json!([{"id":"call_1","type":"function","function":{"name":"propose_action","arguments":a}}]);
            }
            let body = json!({"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":message,"finish_reason": if args.is_some() {"tool_calls"} else {"stop"}}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}});
            (ct("application/json"), body.to_string())
        }
        (_, true) => {
            let mut events = vec![
                (
                    "",
                    json!({"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}),
                ),
                (
                    "",
                    json!({"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":text},"finish_reason":null}]}),
                ),
            ];
            if let Some(a) = &args {
                let (x, y) = a.split_at(a.len() / 2);
                events.push(("", json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"propose_action","arguments":""}}]},"finish_reason":null}]})));
                events.push(("", json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":x}}]},"finish_reason":null}]})));
                events.push(("", json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":y}}]},"finish_reason":null}]})));
            }
            events.push(("", json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7}})));
            let mut body = sse(&events);
            body.push_str("data: [DONE]\n\n");
            (ct("text/event-stream"), body)
        }
    }
}

/// The API's own rate-limit / overload error.
fn throttled(api: &str) -> (u16, Vec<(String, String)>, String) {
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("retry-after".to_owned(), "0".to_owned()),
    ];
    match api {
        "anthropic-messages" => (
            529,
            headers,
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}).to_string(),
        ),
        _ => (
            429,
            headers,
            json!({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}).to_string(),
        ),
    }
}

fn wrapper(dir: &Path, api: &str, port: u16, stream: bool) -> PathBuf {
    crate::ensure_adapters();
    let bin = assert_cmd::cargo::cargo_bin("craik").with_file_name("craik-adapter-provider");
    assert!(bin.is_file(), "run the suite with `cargo test --workspace`");
    let script = dir.join(format!("provider-{api}.sh"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} --api {api} --model m --base-url http://127.0.0.1:{port} --retry-base-ms 1 {}\n",
            bin.display(),
            if stream { "--stream" } else { "" }
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    script
}

fn steps() -> Value {
    json!([
        {"phase":"plan","summary":"p"},
        {"phase":"act","summary":"a"},
        {"phase":"observe","summary":"o"},
        {"phase":"evaluate","summary":"e","next":"stop"}
    ])
}

fn run_provider(
    dir: &Path,
    script: &Path,
    key: Option<(&str, &str)>,
) -> (std::process::Output, PathBuf) {
    run_provider_with(dir, script, key, &["--step-timeout-secs", "20"])
}

/// [`run_provider`] with `extra` arguments of `craik run` (a step timeout among them).
fn run_provider_with(
    dir: &Path,
    script: &Path,
    key: Option<(&str, &str)>,
    extra: &[&str],
) -> (std::process::Output, PathBuf) {
    let ex = scratch_example(
        dir,
        "trusted-local",
        &[],
        steps(),
        &[("README.md", "hello\n")],
    );
    let home = dir.join("home");
    let mut cmd = craik();
    cmd.arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .arg("--runner")
        .arg(format!("adapter:{}", script.display()))
        .args(["--runner-matrix", "provider"])
        .args(extra)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY");
    if let Some((k, v)) = key {
        cmd.env(k, v);
    }
    (cmd.output().unwrap(), home)
}

fn run_id(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(':')
        .to_owned()
}

#[test]
fn every_api_family_plain_and_streamed_through_rate_limits() {
    for api in ["openai-responses", "anthropic-messages", "chat-completions"] {
        for stream in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let api_name = api.to_owned();
            let (port, seen) = serve(Arc::new(move |r: &Recorded, n: usize| {
                if n == 1 {
                    return throttled(&api_name);
                }
                let (headers, body) = wire(&api_name, stream, phase_of(&r.body));
                (200, headers, body)
            }));
            let script = wrapper(dir.path(), api, port, stream);
            let key_env = if api == "anthropic-messages" {
                "ANTHROPIC_API_KEY"
            } else {
                "OPENAI_API_KEY"
            };
            let (out, home) = run_provider(dir.path(), &script, Some((key_env, "test-key-123")));
            let what = format!("{api} stream={stream}");
            assert_eq!(out.status.code(), Some(0), "{what}: {}", transcript(&out));
            let id = run_id(&out);
            assert_eq!(run_json(&home, &id)["status"], "completed", "{what}");
            verify_run(&home, &id, false);
            // The tool call became a proposal Craik decided and performed.
            let receipts: Vec<Value> = receipts(&home, &id);
            assert!(
                receipts.iter().any(|r| r["capability"] == "repo.read"
                    && r["decided_by"]["kind"] == "outcome"
                    && r["result"]["status"] == "passed"),
                "{what}: {receipts:?}"
            );
            // Issue 21: exactly one signed `model.step` receipt per HTTP exchange that got a
            // response (the throttled one included), with the usage the API reported.
            let steps: Vec<&Value> = receipts
                .iter()
                .filter(|r| r["capability"] == "model.step")
                .collect();
            assert_eq!(steps.len(), 5, "{what}: {steps:?}");
            let response_id = match api {
                "openai-responses" => "resp_1",
                "anthropic-messages" => "msg_1",
                _ => "chatcmpl-1",
            };
            for (k, r) in steps.iter().enumerate() {
                let m = &r["result"]["metadata"];
                assert_eq!(m["reported_by"], "adapter", "{what}");
                assert_eq!(m["provider"], api, "{what}");
                assert_eq!(m["model"], "m", "{what}");
                assert_eq!(m["endpoint_host"], format!("127.0.0.1:{port}"), "{what}");
                assert_eq!(m["streamed"], stream, "{what}");
                assert!(
                    m["request_sha256"].as_str().unwrap().starts_with("sha256:"),
                    "{what}"
                );
                if k == 0 {
                    assert_eq!(m["outcome"], "retried", "{what}");
                    assert_eq!(m["total_tokens"], 0, "{what}");
                    assert_eq!(m["retries"], 0, "{what}");
                } else {
                    assert_eq!(m["outcome"], "ok", "{what}: {m}");
                    assert_eq!(
                        (&m["input_tokens"], &m["output_tokens"], &m["total_tokens"]),
                        (&json!(12), &json!(7), &json!(19)),
                        "{what}: {m}"
                    );
                    assert_eq!(m["response_id"], response_id, "{what}");
                    assert_eq!(m["retries"], if k == 1 { 1 } else { 0 }, "{what}");
                }
                assert_eq!(m["cumulative_total_tokens"], 19 * k as u64, "{what}");
            }
            // Real request payloads: path, auth, model, the tool.
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 5, "{what}: one retry, then four steps");
            for r in &seen {
                let body = r.body.to_string();
                assert!(body.contains("propose_action"), "{what}: {body}");
                // Issue 21: the model is told what the host compiled (the run's prompt, then
                // the host's Step section), the case file fenced as data.
                let prompt: Value = serde_json::from_slice(
                    &std::fs::read(home.join("runs").join(&id).join("compiled_prompt.json"))
                        .unwrap(),
                )
                .unwrap();
                let compiled = prompt["prompt"].as_str().unwrap();
                let user = match api {
                    "openai-responses" => r.body["input"].as_str().unwrap(),
                    "anthropic-messages" => r.body["messages"][0]["content"].as_str().unwrap(),
                    _ => r.body["messages"][1]["content"].as_str().unwrap(),
                };
                assert!(user.starts_with(compiled), "{what}: {user}");
                assert!(user[compiled.len()..].starts_with("\n## Step\n"), "{what}");
                assert_eq!(r.body["model"], "m");
                assert_eq!(r.body["stream"], stream);
                match api {
                    "anthropic-messages" => {
                        assert_eq!(r.path, "/v1/messages");
                        assert_eq!(r.header("x-api-key"), Some("test-key-123"));
                        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
                        assert!(r.body["tools"][0]["input_schema"].is_object());
                    }
                    "openai-responses" => {
                        assert_eq!(r.path, "/v1/responses");
                        assert_eq!(r.header("authorization"), Some("Bearer test-key-123"));
                        assert_eq!(r.body["text"]["format"]["type"], "json_schema");
                    }
                    _ => {
                        assert_eq!(r.path, "/v1/chat/completions");
                        assert_eq!(r.header("authorization"), Some("Bearer test-key-123"));
                        assert_eq!(r.body["tools"][0]["function"]["name"], "propose_action");
                    }
                }
            }
            // Usage is recorded; the key never is.
            let run_dir = home.join("runs").join(&id);
            let outputs = std::fs::read_to_string(run_dir.join("outputs.jsonl")).unwrap();
            assert!(outputs.contains("\"input_tokens\":12"), "{what}: {outputs}");
            assert!(outputs.contains("the README is short"), "{what}");
            for name in [
                "outputs.jsonl",
                "events.jsonl",
                "receipts.jsonl",
                "inputs.json",
                "handoff.json",
            ] {
                let text = std::fs::read_to_string(run_dir.join(name)).unwrap();
                assert!(
                    !text.contains("test-key-123"),
                    "{what}: {name} holds the key"
                );
            }
        }
    }
}

#[test]
fn errors_are_not_retried_forever_and_no_key_means_no_call() {
    // 401 is not retryable: one request, the step fails with the status named.
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = serve(Arc::new(|_: &Recorded, _| {
        (
            401,
            vec![],
            json!({"error":{"message":"Incorrect API key provided"}}).to_string(),
        )
    }));
    let script = wrapper(dir.path(), "chat-completions", port, false);
    let (out, home) = run_provider(dir.path(), &script, Some(("OPENAI_API_KEY", "bad")));
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let run = run_json(&home, &run_id(&out));
    assert!(
        run["stop_reason"].as_str().unwrap().contains("HTTP 401"),
        "{}",
        run["stop_reason"]
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    // 503 forever: retried max-retries (3) times, then the step fails.
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = serve(Arc::new(|_: &Recorded, _| (503, vec![], "{}".to_owned())));
    let script = wrapper(dir.path(), "openai-responses", port, false);
    let (out, home) = run_provider(dir.path(), &script, Some(("OPENAI_API_KEY", "k")));
    assert_eq!(out.status.code(), Some(1));
    let run = run_json(&home, &run_id(&out));
    assert!(
        run["stop_reason"].as_str().unwrap().contains("HTTP 503"),
        "{}",
        run["stop_reason"]
    );
    assert_eq!(seen.lock().unwrap().len(), 4);
    // Issue 21: each answered exchange has its signed model step, the failed step's too.
    let outcomes: Vec<Value> = receipts(&home, &run_id(&out))
        .into_iter()
        .filter(|r| r["capability"] == "model.step")
        .map(|r| r["result"]["metadata"]["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            json!("retried"),
            json!("retried"),
            json!("retried"),
            json!("failed")
        ]
    );
    // No key in the environment: a structured `unavailable`, and no request at all.
    let dir = tempfile::tempdir().unwrap();
    let (port, seen) = serve(Arc::new(|_: &Recorded, _| (200, vec![], "{}".to_owned())));
    let script = wrapper(dir.path(), "anthropic-messages", port, false);
    let (out, home) = run_provider(dir.path(), &script, None);
    assert_eq!(out.status.code(), Some(1));
    let run = run_json(&home, &run_id(&out));
    assert!(
        run["stop_reason"].as_str().unwrap().contains("no API key"),
        "{}",
        run["stop_reason"]
    );
    assert!(seen.lock().unwrap().is_empty());
    verify_run(&home, &run_id(&out), false);
}

#[test]
fn issue_21_a_provider_over_its_token_budget_ends_the_run_interrupted_with_a_handoff() {
    for api in ["openai-responses", "anthropic-messages", "chat-completions"] {
        let dir = tempfile::tempdir().unwrap();
        let api_name = api.to_owned();
        let (port, seen) = serve(Arc::new(move |r: &Recorded, _| {
            let (headers, body) = wire(&api_name, false, phase_of(&r.body));
            (200, headers, body)
        }));
        let script = wrapper(dir.path(), api, port, false);
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[],
            steps(),
            &[("README.md", "hello\n")],
        );
        let home = dir.path().join("home");
        let key_env = if api == "anthropic-messages" {
            "ANTHROPIC_API_KEY"
        } else {
            "OPENAI_API_KEY"
        };
        // 19 tokens a step: the act step (38) passes a budget of 30.
        let out = craik()
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(&home)
            .arg("--runner")
            .arg(format!("adapter:{}", script.display()))
            .args(["--runner-matrix", "provider", "--step-timeout-secs", "20"])
            .args(["--token-budget", "30"])
            .env(key_env, "k")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{api}: {}", transcript(&out));
        let id = run_id(&out);
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "interrupted", "{api}");
        assert_eq!(
            run["stop_reason"], "provider token budget exceeded: 38 of 30 tokens used",
            "{api}"
        );
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "{api}: observe is never asked"
        );
        let rs = receipts(&home, &id);
        assert_eq!(
            rs.iter()
                .filter(|r| r["capability"] == "model.step")
                .count(),
            2,
            "{api}"
        );
        // The act step's proposed read was never decided.
        assert!(rs.iter().all(|r| r["capability"] != "repo.read"), "{api}");
        assert!(home.join("runs").join(&id).join("handoff.json").is_file());
        verify_run(&home, &id, false);
    }
}

fn usage_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r#","usage":\{[^{}]*\}"#).unwrap())
}

fn count_res() -> &'static [regex::Regex] {
    static RES: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
    RES.get_or_init(|| {
        [
            "input_tokens",
            "output_tokens",
            "prompt_tokens",
            "completion_tokens",
        ]
        .iter()
        .map(|k| regex::Regex::new(&format!(r#""{k}":\d+"#)).unwrap())
        .collect()
    })
}

/// Issue 30 item 4: usage a provider omits, or gives as a negative, fractional or string
/// count, is signed as unknown — never 0 — and under a token budget the first such step ends
/// the run `interrupted` with a handoff; a chat-completions stream asks for usage.
#[test]
fn issue_30_usage_a_provider_omits_or_lies_about_is_unknown_and_stops_a_budgeted_run() {
    let keys = [
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
    ];
    for api in ["openai-responses", "anthropic-messages", "chat-completions"] {
        for stream in [false, true] {
            for lie in ["omit", "-7", "7.5", "\"7\"", "null"] {
                let dir = tempfile::tempdir().unwrap();
                let api_name = api.to_owned();
                let lie_owned = lie.to_owned();
                let (port, seen) = serve(Arc::new(move |r: &Recorded, _| {
                    let (headers, mut body) = wire(&api_name, stream, phase_of(&r.body));
                    if lie_owned == "omit" {
                        body = usage_re().replace_all(&body, "").into_owned();
                    } else {
                        for (k, n) in keys.iter().zip(count_res()) {
                            body = n
                                .replace_all(&body, format!(r#""{k}":{lie_owned}"#).as_str())
                                .into_owned();
                        }
                    }
                    (200, headers, body)
                }));
                let script = wrapper(dir.path(), api, port, stream);
                let key_env = if api == "anthropic-messages" {
                    "ANTHROPIC_API_KEY"
                } else {
                    "OPENAI_API_KEY"
                };
                let (out, home) = run_provider_with(
                    dir.path(),
                    &script,
                    Some((key_env, "k")),
                    &["--step-timeout-secs", "20", "--token-budget", "1000000"],
                );
                let case = format!("{api} stream={stream} usage={lie}");
                assert_eq!(out.status.code(), Some(1), "{case}: {}", transcript(&out));
                let id = run_id(&out);
                let run = run_json(&home, &id);
                assert_eq!(run["status"], "interrupted", "{case}");
                assert!(
                    run["stop_reason"].as_str().unwrap().starts_with(
                        "provider token budget cannot be enforced: 1 model step(s) of unknown usage"
                    ),
                    "{case}: {}",
                    run["stop_reason"]
                );
                // One exchange: the plan step's, and nothing after it.
                assert_eq!(seen.lock().unwrap().len(), 1, "{case}");
                if api == "chat-completions" && stream {
                    assert_eq!(
                        seen.lock().unwrap()[0].body["stream_options"],
                        json!({"include_usage": true}),
                        "{case}"
                    );
                }
                let rs = receipts(&home, &id);
                let steps: Vec<&Value> = rs
                    .iter()
                    .filter(|r| r["capability"] == "model.step")
                    .collect();
                assert_eq!(steps.len(), 1, "{case}");
                let m = &steps[0]["result"]["metadata"];
                assert_eq!(m["usage"], "unknown", "{case}: {m}");
                for k in ["input_tokens", "output_tokens", "total_tokens"] {
                    assert!(m.get(k).is_none(), "{case}: {k} signed as {}", m[k]);
                }
                assert!(
                    steps[0]["result"]["summary"]
                        .as_str()
                        .unwrap()
                        .contains("UNKNOWN usage"),
                    "{case}"
                );
                let handoff =
                    std::fs::read_to_string(home.join("runs").join(&id).join("handoff.json"))
                        .unwrap();
                assert!(
                    handoff.contains("Raise --token-budget"),
                    "{case}: {handoff}"
                );
                let show = craik()
                    .args(["runs", "show", &id, "--home"])
                    .arg(&home)
                    .output()
                    .unwrap();
                assert!(
                    String::from_utf8_lossy(&show.stdout)
                        .contains("1 model step(s) of UNKNOWN usage"),
                    "{case}: {}",
                    transcript(&show)
                );
                verify_run(&home, &id, false);
            }
        }
    }
}

/// Outside testing round 12: Anthropic's `input_tokens` leaves out the tokens written to and
/// read from the prompt cache, which are billed; they are counted (900 000 cached tokens a
/// call were receipted as 2 before). A cache count that is not a non-negative integer makes
/// the step's usage unknown; an absent or `null` one means no caching.
#[test]
fn anthropic_cache_tokens_are_counted_and_a_lying_cache_count_is_unknown() {
    for stream in [false, true] {
        for (cache, expect) in [
            (
                r#","cache_creation_input_tokens":100,"cache_read_input_tokens":900"#,
                Some(1012),
            ),
            (r#","cache_creation_input_tokens":null"#, Some(12)),
            (r#","cache_read_input_tokens":"900""#, None),
            (r#","cache_read_input_tokens":-5"#, None),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let cache_owned = cache.to_owned();
            let (port, _) = serve(Arc::new(move |r: &Recorded, _| {
                let (headers, body) = wire("anthropic-messages", stream, phase_of(&r.body));
                let body = body.replace(
                    r#""input_tokens":12"#,
                    &format!(r#""input_tokens":12{cache_owned}"#),
                );
                (200, headers, body)
            }));
            let script = wrapper(dir.path(), "anthropic-messages", port, stream);
            let (out, home) = run_provider_with(
                dir.path(),
                &script,
                Some(("ANTHROPIC_API_KEY", "k")),
                &["--step-timeout-secs", "20", "--token-budget", "1000000"],
            );
            let case = format!("stream={stream} {cache}");
            let id = run_id(&out);
            let rs = receipts(&home, &id);
            let first = rs
                .iter()
                .find(|r| r["capability"] == "model.step")
                .unwrap_or_else(|| panic!("{case}: no model.step: {}", transcript(&out)));
            let m = &first["result"]["metadata"];
            match expect {
                Some(n) => {
                    assert_eq!(m["input_tokens"], n, "{case}: {m}");
                    assert_eq!(m["total_tokens"], n + 7, "{case}: {m}");
                }
                None => {
                    assert_eq!(m["usage"], "unknown", "{case}: {m}");
                    assert_eq!(run_json(&home, &id)["status"], "interrupted", "{case}");
                }
            }
            verify_run(&home, &id, false);
        }
    }
}

/// Issue 30 item 4: a step cut off by its timeout leaves a host-signed `model.step` of
/// unknown usage (the provider may have received and billed the request), and under a token
/// budget the run ends `interrupted`.
#[test]
fn issue_30_an_exchange_cut_by_the_step_timeout_is_signed_as_unknown() {
    for budget in [None, Some("1000")] {
        let dir = tempfile::tempdir().unwrap();
        let (port, _seen) = serve(Arc::new(move |r: &Recorded, _| {
            std::thread::sleep(std::time::Duration::from_secs(6));
            let (headers, body) = wire("chat-completions", false, phase_of(&r.body));
            (200, headers, body)
        }));
        let script = wrapper(dir.path(), "chat-completions", port, false);
        let mut extra = vec!["--step-timeout-secs", "2"];
        if let Some(b) = budget {
            extra.extend(["--token-budget", b]);
        }
        let (out, home) =
            run_provider_with(dir.path(), &script, Some(("OPENAI_API_KEY", "k")), &extra);
        let id = run_id(&out);
        let run = run_json(&home, &id);
        let rs = receipts(&home, &id);
        let steps: Vec<&Value> = rs
            .iter()
            .filter(|r| r["capability"] == "model.step")
            .collect();
        assert_eq!(steps.len(), 1, "{budget:?}: {}", transcript(&out));
        let m = &steps[0]["result"]["metadata"];
        assert_eq!(m["usage"], "unknown");
        assert_eq!(m["reported_by"], "host");
        assert_eq!(m["outcome"], "cut");
        match budget {
            Some(_) => assert_eq!(run["status"], "interrupted", "{}", transcript(&out)),
            None => assert_eq!(run["status"], "failed", "{}", transcript(&out)),
        }
        verify_run(&home, &id, false);
    }
}
