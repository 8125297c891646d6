"""CompressedScaffnew: Scaffnew's local training with a pattern-sparsified upload.

References
----------
Condat, L., Agarský, I., Richtárik, P. "Provably Doubly Accelerated Federated Learning: The
First Theoretically Successful Combination of Local Training and Communication Compression"
(later "CompressedScaffnew: The First Theoretical Double Acceleration of Communication from
Local Training and Compression in Distributed Optimization"), arXiv:2210.13277, Algorithm 1.
"""

from __future__ import annotations

from typing import Any

from ._base import (
    FederatedAlgorithm,
    SetupContext,
    all_of,
    check_positive,
    require_full_participation,
)
from ._condat import as_algorithm, check_local_training, check_smooth, masked_scaffnew


def largest_chi(n: int, s: int) -> float:
    """``n(s−1) / (s(n−1))``: the largest ``χ`` of the paper's theorem (1 when ``s = n``).

    Examples
    --------
    >>> largest_chi(10, 10), largest_chi(10, 2)
    (1.0, 0.5555555555555556)
    """
    return 1.0 if n == s else n * (s - 1) / (s * (n - 1))


def check_sparsity(owner: str, s: Any, clients: int | None = None, what: str = "") -> None:
    """``s`` an integer ``>= 2`` and at most ``clients`` (the pattern's copies of every
    coordinate among ``clients``, when known)."""
    is_int = isinstance(s, int) and not isinstance(s, bool)
    if not (is_int and s >= 2):
        raise ValueError(f"{owner}: s (the clients that send each coordinate) must be an integer "
                         f">= 2 (got s={s!r})")
    if clients is not None and s > clients:
        raise ValueError(f"{owner}: s={s} exceeds the {what} ({clients}); s = {clients} is "
                         "uncompressed, lower s")


def compressed_scaffnew(client_lr: float = 0.1, comm_prob: float = 0.2, s: int = 2,
                        chi: float | None = None) -> FederatedAlgorithm:
    r"""CompressedScaffnew: Scaffnew whose uploads keep each coordinate at ``s`` of ``n`` clients.

    Parameters
    ----------
    client_lr : float, default 0.1
        Step ``γ`` of the local gradient steps (the paper's theorem: ``γ < 2/L``).
    comm_prob : float in (0, 1], default 0.2
        ``p``: the clients communicate after a local step with this probability.
    s : int, default 2
        Each coordinate is sent by exactly ``s`` of the ``n`` clients (``2 <= s <= n``), so a
        round uploads ``s/n`` of what Scaffnew uploads; ``s = n`` is uncompressed.
    chi : float, optional
        ``χ`` of the control-variate step ``pχ/γ``; default the theorem's largest
        ``n(s−1)/(s(n−1))`` (:func:`largest_chi`; 1 for ``s = n``), resolved by
        ``prepare``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Problem: ``min (1/n) Σ_i f_i`` (``g = 0``, equal client weights; other regularizers and
    weights are refused). With ``x̄`` the server model and the control variates
    ``h_i = 0`` (so ``Σ_i h_i = 0``), each iteration of Algorithm 1 is

    .. math::

        \hat x_i = x_i - γ ∇f_i(x_i) + γ h_i, \qquad
        \text{with probability } p:\;
        \bar x = \tfrac1s \sum_j q_j ⊙ \hat x_j,\;
        h_i \leftarrow h_i + \tfrac{pχ}{γ}\, q_i ⊙ (\bar x - \hat x_i),\;
        x_i = \bar x,

    and ``x_i = x̂_i`` otherwise. The binary masks ``q_i`` of a communication are drawn
    together (:class:`fedcomp.compressors.PermS`): every coordinate is kept by exactly
    ``s`` clients, so the control-variate updates sum to zero coordinate by coordinate.

    As in fedcomp's :func:`~fedcomp.algorithms.scaffnew`, a round is the run of local steps
    between two communications: its length is drawn from the common coin (geometric, mean
    ``1/p``; :func:`~fedcomp.algorithms.scaffnew.steps_until_communication`), and a client
    applies the control-variate update of the previous communication at the start of the
    next round, when it receives ``x̄`` (its mask of that round is redrawn from the
    seed). The upload is ``q_i ⊙ x̂_i``: ``⌊ds/n⌋`` or ``⌈ds/n⌉`` values and no indices
    (``bits_up`` counts exactly those; the pattern comes from the shared seed); the
    broadcast is the full ``x̄`` (``d`` floats to every client, as in the paper).

    With ``s = n`` (and so ``χ = 1``) this is Scaffnew; fedcomp's ``scaffnew`` uploads
    ``x̂_i − (γ/p) h_i`` (for its server prox), whose average differs from that of the
    ``x̂_i`` only by rounding, so the two agree to rounding error, not bit for bit
    (``tests/algorithms/test_condat.py``).

    The paper's algorithm box could not be read in full here (the search tool returns the
    papers' first pages only); the update above is written from the paper's description,
    its abstract and the TAMUNA baseline its coauthors wrote for Flower
    (``adap/flower``, ``baselines/tamuna``: masked upload, sum divided by ``s``,
    ``h_i += (η/γ) q_i ⊙ (x̄ − x̂_i)``, ``η ≤ p n(s−1)/(s(n−1))``), of which it is the
    full-participation case.

    References
    ----------
    Condat, Agarský, Richtárik, arXiv:2210.13277 (Algorithm 1, CompressedScaffnew).

    Examples
    --------
    >>> compressed_scaffnew(client_lr=0.1, comm_prob=0.5, s=3).hyperparameters["s"]
    3
    """
    owner = "compressed_scaffnew"
    check_local_training(owner, client_lr, comm_prob)
    check_sparsity(owner, s)
    if chi is not None:
        check_positive(owner, chi=chi)
        if not chi <= 1:
            raise ValueError(f"{owner}: chi must be in (0, 1] (got chi={chi!r}); the default "
                             "is the theorem's largest value n(s-1)/(s(n-1))")

    def rate(n: int) -> float:
        return comm_prob * (largest_chi(n, s) if chi is None else chi)

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        all_of(require_full_participation(owner),
               check_smooth(owner, "or scaffnew with server_prox for a composite problem"))(setup)
        if chi is not None:  # resolved (a Flower node sees only its own clients)
            return None
        check_sparsity(owner, s, setup.n_clients, "number of clients")
        return compressed_scaffnew(client_lr, comm_prob, s, largest_chi(setup.n_clients, s))

    return as_algorithm(owner, masked_scaffnew(owner, client_lr, comm_prob, s, rate, None),
                        dict(client_lr=client_lr, comm_prob=comm_prob, s=s, chi=chi), prepare)
