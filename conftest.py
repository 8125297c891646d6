"""Collection settings shared by ``tests/`` and the package's doctests."""

import importlib.util
import os

# fedcomp.flower imports flwr: without the extra its doctests cannot even be imported
collect_ignore_glob = [] if importlib.util.find_spec("flwr") else ["fedcomp/flower/*"]

# One OpenMP thread for torch (and OpenBLAS), here and in the subprocesses the tests start,
# unless set otherwise: the tests' networks are tiny, and on a busy 2-core machine two
# threads spin-wait for each other (test_torch_cnn_snippet_trains: 28 s instead of 2.5 s
# at load 4; no difference when idle). Set before anything imports torch or numpy's BLAS.
os.environ.setdefault("OMP_NUM_THREADS", "1")
