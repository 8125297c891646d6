"""Contract tests every registered regularizer passes, plus per-class checks.

The contract runs over ``EXAMPLES``: one or more instances of every class in
``REGULARIZERS`` (a test fails if a registered name has no example), so a new regularizer
is checked as soon as it is registered and given an example:

* the prox is the argmin of ``s·g(u) + ½‖u − v‖²`` — by the strong-convexity inequality at
  many points around it (generic), and against independent numerical minimisers (a global
  1-D search per coordinate for separable penalties, smooth reformulations solved by
  BFGS or SLSQP for the others);
* a block of models gives the same result as each model alone, per-model steps the same as
  separate scalar calls;
* firm nonexpansiveness (convex) or the ``1/(1 − sρ)`` Lipschitz bound (weakly convex);
* shapes, finiteness, backend agreement (NumPy / array-api-strict / torch) and float32 in,
  float32 out.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import optimize

from fedcomp.regularizers import (
    DESCRIPTIONS,
    L0,
    L1,
    MCP,
    REGULARIZERS,
    SCAD,
    Box,
    ElasticNet,
    GroupLasso,
    L0Ball,
    L1Ball,
    L1L2Ball,
    L2Ball,
    Nuclear,
    Regularizer,
    Zero,
    make_regularizer,
    soft_threshold,
)

# (regularizer, model shape); labels deliberately non-contiguous and unsorted in one case
EXAMPLES = [
    (Zero(), (6,)),
    (L1(alpha=0.7), (6,)),
    (L1(alpha=0.3, param_ndim=2), (3, 2)),
    (ElasticNet(l1=0.5, l2=0.8), (6,)),
    (GroupLasso(alpha=0.6, groups=(2, 0, 0, 2, 5, 2)), (6,)),
    (GroupLasso(alpha=0.9, groups=(0, 0, 1, 1, 1, 2), weighted=False), (6,)),
    (GroupLasso(alpha=0.5, groups=(0, 1, 0, 1, 2, 2), param_ndim=2), (3, 2)),
    (Nuclear(alpha=0.8), (3, 4)),
    (Nuclear(alpha=0.6, shape=(2, 3)), (6,)),
    (MCP(alpha=0.8, gamma=3.0), (6,)),
    (MCP(alpha=0.5, gamma=1.5, param_ndim=2), (3, 2)),
    (SCAD(alpha=0.8, a=3.7), (6,)),
    (SCAD(alpha=0.6, a=2.5), (6,)),
    (L2Ball(radius=1.5), (6,)),
    (L2Ball(radius=1.0, param_ndim=2), (3, 2)),
    (L1Ball(radius=2.0), (6,)),
    (L1Ball(radius=1.0, param_ndim=2), (3, 2)),
    (Box(lower=-0.5, upper=0.3), (6,)),
    (Box(lower=0.0, upper=math.inf), (6,)),
    (L1L2Ball(alpha=0.4, radius=1.0), (6,)),
    (L0Ball(sparsity=3), (6,)),
    (L0Ball(sparsity=2, param_ndim=2), (3, 2)),
    (L0(alpha=0.4), (6,)),
    (L0(alpha=0.3, param_ndim=2), (3, 2)),
]

NAME_OF = {cls: name for name, cls in REGULARIZERS.items()}
SEPARABLE = (Zero, L1, ElasticNet, MCP, SCAD, Box)


def _ids(examples):
    seen: dict[str, int] = {}
    ids = []
    for reg, _ in examples:
        name = NAME_OF.get(type(reg), type(reg).__name__)
        seen[name] = seen.get(name, -1) + 1
        ids.append(f"{name}-{seen[name]}")
    return ids


CASES = [pytest.param(reg, shape, id=i) for (reg, shape), i in zip(EXAMPLES, _ids(EXAMPLES),
                                                                   strict=True)]
CONVEX_CASES = [c for c, (reg, _) in zip(CASES, EXAMPLES, strict=True) if reg.convex]
#: neither convex nor weakly convex (ρ = inf): the ℓ0 ball and penalty
L0_CASES = [c for c, (reg, _) in zip(CASES, EXAMPLES, strict=True)
            if math.isinf(reg.weak_convexity)]


# --- helpers ---------------------------------------------------------------------------------

def draw(shape, seed, batch=(5,), scale=1.5):
    return np.random.default_rng(seed).normal(scale=scale, size=(*batch, *shape))


def step_cap(reg):
    """0.9/ρ for weakly convex ones; 2 for convex ones and ρ = inf (no step bound)."""
    rho = reg.weak_convexity
    return 0.9 / rho if 0 < rho < math.inf else 2.0


def scalar_steps(reg):
    """Steps in the valid range: 0, moderate, and close to 1/ρ for weakly convex ones."""
    cap = step_cap(reg)
    return [0.0, 0.4, min(1.3, cap), min(2.0, cap)]


def model_steps(reg, n, seed):
    cap = step_cap(reg)
    return np.random.default_rng(seed + 1000).uniform(0.05, min(2.0, cap), size=n)


def axes(reg, x):
    return tuple(range(x.ndim - reg.param_ndim, x.ndim))


def objective(reg, u, v, s):
    """``s·g(u) + ½‖u − v‖²`` per model of ``u``, with ``0·inf = inf`` (a projection)."""
    g = np.asarray(reg.value(u), dtype=float)
    sg = np.where(np.isinf(g), np.inf, s * np.where(np.isinf(g), 0.0, g))
    return sg + 0.5 * np.sum((u - v) ** 2, axis=axes(reg, u))


def is_penalty(reg, shape):
    """Finite everywhere (not a constraint)."""
    return bool(np.all(np.isfinite(reg.value(draw(shape, 99, scale=10.0)))))


def to_backend(name, x):
    if name == "numpy":
        return x
    if name == "array_api_strict":
        return pytest.importorskip("array_api_strict").asarray(x)
    return pytest.importorskip("torch").asarray(x)


def to_host(x):
    return x if isinstance(x, np.ndarray) else np.from_dlpack(x)


BACKENDS = ["numpy", "array_api_strict", pytest.param("torch", marks=pytest.mark.torch)]


# --- independent numerical minimisers of s·g(u) + ½‖u − v‖² for one model v -----------------

def separable_minimiser(reg, v, s):
    """Global 1-D search per coordinate: a fine grid, then bounded Brent around its best."""
    unit = (1,) * reg.param_ndim
    flat = v.reshape(-1)
    radius = float(np.abs(flat).max()) + 2.0
    grid = np.linspace(-radius, radius, 4001)
    spacing = grid[1] - grid[0]
    g_grid = np.asarray(reg.value(grid.reshape(-1, *unit)), dtype=float)
    sg_grid = np.where(np.isinf(g_grid), np.inf, s * np.where(np.isinf(g_grid), 0.0, g_grid))

    def h(t, vj):
        g = float(reg.value(np.full((1, *unit), t))[0])
        return (math.inf if math.isinf(g) else s * g) + 0.5 * (t - vj) ** 2

    out = np.empty_like(flat)
    for j, vj in enumerate(flat):
        t0 = grid[np.argmin(sg_grid + 0.5 * (grid - vj) ** 2)]
        with np.errstate(invalid="ignore"):  # Brent's parabola through inf values (a Box)
            brent = optimize.minimize_scalar(h, bounds=(t0 - 2 * spacing, t0 + 2 * spacing),
                                             args=(vj,), method="bounded",
                                             options={"xatol": 1e-13})
        out[j] = min([t0, brent.x, 0.0], key=lambda t, vj=vj: h(t, vj))
    return out.reshape(v.shape)


def _bfgs_multistart(fun, size, seed, starts=3):
    """Best of a few BFGS runs from random starts (the reformulations below are nonconvex
    but benign: every local minimum is global, saddles are strict)."""
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(starts):
        res = optimize.minimize(fun, rng.normal(size=size), jac=True, method="BFGS",
                                options={"maxiter": 10_000, "gtol": 1e-12})
        if best is None or res.fun < best.fun:
            best = res
    return best.x


def group_lasso_minimiser(reg, v, s):
    """Smooth reformulation ``u_G = a_G·b_G``: ``‖u_G‖ = min ½(a_G² + ‖b_G‖²)``."""
    flat = v.reshape(-1)
    labels = np.unique(np.asarray(reg.groups), return_inverse=True)[1]
    n_groups = labels.max() + 1
    sizes = np.bincount(labels)
    c = s * reg.alpha * (np.sqrt(sizes) if reg.weighted else np.ones(n_groups))

    def fun(z):
        a, b = z[:n_groups], z[n_groups:]
        r = a[labels] * b - flat
        value = 0.5 * np.sum(c * a * a) + 0.5 * np.sum(c[labels] * b * b) + 0.5 * r @ r
        grad_a = c * a + np.bincount(labels, weights=r * b, minlength=n_groups)
        grad_b = c[labels] * b + r * a[labels]
        return value, np.concatenate([grad_a, grad_b])

    z = _bfgs_multistart(fun, n_groups + flat.size, seed=0)
    return (z[:n_groups][labels] * z[n_groups:]).reshape(v.shape)


def nuclear_minimiser(reg, v, s):
    """Burer–Monteiro: ``‖X‖_* = min ½(‖A‖² + ‖B‖²)`` over ``X = A·Bᵀ`` of full inner rank."""
    mat = v.reshape(reg.shape) if reg.shape is not None else v
    p1, p2 = mat.shape
    k = min(p1, p2)
    c = s * reg.alpha

    def fun(z):
        a, b = z[: p1 * k].reshape(p1, k), z[p1 * k:].reshape(p2, k)
        r = a @ b.T - mat
        value = 0.5 * c * (np.sum(a * a) + np.sum(b * b)) + 0.5 * np.sum(r * r)
        return value, np.concatenate([(c * a + r @ b).ravel(), (c * b + r.T @ a).ravel()])

    z = _bfgs_multistart(fun, (p1 + p2) * k, seed=0)
    a, b = z[: p1 * k].reshape(p1, k), z[p1 * k:].reshape(p2, k)
    return (a @ b.T).reshape(v.shape)


def _slsqp(fun, x0, constraint, bounds=None):
    res = optimize.minimize(fun, x0, jac=True, method="SLSQP", bounds=bounds,
                            constraints=[constraint], options={"ftol": 1e-16, "maxiter": 2000})
    return res.x


def l2_ball_minimiser(reg, v, s):
    f = v.reshape(-1)
    r2 = reg.radius**2
    u = _slsqp(lambda u: (0.5 * (u - f) @ (u - f), u - f), np.zeros_like(f),
               {"type": "ineq", "fun": lambda u: r2 - u @ u, "jac": lambda u: -2 * u})
    return u.reshape(v.shape)


def l1_ball_minimiser(reg, v, s):
    """Split ``u = p − q`` with ``p, q ≥ 0``: a smooth QP with one linear constraint."""
    f = v.reshape(-1)
    n = f.size

    def fun(z):
        r = z[:n] - z[n:] - f
        return 0.5 * r @ r, np.concatenate([r, -r])

    z = _slsqp(fun, np.zeros(2 * n),
               {"type": "ineq", "fun": lambda z: reg.radius - z.sum(),
                "jac": lambda z: -np.ones_like(z)},
               bounds=[(0.0, None)] * (2 * n))
    return (z[:n] - z[n:]).reshape(v.shape)


def l1_l2_ball_minimiser(reg, v, s):
    f = v.reshape(-1)
    n = f.size
    c = s * reg.alpha

    def fun(z):
        r = z[:n] - z[n:] - f
        return c * z.sum() + 0.5 * r @ r, np.concatenate([c + r, c - r])

    def ball(z):
        u = z[:n] - z[n:]
        return reg.radius**2 - u @ u

    def ball_jac(z):
        u = z[:n] - z[n:]
        return np.concatenate([-2 * u, 2 * u])

    z = _slsqp(fun, np.zeros(2 * n), {"type": "ineq", "fun": ball, "jac": ball_jac},
               bounds=[(0.0, None)] * (2 * n))
    return (z[:n] - z[n:]).reshape(v.shape)


def generic_minimiser(reg, v, s):
    """Fallback for a class with no structured reference: multistart Powell on the value."""
    shape = v.shape

    def h(u):
        return float(objective(reg, u.reshape(1, *shape), v, s)[0])

    rng = np.random.default_rng(0)
    starts = [v.reshape(-1), np.zeros(v.size)] + [rng.normal(size=v.size) for _ in range(2)]
    best = min((optimize.minimize(h, x0, method="Powell",
                                  options={"xtol": 1e-12, "ftol": 1e-15, "maxfev": 200_000})
                for x0 in starts), key=lambda res: res.fun)
    return best.x.reshape(shape)


def l0_minimiser(reg, v, s):
    """Brute force over every support ``S``: ``u = v`` on ``S``, 0 off it, costs
    ``s·g(u) + ½‖v_{S^c}‖²``; exact (no solver) for the small models of the contract."""
    flat = v.reshape(-1)
    best, best_cost = None, math.inf
    for support in itertools.product([False, True], repeat=flat.size):
        u = np.where(support, flat, 0.0).reshape(1, *v.shape)
        cost = objective(reg, u, v, s)[0]
        if cost < best_cost:
            best, best_cost = u[0], cost
    return best


MINIMISERS = {L0Ball: l0_minimiser, L0: l0_minimiser, GroupLasso: group_lasso_minimiser,
              Nuclear: nuclear_minimiser, L2Ball: l2_ball_minimiser, L1Ball: l1_ball_minimiser,
              L1L2Ball: l1_l2_ball_minimiser}


def reference_prox(reg, v, s):
    if isinstance(reg, SEPARABLE):
        return separable_minimiser(reg, v, s)
    return MINIMISERS.get(type(reg), generic_minimiser)(reg, v, s)


# --- registry -------------------------------------------------------------------------------

def test_examples_cover_every_registered_regularizer():
    covered = {type(reg) for reg, _ in EXAMPLES}
    missing = sorted(name for name, cls in REGULARIZERS.items() if cls not in covered)
    assert not missing, f"add an example of {missing} to EXAMPLES"


def test_registry_descriptions_and_exports():
    import fedcomp.regularizers as module

    assert set(DESCRIPTIONS) == set(REGULARIZERS)
    assert all(isinstance(d, str) and d and "\n" not in d for d in DESCRIPTIONS.values())
    assert all(name == name.lower() for name in REGULARIZERS)
    for cls in REGULARIZERS.values():
        assert cls.__name__ in module.__all__
        assert cls.__doc__ and "Examples" in cls.__doc__ and "Notes" in cls.__doc__
    for name in ("Regularizer", "soft_threshold", "make_regularizer", "REGULARIZERS"):
        assert name in module.__all__


@pytest.mark.parametrize("reg, shape", CASES)
def test_make_regularizer_round_trip(reg, shape):
    params = {f.name: getattr(reg, f.name) for f in dataclasses.fields(reg) if f.init}
    assert make_regularizer(NAME_OF[type(reg)], **params) == reg


@pytest.mark.parametrize("reg, shape", CASES)
def test_protocol_and_flags(reg, shape):
    assert isinstance(reg, Regularizer)
    assert reg.param_ndim == len(shape)
    assert reg.weak_convexity >= 0
    assert reg.convex == (reg.weak_convexity == 0)
    hash(reg)  # frozen, hashable: usable as a cache key
    with pytest.raises(dataclasses.FrozenInstanceError):
        reg.param_ndim = 1


def test_make_regularizer_errors_name_the_fix():
    with pytest.raises(ValueError, match="unknown regularizer 'lasso'") as info:
        make_regularizer("lasso", alpha=1.0)
    assert all(name in str(info.value) for name in REGULARIZERS)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['lam'\]; accepted: alpha, "
                                         r"param_ndim"):
        make_regularizer("l1", lam=1.0)
    with pytest.raises(ValueError, match=r"needs parameter\(s\) \['alpha', 'groups'\]"):
        make_regularizer("group_lasso")
    with pytest.raises(ValueError, match="MCP needs gamma > 1"):
        make_regularizer("mcp", gamma=0.5)
    assert make_regularizer("group_lasso", alpha=1.0, groups=[0, 0, 1]) == GroupLasso(1.0,
                                                                                      (0, 0, 1))


# --- the prox is the argmin -----------------------------------------------------------------

@pytest.mark.parametrize("reg, shape", CASES)
def test_prox_satisfies_optimality_inequality(reg, shape):
    """``h(u) ≥ h(p) + (1 − sρ)/2·‖u − p‖²`` for all u: p minimises the strongly convex h.

    Checked at points near p in random and coordinate directions, at v, at 0, and at prox
    outputs of other inputs (feasible points for constraints).
    """
    n = math.prod(shape)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        v = draw(shape, seed)
        feasible = reg.prox(draw(shape, seed + 50, batch=(8,)), 1.0)
        steps = [*scalar_steps(reg), model_steps(reg, v.shape[0], seed)]
        for step in steps:
            p = reg.prox(v, step)
            for i in range(v.shape[0]):
                s = float(step[i]) if isinstance(step, np.ndarray) else step
                directions = np.concatenate([rng.normal(size=(12, n)), np.eye(n), -np.eye(n)])
                directions = directions.reshape(-1, *shape)
                scales = np.array([1e-4, 1e-3, 1e-2, 1e-1, 1.0]).reshape(-1, 1, *[1] * len(shape))
                near = (p[i] + scales * directions).reshape(-1, *shape)
                candidates = np.concatenate([near, v[i : i + 1], np.zeros((1, *shape)), feasible])
                h_p = objective(reg, p[i : i + 1], v[i], s)[0]
                assert np.isfinite(h_p)
                gap = objective(reg, candidates, v[i], s) - h_p
                # ρ = inf: p is a global minimiser of a nonconvex h, no quadratic growth
                mu = 0.0 if math.isinf(reg.weak_convexity) else 1.0 - s * reg.weak_convexity
                bound = 0.5 * mu * np.sum((candidates - p[i]) ** 2, axis=axes(reg, candidates))
                worst = np.min(gap - bound)
                assert worst >= -1e-9 * (1.0 + abs(h_p)), (s, i, worst)


@pytest.mark.parametrize("reg, shape", CASES)
def test_prox_matches_numerical_minimiser(reg, shape):
    for seed in range(2):
        v = draw(shape, seed, batch=(3,))
        steps = [scalar_steps(reg)[1], scalar_steps(reg)[3], model_steps(reg, 3, seed)]
        for step in steps:
            p = reg.prox(v, step)
            for i in range(v.shape[0]):
                s = float(step[i]) if isinstance(step, np.ndarray) else step
                ref = reference_prox(reg, v[i], s)
                h_p, h_ref = objective(reg, np.stack([p[i], ref]), v[i], s)
                # the slack of indicator values (1e-9 relative) lets a solver end just outside
                assert h_p <= h_ref + 1e-8 * (1 + abs(h_ref)), (s, i, h_p, h_ref)
                np.testing.assert_allclose(p[i], ref, rtol=0, atol=1e-6,
                                           err_msg=f"step={s}, model {i}")


@pytest.mark.parametrize("reg, shape", [c for c in CASES if c.id in ("l1-0", "group_lasso-0",
                                                                       "scad-0")])
def test_generic_minimiser_agrees(reg, shape):
    """The fallback minimiser (used for classes without a structured one) is sound."""
    v = draw(shape, 7, batch=(2,))
    p = reg.prox(v, 0.7)
    for i in range(2):
        ref = generic_minimiser(reg, v[i], 0.7)
        h_p, h_ref = objective(reg, np.stack([p[i], ref]), v[i], 0.7)
        assert h_p <= h_ref + 1e-10
        np.testing.assert_allclose(p[i], ref, atol=1e-4)


@pytest.mark.parametrize("reg, shape", CASES)
def test_zero_step_is_identity_for_penalties_and_projection_for_constraints(reg, shape):
    v = draw(shape, 3)
    p = reg.prox(v, 0.0)
    if is_penalty(reg, shape):
        np.testing.assert_array_equal(p, v)
        np.testing.assert_allclose(reg.prox(v, np.zeros(5)), v, rtol=1e-14, atol=1e-15)
    else:
        assert np.all(np.isfinite(reg.value(p)))  # feasible
        # a projection is idempotent
        np.testing.assert_allclose(reg.prox(p, 0.0), p, rtol=1e-14, atol=1e-15)


# --- batching and steps -----------------------------------------------------------------------

@pytest.mark.parametrize("reg, shape", CASES)
def test_batched_equals_row_by_row(reg, shape):
    x = draw(shape, 11)
    steps = model_steps(reg, 5, 11)
    s = scalar_steps(reg)[2]
    block_value, block_prox, block_steps = reg.value(x), reg.prox(x, s), reg.prox(x, steps)
    for i in range(5):
        np.testing.assert_allclose(block_value[i], reg.value(x[i]), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(block_value[i : i + 1], reg.value(x[i : i + 1]), rtol=1e-13)
        np.testing.assert_allclose(block_prox[i], reg.prox(x[i], s), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(block_prox[i : i + 1], reg.prox(x[i : i + 1], s),
                                   rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(block_steps[i], reg.prox(x[i], float(steps[i])),
                                   rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("reg, shape", CASES)
def test_two_batch_axes(reg, shape):
    x = draw(shape, 12, batch=(2, 3))
    steps = model_steps(reg, 6, 12)
    flat_x = x.reshape(6, *shape)
    np.testing.assert_allclose(reg.value(x), reg.value(flat_x).reshape(2, 3), rtol=1e-13)
    np.testing.assert_allclose(reg.prox(x, steps.reshape(2, 3)),
                               reg.prox(flat_x, steps).reshape(x.shape), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("reg, shape", CASES)
@pytest.mark.parametrize("batch", [(), (1,), (5,), (2, 3)])
def test_shapes_and_finite_values(reg, shape, batch):
    x = draw(shape, 13, batch=batch)
    s = scalar_steps(reg)[2]
    value = reg.value(x)
    assert np.shape(value) == batch
    p = reg.prox(x, s)
    assert p.shape == x.shape
    assert np.all(np.isfinite(reg.value(p)))
    if is_penalty(reg, shape):
        assert np.all(np.isfinite(value))


# --- operator properties ----------------------------------------------------------------------

@pytest.mark.parametrize("reg, shape", CONVEX_CASES)
def test_firmly_nonexpansive(reg, shape):
    for seed in range(3):
        x = draw(shape, seed)
        ys = [draw(shape, seed + 100), x + 1e-3 * draw(shape, seed + 200)]
        for step in [*scalar_steps(reg)[1:], model_steps(reg, 5, seed)]:
            for y in ys:
                d_prox = reg.prox(x, step) - reg.prox(y, step)
                lhs = np.sum(d_prox**2, axis=axes(reg, x))
                rhs = np.sum(d_prox * (x - y), axis=axes(reg, x))
                assert np.all(lhs <= rhs + 1e-12), (step, lhs - rhs)


@pytest.mark.parametrize("reg, shape", [c for c, (reg, _) in zip(CASES, EXAMPLES, strict=True)
                                        if 0 < reg.weak_convexity < math.inf])
def test_weakly_convex_prox_is_lipschitz(reg, shape):
    """``prox_{s g}`` of a ρ-weakly convex g is ``1/(1 − sρ)``-Lipschitz for ``s < 1/ρ``."""
    for seed in range(3):
        x, y = draw(shape, seed), draw(shape, seed + 100)
        for s in scalar_steps(reg):
            d_prox = reg.prox(x, s) - reg.prox(y, s)
            lhs = np.sqrt(np.sum(d_prox**2, axis=axes(reg, x)))
            rhs = np.sqrt(np.sum((x - y) ** 2, axis=axes(reg, x))) / (1 - s * reg.weak_convexity)
            assert np.all(lhs <= rhs + 1e-12)


# --- backends and dtypes ----------------------------------------------------------------------

@pytest.mark.parametrize("reg, shape", CASES)
@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_backends_agree_in_float64(reg, shape, backend):
    x = draw(shape, 21)
    steps = model_steps(reg, 5, 21)
    s = scalar_steps(reg)[2]
    xb = to_backend(backend, x)
    for got, want in [(reg.value(xb), reg.value(x)), (reg.prox(xb, s), reg.prox(x, s)),
                      (reg.prox(xb, to_backend(backend, steps)), reg.prox(x, steps)),
                      (reg.prox(xb, steps), reg.prox(x, steps))]:
        got = to_host(got)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reg, shape", CASES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_in_float32_out(reg, shape, backend):
    x = draw(shape, 22)
    steps = model_steps(reg, 5, 22)
    s = scalar_steps(reg)[2]
    xb = to_backend(backend, x.astype(np.float32))
    steps32 = to_backend(backend, steps.astype(np.float32))
    outputs = {"value": (reg.value(xb), reg.value(x)), "prox": (reg.prox(xb, s), reg.prox(x, s)),
               "prox per-model": (reg.prox(xb, steps32), reg.prox(x, steps)),
               "prox float64 numpy steps": (reg.prox(xb, steps), reg.prox(x, steps))}
    for label, (got, want) in outputs.items():
        assert got.dtype == xb.dtype, label
        np.testing.assert_allclose(to_host(got), want, rtol=1e-4, atol=1e-4, err_msg=label)
    value_of_prox = to_host(reg.value(reg.prox(xb, steps32)))
    assert value_of_prox.dtype == np.float32
    assert np.all(np.isfinite(value_of_prox))  # projected float32 points count as feasible


@pytest.mark.parametrize("reg, shape", CASES)
@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_float64_backend_steps_keep_float32_models_float32(reg, shape, backend):
    """A float64 step array of the model's own backend is cast like a NumPy one (it used to
    promote the output to float64, and made the nuclear-norm SVD product fail on torch)."""
    x = draw(shape, 23)
    steps = model_steps(reg, 5, 23)
    xb = to_backend(backend, x.astype(np.float32))
    for step in (to_backend(backend, steps), to_backend(backend, np.asarray(steps[0]))):
        got = reg.prox(xb, step)
        assert got.dtype == xb.dtype
        want = reg.prox(x, steps if np.ndim(to_host(step)) else float(steps[0]))
        np.testing.assert_allclose(to_host(got), want, rtol=1e-4, atol=1e-4)


# --- invalid parameters -----------------------------------------------------------------------

INVALID = [
    (lambda: L1(alpha=-1.0), "alpha must be >= 0"),
    (lambda: ElasticNet(l1=1.0, l2=-0.1), "l2 must be >= 0"),
    (lambda: GroupLasso(alpha=-0.5, groups=(0, 1)), r"alpha must be >= 0 \(got alpha=-0.5\)"),
    (lambda: GroupLasso(alpha=1.0, groups=()), "non-empty sequence of integer labels"),
    (lambda: GroupLasso(alpha=1.0, groups=(0, 0.5, 1)), r"non-integer labels \[0.5\]"),
    (lambda: GroupLasso(alpha=1.0, groups="001"), "non-empty sequence of integer labels"),
    (lambda: GroupLasso(alpha=1.0, groups=(True, False)), "non-integer labels"),
    (lambda: GroupLasso(alpha=1.0, groups=(0, 1), weighted="yes"), "weighted must be True"),
    (lambda: Nuclear(alpha=-1.0), "alpha must be >= 0"),
    (lambda: Nuclear(alpha=1.0, param_ndim=1), r"need shape=\(p1, p2\)"),
    (lambda: Nuclear(alpha=1.0, shape=(6,)), "shape must be two positive integers"),
    (lambda: Nuclear(alpha=1.0, shape=(0, 3)), "shape must be two positive integers"),
    (lambda: MCP(alpha=1.0, gamma=1.0), r"MCP needs gamma > 1 \(got gamma=1.0\)"),
    (lambda: MCP(alpha=1.0, gamma=0.5), r"MCP needs gamma > 1 \(got gamma=0.5\)"),
    (lambda: MCP(alpha=-1.0), "alpha must be >= 0"),
    (lambda: SCAD(alpha=1.0, a=2.0), r"SCAD needs a > 2 \(got a=2.0\)"),
    (lambda: SCAD(alpha=-0.1), "alpha must be >= 0"),
    (lambda: L2Ball(radius=0.0), r"radius must be > 0 and finite \(got radius=0.0\)"),
    (lambda: L2Ball(radius=-1.0), "radius must be > 0"),
    (lambda: L1Ball(radius=0.0), "radius must be > 0"),
    (lambda: L1Ball(radius=math.inf), "radius must be > 0 and finite"),
    (lambda: L1L2Ball(alpha=1.0, radius=-2.0), "radius must be > 0"),
    (lambda: L1L2Ball(alpha=-1.0, radius=1.0), "alpha must be >= 0"),
    (lambda: Box(lower=1.0, upper=0.0), r"lower <= upper .*got lower=1.0, upper=0.0"),
    (lambda: Box(lower=math.nan, upper=0.0), "lower must be a real number"),
    (lambda: Box(lower=math.inf, upper=math.inf), "lower < inf"),
    (lambda: L2Ball(radius=1.0, param_ndim=3), "param_ndim must be 1"),
    (lambda: MCP(param_ndim=0), "param_ndim must be 1"),
    (lambda: L0Ball(sparsity=0), r"sparsity must be an integer >= 1 \(got sparsity=0\)"),
    (lambda: L0Ball(sparsity=2.0), r"sparsity must be an integer >= 1 \(got sparsity=2.0\)"),
    (lambda: L0Ball(sparsity=True), "sparsity must be an integer"),
    (lambda: L0(alpha=-0.1), "alpha must be >= 0"),
    (lambda: L0(alpha=math.inf), "alpha must be finite"),
    (lambda: L0(param_ndim=3), "param_ndim must be 1"),
]


@pytest.mark.parametrize("build, message", INVALID)
def test_invalid_parameters_raise(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_call_time_shape_errors():
    with pytest.raises(ValueError, match="groups has 3 labels but each model has 4"):
        GroupLasso(alpha=1.0, groups=(0, 0, 1)).prox(np.ones((2, 4)), 1.0)
    with pytest.raises(ValueError, match=r"shape=\(2, 3\) has 6 entries but each model has 8 .*"
                                         r"pass shape=\(p1, p2\) with p1·p2 = 8"):
        Nuclear(alpha=1.0, shape=(2, 3)).value(np.ones((2, 8)))


def test_weakly_convex_step_too_large_names_the_fix():
    x = np.ones((2, 3))
    message = ("MCP prox needs step < gamma (got step=5.0, gamma=3.0); lower the learning rate "
               "or raise gamma")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MCP(alpha=1.0, gamma=3.0).prox(x, 5.0)
    with pytest.raises(ValueError, match="MCP prox needs step < gamma"):
        MCP(alpha=1.0, gamma=3.0).prox(x, 3.0)  # the boundary: prox not single-valued
    with pytest.raises(ValueError, match=r"got step=4.0, gamma=3.0"):
        MCP(alpha=1.0, gamma=3.0).prox(x, np.array([1.0, 4.0]))  # one model too large
    with pytest.raises(ValueError, match=r"SCAD prox needs step < a - 1 \(got step=3.0, "
                                         r"a - 1=2.7\); lower the learning rate or raise a"):
        SCAD(alpha=1.0, a=3.7).prox(x, 3.0)
    MCP(alpha=1.0, gamma=3.0).prox(x, 2.99)
    SCAD(alpha=1.0, a=3.7).prox(x, np.array([2.69, 0.1]))


@pytest.mark.parametrize("reg, shape", CASES)
@pytest.mark.parametrize("step, shown", [(-1.0, "-1.0"), (math.nan, "nan"), (math.inf, "inf"),
                                         (np.array([0.5, -0.2, 0.1, 0.3, 0.2]), "-0.2"),
                                         (np.array([0.5, 0.2, np.nan, 0.3, 0.2]), "nan"),
                                         (np.float32(-1.0), "-1.0")])
def test_negative_or_non_finite_steps_raise(reg, shape, step, shown):
    """Every prox rejects a step it has no meaning for (a negative step used to shift the
    model: soft thresholding at -0.5 added 0.5 to every coordinate)."""
    with pytest.raises(ValueError, match=rf"prox step must be finite and >= 0 \(got step={shown}\);"
                                         r" check the learning rates"):
        reg.prox(draw(shape, 24), step)


def test_float32_steps_rounding_to_the_weak_convexity_limit_stay_finite():
    """A per-model step just below 1/ρ passes the float64 check but rounds to 1/ρ in float32;
    the prox divides by 1/ρ − s and used to return NaN at the end of the concave part."""
    cases = [(MCP(alpha=1.0, gamma=3.0), 2.99999999, [3.0, 2.0, 1.0, 3.5]),
             (SCAD(alpha=0.9, a=3.0), 1.99999999, [2.7, 2.0, 0.5, 3.5])]
    for reg, near_limit, row in cases:
        steps = np.array([near_limit, 0.5])
        assert np.float32(near_limit) == np.float32(1 / reg.weak_convexity)
        x = np.array([row, row], dtype=np.float32)
        with np.errstate(over="ignore"):  # (γα − |v|)/(1/ρ − s) → ±inf, then clipped
            got = reg.prox(x, steps)
        assert got.dtype == np.float32 and np.all(np.isfinite(got)), (reg, got)
        np.testing.assert_allclose(got, reg.prox(x.astype(np.float64), steps), rtol=1e-6,
                                   err_msg=repr(reg))


# --- closed forms and cross-checks between classes --------------------------------------------

def test_scad_matches_fan_and_li_thresholding_at_unit_step():
    lam, a = 0.7, 3.7
    z = np.linspace(-5, 5, 2001)
    expected = np.where(np.abs(z) <= 2 * lam, np.sign(z) * np.maximum(np.abs(z) - lam, 0),
                        np.where(np.abs(z) <= a * lam,
                                 ((a - 1) * z - np.sign(z) * a * lam) / (a - 2), z))
    np.testing.assert_allclose(SCAD(alpha=lam, a=a).prox(z[:, None], 1.0)[:, 0], expected,
                               rtol=0, atol=1e-14)


def test_mcp_firm_thresholding_and_value():
    lam, gamma, s = 0.5, 2.0, 0.8
    z = np.linspace(-3, 3, 1201)
    expected = np.where(np.abs(z) <= s * lam, 0.0,
                        np.where(np.abs(z) <= gamma * lam,
                                 np.sign(z) * (np.abs(z) - s * lam) / (1 - s / gamma), z))
    reg = MCP(alpha=lam, gamma=gamma)
    np.testing.assert_allclose(reg.prox(z[:, None], s)[:, 0], expected, rtol=0, atol=1e-14)
    penalty = np.where(np.abs(z) <= gamma * lam, lam * np.abs(z) - z**2 / (2 * gamma),
                       gamma * lam**2 / 2)
    np.testing.assert_allclose(reg.value(z[:, None]), penalty, rtol=1e-14, atol=1e-15)


def test_limits_reduce_to_simpler_regularizers():
    x = draw((6,), 31)
    steps = model_steps(L1(), 5, 31)
    l1 = L1(alpha=0.6)
    cases = [
        (GroupLasso(alpha=0.6, groups=tuple(range(6)), weighted=False), l1),
        (GroupLasso(alpha=0.6, groups=tuple(range(6))), l1),  # singleton groups: w = 1
        (L1L2Ball(alpha=0.6, radius=1e6), l1),
        (ElasticNet(l1=0.6, l2=0.0), l1),
        (MCP(alpha=0.6, gamma=1e9), l1),
        (SCAD(alpha=0.6, a=1e9), l1),
        (L1L2Ball(alpha=0.0, radius=1.2), L2Ball(radius=1.2)),
        # the only singular value of a row vector is its norm
        (Nuclear(alpha=0.6, shape=(1, 6)), GroupLasso(alpha=0.6, groups=(0,) * 6,
                                                      weighted=False)),
        (Nuclear(alpha=0.6, shape=(6, 1)), GroupLasso(alpha=0.6, groups=(0,) * 6,
                                                      weighted=False)),
        (Box(lower=-math.inf, upper=math.inf), Zero()),
    ]
    for reg, simpler in cases:
        np.testing.assert_allclose(reg.prox(x, steps), simpler.prox(x, steps), atol=1e-7,
                                   err_msg=repr(reg))
        if is_penalty(reg, (6,)):
            np.testing.assert_allclose(reg.value(x), simpler.value(x), rtol=1e-7,
                                       err_msg=repr(reg))


def test_nuclear_of_diagonal_matrices_is_l1_of_diagonal():
    d = draw((4,), 32)
    mats = np.stack([np.diag(row) for row in d])
    reg = Nuclear(alpha=0.5)
    np.testing.assert_allclose(reg.value(mats), L1(alpha=0.5).value(d), rtol=1e-13)
    np.testing.assert_allclose(np.diagonal(reg.prox(mats, 1.2), axis1=-2, axis2=-1),
                               L1(alpha=0.5).prox(d, 1.2), atol=1e-13)


def test_group_lasso_labels_are_arbitrary_integers():
    x = draw((5,), 33)
    a = GroupLasso(alpha=0.4, groups=(7, -1, 7, 3, -1))
    b = GroupLasso(alpha=0.4, groups=np.array([2, 0, 2, 1, 0]))
    assert b.groups == (2, 0, 2, 1, 0) and a.n_groups == 3
    np.testing.assert_allclose(a.prox(x, 0.9), b.prox(x, 0.9), rtol=1e-15)
    np.testing.assert_allclose(a.value(x), b.value(x), rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_projections_of_long_vectors_stay_feasible(backend):
    """A long float32 cumulative sum is off by ~n ulps; the projection must still be inside."""
    x = to_backend(backend, draw((100_000,), 35, batch=(4,), scale=10.0).astype(np.float32))
    for ball in (L1Ball(radius=1e4), L2Ball(radius=1e2), L1L2Ball(alpha=1e-3, radius=1e2)):
        assert np.all(np.isfinite(to_host(ball.value(ball.prox(x, 0.5))))), ball


def _exact_l1_ball_projection(row, radius):
    """Duchi et al.'s projection of one float64 model in exact rational arithmetic."""
    mags = sorted((Fraction(float(abs(v))) for v in row), reverse=True)
    theta, partial = Fraction(0), Fraction(0)
    for j, m in enumerate(mags, 1):
        partial += m
        theta = max(theta, (partial - Fraction(radius)) / j)
    return np.array([math.copysign(float(max(Fraction(float(abs(v))) - theta, 0)), v)
                     for v in row])


