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


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _check_source)
    app.connect("builder-inited", _drop_unused_thebe)
    app.connect("build-finished", _copy_mathjax)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
