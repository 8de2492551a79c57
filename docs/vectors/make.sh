#!/bin/sh
# Regenerates docs/vectors/ (test vectors for independent verifiers; see README.md here).
# Usage: docs/vectors/make.sh PATH/TO/craik   (from the repository root)
# The vectors are committed: run this only to change them, then review every expected.json.
set -eu
craik=$1
out=docs/vectors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$craik" keys generate --out "$tmp/k" >/dev/null
"$craik" keys generate --out "$tmp/other" >/dev/null
cp "$tmp/k/signing.pub.pem" "$out/signing.pub.pem"
"$craik" bench receipts --count 10 --checkpoint-every 4 --key "$tmp/k/signing.key.pem" --out "$tmp/bench.jsonl" >/dev/null
"$craik" bench receipts --count 10 --checkpoint-every 4 --key "$tmp/other/signing.key.pem" --out "$tmp/other.jsonl" >/dev/null
# A real governed run (docs-review, no approval), signed by the same key.
mkdir -p "$tmp/home/keys"
cp "$tmp/k/signing.key.pem" "$tmp/k/signing.pub.pem" "$tmp/home/keys/"
"$craik" run examples/docs-review --home "$tmp/home" >/dev/null
run=$(ls "$tmp/home/runs")
python3 - "$tmp" "$out" "$run" <<'PY'
import json, os, sys
tmp, out, run = sys.argv[1:]
def lines(p):
    return [l for l in open(p, "rb").read().split(b"\n") if l]
bench = lines(f"{tmp}/bench.jsonl")
real = lines(f"{tmp}/home/runs/{run}/receipts.jsonl")
def edit(f):
    l = list(bench); f(l); return l
def swap(l): l[1], l[2] = l[2], l[1]
def space(l): l[1] = l[1].replace(b'":"', b'": "', 1)
def cr(l): l[1] = l[1] + b"\r"
def payload(l):
    at = l[3].index(b'"payload":"') + 40
    l[3] = l[3][:at] + (b"B" if l[3][at:at+1] == b"A" else b"A") + l[3][at+1:]
def keyid(l): l[2] = l[2].replace(b"sha256:", b"sha256:0", 1)
vectors = {
    "valid-bench": bench,
    "valid-governed-run": real,
    "receipts-swapped": edit(swap),
    "receipt-removed": edit(lambda l: l.pop(2)),
    "final-checkpoint-removed": edit(lambda l: l.pop()),
    "space-after-colon": edit(space),
    "cr-before-newline": edit(cr),
    "payload-character-changed": edit(payload),
    "receipt-duplicated": edit(lambda l: l.insert(2, l[1])),
    "line-after-close": edit(lambda l: l.append(l[1])),
    "key-id-changed": edit(keyid),
    "signed-by-another-key": lines(f"{tmp}/other.jsonl"),
}
for name, ls in vectors.items():
    os.makedirs(f"{out}/{name}", exist_ok=True)
    with open(f"{out}/{name}/journal.jsonl", "wb") as f:
        f.write(b"\n".join(ls) + b"\n")
os.makedirs(f"{out}/torn-last-line", exist_ok=True)
with open(f"{out}/torn-last-line/journal.jsonl", "wb") as f:
    f.write(b"\n".join(bench))  # no final newline: the last line is torn
PY
# The expected verdicts, as craik gives them (review each by hand after regenerating).
for d in "$out"/*/; do
  [ -f "$d/journal.jsonl" ] || continue
  # A vector with its own key is made (and its verdict written) by make-strict.sh.
  [ -f "$d/signing.pub.pem" ] && continue
  "$craik" receipts verify "$d/journal.jsonl" --key "$out/signing.pub.pem" --format json \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; f=r.get("failure"); print(json.dumps({"valid": f is None, "line": f and f["line"], "what": f and f["what"]}, indent=2))' \
    > "$d/expected.json" || true
done
# The vectors that carry their own key (issue 31 item 5).
sh "$out/make-strict.sh" "$craik"
