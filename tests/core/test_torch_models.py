"""Neural networks through :class:`fedcomp.losses.TorchModel` (the PyTorch backend).

Independent references: gradients from plain ``loss.backward()`` on the ``nn.Module``, one
client at a time (no ``torch.func``), and the naive per-client algorithm loops of
``tests/_loops.py`` driven by those gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fedcomp  # noqa: E402
from fedcomp.data import Batch, ClientData, synthetic_fedprox  # noqa: E402
from fedcomp.losses import TorchModel  # noqa: E402
from fedcomp.regularizers import L1, MCP, SCAD, GroupLasso, Masked  # noqa: E402
from tests._loops import loop_fedcanon, loop_fedda, loop_fedmid, loop_za1  # noqa: E402

pytestmark = pytest.mark.torch


def autograd_grads(loss, x, batch):
    """Each client's gradient by ``backward()`` on a copy of the network: the plain way."""
    x_t = torch.as_tensor(np.asarray(x)) if isinstance(x, np.ndarray) else x
    grads = []
    for b in range(x_t.shape[0]):
        net = loss.network()
        params = list(net.parameters())
        copies = [p.detach().clone().to(x_t.dtype).requires_grad_(True) for p in params]
        torch.nn.utils.vector_to_parameters(x_t[b].detach(), copies)
        replaced = dict(zip([n for n, _ in net.named_parameters()], copies, strict=True))
        out = torch.func.functional_call(net, replaced, (torch.as_tensor(batch.features[b]).to(
            x_t.dtype),))
        targets = torch.as_tensor(batch.targets[b]).long()
        weights = torch.as_tensor(batch.weights[b]).to(x_t.dtype)
        value = torch.sum(weights * torch.nn.functional.cross_entropy(out, targets,
                                                                       reduction="none"))
        value = value + 0.5 * loss.l2 * sum(torch.sum(c * c) for c in copies)
        value.backward()
        grads.append(torch.cat([c.grad.reshape(-1) for c in copies]))
    out = torch.stack(grads)
    return out.numpy() if isinstance(x, np.ndarray) else out


class AutogradLoss:
    """A TorchModel whose ``grad`` is :func:`autograd_grads` (for the naive loops)."""

    def __init__(self, loss):
        self.loss = loss
        self.param_ndim = 1

    def param_shape(self, feature_shape, n_classes=None):
        return self.loss.param_shape(feature_shape, n_classes)

    def grad(self, x, batch):
        return autograd_grads(self.loss, x, batch)

    def value(self, x, batch):
        return self.loss.value(x, batch)

    def smoothness(self, batch):
        return self.loss.smoothness(batch)


NETWORKS = [
    ("mlp", (12,), {"hidden": [8, 6]}),
    ("cnn", (1, 8, 8), {"channels": [3, 4], "kernel_size": 3}),
    ("resnet18", (3, 8, 8), {"width": 4, "norm_groups": 2}),
]


def _batch(input_shape, n_classes, clients=3, samples=5, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((clients, samples, *input_shape)).astype(dtype)
    targs = rng.integers(0, n_classes, (clients, samples))
    weights = rng.uniform(0.1, 1.0, (clients, samples))
    weights[:, -1] = 0.0  # a padded row
    weights /= weights.sum(axis=1, keepdims=True)
    return Batch(feats, targs, weights.astype(dtype))


@pytest.mark.parametrize(("name", "shape", "options"), NETWORKS, ids=[n[0] for n in NETWORKS])
def test_batched_gradients_equal_per_client_backward(name, shape, options):
    loss = TorchModel(name, input_shape=shape, n_classes=4, options=options, l2=0.01)
    batch = _batch(shape, 4)
    rng = np.random.default_rng(1)
    x = loss.initial_model()[None] + 0.1 * rng.standard_normal((3, loss.layout().size))
    got = loss.grad(x, batch)
    assert got.shape == x.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, autograd_grads(loss, x, batch), rtol=1e-9, atol=1e-12)
    # value: each client's own weighted loss, checked against its own gradient by a
    # directional finite difference
    d = rng.standard_normal(x.shape)
    h = 1e-6
    fd = (loss.value(x + h * d, batch) - loss.value(x - h * d, batch)) / (2 * h)
    np.testing.assert_allclose(fd, np.sum(got * d, axis=1), rtol=1e-5, atol=1e-8)


def tanh_mlp(input_shape, n_classes):
    """A network the hand-batched forward does not implement (Tanh): vmap must run it."""
    return torch.nn.Sequential(torch.nn.Linear(input_shape[0], 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, n_classes))


BLOCK_CASES = [
    ("mlp", (7,), {"hidden": [5, 6, 4]}),
    ("mlp", (2, 3, 5), {"hidden": [4]}),  # images flattened by the first layer
    ("cnn", (1, 8, 8), {"channels": [3, 4], "kernel_size": 5}),
    ("cnn", (2, 9, 11), {"channels": [3, 2], "kernel_size": 3}),  # odd sides: pooling floors
    ("cnn", (3, 12, 12), {"channels": [2, 3], "kernel_size": 4}),  # even kernel
]


