"""What a compiled call traces: the jax set-up, and a block's data, oracle and counts.

The pieces of :mod:`fedcomp.runtime._compiled` that run inside ``jax.jit``: the jax import
and its checks (:func:`jax_like`, :func:`check_x64`, :func:`check_compile`), the counting
calls recorded while tracing (:class:`CounterLog`, replayed after every call), the
counter-based minibatch indices computed in the trace (:func:`traced_minibatch_indices`),
and a block's data and oracle as the traced ``client_update`` sees them
(:class:`DataArrays`, :class:`Rows`, :class:`TracedOracle`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, is_jax
from .._random import STREAM_MINIBATCH, _absorb, _mix
from ..data import Batch
from ..oracle import Counters, Oracle
from ..problem import Problem
from ._jax_cache import use_compilation_cache

#: SplitMix64's constants, as in :mod:`fedcomp._random`.
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB

COMPILE_CHOICES = ("auto", True, False)


class _Uncompilable(Exception):
    """Raised while tracing by the engine itself: a value only the host has."""


def _jax() -> Any:
    from .._extras import require

    return require("jax", "the jax backend (the compiled engine)")


def jax_like(dtype: str = "float64") -> Array:
    """An empty jax array of ``dtype``: pass it to ``ClientData.to`` to move data to jax.

    This switches on ``jax_enable_x64`` for the whole process, as the compiled engine
    needs: its counter-based minibatch draws are uint64 hashes, and the ``float64``
    backend holds float64 arrays (jax makes float32 ones without it). Arrays created as
    float32 stay float32, so ``dtype="float32"`` runs in float32 all the same.

    It also points jax's persistent compilation cache at ``~/.cache/fedcomp/jax`` (moved by
    ``$FEDCOMP_JAX_CACHE``, ``off`` switches it off; a cache set up in jax is left alone),
    so a round compiled once is read back by later runs and processes
    (:mod:`fedcomp.runtime._jax_cache`).

    Parameters
    ----------
    dtype : {"float64", "float32"}

    Returns
    -------
    jax.Array
        Shape ``(0,)``, on jax's default device.

    Examples
    --------
    >>> import numpy as np, fedcomp
    >>> from fedcomp.runtime import jax_like
    >>> data = fedcomp.ClientData.from_lists([np.ones((3, 2))], [np.ones(3)])
    >>> data.to(jax_like()).features.dtype  # doctest: +SKIP
    dtype('float64')
    """
    if dtype not in ("float64", "float32"):
        raise ValueError(f"jax_like: dtype must be 'float64' or 'float32' (got {dtype!r})")
    jax = _jax()
    jax.config.update("jax_enable_x64", True)
    use_compilation_cache()  # compile each round once per machine, not per process
    return jax.numpy.zeros(0, dtype=getattr(jax.numpy, dtype))


def check_x64() -> None:
    """Raise unless ``jax_enable_x64`` is on (the engine hashes in uint64)."""
    jax = _jax()
    if not jax.config.read("jax_enable_x64"):
        raise ValueError("the jax engine needs 64-bit types (its counter-based minibatch "
                         "draws are uint64 hashes): call jax.config.update('jax_enable_x64', "
                         "True) before creating the arrays, or build them with "
                         "fedcomp.runtime.jax_like(), which does")
    use_compilation_cache()  # also for jax arrays made without jax_like


def check_compile(compile_: Any, data: Any, sparse: bool = False) -> None:
    """Validate ``simulate``'s ``compile`` argument against the data's namespace (and
    sparsity: sparse jax data run eagerly, ``compile='auto'`` choosing so)."""
    if not any(compile_ is c or (compile_ == c and isinstance(c, str)) for c in
               COMPILE_CHOICES):
        raise ValueError(f"compile must be 'auto', True or False (got {compile_!r})")
    if compile_ is True and not is_jax(data):
        raise ValueError("compile=True runs the rounds under jax.jit: it needs the data on "
                         "jax arrays (backend = 'jax', or problem.data.to(fedcomp.runtime."
                         "jax_like()))")
    if compile_ is True and sparse:
        raise ValueError("compile=True: the compiled engine runs dense features only; sparse "
                         "jax data (BCOO) run eagerly with compile='auto' or compile=False")


# --- counters --------------------------------------------------------------------------------

class CounterLog:
    """The counting calls of one traced call, replayed after every call of its compilation.

    Each entry is ``(method, args)`` of an :class:`~fedcomp.oracle.Oracle` counting method
    (``count_grad``, ``count_value``, ``count_hessian``) or ``("prox", rows)``; ``args`` are
    host values (an ``active`` mask must be a NumPy array while tracing).
    """

    def __init__(self) -> None:
        self.entries: list[tuple[str, tuple[Any, ...]]] = []

    def record(self, method: str, *args: Any) -> None:
        self.entries.append((method, args))

    def delta(self, oracle: Oracle | None) -> Counters:
        """The counters one call adds (``oracle``: a host oracle of the call's block, whose
        client sample counts the gradient counts need)."""
        counters = Counters()
        if oracle is not None:
            oracle.counters = counters
        for method, args in self.entries:
            if method == "prox_client":
                counters.prox_evals_client += args[0]
            elif method == "prox_server":
                counters.prox_evals_server += 1
            else:
                assert oracle is not None
                getattr(oracle, method)(*args)
        return counters


def _add(counters: Counters, delta: Counters) -> None:
    for name, value in delta.as_dict().items():
        if value:
            setattr(counters, name, getattr(counters, name) + value)


# --- counter-based minibatches, traced --------------------------------------------------------

def traced_minibatch_indices(seed: int, round_: Any, client_ids: Any, counts: Any, draw: int,
                             batch_size: int, replace: bool, max_samples: int) -> Any:
    """:func:`fedcomp._random.minibatch_indices` inside ``jax.jit``: the same indices.

    ``round_``, ``client_ids`` and ``counts`` may be traced; ``seed``, ``draw`` and the
    sizes are Python ints. The key of ``(seed, stream)`` is computed on the host by
    :mod:`fedcomp._random` itself; the rest repeats its SplitMix64 steps in uint64, whose
    multiplication wraps as NumPy's does.
    """
    jnp = _jax().numpy
    u64 = jnp.uint64

    def mix(z: Any) -> Any:
        z = (z ^ (z >> u64(30))) * u64(_MUL1)
        z = (z ^ (z >> u64(27))) * u64(_MUL2)
        return z ^ (z >> u64(31))

    def absorb(key: Any, value: Any) -> Any:
        return mix(key ^ (jnp.asarray(value).astype(u64) + u64(_GOLDEN)))

    with np.errstate(over="ignore"):
        head = _absorb(_mix(np.asarray(seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
                            + np.uint64(_GOLDEN)), STREAM_MINIBATCH)
    ids = jnp.asarray(client_ids)
    # int64 -> uint64 wraps (round -1, the warm-up, becomes 2**64 - 1 as `& mask` makes it)
    key = absorb(u64(int(head)), jnp.asarray(round_, dtype=jnp.int64))
    keys = absorb(jnp.full(ids.shape, key, dtype=u64), ids.astype(jnp.int64))
    size = batch_size if replace else max_samples
    base = absorb(keys, draw)[:, None]
    steps = jnp.arange(1, size + 1, dtype=u64) * u64(_GOLDEN)
    z = mix(base + steps[None, :])
    u = (z >> u64(11)).astype(jnp.float64) * (1.0 / 9007199254740992.0)
    counts = jnp.asarray(counts)[:, None]
    if replace:
        idx = jnp.floor(u * counts.astype(jnp.float64)).astype(jnp.int64)
        return jnp.minimum(idx, counts - 1)
    u = jnp.where(jnp.arange(size)[None, :] >= counts, jnp.inf, u)
    return jnp.argsort(u, axis=1, stable=True)[:, :batch_size].astype(jnp.int64)


# --- a block's data and oracle inside the trace ----------------------------------------------

class DataArrays(NamedTuple):
    """Every client's data as the compiled calls take it (arguments, never constants)."""

    features: Array      # (n, m, *feature_shape)
    targets: Array       # (n, m)
    sample_weights: Array  # (n, m): 1/n_i on real rows
    counts: Array        # (n,) int64
    weights: Array       # (n,) π_i in the data's dtype

    @classmethod
    def of(cls, problem: Problem) -> DataArrays:
        data, like = problem.data, problem.data.like
        jnp = _jax().numpy
        return cls(data.features, data.targets, data.sample_weights(),
                   jnp.asarray(np.asarray(data.counts, dtype=np.int64)),
                   asarray_like(problem.weights, like))


