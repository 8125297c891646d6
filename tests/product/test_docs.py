"""The documentation site (issue 21): ``mkdocs build --strict`` succeeds, and in headless
Chromium its pages render their math with the MathJax shipped inside the site (no CDN),
without a TeX error or a console error. The README links only to files in the repository.

The build takes 15-20 s (mkdocstrings imports and renders the whole API), so the build and
browser tests are ``slow``; they are skipped where the ``docs`` extra is not installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: pages whose math the browser test checks: the front page, every algorithm family,
#: the concepts and the regularizers' prox formulas
MATH_PAGES = ("index.html", "concepts/index.html", "regularizers/index.html",
              "algorithms/local-steps/index.html", "algorithms/dual-averaging/index.html",
              "algorithms/splitting/index.html", "algorithms/decentralized/index.html",
              # the docstrings' .. math:: directives (docs/_hooks/docstrings.py)
              "api/problem/index.html", "api/privacy/index.html", "api/sklearn/index.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "mathjax"):
        pytest.importorskip(module, reason="the docs extra: pip install '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                            "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    return out


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page_and_the_api(site):
    for page in (*MATH_PAGES, "getting-started/index.html", "data/index.html",
                 "cli/index.html", "flower/index.html", "BENCHMARKS/index.html",
                 "reproduction/index.html", "ARCHITECTURE/index.html",
                 "api/algorithms/index.html", "report/index.html", "compressors/index.html",
                 "api/compressors/index.html", "privacy/index.html", "api/privacy/index.html"):
        assert (site / page).is_file(), page
    api = (site / "api" / "algorithms" / "index.html").read_text()
    documented = set(re.findall(r'id="fedcomp\.algorithms\.(?:\w+\.)?(\w+)"', api))
    from fedcomp.algorithms import REGISTRY
    assert set(REGISTRY) <= documented, set(REGISTRY) - documented
    # the algorithm pages' tables and counts, rendered from the registry by the docs hook
    algorithms = (site / "algorithms" / "index.html").read_text()
    assert set(REGISTRY) <= set(re.findall(r"<code>(\w+)</code>", algorithms))
    front = (site / "index.html").read_text()
    assert f"{len(REGISTRY)} algorithms" in front and "registry:" not in algorithms + front
    # MathJax is part of the site, with its fonts; nothing is loaded from elsewhere
    mathjax = site / "javascripts" / "mathjax"
    assert (mathjax / "tex-chtml.js").is_file()
    assert list((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    for page in site.rglob("*.html"):
        if "report" in page.relative_to(site).parts:
            continue
        tags = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="(https?:)?//[^"]*"',
                          page.read_text())
        assert not tags, (page, tags)


@pytest.mark.slow
def test_the_api_reference_covers_every_public_module_and_renders_its_markup(site):
    """The estimators, results, experiments and Flower have API pages; no page shows a
    Sphinx role or a ``.. math::`` directive as text, and roles became links."""
    for page, anchor in (("api/sklearn", "fedcomp.sklearn.FederatedLinearRegression"),
                         ("api/sklearn", "fedcomp.sklearn.federated_path"),
                         ("api/results", "fedcomp._frames.compare"),
                         ("api/results", "fedcomp.plotting.results_figure"),
                         ("api/experiments", "fedcomp.experiments.run_experiment"),
                         ("api/flower", "fedcomp.flower")):
        assert f'id="{anchor}"' in (site / page / "index.html").read_text(), (page, anchor)
    raw = re.compile(r":(?:py:)?[a-z]+:(?:<code>|`)|\.\. math::")
    for page in site.rglob("*.html"):
        if "report" in page.relative_to(site).parts:
            continue
        found = raw.findall(page.read_text())
        assert not found, (page, found[:3])
    runtime = (site / "api" / "runtime" / "index.html").read_text()
    assert 'href="#fedcomp.runtime.RunResult"' in runtime  # :class:`~...RunResult`, linked
    # the page titled fedcomp documents fedcomp, with the toy problem in a section of its own
    front = (site / "api" / "index.html").read_text()
    assert front.index('id="fedcomp"') < front.index('id="a-toy-problem"')


@pytest.mark.slow
def test_the_math_renders_offline_in_headless_chromium(site, headless_chromium):
    driver = headless_chromium
    driver.set_script_timeout(60)
    seen = {}
    for page in MATH_PAGES:
        driver.get((site / page).as_uri())
        seen[page] = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "const report = () => done({"
            "  sources: document.querySelectorAll('.arithmatex').length,"
            "  rendered: document.querySelectorAll('mjx-container').length,"
            "  errors: Array.from(document.querySelectorAll('mjx-merror'))"
            "    .map(e => e.getAttribute('data-mjx-error') || e.textContent),"
            "  empty: Array.from(document.querySelectorAll('mjx-container'))"
            "    .filter(c => c.getBoundingClientRect().width === 0).length,"
            "  fonts: Array.from(document.fonts).filter(f => f.family.startsWith('MJXTEX')"
            "    && f.status === 'loaded').length,"
            "  remote: performance.getEntriesByType('resource').map(r => r.name)"
            "    .filter(n => !n.startsWith('file:'))});"
            "const wait = () => window.MathJax && MathJax.startup && MathJax.startup.promise"
            "  ? MathJax.startup.promise.then(() => document.fonts.ready)"
            "      .then(report, e => done({failed: String(e)}))"
            "  : setTimeout(wait, 50);"
            "wait();")
    logs = driver.get_log("browser")
    for page, state in seen.items():
        assert "failed" not in state, (page, state)
        assert state["sources"] > 0, (page, "no math on the page")
        # every $...$ / $$...$$ became a MathJax element, none a TeX error
        assert state["rendered"] >= state["sources"], (page, state)
        assert not state["errors"], (page, state["errors"])
        # typeset AND drawn: every formula has a width, in MathJax's fonts loaded from the site
        assert state["empty"] == 0 and state["fonts"] > 0, (page, state)
        assert not state["remote"], (page, state["remote"])
    assert not [entry for entry in logs if entry["level"] == "SEVERE"], logs


def test_the_pages_examples_run_as_doctests():
    """Every ``>>>`` example of the documentation pages prints what the page shows."""
    import doctest

    pages = [p for p in (ROOT / "docs").rglob("*.md")
             if "report" not in p.parts and ">>>" in p.read_text(encoding="utf-8")]
    assert pages
    for page in pages:
        result = doctest.testfile(str(page), module_relative=False, verbose=False,
                                  optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, page


def test_the_readme_links_only_to_files_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, "the README links to the documentation pages"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to files not in the repository: {missing}"
    assert not [t for t in local if t.startswith(("shared/", "../"))], local


def test_the_shipped_report_was_made_with_this_version():
    """The report is regenerated with each release: a version bump without a new
    ``fedcomp report --out docs/report`` fails here."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    made = re.search(r"^\| fedcomp \| ([^ |]+) \|$",
                     (ROOT / "docs" / "report" / "report.md").read_text(), re.M)
    assert made is not None and made.group(1) == version, (made, version)