@pytest.mark.parametrize(("name", "shape", "options"), BLOCK_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in BLOCK_CASES])
def test_hand_batched_forward_equals_vmap(name, shape, options):
    """fedcomp's mlp and cnn run the hand-batched block forward; it must give the vmap
    path's losses and gradients (float64: to rounding)."""
    loss = TorchModel(name, input_shape=shape, n_classes=4, options=options, l2=0.02)
    batch = _batch(shape, 4, clients=4, samples=6)
    rng = np.random.default_rng(2)
    x = torch.as_tensor(loss.initial_model()[None] + 0.1 * rng.standard_normal(
        (4, loss.layout().size)))
    args = [torch.as_tensor(a) for a in batch]
    args[1] = args[1].long()
    x_req = x.clone().requires_grad_(True)
    block = loss._block_losses(x_req, *args)
    assert loss._cache["plan"] is not None  # this network took the hand-batched path
    x_vmap = x.clone().requires_grad_(True)
    reference = loss._batched()(x_vmap, *args)
    torch.testing.assert_close(block, reference, rtol=1e-12, atol=1e-12)
    (g_block,) = torch.autograd.grad(block.sum(), x_req)
    (g_vmap,) = torch.autograd.grad(reference.sum(), x_vmap)
    torch.testing.assert_close(g_block, g_vmap, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(loss.grad(x.numpy(), batch), autograd_grads(loss, x.numpy(), batch),
                               rtol=1e-9, atol=1e-12)


def bias_free_cnn(input_shape, n_classes):
    c, h, w = input_shape
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(c, 3, 3, padding=1, bias=False), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3 * h * w, n_classes, bias=False))


def test_block_forward_without_biases_matches_backward():
    loss = TorchModel(bias_free_cnn, input_shape=(2, 5, 5), n_classes=3)
    batch = _batch((2, 5, 5), 3)
    x = np.stack([loss.initial_model()] * 3) + np.random.default_rng(3).normal(0, 0.1, (3, 1))
    np.testing.assert_allclose(loss.grad(x, batch), autograd_grads(loss, x, batch),
                               rtol=1e-9, atol=1e-12)
    assert loss._cache["plan"] is not None


def test_block_plan_refuses_what_it_does_not_implement():
    from torch import nn

    from fedcomp.losses._block_forward import block_plan

    image = (2, 6, 6)
    refused = {
        "tanh": (tanh_mlp((7,), 3), (7,)),
        "grouped conv": (nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten(),
                                       nn.Linear(64, 3)), image),
        "linear on images": (nn.Sequential(nn.Conv2d(2, 4, 3), nn.Linear(4, 3)), image),
        "pooling a vector": (nn.Sequential(nn.MaxPool2d(2), nn.Linear(7, 3)), (7,)),
        "string padding": (nn.Sequential(nn.Conv2d(2, 4, 3, padding="same"), nn.Flatten(),
                                         nn.Linear(144, 3)), image),
        "resnet18": (TorchModel("resnet18", input_shape=(3, 8, 8), n_classes=3,
                                options={"width": 4, "norm_groups": 2}).network(), (3, 8, 8)),
    }
    for what, (net, shape) in refused.items():
        assert block_plan(net, shape) is None, what
    assert block_plan(nn.Sequential(nn.Flatten(), nn.Linear(72, 3)), image) is not None


def named_mlp(input_shape, n_classes):
    """Layers named by an OrderedDict: parameters ``fc1.weight``, …, not ``0.weight``."""
    from collections import OrderedDict

    nn = torch.nn
    return nn.Sequential(OrderedDict(fc1=nn.Linear(input_shape[0], 5), act=nn.ReLU(),
                                     fc2=nn.Linear(5, n_classes)))


