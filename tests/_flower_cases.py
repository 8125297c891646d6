"""What the Flower tests share: the registry's overrides for 3-round runs, and participation."""

from __future__ import annotations

from fedcomp.runtime import setup_context

#: registry entries' overrides: stage lengths shortened so that 3 rounds cross stages,
#: Tamuna's own cohort of 2 of 4 clients, LoCoDL's codec
REGISTRY_OVERRIDES = {"mc_fedda": {"stage_rounds": 1}, "multistep_refedda_gt": {"stage_rounds": 1},
                      "tamuna": {"cohort_size": 2},  # its own cohort: 2 of 4 clients
                      "locodl": {"codec": {"name": "rand_k", "k": 2}}}

#: Condat et al.'s methods solve smooth problems: their runs get no l1
SMOOTH_ONLY = ("compressed_scaffnew", "tamuna", "locodl")


def sampled_or_all(algorithm, problem, sampled=2):
    """``sampled`` clients per round, or ``None`` (all) for an algorithm defined for full
    participation only."""
    try:
        algorithm.prepare(setup_context(problem, sampled))
    except ValueError as exc:
        assert "full participation" in str(exc)
        return None
    return sampled
