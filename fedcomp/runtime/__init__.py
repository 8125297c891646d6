"""Execution: the vectorised simulator (and, later, asynchronous and decentralized runners)."""

from ._decentralized import consensus_error, simulate_decentralized
from ._simulate import NonFiniteError, RunResult, auto_block_size, simulate

__all__ = ["NonFiniteError", "RunResult", "auto_block_size", "consensus_error", "simulate",
           "simulate_decentralized"]
