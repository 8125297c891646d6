"""Griffe extension (mkdocs.yml's mkdocstrings ``extensions``): numpydoc entries whose names
or type run onto a second line, read as one line.

numpydoc lets a section entry name several parameters (``alpha, tol : float``), and
fedcomp's docstrings wrap a long list of them, or a long type, onto the next line::

    algorithm, algorithm_params, client_lr, max_iter, tol, warm_start, fit_intercept,
    n_clients, clients_per_round, batch_size, eval_every, random_state
        As in :class:`FederatedEstimator`.

Griffe's numpydoc parser reads an entry from one line, so the API page's table showed the
first line's names with type ``Any``, no description and another parameter's default,
and a wrapped type's end as the description. Before the docstring is parsed, this joins
an entry line that ends in a comma (more names follow) or leaves a parenthesis open (the
type goes on) with the line after it.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: An entry line (at the section's margin: a description is indented) whose names go on:
#: names, each followed by a comma, the last one too.
OPEN_NAMES = re.compile(r"^\*{0,2}\w+(?:,\s*\*{0,2}\w+)*,\s*$")
#: An entry line ``name : type`` whose type may leave a parenthesis open.
OPEN_TYPE = re.compile(r"^\*{0,2}\w+(?:,\s*\*{0,2}\w+)*\s+:\s+\S.*$")


def _continues(line: str) -> bool:
    if OPEN_NAMES.match(line):
        return True
    # the type's last parenthesis still open ("(named by"; an interval "(0, 1]" is closed)
    last = line.rfind("(")
    return bool(OPEN_TYPE.match(line)) and last >= 0 and not set(line[last:]) & set(")]")


#: An entry of several names (after joining): ``a, b, c`` or ``a, b : type``.
SEVERAL = re.compile(r"^(?P<names>\*{0,2}\w+(?:,\s*\*{0,2}\w+)+)(?P<type>\s+:\s+\S.*)?$")


def join_wrapped_entries(text: str) -> str:
    """``text`` (a docstring) with each wrapped entry line joined to the line after it, and
    an entry of several names written once per name, with its type and description (griffe
    gives the first name's default to every name of a shared entry).

    Examples
    --------
    >>> join_wrapped_entries("a, b,\\nc\\n    Same as d.")
    'a\\n    Same as d.\\nb\\n    Same as d.\\nc\\n    Same as d.'
    >>> join_wrapped_entries("x : dict of name (named by\\n    ``name``)\\n    The runs.")
    'x : dict of name (named by ``name``)\\n    The runs.'
    >>> join_wrapped_entries("p : float in (0, 1], default 0.2\\n    The probability.")
    'p : float in (0, 1], default 0.2\\n    The probability.'
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        while _continues(line) and i + 1 < len(lines) and lines[i + 1].strip():
            i += 1
            line = f"{line.rstrip()} {lines[i].strip()}"
        i += 1
        several = SEVERAL.match(line.rstrip())
        if several is None:
            out.append(line)
            continue
        body = []  # the entry's description: the indented lines after it
        while i < len(lines) and (lines[i].startswith((" ", "\t")) or not lines[i].strip()):
            body.append(lines[i])
            i += 1
        trailing = []
        while body and not body[-1].strip():  # a blank line ends the entry, not its text
            trailing.append(body.pop())
        for name in re.split(r",\s*", several["names"]):
            out += [f"{name}{several['type'] or ''}", *body]
        out += trailing
    return "\n".join(out)


class JoinWrappedEntries(griffe.Extension):
    """Joins wrapped numpydoc entries of every docstring before it is parsed."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = join_wrapped_entries(obj.docstring.value)
