"""A compiled part of a round and its ladder of fallbacks (:class:`_Part`).

A part (a block's client update, the server update, a whole round or several) is traced
with the round as a traced value; where that fails, once more for the rounds ``>= 1`` with
a :class:`RoundFrom` round that answers comparisons on the host; where that fails too,
the part runs eagerly from then on, after a :class:`JaxEngineWarning` naming the line that
needed a host value (``compile=True``: a :class:`NotCompilableError` instead).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._jax import Uncompilable, require_jax

#: The compiled engine's own modules: a line of theirs never says which value was needed.
_ENGINE_FILES = ("_compiled.py", "_compiled_trace.py", "_compiled_fallback.py",
                 "_compiled_parts.py")


class NotCompilableError(ValueError):
    """An algorithm cannot run under ``jax.jit`` with ``compile=True`` (the message says
    which value it needs on the host, and where)."""


class JaxEngineWarning(UserWarning):
    """The compiled engine runs part of an algorithm eagerly (``compile="auto"``)."""


# --- the round inside a trace -----------------------------------------------------------------

class RoundFrom:
    """The traced round of a compiled call that serves only rounds ``>= low``.

    Arithmetic gives traced values (``(r + 1) * step``); a comparison with an integer is
    answered on the host wherever ``r >= low`` decides it (``r < 0``, ``r > 0`` and
    ``r == 0`` for ``low = 1``: a warm-up round, a first round), so an algorithm that
    branches on those compiles once for every later round; any other use of the value
    (``int(r)``, ``r == 5``, a host hash of it) raises :class:`Uncompilable`.
    """

    __slots__ = ("low", "value")

    def __init__(self, value: Any, low: int) -> None:
        self.value, self.low = value, low

    def _undecided(self, what: str) -> Uncompilable:
        return Uncompilable(f"the round is traced (known only to be >= {self.low}): {what}")

    def _int(self, other: Any) -> int:
        if isinstance(other, int | np.integer) and not isinstance(other, bool):
            return int(other)
        raise self._undecided(f"compared with {other!r}")

    def __lt__(self, other: Any) -> bool:
        if self._int(other) <= self.low:
            return False
        raise self._undecided(f"round < {other}")

    def __le__(self, other: Any) -> bool:
        if self._int(other) < self.low:
            return False
        raise self._undecided(f"round <= {other}")

    def __gt__(self, other: Any) -> bool:
        if self._int(other) < self.low:
            return True
        raise self._undecided(f"round > {other}")

    def __ge__(self, other: Any) -> bool:
        if self._int(other) <= self.low:
            return True
        raise self._undecided(f"round >= {other}")

    def __eq__(self, other: object) -> bool:
        if self._int(other) < self.low:
            return False
        raise self._undecided(f"round == {other}")

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise self._undecided("its truth value")

    def __index__(self) -> int:
        raise self._undecided("an integer")

    __int__ = __index__

    def __float__(self) -> float:
        raise self._undecided("a float")

    def __and__(self, other: Any) -> Any:
        raise self._undecided("bits of it (a host-side hash)")

    __rand__ = __and__

    def __jax_array__(self) -> Any:
        return self.value

    def __add__(self, other: Any) -> Any:
        return self.value + _value(other)

    def __radd__(self, other: Any) -> Any:
        return _value(other) + self.value

    def __sub__(self, other: Any) -> Any:
        return self.value - _value(other)

    def __rsub__(self, other: Any) -> Any:
        return _value(other) - self.value

    def __mul__(self, other: Any) -> Any:
        return self.value * _value(other)

    def __rmul__(self, other: Any) -> Any:
        return _value(other) * self.value

    def __truediv__(self, other: Any) -> Any:
        return self.value / _value(other)

    def __rtruediv__(self, other: Any) -> Any:
        return _value(other) / self.value

    def __floordiv__(self, other: Any) -> Any:
        return self.value // _value(other)

    def __rfloordiv__(self, other: Any) -> Any:
        return _value(other) // self.value

    def __mod__(self, other: Any) -> Any:
        return self.value % _value(other)

    def __pow__(self, other: Any) -> Any:
        return self.value ** _value(other)

    def __rpow__(self, other: Any) -> Any:
        return _value(other) ** self.value

    def __neg__(self) -> Any:
        return -self.value

    def __repr__(self) -> str:
        return f"RoundFrom(>= {self.low})"


def _value(x: Any) -> Any:
    return x.value if isinstance(x, RoundFrom) else x


def _round(round_: Any, low: int | None) -> Any:
    """What ``ctx.round`` is inside a trace: the traced round, or a :class:`RoundFrom`."""
    return round_ if low is None else RoundFrom(round_, low)


# --- a part and its fallbacks -----------------------------------------------------------------

def _reason(exc: BaseException) -> str:
    """One line: what needed a host value, and the line of fedcomp code that asked.

    The line is the innermost one in an algorithm file where there is one (a helper such
    as ``to_numpy`` says less than its caller), else the innermost fedcomp line.
    """
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/fedcomp/" in f.filename.replace("\\", "/")
              and not f.filename.endswith(_ENGINE_FILES)]
    in_algorithms = [f for f in frames if "/algorithms/" in f.filename.replace("\\", "/")]
    where = ""
    if frames:
        frame = (in_algorithms or frames)[-1]
        where = (f" ({frame.filename.replace(chr(92), '/').split('/fedcomp/')[-1]}:"
                 f"{frame.lineno}: {frame.line})")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first}{where}"


class _TraceFailed(Exception):
    """Tracing a part raised (its ``__cause__``): it needs a host value, or it is a genuine
    error, which then recurs when the part runs eagerly."""


class _Traced:
    """A jitted function that tells a failure while tracing from one while running.

    Any exception raised while the function is traced becomes :class:`_TraceFailed`: jax
    raises its concretization errors there, but host code given a tracer can fail in
    other ways too (an ``OverflowError`` from ``round & mask``, an unhashable tracer).
    """

    def __init__(self, fn: Callable[..., Any], **jit_options: Any) -> None:
        self.traces = 0

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.traces += 1
            return fn(*args, **kwargs)

        self.jitted = require_jax().jit(counted, **jit_options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = self.traces
        try:
            return self.jitted(*args, **kwargs)
        except Exception as exc:
            if self.traces != before:
                raise _TraceFailed() from exc
            raise


#: What a compiled part returns for a call it leaves to the eager path.
EAGER = object()


class _Part:
    """A traced function with its ladder of fallbacks.

    1. one compilation for every round, the round traced;
    2. if tracing that fails: one compilation for the rounds ``>= 1`` with a
       :class:`RoundFrom` round (an algorithm branching on its warm-up or first round),
       the rounds before eagerly;
    3. if that fails too: eagerly from then on — after a :class:`JaxEngineWarning`
       saying why, or a :class:`NotCompilableError` with ``compile=True`` (``quiet``:
       neither, for the whole-round call, whose parts then try on their own).

    ``fn(round_, *args, low=..., **static)`` is the function to trace.
    """

    def __init__(self, fn: Callable[..., Any], name: str, part: str, compile_: Any,
                 static: tuple[str, ...] = (), quiet: bool = False) -> None:
        self.traced = _Traced(fn, static_argnames=(*static, "low"))
        self.name, self.part, self.compile, self.quiet = name, part, compile_, quiet
        self.low: int | None = None
        self.eager = compile_ is False
        self.reason = ""

    def __call__(self, round_: int, *args: Any, **static: Any) -> Any:
        """The compiled call's result, or :data:`EAGER`: the caller runs it eagerly."""
        while not self.eager:
            if self.low is not None and round_ < self.low:
                return EAGER
            try:
                return self.traced(round_, *args, low=self.low, **static)
            except _TraceFailed as failed:
                if self.low is None:
                    self.low = 1
                else:
                    self._give_up(failed)
        return EAGER

    def _give_up(self, failed: _TraceFailed) -> None:
        exc = failed.__cause__ or failed
        self.declare_eager(_reason(exc), cause=exc)

    def declare_eager(self, reason: str, cause: BaseException | None = None) -> None:
        """Run this part eagerly from now on, because of ``reason``: a warning, or with
        ``compile=True`` a :class:`NotCompilableError` (neither for a ``quiet`` part)."""
        self.eager, self.reason = True, reason
        if self.quiet:
            return
        message = (f"{self.name}: its {self.part} cannot run under jax.jit, it needs a value "
                   f"on the host: {self.reason}")
        if self.compile is True:
            raise NotCompilableError(message + "; use compile='auto' to run it eagerly on "
                                     "the jax arrays, or backend = 'numpy'") from cause
        warnings.warn(message + "; it runs eagerly on the jax arrays (same results, "
                      "uncompiled)", JaxEngineWarning, stacklevel=6)
