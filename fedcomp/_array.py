"""Array API helpers shared by the whole core.

Core code never imports NumPy or torch directly for computation: it asks
:func:`namespace` for the namespace of its inputs (``array_api_compat``) and uses only
functions of the Array API standard, so the same code runs on NumPy arrays (the default),
PyTorch tensors and ``array_api_strict`` arrays. Host-side bookkeeping (indices, seeds,
client sampling) is plain NumPy and is converted with :func:`asarray_like`.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np

Array = Any  # an Array API array (NumPy, torch, array_api_strict, ...)


_NAMESPACES: dict[type, Any] = {}


def namespace(*arrays: Array) -> Any:
    """Return the Array API namespace of ``arrays`` (NumPy for Python scalars).

    The lookup is cached per array type: ``array_api_compat.array_namespace`` costs more
    than a small elementwise operation, and the core asks for a namespace in every call.
    """
    if len(arrays) == 1:  # most calls: one array of a known type, one dictionary lookup
        xp = _NAMESPACES.get(type(arrays[0]))  # only array types are ever cached
        if xp is not None:
            return xp
    arrays = tuple(a for a in arrays if a is not None and not isinstance(a, int | float))
    if not arrays:
        arrays = (np.zeros(0),)
    kind = type(arrays[0])
    if all(type(a) is kind for a in arrays[1:]):
        xp = _NAMESPACES.get(kind)
        if xp is None:
            xp = _NAMESPACES[kind] = array_api_compat.array_namespace(arrays[0])
        return xp
    return array_api_compat.array_namespace(*arrays)


def device_of(x: Array) -> Any:
    """The device ``x`` lives on (``"cpu"`` for NumPy): every array made to go with ``x``
    is created there, so nothing mixes devices (a GPU refuses that at the first operation)."""
    return array_api_compat.device(x)


def stacked_zeros(x: Array, n: int) -> Array:
    """``n`` zero models shaped like ``x``, stacked on a leading client axis: shape
    ``(n, *x.shape)``, in the namespace, dtype and on the device of ``x``.

    The client states of most algorithms start here.

    Examples
    --------
    >>> stacked_zeros(np.ones(3), 2).shape
    (2, 3)
    """
    return namespace(x).zeros((n, *x.shape), dtype=x.dtype, device=device_of(x))


def is_numpy(xp: Any) -> bool:
    """True when ``xp`` is (the compat wrapper of) NumPy."""
    return array_api_compat.is_numpy_namespace(xp)


def is_torch(xp: Any) -> bool:
    """True when ``xp`` is (the compat wrapper of) PyTorch."""
    return array_api_compat.is_torch_namespace(xp)


def asarray_like(values: Any, like: Array, dtype: Any = None) -> Array:
    """Convert host values (NumPy arrays, lists, scalars) to the namespace/device of ``like``.

    ``dtype`` defaults to the dtype of ``like`` for floating values, so float32 models stay
    float32 (no silent promotion).
    """
    if type(like) is np.ndarray:  # the host's own arrays: no namespace, no device to ask
        arr = np.asarray(values)
        if dtype is None and arr.dtype.kind == "f":
            dtype = like.dtype
        return arr if dtype is None else arr.astype(dtype, copy=False)
    xp = namespace(like)
    if dtype is None:
        arr = np.asarray(values)
        dtype = like.dtype if np.issubdtype(arr.dtype, np.floating) else None
    if dtype is None:
        return xp.asarray(np.asarray(values), device=array_api_compat.device(like))
    return xp.asarray(np.asarray(values), dtype=dtype, device=array_api_compat.device(like))


def is_traced(x: Any) -> bool:
    """True for an abstract value inside ``jax.jit`` (a tracer): it has no value to read.

    Host-side checks (a step's validity, an overflow test) are skipped or replaced by an
    elementwise select for such values. Decided by the class name, so the core never
    imports jax; concrete jax arrays, like NumPy and torch arrays, are not traced.

    Examples
    --------
    >>> is_traced(np.zeros(2)), is_traced(1.0)
    (False, False)
    """
    return any(cls.__name__ == "Tracer" and cls.__module__.startswith("jax")
               for cls in type(x).__mro__)


def is_jax(x: Any) -> bool:
    """True for a jax array (concrete or traced), without importing jax."""
    return type(x).__module__.startswith("jax") and hasattr(x, "__array_namespace__")


def to_numpy(x: Array) -> np.ndarray:
    """Copy any Array API array, on any device, to a NumPy array on the host.

    This is the one door from a device to the host: the divergence check, evaluation
    rows, checkpoints and host-side bookkeeping read arrays through it. A GPU tensor is
    copied off its device (torch ``.cpu()``, jax ``device_get``); any other Array API
    array is first moved to its namespace's default device (array-api-strict refuses to
    hand NumPy an array on its second device, as a GPU array would) and then read
    through DLPack.
    """
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic | int | float | bool):
        return np.asarray(x)
    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    if is_jax(x):
        return np.asarray(x)  # jax copies from whichever device holds it
    xp = x.__array_namespace__()
    info = getattr(xp, "__array_namespace_info__", None)
    if info is not None and array_api_compat.device(x) != info().default_device():
        x = x.to_device(info().default_device())
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError):
        return np.asarray(x)


def expand_to(values: Array, ndim: int) -> Array:
    """Append singleton axes so a per-client array of shape ``(B,)`` broadcasts over models."""
    xp = namespace(values)
    while values.ndim < ndim:
        values = xp.expand_dims(values, axis=-1)
    return values


def check_step(step: Any) -> None:
    """Raise ``ValueError`` unless every prox step in ``step`` is finite and ``>= 0``.

    Python scalars, sequences and NumPy arrays (the host-side steps the algorithms
    compute) are checked; other arrays (torch tensors, possibly on a GPU) are not, so a
    prox never waits on the device just to validate its step.
    """
    if isinstance(step, int | float):
        if not 0 <= step < math.inf:
            raise ValueError(_bad_step_message(step))
        return
    if isinstance(step, np.ndarray | np.generic | list | tuple):
        arr = np.asarray(step)
        # min >= 0 fails for NaN and -inf, max < inf for +inf: two reductions, no copy
        if arr.size and not (arr.min() >= 0 and arr.max() < math.inf):
            bad = arr[~((arr >= 0) & (arr < math.inf))].flat[0]
            raise ValueError(_bad_step_message(bad.item()))


def _bad_step_message(bad: Any) -> str:
    return (f"prox step must be finite and >= 0 (got step={bad!r}); check the learning "
            "rates (client_lr, server_lr) and the schedule the step is computed from")


def per_client(step: Any, like: Array, param_ndim: int) -> Array | float:
    """Broadcastable step: Python scalars pass through, ``(B,)`` arrays gain model axes.

    A per-client step lets a block of clients each use its own prox parameter (FedDA's
    step grows with the local step *and* the client's round; asynchronous methods differ
    per client). Steps are validated by :func:`check_step`; array steps are cast to the
    dtype and device of ``like``, so a float64 step never promotes a float32 model.
    """
    check_step(step)
    if isinstance(step, int | float):
        return float(step)
    if isinstance(step, np.ndarray | np.generic):
        step = asarray_like(step, like, dtype=like.dtype)
    else:
        step = namespace(like).asarray(step, dtype=like.dtype,
                                       device=array_api_compat.device(like))
    if step.ndim == 0:
        return step
    return expand_to(step, like.ndim if step.ndim < like.ndim else step.ndim)


def weighted_sum(values: Array, weights: Array) -> Array:
    """``Σ_i w_i values_i`` over the leading client axis (weights shape ``(B,)``).

    A C-contiguous NumPy array goes through ``einsum``, which accumulates client after
    client as ``sum(w * values, axis=0)`` does — bit for bit the same result — without the
    ``(B, ...)`` array of products: averaging 100 clients' uploads of rcv1's 47 236 features
    would otherwise hold a second 36 MiB copy of them.

    Examples
    --------
    >>> weighted_sum(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, 0.5])).tolist()
    [2.0, 3.0]
    """
    if isinstance(values, np.ndarray) and isinstance(weights, np.ndarray) and \
            values.ndim >= 1 and values.flags.c_contiguous:
        return np.einsum("i,i...->...", weights, values)
    xp = namespace(values)
    w = expand_to(weights, values.ndim)
    return xp.sum(w * values, axis=0)


def squared_norm(x: Array) -> Any:
    """``Σ x²`` over every entry of ``x``, a 0-d value in ``x``'s namespace (what the
    divergence check reads): a dot product for NumPy (no temporary, no wrapper; it runs
    after every round).

    Examples
    --------
    >>> float(squared_norm(np.array([[3.0], [4.0]])))
    25.0
    """
    if type(x) is np.ndarray:
        flat = x.reshape(-1)
        return flat @ flat
    return namespace(x).sum(x * x)


def model_norm(x: Array, param_ndim: int) -> Array:
    """Euclidean (Frobenius) norm of each model in a block (shape ``x.shape[:-param_ndim]``),
    free of overflow and underflow.

    ``sqrt(Σ x²)`` overflows once an entry exceeds ``sqrt(max)`` (1e154 in float64, 2e19 in
    float32) and underflows to 0 below ``sqrt(tiny)``. Scaling each model by a power of
    two ``2^k`` near ``max |x|`` first (as LAPACK's ``nrm2`` scales) avoids both, and since
    multiplying by a power of two is exact the result is bit for bit the unscaled one
    wherever that neither overflows nor underflows. That path runs only where the plain
    ``sqrt(Σ x²)`` overflowed or lost precision (one host-side check per call).
    """
    xp = namespace(x)
    axes = tuple(range(x.ndim - param_ndim, x.ndim))
    finfo = xp.finfo(x.dtype)
    sum_sq = xp.sum(x * x, axis=axes)
    # the common case, at the plain cost: nothing overflowed and no sum lost precision in
    # the subnormal range (a sum of exactly 0, whether x is 0 or its squares all underflowed,
    # is harmless to every caller: such a model is inside any ball and below any threshold)
    plain = xp.isfinite(sum_sq) & ((sum_sq >= finfo.smallest_normal) | (sum_sq == 0))
    if is_traced(sum_sq):
        # inside jax.jit nothing can be read on the host: both paths, selected per model
        # (the scaled one equals the plain one wherever the plain one is accurate)
        return xp.where(plain, xp.sqrt(sum_sq), _scaled_norm(x, axes, finfo))
    if bool(xp.all(plain)):
        return xp.sqrt(sum_sq)
    return _scaled_norm(x, axes, finfo)


def _scaled_norm(x: Array, axes: tuple[int, ...], finfo: Any) -> Array:
    """:func:`model_norm` with each model scaled by a power of two near its largest entry."""
    xp = namespace(x)
    # max and min reduce without a temporary the size of x (unlike abs), and the square is
    # taken in place: each large temporary costs more than a pass over x on NumPy
    peak = xp.maximum(xp.max(x, axis=axes), -xp.min(x, axis=axes))
    # clipped so that scale and 1/scale are finite (log2 of the largest float rounds up to
    # the exponent limit); a zero model stays 0, an infinite one inf and a NaN NaN
    scale = 2.0 ** xp.floor(xp.log2(xp.clip(peak, finfo.smallest_normal, 0.5 * finfo.max)))
    scaled = x * expand_to(1.0 / scale, x.ndim)
    scaled *= scaled  # in place on NumPy; a new array on immutable backends (jax)
    return scale * xp.sqrt(xp.sum(scaled, axis=axes))


def take_rows(x: Array, index: np.ndarray) -> Array:
    """Rows ``index`` of ``x`` along the client axis (portable gather)."""
    xp = namespace(x)
    return xp.take(x, asarray_like(index, x, dtype=xp.int64), axis=0)


def replace_rows(full: Array, index: np.ndarray, rows: Array) -> Array:
    """Return ``full`` with rows ``index`` replaced by ``rows`` (portable scatter).

    The Array API has no integer-array assignment, so the result is a gather from the
    concatenation ``[full, rows]``: row j comes from ``rows`` if j was updated, else from
    ``full``. One copy of the state per round, the same on every backend.
    """
    xp = namespace(full)
    n = full.shape[0]
    source = np.arange(n)
    source[np.asarray(index)] = n + np.arange(len(index))
    return take_rows(xp.concat([full, rows], axis=0), source)


def bit_width(x: Array) -> int:
    """Bits of one entry of ``x`` as it is stored and sent: 64 for float64, 32 for float32.

    Examples
    --------
    >>> bit_width(np.zeros(3)), bit_width(np.zeros(3, dtype=np.float32))
    (64, 32)
    """
    itemsize = getattr(x.dtype, "itemsize", None)  # NumPy dtypes; torch dtypes since 2.1
    if itemsize is not None:
        return 8 * int(itemsize)
    xp = namespace(x)  # any Array API namespace (array-api-strict): finfo / iinfo know it
    info = xp.finfo(x.dtype) if xp.isdtype(x.dtype, "real floating") else xp.iinfo(x.dtype)
    return int(info.bits)


def wait_for(like: Array, result: Any = None) -> None:
    """Return once the work queued on ``like``'s device (and producing ``result``) is done.

    A GPU runs what Python queues asynchronously: a clock read right after the call that
    queued it times the queueing, not the work. Every timer reads the clock after this:
    the runtime's ``wall_s`` and the timing experiments. torch tensors on a GPU wait for
    their device (``torch.cuda.synchronize``; ``torch.mps.synchronize`` on Apple's);
    jax arrays for ``result`` (any pytree of them, ``like`` without one:
    ``block_until_ready``); NumPy arrays and tensors on the CPU are computed when the call
    that made them returns, so nothing waits.

    Examples
    --------
    >>> wait_for(np.zeros(3)) is None
    True
    """
    if isinstance(like, np.ndarray):
        return
    # ``like`` is a torch tensor or a jax array: its library is imported already
    if array_api_compat.is_torch_array(like):
        torch = sys.modules["torch"]
        if like.device.type == "cuda":
            torch.cuda.synchronize(like.device)
        elif like.device.type == "mps":
            torch.mps.synchronize()
    elif is_jax(like):
        sys.modules["jax"].block_until_ready(like if result is None else result)


def quiet_overflow(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` without NumPy's own overflow/invalid warnings: a diverging model is the
    runner's to report (``check_divergence`` names the round and what to change), and its
    plot's to draw, not NumPy's raw line. A fresh ``np.errstate`` per call (one instance is
    not re-entrant)."""

    @functools.wraps(function)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(over="ignore", invalid="ignore"):
            return function(*args, **kwargs)

    return quiet
