"""Flower Datasets' partitioners over fedcomp's data, without a download.

Flower users know the partitioners of ``flwr-datasets`` (``DirichletPartitioner``,
``PathologicalPartitioner``, ``ShardPartitioner``, … sixteen in 0.6). They partition a
Hugging Face ``datasets.Dataset``; :func:`flwr_partition` builds one in memory from the
samples' labels (and an index column), hands it to the partitioner and reads back, for
each partition, which samples it holds. A Flower user's partition therefore gives the same
clients in both tools: the same partitioner with the same seed on the same labels.

In a configuration: ``partition = {name = "flwr", partitioner = "DirichletPartitioner",
alpha = 0.5}``. ``num_partitions`` is the data set's ``n_clients``, ``seed`` its seed and
``partition_by`` the label column, where the partitioner takes them; every other key goes
to the partitioner as given. Nothing is changed silently: a ``num_partitions`` other than
``n_clients``, a ``partition_by`` other than the label, or a partitioner making another
number of partitions (``NaturalIdPartitioner``: one per distinct label) is refused.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from .._extras import require

#: The column of the in-memory table holding each sample's label, and its index.
LABEL, INDEX = "label", "fedcomp_index"


def flwr_partition(partitioner: Any, labels: Any) -> list[np.ndarray]:
    """The sample indices of every partition of a ``flwr_datasets`` partitioner.

    Parameters
    ----------
    partitioner : flwr_datasets.partitioner.Partitioner
        Constructed by the caller (its ``partition_by``, if it has one, is ``"label"``),
        not yet given a data set.
    labels : array, shape (n_samples,)
        Each sample's label (class id); the table's ``"label"`` column.

    Returns
    -------
    list of numpy int arrays
        Partition ``i``'s sample indices, sorted, for ``i`` in ``range(num_partitions)``.
    """
    datasets = require("datasets", "fedcomp.data.flwr_partition (flwr-datasets)")
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"flwr_partition: labels must be a 1-D array of class ids (got shape "
                         f"{labels.shape})")
    table = datasets.Dataset.from_dict({LABEL: labels.tolist(),
                                        INDEX: np.arange(len(labels)).tolist()})
    partitioner.dataset = table
    return [np.sort(np.asarray(partitioner.load_partition(i)[INDEX], dtype=np.int64))
            for i in range(partitioner.num_partitions)]


def partition_flwr(labels: Any, n_clients: int, partitioner: str, seed: int = 0,
                   **options: Any) -> list[np.ndarray]:
    """Partition with the ``flwr_datasets`` partitioner named ``partitioner``.

    Parameters
    ----------
    labels : array, shape (n_samples,)
    n_clients : int
        The partitioner's ``num_partitions``.
    partitioner : str
        A class of ``flwr_datasets.partitioner``, e.g. ``"DirichletPartitioner"``.
    seed : int, default 0
        The partitioner's ``seed``, where it takes one.
    **options
        The partitioner's other arguments (``alpha = 0.5``,
        ``num_classes_per_partition = 2``). ``partition_by`` defaults to the label.

    Returns
    -------
    list of numpy int arrays

    Raises
    ------
    ValueError
        For an unknown partitioner (naming the known ones), a ``num_partitions`` other
        than ``n_clients``, a ``partition_by`` other than the label, a number of partitions
        other than ``n_clients``, or a partition with no sample (fedcomp's clients are
        never empty).
    """
    module = require("flwr_datasets", "partition = {name = 'flwr', ...}").partitioner
    known = sorted(n for n in dir(module) if n.endswith("Partitioner") and n != "Partitioner")
    if partitioner not in known:
        raise ValueError(f"partition 'flwr': unknown partitioner {partitioner!r}; "
                         f"flwr_datasets.partitioner has {known}")
    cls = getattr(module, partitioner)
    accepted = inspect.signature(cls).parameters
    _check_options(partitioner, options, n_clients)
    given = dict(options)
    for key, value in (("num_partitions", n_clients), ("seed", seed),
                       ("partition_by", LABEL)):
        if key in accepted:
            given.setdefault(key, value)
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise ValueError(f"partition 'flwr': {partitioner} takes no {unknown}; it takes "
                         f"{sorted(accepted)}")
    parts = flwr_partition(cls(**given), labels)
    if len(parts) != n_clients:  # a partitioner that counts its own partitions
        raise ValueError(_count_mismatch(partitioner, len(parts), n_clients))
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        raise ValueError(f"partition 'flwr': {partitioner} left client(s) {empty} without a "
                         "sample; use fewer clients or the partitioner's minimum size option")
    return parts


def _check_options(partitioner: str, options: dict[str, Any], n_clients: int) -> None:
    """Refuse the options a partition would silently change: ``num_partitions`` other
    than the data set's ``n_clients``, a ``partition_by`` column the table does not hold."""
    asked = options.get("num_partitions", n_clients)
    if asked != n_clients:
        raise ValueError(f"partition 'flwr': num_partitions={asked!r} but the data set's "
                         f"n_clients={n_clients}; num_partitions is n_clients: drop it, or set "
                         f"n_clients = {asked!r}")
    column = options.get("partition_by", LABEL)
    if column != LABEL:
        raise ValueError(f"partition 'flwr': {partitioner} partition_by={column!r}, but the "
                         f"table fedcomp hands it holds only the samples' labels "
                         f"({LABEL!r}); drop partition_by (or, for whole writers, use "
                         "partition = 'writers' on a data set with writer ids)")


def _count_mismatch(partitioner: str, got: int, n_clients: int) -> str:
    """The error of a partitioner that made ``got`` partitions for ``n_clients`` clients."""
    if partitioner == "NaturalIdPartitioner":
        return (f"partition 'flwr': NaturalIdPartitioner makes one client per natural id "
                f"(each distinct {LABEL!r}), and these samples have {got} natural ids, but "
                f"n_clients={n_clients} was asked; set n_clients = {got} or use another "
                "partitioner")
    return (f"partition 'flwr': {partitioner} made {got} partitions but n_clients="
            f"{n_clients} was asked; set n_clients = {got} or change its options")


__all__ = ["flwr_partition", "partition_flwr"]
