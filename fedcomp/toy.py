"""A tiny composite problem for examples and doctests.

Three clients hold ten least-squares samples each in four dimensions, drawn around different
true models (heterogeneous data), and share an ℓ1 penalty:

    min over x in R^4 of  Σ_{i=1..3} π_i (1/(2 n_i)) ‖A_i x − b_i‖² + λ‖x‖₁,   λ = 0.05.

It is small enough that a few rounds of any algorithm run in milliseconds, so every
algorithm factory's Example runs on it (:func:`tiny_run`) and shows the objective reached.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data import ClientData
from .losses import LeastSquares
from .metrics import evaluate
from .problem import Problem
from .regularizers import make_regularizer

__all__ = ["tiny_objective", "tiny_problem", "tiny_run"]


def tiny_problem(seed: int = 0, lam: float = 0.05) -> Problem:
    """Three clients, least squares plus ``lam * ||x||_1`` in four dimensions.

    Client ``i`` draws ``A_i`` (10 × 4, standard normal) and ``b_i = A_i w_i + 0.1 ε``
    around its own model ``w_i = (1, -1, 0, 0) + 0.5 u_i`` (``u_i`` standard normal), so the
    clients disagree and local steps drift.

    Parameters
    ----------
    seed : int
        Seed of the data (NumPy ``default_rng``).
    lam : float
        The ℓ1 weight λ.

    Examples
    --------
    >>> problem = tiny_problem()
    >>> problem.n_clients, problem.param_shape
    (3, (4,))
    >>> print(f"{tiny_objective(problem, np.zeros(4)):.3f}")
    0.529
    """
    rng = np.random.default_rng(seed)
    truth = np.array([1.0, -1.0, 0.0, 0.0])
    features, targets = [], []
    for _ in range(3):
        a = rng.normal(size=(10, 4))
        w = truth + 0.5 * rng.normal(size=4)
        features.append(a)
        targets.append(a @ w + 0.1 * rng.normal(size=10))
    return Problem(LeastSquares(), make_regularizer("l1", alpha=lam),
                   ClientData.from_lists(features, targets))


def tiny_objective(problem: Problem, x: Any) -> float:
    """The composite objective ``F(x) = Σ_i π_i f_i(x) + g(x)`` of ``problem`` at ``x``.

    Examples
    --------
    >>> from fedcomp.reference import solve_reference
    >>> problem = tiny_problem()
    >>> x_star = solve_reference(problem).x
    >>> print(f"{tiny_objective(problem, x_star):.3f}")
    0.241
    """
    return float(evaluate(problem, x, ["objective"])["objective"])


def tiny_run(algorithm: Any, rounds: int = 20, seed: int = 0) -> float:
    """Run ``algorithm`` for ``rounds`` rounds on :func:`tiny_problem` and return ``F(x_R)``.

    The runner follows the algorithm: :func:`~fedcomp.runtime.simulate` for a federated
    algorithm, :func:`~fedcomp.runtime.simulate_async` (``rounds`` server steps) for an
    asynchronous one, :func:`~fedcomp.runtime.simulate_decentralized` on a ring of the three
    clients for a decentralized one. Every client takes part in every round, full batches, no
    evaluation until the end, and no progress output.

    Parameters
    ----------
    algorithm : FederatedAlgorithm or DecentralizedAlgorithm
    rounds : int
        Communication rounds (server steps for an asynchronous algorithm).
    seed : int
        Seed of the run (the data stay those of ``tiny_problem(0)``).

    Returns
    -------
    float
        The objective at the final model; the minimum is about 0.241 (:func:`tiny_problem`'s
        Example shows ``F(0)``).

    Examples
    --------
    >>> from fedcomp.algorithms import fedmid
    >>> print(f"{tiny_run(fedmid(client_lr=0.1, local_steps=2)):.3f}")
    0.250
    """
    from .algorithms import DecentralizedAlgorithm
    from .runtime import simulate, simulate_async, simulate_decentralized
    from .runtime._options import split_options
    from .topology import ring

    problem = tiny_problem()
    quiet: dict[str, Any] = dict(seed=seed, progress=False, eval_every=rounds,
                                 metrics=["objective"])
    result: Any  # a RunResult, or an AsyncRunResult: both carry the final model x
    if isinstance(algorithm, DecentralizedAlgorithm):
        result = simulate_decentralized(algorithm, problem, ring(problem.n_clients), rounds,
                                        **quiet)
    elif algorithm.execution == "async":  # its own fact: a wrapped or a user's one too
        result = simulate_async(algorithm, problem, rounds, **quiet)
    else:
        own, options = split_options(quiet)
        result = simulate(algorithm, problem, rounds, options=options, **own)
    return tiny_objective(problem, result.x)