def named_cnn(input_shape, n_classes):
    from collections import OrderedDict

    c, h, w = input_shape
    nn = torch.nn
    return nn.Sequential(OrderedDict(conv=nn.Conv2d(c, 3, 3, padding=1), act=nn.ReLU(),
                                     pool=nn.MaxPool2d(2), flat=nn.Flatten(),
                                     head=nn.Linear(3 * (h // 2) * (w // 2), n_classes)))


def reused_layer_mlp(input_shape, n_classes):
    """The same Linear twice: its parameters are listed once, under ``2.``, none under ``4.``."""
    nn = torch.nn
    shared = nn.Linear(5, 5)
    return nn.Sequential(nn.Linear(input_shape[0], 5), nn.ReLU(), shared, nn.ReLU(), shared,
                         nn.ReLU(), nn.Linear(5, n_classes))


def tied_weight_mlp(input_shape, n_classes):
    """Two Linear modules sharing one weight tensor (each with its own bias)."""
    nn = torch.nn
    first, second = nn.Linear(5, 5), nn.Linear(5, 5)
    second.weight = first.weight
    return nn.Sequential(nn.Linear(input_shape[0], 5), nn.ReLU(), first, nn.ReLU(), second,
                         nn.ReLU(), nn.Linear(5, n_classes))


@pytest.mark.parametrize(("builder", "shape", "hand_batched"), [
    (named_mlp, (6,), True), (named_cnn, (2, 6, 6), True),
    (reused_layer_mlp, (6,), False), (tied_weight_mlp, (6,), False)],
    ids=["named-mlp", "named-cnn", "reused-layer", "tied-weight"])
def test_named_and_shared_layers_give_the_network_gradients(builder, shape, hand_batched):
    """The hand-batched forward looks each layer's parameters up by the child's name; a
    layer met twice (or a shared tensor) has no parameters under its second name, so that
    network runs through vmap. Either way: the vmap path's and backward()'s gradients."""
    loss = TorchModel(builder, input_shape=shape, n_classes=3, l2=0.01)
    batch = _batch(shape, 3, clients=3, samples=5)
    rng = np.random.default_rng(4)
    x0 = loss.initial_model()
    x = x0[None] + 0.1 * rng.standard_normal((3, loss.layout().size))
    args = [torch.as_tensor(a) for a in batch]
    x_block = torch.as_tensor(x).requires_grad_(True)
    x_vmap = torch.as_tensor(x).requires_grad_(True)
    (g_block,) = torch.autograd.grad(loss._block_losses(x_block, *args).sum(), x_block)
    (g_vmap,) = torch.autograd.grad(loss._batched()(x_vmap, *args).sum(), x_vmap)
    assert (loss._cache["plan"] is not None) == hand_batched
    torch.testing.assert_close(g_block, g_vmap, rtol=1e-10, atol=1e-12)
    loss.predict(x[0], batch.features[0])
    # functional_call must leave the network's own parameters in place (torch's weight tying
    # swaps a module registered twice twice and leaves the call's tensors in it)
    np.testing.assert_array_equal(loss.initial_model(), x0)
    np.testing.assert_allclose(loss.grad(x, batch), autograd_grads(loss, x, batch),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("builder", ["mlp", tanh_mlp], ids=["hand-batched", "vmap"])
@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.uint8])
def test_narrow_integer_class_ids_are_accepted(builder, dtype):
    """ClientData.from_lists keeps int32 labels; cross_entropy needs int64 targets."""
    loss = TorchModel(builder, input_shape=(6,), n_classes=3,
                      options={"hidden": [5]} if builder == "mlp" else None)
    batch = _batch((6,), 3)
    narrow = Batch(batch.features, batch.targets.astype(dtype), batch.weights)
    x = np.stack([loss.initial_model()] * 3) + 0.05
    np.testing.assert_array_equal(loss.grad(x, narrow), loss.grad(x, batch))
    np.testing.assert_array_equal(loss.value(x, narrow), loss.value(x, batch))
    np.testing.assert_allclose(loss.grad(x, narrow), autograd_grads(loss, x, batch),
                               rtol=1e-9, atol=1e-12)


def test_simulate_with_int32_labels_from_lists():
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(4, 3)) for _ in range(2)]
    labels = [np.array([0, 1, 2, 1], dtype=np.int32)] * 2
    data = ClientData.from_lists(feats, labels)
    loss = TorchModel("mlp", input_shape=(3,), n_classes=3, options={"hidden": [4]})
    wide = ClientData.from_lists(feats, [lab.astype(np.int64) for lab in labels])
    runs = [fedcomp.simulate(fedcomp.fedmid(client_lr=0.1, local_steps=2),
                             fedcomp.Problem(loss, L1(0.0), d), 2) for d in (data, wide)]
    assert data.targets.dtype == np.int32  # the case this test is about
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    assert not np.array_equal(runs[0].x, loss.initial_model())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", [(3, 5, 6, 10), (2, 40, 8, 8), (1, 1, 2, 2)])
def test_max_pool_2x2_equals_aten_pooling_with_ties(shape, dtype):
    """Small-integer maps tie in most windows: the values and, exactly, where each window's
    gradient goes (its first maximum in row-major order) must be ATen's."""
    from fedcomp.losses._block_forward import max_pool_2x2

    gen = torch.Generator().manual_seed(sum(shape))
    h = torch.randint(-2, 3, shape, generator=gen).to(dtype)
    grad_out = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2, generator=gen,
                           dtype=dtype)
    ours, aten = h.clone().requires_grad_(True), h.clone().requires_grad_(True)
    out = max_pool_2x2(ours)
    expected = torch.nn.functional.max_pool2d(aten, 2)
    assert torch.equal(out, expected)
    (g_ours,) = torch.autograd.grad(out, ours, grad_out)
    (g_aten,) = torch.autograd.grad(expected, aten, grad_out)
    assert torch.equal(g_ours, g_aten)
    with torch.no_grad():  # no gradient wanted: values only
        assert torch.equal(max_pool_2x2(h), expected.detach())


def test_max_pool_2x2_propagates_nan():
    from fedcomp.losses._block_forward import max_pool_2x2

    h = torch.zeros(1, 1, 4, 4)
    h[0, 0, 0, 1] = float("nan")
    h[0, 0, 3, 2] = float("nan")
    out = max_pool_2x2(h)
    assert torch.equal(out.isnan(), torch.nn.functional.max_pool2d(h, 2).isnan())


