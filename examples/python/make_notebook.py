"""Writes tour.ipynb from tour.py: each `# %%` cell of the script becomes a code cell, each
`# %% [markdown]` cell a markdown cell (its lines without the leading `# `). The script is
the source; run this after changing it (python/tests/test_example.py checks they agree)."""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cells(script: str):
    """The script's cells: (kind, source lines)."""
    out = []
    for line in script.splitlines():
        if line.startswith("# %%"):
            out.append(["markdown" if "[markdown]" in line else "code", []])
            continue
        if not out:
            continue
        out[-1][1].append(line)
    result = []
    for kind, lines in out:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind == "markdown":
            lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines]
        result.append((kind, lines))
    return result


def notebook(script: str) -> dict:
    nb_cells = []
    for kind, lines in cells(script):
        source = [ln + "\n" for ln in lines[:-1]] + lines[-1:]
        cell = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update({"execution_count": None, "outputs": []})
        nb_cells.append(cell)
    return {
        "cells": nb_cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def text(script: str) -> str:
    return json.dumps(notebook(script), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    script = (HERE / "tour.py").read_text()
    (HERE / "tour.ipynb").write_text(text(script))
    print("wrote", HERE / "tour.ipynb", file=sys.stderr)
