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

**Large sizes** (above ``--host-data-clients``, 10^5 clients; ``--data device`` forces it):
``synthetic_fedprox`` loops over the clients on the host and each engine's problem was
built from it anew, which took the set-up of 10^6 x 20 x 10 past its minute on an H100.
There the data are made once, on jax's default device, by a counter-based hash
(:func:`device_data`: uniform features of variance 1, labels of a planted sparse model;
the same values on any device), and every engine computes on those arrays: jax's as they
are, torch's through DLPack (no copy on the same GPU), NumPy's a float64 host copy (skipped
above ``--host-floats``). The agreement check then runs 3 rounds on the first
``--check-clients`` clients (1000) of those arrays, NumPy's model the reference; an engine
whose memory (:data:`WORK_MODELS`) does not fit the free memory is a row saying so.
``--dtype float32`` runs the device engines in float32 (NumPy's reference stays float64).
A line per size gives the set-up's and the check's seconds and the peak memory.

On a machine without a GPU, ``--device cpu`` runs the same script on the CPU at the sizes
given (the test suite runs it so, small).

    python benchmarks/gpu.py [--device cuda] [--sizes 100x1024x20,...] [--networks]
    python benchmarks/gpu.py --sizes 100000000x2x10 --dtype float32 --engines jax,jax-hand
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jax_engine import final_model, repeated_ms, simulator_ms, torch_za1  # noqa: E402
from run import build, config, jax_za1, machine, markdown_table  # noqa: E402

from fedcomp.runtime._allocator import peak_memory_mb  # noqa: E402

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
    """Every engine of ``--engines`` at one size, interleaved ``--repeats`` times, medians
    reported (a hand-written round returns a host array, so its time includes the device's
    work); an engine whose estimated memory does not fit is a row saying so."""
    fits = {name: fits_memory(name, n, d, m, args) for name in args.engines}
    engines = [name for name in args.engines if fits[name] is None]
    tic = time.perf_counter()
    big = on_device_data(n, args)
    if big:
        features, targets = device_data(n, d, m, args.dtype)
        made = f"made on {_jax_device(features)} ({_gb(features)} GB)"
        problems = engine_problems(features, targets, args.device, engines)
    else:
        problems = host_problems(n, d, m, args, engines)
        made = "synthetic_fedprox on the host"
    setup_s = time.perf_counter() - tic
    tic = time.perf_counter()
    if big:  # the check on a slice of clients: NumPy's reference costs host time per client
        k = min(n, args.check_clients)
        checked = f"first {k} clients" if k < n else "all clients"
        checked_problems = engine_problems(features[:k], targets[:k], args.device, problems)
        reference = checked_problems.get("numpy") or host_problem(features[:k], targets[:k])
    else:
        checked, checked_problems = "all clients", problems
        reference = problems.get("numpy") or build(config(n, d, CHECK_ROUNDS, samples=m))
    models = {name: run(CHECK_ROUNDS)
              for name, run in model_runs(checked_problems, args.device).items()}
    x_ref = models["numpy"] if "numpy" in models else final_model(reference, CHECK_ROUNDS)
    del checked_problems, reference
    check_s = time.perf_counter() - tic
    times: dict[str, list[float]] = {name: [] for name in problems}
    timers = engine_timers(problems, n * d * m, args)
    for _ in range(args.repeats):
        for name, timer in list(timers.items()):
            try:
                times[name].append(timer())
            except Exception as exc:  # the estimate was short: the row says so, the rest run
                if not out_of_memory(exc):
                    raise
                fits[name] = f"out of memory: {str(exc).splitlines()[0][:80]}"
                del timers[name]
    del timers, problems
    itemsize = 8 if args.dtype == "float64" else 4
    roofline_ms = 1e3 * 10 * n * m * d * itemsize / bandwidth
    from fedcomp._array import to_numpy

    print(f"{n} x {d} x {m} ({args.dtype}): data {made}, set-up {setup_s:.1f} s; the check "
          f"({CHECK_ROUNDS} rounds, {checked}) {check_s:.1f} s; peak memory: "
          f"{peak_memory()}", flush=True)
    rows = []
    for name in ENGINES.values():
        if name not in fits:
            continue
        row = dict(size=f"{n} x {d} x {m}", engine=name, checked=checked, skipped=fits[name],
                   roofline_ms=roofline_ms)
        if fits[name] is None:  # an engine that ran out of memory has no times
            median = float(np.median(times[name]))
            row.update(ms=median, roofline=100 * roofline_ms / median,
                       diff=float(np.max(np.abs(to_numpy(models[name]) - x_ref))))
        rows.append(row)
    return rows


#: ``--engines`` names: the table's engine rows.
ENGINES = {"numpy": "numpy", "jax": "jax engine", "jax-hand": "jax.jit(vmap) by hand",
           "torch": "fedcomp torch", "torch-hand": "torch by hand"}
#: The engines that run through :func:`fedcomp.simulate` (the others are written by hand).
SIMULATED = ("numpy", "jax engine", "fedcomp torch")
#: ``(models, data)``: an engine's memory beside the data, in models of ``n_clients x d``
#: (ZA1's two states, the local iterates, gradients and their sums) and in copies of the
#: data (temporaries of the data's shape). Measured on this benchmark's CPU runs (peak
#: resident memory, float32, 10^7 x 10 x 2 and 3 x 10^6 x 10 x 10) and rounded up: the
#: jax engine 10 + 1.3, the round by hand 12 + 2.5 (its ``vmap`` of ``a @ z`` keeps
#: temporaries of the data's size), torch 1.5 copies while its problem is built. The
#: NumPy engine also holds its float64 copy of the data on the host.
WORK_MODELS = {"numpy": (12, 1.0), "jax engine": (11, 1.5),
               "jax.jit(vmap) by hand": (13, 2.5), "fedcomp torch": (6, 1.5),
               "torch by hand": (6, 1.5)}


def on_device_data(n: int, args: argparse.Namespace) -> bool:
    """Whether this size's data are made on the device (``--data``; ``auto``: above
    ``--host-data-clients`` clients, where ``synthetic_fedprox``'s loop over clients and
    three problems built on the host took the set-up past a minute)."""
    return args.data == "device" or (args.data == "auto" and n > args.host_data_clients)


def host_problems(n: int, d: int, m: int, args: argparse.Namespace, engines: list[str]
                  ) -> dict[str, Any]:
    """Each engine's problem built from ``synthetic_fedprox`` on the host (the device
    issue's sizes: what the small rows have always measured)."""
    on_device = (f"cuda-float64:{_index(args.device)}" if args.device.startswith("cuda")
                 else "torch-float64")
    if args.dtype == "float32":
        on_device = args.device if args.device.startswith("cuda") else "torch"
    backends = {"numpy": "numpy", "jax engine": "jax" if args.dtype == "float64"
                else "jax-float32", "fedcomp torch": on_device}
    backends["jax.jit(vmap) by hand"] = backends["jax engine"]
    backends["torch by hand"] = backends["fedcomp torch"]
    built: dict[str, Any] = {}
    for name in engines:  # one problem per backend, shared by its two engines
        backend = backends[name]
        if backend not in built:
            built[backend] = build(config(n, d, CHECK_ROUNDS, backend=backend, samples=m))
    return {name: built[backends[name]] for name in engines}


def device_data(n: int, d: int, m: int, dtype: str, seed: int = 0) -> tuple[Any, Any]:
    """Features ``(n, m, d)`` and ±1 targets ``(n, m)`` made on jax's default device.

    A counter-based hash of each entry's (client, sample, feature) indices (murmur3's
    finaliser), not a stateful generator: one compiled call makes them on the device,
    ``CHUNK_FLOATS`` at a time (``lax.map`` writes each chunk into the output, so the
    call's memory is the data's plus a chunk), and the values do not depend on the
    device or the chunks. Features are uniform with mean 0 and variance 1; a sample's
    label is +1 with probability ``sigmoid(<a, truth>)``, ``truth`` a fixed 5-sparse
    model. ``jax.random`` took 17 s and three times the data's memory for 10^6 x 10 x 20
    float64 on 2 host cores; this takes 3 s and the data's memory plus a chunk.
    """
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    kind = jnp.dtype(dtype)
    chunk = _chunk_clients(n, m * d)
    truth = jnp.asarray(np.r_[1.0, -1.0, 0.5, -0.5, 0.25, np.zeros(max(d - 5, 0))][:d], kind)

    def block(first: Any) -> tuple[Any, Any]:
        clients = first + jax.lax.broadcasted_iota(jnp.uint32, (chunk, m, d), 0)
        cells = (jax.lax.broadcasted_iota(jnp.uint32, (chunk, m, d), 1) * jnp.uint32(d)
                 + jax.lax.broadcasted_iota(jnp.uint32, (chunk, m, d), 2))
        features = (2 * _unit(_mix(clients, seed, cells), kind) - 1) * kind.type(3 ** 0.5)
        coin = _unit(_mix(clients[:, :, 0], seed + 1, cells[:, :, 0]), kind)
        targets = jnp.where(coin < jax.nn.sigmoid(features @ truth), 1.0, -1.0)
        return features, targets.astype(kind)

    @jax.jit
    def make() -> tuple[Any, Any]:
        firsts = jnp.arange(0, n, chunk, dtype=jnp.uint32)
        features, targets = jax.lax.map(block, firsts)
        return features.reshape(n, m, d), targets.reshape(n, m)

    features, targets = make()
    return jax.block_until_ready(features), targets


#: Floats of data :func:`device_data` makes in one step of its loop (128 MiB of float64).
CHUNK_FLOATS = 1 << 24


def _chunk_clients(n: int, per_client: int) -> int:
    """The most clients, a divisor of ``n``, whose data hold at most ``CHUNK_FLOATS``
    floats (at least one client): the chunks then tile the clients exactly."""
    most = max(1, CHUNK_FLOATS // per_client)
    if n <= most:
        return n
    small = [k for k in range(1, int(n ** 0.5) + 1) if n % k == 0]
    return max(k for k in small + [n // k for k in small] if k <= most)


def _mix(clients: Any, seed: int, cells: Any) -> Any:
    """uint32 hash of (seed, client, cell): murmur3's finaliser, twice."""
    import jax.numpy as jnp

    return _fmix(_fmix(clients ^ jnp.uint32(seed)) + cells * jnp.uint32(0x9E3779B1))


def _fmix(h: Any) -> Any:
    import jax.numpy as jnp

    h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _unit(h: Any, kind: Any) -> Any:
    """[0, 1) from a hash's top 24 bits (exact in float32 and float64)."""
    return (h >> 8).astype(kind) * kind.type(2.0 ** -24)


def host_problem(features: Any, targets: Any) -> Any:
    """:func:`linear_problem` of a float64 host copy of the arrays (NumPy's engine, the
    reference)."""
    return linear_problem(np.asarray(features, dtype=np.float64),
                          np.asarray(targets, dtype=np.float64))


def linear_problem(features: Any, targets: Any) -> Any:
    """The benchmark's problem (:func:`run.config`'s: logistic with l2 = 0.01, l1 with
    alpha = 1e-4, uniform client weights) on these arrays, in their library and device."""
    from fedcomp import Problem
    from fedcomp.data import ClientData
    from fedcomp.losses import Logistic
    from fedcomp.regularizers import L1

    n, m = targets.shape
    data = ClientData(features, targets, np.full(n, m))
    return Problem(Logistic(l2=0.01), L1(1e-4), data, weighting="uniform")


def engine_problems(features: Any, targets: Any, device: str, engines: Any
                    ) -> dict[str, Any]:
    """Each engine's problem on the same device arrays: jax's as they are, torch's through
    DLPack (no copy where torch's device is jax's), NumPy's a float64 host copy."""
    made: dict[str, Any] = {}
    if "numpy" in engines:
        made["numpy"] = host_problem(features, targets)
    if {"jax engine", "jax.jit(vmap) by hand"} & set(engines):
        made["jax"] = linear_problem(features, targets)
    if {"fedcomp torch", "torch by hand"} & set(engines):
        made["torch"] = linear_problem(_torch_view(features, device),
                                       _torch_view(targets, device))
    library = {"numpy": "numpy", "jax engine": "jax", "jax.jit(vmap) by hand": "jax",
               "fedcomp torch": "torch", "torch by hand": "torch"}
    return {name: made[library[name]] for name in engines}


def _torch_view(array: Any, device: str) -> Any:
    """A jax array as a torch tensor on ``device``: through DLPack (the same memory where
    the devices agree), else copied through the host."""
    import torch

    try:
        return torch.from_dlpack(array).to(device)
    except (BufferError, RuntimeError, TypeError):  # a jax or torch without the protocol
        return torch.as_tensor(np.asarray(array), device=device)


def model_runs(problems: dict[str, Any], device: str) -> dict[str, Callable[[int], Any]]:
    """``run(rounds) -> model after them`` of each engine on its problem."""
    runs: dict[str, Callable[[int], Any]] = {}
    for name, problem in problems.items():
        if name in SIMULATED:
            runs[name] = functools.partial(final_model, problem)
        elif name == "jax.jit(vmap) by hand":
            runs[name] = jax_za1(problem)
        else:
            runs[name] = torch_za1(problem, False, device=device)
    return runs


def engine_timers(problems: dict[str, Any], floats: int, args: argparse.Namespace
                  ) -> dict[str, Callable[[], float]]:
    """ms per round of each engine: a simulator's between rows, a hand round's per call
    (NumPy a round per block above ``--numpy-floats``)."""
    runs = model_runs({k: p for k, p in problems.items() if k not in SIMULATED}, args.device)
    numpy_block = args.block if floats <= args.numpy_floats else 1
    timers: dict[str, Callable[[], float]] = {}
    for name, problem in problems.items():
        if name == "numpy":
            timers[name] = functools.partial(_simulated_ms, problem, numpy_block,
                                             max(2, args.blocks // 2))
        elif name in SIMULATED:
            timers[name] = functools.partial(_simulated_ms, problem, args.block, args.blocks)
        else:
            timers[name] = functools.partial(repeated_ms, runs[name], args.block, args.blocks)
    return timers


def _simulated_ms(problem: Any, block: int, blocks: int) -> float:
    return simulator_ms(problem, block, blocks)[0]


def fits_memory(name: str, n: int, d: int, m: int, args: argparse.Namespace) -> str | None:
    """``None`` where the engine's estimated memory (:data:`WORK_MODELS`, and the NumPy
    engine's host copy) fits in what its device has free, else why it is skipped."""
    itemsize = 8 if args.dtype == "float64" or name == "numpy" else 4
    models, copies = WORK_MODELS[name]
    # with the data (features, targets, sample weights), which are not made yet
    need = int((models * n * d + copies * n * m * d + n * m * (d + 2)) * itemsize)
    where = "cpu" if name == "numpy" else args.device
    free = free_bytes(where)
    if name == "numpy" and n * m * d > args.host_floats:
        return f"skipped: its host copy ({n * m * d:.2g} floats) is above --host-floats"
    if free is not None and need > free:
        return (f"skipped: needs ~{need / 1e9:.3g} GB with the data, {free / 1e9:.3g} GB "
                f"free on {where}")
    return None


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a device's allocation failure (torch's, or XLA's
    ``RESOURCE_EXHAUSTED``)."""
    text = f"{type(exc).__name__} {exc}"
    return "OutOfMemory" in text or "RESOURCE_EXHAUSTED" in text or "out of memory" in text


def free_bytes(device: str) -> int | None:
    """Bytes free on ``device`` (a GPU's free memory; the host's MemAvailable)."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def peak_memory() -> str:
    """The process's peak resident memory and, on a GPU, jax's and torch's peaks there."""
    parts = [f"host {peak_memory_mb() / 1e3:.3g} GB"]
    try:
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            parts.append(f"jax {stats['peak_bytes_in_use'] / 1e9:.3g} GB")
    except Exception:  # no memory statistics on this platform: the host figure says it
        pass
    import torch

    if torch.cuda.is_available():
        parts.append(f"torch {torch.cuda.max_memory_allocated() / 1e9:.3g} GB")
    return ", ".join(parts)


def _jax_device(array: Any) -> str:
    return "jax's " + str(next(iter(array.devices())).platform)


def _gb(array: Any) -> str:
    return f"{array.nbytes / 1e9:.3g}"


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
        ["clients x d x samples", "engine", "ms / round", "roofline %", "max abs diff to NumPy",
         "checked on"],
        ([r["size"], r["engine"], r["skipped"], f"(roofline {r['roofline_ms']:.3g} ms)", "–",
          "–"] if r["skipped"] else
         [r["size"], r["engine"], f"{r['ms']:.3g}",
          f"{r['roofline']:.0f} % (roofline {r['roofline_ms']:.3g} ms)", f"{r['diff']:.1e}",
          r["checked"]]
         for r in rows))


def network_table(rows: list[dict[str, Any]]) -> str:
    return markdown_table(["experiment", "algorithm", "where", "ms / round"],
                          ([r["experiment"], r["algorithm"], r["where"], f"{r['ms']:.3g}"]
                           for r in rows))


def parse_size(size: str, parser: argparse.ArgumentParser) -> tuple[int, int, int]:
    """``"CLIENTSxFEATURESxSAMPLES"`` (``1e6x20x10`` too) as three positive ints, or the
    parser's error naming the bad size."""
    try:
        n, d, m = (int(float(v)) for v in size.lower().split("x"))
    except ValueError:
        parser.error(f"--sizes: {size!r} is not CLIENTSxFEATURESxSAMPLES (e.g. 1000x100x20)")
    if min(n, d, m) < 1:
        parser.error(f"--sizes: {size!r} has a size below 1")
    return n, d, m


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
    p.add_argument("--engines", default=",".join(ENGINES),
                   help=f"engines to time, comma-separated, of {','.join(ENGINES)}")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="the data's and the device engines' dtype (NumPy's reference: float64)")
    p.add_argument("--data", choices=("auto", "host", "device"), default="auto",
                   help="host: synthetic_fedprox built on the host; device: made on jax's "
                        "device by device_data (the check then on --check-clients clients); "
                        "auto: device above --host-data-clients clients")
    p.add_argument("--host-data-clients", type=int, default=100_000,
                   help="the most clients --data auto builds on the host")
    p.add_argument("--check-clients", type=int, default=1000,
                   help="clients of the agreement check where the data are made on the device")
    p.add_argument("--host-floats", type=float, default=4e8,
                   help="above this many data floats NumPy (its float64 host copy) is skipped")
    p.add_argument("--networks", nargs="?", const=NETWORKS, default=None,
                   help=f"also time these network experiments (default {NETWORKS})")
    p.add_argument("--network-rounds", type=int, default=6,
                   help="rounds of each network run (>= 2: the first is the warm-up)")
    args = p.parse_args(argv)
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: torch sees no GPU here; pass --device cpu (or leave "
                "--device out)")
    unknown = set(args.engines.split(",")) - set(ENGINES)
    if unknown:
        p.error(f"--engines: unknown {sorted(unknown)}; pick from {','.join(ENGINES)}")
    args.engines = [ENGINES[key] for key in args.engines.split(",")]
    sizes = [parse_size(size, p) for size in args.sizes.split(",")]
    bandwidth = copy_bandwidth(args.device, args.gib)
    load_before = os.getloadavg()
    rows = []
    for size, (n, d, m) in zip(args.sizes.split(","), sizes, strict=True):
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
