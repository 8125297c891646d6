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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ._array import quiet_overflow
from ._extras import require
from .algorithms import REGISTRY

#: One color per method, fixed for every figure of every experiment (and the report): each
#: registry entry's ``color``. Each paper's methods keep their strong colors; the others are
#: chosen so that the methods one built-in experiment draws together are at least
#: :data:`MIN_COLOR_DISTANCE` apart (decentralized FedMiD and FedDA take dark shades of their
#: server counterparts' hues, DFedDA-GT a magenta that no dark green or teal beside DFedDA
#: could be).
COLORS: Mapping[str, str] = REGISTRY.facts("color")

#: Colors for curves that share a method (the points of a sweep, one method under several
#: labels) and for methods without a color of their own, tried in this order: strong,
#: dark enough to read on white.
SWEEP_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#bcbd22", "#17becf", "#000000", "#08306b", "#800000", "#008080", "#e6ab02",
                 "#66a61e", "#7f7f7f", "#e7298a", "#6a3d9a")

#: Two line colors closer than this CIE76 color difference (ΔE*ab, in CIELAB) are hard to
#: tell apart on white; tab10's closest pair (purple, pink) is 27.7 apart.
MIN_COLOR_DISTANCE = 25.0


def color_of(method: str) -> str:
    """The color of a method: the same in every figure (a registered algorithm has its own)."""
    if method in COLORS:
        return COLORS[method]
    return SWEEP_PALETTE[sum(map(ord, method)) % len(SWEEP_PALETTE)]


def _lab(color: str) -> np.ndarray:
    """CIELAB (D65) coordinates of a ``#rrggbb`` color."""
    rgb = np.array([int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                       [0.0193, 0.1192, 0.9505]])
    xyz = to_xyz @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def color_distance(a: str, b: str) -> float:
    """The CIE76 difference ΔE*ab of two ``#rrggbb`` colors (about 2.3: just noticeable).

    Examples
    --------
    >>> round(color_distance("#9467bd", "#e377c2"), 1)
    27.7
    """
    return float(np.linalg.norm(_lab(a) - _lab(b)))


def curve_colors(curves: list[tuple[str, str]]) -> list[str]:
    """A color for each curve ``(label, method)`` of one figure, all pairwise distinct.

    A curve takes its label's color when the label is a method's (``fedavg``: FedProx with
    mu = 0 drawn as FedAvg), else its method's when no other curve has that method. Curves
    sharing a method (a sweep) and colors within :data:`MIN_COLOR_DISTANCE` of one already
    taken get the first :data:`SWEEP_PALETTE` color far enough from every color taken (the
    farthest when none is).
    """
    methods = [method for _, method in curves]
    own: list[str | None] = [
        COLORS[label] if label in COLORS
        else color_of(method) if methods.count(method) == 1 else None
        for label, method in curves]
    taken: list[str] = []

    def far(color: str) -> bool:
        return all(color_distance(color, t) >= MIN_COLOR_DISTANCE for t in taken)

    for index, color in enumerate(own):
        if color is not None and color not in taken and far(color):
            taken.append(color)
        else:
            own[index] = None
    for index, color in enumerate(own):
        if color is None:
            free = [c for c in SWEEP_PALETTE if c not in taken and far(c)]
            own[index] = free[0] if free else max(
                SWEEP_PALETTE, key=lambda c: min((color_distance(c, t) for t in taken),
                                                 default=math.inf))
            taken.append(own[index])  # type: ignore[arg-type]
    return [c for c in own if c is not None]


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
    mode = row.get("batch_size", "full")
    return ("" if variant is None or variant != variant else str(variant),
            "full" if mode is None or mode != mode else str(mode))


#: Metrics drawn on a linear y axis (scores and counts); every other metric is log scale.
LINEAR_METRICS = ("support_f1", "rank", "nnz", "accuracy", "support_precision",
                  "support_recall", "train_accuracy", "test_accuracy", "sparsity")


#: Axis labels with units (x: what is spent; y: what the metric measures).
X_LABELS = {"round": "communication rounds", "wall_s": "wall time (s)",
            "floats": "floats communicated (up + down)", "floats_up": "floats uploaded",
            "sim_time": "simulated time (s)"}
