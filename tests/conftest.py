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


@pytest.fixture(scope="module")
def tiny_bert():
    """A 2-layer, width-8 BERT with random weights (the layers chapter's and posgeo._layers' tests)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=24, attn_implementation="eager")
    model = BertModel(cfg).eval()
    with torch.no_grad():  # a non-trivial LayerNorm gain, so that the test sees it
        model.embeddings.LayerNorm.weight.copy_(torch.linspace(0.5, 1.5, 8))
    return model
