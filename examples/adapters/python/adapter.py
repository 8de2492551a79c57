#!/usr/bin/env python3
"""A minimal Craik runner adapter, written from docs/protocol.md alone (craik.channel/1).

It plans, proposes nothing, observes nothing and stops at the first evaluate: the smallest
runner that speaks the protocol correctly; given `--fixture SCENARIO.json` it answers each step
from that script instead. Check it with:

    craik runners conformance -- python3 examples/adapters/python/adapter.py

Standard library only. stdout is the channel; diagnostics go to stderr.
"""

import json
import sys

PROTOCOL = "craik.channel/1"
MAX_LINE = 1024 * 1024

RUNNER = {
    "schema": "craik.runner_metadata",
    "version": "0.1.0",
    # Started as `--runner adapter:PROGRAM`, an adapter runs under `--runner-matrix NAME`
    # (default `fixture`) and must claim that matrix's runner id (docs/protocol.md).
    "id": "runner_fixture",
    "name": "Python example runner",
    "adapter": "python-example",
    "adapter_version": "0.1.0",
    "mode": "fixture",
    "capabilities": ["repo.read"],
    "metadata": {},
}

MATRIX = {
    "schema": "craik.runner_capability_matrix",
    "version": "0.1.0",
    "runner": RUNNER,
    "trust": {
        "level": "low",
        "boundary": "Example adapter: answers every step without doing anything.",
        "default_grant_posture": "deny-by-default",
        "requires_receipts": True,
        "requires_redaction": True,
        "notes": [],
    },
    "capabilities": [
        {"name": "repo.read", "support": "supported", "grant_required": False, "notes": None}
    ],
    "policy_notes": ["Proposes nothing; exists to show the protocol."],
}


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def error(id_, code, message):
    send({"id": id_, "error": {"code": code, "message": message}})


def reject_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


# `--fixture SCENARIO.json` (a craik.fixture_scenario, passed by a registry entry's
# `scenario_arg`): step n of a run is answered with the scenario's step n, so the example can
# drive a whole governed run (examples/docs-review). Without it every step does nothing.
SCENARIO = None


def step_result(request):
    phase = request["phase"]
    status, summary, observed, diagnostics = "completed", f"{phase}: nothing to do", {}, []
    if SCENARIO is not None:
        n = request.get("context", {}).get("step")
        steps = SCENARIO["steps"]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(steps):
            return None
        step = steps[n]
        phase = step["phase"]  # the scripted phase, not the asked one: the host checks it
        status = step.get("status", "completed")
        summary = step["summary"]
        observed = dict(step.get("outputs", {}))
        for key in ("proposed_actions", "memory_proposals"):
            if step.get(key):
                observed[key] = step[key]
        if step.get("next"):
            observed["next"] = step["next"]
        diagnostics = step.get("diagnostics", [])
    elif phase == "evaluate":
        observed["next"] = "stop"
    return {
        "schema": "craik.runner_step_result",
        "version": "0.1.0",
        "id": request["id"].replace("runner_step_request_", "runner_step_result_", 1),
        "request_id": request["id"],
        "run_id": request["run_id"],
        "task_id": request["task_id"],
        "phase": phase,
        "runner": request["runner"],
        "status": status,
        "summary": summary,
        "observed_output": observed,
        "diagnostics": diagnostics,
        "receipt_ids": [],
        "memory_proposal_ids": [],
        "artifacts": [],
        "redacted": False,
        "created_at": request["created_at"],
    }


def main():
    global MAX_LINE, SCENARIO
    args = sys.argv[1:]
    if "--fixture" in args and args.index("--fixture") + 1 < len(args):
        with open(args[args.index("--fixture") + 1], encoding="utf-8") as f:
            SCENARIO = json.load(f)
        if not isinstance(SCENARIO, dict) or not isinstance(SCENARIO.get("steps"), list):
            sys.stderr.write("--fixture: not a craik.fixture_scenario\n")
            return 2
    initialized = False
    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline(MAX_LINE + 2)
        if not raw:
            return 0  # EOF: same as shutdown
        if not raw.endswith(b"\n") and len(raw) > MAX_LINE:
            # Too long: skip the rest of the line, then refuse it.
            while True:
                rest = stdin.readline(65536)
                if not rest or rest.endswith(b"\n"):
                    break
            error(None, -32600, f"line longer than {MAX_LINE} bytes")
            continue
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        try:
            message = json.loads(line, object_pairs_hook=reject_duplicates)
        except ValueError as e:
            error(None, -32700, f"not JSON: {e}")
            continue
        if not isinstance(message, dict):
            error(None, -32600, "not an object")
            continue
        id_ = message.get("id") if isinstance(message.get("id"), int) else None
        method = message.get("method")
        params = message.get("params")
        if not isinstance(method, str):
            error(id_, -32600, "no method")
            continue
        if method == "cancel":
            continue  # steps finish before the next line is read: nothing to cancel
        if set(message) - {"id", "method", "params"} or not isinstance(params, dict):
            error(id_, -32602, "unexpected fields or params")
            continue
        if method == "initialize":
            if set(params) != {"protocol_version", "host", "limits"}:
                error(id_, -32602, "initialize params are protocol_version, host, limits")
                continue
            if params["protocol_version"] != PROTOCOL:
                error(id_, -32600, f"only {PROTOCOL} is supported")
                continue
            MAX_LINE = max(1024, int(params["limits"].get("max_line_bytes", MAX_LINE)))
            initialized = True
            send({"id": id_, "result": {"protocol_version": PROTOCOL, "runner": RUNNER, "matrix": MATRIX}})
        elif method == "step":
            if set(params) != {"request"} or not isinstance(params["request"], dict):
                error(id_, -32602, "step params are {request}")
                continue
            if not initialized:
                error(id_, -32600, "initialize first")
                continue
            request = params["request"]
            send({"method": "event", "params": {"request": id_, "kind": "log", "level": "info", "message": f"step {request.get('phase')}"}})
            result = step_result(request)
            if result is None:
                error(id_, 1, f"the scenario has no step {request.get('context', {}).get('step')!r}")
                continue
            send({"id": id_, "result": {"result": result}})
        elif method == "shutdown":
            send({"id": id_, "result": {}})
            return 0
        else:
            error(id_, -32601, f"unknown method {method[:64]!r}")


if __name__ == "__main__":
    sys.exit(main())
