"""The example audit report of the built book, opened the way a reader opens a downloaded file.

`make html` writes _build/html/audit/sst2-minilm/report.html with `posgeo audit`: one
self-contained HTML file. Its charts are Vega-Lite specs drawn in the page by vega-embed,
whose JavaScript (with Vega and Vega-Lite) is inlined once in the head; each chart is a tiny
inline script calling vegaEmbed. Opened as file:// in Chromium with every other request
aborted, it must request nothing, show no JavaScript or console error, draw every chart
(an SVG or canvas with marks) and show a tooltip on hover; a screenshot goes to
_build/screenshots/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pagelog import offline_page

HTML = Path(__file__).resolve().parents[2] / "_build" / "html"
REPORT = HTML / "audit" / "sst2-minilm" / "report.html"
CHARTS = ("heatmap", "spectrum", "offsets", "maps", "stress", "layers")

# Attributes that make a browser fetch something; anchors (<a href>) are not fetched.
FETCHING = re.compile(
    r"<(?:script|img|iframe|embed|source|video|audio|object)\b[^>]*\s(?:src|data)\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|<link\b[^>]*\shref\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|<(?:image|use)\b[^>]*\s(?:xlink:)?href\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|url\(\s*[\"']?(?!data:|#)([^)\"']+)",
    re.I,
)
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S | re.I)

# Every chart's container once vega-embed has drawn it: its SVG's marks, or its canvas's inked pixels.
CHARTS_JS = """
(names) => names.map(name => {
  const box = document.getElementById('chart-' + name);
  if (!box) return {name, found: false};
  const svg = box.querySelector('svg.marks'), canvas = box.querySelector('canvas.marks');  // not the menu's icon
  const b = (svg || canvas || box).getBoundingClientRect();
  let marks = 0;
  if (svg) marks = svg.querySelectorAll('g.role-mark path, g.role-mark line, g.role-mark text, g.role-mark rect').length;
  if (canvas) {
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (let k = 0; k < data.length; k += 4) if (data[k + 3] > 0 && (data[k] < 240 || data[k + 1] < 240 || data[k + 2] < 240)) marks++;
  }
  return {name, found: true, kind: svg ? 'svg' : canvas ? 'canvas' : null, marks, w: b.width, h: b.height,
          label: (box.querySelector('[role="graphics-document"][aria-label]') || box).getAttribute('aria-label') || ''};
})
"""

PAGE_JS = """
() => ({
  title: document.title,
  text: document.body ? document.body.innerText.length : 0,
  imgs: Array.from(document.images).map(img => ({src: (img.getAttribute('src') || '').slice(0, 80), w: img.naturalWidth, h: img.naturalHeight})),
})
"""


@pytest.fixture
def report() -> Path:
    """The report file; a missing one FAILS the test (the book is incomplete without it)."""
    if not REPORT.is_file():
        pytest.fail(f"run make html: the example audit report is missing ({REPORT.relative_to(HTML.parent.parent)})")
    return REPORT


def test_audit_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    scripts = SCRIPT.findall(text)
    assert all(not re.search(r"\bsrc\s*=", attrs) for attrs, _ in scripts), "a script loads a file"
    markup = SCRIPT.sub("", text)  # what the scripts' code says is no request; the markup is checked
    fetched = [next(g for g in m if g) for m in FETCHING.findall(markup)]
    assert not fetched, f"{report.name} loads other files (it must be self-contained): {fetched[:5]}"
    bundles = [body for _, body in scripts if "window.vegaEmbed=" in body]
    assert len(bundles) == 1, f"the Vega/vega-embed bundle must be inlined exactly once, found {len(bundles)}"
    assert "University of Washington Interactive Data Lab" in bundles[0], "the bundle's licence notice is missing"
    calls = [body for _, body in scripts if body.lstrip().startswith("vegaEmbed(")]
    assert sum("function posgeoFit" in body for _, body in scripts) == 1
    assert sorted(re.search(r'vegaEmbed\("#chart-(\w+)"', c).group(1) for c in calls) == sorted(CHARTS)
    assert all(len(c) < 100_000 for c in calls), "a chart's spec is larger than expected"


def test_audit_report_fits_a_phone(browser, report: Path, screenshots: Path) -> None:
    """On a 390 px wide screen the panel grids become one column and no chart is wider than the page."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    url = report.resolve().as_uri()
    context.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function(
            "(names) => names.every(n => document.querySelector('#chart-' + n + ' svg.marks, #chart-' + n + ' canvas.marks'))",
            arg=list(CHARTS), timeout=30_000)
        sizes = page.evaluate("""(names) => names.map(n => {
            const el = document.querySelector('#chart-' + n + ' svg.marks, #chart-' + n + ' canvas.marks');
            const b = el.getBoundingClientRect();
            return {name: n, w: b.width, h: b.height, page: document.documentElement.clientWidth};
        })""", list(CHARTS))
        widths = page.evaluate("() => [window.innerWidth, document.documentElement.scrollWidth]")
        page.screenshot(path=str(screenshots / "audit__sst2-minilm__report__phone.png"), full_page=True)
    finally:
        context.close()
    assert widths[0] <= 390 and widths[1] <= 390, f"the page is wider than the phone (layout, scroll width): {widths}"
    wide = [s for s in sizes if s["w"] > s["page"] or s["w"] <= 0]
    assert not wide, f"charts wider than a phone's page: {wide}"
    # the two heatmaps are stacked: taller than wide
    heat = next(s for s in sizes if s["name"] == "heatmap")
    assert heat["h"] > heat["w"], f"the heatmaps did not re-flow to one column: {heat}"


