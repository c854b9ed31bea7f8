"""The example a user starts from (examples/python/tour.py and its notebook twin) runs, and
the notebook holds exactly the script's cells."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
EXAMPLE = TOP / "examples" / "python"


def test_the_notebook_is_the_scripts_twin():
    spec = importlib.util.spec_from_file_location("make_notebook", EXAMPLE / "make_notebook.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    script = (EXAMPLE / "tour.py").read_text()
    assert (EXAMPLE / "tour.ipynb").read_text() == make.text(script), \
        "tour.ipynb differs from tour.py: run python3 examples/python/make_notebook.py"


def test_the_tour_runs_and_draws_its_figures(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("dask.distributed")
    out = EXAMPLE / "out"
    for f in ("replay.png", "grid.png"):
        (out / f).unlink(missing_ok=True)
    env = dict(os.environ, MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, str(EXAMPLE / "tour.py")], cwd=TOP, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WAF per drive" in r.stdout and "waf.fifo-vs-analytic" in r.stdout
    assert (out / "replay.png").stat().st_size > 10_000
    assert (out / "grid.png").stat().st_size > 10_000
