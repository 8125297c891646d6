"""Partitioners: split one pooled data set among clients.

Each partitioner is a pure function of the labels (or the sample count, or the group —
writer — of each sample), the number of clients and a ``seed`` (one
``np.random.default_rng(seed)``), and returns one sorted index array per client — disjoint,
covering every sample, none empty. :func:`~fedcomp.data.split_to_clients` turns such a
partition into a :class:`ClientData`.

The schemes are those of the FL benchmarks: IID; Dirichlet label skew, each class spread
over the clients by shares ``~ Dir(α·1)`` (Yurochkin et al., "Bayesian Nonparametric
Federated Learning of Neural Networks", ICML 2019; Li, Diao, Chen, He, ICDE 2022 below —
the scheme FedCanon's experiments use; Hsu, Qi, Brown 2019 instead draw each *client's*
class mix ``~ Dir(α·p)``, which for C balanced classes is more skewed at the same α);
label-sorted shards (McMahan et al., "Communication-Efficient
Learning of Deep Networks from Decentralized Data", AISTATS 2017); Dirichlet quantity skew
(Li, Diao, Chen, He, "Federated Learning on Non-IID Data Silos: An Experimental Study",
ICDE 2022); the natural partition by writer and a Dirichlet over writer ids (Caldas et al.,
"LEAF: A Benchmark for Federated Settings", 2018, where FEMNIST's clients are writers).
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .._registry import Entry, Registry
from ._checks import distinct_ids

#: Dirichlet label-skew draws tried before giving up on ``min_size``.
MAX_RETRIES = 1000


def check_integer(name: str, key: str, value: Any) -> int:
    """``value`` as an ``int`` if it is an integer (NumPy's too), else a ValueError.

    ``operator.index`` semantics: ``2.5`` or ``2.0`` clients would otherwise be truncated by
    ``np.array_split`` or fail inside NumPy with a message that names no parameter.
    """
    if isinstance(value, bool):
        raise ValueError(f"{name}: {key} must be an integer (got {value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name}: {key} must be an integer (got {value!r})") from None


def _class_ids(name: str, labels: Any) -> np.ndarray:
    """``labels`` as a 1-D array of class ids (a one-hot matrix would be read as samples)."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{name}: labels must be a 1-D array of class ids (got shape "
                         f"{labels.shape}); for one-hot labels pass labels.argmax(axis=1)")
    return labels


def _rng(name: str, seed: int) -> np.random.Generator:
    """``np.random.default_rng(seed)`` for a non-negative integer ``seed`` (named if not)."""
    seed = check_integer(name, "seed", seed)
    if seed < 0:
        raise ValueError(f"{name}: seed must be a non-negative integer (got {seed})")
    return np.random.default_rng(seed)


def _check_counts(name: str, n_samples: int, n_clients: int, min_size: int = 1) -> None:
    for key, value in (("n_samples", n_samples), ("n_clients", n_clients),
                       ("min_size", min_size)):
        check_integer(name, key, value)
    if n_clients < 1:
        raise ValueError(f"{name}: n_clients must be >= 1 (got {n_clients})")
    if min_size < 1:
        raise ValueError(f"{name}: min_size must be >= 1 (got {min_size}); clients cannot be empty")
    if n_samples < n_clients * min_size:
        raise ValueError(f"{name}: {n_samples} samples cannot give {n_clients} clients "
                         f"{min_size} sample(s) each; use fewer clients or a smaller min_size")


def _check_concentration(name: str, concentration: float) -> None:
    if not (isinstance(concentration, numbers.Real) and not isinstance(concentration, bool)
            and math.isfinite(concentration) and concentration > 0):
        raise ValueError(f"{name}: concentration must be > 0 and finite (a number; got "
                         f"{concentration!r}); small values give skewed clients, large ones "
                         "near-uniform clients (partition = 'iid' for uniform ones)")


