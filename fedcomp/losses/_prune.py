"""A smaller network from a sparse one: the neurons and filters a group penalty zeroed, removed.

Group lasso over neurons (:meth:`~fedcomp.losses.ParamLayout.neuron_groups` with
:class:`~fedcomp.regularizers.GroupLasso`) drives whole rows of a weight matrix — all the
incoming weights of a neuron, a convolution's whole filter — to exactly zero. Such a unit's
pre-activation is its bias ``b``, a constant, and its output the constant ``c = σ(b)`` (σ the
elementwise activations after it; pooling keeps a constant map constant). The next layer
then receives a constant from it, which it can add to its own bias instead:

* next a ``Linear``: ``b' = b_next + c · Σ (the unit's columns of W_next)`` — one column
  after a ``Linear``, the unit's block of ``height·width`` columns after a ``Conv2d`` and
  ``Flatten`` (channel first);
* next an unpadded ``Conv2d``: ``b' = b_next + c · Σ_{u,v} W_next[:, k, u, v]``. A
  zero-padded convolution sees zeros beyond the border, so the constant's contribution
  differs at the border: such a unit is removed only where ``c = 0`` (a ReLU of a bias
  ≤ 0), else it is kept.

A unit whose outgoing weights are all zero is unused and removed whatever its input. The
network returned computes the same function (in exact arithmetic; the folded sums round
differently, ~1e-15 in float64) with fewer parameters.

Supported: an ``nn.Sequential`` of ``Linear`` and ``Conv2d`` layers joined by elementwise
activations, ``MaxPool2d`` / unpadded ``AvgPool2d`` and ``Flatten`` — fedcomp's ``mlp`` and
``cnn``. Anything else (a residual block, a normalisation, dropout) is one ``ValueError``
naming the layer: :meth:`TorchModel.to_module` still exports such a network unpruned.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

ELEMENTWISE = ("ReLU", "LeakyReLU", "ReLU6", "Tanh", "Sigmoid", "GELU", "ELU", "SiLU",
               "Softplus", "Hardtanh", "Identity")


class PruneSummary(NamedTuple):
    """What :func:`prune_sequential` removed: units per weighted layer before and after."""

    units_before: tuple[int, ...]
    units_after: tuple[int, ...]


def prune_sequential(module: Any) -> tuple[Any, PruneSummary]:
    """``(pruned, summary)``: a new ``nn.Sequential`` without ``module``'s zeroed or unused
    units (see the module docstring), and how many each weighted layer kept.

    ``module`` is not changed. The last weighted layer (the outputs) keeps every unit; every
    other keeps at least one (a layer of no units is not a valid convolution).
    """
    import torch

    layers = _checked_layers(module)
    weighted = [i for i, (_, layer) in enumerate(layers) if _is_weighted(layer)]
    new = [(name, _copy(layer)) for name, layer in layers]
    before, after = [], []
    with torch.no_grad():
        for i, j in zip(weighted, weighted[1:], strict=False):
            glue = [layer for _, layer in layers[i + 1:j]]
            unit, following = new[i][1], new[j][1]
            keep = _kept_units(unit, following, glue)
            before.append(_units(unit))
            after.append(len(keep))
            new[i] = (new[i][0], _rows(unit, keep))
            new[j] = (new[j][0], _columns(following, unit, keep))
    units = tuple(before) + (_units(new[weighted[-1]][1]),)
    return (torch.nn.Sequential(OrderedDict(new)),
            PruneSummary(units, tuple(after) + (units[-1],)))


def _checked_layers(module: Any) -> list[tuple[str, Any]]:
    from torch import nn

    if type(module) is not nn.Sequential:
        raise ValueError(f"pruning takes an nn.Sequential of Linear/Conv2d layers and "
                         f"activations (got {type(module).__name__}); export it unpruned "
                         "with TorchModel.to_module")
    layers = list(module.named_children())
    for name, layer in layers:
        kind = type(layer).__name__
        if not (_is_weighted(layer) or kind in ELEMENTWISE or kind in ("MaxPool2d", "Flatten")
                or (kind == "AvgPool2d" and _no_padding(layer.padding))):
            raise ValueError(f"pruning cannot pass layer {name!r} ({kind}): it supports "
                             f"Linear, Conv2d, MaxPool2d, unpadded AvgPool2d, Flatten and "
                             f"the activations {', '.join(ELEMENTWISE)}; export it unpruned "
                             "with TorchModel.to_module")
        if isinstance(layer, nn.Conv2d) and layer.groups != 1:
            raise ValueError(f"pruning cannot pass layer {name!r}: a grouped convolution "
                             f"(groups={layer.groups})")
    if not any(_is_weighted(layer) for _, layer in layers):
        raise ValueError("pruning: the network has no Linear or Conv2d layer")
    return layers


def _is_weighted(layer: Any) -> bool:
    from torch import nn

    return isinstance(layer, nn.Linear | nn.Conv2d)


def _no_padding(padding: Any) -> bool:
    return padding == 0 or padding == (0, 0) or padding == "valid"


def _units(layer: Any) -> int:
    return int(layer.weight.shape[0])


def _copy(layer: Any) -> Any:
    import copy

    return copy.deepcopy(layer)


def _columns_of(unit: Any, following: Any, k: int) -> Any:
    """The weights of ``following`` that read unit ``k`` of ``unit``, one row per output."""
    from torch import nn

    weight = following.weight
    if isinstance(following, nn.Conv2d):
        if not isinstance(unit, nn.Conv2d):
            raise ValueError("pruning cannot pass a Linear layer followed by a Conv2d (an "
                             "Unflatten between them); export it unpruned")
        return weight[:, k].reshape(weight.shape[0], -1)
    per_unit = weight.shape[1] // _units(unit)  # a Conv2d's channel: height·width columns
    if per_unit * _units(unit) != weight.shape[1]:
        raise ValueError(f"pruning: {weight.shape[1]} inputs of a Linear layer do not split "
                         f"into the {_units(unit)} units before it")
    return weight[:, k * per_unit:(k + 1) * per_unit]


def _constant_output(unit: Any, k: int, glue: list[Any]) -> float:
    """``σ(b_k)``: what unit ``k`` outputs when its incoming weights are zero."""
    import torch

    bias = 0.0 if unit.bias is None else float(unit.bias[k])
    value = torch.tensor([bias], dtype=unit.weight.dtype)
    for layer in glue:
        if type(layer).__name__ in ELEMENTWISE:
            value = layer(value)
    return float(value[0])


def _foldable(following: Any, constant: float) -> bool:
    from torch import nn

    if constant == 0.0:
        return True
    # zero padding adds zeros at the border; reflected, replicated or circular padding of a
    # constant map is the constant
    return (not isinstance(following, nn.Conv2d) or _no_padding(following.padding)
            or following.padding_mode != "zeros")


def _kept_units(unit: Any, following: Any, glue: list[Any]) -> list[int]:
    """The units of ``unit`` to keep; folds the constants of the removed ones into
    ``following``'s bias (in place: ``following`` is the caller's copy)."""
    import torch

    removed = []
    for k in range(_units(unit)):
        outgoing = _columns_of(unit, following, k)
        if not bool(torch.any(outgoing != 0)):
            removed.append(k)  # unused: nothing to fold
            continue
        if bool(torch.any(unit.weight[k] != 0)):
            continue
        constant = _constant_output(unit, k, glue)
        if not _foldable(following, constant):
            continue
        if constant != 0.0:
            if following.bias is None:
                following.bias = torch.nn.Parameter(torch.zeros(
                    _units(following), dtype=following.weight.dtype,
                    device=following.weight.device))
            following.bias += constant * outgoing.sum(dim=1)
        removed.append(k)
    keep = [k for k in range(_units(unit)) if k not in set(removed)]
    if not keep:  # a layer keeps one unit; what it sent is folded already, so it sends 0
        keep = [0]
        _columns_of(unit, following, 0).zero_()
    return keep


def _rows(layer: Any, keep: list[int]) -> Any:
    """``layer`` with only the output units ``keep``."""
    import torch

    index = torch.tensor(keep, dtype=torch.long)
    out = _resized(layer, out_units=len(keep))
    out.weight.copy_(layer.weight[index])
    if layer.bias is not None:
        out.bias.copy_(layer.bias[index])
    return out


def _columns(following: Any, unit: Any, keep: list[int]) -> Any:
    """``following`` reading only the units ``keep`` of ``unit``."""
    import torch
    from torch import nn

    if isinstance(following, nn.Conv2d):
        columns = torch.tensor(keep, dtype=torch.long)
    else:
        per_unit = following.weight.shape[1] // _units(unit)
        columns = torch.cat([torch.arange(k * per_unit, (k + 1) * per_unit) for k in keep])
    out = _resized(following, in_units=len(columns))
    out.weight.copy_(following.weight[:, columns])
    if following.bias is not None:
        out.bias.copy_(following.bias)
    return out


def _resized(layer: Any, out_units: int | None = None, in_units: int | None = None) -> Any:
    """A layer like ``layer`` (kind, options, dtype, device) of another width."""
    from torch import nn

    out_units = _units(layer) if out_units is None else out_units
    options = {"bias": layer.bias is not None, "dtype": layer.weight.dtype,
               "device": layer.weight.device}
    if isinstance(layer, nn.Linear):
        return nn.Linear(layer.in_features if in_units is None else in_units, out_units,
                         **options)
    return nn.Conv2d(layer.in_channels if in_units is None else in_units, out_units,
                     layer.kernel_size, stride=layer.stride, padding=layer.padding,
                     dilation=layer.dilation, padding_mode=layer.padding_mode, **options)


__all__ = ["PruneSummary", "prune_sequential"]
