"""The compiled engine: a round's client updates and server update under ``jax.jit``.

With the problem's data on jax arrays (``backend = "jax"`` or ``"jax-float32"`` in a
configuration; ``problem.data.to(jax_like())`` in Python), :func:`fedcomp.simulate` runs
the same algorithm files through ``jax.jit``: each block's ``client_update`` is traced once
— its local steps one ``fori_loop`` whose body is traced once where the algorithm writes
them with :func:`~fedcomp.algorithms._steps.repeat_local_steps` (else, or with
:data:`~fedcomp.runtime._compiled_trace.ROLLED_STEPS` off, unrolled: a program that grows
with K), the block's data sliced, its states gathered and scattered inside the call — and
so is ``server_update``. By default one block
holds every participant of a round (``client_block="auto"``); on a CPU the call cuts it
into cache-sized sub-blocks (a ``lax.map``, :meth:`CompiledClients.block`), and the rounds
between two evaluation rows run as one call (:meth:`CompiledEngine.run_rounds`, the
engine's capability as an executor: :func:`~fedcomp.runtime.simulate` has one loop over
chunks of rounds, of one round for an executor without it). Where the rows' metrics and
the stopping rule trace too, the rows are computed in the call as well, and a whole run is
one call, cut only where the host must see a row (:meth:`CompiledEngine.run_rows`,
:mod:`fedcomp.runtime._compiled_run`).

What stays outside the traced code, and why it needs no value:

* **Counters.** A call's gradient, prox, Hessian and loss-value counts do not depend on
  the data within the call (the number of local steps is a Python constant of the trace),
  so the counts made while tracing are kept in a :class:`CounterLog` (the prox counts
  of :func:`~fedcomp.runtime._round.counted_prox`, the oracle's counting calls) and
  replayed, through the very counting methods of :class:`~fedcomp.oracle.Oracle`, after
  every call of that compiled function: the counters equal NumPy's by construction.
* **Minibatches.** Indices are the counter-based draws of :mod:`fedcomp._random`,
  computed inside the trace from the traced round and client ids by the same function on
  jax's namespace, its SplitMix64 hash in wrapping uint64 arithmetic
  (:func:`traced_minibatch_indices`; a test checks them against NumPy's). This is why the
  engine needs ``jax_enable_x64``.
* **The round and the participants** are traced values, so one compilation serves every
  round (and, with client sampling, every set of participants of the same size).

Where an algorithm needs a value on the host inside a round — a number of local steps
drawn each round (Scaffnew's geometric ``L``, FedPD, LoCoDL), a Newton solve or a
bisection that stops when it has converged, a branch on the round (FedDR's warm-up,
FedCanon II's first round), a compressor's host-side draws — tracing it fails with one of
jax's concretization errors. ``compile="auto"`` then runs that part (client update or
server update) eagerly on the jax arrays for the rest of the run, the same code as the
NumPy engine with the same counted oracle, and warns once, naming the line that needed
the value; ``compile=True`` raises :class:`NotCompilableError` instead.
"""


from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import Array
from ..algorithms import host_values
from ..algorithms._base import WIRE_BITS, FederatedAlgorithm, message_bits
from ..oracle import Counters
from ..problem import Problem

# `import X as X`: re-exported, as the package and the tests import these names from here
from ._compiled_fallback import EAGER, _Part
from ._compiled_fallback import JaxEngineWarning as JaxEngineWarning
from ._compiled_fallback import NotCompilableError as NotCompilableError
from ._compiled_fallback import RoundFrom as RoundFrom
from ._compiled_parts import CompiledClients, CompiledServer, _block_key, participant_context
from ._compiled_parts import even_part as even_part
from ._compiled_parts import sub_block_size as sub_block_size
from ._compiled_trace import DataArrays, _add
from ._compiled_trace import traced_minibatch_indices as traced_minibatch_indices
from ._jax import Uncompilable as _Uncompilable  # noqa: F401  (the tests import it here)
from ._jax import jax_like as jax_like
from ._jax import require_jax
from ._round import Traffic, count_traffic, star_round, traffic_of

