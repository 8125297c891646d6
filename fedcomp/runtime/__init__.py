"""Execution: the vectorised simulator (its clients in this process or on Ray actors), the
asynchronous event-clock runner and the decentralized (gossip) runner."""

from ..algorithms._base import SetupContext, setup_context
from ._allocator import reuse_freed_memory
from ._async import AsyncRunResult, simulate_async
from ._backends import BACKENDS, BackendEntry, backend_for
from ._checkpoint import Checkpoint
from ._clock import ComputeTimes
from ._compiled_fallback import JaxEngineWarning, NotCompilableError
from ._decentralized import consensus_error, simulate_decentralized
from ._jax import jax_like
from ._jax_cache import JaxCacheWarning
from ._options import RunOptions
from ._ray_clients import ray_clients
from ._simulate import NonFiniteError, RunResult, auto_block_size, simulate
from ._stopping import STOP_MEASURES, EarlyStopping, RunView, convergence_warning

__all__ = ["BACKENDS", "BackendEntry", "STOP_MEASURES", "Checkpoint", "ConvergenceWarning",
           "EarlyStopping", "RunView",
           "AsyncRunResult", "ComputeTimes", "JaxCacheWarning", "JaxEngineWarning",
           "NonFiniteError", "NotCompilableError", "RunOptions", "RunResult", "SetupContext",
           "auto_block_size", "backend_for", "consensus_error", "jax_like", "ray_clients",
           "reuse_freed_memory", "setup_context", "simulate", "simulate_async",
           "simulate_decentralized"]


def __getattr__(name: str) -> object:
    # ConvergenceWarning is scikit-learn's class where it is installed: imported on first use
    if name == "ConvergenceWarning":
        return convergence_warning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
