"""Milliseconds per ZA1 round on a device, every engine side by side, against the memory roofline.

The round of ``benchmarks/jax_engine.py`` (ZA1, tau = 5 local steps, full local gradients,
float64, every client every round, l1 logistic regression on ``synthetic_fedprox``) at the
device issue's five sizes, clients x features x samples: 100x1024x20, 1000x100x20,
10^4x1000x20, 10^5x100x20 and 10^6x20x10. The engines, all in this process:

* ``numpy``: :func:`fedcomp.simulate` on the host (a few rounds only at the large sizes);
* ``jax engine``: :func:`fedcomp.simulate` on jax arrays (``backend = "jax"``, jax's
  default device: its GPU when present);
* ``jax.jit(vmap) by hand``: the round written by hand (``benchmarks/run.py``);
* ``fedcomp torch``: :func:`fedcomp.simulate` with the data on torch float64 tensors on
  ``--device`` (``backend = "cuda-float64"`` on a GPU);
* ``torch by hand``: the same round written by hand in torch on ``--device``.

The **memory roofline** of a round is ten passes over the float64 features (a forward and
a backward pass per local step) at the copy bandwidth measured at start-up on ``--device``
(``dst.copy_(src)`` of 1 GiB, read + write, best of five): no engine can beat it.
``roofline %`` is the roofline's time over the engine's.

``--networks`` also times the network experiments' rounds (``fedcanon_nn``, ``feddr_mlp``,
``bao2022_emnist`` by default: the configurations as shipped in their base reading, every
algorithm, the first ``--network-rounds`` rounds, seed 0) through ``fedcomp run``'s pipeline
on ``--device`` (``backend = "cuda"``) and on the host CPU (``backend = "torch"``).

On a machine without a GPU, ``--device cpu`` runs the same script on the CPU at the sizes
given (the test suite runs it so, small).

    python benchmarks/gpu.py [--device cuda] [--sizes 100x1024x20,...] [--networks]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jax_engine import repeated_ms, simulator_ms, torch_za1  # noqa: E402
from run import build, config, jax_za1, machine, markdown_table  # noqa: E402

SIZES = "100x1024x20,1000x100x20,10000x1000x20,100000x100x20,1000000x20x10"
NETWORKS = "fedcanon_nn,feddr_mlp,bao2022_emnist"
#: Rounds of the agreement check (each engine's model against NumPy's).
CHECK_ROUNDS = 3


def copy_bandwidth(device: str, gib: float = 1.0) -> float:
    """Bytes per second of ``dst.copy_(src)`` on ``device`` (read + write), best of five."""
    import torch

    n = int(gib * (1 << 30)) // 8
    src = torch.ones(n, dtype=torch.float64, device=device)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(6):  # the first is a warm-up
        sync(device)
        tic = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - tic)
    del src, dst
    return 2 * 8 * n / best


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def size_rows(n: int, d: int, m: int, args: argparse.Namespace, bandwidth: float
              ) -> list[dict[str, Any]]:
    """Every engine at one size, interleaved ``--repeats`` times, medians reported (a
    hand-written round returns a host array, so its time includes the device's work)."""
    from fedcomp import RunOptions, simulate
    from fedcomp.algorithms import make_algorithm

    alg = make_algorithm("za1", client_lr=0.1, local_steps=5)
    problem = build(config(n, d, CHECK_ROUNDS, samples=m))
    x_ref = simulate(alg, problem, CHECK_ROUNDS, metrics=[], options=RunOptions(progress=False)).x
    jproblem = build(config(n, d, CHECK_ROUNDS, backend="jax", samples=m))
    on_device = (f"cuda-float64:{_index(args.device)}" if args.device.startswith("cuda")
                 else "torch-float64")
    tproblem = build(config(n, d, CHECK_ROUNDS, backend=on_device, samples=m))
    hand_jax, hand_torch = jax_za1(problem), torch_za1(problem, False, device=args.device)
    numpy_block = args.block if n * d * m <= args.numpy_floats else 1
    timers: dict[str, Callable[[], float]] = {
        "numpy": lambda: simulator_ms(problem, numpy_block, max(2, args.blocks // 2))[0],
        "jax engine": lambda: simulator_ms(jproblem, args.block, args.blocks)[0],
        "jax.jit(vmap) by hand": lambda: repeated_ms(hand_jax, args.block, args.blocks),
        "fedcomp torch": lambda: simulator_ms(tproblem, args.block, args.blocks)[0],
        "torch by hand": lambda: repeated_ms(hand_torch, args.block, args.blocks),
    }
    models = {"numpy": x_ref,
              "jax engine": simulate(alg, jproblem, CHECK_ROUNDS, metrics=[],
                                     options=RunOptions(progress=False)).x,
              "jax.jit(vmap) by hand": hand_jax(CHECK_ROUNDS),
              "fedcomp torch": simulate(alg, tproblem, CHECK_ROUNDS, metrics=[],
                                        options=RunOptions(progress=False)).x,
              "torch by hand": hand_torch(CHECK_ROUNDS)}
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(args.repeats):
        for name, timer in timers.items():
            times[name].append(timer())
    roofline_ms = 1e3 * 10 * n * m * d * 8 / bandwidth
    from fedcomp._array import to_numpy

    rows = []
    for name, ms in times.items():
        median = float(np.median(ms))
        rows.append(dict(size=f"{n} x {d} x {m}", engine=name, ms=median,
                         roofline=100 * roofline_ms / median, roofline_ms=roofline_ms,
                         diff=float(np.max(np.abs(to_numpy(models[name]) - x_ref)))))
    return rows


def _index(device: str) -> int:
    return int(device.partition(":")[2] or 0)


def network_rows(names: list[str], device: str, rounds: int) -> list[dict[str, Any]]:
    """ms per round of each network experiment's first algorithm on ``device`` and on the
    host CPU, through ``fedcomp run``'s pipeline (read from ``results.csv``'s ``wall_s``)."""
    from fedcomp.config import load
    from fedcomp.experiments import run_experiment

    backends = {"host CPU (torch)": "torch"}
    if device != "cpu":
        backends[f"{device} (cuda)"] = "cuda" if device.startswith("cuda") else device
    rows = []
    for name in names:
        for where, backend in backends.items():
            cfg = load(name)
            cfg.update(backend=backend, rounds=rounds, seeds=[0], eval_every=1)
            for key in ("readings", "variants"):  # the base reading, as shipped
                cfg.pop(key, None)
            with tempfile.TemporaryDirectory() as out, open(os.devnull, "w") as quiet:
                run_experiment(cfg, out, progress=False, stream=quiet)
                with open(Path(out) / "results.csv") as f:
                    wall: dict[tuple[str, str], dict[int, float]] = {}
                    for r in csv.DictReader(f):
                        key = (r["algorithm"], r["batch_size"])
                        wall.setdefault(key, {})[int(r["round"])] = float(r["wall_s"])
            # round 1 is the warm-up (first kernels, allocations): rounds 2 .. R are timed
            rows += [dict(experiment=name, algorithm=f"{alg} (batch {batch})", where=where,
                          ms=1e3 * (w[rounds] - w[1]) / (rounds - 1))
                     for (alg, batch), w in wall.items()]
    return rows


def size_table(rows: list[dict[str, Any]]) -> str:
    return markdown_table(
        ["clients x d x samples", "engine", "ms / round", "roofline %", "max abs diff to NumPy"],
        ([r["size"], r["engine"], f"{r['ms']:.3g}",
          f"{r['roofline']:.0f} % (roofline {r['roofline_ms']:.3g} ms)", f"{r['diff']:.1e}"]
         for r in rows))


def network_table(rows: list[dict[str, Any]]) -> str:
    return markdown_table(["experiment", "algorithm", "where", "ms / round"],
                          ([r["experiment"], r["algorithm"], r["where"], f"{r['ms']:.3g}"]
                           for r in rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="torch device of the torch engines and the roofline (default: cuda "
                        "when torch sees a GPU, else cpu)")
    p.add_argument("--sizes", default=SIZES, help="clients x features x samples, comma-separated")
    p.add_argument("--block", type=int, default=10, help="rounds per timed block")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks (median)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved timings of each engine")
    p.add_argument("--numpy-floats", type=float, default=2e7,
                   help="above this many data floats NumPy is timed one round per block")
    p.add_argument("--gib", type=float, default=1.0, help="GiB copied to measure the bandwidth")
    p.add_argument("--networks", nargs="?", const=NETWORKS, default=None,
                   help=f"also time these network experiments (default {NETWORKS})")
    p.add_argument("--network-rounds", type=int, default=6,
                   help="rounds of each network run (>= 2: the first is the warm-up)")
    args = p.parse_args(argv)
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    bandwidth = copy_bandwidth(args.device, args.gib)
    load_before = os.getloadavg()
    rows = []
    for size in args.sizes.split(","):
        n, d, m = (int(float(v)) for v in size.lower().split("x"))
        rows.extend(size_rows(n, d, m, args, bandwidth))
        print(f"{size} done", file=sys.stderr, flush=True)
    print(f"device {args.device}"
          + (f" ({torch.cuda.get_device_name(args.device)})" if args.device != "cpu" else "")
          + f"; copy bandwidth {bandwidth / 1e9:.3g} GB/s; host {machine()}\n")
    print(size_table(rows))
    if args.networks:
        print()
        print(network_table(network_rows(args.networks.split(","), args.device,
                                         args.network_rounds)))
    load_after = os.getloadavg()
    print(f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}; {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