#: Trust the registry's :class:`~fedcomp._registry.HostValue` traits (run those parts
#: eagerly without tracing them). Tests switch it off to check that each trait is still
#: needed: tracing that part must fail.
DECLARED_TRAITS = True


def _wire_bits(message: Any) -> Any:
    """The sum of a message's :data:`WIRE_BITS` field (traced), or ``None``."""
    fields = dict(zip(message._fields, message, strict=True))
    return None if WIRE_BITS not in fields else require_jax().numpy.sum(fields[WIRE_BITS])


def _static_bits(message: Any) -> int | None:
    """A traced message's bits where its shapes and dtypes give them (``None`` where a
    :data:`WIRE_BITS` field does: its traced sum is returned by the call instead)."""
    return None if WIRE_BITS in message._fields else message_bits(message)


#: Whether a run's rows may be computed in its compiled calls (:meth:`CompiledEngine.row_plan`).
#: Tests switch it off for the row-by-row run that the whole run must equal.
WHOLE_RUNS = True


#: A compiled call runs at most this many rounds (the progress line and Ctrl-C wait for it).
MAX_CHUNK = 256

#: ... and about this many data floats touched, summed over its rounds (participants x
#: samples x features per round): a round of ZA1 with 5 local steps takes ~5 ns per float
#: on one core, so a call lasts ~0.1 s per local step per 10 rounds at most, while at
#: 30 clients x 20 samples x 60 features a call holds 256 rounds.
CHUNK_FLOATS = 20_000_000


