#!/usr/bin/env python3
"""Re-signs a journal after changing one receipt, as the holder of its key could: every
`prev`, checkpoint (size, RFC 9162 root, last receipt hash) and signature made anew, so the
result verifies as a journal. Used by make-strict.sh for vectors about what a verifier must
accept or refuse beyond the chain (docs/vectors/README.md).

Usage: resign.py KEY.pem IN.jsonl SEQ 'JSON object merged into that receipt' > OUT.jsonl
"""
import base64, hashlib, json, sys

from cryptography.hazmat.primitives import serialization


def canonical(value):
    # RFC 8785 for what receipts hold (integers only, ASCII keys).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def leaf(data):
    return hashlib.sha256(b"\x00" + data).digest()


def root(leaves):
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + root(leaves[:k]) + root(leaves[k:])).digest()


key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), password=None)
lines = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
seq, change = int(sys.argv[3]), json.loads(sys.argv[4])
out, prev, leaves = [], None, []
for raw in lines:
    env = json.loads(raw)
    body = json.loads(base64.b64decode(env["payload"]))
    if "seq" in body:
        if body["seq"] == seq:
            body.update(change)
        body["prev"] = prev
        payload = canonical(body).encode()
        digest = hashlib.sha256(payload).digest()
        prev = "sha256:" + digest.hex()
        leaves.append(leaf(digest))
    else:
        body["tree_size"] = len(leaves)
        body["root_hash"] = "sha256:" + (root(leaves) if leaves else hashlib.sha256(b"").digest()).hex()
        body["last_receipt_hash"] = prev
        payload = canonical(body).encode()
    ptype = env["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d " % (len(ptype), ptype, len(payload)) + payload
    env["payload"] = base64.b64encode(payload).decode()
    env["signatures"][0]["sig"] = base64.b64encode(key.sign(pae)).decode()
    out.append(json.dumps(env, separators=(",", ":")).encode())
sys.stdout.buffer.write(b"\n".join(out) + b"\n")
