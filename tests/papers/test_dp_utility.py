"""The DP experiment: its verdict rule, table-driven, and the utility-against-ε figure."""

from __future__ import annotations

import pytest

from fedcomp.experiments.claims import dp_utility

pytest.importorskip("dp_accounting")

CONFIG = {"algorithms": [
    {"name": "fedavg"},
    {"name": "fedavg", "label": "fedavg_eps1", "privacy": {"target_epsilon": 1.0}},
    {"name": "fedavg", "label": "fedavg_eps10", "privacy": {"target_epsilon": 10.0}},
    {"name": "za1"},
    {"name": "za1", "label": "za1_eps1", "privacy": {"target_epsilon": 1.0}},
    {"name": "za1", "label": "za1_eps10", "privacy": {"target_epsilon": 10.0}},
]}


def finals(**objectives):
    return {(label, "full"): {"objective": value} for label, value in objectives.items()}


@pytest.mark.parametrize("objectives, level", [
    # both close the gap: 1% excess at eps 10, a quarter of eps 1's or less
    ({"fedavg": 1.0, "fedavg_eps1": 1.4, "fedavg_eps10": 1.01,
      "za1": 1.0, "za1_eps1": 2.0, "za1_eps10": 1.02}, "reproduced"),
    # za1 within 5% but its gap barely closes (0.04 of 0.05): partly
    ({"fedavg": 1.0, "fedavg_eps1": 1.4, "fedavg_eps10": 1.01,
      "za1": 1.0, "za1_eps1": 1.05, "za1_eps10": 1.04}, "partly"),
    # za1's gap closes but stays 10% above the non-private run: partly
    ({"fedavg": 1.0, "fedavg_eps1": 1.4, "fedavg_eps10": 1.01,
      "za1": 1.0, "za1_eps1": 3.0, "za1_eps10": 1.10}, "partly"),
    # neither
    ({"fedavg": 1.0, "fedavg_eps1": 1.4, "fedavg_eps10": 1.3,
      "za1": 1.0, "za1_eps1": 3.0, "za1_eps10": 1.10}, "not reproduced"),
    # a diverged private run (infinite objective) cannot close the gap
    ({"fedavg": 1.0, "fedavg_eps1": 1.4, "fedavg_eps10": float("inf"),
      "za1": 1.0, "za1_eps1": 2.0, "za1_eps10": 1.02}, "partly"),
])
def test_verdict_rule(objectives, level):
    verdict, rule = dp_utility.verdict(finals(**objectives), CONFIG)
    assert verdict.split(" (")[0] == level, verdict
    assert "5%" in rule and "25%" in rule


def test_the_report_draws_utility_against_epsilon(tmp_path):
    from fedcomp.report import run_report

    pytest.importorskip("matplotlib")
    (result,) = run_report(tmp_path, quick=True, only=["dp_utility"],
                           stream=open("/dev/null", "w"))
    assert not result.error, result.error
    assert result.figures == ["fig_objective_epsilon.png"]
    assert (tmp_path / "dp_utility" / "fig_objective_epsilon.svg").stat().st_size > 10_000
    assert "Learning Differentially Private" in (tmp_path / "report.md").read_text()
