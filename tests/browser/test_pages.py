"""Every page of the built book, as a reader's browser shows it, with no network.

For each page in _toc.yml: no JavaScript error, MathJax typeset every equation (no raw TeX
left), every chart image in the cell outputs loaded, and no request left 127.0.0.1. A
full-page screenshot of each page goes to _build/screenshots/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from sphinx_external_toc.parsing import parse_toc_yaml

ROOT = Path(__file__).resolve().parents[2]
REMOVED_OUTPUT_TAGS = {"remove-output", "remove-cell"}


def toc_docnames() -> list[str]:
    site_map = parse_toc_yaml(ROOT / "_toc.yml")
    order: list[str] = []

    def walk(docname: str) -> None:
        order.append(docname)
        for subtree in site_map[docname].subtrees:
            for item in subtree.items:
                if isinstance(item, str):
                    walk(item)

    walk(site_map.root.docname)
    return order


def expected_images(docname: str) -> int:
    """Image outputs stored in the chapter notebook that the book shows (0 for .md pages)."""
    path = ROOT / f"{docname}.ipynb"
    if not path.is_file():
        return 0
    nb = nbformat.read(path, as_version=4)
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or REMOVED_OUTPUT_TAGS & set(cell.metadata.get("tags", [])):
            continue
        for output in cell.outputs:
            if any(mime.startswith("image/") for mime in output.get("data", {})):
                count += 1
    return count


@dataclass
class PageLog:
    base: str
    blocked: list[str] = field(default_factory=list)
    js_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)


def open_page(browser, base: str, path: str):
    """A fresh context whose every request outside `base` is aborted and recorded."""
    log = PageLog(base=base)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")

    def route(route) -> None:
        url = route.request.url
        if url.startswith(base) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            log.blocked.append(url)
            route.abort()

    context.route("**/*", route)
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
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(screenshots / f"{docname.replace('/', '__')}.png"), full_page=True)
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

    broken = [img for img in images if img["w"] <= 0 or img["h"] <= 0]
    assert not broken, f"{docname}: chart images that did not load: {broken}"
    expected = expected_images(docname)
    assert len(images) >= expected, f"{docname}: the notebook stores {expected} images, the page shows {len(images)}"
    if expected:
        assert images, f"{docname}: a chapter with image outputs shows no chart"


def test_introduction_has_typeset_equations(browser, server: str) -> None:
    """The introduction displays the Hellinger and stress formulas: they must be typeset."""
    root = toc_docnames()[0]
    context, page, log = open_page(browser, server, f"{root}.html")
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
