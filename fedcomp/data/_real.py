"""Real data sets: the LIBSVM text format, a bundled offline set, checked downloads.

A *pooled* data set (features and labels of every sample) becomes federated client data by
a partitioner (:data:`fedcomp.data.PARTITIONERS`), named in a configuration as
``partition = "iid"`` or ``partition = {name = "dirichlet", concentration = 0.2}``
(:func:`federate`). The loaders here follow that pattern:

* :func:`breast_cancer` — scikit-learn's bundled Wisconsin breast-cancer set (569 × 30,
  binary): real data that needs no download (CI, offline machines);
* :func:`libsvm_file` / :func:`a9a` — any LIBSVM-format file, e.g. the A9A (Adult) set of
  seed 002's Fig. 1 (32,561 × 123, ±1 labels), read from a path;
* :func:`download` — fetch a file over HTTP(S) into the data directory, verifying its
  SHA-256 (the test serves a small file from a local ``http.server``).

References
----------
Chang, C.-C., Lin, C.-J. "LIBSVM: A library for support vector machines." ACM TIST 2011
(the file format; A9A from https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/).
Street, Wolberg, Mangasarian, "Nuclear feature extraction for breast tumor diagnosis", 1993.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from ._client_data import ClientData
from ._partition import split_to_clients

#: Environment variable naming the directory of downloaded / user-provided data files.
DATA_DIR_ENV = "FEDCOMP_DATA_DIR"

#: Where a file of a named data set comes from. ``sha256`` is pinned when known; A9A's is
#: not (it could not be verified offline when this was written), so :func:`fetch` checks
#: A9A's shape instead and records the digest of the first download next to the file.
SOURCES: dict[str, dict[str, Any]] = {
    "a9a": {"url": "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/a9a",
            "sha256": None, "n_samples": 32561, "n_features": 123},
}


def _partitioners() -> dict[str, Any]:
    from . import PARTITIONERS  # the registry (imported late: this module is part of it)

    return PARTITIONERS


# --- LIBSVM format -----------------------------------------------------------------------
def load_libsvm(path: str | Path, n_features: int | None = None, zero_based: Any = "auto",
                dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Read a LIBSVM/SVMlight text file into dense arrays.

    Parameters
    ----------
    path : str or Path
        One sample per line: ``label index:value index:value ...`` (indices increasing;
        ``#`` starts a comment; ``qid:`` tokens are ignored).
    n_features : int, optional
        Number of features (default: the largest index seen). Files of a split often
        omit the last features (A9A's training file has 123), so pass it when known.
    zero_based : bool or "auto", default "auto"
        Whether indices start at 0; ``"auto"`` treats them as 1-based (the format's
        convention) unless an index 0 occurs.
    dtype : numpy dtype, default float64

    Returns
    -------
    features : ndarray, shape (n_samples, n_features)
    labels : ndarray, shape (n_samples,)
        As written in the file (e.g. ±1 for binary sets; ``"+1"`` parses as 1).

    Raises
    ------
    ValueError
        Naming the line of a malformed entry, or an index beyond ``n_features``.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".svm", delete=False) as f:
    ...     _ = f.write("+1 1:0.5 3:2\\n-1 2:1\\n")
    >>> X, y = load_libsvm(f.name)
    >>> X.tolist(), y.tolist()
    ([[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]], [1.0, -1.0])
    >>> os.remove(f.name)
    """
    labels: list[float] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            tokens = line.split()
            try:
                labels.append(float(tokens[0]))
                pairs = [t.split(":", 1) for t in tokens[1:] if not t.startswith("qid:")]
                idx = np.array([int(i) for i, _ in pairs], dtype=np.int64)
                val = np.array([float(v) for _, v in pairs], dtype=np.float64)
            except ValueError as exc:
                raise ValueError(f"{path}, line {number}: not LIBSVM format "
                                 f"('label index:value ...'): {exc}") from exc
            rows.append(np.full(len(idx), len(labels) - 1))
            cols.append(idx)
            vals.append(val)
    col = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    base = 0 if (zero_based is True or (zero_based == "auto" and (col == 0).any())) else 1
    col = col - base
    if (col < 0).any():
        raise ValueError(f"{path}: negative feature index (zero_based={zero_based!r})")
    width = int(col.max()) + 1 if col.size else 0
    if n_features is not None:
        if width > n_features:
            raise ValueError(f"{path}: feature index {width - 1 + base} exceeds "
                             f"n_features={n_features}")
        width = n_features
    features = np.zeros((len(labels), width), dtype=dtype)
    if col.size:
        features[np.concatenate(rows), col] = np.concatenate(vals)
    return features, np.asarray(labels, dtype=np.float64)


