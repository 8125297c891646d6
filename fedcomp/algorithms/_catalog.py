"""Every registered algorithm, with the facts the rest of fedcomp reads from its entry.

An algorithm is one file (its factory) plus one :class:`~fedcomp._registry.AlgorithmEntry`
here: its configuration name, its one-line description, how the runner executes it, the
values it reads on the host inside a round (the compiled engine's traits), its line color in
every figure, the section of the API reference that documents it, and what the privacy
wrapper clips of its uploads (or why it refuses it). The CLI, the configuration checks,
Flower, the plots, the documentation and :func:`fedcomp.privacy.private` read these facts
from the entry; :meth:`REGISTRY.register <fedcomp._registry.Registry.register>` adds a
user's own algorithm the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

from .._registry import AlgorithmEntry, HostValue, Registry, check_finite
from .c_fedda import c_fedda
from .compressed_scaffnew import compressed_scaffnew
from .dfedda import dfedda, dfedda_gt, dfedmid, drefedda_gt
from .dproxsgt import cdproxsgt, dproxsgt
from .fast_fedda import fast_fedda
from .fedadmm import fedadmm
from .fedavg import fedavg
from .fedcanon import fedcanon, fedcanon2
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
from .prox_dasa import prox_dasa, prox_dasa_gt
from .refedda_gt import fedda_gt, multistep_refedda_gt, refedda_gt
from .scafflix import scafflix
from .scaffnew import scaffnew
from .scaffold import scaffold
from .sdane import sdane
from .tamuna import tamuna
from .za1 import za1

#: The sections of the API reference (docs/api/algorithms.md), in its order.
LOCAL_STEPS = "Local steps and the server prox"
DUAL_AVERAGING = "Dual averaging"
SPLITTING = "FedDR, ADMM and primal–dual"
HARD_THRESHOLDING = "Hard thresholding"
COMPRESSED_TRAINING = "Local training with compression"
PERSONALISED = "Personalised"
GOSSIP = "Decentralized"
FAMILIES = (LOCAL_STEPS, DUAL_AVERAGING, SPLITTING, HARD_THRESHOLDING, COMPRESSED_TRAINING,
            PERSONALISED, GOSSIP)

#: Why the privacy wrapper refuses an algorithm (the entries' ``not_private``). Its
#: ``private_uploads`` say what it clips instead: the change ``upload − broadcast`` of a
#: model (a model is no bounded quantity, its change in one round is; McMahan et al. 2018
#: clip the update ``Δ_k = θ_k − θ``), or a field that is a change already (``None``).
NOT_PRIVATE_CONTROL = ("its upload carries a control variate whose sum over the clients must "
                       "stay exact (the clients correct themselves with their own unclipped "
                       "upload); clipping and noise break that invariant")
NOT_PRIVATE_RUNNING_SUM = ("the server keeps a running sum of every client's latest local "
                           "model (weighted by the global pi_i, not a participants' average); a "
                           "clipped part is never sent again, so the sum drifts from the "
                           "clients' models")

#: What an algorithm requires (its entry's ``requires``, of
#: :data:`fedcomp._registry.REQUIREMENTS`): every client in every round (its update uses the
#: previous round's server update, or it draws its own cohort), and also ``g = 0`` (Condat
#: et al.'s methods: their papers have no prox).
FULL = ("full_participation",)
SMOOTH_FULL = ("smooth", "full_participation")

CLIENT, BOTH = ("client update",), ("client update", "server update")
#: The values an algorithm reads on the host inside a round (:class:`HostValue`): the
#: compiled engine runs those parts eagerly, saying why. Checked against the engine by
#: tests/engines/test_jax_engine.py (each is still needed: tracing that part really fails).
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
LOCAL_OPTIMA = HostValue(CLIENT, "round 0's local optima x_i* are a damped Newton solve "
                         "that stops when every client has converged, then checked",
                         lambda hp, batch, quadratic: hp.get("global_weight") != 1.0)
RESTART_STAGE = HostValue(BOTH, "the restart stage is read on the host (it sets the radius "
                          "and the number of local steps)")

#: Every algorithm by configuration name, with how the runner executes it (a static fact:
#: ``REGISTRY.entry(name).execution``, no need to build the algorithm to learn it).
REGISTRY: Registry[AlgorithmEntry] = Registry("algorithm", [
    AlgorithmEntry("fedavg", fedavg,
                   "FedAvg / local SGD, optional server prox (McMahan et al. 2017)",
                   color="#7f7f7f", family=LOCAL_STEPS,
                   private_uploads={"delta": None}),
    AlgorithmEntry("fedmid", fedmid,
                   "Federated mirror descent: local prox-SGD, primal averaging (Yuan et al. 2021)",
                   color="#1f77b4", family=LOCAL_STEPS,
                   private_uploads={"delta": None}),
    AlgorithmEntry("fedda", fedda,
                   "Federated dual averaging: local dual averaging, dual averaging "
                   "(Yuan et al. 2021)",
                   color="#2ca02c", family=DUAL_AVERAGING,
                   private_uploads={"delta": None}),
    # ZA1's pre-proximal local model ẑ_i is clipped as its change from the broadcast x̄ (the
    # offset P(x̄) − x̄ is public). Its drift correction infers the clients' average gradient
    # from the server's models, which then carry the clipped, noisy average, while each
    # client subtracts its own exact gradient: the corrections no longer sum to zero. That
    # costs utility, not privacy (only ẑ_i leaves the client).
    AlgorithmEntry("za1", za1,
                   "Decoupled prox + drift correction (Zhang, Hu, Johansson 2024, seed 000)",
                   color="#d62728", family=LOCAL_STEPS,
                   requires=FULL,
                   private_uploads={"z_hat": "x"}),
    AlgorithmEntry("fast_fedda", fast_fedda,
                   "Dual averaging with increasing weights, strongly convex (Bao et al. 2022)",
                   color="#ff7f0e", family=DUAL_AVERAGING,
                   private_uploads={"g": "g", "w_tilde": "w_tilde"}),
    AlgorithmEntry("c_fedda", c_fedda,
                   "Constrained dual averaging, exact l1/nuclear-ball constrained prox "
                   "(Bao et al. 2022)", unbounded=("radius",),  # inf: no ball
                   host_values=(CONSTRAINED_PROX,),
                   color="#9467bd", family=DUAL_AVERAGING,
                   private_uploads={"g": "g"}),
    AlgorithmEntry("feddr", feddr,
                   "Randomized Douglas-Rachford splitting, client sampling "
                   "(Tran-Dinh et al. 2021)",
                   host_values=(NEWTON_WHEN_EXACT,),
                   color="#8c564b", family=SPLITTING,
                   not_private=NOT_PRIVATE_RUNNING_SUM),
    AlgorithmEntry("fedsplit", fedsplit,
                   "Peaceman-Rachford = FedDR with alpha=2, exact prox (Pathak, Wainwright 2020)",
                   host_values=(NEWTON,),
                   color="#7570b3", family=SPLITTING,
                   requires=FULL,
                   not_private=NOT_PRIVATE_RUNNING_SUM),
    AlgorithmEntry("async_feddr", async_feddr,
                   "Asynchronous FedDR on an event clock, stale models (Tran-Dinh et al. 2021)",
                   execution="async",
                   color="#e6ab02", family=SPLITTING,
                   not_private=("it runs on an event clock: no rounds of sampled clients to "
                                "account (and " + NOT_PRIVATE_RUNNING_SUM + ")")),
    AlgorithmEntry("fedadmm", fedadmm,
                   "ADMM, server keeps every client's latest upload "
                   "(Wang, Marella, Anderson 2022)",
                   color="#66a61e", family=SPLITTING,
                   not_private=NOT_PRIVATE_RUNNING_SUM),
    AlgorithmEntry("fedpd", fedpd,
                   "Federated primal-dual, communicate with probability p (Zhang et al. 2021)",
                   color="#6a3d9a", family=SPLITTING,
                   requires=FULL,
                   not_private=("its upload x_i + eta lambda_i carries the client's dual lambda_i, "
                                "which does not vanish at the solution: clipping it "
                                "biases the fixed point")),
    AlgorithmEntry("pfedme", pfedme,
                   "pFedMe: Moreau-envelope personal models with g in each personal problem "
                   "(Dinh, Tran, Nguyen 2020)",
                   color="#ff006e", family=PERSONALISED),
    AlgorithmEntry("scafflix", scafflix,
                   "Scafflix: FLIX personal models alpha_i x + (1 - alpha_i) x_i*, trained by "
                   "Scaffnew's local steps (Yi, Condat, Richtarik 2025)",
                   host_values=(GEOMETRIC_STEPS, LOCAL_OPTIMA),
                   color="#f4845f", family=PERSONALISED,
                   requires=SMOOTH_FULL,
                   not_private=NOT_PRIVATE_CONTROL),
    AlgorithmEntry("sdane", sdane,
                   "S-DANE / Acc-S-DANE: doubly regularised local problems, control variates, "
                   "a dual point; the prox of g in both (Jiang, Rodomanov, Stich 2024)",
                   host_values=(HostValue(BOTH, "a round's phase (gradient exchange or local "
                                          "solve) is read on the host"),),
                   color="#3a5a40", family=SPLITTING,
                   requires=FULL),
    AlgorithmEntry("fedprox", fedprox,
                   "Local proximal term mu/2||x - xbar||^2, optional server prox (Li et al. 2020)",
                   host_values=(EPOCHS,),
                   color="#bcbd22", family=SPLITTING,
                   private_uploads={"delta": None}),
    AlgorithmEntry("fedexprox", fedexprox,
                   "FedProx with exact proxes + server extrapolation: constant, gradient "
                   "diversity or Polyak (Li, Acharya, Richtarik 2024)",
                   host_values=(NEWTON,),
                   color="#00838f", family=SPLITTING),
    AlgorithmEntry("fed_ht", fed_ht,
                   "Fed-HT: local SGD, server hard-thresholds the average to s entries, l0_ball "
                   "(Tong et al. 2020)",
                   color="#4d7c0f", family=HARD_THRESHOLDING),
    AlgorithmEntry("fediter_ht", fediter_ht,
                   "FedIter-HT: hard-thresholded local SGD steps and average, l0_ball "
                   "(Tong et al. 2020)",
                   color="#c2185b", family=HARD_THRESHOLDING),
    AlgorithmEntry("mc_fedda", mc_fedda,
                   "Multistage C-FedDA: shrinking lambda and radius, warm starts "
                   "(Bao et al. 2022)",
                   host_values=(HostValue(BOTH, "a round's stage is looked up on the host in the "
                                          "stage schedule"), CONSTRAINED_PROX),
                   color="#e377c2", family=DUAL_AVERAGING,
                   private_uploads={"g": "g"}),
    AlgorithmEntry("fedcanon", fedcanon,
                   "Prox-free local steps + control variates, one server prox "
                   "(Zhou et al., seed 002)",
                   color="#17becf", family=LOCAL_STEPS,
                   requires=FULL,
                   not_private=NOT_PRIVATE_CONTROL),
    AlgorithmEntry("fedcanon2", fedcanon2,
                   "FedCanon II: each client applies the prox, only the average is broadcast",
                   color="#00429d", family=LOCAL_STEPS,
                   requires=FULL,
                   not_private=NOT_PRIVATE_CONTROL),
    AlgorithmEntry("scaffold", scaffold,
                   "SCAFFOLD, option II control variates, optional server prox (Karimireddy 2020)",
                   color="#240046", family=LOCAL_STEPS,
                   not_private=NOT_PRIVATE_CONTROL),
    AlgorithmEntry("scaffnew", scaffnew,
                   "Scaffnew/ProxSkip: communicate with probability p per step (Mishchenko 2022)",
                   host_values=(GEOMETRIC_STEPS,),
                   color="#b8860b", family=LOCAL_STEPS,
                   requires=FULL,
                   not_private=NOT_PRIVATE_CONTROL),
    AlgorithmEntry("compressed_scaffnew", compressed_scaffnew,
                   "Scaffnew with a shared mask: each coordinate sent by s of n clients "
                   "(Condat, Agarsky, Richtarik 2022)",
                   host_values=(SHARED_MASK,),
                   color="#8338ec", family=COMPRESSED_TRAINING,
                   requires=SMOOTH_FULL),
    AlgorithmEntry("tamuna", tamuna,
                   "Local training, shared-mask compression, own cohort of c clients a round "
                   "(Condat et al. 2023)",
                   host_values=(SHARED_MASK,),
                   color="#4361ee", family=COMPRESSED_TRAINING,
                   requires=SMOOTH_FULL),
    AlgorithmEntry("locodl", locodl,
                   "Local training + any unbiased compressor of x_i - y, shared y "
                   "(Condat, Maranjyan, Richtarik 2025)",
                   host_values=(HostValue(BOTH, GEOMETRIC_STEPS.reason),),
                   color="#b5179e", family=COMPRESSED_TRAINING,
                   requires=SMOOTH_FULL),
    AlgorithmEntry("fedda_gt", fedda_gt,
                   "l_q dual averaging with gradient tracking, server form (Liang et al. 2023)",
                   color="#1b9e77", family=DUAL_AVERAGING,
                   requires=FULL,
                   not_private=NOT_PRIVATE_CONTROL + " (gradient tracking)"),
    AlgorithmEntry("refedda_gt", refedda_gt,
                   "Restricted FedDA-GT, l_q-ball dual-to-primal map, top-s output (Liang et al.)",
                   host_values=(RESTART_STAGE,),
                   color="#b15928", family=DUAL_AVERAGING,
                   not_private=NOT_PRIVATE_CONTROL + " (gradient tracking)"),
    AlgorithmEntry("multistep_refedda_gt", multistep_refedda_gt,
                   "Restarted ReFedDA-GT with halving radius (Liang et al. 2023)",
                   host_values=(RESTART_STAGE,),
                   color="#000000", family=DUAL_AVERAGING,
                   not_private=NOT_PRIVATE_CONTROL + " (gradient tracking)"),
    AlgorithmEntry("dfedda", dfedda,
                   "Decentralized l_q dual averaging, gossip of duals (Liang et al. 2023)",
                   execution="decentralized",
                   color="#006d2c", family=GOSSIP),
    AlgorithmEntry("dfedda_gt", dfedda_gt,
                   "DFedDA with gradient tracking (Liang, Peng, Zhang 2023, Algorithm 1)",
                   execution="decentralized",
                   color="#e7298a", family=GOSSIP),
    AlgorithmEntry("drefedda_gt", drefedda_gt,
                   "Gossip ReFedDA-GT: restricted map, sparsified average (Liang et al. 2023)",
                   execution="decentralized",
                   color="#800000", family=GOSSIP),
    AlgorithmEntry("dfedmid", dfedmid,
                   "Decentralized FedMiD: local prox-SGD, gossip of primal models (baseline)",
                   execution="decentralized",
                   color="#08306b", family=GOSSIP),
    AlgorithmEntry("dproxsgt", dproxsgt,
                   "Decentralized prox-SGD along a gradient tracker, gossip of trackers and "
                   "models (Yan et al. 2023)",
                   execution="decentralized",
                   color="#0f766e", family=GOSSIP),
    AlgorithmEntry("cdproxsgt", cdproxsgt,
                   "DProxSGT with compressed gossip: Choco-style copies, consensus steps "
                   "gamma_x, gamma_y (Yan et al. 2023)",
                   execution="decentralized",
                   color="#9a3412", family=GOSSIP),
    AlgorithmEntry("prox_dasa", prox_dasa,
                   "Prox step along a moving-average gradient, moving averages of model and "
                   "gradient gossiped (Xiao et al. 2023)",
                   execution="decentralized",
                   color="#ff0ffc", family=GOSSIP),
    AlgorithmEntry("prox_dasa_gt", prox_dasa_gt,
                   "Prox-DASA whose moving average is fed by a gradient tracker "
                   "(Xiao et al. 2023)",
                   execution="decentralized",
                   color="#a0914d", family=GOSSIP),
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

#: Star-topology algorithms (synchronous rounds and asynchronous), run by
#: :func:`fedcomp.runtime.simulate` / :func:`fedcomp.runtime.simulate_async`.
ALGORITHMS: Registry[AlgorithmEntry] = REGISTRY.filter(lambda e: e.execution != "decentralized")

#: Gossip algorithms, run by :func:`fedcomp.runtime.simulate_decentralized` over a topology.
DECENTRALIZED: Registry[AlgorithmEntry] = REGISTRY.filter(
    lambda e: e.execution == "decentralized")

#: One line per algorithm, for ``fedcomp list`` (live: a registered algorithm appears).
DESCRIPTIONS = REGISTRY.describe()



__all__ = ["ALGORITHMS", "DECENTRALIZED", "DESCRIPTIONS", "FAMILIES", "REGISTRY"]
