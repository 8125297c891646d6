"""Decentralized sparse regression data of Liang, Peng, Zhang (2023), Section 7 / Appendix D.

Every client m has a dense, distinct local optimum ``w̃^m`` while the optimum ``w*`` of the
average objective is s-sparse ("client-specific effects vanish at the population level"):

* **linear** — ``x = (1, σ₁ g)``, ``g ~ N(0, I_{d−1})`` (the bias coordinate has mean 1 and
  variance 0), ``y = ⟨x, w̃^m⟩ + σ₂ e``. ``w̃^m = w* + δ^m`` with dense ``δ^m`` summing to 0,
  so ``w* = avg_m w̃^m`` (Lemma D.1) and the population objective is closed form (eq. 47):
  ``f(w) = ½{σ₂² + Σ_m π_m [(w̃^m_1 − w_1)² + σ₁² ‖w̃^m_{−1} − w_{−1}‖²]}``.
* **logistic** — ``x ~ N(0, σ₁² I_d)``, ``y ∈ {±1}`` with ``P(y = 1) = σ(⟨x, w̃^m⟩)``; the
  clients come in pairs ``w̃^{±i} = (α, ±β^i)`` (Lemma D.2) so ``w* = (γα, 0)``, and ``γ``
  solves a two-dimensional Gaussian expectation equation, evaluated here by Gauss–Hermite
  quadrature (to ~1e-16 for σ₁‖α‖, σ₁‖β‖ up to ~5, ~5e-6 at 20: :data:`QUADRATURE_NODES`;
  the paper approximates ``w*`` by centralized SGD).

The paper draws the covariates from truncated Gaussians in theory and plain Gaussians in
its experiments (Appendix D.1.2); we use plain Gaussians. Samples come either as a fixed
data set per client (:func:`liang_sparse_linear`, :func:`liang_sparse_logistic`) or fresh
for every gradient call (:class:`LiangSampler`, attached to a problem as its ``sampler``):
covariates are drawn directly (identity covariance needs no factorisation), keyed by
``(seed, round, client, draw)`` so streams never depend on blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from .._array import Array, asarray_like
from .._random import generator
from ._client_data import Batch, ClientData
from ._partition import check_integer

#: Stream id of streaming samples (distinct from the minibatch / sampling / algorithm ids).
STREAM_SAMPLES = 4


def _check(owner: str, n_clients: int, n_features: int, sparsity: int) -> None:
    for key, value in (("n_clients", n_clients), ("n_features", n_features),
                       ("sparsity", sparsity)):
        check_integer(owner, key, value)
    if not (n_clients >= 1 and n_features >= 2 and 1 <= sparsity <= n_features):
        raise ValueError(f"{owner}: need n_clients >= 1, n_features >= 2 and "
                         f"1 <= sparsity <= n_features (got {n_clients}, {n_features}, "
                         f"{sparsity})")


def liang_linear_models(n_clients: int = 16, n_features: int = 1024, sparsity: int = 16,
                        heterogeneity: float = 1.0, seed: int = 0) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    """Client optima ``w̃ (M, d)`` (dense, distinct) and their s-sparse mean ``w* (d,)``.

    ``w*`` has ``s`` nonzero entries ``±U[0.5, 1.5]`` on coordinates ``0..s−1`` (coordinate 0
    is the bias); ``w̃^m = w* + δ^m`` with ``δ^m = heterogeneity·(ε^m − avg ε)``,
    ``ε^m ~ N(0, I_d)``.

    Examples
    --------
    >>> w_tilde, w_star = liang_linear_models(4, 10, 2)
    >>> bool(np.allclose(w_tilde.mean(axis=0), w_star)), int(np.count_nonzero(w_star))
    (True, 2)
    """
    _check("liang_linear_models", n_clients, n_features, sparsity)
    rng = generator(seed, 7001)
    w_star = np.zeros(n_features)
    w_star[:sparsity] = rng.choice([-1.0, 1.0], sparsity) * rng.uniform(0.5, 1.5, sparsity)
    eps = rng.normal(size=(n_clients, n_features))
    w_tilde = w_star + heterogeneity * (eps - eps.mean(axis=0))
    w_tilde -= w_tilde.mean(axis=0) - w_star  # exact mean (no rounding drift)
    return w_tilde, w_star


def liang_logistic_models(n_clients: int = 16, n_features: int = 1024, sparsity: int = 16,
                          heterogeneity: float = 1.0, scale: float = 1.0, seed: int = 0,
                          sigma1: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Paired client optima ``w̃^{±i} = (α, ±β^i)`` and the sparse optimum ``w* = (γα, 0)``.

    ``α ~ scale·N(0, I_s)/√s`` is shared, ``β^i ~ heterogeneity·N(0, I_{d−s})/√(d−s)`` per
    pair; client ``2i`` has ``+β^i``, client ``2i+1`` has ``−β^i`` (Lemma D.2). ``γ`` solves
    the first-order condition for covariates ``N(0, σ₁² I)`` (:func:`logistic_optimum_scale`).
    """
    _check("liang_logistic_models", n_clients, n_features, sparsity)
    if n_clients % 2 or sparsity >= n_features:
        raise ValueError(f"liang_logistic_models: needs an even n_clients (pairs) and "
                         f"sparsity < n_features (got {n_clients}, {sparsity})")
    rng = generator(seed, 7002)
    alpha = scale * rng.normal(size=sparsity) / math.sqrt(sparsity)
    beta = heterogeneity * rng.normal(size=(n_clients // 2, n_features - sparsity)) / math.sqrt(
        n_features - sparsity)
    w_tilde = np.zeros((n_clients, n_features))
    w_tilde[:, :sparsity] = alpha
    w_tilde[0::2, sparsity:] = beta
    w_tilde[1::2, sparsity:] = -beta
    gamma = logistic_optimum_scale(float(np.linalg.norm(alpha)),
                                   np.linalg.norm(beta, axis=1), sigma1)
    w_star = np.zeros(n_features)
    w_star[:sparsity] = gamma * alpha
    return w_tilde, w_star


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))


