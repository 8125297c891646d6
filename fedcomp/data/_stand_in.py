"""An image data set from its files when they are present, else synthetic images of its shape.

The paper-scale experiments (FedCanon's CNN at Fashion-MNIST's shape, ResNet-18 at
CIFAR-10's) must run anywhere: on the real files where ``fedcomp data download`` put them,
and, on a machine without them (CI, a lent GPU with no network), on labelled synthetic images
of the same shape and sizes, so that a round costs what it costs on the real data. Synthetic
images say nothing about accuracy: a run on them is for timing only, and the experiments'
verdicts refuse to judge a claim from them: each call records which data it read, and a run
records it in its summary row (:func:`data_origin`), so a verdict made later, after the files
appeared or went, still knows what the run had.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .._log import get_logger
from ._client_data import ClientData
from ._images import _image_data, cifar10, fashion_mnist, mnist

#: The data sets that have a stand-in: their loader, one sample's shape, the training and
#: test sizes of the real files.
IMAGE_SETS: dict[str, tuple[Any, tuple[int, ...], int, int]] = {
    "mnist": (mnist, (1, 28, 28), 60_000, 10_000),
    "fashion_mnist": (fashion_mnist, (1, 28, 28), 60_000, 10_000),
    "cifar10": (cifar10, (3, 32, 32), 50_000, 10_000),
}

#: The stand-in's images are one fixed set (the real files are one set too): their stream
#: ``np.random.default_rng([0, _SYNTHETIC])`` never follows the run seed, which only
#: partitions them, as it partitions the real images.
_SYNTHETIC = 5

#: Standard deviation of the pixel noise around each class's prototype image.
_NOISE = 0.5

#: The summary row's column that says which data a run had: ``""`` the real files, else why
#: it had the stand-in (the loader's message).
STAND_IN = "stand_in"

#: What the latest call of :func:`image_files_or_synthetic` in this process read, by data set
#: and path: ``""`` the real files, else why it made the stand-in.
_READ: dict[tuple[str, str | None], str] = {}


@functools.cache
def _warn_stand_in(dataset: str, shape: tuple[int, ...], reason: str) -> None:
    """Say once per process and folder that a run has synthetic images (a run builds its
    problem more than once: for its record, then for each seed)."""
    get_logger("data").warning(
        "%s: SYNTHETIC stand-in images of its shape %s, for timing only, not for accuracy "
        "(%s; `fedcomp data download %s` gets the files)", dataset,
        "x".join(map(str, shape)), reason, dataset)


def _image_set(dataset: str) -> tuple[Any, tuple[int, ...], int, int]:
    if dataset not in IMAGE_SETS:
        raise ValueError(f"image_files_or_synthetic: dataset={dataset!r} has no synthetic "
                         f"stand-in; choose one of {sorted(IMAGE_SETS)}")
    return IMAGE_SETS[dataset]


def synthetic_images(prototypes: np.ndarray, n: int, dtype: Any, rng: np.random.Generator
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` labelled images around ``prototypes`` (one image per class): balanced class ids,
    each image its class's prototype plus Gaussian noise (standard deviation 0.5), clipped to
    ``[0, 1]`` as pixel levels are, so the classes can be told apart and a network learns
    something, as on real images.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, y = synthetic_images(rng.random((3, 1, 4, 4), dtype=np.float32), 6, "float32", rng)
    >>> x.shape, x.dtype.name, sorted(y.tolist()), bool(x.min() >= 0 and x.max() <= 1)
    ((6, 1, 4, 4), 'float32', [0, 0, 1, 1, 2, 2], True)
    """
    labels = rng.permutation(np.arange(n) % len(prototypes)).astype(np.int64)
    images = prototypes[labels]
    images += np.float32(_NOISE) * rng.standard_normal(images.shape, dtype=np.float32)
    np.clip(images, 0.0, 1.0, out=images)
    return images.astype(dtype, copy=False), labels


def missing_image_files(dataset: str, path: str | None = None) -> str | None:
    """Why ``dataset``'s loader finds no files at ``path`` (its default folder, in the data
    directory ``$FEDCOMP_DATA_DIR``, when None), or None when it reads them.

    The loader itself decides (one sample read), so this says what a run of
    :func:`image_files_or_synthetic` had: the real images when None, the stand-in otherwise.
    """
    loader = _image_set(dataset)[0]
    try:
        loader(**({} if path is None else {"path": path}), n_clients=1, n_samples=1,
               n_test=1)
    except FileNotFoundError as exc:
        return str(exc)
    return None


