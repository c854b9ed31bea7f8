#!/usr/bin/env python3
"""Runs bench/kvcompare several times per engine and prints medians with ranges, as the
tables of docs/comparisons.md.

Each run is a fresh process for one engine, started once the disk has settled (synced,
then no block I/O for a second: see `settle`); each round runs the engines in its own
seeded order, so a slow spell of the machine falls on all of them and none always follows
the same engine. Two memory settings:

- defaults: every engine as it comes (the AS store's node cache 1 GiB, redb's cache
  1 GiB, LMDB and fjall on the OS page cache);
- equal memory (--memory BYTES): each run inside a memory cgroup of BYTES (cgroup v2
  `memory.max` or v1 `memory.limit_in_bytes`; the limit counts the process's heap and
  the page cache of its files), and the engines with a cache of their own (AS, redb,
  fjall's block cache) given half of it. The benchmark's own input (the entries it loads,
  about 220 bytes each) counts against the limit too, the same for every engine. An engine
  the limit kills (the cgroup's OOM killer) is left out of that table's later rounds and
  named under it: it cannot be bounded there.

    python3 bench/kvcompare/medians.py --entries 100000,1000000 --runs 5
    python3 bench/kvcompare/medians.py --entries 1000000 --runs 5 --memory 1GiB
    python3 bench/kvcompare/medians.py --entries 1000000 --runs 5 --value-bytes 1000
    python3 bench/kvcompare/medians.py --entries 1000000 --runs 5 --keys sequential

`--value-bytes` and `--keys` are the variants: values of another size (150 bytes unless
said), keys in ascending order (each new key sorts after all earlier ones).

Needs root for --memory (it makes and removes a cgroup).

On a virtual machine whose balloon driver reports free memory to the host (Linux's free
page reporting, /sys/module/page_reporting), memory a run frees goes back to the host a
few seconds later, and the next run's first touch of it is several times slower (the
same AS bulk load: 0.5 s right after another run, 2 s after 10 s idle). As root, the
script turns reporting off while it runs (page_reporting_order above the largest order,
restored at exit) and touches --warm-memory once before the first run, so every run's
allocations cost what they cost on a machine of its own. --keep-page-reporting leaves it.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

ENGINES = ["as-logical", "as-nodes", "redb", "lmdb", "fjall"]
EXTRA_ENGINES = ["sled", "as-logical-fixed"]
COLUMNS = [
    ("bulk_s", "bulk (s)"),
    ("durable_s", "1,000 durable (s)"),
    ("durable_p99_us", "durable p99 (ms)"),
    ("batches_s", "20×1,000 batches (s)"),
    ("reads_s", "reads (s)"),
    ("removals_s", "removals (s)"),
    ("file_mb", "MB on disk"),
]
CGROUP_NAME = "flashlab-kvcompare"


def parse_bytes(text):
    units = {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    for u, m in units.items():
        if t.endswith(u):
            return int(float(t[: -len(u)]) * m)
    return int(t)


class Cgroup:
    """A memory cgroup for the runs (v2 if mounted, else v1), removed at the end."""

    def __init__(self, limit):
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        v2_unified = "/sys/fs/cgroup/unified/cgroup.controllers"
        if os.path.exists(v2):
            self.path, self.limit_file = f"/sys/fs/cgroup/{CGROUP_NAME}", "memory.max"
        elif os.path.isdir("/sys/fs/cgroup/memory"):
            self.path, self.limit_file = f"/sys/fs/cgroup/memory/{CGROUP_NAME}", "memory.limit_in_bytes"
        elif os.path.exists(v2_unified) and "memory" in open(v2_unified).read():
            self.path, self.limit_file = f"/sys/fs/cgroup/unified/{CGROUP_NAME}", "memory.max"
        else:
            sys.exit("--memory needs a memory cgroup (v2 memory.max or v1 memory.limit_in_bytes): none found")
        try:
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, self.limit_file), "w") as f:
                f.write(str(limit))
        except OSError as e:
            sys.exit(f"cannot set up the memory cgroup {self.path}: {e} (root needed)")

    def command(self, argv):
        # The shell joins the cgroup, then becomes the benchmark.
        procs = os.path.join(self.path, "cgroup.procs")
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"] + argv

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def disk_io_counts():
    """Every block device's completed writes, discards and flushes and its requests in
    flight (/proc/diskstats; empty where there is none)."""
    try:
        with open("/proc/diskstats") as f:
            return [tuple(l.split()[7:]) for l in f if len(l.split()) > 11]
    except OSError:
        return []


def settle(timeout_s=60.0, quiet_s=1.0):
    """Syncs, then waits until no block device has done any I/O for `quiet_s` (at most
    `timeout_s`). The file system here is mounted with `discard`: the files a run removes
    at its exit are discarded after the sync returns, and a run started meanwhile queues
    its writes behind the discards (an engine after fjall, whose exit removes most, loaded
    3x slower)."""
    os.sync()
    waited = 0.0
    before = disk_io_counts()
    while waited < timeout_s:
        time.sleep(quiet_s)
        waited += quiet_s
        now = disk_io_counts()
        if now == before:
            return
        before = now


PAGE_REPORTING = "/sys/module/page_reporting/parameters/page_reporting_order"


def hold_memory(warm_bytes):
    """Turns free page reporting off (returns the order to restore, or None if there is
    none or it cannot be changed), then touches `warm_bytes` of memory once."""
    try:
        with open(PAGE_REPORTING) as f:
            old = f.read().strip()
        # One past the largest order the buddy allocator has (its columns in buddyinfo).
        with open("/proc/buddyinfo") as f:
            orders = max(len(l.split()) - 4 for l in f)
        with open(PAGE_REPORTING, "w") as f:
            f.write(str(orders))
    except (OSError, ValueError):
        print("free page reporting: not found or not changeable (not root?); left as is", file=sys.stderr)
        old = None
    if warm_bytes:
        chunk = 1 << 30
        held = []
        for _ in range(warm_bytes // chunk):
            held.append(bytearray(b"\x01") * chunk)
        del held
    return old


def release_memory(old):
    if old is not None:
        with open(PAGE_REPORTING, "w") as f:
            f.write(old)


def run_once(binary, entries, engine, workdir, cache_bytes, cgroup, variant):
    argv = [binary, str(entries), workdir, engine, "--json"] + variant
    if cache_bytes is not None:
        argv += ["--cache-bytes", str(cache_bytes)]
    if cgroup is not None:
        argv = cgroup.command(argv)
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode == -9 and cgroup is not None:
        return None  # killed by the cgroup's limit: the engine cannot be bounded there
    if out.returncode != 0:
        sys.exit(f"{engine} at {entries} entries failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if len(lines) != 1:
        sys.exit(f"{engine}: expected one JSON line, got: {out.stdout[-500:]}")
    return json.loads(lines[0])


def table(entries, results, runs, title, killed=()):
    results = {e: rs for e, rs in results.items() if rs}
    print(f"\n{title}: {entries:,} entries, median of {runs} runs (range)\n")
    if not results:
        print(f"(every engine was killed by the memory limit: {', '.join(killed)})")
        return
    print("| engine | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    best = {}
    for key, _ in COLUMNS:
        best[key] = min(statistics.median(r[key] for r in rs) for rs in results.values())
    for engine, rs in results.items():
        cells = []
        for key, _ in COLUMNS:
            vals = [r[key] / 1000 if key == "durable_p99_us" else r[key] for r in rs]
            med = statistics.median(vals)
            b = best[key] / 1000 if key == "durable_p99_us" else best[key]
            mark = "**" if med <= b * 1.10 else ""
            rng = f" ({min(vals):.2f}–{max(vals):.2f})" if len(vals) > 1 else ""
            fmt = f"{med:.1f}" if key == "file_mb" else f"{med:.2f}"
            cells.append(f"{mark}{fmt}{mark}{rng}")
        print(f"| {rs[0]['engine']} | " + " | ".join(cells) + " |")
    print("\n(bold: first, or within 10% of the best median)")
    for engine in killed:
        print(f"\n({engine}: killed by the memory limit, not bounded there: left out)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", default="100000,1000000", help="comma-separated entry counts")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--memory", help="equal memory: a cgroup limit for every run (e.g. 1GiB)")
    ap.add_argument("--value-bytes", type=int, help="values of this many bytes (default: kvcompare's 150)")
    ap.add_argument("--keys", choices=["random", "sequential"], default="random", help="key order")
    ap.add_argument("--dir", default="/tmp/flashlab-kvcompare-medians", help="scratch directory (removed per run)")
    ap.add_argument("--warm-memory", default="8GiB", help="memory touched once before the first run (0: none)")
    ap.add_argument("--keep-page-reporting", action="store_true", help="leave the VM's free page reporting on")
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "target/release/kvcompare"))
    a = ap.parse_args()
    if not os.path.exists(a.binary):
        sys.exit(f"{a.binary} is missing: cargo build --release --manifest-path bench/kvcompare/Cargo.toml")
    engines = [e for e in a.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES + EXTRA_ENGINES:
            sys.exit(f"unknown engine {e!r} (known: {', '.join(ENGINES + EXTRA_ENGINES)})")
    variant = ["--keys", a.keys]
    if a.value_bytes is not None:
        variant += ["--value-bytes", str(a.value_bytes)]
    limit = parse_bytes(a.memory) if a.memory else None
    cgroup = Cgroup(limit) if limit else None
    reporting = None if a.keep_page_reporting else hold_memory(parse_bytes(a.warm_memory) if a.warm_memory != "0" else 0)
    try:
        for n in [int(x) for x in a.entries.split(",")]:
            results = {e: [] for e in engines}
            killed = []
            for i in range(a.runs):
                # Each round in its own order (seeded by the round), so no engine always
                # follows the same one; and every run starts on a settled disk (a run right
                # after another engine's would otherwise share the disk with its writeback
                # and discards).
                order = list(engines)
                random.Random(i).shuffle(order)
                for e in order:
                    if e in killed:
                        continue
                    settle()
                    r = run_once(a.binary, n, e, a.dir, limit // 2 if limit else None, cgroup, variant)
                    if r is None:
                        print(f"  run {i + 1}/{a.runs} {e}: killed by the {a.memory} limit; left out", file=sys.stderr)
                        killed.append(e)
                        results[e] = []
                        continue
                    results[e].append(r)
                    print(f"  run {i + 1}/{a.runs} {e}: {json.dumps(r)}", file=sys.stderr)
            title = f"equal memory ({a.memory} per run, caches {limit // 2 >> 20} MiB)" if limit else "defaults"
            if a.value_bytes is not None or a.keys != "random":
                title += f", {a.value_bytes or 150}-byte values, {a.keys} keys"
            table(n, results, a.runs, title, killed)
    finally:
        if cgroup:
            cgroup.remove()
        if not a.keep_page_reporting:
            release_memory(reporting)


if __name__ == "__main__":
    main()
