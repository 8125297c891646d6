"""How a run executes and reports: :class:`RunOptions`, one typed object beside what a user
sets about the problem (rounds, participation, metrics, tolerance).

:func:`~fedcomp.runtime.simulate` takes the run's problem-level settings as keywords and
everything else here, so its signature stays what a user reads first, in the manner of
scikit-learn's estimators (the constructor stores and checks its arguments). A caller of
the former signature (``simulate(..., progress=False)``) still runs, with one
``FutureWarning`` naming the field and the new form (:func:`accept_option_keywords`).
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import warnings
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from ._checks import norm_limit_of
from ._stopping import check_on_divergence, check_stop

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How :func:`~fedcomp.runtime.simulate` runs a federated algorithm and reports on it.

    Most of these change how the run executes and reports, never its iterates:
    ``sampling`` changes who takes part, ``resume_from`` and ``initial_states`` where the
    run starts, and ``stop``, ``callbacks``, ``max_norm`` and ``on_divergence`` where it
    stops.
    Each argument is checked here where it can be without the problem; the checks that
    need the problem (``compile`` against the data's arrays, a ``sampling``'s ids) run in
    :func:`~fedcomp.runtime.simulate`.

    Parameters
    ----------
    client_block : "auto", "all" or int, default "auto"
        Clients per vectorised block (results do not depend on it).
    compile : "auto", True or False, default "auto"
        With the data on jax arrays (``backend = "jax"``), run each block's
        ``client_update`` and the ``server_update`` under ``jax.jit``
        (:mod:`fedcomp.runtime._compiled`): ``"auto"`` runs a part that cannot be traced
        (it needs a host value inside the round: a random number of local steps, a
        converged Newton solve) eagerly on the jax arrays, with a warning saying why;
        ``True`` raises :class:`~fedcomp.runtime.NotCompilableError` instead; ``False``
        runs everything eagerly. Ignored for other arrays (``True`` raises).
    clients : class, optional
        The client executor (default :class:`~fedcomp.runtime._clients.LocalClients`,
        vectorised blocks in this process); :mod:`fedcomp.flower` passes one that runs the
        participants on SuperNodes, :func:`~fedcomp.runtime.ray_clients` one on Ray actors.
        Sampling, server updates, counters, evaluation and logging stay in
        :func:`~fedcomp.runtime.simulate` either way.
    client_state : {"memory", "disk"}, default "memory"
        Where the stacked client states live. ``"disk"`` keeps them in memory-mapped
        ``.npy`` files under ``state_dir``, reads one block of clients at a time and drops
        its pages from memory after writing it back, for client states that do not fit in
        RAM (NumPy backend; same iterates, bit for bit; the states' share of the peak memory
        then grows with ``client_block``, not ``n_clients``).
    state_dir : path, optional
        Directory of the state files for ``client_state="disk"`` (default: a fresh
        temporary directory, removed after the run).
    sampling : callable, optional
        ``sampling(round) -> client ids``: any other client sampling (non-uniform, a fixed
        schedule); overrides ``clients_per_round``. It must be a pure function of the round.
    compute_times : ComputeTimes or dict, optional
        Each client's compute-time distribution (see :class:`~fedcomp.runtime.ComputeTimes`):
        rows then get a ``sim_time`` column, a round lasting as long as its slowest
        participant.
    logger : object with ``log(row)``, optional
        Receives each evaluation row as it is produced.
    progress : "auto" or bool, default "auto"
        The run's progress: ``"auto"`` shows a line on stderr when it is a terminal and
        tqdm's widget in a Jupyter notebook (``pip install 'fedcomp[notebook]'``; without
        it, the line), nothing elsewhere; ``True`` always, ``False`` never.
    tags : dict, optional
        Extra columns added to every row (e.g. ``{"algorithm": ..., "seed": ...}``).
    stop : str, default "relative_prox_step"
        The measure ``simulate``'s ``tol`` bounds
        (:data:`~fedcomp.runtime.STOP_MEASURES`): the relative prox-gradient step
        ``‖x − prox_{sg}(x − s∇f(x))‖ / ‖x‖``, the ``prox_grad_norm`` metric, or the
        ``relative_change`` between two rows. Its value is a column of every row.
    callbacks : callable or list of callables, optional
        Each is called with a :class:`~fedcomp.runtime.RunView` after every evaluation row;
        one returning ``True`` stops the run (status ``"stopped"``).
        :class:`~fedcomp.runtime.EarlyStopping` and :class:`~fedcomp.runtime.Checkpoint`
        are two such.
    max_norm : float or None, default 1e12
        A model whose norm exceeds this counts as diverged (long before it overflows);
        ``None`` checks only for NaN/inf.
    on_divergence : {"return", "raise"}, default "return"
        A diverged model (non-finite, or its norm above ``max_norm``): return the rows so
        far with status ``"diverged"`` and a :class:`RuntimeWarning` naming the round and
        what to change, or raise :class:`~fedcomp.runtime.NonFiniteError`.
    resume_from : path, optional
        A :class:`~fedcomp.runtime.Checkpoint` file of this run: the run continues from its
        round, to the same iterates as an uninterrupted run (``rounds`` may be more). The
        file's fingerprint of its run (algorithm, hyperparameters, loss, regularizer, data,
        weighting, seed, participation, batch size, start) must be this run's: a checkpoint
        of another run, one without a fingerprint, a hand-edited or a damaged one is a
        ``ValueError`` naming the file and the field.
    initial_states : (server_state, client_states), optional
        Start from these states (an earlier run's ``RunResult.server_state`` and
        ``client_states`` of this algorithm, same clients) instead of ``init(x0)``: a warm
        start that keeps what an algorithm carries besides its model (ZA1's pre-prox
        server variable, control variates). The warm-up round, if any, still runs.

    Examples
    --------
    >>> from fedcomp.runtime import RunOptions
    >>> quiet = RunOptions(progress=False, client_block=8)
    >>> quiet.client_block, quiet.on_divergence
    (8, 'return')
    >>> RunOptions(client_state="ram")
    Traceback (most recent call last):
    ...
    ValueError: client_state must be 'memory' or 'disk' (got 'ram')
    """

    client_block: Any = "auto"
    compile: Any = "auto"
    clients: Any = None
    client_state: str = "memory"
    state_dir: Any = None
    sampling: Callable[[int], Any] | None = None
    compute_times: Any = None
    logger: Any = None
    progress: Any = "auto"
    tags: dict[str, Any] | None = None
    stop: str = "relative_prox_step"
    callbacks: Any = None
    max_norm: float | None = 1e12
    on_divergence: str = "return"
    resume_from: Any = None
    initial_states: Any = None

    def __post_init__(self) -> None:
        check_client_block(self.client_block)
        if self.client_state not in ("memory", "disk"):
            raise ValueError(f"client_state must be 'memory' or 'disk' (got "
                             f"{self.client_state!r})")
        check_stop(self.stop)
        norm_limit_of(self.max_norm)
        check_on_divergence(self.on_divergence)