class Rows(NamedTuple):
    """Which rows of the data a block holds: a static range, or traced ids."""

    start: int | None  # a range start..stop (static), or None for traced ``ids``
    stop: int | None
    ids: Any            # the block's client ids (traced int64, shape (B,))

    def take(self, x: Array) -> Array:
        if self.start is not None:
            return x[self.start:self.stop, ...]
        return _jax().numpy.take(x, self.ids, axis=0)

    def put(self, full: Array, rows: Array) -> Array:
        """``full`` with this block's rows replaced by ``rows`` (a new array)."""
        if self.start is not None:
            if self.start == 0 and self.stop == full.shape[0]:
                return rows.astype(full.dtype)
            return full.at[self.start:self.stop, ...].set(rows)
        return full.at[self.ids, ...].set(rows)


class TracedOracle(Oracle):
    """The :class:`~fedcomp.oracle.Oracle` of a block inside ``jax.jit``.

    Batches come from the traced data arrays (minibatch indices drawn by
    :func:`traced_minibatch_indices`); counting calls go to a :class:`CounterLog`.
    """

    def __init__(self, problem: Problem, arrays: DataArrays, rows: Rows, round_: Any,
                 seed: int, batch_size: int | None, log: CounterLog, size: int) -> None:
        self.problem, self.loss = problem, problem.loss
        self.arrays, self.rows, self.log, self._size = arrays, rows, log, size
        self.client_ids = rows.ids
        self.round, self.seed, self.batch_size = round_, seed, batch_size
        self._draws = 0
        self._full: Batch | None = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def counts(self) -> Any:  # traced: host code that needs them runs eagerly instead
        return self.rows.take(self.arrays.counts)

    def full_batch(self) -> Batch:
        if self._full is None:
            a, take = self.arrays, self.rows.take
            self._full = Batch(take(a.features), take(a.targets), take(a.sample_weights))
        return self._full

    def next_batch(self) -> Batch:
        draw = self._draws
        self._draws += 1
        if self.batch_size is None:
            return self.full_batch()
        if self.problem.sampler is not None:
            raise _Uncompilable("streaming samples are drawn on the host each call")
        jnp = _jax().numpy
        a = self.arrays
        max_samples = int(a.features.shape[1])
        index = traced_minibatch_indices(
            self.seed, self.round, self.client_ids, self.counts, draw, self.batch_size,
            self.problem.minibatch == "with_replacement", max_samples)
        b, m = index.shape
        rows = (jnp.arange(self.rows.start, self.rows.stop) if self.rows.start is not None
                else self.rows.ids)
        flat = jnp.reshape(rows[:, None] * max_samples + index, (-1,))
        feature_shape = tuple(a.features.shape[2:])
        feats = jnp.take(jnp.reshape(a.features, (-1, *feature_shape)), flat, axis=0)
        targs = jnp.take(jnp.reshape(a.targets, (-1,)), flat, axis=0)
        if self.problem.data.sample_weight is not None:
            # the importance weights of ClientData.minibatch, taken from the normalised rows
            # (sample_weights, s_ij / Σ_j s_ij): n_i s_ij / (m Σ_j s_ij)
            normalised = jnp.take(jnp.reshape(a.sample_weights, (-1,)), flat, axis=0)
            counts = jnp.asarray(self.counts, dtype=a.features.dtype)
            weights = jnp.reshape(normalised, (b, m)) * counts[:, None] / m
        else:
            weights = jnp.full((b, m), 1.0 / m, dtype=a.features.dtype)
        return Batch(jnp.reshape(feats, (b, m, *feature_shape)), jnp.reshape(targs, (b, m)),
                     weights)

    def _host(self, active: Any) -> Any:
        if active is None or isinstance(active, np.ndarray):
            return active
        raise _Uncompilable("the clients still at work (an `active` mask) depend on the data")

    def count_grad(self, full: bool, active: Any) -> None:
        self.log.record("count_grad", full, self._host(active))

    def count_value(self, active: Any) -> None:
        self.log.record("count_value", self._host(active))

    def count_hessian(self, active: Any) -> None:
        self.log.record("count_hessian", self._host(active))
