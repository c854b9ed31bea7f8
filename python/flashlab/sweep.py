"""Sweeps: one command over a grid of options, on this machine's cores or on a Dask cluster.

``flashlab.sweep({"op": [0.07, 0.28], "gc": ["greedy", "fifo"]}, preset="x25e",
workload="uniform", timing=False)`` runs ``sim`` at every point of the grid (the first
option varies slowest, as ``flashlab sweep`` orders them). Without a client the points run
on threads of this process (each call releases the GIL, so they use every core); with a
``dask.distributed.Client`` they run on its workers, so the same code that runs on a
``LocalCluster`` runs on a cluster of many machines by changing the scheduler's address.

The result is a :class:`Sweep`: iterate it to get each point's row as the point finishes
(in the order they finish), or call ``.table()`` for every row in grid order as an Arrow
table. A row holds the point's index and options, every figure of the command's JSON (one
level of nesting joined with ``.``, as ``flashlab sweep``'s results.csv names them), and
``error``: None, or the message of a point that failed. A failed point never stops the
others.

Dask rather than Ray: a sweep's points are independent calls that release the GIL, which
is what Dask's futures and ``as_completed`` serve directly; Dask is pure Python on PyPI
(no runtime of its own to install), its ``LocalCluster`` is what tests and laptops use,
and the clusters people already run (Slurm, Kubernetes, SSH) have Dask deployments.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

import pyarrow as pa

Grid = Union[Mapping[str, Sequence[Any]], Sequence[Mapping[str, Any]]]

#: Figures a point run with timing off did not measure (it reports them as 0): null in its
#: row, as ``flashlab sweep`` leaves them empty, so nobody takes them for zero.
_TIMED_FIELDS = ("iops", "read_mb_per_s", "write_mb_per_s", "simulated_ns", "trim_busy_ns",
                 "trim_interface_ns")


def points(grid: Grid) -> List[Dict[str, Any]]:
    """The points of ``grid``: a mapping of option to values gives their product (the first
    option varying slowest); a list of mappings is the points themselves."""
    if isinstance(grid, Mapping):
        names = list(grid.keys())
        axes = []
        for name in names:
            values = grid[name]
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
                raise ValueError(f"sweep grid: {name!r} must be a list of values, not {values!r}")
            values = values.tolist() if hasattr(values, "tolist") else list(values)
            if len(values) == 0:
                raise ValueError(f"sweep grid: {name!r} has no values")
            axes.append(values)
        return [dict(zip(names, combo)) for combo in itertools.product(*axes)]
    out = [dict(p) for p in grid]
    if not out:
        raise ValueError("sweep grid: no points")
    return out


def _flatten(figures: Dict[str, Any]) -> Dict[str, Any]:
    """One level of nesting joined with '.', deeper values as JSON text (as results.csv)."""
    row: Dict[str, Any] = {}
    for k, v in figures.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                row[f"{k}.{k2}"] = _json(v2) if isinstance(v2, (dict, list)) else v2
        elif isinstance(v, list):
            row[k] = _json(v)
        else:
            row[k] = v
    return row


def _json(v: Any) -> str:
    """Compact JSON, as results.csv writes nested values."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _unmeasured_as_null(figures: Dict[str, Any]) -> None:
    if figures.get("timing", True):
        return
    for k in list(figures):
        if k in _TIMED_FIELDS:
            figures[k] = None
        elif k.endswith("_latency_ns") and isinstance(figures[k], dict):
            for f in figures[k]:
                if f != "count":
                    figures[k][f] = None


def run_point(command: str, index: int, options: Dict[str, Any],
              stop: Optional[threading.Event] = None) -> Dict[str, Any]:
    """Runs one point; its row (never raises for a failed point: the row carries the
    error). Importable by name, so Dask workers can run it."""
    from . import FlashlabError, _execute, argv

    row: Dict[str, Any] = {"index": index}
    row.update({k: (str(v) if hasattr(v, "__fspath__") else v) for k, v in options.items()})
    try:
        args = argv(command, **options)
        figures, _ = _execute(args, False, False, stop=stop)
        if isinstance(figures, dict):
            figures.pop("wall_s", None)
            _unmeasured_as_null(figures)
            for k, v in _flatten(figures).items():
                row.setdefault(k, v)
        row["error"] = None
    except FlashlabError as e:
        row["error"] = str(e)
    return row


