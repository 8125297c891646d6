"""The federated algorithm interface: a set-up hook and five pure functions over NamedTuple states.

An algorithm is built by a factory that closes over its hyperparameters and returns a
:class:`FederatedAlgorithm`. The runner (``fedcomp.runtime``) owns execution — client
sampling, blocks, counters, Flower — and calls, once before round 1:

``prepare(setup) -> FederatedAlgorithm | None``
    The one door from the problem into the algorithm: ``setup`` is a :class:`SetupContext`
    (clients, participation, model shape, the regularizer, the clients' smoothness
    constants) built by :func:`setup_context`. ``prepare`` raises a ``ValueError`` naming
    the fix when the algorithm cannot run on it (partial participation where the algorithm
    needs every client, a prox step ``≥ 1/ρ``, ...) and returns the algorithm to run with
    every problem-derived default resolved (and recorded in its ``hyperparameters``), or
    ``None`` to run it as it is: ``algorithm = algorithm.prepare(setup) or algorithm``.

then

``init(x0, n_clients) -> (server_state, client_states)``
    ``client_states`` is a NamedTuple whose fields are stacked on axis 0 (one row per
    client, all n of them); an algorithm without client state returns ``EmptyState()``.
``broadcast(server_state) -> message``
    A NamedTuple of arrays sent to every participant (counted as floats down).
``client_update(message, client_states, ctx) -> (upload, client_states)``
    Runs the local work of a *block* of B clients at once: states and upload fields have
    a leading axis of size B. Data come only through ``ctx.oracle``; prox evaluations
    through ``ctx.prox`` (both counted): the regularizer of ``prepare``'s context is for
    set-up constants, never for the proxes of a round.
``server_update(server_state, uploads, ctx) -> server_state``
    ``uploads`` stacks every participant's upload on axis 0; ``ctx.weights`` are the
    client weights renormalised over the participants.
``output(server_state) -> x``
    The model to evaluate.

What a message costs: the runner counts every field of a broadcast and of an upload as
floats (``floats_down`` / ``floats_up``) and as ``floats × the bits of the field's dtype``
(``bits_down`` / ``bits_up``: 64 a float64 entry, 32 a float32 one). A message whose
fields are encoded otherwise (compressed: :func:`fedcomp.algorithms.compressed`) carries
its exact encoded size in a field named :data:`WIRE_BITS` (one integer per client on the
upload's leading axis), which then replaces the dtype count and is itself neither floats
nor bits (:func:`message_floats`, :func:`message_bits`).

An algorithm with ``warmup=True`` also gets one round with *every* client before round 1,
with ``ctx.round == -1`` on both sides (e.g. FedDR's ``x_i⁰ = prox_{ηf_i}(x⁰)``); its cost is
counted. ``execution="async"`` marks an algorithm for the event-clock runner
(:func:`fedcomp.runtime.simulate_async`) rather than rounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .._array import Array, bit_width, namespace, to_numpy
from ..oracle import Oracle

if TYPE_CHECKING:
    from ..regularizers import Regularizer
    from ._recipe import Recipe


#: The field of a message holding its exact encoded size in bits (per row of an upload).
WIRE_BITS = "wire_bits"


def message_floats(message: Any, leading: int = 0) -> int:
    """Entries of a message per client (``leading`` batch axes skipped), :data:`WIRE_BITS`
    excluded: what ``floats_up`` / ``floats_down`` count."""
    fields = message._fields
    if WIRE_BITS not in fields:  # the usual message: no field to skip
        if leading == 0:
            return int(sum(math.prod(f.shape) for f in message))
        return int(sum(math.prod(f.shape[leading:]) for f in message))
    return int(sum(math.prod(f.shape[leading:]) for name, f in zip(fields, message, strict=True)
                   if name != WIRE_BITS))


def message_bits(message: Any) -> int:
    """The encoded size in bits of a whole message (every row of a stacked upload).

    The sum of its :data:`WIRE_BITS` field where it has one, else every entry at the bit
    width of its dtype (:func:`fedcomp._array.bit_width`).

    Examples
    --------
    >>> from typing import NamedTuple
    >>> class Upload(NamedTuple):
    ...     delta: np.ndarray
    >>> message_bits(Upload(np.zeros((3, 4)))), message_bits(Upload(np.zeros(4, np.float32)))
    (768, 128)
    """
    if WIRE_BITS in message._fields:
        return int(to_numpy(getattr(message, WIRE_BITS)).sum())
    # NumPy arrays know their bytes (one attribute, where bit_width asks for the dtype)
    return int(sum(8 * f.nbytes if type(f) is np.ndarray else math.prod(f.shape) * bit_width(f)
                   for f in message))


class EmptyState(NamedTuple):
    """Client state of an algorithm that keeps none."""


class ClientContext(NamedTuple):
    """What a block of clients may use in ``client_update``.

    Attributes
    ----------
    oracle : Oracle
        ``oracle.grad(y)`` — each client's (minibatch) gradient at its model ``y (B, ...)``.
    prox : callable
        ``prox(v, step)`` — ``prox_{step·g}`` of each row of ``v (B, ...)``; counted.
    round : int
        The communication round ``r`` (0-based).
    client_ids : numpy int array, shape (B,)
    weights : array, shape (B,)
        The global weights ``π_i`` of these clients.
    n_clients : int
    """

    oracle: Oracle
    prox: Callable[[Array, Any], Array]
    round: int
    client_ids: np.ndarray
    weights: Array
    n_clients: int


class ServerContext(NamedTuple):
    """What the server may use in ``server_update``.

    Attributes
    ----------
    prox : callable
        ``prox(x, step)`` of a single model ``x`` (param_shape); counted.
    round : int
    client_ids : numpy int array
        The participants of the round, in the order of the stacked uploads.
    weights : array, shape (|S|,)
        ``π_i / Σ_{j∈S} π_j`` — the weights of a participants' average.
    pi : array, shape (|S|,)
        The raw global weights ``π_i`` of the participants.
    n_clients : int
    seed : int
        The run's seed, for the server's own counter-based draws keyed by ``(seed, round)``
        (:mod:`fedcomp.privacy`'s noise; the round's common coin the clients draw too, e.g.
        LoCoDL's server advancing its copy of the shared iterate); 0 where a caller has none.
    """

    prox: Callable[[Array, Any], Array]
    round: int
    client_ids: np.ndarray
    weights: Array
    pi: Array
    n_clients: int
    seed: int = 0


class SetupContext(NamedTuple):
    """What an algorithm may know of the problem before round 1: the argument of ``prepare``.

    Built once per run by the runner (:func:`setup_context`); a Flower node builds its own
    from the clients it hosts (the values ``prepare`` resolved on all the data reach it as
    hyperparameters).

    Attributes
    ----------
    n_clients : int
        The clients of the run.
    clients_per_round : int or None
        Participants per round; ``None`` when every client takes part in every round (or
        when the caller does not know: a Flower node, whose server has checked it).
    param_shape : tuple of int
        The shape of one model.
    dtype : dtype
        The models' floating dtype.
    regularizer : Regularizer
        ``g``, for set-up constants only: its ``weak_convexity`` and ``convex`` (step
        checks), its type and strength (C-FedDA's norm), its exact prox of values no
        message carries (ZA1's ``P(x̄⁰)``, FedCanon II's evaluation copy). The proxes of a
        round go through the counted ``ctx.prox`` of :class:`ClientContext` and
        :class:`ServerContext`.
    client_smoothness : callable
        ``client_smoothness()`` — each client's smoothness constant ``L_i`` as a NumPy
        array ``(n_clients,)``, reported once by every client: a pass over the data on the
        first call, cached.
    """

    n_clients: int
    clients_per_round: int | None
    param_shape: tuple[int, ...]
    dtype: Any
    regularizer: Regularizer
    client_smoothness: Callable[[], np.ndarray]


def setup_context(problem: Any, clients_per_round: int | None = None) -> SetupContext:
    """The :class:`SetupContext` of a run of ``problem`` with ``clients_per_round``.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp import ClientData, Problem
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> rng = np.random.default_rng(0)
    >>> data = ClientData.from_lists([rng.normal(size=(20, 3)) for _ in range(4)],
    ...                              [rng.normal(size=20) for _ in range(4)])
    >>> setup = setup_context(Problem(LeastSquares(), L1(0.01), data), clients_per_round=2)
    >>> setup.n_clients, setup.clients_per_round, setup.param_shape
    (4, 2, (3,))
    >>> setup.client_smoothness().shape
    (4,)
    """

    @functools.cache
    def client_smoothness() -> np.ndarray:
        return to_numpy(problem.loss.smoothness(problem.data.full_batch()))

    return SetupContext(problem.n_clients, clients_per_round, problem.param_shape,
                        problem.data.dtype, problem.regularizer, client_smoothness)


def algorithm_repr(algorithm: Any) -> str:
    """``name(hyperparameter=value, ...)``: how an algorithm reads where it is printed.

    The default NamedTuple repr would list the five functions as ``<function ...>`` objects;
    the name and the hyperparameters are what tell two algorithms apart (after ``prepare``,
    its resolved ones, e.g. ``smoothness='auto'`` become a number).

    Examples
    --------
    >>> from fedcomp import za1
    >>> za1(client_lr=0.5, local_steps=5)
    za1(client_lr=0.5, local_steps=5, server_lr=1.0, final_prox=True)
    """
    args = ", ".join(f"{key}={value!r}" for key, value in algorithm.hyperparameters.items())
    return f"{algorithm.name}({args})"


def _ready(setup: SetupContext) -> None:
    """The default ``prepare``: nothing to check or resolve."""
    return None


#: What the runner suggests when an algorithm's iterates blow up (overridable per algorithm).
STEP_HINT = "try a smaller step (client_lr / server_lr)"


class FederatedAlgorithm(NamedTuple):
    """A star-topology federated algorithm (see the module docstring for the contract)."""

    name: str
    init: Callable[[Array, int], tuple[Any, Any]]
    broadcast: Callable[[Any], Any]
    client_update: Callable[[Any, Any, ClientContext], tuple[Any, Any]]
    server_update: Callable[[Any, Any, ServerContext], Any]
    output: Callable[[Any], Array]
    hyperparameters: dict[str, Any]
    #: ``prepare(setup)`` checks the algorithm against the problem's :class:`SetupContext`
    #: and returns a copy with problem-derived defaults resolved (e.g. a smoothness constant
    #: reported once by every client), or ``None`` to run it as is. The algorithm it
    #: returns keeps the checks: preparing it again checks and gives the same algorithm.
    prepare: Callable[[SetupContext], FederatedAlgorithm | None] = _ready
    divergence_hint: str = STEP_HINT
    #: one round with every client (``round == -1``) before round 1
    warmup: bool = False
    #: "rounds" (:func:`fedcomp.runtime.simulate`) or "async" (``simulate_async``)
    execution: str = "rounds"
    #: the client-state field that holds each client's own model (Ditto's ``personal``),
    #: or ``None``: the runner checks those models for divergence as it checks the global
    #: one, since they never reach the server's model
    personal_field: str | None = None
    #: What it is, when transforms wrapped it (:class:`~fedcomp.algorithms.Recipe`);
    #: ``None``: its factory built it, it is its name and hyperparameters
    #: (:func:`~fedcomp.algorithms.recipe_of`)
    recipe: Recipe | None = None

    def __repr__(self) -> str:
        return algorithm_repr(self)


def replicate(x: Array, n: int) -> Array:
    """``n`` copies of the model ``x`` stacked on a new leading axis (a view where possible)."""
    xp = namespace(x)
    return xp.broadcast_to(x[None, ...], (n, *x.shape))


def average(values: Array, weights: Array) -> Array:
    """``Σ_i w_i values_i`` over the leading axis."""
    from .._array import weighted_sum

    return weighted_sum(values, weights)


def _numpy_scalar_hint(value: Any) -> str:
    """The fix for a NumPy scalar where a Python number is needed, else nothing."""
    if isinstance(value, np.generic):
        # Python numbers only: a NumPy float64 scalar would promote float32 models to
        # float64 (NEP 50), and hyperparameters are written to JSON as they are given.
        return f"; this is a NumPy scalar: pass {value.item()!r} (.item() or float()/int())"
    return ""


def check_positive(owner: str, **params: Any) -> None:
    """Raise a ``ValueError`` naming the first parameter that is not a Python number > 0."""
    for name, value in params.items():
        # np.float64 subclasses float: refused too, or it would promote float32 models
        is_number = isinstance(value, int | float) and not isinstance(value, bool | np.generic)
        if not (is_number and value > 0):
            raise ValueError(f"{owner}: {name} must be a positive number (got {name}={value!r})"
                             + _numpy_scalar_hint(value))


def check_local_steps(owner: str, local_steps: Any) -> None:
    is_int = isinstance(local_steps, int) and not isinstance(local_steps, bool)
    if not (is_int and local_steps >= 1):
        raise ValueError(f"{owner}: local_steps must be an integer >= 1 (got {local_steps!r})"
                         + _numpy_scalar_hint(local_steps))


def check_flag(owner: str, **flags: Any) -> None:
    """Raise a ``ValueError`` naming the first switch that is not ``True`` or ``False``.

    Truthiness is not enough: the string ``"False"`` (what ``--set server_prox=False``
    gives, TOML booleans being lowercase) is true and would turn the switch on.
    """
    for name, value in flags.items():
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"{owner}: {name} must be True or False (got {name}={value!r}); "
                             "in a TOML config or --set write lowercase true / false")


def check_max_delay(value: Any, owner: str) -> None:
    """``None`` or an integer ``>= 0``: a staleness bound τ in server steps."""
    ok = value is None or (isinstance(value, int | np.integer) and not isinstance(value, bool)
                           and value >= 0)
    if not ok:
        raise ValueError(f"{owner}: max_delay must be an integer >= 0 (server steps) or None "
                         f"for no bound (got {value!r})")


#: A check of ``prepare``: raises a ``ValueError`` naming the fix, else returns ``None``.
Check = Callable[[SetupContext], None]


def require_full_participation(owner: str) -> Check:
    """A ``prepare`` check for algorithms defined only with every client in every round."""

    def check(setup: SetupContext) -> None:
        if setup.clients_per_round is not None and setup.clients_per_round < setup.n_clients:
            raise ValueError(
                f"{owner} is defined for full participation only (its correction term uses the "
                f"server update of the previous round); got {setup.clients_per_round} of "
                f"{setup.n_clients} clients per round. Use every client in every round "
                "(clients_per_round=None, no sampling=), or an algorithm with client sampling "
                "such as FedDR or SCAFFOLD.")

    return check


def check_prox_steps(owner: str, largest_step: float, fix: str) -> Check:
    """A ``prepare`` check: every prox step stays below ``1/ρ`` for a ρ-weakly convex ``g``.

    ``g`` with ``ρ = inf`` (``l0``, ``l0_ball``) passes: hard thresholding is defined at
    every step, and an algorithm run on it is a heuristic (iterative hard thresholding).

    Checked before round 1 so a run never starts with hyperparameters that would fail
    (or, worse, silently stop being a prox) in its first round.
    """

    def check(setup: SetupContext) -> None:
        rho = setup.regularizer.weak_convexity
        # ρ = inf marks l0 / l0_ball: not weakly convex, but their prox (hard thresholding,
        # ties broken deterministically) is single-valued at every step, so no bound applies
        if 0 < rho < float("inf") and largest_step * rho >= 1:
            raise ValueError(
                f"{owner}: {type(setup.regularizer).__name__} is weakly convex with "
                f"rho={rho:g}, so every prox step must be < 1/rho={1 / rho:g}, but this "
                f"configuration uses prox steps up to {largest_step:g}; {fix}")

    return check


def all_of(*checks: Check) -> Check:
    """Run several ``prepare`` checks in order."""

    def check(setup: SetupContext) -> None:
        for each in checks:
            each(setup)

    return check