def _dirichlet_shares(name: str, rng: np.random.Generator, n_clients: int,
                      concentration: float) -> np.ndarray:
    """``p ~ Dir(concentration·1)``, checked to be a probability vector.

    NumPy's sampler returns zeros (concentration near the float maximum) or NaN (inf)
    instead of failing; such shares would duplicate samples or leave clients empty.
    """
    shares = rng.dirichlet(np.full(n_clients, float(concentration)))
    if not (np.isfinite(shares).all() and abs(shares.sum() - 1.0) < 1e-6):
        raise ValueError(f"{name}: Dir(concentration={concentration!r}) gave shares "
                         f"summing to {float(shares.sum())!r}, not 1: the concentration is too "
                         "large for floating point; 1e6 is near-uniform already, or use "
                         "partition = 'iid'")
    return shares


def _split_by_proportions(index: np.ndarray, proportions: np.ndarray) -> list[np.ndarray]:
    """Consecutive pieces of ``index`` with sizes ``floor(cumsum(p)·n)`` differences."""
    cuts = (np.cumsum(proportions)[:-1] * len(index)).astype(np.int64)
    return np.split(index, cuts)


def partition_iid(n_samples: int, n_clients: int, seed: int = 0) -> list[np.ndarray]:
    """Shuffle the samples and deal them into ``n_clients`` near-equal parts.

    Parameters
    ----------
    n_samples, n_clients : int
    seed : int, default 0

    Returns
    -------
    list of numpy int arrays
        Client i's sample indices (sorted); sizes differ by at most one.

    Examples
    --------
    >>> [len(p) for p in partition_iid(10, 3)]
    [4, 3, 3]
    """
    _check_counts("partition_iid", n_samples, n_clients)
    perm = _rng("partition_iid", seed).permutation(n_samples)
    return [np.sort(p) for p in np.array_split(perm, n_clients)]


def partition_contiguous(n_samples: int, n_clients: int, seed: int = 0) -> list[np.ndarray]:
    """The samples in their own order, cut into ``n_clients`` consecutive near-equal parts.

    The split "by rows" of a file whose rows are already grouped (by time, by source):
    client i gets rows ``i·n/k`` to ``(i+1)·n/k``. ``seed`` is accepted for the common
    signature, checked like every partitioner's and unused (nothing is random).

    Examples
    --------
    >>> [p.tolist() for p in partition_contiguous(5, 2)]
    [[0, 1, 2], [3, 4]]
    """
    n_samples = check_integer("contiguous", "n_samples", n_samples)
    n_clients = check_integer("contiguous", "n_clients", n_clients)
    _check_counts("contiguous", n_samples, n_clients)
    _rng("contiguous", seed)  # a bad seed is refused here as everywhere
    return np.array_split(np.arange(n_samples), n_clients)


def partition_dirichlet(labels: Any, n_clients: int, concentration: float, seed: int = 0,
                        min_size: int = 1) -> list[np.ndarray]:
    """Dirichlet label skew: each class is spread over clients in ``Dir(concentration)`` shares.

    Parameters
    ----------
    labels : array, shape (n_samples,)
        Class of each sample (any dtype with ``np.unique``: ints, ±1 floats, strings).
    n_clients : int
    concentration : float
        Dirichlet parameter (the common "α" of the literature): 0.1 gives clients dominated
        by one or two classes, 100 nearly the global label mix.
    seed : int, default 0
    min_size : int, default 1
        Every client gets at least this many samples: whole draws are repeated (up to
        :data:`MAX_RETRIES`) until one satisfies it.

    Returns
    -------
    list of numpy int arrays

    Raises
    ------
    ValueError
        When no draw within the retry budget gives every client ``min_size`` samples.

    Notes
    -----
    For each class c (in sorted order): shuffle its samples, draw ``p ~ Dir(concentration·1)``
    over the clients and give client i the next ``floor(n_c Σ_{l≤i} p_l) − floor(n_c
    Σ_{l<i} p_l)`` of them (Yurochkin et al. 2019; Li et al. 2022 — not Hsu et al.'s per-
    client ``Dir(α·p)``, whose skew differs at the same α: see the module docstring).

    Examples
    --------
    >>> labels = [0] * 50 + [1] * 50
    >>> parts = partition_dirichlet(labels, 4, concentration=0.5, seed=0)
    >>> sum(len(p) for p in parts), all(len(p) > 0 for p in parts)
    (100, True)
    """
    name = "partition_dirichlet"
    labels = _class_ids(name, labels)
    _check_counts(name, len(labels), n_clients, min_size)
    _check_concentration(name, concentration)
    rng = _rng(name, seed)

    def draw() -> Callable[[], np.ndarray]:
        return lambda: _dirichlet_shares(name, rng, n_clients, concentration)

    return _spread_classes(name, rng, labels, n_clients, min_size, draw,
                           f"concentration={concentration}, {len(labels)} samples; raise "
                           "concentration, lower min_size or use fewer clients")


