"""Milliseconds per round of one federated round on every engine, in one process.

The round: ZA1 (tau = 5 local steps, client_lr = 0.1, full local gradients, float64) on
l1-regularised logistic regression (``synthetic_fedprox`` data, 20 samples per client,
l2 = 0.01, alpha = 1e-4), all clients every round. Engines, all on the same problem
instance and checked to compute the same iterate:

* ``loop``: the per-client reference loop (one client at a time, plain NumPy; the baseline
  every ratio is against);
* ``numpy``: :func:`fedcomp.simulate` on NumPy, ``client_block="auto"`` (and ``numpy-all``:
  ``client_block="all"``, one block of every client);
* ``torch``: :func:`fedcomp.simulate` on torch CPU (float64), ``client_block="auto"``, with
  torch's default threads and (``torch-1thread``) with one;
* ``jax``: :func:`fedcomp.simulate` on jax float64 arrays, the compiled engine (when jax
  is installed; its trace and compilation, in the first of the run's calls, excluded and
  reported separately);
* ``jax-hand``: the same round written here as ``jax.jit`` of a ``vmap`` over clients
  (compile time excluded and reported separately);
* ``ray``: :func:`fedcomp.simulate` with the clients on two Ray actors (``ray_clients``);
* ``flower``: fedcomp's Flower adapter on Flower's simulation engine (when flwr is
  installed): steady-state rounds from ``results.csv``'s ``wall_s`` (Ray start-up excluded),
  start-up reported separately.

It also measures the scaling of the NumPy simulator (time per round vs clients at fixed d,
and vs d at fixed clients; streaming samples, minibatches of 10, so data memory does not
grow with the problem) and the peak RSS of ZA1's client state in memory vs on disk
(``RunOptions(client_state="disk")``), each in a fresh subprocess.

    python benchmarks/run.py [--sizes 30x60,100x1024,1000x100] [--rounds 5] [--quick]
                             [--write docs/BENCHMARKS.md]
    fedcomp bench ...        (the same)
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

SIZES = ((30, 60), (100, 1024), (1000, 100))
ALGORITHM = {"name": "za1", "client_lr": 0.1, "local_steps": 5}
MARK_START, MARK_END = "<!-- bench:start -->", "<!-- bench:end -->"
SCALING_CLIENTS = (10, 100, 1000, 10000)
#: The engines ``--engines`` may name (the module's docstring says what each is).
ENGINES = ("loop", "numpy", "torch", "jax", "jax-hand", "ray", "flower")
SCALING_FEATURES = (10, 100, 1000, 10000)


def config(n_clients: int, n_features: int, rounds: int, backend: str = "numpy",
           samples: int = 20) -> dict[str, Any]:
    """The benchmark's fedcomp configuration (ZA1, l1 logistic regression, full gradients)."""
    return {
        "name": "bench", "rounds": rounds, "seeds": [0], "batch_size": ["full"],
        "reference": False, "metrics": ["objective"], "eval_every": rounds, "backend": backend,
        "data": {"generator": "synthetic_fedprox", "alpha": 1.0, "beta": 1.0, "n_classes": 2,
                 "n_clients": n_clients, "samples_per_client": samples,
                 "n_features": n_features},
        "problem": {"loss": "logistic", "l2": 0.01},
        "regularizer": {"name": "l1", "alpha": 1e-4},
        "algorithms": [dict(ALGORITHM)],
    }


def build(cfg: dict[str, Any]) -> Any:
    """The :class:`~fedcomp.Problem` of a benchmark configuration."""
    from fedcomp.experiments import build_problem, resolve

    return build_problem(resolve(cfg).base)


def _algorithm() -> Any:
    from fedcomp.algorithms import make_algorithm

    return make_algorithm(ALGORITHM["name"], **{k: v for k, v in ALGORITHM.items()
                                                 if k != "name"})


