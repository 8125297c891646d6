"""Networks in the jax engine: ``TorchModel`` on jax arrays computes with jax.

* The jax forward (:mod:`fedcomp.losses._jax_forward`) equals torch's hand-batched one
  (:func:`fedcomp.losses._block_forward.block_logits`) on the same flat vector, and its
  gradients equal torch's (float64): mlp, cnn on odd image sides, pooling with padding,
  ``ceil_mode``, dilation and tied maxima.
* The acceptance of issue 46: the compiled network path (jax data, ``simulate``'s compiled
  engine) gives the eager path's iterates and counters (NumPy data through torch), float64,
  1e-10, on every algorithm that trains a network; and on jax's second CPU device.
* A network the jax forward does not cover is one ``ValueError`` naming the fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")

import fedcomp  # noqa: E402
from fedcomp import ClientData, Problem, simulate  # noqa: E402
from fedcomp.data import Batch  # noqa: E402
from fedcomp.losses import TorchModel  # noqa: E402
from fedcomp.losses._block_forward import block_logits  # noqa: E402
from fedcomp.losses._jax_forward import jax_layers, logits  # noqa: E402
from fedcomp.regularizers import L1, Zero  # noqa: E402
from fedcomp.runtime import jax_like  # noqa: E402
from tests.core.test_contract import SMOOTH_ONLY, SYNCHRONOUS, supports_sampling  # noqa: E402
from tests.core.test_torch_models import _batch, autograd_grads, tied_maxima_case  # noqa: E402
from tests.engines.test_devices import WRAPPED, jax_second_device  # noqa: E402

LIKE = jax_like()  # jax_enable_x64 before any jax array is made


def pool_net(input_shape, n_classes):
    """Strided, padded and dilated convolutions; padded ``ceil_mode`` pooling and a floor
    pooling of odd sides: the torch rules the jax forward must follow."""
    from torch import nn

    features = nn.Sequential(
        nn.Conv2d(input_shape[0], 2, 3, stride=2, padding=2), nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        nn.Conv2d(2, 3, 2, dilation=2, padding=1), nn.MaxPool2d(2), nn.ReLU(),
        nn.MaxPool2d(2, stride=1, ceil_mode=True))
    width = features(torch.zeros(1, *input_shape)).numel()
    return nn.Sequential(*features, nn.Flatten(), nn.Linear(width, n_classes, bias=False))


CASES = [("mlp", (12,), {"hidden": [8, 6]}),
         ("cnn", (1, 9, 7), {"channels": [3, 4], "kernel_size": 3}),
         (pool_net, (1, 21, 19), None)]


def _jax_batch(batch):
    return Batch(*(jax.numpy.asarray(a) for a in batch))


@pytest.mark.parametrize(("model", "shape", "options"), CASES, ids=["mlp", "cnn", "pooling"])
def test_jax_forward_equals_torch_block_forward_and_gradients(model, shape, options):
    loss = TorchModel(model, input_shape=shape, n_classes=4, options=options, l2=0.01)
    batch = _batch(shape, 4)
    rng = np.random.default_rng(1)
    x = loss.initial_model()[None] + 0.1 * rng.standard_normal((3, loss.layout().size))
    loss._block_losses(torch.as_tensor(x), *(torch.as_tensor(a) for a in batch[:1]),
                       torch.as_tensor(batch.targets), torch.as_tensor(batch.weights))
    want = block_logits(loss._cache["plan"], loss._unflatten(torch.as_tensor(x)),
                        torch.as_tensor(batch.features)).numpy()
    layers = jax_layers(loss)
    for b in range(3):
        params = loss._unflatten(torch.as_tensor(x[b]))
        got = logits(layers, {k: jax.numpy.asarray(v.numpy()) for k, v in params.items()},
                     jax.numpy.asarray(batch.features[b]))
        np.testing.assert_allclose(np.asarray(got), want[b], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(loss.predict(jax.numpy.asarray(x[0]),
                                                       jax.numpy.asarray(batch.features[0]))),
                               want[0], rtol=0, atol=1e-12)
    on_jax = _jax_batch(batch)
    np.testing.assert_allclose(np.asarray(loss.value(jax.numpy.asarray(x), on_jax)),
                               loss.value(x, batch), rtol=0, atol=1e-12)
    grads = loss.grad(jax.numpy.asarray(x), on_jax)
    assert grads.dtype == jax.numpy.float64 and grads.shape == x.shape
    np.testing.assert_allclose(np.asarray(grads), loss.grad(x, batch), rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(grads), autograd_grads(loss, x, batch), rtol=0,
                               atol=1e-10)


def test_tied_maxima_get_torch_gradients():
    """Integer weights on integer images tie convolution outputs inside pooling windows
    (tests/core/test_torch_models.py counts them): sending a tie's gradient to another
    position, or splitting it, changes the kernels' gradients by O(1)."""
    loss, x, batch = tied_maxima_case()
    got = loss.grad(jax.numpy.asarray(x), _jax_batch(batch))
    np.testing.assert_allclose(np.asarray(got), autograd_grads(loss, x, batch), rtol=0,
                               atol=1e-10)


