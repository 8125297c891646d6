"""``fedcomp.flower.Strategy`` in a user's own Flower apps: the simulator's iterates.

The fast tests run Flower's own ``Strategy.start`` loop on an in-process grid whose nodes
are a user's ``train``/``evaluate`` handlers (:func:`client_train`, :func:`client_evaluate`
on each node's own arrays); the slow one runs a user's app directory on a SuperLink and
SuperNodes started as separate processes, submitted with ``flwr run``.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests._flower_cases import REGISTRY_OVERRIDES, SMOOTH_ONLY, sampled_or_all

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, Context, Error, Message, MessageType, RecordDict  # noqa: E402

from fedcomp import Problem, simulate  # noqa: E402
from fedcomp._array import to_numpy  # noqa: E402
from fedcomp.algorithms import (  # noqa: E402
    ALGORITHMS,
    Recipe,
    ditto,
    make_algorithm,
    rebuild_algorithm,
)
from fedcomp.data import ClientData  # noqa: E402
from fedcomp.flower import FlowerRunError, Strategy, client_evaluate, client_train  # noqa: E402
from fedcomp.losses import Logistic  # noqa: E402
from fedcomp.privacy import private  # noqa: E402
from fedcomp.regularizers import L1, Zero  # noqa: E402
from fedcomp.runtime import setup_context  # noqa: E402

pytestmark = pytest.mark.flower

N_CLIENTS, DIM, ROUNDS, SEED, BATCH = 4, 6, 3, 3, 10


@pytest.fixture(autouse=True)
def _flower_env(tmp_path_factory, monkeypatch):
    """A throwaway FLWR_HOME; no update check, no telemetry; what Flower's runtime sets
    before a ServerApp creates messages."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setenv("FLWR_HOME", str(tmp_path_factory.mktemp("flwr-home")))
    monkeypatch.setenv("FLWR_DISABLE_UPDATE_CHECK", "1")
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    for key, value in {"_run_id": 1, "_task_id": 1, "_node_id": 0}.items():
        monkeypatch.setattr(TaskIdentity, key, value)


