"""Run a resolved experiment configuration and write its outputs.

Output directory contract (other tools rely on it):

* ``results.csv`` — one row per evaluation, appended as the run goes (a crash loses nothing
  already written; with worker processes, when each run ends), columns
  :data:`RESULT_COLUMNS` plus the variant, the swept keys and any extra metrics;
* ``runs.jsonl`` — one line per finished run (its key and summary row): what ``--resume``
  skips; ``parts/`` holds the rows of runs in progress in worker processes;
* ``config.json`` — the resolved configuration, package versions, seeds, the problem's
  fingerprint and the reference solution's accuracy;
* ``models/<algorithm>_seed<k>.npy`` — final models (``<algorithm>`` is the run label:
  the algorithm name, suffixed by the gradient mode when a config has several, by the
  variant when it has variants, and by ``_<param><value>`` per swept key);
* ``summary.md`` — the table printed at the end;
* ``summary.json`` — the final row of every run (what the table and the verdict are
  computed from), written last: its presence marks a finished experiment;
* ``plot.png`` — log optimality (or objective) vs rounds, one panel per gradient mode,
  and ``plot_<metric>.png`` for every metric of the config, when matplotlib is installed.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .. import __version__
from .._array import to_numpy
from .._extras import MissingExtraError
from ..algorithms import DECENTRALIZED, make_algorithm
from ..config import (
    batch_modes,
    build_problem,
    build_topology,
    mode_name,
    parse_value,
    resolve,
    to_jsonable,
    variant_settings,
)
from ..metrics import CSVLogger
from ..metrics._loggers import _format
from ..reference import solve_reference
from ..runtime import NonFiniteError, simulate, simulate_async, simulate_decentralized
from ._sweep import expand_sweep
from ._verdict import DIVERGED, SEEDS

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
                   clients: Callable[..., Any] | None = None,
                   sweep: list[tuple[str, list[str]]] | None = None, jobs: int = 1,
                   resume: bool = False) -> list[dict[str, Any]]:
    """Run every (setting, variant, seed, gradient mode, algorithm) of ``config``; write outputs.

    Parameters
    ----------
    config : dict
        A configuration (see :mod:`fedcomp.config`); it is validated first.
    out_dir : path
        Output directory (created).
    seeds : list of int, optional
        Overrides the configuration's seeds.
    progress : "auto" or bool
        Progress on stderr: one line per finished run (runs done / total, elapsed, ETA),
        and with ``jobs=1`` the per-run rounds/s line on a terminal. False: nothing.
    stream : text stream, optional
        Where the summary table is printed (stdout by default; ``None`` prints there).
    clients : callable, optional
        ``clients(label=, seed=, batch_size=, rounds=)`` returns the client executor of
        that run for :func:`~fedcomp.runtime.simulate` (default: the simulator's);
        :mod:`fedcomp.flower` runs the same experiment on SuperNodes through it (jobs=1 only).
    sweep : list of (key, values), optional
        A grid (see :func:`~fedcomp.experiments._sweep.expand_sweep`): every point is a setting,
        and the swept keys become columns of ``results.csv`` and of the summary.
    jobs : int, default 1
        Worker processes (``spawn`` context; each gets ``cores // jobs`` BLAS/torch threads).
        1 runs in this process. The numbers do not depend on it: every run draws from its seed.
    resume : bool, default False
        Continue in an ``out_dir`` written before with the same configuration and sweep
        (the seeds may differ): runs recorded in ``runs.jsonl`` are kept, the rows of
        unfinished ones dropped, the rest run. A different configuration is an error.

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
    if config.get("kind") == "timing":  # a measurement, not a training run (prox_cost)
        if sweep or resume or jobs != 1:
            raise ValueError(f"{config.get('name')} is a timing experiment: no --sweep, "
                             "--resume or --jobs")
        return _run_timing(config, out_dir, stream, clients)
    if clients is not None and jobs != 1:
        raise ValueError("a client executor (Flower) runs in this process: use jobs=1")
    base = {**config, **({"seeds": list(seeds)} if seeds is not None else {})}
    cfg = resolve(base)
    points = [(values, resolve(c)) for values, c in expand_sweep(base, sweep or [])]
    out = Path(out_dir)
    meta: dict[str, Any] = {"config": to_jsonable(cfg), "seeds": cfg["seeds"],
                            "sweep": {k: [parse_value(v) for v in vs] for k, vs in sweep or []},
                            "versions": versions(), "settings": {}}
    finished = _start_directory(out, meta, resume)
    plan = _plan(points)
    has_variants = plan[0]["variant"] is not None if plan else False
    sweep_keys = list(meta["sweep"])
    settings = [s for _, c in points for s in variant_settings(c)]
    columns = RESULT_COLUMNS + (["variant"] if has_variants else []) + sweep_keys + [
        m for m in cfg["metrics"] if m not in RESULT_COLUMNS] + decentralized_columns(settings)
    if any(setting.get("compute_times") or async_entries(setting) for _, setting in settings):
        columns += ["sim_time"]  # simulated time (rounds wait for their slowest client)
    if any(async_entries(setting) for _, setting in settings):
        # the asynchronous runner's staleness: the largest delay applied so far and the
        # clients' idle time at the max_delay barrier (empty in the synchronous runs' rows)
        columns += ["max_delay", "waited"]
    key_columns = ["algorithm", *(["variant"] if has_variants else []), *sweep_keys, "seed"]
    _keep_finished_rows(out / "results.csv", finished, key_columns)
    todo = [run for run in plan if run_key(run["tags"], key_columns) not in finished]
    (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    overall = _Overall(progress, len(plan), len(plan) - len(todo))
    try:
        results = _execute_all(todo, out, columns, key_columns, meta, jobs, progress, clients,
                               overall)
    except KeyboardInterrupt:  # leave whole runs only (a crash's are dropped by --resume)
        _keep_finished_rows(out / "results.csv", _finished_runs(out), key_columns)
        shutil.rmtree(out / "parts", ignore_errors=True)
        raise
    finished.update(results)
    summary = [finished[run_key(run["tags"], key_columns)] for run in plan]
    _PREPARED.clear()
    _write_summary(cfg, out, summary, has_variants, sweep_keys, stream)
    return summary


def _start_directory(out: Path, meta: dict[str, Any], resume: bool
                     ) -> dict[str, dict[str, Any]]:
    """Create ``out`` (or check it matches for a resume); the finished runs by key."""
    (out / "models").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "parts", ignore_errors=True)  # an interrupted run's partial rows
    (out / "parts").mkdir()
    if not resume:
        if (out / "results.csv").exists():
            raise ValueError(f"{out}/results.csv already exists; pass another --out, remove "
                             "it, or --resume")
        (out / "runs.jsonl").unlink(missing_ok=True)
        return {}
    if (out / "config.json").exists():
        before = json.loads((out / "config.json").read_text())
        differences = config_differences(
            {"config": {k: v for k, v in before.get("config", {}).items() if k != "seeds"},
             "sweep": before.get("sweep", {})},
            json.loads(json.dumps({"config": {k: v for k, v in meta["config"].items()
                                              if k != "seeds"}, "sweep": meta["sweep"]},
                                  default=str)))
        if differences:
            raise ValueError(f"--resume: {out} was run with another configuration; differing: "
                             f"{'; '.join(differences[:8])}. Use the same config, --set and "
                             "--sweep (seeds may differ), or another --out")
        meta["settings"] = before.get("settings", {})
    return _finished_runs(out)


def _finished_runs(out: Path) -> dict[str, dict[str, Any]]:
    """The summary rows of the runs recorded in ``out/runs.jsonl``, by run key."""
    finished: dict[str, dict[str, Any]] = {}
    if (out / "runs.jsonl").exists():
        for line in (out / "runs.jsonl").read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                finished[record["id"]] = record["row"]
    return finished


def config_differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Human-readable differences between two JSON-like values (``"rounds: 10 -> 20"``).

    Examples
    --------
    >>> config_differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 0})
    ['b.c: 2 -> 3', 'd: (absent) -> 0']
    """
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in before or key not in after:
                out.append(f"{where}: {before.get(key, '(absent)')} -> "
                           f"{after.get(key, '(absent)')}")
            else:
                out += config_differences(before[key], after[key], where)
        return out
    return [] if before == after else [f"{path}: {before} -> {after}"]


def run_key(tags: dict[str, Any], key_columns: list[str]) -> str:
    """A run's identity as its ``results.csv`` cells (algorithm, variant, swept values, seed)."""
    return json.dumps([_cell(tags.get(c)) for c in key_columns])


