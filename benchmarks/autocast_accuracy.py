"""Accuracy of ``TorchModel(autocast="bf16")``: the report's small networks trained in
float32 and with bfloat16 autocast, same seeds, same rounds.

Two of the report's network experiments, from their configurations
(``fedcomp/configs/``), on the torch backend in float32 (the master weights):

* **feddr_mlp**: FedDR (K = 20 SGD steps of batch 10, 10 of 30 clients a round) on the
  60-32-10 MLP, Synthetic(1,1), g = 0.01‖x‖₁, 100 rounds;
* **fedcanon_nn**: FedCanon (K = 10 steps of batch 20, every client) on the 16/32-channel
  3×3 CNN on the bundled 8×8 digits (20 % held out), SCAD on the weights, 30 rounds.

Each is run with ``[problem] autocast`` unset (float32 compute) and ``"bf16"`` (the
network's forward/backward in bfloat16, the model, its gradient, the prox and the server
step in float32), from the same start with the same minibatch and client draws. Printed:
the final objective of each run as its own loss evaluates it and the bf16 run's final
model evaluated in float32, the final test (or train) accuracy, the difference of the two
final models relative to the float32 model (largest entry; l2 norm), and the time a round
(a run's wall time over its rounds, evaluation rows included, best of ``--repeats``).
At these networks' sizes the casts to and from bfloat16 cost about what the 16-bit
products save, even on a CPU with bfloat16 units (AMX): autocast is a GPU option for
speed, and on a CPU a way to see its accuracy.

    python benchmarks/autocast_accuracy.py [--rounds N] [--repeats 1] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import fedcomp
from fedcomp._array import to_numpy
from fedcomp.config import load
from fedcomp.experiments import build_problem

#: (configuration, its algorithm, batch size, clients a round, rounds)
CASES = {
    "feddr_mlp": (lambda: fedcomp.feddr(eta=1.0, alpha=1.95, client_lr=0.01, local_steps=20),
                  10, 10, 100),
    "fedcanon_nn": (lambda: fedcomp.fedcanon(client_lr=0.1, local_steps=10, server_lr=1.0),
                    20, None, 30),
}


def problem_of(name: str, autocast: str | None, seed: int):
    """The base setting of configuration ``name`` with ``[problem] autocast``."""
    config = load(name)
    if autocast is not None:
        config["problem"]["autocast"] = autocast
    return build_problem(config, seed=seed)


def train(name: str, autocast: str | None, rounds: int, seed: int, repeats: int):
    """``(final row, final model, seconds a round)`` of one run (best time of ``repeats``)."""
    algorithm, batch, clients, _ = CASES[name]
    problem = problem_of(name, autocast, seed)
    accuracy = "test_accuracy" if problem.data.holdout is not None else "train_accuracy"
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        result = fedcomp.simulate(algorithm(), problem, rounds, batch_size=batch,
                                  clients_per_round=clients, eval_every=rounds, seed=seed,
                                  metrics=["objective", accuracy])
        best = min(best, time.perf_counter() - start)
    row = result.history[-1]
    return row, np.asarray(to_numpy(result.x), dtype=np.float64), best / rounds, accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds of every case (default: 100 for feddr_mlp, 30 for "
                             "fedcanon_nn)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import torch

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), float32 master weights, "
          f"seed {args.seed}")
    print("| experiment | rounds | objective fp32 | objective bf16 (own / fp32 eval) | "
          "accuracy fp32 / bf16 | model diff max / l2 | s/round fp32 / bf16 |")
    print("|---|---|---|---|---|---|---|")
    for name, (_, _, _, default_rounds) in CASES.items():
        rounds = args.rounds or default_rounds
        row32, x32, t32, accuracy = train(name, None, rounds, args.seed, args.repeats)
        row16, x16, t16, _ = train(name, "bf16", rounds, args.seed, args.repeats)
        # the bf16 model's objective as float32 computes it: its accuracy, not its loss's
        fp32_eval = problem_of(name, None, args.seed).objective(
            problem_of(name, None, args.seed).as_model(x16))
        rel = float(np.max(np.abs(x16 - x32)) / np.max(np.abs(x32)))
        rel_l2 = float(np.linalg.norm(x16 - x32) / np.linalg.norm(x32))
        print(f"| {name} | {rounds} | {row32['objective']:.4f} | {row16['objective']:.4f} / "
              f"{float(fp32_eval):.4f} | {accuracy.split('_')[0]} {row32[accuracy]:.3f} / "
              f"{row16[accuracy]:.3f} | {rel:.1e} / {rel_l2:.1e} | {t32 * 1e3:.1f} ms / "
              f"{t16 * 1e3:.1f} ms |")


if __name__ == "__main__":
    main()