def _spread_classes(name: str, rng: np.random.Generator, labels: np.ndarray, n_clients: int,
                    min_size: int, draw: Callable[[], Callable[[], np.ndarray]], hint: str
                    ) -> list[np.ndarray]:
    """Each class's samples, shuffled, split over the clients by shares; whole draws are
    repeated (up to :data:`MAX_RETRIES`) until every client has ``min_size`` samples.

    ``draw()`` starts a draw and returns the function giving the next class's shares
    (called once per class, in sorted class order, before that class is shuffled).
    """
    classes = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    for _ in range(MAX_RETRIES):
        shares_of_next_class = draw()
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for index in classes:
            shares = shares_of_next_class()
            for i, piece in enumerate(_split_by_proportions(rng.permutation(index), shares)):
                parts[i].append(piece)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in out) >= min_size:
            return out
    raise ValueError(f"{name}: no draw in {MAX_RETRIES} gave all {n_clients} clients >= "
                     f"{min_size} sample(s) ({hint})")


def partition_shards(labels: Any, n_clients: int, shards_per_client: int, seed: int = 0
                     ) -> list[np.ndarray]:
    """Pathological label skew: label-sorted shards, ``shards_per_client`` per client.

    Parameters
    ----------
    labels : array, shape (n_samples,)
    n_clients, shards_per_client : int
    seed : int, default 0

    Returns
    -------
    list of numpy int arrays

    Notes
    -----
    Samples are shuffled, stably sorted by label, cut into ``n_clients·shards_per_client``
    near-equal consecutive shards, and the shards are dealt to clients in a random order
    (McMahan et al. 2017: 200 shards of 300 MNIST digits, 2 per client). When every shard
    holds one label, a client sees at most ``shards_per_client`` labels.

    Examples
    --------
    >>> labels = [0] * 10 + [1] * 10 + [2] * 10 + [3] * 10
    >>> parts = partition_shards(labels, 4, shards_per_client=2, seed=0)
    >>> [len(set(labels[j] for j in p)) <= 2 for p in parts]
    [True, True, True, True]
    """
    labels = _class_ids("partition_shards", labels)
    n_clients = check_integer("partition_shards", "n_clients", n_clients)
    shards_per_client = check_integer("partition_shards", "shards_per_client", shards_per_client)
    if shards_per_client < 1:
        raise ValueError(f"partition_shards: shards_per_client must be >= 1 "
                         f"(got {shards_per_client})")
    n_shards = n_clients * shards_per_client
    if n_clients < 1 or len(labels) < n_shards:
        raise ValueError(f"partition_shards: {len(labels)} samples cannot fill {n_clients} x "
                         f"{shards_per_client} nonempty shards; use fewer clients or shards")
    rng = _rng("partition_shards", seed)
    shuffled = rng.permutation(len(labels))  # random order within each label
    order = shuffled[np.argsort(labels[shuffled], kind="stable")]
    shards = np.array_split(order, n_shards)
    deal = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    return [np.sort(np.concatenate([shards[s] for s in row])) for row in deal]


