"""Seed 000: composite FL on heterogeneous data — ZA1 against FedMiD and FedDA.

Zhang, Hu, Johansson, "Composite Federated Learning with Heterogeneous Data", ICASSP 2024,
Section 4 and Fig. 1: sparse logistic regression (eq. 6) on FedProx's Synthetic(α, β) data
with (α, β) = (10, 10), n = 30 workers × m = 2000 samples, ϑ₂ = 0.01 (ridge, in the smooth
part: Assumption 3.1 makes each f_i strongly convex), ϑ₁ = 1e-4 (the ℓ1 regularizer g),
τ = 5 local steps, η = η_g = 1, full gradients (Fig. 1 left) and minibatches of b = 20
(Fig. 1 right). Features are scaled to unit ℓ2 norm (the step η = 1 presumes L ≈ 1).
Labels follow FedProx's script exactly (``legacy_softmax``): at (α, β) = (10, 10) its
softmax overflows and labels a sample by the first overflowing class, which is what
makes α matter at all (with the exact argmax α cancels out). Both labellings show the
same phenomenon (FedMiD stalls at 0.32 with the script's labels, 0.29 without).

Claim: with full gradients ZA1 converges to x* (optimality → machine precision) while FedMiD
and FedDA stall at a client-drift floor; with minibatches every method reaches a noise
floor, ZA1's the lowest. The verdict compares ZA1 with FedMiD and FedDA only.

The default also runs the later star-topology algorithms that solve this problem, as many
as keep `fedcomp run` under 2 minutes on a 2-core machine: each adds about 14 s there (500
rounds of 30 clients × 5 full-gradient steps, plus the minibatch run), and the six take
about 1.5 minutes. Final optimality with full gradients / b = 20 after 500 rounds:

* Fast-FedDA (Bao et al. 2022), μ = ϑ₂ = 0.01, L = the largest client constant (auto),
  E = 5: 8.0e-2 / 7.8e-2 — its decaying step gives a 1/T rate, no drift floor;
* FedCanon (seed 002), β = 1, K = 5, α = βK = 5: 1.0e-3 / 8.3e-3 — linear convergence to
  its bias plateau (clients never see g; see ``tests/papers/test_fedcanon_bias.py``);
* FedDR (seed 003), η = 20 ≈ 1/√(μL), α = 1, local solver 5 gradient steps of size 1:
  5.8e-11 / 8.9e-3 — converges to x* like ZA1.

Left out, and why:

* the same iterates as an algorithm already here: FedCanon II is FedCanon, and so is
  SCAFFOLD with ``server_prox`` under full participation, with α = η_g K η_l (both tested
  in ``tests/algorithms/test_fedcanon.py``); FedADMM with ρ = 1/η tracks FedDR (ρ = 0.05: 6.1e-11 /
  8.9e-3, FedDR at η = 20: 5.8e-11 / 8.9e-3);
* time: Scaffnew/ProxSkip with ``server_prox`` (γ = 1, p = 0.2: 2.9e-12 / 8.3e-3), FedProx
  with a server prox (μ = 0.01, server step 5: 0.30 / 0.30, FedMiD's drift floor) and FedPD
  each cost as much as the others; a fourth addition would put the run near 1 m 45 s, too
  close to the budget. C-FedDA's exact constrained prox (a bisection per local step) makes
  its run over twice as expensive (ε = 20, μ = 0.01: 0.18 / 0.18); MC-FedDA's early stages
  solve the problem with a larger λ; FedSplit solves every local prox exactly by Newton;
* not this setting: FedAvg (ignores g, or is FedMiD without the client prox), asynchronous
  FedDR (an event clock, not rounds), the ℓq-geometry methods FedDA-GT and ReFedDA-GT (no
  ℓ1 term: sparsity from a top-s output) and the gossip methods (no server).
"""

from __future__ import annotations

from typing import Any

from ...config import batch_modes, load, mode_name
from .._verdict import Comparisons, baseline, cannot_judge, entry, noted, value

CLAIM = ("Fig. 1 (left): with full gradients ZA1 converges exactly while FedMiD and FedDA stall "
         "at a client-drift floor; (right) with b = 20 ZA1 still ends lowest.")

def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced / partly / not reproduced, from the final optimality per (label, mode).

    ``finals`` maps ``(label, mode)`` to the final metrics (median over seeds), as
    :func:`fedcomp.experiments.final_metrics` builds it; ``config`` (default the shipped
    ``seed000.toml``) names the minibatch modes that ran. Rule: reproduced when, with full
    gradients, ZA1 ends ≤ 1e-6 while FedMiD and FedDA both end ≥ 1e-3, and in every
    configured minibatch mode ZA1 ends below both by more than the seeds' spread
    (:class:`~fedcomp.experiments._verdict.Comparisons`); partly when only the full-gradient part
    holds (or no minibatch mode is configured). A ZA1 run that diverged or is missing makes
    it "not reproduced"; a diverged FedMiD or FedDA counts as infinitely far from x*
    (:mod:`fedcomp.experiments._verdict`).
    """
    cfg = config or load("seed000")
    # the configured modes, not the keys of finals: a mode whose runs all diverged or
    # never ran must not pass the minibatch part vacuously
    modes = [mode_name(b) for b in batch_modes(cfg)] if "batch_size" in cfg else ["full"]
    minibatch = [m for m in modes if m != "full"]

    def name(label: str, mode: str) -> str:
        return f"{label}_{mode}"

    proposed = {name("za1", m): entry(finals, "za1", mode=m) for m in ["full", *minibatch]}
    baselines = {name(b, m): entry(finals, b, mode=m) for m in ["full", *minibatch]
                 for b in ("fedmid", "fedda")}
    rule = ("full gradients: ZA1 <= 1e-6 and FedMiD, FedDA >= 1e-3; minibatch: ZA1 lowest")
    failed = cannot_judge(proposed, baselines, "optimality")
    if failed:
        return failed, rule

    def floor(mode: str) -> float:  # the lower of FedMiD's and FedDA's final optimality
        return min(baseline(baselines[name(b, mode)], "optimality") for b in ("fedmid", "fedda"))

    compared = Comparisons()
    full = value(proposed[name("za1", "full")], "optimality") <= 1e-6 and floor("full") >= 1e-3
    stoch = bool(minibatch) and all([
        compared.beats(proposed[name("za1", m)], baselines[name(b, m)], "optimality",
                       name("za1", m), name(b, m))
        for m in minibatch for b in ("fedmid", "fedda")])
    if full and stoch:
        result = "reproduced"
    elif full:
        result = "partly" if minibatch else "partly (no minibatch mode configured)"
    else:
        result = "not reproduced"
    return noted(result, baselines, "optimality"), compared.rule(rule)