def client_arrays(seed=0, n=N_CLIENTS, d=DIM):
    """Each client's own (features, labels ±1), of different sizes."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=d)
    features = [rng.normal(size=(20 + 5 * k, d)) + 0.3 * k for k in range(n)]
    labels = [np.where(f @ truth + rng.normal(size=len(f)) > 0, 1.0, -1.0) for f in features]
    return features, labels


class UserGrid:
    """A grid whose nodes are a user's ClientApp handlers, each on its own arrays.

    Node ``1000 + k`` has ``partition-id = k`` (``ids`` may renumber them); what a handler
    raises becomes an error reply, as Flower's runtime does.
    """

    def __init__(self, features, labels, ids=None, train=client_train,
                 evaluate=client_evaluate):
        ids = list(range(len(features))) if ids is None else ids
        self.contexts = {
            1000 + k: Context(run_id=1, node_id=1000 + k, state=RecordDict(), run_config={},
                              node_config={"partition-id": ids[k]})
            for k in range(len(features))}
        self.data = {1000 + k: (features[k], labels[k]) for k in range(len(features))}
        self.train, self.evaluate = train, evaluate
        self.replies: dict[str, Message] = {}
        self.sent: list[Message] = []

    def get_node_ids(self):
        return list(self.contexts)

    def push_messages(self, messages):
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = f"m{len(self.sent)}"
            self.sent.append(msg)
            ids.append(msg.metadata.message_id)
            node = msg.metadata.dst_node_id
            handler = (self.train if msg.metadata.message_type == MessageType.TRAIN
                       else self.evaluate)
            try:
                reply = handler(msg, self.contexts[node], *self.data[node])
            except Exception as exc:  # what Flower does with a ClientApp's exception
                reply = Message(Error(code=2, reason=f"{type(exc).__name__}: {exc}"),
                                reply_to=msg)
            self.replies[msg.metadata.message_id] = reply
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(i) for i in message_ids if i in self.replies]

    def send_and_receive(self, messages, *, timeout=None):
        return self.pull_messages(self.push_messages(list(messages)))


def simulator_run(algorithm, features, labels, regularizer, clients_per_round, rounds=ROUNDS,
                  weighting="samples"):
    problem = Problem(Logistic(l2=0.05), regularizer, ClientData.from_lists(features, labels),
                      weighting=weighting)
    return simulate(algorithm, problem, rounds=rounds, clients_per_round=clients_per_round,
                    batch_size=BATCH, seed=SEED)


def strategy_run(algorithm, features, labels, regularizer, clients_per_round,
                 rounds=ROUNDS, **options):
    strategy = Strategy(algorithm, loss={"name": "logistic", "l2": 0.05},
                        regularizer=regularizer, num_clients=len(features),
                        clients_per_round=clients_per_round, batch_size=BATCH, seed=SEED,
                        **options)
    grid = UserGrid(features, labels)
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=rounds)
    return strategy, result, grid


ROUND_BASED = sorted(name for name in ALGORITHMS if ALGORITHMS.entry(name).execution == "rounds")


def participation(algorithm, features, labels, regularizer, weighting):
    """2 of 4 clients per round, or all for an algorithm defined for full participation."""
    return sampled_or_all(algorithm, Problem(Logistic(l2=0.05), regularizer,
                                             ClientData.from_lists(features, labels),
                                             weighting=weighting))


def assert_same_iterates(strategy, result, run):
    model = result.arrays.to_numpy_ndarrays()[0]
    np.testing.assert_allclose(model, np.asarray(run.x), rtol=0, atol=1e-12)
    counted = result.train_metrics_clientapp[max(result.train_metrics_clientapp)]
    for key, value in run.counters.as_dict().items():
        assert counted[key] == value, key


@pytest.mark.parametrize("name", ROUND_BASED)
def test_every_round_based_algorithm_gives_the_simulators_iterates(name):
    """Each registered round-based algorithm, defaults, through a user's handlers.

    Condat et al.'s methods solve (1/n) Σ f_i: they run with uniform weights, on both sides.
    """
    features, labels = client_arrays()
    regularizer = Zero() if name in SMOOTH_ONLY else L1(1e-3)
    weighting = "uniform" if name in SMOOTH_ONLY else "samples"
    algorithm = make_algorithm(name, **REGISTRY_OVERRIDES.get(name, {}))
    cpr = participation(algorithm, features, labels, regularizer, weighting)
    strategy, result, _ = strategy_run(algorithm, features, labels, regularizer, cpr,
                                       weighting=weighting)
    assert_same_iterates(strategy, result, simulator_run(algorithm, features, labels,
                                                         regularizer, cpr, weighting=weighting))


WRAPPED = {
    # FedDR's warm-up round (every client) runs before Flower's round 1
    "feddr-warmup": (lambda: make_algorithm("feddr", eta=2.0, alpha=1.5, client_lr=0.3,
                                            local_steps=3), 1),
    "ditto-fedmid": (lambda: ditto(make_algorithm("fedmid", client_lr=0.3, local_steps=3),
                                   lam=0.1), 2),
    "top_k-ef21": (lambda: rebuild_algorithm(Recipe(
        "fedmid", {"client_lr": 0.3, "local_steps": 3}).then(
            "compress", {"compressor": {"name": "top_k", "k": 2}, "ef21": True})), None),
    "private-local": (lambda: private(make_algorithm("fedavg", client_lr=0.3, local_steps=3),
                                      clip=0.5, noise_multiplier=0.8, local=True), 2),
    "private-central": (lambda: private(make_algorithm("fedavg", client_lr=0.3,
                                                       local_steps=3),
                                        clip=0.5, noise_multiplier=0.8), 2),
}


@pytest.mark.parametrize("case", sorted(WRAPPED))
def test_wrapped_algorithms_give_the_simulators_iterates(case):
    """Warm-up phases, personal models, compressed and private uploads."""
    build, cpr = WRAPPED[case]
    features, labels = client_arrays(1)
    strategy, result, _ = strategy_run(build(), features, labels, L1(1e-3), cpr)
    assert_same_iterates(strategy, result,
                         simulator_run(build(), features, labels, L1(1e-3), cpr))


def test_auto_step_resolves_on_every_clients_smoothness():
    """The server prepares 'auto' from the L_i the nodes report: as the simulator does."""
    features, labels = client_arrays(2)
    algorithm = make_algorithm("fast_fedda", smoothness="auto", strong_convexity=0.05,
                               local_steps=3)
    strategy, result, _ = strategy_run(algorithm, features, labels, L1(1e-3), None)
    problem = Problem(Logistic(l2=0.05), L1(1e-3), ClientData.from_lists(features, labels))
    resolved = algorithm.prepare(setup_context(problem)).hyperparameters["smoothness"]
    assert strategy.algorithm.hyperparameters["smoothness"] == resolved != "auto"
    assert_same_iterates(strategy, result,
                         simulator_run(algorithm, features, labels, L1(1e-3), None))


def test_client_evaluation_gives_the_federated_objective():
    features, labels = client_arrays(3)
    algorithm = make_algorithm("fedmid", client_lr=0.3, local_steps=3)
    _, result, _ = strategy_run(algorithm, features, labels, L1(1e-2), 2, evaluate_every=1)
    run = simulator_run(algorithm, features, labels, L1(1e-2), 2)
    assert sorted(result.evaluate_metrics_clientapp) == [1, 2, 3]
    for row in run.history[1:]:
        metrics = result.evaluate_metrics_clientapp[row["round"]]
        assert metrics["objective"] == pytest.approx(row["objective"], rel=1e-12)
        assert 0.0 <= metrics["accuracy"] <= 1.0


def test_without_evaluate_every_no_evaluate_message_is_sent():
    features, labels = client_arrays()
    _, _, grid = strategy_run(make_algorithm("fedavg", client_lr=0.3), features, labels,
                              L1(1e-3), None)
    assert {m.metadata.message_type for m in grid.sent} == {MessageType.TRAIN}


def test_a_user_handler_without_client_train_fails_discovery_naming_the_fix():
    features, labels = client_arrays()

    def fedavg_style_train(msg, context, x, y):  # reads Flower's "arrays" record
        return Message(RecordDict({"arrays": msg.content["arrays"]}), reply_to=msg)

    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    grid = UserGrid(features, labels, train=fedavg_style_train)
    with pytest.raises(FlowerRunError, match=r"discovery.*client_train\(msg, context"):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)


def test_two_nodes_with_one_partition_id_are_refused():
    features, labels = client_arrays()
    grid = UserGrid(features, labels, ids=[0, 1, 1, 2])
    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    with pytest.raises(FlowerRunError, match="both client 1.*own partition-id"):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)


def test_too_few_nodes_time_out_naming_the_count():
    features, labels = client_arrays(n=3)
    strategy = Strategy("fedavg", loss="logistic", num_clients=4, node_timeout=0.5)
    with pytest.raises(FlowerRunError, match="for 4 SuperNodes .* but 3 connected"):
        strategy.start(UserGrid(features, labels), ArrayRecord([np.zeros(DIM)]), num_rounds=1)


def test_a_failing_node_names_its_client_and_round():
    features, labels = client_arrays()
    calls = {"n": 0}

    def flaky(msg, context, x, y):
        if msg.content.config_records["fedcomp"]["phase"] == "train":
            calls["n"] += 1
            if calls["n"] == 6:  # round 2, the second client
                raise RuntimeError("disk full")
        return client_train(msg, context, x, y)

    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    grid = UserGrid(features, labels, train=flaky)
    with pytest.raises(FlowerRunError, match=r"client 1 \(SuperNode 1001\) failed in round 2"
                                             r".*disk full"):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=3)


@pytest.mark.parametrize("arguments, message", [
    ({"algorithm": "async_feddr"}, "event clock"),
    ({"algorithm": "dfedda"}, "gossip"),
    ({"num_clients": 0}, "num_clients must be a positive integer"),
    ({"clients_per_round": 5}, r"clients_per_round must be an integer in 1\.\.4"),
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"evaluate_every": -1}, "evaluate_every must be an integer >= 0"),
    ({"loss": "hinge"}, "unknown loss 'hinge'"),
    ({"regularizer": {"name": "l1", "strength": 1}}, "strength"),
    ({"regularizer": object()}, "regularizer must be a registered name"),
])
def test_bad_arguments_are_refused_before_any_node_is_asked(arguments, message):
    kwargs = {"algorithm": "fedavg", "loss": "logistic", "num_clients": N_CLIENTS, **arguments}
    with pytest.raises(ValueError, match=message):
        Strategy(kwargs.pop("algorithm"), **kwargs)


def test_initial_arrays_must_be_one_floating_model():
    features, labels = client_arrays()
    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    with pytest.raises(ValueError, match="holds 2 arrays; a fedcomp model is one array"):
        strategy.start(UserGrid(features, labels),
                       ArrayRecord([np.zeros(DIM), np.zeros(1)]), num_rounds=1)


def test_a_node_without_partition_id_names_the_node_config():
    features, labels = client_arrays()
    grid = UserGrid(features, labels)
    for context in grid.contexts.values():
        context.node_config.clear()
    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    with pytest.raises(FlowerRunError, match="no partition-id in its node config"):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)


# --- a user's own network, handed over as tensors or as its pipeline's batches ---------------
USER_NETWORK = '''
import torch

def tanh_net(input_shape, n_classes, hidden=5):
    return torch.nn.Sequential(torch.nn.Linear(input_shape[0], hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, n_classes))


class Residual(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(width, width), torch.nn.BatchNorm1d(width)

    def forward(self, x):
        return x + torch.relu(self.norm(self.linear(x)))


def bn_resnet(input_shape, n_classes, width=5):
    return torch.nn.Sequential(torch.nn.Linear(input_shape[0], width),
                               torch.nn.BatchNorm1d(width), torch.nn.ReLU(), Residual(width),
                               torch.nn.Linear(width, n_classes))
'''


@pytest.mark.parametrize(("builder", "buffers", "dtype", "tolerance"), [
    ("tanh_net", None, np.float64, 1e-10),
    ("bn_resnet", "batch_stats", np.float64, 1e-10),
    ("bn_resnet", "batch_stats", np.float32, 1e-5)])
def test_a_users_network_by_import_path_gives_the_simulators_iterates(
        tmp_path, monkeypatch, builder, buffers, dtype, tolerance):
    """The loss names the user's builder by its import path (the node imports it): a plain
    network, and one with BatchNorm in a residual block; half the nodes hand over torch
    tensors, half a list of (X, y) batches as a DataLoader yields them: the simulator's
    model and counters (float64 to 1e-10; float32 data and model to 1e-5, against the
    simulator on float32 tensors)."""
    torch = pytest.importorskip("torch")
    from fedcomp.losses import TorchModel

    (tmp_path / "usernets_flower.py").write_text(USER_NETWORK)
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = np.random.default_rng(5)
    features = [rng.normal(size=(12 + 3 * k, DIM)).astype(dtype) for k in range(N_CLIENTS)]
    labels = [rng.integers(0, 3, size=len(f)) for f in features]
    loss = TorchModel(f"usernets_flower:{builder}", input_shape=(DIM,), n_classes=3,
                      buffers=buffers)
    algorithm = make_algorithm("fedmid", client_lr=0.2, local_steps=2)

    def train(msg, context, x, y):
        if context.node_config["partition-id"] % 2:
            pairs = [(torch.from_numpy(x[i:i + 5]), torch.from_numpy(y[i:i + 5]))
                     for i in range(0, len(y), 5)]
            return client_train(msg, context, batches=pairs)
        return client_train(msg, context, torch.from_numpy(x), torch.from_numpy(y))

    strategy = Strategy(algorithm, loss=loss, regularizer=L1(1e-3), num_clients=N_CLIENTS,
                        clients_per_round=2, batch_size=4, seed=SEED)
    x0 = loss.initial_model().astype(dtype)
    result = strategy.start(UserGrid(features, labels, train=train), ArrayRecord([x0]),
                            num_rounds=ROUNDS)
    data = ClientData.from_lists(features, labels)
    if dtype == np.float32:
        data = data.to(torch.zeros(0, dtype=torch.float32))
    run = simulate(algorithm, Problem(loss, L1(1e-3), data), rounds=ROUNDS,
                   clients_per_round=2, batch_size=4, seed=SEED, x0=x0)
    model = result.arrays.to_numpy_ndarrays()[0]
    assert model.dtype == dtype
    np.testing.assert_allclose(model, to_numpy(run.x), rtol=0, atol=tolerance)
    assert np.abs(model - x0).max() > 1e-3  # it trained
    counted = result.train_metrics_clientapp[max(result.train_metrics_clientapp)]
    assert counted["grad_evals"] == run.counters.grad_evals


@pytest.mark.parametrize("fresh", [False, True], ids=["kept", "built-per-message"])
def test_a_clientapps_own_module_instance_is_the_network_it_trains(tmp_path, monkeypatch,
                                                                    fresh):
    """Each node hands ``client_train`` and ``client_evaluate`` its own ``nn.Module`` and
    its batches, kept across rounds or built anew for every message (as many Flower apps
    do); the strategy names the model by import path (BatchNorm in a residual block). The
    nodes' modules compute with a sigmoid where the path's builder has a ReLU (the same
    parameters): the run is the simulator's with the nodes' module (1e-10), and not the one
    with the path's — the update ran on the instance the ClientApp gave."""
    torch = pytest.importorskip("torch")
    from fedcomp.losses import TorchModel

    (tmp_path / "usernets_module.py").write_text(USER_NETWORK)
    monkeypatch.syspath_prepend(str(tmp_path))
    import usernets_module

    def nodes_module():
        net = usernets_module.bn_resnet((DIM,), 3)
        net[2] = torch.nn.Sigmoid()  # the ReLU after the first BatchNorm
        return net

    rng = np.random.default_rng(11)
    features = [rng.normal(size=(12 + 3 * k, DIM)) for k in range(N_CLIENTS)]
    labels = [rng.integers(0, 3, size=len(f)) for f in features]
    named = TorchModel("usernets_module:bn_resnet", input_shape=(DIM,), n_classes=3,
                       buffers="batch_stats")
    handed = {}  # one module and one batch list per node, as a ClientApp keeps them

    def own(context, x, y):
        node = context.node_config["partition-id"]
        if node not in handed or fresh:
            handed[node] = (nodes_module(), [(torch.from_numpy(x[i:i + 5]),
                                              torch.from_numpy(y[i:i + 5]))
                                             for i in range(0, len(y), 5)])
        module, batches = handed[node]
        return {"module": module, "batches": batches}

    algorithm = make_algorithm("fedmid", client_lr=0.2, local_steps=2)
    strategy = Strategy(algorithm, loss=named, regularizer=L1(1e-3), num_clients=N_CLIENTS,
                        clients_per_round=2, batch_size=4, seed=SEED, evaluate_every=1)
    x0 = named.initial_model()
    grid = UserGrid(features, labels,
                    train=lambda msg, ctx, x, y: client_train(msg, ctx, **own(ctx, x, y)),
                    evaluate=lambda msg, ctx, x, y: client_evaluate(msg, ctx, **own(ctx, x, y)))
    result = strategy.start(grid, ArrayRecord([x0]), num_rounds=ROUNDS)
    model = result.arrays.to_numpy_ndarrays()[0]

    def simulated(loss):
        problem = Problem(loss, L1(1e-3), ClientData.from_lists(features, labels))
        return simulate(algorithm, problem, rounds=ROUNDS, clients_per_round=2, batch_size=4,
                        seed=SEED, x0=x0, eval_every=1)

    as_handed = simulated(TorchModel(nodes_module(), input_shape=(DIM,), n_classes=3,
                                     buffers="batch_stats"))
    np.testing.assert_allclose(model, to_numpy(as_handed.x), rtol=0, atol=1e-10)
    assert np.abs(model - to_numpy(simulated(named).x)).max() > 1e-4  # not the path's network
    assert result.evaluate_metrics_clientapp[ROUNDS]["objective"] == pytest.approx(
        as_handed.history[-1]["objective"], rel=1e-10)
    for module, _ in handed.values():  # the instances were copied, never changed
        assert all(p.grad is None for p in module.parameters())


