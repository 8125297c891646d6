"""The evaluation rows of a run, shared by the three runners.

:func:`~fedcomp.runtime.simulate`, :func:`~fedcomp.runtime.simulate_async` and
:func:`~fedcomp.runtime.simulate_decentralized` write the same row at the same moments:
the tags, ``round``, the counters, ``wall_s``, the runner's own columns (``sim_time``,
``max_delay``, ...), then the metrics of the model. A :class:`Recorder` holds what that
needs (metrics, reference, logger, tags, ``eval_every``, the progress line), so that a
runner says only when it is at a round and what its own columns are.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._array import Array
from ..metrics import evaluate
from ..oracle import Counters
from ..problem import Problem


class _Progress:
    """A run's progress, where its user looks: a one-line display on a terminal (rounds/s
    and ETA), a tqdm widget in a Jupyter notebook, nothing elsewhere.

    ``enabled``: ``"auto"`` shows it on a terminal (stderr) or in a notebook, ``True``
    always, ``False`` never. In a notebook the widget is ``tqdm.auto``'s when tqdm and
    ipywidgets are installed (:func:`progress_display`), else the terminal's line (Jupyter
    keeps one line for its carriage returns). A run that stops early (converged, stopped by
    a callback) completes its widget at the round it stopped when this display is dropped.
    """

    def __init__(self, enabled: Any, total: int, label: str) -> None:
        self.display = progress_display(enabled)
        self.enabled = self.display != "off"
        self.total, self.label = total, label
        self.start = self.last = time.perf_counter()
        self.bar: Any = None
        if self.display == "widget":
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=label, unit="round", leave=True)
            # not a __del__: the finalizer holds the bar, never this object
            weakref.finalize(self, _complete, self.bar)

    def update(self, done: int, extra: str = "") -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            if extra:
                self.bar.set_postfix_str(extra, refresh=False)
            if done >= self.total:
                self.bar.close()
            return
        now = time.perf_counter()
        if now - self.last < 0.2 and done < self.total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        sys.stderr.write(f"\r{self.label}: round {done}/{self.total}  {rate:.1f} rounds/s  "
                         f"ETA {eta:.0f}s  {extra}   ")
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def progress_display(enabled: Any) -> str:
    """How a run shows its progress: ``"widget"`` (tqdm in a Jupyter notebook, with
    ipywidgets), ``"line"`` (a line on stderr) or ``"off"``.

    Examples
    --------
    >>> progress_display(False)
    'off'
    >>> progress_display(True) in ("line", "widget")
    True
    """
    if enabled != "auto" and not enabled:
        return "off"
    if in_notebook():
        # tqdm.auto without ipywidgets would warn and print text: the line is that text
        return "widget" if _installed("tqdm") and _installed("ipywidgets") else "line"
    return "line" if enabled != "auto" or sys.stderr.isatty() else "off"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (an IPython shell with a kernel: Jupyter,
    VS Code, Colab), where a progress widget shows; IPython in a terminal is not."""
    ipython = sys.modules.get("IPython")  # never imported here: a kernel has it already
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _complete(bar: Any) -> None:
    """Close a dropped run's widget; one that stopped early ends full at its last round
    (tqdm would paint the unfinished bar red, the colour of a failure)."""
    if bar.total and bar.n < bar.total:
        bar.total = bar.n
    bar.close()


class Recorder:
    """Builds, keeps and logs a run's evaluation rows, and shows its progress line.

    Parameters
    ----------
    problem : Problem
    rounds : int
        The run's last round (server steps for the asynchronous runner): always evaluated.
    eval_every : int
        Evaluate every this many rounds (checked by the runner, with its other arguments).
    metrics, reference, logger, progress
        As in :func:`~fedcomp.runtime.simulate`.
    tags : dict, optional
        Extra columns at the head of every row (copied: ``recorder.tags``).
    label : str
        The progress line's name when ``tags`` has no ``"algorithm"``.
    evaluation : callable, optional
        ``evaluation(model) -> dict`` of metric columns (default: ``metrics`` evaluated
        on the model); the decentralized runner passes its per-node evaluation.

    Attributes
    ----------
    history : list of dict
        The rows so far, in order.
    tags : dict
    """

    def __init__(self, problem: Problem, rounds: int, *, eval_every: int,
                 metrics: Sequence[Any], reference: Any, logger: Any,
                 tags: dict[str, Any] | None, progress: Any, label: str,
                 evaluation: Callable[[Array], dict[str, Any]] | None = None) -> None:
        self.rounds, self.eval_every, self.logger = rounds, eval_every, logger
        self.tags = dict(tags or {})
        self.history: list[dict[str, Any]] = []
        self.evaluation = evaluation or (
            lambda model: evaluate(problem, model, metrics, reference))
        self._bar = _Progress(progress, rounds, self.tags.get("algorithm", label))

    def due(self, round_: int) -> bool:
        """Whether round ``round_`` is evaluated: every ``eval_every`` rounds and the last."""
        return round_ % self.eval_every == 0 or round_ == self.rounds

    def next_due(self, round_: int) -> int:
        """The first round after ``round_`` that is evaluated."""
        return min(self.rounds, (round_ // self.eval_every + 1) * self.eval_every)

    def record(self, round_: int, model: Array, counters: Counters, wall: float,
               **columns: Any) -> dict[str, Any]:
        """Append and log the row of ``round_``; ``columns`` follow ``wall_s``.

        The counters are read before ``model`` is evaluated, and the keys keep this order
        (tags, ``round``, counters, ``wall_s``, ``columns``, metrics): the columns of
        ``results.csv`` follow it.
        """
        row: dict[str, Any] = {**self.tags, "round": round_, **counters.as_dict(),
                               "wall_s": wall, **columns}
        row.update(self.evaluation(model))
        self.history.append(row)
        if self.logger is not None:
            self.logger.log(row)
        return row

    def record_values(self, round_: int, counters: Counters, wall: float,
                      columns: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
        """Append and log the row of ``round_`` whose metric ``values`` were computed on the
        device, in the run's compiled call (:meth:`record`'s row, in its key order)."""
        row: dict[str, Any] = {**self.tags, "round": round_, **counters.as_dict(),
                               "wall_s": wall, **columns, **values}
        self.history.append(row)
        if self.logger is not None:
            self.logger.log(row)
        return row

    def progress(self, done: int) -> None:
        """Update the progress line after ``done`` rounds."""
        self._bar.update(done)
