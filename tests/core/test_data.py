"""Data generation and partitioning: FedProx's Synthetic(α, β) and the partitioners."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from fedcomp.data import (
    DATASET_DESCRIPTIONS,
    DATASETS,
    PARTITIONER_DESCRIPTIONS,
    PARTITIONERS,
    ClientData,
    partition_contiguous,
    partition_dirichlet,
    partition_dirichlet_groups,
    partition_groups,
    partition_iid,
    partition_quantity_skew,
    partition_shards,
    split_to_clients,
    synthetic_fedprox,
)


def _script_reference(alpha, beta, n_clients, d, n_classes, seed, iid=False):
    """FedProx's generate_synthetic.py, line by line, on a seeded Generator."""
    rng = np.random.default_rng(seed)
    samples_per_user = rng.lognormal(4, 2, n_clients).astype(int) + 50
    mean_W = rng.normal(0, alpha, n_clients)
    mean_b = mean_W
    B = rng.normal(0, beta, n_clients)
    mean_x = np.zeros((n_clients, d))
    cov_x = np.diag([np.power(j + 1, -1.2) for j in range(d)])
    for i in range(n_clients):
        mean_x[i] = np.ones(d) * B[i] if iid else rng.normal(B[i], 1, d)
    if iid:
        W_global = rng.normal(0, 1, (d, n_classes))
        b_global = rng.normal(0, 1, n_classes)
    X, y = [], []
    for i in range(n_clients):
        W = rng.normal(mean_W[i], 1, (d, n_classes))
        b = rng.normal(mean_b[i], 1, n_classes)
        if iid:
            W, b = W_global, b_global
        xx = rng.multivariate_normal(mean_x[i], cov_x, samples_per_user[i], method="cholesky")
        X.append(xx)
        y.append(np.argmax(xx @ W + b, axis=1))
    return X, y


# --- synthetic_fedprox ----------------------------------------------------------------------
@pytest.mark.parametrize("iid", [False, True])
def test_synthetic_fedprox_follows_the_script_draw_for_draw(iid):
    data = synthetic_fedprox(0.5, 0.5, 6, n_features=7, n_classes=4, iid=iid, seed=11)
    X, y = _script_reference(0.5, 0.5, 6, 7, 4, seed=11, iid=iid)
    assert data.counts.tolist() == [len(t) for t in y]
    for i in range(6):
        a, t = data.client_arrays(i)
        np.testing.assert_allclose(a, X[i], rtol=0, atol=1e-14)
        np.testing.assert_array_equal(t, y[i])


def test_shapes_dtypes_and_fixed_sizes():
    data = synthetic_fedprox(1.0, 1.0, 5, n_features=8, n_classes=3, samples_per_client=40)
    assert isinstance(data, ClientData)
    assert data.features.shape == (5, 40, 8) and data.targets.shape == (5, 40)
    assert data.features.dtype == np.float64 and data.targets.dtype == np.int64
    assert data.counts.tolist() == [40] * 5
    assert set(np.unique(data.targets)) <= {0, 1, 2}
    listed = synthetic_fedprox(1.0, 1.0, 3, n_features=8, samples_per_client=[5, 9, 2])
    assert listed.counts.tolist() == [5, 9, 2] and listed.max_samples == 9
    assert np.all(listed.features[2, 2:] == 0)            # padding stays zero
    f32 = synthetic_fedprox(1.0, 1.0, 2, n_features=4, n_classes=2, samples_per_client=10,
                            dtype=np.float32)
    assert f32.features.dtype == np.float32 and f32.targets.dtype == np.float32


