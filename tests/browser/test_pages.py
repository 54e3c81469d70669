"""Every page of the built book, as a reader's browser shows it, with no network.

For each page in _toc.yml: no JavaScript error, MathJax typeset every equation (no raw TeX
left), every image in the cell outputs loaded, every chart drawn by vega-embed (and one
answering a hover with its tooltip), and no request left 127.0.0.1. A full-page screenshot of
each page goes to _build/screenshots/; each chapter's chart timings and page weight go to
_build/screenshots/charts.json.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from booktoc import toc_docnames

ROOT = Path(__file__).resolve().parents[2]
REMOVED_OUTPUT_TAGS = {"remove-output", "remove-cell"}




VEGALITE = "application/vnd.vegalite.v5+json"


def _shown_outputs(docname: str):
    path = ROOT / f"{docname}.ipynb"
    if not path.is_file():
        return
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or REMOVED_OUTPUT_TAGS & set(cell.metadata.get("tags", [])):
            continue
        yield from cell.outputs


def expected_images(docname: str) -> int:
    """Image outputs stored in the chapter notebook that the book shows as images (0 for .md
    pages); a chart's static fallback image is not one: the page draws the chart instead."""
    return sum(1 for o in _shown_outputs(docname) if VEGALITE not in o.get("data", {})
               and any(mime.startswith("image/") for mime in o.get("data", {})))


def expected_charts(docname: str) -> int:
    """Chart outputs (Vega-Lite specs) stored in the chapter notebook."""
    return sum(1 for o in _shown_outputs(docname) if VEGALITE in o.get("data", {}))


@dataclass
class PageLog:
    base: str
    blocked: list[str] = field(default_factory=list)
    js_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)


# When MathJax has typeset the page, in the page's clock (performance.now(), from navigation).
READY_CLOCK_JS = """
(() => {
  const poll = setInterval(() => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      clearInterval(poll);
      MathJax.startup.promise.then(() => { window.__posgeoMathJaxMs = performance.now(); });
    }
  }, 10);
  window.addEventListener('load', () => setTimeout(() => clearInterval(poll), 10000));
})();
"""


