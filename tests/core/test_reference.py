"""The centralized reference solver against scikit-learn, and its cache."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fedcomp.reference
from fedcomp import Problem
from fedcomp.data import ClientData
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.reference import cache_dir, cache_path, solve_reference
from fedcomp.regularizers import L1, MCP, ElasticNet
from tests.conftest import heterogeneous_data

sklearn = pytest.importorskip("sklearn")
from sklearn.linear_model import ElasticNet as SkElasticNet  # noqa: E402
from sklearn.linear_model import Lasso, LogisticRegression  # noqa: E402


def pooled(problem):
    a, y, _ = problem.data.pooled()
    return a, y


def rel_err(x, ref):
    return np.linalg.norm(np.asarray(x) - ref) / np.linalg.norm(ref)


def problem_of(loss, reg, labels):
    # unequal client sizes, weighted by sample counts = the pooled empirical risk
    data = heterogeneous_data(n_clients=4, d=8, seed=5, labels=labels)
    return Problem(loss, reg, data, weighting="samples")


def test_lasso_matches_sklearn():
    p = problem_of(LeastSquares(), L1(0.05), "real")
    a, y = pooled(p)
    sk = Lasso(alpha=0.05, fit_intercept=False, tol=1e-14, max_iter=1_000_000).fit(a, y)
    ref = solve_reference(p, use_cache=False)
    assert ref.prox_grad_norm <= 1e-10
    assert 0 < np.count_nonzero(sk.coef_) < a.shape[1]
    assert rel_err(ref.x, sk.coef_) < 1e-6


def test_elastic_net_least_squares_matches_sklearn():
    l1, l2 = 0.01, 0.05
    p = problem_of(LeastSquares(), ElasticNet(l1=l1, l2=l2), "real")
    a, y = pooled(p)
    # sklearn: 1/(2n)‖y − Xw‖² + α ρ ‖w‖₁ + α(1 − ρ)/2 ‖w‖²
    alpha = l1 + l2
    sk = SkElasticNet(alpha=alpha, l1_ratio=l1 / alpha, fit_intercept=False, tol=1e-14,
                      max_iter=1_000_000).fit(a, y)
    assert rel_err(solve_reference(p, use_cache=False).x, sk.coef_) < 1e-6


def sklearn_logistic(a, y, l1, l2):
    """sklearn's objective is C Σ logloss + ρ‖w‖₁ + (1 − ρ)/2 ‖w‖²; ours is the mean logloss
    + l1‖w‖₁ + l2/2 ‖w‖²: divide by C·n."""
    n = len(y)
    total = l1 + l2
    c = 1.0 / (n * total)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(C=c, l1_ratio=l1 / total, solver="saga", fit_intercept=False,
                                   tol=1e-15, max_iter=200_000)
        model.fit(a, y)
    return model.coef_.ravel()


def test_l1_logistic_matches_sklearn():
    p = problem_of(Logistic(), L1(0.01), "pm1")
    a, y = pooled(p)
    sk = sklearn_logistic(a, y, 0.01, 0.0)
    assert 0 < np.count_nonzero(np.abs(sk) > 1e-10) < a.shape[1]
    assert rel_err(solve_reference(p, use_cache=False).x, sk) < 1e-6


def test_elastic_net_logistic_matches_sklearn():
    p = problem_of(Logistic(), ElasticNet(l1=0.01, l2=0.02), "pm1")
    a, y = pooled(p)
    sk = sklearn_logistic(a, y, 0.01, 0.02)
    assert rel_err(solve_reference(p, use_cache=False).x, sk) < 1e-6


def test_ridge_inside_the_loss_equals_ridge_in_the_regularizer():
    data = heterogeneous_data(n_clients=3, d=5, seed=1)
    a = solve_reference(Problem(Logistic(l2=0.03), L1(0.01), data), use_cache=False)
    b = solve_reference(Problem(Logistic(), ElasticNet(0.01, 0.03), data), use_cache=False)
    np.testing.assert_allclose(a.x, b.x, atol=1e-9)


def test_nonconvex_reference_is_stationary():
    from fedcomp.regularizers import MCP

    p = problem_of(LeastSquares(), MCP(alpha=0.05, gamma=3.0), "real")
    ref = solve_reference(p, use_cache=False)
    assert ref.prox_grad_norm <= 1e-10
    # stationarity measured independently with another step
    s = 0.1
    mapping = (ref.x - p.prox(ref.x - s * np.asarray(p.smooth_grad(ref.x)), s)) / s
    assert np.linalg.norm(mapping) < 1e-8


def count_solves(monkeypatch) -> list[int]:
    """Spy on the solvers (ℓ1, convex, weakly convex): one entry per solver that ran."""
    calls: list[int] = []
    for name in ("_fista", "_proximal_gradient", "_lbfgsb_l1"):
        solver = getattr(fedcomp.reference, name)
        monkeypatch.setattr(fedcomp.reference, name,
                            lambda *a, _solver=solver: (calls.append(1), _solver(*a))[1])
    return calls


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    solves = count_solves(monkeypatch)
    p = problem_of(LeastSquares(), L1(0.01), "real")
    first = solve_reference(p)
    files = list(cache_dir().glob("*.npz"))
    assert len(files) == 1 and p.fingerprint() in files[0].name
    solved = len(solves)
    second = solve_reference(p)
    assert len(solves) == solved  # the second call read the cache
    np.testing.assert_array_equal(first.x, second.x)
    assert second.objective == first.objective and second.prox_grad_norm <= 1e-10
    # a different problem (other strength) is another key
    solve_reference(problem_of(LeastSquares(), L1(0.02), "real"))
    assert len(list(cache_dir().glob("*.npz"))) == 2 and len(solves) > solved


def mcp_two_stationary_points() -> Problem:
    """½(0.3x − 1)² + MCP(0.5, 2): a stationary point at 0 (from x0 = 0) and at 10/3 (x0 = 5)."""
    data = ClientData.from_lists([np.array([[0.3]])], [np.array([1.0])])
    return Problem(LeastSquares(), MCP(alpha=0.5, gamma=2.0), data)


def test_cache_key_includes_the_start(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    p = mcp_two_stationary_points()
    np.testing.assert_allclose(solve_reference(p).x, [0.0], atol=1e-12)
    from_five = solve_reference(p, x0=np.array([5.0]))
    np.testing.assert_allclose(from_five.x, [10.0 / 3.0], rtol=1e-9)
    assert len(list(cache_dir().glob("*.npz"))) == 2
    # and each is read back from its own entry
    solves = count_solves(monkeypatch)
    np.testing.assert_allclose(solve_reference(p, x0=np.array([5.0])).x, [10.0 / 3.0], rtol=1e-9)
    np.testing.assert_allclose(solve_reference(p, x0=np.zeros(1)).x, [0.0], atol=1e-12)
    assert solves == []


def _write_stale(path, kind):
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "wrong shape":
        np.savez(path, x=np.array([5.0, -5.0, 7.0]), objective=0.0, prox_grad_norm=0.0,
                 iterations=1, lipschitz=1.0)
    elif kind == "not a solution":
        np.savez(path, x=np.array([5.0, -5.0]), objective=0.0, prox_grad_norm=0.0,
                 iterations=1, lipschitz=1.0)
    else:  # written before the solver's step was stored
        np.savez(path, x=np.array([0.8, 0.0]), objective=0.0, prox_grad_norm=0.0, iterations=1)


@pytest.mark.parametrize("kind", ["empty", "wrong shape", "not a solution", "old format"])
def test_a_stale_cache_entry_is_solved_again_and_overwritten(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    data = ClientData.from_lists([np.eye(2)], [np.array([1.0, 0.05])])
    p = Problem(LeastSquares(), L1(0.1), data)
    path = cache_path(p, np.zeros(2))
    path.parent.mkdir(parents=True)
    _write_stale(path, kind)
    with pytest.warns(RuntimeWarning, match=f"{path.name} is unusable"):
        ref = solve_reference(p)
    np.testing.assert_allclose(ref.x, [0.8, 0.0], atol=1e-12)
    assert ref.objective == pytest.approx(p.objective(np.array([0.8, 0.0])), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the overwritten entry is now a clean hit
        np.testing.assert_array_equal(solve_reference(p).x, ref.x)


def test_an_entry_solved_to_a_looser_tol_is_refined_without_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    p = problem_of(LeastSquares(), L1(0.01), "real")
    assert solve_reference(p, tol=1e-3).prox_grad_norm > 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert solve_reference(p).prox_grad_norm <= 1e-10


def _solve_cached(strength: float) -> float:
    return solve_reference(problem_of(LeastSquares(), L1(strength), "real")).objective


def test_parallel_writers_of_one_cache_entry_do_not_collide(tmp_path, monkeypatch):
    """`fedcomp run --jobs N` workers solve the same reference at once: each writes its own
    temporary file and renames it (they shared one name, and a rename found it gone)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    context = multiprocessing.get_context("fork" if "fork" in
                                          multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(4, mp_context=context) as pool:
        objectives = list(pool.map(_solve_cached, [0.01] * 8))
    assert len(set(objectives)) == 1
    p = problem_of(LeastSquares(), L1(0.01), "real")
    entry = cache_path(p, np.zeros(p.param_shape))
    assert [f.name for f in cache_dir().iterdir()] == [entry.name]  # no leftovers


def test_float32_problem_is_solved_in_float64():
    p = problem_of(LeastSquares(), L1(0.01), "real")
    p32 = Problem(p.loss, p.regularizer, p.data.to(np.zeros(0, np.float32)), weighting="samples")
    ref = solve_reference(p32, use_cache=False)
    assert ref.x.dtype == np.float64 and ref.prox_grad_norm <= 1e-10


def _breast_cancer_mcp(l2: float) -> Problem:
    from fedcomp.experiments import build_problem, resolve

    return build_problem(resolve({
        "name": "no-minimizer", "rounds": 1, "algorithms": [{"name": "fedmid"}],
        "data": {"generator": "breast_cancer", "n_clients": 4, "unit_norm": True},
        "problem": {"loss": "logistic", "l2": l2},
        "regularizer": {"name": "mcp", "alpha": 0.01, "gamma": 3.0}}).base)


def test_failure_names_a_minimizer_at_infinity():
    # nearly separable data, MCP constant beyond gamma*alpha: the objective decreases
    # forever as ||x|| grows, so a tight tolerance is never reached
    with pytest.raises(RuntimeError, match=r"x‖ still grows .* add an l2 term"):
        solve_reference(_breast_cancer_mcp(0.0), tol=1e-9, max_iter=2000, use_cache=False)
    # the fix the message names: with a ridge term there is a minimizer
    ref = solve_reference(_breast_cancer_mcp(0.01), tol=1e-8, use_cache=False)
    assert ref.prox_grad_norm <= 1e-8


# --- nonconvex logistic against skglm (coordinate descent, Anderson, working sets) ---------
def _standardized_breast_cancer(n_clients: int = 5) -> ClientData:
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X, y = StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)
    parts = np.array_split(np.arange(len(y)), n_clients)
    return ClientData.from_lists([X[p] for p in parts], [y[p] for p in parts])


