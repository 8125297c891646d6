"""A network of :class:`~fedcomp.losses.TorchModel` computed by jax, for the compiled engine.

``TorchModel`` computes with torch. On jax arrays (``backend = "jax"``, or
``problem.data.to(jax_like())``) it computes here instead: the same network, forward
written on jax's namespace, gradient by ``jax.grad``, so a block's local steps for all its
clients trace into one XLA computation like a linear loss's (:mod:`fedcomp.runtime._compiled`):
a round is a few device launches, not one per layer per local step.

The networks are those of the hand-batched torch forward
(:func:`~fedcomp.losses._block_forward.block_plan`): a plain ``nn.Sequential`` of
``Conv2d`` / ``ReLU`` / ``MaxPool2d`` / ``Flatten`` / ``Linear`` (fedcomp's ``mlp`` and
``cnn``). The flat parameter vector is the same (the layout of :meth:`TorchModel.layout`),
so a model means the same network in both frameworks, and the arithmetic is torch's, layer
for layer:

* ``Conv2d``: ``lax.conv_general_dilated`` in NCHW / OIHW (cross-correlation, as torch),
  with torch's stride, zero padding and dilation;
* ``MaxPool2d``: ``lax.reduce_window`` of ``max`` padded with −∞ (torch's implicit
  padding), ``ceil_mode`` as extra right padding; NaN propagates, and the gradient goes to
  one maximum of each window (the first, row-major, on the CPU: tested against torch);
  without dilation (jax has no gradient of a dilated max-pooling);
* ``ReLU``: ``jax.nn.relu`` (gradient 0 at 0, as torch's);
* ``Linear``: ``h @ W.T + b``; matmuls and convolutions at ``Precision.HIGHEST`` (no TF32
  on a GPU).

A client's loss is torch's :meth:`TorchModel._loss_of_logits`: ``Σ_j w_j CE(φ(x; a_j), y_j)
+ (l2/2)‖x‖²``; a block's gradients are ``jax.grad`` of the sum of its clients' losses
(client b's loss depends on row b only). Any other network on jax arrays is one
``ValueError`` naming it and the fix (the torch backend). With ``autocast`` the network
computes in bfloat16 / float16 (parameters and features cast, logits cast back to the
model's dtype for the cross-entropy; :mod:`fedcomp.losses._autocast`).
"""

from __future__ import annotations

import functools
from typing import Any

#: Descriptor of one layer: ``("conv", name, stride, padding, dilation, bias)``,
#: ``("pool", kernel, stride, padding, dilation, ceil_mode)``, ``("relu",)``,
#: ``("flatten",)``, ``("linear", name, bias)``: static (hashable) values only.
Layer = tuple[Any, ...]


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def jax_layers(loss: Any) -> tuple[Layer, ...]:
    """The static layer descriptors of ``loss``'s network, or one ``ValueError`` naming the
    network and the fix when the jax forward does not cover it."""
    layers = loss._cache.get("jax_layers")
    if layers is not None:
        return layers  # type: ignore[no-any-return]
    from torch import nn

    from ._block_forward import block_plan

    net = loss.network()
    plan = None if loss.batch_norm else block_plan(net, loss.input_shape)
    # jax has no gradient of a dilated max-pooling (select_and_gather's VJP)
    if plan is None or any(isinstance(layer, nn.MaxPool2d) and _pair(layer.dilation) != (1, 1)
                           for _, layer in plan):
        raise ValueError(
            f"TorchModel {loss.model!r}: on jax arrays a network computes with jax, which "
            "covers a plain nn.Sequential of Conv2d / ReLU / MaxPool2d (undilated) / Flatten "
            "/ Linear (fedcomp's mlp and cnn) without buffers; this network is not one: use "
            "backend 'torch' (or 'cuda'), i.e. keep its data on torch tensors or NumPy")
    out: list[Layer] = []
    params = dict(net.named_parameters())
    for name, layer in plan:
        has_bias = f"{name}.bias" in params
        if isinstance(layer, nn.Conv2d):
            out.append(("conv", name, _pair(layer.stride), _pair(layer.padding),
                        _pair(layer.dilation), has_bias))
        elif isinstance(layer, nn.MaxPool2d):
            kernel = _pair(layer.kernel_size)
            stride = kernel if layer.stride is None else _pair(layer.stride)
            out.append(("pool", kernel, stride, _pair(layer.padding), _pair(layer.dilation),
                        bool(layer.ceil_mode)))
        elif isinstance(layer, nn.ReLU):
            out.append(("relu",))
        elif isinstance(layer, nn.Flatten):
            out.append(("flatten",))
        else:
            out.append(("linear", name, has_bias))
    layers = loss._cache["jax_layers"] = tuple(out)
    return layers


def covered(loss: Any) -> bool:
    """Whether the jax forward computes ``loss``'s network (else the torch backend must)."""
    try:
        jax_layers(loss)
    except ValueError:
        return False
    return True


def _pool_padding(size: int, kernel: int, stride: int, pad: int, dilation: int,
                  ceil_mode: bool) -> tuple[int, int]:
    """``(low, high)`` −∞ padding giving torch's ``MaxPool2d`` output length along one axis
    (its ``ceil_mode`` rule: a last window must start inside the input or its left padding)."""
    extent = dilation * (kernel - 1) + 1
    span = size + 2 * pad - extent
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return pad, max(0, (out - 1) * stride + extent - size - pad)


