"""Problem (global objective, weights, prox-gradient mapping) and the metric functions."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import Problem, fedcanon, simulate, solve_reference
from fedcomp.data import ClientData, breast_cancer
from fedcomp.losses import LeastSquares, Logistic, Softmax
from fedcomp.metrics import evaluate, prox_grad_norm, stationarity_step, support_scores
from fedcomp.regularizers import L1, MCP, Nuclear
from tests.conftest import heterogeneous_data, make_problem


def test_objective_is_the_weighted_sum_of_client_losses():
    data = heterogeneous_data(n_clients=4, d=5, seed=2, labels="real")
    x = np.random.default_rng(0).normal(size=5)
    for weighting in ("uniform", "samples", [1.0, 2.0, 3.0, 4.0]):
        p = Problem(LeastSquares(), L1(0.1), data, weighting=weighting)
        per_client = []
        for i in range(4):
            a, y = data.client_arrays(i)
            per_client.append(0.5 * np.mean((a @ x - y) ** 2))
        expected = float(np.dot(p.weights, per_client)) + 0.1 * np.abs(x).sum()
        assert p.objective(x) == pytest.approx(expected, rel=1e-13)
        assert p.weights.sum() == pytest.approx(1.0)
    assert np.allclose(Problem(LeastSquares(), L1(0.1), data, weighting="samples").weights,
                       data.counts / data.counts.sum())


def test_smooth_gradient_matches_finite_differences():
    p = make_problem("logistic")
    x = np.random.default_rng(1).normal(size=p.param_shape)
    grad = np.asarray(p.smooth_grad(x))
    eps = 1e-6
    fd = [(p.smooth_value(x + eps * e) - p.smooth_value(x - eps * e)) / (2 * eps)
          for e in np.eye(x.size)]
    np.testing.assert_allclose(grad, fd, atol=1e-8)


def test_prox_grad_mapping_vanishes_only_at_the_solution():
    p = make_problem("logistic")
    ref = solve_reference(p)
    assert np.linalg.norm(p.prox_grad_mapping(ref.x, 0.5)) < 1e-9
    assert np.linalg.norm(p.prox_grad_mapping(ref.x + 0.01, 0.5)) > 1e-4


@pytest.mark.parametrize("weighting", ["median", [1.0, -1.0], np.ones(3)])
def test_bad_weighting_is_rejected(weighting):
    data = heterogeneous_data(n_clients=2, d=3)
    with pytest.raises(ValueError, match="weighting"):
        Problem(LeastSquares(), L1(0.1), data, weighting=weighting)


@pytest.mark.parametrize(("weighting", "message"), [
    ([1.0, np.nan], r"weighting\[1\] = nan is not a finite"),
    ([np.inf, 1.0], r"weighting\[0\] = inf is not a finite"),
    ([1.0, -np.inf], r"weighting\[1\] = -inf is not a finite"),
    ([0.0, 0.0], r"weighting sums to 0.0; .* positive finite sum"),
    ([1e308, 1e308], r"weighting sums to inf; .* rescale"),
])
def test_non_finite_weighting_is_rejected_by_name(weighting, message):
    data = heterogeneous_data(n_clients=2, d=3)
    with pytest.raises(ValueError, match=message):
        Problem(LeastSquares(), L1(0.1), data, weighting=weighting)


def test_regularizer_dimension_must_match_the_model():
    pm1 = heterogeneous_data(n_clients=2, d=3)
    data = ClientData(pm1.features, (pm1.targets > 0) * 2.0, pm1.counts)  # class ids 0 and 2
    with pytest.raises(ValueError, match="param_ndim=2"):
        Problem(Softmax(), L1(0.1), data, n_classes=3)
    p = Problem(Softmax(), Nuclear(0.1), data, n_classes=3)
    assert p.param_shape == (3, 3)


@pytest.mark.parametrize("labels, loss, match", [
    ([0.0, 1.0], "logistic", r"Logistic needs labels -1 and \+1, found \[0, 1\]"),
    ([1.0, 2.0], "logistic", r"found \[1, 2\] \(2 distinct\)"),
    ([0.0, 3.0], "softmax", r"Softmax needs class ids 0..2, found \[0, 3\]"),
    ([0.0, 1.5], "softmax", "renumber the classes from 0"),
    ([-1.0, 1.0], "softmax", r"found \[-1, 1\]"),
])
def test_labels_the_loss_is_not_defined_on_are_rejected(labels, loss, match):
    # LIBSVM's 1/2 or 0/1 binary labels once trained a "logistic" model to 3 % accuracy
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(4, 3)) for _ in range(2)]
    targs = [np.array(labels * 2) for _ in range(2)]
    data = ClientData.from_lists(feats, targs)
    with pytest.raises(ValueError, match=match):
        if loss == "logistic":
            Problem(Logistic(), L1(0.1), data)
        else:
            Problem(Softmax(), Nuclear(0.1), data, n_classes=3)


def test_labels_are_checked_on_real_samples_and_the_holdout():
    # padding rows (zeros) are not labels; a holdout label is
    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(3, 2)), rng.normal(size=(1, 2))],
                                 [np.array([1.0, -1.0, 1.0]), np.array([-1.0])])
    assert (np.asarray(data.targets) == 0).any()
    Problem(Logistic(), L1(0.1), data)
    with pytest.raises(ValueError, match=r"found \[-1, 0, 1\]"):
        Problem(Logistic(), L1(0.1), data.with_holdout(np.zeros((2, 2)), np.array([0.0, 1.0])))


def test_labels_are_checked_block_by_block(monkeypatch):
    """The check reads the targets a block of clients at a time (memory-mapped data are
    never copied whole): a bad label in the last block is found, padding never counts."""
    from fedcomp import problem as problem_module

    rng = np.random.default_rng(0)
    sizes = [3, 1, 2, 3, 1]
    targets = [np.where(rng.random(m) < 0.5, -1.0, 1.0) for m in sizes]
    data = ClientData.from_lists([rng.normal(size=(m, 2)) for m in sizes], targets)
    monkeypatch.setattr(problem_module, "LABEL_BLOCK_VALUES", 3)  # one client per block
    Problem(Logistic(), L1(0.1), data)
    targets[-1] = np.array([2.0])
    bad = ClientData.from_lists([rng.normal(size=(m, 2)) for m in sizes], targets)
    with pytest.raises(ValueError, match=r"found \[-1, 1, 2\]"):
        Problem(Logistic(), L1(0.1), bad)


def test_fingerprint_changes_with_everything_that_matters():
    data = heterogeneous_data(n_clients=3, d=4, labels="real")
    base = Problem(LeastSquares(), L1(0.1), data).fingerprint()
    assert Problem(LeastSquares(), L1(0.1), data).fingerprint() == base
    assert Problem(LeastSquares(), L1(0.2), data).fingerprint() != base
    assert Problem(LeastSquares(l2=0.1), L1(0.1), data).fingerprint() != base
    assert Problem(LeastSquares(), L1(0.1), data, weighting="uniform").fingerprint() != base
    other = heterogeneous_data(n_clients=3, d=4, labels="real", seed=9)
    assert Problem(LeastSquares(), L1(0.1), other).fingerprint() != base


def test_metrics():
    data = heterogeneous_data(n_clients=3, d=4, labels="real")
    truth = np.array([1.0, 0.0, -2.0, 0.0])
    p = Problem(LeastSquares(), L1(0.1), data, ground_truth=truth)
    ref = solve_reference(p)
    x = np.array([0.5, 0.0, 0.0, 3.0])
    row = evaluate(p, x, ["objective", "optimality", "suboptimality", "nnz", "support",
                          "prox_grad_norm"], reference=ref)
    assert row["nnz"] == 2
    assert row["optimality"] == pytest.approx(np.linalg.norm(x - ref.x) / np.linalg.norm(ref.x))
    assert row["suboptimality"] == pytest.approx(p.objective(x) - ref.objective)
    assert row["suboptimality"] > 0 and row["prox_grad_norm"] > 0
    assert row["support_precision"] == 0.5 and row["support_recall"] == 0.5
    assert row["support_f1"] == pytest.approx(0.5)
    assert support_scores(truth, truth) == {"support_precision": 1.0, "support_recall": 1.0,
                                            "support_f1": 1.0}
    nan_row = evaluate(p, x, ["optimality"])  # no reference: NaN, not an error
    assert np.isnan(nan_row["optimality"])


def test_optimality_is_the_absolute_error_when_the_solution_is_zero():
    # α ≥ ‖∇f(0)‖_∞ = 0.1: x* = 0, where ‖x − x*‖/‖x*‖ has no value (it gave 1e301, inf)
    data = ClientData.from_lists([np.eye(2)], [np.array([0.1, -0.05])])
    p = Problem(LeastSquares(), L1(1.0), data)
    ref = solve_reference(p, use_cache=False)
    assert not ref.x.any()
    for x in (np.array([1e-6, 0.0]), np.array([3.0, -4.0])):
        row = evaluate(p, x, ["optimality"], reference=ref)
        assert row["optimality"] == pytest.approx(np.linalg.norm(x), rel=1e-12)
    assert evaluate(p, ref.x, ["optimality"], reference=ref)["optimality"] == 0.0


def test_prox_grad_norm_caps_the_step_for_weakly_convex_penalties():
    # unit-norm logistic has L ≈ 0.1, so 1/L ≈ 9.6 lies beyond MCP's prox bound 1/ρ = γ = 3:
    # s = 1/L made the metric raise; the default step is now min(1/L, 1/(2ρ)) = 1.5
    pytest.importorskip("sklearn")
    p = Problem(Logistic(), MCP(0.01, 3.0), breast_cancer(10, unit_norm=True))
    assert 1.0 / p.smoothness() > 3.0
    assert stationarity_step(p) == 1.5
    x = np.random.default_rng(0).normal(size=p.param_shape)
    with pytest.raises(ValueError, match="step < gamma"):
        prox_grad_norm(p, x, step=1.0 / p.smoothness())
    expected = np.linalg.norm(x - p.prox(x - 1.5 * np.asarray(p.smooth_grad(x)), 1.5)) / 1.5
    assert prox_grad_norm(p, x) == pytest.approx(expected, rel=1e-12)

    run = simulate(fedcanon(client_lr=0.5, local_steps=5, server_lr=1.0), p, rounds=300,
                   metrics=["prox_grad_norm"], eval_every=50)
    norms = [row["prox_grad_norm"] for row in run.history]
    assert np.all(np.isfinite(norms)) and norms[0] > 0.1
    assert norms[-1] < norms[0] / 10  # FedCanon approaches a stationary point


def test_prox_grad_norm_keeps_one_over_l_for_convex_penalties():
    p = make_problem("logistic")
    x = np.random.default_rng(3).normal(size=p.param_shape)
    s = 1.0 / p.smoothness()
    assert stationarity_step(p) == s
    assert prox_grad_norm(p, x) == pytest.approx(np.linalg.norm(p.prox_grad_mapping(x, s)))


def test_a_list_of_client_pairs_is_data_and_anything_else_names_from_lists():
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(size=(n, 3)), rng.normal(size=n)) for n in (4, 6)]
    p = Problem(LeastSquares(), L1(0.1), pairs)
    want = ClientData.from_lists([x for x, _ in pairs], [y for _, y in pairs])
    np.testing.assert_array_equal(p.data.features, want.features)
    # the default weighting is by samples, as the estimators': 4/10 and 6/10
    np.testing.assert_allclose(p.weights, [0.4, 0.6])
    with pytest.raises(TypeError, match=r"got ndarray\); build one with ClientData.from_lists"):
        Problem(LeastSquares(), L1(0.1), pairs[0][0])


def test_reprs_fit_on_a_line():
    data = heterogeneous_data(n_clients=3, d=4, labels="real")
    text = repr(Problem(LeastSquares(), L1(0.1), data, weighting="uniform"))
    assert text == ("Problem(LeastSquares(l2=0.0), L1(alpha=0.1, param_ndim=1), ClientData("
                    f"n_clients=3, samples={int(data.counts.sum())}, feature_shape=(4,), "
                    "dtype=float64), weighting='uniform')")
