"""fedcomp on Flower: the same iterates as the simulator, deployment processes, node faults.

Fast tests drive the real ServerApp/ClientApp handlers through an in-process grid; slow
ones run Flower's simulation engine (Ray) and a localhost SuperLink + SuperNodes as
separate processes.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import threading
import time
import tomllib
from collections import namedtuple

import numpy as np
import pytest

from tests._flower_cases import REGISTRY_OVERRIDES, SMOOTH_ONLY, sampled_or_all

flwr = pytest.importorskip("flwr")

from flwr.app import Context, Error, Message, MessageType, RecordDict  # noqa: E402

from fedcomp._lifetime import alive  # noqa: E402
from fedcomp.algorithms import ALGORITHMS, make_algorithm  # noqa: E402
from fedcomp.experiments import RESULT_COLUMNS, build_problem, resolve, run_experiment, validate  # noqa: E402  # noqa: E402
from fedcomp.flower import (  # noqa: E402
    FlowerRunError,
    partition_clients,
    run_server,
    run_simulation,
    save_partition,
)
from fedcomp.flower._client import CONFIG_KEY, handle_query, handle_train  # noqa: E402
from fedcomp.flower._codec import decode, encode  # noqa: E402
from fedcomp.flower._data import load_node_data, subset  # noqa: E402
from fedcomp.flower._local import run_local, write_app  # noqa: E402
from fedcomp.oracle import Counters, Oracle  # noqa: E402
from fedcomp.regularizers import Zero  # noqa: E402
from fedcomp.runtime import setup_context  # noqa: E402

pytestmark = pytest.mark.flower


@pytest.fixture(autouse=True)
def _flower_env(tmp_path_factory, monkeypatch):
    """A throwaway FLWR_HOME; no update check, no telemetry."""
    monkeypatch.setenv("FLWR_HOME", str(tmp_path_factory.mktemp("flwr-home")))
    monkeypatch.setenv("FLWR_DISABLE_UPDATE_CHECK", "1")
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")




def small_config(algorithm, n_clients=4, rounds=3, clients_per_round=None, batch_size=10,
                 **hyperparameters):
    regularizer = ({"name": "zero"} if algorithm in SMOOTH_ONLY
                   else {"name": "l1", "alpha": 1e-3})
    return {
        "name": "flower-test", "rounds": rounds, "seeds": [3], "batch_size": [batch_size],
        "clients_per_round": clients_per_round, "reference": False,
        "metrics": ["objective", "nnz"],
        "data": {"generator": "synthetic_fedprox", "alpha": 1.0, "beta": 1.0, "n_classes": 2,
                 "n_clients": n_clients, "samples_per_client": 30, "n_features": 6},
        "problem": {"loss": "logistic", "l2": 0.05},
        "regularizer": regularizer,
        "algorithms": [{"name": algorithm, **hyperparameters}],
    }


#: (algorithm, hyperparameters, clients_per_round) run for 3 rounds on 4 clients through
#: Flower and through the simulator; add an algorithm with one line (FedDR at 30%
#: participation of 4 clients: clients_per_round=1). Partial participation is covered by
#: fedmid's entry (2 of 4 per round, seeded sampling on the server).
EQUIVALENCE = [
    ("za1", {"client_lr": 0.5, "local_steps": 3}, None),
    ("fast_fedda", {"smoothness": "auto", "strong_convexity": 0.05, "local_steps": 3}, None),
    ("fedmid", {"client_lr": 0.3, "local_steps": 3}, 2),
    ("fedcanon", {"client_lr": 0.3, "local_steps": 3}, None),
    # FedDR: its warm-up round (round −1, every client) goes through the nodes too
    ("feddr", {"eta": 2.0, "alpha": 1.5, "client_lr": 0.3, "local_steps": 3}, 1),
    ("feddr", {"eta": 2.0, "local_solver": "exact", "init": "code"}, 2),
    # FedSplit from Pathak & Wainwright's start: no warm-up, x̃ = x⁰ on the server
    ("fedsplit", {"eta": 2.0, "init": "fedsplit"}, None),
    # a staleness bound below n − 1: the server's barrier holds clients back between jobs
    ("async_feddr", {"eta": 2.0, "client_lr": 0.3, "local_steps": 2, "max_delay": 1}, None),
    # compressed uploads: the nodes rebuild the compression, the encoded bits travel back
    ("fedavg", {"client_lr": 0.3, "local_steps": 3,
                "compressor": {"name": "rand_k", "k": 2}}, 2),
    ("fedmid", {"client_lr": 0.3, "local_steps": 3,
                "compressor": {"name": "top_k", "k": 2, "ef21": True}}, None),
    # differential privacy: the nodes clip and add their own noise (local), or the server
    # adds it to compressed uploads (central); both keyed as in the simulator
    ("fedavg", {"client_lr": 0.3, "local_steps": 3,
                "privacy": {"clip": 0.5, "noise_multiplier": 0.8, "local": True}}, 2),
    ("fedavg", {"client_lr": 0.3, "local_steps": 3, "compressor": {"name": "rand_k", "k": 2},
                "privacy": {"clip": 0.5, "noise_multiplier": 0.8}}, 2),
]


#: every algorithm of the registry with its default hyperparameters (a few stage lengths
#: shortened so that 3 rounds cross stages), 2 of 4 clients per round unless it is defined
#: for full participation only; async_feddr's event clock stays on the server and each
#: arrival's update runs on the node hosting the client
REGISTRY = [(name, REGISTRY_OVERRIDES.get(name, {}), "sampled") for name in sorted(ALGORITHMS)]
#: options that add a phase: FedDA-GT's gradient-initialised trackers (a warm-up round)
REGISTRY += [("fedda_gt", {"tracker_init": "gradient"}, None)]


def participation(cfg, algorithm, params):
    """2 clients per round, or all for an algorithm defined for full participation only."""
    return sampled_or_all(make_algorithm(algorithm, **params),
                          build_problem(resolve(cfg).base))


@pytest.fixture
def no_plots(monkeypatch):
    """The equivalence tests compare iterates; drawing plot.png would take most of their time."""
    import fedcomp.plotting

    monkeypatch.setattr(fedcomp.plotting, "plot_results", lambda *args, **kwargs: None)


def simulator_outputs(cfg, out):
    with open(os.devnull, "w") as quiet:  # closed: a leaked file warns in a later test
        run_experiment(cfg, out, progress=False, stream=quiet)
    return out


def final_models(out):
    return {p.name: np.load(p) for p in sorted((out / "models").iterdir())}


def result_rows(out):
    with (out / "results.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def assert_same_run(flower_out, sim_out, tol=1e-10):
    a, b = final_models(flower_out), final_models(sim_out)
    assert a.keys() == b.keys() and a
    for name in a:
        assert a[name].dtype == np.float64
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=tol, err_msg=name)
    rows_a, rows_b = result_rows(flower_out), result_rows(sim_out)
    assert len(rows_a) == len(rows_b)
    counted = ["round", "grad_evals", "sample_grads", "prox_evals_client", "prox_evals_server",
               "floats_up", "floats_down", "bits_up", "bits_down", "nnz"]
    for ra, rb in zip(rows_a, rows_b, strict=True):
        assert {k: ra[k] for k in counted} == {k: rb[k] for k in counted}
        assert float(ra["objective"]) == pytest.approx(float(rb["objective"]), abs=1e-12)


# --- an in-process grid: the real handlers, no Flower runtime --------------------------------
@pytest.fixture
def task_identity(monkeypatch):
    """What Flower's runtime sets before a ServerApp creates messages."""
    from flwr.supercore.task_identity import TaskIdentity

    for key, value in {"_run_id": 1, "_task_id": 1, "_node_id": 0}.items():
        monkeypatch.setattr(TaskIdentity, key, value)


