"""MkDocs hook: the Sphinx markup of fedcomp's numpydoc docstrings, rendered.

mkdocstrings renders a docstring's text as Markdown, where Sphinx's cross-reference roles
(``:func:`~fedcomp.simulate```) and ``.. math::`` directives have no meaning: they reached
the API pages as raw text. After each page's Markdown is rendered, this hook turns

* a role ``:func:`~a.b.c``` (any of :data:`ROLES`) into ``c`` in code type, linked to the
  object's API entry where it has one — an optional ``<autoref>`` element, which
  mkdocs-autorefs resolves after every page is rendered and leaves as plain code where the
  object is not documented; without ``~`` the whole path shows;
* ``:math:`x``` into inline math, ``\\(x\\)``;
* a ``.. math::`` directive — the paragraph ``.. math::`` followed by the indented block
  Markdown made a code block of, or ``.. math:: formula`` in one paragraph — into display
  math, ``\\[ ... \\]``.

Both kinds of math sit in elements of class ``arithmatex``, which the site's MathJax
typesets (``docs/javascripts/mathjax-config.js``).
"""

from __future__ import annotations

import html
import re
from typing import Any

#: the Sphinx (Python domain) roles used in fedcomp's docstrings
ROLES = ("func", "class", "meth", "mod", "data", "attr", "exc", "obj", "const")

ROLE = re.compile(r":(?:py:)?(?P<role>" + "|".join(ROLES)
                  + r"):<code>(?P<tilde>~?)(?P<target>[^<]+)</code>")
INLINE_MATH = re.compile(r":math:<code>(?P<tex>[^<]+)</code>")
#: ``.. math::`` as Markdown left it: a paragraph, then a code block (highlighted or not)
MATH_BLOCK = re.compile(
    r"<p>\.\. math::\s*</p>\s*"
    r"(?:<div class=\"highlight\"><pre><span></span><code>|<pre><code>)"
    r"(?P<tex>.*?)</code></pre>(?:</div>)?", re.S)
#: ``.. math:: formula`` on the directive's own line: one paragraph
MATH_LINE = re.compile(r"<p>\.\. math::\s+(?P<tex>.*?)</p>", re.S)


def _reference(match: re.Match[str]) -> str:
    target = match["target"].strip().rstrip("()")
    shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
    suffix = "()" if match["role"] in ("func", "meth") else ""
    return (f'<autoref identifier="{html.escape(target)}" optional>'
            f"<code>{html.escape(shown)}{suffix}</code></autoref>")


def render_sphinx_markup(text: str) -> str:
    """``text`` (a page's HTML) with the roles and math directives rendered.

    Examples
    --------
    >>> render_sphinx_markup(":func:<code>~fedcomp.simulate</code>")
    '<autoref identifier="fedcomp.simulate" optional><code>simulate()</code></autoref>'
    >>> render_sphinx_markup("<p>.. math::</p>\\n<pre><code>a &lt; b\\n</code></pre>")
    '<div class="arithmatex">\\\\[a &lt; b\\n\\\\]</div>'
    """
    text = MATH_BLOCK.sub(lambda m: f'<div class="arithmatex">\\[{m["tex"]}\\]</div>', text)
    text = MATH_LINE.sub(lambda m: f'<div class="arithmatex">\\[{m["tex"]}\\]</div>', text)
    text = INLINE_MATH.sub(lambda m: f'<span class="arithmatex">\\({m["tex"]}\\)</span>', text)
    return ROLE.sub(_reference, text)


def on_page_content(html_text: str, **_: Any) -> str:
    return render_sphinx_markup(html_text)
