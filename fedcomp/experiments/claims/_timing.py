"""Timing on any device: which device a timing names, and a clock that waits for it.

The timing experiments (``prox_cost``, FedCanon's TABLE V) measure on the CPU or on a GPU.
A GPU runs the work Python queues asynchronously, so every measurement here reads the
clock only after the device has finished (:func:`best_time`, and the runtime's ``wall_s``
through :func:`fedcomp._array.wait_for`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..._extras import require


def check_device(device: str) -> Any:
    """The ``torch.device`` named by ``device``, or a one-line ``ConfigError`` when this
    machine does not have it (naming what it has and the fix).

    Examples
    --------
    >>> check_device("cpu")
    device(type='cpu')
    """
    from ...config import ConfigError

    torch = require("torch", f"a timing on device = {device!r}")
    try:
        where = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device = {device!r} is not a torch device; use 'cpu', 'cuda', "
                          "'cuda:N' or 'mps'") from None
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (where.index or 0) >= count:
            raise ConfigError(f"device = {device!r} is not available: torch {torch.__version__} "
                              f"sees {count} GPU(s) (built for CUDA {torch.version.cuda}); use "
                              "device = 'cpu', or run where a GPU and a CUDA build of torch are")
    elif where.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device = {device!r} is not available: torch "
                          f"{torch.__version__} sees no Apple GPU; use device = 'cpu'")
    elif where.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device = {device!r}: timings run on 'cpu', 'cuda[:N]' or 'mps'")
    return where


def best_time(call: Callable[[], Any], repeats: int, wait: Callable[[Any], None],
              clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``call``, after one warm-up call.

    Each call is timed from a drained device to its finished work: ``wait`` (given the
    call's result, or None) returns once the device has done everything queued, and it is
    called before each clock read — a GPU returns from ``call`` as soon as its work is
    queued, so a clock read without it would time the queueing.
    """
    wait(call())  # warm-up: vmap tracing, the allocator, a GPU's kernels loaded
    best = math.inf
    for _ in range(repeats):
        wait(None)
        tic = clock()
        done = call()
        wait(done)
        best = min(best, clock() - tic)
    return best
