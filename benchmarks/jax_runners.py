"""Time per step of the eager runners on jax arrays against NumPy.

:func:`fedcomp.simulate` compiles its rounds on jax arrays (``benchmarks/jax_engine.py``);
:func:`~fedcomp.runtime.simulate_decentralized` and :func:`~fedcomp.runtime.simulate_async`
run eagerly there, one jax operation at a time. This times both on the data of their
shipped experiments, NumPy against ``backend = "jax"`` (float64), in this process:

* gossip: ``liang2024_linear`` (16 nodes on a chain, d = 1024, 10 local steps, batch 10,
  fresh samples), DFedDA-GT and DFedMiD, milliseconds per round;
* asynchronous: ``feddr_async`` (20 clients, softmax regression, 5 local epochs of batch 10),
  asyncFedDR, milliseconds per server step (60 steps: the warm-up round of all 20 clients
  included).

Each time is the median of ``--repeats`` timed runs after a warm-up run (eager jax compiles
each operation the first time it sees its shapes).

    python benchmarks/jax_runners.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from fedcomp import simulate_async
from fedcomp.algorithms import async_feddr, dfedda_gt, dfedmid
from fedcomp.config import apply_override, load
from fedcomp.experiments import build_problem, build_topology
from fedcomp.runtime import simulate_decentralized


def median_ms(run: Callable[..., Any], steps: int, repeats: int) -> float:
    """Median milliseconds per step of ``run(steps)`` over ``repeats`` runs, after a warm-up."""
    run(2, metrics=[])
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        run(steps, metrics=[])
        times.append((time.perf_counter() - tic) / steps * 1e3)
    return statistics.median(times)


def rows(repeats: int) -> list[tuple[str, str, str, float]]:
    """``(experiment, algorithm, backend, ms per step)`` of every timed case."""
    out = []
    gossip = load("liang2024_linear")
    for backend in ("numpy", "jax"):
        config = apply_override(gossip, f'backend="{backend}"')
        problem = build_problem(config, 0)
        topology, _ = build_topology(config, problem.n_clients)
        for alg in (dfedda_gt(0.1, 10, p=12.0), dfedmid(0.0003, 10)):
            run = partial(simulate_decentralized, alg, problem, topology, batch_size=10)
            ms = median_ms(run, 20, repeats)
            out.append(("liang2024_linear", alg.name, backend, ms))
    for backend in ("numpy", "jax"):
        problem = build_problem(apply_override(load("feddr_async"), f'backend="{backend}"'), 0)
        alg = async_feddr(eta=1.0, alpha=1.95, client_lr=0.05, local_epochs=5)
        ms = median_ms(partial(simulate_async, alg, problem, batch_size=10), 60, repeats)
        out.append(("feddr_async", alg.name, backend, ms))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| experiment | algorithm | backend | ms per step |\n|---|---|---|---|")
    for experiment, name, backend, ms in rows(args.repeats):
        print(f"| {experiment} | {name} | {backend} | {ms:.1f} |")


if __name__ == "__main__":
    main()