def tied_maxima_case():
    """``(loss, x, batch)``: a small CNN with integer weights on integer images, whose
    convolution outputs tie inside pooling windows (the classifier scaled down, so the
    softmax is not flat)."""
    shape = (1, 8, 8)
    loss = TorchModel("cnn", input_shape=shape, n_classes=3,
                      options={"channels": [3, 4], "kernel_size": 3})
    rng = np.random.default_rng(5)
    x = rng.integers(-1, 2, (2, loss.layout().size)).astype(np.float64)
    for entry in loss.layout().entries:
        if entry.name.startswith("7."):  # the classifier
            x[:, entry.offset:entry.offset + entry.size] *= 0.05
    feats = rng.integers(0, 3, (2, 6, *shape)).astype(np.float64)
    return loss, x, Batch(feats, rng.integers(0, 3, (2, 6)), np.full((2, 6), 1 / 6))


def test_block_forward_routes_tied_maxima_like_the_network():
    """Integer weights on integer images make convolution outputs tie inside pooling
    windows (at positive values, on different input patches): the block path pools before
    ReLU with its own 2×2 pooling, the vmap path runs the network as written, and the
    gradients must still agree — a tie sent to another position changes the kernels'
    gradients by O(1)."""
    loss, x, batch = tied_maxima_case()
    net = loss.network()
    torch.nn.utils.vector_to_parameters(torch.as_tensor(x[0]), net.parameters())
    with torch.no_grad():
        pooled_input = net[:2](torch.as_tensor(batch.features[0]))  # conv1 + ReLU, unpooled
    windows = pooled_input.unfold(2, 2, 2).unfold(3, 2, 2).flatten(-2)
    top = windows.max(-1, keepdim=True).values
    ties = ((windows == top).sum(-1) > 1) & (top[..., 0] > 0)
    assert ties.sum() > 20  # the case this test is about does occur
    args = [torch.as_tensor(a) for a in batch]
    x_block = torch.as_tensor(x).requires_grad_(True)
    x_vmap = torch.as_tensor(x).requires_grad_(True)
    (g_block,) = torch.autograd.grad(loss._block_losses(x_block, *args).sum(), x_block)
    (g_vmap,) = torch.autograd.grad(loss._batched()(x_vmap, *args).sum(), x_vmap)
    assert loss._cache["plan"] is not None
    torch.testing.assert_close(g_block, g_vmap, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g_block.numpy(), autograd_grads(loss, x, batch), rtol=1e-9,
                               atol=1e-12)


def test_relu_before_pooling_runs_after_it():
    from torch import nn

    from fedcomp.losses._block_forward import execution_order

    net = TorchModel("cnn", input_shape=(1, 8, 8), n_classes=3,
                     options={"channels": [2, 2]}).network()
    order = [type(layer).__name__ for _, layer in execution_order(tuple(net))]
    assert order == ["Conv2d", "MaxPool2d", "ReLU", "Conv2d", "MaxPool2d", "ReLU", "Flatten",
                     "Linear"]
    plain = (nn.ReLU(), nn.Flatten(), nn.Linear(3, 3))
    assert [i for i, _ in execution_order(plain)] == [0, 1, 2]


def test_network_outside_the_block_plan_runs_through_vmap():
    loss = TorchModel(tanh_mlp, input_shape=(7,), n_classes=3)
    batch = _batch((7,), 3)
    x = np.stack([loss.initial_model()] * 3) + 0.05
    np.testing.assert_allclose(loss.grad(x, batch), autograd_grads(loss, x, batch),
                               rtol=1e-9, atol=1e-12)
    assert loss._cache["plan"] is None


def test_float32_tensors_stay_float32_and_agree_with_float64():
    loss = TorchModel("mlp", input_shape=(12,), n_classes=4, options={"hidden": [8]})
    batch = _batch((12,), 4)
    x64 = np.stack([loss.initial_model()] * 3)
    b32 = Batch(*(torch.as_tensor(a).float() if a.dtype.kind == "f" else torch.as_tensor(a)
                  for a in batch))
    g32 = loss.grad(torch.as_tensor(x64).float(), b32)
    assert isinstance(g32, torch.Tensor) and g32.dtype == torch.float32
    np.testing.assert_allclose(g32.numpy(), loss.grad(x64, batch), rtol=1e-4, atol=1e-6)


