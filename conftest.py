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

# Two virtual CPU devices for jax (tests/engines/test_devices.py commits data to the second one, which
# refuses to meet the first in a computation, as a GPU refuses the host). Set before anything
# imports jax; the default device stays the first, so every other test runs as before.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=2").strip()
