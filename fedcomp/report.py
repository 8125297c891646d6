"""The reproduction report: every experiment config run and assembled into one page.

``fedcomp report [--quick] --out DIR`` runs each built-in experiment (``fedcomp/configs/*.toml``,
the reduced sizes of
its ``[quick]`` table with ``--quick``) into ``DIR/<name>/`` and writes ``DIR/index.html``
and ``DIR/report.md``. Per paper, and per experiment of that paper:

* the claim being tested (the config's ``claim``: one sentence naming the paper's figure
  or table);
* our figures — the main metric against communication rounds (server updates when
  asynchronous runs are drawn: one is a single client's update), floats communicated and
  wall time (first against simulated time, with the objective, when the runs have an
  event clock: ``compute_times``), the median over seeds with the min–max seed spread
  shaded, one color per algorithm throughout the report
  (:func:`fedcomp.plotting.color_of`);
* a table of final metrics, mean ± standard deviation over seeds;
* the verdict — reproduced / partly / not reproduced — computed by the experiment
  module's ``verdict`` rule from each final metric's median over seeds (diverged runs left
  out; :func:`fedcomp.experiments.final_metrics`), not from the table's means,
  printed next to it. The report says so above its summary table (:data:`READING`).

Resumable: an experiment whose ``summary.json`` exists for the same configuration is not
rerun (its table, figures and verdict are rebuilt from the files), and an interrupted one
keeps its finished runs (the runner's ``resume``). A failing experiment is recorded in
the report with its error and the others still run.
"""

from __future__ import annotations

import html
import json
import math
import re
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ._extras import check_installed, require
from .config import (
    AS_WRITTEN,
    diagnoses,
    experiment_names,
    load,
    quick_config,
    reading_base,
    reading_config,
    readings,
    to_jsonable,
)
from .experiments import ConfigMismatchError, validate
from .experiments._results import RUN_FOLDERS
from .experiments._results import main_metric as metric_of
from .experiments._setting import TARGET_COLUMNS

#: The source papers (``shared/papers/``), in the report's order.
PAPERS = {
    "seed000": "Zhang, Hu, Johansson — Composite Federated Learning with Heterogeneous Data "
               "(ICASSP 2024)",
    "seed001": "Bao, Crawshaw, Luo, Liu — Fast Composite Optimization and Statistical Recovery "
               "in Federated Learning (ICML 2022)",
    "seed002": "Zhou, Zhong, Shi, Wen, Yu — FedCanon: Non-Convex Composite Federated Learning "
               "with Efficient Proximal Operation",
    "seed003": "Tran-Dinh, Pham, Phan, Nguyen — FedDR: Randomized Douglas-Rachford Splitting "
               "Algorithms for Nonconvex Federated Composite Optimization (NeurIPS 2021)",
    "seed004": "Liang, Peng, Zhang — Gradient Tracking for High Dimensional Federated "
               "Optimization",
    "tong2021": "Tong, Liang, Zhu, Bi — Federated Nonconvex Sparse Learning (arXiv:2101.00052)",
    "condat2023": "Condat, Agarský, Malinovsky, Maranjyan, Richtárik — CompressedScaffnew "
                  "(arXiv:2210.13277), TAMUNA (arXiv:2302.09832), LoCoDL (ICLR 2025)",
    "mcmahan2018": "McMahan, Ramage, Talwar, Zhang — Learning Differentially Private Recurrent "
                   "Language Models (ICLR 2018)",
    "li2021": "Li, Hu, Beirami, Smith — Ditto: Fair and Robust Federated Learning Through "
              "Personalization (ICML 2021)",
    "jiang2024": "Jiang, Rodomanov, Stich — Stabilized Proximal-Point Methods for Federated "
                 "Optimization (NeurIPS 2024)",
}

#: The papers as the page names them: authors — venue and year.
PAPER_NAMES = {
    "seed000": "Zhang, Hu, Johansson — ICASSP 2024",
    "seed001": "Bao, Crawshaw, Luo, Liu — ICML 2022",
    "seed002": "Zhou, Zhong, Shi, Wen, Yu — FedCanon (preprint)",
    "seed003": "Tran-Dinh, Pham, Phan, Nguyen — NeurIPS 2021",
    "seed004": "Liang, Peng, Zhang — preprint 2023",
    "tong2021": "Tong, Liang, Zhu, Bi — arXiv 2021",
    "condat2023": "Condat et al. — compressed local training (2022–2025)",
    "mcmahan2018": "McMahan, Ramage, Talwar, Zhang — ICLR 2018",
    "li2021": "Li, Hu, Beirami, Smith — ICML 2021",
    "jiang2024": "Jiang, Rodomanov, Stich — NeurIPS 2024",
}

#: Experiment name prefix → paper.
_PAPER_OF_PREFIX = {"seed000": "seed000", "bao2022": "seed001", "fedcanon": "seed002",
                    "prox_cost": "seed002", "feddr": "seed003", "liang2024": "seed004",
                    "fedht": "tong2021", "condat": "condat2023", "dp_": "mcmahan2018",
                    "personal_": "li2021", "sdane_": "jiang2024"}

#: Figures per experiment: (file stem, x axis).
X_AXES = (("rounds", "round"), ("floats", "floats"), ("time", "wall_s"))

#: Metrics shown in the final table besides the configured ones (cost counters).
COST_COLUMNS = ("floats_up", "wall_s")


def paper_of(name: str) -> str:
    """The paper key (``seed00k``) an experiment belongs to, by its name."""
    for prefix, paper in _PAPER_OF_PREFIX.items():
        if name.startswith(prefix):
            return paper
    return "other"


def paper_name(paper: str) -> str:
    """The paper as headings and tables name it (``Bao, Crawshaw, Luo, Liu — ICML 2022``)."""
    return PAPER_NAMES.get(paper, "other experiments")


def experiment_configs(config_dir: str | Path | None = None, only: list[str] | None = None
                       ) -> list[tuple[str, dict[str, Any]]]:
    """``(name, config)`` of every built-in experiment (or every ``*.toml`` in ``config_dir``),
    in paper order.

    ``only`` keeps the named experiments (an unknown name raises, listing the valid ones).
    """
    if config_dir is None:
        configs = {name: load(name) for name in experiment_names()}
    else:
        configs = {path.stem: load(path) for path in sorted(Path(config_dir).glob("*.toml"))}
    if only:
        unknown = sorted(set(only) - set(configs))
        if unknown:
            raise ValueError(f"unknown experiment(s) {unknown}; valid: {sorted(configs)}")
        configs = {name: cfg for name, cfg in configs.items() if name in only}
    order = list(PAPERS)
    return sorted(configs.items(), key=lambda item: (
        order.index(paper_of(item[0])) if paper_of(item[0]) in order else len(order), item[0]))