#: Gauss–Hermite nodes per dimension. The integrands hold sigmoids whose slope grows with
#: σ₁‖α‖, σ₁‖β‖: 60–80 nodes were exact only for norms near 1 (γ off by 3e-8 at ‖α‖ = 3 and
#: 2e-4 at 20, the population gap by 75 % at norms ~8). 300 agree with adaptive quadrature
#: to ~1e-16 up to norms ~5 and to ~5e-6 at 20 (NumPy's nodes overflow beyond ~900).
QUADRATURE_NODES = 300


@cache
def _hermite(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilists' Gauss–Hermite nodes and weights normalised to sum to 1."""
    t, wts = np.polynomial.hermite_e.hermegauss(nodes)  # ∫ φ(t) g(t) ≈ Σ w g / √(2π)
    return t, wts / wts.sum()


def _nodes_for(spread: float) -> int:
    """Nodes that integrate a sigmoid of a Gaussian of this standard deviation (against a
    smooth factor) to ~1e-15: measured against adaptive quadrature, 60 suffice up to a
    spread of 2, then ~40 per unit (100 at 3, 200 at 6, 300 at 8). The population objective
    runs at every evaluation of every client, so it uses no more nodes than it needs."""
    return int(min(QUADRATURE_NODES, max(60, math.ceil(40 * spread))))


def logistic_optimum_scale(alpha_norm: float, beta_norms: np.ndarray, sigma1: float = 1.0,
                           nodes: int = QUADRATURE_NODES) -> float:
    """``γ`` with ``w* = (γα, 0)``: root of ``E[(σ(γu) − p̄(u, v)) u] = 0``.

    ``u = ⟨x_a, α⟩ ~ N(0, σ₁²‖α‖²)``, ``v_i = ⟨x_b, β^i⟩ ~ N(0, σ₁²‖β^i‖²)`` independent, and
    ``p̄ = avg_{i, ±} σ(u ± v_i)`` (the label probability averaged over the clients). The
    expectation is a 2-D Gauss–Hermite sum; the root is found by bisection (the left side is
    increasing in γ).
    """
    t, wts = _hermite(nodes)
    u = sigma1 * alpha_norm * t
    p_bar = np.zeros_like(u)
    for b in np.atleast_1d(beta_norms):
        v = sigma1 * float(b) * t
        p_bar += (wts[None, :] * (_sigmoid(u[:, None] + v[None, :])
                                  + _sigmoid(u[:, None] - v[None, :])) / 2).sum(axis=1)
    p_bar /= len(np.atleast_1d(beta_norms))

    def score(gamma: float) -> float:
        return float(np.sum(wts * (_sigmoid(gamma * u) - p_bar) * u))

    lo, hi = 0.0, 1.0
    while score(hi) < 0:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if score(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def _stream(seed: int, round_: int, client: int, draw: int) -> np.random.Generator:
    """The generator of one minibatch, keyed by ``(seed, stream, round, client, draw)``.

    SFC64 rather than NumPy's default PCG64: streaming draws ~1.6 million normals a round in
    the paper's setting, and SFC64 makes them ~15% faster (same counter-based keying).
    """
    # round −1 (a warm-up or initialisation round) as the unsigned 2⁶⁴ − 1, as in
    # fedcomp._random: SeedSequence takes nonnegative entries only
    key = np.random.SeedSequence([seed, STREAM_SAMPLES, round_ & 0xFFFFFFFFFFFFFFFF, client,
                                  draw])
    return np.random.Generator(np.random.SFC64(key))


@dataclass(frozen=True, eq=False)
class LiangSampler:
    """Fresh samples for every gradient call (streaming), counter-based.

    Parameters
    ----------
    kind : {"linear", "logistic"}
    w_tilde : array, shape (M, d)
        Every client's local optimum.
    sigma1 : float, default 1.0
        Covariate standard deviation (linear: of coordinates 1..d−1; coordinate 0 is 1).
    sigma2 : float, default 1.0
        Response noise (linear only).

    Notes
    -----
    Draw ``k`` of client ``i`` in round ``r`` comes from an SFC64 generator seeded by
    ``(seed, STREAM_SAMPLES, r, i, k)``: the same whatever block the client runs in.
    """

    kind: str
    w_tilde: np.ndarray
    sigma1: float = 1.0
    sigma2: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "logistic"):
            raise ValueError(f"LiangSampler: kind must be 'linear' or 'logistic' "
                             f"(got {self.kind!r})")

    def draw(self, seed: int, round_: int, client_ids: np.ndarray, draw: int,
             batch_size: int, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
        """Features ``(B, b, d)`` and targets ``(B, b)`` as NumPy arrays."""
        b, d = len(client_ids), self.w_tilde.shape[1]
        feats = np.empty((b, batch_size, d), dtype=dtype)
        targs = np.empty((b, batch_size), dtype=dtype)
        for row, cid in enumerate(np.asarray(client_ids)):
            rng = _stream(seed, round_, int(cid), draw)
            x = feats[row]
            rng.standard_normal(out=x, dtype=dtype)  # drawn in place: no copy
            if self.sigma1 != 1.0:
                x *= self.sigma1
            if self.kind == "linear":
                x[:, 0] = 1.0
            margin = x @ self.w_tilde[cid].astype(dtype, copy=False)
            if self.kind == "linear":
                targs[row] = margin + self.sigma2 * rng.standard_normal(batch_size, dtype=dtype)
            else:
                u = rng.random(batch_size, dtype=dtype)
                targs[row] = np.where(u < _sigmoid(margin), 1.0, -1.0)
        return feats, targs

    def batch(self, seed: int, round_: int, client_ids: np.ndarray, draw: int,
              batch_size: int, like: Array) -> Batch:
        """A :class:`Batch` of fresh samples in the namespace/dtype of ``like``."""
        feats, targs = self.draw(seed, round_, client_ids, draw, batch_size,
                                 np.dtype(str(like.dtype).split(".")[-1]))
        w = np.full((len(client_ids), batch_size), 1.0 / batch_size)
        return Batch(asarray_like(feats, like), asarray_like(targs, like), asarray_like(w, like))

    def population_objective(self, w: Any, weights: np.ndarray | None = None) -> float:
        """The population objective ``Σ_m π_m E F(w; ξ_m)`` (uniform ``π`` by default).

        Linear: the closed form of eq. (47). Logistic: for each client, ``t = ⟨x, w⟩`` and
        ``u = ⟨x, w̃^m⟩`` are jointly Gaussian, so
        ``f_m(w) = E[σ(u) log(1 + e^{−t}) + σ(−u) log(1 + e^{t})]`` is a 2-D Gauss–Hermite
        sum, with more nodes where ``t`` or ``u`` spreads wide (:func:`_nodes_for`).
        """
        w = np.asarray(w, dtype=np.float64).ravel()
        m = self.w_tilde.shape[0]
        pi = np.full(m, 1.0 / m) if weights is None else np.asarray(weights, dtype=np.float64)
        if self.kind == "linear":
            diff = self.w_tilde - w[None, :]
            per = diff[:, 0] ** 2 + self.sigma1**2 * np.sum(diff[:, 1:] ** 2, axis=1)
            return 0.5 * (self.sigma2**2 + float(pi @ per))
        values = np.empty(m)
        for i, wt in enumerate(self.w_tilde):
            cov = self.sigma1**2 * np.array([[w @ w, w @ wt], [w @ wt, wt @ wt]])
            a = math.sqrt(max(cov[0, 0], 0.0))
            # (t, u) = (a g1, (cov01/a) g1 + sqrt(c − cov01²/a²) g2), g1, g2 standard normal
            b = cov[0, 1] / a if a > 0 else 0.0
            c = math.sqrt(max(cov[1, 1] - b * b, 0.0))
            t, wts = _hermite(_nodes_for(max(a, abs(b) + c)))
            tt = a * t[:, None] + 0.0 * t[None, :]
            uu = b * t[:, None] + c * t[None, :]
            loss = _sigmoid(uu) * np.logaddexp(0.0, -tt) + _sigmoid(-uu) * np.logaddexp(0.0, tt)
            values[i] = float(wts @ loss @ wts)
        return float(pi @ values)


def _stack(sampler: LiangSampler, samples_per_client: int, seed: int, dtype: Any
           ) -> ClientData:
    if check_integer("liang data", "samples_per_client", samples_per_client) < 1:
        raise ValueError(f"liang data: samples_per_client must be >= 1 (got "
                         f"{samples_per_client})")
    m = sampler.w_tilde.shape[0]
    feats, targs = sampler.draw(seed, 0, np.arange(m), 0, samples_per_client,
                                np.dtype(dtype))
    return ClientData(feats, targs, np.full(m, samples_per_client))


def liang_sparse_linear(n_clients: int = 16, samples_per_client: int = 1000,
                        n_features: int = 1024, sparsity: int = 16, sigma1: float = 1.0,
                        sigma2: float = 1.0, heterogeneity: float = 1.0, seed: int = 0,
                        dtype: Any = np.float64) -> ClientData:
    """A fixed sample of the decentralized sparse linear regression of Section 7.

    Parameters
    ----------
    n_clients, n_features, sparsity, heterogeneity
        See :func:`liang_linear_models` (same ``seed`` → same ``w̃``, ``w*``).
    samples_per_client : int, default 1000
    sigma1, sigma2 : float, default 1.0
        Covariate and noise standard deviations.
    seed : int, default 0
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData
        Use ``liang_linear_models(...)[1]`` as the ground truth (the population optimum).

    Examples
    --------
    >>> liang_sparse_linear(4, 5, 8, 2).features.shape
    (4, 5, 8)
    """
    w_tilde, _ = liang_linear_models(n_clients, n_features, sparsity, heterogeneity, seed)
    return _stack(LiangSampler("linear", w_tilde, sigma1, sigma2), samples_per_client,
                  seed + 1, dtype)


def liang_sparse_logistic(n_clients: int = 16, samples_per_client: int = 1000,
                          n_features: int = 1024, sparsity: int = 16, sigma1: float = 1.0,
                          heterogeneity: float = 1.0, scale: float = 1.0, seed: int = 0,
                          dtype: Any = np.float64) -> ClientData:
    """A fixed sample of the decentralized sparse logistic regression of Section 7 (±1 labels).

    See :func:`liang_logistic_models` for the client optima and ``w*``.

    Examples
    --------
    >>> sorted(set(liang_sparse_logistic(2, 50, 8, 2).targets.ravel().tolist()))
    [-1.0, 1.0]
    """
    w_tilde, _ = liang_logistic_models(n_clients, n_features, sparsity, heterogeneity, scale,
                                       seed, sigma1)
    return _stack(LiangSampler("logistic", w_tilde, sigma1), samples_per_client, seed + 1,
                  dtype)


# --- configuration hooks: the ground truth and the streaming sampler of each generator ------

def _linear_parts(n_clients: int = 16, samples_per_client: int = 1000, n_features: int = 1024,
                  sparsity: int = 16, sigma1: float = 1.0, sigma2: float = 1.0,
                  heterogeneity: float = 1.0, seed: int = 0, dtype: Any = np.float64
                  ) -> tuple[np.ndarray, LiangSampler]:
    w_tilde, w_star = liang_linear_models(n_clients, n_features, sparsity, heterogeneity, seed)
    return w_star, LiangSampler("linear", w_tilde, sigma1, sigma2)


def _logistic_parts(n_clients: int = 16, samples_per_client: int = 1000,
                    n_features: int = 1024, sparsity: int = 16, sigma1: float = 1.0,
                    heterogeneity: float = 1.0, scale: float = 1.0, seed: int = 0,
                    dtype: Any = np.float64) -> tuple[np.ndarray, LiangSampler]:
    w_tilde, w_star = liang_logistic_models(n_clients, n_features, sparsity, heterogeneity,
                                            scale, seed, sigma1)
    return w_star, LiangSampler("logistic", w_tilde, sigma1)


#: Ground truths and streaming samplers by generator name, called with the generator's own
#: parameters (registered in ``fedcomp.data.GROUND_TRUTHS`` and ``fedcomp.data.SAMPLERS``).
LIANG_TRUTHS = {
    "liang_sparse_linear": lambda **kw: _linear_parts(**kw)[0],
    "liang_sparse_logistic": lambda **kw: _logistic_parts(**kw)[0],
}
LIANG_SAMPLERS = {
    "liang_sparse_linear": lambda **kw: _linear_parts(**kw)[1],
    "liang_sparse_logistic": lambda **kw: _logistic_parts(**kw)[1],
}
