"""Forward + backward of the FedCanon CNN's second convolution for 100 clients, three ways.

The layer that dominates the CNN round of ``benchmarks/torch_round.py`` (issue 6): 32 → 64
channels, 5×5 kernels, padding 2, on the 4×4 maps left of 8×8 digits after the first
block, 20 images per client, each client with its own kernel. One forward and one
backward (input and kernel gradients) of all clients:

* **grouped**: one grouped convolution over the stacked clients (what ``vmap`` produces,
  and ``TorchModel``'s hand-batched forward with the bias fused in);
* **grouped, channels-last**: the same in NHWC layout;
* **im2col**: ``unfold`` + one batched matrix product per client (``bmm``) + ``fold`` in
  the backward pass;
* **bmm only**: the batched product alone (no unfold/fold) — the best im2col could do;
* **loop**: one ``conv2d`` + ``backward`` per client (the per-client autograd loop).

If the loop is already as fast as the batched kernels here, no batching of this layer can
give the round a large speed-up. Best of 5, float32, this process's torch threads.

    python benchmarks/conv_batching.py [--clients 100]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import fedcomp

IMAGES, CHANNELS_IN, SIDE, CHANNELS_OUT, KERNEL = 20, 32, 4, 64, 5


def best_ms(run: Callable[[], None], repeats: int = 5) -> float:
    run()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - tic)
    return 1e3 * best


def variants(clients: int) -> dict[str, Callable[[], None]]:
    """Each way of computing the layer's forward and backward for every client."""
    torch.manual_seed(0)
    b, n, c, h, o, k = clients, IMAGES, CHANNELS_IN, SIDE, CHANNELS_OUT, KERNEL
    images = torch.randn(b, n, c, h, h, requires_grad=True)
    kernels = torch.randn(b, o, c, k, k, requires_grad=True)

    def grouped(layout: torch.memory_format = torch.contiguous_format) -> None:
        stacked = images.transpose(0, 1).reshape(n, b * c, h, h).contiguous(memory_format=layout)
        weight = kernels.reshape(b * o, c, k, k).contiguous(memory_format=layout)
        F.conv2d(stacked, weight, padding=k // 2, groups=b).sum().backward()

    def im2col() -> None:
        cols = F.unfold(images.reshape(b * n, c, h, h), k, padding=k // 2)  # (bn, ckk, hh)
        cols = cols.reshape(b, n, c * k * k, h * h).transpose(2, 3).reshape(b, n * h * h, -1)
        torch.bmm(cols, kernels.reshape(b, o, c * k * k).transpose(1, 2)).sum().backward()

    cols = torch.randn(b, n * h * h, c * k * k, requires_grad=True)
    weights = torch.randn(b, c * k * k, o, requires_grad=True)

    def bmm_only() -> None:
        torch.bmm(cols, weights).sum().backward()

    def loop() -> None:
        for i in range(b):
            x_i = images[i].detach().requires_grad_(True)
            w_i = kernels[i].detach().requires_grad_(True)
            F.conv2d(x_i, w_i, padding=k // 2).sum().backward()

    return {"grouped": grouped, "grouped, channels-last": lambda: grouped(torch.channels_last),
            "im2col": im2col, "bmm only": bmm_only, "loop": loop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    args = parser.parse_args()
    fedcomp.runtime.reuse_freed_memory()  # as fedcomp's command line runs
    flop = 3 * 2 * args.clients * IMAGES * SIDE**2 * CHANNELS_IN * KERNEL**2 * CHANNELS_OUT
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; {args.clients} "
          f"clients x {IMAGES} images, {CHANNELS_IN}->{CHANNELS_OUT} channels, "
          f"{KERNEL}x{KERNEL} on {SIDE}x{SIDE}; {flop / 1e9:.1f} GFLOP forward + backward")
    print("| way | ms | GFLOP/s |\n|---|---:|---:|")
    for name, run in variants(args.clients).items():
        ms = best_ms(run)
        print(f"| {name} | {ms:.1f} | {flop / ms / 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
