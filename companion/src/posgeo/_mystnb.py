"""MyST-NB renderer for posgeo's charts: a Vega-Lite output becomes an interactive chart in the HTML.

MyST-NB (the notebook reader of Jupyter Book 1.x) does not render the Vega-Lite MIME type
(``application/vnd.vegalite.v5+json``; MyST-NB issue 266), so a chart would fall back to its
static image. This plugin, registered under the ``myst_nb.mime_renderers`` entry point in
posgeo's ``pyproject.toml``, renders it for HTML builders as::

    <div class="posgeo-chart" role="figure" aria-label="(the chart's description)">
      <script type="application/json">(the spec)</script>
      <noscript>(the description)</noscript>
    </div>

and the page's script (``_static/posgeo-charts.js``, from the book's
``tools/posgeo_book_assets.py``, which also serves vega, vega-lite and vega-embed from the book
itself) draws it with vega-embed. Nothing is fetched from a CDN. Other builders (LaTeX) keep
MyST-NB's own choice (the static image). Used only when MyST-NB builds a book: importing
posgeo never imports this module.
"""

from __future__ import annotations

import html
import json
from typing import Any, ClassVar, Sequence

VEGALITE_MIME = "application/vnd.vegalite.v5+json"


class VegaLiteRenderer:
    """The plugin: ``mime_priority_overrides`` puts the spec first for HTML; ``handle_mime`` renders it."""

    mime_priority_overrides: ClassVar[Sequence[tuple[str, str, int | None]]] = (
        ("html", VEGALITE_MIME, 1),
        ("dirhtml", VEGALITE_MIME, 1),
        ("singlehtml", VEGALITE_MIME, 1),
        ("readthedocs", VEGALITE_MIME, 1),
    )

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> Any:
        if inline or data.mime_type != VEGALITE_MIME:
            return None
        from docutils import nodes

        spec = data.content if isinstance(data.content, dict) else json.loads(data.content)
        return [nodes.raw("", chart_html(spec), format="html")]


def chart_html(spec: dict[str, Any]) -> str:
    """The HTML block of one chart (see the module docstring); the spec is escaped for ``<script>``.

    Examples
    --------
    >>> print(chart_html({"description": "A <b> chart", "mark": "point"}))  # doctest: +NORMALIZE_WHITESPACE
    <div class="posgeo-chart" role="figure" aria-label="A &lt;b&gt; chart"><script type="application/json">{"description": "A \\u003cb> chart", "mark": "point"}</script><noscript>A &lt;b&gt; chart</noscript></div>
    """
    description = html.escape(str(spec.get("description") or "A chart"))
    text = json.dumps(spec, separators=(", ", ": ")).replace("<", "\\u003c")
    return (f'<div class="posgeo-chart" role="figure" aria-label="{description}">'
            f'<script type="application/json">{text}</script><noscript>{description}</noscript></div>')
