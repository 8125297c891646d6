"""Mixed-precision compute for :class:`~fedcomp.losses.TorchModel`: ``autocast = "bf16"``.

The model ``x`` (the *master weights*) stays in the problem's dtype (float32 or float64):
the algorithm's state, the prox of the regularizer and the server step never see a low
precision, since they run outside the loss. Only the network's forward and backward pass
run under ``torch.autocast(device_type, dtype=bfloat16 or float16)``: matmuls and
convolutions compute in 16 bits, the cross-entropy in float32 (autocast's own lists), and
the gradient comes back in ``x``'s dtype (the backward of the cast). Mixed-precision
training as in Micikevicius et al., "Mixed Precision Training", ICLR 2018.

* A float64 model is cast to float32 inside the differentiated graph first: autocast
  leaves float64 tensors alone, so without that cast the option would do nothing.
* ``"fp16"`` (float16: 5 exponent bits) scales the loss before the backward pass, as
  ``torch.amp.GradScaler`` does, so that small activation gradients do not flush to zero;
  the gradient is unscaled in the master dtype. A scale that overflows is lowered and the
  backward pass redone. It is a GPU option: on a CPU it is refused (no fast float16
  kernels there, and bfloat16 has float32's range, so it needs no scaling).
* The jax forward (:mod:`fedcomp.losses._jax_forward`) takes the option too: parameters
  and features cast to the 16-bit dtype for the network, logits back to the master dtype
  for the cross-entropy; fp16 there has no loss scaling yet (bf16 needs none).
"""

from __future__ import annotations

import contextlib
from typing import Any

#: The ``autocast`` values and the dtype each computes in (torch's and jax's name).
AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}

#: fp16's first loss scale (``torch.amp.GradScaler``'s default), the factor a scale that
#: overflows is lowered by, and the tries before the unscaled gradient is returned as it is.
FP16_SCALE, FP16_BACKOFF, FP16_TRIES = 2.0**16, 2.0**-4, 6


def check_autocast(value: Any) -> None:
    """One ``ValueError`` naming ``value`` unless it is ``None``, ``"bf16"`` or ``"fp16"``."""
    if value is not None and value not in AUTOCAST_DTYPES:
        raise ValueError(f"TorchModel: autocast must be None (compute in the model's dtype), "
                         f"'bf16' or 'fp16' (got {value!r})")


def check_device(autocast: str | None, platform: str) -> None:
    """Refuse ``"fp16"`` on a CPU (``platform``: ``"cpu"``, ``"cuda"``, ...)."""
    if autocast == "fp16" and platform == "cpu":
        raise ValueError("TorchModel: autocast='fp16' is a GPU option (float16 has no fast "
                         "CPU kernels and needs loss scaling); the model is on the CPU: use "
                         "autocast='bf16' there")


def compute_context(autocast: str | None, device: Any) -> Any:
    """``torch.autocast`` on ``device``'s type in the option's dtype; a null context for
    ``None``."""
    if autocast is None:
        return contextlib.nullcontext()
    import torch

    check_device(autocast, device.type)
    return torch.autocast(device_type=device.type, dtype=getattr(torch,
                                                                 AUTOCAST_DTYPES[autocast]))


def autocastable(t: Any, autocast: str | None) -> Any:
    """``t`` as autocast casts it: a float64 tensor as float32 (differentiable), since
    autocast leaves float64 alone; anything else (or ``autocast=None``) unchanged."""
    import torch

    return t.to(torch.float32) if autocast is not None and t.dtype == torch.float64 else t


def block_gradient(values: Any, x: Any, autocast: str | None) -> Any:
    """``∇_x Σ_b values_b`` in ``x``'s dtype; for ``"fp16"`` through a scaled loss, the
    scale lowered while the gradient overflows (``torch.amp.GradScaler``'s rule)."""
    import torch

    total = torch.sum(values)
    if autocast != "fp16":
        return torch.autograd.grad(total, x)[0]
    scale = FP16_SCALE
    for _ in range(FP16_TRIES):
        (grad,) = torch.autograd.grad(total * scale, x, retain_graph=True)
        if bool(torch.all(torch.isfinite(grad))):
            return grad / scale
        scale *= FP16_BACKOFF
    # still not finite at the smallest scale: the loss itself is (a diverged run), and the
    # unscaled gradient says so as float32's would
    return torch.autograd.grad(total, x)[0]


__all__ = ["AUTOCAST_DTYPES", "autocastable", "block_gradient",
           "check_autocast", "check_device", "compute_context"]