@pytest.mark.parametrize(("loss", "module", "message"), [
    ("tanh", "wider", r"client 0: the module handed to client_train is not the strategy's "
                      r"model 'usernets_wrong:tanh_net': parameter 0 is '0.weight' of shape "
                      r"\(5, 6\) here and '0.weight' of shape \(7, 6\) there; build the "),
    ("tanh", "bn", r"client 0: the module handed to client_train: TorchModel: the network has "
                   r"buffers"),
    ("tanh", "array", r"module must be a torch.nn.Module instance.*got a ndarray"),
    ("logistic", "wider", r"module= hands over a network, and the strategy's loss is "
                          r"Logistic"),
])
def test_a_module_the_strategys_model_cannot_use_is_one_error_naming_it(
        tmp_path, monkeypatch, loss, module, message):
    """Another width, BatchNorm without ``buffers=``, not a module, a loss that is not a
    network: one error naming the client and the difference, before anything trains."""
    torch = pytest.importorskip("torch")
    from fedcomp.losses import TorchModel

    (tmp_path / "usernets_wrong.py").write_text(USER_NETWORK)
    monkeypatch.syspath_prepend(str(tmp_path))
    import usernets_wrong

    modules = {"wider": lambda: usernets_wrong.tanh_net((DIM,), 3, hidden=7),
               "bn": lambda: usernets_wrong.bn_resnet((DIM,), 3),
               "array": lambda: np.zeros(3)}
    losses = {"tanh": TorchModel("usernets_wrong:tanh_net", input_shape=(DIM,), n_classes=3),
              "logistic": "logistic"}
    features, labels = client_arrays()
    labels = [(y > 0).astype(np.int64) for y in labels]
    grid = UserGrid(features, labels, train=lambda msg, ctx, x, y: client_train(
        msg, ctx, x, y, module=modules[module]()))
    strategy = Strategy("fedavg", loss=losses[loss], num_clients=N_CLIENTS)
    x0 = losses["tanh"].initial_model() if loss == "tanh" else np.zeros(DIM)
    with pytest.raises(FlowerRunError, match=message):
        strategy.start(grid, ArrayRecord([x0]), num_rounds=1)
    del torch


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "as features and targets, or as batches="),
    ({"features": np.zeros((3, DIM))}, "go together"),
    ({"batches": [np.zeros(3)]}, "batch 0 is a ndarray, not a pair"),
    ({"batches": []}, "yielded nothing"),
])
def test_a_handler_giving_its_data_wrongly_is_one_error(kwargs, message):
    features, labels = client_arrays()
    grid = UserGrid(features, labels, train=lambda msg, ctx, x, y: client_train(msg, ctx,
                                                                                   **kwargs))
    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    with pytest.raises(FlowerRunError, match=message):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)


