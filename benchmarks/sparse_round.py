"""Seconds per ZA1 round on sparse, high-dimensional data, against hand-written rounds.

    python benchmarks/sparse_round.py [--shape rcv1] [--clients 100] [--rounds 5]
                                      [--dense-samples 2000] [--write docs/BENCHMARKS.md]
    fedcomp bench sparse ...          (the same)

The round: ZA1 (tau = 5 local steps, client_lr = 1, full local gradients, float64) on
l1-regularised logistic regression (l2 = 1e-3, alpha = 1e-4) over
:func:`fedcomp.data.sparse_text_clients` documents — rcv1.binary's shape by default
(20 242 x 47 236, 0.16 % nonzeros), 100 clients split by latent topic. Rows, all in one
process, each checked to compute the same iterate as the first:

* ``scipy-hand``: the round written here with ``scipy.sparse``: one CSR matrix per client,
  its margins ``A_i z`` and gradient ``A_iᵀ r`` per local step, client after client (the
  baseline every ratio is against);
* ``scipy-hand-block``: the same round with every client's rows in one block-diagonal CSR
  (one product per local step for all clients: the layout fedcomp uses);
* ``numpy``: :func:`fedcomp.simulate` on the sparse data, ``client_block="auto"``;
* ``torch``: the same on torch's sparse CSR (CPU; CUDA where a GPU is present);
* ``jax``: the same on ``jax.experimental.sparse.BCOO`` (eager: the compiled engine runs
  dense features only);
* ``numpy-dense``: :func:`fedcomp.simulate` on a dense copy. rcv1's dense array (100 clients
  x 408 padded rows x 47 236 features) would take 15 GB, so the dense comparison runs where
  a dense copy fits, sparse against dense on the same data: on the first
  ``--dense-clients`` clients of the same data (their documents and vocabulary as they
  are: a round's time is a sum over clients), on the first ``--dense-samples`` documents
  split among all clients (same vocabulary and density), and on every document over a
  vocabulary of ``--dense-features`` words (the same words per document).

Prints the table and the machine's load; ``--write`` puts it in ``docs/BENCHMARKS.md``
between the ``sparse`` markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

MARK_START, MARK_END = "<!-- sparse:start -->", "<!-- sparse:end -->"
LR, STEPS, L2, ALPHA = 1.0, 5, 1e-3, 1e-4


def problem_of(data: Any) -> Any:
    from fedcomp import Problem
    from fedcomp.losses import Logistic
    from fedcomp.regularizers import L1

    return Problem(Logistic(l2=L2), L1(ALPHA), data, weighting="samples")


def algorithm() -> Any:
    from fedcomp.algorithms import za1

    return za1(client_lr=LR, server_lr=1.0, local_steps=STEPS)


def soft_threshold(v: np.ndarray, t: float) -> np.ndarray:
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def logistic_grad(a: Any, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``∇ (1/n) Σ log(1 + exp(−y aᵀz)) + (l2/2)‖z‖²`` for one client's CSR rows."""
    t = y * (a @ z)
    coef = -0.5 * y * (1.0 - np.tanh(0.5 * t)) / len(y)
    return a.T @ coef + L2 * z


def hand_za1(matrices: list[Any], labels: list[np.ndarray], weights: np.ndarray,
             rounds: int) -> np.ndarray:
    """ZA1 (seed 000, Algorithm 1) with full gradients, client after client."""
    d = matrices[0].shape[1]
    n = len(matrices)
    big = LR * STEPS
    x_bar = np.zeros(d)
    correction = np.zeros((n, d))
    prev_post = prev_mean = None
    for r in range(rounds):
        post = soft_threshold(x_bar, big * ALPHA)
        if r > 0:
            correction = ((prev_post - x_bar) / big)[None] - prev_mean
        average = np.zeros(d)
        grad_mean = np.zeros((n, d))
        for i, (a, y) in enumerate(zip(matrices, labels, strict=True)):
            z_hat, z = post.copy(), post.copy()
            for t in range(STEPS):
                g = logistic_grad(a, y, z)
                grad_mean[i] += g / STEPS
                z_hat = z_hat - LR * (g + correction[i])
                z = soft_threshold(z_hat, (t + 1) * LR * ALPHA)
            average += weights[i] * z_hat
        x_bar = average
        prev_post, prev_mean = post, grad_mean
    return soft_threshold(x_bar, big * ALPHA)


