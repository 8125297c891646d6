"""Configuration files: the built-in experiments, TOML in and out.

A configuration is a TOML file, or the name of one shipped in ``fedcomp/configs/``
(:func:`load`, :func:`experiment_source`); :func:`to_toml` writes one back (``fedcomp
show``) with the keys in :class:`~fedcomp.config.Schema`'s order. :class:`ConfigError`
(declared with the schema) is the error of every stage of a configuration.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ._schema import ConfigError, key_order

#: The deepest nesting of tables and arrays a configuration may hold (the built-in ones nest
#: 6 levels): deeper dotted keys (``a.a.a... = 1``, which tomllib reads without recursion)
#: would end in a RecursionError in every later stage that copies or walks the dict.
MAX_DEPTH = 32


def experiment_names() -> list[str]:
    """The built-in experiments: the TOML files shipped in ``fedcomp/configs/``, by name.

    Examples
    --------
    >>> "seed000" in experiment_names()
    True
    """
    folder = resources.files("fedcomp") / "configs"
    return sorted(item.name.removesuffix(".toml") for item in folder.iterdir()
                  if item.name.endswith(".toml"))


def experiment_source(name: str) -> str:
    """The text of the built-in experiment ``name`` (its TOML file, comments included)."""
    if name not in experiment_names():
        raise ConfigError(f"no built-in experiment {name!r}; built-in: "
                          f"{', '.join(experiment_names())}")
    return (resources.files("fedcomp") / "configs" / f"{name}.toml").read_text(encoding="utf-8")


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or "\\" in spec


def load(spec: str | Path) -> dict[str, Any]:
    """A configuration as a dict: from a TOML file, or a built-in experiment by name.

    ``spec`` is a path when such a file exists (or it ends in ``.toml`` or contains a
    directory separator), otherwise the name of a built-in experiment
    (:func:`experiment_names`).

    Raises
    ------
    ConfigError
        A missing file, invalid TOML (naming the file), or an unknown name (listing the
        built-in ones).

    Examples
    --------
    >>> load("seed000")["rounds"]
    500
    """
    path = Path(spec)
    if path.is_file() or _looks_like_path(str(spec)):
        if not path.exists():
            raise ConfigError(f"config file {str(path)!r} does not exist; give a TOML file or "
                              f"a built-in experiment ({', '.join(experiment_names())})")
        text, where = path.read_bytes(), str(path)
    elif str(spec) in experiment_names():
        text, where = experiment_source(str(spec)).encode(), f"fedcomp/configs/{spec}.toml"
    else:
        raise ConfigError(f"{str(spec)!r} is neither a config file nor a built-in experiment "
                          f"({', '.join(experiment_names())})")
    try:
        config = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                          "save the configuration as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{where}: arrays or tables nested too deeply for a configuration "
                          "(Python's recursion limit); a configuration nests a few levels"
                          ) from None
    check_depth(config, where)
    return config


def nesting_depth(value: Any) -> int:
    """How deeply tables and arrays nest in ``value`` (0 for a scalar), without recursion.

    Examples
    --------
    >>> nesting_depth({"data": {"seed": 0}, "seeds": [0, 1]}), nesting_depth(3)
    (2, 0)
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list | tuple):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:  # deeper is refused anyway: no need to walk all of it
                stack.extend((child, depth + 1) for child in
                             (node.values() if isinstance(node, dict) else node))
    return deepest


def check_depth(config: Any, where: str) -> None:
    """Refuse a configuration nested deeper than :data:`MAX_DEPTH`, naming ``where``."""
    if nesting_depth(config) > MAX_DEPTH:
        raise ConfigError(f"{where}: tables or arrays nested more than {MAX_DEPTH} levels deep "
                          "(fedcomp.config.MAX_DEPTH; the built-in configurations nest 6); "
                          "check the dotted keys and brackets")


def to_toml(config: dict[str, Any]) -> str:
    """A configuration as TOML text (``None`` values, which TOML cannot hold, left out).

    Examples
    --------
    >>> print(to_toml({"name": "x", "rounds": 3, "topology": None, "data": {"seed": 0}}))
    name = "x"
    rounds = 3
    <BLANKLINE>
    [data]
    seed = 0
    <BLANKLINE>
    """
    import tomli_w

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value if v is not None]
        return value

    order = {key: i for i, key in enumerate(key_order())}
    ordered = dict(sorted(config.items(), key=lambda item: order.get(item[0], len(order))))
    return tomli_w.dumps(clean(to_jsonable(ordered)))


def parse_value(text: str) -> Any:
    """A command-line value as TOML (numbers, booleans, lists, quoted strings), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:  # tomllib parses nested arrays recursively
        raise ConfigError(f"value {_short(text)} is nested too deeply (more than "
                          f"{MAX_DEPTH} levels of arrays or tables)") from None


def _short(text: str, width: int = 40) -> str:
    """``text`` quoted, cut to ``width`` characters (a key or value 3000 characters long
    would fill the terminal)."""
    return repr(text if len(text) <= width else text[:width] + "...")


def to_jsonable(value: Any) -> Any:
    """Configuration values as JSON-serialisable Python objects."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
