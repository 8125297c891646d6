"""The asynchronous runner: one client update per server step, on a simulated event clock.

Every client reads the server's current message, computes for a time drawn from its
compute-time distribution (:class:`~fedcomp.runtime.ComputeTimes`) and arrives; the server
processes arrivals in time order (ties by client id), one server update each, and the
client immediately reads the new model and starts again. An arrival's update is computed
from the (stale) message its client read, ``d = k − k_read`` server steps ago — the delay
model of asynchronous FedDR (Tran-Dinh, Pham, Phan, Nguyen, NeurIPS 2021, Algorithm 2).
With a staleness bound ``τ`` (``max_delay``, the paper's Assumption 4.1: ``d ≤ τ``) a
barrier holds clients back instead: a client whose next job could be applied more than
``τ`` steps after some outstanding job's read waits, idle on the clock, until enough
arrivals have been applied. Everything random (compute times, minibatches) is
counter-based, so the arrival order and the iterates are reproducible from the seed.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, quiet_overflow, wait_for
from ..algorithms._base import FederatedAlgorithm, check_max_delay, setup_context
from ..metrics import DEFAULT_METRICS
from ..oracle import Counters
from ..problem import Problem
from ._checks import check_divergence, check_run_args, norm_limit_of
from ._clients import ClientSettings, LocalClients
from ._clock import ComputeTimes
from ._recording import Recorder
from ._round import count_downloads, counted_prox, server_step
from ._stopping import NonFiniteError, RunView, StopRule


class AsyncRunResult(NamedTuple):
    """What :func:`simulate_async` returns.

    Attributes
    ----------
    x, history, server_state, client_states, counters
        As in :class:`~fedcomp.runtime.RunResult`; history rows have ``round`` = server
        updates so far and ``sim_time`` = simulated time.
    order : numpy int array, shape (server_steps,)
        The client of each server step (arrival order).
    times : numpy float array, shape (server_steps,)
        Simulated arrival times.
    delays : numpy int array, shape (server_steps,)
        Staleness of each arrival: server steps between its read and its processing
        (at most ``max_delay`` when a bound is set).
    waited : float
        Simulated time clients spent idle at the ``max_delay`` barrier, summed over
        clients (0 without a bound).
    status, n_rounds
        As in :class:`~fedcomp.runtime.RunResult`, ``n_rounds`` counting server steps
        (``order``, ``times`` and ``delays`` hold that many).
    """

    x: Array
    history: list[dict[str, Any]]
    server_state: Any
    client_states: Any
    counters: Counters
    order: np.ndarray
    times: np.ndarray
    delays: np.ndarray
    waited: float = 0.0
    status: str = "completed"
    n_rounds: int = -1

    def __repr__(self) -> str:
        """One line, as :class:`~fedcomp.runtime.RunResult`'s (no array)."""
        from ._display import run_repr

        return run_repr(self)

    def _repr_html_(self) -> str:
        """A small table, in a Jupyter notebook."""
        from ._display import run_html

        return run_html(self)


