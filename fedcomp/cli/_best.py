"""``fedcomp best``: the best swept setting per algorithm of a run directory."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_best(args: argparse.Namespace) -> int:
    from ..experiments import best_settings, best_table

    best = best_settings(args.dir, args.metric, mode=args.mode, aggregate=args.aggregate)
    print(best_table(best, args.metric))
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp best``: the directory, ``--metric``, ``--mode``, ``--aggregate``."""
    best = sub.add_parser("best", help="the best swept setting per algorithm of a run directory",
                          description="Per algorithm, the --sweep setting whose final metric "
                                      "(median over seeds) is best; diverged settings rank "
                                      "last.")
    best.add_argument("dir", help="a directory written by 'fedcomp run --sweep ...'")
    best.add_argument("--metric", default="optimality", help="a results.csv column "
                      "(default optimality)")
    best.add_argument("--mode", choices=["min", "max"], help="direction (default: max for "
                      "accuracy-like metrics such as test_accuracy, support_f1; else min)")
    best.add_argument("--aggregate", choices=["median", "mean"], default="median",
                      help="how seeds combine (default median)")
    best.set_defaults(func=cmd_best)
