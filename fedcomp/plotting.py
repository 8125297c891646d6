"""Figures from a ``results.csv``: log-scale metric curves, one panel per setting.

A setting is a gradient mode (full gradients or a batch size), and the variant when the
experiment has several. Within a panel a curve is an algorithm and, for a ``--sweep`` run,
one point of its grid (the swept keys of the run's ``config.json``).

Needs matplotlib (the ``plot`` extra); imported lazily by the CLI.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ._extras import require

#: One color per method, fixed for every figure of every experiment (and the report):
#: each paper's methods have fixed strong colors; the other registered algorithms follow
#: in registry order on the remaining distinct colors (tab20's, dark shades first).
COLORS = {"za1": "#d62728", "fedmid": "#1f77b4", "fedda": "#2ca02c", "fedavg": "#7f7f7f",
          "fedcanon": "#17becf", "feddr": "#8c564b", "fast_fedda": "#ff7f0e",
          "c_fedda": "#9467bd", "mc_fedda": "#e377c2", "fedprox": "#bcbd22"}
_PALETTE = ["#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#aec7e8",
            "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d",
            "#9edae5", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
_FALLBACK = _PALETTE[:6]  # colors of the settings of a sweep (one method, several labels)


def _registry_colors() -> dict[str, str]:
    from .algorithms import ALGORITHMS, DECENTRALIZED

    names = [n for n in [*ALGORITHMS, *DECENTRALIZED] if n not in COLORS]
    free = [c for c in _PALETTE if c not in COLORS.values()]
    return {**COLORS, **dict(zip(names, free, strict=False))}


def color_of(method: str) -> str:
    """The color of a method: the same in every figure (a registered algorithm has its own)."""
    colors = _registry_colors()
    if method in colors:
        return colors[method]
    return _PALETTE[sum(map(ord, method)) % len(_PALETTE)]


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``results.csv`` with numeric fields parsed."""
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key, value in row.items():
            try:
                row[key] = float(value) if value not in ("", None) else math.nan
            except ValueError:
                pass
    return rows


def choose_metric(rows: list[dict[str, Any]], preferred: str = "optimality") -> str:
    """``preferred`` if it has finite values, else ``objective``."""
    if any(isinstance(r.get(preferred), float) and math.isfinite(r[preferred]) for r in rows):
        return preferred
    return "objective"


def _panel(row: dict[str, Any]) -> tuple[str, str]:
    """The panel a results row belongs to: (variant or "", gradient mode)."""
    variant = row.get("variant", "")
    return ("" if variant is None or variant != variant else str(variant),
            str(row.get("batch_size", "full")))


#: Metrics drawn on a linear y axis (scores and counts); every other metric is log scale.
LINEAR_METRICS = ("support_f1", "rank", "nnz", "accuracy", "support_precision",
                  "support_recall", "train_accuracy", "test_accuracy", "sparsity")


#: Axis labels with units (x: what is spent; y: what the metric measures).
X_LABELS = {"round": "communication rounds", "wall_s": "wall time (s)",
            "floats": "floats communicated (up + down)", "floats_up": "floats uploaded",
            "sim_time": "simulated time (s)"}
Y_LABELS = {"optimality": "optimality ||x - x*|| / ||x*|| (||x - x*|| if x* = 0)",
            "objective": "objective F(x)", "suboptimality": "F(x) - F(x*)",
            "prox_grad_norm": "prox-gradient norm", "l2_error": "l2 error ||x - x_true||",
            "l1_error": "l1 error ||x - x_true||_1", "test_accuracy": "test accuracy (fraction)",
            "train_accuracy": "training accuracy (fraction)", "test_loss": "test loss",
            "training_loss": "training loss f(x)", "sparsity": "sparsity (fraction of zeros)",
            "nnz": "nonzero entries", "support_f1": "support F1", "rank": "rank",
            "operator_error": "spectral error ||X - X_true||_2", "lq_error": "||x - x_true||_q^2",
            "population_gap": "population gap f(x) - f(w*)",
            "consensus_error": "consensus error"}


#: The round axis's label when a panel holds asynchronous runs: their ``round`` is the
#: server step, one client's update each, while a synchronous round takes a whole cohort's.
ASYNC_ROUND_LABEL = ("server updates (synchronous: one round of clients;\n"
                     "asynchronous: one client's update)")


def is_async(row: dict[str, Any]) -> bool:
    """Whether a results row is an asynchronous run's (its ``max_delay`` is recorded).

    The runner writes ``max_delay`` (the largest staleness applied so far) for asynchronous
    runs only and leaves it empty in the synchronous rows of the same file.
    """
    value = row.get("max_delay")
    return isinstance(value, float) and math.isfinite(value)


def x_label(rows: list[dict[str, Any]], x_axis: str) -> str:
    """The x axis label of a panel of ``rows``.

    On the ``round`` axis a panel with asynchronous rows is labelled in server updates: an
    asynchronous run's row ``round`` counts single-client updates, so 1000 of them equal
    100 rounds of 10 clients; calling both "communication rounds" would hide that.
    """
    if x_axis == "round" and any(map(is_async, rows)):
        return ASYNC_ROUND_LABEL
    return X_LABELS.get(x_axis, x_axis)


def sweep_keys(results: str | Path) -> list[str]:
    """The swept columns of a run: the keys of ``config.json["sweep"]`` beside ``results``.

    Empty when there is no ``config.json`` (a results.csv copied on its own) or no sweep.
    """
    meta = Path(results).parent / "config.json"
    if not meta.is_file():
        return []
    try:
        sweep = json.loads(meta.read_text()).get("sweep")
    except (json.JSONDecodeError, AttributeError):  # not a run's config.json
        return []
    return list(sweep) if isinstance(sweep, dict) else []


