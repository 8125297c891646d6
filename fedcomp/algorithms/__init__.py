"""Federated algorithms: one factory per file, a registry by name.

Every factory closes over its hyperparameters and returns a :class:`FederatedAlgorithm`
(five pure functions over NamedTuple states); the runner executes it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

from .._registry import AlgorithmEntry, HostValue, Registry, check_finite
from ._base import ClientContext, EmptyState, FederatedAlgorithm, ServerContext
from ._compressed import compressed
from ._decentralized import DecentralizedAlgorithm, NodeContext
from ._private import private
from .c_fedda import c_fedda
from .compressed_scaffnew import compressed_scaffnew
from .dfedda import dfedda, dfedda_gt, dfedmid, drefedda_gt
from .ditto import ditto
from .fast_fedda import fast_fedda
from .fedadmm import fedadmm
from .fedavg import fedavg
from .fedcanon import fedcanon, fedcanon2, fedcanon_controls
from .fedda import fedda
from .feddr import async_feddr, feddr, fedsplit
from .fedexprox import fedexprox
from .fedht import fed_ht, fediter_ht
from .fedmid import fedmid
from .fedpd import fedpd
from .fedprox import fedprox
from .locodl import locodl
from .mc_fedda import mc_fedda
from .pfedme import pfedme
from .refedda_gt import fedda_gt, multistep_refedda_gt, refedda_gt
from .scaffnew import scaffnew
from .scaffold import scaffold
from .sdane import sdane
from .tamuna import tamuna
from .za1 import za1, za1_correction

CLIENT, BOTH = ("client update",), ("client update", "server update")
#: The values an algorithm reads on the host inside a round (:class:`HostValue`): the
#: compiled engine runs those parts eagerly, saying why. Checked against the engine by
#: tests/test_jax_engine.py (each is still needed: tracing that part really fails).
CONSTRAINED_PROX = HostValue(BOTH, "the ball-constrained prox bisects until converged, a host "
                             "test per step")
NEWTON = HostValue(CLIENT, "the exact local prox is a damped Newton solve that stops when "
                   "every client has converged (one step, traced, on a quadratic loss)",
                   lambda hp, batch, quadratic: not quadratic)
NEWTON_WHEN_EXACT = NEWTON._replace(applies=lambda hp, batch, quadratic: (
    hp.get("local_solver") == "exact" and not quadratic))
GEOMETRIC_STEPS = HostValue(CLIENT, "the round's geometric number of local steps is drawn on "
                            "the host from a hash of the round")
SHARED_MASK = HostValue(BOTH, "the shared sparsity pattern's masks are built on the host from "
                        "the participants' ids")
EPOCHS = HostValue(CLIENT, "epochs of minibatches: each client's step count ceil(n_i / b) is "
                   "read from its sample count on the host",
                   lambda hp, batch, quadratic: hp.get("local_epochs") is not None
                   and batch is not None)
RESTART_STAGE = HostValue(BOTH, "the restart stage is read on the host (it sets the radius "
                          "and the number of local steps)")

#: Every algorithm by configuration name, with how the runner executes it (a static fact:
#: ``REGISTRY.entry(name).execution``, no need to build the algorithm to learn it).
REGISTRY: Registry[AlgorithmEntry] = Registry("algorithm", [
    AlgorithmEntry("fedavg", fedavg,
                   "FedAvg / local SGD, optional server prox (McMahan et al. 2017)"),
    AlgorithmEntry("fedmid", fedmid,
                   "Federated mirror descent: local prox-SGD, primal averaging (Yuan et al. 2021)"),
    AlgorithmEntry("fedda", fedda,
                   "Federated dual averaging: local dual averaging, dual averaging "
                   "(Yuan et al. 2021)"),
    AlgorithmEntry("za1", za1,
                   "Decoupled prox + drift correction (Zhang, Hu, Johansson 2024, seed 000)"),
    AlgorithmEntry("fast_fedda", fast_fedda,
                   "Dual averaging with increasing weights, strongly convex (Bao et al. 2022)"),
    AlgorithmEntry("c_fedda", c_fedda,
                   "Constrained dual averaging, exact l1/nuclear-ball constrained prox "
                   "(Bao et al. 2022)", unbounded=("radius",),
                   host_values=(CONSTRAINED_PROX,)),  # inf: no ball
    AlgorithmEntry("feddr", feddr,
                   "Randomized Douglas-Rachford splitting, client sampling "
                   "(Tran-Dinh et al. 2021)",
                   host_values=(NEWTON_WHEN_EXACT,)),
    AlgorithmEntry("fedsplit", fedsplit,
                   "Peaceman-Rachford = FedDR with alpha=2, exact prox (Pathak, Wainwright 2020)",
                   host_values=(NEWTON,)),
    AlgorithmEntry("async_feddr", async_feddr,
                   "Asynchronous FedDR on an event clock, stale models (Tran-Dinh et al. 2021)",
                   execution="async"),
    AlgorithmEntry("fedadmm", fedadmm,
                   "ADMM, server keeps every client's latest upload "
                   "(Wang, Marella, Anderson 2022)"),
    AlgorithmEntry("fedpd", fedpd,
                   "Federated primal-dual, communicate with probability p (Zhang et al. 2021)"),
    AlgorithmEntry("pfedme", pfedme,
                   "pFedMe: Moreau-envelope personal models with g in each personal problem "
                   "(Dinh, Tran, Nguyen 2020)"),
    AlgorithmEntry("sdane", sdane,
                   "S-DANE / Acc-S-DANE: doubly regularised local problems, control variates, "
                   "a dual point; the prox of g in both (Jiang, Rodomanov, Stich 2024)",
                   host_values=(HostValue(BOTH, "a round's phase (gradient exchange or local "
                                          "solve) is read on the host"),)),
    AlgorithmEntry("fedprox", fedprox,
                   "Local proximal term mu/2||x - xbar||^2, optional server prox (Li et al. 2020)",
                   host_values=(EPOCHS,)),
    AlgorithmEntry("fedexprox", fedexprox,
                   "FedProx with exact proxes + server extrapolation: constant, gradient "
                   "diversity or Polyak (Li, Acharya, Richtarik 2024)",
                   host_values=(NEWTON,)),
    AlgorithmEntry("fed_ht", fed_ht,
                   "Fed-HT: local SGD, server hard-thresholds the average to s entries, l0_ball "
                   "(Tong et al. 2020)"),
    AlgorithmEntry("fediter_ht", fediter_ht,
                   "FedIter-HT: hard-thresholded local SGD steps and average, l0_ball "
                   "(Tong et al. 2020)"),
    AlgorithmEntry("mc_fedda", mc_fedda,
                   "Multistage C-FedDA: shrinking lambda and radius, warm starts "
                   "(Bao et al. 2022)",
                   host_values=(HostValue(BOTH, "a round's stage is looked up on the host in the "
                                          "stage schedule"), CONSTRAINED_PROX)),
    AlgorithmEntry("fedcanon", fedcanon,
                   "Prox-free local steps + control variates, one server prox "
                   "(Zhou et al., seed 002)"),
    AlgorithmEntry("fedcanon2", fedcanon2,
                   "FedCanon II: each client applies the prox, only the average is broadcast"),
    AlgorithmEntry("scaffold", scaffold,
                   "SCAFFOLD, option II control variates, optional server prox (Karimireddy 2020)"),
    AlgorithmEntry("scaffnew", scaffnew,
                   "Scaffnew/ProxSkip: communicate with probability p per step (Mishchenko 2022)",
                   host_values=(GEOMETRIC_STEPS,)),
    AlgorithmEntry("compressed_scaffnew", compressed_scaffnew,
                   "Scaffnew with a shared mask: each coordinate sent by s of n clients "
                   "(Condat, Agarsky, Richtarik 2022)",
                   host_values=(SHARED_MASK,)),
    AlgorithmEntry("tamuna", tamuna,
                   "Local training, shared-mask compression, own cohort of c clients a round "
                   "(Condat et al. 2023)",
                   host_values=(SHARED_MASK,)),
    AlgorithmEntry("locodl", locodl,
                   "Local training + any unbiased compressor of x_i - y, shared y "
                   "(Condat, Maranjyan, Richtarik 2025)",
                   host_values=(HostValue(BOTH, GEOMETRIC_STEPS.reason),)),
    AlgorithmEntry("fedda_gt", fedda_gt,
                   "l_q dual averaging with gradient tracking, server form (Liang et al. 2023)"),
    AlgorithmEntry("refedda_gt", refedda_gt,
                   "Restricted FedDA-GT, l_q-ball dual-to-primal map, top-s output (Liang et al.)",
                   host_values=(RESTART_STAGE,)),
    AlgorithmEntry("multistep_refedda_gt", multistep_refedda_gt,
                   "Restarted ReFedDA-GT with halving radius (Liang et al. 2023)",
                   host_values=(RESTART_STAGE,)),
    AlgorithmEntry("dfedda", dfedda,
                   "Decentralized l_q dual averaging, gossip of duals (Liang et al. 2023)",
                   execution="decentralized"),
    AlgorithmEntry("dfedda_gt", dfedda_gt,
                   "DFedDA with gradient tracking (Liang, Peng, Zhang 2023, Algorithm 1)",
                   execution="decentralized"),
    AlgorithmEntry("drefedda_gt", drefedda_gt,
                   "Gossip ReFedDA-GT: restricted map, sparsified average (Liang et al. 2023)",
                   execution="decentralized"),
    AlgorithmEntry("dfedmid", dfedmid,
                   "Decentralized FedMiD: local prox-SGD, gossip of primal models (baseline)",
                   execution="decentralized"),
])



def _finite_arguments(entry: AlgorithmEntry) -> AlgorithmEntry:
    """``entry`` whose factory refuses NaN and ±inf numbers (but its ``unbounded`` ones),
    naming the parameter: what :meth:`Registry.make` checks for configurations, for the
    Python API too (``za1(client_lr=inf)`` would run a round and fail on NaN)."""
    factory = entry.factory

    @functools.wraps(factory)
    def checked(*args: Any, **kwargs: Any) -> Any:
        arguments = inspect.signature(factory).bind_partial(*args, **kwargs).arguments
        try:  # a factory's own check says more (FedDA-GT's p = inf: "2 ln d")
            algorithm = factory(*args, **kwargs)
        except (TypeError, ArithmeticError):  # int(nan), inf steps: name the number
            check_finite(arguments, entry.name, entry.unbounded)
            raise
        check_finite(arguments, entry.name, entry.unbounded)
        return algorithm

    return dataclasses.replace(entry, factory=checked)


REGISTRY = Registry("algorithm", [_finite_arguments(e) for e in REGISTRY.entries()])
# the package's names are the checked factories (fedcomp.za1 is fedcomp.algorithms.za1)
globals().update({e.factory.__name__: e.factory for e in REGISTRY.entries()})

#: Star-topology algorithms (synchronous rounds and asynchronous), run by
#: :func:`fedcomp.runtime.simulate` / :func:`fedcomp.runtime.simulate_async`.
ALGORITHMS: Registry[AlgorithmEntry] = REGISTRY.filter(lambda e: e.execution != "decentralized")

#: Gossip algorithms, run by :func:`fedcomp.runtime.simulate_decentralized` over a topology.
DECENTRALIZED: Registry[AlgorithmEntry] = REGISTRY.filter(
    lambda e: e.execution == "decentralized")

#: One line per algorithm, for ``fedcomp list``.
DESCRIPTIONS = REGISTRY.describe()


def execution_of(name: str) -> str:
    """The engine of a registered algorithm: ``"rounds"``, ``"async"`` or ``"decentralized"``.

    A static fact of its :data:`REGISTRY` entry (nothing is built to learn it).

    Examples
    --------
    >>> execution_of("async_feddr"), execution_of("dfedda_gt")
    ('async', 'decentralized')
    """
    return REGISTRY.entry(name).execution


def host_values(algorithm: FederatedAlgorithm, batch_size: int | None = None,
                quadratic: bool = False) -> dict[str, str]:
    """``{part: why}`` for the parts of a round in which ``algorithm`` reads a value on the
    host (its registry entry's :class:`~fedcomp._registry.HostValue` traits, and those of
    a compression or privacy wrapper around it); empty when the whole round can compile.

    An algorithm that is not registered (a user's own) has no declared traits: the
    compiled engine then learns by tracing it.

    Examples
    --------
    >>> sorted(host_values(scaffnew())), sorted(host_values(tamuna(s=2, cohort_size=4)))
    (['client update'], ['client update', 'server update'])
    >>> host_values(za1())
    {}
    """
    hp = algorithm.hyperparameters
    name = algorithm.name
    traits = list(REGISTRY.entry(name).host_values) if name in REGISTRY else []
    for prefix in ("dp_", "ditto_"):  # a wrapper's name around a registered algorithm
        if name not in REGISTRY and name.startswith(prefix) and name[len(prefix):] in REGISTRY:
            traits += REGISTRY.entry(name[len(prefix):]).host_values
    if "compressor" in hp:  # fedcomp.algorithms.compressed
        traits.append(HostValue(BOTH if hp.get("ef21") else CLIENT,
                                "the compressor's draws are hashes of the round and the "
                                "client ids, on the host"))
    if "noise_multiplier" in hp and "clip" in hp:  # fedcomp.privacy.private
        traits.append(HostValue(CLIENT if hp.get("local") else ("server update",),
                                "the Gaussian noise is drawn on the host, keyed by a hash of "
                                "the round"))
    found: dict[str, str] = {}
    for trait in traits:
        if trait.applies is None or trait.applies(hp, batch_size, quadratic):
            for part in trait.parts:
                found[part] = f"{found[part]}; {trait.reason}" if part in found else trait.reason
    return found


def make_algorithm(name: str, **hyperparameters: Any) -> Any:
    """Build a registered (federated or decentralized) algorithm by name.

    Parameters
    ----------
    name : str
        A name of :data:`REGISTRY`.
    **hyperparameters
        Keyword arguments of that algorithm's factory.

    Returns
    -------
    FederatedAlgorithm or DecentralizedAlgorithm

    Raises
    ------
    UnknownNameError
        For an unknown name (the message lists the valid ones).
    UnknownParameterError
        For a hyperparameter the factory does not take (the message lists the accepted ones).
    ValueError
        For an invalid value (both errors above are ``ValueError`` too).

    Examples
    --------
    >>> make_algorithm("fedavg", client_lr=0.1).name
    'fedavg'
    """
    return REGISTRY.make(name, **hyperparameters)


def rebuild_algorithm(name: str, **hyperparameters: Any) -> Any:
    """An algorithm rebuilt from its name and its (JSON) ``hyperparameters``.

    :func:`make_algorithm`, and for the ``compressor`` / ``ef21`` entries that
    :func:`compressed` adds, the same compression around it, and for a ``dp_NAME`` with
    the ``clip`` / ``noise_multiplier`` / ``local`` entries of :func:`fedcomp.privacy.private`,
    the same privacy around that: what a Flower node does with the hyperparameters the
    server sends.

    Examples
    --------
    >>> from fedcomp.compressors import QSGD
    >>> alg = compressed(make_algorithm("fedavg", client_lr=0.1), QSGD(levels=4))
    >>> rebuild_algorithm("fedavg", **alg.hyperparameters).hyperparameters == alg.hyperparameters
    True
    """
    from ..compressors import make_compressor

    if name.startswith("dp_") and "clip" in hyperparameters:
        # private(...) named it dp_NAME and added its three keys around the rest
        clip, sigma = hyperparameters.pop("clip"), hyperparameters.pop("noise_multiplier")
        local = hyperparameters.pop("local")
        return private(rebuild_algorithm(name.removeprefix("dp_"), **hyperparameters),
                       clip=float(clip), noise_multiplier=float(sigma), local=local)
    if name.startswith("ditto_") and "ditto" in hyperparameters:
        # ditto(...) named it ditto_NAME and added its table to the rest
        table = hyperparameters.pop("ditto")
        return ditto(rebuild_algorithm(name.removeprefix("ditto_"), **hyperparameters),
                     **table)
    table = hyperparameters.pop("compressor", None)
    ef21 = hyperparameters.pop("ef21", False)
    algorithm = make_algorithm(name, **hyperparameters)
    if table is None:
        return algorithm
    params = {k: v for k, v in table.items() if k != "name"}
    return compressed(algorithm, make_compressor(table["name"], **params), ef21=ef21)


__all__ = ["ALGORITHMS", "DECENTRALIZED", "DESCRIPTIONS", "REGISTRY", "ClientContext",
           "DecentralizedAlgorithm", "EmptyState", "FederatedAlgorithm", "NodeContext",
           "ServerContext", "c_fedda", "dfedda", "dfedda_gt", "dfedmid", "drefedda_gt",
           "fast_fedda", "fedavg", "fedda", "fedda_gt", "fedmid", "make_algorithm", "mc_fedda",
           "multistep_refedda_gt", "refedda_gt", "za1", "za1_correction",
           "fedcanon", "fedcanon2", "fedcanon_controls", "scaffnew", "scaffold"]
__all__ += ["fed_ht", "fedexprox", "fediter_ht", "host_values"]
__all__ += ["compressed_scaffnew", "locodl", "tamuna"]
__all__ += ["ditto", "pfedme", "sdane"]
__all__ += ["compressed", "rebuild_algorithm", "execution_of", "async_feddr", "fedadmm", "feddr",
            "fedpd", "fedprox", "fedsplit"]
