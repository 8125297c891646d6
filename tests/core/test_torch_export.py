"""A trained network leaves fedcomp as an ``nn.Module`` (issue 46): ``TorchModel.to_module``
gives the model's outputs, its state loads into the user's own builder, and a bad model
vector is one error."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedcomp.losses import TorchModel  # noqa: E402
from tests.core.test_torch_models import NETWORKS, tied_weight_mlp  # noqa: E402

pytestmark = pytest.mark.torch


def _trained(loss, seed=0):
    """A model away from the initial one (as training leaves it)."""
    rng = np.random.default_rng(seed)
    return loss.initial_model() + 0.1 * rng.standard_normal(loss.layout().size)


@pytest.mark.parametrize(("name", "shape", "options"), [*NETWORKS, (tied_weight_mlp, (6,), None)],
                         ids=[*(n[0] for n in NETWORKS), "tied-weight"])
def test_to_module_gives_the_models_outputs_and_state(name, shape, options):
    loss = TorchModel(name, input_shape=shape, n_classes=3, options=options)
    x = _trained(loss)
    module = loss.to_module(x)
    features = np.random.default_rng(1).standard_normal((4, *shape))
    out = module(torch.from_numpy(features))
    assert out.dtype == torch.float64
    np.testing.assert_array_equal(out.detach().numpy(), loss.predict(x, features))
    # the flat vector is the module's parameters, in named_parameters' order, each once
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy()
    np.testing.assert_array_equal(flat, x)
    # the state loads into a fresh network from the user's builder
    rebuilt = TorchModel(name, input_shape=shape, n_classes=3, options=options,
                         init_seed=7).network()
    rebuilt = rebuilt.double()
    rebuilt.load_state_dict(module.state_dict())
    np.testing.assert_array_equal(rebuilt(torch.from_numpy(features)).detach().numpy(),
                                  out.detach().numpy())
    # the loss's own skeleton is untouched
    np.testing.assert_array_equal(loss.initial_model(),
                                  TorchModel(name, input_shape=shape, n_classes=3,
                                             options=options).initial_model())


def test_to_module_keeps_a_float32_tensors_dtype():
    loss = TorchModel("mlp", input_shape=(5,), n_classes=2, options={"hidden": [4]})
    x = torch.from_numpy(_trained(loss)).float()
    module = loss.to_module(x)
    assert next(module.parameters()).dtype == torch.float32


@pytest.mark.parametrize(("x", "match"), [
    (np.zeros(3), r"one model of shape \(50,\) \(got \(3,\)\)"),
    (np.zeros((2, 50)), r"one model of shape \(50,\) \(got \(2, 50\)\)"),
    (np.full(50, np.nan), "NaN or infinite"),
])
def test_to_module_refuses_what_is_not_one_finite_model(x, match):
    loss = TorchModel("mlp", input_shape=(5,), n_classes=2, options={"hidden": [6]})
    with pytest.raises(ValueError, match=match):
        loss.to_module(x)


# --- pruning: the neurons and filters a group penalty zeroed, removed --------------------------
def _parameters(module):
    return sum(p.numel() for p in module.parameters())


def _outputs(module, features):
    with torch.no_grad():
        return module(torch.from_numpy(features)).numpy()


def _zero_units(loss, x, layer, units, bias=None):
    """``x`` with the incoming weights of ``units`` of parameter ``layer`` zeroed (and their
    biases set to ``bias``, one value per unit)."""
    x = x.copy()
    layout = loss.layout()
    weight = x[layout.layer_slice(f"{layer}.weight")].reshape(
        layout.entries[layout.names.index(f"{layer}.weight")].shape)
    weight[list(units)] = 0.0
    if bias is not None:
        x[layout.layer_slice(f"{layer}.bias")][list(units)] = bias
    return x


def test_a_pruned_mlp_has_the_outputs_with_fewer_parameters():
    loss = TorchModel("mlp", input_shape=(12,), n_classes=3, options={"hidden": [8, 6]})
    x = _trained(loss)
    # hidden layer 1 (parameter "1"): units 0, 3 dead with a positive and a negative bias
    x = _zero_units(loss, x, 1, [0, 3], bias=[0.7, -0.2])
    # hidden layer 2 ("3"): unit 5 unused (its column of the output layer "5" is zero)
    out_weight = x[loss.layout().layer_slice("5.weight")].reshape(3, 6)
    out_weight[:, 5] = 0.0
    pruned = loss.pruned_module(x)
    features = np.random.default_rng(2).standard_normal((20, 12))
    np.testing.assert_allclose(_outputs(pruned, features), loss.predict(x, features),
                               rtol=1e-12, atol=1e-12)
    assert pruned[1].out_features == 6 and pruned[3].out_features == 5
    assert _parameters(pruned) == _parameters(loss.to_module(x)) - 2 * (12 + 1 + 6) - (6 + 1 + 3)


def test_a_pruned_cnn_folds_what_it_can_and_keeps_what_padding_forbids():
    """Padded ("same") convolutions: a dead filter whose ReLU output is 0 goes, one with a
    positive bias stays (at the border its constant meets the zero padding); the last
    convolution's dead filters fold into the linear head."""
    loss = TorchModel("cnn", input_shape=(1, 8, 8), n_classes=3,
                      options={"channels": [4, 5], "kernel_size": 3})
    x = _trained(loss)
    x = _zero_units(loss, x, 0, [1, 2], bias=[-0.3, 0.4])  # 1 goes, 2 stays
    x = _zero_units(loss, x, 3, [0, 4], bias=[0.5, -1.0])  # both go: the head is Linear
    pruned = loss.pruned_module(x)
    features = np.random.default_rng(3).standard_normal((6, 1, 8, 8))
    np.testing.assert_allclose(_outputs(pruned, features), loss.predict(x, features),
                               rtol=1e-12, atol=1e-12)
    assert pruned[0].out_channels == 3 and pruned[3].out_channels == 3
    assert _parameters(pruned) < _parameters(loss.to_module(x))