def test_default_counts_are_lognormal_plus_50():
    data = synthetic_fedprox(0.0, 0.0, 20, n_features=2, seed=3)
    expected = np.floor(np.random.default_rng(3).lognormal(4.0, 2.0, 20)).astype(int) + 50
    assert data.counts.tolist() == expected.tolist()
    # the distribution itself (through the generator's first draw, without building data)
    from fedcomp.data._synthetic import _sample_counts

    counts = _sample_counts(np.random.default_rng(0), 20000, None)
    assert counts.min() >= 50
    extra = counts - 50
    assert abs(np.median(extra) / np.exp(4.0) - 1) < 0.05     # median of LogNormal(4, 2)
    assert abs(np.mean(extra < np.exp(6.0)) - 0.8413) < 0.01  # one sigma above
    # the counts are drawn even when fixed: client 0 does not change when later sizes do
    a = synthetic_fedprox(1.0, 1.0, 3, n_features=4, samples_per_client=30, seed=5)
    b = synthetic_fedprox(1.0, 1.0, 3, n_features=4, samples_per_client=[30, 1, 30], seed=5)
    np.testing.assert_array_equal(a.features[0], b.features[0])


def test_seed_reproducibility():
    kw = dict(n_features=6, n_classes=3, samples_per_client=25)
    a = synthetic_fedprox(1.0, 1.0, 4, seed=7, **kw)
    b = synthetic_fedprox(1.0, 1.0, 4, seed=7, **kw)
    c = synthetic_fedprox(1.0, 1.0, 4, seed=8, **kw)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.targets, b.targets)
    assert not np.allclose(a.features, c.features)


def test_two_classes_give_pm1_float_labels_and_unit_norm():
    sizes = [50, 80, 60, 50, 70, 90]
    data = synthetic_fedprox(10.0, 10.0, 6, n_classes=2, samples_per_client=sizes,
                             unit_norm=True, seed=0)
    feats, targs, _ = data.pooled()
    assert targs.dtype == np.float64 and set(np.unique(targs)) == {-1.0, 1.0}
    np.testing.assert_allclose(np.linalg.norm(feats, axis=1), 1.0, rtol=1e-12)
    raw = synthetic_fedprox(10.0, 10.0, 6, n_classes=2, samples_per_client=sizes, seed=0)
    np.testing.assert_array_equal(raw.targets, data.targets)    # labels come from raw features
    # ±1 is the 2-class argmax: class 1 → +1
    pm1 = synthetic_fedprox(1.0, 1.0, 3, n_features=5, n_classes=2, seed=2)
    _, y = _script_reference(1.0, 1.0, 3, 5, 2, seed=2)
    for i in range(3):
        np.testing.assert_array_equal(pm1.client_arrays(i)[1], np.where(y[i] == 1, 1.0, -1.0))


def test_heterogeneity_grows_with_beta():
    def spread(ab):
        data = synthetic_fedprox(*ab, 20, samples_per_client=200, seed=1)
        feature_means = data.features.mean(axis=(1, 2))
        hist = np.stack([np.bincount(t, minlength=10) / 200 for t in data.targets])
        return feature_means.std(), hist.max(axis=1).mean()   # mean shift, class dominance

    (f0, d0), (f10, d10) = spread((0.0, 0.0)), spread((10.0, 10.0))
    assert f10 > 10 * f0 and d10 > d0


def test_alpha_alone_never_changes_exact_labels():
    """u_k shifts all logits of a sample equally (see the Notes of synthetic_fedprox)."""
    a = synthetic_fedprox(0.0, 1.0, 5, n_features=10, samples_per_client=200, seed=4)
    b = synthetic_fedprox(10.0, 1.0, 5, n_features=10, samples_per_client=200, seed=4)
    np.testing.assert_array_equal(a.features, b.features)
    assert np.mean(a.targets == b.targets) > 0.999


def test_legacy_softmax_reproduces_the_overflow():
    kw = dict(n_classes=2, samples_per_client=200, seed=0)
    exact = synthetic_fedprox(10.0, 10.0, 10, **kw)
    legacy = synthetic_fedprox(10.0, 10.0, 10, legacy_softmax=True, **kw)
    differ = np.mean(exact.targets != legacy.targets)
    assert 0.05 < differ < 0.95
    assert np.mean(legacy.targets == -1.0) > np.mean(exact.targets == -1.0)  # biased to class 0
    small = dict(samples_per_client=100, seed=0)
    np.testing.assert_array_equal(
        synthetic_fedprox(1.0, 1.0, 5, **small).targets,
        synthetic_fedprox(1.0, 1.0, 5, legacy_softmax=True, **small).targets)


