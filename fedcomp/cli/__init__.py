"""The ``fedcomp`` command line: ``run``, ``show``, ``report``, ``list``, ``best``, ``plot``,
``data``, ``flower``, ``bench``.

``fedcomp run`` with no configuration runs the built-in default, the seed-000 comparison
(ZA1 vs FedMiD vs FedDA, full gradients and minibatches), prints the table and writes
``results.csv``, ``config.json``, ``models/``, ``summary.md`` and ``plot.png``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from .._lifetime import exit_code, signals_as_interrupt

#: Environment variable: when set, ``fedcomp`` shows the traceback of an error instead
#: of the one-line ``error: ...`` message.
DEBUG_ENV = "FEDCOMP_DEBUG"


#: The x axes of ``fedcomp plot`` (``sim_time``: runs with compute times or asynchrony).
PLOT_AXES = ["round", "wall_s", "floats", "floats_up", "grad_evals", "sim_time"]

#: The experiment ``fedcomp run`` runs without a configuration.
DEFAULT_EXPERIMENT = "seed000"


def _load_config(spec: str | None, assignments: list[str] | None = None,
                 quick: bool = False, reading: str | None = None) -> dict[str, Any]:
    """The configuration a command names (a file or a built-in name): in ``reading`` (one
    of its ``[readings]``), at its ``[quick]`` sizes, then ``--set`` applied."""
    from ..config import apply_override, load, quick_config, reading_config

    config = load(spec or DEFAULT_EXPERIMENT)
    if reading is not None:
        config = reading_config(config, reading)
    if quick:
        config = quick_config(config)
    for assignment in assignments or []:
        config = apply_override(config, assignment)
    return config


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


def default_jobs(n_tasks: int) -> int:
    """Worker processes by default: one per (setting, seed), at most one per core."""
    return max(1, min(n_tasks, os.cpu_count() or 1))


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


#: The seeds of the default ``fedcomp run`` (no config named): one, about a minute on two
#: cores; ``fedcomp report`` runs the five of the configuration for its verdicts.
DEFAULT_RUN_SEEDS = [0]


def default_out(config: dict[str, Any], kind: str = "") -> Path:
    """``runs/NAME-[KIND]TIME``: the output directory of a run without ``--out``; ``name``
    must be a plain file name (``"../../x"`` would leave ``runs/``)."""
    from ..experiments._setting import check_name

    name = config.get("name", "run")
    check_name(name)
    return Path("runs") / f"{name}-{kind}{time.strftime('%Y%m%d-%H%M%S')}"


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
        print(f"the default run: {DEFAULT_EXPERIMENT} with seed 0 (about a minute on two "
              f"cores); its five seeds: fedcomp run {DEFAULT_EXPERIMENT}, or fedcomp report "
              f"--only {DEFAULT_EXPERIMENT} for the report's verdict", file=sys.stderr)
    sweep = [parse_sweep(s) for s in args.sweep or []]
    resolved = resolve_run(config, seeds, sweep)  # a bad config fails before anything is written
    for warning in idle_sweeps(config, sweep):
        print(warning, file=sys.stderr)
    out = Path(args.out) if args.out else default_out(config)
    if args.dry_run:
        print(dry_run(resolved, out))
        return 0
    if (out / "results.csv").exists() and not args.resume:
        print(f"error: {out}/results.csv already exists; pass another --out, remove it, or "
              "--resume to finish an interrupted run", file=sys.stderr)
        return 2
    if args.ray_address and args.executor != "ray":
        print("error: --ray-address needs --executor ray", file=sys.stderr)
        return 2
    if args.executor == "ray" and args.jobs is not None:
        print("error: --jobs sets local worker processes; with --executor ray the cluster "
              "runs one run per free CPU (drop --jobs)", file=sys.stderr)
        return 2
    jobs = args.jobs
    if args.executor == "ray":
        jobs = 1
    elif jobs is None:  # one worker per (setting, seed), at most one per core
        jobs = default_jobs(len(resolved.seeds) * len(resolved.settings)) if isinstance(
            resolved, Experiment) else 1
    elif jobs < 1:
        print(f"error: --jobs must be at least 1 (got {jobs})", file=sys.stderr)
        return 2
    where = " (on Ray)" if args.executor == "ray" else (
        f" ({jobs} processes)" if jobs > 1 else "")
    print(f"fedcomp {__version__}: running {config.get('name', '?')} -> {out}{where}",
          file=sys.stderr)
    try:
        summary = run_experiment(resolved, out, progress=not args.quiet and "auto", jobs=jobs,
                                 resume=args.resume, executor=args.executor,
                                 ray_address=args.ray_address)
    except KeyboardInterrupt as exc:
        argv = args.argv if args.argv is not None else sys.argv[1:]
        print(f"\ninterrupted: finished runs are kept in {out}/ (results.csv, runs.jsonl); "
              f"resume with\n  {resume_command(argv, out)}", file=sys.stderr)
        return exit_code(exc)
    except ClusterLostError as exc:
        argv = args.argv if args.argv is not None else sys.argv[1:]
        print(f"error: {exc}; finished runs are kept in {out}/ (results.csv, runs.jsonl): "
              f"restart the cluster and resume with: {resume_command(argv, out)}",
              file=sys.stderr)
        return 1
    print(f"results written to {out}/ (results.csv, config.json, models/, summary.md"
          f"{', plot.png' if (out / 'plot.png').exists() else ''})", file=sys.stderr)
    print(f"next: fedcomp plot {out} (the curves); fedcomp.load_results({str(out)!r}) in "
          "Python (a pandas DataFrame)", file=sys.stderr)
    failed = [r for r in summary if r.get("status", "ok") != "ok"]
    return 1 if failed else 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print an experiment's configuration: resolved (defaults filled in) or as shipped."""
    from ..config import experiment_source, to_toml
    from ..experiments import as_written, validate

    if args.source:
        if args.set or args.quick or args.reading:
            raise ValueError("--source prints the file as shipped: leave out --set, --quick "
                             "and --reading")
        print(experiment_source(args.config), end="")
        return 0
    config = _load_config(args.config, args.set, quick=args.quick, reading=args.reading)
    if config.get("kind") == "timing":
        from ..experiments._catalog import timing_module

        timing_module(config).check_config(config)
        print(to_toml(config), end="")
        return 0
    print(to_toml(as_written(validate(config))), end="")
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    from ..experiments import best_settings, best_table

    best = best_settings(args.dir, args.metric, mode=args.mode, aggregate=args.aggregate)
    print(best_table(best, args.metric))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..config import parse_seeds
    from ..report import exit_status, run_report

    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    seeds = parse_seeds(args.seeds) if args.seeds else None
    scale = "reduced sizes (--quick)" if args.quick else "full sizes"
    print(f"fedcomp {__version__}: report of every experiment config at {scale} -> "
          f"{args.out}/ (finished experiments there are reused)", file=sys.stderr)
    only_readings = ([name.strip() for name in args.readings.split(",") if name.strip()]
                     if args.readings else None)
    if args.jobs is not None and args.jobs < 1:
        print(f"error: --jobs must be at least 1 (got {args.jobs})", file=sys.stderr)
        return 2
    jobs = args.jobs or default_jobs(2)
    command = shlex.join(["fedcomp", "report", *(["--quick"] if args.quick else []),
                          "--out", args.out, *(["--only", args.only] if args.only else []),
                          *(["--seeds", args.seeds] if args.seeds else []),
                          *(["--readings", args.readings] if args.readings else []),
                          *(["--jobs", str(args.jobs)] if args.jobs else [])])
    results = run_report(args.out, quick=args.quick, only=only, seeds=seeds, command=command,
                         only_readings=only_readings, jobs=jobs)
    print(f"report written to {args.out}/index.html and {args.out}/report.md", file=sys.stderr)
    failed = [r.name for r in results if r.error]
    if failed:
        print(f"error: {len(failed)} experiment(s) failed: {', '.join(failed)} (see "
              f"{args.out}/NAME/error.txt)", file=sys.stderr)
    return exit_status(results)


