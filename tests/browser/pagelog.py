"""A page that may load one URL and nothing else, with its requests and errors recorded
(the browser tests of single files: the audit report, a chart as Colab receives it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace


def offline_page(browser, url: str, *, serve: Callable[[str], Path | None] | None = None,
                 width: int = 1280, height: int = 900):
    """A page in a fresh context that may load ``url`` (and data:/blob: URLs) and nothing else:
    a request that ``serve(request_url)`` maps to a local file is answered with that file
    (JavaScript), every other one aborted and recorded. Returns (context, page, log); log holds
    ``blocked``, ``served``, ``js_errors`` and ``console_errors``. Navigate with page.goto(url)."""
    log = SimpleNamespace(blocked=[], served=[], js_errors=[], console_errors=[])
    context = browser.new_context(viewport={"width": width, "height": height}, service_workers="block")

    def route(route) -> None:
        request = route.request.url
        local = serve(request) if serve is not None else None
        if request == url or request.startswith(("data:", "blob:")):
            route.continue_()
        elif local is not None and local.is_file():
            log.served.append(request)
            route.fulfill(path=str(local), content_type="application/javascript")
        else:
            log.blocked.append(request)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda exc: log.js_errors.append(str(exc)))
    page.on("console", lambda msg: log.console_errors.append(msg.text) if msg.type == "error" else None)
    return context, page, log
