"""Fed-HT's Simulation I: its data generator and the verdict rule, table-driven."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp.data import DATASETS, tong_sparse_regression
from fedcomp.experiments.claims import fedht_simulation


def test_the_generator_is_seeded_heterogeneous_and_registered():
    a = tong_sparse_regression(n_clients=4, samples_per_client=30, n_features=50,
                               sparsity=5, seed=3)
    b = tong_sparse_regression(n_clients=4, samples_per_client=30, n_features=50,
                               sparsity=5, seed=3)
    assert np.array_equal(a.features, b.features) and np.array_equal(a.targets, b.targets)
    means = a.features.mean(axis=1)  # each client's features are shifted by its own v_i
    assert np.min(np.linalg.norm(means[:, None] - means[None], axis=-1)
                  + np.eye(4) * 1e9) > 1.0
    # variance decays along the coordinates: the last column's is far below the first's
    spread = a.features.var(axis=1).mean(axis=0)
    assert spread[-1] < 0.2 * spread[0]
    assert "tong_sparse_regression" in DATASETS


def finals(**objectives):
    return {(label, "full"): {"objective": value} for label, value in objectives.items()}


@pytest.mark.parametrize("objectives, level", [
    ({"fed_ht": 5.0, "fediter_ht": 6.0, "distributed_iht": 8.0}, "reproduced"),
    ({"fed_ht": 9.0, "fediter_ht": 6.0, "distributed_iht": 8.0}, "partly"),
    ({"fed_ht": 9.0, "fediter_ht": 10.0, "distributed_iht": 8.0}, "not reproduced"),
    # a diverged baseline counts as beaten
    ({"fed_ht": 5.0, "fediter_ht": 6.0, "distributed_iht": float("inf")}, "reproduced"),
])
def test_verdict_rule(objectives, level):
    verdict, _ = fedht_simulation.verdict(finals(**objectives))
    assert verdict.split(" (")[0] == level, verdict