class InProcessGrid:
    """Delivers messages straight to ``handle_query``/``handle_train`` of fake nodes."""

    def __init__(self, n_nodes, dead_after=None, restart=None, node_config=None,
                 unavailable=False, slow_start=None):
        self.contexts = {
            1000 + k: Context(run_id=1, node_id=1000 + k, state=RecordDict(), run_config={},
                              node_config={"partition-id": k, "num-partitions": n_nodes,
                                           **(node_config or {})})
            for k in range(n_nodes)}
        self.dead_after = dead_after or {}  # node id -> train messages it answers
        self.restart = restart or {}  # dead node id -> the id it comes back with
        self.trained = dict.fromkeys(self.contexts, 0)
        self.down = set()  # still listed (the SuperLink has not noticed), never answers
        # like the SuperLink once a node's heartbeat lapsed: messages to a down node get a
        # "Node Unavailable" error reply from the SuperLink's own node id
        self.unavailable = unavailable
        self.slow_start = dict(slow_start or {})  # node id -> messages it misses at first

    def get_node_ids(self):
        return list(self.contexts)

    def _die(self, node):
        """The node stops; if it restarts, it is a new node with an empty state."""
        self.down.add(node)
        if node in self.restart:
            new = self.restart.pop(node)
            self.contexts[new] = Context(run_id=1, node_id=new, state=RecordDict(),
                                         run_config={},
                                         node_config=dict(self.contexts[node].node_config))
            self.trained[new] = 0
            self.dead_after.pop(new, None)
            self.down.discard(new)  # back under the same id (a node with an identity key)

    def push_messages(self, messages):
        """Deliver at once; a reply is kept for pull_messages under the message's id."""
        self.replies = getattr(self, "replies", {})
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = f"m{len(self.replies) + len(ids)}"
            ids.append(msg.metadata.message_id)
            reply = self._deliver(msg)
            if reply is not None:
                self.replies[msg.metadata.message_id] = reply
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(i) for i in message_ids if i in self.replies]

    def _deliver(self, msg):
        node = msg.metadata.dst_node_id
        ctx = self.contexts[node]
        starting = self.slow_start.get(node, 0) > 0  # listed, not yet able to answer
        if starting:
            self.slow_start[node] -= 1
        if node in self.down or starting:
            if not self.unavailable:
                return None
            reply = Message(Error(code=5, reason="Error: Node Unavailable - no heartbeat"),
                            reply_to=msg)
            reply.metadata.__dict__["_src_node_id"] = 1  # SUPERLINK_NODE_ID
            return reply
        if msg.metadata.message_type == MessageType.QUERY:
            return handle_query(msg, ctx)
        if self.trained[node] >= self.dead_after.get(node, 10**9):
            self._die(node)
            return None  # a dead node never answers
        self.trained[node] += 1
        try:
            return handle_train(msg, ctx)
        except Exception as exc:  # what Flower does with a ClientApp's exception
            return Message(Error(code=2, reason=str(exc)), reply_to=msg)


def case_id(case):
    algorithm, _, cpr = case
    return f"{algorithm}-{'registry' if cpr == 'sampled' else f'cpr{cpr}'}"


@pytest.mark.parametrize("algorithm, params, cpr", EQUIVALENCE + REGISTRY,
                         ids=[case_id(c) for c in EQUIVALENCE + REGISTRY])
def test_server_and_client_handlers_reproduce_the_simulator(task_identity, no_plots, tmp_path,
                                                           algorithm, params, cpr):
    if cpr == "sampled":
        cpr = participation(small_config(algorithm, **params), algorithm, params)
    cfg = small_config(algorithm, clients_per_round=cpr, **params)
    # 3 nodes for 4 clients: node 0 hosts two clients as one block
    grid = InProcessGrid(3)
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5,
               log=lambda line: None)
    # every client update ran on a node: at least one train message per round (per arrival
    # for async_feddr), none of them failed
    updates = cfg["rounds"] * (cpr or 4) if algorithm == "async_feddr" else cfg["rounds"]
    assert sum(grid.trained.values()) >= updates
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)
    status = json.loads((tmp_path / "flower" / "flower_status.json").read_text())
    assert status["status"] == "ok"
    meta = json.loads((tmp_path / "flower" / "config.json").read_text())
    assert meta["versions"]["flwr"] == flwr.__version__


def test_a_configured_random_start_reaches_the_nodes(task_identity, no_plots, tmp_path):
    """x0 = {distribution = "normal"}: the server draws the start, the nodes start from it."""
    cfg = {**small_config("feddr", eta=2.0, client_lr=0.3, local_steps=2),
           "x0": {"distribution": "normal", "scale": 0.5}}
    run_server(InProcessGrid(2), cfg, tmp_path / "flower", num_nodes=2, node_timeout=5,
               log=lambda line: None)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


