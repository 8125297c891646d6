"""Figures from a ``results.csv``: log-scale metric curves, one panel per setting.

A setting is a gradient mode (full gradients or a batch size), and the variant when the
experiment has several.

Needs matplotlib (the ``plot`` extra); imported lazily by the CLI.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

#: One color per method, used consistently across every figure.
COLORS = {"za1": "#d62728", "fedmid": "#1f77b4", "fedda": "#2ca02c", "fedavg": "#7f7f7f"}
_FALLBACK = ["#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e"]


def color_of(method: str) -> str:
    """The color of a method (stable across figures)."""
    if method in COLORS:
        return COLORS[method]
    return _FALLBACK[sum(map(ord, method)) % len(_FALLBACK)]


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


def plot_results(results: str | Path, out: str | Path, metric: str = "optimality",
                 x_axis: str = "round", title: str = "", fallback: bool = True) -> Path:
    """Plot ``metric`` against ``x_axis``, one panel per (variant, gradient mode).

    Curves are the mean over seeds with the min–max spread shaded; the y axis is
    logarithmic except for :data:`LINEAR_METRICS`. With ``fallback`` a metric without
    finite values is replaced by ``objective``. ``title`` is the figure's title; each
    panel is titled by its gradient mode. The figure is :func:`results_figure`'s.
    """
    import matplotlib.pyplot as plt

    fig = results_figure(results, metric, x_axis, title, fallback)
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def results_figure(results: str | Path, metric: str = "optimality", x_axis: str = "round",
                   title: str = "", fallback: bool = True) -> Any:
    """The matplotlib ``Figure`` that :func:`plot_results` saves (same arguments)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_results(results)
    if not rows:
        raise ValueError(f"{results}: no rows to plot")
    if fallback:
        metric = choose_metric(rows, metric)
    panels = sorted({_panel(r) for r in rows}, key=lambda p: (p[0], p[1] != "full", p[1]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        curves: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        methods: dict[str, str] = {}
        for r in rows:
            if _panel(r) != panel:
                continue
            label = str(r["algorithm"])
            methods[label] = str(r.get("method", label))
            curves[label][r[x_axis]].append(r[metric])
        modes_differ = len({p[1] for p in panels}) > 1
        # a sweep (one method, several labels) needs a color per label, not per method
        sweep = len(set(methods.values())) < len(methods)
        for index, (label, points) in enumerate(curves.items()):
            xs = np.array(sorted(points))
            ys = [np.array(points[x], dtype=float) for x in xs]
            mean = np.array([v.mean() for v in ys])
            lo, hi = np.array([v.min() for v in ys]), np.array([v.max() for v in ys])
            color = _FALLBACK[index % len(_FALLBACK)] if sweep else color_of(methods[label])
            ax.plot(xs, mean, color=color, label=methods[label] if modes_differ else label)
            if any(len(v) > 1 for v in ys):
                ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_yscale("linear" if metric in LINEAR_METRICS else "log")
        ax.set_xlabel({"round": "communication rounds", "wall_s": "wall time (s)",
                       "floats_up": "floats uploaded",
                       "sim_time": "simulated time"}.get(x_axis, x_axis))
        ax.set_ylabel({"optimality": "optimality  ||x - x*|| / ||x*||"}.get(metric, metric))
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