def test_layout_masks_and_neuron_groups():
    loss = TorchModel("mlp", input_shape=(5,), n_classes=3, options={"hidden": [4]})
    layout = loss.layout()
    assert layout.names == ("1.weight", "1.bias", "3.weight", "3.bias")
    assert layout.size == 5 * 4 + 4 + 4 * 3 + 3 == loss.param_shape((5,), 3)[0]
    mask = layout.weight_mask()
    assert mask.sum() == 5 * 4 + 4 * 3
    assert not mask[layout.layer_slice("1.bias")].any()
    groups = np.array(layout.neuron_groups())
    # one group per hidden neuron's 5 incoming weights, one per output neuron's 4
    assert list(np.bincount(groups[groups >= 0])) == [5] * 4 + [4] * 3
    # group lasso on neuron groups zeroes whole neurons: rows of the first weight matrix
    x = np.random.default_rng(0).standard_normal((1, layout.size))
    x[0, layout.layer_slice("1.weight")] *= np.repeat([0.01, 1.0, 1.0, 0.01], 5)
    pruned = GroupLasso(0.2, groups=layout.neuron_groups(), weighted=False).prox(x, 1.0)
    rows = pruned[0, layout.layer_slice("1.weight")].reshape(4, 5)
    assert (np.abs(rows).sum(axis=1) == 0).tolist() == [True, False, False, True]
    # biases are singleton groups: group lasso acts on them as the l1 penalty
    np.testing.assert_allclose(pruned[0, layout.layer_slice("1.bias")],
                               L1(0.2).prox(x[:, layout.layer_slice("1.bias")], 1.0)[0])
    with pytest.raises(KeyError, match="no parameter 'fc.weight'"):
        layout.layer_slice("fc.weight")


def layer_norm_cnn(input_shape, n_classes):
    """LayerNorm over (C, H, W): a 3-D scale and a 3-D shift, neither of them a weight."""
    c, h, w = input_shape
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(c, 2, 3, padding=1), nn.LayerNorm((2, h, w)), nn.ReLU(),
                         nn.GroupNorm(1, 2), nn.Flatten(), nn.Linear(2 * h * w, n_classes),
                         nn.RMSNorm((n_classes,)))


def test_norm_parameters_and_biases_are_not_weights_whatever_their_shape():
    loss = TorchModel(layer_norm_cnn, input_shape=(1, 4, 4), n_classes=3)
    layout = loss.layout()
    weights = {e.name for e in layout.entries if e.is_weight}
    assert weights == {"0.weight", "5.weight"}  # the convolution's kernel, the classifier
    assert layout.entries[2] == ("1.weight", (2, 4, 4), 20, False)  # LayerNorm: a 3-D scale
    mask = layout.weight_mask()
    expected = np.zeros(layout.size, dtype=bool)
    for name in weights:
        expected[layout.layer_slice(name)] = True
    np.testing.assert_array_equal(mask, expected)
    # neuron groups only for the kernel's filters and the classifier's rows; the norms'
    # coordinates are singletons (negative labels)
    groups = np.array(layout.neuron_groups())
    assert list(np.bincount(groups[groups >= 0])) == [9] * 2 + [32] * 3
    assert (groups[layout.layer_slice("1.weight")] < 0).all()
    assert (groups[layout.layer_slice("1.bias")] < 0).all()
    # an entry built by hand: a bias is never a weight, another tensor with >= 2 axes is
    from fedcomp.losses import ParamEntry

    assert not ParamEntry("fc.bias", (2, 3), 0).is_weight
    assert ParamEntry("fc.weight", (2, 3), 0).is_weight
    assert not ParamEntry("fc.weight", (2, 3), 0, weight=False).is_weight


@pytest.mark.parametrize(("name", "shape", "options"), NETWORKS, ids=[n[0] for n in NETWORKS])
def test_builtin_networks_weights_are_their_multi_axis_tensors(name, shape, options):
    """fedcomp's networks: weights are exactly the tensors with >= 2 axes (Linear matrices,
    convolution kernels), as before weights were decided by the owning module; ResNet's
    GroupNorm scales and shifts are 1-D."""
    layout = TorchModel(name, input_shape=shape, n_classes=4, options=options).layout()
    assert [e.is_weight for e in layout.entries] == [len(e.shape) >= 2 for e in layout.entries]
    assert any(e.is_weight for e in layout.entries)


@pytest.mark.parametrize("base", [L1(0.3), MCP(0.3, 3.0), SCAD(0.3, 3.7)], ids=repr)
def test_masked_penalty_leaves_biases_alone(base):
    loss = TorchModel("mlp", input_shape=(5,), n_classes=3, options={"hidden": [4]})
    mask = loss.layout().weight_mask()
    reg = Masked(base, mask)
    x = np.random.default_rng(2).standard_normal((2, mask.size))
    out = reg.prox(x, 0.5)
    np.testing.assert_array_equal(out[:, ~mask], x[:, ~mask])
    np.testing.assert_array_equal(out[:, mask], base.prox(x, 0.5)[:, mask])
    np.testing.assert_allclose(reg.value(x), base.value(np.where(mask, x, 0.0)))
    assert reg.weak_convexity == base.weak_convexity and reg.convex == base.convex
    with pytest.raises(ValueError, match="needs step < gamma|step"):
        Masked(MCP(0.3, 3.0), mask).prox(x, 5.0)