@pytest.mark.parametrize("radius", [0.01, 1.0, 30.0])
def test_float32_l1_ball_projection_with_large_entries_is_feasible_and_exact(radius):
    """With r ≪ max |v|, |v| − θ cancels to an ulp of max |v| (1e-3·r here): float32
    projections used to miss the feasibility slack (value() = inf) and not be idempotent."""
    x = draw((10,), 36, batch=(200,), scale=100.0).astype(np.float32)
    ball = L1Ball(radius=radius)
    p = ball.prox(x, 1.0)
    assert p.dtype == np.float32
    assert np.all(np.isfinite(ball.value(p)))
    exact = np.stack([_exact_l1_ball_projection(row, radius) for row in x.astype(np.float64)])
    # the projection of the float32 input, to float32 rounding of the radius
    np.testing.assert_allclose(p, exact, rtol=0, atol=2 * np.finfo(np.float32).eps * radius)
    np.testing.assert_array_equal(ball.prox(p, 1.0), p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_norms_and_projections_neither_overflow_nor_underflow(backend):
    """sqrt(Σ x²) overflows above 1e154 (float64) or 2e19 (float32), and underflows to 0
    below 1e-154; the ball projections returned 0, group lasso NaN or 0, for such models."""
    half = 1 / math.sqrt(2)
    for dtype, big, small in ((np.float64, 1e200, 1e-170), (np.float32, 3e19, 1e-25)):
        rtol = 4 * np.finfo(dtype).eps

        def run(reg, value, step=1.0, dtype=dtype):
            out = to_host(reg.prox(to_backend(backend, np.full((1, 2), value, dtype=dtype)), step))
            assert out.dtype == dtype
            return out

        for reg in (L2Ball(radius=1.0), L1L2Ball(alpha=1.0, radius=1.0)):
            np.testing.assert_allclose(run(reg, big), [[half, half]], rtol=rtol, err_msg=repr(reg))
        # far outside: the group norm exceeds the threshold by ~big, so barely shrinks
        np.testing.assert_allclose(run(GroupLasso(alpha=1.0, groups=(0, 0)), big), [[big, big]],
                                   rtol=rtol)
        np.testing.assert_allclose(run(L2Ball(radius=2 * small), small), [[small, small]],
                                   rtol=rtol)
        # no threshold (alpha = 0 or step = 0): the identity, however small the group
        for reg, step in ((GroupLasso(alpha=0.0, groups=(0, 0)), 1.0),
                          (GroupLasso(alpha=1.0, groups=(0, 0)), 0.0)):
            np.testing.assert_array_equal(run(reg, small, step), np.full((1, 2), small, dtype))
        value = to_host(L2Ball(radius=1.0).value(to_backend(backend, np.full((1, 2), small,
                                                                            dtype=dtype))))
        assert value.tolist() == [0.0]
    # the ℓ1 ball: the cumulative sum of [1e308, 1e308] overflowed
    np.testing.assert_allclose(to_host(L1Ball(radius=1.0).prox(
        to_backend(backend, np.array([[1e308, -1e308]])), 1.0)), [[0.5, -0.5]], rtol=1e-15)


def test_nuclear_prox_lowers_rank():
    x = draw((4, 5), 34, batch=(3,))
    p = Nuclear(alpha=1.0).prox(x, 2.0)
    sv_x, sv_p = np.linalg.svd(x, compute_uv=False), np.linalg.svd(p, compute_uv=False)
    np.testing.assert_allclose(sv_p, np.maximum(sv_x - 2.0, 0.0), atol=1e-12)


# --- property tests ---------------------------------------------------------------------------

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False)
models = hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=8),
                    elements=finite)
