"""FedCanon's experiments at the paper's scale: ``fedcanon_fmnist`` (the CNN at Fashion-MNIST's
shape) and ``fedcanon_resnet18`` (TABLE V's protocol with ResNet-18 at CIFAR-10's shape).

Each validates at its full size (not run here), reads the real files when the data directory
holds them, and otherwise runs on synthetic images of the same shape, for timing only: the
verdict then says so and never judges the claim.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest

from fedcomp import config
from fedcomp.data import DATA_DIR_ENV, image_files_or_synthetic
from fedcomp.data._stand_in import missing_image_files
from fedcomp.experiments import build_components, run_experiment, validate
from fedcomp.experiments.claims import _paper_scale
from tests.core.test_image_data import scaled, single_client, write_cifar, write_idx_set

pytestmark = pytest.mark.torch

#: name → (data set, one sample's shape, network)
PAPER_SCALE = {"fedcanon_fmnist": ("fashion_mnist", [1, 28, 28], "cnn"),
               "fedcanon_resnet18": ("cifar10", [3, 32, 32], "resnet18")}
LEVELS = ("reproduced", "partly", "not reproduced")


@pytest.fixture
def empty_data_dir(tmp_path, monkeypatch):
    """A data directory without any data set: the runs get the synthetic stand-in."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


def quick(name: str) -> dict:
    """The experiment at its ``[quick]`` sizes, one seed, one metric (fewer plots)."""
    cfg = config.quick_config(config.load(name))
    for assignment in ("seeds=[0]", "metrics=['test_accuracy']"):
        cfg = config.apply_override(cfg, assignment)
    return cfg


def verdict_of(out: Path) -> str:
    """The verdict ``summary.md`` states, without its rule."""
    return (out / "summary.md").read_text().split("Verdict: ")[1].split(" (rule: ")[0]


@pytest.mark.parametrize("name", sorted(PAPER_SCALE))
def test_the_full_configurations_have_the_papers_shapes(name):
    dataset, shape, network = PAPER_SCALE[name]
    cfg = validate(config.load(name))
    assert cfg["rounds"] == 200 and cfg["data"]["n_clients"] == 10
    assert {a["local_steps"] for a in cfg["algorithms"]} == {40}
    assert {a["name"] for a in cfg["algorithms"]} == {"fedcanon", "fedmid", "za1"}
    assert cfg["data"]["generator"] == "image_files_or_synthetic"
    assert cfg["data"]["dataset"] == dataset and "n_samples" not in cfg["data"]
    assert cfg["problem"]["model"] == network and cfg["problem"]["input_shape"] == shape
    assert cfg["regularizer"]["name"] == "scad"
    if network == "resnet18":  # the full ResNet-18: 11.2 M parameters
        loss = build_components(cfg)[0]
        assert 11.1e6 < loss.layout().size < 11.3e6


def write_files(dataset: str, data_dir: Path) -> None:
    """Small real-format files of ``dataset`` where its loader looks in ``data_dir``."""
    if dataset == "cifar10":
        write_cifar(data_dir / "cifar10" / "cifar-10-batches-py")
    else:
        write_idx_set(data_dir / dataset, n_train=120, n_test=60)
    assert missing_image_files(dataset) is None


@pytest.mark.parametrize("name", sorted(PAPER_SCALE))
def test_without_the_files_a_quick_run_is_timing_only(name, empty_data_dir, tmp_path, caplog):
    from fedcomp.report import run_or_reuse
    from fedcomp.report._assembly import judge

    dataset = PAPER_SCALE[name][0]
    out, log = tmp_path / "out", open("/dev/null", "w")
    with caplog.at_level(logging.WARNING, logger="fedcomp"):
        first = run_or_reuse(name, quick(name), out, log)
    assert not first.error and all(row["status"] == "ok" for row in first.rows)
    assert verdict_of(out) == _paper_scale.TIMING_ONLY
    assert "synthetic images" in (out / "summary.md").read_text()
    assert any("SYNTHETIC stand-in" in r.getMessage() and dataset in r.getMessage()
               for r in caplog.records)
    assert all(dataset in row["stand_in"] for row in first.rows)  # each run records it
    # the files appear: a report reuses the finished runs, made on the stand-in
    write_files(dataset, empty_data_dir)
    again = run_or_reuse(name, quick(name), out, log)
    assert again.reused and again.rows == first.rows
    verdict, rule = judge(again)
    assert verdict == _paper_scale.TIMING_ONLY and "synthetic images" in rule


