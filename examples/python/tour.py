# %% [markdown]
# # flashlab from Python: a tour
#
# This script is the twin of `tour.ipynb` (the notebook's cells are this file's `# %%`
# cells; `python/tests/test_example.py` checks they agree, and CI runs this script). Run it
# from the repository's top directory after `pip install ./python`:
#
#     python3 examples/python/tour.py            # figures into examples/python/out/
#
# It replays a trace in a public format on three drives, plots latency over time and
# write amplification, runs a small grid on a local Dask cluster, and reads a report's
# `results.json`.

# %%
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402

import flashlab  # noqa: E402

top = Path.cwd()
out = top / "examples" / "python" / "out"
out.mkdir(parents=True, exist_ok=True)
print("flashlab", flashlab.__version__, "- presets:", ", ".join(p["name"] for p in flashlab.presets()))

# %% [markdown]
# ## A trace in MSR Cambridge's format
#
# The public MSR Cambridge traces are CSV lines of `Timestamp,Hostname,DiskNumber,Type,
# Offset,Size,ResponseTime` (the time in 100 ns units). Here we write one from the trace
# flashlab captured of its key-value store on real ext4 (`examples/kv-ext4.trace`: writes,
# flushes, discards and reads with their times); put the path of your own MSR trace
# instead. MSR's format has no flushes or discards, so those are left out.

# %%
msr = out / "kv-ext4.msr.csv"
with open(top / "examples" / "kv-ext4.trace") as src, open(msr, "w") as dst:
    for line in src:
        if line.startswith(("flashlab-trace", "#")):
            continue
        _stream, op, offset, length, at_ns = line.split()
        if op in ("R", "W"):
            kind = "Read" if op == "R" else "Write"
            dst.write(f"{128166372000000000 + int(at_ns) // 100},kv,0,{kind},{offset},{length},0\n")
print(msr, sum(1 for _ in open(msr)), "requests")

# %% [markdown]
# ## Replayed on three drives
#
# One call replays the trace on the three drives side by side (each aged to a steady
# state first, so garbage collection runs). `r.figures` is what `flashlab replay --json`
# prints; `r.timeseries` holds the figures per interval of virtual time as an Arrow table.
# The replay is open loop, at the trace's own times: where an aged drive cannot keep up
# with them, its queue grows and so does its latency.

# %%
drives = ["mx500", "840pro", "980"]
r = flashlab.replay(trace=str(msr), format="msr", preset=drives, capacity="2GiB",
                    precondition="steady", interval="20ms")
print(r)
ts = r.timeseries.to_pandas()
waf = {run["run"]: run["waf"] for run in r["runs"]}
print("WAF per drive:", waf)

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for name, d in ts.groupby("run", observed=True):
    ax1.plot(d["t_s"], d["write_p99_us"] / 1e3, label=name)
ax1.set_xlabel("virtual time (s)")
ax1.set_ylabel("write p99 in the interval (ms)")
ax1.set_title("Latency over time")
ax1.legend()
ax2.bar(list(waf), list(waf.values()))
ax2.set_ylabel("write amplification")
ax2.set_title("WAF of the replay")
fig.tight_layout()
fig.savefig(out / "replay.png")
print("drawn:", out / "replay.png")

# %% [markdown]
# ## A small grid on a local Dask cluster
#
# `flashlab.sweep` runs one command over a grid; with a Dask client the points run on its
# workers (here a `LocalCluster`; give `Client("tcp://scheduler:8786")` for a real one).
# Rows come back as points finish; a point that fails is a row with its `error`.

# %%
from dask.distributed import Client, LocalCluster  # noqa: E402

# Workers as threads of this process (processes=False): a script run as `python3 tour.py`
# would be started again by each worker process Dask spawns. Each call releases the GIL, so
# the threads use every core; the tests run the same sweep on worker processes.
with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                  dashboard_address=None) as cluster, Client(cluster) as client:
    s = flashlab.sweep({"op": [0.07, 0.15, 0.28], "gc": ["greedy", "fifo"]}, client=client,
                       preset="x25e", capacity="256MiB", workload="uniform", writes="1x",
                       timing=False)
    for row in s:
        print(f"  point {row['index']}: op {row['op']}, gc {row['gc']}: WAF {row['waf']:.2f}")
    grid = s.table().to_pandas()

fig, ax = plt.subplots(figsize=(5, 4))
for gc, d in grid.groupby("gc"):
    ax.plot(d["op"], d["waf"], marker="o", label=gc)
ax.set_xlabel("over-provisioning")
ax.set_ylabel("write amplification")
ax.legend()
fig.savefig(out / "grid.png")
print("drawn:", out / "grid.png")

# %% [markdown]
# ## A report's results
#
# `flashlab reproduce` writes `report/results.json`: every experiment's verdicts (ours
# beside the paper's). If there is no report yet, this makes a small one (the `waf`
# section only, a few seconds) with the command line.

# %%
results = top / "report" / "results.json"
if not results.exists():
    results = out / "report-waf" / "results.json"
    if not results.exists():
        binary = os.environ.get("FLASHLAB_BIN", str(top / "target" / "release" / "flashlab"))
        subprocess.run([binary, "reproduce", "--only", "waf", "--out", str(results.parent)],
                       check=True, stdout=subprocess.DEVNULL, stderr=sys.stderr)
report = json.loads(results.read_text())
import pandas as pd  # noqa: E402

verdicts = pd.DataFrame([v for e in report["experiments"].values() for v in e["verdicts"]])
print(verdicts[["id", "role", "outcome", "ours", "paper"]].to_string(index=False))
