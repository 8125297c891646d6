"""Sparse, high-dimensional text-like data, shaped like the sets sparse learners are measured on.

rcv1.binary (20 242 × 47 236, 0.16 % nonzeros) and news20.binary (19 996 × 1 355 191,
0.03 %) are bags of words: each row a document with a few dozen to a few hundred words,
word frequencies following a power law (a few words in most documents, most words in very
few), tf-idf values normalised to a unit row. They cannot be downloaded here, so
:func:`sparse_text_like` draws data of the same shape, density and column-frequency law,
with a latent topic per document that makes a split by topic heterogeneous:

* each topic ranks the vocabulary its own way — half of a document's words come from the
  shared ranking, half from its topic's, both Zipf-distributed, ``P(rank r) ∝ r^{-a}``;
* the labels come from a sparse ground-truth model, ``y = sign(aᵀw* + noise)``, whose
  support is among the frequent words, so an ℓ1-regularized fit has something to find.

The result is a :class:`scipy.sparse.csr_matrix` (memory proportional to the nonzeros),
the ±1 labels, each row's topic and ``w*``. To run on the real files, download them from
the LIBSVM site and read them with :func:`fedcomp.data.load_libsvm`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: The shapes of the real sets: samples, features, density (fraction of nonzeros).
SHAPES = {"rcv1": (20_242, 47_236, 0.0016), "news20": (19_996, 1_355_191, 0.0003)}


class SparseText(NamedTuple):
    """What :func:`sparse_text_like` draws."""

    features: Any  # scipy.sparse.csr_matrix (n_samples, n_features), unit rows
    labels: np.ndarray  # ±1
    topics: np.ndarray  # each row's latent topic, 0 .. n_topics - 1
    ground_truth: np.ndarray  # the sparse w* behind the labels


def _zipf(n: int, exponent: float) -> np.ndarray:
    """The probabilities ``∝ r^{-exponent}`` of ranks ``1 .. n``."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def _draw(rng: Any, n: int, draws: float, d: int, probabilities: np.ndarray,
          topics: np.ndarray, shared: np.ndarray, by_topic: np.ndarray, sparse: Any) -> Any:
    """``n`` documents of about ``draws`` words each (Poisson), half from the shared
    ranking and half from their topic's, as tf-idf-like counts (CSR, duplicates summed)."""
    per_row = rng.poisson(draws, size=n).clip(1, None)
    rows = np.repeat(np.arange(n), per_row)
    ranks = rng.choice(d, size=rows.size, p=probabilities)
    own = rng.random(rows.size) < 0.5
    words = np.where(own, by_topic[topics[rows], ranks], shared[ranks])
    # a word's count weighs by its rarity (an idf); repeated words add up
    values = np.log1p(d / (1.0 + ranks))
    matrix = sparse.coo_matrix((values, (rows, words)), shape=(n, d)).tocsr()
    matrix.sum_duplicates()
    return matrix


