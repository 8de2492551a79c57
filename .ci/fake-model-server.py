#!/usr/bin/env python3
"""A loopback model server answering in the wire shapes the real agent CLIs speak (issue 32).

  fake-model-server.py --port-file FILE --log FILE --scenario SCENARIO.json
                       [--key KEY] [--act] [--model NAME] [--port N]

Speaks, on 127.0.0.1 (--port, else an ephemeral port; written to --port-file once listening):
- OpenAI Responses (`POST …/responses`, SSE when `stream` is true): what `codex exec` sends;
- OpenAI Chat Completions (`POST …/chat/completions`, plain and SSE);
- Anthropic Messages (`POST …/messages`, SSE when `stream` is true; `…/count_tokens`): what
  `claude -p` sends;
- Gemini (`POST …/models/M:streamGenerateContent?alt=sse`, `:generateContent`,
  `:countTokens`): what `gemini` sends.

A request carrying Craik's governed prompt (`- Phase: P (step N; …`) is answered with step N of
the fixture scenario as the JSON answer the handoff adapters read (`status`, `summary`,
`proposed_actions`, `memory_proposals`, `next`): the run goes as the scenario goes. With
--act, the first `act` request is answered with a tool call instead (a shell command the CLI
would run itself: codex's `exec_command`, claude's `Bash`, gemini's `run_shell_command`), and
for the Responses API the second with a hosted web search (codex refuses a shell tool it does
not offer, and reports a search as done); the adapter must refuse what the CLI reports doing
as a runner violation. Any other request (a
CLI's own side request) gets a short text answer.

Every response reports usage; each request is logged as one JSON line: the API, the path, the
phase and step it answered (null for a side request), the usage it reported in the units a
Craik `model.step` receipt counts (input tokens including cached ones, output tokens), whether
the key sent was --key (never the key itself), the model asked for, and the tool names the CLI
offered. Nothing here reaches the network: it binds loopback only.
"""

import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PHASE = re.compile(r"- Phase: (plan|act|observe|evaluate) \(step (\d+);")

# The usage each API reports per response (distinct per API, so a mix-up shows).
RESPONSES_USAGE = {"input": 1234, "cached": 200, "output": 56, "reasoning": 7}
CHAT_USAGE = {"prompt": 1111, "completion": 44}
ANTHROPIC_USAGE = {"input": 700, "cache_creation": 30, "cache_read": 4, "output": 61}
GEMINI_USAGE = {"prompt": 1300, "candidates": 47}

LOCK = threading.Lock()


