#!/usr/bin/env node
// A minimal Craik runner adapter in Node, written from docs/protocol.md alone (craik.channel/1).
//
// It plans, proposes nothing, observes nothing and stops at the first evaluate: the smallest
// runner that speaks the protocol correctly; given `--fixture SCENARIO.json` it answers each
// step from that script instead. No dependencies: Node's standard library only.
// stdout is the channel; diagnostics go to stderr.
//
//   craik runners conformance -- node examples/adapters/node/adapter.js
'use strict';

const PROTOCOL = 'craik.channel/1';
let maxLine = 1024 * 1024;

// The id it claims must be its registry entry's matrix's runner id (docs/protocol.md): an inline
// matrix of the entry `node-example` defaults to `runner_node_example`. `--runner-id ID`
// changes it.
const argv = process.argv.slice(2);
function option(name) {
  const at = argv.indexOf(name);
  return at >= 0 && argv[at + 1] ? argv[at + 1] : null;
}
const runnerId = option('--runner-id') || 'runner_node_example';

// `--fixture SCENARIO.json` (a craik.fixture_scenario, passed by a registry entry's
// `scenario_arg`): step n of a run is answered with the scenario's step n, so the example can
// drive a whole governed run (examples/docs-review). Without it every step does nothing.
let scenario = null;
if (option('--fixture')) {
  const fs = require('fs');
  scenario = JSON.parse(fs.readFileSync(option('--fixture'), 'utf8'));
  if (!isObject(scenario) || !Array.isArray(scenario.steps)) {
    process.stderr.write('--fixture: not a craik.fixture_scenario\n');
    process.exit(2);
  }
}

const RUNNER = {
  schema: 'craik.runner_metadata',
  version: '0.1.0',
  id: runnerId,
  name: 'Node example runner',
  adapter: 'node-example',
  adapter_version: '0.1.0',
  mode: 'live',
  capabilities: ['repo.read'],
  metadata: {},
};

const MATRIX = {
  schema: 'craik.runner_capability_matrix',
  version: '0.1.0',
  runner: RUNNER,
  trust: {
    level: 'low',
    boundary: 'Example adapter: answers every step without doing anything.',
    default_grant_posture: 'deny-by-default',
    requires_receipts: true,
    requires_redaction: true,
    notes: [],
  },
  capabilities: [{ name: 'repo.read', support: 'supported', grant_required: false, notes: null }],
  policy_notes: ['Proposes nothing; exists to show the protocol.'],
};

function send(message) {
  process.stdout.write(JSON.stringify(message) + '\n');
}

function error(id, code, message) {
  send({ id, error: { code, message } });
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// JSON.parse keeps the last of duplicate keys; the protocol wants them refused.
function hasDuplicateKeys(text) {
  const stack = [];
  let i = 0;
  let expectKey = false;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (expectKey && stack.length) {
        const key = text.slice(i, j + 1);
        const seen = stack[stack.length - 1];
        if (seen.has(key)) return true;
        seen.add(key);
      }
      expectKey = false;
      i = j + 1;
      continue;
    }
    if (c === '{') {
      stack.push(new Set());
      expectKey = true;
    } else if (c === '[') {
      stack.push(null);
    } else if (c === '}' || c === ']') {
      stack.pop();
    } else if (c === ',') {
      expectKey = stack.length > 0 && stack[stack.length - 1] !== null;
    }
    i += 1;
  }
  return false;
}

// The scenario's step for this request (`context.step`), or null when there is none.
function scripted(request) {
  const n = isObject(request.context) ? request.context.step : undefined;
  return Number.isInteger(n) && n >= 0 && n < scenario.steps.length ? scenario.steps[n] : null;
}