def _keep_finished_rows(path: Path, finished: dict[str, Any], key_columns: list[str]) -> None:
    """Drop from ``results.csv`` the rows of runs not recorded as finished (a crash's)."""
    if not path.exists():
        return
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        rows = list(reader)
    if header is None:
        return
    index = [header.index(c) if c in header else None for c in key_columns]
    keep = [r for r in rows
            if json.dumps([r[i] if i is not None else "" for i in index]) in finished]
    if len(keep) != len(rows):
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(keep)
        tmp.replace(path)


def _plan(points: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every run, in order: setting, variant, seed, gradient mode, algorithm."""
    plan = []
    for values, cfg in points:
        for variant, setting in variant_settings(cfg):
            for seed in cfg["seeds"]:
                for label, entry, batch_size in run_labels(setting):
                    tags = {"algorithm": label, "method": entry["name"],
                            "batch_size": mode_name(batch_size), "seed": seed, **values}
                    if variant is not None:
                        tags["variant"] = variant
                    suffix = "".join(f"_{k.split('.')[-1]}{_format(v)}"
                                     for k, v in values.items())
                    name = (label if variant is None else f"{label}_{variant}") + suffix
                    plan.append({"setting": setting, "entry": entry, "batch_size": batch_size,
                                 "tags": tags, "variant": variant, "model": name,
                                 "setting_name": f"{variant or 'base'}"
                                 + (f" {json.dumps(values)}" if values else "")})
    return plan


#: Problems and references built in this process, by setting (a worker reuses them).
_PREPARED: dict[str, tuple[Any, Any, dict[str, Any]]] = {}


def _prepared(setting: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    key = json.dumps(to_jsonable(setting), sort_keys=True, default=str)
    if key not in _PREPARED:
        _PREPARED.clear()  # one setting at a time: plans are ordered by setting
        _PREPARED[key] = _prepare(setting)
    return _PREPARED[key]


def _execute(run: dict[str, Any], part: Path, columns: list[str], progress: Any,
             clients: Any = None) -> dict[str, Any]:
    """One run (in this process or a worker): rows to ``part``; its summary row."""
    setting, entry, tags = run["setting"], run["entry"], run["tags"]
    problem, reference, setting_meta = _prepared(setting)
    executor = None if clients is None else clients(
        label=tags["algorithm"], seed=tags["seed"], batch_size=run["batch_size"],
        rounds=_steps(setting, entry, problem.n_clients))
    logger = CSVLogger(part, columns=columns)
    try:
        row = _run_one(setting, problem, reference, entry, run["batch_size"], tags, logger,
                       progress, executor)
    finally:
        logger.close()
    row["label"] = entry.get("label", entry["name"])
    row["_setting_meta"] = setting_meta
    return row


def _init_worker(threads: int) -> None:
    """Limit a worker's BLAS / OpenMP / torch threads (workers × threads ≤ cores); let its
    malloc keep freed buffers for reuse, as the command line does (:func:`reuse_freed_memory`)."""
    from ..runtime import reuse_freed_memory

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


def _execute_all(todo: list[dict[str, Any]], out: Path, columns: list[str],
                 key_columns: list[str], meta: dict[str, Any], jobs: int, progress: Any,
                 clients: Any, overall: _Overall) -> dict[str, dict[str, Any]]:
    """Run ``todo`` (in this process or ``jobs`` workers); record each run as it finishes."""
    results: dict[str, dict[str, Any]] = {}

    def record(index: int, row: dict[str, Any]) -> None:
        run = todo[index]
        key = run_key(run["tags"], key_columns)
        _finish(out, index, run, key, row, columns, meta)
        results[key] = {k: v for k, v in row.items() if not k.startswith("_")}
        overall.finished(run, row)

    if jobs == 1 or len(todo) <= 1:
        for index, run in enumerate(todo):  # in this process: rows go to results.csv directly
            record(index, _execute(run, out / "results.csv", columns, progress, clients))
        return results
    workers = min(jobs, len(todo))
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                               initializer=_init_worker, initargs=(threads,))
    try:
        # per-run progress lines of several workers would overwrite each other: the
        # overall line (one per finished run) reports instead
        futures = {pool.submit(_execute, run, out / "parts" / f"{index}.csv", columns,
                               False): index for index, run in enumerate(todo)}
        for future in as_completed(futures):
            record(futures[future], future.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _finish(out: Path, index: int, run: dict[str, Any], key: str, row: dict[str, Any],
            columns: list[str], meta: dict[str, Any]) -> None:
    """Move a finished run's rows into ``results.csv``, save its model, mark it finished."""
    part = out / "parts" / f"{index}.csv"
    if part.exists():  # a worker's rows (in-process runs log to results.csv directly)
        lines = part.read_text().splitlines(keepends=True)[1:]
        results = out / "results.csv"
        new = not (results.exists() and results.stat().st_size > 0)
        with results.open("a", newline="") as f:
            if new:
                csv.writer(f).writerow(columns)
            f.writelines(lines)
    x = row.get("_x")
    if row["status"] == "ok" and x is not None:
        np.save(out / "models" / f"{run['model']}_seed{run['tags']['seed']}.npy", x)
    if run["setting_name"] not in meta["settings"]:
        meta["settings"][run["setting_name"]] = row.get("_setting_meta")
        (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    summary = {k: v for k, v in row.items() if not k.startswith("_")}
    with (out / "runs.jsonl").open("a") as f:  # this line marks the run finished
        f.write(json.dumps({"id": key, "key": {c: _cell(v) for c, v in run["tags"].items()},
                            "row": summary}, default=_json_default) + "\n")
    part.unlink(missing_ok=True)


def _cell(value: Any) -> str:
    """A value as its ``results.csv`` cell."""
    return "" if value is None else str(_format(value))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


class _Overall:
    """The progress over runs: one line per finished run (done/total, elapsed, ETA)."""

    def __init__(self, enabled: Any, total: int, done: int) -> None:
        self.enabled = bool(enabled)
        self.total, self.done, self.skipped = total, done, done
        self.start = time.perf_counter()
        if self.enabled and done:
            print(f"resuming: {done} of {total} runs already finished", file=sys.stderr)

    def finished(self, run: dict[str, Any], row: dict[str, Any]) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        rate = (self.done - self.skipped) / max(elapsed, 1e-9)
        eta = (self.total - self.done) / rate
        tags = run["tags"]
        what = " ".join([tags["algorithm"], *([tags["variant"]] if "variant" in tags else []),
                         f"seed {tags['seed']}", *(f"{k}={_cell(v)}" for k, v in tags.items()
                         if k not in ("algorithm", "method", "batch_size", "seed", "variant"))])
        status = "" if row["status"] == "ok" else " DIVERGED"
        print(f"[{self.done}/{self.total}] {what}{status}  elapsed {_duration(elapsed)}  "
              f"ETA {_duration(eta)}", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    """``75.0`` → ``"1m15s"``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def _write_summary(cfg: dict[str, Any], out: Path, summary: list[dict[str, Any]],
                   has_variants: bool, sweep_keys: list[str], stream: TextIO) -> None:
    """``summary.md`` (table, verdict), printed too, and the plots."""
    table = summary_table(summary, cfg["metrics"], has_variants, sweep_keys)
    # a sweep changes the paper's hyperparameters: its claim is not judged on the grid
    verdict = "" if sweep_keys else claim_verdict(cfg, summary)
    text = f"# {cfg['name']}\n\n{cfg['description']}\n\n{table}\n"
    if verdict:
        text += f"\nClaim: {cfg['claim']}\n\n{verdict}\n"
    (out / "summary.md").write_text(text)
    write_summary(out, summary)
    print(table, file=stream)
    if verdict:
        print(verdict, file=stream)
    shutil.rmtree(out / "parts", ignore_errors=True)
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
    except MissingExtraError as exc:
        print(f"no plot.png: {exc}", file=sys.stderr)


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
                           clients=clients, client_state=setting["client_state"])
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
    configuration has variants. The medians are over the seeds that converged; every key
    also gets ``"diverged"`` and ``"seeds"``, how many of its seeds diverged and ran (a key
    whose every seed diverged has only those two), so that a verdict rule sees a method
    that diverged on some seeds (:mod:`fedcomp.experiments._verdict`) instead of the median
    of its survivors.
    """
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in summary:
        key = (row["label"], row["batch_size"]) + (
            (row["variant"],) if "variant" in row else ())
        groups.setdefault(key, []).append(row)
    finals = {}
    for key, rows in groups.items():
        ok = [r for r in rows if r.get("status") == "ok"]
        first: dict[str, Any] = ok[0] if ok else {}
        numeric = {m for m, v in first.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        finals[key] = {m: float(np.median([float(r[m]) for r in ok])) for m in numeric}
        finals[key] |= {DIVERGED: float(len(rows) - len(ok)), SEEDS: float(len(rows))}
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


def summary_table(rows: list[dict[str, Any]], metrics: list[str], variants: bool = False,
                  swept: list[str] | None = None) -> str:
    """A Markdown table of the final row of every run (the swept keys as columns).

    A NaN metric is one the run does not define (``rank`` of a vector model, ``optimality``
    without a reference, ``support_f1`` without a ground truth) and shows as "—".
    """
    columns = ["algorithm", *(["variant"] if variants else []), *(swept or []), "seed", "round",
               *[m for m in metrics if m != "support"],
               "grad_evals", "prox_evals_client", "prox_evals_server", "floats_up", "wall_s",
               "status"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        status = row.get("status", "ok")
        row = {**row, "status": status if len(status) < 60 else status[:57] + "..."}
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)
