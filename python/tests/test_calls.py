"""flashlab from Python against the command line: the same numbers, the same messages,
Arrow tables equal to the command line's CSV files, errors as exceptions, Ctrl-C."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import flashlab

SMALL = dict(preset="mx500", capacity="4GiB", workload="uniform", read_fraction=0.7,
             queue_depth=8, writes="0.02x", warmup="0.1x")


def cli():
    """The flashlab binary built from the same clone (FLASHLAB_BIN, or target/release)."""
    path = os.environ.get("FLASHLAB_BIN") or str(
        Path(__file__).resolve().parents[2] / "target" / "release" / "flashlab")
    if not os.path.exists(path):
        pytest.skip(f"no flashlab binary at {path}: build it with cargo build --release (or set FLASHLAB_BIN)")
    return path


def run_cli(args, **kw):
    return subprocess.run([cli()] + args, capture_output=True, text=True, check=True, **kw)


def without_wall(v):
    """A command's JSON with its wall-clock fields taken out (they differ run to run)."""
    if isinstance(v, dict):
        return {k: without_wall(x) for k, x in v.items() if k not in ("wall_s", "peak_rss_bytes")}
    if isinstance(v, list):
        return [without_wall(x) for x in v]
    return v


def test_the_options_are_spelt_as_the_command_line_spells_them():
    args = flashlab.argv("sim", preset=["mx500", "980"], queue_depth=32, json=True,
                         timing=False, workload="uniform")
    assert args == ["sim", "--preset=mx500,980", "--queue-depth=32", "--json", "--timing=off",
                    "--workload=uniform"]


def test_sim_gives_the_command_lines_numbers():
    r = flashlab.sim(**SMALL)
    out = run_cli(flashlab.argv("sim", **SMALL) + ["--json"])
    assert without_wall(r.figures) == without_wall(json.loads(out.stdout))
    assert r["waf"] > 1.0
    assert r.argv[:2] == ["flashlab", "sim"]


def test_same_arguments_and_seed_same_numbers_and_another_seed_others():
    a = flashlab.sim(seed=7, **SMALL)
    b = flashlab.sim(seed=7, **SMALL)
    c = flashlab.sim(seed=8, **SMALL)
    assert without_wall(a.figures) == without_wall(b.figures)
    assert a.timeseries.equals(b.timeseries)
    assert without_wall(a.figures) != without_wall(c.figures)


def cell(text, kind):
    if text == "":
        return None
    return int(text) if pa.types.is_integer(kind) else float(text)


def test_the_timeseries_table_is_the_command_lines_csv(tmp_path):
    r = flashlab.sim(**SMALL)
    csv_path = tmp_path / "ts.csv"
    run_cli(flashlab.argv("sim", **SMALL) + ["--timeseries", str(csv_path)])
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    t = r.timeseries
    assert t.column_names == list(rows[0].keys())
    assert t.num_rows == len(rows) > 5
    for name in t.column_names:
        col = t.column(name).to_pylist()
        kind = t.schema.field(name).type
        for i, row in enumerate(rows):
            if name == "run":
                assert col[i] == row[name]
                continue
            want = cell(row[name], kind)
            if want is None:
                assert col[i] is None, (name, i)
            else:
                assert col[i] == pytest.approx(want, rel=1e-12, abs=1e-9), (name, i)


def test_the_request_table_is_the_command_lines_request_log(tmp_path):
    r = flashlab.sim(requests=True, **SMALL)
    log = tmp_path / "req.csv"
    run_cli(flashlab.argv("sim", **SMALL) + ["--request-log", str(log)])
    with open(log) as f:
        rows = list(csv.DictReader(f))
    t = r.requests
    assert t.column_names == list(rows[0].keys())
    assert t.num_rows == len(rows)
    for name in ("submit_ns", "complete_ns", "latency_ns", "offset_bytes", "len_bytes"):
        assert t.column(name).to_pylist() == [int(x[name]) for x in rows], name
    assert t.column("op").to_pylist() == [x["op"] for x in rows]
    assert set(t.column("op").to_pylist()) == {"read", "write"}


def test_histograms_count_every_request():
    r = flashlab.sim(requests=True, **SMALL)
    h = r.histograms.to_pandas()
    counts = h.groupby("op", observed=True)["count"].sum()
    ops = r.requests.to_pandas()["op"].value_counts()
    assert counts["read"] == ops["read"]
    assert counts["write"] == ops["write"]


def test_pandas_reads_the_tables():
    df = flashlab.sim(**SMALL).timeseries.to_pandas()
    assert df["t_s"].is_monotonic_increasing
    assert str(df["read_count"].dtype) == "int64"


def test_several_drives_side_by_side_give_one_run_each():
    r = flashlab.sim(**{**SMALL, "preset": ["mx500", "840pro"]})
    assert [run["run"] for run in r["runs"]] == ["mx500", "840pro"]
    runs = set(r.timeseries.column("run").to_pylist())
    assert runs == {"mx500", "840pro"}


def test_a_misspelt_option_names_the_options_there_are():
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.sim(queue_dpeth=4, **{k: v for k, v in SMALL.items() if k != "queue_depth"})
    assert "queue_dpeth" in str(e.value) and "queue_depth" in str(e.value)


def test_a_bad_value_gets_the_command_lines_message():
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.sim(**{**SMALL, "queue_depth": 0})
    out = subprocess.run([cli()] + flashlab.argv("sim", **{**SMALL, "queue_depth": 0}),
                         capture_output=True, text=True)
    assert out.returncode != 0
    first = str(e.value).splitlines()[0]
    assert first in out.stderr


