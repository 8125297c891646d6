"""Seconds per round through Flower vs the simulator, for the same configuration.

Runs one fedcomp configuration three ways in this process' session and reads the
per-round wall time from each run's ``results.csv`` (``wall_s`` accumulates the rounds'
time only — sampling, the clients' work and the message round trips, server update —
not start-up or evaluation):

* the vectorised simulator (``fedcomp run``'s code path),
* Flower's simulation engine (``fedcomp.flower.run_simulation``: Ray actors),
* a localhost deployment (``fedcomp flower local``: a SuperLink and one SuperNode per
  client as separate processes on 127.0.0.1).

Start-up (Ray, processes, node discovery) is reported separately as the total time.
Usage::

    .venv/bin/python benchmarks/flower_overhead.py --rounds 10 --clients 4
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")


def config(rounds: int, clients: int, samples: int, features: int) -> dict:
    return {
        "name": "flower-overhead", "rounds": rounds, "seeds": [0], "batch_size": ["full"],
        "reference": False, "metrics": ["objective"], "eval_every": rounds,
        "data": {"generator": "synthetic_fedprox", "alpha": 1.0, "beta": 1.0, "n_classes": 2,
                 "n_clients": clients, "samples_per_client": samples, "n_features": features},
        "problem": {"loss": "logistic", "l2": 0.01},
        "regularizer": {"name": "l1", "alpha": 1e-4},
        "algorithms": [{"name": "za1", "client_lr": 0.1, "local_steps": 5}],
    }


def per_round(out: Path, rounds: int) -> float:
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1]["wall_s"]) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--features", type=int, default=60)
    parser.add_argument("--skip-deployment", action="store_true")
    args = parser.parse_args()

    from fedcomp.experiments import run_experiment
    from fedcomp.flower import run_simulation
    from fedcomp.flower._local import run_local

    cfg = config(args.rounds, args.clients, args.samples, args.features)
    work = Path(tempfile.mkdtemp(prefix="fedcomp-bench-"))
    os.environ.setdefault("FLWR_HOME", str(work / "flwr-home"))
    results = {}

    tic = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        run_experiment(cfg, work / "sim", progress=False, stream=quiet)
    results["simulator"] = (per_round(work / "sim", args.rounds), time.perf_counter() - tic)

    tic = time.perf_counter()
    run_simulation(cfg, work / "flwr-sim", num_cpus=min(args.clients, os.cpu_count() or 1))
    results["Flower simulation engine"] = (per_round(work / "flwr-sim", args.rounds),
                                           time.perf_counter() - tic)

    if not args.skip_deployment:
        tic = time.perf_counter()
        status = run_local(cfg, work / "flwr-local", nodes=args.clients, node_timeout=120,
                           round_timeout=300, timeout=1800, echo=lambda line: None)
        if status["status"] != "ok":
            sys.exit(f"deployment failed: {status['error']}")
        results["Flower localhost deployment"] = (per_round(work / "flwr-local", args.rounds),
                                                  time.perf_counter() - tic)

    base = results["simulator"][0]
    print(f"ZA1 (tau=5), {args.clients} clients x {args.samples} samples x {args.features} "
          f"features, logistic + l1, full gradients, {args.rounds} rounds, float64")
    print("| engine | s / round | ratio to simulator | total wall s (incl. start-up) |")
    print("|---|---|---|---|")
    for name, (seconds, total) in results.items():
        print(f"| {name} | {seconds:.4g} | {seconds / base:.0f}x | {total:.1f} |")


if __name__ == "__main__":
    main()