def partition_quantity_skew(n_samples: int, n_clients: int, concentration: float,
                            seed: int = 0, min_size: int = 1) -> list[np.ndarray]:
    """Quantity skew: IID samples, client sizes ``min_size + Dir(concentration)`` shares.

    Parameters
    ----------
    n_samples, n_clients : int
    concentration : float
        Dirichlet parameter: small values give a few large and many tiny clients.
    seed : int, default 0
    min_size : int, default 1

    Returns
    -------
    list of numpy int arrays

    Notes
    -----
    Each client first gets ``min_size`` samples; the other ``n_samples − n_clients·min_size``
    are shared in proportions ``p ~ Dir(concentration·1)`` (largest remainders round), so
    sizes are ∝ ``p`` up to ``min_size`` and the draw never has to be repeated (Li, Diao,
    Chen, He 2022 resample instead, which rarely succeeds for small concentration).

    Examples
    --------
    >>> parts = partition_quantity_skew(100, 5, concentration=0.5, seed=0)
    >>> sum(len(p) for p in parts), min(len(p) for p in parts) >= 1
    (100, True)
    """
    _check_counts("partition_quantity_skew", n_samples, n_clients, min_size)
    _check_concentration("partition_quantity_skew", concentration)
    rng = _rng("partition_quantity_skew", seed)
    sizes = _dirichlet_sizes("partition_quantity_skew", rng, n_samples, n_clients,
                             concentration, min_size)
    perm = rng.permutation(n_samples)
    return [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]


def _dirichlet_sizes(name: str, rng: np.random.Generator, total: int, n_clients: int,
                     concentration: float, min_size: int) -> np.ndarray:
    """``min_size`` each, the rest in ``Dir(concentration)`` shares (largest remainders)."""
    shares = _dirichlet_shares(name, rng, n_clients, concentration)
    rest = total - n_clients * min_size
    exact = shares * rest
    sizes = np.floor(exact).astype(np.int64)
    leftover = rest - int(sizes.sum())
    sizes[np.argsort(-(exact - sizes), kind="stable")[:leftover]] += 1
    return sizes + min_size


def _group_ids(name: str, groups: Any, n_clients: int) -> tuple[np.ndarray, int]:
    """Dense ids ``0..n_groups-1`` of each sample's group (sorted group order), checked."""
    given, groups = groups, np.asarray(groups)
    n_clients = check_integer(name, "n_clients", n_clients)
    if groups.ndim != 1 or len(groups) == 0:
        raise ValueError(f"{name}: groups must be a nonempty 1-D array (one writer id per "
                         f"sample), got shape {groups.shape}")
    _, dense = distinct_ids(given, "groups", "group", f"{name}: ")  # 0 and "0" stay apart
    n_groups = int(dense.max()) + 1
    if n_clients < 1 or n_groups < n_clients:
        raise ValueError(f"{name}: {n_groups} groups (writers) cannot give {n_clients} clients "
                         "one whole group each; use at most that many clients")
    return dense.reshape(-1), n_groups


def _parts_of_groups(dense: np.ndarray, client_of_group: np.ndarray, n_clients: int
                     ) -> list[np.ndarray]:
    """Client i's samples: those whose group is dealt to i (indices sorted)."""
    owner = client_of_group[dense]
    order = np.argsort(owner, kind="stable")  # stable: indices stay sorted within a client
    return np.split(order, np.cumsum(np.bincount(owner, minlength=n_clients))[:-1])


