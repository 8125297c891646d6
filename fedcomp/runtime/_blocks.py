"""Clients per block on a CPU, chosen by a short measurement cached per machine and shape.

A block of clients runs all its local steps before the next block starts. Two costs bound
its size: each batched call has a fixed dispatch cost that a small block cannot amortise,
and a block whose data outgrow the cache streams them from memory at every local step.
Where the balance lies depends on the CPU (its caches, its memory, its core count) and on
the array library: a rule of thumb from the cache size (:func:`~fedcomp.runtime._clients.
cache_block_size`, 4 MiB or a quarter of the last-level cache) was tuned on one AMD EPYC
and lost up to 1.5x on a 2-core Intel Xeon. So the block is measured instead: the loss's
gradient on the first ``B`` clients, called a few times in a row as local steps are
(warm in cache when the block fits), for ``B`` = 1, 2, 4, ... up to the population (for
the compiled engine's sub-blocks: a compiled ``lax.map`` of five local steps over a few
sub-blocks of ``B``, as the engine runs them); the
block with the least time per client wins (the smallest within 5 % of the best: smaller
blocks leave more cache to the rest of the round). The measurement takes well under a
second and is kept in ``blocks.json`` beside the reference solutions (``$FEDCOMP_CACHE_DIR``,
default ``~/.cache/fedcomp``), keyed by the CPU, the array library and dtype, the loss and
one client's working set, so a machine measures each shape once.

Torch on a CPU is not measured: its blocks follow the cache-size rule. A torch round's cost
is mostly a fixed cost per block — the hundred or so operations of an algorithm's local
update and the block's gathers, each a 10-15 µs dispatch on torch, several times that on a
loaded CPU — which the gradient alone does not show: the gradient's time per client is flat
from 8 clients on, so on a loaded CPU its smallest block within 5 % of the best was as often
4 as 16, and a ZA1 round at 100 clients x 1024 features took 1.9x NumPy's time idle and
5.9x beside two busy processes with blocks of 4, against 1.1x and <= 2x with the rule's 25
(docs/BENCHMARKS.md, "Block sizes per backend"). The rule's largest block whose data fit the
cache is what a dispatch-bound library wants.

Results never depend on the block size (every draw is keyed by the client), so a
measurement that differs from run to run changes only the speed. A problem whose whole
population is small (under :data:`SMALL_BYTES`) runs as one block without measuring, and
``FEDCOMP_BLOCKS=rule`` switches the measurement off for the cache-size rule.

A block also holds its clients' models, a few arrays of ``B`` models each (iterates,
gradients, corrections, their temporaries). On high-dimensional data these, not the data,
are the round's memory — news20's 1 355 191 features make a model 10.8 MB, and a block of
100 clients' handful of arrays several GB — so no block holds more than
:data:`BLOCK_MODEL_BYTES` of models, measured or not.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._clients import working_set

#: A population whose working set is below this runs as one block, unmeasured: there the
#: dispatch cost always dominates (a block of all clients is the fastest).
SMALL_BYTES = 1 << 20

#: Stop growing the block once one gradient call takes longer than this (seconds).
CALL_LIMIT_S = 0.05

#: The smallest block whose time per client is within this factor of the best wins.
TOLERANCE = 1.05

#: The most bytes of models (``B`` clients' parameters, one array of them) a CPU block
#: holds: six clients of news20's width, every client of rcv1's.
BLOCK_MODEL_BYTES = 64 * 2**20


def model_cap(problem: Any) -> int:
    """The most clients whose models fit :data:`BLOCK_MODEL_BYTES` (at least one).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> model_cap(SimpleNamespace(param_shape=(1_355_191,), data=SimpleNamespace(
    ...     dtype=np.dtype(np.float64))))
    6
    """
    itemsize = np.dtype(str(problem.data.dtype).rsplit(".", 1)[-1]).itemsize
    per_model = max(1, math.prod(problem.param_shape) * itemsize)
    return max(1, BLOCK_MODEL_BYTES // per_model)

_MEMO: dict[str, int] = {}


def machine_key() -> str:
    """The CPU model and the logical cores this process may use (one entry per machine)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model} x{cores}"


def shape_key(problem: Any, batch_size: int | None, library: str) -> str:
    """What the best block depends on besides the machine."""
    samples, per_client = working_set(problem, batch_size)
    dtype = str(problem.data.like.dtype).rsplit(".", 1)[-1]
    return (f"{library}|{dtype}|{type(problem.loss).__name__}|{samples}x"
            f"{'x'.join(map(str, problem.data.feature_shape))}|{problem.param_shape}|"
            f"{per_client}")


def _cache_file() -> Path:
    root = os.environ.get("FEDCOMP_CACHE_DIR", Path.home() / ".cache" / "fedcomp")
    return Path(root) / "blocks.json"


def _read_cache() -> dict[str, int]:
    try:
        table = json.loads(_cache_file().read_text())
        return {str(k): int(v) for k, v in table.items()} if isinstance(table, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def _write_cache(key: str, block: int) -> None:
    """Add one entry (an unwritable cache directory only costs a measurement next time)."""
    path = _cache_file()
    try:
        table = _read_cache()
        table[key] = block
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)  # atomic: a concurrent reader sees the old table or the new one
    except OSError:
        pass


