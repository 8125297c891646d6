"""The server prox: the option several algorithms share, in one place.

Algorithms that average client updates into a server model may then apply the prox of
``g`` to it (the composite extension of a smooth method, or FedMiD's server step):
``x̄ ← prox_{s g}(x̄)`` with the step ``s`` the algorithm's own update rule fixes —
``η_s K η_c`` for FedAvg, FedMiD and SCAFFOLD, ``γ/p`` for Scaffnew, ``η`` for FedPD (each
docstring states its step). The option is a switch, ``server_prox: bool``: on or off is
all it chooses, and ``true`` / ``false`` is how a TOML config or ``--set`` writes it. A
convention for the step itself is an option of its algorithm (FedMiD's
``server_prox_step="unscaled"``, Bao et al.'s MATLAB), and FedProx, which has no step of
its own to scale, takes the step as a number (``server_step``).

:func:`resolve_server_prox` validates the switch and gives the step (``None`` when off);
:func:`apply_server_prox` applies it in ``server_update`` through the counted
``ctx.prox``; :func:`check_prox_steps` of a ``prepare`` takes ``step or 0.0``.
"""

from __future__ import annotations

from typing import Any

from .._array import Array
from ._base import ServerContext, check_flag


def resolve_server_prox(owner: str, server_prox: Any, step: float) -> float | None:
    """The server prox step ``step`` when ``server_prox`` is on, ``None`` when off.

    Raises a ``ValueError`` naming ``owner`` unless ``server_prox`` is ``True`` or
    ``False`` (a NumPy bool too): the string ``"False"`` (what ``--set server_prox=False``
    gives) is true and would turn the prox on.

    Examples
    --------
    >>> resolve_server_prox("fedavg", True, 0.5), resolve_server_prox("fedavg", False, 0.5)
    (0.5, None)
    """
    check_flag(owner, server_prox=server_prox)
    return step if server_prox else None


def apply_server_prox(x: Array, step: float | None, ctx: ServerContext) -> Array:
    """``prox_{step·g}(x)`` of the server model by the counted ``ctx.prox``; ``x`` when
    ``step`` is ``None`` (the server prox is off)."""
    return x if step is None else ctx.prox(x, step)