def partition_groups(groups: Any, n_clients: int, seed: int = 0) -> list[np.ndarray]:
    """Natural partition: whole groups (writers) dealt to clients, near-equal group counts.

    Parameters
    ----------
    groups : array, shape (n_samples,)
        The group (writer id) of each sample: any dtype with ``np.unique``.
    n_clients : int
        At most the number of groups; equal to it gives one client per writer.
    seed : int, default 0
        Seeds the order in which groups are dealt.

    Returns
    -------
    list of numpy int arrays
        Every group lies whole in one client; clients hold ``⌊G/n⌋`` or ``⌈G/n⌉`` groups.

    Examples
    --------
    >>> groups = ["ann"] * 3 + ["bob"] * 2 + ["cy"] * 4 + ["dee"]
    >>> sorted(len(p) for p in partition_groups(groups, 4, seed=0))  # one writer each
    [1, 2, 3, 4]
    >>> sorted(len(p) for p in partition_groups(groups, 2, seed=0))  # two writers each
    [3, 7]
    """
    dense, n_groups = _group_ids("partition_groups", groups, n_clients)
    perm = _rng("partition_groups", seed).permutation(n_groups)
    client_of_group = np.empty(n_groups, dtype=np.int64)
    for i, chunk in enumerate(np.array_split(perm, n_clients)):
        client_of_group[chunk] = i
    return _parts_of_groups(dense, client_of_group, n_clients)


def partition_dirichlet_groups(groups: Any, n_clients: int, concentration: float,
                               seed: int = 0) -> list[np.ndarray]:
    """Dirichlet over writer ids: whole groups, ``Dir(concentration)`` shares of them per client.

    Parameters
    ----------
    groups : array, shape (n_samples,)
        The group (writer id) of each sample.
    n_clients : int
        At most the number of groups.
    concentration : float
        Dirichlet parameter: small values give a few clients with many writers and many
        clients with one; large values near-equal numbers of writers.
    seed : int, default 0

    Returns
    -------
    list of numpy int arrays
        Every group lies whole in one client; every client holds at least one group.

    Notes
    -----
    Draw ``p ~ Dir(concentration·1)`` over the clients; client i gets one group plus
    ``≈ p_i (G − n)`` more (largest remainders round, as :func:`partition_quantity_skew`
    does for samples), the groups taken in a seeded random order. Label skew then comes
    from the writers themselves, not from a label-based draw.

    Examples
    --------
    >>> groups = np.repeat(np.arange(20), 5)  # 20 writers, 5 samples each
    >>> parts = partition_dirichlet_groups(groups, 4, concentration=0.5, seed=0)
    >>> sum(len(p) for p in parts), all(len(set(groups[p])) >= 1 for p in parts)
    (100, True)
    """
    dense, n_groups = _group_ids("partition_dirichlet_groups", groups, n_clients)
    _check_concentration("partition_dirichlet_groups", concentration)
    rng = _rng("partition_dirichlet_groups", seed)
    sizes = _dirichlet_sizes("partition_dirichlet_groups", rng, n_groups, n_clients,
                             concentration, 1)
    client_of_group = np.empty(n_groups, dtype=np.int64)
    client_of_group[rng.permutation(n_groups)] = np.repeat(np.arange(n_clients), sizes)
    return _parts_of_groups(dense, client_of_group, n_clients)