# --- a real deployment of a user's own app: SuperLink + SuperNodes as processes -----------------
DOCS = Path(__file__).resolve().parents[2] / "docs" / "flower.md"


def docs_block(marker):
    """The one ```python block of docs/flower.md containing ``marker``."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
              if marker in b]
    assert len(blocks) == 1, marker
    return blocks[0]


def write_user_app(directory, model_path):
    """The documentation's two apps, verbatim, as a Flower app directory."""
    package = directory / "yourapp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A Flower app of its own using fedcomp."""\n')
    (package / "server_app.py").write_text(docs_block("Strategy(feddr("))
    (package / "client_app.py").write_text(docs_block("client_train(msg, context"))
    (directory / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "yourapp"
        version = "1.0.0"
        license = "MIT"
        dependencies = ["fedcomp[flower]"]

        [tool.hatch.build.targets.wheel]
        packages = ["."]

        [tool.flwr.app]
        publisher = "someone"

        [tool.flwr.app.components]
        serverapp = "yourapp.server_app:app"
        clientapp = "yourapp.client_app:app"

        [tool.flwr.app.config]
        model-path = {json.dumps(str(model_path))}
        """))
    return directory


def deployed_user_app(tmp_path, edit_server=lambda source: source, network=None,
                      edit_client=lambda source: source):
    """docs/flower.md's apps (their sources through ``edit_server`` and ``edit_client``) run on a
    SuperLink and three SuperNodes started as processes, each node reading its own data
    file: the nodes' features and labels and the run's log lines, the run checked ended
    well with every process gone. The model is at ``tmp_path / "model.npy"``.

    ``network``: the source of a module the app carries as ``yourapp/nets.py`` (the user's
    own networks); the labels are then classes 0 and 1, not ±1."""
    from fedcomp._lifetime import alive
    from fedcomp.flower._local import run_local_app

    features, labels = client_arrays(4, n=3)
    if network is not None:
        labels = [(y > 0).astype(np.int64) for y in labels]
    files = []
    for k in range(3):
        files.append(tmp_path / f"client{k}.npz")
        np.savez(files[-1], x=features[k], y=labels[k])
    app = write_user_app(tmp_path / "app", tmp_path / "model.npy")
    if network is not None:
        (app / "yourapp" / "nets.py").write_text(network)
    server, client = app / "yourapp" / "server_app.py", app / "yourapp" / "client_app.py"
    server.write_text(edit_server(server.read_text()))
    client.write_text(edit_client(client.read_text()))
    lines = []
    status = run_local_app(app, tmp_path / "out", nodes=3, timeout=500, echo=lines.append,
                           node_config=lambda k: f'partition-id={k} data-file="{files[k]}"')
    assert status["status"] == "ok", (status, lines[-40:])
    assert [pid for pid in status["pids"] if alive(pid)] == []
    return features, labels, lines


@pytest.mark.xdist_group("serial")  # processes, ports (Ray, Flower servers)
@pytest.mark.slow
def test_the_documented_app_on_a_localhost_deployment_gives_the_simulators_iterates(tmp_path):
    """docs/flower.md's ServerApp and ClientApp (each node's own data file) on a SuperLink
    and three SuperNodes started as processes (TLS, SuperNode authentication), submitted
    with ``flwr run``: FedDR's warm-up, 2 of 3 clients per round, minibatches, evaluation."""
    features, labels, lines = deployed_user_app(tmp_path)
    assert any("objective" in line for line in lines)  # the evaluation rounds were logged

    # the same run in the simulator: the documented algorithm, problem and settings
    problem = Problem(Logistic(), L1(1e-3), ClientData.from_lists(features, labels))
    algorithm = make_algorithm("feddr", eta=2.0, alpha=1.5, client_lr=0.3, local_steps=3)
    run = simulate(algorithm, problem, rounds=3, clients_per_round=2, batch_size=10, seed=0)
    model = np.load(tmp_path / "model.npy")
    assert np.abs(model).max() > 1e-3  # it trained
    np.testing.assert_allclose(model, np.asarray(run.x), rtol=0, atol=1e-12)


