"""TAMUNA: local training, pattern compression and partial participation.

References
----------
Condat, L., Agarský, I., Malinovsky, G., Richtárik, P. "TAMUNA: Doubly Accelerated
Distributed Optimization with Local Training, Compression, and Partial Participation",
arXiv:2302.09832, Algorithm 1.
"""

from __future__ import annotations

from typing import Any

from ._base import FederatedAlgorithm, SetupContext, check_positive
from ._condat import as_algorithm, check_local_training, check_smooth, masked_scaffnew
from .compressed_scaffnew import check_sparsity, largest_chi


def _check_cohort(owner: str, cohort_size: Any, s: int, n: int | None = None) -> None:
    is_int = isinstance(cohort_size, int) and not isinstance(cohort_size, bool)
    if not (is_int and cohort_size >= s):
        raise ValueError(f"{owner}: cohort_size must be an integer >= s={s}, the clients of a "
                         f"round (got cohort_size={cohort_size!r})")
    if n is not None and cohort_size > n:
        raise ValueError(f"{owner}: cohort_size={cohort_size} exceeds the {n} clients; lower it "
                         "(cohort_size = n is full participation)")


def tamuna(client_lr: float = 0.1, comm_prob: float = 0.2, s: int = 2,
           cohort_size: int | None = None, eta: float | None = None) -> FederatedAlgorithm:
    r"""TAMUNA: local training and pattern compression, ``c`` of ``n`` clients a round.

    Parameters
    ----------
    client_lr : float, default 0.1
        Step ``γ`` of the local gradient steps (``γ < 2/L``).
    comm_prob : float in (0, 1], default 0.2
        ``p``: a round has ``L ~ Geometric(p)`` local steps (mean ``1/p``), the same number
        for every client of the round.
    s : int, default 2
        Each coordinate is sent by exactly ``s`` of the ``c`` clients of the round
        (``2 <= s <= c``); a round uploads ``ds`` values instead of ``cd``.
    cohort_size : int, optional
        ``c``: the clients of a round, drawn uniformly without replacement from the seed and
        the round; default every client (``n``), resolved by ``prepare``.
    eta : float, optional
        ``η`` of the control-variate step ``η/γ``; default ``p c(s−1)/(s(c−1))``, the
        largest value of the paper's theorem (``p`` for ``s = c``), resolved by ``prepare``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Problem: ``min (1/n) Σ_i f_i`` (``g = 0``, equal client weights; other regularizers and
    weights are refused — see below;
    ``tests/algorithms/test_condat.py::test_why_tamuna_has_no_prox_of_g`` shows that ProxSkip's
    server prox grafted onto the pattern-compressed average misses
    ``x*``: each coordinate's shifts are averaged over ``s`` clients, not all).
    Control variates ``h_i = 0`` (so ``Σ h_i = 0``).
    Round ``r``: draw the cohort ``Ω`` (``c`` clients) and ``L ≥ 1``; every ``i ∈ Ω``
    starts from ``x̄`` and takes ``L`` steps, then sends its masked iterate:

    .. math::

        x_i \leftarrow x_i - γ ∇f_i(x_i) + γ h_i \;(L \text{ times}), \qquad
        \bar x^{+} = \tfrac1s \sum_{j∈Ω} q_j ⊙ x_j, \qquad
        h_i \leftarrow h_i + \tfrac{η}{γ}\, q_i ⊙ (\bar x^{+} - x_i) \;(i ∈ Ω),

    the masks ``q_j`` a :class:`~fedcomp.compressors.PermS` pattern over the cohort (each
    coordinate kept by exactly ``s`` of its clients). Idle clients keep their ``h_i``.
    With ``c = n`` TAMUNA is :func:`~fedcomp.algorithms.compressed_scaffnew` with
    ``η = pχ`` (bit for bit here: the same draws).

    How it runs: the cohort is TAMUNA's own draw, keyed by ``(seed, round)``, so the runner
    runs it with every client in every round (``clients_per_round`` must be unset; use
    ``cohort_size``). An idle client computes nothing that is counted (no gradients) and
    sends a zero row of 0 bits; a client of round ``r`` applies its control-variate update
    at the start of round ``r + 1``, when it receives ``x̄⁺`` (its round-``r`` mask is
    redrawn from the seed). ``bits_up`` is exact (``ds`` values a round, no indices);
    ``bits_down`` counts ``x̄`` sent to all ``n`` clients each round, more than TAMUNA needs
    (the next cohort's ``d`` values and, for the last cohort, its masked coordinates).

    What was read: only the paper's first pages (abstract, introduction) could be read
    here. The rule above is written from them and from the Flower baseline of TAMUNA by two
    of its authors (``adap/flower``, ``baselines/tamuna``: a ``d × c`` template with ``s``
    ones a row and shuffled columns, a masked upload summed and divided by ``s``, the
    control-variate step ``η/γ`` with ``η ≤ p c(s−1)/(s(c−1))``, ``L`` geometric and common
    to the round). That baseline updates ``h_i`` with the model of the client's *next*
    round; here it uses ``x̄⁺`` of its own round, which keeps ``Σ_i h_i = 0`` and ``x*`` a
    fixed point (the baseline's choice loses both under partial participation). No version
    of the paper read here treats a nonsmooth ``g``, so none is taken (the issue's "prox of
    ``g``" is not implemented: with masks, an average over ``s`` clients has no server prox
    that keeps ``x*`` fixed).

    References
    ----------
    Condat, Agarský, Malinovsky, Richtárik, arXiv:2302.09832 (TAMUNA, Algorithm 1).

    Examples
    --------
    >>> tamuna(client_lr=0.1, comm_prob=0.5, s=2, cohort_size=4).hyperparameters["eta"] is None
    True
    """
    owner = "tamuna"
    check_local_training(owner, client_lr, comm_prob)
    check_sparsity(owner, s)
    if cohort_size is not None:
        _check_cohort(owner, cohort_size, s)
    if eta is not None:
        check_positive(owner, eta=eta)
        if not eta <= comm_prob:
            raise ValueError(f"{owner}: eta must be in (0, comm_prob] (got eta={eta!r}, "
                             f"comm_prob={comm_prob!r}); the default is the theorem's largest "
                             "value p c(s-1)/(s(c-1))")

    def rate(n: int) -> float:
        c = n if cohort_size is None else cohort_size
        return comm_prob * largest_chi(c, s) if eta is None else eta

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        n = setup.n_clients
        if setup.clients_per_round is not None and setup.clients_per_round < n:
            raise ValueError(
                f"{owner} draws its own cohort each round (cohort_size clients; the others "
                f"idle, at no cost), so the runner runs it with full participation: every "
                f"client (no clients_per_round, got "
                f"{setup.clients_per_round} of {n}) and set cohort_size="
                f"{setup.clients_per_round} instead")
        check_smooth(owner, "TAMUNA's paper has no regularizer")(setup)
        if cohort_size is not None and eta is not None:
            return None  # resolved (a Flower node sees only its own clients)
        c = n if cohort_size is None else cohort_size
        _check_cohort(owner, c, s, n)
        check_sparsity(owner, s, c, "cohort size")
        return tamuna(client_lr, comm_prob, s, c, rate(n))

    return as_algorithm(owner, masked_scaffnew(owner, client_lr, comm_prob, s, rate, cohort_size),
                        dict(client_lr=client_lr, comm_prob=comm_prob, s=s,
                             cohort_size=cohort_size, eta=eta), prepare)
