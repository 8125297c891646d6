"""GPU kernel launches per network round, as K and the clients of a block grow.

Issue 46's target: on a GPU the kernels a round launches do not grow with the local steps
K or with the clients in a block. This counts them with ``torch.profiler`` (CUPTI's
activity records, which see every kernel the process launches on the GPU, whichever
library launched it: torch's eager kernels and XLA's for the jax engine alike) over R
rounds of FedDR on the 60-32-10 MLP (``benchmarks/jax_networks.py``'s ``feddr_mlp``) and
prints kernels a round for torch eager on ``cuda`` and for the jax compiled engine, at
K = 10 and 20 and 10 and 20 clients a round, each after a run that compiles.

    python benchmarks/launch_counts.py [--rounds 4]

Needs a CUDA GPU (torch and jax on it); on a machine without one it says so and exits 0.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import torch

import fedcomp
from fedcomp import Problem
from fedcomp.data import synthetic_fedprox
from fedcomp.losses import TorchModel
from fedcomp.regularizers import L1
from fedcomp.runtime import jax_like


def problem_on(like, clients: int) -> Problem:
    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=max(30, clients),
                             n_features=60, n_classes=10, seed=0)
    loss = TorchModel("mlp", input_shape=(60,), n_classes=10, options={"hidden": [32]})
    return Problem(loss, L1(0.01), data.to(like), n_classes=10)


def kernels_a_round(like, steps: int, clients: int, rounds: int
                    ) -> tuple[float, float, float]:
    """``(GPU kernels a round, host-to-device copies a round, ms of kernel time a round)``
    of ``rounds`` rounds."""
    from torch.profiler import ProfilerActivity, profile

    problem = problem_on(like, clients)
    algorithm = fedcomp.feddr(eta=1.0, alpha=1.95, client_lr=0.01, local_steps=steps)

    def run() -> None:
        result = fedcomp.simulate(algorithm, problem, rounds, batch_size=10,
                                  clients_per_round=clients, eval_every=rounds,
                                  metrics=["objective"])
        float(np.asarray(fedcomp._array.to_numpy(result.x)).sum())  # wait for the device

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run()  # compiles (jax), warms the caching allocator (torch)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    events = prof.events()
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                  and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())
    copies = sum(1 for e in events if "memcpy htod" in e.name.lower())
    busy_us = sum(e.device_time_total for e in events
                  if e.device_type == torch.autograd.DeviceType.CUDA)
    return kernels / rounds, copies / rounds, busy_us / rounds / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to count")
        return
    engines = {"torch eager (cuda)": torch.zeros(0, device="cuda"),
               "jax compiled": jax_like("float32")}
    print(f"# kernels a round on {torch.cuda.get_device_name(0)}, {args.rounds} rounds "
          "counted after a compiling run (torch.profiler, CUDA activity)")
    print("| engine | K | clients a round | kernels a round | host-to-device copies a round "
          "| GPU busy ms a round |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, like in engines.items():
        for steps, clients in ((10, 10), (20, 10), (10, 20)):
            try:
                kernels, copies, busy = kernels_a_round(like, steps, clients, args.rounds)
                print(f"| {name} | {steps} | {clients} | {kernels:.0f} | {copies:.0f} | "
                      f"{busy:.2f} |", flush=True)
            except Exception as exc:  # report and go on: one engine's failure is a finding
                print(f"| {name} | {steps} | {clients} | failed: {type(exc).__name__}: "
                      f"{str(exc)[:120]} | |", flush=True)


if __name__ == "__main__":
    main()