@dataclass
class ExperimentResult:
    """One experiment's outcome in the report."""

    name: str
    config: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    reused: bool = False
    error: str = ""
    verdict: str = ""
    rule: str = ""
    figures: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: The reading of the paper that ran (:func:`fedcomp.config.readings`), what it follows,
    #: the reading it starts from, and for a diagnosis the one change it isolates.
    reading: str = AS_WRITTEN
    follows: str = "the paper as written"
    base: str = ""
    diagnosis: str = ""
    _checked: dict[str, Any] | None = field(default=None, init=False, repr=False,
                                            compare=False)

    @property
    def key(self) -> str:
        """Its folder in the report: ``NAME`` as written, ``NAME/READING`` in another reading."""
        return self.name if self.reading == AS_WRITTEN else f"{self.name}/{self.reading}"

    @property
    def anchor(self) -> str:
        """Its section's id on the page, ``NAME--READING`` (``NAME`` is the experiment's)."""
        return f"{self.name}--{self.reading}"

    def checked(self) -> dict[str, Any]:
        """The configuration validated, defaults filled in (once: every table and figure
        of the page reads it)."""
        if self._checked is None:
            self._checked = validate(self.config)
        return self._checked


#: An experiment's files the page links to, those its directory holds: the configuration
#: that ran (resolved: defaults filled in, ``--quick`` and ``--seeds`` applied), the
#: metrics of every evaluation, the final rows, the log and a failure's traceback.
LINKED_FILES = ("config.toml", "results.csv", "summary.json", "personal.csv", "log.txt",
                "error.txt")


def write_config(config: dict[str, Any], path: Path) -> None:
    """Write the configuration an experiment runs as TOML (what ``fedcomp show`` prints).

    A timing configuration is written as given (it has no defaults to fill in), and so is
    one that does not validate (the run reports why).
    """
    from .config import ConfigError, to_toml
    from .experiments import as_written

    if config.get("kind") == "timing":
        path.write_text(to_toml(config))
        return
    try:
        path.write_text(to_toml(as_written(validate(config))))
    except ConfigError:
        path.write_text(to_toml(config))


