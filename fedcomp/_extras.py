"""The optional dependencies of fedcomp and the one error a missing one raises.

fedcomp's core needs NumPy, SciPy and array-api-compat only; the rest comes with the extras
of ``pyproject.toml`` (``torch``, ``jax``, ``plot``, ``data``, ``flower``, ``privacy``, ...). A
feature imports its optional module through :func:`require` (or, to fail before any work starts,
checks it with :func:`check_installed`), so a missing extra ends in one line naming the
feature, the missing package and the fix::

    fedcomp.data.digits needs scikit-learn: pip install 'fedcomp[data]'

raised as :class:`MissingExtraError` (an ``ImportError``) by the Python API and printed as
one ``error:`` line with exit status 2 by the command line.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType
from typing import Any

#: Optional top-level module -> (the distribution pip installs, the fedcomp extra bringing it).
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "torch"),
    # the compiled engine (backend = "jax" / "jax-float32"; fedcomp.runtime.jax_like)
    "jax": ("jax", "jax"),
    "matplotlib": ("matplotlib", "plot"),
    "sklearn": ("scikit-learn", "data"),
    # results as data frames (RunResult.to_frame, fedcomp.load_results)
    "pandas": ("pandas", "data"),
    "flwr": ("flwr", "flower"),
    # Flower Datasets' partitioners over fedcomp's data (partition = {name = "flwr", ...})
    "flwr_datasets": ("flwr-datasets", "flower"),
    "datasets": ("datasets", "flower"),
    # the extra is flwr[simulation]: Ray runs Flower's simulation engine
    "ray": ("ray", "flower"),
    # fedcomp flower local's throwaway CA, TLS certificate and SuperNode keys
    "cryptography": ("cryptography", "flower"),
    # experiment tracking (fedcomp.metrics._tracking): TensorBoard event files through
    # tensorboardX; MLflow 3 with its SQLite store (SQLAlchemy and alembic)
    "tensorboardX": ("tensorboardX", "tensorboard"),
    "mlflow": ("mlflow-skinny", "mlflow"),
    "sqlalchemy": ("sqlalchemy", "mlflow"),
    "alembic": ("alembic", "mlflow"),
    # fedcomp completion bash|zsh|tcsh
    "shtab": ("shtab", "completion"),
    # solve_reference(solver="skglm"): coordinate descent with Anderson acceleration
    "skglm": ("skglm", "skglm"),
    # client-level differential privacy's accountant (fedcomp.privacy)
    "dp_accounting": ("dp-accounting", "privacy"),
}


def _check_known(module: str) -> str:
    top = module.partition(".")[0]
    if top not in EXTRAS:
        raise ValueError(f"{module!r} is not an optional dependency of fedcomp; known: "
                         f"{', '.join(sorted(EXTRAS))} (add it to fedcomp._extras.EXTRAS)")
    return top


class MissingExtraError(ImportError):
    """A feature of fedcomp needs an optional dependency that is not installed.

    Its message is one line: the feature, the missing package(s) and the ``pip install``
    of the fedcomp extra(s) that bring them.

    Parameters
    ----------
    feature : str
        What needs the module, e.g. ``"fedcomp.data.digits"``.
    modules : iterable of str
        The missing top-level modules (keys of :data:`EXTRAS`).

    Attributes
    ----------
    feature : str
    modules : tuple of str
        The missing modules, in the order given.
    extras : tuple of str
        The extras to install, sorted.

    Examples
    --------
    >>> print(MissingExtraError("fedcomp.data.digits", ["sklearn"]))
    fedcomp.data.digits needs scikit-learn: pip install 'fedcomp[data]'
    >>> print(MissingExtraError("'fedcanon_nn'", ["sklearn", "torch"]))
    'fedcanon_nn' needs scikit-learn and torch: pip install 'fedcomp[data,torch]'
    """

    def __init__(self, feature: str, modules: Iterable[str]) -> None:
        self.feature = feature
        self.modules = tuple(dict.fromkeys(_check_known(m) for m in modules))
        if not self.modules:
            raise ValueError("MissingExtraError needs at least one missing module")
        packages = [EXTRAS[m][0] for m in self.modules]
        self.extras = tuple(sorted({EXTRAS[m][1] for m in self.modules}))
        super().__init__(f"{feature} needs {' and '.join(packages)}: pip install "
                         f"'fedcomp[{','.join(self.extras)}]'", name=self.modules[0])

    def __reduce__(self) -> tuple[Any, ...]:
        # ImportError pickles its message as the only argument; worker processes send
        # their exceptions back pickled
        return type(self), (self.feature, self.modules)


def require(module: str, feature: str) -> ModuleType:
    """Import the optional ``module`` that ``feature`` needs.

    Parameters
    ----------
    module : str
        A module of an optional dependency, e.g. ``"sklearn.datasets"`` or
        ``"matplotlib.pyplot"`` (its top-level package must be a key of :data:`EXTRAS`).
    feature : str
        What needs it, for the message, e.g. ``"fedcomp.data.digits"``.

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingExtraError
        When the module, or another optional dependency it imports, is not installed
        (raised ``from None``: the import machinery's traceback says nothing more). Any
        other ImportError (an installed package missing one of its own dependencies)
        propagates unchanged.

    Examples
    --------
    >>> require("numpy.linalg", "fedcomp")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'numpy.linalg' is not an optional dependency of fedcomp; known: ...
    """
    _check_known(module)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # a module of an optional package not found is a missing extra (or one too old to
        # have it: the extra's version floor fixes that too); a missing dependency of an
        # installed package (scikit-learn without joblib) is a broken install: as it is
        missing = (exc.name or "").partition(".")[0]
        if missing not in EXTRAS:
            raise
        raise MissingExtraError(feature, [missing]) from None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # an import hook that refuses the module
        return False


def check_installed(modules: Iterable[str], feature: str) -> None:
    """Fail early when any of ``modules`` is not installed, naming all of them at once.

    Looks the modules up without importing them (``importlib.util.find_spec``), so a
    configuration can be checked before anything is run or written.

    Parameters
    ----------
    modules : iterable of str
        Top-level optional modules (keys of :data:`EXTRAS`).
    feature : str
        What needs them, for the message.

    Raises
    ------
    MissingExtraError
        Naming every missing module and one ``pip install`` with all their extras.
    """
    missing = [m for m in dict.fromkeys(map(_check_known, modules)) if not _installed(m)]
    if missing:
        raise MissingExtraError(feature, missing)


__all__ = ["EXTRAS", "MissingExtraError", "check_installed", "require"]
