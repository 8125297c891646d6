"""Federated algorithms: one factory per file, a registry by name.

Every factory closes over its hyperparameters and returns a :class:`FederatedAlgorithm`
(five pure functions over NamedTuple states); the runner executes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._base import ClientContext, EmptyState, FederatedAlgorithm, ServerContext
from ._decentralized import DecentralizedAlgorithm, NodeContext
from .c_fedda import c_fedda
from .dfedda import dfedda, dfedda_gt, dfedmid, drefedda_gt
from .fast_fedda import fast_fedda
from .fedadmm import fedadmm
from .fedavg import fedavg
from .fedcanon import fedcanon, fedcanon2, fedcanon_controls
from .fedda import fedda
from .feddr import async_feddr, feddr, fedsplit
from .fedmid import fedmid
from .fedpd import fedpd
from .fedprox import fedprox
from .mc_fedda import mc_fedda
from .refedda_gt import fedda_gt, multistep_refedda_gt, refedda_gt
from .scaffnew import scaffnew
from .scaffold import scaffold
from .za1 import za1, za1_correction

ALGORITHMS: dict[str, Callable[..., FederatedAlgorithm]] = {
    "fedavg": fedavg,
    "fedmid": fedmid,
    "fedda": fedda,
    "za1": za1,
    "fast_fedda": fast_fedda,
    "c_fedda": c_fedda,
    "feddr": feddr,
    "fedsplit": fedsplit,
    "async_feddr": async_feddr,
    "fedadmm": fedadmm,
    "fedpd": fedpd,
    "fedprox": fedprox,
    "mc_fedda": mc_fedda,
    "fedcanon": fedcanon,
    "fedcanon2": fedcanon2,
    "scaffold": scaffold,
    "scaffnew": scaffnew,
    "fedda_gt": fedda_gt,
    "refedda_gt": refedda_gt,
    "multistep_refedda_gt": multistep_refedda_gt,
}

#: Gossip algorithms, run by :func:`fedcomp.runtime.simulate_decentralized` over a topology.
DECENTRALIZED: dict[str, Callable[..., DecentralizedAlgorithm]] = {
    "dfedda": dfedda,
    "dfedda_gt": dfedda_gt,
    "drefedda_gt": drefedda_gt,
    "dfedmid": dfedmid,
}

DESCRIPTIONS: dict[str, str] = {
    "fedavg": "FedAvg / local SGD, optional server prox (McMahan et al. 2017)",
    "fedmid": "Federated mirror descent: local prox-SGD, primal averaging (Yuan et al. 2021)",
    "fedda": "Federated dual averaging: local dual averaging, dual averaging (Yuan et al. 2021)",
    "za1": "Decoupled prox + drift correction (Zhang, Hu, Johansson 2024, seed 000)",
    "fast_fedda": "Dual averaging with increasing weights, strongly convex (Bao et al. 2022)",
    "c_fedda": "Constrained dual averaging, exact l1/nuclear-ball constrained prox "
               "(Bao et al. 2022)",
    "mc_fedda": "Multistage C-FedDA: shrinking lambda and radius, warm starts (Bao et al. 2022)",
    "fedcanon": "Prox-free local steps + control variates, one server prox (Zhou et al., seed 002)",
    "fedcanon2": "FedCanon II: each client applies the prox, only the average is broadcast",
    "scaffold": "SCAFFOLD, option II control variates, optional server prox (Karimireddy 2020)",
    "scaffnew": "Scaffnew/ProxSkip: communicate with probability p per step (Mishchenko 2022)",
    "fedda_gt": "l_q dual averaging with gradient tracking, server form (Liang et al. 2023)",
    "refedda_gt": "Restricted FedDA-GT, l_q-ball dual-to-primal map, top-s output (Liang et al.)",
    "multistep_refedda_gt": "Restarted ReFedDA-GT with halving radius (Liang et al. 2023)",
    "dfedda": "Decentralized l_q dual averaging, gossip of duals (Liang et al. 2023)",
    "dfedda_gt": "DFedDA with gradient tracking (Liang, Peng, Zhang 2023, Algorithm 1)",
    "drefedda_gt": "Gossip ReFedDA-GT: restricted map, sparsified average (Liang et al. 2023)",
    "dfedmid": "Decentralized FedMiD: local prox-SGD, gossip of primal models (baseline)",
    "feddr": "Randomized Douglas-Rachford splitting, client sampling (Tran-Dinh et al. 2021)",
    "fedsplit": "Peaceman-Rachford = FedDR with alpha=2, exact prox (Pathak, Wainwright 2020)",
    "async_feddr": "Asynchronous FedDR on an event clock, stale models (Tran-Dinh et al. 2021)",
    "fedadmm": "ADMM, server keeps every client's latest upload (Wang, Marella, Anderson 2022)",
    "fedpd": "Federated primal-dual, communicate with probability p (Zhang et al. 2021)",
    "fedprox": "Local proximal term mu/2||x - xbar||^2, optional server prox (Li et al. 2020)",
}


def execution_of(name: str) -> str:
    """The engine of a registered algorithm: ``"rounds"``, ``"async"`` or ``"decentralized"``."""
    if name in DECENTRALIZED:
        return "decentralized"
    if name not in ALGORITHMS:
        valid = ", ".join(sorted([*ALGORITHMS, *DECENTRALIZED]))
        raise ValueError(f"unknown algorithm {name!r}; valid names: {valid}")
    return "async" if name == "async_feddr" else "rounds"


def make_algorithm(name: str, **hyperparameters: Any) -> Any:
    """Build a registered (federated or decentralized) algorithm by name.

    Raises ``ValueError`` listing the valid names, or the accepted hyperparameters.
    """
    import inspect

    if name not in ALGORITHMS and name not in DECENTRALIZED:
        valid = ", ".join(sorted([*ALGORITHMS, *DECENTRALIZED]))
        raise ValueError(f"unknown algorithm {name!r}; valid names: {valid}")
    factory: Callable[..., Any] = ALGORITHMS.get(name) or DECENTRALIZED[name]
    accepted = list(inspect.signature(factory).parameters)
    unknown = sorted(set(hyperparameters) - set(accepted))
    if unknown:
        raise ValueError(f"{name}: unknown hyperparameter(s) {unknown}; accepted: {accepted}")
    return factory(**hyperparameters)


__all__ = ["ALGORITHMS", "DECENTRALIZED", "DESCRIPTIONS", "ClientContext",
           "DecentralizedAlgorithm", "EmptyState", "FederatedAlgorithm", "NodeContext",
           "ServerContext", "c_fedda", "dfedda", "dfedda_gt", "dfedmid", "drefedda_gt",
           "fast_fedda", "fedavg", "fedda", "fedda_gt", "fedmid", "make_algorithm", "mc_fedda",
           "multistep_refedda_gt", "refedda_gt", "za1", "za1_correction",
           "fedcanon", "fedcanon2", "fedcanon_controls", "scaffnew", "scaffold"]
__all__ += ["execution_of", "async_feddr", "fedadmm", "feddr", "fedpd", "fedprox", "fedsplit"]