def test_data_drawn_for_each_run_seed_reach_the_nodes(task_identity, no_plots, tmp_path):
    """No data.seed pinned: every run seed draws its own data, on the server and on the
    nodes alike (the train message carries the run's seed)."""
    cfg = {**small_config("za1", client_lr=0.5, local_steps=2), "seeds": [3, 4]}
    run_server(InProcessGrid(2), cfg, tmp_path / "flower", num_nodes=2, node_timeout=5,
               log=lambda line: None)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)
    meta = json.loads((tmp_path / "sim" / "config.json").read_text())
    prints = {k: v["problem"]["fingerprint"] for k, v in meta["settings"].items()}
    assert set(prints) == {"base (data seed 3)", "base (data seed 4)"}
    assert len(set(prints.values())) == 2  # two data sets


@pytest.mark.parametrize("data_path", [False, True], ids=["partition", "data-path"])
def test_streaming_config_gives_the_simulators_iterates(task_identity, no_plots, tmp_path,
                                                        data_path):
    """liang2024_linear (fresh samples every step), reduced, with its star-topology
    algorithms and ReFedDA-GT at 2 of 4 clients: nodes draw the simulator's samples."""
    from pathlib import Path

    from fedcomp.config import apply_override, load

    cfg = load(Path(__file__).parents[2] / "fedcomp" / "configs" / "liang2024_linear.toml")
    for assignment in ["rounds=3", "eval_every=1", "data.n_clients=4", "data.n_features=40",
                       "data.sparsity=4", "algorithms.mrefedda_gt.sparsity=4",
                       "algorithms.mrefedda_gt.stage_rounds=2"]:
        cfg = apply_override(cfg, assignment)
    assert cfg["streaming"] is True
    del cfg["topology"]
    del cfg["readings"]  # they set options of the gossip algorithms dropped here
    cfg["algorithms"] = [a for a in cfg["algorithms"] if not a["name"].startswith("d")]
    cfg["algorithms"].append({"name": "refedda_gt", "client_lr": 1.0, "local_steps": 3,
                              "p": 12.0, "radius_sq": 300.0, "sparsity": 4,
                              "clients_per_round": 2})
    cfg["metrics"] += ["objective", "nnz"]
    assert [a.get("label", a["name"]) for a in cfg["algorithms"]] == [
        "mrefedda_gt", "fast_fedda", "c_fedda", "refedda_gt"]
    grid = InProcessGrid(3)
    if data_path:  # nodes with their own (shape-fixing) data; the sampler from the config
        full = build_problem(resolve(cfg).base)
        for node, ids in zip(grid.contexts, ([0, 1], [2], [3]), strict=True):
            path = save_partition(full, ids, tmp_path / f"node{node}.npz")
            grid.contexts[node].node_config = {"data-path": str(path)}
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5,
               log=lambda line: None)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


#: algorithms whose client states start as copies of x⁰ (a node starting them from zeros
#: drifts from the simulator as soon as x⁰ ≠ 0)
X0_COPIES = [("fedpd", {"client_lr": 0.05, "local_steps": 2}),
             ("fedadmm", {"client_lr": 0.05, "local_steps": 2}),
             ("fedcanon2", {"client_lr": 0.05, "local_steps": 2})]


@pytest.mark.parametrize("algorithm, params", X0_COPIES, ids=[a for a, _ in X0_COPIES])
def test_nodes_start_from_the_networks_seeded_parameters(task_identity, no_plots, tmp_path,
                                                         algorithm, params):
    """A TorchModel's x⁰ is its seeded initial parameters, not zeros: the nodes' client
    states start from them as the simulator's do."""
    pytest.importorskip("torch")
    cfg = small_config(algorithm, n_clients=3, rounds=2, batch_size=8, **params)
    cfg["data"].update({"n_classes": 4, "n_features": 10, "samples_per_client": 20})
    cfg["problem"] = {"loss": "torch_model", "model": "mlp", "input_shape": [10],
                      "n_classes": 4, "options": {"hidden": [5]}}
    cfg["backend"] = "torch-float64"  # assert_same_run compares float64 models
    assert np.abs(np.asarray(build_problem(resolve(cfg).base).initial_model())).max() > 0.1
    grid = InProcessGrid(3)
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5,
               log=lambda line: None)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


@pytest.mark.parametrize("algorithm, params", X0_COPIES, ids=[a for a, _ in X0_COPIES])
def test_nodes_start_from_the_x0_given_to_simulate(task_identity, tmp_path, algorithm, params):
    """simulate(x0=...) with the Flower executor: the nodes get the server's init(x0)."""
    from functools import partial

    from fedcomp.flower import FlowerClients
    from fedcomp.flower._server import connect_nodes
    from fedcomp.runtime import RunOptions, simulate

    cfg = validate(small_config(algorithm, **params))
    problem = build_problem(cfg, 3)  # the data of run seed 3, which the nodes draw too
    x0 = np.random.default_rng(1).normal(size=problem.param_shape)
    grid = InProcessGrid(3)
    config_json = json.dumps(cfg, sort_keys=True)
    nodes = connect_nodes(grid, config_json, problem.n_clients, 3, timeout=5)
    clients = partial(FlowerClients, grid=grid, nodes=nodes, run="x0", rounds=3,
                      round_timeout=5, config_json=config_json)

    def run(**executor):
        return simulate(make_algorithm(algorithm, **params), problem, 3, x0=x0, batch_size=10,
                        seed=3, metrics=["objective"], options=RunOptions(**executor))

    flower, sim = run(clients=clients), run()
    assert sum(grid.trained.values()) >= 3
    np.testing.assert_allclose(flower.x, sim.x, rtol=0, atol=0.0)
    assert [r["objective"] for r in flower.history] == [r["objective"] for r in sim.history]


