"""The ``fedcomp`` command line: ``run``, ``list``, ``plot``.

``fedcomp run`` with no configuration runs the built-in default, the seed-000 comparison
(ZA1 vs FedMiD vs FedDA, full gradients and minibatches), prints the table and writes
``results.csv``, ``config.json``, ``models/``, ``summary.md`` and ``plot.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from . import __version__


def _load_config(spec: str | None) -> dict[str, Any]:
    from .config import ConfigError, load
    from .experiments import EXPERIMENTS

    if spec is None:
        return dict(EXPERIMENTS["seed000"].CONFIG)
    if spec in EXPERIMENTS and not Path(spec).exists():
        return dict(EXPERIMENTS[spec].CONFIG)
    if not Path(spec).exists():
        raise ConfigError(f"{spec!r} is neither a config file nor a built-in experiment "
                          f"({', '.join(sorted(EXPERIMENTS))})")
    return load(spec)


def cmd_run(args: argparse.Namespace) -> int:
    from .config import apply_override, parse_seeds
    from .experiments import run_experiment

    config = _load_config(args.config)
    for assignment in args.set or []:
        config = apply_override(config, assignment)
    seeds = parse_seeds(args.seeds) if args.seeds else None
    out = Path(args.out) if args.out else Path("runs") / (
        f"{config.get('name', 'run')}-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "results.csv").exists():
        print(f"error: {out}/results.csv already exists; pass another --out or remove it",
              file=sys.stderr)
        return 2
    print(f"fedcomp {__version__}: running {config.get('name', '?')} -> {out}", file=sys.stderr)
    summary = run_experiment(config, out, seeds=seeds, progress=not args.quiet and "auto")
    print(f"results written to {out}/ (results.csv, config.json, models/, summary.md"
          f"{', plot.png' if (out / 'plot.png').exists() else ''})", file=sys.stderr)
    failed = [r for r in summary if r.get("status", "ok") != "ok"]
    return 1 if failed else 0


def _catalogue() -> dict[str, dict[str, str]]:
    from . import algorithms, data, losses, metrics, regularizers

    return {
        "algorithms": algorithms.DESCRIPTIONS,
        "regularizers": regularizers.DESCRIPTIONS,
        "losses": losses.DESCRIPTIONS,
        "datasets": data.DATASET_DESCRIPTIONS,
        "partitioners": data.PARTITIONER_DESCRIPTIONS,
        "metrics": metrics.DESCRIPTIONS,
    }


def cmd_list(args: argparse.Namespace) -> int:
    catalogue = _catalogue()
    kinds = [args.kind] if args.kind else list(catalogue)
    for kind in kinds:
        print(f"{kind}:")
        entries = catalogue[kind]
        width = max(map(len, entries), default=0)
        for name, text in entries.items():
            print(f"  {name.ljust(width)}  {text}")
        print()
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .plotting import plot_results

    results = Path(args.dir) / "results.csv"
    if not results.exists():
        print(f"error: {results} not found; give a directory written by 'fedcomp run'",
              file=sys.stderr)
        return 2
    out = Path(args.output) if args.output else Path(args.dir) / f"plot_{args.metric}_{args.x}.png"
    plot_results(results, out, metric=args.metric, x_axis=args.x)
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedcomp", description="Composite federated optimization: simulate, compare, plot.")
    parser.add_argument("--version", action="version", version=f"fedcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run an experiment (default: the seed-000 comparison)",
                         description="Run an experiment from a TOML config or a built-in name.")
    run.add_argument("config", nargs="?", help="CONFIG.toml or a built-in experiment name "
                     "(default: seed000)")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a config value, e.g. --set rounds=100 "
                          "--set algorithms.za1.client_lr=0.5 (repeatable)")
    run.add_argument("--seeds", metavar="START:STOP", help="seeds to run, e.g. 0:3 or 1,4")
    run.add_argument("--out", metavar="DIR", help="output directory (default runs/NAME-TIME)")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.set_defaults(func=cmd_run)

    lst = sub.add_parser("list", help="list algorithms, regularizers, losses, datasets, ...")
    lst.add_argument("kind", nargs="?", choices=["algorithms", "regularizers", "losses",
                                                 "datasets", "partitioners", "metrics"])
    lst.set_defaults(func=cmd_list)

    plot = sub.add_parser("plot", help="plot results.csv of a run directory")
    plot.add_argument("dir", help="a directory written by 'fedcomp run'")
    plot.add_argument("--metric", default="optimality", help="y axis (default optimality)")
    plot.add_argument("--x", default="round", choices=["round", "wall_s", "floats_up",
                                                       "grad_evals", "sim_time"],
                      help="x axis")
    plot.add_argument("--output", "-o", help="output PNG (default DIR/plot_METRIC_X.png)")
    plot.set_defaults(func=cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: rows evaluated so far are in results.csv", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