def git_commit() -> str:
    """The short commit of the checkout fedcomp is imported from, "+ uncommitted changes"
    when its tracked files differ; "not a git checkout" for an installed package (even one
    installed inside another repository's ignored virtual environment)."""
    import subprocess

    package = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=package, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != package.parent:
            return "not a git checkout"
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"{commit} + uncommitted changes" if dirty else commit


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_models() -> str:
    """The GPUs this machine has, by ``nvidia-smi`` (``"none"`` without one or the tool):
    the report's header names them, since a timing's verdict depends on the device."""
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return "none"
    try:
        listed = subprocess.run([tool, "--query-gpu=name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return "none (nvidia-smi failed)"
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    return ", ".join(names) or "none"


def environment(command: str | None = None) -> dict[str, str]:
    """The report's header: when, with what and on what it was made, and the command.

    PyTorch's version is read from its installed metadata (not imported: seconds).
    """
    import datetime
    import os
    import platform
    from importlib import metadata

    from . import __version__

    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "fedcomp": __version__,
        "git commit": git_commit(),
        "Python": platform.python_version(),
        "NumPy": np.__version__,
        "PyTorch": torch,
        "CPU": f"{cpu_model()}, {cores} cores" + (f" ({usable} usable)" if usable != cores
                                                   else ""),
        "GPU": gpu_models(),
        "command": command or "not recorded (run_report called from Python)",
    }


def run_or_reuse(name: str, config: dict[str, Any], out: Path, stream: TextIO,
                 run: Callable[..., Any] | None = None, jobs: int = 1) -> ExperimentResult:
    """Run one experiment into ``out`` unless a finished run of the same config is there.

    A finished run is a ``summary.json`` beside a ``report.json`` recording the same
    configuration; anything else in ``out`` is an interrupted or different run and is
    rerun. Exceptions are caught and recorded (``error``), so one failure loses nothing
    else. ``jobs`` worker processes run its runs (the numbers do not depend on it).
    """
    from .experiments import read_summary, run_experiment

    run = run or run_experiment
    result = ExperimentResult(name, config)
    marker = out / "report.json"
    wanted = json.loads(json.dumps(to_jsonable(config), default=str))
    if marker.exists() and (out / "summary.json").exists():
        done = json.loads(marker.read_text())
        if done.get("config") == wanted:
            result.rows, result.seconds, result.reused = read_summary(out), done["seconds"], True
            return result
    marker.unlink(missing_ok=True)
    tic = time.perf_counter()
    try:
        _run_resuming(run, config, out, stream, jobs)
        result.rows = read_summary(out)
    except Exception as exc:  # noqa: BLE001 — recorded in the report, the others go on
        result.error = f"{type(exc).__name__}: {exc}"
        (out / "error.txt").write_text(traceback.format_exc())
    result.seconds = time.perf_counter() - tic
    if not result.error:
        marker.write_text(json.dumps({"config": wanted, "seconds": result.seconds}, indent=1))
    return result


def _run_resuming(run: Callable[..., Any], config: dict[str, Any], out: Path,
                  stream: TextIO, jobs: int = 1) -> None:
    """Run ``config`` into ``out``, resuming an interrupted run of the same configuration.

    The runner's ``runs.jsonl`` lists the runs that finished; ``resume=True`` keeps them and
    reruns the others. A directory of another configuration (or of a timing experiment,
    which has no runs to keep) is cleared and run from the start.
    """
    timing = config.get("kind") == "timing"
    options: dict[str, Any] = {} if timing or jobs == 1 else {"jobs": jobs}
    if (out / "runs.jsonl").exists() and not timing:
        try:
            run(config, out, progress=False, stream=stream, resume=True, **options)
            return
        except ConfigMismatchError:
            pass  # another configuration ran here: start afresh
    for stale in ("results.csv", "runs.jsonl", "summary.json"):
        (out / stale).unlink(missing_ok=True)
    run(config, out, progress=False, stream=stream, **options)


def judge(result: ExperimentResult) -> tuple[str, str]:
    """``(verdict, rule)`` of an experiment from its final rows (the module's rule)."""
    from .experiments import EXPERIMENTS, TIMINGS
    from .experiments._results import judge as judge_claim

    module = EXPERIMENTS.get(result.config.get("name", result.name))
    if result.error:
        return "not run (error)", ""
    if module is None or not hasattr(module, "verdict"):
        return "not assessed (no verdict rule)", ""
    if result.config.get("name") in TIMINGS:
        return module.verdict(result.rows, result.config)
    judged = judge_claim(result.checked(), result.rows)
    assert judged is not None  # the module has a rule
    return judged


def verdict_class(verdict: str) -> str:
    """``reproduced`` / ``partly`` / ``not-reproduced`` / ``other`` (for styling and counts)."""
    for word in ("reproduced", "partly", "not reproduced"):
        if verdict.startswith(word):
            return word.replace(" ", "-")
    return "other"


def _run_key(row: dict[str, Any]) -> tuple[str, str]:
    algorithm = str(row.get("algorithm", row.get("network", "?")))
    variant = row.get("variant", row.get("implementation"))  # a timing's prox implementation
    return algorithm, "" if variant is None or variant != variant else str(variant)


def table_columns(result: ExperimentResult) -> list[str]:
    """The numeric columns of the final-metrics table."""
    if result.config.get("kind") == "timing":
        return [k for k in result.rows[0]
                if k not in ("network", "implementation", "device", "status")]
    metrics = [m for m in result.checked()["metrics"] if m != "support"]
    # a gossip run evaluated at single nodes ([topology] evaluate_on) has node{n}_METRIC
    # columns beside (or instead of) the node average's
    keys = dict.fromkeys(k for row in result.rows for k in row)
    per_node = {m: [k for k in keys if re.fullmatch(rf"node\d+_{re.escape(m)}", k)]
                for m in metrics}
    reached = list(TARGET_COLUMNS) if result.checked().get("target") else []
    # a personalised run's per-client medians (fedcomp.experiments._execute.personal_summary)
    personal = [k for k in keys if k == "personal_wins" or (
        k.endswith("_median") and k.startswith(("personal_", "global_", "support_")))]
    return [*(c for m in metrics for c in (m, *per_node[m])), *reached, *personal,
            *COST_COLUMNS]


def seeds_best(rows: list[dict[str, Any]], metric: str) -> dict[tuple[str, str], int]:
    """Per run (algorithm, variant): in how many seeds its final ``metric`` was the best of
    the runs compared with it (same variant and gradient mode; ties count for each).

    Lower is better, or higher for accuracy-like metrics; a diverged run is never best.

    Examples
    --------
    >>> rows = [{"algorithm": a, "batch_size": "full", "seed": s, "optimality": v}
    ...         for s, (x, y) in enumerate([(1.0, 2.0), (3.0, 2.0), (1.0, 5.0)])
    ...         for a, v in (("za1", x), ("fedmid", y))]
    >>> seeds_best(rows, "optimality")
    {('za1', ''): 2, ('fedmid', ''): 1}
    """
    from .experiments._results import metric_mode

    sign = -1.0 if metric_mode(metric) == "max" else 1.0
    best: dict[tuple[str, str], int] = {_run_key(r): 0 for r in rows}
    contests: dict[tuple[str, str, Any], list[tuple[float, tuple[str, str]]]] = {}
    for row in rows:
        value = row.get(metric)
        score = float(value) if isinstance(value, int | float) else math.nan
        ok = row.get("status", "ok") == "ok" and math.isfinite(score)
        key = _run_key(row)
        contest = (key[1], str(row.get("batch_size", "")), row.get("seed"))
        contests.setdefault(contest, []).append((sign * score if ok else math.inf, key))
    for entries in contests.values():
        top = min(v for v, _ in entries)
        for value, key in entries:
            if math.isfinite(top) and value == top:
                best[key] += 1
    return best


def mean_std_table(result: ExperimentResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per run (algorithm, variant), each metric's mean ± std over seeds.

    Diverged runs are counted in a last column and left out of the statistics. With
    several seeds a column counts the seeds in which the run's main metric was the best of
    its comparison (:func:`seeds_best`): the verdicts judge every seed too.
    """
    columns = table_columns(result) if result.rows else []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in result.rows:
        groups.setdefault(_run_key(row), []).append(row)
    variants = any(key[1] for key in groups)
    several = any(len(rows) > 1 for rows in groups.values())
    timing = result.config.get("kind") == "timing"
    metric = "" if timing or not result.rows else metric_of(result.checked()["metrics"])
    won = seeds_best(result.rows, metric) if several and metric else {}
    header = ["algorithm", *(["variant"] if variants else []), "seeds", *columns,
              *([f"seeds best ({metric})"] if won else []), "diverged"]
    body = []
    for (algorithm, variant), rows in groups.items():
        ok = [r for r in rows if r.get("status", "ok") == "ok"]
        cells = [algorithm, *([variant] if variants else []), str(len(rows))]
        for column in columns:
            values = np.array([float(r[column]) for r in ok
                               if isinstance(r.get(column), int | float)], dtype=float)
            cells.append(format_mean_std(values))
        if won:
            cells.append(f"{won[(algorithm, variant)]} of {len(rows)}")
        cells.append(str(len(rows) - len(ok)))
        body.append(cells)
    return header, body


def format_mean_std(values: np.ndarray) -> str:
    """``mean ± std`` (population std over seeds; just the value for one seed; "—" if none)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return "—"
    mean = float(values.mean())
    if values.size == 1:
        return _number(mean)
    return f"{_number(mean)} ± {_number(float(values.std()))}"


def _number(value: float) -> str:
    if value == 0 or (abs(value) >= 1e-2 and abs(value) < 1e5):
        return f"{value:.4g}"
    return f"{value:.3e}"


def main_metric(config: dict[str, Any]) -> str:
    """The metric of an experiment's figures: optimality when there is an x*, else its first."""
    return metric_of(validate(config)["metrics"])


def draw_figures(result: ExperimentResult, out: Path) -> list[str]:
    """Write the experiment's figures into ``out``, each as SVG and PNG; the PNGs' names.

    A metric no run records (all NaN: a test accuracy without a test split) gets no figure,
    and a variant that does not record it no panel (:func:`fedcomp.plotting.panels_of`).
    """
    matplotlib = require("matplotlib", "fedcomp.report")
    matplotlib.use("Agg")
    from .plotting import has_values, read_results

    if result.error or result.config.get("kind") == "timing":
        return draw_timing_figure(result, out) if not result.error else []
    rows = read_results(out / "results.csv")
    if has_values(rows, "epsilon"):
        # private runs at several epsilons: one utility-against-epsilon line per algorithm
        # (a per-round figure would draw every (algorithm, epsilon) pair at once)
        return [draw_privacy_figure(result, rows, out)]
    names = []
    metrics = result.checked()["metrics"]
    metric = metric_of(metrics)
    if not has_values(rows, metric):
        metric = "objective"  # as plot_results' fallback: no x* recorded
    for stem, x_axis in X_AXES:
        if x_axis == "floats" and not any(r.get("floats_up", 0) for r in rows):
            continue  # nothing communicated (e.g. all gossip counters zero)
        names.append(_figure(out, metric, x_axis, stem, title_of(result)))
    if _has_simulated_time(rows):  # an event-clock experiment: its claim is per simulated time
        simulated = [_figure(out, key, "sim_time", "simtime", title_of(result))
                     for key in dict.fromkeys([metric, "objective"])
                     if (key in metrics or key == metric) and has_values(rows, key)]
        names = [*simulated, *names]
    for extra in ("test_accuracy", "l2_error", "support_f1", "prox_grad_norm"):
        if extra != metric and extra in metrics and has_values(rows, extra):
            names.append(_figure(out, extra, "round", "rounds", title_of(result)))
    if (out / "personal.csv").is_file():  # personalised runs: every client's models
        names.append(draw_personal_figure(result, out))
    return names


def draw_personal_figure(result: ExperimentResult, out: Path) -> str:
    """Every client of every seed, per run label: the relative gain of its personal model
    on its own objective over the global model's, and the two models' support F1 where
    the clients have true models (``personal.csv``); ``fig_personal.svg`` / ``.png``."""
    import csv

    plt = require("matplotlib.pyplot", "fedcomp.report")
    from .plotting import color_of, save_figure

    with (out / "personal.csv").open() as f:
        rows = list(csv.DictReader(f))
    labels = list(dict.fromkeys(r["algorithm"] for r in rows))
    f1 = "personal_support_f1" in rows[0]
    fig, axes = plt.subplots(1, 2 if f1 else 1, figsize=(9.5 if f1 else 5.5, 3.6),
                             layout="constrained", squeeze=False)

    def values(label: str, key: str) -> list[float]:
        return [float(r[key]) for r in rows if r["algorithm"] == label]

    gains = [[(g - p) / abs(g) for p, g in zip(values(label, "personal_objective"),
                                               values(label, "global_objective"),
                                               strict=True)] for label in labels]
    axes[0, 0].boxplot(gains, tick_labels=labels)
    axes[0, 0].axhline(0.0, color="black", linewidth=0.8)
    axes[0, 0].set_ylabel("(global − personal) / global objective")
    axes[0, 0].set_title("each client's own objective")
    if f1:
        at = np.arange(len(labels))
        for offset, key, name in ((-0.18, "personal_support_f1", "personal"),
                                  (0.18, "global_support_f1", "global")):
            axes[0, 1].boxplot([values(label, key) for label in labels], positions=at + offset,
                               widths=0.3, tick_labels=[""] * len(labels),
                               patch_artist=True, boxprops={"facecolor": color_of(name)})
        axes[0, 1].set_xticks(at, labels)
        axes[0, 1].set_ylabel("support F1 against the client's own model")
        axes[0, 1].set_title("personal (left) and global (right) models")
    for ax in axes.ravel():
        ax.tick_params(axis="x", labelrotation=20)
    fig.suptitle(f"{title_of(result)}: every client of every seed")
    for suffix in (".svg", ".png"):
        save_figure(fig, out / f"fig_personal{suffix}")
    plt.close(fig)
    return "fig_personal.png"


def final_by_label(rows: list[dict[str, Any]], key: str) -> dict[str, dict[float, float]]:
    """Each run label's final ``key`` (at its last evaluated round), by seed."""
    last: dict[tuple[str, float], dict[str, Any]] = {}
    for row in rows:
        run = (str(row["algorithm"]), float(row.get("seed", 0.0)))
        if run not in last or row["round"] >= last[run]["round"]:
            last[run] = row
    out: dict[str, dict[float, float]] = {}
    for (label, seed), row in last.items():
        out.setdefault(label, {})[seed] = float(row.get(key, math.nan))
    return out


def draw_privacy_figure(result: ExperimentResult, rows: list[dict[str, Any]], out: Path,
                        metric: str = "objective") -> str:
    """The excess of each private run's final ``metric`` over its algorithm's non-private
    run, against the ``ε`` it spent: one line per registered algorithm (median over seeds
    of the per-seed excess, min–max bars), log–log; written as
    ``fig_{metric}_epsilon.svg`` and ``.png``. An algorithm without a non-private run has
    nothing to be compared with and is left out."""
    plt = require("matplotlib.pyplot", "fedcomp.report")
    from .plotting import color_of, save_figure

    finals, epsilons = final_by_label(rows, metric), final_by_label(rows, "epsilon")
    entries = result.checked()["algorithms"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name in dict.fromkeys(e["name"] for e in entries):
        plain = [e.get("label", name) for e in entries if e["name"] == name
                 and "privacy" not in e and e.get("label", name) in finals]
        private = [e.get("label", name) for e in entries if e["name"] == name
                   and "privacy" in e and e.get("label", name) in finals]
        if not plain or not private:
            continue
        base = finals[plain[0]]
        points = []
        for label in private:
            # seed by seed: the private and the non-private run saw the same data
            excess = np.array([v - base[seed] for seed, v in finals[label].items()
                               if seed in base])
            points.append((float(np.median(list(epsilons[label].values()))),
                           np.median(excess), excess.min(), excess.max()))
        points.sort()
        eps, mid, low, high = (np.asarray(v) for v in zip(*points, strict=True))
        ax.errorbar(eps, mid, yerr=[mid - low, high - mid], color=color_of(name), marker="o",
                    capsize=3, label=name)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-4)
    if all(line.get_ydata().min() >= 0 for line in ax.get_lines() if len(line.get_ydata())):
        ax.set_ylim(bottom=0)  # no private run beat its non-private one: no negative axis
    ax.set_xlabel("ε spent (at the runs' δ)")
    ax.set_ylabel(f"final {metric.replace('_', ' ')} − non-private run's")
    ax.set_title(f"{title_of(result)}: what privacy costs")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    for suffix in (".svg", ".png"):
        save_figure(fig, out / f"fig_{metric}_epsilon{suffix}")
    plt.close(fig)
    return f"fig_{metric}_epsilon.png"


def title_of(result: ExperimentResult) -> str:
    """How figures name an experiment's run: ``NAME``, ``NAME (as_run)`` in another reading."""
    return result.name if result.reading == AS_WRITTEN else f"{result.name} ({result.reading})"


def _figure(out: Path, metric: str, x_axis: str, stem: str, name: str) -> str:
    """Draw ``metric`` against ``x_axis`` as ``fig_{metric}_{stem}.svg`` and ``.png``."""
    plt = require("matplotlib.pyplot", "fedcomp.report")
    from .plotting import results_figure, save_figure

    fig = results_figure(out / "results.csv", metric, x_axis,
                         f"{name}: {metric.replace('_', ' ')}", fallback=False)
    for suffix in (".svg", ".png"):
        save_figure(fig, out / f"fig_{metric}_{stem}{suffix}")
    plt.close(fig)
    return f"fig_{metric}_{stem}.png"


def _has_simulated_time(rows: list[dict[str, Any]]) -> bool:
    """Whether the runs carry a simulated clock (``compute_times``): a finite ``sim_time``."""
    return any(isinstance(r.get("sim_time"), float) and math.isfinite(r["sim_time"])
               for r in rows)


def _mark_paper_ratios(ax: Any, result: ExperimentResult, rows: list[dict[str, Any]],
                       ratios: list[str], width: float) -> None:
    """The paper's ratios (the module's ``PAPER_RATIOS``, ResNet-18) as black bars' tops."""
    from .experiments import EXPERIMENTS

    paper = getattr(EXPERIMENTS.get(result.name), "PAPER_RATIOS", None)
    networks = [str(r["network"]) for r in rows]
    if not paper or "resnet18" not in networks:
        return
    at = networks.index("resnet18")
    for j, key in enumerate(ratios):
        name = key.removesuffix("_ratio")
        if name in paper:
            ax.plot([at + j * width], [paper[name]], marker="_", markersize=22,
                    markeredgewidth=2.5, color="black", linestyle="none",
                    label="paper, ResNet-18" if j == 0 else None)


def draw_timing_figure(result: ExperimentResult, out: Path) -> list[str]:
    """Write :func:`timing_figure` as ``fig_ratios.svg`` and ``.png``; the PNG's name."""
    plt = require("matplotlib.pyplot", "fedcomp.report")
    from .plotting import save_figure

    fig = timing_figure(result)
    for suffix in (".svg", ".png"):
        save_figure(fig, out / f"fig_ratios{suffix}")
    plt.close(fig)
    return ["fig_ratios.png"]


def timing_figure(result: ExperimentResult) -> Any:
    """Bars of prox time / forward-backward time per network and penalty (log scale), with
    the paper's ratios marked where the module gives them."""
    matplotlib = require("matplotlib", "fedcomp.report")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result.rows
    ratios = [k for k in rows[0] if k.endswith("_ratio")]
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    width = 0.8 / max(1, len(ratios))
    for j, key in enumerate(ratios):
        xs = np.arange(len(rows)) + j * width
        ax.bar(xs, [float(r[key]) for r in rows], width, label=key.removesuffix("_ratio"))
    ax.set_xticks(np.arange(len(rows)) + width * (len(ratios) - 1) / 2,
                  [str(r["network"]) for r in rows])
    _mark_paper_ratios(ax, result, rows, ratios, width)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("prox time / forward-backward time (ratio)")
    ax.set_xlabel("network")
    ax.set_title(f"{result.name}: one prox vs one forward-backward pass")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)  # beside the bars, never over one
    return fig


def run_report(out_dir: str | Path, *, quick: bool = False, only: list[str] | None = None,
               seeds: list[int] | None = None, config_dir: str | Path | None = None,
               configs: list[tuple[str, dict[str, Any]]] | None = None,
               stream: TextIO | None = None, command: str | None = None,
               only_readings: list[str] | None = None, jobs: int = 1
               ) -> list[ExperimentResult]:
    """Run (or reuse) every experiment in each of its readings and write ``index.html``
    and ``report.md``.

    Parameters
    ----------
    out_dir : path
        The report directory; experiment ``NAME`` runs into ``out_dir/NAME`` as written and
        into ``out_dir/NAME/READING`` in each other reading of its ``[readings]``.
    quick : bool
        Apply each config's ``[quick]`` reductions (:func:`fedcomp.config.quick_config`).
    only : list of str, optional
        Experiment names to include (default: every config).
    seeds : list of int, optional
        Overrides every config's seeds.
    config_dir : path
        A folder of ``*.toml`` configs to report on instead of the built-in experiments.
    configs : list of (name, config), optional
        The experiments themselves instead of ``config_dir``'s files.
    stream : text stream, optional
        Progress and the experiments' tables (default: stderr).
    command : str, optional
        The command line that made the report, for its header (``fedcomp report`` passes
        its own; :func:`environment`).
    only_readings : list of str, optional
        Only these readings (and the bases they start from; default: every reading,
        diagnoses included).
    jobs : int, default 1
        Worker processes per experiment (:func:`jobs_for`: 1 where a verdict compares wall
        times). The numbers do not depend on it.

    Returns
    -------
    list of ExperimentResult
    """
    # every experiment's figures need matplotlib: refuse before hours of runs, not after
    check_installed(["matplotlib"], "fedcomp report (its figures)")
    stream = stream or sys.stderr
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    selected = configs if configs is not None else experiment_configs(config_dir, only)
    every = configs if configs is not None else experiment_configs(config_dir)
    stale = stale_folders(out, {name: set(readings(raw)) for name, raw in every})
    if stale:
        listed = ", ".join(str(path.relative_to(out)) for path in stale)
        raise ValueError(f"{out} holds run folders no configuration names: {listed}. A report "
                         "would mix them with what the configs run: delete them (rm -r) or "
                         "name them as a reading in their experiment's config")
    if only_readings:
        known = {reading for _, raw in selected for reading in readings(raw)}
        unknown = sorted(set(only_readings) - known)
        if unknown:
            raise ValueError(f"unknown reading(s) {unknown}; the experiments have "
                             f"{sorted(known)}")
    todo = [(name, raw, reading) for name, raw in selected
            for reading in reading_names(raw, only_readings)]
    results: list[ExperimentResult] = []
    header = environment(command)
    started = time.perf_counter()
    for index, (name, raw, reading) in enumerate(todo):
        config = reading_run_config(raw, reading, quick=quick, seeds=seeds)
        result = ExperimentResult(name, config, reading=reading, follows=readings(raw)[reading],
                                  base=reading_base(raw, reading) if reading != AS_WRITTEN
                                  else "", diagnosis=diagnoses(raw).get(reading, ""))
        elapsed = time.perf_counter() - started
        done = sum(not r.reused for r in results)
        eta = f", ETA {elapsed / done * (len(todo) - index):.0f}s" if done else ""
        print(f"[{index + 1}/{len(todo)}] {result.key} (elapsed {elapsed:.0f}s{eta})",
              file=stream, flush=True)
        folder = out / result.key
        folder.mkdir(parents=True, exist_ok=True)
        write_config(config, folder / "config.toml")
        # appended: a reused experiment keeps the log of the run that made it
        with open(folder / "log.txt", "a") as log:
            ran = run_or_reuse(name, config, folder, log, jobs=jobs_for(name, jobs))
        result.rows, result.seconds, result.reused, result.error = (
            ran.rows, ran.seconds, ran.reused, ran.error)
        if not result.error:
            try:
                result.verdict, result.rule = judge(result)
                result.figures = draw_figures(result, folder)
            except Exception as exc:  # noqa: BLE001 — a broken rule or figure is reported
                result.error = f"{type(exc).__name__}: {exc}"
        if result.error:
            result.verdict = "not run (error)"
        result.files = [f for f in LINKED_FILES if (folder / f).is_file()
                        and (f != "error.txt" or result.error)]  # not an earlier run's
        state = "reused" if result.reused else f"{result.seconds:.0f}s"
        print(f"    {state}: {result.error or result.verdict}", file=stream, flush=True)
        results.append(result)
        write_report(out, results, quick, time.perf_counter() - started,
                     header=header)  # after each one
    return results


def stale_folders(out: Path, named: dict[str, set[str]]) -> list[Path]:
    """The folders of report directory ``out`` that no configuration names.

    ``named`` maps every experiment the report knows to its readings. A folder of ``out``
    is an experiment's run as written (its name is an experiment's), and a folder inside
    it one of its other readings; anything else — a reading or an experiment dropped from
    the configs, a typo — is stale: it would be linked and judged beside current runs.

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> for folder in ("seed000/as_run", "seed000/models", "seed000/old", "gone"):
    ...     (out / folder).mkdir(parents=True)
    >>> [str(p.relative_to(out)) for p in stale_folders(out, {"seed000": {"as_run"}})]
    ['gone', 'seed000/old']
    """
    stale: list[Path] = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []:
        if folder.name not in named:
            stale.append(folder)
            continue
        # the runner's own folders (models, partial rows) sit beside the readings
        kept = named[folder.name] | set(RUN_FOLDERS)
        stale.extend(sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in kept))
    return stale


