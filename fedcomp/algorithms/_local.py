"""Local solvers for the proximal subproblem of a block of clients.

The primal–dual family (FedDR, FedSplit, FedADMM, FedPD, FedProx) asks each client for

``x_i ≈ prox_{η f_i}(v_i) = argmin_x  f_i(x) + ‖x − v_i‖² / (2η)``

(a linear term ``⟨λ_i, x⟩`` folds into the centre: ``v_i − ηλ_i``). :class:`LocalSolver` holds
how it is solved; :func:`local_prox` solves it for a whole block at once, data only through
the oracle (every gradient, Hessian and loss value is counted):

* ``"sgd"`` — the inexact solver of the papers' code: ``local_steps`` steps, or
  ``local_epochs`` passes (``⌈n_i / b⌉`` minibatch steps per epoch for client i, one full
  gradient step per epoch without a batch size), of (minibatch) gradient descent on the
  subproblem, warm-started from the client's previous local model, step ``client_lr``.
* ``"exact"`` — Newton's method on the (1/η)-strongly convex subproblem: for a quadratic
  loss the closed form ``(H + I/η)⁻¹(v/η − ∇f_i(0))`` (least squares, trace regression),
  whose inverse and ``∇f_i(0)`` a run keeps from round to round (:func:`_quadratic_prox`), else
  damped Newton with Armijo backtracking until the subproblem's gradient norm is at most
  ``tol`` (logistic). Hessians are dense ``(B, D, D)`` and solved as one batched linear system.

Clients of a block that are done (fewer epochs, converged Newton) are frozen with a mask, so a
client's iterates never depend on which other clients share its block.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, namespace, to_numpy
from ._base import ClientContext
from ._steps import repeat_local_steps

SOLVERS = ("sgd", "exact")


class LocalSolver(NamedTuple):
    """How ``prox_{η f_i}`` is evaluated (see the module docstring).

    Attributes
    ----------
    kind : {"sgd", "exact"}
    client_lr : float
        SGD step.
    local_steps : int or None
        SGD steps per call (``None`` when ``local_epochs`` is used).
    local_epochs : int or None
        SGD epochs per call.
    tol : float
        Exact solver: stop when ``‖∇f_i(x) + (x − v)/η‖ ≤ tol`` (raised to ``100·eps`` of
        the data's dtype).
    max_iter : int
        Exact solver: Newton iterations at most.
    """

    kind: str = "sgd"
    client_lr: float = 0.01
    local_steps: int | None = 5
    local_epochs: int | None = None
    tol: float = 1e-10
    max_iter: int = 50

    def describe(self) -> dict[str, Any]:
        """The hyperparameters that matter for this kind (for ``hyperparameters`` dicts)."""
        if self.kind == "exact":
            return {"local_solver": "exact", "tol": self.tol, "max_iter": self.max_iter}
        return {"local_solver": "sgd", "client_lr": self.client_lr,
                "local_steps": self.local_steps, "local_epochs": self.local_epochs}


def make_solver(owner: str, local_solver: str, client_lr: float, local_steps: int | None,
                local_epochs: int | None, tol: float, max_iter: int) -> LocalSolver:
    """Validate the flat hyperparameters of a factory and build its :class:`LocalSolver`."""
    if local_solver not in SOLVERS:
        raise ValueError(f"{owner}: local_solver must be one of {SOLVERS} (got {local_solver!r})")
    if local_solver == "sgd":
        if not (isinstance(client_lr, int | float) and client_lr > 0):
            raise ValueError(f"{owner}: client_lr must be a positive number (got "
                             f"client_lr={client_lr!r})")
        if local_epochs is not None:
            _check_count(owner, "local_epochs", local_epochs)
            local_steps = None  # epochs win: the papers' solver counts passes over the data
        elif local_steps is None:
            raise ValueError(f"{owner}: the sgd local solver needs local_steps or local_epochs "
                             "(both are None)")
        else:
            _check_count(owner, "local_steps", local_steps)
    else:
        if not (isinstance(tol, int | float) and tol > 0):
            raise ValueError(f"{owner}: tol must be a positive number (got tol={tol!r})")
        _check_count(owner, "max_iter", max_iter)
    return LocalSolver(local_solver, float(client_lr), local_steps, local_epochs, float(tol),
                       int(max_iter))


def _check_count(owner: str, name: str, value: Any) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ValueError(f"{owner}: {name} must be an integer >= 1 (got {name}={value!r})")


def local_prox(solver: LocalSolver, ctx: ClientContext, center: Array, step: float,
               start: Array) -> Array:
    """``≈ prox_{step·f_i}(center_i)`` for every client of the block, ``(B, *param_shape)``.

    ``start`` is the warm start of the SGD solver (the previous local model) and the first
    Newton iterate of the exact one.
    """
    if solver.kind == "exact":
        return _newton(solver, ctx, center, step, start)
    return _sgd(solver, ctx, center, step, start)


def sgd_steps(solver: LocalSolver, counts: np.ndarray, batch_size: int | None) -> np.ndarray:
    """Local SGD steps of each client: fixed, or ``epochs · ⌈n_i / b⌉`` (host ints)."""
    if solver.local_epochs is None:
        return np.full(len(counts), int(solver.local_steps or 0))
    per_epoch = np.ones(len(counts), dtype=np.int64) if batch_size is None else \
        -(-np.asarray(counts) // batch_size)
    return solver.local_epochs * per_epoch


def _sgd(solver: LocalSolver, ctx: ClientContext, center: Array, step: float,
         start: Array) -> Array:
    xp = namespace(center)
    steps = sgd_steps(solver, ctx.oracle.counts, ctx.oracle.batch_size)
    most = int(steps.max(initial=0))
    lr, inv = solver.client_lr, 1.0 / step

    def sgd_step(x: Array, active: np.ndarray) -> Array:
        return x - lr * (ctx.oracle.grad(x, active=active) + inv * (x - center))

    everyone = steps == most
    if everyone.all():  # every client steps alike: one loop an engine may roll
        return repeat_local_steps(ctx, most, lambda _, x: sgd_step(x, everyone), start)
    x = start
    for t in range(most):  # the clients done with their epochs are frozen
        active = t < steps
        x_new = sgd_step(x, active)
        x = x_new if active.all() else xp.where(_rows(active, x), x_new, x)
    return x


def _rows(mask: np.ndarray, like: Array) -> Array:
    """A host bool mask ``(B,)`` as an array broadcastable against ``like (B, ...)``."""
    xp = namespace(like)
    m = asarray_like(mask, like, dtype=xp.bool)
    return xp.reshape(m, (m.shape[0],) + (1,) * (like.ndim - 1))


def _flat(x: Array) -> Array:
    return namespace(x).reshape(x, (x.shape[0], -1))


def _quadratic_prox(oracle: Any, center: Array, step: float) -> Array:
    """``prox_{η f_i}(c_i)`` of a quadratic ``f_i`` (``loss.quadratic``) for every client of
    the block: the solution of ``(∇²f_i + I/η) x = c_i/η − ∇f_i(0)``.

    The inverse matrix and ``∇f_i(0)`` depend on the client's data and ``η`` alone, so a run
    keeps them (:meth:`~fedcomp.oracle.Oracle.constant`) and a round is one matrix-vector
    product per client. The Hessian and the gradient are counted at every use, as if
    computed: the counters say what the step uses, the same on every engine (a compiled
    round computes them each time).
    """
    xp = namespace(center)
    inv = 1.0 / step

    def system() -> Array:
        eye = xp.eye(math.prod(center.shape[1:]), dtype=center.dtype, device=_device(center))
        return xp.linalg.inv(oracle.full_hessian(xp.zeros_like(center), None) + inv * eye)

    inverse, kept = oracle.constant("exact-prox system", step, system)
    if kept:
        oracle.count_hessian(None)
    slope, kept = oracle.constant("gradient at zero", None,
                                  lambda: _flat(oracle.full_grad(xp.zeros_like(center), None)))
    if kept:
        oracle.count_grad(True, None)
    rhs = inv * _flat(center) - slope
    return xp.reshape(xp.matmul(inverse, rhs[..., None])[..., 0], center.shape)


def _newton(solver: LocalSolver, ctx: ClientContext, center: Array, step: float,
            start: Array) -> Array:
    oracle = ctx.oracle
    if getattr(oracle.loss, "quadratic", False):
        # one Newton step is the exact minimiser of a quadratic, from anywhere
        return _quadratic_prox(oracle, center, step)
    xp = namespace(center)
    inv = 1.0 / step
    shape = center.shape
    dim = math.prod(shape[1:])
    eye = xp.eye(dim, dtype=center.dtype, device=_device(center))

    def subgrad(x: Array, active: np.ndarray | None) -> Array:
        return _flat(oracle.full_grad(x, active) + inv * (x - center))

    def direction(x: Array, g: Array, active: np.ndarray | None) -> Array:
        hess = oracle.full_hessian(x, active) + inv * eye
        return xp.reshape(xp.linalg.solve(hess, g[..., None])[..., 0], shape)

    x = start
    eps = float(xp.finfo(center.dtype).eps)  # the dtype's, no copy from the device
    tol = max(solver.tol, 100 * eps)
    # the Armijo test's slack for rounding in φ: 1e-15 |φ| in float64; 10 ε |φ| in float32,
    # where 1e-15 is below the rounding of φ and the line search stalls (10-50x slower
    # rounds on breast-cancer's logistic prox, and no float32 convergence)
    slack = 1e-15 if eps < 1e-15 else 10 * eps
    active = np.ones(shape[0], dtype=bool)

    def subvalue(x: Array, active: np.ndarray) -> np.ndarray:
        d = _flat(x - center)
        return to_numpy(oracle.full_value(x, active) + 0.5 * inv * xp.sum(d * d, axis=1))

    for _ in range(solver.max_iter):
        g = subgrad(x, active)
        active &= to_numpy(xp.sqrt(xp.sum(g * g, axis=1))) > tol
        if not active.any():
            break
        d = direction(x, g, active)
        slope = to_numpy(xp.sum(g * _flat(d), axis=1))      # ⟨∇φ, d⟩ > 0: descent along −d
        phi0 = subvalue(x, active)
        t = np.ones(shape[0])
        accepted = ~active
        trial = x
        for _ in range(40):
            trial = x - _rows_scale(t, x) * d
            ok = subvalue(trial, active & ~accepted) <= phi0 - 1e-4 * t * slope + slack * abs(phi0)
            accepted |= ok
            if accepted.all():
                break
            t = np.where(accepted, t, 0.5 * t)
        x = xp.where(_rows(active, x), trial, x)
    return x


def _rows_scale(t: np.ndarray, like: Array) -> Array:
    xp = namespace(like)
    v = asarray_like(t, like)
    return xp.reshape(v, (v.shape[0],) + (1,) * (like.ndim - 1))


def _device(x: Array) -> Any:
    import array_api_compat

    return array_api_compat.device(x)