function stepResult(request) {
  let phase = request.phase;
  let status = 'completed';
  let summary = `${phase}: nothing to do`;
  let observed = {};
  let diagnostics = [];
  if (scenario) {
    const step = scripted(request);
    if (!step) return null;
    // The scripted phase, not the asked one: the host checks it.
    phase = step.phase;
    status = step.status || 'completed';
    summary = step.summary;
    observed = Object.assign({}, step.outputs || {});
    if (step.proposed_actions && step.proposed_actions.length) observed.proposed_actions = step.proposed_actions;
    if (step.memory_proposals && step.memory_proposals.length) observed.memory_proposals = step.memory_proposals;
    if (step.next) observed.next = step.next;
    diagnostics = step.diagnostics || [];
  } else if (phase === 'evaluate') {
    observed.next = 'stop';
  }
  return {
    schema: 'craik.runner_step_result',
    version: '0.1.0',
    id: String(request.id).replace('runner_step_request_', 'runner_step_result_'),
    request_id: request.id,
    run_id: request.run_id,
    task_id: request.task_id,
    phase,
    runner: request.runner,
    status,
    summary,
    observed_output: observed,
    diagnostics,
    receipt_ids: [],
    memory_proposal_ids: [],
    artifacts: [],
    redacted: false,
    created_at: request.created_at,
  };
}

let initialized = false;

// Returns false to stop reading (shutdown).
function handle(line) {
  if (!line.trim()) return true;
  let message;
  try {
    message = JSON.parse(line);
  } catch (e) {
    error(null, -32700, `not JSON: ${e.message}`);
    return true;
  }
  if (!isObject(message)) {
    error(null, -32600, 'not an object');
    return true;
  }
  if (hasDuplicateKeys(line)) {
    error(null, -32700, 'not JSON: a duplicate key');
    return true;
  }
  const id = Number.isInteger(message.id) ? message.id : null;
  const { method, params } = message;
  if (typeof method !== 'string') {
    error(id, -32600, 'no method');
    return true;
  }
  if (method === 'cancel') return true; // steps finish before the next line is read
  const extra = Object.keys(message).filter((k) => !['id', 'method', 'params'].includes(k));
  if (extra.length || !isObject(params)) {
    error(id, -32602, 'unexpected fields or params');
    return true;
  }
  if (method === 'initialize') {
    const keys = Object.keys(params).sort().join(',');
    if (keys !== 'host,limits,protocol_version') {
      error(id, -32602, 'initialize params are protocol_version, host, limits');
      return true;
    }
    if (params.protocol_version !== PROTOCOL) {
      error(id, -32600, `only ${PROTOCOL} is supported`);
      return true;
    }
    const limit = isObject(params.limits) ? params.limits.max_line_bytes : undefined;
    if (Number.isInteger(limit)) maxLine = Math.max(1024, limit);
    initialized = true;
    send({ id, result: { protocol_version: PROTOCOL, runner: RUNNER, matrix: MATRIX } });
  } else if (method === 'step') {
    if (Object.keys(params).join(',') !== 'request' || !isObject(params.request)) {
      error(id, -32602, 'step params are {request}');
      return true;
    }
    if (!initialized) {
      error(id, -32600, 'initialize first');
      return true;
    }
    const request = params.request;
    send({ method: 'event', params: { request: id, kind: 'log', level: 'info', message: `step ${request.phase}` } });
    const result = stepResult(request);
    if (!result) {
      error(id, 1, `the scenario has no step ${JSON.stringify(request.context && request.context.step)}`);
      return true;
    }
    send({ id, result: { result } });
  } else if (method === 'shutdown') {
    send({ id, result: {} });
    return false;
  } else {
    error(id, -32601, `unknown method ${JSON.stringify(method.slice(0, 64))}`);
  }
  return true;
}

// Lines are split on bytes; one longer than the limit is skipped to its end and refused.
let pending = [];
let pendingBytes = 0;
let skipping = false;
let stopped = false;

function onLine(bytes) {
  if (stopped) return;
  if (!handle(bytes.toString('utf8').replace(/\r$/, ''))) {
    stopped = true;
    process.stdin.pause();
    process.stdout.write('', () => process.exit(0));
  }
}

process.stdin.on('data', (chunk) => {
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(10, start);
    const piece = chunk.subarray(start, nl < 0 ? chunk.length : nl);
    if (!skipping) {
      pending.push(piece);
      pendingBytes += piece.length;
      if (pendingBytes > maxLine) {
        skipping = true;
        pending = [];
        pendingBytes = 0;
      }
    }
    if (nl < 0) break;
    if (skipping) {
      skipping = false;
      error(null, -32600, `line longer than ${maxLine} bytes`);
    } else {
      const line = Buffer.concat(pending);
      pending = [];
      pendingBytes = 0;
      onLine(line);
      if (stopped) return;
    }
    start = nl + 1;
  }
});

process.stdin.on('end', () => process.exit(0)); // EOF: same as shutdown
