"""The compiled engine: a round's client updates and server update under ``jax.jit``.

With the problem's data on jax arrays (``backend = "jax"`` or ``"jax-float32"`` in a
configuration; ``problem.data.to(jax_like())`` in Python), :func:`fedcomp.simulate` runs
the same algorithm files through ``jax.jit``: each block's ``client_update`` is traced once
— its local steps unrolled into one XLA computation, the block's data sliced, its states
gathered and scattered inside the call — and so is ``server_update``. By default one block
holds every participant of a round (``client_block="auto"``); on a CPU the call cuts it
into cache-sized sub-blocks (a ``lax.map``, :meth:`CompiledClients.block`), and the rounds
between two evaluation rows run as one call (:meth:`CompiledEngine.steps`).

What stays outside the traced code, and why it needs no value:

* **Counters.** A call's gradient, prox, Hessian and loss-value counts do not depend on
  the data within the call (the number of local steps is a Python constant of the trace),
  so the counting calls made while tracing are recorded in a :class:`CounterLog` and
  replayed, through the very counting methods of :class:`~fedcomp.oracle.Oracle`, after
  every call of that compiled function: the counters equal NumPy's by construction.
* **Minibatches.** Indices are the counter-based draws of :mod:`fedcomp._random`,
  computed inside the trace from the traced round and client ids with the same SplitMix64
  hash in wrapping uint64 arithmetic (:func:`traced_minibatch_indices`; a test checks them
  against NumPy's). This is why the engine needs ``jax_enable_x64``.
* **The round and the participants** are traced values, so one compilation serves every
  round (and, with client sampling, every set of participants of the same size).

Where an algorithm needs a value on the host inside a round — a number of local steps
drawn each round (Scaffnew's geometric ``L``, FedPD, LoCoDL), a Newton solve or a
bisection that stops when it has converged, a branch on the round (FedDR's warm-up,
FedCanon II's first round), a compressor's host-side draws — tracing it fails with one of
jax's concretization errors. ``compile="auto"`` then runs that part (client update or
server update) eagerly on the jax arrays for the rest of the run, the same code as the
NumPy engine with the same counted oracle, and warns once, naming the line that needed
the value; ``compile=True`` raises :class:`NotCompilableError` instead.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, is_jax
from .._random import STREAM_MINIBATCH, _absorb, _mix
from ..algorithms import host_values
from ..algorithms._base import (
    WIRE_BITS,
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    message_bits,
)
from ..data import Batch
from ..oracle import Counters, Oracle
from ..problem import Problem
from ._jax_cache import use_compilation_cache
from ._round import (
    Traffic,
    count_downloads,
    count_traffic,
    count_uploads,
    server_context,
    traffic_of,
)

#: SplitMix64's constants, as in :mod:`fedcomp._random`.
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB

COMPILE_CHOICES = ("auto", True, False)

#: Trust the registry's :class:`~fedcomp._registry.HostValue` traits (run those parts
#: eagerly without tracing them). Tests switch it off to check that each trait is still
#: needed: tracing that part must fail.
DECLARED_TRAITS = True


class NotCompilableError(ValueError):
    """An algorithm cannot run under ``jax.jit`` with ``compile=True`` (the message says
    which value it needs on the host, and where)."""


class JaxEngineWarning(UserWarning):
    """The compiled engine runs part of an algorithm eagerly (``compile="auto"``)."""


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


# --- the round inside a trace -----------------------------------------------------------------

class RoundFrom:
    """The traced round of a compiled call that serves only rounds ``>= low``.

    Arithmetic gives traced values (``(r + 1) * step``); a comparison with an integer is
    answered on the host wherever ``r >= low`` decides it (``r < 0``, ``r > 0`` and
    ``r == 0`` for ``low = 1``: a warm-up round, a first round), so an algorithm that
    branches on those compiles once for every later round; any other use of the value
    (``int(r)``, ``r == 5``, a host hash of it) raises :class:`_Uncompilable`.
    """

    __slots__ = ("low", "value")

    def __init__(self, value: Any, low: int) -> None:
        self.value, self.low = value, low

    def _undecided(self, what: str) -> _Uncompilable:
        return _Uncompilable(f"the round is traced (known only to be >= {self.low}): {what}")

    def _int(self, other: Any) -> int:
        if isinstance(other, int | np.integer) and not isinstance(other, bool):
            return int(other)
        raise self._undecided(f"compared with {other!r}")

    def __lt__(self, other: Any) -> bool:
        if self._int(other) <= self.low:
            return False
        raise self._undecided(f"round < {other}")

    def __le__(self, other: Any) -> bool:
        if self._int(other) < self.low:
            return False
        raise self._undecided(f"round <= {other}")

    def __gt__(self, other: Any) -> bool:
        if self._int(other) < self.low:
            return True
        raise self._undecided(f"round > {other}")

    def __ge__(self, other: Any) -> bool:
        if self._int(other) <= self.low:
            return True
        raise self._undecided(f"round >= {other}")

    def __eq__(self, other: object) -> bool:
        if self._int(other) < self.low:
            return False
        raise self._undecided(f"round == {other}")

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise self._undecided("its truth value")

    def __index__(self) -> int:
        raise self._undecided("an integer")

    __int__ = __index__

    def __float__(self) -> float:
        raise self._undecided("a float")

    def __and__(self, other: Any) -> Any:
        raise self._undecided("bits of it (a host-side hash)")

    __rand__ = __and__

    def __jax_array__(self) -> Any:
        return self.value

    def __add__(self, other: Any) -> Any:
        return self.value + _value(other)

    def __radd__(self, other: Any) -> Any:
        return _value(other) + self.value

    def __sub__(self, other: Any) -> Any:
        return self.value - _value(other)

    def __rsub__(self, other: Any) -> Any:
        return _value(other) - self.value

    def __mul__(self, other: Any) -> Any:
        return self.value * _value(other)

    def __rmul__(self, other: Any) -> Any:
        return _value(other) * self.value

    def __truediv__(self, other: Any) -> Any:
        return self.value / _value(other)

    def __rtruediv__(self, other: Any) -> Any:
        return _value(other) / self.value

    def __floordiv__(self, other: Any) -> Any:
        return self.value // _value(other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _value(other) // self.value

    def __mod__(self, other: Any) -> Any:
        return self.value % _value(other)

    def __pow__(self, other: Any) -> Any:
        return self.value ** _value(other)

    def __rpow__(self, other: Any) -> Any:
        return _value(other) ** self.value

    def __neg__(self) -> Any:
        return -self.value

    def __repr__(self) -> str:
        return f"RoundFrom(>= {self.low})"


def _value(x: Any) -> Any:
    return x.value if isinstance(x, RoundFrom) else x


def _round(round_: Any, low: int | None) -> Any:
    """What ``ctx.round`` is inside a trace: the traced round, or a :class:`RoundFrom`."""
    return round_ if low is None else RoundFrom(round_, low)


# --- the engine -------------------------------------------------------------------------------

def _reason(exc: BaseException) -> str:
    """One line: what needed a host value, and the line of fedcomp code that asked.

    The line is the innermost one in an algorithm file where there is one (a helper such
    as ``to_numpy`` says less than its caller), else the innermost fedcomp line.
    """
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/fedcomp/" in f.filename.replace("\\", "/")
              and not f.filename.endswith("_compiled.py")]
    in_algorithms = [f for f in frames if "/algorithms/" in f.filename.replace("\\", "/")]
    where = ""
    if frames:
        frame = (in_algorithms or frames)[-1]
        where = (f" ({frame.filename.replace(chr(92), '/').split('/fedcomp/')[-1]}:"
                 f"{frame.lineno}: {frame.line})")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first}{where}"


class _TraceFailed(Exception):
    """Tracing a part raised (its ``__cause__``): it needs a host value, or it is a genuine
    error, which then recurs when the part runs eagerly."""


class _Traced:
    """A jitted function that tells a failure while tracing from one while running.

    Any exception raised while the function is traced becomes :class:`_TraceFailed`: jax
    raises its concretization errors there, but host code given a tracer can fail in
    other ways too (an ``OverflowError`` from ``round & mask``, an unhashable tracer).
    """

    def __init__(self, fn: Callable[..., Any], **jit_options: Any) -> None:
        self.traces = 0

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.traces += 1
            return fn(*args, **kwargs)

        self.jitted = _jax().jit(counted, **jit_options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = self.traces
        try:
            return self.jitted(*args, **kwargs)
        except Exception as exc:
            if self.traces != before:
                raise _TraceFailed() from exc
            raise


#: What a compiled part returns for a call it leaves to the eager path.
EAGER = object()


class _Part:
    """A traced function with its ladder of fallbacks.

    1. one compilation for every round, the round traced;
    2. if tracing that fails: one compilation for the rounds ``>= 1`` with a
       :class:`RoundFrom` round (an algorithm branching on its warm-up or first round),
       the rounds before eagerly;
    3. if that fails too: eagerly from then on — after a :class:`JaxEngineWarning`
       saying why, or a :class:`NotCompilableError` with ``compile=True`` (``quiet``:
       neither, for the whole-round call, whose parts then try on their own).

    ``fn(round_, *args, low=..., **static)`` is the function to trace.
    """

    def __init__(self, fn: Callable[..., Any], name: str, part: str, compile_: Any,
                 static: tuple[str, ...] = (), quiet: bool = False) -> None:
        self.traced = _Traced(fn, static_argnames=(*static, "low"))
        self.name, self.part, self.compile, self.quiet = name, part, compile_, quiet
        self.low: int | None = None
        self.eager = compile_ is False
        self.reason = ""

    def __call__(self, round_: int, *args: Any, **static: Any) -> Any:
        """The compiled call's result, or :data:`EAGER`: the caller runs it eagerly."""
        while not self.eager:
            if self.low is not None and round_ < self.low:
                return EAGER
            try:
                return self.traced(round_, *args, low=self.low, **static)
            except _TraceFailed as failed:
                if self.low is None:
                    self.low = 1
                else:
                    self._give_up(failed)
        return EAGER

    def _give_up(self, failed: _TraceFailed) -> None:
        exc = failed.__cause__ or failed
        self.declare_eager(_reason(exc), cause=exc)

    def declare_eager(self, reason: str, cause: BaseException | None = None) -> None:
        """Run this part eagerly from now on, because of ``reason``: a warning, or with
        ``compile=True`` a :class:`NotCompilableError` (neither for a ``quiet`` part)."""
        self.eager, self.reason = True, reason
        if self.quiet:
            return
        message = (f"{self.name}: its {self.part} cannot run under jax.jit, it needs a value "
                   f"on the host: {self.reason}")
        if self.compile is True:
            raise NotCompilableError(message + "; use compile='auto' to run it eagerly on "
                                     "the jax arrays, or backend = 'numpy'") from cause
        warnings.warn(message + "; it runs eagerly on the jax arrays (same results, "
                      "uncompiled)", JaxEngineWarning, stacklevel=6)