def partition_classes(labels: Any, n_clients: int, classes_per_client: int, seed: int = 0
                      ) -> list[np.ndarray]:
    """Label skew by count: every client holds exactly ``classes_per_client`` classes.

    Parameters
    ----------
    labels : array, shape (n_samples,)
    n_clients : int
    classes_per_client : int
        ``k``: the number of distinct classes each client sees (1 ≤ k ≤ the classes).
    seed : int, default 0

    Returns
    -------
    list of numpy int arrays

    Raises
    ------
    ValueError
        When ``n_clients · k`` slots cannot hold every class (some samples would belong to
        no client), or a class has fewer samples than clients holding it.

    Notes
    -----
    NIID-Bench's ``#C=k`` (Li, Diao, Chen, He, ICDE 2022; Flower's ``PathologicalPartitioner``
    asks the same), with every sample kept: the classes are shuffled and dealt round-robin
    to the clients first, so that each class has a holder, then each client's remaining
    ``k`` − dealt classes are drawn at random among those it does not hold. Each class's
    samples are shuffled and split into near-equal parts, one per holder. (NIID-Bench starts
    client i at class ``i mod C`` and drops the samples of classes nobody drew.)

    Examples
    --------
    >>> labels = np.repeat(np.arange(5), 20)
    >>> parts = partition_classes(labels, 4, classes_per_client=2, seed=0)
    >>> [len(np.unique(labels[p])) for p in parts], sum(len(p) for p in parts)
    ([2, 2, 2, 2], 100)
    """
    name = "partition_classes"
    labels = _class_ids(name, labels)
    n_clients = check_integer(name, "n_clients", n_clients)
    k = check_integer(name, "classes_per_client", classes_per_client)
    classes = np.unique(labels)
    if n_clients < 1 or not 1 <= k <= len(classes):
        raise ValueError(f"{name}: classes_per_client must be in [1, {len(classes)}] (the "
                         f"classes) and n_clients >= 1 (got {k}, {n_clients})")
    if n_clients * k < len(classes):
        raise ValueError(f"{name}: {n_clients} clients x {k} classes cannot hold all "
                         f"{len(classes)} classes; raise classes_per_client to "
                         f"{math.ceil(len(classes) / n_clients)} or use more clients")
    rng = _rng(name, seed)
    held: list[list[int]] = [[] for _ in range(n_clients)]
    for slot, c in enumerate(rng.permutation(len(classes))):  # every class gets a holder
        held[slot % n_clients].append(int(c))
    for mine in held:
        others = np.setdiff1d(np.arange(len(classes)), mine)
        mine.extend(int(c) for c in rng.choice(others, size=k - len(mine), replace=False))
    holders = [[i for i in range(n_clients) if c in held[i]] for c in range(len(classes))]
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for c, who in enumerate(holders):
        index = rng.permutation(np.flatnonzero(labels == classes[c]))
        if len(index) < len(who):
            raise ValueError(f"{name}: class {classes[c]!r} has {len(index)} sample(s) for "
                             f"{len(who)} clients holding it; use fewer clients or "
                             "classes_per_client")
        for i, piece in zip(who, np.array_split(index, len(who)), strict=True):
            parts[i].append(piece)
    return [np.sort(np.concatenate(p)) for p in parts]


def partition_mixed(labels: Any, n_clients: int, concentration: float,
                    quantity_concentration: float, seed: int = 0, min_size: int = 1
                    ) -> list[np.ndarray]:
    """Label and quantity skew together: Dirichlet label shares weighted by client sizes.

    Parameters
    ----------
    labels : array, shape (n_samples,)
    n_clients : int
    concentration : float
        The label skew's Dirichlet parameter (as ``"dirichlet"``'s).
    quantity_concentration : float
        The quantity skew's (as ``"quantity_skew"``'s): small values give a few large
        clients and many small ones.
    seed : int, default 0
    min_size : int, default 1
        Every client gets at least this many samples (whole draws are repeated, up to
        :data:`MAX_RETRIES`).

    Returns
    -------
    list of numpy int arrays

    Notes
    -----
    Client weights ``w ~ Dir(quantity_concentration·1)`` are drawn once; each class c is
    spread over the clients in shares ``∝ w_i · u_{c,i}`` with ``u_c ~ Dir(concentration·1)``.
    A client's expected size is then ∝ its weight (quantity skew) and its class mix is
    skewed by ``u`` (label skew); ``quantity_concentration → ∞`` gives ``"dirichlet"``'s
    scheme back. The mixed skews of Li, Diao, Chen, He (ICDE 2022) combine two schemes
    the same way, one drawn over the other.

    Examples
    --------
    >>> labels = np.repeat(np.arange(4), 50)
    >>> parts = partition_mixed(labels, 5, concentration=0.5, quantity_concentration=0.5)
    >>> sum(len(p) for p in parts), all(len(p) > 0 for p in parts)
    (200, True)
    """
    name = "partition_mixed"
    labels = _class_ids(name, labels)
    _check_counts(name, len(labels), n_clients, min_size)
    _check_concentration(name, concentration)
    _check_concentration(name, quantity_concentration)
    rng = _rng(name, seed)

    def draw() -> Callable[[], np.ndarray]:
        weights = _dirichlet_shares(name, rng, n_clients, quantity_concentration)

        def shares() -> np.ndarray:
            weighted = weights * _dirichlet_shares(name, rng, n_clients, concentration)
            total = weighted.sum()
            return weighted / total if total > 0 else np.full(n_clients, 1.0 / n_clients)
        return shares

    return _spread_classes(name, rng, labels, n_clients, min_size, draw,
                           f"concentration={concentration}, quantity_concentration="
                           f"{quantity_concentration}; raise either concentration or use "
                           "fewer clients")


