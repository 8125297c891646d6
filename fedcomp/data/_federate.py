"""Pooled data (features and labels of every sample) as federated client data.

A pooled data set becomes client data by a partitioner (:data:`fedcomp.data.PARTITIONERS`),
named in a configuration as ``partition = "iid"`` or ``partition = {name = "dirichlet",
concentration = 0.2}`` (:func:`federate`); :func:`breast_cancer` is scikit-learn's bundled
Wisconsin breast-cancer set (569 × 30, binary), real data that needs no download.

References
----------
Street, Wolberg, Mangasarian, "Nuclear feature extraction for breast tumor diagnosis", 1993.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._extras import require
from ._client_data import ClientData
from ._partition import PARTITIONERS, _rng

#: Environment variable naming the directory of downloaded / user-provided data files.

# --- pooled data → clients -----------------------------------------------------------------
def partition_spec(partition: Any) -> tuple[str, dict[str, Any]]:
    """``"iid"`` or ``{"name": "dirichlet", "concentration": 0.2}`` → (name, params), checked.

    The partitioner's ``n_clients``, ``seed`` and data arguments come from the data set;
    the spec names the scheme and its own parameters only.

    Examples
    --------
    >>> partition_spec({"name": "dirichlet", "concentration": 0.2})
    ('dirichlet', {'concentration': 0.2})
    """
    if isinstance(partition, str):
        name, params = partition, {}
    elif isinstance(partition, dict) and isinstance(partition.get("name"), str):
        # feature_noise applies to any scheme's split (partition_noise), not to the scheme
        params = {k: v for k, v in partition.items() if k not in ("name", FEATURE_NOISE)}
        name = partition["name"]
    else:
        raise ValueError(f"partition must be a name or a table with a 'name' key, e.g. "
                         f"{{name = \"dirichlet\", concentration = 0.2}} (got {partition!r})")
    PARTITIONERS.check_keys(name, params, f"partition {name!r}")
    return name, params


def add_feature_noise(data: ClientData, sigma: float, seed: int = 0) -> ClientData:
    """Feature skew by noise: client i's features plus Gaussian noise of standard deviation
    ``sigma · i / (N − 1)`` (client 0 keeps its data, client N − 1 gets ``sigma``).

    NIID-Bench's noise-based feature imbalance (Li, Diao, Chen, He, ICDE 2022, Section
    IV-C: ``x̂ ~ Gau(σ · i/N)`` on an even split; its code divides by ``N − 1`` so that the
    last client gets ``σ``, as here). The noise is drawn once, from ``seed``, for the real
    samples only (the padding stays zero). Dense features only: noise would fill every
    zero of sparse ones.

    Examples
    --------
    >>> from fedcomp.data import ClientData
    >>> data = ClientData.from_lists([np.zeros((400, 2))] * 3, [np.zeros(400)] * 3)
    >>> noisy = add_feature_noise(data, 1.0, seed=0)
    >>> [round(float(noisy.features[i, :400].std()), 1) for i in range(3)]
    [0.0, 0.5, 1.0]
    """
    if not (isinstance(sigma, numbers.Real) and not isinstance(sigma, bool)
            and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"feature_noise must be a finite number >= 0, the last client's noise "
                         f"standard deviation (got {sigma!r})")
    if data.sparse:
        raise ValueError("feature_noise adds dense noise to every feature: it needs dense "
                         "features (these are sparse); drop feature_noise or densify first")
    features = np.asarray(data.features)
    n = data.n_clients
    rng = np.random.default_rng([_rng("feature_noise", seed).integers(2**63), 0x6E6F697365])
    scale = sigma * np.arange(n) / max(n - 1, 1)
    noise = rng.standard_normal(features.shape) * scale.reshape(-1, *[1] * (features.ndim - 1))
    real = np.arange(features.shape[1])[None, :] < np.asarray(data.counts)[:, None]
    noise *= real.reshape(*real.shape, *[1] * (features.ndim - 2))
    return replace(data, features=(features + noise).astype(features.dtype))


def split_to_clients(features: Any, targets: Any, parts: Sequence[Any], dtype: Any = np.float64
                     ) -> ClientData:
    """Stack the samples of each part into a padded :class:`ClientData`.

    Parameters
    ----------
    features : array, shape (n_samples, *feature_shape), or a scipy.sparse matrix
        A sparse matrix gives sparse client data (:meth:`ClientData.from_lists`).
    targets : array, shape (n_samples,)
    parts : sequence of int arrays
        Client i's sample indices (a partitioner's output).
    dtype : numpy dtype, default float64
        Dtype of the features (and of float targets; integer targets stay integer).

    Returns
    -------
    ClientData

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(12.0).reshape(6, 2), np.array([0, 1, 0, 1, 0, 1])
    >>> from fedcomp.data import partition_iid
    >>> data = split_to_clients(X, y, partition_iid(6, 2, seed=0))
    >>> data.features.shape, data.counts.tolist()
    ((2, 3, 2), [3, 3])
    """
    from ._sparse import is_sparse_matrix

    if is_sparse_matrix(features):  # rows of a sparse matrix stay sparse (CSR, one per client)
        from scipy import sparse

        features = sparse.csr_array(features)
    else:
        features = np.asarray(features)
    targets = np.asarray(targets)
    if features.shape[0] != len(targets):
        raise ValueError(f"split_to_clients: {features.shape[0]} feature rows but "
                         f"{len(targets)} targets")
    parts = [np.asarray(p, dtype=np.int64) for p in parts]
    for i, p in enumerate(parts):
        if p.ndim != 1 or (len(p) and (p.min() < 0 or p.max() >= len(targets))):
            raise ValueError(f"split_to_clients: part {i} must be a 1-D array of indices in "
                             f"[0, {len(targets)})")
    return ClientData.from_lists([features[p] for p in parts], [targets[p] for p in parts],
                                 dtype=dtype)



#: The partition key that adds feature skew to any scheme (:func:`add_feature_noise`).
FEATURE_NOISE = "feature_noise"


def partition_noise(partition: Any) -> float:
    """The ``feature_noise`` of a partition spec (0 without one): the last client's noise
    standard deviation, :func:`~fedcomp.data.add_feature_noise`.

    Examples
    --------
    >>> partition_noise({"name": "iid", "feature_noise": 0.1}), partition_noise("iid")
    (0.1, 0.0)
    """
    if not isinstance(partition, dict):
        return 0.0
    sigma = partition.get(FEATURE_NOISE, 0.0)
    if not (isinstance(sigma, int | float) and not isinstance(sigma, bool)
            and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"partition: feature_noise must be a finite number >= 0, the last "
                         f"client's noise standard deviation (got {sigma!r})")
    return float(sigma)


def federate(features: Any, labels: Any, n_clients: int, partition: Any = "iid", seed: int = 0,
             dtype: Any = np.float64, groups: Any = None) -> ClientData:
    """Split a pooled data set among clients with a named partitioner.

    Parameters
    ----------
    features : array, shape (n_samples, *feature_shape)
    labels : array, shape (n_samples,)
    n_clients : int
    partition : str or dict, default "iid"
        A partitioner of :data:`fedcomp.data.PARTITIONERS` and its parameters
        (:func:`partition_spec`), e.g. ``{"name": "dirichlet", "concentration": 0.2}``;
        ``feature_noise = σ`` adds feature skew to any of them
        (:func:`~fedcomp.data.add_feature_noise`: client i's features get noise of standard
        deviation ``σ·i/(N − 1)``).
    seed : int, default 0
        Seeds the partition (and the noise).
    dtype : numpy dtype, default float64
    groups : array, shape (n_samples,), optional
        The writer (group) of each sample, for the partitioners by writer (``"writers"``,
        ``"dirichlet_writers"``).

    Returns
    -------
    ClientData

    Examples
    --------
    >>> X, y = np.arange(20.0).reshape(10, 2), np.array([1.0, -1.0] * 5)
    >>> federate(X, y, 3, {"name": "dirichlet", "concentration": 1.0}).n_clients
    3
    """
    name, params = partition_spec(partition)
    registry = PARTITIONERS
    fn = registry[name]
    labels = np.asarray(labels)
    first = registry.parameters(name)[0]  # what the partitioner splits: labels, groups, a count
    if first == "groups" and groups is None:
        raise ValueError(f"partition {name!r} splits by writer, but this data set has no writer "
                         "ids; use it with digits or femnist, or choose another partition")
    data_arg = {"labels": labels, "groups": groups}.get(first, len(labels))
    sigma = partition_noise(partition)
    parts = fn(data_arg, n_clients, seed=seed, **params)
    data = split_to_clients(features, labels, parts, dtype=dtype)
    return add_feature_noise(data, sigma, seed) if sigma else data


def _standardize(features: Any) -> Any:
    """Zero mean, unit variance per feature (constant features are left at zero).

    Sparse features are scaled to unit variance without centering (centering would fill
    every zero: scikit-learn's ``StandardScaler(with_mean=False)`` does the same).
    """
    from ._sparse import is_sparse_matrix

    if is_sparse_matrix(features):
        from scipy import sparse

        features = sparse.csr_array(features)
        mean = np.asarray(features.mean(axis=0)).ravel()
        variance = np.asarray(features.multiply(features).mean(axis=0)).ravel() - mean**2
        std = np.sqrt(np.clip(variance, 0.0, None))
        return features @ sparse.diags_array(1.0 / np.where(std > 0, std, 1.0))
    std = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(std > 0, std, 1.0)


def breast_cancer(n_clients: int = 10, partition: Any = "iid", seed: int = 0,
                  standardize: bool = True, unit_norm: bool = False) -> ClientData:
    """scikit-learn's bundled breast-cancer set (569 samples, 30 features) split among clients.

    Parameters
    ----------
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`federate` (``{"name": "dirichlet", "concentration": 0.2}`` gives label
        skew).
    seed : int, default 0
        Seeds the partition.
    standardize : bool, default True
        Scale every feature to zero mean and unit variance over the pooled set.
    unit_norm : bool, default False
        Then scale every sample to unit ℓ2 norm (so a logistic loss has ``L ≤ 1/4``).

    Returns
    -------
    ClientData
        Labels ±1 (+1 = benign), for the logistic loss.

    Examples
    --------
    >>> data = breast_cancer(n_clients=5, partition={"name": "dirichlet", "concentration": 1.0})
    >>> data.n_clients, data.n_samples, data.feature_shape
    (5, 569, (30,))
    """
    datasets = require("sklearn.datasets", "fedcomp.data.breast_cancer")
    bunch = datasets.load_breast_cancer()
    features = np.asarray(bunch.data, dtype=np.float64)
    labels = np.where(np.asarray(bunch.target) == 1, 1.0, -1.0)
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


def _prepare(features: Any, labels: np.ndarray, n_clients: int, partition: Any,
             seed: int, standardize: bool, unit_norm: bool, groups: Any = None) -> ClientData:
    from ._sparse import is_sparse_matrix

    if standardize:
        features = _standardize(features)
    if unit_norm and is_sparse_matrix(features):
        from scipy import sparse

        features = sparse.csr_array(features)
        norms = np.sqrt(np.asarray(features.multiply(features).sum(axis=1)).ravel())
        features = sparse.diags_array(1.0 / np.where(norms > 0, norms, 1.0)) @ features
    elif unit_norm:
        norms = np.linalg.norm(features, axis=1, keepdims=True)
        features = features / np.where(norms > 0, norms, 1.0)
    return federate(features, labels, n_clients, partition, seed, groups=groups)


LABELINGS = ("as_written", "binary", "classes")


def relabel(labels: np.ndarray, labeling: str = "as_written",
            n_classes: int | None = None) -> np.ndarray:
    """Map a file's labels to what the losses are defined on.

    Parameters
    ----------
    labels : ndarray, shape (n_samples,)
    labeling : {"as_written", "binary", "classes"}, default "as_written"
        ``"binary"``: exactly two distinct labels, the smaller → −1 and the larger → +1
        (LIBSVM's binary sets write ±1, 0/1 or 1/2; :class:`~fedcomp.losses.Logistic`
        needs ±1). ``"classes"``: the distinct labels in increasing order → ``0 … k−1``
        (multiclass sets number classes from 1; :class:`~fedcomp.losses.Softmax` needs ids
        from 0).
    n_classes : int, optional
        With ``"classes"``: the number of classes the model has; more distinct labels is an
        error.

    Examples
    --------
    >>> relabel(np.array([2.0, 1.0, 2.0]), "binary").tolist()
    [1.0, -1.0, 1.0]
    >>> relabel(np.array([3.0, 1.0, 2.0]), "classes").tolist()
    [2.0, 0.0, 1.0]
    """
    if labeling not in LABELINGS:
        raise ValueError(f"labels must be one of {LABELINGS} (got {labeling!r})")
    if labeling == "as_written":
        return labels
    found, ids = np.unique(labels, return_inverse=True)
    if labeling == "binary":
        if len(found) != 2:
            raise ValueError(f"labels='binary' needs exactly two distinct labels, found "
                             f"{len(found)}: {found[:8].tolist()}; use labels='classes' for a "
                             "multiclass file")
        return np.where(ids == 1, 1.0, -1.0)
    if n_classes is not None and len(found) > n_classes:
        raise ValueError(f"the file has {len(found)} distinct labels {found[:8].tolist()} but "
                         f"n_classes={n_classes}; raise n_classes")
    return ids.astype(np.float64)


