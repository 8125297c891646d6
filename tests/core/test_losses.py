"""Contract tests every registered loss passes, plus loss-specific identities.

Each case of ``CASES`` is an example instance of a loss in ``fedcomp.losses.LOSSES`` with a
small data factory; a new loss needs one line here (``test_cases_cover_the_registry``
fails until it gets it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from fedcomp._array import asarray_like, to_numpy
from fedcomp.data import Batch, ClientData
from fedcomp.losses import (
    DESCRIPTIONS,
    LOSSES,
    HalfspaceViolation,
    LeastSquares,
    Logistic,
    Loss,
    Softmax,
    TraceRegression,
    make_loss,
)

SIZES = [5, 9, 3, 7]       # unequal client sizes: padding is exercised everywhere
D, K, P1, P2 = 4, 3, 3, 2


def _features(rng, n, shape, i):
    return rng.normal(loc=0.3 * i, size=(n, *shape)) / np.sqrt(np.prod(shape))


def _lists(kind: str, sizes: list[int], seed: int = 0):
    rng = np.random.default_rng(seed)
    feats, targs = [], []
    for i, n in enumerate(sizes):
        if kind == "trace":
            a = _features(rng, n, (P1, P2), i)
            t = np.einsum("npq,pq->n", a, rng.normal(size=(P1, P2))) + 0.1 * rng.normal(size=n)
        else:
            a = _features(rng, n, (D,), i)
            if kind == "real":
                t = a @ rng.normal(size=D) + 0.1 * rng.normal(size=n)
            elif kind == "pm1":
                t = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            else:  # class ids
                t = rng.integers(0, K, size=n)
        feats.append(a)
        targs.append(t)
    return feats, targs


@dataclass(frozen=True)
class Case:
    name: str           # key in LOSSES
    loss: Any
    kind: str           # target kind for _lists
    n_classes: int | None = None

    def __repr__(self) -> str:
        return f"{self.name}:{self.loss!r}"

    def lists(self, sizes=SIZES, seed=0):
        return _lists(self.kind, sizes, seed)

    def data(self, sizes=SIZES, seed=0) -> ClientData:
        return ClientData.from_lists(*self.lists(sizes, seed))

    def models(self, data: ClientData, seed=1, scale=1.0) -> np.ndarray:
        shape = self.loss.param_shape(data.feature_shape, self.n_classes)
        return scale * np.random.default_rng(seed).normal(size=(data.n_clients, *shape))


CASES = [
    Case("least_squares", LeastSquares(), "real"),
    Case("least_squares", LeastSquares(l2=0.3), "real"),
    Case("logistic", Logistic(), "pm1"),
    Case("logistic", Logistic(l2=0.3), "pm1"),
    Case("logistic", Logistic(l2=0.01, nonconvex=0.3), "pm1"),
    Case("softmax", Softmax(), "classes", K),
    Case("softmax", Softmax(l2=0.3), "classes", K),
    Case("trace_regression", TraceRegression(), "trace"),
    Case("trace_regression", TraceRegression(l2=0.3), "trace"),
    Case("halfspace_violation", HalfspaceViolation(), "real"),
    Case("halfspace_violation", HalfspaceViolation(l2=0.3), "real"),
]
cases = pytest.mark.parametrize("case", CASES, ids=repr)


def _eval(loss, x, batch):
    return (to_numpy(loss.value(x, batch)), to_numpy(loss.grad(x, batch)),
            to_numpy(loss.smoothness(batch)))


# --- registry -------------------------------------------------------------------------------
#: Covered by their own file: networks have no analytic smoothness bound for the contract's
#: Hessian check (tests/core/test_torch_models.py checks gradients against backward()).
OWN_TESTS = {"torch_model"}


def test_cases_cover_the_registry():
    assert {c.name for c in CASES} | OWN_TESTS == set(LOSSES) == set(DESCRIPTIONS)
    for case in CASES:
        assert isinstance(case.loss, LOSSES[case.name])


def test_make_loss_builds_and_names_the_fix():
    assert make_loss("softmax", l2=0.5) == Softmax(l2=0.5)
    assert make_loss("trace_regression") == TraceRegression()
    valid = "valid: halfspace_violation, least_squares, logistic, softmax, torch_model, trace_reg"
    with pytest.raises(ValueError, match=valid):
        make_loss("hinge")
    with pytest.raises(ValueError, match="unknown parameter.*lam.*accepted: l2"):
        make_loss("logistic", lam=1.0)
    with pytest.raises(ValueError, match="l2 must be >= 0"):
        make_loss("softmax", l2=-1.0)


@cases
def test_protocol_and_shapes(case):
    data = case.data()
    x = case.models(data)
    assert isinstance(case.loss, Loss)
    assert x.ndim == 1 + case.loss.param_ndim
    value, grad, smooth = _eval(case.loss, x, data.full_batch())
    assert value.shape == (data.n_clients,) and smooth.shape == (data.n_clients,)
    assert grad.shape == x.shape


def test_param_shape_errors_name_the_fix():
    with pytest.raises(ValueError, match="n_classes"):
        Softmax().param_shape((4,))
    with pytest.raises(ValueError, match="vector features"):
        Softmax().param_shape((2, 2), 3)
    with pytest.raises(ValueError, match="matrix features"):
        TraceRegression().param_shape((4,))
    assert Softmax().param_shape((4,), 5) == (4, 5)
    assert TraceRegression().param_shape((3, 2)) == (3, 2)


# --- calculus ---------------------------------------------------------------------------------
@cases
def test_gradient_matches_central_differences(case):
    data = case.data()
    batch = data.full_batch()
    x = case.models(data)
    grad = to_numpy(case.loss.grad(x, batch))
    fd = np.zeros_like(x)
    eps = 1e-6
    for idx in np.ndindex(x.shape[1:]):     # one coordinate of every client's model at once
        e = np.zeros_like(x)
        e[(slice(None), *idx)] = eps
        up, down = case.loss.value(x + e, batch), case.loss.value(x - e, batch)
        fd[(slice(None), *idx)] = (up - down) / (2 * eps)
    for b in range(data.n_clients):
        np.testing.assert_allclose(fd[b], grad[b], rtol=0, atol=1e-6 * np.linalg.norm(grad[b]))


def _hessian_max_eig(loss, x, batch, iters=60, eps=1e-5, seed=0):
    """Power iteration on finite differences of gradients (the Hessians here are PSD)."""
    v = np.random.default_rng(seed).normal(size=x.shape)
    axes = tuple(range(1, x.ndim))
    lam = np.zeros(x.shape[0])
    for _ in range(iters):
        v /= np.sqrt(np.sum(v * v, axis=axes, keepdims=True))
        up, down = to_numpy(loss.grad(x + eps * v, batch)), to_numpy(loss.grad(x - eps * v, batch))
        hv = (up - down) / (2 * eps)
        lam = np.sum(v * hv, axis=axes)
        v = hv
    return lam


@cases
@pytest.mark.parametrize("scale", [0.0, 1.0])
def test_smoothness_bounds_the_hessian(case, scale):
    data = case.data()
    batch = data.full_batch()
    x = case.models(data, scale=scale)
    lam = _hessian_max_eig(case.loss, x, batch)
    bound = to_numpy(case.loss.smoothness(batch))
    assert np.all(lam > 0)
    assert np.all(bound >= lam * (1 - 1e-6)), (bound, lam)
    if case.name in ("least_squares", "trace_regression"):   # quadratic: the bound is exact
        np.testing.assert_allclose(bound, lam, rtol=1e-5)


# --- block structure --------------------------------------------------------------------------
@cases
def test_batched_equals_client_by_client(case):
    data = case.data()
    x = case.models(data)
    value, grad, smooth = _eval(case.loss, x, data.full_batch())
    for i in range(data.n_clients):
        v_i, g_i, s_i = _eval(case.loss, x[i:i + 1], data.full_batch(np.array([i])))
        np.testing.assert_allclose(value[i], v_i[0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(grad[i], g_i[0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(smooth[i], s_i[0], rtol=1e-12)


@cases
def test_padding_does_not_change_a_client(case):
    feats, targs = case.lists()
    data = ClientData.from_lists(feats, targs)
    assert data.max_samples == max(SIZES) and len(set(SIZES)) > 1
    x = case.models(data)
    value, grad, smooth = _eval(case.loss, x, data.full_batch())
    for i in range(data.n_clients):
        alone = ClientData.from_lists([feats[i]], [targs[i]])
        v_i, g_i, s_i = _eval(case.loss, x[i:i + 1], alone.full_batch())
        np.testing.assert_allclose(value[i], v_i[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(grad[i], g_i[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(smooth[i], s_i[0], rtol=1e-10)


@cases
def test_minibatch_of_all_rows_is_the_full_batch(case):
    m = 6
    data = case.data(sizes=[m] * 3)
    x = case.models(data)
    full = _eval(case.loss, x, data.full_batch())
    rng = np.random.default_rng(3)
    rows = np.stack([rng.permutation(m) for _ in range(3)])   # every row once, any order
    mini = _eval(case.loss, x, data.minibatch(np.arange(3), rows))
    for a, b in zip(full, mini, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


# --- backends and dtypes ------------------------------------------------------------------------
def _backends():
    out = []
    try:
        import array_api_strict as xps

        out.append(pytest.param(lambda: xps.zeros(0, dtype=xps.float64), id="array_api_strict"))
    except ImportError:   # pragma: no cover
        pass
    out.append(pytest.param("torch", id="torch", marks=pytest.mark.torch))
    return out


@cases
@pytest.mark.parametrize("backend", _backends())
def test_backends_agree_with_numpy(case, backend):
    if backend == "torch":
        torch = pytest.importorskip("torch")
        like = torch.zeros(0, dtype=torch.float64)
    else:
        like = backend()
    data = case.data()
    x = case.models(data)
    ref = _eval(case.loss, x, data.full_batch())
    other = data.to(like)
    out = _eval(case.loss, asarray_like(x, like), other.full_batch())
    for a, b in zip(ref, out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@cases
@pytest.mark.parametrize("backend", ["numpy", pytest.param("torch", marks=pytest.mark.torch)])
def test_float32_in_float32_out(case, backend):
    if backend == "torch":
        torch = pytest.importorskip("torch")
        like, f32 = torch.zeros(0, dtype=torch.float32), torch.float32
    else:
        like, f32 = np.zeros(0, dtype=np.float32), np.float32
    data = case.data().to(like)
    x = asarray_like(case.models(data), like)
    batch = data.full_batch()
    for out in (case.loss.value(x, batch), case.loss.grad(x, batch), case.loss.smoothness(batch)):
        assert out.dtype == f32


# --- loss-specific identities -------------------------------------------------------------------
def test_softmax_with_two_classes_is_logistic():
    """With W = [0, w], softmax on class ids y ∈ {0, 1} is logistic on s = 2y − 1 ∈ {±1}."""
    feats, targs = _lists("pm1", SIZES)
    pm1 = ClientData.from_lists(feats, targs)
    ids = ClientData.from_lists(feats, [(t > 0).astype(np.int64) for t in targs])
    w = np.random.default_rng(2).normal(size=(len(SIZES), D))
    W = np.stack([np.zeros_like(w), w], axis=-1)                      # (B, d, 2)
    for l2 in (0.0, 0.4):
        soft, logi = Softmax(l2=l2), Logistic(l2=l2)
        np.testing.assert_allclose(soft.value(W, ids.full_batch()),
                                   logi.value(w, pm1.full_batch()), rtol=1e-13)
        g_soft = soft.grad(W, ids.full_batch())
        g_logi = logi.grad(w, pm1.full_batch())
        np.testing.assert_allclose(g_soft[..., 1], g_logi, rtol=1e-12, atol=1e-15)
        # the columns of p − e_y sum to zero: the other column is the mirror (plus its ridge)
        np.testing.assert_allclose(g_soft[..., 0], -(g_logi - l2 * w), rtol=1e-12, atol=1e-15)
    # and the smoothness bound is twice logistic's data term (½ vs ¼)
    np.testing.assert_allclose(Softmax().smoothness(ids.full_batch()),
                               2 * Logistic().smoothness(pm1.full_batch()), rtol=1e-12)


def test_softmax_accepts_float_class_ids():
    feats, targs = _lists("classes", SIZES)
    ints = ClientData.from_lists(feats, targs)
    floats = ClientData.from_lists(feats, [t.astype(np.float64) for t in targs])
    assert np.issubdtype(floats.targets.dtype, np.floating)
    x = Case("softmax", Softmax(), "classes", K).models(ints)
    for a, b in zip(_eval(Softmax(l2=0.1), x, ints.full_batch()),
                    _eval(Softmax(l2=0.1), x, floats.full_batch()), strict=True):
        np.testing.assert_array_equal(a, b)


def test_softmax_is_stable_for_huge_logits():
    feats, targs = _lists("classes", SIZES)
    data = ClientData.from_lists(feats, targs)
    x = 1e4 * Case("softmax", Softmax(), "classes", K).models(data)
    value, grad, _ = _eval(Softmax(), x, data.full_batch())
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad)) and np.all(value >= 0)
    # max_c z_c ≤ logsumexp(z) ≤ max_c z_c + log K, so the value is the margin loss ± log K
    z = np.einsum("bmd,bdk->bmk", data.features, x)
    margin = z.max(-1) - np.take_along_axis(z, data.targets[..., None], -1)[..., 0]
    margin = np.sum(data.sample_weights() * margin, axis=1)
    assert np.all(margin.max() > 100)
    assert np.all((value >= margin - 1e-9) & (value <= margin + np.log(K) + 1e-9))


def test_softmax_value_matches_a_direct_formula():
    feats, targs = _lists("classes", SIZES)
    data = ClientData.from_lists(feats, targs)
    x = Case("softmax", Softmax(), "classes", K).models(data)
    expected = []
    for i in range(data.n_clients):
        a, y = data.client_arrays(i)
        z = a @ x[i]
        expected.append(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y])
                        + 0.5 * 0.2 * np.sum(x[i] ** 2))
    np.testing.assert_allclose(Softmax(l2=0.2).value(x, data.full_batch()), expected, rtol=1e-13)


def test_trace_regression_is_least_squares_on_vectorised_features():
    feats, targs = _lists("trace", SIZES)
    mat = ClientData.from_lists(feats, targs)
    vec = ClientData.from_lists([f.reshape(len(f), -1) for f in feats], targs)
    W = np.random.default_rng(5).normal(size=(len(SIZES), P1, P2))
    for l2 in (0.0, 0.7):
        tr, ls = TraceRegression(l2=l2), LeastSquares(l2=l2)
        w = W.reshape(len(SIZES), -1)
        np.testing.assert_allclose(tr.value(W, mat.full_batch()), ls.value(w, vec.full_batch()),
                                   rtol=1e-13)
        np.testing.assert_allclose(tr.grad(W, mat.full_batch()).reshape(len(SIZES), -1),
                                   ls.grad(w, vec.full_batch()), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(tr.smoothness(mat.full_batch()),
                                   ls.smoothness(vec.full_batch()), rtol=1e-10)


@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_trace_regression_hessian_matches_finite_differences(l2):
    """Column ``p·P2 + q`` of the Hessian (row-major vec, as the exact local solvers read it)
    is the central difference of the gradient along entry ``(p, q)`` of ``W``; a quadratic's
    Hessian is also exact: ``∇f(W) = ∇f(0) + H vec(W)``."""
    loss = TraceRegression(l2=l2)
    data = ClientData.from_lists(*_lists("trace", SIZES))   # unequal sizes: padded rows
    batch = data.full_batch()
    x = np.random.default_rng(6).normal(size=(len(SIZES), P1, P2))
    h = to_numpy(loss.hessian(x, batch))
    assert h.shape == (len(SIZES), P1 * P2, P1 * P2)
    eps = 1e-6
    for p, q in np.ndindex(P1, P2):
        e = np.zeros_like(x)
        e[:, p, q] = eps
        fd = (loss.grad(x + e, batch) - loss.grad(x - e, batch)) / (2 * eps)
        np.testing.assert_allclose(h[:, :, p * P2 + q], fd.reshape(len(SIZES), -1),
                                   rtol=1e-6, atol=1e-8)
    g0 = loss.grad(np.zeros_like(x), batch).reshape(len(SIZES), -1)
    np.testing.assert_allclose(loss.grad(x, batch).reshape(len(SIZES), -1),
                               g0 + np.einsum("bij,bj->bi", h, x.reshape(len(SIZES), -1)),
                               rtol=1e-12, atol=1e-12)


def test_trace_regression_smoothness_with_more_samples_than_entries():
    """Both branches of the Gram shortcut (m < p1·p2 and m >= p1·p2) give λ_max."""
    feats, targs = _lists("trace", [2, 20])
    batch = ClientData.from_lists(feats, targs).full_batch()
    expected = []
    for i, n in enumerate([2, 20]):
        a = feats[i].reshape(n, -1)
        expected.append(np.linalg.eigvalsh(a.T @ a / n)[-1])
    np.testing.assert_allclose(TraceRegression().smoothness(batch), expected, rtol=1e-12)


def test_losses_work_on_a_hand_built_batch():
    """A Batch without ClientData (e.g. from an oracle) is all a loss needs."""
    a = np.ones((1, 2, D))
    batch = Batch(a, np.array([[0, 1]]), np.array([[0.5, 0.5]]))
    g = Softmax().grad(np.zeros((1, D, 2)), batch)
    np.testing.assert_allclose(g, 0.0, atol=1e-15)   # symmetric labels at W = 0