def test_pooling_propagates_nan_as_torch():
    from torch import nn

    h = np.arange(2 * 3 * 7 * 6, dtype=np.float64).reshape(2, 3, 7, 6) % 5
    h[0, 1, 2, 3] = h[1, 2, 6, 5] = np.nan
    layers = (("pool", (2, 2), (2, 2), (0, 0), (1, 1), False),)
    got = np.asarray(logits(layers, {}, jax.numpy.asarray(h)))
    want = nn.MaxPool2d(2)(torch.as_tensor(h)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got, want)


def test_networks_outside_the_jax_forward_name_the_torch_backend():
    resnet = TorchModel("resnet18", input_shape=(3, 8, 8), n_classes=3, options={"width": 4})
    batch = _jax_batch(_batch((3, 8, 8), 3, clients=1, samples=2))
    x = jax.numpy.asarray(resnet.initial_model()[None])
    with pytest.raises(ValueError, match=r"'resnet18': on jax arrays .* use backend 'torch'"):
        resnet.grad(x, batch)

    def dilated_pooling(input_shape, n_classes):
        from torch import nn

        return nn.Sequential(nn.MaxPool2d(2, dilation=2), nn.Flatten(),
                             nn.Linear(input_shape[0] * 4 * 4, n_classes))

    dilated = TorchModel(dilated_pooling, input_shape=(1, 6, 6), n_classes=3)
    batch = _jax_batch(_batch((1, 6, 6), 3, clients=1, samples=2))
    with pytest.raises(ValueError, match=r"MaxPool2d \(undilated\).* use backend 'torch'"):
        dilated.grad(jax.numpy.asarray(dilated.initial_model()[None]), batch)


# --- the acceptance: compiled network runs equal the eager ones -------------------------------

def _network_data():
    rng = np.random.default_rng(0)
    return ClientData.from_lists([rng.normal(size=(12, 8)) for _ in range(5)],
                                 [rng.integers(0, 3, size=12).astype(float) for _ in range(5)])


@pytest.fixture(scope="module")
def mlp_problems():
    loss = TorchModel("mlp", input_shape=(8,), n_classes=3, options={"hidden": (6,)},
                      l2=1e-3)
    data = _network_data()
    return {reg_name: (Problem(loss, reg, data, n_classes=3),
                       Problem(loss, reg, data.to(LIKE), n_classes=3))
            for reg_name, reg in (("l1", L1(1e-3)), ("zero", Zero()))}


def _run(alg, problem, cpr, rounds=3):
    return simulate(alg, problem, rounds, batch_size=5, seed=2, clients_per_round=cpr,
                    metrics=["objective"])


def _assert_same_run(got, want, what):
    assert type(got.x).__module__.startswith("jax"), what
    np.testing.assert_allclose(np.asarray(got.x), want.x, rtol=0, atol=1e-10, err_msg=what)
    assert got.counters == want.counters, what
    np.testing.assert_allclose([r["objective"] for r in got.history],
                               [r["objective"] for r in want.history], rtol=1e-10,
                               err_msg=what)


