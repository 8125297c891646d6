"""Centralized high-accuracy reference solutions ``x*``, cached on disk.

The solver is FISTA with backtracking and gradient-based adaptive restart (convex ``g``) or
monotone proximal gradient with backtracking (weakly convex ``g``, where momentum has no
guarantee), run in float64 NumPy on the pooled objective ``Σ π_i f_i + g`` until the
prox-gradient mapping norm ``‖x − prox_{g/L}(x − ∇f(x)/L)‖·L`` is at most ``tol``
(1e-10 by default). For ``g = λ‖x‖₁`` L-BFGS-B on the split ``x = u − v`` (``u, v ≥ 0``)
runs first, and FISTA continues from its point only if it stops short of ``tol``: on
ill-conditioned softmax regressions it needs hundreds of iterations where FISTA needs tens of
thousands. Results are cached under ``$FEDCOMP_CACHE_DIR`` (default
``~/.cache/fedcomp``) keyed by :meth:`Problem.fingerprint` (and the solver, for ℓ1) and, for
a nonzero start, a digest of ``x0``; a cached ``x`` is checked (shape, and the mapping norm
recomputed at it) before it is returned.

References
----------
Beck, A., Teboulle, M. "A Fast Iterative Shrinkage-Thresholding Algorithm for Linear Inverse
Problems." SIAM J. Imaging Sciences, 2009.
O'Donoghue, B., Candès, E. "Adaptive Restart for Accelerated Gradient Schemes." FoCM, 2015.
Byrd, R. H., Lu, P., Nocedal, J., Zhu, C. "A Limited Memory Algorithm for Bound Constrained
Optimization." SIAM J. Sci. Comput., 1995.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ._array import to_numpy
from .problem import Problem


class Reference(NamedTuple):
    """A centralized solution.

    Attributes
    ----------
    x : numpy array, shape param_shape
    objective : float
        ``F(x)``.
    prox_grad_norm : float
        The prox-gradient mapping norm at ``x`` (the stopping measure).
    iterations : int
    """

    x: np.ndarray
    objective: float
    prox_grad_norm: float
    iterations: int

    def __repr__(self) -> str:
        """One line: the numbers, and the model by its shape and nonzeros (not its entries).

        Examples
        --------
        >>> Reference(np.array([0.0, 1.5, 0.0]), 0.25, 1e-11, 42)
        Reference(objective=0.25, prox_grad_norm=1e-11, iterations=42, x=<3 float64, 1 nonzero>)
        """
        x = np.asarray(self.x)
        shape = "x".join(map(str, x.shape)) or "scalar"
        nonzero = int(np.count_nonzero(x))
        return (f"Reference(objective={self.objective!r}, prox_grad_norm="
                f"{self.prox_grad_norm!r}, iterations={self.iterations!r}, x=<{shape} "
                f"{x.dtype}, {nonzero} nonzero{'' if nonzero == 1 else 's'}>)")


def cache_dir() -> Path:
    """Where reference solutions are cached (``$FEDCOMP_CACHE_DIR`` or ``~/.cache/fedcomp``)."""
    root = os.environ.get("FEDCOMP_CACHE_DIR", Path.home() / ".cache" / "fedcomp")
    return Path(root) / "reference"


def as_float64(problem: Problem) -> Problem:
    """The same problem with NumPy float64 data (the reference is always solved in float64)."""
    data = problem.data.to(np.zeros(0), dtype=np.float64)
    return dataclasses.replace(problem, data=data)


def solve_reference(problem: Problem, tol: float = 1e-10, max_iter: int = 100_000,
                    x0: np.ndarray | None = None, use_cache: bool = True,
                    solver: str = "fedcomp") -> Reference:
    """Solve ``min_x Σ π_i f_i(x) + g(x)`` to a prox-gradient mapping norm ≤ ``tol``.

    Parameters
    ----------
    problem : Problem
    tol : float, default 1e-10
    max_iter : int, default 100000
    x0 : array, optional
        Starting point (zeros by default).
    use_cache : bool, default True
        Read/write the on-disk cache keyed by the problem fingerprint (and ``x0`` when it is
        nonzero). A cached entry is used only if its ``x`` has the model's shape and the
        prox-gradient norm recomputed at it is ≤ ``tol``; an unreadable or stale entry is
        re-solved and overwritten with a ``RuntimeWarning`` naming the file.
    solver : {"fedcomp", "skglm"}, default "fedcomp"
        ``"skglm"`` starts from skglm's coordinate descent with Anderson acceleration and
        working sets (:func:`skglm_start`; ``pip install skglm``) and finishes with this
        module's monotone method to ``tol``, so its objective is at most skglm's. For a
        least squares or logistic loss with ℓ1, MCP or SCAD on every coefficient and equal
        sample weights; on a weakly convex ``g`` it may reach another (often lower)
        stationary point than ``"fedcomp"``'s proximal gradient from zero.

    Returns
    -------
    Reference

    Raises
    ------
    ValueError
        For a regularizer that is neither convex nor weakly convex (``l0``, ``l0_ball``):
        the solver would return a local minimiser (see :func:`_check_solvable`).
    RuntimeError
        If ``tol`` is not reached within ``max_iter`` iterations (the message gives the
        norm reached).

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import ClientData
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> data = ClientData.from_lists([np.eye(2)], [np.array([1.0, 0.05])])
    >>> ref = solve_reference(Problem(LeastSquares(), L1(0.1), data), use_cache=False)
    >>> np.round(ref.x, 6)  # soft-thresholding of (1, 0.05) at 0.1/2 ... times 2
    array([0.8, 0. ])
    """
    _check_solvable(problem)
    if solver not in ("fedcomp", "skglm"):
        raise ValueError(f"solver must be 'fedcomp' or 'skglm' (got {solver!r})")
    p64 = as_float64(problem)
    start = np.zeros(p64.param_shape) if x0 is None else np.asarray(x0, dtype=np.float64)
    if solver == "skglm":
        start = skglm_start(p64, start)
    path = cache_path(problem, start)
    if use_cache:
        cached, defect = _read_cache(path, p64, tol)
        if cached is not None:
            return cached
        if defect:
            warnings.warn(f"reference cache entry {path} is unusable ({defect}); solving again "
                          "and overwriting it", RuntimeWarning, stacklevel=2)
    # momentum needs a convex objective: a weakly convex g (MCP, SCAD) or a nonconvex loss
    # (logistic with a nonconvex penalty) takes the monotone proximal-gradient method
    convex = p64.regularizer.convex and getattr(p64.loss, "convex", True)
    method = _fista if convex else _proximal_gradient
    if _splits_into_bounds(p64):
        # ℓ1: quasi-Newton on the split x = u − v first; FISTA finishes only if it falls short
        x, norm, iterations, lipschitz = _lbfgsb_l1(p64, start, tol, max_iter)
        if norm > tol:
            x, norm, more, lipschitz = method(p64, x, tol, max_iter)
            iterations += more
    else:
        x, norm, iterations, lipschitz = method(p64, start, tol, max_iter)
    ref = Reference(x, p64.objective(x), norm, iterations)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a temporary file of this writer's own: parallel runs (--jobs) solving the same
        # problem used to share one temporary name, and the second rename found it gone
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.stem + ".",
                                         suffix=".tmp.npz", delete=False) as tmp:
            np.savez(tmp, x=ref.x, objective=ref.objective, prox_grad_norm=ref.prox_grad_norm,
                     iterations=ref.iterations, lipschitz=lipschitz)
        os.replace(tmp.name, path)
    return ref


def skglm_start(problem: Problem, start: np.ndarray) -> np.ndarray:
    """skglm's solution of ``problem`` (``AndersonCD`` from ``start``, ``tol = 1e-12``): the
    clients' samples pooled, which is the federated objective when every sample weighs the
    same (``π_i / n_i`` equal: ``weighting="samples"``, or equal client sizes)."""
    from ._extras import require
    from .losses import LeastSquares, Logistic
    from .regularizers import L1, MCP, SCAD

    loss: Any = problem.loss
    reg: Any = problem.regularizer
    data = problem.data
    per_sample = problem.weights / data.counts
    supported = (type(loss) in (LeastSquares, Logistic) and loss.l2 == 0.0
                 and getattr(loss, "nonconvex", 0.0) == 0.0 and len(problem.param_shape) == 1
                 and type(reg) in (L1, MCP, SCAD))
    if not supported or not np.allclose(per_sample, per_sample[0], rtol=1e-12):
        raise ValueError(
            "solver='skglm' solves a least squares or logistic loss (no l2 or nonconvex "
            "term) with l1, mcp or scad on a vector model and every sample weighted the "
            f"same; this problem has {type(loss).__name__}, {type(reg).__name__} and "
            "sample weights " + ("equal" if np.allclose(per_sample, per_sample[0]) else
                                 "that differ (weighting='samples' makes them equal)")
            + ": use solver='fedcomp'")
    require("skglm", "solve_reference(solver='skglm')")
    from skglm import datafits, penalties, solvers

    X, y, _ = data.pooled()  # sparse data: a CSR matrix, which skglm takes as CSC
    if data.sparse:
        X = X.tocsc()
    datafit = datafits.Quadratic() if isinstance(loss, LeastSquares) else datafits.Logistic()
    penalty = (penalties.L1(reg.alpha) if isinstance(reg, L1) else
               penalties.MCPenalty(reg.alpha, reg.gamma) if isinstance(reg, MCP) else
               penalties.SCAD(reg.alpha, reg.a))
    anderson_cd = solvers.AndersonCD(tol=1e-12, max_iter=1000, fit_intercept=False,
                                     warm_start=True)
    coef, _, _ = anderson_cd.solve(X, y, datafit, penalty, w_init=start.copy())
    return np.asarray(coef[:X.shape[1]], dtype=np.float64)


def _check_solvable(problem: Problem) -> None:
    """Refuse a regularizer that is neither convex nor weakly convex (``l0``, ``l0_ball``).

    Proximal gradient on such a ``g`` (iterative hard thresholding) stops at a fixed point
    that is only a local minimiser, and the global minimiser of an ℓ0-constrained or
    ℓ0-penalised least squares is NP-hard in general: no ``x*`` this solver returned
    would be the one its metrics (distance to ``x*``, suboptimality) promise.
    """
    reg = problem.regularizer
    if not np.isfinite(reg.weak_convexity):
        raise ValueError(
            f"reference solver: {type(reg).__name__} is neither convex nor weakly convex "
            "(an l0 penalty or constraint), so proximal gradient would return a local "
            "minimiser, not x* (the global one is NP-hard in general); run without a "
            "reference (reference = false in the config) and judge runs by objective, "
            "prox_grad_norm or support recovery instead")


def cache_path(problem: Problem, start: np.ndarray) -> Path:
    """The cache file of ``problem`` solved from ``start``.

    The key is the problem's fingerprint, plus a digest of ``start`` unless it is zero (the
    default start): for a weakly convex ``g`` (MCP, SCAD), and for a convex one without a
    unique minimizer, different starts reach different solutions.
    """
    key = problem.fingerprint()
    if _splits_into_bounds(problem):
        key += "-lbfgsb"  # the solver's own x* (another solver's agrees only to tol)
    if np.any(start):
        a = np.ascontiguousarray(start, dtype=np.float64)
        digest = hashlib.sha256(str(a.shape).encode() + a.tobytes()).hexdigest()[:16]
        key += f"-x0-{digest}"
    return cache_dir() / f"{key}.npz"


def _read_cache(path: Path, problem: Problem, tol: float) -> tuple[Reference | None, str]:
    """The cached reference at ``path`` if it still solves float64 ``problem`` to ``tol``.

    Returns ``(reference, "")`` on a hit, else ``(None, defect)``: ``defect`` names what is
    wrong with a corrupt or stale entry, and is empty when there is no entry or it was only
    solved to a looser tolerance (nothing to warn about). The stored norm is not trusted:
    it is recomputed at the stored ``x`` and the solver's final step (one gradient, one
    prox), and the objective is re-evaluated.
    """
    try:
        with np.load(path) as cached:
            x = np.asarray(cached["x"], dtype=np.float64)
            stored_norm = float(cached["prox_grad_norm"])
            iterations = int(cached["iterations"])
            lipschitz = float(cached["lipschitz"])
    except FileNotFoundError:
        return None, ""
    except KeyError as err:  # e.g. written before the solver's step was stored
        return None, f"missing field: {err}"
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        return None, f"unreadable: {type(err).__name__}: {err}"
    if x.shape != problem.param_shape:
        return None, f"x has shape {x.shape}, the model {problem.param_shape}"
    if not (np.isfinite(x).all() and np.isfinite(lipschitz) and lipschitz > 0):
        return None, f"non-finite x or step (lipschitz={lipschitz})"
    norm = _mapping_norm(problem, x, to_numpy(problem.smooth_grad(x)), lipschitz)
    if norm <= tol:
        return Reference(x, problem.objective(x), norm, iterations), ""
    if stored_norm <= tol:
        return None, (f"it records prox-gradient norm {stored_norm:.3e}, but the norm at its x "
                      f"is {norm:.3e} > tol={tol:.1e}")
    return None, ""


def _mapping_norm(problem: Problem, x: np.ndarray, grad: np.ndarray, lipschitz: float) -> float:
    step = 1.0 / lipschitz
    return float(np.linalg.norm(x - problem.prox(x - step * grad, step)) / step)


def _backtrack(problem: Problem, y: np.ndarray, f_y: float, g_y: np.ndarray, lipschitz: float
               ) -> tuple[np.ndarray, float]:
    """Prox-gradient step from ``y`` with the sufficient-decrease test; returns (x, L)."""
    while True:
        x = problem.prox(y - g_y / lipschitz, 1.0 / lipschitz)
        d = x - y
        # relative slack absorbs float rounding once the decrease is at machine precision
        bound = f_y + float(np.vdot(g_y, d)) + 0.5 * lipschitz * float(np.vdot(d, d))
        if problem.smooth_value(x) <= bound + 1e-15 * abs(f_y) or lipschitz > 1e20:
            return x, lipschitz
        lipschitz *= 2.0


def _fista(problem: Problem, x: np.ndarray, tol: float, max_iter: int
           ) -> tuple[np.ndarray, float, int, float]:
    """FISTA with backtracking and gradient restart; returns ``(x, norm, iterations, L)``."""
    lipschitz = max(problem.smoothness() / 16.0, 1e-12)  # backtracking raises it as needed
    y, t = x.copy(), 1.0
    norm, half_norm = np.inf, np.nan
    for it in range(1, max_iter + 1):
        g_y = to_numpy(problem.smooth_grad(y))
        x_new, lipschitz = _backtrack(problem, y, problem.smooth_value(y), g_y, lipschitz)
        norm = _mapping_norm(problem, x_new, to_numpy(problem.smooth_grad(x_new)), lipschitz)
        if norm <= tol:
            return x_new, norm, it, lipschitz
        if float(np.vdot(y - x_new, x_new - x)) > 0:  # gradient restart
            t, y = 1.0, x_new
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            y = x_new + ((t - 1.0) / t_new) * (x_new - x)
            t = t_new
        x = x_new
        if it == max_iter // 2:
            half_norm = float(np.linalg.norm(x))
    raise RuntimeError(_not_converged(norm, tol, max_iter, half_norm, x))


def _splits_into_bounds(problem: Problem) -> bool:
    """Whether ``g`` is ``λ‖x‖₁`` (a smooth problem over ``u, v ≥ 0`` after ``x = u − v``)."""
    from .regularizers import L1

    return type(problem.regularizer) is L1


def _lbfgsb_l1(problem: Problem, x: np.ndarray, tol: float, max_iter: int
               ) -> tuple[np.ndarray, float, int, float]:
    """``min f(x) + λ‖x‖₁`` as ``min_{u,v ≥ 0} f(u − v) + λ·Σ(u + v)`` by L-BFGS-B.

    Returns ``(x, norm, evaluations, L)``: the point of smallest prox-gradient mapping norm
    seen, which stops the search once it is at most ``tol``, the norm taken at the global
    smoothness bound ``L`` (the mapping norm grows with ``L``, so this is the strict one).
    The split problem is smooth with simple bounds, where a quasi-Newton method needs a few
    hundred evaluations on an ill-conditioned softmax regression that FISTA takes 10⁴ or
    more iterations for (``feddr_async``'s draws 0-4 at tol 1e-8: 400-650 evaluations).
    At a minimizer ``u_j v_j = 0``, so ``x = u − v`` has ``‖x‖₁ = Σ(u + v)``.

    References
    ----------
    Byrd, R. H., Lu, P., Nocedal, J., Zhu, C. "A Limited Memory Algorithm for Bound
    Constrained Optimization." SIAM J. Sci. Comput., 1995 (SciPy's L-BFGS-B).
    """
    from scipy.optimize import minimize

    from .regularizers import L1

    regularizer = problem.regularizer
    assert isinstance(regularizer, L1)  # _splits_into_bounds chose this solver
    shape, n = x.shape, x.size
    lam = float(regularizer.alpha)

    lipschitz = float(problem.smoothness())
    if not (np.isfinite(lipschitz) and lipschitz > 0):  # no bound to measure with: FISTA
        return x, np.inf, 0, 1.0
    best: list = [np.inf, x, 0]  # norm, point, evaluations: the best point seen

    def value_and_grad(z: np.ndarray) -> tuple[float, np.ndarray]:
        point = (z[:n] - z[n:]).reshape(shape)
        grad = to_numpy(problem.smooth_grad(point))
        norm = _mapping_norm(problem, point, grad, lipschitz)  # one prox: cheap next to ∇f
        best[2] += 1
        if norm < best[0]:
            best[:2] = norm, point
        if norm <= tol:
            raise _Reached
        grad = grad.ravel()
        return problem.smooth_value(point) + lam * float(z.sum()), np.concatenate(
            [grad + lam, lam - grad])

    start = np.concatenate([np.maximum(x, 0.0).ravel(), np.maximum(-x, 0.0).ravel()])
    try:
        minimize(value_and_grad, start, jac=True, method="L-BFGS-B",
                 bounds=[(0.0, None)] * (2 * n),
                 options={"maxiter": max_iter, "maxcor": 30, "ftol": 0.0, "gtol": 0.0})
    except _Reached:
        pass
    norm, x, evaluations = best
    return x, norm, evaluations, lipschitz


class _Reached(Exception):
    """L-BFGS-B reached the tolerance (raised from its objective to stop it there)."""


#: Iterates per Anderson extrapolation of the monotone method (skglm's AndersonCD: 5).
ANDERSON_WINDOW = 5

#: Plain steps before the extrapolation starts: a problem the plain method solved in
#: fewer keeps its former solution bit for bit (a weakly convex g has several stationary
#: points, and an early extrapolation may reach another one); past them, the iterate is
#: in its stationary point's basin, which the monotone extrapolation does not leave.
PLAIN_STEPS = 20_000


def _anderson(iterates: list[np.ndarray]) -> np.ndarray | None:
    """The Anderson extrapolation of ``iterates`` (Walker and Ni 2011; as skglm's
    ``AndersonAcceleration``): ``Σ c_k x_k`` with ``c`` minimising ``‖Σ c_k r_k‖`` over
    ``Σ c_k = 1``, ``r_k = x_{k+1} − x_k`` the residuals of the fixed-point map (the
    prox-gradient step), or ``None`` when their Gram matrix is singular."""
    points = np.stack([x.reshape(-1) for x in iterates])
    residuals = np.diff(points, axis=0)
    gram = residuals @ residuals.T
    try:
        z = np.linalg.solve(gram, np.ones(len(gram)))
    except np.linalg.LinAlgError:
        return None
    if not (np.all(np.isfinite(z)) and z.sum() != 0):
        return None
    coefficients = z / z.sum()
    return (coefficients @ points[1:]).reshape(iterates[0].shape)


def _proximal_gradient(problem: Problem, x: np.ndarray, tol: float, max_iter: int
                       ) -> tuple[np.ndarray, float, int, float]:
    """Monotone proximal gradient with backtracking, accelerated by Anderson extrapolation;
    returns ``(x, norm, iterations, L)``.

    After :data:`PLAIN_STEPS` plain steps, every :data:`ANDERSON_WINDOW` steps the last
    iterates are extrapolated
    (:func:`_anderson`), and the extrapolated point replaces the iterate only where its
    objective ``F`` is lower: the method stays monotone, which a weakly convex ``g`` (MCP,
    SCAD) or a nonconvex loss needs, while the extrapolation takes the many small steps of
    an ill-conditioned problem at once (skglm's AndersonCD applies the same safeguarded
    extrapolation to coordinate descent). Logistic MCP on standardized breast cancer: over
    10⁵ plain steps stopped at a prox-gradient norm of 1.8e-5; with extrapolation ``tol =
    1e-10`` is reached (:data:`PLAIN_STEPS` plain steps and a few thousand more).
    """
    lipschitz = max(problem.smoothness() / 16.0, 1e-12)
    rho = problem.regularizer.weak_convexity
    norm, half_norm = np.inf, np.nan
    window = [x]
    for it in range(1, max_iter + 1):
        # the prox of a ρ-weakly convex g needs step < 1/ρ
        lipschitz = max(lipschitz, 1.01 * rho)
        g_x = to_numpy(problem.smooth_grad(x))
        x, lipschitz = _backtrack(problem, x, problem.smooth_value(x), g_x, lipschitz)
        window.append(x)
        if it <= PLAIN_STEPS:
            window = [x]
        elif len(window) > ANDERSON_WINDOW:
            extrapolated = _anderson(window)
            if extrapolated is not None and problem.objective(extrapolated) < \
                    problem.objective(x):
                x = extrapolated
            window = [x]
        norm = _mapping_norm(problem, x, to_numpy(problem.smooth_grad(x)), lipschitz)
        if norm <= tol:
            return x, norm, it, lipschitz
        if it == max_iter // 2:
            half_norm = float(np.linalg.norm(x))
    raise RuntimeError(_not_converged(norm, tol, max_iter, half_norm, x))


def _not_converged(norm: float, tol: float, max_iter: int, half_norm: float, x: np.ndarray
                   ) -> str:
    """The solver's failure message; it names an unbounded minimizing sequence when ‖x‖ grows.

    A logistic loss on separable data with no penalty, or with a bounded one (MCP and SCAD
    are constant beyond γα), has no minimizer: the objective keeps decreasing as ‖x‖ → ∞
    and the prox-gradient norm decays like 1/k without reaching a tight tolerance.
    """
    message = (f"reference solver: prox-gradient norm {norm:.3e} > tol={tol:.1e} after "
               f"{max_iter} iterations; raise max_iter or loosen tol")
    final_norm = float(np.linalg.norm(x))
    if half_norm == half_norm and final_norm > 1.01 * half_norm:
        message += (f". ‖x‖ still grows ({half_norm:.4g} at iteration {max_iter // 2}, "
                    f"{final_norm:.4g} now): the objective may have no minimizer (separable "
                    "data with no penalty or a bounded one such as MCP or SCAD) — add an l2 "
                    "term to the loss (problem.l2) or set reference = false")
    return message
