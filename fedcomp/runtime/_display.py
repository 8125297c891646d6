"""How a run shows itself: a one-line ``repr`` and a small HTML table for notebooks.

A :class:`~fedcomp.runtime.RunResult` is a NamedTuple whose default ``repr`` prints its
arrays (the model, the client states: megabytes for a network). What a user looks for is
how the run ended, how far it got, where its metrics stood and what the model is; the
arrays stay one attribute away (``run.x``, ``run.history``, ``run.to_frame()``). Result
frames (:func:`fedcomp.compare`, :func:`fedcomp.load_results`, ``run.to_frame()``) are
pandas DataFrames, which show themselves already.
"""

from __future__ import annotations

import html
import math
from typing import Any

#: Columns of a row before its metrics (the tags come first, then these).
_BOOKKEEPING = ("round", "wall_s")

#: Metrics a one-line ``repr`` shows at most (the HTML table shows every one).
REPR_METRICS = 4


def last_metrics(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The last row's columns after ``wall_s`` (the runner's own, the stopping measure and
    the metrics), or its numeric columns other than the counters where it has no
    ``wall_s``; ``{}`` for a run without rows.

    Examples
    --------
    >>> last_metrics([{"algorithm": "za1", "round": 5, "grad_evals": 9, "wall_s": 0.1,
    ...                "objective": 0.5, "nnz": 3.0}])
    {'objective': 0.5, 'nnz': 3.0}
    """
    if not history:
        return {}
    row = history[-1]
    keys = list(row)
    if "wall_s" in keys:
        return {k: row[k] for k in keys[keys.index("wall_s") + 1:]}
    from ..oracle import Counters

    skip = {*_BOOKKEEPING, *Counters().as_dict(), "seed"}
    return {k: v for k, v in row.items() if k not in skip and isinstance(v, int | float)}


def model_text(x: Any) -> str:
    """``float64 (60,) numpy``: the model's dtype, shape and array library (its type for a
    model that is not one array: a network's parameters)."""
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return type(x).__name__
    library = type(x).__module__.split(".")[0]
    dtype_name = str(dtype).removeprefix("torch.")
    return f"{dtype_name} {tuple(int(n) for n in shape)} {library}"


def _value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def run_repr(run: Any) -> str:
    """``RunResult(completed, 20 rounds, 3 rows; objective=0.5724, ...; x: float64 (3,)
    numpy)``: one line, no array.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.oracle import Counters
    >>> from fedcomp.runtime import RunResult
    >>> rows = [{"round": 10, "wall_s": 0.1, "objective": 0.5724096, "nnz": 3.0}]
    >>> run = RunResult(np.zeros(3), rows, None, None, Counters(), "converged", 10)
    >>> print(run_repr(run))
    RunResult(converged, 10 rounds, 1 row; objective=0.5724, nnz=3; x: float64 (3,) numpy)
    """
    metrics = last_metrics(run.history)
    shown = ", ".join(f"{k}={_value(v)}" for k, v in list(metrics.items())[:REPR_METRICS])
    if len(metrics) > REPR_METRICS:
        shown += ", ..."
    rows = len(run.history)
    return (f"{type(run).__name__}({run.status}, {run.n_rounds} rounds, {rows} "
            f"row{'' if rows == 1 else 's'}{'; ' + shown if shown else ''}; "
            f"x: {model_text(run.x)})")


def run_html(run: Any) -> str:
    """A small HTML table of the run (status, rounds, rows, model, the last row's metrics)
    for Jupyter (``_repr_html_``); every value escaped."""
    cells = [("status", run.status), ("rounds", run.n_rounds),
             ("evaluation rows", len(run.history)), ("model x", model_text(run.x))]
    cells += [(f"last row: {k}", _value(v)) for k, v in last_metrics(run.history).items()]
    body = "".join(f"<tr><th style=\"text-align:left\">{html.escape(str(k))}</th>"
                   f"<td style=\"text-align:left\">{html.escape(str(v))}</td></tr>"
                   for k, v in cells)
    name = html.escape(type(run).__name__)
    return (f"<table class=\"fedcomp-run\"><caption style=\"text-align:left\"><b>{name}</b> "
            f"(<code>.x</code>, <code>.history</code>, <code>.to_frame()</code>)</caption>"
            f"{body}</table>")
