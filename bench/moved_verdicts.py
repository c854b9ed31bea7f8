#!/usr/bin/env python3
"""Lists the verdicts of two reports (results.json) whose value moved by more than a share
(default 5%) or whose outcome changed, and those only one report has.

    python3 bench/moved_verdicts.py OLD/results.json NEW/results.json 0.05
"""
import json, sys
def load(p):
    d = json.load(open(p)); out = {}
    for e, exp in d.get("experiments", {}).items():
        for v in exp.get("verdicts", []):
            vid = v.get("id") or v.get("score", {}).get("id")
            if vid: out[vid] = (v.get("ours"), v.get("holds"), v.get("role"))
    return out
a, b = load(sys.argv[1]), load(sys.argv[2]); thr = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
moved = []
for k in sorted(set(a) | set(b)):
    if k not in a: print(f"NEW  {k}: {b[k]}"); continue
    if k not in b: print(f"GONE {k}: {a[k]}"); continue
    (x, hx, rx), (y, hy, ry) = a[k], b[k]
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        rel = abs(y - x) / max(abs(x), 1e-12)
        if rel > thr or hx != hy:
            print(f"{k}: {x:.4g} -> {y:.4g} ({'+' if y>=x else ''}{(y-x)/max(abs(x),1e-12)*100:.0f}%) {'holds' if hx else 'fails'} -> {'holds' if hy else 'fails'}")
    elif hx != hy:
        print(f"{k}: {x} -> {y} {'holds' if hx else 'fails'} -> {'holds' if hy else 'fails'}")
