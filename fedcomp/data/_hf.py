"""Flower's ``FederatedDataset`` and Hugging Face datasets as :class:`ClientData`.

A Flower user's data already come partitioned: a ``flwr_datasets.FederatedDataset`` (a Hugging
Face data set and a partitioner per split), or any ``datasets.Dataset`` with a partitioner of
``flwr_datasets.partitioner``. :func:`from_federated_dataset` makes partition ``i`` client
``i``, holding exactly the rows flwr-datasets' own ``load_partition(i)`` returns, in its
order; so a simulation in fedcomp and a Flower deployment on the same partition train on
the same clients.

Columns become arrays as fedcomp's own loaders shape them (:mod:`fedcomp.data._images`):

* an image column (``datasets.Image``) becomes ``(n, channels, height, width)``, channel
  first as PyTorch's convolutions want, with 8-bit pixels scaled to ``[0, 1]``; every image
  of the data set must have one shape;
* one array column (``Sequence``, ``Array2D``: a sample's feature vector or matrix) keeps
  its shape per sample;
* several scalar columns (a table's) are stacked, in the order given, into ``(n, k)``;
* the label column: class ids (``ClassLabel`` or integers) stay integers, numbers become
  the features' float dtype (a regression target).

Nothing is guessed silently: a missing column (the message lists the data set's), a
non-numeric one, images of several shapes, a non-finite value, an empty partition, a
``FederatedDataset`` given a partitioner of its own, each ends in one ``ValueError`` naming
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._extras import require
from ._client_data import ClientData

#: The largest pixel value of an 8-bit image: uint8 image columns are divided by it.
PIXEL_LEVELS = 255.0


def from_federated_dataset(source: Any, features: str | Sequence[str], label: str, *,
                           split: str = "train", partitioner: Any = None,
                           dtype: Any = np.float64) -> ClientData:
    """One client per partition of a Flower ``FederatedDataset`` or a partitioned data set.

    Parameters
    ----------
    source : flwr_datasets.FederatedDataset or datasets.Dataset
        A ``FederatedDataset`` (its ``split``'s partitioner decides the clients), or a
        ``datasets.Dataset`` together with ``partitioner``.
    features : str or sequence of str
        One image or array column, or several scalar columns (stacked in this order).
    label : str
        The target column: class ids or numbers.
    split : str, default "train"
        The ``FederatedDataset``'s partitioned split.
    partitioner : flwr_datasets.partitioner.Partitioner, optional
        For a ``datasets.Dataset``: the partitioner, not yet given a data set (it is given
        ``source``). A ``FederatedDataset`` carries its own: then leave this ``None``.
    dtype : float dtype, default float64
        The features' dtype (and a numeric target's).

    Returns
    -------
    ClientData
        Client ``i`` holds partition ``i``'s rows, in flwr-datasets' order.

    Examples
    --------
    >>> from datasets import Dataset
    >>> from flwr_datasets.partitioner import IidPartitioner
    >>> table = Dataset.from_dict({"a": [0.0, 1.0, 2.0, 3.0], "b": [1.0, 1.0, 0.0, 0.0],
    ...                            "y": [0, 1, 0, 1]})
    >>> data = from_federated_dataset(table, ["a", "b"], "y",
    ...                               partitioner=IidPartitioner(num_partitions=2))
    >>> data.n_clients, data.feature_shape, data.targets.dtype
    (2, (2,), dtype('int64'))
    """
    require("datasets", "fedcomp.data.from_federated_dataset")
    columns = [features] if isinstance(features, str) else list(features)
    if not columns:
        raise ValueError("from_federated_dataset: name at least one feature column")
    parts = _partitions(source, split, partitioner)
    converted = [_client(part, i, columns, label, np.dtype(dtype)) for i, part in
                 enumerate(parts)]
    shapes = {x.shape[1:] for x, _ in converted}
    if len(shapes) > 1:
        raise ValueError(f"from_federated_dataset: the clients' samples have the shapes "
                         f"{sorted(shapes)}; every sample needs one shape (resize the images "
                         "in a preprocessor)")
    return ClientData.from_lists([x for x, _ in converted], [y for _, y in converted],
                                 dtype=dtype)


def _partitions(source: Any, split: str, partitioner: Any) -> list[Any]:
    """Each partition's ``datasets.Dataset``, in partition order."""
    if hasattr(source, "load_partition") and hasattr(source, "partitioners"):
        if partitioner is not None:
            raise ValueError("from_federated_dataset: a FederatedDataset partitions with its "
                             "own partitioners; leave partitioner=None (or pass its "
                             "datasets.Dataset with the partitioner)")
        partitioners = source.partitioners
        if split not in partitioners:
            raise ValueError(f"from_federated_dataset: split {split!r} has no partitioner in "
                             f"this FederatedDataset; it partitions {sorted(partitioners)}")
        count = partitioners[split].num_partitions
        return [source.load_partition(i, split) for i in range(count)]
    datasets = require("datasets", "fedcomp.data.from_federated_dataset")
    if not isinstance(source, datasets.Dataset):
        raise TypeError(f"from_federated_dataset: source must be a flwr_datasets."
                        f"FederatedDataset or a datasets.Dataset (got "
                        f"{type(source).__name__})")
    if partitioner is None or not hasattr(partitioner, "load_partition"):
        raise ValueError("from_federated_dataset: a datasets.Dataset needs partitioner=, a "
                         "flwr_datasets.partitioner instance such as "
                         "IidPartitioner(num_partitions=10)")
    partitioner.dataset = source
    return [partitioner.load_partition(i) for i in range(partitioner.num_partitions)]


