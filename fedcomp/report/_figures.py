"""The report's figures of one experiment: its metrics against rounds, floats and time, the
personalised and private runs' own figures, and a timing experiment's ratios.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..config import AS_WRITTEN
from ..experiments._results import main_metric as metric_of
from ._result import ExperimentResult

#: Figures per experiment: (file stem, x axis).
X_AXES = (("rounds", "round"), ("floats", "floats"), ("time", "wall_s"))


#: Colors a report's PNG keeps: line plots need few, and a palette PNG is a quarter of an
#: RGBA one (the site's report stays under its size limit; the SVGs keep every shade).
PNG_COLORS = 64


def compact_png(path: Path) -> None:
    """Rewrite the PNG at ``path`` with a palette of :data:`PNG_COLORS` colors
    (deterministic: the same figure gives the same file)."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=PNG_COLORS)
    small.save(path, "PNG", optimize=True)


def draw_figures(result: ExperimentResult, out: Path) -> list[str]:
    """Write the experiment's figures into ``out``, each as SVG and a compact PNG
    (:func:`compact_png`); the PNGs' names.

    A metric no run records (all NaN: a test accuracy without a test split) gets no figure,
    and a variant that does not record it no panel (:func:`fedcomp.plotting.panels_of`).
    """
    names = _draw_figures(result, out)
    for name in names:
        compact_png(out / name)
    return names


def _draw_figures(result: ExperimentResult, out: Path) -> list[str]:
    matplotlib = require("matplotlib", "fedcomp.report")
    matplotlib.use("Agg")
    from ..plotting import has_values, read_results

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
    from ..plotting import color_of, save_figure

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
    from ..plotting import color_of, save_figure

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
    from ..plotting import results_figure, save_figure

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
    from ..experiments import EXPERIMENTS

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
    from ..plotting import save_figure

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
