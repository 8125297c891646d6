"""A run's fingerprint: what its iterates and rows depend on, to tell two runs apart.

A checkpoint (:mod:`fedcomp.runtime._checkpoint`) stores its run's fingerprint, and
``RunOptions(resume_from=path)`` compares it with its run's before it trusts the file:
states of the right shapes alone would accept another problem's, another seed's or other
hyperparameters' states and mix two runs' rows. The fingerprint is a table of JSON values,
one field per thing a run depends on (:data:`FINGERPRINT_FIELDS`), so that a mismatch
names the field: texts for the algorithm's hyperparameters, the loss and the regularizer,
hashes for the arrays (the clients' data, the start), read on the host through
:func:`~fedcomp._array.to_numpy` whatever their backend.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._array import to_numpy

#: The fingerprint's fields, in the order checked, with what each is where its name is not
#: enough (for the message of a mismatch).
FINGERPRINT_FIELDS = {
    "algorithm": "", "hyperparameters": "",
    "transforms": "the wrappers (compress, ditto, dp) around the algorithm, in order",
    "loss": "", "regularizer": "", "n_classes": "",
    "data": "a hash of the clients' arrays", "weighting": "the client weights",
    "minibatch": "how a minibatch draws samples", "sampler": "the streaming sampler",
    "seed": "", "participation": "the clients of each round", "batch_size": "",
    "compute_times": "", "start": "a hash of x0, or of initial_states",
}

#: Rows of host memory hashed at a time (a memory-mapped or GPU array is never copied whole).
HASH_CHUNK_BYTES = 1 << 26


def _hash_arrays(arrays: Iterable[Any]) -> str:
    """A hash of the arrays' shapes, dtypes and bytes, read to the host through
    :func:`~fedcomp._array.to_numpy` a chunk of rows at a time."""
    # sha256 rather than blake2b: 0.45-0.52 GB/s against 0.24-0.34 on a CPU with SHA
    # instructions (x86 since 2017-2019), as on this project's machines
    h = hashlib.sha256()
    for array in arrays:
        shape = tuple(int(s) for s in array.shape)
        h.update(f"{shape}".encode())
        # 8 bytes an entry at most (float64): torch's, jax's and NumPy's dtypes alike
        step = max(1, HASH_CHUNK_BYTES // (8 * max(1, math.prod(shape[1:]))))
        for start in range(0, shape[0], step) if shape else [None]:
            chunk = np.ascontiguousarray(to_numpy(array if start is None
                                                  else array[start:start + step]))
            h.update(chunk.dtype.str.encode())
            h.update(chunk.data)
    return "sha256:" + h.hexdigest()[:32]


def _data_arrays(data: Any) -> list[Any]:
    """Every array of ``data`` (a :class:`~fedcomp.data.ClientData`), sparse ones as their
    CSR arrays."""
    from ..data._sparse import is_sparse_matrix

    arrays = (data.features.fingerprint_arrays() if data.sparse else [data.features])
    arrays += [data.targets, data.counts]
    if data.sample_weight is not None:
        arrays.append(data.sample_weight)
    for part in data.holdout or ():
        arrays += [part.data, part.indices, part.indptr] if is_sparse_matrix(part) else [part]
    return arrays


def _state_arrays(states: Iterable[Any]) -> list[Any]:
    """The fields of NamedTuple states (``None``: none), Python numbers as arrays."""
    return [value if hasattr(value, "shape") else np.asarray(value)
            for state in states if state is not None for value in state]


def _text(value: Any) -> str:
    """``repr(value)`` without memory addresses (a function's differs from run to run)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _plain(value: Any) -> Any:
    """A JSON value for what ``json`` cannot write (``default=``): NumPy numbers and
    arrays as numbers (a large array as its hash), anything else as its text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 16 else _hash_arrays([value])
    return _text(value)


def _participation(clients_per_round: int | None, sampling: Any) -> str:
    if sampling is not None:
        name = getattr(sampling, "__qualname__", type(sampling).__qualname__)
        return f"sampling={getattr(sampling, '__module__', '')}.{name}"
    return "every client" if clients_per_round is None else f"{clients_per_round} per round"


def run_fingerprint(algorithm: Any, problem: Any, start: Any, *, seed: int,
                    batch_size: int | None, clients_per_round: int | None, sampling: Any,
                    compute_times: Any, initial_states: Any = None) -> dict[str, Any]:
    """What a run's iterates and rows depend on, as JSON values (:data:`FINGERPRINT_FIELDS`).

    Parameters
    ----------
    algorithm : FederatedAlgorithm
        Prepared (its problem-derived hyperparameters resolved).
    problem : Problem
    start : array
        The starting model (``x0`` checked).
    seed, batch_size, clients_per_round, sampling, compute_times
        The run's arguments of those names.
    initial_states : (server_state, client_states), optional
        The states a warm start gave, adopted.

    Returns
    -------
    dict
        One entry per field: texts, numbers, and hashes of the data and the start (one
        pass over the clients' data, on the host).
    """
    from ._clock import ComputeTimes

    weighting = problem.weighting
    start_arrays = [start, *_state_arrays(initial_states or ())]
    fingerprint = {
        "algorithm": algorithm.name,
        "hyperparameters": algorithm.hyperparameters,
        **_transforms(algorithm),
        "loss": _text(problem.loss),
        "regularizer": _text(problem.regularizer),
        "n_classes": problem.n_classes,
        "data": _hash_arrays(_data_arrays(problem.data)),
        "weighting": weighting if isinstance(weighting, str) else
        "array " + _hash_arrays([np.asarray(weighting, dtype=np.float64)]),
        "minibatch": problem.minibatch,
        "sampler": None if problem.sampler is None else _text(problem.sampler),
        "seed": seed,
        "participation": _participation(clients_per_round, sampling),
        "batch_size": batch_size,
        "compute_times": None if compute_times is None else
        _text(ComputeTimes.build(compute_times, problem.n_clients)),
        "start": _hash_arrays(start_arrays),
    }
    return json.loads(json.dumps(fingerprint, default=_plain))


def _transforms(algorithm: Any) -> dict[str, Any]:
    """``{"transforms": [[name, params], ...]}`` of a wrapped algorithm, in the order they
    were applied, else ``{}``: dp around a compressed fedavg and a compressed dp fedavg
    share their name and hyperparameters, not their iterates. Absent for an algorithm as its
    factory built it, so its checkpoints of before this field still resume."""
    from ..algorithms._recipe import recipe_of

    steps = recipe_of(algorithm).to_json()["transforms"]
    return {"transforms": steps} if steps else {}


def first_difference(saved: Any, current: Any, name: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted: ``hyperparameters.client_lr``) where two fingerprints
    differ, with both values; ``None`` when they agree."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for key in [*saved, *(key for key in current if key not in saved)]:
            found = first_difference(saved.get(key, "(absent)"), current.get(key, "(absent)"),
                                f"{name}.{key}" if name else key)
            if found is not None:
                return found
        return None
    # as JSON text: NaN equals NaN, 1 and 1.0 differ as the hyperparameters did
    same = json.dumps(saved, sort_keys=True) == json.dumps(current, sort_keys=True)
    return None if same else (name, saved, current)


__all__ = ["FINGERPRINT_FIELDS", "first_difference", "run_fingerprint"]
