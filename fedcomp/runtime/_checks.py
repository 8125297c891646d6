"""The argument and divergence checks every runner shares.

:func:`~fedcomp.runtime.simulate`, :func:`~fedcomp.runtime.simulate_async`,
:func:`~fedcomp.runtime.simulate_decentralized` and :class:`fedcomp.flower.Strategy`
check a run's seed, rounds, participation, minibatch size and ``max_norm`` with these
functions, and stop a diverged model with the same :class:`NonFiniteError` message (the
run, the round, the hyperparameters and what to change).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._array import Array, namespace, squared_norm, to_numpy
from ..problem import Problem
from ._stopping import NonFiniteError


def check_divergence(x: Array | None, limit: float, algorithm: Any, tags: dict[str, Any],
                     where: str, what: str = "the model", sum_sq: Any = None,
                     hint: str = "") -> None:
    """Raise :class:`NonFiniteError` when ``x`` diverged, naming the run, ``where`` (e.g.
    "in round 7") and the algorithm's hint for what to change.

    ``sum_sq`` is ``Σ x²`` where the caller has it already (the compiled engine computes
    it inside the round's call): a model whose ``Σ x²`` is finite and within ``limit²``
    is fine without another pass over ``x``; with ``x = None`` (a round of a compiled
    call before its last, whose model is gone) ``sum_sq`` decides alone.
    """
    if sum_sq is None and x is not None:  # one pass over x: the usual, healthy model
        sum_sq = squared_norm(x)
    if sum_sq is not None:
        norm_sq = float(sum_sq)
        # a NaN or inf entry makes Σ x² NaN or inf: a finite one is a finite model
        if math.isfinite(norm_sq) and math.sqrt(norm_sq) <= limit:
            return
    text = _divergence(x, limit) if x is not None else _divergence_of(float(sum_sq), limit)
    if text:
        raise NonFiniteError(
            f"{tags.get('algorithm', algorithm.name)}: {what} {text} {where} "
            f"(hyperparameters {algorithm.hyperparameters}); "
            f"{hint or algorithm.divergence_hint}")


def check_personal_divergence(client_states: Any, limit: float, algorithm: Any,
                              tags: dict[str, Any], where: str) -> None:
    """:func:`check_divergence` for the clients' own models (``algorithm.personal_field``
    of their states, stacked ``(n_clients, ...)``), naming the first client that diverged.

    They never reach the server's model, so its check cannot see them: a Ditto run with
    a personal step far too large wrote personal objectives of 1e250 under "completed".
    """
    if algorithm.personal_field is None or client_states is None:
        return
    personal = getattr(client_states, algorithm.personal_field, None)
    if personal is None:  # states kept out of this process (Ray, disk maps)
        return
    xp = namespace(personal)
    flat = xp.reshape(personal, (personal.shape[0], -1))
    finite = to_numpy(xp.all(xp.isfinite(flat), axis=1))
    norms = to_numpy(xp.sqrt(xp.sum(flat * flat, axis=1)))
    bad = np.flatnonzero(~np.asarray(finite) | (np.asarray(norms) > limit))
    if bad.size:
        i = int(bad[0])
        check_divergence(personal[i, ...], limit, algorithm, tags, where,
                         what=f"client {i}'s personal model ({bad.size} of "
                              f"{personal.shape[0]} clients)",
                         hint="try a smaller personal step (personal_lr; 'auto' is "
                              "1/(max_i L_i + lam))")


def _divergence(x: Array, limit: float) -> str:
    """Why ``x`` counts as diverged ("" when it does not): non-finite, or norm above ``limit``."""
    xp = namespace(x)
    if not bool(xp.all(xp.isfinite(x))):
        return "became non-finite"
    norm = float(xp.sqrt(xp.sum(x * x)))
    if norm > limit:
        return f"diverged (norm {norm:.3g} > max_norm {limit:.3g})"
    return ""


def _divergence_of(norm_sq: float, limit: float) -> str:
    """:func:`_divergence` told by ``Σ x²`` alone (``x`` is gone: a later round's model
    replaced it); an infinite ``Σ x²`` is an infinite norm, whether an entry is infinite
    or the squares overflowed."""
    if math.isnan(norm_sq):
        return "became non-finite"
    norm = math.sqrt(norm_sq)
    return f"diverged (norm {norm:.3g} > max_norm {limit:.3g})" if norm > limit else ""


def norm_limit_of(max_norm: float | None) -> float:
    if max_norm is None:
        return float("inf")
    if isinstance(max_norm, bool) or not isinstance(max_norm, int | float | np.floating):
        # before the comparison: 'x' > 0 would be Python's TypeError, naming nothing
        raise TypeError(f"max_norm must be a positive number or None (got {max_norm!r} of type "
                        f"{type(max_norm).__name__}); the default is 1e12")
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive or None (got {max_norm!r})")
    return float(max_norm)


def is_int(v: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def check_seed(seed: Any) -> None:
    """A run's seed is an integer ``>= 0`` (NumPy's client sampling takes no other)."""
    if not (is_int(seed) and seed >= 0):
        raise ValueError(f"seed must be a nonnegative integer (got seed={seed!r})")


def check_sampling(n_clients: int, clients_per_round: Any, batch_size: Any) -> None:
    """Participants per round and minibatch size of a run on ``n_clients`` clients (also
    the Flower Strategy's, whose server holds no problem)."""
    if clients_per_round is not None and not (is_int(clients_per_round)
                                              and 1 <= clients_per_round <= n_clients):
        raise ValueError(f"clients_per_round must be an integer in 1..{n_clients} or None "
                         f"for all clients (got {clients_per_round!r})")
    if batch_size is not None and not (is_int(batch_size) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive integer or None for full gradients "
                         f"(got {batch_size!r})")


def check_run_args(problem: Problem, rounds: Any, clients_per_round: Any, batch_size: Any,
                    eval_every: Any, seed: Any = 0, rounds_name: str = "rounds") -> None:
    """The checks of the arguments every runner shares (``rounds_name``: what the runner
    calls its rounds, e.g. ``"server_steps"``; ``clients_per_round=None`` where it has none)."""
    check_seed(seed)
    if not (is_int(rounds) and rounds >= 0):
        raise ValueError(f"{rounds_name} must be a nonnegative integer (got {rounds!r})")
    check_sampling(problem.n_clients, clients_per_round, batch_size)
    if not (is_int(eval_every) and eval_every >= 1):
        raise ValueError(f"eval_every must be a positive integer (got {eval_every!r})")
