"""flashlab.sweep: on local threads and on a Dask LocalCluster, with a failing point, against
the command line's `flashlab sweep`."""

import json
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import flashlab
from flashlab.sweep import points

from test_calls import cli

FIXED = dict(preset="x25e", capacity="256MiB", workload="uniform", writes="0.5x", timing=False)
GRID = {"op": [0.07, 0.15, 0.28], "gc": ["greedy", "fifo"]}


def compact(v):
    return json.dumps(v, separators=(",", ":"))


def test_a_grid_is_the_product_of_its_options_first_slowest():
    assert points(GRID)[:3] == [{"op": 0.07, "gc": "greedy"}, {"op": 0.07, "gc": "fifo"},
                                {"op": 0.15, "gc": "greedy"}]
    assert len(points(GRID)) == 6
    assert points([{"op": 0.1}, {"op": 0.2, "gc": "fifo"}]) == [{"op": 0.1}, {"op": 0.2, "gc": "fifo"}]
    with pytest.raises(ValueError):
        points({"op": 0.1})


def test_a_local_sweep_gives_the_command_lines_sweep(tmp_path):
    t = flashlab.sweep(GRID, **FIXED).table()
    out = tmp_path / "cli"
    subprocess.run([cli(), "sweep", "--out", str(out), "--", "--preset", "x25e", "--capacity",
                    "256MiB", "--op", "0.07,0.15,0.28", "--gc", "greedy,fifo", "--workload",
                    "uniform", "--writes", "0.5x", "--timing", "off"],
                   check=True, capture_output=True)
    want = json.loads((out / "results.json").read_text())["points"]
    rows = t.to_pylist()
    assert [r["index"] for r in rows] == list(range(6))
    for r, w in zip(rows, want):
        assert (str(r["op"]), r["gc"]) == (w["point"]["op"], w["point"]["gc"])
        assert r["error"] is None
        for k, v in w["result"].items():
            if k in GRID or k in FIXED:
                continue  # the point's own option, as results.csv keeps it
            if isinstance(v, dict):
                for k2, v2 in v.items():
                    assert r[f"{k}.{k2}"] == (compact(v2) if isinstance(v2, (dict, list)) else v2), (k, k2)
            elif isinstance(v, list):
                assert r[k] == compact(v), k
            else:
                assert r[k] == v, k


def test_a_failing_point_is_a_row_with_its_error_and_the_others_run():
    s = flashlab.sweep({"op": [0.15, -0.5]}, **FIXED)
    rows = {r["index"]: r for r in s}
    assert len(rows) == 2
    assert rows[0]["error"] is None and rows[0]["waf"] > 1.0
    assert "geometry" in rows[1]["error"] or "op" in rows[1]["error"], rows[1]["error"]
    assert rows[1].get("waf") is None


def test_a_misspelt_option_fails_before_anything_runs():
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.sweep({"opp": [0.1, 0.2]}, **FIXED)
    assert "opp" in str(e.value)


def test_the_same_sweep_on_a_dask_local_cluster_with_a_failing_point():
    distributed = pytest.importorskip("dask.distributed")
    grid = {"op": [0.07, 0.28, -0.5]}
    local = flashlab.sweep(grid, **FIXED).table()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        s = flashlab.sweep(grid, client=client, **FIXED)
        streamed = [r["index"] for r in s]
        assert sorted(streamed) == [0, 1, 2]
        remote = s.table()
    assert remote.to_pylist() == local.to_pylist()
    assert remote.column("error").to_pylist()[2] is not None


# Points far too long to finish in a test (the full 250 GB MX500 written 20 times over,
# about a minute each even here): a test with them ends only because the sweep is cancelled.
LONG = dict(preset="mx500", workload="uniform", writes="20x", timing=False)


def test_a_cancelled_local_sweep_stops_its_running_points_and_keeps_its_rows():
    s = flashlab.sweep({"seed": list(range(1, 9))}, jobs=2, **LONG)
    time.sleep(1.0)  # the first two points are running
    s.cancel()
    assert s.rows() == []
    with flashlab.sweep({"op": [0.1, 0.2]}, **FIXED) as s:
        got = [r["index"] for r in s]
    assert sorted(got) == [0, 1] and len(s.rows()) == 2


def test_a_sweep_cancelled_from_another_thread_ends_the_iteration():
    s = flashlab.sweep({"seed": [1, 2, 3, 4]}, jobs=2, **LONG)
    threading.Timer(1.0, s.cancel).start()
    assert list(s) == []


def test_a_script_that_leaves_a_sweep_running_still_exits():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import flashlab
        s = flashlab.sweep({"seed": [1, 2, 3]}, jobs=2, preset="mx500", workload="uniform",
                           writes="20x", timing=False)
        raise SystemExit("leaving")
        """)], capture_output=True, text=True, timeout=120)
    assert "leaving" in r.stderr


def test_grid_values_may_be_any_iterable_and_numbers_any_kind():
    np = pytest.importorskip("numpy")
    assert points({"op": np.array([0.1, 0.2])}) == [{"op": 0.1}, {"op": 0.2}]
    assert flashlab.argv("sim", seed=np.int64(7), op=np.float64(0.25), queue_depth=10**30) == \
        ["sim", "--seed=7", "--op=0.25", "--queue-depth=1000000000000000000000000000000"]
    with pytest.raises(flashlab.UsageError):
        flashlab.argv("sim", seed={1, 2})
    # NaN reaches the command line's parser as "nan", which refuses it as it would there.
    with pytest.raises(flashlab.FlashlabError) as e:
        flashlab.sim(**{**FIXED, "op": float("nan")})
    assert "NaN" in str(e.value)
    with pytest.raises(flashlab.UsageError):
        flashlab.help("nosuch")
