"""Runs of an experiment as tasks on a Ray cluster (``fedcomp run --executor ray``).

Each planned run is one Ray task (one CPU). The task builds its setting on whichever machine
Ray picks, writes its rows to a scratch file there and returns them with its summary row;
this process writes the rows to the run's file and records the run as it finishes, exactly
as it does for a local worker — so ``results.csv`` holds the same rows as ``--jobs 1`` and
``--resume`` works the same way (finished runs are kept, unfinished ones run again).

What the machines of the cluster need: the same fedcomp (and its extras) as this process,
and any data file a config names at the same path (bundled and generated data need
nothing). Trackers are refused: TensorBoard and MLflow's SQLite store write files that
would land on the workers' disks, not in the output directory.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._extras import require
from ..runtime._ray_address import ray_address
from ._plan import Run


class ClusterLostError(RuntimeError):
    """The Ray cluster failed under a run (a node or the head died); finished runs are kept."""


def check_ray_executor(tracking: dict[str, Any] | None) -> None:
    """Refuse what cannot run on Ray before anything is written: trackers (their files would
    land on the workers' disks) and a missing Ray (naming the extra)."""
    if tracking:
        raise ValueError("trackers (TensorBoard, MLflow) write files on the machine that runs "
                         "a run, which on Ray is a worker, not this one: remove [tracking] "
                         "(or --track) or run with --executor local")
    require("ray", "fedcomp run --executor ray")


def run_remotely(execute: Callable[..., dict[str, Any]], run: Run, columns: list[str]
                 ) -> tuple[str, dict[str, Any]]:
    """The body of a Ray task: one run (by ``execute``, the local executor's function), its
    CSV rows (as text) and its summary row."""
    with tempfile.TemporaryDirectory(prefix="fedcomp-ray-run-") as scratch:
        rows = Path(scratch) / "rows.csv"
        row = execute(run, rows, columns, False)
        return rows.read_text(), row


def execute_on_ray(runs: list[Run], rows_file: Callable[[int], Path], columns: list[str],
                   on_finished: Callable[[int, dict[str, Any]], None],
                   execute: Callable[..., dict[str, Any]], *, address: str | None = None,
                   tracking: dict[str, Any] | None = None) -> None:
    """Execute ``runs`` as Ray tasks; ``on_finished(index, row)`` as each one ends.

    Parameters
    ----------
    runs, rows_file, columns, on_finished
        As for :func:`~fedcomp.experiments._execute.execute_all`.
    execute : callable
        ``execute(run, rows_file, columns, progress)``, what a local worker runs
        (:func:`~fedcomp.experiments._execute.execute`; passed in, not imported, so that
        the executors do not import each other).
    address : str, optional
        The cluster (``host:port`` of its head, or ``ray://host:10001`` for Ray Client);
        default ``$RAY_ADDRESS``, and without it a Ray instance on this machine.
    tracking : dict, optional
        Must be empty: trackers are refused on Ray (see the module doc).

    Notes
    -----
    A Ray instance this function started is shut down when it returns or raises; one it
    joined is left running. On an error or Ctrl-C, the tasks still queued or running are
    cancelled (forcefully: a run holds no resource worth a graceful end).
    """
    check_ray_executor(tracking)
    ray = require("ray", "fedcomp run --executor ray")
    joined = ray_address(address)
    started_here = not ray.is_initialized()
    if started_here:
        with warnings.catch_warnings():  # Ray's advice on its future defaults, not the user's
            warnings.simplefilter("ignore", FutureWarning)
            ray.init(address=joined, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
    task = ray.remote(num_cpus=1)(run_remotely)
    pending = {task.remote(execute, run, columns): index for index, run in enumerate(runs)}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            index = pending.pop(done[0])
            try:
                text, row = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:  # the run's own error, as locally
                raise (exc.cause if isinstance(exc.cause, BaseException) else exc) from None
            except ray.exceptions.RayError as exc:  # the cluster's: a raylet, a node, the head
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise ClusterLostError(f"the Ray cluster at {joined} failed during the runs "
                                       f"({type(exc).__name__}: {first})") from exc
            rows_file(index).parent.mkdir(parents=True, exist_ok=True)
            rows_file(index).write_text(text)
            on_finished(index, row)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started_here:
            ray.shutdown()
