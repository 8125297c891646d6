"""Any ``torch.nn.Module`` as a fedcomp loss: one flat parameter vector per client.

:class:`TorchModel` makes a neural network look like every other smooth loss of fedcomp —
a model is a vector ``x ∈ R^D`` (all parameters of the network, flattened in the order of
``module.named_parameters()``), a block of B clients is ``(B, D)``, and ``grad`` returns
each client's gradient of its weighted cross-entropy. So every algorithm that only needs
gradients (FedAvg, FedMiD, FedDA, ZA1, FedCanon, SCAFFOLD, FedDR with its SGD solver, ...)
trains networks unchanged, and every regularizer acts on the flat vector (optionally on the
weights only: :meth:`ParamLayout.weight_mask` with :class:`fedcomp.regularizers.Masked`).

The per-client gradients of a whole block come from one batched forward pass — written
by hand for plain Sequential networks (:mod:`fedcomp.losses._block_forward`), otherwise one
``torch.func.vmap`` of the client's loss evaluated with ``torch.func.functional_call`` on
each client's own parameters — and one backward pass through the sum of the client losses,
with no Python loop over clients.
"""

from __future__ import annotations

import copy
import functools
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .._array import Array, is_jax
from .._extras import require
from ..data._client_data import Batch
from ._autocast import autocastable, block_gradient, check_autocast, compute_context
from ._base import check_class_ids, check_l2
from ._block_forward import block_logits, block_plan
from ._buffers import BATCH_STATS, batch_norms, check_buffers, with_running_statistics
from ._layout import ParamEntry, ParamLayout, _is_weight

#: The metadata of a field shown in :meth:`TorchModel.__repr__` only when it is set.
_WHEN_SET: Mapping[str, bool] = {"repr_when_set": True}


def _is_module(model: Any) -> bool:
    """Whether ``model`` is an ``nn.Module`` instance (not a name or a builder)."""
    import torch

    return isinstance(model, torch.nn.Module)


