"""Compressed uploads for any star-topology algorithm: ``compressed(algorithm, compressor)``.

The wrapper is an algorithm like any other (five pure functions over NamedTuple states):
each client's upload is compressed field by field before it leaves the client, the server
hands the decoded upload to the algorithm's own ``server_update``, and the exact encoded
size travels with the upload (its :data:`~fedcomp.algorithms._base.WIRE_BITS` field), which
the runner adds to ``bits_up``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import namedtuple
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from .._array import (
    Array,
    asarray_like,
    bit_width,
    namespace,
    replace_rows,
    stacked_zeros,
    take_rows,
)
from ..compressors import Compressor, ef21_step, make_compressor
from ._base import (
    WIRE_BITS,
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    check_flag,
)
from ._recipe import transformed

#: The client-state field holding EF21's estimate ``g_i`` of the client's upload.
EF21_FIELD = "ef21"


class EF21ServerState(NamedTuple):
    """The wrapped algorithm's server state and the server's copy of every ``g_i``."""

    inner: Any
    ef21: Array  # (n_clients, *model shape)


@lru_cache(maxsize=128)
def _tuple_type(name: str, fields: tuple[str, ...]) -> Any:
    # the wrapped algorithm's fields are known only at run time; algorithms read their
    # uploads and states by field name (as a Flower record decodes them)
    return namedtuple(name, fields)  # noqa: PYI024


def _is_float(value: Array) -> bool:
    return bool(namespace(value).isdtype(value.dtype, "real floating"))


def compressed(algorithm: FederatedAlgorithm, compressor: Compressor, ef21: bool = False
               ) -> FederatedAlgorithm:
    """``algorithm`` with every client upload compressed by ``compressor``.

    Parameters
    ----------
    algorithm : FederatedAlgorithm
        A star-topology algorithm (synchronous rounds or asynchronous).
    compressor : Compressor
        From :mod:`fedcomp.compressors` (e.g. ``TopK(k=5)``).
    ef21 : bool, default False
        Wrap the compressor in EF21 error feedback (for biased compressors such as top-k):
        the client sends ``c_i = C(u_i − g_i)`` and both sides set ``g_i ← g_i + c_i``;
        the algorithm's server update receives ``g_i``. Needs an upload of one floating
        field with the model's shape (fedavg, fedmid, fedprox, fedda, feddr, fedadmm, ...).

    Returns
    -------
    FederatedAlgorithm
        Same name; its hyperparameters gain ``compressor`` and ``ef21``.

    Notes
    -----
    What is compressed is the upload **as the algorithm sends it**, each floating field
    separately (purpose = the field's number, so the fields' draws are independent; keys
    ``(seed, round, client)``); integer fields go as they are, at their width. For
    FedAvg, FedMiD, FedProx, FedDA, SCAFFOLD, FedDR and FedADMM the upload is already a
    change (``Δ_i = y_i − x̄`` or a state difference), the quantity compression schemes
    are designed for. For an algorithm that uploads a model, use ``ef21=True``: EF21 then
    compresses the change of the upload since the client's last one, i.e. its difference
    to what the server already holds.

    The broadcast is not compressed. ``floats_up`` still counts the decoded upload's floats;
    ``bits_up`` the encoded size. With :class:`~fedcomp.compressors.Identity` and
    ``ef21=False`` the run is the uncompressed one bit for bit.

    EF21 (Richtárik, Sokolov, Fatkhullin, "EF21: A New, Simpler, Theoretically Better, and
    Practically Faster Error Feedback", NeurIPS 2021, Algorithm 1) applied to uploads:
    ``g_i⁰ = 0``, so a client's first message compresses its whole upload. Deviation: the
    paper's server keeps only ``g = (1/n) Σ g_i``; here it keeps every ``g_i`` (an
    ``n × d`` state), so the wrapped server update gets per-client rows whatever it does
    with them (weighted averages over sampled clients, FedADMM's per-client memory). For a
    server that averages, the two are the same.

    Examples
    --------
    >>> from fedcomp.algorithms import fedavg
    >>> from fedcomp.compressors import TopK
    >>> from fedcomp.toy import tiny_run
    >>> alg = compressed(fedavg(client_lr=0.1, local_steps=2), TopK(k=1), ef21=True)
    >>> alg.hyperparameters["compressor"], alg.hyperparameters["ef21"]
    ({'name': 'top_k', 'k': 1, 'fraction': None}, True)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; uncompressed 0.245, min 0.241
    0.246
    """
    if not isinstance(algorithm, FederatedAlgorithm):
        raise TypeError(f"compressed() wraps a star-topology FederatedAlgorithm (got "
                        f"{type(algorithm).__name__}); decentralized algorithms gossip "
                        "without uploads")
    if not isinstance(compressor, Compressor):
        raise TypeError(f"compressor must be a fedcomp.compressors.Compressor (got "
                        f"{compressor!r}); build one with make_compressor(name, ...)")
    check_flag(f"compressed({algorithm.name})", ef21=ef21)
    owner = algorithm.name
    client_types: dict[str, Any] = {}  # the wrapped algorithm's client-state class

    def init(x0: Array, n_clients: int) -> tuple[Any, Any]:
        server, clients = algorithm.init(x0, n_clients)
        if not ef21:
            return server, clients
        client_types["inner"] = type(clients)
        zeros = stacked_zeros(x0, n_clients)
        with_g = _tuple_type(f"{type(clients).__name__}EF21", (*clients._fields, EF21_FIELD))
        return EF21ServerState(server, zeros), with_g(*clients, zeros)

    def broadcast(state: Any) -> Any:
        return algorithm.broadcast(state.inner if ef21 else state)

    def client_update(message: Any, states: Any, ctx: ClientContext) -> tuple[Any, Any]:
        g = None
        if ef21:
            g = getattr(states, EF21_FIELD)
            states = client_types["inner"](*states[:-1])
        upload, states = algorithm.client_update(message, states, ctx)
        seed, rows = ctx.oracle.seed, len(ctx.client_ids)
        floating = [name for name, value in zip(upload._fields, upload, strict=True)
                    if _is_float(value)]
        if g is not None and (len(floating) != 1
                              or getattr(upload, floating[0]).shape != g.shape):
            raise ValueError(
                f"compressed({owner}, ef21=True): EF21 keeps one estimate of the model's "
                f"shape per client, but {owner} uploads the floating fields {floating} of "
                f"shapes {[tuple(getattr(upload, f).shape[1:]) for f in floating]}; use "
                "ef21=false with an unbiased compressor, or an algorithm with one upload field")
        fields, bits = [], np.zeros(rows, dtype=np.int64)
        for purpose, (name, value) in enumerate(zip(upload._fields, upload, strict=True)):
            if name not in floating:  # counts, flags: sent as they are
                bits += int(np.prod(value.shape[1:])) * bit_width(value)
            elif g is not None:
                value, g, sent = ef21_step(compressor, value, g, seed, ctx.round,
                                           ctx.client_ids, purpose)
                bits += sent
            else:
                value, sent = compressor.compress(value, seed, ctx.round, ctx.client_ids,
                                                  purpose)
                bits += sent
            fields.append(value)
        wire = _tuple_type(type(upload).__name__, (*upload._fields, WIRE_BITS))(
            *fields, asarray_like(bits, upload[0]))  # the namespace the runner concatenates
        if g is not None:
            states = _tuple_type(f"{type(states).__name__}EF21",
                                 (*states._fields, EF21_FIELD))(*states, g)
        return wire, states

    def server_update(state: Any, uploads: Any, ctx: ServerContext) -> Any:
        fields = {name: value for name, value in zip(uploads._fields, uploads, strict=True)
                  if name != WIRE_BITS}
        if not ef21:
            return algorithm.server_update(state, _tuple_type("Upload", tuple(fields))(
                *fields.values()), ctx)
        (name,) = [key for key, value in fields.items() if _is_float(value)]
        rows = take_rows(state.ef21, ctx.client_ids) + fields[name]  # g_i + c_i
        fields[name] = rows
        inner = algorithm.server_update(state.inner, _tuple_type("Upload", tuple(fields))(
            *fields.values()), ctx)
        return EF21ServerState(inner, replace_rows(state.ef21, ctx.client_ids, rows))

    def output(state: Any) -> Array:
        return algorithm.output(state.inner if ef21 else state)

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        # a k larger than the model fails here, before round 0, not in round 1's upload
        compressor.check_size(math.prod(setup.param_shape))
        prepared = algorithm.prepare(setup)
        return None if prepared is None else compressed(prepared, compressor, ef21)

    params = {"compressor": {"name": compressor.name, **dataclasses.asdict(compressor)},
              "ef21": ef21}
    return transformed(
        algorithm, "compress", params,
        init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=output, prepare=prepare,
        hyperparameters={**algorithm.hyperparameters, **copy.deepcopy(params)})


def compress(algorithm: FederatedAlgorithm, compressor: dict[str, Any], ef21: bool = False
             ) -> FederatedAlgorithm:
    """:func:`compressed` with the compressor given as its table (``{"name": ..., **its
    parameters}``, what a recipe records): the ``compress`` transform's rebuild."""
    if not isinstance(compressor, dict) or "name" not in compressor:
        raise ValueError(f"compress: compressor must be a table {{'name': ..., **parameters}} "
                         f"(got {compressor!r})")
    params = {k: v for k, v in compressor.items() if k != "name"}
    return compressed(algorithm, make_compressor(compressor["name"], **params), ef21=ef21)
