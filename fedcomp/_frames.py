"""A run's rows as a :class:`pandas.DataFrame`, and an experiment's ``results.csv`` read back.

:meth:`fedcomp.RunResult.to_frame` and :func:`fedcomp.load_results` give the same columns
with the same types: ``results.csv`` is written row by row by
:class:`~fedcomp.metrics.CSVLogger` (floats as their ``repr``, so every value survives the
file exactly), and a run's rows read back from it equal its frame.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._extras import require


def history_frame(history: list[dict[str, Any]]) -> Any:
    """The rows of :attr:`RunResult.history` as a DataFrame (one row per evaluation)."""
    pandas = require("pandas", "RunResult.to_frame")
    return pandas.DataFrame.from_records(history)


def load_results(path: str | os.PathLike[str]) -> Any:
    """``results.csv`` (or the directory holding it) as a DataFrame."""
    pandas = require("pandas", "fedcomp.load_results")
    path = Path(path)
    if path.is_dir():
        path = path / "results.csv"
    if not path.exists():
        raise FileNotFoundError(f"no results at {path}: pass an experiment's output directory "
                                "(fedcomp run --out DIR) or its results.csv")
    # the logger writes repr(float): pandas >= 3 reads it back to the same double by
    # default, older pandas only with float_precision="round_trip" (deprecated in 3)
    exact = {} if int(pandas.__version__.split(".")[0]) >= 3 else {
        "float_precision": "round_trip"}
    return pandas.read_csv(path, **exact)