def test_nodes_with_interleaved_clients_from_data_files(task_identity, tmp_path):
    """data-path nodes holding clients {0, 2} and {3, 1}: uploads are put back in order."""
    cfg = small_config("za1", n_clients=4, client_lr=0.5, local_steps=2)
    cfg["data"]["samples_per_client"] = [20, 30, 40, 50]
    cfg["problem"]["weighting"] = "samples"  # unequal weights: a misordered upload shows
    full = build_problem(resolve(cfg).base, cfg["seeds"][0])  # the run seed's data
    grid = InProcessGrid(2)
    for node, ids in zip(grid.contexts, ([0, 2], [3, 1]), strict=True):
        path = save_partition(full, ids, tmp_path / f"node{node}.npz")
        grid.contexts[node].node_config = {"data-path": str(path)}
    run_server(grid, cfg, tmp_path / "flower", node_timeout=5, log=lambda line: None)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


def test_a_silent_node_fails_the_run_naming_it_and_keeps_complete_rows(task_identity, tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=6, client_lr=0.5, local_steps=2)
    grid = InProcessGrid(3, dead_after={1001: 2})  # partition 1 stops answering in round 3
    with pytest.raises(FlowerRunError) as info:
        run_server(grid, cfg, tmp_path, num_nodes=3, node_timeout=5, round_timeout=1,
                   log=lambda line: None)
    text = str(info.value)
    assert "SuperNode 1001" in text and "partition-id=1 of 3" in text and "round 3" in text
    rows = result_rows(tmp_path)
    assert [r["round"] for r in rows] == ["0", "1", "2"]
    assert all(set(RESULT_COLUMNS) <= set(r) and r["objective"] for r in rows)
    status = json.loads((tmp_path / "flower_status.json").read_text())
    assert status["status"] == "failed" and "SuperNode 1001" in status["error"]


def test_a_node_sending_a_bad_upload_fails_the_run_naming_it(task_identity, tmp_path):
    """fedcomp's own app checks its nodes' uploads as the Strategy does: a NaN from node 1
    in round 3 stops the run naming the node, the round and the field; nothing of it is
    aggregated (the rows end with round 2's)."""
    from flwr.app import Array, ArrayRecord

    cfg = small_config("za1", n_clients=3, rounds=6, client_lr=0.5, local_steps=2)

    class TamperingGrid(InProcessGrid):
        def _deliver(self, msg):
            reply = super()._deliver(msg)
            if msg.metadata.dst_node_id == 1001 and self.trained[1001] == 3:
                upload = reply.content.array_records["upload"]
                bad = {k: Array.from_numpy_ndarray(np.full_like(upload[k].numpy(), np.nan))
                       for k in upload.keys()}
                reply.content["upload"] = ArrayRecord(bad)
            return reply

    with pytest.raises(FlowerRunError, match=r"SuperNode 1001 \(partition-id=1 of 3, clients "
                                             r"\[1\]\) sent a reply the server refuses in round 3"
                                             r" .*: upload field 'z_hat' holds 6 non-finite"):
        run_server(TamperingGrid(3), cfg, tmp_path, num_nodes=3, node_timeout=5,
                   round_timeout=5, log=lambda line: None)
    assert [r["round"] for r in result_rows(tmp_path)] == ["0", "1", "2"]


def test_a_stopped_run_says_it_was_stopped_not_0(task_identity, no_plots, tmp_path):
    """``flwr stop`` ends the ServerApp with SystemExit(0): the status said "failed: 0"."""
    cfg = small_config("za1", n_clients=2, rounds=3, client_lr=0.5, local_steps=2)

    class StoppedGrid(InProcessGrid):
        def push_messages(self, messages):
            if any(m.metadata.message_type == MessageType.TRAIN for m in messages):
                raise SystemExit(0)  # what Flower's runtime does to a stopped ServerApp
            return super().push_messages(messages)

    with pytest.raises(SystemExit):
        run_server(StoppedGrid(2), cfg, tmp_path, num_nodes=2, node_timeout=5,
                   round_timeout=1, log=lambda line: None)
    status = json.loads((tmp_path / "flower_status.json").read_text())
    assert status["status"] == "failed" and status["error"].startswith(
        "the run was stopped before it finished (flwr stop")


@pytest.mark.parametrize("algorithm, params, cpr, after_restart", [
    ("za1", {"client_lr": 0.5, "local_steps": 2}, None, 3),  # rounds 3-5 on the new node
    # the node sat out rounds before it died: its last checkpoint is older than the round
    # before the one it rejoins in (client sampling; other clients' async arrivals)
    # (SCAFFOLD, 2 of 3 per round: client 1 runs rounds 1, 2, sits out 3, dies in 4)
    ("scaffold", {"client_lr": 0.3, "local_steps": 2}, 2, 1),
    ("async_feddr", {"eta": 2.0, "client_lr": 0.3, "local_steps": 2}, None, None),
])
def test_a_restarted_node_resumes_from_its_checkpoint(task_identity, no_plots, tmp_path,
                                                      algorithm, params, cpr, after_restart):
    cfg = small_config(algorithm, n_clients=3, rounds=5, clients_per_round=cpr, **params)
    grid = InProcessGrid(3, dead_after={1001: 2}, restart={1001: 2001},
                         node_config={"checkpoint-dir": str(tmp_path / "ckpt")})
    lines = []
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5, round_timeout=1,
               rejoin_timeout=5, log=lines.append)
    assert grid.trained[2001] == after_restart if after_restart else grid.trained[2001] >= 1
    assert any("waiting up to 5 s for it to rejoin" in line for line in lines)
    # the client states (ZA1's anchor and gradient average, FedDR's y, x, x̂) came back
    # from disk: same iterates
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


def test_a_node_restarted_under_its_old_id_resumes_too(task_identity, tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=4, client_lr=0.5, local_steps=2)
    grid = InProcessGrid(3, dead_after={1000: 1}, restart={1000: 1000},
                         node_config={"checkpoint-dir": str(tmp_path / "ckpt")})
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5, round_timeout=1,
               rejoin_timeout=5, log=lambda line: None)
    assert grid.trained[1000] == 3
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


