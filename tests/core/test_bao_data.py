"""Fast-FedDA's statistical-recovery data (Examples 3.1/3.2) and the recovery metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedcomp.config
import fedcomp.experiments
from fedcomp.data import (
    DATASET_DESCRIPTIONS,
    DATASETS,
    ClientData,
    bao_lowrank_matrix,
    bao_sparse_regression,
    lowrank_truth,
    sparse_regression_truth,
)
from fedcomp.data._bao import _ar1
from fedcomp.losses import LeastSquares, TraceRegression
from fedcomp.metrics import (
    DESCRIPTIONS,
    METRICS,
    evaluate,
    l1_error,
    l2_error,
    operator_error,
    rank,
    support_f1,
    training_loss,
)
from fedcomp.problem import Problem
from fedcomp.regularizers import L1, Nuclear

NEW_METRICS = ("l2_error", "l1_error", "support_f1", "operator_error", "rank", "training_loss")


# --- generators ---------------------------------------------------------------------------
def test_truths():
    assert sparse_regression_truth(6, 2).tolist() == [1, 1, 0, 0, 0, 0]
    np.testing.assert_array_equal(lowrank_truth(4, 3), np.diag([1.0, 1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match="sparsity"):
        sparse_regression_truth(3, 4)
    with pytest.raises(ValueError, match="rank"):
        lowrank_truth(3, 4)


def test_sparse_shapes_dtypes_and_seed():
    data = bao_sparse_regression(n_clients=3, samples_per_client=10, n_features=20, sparsity=5)
    assert isinstance(data, ClientData)
    assert data.features.shape == (3, 10, 20) and data.targets.shape == (3, 10)
    assert data.features.dtype == np.float64 and data.targets.dtype == np.float64
    assert data.counts.tolist() == [10, 10, 10]
    again = bao_sparse_regression(n_clients=3, samples_per_client=10, n_features=20, sparsity=5)
    np.testing.assert_array_equal(data.features, again.features)
    np.testing.assert_array_equal(data.targets, again.targets)
    other = bao_sparse_regression(n_clients=3, samples_per_client=10, n_features=20, sparsity=5,
                                  seed=1)
    assert not np.allclose(data.features, other.features)
    single = bao_sparse_regression(n_clients=2, samples_per_client=4, n_features=8, sparsity=2,
                                   dtype=np.float32)
    assert single.features.dtype == np.float32 and single.targets.dtype == np.float32


def test_lowrank_shapes_dtypes_and_seed():
    data = bao_lowrank_matrix(n_clients=3, samples_per_client=7, size=5, rank=2)
    assert data.features.shape == (3, 7, 5, 5) and data.targets.shape == (3, 7)
    assert data.feature_shape == (5, 5) and data.features.dtype == np.float64
    again = bao_lowrank_matrix(n_clients=3, samples_per_client=7, size=5, rank=2)
    np.testing.assert_array_equal(data.features, again.features)
    np.testing.assert_array_equal(data.targets, again.targets)
    single = bao_lowrank_matrix(n_clients=2, samples_per_client=3, size=3, rank=1,
                                dtype=np.float32)
    assert single.features.dtype == np.float32 and single.targets.dtype == np.float32


def test_ar1_covariance():
    p = 8
    z = _ar1(np.random.default_rng(0).standard_normal((200_000, p)))
    lags = np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    # entries of a sample covariance of 2e5 unit-variance draws have sd <≈ 0.004
    np.testing.assert_allclose(np.cov(z, rowvar=False), 0.5 ** lags, atol=0.02)


def test_sparse_covariance_within_clients():
    # z = x − δ_k: pooled within-client covariance ≈ Σ (client means removed)
    data = bao_sparse_regression(n_clients=4, samples_per_client=20_000, n_features=6,
                                 sparsity=2, seed=3)
    z = data.features - data.features.mean(axis=1, keepdims=True)
    cov = np.einsum("kmi,kmj->ij", z, z) / (4 * (20_000 - 1))
    lags = np.abs(np.subtract.outer(np.arange(6), np.arange(6)))
    np.testing.assert_allclose(cov, 0.5 ** lags, atol=0.03)


def test_heterogeneity():
    data = bao_sparse_regression(n_clients=4, samples_per_client=2000, n_features=10,
                                 sparsity=3)
    means = data.features.mean(axis=1)                         # ≈ δ_k, sd of error ≈ 0.02
    spread = np.linalg.norm(means[:, None] - means[None], axis=-1)[np.triu_indices(4, 1)]
    assert spread.min() > 1.0                                  # ‖δ_k − δ_l‖ ≈ √20 ≈ 4.5

    mat = bao_lowrank_matrix(n_clients=3, samples_per_client=2000, size=4, rank=2)
    z_hat = mat.features.mean(axis=1)                          # ≈ Z_k, one per client
    for k in range(3):
        for j in range(k + 1, 3):
            assert np.linalg.norm(z_hat[k] - z_hat[j]) > 1.0   # ≈ √32 ≈ 5.7
    # residual A = X − Z_k has unit-variance entries
    resid = mat.features - z_hat[:, None]
    assert abs(resid.var() - 1.0) < 0.05


def test_targets_follow_truth():
    data = bao_sparse_regression(n_clients=4, samples_per_client=200, n_features=10, sparsity=4,
                                 noise=0.5, seed=2)
    x = data.features.reshape(-1, 10)
    y = data.targets.ravel()
    w_hat = np.linalg.lstsq(x, y, rcond=None)[0]
    np.testing.assert_allclose(w_hat, sparse_regression_truth(10, 4), atol=0.1)
    assert abs(np.std(y - x @ sparse_regression_truth(10, 4)) - 0.5) < 0.05
    exact = bao_sparse_regression(n_clients=2, samples_per_client=5, n_features=6, sparsity=3,
                                  noise=0.0)
    np.testing.assert_allclose(exact.targets, exact.features[..., :3].sum(-1))

    mat = bao_lowrank_matrix(n_clients=3, samples_per_client=300, size=4, rank=2, noise=0.5)
    xm = mat.features.reshape(-1, 16)
    w_mat = np.linalg.lstsq(xm, mat.targets.ravel(), rcond=None)[0].reshape(4, 4)
    np.testing.assert_allclose(w_mat, lowrank_truth(4, 2), atol=0.15)
    exact_mat = bao_lowrank_matrix(n_clients=2, samples_per_client=5, size=3, rank=2, noise=0)
    np.testing.assert_allclose(exact_mat.targets,
                               exact_mat.features[..., 0, 0] + exact_mat.features[..., 1, 1])


def test_generator_validation():
    with pytest.raises(ValueError, match="positive"):
        bao_sparse_regression(n_clients=0)
    with pytest.raises(ValueError, match="noise"):
        bao_lowrank_matrix(n_clients=1, samples_per_client=2, size=2, rank=1, noise=-1.0)


def test_registered():
    for name in ("bao_sparse_regression", "bao_lowrank_matrix"):
        assert name in DATASETS and name in DATASET_DESCRIPTIONS
    assert DATASETS["bao_sparse_regression"] is bao_sparse_regression
    assert "synthetic_fedprox" in DATASETS
    for name in NEW_METRICS:
        assert name in METRICS and name in DESCRIPTIONS


def test_usable_from_config():
    cfg = {
        "name": "bao", "rounds": 1, "metrics": ["objective", *NEW_METRICS],
        "data": {"generator": "bao_sparse_regression", "n_features": 20, "sparsity": 5,
                 "n_clients": 3, "samples_per_client": 10},
        "problem": {"loss": "least_squares"},
        "regularizer": {"name": "l1", "alpha": 0.03125},
        "algorithms": [{"name": "fedmid"}],
    }
    built = fedcomp.experiments.build_problem(fedcomp.experiments.resolve(cfg).base)
    assert built.data.features.shape == (3, 10, 20)
    np.testing.assert_array_equal(built.data.features, bao_sparse_regression(
        n_clients=3, samples_per_client=10, n_features=20, sparsity=5).features)
    problem = Problem(built.loss, built.regularizer, built.data,
                      ground_truth=sparse_regression_truth(20, 5))
    row = evaluate(problem, sparse_regression_truth(20, 5), NEW_METRICS)
    assert row["l2_error"] == 0 and row["l1_error"] == 0 and row["support_f1"] == 1
    assert math.isnan(row["operator_error"]) and math.isnan(row["rank"])
    assert row["training_loss"] > 0  # noise only: ≈ ½ σ² = 0.5
    with pytest.raises(fedcomp.config.ConfigError, match="data"):
        fedcomp.experiments.validate({**cfg, "data": {"generator": "bao_lowrank_matrix",
                                                      "n_features": 3}})


# --- metrics ------------------------------------------------------------------------------
def _vector_problem(truth=None):
    data = ClientData.from_lists([np.eye(3), 2 * np.eye(3)], [np.ones(3), np.ones(3)])
    return Problem(LeastSquares(), L1(0.1), data, ground_truth=truth)


def _matrix_problem(truth=None):
    feats = np.random.default_rng(0).standard_normal((2, 4, 2, 3))
    data = ClientData(feats, np.ones((2, 4)), np.array([4, 4]))
    return Problem(TraceRegression(), Nuclear(0.1), data, ground_truth=truth)


def test_vector_errors():
    problem = _vector_problem(np.array([1.0, 0.0, -2.0]))
    x = np.array([2.0, -0.5, 0.0])                  # x − w* = (1, −0.5, 2)
    assert l2_error(problem, x) == pytest.approx(math.sqrt(1 + 0.25 + 4))
    assert l1_error(problem, x) == pytest.approx(3.5)
    assert math.isnan(operator_error(problem, x)) and math.isnan(rank(problem, x))
    bare = _vector_problem()
    for fn in (l2_error, l1_error, support_f1, operator_error):
        assert math.isnan(fn(bare, x))


def test_support_f1_threshold():
    problem = _vector_problem(np.array([1.0, 1.0, 0.0]))
    # |0.005| is below the 0.01 threshold: support {0}, precision 1, recall 1/2, F1 2/3
    assert support_f1(problem, np.array([0.3, 0.005, 0.0])) == pytest.approx(2 / 3)
    # 0.02 counts: support {0, 1} exact
    assert support_f1(problem, np.array([0.3, 0.02, -0.009])) == pytest.approx(1.0)
    # a false positive at −0.02: precision 2/3, recall 1, F1 0.8
    assert support_f1(problem, np.array([0.3, 0.02, -0.02])) == pytest.approx(0.8)
    assert support_f1(problem, np.zeros(3)) == 0.0


def test_matrix_errors_and_rank():
    truth = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    problem = _matrix_problem(truth)
    x = np.array([[1.0, 0.0, 0.0], [0.0, 3.0, 0.0]])  # x − W* = diag(0, 3): spectral 3
    assert operator_error(problem, x) == pytest.approx(3.0)
    assert l2_error(problem, x) == pytest.approx(3.0)
    assert l1_error(problem, x) == pytest.approx(3.0)
    x2 = np.array([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0]])  # diff diag(2, 4): Fro √20, op 4
    assert operator_error(problem, x2) == pytest.approx(4.0)
    assert l2_error(problem, x2) == pytest.approx(math.sqrt(20))
    assert rank(problem, x2) == 2
    assert rank(problem, np.array([[1.0, 0.0, 0.0], [0.0, 2e-5, 0.0]])) == 1  # < 1e-4 × 1
    assert rank(problem, np.array([[1.0, 0.0, 0.0], [0.0, 2e-4, 0.0]])) == 2
    assert rank(problem, np.zeros((2, 3))) == 0
    assert rank(_matrix_problem(), x2) == 2                 # needs no ground truth
    assert math.isnan(operator_error(_matrix_problem(), x2))


def test_training_loss():
    problem = _vector_problem(np.zeros(3))
    # client 1: ½·mean((1 − 0)²) = ½; client 2 likewise; regularizer excluded
    assert training_loss(problem, np.zeros(3)) == pytest.approx(0.5)
    x = np.array([1.0, 1.0, 1.0])  # client 1 exact, client 2 residual −1: ½; uniform mean ¼
    assert training_loss(problem, x) == pytest.approx(0.25)
    assert training_loss(problem, x) == pytest.approx(problem.smooth_value(x))


def test_metrics_accept_torch():
    torch = pytest.importorskip("torch")
    problem = _vector_problem(np.array([1.0, 1.0, 0.0]))
    x = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    assert l2_error(problem, x) == pytest.approx(math.sqrt(1.25))
    assert support_f1(problem, x) == pytest.approx(0.5)
    assert training_loss(problem, x) == pytest.approx(training_loss(problem, x.numpy()))
    mat = _matrix_problem(np.zeros((2, 3)))
    assert rank(mat, torch.ones(2, 3, dtype=torch.float64)) == 1