def best_of(run: Callable[[], Any], repeats: int, warm_up: bool = True) -> float:
    """Smallest wall time of ``repeats`` calls of ``run`` (after one warm-up call)."""
    if warm_up:
        run()
    best = np.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - tic)
    return float(best)


def simulator_round(problem: Any, rounds: int, repeats: int, **kwargs: Any) -> float:
    """Seconds per round of :func:`fedcomp.simulate` (no evaluation inside the timed rounds)."""
    from fedcomp import simulate
    from fedcomp.runtime._options import split_options

    algorithm = _algorithm()
    own, options = split_options({"progress": False, **kwargs})  # client_block is an option
    total = best_of(lambda: simulate(algorithm, problem, rounds, metrics=[], eval_every=rounds,
                                     options=options, **own), repeats)
    return total / rounds


class _RowTimes:
    """A logger that notes when each evaluation row is written."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def log(self, row: dict[str, Any]) -> None:
        self.times.append(time.perf_counter())


def compiled_round(problem: Any, rounds: int, repeats: int) -> tuple[float, float]:
    """``(seconds per round, seconds of the first call beyond its rounds)`` of the compiled
    engine: one run of ``rounds x (repeats + 1)`` rounds with a row every ``rounds`` (each
    ``simulate`` traces and compiles anew, so separate runs would time the compilation);
    the best of the ``repeats`` blocks after the first, whose excess is the compilation."""
    from fedcomp import RunOptions, simulate

    rows = _RowTimes()
    simulate(_algorithm(), problem, rounds * (repeats + 1), metrics=[], eval_every=rounds,
             options=RunOptions(logger=rows, progress=False))
    blocks = np.diff(np.asarray(rows.times))
    per_round = float(np.min(blocks[1:])) / rounds
    return per_round, float(blocks[0] - rounds * per_round)


def ray_round(problem: Any, rounds: int, repeats: int, shards: int = 2
              ) -> tuple[float, np.ndarray, float]:
    """Seconds per round with the clients on ``shards`` Ray actors (``ray_clients``), the
    final model, and the start-up (Ray and the actors) of one run.

    The rounds are timed from the runs' own ``wall_s`` (round time only), after the first
    round; a Ray instance is started here with ``shards`` CPUs unless one is running.
    """
    import ray

    from fedcomp import RunOptions, simulate
    from fedcomp.runtime import ray_clients

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=shards, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    try:
        x = simulate(_algorithm(), problem, rounds, metrics=[],  # the iterate the table compares
                     options=RunOptions(progress=False, clients=ray_clients(shards=shards))).x
        best, startup = np.inf, 0.0
        for _ in range(repeats):
            tic = time.perf_counter()
            run = simulate(_algorithm(), problem, rounds + 1, metrics=[],
                           options=RunOptions(progress=False, clients=ray_clients(shards=shards)))
            total = time.perf_counter() - tic
            wall = {row["round"]: row["wall_s"] for row in run.history}
            rounds_s = wall[rounds + 1] - wall[1]
            best, startup = min(best, rounds_s / rounds), total - rounds_s
    finally:
        if started:
            ray.shutdown()
    return float(best), np.asarray(x), startup


def loop_za1(problem: Any, rounds: int) -> np.ndarray:
    """ZA1 one client at a time in plain NumPy (the reference loop of ``tests/_loops.py``).

    Returns
    -------
    ndarray, shape (d,)
        The output model ``prox(x_bar^R)``.
    """
    lr, steps = ALGORITHM["client_lr"], ALGORITHM["local_steps"]
    big_step = lr * steps
    data, loss = problem.data, problem.loss

    def prox(v: np.ndarray, step: float) -> np.ndarray:
        return problem.regularizer.prox(v[None], step)[0]

    n = problem.n_clients
    batches = [data.full_batch(slice(i, i + 1)) for i in range(n)]
    x_bar = np.zeros(problem.param_shape)
    correction = np.zeros((n, *problem.param_shape))
    prev_post = prev_mean = None
    for r in range(rounds):
        post = prox(x_bar, big_step)
        if r > 0:
            correction = ((prev_post - x_bar) / big_step)[None] - prev_mean
        z_hat_avg = np.zeros_like(x_bar)
        grad_mean = np.zeros_like(correction)
        for i in range(n):
            z_hat, z = post.copy(), post.copy()
            for t in range(steps):
                g = loss.grad(z[None], batches[i])[0]
                grad_mean[i] += g / steps
                z_hat = z_hat - lr * (g + correction[i])
                z = prox(z_hat, (t + 1) * lr)
            z_hat_avg += problem.weights[i] * z_hat
        x_bar = post + (z_hat_avg - post)
        prev_post, prev_mean = post, grad_mean
    return prox(x_bar, big_step)


def torch_threads(n: int | None = None) -> int:
    """Torch's intra-op thread count (set it to ``n`` first when given)."""
    import torch

    if n is not None:
        torch.set_num_threads(n)
    return int(torch.get_num_threads())