def _partition_flwr(labels: Any, n_clients: int, partitioner: str, seed: int = 0,
                    **options: Any) -> list[np.ndarray]:
    """A Flower Datasets partitioner by class name over the samples' labels.

    :func:`fedcomp.data._flwr.partition_flwr`, imported only when a partition names it
    (``flwr-datasets`` comes with the ``flower`` extra).

    Parameters
    ----------
    labels : array, shape (n_samples,)
    n_clients : int
        The partitioner's ``num_partitions``.
    partitioner : str
        A class of ``flwr_datasets.partitioner``, e.g. ``"DirichletPartitioner"``; every
        other key of the partition spec is its argument (``alpha = 0.5``), and
        ``partition_by`` defaults to the label column.
    seed : int, default 0
        The partitioner's ``seed``, where it takes one.

    Returns
    -------
    list of numpy int arrays
    """
    from ._flwr import partition_flwr

    _rng("partition_flwr", seed)  # a bad seed is refused here as everywhere
    return partition_flwr(labels, n_clients, partitioner, seed=int(seed), **options)


#: Partitioners by name: pure functions returning one index array per client, with one line
#: each for ``fedcomp list``. The data set supplies the samples (labels, a count or writer
#: ids), the number of clients and the seed; a partition spec names the rest.
PARTITIONERS: Registry[Entry] = Registry("partitioner", [
    Entry("iid", partition_iid, "uniform shuffle into near-equal clients"),
    Entry("contiguous", partition_contiguous,
          "by rows: the samples in their own order, in consecutive near-equal clients"),
    Entry("dirichlet", partition_dirichlet,
          "label skew: each class spread over clients by Dir(concentration) shares"),
    Entry("shards", partition_shards,
          "label-sorted shards, shards_per_client per client (McMahan et al.)"),
    Entry("quantity_skew", partition_quantity_skew,
          "IID samples, client sizes from Dir(concentration) shares"),
    Entry("classes", partition_classes,
          "label skew by count: exactly classes_per_client classes per client (NIID-Bench's "
          "#C=k)"),
    Entry("mixed", partition_mixed,
          "label and quantity skew: Dir(concentration) class shares weighted by "
          "Dir(quantity_concentration) client sizes"),
    Entry("writers", partition_groups,
          "natural partition: whole writers dealt to clients (one each when n_clients = "
          "writers); femnist, digits"),
    Entry("dirichlet_writers", partition_dirichlet_groups,
          "Dirichlet over writer ids: whole writers, Dir(concentration) shares of them per "
          "client; femnist, digits"),
    Entry("flwr", _partition_flwr,
          "a Flower Datasets partitioner by class name (partitioner = "
          "'DirichletPartitioner', alpha = 0.5, ...); the flower extra"),
], supplied=("labels", "n_samples", "groups", "n_clients", "seed"))

__all__ = ["PARTITIONERS", "partition_classes", "partition_contiguous",
           "partition_dirichlet", "partition_mixed",
           "partition_dirichlet_groups", "partition_groups", "partition_iid",
           "partition_quantity_skew", "partition_shards"]