Y_LABELS = {"optimality": "optimality ‖x − x*‖ / ‖x*‖ (‖x − x*‖ if x* = 0)",
            "objective": "objective F(x)", "suboptimality": "suboptimality F(x) − F(x*)",
            "prox_grad_norm": "prox-gradient norm", "l2_error": "ℓ₂ error ‖x − x_true‖₂",
            "l1_error": "ℓ₁ error ‖x − x_true‖₁", "test_accuracy": "test accuracy (fraction)",
            "train_accuracy": "training accuracy (fraction)", "test_loss": "test loss",
            "training_loss": "training loss f(x)", "sparsity": "sparsity (fraction of zeros)",
            "nnz": "nonzero entries", "support_f1": "support recovery F1", "rank": "rank",
            "operator_error": "spectral error ‖X − X_true‖₂",
            "lq_error": r"$\ell_q$ error $\|x - x_{\mathrm{true}}\|_q^2$",
            "population_gap": "population gap f(x) − f(w*)",
            "consensus_error": "consensus error"}

#: Metrics on one scale whatever the variant (relative errors, fractions, scores): the
#: panels of different variants share their y axis; other metrics share it only between
#: the panels of one variant (full gradients against minibatches).
COMPARABLE_METRICS = ("optimality", "support_f1", "accuracy", "support_precision",
                      "support_recall", "train_accuracy", "test_accuracy", "sparsity")


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


def run_labels(paths: list[Path]) -> list[str]:
    """How an overlay names each run: its directory's name, or the path given where two
    directories share a name (``a/run`` and ``b/run``)."""
    names = [path.parent.name or str(path.parent) for path in paths]
    return [name if names.count(name) == 1 else str(path.parent)
            for name, path in zip(names, paths, strict=True)]


def _rows_of(item: Any) -> list[dict[str, Any]] | None:
    """The rows of an in-memory result — a :class:`~fedcomp.RunResult` (its ``history``), a
    pandas DataFrame (:meth:`RunResult.to_frame`, :func:`fedcomp.load_results`,
    :func:`fedcomp.compare`) or a list of row dicts — or ``None`` for a path."""
    if isinstance(item, str | Path):
        return None
    if hasattr(item, "history") and isinstance(item.history, list):
        return [dict(row) for row in item.history]
    if hasattr(item, "to_dict") and hasattr(item, "columns"):
        return [dict(row) for row in item.to_dict("records")]
    if isinstance(item, list) and all(isinstance(row, dict) for row in item):
        return [dict(row) for row in item]
    raise TypeError(f"cannot plot a {type(item).__name__}: give a results.csv or its "
                    "directory, a RunResult, a DataFrame or a list of rows (or a dict or "
                    "list of them)")


def _path_of(item: str | Path) -> Path:
    path = Path(item)
    return path / "results.csv" if path.is_dir() else path


