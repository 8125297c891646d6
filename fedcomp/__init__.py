"""fedcomp: composite federated optimization.

Many clients jointly minimise ``Σ_i π_i f_i(x) + g(x)``: smooth losses on data that never
leave each client plus a nonsmooth (possibly nonconvex) regularizer. fedcomp ships the
composite FL algorithms of the literature as pure functions, a vectorised simulator, a
centralized reference solver and a command-line tool.
"""

import importlib.metadata as _metadata
import os as _os

# Idle OpenMP threads sleep instead of spinning. Torch's CPU kernels run on GNU OpenMP, which
# reads this once, when torch is first imported: with the default (spinning) policy a torch
# round with 2 threads beside two busy processes on 2 cores took 300 ms instead of 65 ms
# (benchmarks/torch_threads.py, docs/BENCHMARKS.md). A value the user set is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    # one version source: pyproject.toml's, as the installed distribution records it
    __version__ = _metadata.version("fedcomp")
except _metadata.PackageNotFoundError:  # a bare checkout on sys.path, never installed
    __version__ = "0+unknown"

from ._extras import MissingExtraError  # noqa: E402
from ._frames import compare, final_medians, load_results  # noqa: E402
from .algorithms import (  # noqa: E402
    ALGORITHMS,
    ClientContext,
    DecentralizedAlgorithm,
    FederatedAlgorithm,
    ServerContext,
    async_feddr,
    c_fedda,
    compressed,
    compressed_scaffnew,
    dfedda,
    dfedda_gt,
    dfedmid,
    ditto,
    drefedda_gt,
    fast_fedda,
    fed_ht,
    fedadmm,
    fedavg,
    fedcanon,
    fedcanon2,
    fedda,
    fedda_gt,
    feddr,
    fedexprox,
    fediter_ht,
    fedmid,
    fedpd,
    fedprox,
    fedsplit,
    locodl,
    make_algorithm,
    mc_fedda,
    multistep_refedda_gt,
    pfedme,
    refedda_gt,
    scafflix,
    scaffnew,
    scaffold,
    sdane,
    tamuna,
    za1,
)
from .data import Batch, ClientData
from .losses import Loss
from .metrics import evaluate
from .oracle import Counters, Oracle
from .problem import Problem
from .reference import Reference, solve_reference
from .regularizers import Regularizer
from .runtime import (  # noqa: E402
    AsyncRunResult,
    Checkpoint,
    ComputeTimes,
    EarlyStopping,
    NonFiniteError,
    RunOptions,
    RunResult,
    RunView,
    simulate,
    simulate_async,
    simulate_decentralized,
)
from .topology import Topology  # noqa: E402

__all__ = [
    "ALGORITHMS", "Batch", "ClientContext", "ClientData", "Counters", "FederatedAlgorithm",
    "Loss", "NonFiniteError", "Oracle", "Problem", "Reference", "Regularizer", "RunResult",
    "ServerContext", "__version__", "c_fedda", "evaluate", "fast_fedda", "fedavg", "fedda",
    "fedmid", "make_algorithm", "mc_fedda", "simulate", "solve_reference", "za1",
    "DecentralizedAlgorithm", "Topology", "dfedda", "dfedda_gt", "dfedmid", "drefedda_gt",
    "fedda_gt", "multistep_refedda_gt", "refedda_gt", "simulate_decentralized",
    "fedcanon", "fedcanon2", "scaffnew", "scaffold",
]
__all__ += ["AsyncRunResult", "ComputeTimes", "async_feddr", "fedadmm", "feddr", "fedpd",
            "fedprox", "fedsplit", "simulate_async"]
__all__ += ["MissingExtraError"]
__all__ += ["RunOptions"]
# every algorithm factory of the registry, the stopping rules and the results as data
__all__ += ["compressed", "compressed_scaffnew", "ditto", "fed_ht", "fedexprox", "fediter_ht",
            "locodl", "pfedme", "scafflix", "sdane", "tamuna", "Checkpoint", "ConvergenceWarning",
            "EarlyStopping", "RunView", "load_results", "compare", "final_medians"]


def __getattr__(name: str) -> object:
    # scikit-learn's ConvergenceWarning where it is installed, imported on first use (an
    # import of scikit-learn takes a second that `import fedcomp` need not pay)
    if name == "ConvergenceWarning":
        from .runtime._stopping import convergence_warning

        return convergence_warning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
