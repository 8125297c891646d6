"""A configuration's target: the counters at the first evaluation that reached it, and the
Condat et al. experiment's verdict on the bits uploaded to reach it."""

from __future__ import annotations

import csv
import json
import math

import pytest

from fedcomp.config import ConfigError, load, quick_config
from fedcomp.experiments import resolve, run_experiment
from fedcomp.experiments.claims import condat_bits


def _quick(**changes):
    cfg = quick_config(load("condat_bits"))
    cfg.update(changes)
    cfg["seeds"] = [0]
    return cfg


def test_each_run_reports_the_counters_when_it_reached_the_target(tmp_path):
    run_experiment(_quick(), tmp_path / "out", progress=False, stream=open("/dev/null", "w"))
    summary = {row["label"]: row for row in json.loads((tmp_path / "out" / "summary.json")
                                                       .read_text())}
    scaffnew = summary["scaffnew"]
    assert math.isfinite(scaffnew["bits_up_to_target"])
    assert scaffnew["bits_up_to_target"] <= scaffnew["bits_up"]
    # the first evaluation at or below the target, read back from results.csv
    with open(tmp_path / "out" / "results.csv") as f:
        hits = [r for r in csv.DictReader(f) if r["algorithm"] == "scaffnew"
                and float(r["optimality"]) <= 1e-6]
    assert float(hits[0]["round"]) == scaffnew["rounds_to_target"]
    assert float(hits[0]["bits_up"]) == scaffnew["bits_up_to_target"]
    assert summary["fedavg"]["bits_up_to_target"] == math.inf  # its drift keeps it above


@pytest.mark.parametrize("target, message", [
    ({"metric": "test_accuracy", "above": 0.9}, "one of the recorded metrics"),
    ({"metric": "optimality"}, "one finite threshold"),
    ({"metric": "optimality", "below": 1e-6, "above": 0.0}, "one finite threshold"),
    ({"metric": "optimality", "below": float("inf")}, "one finite threshold"),
    ({"metric": "optimality", "under": 1e-6}, "unknown key"),
    ("optimality", "must be a table"),
])
def test_a_bad_target_names_the_fix(target, message):
    with pytest.raises(ConfigError, match=message):
        resolve(_quick(target=target))


def finals(**bits):
    return {(label, "full"): {"bits_up_to_target": value} for label, value in bits.items()}


INF = math.inf


@pytest.mark.parametrize("bits, level", [
    ({"fedavg": INF, "scaffnew": 100.0, "compressed_scaffnew": 60.0, "tamuna": 70.0,
      "locodl": 50.0}, "reproduced"),
    # one compressed method needs more bits than Scaffnew: partly
    ({"fedavg": INF, "scaffnew": 100.0, "compressed_scaffnew": 60.0, "tamuna": 120.0,
      "locodl": 50.0}, "partly"),
    # a compressed method that never reaches the target cannot win
    ({"fedavg": INF, "scaffnew": 100.0, "compressed_scaffnew": INF, "tamuna": INF,
      "locodl": INF}, "not reproduced"),
    # FedAvg reaching it with fewer bits than every compressed method: not reproduced
    ({"fedavg": 40.0, "scaffnew": 100.0, "compressed_scaffnew": 60.0, "tamuna": 70.0,
      "locodl": 50.0}, "not reproduced"),
])
def test_condat_bits_verdict_rule(bits, level):
    verdict, rule = condat_bits.verdict(finals(**bits))
    assert verdict.split(" (")[0] == level, verdict
    assert "fewer bits_up" in rule