@pytest.mark.parametrize("slow", [False, True], ids=["old-id-unavailable", "slow-new-node"])
def test_node_unavailable_replies_are_waited_out_within_the_rejoin_timeout(
        task_identity, tmp_path, slow):
    """The SuperLink answers for a dead node still listed (and for one not up yet) with
    "Node Unavailable" from its own node id: the server asks again until rejoin-timeout
    (node-timeout at the start) instead of failing the run blaming "SuperNode 1"."""
    cfg = small_config("za1", n_clients=3, rounds=5, client_lr=0.5, local_steps=2)
    slow_start = {2001: 3, 1000: 2} if slow else None  # node 1000: slow at the start
    grid = InProcessGrid(3, dead_after={1001: 2}, restart={1001: 2001}, unavailable=True,
                         slow_start=slow_start,
                         node_config={"checkpoint-dir": str(tmp_path / "ckpt")})
    lines = []
    run_server(grid, cfg, tmp_path / "flower", num_nodes=3, node_timeout=5, round_timeout=1,
               rejoin_timeout=10, log=lines.append)
    assert grid.trained[2001] == 3
    assert any("SuperNode 1001" in line and "waiting up to 10 s" in line for line in lines)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"), tol=0.0)


def test_a_node_unavailable_for_good_fails_after_the_rejoin_timeout(task_identity, tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=5, client_lr=0.5, local_steps=2)
    grid = InProcessGrid(3, dead_after={1002: 1}, unavailable=True)
    with pytest.raises(FlowerRunError, match=r"SuperNode 1002 \(partition-id=2 of 3.*did not "
                                             r"rejoin within rejoin-timeout=1"):
        run_server(grid, cfg, tmp_path, num_nodes=3, node_timeout=5, round_timeout=1,
                   rejoin_timeout=1, log=lambda line: None)


def test_a_restarted_node_without_checkpoint_fails_clearly(task_identity, tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=5, client_lr=0.5, local_steps=2)
    grid = InProcessGrid(3, dead_after={1001: 2}, restart={1001: 2001})
    with pytest.raises(FlowerRunError, match="lost the client states"):
        run_server(grid, cfg, tmp_path, num_nodes=3, node_timeout=5, round_timeout=1,
                   rejoin_timeout=5, log=lambda line: None)


def test_a_node_that_never_rejoins_fails_after_the_rejoin_timeout(task_identity, tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=5, client_lr=0.5, local_steps=2)
    grid = InProcessGrid(3, dead_after={1002: 1})
    tic = time.monotonic()
    with pytest.raises(FlowerRunError, match=r"partition-id=2 of 3.*did not rejoin within "
                                             r"rejoin-timeout=1"):
        run_server(grid, cfg, tmp_path, num_nodes=3, node_timeout=5, round_timeout=1,
                   rejoin_timeout=1, log=lambda line: None)
    assert time.monotonic() - tic < 10


def test_waiting_for_nodes_times_out_naming_the_missing_partition(task_identity, tmp_path):
    grid = InProcessGrid(3)
    del grid.contexts[1002]  # partition 2 never connects
    cfg = small_config("fedmid", n_clients=3)
    tic = time.monotonic()
    with pytest.raises(FlowerRunError, match=r"missing partition-id \[2\] of num-partitions=3"):
        run_server(grid, cfg, tmp_path, node_timeout=1.0, log=lambda line: None)
    assert time.monotonic() - tic < 10
    assert not (tmp_path / "results.csv").exists()


def test_decentralized_algorithms_are_rejected_before_any_node_is_asked(task_identity,
                                                                       tmp_path):
    cfg = small_config("za1", client_lr=0.5)
    cfg["topology"] = {"name": "ring"}
    cfg["algorithms"].append({"name": "dfedda_gt", "label": "gt"})
    grid = InProcessGrid(4)
    with pytest.raises(FlowerRunError, match=r"\['gt'\] are decentralized.*fedcomp run"):
        run_server(grid, cfg, tmp_path, node_timeout=5, log=lambda line: None)
    assert all(CONFIG_KEY not in ctx.state for ctx in grid.contexts.values())  # never queried
    assert not (tmp_path / "results.csv").exists()
    status = json.loads((tmp_path / "flower_status.json").read_text())
    assert status["status"] == "failed"


def test_two_nodes_claiming_one_partition_are_rejected(task_identity, tmp_path):
    grid = InProcessGrid(2)
    grid.contexts[1001].node_config["partition-id"] = 0
    with pytest.raises(FlowerRunError, match="hosted by both"):
        run_server(grid, small_config("fedmid", n_clients=2), tmp_path, node_timeout=1,
                   log=lambda line: None)


