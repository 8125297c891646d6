"""Sparse text-like data shaped like rcv1 and news20 (fedcomp.data.sparse_text_like)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp.data import SHAPES, sparse_text_like


def test_rcv1_shaped_data_have_its_shape_density_and_a_power_law():
    data = sparse_text_like("rcv1")
    X = data.features
    n, d, density = SHAPES["rcv1"]
    assert X.shape == (n, d) and X.format == "csr"
    assert abs(X.nnz / (n * d) - density) < 0.02 * density
    # memory in the nonzeros: values, column indices and row pointers only
    assert X.data.nbytes + X.indices.nbytes + X.indptr.nbytes < 16 * X.nnz + 8 * (n + 1)
    np.testing.assert_allclose(np.sqrt(X.multiply(X).sum(axis=1)).A1, 1.0, rtol=1e-12)
    counts = np.sort(np.bincount(X.indices, minlength=d))[::-1]
    assert counts[: d // 100].sum() > 0.3 * X.nnz  # 1 % of the words: a third of the entries
    assert np.median(counts) < 0.01 * n  # and most words are rare
    assert abs((data.labels > 0).mean() - 0.5) < 0.01
    assert np.count_nonzero(data.ground_truth) == 200


def test_topics_make_clients_split_by_topic_heterogeneous():
    data = sparse_text_like((4000, 5000, 0.01), n_topics=4, seed=3)
    X = data.features

    def top_words(topic: int) -> set[int]:
        rows = X[data.topics == topic]
        return set(np.argsort(np.bincount(rows.indices, minlength=5000))[-100:].tolist())

    shared = len(top_words(0) & top_words(1))
    assert 0 < shared < 80  # the shared ranking in common, each topic's own words apart
    again = sparse_text_like((4000, 5000, 0.01), n_topics=4, seed=3)
    assert (again.features != X).nnz == 0 and np.array_equal(again.labels, data.labels)
    assert (sparse_text_like((4000, 5000, 0.01), n_topics=4, seed=4).features != X).nnz > 0


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="0 < density <= 1"):
        sparse_text_like((10, 10, 0.0))
    with pytest.raises(KeyError):
        sparse_text_like("url")
