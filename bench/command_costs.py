#!/usr/bin/env python3
"""What each command's README example costs: wall time and peak memory, measured with
/usr/bin/time -v, one run each, printed as a markdown table for the README.

    python3 bench/command_costs.py [--flashlab target/release/flashlab]

Run it on a quiet machine after `cargo build --release`; it writes its outputs under a
temporary directory and removes it. Examples that need root or fio say so and are skipped
without them.
"""

import argparse
import os
import re
import shutil
import subprocess
import tempfile

# (command, arguments after the binary, what it needs)
EXAMPLES = [
    ("sim", "sim --preset 840pro --capacity 4GiB --op 0.15 --workload hotcold:0.9/0.1 --writes 2x --timing off", None),
    ("sim (timed)", "sim --preset 840pro --capacity 1GiB --workload uniform --read-fraction 0.7 --queue-depth 32 "
     "--precondition steady --occupancy 0.9 --writes 0.25x --write-cache 1MiB", None),
    ("sweep", "sweep --out {tmp}/sw -- --preset mx500,840pro --op 0.07,0.28 --workload uniform --writes 1x --timing off", None),
    ("replay", "replay examples/kv-ext4.trace --preset 840pro --capacity 2GiB --precondition steady", None),
    ("fio", "fio examples/fio/mixed-70-30-zipf.fio --preset mx500 --capacity 1GiB --precondition fill "
     "--output-format=json", "fio"),
    ("capture", "capture --fs ext4 --discard --out {tmp}/t.trace -- sh -c "
     "'dd if=/dev/zero of={{}}/f bs=1M count=8 conv=fsync; rm {{}}/f; sync'", "root"),
    ("simfs", "simfs --preset openssd --extents 160 --discard ftrim --reads 20", None),
    ("join", "join --sf 0.2 --memory 2MiB --backend sim --preset mx500 --capacity 1GiB --host direct-io "
     "--discard online --repeat 3", None),
    ("btree", "btree --store as --fanout 256 --preload 20000 --ops 5000 --backend sim --preset ssd2011", None),
    ("kv", "kv --docs 10000 --ops 20000 --batch 16 --backend sim --preset 840pro --capacity 4GiB", None),
    ("calibrate", "calibrate --sim-preset 840pro --size 64MiB --out {tmp}/here.toml", None),
    ("presets", "presets", None),
    ("bench", "bench --only waf --capacity 4GiB", None),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flashlab", default="target/release/flashlab")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="flashlab-costs-")
    try:
        print("| command | example | wall time | peak memory |")
        print("|---|---|---|---|")
        for name, args, needs in EXAMPLES:
            if needs == "root" and os.geteuid() != 0:
                print(f"| `{name}` | `flashlab {args}` | skipped: needs root | |")
                continue
            if needs and needs != "root" and shutil.which(needs) is None:
                print(f"| `{name}` | `flashlab {args}` | skipped: needs {needs} | |")
                continue
            cmd = f"/usr/bin/time -v {a.flashlab} {args.format(tmp=tmp)}"
            p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", p.stderr)
            rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
            status = "" if p.returncode == 0 else f" (exit {p.returncode})"
            mb = int(rss.group(1)) / 1024 if rss else 0
            print(f"| `{name}` | `flashlab {args.format(tmp='DIR')}` | "
                  f"{wall.group(1) if wall else '?'}{status} | {mb:.0f} MB |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