def _catalogue() -> dict[str, dict[str, str]]:
    from ..catalogue import catalogue

    return {kind: dict(registry.describe()) for kind, registry in catalogue().items()}


def _experiments() -> dict[str, str]:
    """Every built-in experiment and the first sentence of its description."""
    from ..config import experiment_names, load

    out = {}
    for name in experiment_names():
        text = " ".join(str(load(name).get("description", "")).split())
        out[name] = text if len(text) <= 90 else text[:88].rsplit(" ", 1)[0] + " …"
    return out


def cmd_list(args: argparse.Namespace) -> int:
    catalogue = {**_catalogue(), "experiments": _experiments()}
    kinds = [args.kind] if args.kind else list(catalogue)
    for kind in kinds:
        print(f"{kind}:")
        entries = catalogue[kind]
        width = max(map(len, entries), default=0)
        for name, text in entries.items():
            print(f"  {name.ljust(width)}  {text}")
        print()
    return 0


def _axis_columns(axis: str) -> list[str]:
    """The ``results.csv`` columns an x axis of ``fedcomp plot`` is read from."""
    return ["floats_up", "floats_down"] if axis == "floats" else [axis]


def cmd_plot(args: argparse.Namespace) -> int:
    import csv

    from ..plotting import plot_results

    paths = [Path(d) / "results.csv" for d in args.dir]
    for results in paths:
        if not results.exists():
            print(f"error: {results} not found; give directories written by 'fedcomp run'",
                  file=sys.stderr)
            return 2
        with results.open(newline="") as f:
            columns = next(csv.reader(f), [])
        if args.metric not in columns:  # the plot would fall back to another metric silently
            metrics = [c for c in columns if c not in ("algorithm", "method", "batch_size",
                                                       "variant", "seed", "round", "status")]
            print(f"error: no column {args.metric!r} in {results}; --metric takes one of "
                  f"{metrics}", file=sys.stderr)
            return 2
        if not set(_axis_columns(args.x)) <= set(columns):  # e.g. sim_time: timed runs only
            axes = [a for a in PLOT_AXES if set(_axis_columns(a)) <= set(columns)]
            print(f"error: no column {args.x!r} in {results} (it has {columns}); --x takes one "
                  f"of {axes} for this run", file=sys.stderr)
            return 2
    name = f"plot_{args.metric}_{args.x}.png"
    # one run: beside its results; several: here, not inside one of them
    out = Path(args.output) if args.output else (
        Path(args.dir[0]) / name if len(paths) == 1 else Path(name))
    plot_results(paths[0] if len(paths) == 1 else paths, out, metric=args.metric, x_axis=args.x)
    print(f"wrote {out}")
    return 0


