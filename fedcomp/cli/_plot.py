"""``fedcomp plot``: the curves of one run directory, or of several overlaid."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._log import STDOUT
from ._common import log

#: The x axes of ``fedcomp plot`` (``sim_time``: runs with compute times or asynchrony).
PLOT_AXES = ["round", "wall_s", "floats", "floats_up", "grad_evals", "sim_time"]


def _axis_columns(axis: str) -> list[str]:
    """The ``results.csv`` columns an x axis of ``fedcomp plot`` is read from."""
    return ["floats_up", "floats_down"] if axis == "floats" else [axis]


def cmd_plot(args: argparse.Namespace) -> int:
    import csv

    from ..plotting import plot_results

    paths = [Path(d) / "results.csv" for d in args.dir]
    for results in paths:
        if not results.exists():
            log.error("%s not found; give directories written by 'fedcomp run'", results)
            return 2
        with results.open(newline="") as f:
            columns = next(csv.reader(f), [])
        if args.metric not in columns:  # the plot would fall back to another metric silently
            metrics = [c for c in columns if c not in ("algorithm", "method", "batch_size",
                                                       "variant", "seed", "round", "status")]
            log.error(f"no column {args.metric!r} in {results}; --metric takes one of "
                      f"{metrics}")
            return 2
        if not set(_axis_columns(args.x)) <= set(columns):  # e.g. sim_time: timed runs only
            axes = [a for a in PLOT_AXES if set(_axis_columns(a)) <= set(columns)]
            log.error(f"no column {args.x!r} in {results} (it has {columns}); --x takes one "
                      f"of {axes} for this run")
            return 2
    name = f"plot_{args.metric}_{args.x}.png"
    # one run: beside its results; several: here, not inside one of them
    out = Path(args.output) if args.output else (
        Path(args.dir[0]) / name if len(paths) == 1 else Path(name))
    plot_results(paths[0] if len(paths) == 1 else paths, out, metric=args.metric, x_axis=args.x)
    log.info("wrote %s", out, extra=STDOUT)
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp plot``: the directories, ``--metric``, ``--x``, ``--output``."""
    plot = sub.add_parser("plot", help="plot results.csv of a run directory, or overlay several")
    plot.add_argument("dir", nargs="+", help="directories written by 'fedcomp run'; several "
                      "are overlaid in one figure, each curve named RUN/algorithm")
    plot.add_argument("--metric", default="optimality", help="y axis (default optimality)")
    plot.add_argument("--x", default="round", choices=PLOT_AXES, help="x axis")
    plot.add_argument("--output", "-o", help="output PNG (default DIR/plot_METRIC_X.png; for "
                      "several directories ./plot_METRIC_X.png)")
    plot.set_defaults(func=cmd_plot)
