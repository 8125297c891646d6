"""Experiment trackers: the evaluation rows of ``results.csv`` sent to TensorBoard or MLflow.

Both are loggers (``log(row)``, ``close()``, like :class:`~fedcomp.metrics.CSVLogger`) and
get the same rows, as they are produced: every numeric column becomes a scalar / metric at
step ``round`` (server updates for an asynchronous run); the identifying cells (algorithm,
method, variant, seed, batch size, swept values) name the run and tag it.

* :class:`TensorBoardLogger` (``pip install 'fedcomp[tensorboard]'``) writes one event file
  directory per run, ``LOGDIR/<run>``: ``tensorboard --logdir LOGDIR`` overlays the runs.
* :class:`MLflowLogger` (``pip install 'fedcomp[mlflow]'``) records one MLflow run per run
  in an experiment named after the configuration, with the algorithm's hyperparameters as
  parameters. MLflow 3 keeps runs in a database; fedcomp's default store is the SQLite file
  ``OUT/mlflow.db`` (``mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db``).

From a configuration: a ``[tracking]`` table (``tensorboard = true``, ``mlflow = true``, or
``tensorboard = "DIR"``, ``mlflow = { uri = "...", experiment = "..." }``), or on the
command line ``fedcomp run ... --track tensorboard,mlflow``.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._extras import check_installed, require

#: The step of a row (the x axis of every scalar).
STEP = "round"

#: Tracker name -> the optional modules it needs (keys of fedcomp._extras.EXTRAS).
TRACKERS: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboardX",),
    "mlflow": ("mlflow", "sqlalchemy", "alembic"),
}


def check_trackers(names: Any, where: str = "tracking") -> None:
    """Raise :class:`~fedcomp._extras.MissingExtraError` unless every tracker is installed."""
    for name in names:
        check_installed(TRACKERS[name], f"{where}.{name}")


def scalars(row: Mapping[str, Any], identity: Any = ()) -> dict[str, float]:
    """The numeric cells of ``row`` outside ``identity`` and the step (NaN and inf kept).

    Examples
    --------
    >>> scalars({"algorithm": "fedmid", "seed": 0, "round": 5, "objective": 0.5,
    ...          "nnz": 3, "status": "ok"}, identity=["algorithm", "seed"])
    {'objective': 0.5, 'nnz': 3.0}
    """
    skip = {*identity, STEP}
    return {key: float(value) for key, value in row.items()
            if key not in skip and isinstance(value, int | float)
            and not isinstance(value, bool)}


class TensorBoardLogger:
    """Rows as TensorBoard scalars under ``logdir/run_name`` (one event file per run).

    Parameters
    ----------
    logdir : path
        The directory ``tensorboard --logdir`` reads.
    run_name : str
        The run's subdirectory (e.g. ``fedmid_seed0``). A directory left there by an
        earlier, unfinished attempt of the same run is replaced.
    identity : sequence of str
        Columns that identify the run rather than measure it (not logged as scalars).
    """

    def __init__(self, logdir: str | Path, run_name: str, identity: Any = ()) -> None:
        tensorboardx = require("tensorboardX", "the tensorboard tracker")
        self.path = Path(logdir) / run_name
        shutil.rmtree(self.path, ignore_errors=True)
        self.identity = tuple(identity)
        self._writer = tensorboardx.SummaryWriter(logdir=str(self.path), flush_secs=5)

    def log(self, row: dict[str, Any]) -> None:
        step = int(row.get(STEP, 0))
        for key, value in scalars(row, self.identity).items():
            self._writer.add_scalar(key, value, global_step=step)
        self._writer.flush()  # a crash loses nothing already evaluated

    def close(self) -> None:
        self._writer.close()


def default_mlflow_uri(out: str | Path) -> str:
    """``sqlite:///OUT/mlflow.db``: MLflow 3 refuses its old file store by default."""
    return f"sqlite:///{Path(out).resolve() / 'mlflow.db'}"


def mlflow_experiment(uri: str, name: str) -> str:
    """The id of the MLflow experiment ``name`` at ``uri`` (created if missing).

    Called once before any run, in the parent process: worker processes then only add runs
    (two of them creating the database or the experiment at once could collide).
    """
    mlflow = require("mlflow", "the mlflow tracker")
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(name)
        return str(found.experiment_id if found is not None else client.create_experiment(name))
    except Exception as exc:  # MLflow raises its own types (MlflowException, SQLAlchemy's)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OSError(f"the MLflow store {uri} cannot be used ({first}); give [tracking] "
                      "mlflow a uri where this user can write (sqlite:///path/mlflow.db), or "
                      "leave it out for OUT/mlflow.db") from exc


class MLflowLogger:
    """Rows as the metrics of one MLflow run (``step = round``).

    Parameters
    ----------
    uri : str
        The tracking store (``sqlite:///path/mlflow.db``, ``http://host:5000``...).
    experiment_id : str
        From :func:`mlflow_experiment`.
    run_name : str
    tags : mapping
        The run's identifying cells (algorithm, seed...), stored as MLflow tags.
    params : mapping
        The algorithm's hyperparameters, stored as MLflow parameters.
    """

    def __init__(self, uri: str, experiment_id: str, run_name: str,
                 tags: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None) -> None:
        mlflow = require("mlflow", "the mlflow tracker")
        self._metric = require("mlflow.entities", "the mlflow tracker").Metric
        self._param = require("mlflow.entities", "the mlflow tracker").Param
        self._client = mlflow.MlflowClient(tracking_uri=uri)
        tags = {k: str(v) for k, v in (tags or {}).items()}
        self.identity = tuple(tags)
        self.run_id = self._client.create_run(experiment_id, run_name=run_name,
                                              tags=tags).info.run_id
        if params:
            self._client.log_batch(self.run_id, params=[
                self._param(str(k), str(v)[:6000]) for k, v in params.items()])

    def log(self, row: dict[str, Any]) -> None:
        step, now = int(row.get(STEP, 0)), int(time.time() * 1000)
        metrics = [self._metric(key, value if math.isfinite(value) else float("nan"), now,
                                step)
                   for key, value in scalars(row, self.identity).items()]
        if metrics:
            self._client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        self._client.set_terminated(self.run_id)
