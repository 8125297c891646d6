"""The client side of :class:`fedcomp.flower.Strategy`, for a user's own ClientApp.

A SuperNode of a user's app is one client holding its own arrays. Its ``train`` handler
returns :func:`client_train` of the message, the context and those arrays (or its data
pipeline's batches, and for a network its own ``nn.Module``, ``module=``); its
``evaluate`` handler (needed only with the strategy's ``evaluate_every``) returns
:func:`client_evaluate`. The loss and the regularizer come from the strategy, so that
every node computes the same ``f_i`` and ``g``; the client's id is its node's
``partition-id`` unless the handler passes ``client_id``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict

from ..data import ClientData
from ..data._checks import per_sample
from ..losses import make_loss
from ..problem import Problem
from ..regularizers import make_regularizer
from ._client import CONFIG_KEY, train_clients
from ._data import NodeData
from ._strategy import ARRAYS_KEY, DISCOVER, build_component

#: the last problems built, by (problem spec, client id, the arrays' identities): the
#: arrays are kept with them, so an identity is never that of a freed array
_PROBLEMS: OrderedDict[tuple[Any, ...], tuple[Problem, tuple[Any, ...]]] = OrderedDict()
_CACHED = 4


def client_train(msg: Message, context: Context, features: Any = None, targets: Any = None, *,
                 batches: Any = None, module: Any = None, client_id: int | None = None,
                 sample_weight: Any = None) -> Message:
    """The reply of a user's ClientApp to a :class:`fedcomp.flower.Strategy` train message.

    Parameters
    ----------
    msg : Message
        The ``train`` message the handler received.
    context : Context
        The handler's context: the client's state lives in ``context.state`` between rounds.
    features : array, shape (n_samples, ...)
        This client's samples: NumPy, a CPU or GPU torch tensor, or a ``scipy.sparse``
        matrix for sparse data.
    targets : array, shape (n_samples,)
        Their targets (``±1`` labels for ``logistic``, class ids for ``softmax`` and
        networks).
    batches : iterable of (features, targets), optional
        Instead of ``features`` and ``targets``: the client's data as its own pipeline
        yields it (a ``torch.utils.data.DataLoader``, a list of pairs), read once and
        kept while the same object is passed (fedcomp draws its own minibatches from it).
    module : torch.nn.Module, optional
        The ClientApp's own network, for a strategy whose loss is a
        :class:`~fedcomp.losses.TorchModel`: the algorithm's local update (its steps, prox,
        control variates, dual variables) runs on this module's forward, with the model's
        parameters in place of the module's own weights (a copy: the instance is never
        changed). Its parameters must be the strategy's model's, name for name and shape
        for shape (one error names the first that is not). It runs on the host, as the
        data do.
    client_id : int, optional
        This client's id in ``0..num_clients-1``; by default the node's ``partition-id``
        (``flower-supernode --node-config 'partition-id=K'``).
    sample_weight : array, shape (n_samples,), optional
        Per-sample weights.

    Returns
    -------
    Message
        The reply: discovery (the client's id, sample total and smoothness ``L_i``), or
        its ``client_update``'s upload and gradient/prox counts.

    Examples
    --------
    In a ClientApp::

        @app.train()
        def train(msg, context):
            features, targets = load_my_data(context.node_config["partition-id"])
            return client_train(msg, context, features, targets)

    or, with the node's own network and its ``DataLoader``::

        return client_train(msg, context, module=Net(), batches=trainloader)
    """
    spec: dict[str, Any] = dict(msg.content.config_records[CONFIG_KEY])
    client = _client_id(context, client_id)
    problem = _problem(str(spec["problem"]), client, features, targets, sample_weight,
                       batches, module)
    if spec.get("phase") == DISCOVER:
        smoothness = float(np.asarray(problem.loss.smoothness(problem.data.full_batch()))[0])
        reply = ConfigRecord({"client-id": client,
                              "samples": float(problem.data.sample_totals()[0]),
                              "smoothness": smoothness})
        return Message(RecordDict({CONFIG_KEY: reply}), reply_to=msg)
    asked = [int(c) for c in spec["client-ids"]]  # type: ignore[union-attr]
    if asked != [client]:
        raise ValueError(f"this node is client {client}, the server asked for clients {asked}; "
                         "restart it with its partition-id (or pass client_id)")
    node = NodeData(problem, np.array([client], dtype=np.int64), int(spec["n-clients"]))
    return train_clients(msg, context, node)


def client_evaluate(msg: Message, context: Context, features: Any = None,
                    targets: Any = None, *, batches: Any = None, module: Any = None,
                    client_id: int | None = None, sample_weight: Any = None) -> Message:
    """The reply of a user's ClientApp to a :class:`fedcomp.flower.Strategy` evaluate
    message: ``f_i`` and the accuracy (NaN for losses that do not classify) at the model.

    Parameters are those of :func:`client_train`.

    Returns
    -------
    Message
        ``metrics``: ``loss``, ``accuracy`` and ``num-examples``.
    """
    from ..metrics import train_accuracy

    spec: dict[str, Any] = dict(msg.content.config_records[CONFIG_KEY])
    client = _client_id(context, client_id)
    problem = _problem(str(spec["problem"]), client, features, targets, sample_weight,
                       batches, module)
    model = problem.as_model(msg.content.array_records[ARRAYS_KEY].to_numpy_ndarrays()[0])
    metrics = MetricRecord({"loss": problem.smooth_value(model),
                            "accuracy": train_accuracy(problem, model),
                            "num-examples": int(problem.data.counts[0])})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)


def _client_id(context: Context, client_id: int | None) -> int:
    if client_id is not None:
        return int(client_id)
    if "partition-id" not in context.node_config:
        raise ValueError("this SuperNode has no partition-id in its node config; start it with "
                         "--node-config 'partition-id=K' or pass client_id= to client_train")
    return int(context.node_config["partition-id"])  # type: ignore[arg-type]


def _host(values: Any) -> Any:
    """A NumPy array of ``values``: a torch tensor (on any device) copied to the host; a
    ``scipy.sparse`` matrix kept as it is."""
    if hasattr(values, "tocsr"):
        return values
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # torch, without importing it
        return values.detach().cpu().numpy()
    return np.asarray(values)


def _from_batches(batches: Any, client: int) -> tuple[Any, Any]:
    """The client's ``(features, targets)``: its ``(X, y)`` batches concatenated."""
    xs, ys = [], []
    for k, batch in enumerate(batches):
        if not (isinstance(batch, tuple | list) and len(batch) == 2):
            raise ValueError(f"client {client}: batch {k} is a {type(batch).__name__}, not a "
                             "pair (features, targets); yield (X, y) from the data pipeline")
        xs.append(_host(batch[0]))
        ys.append(_host(batch[1]))
    if not xs:
        raise ValueError(f"client {client}: its batches yielded nothing; a client needs data")
    if any(hasattr(x, "tocsr") for x in xs):
        from scipy import sparse

        return sparse.vstack(xs, format="csr"), np.concatenate(ys)
    return np.concatenate(xs), np.concatenate(ys)


def _node_loss(loss: Any, module: Any, client: int) -> Any:
    """The strategy's network loss computing with the node's own ``module`` instance, once
    its parameters are the strategy's model's (names and shapes, in order): the flat
    vectors the server sends and the node uploads then mean the same tensors."""
    from ..losses import TorchModel

    if not isinstance(loss, TorchModel):
        raise ValueError(f"client {client}: module= hands over a network, and the strategy's "
                         f"loss is {loss!r}; give the strategy a TorchModel loss (its model "
                         "by import path) to train the node's module")
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"client {client}: module must be a torch.nn.Module instance, the "
                         f"node's network (got a {type(module).__name__})")
    try:
        own = dataclasses.replace(loss, model=module, options=None)
        difference = loss.layout().difference(own.layout())
    except ValueError as exc:
        raise ValueError(f"client {client}: the module handed to client_train: {exc}") from exc
    if difference is not None:
        raise ValueError(f"client {client}: the module handed to client_train is not the "
                         f"strategy's model {loss.model!r}: {difference}; build the node's "
                         "module as the strategy's model is built")
    return own