#: The families the issue names: compiled end to end on a network (the fast test); every
#: other algorithm that trains a network runs in the slow one.
NAMED = ("fedavg", "fedmid", "fedda", "za1", "fedcanon", "scaffold", "feddr", "fedprox",
         "fedpd")


def _compare_on_networks(problems, algorithms):
    """``(trained, compiled)``: the names of ``algorithms`` that train a network today (on
    NumPy data through torch) and equal that run on jax data through the compiled engine
    (iterates 1e-10, counters, rows), and of those the ones compiled end to end. One
    that refuses a network on NumPy data must name why (an exact local solver needs a
    Hessian a network has not): it is not a network-training algorithm."""
    trained, compiled = [], []
    for alg in algorithms:
        numpy_problem, jax_problem = problems["zero" if alg.name in SMOOTH_ONLY else "l1"]
        cpr = 3 if supports_sampling(alg, numpy_problem) else None
        try:
            want = _run(alg, numpy_problem, cpr)
        except ValueError as exc:
            assert "hessian" in str(exc), (alg.name, exc)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fedcomp.runtime.JaxEngineWarning)
            got = _run(alg, jax_problem, cpr)
        _assert_same_run(got, want, alg.name)
        trained.append(alg.name)
        if not any(issubclass(w.category, fedcomp.runtime.JaxEngineWarning) for w in caught):
            compiled.append(alg.name)
    return trained, compiled


NAMED_ALGORITHMS = [alg for alg in SYNCHRONOUS if alg.name in NAMED
                    and alg.hyperparameters.get("local_solver") != "exact"]


def test_compiled_network_runs_equal_eager_ones_on_the_named_families(mlp_problems):
    trained, compiled = _compare_on_networks(mlp_problems, NAMED_ALGORITHMS)
    assert set(compiled) == set(trained) == set(NAMED), (trained, compiled)


@pytest.mark.slow
def test_compiled_network_runs_equal_eager_ones_on_every_network_algorithm(mlp_problems):
    """The rest of the synchronous algorithms and the wrapped ones of the device tests
    (~35 s: a compiled program each)."""
    others = [alg for alg in SYNCHRONOUS + WRAPPED
              if not any(alg is named for named in NAMED_ALGORITHMS)]
    trained, compiled = _compare_on_networks(mlp_problems, others)
    assert len(trained) >= 15 and len(compiled) >= 8, (trained, compiled)


def test_compiled_cnn_run_equals_eager_run():
    loss = TorchModel("cnn", input_shape=(1, 7, 9), n_classes=3,
                      options={"channels": [2, 3], "kernel_size": 3})
    rng = np.random.default_rng(1)
    data = ClientData.from_lists([rng.normal(size=(10, 1, 7, 9)) for _ in range(4)],
                                 [rng.integers(0, 3, size=10).astype(float) for _ in range(4)])
    alg = fedcomp.fedcanon(client_lr=0.1, local_steps=3, server_lr=0.5)
    want = _run(alg, Problem(loss, L1(1e-3), data, n_classes=3), None)
    got = _run(alg, Problem(loss, L1(1e-3), data.to(LIKE), n_classes=3), None)
    assert np.abs(want.x - loss.initial_model()).max() > 1e-3  # it trained
    _assert_same_run(got, want, "fedcanon cnn")


def test_network_on_jax_second_device(mlp_problems):
    jax_, device, like = jax_second_device()
    numpy_problem, _ = mlp_problems["l1"]
    there = Problem(numpy_problem.loss, numpy_problem.regularizer,
                    numpy_problem.data.to(like), n_classes=3)
    alg = fedcomp.scaffold(client_lr=0.1, local_steps=3)
    got = _run(alg, there, 3)
    assert got.x.devices() == {device}
    _assert_same_run(got, _run(alg, numpy_problem, 3), "scaffold on the second device")