# --- pooled data → clients -----------------------------------------------------------------
def partition_spec(partition: Any) -> tuple[str, dict[str, Any]]:
    """``"iid"`` or ``{"name": "dirichlet", "concentration": 0.2}`` → (name, params), checked.

    The partitioner's ``n_clients``, ``seed`` and data arguments come from the data set;
    the spec names the scheme and its own parameters only.

    Examples
    --------
    >>> partition_spec({"name": "dirichlet", "concentration": 0.2})
    ('dirichlet', {'concentration': 0.2})
    """
    if isinstance(partition, str):
        name, params = partition, {}
    elif isinstance(partition, dict) and isinstance(partition.get("name"), str):
        params = {k: v for k, v in partition.items() if k != "name"}
        name = partition["name"]
    else:
        raise ValueError(f"partition must be a name or a table with a 'name' key, e.g. "
                         f"{{name = \"dirichlet\", concentration = 0.2}} (got {partition!r})")
    registry = _partitioners()
    if name not in registry:
        raise ValueError(f"unknown partition {name!r}; valid: {sorted(registry)}")
    accepted = set(inspect.signature(registry[name]).parameters) - {
        "labels", "n_samples", "n_clients", "seed"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ValueError(f"partition {name!r}: unknown parameter(s) {unknown}; accepted: "
                         f"{sorted(accepted)}")
    return name, params


def federate(features: Any, labels: Any, n_clients: int, partition: Any = "iid", seed: int = 0,
             dtype: Any = np.float64) -> ClientData:
    """Split a pooled data set among clients with a named partitioner.

    Parameters
    ----------
    features : array, shape (n_samples, *feature_shape)
    labels : array, shape (n_samples,)
    n_clients : int
    partition : str or dict, default "iid"
        A partitioner of :data:`fedcomp.data.PARTITIONERS` and its parameters
        (:func:`partition_spec`), e.g. ``{"name": "dirichlet", "concentration": 0.2}``.
    seed : int, default 0
        Seeds the partition.
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData

    Examples
    --------
    >>> X, y = np.arange(20.0).reshape(10, 2), np.array([1.0, -1.0] * 5)
    >>> federate(X, y, 3, {"name": "dirichlet", "concentration": 1.0}).n_clients
    3
    """
    name, params = partition_spec(partition)
    fn = _partitioners()[name]
    labels = np.asarray(labels)
    first = next(iter(inspect.signature(fn).parameters))
    data_arg = labels if first == "labels" else len(labels)
    parts = fn(data_arg, n_clients, seed=seed, **params)
    return split_to_clients(features, labels, parts, dtype=dtype)


def _standardize(features: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance per feature (constant features are left at zero)."""
    std = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(std > 0, std, 1.0)


def breast_cancer(n_clients: int = 10, partition: Any = "iid", seed: int = 0,
                  standardize: bool = True, unit_norm: bool = False) -> ClientData:
    """scikit-learn's bundled breast-cancer set (569 samples, 30 features) split among clients.

    Parameters
    ----------
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`federate` (``{"name": "dirichlet", "concentration": 0.2}`` gives label
        skew).
    seed : int, default 0
        Seeds the partition.
    standardize : bool, default True
        Scale every feature to zero mean and unit variance over the pooled set.
    unit_norm : bool, default False
        Then scale every sample to unit ℓ2 norm (so a logistic loss has ``L ≤ 1/4``).

    Returns
    -------
    ClientData
        Labels ±1 (+1 = benign), for the logistic loss.

    Examples
    --------
    >>> data = breast_cancer(n_clients=5, partition={"name": "dirichlet", "concentration": 1.0})
    >>> data.n_clients, data.n_samples, data.feature_shape
    (5, 569, (30,))
    """
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError as exc:  # scikit-learn is the `data` extra (and in `dev`)
        raise ImportError("breast_cancer needs scikit-learn: pip install 'fedcomp[data]' "
                          "(or pip install scikit-learn)") from exc
    bunch = load_breast_cancer()
    features = np.asarray(bunch.data, dtype=np.float64)
    labels = np.where(np.asarray(bunch.target) == 1, 1.0, -1.0)
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


def _prepare(features: np.ndarray, labels: np.ndarray, n_clients: int, partition: Any,
             seed: int, standardize: bool, unit_norm: bool) -> ClientData:
    if standardize:
        features = _standardize(features)
    if unit_norm:
        norms = np.linalg.norm(features, axis=1, keepdims=True)
        features = features / np.where(norms > 0, norms, 1.0)
    return federate(features, labels, n_clients, partition, seed)


def libsvm_file(path: str, n_clients: int = 10, partition: Any = "iid", seed: int = 0,
                n_features: int | None = None, standardize: bool = False,
                unit_norm: bool = False) -> ClientData:
    """A LIBSVM-format file (:func:`load_libsvm`) split among clients (:func:`federate`).

    Parameters
    ----------
    path : str
        The file (``~`` and ``$FEDCOMP_DATA_DIR``-relative names are expanded: a bare
        file name is looked up in :func:`data_dir`).
    n_clients, partition, seed, standardize, unit_norm
        As in :func:`breast_cancer`.
    n_features : int, optional
        See :func:`load_libsvm`.

    Returns
    -------
    ClientData
    """
    features, labels = load_libsvm(_locate(path), n_features=n_features)
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


def a9a(path: str = "a9a", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
        standardize: bool = False, unit_norm: bool = False) -> ClientData:
    """The A9A (Adult) training set of seed 002's Fig. 1, from a local LIBSVM file.

    Parameters
    ----------
    path : str, default "a9a"
        The file; a bare name is looked up in :func:`data_dir`. Get it with
        ``fedcomp.data.fetch("a9a")`` on a machine with internet.
    n_clients, partition, seed, standardize, unit_norm
        As in :func:`breast_cancer`.

    Returns
    -------
    ClientData
        32,561 samples × 123 binary features, labels ±1.
    """
    features, labels = load_libsvm(_locate(path, "a9a"),
                                   n_features=SOURCES["a9a"]["n_features"])
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


# --- files and downloads -------------------------------------------------------------------
def data_dir() -> Path:
    """``$FEDCOMP_DATA_DIR``, else ``~/.cache/fedcomp/data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or Path.home() / ".cache" / "fedcomp" / "data")


def _locate(path: str, name: str | None = None) -> Path:
    candidate = Path(os.path.expanduser(path))
    if not candidate.is_absolute() and not candidate.exists():
        candidate = data_dir() / candidate
    if not candidate.exists():
        hint = (f"fedcomp.data.fetch({name!r}) downloads it (needs internet)" if name
                else "pass the path of the file")
        raise FileNotFoundError(f"data file {path!r} not found (also looked in {data_dir()}, "
                                f"set ${DATA_DIR_ENV} to change it); {hint}")
    return candidate


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 digest of a file (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: str | Path, sha256: str | None, *, timeout: float = 60.0,
             max_bytes: int = 1 << 30) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its SHA-256.

    Parameters
    ----------
    url : str
        An ``http://`` or ``https://`` address.
    dest : path
        The file to create (its directory is created); written only after the checks pass.
    sha256 : str or None
        Expected hex digest; ``None`` skips the check (the caller then verifies the
        content itself, as :func:`fetch` does for files without a pinned digest).
    timeout : float, default 60
        Seconds for the connection and each read.
    max_bytes : int, default 1 GiB
        Abort when the response grows beyond this.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ValueError
        For another URL scheme, a response over ``max_bytes`` or a checksum mismatch (the
        partial file is removed; ``dest`` is left untouched).
    """
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"download: only http(s) URLs are fetched (got {url!r})")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := resp.read(1 << 16):
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"download: {url} is larger than max_bytes={max_bytes}")
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise ValueError(f"download: checksum mismatch for {url}: expected sha256 {sha256}, "
                             f"got {digest.hexdigest()}; the file was not saved")
        shutil.move(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest


def fetch(name: str, directory: str | Path | None = None, *, url: str | None = None,
          timeout: float = 60.0) -> Path:
    """Download a named data set of :data:`SOURCES` into ``directory`` (default
    :func:`data_dir`) unless it is already there; return its path.

    With a pinned ``sha256`` the download is verified against it; without one the file
    must parse as LIBSVM with the expected shape, and its digest is recorded in
    ``<name>.sha256`` beside it so a later replacement of the file is detected.
    ``url`` overrides the source (mirrors, tests).
    """
    if name not in SOURCES:
        raise ValueError(f"fetch: unknown data set {name!r}; known: {sorted(SOURCES)}")
    source = SOURCES[name]
    path = Path(directory or data_dir()) / name
    record = path.with_suffix(".sha256")
    if path.exists():
        expected = source["sha256"] or (record.read_text().split()[0] if record.exists()
                                        else None)
        if expected is not None and sha256_of(path) != expected:
            raise ValueError(f"fetch: {path} does not match its recorded sha256 {expected}; "
                             "delete it to download again")
        return path
    download(url or source["url"], path, source["sha256"], timeout=timeout)
    if source["sha256"] is None:
        try:
            features, _ = load_libsvm(path, n_features=source["n_features"])
        except ValueError as exc:
            path.unlink()
            raise ValueError(f"fetch: the download of {name} is not a LIBSVM file: {exc}"
                             ) from exc
        if features.shape[0] != source["n_samples"]:
            path.unlink()
            raise ValueError(f"fetch: {name} should have {source['n_samples']} samples, the "
                             f"download has {features.shape[0]}; not saved")
        record.write_text(f"{sha256_of(path)}  {name}\n")
    return path