def unpadded_cnn(input_shape, n_classes):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(input_shape[0], 4, 3), nn.Tanh(), nn.Conv2d(4, 3, 3),
                         nn.GELU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(3, n_classes))


def test_an_unpadded_convolution_takes_a_dead_filters_constant_and_a_layer_keeps_one_unit():
    loss = TorchModel(unpadded_cnn, input_shape=(2, 6, 6), n_classes=2)
    features = np.random.default_rng(4).standard_normal((5, 2, 6, 6))
    x = _zero_units(loss, _trained(loss), 0, [0, 2], bias=[0.9, -0.4])  # tanh: both nonzero
    pruned = loss.pruned_module(x)
    np.testing.assert_allclose(_outputs(pruned, features), loss.predict(x, features),
                               rtol=1e-12, atol=1e-12)
    assert pruned[0].out_channels == 2 and pruned[2].out_channels == 3
    # every unit of the second convolution dead: it keeps one, sending nothing, and the
    # first convolution's filters, unused now, go but one
    x = _zero_units(loss, x, 2, [0, 1, 2], bias=[0.3, 0.1, -0.2])
    pruned = loss.pruned_module(x)
    np.testing.assert_allclose(_outputs(pruned, features), loss.predict(x, features),
                               rtol=1e-12, atol=1e-12)
    assert pruned[0].out_channels == 1 and pruned[2].out_channels == 1


def test_group_lasso_training_gives_a_smaller_network_with_the_same_outputs():
    """The real use: a federated run with group lasso over neurons zeroes some; the pruned
    network has fewer parameters and the trained model's outputs (1e-6)."""
    from fedcomp import Problem, simulate
    from fedcomp.algorithms import make_algorithm
    from fedcomp.data import synthetic_fedprox
    from fedcomp.regularizers import GroupLasso

    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=4, n_features=10, n_classes=3,
                             samples_per_client=40, seed=0)
    loss = TorchModel("mlp", input_shape=(10,), n_classes=3, options={"hidden": [16]})
    penalty = GroupLasso(0.02, groups=loss.layout().neuron_groups())
    run = simulate(make_algorithm("fedmid", client_lr=0.1, local_steps=2),
                   Problem(loss, penalty, data), 40, seed=0)
    pruned = loss.pruned_module(run.x)
    assert 1 < pruned[1].out_features < 16  # some neurons, not all, went
    features = np.asarray(data.features[0, :10])
    np.testing.assert_allclose(_outputs(pruned, features), loss.predict(run.x, features),
                               rtol=1e-6, atol=1e-6)
    assert _parameters(pruned) < _parameters(loss.to_module(run.x))


def test_pruning_refuses_what_it_cannot_pass():
    loss = TorchModel("resnet18", input_shape=(3, 8, 8), n_classes=2,
                      options={"width": 4, "norm_groups": 2})
    with pytest.raises(ValueError, match=r"layer '1' \(GroupNorm\).*to_module"):
        loss.pruned_module(loss.initial_model())

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 2)

        def forward(self, features):
            return self.layer(features)

    custom = TorchModel(lambda shape, k: Net(), input_shape=(3,), n_classes=2)
    with pytest.raises(ValueError, match=r"nn.Sequential .*\(got Net\).*to_module"):
        custom.pruned_module(custom.initial_model())
    dropout = TorchModel(lambda shape, k: torch.nn.Sequential(
        torch.nn.Linear(shape[0], 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, k)),
        input_shape=(3,), n_classes=2)
    with pytest.raises(ValueError, match=r"layer '1' \(Dropout\)"):
        dropout.pruned_module(dropout.initial_model())
