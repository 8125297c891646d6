"""Synthetic federated data sets of the papers.

``synthetic_fedprox`` is the Synthetic(α, β) generator of Li, Sahu, Zaheer, Sanjabi,
Talwalkar, Smith, "Federated Optimization in Heterogeneous Networks", MLSys 2020 (FedProx),
Section 5.1 and Appendix C.1, following the authors' script ``data/synthetic_*/
generate_synthetic.py`` (github.com/litian96/FedProx) draw for draw. Composite FL papers
reuse it, e.g. Zhang, Hu, Johansson, "Composite Federated Learning with Heterogeneous
Data", ICASSP 2024 (two classes, ±1 labels, (α, β) = (10, 10)).

Generators run on the host in NumPy and return a :class:`ClientData`; move it to another
backend with :meth:`ClientData.to`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._client_data import ClientData
from ._partition import check_integer


def _sample_counts(rng: np.random.Generator, n_clients: int,
                   samples_per_client: int | Sequence[int] | None) -> np.ndarray:
    # Drawn even when the caller fixes the sizes, so that u_k, B_k, v_k (and client 0
    # entirely) of a seed do not depend on samples_per_client.
    drawn = np.floor(rng.lognormal(4.0, 2.0, n_clients)).astype(np.int64) + 50
    if samples_per_client is None:
        return drawn
    counts = np.broadcast_to(np.asarray(samples_per_client), (n_clients,)) \
        if np.ndim(samples_per_client) == 0 else np.asarray(samples_per_client)
    if counts.shape != (n_clients,) or not np.issubdtype(counts.dtype, np.integer) \
            or (counts < 1).any():
        raise ValueError(f"synthetic_fedprox: samples_per_client must be a positive int or "
                         f"{n_clients} positive ints, one per client (got {samples_per_client!r})")
    return counts.astype(np.int64)


def _labels(logits: np.ndarray, legacy_softmax: bool) -> np.ndarray:
    if not legacy_softmax:
        return np.argmax(logits, axis=1)  # = argmax softmax, without overflow
    # The original evaluates softmax(t) = exp(t)/sum(exp(t)) in float64 without shifting:
    # a logit above ~709.78 overflows to inf, inf/inf is NaN and np.argmax returns the first
    # NaN — the first overflowing class, not the largest one (all logits below ~−745 give
    # 0/0 and class 0). Reproduced literally.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(logits.astype(np.float64))
        return np.argmax(e / e.sum(axis=1, keepdims=True), axis=1)


def synthetic_fedprox(
    alpha: float,
    beta: float,
    n_clients: int,
    n_features: int = 60,
    n_classes: int = 10,
    samples_per_client: int | Sequence[int] | None = None,
    unit_norm: bool = False,
    iid: bool = False,
    seed: int = 0,
    dtype: Any = np.float64,
    legacy_softmax: bool = False,
) -> ClientData:
    r"""FedProx's Synthetic(α, β): heterogeneous multinomial-logistic clients.

    Parameters
    ----------
    alpha : float
        Standard deviation of the client means ``u_k`` of the local models (model
        heterogeneity). Synthetic(0, 0), (0.5, 0.5), (1, 1) in FedProx; (10, 10) in seed 000.
    beta : float
        Standard deviation of the client shifts ``B_k`` of the feature means (feature
        heterogeneity).
    n_clients : int
        Number of clients (FedProx: 30).
    n_features : int, default 60
        Dimension d.
    n_classes : int, default 10
        Number of classes C >= 2. With ``C = 2`` the targets are ±1 floats (class 1 → +1,
        class 0 → −1), the convention of binary :class:`~fedcomp.losses.Logistic`; otherwise
        integer class ids ``0 … C−1``.
    samples_per_client : int or sequence of int, optional
        Samples of each client. Default: FedProx's heavy-tailed sizes
        ``floor(LogNormal(4, 2)) + 50`` (mean of the underlying normal 4, std 2), so at least
        50 and occasionally tens of thousands — the padded arrays follow the largest client.
    unit_norm : bool, default False
        Scale every sample to unit ℓ2 norm after labelling (seed 000 does, so that its step
        η = 1 fits L ≈ 1/4 + ϑ₂).
    iid : bool, default False
        FedProx's Synthetic-IID variant as the authors' script implements it: one global
        ``W, b ~ N(0, 1)`` and feature means ``v_k = B_k·1`` (zero for β = 0).
    seed : int, default 0
        Seed of the single ``np.random.default_rng`` that makes every draw.
    dtype : numpy dtype, default float64
        Dtype of the features (and of ±1 targets).
    legacy_softmax : bool, default False
        Label as the original script literally does, through an unshifted float64 softmax:
        when logits overflow (|logit| ≳ 709, common from α, β ≈ 3 on) it picks the first
        overflowing class instead of the largest logit (all logits below ≈ −745 give class
        0). Default: ``argmax(W_kᵀx + b_k)``, the paper's definition. The two agree in
        practice for FedProx's (α, β) ≤ (1, 1); at (10, 10) they differ on roughly 25–45 %
        of the samples with two classes and most of them with ten.

    Returns
    -------
    ClientData
        Features ``(n_clients, max_k n_k, d)``, targets ``(n_clients, max_k n_k)``.

    Notes
    -----
    Client k's data follow

    .. math::

        u_k \sim N(0, \alpha^2),\; W_k \in R^{d\times C}, b_k \in R^C \text{ with entries }
        \sim N(u_k, 1),\quad B_k \sim N(0, \beta^2),\; (v_k)_j \sim N(B_k, 1),

        x \sim N(v_k, \Sigma),\; \Sigma = \operatorname{diag}((j+1)^{-1.2})_{j=0}^{d-1},\qquad
        y = \arg\max_c \operatorname{softmax}(W_k^\top x + b_k)_c .

    Draw order (that of ``generate_synthetic.py``): the sample counts (always drawn); the
    ``u_k`` of all clients; the ``B_k``; the ``v_k`` client by client (skipped when
    ``iid``); when ``iid`` the global ``W`` then ``b``; then client by client ``W_k``,
    ``b_k`` (drawn even when ``iid`` replaces them, as in the script) and its ``n_k``
    features. A feature block is ``v_k + √diag(Σ) ⊙ z`` with ``z`` standard normal of shape
    ``(n_k, d)`` — exactly what ``rng.multivariate_normal(v_k, Σ, n_k, method="cholesky")``
    returns, without the factorisation. The stream is NumPy's ``Generator``, not the
    unseeded legacy ``np.random`` of the script, so the numbers themselves differ from any
    file the script wrote.

    Since every entry of ``W_k`` and ``b_k`` has mean ``u_k``, α adds the same
    ``u_k (1ᵀx + 1)`` to all C logits of a sample and never changes its argmax: with exact
    labels the data do not depend on α at all (the same seed gives the same arrays for any
    α, up to rounding at near-ties of logits; only β and the per-client noise make clients
    differ). α acts only through the overflow of ``legacy_softmax``.

    References
    ----------
    T. Li, A. K. Sahu, M. Zaheer, M. Sanjabi, A. Talwalkar, V. Smith, "Federated Optimization
    in Heterogeneous Networks", MLSys 2020.

    Examples
    --------
    >>> data = synthetic_fedprox(1.0, 1.0, n_clients=3, samples_per_client=100, seed=1)
    >>> data.features.shape, data.counts.tolist(), data.targets.dtype
    ((3, 100, 60), [100, 100, 100], dtype('int64'))
    >>> binary = synthetic_fedprox(10.0, 10.0, 4, n_classes=2, samples_per_client=50,
    ...                            unit_norm=True)
    >>> sorted(set(binary.targets.ravel().tolist()))
    [-1.0, 1.0]
    """
    if not (alpha >= 0 and beta >= 0):
        raise ValueError(f"synthetic_fedprox: alpha and beta are standard deviations, >= 0 "
                         f"(got alpha={alpha!r}, beta={beta!r})")
    n_clients, n_features, n_classes = (
        check_integer("synthetic_fedprox", key, value) for key, value in
        (("n_clients", n_clients), ("n_features", n_features), ("n_classes", n_classes)))
    if n_clients < 1 or n_features < 1 or n_classes < 2:
        raise ValueError(f"synthetic_fedprox: need n_clients >= 1, n_features >= 1, "
                         f"n_classes >= 2 (got {n_clients}, {n_features}, {n_classes})")
    n, d, c = int(n_clients), int(n_features), int(n_classes)
    rng = np.random.default_rng(seed)

    counts = _sample_counts(rng, n, samples_per_client)
    model_mean = rng.normal(0.0, alpha, n)        # u_k: mean of W_k and of b_k
    feature_shift = rng.normal(0.0, beta, n)      # B_k
    if iid:
        feature_mean = np.ones((n, d)) * feature_shift[:, None]
    else:  # row k holds client k's d draws, in the order of the script's loop
        feature_mean = rng.normal(feature_shift[:, None], 1.0, (n, d))
    cov_sqrt = np.sqrt(np.arange(1, d + 1, dtype=np.float64) ** -1.2)
    if iid:
        w_global = rng.normal(0.0, 1.0, (d, c))
        b_global = rng.normal(0.0, 1.0, c)

    feats, targs = [], []
    for k in range(n):
        w = rng.normal(model_mean[k], 1.0, (d, c))
        b = rng.normal(model_mean[k], 1.0, c)
        if iid:
            w, b = w_global, b_global
        x = feature_mean[k] + cov_sqrt * rng.standard_normal((int(counts[k]), d))
        y = _labels(x @ w + b, legacy_softmax)
        if unit_norm:
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
        feats.append(x)
        targs.append(np.where(y == 1, 1.0, -1.0) if c == 2 else y.astype(np.int64))
    return ClientData.from_lists(feats, targs, dtype=dtype)


__all__ = ["synthetic_fedprox"]
