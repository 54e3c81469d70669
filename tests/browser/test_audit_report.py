"""The example audit report of the built book, opened the way a reader opens a downloaded file.

`make html` writes _build/html/audit/sst2-minilm/report.html with `posgeo audit`: one
self-contained HTML file (inline SVG charts, no script or stylesheet from elsewhere). Opened
as file:// in Chromium with every other request aborted, it must show no JavaScript error,
request nothing, and render each of its charts; a screenshot goes to _build/screenshots/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HTML = Path(__file__).resolve().parents[2] / "_build" / "html"
REPORT = HTML / "audit" / "sst2-minilm" / "report.html"

# Attributes that make a browser fetch something; anchors (<a href>) are not fetched.
FETCHING = re.compile(
    r"<(?:script|img|iframe|embed|source|video|audio|object)\b[^>]*\s(?:src|data)\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|<link\b[^>]*\shref\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|<(?:image|use)\b[^>]*\s(?:xlink:)?href\s*=\s*[\"']?(?!data:|#)([^\"'\s>]+)"
    r"|url\(\s*[\"']?(?!data:|#)([^)\"']+)",
    re.I,
)

RENDER_JS = """
async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => img.complete ? null
      : new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  const visible = el => { const b = el.getBoundingClientRect(); return b.width > 0 && b.height > 0; };
  const svgs = Array.from(document.querySelectorAll('svg')).filter(s => !s.parentElement.closest('svg'));
  return {
    svgs: svgs.length,
    svg_empty: svgs.filter(s => !visible(s) || s.querySelectorAll('path, line, rect, circle, polyline, polygon, text').length === 0)
                   .map(s => s.outerHTML.slice(0, 120)),
    imgs: imgs.map(img => ({src: (img.getAttribute('src') || '').slice(0, 80), w: img.naturalWidth, h: img.naturalHeight})),
    title: document.title,
    text: document.body ? document.body.innerText.length : 0,
  };
}
"""


@pytest.fixture
def report() -> Path:
    """The report file; a missing one FAILS the test (the book is incomplete without it)."""
    if not REPORT.is_file():
        pytest.fail(f"run make html: the example audit report is missing ({REPORT.relative_to(HTML.parent.parent)})")
    return REPORT


def test_audit_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    fetched = [next(g for g in m if g) for m in FETCHING.findall(text)]
    assert not fetched, f"{report.name} loads other files (it must be self-contained): {fetched[:5]}"
    assert "<svg" in text, f"{report.name} has no inline SVG chart"


def test_audit_report_renders_offline(browser, report: Path, screenshots: Path) -> None:
    url = report.resolve().as_uri()
    blocked: list[str] = []
    js_errors: list[str] = []
    console_errors: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")

    def route(route) -> None:
        if route.request.url == url or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda exc: js_errors.append(str(exc)))
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    try:
        page.goto(url, wait_until="load")
        result = page.evaluate(RENDER_JS)
        page.screenshot(path=str(screenshots / "audit__sst2-minilm__report.png"), full_page=True)
    finally:
        context.close()

    assert not blocked, f"the report requested resources outside itself: {blocked[:5]}"
    assert not js_errors, f"JavaScript errors: {js_errors}"
    assert not console_errors, f"console errors: {console_errors}"
    assert result["title"].strip(), "the report has no <title>"
    assert result["text"] > 200, "the report shows almost no text"
    assert result["svgs"] >= 1, "the report renders no SVG chart"
    assert not result["svg_empty"], f"SVG charts that render empty or with no size: {result['svg_empty']}"
    broken = [img for img in result["imgs"] if img["w"] <= 0 or img["h"] <= 0]
    assert not broken, f"images that did not render: {broken}"
