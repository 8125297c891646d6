"""Seed 002, Fig. 3 and TABLE V at the paper's scale: FedCanon vs FedMiD and ZA1, CNN on FMNIST.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data", Section IV-B: the CNN (channels 32/64, 5×5
kernels) + SCAD on Fashion-MNIST (1×28×28), 10 clients, i.i.d. / Dir(1) / Dir(0.2), T = 200,
K = 40 (``fedcanon_nn`` is the same experiment on 8×8 digits, T = 30, K = 10).
Configuration: ``fedcomp/configs/fedcanon_fmnist.toml``. The real files get
``fedcanon_nn``'s rule; without them the run is on synthetic stand-in images and the verdict
is "timing only" (:mod:`fedcomp.experiments.claims._paper_scale`).
"""

from __future__ import annotations

from ._paper_scale import run_inputs, verdict

NAME = "fedcanon_fmnist"

#: Its verdict compares the runs' wall times: the report runs them one at a time
#: (:func:`fedcomp.report.jobs_for`), never beside each other on shared cores.
TIMED = True

__all__ = ["NAME", "run_inputs", "verdict"]
