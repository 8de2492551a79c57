#!/usr/bin/env python3
"""An independent receipt-journal verifier, written from docs/receipts.md alone.

It shares no code with Craik: Python's json, hashlib and base64, and `cryptography` for
ed25519. A test runs it beside `craik receipts verify` over clean and tampered journals and
requires the same verdict, so the spec is enough to verify what Craik writes.

Usage: independent_verifier.py PUBLIC_KEY.pem JOURNAL...
Prints one line per journal: `valid` or `invalid: <why>`.

Or: independent_verifier.py --hashes PUBLIC_KEY.pem RUN_DIR
Verifies the run's journal, then recomputes `request_hash` and `action_sha256` of every
decision and outcome receipt on an action from the action records in the run's
`events.jsonl` ("Recomputing the hashes"); prints the counts it matched as JSON, or exits
non-zero naming the first receipt whose hash differs from the recipe's.
"""

import base64
import hashlib
import json
import re
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

RECEIPT = "application/vnd.craik.capability-receipt+json; version=0.1.0"
CHECKPOINT = "application/vnd.craik.checkpoint+json; version=0.1.0"
MAX_SAFE = 2**53 - 1
RECEIPT_FIELDS = {
    "schema", "version", "id", "task_id", "actor", "capability", "target", "policy_profile",
    "fail_open", "reason", "result", "redacted", "created_at", "seq", "prev", "run_id",
    "policy_set", "request_hash", "decision", "determining_policies", "decided_by", "mode",
    "kernel_version", "key_id",
}
CHECKPOINT_FIELDS = {
    "schema", "version", "run_id", "index", "tree_size", "root_hash", "last_receipt_hash",
    "final", "created_at", "key_id",
}
TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$")


class Invalid(Exception):
    pass


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Invalid("duplicate key")
    return dict(pairs)


def check_numbers(value):
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, float):
        raise Invalid("a float in signed data")
    if isinstance(value, int):
        if abs(value) > MAX_SAFE:
            raise Invalid("an integer outside +-(2^53-1)")
        return
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        check_numbers(item)


def canonical(value):
    # RFC 8785 for what the spec allows (integers only, BMP keys): sorted keys, no spaces,
    # minimal escapes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def instant(text):
    m = TIME.match(text)
    if not m:
        raise Invalid(f"created_at `{text}` is not RFC 3339 UTC with Z")
    whole = tuple(int(g) for g in m.groups()[:6])
    nanos = int((m.group(7) or "0").ljust(9, "0"))
    return whole + (nanos,)


def leaf(data):
    return hashlib.sha256(b"\x00" + data).digest()


def root(leaves):
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + root(leaves[:k]) + root(leaves[k:])).digest()


def verify(key, key_id, data):
    if not data:
        raise Invalid("empty journal")
    if not data.endswith(b"\n"):
        raise Invalid("torn last line")
    state = {"seq": 0, "prev": None, "run": None, "time": None, "leaves": [], "index": 0,
             "closed": False}
    number = 0
    for number, raw in enumerate(data[:-1].split(b"\n"), start=1):
        try:
            verify_line(key, key_id, raw, state)
        except Invalid as e:
            raise Invalid(f"line {number}: {e}") from None
    if not state["closed"]:
        # Reported at the journal's last line: the final checkpoint should follow it.
        raise Invalid(f"line {number}: not closed")


