"""Round time of networks on the simulator (vmap over clients) vs a per-client autograd loop.

One FedMiD round (K local prox-SGD steps of minibatch b per client, every client
participating) on an MLP and on the CNN of FedCanon, for 10, 30 and 100 clients:

* **vmap**: ``fedcomp.simulate`` with :class:`fedcomp.losses.TorchModel` — each local step
  is one batched forward/backward for the whole block of clients;
* **loop**: the same round written the usual way, one client at a time: load the client's
  parameters into the ``nn.Module``, ``loss.backward()`` per local step, update, prox.

Both run in float32 on the CPU in this process, on the same data and minibatch indices.
Target (issue 6): vmap ≥ 5× faster than the loop at 100 clients.

Roofline: the floating-point work of one client's local
step (forward + backward, counted by ``torch.utils.flop_counter``), the rate each path
achieves, and the machine's float32 matrix-multiply rate measured in the same process
(a 2048² ``sgemm``). A batched round does the same arithmetic as the loop, so its
speed-up is at most ``sgemm rate / loop rate``: where the loop already runs near the
machine's peak (compute-bound: FedCanon's CNN), no batching can reach a large factor;
where it is dominated by per-client Python and dispatch overhead (the MLP), vmap can.

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

#: ``--models`` names: (TorchModel network, options). ``cnn`` is the classic 32/64-channel
#: 5×5 network; ``cnn_digits`` the smaller one ``fedcomp/configs/fedcanon_nn.toml`` trains on
#: digits.
NETWORKS = {
    "mlp": ("mlp", {"hidden": [128]}),
    "cnn": ("cnn", {"channels": [32, 64]}),
    "cnn_digits": ("cnn", {"channels": [16, 32], "kernel_size": 3}),
}


def make_problem(model: str, n_clients: int, side: int, samples: int = 60) -> fedcomp.Problem:
    """Random images ``(1, side, side)`` with 10 classes, ``samples`` per client, float32."""
    rng = np.random.default_rng(0)
    feats = rng.random((n_clients, samples, 1, side, side)).astype(np.float32)
    targs = rng.integers(0, 10, (n_clients, samples))
    data = ClientData(torch.from_numpy(feats), torch.from_numpy(targs),
                      np.full(n_clients, samples))
    name, options = NETWORKS[model]
    loss = TorchModel(name, input_shape=(1, side, side), n_classes=10, options=options)
    return fedcomp.Problem(loss, Masked(L1(ALPHA), loss.layout().weight_mask()), data)


def vmap_round(problem: fedcomp.Problem, rounds: int) -> float:
    algorithm = fedcomp.fedmid(client_lr=LR, local_steps=LOCAL_STEPS)
    tic = time.perf_counter()
    fedcomp.simulate(algorithm, problem, rounds, batch_size=BATCH, metrics=[],
                     options=fedcomp.RunOptions(progress=False))
    return (time.perf_counter() - tic) / rounds


def loop_round(problem: fedcomp.Problem, rounds: int) -> float:
    """The same FedMiD rounds, one client at a time with ``backward()``.

    The minibatch indices (the simulator's, so both paths see the same samples) are drawn
    before the clock starts and each client's tensors indexed directly: the loop is timed
    for its gradients and updates only, not for fedcomp's batch assembly.
    """
    loss: TorchModel = problem.loss  # type: ignore[assignment]
    net = loss.network()
    params = list(net.parameters())
    data = problem.data
    indices = {(r, i, k): torch.as_tensor(minibatch_indices(
        0, r, np.array([i]), data.counts[[i]], k, BATCH)[0])
        for r in range(rounds) for i in range(problem.n_clients) for k in range(LOCAL_STEPS)}
    x = torch.as_tensor(problem.initial_model(), dtype=torch.float32)
    tic = time.perf_counter()
    for r in range(rounds):
        avg = torch.zeros_like(x)
        for i in range(problem.n_clients):
            y = x.clone()
            for k in range(LOCAL_STEPS):
                index = indices[r, i, k]
                torch.nn.utils.vector_to_parameters(y, params)
                net.zero_grad()
                out = net(data.features[i][index])
                torch.nn.functional.cross_entropy(out, data.targets[i][index]).backward()
                grad = torch.cat([p.grad.reshape(-1) for p in params])
                y = problem.regularizer.prox((y - LR * grad)[None], LR)[0]
            avg += (y - x) / problem.n_clients
        x = problem.regularizer.prox((x + avg)[None], LR * LOCAL_STEPS)[0]
    return (time.perf_counter() - tic) / rounds


def best_of_interleaved(problem: fedcomp.Problem, rounds: int, repeats: int
                        ) -> tuple[float, float]:
    """Best seconds per round of each path, the repeats alternating vmap and loop: when
    the machine slows down or speeds up during a run (this box drifts by up to 30 %), both
    paths see it alike and their ratio stays honest."""
    t_vmap = t_loop = float("inf")
    for _ in range(repeats):
        t_vmap = min(t_vmap, vmap_round(problem, rounds))
        t_loop = min(t_loop, loop_round(problem, rounds))
    return t_vmap, t_loop


def step_flops(problem: fedcomp.Problem) -> float:
    """Floating-point operations of one client's local step (forward + backward)."""
    from torch.utils.flop_counter import FlopCounterMode

    loss: TorchModel = problem.loss  # type: ignore[assignment]
    net = loss.network()
    index = minibatch_indices(0, 0, np.array([0]), problem.data.counts[[0]], 0, BATCH)
    batch = problem.data.minibatch(np.array([0]), index)
    with FlopCounterMode(display=False) as counter:
        out = net(batch.features[0])
        torch.nn.functional.cross_entropy(out, batch.targets[0]).backward()
    return float(counter.get_total_flops())


def matmul_rate(size: int = 2048, repeats: int = 5) -> float:
    """The CPU's float32 matrix-multiply rate (FLOP/s) in this process: the roofline."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - tic)
    return 2 * size**3 / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="10,30,100")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--input", type=int, default=8, help="image side (8: digits, 28: MNIST)")
    parser.add_argument("--models", default="mlp,cnn,cnn_digits",
                        help=f"comma-separated, of {', '.join(NETWORKS)}")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc thresholds as they are (fedcomp's command "
                             "line calls fedcomp.runtime.reuse_freed_memory; this measures "
                             "without it)")
    args = parser.parse_args()
    unknown = sorted(set(args.models.split(",")) - set(NETWORKS))
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(NETWORKS)}")
    tuned = False if args.default_malloc else fedcomp.runtime.reuse_freed_memory()
    print(f"# malloc keeps freed buffers for reuse: {tuned}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}; FedMiD, K={LOCAL_STEPS}, b={BATCH}, "
          f"input 1x{args.input}x{args.input}")
    peak = matmul_rate()
    print(f"# float32 matmul rate (2048² sgemm): {peak / 1e9:.0f} GFLOP/s")
    print("| model | clients | parameters | vmap ms/round | loop ms/round | speed-up "
          "| loop GFLOP/s | vmap GFLOP/s | bound (peak/loop) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for model in args.models.split(","):
        for n in (int(c) for c in args.clients.split(",")):
            problem = make_problem(model, n, args.input)
            vmap_round(problem, 1)  # warm-up (first vmap call traces the network)
            loop_round(problem, 1)
            t_vmap, t_loop = best_of_interleaved(problem, args.rounds, args.repeats)
            work = step_flops(problem) * LOCAL_STEPS * n  # FLOP per round (gradients only)
            row = {"model": model, "clients": n, "parameters": problem.param_shape[0],
                   "vmap_ms": 1e3 * t_vmap, "loop_ms": 1e3 * t_loop, "speedup": t_loop / t_vmap,
                   "loop_gflops": work / t_loop / 1e9, "vmap_gflops": work / t_vmap / 1e9,
                   "bound": peak * t_loop / work}
            rows.append(row)
            print(f"| {model} | {n} | {row['parameters']} | {row['vmap_ms']:.1f} | "
                  f"{row['loop_ms']:.1f} | {row['speedup']:.1f}x | {row['loop_gflops']:.1f} | "
                  f"{row['vmap_gflops']:.1f} | {row['bound']:.1f}x |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