def cmd_data_download(args: argparse.Namespace) -> int:
    from ..data import data_dir, fetch

    directory = Path(args.data_dir) if args.data_dir else data_dir()
    try:
        path = fetch(args.name, directory, url=args.url, timeout=args.timeout)
    except ConnectionError as exc:  # exit 2 like every other failure (the help says so)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.name}: ready in {path}")
    return 0


def cmd_data_list(args: argparse.Namespace) -> int:
    from ..data import DATASET_DESCRIPTIONS, SOURCES, data_dir, is_fetched

    directory = Path(args.data_dir) if args.data_dir else data_dir()
    print(f"data directory: {directory}")
    width = max(map(len, SOURCES))
    for name in SOURCES:
        state = "present" if is_fetched(name, directory) else "missing"
        print(f"  {name.ljust(width)}  {state:7}  {DATASET_DESCRIPTIONS.get(name, '')}")
    return 0


def _add_data(sub: Any) -> None:
    data = sub.add_parser("data", help="download data sets; list what the data directory holds",
                          description="Data files of the real data sets (MNIST, CIFAR-10, ...).")
    dsub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    def data_dir_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", metavar="DIR", help="the data directory (default "
                       "$FEDCOMP_DATA_DIR, else ~/.cache/fedcomp/data)")

    download = dsub.add_parser("download", help="fetch a data set from its official source",
                               description="Download the files of a data set, verify their "
                                           "SHA-256 and put them in the data directory, where "
                                           "the loaders look for them.",
                               epilog="Any failure (an unknown name, no network, a wrong "
                                      "checksum, an unwritable directory) prints one 'error: "
                                      "...' line and exits 2.")
    download.add_argument("name", help="the data set (see 'fedcomp data list')")
    data_dir_option(download)
    download.add_argument("--url", metavar="URL", help="download from this address (a mirror; "
                          "for a set of files, the folder holding them) instead")
    download.add_argument("--timeout", type=float, default=60.0, metavar="S",
                          help="seconds for each file's whole download (default 60)")
    download.set_defaults(func=cmd_data_download)
    lst = dsub.add_parser("list", help="data sets that can be downloaded, and which are here")
    data_dir_option(lst)
    lst.set_defaults(func=cmd_data_list)


