"""Flower 1.43 readiness, kept working on 1.42 (issue 46): ``should_stop`` from fedcomp's
stopping rules, and ``ε`` through Flower's ``PrivacyAccountant`` protocol.

The runs are Flower's own ``Strategy.start`` loop (the installed Flower's) on the in-process
grid of :mod:`tests.product.test_flower_strategy`, whose nodes are a user's handlers: no
processes, no ports. The 1.43 path is shown with a stand-in ``start`` whose signature has
``should_stop``.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from tests.product.test_flower_strategy import (  # noqa: F401 (_flower_env: autouse)
    DIM,
    SEED,
    UserGrid,
    _flower_env,
    client_arrays,
    strategy_run,
)

flwr = pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")

from flwr.app import ArrayRecord  # noqa: E402
from flwr.serverapp.strategy import Result  # noqa: E402
from flwr.serverapp.strategy import Strategy as FlowerStrategy  # noqa: E402

from fedcomp import Problem, simulate  # noqa: E402
from fedcomp.algorithms import make_algorithm  # noqa: E402
from fedcomp.data import ClientData  # noqa: E402
from fedcomp.flower import FlowerRunError, Strategy  # noqa: E402
from fedcomp.flower._privacy import FedcompAccountant, StandInConfig  # noqa: E402
from fedcomp.flower._stopping import flower_stops  # noqa: E402
from fedcomp.losses import Logistic  # noqa: E402
from fedcomp.privacy import epsilon, private  # noqa: E402
from fedcomp.regularizers import L1  # noqa: E402
from fedcomp.runtime import RunOptions  # noqa: E402

pytestmark = pytest.mark.flower


def fedmid():
    return make_algorithm("fedmid", client_lr=0.3, local_steps=3)


def full_batch_strategy(evaluate_every=2, algorithm=None):
    """FedMid on the four clients, full local gradients (so the model settles)."""
    return Strategy(algorithm or fedmid(), loss={"name": "logistic", "l2": 0.05},
                    regularizer=L1(1e-3), num_clients=4, seed=SEED,
                    evaluate_every=evaluate_every)


def flower_round(message):
    """Flower's round of a strategy's train message (``-1``: discovery)."""
    spec = message.content.config_records["fedcomp"]
    return int(spec["round"]) + 1 if spec.get("phase") == "train" else -1


# --- should_stop --------------------------------------------------------------------------
def test_the_stopping_rule_ends_the_flower_run_at_the_simulators_round():
    """``tol`` on ``relative_change`` with the objective's certificate: Flower's own loop
    (1.42's here, where the rounds after the stop send nothing) ends where ``simulate``
    with the same rule ends, on its model, long before ``num_rounds``."""
    features, labels = client_arrays()
    strategy = full_batch_strategy()
    rule = strategy.stopping(tol=1e-2)
    grid = UserGrid(features, labels)
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=200,
                            should_stop=rule)

    problem = Problem(Logistic(l2=0.05), L1(1e-3), ClientData.from_lists(features, labels))
    run = simulate(fedmid(), problem, rounds=200, seed=SEED, eval_every=2, tol=1e-2,
                   options=RunOptions(stop="relative_change"))
    assert run.status == rule.status == "converged"
    last = int(run.history[-1]["round"])
    assert 2 < last < 200
    assert rule.stopped_at == last == max(result.train_metrics_clientapp)
    assert max(result.evaluate_metrics_clientapp) == last
    # nothing is sent after the stop: the remaining rounds are empty on 1.42
    assert max(flower_round(m) for m in grid.sent) == last
    assert strategy.watch.stopped == (not flower_stops(FlowerStrategy.start))
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], np.asarray(run.x),
                               rtol=0, atol=1e-12)
    assert rule.history[-1]["relative_change"] == pytest.approx(
        run.history[-1]["relative_change"], rel=1e-9)


def test_callbacks_see_the_evaluation_rows_and_any_predicate_stops_the_run():
    """An EarlyStopping-like callback on the rows (every ``evaluate_every`` rounds; the
    client states stay on the nodes), and a user's own ``should_stop(round, result)`` that
    reads Flower's ``Result``: each ends the run where it says."""
    features, labels = client_arrays()
    seen = []

    def enough(view):
        seen.append((view.round, sorted(view.row), view.client_states))
        return view.round >= 6

    strategy = full_batch_strategy()
    rule = strategy.stopping(callbacks=[enough])
    result = strategy.start(UserGrid(features, labels), ArrayRecord([np.zeros(DIM)]),
                            num_rounds=50, should_stop=rule)
    assert [r for r, _, _ in seen] == [2, 4, 6]
    assert {"objective", "loss", "accuracy", "grad_evals"} <= set(seen[0][1])
    assert seen[0][2] is None
    assert (rule.status, max(result.train_metrics_clientapp)) == ("stopped", 6)

    asked = []

    def three_rounds(server_round, result):
        asked.append((server_round, sorted(result.train_metrics_clientapp)))
        return server_round == 3

    strategy = full_batch_strategy(evaluate_every=0)
    result = strategy.start(UserGrid(features, labels), ArrayRecord([np.zeros(DIM)]),
                            num_rounds=10, should_stop=three_rounds)
    assert asked == [(1, [1]), (2, [1, 2]), (3, [1, 2, 3])]
    assert sorted(result.train_metrics_clientapp) == [1, 2, 3]


def fake_start(calls, with_should_stop):
    """A stand-in for Flower's ``Strategy.start``: 1.43's signature, or 1.42's."""
    if with_should_stop:
        def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, train_config=None,
                  evaluate_config=None, evaluate_fn=None, should_stop=None):
            calls.append({"num_rounds": num_rounds, "evaluate_fn": evaluate_fn,
                          "should_stop": should_stop})
            return Result()
    else:
        def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, train_config=None,
                  evaluate_config=None, evaluate_fn=None):
            calls.append({"num_rounds": num_rounds, "evaluate_fn": evaluate_fn})
            return Result()
    return start


