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
