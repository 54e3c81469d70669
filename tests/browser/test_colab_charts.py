"""A chart as Google Colab receives it, drawn in Chromium with the CDN served from node_modules.

Colab has no Vega-Lite renderer, so on Colab ``posgeo._plotting.chart_bundle`` adds an HTML output that
loads vega, vega-lite and vega-embed from jsDelivr at the book's pinned versions. Colab itself
cannot be reached from here; this test opens that HTML in Chromium, answers the three jsDelivr
requests with the files jsDelivr serves for them (each package's ``jsdelivr`` entry, from the
book's own node_modules at the same versions) and aborts every other request. The chart must
draw, with no JavaScript or console error, and a hover must show the tooltip of the point under
the mouse. It does not need the built book, only ``npm ci``'s node_modules.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import altair as alt
import pandas as pd
import pytest
from pagelog import offline_page

ROOT = Path(__file__).resolve().parents[2]
CDN = "https://cdn.jsdelivr.net/npm/"


def _cdn_file(url: str) -> Path | None:
    """The node_modules file jsDelivr serves for ``https://cdn.jsdelivr.net/npm/NAME@VERSION?noext``."""
    if not url.startswith(CDN):
        return None
    name, _, version = url[len(CDN):].split("?")[0].partition("@")
    package = ROOT / "node_modules" / name / "package.json"
    if not package.is_file():
        return None
    meta = json.loads(package.read_text())
    if meta.get("version") != version:
        return None
    return package.parent / meta["jsdelivr"]


@pytest.fixture()
def colab_html(monkeypatch: pytest.MonkeyPatch) -> str:
    from posgeo import finish_chart
    from posgeo._plotting import chart_bundle

    if not (ROOT / "node_modules" / "vega-embed" / "package.json").is_file():
        pytest.fail("node_modules is missing: run `npm ci` (make setup does)")
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    frame = pd.DataFrame({"position": [0, 1, 2, 3], "distance": [0.0, 0.25, 0.5, 0.75]})
    chart = alt.Chart(frame).mark_point(size=400, filled=True).encode(
        x=alt.X("position:Q", title="position"), y=alt.Y("distance:Q", title="distance"),
        tooltip=["position:Q", "distance:Q"])
    return chart_bundle(finish_chart(chart, description="Four points.").to_dict())["text/html"]


def test_colab_output_draws_with_the_pinned_libraries(browser, colab_html: str, tmp_path: Path) -> None:
    page_file = tmp_path / "colab-output.html"
    page_file.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{colab_html}</body></html>")
    url = page_file.as_uri()
    context, page, log = offline_page(browser, url, serve=_cdn_file, width=900, height=700)
    try:
        page.goto(url, wait_until="load")
        page.wait_for_selector("#posgeo-chart svg.marks", timeout=30_000)
        marks = page.locator("#posgeo-chart svg.marks g.role-mark path")
        count = marks.count()
        target = marks.nth(2)
        box = target.bounding_box()
        assert box is not None, "the third point has no box"
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector("#vg-tooltip-element.visible", timeout=5_000)
        tooltip = page.inner_text("#vg-tooltip-element")
    finally:
        context.close()

    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert sorted(log.served) == sorted(f"{CDN}{name}@{lock['node_modules/' + name]['version']}?noext"
                                        for name in ("vega", "vega-lite", "vega-embed"))
    assert not log.blocked, f"requests other than the three libraries: {log.blocked[:5]}"
    assert not log.js_errors, f"JavaScript errors: {log.js_errors}"
    assert not log.console_errors, f"console errors: {log.console_errors}"
    assert count == 4, f"{count} points drawn, 4 expected"
    assert "position" in tooltip and "2" in tooltip and "0.5" in tooltip, f"tooltip reads {tooltip!r}"
