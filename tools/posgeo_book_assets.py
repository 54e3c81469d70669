"""Sphinx extension: serve MathJax v3 from the built book itself, not from a CDN.

The book's ``_config.yml`` sets ``mathjax_path: mathjax/tex-mml-chtml.js``, which Sphinx
turns into ``_static/mathjax/tex-mml-chtml.js`` on every page. This extension copies the
MathJax ``es5`` bundle installed by ``npm ci`` (``node_modules/mathjax/es5``, declared in
``package.json`` / ``package-lock.json``) into ``<outdir>/_static/mathjax`` when an HTML build
finishes, so the book renders its equations with no network. MathJax is never committed.

It also switches off sphinx-thebe's page scripts when the book does not use thebe
(``launch_buttons.thebe: false``): Jupyter Book always loads sphinx-thebe, which then
declares ``const THEBE_JS_URL`` twice on every page (a JavaScript SyntaxError in the
browser) and names a CDN bundle. With thebe off, nothing on the page uses them.

Charts: posgeo's charts are stored in the notebooks as Vega-Lite specs, which posgeo's MyST-NB
plugin (``posgeo._mystnb``) writes into the page as ``<div class="posgeo-chart">`` blocks. This
extension copies vega, vega-lite and vega-embed (pinned in ``package.json``, installed by
``npm ci``) and the book's ``tools/posgeo-charts.js`` (which draws every such block, and
re-flows multi-panel charts to one column on a phone) into ``<outdir>/_static/posgeo-vega``,
and adds the four scripts to the pages that have a chart, and only to those.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

REPO_ROOT = Path(__file__).resolve().parent.parent
MATHJAX_SRC = REPO_ROOT / "node_modules" / "mathjax" / "es5"
ENTRY = "tex-mml-chtml.js"
VEGA_DIR = "posgeo-vega"
# (npm package, file in the package) in load order: vega-embed needs vega and vega-lite.
VEGA_FILES = (
    ("vega", "build/vega.min.js"),
    ("vega-lite", "build/vega-lite.min.js"),
    ("vega-embed", "build/vega-embed.min.js"),
)
CHART_SCRIPT = Path(__file__).resolve().parent / "posgeo-charts.js"


def _mathjax_version() -> str:
    pkg = MATHJAX_SRC.parent / "package.json"
    return json.loads(pkg.read_text(encoding="utf-8")).get("version", "unknown")


def _check_source(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    if not (MATHJAX_SRC / ENTRY).is_file():
        raise ExtensionError(
            f"MathJax not found at {MATHJAX_SRC / ENTRY}; run `npm ci` in {REPO_ROOT} "
            "(or `make book`) so the book can render equations offline"
        )
    for package, name in VEGA_FILES:
        if not (REPO_ROOT / "node_modules" / package / name).is_file():
            raise ExtensionError(
                f"{package} not found at node_modules/{package}/{name}; run `npm ci` in {REPO_ROOT} "
                "(or `make book`) so the book can draw its charts offline"
            )


def _thebe_enabled(app: Sphinx) -> bool:
    options = getattr(app.config, "html_theme_options", None) or {}
    return bool((options.get("launch_buttons") or {}).get("thebe"))


def _drop_unused_thebe(app: Sphinx) -> None:
    if _thebe_enabled(app):
        return
    unwanted = {"init_thebe_core", "update_thebe_context"}
    for event, listeners in app.events.listeners.items():
        app.events.listeners[event] = [
            listener
            for listener in listeners
            if not (
                getattr(listener.handler, "__module__", "") == "sphinx_thebe"
                and getattr(listener.handler, "__name__", "") in unwanted
            )
        ]


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / "mathjax"
    stamp = dest / ".posgeo-mathjax-version"
    version = _mathjax_version()
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == version and (dest / ENTRY).is_file():
        return
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(MATHJAX_SRC, dest)
    stamp.write_text(version, encoding="utf-8")


def _copy_vega(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / VEGA_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for package, name in VEGA_FILES:
        shutil.copy2(REPO_ROOT / "node_modules" / package / name, dest / Path(name).name)
    shutil.copy2(CHART_SCRIPT, dest / CHART_SCRIPT.name)


def _chart_scripts(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Load the chart script on the pages that have a chart (deferred). It loads vega, vega-lite
    and vega-embed itself (named in ``data-posgeo-libs``, next to it) when the first chart is
    drawn, so that the page is ready without waiting for them."""
    if 'class="posgeo-chart"' not in (context.get("body") or ""):
        return
    libs = " ".join(Path(name).name for _, name in VEGA_FILES)
    app.add_js_file(f"{VEGA_DIR}/{CHART_SCRIPT.name}", defer="defer", **{"data-posgeo-libs": libs})


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _check_source)
    app.connect("builder-inited", _drop_unused_thebe)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _copy_vega)
    app.connect("html-page-context", _chart_scripts)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