radii = st.floats(1e-2, 1e2)


@settings(max_examples=60, deadline=None)
@given(x=models, threshold=st.floats(0.0, 1e3))
def test_soft_threshold_closed_form(x, threshold):
    out = soft_threshold(x, threshold)
    expected = np.sign(x) * np.maximum(np.abs(x) - threshold, 0.0)
    np.testing.assert_array_equal(out, expected)
    # never -0.0 (unless x itself is -0.0)
    assert not np.any(np.signbit(out) & (out == 0) & ~(np.signbit(x) & (x == 0)))
    assert np.all(np.abs(out) <= np.abs(x))


@settings(max_examples=60, deadline=None)
@given(x=models, radius=radii)
def test_l1_ball_projection_properties(x, radius):
    ball = L1Ball(radius=radius)
    p = ball.prox(x, 1.0)
    norms = np.abs(x).sum(axis=-1)
    assert np.all(np.abs(p).sum(axis=-1) <= radius * (1 + 1e-12) + 1e-12)
    inside = norms <= radius
    np.testing.assert_array_equal(p[inside], x[inside])
    # outside: the projection lands on the sphere, and matches a bisection for the threshold
    for row, prow in zip(x[~inside], p[~inside], strict=True):
        np.testing.assert_allclose(np.abs(prow).sum(), radius, rtol=1e-10)
        lo, hi = 0.0, float(np.abs(row).max())
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.maximum(np.abs(row) - mid, 0).sum() > radius else (lo, mid)
        np.testing.assert_allclose(prow, soft_threshold(row, hi), atol=1e-9 * (1 + hi))
    np.testing.assert_allclose(ball.prox(p, 1.0), p, atol=1e-12 * (1 + np.abs(x).max()))


