"""Execution: the vectorised simulator and the asynchronous event-clock runner."""

from ._async import AsyncRunResult, simulate_async
from ._clock import ComputeTimes
from ._simulate import NonFiniteError, RunResult, auto_block_size, simulate

__all__ = ["AsyncRunResult", "ComputeTimes", "NonFiniteError", "RunResult", "auto_block_size",
           "simulate", "simulate_async"]