def test_masked_rejects_nonseparable_and_bad_masks():
    with pytest.raises(ValueError, match="coordinate-separable"):
        Masked(GroupLasso(1.0, groups=(0, 0, 1)), np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="1-D boolean"):
        Masked(L1(1.0), np.ones(3))
    with pytest.raises(ValueError, match=r"mask has shape \(3,\) but the models have shape \(4,\)"):
        Masked(L1(1.0), np.ones(3, dtype=bool)).prox(np.ones((1, 4)), 1.0)


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown network 'vgg'; valid: cnn, mlp, resnet18"):
        TorchModel("vgg", input_shape=(3,), n_classes=2)
    with pytest.raises(ValueError, match="input_shape must be the shape of one sample"):
        TorchModel("mlp", n_classes=2)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
        TorchModel("mlp", input_shape=(3,), n_classes=1)
    for bad in (True, 3.0, "3"):
        with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
            TorchModel("mlp", input_shape=(3,), n_classes=bad)
    loss = TorchModel("cnn", input_shape=(1, 8, 8), n_classes=3)
    with pytest.raises(ValueError, match=r"set input_shape=\[64\]"):
        loss.param_shape((64,), 3)
    with pytest.raises(ValueError, match="cnn needs image samples"):
        TorchModel("cnn", input_shape=(64,), n_classes=3).layout()

    def with_batchnorm(input_shape, n_classes):
        return torch.nn.Sequential(torch.nn.Linear(input_shape[0], 4), torch.nn.BatchNorm1d(4),
                                   torch.nn.Linear(4, n_classes))

    with pytest.raises(ValueError, match="has buffers .*use GroupNorm"):
        TorchModel(with_batchnorm, input_shape=(3,), n_classes=2).layout()


def test_numpy_integer_n_classes_is_accepted():
    """Like input_shape, n_classes may be a NumPy integer (e.g. read off a label array)."""
    loss = TorchModel("mlp", input_shape=(np.int64(3),), n_classes=np.int64(3))
    assert type(loss.n_classes) is int and loss.n_classes == 3
    assert loss == TorchModel("mlp", input_shape=(3,), n_classes=3)
    assert loss.param_shape((3,), 3) == (3 * 128 + 128 + 128 * 3 + 3,)
    assert TorchModel("mlp", input_shape=(3,), n_classes=np.int32(4)).n_classes == 4


def test_initial_model_is_seeded():
    a = TorchModel("mlp", input_shape=(4,), n_classes=2, init_seed=1).initial_model()
    b = TorchModel("mlp", input_shape=(4,), n_classes=2, init_seed=1).initial_model()
    c = TorchModel("mlp", input_shape=(4,), n_classes=2, init_seed=2).initial_model()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    data = ClientData.from_lists([np.ones((3, 4))] * 2, [np.array([0, 1, 1])] * 2)
    problem = fedcomp.Problem(TorchModel("mlp", input_shape=(4,), n_classes=2, init_seed=1),
                              L1(0.0), data)
    np.testing.assert_array_equal(problem.initial_model(), a)
    # (the simulator starts there: the loop comparisons below start their loops from it)


# --- the algorithms on a network: vectorised torch runs vs per-client autograd loops ---------
def _mlp_problem():
    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=5, n_classes=10,
                             samples_per_client=30, seed=3)
    loss = TorchModel("mlp", input_shape=(60,), n_classes=10, options={"hidden": [16]})
    reg = Masked(L1(1e-3), loss.layout().weight_mask())
    return loss, reg, data


ALGORITHMS = {
    "fedmid": (lambda: fedcomp.fedmid(client_lr=0.05, local_steps=3),
               lambda p, x0: loop_fedmid(p, 4, 0.05, 3, batch_size=8, x0=x0)),
    "fedda": (lambda: fedcomp.fedda(client_lr=0.05, local_steps=3),
              lambda p, x0: loop_fedda(p, 4, 0.05, 3, batch_size=8, x0=x0)),
    "za1": (lambda: fedcomp.za1(client_lr=0.05, local_steps=3),
            lambda p, x0: loop_za1(p, 4, 0.05, 3, batch_size=8, x0=x0)),
    "fedcanon": (lambda: fedcomp.fedcanon(client_lr=0.05, local_steps=3, server_lr=0.15),
                 lambda p, x0: loop_fedcanon(p, 4, 0.05, 3, 0.15, batch_size=8, x0=x0)),
}


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_torch_run_matches_per_client_autograd_loop(name):
    make, loop = ALGORITHMS[name]
    loss, reg, data = _mlp_problem()
    on_torch = fedcomp.Problem(loss, reg, data.to(torch.zeros(0, dtype=torch.float32)))
    run = fedcomp.simulate(make(), on_torch, rounds=4, batch_size=8,
                           options=fedcomp.RunOptions(client_block=2))
    assert isinstance(run.x, torch.Tensor) and run.x.dtype == torch.float32
    x0 = loss.initial_model()
    expected = loop(fedcomp.Problem(AutogradLoss(loss), reg, data), x0)
    moved = np.abs(expected - x0).max()
    assert moved > 1e-2  # the loop really trained: the comparison below is not vacuous
    np.testing.assert_allclose(run.x.numpy(), expected, rtol=0, atol=1e-5)
    # NumPy float64 data through the same TorchModel: the same iterates as the loop, tighter
    numpy_run = fedcomp.simulate(make(), fedcomp.Problem(loss, reg, data), rounds=4,
                                 batch_size=8)
    np.testing.assert_allclose(numpy_run.x, expected, rtol=0, atol=1e-10)


