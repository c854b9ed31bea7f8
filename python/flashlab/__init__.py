"""flashlab from Python: simulated SSDs and HDDs, trace replay and the papers' systems.

Every function runs the command line's command of the same name, in this process, with
the same options and defaults: a keyword is an option's name (``queue_depth=32`` for
``--queue-depth 32``), ``True``/``False`` set a switch or an on/off option, a list gives an
option several values. The command line's own parser reads them, so a misspelt option, a
bad value or a combination the command refuses raises :class:`UsageError` with the
command line's message. ``flashlab.help("sim")`` prints a command's options.

A call returns a :class:`Result`: ``figures`` is what the command prints with ``--json``
(a dict), and ``tables`` holds the recordings as Arrow tables (``timeseries``: figures per
interval of virtual time; ``histograms``: latency buckets; ``requests``: every request,
when asked with ``requests=True``), which pandas (``.to_pandas()``) and polars
(``polars.from_arrow``) read.

A run releases the GIL; Ctrl-C (KeyboardInterrupt) cancels that call alone, waits until it
has removed what it made (a join's spill files, a tree's files), then raises. Same
arguments and seed, same numbers.

    >>> import flashlab
    >>> r = flashlab.sim(preset="mx500", capacity="4GiB", workload="uniform",
    ...                  read_fraction=0.7, queue_depth=32, writes="0.25x")
    >>> r["stats"]["waf"], r.timeseries.to_pandas()["read_p99_us"].max()
"""

from __future__ import annotations

import json
import numbers
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa

from . import _flashlab

__all__ = [
    "COMMANDS",
    "FlashlabError",
    "UsageError",
    "Result",
    "run",
    "sim",
    "replay",
    "fio",
    "join",
    "btree",
    "kv",
    "simfs",
    "presets",
    "preset",
    "help",
    "argv",
    "sweep",
    "Sweep",
]

__version__ = _flashlab.VERSION

#: The commands a call may run (the others, such as ``reproduce`` and ``capture``, from the
#: command line).
COMMANDS: List[str] = list(_flashlab.COMMANDS)

#: How long a call waits for its command at a time before Python may handle a signal (s).
_WAIT_STEP_S = 0.1


class FlashlabError(RuntimeError):
    """A command failed; the message is the command line's (after ``flashlab: error:``)."""


class UsageError(FlashlabError, ValueError):
    """The options do not parse, or name one the command does not have."""


class Result:
    """What one call produced.

    ``command`` and ``argv`` say what ran (``argv`` as the command line would spell it),
    ``figures`` is the command's JSON, ``tables`` its recordings by name.
    """

    def __init__(self, command: str, argv: List[str], figures: Any, tables: Dict[str, pa.Table]):
        self.command = command
        self.argv = argv
        self.figures = figures
        self.tables = tables

    def __getitem__(self, key: str) -> Any:
        return self.figures[key]

    def __contains__(self, key: str) -> bool:
        return isinstance(self.figures, dict) and key in self.figures

    @property
    def timeseries(self) -> Optional[pa.Table]:
        """Figures per interval of virtual time (a row per run and interval)."""
        return self.tables.get("timeseries")

    @property
    def histograms(self) -> Optional[pa.Table]:
        """Latency histograms: a row per run, operation and bucket (latency_us, count)."""
        return self.tables.get("histograms")

    @property
    def requests(self) -> Optional[pa.Table]:
        """Every request as the drive served it (with ``requests=True``)."""
        return self.tables.get("requests")

    def __repr__(self) -> str:
        tables = ", ".join(f"{k}: {v.num_rows} rows" for k, v in self.tables.items())
        return f"<flashlab.Result {' '.join(self.argv)}{' (' + tables + ')' if tables else ''}>"


