"""The evaluation rows of a run, shared by the three runners.

:func:`~fedcomp.runtime.simulate`, :func:`~fedcomp.runtime.simulate_async` and
:func:`~fedcomp.runtime.simulate_decentralized` write the same row at the same moments:
the tags, ``round``, the counters, ``wall_s``, the runner's own columns (``sim_time``,
``max_delay``, ...), then the metrics of the model. A :class:`Recorder` holds what that
needs (metrics, reference, logger, tags, ``eval_every``, the progress line), so that a
runner says only when it is at a round and what its own columns are.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._array import Array
from ..metrics import evaluate
from ..oracle import Counters
from ..problem import Problem


class _Progress:
    """A one-line progress display on a terminal (rounds/s and ETA); silent otherwise."""

    def __init__(self, enabled: Any, total: int, label: str) -> None:
        self.enabled = sys.stderr.isatty() if enabled == "auto" else bool(enabled)
        self.total, self.label = total, label
        self.start = self.last = time.perf_counter()

    def update(self, done: int, extra: str = "") -> None:
        if not self.enabled:
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

    def progress(self, done: int) -> None:
        """Update the progress line after ``done`` rounds."""
        self._bar.update(done)