def test_network_metrics_on_holdout():
    loss, reg, data = _mlp_problem()
    feats, targs, _ = data.pooled()
    holdout = (feats[:20], targs[:20].astype(np.int64))
    problem = fedcomp.Problem(loss, reg, _with_holdout(data, holdout))
    x = problem.initial_model()
    row = fedcomp.metrics.evaluate(problem, x, ["train_accuracy", "test_accuracy", "test_loss",
                                                "sparsity"])
    logits = loss.predict(x, holdout[0])
    assert row["test_accuracy"] == np.mean(np.argmax(logits, 1) == holdout[1])
    shifted = logits - logits.max(axis=1, keepdims=True)
    expected = np.mean(np.log(np.exp(shifted).sum(1)) - shifted[np.arange(20), holdout[1]])
    assert row["test_loss"] == pytest.approx(expected, rel=1e-12)
    assert row["sparsity"] == 0.0
    trained = reg.prox(x[None] + 0.0, 1e3)[0]  # a huge step zeroes every weight, keeps biases
    mask = loss.layout().weight_mask()
    assert fedcomp.metrics.evaluate(problem, trained, ["sparsity"])["sparsity"] == pytest.approx(
        mask.mean())


def _with_holdout(data, holdout):
    import dataclasses

    return dataclasses.replace(data, holdout=holdout)


# --- configurations: the torch backend, weights-only penalties, the prox-cost timing ---------
def _mlp_config(**overrides):
    config = {
        "name": "mlp_config", "rounds": 3, "eval_every": 3, "batch_size": 8,
        "metrics": ["objective", "train_accuracy", "sparsity"],
        "data": {"generator": "synthetic_fedprox", "alpha": 1.0, "beta": 1.0, "n_clients": 4,
                 "n_classes": 10, "samples_per_client": 20, "seed": 0},
        "problem": {"loss": "torch_model", "model": "mlp", "input_shape": [60],
                    "n_classes": 10, "options": {"hidden": [8]}},
        "regularizer": {"name": "scad", "alpha": 1e-3, "a": 3.7, "scope": "weights"},
        "algorithms": [{"name": "fedcanon", "client_lr": 0.05, "local_steps": 2,
                        "server_lr": 0.1}],
    }
    config.update(overrides)
    return config


def test_config_runs_a_network_on_torch_float32(tmp_path):
    from fedcomp.experiments import build_problem, run_experiment, validate

    cfg = validate(_mlp_config())
    assert cfg["reference"] is None  # no centralized x* for a network
    problem = build_problem(cfg)
    assert isinstance(problem.data.features, torch.Tensor)
    assert problem.data.features.dtype == torch.float32
    assert isinstance(problem.regularizer, Masked)
    np.testing.assert_array_equal(problem.regularizer.mask, problem.loss.layout().weight_mask())
    summary = run_experiment(_mlp_config(), tmp_path, progress=False)
    assert summary[0]["status"] == "ok" and 0.0 <= summary[0]["train_accuracy"] <= 1.0
    assert np.load(tmp_path / "models" / "fedcanon_seed0.npy").shape == problem.param_shape
    # the float64 backend gives the same model up to float32 rounding
    run64 = run_experiment(_mlp_config(backend="torch-float64"), tmp_path / "f64",
                           progress=False)
    np.testing.assert_allclose(np.load(tmp_path / "f64" / "models" / "fedcanon_seed0.npy"),
                               np.load(tmp_path / "models" / "fedcanon_seed0.npy"), atol=1e-5)
    assert run64[0]["status"] == "ok"


def test_config_errors_name_the_fix():
    from fedcomp.config import ConfigError
    from fedcomp.experiments import validate

    with pytest.raises(ConfigError, match="backend: unknown backend 'tpu'"):
        validate(_mlp_config(backend="tpu"))
    validate(_mlp_config(backend="jax"))  # jax computes the mlp (fedcomp.losses._jax_forward)
    resnet = {"loss": "torch_model", "model": "resnet18", "input_shape": [3, 8, 8],
              "n_classes": 10, "options": {"width": 4}}
    with pytest.raises(ConfigError, match="network 'resnet18' computes with torch .* use backend"):
        validate(_mlp_config(backend="jax", problem=resnet, regularizer={"name": "l1",
                                                                       "alpha": 1e-3}))
    with pytest.raises(ConfigError, match="scope must be 'all' or 'weights'"):
        validate(_mlp_config(regularizer={"name": "l1", "alpha": 1.0, "scope": "biases"}))
    linear = _mlp_config(problem={"loss": "softmax"})
    linear["regularizer"] = {"name": "l1", "alpha": 1.0, "scope": "weights"}
    with pytest.raises(ConfigError, match="scope = 'weights' needs a network"):
        validate(linear)


