"""Scafflix's Figure 1 (FLIX logistic regression): configuration, measurement and rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedcomp.config import apply_override, load, quick_config, reading_config, readings
from fedcomp.experiments import validate
from fedcomp.experiments._build import build_problem
from fedcomp.experiments._verdict import SeedFinals
from fedcomp.experiments.claims import scafflix_logistic as claim
from fedcomp.report._catalogue import PAPERS

NAME = "scafflix_logistic"
ALPHAS = (1.0, 0.1, 0.01, 0.001, 0.0001)
#: The ridge: every f_i's strong convexity (the analysis' μ, the code's mu = 0.1).
MU = 0.1


@pytest.fixture(scope="module")
def config():
    return load(NAME)


@pytest.fixture(scope="module")
def problem(config):
    return build_problem({k: v for k, v in config.items() if k != "readings"}, 0)


# --- the configuration ----------------------------------------------------------------------
def test_every_reading_and_the_quick_size_resolve(config):
    assert config["paper"] in PAPERS and config["claim"] == claim.CLAIM
    assert set(readings(config)) == {"as_written", "as_run"}
    for reading in readings(config):
        resolved = reading_config(config, reading)
        validate(resolved)
        validate(quick_config(resolved))
    swept = claim.pairs(config)
    assert [alpha for alpha, _, _ in swept] == list(ALPHAS)
    assert all(gd for _, _, gd in swept)  # every weight has its FLIX-by-GD baseline


def code_smoothness(problem):
    """The code's L_i = λ_max(A_iᵀA_i + 0.1 I)/(4 n_i) (models.py LogReg._smoothness)."""
    batch = problem.data.full_batch()
    features, weights = np.asarray(batch.features), np.asarray(batch.weights)
    out = []
    for a, w in zip(features, weights, strict=True):
        rows = a[w > 0]
        gram = rows.T @ rows + MU * np.eye(rows.shape[1])
        out.append(np.linalg.eigvalsh(gram).max() / (4 * len(rows)))
    return np.array(out)


def test_the_steps_and_probabilities_follow_from_the_data(config, problem):
    written = {e["label"]: e for e in config["algorithms"]}
    smooth = np.asarray(problem.loss.smoothness(problem.data.full_batch()))
    for label, entry in written.items():
        expected = 1.0 if label.startswith("flix_gd") else math.sqrt(MU / smooth.max())
        assert entry["comm_prob"] == pytest.approx(expected, rel=1e-3), label
    smooth = code_smoothness(problem)
    mean = smooth.mean()
    as_run = {e["label"]: e for e in reading_config(config, "as_run")["algorithms"]}
    for label, entry in as_run.items():
        alpha = entry["global_weight"]
        step = 1.0 / np.mean(alpha * alpha * smooth)  # workers.py: lr = 1/mean(α² L_i)
        assert entry["client_lr"] == pytest.approx(alpha * alpha * step, rel=1e-4), label
        expected = 1.0 if label.startswith("flix_gd") else math.sqrt(MU / mean)
        assert entry["comm_prob"] == pytest.approx(expected, rel=1e-3), label


@pytest.mark.parametrize("alpha", [1.0, 0.01])
def test_flix_by_gd_is_scafflix_with_comm_prob_one(problem, alpha):
    """The code's run_gd, transcribed: x ← x − lr α mean_i ∇f_i(α x + (1 − α) x_i*) with
    lr = 1/mean_i(α² L_i); Scafflix with p = 1 and γ_i = 1/L_i takes the same steps."""
    from fedcomp import simulate
    from fedcomp.algorithms import scafflix

    run = simulate(scafflix(alpha, "auto", 1.0), problem, 3, metrics=[], eval_every=3)
    batch = problem.data.full_batch()
    x_star = np.asarray(run.client_states.x_star)
    lr = 1.0 / np.mean(alpha * alpha * np.asarray(problem.loss.smoothness(batch)))
    x = np.zeros(problem.param_shape)
    for _ in range(3):
        personal = alpha * x[None, :] + (1.0 - alpha) * x_star
        x = x - lr * alpha * np.mean(np.asarray(problem.loss.grad(personal, batch)), axis=0)
    np.testing.assert_allclose(np.asarray(run.x), x, rtol=0, atol=1e-12)


