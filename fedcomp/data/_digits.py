"""scikit-learn's bundled 8×8 handwritten digits as client data: real images that need no
download (CI, offline machines), with writer-like groups for the partitions by writer.

References
----------
Alpaydin, Kaynak, "Optical Recognition of Handwritten Digits", UCI ML repository, 1998.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._extras import require
from ._client_data import ClientData
from ._images import _SPLIT, _check_classes, _image_data


# --- scikit-learn's digits ------------------------------------------------------------------
def digit_forms(labels: Any) -> np.ndarray:
    """Form (writer-like group) of each sample of scikit-learn's digits, from the label order.

    Parameters
    ----------
    labels : array, shape (n_samples,)
        ``load_digits().target`` in file order.

    Returns
    -------
    ndarray of int64, shape (n_samples,)
        ``0, 0, ..., 1, 1, ...``: the form each sample was cut from.

    Notes
    -----
    scikit-learn ships no writer ids, but its file (the UCI ``optdigits`` test set) lists the
    digits form by form: every form starts with 0–9 written three times, followed by the
    same 100 digits (a few digits of some forms are missing). A form starts where a run
    ``0123456789`` begins more than 30 labels (the three-fold header) after the first run
    of the previous form, moved back while the labels before it keep counting up (a form
    whose leading 0 is missing). This finds 14 forms of 122–130 digits.

    Examples
    --------
    >>> header = list(range(10)) * 3
    >>> np.bincount(digit_forms(header + [5] * 10 + header + [7, 3])).tolist()
    [40, 32]
    """
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) < 10:
        return np.zeros(len(labels), dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(labels, 10)
    runs = np.flatnonzero((windows == np.arange(10)).all(axis=1))
    starts = [0]
    last_run = -(10**9)
    for run in runs:
        if run - last_run <= 30:  # the second and third 0–9 of the same form
            continue
        last_run = start = int(run)
        while start > starts[-1] + 1 and labels[start - 1] == (labels[start] - 1) % 10:
            start -= 1
        if start > starts[-1]:
            starts.append(start)
    forms = np.zeros(len(labels), dtype=np.int64)
    forms[starts[1:]] = 1
    return np.cumsum(forms)


def digits(n_clients: int = 10, partition: Any = "iid", seed: int = 0, flatten: bool = False,
           test_fraction: float = 0.2, n_samples: int | None = None,
           dtype: str = "float64", n_classes: int = 10) -> ClientData:
    """scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes) among clients.

    Parameters
    ----------
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`~fedcomp.data.federate`: ``{"name": "dirichlet", "concentration": 0.3}``
        gives label skew; ``"writers"`` deals whole writer-like groups (forms, see Notes)
        to the clients, ``{"name": "dirichlet_writers", "concentration": 0.5}`` gives
        clients ``Dir`` shares of them (at most 14 clients for both).
    seed : int, default 0
        Seeds the partition, the test split and the subsample (separate streams).
    flatten : bool, default False
        Features of shape ``(n, 64)`` instead of ``(n, 1, 8, 8)``.
    test_fraction : float, default 0.2
        Share of the images held out (uniformly at random) as the pooled
        :attr:`~fedcomp.data.ClientData.holdout`; 0 keeps none.
    n_samples : int, optional
        Keep this many training images (seeded subsample) for reduced-size runs.
    dtype : str, default "float64"
        Feature dtype: float64 like the other CPU data sets (the reference solver's
        accuracy); "float32" for networks.
    n_classes : int, default 10
        Fixed by the data; a configuration names it (``data.n_classes = 10``) to shape a
        ``softmax`` model. Another value is an error.

    Returns
    -------
    ClientData
        Features: grey levels / 16, in ``[0, 1]``; targets: digits 0..9 (int64).

    Notes
    -----
    The images are the test set of the UCI "Optical Recognition of Handwritten Digits" data:
    32×32 bitmaps of forms filled in by 13 writers (says scikit-learn's description), each
    pixel of the 8×8 image counting the ink pixels of a 4×4 block. No writer ids are
    shipped; the file lists the digits form by form (:func:`digit_forms` finds 14 forms),
    so forms are the writer-like groups. They are an honest proxy rather than the truth:
    14 forms for 13 described writers means at least one writer may span two forms.

    Examples
    --------
    >>> data = digits(n_clients=5, partition="writers")
    >>> data.n_clients, data.feature_shape, data.holdout[0].shape
    (5, (1, 8, 8), (359, 1, 8, 8))
    """
    _check_classes("digits", n_classes, 10)
    datasets = require("sklearn.datasets", "fedcomp.data.digits")
    bunch = datasets.load_digits()
    images = np.asarray(bunch.images).reshape(-1, 1, 8, 8)
    labels = np.asarray(bunch.target, dtype=np.int64)
    forms = digit_forms(labels)
    if not 0 <= test_fraction < 1:
        raise ValueError(f"digits: test_fraction must be in [0, 1) (got {test_fraction})")
    n_held = round(test_fraction * len(labels))
    perm = np.random.default_rng([seed, _SPLIT]).permutation(len(labels))
    test, train = np.sort(perm[:n_held]), np.sort(perm[n_held:])
    return _image_data((images[train], labels[train]),
                       (images[test], labels[test]) if n_held else None, 16.0, n_clients,
                       partition, seed, flatten, n_samples, None, dtype, groups=forms[train])


__all__ = ["digit_forms", "digits"]