def image_files_or_synthetic(dataset: str, path: str | None = None, n_clients: int = 10,
                             partition: Any = "iid", seed: int = 0, flatten: bool = False,
                             n_samples: int | None = None, n_test: int | None = None,
                             dtype: str = "float32", n_classes: int = 10) -> ClientData:
    """``dataset`` from its files when its loader finds them, else synthetic images of its
    shape and sizes (for timing only: their accuracies say nothing about the real data).

    Parameters
    ----------
    dataset : {"mnist", "fashion_mnist", "cifar10"}
        The data set, read by :func:`~fedcomp.data.mnist`, :func:`~fedcomp.data.fashion_mnist`
        or :func:`~fedcomp.data.cifar10`.
    path : str, optional
        The folder of its files (default: the loader's, ``$FEDCOMP_DATA_DIR/<dataset>``).
    n_clients, partition, seed, flatten, n_samples, n_test, dtype, n_classes
        As in the loader. Without files, ``n_samples`` and ``n_test`` are the sizes of the
        synthetic training and test sets (default: the real set's, e.g. 60,000 and 10,000
        for Fashion-MNIST); ``seed`` partitions them as it partitions the real images.

    Returns
    -------
    ClientData
        The real images, or the stand-in (a warning says so, with how to get the files).
        :func:`missing_image_files` tells which.

    Examples
    --------
    >>> data = image_files_or_synthetic("cifar10", path="/nonexistent", n_clients=2,
    ...                                 n_samples=8, n_test=4)
    >>> data.features.shape[2:], data.holdout[0].shape
    ((3, 32, 32), (4, 3, 32, 32))
    """
    loader, shape, n_train, n_held = _image_set(dataset)
    options = {"n_clients": n_clients, "partition": partition, "seed": seed,
               "flatten": flatten, "n_samples": n_samples, "n_test": n_test, "dtype": dtype,
               "n_classes": n_classes}
    try:
        data: ClientData = loader(**({} if path is None else {"path": path}), **options)
        _READ[dataset, path] = ""
        return data
    except FileNotFoundError as exc:
        reason = str(exc)
    _READ[dataset, path] = reason
    _warn_stand_in(dataset, shape, reason.split(". ")[0])
    sizes = {"n_samples": n_train if n_samples is None else int(n_samples),
             "n_test": n_held if n_test is None else int(n_test)}
    for name, size in sizes.items():
        if size < 1:
            raise ValueError(f"image_files_or_synthetic: {name}={size}; the synthetic "
                             f"{dataset} needs at least one image (None: the real set's size)")
    rng = np.random.default_rng([0, _SYNTHETIC])
    prototypes = rng.random((10, *shape), dtype=np.float32)  # train and test share them
    train = synthetic_images(prototypes, sizes["n_samples"], dtype, rng)
    test = synthetic_images(prototypes, sizes["n_test"], dtype, rng)
    return _image_data(train, test, None, n_clients, partition, seed, flatten, None, None,
                       dtype)


def data_origin(data: dict[str, Any]) -> dict[str, str]:
    """The summary row's record of which data a run with the data table ``data`` had:
    ``{"stand_in": ""}`` the real files, ``{"stand_in": why}`` the synthetic stand-in, as
    the latest :func:`image_files_or_synthetic` call for its data set and path in this
    process read them (the run's own: a run builds its data in its process just before it
    runs); ``{}`` for another generator or when no such call was made here.

    Examples
    --------
    >>> _ = image_files_or_synthetic("mnist", path="/nonexistent", n_samples=20, n_test=2)
    >>> origin = data_origin({"generator": "image_files_or_synthetic", "dataset": "mnist",
    ...                       "path": "/nonexistent"})
    >>> "/nonexistent" in origin["stand_in"], data_origin({"generator": "synthetic"})
    (True, {})
    """
    key = (str(data.get("dataset")), data.get("path"))
    if data.get("generator") != "image_files_or_synthetic" or key not in _READ:
        return {}
    return {STAND_IN: _READ[key]}


__all__ = ["IMAGE_SETS", "STAND_IN", "data_origin", "image_files_or_synthetic",
           "missing_image_files", "synthetic_images"]