def _problem(problem_json: str, client: int, features: Any, targets: Any,
             sample_weight: Any, batches: Any = None, module: Any = None) -> Problem:
    """The one-client problem of these arrays (cached across rounds)."""
    if (batches is None) == (features is None and targets is None):
        raise ValueError(f"client {client}: give its data as features and targets, or as "
                         "batches= (an iterable of (X, y)), one of the two")
    if batches is None and (features is None or targets is None):
        raise ValueError(f"client {client}: features and targets go together (got only "
                         f"{'targets' if features is None else 'features'})")
    key = (problem_json, client, id(features), id(targets), id(sample_weight), id(batches),
           id(module))
    if key in _PROBLEMS:
        _PROBLEMS.move_to_end(key)
        return _PROBLEMS[key][0]
    spec = json.loads(problem_json)
    given = (features, targets, sample_weight, batches, module)  # kept: ids key the cache
    if batches is not None:
        features, targets = _from_batches(batches, client)
    features_ = _host(features)
    targets = _host(targets)
    # one target per sample, named by this node's client id (a scalar label from a
    # data set would otherwise be broadcast to every sample: a zero model that "succeeds")
    where = f"client {client} (this node's arrays)"
    rows = int(features_.shape[0]) if features_.ndim else 1  # 0-d: from_lists names it
    labels = per_sample(targets, rows, where)
    weights = None if sample_weight is None else [
        per_sample(_host(sample_weight), rows, where, "sample weight")]
    dtype = getattr(features_, "dtype", np.float64)
    data = ClientData.from_lists([features_], [labels],
                                 dtype=dtype if np.issubdtype(dtype, np.floating) else np.float64,
                                 sample_weight=weights)
    loss = build_component(spec["loss"], make_loss)
    if module is not None:
        loss = _node_loss(loss, module, client)
    problem = Problem(loss, build_component(spec["regularizer"], make_regularizer), data,
                      n_classes=spec.get("n_classes"),
                      minibatch=spec.get("minibatch", "with_replacement"))
    _PROBLEMS[key] = (problem, given)
    while len(_PROBLEMS) > _CACHED:
        _PROBLEMS.popitem(last=False)
    return problem


__all__ = ["client_evaluate", "client_train"]