def test_the_fashion_mnist_files_are_found_in_the_data_dir_and_used(tmp_path, monkeypatch,
                                                                     caplog):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    arrays = write_idx_set(tmp_path / "fashion_mnist", n_train=120, n_test=60)
    assert missing_image_files("fashion_mnist") is None
    with caplog.at_level(logging.WARNING, logger="fedcomp"):
        data = image_files_or_synthetic("fashion_mnist", n_clients=1)
    assert not caplog.records
    X, y = single_client(data)
    np.testing.assert_array_equal(X, scaled(arrays["train-images-idx3-ubyte"])[:, None])
    np.testing.assert_array_equal(y, arrays["train-labels-idx1-ubyte"])
    # the whole quick run on those files is judged by the claim's rule
    summary = run_experiment(quick("fedcanon_fmnist"), tmp_path / "out", progress=False,
                             stream=open("/dev/null", "w"))
    assert all(row["status"] == "ok" and row["stand_in"] == "" for row in summary)
    assert verdict_of(tmp_path / "out").startswith(LEVELS)


def test_the_cifar10_batches_are_found_at_a_path_and_used(tmp_path):
    batches = write_cifar(tmp_path / "cifar10" / "cifar-10-batches-py")
    path = str(tmp_path / "cifar10")
    assert missing_image_files("cifar10", path) is None
    X, y = single_client(image_files_or_synthetic("cifar10", path=path, n_clients=1))
    raw = np.concatenate([batches[f"data_batch_{i}"][b"data"] for i in range(1, 6)])
    np.testing.assert_array_equal(X, scaled(raw).reshape(20, 3, 32, 32))
    cfg = {"data": {"dataset": "cifar10", "path": path}}
    assert _paper_scale.stand_in_reason(cfg) == ""
    assert "cifar10" in _paper_scale.stand_in_reason(
        {"data": {"dataset": "cifar10", "path": str(tmp_path / "elsewhere")}})


def test_the_stand_in_has_the_shape_sizes_and_labels_of_the_real_set(tmp_path):
    data = image_files_or_synthetic("cifar10", path=str(tmp_path), n_clients=3,
                                    n_samples=60, n_test=20,
                                    partition={"name": "dirichlet", "concentration": 0.2})
    assert data.feature_shape == (3, 32, 32) and int(data.counts.sum()) == 60
    assert data.holdout[0].shape == (20, 3, 32, 32)
    assert sorted(np.unique(data.holdout[1]).tolist()) == list(range(10))
    again = image_files_or_synthetic("cifar10", path=str(tmp_path), n_clients=3, n_samples=60,
                                     n_test=20, seed=1)
    # one fixed set of images, whatever the seed (which only partitions it)
    np.testing.assert_array_equal(np.sort(np.asarray(again.holdout[0]).ravel()),
                                  np.sort(np.asarray(data.holdout[0]).ravel()))
    with pytest.raises(ValueError, match="dataset='svhn'.*choose one of"):
        image_files_or_synthetic("svhn")


def test_the_verdict_never_judges_a_claim_on_synthetic_data():
    finals = {("fedcanon", "b32", "iid"): {"test_accuracy": 0.9, "wall_s": 2.0, "round": 2.0},
              ("fedmid", "b32", "iid"): {"test_accuracy": 0.8, "wall_s": 8.0, "round": 2.0},
              ("za1", "b32", "iid"): {"test_accuracy": 0.8, "wall_s": 9.0, "round": 2.0}}
    assert _paper_scale.verdict(finals, stand_in="")[0] == "reproduced"
    verdict, rule = _paper_scale.verdict(finals, stand_in="fashion_mnist: no files in /x")
    assert verdict == "timing only (synthetic stand-in data)"
    assert "synthetic images" in rule and "fedmid/iid 8.00 s (4.000 s a round)" in rule


def test_the_verdict_reads_the_data_the_runs_recorded():
    real, stand_in = {"seed": 0, "stand_in": ""}, {"seed": 1, "stand_in": "no files in /x"}
    assert _paper_scale.run_inputs([real, real]) == {"stand_in": ""}
    assert _paper_scale.run_inputs([real, stand_in]) == {"stand_in": "no files in /x"}
    # runs that recorded nothing (an older fedcomp's) are never judged either
    for rows in ([real, {"seed": 1}], [{"seed": 0, "stand_in": math.nan}], []):
        reason = _paper_scale.run_inputs(rows)["stand_in"]
        assert reason == _paper_scale.UNRECORDED
        verdict, rule = _paper_scale.verdict({("fedcanon", "b32", "iid"): {"wall_s": 1.0}},
                                             stand_in=reason)
        assert verdict == _paper_scale.TIMING_ONLY and "did not record" in rule


def test_the_paper_scale_experiments_are_timed_one_run_at_a_time():
    from fedcomp.report import jobs_for

    assert all(jobs_for(name, 2) == 1 for name in PAPER_SCALE)


def test_configs_ship_in_the_package():
    configs = Path(config.__file__).resolve().parents[1] / "configs"
    assert {f"{n}.toml" for n in PAPER_SCALE} <= {p.name for p in configs.iterdir()}
