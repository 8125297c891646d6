"""Where each parameter tensor of a network lives in its flat vector (:class:`ParamLayout`).

A network's model is one vector ``x ∈ R^D``: its parameters flattened in the order of
``module.named_parameters()``. Structured regularizers address layers and neurons through
the layout (kernels only, one layer, one group per neuron or filter), and a Flower node
checks its own module against the strategy's model with :meth:`ParamLayout.difference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any, NamedTuple

import numpy as np


class ParamEntry(NamedTuple):
    """One parameter tensor of a network inside the flat vector.

    ``weight`` says whether the tensor is a weight matrix or kernel; :meth:`TorchModel.layout`
    decides it from the module that owns the tensor (:func:`_is_weight`). Left ``None`` (an
    entry written by hand), it is guessed from the name and shape: a tensor named ``bias``
    is not a weight, another one with ≥ 2 axes is.
    """

    name: str
    shape: tuple[int, ...]
    offset: int
    weight: bool | None = None

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def is_weight(self) -> bool:
        """A kernel or weight matrix, as opposed to a bias or a normalisation's scale/shift."""
        if self.weight is not None:
            return self.weight
        return self.name.rpartition(".")[2] != "bias" and len(self.shape) >= 2


def _norm_types() -> tuple[type, ...]:
    """The normalisation layers of ``torch.nn`` (their affine scale and shift may have any
    number of axes, e.g. LayerNorm over ``(C, H, W)``)."""
    from torch import nn
    from torch.nn.modules.batchnorm import _NormBase  # BatchNorm*d, InstanceNorm*d

    names = ("GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm")  # RMSNorm: torch ≥ 2.4
    return (_NormBase, *(getattr(nn, n) for n in names if hasattr(nn, n)))


def _is_weight(owner: Any, local_name: str, shape: tuple[int, ...]) -> bool:
    """Whether parameter ``local_name`` of module ``owner`` is a weight or kernel: not a
    bias, not a parameter of a normalisation layer, and with ≥ 2 axes (a Linear's matrix, a
    convolution's kernel, an embedding table — not, e.g., a PReLU slope)."""
    if local_name == "bias" or isinstance(owner, _norm_types()):
        return False
    return len(shape) >= 2


@dataclass(frozen=True)
class ParamLayout:
    """Where each parameter tensor of a network lives in its flat vector.

    Structured regularizers address layers and neurons through it: :meth:`weight_mask`
    (kernels only, the convention of the FCO code), :meth:`layer_slice`, and
    :meth:`neuron_groups` (one group per output neuron or filter, for
    :class:`fedcomp.regularizers.GroupLasso`).

    Examples
    --------
    >>> layout = ParamLayout((ParamEntry("0.weight", (3, 2), 0), ParamEntry("0.bias", (3,), 6)))
    >>> layout.size, layout.weight_mask().astype(int).tolist()
    (9, [1, 1, 1, 1, 1, 1, 0, 0, 0])
    >>> layout.neuron_groups()
    (0, 0, 1, 1, 2, 2, -1, -2, -3)
    """

    entries: tuple[ParamEntry, ...]

    @property
    def size(self) -> int:
        last = self.entries[-1]
        return last.offset + last.size

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    def difference(self, other: ParamLayout) -> str | None:
        """The first way ``other`` lays out its parameters otherwise (a name, a shape, a
        count), in words; ``None`` when the two flat vectors mean the same tensors.

        Examples
        --------
        >>> a = ParamLayout((ParamEntry("0.weight", (3, 2), 0),))
        >>> a.difference(ParamLayout((ParamEntry("0.weight", (2, 3), 0),)))
        "parameter 0 is '0.weight' of shape (3, 2) here and '0.weight' of shape (2, 3) there"
        """
        for k, (mine, theirs) in enumerate(zip(self.entries, other.entries, strict=False)):
            if (mine.name, mine.shape) != (theirs.name, theirs.shape):
                return (f"parameter {k} is {mine.name!r} of shape {mine.shape} here and "
                        f"{theirs.name!r} of shape {theirs.shape} there")
        if len(self.entries) != len(other.entries):
            return (f"{len(self.entries)} parameter tensors here and {len(other.entries)} "
                    "there")
        return None

    def layer_slice(self, name: str) -> slice:
        """The coordinates of parameter ``name`` (e.g. ``"0.weight"``) in the flat vector."""
        for e in self.entries:
            if e.name == name:
                return slice(e.offset, e.offset + e.size)
        raise KeyError(f"no parameter {name!r}; the network has {list(self.names)}")

    def weight_mask(self) -> np.ndarray:
        """``True`` on the coordinates of weights and kernels, ``False`` on biases and norms."""
        mask = np.zeros(self.size, dtype=bool)
        for e in self.entries:
            mask[e.offset: e.offset + e.size] = e.is_weight
        return mask

    def neuron_groups(self) -> tuple[int, ...]:
        """A group label per coordinate: the incoming weights of each output neuron (each row
        of a weight matrix, each convolution filter) form one group; every other coordinate
        (biases, norm scales) is a group of its own with a negative label.

        With :class:`fedcomp.regularizers.GroupLasso` this prunes whole neurons / filters
        (on the singleton groups of biases it acts as the ℓ1 penalty).
        """
        labels = np.empty(self.size, dtype=np.int64)
        next_group, next_single = 0, -1
        for e in self.entries:
            block = labels[e.offset: e.offset + e.size]
            if e.is_weight:
                rows = e.shape[0]
                block[:] = np.repeat(np.arange(next_group, next_group + rows), e.size // rows)
                next_group += rows
            else:
                block[:] = np.arange(next_single, next_single - e.size, -1)
                next_single -= e.size
        return tuple(int(v) for v in labels)


__all__ = ["ParamEntry", "ParamLayout"]
