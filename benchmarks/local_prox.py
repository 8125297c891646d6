"""Exact local prox of FedDR: one batched Newton solve per block vs one client at a time.

The exact solver (``local_solver="exact"``) forms every client's Hessian ``(B, d, d)`` and
solves the B Newton systems in one batched ``linalg.solve``; clients that have converged are
frozen by a mask. This script times FedDR rounds on the default experiment's data (seed 000:
30 clients x 2000 samples x 60 features) with logistic loss (damped Newton to 1e-10) and with
least squares (one closed-form step), for client blocks of 1 (the per-client baseline), auto
and all, in the same process.

    python benchmarks/local_prox.py [--rounds 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import feddr
from fedcomp.config import load
from fedcomp.experiments import build_problem, resolve
from fedcomp.losses import LeastSquares


def best_round_ms(problem, block, rounds: int, repeats: int) -> float:
    alg = feddr(eta=1.0, local_solver="exact", init="code")
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        simulate(alg, problem, rounds, metrics=[], options=RunOptions(client_block=block,
                                                                      progress=False))
        times.append((time.perf_counter() - tic) / rounds)
    return 1e3 * min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logistic = build_problem(resolve(load("seed000")).base)
    lstsq = dataclasses.replace(logistic, loss=LeastSquares(l2=0.01))
    results = {}
    for name, problem in [("logistic (Newton)", logistic), ("least squares (closed form)", lstsq)]:
        row = {str(b): best_round_ms(problem, b, args.rounds, args.repeats)
               for b in (1, "auto", "all")}
        results[name] = row
        base = row["1"]
        print(f"{name}: " + ", ".join(f"block={b}: {ms:.2f} ms ({base / ms:.2f}x)"
                                      for b, ms in row.items()))
    print(json.dumps(results))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