@settings(max_examples=60, deadline=None)
@given(x=models, radius=radii)
def test_l2_ball_projection_properties(x, radius):
    p = L2Ball(radius=radius).prox(x, 0.5)
    norms = np.linalg.norm(x, axis=-1)
    assert np.all(np.linalg.norm(p, axis=-1) <= radius * (1 + 1e-12))
    inside = norms <= radius
    np.testing.assert_array_equal(p[inside], x[inside])
    # outside: p is the positive multiple of x on the sphere
    out = ~inside
    np.testing.assert_allclose(p[out], x[out] * (radius / norms[out])[:, None], rtol=1e-12)


# --- the l0 ball and the l0 penalty ------------------------------------------------------------

@pytest.mark.parametrize("reg, shape", L0_CASES)
def test_l0_prox_is_the_exact_brute_force_minimiser(reg, shape):
    """Over every support (64 of them for 6 entries), the prox attains the minimum of
    ``s·g(u) + ½‖u − v‖²`` exactly and is the brute-force minimiser bit for bit: away
    from ties it keeps entries of v unchanged, so there is no rounding to allow for."""
    for seed in range(6):
        v = draw(shape, 40 + seed, batch=(4,))
        for step in (0.3, 1.0, 2.0, model_steps(reg, 4, seed)):
            p = reg.prox(v, step)
            for i in range(4):
                s = float(step[i]) if isinstance(step, np.ndarray) else step
                np.testing.assert_array_equal(p[i], l0_minimiser(reg, v[i], s))


