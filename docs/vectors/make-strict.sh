#!/bin/sh
# Regenerates the vectors of issue 31 item 5 that carry their own key (see README.md here):
# small-order-r/ (a signature whose R is the identity point, made by the key's holder) and
# checkpoint-note/ (a journal, its last checkpoint line and its C2SP note, signed under a key
# name whose verifier key's base64 holds `+`). Called by make.sh; runs alone too.
# Usage: docs/vectors/make-strict.sh PATH/TO/craik   (from the repository root)
set -eu
craik=$1
out=docs/vectors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# small-order-r: receipt 2 of a 3-receipt journal re-signed with R = the identity and
# S = H(R ‖ A ‖ M)·a mod L, which the cofactorless equation [S]B = R + [k]A accepts and strict
# ed25519 refuses (R of small order).
"$craik" keys generate --out "$tmp/sor" >/dev/null
"$craik" bench receipts --count 3 --checkpoint-every 4 --key "$tmp/sor/signing.key.pem" --out "$tmp/sor.jsonl" >/dev/null
mkdir -p "$out/small-order-r"
cp "$tmp/sor/signing.pub.pem" "$out/small-order-r/signing.pub.pem"
python3 - "$tmp/sor/signing.key.pem" "$tmp/sor.jsonl" 2 > "$out/small-order-r/journal.jsonl" <<'PY'
import base64, hashlib, json, sys
from cryptography.hazmat.primitives import serialization
L = 2**252 + 27742317777372353535851937790883648493
key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), password=None)
seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                         serialization.NoEncryption())
pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
h = bytearray(hashlib.sha512(seed).digest()[:32])
h[0] &= 248; h[31] &= 127; h[31] |= 64
a = int.from_bytes(h, "little")
lines = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
n = int(sys.argv[3]) - 1
env = json.loads(lines[n])
ptype = env["payloadType"].encode()
payload = base64.b64decode(env["payload"])
m = b"DSSEv1 %d %s %d " % (len(ptype), ptype, len(payload)) + payload
R = bytes([1] + [0] * 31)
k = int.from_bytes(hashlib.sha512(R + pub + m).digest(), "little") % L
sig = base64.b64encode(R + ((k * a) % L).to_bytes(32, "little")).decode()
lines[n] = lines[n].replace(env["signatures"][0]["sig"].encode(), sig.encode())
sys.stdout.buffer.write(b"\n".join(lines) + b"\n")
PY
printf '{\n  "valid": false,\n  "line": 2,\n  "what": "signature"\n}\n' > "$out/small-order-r/expected.json"

# outcome-reason-free: receipt 1 made an outcome (`decided_by` `outcome`) whose reason is not
# `outcome of <action>`: the reason is not part of the form, so the journal is valid.
mkdir -p "$out/outcome-reason-free"
cp "$tmp/sor/signing.pub.pem" "$out/outcome-reason-free/signing.pub.pem"
python3 "$out/resign.py" "$tmp/sor/signing.key.pem" "$tmp/sor.jsonl" 1 \
  '{"decided_by": {"kind": "outcome", "by": ""}, "determining_policies": [], "reason": "wrote docs/page-1.md (a bench outcome: any text)"}' \
  > "$out/outcome-reason-free/journal.jsonl"
printf '{\n  "valid": true,\n  "line": null,\n  "what": null\n}\n' > "$out/outcome-reason-free/expected.json"

# checkpoint-note: a home whose key's verifier key holds `+` in its base64.
i=0
while :; do
  i=$((i + 1))
  [ "$i" -le 64 ] || { echo "no key with + in 64 tries" >&2; exit 1; }
  rm -rf "$tmp/home" "$tmp/journal.jsonl"
  "$craik" keys generate --out "$tmp/home/keys" >/dev/null
  "$craik" bench receipts --count 10 --checkpoint-every 4 --key "$tmp/home/keys/signing.key.pem" --out "$tmp/journal.jsonl" >/dev/null
  "$craik" receipts checkpoint "$tmp/journal.jsonl" --home "$tmp/home" --format json > "$tmp/note.json"
  vkey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verifier_key"])' "$tmp/note.json")
  case "${vkey#*+*+}" in *+*) break ;; esac
done
d="$out/checkpoint-note"
mkdir -p "$d"
cp "$tmp/home/keys/signing.pub.pem" "$d/signing.pub.pem"
cp "$tmp/journal.jsonl" "$d/journal.jsonl"
tail -n 1 "$tmp/journal.jsonl" > "$d/checkpoint.line"
python3 - "$tmp/note.json" "$d" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
open(f"{sys.argv[2]}/note.txt", "w", encoding="utf-8").write(r["note"])
json.dump({"origin": r["origin"], "key_name": r["key_name"], "tree_size": r["tree_size"],
           "root_hash": r["root_hash"], "verifier_key": r["verifier_key"]},
          open(f"{sys.argv[2]}/note.json", "w"), indent=2)
open(f"{sys.argv[2]}/note.json", "a").write("\n")
PY