def _block_ids(block: slice | np.ndarray) -> np.ndarray:
    """The client ids of a block (a slice of consecutive ids, or the ids)."""
    return np.arange(block.start, block.stop) if isinstance(block, slice) else block


def _block_key(block: slice | np.ndarray) -> tuple[int | None, int | None, tuple[Any, ...]]:
    """``(start, stop, key)``: a range block's static bounds (``None`` for traced ids) and
    the key of its counters (a range, or the ids: their sample counts differ)."""
    if isinstance(block, slice):
        start, stop = int(block.start), int(block.stop)
        return start, stop, (start, stop, stop - start)
    return None, None, (None, None, len(block), block.tobytes())


def _part_of(block: slice | np.ndarray, ids: np.ndarray, offset: int, length: int
             ) -> slice | np.ndarray:
    """Clients ``offset .. offset + length - 1`` of a block, as the block is (a range or
    ids)."""
    if isinstance(block, slice):
        return slice(block.start + offset, block.start + offset + length)
    return ids[offset:offset + length]


def even_part(size: int, most: int) -> int:
    """The sub-block of a block of ``size`` clients cut into parts of at most ``most``, as
    equal as can be: ``ceil(size / ceil(size / most))``.

    A lone remainder is one more call of another shape in the traced round (at 100 clients
    × 20 × 1024 on a 2-core CPU, sub-blocks of 32 and a rest of 4 took 6.9 ms a ZA1 round,
    four of 25 took 5.2 ms).

    Examples
    --------
    >>> even_part(100, 32), even_part(1000, 256), even_part(7, 10)
    (25, 250, 7)
    """
    parts = -(-size // max(1, min(most, size)))
    return -(-size // parts)


def sub_block_size(problem: Problem, batch_size: int | None) -> int:
    """Clients per sub-block of a compiled call: measured on a CPU (the jit-compiled
    gradient, :func:`~fedcomp.runtime._blocks.measured_block_size`), all of them on an
    accelerator."""
    from ._blocks import compiled_local_steps, measured_block_size
    from ._clients import cache_block_size

    devices = getattr(problem.data.like, "devices", None)
    if devices is not None and any(d.platform != "cpu" for d in devices()):
        return problem.n_clients
    return measured_block_size(problem, batch_size, "jax-compiled", rule=cache_block_size,
                               work=compiled_local_steps(problem.loss, problem.n_clients))


def _flatten(x: Array, rows: int) -> Array:
    """``(blocks, per block, ...)`` -> ``(rows, ...)``."""
    return _jax().numpy.reshape(x, (rows, *x.shape[2:]))


def _concat_traced(parts: list[Any]) -> Any:
    """NamedTuples of arrays concatenated field by field along the clients' axis."""
    if len(parts) == 1:
        return parts[0]
    jnp = _jax().numpy
    return type(parts[0])(*(jnp.concatenate(fields, axis=0)
                            for fields in zip(*parts, strict=True)))


def _device_ids(block: slice | np.ndarray) -> Any:
    return _jax().numpy.asarray(_block_ids(block), dtype="int64")


def _bounded(cache: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """``cache[key]``, made on a miss; emptied past 64 entries (client sampling: a new
    set of participants most rounds)."""
    value = cache.get(key)
    if value is None:
        if len(cache) > 64:
            cache.clear()
        value = cache[key] = make()
    return value


class CompiledClients:
    """The client executor of the jax engine (the clients of :func:`simulate`).

    Same ``run_round`` and ``client_states`` as
    :class:`~fedcomp.runtime._clients.LocalClients`, which runs the calls the compiled
    part leaves to the eager path.
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: Any) -> None:
        check_x64()
        self.algorithm, self.problem, self.counters, self.settings = (
            algorithm, problem, counters, settings)
        self.client_states = client_states
        self.arrays = DataArrays.of(problem)
        #: per traced block: its pieces ``(offset, clients, counting calls)``
        self.logs: dict[Any, list[tuple[int, int, CounterLog]]] = {}
        self.deltas: dict[Any, Counters] = {}
        self.ids: dict[Any, Any] = {}
        self.part = _Part(self.block, algorithm.name, "client update", settings.compile,
                          static=("start", "stop"))
        self.sub_block = sub_block_size(problem, settings.batch_size)

    def block(self, round_: Any, message: Any, states: Any, ids: Any, arrays: DataArrays, *,
              low: int | None, start: int | None, stop: int | None) -> tuple[Any, Any]:
        """The traced local work of one block, its states gathered and scattered inside.

        A block larger than :attr:`sub_block` runs as a ``lax.map`` over sub-blocks of at
        most that many clients, as equal as can be (:func:`even_part`; one call for the
        rest where they cannot be equal), each doing all its local steps
        before the next starts: its data stay in cache across the steps, as the NumPy
        engine's blocks do (at 1000 clients x 20 x 100, 2.5x faster than the whole block
        at each step). Clients never interact within ``client_update``, so the cut
        changes no value.
        """
        rows = Rows(start, stop, ids)
        size = int(ids.shape[0])
        data = DataArrays(*(rows.take(f) for f in arrays))
        gathered = type(states)(*(rows.take(f) for f in states))
        sub = even_part(size, self.sub_block)
        whole = size // sub * sub
        pieces: list[tuple[int, int, CounterLog]] = []
        uploads: list[Any] = []
        news: list[Any] = []
        if whole > sub:  # lax.map over the sub-blocks of the first `whole` clients
            def one(part: tuple[Any, Any, Any]) -> tuple[Any, Any]:
                upload, new, log = self.local(round_, message, *part, low=low)
                logs.append(log)
                return upload, new

            logs: list[CounterLog] = []

            def cut(x: Array) -> Array:
                return _jax().numpy.reshape(x[:whole], (whole // sub, sub, *x.shape[1:]))

            upload, new = _jax().lax.map(one, _jax().tree.map(cut, (gathered, ids, data)))
            pieces += [(offset, sub, logs[0]) for offset in range(0, whole, sub)]
            uploads.append(_jax().tree.map(lambda x: _flatten(x, whole), upload))
            news.append(_jax().tree.map(lambda x: _flatten(x, whole), new))
            done = whole
        else:
            done = 0
        if done < size:  # the rest (or the whole block) in one call
            def rest(x: Array) -> Array:
                return x[done:] if done else x

            upload, new, log = self.local(round_, message, *_jax().tree.map(
                rest, (gathered, ids, data)), low=low)
            pieces.append((done, size - done, log))
            uploads.append(upload)
            news.append(new)
        upload, new = (_concat_traced(uploads), _concat_traced(news))
        # published once the whole call is traced: a failed trace leaves no partial log
        self.logs[(start, stop, size, low)] = pieces
        return upload, type(states)(*(rows.put(f, r) for f, r in zip(states, new, strict=True)))

    def local(self, round_: Any, message: Any, states: Any, ids: Any, data: DataArrays, *,
              low: int | None) -> tuple[Any, Any, CounterLog]:
        """``client_update`` of the clients ``ids`` on their own ``data`` rows (traced):
        ``(upload, new states, its counting calls)``."""
        size = int(ids.shape[0])
        log = CounterLog()
        oracle = TracedOracle(self.problem, data, Rows(0, size, ids), round_,
                              self.settings.seed, self.settings.batch_size, log, size)
        regularizer = self.problem.regularizer

        def prox(v: Array, step: Any) -> Array:
            log.record("prox_client", int(v.shape[0]))
            return regularizer.prox(v, step)

        ctx = ClientContext(oracle, prox, _round(round_, low), ids, data.weights,
                            self.problem.n_clients)
        upload, new = self.algorithm.client_update(message, states, ctx)
        return upload, new, log

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        from ._clients import _blocks, _concat

        uploads = []
        for block in _blocks(participants, self.settings.block_size):
            start, stop, key = _block_key(block)
            ids = _bounded(self.ids, key, functools.partial(_device_ids, block))
            out = self.part(round_, message, self.client_states, ids, self.arrays,
                            start=start, stop=stop)
            if out is EAGER:
                uploads.append(self.run_eager(round_, message, block))
                continue
            upload, self.client_states = out
            uploads.append(upload)
            _add(self.counters, self.delta(key, block, round_, self.part.low))
        return _concat(uploads)

    def run_eager(self, round_: int, message: Any, participants: np.ndarray | slice) -> Any:
        """One call of ``client_update`` run eagerly (the NumPy engine's executor)."""
        from ._clients import LocalClients

        local = LocalClients(self.algorithm, self.problem, self.client_states, self.counters,
                             self.settings._replace(block_size=self.problem.n_clients))
        upload = local.run_round(round_, message, _block_ids(participants))
        self.client_states = local.client_states
        return upload

    def delta(self, key: tuple[Any, ...], block: Any, round_: int, low: int | None
              ) -> Counters:
        """What one call of this block, traced with ``low``, adds to the counters (cached
        per block): each sub-block's counting calls replayed on a host oracle of its
        clients."""
        def make() -> Counters:
            total = Counters()
            ids = _block_ids(block)
            for offset, length, log in self.logs[(*key[:3], low)]:
                oracle = Oracle(self.problem, _part_of(block, ids, offset, length), round_,
                                self.settings.seed, self.settings.batch_size, Counters())
                _add(total, log.delta(oracle))
            return total

        return _bounded(self.deltas, (*key, low), make)


class CompiledServer:
    """``server_update`` under ``jax.jit`` (eagerly where it cannot be traced)."""

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, counters: Counters,
                 seed: int, compile_: Any, server_prox: Callable[[Array, Any], Array]) -> None:
        self.algorithm, self.problem, self.counters, self.seed = (
            algorithm, problem, counters, seed)
        self.server_prox = server_prox
        self.logs: dict[int | None, CounterLog] = {}
        self.contexts: dict[bytes, tuple[Any, Any, Any]] = {}
        self.part = _Part(self.update_traced, algorithm.name, "server update", compile_)

    def update_traced(self, round_: Any, state: Any, uploads: Any, ids: Any, weights: Any,
                      pi: Any, *, low: int | None) -> Any:
        """The traced server step (its prox calls recorded in :attr:`logs`)."""
        log = CounterLog()
        regularizer = self.problem.regularizer

        def prox(v: Array, step: Any) -> Array:
            log.record("prox_server")
            return regularizer.prox(v[None, ...], step)[0, ...]

        ctx = ServerContext(prox, _round(round_, low), ids, weights, pi, self.problem.n_clients,
                            self.seed)
        new = self.algorithm.server_update(state, uploads, ctx)
        self.logs[low] = log
        return new

    def update(self, state: Any, uploads: Any, round_: int, participants: np.ndarray) -> Any:
        out = self.part(round_, state, uploads, *self.context(participants))
        if out is EAGER:
            return self.update_eager(state, uploads, round_, participants)
        _add(self.counters, self.logs[self.part.low].delta(None))
        return out

    def update_eager(self, state: Any, uploads: Any, round_: int, participants: np.ndarray
                     ) -> Any:
        return self.algorithm.server_update(
            state, uploads, server_context(self.problem, self.server_prox, round_, participants,
                                           self.problem.data.like, self.seed))

    def context(self, participants: np.ndarray) -> tuple[Any, Any, Any]:
        """``(ids, weights, pi)`` of the participants as device arrays (cached per set)."""
        return _bounded(self.contexts, participants.tobytes(),
                        functools.partial(participant_context, self.problem, participants))


def participant_context(problem: Problem, ids: np.ndarray) -> tuple[Any, Any, Any]:
    """``(ids, π_i / Σπ, π_i)`` of a round's participants ``ids``, shape ``(B,)``, or of
    several rounds' stacked, ``(rounds, B)``, as device arrays."""
    pi = problem.weights[ids]
    # row by row: each round's weights are summed as one round's alone would be
    weights = pi / pi.sum() if pi.ndim == 1 else np.stack([row / row.sum() for row in pi])
    like = problem.data.like
    return (_jax().numpy.asarray(ids, dtype="int64"), asarray_like(weights, like),
            asarray_like(pi, like))


def _wire_bits(message: Any) -> Any:
    """The sum of a message's :data:`WIRE_BITS` field (traced), or ``None``."""
    fields = dict(zip(message._fields, message, strict=True))
    return None if WIRE_BITS not in fields else _jax().numpy.sum(fields[WIRE_BITS])


def _static_bits(message: Any) -> int | None:
    """A traced message's bits where its shapes and dtypes give them (``None`` where a
    :data:`WIRE_BITS` field does: its traced sum is returned by the call instead)."""
    return None if WIRE_BITS in message._fields else message_bits(message)


#: A compiled call runs at most this many rounds (the progress line and Ctrl-C wait for it).
MAX_CHUNK = 256

#: ... and about this many data floats touched, summed over its rounds (participants x
#: samples x features per round): a round of ZA1 with 5 local steps takes ~5 ns per float
#: on one core, so a call lasts ~0.1 s per local step per 10 rounds at most, while at
#: 30 clients x 20 samples x 60 features a call holds 256 rounds.
CHUNK_FLOATS = 20_000_000


def chunk_length(problem: Problem, participants: int, batch_size: int | None,
                 eval_every: int) -> int:
    """Rounds per compiled call between two evaluations (1: a call per round).

    A round's dispatch — Python, the jit cache lookup, arguments, the host read of
    ``Σ x²`` — costs ~0.1–0.3 ms whatever the problem's size, as much as a whole ZA1 round
    at 30 clients x 60 features; rounds between two evaluation rows need nothing from the
    host, so they run as one call (:meth:`CompiledEngine.steps`) and the dispatch is paid
    once per call. Calls stay short (:data:`CHUNK_FLOATS`, :data:`MAX_CHUNK`), so large
    problems, whose dispatch is negligible beside the round, still run a round per call.
    """
    samples = problem.data.max_samples if batch_size is None else min(
        batch_size, problem.data.max_samples)
    floats = participants * samples * int(np.prod(problem.data.feature_shape))
    return int(max(1, min(eval_every, MAX_CHUNK, CHUNK_FLOATS // max(floats, 1))))


class CompiledEngine:
    """A whole round — broadcast, the clients, the server — as one ``jax.jit`` call.

    When a round's participants form one block (the default ``client_block="auto"``),
    the broadcast, the block's ``client_update``, ``server_update`` and ``‖output‖²`` (for
    the divergence check) are traced together: one dispatch per round, as a hand-written
    ``jax.jit`` round has. Otherwise, or where the whole round cannot be traced, the parts
    run on their own (:class:`CompiledClients`, :class:`CompiledServer`), each compiled
    or eager. :meth:`steps` runs several such rounds as one call (a ``fori_loop`` over
    them), where nothing needs the host between them.
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: Any, server_prox: Callable[[Array, Any], Array]
                 ) -> None:
        self.algorithm, self.counters = algorithm, counters
        self.clients = CompiledClients(algorithm, problem, client_states, counters, settings)
        self.server = CompiledServer(algorithm, problem, counters, settings.seed,
                                     settings.compile, server_prox)
        self.traffic: dict[int, Traffic] = {}  # per participants: a trace's (static) traffic
        self.part = _Part(self.round_traced, algorithm.name, "round", settings.compile,
                          static=("start", "stop"), quiet=True)
        self.chunk = _Part(self.rounds_traced, algorithm.name, "rounds", settings.compile,
                           static=("start", "stop", "length"), quiet=True)
        self.n_clients, self.problem = problem.n_clients, problem
        self.clients.client_states = self.place(client_states)
        if DECLARED_TRAITS:
            self._declare(host_values(algorithm, settings.batch_size,
                                      bool(getattr(problem.loss, "quadratic", False))))

    def _declare(self, needs: dict[str, str]) -> None:
        """The parts the algorithm's registry entry says read host values run eagerly from
        round 1, without a trace that would fail (with ``compile=True``: refused now)."""
        parts = {"client update": self.clients.part, "server update": self.server.part}
        for part, reason in needs.items():
            parts[part].declare_eager(f"{reason} (its registry entry's host_values)")
        if needs:  # a whole-round call holds both parts
            self.part.declare_eager("", None)
            self.chunk.declare_eager("", None)

    def place(self, tree: Any) -> Any:
        """``tree``'s arrays committed to the data's device.

        A compiled call's outputs are committed to their device; fresh arrays (``init``'s
        zeros) are not, and jax compiles a function anew for each placement of its
        arguments: without this the second call compiles the round again (0.8–1 s).
        """
        jax = _jax()
        device = next(iter(self.problem.data.like.devices()))
        return jax.device_put(tree, device)

    def chunk_length(self, clients_per_round: int | None, batch_size: int | None,
                     eval_every: int) -> int:
        """:func:`chunk_length` of this run (participants: ``clients_per_round`` or all)."""
        return chunk_length(self.problem, clients_per_round or self.n_clients, batch_size,
                            eval_every)

    def round_traced(self, round_: Any, server_state: Any, client_states: Any, ids: Any,
                     weights: Any, pi: Any, arrays: DataArrays, *, low: int | None,
                     start: int | None, stop: int | None) -> Any:
        """The traced round: ``(server state, client states, wire bits down and up, Σ x²)``."""
        message = self.algorithm.broadcast(server_state)
        uploads, client_states = self.clients.block(round_, message, client_states, ids,
                                                    arrays, low=low, start=start, stop=stop)
        server_state = self.server.update_traced(round_, server_state, uploads, ids, weights,
                                                 pi, low=low)
        self.traffic[int(ids.shape[0])] = traffic_of(message, uploads, bits=_static_bits)
        down, up = _wire_bits(message), _wire_bits(uploads)
        out = self.algorithm.output(server_state)
        return server_state, client_states, down, up, _jax().numpy.sum(out * out)

    def rounds_traced(self, first: Any, count: Any, server_state: Any, client_states: Any,
                      ids: Any, weights: Any, pi: Any, arrays: DataArrays, *, low: int | None,
                      start: int | None, stop: int | None, length: int) -> Any:
        """Rounds ``first .. first + count - 1`` traced as one ``fori_loop`` (``count`` is
        traced, at most ``length``): the states after them, and each round's wire bits
        down and up and ``Σ x²`` in arrays of ``length`` (zeros past ``count``).

        ``ids``, ``weights`` and ``pi`` are one round's (every round has the same
        participants, ``start:stop``) or stacked per round, shape ``(length, B)``.
        """
        jax = _jax()
        jnp = jax.numpy
        per_round = ids.ndim == 2

        def one_round(k: Any, carry: tuple[Any, ...]) -> tuple[Any, ...]:
            server, clients, bits_down, bits_up, sums = carry
            who = (ids[k], weights[k], pi[k]) if per_round else (ids, weights, pi)
            server, clients, down, up, sum_sq = self.round_traced(
                first + k, server, clients, *who, arrays, low=low, start=start, stop=stop)
            if down is not None:
                bits_down = bits_down.at[k].set(down)
            if up is not None:
                bits_up = bits_up.at[k].set(up)
            return server, clients, bits_down, bits_up, sums.at[k].set(sum_sq)

        zeros = jnp.zeros(length, dtype=jnp.float64)
        return jax.lax.fori_loop(jnp.int64(0), count, one_round,
                                 (server_state, client_states, zeros, zeros, zeros))

    def steps(self, server_state: Any, first: int, participants: list[np.ndarray],
              length: int) -> tuple[Any, list[Any]]:
        """Rounds ``first, first + 1, ...`` (``participants[k]`` in round ``first + k``):
        ``(new server state, [Σ x² after each round])``; the counters advance.

        One compiled call runs them all (:meth:`rounds_traced`, compiled once for calls of
        up to ``length`` rounds) where the whole round compiles and each round's
        participants form one block; otherwise they run a round at a time (:meth:`step`).
        """
        if len(participants) > 1 and all(len(p) <= self.clients.settings.block_size
                                          for p in participants):
            out = self._chunk(server_state, first, participants, length)
            if out is not EAGER:
                return out
        sums = []
        for k, who in enumerate(participants):
            server_state, sum_sq = self.step(server_state, first + k, who)
            if sum_sq is None:  # the round ran in parts: the divergence check needs Σ x²
                out = self.algorithm.output(server_state)
                sum_sq = float(_jax().numpy.sum(out * out))
            sums.append(sum_sq)
        return server_state, sums

    def _chunk(self, server_state: Any, first: int, participants: list[np.ndarray],
               length: int) -> Any:
        count, size, clients = len(participants), len(participants[0]), self.clients
        start: int | None
        stop: int | None
        if size == self.n_clients:  # every client every round: a static range
            start, stop = 0, size
            ids, weights, pi = self.server.context(participants[0])
        else:  # sampled: the rounds' ids stacked (padded with the first round's)
            start = stop = None
            ids, weights, pi = participant_context(
                self.problem, np.stack(participants + [participants[0]] * (length - count)))
        out = self.chunk(first, count, server_state, clients.client_states, ids, weights, pi,
                         clients.arrays, start=start, stop=stop, length=length)
        if out is EAGER:
            return EAGER
        server_state, clients.client_states, bits_down, bits_up, sums = out
        sums = np.asarray(sums)  # the host read waits for the call (wall_s times the work)
        bits_down, bits_up = np.asarray(bits_down), np.asarray(bits_up)
        low = self.chunk.low
        for k, who in enumerate(participants):
            key = (0, size, size) if start is not None else (None, None, size, who.tobytes())
            block = slice(0, size) if start is not None else who
            self._count(size, bits_down[k], bits_up[k])
            _add(self.counters, clients.delta(key, block, first + k, low))
            _add(self.counters, self.server.logs[low].delta(None))
        return server_state, list(sums[:count])

    def step(self, server_state: Any, round_: int, participants: np.ndarray
             ) -> tuple[Any, Any]:
        """One round: ``(new server state, ‖output‖² or None)``; the counters advance.

        It returns once the round is computed (jax dispatches asynchronously), so that
        the run's ``wall_s`` times the work, not its dispatch: reading ``Σ x²``, an output
        of the same call, to the host waits for all of it in one transfer.
        """
        server_state, sum_sq = self._step(server_state, round_, participants)
        if sum_sq is None:
            return _jax().block_until_ready(server_state), None
        return server_state, float(sum_sq)

    def _step(self, server_state: Any, round_: int, participants: np.ndarray
              ) -> tuple[Any, Any]:
        from ._clients import _blocks

        blocks = _blocks(participants, self.clients.settings.block_size)
        if len(blocks) == 1:
            start, stop, key = _block_key(blocks[0])
            clients = self.clients
            out = self.part(round_, server_state, clients.client_states,
                            *self.server.context(participants), clients.arrays,
                            start=start, stop=stop)
            if out is not EAGER:
                server_state, clients.client_states, down, up, sum_sq = out
                low = self.part.low
                self._count(len(participants), down, up)
                _add(self.counters, clients.delta(key, blocks[0], round_, low))
                _add(self.counters, self.server.logs[low].delta(None))
                return server_state, sum_sq
        return self._parts(server_state, round_, participants), None

    def _count(self, n: int, down: Any, up: Any) -> None:
        """A compiled round's traffic between the server and ``n`` clients: its trace's,
        with the call's :data:`WIRE_BITS` sums ``down`` and ``up`` where the trace left
        them (:func:`~fedcomp.runtime._round.count_traffic`, as every engine counts)."""
        traffic = self.traffic[n]
        count_traffic(self.counters, traffic._replace(
            bits_down=down if traffic.bits_down is None else traffic.bits_down,
            bits_up=up if traffic.bits_up is None else traffic.bits_up), n)

    def _parts(self, server_state: Any, round_: int, participants: np.ndarray) -> Any:
        """The round part by part (each compiled or eager), counted as every engine counts
        (:mod:`fedcomp.runtime._round`)."""
        message = self.algorithm.broadcast(server_state)
        stacked = self.clients.run_round(round_, message, participants)
        count_downloads(self.counters, message, len(participants))
        count_uploads(self.counters, stacked, len(participants))
        return self.server.update(server_state, stacked, round_, participants)
