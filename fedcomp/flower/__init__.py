"""Run any fedcomp algorithm on real machines through Flower (extra ``fedcomp[flower]``).

The only package of fedcomp that imports ``flwr``. It turns every star-topology
algorithm of the registry into a Flower ServerApp + ClientApp (Message API) with no
per-algorithm code:

* the **ServerApp** (:func:`make_server_app`) runs the simulator's own round loop
  (:func:`fedcomp.experiments.run_experiment` → :func:`fedcomp.runtime.simulate`): seeded
  sampling, ``broadcast``/``server_update`` with the same ``ServerContext``, counters,
  evaluation, ``results.csv``/``config.json`` — but each round's ``client_update`` runs on
  the SuperNodes hosting the participants (``grid.send_and_receive``), after an explicit
  wait for nodes covering every client;
* the **ClientApp** (:func:`make_client_app`) loads the node's clients from its
  ``node_config`` (``partition-id``/``num-partitions`` through the simulator's generators,
  or ``data-path``), runs ``client_update`` on them as one block, and keeps their client
  states in ``context.state`` (and in ``checkpoint-dir`` when the node config has one).

Messages and uploads are encoded field by field from the algorithm's NamedTuples; every
random draw is keyed by (seed, round, global client id), so a Flower run reproduces the
simulator's iterates. ``fedcomp flower app`` writes a ready Flower app, ``fedcomp flower
local`` runs one on a SuperLink and SuperNodes started on 127.0.0.1.

What runs where:

* **Star-topology algorithms** — every entry of :data:`fedcomp.algorithms.ALGORITHMS`.
  Asynchronous ones (``async_feddr``) keep the event clock on the server
  (:func:`fedcomp.runtime.simulate_async` with this executor): arrivals are processed in
  simulated-time order, and each arrival's ``client_update`` — from the stale message its
  client read, with the server step as its round — runs on the node hosting that client.
  The decentralized algorithms (:data:`fedcomp.algorithms.DECENTRALIZED`) gossip between
  nodes over a graph; a configuration that lists one is rejected before any node is asked.
* **Message types.** ``query`` is discovery (configuration out, client ids back); every
  phase of an algorithm is a ``train`` message, because every phase of the registered
  algorithms is a ``broadcast`` → ``client_update`` → ``server_update`` exchange. A
  multi-phase algorithm tells its phases apart by the round: FedDR's (and asyncFedDR's)
  warm-up ``x_i⁰ = prox_{ηf_i}(x⁰)`` is a ``train`` message to every node with
  ``round = -1`` (``FederatedAlgorithm.warmup``); MC-FedDA's and Multistep ReFedDA-GT's
  stages travel in the broadcast (stage centre, stage index); FedPD's and Scaffnew's
  communication coins are counter-based draws of ``(seed, round)`` that server and nodes
  compute alike. No custom message type is needed.
* **Your own apps.** :class:`Strategy` drops any star-topology algorithm into a ServerApp
  you write yourself (``Strategy(...).start(grid, initial_arrays, num_rounds)``, as Flower's
  own strategies), with ClientApps that load their own data and return
  :func:`client_train` (and :func:`client_evaluate`) of it: one SuperNode per client.
  ``start(..., should_stop=strategy.stopping(tol=...))`` ends the run by fedcomp's
  stopping rule (:class:`StoppingRule`) on Flower 1.43 and 1.42 alike; a private run
  reports its ``ε`` in Flower's ``PrivacyAccountant`` protocol (:class:`FedcompAccountant`).
* **Per-client messages.** The broadcast is one message shared by a round's participants
  (a node receives it once for all its clients). No registered algorithm sends a client
  its own data: what is client-specific (control variates, FedDR's ``y_i``, trackers)
  is client state, kept on the node in ``context.state``. An algorithm that needed a
  per-client message would need a field indexed by client id, which this adapter does
  not provide.
"""

from __future__ import annotations

from .._extras import require

require("flwr", "fedcomp.flower")  # before the submodules, which import flwr

from ._client import make_client_app  # noqa: E402
from ._data import partition_clients, save_partition  # noqa: E402
from ._privacy import FedcompAccountant  # noqa: E402
from ._server import (  # noqa: E402
    RUN_CONFIG_DEFAULTS,
    STATUS_FILE,
    FlowerClients,
    FlowerRunError,
    connect_nodes,
    make_server_app,
    run_server,
)
from ._simulation import run_simulation  # noqa: E402
from ._stopping import StoppingRule  # noqa: E402
from ._strategy import Strategy  # noqa: E402
from ._user_client import client_evaluate, client_train  # noqa: E402

#: the apps ``fedcomp flower app`` points Flower to (configuration from the run config)
server_app = make_server_app()
client_app = make_client_app()

__all__ = ["RUN_CONFIG_DEFAULTS", "STATUS_FILE", "FedcompAccountant", "FlowerClients",
           "FlowerRunError", "StoppingRule", "Strategy", "client_app", "client_evaluate",
           "client_train", "connect_nodes", "make_client_app", "make_server_app",
           "partition_clients", "run_server", "run_simulation", "save_partition", "server_app"]