def with_user_network(source):
    """The documented server app training the user's own network with BatchNorm in a
    residual block (``bn_resnet`` of the app's ``nets`` module, by import path, its
    running statistics averaged) in place of the logistic loss."""
    for piece in ('loss="logistic"', "ArrayRecord([np.zeros(6)])", "    strategy = "):
        assert source.count(piece) == 1, piece
    return ("from fedcomp.losses import TorchModel\n" + source
            .replace("    strategy = ", '    net = TorchModel("yourapp.nets:bn_resnet", '
                     'input_shape=(6,), n_classes=2, buffers="batch_stats")\n'
                     "    strategy = ")
            .replace('loss="logistic"', "loss=net")
            .replace("ArrayRecord([np.zeros(6)])", "ArrayRecord([net.initial_model()])"))


def with_nodes_module(source):
    """The documented client app handing ``client_train`` and ``client_evaluate`` its own
    instance of the app's ``bn_resnet`` (``module=``), one per node, kept across rounds."""
    for piece in ("*my_data(context))",):
        assert source.count(piece) == 2, piece
    return ("from yourapp.nets import bn_resnet\nNET = bn_resnet((6,), 2)\n" + source
            .replace("*my_data(context))", "*my_data(context), module=NET)"))


def user_network_problem(tmp_path, monkeypatch, features, labels):
    """The simulator's problem of :func:`with_user_network`'s app on the nodes' data."""
    from fedcomp.losses import TorchModel

    (tmp_path / "yourapp_nets_here.py").write_text(USER_NETWORK)
    monkeypatch.syspath_prepend(str(tmp_path))
    loss = TorchModel("yourapp_nets_here:bn_resnet", input_shape=(DIM,), n_classes=2,
                      buffers="batch_stats")
    return Problem(loss, L1(1e-3), ClientData.from_lists(features, labels))


