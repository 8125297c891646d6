"""The documentation site (issue 21): ``mkdocs build --strict`` succeeds, and in headless
Chromium its pages render their math with the MathJax shipped inside the site (no CDN),
without a TeX error or a console error. The README links only to files in the repository.
Issue 45: the reproduction report is pages of the site (navigation, search, under 10 MB),
the API pages show public names only, and the front page has the install line, an example
and the headline figure.

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
                 "api/algorithms/index.html", "report/index.html",
                 "report/paper-seed000/index.html", "compressors/index.html",
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
                         ("api/results", "fedcomp.compare"),
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


#: The report's share of the site: its pages, compact PNG figures, configurations and logs.
REPORT_LIMIT = 10 * 2**20
#: The whole site (17 MB: MathJax and its fonts 4 MB, the theme 3 MB, the report 6 MB).
SITE_LIMIT = 24 * 2**20
#: An underscore name (not a dunder) as a component of a dotted path or a heading.
PRIVATE = re.compile(r"(?:^|[.\s(])_(?!_)\w")


@pytest.mark.slow
def test_the_api_pages_show_only_public_names(site):
    """No API page has a heading or anchor of a private module (``fedcomp._frames``,
    ``fedcomp.runtime._stopping``) or of an underscore name (a helper); the estimators'
    tables give every parameter its own row (a wrapped numpydoc entry once gave seven of
    them type ``Any``, no description and another parameter's default)."""
    pages = sorted((site / "api").rglob("index.html"))
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text()
        anchors = re.findall(r'id="(fedcomp[\w.]*)"', text)
        assert anchors, page
        assert not [a for a in anchors if PRIVATE.search(a)], (page, anchors)
        headings = [re.sub(r"<[^>]+>|&para;", "", h).strip()
                    for h in re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", text, re.S)]
        assert not [h for h in headings if PRIVATE.search(h)], (page, headings)
    sklearn = (site / "api" / "sklearn" / "index.html").read_text()
    rows = re.findall(r"<td>\s*<code>(\w+)</code>\s*</td>.*?</tr>", sklearn, re.S)
    assert {"client_lr", "max_iter", "random_state", "l1_ratio"} <= set(rows), rows
    assert not re.search(r"<code>,", sklearn)


def _links(page: Path) -> list[str]:
    """The hrefs of a built page's article (not its navigation)."""
    article = page.read_text().split('<article', 1)[1].split("</article>", 1)[0]
    return re.findall(r'href="([^"]+)"', article)


@pytest.mark.slow
def test_the_report_is_pages_of_the_site(site, headless_chromium):
    """The reproduction report inside the site: its first page and every paper's page in
    the navigation and the search index, with the theme's search box; every section its
    summary links to is on its page; the figures load; under 10 MB in all (it was a
    standalone 48 MB page outside the navigation), the whole site under 24 MB."""
    papers = sorted(p.stem for p in (ROOT / "docs" / "report").glob("paper-*.md"))
    assert len(papers) >= 10
    report = site / "report"
    size = sum(f.stat().st_size for f in report.rglob("*") if f.is_file())
    assert size < REPORT_LIMIT, f"the site's report is {size / 2**20:.1f} MB"
    whole = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    assert whole < SITE_LIMIT, f"the site is {whole / 2**20:.1f} MB"
    assert not list(report.rglob("*.svg")) and not list(report.rglob("results.csv"))
    search = (site / "search" / "search_index.json").read_text()
    assert all(f'"location":"report/{p}/' in search for p in papers)
    # every link of the summary to a section: the section is on the page linked
    for href in _links(report / "index.html"):
        if "#" in href and href.startswith("../paper-"):
            path, anchor = href.split("#")
            target = (report / path.removeprefix("../")) / "index.html"
            assert f'id="{anchor}"' in target.read_text(), href
    driver = headless_chromium
    driver.set_window_size(1400, 900)
    read = ("return {nav: Array.from(document.querySelectorAll('nav.md-nav--primary a'))"
            ".map(a => a.href), search: !!document.querySelector('input.md-search__input'),"
            " title: document.title, images: Array.from(document.querySelectorAll("
            "'article img')).map(i => [i.getAttribute('src'), i.complete && i.naturalWidth])}")
    for page in ("index.html", "paper-seed000/index.html"):
        driver.get((report / page).as_uri())
        state = driver.execute_script(read)
        assert state["search"] and "fedcomp" in state["title"], state
        nav = " ".join(state["nav"])
        assert all(f"/report/{p}/" in nav for p in papers), (page, state["nav"])
        assert all(width for _, width in state["images"]), state["images"]
    assert state["images"], "the paper's page shows its figures"
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.slow
def test_the_front_page_shows_install_example_and_figure(site):
    """The landing page: the install line, the example and the headline figure, which
    loads from the report's pages, and the counts rendered from the registry."""
    front = (site / "index.html").read_text()
    text = re.sub(r"<[^>]+>", "", front)  # the code blocks' highlighting spans
    assert 'pip install "fedcomp[' in text and "fedcomp.simulate(" in text
    figure = re.search(r'<img[^>]+src="(report/[^"]+\.png)"', front)
    assert figure is not None and (site / figure[1]).is_file()
    assert "registry:" not in front and re.search(r"\d+ papers", front)


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
    for page in ("report.md", "index.md"):  # the one-page report and the site's pages
        made = re.search(r"^\| fedcomp \| ([^ |]+) \|$",
                         (ROOT / "docs" / "report" / page).read_text(), re.M)
        assert made is not None and made.group(1) == version, (page, made, version)


def test_the_sites_report_pages_and_the_one_page_report_agree():
    """One ``fedcomp report`` writes both: the same verdicts, read from the same runs (a
    page left from an earlier report, or a paper page no summary links, fails here)."""
    folder = ROOT / "docs" / "report"
    verdicts = re.compile(r'<a id="([\w.]+--[\w.]+)"></a>.*?\*\*Verdict: (.*?)\.\*\*', re.S)
    one_page = dict(verdicts.findall((folder / "report.md").read_text(encoding="utf-8")))
    pages = sorted(folder.glob("paper-*.md"))
    site = {k: v for p in pages for k, v in verdicts.findall(p.read_text(encoding="utf-8"))}
    assert site == one_page and len(site) >= 18
    summary = (folder / "index.md").read_text(encoding="utf-8")
    assert {p.name for p in pages} == set(re.findall(r"\]\((paper-[\w.-]+\.md)[#)]", summary))


def test_the_report_hook_puts_each_paper_page_after_the_reports_first_page(tmp_path):
    """docs/_hooks/report.py: the paper pages the summary links, in its order, each once,
    after ``report/index.md`` wherever the navigation holds it; a navigation without it is
    one error naming the entry to add."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_hook",
                                                  ROOT / "docs" / "_hooks" / "report.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "index.md").write_text(
        "[b](paper-b.md#x) [a](paper-a.md) [b again](paper-b.md)\n")
    nav = [{"Home": "index.md"}, {"Report": [{"How": "reproduction.md"},
                                             {"Summary": "report/index.md"}]}]
    config = hook.on_config({"docs_dir": str(tmp_path), "nav": nav})
    assert config["nav"][1]["Report"][2:] == ["report/paper-b.md", "report/paper-a.md"]
    with pytest.raises(ValueError, match="nav names no report/index.md.*'- The report: "):
        hook.on_config({"docs_dir": str(tmp_path), "nav": [{"Home": "index.md"}]})
