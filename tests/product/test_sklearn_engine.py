"""The estimators' ``engine``: ``"jax"`` runs the fit's problem on jax arrays through
:func:`fedcomp.simulate`, whose compiled engine runs the whole run (rounds, rows, the
stopping rule) in its calls, and gives the ``"numpy"`` fit: coefficients to 1e-10, the
same rounds, status and rows. Few jax fits: each compiles (~1-2 s)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import fedcomp.sklearn._base as base  # noqa: E402
from fedcomp.sklearn import (  # noqa: E402
    FederatedLassoCV,
    FederatedLinearRegression,
    FederatedLogisticRegression,
)
from tests.conftest import make_problem  # noqa: E402
from tests.product.test_extras import assert_missing, probe_api  # noqa: E402


def _diabetes() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def test_engine_is_validated_at_fit_and_kept_by_get_params():
    X, y = _diabetes()
    model = FederatedLinearRegression(engine="torch")
    assert clone(model).get_params()["engine"] == "torch"  # stored as given
    with pytest.raises(ValueError, match=r"engine must be one of 'auto', 'numpy', 'jax' "
                                         r"\(got engine='torch'\)"):
        model.fit(X, y)
    for cls in (FederatedLinearRegression, FederatedLogisticRegression, FederatedLassoCV):
        assert cls().get_params()["engine"] == "auto"


def test_jax_missing_names_the_extra_and_auto_runs_on_numpy(tmp_path):
    fit = ("import numpy as np; from fedcomp.sklearn import FederatedLinearRegression as M; "
           "X = np.arange(40.0).reshape(20, 2) % 7; y = X @ [1.0, -2.0]; ")
    results = probe_api("jax,jaxlib", {"jax": fit + "M(engine='jax').fit(X, y)",
                                       "auto": fit + "M(max_iter=5, tol=None).fit(X, y)"},
                        tmp_path)
    assert_missing(results["jax"], "jax", "FederatedLinearRegression(engine='jax')")
    assert results["auto"][0] == "ok", results["auto"]


# --- engine="jax" ------------------------------------------------------------------------
jax = pytest.importorskip("jax")

from fedcomp.sklearn._engine import on_engine  # noqa: E402
from tests.engines import test_whole_run  # noqa: E402

#: the compiled whole-run calls of a test's runs, ``(first round, rounds, rows)`` each
calls = test_whole_run.calls


@pytest.fixture(scope="module")
def numpy_fit():
    """Standardized diabetes, Lasso alpha 0.1, 5 clients, the defaults (auto: FedDR)."""
    X, y = _diabetes()
    return FederatedLinearRegression(alpha=0.1, n_clients=5, engine="numpy").fit(X, y)


def test_jax_fit_equals_numpy_fit_through_the_compiled_whole_run(numpy_fit, calls):
    X, y = _diabetes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing leaks: no engine warning, no other
        jax_fit = FederatedLinearRegression(alpha=0.1, n_clients=5, engine="jax").fit(X, y)
    # the rounds and rows from the first call on ran in the compiled calls, to the end
    # (FedDR's warm-up round and the first rows run before them)
    start = calls[0][0]
    assert sum(rounds for _, rounds, _ in calls) == jax_fit.n_iter_ - start
    assert sum(rows for _, _, rows in calls) == sum(row["round"] > start
                                                    for row in jax_fit.history_)
    assert jax_fit.algorithm_ == numpy_fit.algorithm_ and jax_fit.algorithm_.startswith("feddr")
    assert jax_fit.converged_ and numpy_fit.converged_
    assert jax_fit.n_iter_ == numpy_fit.n_iter_
    assert jax_fit.coef_.dtype == np.float64 and isinstance(jax_fit.intercept_, float)
    np.testing.assert_allclose(jax_fit.coef_, numpy_fit.coef_, rtol=0, atol=1e-10)
    assert jax_fit.intercept_ == pytest.approx(numpy_fit.intercept_, rel=0, abs=1e-10)
    assert jax_fit.objective_ == pytest.approx(numpy_fit.objective_, rel=1e-12)
    assert len(jax_fit.history_) == len(numpy_fit.history_)
    # the stopping measure near convergence is a difference of nearly equal numbers: to
    # 1e-12 of the column's largest value (as test_whole_run compares rows)
    step_scale = max(row["relative_prox_step"] for row in numpy_fit.history_
                     if math.isfinite(row["relative_prox_step"]))
    for got, want in zip(jax_fit.history_, numpy_fit.history_, strict=True):
        assert list(got) == list(want)
        for key, value in want.items():
            if key == "objective":
                assert got[key] == pytest.approx(value, rel=1e-12)
            elif key == "relative_prox_step":
                assert got[key] == pytest.approx(value, rel=0, abs=1e-12 * step_scale)
            elif key != "wall_s":
                assert got[key] == value, key


def test_jax_warm_start_and_clone(numpy_fit, monkeypatch):
    """A clone keeps engine="jax"; a warm start on jax continues from the jax run's
    states (the same problem: a few rounds); the model's states are jax arrays."""
    X, y = _diabetes()
    seen = []
    simulate = base.simulate

    def spy(algorithm, problem, *args, **kwargs):
        seen.append((type(problem.data.features).__module__, kwargs["options"]))
        return simulate(algorithm, problem, *args, **kwargs)

    monkeypatch.setattr(base, "simulate", spy)
    model = clone(numpy_fit).set_params(engine="jax", warm_start=True)
    assert model.get_params()["engine"] == "jax" and not hasattr(model, "coef_")
    model.fit(X, y)
    first = model.n_iter_
    model.fit(X, y)  # from its own jax states
    assert seen[0][0].startswith("jax") and seen[1][1].initial_states is not None
    assert model.n_iter_ <= 10 < first and model.converged_
    np.testing.assert_allclose(model.coef_, numpy_fit.coef_, rtol=0,
                               atol=1e-6 * np.abs(numpy_fit.coef_).max())