@pytest.mark.parametrize("with_should_stop", [True, False], ids=["1.43", "1.42"])
def test_the_path_follows_the_signature_of_flowers_start(monkeypatch, with_should_stop):
    """A ``start`` that declares ``should_stop`` gets the rule itself (Flower's loop ends the
    run); one that does not gets the strategy's ``evaluate_fn`` wrapper, which calls it."""
    calls = []
    monkeypatch.setattr(FlowerStrategy, "start", fake_start(calls, with_should_stop))
    assert flower_stops(FlowerStrategy.start) == with_should_stop
    strategy = full_batch_strategy()
    rule = strategy.stopping(tol=1e-3)

    def evaluate_fn(server_round, arrays):
        return None

    strategy.start(None, ArrayRecord([np.zeros(DIM)]), num_rounds=7, evaluate_fn=evaluate_fn,
                   should_stop=rule)
    (call,) = calls
    assert call["num_rounds"] == 7
    if with_should_stop:
        assert call["should_stop"] is rule and call["evaluate_fn"] is evaluate_fn
        assert strategy.watch.should_stop is None  # Flower stops: nothing of fedcomp's
    else:
        assert call["evaluate_fn"] == strategy.watch.evaluate
        assert strategy.watch.should_stop is rule and strategy.watch.evaluate_fn is evaluate_fn
    # without should_stop, Flower's start as it is
    strategy.start(None, ArrayRecord([np.zeros(DIM)]), num_rounds=2)
    assert calls[-1]["evaluate_fn"] is None and calls[-1].get("should_stop") is None


@pytest.mark.parametrize(("changes", "message"), [
    ({"evaluate_every": 0}, r"applied at the evaluation rows.*evaluate_every=k"),
    ({"stop": "relative_prox_step"}, r"stop='relative_prox_step' needs the gradient of f.*"
                                     r"use stop='relative_change'"),
    ({"stop": "gradient"}, r"stop must be one of relative_prox_step, prox_grad_norm, "
                           r"relative_change \(got 'gradient'\)"),
    ({"tol": -1.0}, r"tol must be a number >= 0 or None \(got tol=-1.0\)"),
    ({"callbacks": [3]}, r"callbacks must be functions of a RunView \(got 3\)"),
])
def test_a_stopping_rule_the_strategy_cannot_apply_is_refused_naming_the_fix(changes, message):
    options = {"tol": 1e-3, **changes}
    strategy = full_batch_strategy(evaluate_every=options.pop("evaluate_every", 2))
    with pytest.raises(ValueError, match=message):
        strategy.stopping(**options)


def test_an_objective_that_runs_away_stops_the_run_naming_the_round():
    """The certificate's runaway is a divergence: one FlowerRunError, as the strategy's."""
    features, labels = client_arrays()
    strategy = Strategy(make_algorithm("fedmid", client_lr=1.0, local_steps=3),
                        loss="least_squares", regularizer=L1(1e-3), num_clients=4,
                        evaluate_every=1)
    with pytest.raises(FlowerRunError, match=r"fedmid: the model ran away \(objective .* "
                                             r"in round 3; lower the step size"):
        strategy.start(UserGrid(features, labels), ArrayRecord([np.zeros(DIM)]),
                       num_rounds=30, should_stop=strategy.stopping(tol=1e-12))