def _options(options: Any) -> dict[str, Any]:
    """Builder options with TOML lists turned into tuples (so the loss stays hashable)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ValueError(f"TorchModel: options must be a table of the network builder's "
                         f"parameters, e.g. {{hidden = [32]}} (got {options!r})")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}


@dataclass(frozen=True)
class TorchModel:
    r"""Cross-entropy of a PyTorch network on class-id targets, as a batched loss.

    Parameters
    ----------
    model : str, callable or nn.Module
        A name of :data:`fedcomp.losses.NETWORKS` (``"mlp"``, ``"cnn"``, ``"resnet18"``), an
        import path ``"package.module:factory"`` of your own builder, the builder itself (a
        callable ``(input_shape, n_classes, **options) -> nn.Module``), or a module
        instance, whose architecture is used (a copy: the instance is never changed) and
        whose current weights are :meth:`initial_model` (``init_seed`` and ``options`` then
        play no part). The module has parameters and no buffers (a model must be its
        parameter vector; see ``buffers``). An import path is a string, so the loss travels
        where a function or an instance cannot: a configuration file, a Flower node (which
        imports it there). A Flower ClientApp hands its own instance to
        :func:`fedcomp.flower.client_train` (``module=``).
    input_shape : tuple of int
        Shape of one sample, e.g. ``(60,)``, ``(1, 8, 8)``, ``(3, 32, 32)``; must match
        the data's feature shape.
    n_classes : int
        Number of classes (the network's output width).
    options : mapping, optional
        Keyword arguments of the builder: ``hidden=(128,)`` (mlp), ``channels=(32, 64)`` and
        ``kernel_size`` (cnn), ``width`` and ``norm_groups`` (resnet18).
    l2 : float, default 0.0
        Ridge strength inside the smooth part.
    lipschitz : float, default 1.0
        Stand-in Lipschitz constant of the cross-entropy part's gradient: :meth:`smoothness`
        reports ``lipschitz + l2``. A network's gradient has no global Lipschitz
        constant; the methods that read one (Fast-FedDA's ``L``, the default step of the
        ``prox_grad_norm`` metric) use this number, so set it when you use them.
    init_seed : int, default 0
        Seed of the network's initial parameters (:meth:`initial_model`), the torch
        default initialisation under ``torch.manual_seed(init_seed)``.
    buffers : {None, "batch_stats"}, default None
        What to do with a network's buffers. ``None`` refuses them (a model is its
        parameters). ``"batch_stats"`` takes BatchNorm networks: each client's batch is
        normalised with its own statistics while fedcomp trains and evaluates, nothing is
        tracked, and :meth:`to_module` makes the running statistics from data, averaged
        over the clients or one client's (:mod:`fedcomp.losses._buffers`). BatchNorm's
        statistics count every sample of a batch alike, whatever its sample weight.
    autocast : {None, "bf16", "fp16"}, default None
        Mixed precision: the network's forward and backward pass run under
        ``torch.autocast`` in bfloat16 or float16 while the model ``x`` (the master
        weights), its gradient, the prox and the server step stay in the problem's dtype
        (:mod:`fedcomp.losses._autocast`). ``"fp16"`` scales the loss and is a GPU option.
        Accuracy: docs/networks.md.
    client_loop : bool, default False
        How torch computes a block of clients. ``False``: in one batched forward (below),
        where a convolution of B clients' own kernels is one grouped convolution. ``True``:
        client by client, each a plain forward of the network on its own rows, and one
        backward pass through their sum: B times the launches, plain convolutions. The
        same values and gradients (float64: to rounding); which is faster depends on the
        device and the network (docs/BENCHMARKS.md, ResNet-18 against its floor). The jax
        engine's forward ignores it.

    Notes
    -----
    A model is the flat vector ``x ∈ R^D`` of the network's parameters (layout:
    :meth:`layout`); a block of B clients is ``(B, D)``. With sample weights ``w_ij``
    (``1/n_i`` on client i's rows, 0 on padding) and logits ``φ(x; a)``

    .. math::

        f_i(x) = \sum_j w_{ij}\,\mathrm{CE}(\varphi(x; a_{ij}), y_{ij}) + \tfrac{l_2}{2}\|x\|^2 .

    ``grad`` evaluates every client's loss in one batched forward pass and differentiates
    ``Σ_b f_b`` once: since client b's loss depends on row b of the block only, row b of
    that gradient is ``∇f_b(x_b)`` (no loop over clients). The batched forward is written
    by hand for plain ``Sequential`` networks of Conv2d / ReLU / MaxPool2d / Flatten /
    Linear layers (fedcomp's mlp and cnn: :mod:`fedcomp.losses._block_forward`, one
    grouped convolution per layer without moving the client axis between layers), and is
    ``vmap(f_one)`` over the client axis with ``functional_call`` for any other network. It
    runs on torch tensors on any device and keeps their dtype (float32 for networks); NumPy
    inputs are computed in torch on the CPU and returned as NumPy, in their own dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> loss = TorchModel("mlp", input_shape=(3,), n_classes=2, options={"hidden": [4]})
    >>> loss.param_shape((3,), 2)            # 3·4 + 4 + 4·2 + 2
    (26,)
    >>> x = np.stack([loss.initial_model()] * 2)
    >>> batch = Batch(np.ones((2, 5, 3)), np.zeros((2, 5), dtype=np.int64), np.full((2, 5), 0.2))
    >>> loss.grad(x, batch).shape, loss.value(x, batch).shape
    ((2, 26), (2,))
    """

    model: Any = "mlp"
    input_shape: tuple[int, ...] = ()
    n_classes: int = 0
    options: Any = field(default=None, hash=False)
    l2: float = 0.0
    lipschitz: float = 1.0
    init_seed: int = 0
    buffers: str | None = None
    autocast: str | None = field(default=None, repr=False, metadata=_WHEN_SET)
    client_loop: bool = field(default=False, repr=False, metadata=_WHEN_SET)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require("torch", "fedcomp.losses.TorchModel")  # before _networks, which imports torch
        from ._networks import NETWORKS

        check_l2(self.l2, "TorchModel")
        if isinstance(self.model, str) and self.model not in NETWORKS:
            imported_builder(self.model)  # raises what is wrong with the import path
        if not isinstance(self.model, str) and not callable(self.model):
            raise ValueError(f"TorchModel: model must be a network name, an import path, a "
                             f"callable (input_shape, n_classes, **options) -> nn.Module or an "
                             f"nn.Module (got {self.model!r})")
        if self.options and _is_module(self.model):
            raise ValueError(f"TorchModel: options={self.options!r} configure a builder, and "
                             f"model is a module instance, already built; drop options or "
                             "give the builder")
        shape = tuple(int(s) for s in self.input_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"TorchModel: input_shape must be the shape of one sample, e.g. "
                             f"(1, 8, 8) (got {self.input_shape!r})")
        if not (isinstance(self.n_classes, numbers.Integral)
                and not isinstance(self.n_classes, bool) and self.n_classes >= 2):
            raise ValueError(f"TorchModel: n_classes must be an integer >= 2 (got "
                             f"{self.n_classes!r})")
        if not self.lipschitz > 0:
            raise ValueError(f"TorchModel: lipschitz must be > 0 (got {self.lipschitz!r})")
        if self.buffers not in (None, BATCH_STATS):
            raise ValueError(f"TorchModel: buffers must be None or {BATCH_STATS!r} (got "
                             f"{self.buffers!r})")
        check_autocast(self.autocast)
        if not isinstance(self.client_loop, bool):
            raise ValueError(f"TorchModel: client_loop must be True or False (got "
                             f"{self.client_loop!r})")
        object.__setattr__(self, "input_shape", shape)
        object.__setattr__(self, "n_classes", int(self.n_classes))  # np.int64(3) -> 3
        object.__setattr__(self, "options", _options(self.options) or None)

    def __repr__(self) -> str:
        """The dataclass repr, with the options added since (``autocast``,
        ``client_loop``) last and only when set: a model without them keeps its repr, and
        the fingerprint of its checkpoints."""
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr]
        shown += [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                  if f.metadata.get("repr_when_set") and getattr(self, f.name) != f.default]
        return f"{type(self).__qualname__}({', '.join(shown)})"

    # --- the network ----------------------------------------------------------------------
    def network(self) -> Any:
        """The ``nn.Module`` skeleton (built once; its own parameters are never used by
        ``value``/``grad``, which always pass the client's flat vector)."""
        net = self._cache.get("network")
        if net is None:
            from torch.func import replace_all_batch_norm_modules_

            net = self._built()
            check_buffers(net, self.buffers)
            self._cache["batch_norm"] = bool(batch_norms(net))
            replace_all_batch_norm_modules_(net)  # batch statistics only: nothing tracked
            self._cache["network"] = net
        return net

    def _built(self) -> Any:
        """A new network from the builder, seeded (the skeleton's parameters), or a copy of
        the module instance ``model`` holds."""
        import torch

        from ._networks import NETWORKS

        if _is_module(self.model):  # an instance: its architecture, a copy
            return copy.deepcopy(self.model)
        builder: Callable[..., Any] = (
            self.model if not isinstance(self.model, str) else NETWORKS[self.model]
            if self.model in NETWORKS else imported_builder(self.model))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.init_seed)
            return builder(self.input_shape, self.n_classes, **_options(self.options))

    @property
    def batch_norm(self) -> bool:
        """Whether the network normalises with batch statistics (BatchNorm layers)."""
        self.network()
        return bool(self._cache["batch_norm"])

    def layout(self) -> ParamLayout:
        """The :class:`ParamLayout` of the flat parameter vector."""
        layout = self._cache.get("layout")
        if layout is None:
            entries, offset = [], 0
            net = self.network()
            for name, p in net.named_parameters():
                owner_name, _, local_name = name.rpartition(".")
                owner = net.get_submodule(owner_name)  # "" is the network itself
                shape = tuple(p.shape)
                entries.append(ParamEntry(name, shape, offset,
                                          _is_weight(owner, local_name, shape)))
                offset += p.numel()
            layout = self._cache["layout"] = ParamLayout(tuple(entries))
        return layout

    def initial_model(self) -> np.ndarray:
        """The network's seeded initial parameters (a module instance's own weights) as one
        float64 NumPy vector ``(D,)``. A non-finite one is one error naming the parameter:
        a run from it would only report "diverged" and blame the step size."""
        import torch

        for name, p in self.network().named_parameters():
            if not bool(torch.isfinite(p).all()):
                raise ValueError(f"TorchModel: the network's initial parameter {name!r} holds "
                                 "NaN or infinite values; initialise it (a module instance "
                                 "starts from its own weights), or pass x0= to simulate")
        return torch.cat([p.detach().reshape(-1) for p in self.network().parameters()]
                         ).double().cpu().numpy()

    # --- Loss protocol --------------------------------------------------------------------
    @property
    def param_ndim(self) -> int:
        return 1

    def check_targets(self, targets: np.ndarray, n_classes: int | None = None) -> None:
        check_class_ids("TorchModel", targets, self.n_classes)

    def param_shape(self, feature_shape: tuple[int, ...], n_classes: int | None = None
                    ) -> tuple[int, ...]:
        if tuple(feature_shape) != self.input_shape:
            raise ValueError(f"TorchModel was built for samples of shape {self.input_shape} "
                             f"but the data has feature shape {tuple(feature_shape)}; set "
                             f"input_shape={list(feature_shape)} (or load the data with the "
                             "network's shape, e.g. flatten=False for a CNN)")
        if n_classes not in (None, self.n_classes):
            raise ValueError(f"TorchModel has n_classes={self.n_classes} but the problem says "
                             f"{n_classes}; make them equal")
        return (self.layout().size,)

    def value(self, x: Array, batch: Batch) -> Array:
        return self._apply("value", x, batch)

    def grad(self, x: Array, batch: Batch) -> Array:
        return self._apply("grad", x, batch)

    def smoothness(self, batch: Batch) -> Array:
        n = batch.weights.shape[0]
        return np.full(n, self.lipschitz + self.l2)

    def predict(self, x: Array, features: Array) -> Array:
        """Logits ``(n, n_classes)`` of one model ``x`` (shape ``(D,)``) on samples
        ``(n, *input_shape)`` (same namespace as ``x``; NumPy in, NumPy out)."""
        import torch

        if is_jax(x):  # jax arrays: the network computed by jax (the compiled engine's)
            from ._jax_forward import jax_predict

            return jax_predict(self, x, features)
        x_t, numpy_in = _as_torch(x)
        feats, _ = _as_torch(features, dtype=x_t.dtype, device=x_t.device)
        with torch.no_grad(), compute_context(self.autocast, x_t.device):
            out = self._call(self._unflatten(autocastable(x_t, self.autocast)),
                             autocastable(feats, self.autocast))
        out = out.to(x_t.dtype)  # autocast's 16-bit logits in the model's dtype
        return out.numpy() if numpy_in else out

    def to_module(self, x: Array, data: Any = None, client: int | None = None) -> Any:
        """A new ``nn.Module`` holding the model ``x`` (shape ``(D,)``): the network, its
        parameters set from ``x`` in ``x``'s dtype (float64 for a NumPy float64 model),
        on ``x``'s device, its outputs :meth:`predict`'s.

        A BatchNorm network (``buffers="batch_stats"``) needs ``data`` (a
        :class:`~fedcomp.data.ClientData`, such as the problem's): its running statistics
        are the clients' statistics at ``x``, averaged with their sample counts, or
        client ``client``'s own; it comes back in evaluation mode, ready to predict.

        The trained model leaves fedcomp as the user's own network: save it with
        ``torch.save(module.state_dict(), path)``, serve it, fine-tune it. Tied parameters
        stay tied (one tensor, set once).

        Examples
        --------
        >>> import numpy as np
        >>> loss = TorchModel("mlp", input_shape=(3,), n_classes=2, options={"hidden": [4]})
        >>> x = loss.initial_model()
        >>> module = loss.to_module(x)
        >>> features = np.ones((5, 3))
        >>> import torch
        >>> bool(np.array_equal(module(torch.from_numpy(features)).detach().numpy(),
        ...                     loss.predict(x, features)))
        True
        """

        import torch

        x_t, _ = _as_torch(x)
        if tuple(x_t.shape) != (self.layout().size,):
            raise ValueError(f"TorchModel.to_module: x must be one model of shape "
                             f"({self.layout().size},) (got {tuple(x_t.shape)}); pass "
                             "run.x, or one row of a block")
        if not bool(torch.isfinite(x_t).all()):
            raise ValueError("TorchModel.to_module: x holds NaN or infinite values; the run "
                             "diverged (check run.status)")
        if self.batch_norm and data is None:
            raise ValueError("TorchModel.to_module: a BatchNorm network's running statistics "
                             "come from data: pass data= (the problem's ClientData), and "
                             "client=i for one client's own")
        if not self.batch_norm and (data is not None or client is not None):
            raise ValueError("TorchModel.to_module: data= and client= make BatchNorm running "
                             "statistics, and this network has none; call to_module(x)")
        source = self._built() if self.batch_norm else copy.deepcopy(self.network())
        module = source.to(device=x_t.device, dtype=x_t.dtype)
        values = self._unflatten(x_t.detach())
        with torch.no_grad():
            for name, parameter in module.named_parameters():  # each tied tensor once
                parameter.copy_(values[name])
        if self.batch_norm:
            return with_running_statistics(module, data, client)
        return module

    def pruned_module(self, x: Array) -> Any:
        """:meth:`to_module` without the neurons and filters whose incoming weights are all
        zero (group lasso over :meth:`ParamLayout.neuron_groups` makes them) or whose
        outgoing weights are: a smaller network with the same outputs.

        A removed unit's constant output ``σ(bias)`` is added to the next layer's bias
        (:mod:`fedcomp.losses._prune`, where the exceptions are). For an ``nn.Sequential``
        of ``Linear`` / ``Conv2d`` layers, activations, pooling and ``Flatten`` (fedcomp's
        ``mlp`` and ``cnn``); any other network is one ``ValueError`` (export it with
        :meth:`to_module`). Count what is left with ``sum(p.numel() for p in
        module.parameters())``.
        """
        from ._prune import prune_sequential

        return prune_sequential(self.to_module(x))[0]

    # --- computation ----------------------------------------------------------------------
    def _unflatten(self, flat: Any) -> dict[str, Any]:
        """Views of the flat vector ``(D,)`` as the network's named parameter tensors.

        One ``split`` rather than a slice per tensor: the backward of a split is a single
        concatenation, while each slice's backward writes a zero-filled ``(B, D)`` gradient
        and adds it up (measured: 120 ms of a 1.1 s CNN round at 100 clients).
        """
        entries = self.layout().entries
        pieces = flat.split([e.size for e in entries], dim=-1)
        lead = flat.shape[:-1]  # () for one client (under vmap), (B,) for a block
        return {e.name: p.reshape(*lead, *e.shape) for e, p in zip(entries, pieces, strict=True)}

    def _call(self, params: dict[str, Any], features: Any) -> Any:
        """The network on ``features`` with its parameters replaced by ``params`` (keyed by
        the layout's names), through ``torch.func.functional_call``.

        Every attribute slot holding a parameter gets its tensor exactly once, and weight
        tying is left off: ``functional_call(..., tie_weights=True)`` on a module registered
        twice (``nn.Sequential(a, act, a)``) swaps the same slot twice and leaves the call's
        tensors in the network afterwards (pytorch/pytorch#164759), while a slot of its own
        for each tied copy (``b.weight = a.weight``) still sees the shared tensor.
        """
        from torch.func import functional_call

        slots = self._cache.get("slots")
        if slots is None:
            slots = self._cache["slots"] = _parameter_slots(self.network())
        return functional_call(self.network(), {slot: params[name] for slot, name in slots},
                               (features,), tie_weights=False)

    def _one_client(self, flat: Any, features: Any, targets: Any, weights: Any) -> Any:
        """``f_i`` of one client: weighted cross-entropy (+ ridge), a scalar tensor."""
        logits = self._call(self._unflatten(flat), features)
        return self._loss_of_logits(logits, targets, weights, flat)

    def _loss_of_logits(self, logits: Any, targets: Any, weights: Any, flat: Any) -> Any:
        """``Σ_j w_j CE(logits_j, y_j) + (l2/2)‖x‖²`` over the trailing sample axis: a scalar
        for one client (``logits (N, K)``), ``(B,)`` for a block (``(B, N, K)``)."""
        import torch

        per_sample = torch.nn.functional.cross_entropy(
            logits.flatten(0, -2), targets.flatten(), reduction="none").reshape(targets.shape)
        loss = torch.sum(weights * per_sample, dim=-1)
        return loss + 0.5 * self.l2 * torch.sum(flat * flat, dim=-1) if self.l2 else loss

    def _batched(self) -> Any:
        """``vmap`` of :meth:`_one_client` over the client axis (built once)."""
        fn = self._cache.get("batched")
        if fn is None:
            from torch.func import vmap

            fn = self._cache["batched"] = vmap(self._one_client)
        return fn

    def _block_losses(self, flat: Any, features: Any, targets: Any, weights: Any) -> Any:
        """``(f_1, …, f_B)`` of a block: the hand-batched forward of
        :mod:`fedcomp.losses._block_forward` where the network allows it (fedcomp's mlp and
        cnn; faster than ``vmap``, same arithmetic), ``vmap`` of :meth:`_one_client` else."""
        if self.client_loop:
            return self._clients_one_by_one(flat, features, targets, weights)
        if "plan" not in self._cache:
            self._cache["plan"] = block_plan(self.network(), self.input_shape)
        plan = self._cache["plan"]
        if plan is None:
            return self._batched()(flat, features, targets, weights)
        logits = block_logits(plan, self._unflatten(flat), features)
        return self._loss_of_logits(logits, targets, weights, flat)

    def _clients_one_by_one(self, flat: Any, features: Any, targets: Any, weights: Any,
                            positive_rows: bool = False) -> Any:
        """``(f_1, …, f_B)`` client by client, each a plain forward of the network (no
        grouped convolutions): ``client_loop=True``; with ``positive_rows`` each client on
        its rows of positive weight only, for a BatchNorm network's padded full batch (its
        zero rows would enter the statistics)."""
        import torch

        out = []
        for b in range(flat.shape[0]):
            rows = weights[b] > 0 if positive_rows else slice(None)
            out.append(self._one_client(flat[b], features[b][rows], targets[b][rows],
                                        weights[b][rows]))
        return torch.stack(out)

    def _values_in_chunks(self, flat: Any, features: Any, targets: Any, weights: Any) -> Any:
        """``(f_1, …, f_B)`` of a block too large for one forward pass (a metric's full
        batch: ResNet-18 on 10 clients of 5000 CIFAR-10 images asked for 12 GiB at once):
        client by client, :data:`VALUE_SAMPLES` samples at a time, the ridge term once.
        The chunks depend on the client's samples alone, not on the block."""
        import torch

        ridge = 0.5 * self.l2 * torch.sum(flat * flat, dim=-1) if self.l2 else None
        out: list[Any] = []
        for b in range(flat.shape[0]):
            total: Any = 0.0
            for start in range(0, targets.shape[1], VALUE_SAMPLES):
                rows = slice(start, start + VALUE_SAMPLES)
                part = self._block_losses(flat[b:b + 1], features[b:b + 1, rows],
                                          targets[b:b + 1, rows], weights[b:b + 1, rows])
                total = total + (part if ridge is None else part - ridge[b:b + 1])
            out.append(total if ridge is None else total + ridge[b:b + 1])
        return torch.cat(out)

    def _apply(self, which: str, x: Array, batch: Batch) -> Array:
        import torch

        if is_jax(x):  # jax arrays: the network computed by jax, traceable by the engine
            from ._jax_forward import jax_apply

            return jax_apply(self, which, x, batch)
        x_t, numpy_in = _as_torch(x)
        feats, _ = _as_torch(batch.features, dtype=x_t.dtype, device=x_t.device)
        targs, _ = _as_torch(batch.targets, device=x_t.device)
        weights, _ = _as_torch(batch.weights, dtype=x_t.dtype, device=x_t.device)
        if targs.is_floating_point():
            targs = targs.round().to(torch.int64)  # class ids stored as floats
        elif targs.dtype != torch.int64:  # int32 / int16 / uint8 ids: cross_entropy needs int64
            targs = targs.to(torch.int64)
        losses = self._block_losses
        if self.batch_norm and not bool(torch.all(weights > 0)):
            # padding must not enter a batch's statistics
            losses = functools.partial(self._clients_one_by_one, positive_rows=True)
        precision = compute_context(self.autocast, x_t.device)  # null without autocast
        feats = autocastable(feats, self.autocast)
        if which == "value":
            with torch.no_grad(), precision:
                x_c = autocastable(x_t, self.autocast)
                if losses == self._block_losses and targs.numel() > VALUE_SAMPLES:
                    out = self._values_in_chunks(x_c, feats, targs, weights)
                else:
                    out = losses(x_c, feats, targs, weights)
        else:
            # Client losses are independent, so the gradient of their sum with respect to the
            # (B, D) block is every client's own gradient: one batched forward and a single
            # backward pass (measured faster on CPU than vmap(grad(...)), same values).
            with torch.enable_grad():
                x_req = x_t.detach().requires_grad_(True)
                with precision:
                    values = losses(autocastable(x_req, self.autocast), feats, targs, weights)
                out = block_gradient(values, x_req, self.autocast)
        out = out.detach().to(x_t.dtype)
        return out.numpy() if numpy_in else out


#: The most samples (clients × rows) a loss value takes in one forward pass; a larger block
#: is evaluated client by client in chunks of this many rows (the activations of a large
#: network on a whole data set would not fit a GPU's memory).
VALUE_SAMPLES = 4096


def imported_builder(path: str) -> Callable[..., Any]:
    """The network builder an import path ``"package.module:factory"`` names (the factory
    may be dotted: ``"package.module:Zoo.small"``).

    Examples
    --------
    >>> imported_builder("fedcomp.losses._networks:mlp").__name__
    'mlp'
    """
    import importlib

    from ._networks import NETWORKS

    module_name, colon, attribute = path.partition(":")
    if not (colon and module_name and attribute):
        raise ValueError(f"TorchModel: unknown network {path!r}; valid: "
                         f"{', '.join(sorted(NETWORKS))}, an import path "
                         "'package.module:factory' of your builder, or the builder itself")
    try:
        builder: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"TorchModel: model {path!r}: cannot import {module_name!r} ({exc}); "
                         "install the package or put its folder on PYTHONPATH") from exc
    for part in attribute.split("."):
        if not hasattr(builder, part):
            raise ValueError(f"TorchModel: model {path!r}: {module_name!r} has no "
                             f"{attribute!r}")
        builder = getattr(builder, part)
    if not callable(builder):
        raise ValueError(f"TorchModel: model {path!r} is a {type(builder).__name__}, not a "
                         "builder (input_shape, n_classes, **options) -> nn.Module")
    return builder  # type: ignore[no-any-return]