def verify_line(key, key_id, raw, state):
    if state["closed"]:
        raise Invalid("an entry after the final checkpoint")
    try:
        envelope = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
        ptype, payload_b64 = envelope["payloadType"], envelope["payload"]
        [signature] = envelope["signatures"]
        keyid, sig_b64 = signature["keyid"], signature["sig"]
    except (ValueError, KeyError, TypeError) as e:
        raise Invalid(f"not an envelope: {e}") from None
    compact = json.dumps(
        {"payloadType": ptype, "payload": payload_b64,
         "signatures": [{"keyid": keyid, "sig": sig_b64}]},
        separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if raw != compact:
        raise Invalid("not the envelope's compact form")
    payload = base64.b64decode(payload_b64, validate=True)
    if base64.b64encode(payload).decode() != payload_b64:
        raise Invalid("non-canonical base64")
    if keyid != key_id:
        raise Invalid("signed by an untrusted key")
    pae = b"DSSEv1 %d %s %d " % (len(ptype.encode()), ptype.encode(), len(payload)) + payload
    signature = base64.b64decode(sig_b64, validate=True)
    # Strict, cofactorless ed25519 (docs/receipts.md): OpenSSL checks the cofactorless
    # equation and S < L, but accepts a small-order R (the identity included), which the spec
    # refuses: a key holder can make one verify for any message.
    r = bytearray(signature[:32])
    if len(r) == 32:
        r[31] &= 0x7F
    if bytes(r) in SMALL_ORDER:
        raise Invalid("a signature whose R is a small-order point (refused by strict ed25519)")
    try:
        key.verify(signature, pae)
    except InvalidSignature:
        raise Invalid("signature does not verify") from None
    body = json.loads(payload.decode("utf-8"), object_pairs_hook=no_duplicates)
    check_numbers(body)
    if canonical(body).encode("utf-8") != payload:
        raise Invalid("payload is not canonical JSON")
    if body.get("key_id") != keyid:
        raise Invalid("key_id differs from the envelope's keyid")
    if state["run"] is None:
        state["run"] = body.get("run_id")
    if body.get("run_id") != state["run"]:
        raise Invalid("another run_id")
    at = instant(body.get("created_at", ""))
    if state["time"] is not None and at < state["time"]:
        raise Invalid("time went back")
    state["time"] = at
    if ptype == RECEIPT:
        receipt(body, payload, state)
    elif ptype == CHECKPOINT:
        checkpoint(body, state)
    else:
        raise Invalid("unknown payload type")


def receipt(body, payload, state):
    fields = set(body)
    if not RECEIPT_FIELDS <= fields or fields - RECEIPT_FIELDS - {"action"}:
        raise Invalid("receipt fields are not the spec's")
    if (body["schema"], body["version"]) != ("craik.capability_receipt", "0.1.0"):
        raise Invalid("schema/version")
    if body["seq"] != state["seq"] or body["prev"] != state["prev"]:
        raise Invalid("seq/prev chain broken")
    run = body["run_id"]
    if body["id"] != f"receipt_{run[4:] if run.startswith('run_') else run}_{body['seq']}":
        raise Invalid("id")
    kind, by = body["decided_by"]["kind"], body["decided_by"]["by"]
    ok = {
        "approval": by.startswith("user:"),
        "operator": by.startswith("user:"),
        "default": by == "" and body["decision"] == "deny" and not body["determining_policies"],
        "policy": by == "", "kernel": by == "", "outcome": by == "",
    }.get(kind, False)
    if not ok:
        raise Invalid("decided_by form")
    digest = hashlib.sha256(payload).digest()
    state["leaves"].append(leaf(digest))
    state["prev"] = "sha256:" + digest.hex()
    state["seq"] += 1


def checkpoint(body, state):
    if set(body) != CHECKPOINT_FIELDS:
        raise Invalid("checkpoint fields are not the spec's")
    if (body["schema"], body["version"]) != ("craik.receipt_checkpoint", "0.1.0"):
        raise Invalid("checkpoint schema/version")
    if body["index"] != state["index"] or body["tree_size"] != state["seq"]:
        raise Invalid("checkpoint index/size")
    if body["last_receipt_hash"] != state["prev"]:
        raise Invalid("checkpoint last_receipt_hash")
    if body["root_hash"] != "sha256:" + root(state["leaves"]).hex():
        raise Invalid("checkpoint Merkle root")
    state["index"] += 1
    state["closed"] = body["final"]


# Encodings of the ed25519 points of small order (sign bit cleared), as libsodium lists them:
# a key among them verifies forged signatures, so the spec has it refused at load.
SMALL_ORDER = {bytes.fromhex(h) for h in (
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
)}


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def normalised_path(workspace, raw):
    # The spec's rule for a `repo` target: `.` and empty segments dropped, `..` pops a
    # segment, an absolute path under the workspace made relative.
    if raw.startswith("/"):
        if raw != workspace and not raw.startswith(workspace.rstrip("/") + "/"):
            raise Invalid(f"target `{raw}` lies outside the workspace")
        raw = raw[len(workspace):]
    parts = []
    for segment in raw.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise Invalid(f"target `{raw}` climbs above the workspace")
            parts.pop()
        else:
            parts.append(segment)
    return "/".join(parts)


def request_hash(receipt, proposed, workspace, run):
    # docs/receipts.md, "Recomputing the hashes": a decision or outcome on an action.
    family = proposed["capability"].split(".")[0]
    target = proposed.get("target")
    if family == "repo":
        target = normalised_path(workspace, target)
    elif family == "shell":
        target = proposed["argv"]
    elif family == "memory":
        target = target if target is not None else "team"
    elif family in ("git", "github"):
        target = target if target is not None else "origin"
    request = {
        "capability": proposed["capability"],
        "operation": proposed["operation"],
        "profile": receipt["policy_profile"],
        "runner": receipt["actor"],
        "target": target,
        "task_id": receipt["task_id"],
    }
    if proposed.get("content") is not None:
        request["payload"] = digest(proposed["content"].encode("utf-8"))
    elif proposed.get("edits"):
        # Not RFC 8785: each edit's keys in the order `old`, `new`.
        edits = [{"old": e["old"], "new": e["new"]} for e in proposed["edits"]]
        request["payload"] = digest(
            json.dumps(edits, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    elif proposed.get("argv") is not None:
        request["payload"] = digest(
            canonical({"argv": proposed["argv"], "run": run}).encode("utf-8"))
    return digest(canonical(request).encode("utf-8"))


def recompute(key, key_id, run_dir):
    """Recomputes `request_hash` and `action_sha256` of every receipt on an action of a run's
    (verified) journal from the action records in its `events.jsonl`. Returns the counts."""
    journal = open(f"{run_dir}/receipts.jsonl", "rb").read()
    verify(key, key_id, journal)
    actions = {}
    for line in open(f"{run_dir}/events.jsonl", encoding="utf-8"):
        event = json.loads(line)
        if event.get("event") == "step_result":
            for record in event.get("actions", []):
                actions[record["id"]] = record
    receipts = []
    for raw in journal[:-1].split(b"\n"):
        envelope = json.loads(raw)
        if envelope["payloadType"] == RECEIPT:
            receipts.append(json.loads(base64.b64decode(envelope["payload"])))
    if receipts[0]["capability"] != "run.inputs":
        raise Invalid("the first receipt is not run.inputs")
    first = receipts[0]["result"]["metadata"]
    workspace = first["workspace"]
    counts = {"request_hash": 0, "action_sha256": 0, "run": 0}
    # run.inputs: the inputs' bytes, their grants, envelope and intent (`null` when none).
    raw_inputs = open(f"{run_dir}/inputs.json", "rb").read()
    inputs = json.loads(raw_inputs)
    grants = sorted(canonical(g).encode("utf-8") for g in inputs["grants"])
    signed_inputs = {
        "request_hash": receipts[0]["request_hash"],
        "inputs_sha256": digest(raw_inputs),
        "grants_sha256": digest(b"[" + b",".join(grants) + b"]"),
        "envelope_sha256": digest(canonical(inputs.get("envelope")).encode("utf-8")),
        "intent_sha256": digest(canonical(inputs.get("intent")).encode("utf-8")),
    }
    for name, want in signed_inputs.items():
        if first.get(name, receipts[0]["request_hash"]) != want:
            raise Invalid(f"seq 0: {name} differs from the recipe's")
    counts["run"] += 1
    runs = {}
    for r in receipts:
        cap, reason = r["capability"], r["reason"]
        own = None
        if cap == "run.parked":
            own = digest(b"blocked:" + reason.encode("utf-8"))
        elif cap == "run.closed":
            own = digest(f"{r['result']['metadata']['status']}:{reason}".encode("utf-8"))
        elif cap in ("run.cancel", "run.resume", "run.recover"):
            own = digest(canonical({"act": cap[4:], "by": r["decided_by"]["by"],
                                    "reason": reason, "run_id": r["run_id"]}).encode("utf-8"))
        elif cap == "memory.propose" and r["request_hash"] != "":
            own = request_hash(r, {"capability": cap, "operation": "propose",
                                   "target": r["target"]}, workspace, None)
        if own is not None:
            if r["request_hash"] != own:
                raise Invalid(f"seq {r['seq']}: {cap} request_hash differs from the recipe's")
            counts["run"] += 1
        record = actions.get(r.get("action"))
        if record is None or r["decided_by"]["kind"] not in (
                "policy", "default", "approval", "outcome", "kernel"):
            continue
        meta = r["result"]["metadata"]
        if "action_sha256" in meta:
            if meta["action_sha256"] != digest(canonical(record).encode("utf-8")):
                raise Invalid(f"seq {r['seq']}: action_sha256 differs from the recipe's")
            counts["action_sha256"] += 1
        if r["request_hash"] == "":
            continue
        proposed = record["proposed"]
        if proposed.get("argv") is not None and r["decided_by"]["kind"] != "outcome":
            shown = json.dumps(proposed["argv"], separators=(",", ":"), ensure_ascii=False)
            runs[record["id"]] = r["target"][len(shown) + 2:-1]
        want = request_hash(r, proposed, workspace, runs.get(record["id"]))
        if r["request_hash"] != want:
            raise Invalid(f"seq {r['seq']}: request_hash {r['request_hash']}, recipe {want}")
        counts["request_hash"] += 1
    return counts


def es_number(x):
    """A JSON number's text in RFC 8785: ECMAScript's Number::toString (shortest digits that
    round-trip, exponent form only below 1e-6 or from 1e21)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Invalid(f"not a number: {x!r}")
    if isinstance(x, int):
        if abs(x) > MAX_SAFE:
            raise Invalid("an integer outside +-(2^53-1)")
        return str(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise Invalid("NaN or infinity")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    mantissa, _, exp = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    zeros = len(digits) - len(digits.lstrip("0"))
    s = digits.lstrip("0").rstrip("0")
    n = len(whole) - zeros + int(exp or 0)
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = n - 1
    return (s[0] + ("." + s[1:] if k > 1 else "")) + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def canonical_es(value):
    """RFC 8785 with floats: keys sorted by UTF-16 code units at every level, numbers as
    ECMAScript writes them, strings with the minimal escapes."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical_es(v)
                              for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_es(v) for v in value) + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return es_number(value)


def content_sha256(proposal):
    """A memory proposal's `content_sha256` (docs/receipts.md, "Memory reviews"): the proposal
    as its run wrote it — status pending, review fields and handoff_id null — in RFC 8785."""
    bare = dict(proposal)
    bare.update(status="pending", decided_by=None, decided_at=None, decision_reason=None,
                handoff_id=None)
    return canonical_es(bare)


def main():
    if sys.argv[1] == "--content":
        # independent_verifier.py --content PROPOSAL.json: its canonical text's sha256, and
        # the text itself on stderr.
        text = content_sha256(json.load(open(sys.argv[2], encoding="utf-8")))
        sys.stderr.write(text)
        print(digest(text.encode("utf-8")))
        return
    if sys.argv[1] == "--hashes":
        # independent_verifier.py --hashes PUBLIC_KEY.pem RUN_DIR: recompute, print the counts.
        key, key_id = load_key(sys.argv[2])
        try:
            counts = recompute(key, key_id, sys.argv[3])
        except Invalid as e:
            sys.exit(f"invalid: {e}")
        print(json.dumps(counts, sort_keys=True))
        return
    key, key_id = load_key(sys.argv[1])
    for path in sys.argv[2:]:
        try:
            verify(key, key_id, open(path, "rb").read())
            print("valid")
        except (Invalid, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            print(f"invalid: {e}")


def load_key(path):
    pem = open(path, "rb").read()
    key = serialization.load_pem_public_key(pem)
    raw = bytearray(key.public_bytes(serialization.Encoding.Raw,
                                     serialization.PublicFormat.Raw))
    raw[31] &= 0x7F
    if bytes(raw) in SMALL_ORDER:
        sys.exit(f"{path}: weak (small-order) ed25519 public key refused")
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return key, "sha256:" + hashlib.sha256(der).hexdigest()


if __name__ == "__main__":
    main()
