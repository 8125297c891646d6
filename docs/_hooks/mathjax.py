"""MkDocs hook: ship MathJax with the site, so math renders offline (no CDN).

MathJax 3 comes from the ``django-static-mathjax`` wheel (the ``docs`` extra), which bundles
MathJax's ``es5`` build and depends on nothing. After the build, the combined ``tex-chtml.js``
component and the directories it loads on demand (TeX extensions, the CHTML fonts, the
menu) are copied to ``site/javascripts/mathjax/``, where ``mkdocs.yml``'s ``extra_javascript``
points; the speech-rule engine (``sre``, 4 MB, for screen-reader exploration) is left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

#: what tex-chtml.js needs beside it
PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "adaptors")


def mathjax_source() -> Path:
    """The ``es5`` directory of the installed MathJax (``django-static-mathjax``)."""
    try:
        import mathjax  # the django-static-mathjax distribution
    except ImportError as error:
        raise RuntimeError("the docs need MathJax: pip install 'fedcomp[docs]' "
                           "(django-static-mathjax)") from error
    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(f"no tex-chtml.js under {source}: reinstall django-static-mathjax")
    return source


def on_post_build(config: Any, **kwargs: Any) -> None:
    source = mathjax_source()
    target = Path(config["site_dir"]) / "javascripts" / "mathjax"
    for part in PARTS:
        origin = source / part
        if origin.is_dir():
            shutil.copytree(origin, target / part, dirs_exist_ok=True)
        elif origin.is_file():
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target / part)
    license_file = source.parent / "LICENSE"
    if license_file.is_file():
        shutil.copy2(license_file, target / "LICENSE")
