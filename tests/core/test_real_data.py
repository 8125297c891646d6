"""Real data: the LIBSVM reader, the bundled breast-cancer set, partitions in configs, downloads."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from fedcomp.config import ConfigError
from fedcomp.data import (
    DATASETS,
    a9a,
    breast_cancer,
    download,
    federate,
    fetch,
    load_libsvm,
    partition_spec,
    relabel,
    sha256_of,
)
from fedcomp.experiments import build_problem, validate

LIBSVM_TEXT = """# a comment line
+1 1:0.5 3:-2 7:1e-3
-1 qid:4 2:1   # trailing comment

+1 7:4
-1
"""


def test_load_libsvm_reads_the_format(tmp_path):
    path = tmp_path / "toy.svm"
    path.write_text(LIBSVM_TEXT)
    X, y = load_libsvm(path)
    expected = np.zeros((4, 7))
    expected[0, [0, 2, 6]] = [0.5, -2.0, 1e-3]
    expected[1, 1] = 1.0
    expected[2, 6] = 4.0
    np.testing.assert_array_equal(X, expected)
    np.testing.assert_array_equal(y, [1, -1, 1, -1])
    X9, _ = load_libsvm(path, n_features=9)  # a split may omit trailing features
    assert X9.shape == (4, 9) and np.array_equal(X9[:, :7], expected)
    with pytest.raises(ValueError, match="exceeds n_features=5"):
        load_libsvm(path, n_features=5)


def test_load_libsvm_matches_scikit_learn(tmp_path):
    sk = pytest.importorskip("sklearn.datasets")
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(40, 12)) * (rng.random((40, 12)) < 0.3)
    labels = rng.choice([-1.0, 1.0], size=40)
    path = tmp_path / "rand.svm"
    sk.dump_svmlight_file(dense, labels, str(path), zero_based=False)
    X, y = load_libsvm(path, n_features=12)
    Xs, ys = sk.load_svmlight_file(str(path), n_features=12, zero_based=False)
    np.testing.assert_allclose(X, Xs.toarray(), rtol=0, atol=0)
    np.testing.assert_array_equal(y, ys)
    np.testing.assert_allclose(X, dense, rtol=1e-15)  # and the round trip is exact


def test_load_libsvm_zero_based_and_errors(tmp_path):
    path = tmp_path / "zero.svm"
    path.write_text("1 0:2 2:1\n0 1:3\n")
    X, y = load_libsvm(path)  # an index 0 means zero-based
    np.testing.assert_array_equal(X, [[2, 0, 1], [0, 3, 0]])
    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:0.5\n+1 2-0.5\n")
    with pytest.raises(ValueError, match="line 2"):
        load_libsvm(bad)


def test_breast_cancer_is_standardized_binary_and_partitioned():
    data = breast_cancer(n_clients=10)
    assert data.n_clients == 10 and data.n_samples == 569 and data.feature_shape == (30,)
    X, y, owner = data.pooled()
    assert set(np.unique(y)) == {-1.0, 1.0} and (y == 1).sum() == 357  # 357 benign
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1, atol=1e-12)
    assert data.counts.max() - data.counts.min() <= 1  # iid: near-equal clients

    def label_skew(partition):
        d = breast_cancer(n_clients=10, partition=partition, seed=1)
        share = [np.mean(d.client_arrays(i)[1] == 1) for i in range(10)]
        return np.std(share)

    iid, dir1, dir02 = (label_skew(p) for p in (
        "iid", {"name": "dirichlet", "concentration": 1.0},
        {"name": "dirichlet", "concentration": 0.2}))
    assert iid < 0.1 < dir1 < dir02  # smaller concentration, stronger label skew
    unit = breast_cancer(n_clients=3, unit_norm=True).pooled()[0]
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, atol=1e-12)


def test_partition_specs_are_checked():
    assert partition_spec("iid") == ("iid", {})
    with pytest.raises(ValueError, match="valid: .*dirichlet"):
        partition_spec("dirichlett")
    with pytest.raises(ValueError, match="accepted: .*concentration"):
        partition_spec({"name": "dirichlet", "alpha": 0.2})
    with pytest.raises(ValueError, match="name"):
        partition_spec({"concentration": 0.2})
    data = federate(np.eye(6), np.array([1, 1, 1, -1, -1, -1.0]), 2,
                    {"name": "shards", "shards_per_client": 1}, seed=0)
    assert sorted(len(set(data.client_arrays(i)[1])) for i in range(2)) == [1, 1]


def base_config(**data):
    return {"name": "t", "rounds": 2, "reference": False,
            "data": {"generator": "breast_cancer", "n_clients": 5, **data},
            "problem": {"loss": "logistic", "l2": 0.001},
            "regularizer": {"name": "mcp", "alpha": 0.01, "gamma": 3.0},
            "algorithms": [{"name": "fedcanon", "client_lr": 0.1, "local_steps": 2}]}


def test_config_names_a_pooled_dataset_and_a_partition():
    cfg = validate(base_config(partition={"name": "dirichlet", "concentration": 0.2}, seed=3))
    problem = build_problem(cfg)
    assert problem.n_clients == 5 and problem.param_shape == (30,)
    expected = breast_cancer(5, {"name": "dirichlet", "concentration": 0.2}, seed=3)
    np.testing.assert_array_equal(problem.data.counts, expected.counts)
    with pytest.raises(ConfigError, match="data.partition: .*accepted"):
        validate(base_config(partition={"name": "dirichlet", "eta": 0.2}))
    with pytest.raises(ConfigError, match="accepted"):
        validate(base_config(partitions="iid"))


@pytest.mark.parametrize("data, message", [
    ({"n_clients": 2.5}, r"data.n_clients must be an integer \(got 2.5\)"),
    ({"seed": 1.5}, r"data.seed must be an integer"),
    ({"seed": -1}, r"data.seed must be a non-negative integer \(got -1\)"),
    ({"partition": {"name": "dirichlet", "concentration": "0.2"}},
     r"data.partition.concentration must be a number .*concentration = 0.2"),
    ({"partition": {"name": "quantity_skew", "concentration": 1.0, "min_size": 1.5}},
     r"data.partition.min_size must be an integer"),
])
def test_config_checks_counts_and_seeds_of_pooled_data(data, message):
    with pytest.raises(ConfigError, match=message):
        validate(base_config(**data))


def test_pooled_loaders_refuse_fractional_clients():
    # 2.5 clients used to run as 2 (np.array_split truncates)
    with pytest.raises(ValueError, match=r"n_clients must be an integer \(got 2.5\)"):
        breast_cancer(n_clients=2.5)
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer"):
        breast_cancer(n_clients=2, seed=-1)


def test_a9a_reads_a_local_file_and_explains_a_missing_one(tmp_path, monkeypatch):
    path = tmp_path / "a9a"
    path.write_text("-1 3:1 11:1 123:1\n+1 5:1 20:1\n-1 1:1\n+1 2:1 9:1\n")
    data = a9a(str(path), n_clients=2)
    assert data.feature_shape == (123,) and data.n_samples == 4
    monkeypatch.setenv("FEDCOMP_DATA_DIR", str(tmp_path))
    assert a9a(n_clients=2).n_samples == 4  # the bare name is found in the data directory
    assert "a9a" in DATASETS
    with pytest.raises(FileNotFoundError, match="fetch\\('a9a'\\)"):
        a9a(str(tmp_path / "nope"))


def test_download_verifies_the_checksum(local_server, tmp_path):
    root, base = local_server
    payload = b"+1 1:1\n-1 2:1\n" * 50
    (root / "small.svm").write_bytes(payload)
    import hashlib

    good = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "data" / "small.svm"
    assert download(f"{base}/small.svm", dest, good, timeout=10) == dest
    assert dest.read_bytes() == payload and sha256_of(dest) == good
    other = tmp_path / "data" / "other.svm"
    with pytest.raises(ValueError, match="checksum mismatch"):
        download(f"{base}/small.svm", other, "0" * 64, timeout=10)
    with pytest.raises(ValueError, match="max_bytes"):
        download(f"{base}/small.svm", other, good, timeout=10, max_bytes=100)
    assert not other.exists()
    assert list((tmp_path / "data").glob("*.part")) == []  # no partial file left behind
    with pytest.raises(ValueError, match="http"):
        download("file:///etc/hostname", other, None)


def test_fetch_checks_shape_records_digest_and_detects_tampering(local_server, tmp_path):
    root, base = local_server
    (root / "short").write_text("+1 1:1\n")
    target = tmp_path / "data"
    with pytest.raises(ValueError, match="32561 samples"):
        fetch("a9a", target, url=f"{base}/short", timeout=10)
    assert not (target / "a9a").exists()
    (root / "a9a").write_text("+1 1:1 123:1\n-1 2:1\n" * (32561 // 2) + "+1 3:1\n")
    path = fetch("a9a", target, url=f"{base}/a9a", timeout=10)
    assert (target / "a9a.sha256").read_text().split()[0] == sha256_of(path)
    assert fetch("a9a", target, url="http://127.0.0.1:9/unused") == path  # already there
    path.write_text("+1 1:1\n")
    with pytest.raises(ValueError, match="recorded sha256"):
        fetch("a9a", target)


def test_train_accuracy_metric():
    from fedcomp import ClientData, Problem
    from fedcomp.losses import LeastSquares, Logistic, Softmax
    from fedcomp.metrics import train_accuracy
    from fedcomp.regularizers import Zero

    data = ClientData.from_lists([np.array([[1.0], [-1.0]]), np.array([[2.0]])],
                                 [np.array([1.0, 1.0]), np.array([-1.0])])
    logistic = Problem(Logistic(), Zero(), data)
    assert train_accuracy(logistic, np.array([1.0])) == pytest.approx(1 / 3)
    assert train_accuracy(logistic, np.array([0.0])) == pytest.approx(2 / 3)  # 0 counts as +1
    assert np.isnan(train_accuracy(Problem(LeastSquares(), Zero(), data), np.array([1.0])))
    multi = ClientData.from_lists([np.eye(3)], [np.array([0, 2, 1])])
    p = Problem(Softmax(), Zero(param_ndim=2), multi, n_classes=3)
    x = np.eye(3)[:, [0, 2, 1]]  # sample j scores class perm[j] highest
    assert train_accuracy(p, x) == 1.0


def test_scikit_learn_is_the_data_extra_and_named_when_missing(monkeypatch):
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert any(dep.startswith("scikit-learn") for dep in extras["data"])
    assert any(dep.startswith("scikit-learn") for dep in extras["dev"])
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # as if not installed
    with pytest.raises(ImportError, match=r"fedcomp\[data\]"):
        breast_cancer()


# --- labels: what the losses are defined on ---------------------------------------------------
def write_libsvm(path: Path, labels: list[float], n_features: int = 3) -> Path:
    rng = np.random.default_rng(0)
    path.write_text("".join(f"{y:g} " + " ".join(f"{j + 1}:{v:.3f}" for j, v in
                                                enumerate(rng.normal(size=n_features))) + "\n"
                            for y in labels))
    return path


def svm_config(path: Path, loss: str, **data: object) -> dict:
    return validate({"name": "svm", "rounds": 2, "reference": False, "metrics": ["objective"],
                    "data": {"generator": "libsvm_file", "path": str(path), "n_clients": 2,
                             **data},
                    "problem": {"loss": loss}, "regularizer": {"name": "l1", "alpha": 0.01},
                    "algorithms": [{"name": "fedmid"}]})


def test_a_binary_file_labelled_one_and_two_needs_labels_binary(tmp_path):
    # LIBSVM's binary sets also write 1/2 or 0/1; with those a logistic model once trained
    # to 3 % accuracy without a word
    path = write_libsvm(tmp_path / "b.svm", [1, 2, 2, 1, 2, 1, 1, 2])
    with pytest.raises(ValueError, match=r"Logistic needs labels -1 and \+1, found \[1, 2\].*"
                                         r"labels='binary'"):
        build_problem(svm_config(path, "logistic"))
    problem = build_problem(svm_config(path, "logistic", labels="binary"))
    targets = np.concatenate([problem.data.client_arrays(i)[1] for i in range(2)])
    assert sorted(set(targets.tolist())) == [-1.0, 1.0] and (targets == 1).sum() == 4


def test_a_multiclass_file_numbered_from_one_needs_labels_classes(tmp_path):
    path = write_libsvm(tmp_path / "m.svm", [1, 2, 3, 3, 2, 1, 1, 3, 2])
    with pytest.raises(ValueError, match=r"Softmax needs class ids 0..2, found \[1, 2, 3\]"):
        build_problem(svm_config(path, "softmax", n_classes=3))
    problem = build_problem(svm_config(path, "softmax", n_classes=3, labels="classes"))
    assert problem.param_shape == (3, 3)
    with pytest.raises(ValueError, match="3 distinct labels .* but n_classes=2"):
        relabel(np.array([1.0, 2.0, 3.0]), "classes", n_classes=2)
    with pytest.raises(ValueError, match=r"labels='binary' needs exactly two distinct labels, "
                                         r"found 3: \[1.0, 2.0, 3.0\]"):
        relabel(np.array([1.0, 2.0, 3.0]), "binary")
    with pytest.raises(ValueError, match="labels must be one of"):
        relabel(np.array([1.0]), "pm1")


def test_load_libsvm_names_the_line_of_a_non_finite_value(tmp_path):
    """scikit-learn's parser reads a "nan" without complaint: the reader then reads the
    file line by line to say where it is."""
    path = tmp_path / "nan.svm"
    path.write_text("+1 1:0.5\n-1 2:nan\n")
    with pytest.raises(ValueError, match=r"line 2: feature 2 = nan is not finite"):
        load_libsvm(path)
