"""Collection settings shared by ``tests/`` and the package's doctests."""

import importlib.util

# fedcomp.flower imports flwr: without the extra its doctests cannot even be imported
collect_ignore_glob = [] if importlib.util.find_spec("flwr") else ["fedcomp/flower/*"]