def _setting_value(value: Any) -> str:
    """A swept value as the legend writes it (``0.01``, ``50``, ``l1``; floats from the CSV)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def curve_key(row: dict[str, Any], keys: list[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The curve a row belongs to within its panel: its algorithm and swept values.

    Every point of a ``--sweep`` grid is tagged with the same algorithm label and keeps
    its value in its own column; without the swept columns the grid's settings would be
    merged into one median curve, shaded as if they were seeds.
    """
    return str(row["algorithm"]), tuple((k, _setting_value(row.get(k, ""))) for k in keys)


def _setting_text(setting: tuple[tuple[str, str], ...]) -> str:
    """``client_lr=0.01 rounds=50``: ``algorithm.`` (every algorithm's parameter) dropped."""
    return " ".join(f"{k.removeprefix('algorithm.')}={v}" for k, v in setting)


def x_value(row: dict[str, Any], x_axis: str) -> float:
    """A row's position on ``x_axis``; ``floats`` is floats sent up plus floats sent down."""
    if x_axis == "floats":
        return float(row["floats_up"]) + float(row["floats_down"])
    return float(row[x_axis])


def seed_band(rows: list[dict[str, Any]], metric: str, x_axis: str
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One curve's ``(x, median, min, max, seeds)`` over seeds, evaluation by evaluation.

    Seeds are aligned by round (the evaluation they belong to), not by x value: on the
    wall-time axis every seed has its own times, and grouping by x would draw a curve that
    zig-zags from one seed to the next. The x of an evaluation is the median of the
    seeds' x values there.
    """
    by_round: dict[float, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        key = float(r["round"]) if "round" in r else x_value(r, x_axis)
        by_round[key][0].append(x_value(r, x_axis))
        by_round[key][1].append(float(r[metric]))
    evaluations = [by_round[k] for k in sorted(by_round)]
    xs = np.array([np.median(x) for x, _ in evaluations])
    ys = [np.array(y) for _, y in evaluations]
    seeds = max(len(y) for y in ys)
    return (xs, np.array([np.median(y) for y in ys]), np.array([y.min() for y in ys]),
            np.array([y.max() for y in ys]), seeds)


def plot_results(results: str | Path, out: str | Path, metric: str = "optimality",
                 x_axis: str = "round", title: str = "", fallback: bool = True) -> Path:
    """Plot ``metric`` against ``x_axis``, one panel per (variant, gradient mode).

    Curves are the median over seeds with the min–max spread shaded (:func:`seed_band`),
    one per algorithm and, for a ``--sweep`` run, per grid point (:func:`curve_key`; the
    legend names the swept values); the y axis is logarithmic except for
    :data:`LINEAR_METRICS`. A panel with asynchronous runs counts server updates on the
    round axis (:func:`x_label`). With ``fallback`` a metric without finite values is
    replaced by ``objective``. ``title`` is the figure's title; each panel is titled by its
    gradient mode. The figure is :func:`results_figure`'s.
    """
    plt = require("matplotlib.pyplot", "fedcomp.plotting")
    fig = results_figure(results, metric, x_axis, title, fallback)
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def results_figure(results: str | Path, metric: str = "optimality", x_axis: str = "round",
                   title: str = "", fallback: bool = True) -> Any:
    """The matplotlib ``Figure`` that :func:`plot_results` saves (same arguments)."""
    matplotlib = require("matplotlib", "fedcomp.plotting")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_results(results)
    if not rows:
        raise ValueError(f"{results}: no rows to plot")
    if fallback:
        metric = choose_metric(rows, metric)
    keys = sweep_keys(results)
    panels = sorted({_panel(r) for r in rows}, key=lambda p: (p[0], p[1] != "full", p[1]))
    # at most three panels a row: experiments with many variants wrap instead of stretching
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        panel_rows = [r for r in rows if _panel(r) == panel]
        curves: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]] = (
            defaultdict(list))
        methods: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        for r in panel_rows:
            key = curve_key(r, keys)
            methods[key] = str(r.get("method", key[0]))
            curves[key].append(r)
        modes_differ = len({p[1] for p in panels}) > 1
        # a sweep (one method, several labels or settings) needs a color per curve
        sweep = len(set(methods.values())) < len(methods)
        for index, (key, curve_rows) in enumerate(curves.items()):
            label, setting = key
            xs, mid, lo, hi, seeds = seed_band(curve_rows, metric, x_axis)
            color = _FALLBACK[index % len(_FALLBACK)] if sweep else color_of(methods[key])
            name = methods[key] if modes_differ else label
            ax.plot(xs, mid, color=color,
                    label=f"{name} {_setting_text(setting)}" if setting else name)
            if seeds > 1:
                ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_yscale("linear" if metric in LINEAR_METRICS else "log")
        if x_axis != "round":
            ax.set_xscale("log" if x_axis == "floats" else "linear")
        ax.set_xlabel(x_label(panel_rows, x_axis))
        ax.set_ylabel(Y_LABELS.get(metric, metric))
        variant, mode = panel
        # not `title`: that is the figure's, set below as its suptitle
        mode_title = "full gradients" if mode == "full" else f"minibatch {mode}"
        ax.set_title(f"{variant}: {mode_title}" if variant else mode_title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
