"""Ditto with a composite personal objective, around any star-topology algorithm.

Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021, Algorithm 1. Every client keeps a personal model ``v_i`` that
solves its own regularised problem, pulled toward the global model ``w``:

    min_v  f_i(v) + g(v) + (λ/2) ‖v − w‖²,

while ``w`` is trained by the wrapped algorithm, unchanged. Here ``g`` stays in the
personal objective, so each client gets a sparse (or low-rank, or constrained) model of
its own: Ditto's personal step on the smooth part ``f_i + (λ/2)‖· − w‖²`` is followed by
the prox of ``g``,

    v_i ← prox_{η g}(v_i − η (∇f_i(v_i) + λ (v_i − w^t))),

``personal_steps`` times per round in which client i takes part (the paper's ``s`` local
iterations; ``w^t`` is the global model the round starts from). That is proximal gradient
on the personal objective: with ``η ≤ 1/(L_i + λ)`` it decreases it every step
(``personal_lr = "auto"`` is ``1/(max_i L_i + λ)``, one step that suits every client).

The limits are exact: ``λ = 0`` makes every personal model local training (proximal
gradient on ``f_i + g`` alone); as ``λ → ∞`` the personal models are the global one
(``‖v_i − w‖ = O(1/λ)``). The personal models are client state, never uploaded:
``result.client_states.personal`` after a run, and
:func:`fedcomp.metrics.personal_metrics` measures them client by client.
"""

from __future__ import annotations

from collections import namedtuple
from functools import lru_cache
from typing import Any

import numpy as np

from .._array import Array, stacked_zeros
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    check_local_steps,
)
from ._personal import check_personal_lr, ready_step, resolve_personal_lr
from ._recipe import transformed
from ._steps import repeat_local_steps

#: The client-state field holding the personal models, and the broadcast field with ``w^t``.
PERSONAL, GLOBAL = "personal", "global_model"


@lru_cache(maxsize=128)
def _tuple_type(name: str, fields: tuple[str, ...]) -> Any:
    # the wrapped algorithm's fields are known only at run time
    return namedtuple(name, fields)  # noqa: PYI024


