"""The vectorised federated simulator.

Per round: sample the participants (seeded), split them into blocks of clients sized to
the CPU cache, gather each block's client states, run the algorithm's ``client_update`` on
the whole block at once, scatter the states back, stack the uploads and call
``server_update``. Blocks change only speed, never results: every random draw is keyed by
``(seed, round, client_id)`` (see :mod:`fedcomp._random`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, quiet_overflow, wait_for
from .._random import sample_clients
from ..algorithms._base import (
    FederatedAlgorithm,
    setup_context,
)
from ..metrics import DEFAULT_METRICS
from ..oracle import Counters
from ..problem import Problem
from ._backends import data_backend
from ._blocks import measured_block_size
from ._checkpoint import (
    adopt_initial_states,
    bind_checkpoints,
    has_checkpoint,
    load_checkpoint,
)
from ._checks import (
    check_divergence,
    check_personal_divergence,
    check_run_args,
    norm_limit_of,
)
from ._clients import (
    ClientSettings,
    FusedLocalClients,
    cache_block_size,
)
from ._clock import ComputeTimes
from ._fingerprint import run_fingerprint
from ._jax import check_compile
from ._options import (
    RunOptions,
    accept_option_keywords,
    check_client_block,
    options_of,
)
from ._recording import Recorder
from ._round import EagerServer, counted_prox, star_round
from ._stopping import COMPLETED, NonFiniteError, RunView, StopRule


class RunResult(NamedTuple):
    """What :func:`simulate` returns.

    Attributes
    ----------
    x : array
        The final model (``algorithm.output`` of the final server state).
    history : list of dict
        One row per evaluation (round, counters, wall time, metrics).
    server_state, client_states
        The final states (for checks and warm starts).
    counters : Counters
    status : str
        ``"completed"`` (the rounds ran out), ``"converged"`` (``tol`` reached),
        ``"stopped"`` (a callback asked) or ``"diverged"``.
    n_rounds : int
        Rounds run (the last row's round; for a diverged run, the round that diverged).
    """

    x: Array
    history: list[dict[str, Any]]
    server_state: Any
    client_states: Any
    counters: Counters
    status: str = COMPLETED
    n_rounds: int = -1

    def to_frame(self) -> Any:
        """The rows as a :class:`pandas.DataFrame`, one per evaluation (needs pandas:
        ``pip install 'fedcomp[data]'``); :func:`fedcomp.load_results` reads the same
        columns back from a ``results.csv``."""
        from .._extras import require

        return require("pandas", "RunResult.to_frame").DataFrame.from_records(self.history)

    def __repr__(self) -> str:
        """One line: status, rounds, the last row's metrics, the model's dtype and shape."""
        from ._display import run_repr

        return run_repr(self)

    def _repr_html_(self) -> str:
        """The same as a small table, in a Jupyter notebook."""
        from ._display import run_html

        return run_html(self)


def auto_block_size(problem: Problem, batch_size: int | None = None) -> int:
    """Clients per block: all of them on a GPU or jax; on a CPU measured once per machine
    and shape for NumPy, and by the cache rule for torch (:mod:`fedcomp.runtime._blocks`:
    a torch round's cost is a fixed dispatch cost per block that the measured gradient
    does not see).

    Each block runs *all* its local steps before the next block starts, so the block's
    data stay in cache across the ``K`` local gradient passes instead of streaming from
    memory ``2K`` times. Two costs bound the block: every batched call has a fixed
    dispatch cost (tens of microseconds of Python and array-library overhead), which a
    block of one small client cannot amortize — at 100 clients x 20 x 1024 a block of one
    client is 3-4x slower than a block of 32 — while a block larger than the
    last-level cache streams from memory (all 30 of seed 000's 960 KB clients in one
    block: 1.6x slower than blocks of 3). Where the balance lies depends on the CPU, so
    NumPy's block is measured (the gradient on growing blocks, cached in ``blocks.json``); a
    population under 1 MiB of data is one block, and ``FEDCOMP_BLOCKS=rule`` uses the
    former rule, :data:`~fedcomp.runtime._clients.BLOCK_BYTES` (4 MiB) or a quarter of
    the last-level cache. With minibatches the working set is one minibatch per client.
    """
    entry = data_backend(problem.data)  # the entry the data were moved to
    if entry.block_policy == "all":
        # one call per block whatever its size: on a GPU, and in the compiled (jax) engine,
        # which cuts measured sub-blocks inside its call on a CPU (sub_block_size)
        return problem.n_clients
    return measured_block_size(problem, batch_size, entry.name, rule=cache_block_size,
                               by_rule=entry.block_policy == "rule")


def resolve_block_size(client_block: Any, problem: Problem, batch_size: int | None = None
                       ) -> int:
    check_client_block(client_block)
    if client_block == "auto":
        return auto_block_size(problem, batch_size)
    if client_block in ("all", None):
        return problem.n_clients
    return int(client_block)


def _sampled(sampling: Any, round_: int, n_clients: int) -> np.ndarray:
    """The client ids a user's ``sampling(round_)`` picks, checked and sorted.

    Sorted because blocks are cut from sorted ids (:func:`client_blocks` turns a run of
    consecutive ids into a slice), and so that the order a schedule lists its clients in
    never changes the results.
    """
    picked = np.asarray(sampling(round_)).reshape(-1)
    integral = picked.dtype.kind in "iu" or (picked.dtype.kind == "f"
                                              and bool(np.all(picked == np.round(picked))))
    ids = picked.astype(np.int64) if integral else picked
    if (not integral or len(ids) == 0 or len(np.unique(ids)) != len(ids) or ids.min() < 0
            or ids.max() >= n_clients):
        raise ValueError(f"sampling({round_}) must return distinct integer client ids in "
                         f"0..{n_clients - 1} (got {picked.tolist()})")
    return np.sort(ids)


def _executor(algorithm: FederatedAlgorithm, problem: Problem, clients: Any,
              client_states: Any, counters: Counters, settings: ClientSettings,
              server_prox: Any, compiled: bool, norm_limit: float) -> tuple[Any, Any]:
    """``(client executor, server step)`` of a run: the compiled engine and its compiled
    server step (data on jax arrays), or ``clients`` (default :class:`FusedLocalClients`) and
    the eager server step."""
    if compiled:
        from ._compiled import CompiledEngine

        engine = CompiledEngine(algorithm, problem, client_states, counters, settings,
                                server_prox)
        return engine, engine.server
    server = EagerServer(algorithm, problem, server_prox, counters, settings.seed)
    if clients is None:  # its own executor, which runs fused rounds with the server step
        return FusedLocalClients(algorithm, problem, client_states, counters, settings,
                                 server, norm_limit), server
    return clients(algorithm, problem, client_states, counters, settings), server


@accept_option_keywords
@quiet_overflow
def simulate(
    algorithm: FederatedAlgorithm,
    problem: Problem,
    rounds: int,
    *,
    x0: Any = None,
    seed: int = 0,
    clients_per_round: int | None = None,
    batch_size: int | None = None,
    eval_every: int = 1,
    metrics: Sequence[Any] = DEFAULT_METRICS,
    reference: Any = None,
    tol: float | None = None,
    options: RunOptions | None = None,
) -> RunResult:
    """Run a federated algorithm on a problem in one process, clients vectorised in blocks.

    Parameters
    ----------
    algorithm : FederatedAlgorithm
    problem : Problem
    rounds : int
        Communication rounds ``R``.
    x0 : array, optional
        Initial model, shape ``problem.param_shape`` (default ``problem.initial_model()``:
        zeros, or a network's seeded initial parameters).
    seed : int, default 0
        Keys client sampling and minibatches.
    clients_per_round : int, optional
        Participants sampled uniformly without replacement each round (all by default).
    batch_size : int, optional
        Minibatch size for every gradient call; ``None`` = full local gradients.
    eval_every : int, default 1
        Evaluate the metrics every this many rounds (and at round 0 and at the end).
    metrics : sequence of str or callable
        See :mod:`fedcomp.metrics`.
    reference : Reference, optional
        The centralized solution, for ``optimality``/``suboptimality``.
    tol : float, optional
        Stop at the first evaluation row whose ``options.stop`` measure is ``<= tol``
        (status ``"converged"``); a run whose ``rounds`` end first warns with a
        :class:`~fedcomp.runtime.ConvergenceWarning`. ``None`` (default): run every round.
    options : RunOptions, optional
        How the run executes and reports (:class:`~fedcomp.runtime.RunOptions`: client
        blocks, the jax engine, the executor, client states on disk, a sampling schedule,
        compute times, logger, progress line, tags, stopping measure, callbacks, divergence
        limit, resuming and warm starts); default ``RunOptions()``. One of its fields
        passed as a keyword of ``simulate`` (the former signature) is taken into it, with a
        ``FutureWarning`` naming the new form.

    Returns
    -------
    RunResult

    Raises
    ------
    NonFiniteError
        With ``on_divergence="raise"``, when the model becomes NaN/inf or its norm exceeds
        ``max_norm`` (the message names the round and what to change); the rows logged
        so far are kept.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import ClientData
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> from fedcomp.algorithms import fedavg
    >>> rng = np.random.default_rng(0)
    >>> data = ClientData.from_lists([rng.normal(size=(20, 3)) for _ in range(4)],
    ...                              [rng.normal(size=20) for _ in range(4)])
    >>> run = simulate(fedavg(client_lr=0.1), Problem(LeastSquares(), L1(0.01), data), rounds=3)
    >>> [row["round"] for row in run.history]
    [0, 1, 2, 3]
    """
    opts = options_of(options)
    state_dir = opts.state_dir  # below: a temporary one where disk states name none
    check_run_args(problem, rounds, clients_per_round, batch_size, eval_every, seed)
    check_compile(opts.compile, problem.data.like, problem.data.sparse)
    rule = StopRule(problem, tol, opts.stop, opts.callbacks, opts.on_divergence,
                    hint=algorithm.divergence_hint)
    if algorithm.execution != "rounds":
        raise ValueError(f"{algorithm.name} runs on an event clock, not in rounds; use "
                         "fedcomp.runtime.simulate_async")
    # a custom sampling is checked round by round (below): it may well pick every client
    setup = setup_context(problem, clients_per_round if opts.sampling is None else None)
    algorithm = algorithm.prepare(setup) or algorithm
    norm_limit = norm_limit_of(opts.max_norm)
    block_size = resolve_block_size(opts.client_block, problem, batch_size)
    x = problem.start_model(x0)
    server_state, client_states = algorithm.init(x, problem.n_clients)
    counters = Counters()
    recorder = Recorder(problem, rounds, eval_every=eval_every, metrics=metrics,
                        reference=reference, logger=opts.logger, tags=opts.tags,
                        progress=opts.progress,
                        label=algorithm.name)
    wall = 0.0
    sim_time = 0.0
    first = 0  # the first round to run (a resumed run's checkpoint round)
    if opts.initial_states is not None:
        server_state, client_states = adopt_initial_states(opts.initial_states, server_state,
                                                           client_states)
    if opts.resume_from is not None or has_checkpoint(opts.callbacks):
        # what this run's checkpoints carry and a checkpoint it resumes from must match:
        # made once (a pass over the data), only by a run that checkpoints or resumes
        fingerprint = run_fingerprint(
            algorithm, problem, x, seed=seed, batch_size=batch_size,
            clients_per_round=clients_per_round, sampling=opts.sampling,
            compute_times=opts.compute_times,
            initial_states=None if opts.initial_states is None
            else (server_state, client_states))
        bind_checkpoints(opts.callbacks, recorder.history, fingerprint)
    if opts.resume_from is not None:
        restored = load_checkpoint(opts.resume_from, fingerprint, rounds, server_state,
                                   client_states)
        first, server_state, client_states, counters = restored[:4]
        recorder.history.extend(restored.history)
        wall = float(restored.history[-1].get("wall_s", 0.0))
        sim_time = float(restored.history[-1].get("sim_time", 0.0))

    client_prox, server_prox = counted_prox(problem.regularizer, counters)
    def record(round_: int) -> bool:
        """The row of ``round_``; whether the run stops there (``tol`` or a callback)."""
        clocked = {} if clock is None else {"sim_time": sim_time}
        model = algorithm.output(server_state)
        row = recorder.record(round_, model, counters, wall, **clocked, **rule.columns(model))
        return rule.after_row(RunView(round_, row, model, server_state,
                                      getattr(run_clients, "client_states", None), counters,
                                      recorder.history, algorithm.name))

    like = problem.data.like
    clock = None if opts.compute_times is None else ComputeTimes.build(opts.compute_times,
                                                                       problem.n_clients)
    if opts.client_state == "disk" and opts.clients is not None:
        raise ValueError("client_state='disk' applies to the in-process simulator; a custom "
                         "executor (clients=...) keeps its own client state")
    scratch = None
    if opts.client_state == "disk" and state_dir is None:
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="fedcomp-states-")
        state_dir = scratch.name
    # the compiled engine: the data on jax arrays, the clients in this process
    # sparse jax data run eagerly: the compiled engine's traced gathers are dense
    compiled = (opts.clients is None and opts.client_state == "memory"
                and opts.compile is not False and data_backend(problem.data).compiles
                and not problem.data.sparse)
    settings = ClientSettings(seed, batch_size, block_size, client_prox,
                              state_dir if opts.client_state == "disk" else None, opts.compile)
    run_clients, server = _executor(algorithm, problem, opts.clients, client_states,
                                    counters, settings, server_prox, compiled, norm_limit)
    # fused rounds (several in one call) are a capability of an executor: the compiled
    # engine's, without a sampling callback; others run chunks of one round
    fused = getattr(run_clients, "run_rounds", None)
    chunk = 1 if fused is None or opts.sampling is not None else run_clients.chunk_length(
        clients_per_round, batch_size, eval_every)

    # rows computed in the executor's calls with the rounds (its optional capability): the
    # compiled engine's, where every metric and the stop rule trace; chosen once, else (a
    # user's metric, a reference, a clock, personal models) the rows are the host's
    plan = None
    if (getattr(run_clients, "row_plan", None) is not None and opts.sampling is None
            and clock is None and algorithm.personal_field is None):
        plan = run_clients.row_plan(metrics, reference, rule, rounds, eval_every, norm_limit,
                                    clients_per_round)

    def participants_of(r: int) -> np.ndarray:
        if opts.sampling is None:
            return sample_clients(seed, r, problem.n_clients, clients_per_round)
        participants = _sampled(opts.sampling, r, problem.n_clients)
        if len(participants) < problem.n_clients:  # raises what this round breaks
            algorithm.prepare(setup._replace(clients_per_round=len(participants)))
        return participants

    def run(r: int, group: list[np.ndarray]) -> list[Any]:
        """Rounds ``r, r + 1, ...`` (``group[k]``: round ``r + k``'s participants), done
        when it returns: ``Σ x²`` after each (``None``: the check reads the model)."""
        nonlocal server_state, sim_time
        if fused is None:
            server_state = star_round(algorithm, server, run_clients, counters, server_state,
                                      r, group[0])
            wait_for(like, server_state)  # a GPU computes the queued round after it returns
            sums: list[Any] = [None]
        else:
            server_state, sums = fused(server_state, r, group)
        if clock is not None:  # a synchronous round waits for its slowest participant
            sim_time += sum(float(clock.draw(seed, r + k, who, problem.n_clients)
                                  .max(initial=0.0)) for k, who in enumerate(group[:len(sums)]))
        return sums

    done = first  # the rounds run so far

    def run_rows(r: int, start_row: bool = False) -> bool | None:
        """Rounds ``r ..`` with their rows computed in the executor's call (``start_row``:
        and round ``r``'s row, before them), up to the next row a callback must see, else
        as far as the call goes: whether the run stops, or ``None`` where the executor
        left them to the host (its rows) and the chunks below."""
        nonlocal server_state, done, wall
        tic = time.perf_counter()
        until = (r if start_row else recorder.next_due(r)) if rule.callbacks else rounds
        out = run_clients.run_rows(server_state, r, until, participants_of, rule.carried(),
                                   start_row)
        if out is None:
            return None
        server_state, done = out.server_state, out.done
        elapsed = time.perf_counter() - tic
        model = algorithm.output(server_state)
        stopped = False
        for round_, counters_at, values, measure, objective in out.rows:
            # a row's wall time: the call's, shared out in proportion to its rounds
            row = recorder.record_values(round_, counters_at,
                                         wall + elapsed * (round_ - r) / max(done - r, 1),
                                         rule.device_columns(measure, model), values)
            stopped = rule.after_row(RunView(round_, row, model, server_state,
                                             run_clients.client_states, counters,
                                             recorder.history, algorithm.name), objective)
        wall += elapsed
        if out.diverged is not None:
            try:
                check_divergence(model, norm_limit, algorithm, recorder.tags,
                                 f"in round {done}", sum_sq=out.diverged)
            except NonFiniteError as exc:
                rule.diverged(exc)
                return True
        recorder.progress(done)
        return stopped

    try:
        stopped = False
        if opts.resume_from is None:
            if algorithm.warmup:  # round −1: every client (e.g. FedDR's x_i⁰ = prox_{ηf_i}(x⁰))
                tic = time.perf_counter()
                run(-1, [np.arange(problem.n_clients)])
                wait_for(like, server_state)
                wall += time.perf_counter() - tic
            # row 0 with the rounds after it where the executor computes rows
            whole = None if plan is None else run_rows(0, start_row=True)
            stopped = record(0) if whole is None else whole
        while done < rounds and not stopped:
            r = done
            whole = None if plan is None else run_rows(r)
            if whole is not None:
                stopped = whole
                continue
            tic = time.perf_counter()
            count = 1 if chunk == 1 else min(chunk, recorder.next_due(r) - r)
            sums = run(r, [participants_of(r + k) for k in range(count)])
            count = len(sums)  # fewer where a round diverged (its check raises below)
            done = r + count
            wall += time.perf_counter() - tic
            try:
                for k, sum_k in enumerate(sums):
                    # Σ x² of an earlier round of the call tells alone (the model is the
                    # last's)
                    check_divergence(algorithm.output(server_state) if k == count - 1
                                     else None, norm_limit, algorithm, recorder.tags,
                                     f"in round {r + k + 1}", sum_sq=sum_k)
                if recorder.due(done) or done == rounds:  # at the rows the user reads
                    check_personal_divergence(getattr(run_clients, "client_states", None),
                                              norm_limit, algorithm, recorder.tags,
                                              f"in round {done}")
            except NonFiniteError as exc:
                rule.diverged(exc)
                done = r + k + 1
                break
            if recorder.due(done):
                stopped = record(done)
            recorder.progress(done)
        final_states = getattr(run_clients, "client_states", None)
    finally:
        close = getattr(run_clients, "close", None)
        if close is not None:  # an executor with processes of its own (Ray actors) ends them
            close()
    if scratch is not None:  # the returned maps stay readable (POSIX unlinks lazily)
        scratch.cleanup()
    rule.finish(recorder.tags.get("algorithm", algorithm.name), done)
    return RunResult(algorithm.output(server_state), recorder.history, server_state,
                     final_states, counters, rule.status, done)