def reading_names(config: dict[str, Any], only: list[str] | None = None) -> list[str]:
    """The readings of ``config`` the report runs: :data:`AS_WRITTEN`, then the others in
    the order the configuration declares them; ``only`` keeps the named ones (and the
    bases they start from, whose verdicts theirs are read against)."""
    names = list(readings(config))
    if not only:
        return names
    keep = set(only)
    for name in only:
        while name in names and name != AS_WRITTEN:
            name = reading_base(config, name)
            keep.add(name)
    return [name for name in names if name in keep]


def reading_run_config(raw: dict[str, Any], reading: str, *, quick: bool = False,
                       seeds: list[int] | None = None) -> dict[str, Any]:
    """The configuration the report runs for ``reading`` of ``raw``: the reading's
    assignments, then the ``[quick]`` sizes (``quick``), then ``seeds`` (not for a timing
    experiment, which has none). As written, the configuration without its ``[readings]``."""
    if reading == AS_WRITTEN:
        config = {k: v for k, v in raw.items() if k != "readings"}
    else:
        config = reading_config(raw, reading)
    config = quick_config(config) if quick else {k: v for k, v in config.items()
                                                 if k != "quick"}
    if seeds is not None and config.get("kind") != "timing":
        config["seeds"] = list(seeds)
    return config