@pytest.mark.slow
@pytest.mark.parametrize("penalty", ["mcp", "scad"])
def test_nonconvex_logistic_reaches_skglms_objective(penalty):
    """Standardized breast cancer, 5 clients, logistic loss with MCP(0.05, 3) or
    SCAD(0.05, 3.7): skglm's AndersonCD converges; the reference solver once stopped at a
    prox-gradient norm of 1.8e-5 after 10⁵ steps. Both of its solvers now reach tol, at an
    objective no higher than skglm's (to 1e-9)."""
    skglm = pytest.importorskip("skglm")
    from fedcomp.regularizers import SCAD

    data = _standardized_breast_cancer()
    reg = MCP(0.05, 3.0) if penalty == "mcp" else SCAD(0.05, 3.7)
    theirs_penalty = (skglm.penalties.MCPenalty(0.05, 3.0) if penalty == "mcp"
                      else skglm.penalties.SCAD(0.05, 3.7))
    X = np.concatenate([data.features[i, :n] for i, n in enumerate(data.counts)])
    y = np.concatenate([data.targets[i, :n] for i, n in enumerate(data.counts)])
    theirs = skglm.GeneralizedLinearEstimator(
        skglm.datafits.Logistic(), theirs_penalty,
        skglm.solvers.AndersonCD(tol=1e-12, fit_intercept=False, max_iter=1000)).fit(X, y)
    problem = Problem(Logistic(), reg, data)  # weighting by samples: the pooled objective
    target = problem.objective(theirs.coef_.ravel())
    for solver in ("fedcomp", "skglm"):
        ours = solve_reference(problem, use_cache=False, solver=solver)
        assert ours.prox_grad_norm <= 1e-10
        assert ours.objective <= target + 1e-9, (solver, ours.objective - target)
    # what solver="skglm" refuses, it names
    with pytest.raises(ValueError, match="sample weights that differ"):
        unequal = ClientData.from_lists([X[:100], X[100:150]], [y[:100], y[100:150]])
        solve_reference(Problem(Logistic(), reg, unequal, weighting="uniform"),
                        use_cache=False, solver="skglm")
