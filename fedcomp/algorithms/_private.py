"""Client-level differential privacy as a wrapper over the five-function interface.

A wrapper beside compression (``_compressed.py``) and Ditto (``ditto.py``): it returns
another ``FederatedAlgorithm``. :mod:`fedcomp.privacy` adds the accounting (what the
rounds spend, the noise of a target ε) and re-exports it.

DP-FedAvg of McMahan, Ramage, Talwar and Zhang, "Learning Differentially Private Recurrent
Language Models", ICLR 2018 (arXiv:1710.06963), Algorithm 1: each participant's update is
clipped to L2 norm ``C`` and Gaussian noise of standard deviation ``σC`` is added to the
sum of the clipped updates before the server uses it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._array import Array, asarray_like, namespace
from .._random import SERVER_ID, STREAM_PRIVACY, client_keys, normal
from ._base import (
    WIRE_BITS,
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    check_flag,
)
from ._catalog import REGISTRY
from ._recipe import transformed

#: The algorithms whose uploads are a model or an update, by name: each upload field and
#: the broadcast field it is the new value of (``None``: the field is already a change) —
#: their entries' ``private_uploads``. Clipping acts on the change ``upload − broadcast``.
PRIVATE_UPLOADS: Mapping[str, Mapping[str, str | None]] = REGISTRY.facts("private_uploads")

#: Registered algorithms the wrapper refuses, and why (their entries' ``not_private``).
REFUSED: Mapping[str, str] = REGISTRY.facts("not_private")


def _check_clip(clip: Any) -> float:
    ok = isinstance(clip, int | float) and not isinstance(clip, bool | np.generic) and clip > 0
    if not ok:
        raise ValueError(f"private: clip must be a positive number, the L2 norm bound C of "
                         f"one client's upload (got clip={clip!r}); inf turns clipping off")
    return float(clip)


def _check_noise(noise_multiplier: Any, clip: float) -> float:
    ok = (isinstance(noise_multiplier, int | float)
          and not isinstance(noise_multiplier, bool | np.generic)
          and math.isfinite(noise_multiplier) and noise_multiplier >= 0)
    if not ok:
        raise ValueError(f"private: noise_multiplier must be a finite number >= 0, the noise's "
                         f"standard deviation over clip (got noise_multiplier="
                         f"{noise_multiplier!r})")
    if noise_multiplier > 0 and math.isinf(clip):
        raise ValueError(f"private: noise_multiplier={noise_multiplier!r} with clip=inf: noise "
                         "of standard deviation sigma*C is infinite; give a finite clip")
    return float(noise_multiplier)


def private_fields(algorithm: FederatedAlgorithm,
                   fields: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """The upload fields of ``algorithm`` to clip, each with its broadcast field or ``None``.

    Raises a ``ValueError`` for an algorithm :data:`REFUSED` names (saying why) and for one
    neither :data:`PRIVATE_UPLOADS` nor ``fields`` declares.
    """
    if algorithm.execution != "rounds":
        raise ValueError(f"private: {algorithm.name} runs on the {algorithm.execution!r} engine; "
                         "client-level DP here needs synchronous rounds of sampled clients")
    if algorithm.warmup:
        raise ValueError(f"private: {algorithm.name} has a warm-up round with every client, "
                         "which the accountant would not count")
    if fields is not None:
        return dict(fields)
    if algorithm.name in REFUSED:
        raise ValueError(f"private: {algorithm.name} cannot be made private this way: "
                         f"{REFUSED[algorithm.name]}")
    if algorithm.name not in PRIVATE_UPLOADS:
        raise ValueError(f"private: {algorithm.name!r} declares no private upload fields; pass "
                         "fields={upload_field: broadcast_field or None} (None: the field is "
                         f"already a change); known: {sorted(PRIVATE_UPLOADS)}")
    return dict(PRIVATE_UPLOADS[algorithm.name])


def _changes(upload: Any, message: Any, fields: dict[str, str | None]) -> list[Array]:
    """Each private field's change: ``upload.f − message.m``, or ``upload.f`` itself."""
    return [getattr(upload, f) if m is None else getattr(upload, f) - getattr(message, m)
            for f, m in fields.items()]