#: The names of :class:`RunOptions`' fields, in their order.
OPTION_FIELDS = tuple(field.name for field in dataclasses.fields(RunOptions))


def check_client_block(client_block: Any, name: str = "client_block") -> None:
    """``client_block`` is ``"auto"``, ``"all"`` (or ``None``: all) or a positive integer."""
    if isinstance(client_block, str) and client_block in ("auto", "all"):
        return
    if client_block is None or (isinstance(client_block, int)
                                and not isinstance(client_block, bool) and client_block >= 1):
        return
    raise ValueError(f"{name} must be 'auto', 'all' or a positive integer "
                     f"(got {client_block!r})")


def options_of(options: Any) -> RunOptions:
    """A run's :class:`RunOptions` (``None``: the defaults); any other object is one
    ``TypeError`` saying how to build one."""
    if options is None:
        return RunOptions()
    if not isinstance(options, RunOptions):
        raise TypeError(f"options must be a fedcomp.RunOptions (got {options!r} of type "
                        f"{type(options).__name__}); e.g. options=RunOptions(progress=False)")
    return options


def split_options(keywords: dict[str, Any]) -> tuple[dict[str, Any], RunOptions]:
    """``keywords`` of the runners (:func:`~fedcomp.runtime.simulate_async` and
    :func:`~fedcomp.runtime.simulate_decentralized` take the options as keywords): those
    :func:`~fedcomp.runtime.simulate` takes as its own, and a :class:`RunOptions` of the
    rest, for a caller that builds one set of keywords for all three."""
    own = {name: value for name, value in keywords.items() if name not in OPTION_FIELDS}
    return own, RunOptions(**{name: value for name, value in keywords.items()
                              if name in OPTION_FIELDS})


def accept_option_keywords(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` (:func:`~fedcomp.runtime.simulate`), taking a :class:`RunOptions` field
    passed as its own keyword into its ``options``, with one ``FutureWarning`` that names
    it and the new form.

    They were ``simulate``'s keywords until the options became one object: code written for
    the former signature keeps running (to the same iterates) while it is moved. Given
    beside an ``options`` object, they are one ``TypeError``: which of the two would win is
    not for this wrapper to guess. ``functools.wraps`` keeps ``function``'s signature for
    ``inspect`` and the docs.
    """

    @functools.wraps(function)
    def accepting(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        moved: dict[str, Any] = {name: kwargs.pop(name) for name in OPTION_FIELDS
                                 if name in kwargs}
        if moved:
            # reprlib: an initial_states or a sampling table would fill the screen
            given = ", ".join(f"{name}={reprlib.repr(value)}" for name, value in moved.items())
            what = "is a RunOptions field" if len(moved) == 1 else "are RunOptions fields"
            fix = f"{function.__name__}(..., options=RunOptions({given}))"
            them = "it" if len(moved) == 1 else "them"
            if kwargs.get("options") is not None:
                raise TypeError(f"{', '.join(moved)} {what}: give {them} inside options, "
                                f"not beside it: {fix}")
            warnings.warn(f"{', '.join(moved)} {what}: passing {them} to "
                          f"{function.__name__} is deprecated and will be an error in a "
                          f"later release; write {fix}", FutureWarning, stacklevel=2)
            kwargs["options"] = RunOptions(**moved)
        return function(*args, **kwargs)

    return accepting