@pytest.mark.slow  # ~3-7 s: the engine tries its traces before it runs the part eagerly
def test_logistic_on_jax_runs_its_newton_prox_eagerly_without_the_engine_warning():
    """The logistic Newton prox cannot trace: on jax it runs eagerly on the jax arrays,
    the engine's JaxEngineWarning stays inside the fit (even under "error"), and the fit
    is the numpy fit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(int)
    params = dict(alpha=0.01, n_clients=2, max_iter=3, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_jax = FederatedLogisticRegression(engine="jax", **params).fit(X, y)
    on_numpy = FederatedLogisticRegression(engine="numpy", **params).fit(X, y)
    np.testing.assert_allclose(on_jax.coef_, on_numpy.coef_, rtol=0, atol=1e-10)
    assert on_jax.n_iter_ == on_numpy.n_iter_ == 3


def test_float32_x_moves_to_jax_float32_arrays():
    """engine="jax" keeps the float32 rule: the run's data are jax float32 arrays where
    the run computes in float32, float64 ones elsewhere (the end-to-end fit: below)."""
    problem = make_problem("least_squares", n_clients=3, d=4)
    for dtype in (np.float32, np.float64):
        moved = on_engine(problem, dtype, "jax", "test")
        assert type(moved.data.features).__module__.startswith("jax")
        assert moved.data.features.dtype == dtype and moved.data.targets.dtype == dtype


@pytest.mark.slow
def test_float32_fit_on_jax_computes_in_float32(monkeypatch):
    X, y = _diabetes()
    dtypes = []
    simulate = base.simulate

    def spy(algorithm, problem, *args, **kwargs):
        run = simulate(algorithm, problem, *args, **kwargs)
        dtypes.append((type(run.x).__module__, str(run.x.dtype)))
        return run

    monkeypatch.setattr(base, "simulate", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        single = FederatedLinearRegression(alpha=0.1, n_clients=5, engine="jax").fit(
            X.astype(np.float32), y)
    numpy_single = FederatedLinearRegression(alpha=0.1, n_clients=5).fit(X.astype(np.float32),
                                                                        y)
    assert dtypes[0][0].startswith("jax") and dtypes[0][1] == "float32"
    assert single.coef_.dtype == np.float32 and single.converged_
    np.testing.assert_allclose(single.coef_, numpy_single.coef_, rtol=0,
                               atol=1e-5 * np.abs(numpy_single.coef_).max())
