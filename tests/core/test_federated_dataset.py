"""A Flower ``FederatedDataset`` or a partitioned ``datasets.Dataset`` becomes ClientData
(issue 46): the same clients as flwr-datasets' own partition, image and tabular columns
shaped as fedcomp's loaders shape them, and one error naming each bad input."""

from __future__ import annotations

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")
flwr_datasets = pytest.importorskip("flwr_datasets")
pytest.importorskip("PIL")

from flwr_datasets.partitioner import DirichletPartitioner, IidPartitioner  # noqa: E402

from fedcomp.data import from_federated_dataset  # noqa: E402

N = 40
DIRICHLET = {"num_partitions": 3, "partition_by": "label", "alpha": 0.5, "seed": 4,
             "min_partition_size": 2}


def _images() -> datasets.Dataset:
    """40 RGB 5 x 4 images of 3 classes, with a tabular column beside them."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(N, 5, 4, 3), dtype=np.uint8)
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(num_classes=3),
                                  "age": datasets.Value("float32")})
    return datasets.Dataset.from_dict({"img": list(pixels), "label": rng.integers(0, 3, N),
                                       "age": rng.normal(size=N)}, features=features)


def _table() -> datasets.Dataset:
    rng = np.random.default_rng(1)
    return datasets.Dataset.from_dict({"a": rng.normal(size=N), "b": rng.normal(size=N),
                                       "vec": rng.normal(size=(N, 3)).tolist(),
                                       "y": rng.normal(size=N), "k": rng.integers(0, 2, N)})


def _client(data, i):
    n = int(data.counts[i])
    return data.features[i, :n], data.targets[i, :n]


def test_image_clients_are_flwr_datasets_own_partitions():
    table = _images()
    data = from_federated_dataset(table, "img", "label",
                                  partitioner=DirichletPartitioner(**DIRICHLET))
    reference = DirichletPartitioner(**DIRICHLET)
    reference.dataset = table
    assert data.n_clients == 3 and data.feature_shape == (3, 5, 4)  # channel first
    for i in range(3):
        part = reference.load_partition(i).with_format("numpy")
        x, y = _client(data, i)
        expected = np.moveaxis(part["img"], -1, 1) / 255.0
        np.testing.assert_array_equal(x, expected)
        np.testing.assert_array_equal(y, part["label"])
        assert y.dtype == np.int64 and x.min() >= 0 and x.max() <= 1


def test_tabular_columns_stack_in_order_and_a_number_target_stays_a_number():
    table = _table()
    data = from_federated_dataset(table, ["b", "a"], "y",
                                  partitioner=IidPartitioner(num_partitions=4))
    reference = IidPartitioner(num_partitions=4)
    reference.dataset = table
    for i in range(4):  # float64 values exactly (datasets' NumPy format would round them)
        part = reference.load_partition(i)
        x, y = _client(data, i)
        np.testing.assert_array_equal(x, np.column_stack([part["b"], part["a"]]))
        np.testing.assert_array_equal(y, part["y"])
    assert data.features.dtype == np.float64 and data.targets.dtype == np.float64
    single = from_federated_dataset(table, ["b", "a"], "y", dtype=np.float32,
                                    partitioner=IidPartitioner(num_partitions=4))
    assert single.features.dtype == np.float32 and single.targets.dtype == np.float32
    vector = from_federated_dataset(table, "vec", "k",
                                    partitioner=IidPartitioner(num_partitions=2))
    reference = IidPartitioner(num_partitions=2)
    reference.dataset = table
    np.testing.assert_array_equal(_client(vector, 1)[0], reference.load_partition(1)["vec"])
    assert vector.feature_shape == (3,) and vector.targets.dtype == np.int64


def test_a_federated_dataset_gives_the_clients_of_its_own_partitions(tmp_path, monkeypatch):
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    path = tmp_path / "train.parquet"
    _table().to_parquet(str(path))
    fds = flwr_datasets.FederatedDataset(dataset="parquet", data_files={"train": str(path)},
                                         partitioners={"train": 3})
    data = from_federated_dataset(fds, ["a", "b"], "k")
    assert data.n_clients == 3 and int(data.counts.sum()) == N
    for i in range(3):
        part = fds.load_partition(i, "train")
        x, y = _client(data, i)
        np.testing.assert_array_equal(x, np.column_stack([part["a"], part["b"]]))
        np.testing.assert_array_equal(y, part["k"])
    with pytest.raises(ValueError, match="own partitioners"):
        from_federated_dataset(fds, "a", "k", partitioner=IidPartitioner(num_partitions=3))
    with pytest.raises(ValueError, match=r"split 'test' has no partitioner.*\['train'\]"):
        from_federated_dataset(fds, "a", "k", split="test")


@pytest.mark.parametrize("features, label, match", [
    ("nope", "y", r"no column \['nope'\].*its columns are"),
    (["a", "vec"], "y", "several feature columns must be scalars"),
    ("a", "vec", "label column 'vec' holds arrays"),
    ([], "y", "at least one feature column"),
])
def test_bad_columns_name_the_column(features, label, match):
    with pytest.raises(ValueError, match=match):
        from_federated_dataset(_table(), features, label,
                               partitioner=IidPartitioner(num_partitions=2))


def test_non_numeric_non_finite_and_mixed_shapes_are_refused():
    words = datasets.Dataset.from_dict({"w": ["x", "y", "z", "w"], "y": [0, 1, 0, 1]})
    with pytest.raises(ValueError, match="column 'w' .* not numeric"):
        from_federated_dataset(words, "w", "y", partitioner=IidPartitioner(num_partitions=2))
    holes = datasets.Dataset.from_dict({"a": [0.0, np.nan, 1.0, 2.0], "y": [0, 1, 0, 1]})
    with pytest.raises(ValueError, match="NaN or infinite"):
        from_federated_dataset(holes, "a", "y", partitioner=IidPartitioner(num_partitions=2))
    ragged = datasets.Dataset.from_dict({"v": [[1.0], [1.0, 2.0], [3.0], [4.0, 5.0]],
                                         "y": [0, 1, 0, 1]})
    with pytest.raises(ValueError, match="several shapes"):
        from_federated_dataset(ragged, "v", "y", partitioner=IidPartitioner(num_partitions=1))
    with pytest.raises(ValueError, match="needs partitioner="):
        from_federated_dataset(_table(), "a", "y")
    with pytest.raises(TypeError, match="got dict"):
        from_federated_dataset({"a": [1.0]}, "a", "y")