def has(module: str) -> bool:
    """Whether ``module`` can be imported."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


def jax_za1(problem: Any) -> Callable[[int], np.ndarray]:
    """ZA1 rounds as ``jax.jit`` of a ``vmap`` over clients; ``run(rounds) -> prox(x_bar^R)``.

    Same update as :func:`fedcomp.algorithms.za1` on the same data (float64: it enables
    ``jax_enable_x64``); the round function is compiled on the first call.
    """
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    lr, steps = ALGORITHM["client_lr"], ALGORITHM["local_steps"]
    big_step = lr * steps
    data = problem.data
    # jax arrays stay on their device (a round trip through the host cost a 10^7-client
    # benchmark twice its data in host memory); states in the data's dtype
    features = jnp.asarray(data.features)
    targets = jnp.asarray(data.targets)
    sample_w = jnp.asarray(data.sample_weights())
    pi = jnp.asarray(problem.weights / problem.weights.sum(), dtype=features.dtype)
    l2, alpha = problem.loss.l2, problem.regularizer.alpha

    def prox(v: Any, step: float) -> Any:
        return jnp.sign(v) * jnp.maximum(jnp.abs(v) - step * alpha, 0.0)

    def grad(z: Any, a: Any, y: Any, w: Any) -> Any:  # one client: a (m, d), y, w (m,)
        t = y * (a @ z)
        return (-0.5 * w * y * (1.0 - jnp.tanh(0.5 * t))) @ a + l2 * z

    client_grad = jax.vmap(grad)

    @jax.jit
    def one_round(state: tuple[Any, ...]) -> tuple[Any, ...]:
        x, x_post, anchor, grad_mean, started = state
        correction = started[:, None] * ((anchor - x) / big_step - grad_mean)
        z = prox(jnp.broadcast_to(x, anchor.shape), big_step)
        new_anchor, z_hat, grad_sum = z, z, jnp.zeros_like(z)
        for t in range(steps):
            g = client_grad(z, features, targets, sample_w)
            grad_sum = grad_sum + g
            z_hat = z_hat - lr * (g + correction)
            z = prox(z_hat, (t + 1) * lr)
        x = x_post + (pi @ z_hat - x_post)
        return x, prox(x, big_step), new_anchor, grad_sum / steps, jnp.ones_like(started)

    n, d = problem.n_clients, problem.param_shape[0]

    def run(rounds: int) -> np.ndarray:
        zeros = functools.partial(jnp.zeros, dtype=features.dtype)
        x = zeros(d)
        state = (x, prox(x, big_step), zeros((n, d)), zeros((n, d)), zeros(n))
        for _ in range(rounds):
            state = one_round(state)
        return np.asarray(jax.block_until_ready(state[1]))

    return run


def flower_round(cfg: dict[str, Any]) -> tuple[float, float]:
    """``(seconds per steady-state round, start-up seconds)`` on Flower's simulation engine.

    The per-round time is ``wall_s`` of the run's last row over the rounds (the rounds only:
    sampling, the ClientApps' work and message round trips, the server update); start-up
    is the rest of the total (Ray, actors, node discovery, evaluation).
    """
    from fedcomp.flower import run_simulation

    work = Path(tempfile.mkdtemp(prefix="fedcomp-bench-flwr-"))
    os.environ.setdefault("FLWR_HOME", str(work / "flwr-home"))
    tic = time.perf_counter()
    run_simulation(cfg, work / "out", num_cpus=os.cpu_count() or 1)
    total = time.perf_counter() - tic
    with (work / "out" / "results.csv").open(newline="") as f:
        rounds_s = float(list(csv.DictReader(f))[-1]["wall_s"])
    return rounds_s / cfg["rounds"], total - rounds_s


def engine_rows(n_clients: int, n_features: int, rounds: int, repeats: int,
                engines: Sequence[str], flower_rounds: int = 3) -> list[dict[str, Any]]:
    """One row per engine at one size: ms per round, ratio to the loop, max |x - x_loop|.

    Parameters
    ----------
    n_clients, n_features : int
        The size.
    rounds, repeats : int
        Timed rounds per run; best of ``repeats`` runs (after a warm-up run).
    engines : sequence of str
        Among ``loop`` (always run: the baseline), ``numpy`` (also gives ``numpy-all``),
        ``torch``, ``jax`` (the compiled engine), ``jax-hand``, ``ray`` (the clients on
        two Ray actors), ``flower``.
    flower_rounds : int
        Rounds of the (slow) Flower run.

    Returns
    -------
    list of dict
        Keys ``size``, ``engine``, ``ms``, ``ratio`` (loop time / engine time: > 1 is faster),
        ``max_diff`` (to the loop's model after ``rounds`` rounds) and ``note``.
    """
    from fedcomp import RunOptions, simulate

    cfg = config(n_clients, n_features, rounds)
    problem = build(cfg)
    size = f"{n_clients}x{n_features}"
    x_loop = loop_za1(problem, rounds)  # also the warm-up
    loop_s = best_of(lambda: loop_za1(problem, rounds), repeats, warm_up=False) / rounds
    rows = [dict(size=size, engine="loop", ms=loop_s * 1e3, ratio=1.0, max_diff=0.0, note="")]

    def add(engine: str, seconds: float, x: Any, note: str = "") -> None:
        diff = float(np.max(np.abs(np.asarray(x, dtype=np.float64) - x_loop))) \
            if x is not None else float("nan")
        rows.append(dict(size=size, engine=engine, ms=seconds * 1e3, ratio=loop_s / seconds,
                         max_diff=diff, note=note))

    if "numpy" in engines:
        seconds = simulator_round(problem, rounds, repeats)
        x = simulate(_algorithm(), problem, rounds, metrics=[],
                     options=RunOptions(progress=False)).x
        from fedcomp.runtime import auto_block_size

        add("numpy", seconds, x, f"auto block = {auto_block_size(problem)} clients")
        seconds = simulator_round(problem, rounds, repeats, client_block="all")
        x = simulate(_algorithm(), problem, rounds, metrics=[],
                     options=RunOptions(progress=False, client_block="all")).x
        add("numpy-all", seconds, x, "one block of all clients")
    if "torch" in engines and has("torch"):
        tproblem = build(config(n_clients, n_features, rounds, backend="torch-float64"))
        seconds = simulator_round(tproblem, rounds, repeats)
        x = simulate(_algorithm(), tproblem, rounds, metrics=[],
                     options=RunOptions(progress=False)).x
        threads = torch_threads()
        add("torch", seconds, x.numpy(), f"CPU, float64, {threads} threads")
        if threads > 1:  # small ops on a busy machine: threads can cost more than they give
            torch_threads(1)
            try:
                seconds = simulator_round(tproblem, rounds, repeats)
            finally:
                torch_threads(threads)
            add("torch-1thread", seconds, x.numpy(), "CPU, float64, 1 thread")
    if "jax" in engines and has("jax"):
        jproblem = build(config(n_clients, n_features, rounds, backend="jax"))
        seconds, first = compiled_round(jproblem, rounds, repeats)
        x = simulate(_algorithm(), jproblem, rounds, metrics=[],
                     options=RunOptions(progress=False)).x
        add("jax", seconds, np.asarray(x),
            f"compiled engine, CPU; trace + compile {first:.2f} s")
    if "jax-hand" in engines and has("jax"):
        run = jax_za1(problem)
        tic = time.perf_counter()
        run(1)  # compiles
        compile_s = time.perf_counter() - tic
        seconds = best_of(lambda: run(rounds), repeats) / rounds
        add("jax-hand", seconds, run(rounds),
            f"jit(vmap) written by hand, CPU; compile {compile_s:.2f} s")
    if "ray" in engines and has("ray"):
        seconds, x, startup = ray_round(problem, rounds, repeats)
        add("ray", seconds, x, f"2 actors, a Ray instance here; start-up {startup:.1f} s")
    if "flower" in engines and has("flwr"):
        seconds, startup = flower_round(config(n_clients, n_features, flower_rounds))
        add("flower", seconds, None, f"{flower_rounds} rounds; start-up {startup:.1f} s")
    return rows


def streaming_problem(n_clients: int, n_features: int,
                      generator: str = "liang_sparse_logistic") -> Any:
    """Sparse logistic regression with fresh streaming samples (no data held in memory).

    ``generator="liang_sparse_linear"`` gives sparse least squares instead, which builds
    faster (no optimum-scale root to find): the same state sizes, for memory tests.
    """
    return build({
        "name": "bench-stream", "rounds": 1, "reference": False, "streaming": True,
        "problem": ({"loss": "logistic", "l2": 0.01} if "logistic" in generator
                    else {"loss": "least_squares"}),
        "data": {"generator": generator, "n_clients": n_clients,
                 "samples_per_client": 1, "n_features": n_features,
                 "sparsity": min(16, n_features // 2)},
        "regularizer": {"name": "l1", "alpha": 1e-4},
        "algorithms": [dict(ALGORITHM)],
    })


def scaling_rows(rounds: int, repeats: int, clients: Sequence[int] = SCALING_CLIENTS,
                 features: Sequence[int] = SCALING_FEATURES, fixed_d: int = 100,
                 fixed_clients: int = 100) -> list[dict[str, Any]]:
    """ms per round of the NumPy simulator vs clients (d = ``fixed_d``) and vs d.

    Streaming samples (``Problem(sampler=...)``), minibatches of 10, ZA1 tau = 5, auto blocks.
    """
    rows = []
    for axis, sizes in (("clients", [(n, fixed_d) for n in clients]),
                        ("d", [(fixed_clients, d) for d in features])):
        for n, d in sizes:
            problem = streaming_problem(n, d)
            seconds = simulator_round(problem, rounds, repeats, batch_size=10)
            rows.append(dict(axis=axis, n_clients=n, d=d, ms=seconds * 1e3,
                             us_per_client=seconds * 1e6 / n))
    return rows


_RSS_SCRIPT = """
import json, sys, time
from benchmarks.run import streaming_problem, _algorithm, peak_rss_mb
from fedcomp import RunOptions, simulate
n, d, rounds, mode, batch, generator = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                        sys.argv[4], int(sys.argv[5]), sys.argv[6])
problem = streaming_problem(n, d, generator)
base = peak_rss_mb()
tic = time.perf_counter()
simulate(_algorithm(), problem, rounds, metrics=[], eval_every=rounds, batch_size=batch,
         options=RunOptions(progress=False, client_state=mode))