def test_the_flix_gap_is_the_plain_gap_at_one_and_zero_at_the_flix_optimum(problem):
    from fedcomp.reference import solve_reference

    gap_at = claim.flix_gap(problem)
    reference = solve_reference(problem, tol=1e-12)
    x = np.linspace(-1.0, 1.0, problem.param_shape[0])
    assert gap_at(1.0)(problem, x) == pytest.approx(
        problem.objective(x) - problem.objective(reference.x), rel=1e-9)
    assert abs(gap_at(1.0)(problem, reference.x)) < 1e-14
    # at α < 1 the gap is positive away from FLIX's optimum, which is not x*
    assert gap_at(0.1)(problem, x) > 0 and gap_at(0.1)(problem, reference.x) > 1e-8


def test_a_shrunken_run_gives_a_verdict_and_the_rule_reruns_its_iterates(tmp_path, config):
    from fedcomp.experiments import run_experiment
    from fedcomp.experiments._results import final_metrics

    small = {k: v for k, v in quick_config(config).items() if k != "readings"}
    kept = [e for e in small["algorithms"] if e["global_weight"] == 0.01]
    small = apply_override(apply_override(small, "seeds=[0]"), "rounds=30")
    small["algorithms"] = kept
    summary = run_experiment(small, tmp_path / "run", progress=False, stream=None)
    measured = claim.measure(small)
    gap_at = claim.flix_gap(build_problem(small, 0))
    for entry in kept:  # the rule's runs are the experiment's: the same final model
        final = np.load(tmp_path / "run" / "models" / f"{entry['label']}_seed0.npy")
        gap = gap_at(entry["global_weight"])(None, final)
        assert gap == pytest.approx(measured[entry["label"]][0]["flix_gap"], abs=1e-15)
    verdict, rule = claim.verdict(final_metrics(summary), validate(small), rounds=measured)
    assert verdict.split(" (")[0] in ("reproduced", "partly", "not reproduced"), verdict
    assert "scafflix_a0.01 vs flix_gd_a0.01" in rule, rule


# --- the rule -------------------------------------------------------------------------------
#: Paper-like rounds to the accuracy: Scafflix well under GD, both falling with α.
PAPER_LIKE = {1.0: (35, 255), 0.1: (28, 184), 0.01: (20, 115), 0.001: (10, 53),
              0.0001: (4, 18)}


def hand_made(rounds: dict[float, tuple[float, float]]):
    """``(finals, measured rounds)`` over three seeds, Scafflix's rounds jittered by ±1."""
    finals, measured = {}, {}
    for alpha, (scafflix, gd) in rounds.items():
        for label, count, jitter in ((f"scafflix_a{alpha:g}", scafflix, 1.0),
                                     (f"flix_gd_a{alpha:g}", gd, 0.0)):
            finals[(label, "full")] = SeedFinals(
                {"objective": 0.21, "diverged": 0.0, "seeds": 3.0},
                {s: {"objective": 0.21} for s in range(3)})
            measured[label] = {s: {claim.METRIC: count + (s - 1) * jitter, "flix_gap": 0.0,
                                   "diverged": 0.0} for s in range(3)}
    return finals, measured


@pytest.mark.parametrize(("changes", "level"), [
    ({}, "reproduced"),
    ({0.1: (40, 184)}, "partly"),                        # rounds do not fall with alpha
    ({0.01: (115, 115)}, "partly"),                       # a tie with GD at one alpha
    ({a: (g, s) for a, (s, g) in PAPER_LIKE.items()}, "not reproduced"),  # GD is faster
    ({1.0: (35, math.inf)}, "reproduced"),                # GD never gets there
], ids=["paper-like", "no-personalisation-gain", "tie-at-one-alpha", "gd-faster",
        "gd-never-reaches"])
def test_the_rule(config, changes, level):
    finals, measured = hand_made({**PAPER_LIKE, **changes})
    verdict, rule = claim.verdict(finals, config, rounds=measured)
    assert verdict.split(" (")[0] == level, (verdict, rule)
    assert "scafflix_a1 vs flix_gd_a1" in rule, rule


def test_a_diverged_scafflix_is_not_reproduced_and_a_diverged_gd_is_beaten(config):
    finals, measured = hand_made(PAPER_LIKE)
    measured["flix_gd_a0.1"][1] = {"diverged": 1.0}
    assert claim.verdict(finals, config, rounds=measured)[0] == (
        "reproduced (flix_gd_a0.1 diverged on 1 of 3 seeds)")
    measured["scafflix_a0.01"][2] = {"diverged": 1.0}
    verdict = claim.verdict(finals, config, rounds=measured)[0]
    assert verdict.startswith("not reproduced (scafflix_a0.01 diverged on 1 of 3"), verdict
    finals[("scafflix_a1", "full")] = SeedFinals({"diverged": 3.0, "seeds": 3.0})
    assert claim.verdict(finals, config, rounds=measured)[0].startswith(
        "not reproduced (scafflix_a1 diverged")