def test_l0_ball_ties_keep_the_lower_flat_index():
    reg = L0Ball(sparsity=2)
    v = np.array([[1.0, -3.0, 1.0, -1.0, 0.5], [2.0, 2.0, 2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(reg.prox(v, 1.0), [[1.0, -3.0, 0.0, 0.0, 0.0],
                                                      [2.0, 2.0, 0.0, 0.0, 0.0]])
    # a matrix model is flattened in C order: (0, 1) comes before (1, 0)
    m = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    np.testing.assert_array_equal(L0Ball(sparsity=1, param_ndim=2).prox(m, 1.0),
                                  [[[0.0, 1.0], [0.0, 0.0]]])
    # s >= n keeps everything; the value counts nonzeros per model, not per row
    np.testing.assert_array_equal(L0Ball(sparsity=9).prox(v, 1.0), v)
    np.testing.assert_array_equal(L0Ball(sparsity=2, param_ndim=2).value(
        np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]]])), [0.0, np.inf])


def test_l0_threshold_is_sqrt_2_step_alpha_and_the_tie_goes_to_zero():
    reg = L0(alpha=0.125)  # 2·s·α = 1 at s = 4: threshold exactly 1
    v = np.array([[1.0, -1.0, 1.0000001, -0.9999999, 0.0, 5.0]])
    np.testing.assert_array_equal(reg.prox(v, 4.0), [[0.0, 0.0, 1.0000001, 0.0, 0.0, 5.0]])
    # both 0 and v are minimisers at the tie: equal objectives
    tie = np.array([[1.0]])
    assert objective(reg, np.zeros((1, 1)), tie[0], 4.0)[0] == objective(reg, tie, tie[0], 4.0)[0]
    # tiny entries survive a zero step (|v| > 0, where v² > 0 would underflow)
    tiny = np.array([[1e-200, -1e-300]])
    np.testing.assert_array_equal(reg.prox(tiny, 0.0), tiny)
    assert L0(alpha=0.0).prox(tiny, 3.0).tolist() == tiny.tolist()


def test_reference_solver_refuses_l0_and_names_why():
    from fedcomp import ClientData, Problem, solve_reference
    from fedcomp.losses import LeastSquares

    data = ClientData.from_lists([np.eye(3)], [np.array([1.0, 0.5, 0.2])])
    for reg in (L0Ball(sparsity=1), L0(alpha=0.1)):
        with pytest.raises(ValueError, match=rf"{type(reg).__name__} is neither convex nor "
                                             r"weakly convex .*reference = false"):
            solve_reference(Problem(LeastSquares(), reg, data), use_cache=False)


def test_l0_regularizers_are_listed():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "fedcomp", "list", "regularizers"],
                         capture_output=True, text=True, check=True)
    lines = {line.split()[0]: line for line in res.stdout.splitlines()[1:] if line.strip()}
    assert "keep the s largest" in lines["l0_ball"]
    assert "hard threshold at sqrt(2*step*alpha)" in lines["l0"]
    assert make_regularizer("l0_ball", sparsity=4) == L0Ball(sparsity=4)
