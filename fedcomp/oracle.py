"""The only door from algorithms to data: counted (minibatch) gradients of a client block.

An :class:`Oracle` serves one block of clients for one round. ``grad(x)`` returns each
client's gradient at its own model — the full local gradient, or a minibatch gradient when
the run has a ``batch_size``. Minibatches are drawn with counter-based randomness keyed by
``(seed, round, client_id, draw)`` where ``draw`` numbers the gradient calls of the round,
so client i's k-th minibatch in round r never depends on the block it runs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._array import Array
from ._random import minibatch_indices
from .data import Batch
from .problem import Problem


@dataclass
class Counters:
    """Cumulative cost counters of a run (owned and updated by the runner and its oracles).

    Attributes
    ----------
    grad_evals : int
        Client gradient oracle calls (one per client per call, full or minibatch).
    sample_grads : int
        Per-sample gradients computed (``grad_evals`` × samples per call).
    prox_evals_client, prox_evals_server : int
        Proximal-operator evaluations by clients (one per client per call) and the server.
    floats_up, floats_down : int
        Floats uploaded by clients and downloaded by them, summed over participants (a
        compressed message counts the floats of its decoded form).
    bits_up, bits_down : int
        The same messages' exact encoded size in bits: floats × the bit width of their
        dtype (64 for float64) for uncompressed messages, the compressor's encoded size
        for compressed ones (:data:`fedcomp.algorithms._base.WIRE_BITS`).
    hessian_evals, value_evals : int
        Full local Hessians and loss values computed by clients (exact local solvers).
        The exact prox of a quadratic loss uses each client's Hessian and gradient at zero
        every round; a run computes them once and counts every use
        (:meth:`Oracle.constant`), so each engine counts alike.
    """

    grad_evals: int = 0
    sample_grads: int = 0
    prox_evals_client: int = 0
    prox_evals_server: int = 0
    floats_up: int = 0
    floats_down: int = 0
    bits_up: int = 0
    bits_down: int = 0
    hessian_evals: int = 0
    value_evals: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


#: The most bytes a run's :class:`BlockMemo` keeps (past it, values are computed anew).
MEMO_BYTES = 256 * 2**20


class BlockMemo:
    """Values that depend on a block's data alone, not on the round or the models, kept
    for a run: an exact local solver's ``(∇²f_i + I/η)⁻¹`` of a quadratic loss, whose
    Hessian is the same at every model and every round.

    The client executor holds one for the run and hands it to each round's
    :class:`Oracle`; values are keyed by what they are and the block's clients (a run of
    consecutive clients: :meth:`Oracle.constant`), each with
    the ``tag`` it was made for (the step ``η``): another tag replaces it. Past
    ``limit_bytes`` in all (many clients with many features) nothing more is kept, and
    values are computed every round as without a memo.
    """

    def __init__(self, limit_bytes: int | None = None) -> None:
        self.limit_bytes = MEMO_BYTES if limit_bytes is None else limit_bytes
        self.entries: dict[Any, tuple[Any, Any]] = {}
        self.bytes = 0

    def get(self, key: Any, tag: Any, make: Any) -> tuple[Any, bool]:
        """``(value, kept)``: the value kept for ``key`` and ``tag``, or ``make()``'s
        (kept when it fits); ``kept`` says it was read from the memo."""
        held = self.entries.get(key)
        if held is not None and held[0] == tag:
            return held[1], True
        value = make()
        size = int(getattr(value, "nbytes", 0))
        freed = 0 if held is None else int(getattr(held[1], "nbytes", 0))
        if self.bytes - freed + size <= self.limit_bytes:
            self.entries[key] = (tag, value)
            self.bytes += size - freed
        return value, False


class Oracle:
    """Gradients of a block of clients in one round.

    Parameters
    ----------
    problem : Problem
    clients : slice or numpy int array
        Which clients form the block (a slice when they are contiguous: no data copy).
    round_ : int
        The communication round (keys the minibatch draws).
    seed : int
    batch_size : int or None
        Minibatch size (sampled uniformly, with or without replacement as
        ``problem.minibatch`` says); ``None`` = full local gradient.
    counters : Counters
        Where the calls are counted.
    client_ids : numpy int array, optional
        The clients' global ids, which key the minibatch draws, when ``problem.data`` holds
        only some clients (a Flower node's partition: ``clients`` then indexes its rows);
        by default the rows are the ids.
    memo : BlockMemo, optional
        The run's memo of block constants (:meth:`constant`); without one they are
        computed at every call.
    """

    #: the run's memo (none: a traced oracle's values live in one compiled call)
    memo: BlockMemo | None = None

    def __init__(self, problem: Problem, clients: slice | np.ndarray, round_: int, seed: int,
                 batch_size: int | None, counters: Counters,
                 client_ids: np.ndarray | None = None, memo: BlockMemo | None = None) -> None:
        self.problem = problem
        self.loss = problem.loss
        self.clients = clients
        # a slice's own range, not all n_clients ids sliced: a run of 10^7 clients built
        # a 80 MB array for every block's oracle
        self._rows = (np.arange(*clients.indices(problem.n_clients))
                      if isinstance(clients, slice) else np.asarray(clients))
        self.client_ids = self._rows if client_ids is None else np.asarray(client_ids)
        self.round = round_
        self.seed = seed
        self.batch_size = batch_size
        self.counters = counters
        self._draws = 0
        self._full: Batch | None = None
        self._counts: np.ndarray | None = None
        self._samples = 0
        self.memo = memo

    @property
    def size(self) -> int:
        """Number of clients in the block."""
        return len(self.client_ids)

    def constant(self, name: str, tag: Any, make: Any) -> tuple[Any, bool]:
        """``(value, kept)``: ``make()``, a value of this block's data alone (``tag``: what
        else it depends on, such as a step), computed once per run when the executor keeps
        a :class:`BlockMemo` and the block is a run of consecutive clients (full
        participation's blocks); ``kept`` says it came from the memo (the caller then
        counts the oracle calls ``make`` would have made)."""
        # a block of sampled clients (ids, not a slice) changes from round to round: what
        # it kept would rarely be read again, so it keeps nothing
        if self.memo is None or not isinstance(self.clients, slice):
            return make(), False
        return self.memo.get((name, self.clients.start, self.clients.stop), tag, make)

    def full_batch(self) -> Batch:
        if self._full is None:
            self._full = self.problem.data.full_batch(self.clients)
        return self._full

    def next_batch(self) -> Batch:
        """The batch of the next gradient call (advances the draw counter)."""
        draw = self._draws
        self._draws += 1
        if self.batch_size is None:
            return self.full_batch()
        if self.problem.sampler is not None:  # streaming: fresh samples, counter-based
            return self.streamed_batch(draw)
        # keyed by the global ids: the same draws whichever rows hold these clients here
        index = minibatch_indices(self.seed, self.round, self.client_ids, self.counts, draw,
                                  self.batch_size,
                                  replace=self.problem.minibatch == "with_replacement",
                                  xp=self.xp, max_samples=self.max_samples)
        return self.minibatch(index)

    #: The namespace the minibatch indices are drawn on (``None``: NumPy, on the host) and
    #: the padded sample count that sizes them there: the compiled engine's oracle draws
    #: the same indices inside its trace (:mod:`fedcomp.runtime._compiled_trace`).
    xp: Any = None
    max_samples: int | None = None

    def streamed_batch(self, draw: int) -> Batch:
        """The ``draw``-th batch of fresh samples of a streaming problem."""
        assert self.problem.sampler is not None and self.batch_size is not None
        return self.problem.sampler.batch(self.seed, self.round, self.client_ids, draw,
                                          self.batch_size, self.problem.data.like)

    def minibatch(self, index: Any) -> Batch:
        """The block's rows at the sample indices ``index``, shape ``(B, batch_size)``."""
        return self.problem.data.minibatch(self._rows, index)

    @property
    def counts(self) -> np.ndarray:
        """Number of samples of each client of the block (host ints, shape ``(B,)``)."""
        if self._counts is None:  # once per block: every local step counts with it
            self._counts = self.problem.data.counts[self._rows]
            self._samples = int(self._counts.sum())
        return self._counts

    def count_grad(self, full: bool, active: np.ndarray | None) -> None:
        """Count one gradient call of the block (``full``: a full local gradient)."""
        # ``active`` marks the clients that really need the call: a vectorised block
        # computes every row, but a client that has finished its local work (fewer
        # epochs, a converged Newton solve) would not, so it is not charged.
        counts = self.counts if active is None else self.counts[active]
        self.counters.grad_evals += len(counts)
        if full or self.batch_size is None:
            self.counters.sample_grads += self._samples if active is None else int(counts.sum())
        else:
            self.counters.sample_grads += len(counts) * self.batch_size

    def count_value(self, active: np.ndarray | None) -> None:
        """Count one call of the clients' full loss values."""
        self.counters.value_evals += self.size if active is None else int(active.sum())

    def count_hessian(self, active: np.ndarray | None) -> None:
        """Count one call of the clients' full Hessians."""
        self.counters.hessian_evals += self.size if active is None else int(active.sum())

    def grad(self, x: Array, active: np.ndarray | None = None) -> Array:
        """Each client's (minibatch) gradient at its model; ``x`` and result ``(B, *shape)``.

        ``active`` (host bool array, shape ``(B,)``) limits the counting to those clients.
        """
        batch = self.next_batch()
        self.count_grad(False, active)
        return self.loss.grad(x, batch)

    def full_grad(self, x: Array, active: np.ndarray | None = None) -> Array:
        """Each client's full local gradient (whatever the run's batch size)."""
        self.count_grad(True, active)
        return self.loss.grad(x, self.full_batch())

    def full_value(self, x: Array, active: np.ndarray | None = None) -> Array:
        """Each client's full local loss ``f_i(x_i)``, shape ``(B,)`` (counted)."""
        self.count_value(active)
        return self.loss.value(x, self.full_batch())

    def full_hessian(self, x: Array, active: np.ndarray | None = None) -> Array:
        """Each client's full local Hessian, ``(B, D, D)`` (counted; needs ``loss.hessian``)."""
        hessian = getattr(self.loss, "hessian", None)
        if hessian is None:
            raise ValueError(f"{type(self.loss).__name__} has no hessian(); an exact local "
                             "solver needs one — use local_solver='sgd' for this loss")
        self.count_hessian(active)
        return hessian(x, self.full_batch())