def hand_za1_block(matrices: list[Any], labels: list[np.ndarray], weights: np.ndarray,
                   rounds: int) -> np.ndarray:
    """The same ZA1 with every client's rows in one block-diagonal CSR matrix."""
    d, n = matrices[0].shape[1], len(matrices)
    block = sparse.block_diag(matrices, format="csr")
    blockT = block.T.tocsr()
    y = np.concatenate(labels)
    scale = np.concatenate([np.full(len(v), 1.0 / len(v)) for v in labels])
    big = LR * STEPS
    x_bar = np.zeros(d)
    correction = np.zeros((n, d))
    prev_post = prev_mean = None

    def grads(z: np.ndarray) -> np.ndarray:
        t = y * (block @ z.reshape(-1))
        coef = -0.5 * y * (1.0 - np.tanh(0.5 * t)) * scale
        return (blockT @ coef).reshape(n, d) + L2 * z

    for r in range(rounds):
        post = soft_threshold(x_bar, big * ALPHA)
        if r > 0:
            correction = ((prev_post - x_bar) / big)[None] - prev_mean
        z_hat = np.repeat(post[None], n, axis=0)
        z = z_hat.copy()
        grad_mean = np.zeros((n, d))
        for t in range(STEPS):
            g = grads(z)
            grad_mean += g / STEPS
            z_hat = z_hat - LR * (g + correction)
            z = soft_threshold(z_hat, (t + 1) * LR * ALPHA)
        x_bar = weights @ z_hat
        prev_post, prev_mean = post, grad_mean
    return soft_threshold(x_bar, big * ALPHA)