def sparse_text_like(shape: str | tuple[int, int, float] = "rcv1", n_topics: int = 20,
                     exponent: float = 1.1, support: int = 200, noise: float = 0.1,
                     seed: int = 0) -> SparseText:
    """Documents shaped like ``shape`` (a name of :data:`SHAPES`, or ``(samples,
    features, density)``), drawn reproducibly from ``seed``.

    Parameters
    ----------
    shape : "rcv1", "news20" or (n_samples, n_features, density)
    n_topics : int, default 20
        Latent topics; each document has one, and each topic its own word ranking.
    exponent : float, default 1.1
        The Zipf exponent ``a`` of the word frequencies.
    support : int, default 200
        Nonzeros of ``w*``, drawn among the 10 % most frequent words of the shared
        ranking.
    noise : float, default 0.1
        Standard deviation of the noise added to the margins before their sign, relative
        to the margins' own.
    seed : int, default 0

    Examples
    --------
    >>> data = sparse_text_like((500, 2000, 0.01), n_topics=4)
    >>> data.features.shape, round(data.features.nnz / (500 * 2000), 4)
    ((500, 2000), 0.0099)
    >>> sorted(set(data.labels.tolist())), int(data.topics.max())
    ([-1.0, 1.0], 3)
    """
    from scipy import sparse

    n, d, density = SHAPES[shape] if isinstance(shape, str) else shape
    if not (n >= 1 and d >= 1 and 0 < density <= 1 and n_topics >= 1 and support >= 1):
        raise ValueError(f"sparse_text_like: need samples, features, n_topics, support >= 1 "
                         f"and 0 < density <= 1 (got shape={shape!r}, n_topics={n_topics}, "
                         f"support={support})")
    rng = np.random.default_rng(seed)
    topics = rng.integers(n_topics, size=n)
    shared = rng.permutation(d)  # the shared ranking: rank -> word
    by_topic = np.stack([rng.permutation(d) for _ in range(n_topics)]) if n_topics > 1 \
        else shared[None, :]
    probabilities = _zipf(d, exponent)
    # a document repeats its frequent words, which merge into one entry: the words drawn
    # per row are raised until the distinct ones give the density (measured on a tenth)
    draws = density * d
    for _ in range(3):
        sample = _draw(rng, min(n, max(200, n // 10)), draws, d, probabilities, topics,
                       shared, by_topic, sparse)
        draws *= density * d / max(sample.nnz / sample.shape[0], 1e-12)
    matrix = _draw(rng, n, draws, d, probabilities, topics, shared, by_topic, sparse)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    matrix = sparse.diags(1.0 / norms) @ matrix
    truth = np.zeros(d)
    frequent = shared[: max(support, d // 10)]
    chosen = rng.choice(frequent, size=min(support, frequent.size), replace=False)
    truth[chosen] = rng.normal(size=chosen.size)
    margins = matrix @ truth
    margins = margins + noise * (np.std(margins) or 1.0) * rng.normal(size=n)
    # the median as threshold: as many positive documents as negative ones
    labels = np.where(margins > np.median(margins), 1.0, -1.0)
    return SparseText(matrix.tocsr(), labels, topics, truth)


def sparse_text_clients(shape: str | tuple[int, int, float] = "rcv1", n_clients: int = 100,
                        concentration: float = 0.5, n_topics: int = 20, seed: int = 0,
                        dtype: Any = np.float64) -> Any:
    """:func:`sparse_text_like` documents split among clients by their latent topic.

    Each topic's documents are spread over the clients in ``Dir(concentration)`` shares
    (:func:`~fedcomp.data.partition_dirichlet` on the topics), so a client holds a few
    topics mostly: its frequent words, and the part of ``w*`` they reveal, differ from
    another's — heterogeneous clients, as a split of a real corpus by source would give.
    The features stay sparse (:class:`~fedcomp.data._sparse.SparseFeatures`).

    Parameters
    ----------
    shape : "rcv1", "news20" or (n_samples, n_features, density)
    n_clients : int, default 100
    concentration : float, default 0.5
        Smaller is more heterogeneous.
    n_topics : int, default 20
    seed : int, default 0
        Seeds the documents and the split.
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData
        ±1 labels, for :class:`~fedcomp.losses.Logistic`.

    Examples
    --------
    >>> data = sparse_text_clients((600, 3000, 0.01), n_clients=6, n_topics=4)
    >>> data.sparse, data.n_clients, data.n_samples, data.feature_shape
    (True, 6, 600, (3000,))
    """
    from ._federate import split_to_clients
    from ._partition import partition_dirichlet

    text = sparse_text_like(shape, n_topics=n_topics, seed=seed)
    parts = partition_dirichlet(text.topics, n_clients, concentration, seed=seed)
    return split_to_clients(text.features, text.labels, parts, dtype=dtype)