def chunk_length(problem: Problem, participants: int, batch_size: int | None,
                 eval_every: int) -> int:
    """Rounds per compiled call between two evaluations (1: a call per round).

    A round's dispatch — Python, the jit cache lookup, arguments, the host read of
    ``Σ x²`` — costs ~0.1–0.3 ms whatever the problem's size, as much as a whole ZA1 round
    at 30 clients x 60 features; rounds between two evaluation rows need nothing from the
    host, so they run as one call (:meth:`CompiledEngine.run_rounds`) and the dispatch is paid
    once per call. Calls stay short (:data:`CHUNK_FLOATS`, :data:`MAX_CHUNK`), so large
    problems, whose dispatch is negligible beside the round, still run a round per call.
    """
    samples = problem.data.max_samples if batch_size is None else min(
        batch_size, problem.data.max_samples)
    floats = participants * samples * int(np.prod(problem.data.feature_shape))
    return int(max(1, min(eval_every, MAX_CHUNK, CHUNK_FLOATS // max(floats, 1))))


class CompiledEngine:
    """The client executor of a run on jax data, with fused rounds as its capability.

    As every executor it has ``run_round`` and ``client_states`` (its
    :class:`CompiledClients`), and :attr:`server` is its server step (a
    :class:`CompiledServer`), so :func:`~fedcomp.runtime._round.star_round` runs a round of
    it part by part. Its capability is :meth:`run_rounds`: when a round's participants form
    one block (the default ``client_block="auto"``), the broadcast, the block's
    ``client_update``, ``server_update`` and ``‖output‖²`` (for the divergence check) are
    traced together — one dispatch per round, as a hand-written ``jax.jit`` round has —
    and several such rounds run as one call (a ``fori_loop`` over them) where nothing needs
    the host between them (:meth:`chunk_length`). Where the whole round cannot be traced,
    its rounds go through ``star_round``, each part compiled or eager.
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: Any, server_prox: Callable[[Array, Any], Array]
                 ) -> None:
        self.algorithm, self.counters = algorithm, counters
        self.clients = CompiledClients(algorithm, problem, client_states, counters, settings)
        self.server = CompiledServer(algorithm, problem, counters, settings.seed,
                                     settings.compile, server_prox)
        self.traffic: dict[int, Traffic] = {}  # per participants: a trace's (static) traffic
        self.part = _Part(self.round_traced, algorithm.name, "round", settings.compile,
                          static=("start", "stop"), quiet=True)
        self.chunk = _Part(self.rounds_traced, algorithm.name, "rounds", settings.compile,
                           static=("start", "stop", "length"), quiet=True)
        self.n_clients, self.problem = problem.n_clients, problem
        self.compile = settings.compile
        #: the run's rows in its compiled calls (:meth:`row_plan`), or None
        self.whole: Any = None
        #: rounds a multi-round call is compiled for (:meth:`chunk_length`)
        self.length = 1
        #: whether the server state passed in is on the data's device (:meth:`run_rounds`)
        self.placed = False
        self.clients.client_states = self.place(client_states)
        if DECLARED_TRAITS:
            self._declare(host_values(algorithm, settings.batch_size,
                                      bool(getattr(problem.loss, "quadratic", False))))

    @property
    def client_states(self) -> Any:
        return self.clients.client_states

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        """The participants' uploads (:meth:`CompiledClients.run_round`)."""
        return self.clients.run_round(round_, message, participants)

    def _declare(self, needs: dict[str, str]) -> None:
        """The parts the algorithm's registry entry says read host values run eagerly from
        round 1, without a trace that would fail (with ``compile=True``: refused now)."""
        parts = {"client update": self.clients.part, "server update": self.server.part}
        for part, reason in needs.items():
            parts[part].declare_eager(f"{reason} (its registry entry's host_values)")
        if needs:  # a whole-round call holds both parts
            self.part.declare_eager("", None)
            self.chunk.declare_eager("", None)

    def place(self, tree: Any) -> Any:
        """``tree``'s arrays committed to the data's device.

        A compiled call's outputs are committed to their device; fresh arrays (``init``'s
        zeros) are not, and jax compiles a function anew for each placement of its
        arguments: without this the second call compiles the round again (0.8–1 s).
        """
        jax = require_jax()
        device = next(iter(self.problem.data.like.devices()))
        return jax.device_put(tree, device)

    def chunk_length(self, clients_per_round: int | None, batch_size: int | None,
                     eval_every: int) -> int:
        """:func:`chunk_length` of this run (participants: ``clients_per_round`` or all):
        the most rounds :meth:`run_rounds` is given at once, and the length its
        multi-round calls are compiled for."""
        self.length = chunk_length(self.problem, clients_per_round or self.n_clients,
                                   batch_size, eval_every)
        return self.length

    def round_traced(self, round_: Any, server_state: Any, client_states: Any, ids: Any,
                     weights: Any, pi: Any, arrays: DataArrays, *, low: int | None,
                     start: int | None, stop: int | None) -> Any:
        """The traced round: ``(server state, client states, wire bits down and up, Σ x²)``."""
        message = self.algorithm.broadcast(server_state)
        uploads, client_states = self.clients.block(round_, message, client_states, ids,
                                                    arrays, low=low, start=start, stop=stop)
        server_state = self.server.update_traced(round_, server_state, uploads, ids, weights,
                                                 pi, low=low)
        self.traffic[int(ids.shape[0])] = traffic_of(message, uploads, bits=_static_bits)
        down, up = _wire_bits(message), _wire_bits(uploads)
        out = self.algorithm.output(server_state)
        return server_state, client_states, down, up, require_jax().numpy.sum(out * out)

    def row_plan(self, metrics: Any, reference: Any, rule: Any, rounds: int, eval_every: int,
                 limit: float, clients_per_round: int | None) -> Any:
        """Whether this run's rows can be computed in its compiled calls (a
        :class:`~fedcomp.runtime._compiled_run.WholeRun`, then used by :meth:`run_rows`),
        or ``None``: they are the host's, rows between the chunks of :meth:`run_rounds`."""
        from ._compiled_run import WholeRun, row_plan

        if not WHOLE_RUNS or self.chunk.eager:
            return None
        plan = row_plan(self.problem, metrics, reference, rule, rounds, eval_every, limit,
                        clients_per_round or self.n_clients)
        self.whole = None if plan is None else WholeRun(self, plan, functools.partial(
            _Part, name=self.algorithm.name, compile_=self.compile, quiet=True))
        return self.whole

    def run_rows(self, server_state: Any, first: int, until: int,
                 participants_of: Callable[[int], np.ndarray], carried: Any,
                 start_row: bool = False) -> Any:
        """Rounds ``first ..`` and their rows, up to round ``until`` (a row) at most, in
        one compiled call (``start_row``: and the row of round ``first``, before them): a
        :class:`~fedcomp.runtime._compiled_run.DeviceRows`, or ``None`` where the call
        cannot run them (its part runs eagerly, or the round's participants form several
        blocks): the driver's chunks then do. ``carried``:
        :meth:`~fedcomp.runtime._stopping.StopRule.carried`."""
        if self.whole is None:
            return None
        return self.whole.run(server_state, first, until, participants_of, carried,
                              start_row)

    def rounds_traced(self, first: Any, count: Any, server_state: Any, client_states: Any,
                      ids: Any, weights: Any, pi: Any, arrays: DataArrays, *, low: int | None,
                      start: int | None, stop: int | None, length: int) -> Any:
        """Rounds ``first .. first + count - 1`` traced as one ``fori_loop`` (``count`` is
        traced, at most ``length``): the states after them, and each round's wire bits
        down and up and ``Σ x²`` in arrays of ``length`` (zeros past ``count``).

        ``ids``, ``weights`` and ``pi`` are one round's (every round has the same
        participants, ``start:stop``) or stacked per round, shape ``(length, B)``.
        """
        jax = require_jax()
        jnp = jax.numpy
        per_round = ids.ndim == 2

        def one_round(k: Any, carry: tuple[Any, ...]) -> tuple[Any, ...]:
            server, clients, bits_down, bits_up, sums = carry
            who = (ids[k], weights[k], pi[k]) if per_round else (ids, weights, pi)
            server, clients, down, up, sum_sq = self.round_traced(
                first + k, server, clients, *who, arrays, low=low, start=start, stop=stop)
            if down is not None:
                bits_down = bits_down.at[k].set(down)
            if up is not None:
                bits_up = bits_up.at[k].set(up)
            return server, clients, bits_down, bits_up, sums.at[k].set(sum_sq)

        zeros = jnp.zeros(length, dtype=jnp.float64)
        return jax.lax.fori_loop(jnp.int64(0), count, one_round,
                                 (server_state, client_states, zeros, zeros, zeros))

    def run_rounds(self, server_state: Any, first: int, participants: list[np.ndarray]
                   ) -> tuple[Any, list[Any]]:
        """Rounds ``first, first + 1, ...`` (``participants[k]`` in round ``first + k``, at
        most :attr:`length` of them): ``(new server state, [Σ x² after each round])``, the
        counters advanced. It returns once the rounds are computed (jax dispatches
        asynchronously), so that the run's ``wall_s`` times the work.

        One compiled call runs them all (:meth:`rounds_traced`, compiled once for calls of
        up to :attr:`length` rounds) where the whole round compiles and each round's
        participants form one block; otherwise they run a round at a time (:meth:`step`).
        Σ x² of a single round is ``None`` where its parts ran on their own (the check
        reads the model instead).
        """
        if not self.placed:  # init's or a checkpoint's states: on the device once
            server_state, self.placed = self.place(server_state), True
        if len(participants) > 1 and all(len(p) <= self.clients.settings.block_size
                                          for p in participants):
            out = self._chunk(server_state, first, participants, self.length)
            if out is not EAGER:
                return out
        sums = []
        for k, who in enumerate(participants):
            server_state, sum_sq = self.step(server_state, first + k, who)
            if sum_sq is None and len(participants) > 1:
                # a round of several that ran in parts: the check of a round before the
                # last needs Σ x² (its model is gone)
                out = self.algorithm.output(server_state)
                sum_sq = float(require_jax().numpy.sum(out * out))
            sums.append(sum_sq)
        return server_state, sums

    def _chunk(self, server_state: Any, first: int, participants: list[np.ndarray],
               length: int) -> Any:
        count, size, clients = len(participants), len(participants[0]), self.clients
        start: int | None
        stop: int | None
        if size == self.n_clients:  # every client every round: a static range
            start, stop = 0, size
            ids, weights, pi = self.server.context(participants[0], slice(0, size))
        else:  # sampled: the rounds' ids stacked (padded with the first round's)
            start = stop = None
            ids, weights, pi = participant_context(
                self.problem, np.stack(participants + [participants[0]] * (length - count)))
        out = self.chunk(first, count, server_state, clients.client_states, ids, weights, pi,
                         clients.arrays, start=start, stop=stop, length=length)
        if out is EAGER:
            return EAGER
        server_state, clients.client_states, bits_down, bits_up, sums = out
        sums = np.asarray(sums)  # the host read waits for the call (wall_s times the work)
        bits_down, bits_up = np.asarray(bits_down), np.asarray(bits_up)
        low = self.chunk.low
        for k, who in enumerate(participants):
            key = (0, size, size) if start is not None else (None, None, size, who.tobytes())
            block = slice(0, size) if start is not None else who
            self._replay(size, bits_down[k], bits_up[k], key, block, first + k, low)
        return server_state, list(sums[:count])

    def step(self, server_state: Any, round_: int, participants: np.ndarray
             ) -> tuple[Any, Any]:
        """One round: ``(new server state, ‖output‖² or None)``; the counters advance.

        It returns once the round is computed (jax dispatches asynchronously), so that
        the run's ``wall_s`` times the work, not its dispatch: reading ``Σ x²``, an output
        of the same call, to the host waits for all of it in one transfer.
        """
        server_state, sum_sq = self._step(server_state, round_, participants)
        if sum_sq is None:
            return require_jax().block_until_ready(server_state), None
        return server_state, float(sum_sq)

    def _step(self, server_state: Any, round_: int, participants: np.ndarray
              ) -> tuple[Any, Any]:
        from ._clients import client_blocks

        size = self.clients.settings.block_size
        # every client (sorted distinct ids of 0..n-1) is one range: reading 10^8 ids to
        # find it took 0.2 s a round
        blocks = ([slice(0, self.n_clients)] if len(participants) == self.n_clients <= size
                  else client_blocks(participants, size))
        if len(blocks) == 1:
            start, stop, key = _block_key(blocks[0])
            clients = self.clients
            out = self.part(round_, server_state, clients.client_states,
                            *self.server.context(participants, blocks[0]), clients.arrays,
                            start=start, stop=stop)
            if out is not EAGER:
                server_state, clients.client_states, down, up, sum_sq = out
                self._replay(len(participants), down, up, key, blocks[0], round_,
                             self.part.low)
                return server_state, sum_sq
        return self._parts(server_state, round_, participants), None

    def _replay(self, n: int, down: Any, up: Any, key: tuple[Any, ...], block: Any,
                round_: int, low: int | None, into: Counters | None = None) -> None:
        """What one fused round of ``n`` clients (``block``, its counters cached under
        ``key``; traced with ``low``) adds to the counters, from its trace: its traffic,
        with the call's :data:`WIRE_BITS` sums ``down`` and ``up`` where the trace left
        them (:func:`~fedcomp.runtime._round.count_traffic`, as every engine counts), its
        clients' counting calls and its server's prox counts (into the run's counters, or
        ``into``)."""
        traffic = self.traffic[n]
        counters = self.counters if into is None else into
        count_traffic(counters, traffic._replace(
            bits_down=down if traffic.bits_down is None else traffic.bits_down,
            bits_up=up if traffic.bits_up is None else traffic.bits_up), n)
        _add(counters, self.clients.delta(key, block, round_, low))
        _add(counters, self.server.logs[low].delta(None))

    def _parts(self, server_state: Any, round_: int, participants: np.ndarray) -> Any:
        """The round part by part, each compiled or eager: the round every engine runs."""
        return star_round(self.algorithm, self.server, self.clients, self.counters,
                          server_state, round_, participants)
