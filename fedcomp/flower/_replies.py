"""What a SuperNode sends back, checked before the server uses any of it.

A node's reply is data from another process, maybe another machine and another person's
code: a user's ClientApp may return a reshaped, integer or diverged upload, and a
different fedcomp version may send other fields. The server never aggregates such a reply:
:func:`check_upload`, :func:`check_counts` and :func:`check_report` turn each of them into
one :class:`BadReply` naming the field, what was wrong and the fix, which the server turns
into an error naming the node, the client and the round (the run stops; the server state
is the last round's, untouched by the bad upload).

:func:`checked_uploads` checks one round's replies together, before any is used.

What an upload must be (every fedcomp algorithm's uploads are so):

* the same fields as the other participants' (an algorithm reads them by name);
* per client, each field the model's shape (a difference, a gradient, a model) or one
  scalar (compressed size in bits, a Moreau envelope's value), its leading axis the
  reply's clients;
* floating, except the integer :data:`~fedcomp.algorithms._base.WIRE_BITS` sizes;
* finite everywhere (a diverged client stops the run here, naming itself).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from .._array import to_numpy
from ..algorithms._base import WIRE_BITS
from ..oracle import Counters
from ._client import COUNTS_KEY, UPLOAD_KEY
from ._codec import _tuple_type, decode

#: the fix of an upload that is not what client_train returns
RETURN_CLIENT_TRAIN = ("its train handler must return fedcomp.flower.client_train(msg, context, "
                       "features, targets) unchanged, with the same fedcomp version as the server")


class BadReply(ValueError):
    """A node's reply that the server refuses; the message names the field and the fix.

    ``index`` is the position of the reply among those checked together
    (:func:`checked_uploads`), for the caller to name its node.
    """

    index: int = -1


@contextmanager
def _reply(index: int) -> Iterator[None]:
    try:
        yield
    except BadReply as exc:
        exc.index = index
        raise


def checked_uploads(contents: Sequence[Any], rows: Sequence[int], like: Any,
                    model_shape: tuple[int, ...]) -> tuple[list[Any], list[dict[str, int]]]:
    """The uploads and counts of one round's replies, every one checked before any is used.

    Parameters
    ----------
    contents : sequence of RecordDict
        The replies' contents (an ``upload`` ArrayRecord and a ``counts`` MetricRecord each).
    rows : sequence of int
        The clients each reply is for.
    like : array
        Decoded floating fields take its dtype and device.
    model_shape : tuple of int
        The model's shape.

    Returns
    -------
    uploads : list of NamedTuple
        The decoded uploads, their fields in one order (:func:`check_upload`).
    counts : list of dict
        Their counts (:func:`check_counts`).

    Raises
    ------
    BadReply
        With ``index``, the position of the first reply refused.
    """
    decoded, counts = [], []
    for i, content in enumerate(contents):
        with _reply(i):
            for key, records in ((UPLOAD_KEY, content.array_records),
                                 (COUNTS_KEY, content.metric_records)):
                if key not in records:
                    raise BadReply(f"the reply has no {key!r} record; {RETURN_CLIENT_TRAIN}")
            decoded.append(_decoded(content.array_records[UPLOAD_KEY], like))
            counts.append(check_counts(dict(content.metric_records[COUNTS_KEY])))
    fields = common_fields(decoded)
    uploads = []
    for i, (upload, n) in enumerate(zip(decoded, rows, strict=True)):
        with _reply(i):
            uploads.append(check_upload(upload, n, model_shape, fields))
    return uploads, counts


def _decoded(record: Any, like: Any) -> Any:
    """An upload record decoded; a compact form that does not expand is a :class:`BadReply`."""
    try:
        return decode(record, like, name="Upload")
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise BadReply(f"the upload record does not decode ({type(exc).__name__}: {exc}); "
                       f"{RETURN_CLIENT_TRAIN}") from exc


def common_fields(uploads: Sequence[Any]) -> tuple[str, ...]:
    """The upload fields most participants sent (the first reply's on a tie)."""
    tally: dict[tuple[str, ...], int] = {}
    for upload in uploads:
        key = tuple(sorted(upload._fields))
        tally[key] = tally.get(key, 0) + 1
    best = max(tally.values())
    return next(tuple(u._fields) for u in uploads if tally[tuple(sorted(u._fields))] == best)


def check_upload(upload: Any, rows: int, model_shape: tuple[int, ...],
                 fields: Sequence[str]) -> Any:
    """``upload`` (a decoded NamedTuple) with its fields in the order of ``fields``, checked.

    Parameters
    ----------
    upload : NamedTuple of arrays
        One reply's upload, as :func:`fedcomp.flower._codec.decode` gave it.
    rows : int
        The clients the reply is for (its fields' leading axis).
    model_shape : tuple of int
        The model's shape (``algorithm.output(server_state).shape``).
    fields : sequence of str
        The fields every participant sends (:func:`common_fields`).

    Raises
    ------
    BadReply
        Naming the first field that is missing, of the wrong shape or dtype, or not finite.

    Examples
    --------
    >>> from collections import namedtuple
    >>> Upload = namedtuple("Upload", "delta")
    >>> check_upload(Upload(np.zeros((1, 3))), 1, (3,), ["delta"]).delta.shape
    (1, 3)
    >>> try:
    ...     check_upload(Upload(np.zeros((1, 2))), 1, (3,), ["delta"])
    ... except BadReply as exc:
    ...     print(str(exc)[:58])
    upload field 'delta' has shape (1, 2) where (1, 3) (the mo
    """
    if sorted(upload._fields) != sorted(fields):
        raise BadReply(f"upload fields {list(upload._fields)} differ from the other "
                       f"participants' {list(fields)}; {RETURN_CLIENT_TRAIN}")
    values = dict(zip(upload._fields, upload, strict=True))
    for name in fields:
        _check_field(name, to_numpy(values[name]), rows, model_shape)
    if tuple(upload._fields) == tuple(fields):
        return upload
    # stacking goes by position: every reply's fields in one order
    return _tuple_type(type(upload).__name__, tuple(fields))(*(values[n] for n in fields))


def _check_field(name: str, value: np.ndarray, rows: int, model_shape: tuple[int, ...]) -> None:
    full, scalar = (rows, *model_shape), (rows,)
    if value.shape not in (full, scalar):
        raise BadReply(f"upload field {name!r} has shape {value.shape} where {full} (the "
                       f"model's shape {model_shape} for each of {rows} client"
                       f"{'' if rows == 1 else 's'}) or {scalar} was expected; "
                       f"{RETURN_CLIENT_TRAIN}")
    integer = name == WIRE_BITS and np.issubdtype(value.dtype, np.integer)
    if not (np.issubdtype(value.dtype, np.floating) or integer):
        raise BadReply(f"upload field {name!r} has dtype {value.dtype}; uploads are floating "
                       f"(integer only for {WIRE_BITS!r}): {RETURN_CLIENT_TRAIN}")
    if integer and value.size and value.min() < 0:
        raise BadReply(f"upload field {name!r} holds a negative size in bits "
                       f"({int(value.min())}); {RETURN_CLIENT_TRAIN}")
    if not integer and not np.isfinite(value).all():
        bad = int(value.size - np.count_nonzero(np.isfinite(value)))
        raise BadReply(f"upload field {name!r} holds {bad} non-finite value"
                       f"{'' if bad == 1 else 's'} (NaN or inf): the client's local training "
                       "diverged or its data hold NaN/inf; lower the step size (client_lr) or "
                       "clean the node's data")


def check_counts(counts: Mapping[str, Any]) -> dict[str, int]:
    """A reply's gradient/prox counts: known :class:`~fedcomp.oracle.Counters` fields,
    each a non-negative integer.

    Examples
    --------
    >>> check_counts({"grad_evals": 3})
    {'grad_evals': 3}
    >>> try:
    ...     check_counts({"grad_evals": -3})
    ... except BadReply as exc:
    ...     print(exc)
    count 'grad_evals' is -3; counts are integers >= 0 (what client_train reports)
    """
    known = Counters().as_dict()
    out = {}
    for key, value in counts.items():
        if key not in known:
            raise BadReply(f"count {key!r} is not one of fedcomp's counters {sorted(known)}; "
                           f"{RETURN_CLIENT_TRAIN}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value == int(value) and value >= 0):
            raise BadReply(f"count {key!r} is {value!r}; counts are integers >= 0 (what "
                           "client_train reports)")
        out[key] = int(value)
    return out


def check_report(info: Mapping[str, Any], n_clients: int) -> tuple[int, float, float]:
    """A node's discovery report: its client id, sample total and smoothness ``L_i``.

    The client id is an integer in ``0..n_clients-1``, the sample total (the count, or the
    sum of the sample weights) positive and finite, ``L_i`` finite and ``>= 0``.

    Examples
    --------
    >>> check_report({"client-id": 2, "samples": 30.0, "smoothness": 0.25}, 4)
    (2, 30.0, 0.25)
    """
    missing = [k for k in ("client-id", "samples", "smoothness") if k not in info]
    if missing:
        raise BadReply(f"the discovery reply has no {missing}; {RETURN_CLIENT_TRAIN}")
    client, samples, smoothness = info["client-id"], info["samples"], info["smoothness"]
    if isinstance(client, bool) or not isinstance(client, int | float) or client != int(client):
        raise BadReply(f"client-id is {client!r}, not an integer; give each node an integer "
                       "partition-id (or client_id=)")
    if not 0 <= client < n_clients:
        raise BadReply(f"client-id {int(client)} is outside 0..{n_clients - 1} (num_clients="
                       f"{n_clients}); give each node a partition-id in that range")
    for key, value, least in (("samples", samples, "> 0"), ("smoothness", smoothness, ">= 0")):
        ok = (not isinstance(value, bool) and isinstance(value, int | float)
              and math.isfinite(value) and (value > 0 if key == "samples" else value >= 0))
        if not ok:
            raise BadReply(f"{key} is {value!r}; it must be finite and {least} (the node's "
                           "sample total, or the sum of its sample weights, and its L_i); "
                           "check the node's arrays and sample_weight")
    return int(client), float(samples), float(smoothness)


def check_evaluation(metrics: Mapping[str, Any]) -> tuple[float, float]:
    """A node's evaluation: ``f_i`` at the model (finite) and its accuracy (NaN for a
    loss that does not classify, else in ``[0, 1]``).

    Examples
    --------
    >>> check_evaluation({"loss": 0.5, "accuracy": 0.75, "num-examples": 20})
    (0.5, 0.75)
    """
    loss, accuracy = metrics.get("loss"), metrics.get("accuracy")
    if isinstance(loss, bool) or not isinstance(loss, int | float) or not math.isfinite(loss):
        raise BadReply(f"the evaluation's loss is {loss!r}, not a finite number; its evaluate "
                       "handler must return fedcomp.flower.client_evaluate(msg, context, "
                       "features, targets)")
    if isinstance(accuracy, bool) or not isinstance(accuracy, int | float) or not (
            math.isnan(accuracy) or 0.0 <= accuracy <= 1.0):
        raise BadReply(f"the evaluation's accuracy is {accuracy!r}, not in [0, 1] (or NaN for "
                       "a loss that does not classify); its evaluate handler must return "
                       "fedcomp.flower.client_evaluate(msg, context, features, targets)")
    return float(loss), float(accuracy)


__all__ = ["BadReply", "check_counts", "check_evaluation", "check_report", "check_upload",
           "checked_uploads", "common_fields"]
