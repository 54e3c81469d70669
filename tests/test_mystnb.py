"""Tests for posgeo._mystnb: the MyST-NB plugin that writes posgeo's charts into the book's HTML."""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest

from posgeo._mystnb import VEGALITE_MIME, VegaLiteRenderer, chart_html


def test_registered_as_a_myst_nb_mime_renderer():
    found = {ep.name: ep.value for ep in entry_points(group="myst_nb.mime_renderers")}
    assert found.get("posgeo-vegalite") == "posgeo._mystnb:VegaLiteRenderer"


def test_html_builders_prefer_the_spec():
    overrides = {(builder, mime): priority for builder, mime, priority in VegaLiteRenderer.mime_priority_overrides}
    assert overrides[("html", VEGALITE_MIME)] == 1  # before text/html and the static image


@pytest.mark.parametrize("content", [{"mark": "point", "description": "x"}, json.dumps({"mark": "point", "description": "x"})])
def test_handle_mime_renders_the_spec(content):
    nodes = VegaLiteRenderer.handle_mime(None, SimpleNamespace(mime_type=VEGALITE_MIME, content=content), False)
    (node,) = nodes
    assert node["format"] == "html"
    assert 'class="posgeo-chart"' in node.astext()


def test_handle_mime_leaves_other_outputs_and_inline_ones_alone():
    assert VegaLiteRenderer.handle_mime(None, SimpleNamespace(mime_type="text/html", content="<b>"), False) is None
    assert VegaLiteRenderer.handle_mime(None, SimpleNamespace(mime_type=VEGALITE_MIME, content={}), True) is None


def test_chart_html_cannot_close_its_script_early():
    spec = {"description": 'a "quoted" <chart>', "title": "</script><script>alert(1)</script>"}
    html = chart_html(spec)
    body = re.search(r'<script type="application/json">(.*?)</script>', html, re.S).group(1)
    assert "</script" not in body and json.loads(body) == spec  # the JSON survives, escaped
    assert 'aria-label="a &quot;quoted&quot; &lt;chart&gt;"' in html