# --- replies the server refuses: never aggregated, one error naming node, client and round ------
def upload_record(**fields):
    """An ``upload`` record of these arrays, as a tampered ClientApp would send."""
    from flwr.app import Array

    return ArrayRecord({k: Array.from_numpy_ndarray(np.asarray(v)) for k, v in fields.items()})


def bad_counts(content, counts):
    from flwr.app import MetricRecord

    content["counts"] = MetricRecord(counts)


BAD_UPLOADS = {
    "shape": (lambda c: c.__setitem__("upload", upload_record(delta=np.zeros((1, DIM - 1)))),
              r"upload field 'delta' has shape \(1, 5\) where \(1, 6\) \(the model's shape \(6,\)"),
    "integer": (lambda c: c.__setitem__("upload", upload_record(delta=np.ones((1, DIM), int))),
                r"upload field 'delta' has dtype int64; uploads are floating"),
    "nan": (lambda c: c.__setitem__("upload", upload_record(
        delta=np.where(np.arange(DIM) == 2, np.nan, 0.1)[None])),
            r"upload field 'delta' holds 1 non-finite value .*lower the step size"),
    "other-field": (lambda c: c.__setitem__("upload", upload_record(d=np.zeros((1, DIM)))),
                    r"upload fields \['d'\] differ from the other participants' \['delta'\]"),
    "undecodable": (lambda c: c.__setitem__("upload", upload_record(
        **{"delta.shape": np.array([1, DIM]), "delta.idx": np.array([99], np.int32),
           "delta.val": np.array([1.0])})),
                    r"the upload record does not decode \(IndexError"),
    "no-upload": (lambda c: c.array_records.pop("upload"), r"the reply has no 'upload' record"),
    "negative-count": (lambda c: bad_counts(c, {"grad_evals": -3}),
                       r"count 'grad_evals' is -3; counts are integers >= 0"),
    "fractional-count": (lambda c: bad_counts(c, {"grad_evals": 2.5}),
                         r"count 'grad_evals' is 2\.5"),
    "unknown-count": (lambda c: bad_counts(c, {"samples_seen": 5}),
                      r"count 'samples_seen' is not one of fedcomp's counters"),
}