def jobs_for(name: str, jobs: int) -> int:
    """Worker processes for experiment ``name``: ``jobs``, but 1 for an experiment whose
    verdict compares the runs' wall times (its module's ``TIMED``): runs beside each other
    share the cores and would time each other."""
    from .experiments import EXPERIMENTS

    return 1 if getattr(EXPERIMENTS.get(name), "TIMED", False) else jobs


def _claim(config: dict[str, Any]) -> str:
    return str(config.get("claim") or config.get("description") or "")


def write_report(out: Path, results: list[ExperimentResult], quick: bool,
                 seconds: float, header: dict[str, str] | None = None) -> None:
    """Write ``index.html`` and ``report.md`` for ``results`` (``header``: :func:`environment`'s,
    taken now when not given)."""
    header = header or environment()
    (out / "report.md").write_text(markdown_report(results, quick, seconds, header))
    (out / "index.html").write_text(html_report(results, quick, seconds, header))


def _by_paper(results: list[ExperimentResult]) -> dict[str, dict[str, list[ExperimentResult]]]:
    """Paper → experiment → its readings' results, in the order they ran."""
    papers: dict[str, dict[str, list[ExperimentResult]]] = {}
    for result in results:
        papers.setdefault(paper_of(result.name), {}).setdefault(result.name, []).append(result)
    return papers