def test_a_failing_run_raises_with_the_command_lines_message():
    with pytest.raises(flashlab.FlashlabError) as e:
        flashlab.sim(**{**SMALL, "preset": "no-such-drive"})
    out = subprocess.run([cli()] + flashlab.argv("sim", **{**SMALL, "preset": "no-such-drive"}),
                         capture_output=True, text=True)
    assert str(e.value) in out.stderr
    assert not isinstance(e.value, flashlab.UsageError)


def test_presets_are_the_command_lines():
    names = [p["name"] for p in flashlab.presets()]
    out = run_cli(["presets"]).stdout
    assert names and all(n in out for n in names)
    mx = flashlab.preset("mx500")
    assert mx["config"]["ssd"]["geometry"]["page_size_bytes"] > 0
    with pytest.raises(flashlab.FlashlabError):
        flashlab.preset("no-such-drive")


def test_commands_that_manage_the_machine_are_refused():
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.run("capture")
    assert "command line" in str(e.value)


def test_help_is_the_command_lines():
    assert "--queue-depth" in flashlab.help("sim")


def test_calls_on_threads_at_once_keep_their_own_output():
    from concurrent.futures import ThreadPoolExecutor
    seeds = [1, 2, 3, 4]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: flashlab.sim(seed=s, **SMALL), seeds))
    alone = [flashlab.sim(seed=s, **SMALL) for s in seeds]
    for g, a in zip(got, alone):
        assert without_wall(g.figures) == without_wall(a.figures)
        assert g.timeseries.equals(a.timeseries)


def interrupted(script, ready):
    """Runs `script` in a new Python, sends it SIGINT once `ready()` (polled; at most 60 s),
    returns its exit code and output. The child first puts back Python's own SIGINT handler:
    a test run started in the background of a shell inherits SIGINT ignored (POSIX shells
    ignore it for asynchronous commands), and Python then installs no KeyboardInterrupt."""
    script = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              + textwrap.dedent(script))
    p = subprocess.Popen([sys.executable, "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not ready() and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


def test_ctrl_c_cancels_a_long_run_and_raises_keyboardinterrupt():
    code, out, err = interrupted("""
        import time, flashlab
        print("started", flush=True)
        t = time.time()
        try:
            flashlab.sim(preset="mx500", workload="uniform", writes="20x", timing="off")
            print("finished")
        except KeyboardInterrupt as e:
            print("interrupted after", round(time.time() - t, 1), e)
        """, lambda: time.sleep(3) or True)
    assert "interrupted after" in out, (out, err)
    assert "finished" not in out
    assert "interrupted" in out


def test_ctrl_c_in_a_join_on_real_files_removes_its_spill_files(tmp_path):
    work = tmp_path / "spill"
    data = tmp_path / "tables"
    work.mkdir()
    data.mkdir()
    code, out, err = interrupted(f"""
        import flashlab
        try:
            flashlab.join(backend="os", dir={str(work)!r}, data_dir={str(data)!r}, sf=0.5,
                          memory="2MiB", repeat=100000)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        """, lambda: any(work.iterdir()))
    assert "interrupted" in out, (out, err)
    assert err == "", "a library call prints no progress"
    # The input tables are kept (generated once, reused), as the command line keeps them;
    # the run's spill files are gone.
    assert list(work.iterdir()) == []
    assert list(data.iterdir()) != []


def test_a_timed_sim_without_timing_records_nothing():
    r = flashlab.sim(**{**SMALL, "timing": False})
    assert r.timeseries is None and r["waf"] > 1.0
    assert math.isfinite(r["waf"])


def test_fio_gives_its_json_without_being_asked(tmp_path):
    import shutil
    if shutil.which("fio") is None:
        pytest.skip("no fio program (apt-get install fio)")
    job = Path(__file__).resolve().parents[2] / "examples" / "fio" / "randwrite-qd32.fio"
    r = flashlab.fio(jobfile=job, preset="mx500", capacity="1GiB")
    assert "jobs" in r.figures and r.timeseries is not None
    with pytest.raises(flashlab.UsageError):
        flashlab.fio(jobfile=job, preset="mx500", capacity="1GiB", output_format="normal")


@pytest.mark.parametrize("call", [
    "flashlab.btree(preload=3000000, ops=1000000)",
    "flashlab.btree(preload=3000000, ops=1000000, backend='sim', preset='mx500', capacity='8GiB')",
    "flashlab.kv(docs=400000, ops=2000000, backend='sim', preset='840pro', capacity='4GiB')",
    "flashlab.replay(trace=TRACE, preset='mx500', capacity='1GiB', repeat=100000)",
])
def test_ctrl_c_stops_engines_in_memory_and_on_a_simulated_drive(call):
    trace = Path(__file__).resolve().parents[2] / "examples" / "kv-ext4.trace"
    started = time.time()
    code, out, err = interrupted(f"""
        import flashlab
        TRACE = {str(trace)!r}
        print("started", flush=True)
        try:
            {call}
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
        """, lambda: time.time() - started > 3)
    assert "interrupted" in out, (out, err)


def test_recordings_are_refused_where_there_is_nothing_to_record(tmp_path):
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.run("simfs", requests=True)
    assert "records nothing" in str(e.value)
    with pytest.raises(flashlab.FlashlabError) as e:
        flashlab.join(series=True, backend="os", dir=tmp_path, sf=0.01, memory="1MiB")
    assert "backend sim" in str(e.value)
    with pytest.raises(flashlab.FlashlabError) as e:
        flashlab.sim(series=True, **{**SMALL, "timing": False})
    assert "timing on" in str(e.value)


def test_usage_errors_read_as_a_library_callers():
    with pytest.raises(flashlab.UsageError) as e:
        flashlab.sim(preset="mx500")
    text = str(e.value)
    assert "--workload" in text and "--json" not in text and 'flashlab.help("sim")' in text
