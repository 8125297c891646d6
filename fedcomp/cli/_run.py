"""``fedcomp run``: an experiment from a configuration, checked before anything is written,
run in worker processes or on a Ray cluster, resumable after an interruption
(``--resume``), or only planned (``--dry-run``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from .. import __version__
from .._lifetime import exit_code
from ._common import (
    DEFAULT_EXPERIMENT,
    _complete_config,
    _load_config,
    default_jobs,
    default_out,
    log,
)


def with_trackers(config: dict[str, Any], track: list[str] | None) -> dict[str, Any]:
    """``config`` with the trackers of ``--track tensorboard,mlflow`` turned on; a tracker
    the configuration's ``[tracking]`` table configures keeps its table (its MLflow store,
    its TensorBoard directory).

    Examples
    --------
    >>> with_trackers({"name": "x"}, ["tensorboard,mlflow"])["tracking"]
    {'tensorboard': True, 'mlflow': True}
    >>> store = {"tracking": {"mlflow": {"uri": "sqlite:///runs.db"}}}
    >>> with_trackers(store, ["mlflow"])["tracking"]
    {'mlflow': {'uri': 'sqlite:///runs.db'}}
    """
    from ..config import ConfigError
    from ..metrics._tracking import TRACKERS

    names = [name.strip() for text in track or [] for name in text.split(",") if name.strip()]
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(f"--track {name}: unknown tracker; valid: {sorted(TRACKERS)} "
                              "(comma-separated, e.g. --track tensorboard,mlflow)")
    if not names:
        return config
    tracking = dict(config.get("tracking") or {})
    for name in names:
        if not tracking.get(name):  # absent or off: on; a table stays as written
            tracking[name] = True
    return {**config, "tracking": tracking}


def resume_command(argv: list[str], out: Path) -> str:
    """The command line that resumes ``argv`` (a ``run``'s arguments) in ``out``: with
    ``--out`` named, or a new default directory would start every run again.

    Examples
    --------
    >>> resume_command(["run", "--seeds", "0"], Path("runs/seed000-1"))
    'fedcomp run --seeds 0 --out runs/seed000-1 --resume'
    """
    args = [a for a in argv if a != "--resume"]
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args += ["--out", str(out)]
    return "fedcomp " + " ".join(shlex.quote(a) for a in [*args, "--resume"])


def finished_count(out: Path) -> int:
    """How many runs ``out/runs.jsonl`` records as finished (0 when it does not exist)."""
    try:
        with (out / "runs.jsonl").open(encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def stopped_message(argv: list[str], out: Path) -> str:
    """What a run stopped midway (interrupted, its cluster lost) says it left: the finished
    runs kept in ``out`` and the command that resumes, or — before any run finished, when
    the runner removed what it had written — that nothing was kept and how to start again.

    Examples
    --------
    >>> print(stopped_message(["run", "--seeds", "0"], Path("/nonexistent/out")))
    no run had finished: nothing was kept (/nonexistent/out does not exist); start again with
      fedcomp run --seeds 0
    """
    if finished_count(out):
        return (f"finished runs are kept in {out}/ (results.csv, runs.jsonl); resume with\n"
                f"  {resume_command(argv, out)}")
    where = f"{out}/ holds no finished run" if out.exists() else f"{out} does not exist"
    again = [a for a in argv if a != "--resume"]
    return (f"no run had finished: nothing was kept ({where}); start again with\n"
            f"  fedcomp {' '.join(shlex.quote(a) for a in again)}")


#: The seeds of the default ``fedcomp run`` (no config named): one, about a minute on two
#: cores; ``fedcomp report`` runs the five of the configuration for its verdicts.
DEFAULT_RUN_SEEDS = [0]


def resolve_run(config: dict[str, Any], seeds: list[int] | None,
                sweep: list[tuple[str, list[str]]]) -> Any:
    """What ``fedcomp run`` will run, checked before anything is written: an
    :class:`~fedcomp.experiments.Experiment` (resolved once, then handed to the runner), or
    for a timing experiment (``kind = "timing"``) the configuration its module checked."""
    from ..config import ConfigError
    from ..experiments import resolve
    from ..experiments._catalog import timing_module

    if config.get("kind") != "timing":
        return resolve(config, seeds=seeds, sweep=sweep)
    if sweep or seeds is not None:
        raise ConfigError(f"{config.get('name')} is a timing experiment: no --seeds or --sweep")
    timing_module(config).check_config(config)
    return config


def idle_sweeps(config: dict[str, Any], sweep: list[tuple[str, list[str]]]) -> list[str]:
    """One warning per ``--sweep algorithm.PARAM`` that some algorithm of ``config`` does not
    take: those algorithms run identically for every value (``fedcomp best`` calls it a tie).

    Examples
    --------
    >>> cfg = {"algorithms": [{"name": "fedmid"}, {"name": "fast_fedda"}]}
    >>> for line in idle_sweeps(cfg, [("algorithm.client_lr", ["0.1", "1"]),
    ...                               ("rounds", ["5", "9"])]):
    ...     print(line.replace(" and runs", "\\n  and runs"))
    warning: --sweep algorithm.client_lr: fast_fedda does not take 'client_lr'
      and runs identically for each of its 2 values ('fedcomp best' reports a tie)
    """
    from ..algorithms import REGISTRY
    from ..config import algorithm_entries

    warnings = []
    for key, values in sweep:
        kind, _, param = key.partition(".")
        if kind != "algorithm" or len(values) < 2:
            continue
        idle = [e.get("label", e.get("name", "?")) for e in algorithm_entries(config)
                if param not in e and e.get("name") in REGISTRY
                and param not in REGISTRY.settable(e["name"])]
        if idle:
            names = ", ".join(dict.fromkeys(idle))
            warnings.append(f"warning: --sweep {key}: {names} "
                            f"{'does' if len(set(idle)) == 1 else 'do'} not take {param!r} and "
                            f"runs identically for each of its {len(values)} values "
                            "('fedcomp best' reports a tie)")
    return warnings


def dry_run(resolved: Any, out: Path) -> str:
    """What ``fedcomp run --dry-run`` prints: the resolved configuration as TOML (what
    ``fedcomp show`` prints, with --set, --reading and --seeds applied), then one line per
    planned run (the cells that identify it in ``results.csv``) and the output directory.
    Nothing is built, run or written."""
    from ..config import to_toml
    from ..experiments import Experiment, as_written, plan

    if not isinstance(resolved, Experiment):  # a timing experiment: its module plans it
        return (to_toml(resolved) + f"# a timing experiment (kind = \"timing\"): its module "
                f"times the runs; output would go to {out}/")
    runs = plan(resolved)
    lines = [to_toml(as_written(resolved.config)).rstrip("\n"), "",
             f"# planned: {len(runs)} runs ({len(resolved.settings)} settings x "
             f"{len(resolved.seeds)} seeds x their algorithms and gradient modes) -> {out}/"]
    for run in runs:
        cells = {**run.tags, "rounds": run.setting.rounds}  # a swept rounds is a tag already
        lines.append(" ".join(f"{key}={value}" for key, value in cells.items()))
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from ..config import parse_seeds, parse_sweep
    from ..experiments import Experiment, run_experiment
    from ..experiments._ray_executor import ClusterLostError

    config = with_trackers(_load_config(args.config, args.set, reading=args.reading),
                           args.track)
    seeds = parse_seeds(args.seeds) if args.seeds else None
    if args.config is None and seeds is None:
        seeds = DEFAULT_RUN_SEEDS
        log.info(f"the default run: {DEFAULT_EXPERIMENT} with seed 0 (about a minute on two "
                 f"cores); its five seeds: fedcomp run {DEFAULT_EXPERIMENT}, or fedcomp report "
                 f"--only {DEFAULT_EXPERIMENT} for the report's verdict")
    sweep = [parse_sweep(s) for s in args.sweep or []]
    resolved = resolve_run(config, seeds, sweep)  # a bad config fails before anything is written
    for warning in idle_sweeps(config, sweep):
        log.warning(warning.removeprefix("warning: "))
    out = Path(args.out) if args.out else default_out(config)
    if args.dry_run:
        print(dry_run(resolved, out))
        return 0
    if (out / "results.csv").exists() and not args.resume:
        log.error("%s/results.csv already exists; pass another --out, remove it, or --resume "
                  "to finish an interrupted run", out)
        return 2
    if args.ray_address and args.executor != "ray":
        log.error("--ray-address needs --executor ray")
        return 2
    if args.executor == "ray" and args.jobs is not None:
        log.error("--jobs sets local worker processes; with --executor ray the cluster runs "
                  "one run per free CPU (drop --jobs)")
        return 2
    jobs = args.jobs
    if args.executor == "ray":
        jobs = 1
    elif jobs is None:  # one worker per (setting, seed), at most one per core
        jobs = default_jobs(len(resolved.seeds) * len(resolved.settings)) if isinstance(
            resolved, Experiment) else 1
    elif jobs < 1:
        log.error("--jobs must be at least 1 (got %s)", jobs)
        return 2
    where = " (on Ray)" if args.executor == "ray" else (
        f" ({jobs} processes)" if jobs > 1 else "")
    log.info("fedcomp %s: running %s -> %s%s", __version__, config.get("name", "?"), out, where)
    try:
        summary = run_experiment(resolved, out, progress=not args.quiet and "auto", jobs=jobs,
                                 resume=args.resume, executor=args.executor,
                                 ray_address=args.ray_address)
    except KeyboardInterrupt as exc:
        argv = args.argv if args.argv is not None else sys.argv[1:]
        log.info("\ninterrupted: %s", stopped_message(argv, out))
        return exit_code(exc)
    except ClusterLostError as exc:
        argv = args.argv if args.argv is not None else sys.argv[1:]
        left = stopped_message(argv, out).replace("\n  ", " ")
        log.error("%s; restart the cluster: %s", exc, left)
        return 1
    log.info(f"results written to {out}/ (results.csv, config.json, models/, summary.md"
             f"{', plot.png' if (out / 'plot.png').exists() else ''})")
    log.info(f"next: fedcomp plot {out} (the curves); fedcomp.load_results({str(out)!r}) in "
             "Python (a pandas DataFrame)")
    failed = [r for r in summary if r.get("status", "ok") != "ok"]
    return 1 if failed else 0


def add_parser(sub: Any) -> None:
    """``fedcomp run``: its options and its epilog (seeds, sweeps, resume, errors)."""
    run = sub.add_parser(
        "run", help="run an experiment (default: the seed-000 comparison)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an experiment from a TOML config or a built-in name.",
        epilog="""\
seeds, jobs, sweeps:
  --seeds 0:5 runs the seeds in separate processes (default --jobs = min(seeds x settings,
  cores); each worker gets cores/jobs BLAS/torch threads); the numbers equal a --jobs 1 run.
  --sweep algorithm.client_lr=0.01,0.1 --sweep rounds=50,100 runs the grid (Cartesian
  product); algorithm.PARAM sets PARAM on every algorithm that accepts it,
  algorithms.LABEL.PARAM on one. The swept keys are columns of results.csv and of the
  summary; 'fedcomp best DIR --metric optimality' picks the best setting per algorithm.
  --executor ray sends every run to a Ray cluster (--ray-address or $RAY_ADDRESS; one run
  per free CPU): the same results.csv as --jobs 1, resumable the same way.

algorithm entries (--set and --sweep algorithms.X.PARAM=...):
  X is an entry's label (its name when it has none), and the change reaches the entries
  with that label in the base list and in every [[variants]] algorithms list; a name
  behind several labels (FedAvg as name = "fedprox", label = "fedavg", beside FedProx)
  is an error that lists the labels; '*' addresses every entry.

output and resume:
  each finished run's rows are appended to DIR/results.csv and the run is recorded in
  DIR/runs.jsonl. After a crash or Ctrl-C, the same command with --resume runs only what
  is missing (the config and sweep must match, and every kept run's data and backend, as
  read now: a changed data file is refused; more seeds may be added).
  Progress: one line per finished run (runs done/total, elapsed, ETA) on stderr, and with
  --jobs 1 on a terminal the per-run rounds/s line; --quiet prints neither.

errors:
  a bad config, value or missing file prints one 'error: ...' line and exits 2;
  FEDCOMP_DEBUG=1 shows the Python traceback instead.""")
    _complete_config(run.add_argument("config", nargs="?", help="CONFIG.toml or a built-in "
                                      "experiment name (default: seed000)"))
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="override a config value, e.g. --set rounds=100 "
                          "--set algorithms.za1.client_lr=0.5 (an algorithm's label; "
                          "repeatable)")
    run.add_argument("--seeds", metavar="START:STOP", help="seeds to run, e.g. 0:3 or 1,4 "
                     "(default: the config's; seed 0 when no config is named)")
    run.add_argument("--out", metavar="DIR", help="output directory (default runs/NAME-TIME)")
    run.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: "
                     "min(seeds x settings, cores); 1 runs in this process)")
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="where the runs execute: local processes (--jobs) or tasks on a "
                          "Ray cluster (ray; needs fedcomp[flower])")
    run.add_argument("--ray-address", metavar="HOST:PORT", help="the Ray cluster for "
                     "--executor ray (default $RAY_ADDRESS; without either, a Ray instance "
                     "on this machine)")
    run.add_argument("--sweep", action="append", metavar="KEY=V1,V2,...",
                     help="run a grid, e.g. --sweep algorithm.client_lr=0.01,0.03,0.1 "
                          "(repeatable: the Cartesian product)")
    run.add_argument("--resume", action="store_true", help="finish an interrupted run in "
                     "--out DIR: keep finished runs, rerun the rest")
    run.add_argument("--reading", metavar="NAME", help="run one of the config's [readings] "
                     "(e.g. as_run: the conventions of the authors' official code); default "
                     "as_written, the paper's equations")
    run.add_argument("--track", action="append", metavar="TRACKER,...",
                     help="also send every row to TensorBoard (OUT/tensorboard) and/or MLflow "
                          "(OUT/mlflow.db): tensorboard, mlflow; the config's [tracking] "
                          "table sets directories and stores")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument("--dry-run", action="store_true", help="print the resolved configuration "
                     "and the planned runs, then stop: nothing is run or written")
    run.set_defaults(func=cmd_run)
