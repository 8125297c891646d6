"""The partitions users ask for: k classes per client, feature-noise skew, mixed label and
quantity skew, and Flower Datasets' partitioners run over fedcomp's samples (the same
client index sets as flwr-datasets gives on its own)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp.config import ConfigError
from fedcomp.data import (
    ClientData,
    add_feature_noise,
    digits,
    federate,
    partition_classes,
    partition_dirichlet,
    partition_mixed,
)


def _labels(n_classes: int = 10, per_class: int = 60, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(n_classes), per_class))


def _is_partition(parts, n):
    everything = np.concatenate(parts)
    return len(everything) == n and len(np.unique(everything)) == n


@pytest.mark.parametrize(("n_clients", "k"), [(10, 1), (10, 2), (4, 3), (3, 4), (25, 2),
                                              (5, 10)])
def test_every_client_holds_exactly_k_classes(n_clients, k):
    labels = _labels()
    for seed in range(3):
        parts = partition_classes(labels, n_clients, classes_per_client=k, seed=seed)
        assert _is_partition(parts, len(labels))  # every sample, once
        assert [len(np.unique(labels[p])) for p in parts] == [k] * n_clients
        # each class is split evenly among the clients that hold it
        for c in range(10):
            sizes = [int((labels[p] == c).sum()) for p in parts if (labels[p] == c).any()]
            assert max(sizes) - min(sizes) <= 1


def test_classes_per_client_refuses_what_cannot_hold_every_class():
    with pytest.raises(ValueError, match="3 clients x 2 classes cannot hold all 10 classes; "
                                         "raise classes_per_client to 4"):
        partition_classes(_labels(), 3, classes_per_client=2)
    with pytest.raises(ValueError, match=r"classes_per_client must be in \[1, 10\]"):
        partition_classes(_labels(), 3, classes_per_client=11)
    with pytest.raises(ValueError, match="has 2 sample\\(s\\) for"):
        partition_classes(np.repeat(np.arange(2), 2), 4, classes_per_client=2)


def test_feature_noise_has_the_specified_variance_per_client():
    n, m, sigma = 5, 4000, 0.8
    data = ClientData.from_lists([np.full((m, 3), 2.0)] * n, [np.zeros(m)] * n)
    noisy = add_feature_noise(data, sigma, seed=3)
    for i in range(n):
        expected = sigma * i / (n - 1)
        drawn = np.asarray(noisy.features[i]) - 2.0
        assert drawn.std() == pytest.approx(expected, rel=0.05, abs=1e-12)
        assert abs(drawn.mean()) < 4 * expected / np.sqrt(drawn.size) + 1e-12
    again = add_feature_noise(data, sigma, seed=3)
    np.testing.assert_array_equal(again.features, noisy.features)  # the seed fixes it
    assert not np.array_equal(add_feature_noise(data, sigma, seed=4).features, noisy.features)


def test_feature_noise_leaves_padding_and_targets_alone():
    data = ClientData.from_lists([np.ones((3, 2)), np.ones((5, 2))],
                                 [np.zeros(3), np.ones(5)])
    noisy = add_feature_noise(data, 1.0, seed=0)
    np.testing.assert_array_equal(noisy.features[1, 5:], 0.0)
    np.testing.assert_array_equal(noisy.features[0], data.features[0])  # client 0: none
    np.testing.assert_array_equal(noisy.targets, data.targets)
    with pytest.raises(ValueError, match="feature_noise must be a finite number >= 0"):
        add_feature_noise(data, -1.0)


def test_feature_noise_on_any_scheme_through_the_partition_spec():
    plain = digits(n_clients=4, partition={"name": "dirichlet", "concentration": 1.0})
    noisy = digits(n_clients=4, partition={"name": "dirichlet", "concentration": 1.0,
                                           "feature_noise": 0.5})
    np.testing.assert_array_equal(plain.targets, noisy.targets)  # the same split
    np.testing.assert_array_equal(plain.features[0], noisy.features[0])
    assert not np.allclose(plain.features[3], noisy.features[3])


def test_a_config_checks_feature_noise():
    from fedcomp.experiments import validate

    config = {"name": "x", "rounds": 2, "data": {"generator": "breast_cancer", "n_clients": 3,
                                                 "partition": {"name": "iid",
                                                               "feature_noise": "lots"}},
              "problem": {"loss": "logistic"}, "regularizer": {"name": "l1", "alpha": 0.01},
              "algorithms": [{"name": "fedmid", "client_lr": 0.1}]}
    with pytest.raises(ConfigError, match="feature_noise must be a finite number >= 0"):
        validate(config)
    config["data"]["partition"]["feature_noise"] = 0.1
    validate(config)


def test_mixed_skew_combines_label_and_quantity_skew():
    labels = _labels(per_class=200)
    sizes, mixes = [], []
    for seed in range(20):
        parts = partition_mixed(labels, 8, concentration=0.3, quantity_concentration=0.3,
                                seed=seed)
        assert _is_partition(parts, len(labels))
        sizes.append(np.std([len(p) for p in parts]) / np.mean([len(p) for p in parts]))
        mixes.append(np.mean([np.bincount(labels[p], minlength=10).max() / len(p)
                              for p in parts]))
    label_only = [partition_dirichlet(labels, 8, concentration=0.3, seed=s) for s in range(20)]
    label_sizes = [np.std([len(p) for p in parts]) / np.mean([len(p) for p in parts])
                   for parts in label_only]
    # sizes spread more than under label skew alone, and the class mixes stay skewed
    assert np.median(sizes) > 1.5 * np.median(label_sizes)
    assert np.median(mixes) > 0.4  # a uniform mix would give about 0.1
    # a near-infinite quantity concentration is the label-skew scheme's size spread again
    even = [partition_mixed(labels, 8, 0.3, 1e6, seed=s) for s in range(20)]
    assert np.median([np.std([len(p) for p in parts]) / np.mean([len(p) for p in parts])
                      for parts in even]) < 1.3 * np.median(label_sizes)


@pytest.mark.parametrize(("name", "options"), [
    ("DirichletPartitioner", {"alpha": 0.5, "min_partition_size": 5}),
    ("PathologicalPartitioner", {"num_classes_per_partition": 2}),
    ("ShardPartitioner", {"num_shards_per_partition": 2}),
    ("IidPartitioner", {}),
    ("LinearPartitioner", {}),
])
def test_a_flower_partitioner_gives_the_same_clients_in_both_tools(name, options):
    flwr_datasets = pytest.importorskip("flwr_datasets")
    import datasets

    labels = _labels(per_class=30, seed=1)
    data = federate(np.arange(len(labels), dtype=float)[:, None], labels, 6,
                    {"name": "flwr", "partitioner": name, **options}, seed=7)
    # flwr-datasets on its own: its own table (another column order and an id column),
    # its own partitioner object with the same arguments
    cls = getattr(flwr_datasets.partitioner, name)
    params = {"num_partitions": 6, **options}
    if "seed" in cls.__init__.__code__.co_varnames:
        params["seed"] = 7
    if "partition_by" in cls.__init__.__code__.co_varnames:
        params["partition_by"] = "label"
    theirs = cls(**params)
    theirs.dataset = datasets.Dataset.from_dict({"id": list(range(len(labels))),
                                                 "label": labels.tolist()})
    for i in range(6):
        expected = np.sort(np.asarray(theirs.load_partition(i)["id"]))
        # fedcomp's client i holds exactly those samples (the feature is the sample's id)
        ours = np.sort(np.asarray(data.features[i, :data.counts[i], 0]).astype(int))
        np.testing.assert_array_equal(ours, expected)


def test_an_unknown_flower_partitioner_is_named():
    pytest.importorskip("flwr_datasets")
    with pytest.raises(ValueError, match="unknown partitioner 'Dirichlet'; flwr_datasets"):
        federate(np.zeros((20, 1)), _labels(2, 10), 2, {"name": "flwr",
                                                         "partitioner": "Dirichlet"})
    with pytest.raises(ValueError, match="DirichletPartitioner takes no \\['beta'\\]"):
        federate(np.zeros((20, 1)), _labels(2, 10), 2, {"name": "flwr", "beta": 1.0,
                                                         "partitioner": "DirichletPartitioner"})
