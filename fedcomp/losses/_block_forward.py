"""Forward pass of a whole block of clients through a plain ``nn.Sequential``, written
batched by hand instead of derived by ``vmap``.

``vmap`` of a convolution with per-client kernels moves the client axis into the channels
(one grouped convolution) and back out after every layer, and adds each bias in a separate
pass. For the networks built from ``Conv2d``, ``ReLU``, ``MaxPool2d``, ``Flatten`` and
``Linear`` (fedcomp's ``mlp`` and ``cnn``) the block can instead stay in one layout from
the input to the classifier:

* images as ``(N, B·C, H, W)`` — client b's channels are the b-th group of C, so each
  convolution is one grouped ``conv2d`` with the bias fused in, and ReLU / max-pooling act
  per channel as they are;
* flat features as ``(B, N, F)`` — each ``Linear`` is one ``baddbmm``.

The arithmetic is the per-client network's, operation for operation (gradients agree with
the ``vmap`` path to float32 rounding, tested). Measured on the 16/32-channel CNN of
``configs/fedcanon_nn.toml``, 100 clients × 20 images: one block gradient 40 → 31 ms.

A network with any other layer returns ``None`` from :func:`block_plan`; ``TorchModel``
then uses ``vmap``.
"""

from __future__ import annotations

from typing import Any

#: Layer types the hand-batched forward implements.
SUPPORTED = ("Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear")


def block_plan(net: Any, input_shape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """The layers of ``net`` if :func:`block_logits` reproduces it on samples of
    ``input_shape``, otherwise ``None``.

    That is an ``nn.Sequential`` of exactly the :data:`SUPPORTED` types, convolutions
    ungrouped with numeric zero padding, pooling and convolutions on images ``(C, H, W)``,
    ``Linear`` on vectors (after ``Flatten`` for images).
    """
    from torch import nn

    if type(net) is not nn.Sequential or len(input_shape) not in (1, 3):
        return None
    images = len(input_shape) == 3
    for layer in net:
        if type(layer).__name__ not in SUPPORTED or type(layer).__module__.split(".")[0] != "torch":
            return None
        if isinstance(layer, nn.Conv2d):
            if not images or layer.groups != 1 or layer.padding_mode != "zeros" or isinstance(
                    layer.padding, str):
                return None
        elif isinstance(layer, nn.MaxPool2d):
            if not images:
                return None
        elif isinstance(layer, nn.Flatten):
            if layer.start_dim != 1 or layer.end_dim != -1:
                return None
            images = False
        elif isinstance(layer, nn.Linear) and images:
            return None
    return tuple(net)


def block_logits(plan: tuple[Any, ...], params: dict[str, Any], features: Any) -> Any:
    """Logits ``(B, N, classes)`` of B clients' networks on their own samples.

    ``params`` maps the Sequential's parameter names (``"0.weight"``, …) to per-client
    tensors with a leading client axis; ``features`` is ``(B, N, *sample_shape)``.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    n_clients, n_samples = features.shape[:2]
    if features.ndim > 3:  # images (B, N, C, H, W) -> (N, B·C, H, W)
        h = features.transpose(0, 1).reshape(n_samples, -1, *features.shape[3:])
        images = True
    else:
        h, images = features, False
    for index, layer in enumerate(plan):
        bias = params.get(f"{index}.bias")  # Conv2d / Linear built with bias=False have none
        if isinstance(layer, nn.Conv2d):
            weight = params[f"{index}.weight"]
            h = F.conv2d(h, weight.reshape(-1, *weight.shape[2:]),
                         None if bias is None else bias.reshape(-1), layer.stride,
                         layer.padding, layer.dilation, groups=n_clients)
        elif isinstance(layer, nn.ReLU):
            h = F.relu(h)
        elif isinstance(layer, nn.MaxPool2d):
            h = F.max_pool2d(h, layer.kernel_size, layer.stride, layer.padding, layer.dilation,
                             ceil_mode=layer.ceil_mode)
        elif isinstance(layer, nn.Flatten):
            if images:  # (N, B·C, H, W) -> (B, N, C·H·W), each sample flattened as torch does
                h = h.reshape(n_samples, n_clients, -1).transpose(0, 1)
                images = False
        else:  # Linear: x W^T + b per client
            weight = params[f"{index}.weight"]
            if bias is None:
                h = torch.bmm(h, weight.transpose(1, 2))
            else:
                h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
    return h