class Sweep:
    """A sweep under way (its points started when it was made): iterate for rows as points
    finish; ``table()`` for all of them; ``cancel()`` to stop it."""

    def __init__(self, rows: Iterator[Dict[str, Any]], cancel: Callable[[], None], total: int):
        self._rows = rows
        self._cancel = cancel
        self._done: List[Dict[str, Any]] = []
        self.total = total

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for row in self._rows:
            self._done.append(row)
            yield row

    def cancel(self) -> None:
        """Stops the sweep: points not yet started never start, and on local threads the
        points running are cancelled (each removes what it made); returns when they have
        stopped. The rows already received stay in ``rows()``; a thread iterating the
        sweep stops. May be called from any thread."""
        self._cancel()
        try:
            self._rows.close()
        except ValueError:
            pass  # another thread is iterating: it sees the cancellation and stops

    def __enter__(self) -> "Sweep":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()

    def rows(self) -> List[Dict[str, Any]]:
        """Every row received, in grid order (waits for the points still running)."""
        for _ in self:
            pass
        return sorted(self._done, key=lambda r: r["index"])

    def table(self) -> pa.Table:
        """Every row in grid order as an Arrow table (a column per figure; a figure a point
        lacks is null there)."""
        rows = self.rows()
        names: List[str] = []
        for r in rows:
            for k in r:
                if k not in names:
                    names.append(k)
        # `error` last, as in results.csv.
        names = [n for n in names if n != "error"] + ["error"]
        columns = {n: [r.get(n) for r in rows] for n in names}
        return pa.table({n: _array(v) for n, v in columns.items()})

    def to_pandas(self):
        return self.table().to_pandas()


def _array(values: List[Any]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Mixed kinds in one column (a number here, text there): as text.
        return pa.array([None if v is None else str(v) for v in values], pa.string())


#: Local sweeps not yet ended, cancelled when the interpreter exits (their threads would
#: otherwise keep it waiting for every point).
_LIVE: set = set()


class _LocalRun:
    """A local sweep's pool and its cancellation."""

    def __init__(self, jobs: int):
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="flashlab-sweep")
        _LIVE.add(self)

    def cancel(self) -> None:
        self.stop.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        _LIVE.discard(self)


def _cancel_live_sweeps() -> None:
    for run in list(_LIVE):
        run.cancel()


# Before concurrent.futures joins its worker threads at exit (callbacks registered here
# run in reverse order of registration, so this one runs first).
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_cancel_live_sweeps)


def _local(command: str, pts: List[Dict[str, Any]], jobs: int):
    """Submits every point to a pool of ``jobs`` threads now; the rows as they finish, and
    how to cancel."""
    run = _LocalRun(jobs)
    futures = {run.pool.submit(run_point, command, i, p, run.stop): i for i, p in enumerate(pts)}

    def rows() -> Iterator[Dict[str, Any]]:
        pending = set(futures)
        try:
            while pending and not run.stop.is_set():
                done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                for f in done:
                    if f.cancelled() or run.stop.is_set():
                        continue
                    e = f.exception()
                    if e is None:
                        yield f.result()
                    elif not isinstance(e, KeyboardInterrupt):
                        i = futures[f]
                        yield {"index": i, **pts[i], "error": f"flashlab failed: {e!r}"}
        except BaseException:
            run.cancel()
            raise
        if not run.stop.is_set():
            run.pool.shutdown(wait=False)
            _LIVE.discard(run)

    return rows(), run.cancel


def _dask(command: str, pts: List[Dict[str, Any]], client: Any):
    """Submits every point to ``client`` now; the rows as they finish, and how to cancel."""
    from dask.distributed import as_completed

    futures = [client.submit(run_point, command, i, p, pure=False) for i, p in enumerate(pts)]
    index = {f.key: i for i, f in enumerate(futures)}

    def cancel() -> None:
        client.cancel([f for f in futures if not f.done()])

    def rows() -> Iterator[Dict[str, Any]]:
        try:
            for f in as_completed(futures):
                i = index[f.key]
                if f.status == "error":
                    # The worker itself failed (it died, or the package is missing there).
                    yield {"index": i, **pts[i], "error": f"the worker failed: {f.exception()!r}"}
                elif f.status == "finished":
                    yield f.result()
        except BaseException:
            cancel()
            raise

    return rows(), cancel


def sweep(grid: Grid, *, command: str = "sim", client: Any = None, jobs: Optional[int] = None,
          **fixed: Any) -> Sweep:
    """Runs ``command`` at every point of ``grid`` with the options ``fixed`` beside each
    point's; on ``client`` (a ``dask.distributed.Client``) or on ``jobs`` threads here
    (default: the machine's cores). Options are checked before anything runs: a grid with
    an option the command does not have raises :class:`flashlab.UsageError` at once."""
    from . import UsageError, argv

    pts = [{**fixed, **p} for p in points(grid)]
    # Every point's options are spelt before any runs (a misspelt option fails now, not
    # on a worker an hour later); values the command refuses fail in that point's row.
    for p in pts:
        try:
            argv(command, **p)
        except UsageError as e:
            raise UsageError(f"sweep point {p}: {e}") from None
    if client is not None:
        rows, cancel = _dask(command, pts, client)
    else:
        rows, cancel = _local(command, pts, max(1, jobs or os.cpu_count() or 1))
    return Sweep(rows, cancel, len(pts))