def tampering(change, client=1, flower_round=2):
    """A user's train handler that sends client ``client``'s reply of ``flower_round``
    changed by ``change(content)`` (every other reply is client_train's)."""
    def train(msg, context, x, y):
        reply = client_train(msg, context, x, y)
        spec = msg.content.config_records["fedcomp"]
        if (spec["phase"] == "train" and spec["round"] == flower_round - 1
                and context.node_config["partition-id"] == client):
            change(reply.content)
        return reply

    return train


@pytest.mark.parametrize("case", sorted(BAD_UPLOADS))
def test_a_bad_upload_stops_the_run_naming_node_client_round_and_field(case):
    """Wrong shape, integer or NaN arrays, other fields, a record that does not decode, bad
    counts: refused before anything of the round is aggregated or counted."""
    change, message = BAD_UPLOADS[case]
    features, labels = client_arrays()
    algorithm = make_algorithm("fedavg", client_lr=0.3, local_steps=2)
    clean, result, _ = strategy_run(algorithm, features, labels, L1(1e-3), None, rounds=1)
    strategy = Strategy(algorithm, loss={"name": "logistic", "l2": 0.05}, regularizer=L1(1e-3),
                        num_clients=N_CLIENTS, batch_size=BATCH, seed=SEED)
    grid = UserGrid(features, labels, train=tampering(change))
    with pytest.raises(FlowerRunError, match=r"client 1 \(SuperNode 1001\) sent a reply the "
                                             r"server refuses in round 2: " + message):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=3)
    # nothing of round 2 was used: the model and the counts are round 1's (but for round
    # 2's broadcast, which was sent)
    np.testing.assert_array_equal(strategy.algorithm.output(strategy.server_state),
                                  result.arrays.to_numpy_ndarrays()[0])
    sent = {"floats_down", "bits_down"}
    assert ({k: v for k, v in strategy.counters.as_dict().items() if k not in sent}
            == {k: v for k, v in clean.counters.as_dict().items() if k not in sent})


