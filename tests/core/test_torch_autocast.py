"""``TorchModel(autocast=...)``: the network in bfloat16 / float16, the model in its own dtype.

The float32 (or float64) computation of the same loss is the reference: autocast's
gradients come back in the master dtype, close to it and not equal to it (the option takes
effect). The accuracy over whole training runs is benchmarks/autocast_accuracy.py's.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fedcomp  # noqa: E402
from fedcomp.data import Batch, synthetic_fedprox  # noqa: E402
from fedcomp.losses import TorchModel  # noqa: E402
from fedcomp.losses._autocast import block_gradient  # noqa: E402
from fedcomp.regularizers import L1  # noqa: E402

pytestmark = pytest.mark.torch

#: bfloat16 keeps 8 bits of mantissa (relative rounding 2^-9 ≈ 2e-3 a product): a smooth
#: network's gradient stays within 2e-2 of float32's, relative to its largest entry (measured
#: 1.8e-3 to 5.7e-3 over 20 seeds), a loss value within 5e-3 (measured at most 6e-4)
BF16_RTOL, BF16_VALUE_RTOL = 2e-2, 5e-3

#: A ReLU network's gradient is not continuous: a pre-activation within 2^-9 of zero, or two
#: values of a max-pooling window that close, switch sides under bfloat16's rounding and move
#: that sample's whole contribution. Over 20 seeds the relative l2 distance measured 3e-3 to
#: 2.7e-2 (mlp) and 8e-3 to 0.15 (cnn): bounded here, not as tight as a smooth network's.
RELU_GRAD_L2 = 0.3

NETWORKS = {
    "mlp": dict(model="mlp", input_shape=(8,), n_classes=3, options={"hidden": [16]}),
    "cnn": dict(model="cnn", input_shape=(1, 6, 6), n_classes=3,
                options={"channels": [4, 6], "kernel_size": 3}),
}


def smooth_mlp(input_shape, n_classes, hidden=16):
    """A tanh MLP: a smooth network (computed by vmap, not the hand-batched forward)."""
    return torch.nn.Sequential(torch.nn.Linear(input_shape[0], hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, n_classes))


def block(spec, dtype, n_clients=3, n_samples=20, seed=0):
    """A block of ``n_clients`` distinct models near the network's start, and their batch."""
    rng = np.random.default_rng(seed)
    x0 = TorchModel(**spec).initial_model()
    x = (x0 + 0.05 * rng.standard_normal((n_clients, x0.size))).astype(dtype)
    batch = Batch(rng.standard_normal((n_clients, n_samples, *spec["input_shape"])).astype(dtype),
                  rng.integers(0, spec["n_classes"], (n_clients, n_samples)),
                  np.full((n_clients, n_samples), 1 / n_samples, dtype=dtype))
    return x, batch


def relative(a, b, norm=np.inf):
    """``‖a - b‖ / ‖b‖`` over all entries (``np.inf``: the largest entries)."""
    a, b = np.ravel(np.asarray(a, dtype=np.float64)), np.ravel(np.asarray(b, dtype=np.float64))
    return float(np.linalg.norm(a - b, norm) / np.linalg.norm(b, norm))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bf16_gradients_are_the_master_dtype_close_to_and_unlike_float32(dtype):
    spec = dict(NETWORKS["mlp"], model=smooth_mlp, options=None)
    x, batch = block(spec, dtype)
    exact, bf16 = TorchModel(**spec), TorchModel(**spec, autocast="bf16")
    grad, reference = bf16.grad(x, batch), exact.grad(x, batch)
    assert grad.dtype == dtype and grad.shape == reference.shape
    # close, and really in bf16 (a float64 model is cast to float32 for autocast to act)
    assert 0 < relative(grad, reference) < BF16_RTOL
    value = bf16.value(x, batch)
    assert value.dtype == dtype
    assert 0 < relative(value, exact.value(x, batch)) < BF16_VALUE_RTOL
    logits = bf16.predict(x[0], batch.features[0])
    assert logits.dtype == dtype
    assert relative(logits, exact.predict(x[0], batch.features[0])) < BF16_RTOL


@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_bf16_through_the_hand_batched_relu_networks(network):
    spec = NETWORKS[network]
    x, batch = block(spec, np.float32)
    exact, bf16 = TorchModel(**spec), TorchModel(**spec, autocast="bf16")
    value = bf16.value(x, batch)
    assert 0 < relative(value, exact.value(x, batch)) < BF16_VALUE_RTOL
    grad = bf16.grad(x, batch)
    assert grad.dtype == np.float32
    assert 0 < relative(grad, exact.grad(x, batch), norm=2) < RELU_GRAD_L2


def test_bf16_on_torch_tensors_keeps_them_and_x():
    spec = NETWORKS["mlp"]
    x, batch = block(spec, np.float32)
    x_t = torch.from_numpy(x)
    before = x_t.clone()
    batch_t = Batch(*(torch.from_numpy(a) for a in (batch.features, batch.targets,
                                                    batch.weights)))
    grad = TorchModel(**spec, autocast="bf16").grad(x_t, batch_t)
    assert isinstance(grad, torch.Tensor) and grad.dtype == torch.float32
    assert torch.equal(x_t, before)  # the master weights are not touched
    assert relative(grad.numpy(), TorchModel(**spec).grad(x, batch)) < BF16_RTOL


