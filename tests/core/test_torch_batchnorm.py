"""BatchNorm networks, ``TorchModel(buffers="batch_stats")`` (issue 46): each client's batch
normalised with its own statistics (padding never enters them), the gradients of PyTorch's
own training mode, running statistics made at export (one client's, as PyTorch accumulates
them, or the clients' average), and a user's residual BatchNorm network by import path
through a configuration."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedcomp.data import Batch, ClientData  # noqa: E402
from fedcomp.losses import TorchModel  # noqa: E402

pytestmark = pytest.mark.torch

MODULE = '''
import torch
from torch import nn


class Residual(nn.Module):
    """x + relu(bn(linear(x))): a residual block with a BatchNorm."""

    def __init__(self, width):
        super().__init__()
        self.linear, self.norm = nn.Linear(width, width), nn.BatchNorm1d(width)

    def forward(self, x):
        return x + torch.relu(self.norm(self.linear(x)))


def bn_resnet(input_shape, n_classes, width=6):
    return nn.Sequential(nn.Linear(input_shape[0], width), nn.BatchNorm1d(width), nn.ReLU(),
                         Residual(width), nn.Linear(width, n_classes))


def counter_net(input_shape, n_classes):
    net = nn.Linear(input_shape[0], n_classes)
    net.register_buffer("calls", torch.zeros(1))
    return net
'''
DIM, CLASSES = 5, 3


@pytest.fixture
def bn_module(import_user_module):
    return import_user_module("bnnets", MODULE)


def _loss():
    return TorchModel("bnnets:bn_resnet", input_shape=(DIM,), n_classes=CLASSES,
                      buffers="batch_stats")


def _data(sizes=(7, 11, 9), seed=0):
    rng = np.random.default_rng(seed)
    return ClientData.from_lists([rng.normal(size=(n, DIM)) + k for k, n in enumerate(sizes)],
                                 [rng.integers(0, CLASSES, n) for n in sizes])


def _trained(loss, seed=1):
    rng = np.random.default_rng(seed)
    return loss.initial_model() + 0.2 * rng.standard_normal(loss.layout().size)


def _backward_grad(loss, x, features, targets, weights):
    """One client's gradient the plain way: a fresh module in training mode, backward()."""
    module = loss._built().double().train()
    torch.nn.utils.vector_to_parameters(torch.from_numpy(x), module.parameters())
    out = module(torch.from_numpy(features))
    value = torch.sum(torch.from_numpy(weights) * torch.nn.functional.cross_entropy(
        out, torch.from_numpy(targets).long(), reduction="none"))
    grads = torch.autograd.grad(value, list(module.parameters()))
    return torch.cat([g.reshape(-1) for g in grads]).numpy()


@pytest.mark.parametrize("sizes", [(8, 8, 8), (7, 11, 9)], ids=["equal", "padded"])
def test_gradients_are_training_modes_on_each_clients_own_rows(bn_module, sizes):
    """Equal sizes run vmapped; padded ones client by client: either way each client's
    statistics are its real rows', as backward() on the module in training mode gives."""
    loss, data = _loss(), _data(sizes)
    x = np.stack([_trained(loss, s) for s in range(3)])
    batch = data.full_batch()
    got = loss.grad(x, batch)
    for i, n in enumerate(sizes):
        expected = _backward_grad(loss, x[i], np.asarray(batch.features[i, :n]),
                                  np.asarray(batch.targets[i, :n]),
                                  np.asarray(batch.weights[i, :n]))
        np.testing.assert_allclose(got[i], expected, rtol=1e-10, atol=1e-12)
    # a padded row's values never matter: change them, the gradients stay
    features = np.array(batch.features)
    features[0, sizes[0]:] = 1e3
    if sizes[0] < features.shape[1]:
        moved = loss.grad(x, Batch(features, batch.targets, batch.weights))
        np.testing.assert_array_equal(moved, got)


def test_one_clients_running_statistics_are_pytorchs_own(bn_module):
    loss, data = _loss(), _data()
    x = _trained(loss)
    module = loss.to_module(x, data=data, client=1)
    assert not module.training
    reference = loss._built().double()
    torch.nn.utils.vector_to_parameters(torch.from_numpy(x), reference.parameters())
    for layer in reference.modules():
        if isinstance(layer, torch.nn.BatchNorm1d):
            layer.momentum = None  # PyTorch's cumulative average: one batch, its statistics
    reference.train()
    with torch.no_grad():
        reference(torch.from_numpy(np.asarray(data.features[1, :11])))
    for (name, ours), (_, theirs) in zip(module.named_buffers(), reference.named_buffers(),
                                         strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12, msg=name)


def test_averaged_statistics_of_the_first_layer_are_the_pooled_datas(bn_module):
    """The first BatchNorm sees the inputs' linear map alone, so its averaged statistics
    must be the pooled samples' mean and unbiased variance there."""
    loss, data = _loss(), _data()
    x = _trained(loss)
    module = loss.to_module(x, data=data)
    pooled = np.concatenate([np.asarray(data.features[i, :n])
                             for i, n in enumerate(data.counts)])
    first = module[0]
    activations = pooled @ first.weight.detach().numpy().T + first.bias.detach().numpy()
    np.testing.assert_allclose(module[1].running_mean.numpy(), activations.mean(axis=0),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(module[1].running_var.numpy(), activations.var(axis=0, ddof=1),
                               rtol=1e-10, atol=1e-12)
    # evaluation mode predicts with them: the pooled data normalised by their statistics
    with torch.no_grad():
        out = module(torch.from_numpy(pooled)).numpy()
    assert out.shape == (len(pooled), CLASSES) and np.isfinite(out).all()


def test_a_bn_network_by_import_path_trains_through_a_configuration(bn_module, tmp_path):
    from fedcomp.experiments import run_experiment
    from tests.core.test_torch_models import _mlp_config

    config = _mlp_config(problem={"loss": "torch_model", "model": "bnnets:bn_resnet",
                                  "input_shape": [60], "n_classes": 10,
                                  "buffers": "batch_stats", "options": {"width": 8}},
                         backend="torch-float64")
    summary = run_experiment(config, tmp_path / "out", progress=False)
    assert summary[0]["status"] == "ok" and np.isfinite(summary[0]["objective"])


def test_buffers_are_refused_or_named(bn_module):
    with pytest.raises(ValueError, match="has buffers .*buffers='batch_stats' for BatchNorm"):
        TorchModel("bnnets:bn_resnet", input_shape=(DIM,), n_classes=CLASSES).network()
    with pytest.raises(ValueError, match=r"BatchNorm layers' statistics only.*\['calls'\]"):
        TorchModel("bnnets:counter_net", input_shape=(DIM,), n_classes=CLASSES,
                   buffers="batch_stats").network()
    with pytest.raises(ValueError, match="buffers must be None or 'batch_stats'"):
        TorchModel("mlp", input_shape=(DIM,), n_classes=CLASSES, buffers="average")
    loss = _loss()
    with pytest.raises(ValueError, match="running statistics come from data"):
        loss.to_module(_trained(loss))
    with pytest.raises(ValueError, match=r"client=7, but the data have clients 0..2"):
        loss.to_module(_trained(loss), data=_data(), client=7)
    plain = TorchModel("mlp", input_shape=(DIM,), n_classes=CLASSES, options={"hidden": [4]})
    with pytest.raises(ValueError, match="this network has none"):
        plain.to_module(plain.initial_model(), data=_data())
