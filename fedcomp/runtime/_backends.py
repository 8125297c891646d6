"""Backends: where the data and the models live, one registry entry each.

A backend names an array library, a floating dtype and a device, and says what follows from
them for the runtime: whether the synchronous rounds compile (the jax engine), and how the
simulator cuts a round's participants into blocks (``"cache"``: blocks sized to the CPU's
cache; ``"all"``: one block per round, as a GPU or a compiled call wants). A configuration
names one (``backend = "cuda"``), :func:`backend_like` turns the name into an empty array
that :meth:`fedcomp.ClientData.to` moves data to, and nothing downstream inspects array
types to learn what the backend is.

``cuda`` and ``cuda-float64`` take a device index (``"cuda:1"``); ``auto`` chooses torch on
a visible GPU for networks (torch on the CPU without one) and NumPy for linear models, and
:func:`resolve_backend` says what it chose and why (``config.json`` and the run's first log
line repeat it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._registry import Entry, Registry

BlockPolicy = Literal["cache", "all"]


@dataclass(frozen=True)
class BackendEntry(Entry):
    """One backend: an array library, a dtype and a device, and what the runtime does there.

    Parameters
    ----------
    library : {"numpy", "torch", "jax"}
        The array library holding the data and every model and state.
    dtype : {"float64", "float32"}
        The floating dtype of features, models and states.
    device : {"cpu", "cuda", "default"}
        Where the arrays live (``"default"``: the device jax chooses, its GPU when present).
    compiles : bool
        Synchronous rounds run under ``jax.jit`` (:mod:`fedcomp.runtime._compiled`).
    block_policy : {"cache", "all"}
        ``"cache"``: the simulator cuts a round into CPU-cache-sized blocks of clients;
        ``"all"``: one block per round (a GPU, or a compiled call that cuts its own).
    indexed : bool
        The name takes a device index, ``NAME:N`` (``cuda:1``).
    """

    library: str = "numpy"
    dtype: str = "float64"
    device: str = "cpu"
    compiles: bool = False
    block_policy: BlockPolicy = "cache"
    indexed: bool = False


def _numpy_like(dtype: str = "float64") -> Any:
    """An empty NumPy array of ``dtype``: data moved to it stay on the host.

    Parameters
    ----------
    dtype : {"float64", "float32"}
    """
    return np.zeros(0, dtype=dtype)


def _torch_like(dtype: str = "float32", device: str = "cpu") -> Any:
    """An empty torch tensor of ``dtype`` on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``).

    Parameters
    ----------
    dtype : {"float32", "float64"}
    device : str
    """
    from .._extras import require

    torch = require("torch", f"backend on torch ({device})")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"backend on {device!r}, but torch sees no GPU (torch "
                             f"{torch.__version__}, built for CUDA {torch.version.cuda}); use "
                             "backend = 'torch' (the CPU) or install a CUDA build of torch")
        index = torch.device(device).index or 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"backend on {device!r}, but torch sees "
                             f"{torch.cuda.device_count()} GPU(s): cuda:0 .. "
                             f"cuda:{torch.cuda.device_count() - 1}")
    return torch.zeros(0, dtype=getattr(torch, dtype), device=device)


def _jax_like(dtype: str = "float64") -> Any:
    """An empty jax array of ``dtype`` on jax's default device (its GPU when present).

    Parameters
    ----------
    dtype : {"float64", "float32"}
    """
    from ._compiled import jax_like

    return jax_like(dtype)


def _auto_like() -> Any:
    """``auto`` has no array of its own: :func:`resolve_backend` picks a backend first."""
    raise ValueError("backend 'auto' is resolved to a backend first: resolve_backend('auto', "
                     "network=...)")


#: Every backend by name (``fedcomp list backends``).
BACKENDS: Registry[BackendEntry] = Registry("backend", [
    BackendEntry("auto", _auto_like,
                 "torch on a visible GPU for networks (else torch on the CPU), NumPy for "
                 "linear models", library="auto"),
    BackendEntry("numpy", _numpy_like, "NumPy float64 on the host (linear models' default)"),
    BackendEntry("torch", _torch_like, "PyTorch float32 on the CPU", extra="torch",
                 library="torch", dtype="float32"),
    BackendEntry("torch-float64", _torch_like, "PyTorch float64 on the CPU", extra="torch",
                 library="torch"),
    BackendEntry("cuda", _torch_like, "PyTorch float32 on a GPU (cuda:N for the N-th)",
                 extra="torch", library="torch", dtype="float32", device="cuda",
                 block_policy="all", indexed=True),
    BackendEntry("cuda-float64", _torch_like, "PyTorch float64 on a GPU (cuda-float64:N)",
                 extra="torch", library="torch", device="cuda", block_policy="all",
                 indexed=True),
    BackendEntry("jax", _jax_like, "jax float64, compiled rounds, on jax's default device "
                 "(its GPU when present)", extra="jax", library="jax", device="default",
                 compiles=True, block_policy="all"),
    BackendEntry("jax-float32", _jax_like, "jax float32, compiled rounds, on jax's default "
                 "device", extra="jax", library="jax", dtype="float32", device="default",
                 compiles=True, block_policy="all"),
])


@dataclass(frozen=True)
class Chosen:
    """A backend name resolved: its entry, the device it runs on, and why it was chosen.

    Attributes
    ----------
    name : str
        The concrete backend (``"cuda:1"``, ``"numpy"``; never ``"auto"``).
    entry : BackendEntry
    device : str
        ``"cpu"``, ``"cuda:N"`` or ``"default"`` (jax's choice).
    reason : str
        One line: what was asked and, for ``auto``, what decided it.
    """

    name: str
    entry: BackendEntry
    device: str
    reason: str

    def like(self) -> Any:
        """An empty array in this backend's namespace, dtype and device."""
        if self.entry.library == "torch":
            return _torch_like(self.entry.dtype, self.device)
        return self.entry.factory(self.entry.dtype)


def split_name(name: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"numpy"`` -> ``("numpy", None)``.

    Raises ``ValueError`` for an unknown name, or an index on a backend that takes none,
    naming the valid backends.

    Examples
    --------
    >>> split_name("cuda-float64:2"), split_name("jax")
    (('cuda-float64', 2), ('jax', None))
    """
    if not isinstance(name, str):
        raise ValueError(f"backend must be a string, one of {list(BACKENDS)} (got {name!r})")
    base, sep, index = name.partition(":")
    entry = BACKENDS.entry(base)  # raises UnknownNameError listing the valid names
    if not sep:
        return base, None
    if not entry.indexed or not index.isdigit():
        takes = [n for n in BACKENDS if BACKENDS.entry(n).indexed]
        raise ValueError(f"backend {name!r}: only {takes} take a device index (NAME:N, N >= 0)")
    return base, int(index)


def _gpu_visible() -> bool:
    """A GPU torch can use (False without torch or without a CUDA build)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    from .._extras import require

    return bool(require("torch", "backend = 'auto' for a network").cuda.is_available())


def resolve_backend(name: str, *, network: bool = False,
                    gpu_visible: Callable[[], bool] = _gpu_visible) -> Chosen:
    """The concrete backend a configuration's ``backend`` names, and why.

    Parameters
    ----------
    name : str
        A registered backend, ``NAME:N`` for an indexed one, or ``"auto"``.
    network : bool
        The loss is a network (``torch_model``): ``auto`` then picks torch, on a GPU when
        one is visible.
    gpu_visible : callable
        Whether torch sees a GPU (for ``auto``; a parameter so tests can say either).

    Returns
    -------
    Chosen

    Examples
    --------
    >>> resolve_backend("auto").name
    'numpy'
    >>> resolve_backend("auto", network=True, gpu_visible=lambda: True).name
    'cuda'
    >>> resolve_backend("cuda:1").device
    'cuda:1'
    """
    base, index = split_name(name)
    if base == "auto":
        if not network:
            base, why = "numpy", "auto: a linear model, NumPy on the host"
        elif gpu_visible():
            base, why = "cuda", "auto: a network and a visible GPU, torch on cuda"
        else:
            base, why = "torch", "auto: a network and no visible GPU, torch on the CPU"
    else:
        why = f"backend = {name!r}"
    entry = BACKENDS.entry(base)
    if entry.device == "cuda":
        device = f"cuda:{index or 0}"
        concrete = base if index is None else f"{base}:{index}"
    else:
        device, concrete = entry.device, base
    return Chosen(concrete, entry, device, why)


def backend_of_data(features: Any) -> BackendEntry:
    """The registry entry of arrays a user built (``simulate`` on data moved by hand): asked
    once when a run starts, so the engine and the block policy come from the entry.

    NumPy arrays are ``numpy``; torch tensors ``torch`` / ``torch-float64``, or ``cuda`` /
    ``cuda-float64`` on any non-CPU device (a GPU, Apple's ``mps``); jax arrays ``jax`` /
    ``jax-float32``; any other Array API array (array-api-strict) is run like NumPy, in
    cache-sized blocks on its own namespace and device.

    Examples
    --------
    >>> backend_of_data(np.zeros((2, 3, 4))).name
    'numpy'
    """
    import array_api_compat

    from .._array import device_of, is_jax

    single = getattr(features, "dtype", None) is not None and "float32" in str(features.dtype)
    if is_jax(features):
        return BACKENDS.entry("jax-float32" if single else "jax")
    if array_api_compat.is_torch_array(features):
        on_gpu = str(device_of(features)) != "cpu"
        name = ("cuda" if on_gpu else "torch") if single else (
            "cuda-float64" if on_gpu else "torch-float64")
        return BACKENDS.entry(name)
    return BACKENDS.entry("numpy")