def open_page(browser, base: str, path: str, *, width: int = 1280, height: int = 900):
    """A fresh context whose every request outside `base` is aborted and recorded.

    Only those requests are intercepted (a regular expression the browser side matches): the
    book's own files load without a round trip through this process, as for a reader.
    """
    log = PageLog(base=base)
    context = browser.new_context(viewport={"width": width, "height": height}, service_workers="block")

    def route(route) -> None:
        log.blocked.append(route.request.url)
        route.abort()

    context.route(re.compile("^(?!" + re.escape(base) + "|data:|blob:)"), route)
    context.add_init_script(READY_CLOCK_JS)
    page = context.new_page()
    page.on("pageerror", lambda exc: log.js_errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: log.console_errors.append(f"{msg.text} ({msg.location.get('url', '')})")
        if msg.type == "error"
        else None,
    )
    page.on("response", lambda r: log.bad_responses.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(base + path, wait_until="load")
    return context, page, log


# The article text without code, outputs and typeset math: raw TeX delimiters left here mean
# MathJax (or MyST's dollarmath) did not render an equation.
PROSE_TEXT_JS = """
() => {
  const article = document.querySelector('article') || document.body;
  const copy = article.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .cell_input, .cell_output, .MathJax')
      .forEach(el => el.remove());
  return copy.textContent;
}
"""

MATH_JS = """
async () => {
  const mathNodes = Array.from(document.querySelectorAll('.math'));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  return {
    math: mathNodes.length,
    typeset: mathNodes.filter(el => el.querySelector('mjx-container')).length,
    containers: document.querySelectorAll('mjx-container').length,
    errors: document.querySelectorAll('mjx-merror').length,
    mathjax: !!(window.MathJax && MathJax.version),
    version: window.MathJax && MathJax.version,
  };
}
"""

IMAGES_JS = """
async () => {
  const imgs = Array.from(document.querySelectorAll('.cell_output img'));
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.all(imgs.map(img => img.complete ? null
      : new Promise(resolve => { img.addEventListener('load', resolve); img.addEventListener('error', resolve); })));
  return imgs.map(img => ({src: img.getAttribute('src'), w: img.naturalWidth, h: img.naturalHeight}));
}
"""

RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\$[^$\n]*[\\^_{][^$\n]*\$")


@pytest.mark.parametrize("docname", toc_docnames())
def test_page_renders_offline(browser, server: str, screenshots: Path, docname: str) -> None:
    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        title = page.title()
        math = page.evaluate(MATH_JS)
        images = page.evaluate(IMAGES_JS)
        prose = page.evaluate(PROSE_TEXT_JS)
        # Not "networkidle": Chromium does not report it on pages whose charts vega-embed draws
        # (reproduced with no request pending), so wait for what the screenshot needs.
        page.wait_for_function(
            "document.fonts.status === 'loaded' && Array.from(document.querySelectorAll('div.posgeo-chart'))"
            ".every(box => box.getAttribute('data-posgeo-state'))",
            timeout=60_000,
        )
        # the API reference's pages are very long: a full-page screenshot takes minutes on a
        # loaded machine, so they get the first screen only
        page.screenshot(path=str(screenshots / f"{docname.replace('/', '__')}.png"),
                        full_page=not docname.startswith("book/api_"), timeout=120_000)
    finally:
        context.close()

    assert "404" not in title and title.strip(), f"{docname}: unexpected page title {title!r}"
    assert not log.blocked, f"{docname}: the page asked for resources outside the local server: {log.blocked}"
    assert not log.js_errors, f"{docname}: JavaScript errors: {log.js_errors}"
    assert not log.console_errors, f"{docname}: console errors: {log.console_errors}"
    assert not log.bad_responses, f"{docname}: failed requests: {log.bad_responses}"

    if math["math"]:
        assert math["mathjax"], f"{docname}: the page has math but MathJax did not load"
        assert math["typeset"] == math["math"], (
            f"{docname}: MathJax typeset {math['typeset']} of {math['math']} equations"
        )
        assert math["errors"] == 0, f"{docname}: {math['errors']} equations render as MathJax errors"
    leftover = RAW_TEX.findall(prose)
    assert not leftover, f"{docname}: raw TeX left in the page text: {leftover[:5]}"

    broken = [img for img in images if img["w"] <= 0 or img["h"] <= 0]  # charts: test_charts_are_drawn_and_answer_a_hover
    assert not broken, f"{docname}: chart images that did not load: {broken}"
    expected = expected_images(docname)
    assert len(images) >= expected, f"{docname}: the notebook stores {expected} images, the page shows {len(images)}"
    if expected:
        assert images, f"{docname}: a chapter with image outputs shows no chart"


def test_introduction_has_typeset_equations(browser, server: str) -> None:
    """The introduction displays the Hellinger and stress formulas: they must be typeset."""
    context, page, log = open_page(browser, server, f"{_docname_ending('01_introduction')}.html")
    try:
        math = page.evaluate(MATH_JS)
        stress_box = page.locator("div.math mjx-container").first.bounding_box()
    finally:
        context.close()
    assert math["mathjax"] and str(math["version"]).startswith("3."), math
    assert math["math"] >= 2 and math["typeset"] == math["math"], math
    assert stress_box and stress_box["width"] > 100 and stress_box["height"] > 10, stress_box
    assert not log.blocked, log.blocked


def test_index_redirects_to_the_first_chapter(browser, server: str) -> None:
    context, page, log = open_page(browser, server, "")
    try:
        page.wait_for_url(re.compile(re.escape(toc_docnames()[0]) + r"\.html$"), timeout=10_000)
    finally:
        context.close()
    assert not log.blocked, log.blocked
    assert not log.js_errors, log.js_errors


REMOTE_ASSET = re.compile(
    r"<(?:script|img|iframe)[^>]*\ssrc=[\"'](?:https?:)?//[^\"']+"
    r"|<link[^>]*\srel=[\"'](?:stylesheet|preload|modulepreload|icon)[\"'][^>]*\shref=[\"'](?:https?:)?//[^\"']+"
    r"|<link[^>]*\shref=[\"'](?:https?:)?//[^\"']+[\"'][^>]*\srel=[\"'](?:stylesheet|preload|modulepreload|icon)[\"']"
    r"|url\(\s*[\"']?(?:https?:)?//[^)]+\)",
    re.I,
)


@pytest.mark.parametrize("docname", toc_docnames())
def test_built_html_names_no_remote_asset(built_html: Path, docname: str) -> None:
    """No script, stylesheet, font or image of a page is fetched from another host."""
    html = (built_html / f"{docname}.html").read_text(encoding="utf-8")
    found = REMOTE_ASSET.findall(html)
    assert not found, f"{docname}: remote assets in the built HTML: {found[:5]}"


SEARCH_SCRIPTS = re.compile(r"<script[^>]*\ssrc=[\"'][^\"']*(?:searchindex|searchtools|language_data)\.js", re.I)


@pytest.mark.parametrize("docname", toc_docnames())
def test_pages_do_not_load_the_search_index(built_html: Path, docname: str) -> None:
    """Only search.html loads the search index (_templates/layout.html): about 220 KB that
    the theme put in every page's head for a search-as-you-type box the book leaves off."""
    html = (built_html / f"{docname}.html").read_text(encoding="utf-8")
    assert not SEARCH_SCRIPTS.findall(html), f"{docname} loads the search scripts"
    assert SEARCH_SCRIPTS.findall((built_html / "search.html").read_text(encoding="utf-8"))


def test_search_finds_a_chapter(browser, server: str) -> None:
    """The search page, reached from a chapter's search box as a reader would, lists the
    chapters that mention a word."""
    context, page, log = open_page(browser, server, f"{_docname_ending('04_mds_and_stress')}.html")
    try:
        page.click("button.search-button__button >> visible=true")
        page.fill("input[name=q] >> visible=true", "Hellinger")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"/search\.html\?q=Hellinger"), timeout=10_000)
        # Sphinx lists the hits one by one; read them once it says the search has finished.
        page.wait_for_function(
            "() => /finished/i.test((document.querySelector('#search-results .search-summary') || {}).textContent || '')"
            " || /finished/i.test((document.querySelector('#search-results h2') || {}).textContent || '')",
            timeout=20_000)
        page.wait_for_selector("#search-results ul.search li", timeout=20_000)
        hits = page.eval_on_selector_all("#search-results ul.search li a", "links => links.map(a => a.getAttribute('href'))")
    finally:
        context.close()
    assert any("03_statistical_geometry" in h for h in hits), hits
    assert not log.blocked, log.blocked
    assert not log.js_errors, log.js_errors