@quiet_overflow
def simulate_async(
    algorithm: FederatedAlgorithm,
    problem: Problem,
    server_steps: int,
    *,
    compute_times: Any = None,
    x0: Any = None,
    batch_size: int | None = None,
    eval_every: int = 1,
    metrics: Sequence[Any] = DEFAULT_METRICS,
    reference: Any = None,
    logger: Any = None,
    seed: int = 0,
    progress: Any = "auto",
    tags: dict[str, Any] | None = None,
    max_norm: float | None = 1e12,
    stale: bool = True,
    clients: Any = None,
    max_delay: int | None = None,
    tol: float | None = None,
    stop: str = "relative_prox_step",
    callbacks: Any = None,
    on_divergence: str = "return",
) -> AsyncRunResult:
    """Run an algorithm asynchronously: one arrival per server step, in simulated time order.

    Parameters
    ----------
    algorithm : FederatedAlgorithm
        Usually ``execution="async"`` (e.g. :func:`~fedcomp.algorithms.async_feddr`); its
        ``client_update``/``server_update`` are called with one client at a time.
    problem : Problem
    server_steps : int
        Server updates (= arrivals processed).
    compute_times : ComputeTimes, dict or float, optional
        Compute-time distributions (default ``ComputeTimes()``: Exp(1) for every client).
    x0, batch_size, eval_every, metrics, reference, logger, seed, progress, tags, max_norm
        As in :func:`~fedcomp.runtime.simulate` (``eval_every`` counts server steps).
    stale : bool, default True
        ``False`` is the zero-delay ablation: the same arrival order (with ``max_delay``,
        the same barrier), but every arrival is computed from the current model (FedDR
        with one client per round in that order).
    clients : class, optional
        The client executor, as in :func:`~fedcomp.runtime.simulate` (default: the
        in-process ``LocalClients``). The event clock, the queue of stale
        messages and the server updates stay here; :mod:`fedcomp.flower` passes one that
        runs each arrival's ``client_update`` (server step ``k`` as its round) on the
        SuperNode hosting the client.
    max_delay : int, optional
        The staleness bound ``τ`` (default: the algorithm's ``max_delay`` hyperparameter,
        e.g. ``async_feddr(max_delay=5)``; ``None`` = unbounded), enforced by a barrier
        on starting jobs: a client whose arrival was applied starts its next job at once
        only if every outstanding job would still be applied at most ``τ`` steps after
        its read should all the others arrive before it; otherwise it waits, idle in
        simulated time, and starts (reading the model of that moment) at the arrival
        that makes room, waiting clients in first-come order (ties by client id). Every
        applied update satisfies ``d ≤ τ``, no computed work is dropped, and every
        client keeps being updated; the cost is idle time (``waited``).
    tol, stop, callbacks, on_divergence
        As in :func:`~fedcomp.runtime.simulate`, checked at each row (every
        ``eval_every`` server steps); a callback's :class:`RunView` has the server step as
        its ``round`` and no client states.

    Returns
    -------
    AsyncRunResult

    Notes
    -----
    A warm-up round (``algorithm.warmup``) runs with every client at time 0 and lasts as
    long as the slowest of them. Rows are written at step 0 and every ``eval_every`` steps,
    with ``sim_time`` (simulated time of the last processed arrival), ``max_delay`` (the
    largest delay applied so far), ``waited`` (client idle time at the barrier so far,
    counting clients still waiting).

    The barrier. Let ``k`` be the next server step, ``m`` the number of outstanding jobs
    and ``r`` the step the oldest of them read at. Whatever the compute times, that job is
    applied at step ``k + m − 1`` at the latest unless a job started later overtakes it,
    so the runner keeps ``k + m − 1 − r ≤ τ``: a new job (read at ``k``) starts only if
    ``k + m − r ≤ τ`` with ``m`` counted before it (or if none is outstanding). A server
    step raises ``k`` by one and lowers ``m`` by one, so the inequality survives it, and
    every applied job has ``d ≤ k + m − 1 − r ≤ τ``. The test needs only the read steps of
    the outstanding jobs, not their compute times, so a real server could apply it. At
    most ``τ + 1`` jobs are outstanding, and a server step leaves ``k + m`` unchanged, so
    jobs that read at the same step hold back new ones until all of them have arrived:
    from the common start, ``τ ≤ n − 1`` runs the clients in waves of ``τ + 1`` that read
    the same model (clients in first-come order, each wave waiting for its slowest
    member), the price of a bound that holds whatever the compute times; a larger ``τ``
    lets jobs overlap and binds only when compute times differ. No schedule keeps all
    ``n`` clients busy under ``τ < n − 1``: with one update per step the mean delay is the
    mean number of outstanding jobs minus one (Little's law).

    Why a barrier rather than dropping an arrival older than ``τ`` and letting its client
    recompute from the current model: Assumption 4.1 of the paper asks for ``d ≤ τ`` *and*
    for every client to be updated with probability at least ``p̂ > 0`` in every window
    of iterations (supplement, eq. (51) and the proof of Theorem 4.1). Dropping keeps the
    first and breaks the second: a client whose compute time always exceeds the time the
    others need for ``τ + 1`` server steps is never applied, and the iterates converge to
    the solution of the other clients' problem. Under the barrier a started job is
    applied within ``τ`` steps and waiting clients start in first-come order, so every
    client is updated within a bounded number of steps.

    On jax arrays (``backend = "jax"`` or ``"jax-float32"``) this runner is not compiled:
    each arrival's client update and the server update run eagerly, operation by operation,
    on the jax arrays, with NumPy's iterates, counters and arrival order to rounding
    (``tests/engines/test_jax_runners.py``); only :func:`~fedcomp.runtime.simulate` traces its
    rounds with ``jax.jit``. One client's update per server step is many small operations, each
    dispatched on its own, so NumPy is the faster backend here.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp import ClientData, Problem
    >>> from fedcomp.algorithms import async_feddr
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> rng = np.random.default_rng(0)
    >>> data = ClientData.from_lists([rng.normal(size=(20, 3)) for _ in range(4)],
    ...                              [rng.normal(size=20) for _ in range(4)])
    >>> run = simulate_async(async_feddr(eta=0.5, local_solver="exact"),
    ...                      Problem(LeastSquares(), L1(0.01), data), 8, metrics=[])
    >>> len(run.order), bool(np.all(np.diff(run.times) >= 0))
    (8, True)
    """
    check_run_args(problem, server_steps, None, batch_size, eval_every, seed,
                   rounds_name="server_steps")
    bound = _delay_bound(max_delay, algorithm)
    n = problem.n_clients
    clock = ComputeTimes.build(ComputeTimes() if compute_times is None else compute_times, n)
    algorithm = algorithm.prepare(setup_context(problem, 1)) or algorithm
    norm_limit = norm_limit_of(max_norm)
    x = problem.start_model(x0)
    server_state, client_states = algorithm.init(x, n)
    counters = Counters()
    recorder = Recorder(problem, server_steps, eval_every=eval_every, metrics=metrics,
                        reference=reference, logger=logger, tags=tags, progress=progress,
                        label=algorithm.name)
    rule = StopRule(problem, tol, stop, callbacks, on_divergence,
                    hint=algorithm.divergence_hint)
    wall, now, largest, waited = 0.0, 0.0, 0, 0.0

    client_prox, server_prox = counted_prox(problem.regularizer, counters)

    run_clients = (LocalClients if clients is None else clients)(
        algorithm, problem, client_states, counters,
        ClientSettings(seed, batch_size, 1, client_prox))

    def run_step(k: int, message: Any, participants: np.ndarray) -> None:
        nonlocal server_state
        stacked = run_clients.run_round(k, message, participants)
        server_state = server_step(algorithm, problem.weights, problem.data.like, server_state,
                                   stacked, k, participants, server_prox, counters, seed)

    k = 0  # server steps applied so far = the step a job started now reads at
    # outstanding jobs: (arrival time, client id, server step it read at, the message it read)
    queue: list[tuple[float, int, int, Any]] = []
    reading: dict[int, int] = {}  # client -> the step its outstanding job read at
    ready: deque[tuple[float, int]] = deque()  # (since when, client) held by the barrier

    def may_start() -> bool:
        """The barrier: a job read now keeps every outstanding job's delay within τ."""
        if bound is None or not reading:
            return True
        return k + len(reading) - min(reading.values()) <= bound

    def start(i: int, duration: float | None = None) -> None:
        """Client i reads the current message at ``now`` and starts its next job."""
        count_downloads(counters, message, 1)
        if duration is None:
            duration = float(clock.draw(seed, int(jobs[i]), np.array([i]), n)[0])
        jobs[i] += 1
        reading[i] = k
        heapq.heappush(queue, (now + duration, i, k, message))

    def admit() -> None:
        """Start the waiting clients, first come first served, while the barrier allows."""
        nonlocal waited
        while ready and may_start():
            since, i = ready.popleft()
            waited += now - since
            start(i)

    def idle() -> float:
        """Client idle time at the barrier so far, counting the clients still waiting."""
        return waited + sum(now - since for since, _ in ready)

    def record(k: int) -> bool:
        """The row of server step ``k``; whether the run stops there."""
        model = algorithm.output(server_state)
        row = recorder.record(k, model, counters, wall, sim_time=now, max_delay=largest,
                              waited=idle(), **rule.columns(model))
        return rule.after_row(RunView(k, row, model, server_state, None, counters,
                                      recorder.history, algorithm.name))

    jobs = np.zeros(n, dtype=np.int64)  # each client's job counter keys its compute times
    if algorithm.warmup:
        tic = time.perf_counter()
        everyone = np.arange(n)
        count_downloads(counters, algorithm.broadcast(server_state), n)
        run_step(-1, algorithm.broadcast(server_state), everyone)
        now = float(clock.draw(seed, 0, everyone, n).max(initial=0.0))
        jobs += 1
        wait_for(problem.data.like, server_state)
        wall += time.perf_counter() - tic
    stopped = record(0)

    message = algorithm.broadcast(server_state)
    first = clock.draw(seed, 1 if algorithm.warmup else 0, np.arange(n), n)
    for i in range(n):  # in client id order: the barrier may hold back the last ones
        if may_start():
            start(i, float(first[i]))
        else:
            ready.append((now, i))

    order = np.zeros(server_steps, dtype=np.int64)
    times = np.zeros(server_steps)
    delays = np.zeros(server_steps, dtype=np.int64)
    while k < server_steps and not stopped:
        tic = time.perf_counter()
        now, i, read_at, read = heapq.heappop(queue)
        del reading[i]
        order[k], times[k], delays[k] = i, now, k - read_at
        largest = max(largest, k - read_at)
        run_step(k, read if stale else algorithm.broadcast(server_state), np.array([i]))
        k += 1
        message = algorithm.broadcast(server_state)
        # the client reads the new model at once, unless the barrier holds it back (then
        # it waits behind the clients held before it)
        ready.append((now, i))
        admit()
        wait_for(problem.data.like, server_state)  # the GPU's queued step, not its dispatch
        wall += time.perf_counter() - tic
        try:
            check_divergence(algorithm.output(server_state), norm_limit, algorithm,
                             recorder.tags, f"at server step {k}")
        except NonFiniteError as exc:
            rule.diverged(exc)
            break
        if recorder.due(k):
            stopped = record(k)
        recorder.progress(k)
    rule.finish(recorder.tags.get("algorithm", algorithm.name), k)
    return AsyncRunResult(algorithm.output(server_state), recorder.history, server_state,
                          getattr(run_clients, "client_states", None), counters, order[:k],
                          times[:k], delays[:k], idle(), rule.status, k)


def _delay_bound(max_delay: int | None, algorithm: FederatedAlgorithm) -> int | None:
    """The staleness bound: ``max_delay`` or the algorithm's own (they must agree)."""
    own = algorithm.hyperparameters.get("max_delay")
    if max_delay is not None and own is not None and max_delay != own:
        raise ValueError(f"simulate_async: max_delay={max_delay!r} but {algorithm.name} has "
                         f"max_delay={own!r}; give the bound in one place")
    bound = own if max_delay is None else max_delay
    check_max_delay(bound, "simulate_async")
    return bound