def test_feature_covariance_of_a_large_client():
    data = synthetic_fedprox(0.0, 1.0, 1, n_features=20, samples_per_client=40000, seed=9)
    x = data.client_arrays(0)[0]
    cov = np.cov(x, rowvar=False)
    np.testing.assert_allclose(np.diag(cov), np.arange(1, 21) ** -1.2, rtol=0.04)
    off = cov - np.diag(np.diag(cov))
    assert np.abs(off).max() < 0.02


def test_iid_variant_shares_one_model():
    def label_spread(iid):
        data = synthetic_fedprox(0.0, 0.0, 8, n_features=10, samples_per_client=800, iid=iid,
                                 seed=6)
        hist = np.stack([np.bincount(t, minlength=10) / 800 for t in data.targets])
        return np.abs(hist - hist.mean(axis=0)).sum(axis=1).mean()

    assert label_spread(True) < 0.15 < label_spread(False)


@pytest.mark.parametrize("kwargs, message", [
    (dict(alpha=-1.0), "standard deviations"),
    (dict(n_classes=1), "n_classes >= 2"),
    (dict(samples_per_client=0), "samples_per_client"),
    (dict(samples_per_client=[10, 10]), "samples_per_client"),
])
def test_synthetic_fedprox_rejects_bad_arguments(kwargs, message):
    args = dict(alpha=1.0, beta=1.0, n_clients=3, n_features=4, samples_per_client=10)
    with pytest.raises(ValueError, match=message):
        synthetic_fedprox(**{**args, **kwargs})


def test_registries_are_described_and_configurable():
    assert set(DATASETS) == set(DATASET_DESCRIPTIONS) and "synthetic_fedprox" in DATASETS
    assert set(PARTITIONERS) == set(PARTITIONER_DESCRIPTIONS)
    assert {"iid", "dirichlet", "shards", "quantity_skew"} <= set(PARTITIONERS)
    for generator in DATASETS.values():
        assert "seed" in inspect.signature(generator).parameters
    for partitioner in PARTITIONERS.values():
        assert "seed" in inspect.signature(partitioner).parameters


# --- partitioners ---------------------------------------------------------------------------
LABELS = np.repeat(np.arange(10), 60)          # 600 samples, 10 balanced classes
WRITERS = np.arange(len(LABELS)) % 40          # 40 writers of 15 samples, interleaved

CALLS = {
    "iid": lambda seed: partition_iid(len(LABELS), 20, seed=seed),
    "contiguous": lambda seed: partition_contiguous(len(LABELS), 20, seed=seed),
    "dirichlet": lambda seed: partition_dirichlet(LABELS, 20, 0.3, seed=seed),
    "shards": lambda seed: partition_shards(LABELS, 20, 2, seed=seed),
    "quantity_skew": lambda seed: partition_quantity_skew(len(LABELS), 20, 0.3, seed=seed),
    "writers": lambda seed: partition_groups(WRITERS, 20, seed=seed),
    "dirichlet_writers": lambda seed: partition_dirichlet_groups(WRITERS, 20, 0.3, seed=seed),
    "classes": lambda seed: PARTITIONERS["classes"](LABELS, 20, 2, seed=seed),
    "mixed": lambda seed: PARTITIONERS["mixed"](LABELS, 20, 0.3, 0.5, seed=seed),
    "flwr": lambda seed: PARTITIONERS["flwr"](LABELS, 20, "DirichletPartitioner", seed=seed,
                                              alpha=1.0, min_partition_size=1),
}