# ------------------------------------------------------------------ appendices
def _docname_ending(suffix: str) -> str:
    matches = [d for d in toc_docnames() if d.endswith(suffix)]
    assert matches, f"_toc.yml has no page ending in {suffix!r}"
    return matches[0]


SIGNATURE_JS = """
(id) => {
  const dt = document.getElementById(id);
  if (!dt) return null;
  const box = dt.getBoundingClientRect();
  return {text: dt.textContent.replace(/\\s+/g, ' ').trim(), width: box.width, height: box.height,
          doc: dt.nextElementSibling ? dt.nextElementSibling.textContent.length : 0};
}
"""


def test_api_reference_renders_every_public_name(browser, server: str, built_html: Path) -> None:
    """The generated API reference: an entry (anchor, signature, docstring) for each public name."""
    import posgeo

    docname = _docname_ending("api_library")
    html = (built_html / f"{docname}.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="posgeo\.([A-Za-z_]\w*)"', html))
    missing = sorted(set(posgeo.__all__) - anchors)
    assert not missing, f"the built API reference has no entry for {missing}: rebuild with `make html`"
    import posgeo.audit

    audit = (built_html / f"{_docname_ending('api_audit')}.html").read_text(encoding="utf-8")
    missing = sorted(set(posgeo.audit.__all__) - set(re.findall(r'id="posgeo\.audit\.([A-Za-z_]\w*)"', audit)))
    assert not missing, f"the audit's API page has no entry for {missing}"
    assert "_modules/posgeo/" in html, "the API pages link to the highlighted source ([source])"

    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        sig = page.evaluate(SIGNATURE_JS, "posgeo.hellinger_matrix")
        cls = page.evaluate(SIGNATURE_JS, "posgeo.MDSResult")
        sections = page.locator("article section > h2").all_inner_texts()
    finally:
        context.close()
    assert sig, "posgeo.hellinger_matrix is not on the page"
    assert re.search(r"posgeo\.hellinger_matrix\(\s*mu\b.*\*\s*,\s*metric\b.*'chord'", sig["text"]), sig["text"]
    assert sig["width"] > 200 and sig["height"] > 10, sig
    assert sig["doc"] > 200, "the docstring of posgeo.hellinger_matrix is not rendered under its signature"
    assert cls and cls["text"].startswith("class posgeo.MDSResult("), cls
    assert any("MDS" in s for s in sections) and len(sections) >= 10, sections
    assert not log.js_errors and not log.blocked, (log.js_errors, log.blocked)


def test_benchmarks_page_shows_the_tables(browser, server: str) -> None:
    docname = _docname_ending("benchmarks")
    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        tables = page.locator("article table").count()
        rows = page.locator("article table tbody tr").count()
        text = page.locator("article").inner_text()
    finally:
        context.close()
    assert tables >= 5 and rows >= 20, f"{docname}: {tables} tables, {rows} rows"
    for needle in ("scikit-learn", "naive", "shared"):
        assert needle in text, f"{docname} does not mention {needle!r}"
    assert not log.js_errors and not log.blocked, (log.js_errors, log.blocked)


def test_glossary_defines_terms(browser, server: str) -> None:
    docname = _docname_ending("glossary")
    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        terms = page.locator("article dl dt").count()
        headings = page.locator("article section h2, article section h3").count()
    finally:
        context.close()
    assert max(terms, headings) >= 5, f"{docname}: {terms} defined terms, {headings} headings"
    assert not log.js_errors and not log.blocked, (log.js_errors, log.blocked)


def test_bibliography_lists_the_papers(browser, server: str) -> None:
    docname = _docname_ending("bibliography")
    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        entries = page.locator("article .citation, article [role='doc-biblioentry']").count()
        text = page.locator("article").inner_text()
    finally:
        context.close()
    assert entries >= 2, f"{docname}: {entries} bibliography entries"
    assert "Cirrincione" in text and "Zuo" in text, f"{docname} does not list P1 and P2"
    assert not log.js_errors and not log.blocked, (log.js_errors, log.blocked)


PHONE_WIDTH_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const width = document.documentElement.clientWidth;
  const clipped = el => {  // inside a box that scrolls or clips: cannot widen the page
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
    }
    return false;
  };
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > width + 2 && r.width > 0 && !clipped(el)) {
      const p = el.parentElement && el.parentElement.getBoundingClientRect();
      if (!p || p.right <= width + 2) {
        wide.push(`${el.tagName.toLowerCase()}.${String(el.className).slice(0, 40)} '${(el.textContent || '').slice(0, 40)}': ${Math.round(r.right)}px`);
      }
    }
  }
  return {scroll: document.documentElement.scrollWidth, width, wide: wide.slice(0, 5)};
}
"""


@pytest.mark.parametrize("docname", toc_docnames())
def test_page_fits_a_phone_screen(browser, server: str, docname: str) -> None:
    """At 390 px (a phone) no page is wider than the screen: wide equations, tables and code
    scroll inside their own box (_static/posgeo.css) instead of widening the page."""
    context, page, _ = open_page(browser, server, f"{docname}.html", width=390, height=844)
    try:
        fit = page.evaluate(PHONE_WIDTH_JS)  # after the load event and MathJax's typesetting
    finally:
        context.close()
    assert fit["scroll"] <= fit["width"] + 2, f"{docname}: {fit['scroll']} px wide at {fit['width']} px: {fit['wide']}"


# ------------------------------------------------------------------ charts
CHART_STATE_JS = """
() => Array.from(document.querySelectorAll('div.posgeo-chart')).map(box => {
  const view = box.querySelector('.posgeo-chart-view');
  const svg = view && view.querySelector('svg.marks');
  const canvas = view && view.querySelector('canvas.marks');
  const drawn = svg || canvas;
  const r = drawn ? drawn.getBoundingClientRect() : {width: 0, height: 0};
  const marks = svg ? svg.querySelectorAll('g.mark-rect > path, g.mark-line > path, g.mark-symbol > path, g.mark-area > path, g.mark-rule > line, g.mark-rule > path, g.mark-text > text').length
                    : (canvas ? -1 : 0);
  return {state: box.getAttribute('data-posgeo-state'), renderer: svg ? 'svg' : (canvas ? 'canvas' : null),
          width: r.width, height: r.height, box: box.clientWidth, marks,
          label: (box.getAttribute('aria-label') || '').slice(0, 60),
          firstScreen: box.hasAttribute('data-posgeo-first-screen'), drawnMs: Number(box.getAttribute('data-posgeo-drawn-ms') || 0),
          inFigure: !!box.closest('figure'), caption: (box.closest('figure') && box.closest('figure').querySelector('figcaption')) ? true : false};
})
"""

# The first SVG mark of a chart that has a tooltip and is the topmost element at its centre.
HOVER_TARGET_JS = """
(index) => {
  const box = document.querySelectorAll('div.posgeo-chart')[index];
  const svg = box && box.querySelector('.posgeo-chart-view svg.marks');
  if (!svg) return null;
  for (const el of svg.querySelectorAll('path, rect')) {
    const item = el.__data__;
    if (!item || !item.tooltip || typeof item.tooltip !== 'object') continue;
    const r = el.getBoundingClientRect();
    if (r.width <= 0 && r.height <= 0) continue;
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (x < 0 || y < 0 || x > window.innerWidth || y > window.innerHeight) continue;
    const top = document.elementFromPoint(x, y);
    if (top !== el) continue;
    return {x, y, tooltip: Object.fromEntries(Object.entries(item.tooltip).map(([k, v]) => [k, String(v)]))};
  }
  return null;
}
"""

WEIGHT_JS = """
() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  const bytes = resources.reduce((sum, r) => sum + (r.encodedBodySize || 0), nav ? nav.encodedBodySize : 0);
  return {bytes, html: nav ? nav.encodedBodySize : 0, requests: resources.length + 1,
          domReadyMs: nav ? nav.domContentLoadedEventEnd : 0, mathjaxMs: window.__posgeoMathJaxMs || 0};
}
"""

CHART_DEADLINE_S = 20  # a drawn page within this on a loaded CI machine; the measured time is recorded
TIMINGS: dict[str, dict] = {}


def _wait_for_charts(page, n: int) -> float:
    start = time.perf_counter()
    page.wait_for_function(
        f"document.querySelectorAll('div.posgeo-chart[data-posgeo-state]').length >= {n}",
        timeout=CHART_DEADLINE_S * 1000,
    )
    return time.perf_counter() - start


@pytest.mark.parametrize("docname", [d for d in toc_docnames() if expected_charts(d)])
def test_charts_are_drawn_and_answer_a_hover(browser, server: str, screenshots: Path, docname: str) -> None:
    """Every chart of the page is drawn by vega-embed (SVG with marks, or a canvas), inside a
    numbered figure with a caption, with no console error and no outside request; hovering a
    mark of the first SVG chart shows a tooltip holding that mark's values."""
    n = expected_charts(docname)
    start = time.perf_counter()
    context, page, log = open_page(browser, server, f"{docname}.html")
    try:
        waited = _wait_for_charts(page, n)
        interactive = time.perf_counter() - start
        charts = page.evaluate(CHART_STATE_JS)
        page.wait_for_function("() => window.__posgeoMathJaxMs || !(window.MathJax && MathJax.startup)", timeout=CHART_DEADLINE_S * 1000)
        weight = page.evaluate(WEIGHT_JS)
        hovered = None
        for index, chart in enumerate(charts):
            if chart["renderer"] != "svg":
                continue
            page.locator("div.posgeo-chart").nth(index).scroll_into_view_if_needed()
            target = page.evaluate(HOVER_TARGET_JS, index)
            if target is None:
                continue
            page.mouse.move(target["x"], target["y"])
            page.wait_for_selector("#vg-tooltip-element.visible", timeout=5000)
            hovered = (index, target["tooltip"], page.locator("#vg-tooltip-element").inner_text())
            break
    finally:
        context.close()
    # In the page's own clock (from the start of navigation): the first screen ready (the
    # document parsed, MathJax done, the first screen's charts drawn: what a reader waits
    # for), and every chart drawn (the others are drawn in idle time or when scrolled to).
    first = [c["drawnMs"] for c in charts if c["firstScreen"]]
    TIMINGS[docname] = {"charts": n, "first_screen_charts": len(first),
                        "dom_ready_s": round(weight["domReadyMs"] / 1000, 2), "mathjax_s": round(weight["mathjaxMs"] / 1000, 2),
                        "first_screen_ready_s": round(max([weight["domReadyMs"], weight["mathjaxMs"], *first]) / 1000, 2),
                        "all_drawn_s": round(max(c["drawnMs"] for c in charts) / 1000, 2) if charts else None,
                        "harness_s": round(interactive, 2), "charts_drawn_after_load_s": round(waited, 2),
                        "page_kb": round(weight["bytes"] / 1024), "html_kb": round(weight["html"] / 1024), "requests": weight["requests"]}
    (screenshots / "charts.json").write_text(json.dumps(TIMINGS, indent=1, sort_keys=True), encoding="utf-8")

    assert len(charts) == n, f"{docname}: the notebook stores {n} charts, the page has {len(charts)}"
    failed = [c for c in charts if c["state"] != "drawn"]
    assert not failed, f"{docname}: charts not drawn: {failed}"
    empty = [c for c in charts if c["marks"] == 0 or c["width"] < 50 or c["height"] < 50]
    assert not empty, f"{docname}: charts drawn without marks: {empty}"
    wide = [c for c in charts if c["width"] > c["box"] + 2]
    assert not wide, f"{docname}: charts wider than their box (legends or panels not re-flowed): {wide}"
    unlabelled = [c for c in charts if not c["label"] or not c["inFigure"] or not c["caption"]]
    assert not unlabelled, f"{docname}: charts without alt text or without a numbered, captioned figure: {unlabelled}"
    assert not log.blocked, f"{docname}: outside requests: {log.blocked}"
    assert not log.js_errors and not log.console_errors, (log.js_errors, log.console_errors)
    if any(c["renderer"] == "svg" for c in charts):
        assert hovered, f"{docname}: no SVG chart answered a hover with a tooltip"
        index, values, shown = hovered
        missing = [v for v in values.values() if v not in shown]
        assert not missing, f"{docname}: chart {index + 1}'s tooltip shows {shown!r}, not the mark's values {missing}"


@pytest.mark.parametrize("docname", [d for d in toc_docnames() if expected_charts(d)])
def test_charts_fit_a_phone_screen(browser, server: str, docname: str) -> None:
    """At 390 px every chart is re-flowed to fit its box (panels in one column, narrowed)."""
    context, page, _ = open_page(browser, server, f"{docname}.html", width=390, height=844)
    try:
        _wait_for_charts(page, expected_charts(docname))
        charts = page.evaluate(CHART_STATE_JS)
    finally:
        context.close()
    wide = [c for c in charts if c["width"] > c["box"] + 2]
    assert not wide, f"{docname}: charts wider than the screen's column: {wide}"