def test_audit_report_renders_offline(browser, report: Path, screenshots: Path) -> None:
    url = report.resolve().as_uri()
    context, page, log = offline_page(browser, url)
    blocked, js_errors, console_errors = log.blocked, log.js_errors, log.console_errors
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function(
            "(names) => names.every(n => document.querySelector('#chart-' + n + ' svg.marks, #chart-' + n + ' canvas.marks'))",
            arg=list(CHARTS), timeout=30_000)
        page.wait_for_timeout(300)  # the last charts' marks
        charts = page.evaluate(CHARTS_JS, list(CHARTS))
        result = page.evaluate(PAGE_JS)
        # hover the middle cell of the first heatmap: its tooltip names the positions and the distance
        cells = page.locator("#chart-heatmap svg.marks g.role-mark path")
        target = cells.nth(cells.count() // 2)
        target.scroll_into_view_if_needed()
        box = target.bounding_box()
        assert box is not None, "the heatmap's cells have no box"
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
        tooltip = page.inner_text("#vg-tooltip-element")
        page.screenshot(path=str(screenshots / "audit__sst2-minilm__report.png"), full_page=True)
    finally:
        context.close()

    assert not blocked, f"the report requested resources outside itself: {blocked[:5]}"
    assert not js_errors, f"JavaScript errors: {js_errors}"
    assert not console_errors, f"console errors: {console_errors}"
    assert result["title"].strip(), "the report has no <title>"
    assert result["text"] > 200, "the report shows almost no text"
    missing = [c["name"] for c in charts if not c["found"] or c["kind"] is None]
    assert not missing, f"charts not drawn: {missing}"
    empty = [c for c in charts if c["marks"] == 0 or c["w"] <= 0 or c["h"] <= 0]
    assert not empty, f"charts drawn empty or with no size: {empty}"
    unlabelled = [c["name"] for c in charts if len(c["label"]) < 20]
    assert not unlabelled, f"charts without alt text (aria-label from the description): {unlabelled}"
    assert "chord Hellinger distance" in tooltip and "position i" in tooltip, f"unexpected tooltip: {tooltip!r}"
    broken = [img for img in result["imgs"] if img["w"] <= 0 or img["h"] <= 0]
    assert not broken, f"images that did not render: {broken}"