def test_calls_cover_the_registry():
    assert set(CALLS) == set(PARTITIONERS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_partition_is_a_disjoint_cover_of_nonempty_clients(name):
    parts = CALLS[name](0)
    assert len(parts) == 20
    assert all(len(p) >= 1 and p.dtype.kind == "i" for p in parts)
    allidx = np.concatenate(parts)
    assert len(allidx) == len(LABELS) and np.array_equal(np.sort(allidx), np.arange(len(LABELS)))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_partition_seed_reproducibility(name):
    a, b, c = CALLS[name](1), CALLS[name](1), CALLS[name](2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    if name == "contiguous":  # the rows in their own order: nothing random
        assert all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
        return
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_iid_sizes_differ_by_at_most_one():
    sizes = [len(p) for p in partition_iid(103, 10, seed=0)]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 103


def _label_skew(parts):
    """Mean total-variation distance of client label mixes from the global one."""
    glob = np.bincount(LABELS, minlength=10) / len(LABELS)
    tv = [0.5 * np.abs(np.bincount(LABELS[p], minlength=10) / len(p) - glob).sum() for p in parts]
    return float(np.mean(tv))


def test_dirichlet_small_concentration_is_more_skewed():
    skewed = _label_skew(partition_dirichlet(LABELS, 10, 0.05, seed=0))
    mild = _label_skew(partition_dirichlet(LABELS, 10, 100.0, seed=0))
    assert skewed > 0.5 > 0.15 > mild


def test_dirichlet_min_size_and_clear_errors():
    parts = partition_dirichlet(LABELS, 10, 0.1, seed=0, min_size=20)
    assert min(len(p) for p in parts) >= 20
    with pytest.raises(ValueError, match="no draw in"):
        partition_dirichlet(np.repeat([0, 1], 10), 10, 0.001, seed=0, min_size=2)
    with pytest.raises(ValueError, match="cannot give"):
        partition_dirichlet(LABELS, 100, 1.0, min_size=7)
    with pytest.raises(ValueError, match="concentration must be > 0"):
        partition_dirichlet(LABELS, 10, 0.0)
    # any label values (±1 floats)
    pm1 = np.where(np.arange(40) % 2, 1.0, -1.0)
    assert sum(len(p) for p in partition_dirichlet(pm1, 4, 1.0, seed=0)) == 40


def test_shards_give_few_labels_per_client():
    parts = partition_shards(LABELS, 20, 2, seed=0)         # 40 label-pure shards of 15
    assert all(len(np.unique(LABELS[p])) <= 2 for p in parts)
    assert {len(p) for p in parts} == {30}
    parts = partition_shards(LABELS, 10, 3, seed=0)         # 30 shards of 20: still pure
    assert all(len(np.unique(LABELS[p])) <= 3 for p in parts)
    with pytest.raises(ValueError, match="nonempty shards"):
        partition_shards(LABELS[:10], 6, 2)


def test_quantity_skew_sizes():
    def cv(concentration):
        sizes = np.array([len(p) for p in partition_quantity_skew(1000, 10, concentration,
                                                                  seed=0, min_size=5)])
        assert sizes.min() >= 5 and sizes.sum() == 1000
        return sizes.std() / sizes.mean()

    assert cv(0.1) > 1.0 > 0.2 > cv(1000.0)
    with pytest.raises(ValueError, match="cannot give"):
        partition_quantity_skew(10, 5, 1.0, min_size=3)


def test_split_to_clients_with_unequal_sizes():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.integers(0, 4, size=50)
    parts = partition_dirichlet(y, 5, 0.5, seed=1)
    data = split_to_clients(X, y, parts, dtype=np.float32)
    assert data.counts.tolist() == [len(p) for p in parts] and len(set(data.counts)) > 1
    assert data.features.dtype == np.float32 and data.targets.dtype == y.dtype
    for i, p in enumerate(parts):
        a, t = data.client_arrays(i)
        np.testing.assert_array_equal(a, X[p].astype(np.float32))
        np.testing.assert_array_equal(t, y[p])
    w = data.sample_weights()
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="indices in"):
        split_to_clients(X, y, [np.array([0, 50])])
    with pytest.raises(ValueError, match="feature rows"):
        split_to_clients(X, y[:-1], parts)


@pytest.mark.parametrize("concentration", [float("inf"), 1e308, float("nan"), "0.5", True])
def test_dirichlet_partitioners_refuse_concentrations_that_break_the_draw(concentration):
    """inf and 1e308 pass ``> 0`` but NumPy's Dirichlet draw then gives NaN or all-zero
    shares: samples duplicated, clients empty."""
    for call in (lambda: partition_dirichlet(LABELS, 10, concentration),
                 lambda: partition_quantity_skew(len(LABELS), 10, concentration),
                 lambda: partition_dirichlet_groups(WRITERS, 10, concentration)):
        with pytest.raises(ValueError, match="concentration"):
            call()


def test_dirichlet_shares_that_are_no_probability_vector_are_an_error(monkeypatch):
    from fedcomp.data import _partition

    monkeypatch.setattr(_partition, "_check_concentration", lambda name, c: None)
    with pytest.raises(ValueError, match="summing to 0.0, not 1"):
        partition_dirichlet(LABELS, 10, 1e308)  # Dir(1e308) underflows to zeros
    # a large but finite concentration is still near-uniform, and a cover
    parts = partition_quantity_skew(len(LABELS), 10, 1e6)
    assert sum(map(len, parts)) == len(LABELS) and max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("name", sorted(CALLS))
def test_partitioners_want_integer_counts_and_a_nonnegative_seed(name):
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        CALLS[name](-1)
    with pytest.raises(ValueError, match="seed must be an integer"):
        CALLS[name](1.5)
    assert [list(p) for p in CALLS[name](np.int64(3))] == [
        list(p) for p in CALLS[name](3)]


def test_partitioners_refuse_fractional_client_counts():
    for call in (lambda: partition_iid(100, 2.5), lambda: partition_iid(100, 2.0),
                 lambda: partition_dirichlet(LABELS, 2.5, 1.0),
                 lambda: partition_shards(LABELS, 2.5, 2),
                 lambda: partition_shards(LABELS, 4, 1.5),
                 lambda: partition_groups(WRITERS, 2.5)):
        with pytest.raises(ValueError, match=r"must be an integer \(got [12]\.5|\(got 2\.0"):
            call()
    assert len(partition_iid(100, np.int32(4))) == 4


def test_partitions_refuse_labels_that_are_not_class_ids():
    from fedcomp.data import partition_dirichlet, partition_shards

    one_hot = np.eye(3)[np.arange(30) % 3]
    with pytest.raises(ValueError, match=r"labels must be a 1-D array of class ids \(got shape "
                                         r"\(30, 3\)\); for one-hot labels pass"):
        partition_dirichlet(one_hot, 3, concentration=1.0)
    with pytest.raises(ValueError, match="labels must be a 1-D array"):
        partition_shards(one_hot, 3, shards_per_client=2)


def test_from_lists_keeps_every_clients_label_values():
    # client 0's integer labels once set the dtype: client 1's 0.7 became 0
    data = ClientData.from_lists([np.ones((2, 1)), np.ones((1, 1))],
                                 [np.array([1, 2]), np.array([0.7])])
    assert data.client_arrays(1)[1].tolist() == [0.7]


@pytest.mark.parametrize("make, key, kwargs", [
    ("bao_sparse_regression", "n_clients", dict(n_clients=2.5)),
    ("bao_lowrank_matrix", "samples_per_client", dict(samples_per_client=3.9)),
    ("synthetic_fedprox", "n_features", dict(alpha=1.0, beta=1.0, n_clients=3, n_features=5.5)),
    ("liang_sparse_linear", "samples_per_client",
     dict(n_clients=4, n_features=10, sparsity=2, samples_per_client=2.5)),
    ("liang_sparse_logistic", "n_clients", dict(n_clients=4.0, n_features=10, sparsity=2)),
])
def test_generators_refuse_fractional_counts(make, key, kwargs):
    # int() once truncated them: 2.5 clients made 2
    import fedcomp.data as data_module

    with pytest.raises(ValueError, match=rf"{key} must be an integer"):
        getattr(data_module, make)(**kwargs)


def test_sample_weights_weigh_the_loss_travel_with_the_data_and_match_on_jax(tmp_path):
    import fedcomp
    from fedcomp.losses import LeastSquares
    from fedcomp.regularizers import L1

    rng = np.random.default_rng(0)
    sizes = (5, 8, 6)
    X = [rng.normal(size=(n, 3)) for n in sizes]
    y = [rng.normal(size=n) for n in sizes]
    s = [rng.uniform(0.5, 2.0, size=n) for n in sizes]
    data = ClientData.from_lists(X, y, sample_weight=s)
    # a client's loss is its weighted mean; "samples" weighting uses the weights' totals
    problem = fedcomp.Problem(LeastSquares(), L1(0.0), data)
    pooled_x, pooled_y, pooled_s = np.concatenate(X), np.concatenate(y), np.concatenate(s)
    x = rng.normal(size=3)
    want = 0.5 * np.sum(pooled_s * (pooled_x @ x - pooled_y) ** 2) / pooled_s.sum()
    assert problem.objective(x) == pytest.approx(want, rel=1e-12)
    # minibatch weights are unbiased: their expectation is the full batch's
    draws = np.stack([rng.integers(0, n, size=(4,)) for n in sizes])
    batch = data.minibatch(np.arange(3), draws)
    normalised = np.asarray(data.sample_weights())
    expected = normalised[np.arange(3)[:, None], draws] * np.array(sizes)[:, None] / 4
    np.testing.assert_array_equal(np.asarray(batch.weights), expected)
    # saved, loaded and converted with the data
    back = ClientData.load(data.save(tmp_path / "d"))
    np.testing.assert_array_equal(back.sample_weight, data.sample_weight)
    pytest.importorskip("jax")
    from fedcomp.runtime import jax_like

    on_jax = data.to(jax_like())
    np.testing.assert_array_equal(on_jax.sample_weight, data.sample_weight)
    # the compiled engine's minibatches weigh the samples as NumPy's: the same iterates
    alg = fedcomp.za1(client_lr=0.2, local_steps=3)
    want = fedcomp.simulate(alg, problem, 4, batch_size=3, metrics=[], seed=2)
    got = fedcomp.simulate(alg, fedcomp.Problem(LeastSquares(), L1(0.0), on_jax), 4,
                           batch_size=3, metrics=[], seed=2)
    np.testing.assert_allclose(np.asarray(got.x), want.x, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="0 on the padding rows"):
        ClientData(data.features, data.targets, data.counts,
                   sample_weight=np.ones(data.features.shape[:2]))


def test_sample_weights_are_made_once_on_the_device_and_indexed_after():
    """One array per ClientData on the data's device: every call's rows are that array's
    (a GPU round no longer copies n_clients x max_samples floats from the host at each full
    batch), equal to the weights made from the counts (or sample_weight) on the host."""
    torch = pytest.importorskip("torch")
    from fedcomp import ClientData

    rng = np.random.default_rng(3)
    counts = [3, 1, 4, 2]
    feats = [rng.normal(size=(c, 2)) for c in counts]
    targs = [rng.normal(size=c) for c in counts]
    plain = ClientData.from_lists(feats, targs)
    weighted = ClientData.from_lists(feats, targs,
                                     sample_weight=[rng.uniform(0.5, 2, size=c) for c in counts])
    for data in (plain, weighted):
        moved = data.to(torch.zeros(0, dtype=torch.float64))
        full = moved.sample_weights()
        assert moved.sample_weights() is full  # made once
        if data.sample_weight is None:
            want = (np.arange(4)[None, :] < np.array(counts)[:, None]) / np.array(counts)[:, None]
        else:
            want = data.sample_weight / data.sample_weight.sum(axis=1, keepdims=True)
        np.testing.assert_array_equal(full.numpy(), want)
        np.testing.assert_array_equal(moved.sample_weights(slice(1, 3)).numpy(), want[1:3])
        np.testing.assert_array_equal(moved.sample_weights(np.array([3, 0])).numpy(),
                                      want[[3, 0]])
        assert moved.subset(np.array([2])).sample_weights().numpy().tolist() == [
            want[2].tolist()]

