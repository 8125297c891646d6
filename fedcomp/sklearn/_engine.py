"""Where a fit computes: its dtype (float32 where the run converges in float32) and
the stopping tolerance that dtype allows, and its engine (NumPy, or the compiled jax
engine's whole run)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from .._extras import require
from ..algorithms import FederatedAlgorithm
from ..problem import Problem

#: A float32 run stops at a relative prox-gradient step of ``max(tol, FLOAT32_TOL_EPS · ε)``,
#: ``ε`` float32's machine epsilon (1.19e-7): the step of float32 rounds cannot fall below
#: its rounding. Measured (auto's FedDR, 5 clients, 3000 rounds at tol=0): standardized
#: diabetes' Lasso (α = 0.1) levels off at 0.8–1.0 ε, raw diabetes (α = 0.1, 0.01) at
#: 0.8–1.7 ε, never above 1.7 ε; 10 ε leaves a factor of 6.
FLOAT32_TOL_EPS = 10.0


def run_dtype(dtype: Any, algorithm: FederatedAlgorithm, loss: Any) -> Any:
    """The dtype a fit computes in: float32 for float32 features where the run converges in
    float32 (FedDR with exact local proxes on a quadratic loss, ``"auto"``'s least squares
    fits), else float64.

    Measured on float32 features at ``tol=0`` (5 clients): ZA1's relative step levels off
    at 5e-5 (standardized diabetes, MCP) to 4e-4 (600 features), 400 to 3600 ε, with
    coefficients 1–17 % from the float64 fit's. FedDR's exact logistic prox (damped Newton,
    its line search's slack 10 ε in float32) meets the float32 floor far from the float64
    fit on ill-conditioned data: breast-cancer's ℓ1 logistic fit stops 5e-4 (standardized,
    α = 0.01) to 15 % (raw, α = 0.01; objective 4e-4 above) away, where the step is small
    because the rounds are slow, not because the model is there. Both compute in float64.
    """
    exact = (algorithm.name == "feddr"
             and algorithm.hyperparameters.get("local_solver") == "exact")
    if dtype == np.float32 and exact and bool(getattr(loss, "quadratic", False)):
        return np.float32
    return np.float64


def run_tol(tol: float | None, dtype: Any) -> float | None:
    """The ``tol`` a run computing in ``dtype`` stops at: ``tol``, raised to
    :data:`FLOAT32_TOL_EPS` · ε in float32 (float64 runs keep ``tol`` as given)."""
    if tol is None or dtype != np.float32:
        return tol
    return max(tol, FLOAT32_TOL_EPS * float(np.finfo(np.float32).eps))


#: The engines a fit runs on (``engine=``): ``"numpy"`` round by round on the host,
#: ``"jax"`` the compiled engine's whole run, ``"auto"`` :data:`AUTO_ENGINE`.
ENGINES = ("auto", "numpy", "jax")

#: What ``engine="auto"`` runs on. Measured on a 2-core CPU (5 clients, defaults, float64;
#: the compiled fit's first call compiles, a refit of the same alpha re-traces and reads
#: the compile back from jax's persistent cache, a new alpha compiles again):
#:
#: * auto's FedDR (least squares, 10-300 rounds): NumPy 5-460 ms from 442 x 10 to
#:   50 000 x 200; jax 1.5-7 s first, 0.12-1.4 s again, 0.4-2.8 s a new alpha — jax lost
#:   every case (at 50 000 x 200 its round took 37 ms against NumPy's 0.5 ms);
#: * ZA1 (MCP/SCAD, more than 500 features): jax won only long runs — standardized
#:   diabetes' MCP and SCAD (7 300 rounds): NumPy 2.3-2.8 s, jax 0.27 s again, 1.4 s a
#:   new alpha; 442 x 600 (300-600 rounds): 1.9-2.1 s against 0.9 and 1.3 s — and lost
#:   the short ones: 20-70 rounds at 442 x 10 to 50 000 x 50 (12-240 ms against
#:   0.4-0.9 s a new alpha) and at 5 000-20 000 x 600-1 000 (0.9-3.2 s against 1.7-4.5 s).
#:
#: A fit's rounds are not known before it runs: on jax a short fit runs 10-100x slower, a
#: long one 1.5-2x faster at a new alpha, so ``"auto"`` is NumPy; ``engine="jax"`` opts in
#: for long runs.
AUTO_ENGINE = "numpy"


def check_engine(engine: Any) -> str:
    """``engine`` resolved (``"auto"`` is :data:`AUTO_ENGINE`): one of ``"numpy"``,
    ``"jax"``, else one ValueError naming it."""
    if not (isinstance(engine, str) and engine in ENGINES):
        raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))} (got "
                         f"engine={engine!r})")
    return AUTO_ENGINE if engine == "auto" else engine


def on_engine(problem: Problem, dtype: Any, engine: str, feature: str) -> Problem:
    """``problem`` with its data in ``dtype`` on ``engine``'s arrays (NumPy's, or jax's:
    the compiled engine)."""
    if engine == "numpy":
        like = np.zeros(0, dtype=dtype)
        return problem if dtype == np.float64 else replace(problem,
                                                           data=problem.data.to(like))
    from ..runtime import jax_like

    require("jax", feature)
    return replace(problem, data=problem.data.to(jax_like(np.dtype(dtype).name)))
