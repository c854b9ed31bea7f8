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
    python3 bench/scaling.py --rest --out /tmp/scaling-rested   # SLC cache folded first
    python3 bench/scaling.py --presets nvme --capacities 128GiB --out /tmp/scaling-nvme
        # a larger capacity, to name where a figure 64 GiB missed is kept
    python3 bench/scaling.py --limits presets/scaling_limits.toml mx500=RUNS.jsonl ...
        # the misses as data: `sim` prints them on a scaled drive

Runs are appended to OUT/runs.jsonl as they finish (a rerun skips the ones done), and the
table is written to OUT/table.md. docs/timing.md quotes it; the runs behind it are kept in
bench/results/scaling_runs.jsonl (without a timed warm-up; MX500, 840 Pro, and the 980's
uniform half before two timing fixes of the 980's mapping-cache reads), scaling_warm_runs.jsonl
(MX500, --timed-warmup 8GiB), scaling_nvme_runs.jsonl (nvme, no warm-up) and
scaling_980_warm_runs.jsonl (980, --timed-warmup 8GiB, after its mapping-cache timing
fixes) and scaling_rested_runs.jsonl (--rest, with the presets' write buffers, after the
buffer's admission and GC-read release fixes of 2026-11-29; MX500, 840 Pro, nvme) and
scaling_980_rested_runs.jsonl (the 980, --rest, aged by its workload's reads too, as
steady preconditioning does on a drive with a mapping cache since 2026-11-29;
scaling_980_rested_writeaged_runs.jsonl has the same runs aged by writes only, after
translation pages joined GC's pacing). Since 2026-12-01 (a scaled drive keeps the full
drive's blocks per die, docs/timing.md "Blocks per die kept"): scaling_4g_oldblocks_runs.jsonl
(MX500, 840 Pro, nvme; --rest --writes 4GiB, before that rule), scaling_4g_lockstep_runs.jsonl
(the same with it), scaling_980_4g_lockstep_runs.jsonl (the 980, --rest --writes 4GiB; not
every configuration) and scaling_980_keepblocks_runs.jsonl (the 980, --rest, 256 MiB; its
full-size runs are those of scaling_980_rested_runs.jsonl, which the rule does not change).
Since paced GC keeps each die's phase (docs/timing.md "Dies in lockstep", 2026-12-01):
scaling_4g_runs.jsonl (MX500, 840 Pro, nvme; --rest --writes 4GiB; the MX500's hot/cold
QD32 runs also at 58 GiB, a quarter of its 250 GB) and
scaling_980_4g_runs.jsonl (the 980, the same; its hot/cold QD32 runs also with seeds 4-6,
and at 128 GiB and 256 GiB, by docs/timing.md "More seeds where the seeds disagree").
Copy one to OUT/runs.jsonl to resume or to print its table with --report.
"""

import argparse
import json
import os
import re
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
# A scaled capacity as sim takes it and the runs record it: whole GiB, no leading zero.
CAPACITY = re.compile(r"([1-9][0-9]*)GiB")
# The measured window's writes (sim --writes): 65,536 writes and about 153,000 reads.
WINDOW = "256MiB"


def key(preset, workload, qd, seed, capacity):
    return f"{preset}|{workload}|{qd}|{seed}|{capacity}"


def run_one(flashlab, preset, workload, qd, seed, capacity, timed_warmup=None, rest=False,
            writes=WINDOW):
    cmd = [flashlab, "sim", "--preset", preset, "--workload", WORKLOADS[workload],
           "--read-fraction", "0.7", "--queue-depth", str(qd), "--precondition", "steady",
           "--occupancy", "0.9", "--writes", writes, "--seed", str(seed), "--json"]
    if rest:
        cmd += ["--rest"]
    if timed_warmup:
        cmd += ["--timed-warmup", timed_warmup]
    if capacity != "full":
        cmd += ["--capacity", capacity]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    d = json.loads(out.stdout)
    row = {"preset": preset, "workload": workload, "qd": qd, "seed": seed,
           "capacity": capacity, "writes": writes, "command": " ".join(cmd[1:])}
    row["waf"] = d["waf"]
    for kind in ("read", "write"):
        lat = d[f"{kind}_latency_ns"]
        row[f"{kind}_count"] = lat["count"]
        for p in ("p50", "p99", "p999"):
            row[f"{kind}_{p}_ms"] = lat[p] / 1e6
    return row


def load(path, must_exist=False):
    """The runs of a runs.jsonl, by key; {} if it does not exist (unless `must_exist`)."""
    rows = {}
    if not os.path.exists(path):
        if must_exist:
            sys.exit(f"{path}: no such file")
        return rows
    if not os.path.isfile(path):
        sys.exit(f"{path}: not a file (a runs.jsonl is one JSON object a line)")
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not a JSON object ({e})")
            if not isinstance(r, dict):
                sys.exit(f"{path}:{n}: not a JSON object (a run is one object a line)")
            missing = [f for f in ("preset", "workload", "qd", "seed", "capacity") if f not in r]
            if missing:
                sys.exit(f"{path}:{n}: a run without its {', '.join(missing)} field")
            if r["capacity"] != "full" and not CAPACITY.fullmatch(str(r["capacity"])):
                sys.exit(f"{path}:{n}: capacity {r['capacity']!r}: expected N GiB or full")
            rows[key(r["preset"], r["workload"], r["qd"], r["seed"], r["capacity"])] = r
    return rows


def capacity_bytes(capacity):
    """Bytes of a capacity as sim takes it ("16GiB"); None for "full"."""
    if capacity == "full":
        return None
    m = CAPACITY.fullmatch(capacity)
    if not m:
        sys.exit(f"capacity {capacity!r}: expected N GiB (e.g. 16GiB) or full")
    return int(m.group(1)) << 30


def scaled_capacities(rows):
    """The scaled capacities the runs hold, smallest first."""
    caps = {r["capacity"] for r in rows.values() if r["capacity"] != "full"}
    return sorted(caps, key=capacity_bytes)


def comparisons(rows):
    """Per (preset, workload, qd, figure): the full-size mean over seeds, per scaled
    capacity the ratio of its mean to it (None where a seed's run is missing), and the
    full-size seeds' spread, (max - min) / mean: how far the figure itself moves between
    seeds on one drive, the resolution a ±15% comparison needs."""
    out = []
    caps = scaled_capacities(rows)
    for preset in PRESETS:
        for workload in WORKLOADS:
            for qd in QUEUE_DEPTHS:
                seeds = config_seeds(rows, preset, workload, qd)
                incomplete_seeds(rows, preset, workload, qd, seeds)

                def mean(capacity, fig):
                    vals = [rows[k][fig] for s in seeds
                            if (k := key(preset, workload, qd, s, capacity)) in rows]
                    return sum(vals) / len(vals) if vals and len(vals) == len(seeds) else None
                for kind, p in FIGURES:
                    fig = f"{kind}_{p}_ms"
                    full = mean("full", fig)
                    if full is None:
                        continue
                    ratios = {}
                    for cap in caps:
                        v = mean(cap, fig)
                        ratios[cap] = None if v is None else v / full
                    vals = [rows[key(preset, workload, qd, s, "full")][fig] for s in seeds]
                    spread = (max(vals) - min(vals)) / full if full else 0.0
                    out.append(((preset, workload, qd, kind, p), full, ratios, spread, len(seeds)))
    return out


def config_seeds(rows, preset, workload, qd):
    """The seeds a configuration is judged on: SEEDS, or every seed run at full size where
    more were run (the rule for a figure whose full-size seeds spread wider than the band,
    docs/timing.md "More seeds where the seeds disagree"): a mean over the same seeds at
    every capacity, or no comparison."""
    full = {r["seed"] for r in rows.values() if (r["preset"], r["workload"], r["qd"],
                                                 r["capacity"]) == (preset, workload, qd, "full")}
    return sorted(full) if full.issuperset(SEEDS) and len(full) > len(SEEDS) else SEEDS


def incomplete_seeds(rows, preset, workload, qd, seeds):
    """Stop where a capacity holds some of a configuration's seeds but not all: its mean
    would be over other seeds than the full size's, so its comparison would silently drop
    out of the table and the limits (a capacity with none of them was not measured, and is
    left out openly)."""
    for cap in sorted({r["capacity"] for r in rows.values()}, key=lambda c: capacity_bytes(c) or 0):
        have = {r["seed"] for r in rows.values()
                if (r["preset"], r["workload"], r["qd"], r["capacity"]) == (preset, workload, qd, cap)}
        if have and not have.issuperset(seeds):
            missing = sorted(set(seeds) - have)
            sys.exit(f"{preset} {workload} QD{qd}: judged on seeds {seeds} (those run at full size), "
                     f"but {cap} has only {sorted(have)}: run --seeds "
                     f"{','.join(map(str, missing))} --capacities {cap}, or remove the extra seeds")


FIGURE_NAMES = {"p50": "p50", "p99": "p99", "p999": "p99.9"}


def table(rows):
    """Markdown: per (preset, workload, qd), each figure's full-size mean over seeds and the
    scaled capacities' ratio to it; figures outside ±15% are marked."""
    caps = scaled_capacities(rows)
    lines = ["| drive | workload | QD | figure | full size (ms) | full-size seeds' spread | "
             + " | ".join(f"{c.replace('GiB', ' GiB')} / full" for c in caps) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(caps)]
    kept = missed = unresolved = 0
    misses = []
    more_seeds = set()
    for (preset, workload, qd, kind, p), full, ratios, spread, n_seeds in comparisons(rows):
        if n_seeds > len(SEEDS):
            more_seeds.add(f"{preset} {workload} QD{qd} ({n_seeds} seeds)")
        unresolved += spread > TOLERANCE
        cells = []
        for cap in caps:
            r = ratios[cap]
            if r is None:
                cells.append("—")
                continue
            ok = abs(r - 1) <= TOLERANCE
            kept += ok
            missed += not ok
            if not ok:
                misses.append(f"{preset} {workload} QD{qd} {kind} {p} at {cap}: {r:.2}")
            cells.append(f"{r:.2}" if ok else f"**{r:.2}**")
        mark = f"**{spread:.0%}**" if spread > TOLERANCE else f"{spread:.0%}"
        lines.append(f"| {preset} | {workload} | {qd} | {kind} {FIGURE_NAMES[p]} | {full:.3f} | "
                     f"{mark} | " + " | ".join(cells) + " |")
    lines.append("")
    windows = sorted({r.get("writes", "256MiB") for r in rows.values()})
    lines.append(f"{kept} of {kept + missed} comparisons within ±{TOLERANCE:.0%} of full size "
                 f"(each figure the mean over seeds {SEEDS}"
                 + (f", or every seed run for {', '.join(sorted(more_seeds))}" if more_seeds else "")
                 + "; measured window "
                 f"{', '.join(windows)} of writes). {unresolved} figures' full-size seeds spread "
                 f"wider than the ±{TOLERANCE:.0%} band itself (marked): a comparison of those "
                 "cannot tell a scaled drive's difference from a different seed's.")
    if misses:
        lines.append("Outside: " + "; ".join(misses) + ".")
    return "\n".join(lines) + "\n"


def limits(sources):
    """presets/scaling_limits.toml's text: for each figure a scaled capacity missed (outside
    ±15% of full size), the smallest measured capacity from which every larger one measured
    keeps it ("full" if none does). `sources` maps a preset to the runs.jsonl that is its
    table."""
    out = ["# Written by `python3 bench/scaling.py --limits presets/scaling_limits.toml "
           + " ".join(f"{p}={f}" for p, f in sources.items()) + "`; do not edit by hand.",
           "# Each [[miss]]: a latency figure that `sim --capacity` did not keep within ±15% of",
           "# the full-size drive's (mean over seeds 1-3, or over `seeds` where more were run; 70% reads; steady preconditioning at 90%",
           "# occupancy; the measured window's writes in each runs file), the ratio, the full-size",
           "# seeds' spread ((max - min) / mean: above 0.15 one drive's seeds differ by more than a",
           "# comparison allows), and the smallest measured capacity from which every capacity measured keeps",
           "# it. `sim` prints them on a scaled drive",
           "# (docs/timing.md, \"Latency across --capacity\"). Each [[measured]]: a preset's",
           "# scaled capacities, workloads and queue depths measured, and how many of its",
           "# comparisons kept their figure.", ""]
    for preset, path in sources.items():
        rows = {k: r for k, r in load(path, must_exist=True).items() if r["preset"] == preset}
        if not rows:
            sys.exit(f"{path}: no runs of {preset}")
        comps = comparisons(rows)
        judged = [abs(r - 1) <= TOLERANCE for _, _, ratios, _, _ in comps for r in ratios.values()
                  if r is not None]
        out += ["[[measured]]",
                f'preset = "{preset}"',
                "capacities = [" + ", ".join(f'"{c}"' for c in scaled_capacities(rows)) + "]",
                "workloads = [" + ", ".join(f'"{WORKLOADS[w]}"' for w in WORKLOADS
                                            if any(r["workload"] == w for r in rows.values())) + "]",
                "queue_depths = [" + ", ".join(str(q) for q in QUEUE_DEPTHS
                                               if any(r["qd"] == q for r in rows.values())) + "]",
                f"comparisons = {len(judged)}",
                f"kept = {sum(judged)}",
                f'runs = "{path}"', ""]
        for (pr, workload, qd, kind, p), full, ratios, spread, n_seeds in comps:
            caps = [c for c in scaled_capacities(rows) if ratios[c] is not None]
            missed = [c for c in caps if abs(ratios[c] - 1) > TOLERANCE]
            if not missed:
                continue
            keeps = [c for i, c in enumerate(caps)
                     if all(abs(ratios[d] - 1) <= TOLERANCE for d in caps[i:])]
            keeps_at = keeps[0] if keeps else "full"
            for cap in missed:
                out += ["[[miss]]",
                        f'preset = "{preset}"',
                        f'workload = "{WORKLOADS[workload]}"',
                        f"queue_depth = {qd}",
                        f'figure = "{kind} {FIGURE_NAMES[p]}"',
                        f'capacity = "{cap}"',
                        f"ratio = {ratios[cap]:.2f}",
                        f"full_ms = {full:.3f}",
                        f"full_seed_spread = {spread:.2f}"]
                out += [f"seeds = {n_seeds}"] if n_seeds > len(SEEDS) else []
                out += [
                        f'keeps_at = "{keeps_at}"',
                        f'runs = "{path}"', ""]
    return "\n".join(out)


def names(option, text, allowed):
    """A comma-separated list of names, each checked against `allowed` (if given), before
    any run starts."""
    items = [t.strip() for t in text.split(",")]
    if "" in items:
        sys.exit(f"{option}: an empty entry in {text!r}")
    for t in items:
        if allowed is not None and t not in allowed:
            sys.exit(f"{option}: {t!r} is not one of {', '.join(allowed)}")
    if len(set(items)) != len(items):
        sys.exit(f"{option}: {text!r} names one twice")
    return items


def positive_ints(option, text):
    """A comma-separated list of positive integers (seeds, queue depths)."""
    out = []
    for t in names(option, text, None):
        if not re.fullmatch(r"[1-9][0-9]*", t):
            sys.exit(f"{option}: {t!r} is not a positive integer")
        out.append(int(t))
    return out


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
    ap.add_argument("--rest", action="store_true",
                    help="sim's --rest for every run: the drive idle until its SLC cache is folded "
                    "before the window (an empty cache at every capacity)")
    ap.add_argument("--writes", default=WINDOW,
                    help="the measured window's writes for every run (sim --writes; e.g. 4GiB "
                    "for 16 times the requests)")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                    help="run these seeds (e.g. 4,5,6 for a configuration whose full-size seeds "
                    "spread wider than the band; where the runs file holds seeds 1-3 and more at "
                    "full size, the table judges the configuration on every seed run there, and "
                    "stops if a scaled capacity lacks one)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="run only these workloads (uniform, 'hotcold 70/30')")
    ap.add_argument("--capacities", default=",".join(CAPACITIES),
                    help="run only these capacities (e.g. 128GiB to name where a figure is kept)")
    ap.add_argument("--limits", nargs="+", metavar=("OUT.toml", "PRESET=RUNS"),
                    help="write the scaling limits file from each preset's runs.jsonl")
    a = ap.parse_args()
    if a.limits:
        out, *pairs = a.limits
        if not pairs:
            sys.exit("--limits OUT.toml PRESET=RUNS ...: name at least one preset's runs")
        sources = {}
        for p in pairs:
            preset, eq, path = p.partition("=")
            if not eq or preset not in PRESETS or not path:
                sys.exit(f"--limits: {p!r} is not PRESET=RUNS.jsonl with PRESET one of "
                         f"{', '.join(PRESETS)}")
            if preset in sources:
                sys.exit(f"--limits: {preset} named twice")
            sources[preset] = path
        text = limits(sources)  # every input checked before OUT is touched
        try:
            with open(out, "w") as f:
                f.write(text)
        except OSError as e:
            sys.exit(f"--limits: cannot write {out}: {e.strerror}")
        return
    if a.report:
        print(table(load(a.report, must_exist=True)), end="")
        return
    presets = names("--presets", a.presets, PRESETS)
    workloads = names("--workloads", a.workloads, WORKLOADS)
    queue_depths = positive_ints("--queue-depths", a.queue_depths)
    seeds = positive_ints("--seeds", a.seeds)
    capacities = names("--capacities", a.capacities, None)
    for cap in capacities:
        capacity_bytes(cap)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "runs.jsonl")
    rows = load(path)
    for preset in presets:
        for workload in workloads:
            for qd in queue_depths:
                for seed in seeds:
                    for cap in capacities:
                        k = key(preset, workload, qd, seed, cap)
                        if k in rows:
                            continue
                        r = run_one(a.flashlab, preset, workload, qd, seed, cap, a.timed_warmup, a.rest,
                                    a.writes)
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