def answer_for(scenario, body_text, act, state, api=None):
    """(phase, step, text, tool) for a request body: the scenario step's JSON answer, or a
    tool call when --act and this is the first act request, or a side answer."""
    found = PHASE.findall(body_text)
    if not found:
        return None, None, "ok", False
    phase, step = found[-1]
    step = int(step)
    steps = scenario["steps"]
    entry = steps[step] if step < len(steps) else {"phase": phase, "summary": "done", "next": "stop"}
    if act and phase == "act":
        with LOCK:
            state["acts"] = state.get("acts", 0) + 1
            count = state["acts"]
        # The first act request is answered with a tool call (and for the Responses API,
        # whose client may refuse a tool it does not offer, the second with a hosted one).
        if count == 1 or (count == 2 and api == "openai-responses"):
            return phase, step, None, count
    answer = {"status": "completed", "summary": entry.get("summary", phase)}
    for key in ("proposed_actions", "memory_proposals", "next", "outputs"):
        if key in entry:
            answer[key] = entry[key]
    return phase, step, json.dumps(answer), False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"

    def log_message(self, fmt, *args):  # quiet: the JSON log says what happened
        pass

    # ---- plumbing ----

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return raw.decode("utf-8"), json.loads(raw or b"{}")
        except ValueError:
            return raw.decode("utf-8", "replace"), {}

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events):
        """events: (event name or None, data dict or str)."""
        chunks = []
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def key_sent(self, query):
        auth = self.headers.get("authorization") or ""
        for sent in (
            auth[7:] if auth.lower().startswith("bearer ") else None,
            self.headers.get("x-api-key"),
            self.headers.get("x-goog-api-key"),
            (query.get("key") or [None])[0],
        ):
            if sent:
                return sent
        return None

    def record(self, api, body, phase, step, usage, extra=None):
        query = parse_qs(urlparse(self.path).query)
        sent = self.key_sent(query)
        tools = []
        for t in body.get("tools") or []:
            if isinstance(t, dict):
                name = t.get("name") or (t.get("function") or {}).get("name") or t.get("type")
                if name:
                    tools.append(name)
                for decl in t.get("functionDeclarations") or []:
                    tools.append(decl.get("name"))
        line = {
            "api": api,
            "method": self.command,
            "path": urlparse(self.path).path,
            "phase": phase,
            "step": step,
            "usage": usage,
            "key_ok": None if self.server.key is None else sent == self.server.key,
            "key_sent": sent is not None,
            "model": body.get("model") or self.model_in_path(),
            "stream": bool(body.get("stream")) or "stream" in self.path.lower(),
            "tools": tools,
        }
        if self.server.marker is not None:
            # Whether the request carried text planted where the CLI must not read it.
            line["marker_seen"] = self.server.marker in json.dumps(body)
        outputs = [str(i.get("output"))[:300] for i in body.get("input") or []
                   if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if outputs:
            line["tool_outputs"] = outputs
        if extra:
            line.update(extra)
        with LOCK:
            with open(self.server.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")

    def model_in_path(self):
        m = re.search(r"/models/([^/:]+)", urlparse(self.path).path)
        return m.group(1) if m else None

    def refuse_key(self):
        query = parse_qs(urlparse(self.path).query)
        if self.server.key is not None and self.key_sent(query) != self.server.key:
            return True
        return False

    # ---- routes ----

    def do_GET(self):
        path = urlparse(self.path).path
        self.record("get", {}, None, None, None)
        if path.endswith("/models"):
            model = self.server.model
            self.send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}],
                                 "models": [{"slug": model, "name": f"models/{model}"}]})
        else:
            self.send_json(404, {"error": {"message": f"no route {path}"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        path = urlparse(self.path).path
        text, body = self.body()
        if self.refuse_key():
            self.record("refused", body, None, None, None)
            self.send_json(401, {"error": {"message": "bad key", "type": "authentication_error"}})
            return
        if path.endswith("/responses"):
            self.api_responses(text, body)
        elif path.endswith("/chat/completions"):
            self.api_chat(text, body)
        elif path.endswith("/messages/count_tokens"):
            self.record("anthropic-count", body, None, None, None)
            self.send_json(200, {"input_tokens": 10})
        elif path.endswith("/messages"):
            self.api_anthropic(text, body)
        elif ":countTokens" in path:
            self.record("gemini-count", body, None, None, None)
            self.send_json(200, {"totalTokens": 10})
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            self.api_gemini(text, body, ":streamGenerateContent" in path)
        else:
            self.record("unknown", body, None, None, None)
            self.send_json(404, {"error": {"message": f"no route {path}"}})

    # -- OpenAI Responses (codex) --
    def api_responses(self, text, body):
        phase, step, answer, tool = answer_for(self.server.scenario, text, self.server.act, self.server.state, "openai-responses")
        u = RESPONSES_USAGE
        usage = {"input_tokens": u["input"], "input_tokens_details": {"cached_tokens": u["cached"]},
                 "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
                 "total_tokens": u["input"] + u["output"]}
        rid = f"resp_{step if step is not None else 'side'}"
        if tool:
            names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
            # 1: its shell tool (codex must not offer one: it then refuses the call); 2: a
            # hosted web search, which the CLI reports as done.
            item = shell_call(names, self.server.act_kind or ("web_search" if tool == 2 else None))
        else:
            item = {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}]}
        self.record("openai-responses", body, phase, step, {"input": u["input"], "output": u["output"]},
                    {"tool_call": (item.get("name") or item.get("type")) if tool else None,
                     "reasoning": body.get("reasoning")})
        response = {"id": rid, "object": "response", "status": "completed", "model": body.get("model"),
                    "output": [item], "usage": usage}
        if not body.get("stream"):
            self.send_json(200, response)
            return
        events = [("response.created", {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}}),
                  ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {**item, **({"content": []} if not tool else {})}})]
        if not tool:
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": answer}))
        events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                   ("response.completed", {"type": "response.completed", "response": response})]
        self.send_sse(events)

    # -- OpenAI Chat Completions --
    def api_chat(self, text, body):
        phase, step, answer, tool = answer_for(self.server.scenario, text, self.server.act, self.server.state)
        u = CHAT_USAGE
        usage = {"prompt_tokens": u["prompt"], "completion_tokens": u["completion"], "total_tokens": u["prompt"] + u["completion"]}
        self.record("chat-completions", body, phase, step, {"input": u["prompt"], "output": u["completion"]})
        message = {"role": "assistant", "content": answer}
        if tool:
            message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"command": ["sh", "-c", "echo acted > acted.txt"]})}}]}
        if not body.get("stream"):
            self.send_json(200, {"id": "chatcmpl_1", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}], "usage": usage})
            return
        delta = {"role": "assistant", "content": answer} if not tool else message
        self.send_sse([(None, {"id": "chatcmpl_1", "object": "chat.completion.chunk", "model": body.get("model"), "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                       (None, {"id": "chatcmpl_1", "object": "chat.completion.chunk", "model": body.get("model"), "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if tool else "stop"}], "usage": usage}),
                       (None, "[DONE]")])

    # -- Anthropic Messages (claude) --
    def api_anthropic(self, text, body):
        phase, step, answer, tool = answer_for(self.server.scenario, text, self.server.act, self.server.state)
        u = ANTHROPIC_USAGE
        model = body.get("model") or self.server.model
        usage = {"input_tokens": u["input"], "cache_creation_input_tokens": u["cache_creation"],
                 "cache_read_input_tokens": u["cache_read"], "output_tokens": u["output"]}
        self.record("anthropic-messages", body, phase, step,
                    {"input": u["input"] + u["cache_creation"] + u["cache_read"], "output": u["output"]},
                    {"tool_call": "Bash" if tool else None})
        if tool:
            block = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "echo acted > acted.txt"}}
        else:
            block = {"type": "text", "text": answer}
        message = {"id": f"msg_{step}", "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": "tool_use" if tool else "end_turn",
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self.send_json(200, message)
            return
        start_block = dict(block, text="") if not tool else dict(block, input={})
        events = [("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                             "usage": {**usage, "output_tokens": 1}}}),
                  ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start_block})]
        if tool:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        else:
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": answer}}))
        events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                      "usage": {"output_tokens": u["output"]}}),
                   ("message_stop", {"type": "message_stop"})]
        self.send_sse(events)

    # -- Gemini (gemini-cli) --
    def api_gemini(self, text, body, stream):
        phase, step, answer, tool = answer_for(self.server.scenario, text, self.server.act, self.server.state)
        u = GEMINI_USAGE
        self.record("gemini", body, phase, step, {"input": u["prompt"], "output": u["candidates"]},
                    {"tool_call": "run_shell_command" if tool else None})
        if tool:
            part = {"functionCall": {"name": "run_shell_command", "args": {"command": "echo acted > acted.txt"}}}
        else:
            part = {"text": answer}
        chunk = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": u["prompt"], "candidatesTokenCount": u["candidates"],
                                   "totalTokenCount": u["prompt"] + u["candidates"]},
                 "modelVersion": self.model_in_path() or self.server.model}
        if stream:
            self.send_sse([(None, chunk)])
        else:
            self.send_json(200, chunk)