def ditto(algorithm: FederatedAlgorithm, lam: float, personal_steps: int = 5,
          personal_lr: Any = "auto") -> FederatedAlgorithm:
    """``algorithm`` trains the global model; every client also keeps a Ditto personal model.

    Parameters
    ----------
    algorithm : FederatedAlgorithm
        The global algorithm (synchronous rounds): any registered one, compressed or not.
    lam : float
        ``λ ≥ 0``, the pull toward the global model: 0 is local training, large values
        give the global model.
    personal_steps : int, default 5
        Personal proximal gradient steps per round a client takes part in.
    personal_lr : float or "auto", default "auto"
        The personal step ``η``; ``"auto"`` is ``1/(max_i L_i + λ)`` from the clients'
        smoothness constants (resolved before round 1, recorded in the hyperparameters).

    Returns
    -------
    FederatedAlgorithm
        Named ``ditto_<name>``; its output is the global model.

    Notes
    -----
    Each round a participant runs the wrapped algorithm's client update first (its draws,
    counters and upload are the unwrapped algorithm's, so the global model is exactly the
    unwrapped run's), then its personal steps from its own ``v_i``. The broadcast carries
    ``w^t`` as an extra field (counted as floats down, even where the wrapped message is
    the model already). Deviation from the paper: its personal step has no ``g``; here
    ``g`` is applied by its prox after each step, so the personal models solve the
    composite personal objective.

    The official code (``litian96/ditto``, ``flearn/trainers_MTL/ditto.py``, read for
    this) interleaves the two: each of its ``local_iters`` iterations takes one personal
    step ``v ← v − η(∇f_i(v; B) + λ(v − w^t))`` and then one global step, on the same
    minibatch ``B`` and with the global model's learning rate ``η``. Here the wrapped
    algorithm's whole client update runs first (so the global model is exactly the
    unwrapped one's), the personal steps draw their own minibatches, and they have their
    own count and step (``personal_steps``, ``personal_lr``). With full gradients the
    personal iterates are the code's when ``personal_steps`` equals its ``local_iters``
    and ``personal_lr`` its ``η`` (and ``g = 0``).

    Examples
    --------
    >>> from fedcomp.algorithms import fedmid
    >>> alg = ditto(fedmid(client_lr=0.1, local_steps=2), lam=0.5, personal_steps=3)
    >>> alg.name, alg.hyperparameters["ditto"]
    ('ditto_fedmid', {'lam': 0.5, 'personal_steps': 3, 'personal_lr': 'auto'})
    """
    if not isinstance(algorithm, FederatedAlgorithm) or algorithm.execution != "rounds":
        raise TypeError(f"ditto() wraps a star-topology algorithm run in rounds (got "
                        f"{getattr(algorithm, 'name', type(algorithm).__name__)!r})")
    if not (isinstance(lam, int | float) and not isinstance(lam, bool) and 0 <= lam < np.inf):
        raise ValueError(f"ditto: lam must be a finite number >= 0 (got lam={lam!r}); 0 is "
                         "local training, large values the global model")
    check_local_steps("ditto", personal_steps)
    steps = check_personal_lr("ditto", personal_lr)
    owner = algorithm.name
    inner_types: dict[str, Any] = {}

    def init(x0: Array, n_clients: int) -> tuple[Any, Any]:
        server, clients = algorithm.init(x0, n_clients)
        inner_types["clients"] = type(clients)
        personal = stacked_zeros(x0, n_clients) + x0[None, ...]
        with_personal = _tuple_type(f"{type(clients).__name__}Ditto", (*clients._fields,
                                                                      PERSONAL))
        return server, with_personal(*clients, personal)

    def broadcast(state: Any) -> Any:
        message = algorithm.broadcast(state)
        return _tuple_type(f"{type(message).__name__}Ditto", (*message._fields, GLOBAL))(
            *message, algorithm.output(state))

    def client_update(message: Any, states: Any, ctx: ClientContext) -> tuple[Any, Any]:
        w = getattr(message, GLOBAL)
        inner_message = _tuple_type(type(message).__name__.removesuffix("Ditto"),
                                    message._fields[:-1])(*message[:-1])
        inner_states = inner_types["clients"](*states[:-1])
        upload, inner_states = algorithm.client_update(inner_message, inner_states, ctx)
        v = getattr(states, PERSONAL)
        eta = ready_step("ditto", steps)

        def step(_: int, v: Array) -> Array:
            return ctx.prox(v - eta * (ctx.oracle.grad(v) + lam * (v - w[None, ...])), eta)

        v = repeat_local_steps(ctx, personal_steps, step, v)
        return upload, type(states)(*inner_states, v)

    def server_update(state: Any, uploads: Any, ctx: ServerContext) -> Any:
        return algorithm.server_update(state, uploads, ctx)

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        inner = algorithm.prepare(setup) or algorithm
        resolved = resolve_personal_lr(f"ditto({owner})", steps, lam, setup)
        if inner is algorithm and resolved == steps:
            return None
        return ditto(inner, lam, personal_steps, resolved)

    params = {"lam": lam, "personal_steps": personal_steps, "personal_lr": personal_lr}
    return transformed(
        algorithm, "ditto", params,
        name=ditto_name(owner), init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, prepare=prepare, personal_field=PERSONAL,
        hyperparameters={**algorithm.hyperparameters, "ditto": dict(params)})


def ditto_name(name: str) -> str:
    """The display name of ``name`` personalised by Ditto (``ditto_fedmid``)."""
    return f"ditto_{name}"


__all__ = ["GLOBAL", "PERSONAL", "ditto", "ditto_name"]