# --- ε through Flower's PrivacyAccountant -------------------------------------------------
PROTOCOL_METHODS = ("compose", "get_epsilon", "get_delta", "get_privacy_spent", "would_exceed",
                    "state_dict", "load_state_dict")


def protocol_members():
    """Flower's ``PrivacyAccountant`` members and their parameters (where Flower has it),
    else the protocol as Flower's main branch writes it."""
    import flwr.serverapp

    protocol = getattr(flwr.serverapp, "PrivacyAccountant", None)
    if protocol is None:
        return {name: None for name in (*PROTOCOL_METHODS, "config", "num_releases")}
    return {name: (None if isinstance(member, property)
                   else list(inspect.signature(member).parameters))
            for name, member in vars(protocol).items()
            if not name.startswith("_") and (callable(member) or isinstance(member, property))}


def test_a_private_runs_epsilon_is_fedcomps_through_flowers_protocol():
    """Central DP, 2 of 4 clients a round: the strategy's accountant has the protocol's
    members, and its ε is fedcomp's accountant's (and Flower's own RdpAccountant's) for the
    same rounds, exactly; every round's metrics carry it."""
    features, labels = client_arrays(1)
    algorithm = private(make_algorithm("fedavg", client_lr=0.3, local_steps=3), clip=0.5,
                        noise_multiplier=0.8)
    strategy, result, _ = strategy_run(algorithm, features, labels, L1(1e-3), 2, rounds=3)
    accountant = strategy.accountant
    members = protocol_members()
    assert set(PROTOCOL_METHODS) | {"config", "num_releases"} <= set(members)
    for name, parameters in members.items():
        assert hasattr(accountant, name), name
        if parameters is not None:
            assert list(inspect.signature(getattr(FedcompAccountant, name)).parameters) \
                == parameters, name

    expected = epsilon(0.8, 3, 1e-5, n_clients=4, clients_per_round=2)
    assert accountant.num_releases == 3
    # the rounds are one entry (Flower's multiplier σ/2 for fixed-size sampling): 3 × curve
    assert accountant.state_dict()["releases"] == [[0.4, 2, 3]]
    assert accountant.get_epsilon(1e-5) == expected
    assert strategy.privacy_spent().epsilon == expected
    assert [result.train_metrics_clientapp[r]["epsilon"] for r in (1, 2, 3)] == [
        epsilon(0.8, r, 1e-5, n_clients=4, clients_per_round=2) for r in (1, 2, 3)]
    assert 0 < accountant.get_delta(expected) <= 1e-5 * (1 + 1e-6)

    import flwr.serverapp
    if hasattr(flwr.serverapp, "RdpAccountant"):  # Flower's own backend agrees
        flowers = flwr.serverapp.RdpAccountant(accountant.config)
        flowers.compose(accountant.event(0.8, 2), count=3)
        assert flowers.get_epsilon(1e-5) == expected

    plain, plain_result, _ = strategy_run(make_algorithm("fedavg", client_lr=0.3,
                                                         local_steps=3),
                                          features, labels, L1(1e-3), 2, rounds=1)
    assert plain.accountant is None and plain.privacy_spent() is None
    assert "epsilon" not in plain_result.train_metrics_clientapp[1]


@pytest.mark.parametrize(("sampling", "local"), [("poisson", False), ("fixed", True)])
def test_the_accountant_equals_fedcomps_for_every_accounting_model(sampling, local):
    accountant = FedcompAccountant(50, sampling=sampling, local=local, max_epsilon=5.0)
    accountant.compose(accountant.event(1.2, 5), count=20)
    assert accountant.get_epsilon(1e-6) == epsilon(1.2, 20, 1e-6, n_clients=50,
                                                   clients_per_round=5, sampling=sampling,
                                                   local=local)
    saved = accountant.state_dict()
    restored = FedcompAccountant(50, sampling=sampling, local=local, max_epsilon=5.0)
    restored.load_state_dict(saved)
    assert restored.get_privacy_spent() == accountant.get_privacy_spent()
    assert accountant.would_exceed(accountant.event(1.2, 5), count=10**4)
    assert accountant.num_releases == 20  # would_exceed composes nothing


