"""Round time of the simulator against the gradient floor, on the default experiment.

The default experiment (seed 000, full gradients: 30 clients x 2000 samples x 60 features,
logistic loss, tau = 5 local steps) is run for each client-block size (1, auto, all). The
floor is what no implementation of a round can beat: tau times one full gradient of the
pooled data of all clients (60000 x 60, one matrix-vector product each way), measured in the
same process. Target: auto-block round time <= 2x the floor.

    python benchmarks/round_time.py [--rounds 60] [--repeats 5] [--algorithms za1,fedmid,fedda]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from fedcomp import Problem, RunOptions, simulate
from fedcomp.algorithms import make_algorithm
from fedcomp.config import load
from fedcomp.experiments import build_problem, validate
from fedcomp.runtime import auto_block_size


def pooled_gradient_time(problem: Problem, repeats: int) -> float:
    """Seconds for one logistic gradient on the pooled data (the floor's unit)."""
    features, targets, _ = problem.data.pooled()
    a = np.ascontiguousarray(features)
    y = targets
    x = np.random.default_rng(0).normal(size=a.shape[1]) * 0.1
    l2 = problem.loss.l2
    n = len(y)

    def gradient() -> np.ndarray:
        t = y * (a @ x)
        coef = (-0.5 / n) * y * (1.0 - np.tanh(0.5 * t))
        return coef @ a + l2 * x

    gradient()
    best = np.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        for _ in range(20):
            gradient()
        best = min(best, (time.perf_counter() - tic) / 20)
    return best


def round_time(problem: Problem, name: str, params: dict, block, rounds: int, repeats: int
               ) -> float:
    """Best-of-``repeats`` seconds per round (no evaluation inside the timed loop)."""
    algorithm = make_algorithm(name, **params)
    simulate(algorithm, problem, 2, metrics=[], options=RunOptions(client_block=block,
                                                                   progress=False))  # warm-up
    best = np.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        simulate(algorithm, problem, rounds, metrics=[], eval_every=rounds,
                 options=RunOptions(client_block=block, progress=False))
        best = min(best, (time.perf_counter() - tic) / rounds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--algorithms", default="za1,fedmid,fedda")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()

    cfg = validate(load("seed000"))
    problem = build_problem(cfg)
    entries = {e["name"]: {k: v for k, v in e.items() if k != "name"} for e in cfg["algorithms"]}
    local_steps = entries["za1"]["local_steps"]
    floor = local_steps * pooled_gradient_time(problem, args.repeats)
    blocks = [1, "auto", "all"]
    print(f"seed000 full gradients: {problem.n_clients} clients x {problem.data.max_samples} "
          f"samples x {problem.param_shape[0]} features, tau={local_steps}; auto block = "
          f"{auto_block_size(problem)} clients")
    print(f"floor (tau x pooled gradient): {floor * 1e3:.2f} ms")
    print(f"{'algorithm':10s} " + " ".join(f"{'block=' + str(b):>18s}" for b in blocks))
    results = {"floor_ms": floor * 1e3, "auto_block": auto_block_size(problem),
               "machine": platform.processor() or platform.machine(), "rows": []}
    for name in args.algorithms.split(","):
        cells = []
        for block in blocks:
            t = round_time(problem, name, entries[name], block, args.rounds, args.repeats)
            cells.append(f"{t * 1e3:8.2f} ms ({t / floor:4.2f}x)")
            results["rows"].append({"algorithm": name, "block": str(block), "ms": t * 1e3,
                                    "ratio_to_floor": t / floor})
        print(f"{name:10s} " + " ".join(f"{c:>18s}" for c in cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
