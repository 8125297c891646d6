"""A run's rows as a :class:`pandas.DataFrame`, and an experiment's ``results.csv`` read back.

:meth:`fedcomp.RunResult.to_frame` and :func:`fedcomp.load_results` give the same columns
with the same types: ``results.csv`` is written row by row by
:class:`~fedcomp.metrics.CSVLogger` (floats as their ``repr``, so every value survives the
file exactly), and a run's rows read back from it equal its frame.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._extras import require

#: The columns :func:`compare` adds to every row after ``algorithm`` and ``seed``: the
#: settings of the runs (``batch_size`` as ``results.csv`` writes it: ``"full"``, ``"b20"``;
#: ``clients_per_round``: every client when not given), so a frame says what it measured and
#: :func:`fedcomp.plotting.results_figure` titles its panels by gradient mode.
SETTING_COLUMNS = ("rounds", "clients_per_round", "batch_size", "eval_every", "tol")


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
    try:
        return pandas.read_csv(path, **exact)
    except (UnicodeDecodeError, pandas.errors.ParserError, pandas.errors.EmptyDataError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: not a results.csv fedcomp can read ({reason}); the file is "
                         "damaged or not fedcomp's: run the experiment again") from None


def compare(problem: Any, algorithms: Any, rounds: int, seeds: Any = (0, 1, 2),
            **simulate_args: Any) -> Any:
    """Run every algorithm on every seed; all their rows in one DataFrame.

    Parameters
    ----------
    problem : Problem, or a function ``seed -> Problem``
        A function when the data are random: each seed then draws its own data set, and
        the comparison covers the data's spread as well as the sampling's.
    algorithms : dict of name -> FederatedAlgorithm, or a list of them (named by
        ``algorithm.name``)
    rounds : int
    seeds : iterable of int, default (0, 1, 2)
    **simulate_args
        Passed to :func:`fedcomp.simulate` (``metrics``, ``reference``, ``eval_every``,
        ``tol``, ``options``, ...); ``reference`` may also be a function
        ``problem -> Reference``. The runs' ``options`` get the ``algorithm`` and ``seed``
        tags; without ``options``, no progress line.

    Returns
    -------
    pandas.DataFrame
        One row per evaluation, with ``algorithm``, ``seed``, the settings
        (:data:`SETTING_COLUMNS`) and ``status`` columns; :func:`final_medians` reduces it
        to one row per algorithm, and
        :func:`fedcomp.plotting.results_figure` draws it (median over seeds, min–max band).

    Examples
    --------
    >>> import numpy as np, fedcomp
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> rng = np.random.default_rng(0)
    >>> pairs = [(rng.normal(size=(20, 3)), rng.normal(size=20)) for _ in range(4)]
    >>> problem = fedcomp.Problem(LeastSquares(), L1(0.01), pairs)
    >>> frame = compare(problem, [fedcomp.za1(client_lr=0.2), fedcomp.fedavg(client_lr=0.2)],
    ...                 rounds=20, seeds=[0, 1], metrics=["objective"], eval_every=10)
    >>> sorted(set(frame["algorithm"])), len(frame)
    (['fedavg', 'za1'], 12)
    >>> list(frame.loc[0, ["rounds", "clients_per_round", "batch_size"]].astype(str))
    ['20', '4', 'full']
    >>> list(final_medians(frame, ["objective"]).index)
    ['za1', 'fedavg']
    """
    pandas = require("pandas", "fedcomp.compare")
    from .problem import Problem
    from .runtime import RunOptions, simulate
    from .runtime._options import options_of

    named = (dict(algorithms) if isinstance(algorithms, dict)
             else {algorithm.name: algorithm for algorithm in algorithms})
    if not named:
        raise ValueError("compare: give at least one algorithm")
    settings = {name: simulate_args.get(name) for name in SETTING_COLUMNS[1:]}
    settings.update(rounds=int(rounds), eval_every=simulate_args.get("eval_every", 1))
    reference = simulate_args.pop("reference", None)
    given = simulate_args.pop("options", None)
    options = RunOptions(progress=False) if given is None else options_of(given)
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        this = problem if isinstance(problem, Problem) else problem(seed)
        ref = reference(this) if callable(reference) else reference
        for name, algorithm in named.items():
            tags = {"algorithm": name, "seed": int(seed), **setting_columns(settings, this)}
            run = simulate(algorithm, this, rounds, seed=int(seed), reference=ref,
                           options=replace(options, tags=tags), **simulate_args)
            rows += [{**row, "status": run.status} for row in run.history]
    return pandas.DataFrame.from_records(rows)


def setting_columns(settings: dict[str, Any], problem: Any) -> dict[str, Any]:
    """A run's :data:`SETTING_COLUMNS` from ``compare``'s arguments, as ``results.csv``
    writes them (``batch_size``: ``"full"`` or ``"b20"``; ``clients_per_round``: the count)."""
    count, batch = settings["clients_per_round"], settings["batch_size"]
    return {"rounds": settings["rounds"],
            "clients_per_round": problem.n_clients if count is None else int(count),
            # fedcomp.config.mode_name's cell (the config sits above the core, not under it)
            "batch_size": "full" if batch is None else f"b{int(batch)}",
            "eval_every": settings["eval_every"], "tol": settings["tol"]}


def final_medians(frame: Any, metrics: Any = None) -> Any:
    """One row per algorithm (in the frame's order): the median over seeds of each run's
    last row (``metrics``: those columns, default every numeric one), with ``seeds`` and
    ``diverged`` counts."""
    last = frame.groupby(["algorithm", "seed"], sort=False).tail(1)
    columns = list(metrics) if metrics is not None else [
        c for c in last.select_dtypes("number").columns
        if c not in ("seed", *SETTING_COLUMNS)]
    grouped = last.groupby("algorithm", sort=False)
    table = grouped[columns].median()
    table["seeds"] = grouped.size()
    if "status" in last:
        table["diverged"] = grouped["status"].apply(lambda s: int((s == "diverged").sum()))
    return table
