"""Metrics of personal models, client by client (Ditto's ``v_i`` beside the global ``w``).

A personalised run ends with one model per client (:func:`fedcomp.algorithms.ditto`:
``result.client_states.personal``) and the global model. What a user asks of them is a
distribution over clients: does each client's own model fit its own data better than the
global one, how sparse is it, and how much of its support does it share with the global
model. :func:`personal_metrics` returns one row per client; ``pandas.DataFrame(rows)``
then gives the distribution (``.describe()``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import Array, namespace, to_numpy
from ._functions import predicted_labels, support_scores


def support_overlap(a: Any, b: Any, tol: float = 0.0) -> float:
    """Jaccard overlap of the supports ``{j : |x_j| > tol}`` of two models (1 when both are
    empty).

    Examples
    --------
    >>> support_overlap(np.array([1.0, 0.0, 2.0]), np.array([3.0, 4.0, 0.0]))
    0.3333333333333333
    """
    left = np.abs(np.asarray(to_numpy(a))).ravel() > tol
    right = np.abs(np.asarray(to_numpy(b))).ravel() > tol
    union = int(np.sum(left | right))
    return 1.0 if union == 0 else float(np.sum(left & right)) / union


def personal_metrics(problem: Any, personal: Array, global_model: Array,
                     truths: Any = None) -> list[dict[str, float]]:
    """One row per client: its personal model against the global one, on its own data.

    Parameters
    ----------
    problem : Problem
        The run's problem (its clients' data, loss and regularizer).
    personal : array, shape (n_clients, *param_shape)
        Every client's personal model.
    global_model : array, shape param_shape
    truths : array, shape (n_clients, *param_shape), optional
        Each client's true model, where the data have one: adds the support F1 of both.

    Returns
    -------
    list of dict
        ``client``; ``personal_objective`` and ``global_objective``, ``f_i + g`` of each
        model on client i's own samples; ``personal_accuracy`` and ``global_accuracy`` on
        them (NaN for a loss that does not classify); ``personal_nnz`` and
        ``global_nnz``; ``support_overlap`` (Jaccard, :func:`support_overlap`); with
        ``truths``, ``personal_support_f1`` and ``global_support_f1``.

    Examples
    --------
    >>> from fedcomp import toy
    >>> problem = toy.tiny_problem()
    >>> w = np.zeros(problem.param_shape)
    >>> rows = personal_metrics(problem, np.stack([w] * problem.n_clients), w)
    >>> len(rows), rows[0]["personal_objective"] == rows[0]["global_objective"]
    (3, True)
    """
    data, loss, reg = problem.data, problem.loss, problem.regularizer
    n = problem.n_clients
    xp = namespace(personal)
    stacked_global = xp.broadcast_to(global_model[None, ...], tuple(personal.shape))
    batch = data.full_batch()
    own = to_numpy(loss.value(personal, batch)) + to_numpy(reg.value(personal))
    shared = to_numpy(loss.value(stacked_global, batch)) + to_numpy(reg.value(stacked_global))
    host_personal = np.asarray(to_numpy(personal))
    host_global = np.asarray(to_numpy(global_model))
    rows = []
    for i in range(n):
        row = {"client": float(i), "personal_objective": float(own[i]),
               "global_objective": float(shared[i]),
               "personal_accuracy": _accuracy(problem, personal[i], i),
               "global_accuracy": _accuracy(problem, global_model, i),
               "personal_nnz": float(np.count_nonzero(host_personal[i])),
               "global_nnz": float(np.count_nonzero(host_global)),
               "support_overlap": support_overlap(host_personal[i], host_global)}
        if truths is not None:
            truth = np.asarray(truths)[i]
            row["personal_support_f1"] = support_scores(host_personal[i], truth)["support_f1"]
            row["global_support_f1"] = support_scores(host_global, truth)["support_f1"]
        rows.append(row)
    return rows


def _accuracy(problem: Any, x: Array, client: int) -> float:
    """Model ``x``'s accuracy on client ``client``'s own samples (NaN if it does not classify)."""
    features, targets = problem.data.client_arrays(client)
    predicted = predicted_labels(problem, x, features)
    return float("nan") if predicted is None else float(np.mean(predicted == targets))


__all__ = ["personal_metrics", "support_overlap"]