def logits(layers: tuple[Layer, ...], params: dict[str, Any], features: Any) -> Any:
    """Logits ``(N, classes)`` of one network (``params``: the layout's names to arrays) on
    samples ``(N, *input_shape)``, computed by jax."""
    import jax
    from jax import lax

    jnp = jax.numpy
    highest = lax.Precision.HIGHEST
    h = features
    for layer in layers:
        kind = layer[0]
        if kind == "conv":
            _, name, stride, padding, dilation, has_bias = layer
            h = lax.conv_general_dilated(
                h, params[f"{name}.weight"], stride, [(p, p) for p in padding],
                rhs_dilation=dilation, dimension_numbers=("NCHW", "OIHW", "NCHW"),
                precision=highest)
            if has_bias:
                h = h + params[f"{name}.bias"][None, :, None, None]
        elif kind == "pool":
            _, kernel, stride, padding, dilation, ceil_mode = layer
            pads = [_pool_padding(h.shape[2 + a], kernel[a], stride[a], padding[a],
                                  dilation[a], ceil_mode) for a in (0, 1)]
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, *kernel), (1, 1, *stride),
                                  [(0, 0), (0, 0), *pads],
                                  window_dilation=(1, 1, *dilation))
        elif kind == "relu":
            h = jax.nn.relu(h)
        elif kind == "flatten":
            h = h.reshape(h.shape[0], -1)
        else:  # linear
            _, name, has_bias = layer
            h = jnp.matmul(h, params[f"{name}.weight"].T, precision=highest)
            if has_bias:
                h = h + params[f"{name}.bias"]
    return h


def _unflatten(entries: tuple[tuple[str, tuple[int, ...]], ...], flat: Any) -> dict[str, Any]:
    """The flat vector ``(D,)`` as the layout's named tensors (``TorchModel._unflatten``)."""
    out, offset = {}, 0
    for name, shape in entries:
        size = 1
        for s in shape:
            size *= s
        out[name] = flat[offset: offset + size].reshape(shape)
        offset += size
    return out


def _client_loss(layers: tuple[Layer, ...], entries: Any, l2: float, flat: Any,
                 features: Any, targets: Any, weights: Any, compute: str | None = None) -> Any:
    """``Σ_j w_j CE(φ(x; a_j), y_j) + (l2/2)‖x‖²`` of one client, a scalar; the network in
    the dtype ``compute`` (``"bfloat16"``, ``"float16"``) when given."""
    import jax

    jnp = jax.numpy
    if compute is None:
        out = logits(layers, _unflatten(entries, flat), features)
    else:  # autocast: the network in 16 bits, the gradient back in flat's dtype (the cast's)
        out = logits(layers, _unflatten(entries, flat.astype(compute)),
                     features.astype(compute)).astype(flat.dtype)
    log_p = jax.nn.log_softmax(out, axis=-1)
    nll = -jnp.take_along_axis(log_p, targets[:, None], axis=-1)[:, 0]
    loss = jnp.sum(weights * nll)
    return loss + 0.5 * l2 * jnp.sum(flat * flat) if l2 else loss


@functools.cache
def _program(layers: tuple[Layer, ...], entries: Any, l2: float, which: str,
             compute: str | None = None) -> Any:
    """``(x, features, targets, weights) -> values (B,) or gradients (B, D)``, jitted (one
    program per network, l2, kind and compute dtype; inlined when the engine traces it)."""
    import jax

    losses = jax.vmap(functools.partial(_client_loss, layers, entries, l2,
                                        compute=compute))
    if which == "value":
        return jax.jit(losses)
    return jax.jit(jax.grad(lambda x, *rest: losses(x, *rest).sum()))


def _entries(loss: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((e.name, e.shape) for e in loss.layout().entries)


def _class_ids(targets: Any) -> Any:
    import jax

    jnp = jax.numpy
    if jnp.issubdtype(targets.dtype, jnp.floating):
        return jnp.round(targets).astype(jnp.int64)  # class ids stored as floats
    return targets.astype(jnp.int64)


def jax_apply(loss: Any, which: str, x: Any, batch: Any) -> Any:
    """``TorchModel.value`` / ``grad`` of a block ``x`` ``(B, D)`` on jax arrays."""
    layers = jax_layers(loss)
    features = batch.features.astype(x.dtype)
    weights = batch.weights.astype(x.dtype)
    program = _program(layers, _entries(loss), float(loss.l2), which, _compute(loss))
    return program(x, features, _class_ids(batch.targets), weights)


def _compute(loss: Any) -> str | None:
    """The dtype ``loss.autocast`` computes the network in (``None``: the model's); fp16
    refused where jax computes on the CPU."""
    import jax

    from ._autocast import AUTOCAST_DTYPES, check_device

    if loss.autocast is None:
        return None
    check_device(loss.autocast, jax.default_backend())
    return AUTOCAST_DTYPES[loss.autocast]


def jax_predict(loss: Any, x: Any, features: Any) -> Any:
    """``TorchModel.predict`` on jax arrays: logits ``(n, classes)`` of one model ``(D,)``."""
    compute = _compute(loss)
    params = _unflatten(_entries(loss), x if compute is None else x.astype(compute))
    out = logits(jax_layers(loss), params, features.astype(compute or x.dtype))
    return out.astype(x.dtype)


__all__ = ["covered", "jax_apply", "jax_layers", "jax_predict", "logits"]
