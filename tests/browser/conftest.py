"""Fixtures for the browser test: the built book served on 127.0.0.1, and Debian's Chromium.

The book must be built first (`make test` does it; by hand: `make html`). Chromium comes
from Debian (`apt-get install chromium`, /usr/bin/chromium); Playwright drives it and never
downloads a browser of its own.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("POSGEO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass


@pytest.fixture(scope="session")
def built_html() -> Path:
    index = HTML / "index.html"
    if not index.is_file():
        pytest.fail(
            f"{index} does not exist: build the book first with `make html` "
            "(or run the whole suite with `make test`, which builds it before the browser test)"
        )
    return HTML


@pytest.fixture(scope="session")
def server(built_html: Path) -> Iterator[str]:
    """Serve _build/html on 127.0.0.1 at a free port; yields the base URL (ending in '/')."""
    handler = functools.partial(_QuietHandler, directory=str(built_html))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="book-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's headless Chromium driven by Playwright (never `playwright install`)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and not shutil.which(CHROMIUM):
        message = (
            f"Chromium not found at {CHROMIUM}: install Debian's package with "
            "`sudo apt-get install chromium` (or set POSGEO_CHROMIUM to a Chromium binary)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS

