"""Run a resolved experiment configuration and write its outputs.

Output directory contract (other tools rely on it):

* ``results.csv`` — one row per evaluation, appended as the run goes (a crash loses nothing
  already written), columns :data:`RESULT_COLUMNS` plus any extra metrics;
* ``config.json`` — the resolved configuration, package versions, seeds, the problem's
  fingerprint and the reference solution's accuracy;
* ``models/<algorithm>_seed<k>.npy`` — final models (``<algorithm>`` is the run label:
  the algorithm name, suffixed by the gradient mode when a config has several, and by the
  variant when it has variants);
* ``summary.md`` — the table printed at the end;
* ``summary.json`` — the final row of every run (what the table and the verdict are
  computed from), written last: its presence marks a finished experiment;
* ``plot.png`` — log optimality (or objective) vs rounds, one panel per gradient mode,
  and ``plot_<metric>.png`` for every metric of the config, when matplotlib is installed.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .. import __version__
from .._array import to_numpy
from ..algorithms import DECENTRALIZED, make_algorithm
from ..config import (
    batch_modes,
    build_problem,
    build_topology,
    mode_name,
    resolve,
    to_jsonable,
    variant_settings,
)
from ..metrics import CSVLogger
from ..reference import solve_reference
from ..runtime import NonFiniteError, simulate, simulate_async, simulate_decentralized

RESULT_COLUMNS = ["algorithm", "method", "batch_size", "seed", "round", "objective",
                  "optimality", "nnz", "grad_evals", "sample_grads", "prox_evals_client",
                  "prox_evals_server", "floats_up", "floats_down", "wall_s"]


def versions() -> dict[str, str]:
    """Versions of fedcomp, Python and the numerical stack (for ``config.json``)."""
    out = {"fedcomp": __version__, "python": platform.python_version(), "numpy": np.__version__}
    for name in ("scipy", "array_api_compat", "torch", "matplotlib"):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except ImportError:
                continue
        out[name] = getattr(module, "__version__", "?")
    if "flwr" in sys.modules:  # run through fedcomp.flower (never imported just for this)
        out["flwr"] = getattr(sys.modules["flwr"], "__version__", "?")
    return out


def run_labels(cfg: dict[str, Any]) -> list[tuple[str, dict[str, Any], int | None]]:
    """``(label, algorithm entry, batch_size)`` for every run of one seed."""
    modes = batch_modes(cfg)
    runs = []
    for batch_size in modes:
        for entry in cfg["algorithms"]:
            label = entry.get("label", entry["name"])
            if len(modes) > 1:
                label = f"{label}_{mode_name(batch_size)}"
            runs.append((label, entry, batch_size))
    return runs


def run_experiment(config: dict[str, Any], out_dir: str | Path, *, seeds: list[int] | None = None,
                   progress: Any = "auto", stream: TextIO | None = None,
                   clients: Callable[..., Any] | None = None) -> list[dict[str, Any]]:
    """Run every (variant, seed, gradient mode, algorithm) of ``config`` and write the outputs.

    Parameters
    ----------
    config : dict
        A configuration (see :mod:`fedcomp.config`); it is validated first.
    out_dir : path
        Output directory (created).
    seeds : list of int, optional
        Overrides the configuration's seeds.
    progress : "auto" or bool
        Progress line per run on stderr.
    stream : text stream, optional
        Where the summary table is printed (stdout by default; ``None`` prints there).
    clients : callable, optional
        ``clients(label=, seed=, batch_size=, rounds=)`` returns the client executor of
        that run for :func:`~fedcomp.runtime.simulate` (default: the simulator's);
        :mod:`fedcomp.flower` runs the same experiment on SuperNodes through it.

    Returns
    -------
    list of dict
        One summary row per run (label, seed, final metrics, status).
    """
    stream = stream or sys.stdout
    if config.get("kind") == "timing":  # a measurement, not a training run (prox_cost)
        return _run_timing(config, out_dir, stream, clients)
    cfg = resolve(config)
    if seeds is not None:
        cfg["seeds"] = list(seeds)
    out = Path(out_dir)
    (out / "models").mkdir(parents=True, exist_ok=True)
    settings = variant_settings(cfg)
    has_variants = settings[0][0] is not None

    meta: dict[str, Any] = {"config": to_jsonable(cfg), "seeds": cfg["seeds"],
                            "versions": versions(), "settings": {}}
    columns = RESULT_COLUMNS + (["variant"] if has_variants else []) + [
        m for m in cfg["metrics"] if m not in RESULT_COLUMNS] + decentralized_columns(settings)
    if any(setting.get("compute_times") or async_entries(setting) for _, setting in settings):
        columns += ["sim_time"]  # simulated time (rounds wait for their slowest client)
    if any(async_entries(setting) for _, setting in settings):
        # the asynchronous runner's staleness: the largest delay applied so far and the
        # arrivals dropped for exceeding max_delay (empty in the synchronous runs' rows)
        columns += ["max_delay", "discarded"]
    logger = CSVLogger(out / "results.csv", columns=columns)
    summary: list[dict[str, Any]] = []
    try:
        for variant, setting in settings:
            problem, reference, meta["settings"][variant or "base"] = _prepare(setting)
            # written before the runs: a crash keeps the resolved config and versions
            (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
            for seed in cfg["seeds"]:
                for label, entry, batch_size in run_labels(setting):
                    tags = {"algorithm": label, "method": entry["name"],
                            "batch_size": mode_name(batch_size), "seed": seed}
                    if has_variants:
                        tags["variant"] = variant
                    executor = None if clients is None else clients(
                        label=label, seed=seed, batch_size=batch_size,
                        rounds=_steps(setting, entry, problem.n_clients))
                    row = _run_one(setting, problem, reference, entry, batch_size, tags, logger,
                                   progress, executor)
                    row["label"] = entry.get("label", entry["name"])
                    if row["status"] == "ok":
                        name = label if variant is None else f"{label}_{variant}"
                        np.save(out / "models" / f"{name}_seed{seed}.npy", row.pop("_x"))
                    summary.append(row)
    finally:
        logger.close()
    table = summary_table(summary, cfg["metrics"], has_variants)
    verdict = claim_verdict(cfg, summary)
    text = f"# {cfg['name']}\n\n{cfg['description']}\n\n{table}\n"
    if verdict:
        text += f"\nClaim: {cfg['claim']}\n\n{verdict}\n"
    (out / "summary.md").write_text(text)
    write_summary(out, summary)
    print(table, file=stream)
    if verdict:
        print(verdict, file=stream)
    try:
        from ..plotting import choose_metric, plot_results, read_results

        # plot.png: optimality, or the first configured metric when there is no reference x*
        main_metric = "optimality" if "optimality" in cfg["metrics"] else cfg["metrics"][0]
        plot_results(out / "results.csv", out / "plot.png", metric=main_metric,
                     title=cfg["name"])
        rows = read_results(out / "results.csv")
        for metric in cfg["metrics"]:  # one figure per recorded metric
            # not one undefined for every run (all NaN, e.g. rank of a vector model)
            if metric not in ("support",) and choose_metric(rows, metric) == metric:
                plot_results(out / "results.csv", out / f"plot_{metric}.png", metric=metric,
                             title=cfg["name"], fallback=False)
    except ImportError:
        print("matplotlib is not installed: no plot.png (pip install 'fedcomp[plot]')",
              file=sys.stderr)
    return summary


def _run_timing(config: dict[str, Any], out_dir: str | Path, stream: TextIO,
                clients: Any) -> list[dict[str, Any]]:
    from . import TIMINGS

    if config.get("name") not in TIMINGS:
        raise ValueError(f"kind = 'timing' needs name = one of {sorted(TIMINGS)} (got "
                         f"{config.get('name')!r})")
    if clients is not None:
        raise ValueError(f"{config['name']} is a timing experiment: it runs in this process, "
                         "not through a Flower executor")
    rows = TIMINGS[config["name"]].run(config, out_dir, stream)
    summary = [{**row, "status": "ok"} for row in rows]
    write_summary(Path(out_dir), summary)
    return summary


def write_summary(out: Path, summary: list[dict[str, Any]]) -> Path:
    """Write ``summary.json``: the final rows of the runs (NaN as ``null``)."""
    def clean(value: Any) -> Any:
        value = to_jsonable(value)
        return None if isinstance(value, float) and value != value else value

    rows = [{k: clean(v) for k, v in row.items() if not k.startswith("_")} for row in summary]
    path = out / "summary.json"
    path.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return path


def read_summary(out: str | Path) -> list[dict[str, Any]]:
    """The rows :func:`write_summary` wrote (``null`` back to NaN)."""
    rows = json.loads((Path(out) / "summary.json").read_text())
    return [{k: (math.nan if v is None else v) for k, v in row.items()} for row in rows]


def async_entries(setting: dict[str, Any]) -> list[dict[str, Any]]:
    """The algorithm entries of a setting that run on the asynchronous event clock."""
    return [entry for entry in setting["algorithms"] if entry["name"] not in DECENTRALIZED
            and make_algorithm(entry["name"], **_params(entry)).execution == "async"]


def _params(entry: dict[str, Any]) -> dict[str, Any]:
    """An algorithm entry's factory arguments (without its name, label, participation)."""
    return {k: v for k, v in entry.items() if k not in ("name", "label", "clients_per_round")}


def decentralized_columns(settings: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Result columns of decentralized runs: per-node metrics, sparsified ones, consensus."""
    extra: list[str] = []
    for _, setting in settings:
        if not setting.get("topology"):
            continue
        options = {k: v for k, v in setting["topology"].items()}
        evaluate_on = options.get("evaluate_on", ["average"])
        node = options.get("node", 0)
        suffixes = [""] + (["_sparse"] if options.get("sparsity") else [])
        for suffix in suffixes:
            for m in setting["metrics"]:
                names = ([f"{m}{suffix}"] if suffix and "average" in evaluate_on else [])
                if "node" in evaluate_on:
                    names.append(f"node{node}_{m}{suffix}")
                if "nodes" in evaluate_on:
                    names += [f"{m}{suffix}_{s}" for s in ("min", "mean", "max")]
                extra += [n for n in names if n not in extra]
        if "consensus_error" not in extra:
            extra.append("consensus_error")
    return extra


def _prepare(setting: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """The problem, its reference solution (or None) and their metadata for one setting."""
    tic = time.perf_counter()
    problem = build_problem(setting)
    reference = (solve_reference(problem, tol=setting["reference"]["tol"])
                 if setting["reference"] else None)
    meta = {"problem": {"fingerprint": problem.fingerprint(), "n_clients": problem.n_clients,
                        "param_shape": list(problem.param_shape),
                        "n_samples": problem.data.n_samples},
            "reference": None if reference is None else
            {"objective": reference.objective, "prox_grad_norm": reference.prox_grad_norm,
             "iterations": reference.iterations},
            "setup_s": time.perf_counter() - tic}
    if setting.get("topology"):  # the graph's mixing: σ₂(U) and the spectral gap
        topology, _ = build_topology(setting, problem.n_clients)
        meta["topology"] = {"name": topology.name, "sigma2": topology.sigma2,
                            "spectral_gap": topology.spectral_gap}
    return problem, reference, meta


def _steps(setting: dict[str, Any], entry: dict[str, Any], n_clients: int) -> int:
    """Server updates of a run: its rounds, or for an asynchronous algorithm one per
    client update (rounds × clients per round)."""
    if entry["name"] in DECENTRALIZED:
        return setting["rounds"]
    params = {k: v for k, v in entry.items() if k not in ("name", "label", "clients_per_round")}
    if make_algorithm(entry["name"], **params).execution != "async":
        return setting["rounds"]
    per_round = entry.get("clients_per_round", setting["clients_per_round"]) or n_clients
    return setting["rounds"] * per_round


def _run_one(setting: dict[str, Any], problem: Any, reference: Any, entry: dict[str, Any],
             batch_size: int | None, tags: dict[str, Any], logger: Any, progress: Any,
             clients: Any = None) -> dict[str, Any]:
    """One simulated run; its summary row (final metrics, status, the model under ``_x``)."""
    algorithm = make_algorithm(entry["name"], **_params(entry))
    row: dict[str, Any] = {**tags, "status": "ok"}
    clients_per_round = entry.get("clients_per_round", setting["clients_per_round"])
    run: Any
    try:
        if entry["name"] in DECENTRALIZED:  # gossip over the setting's graph
            if clients is not None:
                raise ValueError(f"{entry['name']} is decentralized (gossip between nodes): it "
                                 "runs in the simulator only, not through a Flower executor")
            topology, options = build_topology(setting, problem.n_clients)
            run = simulate_decentralized(
                algorithm, problem, topology, setting["rounds"], batch_size=batch_size,
                node_block=setting["client_block"], eval_every=setting["eval_every"],
                metrics=setting["metrics"], reference=reference, logger=logger,
                seed=tags["seed"], progress=progress, tags=tags, **options)
        elif algorithm.execution == "async":
            # as many client updates as the synchronous runs: rounds × clients per round;
            # the event clock stays here, each arrival's update runs on ``clients``
            per_round = clients_per_round or problem.n_clients
            run = simulate_async(algorithm, problem, setting["rounds"] * per_round,
                                 compute_times=setting["compute_times"], batch_size=batch_size,
                                 eval_every=setting["eval_every"] * per_round,
                                 metrics=setting["metrics"], reference=reference, logger=logger,
                                 seed=tags["seed"], progress=progress, tags=tags,
                                 clients=clients)
        else:
            run = simulate(algorithm, problem, setting["rounds"], batch_size=batch_size,
                           clients_per_round=clients_per_round,
                           client_block=setting["client_block"],
                           eval_every=setting["eval_every"], metrics=setting["metrics"],
                           reference=reference, logger=logger, seed=tags["seed"],
                           progress=progress, tags=tags, compute_times=setting["compute_times"],
                           clients=clients)
    except NonFiniteError as exc:
        row["status"] = f"diverged: {exc}"
        print(f"warning: {exc}", file=sys.stderr)
        return row
    row.update(run.history[-1])
    row["_x"] = to_numpy(run.x)
    return row


def final_metrics(summary: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, float]]:
    """Median over seeds of every final metric, keyed by (label, mode[, variant]).

    ``label`` is the algorithm entry's label (its name unless the config gives one),
    ``mode`` is ``"full"`` or ``"b<batch size>"``; the variant is appended when the
    configuration has variants. Diverged runs are left out.
    """
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in summary:
        if row.get("status") != "ok":
            continue
        key = (row["label"], row["batch_size"]) + (
            (row["variant"],) if "variant" in row else ())
        groups.setdefault(key, []).append(row)
    finals = {}
    for key, rows in groups.items():
        numeric = {m for m in rows[0] if isinstance(rows[0][m], int | float)
                   and not isinstance(rows[0][m], bool)}
        finals[key] = {m: float(np.median([float(r[m]) for r in rows])) for m in numeric}
    return finals


def claim_verdict(cfg: dict[str, Any], summary: list[dict[str, Any]]) -> str:
    """"Verdict: ..." for a paper experiment (by config name) from its final metrics.

    The rule lives in the experiment module: ``verdict(finals, config)`` with ``finals``
    from :func:`final_metrics` and the resolved configuration returns ``(verdict, rule)``.
    """
    from . import EXPERIMENTS

    module = EXPERIMENTS.get(cfg["name"])
    if module is None or not hasattr(module, "verdict"):
        return ""
    verdict, rule = module.verdict(final_metrics(summary), cfg)
    return f"Verdict: {verdict} (rule: {rule})"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # a metric undefined for this run (see summary_table)
            return "—"
        if value.is_integer() and abs(value) < 1e9:
            return str(int(value))
        return f"{value:.3e}"
    return str(value)


def summary_table(rows: list[dict[str, Any]], metrics: list[str], variants: bool = False) -> str:
    """A Markdown table of the final row of every run.

    A NaN metric is one the run does not define (``rank`` of a vector model, ``optimality``
    without a reference, ``support_f1`` without a ground truth) and shows as "—".
    """
    columns = ["algorithm", *(["variant"] if variants else []), "seed", "round",
               *[m for m in metrics if m != "support"],
               "grad_evals", "prox_evals_client", "prox_evals_server", "floats_up", "wall_s",
               "status"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        status = row.get("status", "ok")
        row = {**row, "status": status if len(status) < 60 else status[:57] + "..."}
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)