def _flower_config(args: argparse.Namespace) -> dict[str, Any]:
    return _load_config(args.config, args.set)


def _import_flower() -> Any:
    """``fedcomp.flower`` (a MissingExtraError naming ``fedcomp[flower]`` without Flower)."""
    from .. import flower

    return flower


def cmd_flower_app(args: argparse.Namespace) -> int:
    _import_flower()
    from ..flower._local import write_app

    out = write_app(_flower_config(args), args.out, results_dir=args.results,
                    num_nodes=args.nodes, node_timeout=args.node_timeout,
                    round_timeout=args.round_timeout, rejoin_timeout=args.rejoin_timeout)
    print(f"wrote the Flower app to {out}/ (pyproject.toml with [tool.flwr.app]); run it with\n"
          f"  flwr run {out} <superlink-connection> --stream\n"
          "after starting a SuperLink and SuperNodes with --node-config "
          "'partition-id=K num-partitions=N' (see the README)", file=sys.stderr)
    return 0


def cmd_flower_local(args: argparse.Namespace) -> int:
    _import_flower()
    from ..flower._local import run_local

    config = _flower_config(args)
    out = Path(args.out) if args.out else default_out(config, "flower-")
    if (out / "results.csv").exists():
        print(f"error: {out}/results.csv already exists; pass another --out or remove it",
              file=sys.stderr)
        return 2
    print(f"fedcomp {__version__}: running {config.get('name', '?')} on a local Flower "
          f"deployment (1 SuperLink + {args.nodes} SuperNodes) -> {out}", file=sys.stderr)
    status = run_local(config, out, nodes=args.nodes, node_timeout=args.node_timeout,
                       round_timeout=args.round_timeout, timeout=args.timeout,
                       checkpoint_dir=args.checkpoint_dir, rejoin_timeout=args.rejoin_timeout,
                       insecure=args.insecure)
    if status.get("status") != "ok":
        print(f"error: the Flower run failed: {status.get('error')}", file=sys.stderr)
        return 1
    print(f"results written to {out}/ (results.csv, config.json, models/, summary.md; "
          "Flower logs in flower-logs/)", file=sys.stderr)
    return 0