def shell_call(names, kind=None):
    """A Responses function call to whichever shell tool the CLI offered (or, with --act-kind,
    another output item: `local_shell`, `web_search`, `apply_patch`, `view_image`, or any
    function name; for finding out what a codex version does with each)."""
    if kind == "local_shell":
        return {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "status": "completed",
                "action": {"type": "exec", "command": ["sh", "-c", "echo acted > acted.txt"]}}
    if kind == "web_search":
        return {"type": "web_search_call", "id": "ws_1", "status": "completed",
                "action": {"type": "search", "query": "craik"}}
    if kind == "apply_patch":
        return {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "status": "completed",
                "input": "*** Begin Patch\n*** Add File: acted.txt\n+acted\n*** End Patch\n"}
    if kind == "view_image":
        return {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "view_image",
                "arguments": json.dumps({"path": "/etc/hostname"}), "status": "completed"}
    if kind:
        return {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": kind,
                "arguments": json.dumps({"command": ["sh", "-c", "echo acted > acted.txt"], "cmd": "echo acted > acted.txt"}), "status": "completed"}
    if "exec_command" in names:
        name, args = "exec_command", {"cmd": "echo acted > acted.txt"}
    elif "shell_command" in names:
        name, args = "shell_command", {"command": "echo acted > acted.txt"}
    else:
        name, args = "shell", {"command": ["sh", "-c", "echo acted > acted.txt"]}
    return {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--scenario", required=True)
    p.add_argument("--key")
    p.add_argument("--act", action="store_true")
    p.add_argument("--act-kind")
    p.add_argument("--model", default="fake-model")
    p.add_argument("--marker", help="log whether each request body holds this text")
    p.add_argument("--port", type=int, default=0, help="default: an ephemeral one")
    a = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    server.daemon_threads = True
    with open(a.scenario, encoding="utf-8") as f:
        server.scenario = json.load(f)
    server.log, server.key, server.act, server.model, server.state = a.log, a.key, a.act, a.model, {}
    server.marker = a.marker
    server.act_kind = a.act_kind
    with open(a.port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(a.port_file + ".tmp", a.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
