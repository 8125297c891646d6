"""Image data: file formats written here byte for byte, the bundled digits, partitions by
writer, the holdout, and ``fedcomp data download`` against a local HTTP server."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import socket
import struct
import tarfile

import numpy as np
import pytest

from fedcomp.cli import main
from fedcomp.config import ConfigError
from fedcomp.data import (
    DATASET_DESCRIPTIONS,
    DATASETS,
    SOURCES,
    ClientData,
    cifar10,
    digit_forms,
    digits,
    fashion_mnist,
    federate,
    femnist,
    fetch,
    is_fetched,
    load_cifar10_batch,
    load_idx,
    load_leaf,
    mnist,
    partition_dirichlet_groups,
    partition_groups,
)
from fedcomp.experiments import build_problem, resolve, validate


# --- writers of the exact file formats ------------------------------------------------------
def idx_bytes(array: np.ndarray, code: int) -> bytes:
    """IDX: 0x0000, type code, ndim, big-endian uint32 dims, big-endian values."""
    big = array.astype(array.dtype.newbyteorder(">"))
    return struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape) + big.tobytes()


def write_idx_set(folder, n_train=20, n_test=6, side=28, gz=True, seed=0):
    """MNIST's four files (names as distributed) with random pixels and labels."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, side, side), np.uint8),
              "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, np.uint8),
              "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, side, side), np.uint8),
              "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, np.uint8)}
    for stem, array in arrays.items():
        raw = idx_bytes(array, 0x08)
        if gz:
            (folder / f"{stem}.gz").write_bytes(gzip.compress(raw))
        else:
            (folder / stem).write_bytes(raw)
    return arrays


def scaled(pixels, dtype=np.float32):
    """The documented scaling: grey level / 255, computed in the feature dtype."""
    return pixels.astype(dtype) / dtype(255)


def single_client(data: ClientData):
    """Features and targets of a one-client (iid: file order) ClientData."""
    assert data.n_clients == 1
    return data.client_arrays(0)


# --- ClientData.holdout ---------------------------------------------------------------------
def test_holdout_survives_to_and_leaves_padding_alone():
    base = ClientData.from_lists([np.ones((3, 2)), 2 * np.ones((1, 2))],
                                 [np.array([0, 1, 2]), np.array([1])])
    assert base.holdout is None  # the existing constructor calls still work
    data = base.with_holdout(np.arange(8.0).reshape(4, 2), np.array([2, 0, 1, 1]))
    assert data.holdout[0].dtype == np.float64 and data.holdout[1].dtype == np.int64
    np.testing.assert_array_equal(data.sample_weights(), base.sample_weights())
    np.testing.assert_array_equal(data.features, base.features)
    like = np.zeros((), dtype=np.float32)
    moved = data.to(like)
    assert moved.features.dtype == np.float32 and moved.targets.dtype == np.int64
    assert moved.holdout[0].dtype == np.float32 and moved.holdout[1].dtype == np.int64
    np.testing.assert_array_equal(moved.holdout[0], np.arange(8.0).reshape(4, 2))
    np.testing.assert_array_equal(moved.holdout[1], [2, 0, 1, 1])
    plain = base.to(like)
    assert plain.holdout is None
    np.testing.assert_array_equal(moved.sample_weights(), plain.sample_weights())
    np.testing.assert_array_equal(moved.features, plain.features)  # padding rows stay zero
    assert moved.counts.tolist() == [3, 1]
    pm1 = ClientData.from_lists([np.ones((2, 2))], [np.array([1.0, -1.0])])
    assert pm1.with_holdout(np.ones((1, 2)), np.array([-1.0])).to(like).holdout[1].dtype == \
        np.float32  # float (±1) targets follow the feature dtype
    with pytest.raises(ValueError, match="holdout features"):
        base.with_holdout(np.ones((4, 3)), np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="holdout features"):
        base.with_holdout(np.ones((4, 2)), np.zeros(3, dtype=np.int64))


@pytest.mark.torch
def test_holdout_moves_to_torch():
    torch = pytest.importorskip("torch")
    data = digits(n_clients=3, n_samples=60)
    moved = data.to(torch.zeros((), dtype=torch.float32))
    assert moved.holdout[0].dtype == torch.float32 and moved.holdout[1].dtype == torch.int64
    np.testing.assert_array_equal(moved.holdout[0].numpy(),
                                  data.holdout[0].astype(np.float32))