@pytest.mark.parametrize("report, message", [
    ({"samples": -5.0}, r"samples is -5\.0; it must be finite and > 0"),
    ({"samples": float("nan")}, r"samples is nan"),
    ({"smoothness": float("inf")}, r"smoothness is inf; it must be finite and >= 0"),
    ({"client-id": 1.5}, r"client-id is 1\.5, not an integer"),
])
def test_a_bad_discovery_report_is_refused_naming_the_node(report, message):
    """A negative or NaN sample total would make negative or NaN client weights."""
    from flwr.app import ConfigRecord

    features, labels = client_arrays()

    def discover(msg, context, x, y):
        reply = client_train(msg, context, x, y)
        if context.node_config["partition-id"] == 2:
            info = dict(reply.content.config_records["fedcomp"])
            reply.content["fedcomp"] = ConfigRecord({**info, **report})
        return reply

    strategy = Strategy("fedavg", loss="logistic", num_clients=N_CLIENTS)
    with pytest.raises(FlowerRunError, match="SuperNode 1002 sent a discovery reply the server "
                                             "refuses: " + message):
        strategy.start(UserGrid(features, labels, train=discover),
                       ArrayRecord([np.zeros(DIM)]), num_rounds=1)


def test_a_bad_evaluation_is_refused_naming_client_and_round():
    from flwr.app import MetricRecord

    features, labels = client_arrays()

    def evaluate(msg, context, x, y):
        reply = client_evaluate(msg, context, x, y)
        if context.node_config["partition-id"] == 3:
            reply.content["metrics"] = MetricRecord({"loss": float("nan"), "accuracy": 0.5})
        return reply

    strategy = Strategy(make_algorithm("fedavg", client_lr=0.3), loss="logistic",
                        num_clients=N_CLIENTS, evaluate_every=1)
    with pytest.raises(FlowerRunError, match=r"client 3 \(SuperNode 1003\) .* evaluating round 1"
                                             r": the evaluation's loss is nan"):
        strategy.start(UserGrid(features, labels, evaluate=evaluate),
                       ArrayRecord([np.zeros(DIM)]), num_rounds=1)


def test_a_reply_from_a_node_outside_the_federation_is_refused():
    features, labels = client_arrays()

    def impostor(msg, context, x, y):
        reply = client_train(msg, context, x, y)
        spec = msg.content.config_records["fedcomp"]
        if spec["phase"] == "train" and context.node_config["partition-id"] == 0:
            reply.metadata.__dict__["_src_node_id"] = 4242
        return reply

    strategy = Strategy(make_algorithm("fedavg", client_lr=0.3), loss="logistic",
                        num_clients=N_CLIENTS)
    with pytest.raises(FlowerRunError, match=r"in round 1 came from SuperNodes \[4242\], which "
                                             "are none of the federation's clients"):
        strategy.start(UserGrid(features, labels, train=impostor),
                       ArrayRecord([np.zeros(DIM)]), num_rounds=1)