def _parameter_slots(net: Any) -> tuple[tuple[str, str], ...]:
    """``(slot, name)`` for every distinct ``(module, attribute)`` of ``net`` holding a
    parameter: ``slot`` is its first path (``"4.weight"``), ``name`` the parameter's own name
    in ``net.named_parameters()`` (the first path of the tensor, ``"2.weight"`` when tied).
    A module registered under several paths is one slot, listed under its first path."""
    name_of = {id(p): name for name, p in net.named_parameters()}
    seen: set[tuple[int, str]] = set()
    slots = []
    for path, module in net.named_modules(remove_duplicate=False):
        for local, p in module.named_parameters(recurse=False):
            if (id(module), local) not in seen:
                seen.add((id(module), local))
                slots.append((f"{path}.{local}" if path else local, name_of[id(p)]))
    return tuple(slots)


def _as_torch(a: Any, dtype: Any = None, device: Any = None) -> tuple[Any, bool]:
    """``a`` as a torch tensor (NumPy arrays shared, not copied) and whether it was NumPy."""
    import torch

    numpy_in = isinstance(a, np.ndarray)
    if numpy_in:
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # a received model (Flower's records are read-only):
            a = a.copy()  # torch warns on sharing it, though nothing here writes to it
    t = torch.from_numpy(a) if numpy_in else a
    if (dtype is not None and t.dtype != dtype) or (device is not None and t.device != device):
        t = t.to(device=device if device is not None else t.device,
                 dtype=dtype if dtype is not None else t.dtype)
    return t, numpy_in


__all__ = ["TorchModel"]
