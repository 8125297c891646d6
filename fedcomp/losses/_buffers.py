"""BatchNorm networks in fedcomp: batch statistics while training, running statistics at export.

A model is its flat parameter vector, and a BatchNorm layer also holds buffers: running means
and variances that a forward pass in training mode updates, which gradients never reach.
With ``TorchModel(buffers="batch_stats")`` fedcomp trains such a network as PyTorch trains
it in training mode: every batch is normalised with its own statistics, one client's batch
at a time (``torch.func.replace_all_batch_norm_modules_`` turns the running statistics off,
so nothing is tracked while fedcomp trains; a padded full batch runs client by client on its
own rows, so padding never enters a client's statistics). Evaluation inside fedcomp
(``predict``, the test metrics) normalises the same way, with the evaluated batch's own
statistics.

Running statistics are made when the model leaves fedcomp
(:meth:`~fedcomp.losses.TorchModel.to_module` with ``data``): each client's data go
through the trained network in training mode in one batch, as PyTorch's BatchNorm
accumulates them with ``momentum=None``, and the module gets either one client's statistics
(``client=i``, kept per client) or their average over the clients (the default): means
averaged with the clients' sample counts, variances pooled from each client's mean and
variance, as FedAvg-style frameworks average BatchNorm buffers.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

#: The option of :class:`~fedcomp.losses.TorchModel` for networks with BatchNorm buffers.
BATCH_STATS = "batch_stats"


def batch_norms(net: Any) -> list[tuple[str, Any]]:
    """The ``(name, module)`` of every BatchNorm layer of ``net``."""
    from torch.nn.modules.batchnorm import _BatchNorm

    return [(name, m) for name, m in net.named_modules() if isinstance(m, _BatchNorm)]


def check_buffers(net: Any, option: str | None) -> None:
    """Refuse buffers fedcomp cannot hold: any without ``buffers="batch_stats"``, and,
    with it, any that is not a BatchNorm layer's."""
    buffers = [name for name, _ in net.named_buffers()]
    if not buffers:
        return
    if option is None:
        raise ValueError(f"TorchModel: the network has buffers {buffers} (e.g. BatchNorm "
                         "statistics); a model must be its parameters alone: use GroupNorm/"
                         f"LayerNorm instead, or buffers={BATCH_STATS!r} for BatchNorm")
    owned = {f"{name}.{local}" if name else local
             for name, module in batch_norms(net) for local, _ in module.named_buffers()}
    foreign = [b for b in buffers if b not in owned]
    if foreign:
        raise ValueError(f"TorchModel: buffers={BATCH_STATS!r} handles BatchNorm layers' "
                         f"statistics only, and the network has the buffers {foreign}; make "
                         "them parameters or constants of its forward")


def client_statistics(module: Any, features: Any) -> dict[str, Any]:
    """The BatchNorm buffers PyTorch accumulates for one batch of ``features`` in training
    mode with ``momentum=None``: that batch's means and (unbiased) variances per layer."""
    import torch

    probe = copy.deepcopy(module)
    for _, norm in batch_norms(probe):
        norm.reset_running_stats()
        norm.momentum = None
    probe.train()
    with torch.no_grad():
        probe(features)
    return {name: buffer.detach().clone() for name, buffer in probe.named_buffers()}


def averaged_statistics(per_client: list[dict[str, Any]], counts: np.ndarray
                        ) -> dict[str, Any]:
    """The clients' statistics averaged with their sample counts ``n_i``: ``μ = Σ w_i μ_i``
    and the pooled variance ``Σ w_i (σ_i² + μ_i²) − μ²`` (biased), stored unbiased as
    BatchNorm stores its own, ``w_i = n_i / N``."""
    total = float(counts.sum())
    weights = [float(n) / total for n in counts]
    out: dict[str, Any] = {}
    for name in per_client[0]:
        if name.endswith("num_batches_tracked"):
            out[name] = sum(stats[name] for stats in per_client)
        elif name.endswith("running_mean"):
            out[name] = sum(w * stats[name] for w, stats in zip(weights, per_client,
                                                                strict=True))
    for name in per_client[0]:
        if name.endswith("running_var"):
            mean = out[name[:-len("running_var")] + "running_mean"]
            second = sum(
                w * (stats[name] * (n - 1) / n + stats[name[:-3] + "mean"] ** 2)
                for w, n, stats in zip(weights, counts, per_client, strict=True))
            out[name] = (second - mean ** 2) * total / max(total - 1.0, 1.0)
    return out


def with_running_statistics(module: Any, data: Any, client: int | None) -> Any:
    """``module`` (trained parameters, BatchNorm layers intact) with the running
    statistics of ``data``'s clients: client ``client``'s, or their average."""
    import torch

    device, dtype = next(module.parameters()).device, next(module.parameters()).dtype
    counts = np.asarray(data.counts)
    if client is not None and not 0 <= int(client) < len(counts):
        raise ValueError(f"to_module: client={client!r}, but the data have clients "
                         f"0..{len(counts) - 1}")
    chosen = range(len(counts)) if client is None else [int(client)]
    per_client = []
    for i in chosen:
        if counts[i] < 2:
            raise ValueError(f"to_module: client {i} has {counts[i]} sample; a variance needs "
                             "two (drop it from data, or choose client=)")
        rows = np.asarray(data.features[i, :counts[i]])
        per_client.append(client_statistics(
            module, torch.as_tensor(rows).to(device=device, dtype=dtype)))
    stats = per_client[0] if client is not None else averaged_statistics(per_client, counts)
    with torch.no_grad():
        for name, buffer in module.named_buffers():
            buffer.copy_(stats[name])
    return module.eval()


__all__ = ["BATCH_STATS", "averaged_statistics", "check_buffers", "client_statistics",
           "with_running_statistics"]
