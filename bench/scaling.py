#!/usr/bin/env python3
"""Latency across --capacity: does a scaled drive keep the full-size drive's time?

Runs `flashlab sim` for every preset, workload, queue depth and seed at 16 GiB, 64 GiB and
full size (steady preconditioning at 90% occupancy, 70% reads, the same 256 MiB of measured
writes everywhere, so every run measures the same number of requests: 65,536 writes and about
153,000 reads), then compares the mean over seeds of each latency figure (read and write
p50, p99, p99.9) at each scaled capacity with the full-size drive's.

    python3 bench/scaling.py --flashlab target/release/flashlab --out /tmp/scaling
    python3 bench/scaling.py --report /tmp/scaling/runs.jsonl   # the table again
    python3 bench/scaling.py --timed-warmup 8GiB --out /tmp/scaling-warm   # SLC steady first

Runs are appended to OUT/runs.jsonl as they finish (a rerun skips the ones done), and the
table is written to OUT/table.md. docs/timing.md quotes it; the runs behind it are kept in
bench/results/scaling_runs.jsonl (without a timed warm-up; MX500, 840 Pro, and the 980's
uniform half before two timing fixes of the 980's mapping-cache reads), scaling_warm_runs.jsonl
(MX500, --timed-warmup 8GiB), scaling_nvme_runs.jsonl (nvme, no warm-up) and
scaling_980_warm_runs.jsonl (980 at QD32, --timed-warmup 8GiB, after its mapping-cache timing
fixes; the hot/cold half incomplete): copy one to
OUT/runs.jsonl to resume or to print its table with --report.
"""

import argparse
import json
import os
import subprocess
import sys

PRESETS = ["mx500", "840pro", "980", "nvme"]
# Addresses: uniform, or 70% of the writes to 30% of the space; 70% of requests are reads.
WORKLOADS = {"uniform": "uniform", "hotcold 70/30": "hotcold:0.7/0.3"}
QUEUE_DEPTHS = [1, 32]
SEEDS = [1, 2, 3]
CAPACITIES = ["16GiB", "64GiB", "full"]
FIGURES = [(kind, p) for kind in ("read", "write") for p in ("p50", "p99", "p999")]
TOLERANCE = 0.15


def key(preset, workload, qd, seed, capacity):
    return f"{preset}|{workload}|{qd}|{seed}|{capacity}"


def run_one(flashlab, preset, workload, qd, seed, capacity, timed_warmup=None):
    cmd = [flashlab, "sim", "--preset", preset, "--workload", WORKLOADS[workload],
           "--read-fraction", "0.7", "--queue-depth", str(qd), "--precondition", "steady",
           "--occupancy", "0.9", "--writes", "256MiB", "--seed", str(seed), "--json"]
    if timed_warmup:
        cmd += ["--timed-warmup", timed_warmup]
    if capacity != "full":
        cmd += ["--capacity", capacity]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    d = json.loads(out.stdout)
    row = {"preset": preset, "workload": workload, "qd": qd, "seed": seed,
           "capacity": capacity, "command": " ".join(cmd[1:])}
    for kind in ("read", "write"):
        lat = d[f"{kind}_latency_ns"]
        row[f"{kind}_count"] = lat["count"]
        for p in ("p50", "p99", "p999"):
            row[f"{kind}_{p}_ms"] = lat[p] / 1e6
    return row


def load(path):
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                rows[key(r["preset"], r["workload"], r["qd"], r["seed"], r["capacity"])] = r
    return rows


def table(rows):
    """Markdown: per (preset, workload, qd), each figure's full-size mean over seeds and the
    scaled capacities' ratio to it; figures outside ±15% are marked."""
    lines = ["| drive | workload | QD | figure | full size (ms) | 16 GiB / full | 64 GiB / full |",
             "|---|---|---|---|---|---|---|"]
    kept = missed = 0
    misses = []
    for preset in PRESETS:
        for workload in WORKLOADS:
            for qd in QUEUE_DEPTHS:
                def mean(capacity, fig):
                    vals = [rows[k][fig] for s in SEEDS
                            if (k := key(preset, workload, qd, s, capacity)) in rows]
                    return sum(vals) / len(vals) if len(vals) == len(SEEDS) else None
                for kind, p in FIGURES:
                    fig = f"{kind}_{p}_ms"
                    full = mean("full", fig)
                    if full is None:
                        continue
                    cells = []
                    for cap in ("16GiB", "64GiB"):
                        v = mean(cap, fig)
                        if v is None:
                            cells.append("—")
                            continue
                        r = v / full
                        ok = abs(r - 1) <= TOLERANCE
                        kept += ok
                        missed += not ok
                        if not ok:
                            misses.append(f"{preset} {workload} QD{qd} {kind} {p} at {cap}: {r:.2}")
                        cells.append(f"{r:.2}" if ok else f"**{r:.2}**")
                    name = {"p50": "p50", "p99": "p99", "p999": "p99.9"}[p]
                    lines.append(f"| {preset} | {workload} | {qd} | {kind} {name} | {full:.3f} | "
                                 + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"{kept} of {kept + missed} comparisons within ±{TOLERANCE:.0%} of full size "
                 f"(each figure the mean over seeds {SEEDS}).")
    if misses:
        lines.append("Outside: " + "; ".join(misses) + ".")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flashlab", default="target/release/flashlab")
    ap.add_argument("--out", default="/tmp/scaling")
    ap.add_argument("--report", help="only print the table of this runs.jsonl")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--queue-depths", default=",".join(map(str, QUEUE_DEPTHS)),
                    help="run only these queue depths (e.g. 32)")
    ap.add_argument("--timed-warmup", help="sim's --timed-warmup for every run (e.g. 8GiB): "
                    "the SLC cache in the workload's steady state before the window")
    a = ap.parse_args()
    if a.report:
        print(table(load(a.report)), end="")
        return
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "runs.jsonl")
    rows = load(path)
    for preset in a.presets.split(","):
        for workload in WORKLOADS:
            for qd in [int(q) for q in a.queue_depths.split(",")]:
                for seed in SEEDS:
                    for cap in CAPACITIES:
                        k = key(preset, workload, qd, seed, cap)
                        if k in rows:
                            continue
                        r = run_one(a.flashlab, preset, workload, qd, seed, cap, a.timed_warmup)
                        rows[k] = r
                        with open(path, "a") as f:
                            f.write(json.dumps(r) + "\n")
                        print(k, f"read p99 {r['read_p99_ms']:.3f} ms, write p99 {r['write_p99_ms']:.3f} ms",
                              flush=True)
    t = table(rows)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(t)
    print(t, end="")


if __name__ == "__main__":
    main()
