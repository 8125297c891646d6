"""Experiment variants: several settings in one configuration, run in process."""

from __future__ import annotations

import copy
import csv
import io

import numpy as np

from fedcomp.config import load
from fedcomp.experiments import final_metrics, run_experiment


def small_config():
    cfg = copy.deepcopy(load("seed000"))
    cfg.update(name="variants-test", rounds=6, eval_every=3, batch_size="full",
               reference=True, seeds=[0])  # seed000 runs five seeds; one is enough here
    # seed000 lets its data follow the run seed; these tests' seeds share one data set
    cfg["data"].update(n_clients=4, samples_per_client=40, legacy_softmax=False, seed=0)
    cfg["algorithms"] = [{"name": "fedmid", "client_lr": 0.5, "local_steps": 2},
                         {"name": "fedavg", "client_lr": 0.5, "local_steps": 2}]
    cfg["variants"] = [{"label": "homogeneous", "data": {"alpha": 0.0, "beta": 0.0}},
                       {"label": "heterogeneous", "data": {"alpha": 1.0, "beta": 1.0},
                        "rounds": 3, "clients_per_round": 2}]
    return cfg


def test_every_variant_runs_every_algorithm(tmp_path):
    summary = run_experiment(small_config(), tmp_path, stream=io.StringIO(), progress=False)
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert {(r["variant"], r["algorithm"]) for r in rows} == {
        (v, a) for v in ("homogeneous", "heterogeneous") for a in ("fedmid", "fedavg")}
    last = {r["variant"]: int(r["round"]) for r in rows}
    assert last == {"homogeneous": 6, "heterogeneous": 3}
    # two clients per round in the heterogeneous variant: half the uploads of full participation
    hetero = [r for r in rows if r["variant"] == "heterogeneous" and r["round"] == "3"]
    homo = [r for r in rows if r["variant"] == "homogeneous" and r["round"] == "3"]
    assert int(hetero[0]["floats_up"]) * 2 == int(homo[0]["floats_up"])
    models = sorted(p.name for p in (tmp_path / "models").iterdir())
    assert "fedmid_heterogeneous_seed0.npy" in models and len(models) == 4
    # the two variants are different problems: different data, different x*
    a = np.load(tmp_path / "models" / "fedmid_homogeneous_seed0.npy")
    b = np.load(tmp_path / "models" / "fedmid_heterogeneous_seed0.npy")
    assert not np.allclose(a, b)
    assert "| fedmid | heterogeneous |" in (tmp_path / "summary.md").read_text()
    finals = final_metrics(summary)
    assert set(finals) == {(a, "full", v) for a in ("fedmid", "fedavg")
                           for v in ("homogeneous", "heterogeneous")}
    assert finals[("fedmid", "full", "heterogeneous")]["round"] == 3


