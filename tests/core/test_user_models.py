"""A user's own network named by its import path, ``"package.module:factory"`` (issue 46):
in ``TorchModel`` and in a configuration, the same network as the builder passed itself;
and each wrong path is one error naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedcomp.losses import TorchModel  # noqa: E402
from tests.core.test_torch_models import _batch, _mlp_config  # noqa: E402

pytestmark = pytest.mark.torch

MODULE = '''
import torch

def tanh_net(input_shape, n_classes, hidden=4):
    """A user's builder: not one of fedcomp's networks."""
    return torch.nn.Sequential(torch.nn.Linear(input_shape[0], hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, n_classes))

class Zoo:
    small = staticmethod(tanh_net)

NOT_A_BUILDER = 3
'''


@pytest.fixture
def user_module(import_user_module):
    return import_user_module("usernets", MODULE)


@pytest.mark.parametrize("path", ["usernets:tanh_net", "usernets:Zoo.small"])
def test_an_import_path_builds_the_users_network(user_module, path):
    by_path = TorchModel(path, input_shape=(6,), n_classes=3, options={"hidden": 5})
    by_callable = TorchModel(user_module.tanh_net, input_shape=(6,), n_classes=3,
                             options={"hidden": 5})
    assert by_path.layout().size == 6 * 5 + 5 + 5 * 3 + 3
    np.testing.assert_array_equal(by_path.initial_model(), by_callable.initial_model())
    batch = _batch((6,), 3)
    x = np.stack([by_path.initial_model()] * 3)
    np.testing.assert_array_equal(by_path.grad(x, batch), by_callable.grad(x, batch))
    assert hash(by_path) == hash(TorchModel(path, input_shape=(6,), n_classes=3,
                                            options={"hidden": 5}))


def test_a_configuration_names_the_users_network(user_module, tmp_path):
    from fedcomp.experiments import build_problem, run_experiment, validate

    config = _mlp_config(problem={"loss": "torch_model", "model": "usernets:tanh_net",
                                  "input_shape": [60], "n_classes": 10,
                                  "options": {"hidden": 6}})
    problem = build_problem(validate(config))
    assert problem.loss.model == "usernets:tanh_net"
    assert problem.param_shape == (60 * 6 + 6 + 6 * 10 + 10,)
    summary = run_experiment(config, tmp_path / "out", progress=False)
    assert summary[0]["status"] == "ok"


@pytest.mark.parametrize(("path", "match"), [
    ("vgg", r"unknown network 'vgg'; valid: cnn, mlp, resnet18, an import path"),
    ("nowhere_pkg.nets:make", r"cannot import 'nowhere_pkg.nets' .*PYTHONPATH"),
    ("usernets:missing", r"'usernets' has no 'missing'"),
    ("usernets:NOT_A_BUILDER", r"is a int, not a builder"),
    ("usernets:", r"unknown network 'usernets:'"),
])
def test_a_wrong_import_path_says_what_is_wrong(user_module, path, match):
    with pytest.raises(ValueError, match=match):
        TorchModel(path, input_shape=(6,), n_classes=3)


def test_the_flower_strategy_carries_the_network_by_its_path(user_module):
    """A Strategy sends its loss to the nodes as JSON: an import path travels, and the node
    rebuilds the same network (a builder passed itself could not travel)."""
    pytest.importorskip("flwr")
    import json

    from fedcomp.config import to_jsonable
    from fedcomp.flower._strategy import build_component, component_spec
    from fedcomp.losses import LOSSES, make_loss

    loss = TorchModel("usernets:tanh_net", input_shape=(6,), n_classes=3,
                      options={"hidden": 5})
    spec = json.loads(json.dumps(to_jsonable(component_spec(loss, LOSSES, "loss"))))
    rebuilt = build_component(spec, make_loss, "loss")
    assert rebuilt == loss
    np.testing.assert_array_equal(rebuilt.initial_model(), loss.initial_model())
    with pytest.raises(ValueError, match="cannot travel to the nodes as JSON"):
        component_spec(TorchModel(user_module.tanh_net, input_shape=(6,), n_classes=3),
                       LOSSES, "loss")


def test_a_module_instance_is_the_network_its_weights_the_initial_model(user_module):
    """``TorchModel(net, ...)``: the same gradients as the builder that made ``net``, the
    initial model is ``net``'s own weights, the instance is never changed by a run, and
    builder options, which an instance cannot take, are one error."""
    from fedcomp import Problem, fedmid, simulate
    from fedcomp.data import ClientData
    from fedcomp.regularizers import L1

    net = user_module.tanh_net((6,), 3, hidden=5)
    weights = [p.detach().clone() for p in net.parameters()]
    by_instance = TorchModel(net, input_shape=(6,), n_classes=3)
    by_builder = TorchModel(user_module.tanh_net, input_shape=(6,), n_classes=3,
                            options={"hidden": 5}, init_seed=7)
    assert by_instance.layout() == by_builder.layout()
    np.testing.assert_array_equal(by_instance.initial_model(), torch.cat(
        [w.reshape(-1) for w in weights]).double().numpy())
    batch = _batch((6,), 3)
    x = np.stack([by_builder.initial_model()] * 3)
    np.testing.assert_array_equal(by_instance.grad(x, batch), by_builder.grad(x, batch))

    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(9, 6)) for _ in range(2)],
                                 [rng.integers(0, 3, size=9) for _ in range(2)])
    run = simulate(fedmid(client_lr=0.3, local_steps=2), Problem(by_instance, L1(1e-3), data),
                   rounds=3, seed=0)
    assert np.abs(np.asarray(run.x) - by_instance.initial_model()).max() > 1e-3  # trained
    for before, after in zip(weights, net.parameters(), strict=True):
        assert torch.equal(before, after.detach()) and after.grad is None
    with pytest.raises(ValueError, match=r"options=\{'hidden': 5\} configure a builder, and "
                                         r"model is a module instance"):
        TorchModel(net, input_shape=(6,), n_classes=3, options={"hidden": 5})


def test_a_module_instance_with_nan_weights_is_one_error_naming_the_parameter(user_module):
    """An instance's weights are the initial model: a NaN among them is named before any
    round, where the run would otherwise "diverge" in round 1 and blame the step size."""
    from fedcomp import Problem, fedmid, simulate
    from fedcomp.data import ClientData
    from fedcomp.regularizers import L1

    net = user_module.tanh_net((6,), 3, hidden=5)
    with torch.no_grad():
        net[2].bias[1] = float("nan")
    loss = TorchModel(net, input_shape=(6,), n_classes=3)
    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(9, 6))] * 2, [rng.integers(0, 3, 9)] * 2)
    with pytest.raises(ValueError, match=r"initial parameter '2.bias' holds NaN"):
        simulate(fedmid(client_lr=0.3), Problem(loss, L1(1e-3), data), rounds=2)
