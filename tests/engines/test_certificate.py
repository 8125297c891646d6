"""A convergence claim that scale cannot fool, and divergence wherever a model lives.

A stopping measure is small at a model that runs away (the relative ones divide by a norm
that grows faster than the step; a saturated logistic loss has a vanishing gradient), so
"converged" also needs the objective's certificate (fedcomp.runtime._stopping.Certificate):
finite, not above its start, not rising. An objective that runs away is a divergence. The
clients' own models (Ditto's) are checked as the global one is.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from fedcomp import ClientData, Problem, RunOptions, simulate
from fedcomp.algorithms import ditto, fedmid, za1
from fedcomp.losses import Logistic
from fedcomp.regularizers import L1
from fedcomp.runtime import NonFiniteError
from fedcomp.runtime._stopping import RUNAWAY, Certificate, RunView, StopRule
from fedcomp.sklearn import (
    FederatedEstimator,
    FederatedLinearRegression,
    FederatedLogisticRegression,
)
from fedcomp.toy import tiny_problem
from tests.conftest import make_problem

STOP_MEASURES = ["relative_prox_step", "prox_grad_norm", "relative_change"]


def _scaled_breast_cancer(scale: float = 1e3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardized breast-cancer features times ``scale``, labels ±1, 5 clients (the
    issue's case: a step of 100 runs away on them)."""
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X) * scale, np.where(y == 1, 1.0, -1.0), \
        np.arange(len(y)) % 5


def _runaway_problem(scale: float = 1e3) -> Problem:
    X, y, clients = _scaled_breast_cancer(scale)
    data = ClientData.from_lists([X[clients == i] for i in range(5)],
                                 [y[clients == i] for i in range(5)])
    return Problem(Logistic(), L1(alpha=0.01), data)


# --- the certificate on its own ----------------------------------------------------------
def _observed(*values: float) -> Certificate:
    certificate = Certificate()
    for value in values:
        certificate.observe(value)
    return certificate


def test_a_settled_objective_below_its_start_certifies():
    assert _observed(0.69, 0.2, 0.1, 0.1).shortfall() == ""
    assert _observed(0.69).shortfall() == ""  # a model that starts optimal
    # rounding, not progress: a rise of 1e-12 relative is allowed
    assert _observed(0.69, 0.1, 0.1 * (1 + 1e-12)).shortfall() == ""


@pytest.mark.parametrize("values, words", [
    ((0.69, 5.0, 4.0), "above its value at the first row"),
    ((0.69, 0.1, 0.2), "above its value at the row before"),
    ((0.69, 0.1, float("inf")), "the objective is inf"),
])
def test_an_objective_above_its_start_rising_or_infinite_does_not_certify(values, words):
    assert words in _observed(*values).shortfall()


def test_an_objective_far_above_its_start_or_nan_has_run_away():
    assert "ran away" in _observed(0.69, 0.69 * (RUNAWAY + 2)).runaway()
    assert _observed(0.69, 0.69 * (RUNAWAY - 1)).runaway() == ""  # high, not run away
    assert "NaN" in _observed(0.69, float("nan")).runaway()
    # an infeasible average (a constraint's indicator) is not certified, not a divergence
    assert _observed(0.69, float("inf")).runaway() == ""
    # a start of zero: the floor keeps rounding above it from counting as a runaway
    assert _observed(0.0, 1e-14).runaway() == ""


def test_a_measure_below_tol_with_a_rising_objective_is_not_converged_and_warns():
    p = make_problem("least_squares")
    rule = StopRule(p, tol=1.0, stop="relative_change", callbacks=None,
                    on_divergence="return")
    x0 = np.zeros(p.param_shape)
    far = np.full(p.param_shape, 3.0)  # F(far) > F(0): above the start, far from run away
    assert p.objective(x0) < p.objective(far) < p.objective(x0) * RUNAWAY
    for round_, model in enumerate([x0, far]):
        row = {"round": round_, **rule.columns(model)}
        stop = rule.after_row(RunView(round_, row, model, None, None, None, [row], "toy"))
        assert not stop and rule.status == "completed"
    assert rule.last_value <= 1.0  # ‖far − 0‖ / ‖far‖ = 1: the measure alone says converged
    with pytest.warns(ConvergenceWarning, match=r"relative_change = 1 <= tol = 1 .*above "
                                                r"its value at the first row.*lower the step"):
        rule.finish("toy", 1)