# --- IDX ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "code"), [(np.uint8, 0x08), (np.int8, 0x09),
                                             (np.int16, 0x0B), (np.int32, 0x0C),
                                             (np.float32, 0x0D), (np.float64, 0x0E)])
@pytest.mark.parametrize("gz", [False, True])
def test_load_idx_round_trips_every_type(tmp_path, dtype, code, gz):
    rng = np.random.default_rng(code)
    values = (rng.normal(size=(3, 4, 5)) * 100).astype(dtype)
    raw = idx_bytes(values, code)
    path = tmp_path / "x.idx"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    out = load_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative and out.shape == (3, 4, 5)
    np.testing.assert_array_equal(out, values)


def test_load_idx_errors_name_the_problem(tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(b"\x01\x02\x08\x01")
    with pytest.raises(ValueError, match="not an IDX file"):
        load_idx(path)
    path.write_bytes(struct.pack(">BBBBI", 0, 0, 0x07, 1, 3) + b"abc")
    with pytest.raises(ValueError, match="type code 0x07"):
        load_idx(path)
    path.write_bytes(struct.pack(">BBBB", 0, 0, 0x08, 2) + b"\x00\x00")
    with pytest.raises(ValueError, match="truncated IDX header"):
        load_idx(path)
    path.write_bytes(idx_bytes(np.zeros((2, 3), np.uint8), 0x08)[:-1])
    with pytest.raises(ValueError, match=r"announces \(2, 3\) values .* 5 bytes follow"):
        load_idx(path)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_the_idx_files(tmp_path, gz):
    arrays = write_idx_set(tmp_path / "m", gz=gz)
    data = mnist(str(tmp_path / "m"), n_clients=1)
    X, y = single_client(data)
    assert data.feature_shape == (1, 28, 28) and data.dtype == np.float32
    np.testing.assert_array_equal(X, scaled(arrays["train-images-idx3-ubyte"])[:, None])
    np.testing.assert_array_equal(y, arrays["train-labels-idx1-ubyte"])
    assert y.dtype == np.int64 and 0 <= X.min() and X.max() <= 1
    test_x, test_y = data.holdout
    np.testing.assert_array_equal(test_x, scaled(arrays["t10k-images-idx3-ubyte"])[:, None])
    np.testing.assert_array_equal(test_y, arrays["t10k-labels-idx1-ubyte"])
    flat = mnist(str(tmp_path / "m"), n_clients=4, flatten=True, dtype="float64")
    assert flat.feature_shape == (784,) and flat.holdout[0].shape == (6, 784)
    assert flat.dtype == np.float64 and flat.n_samples == 20
    pooled = flat.pooled()[0]
    expected = scaled(arrays["train-images-idx3-ubyte"], np.float64).reshape(20, -1)
    assert sorted(map(tuple, pooled)) == sorted(map(tuple, expected))


def test_idx_loaders_find_files_in_the_data_dir_and_explain_missing_ones(tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("FEDCOMP_DATA_DIR", str(tmp_path))
    arrays = write_idx_set(tmp_path / "fashion_mnist", gz=False)
    data = fashion_mnist(n_clients=2, partition={"name": "dirichlet", "concentration": 1.0})
    assert data.n_samples == 20 and data.holdout[1].tolist() == \
        arrays["t10k-labels-idx1-ubyte"].tolist()
    with pytest.raises(FileNotFoundError) as info:
        mnist(n_clients=2)
    message = str(info.value)
    for needle in ("train-images-idx3-ubyte[.gz]", "fedcomp data download mnist", "--data-dir",
                   "$FEDCOMP_DATA_DIR", str(tmp_path / "mnist"),
                   "https://ossci-datasets.s3.amazonaws.com/mnist/"):
        assert needle in message
    with pytest.raises(ValueError, match="n_classes=5"):
        mnist(str(tmp_path / "fashion_mnist"), n_classes=5)


def test_subsamples_are_seeded_subsets(tmp_path):
    arrays = write_idx_set(tmp_path / "m", n_train=30, n_test=10)
    a = mnist(str(tmp_path / "m"), n_clients=1, n_samples=12, n_test=4, seed=3)
    b = mnist(str(tmp_path / "m"), n_clients=3, n_samples=12, n_test=4, seed=3)
    c = mnist(str(tmp_path / "m"), n_clients=1, n_samples=12, n_test=4, seed=4)
    X, y = single_client(a)
    assert len(y) == 12 and a.holdout[0].shape == (4, 1, 28, 28)
    full = scaled(arrays["train-images-idx3-ubyte"])[:, None]
    rows = [int(np.flatnonzero((full == x).all(axis=(1, 2, 3)))[0]) for x in X]
    assert rows == sorted(set(rows))  # distinct training rows, in file order
    # the subsample does not depend on the partition, only on the seed
    assert sorted(map(bytes, X)) == sorted(map(bytes, b.pooled()[0]))
    assert sorted(map(bytes, X)) != sorted(map(bytes, single_client(c)[0]))
    with pytest.raises(ValueError, match=r"n_samples must be in 1\.\.30"):
        mnist(str(tmp_path / "m"), n_samples=31)


# --- LEAF FEMNIST ---------------------------------------------------------------------------
def leaf_blob(writers, rng, n_features=784):
    """LEAF JSON of the given {writer: n_samples}; pixel 0 encodes the writer ("f0004_09": 4)."""
    data = {}
    for user, n in writers.items():
        x = rng.integers(0, 256, (n, n_features)) / 255.0
        x[:, 0] = int(user[1:5]) / 255.0
        data[user] = {"x": x.tolist(), "y": rng.integers(0, 62, n).tolist()}
    return {"users": list(writers), "num_samples": list(writers.values()), "user_data": data}


def write_leaf(folder, seed=0):
    rng = np.random.default_rng(seed)
    train = [{"f0000_14": 5, "f0001_41": 3, "f0002_07": 4},
             {"f0003_22": 2, "f0004_09": 6, "f0005_30": 1}]
    blobs = {}
    for split, parts in (("train", train), ("test", [{w: 2 for w in p} for p in train])):
        (folder / split).mkdir(parents=True)
        for i, writers in enumerate(parts):
            blob = leaf_blob(writers, rng)
            # LEAF's own file names: all_data_<i>_niid_05_keep_0_<split>_9.json
            name = f"all_data_{i}_niid_05_keep_0_{split}_9.json"
            (folder / split / name).write_text(json.dumps(blob))
            blobs.setdefault(split, []).append(blob)
    return blobs


def test_load_leaf_round_trips_the_json(tmp_path):
    blobs = write_leaf(tmp_path)
    X, y, w = load_leaf(tmp_path / "train", dtype=np.float64)
    users = [u for b in blobs["train"] for u in b["users"]]
    expected_x = [row for b in blobs["train"] for u in b["users"] for row in b["user_data"][u]["x"]]
    expected_y = [v for b in blobs["train"] for u in b["users"] for v in b["user_data"][u]["y"]]
    np.testing.assert_array_equal(X, expected_x)  # float64: the JSON floats exactly
    np.testing.assert_array_equal(y, expected_y)
    assert list(dict.fromkeys(w)) == users and y.dtype == np.int64
    broken = dict(blobs["train"][0], num_samples=[5, 3, 5])
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="f0002_07.*num_samples=5"):
        load_leaf(tmp_path / "broken.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no LEAF JSON"):
        load_leaf(tmp_path / "empty")


def test_femnist_has_one_client_per_writer_and_the_test_split_as_holdout(tmp_path):
    blobs = write_leaf(tmp_path / "leaf")
    data = femnist(str(tmp_path / "leaf"))
    assert data.n_clients == 6 and data.feature_shape == (1, 28, 28) and data.n_samples == 21
    assert sorted(data.counts.tolist()) == [1, 2, 3, 4, 5, 6]
    for i in range(6):
        X, y = data.client_arrays(i)
        assert len(np.unique(X[:, 0, 0, 0])) == 1  # pixel 0 names the writer: one per client
    user = blobs["train"][1]["user_data"]["f0004_09"]
    (client,) = [i for i in range(6) if data.counts[i] == 6]
    X, y = data.client_arrays(client)
    np.testing.assert_array_equal(X.reshape(6, -1), np.asarray(user["x"], dtype=np.float32))
    np.testing.assert_array_equal(y, user["y"])
    test_x, test_y = data.holdout
    assert test_x.shape == (12, 1, 28, 28) and test_y.dtype == np.int64
    fewer = femnist(str(tmp_path / "leaf"), max_writers=3, flatten=True, seed=1)
    assert fewer.n_clients == 3 and fewer.feature_shape == (784,)
    kept = {float(v) for v in fewer.pooled()[0][:, 0]}
    assert len(kept) == 3 and {float(v) for v in fewer.holdout[0][:, 0]} == kept
    assert fewer.holdout[0].shape == (6, 784)  # the kept writers' test samples only
    grouped = femnist(str(tmp_path / "leaf"), n_clients=2,
                      partition={"name": "dirichlet_writers", "concentration": 1.0})
    owners = {float(v): set() for v in grouped.pooled()[0][:, 0, 0, 0]}
    for value, owner in zip(grouped.pooled()[0][:, 0, 0, 0], grouped.pooled()[2], strict=True):
        owners[float(value)].add(int(owner))
    assert len(owners) == 6 and all(len(o) == 1 for o in owners.values())  # writers whole
    iid = femnist(str(tmp_path / "leaf"), n_clients=3, partition="iid")
    assert iid.counts.tolist() == [7, 7, 7]


def test_femnist_with_leafs_user_split_keeps_the_other_writers_test_samples(tmp_path):
    """LEAF's ``-t user`` holds out whole writers: the test writers are not the training
    ones, and the holdout must keep them (it was emptied: NaN test metrics)."""
    rng = np.random.default_rng(0)
    for split, writers in (("train", {"f0000_14": 5, "f0001_41": 3, "f0002_07": 4}),
                           ("test", {"f0003_22": 2, "f0004_09": 3})):
        (tmp_path / "leaf" / split).mkdir(parents=True)
        (tmp_path / "leaf" / split / f"{split}.json").write_text(
            json.dumps(leaf_blob(writers, rng)))
    data = femnist(str(tmp_path / "leaf"), flatten=True)
    assert data.n_clients == 3 and data.holdout[0].shape == (5, 784)
    assert sorted({round(float(v) * 255) for v in data.holdout[0][:, 0]}) == [3, 4]
    # a writer sample cannot match a disjoint test split: say so instead of an empty holdout
    with pytest.raises(ValueError, match=r"none of the 2 test writers.*max_writers"):
        femnist(str(tmp_path / "leaf"), max_writers=2)


def test_load_leaf_names_the_file_and_user_of_malformed_data(tmp_path):
    good = leaf_blob({"f0000_14": 2, "f0001_41": 3}, np.random.default_rng(0), n_features=4)
    path = tmp_path / "bad.json"
    x_missing = json.loads(json.dumps(good))
    del x_missing["user_data"]["f0001_41"]["x"]
    ragged = json.loads(json.dumps(good))
    ragged["user_data"]["f0001_41"]["x"][1] = [0.5, 0.5]
    letters = json.loads(json.dumps(good))
    letters["user_data"]["f0000_14"]["y"] = ["a", "b"]
    cases = [
        (dict(good, num_samples=[2]), r"bad\.json: num_samples must list one count per user"),
        (x_missing, r"bad\.json: user 'f0001_41': user_data needs the keys 'x' and 'y'"),
        (ragged, r"bad\.json: user 'f0001_41': samples in x have different lengths \[2, 4\]"),
        (letters, r"bad\.json: user 'f0000_14': x must be a list of equal-length"),
    ]
    for blob, message in cases:
        path.write_text(json.dumps(blob))
        with pytest.raises(ValueError, match=message):
            load_leaf(path)


def test_femnist_without_files_explains_leaf(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDCOMP_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        femnist()
    for needle in ("preprocess.sh", str(tmp_path / "femnist"), "FEDCOMP_DATA_DIR"):
        assert needle in str(info.value)


# --- CIFAR-10 -------------------------------------------------------------------------------
def cifar_batch(rng, n, label):
    return {b"batch_label": label.encode(), b"labels": rng.integers(0, 10, n).tolist(),
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [f"img_{i}.png".encode() for i in range(n)]}


def write_cifar(folder, seed=0, per_batch=4, n_test=3):
    """The python version's files, pickled with bytes keys as the originals (protocol 2)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    batches = {f"data_batch_{i}": cifar_batch(rng, per_batch, f"training batch {i} of 5")
               for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(rng, n_test, "testing batch 1 of 1")
    for name, batch in batches.items():
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    return batches


def test_cifar10_reads_the_python_batches(tmp_path):
    batches = write_cifar(tmp_path / "cifar10" / "cifar-10-batches-py")
    data = cifar10(str(tmp_path / "cifar10"), n_clients=1)
    X, y = single_client(data)
    raw = np.concatenate([batches[f"data_batch_{i}"][b"data"] for i in range(1, 6)])
    assert data.feature_shape == (3, 32, 32) and len(y) == 20
    np.testing.assert_array_equal(X, scaled(raw).reshape(20, 3, 32, 32))
    np.testing.assert_array_equal(X[:, 1].reshape(20, -1), scaled(raw[:, 1024:2048]))  # green
    np.testing.assert_array_equal(
        y, sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), []))
    np.testing.assert_array_equal(data.holdout[1], batches["test_batch"][b"labels"])
    np.testing.assert_array_equal(data.holdout[0].reshape(3, -1),
                                  scaled(batches["test_batch"][b"data"]))
    flat = cifar10(str(tmp_path / "cifar10" / "cifar-10-batches-py"), n_clients=2,
                   flatten=True, partition={"name": "shards", "shards_per_client": 2})
    assert flat.feature_shape == (3072,) and flat.n_samples == 20


def test_cifar_batches_refuse_foreign_objects(tmp_path, capsys):
    class Exploit:
        def __reduce__(self):
            return (print, ("this must never run",))

    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": Exploit(), b"labels": []}, protocol=2))
    with pytest.raises(ValueError, match="print is not allowed"):
        load_cifar10_batch(path)
    assert "must never run" not in capsys.readouterr().out
    images, labels = load_cifar10_batch(_pickled(tmp_path, protocol=pickle.HIGHEST_PROTOCOL))
    assert images.shape == (2, 3, 32, 32) and labels.tolist() == [1, 2]
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}))
    with pytest.raises(ValueError, match=r"\(n, 3072\)"):
        load_cifar10_batch(path)


def _pickled(tmp_path, protocol):
    path = tmp_path / f"batch_p{protocol}"
    path.write_bytes(pickle.dumps({b"data": np.ones((2, 3072), np.uint8), b"labels": [1, 2]},
                                  protocol=protocol))
    return path


# --- digits and the partitions by writer ------------------------------------------------------
def test_digits_offline_images_and_holdout():
    data = digits()
    assert data.n_clients == 10 and data.feature_shape == (1, 8, 8)
    assert data.n_samples == 1797 - 359 and data.holdout[0].shape == (359, 1, 8, 8)
    X, y, _ = data.pooled()
    both = np.concatenate([y, data.holdout[1]])
    assert sorted(np.unique(both)) == list(range(10)) and y.dtype == np.int64
    pixels = np.concatenate([X.ravel(), data.holdout[0].ravel()])
    assert pixels.min() == 0 and pixels.max() == 1
    np.testing.assert_array_equal(pixels * 16, np.round(pixels * 16))  # 17 grey levels
    from sklearn.datasets import load_digits

    bunch = load_digits()
    whole = digits(n_clients=1, test_fraction=0.0, flatten=True)
    assert whole.holdout is None and whole.feature_shape == (64,)
    np.testing.assert_array_equal(whole.client_arrays(0)[0], bunch.data / 16.0)
    np.testing.assert_array_equal(whole.client_arrays(0)[1], bunch.target)
    small = digits(n_clients=4, n_samples=100, dtype="float32", seed=2)
    assert small.n_samples == 100 and small.dtype == np.float32
    assert small.holdout[0].dtype == np.float32
    with pytest.raises(ValueError, match="test_fraction"):
        digits(test_fraction=1.0)
    with pytest.raises(ValueError, match="float type"):
        digits(dtype="int32")


def test_digit_forms_are_the_writer_blocks_of_the_file():
    from sklearn.datasets import load_digits

    target = load_digits().target
    forms = digit_forms(target)
    sizes = np.bincount(forms)
    assert len(sizes) == 14 and sizes.min() >= 120 and sizes.max() == 130
    assert (np.diff(forms) >= 0).all()  # contiguous blocks in file order
    for f in range(14):  # each form opens with 0..9 (a few lack the leading 0)
        head = target[forms == f][:9].tolist()
        assert head in (list(range(9)), list(range(1, 10)))


def test_digits_writers_partition_keeps_forms_whole():
    data = digits(n_clients=7, partition="writers", test_fraction=0.0, flatten=True)
    from sklearn.datasets import load_digits

    forms = digit_forms(load_digits().target)
    X, _, owner = data.pooled()
    lookup = {bytes(row): f for row, f in zip(load_digits().data / 16.0, forms, strict=True)}
    form_owner = {}
    for row, o in zip(X, owner, strict=True):
        form_owner.setdefault(lookup[bytes(row)], set()).add(int(o))
    assert len(form_owner) == 14 and all(len(o) == 1 for o in form_owner.values())
    assert sorted(np.bincount([next(iter(o)) for o in form_owner.values()])) == [2] * 7
    skewed = digits(n_clients=5, partition={"name": "dirichlet_writers", "concentration": 0.3})
    assert skewed.n_clients == 5
    with pytest.raises(ValueError, match="14 groups"):
        digits(n_clients=15, partition="writers")


def test_dirichlet_over_writers_keeps_writers_whole_covers_all_and_is_seeded():
    rng = np.random.default_rng(0)
    groups = np.array([f"w{k}" for k in rng.integers(0, 60, 900)])
    parts = partition_dirichlet_groups(groups, 8, concentration=0.3, seed=5)
    assert len(parts) == 8 and all(len(p) for p in parts)
    every = np.concatenate(parts)
    assert np.array_equal(np.sort(every), np.arange(900))
    owner = {}
    for i, p in enumerate(parts):
        assert np.array_equal(p, np.sort(p))
        for w in set(groups[p]):
            owner.setdefault(w, set()).add(i)
    assert len(owner) == 60 and all(len(o) == 1 for o in owner.values())
    again = partition_dirichlet_groups(groups, 8, concentration=0.3, seed=5)
    other = partition_dirichlet_groups(groups, 8, concentration=0.3, seed=6)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other, strict=True))

    def writer_spread(concentration):
        counts = [[len(set(groups[p])) for p in partition_dirichlet_groups(
            groups, 8, concentration, seed=s)] for s in range(20)]
        return np.mean([np.std(c) for c in counts])

    assert writer_spread(0.1) > 2 * writer_spread(100.0)  # small concentration: skewed
    natural = partition_groups(groups, 60, seed=0)
    assert sorted(len(set(groups[p])) for p in natural) == [1] * 60
    with pytest.raises(ValueError, match="60 groups .* 61 clients"):
        partition_groups(groups, 61)
    with pytest.raises(ValueError, match="concentration must be > 0"):
        partition_dirichlet_groups(groups, 4, concentration=0.0)
    with pytest.raises(ValueError, match="no writer ids"):
        federate(np.eye(4), np.arange(4), 2, "writers")


def test_image_sets_are_registered_and_configurable():
    for name in ("digits", "mnist", "fashion_mnist", "femnist", "cifar10"):
        assert name in DATASETS and name in DATASET_DESCRIPTIONS
    cfg = {"name": "t", "rounds": 2, "reference": False,
           "data": {"generator": "digits", "n_clients": 5, "flatten": True, "n_classes": 10,
                    "partition": {"name": "dirichlet_writers", "concentration": 0.5}},
           "problem": {"loss": "softmax"}, "regularizer": {"name": "l1", "alpha": 0.001},
           "algorithms": [{"name": "fedavg", "client_lr": 0.1, "local_steps": 2}]}
    problem = build_problem(resolve(cfg).base)
    assert problem.param_shape == (64, 10) and problem.data.holdout[0].shape == (359, 64)
    cfg["data"]["max_samples"] = 100
    with pytest.raises(ConfigError, match="n_samples"):
        validate(cfg)


# --- downloads -------------------------------------------------------------------------------
def serve_idx_set(root):
    """A gzipped IDX set under ``root/mnist/`` and the sha256 of each file."""
    write_idx_set(root / "mnist", gz=True, seed=7)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "mnist").iterdir())}


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"  # nothing listens there any more: refused at once


def test_cli_downloads_an_idx_set_with_checksums(local_server, tmp_path, monkeypatch, capsys):
    root, base = local_server
    digests = serve_idx_set(root)
    # the official mirror first (unreachable here), then the local one: the download goes on
    monkeypatch.setitem(SOURCES, "mnist", {"mirrors": (closed_port_url(), f"{base}/mnist/"),
                                           "files": digests})
    target = tmp_path / "data"
    assert main(["data", "download", "mnist", "--data-dir", str(target),
                 "--timeout", "10"]) == 0
    assert str(target / "mnist") in capsys.readouterr().out
    for name, digest in digests.items():
        assert hashlib.sha256((target / "mnist" / name).read_bytes()).hexdigest() == digest
    assert is_fetched("mnist", target) and not is_fetched("cifar10", target)
    monkeypatch.setenv("FEDCOMP_DATA_DIR", str(target))
    data = mnist(n_clients=2)  # the loader finds the download in $FEDCOMP_DATA_DIR
    assert data.n_samples == 20 and data.holdout[0].shape == (6, 1, 28, 28)
    assert main(["data", "list"]) == 0
    listing = capsys.readouterr().out
    assert "mnist" in listing and "present" in listing and "femnist" in listing
    # already there and intact: nothing is fetched (the server could be gone)
    assert fetch("mnist", target, url=closed_port_url(), timeout=5) == target / "mnist"


def test_checksum_mismatch_saves_nothing(local_server, tmp_path, monkeypatch, capsys):
    root, base = local_server
    digests = serve_idx_set(root)
    wrong = dict(digests, **{"train-images-idx3-ubyte.gz": "0" * 64})
    monkeypatch.setitem(SOURCES, "mnist", {"mirrors": (f"{base}/mnist/",), "files": wrong})
    target = tmp_path / "data"
    assert main(["data", "download", "mnist", "--data-dir", str(target)]) == 2
    assert "checksum mismatch" in capsys.readouterr().err
    assert not (target / "mnist" / "train-images-idx3-ubyte.gz").exists()
    assert list((target / "mnist").glob("*.part")) == [] and list(
        (target / "mnist").glob(".*")) == []


def test_unreachable_source_says_where_to_put_the_files(tmp_path, monkeypatch, capsys):
    url = closed_port_url()
    monkeypatch.setitem(SOURCES, "mnist", dict(SOURCES["mnist"], mirrors=(url,)))
    target = tmp_path / "data"
    assert main(["data", "download", "mnist", "--data-dir", str(target), "--timeout", "5"]) == 2
    err = capsys.readouterr().err
    for needle in (f"{url}train-images-idx3-ubyte.gz", str(target / "mnist"),
                   "$FEDCOMP_DATA_DIR", "--data-dir", "t10k-labels-idx1-ubyte.gz"):
        assert needle in err
    assert not any((target / "mnist").iterdir())
    with pytest.raises(ConnectionError, match="could not download a9a"):
        fetch("a9a", target, url=url, timeout=5)


def test_femnist_download_explains_leaf_and_unknown_names_fail(tmp_path, capsys):
    assert main(["data", "download", "femnist", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "preprocess.sh" in err and str(tmp_path / "femnist" / "train") in err
    assert main(["data", "download", "imagenet", "--data-dir", str(tmp_path)]) == 2
    assert "known:" in capsys.readouterr().err


def test_cifar_download_unpacks_only_the_batches(local_server, tmp_path, monkeypatch):
    root, base = local_server
    batches = write_cifar(tmp_path / "src" / "cifar-10-batches-py")
    archive = root / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
        evil = tarfile.TarInfo("../evil.txt")  # a crafted member must not escape
        evil.size = 4
        tar.addfile(evil, io.BytesIO(b"evil"))
        link = tarfile.TarInfo("cifar-10-batches-py/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    monkeypatch.setitem(SOURCES, "cifar10", dict(SOURCES["cifar10"], mirrors=(f"{base}/",),
                                                 files={"cifar-10-python.tar.gz": digest}))
    folder = fetch("cifar10", tmp_path / "data", timeout=10)
    unpacked = sorted(p.name for p in (folder / "cifar-10-batches-py").iterdir())
    assert unpacked == sorted(batches) and not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "data" / "evil.txt").exists()
    data = cifar10(str(folder), n_clients=2)
    assert data.n_samples == 20 and data.holdout[0].shape == (3, 3, 32, 32)
