"""Neural networks of the composite-FL papers, as plain ``torch.nn`` builders.

Each builder takes the input shape of one sample (without the batch axis) and the number of
classes, and returns a freshly initialised ``nn.Module`` (seeded by the caller through
``torch.manual_seed``). :class:`fedcomp.losses.TorchModel` flattens the module's parameters
into one vector per client; the modules here hold no buffers, so a model *is* that vector.

* :func:`mlp` — fully connected with ReLU: FedDR's ``60 × 32 × 10`` (synthetic) and
  ``784 × 128 × 10`` (MNIST) networks (Tran-Dinh et al., NeurIPS 2021, supplement D), and
  the three-layer MLP of FedCanon (Zhou et al., Section VI).
* :func:`cnn` — FedCanon's CNN: two convolutions, each followed by ReLU and a 2×2 max-pool,
  then a linear classifier (Zhou et al., Section VI).
* :func:`resnet18` — ResNet-18, CIFAR variant (3×3 stem, no stem max-pool; He et al., CVPR
  2016), with GroupNorm in place of BatchNorm (see its docstring for why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import torch
from torch import nn


def mlp(input_shape: Sequence[int], n_classes: int, hidden: Sequence[int] = (128,)) -> nn.Module:
    """``Flatten → (Linear → ReLU) × len(hidden) → Linear``.

    Examples
    --------
    >>> net = mlp((60,), 10, hidden=(32,))
    >>> sum(p.numel() for p in net.parameters())       # 60·32 + 32 + 32·10 + 10
    2282
    """
    layers: list[nn.Module] = [nn.Flatten()]
    width = prod(input_shape)
    for h in hidden:
        layers += [nn.Linear(width, int(h)), nn.ReLU()]
        width = int(h)
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def cnn(input_shape: Sequence[int], n_classes: int, channels: Sequence[int] = (32, 64),
        kernel_size: int = 5) -> nn.Module:
    """Two ``Conv → ReLU → MaxPool(2)`` blocks and a linear classifier (FedCanon's CNN).

    Convolutions are padded ("same"), so any input of at least 4×4 pixels works (8×8
    digits, 28×28 MNIST, 32×32 CIFAR-10).

    Examples
    --------
    >>> net = cnn((1, 8, 8), 10, channels=(4, 8), kernel_size=3)
    >>> net(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """
    if len(input_shape) != 3:
        raise ValueError(f"cnn needs image samples (channels, height, width), got input_shape "
                         f"{tuple(input_shape)}; load the data with flatten=False")
    c, h, w = (int(s) for s in input_shape)
    if len(channels) != 2:
        raise ValueError(f"cnn has two convolutions: channels needs two widths (got "
                         f"{tuple(channels)})")
    c1, c2 = (int(v) for v in channels)
    pad = kernel_size // 2
    return nn.Sequential(
        nn.Conv2d(c, c1, kernel_size, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, kernel_size, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * (h // 4) * (w // 4), n_classes))


class _BasicBlock(nn.Module):
    """Two 3×3 convolutions with a residual connection (projection when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.GroupNorm(groups, c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def resnet18(input_shape: Sequence[int], n_classes: int, width: int = 64,
             norm_groups: int = 2) -> nn.Module:
    """ResNet-18, CIFAR variant: 3×3 stem, four stages of two basic blocks, global pooling.

    Parameters
    ----------
    input_shape : (channels, height, width)
    n_classes : int
    width : int, default 64
        Channels of the first stage (doubling per stage: 64-128-256-512 at the default,
        11.2 M parameters for CIFAR-10). Smaller widths make test-sized networks.
    norm_groups : int, default 2
        Groups of each GroupNorm.

    Notes
    -----
    **Deviation from He et al.:** GroupNorm replaces BatchNorm. BatchNorm's running means
    are state that is neither a trainable parameter nor the same on every client, so it
    does not fit "a model is one flat vector" and breaks ``vmap`` over clients; GroupNorm
    normalises each sample on its own and is the usual federated substitute (Hsieh, Phanishayee,
    Mutlu, Gibbons, "The Non-IID Data Quagmire of Decentralized Machine Learning", ICML 2020).
    """
    if len(input_shape) != 3:
        raise ValueError(f"resnet18 needs image samples (channels, height, width), got "
                         f"input_shape {tuple(input_shape)}; load the data with flatten=False")
    widths = [width, 2 * width, 4 * width, 8 * width]
    if any(w % norm_groups for w in widths):
        raise ValueError(f"resnet18: norm_groups={norm_groups} must divide every stage width "
                         f"{widths}")
    layers: list[nn.Module] = [nn.Conv2d(int(input_shape[0]), width, 3, 1, 1, bias=False),
                               nn.GroupNorm(norm_groups, width), nn.ReLU()]
    c_in = width
    for stage, c_out in enumerate(widths):
        stride = 1 if stage == 0 else 2
        layers += [_BasicBlock(c_in, c_out, stride, norm_groups),
                   _BasicBlock(c_out, c_out, 1, norm_groups)]
        c_in = c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, n_classes)]
    return nn.Sequential(*layers)


#: Network builders by configuration name: ``NETWORKS[name](input_shape, n_classes, **params)``.
NETWORKS: dict[str, Callable[..., Any]] = {"mlp": mlp, "cnn": cnn, "resnet18": resnet18}