def best_of(run: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Smallest wall time of ``repeats`` calls (after one warm-up call), and the result."""
    out = run()
    best = np.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - tic)
    return float(best), out


def simulated(problem: Any, rounds: int) -> Callable[[], np.ndarray]:
    from fedcomp import RunOptions, simulate
    from fedcomp._array import to_numpy

    return lambda: to_numpy(simulate(algorithm(), problem, rounds, metrics=[], eval_every=rounds,
                                     options=RunOptions(progress=False)).x)


def client_parts(data: Any) -> tuple[list[Any], list[np.ndarray]]:
    parts = [data.client_arrays(i) for i in range(data.n_clients)]
    return [sparse.csr_array(a) for a, _ in parts], [t for _, t in parts]


def rows(shape: Any, clients: int, rounds: int, repeats: int, dense_samples: int,
         dense_features: int, dense_clients: int) -> list[dict[str, Any]]:
    from fedcomp.data import sparse_text_clients

    data = sparse_text_clients(shape, n_clients=clients)
    problem = problem_of(data)
    matrices, labels = client_parts(data)
    weights = problem.weights
    out: list[dict[str, Any]] = []
    reference: np.ndarray | None = None

    def add(name: str, seconds: float, x: np.ndarray, note: str = "") -> None:
        nonlocal reference
        if reference is None:
            reference = x
        error = float(np.max(np.abs(x - reference)))
        assert error < 1e-9, f"{name} computes another iterate ({error:.2e})"
        out.append({"engine": name, "ms": 1e3 * seconds / rounds, "note": note,
                    "shape": f"{data.n_samples} x {data.feature_shape[0]}", "error": error})
        print(f"  {name:18s} {1e3 * seconds / rounds:9.1f} ms/round  {note}", flush=True)

    print(f"{data} {data.features}", flush=True)
    add("scipy-hand", *best_of(lambda: hand_za1(matrices, labels, weights, rounds), repeats))
    add("scipy-hand-block", *best_of(
        lambda: hand_za1_block(matrices, labels, weights, rounds), repeats))
    add("numpy", *best_of(simulated(problem, rounds), repeats))
    try:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        on_torch = problem_of(data.to(torch.zeros(0, dtype=torch.float64, device=device)))
        add(f"torch ({device})", *best_of(simulated(on_torch, rounds), repeats))
    except ImportError:
        print("  torch: not installed", flush=True)
    try:
        from fedcomp.runtime import jax_like

        on_jax = problem_of(data.to(jax_like()))
        add("jax (eager BCOO)", *best_of(simulated(on_jax, rounds), repeats))
    except ImportError:
        print("  jax: not installed", flush=True)
    # sparse against dense where the dense array fits: the first documents only, or all
    # of them over a smaller vocabulary (the same words per document)
    n, d, density = _shape(shape)
    few = min(dense_clients, data.n_clients)
    out.extend(sparse_against_dense(f"first {few} clients", data.subset(np.arange(few)),
                                    rounds, repeats))
    for label, reduced in (("fewer documents", (min(n, dense_samples), d, density)),
                           ("smaller vocabulary", (n, min(d, dense_features),
                                                   min(1.0, density * d / dense_features)))):
        out.extend(sparse_against_dense(label, sparse_text_clients(reduced, n_clients=clients),
                                        rounds, repeats))
    return out


def sparse_against_dense(label: str, small: Any, rounds: int, repeats: int
                         ) -> list[dict[str, Any]]:
    """fedcomp's NumPy round on sparse data and on a dense copy of the same data."""
    dense_data = type(small).from_lists(
        [small.client_arrays(i)[0].toarray() for i in range(small.n_clients)],
        [small.client_arrays(i)[1] for i in range(small.n_clients)])
    seconds_sparse, x_sparse = best_of(simulated(problem_of(small), rounds), repeats)
    seconds_dense, x_dense = best_of(simulated(problem_of(dense_data), rounds), repeats)
    error = float(np.max(np.abs(x_sparse - x_dense)))
    assert error < 1e-9, f"the dense round computes another iterate ({error:.2e})"
    note = f"{small.n_samples} x {small.feature_shape[0]}, {small.n_clients} clients"
    print(f"  {label}: sparse {1e3 * seconds_sparse / rounds:.1f} ms/round, dense "
          f"{1e3 * seconds_dense / rounds:.1f} ms/round on {note}", flush=True)
    return [{"engine": f"numpy, {label}", "ms": 1e3 * seconds_sparse / rounds,
             "note": "", "shape": note, "error": 0.0},
            {"engine": f"numpy-dense, {label}", "ms": 1e3 * seconds_dense / rounds,
             "note": f"dense features {dense_data.features.nbytes / 2**30:.2f} GiB",
             "shape": note, "error": error}]


def _shape(shape: Any) -> tuple[int, int, float]:
    from fedcomp.data import SHAPES

    return SHAPES[shape] if isinstance(shape, str) else shape


def table(out: Sequence[dict[str, Any]]) -> str:
    base = out[0]["ms"]
    dense = {r["shape"]: r["ms"] for r in out if r["engine"].startswith("numpy-dense")}
    lines = ["| round | data | ms / round | vs `scipy-hand` | note |",
             "|---|---|---:|---:|---|"]
    for r in out:
        ratio = f"{r['ms'] / base:.2f}x"
        if r["engine"].startswith("numpy, "):
            ratio = f"dense / sparse: {dense[r['shape']] / r['ms']:.1f}x"
        elif r["engine"].startswith("numpy-dense"):
            ratio = ""
        lines.append(f"| `{r['engine']}` | {r['shape']} | {r['ms']:.1f} | {ratio} | "
                     f"{r['note']} |")
    return "\n".join(lines)


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.processor() or platform.machine()}, {cores} cores"


def write_section(path: str | Path, body: str) -> None:
    path = Path(path)
    text = path.read_text()
    section = f"{MARK_START}\n{body}\n{MARK_END}"
    if MARK_START in text:
        head, rest = text.split(MARK_START, 1)
        text = head + section + rest.split(MARK_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="rcv1", help="rcv1, news20 or n,d,density")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dense-samples", type=int, default=2000)
    parser.add_argument("--dense-features", type=int, default=5000)
    parser.add_argument("--dense-clients", type=int, default=8)
    parser.add_argument("--write", default=None, help="a Markdown file to update")
    args = parser.parse_args(argv)
    shape: Any = args.shape
    if "," in shape:
        n, d, density = shape.split(",")
        shape = (int(n), int(d), float(density))
    load_before = os.getloadavg()[0]
    out = rows(shape, args.clients, args.rounds, args.repeats, args.dense_samples,
               args.dense_features, args.dense_clients)
    body = table(out)
    command = " ".join(["python benchmarks/sparse_round.py", *(argv or sys.argv[1:])])
    footer = (f"`{command}` on {machine()}, load average {load_before:.2f} before and "
              f"{os.getloadavg()[0]:.2f} after.")
    print(body)
    print(footer)
    if args.write:
        write_section(args.write, f"{body}\n\n{footer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