# --- the runaway case, as the issue found it ---------------------------------------------
@pytest.mark.parametrize("stop", STOP_MEASURES)
def test_a_run_whose_model_runs_away_is_diverged_on_every_stop_measure(stop):
    p = _runaway_problem()
    with pytest.warns(RuntimeWarning, match=r"za1: the model ran away .* in round 10; .*"
                                            r"smaller step.*status 'diverged'"):
        run = simulate(za1(client_lr=100), p, 200, tol=1e-8, eval_every=10, metrics=["objective"],
                       options=RunOptions(stop=stop))
    assert run.status == "diverged" and run.n_rounds == 10
    assert run.history[-1]["objective"] > 1e4  # the optimum is about 0.13
    with pytest.raises(NonFiniteError, match="ran away"):
        simulate(za1(client_lr=100), p, 200, tol=1e-8, eval_every=10, metrics=[],
                 options=RunOptions(stop=stop, on_divergence="raise"))


def test_a_sound_step_on_the_same_data_is_not_called_diverged():
    p = _runaway_problem()
    with pytest.warns(ConvergenceWarning, match="> tol"):  # slow (ill-conditioned), sound
        run = simulate(za1(client_lr=1.0 / p.smoothness(), local_steps=1), p, 200,
                       tol=1e-8, eval_every=10, metrics=["objective"])
    assert run.status == "completed"
    assert run.history[-1]["objective"] < run.history[0]["objective"]


@pytest.mark.parametrize("make", [
    lambda: FederatedLogisticRegression(alpha=0.01, client_lr=100),
    lambda: FederatedEstimator(loss="logistic", alpha=0.01, client_lr=100),
    lambda: FederatedLinearRegression(alpha=0.01, client_lr=100),
], ids=["logistic", "estimator", "linear"])
def test_every_estimator_whose_model_runs_away_is_not_converged_and_warns(make):
    X, y, clients = _scaled_breast_cancer()
    model = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(X, y, clients=clients)
        except NonFiniteError as error:  # nothing finite to keep: one error that says so
            assert "non-finite" in str(error), error
            return
    assert model.converged_ is False
    words = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(words) == 1 and "did not converge" in words[0], words


# --- personal models ---------------------------------------------------------------------
def _on(backend: str, problem: Problem) -> Problem:
    if backend == "numpy":
        return problem
    if backend == "torch":
        torch = pytest.importorskip("torch")
        like = torch.zeros(0, dtype=torch.float64)
    else:
        pytest.importorskip("jax")
        from fedcomp.runtime import jax_like

        like = jax_like()
    return Problem(problem.loss, problem.regularizer, problem.data.to(like))


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_a_ditto_run_whose_personal_models_diverge_says_so_and_names_the_client(backend):
    p = _on(backend, tiny_problem())
    algorithm = ditto(fedmid(client_lr=0.05, local_steps=2), lam=0.1, personal_lr=1e6)
    words = (r"client \d+'s personal model \(\d of 3 clients\) (diverged|became non-finite) "
             r".*in round 5 .*personal_lr")
    with pytest.warns(RuntimeWarning, match=words):
        run = simulate(algorithm, p, 20, eval_every=5)
    assert run.status == "diverged" and run.n_rounds == 5
    with pytest.raises(NonFiniteError, match="personal model"):
        simulate(algorithm, p, 20, eval_every=5, options=RunOptions(on_divergence="raise"))
    # the same wrapper with a sound personal step runs its budget, as before
    sound = simulate(ditto(fedmid(client_lr=0.05, local_steps=2), lam=0.1), p, 20,
                     eval_every=5)
    assert sound.status == "completed"
    assert np.all(np.isfinite(np.asarray(sound.client_states.personal)))


def test_an_experiment_whose_personal_models_diverge_counts_them_and_exits_nonzero(tmp_path,
                                                                                  capsys):
    from fedcomp.cli import main

    code = main(["run", "personal_sparse", "--seeds", "0:1", "--set", "rounds=10",
                 "--set", "eval_every=5", "--set",
                 'algorithms.*.personalization={name="ditto", lam=0.01, personal_steps=5, '
                 'personal_lr=1e6}', "--out", str(tmp_path), "--quiet"])
    out = capsys.readouterr()
    assert code != 0
    assert "personal model" in out.err
    # every setting diverged, and the summary table says so (its last column)
    rows = [line for line in out.out.splitlines() if line.startswith("| ditto_")]
    assert len(rows) == 4 and all(row.rstrip(" |").endswith("1") for row in rows), rows


@pytest.mark.parametrize("max_norm", ["x", True, [1.0]])
def test_max_norm_that_is_not_a_number_is_one_error_naming_it(max_norm):
    with pytest.raises(TypeError, match=r"max_norm must be a positive number or None \(got "):
        simulate(za1(client_lr=0.1), tiny_problem(), 2, options=RunOptions(max_norm=max_norm))