def _by_experiment(results: list[ExperimentResult]) -> dict[str, list[ExperimentResult]]:
    """Experiment → its readings' results (as written first, as they ran)."""
    groups: dict[str, list[ExperimentResult]] = {}
    for result in results:
        groups.setdefault(result.name, []).append(result)
    return groups


def readings_of(group: list[ExperimentResult]) -> list[ExperimentResult]:
    """The readings of the paper in an experiment's results (diagnoses left out)."""
    return [r for r in group if not r.diagnosis]


def diagnoses_of(group: list[ExperimentResult]) -> list[ExperimentResult]:
    """The diagnoses among an experiment's results (:func:`fedcomp.config.diagnoses`)."""
    return [r for r in group if r.diagnosis]


def _level(verdict: str) -> str:
    return verdict_class(verdict).replace("-", " ")


def readings_lead(group: list[ExperimentResult]) -> tuple[str, str]:
    """``(lead, sentence)``: whether an experiment's readings of the paper agree, and each
    one's verdict, e.g. ``("The readings disagree.", "As written: not reproduced; as_run
    (follows ...): reproduced.")``; the lead is empty where only one reading ran."""
    papers = readings_of(group)
    verdicts = "; ".join(f"{_reading_label(r)}"
                         f"{'' if r.reading == AS_WRITTEN else f' ({r.follows})'}: {r.verdict}"
                         for r in papers)
    if len(papers) < 2:
        return "", (f"One reading, {verdicts or 'none ran'} (the configuration declares no "
                    "other; its comments say whether official code exists).")
    levels = {verdict_class(r.verdict) for r in papers}
    lead = "The readings agree." if len(levels) == 1 else "The readings disagree."
    return lead, verdicts[:1].upper() + verdicts[1:] + "."


def diagnosis_sentences(group: list[ExperimentResult]) -> list[str]:
    """One sentence per diagnosis: what it changes, from which reading, and whether that
    alone moves the verdict (its level against its base's); a note where a reading's
    verdict is not "reproduced" and no diagnosis ran."""
    by_reading = {r.reading: r for r in group}
    sentences = []
    for d in diagnoses_of(group):
        base = by_reading.get(d.base)
        name = "as written" if d.base == AS_WRITTEN else d.base
        if d.error or base is None or base.error:
            effect = "cannot be compared (a run failed)"
        elif verdict_class(d.verdict) == verdict_class(base.verdict):
            effect = f"the verdict stays {_level(d.verdict)}"
        else:
            effect = f"moves the verdict from {_level(base.verdict)} to {_level(d.verdict)}"
        sentences.append(f"{d.diagnosis[:1].upper()}{d.diagnosis[1:]} ({d.reading}, from "
                         f"{name}): {effect} — {d.verdict}.")
    unresolved = [r for r in readings_of(group) if verdict_class(r.verdict) != "reproduced"]
    if unresolved and not sentences:
        sentences.append("No diagnosis ran: nothing here isolates what moves "
                         f"{'these verdicts' if len(unresolved) > 1 else 'this verdict'}.")
    return sentences


def _reading_title(r: ExperimentResult) -> str:
    if r.reading == AS_WRITTEN:
        return "As written — the paper's equations"
    kind = "diagnosis" if r.diagnosis else "reading"
    return f"{r.reading} ({kind}) — {r.follows}"


def _verdicts_cell(group: list[ExperimentResult]) -> str:
    """The other readings' verdicts, ``as_run: reproduced`` (``—`` when there is none)."""
    others = [r for r in readings_of(group) if r.reading != AS_WRITTEN]
    return "; ".join(f"{r.reading}: {r.verdict}" for r in others) or "—"


def _diagnoses_cell(group: list[ExperimentResult]) -> str:
    by_reading = {r.reading: r for r in group}
    found = diagnoses_of(group)
    moving = sum(1 for d in found if d.base in by_reading and not d.error
                 and verdict_class(d.verdict) != verdict_class(by_reading[d.base].verdict))
    return f"{len(found)} ({moving} move the verdict)" if found else "—"


