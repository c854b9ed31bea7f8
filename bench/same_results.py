#!/usr/bin/env python3
"""Are two reports' numbers the same? Compares two `reproduce` results.json files field by
field, every table cell, verdict and plot series, except what the machine decides:

- wall-clock fields (`runtime_s`, `job_wall_s`, `wall_s`, `peak_rss_bytes`, and the run's
  `total_runtime_s` and `command`);
- the sections measured on this machine's real kernel (`tempfiles-real`, `nosql`), whose
  captures differ run to run (listed as not compared).

    python3 bench/same_results.py OLD/results.json NEW/results.json [--only trim,waf]

Exits 0 if every compared field is equal, 1 listing up to 40 differences (path, old, new)
otherwise, 2 on bad input. Used to check that a refactor changed no simulated number
(issue 44: "results.json identical").
"""

import argparse
import json
import sys

WALL_CLOCK = {"runtime_s", "job_wall_s", "wall_s", "peak_rss_bytes", "total_runtime_s",
              "command", "started_utc"}
REAL_KERNEL = {"tempfiles-real", "nosql"}


def differences(old, new, path, out):
    """Appends (path, old, new) for every field that differs."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if k in WALL_CLOCK:
                continue
            if k not in old or k not in new:
                out.append((f"{path}.{k}", old.get(k, "<absent>"), new.get(k, "<absent>")))
                continue
            differences(old[k], new[k], f"{path}.{k}", out)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            out.append((f"{path} (length)", len(old), len(new)))
        for i, (a, b) in enumerate(zip(old, new)):
            differences(a, b, f"{path}[{i}]", out)
    elif old != new:
        out.append((path, old, new))


def experiments(results, path):
    e = results.get("experiments")
    if not isinstance(e, dict):
        sys.exit(f"{path}: not a reproduce results.json (no 'experiments' object)")
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--only", help="compare only these experiments (comma-separated ids)")
    a = ap.parse_args()
    try:
        old = experiments(json.load(open(a.old)), a.old)
        new = experiments(json.load(open(a.new)), a.new)
    except (OSError, json.JSONDecodeError) as e:
        print(f"same_results: {e}", file=sys.stderr)
        sys.exit(2)
    ids = sorted(set(old) | set(new))
    if a.only:
        wanted = set(a.only.split(","))
        unknown = wanted - set(ids)
        if unknown:
            print(f"same_results: --only names experiments in neither file: {sorted(unknown)}",
                  file=sys.stderr)
            sys.exit(2)
        ids = [i for i in ids if i in wanted]
    diffs = []
    compared = []
    for i in ids:
        if i in REAL_KERNEL:
            continue
        if i not in old or i not in new:
            diffs.append((i, "<present>" if i in old else "<absent>",
                          "<present>" if i in new else "<absent>"))
            continue
        compared.append(i)
        differences(old[i], new[i], i, diffs)
    skipped = [i for i in ids if i in REAL_KERNEL]
    print(f"compared: {', '.join(compared) or 'nothing'}"
          + (f"; not compared (real kernel): {', '.join(skipped)}" if skipped else ""))
    if diffs:
        print(f"{len(diffs)} difference(s):")
        for p, o, n in diffs[:40]:
            print(f"  {p}: {str(o)[:120]!s} -> {str(n)[:120]!s}")
        sys.exit(1)
    print("identical")


if __name__ == "__main__":
    main()
