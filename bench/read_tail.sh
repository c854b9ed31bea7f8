#!/bin/bash
# The read tail's sensitivity to the scheduler's suspension constants (docs/timing.md, "Why
# reads do not reach half the write tail on the 840 Pro"). Each row runs `flashlab sim`
# under 70/30 random 4 KiB at queue depth 32, steady at 90% full, rested, a quarter of the
# drive written, with `[ssd.scheduler]` set in a copy of the preset, and prints one row of
# the table: IOPS, read and write p50 / p99 / p99.9 and read p99 / write p99.
#
#   bench/read_tail.sh FLASHLAB PRESET CAPACITY "PROGRAM_US ERASE_US MAX_SUSPENSIONS" ...
#   bench/read_tail.sh target/release/flashlab 840pro 4GiB "100 700 4" "20 20 1000000"
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n 2,9p "$0" >&2
  exit 2
fi
flashlab=$1 preset=$2 capacity=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
copy=$(mktemp --suffix=.toml)
trap 'rm -f "$copy"' EXIT
for row in "$@"; do
  read -r program_us erase_us max <<<"$row"
  {
    cat "$here/presets/$preset.toml"
    printf '\n[ssd.scheduler]\npolicy = "priority"\nprogram_suspend_ns = %d\nerase_suspend_ns = %d\nmax_suspensions = %d\n' \
      $((program_us * 1000)) $((erase_us * 1000)) "$max"
  } >"$copy"
  "$flashlab" sim --preset "$copy" --capacity "$capacity" --workload uniform --read-fraction 0.7 \
    --queue-depth 32 --precondition steady --occupancy 0.9 --writes 0.25x --rest --json |
    python3 -c '
import json, sys
d = json.load(sys.stdin)
r, w = d["read_latency_ns"], d["write_latency_ns"]
ms = lambda h: " / ".join("%.2f" % (h[p] / 1e6) for p in ("p50", "p99", "p999"))
print("| %s %s | %s | %s | %s | %s | %s | %s | %.2f |" % (sys.argv[1], sys.argv[2], sys.argv[3],
      sys.argv[4], sys.argv[5], format(round(d["iops"]), ","), ms(r), ms(w), r["p99"] / w["p99"]))
' "$preset" "$capacity" "$program_us" "$erase_us" "$max"
done
