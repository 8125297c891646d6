"""Seed 002, TABLE V's protocol with ResNet-18 at CIFAR-10's shape: FedCanon vs FedMiD, ZA1.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data": TABLE V times FedCanon against the methods that
apply a prox at every local step (the CNN on FMNIST, T = 200); TABLE I shows the prox costs
most on ResNet-18, which TABLE VI trains on CIFAR-10. Here TABLE V's comparison, at T = 200
and K = 40, with ResNet-18 (CIFAR variant, GroupNorm) + SCAD on CIFAR-10 (3×32×32), 10
clients, i.i.d. and Dir(0.2). Configuration: ``fedcomp/configs/fedcanon_resnet18.toml``. The
real files get ``fedcanon_nn``'s rule; without them the run is on synthetic stand-in images
and the verdict is "timing only" (:mod:`fedcomp.experiments.claims._paper_scale`).
"""

from __future__ import annotations

from ._paper_scale import run_inputs, verdict

NAME = "fedcanon_resnet18"

#: Its verdict compares the runs' wall times: the report runs them one at a time
#: (:func:`fedcomp.report.jobs_for`), never beside each other on shared cores.
TIMED = True

__all__ = ["NAME", "run_inputs", "verdict"]
