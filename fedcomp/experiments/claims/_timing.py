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
from ...runtime._backends import BACKENDS, devices


def check_device(device: str) -> Any:
    """The ``torch.device`` named by ``device``, or a one-line ``ConfigError`` when this
    machine does not have it (naming what it has and the fix) or no torch backend runs there
    (the devices are the backend registry's: :func:`fedcomp.runtime._backends.devices`).

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
        raise ConfigError(f"device = {device!r} is not a torch device; use "
                          f"{_devices(indices=True)}") from None
    if where.type not in devices("torch"):
        raise ConfigError(f"device = {device!r}: timings run on {_devices()}")
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (where.index or 0) >= count:
            raise ConfigError(f"device = {device!r} is not available: torch {torch.__version__} "
                              f"sees {count} GPU(s) (built for CUDA {torch.version.cuda}); use "
                              "device = 'cpu', or run where a GPU and a CUDA build of torch are")
    elif where.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device = {device!r} is not available: torch "
                          f"{torch.__version__} sees no Apple GPU; use device = 'cpu'")
    return where


def _devices(indices: bool = False) -> str:
    """The devices the torch backends run on, in words: ``'cpu', 'cuda[:N]' or 'mps'``
    (``indices``: ``'cpu', 'cuda', 'cuda:N' or 'mps'``).

    Examples
    --------
    >>> _devices(), _devices(indices=True)
    ("'cpu', 'cuda[:N]' or 'mps'", "'cpu', 'cuda', 'cuda:N' or 'mps'")
    """
    indexed = {e.device for e in BACKENDS.entries() if e.indexed}
    names = []
    for kind in devices("torch"):
        if kind not in indexed:
            names.append(repr(kind))
        elif indices:
            names += [repr(kind), repr(f"{kind}:N")]
        else:
            names.append(repr(f"{kind}[:N]"))
    return ", ".join(names[:-1]) + " or " + names[-1]


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