def clip_uploads(upload: Any, message: Any, fields: dict[str, str | None], clip: float) -> Any:
    """Each client's upload with its change scaled to L2 norm at most ``clip``.

    The norm is taken over every private field of one client together (its whole release
    in the round): ``s_i = min(1, C / ‖(Δ_i^f)_f‖₂)``, ``Δ_i^f ← s_i Δ_i^f``. A field that
    is a model becomes ``u − (1 − s_i)(u − m)``: exactly ``u`` when ``s_i = 1`` (``C = inf``
    leaves every bit unchanged).
    """
    changes = _changes(upload, message, fields)
    xp = namespace(changes[0])
    squares = sum(xp.sum(d * d, axis=tuple(range(1, d.ndim))) for d in changes)
    norm = xp.sqrt(squares)
    tiny = float(np.finfo(np.float64).tiny)
    scale = xp.where(norm > clip, clip / xp.maximum(norm, tiny), xp.ones_like(norm))
    new = {}
    for (f, m), d in zip(fields.items(), changes, strict=True):
        s = xp.reshape(scale, (-1,) + (1,) * (d.ndim - 1))
        new[f] = s * d if m is None else getattr(upload, f) - (1 - s) * d
    return upload._replace(**new)


def _size(upload: Any, fields: dict[str, str | None]) -> int:
    """Floats of one client's private fields."""
    return sum(math.prod(getattr(upload, f).shape[1:]) for f in fields)


def _add(upload: Any, fields: dict[str, str | None], draws: np.ndarray) -> Any:
    """``upload`` plus ``draws`` (``(B, size)``, or ``(1, size)``: the same on every row),
    split over the private fields in their order."""
    new, start = {}, 0
    for f in fields:
        value = getattr(upload, f)
        size = math.prod(value.shape[1:])
        block = draws[:, start:start + size].reshape(draws.shape[0], *value.shape[1:])
        new[f] = value + asarray_like(block, value)
        start += size
    return upload._replace(**new)


