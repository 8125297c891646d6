"""The fifth stage of the experiment pipeline: planned runs executed on the engines.

Each :class:`~fedcomp.experiments._plan.Run` goes to the engine its algorithm's registry
entry names — :func:`~fedcomp.runtime.simulate` (rounds), ``simulate_async`` (an event
clock) or ``simulate_decentralized`` (gossip over the setting's graph) — in this process
or in ``spawn`` worker processes. A run's rows go to its own CSV file as they are produced;
when it ends, the caller's ``on_finished`` callback gets its summary row (the results
stage records it). Nothing here knows the output directory's layout beyond the file each
run writes to.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from .._array import to_numpy
from .._log import get_logger
from ..data._stand_in import data_origin
from ..metrics import CSVLogger, MultiLogger, personal_metrics
from ..runtime import NonFiniteError, simulate, simulate_async, simulate_decentralized
from ..runtime._options import split_options
from ._build import Prepared, _data_table, build_topology, prepare, start_model
from ._plan import Run
from ._setting import TARGET_COLUMNS

#: Problems and references built in this process, by setting (a worker reuses them).
_PREPARED: dict[str, Prepared] = {}


def prepared(run: Run) -> Prepared:
    """The run's setting built for its data seed (cached: the plan orders runs by setting,
    then seed)."""
    key = run.setting.problem_key(run.setting.data_seed(run.seed))
    if key not in _PREPARED:
        _PREPARED.clear()  # one setting (and data seed) at a time
        _PREPARED[key] = prepare(run.setting, run.seed)
    return _PREPARED[key]


def forget_prepared() -> None:
    """Drop the cached problems (at the end of an experiment)."""
    _PREPARED.clear()


def run_one(run: Run, built: Prepared, logger: Any, progress: Any, clients: Any = None
            ) -> dict[str, Any]:
    """One run on its engine; its summary row (final metrics, status, the model under ``_x``).

    A run whose iterates become non-finite is not an error of the experiment: its row gets
    ``status = "diverged: ..."`` and the others go on.
    """
    setting, spec, tags = run.setting, run.algorithm, run.tags
    problem, reference = built.problem, built.reference
    algorithm = spec.build(setting.rounds, problem.n_clients)  # every transform, one stage
    if spec.privacy is not None:
        logger = _epsilon_column(algorithm, spec, problem.n_clients, logger)
    row: dict[str, Any] = {**tags, "status": "ok"}
    common = {"batch_size": run.batch_size, "metrics": list(setting.metrics),
              "reference": reference, "logger": logger, "seed": run.seed,
              "progress": progress, "tags": tags,
              # a diverged run is a row of its own (status "diverged: ..."), below
              "on_divergence": "raise",
              **({} if setting.stop is None else {
                  "tol": setting.stop["tol"],
                  "stop": setting.stop.get("measure", "relative_prox_step")}),
              "x0": start_model(setting, problem, run.seed)}
    result: Any
    try:
        if spec.execution == "decentralized":  # gossip over the setting's graph
            if clients is not None:
                raise ValueError(f"{spec.name} is decentralized (gossip between nodes): it "
                                 "runs in the simulator only, not through a Flower executor")
            topology, options = build_topology(setting, problem.n_clients)
            result = simulate_decentralized(algorithm, problem, topology, setting.rounds,
                                            node_block=setting.client_block,
                                            eval_every=setting.eval_every, **common, **options)
        elif spec.execution == "async":
            # as many client updates as the synchronous runs: rounds × clients per round;
            # the event clock stays here, each arrival's update runs on ``clients``
            per_round = spec.clients_per_round or problem.n_clients
            result = simulate_async(algorithm, problem, setting.rounds * per_round,
                                    compute_times=setting.compute_times,
                                    eval_every=setting.eval_every * per_round, clients=clients,
                                    **common)
        else:
            own, run_options = split_options({
                **common, "client_block": setting.client_block, "clients": clients,
                "compute_times": setting.compute_times, "client_state": setting.client_state})
            result = simulate(algorithm, problem, setting.rounds,
                              clients_per_round=spec.clients_per_round,
                              eval_every=setting.eval_every, options=run_options, **own)
    except NonFiniteError as exc:
        row["status"] = f"diverged: {exc}"
        get_logger("experiments").warning("%s", exc)
        return row
    row.update(result.history[-1])
    if setting.target is not None:
        row.update(to_target(result.history, setting.target))
    if spec.personalization is not None:
        row.update(personal_summary(problem, result, client_truths(setting, run.seed)))
    row["_x"] = to_numpy(result.x)
    return row


#: The per-client metrics summarised in a personalised run's row (medians over clients).
PERSONAL_COLUMNS = ("personal_objective", "global_objective", "personal_accuracy",
                    "global_accuracy", "personal_nnz", "support_overlap")
#: ... and where every client has a true model of its own (:data:`fedcomp.data.CLIENT_TRUTHS`).
TRUTH_COLUMNS = ("personal_support_f1", "global_support_f1")


def client_truths(setting: Any, seed: int) -> Any:
    """Every client's true model, where the setting's generator has them (else None)."""
    from ..data import CLIENT_TRUTHS

    table = _data_table(setting, seed)
    name = table.pop("generator")
    return CLIENT_TRUTHS[name](**table) if name in CLIENT_TRUTHS else None


def personal_summary(problem: Any, result: Any, truths: Any = None) -> dict[str, Any]:
    """A personalised run's personal models, client by client and summarised.

    The row gets each of :data:`PERSONAL_COLUMNS`' median over clients (``_median``) and
    ``personal_wins``, the share of clients whose own model fits their own data better
    than the global one; ``_personal`` keeps the per-client rows for ``personal.csv``
    (:func:`fedcomp.metrics.personal_metrics`).
    """
    rows = personal_metrics(problem, result.client_states.personal, result.x, truths)
    columns = PERSONAL_COLUMNS + (TRUTH_COLUMNS if truths is not None else ())
    out: dict[str, Any] = {f"{c}_median": float(np.nanmedian([r[c] for r in rows]))
                           if not all(math.isnan(r[c]) for r in rows) else math.nan
                           for c in columns}
    out["personal_wins"] = float(np.mean([r["personal_objective"] < r["global_objective"]
                                          for r in rows]))
    out["_personal"] = rows
    return out


def to_target(history: list[dict[str, Any]], target: dict[str, Any]) -> dict[str, float]:
    """The counters at the first evaluation whose ``target["metric"]`` reached the target
    (``<= below`` or ``>= above``); ``inf`` for each when no evaluation did.

    Examples
    --------
    >>> rows = [{"round": 0, "floats_up": 0, "bits_up": 0, "acc": 0.5},
    ...         {"round": 5, "floats_up": 50, "bits_up": 800, "acc": 0.9}]
    >>> to_target(rows, {"metric": "acc", "above": 0.8})["bits_up_to_target"]
    800.0
    >>> to_target(rows, {"metric": "acc", "above": 0.95})["rounds_to_target"]
    inf
    """
    metric = target["metric"]
    for row in history:
        value = float(row.get(metric, math.nan))
        reached = value <= target["below"] if "below" in target else value >= target["above"]
        if reached:
            counters = (row["round"], row["floats_up"], row["bits_up"])
            return {k: float(v) for k, v in zip(TARGET_COLUMNS, counters, strict=True)}
    return dict.fromkeys(TARGET_COLUMNS, math.inf)


class _EpsilonColumn:
    """A logger that writes ``ε(δ)`` after the row's round into the row, then passes it on.

    The row is the engine's own (its history keeps it): the summary row, the last of the
    history, carries the final ``ε`` too.
    """

    def __init__(self, logger: Any, epsilon_of: Callable[[int], float]) -> None:
        self.logger, self.epsilon_of = logger, epsilon_of

    def log(self, row: dict[str, Any]) -> None:
        row["epsilon"] = self.epsilon_of(int(row["round"]))
        if self.logger is not None:
            self.logger.log(row)


def _epsilon_column(algorithm: Any, spec: Any, n_clients: int, logger: Any) -> Any:
    """``logger`` adding the ``epsilon`` column: the ``ε(δ)`` the rounds of the private
    ``algorithm`` spend (:mod:`fedcomp.privacy`), at the ``σ`` its recipe records."""
    from ..algorithms import recipe_of

    plan = spec.privacy_plan()
    (sigma,) = [step.params["noise_multiplier"] for step in recipe_of(algorithm).transforms
                if step.transform == "dp"]
    return _EpsilonColumn(logger, lambda r: plan.epsilon(sigma, r, n_clients,
                                                         spec.clients_per_round))


def trackers(run: Run, tracking: dict[str, Any] | None) -> list[Any]:
    """The run's TensorBoard / MLflow loggers (:mod:`fedcomp.metrics._tracking`).

    ``tracking`` is :func:`~fedcomp.experiments._runner.tracking_plan`'s: absolute paths
    and the MLflow experiment id, fixed in the parent process.
    """
    from ..metrics._tracking import MLflowLogger, TensorBoardLogger

    name, out = f"{run.model}_seed{run.seed}", list[Any]()
    tracking = tracking or {}
    if "tensorboard" in tracking:
        out.append(TensorBoardLogger(tracking["tensorboard"]["logdir"], name, run.tags))
    if "mlflow" in tracking:
        mlflow = tracking["mlflow"]
        out.append(MLflowLogger(mlflow["uri"], mlflow["experiment_id"], name, run.tags,
                                run.algorithm.params))
    return out


def execute(run: Run, rows_file: Path, columns: list[str], progress: Any,
            clients: Callable[..., Any] | None = None,
            tracking: dict[str, Any] | None = None) -> dict[str, Any]:
    """One run (in this process or a worker): its rows to ``rows_file``; its summary row.

    ``clients(label=, seed=, batch_size=, rounds=)`` gives the run's client executor
    (Flower), or None for the simulator's own. ``tracking`` sends the same rows to
    TensorBoard / MLflow as well (:func:`trackers`).
    """
    built = prepared(run)
    executor = None if clients is None else clients(
        label=run.tags["algorithm"], seed=run.seed, batch_size=run.batch_size,
        rounds=run.server_steps(built.problem.n_clients))
    logger = MultiLogger(CSVLogger(rows_file, columns=columns), *trackers(run, tracking))
    try:
        row = run_one(run, built, logger, progress, executor)
    finally:
        logger.close()
    row["label"] = run.algorithm.label
    row.update(data_origin(run.setting.data))  # real or stand-in images, for the verdict
    row["_setting_meta"] = built.meta
    return row


def execute_all(runs: list[Run], rows_file: Callable[[int], Path], columns: list[str],
                on_finished: Callable[[int, dict[str, Any]], None], *, jobs: int = 1,
                progress: Any = "auto", clients: Callable[..., Any] | None = None,
                tracking: dict[str, Any] | None = None, executor: str = "local",
                address: str | None = None) -> None:
    """Execute ``runs``; ``on_finished(index, row)`` as each one ends (in finishing order).

    With ``jobs > 1`` the runs go to that many ``spawn`` worker processes, each with
    ``cores // jobs`` BLAS/OpenMP/torch threads; the numbers do not depend on it (every
    run draws from its own seed). ``rows_file(index)`` is where run ``index`` writes its rows.
    ``executor="ray"`` sends every run to a Ray cluster instead (``address``, else
    ``$RAY_ADDRESS``, else a Ray instance on this machine; ``jobs`` is then Ray's to decide:
    one run per free CPU of the cluster), see :mod:`fedcomp.experiments._ray_executor`.
    """
    if executor == "ray":
        if clients is not None:
            raise ValueError("a client executor (Flower) runs in this process: use "
                             "executor='local'")
        from ._ray_executor import execute_on_ray

        execute_on_ray(runs, rows_file, columns, on_finished, execute, address=address,
                       tracking=tracking)
        return
    if executor != "local":
        raise ValueError(f"executor must be 'local' or 'ray' (got {executor!r})")
    if jobs == 1 or len(runs) <= 1:
        for index, run in enumerate(runs):
            on_finished(index, execute(run, rows_file(index), columns, progress, clients,
                                       tracking))
        return
    if clients is not None:
        raise ValueError("a client executor (Flower) runs in this process: use jobs=1")
    workers = min(jobs, len(runs))
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                               initializer=_init_worker, initargs=(threads,))
    try:
        # per-run progress lines of several workers would overwrite each other: the
        # caller's overall line (one per finished run) reports instead
        futures = {pool.submit(execute, run, rows_file(index), columns, False, None,
                               tracking): index
                   for index, run in enumerate(runs)}
        for future in as_completed(futures):
            on_finished(futures[future], future.result())
    except BaseException:  # Ctrl-C, SIGTERM/SIGHUP (fedcomp._lifetime), a failed run
        stop_workers(pool)
        raise
    pool.shutdown()


def stop_workers(pool: ProcessPoolExecutor, grace: float = 5.0) -> None:
    """Cancel what has not started and end the running workers now.

    ``shutdown(cancel_futures=True)`` alone lets each worker finish the run it holds —
    minutes of a large run after the user asked to stop. Python 3.14 has
    ``terminate_workers``; before it, the pool's process table is the way to them.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(grace)
        if process.is_alive():  # pragma: no cover - a worker ignoring SIGTERM
            process.kill()
            process.join(grace)


def _init_worker(threads: int) -> None:
    """Limit a worker's BLAS / OpenMP / torch threads (workers × threads ≤ cores); let its
    malloc keep freed buffers for reuse, as the command line does (:func:`reuse_freed_memory`);
    end it when its parent dies (:func:`~fedcomp._lifetime.watch_parent`)."""
    from .._lifetime import watch_parent
    from ..runtime import reuse_freed_memory

    # a SIGKILLed parent cannot stop its workers: each one exits when it sees it gone
    watch_parent()
    reuse_freed_memory()
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    try:
        from threadpoolctl import threadpool_limits

        global _LIMITS
        _LIMITS = threadpool_limits(threads)
    except ImportError:
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


_LIMITS: Any = None