def test_prox_cost_timing_experiment(tmp_path):
    from fedcomp.experiments import run_experiment
    from fedcomp.experiments.claims.prox_cost import verdict

    config = {"name": "prox_cost", "kind": "timing", "batch_size": 4, "repeats": 1,
              "networks": [{"name": "mlp", "input_shape": [1, 6, 6], "options": {"hidden": [4]}},
                           {"name": "resnet18", "label": "resnet18-w4", "input_shape": [3, 8, 8],
                            "options": {"width": 4}}],
              "penalties": [{"name": "l1", "alpha": 1e-4}, {"name": "mcp", "alpha": 1e-4},
                            {"name": "scad", "alpha": 1e-4}]}
    rows = run_experiment(config, tmp_path, stream=open(tmp_path / "out.txt", "w"))
    assert [r["network"] for r in rows] == ["mlp", "resnet18-w4"]
    assert rows[0]["parameters"] == 36 * 4 + 4 + 4 * 10 + 10
    for row in rows:
        for p in ("l1", "mcp", "scad"):
            assert row[f"{p}_ms"] > 0
            assert row[f"{p}_ratio"] == pytest.approx(row[f"{p}_ms"] / row["fwd_bwd_ms"])
    text = (tmp_path / "summary.md").read_text()
    assert "| resnet18-w4 |" in text and "Verdict:" in text
    assert (tmp_path / "results.csv").read_text().count("\n") == 3
    # the rule: ratios against half the paper's
    fake = [{"network": "resnet18", "l1_ratio": 0.7, "mcp_ratio": 1.3, "scad_ratio": 2.3}]
    assert verdict(fake)[0].startswith("reproduced")
    fake[0]["scad_ratio"] = 0.1
    assert verdict(fake)[0].startswith("partly")
    fake[0].update(l1_ratio=0.01, mcp_ratio=0.01)
    assert verdict(fake)[0].startswith("not reproduced")


@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_a_large_blocks_value_is_computed_in_chunks_with_the_same_value(monkeypatch, l2):
    """A loss value over more samples than one forward pass takes (VALUE_SAMPLES) is summed
    client by client over chunks of rows, the ridge term once: the value of the one-pass
    forward (a ResNet-18 metric on 10 clients of 5000 images ran out of a GPU's memory)."""
    import fedcomp.losses._torch as torch_module
    from fedcomp.data import ClientData

    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(n, 6)) for n in (70, 45, 90)],
                                 [rng.integers(0, 3, n).astype(float) for n in (70, 45, 90)])
    loss = TorchModel("mlp", input_shape=(6,), n_classes=3, options={"hidden": [5]}, l2=l2)
    x = np.stack([loss.initial_model() * (1 + k) for k in range(3)])
    whole = loss.value(x, data.full_batch())
    calls = []
    monkeypatch.setattr(torch_module, "VALUE_SAMPLES", 32)
    original = TorchModel._block_losses
    monkeypatch.setattr(TorchModel, "_block_losses",
                        lambda self, *a: calls.append(a[2].shape) or original(self, *a))
    chunked = loss.value(x, data.full_batch())
    assert max(shape[1] for shape in calls) <= 32 and len(calls) == 3 * 3  # 90 rows: 3 chunks
    np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=0)


@pytest.mark.parametrize(("name", "shape", "options"), NETWORKS, ids=[n[0] for n in NETWORKS])
def test_a_client_loop_gives_the_batched_forwards_values_gradients_and_run(name, shape,
                                                                            options):
    """``client_loop=True`` computes a block client by client (plain convolutions) where
    the default batches it (the hand-batched forward, or vmap's grouped convolutions): the
    same values and gradients in float64 to rounding, the same run to 1e-10, and the
    option is in the repr only when set (a checkpoint of one does not resume the other)."""
    batched = TorchModel(name, input_shape=shape, n_classes=4, options=options, l2=0.01)
    looped = TorchModel(name, input_shape=shape, n_classes=4, options=options, l2=0.01,
                        client_loop=True)
    batch = _batch(shape, 4)
    rng = np.random.default_rng(2)
    x = batched.initial_model()[None] + 0.1 * rng.standard_normal((3, batched.layout().size))
    np.testing.assert_allclose(looped.grad(x, batch), batched.grad(x, batch), rtol=0,
                               atol=1e-13)
    np.testing.assert_allclose(looped.value(x, batch), batched.value(x, batch), rtol=0,
                               atol=1e-13)
    data = fedcomp.ClientData.from_lists(
        [rng.standard_normal((9, *shape)) for _ in range(3)],
        [rng.integers(0, 4, 9) for _ in range(3)])
    runs = [fedcomp.simulate(fedcomp.fedmid(client_lr=0.1, local_steps=2),
                             fedcomp.Problem(loss, L1(1e-3), data), rounds=3, batch_size=4,
                             seed=1) for loss in (batched, looped)]
    assert np.abs(runs[0].x - batched.initial_model()).max() > 1e-3  # it trained
    np.testing.assert_allclose(runs[1].x, runs[0].x, rtol=0, atol=1e-10)
    assert "client_loop" not in repr(batched) and repr(looped).endswith("client_loop=True)")
    with pytest.raises(ValueError, match="client_loop must be True or False"):
        TorchModel(name, input_shape=shape, n_classes=4, options=options, client_loop=1)
