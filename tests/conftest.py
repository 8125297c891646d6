"""Shared fixtures: small heterogeneous federated problems built without any generator, a
local HTTP server for download tests."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading

import numpy as np
import pytest

from fedcomp import ClientData, Problem
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.regularizers import L1


def heterogeneous_data(n_clients=7, d=6, seed=0, labels="pm1", sizes=None):
    """Clients with shifted feature means and distinct true models, unequal sizes."""
    rng = np.random.default_rng(seed)
    sizes = sizes or [int(s) for s in rng.integers(15, 40, size=n_clients)]
    feats, targs = [], []
    for i, m in enumerate(sizes):
        a = rng.normal(loc=0.5 * (i % 3), size=(m, d)) / np.sqrt(d)
        w = rng.normal(size=d) + (i % 2)
        y = a @ w + 0.1 * rng.normal(size=m)
        feats.append(a)
        targs.append(np.where(y > np.median(y), 1.0, -1.0) if labels == "pm1" else y)
    return ClientData.from_lists(feats, targs)


def make_problem(kind="logistic", reg=None, n_clients=7, d=6, seed=0, weighting="uniform"):
    data = heterogeneous_data(n_clients, d, seed, labels="pm1" if kind == "logistic" else "real")
    loss = Logistic(l2=0.01) if kind == "logistic" else LeastSquares()
    return Problem(loss, reg if reg is not None else L1(1e-3), data, weighting=weighting)


def heterogeneous_sparse_regression():
    """The issue's reduced rate instance: Bao et al.'s Example 3.1 with 8 clients × 64
    samples, p = 50, s = 10, λ = 0.1 (client L_i from 26 to 73; f is 0.23-strongly convex)."""
    from fedcomp.data import bao_sparse_regression

    data = bao_sparse_regression(n_clients=8, samples_per_client=64, n_features=50, sparsity=10)
    return Problem(LeastSquares(), L1(0.1), data)


@pytest.fixture
def logistic_problem():
    return make_problem("logistic")


@pytest.fixture
def lstsq_problem():
    return make_problem("least_squares")


_JAX_CACHE: list[str] = []


def pytest_configure(config):
    """The compiled engine's compilation cache (fedcomp.runtime._jax_cache) in a temp dir of
    the session, never in the user's home (unless FEDCOMP_JAX_CACHE says where). Set here,
    before collection, since test modules move data to jax when imported."""
    if "FEDCOMP_JAX_CACHE" not in os.environ:
        _JAX_CACHE.append(tempfile.mkdtemp(prefix="fedcomp-jax-cache-"))
        os.environ["FEDCOMP_JAX_CACHE"] = _JAX_CACHE[-1]


def pytest_unconfigure(config):
    for folder in _JAX_CACHE:
        shutil.rmtree(folder, ignore_errors=True)


#: Test modules that start processes, servers, Ray or a browser, or send signals: under
#: pytest-xdist (``scripts/dev.sh test`` runs ``-n 2 --dist loadgroup``) they run one
#: after another on one worker, so that two of them never compete for a port, a Ray head
#: or the process table; the other worker takes the rest of the suite. A test elsewhere
#: that needs the same marks itself ``@pytest.mark.xdist_group("serial")``.
SERIAL_MODULES = frozenset({
    "test_flower.py", "test_flower_robust.py", "test_ray_executor.py", "test_robust.py",
    "test_robust_gaps.py", "test_lifetime.py", "test_sweeps.py", "test_docs.py",
    "test_report.py", "test_image_data.py", "test_wheel.py", "test_cli_robust.py",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.xdist_group("serial"))


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Reference solutions cached in a per-session temp dir, never in the user's home.

    Session-scoped so that module-scoped fixtures (which are set up before any
    function-scoped one) use it too: a module fixture that read the home cache once got a
    reference solved to another tolerance than the test's own runs, 1e-10 apart."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        yield


@pytest.fixture
def local_server(tmp_path):
    """A static HTTP server on 127.0.0.1 (an ephemeral port) serving ``tmp_path/www``."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def headless_chromium():
    """A Selenium driver of Debian's headless chromium, its browser log recorded; skipped
    where selenium, chromium or chromium-driver is missing (.ci/run installs them)."""
    import shutil

    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("Debian chromium and chromium-driver are not installed (.ci/run installs "
                    "them: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--allow-file-access-from-files", "--window-size=1000,700"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def import_user_module(tmp_path, monkeypatch):
    """``load(name, source)``: a module file ``name.py`` in a folder on ``sys.path``, as a
    user's package would be, imported; forgotten again after the test."""
    import importlib
    import sys

    names = []

    def load(name, source):
        import textwrap

        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        names.append(name)
        return importlib.import_module(name)

    yield load
    for name in names:
        sys.modules.pop(name, None)