def _add_flower(sub: Any) -> None:
    flower = sub.add_parser("flower", help="run an experiment through Flower (fedcomp[flower])",
                            description="Run a fedcomp configuration as a Flower app.")
    fsub = flower.add_subparsers(dest="flower_command", metavar="SUBCOMMAND", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        _complete_config(p.add_argument("config", help="CONFIG.toml or a built-in experiment "
                                                      "name"))
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config value (repeatable), as for 'fedcomp run'")
        p.add_argument("--node-timeout", type=float, default=120.0, metavar="S",
                       help="seconds the server waits for the SuperNodes (default 120)")
        p.add_argument("--round-timeout", type=float, default=300.0, metavar="S",
                       help="seconds the server waits for a round's replies (default 300)")
        p.add_argument("--rejoin-timeout", type=float, default=0.0, metavar="S",
                       help="seconds the server waits for a silent SuperNode to come back "
                            "(needs checkpoint-dir on the nodes; default 0: fail at once)")

    app = fsub.add_parser("app", help="write a ready Flower app for a config",
                          description="Write a Flower app (pyproject.toml with [tool.flwr.app] "
                                      "and the config as run config) to run with 'flwr run'.")
    common(app)
    app.add_argument("--out", required=True, metavar="DIR", help="the app directory")
    app.add_argument("--results", metavar="DIR", help="where the ServerApp writes results.csv "
                     "etc. on the SuperLink's machine (default: a temporary directory)")
    app.add_argument("--nodes", type=int, default=0, metavar="N", help="SuperNodes to wait "
                     "for (default: num-partitions reported by the nodes)")
    app.set_defaults(func=cmd_flower_app)

    local = fsub.add_parser("local", help="run on a SuperLink + N SuperNodes on 127.0.0.1",
                            description="Start a SuperLink and N SuperNodes on 127.0.0.1 as "
                                        "separate processes, run the config, stream progress, "
                                        "and stop every process afterwards.")
    common(local)
    local.add_argument("--nodes", type=int, required=True, metavar="N",
                       help="SuperNodes (node k hosts partition k of the clients)")
    local.add_argument("--out", metavar="DIR", help="output directory (default "
                       "runs/NAME-flower-TIME)")
    local.add_argument("--timeout", type=float, default=3600.0, metavar="S",
                       help="stop the whole run after this many seconds (default 3600)")
    local.add_argument("--checkpoint-dir", metavar="DIR",
                       help="SuperNodes checkpoint their client states here")
    local.add_argument("--insecure", action="store_true",
                       help="plain HTTP and no SuperNode authentication (default: TLS with a "
                            "throwaway CA and SuperNode keys made in the temporary home; see "
                            "the README on what that protects)")
    local.set_defaults(func=cmd_flower_local)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``benchmarks/run.py`` of the source checkout with the remaining arguments
    (``fedcomp bench scale ...``: ``benchmarks/scale.py``, 10^5 and 10^6 clients;
    ``fedcomp bench sparse ...``: ``benchmarks/sparse_round.py``, rcv1-shaped rounds)."""
    import importlib.util

    name, forwarded = "run", list(args.bench_args)
    scripts = {"scale": "scale", "sparse": "sparse_round"}
    if forwarded[:1] and forwarded[0] in scripts:
        name, forwarded = scripts[forwarded[0]], forwarded[1:]
    script = BENCHMARKS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fedcomp_bench_{name}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(forwarded))


#: The benchmark scripts of a source checkout (``fedcomp bench`` runs them). A wheel has
#: none: there the command is not offered (``--help`` does not list it).
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _add_bench(sub: Any) -> None:
    if not (BENCHMARKS / "run.py").exists():
        return
    # prefix_chars="+": every "-..." argument goes through to benchmarks/run.py untouched
    bench = sub.add_parser("bench", add_help=False, prefix_chars="+",
                           help="ms per round on every engine (simulator NumPy/torch, "
                                "per-client loop, JAX, Flower), scaling, peak memory; "
                                "'bench scale': 10^5 and 10^6 clients, in one process and "
                                "on Ray actors; 'bench sparse': rcv1-shaped sparse rounds "
                                "against hand-written scipy.sparse ones",
                           description="Forwards its arguments to benchmarks/run.py "
                                       "(fedcomp bench --help lists them).")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedcomp", description="Composite federated optimization: simulate, compare, plot.")
    parser.add_argument("--version", action="version", version=f"fedcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
  is missing (the config and sweep must match; more seeds may be added).
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

    report = sub.add_parser(
        "report", help="run every paper experiment and write an HTML/Markdown report",
        description="Run every built-in experiment (reduced sizes with --quick) and write "
                    "DIR/index.html and DIR/report.md: per paper the claim, figures, final "
                    "metrics (mean ± std over seeds) and a verdict computed by a stated rule. "
                    "Experiments already finished in DIR with the same config are not rerun.")
    report.add_argument("--out", required=True, metavar="DIR", help="the report directory")
    report.add_argument("--quick", action="store_true", help="each config's [quick] sizes "
                        "(the whole report in under 10 minutes on 2 cores)")
    report.add_argument("--only", metavar="NAME,...", help="only these experiments")
    report.add_argument("--seeds", metavar="START:STOP", help="override every config's seeds")
    report.add_argument("--readings", metavar="NAME,...", help="only these readings of each "
                        "paper (e.g. as_written,as_run: no diagnoses; default: every reading)")
    report.add_argument("--jobs", type=int, metavar="N", help="worker processes per experiment "
                        "(default: min(2, cores); 1 where a verdict compares wall times)")
    report.set_defaults(func=cmd_report)

    lst = sub.add_parser("list", help="list algorithms, regularizers, losses, datasets, "
                         "experiments, ...")
    lst.add_argument("kind", nargs="?", choices=["algorithms", "regularizers", "losses",
                                                 "datasets", "partitioners", "metrics",
                                                 "topologies", "compressors", "backends",
                                                 "experiments"])
    lst.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print an experiment's resolved configuration (TOML)",
                          description="Print a configuration as TOML with every default filled "
                                      "in (what 'fedcomp run' would run), or the shipped file "
                                      "with its comments (--source). Save it, edit it, and "
                                      "run the file.")
    _complete_config(show.add_argument("config", help="a built-in experiment name or "
                                       "CONFIG.toml"))
    show.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="override a config value first (repeatable)")
    show.add_argument("--quick", action="store_true", help="with its [quick] reduced sizes")
    show.add_argument("--reading", metavar="NAME", help="in one of its [readings] (e.g. "
                      "as_run: the conventions of the authors' code); default as_written")
    show.add_argument("--source", action="store_true", help="the built-in experiment's TOML "
                      "file as shipped, comments included")
    show.set_defaults(func=cmd_show)

    plot = sub.add_parser("plot", help="plot results.csv of a run directory, or overlay several")
    plot.add_argument("dir", nargs="+", help="directories written by 'fedcomp run'; several "
                      "are overlaid in one figure, each curve named RUN/algorithm")
    plot.add_argument("--metric", default="optimality", help="y axis (default optimality)")
    plot.add_argument("--x", default="round", choices=PLOT_AXES, help="x axis")
    plot.add_argument("--output", "-o", help="output PNG (default DIR/plot_METRIC_X.png; for "
                      "several directories ./plot_METRIC_X.png)")
    plot.set_defaults(func=cmd_plot)
    _add_data(sub)
    _add_flower(sub)
    _add_bench(sub)
    completion = sub.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        description="Print the completion script of fedcomp's commands, options and built-in "
                    "experiments for a shell, e.g.\n"
                    "  bash: fedcomp completion bash > ~/.local/share/bash-completion/"
                    "completions/fedcomp\n"
                    "  zsh:  fedcomp completion zsh > ~/.zfunc/_fedcomp  (with fpath+=~/.zfunc "
                    "before compinit)", formatter_class=argparse.RawDescriptionHelpFormatter)
    completion.add_argument("shell", choices=["bash", "zsh"])
    completion.set_defaults(func=cmd_completion)
    return parser


#: A config argument completes to the built-in experiments and *.toml files (shell
#: functions defined in :func:`completion_preamble`).
CONFIG_COMPLETION = {"bash": "_fedcomp_configs", "zsh": "_fedcomp_configs"}


def _complete_config(action: argparse.Action) -> None:
    action.complete = CONFIG_COMPLETION  # type: ignore[attr-defined]  # read by shtab


def completion_preamble() -> dict[str, str]:
    """The shell functions behind :data:`CONFIG_COMPLETION`: experiment names, then files."""
    from ..config import experiment_names

    names = " ".join(experiment_names())
    return {
        "bash": (f'_fedcomp_configs() {{\n  compgen -W "{names}" -- "$1"\n'
                 '  compgen -d -- "$1"\n  compgen -f -X \'!*.toml\' -- "$1"\n}\n'),
        "zsh": ("_fedcomp_configs() {\n  _alternative "
                f"'experiments:built-in experiment:({names})' "
                "'files:config file:_files -g \"*.toml\"'\n}\n"),
    }


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the completion script for ``args.shell`` (generated by shtab from the parser)."""
    from .._extras import require

    shtab = require("shtab", "fedcomp completion")
    print(shtab.complete(build_parser(), shell=args.shell, preamble=completion_preamble()),
          end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .._extras import MissingExtraError
    from ..config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command is None:
        parser.print_help()
        return 0
    from ..runtime import reuse_freed_memory

    reuse_freed_memory()  # batched network rounds free and re-request MBs per operation
    try:
        # SIGTERM/SIGHUP (timeout, a scheduler, a closed terminal) tear down like Ctrl-C
        with signals_as_interrupt():
            return int(args.func(args))
    except (ConfigError, MissingExtraError, ValueError, OSError, TypeError) as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        # MissingExtraError: an optional extra not installed (the message names the pip
        # install); OSError: a data or output file missing or unwritable; TypeError: a value
        # of the wrong type that validation let through (the message names it)
        hint = (f" (set {DEBUG_ENV}=1 for the traceback)" if isinstance(exc, TypeError)
                else "")
        print(f"error: {exc}{hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        # cmd_run says where its rows are; any other command wrote none
        print("\ninterrupted", file=sys.stderr)
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