def test_bf16_on_jax_arrays_computes_the_network_in_bf16():
    jax = pytest.importorskip("jax")
    from fedcomp.runtime import jax_like

    jax_like()  # jax_enable_x64, as the engine sets it
    spec = NETWORKS["mlp"]
    x, batch = block(spec, np.float32)
    jnp = jax.numpy
    batch_j = Batch(jnp.asarray(batch.features), jnp.asarray(batch.targets),
                    jnp.asarray(batch.weights))
    grad = TorchModel(**spec, autocast="bf16").grad(jnp.asarray(x), batch_j)
    assert grad.dtype == jnp.float32
    reference = TorchModel(**spec).grad(x, batch)
    assert 0 < relative(grad, reference, norm=2) < RELU_GRAD_L2
    logits = TorchModel(**spec, autocast="bf16").predict(jnp.asarray(x[0]), batch_j.features[0])
    assert logits.dtype == jnp.float32


def test_the_option_is_in_the_repr_and_the_fingerprint_only_when_set():
    spec = NETWORKS["mlp"]
    exact, bf16 = TorchModel(**spec), TorchModel(**spec, autocast="bf16")
    assert "autocast" not in repr(exact)  # float32 runs keep their checkpoints' fingerprint
    assert repr(bf16) == repr(exact)[:-1] + ", autocast='bf16')"
    assert bf16 != exact and hash(bf16) != hash(exact)
    data = synthetic_fedprox(1.0, 1.0, n_clients=2, n_features=8, n_classes=3, seed=0)
    prints = {fedcomp.Problem(loss, L1(0.01), data).fingerprint() for loss in (exact, bf16)}
    assert len(prints) == 2  # an autocast run's checkpoint does not resume a float32 run


@pytest.mark.parametrize("bad", ["fp32", "bfloat16", "BF16", 16, True])
def test_bad_autocast_values_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=f"autocast must be None.*'bf16' or 'fp16' "
                                         f"\\(got {bad!r}\\)"):
        TorchModel(**NETWORKS["mlp"], autocast=bad)


def test_fp16_on_the_cpu_is_refused_naming_bf16():
    spec = NETWORKS["mlp"]
    loss = TorchModel(**spec, autocast="fp16")  # a GPU option: valid until it meets a CPU
    x, batch = block(spec, np.float32)
    for call in (lambda: loss.grad(x, batch), lambda: loss.value(x, batch),
                 lambda: loss.predict(x[0], batch.features[0])):
        with pytest.raises(ValueError, match="autocast='fp16' is a GPU option.*CPU.*"
                                             "use autocast='bf16'"):
            call()


@pytest.mark.parametrize("weight", [1e-7, 1e3])
def test_fp16_loss_scaling_keeps_small_gradients_and_lowers_a_scale_that_overflows(weight):
    # CPU float16 autocast (torch has it, fedcomp refuses it on a CPU) drives the GPU's
    # code path: weights 1e-7 flush every activation gradient below float16's 6e-8 to zero
    # unscaled; weights 1e3 overflow float16 (65504) at the first scale, 2^16
    spec = NETWORKS["mlp"]
    loss = TorchModel(**spec)
    x, batch = block(spec, np.float32)
    batch = batch._replace(weights=np.full_like(batch.weights, weight))
    reference = loss.grad(x, batch)
    feats, targs, wts = (torch.from_numpy(a) for a in batch)
    grads = {}
    for mode in ("fp16", None):  # None: the same float16 forward, no scaling
        x_req = torch.from_numpy(x).requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.float16):
            values = loss._block_losses(x_req, feats, targs, wts)
        grads[mode] = block_gradient(values, x_req, mode).numpy()
    assert grads["fp16"].dtype == np.float32 and np.all(np.isfinite(grads["fp16"]))
    assert relative(grads["fp16"], reference) < BF16_RTOL
    if weight < 1:  # unscaled, the small gradients are lost
        assert relative(grads[None], reference) > 0.1


def test_autocast_from_a_configuration():
    from fedcomp.config import load
    from fedcomp.experiments import build_components

    config = load("fedcanon_nn")
    config["problem"]["autocast"] = "bf16"
    loss, _, _ = build_components(config)
    assert loss.autocast == "bf16"
    config["problem"]["autocast"] = "fp8"
    with pytest.raises(ValueError, match="got 'fp8'"):
        build_components(config)


def test_a_bf16_run_trains():
    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=4, n_features=8, n_classes=3,
                             seed=0)
    loss = TorchModel(**NETWORKS["mlp"], autocast="bf16")
    problem = fedcomp.Problem(loss, L1(1e-3), data)
    result = fedcomp.simulate(fedcomp.fedmid(client_lr=0.1, local_steps=3), problem, 6,
                              batch_size=8, eval_every=6, seed=0, metrics=["objective"])
    first, last = result.history[0]["objective"], result.history[-1]["objective"]
    assert np.isfinite(last) and last < first - 0.05
    assert np.asarray(result.x).dtype == np.float64  # the master weights: the problem's dtype


def test_autocast_travels_to_flower_nodes():
    import json

    pytest.importorskip("flwr")
    from fedcomp.config import to_jsonable
    from fedcomp.flower._strategy import build_component, component_spec
    from fedcomp.losses import LOSSES, make_loss

    loss = TorchModel(**NETWORKS["mlp"], autocast="bf16")
    spec = json.loads(json.dumps(to_jsonable(component_spec(loss, LOSSES, "loss"))))
    assert spec["autocast"] == "bf16" and build_component(spec, make_loss, "loss") == loss
