#!/usr/bin/env python3
"""Lists the verdicts of two reports (results.json) whose value moved by more than a share
(default 5%) or whose outcome changed, and those only one report has.

    python3 bench/moved_verdicts.py OLD/results.json NEW/results.json 0.05

With a third report between them (`--null MID/results.json`: the new code with one mechanism
turned off, such as the scheduler's null model), a Markdown table instead, one row per moved
verdict, saying whether it moved between OLD and MID (other changes) and between MID and NEW
(the mechanism):

    python3 bench/moved_verdicts.py OLD/results.json NEW/results.json 0.05 --null MID/results.json
"""
import json, sys


def load(p):
    d = json.load(open(p)); out = {}
    for e, exp in d.get("experiments", {}).items():
        for v in exp.get("verdicts", []):
            vid = v.get("id") or v.get("score", {}).get("id")
            if vid: out[vid] = (v.get("ours"), v.get("holds"), v.get("role"), bool(v.get("preview")))
    return out


def moved(x, y, thr):
    """Whether verdict value/outcome x -> y moved by more than thr or changed outcome."""
    (vx, hx, *_), (vy, hy, *_) = x, y
    if isinstance(vx, (int, float)) and isinstance(vy, (int, float)):
        return abs(vy - vx) / max(abs(vx), 1e-12) > thr or hx != hy
    return vx != vy or hx != hy


def cell(t):
    if t is None: return "—"
    v, h, role, preview = t
    s = f"{v:.4g}" if isinstance(v, (int, float)) else str(v)
    return s + (" holds" if h else " fails") + (" (preview)" if preview else "")


args = [a for a in sys.argv[1:]]
if not args or args[0] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if args else 2)
null = None
try:
    if "--null" in args:
        i = args.index("--null"); null = load(args[i + 1]); del args[i:i + 2]
    a, b = load(args[0]), load(args[1]); thr = float(args[2]) if len(args) > 2 else 0.05
except (IndexError, OSError, ValueError) as e:
    print(f"moved_verdicts: {e} (usage: OLD/results.json NEW/results.json [SHARE] [--null MID/results.json])",
          file=sys.stderr)
    sys.exit(2)
if null is None:
    for k in sorted(set(a) | set(b)):
        if k not in a: print(f"NEW  {k}: {b[k][:3]}"); continue
        if k not in b: print(f"GONE {k}: {a[k][:3]}"); continue
        (x, hx, *_), (y, hy, *_) = a[k], b[k]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if moved(a[k], b[k], thr):
                print(f"{k}: {x:.4g} -> {y:.4g} ({'+' if y>=x else ''}{(y-x)/max(abs(x),1e-12)*100:.0f}%) {'holds' if hx else 'fails'} -> {'holds' if hy else 'fails'}")
        elif hx != hy:
            print(f"{k}: {x} -> {y} {'holds' if hx else 'fails'} -> {'holds' if hy else 'fails'}")
else:
    print("| verdict | old | new, mechanism off | new | moved by |")
    print("|---|---|---|---|---|")
    for k in sorted(set(a) & set(b)):
        if not moved(a[k], b[k], thr): continue
        m = null.get(k)
        why = []
        if m is None: why.append("not in the null report")
        else:
            if moved(a[k], m, thr): why.append("other changes")
            if moved(m, b[k], thr): why.append("the mechanism")
        print(f"| `{k}` | {cell(a[k])} | {cell(m)} | {cell(b[k])} | {', '.join(why) or 'neither step alone'} |")
    new = sorted(set(b) - set(a)); gone = sorted(set(a) - set(b))
    print(f"\n{len(new)} verdicts new since OLD, {len(gone)} gone.")
