#!/bin/bash
# N3 variant: kill `craik run ex6` at P (default fdatasync:18: all of iteration 2's outcomes
# signed, no run.closed). The attacker sets an EARLIER step_result (index I, default 0: the
# first step) to status failed, not the last one. `runs recover`, `runs resume`, verify, audit.
. /work/redteam/r17b/common.sh
P=${P:-fdatasync:18}; I=${I:-0}; H=/work/redteam/r17b/w/a18_$I; WS=$H.ws; rm -rf $H $WS; cp -a /work/redteam/r17b/ex6/workspace $WS
killat ${P%:*} ${P#*:} craik run /work/redteam/r17b/ex6 --workspace $WS --home $H >/dev/null 2>&1; R=$(ls $H/runs)
I=$I python3 - $H/runs/$R/events.jsonl <<'PY'
import sys,json,os
p=sys.argv[1]; I=int(os.environ["I"]); out=[]; k=-1
for l in open(p):
    e=json.loads(l)
    if e.get("event")=="step_result":
        k+=1
        if k==I: e["result"]["status"]="failed"; print("   step_result #%d (%s) -> failed"%(k,e["result"].get("phase")))
    out.append(json.dumps(e,separators=(",",":"))+"\n")
open(p,"w").write("".join(out)); print("   %d step_results"%(k+1))
PY
for c in recover resume; do craik runs $c $R --by user:op --home $H 2>&1 | grep -v "^  \(steps\|handoff\|verdicts\)" | tail -3 | cut -c1-250; echo "$c rc=${PIPESTATUS[0]}"; done
caps $H/runs/$R/receipts.jsonl | tail -4 | cut -c1-160
echo "mktemp files: $(ls $WS/docs/runs | grep -vc keep)"; craik receipts verify $H 2>&1 | tail -1; craik audit $H >/dev/null 2>&1; echo "audit rc=$?"