seconds = (time.perf_counter() - tic) / rounds
peak = peak_rss_mb()
print(json.dumps({"baseline_mb": base, "peak_mb": peak, "delta_mb": peak - base,
                  "ms": seconds * 1e3}))
"""


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (``VmHWM``, which a large parent's peak
    does not hide: :func:`fedcomp.runtime._allocator.peak_memory_mb`)."""
    from fedcomp.runtime._allocator import peak_memory_mb

    return peak_memory_mb()


def peak_rss(n_clients: int, n_features: int, rounds: int, client_state: str,
             batch_size: int = 10, generator: str = "liang_sparse_logistic"
             ) -> dict[str, Any]:
    """Peak RSS of ZA1 rounds in a fresh subprocess, above the after-set-up baseline.

    The baseline is the peak after the imports and the (streaming) problem are built;
    ``delta_mb`` is what the rounds add: the client states (2 arrays of n x d float64 for
    ZA1, plus n flags) unless ``client_state="disk"``, plus the stacked uploads and one
    block's temporaries.
    """
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(n_clients), str(n_features),
                          str(rounds), client_state, str(batch_size), generator],
                         capture_output=True,
                         text=True, env=env, check=True)
    return {"n_clients": n_clients, "d": n_features, "client_state": client_state,
            **json.loads(out.stdout.strip().splitlines()[-1])}