def test_without_flowers_privacy_types_the_accountant_is_a_plain_object(monkeypatch):
    """A Flower without the protocol (1.41): no import of it, named tuples stand in."""
    import flwr.serverapp

    for name in ("PrivacyConfig", "PrivacySpent", "GaussianPrivacyEvent",
                 "NeighboringRelation", "SamplingMethod", "PrivacyAccountant"):
        monkeypatch.delattr(flwr.serverapp, name, raising=False)
    accountant = FedcompAccountant(10)
    assert accountant.config == StandInConfig(1e-5, 10, "replace-one", "without-replacement")
    accountant.compose(accountant.event(1.0, 3), count=4)
    spent = accountant.get_privacy_spent()
    assert spent.epsilon == epsilon(1.0, 4, 1e-5, n_clients=10, clients_per_round=3)
    assert spent.num_releases == 4 and math.isfinite(spent.optimal_order)


@pytest.mark.parametrize(("call", "message"), [
    (lambda a: a.compose(a.event(1.0, 2), count=0), r"count must be an integer >= 1"),
    (lambda a: a.compose(FedcompAccountant(5).event(1.0, 2)),
     r"population_size=5 is not this accountant's n_clients=4"),
    (lambda a: a.compose(object()), r"event must be a GaussianPrivacyEvent"),
    (lambda a: a.get_epsilon(2.0), r"delta must be in \(0, 1\)"),
    (lambda a: a.would_exceed(a.event(1.0, 2)), r"would_exceed needs a budget"),
    (lambda a: a.load_state_dict({"schema_version": 1, "backend": "rdp"}),
     r"not a FedcompAccountant.state_dict\(\)"),
    (lambda a: a.load_state_dict(FedcompAccountant(4, sampling="poisson").state_dict()),
     r"configuration .* differs from this accountant's"),
])
def test_bad_use_of_the_accountant_is_one_error_naming_the_fix(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(FedcompAccountant(4))


def test_the_documented_stopping_snippet_ends_the_run_early(capsys):
    """docs/flower.md's block, in the documented server app's place: it stops long before
    its 500 rounds and prints why."""
    from tests.product.test_flower_strategy import docs_block

    features, labels = client_arrays()
    namespace = {"strategy": full_batch_strategy(), "grid": UserGrid(features, labels),
                 "np": np, "ArrayRecord": ArrayRecord}
    exec(docs_block("strategy.stopping("), namespace)
    rule = namespace["rule"]
    assert rule.status in ("converged", "stopped") and rule.stopped_at < 500
    assert capsys.readouterr().out.strip() == f"{rule.status} {rule.stopped_at}"


@pytest.mark.xdist_group("serial")  # processes, ports (Flower servers)
@pytest.mark.slow
def test_the_rule_ends_a_localhost_deployment_of_a_users_network_before_num_rounds(
        tmp_path, monkeypatch):
    """docs/flower.md's apps on a SuperLink and three SuperNodes started as processes, the
    server app training the user's own network with BatchNorm in a residual block (a
    module of the app, named by import path, each node's ClientApp handing over its own
    instance: issue 46's acceptance) and its ``start``
    given ``num_rounds=40`` and a rule that stops after round 4: the rounds after it send
    nothing over Flower's own grid, and the model is the simulator's after 4 rounds
    (float64, 1e-10). One deployment shows both, as each costs a minute or more."""
    pytest.importorskip("torch")
    from tests.product.test_flower_strategy import (
        USER_NETWORK,
        deployed_user_app,
        user_network_problem,
        with_nodes_module,
        with_user_network,
    )

    rounds_file = tmp_path / "rounds.txt"

    def stopping_after_round_4(source):
        assert source.count("num_rounds=3)") == 1
        return with_user_network(source).replace("num_rounds=3)", (
            "num_rounds=40,\n        should_stop=strategy.stopping("
            "callbacks=[lambda view: view.round >= 4]))\n"
            f"    open({str(rounds_file)!r}, 'w').write("
            "str(max(result.train_metrics_clientapp)))"))

    features, labels, _ = deployed_user_app(tmp_path, stopping_after_round_4,
                                            network=USER_NETWORK, edit_client=with_nodes_module)
    assert rounds_file.read_text() == "4"

    problem = user_network_problem(tmp_path, monkeypatch, features, labels)
    x0 = problem.loss.initial_model()
    algorithm = make_algorithm("feddr", eta=2.0, alpha=1.5, client_lr=0.3, local_steps=3)
    run = simulate(algorithm, problem, rounds=4, clients_per_round=2, batch_size=10, seed=0,
                   x0=x0)
    model = np.load(tmp_path / "model.npy")
    assert np.abs(model - x0).max() > 1e-3  # it trained
    np.testing.assert_allclose(model, np.asarray(run.x), rtol=0, atol=1e-10)
