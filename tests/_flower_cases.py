"""What the Flower tests share: the registry's overrides for 3-round runs, and participation."""

from __future__ import annotations

from tests.core.test_contract import SMOOTH_ONLY, supports_sampling

__all__ = ["REGISTRY_OVERRIDES", "SMOOTH_ONLY", "sampled_or_all"]

#: registry entries' overrides: stage lengths shortened so that 3 rounds cross stages,
#: Tamuna's own cohort of 2 of 4 clients, LoCoDL's codec
REGISTRY_OVERRIDES = {"mc_fedda": {"stage_rounds": 1}, "multistep_refedda_gt": {"stage_rounds": 1},
                      "tamuna": {"cohort_size": 2},  # its own cohort: 2 of 4 clients
                      "locodl": {"codec": {"name": "rand_k", "k": 2}}}


def sampled_or_all(algorithm, problem=None, sampled=2):
    """``sampled`` clients per round, or ``None`` (all) for an algorithm whose registry
    entry declares full participation (``problem``: unused)."""
    return sampled if supports_sampling(algorithm) else None