def _client(part: Any, index: int, columns: list[str], label: str, dtype: np.dtype
            ) -> tuple[np.ndarray, np.ndarray]:
    """Partition ``index``'s features and targets as arrays."""
    names = list(part.column_names)
    missing = [c for c in [*columns, label] if c not in names]
    if missing:
        raise ValueError(f"from_federated_dataset: no column {missing} in partition {index}; "
                         f"its columns are {names}")
    if part.num_rows == 0:
        raise ValueError(f"from_federated_dataset: partition {index} has no rows; fedcomp's "
                         "clients are never empty (use fewer partitions or the "
                         "partitioner's minimum size)")
    table = part
    if len(columns) == 1:
        x = _feature_column(table, columns[0], index, dtype)
    else:
        x = np.stack([_scalar_column(table, c, index, dtype) for c in columns], axis=1)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"from_federated_dataset: partition {index}'s features "
                         f"{columns} hold NaN or infinite values; clean or impute them first")
    return x, _targets(table, label, index, dtype)


def _column(table: Any, name: str, index: int) -> np.ndarray:
    ragged = ValueError(f"from_federated_dataset: column {name!r} of partition {index} holds "
                        "values of several shapes; every sample needs one shape (resize the "
                        "images in a preprocessor)")
    try:  # datasets' NumPy formatter refuses rows of several shapes itself
        column = table.select_columns([name])
        if _is_image(table, name):  # decoded to pixel arrays (uint8 stays uint8)
            values = column.with_format("numpy")[:][name]
        else:  # Arrow's own values: datasets' NumPy formatter makes float64 float32
            values = column.with_format("arrow")[:].column(name).to_numpy(
                zero_copy_only=False)
        if not isinstance(values, np.ndarray) or values.dtype == object:  # rows of arrays
            values = np.stack([np.asarray(v) for v in values])
    except ValueError:
        raise ragged from None
    return values


def _numeric(values: np.ndarray, name: str, index: int) -> None:
    if values.dtype.kind not in "biuf":
        raise ValueError(f"from_federated_dataset: column {name!r} of partition {index} is "
                         f"not numeric (dtype {values.dtype}); encode it first")


def _feature_column(table: Any, name: str, index: int, dtype: np.dtype) -> np.ndarray:
    """An image column as ``(n, channels, height, width)`` in ``[0, 1]``; an array column
    as it is; a scalar column as ``(n, 1)``."""
    values = _column(table, name, index)
    _numeric(values, name, index)
    if _is_image(table, name):
        if values.ndim == 3:  # grey images: one channel
            values = values[:, None, :, :]
        elif values.ndim == 4:  # (n, height, width, channels) -> channel first
            values = np.moveaxis(values, -1, 1)
        scale = PIXEL_LEVELS if values.dtype == np.uint8 else 1.0
        return values.astype(dtype) / dtype.type(scale)
    return (values[:, None] if values.ndim == 1 else values).astype(dtype)


def _scalar_column(table: Any, name: str, index: int, dtype: np.dtype) -> np.ndarray:
    values = _column(table, name, index)
    _numeric(values, name, index)
    if values.ndim != 1:
        raise ValueError(f"from_federated_dataset: column {name!r} holds arrays of shape "
                         f"{values.shape[1:]}; several feature columns must be scalars (name "
                         "an array column alone)")
    return values.astype(dtype)


def _targets(table: Any, label: str, index: int, dtype: np.dtype) -> np.ndarray:
    values = _column(table, label, index)
    _numeric(values, label, index)
    if values.ndim != 1:
        raise ValueError(f"from_federated_dataset: the label column {label!r} holds arrays of "
                         f"shape {values.shape[1:]}; it must hold one value per sample")
    if values.dtype.kind in "biu":
        return values.astype(np.int64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"from_federated_dataset: the label column {label!r} of partition "
                         f"{index} holds NaN or infinite values")
    return values.astype(dtype)


def _is_image(table: Any, name: str) -> bool:
    """Whether ``name`` is a ``datasets.Image`` column (decoded to pixel arrays)."""
    datasets = require("datasets", "fedcomp.data.from_federated_dataset")
    return isinstance(table.features[name], datasets.Image)


__all__ = ["from_federated_dataset"]