def _column(kind: str, data: bytes, extra: Any) -> pa.Array:
    if kind == "u64":
        # Counts, bytes and nanoseconds, all below 2**63: signed, as pandas likes them.
        return pa.Array.from_buffers(pa.int64(), len(data) // 8, [None, pa.py_buffer(data)])
    if kind == "f64":
        n = len(data) // 8
        validity = pa.py_buffer(extra) if extra is not None else None
        return pa.Array.from_buffers(pa.float64(), n, [validity, pa.py_buffer(data)], null_count=-1)
    if kind == "text":
        codes = pa.Array.from_buffers(pa.uint32(), len(data) // 4, [None, pa.py_buffer(data)])
        return pa.DictionaryArray.from_arrays(codes, pa.array(extra, pa.string()))
    raise FlashlabError(f"unknown column kind {kind!r} (the extension module and the package differ)")


def _table(columns: Sequence[tuple]) -> pa.Table:
    names = [c[0] for c in columns]
    arrays = [_column(kind, data, extra) for _, kind, data, extra in columns]
    return pa.Table.from_arrays(arrays, names=names)


def argv(command: str, **options: Any) -> List[str]:
    """The command line that ``command`` with ``options`` runs (``--json`` aside)."""
    ok, args, why = _flashlab.argv(command, json.dumps(_named(options)))
    if not ok:
        raise UsageError(why)
    return args


def _value(name: str, v: Any) -> Any:
    """One option's value as the command line's text (numbers exactly as Python writes
    them), ``True``/``False``, or ``None``."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if hasattr(v, "__fspath__"):
        return str(v.__fspath__())
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if hasattr(v, "item") and callable(v.item) and getattr(v, "shape", None) == ():
        return _value(name, v.item())  # a numpy scalar of another kind (numpy.bool_)
    raise UsageError(f"option {name}: {v!r} is not a value (give text, a number, "
                     "True/False, a path or a list of them)")


def _named(options: Dict[str, Any]) -> List[list]:
    named = []
    for k, v in options.items():
        if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and getattr(v, "shape", ()) != ()):
            items = v.tolist() if hasattr(v, "tolist") else v
            named.append([k, [_value(k, x) for x in items]])
        else:
            named.append([k, _value(k, v)])
    return named


def _execute(args: List[str], series: bool, requests: bool, stop: Any = None) -> Any:
    """Runs ``args`` on a thread of its own; waits in short steps so that Ctrl-C reaches
    Python, and cancels the call if anything interrupts the wait or ``stop`` (a
    ``threading.Event``) is set."""
    call = _flashlab.start(args, series, requests)
    try:
        while not call.wait(_WAIT_STEP_S):
            if stop is not None and stop.is_set():
                call.cancel()
    except BaseException:
        # Cancelled: wait (in steps, so a second Ctrl-C is heard) until the call has
        # removed what it made; a second interrupt stops waiting (the call goes on
        # cleaning up on its own thread).
        call.cancel()
        while not call.wait(_WAIT_STEP_S):
            pass
        call.outcome()
        raise
    kind, text, tables = call.outcome()
    if kind == "usage":
        raise UsageError(text)
    if kind == "failed":
        raise FlashlabError(text)
    if kind == "cancelled":
        raise KeyboardInterrupt(text)
    figures = json.loads(text)
    return figures, {name: _table(cols) for name, cols in tables.items()}


def run(command: str, *, series: bool = False, requests: bool = False, **options: Any) -> Result:
    """Runs ``command`` with ``options``; ``series`` records figures per interval and latency
    histograms, ``requests`` every request (simulated drives with timing on)."""
    args = argv(command, **options)
    figures, tables = _execute(args, series, requests)
    return Result(command, ["flashlab"] + args, figures, tables)


def _timed(options: Dict[str, Any]) -> bool:
    return options.get("timing", True) not in (False, "off")


def sim(*, series: Optional[bool] = None, requests: bool = False, **options: Any) -> Result:
    """``flashlab sim``: a drive under a synthetic workload (``workload=`` is required).
    ``series`` defaults to on with timing on."""
    if series is None:
        series = _timed(options)
    return run("sim", series=series, requests=requests, **options)


def replay(*, series: Optional[bool] = None, requests: bool = False, **options: Any) -> Result:
    """``flashlab replay``: a block trace on a simulated drive (``trace=`` is required)."""
    if series is None:
        series = _timed(options)
    return run("replay", series=series, requests=requests, **options)


def fio(*, series: bool = True, requests: bool = False, **options: Any) -> Result:
    """``flashlab fio``: an fio job file on a simulated drive (``jobfile=`` is required)."""
    return run("fio", series=series, requests=requests, **options)


def join(*, series: bool = False, requests: bool = False, **options: Any) -> Result:
    """``flashlab join``: an out-of-core hash join on a simulated drive or real files."""
    return run("join", series=series, requests=requests, **options)


def btree(*, series: bool = False, requests: bool = False, **options: Any) -> Result:
    """``flashlab btree``: the papers' B+trees under inserts and lookups."""
    return run("btree", series=series, requests=requests, **options)


def kv(*, series: bool = False, requests: bool = False, **options: Any) -> Result:
    """``flashlab kv``: the append-only key-value store under batched commits."""
    return run("kv", series=series, requests=requests, **options)


def simfs(**options: Any) -> Result:
    """``flashlab simfs``: the simulated file system's allocation and discards."""
    return run("simfs", **options)


def presets() -> List[Dict[str, Any]]:
    """The built-in presets: name, description, summary and every setting (``config``)."""
    return run("presets").figures


def preset(name: str) -> Dict[str, Any]:
    """One preset (a built-in name or a preset file's path): name, description, summary
    and every setting (``config``)."""
    return run("presets", name=name).figures


def help(command: str) -> str:
    """The command line's help for ``command``: its options, defaults and what they do."""
    ok, text = _flashlab.help(command)
    if not ok:
        raise UsageError(text)
    return text


from .sweep import Sweep, sweep  # noqa: E402  (it uses the names above)
