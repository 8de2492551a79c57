#!/usr/bin/env python3
"""An independent receipt-journal verifier, written from docs/receipts.md alone.

It shares no code with Craik: Python's json, hashlib and base64, and `cryptography` for
ed25519. A test runs it beside `craik receipts verify` over clean and tampered journals and
requires the same verdict, so the spec is enough to verify what Craik writes.

Usage: independent_verifier.py PUBLIC_KEY.pem JOURNAL...
Prints one line per journal: `valid` or `invalid: <why>`.
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
    for number, raw in enumerate(data[:-1].split(b"\n"), start=1):
        try:
            verify_line(key, key_id, raw, state)
        except Invalid as e:
            raise Invalid(f"line {number}: {e}") from None
    if not state["closed"]:
        raise Invalid("not closed")


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
    try:
        key.verify(base64.b64decode(sig_b64, validate=True), pae)
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


def main():
    pem = open(sys.argv[1], "rb").read()
    key = serialization.load_pem_public_key(pem)
    raw = bytearray(key.public_bytes(serialization.Encoding.Raw,
                                     serialization.PublicFormat.Raw))
    raw[31] &= 0x7F
    if bytes(raw) in SMALL_ORDER:
        sys.exit(f"{sys.argv[1]}: weak (small-order) ed25519 public key refused")
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    key_id = "sha256:" + hashlib.sha256(der).hexdigest()
    for path in sys.argv[2:]:
        try:
            verify(key, key_id, open(path, "rb").read())
            print("valid")
        except (Invalid, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            print(f"invalid: {e}")


if __name__ == "__main__":
    main()