def _seconds_cell(group: list[ExperimentResult]) -> str:
    seconds = sum(r.seconds for r in group)
    reused = all(r.reused for r in group)
    return f"{seconds:.0f}{' (reused)' if reused else ''}"


def _scale(quick: bool) -> str:
    return ("reduced sizes (`--quick`: each config's [quick] overrides)" if quick
            else "full sizes (the configs as written)")


def _time_spent(results: list[ExperimentResult], seconds: float) -> str:
    """How long the report took, and the experiments' own time when some were reused."""
    reused = sum(r.reused for r in results)
    if not reused:
        return f"{seconds:.0f} s in all."
    return (f"{seconds:.0f} s for this report, {reused} runs of an experiment reused from "
            f"earlier; they took {sum(r.seconds for r in results):.0f} s when they ran.")


#: How to read the report's numbers, printed above its summary table: the verdicts use the
#: median over seeds and every seed alone (:func:`fedcomp.experiments._verdict.over_seeds`),
#: which the mean ± std tables do not show; and what the readings are.
READING = ("Figures: median over seeds, min–max spread shaded; one color per algorithm "
           "throughout. Tables: final metrics, mean ± std over seeds. Verdicts: each "
           "experiment's rule applied to the final metrics' median over the seeds that "
           "converged and to every seed alone; a level (reproduced, partly) stands only when "
           "the median and at least two thirds of the seeds reach it; a method that diverged "
           "on any seed cannot win; a win over another run is sized seed by seed — the "
           "median paired relative difference must exceed its standard deviation over the "
           "seeds, else it is a tie, and every margin is printed with its rule. Readings: "
           "\"as written\" follows the paper's equations, "
           "\"as run\" the conventions of the authors' official code where it exists, each "
           "judged by the same rule; a diagnosis changes one thing to show what moves a "
           "verdict.")


def _files_md(r: ExperimentResult) -> str:
    return " · ".join(f"[{f}]({r.key}/{f})" for f in r.files)


def _reading_label(r: ExperimentResult) -> str:
    return "as written" if r.reading == AS_WRITTEN else r.reading


def _contents_md(name: str, group: list[ExperimentResult]) -> str:
    links = "; ".join(f"[{_reading_label(r)}](#{r.anchor}): {r.verdict}"
                      for r in readings_of(group))
    return f"  - [{name}](#{name}): {links}"


def markdown_report(results: list[ExperimentResult], quick: bool, seconds: float,
                    header: dict[str, str] | None = None) -> str:
    """The report as Markdown (images and files linked relative to the report directory).

    A header (what made the report: :func:`environment`), the contents (papers, then their
    experiments and each reading's verdict, linked), the summary table and a section per
    experiment: the claim, whether its readings agree, one sentence per diagnosis, then a
    subsection per reading (verdict, figures, table); explicit ``<a id>`` anchors, so that
    the links do not depend on a renderer's heading ids.
    """
    header = header or environment()
    lines = ["# fedcomp reproduction report", "", "| made with | |", "|---|---|"]
    lines += [f"| {key} | {f'`{value}`' if key == 'command' else value} |"
              for key, value in header.items()]
    papers = _by_paper(results)
    groups = _by_experiment(results)
    lines += ["", f"{len(groups)} experiments ({len(results)} runs of an experiment: readings "
              f"and diagnoses) at {_scale(quick)}; {_time_spent(results, seconds)}", "",
              READING, "", '<a id="contents"></a>', "", "## Contents", "",
              "- [Summary](#summary)"]
    for paper, experiments in papers.items():
        lines.append(f"- [{paper_name(paper)}](#paper-{paper})")
        lines += [_contents_md(name, group) for name, group in experiments.items()]
    lines += ["", '<a id="summary"></a>', "", "## Summary", "",
              "| experiment | paper | as written | other readings | diagnoses | time (s) |",
              "|---|---|---|---|---|---:|"]
    for name, group in groups.items():
        lines.append(f"| [{name}](#{name}) | {paper_name(paper_of(name))} | {group[0].verdict} | "
                     f"{_verdicts_cell(group)} | {_diagnoses_cell(group)} | "
                     f"{_seconds_cell(group)} |")
    lines += ["", BACK_MD]
    for paper, experiments in papers.items():
        lines += ["", f'<a id="paper-{paper}"></a>', "", f"## {paper_name(paper)}", "",
                  f"*{PAPERS.get(paper, 'Experiments of no paper above.')}*"]
        for name, group in experiments.items():
            lead, verdicts = readings_lead(group)
            lines += ["", f'<a id="{name}"></a>', "", f"### {name}", "",
                      f"**Claim.** {_claim(group[0].config)}", "",
                      f"**Readings.** {f'**{lead}** ' if lead else ''}{verdicts}"]
            diagnosed = diagnosis_sentences(group)
            if diagnosed:
                lines += ["", "**Diagnoses.**", "", *[f"- {s}" for s in diagnosed]]
            for r in group:
                lines += ["", f'<a id="{r.anchor}"></a>', "", f"#### {_reading_title(r)}", ""]
                if r.files:
                    lines += [f"Files: {_files_md(r)}", ""]
                if r.error:
                    lines += [f"**Error.** `{r.error}` (traceback in `{r.key}/error.txt`)", "",
                              BACK_MD]
                    continue
                lines += [f"**Verdict: {r.verdict}.** Rule: {r.rule}", ""]
                lines += [f"![{r.key} {fig}]({r.key}/{fig})" for fig in r.figures]
                header_row, body = mean_std_table(r)
                lines += ["", "| " + " | ".join(header_row) + " |",
                          "|" + "---|" * len(header_row)]
                lines += ["| " + " | ".join(row) + " |" for row in body]
                lines += ["", BACK_MD]
    return "\n".join(lines) + "\n"


