"""Round time of networks on the simulator (vmap over clients) vs a per-client autograd loop.

One FedMiD round (K local prox-SGD steps of minibatch b per client, every client
participating) on an MLP and on the CNN of FedCanon, for 10, 30 and 100 clients:

* **vmap**: ``fedcomp.simulate`` with :class:`fedcomp.losses.TorchModel` — each local step
  is one batched forward/backward for the whole block of clients;
* **loop**: the same round written the usual way, one client at a time: load the client's
  parameters into the ``nn.Module``, ``loss.backward()`` per local step, update, prox.

Both run in float32 on the CPU in this process, on the same data and minibatch indices.
Target (issue 6): vmap ≥ 5× faster than the loop at 100 clients.

    python benchmarks/torch_round.py [--clients 10,30,100] [--rounds 3] [--input 8]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import torch

import fedcomp
from fedcomp._random import minibatch_indices
from fedcomp.data import ClientData
from fedcomp.losses import TorchModel
from fedcomp.regularizers import L1, Masked

LOCAL_STEPS, BATCH, LR, ALPHA = 5, 20, 0.05, 1e-4


def make_problem(model: str, n_clients: int, side: int, samples: int = 60) -> fedcomp.Problem:
    """Random images ``(1, side, side)`` with 10 classes, ``samples`` per client, float32."""
    rng = np.random.default_rng(0)
    feats = rng.random((n_clients, samples, 1, side, side)).astype(np.float32)
    targs = rng.integers(0, 10, (n_clients, samples))
    data = ClientData(torch.from_numpy(feats), torch.from_numpy(targs),
                      np.full(n_clients, samples))
    options = {"hidden": [128]} if model == "mlp" else {"channels": [32, 64]}
    loss = TorchModel(model, input_shape=(1, side, side), n_classes=10, options=options)
    return fedcomp.Problem(loss, Masked(L1(ALPHA), loss.layout().weight_mask()), data)


def vmap_round(problem: fedcomp.Problem, rounds: int) -> float:
    algorithm = fedcomp.fedmid(client_lr=LR, local_steps=LOCAL_STEPS)
    tic = time.perf_counter()
    fedcomp.simulate(algorithm, problem, rounds, batch_size=BATCH, metrics=[], progress=False)
    return (time.perf_counter() - tic) / rounds


def loop_round(problem: fedcomp.Problem, rounds: int) -> float:
    """The same FedMiD rounds, one client at a time with ``backward()``."""
    loss: TorchModel = problem.loss  # type: ignore[assignment]
    net = loss.network()
    params = list(net.parameters())
    data = problem.data
    x = torch.as_tensor(problem.initial_model(), dtype=torch.float32)
    tic = time.perf_counter()
    for r in range(rounds):
        avg = torch.zeros_like(x)
        for i in range(problem.n_clients):
            y = x.clone()
            for k in range(LOCAL_STEPS):
                index = minibatch_indices(0, r, np.array([i]), data.counts[[i]], k, BATCH)
                batch = data.minibatch(np.array([i]), index)
                torch.nn.utils.vector_to_parameters(y, params)
                net.zero_grad()
                out = net(batch.features[0])
                torch.nn.functional.cross_entropy(out, batch.targets[0]).backward()
                grad = torch.cat([p.grad.reshape(-1) for p in params])
                y = problem.regularizer.prox((y - LR * grad)[None], LR)[0]
            avg += (y - x) / problem.n_clients
        x = problem.regularizer.prox((x + avg)[None], LR * LOCAL_STEPS)[0]
    return (time.perf_counter() - tic) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="10,30,100")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--input", type=int, default=8, help="image side (8: digits, 28: MNIST)")
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}; FedMiD, K={LOCAL_STEPS}, b={BATCH}, "
          f"input 1x{args.input}x{args.input}")
    print("| model | clients | parameters | vmap ms/round | loop ms/round | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for model in args.models.split(","):
        for n in (int(c) for c in args.clients.split(",")):
            problem = make_problem(model, n, args.input)
            vmap_round(problem, 1)  # warm-up (first vmap call traces the network)
            loop_round(problem, 1)
            t_vmap = min(vmap_round(problem, args.rounds) for _ in range(args.repeats))
            t_loop = min(loop_round(problem, args.rounds) for _ in range(args.repeats))
            row = {"model": model, "clients": n, "parameters": problem.param_shape[0],
                   "vmap_ms": 1e3 * t_vmap, "loop_ms": 1e3 * t_loop, "speedup": t_loop / t_vmap}
            rows.append(row)
            print(f"| {model} | {n} | {row['parameters']} | {row['vmap_ms']:.1f} | "
                  f"{row['loop_ms']:.1f} | {row['speedup']:.1f}x |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
