"""Torch's thread policy on a shared CPU: one ZA1 round, NumPy against torch, alone and beside
two busy processes, with OpenMP's default (spinning) wait policy and with fedcomp's PASSIVE.

    python benchmarks/torch_threads.py [--clients 100] [--features 1024] [--rounds 20]

Each (wait policy, torch threads) case runs in a fresh interpreter, because OpenMP reads
``OMP_WAIT_POLICY`` once, when torch is imported; the two busy processes are Python loops
this script starts and always stops. Prints ms per round and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

CASE = r"""
import json, os, sys, time
import torch
import fedcomp
from fedcomp.data import synthetic_fedprox
from fedcomp.losses import Logistic
from fedcomp.regularizers import L1
clients, features, rounds, threads = map(int, sys.argv[1:5])
torch.set_num_threads(threads)
data = synthetic_fedprox(alpha=1, beta=1, n_clients=clients, n_classes=2, n_features=features,
                         samples_per_client=20, seed=0)
problem = fedcomp.Problem(Logistic(l2=0.01), L1(1e-4), data)
on_torch = fedcomp.Problem(problem.loss, problem.regularizer,
                           problem.data.to(torch.zeros(0, dtype=torch.float64)))
algorithm = fedcomp.za1(client_lr=0.5, local_steps=5)
out = {}
for name, p in (("numpy", problem), ("torch", on_torch)):
    quiet = fedcomp.RunOptions(progress=False)
    fedcomp.simulate(algorithm, p, 2, metrics=[], options=quiet)  # warm-up
    tic = time.perf_counter()
    fedcomp.simulate(algorithm, p, rounds, metrics=[], options=quiet)
    out[name] = (time.perf_counter() - tic) / rounds * 1e3
out["load"] = os.getloadavg()[0]
print(json.dumps(out))
"""


@contextmanager
def busy(n: int):
    """``n`` processes spinning on the CPU, stopped on the way out whatever happens."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def case(policy: str | None, threads: int, args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    # fedcomp sets PASSIVE unless the variable is given: ACTIVE is OpenMP's spinning default
    env["OMP_WAIT_POLICY"] = policy or "ACTIVE"
    line = subprocess.run([sys.executable, "-c", CASE, str(args.clients), str(args.features),
                           str(args.rounds), str(threads)], env=env, check=True,
                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"# ZA1 round, {args.clients} clients x d = {args.features}, float64, "
          f"{os.cpu_count()} cores; ms per round")
    print("| machine | OMP_WAIT_POLICY | torch threads | NumPy | torch | torch / NumPy | load |")
    print("|---|---|---|---:|---:|---:|---:|")
    for label, n_busy in (("alone", 0), ("beside 2 busy processes", 2)):
        with busy(n_busy):
            for policy in ("ACTIVE", "PASSIVE"):
                for threads in (2, 1):
                    r = case(policy, threads, args)
                    print(f"| {label} | {policy} | {threads} | {r['numpy']:.1f} | "
                          f"{r['torch']:.1f} | {r['torch'] / r['numpy']:.1f}x | "
                          f"{r['load']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