#: The back-link after each section.
BACK_MD = "[↑ contents](#contents)"
_BACK_HTML = "<p class='back'><a href='#contents'>↑ contents</a></p>"

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin-top: 1.6em; }
h4 { margin: 1.4em 0 0.4em; color: #333; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.meta th, table.meta td { text-align: left; border: none; padding: 0.1em 0.8em 0.1em 0; }
table.meta th { color: #555; font-weight: normal; }
table.summary td, table.summary th { text-align: left; }
table.summary td:last-child, table.summary th:last-child { text-align: right; }
nav ol { padding-left: 1.4em; } nav li { margin: 0.15em 0; }
nav .verdict { font-weight: normal; font-size: 0.9em; }
.figures { display: flex; flex-wrap: wrap; gap: 0.6em; align-items: flex-start; }
.figures img { max-width: 100%; height: auto; display: block; }
.claim { background: #f5f5f5; padding: 0.5em 0.8em; border-left: 4px solid #888; }
.readings { padding: 0.5em 0.8em; border-left: 4px solid #4a6fa5; background: #f3f6fa; }
.readings ul { margin: 0.3em 0 0; }
.disagree { color: #cf222e; font-weight: bold; }
.paper { color: #555; font-style: italic; margin-top: -0.5em; }
.files { font-size: 0.9em; }
.verdict { font-weight: bold; }
.reproduced { color: #1a7f37; } .partly { color: #9a6700; }
.not-reproduced, .error { color: #cf222e; } .other { color: #555; }
.rule { color: #555; font-size: 0.9em; }
.back { font-size: 0.85em; text-align: right; margin: 0.4em 0 0; }
.back a, nav a, .files a { text-decoration: none; }
"""


def _html_table(header: list[str], body: list[list[str]], css: str = "") -> str:
    """A table of text cells (escaped here)."""
    return _raw_table([html.escape(h) for h in header],
                      [[html.escape(c) for c in row] for row in body], css)


def _raw_table(header: list[str], body: list[list[str]], css: str = "") -> str:
    """A table of HTML cells (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body)
    attribute = f" class='{css}'" if css else ""
    return f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _figure_html(key: str, png: str) -> str:
    """A figure as its SVG, the PNG beside it where the browser shows no SVG."""
    esc = html.escape
    svg = png.removesuffix(".png") + ".svg"
    return (f"<picture><source srcset='{esc(key)}/{esc(svg)}' type='image/svg+xml'>"
            f"<img src='{esc(key)}/{esc(png)}' alt='{esc(key)} {esc(png)}'></picture>")


def _readings_html(group: list[ExperimentResult]) -> str:
    """The box under an experiment's claim: do its readings agree, and its diagnoses."""
    esc = html.escape
    lead, verdicts = readings_lead(group)
    css = "disagree" if lead == "The readings disagree." else ""
    lead_html = f"<span class='{css}'>{esc(lead)}</span> " if lead else ""
    diagnosed = diagnosis_sentences(group)
    items = "".join(f"<li>{esc(s)}</li>" for s in diagnosed)
    return (f"<div class='readings'><b>Readings.</b> {lead_html}{esc(verdicts)}"
            + (f"<br><b>Diagnoses.</b><ul>{items}</ul>" if items else "") + "</div>")


def _reading_html(r: ExperimentResult) -> str:
    """One reading's subsection: files, verdict and rule, figures, table."""
    esc = html.escape
    parts = [f"<section id='{esc(r.anchor)}'><h4>{esc(_reading_title(r))}</h4>"]
    if r.files:
        links = " · ".join(f"<a href='{esc(r.key)}/{esc(f)}'>{esc(f)}</a>" for f in r.files)
        parts.append(f"<p class='files'>Files: {links}</p>")
    if r.error:
        parts.append(f"<p class='error'><b>Error.</b> {esc(r.error)} (traceback in "
                     f"{esc(r.key)}/error.txt)</p>")
    else:
        parts.append(f"<p><span class='verdict {verdict_class(r.verdict)}'>Verdict: "
                     f"{esc(r.verdict)}</span><br><span class='rule'>Rule: {esc(r.rule)}</span>"
                     "</p>")
        figures = "".join(_figure_html(r.key, fig) for fig in r.figures)
        parts.append(f"<div class='figures'>{figures}</div>")
        parts.append(_html_table(*mean_std_table(r)))
    parts.append(f"{_BACK_HTML}</section>")
    return "".join(parts)


def html_report(results: list[ExperimentResult], quick: bool, seconds: float,
                header: dict[str, str] | None = None) -> str:
    """The report as one HTML page (no scripts, no external resources): a header, the
    contents, the summary and a section per experiment, as :func:`markdown_report`."""
    esc = html.escape
    header = header or environment()
    meta = "".join(f"<tr><th>{esc(key)}</th><td>"
                   f"{f'<code>{esc(value)}</code>' if key == 'command' else esc(value)}"
                   f"</td></tr>" for key, value in header.items())
    papers = _by_paper(results)
    groups = _by_experiment(results)
    contents = ["<nav id='contents'><h2>Contents</h2><ol>",
                "<li><a href='#summary'>Summary of the verdicts</a></li>"]
    for paper, experiments in papers.items():
        contents.append(f"<li><a href='#paper-{esc(paper)}'>{esc(paper_name(paper))}</a><ol>")
        for name, group in experiments.items():
            links = "; ".join(
                f"<a href='#{esc(r.anchor)}'>{esc(_reading_label(r))}</a>: <span class='verdict "
                f"{verdict_class(r.verdict)}'>{esc(r.verdict)}</span>" for r in readings_of(group))
            contents.append(f"<li><a href='#{esc(name)}'>{esc(name)}</a> — {links}</li>")
        contents.append("</ol></li>")
    contents.append("</ol></nav>")
    summary = _raw_table(["experiment", "paper", "as written", "other readings", "diagnoses",
                          "time (s)"], [
        [f"<a href='#{esc(name)}'>{esc(name)}</a>",
         f"<a href='#paper-{esc(paper_of(name))}'>{esc(paper_name(paper_of(name)))}</a>",
         f"<span class='{verdict_class(group[0].verdict)}'>{esc(group[0].verdict)}</span>",
         esc(_verdicts_cell(group)), esc(_diagnoses_cell(group)), _seconds_cell(group)]
        for name, group in groups.items()], "summary")
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             "<title>fedcomp reproduction report</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>fedcomp reproduction report</h1>", f"<table class='meta'>{meta}</table>",
             f"<p>{len(groups)} experiments ({len(results)} runs of an experiment: readings "
             f"and diagnoses) at {esc(_scale(quick))}; {esc(_time_spent(results, seconds))}</p>",
             f"<p>{esc(READING)}</p>", *contents,
             "<h2 id='summary'>Summary of the verdicts</h2>", summary, _BACK_HTML]
    for paper, experiments in papers.items():
        parts.append(f"<section id='paper-{esc(paper)}'><h2>{esc(paper_name(paper))}</h2>")
        parts.append(f"<p class='paper'>{esc(PAPERS.get(paper, 'Experiments of no paper above.'))}"
                     "</p>")
        for name, group in experiments.items():
            parts.append(f"<section id='{esc(name)}'><h3>{esc(name)}</h3>")
            parts.append(f"<p class='claim'><b>Claim.</b> {esc(_claim(group[0].config))}</p>")
            parts.append(_readings_html(group))
            parts += [_reading_html(r) for r in group]
            parts.append("</section>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def exit_status(results: list[ExperimentResult]) -> int:
    """0 when every experiment ran, 1 when any failed."""
    return int(any(r.error for r in results))


__all__ = ["LINKED_FILES", "PAPERS", "PAPER_NAMES", "READING", "ExperimentResult",
           "draw_figures", "environment", "experiment_configs", "exit_status",
           "format_mean_std", "html_report", "judge", "markdown_report", "mean_std_table",
           "paper_name", "paper_of", "run_or_reuse", "run_report", "verdict_class",
           "write_config", "write_report"]