# --- pieces -----------------------------------------------------------------------------------
def test_codec_round_trips_named_tuples_bit_for_bit():
    from typing import NamedTuple

    class State(NamedTuple):
        x: np.ndarray
        started: np.ndarray
        count: np.ndarray

    rng = np.random.default_rng(0)
    state = State(rng.normal(size=(3, 4)), np.array([True, False, True]), np.array(7))
    back = decode(encode(state), rng.normal(size=2), State)
    assert type(back) is State
    for a, b in zip(state, back, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    generic = decode(encode(state), rng.normal(size=2), name="Upload")
    assert generic._fields == ("x", "started", "count")

    class Other(NamedTuple):
        y: np.ndarray

    with pytest.raises(ValueError, match="different fedcomp versions"):
        decode(encode(state), np.zeros(1), Other)


def test_partitions_cover_every_client_once():
    for n, parts in [(4, 4), (10, 3), (7, 1)]:
        ids = np.concatenate([partition_clients(n, k, parts) for k in range(parts)])
        np.testing.assert_array_equal(ids, np.arange(n))
    with pytest.raises(ValueError, match="num-partitions must be in 1..3"):
        partition_clients(3, 0, 4)


def test_node_minibatches_are_keyed_by_global_client_id(tmp_path):
    cfg = validate(small_config("za1", n_clients=5))
    config_json = json.dumps(cfg, sort_keys=True)
    full = build_problem(cfg)
    node = load_node_data(config_json, (("num-partitions", 2), ("partition-id", 1)))
    np.testing.assert_array_equal(node.client_ids, [3, 4])
    x = np.random.default_rng(1).normal(size=(2, *full.param_shape))
    for batch_size in (None, 7):
        mine = Oracle(node.problem, np.arange(2), 4, 9, batch_size, Counters(),
                      client_ids=node.client_ids)
        sim = Oracle(full, np.array([3, 4]), 4, 9, batch_size, Counters())
        for _ in range(2):  # successive draws too
            np.testing.assert_array_equal(mine.grad(x), sim.grad(x))
    # a node whose data are only a file (data-path) sees the same rows
    path = save_partition(full, [4, 3], tmp_path / "part.npz")
    from_file = load_node_data(config_json, (("data-path", str(path)),))
    np.testing.assert_array_equal(from_file.client_ids, [3, 4])
    np.testing.assert_array_equal(from_file.problem.data.features, node.problem.data.features)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_rebuilds_from_its_hyperparameters(name):
    """Nodes rebuild the server's (set-up) algorithm from name + JSON hyperparameters."""
    from tests.conftest import make_problem

    problem = make_problem("logistic", reg=Zero() if name in SMOOTH_ONLY else None)
    algorithm = make_algorithm(name)
    algorithm = algorithm.prepare(setup_context(problem)) or algorithm
    again = make_algorithm(name, **json.loads(json.dumps(algorithm.hyperparameters)))
    assert again.hyperparameters == algorithm.hyperparameters
    # a node prepares the rebuilt algorithm on its own clients only: prepare must have
    # recorded whatever it derived from all the data (a smoothness, a λ)
    smallest = np.argmin(problem.loss.smoothness(problem.data.full_batch()))  # L_i < max L
    node = dataclasses.replace(problem, data=subset(problem.data, np.array([smallest])))
    on_node = again.prepare(setup_context(node)) or again
    assert on_node.hyperparameters == algorithm.hyperparameters


@pytest.mark.parametrize("name", ["fast_fedda", "c_fedda", "mc_fedda"])
def test_an_algorithm_not_set_up_names_itself(name):
    with pytest.raises(RuntimeError, match=rf"^{name} must be set up with a problem first"):
        make_algorithm(name).broadcast(None)


def test_flower_app_command_writes_a_runnable_app(tmp_path):
    from fedcomp.cli import main

    cfg_path = tmp_path / "exp.toml"
    cfg_path.write_text('name = "tiny"\nrounds = 2\nreference = false\n'
                        '[data]\ngenerator = "synthetic_fedprox"\nalpha = 1.0\nbeta = 1.0\n'
                        'n_clients = 3\nn_classes = 2\n[problem]\nloss = "logistic"\n'
                        '[regularizer]\nname = "l1"\nalpha = 0.001\n'
                        '[[algorithms]]\nname = "za1"\n')
    code = main(["flower", "app", str(cfg_path), "--out", str(tmp_path / "app"),
                 "--set", "rounds=5", "--results", str(tmp_path / "res")])
    assert code == 0
    meta = tomllib.loads((tmp_path / "app" / "pyproject.toml").read_text())
    app = meta["tool"]["flwr"]["app"]
    assert app["components"] == {"serverapp": "fedcomp_flower_app.server_app:app",
                                 "clientapp": "fedcomp_flower_app.client_app:app"}
    run_cfg = json.loads(app["config"]["fedcomp-config"])
    assert run_cfg["rounds"] == 5 and run_cfg["algorithms"] == [{"name": "za1"}]
    assert app["config"]["out-dir"] == str((tmp_path / "res").resolve())
    assert (tmp_path / "app" / "fedcomp_flower_app" / "server_app.py").exists()


# --- Flower's simulation engine (Ray) -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("algorithm, params, cpr", EQUIVALENCE)
def test_simulation_engine_matches_the_simulator(tmp_path, algorithm, params, cpr):
    cfg = small_config(algorithm, clients_per_round=cpr, **params)
    environment = dict(os.environ)
    run_simulation(cfg, tmp_path / "flower", num_cpus=2, round_timeout=120)
    # Ray's PYTHONPATH, PYTHONBREAKPOINT and RAY_* variables do not leak into this process
    # (they made a later pip run into a fresh venv install nothing: tests/product/test_wheel.py)
    assert dict(os.environ) == environment
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"))


@pytest.mark.slow
def test_simulation_ignores_a_dead_ray_cluster_left_behind(tmp_path):
    """A Ray cluster that died (a killed process) leaves /tmp/ray/ray_current_cluster
    naming its address; Ray would join it, and the simulation crash. fedcomp's simulation
    starts a Ray instance of its own."""
    import tempfile
    from pathlib import Path

    marker = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    before = marker.read_text() if marker.exists() else None
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("192.0.2.2:41619")  # TEST-NET-1: nothing answers there
    try:
        cfg = small_config("za1", client_lr=0.5, local_steps=3)
        run_simulation(cfg, tmp_path / "flower", num_cpus=2, round_timeout=120)
    finally:
        if before is None:
            marker.unlink(missing_ok=True)
        else:
            marker.write_text(before)
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"))


# --- a real deployment: SuperLink + SuperNodes as processes on 127.0.0.1 -----------------------
@pytest.mark.slow
def test_localhost_deployment_matches_the_simulator_and_leaves_no_process(tmp_path):
    cfg = small_config("za1", n_clients=3, client_lr=0.5, local_steps=3)
    lines = []
    status = run_local(cfg, tmp_path / "flower", nodes=3, node_timeout=90, round_timeout=120,
                       timeout=500, echo=lines.append)
    assert status["status"] == "ok", (status, lines[-30:])
    assert any("round 3/3" in line for line in lines)  # progress was streamed
    assert_same_run(tmp_path / "flower", simulator_outputs(cfg, tmp_path / "sim"))
    assert len(status["pids"]) >= 5  # SuperLink, 3 SuperNodes, flwr run (+ their children)
    assert [pid for pid in status["pids"] if alive(pid)] == []


@pytest.mark.slow
def test_ports_taken_by_another_process_meanwhile_are_replaced(tmp_path, monkeypatch):
    """free_port() releases the port it found: a concurrent deployment may bind it before
    our SuperLink or SuperNode does. Each is started again on another port (before, the
    SuperLink died on the bind and the run talked to the other process's listener)."""
    import socket

    from fedcomp.flower import _local

    taken = []
    for _ in range(2):  # what another deployment holds: one port for us to collide with each
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken.append(s)
    handed = [s.getsockname()[1] for s in taken]
    real = _local.free_port
    calls = []

    def racy_free_port():  # the SuperLink's first port, then SuperNode 0's, are taken
        calls.append(handed.pop(0) if len(calls) in (0, 2) else real())
        return calls[-1]

    monkeypatch.setattr(_local, "free_port", racy_free_port)
    cfg = small_config("fedmid", n_clients=2, rounds=2)
    lines = []
    try:
        status = run_local(cfg, tmp_path / "flower", nodes=2, node_timeout=90,
                           round_timeout=120, timeout=300, echo=lines.append)
    finally:
        for s in taken:
            s.close()
    assert status["status"] == "ok", (status, lines[-20:])
    assert len(calls) == 5  # SuperLink twice, SuperNode 0 twice, SuperNode 1 once
    assert f"SuperLink on 127.0.0.1:{calls[1]}" in "\n".join(lines)
    assert [pid for pid in status["pids"] if alive(pid)] == []


@pytest.mark.slow
def test_flower_local_admits_no_client_without_its_credentials(tmp_path):
    """By default the deployment is TLS with a throwaway CA plus SuperNode authentication:
    from another FLWR_HOME, `flwr ls` fails in plain HTTP and in TLS without the CA, and a
    SuperNode without a registered key (even one trusting the CA) is refused; with the
    deployment's own home `flwr ls` works, and the run completes."""
    import subprocess

    from fedcomp._lifetime import send
    from fedcomp.flower._local import _executable, descendants, free_port

    seen = {}

    def intrude(group):
        args, env, _ = group.launch["superlink"]
        address = f"127.0.0.1:{args[args.index('--port') + 1]}"
        ca = args[args.index("--ssl-ca-certfile") + 1] if "--ssl-ca-certfile" in args else ""

        def flwr_ls(home, connection):
            home.mkdir(parents=True, exist_ok=True)
            (home / "config.toml").write_text(
                f'[superlink]\ndefault = "x"\n[superlink.x]\naddress = "{address}"\n'
                + connection)
            return subprocess.run([_executable("flwr"), "ls"], capture_output=True,
                                  text=True, timeout=120, env={**env, "FLWR_HOME": str(home)})

        seen["plain"] = flwr_ls(tmp_path / "plain", "insecure = true\n")
        seen["tls"] = flwr_ls(tmp_path / "tls", "")
        seen["own"] = subprocess.run([_executable("flwr"), "ls"], capture_output=True,
                                     text=True, timeout=120, env=env)
        # a SuperNode trusting the CA but with no registered key; its output to a file: the
        # SuperExec it starts keeps pipes open
        with (tmp_path / "node.log").open("w") as log:
            node = subprocess.Popen(
                [_executable("flower-supernode"),
                 *(["--root-certificates", ca] if ca else ["--insecure"]),
                 "--superlink", address, "--port", str(free_port()), "--max-retries", "2",
                 "--max-wait-time", "20"], stdout=log, stderr=subprocess.STDOUT,
                env={**env, "FLWR_HOME": str(tmp_path / "node")}, start_new_session=True)
        kids = set()
        try:
            deadline = time.monotonic() + 120
            while node.poll() is None and time.monotonic() < deadline:
                kids |= descendants([node.pid])
                time.sleep(0.2)
        finally:
            for pid in [node.pid, *kids]:
                send(pid, signal.SIGKILL)
            node.wait()
        seen["node"] = subprocess.CompletedProcess(node.args, node.returncode,
                                                   (tmp_path / "node.log").read_text(), "")

    cfg = small_config("fedmid", n_clients=2, rounds=2)
    lines = []
    status = run_local(cfg, tmp_path / "flower", nodes=2, node_timeout=90, round_timeout=120,
                       timeout=300, echo=lines.append, on_start=intrude)
    for key, result in seen.items():
        print(key, result.returncode, result.stdout[-600:], result.stderr[-600:])
    assert seen["own"].returncode == 0  # the deployment's own credentials work...
    assert seen["plain"].returncode != 0  # ...nothing else does
    assert seen["tls"].returncode != 0
    assert seen["node"].returncode != 0
    assert status["status"] == "ok", (status, lines[-20:])
    assert [pid for pid in status["pids"] if alive(pid)] == []


@pytest.mark.slow
def test_killed_supernode_fails_the_run_naming_it(tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=12, client_lr=0.5, local_steps=2)
    out = tmp_path / "flower"
    killed = {}

    def kill_node_1_after_round_1(group):
        def worker():
            if wait_for_rows(out, 2):
                group.kill("supernode 1")
                killed["at"] = time.monotonic()

        threading.Thread(target=worker, daemon=True).start()

    round_timeout = 20.0
    status = run_local(cfg, out, nodes=3, node_timeout=90, round_timeout=round_timeout,
                       timeout=500, echo=lambda line: None, on_start=kill_node_1_after_round_1)
    assert "at" in killed
    assert status["status"] == "failed"
    assert "partition-id=1 of 3" in status["error"] and "SuperNode" in status["error"]
    assert time.monotonic() - killed["at"] < 3 * round_timeout + 30
    rows = result_rows(out)  # complete rows only, every column present
    assert 2 <= len(rows) < 13
    assert all(set(RESULT_COLUMNS) <= set(r) and r["objective"] for r in rows)
    assert [int(r["round"]) for r in rows] == list(range(len(rows)))
    assert not (out / "summary.md").exists()
    assert [pid for pid in status["pids"] if alive(pid)] == []


def wait_for_rows(out, n, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / "results.csv").exists() and len(result_rows(out)) >= n:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_restarted_supernode_resumes_from_its_checkpoint(tmp_path):
    cfg = small_config("za1", n_clients=3, rounds=5, client_lr=0.5, local_steps=2)
    out = tmp_path / "flower"
    events = {}

    def crash_and_restart_node_1(group):
        def worker():
            if wait_for_rows(out, 3):  # rounds 0, 1, 2 evaluated
                group.kill("supernode 1")
                time.sleep(2)
                events["restarted"] = True
                # refused until the SuperLink misses the old process's heartbeats: restarted
                # whenever it exits, until the run ends
                group.restart("supernode 1", retry_for=240)

        threading.Thread(target=worker, daemon=True).start()

    lines = []
    status = run_local(cfg, out, nodes=3, node_timeout=90, round_timeout=20, timeout=500,
                       checkpoint_dir=tmp_path / "ckpt", rejoin_timeout=240,
                       echo=lines.append, on_start=crash_and_restart_node_1)
    assert "restarted" in events
    assert status["status"] == "ok", (status, lines[-30:])
    assert any("waiting up to 240 s for it to rejoin" in line for line in lines)
    assert_same_run(out, simulator_outputs(cfg, tmp_path / "sim"))
    assert [pid for pid in status["pids"] if alive(pid)] == []


def test_app_config_is_valid_toml_for_any_string(tmp_path):
    cfg = small_config("za1")
    cfg["description"] = 'quotes " and \\ backslashes\nand newlines'
    write_app(cfg, tmp_path)
    meta = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert json.loads(meta["tool"]["flwr"]["app"]["config"]["fedcomp-config"])[
        "description"] == cfg["description"]


def test_flower_local_rejects_a_bad_node_count(tmp_path, capsys):
    from fedcomp.cli import main

    code = main(["flower", "local", "seed000", "--nodes", "0", "--out", str(tmp_path / "x")])
    assert code == 2
    assert "--nodes must be a positive integer (got 0)" in capsys.readouterr().err


def start_flower_local(tmp_path, rounds=50, extra=()):
    """``fedcomp flower local`` of a tiny config in a child process, its temporary
    directories under ``tmp_path / "tmp"``; returns (process, out)."""
    import subprocess
    import sys

    cfg = tmp_path / "exp.toml"
    cfg.write_text(f'name = "signals"\nrounds = {rounds}\nreference = false\n'
                   '[data]\ngenerator = "synthetic_fedprox"\nalpha = 1.0\nbeta = 1.0\n'
                   'n_clients = 2\nn_classes = 2\nsamples_per_client = 20\nn_features = 4\n'
                   '[problem]\nloss = "logistic"\n[regularizer]\nname = "l1"\nalpha = 0.001\n'
                   '[[algorithms]]\nname = "fedmid"\n')
    out = tmp_path / "run"
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    # Ctrl-C's default action, whatever this process inherited: a suite started in the
    # background by a script (`pytest &`, no job control) ignores SIGINT, and so did its
    # fedcomp, which then never saw the test's SIGINT (the 180 s "hang" under load)
    launcher = ("import runpy, signal, sys; signal.signal(signal.SIGINT, "
                "signal.default_int_handler); sys.argv[0] = 'fedcomp'; "
                "runpy.run_module('fedcomp', run_name='__main__')")
    # its output to a file: a pipe nobody reads while it runs could fill and block it
    with (tmp_path / "flower-local.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", launcher, "flower", "local", str(cfg),
                                 "--nodes", "2", "--out", str(out), *extra],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, out


def processes_under(path):
    """Running processes whose environment names ``path`` (every process of a deployment
    started there inherits its TMPDIR or FLWR_HOME, orphans included)."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(path).encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid() and alive(pid)]


def wait_until_dead(pids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.2)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_a_signal_stops_every_process_of_flower_local(tmp_path, sig):
    """Ctrl-C, SIGTERM (timeout, a scheduler) and SIGHUP (a closed terminal) tear the
    deployment down and remove the temporary FLWR_HOME; after SIGKILL the watchdog does."""
    from fedcomp._lifetime import descendants

    proc, out = start_flower_local(tmp_path)
    seen = set()
    try:
        assert wait_for_rows(out, 2, timeout=240)  # the run is under way
        seen = descendants([proc.pid])
        assert len(seen) >= 4  # SuperLink, SuperNodes, flwr run, watchdog and children
        assert list((tmp_path / "tmp").iterdir())  # the temporary FLWR_HOME
        signalled = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        # the signal is forwarded, and what is left a few seconds later SIGKILLed by process
        # group: bounded whatever the load (before, the teardown once ran past 180 s at load
        # 5-12, and a SIGTERM left 12 Flower processes running)
        proc.wait(timeout=180)
        print(f"{sig}: fedcomp exited {time.monotonic() - signalled:.1f} s after the signal")
        left = wait_until_dead(seen, 30)
        strays = wait_until_dead(processes_under(tmp_path), 30)  # orphans too
    finally:
        if proc.poll() is None:
            proc.kill()
        # never leave a deployment behind, even when the test fails
        for pid in set(seen) | set(processes_under(tmp_path)):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert left == [] and strays == []
    assert list((tmp_path / "tmp").iterdir()) == []
    if sig != "SIGKILL":
        assert proc.returncode == 128 + getattr(signal, sig)
        assert "interrupted" in (tmp_path / "flower-local.log").read_text()


# --- compressed uploads cross the network compact -----------------------------------------------
@pytest.mark.parametrize("compressor, most", [
    ({"name": "top_k", "k": 100}, 0.2),       # 5 %: an int32 index + a float64 value each
    ({"name": "rand_k", "k": 200}, 0.2),
    ({"name": "qsgd", "levels": 4}, 0.15),    # a few distinct values: one byte each
    ({"name": "natural"}, 0.15),
])
def test_compressed_uploads_are_sent_in_fewer_bytes_and_decode_exactly(compressor, most):
    from fedcomp.compressors import make_compressor
    from fedcomp.flower._codec import decode, encode

    rng = np.random.default_rng(0)
    upload = rng.normal(size=(3, 2000))
    upload[0, 7] = -0.0  # a signed zero survives too
    params = {k: v for k, v in compressor.items() if k != "name"}
    sent = make_compressor(compressor["name"], **params).compress(
        upload, 0, 1, np.arange(3, dtype=np.uint64))
    values = sent[0] if isinstance(sent, tuple) else sent
    Upload = namedtuple("Upload", ["delta", "wire_bits"])
    up = Upload(np.asarray(values), np.array([5, 6, 7], dtype=np.int64))
    dense, compact = encode(up), encode(up, compact=True)
    size = lambda record: sum(len(record[k].data) for k in record.keys())  # noqa: E731
    assert size(compact) <= most * size(dense)
    back = decode(compact, np.zeros(1))
    assert back.delta.tobytes() == up.delta.tobytes()  # bit for bit, signs of zeros included
    assert np.array_equal(back.wire_bits, up.wire_bits)


def test_dense_uploads_stay_dense():
    from fedcomp.flower._codec import encode

    Upload = namedtuple("Upload", ["delta"])
    record = encode(Upload(np.random.default_rng(1).normal(size=(3, 200))), compact=True)
    assert list(record.keys()) == ["delta"]
