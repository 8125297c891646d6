"""Image classification data sets: the standard file formats and an offline bundled set.

Every loader returns pooled training images split among clients by a partitioner
(:func:`~fedcomp.data.federate`) and attaches held-out test images
(:attr:`ClientData.holdout <fedcomp.data.ClientData>`):

* :func:`~fedcomp.data.digits` (:mod:`._digits`) — scikit-learn's bundled 8×8 handwritten
  digits (1,797 images, 10 classes), no download needed;
* :func:`mnist` / :func:`fashion_mnist` — the IDX files, raw or gzip;
* :func:`femnist` — LEAF's JSON files, one natural client per writer;
* :func:`cifar10` — the "python version" pickled batches.

The file formats are read by :mod:`._image_files` (``load_idx``, ``load_leaf``,
``load_cifar10_batch``).

Conventions shared by all loaders: features are pixel values scaled to ``[0, 1]`` (grey
level / maximum level; no standardization, so a model or a transform can choose its own),
shaped ``(n, channels, height, width)`` (channel first, as PyTorch's convolutions want) or
``(n, channels·height·width)`` with ``flatten=True`` (for the linear ``softmax`` loss);
targets are class ids ``0..k-1`` (int64). Randomness other than the partition (the test
split of digits, subsampling, writer sampling) comes from its own stream
``np.random.default_rng([seed, k])``, so changing ``n_clients`` or the partition never
changes which samples are kept.

References
----------
LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to document recognition",
Proc. IEEE 1998 (MNIST; the IDX format at http://yann.lecun.com/exdb/mnist/).
Xiao, Rasul, Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine
Learning Algorithms", arXiv:1708.07747, 2017.
Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", tech. report 2009
(CIFAR-10).
Caldas et al., "LEAF: A Benchmark for Federated Settings", arXiv:1812.01097, 2018 (FEMNIST).
Alpaydin, Kaynak, "Optical Recognition of Handwritten Digits", UCI ML repository, 1998
(scikit-learn's digits).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ._client_data import ClientData
from ._download import manual_download_hint
from ._federate import federate
from ._image_files import load_cifar10_batch, load_idx, load_leaf
from ._sources import _resolve

# Random streams of ``np.random.default_rng([seed, stream])``, one per use.
_SPLIT, _SUBSAMPLE_TRAIN, _SUBSAMPLE_TEST, _SAMPLE_WRITERS = 1, 2, 3, 4


# --- shared preparation -------------------------------------------------------------------------
def _float_dtype(dtype: Any) -> np.dtype:
    out = np.dtype(dtype)
    if out.kind != "f":
        raise ValueError(f"dtype must be a float type such as 'float32' (got {dtype!r})")
    return out


def _check_classes(name: str, n_classes: int, expected: int) -> None:
    if n_classes != expected:
        raise ValueError(f"{name} has {expected} classes (got n_classes={n_classes}); the "
                         "parameter only tells a configuration the softmax model's shape")


def _subsample(n: int, keep: int | None, seed: int, stream: int, what: str) -> np.ndarray:
    """Sorted indices of ``keep`` of ``n`` samples (all when ``keep`` is None), seeded."""
    if keep is None:
        return np.arange(n)
    if not 1 <= keep <= n:
        raise ValueError(f"{what} must be in 1..{n} (got {keep}); None keeps every sample")
    rng = np.random.default_rng([seed, stream])
    return np.sort(rng.choice(n, size=keep, replace=False))


def _pixels(images: np.ndarray, levels: float | None, dtype: np.dtype, flatten: bool
            ) -> np.ndarray:
    """``images / levels`` in ``dtype`` (computed in ``dtype``), optionally flattened."""
    out = images.astype(dtype)
    if levels is not None:
        out /= dtype.type(levels)
    return out.reshape(len(out), -1) if flatten else out


def _image_data(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray] | None,
                levels: float | None, n_clients: int | None, partition: Any, seed: int,
                flatten: bool, n_samples: int | None, n_test: int | None, dtype: Any,
                groups: np.ndarray | None = None) -> ClientData:
    """Subsample, scale, partition (``federate``) and attach the test images as holdout."""
    dtype = _float_dtype(dtype)
    images, labels = train
    if n_samples is not None:  # (no copy of a full set otherwise)
        keep = _subsample(len(labels), n_samples, seed, _SUBSAMPLE_TRAIN, "n_samples")
        images, labels = images[keep], labels[keep]
        groups = None if groups is None else groups[keep]
    if n_clients is None:  # one client per writer (femnist's natural partition)
        if groups is None:
            raise ValueError("n_clients is needed: this data set has no writers to count")
        n_clients = len(np.unique(groups))
    data = federate(_pixels(images, levels, dtype, flatten), labels.astype(np.int64), n_clients,
                    partition, seed, dtype=dtype, groups=groups)
    if test is None:
        if n_test is not None:
            raise ValueError("n_test: this data set has no test samples to keep")
        return data
    keep = _subsample(len(test[1]), n_test, seed, _SUBSAMPLE_TEST, "n_test")
    return data.with_holdout(_pixels(test[0][keep], levels, dtype, flatten),
                             test[1][keep].astype(np.int64))


# --- MNIST and Fashion-MNIST (IDX) ----------------------------------------------------------
_IDX_STEMS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find_file(folder: Path, names: list[str], name: str, what: str) -> Path:
    for candidate in names:
        if (folder / candidate).is_file():
            return folder / candidate
    raise FileNotFoundError(f"{name}: no {what} in {folder}. "
                            + manual_download_hint(name, folder)
                            + f"; or pass path=FOLDER holding the {name} files")


def _idx_split(folder: Path, name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for stem in _IDX_STEMS[split]:
        dotted = stem.replace("-idx", ".idx")  # some copies name them train-images.idx3-ubyte
        names = [stem, stem + ".gz", dotted, dotted + ".gz"]
        arrays.append(load_idx(_find_file(folder, names, name, f"{stem}[.gz]")))
    images, labels = arrays
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{name} ({split}): images of shape {images.shape} and labels of "
                         f"shape {labels.shape} do not form (n, rows, cols) and (n,)")
    return images[:, None], labels


def _idx_images(name: str, path: str, n_clients: int, partition: Any, seed: int,
                flatten: bool, n_samples: int | None, n_test: int | None, dtype: Any
                ) -> ClientData:
    folder = _resolve(path)
    return _image_data(_idx_split(folder, name, "train"), _idx_split(folder, name, "test"),
                       255.0, n_clients, partition, seed, flatten, n_samples, n_test, dtype)


def mnist(path: str = "mnist", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
          flatten: bool = False, n_samples: int | None = None, n_test: int | None = None,
          dtype: str = "float32", n_classes: int = 10) -> ClientData:
    """MNIST handwritten digits (60,000 + 10,000 test images, 28×28) from its IDX files.

    Parameters
    ----------
    path : str, default "mnist"
        Folder of ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each raw or ``.gz``; a
        relative name not found here is looked up in the data directory
        (``$FEDCOMP_DATA_DIR``). ``fedcomp data download mnist`` puts them there.
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`~fedcomp.data.federate` (``{"name": "shards", "shards_per_client": 2}``
        is McMahan et al.'s pathological split).
    seed : int, default 0
        Seeds the partition and the subsamples.
    flatten : bool, default False
        Features of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.
    n_samples, n_test : int, optional
        Keep this many training / test images (seeded subsamples) for reduced-size runs.
    dtype : str, default "float32"
        Feature dtype (float32: 60,000 images take 188 MB).
    n_classes : int, default 10
        Fixed by the data (see :func:`digits`).

    Returns
    -------
    ClientData
        Features: grey levels / 255 in ``[0, 1]``; targets 0..9 (int64); the 10,000 test
        images as the holdout.

    Raises
    ------
    FileNotFoundError
        Saying how to get the files when they are not in ``path``.
    """
    _check_classes("mnist", n_classes, 10)
    return _idx_images("mnist", path, n_clients, partition, seed, flatten, n_samples, n_test,
                       dtype)


def fashion_mnist(path: str = "fashion_mnist", n_clients: int = 10, partition: Any = "iid",
                  seed: int = 0, flatten: bool = False, n_samples: int | None = None,
                  n_test: int | None = None, dtype: str = "float32", n_classes: int = 10
                  ) -> ClientData:
    """Fashion-MNIST (Zalando's clothing images, MNIST's format and sizes) from its IDX files.

    Parameters
    ----------
    path : str, default "fashion_mnist"
        Folder of the four IDX files, named as MNIST's (see :func:`mnist`);
        ``fedcomp data download fashion_mnist`` puts them in the data directory.
    n_clients, partition, seed, flatten, n_samples, n_test, dtype, n_classes
        As in :func:`mnist`.

    Returns
    -------
    ClientData
        Features in ``[0, 1]``, shape ``(n, 1, 28, 28)`` (or ``(n, 784)``); targets 0..9
        (T-shirt/top, trouser, pullover, dress, coat, sandal, shirt, sneaker, bag, ankle
        boot); the 10,000 test images as the holdout.
    """
    _check_classes("fashion_mnist", n_classes, 10)
    return _idx_images("fashion_mnist", path, n_clients, partition, seed, flatten, n_samples,
                       n_test, dtype)


# --- CIFAR-10 (python batches) ---------------------------------------------------------------
def cifar10(path: str = "cifar10", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
            flatten: bool = False, n_samples: int | None = None, n_test: int | None = None,
            dtype: str = "float32", n_classes: int = 10) -> ClientData:
    """CIFAR-10 (50,000 + 10,000 test colour images, 32×32, 10 classes) from its python batches.

    Parameters
    ----------
    path : str, default "cifar10"
        Folder of ``data_batch_1`` … ``data_batch_5`` and ``test_batch``, or of the
        ``cifar-10-batches-py/`` folder holding them (``fedcomp data download cifar10``
        unpacks it into the data directory).
    n_clients, partition, seed, n_samples, n_test, dtype, n_classes
        As in :func:`mnist`.
    flatten : bool, default False
        Features of shape ``(n, 3072)`` instead of ``(n, 3, 32, 32)``.

    Returns
    -------
    ClientData
        Features: RGB intensities / 255 in ``[0, 1]``; targets 0..9 (airplane, automobile,
        bird, cat, deer, dog, frog, horse, ship, truck); the test batch as the holdout.
    """
    _check_classes("cifar10", n_classes, 10)
    folder = _resolve(path)
    if not (folder / "data_batch_1").exists() and (folder / "cifar-10-batches-py").is_dir():
        folder = folder / "cifar-10-batches-py"

    def read(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        batches = [load_cifar10_batch(_find_file(folder, [n], "cifar10", n)) for n in names]
        return (np.concatenate([b[0] for b in batches]),
                np.concatenate([b[1] for b in batches]))

    train = read([f"data_batch_{i}" for i in range(1, 6)])
    return _image_data(train, read(["test_batch"]), 255.0, n_clients, partition, seed, flatten,
                       n_samples, n_test, dtype)


# --- FEMNIST (LEAF JSON) ---------------------------------------------------------------------
def femnist(path: str = "femnist", n_clients: int | None = None, partition: Any = "writers",
            seed: int = 0, flatten: bool = False, max_writers: int | None = None,
            n_samples: int | None = None, n_test: int | None = None,
            dtype: str = "float32", n_classes: int = 62) -> ClientData:
    """FEMNIST (LEAF's federated EMNIST: 62 classes, 28×28, grouped by writer) from LEAF JSON.

    Parameters
    ----------
    path : str, default "femnist"
        A folder with LEAF's ``train/`` and ``test/`` folders of JSON files (training
        samples for the clients, test samples as the holdout), or a folder of JSON files
        (no holdout). A relative name not found here is looked up in the data directory.
        LEAF's preprocessing script produces the files (``fedcomp data download femnist``
        explains how).
    n_clients : int, optional
        Default: one client per writer kept. With ``partition="writers"`` fewer clients
        get several whole writers each.
    partition : str or dict, default "writers"
        ``"writers"``: the natural partition, whole writers dealt to clients;
        ``{"name": "dirichlet_writers", "concentration": 0.5}``: ``Dir`` shares of the
        writers; any sample partition (``"iid"``, ``"dirichlet"`` over labels, ...) too.
    seed : int, default 0
        Seeds the partition, the writer sample and the subsamples.
    flatten : bool, default False
        Features of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.
    max_writers : int, optional
        Keep this many writers (a seeded sample, as LEAF's ``--sf`` does) with all their
        samples; their test samples form the holdout.
    n_samples, n_test : int, optional
        Keep this many training / test samples (seeded subsamples).
    dtype : str, default "float32"
    n_classes : int, default 62
        Fixed by the data (see :func:`digits`).

    Returns
    -------
    ClientData
        Features as LEAF stores them (grey level / 255, in ``[0, 1]``); targets: LEAF's class
        ids 0..61 (digits, upper-case, lower-case letters).
    """
    _check_classes("femnist", n_classes, 62)
    folder = _resolve(path)
    train_dir = folder / "train" if (folder / "train").is_dir() else folder
    test_dir = folder / "test" if (folder / "test").is_dir() else None
    if not train_dir.is_dir() or not any(train_dir.glob("*.json")):
        raise FileNotFoundError(f"femnist: no LEAF JSON files in {train_dir}. "
                                + manual_download_hint("femnist", folder))
    features, labels, writers = load_leaf(train_dir, _float_dtype(dtype))
    subset = max_writers is not None
    if max_writers is not None:
        names = np.unique(writers)
        chosen = names[_subsample(len(names), max_writers, seed, _SAMPLE_WRITERS, "max_writers")]
        keep = np.isin(writers, chosen)
        features, labels, writers = features[keep], labels[keep], writers[keep]
    side = math.isqrt(features.shape[1])
    if side * side != features.shape[1]:
        raise ValueError(f"femnist: samples of length {features.shape[1]} are not square images")
    test = None
    if test_dir is not None and any(test_dir.glob("*.json")):
        tx, ty, tw = load_leaf(test_dir, _float_dtype(dtype))
        if tx.shape[1] != features.shape[1]:
            raise ValueError(f"femnist: test samples of length {tx.shape[1]}, training samples "
                             f"of length {features.shape[1]}")
        # LEAF's sample split (-t sample) gives every writer train and test samples; its
        # user split (-t user) holds out other writers. Only a writer subsample
        # (max_writers) restricts the test samples to the writers kept.
        keep = np.isin(tw, np.unique(writers)) if subset else np.ones(len(ty), dtype=bool)
        if not keep.any():
            raise ValueError(f"femnist: none of the {len(np.unique(tw))} test writers in "
                             f"{test_dir} is among the {max_writers} training writers kept "
                             "(max_writers); with LEAF's user split (-t user) the test "
                             "writers differ from the training ones: leave max_writers "
                             "unset, or use the sample split (-t sample)")
        test = (tx[keep].reshape(-1, 1, side, side), ty[keep])
    return _image_data((features.reshape(-1, 1, side, side), labels), test, None, n_clients,
                       partition, seed, flatten, n_samples, n_test, dtype, groups=writers)


__all__ = ["cifar10", "fashion_mnist", "femnist", "mnist"]
