"""``run_experiment``: the experiment pipeline, stage after stage.

config (:mod:`fedcomp.config`: a dict) → :func:`~fedcomp.experiments.resolve` (an
:class:`~fedcomp.experiments.Experiment`, checked once) → :func:`plan` (every
:class:`~fedcomp.experiments._plan.Run`) → :func:`execute_all` (the engines, in this
process or in workers) → the results stage (:mod:`fedcomp.experiments._results`: the
output directory, summaries, the claim's verdict). Data flow one way; this module is the
only one that knows every stage.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .._log import get_logger
from ..config import ConfigError, to_jsonable
from ._build import backend_of
from ._catalog import timing_module
from ._execute import execute_all, forget_prepared
from ._plan import Run, cell, key_columns, plan, result_columns, run_key
from ._results import (
    LOCK_FILE,
    finished_runs,
    keep_finished_rows,
    output_lock,
    record_run,
    start_directory,
    versions,
    without_rows,
    write_outputs,
    write_summary,
)
from ._resume import check_resume
from ._setting import Experiment, resolve

#: The experiments' messages (what ran where, the runs as they finish): a child of
#: ``"fedcomp"``'s logger (:mod:`fedcomp._log`).
log = get_logger("experiments")


def run_experiment(config: dict[str, Any] | Experiment, out_dir: str | Path, *,
                   seeds: list[int] | None = None, progress: Any = "auto",
                   stream: TextIO | None = None, clients: Callable[..., Any] | None = None,
                   sweep: list[tuple[str, list[str]]] | None = None, jobs: int = 1,
                   resume: bool = False, executor: str = "local",
                   ray_address: str | None = None) -> list[dict[str, Any]]:
    """Run every (setting, variant, seed, gradient mode, algorithm) of ``config``; write outputs.

    Parameters
    ----------
    config : dict or Experiment
        A configuration (:mod:`fedcomp.config`), resolved here, or an :class:`Experiment`
        resolved already (then ``seeds`` and ``sweep`` must be left out: they are in it).
        A timing configuration (``kind = "timing"``) runs its module's measurement.
    out_dir : path
        Output directory (created); its contract is :mod:`fedcomp.experiments._results`.
    seeds : list of int, optional
        Overrides the configuration's seeds.
    progress : "auto" or bool
        Progress: one message per finished run (runs done / total, elapsed, ETA; the
        ``"fedcomp"`` logger's, printed on stderr), and with ``jobs=1`` the per-run rounds/s
        line on a terminal (not a widget per run in a notebook). False: nothing.
    stream : text stream, optional
        Where the summary table is printed (stdout by default; ``None`` prints there).
    clients : callable, optional
        ``clients(label=, seed=, batch_size=, rounds=)`` returns the client executor of
        that run for :func:`~fedcomp.runtime.simulate` (default: the simulator's);
        :mod:`fedcomp.flower` runs the same experiment on SuperNodes through it (jobs=1 only).
    sweep : list of (key, values), optional
        A grid (see :func:`~fedcomp.config.expand_sweep`): every point is a setting,
        and the swept keys become columns of ``results.csv`` and of the summary.
    jobs : int, default 1
        Worker processes (``spawn`` context; each gets ``cores // jobs`` BLAS/torch threads).
        1 runs in this process. The numbers do not depend on it: every run draws from its seed.
    executor : {"local", "ray"}, default "local"
        ``"ray"`` runs every run as a task on a Ray cluster (``jobs`` is then ignored: the
        cluster runs one run per free CPU); the rows and summaries equal ``jobs=1``'s.
        Needs ``pip install 'fedcomp[flower]'`` (Ray comes with Flower's simulation).
    ray_address : str, optional
        The Ray cluster's address; default ``$RAY_ADDRESS``, else a Ray instance started on
        this machine for the experiment.
    resume : bool, default False
        Continue in an ``out_dir`` written before with the same configuration and sweep
        (the seeds may differ): runs recorded in ``runs.jsonl`` are kept, the rows of
        unfinished ones dropped, the rest run. A different configuration, or a setting whose
        problem (its data read again) or backend differs from the one its kept runs used, is
        an error (:class:`~fedcomp.experiments.ConfigMismatchError`) that changes nothing in
        ``out``.

    Returns
    -------
    list of dict
        One summary row per run (label, seed, swept values, final metrics, status), in the
        order setting, variant, seed, gradient mode, algorithm.

    Notes
    -----
    In this process (``jobs=1``) rows are appended to ``results.csv`` as they are produced;
    a worker's go to ``parts/<n>.csv`` and move to ``results.csv`` when its run ends. A
    finished run appends a line with its summary row to ``runs.jsonl`` (that line marks it
    finished). Ctrl-C leaves ``results.csv`` with whole runs only; after a hard crash the
    partial rows of unfinished runs stay until ``--resume`` drops them and reruns those runs.
    """
    stream = stream or sys.stdout
    if isinstance(config, dict) and config.get("kind") == "timing":
        if sweep or resume or jobs != 1 or clients is not None or executor != "local":
            raise ConfigError(f"{config.get('name')} is a timing experiment: it runs in this "
                              "process, without --sweep, --resume, --jobs, Ray or Flower")
        with output_lock(Path(out_dir)):
            return run_timing(config, Path(out_dir), stream)
    if isinstance(config, Experiment):
        if seeds is not None or sweep:
            raise ValueError("run_experiment: an Experiment has its seeds and sweep; pass "
                             "them to resolve() instead")
        experiment = config
    else:
        experiment = resolve(config, seeds=seeds, sweep=sweep)
    if clients is not None and (jobs != 1 or executor != "local"):
        raise ValueError("a client executor (Flower) runs in this process: use jobs=1 and "
                         "executor='local'")
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray' (got {executor!r})")
    out = Path(out_dir)
    check_buildable(experiment)  # a bad value fails before anything is written
    if executor == "ray":
        from ..runtime._ray_address import check_ray_address
        from ._ray_executor import check_ray_executor

        check_ray_executor(experiment.config.get("tracking"))
        check_ray_address(ray_address)
    before = set(out.iterdir()) if out.is_dir() else None
    with output_lock(out):
        meta: dict[str, Any] = {"config": to_jsonable(experiment.config),
                                "seeds": list(experiment.seeds),
                                "sweep": experiment.sweep_values, "versions": versions(),
                                "settings": {}}
        if resume:  # before anything in out changes
            meta["settings"] = check_resume(out, experiment, meta)
        finished = start_directory(out, meta, resume)
        try:
            return _run(experiment, out, meta, finished, progress=progress, stream=stream,
                        clients=clients, jobs=jobs, executor=executor,
                        ray_address=ray_address)
        except BaseException:  # Ctrl-C too: before any row there is nothing to resume
            if not resume and not (out / "runs.jsonl").exists() and not _has_rows(out):
                _remove_new(out, before)  # failed before any row: leave no empty output
            raise


def chosen_backends(experiment: Experiment) -> dict[str, str]:
    """``{backend: why}`` over the experiment's settings (``auto`` resolved), for
    ``config.json`` and the run's first log line."""
    chosen: dict[str, str] = {}
    for setting in experiment.settings:
        backend = backend_of(setting)
        chosen.setdefault(backend.name, backend.reason)
    return chosen


def _has_rows(out: Path) -> bool:
    """Whether ``results.csv`` or a worker's ``parts/*.csv`` holds a row beyond its header
    (a run that failed midway keeps the rows it evaluated)."""
    for path in [out / "results.csv", *sorted((out / "parts").glob("*.csv"))]:
        if path.exists():
            with path.open() as f:
                if sum(1 for _ in zip(f, range(2), strict=False)) > 1:
                    return True
    return False


def _remove_new(out: Path, before: set[Path] | None) -> None:
    """Remove what this run created in ``out`` (all of it when it created ``out``)."""
    if before is None:
        shutil.rmtree(out, ignore_errors=True)
        return
    for path in set(out.iterdir()) - before:
        if path.name == LOCK_FILE:
            continue  # output_lock removes it, still holding it
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def tracking_plan(experiment: Experiment, out: Path) -> dict[str, Any]:
    """Where the runs' trackers write, resolved once here for every worker.

    TensorBoard: ``OUT/tensorboard`` unless the config names a directory; MLflow: the
    config's store or ``sqlite:///OUT/mlflow.db``, and its experiment (the config's name
    unless named), created here so that workers only add runs to it.
    """
    from ..metrics._tracking import default_mlflow_uri, mlflow_experiment

    tracking, plan = experiment.config.get("tracking") or {}, {}
    if "tensorboard" in tracking:
        logdir = Path(tracking["tensorboard"].get("logdir") or out / "tensorboard")
        plan["tensorboard"] = {"logdir": str(logdir.resolve())}
    if "mlflow" in tracking:
        uri = tracking["mlflow"].get("uri") or default_mlflow_uri(out)
        name = tracking["mlflow"].get("experiment") or experiment.name
        plan["mlflow"] = {"uri": uri, "experiment_id": mlflow_experiment(uri, name)}
    return plan


def check_buildable(experiment: Experiment) -> None:
    """Build what is cheap to build of every setting before the output directory is
    touched: every algorithm (its factory checks its numbers), the loss and the regularizer.

    The data, the reference solution and the graph are built by the runs themselves (a
    data set can take minutes to load); a failure there, before any row was written,
    removes what the run wrote (:func:`run_experiment`).
    """
    from ..metrics._tracking import check_trackers
    from ._build import build_components

    tracking = experiment.config.get("tracking") or {}
    check_trackers(tracking)  # a missing extra: before any run
    store = (tracking.get("mlflow") or {}).get("uri")
    if store:  # a named MLflow store that cannot be written fails here, naming it
        from ..metrics._tracking import mlflow_experiment

        check_mlflow_server(store)
        mlflow_experiment(store, tracking["mlflow"].get("experiment") or experiment.name)
    seen, shapes = set(), set()
    for setting in experiment.settings:
        key = repr((setting.problem, setting.regularizer, setting.data.get("n_classes")))
        if key not in seen:
            seen.add(key)
            build_components(setting)
        for spec in setting.algorithms:
            spec.build()
        compressed = [spec for spec in setting.algorithms if spec.compressor is not None]
        data_key = repr((key, setting.data))
        if compressed and data_key not in shapes:  # a compressor's k against the model's size
            shapes.add(data_key)
            _check_prepared(setting, compressed, experiment.seeds[0])


#: Seconds an MLflow tracking server (an ``http(s)://`` store) may take to answer.
MLFLOW_TIMEOUT = 10.0


def check_mlflow_server(uri: str, timeout: float = MLFLOW_TIMEOUT) -> None:
    """Refuse, naming it, an ``http(s)://`` MLflow store that does not answer in ``timeout``
    seconds: MLflow's client retries a dead server in silence for minutes (253 s measured).

    Any HTTP answer to ``GET URI/health`` will do (an old server without that page, or a
    proxy that wants a login, still answers); other stores (``sqlite:///``, files) are left
    to :func:`~fedcomp.metrics._tracking.mlflow_experiment`. A signal ends the wait.
    """
    import urllib.error
    import urllib.request

    if not uri.lower().startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as exc:  # URLError is an OSError; a malformed URL, ValueError
        reason = getattr(exc, "reason", None) or exc
        raise OSError(f"the MLflow server {uri} does not answer ({reason}, within {timeout:g} "
                      "s); start it (mlflow server --port PORT) or give [tracking] mlflow a "
                      "local store (uri = \"sqlite:///path/mlflow.db\"), or leave the uri out "
                      "for OUT/mlflow.db") from None


def _check_prepared(setting: Any, specs: list[Any], seed: int) -> None:
    """Prepare ``specs`` on the setting's problem (data of the first seed): what only the
    model's shape decides (a compressor's ``k``) fails before the output directory exists."""
    from ..algorithms._base import setup_context
    from ._build import build_problem

    problem = build_problem(setting, seed)
    for spec in specs:
        spec.build().prepare(setup_context(problem, spec.clients_per_round))


def _run(experiment: Experiment, out: Path, meta: dict[str, Any],
         finished: dict[str, dict[str, Any]], *, progress: Any, stream: TextIO,
         clients: Callable[..., Any] | None, jobs: int, executor: str = "local",
         ray_address: str | None = None) -> list[dict[str, Any]]:
    """:func:`run_experiment` in a started output directory (holding its lock)."""
    runs = plan(experiment)
    columns, keys = result_columns(experiment), key_columns(experiment)
    finished = without_rows(finished, keep_finished_rows(out / "results.csv", finished, keys))
    todo = [run for run in runs if run_key(run.tags, keys) not in finished]
    meta["backend"] = chosen_backends(experiment)
    (out / "config.json").write_text(_json(meta))
    if progress is not False:  # the first log line: what ran where (auto says why)
        log.info("backend: %s", "; ".join(f"{name} ({why})" for name, why in
                                          meta["backend"].items()))
    overall = Progress(progress, len(runs), len(runs) - len(todo))
    in_process = executor == "local" and (jobs == 1 or len(todo) <= 1)

    def rows_file(index: int) -> Path:  # in this process straight into results.csv
        return out / "results.csv" if in_process else out / "parts" / f"{index}.csv"

    def on_finished(index: int, row: dict[str, Any]) -> None:
        run = todo[index]
        key = run_key(run.tags, keys)
        record_run(out, index, run, key, row, columns, meta)
        finished[key] = {k: v for k, v in row.items() if not k.startswith("_")}
        overall.finished(run, row)

    try:
        execute_all(todo, rows_file, columns, on_finished, jobs=jobs,
                    progress=round_progress(progress),
                    clients=clients, tracking=tracking_plan(experiment, out) if todo else None,
                    executor=executor, address=ray_address)
    except KeyboardInterrupt:  # leave whole runs only (a crash's are dropped by --resume)
        keep_finished_rows(out / "results.csv", finished_runs(out), keys)
        shutil.rmtree(out / "parts", ignore_errors=True)
        raise
    finally:
        forget_prepared()
    summary = [finished[run_key(run.tags, keys)] for run in runs]
    write_outputs(experiment, out, summary, stream)
    return summary


def round_progress(progress: Any) -> Any:
    """The progress of each run's rounds: ``progress``, but none for ``"auto"`` in a
    notebook, where a widget per run would stack up in the cell: the messages of the runs
    as they finish are the progress there (as with several workers)."""
    from ..runtime._recording import in_notebook

    return False if progress == "auto" and in_notebook() else progress


def run_timing(config: dict[str, Any], out: Path, stream: TextIO) -> list[dict[str, Any]]:
    """A timing experiment (``kind = "timing"``): its module measures, the rows are kept."""
    module = timing_module(config)
    module.check_config(config)
    out.mkdir(parents=True, exist_ok=True)
    rows = module.run(config, out, stream)
    summary = [{**row, "status": "ok"} for row in rows]
    write_summary(out, summary)
    return summary


def _json(meta: dict[str, Any]) -> str:
    import json

    return json.dumps(meta, indent=2, default=str) + "\n"


class Progress:
    """The progress over runs: one message per finished run (done/total, elapsed, ETA).

    Messages, not a bar: each names the run that finished, which a log keeps (the CLI's
    lines, a library user's handler); the rounds of one run are :mod:`fedcomp.runtime`'s
    progress bar.
    """

    def __init__(self, enabled: Any, total: int, done: int) -> None:
        self.enabled = bool(enabled)
        self.total, self.done, self.skipped = total, done, done
        self.start = time.perf_counter()
        if self.enabled and done:
            log.info("resuming: %d of %d runs already finished", done, total)

    def finished(self, run: Run, row: dict[str, Any]) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        rate = (self.done - self.skipped) / max(elapsed, 1e-9)
        eta = (self.total - self.done) / rate
        tags = run.tags
        what = " ".join([tags["algorithm"], *([tags["variant"]] if "variant" in tags else []),
                         f"seed {tags['seed']}", *(f"{k}={cell(v)}" for k, v in tags.items()
                         if k not in ("algorithm", "method", "batch_size", "seed", "variant"))])
        status = "" if row["status"] == "ok" else " DIVERGED"
        log.info("[%d/%d] %s%s  elapsed %s  ETA %s", self.done, self.total, what, status,
                 _duration(elapsed), _duration(eta))


def _duration(seconds: float) -> str:
    """``75.0`` → ``"1m15s"``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"
