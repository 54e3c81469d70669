"""Fixtures shared by the test modules (one file per module of posgeo; these are what they share)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty posgeo result cache for one test (``POSGEO_CACHE_DIR``): nothing read from or
    written to the user's or the book's cache. Returns its (not yet created) directory."""
    path = tmp_path / "cache"
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(path))
    return path


@pytest.fixture
def data_dir() -> Path:
    """The directory of the real corpora (``POSGEO_DATA_DIR``); the test is skipped when unset."""
    value = os.environ.get("POSGEO_DATA_DIR")
    if not value:
        pytest.skip("set POSGEO_DATA_DIR to the data directory (e.g. /work/shared/data) to run tests on SST-2/IMDB")
    return Path(value)
