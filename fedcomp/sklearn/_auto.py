"""The estimators' default algorithm (``algorithm="auto"``): Douglas–Rachford splitting with
exact local proxes, its step set by the pooled curvature.

Why not a gradient method. ZA1 with ``client_lr = 1/(τL)`` is one prox-gradient step of
``1/L`` per round, so its rounds grow with the condition number ``κ = L/μ`` of the pooled
loss: standardized diabetes with an intercept has κ ≈ 470, and ZA1 needs 3960 rounds to
``tol = 1e-8``; standardized breast-cancer's ℓ1 logistic fit (κ ≈ 10⁵) is still 2·10⁻³ above
its optimum after 10 000. FedDR (Tran-Dinh et al. 2021) with an exact local prox
``prox_{η f_i}`` is Douglas–Rachford splitting of the consensus problem: each round every
client solves its own regularised problem (a linear solve for least squares, Newton for the
logistic loss), and the rounds grow with ``√κ`` at the step below. Its relaxation
:data:`RELAXATION` (FedDR's α; α = 2 is Peaceman–Rachford, FedSplit) is over-relaxed but
below 2, so the iteration stays averaged and converges for any step on convex losses:
measured over standardized and raw diabetes, breast-cancer and two synthetic sets, α = 1.8
took 1.5–1.8x fewer rounds than α = 1 in every case (standardized diabetes α = 0.1: 170
rounds against 300; breast-cancer's ℓ1 logistic at α = 0.01 and 0.05: 170 and 160), while
α = 2 (FedSplit) oscillated on breast-cancer's logistic fit (no convergence in 3000 rounds
at four of the steps tried).

The step. For ``μ``-strongly convex, ``L``-smooth losses Pathak & Wainwright (2020,
Theorem 1) take ``η = 1/√(μL)``, where the splitting contracts by ``1 − 2/(√κ + 1)`` per
round. ``μ`` and ``L`` are the extreme eigenvalues of the pooled Hessian ``Σ π_i ∇²f_i(0)``
at the zero model, which each client reports in one set-up round (its ``d x d`` Hessian,
summed with the weights ``π_i``; it is not counted in ``n_iter_``). With an ℓ1 penalty only
the curvature on the solution's support matters, and collinear or rank-deficient data have
``μ ≈ 0`` (η → ∞, no progress): ``μ`` is floored at :data:`CONDITION_FLOOR` · ``L``.
The step depends on the data only, not on ``alpha``, so a warm-started path keeps the
algorithm's states from one ``alpha`` to the next.

FedDR samples clients (its randomized block-coordinate form), so ``clients_per_round`` keeps
the splitting. Where it does not apply — minibatches, a loss without a Hessian
or a matrix model, a nonconvex loss or penalty (MCP, SCAD: ``prox_{ηg}`` of a weakly
convex ``g`` needs a step below its concavity, which the curvature step ignores), more than
:data:`MAX_EXACT_FEATURES` features (a Newton step costs ``d³`` per client) — ``"auto"`` is
ZA1 with ``client_lr = 1/(τL)``, the former default.
"""

from __future__ import annotations

import math

import numpy as np

from .._array import to_numpy
from ..algorithms import FederatedAlgorithm, make_algorithm
from ..problem import Problem

#: ``μ`` is at least this fraction of ``L`` in the step ``1/√(μL)`` (see the module
#: docstring): on breast-cancer's logistic fit (μ/L ≈ 10⁻⁵) the floor 10⁻⁴ took 300 and
#: 290 rounds at α = 0.01 and 0.05, against 400 and 910 without it (relaxation 1).
CONDITION_FLOOR = 1e-4

#: FedDR's relaxation α of the Douglas–Rachford step (module docstring): over-relaxed,
#: averaged (α < 2).
RELAXATION = 1.8

#: The most features for which ``"auto"`` solves the local proxes exactly.
MAX_EXACT_FEATURES = 500


def exact_prox_applies(problem: Problem, batch_size: int | None) -> bool:
    """Whether ``"auto"`` runs Douglas–Rachford with exact local proxes on ``problem``."""
    # FedDR samples clients (randomized block-coordinate Douglas–Rachford): any
    # clients_per_round keeps the splitting; ZA1, the fallback, needs every client
    loss = problem.loss
    convex = (bool(getattr(problem.regularizer, "convex", False))
              and float(getattr(loss, "nonconvex", 0.0)) == 0.0)
    return (batch_size is None and convex and loss.param_ndim == 1
            and hasattr(loss, "hessian")
            and int(np.prod(problem.param_shape)) <= MAX_EXACT_FEATURES)


def pooled_curvature(problem: Problem) -> tuple[float, float]:
    """``(μ, L)``: the extreme eigenvalues of ``Σ π_i ∇²f_i(0)``, the pooled Hessian at the
    zero model (each client's Hessian, summed with the problem's weights ``π_i``)."""
    batch = problem.data.full_batch()
    # exact_prox_applies checked that the loss has one
    hessian = problem.loss.hessian  # type: ignore[attr-defined]
    hessians = to_numpy(hessian(problem.zeros(), batch))
    pooled = np.tensordot(np.asarray(problem.weights, dtype=np.float64),
                          hessians.astype(np.float64), axes=1)
    eigenvalues = np.linalg.eigvalsh(0.5 * (pooled + pooled.T))
    return float(eigenvalues[0]), float(eigenvalues[-1])


def curvature_step(mu: float, smoothness: float) -> float:
    """``1/√(μ L)`` with ``μ`` floored at :data:`CONDITION_FLOOR` · ``L`` (1 when L = 0).

    Examples
    --------
    >>> curvature_step(0.01, 4.0)
    5.0
    >>> curvature_step(0.0, 4.0)  # rank-deficient: μ floored at 4e-4
    25.0
    """
    if not smoothness > 0:  # a zero loss: every step is exact
        return 1.0
    return 1.0 / math.sqrt(max(mu, CONDITION_FLOOR * smoothness) * smoothness)


def auto_algorithm(problem: Problem, batch_size: int | None) -> FederatedAlgorithm | None:
    """FedDR (α = :data:`RELAXATION`, exact local prox, ``η = 1/√(μL)``) where it applies,
    else ``None``
    (the caller runs ZA1 with its ``client_lr``)."""
    if not exact_prox_applies(problem, batch_size):
        return None
    mu, smoothness = pooled_curvature(problem)
    # a float the algorithm's repr shows and a refit rebuilds exactly
    eta = float(f"{curvature_step(mu, smoothness):.6g}")
    return make_algorithm("feddr", eta=eta, alpha=RELAXATION, local_solver="exact")
