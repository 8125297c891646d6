"""FedAvg (local SGD) with an optional server prox: the plain baseline.

References
----------
McMahan, B., Moore, E., Ramage, D., Hampson, S., Agüera y Arcas, B. "Communication-Efficient
Learning of Deep Networks from Decentralized Data." AISTATS 2017.
"""

from __future__ import annotations

from ._base import FederatedAlgorithm, check_local_steps, check_positive
from ._server_prox import resolve_server_prox
from .fedmid import primal_averaging


def fedavg(client_lr: float = 0.1, local_steps: int = 5, server_lr: float = 1.0,
           server_prox: bool = False) -> FederatedAlgorithm:
    """FedAvg: ``local_steps`` of (minibatch) gradient descent, server averages the updates.

    Parameters
    ----------
    client_lr : float, default 0.1
        Client step ``η_c``.
    local_steps : int, default 5
        Local steps ``K`` per round.
    server_lr : float, default 1.0
        Server step ``η_s``.
    server_prox : bool, default False
        Apply ``prox_{η_s K η_c g}`` after averaging ("FedAvg + prox"); without it the
        regularizer is ignored by the updates (only evaluated).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Client i: ``y ← x̄``; ``K`` times ``y ← y − η_c ∇f_i(y; B)``; upload ``Δ_i = y − x̄``.
    Server: ``x̄ ← x̄ + η_s Σ_{i∈S} π̃_i Δ_i`` then, with ``server_prox``,
    ``x̄ ← prox_{η_s K η_c g}(x̄)``. Communication: d floats down and d up per client.
    FedAvg (+ prox) is FedMiD without the client prox: both are built by
    :func:`fedcomp.algorithms.fedmid.primal_averaging`.

    Examples
    --------
    >>> alg = fedavg(client_lr=0.5, local_steps=2)
    >>> alg.name, alg.hyperparameters["local_steps"]
    ('fedavg', 2)
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedavg(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.245
    """
    check_positive("fedavg", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("fedavg", local_steps)
    server_step = resolve_server_prox("fedavg", server_prox,
                                      server_lr * local_steps * client_lr)
    return primal_averaging(
        "fedavg", client_lr, local_steps, server_lr, client_prox=False,
        server_step=server_step,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps, server_lr=server_lr,
                             server_prox=server_prox))