def candidates(n_clients: int) -> list[int]:
    """Powers of two below ``n_clients``, then ``n_clients`` itself.

    Examples
    --------
    >>> candidates(10), candidates(1)
    ([1, 2, 4, 8, 10], [1])
    """
    out = [1 << k for k in range(max(n_clients, 1).bit_length()) if (1 << k) < n_clients]
    return out + [n_clients]


def per_client_seconds(problem: Any, block: int, batch_size: int | None, calls: int = 5,
                       work: Any = None) -> float:
    """Best time per client of ``calls`` consecutive calls of the engine's work on blocks
    of ``block`` clients: by default the loss's gradient on the first ``block`` clients
    (their first ``batch_size`` samples when given); ``work(block) -> (clients, fn)`` gives
    another (the compiled engine's: :func:`compiled_local_steps`), ``fn(x, batch)`` over
    the first ``clients`` clients."""
    from .._array import stacked_zeros

    clients, fn = (block, problem.loss.grad) if work is None else work(block)
    data = problem.data
    if batch_size is None:
        batch = data.full_batch(slice(0, clients))
    else:
        samples = min(batch_size, data.max_samples)
        batch = data.minibatch(np.arange(clients), np.tile(np.arange(samples), (clients, 1)))
    x = stacked_zeros(problem.zeros(), clients)
    fn(x, batch)  # first touch: allocations, dispatch caches, a compilation
    best, spent, done = math.inf, 0.0, 0
    # the best of at least ``calls`` calls and of about 20 ms of them: one call of a small
    # block is tens of microseconds, and a busy machine makes single timings noisy
    while done < calls or (spent < 0.02 and done < 100):
        tic = time.perf_counter()
        out = fn(x, batch)
        _ = float(out.reshape(-1)[0]) if hasattr(out, "reshape") else out  # finish the work
        elapsed = time.perf_counter() - tic
        best, spent, done = min(best, elapsed), spent + elapsed, done + 1
    return best / clients


def compiled_local_steps(loss: Any, n_clients: int, steps: int = 5) -> Any:
    """The compiled engine's work for :func:`per_client_seconds`: ``steps`` gradient steps
    per sub-block of ``block`` clients, a ``jax.lax.map`` over up to four sub-blocks in one
    ``jax.jit`` call, as the engine runs a round's block (a sub-block's data are read from
    memory once for its ``steps`` steps when they fit the cache; each sub-block is one more
    step of the map)."""
    from .._extras import require

    jax = require("jax", "the compiled engine's block measurement")

    def local(part: Any) -> Any:
        x, batch = part
        for _ in range(steps):
            x = x - 1e-3 * loss.grad(x, batch)
        return x

    def work(block: int) -> tuple[int, Any]:
        count = max(1, min(4, n_clients // block))

        def run(x: Any, batch: Any) -> Any:
            def cut(a: Any) -> Any:
                return jax.numpy.reshape(a, (count, block, *a.shape[1:]))

            out = jax.lax.map(local, jax.tree.map(cut, (x, batch)))
            return jax.numpy.reshape(out, x.shape)

        return count * block, jax.jit(run)

    return work


def measure_block_size(problem: Any, batch_size: int | None, work: Any = None,
                       passes: int = 2) -> int:
    """The block with the least time per client (the smallest within :data:`TOLERANCE`).

    The candidates are timed in ``passes`` sweeps and each keeps its best: a change of the
    machine's load during one sweep (another process starting or ending) then does not
    decide the block, which is kept for every later run of the shape.
    """
    times: dict[int, float] = {}
    for _ in range(passes):
        for block in candidates(min(problem.n_clients, model_cap(problem))):
            seconds = per_client_seconds(problem, block, batch_size, work=work)
            times[block] = min(times.get(block, math.inf), seconds)
            if seconds * block > CALL_LIMIT_S:
                break
    best = min(times.values())
    return min(b for b, t in times.items() if t <= TOLERANCE * best)


def measured_block_size(problem: Any, batch_size: int | None, library: str,
                        rule: Any = None, work: Any = None, by_rule: bool = False) -> int:
    """Clients per block on a CPU: one block for a small population, the cache-size rule
    where ``by_rule`` (a backend whose ``block_policy`` is ``"rule"``: torch's per-block
    dispatch cost, which the measured gradient does not see, outweighs what a smaller block
    saves in cache), else the measured block (from the cache when this machine
    measured this shape before).

    ``library`` names the engine in the cache's key (``"numpy"``, ``"jax-compiled"``, ...);
    ``work`` is that engine's work (:func:`per_client_seconds`); ``rule(problem,
    batch_size)`` is the cache-size rule, used instead ``by_rule`` and for every engine when
    ``FEDCOMP_BLOCKS=rule``.
    """
    _, per_client = working_set(problem, batch_size)
    cap = model_cap(problem)
    if per_client * problem.n_clients <= SMALL_BYTES:
        return min(problem.n_clients, cap)
    ruled = by_rule or os.environ.get("FEDCOMP_BLOCKS", "measure") == "rule"
    if ruled and rule is not None:
        return max(1, min(int(rule(problem, batch_size)), cap))
    key = f"{machine_key()}|{shape_key(problem, batch_size, library)}"
    if key not in _MEMO:
        cached = _read_cache().get(key)
        if cached is None:
            cached = measure_block_size(problem, batch_size, work)
            _write_cache(key, cached)
        _MEMO[key] = cached
    return max(1, min(problem.n_clients, cap, _MEMO[key]))
