"""Backends: where the data and the models live, one registry entry each.

A backend names an array library, a floating dtype and a device, and says what follows from
them for the runtime: whether the synchronous rounds compile (the jax engine), how the
simulator cuts a round's participants into blocks (:data:`BlockPolicy`: CPU-cache-sized
blocks, measured or by rule, or one block per round), whether client
states may go to disk and whether a network runs there. A configuration names one
(``backend = "cuda"``), :func:`resolve_backend` resolves it, :meth:`fedcomp.ClientData.to`
moves data there and records the entry, and code reads the entry's fields, never array
types or library names. Adding a backend is one ``BACKENDS.register(BackendEntry(...))``.

``cuda`` and ``cuda-float64`` take a device index (``"cuda:1"``); ``auto`` chooses torch on
a visible GPU for networks (torch on the CPU without one) and NumPy for linear models, and
:func:`resolve_backend` says what it chose and why (``config.json`` and the run's first log
line repeat it). :func:`backend_for` finds the entry of a device and dtype (the timing
experiments' ``device = "cuda:1"``), and :func:`backend_of_data` that of arrays a user
moved by hand; a device no entry names is an error naming it, never another device's label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._registry import Entry, Registry

#: How the simulator cuts a round into blocks of clients: ``"measured"``, CPU-cache-sized
#: blocks measured once per machine and shape; ``"rule"``, sized by the cache rule (an
#: engine whose per-block dispatch cost the measured gradient does not see: torch on a
#: CPU); ``"all"``, one block per round (a GPU, or a compiled call that cuts its own).
BlockPolicy = Literal["measured", "rule", "all"]

#: An entry's ``device`` that matches every device of its library (jax's own choice).
ANY_DEVICE = "default"


@dataclass(frozen=True)
class BackendEntry(Entry):
    """One backend: an array library, a dtype and a device, and what the runtime does there.

    Parameters
    ----------
    factory : callable
        ``factory(dtype, device)``: an empty array of the backend's library, ``dtype`` and
        ``device`` (what :meth:`fedcomp.ClientData.to` moves data like).
    library : str
        The array library holding the data and every model and state (``"numpy"``,
        ``"torch"``, ``"jax"``): the module its arrays come from.
    dtype : {"float64", "float32"}
        The floating dtype of features, models and states.
    device : str
        The kind of device the arrays live on: ``"cpu"``, ``"cuda"``, ``"mps"``, torch's
        ``device.type`` of a device of its own, or ``"default"`` (the device jax chooses,
        its GPU when present; it matches arrays on any device of the library).
    compiles : bool
        Synchronous rounds run under ``jax.jit`` (:mod:`fedcomp.runtime._compiled`).
    block_policy : {"measured", "rule", "all"}
        How a round is cut into blocks of clients (:data:`BlockPolicy`).
    indexed : bool
        The name takes a device index, ``NAME:N`` (``cuda:1``).
    disk_states : bool
        Client states may live in memory-mapped ``.npy`` files (``client_state = "disk"``):
        the states are NumPy arrays.
    networks : bool
        A network (``problem.loss = "torch_model"``) runs on it: torch computes it on
        torch and NumPy arrays; jax computes it on jax arrays, for the networks its
        forward covers (fedcomp's mlp and cnn: :mod:`fedcomp.losses._jax_forward`).
    """

    library: str = "numpy"
    dtype: str = "float64"
    device: str = "cpu"
    compiles: bool = False
    block_policy: BlockPolicy = "measured"
    indexed: bool = False
    disk_states: bool = False
    networks: bool = True

    def like(self, device: str | None = None) -> Any:
        """An empty array of this backend, on ``device`` (default: the entry's own)."""
        return self.factory(self.dtype, device or self.device)


def _numpy_like(dtype: str = "float64", device: str = "cpu") -> Any:
    """An empty NumPy array of ``dtype``: data moved to it stay on the host.

    Parameters
    ----------
    dtype : {"float64", "float32"}
    device : {"cpu"}
    """
    return np.zeros(0, dtype=dtype)


def _torch_like(dtype: str = "float32", device: str = "cpu") -> Any:
    """An empty torch tensor of ``dtype`` on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``,
    ``"mps"``).

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
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"backend on 'mps', but torch {torch.__version__} sees no Apple GPU; "
                         "use backend = 'torch' (the CPU)")
    return torch.zeros(0, dtype=getattr(torch, dtype), device=device)


def _jax_like(dtype: str = "float64", device: str = ANY_DEVICE) -> Any:
    """An empty jax array of ``dtype`` on jax's default device (its GPU when present).

    Parameters
    ----------
    dtype : {"float64", "float32"}
    device : {"default"}
    """
    from ._jax import jax_like

    return jax_like(dtype)


def _auto_like(dtype: str = "float64", device: str = "auto") -> Any:
    """``auto`` has no array of its own: :func:`resolve_backend` picks a backend first.

    Parameters
    ----------
    dtype, device : str
        Unused: every backend's factory takes them (:meth:`BackendEntry.like`).
    """
    raise ValueError("backend 'auto' is resolved to a backend first: resolve_backend('auto', "
                     "network=...)")


#: Every backend by name (``fedcomp list backends``).
BACKENDS: Registry[BackendEntry] = Registry("backend", [
    # a choice, not a place (its device names none): resolve_backend decides it first
    BackendEntry("auto", _auto_like,
                 "torch on a visible GPU for networks (else torch on the CPU), NumPy for "
                 "linear models", library="auto", device="auto"),
    BackendEntry("numpy", _numpy_like, "NumPy float64 on the host (linear models' default)",
                 disk_states=True),
    BackendEntry("torch", _torch_like, "PyTorch float32 on the CPU", extra="torch",
                 library="torch", dtype="float32", block_policy="rule"),
    BackendEntry("torch-float64", _torch_like, "PyTorch float64 on the CPU", extra="torch",
                 library="torch", block_policy="rule"),
    BackendEntry("cuda", _torch_like, "PyTorch float32 on a GPU (cuda:N for the N-th)",
                 extra="torch", library="torch", dtype="float32", device="cuda",
                 block_policy="all", indexed=True),
    BackendEntry("cuda-float64", _torch_like, "PyTorch float64 on a GPU (cuda-float64:N)",
                 extra="torch", library="torch", device="cuda", block_policy="all",
                 indexed=True),
    BackendEntry("mps", _torch_like, "PyTorch float32 on Apple's GPU (MPS has no float64)",
                 extra="torch", library="torch", dtype="float32", device="mps",
                 block_policy="all"),
    BackendEntry("jax", _jax_like, "jax float64, compiled rounds, on jax's default device "
                 "(its GPU when present)", extra="jax", library="jax", device=ANY_DEVICE,
                 compiles=True, block_policy="all"),
    BackendEntry("jax-float32", _jax_like, "jax float32, compiled rounds, on jax's default "
                 "device", extra="jax", library="jax", dtype="float32", device=ANY_DEVICE,
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
        ``"cpu"``, ``"cuda:N"``, ``"mps"`` or ``"default"`` (jax's choice).
    reason : str
        One line: what was asked and, for ``auto``, what decided it.
    """

    name: str
    entry: BackendEntry
    device: str
    reason: str

    def like(self) -> Any:
        """An empty array in this backend's namespace, dtype and device."""
        return self.entry.like(self.device)


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


def name_on(entry: BackendEntry, device: str) -> str:
    """The backend's name on ``device``: ``NAME:N`` for an indexed backend on its N-th
    device (``cuda:1``), else the entry's name.

    Examples
    --------
    >>> name_on(BACKENDS.entry("cuda-float64"), "cuda:1"), name_on(BACKENDS.entry("mps"), "mps")
    ('cuda-float64:1', 'mps')
    """
    _, sep, index = str(device).partition(":")
    return f"{entry.name}:{index}" if entry.indexed and sep else entry.name


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
    device = f"{entry.device}:{index or 0}" if entry.indexed else entry.device
    return Chosen(base if index is None else f"{base}:{index}", entry, device, why)


def devices(library: str) -> tuple[str, ...]:
    """The kinds of device the registered backends of ``library`` run on, in registration
    order (what a timing on that library may name).

    Examples
    --------
    >>> devices("torch")
    ('cpu', 'cuda', 'mps')
    """
    return tuple(dict.fromkeys(e.device for e in BACKENDS.entries() if e.library == library))


def _on(kind: str, library: str | None) -> list[BackendEntry]:
    """The entries on devices of ``kind`` (of ``library`` when given; an entry on
    ``"default"`` matches every device of its library, so only when the library is named)."""
    return [e for e in BACKENDS.entries() if (library is None or e.library == library)
            and (e.device == kind or (library is not None and e.device == ANY_DEVICE))]


def backend_for(device: str, dtype: str, library: str | None = None) -> BackendEntry:
    """The registered backend of ``dtype`` arrays on ``device`` (of ``library`` when given):
    the first such entry in registration order.

    Parameters
    ----------
    device : str
        A device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``): its kind (before ``:``)
        is matched against the entries' ``device``.
    dtype : {"float64", "float32"}
    library : str, optional
        The array library (``"torch"``); default any.

    Raises
    ------
    ValueError
        When no entry is registered for that device and dtype, naming what is.

    Examples
    --------
    >>> backend_for("cuda:1", "float32").name, backend_for("cpu", "float64", "torch").name
    ('cuda', 'torch-float64')
    """
    kind = str(device).partition(":")[0]
    on_device = _on(kind, library)
    for entry in on_device:
        if entry.dtype == dtype:
            return entry
    of = "" if library is None else f"{library} "
    registered = sorted({f"{e.device} ({e.dtype})" for e in BACKENDS.entries()
                         if library is None or e.library == library})
    raise ValueError(f"no {of}backend runs {dtype} on device {device!r} (registered: "
                     f"{', '.join(registered)}); register one with BACKENDS.register("
                     f"BackendEntry(name, factory, description, device={kind!r}, "
                     f"dtype={dtype!r}, ...))")


def _place(features: Any) -> tuple[str, str]:
    """``(library, device kind)`` of an array: torch's ``device.type``, ``"cpu"`` for
    NumPy, jax's platform, another library's device as it prints."""
    import array_api_compat

    from .._array import device_of, is_jax

    if isinstance(features, np.ndarray):
        return "numpy", "cpu"
    device = device_of(features)
    if is_jax(features):
        return "jax", str(device.platform)
    if array_api_compat.is_torch_array(features):
        return "torch", str(device.type)
    return type(features).__module__.split(".")[0], str(device)


def backend_of_data(features: Any) -> BackendEntry:
    """The registry entry of arrays a user built (``simulate`` on data moved by hand):
    asked once when a run starts, so the engine and the block policy come from the entry.

    The entry of the arrays' library on their device, of their dtype (float32, else
    float64) when one is registered, else that device's first (NumPy float32 data run as
    ``numpy``): NumPy arrays are ``numpy``; torch tensors ``torch`` / ``torch-float64`` on
    the CPU, ``cuda`` / ``cuda-float64`` on an NVIDIA GPU, ``mps`` on Apple's; jax arrays
    ``jax`` / ``jax-float32``. An array of a library no entry names (array-api-strict) is
    run like NumPy, in cache-sized blocks on its own namespace and device.

    Raises
    ------
    ValueError
        For arrays of a registered library on a device no entry names (a torch tensor on
        ``"xpu"``), naming the device and how to register a backend for it.

    Examples
    --------
    >>> backend_of_data(np.zeros((2, 3, 4))).name
    'numpy'
    """
    library, kind = _place(features)
    dtype = "float32" if "float32" in str(getattr(features, "dtype", "")) else "float64"
    on_device = _on(kind, library)
    if on_device:
        return next((e for e in on_device if e.dtype == dtype), on_device[0])
    if devices(library):
        raise ValueError(f"data on {library} device {kind!r}: no backend is registered for "
                         f"it ({library} runs on {list(devices(library))}); register one "
                         f"with BACKENDS.register(BackendEntry(name, factory, description, "
                         f"library={library!r}, device={kind!r}, dtype={dtype!r}, ...))")
    return BACKENDS.entry("numpy")


def data_backend(data: Any) -> BackendEntry:
    """The backend of a :class:`~fedcomp.ClientData`: the entry it was moved to
    (``data.to(entry)`` records it), else the one its arrays belong to
    (:func:`backend_of_data`, for data moved by hand)."""
    recorded = getattr(data, "backend", None)
    return recorded if recorded is not None else backend_of_data(data.like)