def overlay_rows(results: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows and swept keys of one result, or of several overlaid.

    A result is a ``results.csv`` (or the directory holding it), a
    :class:`~fedcomp.RunResult`, a DataFrame or a list of rows; several are a list of them
    or a dict ``{name: result}``. Several keep their curves apart by prefixing each
    algorithm label with the result's name (:func:`run_labels` for paths, the dict's keys,
    else ``run1``, ``run2``, ...): ``runA/za1`` and ``runB/za1``. A row without an
    ``algorithm`` column (a bare ``simulate`` run) is labelled by that name, or ``run``.
    """
    if isinstance(results, dict):
        items, names = list(results.values()), [str(name) for name in results]
    else:
        single = isinstance(results, str | Path) or _is_one_result(results) or \
            not isinstance(results, list | tuple)
        items = [results] if single else list(results)
        paths = [_path_of(i) for i in items if isinstance(i, str | Path)]
        path_names = iter(run_labels(paths))
        names = [next(path_names) if isinstance(i, str | Path) else f"run{k + 1}"
                 for k, i in enumerate(items)]
    if not items:
        raise ValueError("no results to plot")
    rows: list[dict[str, Any]] = []
    keys: list[str] = []
    for item, name in zip(items, names, strict=True):
        these = _rows_of(item)
        if these is None:
            these = read_results(_path_of(item))
            keys += [k for k in sweep_keys(_path_of(item)) if k not in keys]
        for row in these:
            if "algorithm" not in row:
                row["algorithm"] = name if len(items) > 1 else "run"
            elif len(items) > 1:
                row["algorithm"] = f"{name}/{row['algorithm']}"
        rows += these
    return rows, keys


def _is_one_result(item: Any) -> bool:
    """A RunResult, a DataFrame or a list of rows (not a list of results)."""
    return (hasattr(item, "history") or hasattr(item, "columns")
            or (isinstance(item, list) and bool(item) and isinstance(item[0], dict)))


@quiet_overflow
def plot_results(results: Any, out: str | Path, metric: str = "optimality",
                 x_axis: str = "round", title: str = "", fallback: bool = True) -> Path:
    """Plot ``metric`` against ``x_axis``, one panel per (variant, gradient mode).

    ``results`` is a ``results.csv`` path or its directory, a :class:`~fedcomp.RunResult`,
    a DataFrame or a list of rows, or a list or dict of them to overlay in one figure
    (each curve then named ``RUN/algorithm``, :func:`overlay_rows`).

    Curves are the median over seeds with the min–max spread shaded (:func:`seed_band`),
    one per algorithm and, for a ``--sweep`` run, per grid point (:func:`curve_key`; the
    legend names the swept values); the y axis is logarithmic except for
    :data:`LINEAR_METRICS`. A panel with asynchronous runs counts server updates on the
    round axis (:func:`x_label`). With ``fallback`` a metric without finite values is
    replaced by ``objective``. ``title`` is the figure's title; each panel is titled by its
    gradient mode. The figure is :func:`results_figure`'s; the format is ``out``'s suffix
    (``.png``, ``.svg``, ...).
    """
    plt = require("matplotlib.pyplot", "fedcomp.plotting")
    fig = results_figure(results, metric, x_axis, title, fallback)
    out = Path(out)
    save_figure(fig, out)
    plt.close(fig)
    return out


def save_figure(fig: Any, out: Path, dpi: int = 110) -> None:
    """Save ``fig`` to ``out``; an SVG without a date and with fixed ids, so that the same
    figure gives the same file (a committed report does not change when redrawn)."""
    matplotlib = require("matplotlib", "fedcomp.plotting")
    with matplotlib.rc_context({"svg.hashsalt": "fedcomp"}):
        if out.suffix == ".svg":
            fig.savefig(out, metadata={"Date": None})
        else:
            fig.savefig(out, dpi=dpi)


def has_values(rows: list[dict[str, Any]], metric: str) -> bool:
    """Whether some row has a finite ``metric`` (else a figure of it would be empty)."""
    return any(isinstance(r.get(metric), float) and math.isfinite(r[metric]) for r in rows)


def _mode_order(mode: str) -> tuple[int, float, str]:
    """Full gradients first, then minibatches by batch size (``b20`` before ``b100``)."""
    if mode == "full":
        return 0, 0.0, mode
    digits = "".join(ch for ch in mode if ch.isdigit() or ch == ".")
    try:
        return 1, float(digits), mode
    except ValueError:
        return 2, 0.0, mode


def panels_of(rows: list[dict[str, Any]], metric: str) -> list[tuple[str, str]]:
    """The panels of a figure of ``metric``, in reading order.

    Variants in the order the runs wrote them (the config's), within a variant full
    gradients before minibatches by batch size; a panel whose runs never record a finite
    ``metric`` (a test accuracy on a data set without a test split) is left out.
    """
    order: dict[tuple[str, str], None] = {}
    for r in rows:
        if isinstance(r.get(metric), float) and math.isfinite(r[metric]):
            order.setdefault(_panel(r))
    variants = list(dict.fromkeys(variant for variant, _ in order))
    return sorted(order, key=lambda p: (variants.index(p[0]), _mode_order(p[1])))


def _legend_name(row: dict[str, Any], modes_differ: bool) -> str:
    """A curve's name: its algorithm label, less the gradient mode when panels are per mode
    (``za1_full`` and ``za1_b20`` are both ``za1``, in their own panels)."""
    label = str(row["algorithm"])
    if modes_differ:
        return label.removesuffix(f"_{_panel(row)[1]}")
    return label


#: Line styles and markers that tell curves apart without colour (a grey-scale print, a
#: reader who does not see the difference of two hues, two curves on top of each other).
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def line_style(index: int) -> dict[str, Any]:
    """The line style, marker and drawing order of the ``index``-th curve of a figure: no
    two of the first 8 curves share a marker, and the first is drawn on top, thicker.

    Examples
    --------
    >>> line_style(0)["zorder"] > line_style(1)["zorder"], line_style(1)["linestyle"]
    (True, '--')
    """
    return {"linestyle": LINE_STYLES[index % len(LINE_STYLES)],
            "marker": MARKERS[index % len(MARKERS)], "markersize": 4,
            "linewidth": 2.2 if index == 0 else 1.5, "zorder": 3 if index == 0 else 2}


def results_figure(results: Any, metric: str = "optimality", x_axis: str = "round",
                   title: str = "", fallback: bool = True) -> Any:
    """The matplotlib ``Figure`` that :func:`plot_results` saves (same arguments).

    Panels are :func:`panels_of`'s, at most three a row, with a shared y axis where they
    are compared (every panel for :data:`COMPARABLE_METRICS`, else the panels of one
    variant); one legend for the whole figure, below the panels (a curve has the same
    color in every panel: :func:`curve_colors`).

    Raises
    ------
    ValueError
        When no run records a finite ``metric`` (and ``fallback`` is off).
    """
    matplotlib = require("matplotlib", "fedcomp.plotting")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, keys = overlay_rows(results)
    if not rows:
        raise ValueError(f"{results}: no rows to plot")
    if fallback:
        metric = choose_metric(rows, metric)
    panels = panels_of(rows, metric)
    if not panels:
        raise ValueError(f"{results}: no run records a finite {metric!r}; nothing to plot")
    modes_differ = len({mode for _, mode in panels}) > 1
    curves: dict[tuple[str, str], dict[tuple[str, tuple[tuple[str, str], ...]],
                                        list[dict[str, Any]]]] = {p: defaultdict(list)
                                                                  for p in panels}
    for r in rows:  # a curve is an algorithm label (and a sweep's setting) within a panel
        if _panel(r) in curves:
            curves[_panel(r)][(_legend_name(r, modes_differ), curve_key(r, keys)[1])].append(r)
    names: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}  # curve → its method
    for panel in panels:
        for key, curve_rows in list(curves[panel].items()):
            if not has_values(curve_rows, metric):  # a metric this algorithm does not record
                del curves[panel][key]
                continue
            names.setdefault(key, str(curve_rows[0].get("method", curve_rows[0]["algorithm"])))
    colors = dict(zip(names, curve_colors(
        [(f"{name} {_setting_text(setting)}" if setting else name, method)
         for (name, setting), method in names.items()]), strict=True))
    # at most three panels a row: experiments with many variants wrap instead of stretching
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.6 * nrows + 0.9),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.remove()
    shared: dict[str, Any] = {}  # the first axes of a variant (or of all, comparable metrics)
    handles: dict[str, Any] = {}
    for index, (ax, panel) in enumerate(zip(axes.flat, panels, strict=False)):
        group = "" if metric in COMPARABLE_METRICS else panel[0]
        if group in shared:
            ax.sharey(shared[group])
        else:
            shared[group] = ax
        panel_rows = [r for rs in curves[panel].values() for r in rs]
        # the first curve (the configuration's first algorithm: the paper's own method in
        # the built-in experiments) is drawn last, on top and thicker
        for key, curve_rows in reversed(curves[panel].items()):
            name, setting = key
            xs, mid, lo, hi, seeds = seed_band(curve_rows, metric, x_axis)
            label = f"{name} {_setting_text(setting)}" if setting else name
            style = line_style(list(names).index(key))
            (line,) = ax.plot(xs, mid, color=colors[key], label=label,
                              markevery=max(1, len(xs) // 8), **style)
            handles.setdefault(label, line)
            if seeds > 1:
                ax.fill_between(xs, lo, hi, color=colors[key], alpha=0.2, linewidth=0)
        ax.set_yscale("linear" if metric in LINEAR_METRICS else "log")
        if x_axis != "round":
            ax.set_xscale("log" if x_axis == "floats" else "linear")
        ax.set_xlabel(x_label(panel_rows, x_axis))
        if index % ncols == 0:  # the metric is the same in every panel: once a row
            ax.set_ylabel(Y_LABELS.get(metric, metric))
        variant, mode = panel
        # not `title`: that is the figure's, set below as its suptitle
        mode_title = "full gradients" if mode == "full" else f"minibatch {mode}"
        ax.set_title(f"{variant}: {mode_title}" if variant else mode_title)
        ax.grid(True, which="both", alpha=0.3)
    # below the panels, never over a curve; as many entries a line as fit the width (an
    # entry: a 0.8 in line and gap, 0.075 in a character at the default 10 pt)
    entry = 0.8 + 0.075 * max(map(len, handles))
    # in the curves' order (they were drawn in reverse, the first on top)
    order = [f"{name} {_setting_text(setting)}" if setting else name
             for name, setting in names]
    handles = {label: handles[label] for label in order if label in handles}
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", frameon=False,
               ncols=max(1, min(len(handles), int(5.2 * ncols / entry))))
    if title:
        fig.suptitle(title)
    return fig