# --- output -------------------------------------------------------------------------------

def machine() -> str:
    """CPU count, load averages and versions, for the record next to the numbers."""
    import fedcomp

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    versions = [f"python {platform.python_version()}", f"numpy {np.__version__}",
                f"fedcomp {getattr(fedcomp, '__version__', '?')}"]
    for module in ("torch", "jax", "flwr"):
        if has(module):
            versions.append(f"{module} {__import__(module).__version__}")
    return (f"{platform.machine()} {platform.processor() or ''}".strip()
            + f", {os.cpu_count()} CPUs, load average {load}; " + ", ".join(versions))


def markdown_table(header: Sequence[str], cells: Iterable[Sequence[str]]) -> str:
    """A Markdown table of ``header`` and rows of already formatted ``cells``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def engine_table(rows: Sequence[dict[str, Any]]) -> str:
    """The engine rows as a Markdown table."""
    lines = ["| size (clients x d) | engine | ms / round | speed-up vs loop | max abs diff to loop "
             "| note |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['engine']} | {r['ms']:.3g} | {r['ratio']:.3g}x | "
                     f"{r['max_diff']:.1e} | {r['note']} |")
    return "\n".join(lines)


def scaling_table(rows: Sequence[dict[str, Any]]) -> str:
    """The scaling rows as a Markdown table."""
    lines = ["| varied | clients | d | ms / round | us / client / round |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['axis']} | {r['n_clients']} | {r['d']} | {r['ms']:.3g} | "
                     f"{r['us_per_client']:.3g} |")
    return "\n".join(lines)


def memory_table(rows: Sequence[dict[str, Any]]) -> str:
    """The peak-RSS rows as a Markdown table."""
    lines = ["| clients x d | client_state | peak RSS above baseline (MB) | baseline (MB) "
             "| ms / round |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n_clients']}x{r['d']} | {r['client_state']} | {r['delta_mb']:.0f} "
                     f"| {r['baseline_mb']:.0f} | {r['ms']:.3g} |")
    return "\n".join(lines)


def scaling_figure(rows: Sequence[dict[str, Any]], path: str | Path) -> None:
    """ms per round vs clients and vs d (log-log), saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, axis, key in ((axes[0], "clients", "n_clients"), (axes[1], "d", "d")):
        sel = [r for r in rows if r["axis"] == axis]
        ax.loglog([r[key] for r in sel], [r["ms"] for r in sel], "o-")
        fixed = f"d = {sel[0]['d']}" if axis == "clients" else f"{sel[0]['n_clients']} clients"
        ax.set(xlabel="clients" if axis == "clients" else "d", ylabel="ms / round",
               title=f"ZA1 round, {fixed}")
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_section(path: str | Path, body: str, start: str = MARK_START,
                  end: str = MARK_END) -> None:
    """Replace the text between the markers ``start`` and ``end`` of ``path`` (append the
    section if absent); the bench markers by default."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    block = f"{start}\n{body.strip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"30x60,100x1024"`` -> ``[(30, 60), (100, 1024)]``."""
    out = []
    for item in text.split(","):
        n, _, d = item.strip().lower().partition("x")
        out.append((int(n), int(d)))
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fedcomp bench", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(f"{n}x{d}" for n, d in SIZES),
                   help="clients x d, comma-separated (default %(default)s)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per run")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--flower-max-clients", type=int, default=100,
                   help="run Flower only at sizes with at most this many clients")
    p.add_argument("--no-scaling", action="store_true")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--memory-size", default="10000x1000")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, 2 rounds, no Flower: a smoke test of the benchmark")
    p.add_argument("--write", help="write the generated section into this Markdown file")
    p.add_argument("--figure", default="docs/bench_scaling.png")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = "fedcomp bench " + " ".join(argv if argv is not None else sys.argv[1:])
    sizes = parse_sizes(args.sizes)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        raise SystemExit(f"fedcomp bench: unknown engine(s) {', '.join(unknown)} in --engines; "
                         f"choose among {', '.join(ENGINES)}")
    clients, features, mem_size = SCALING_CLIENTS, SCALING_FEATURES, args.memory_size
    if args.quick:
        sizes, args.rounds, args.repeats = [(8, 10)], 2, 1
        engines = [e for e in engines if e != "flower"]
        clients, features, mem_size = (10, 100), (10, 100), "200x200"
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = [f"Generated by `{command.strip()}` on {started}.\n\nMachine: {machine()}.",
                f"ZA1 (tau = {ALGORITHM['local_steps']}, client_lr = {ALGORITHM['client_lr']}, "
                "full local gradients, float64, all clients every round) on l1 logistic "
                "regression (`synthetic_fedprox`, 20 samples per client); best of "
                f"{args.repeats} runs of {args.rounds} rounds; speed-up = loop ms / engine ms."]
    rows: list[dict[str, Any]] = []
    for n, d in sizes:
        use = [e for e in engines if e != "flower" or n <= args.flower_max_clients]
        rows += engine_rows(n, d, args.rounds, args.repeats, use)
        print(engine_table([r for r in rows if r["size"] == f"{n}x{d}"]), flush=True)
    sections.append(engine_table(rows))
    if not args.no_scaling:
        scaled = scaling_rows(max(1, args.rounds // 2), args.repeats, clients, features)
        table = scaling_table(scaled)
        print(table, flush=True)
        sections += ["### Scaling (NumPy simulator, auto blocks)",
                     "ZA1 tau = 5, streaming samples (fresh counter-based samples, none held in "
                     "memory), minibatches of 10; clients varied at d = 100, d varied at 100 "
                     "clients.", table]
        if args.write:
            scaling_figure(scaled, args.figure)
            sections.append(f"![scaling]({Path(args.figure).name})")
    if not args.no_memory:
        n, d = parse_sizes(mem_size)[0]
        mem = [peak_rss(n, d, 2, mode) for mode in ("memory", "disk")]
        table = memory_table(mem)
        print(table, flush=True)
        sections += ["### Peak memory: client state in memory vs on disk",
                     f"ZA1 at {n} clients x d = {d} (2 state arrays of {n * d * 8 / 1e6:.0f} MB), "
                     "streaming samples, minibatches of 10, 2 rounds, each in a fresh "
                     "subprocess: peak RSS (`VmHWM`, as `ru_maxrss` but not inherited from the "
                     "parent) after the rounds minus the peak after imports and problem "
                     "set-up. `disk` is `RunOptions(client_state=\"disk\")`: the "
                     "states live in memory-mapped `.npy` files, one block in memory at a "
                     "time (the stacked uploads, n x d, still are in memory).", table]
    if args.write:
        write_section(args.write, "### Generated run\n\n" + "\n\n".join(sections))
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