def private(algorithm: FederatedAlgorithm, clip: float = 1.0, noise_multiplier: float = 0.0,
            local: bool = False, fields: Mapping[str, str | None] | None = None
            ) -> FederatedAlgorithm:
    """``algorithm`` with client-level differential privacy: clipped uploads, Gaussian noise.

    Parameters
    ----------
    algorithm : FederatedAlgorithm
        An algorithm whose upload is a model or an update (:data:`PRIVATE_UPLOADS`: fedavg,
        fedmid, fedprox, fedda, c_fedda, mc_fedda, fast_fedda), or any other with ``fields``.
    clip : float, default 1.0
        ``C``: the L2 bound of one client's upload change (all its private fields together);
        ``inf`` leaves the uploads unclipped.
    noise_multiplier : float, default 0.0
        ``σ``: the noise's standard deviation is ``σC``.
    local : bool, default False
        ``False`` (central DP): the server adds one draw ``N(0, (σC)² I)`` to the *sum* of
        the clipped uploads. ``True`` (local DP): every client adds its own ``N(0, (σC)² I)``
        to its clipped upload before sending it.
    fields : mapping, optional
        ``{upload_field: broadcast_field or None}`` for an algorithm the table does not
        know: each upload field and the broadcast field it is the new value of (``None``:
        the field is already a change). Every upload field must be named: all are released.

    Returns
    -------
    FederatedAlgorithm
        Named ``dp_<name>``, with the same states and messages; its hyperparameters are the
        algorithm's plus ``clip``, ``noise_multiplier`` and ``local``.

    Raises
    ------
    ValueError
        For a bad ``clip`` / ``noise_multiplier``, noise with ``clip = inf``, and for the
        algorithms where privacy this way is not meaningful (:data:`REFUSED`): those whose
        uploads carry control variates or duals whose sum over the clients must stay exact
        (scaffold, scaffnew, fedcanon, fedcanon2, fedda_gt, refedda_gt,
        multistep_refedda_gt, za1, fedpd), those whose server keeps a running sum of every
        client's latest local model (feddr, fedsplit, fedadmm) and the asynchronous
        async_feddr.

    Notes
    -----
    Per round ``r`` with participants ``S`` (``|S| = m``) and broadcast ``x̄``, client ``i``
    computes its upload ``u_i`` as the algorithm does, then its change
    ``Δ_i = u_i − x̄`` (or ``u_i`` when the upload is already a change) is clipped,

    .. math:: \\tilde Δ_i = Δ_i \\min\\bigl(1, C / \\|Δ_i\\|_2\\bigr),

    and the server's step uses the noisy **uniform** average of the participants

    .. math:: \\bar Δ = \\frac{1}{m}\\Bigl(\\sum_{i∈S} \\tilde Δ_i + ξ\\Bigr),
              \\qquad ξ \\sim N(0, σ^2 C^2 I)

    in place of the algorithm's ``Σ π̃_i Δ_i``: uniform weights over the participants, i.e.
    McMahan et al.'s fixed-denominator estimator ``Σ_{i∈S} w_i Δ_i / (qW)`` with
    ``w_i = 1`` and a fixed number ``m = qn`` of participants (the simulator's sampling).
    Data-size weights would make one client's influence, and so the noise needed,
    depend on its sample count. The sum's sensitivity to one client is ``C`` (added or
    removed) or ``2C`` (replaced): :mod:`fedcomp.privacy`'s accountant turns ``σ``, the
    sampling rate ``q = m/n`` and the rounds into ``ε(δ)``. The inner server receives the
    clipped uploads with the noise's share ``ξ/m`` added to each row and uniform
    ``ctx.weights``: its own average is then ``\\bar Δ``.

    With ``local=True`` each client adds ``ξ_i ~ N(0, σ²C² I)`` itself; the server sees
    only noisy uploads (no trust in the server), at ``m`` times the central noise's
    variance on the average.

    The noise is counter-based: the server's draw is keyed by ``(seed, round)``, a client's
    by ``(seed, round, client)`` (:data:`fedcomp._random.STREAM_PRIVACY`), so the run does
    not depend on the client block size. ``σ = 0`` with ``C = inf`` runs the algorithm
    bit for bit where its weights are uniform (clients of equal weight).

    References
    ----------
    H. B. McMahan, D. Ramage, K. Talwar, L. Zhang, "Learning Differentially Private
    Recurrent Language Models", ICLR 2018, arXiv:1710.06963 (Algorithm 1, DP-FedAvg).

    Examples
    --------
    >>> from fedcomp.algorithms import fedavg, scaffold
    >>> private(fedavg(client_lr=0.1), clip=1.0, noise_multiplier=1.1).name
    'dp_fedavg'
    >>> private(scaffold())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: private: scaffold cannot be made private this way: its upload carries ...
    """
    clip = _check_clip(clip)
    sigma = _check_noise(noise_multiplier, clip)
    check_flag("private", local=local)
    private_ = private_fields(algorithm, fields)
    std = sigma * clip

    def client_update(msg: Any, states: Any, ctx: ClientContext) -> tuple[Any, Any]:
        upload, states = algorithm.client_update(msg, states, ctx)
        # a compressed upload also carries its encoded size, which is not the client's data
        fields_sent = set(upload._fields) - {WIRE_BITS}
        if set(private_) != fields_sent:
            raise ValueError(f"private: fields {sorted(private_)} must be exactly "
                             f"{algorithm.name}'s upload fields {list(upload._fields)}")
        upload = clip_uploads(upload, msg, private_, clip)
        if local and std > 0:
            # counter-based: client i's noise in round r is the same in any block
            keys = client_keys(ctx.oracle.seed, STREAM_PRIVACY, ctx.round, ctx.client_ids)
            upload = _add(upload, private_, std * normal(keys, 0, _size(upload, private_)))
        return upload, states

    def server_update(state: Any, uploads: Any, ctx: ServerContext) -> Any:
        first = getattr(uploads, next(iter(private_)))
        m = first.shape[0]
        if not local and std > 0:
            # one draw keyed by (seed, round), ξ/m on every row: the rows' uniform
            # average is then mean(Δ̃_i) + ξ/m
            key = client_keys(ctx.seed, STREAM_PRIVACY, ctx.round,
                              np.array([SERVER_ID], dtype=np.uint64))
            uploads = _add(uploads, private_, (std / m) * normal(key, 0, _size(uploads, private_)))
        weights = asarray_like(np.full(m, 1.0 / m), ctx.weights)
        return algorithm.server_update(state, uploads, ctx._replace(weights=weights))

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        ready = algorithm.prepare(setup)
        return None if ready is None else private(ready, clip, sigma, local, fields)

    params = {"clip": clip, "noise_multiplier": sigma, "local": local}
    return transformed(
        algorithm, "dp", {**params, **({} if fields is None else {"fields": dict(fields)})},
        name=dp_name(algorithm.name), client_update=client_update,
        server_update=server_update, prepare=prepare,
        hyperparameters={**algorithm.hyperparameters, **params})


def dp_name(name: str) -> str:
    """The display name of ``name`` made private (``dp_fedavg``)."""
    return f"dp_{name}"

