"""Milliseconds per ZA1 round: the NumPy engine, the compiled (jax) engine, hand-written jax.

The round of ``benchmarks/run.py`` (``fedcomp bench``): ZA1 (tau = 5 local steps,
client_lr = 0.1, full local gradients, float64, every client every round) on l1-regularised
logistic regression (``synthetic_fedprox``, 20 samples per client), at clients x d = 30 x 60,
100 x 1024 and 1000 x 100, all in this process:

* ``numpy``: :func:`fedcomp.simulate` on NumPy, ``client_block="auto"``;
* ``jax engine``: :func:`fedcomp.simulate` on the same data as jax arrays
  (``backend = "jax"``): the whole round one ``jax.jit`` call;
* ``jax.jit(vmap)``: the round written by hand (``benchmarks/run.py``'s ``jax_za1``);
* ``torch``: :func:`fedcomp.simulate` on torch float64 tensors (the torch backend), and a
  hand-written torch round eager and under ``torch.compile`` (``--torch``): does compiling
  pay for the torch backend?

A simulator's time per round is read between evaluation rows (``eval_every = --block``, no
metrics: everything ``simulate`` does in a round, the divergence check included): the
median over ``--blocks`` blocks of ``--block`` rounds, after a first block of warm-up (the
jax engine traces and compiles in its first round). A hand-written round is timed alike:
the median over ``--blocks`` runs of ``--block`` rounds after a warm-up run. Each engine is
timed ``--repeats`` times, the engines interleaved, and the median reported. Each engine's
model after 5 rounds is checked against NumPy's. fedcomp's persistent compilation cache is
off here (``FEDCOMP_JAX_CACHE=off``): the compile times reported are compilations, not
reads of an earlier run's executables.

    python benchmarks/jax_engine.py [--sizes 30x60,100x1024,1000x100] [--torch]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# compile times are what this table reports: no executables read back from disk (the cache
# would also hold the hand-written round, compiled in the same process after jax_like)
os.environ["FEDCOMP_JAX_CACHE"] = "off"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import ALGORITHM, _algorithm, _RowTimes, build, config, jax_za1  # noqa: E402

#: Rounds of the agreement check (the "max abs diff" column).
CHECK_ROUNDS = 5


def simulator_ms(problem: Any, block: int, blocks: int) -> tuple[float, float]:
    """``(ms per round, seconds the first block took beyond a timed one)`` of ``simulate``.

    Rows every ``block`` rounds; the first block is the warm-up (the jax engine traces and
    compiles in its first round: that excess is the second number).
    """
    from fedcomp import RunOptions, simulate

    clock = _RowTimes()
    simulate(_algorithm(), problem, block * (blocks + 1), metrics=[], eval_every=block,
             options=RunOptions(logger=clock, progress=False))
    t = np.diff(np.asarray(clock.times))  # t[k]: the (k+1)-th block of rounds
    per_round = float(np.median(t[1:])) / block
    return 1e3 * per_round, float(t[0] - block * per_round)


def final_model(problem: Any, rounds: int) -> Any:
    from fedcomp import RunOptions, simulate

    return simulate(_algorithm(), problem, rounds, metrics=[], options=RunOptions(progress=False)).x


def repeated_ms(run: Callable[[int], Any], block: int, blocks: int) -> float:
    """Median over ``blocks`` calls of ``run(block)`` (after one warm-up call), per round."""
    run(block)
    times = []
    for _ in range(blocks):
        tic = time.perf_counter()
        run(block)
        times.append((time.perf_counter() - tic) / block)
    return 1e3 * float(np.median(times))


def torch_za1(problem: Any, compiled: bool, device: str = "cpu"
              ) -> Callable[[int], np.ndarray]:
    """ZA1 rounds written by hand in torch (the same update as ``jax_za1``), eager or under
    ``torch.compile``, on ``device``; ``run(rounds) -> prox(x_bar^R)`` on the host."""
    import torch

    lr, steps = ALGORITHM["client_lr"], ALGORITHM["local_steps"]
    big_step = lr * steps
    data = problem.data
    # torch tensors stay on their device; states in the data's dtype
    features = torch.as_tensor(data.features, device=device)
    targets = torch.as_tensor(data.targets, device=device)
    sample_w = torch.as_tensor(data.sample_weights(), device=device)
    pi = torch.as_tensor(problem.weights / problem.weights.sum(), dtype=features.dtype,
                         device=device)
    l2, alpha = problem.loss.l2, problem.regularizer.alpha

    def prox(v: Any, step: float) -> Any:
        return torch.sign(v) * torch.clamp(torch.abs(v) - step * alpha, min=0.0)

    def one_round(x: Any, x_post: Any, anchor: Any, grad_mean: Any, started: Any) -> Any:
        correction = started[:, None] * ((anchor - x) / big_step - grad_mean)
        z = prox(x.expand_as(anchor), big_step)
        new_anchor, z_hat, grad_sum = z, z, torch.zeros_like(z)
        for t in range(steps):
            margin = targets * torch.einsum("bmd,bd->bm", features, z)
            coef = -0.5 * sample_w * targets * (1.0 - torch.tanh(0.5 * margin))
            g = torch.einsum("bm,bmd->bd", coef, features) + l2 * z
            grad_sum = grad_sum + g
            z_hat = z_hat - lr * (g + correction)
            z = prox(z_hat, (t + 1) * lr)
        x = x_post + (pi @ z_hat - x_post)
        return x, prox(x, big_step), new_anchor, grad_sum / steps, torch.ones_like(started)

    step = torch.compile(one_round, dynamic=False) if compiled else one_round
    n, d = problem.n_clients, problem.param_shape[0]

    def run(rounds: int) -> np.ndarray:
        zeros = functools.partial(torch.zeros, dtype=features.dtype, device=device)
        x = zeros(d)
        state = (x, prox(x, big_step), zeros(n, d), zeros(n, d), zeros(n))
        with torch.no_grad():
            for _ in range(rounds):
                state = step(*state)
        return state[1].cpu().numpy()

    return run


def size_rows(n_clients: int, n_features: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows of one size: each engine timed ``--repeats`` times, interleaved (so a change
    of the machine's load falls on every engine alike), the median reported."""
    # the check: CHECK_ROUNDS rounds (this ZA1 instance amplifies rounding differences by
    # about 1.6 per round, every implementation alike: after 65 rounds the reference loop
    # itself is 6e-4 from the simulator)
    problem = build(config(n_clients, n_features, CHECK_ROUNDS))
    jproblem = build(config(n_clients, n_features, CHECK_ROUNDS, backend="jax"))
    x_ref = final_model(problem, CHECK_ROUNDS)
    hand = jax_za1(problem)
    tic = time.perf_counter()
    hand(1)
    hand_compile = time.perf_counter() - tic
    timers: dict[str, Callable[[], float]] = {
        "numpy (auto blocks)": lambda: simulator_ms(problem, args.block, args.blocks)[0],
        "jax engine": lambda: _note_first(jproblem, args),
        "jax.jit(vmap) by hand": lambda: repeated_ms(hand, args.block, args.blocks),
    }
    models = {"numpy (auto blocks)": x_ref, "jax engine": final_model(jproblem, CHECK_ROUNDS),
              "jax.jit(vmap) by hand": hand(CHECK_ROUNDS)}
    notes = {"jax.jit(vmap) by hand": f"compile {hand_compile:.2f} s"}
    if args.torch:
        import torch

        tproblem = build(config(n_clients, n_features, CHECK_ROUNDS, backend="torch-float64"))
        timers["torch engine"] = lambda: simulator_ms(tproblem, args.block, args.blocks)[0]
        models["torch engine"] = final_model(tproblem, CHECK_ROUNDS).numpy()
        notes["torch engine"] = f"{torch.get_num_threads()} threads"
        for compiled in (False, True):
            name = "torch by hand, " + ("torch.compile" if compiled else "eager")
            run = torch_za1(problem, compiled)
            tic = time.perf_counter()
            run(1)
            if compiled:
                notes[name] = f"compile {time.perf_counter() - tic:.1f} s"
            timers[name] = functools.partial(repeated_ms, run, args.block, args.blocks)
            models[name] = run(CHECK_ROUNDS)
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(args.repeats):
        for name, timer in timers.items():
            times[name].append(timer())
    notes["jax engine"] = f"trace + compile in round 1: {np.median(FIRST):.2f} s"
    FIRST.clear()
    return [dict(size=f"{n_clients} x {n_features}", engine=name, ms=float(np.median(ms)),
                 diff=float(np.max(np.abs(np.asarray(models[name], dtype=np.float64) - x_ref))),
                 note=notes.get(name, "")) for name, ms in times.items()]


#: The jax engine's first-block excess (its trace and compilation) of each timing.
FIRST: list[float] = []


def _note_first(problem: Any, args: argparse.Namespace) -> float:
    ms, first = simulator_ms(problem, args.block, args.blocks)
    FIRST.append(first)
    return ms


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| clients x d | engine | ms / round | max abs diff to NumPy | note |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['engine']} | {r['ms']:.3g} | {r['diff']:.1e} | "
                     f"{r['note']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="30x60,100x1024,1000x100")
    p.add_argument("--block", type=int, default=20,
                   help="rounds per timed block (one more block is the warm-up)")
    p.add_argument("--blocks", type=int, default=7, help="timed blocks (median)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timings of each engine, interleaved (median)")
    p.add_argument("--torch", action="store_true",
                   help="also the torch backend and a hand-written torch round, eager and "
                        "under torch.compile")
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    rows = []
    for size in args.sizes.split(","):
        n, d = (int(v) for v in size.lower().split("x"))
        rows.extend(size_rows(n, d, args))
        print(f"{size} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(table(rows))
    print(f"\nload average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}; {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
