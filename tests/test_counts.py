"""Tests of the positional counts (posgeo._counts and the modules of the counting run: _tokenizers,
_count_kernels, _sources, _count_run, _count_cli): sharded sources, sparse positional counts, Dask,
resuming."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import pickletools
import re
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from tokenizers import Tokenizer

import posgeo
from posgeo._count_cli import count_main
from posgeo._count_kernels import counting_method, half_b, source_seed
from posgeo._count_run import count_sources, positional_counts
from posgeo._counts import PositionalCounts
from posgeo._estimators import _cross_products, hybrid_hellinger_from_counts
from posgeo._marginals import position_counts
from posgeo._sources import HubDataset, _slices, plan_partitions
from posgeo._tokenizers import _tokenizer_from_json, backend_of, resolve_tokenizer, ship, tokenizer_id

N = 96  # positions counted
SIZES = {"a.parquet": 400, "b.jsonl": 200, "c.jsonl.gz": 120, "d.txt": 80}
SENTINEL = "the sentinel review of shard c, a fine film"  # only in c.jsonl.gz


def _texts(m: int) -> list[str]:
    """IMDB reviews (POSGEO_DATA_DIR) or, without a data directory, synthetic reviews."""
    data = os.environ.get("POSGEO_DATA_DIR")
    if data and (Path(data) / "imdb" / "train.parquet").is_file():
        df = pd.read_parquet(Path(data) / "imdb" / "train.parquet", columns=["text"])
        return [t.replace("\n", " ").replace("\r", " ") for t in df["text"].iloc[:m]]
    rng = np.random.default_rng(0)
    words = ("the a film movie was is good bad plot actor actors great terrible boring fun scene scenes "
             "and but of to in it this that story ending director music <br /> ! , . ?").split()
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(words, size=int(rng.integers(5, 300)), p=p)) for _ in range(m)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Shards of uneven sizes and formats: parquet (3 row groups), jsonl, jsonl.gz, txt."""
    d = tmp_path_factory.mktemp("shards")
    texts = _texts(sum(SIZES.values()) - 1)
    texts.insert(SIZES["a.parquet"] + SIZES["b.jsonl"], SENTINEL)
    chunks, k = {}, 0
    for name, size in SIZES.items():
        chunks[name] = texts[k : k + size]
        k += size
    a = chunks["a.parquet"]
    pq.write_table(pa.table({"text": a, "label": np.arange(len(a))}), d / "a.parquet", row_group_size=150)
    with open(d / "b.jsonl", "w", encoding="utf-8") as fh:
        for i, t in enumerate(chunks["b.jsonl"]):
            fh.write(json.dumps({"id": i, "text": t}) + "\n")
    with gzip.open(d / "c.jsonl.gz", "wt", encoding="utf-8") as fh:
        for t in chunks["c.jsonl.gz"]:
            fh.write(json.dumps({"text": t}) + "\n")
    with open(d / "d.txt", "w", encoding="utf-8") as fh:
        for i, t in enumerate(chunks["d.txt"]):
            fh.write(t + ("\n\n" if i % 3 == 0 else "\n"))  # blank lines are skipped
    seqs = posgeo.tokenize(texts, progress=False)
    paths = [str(d / name) for name in SIZES]
    reference = positional_counts(paths, column="text", n_positions=N, progress=False)
    return {"dir": d, "paths": paths, "texts": texts, "seqs": seqs, "reference": reference}


def _run(paths, **kw):
    opts = dict(column="text", n_positions=N, tokenizer=None, client=None, batch_size=1000, partition_rows=16384,
                workdir=None, progress=False, add_special_tokens=False, clean_html=True, drop_missing=False,
                storage_options=None)
    opts.update(kw)
    return count_sources(paths, **opts)


def assert_same(a: PositionalCounts, b: PositionalCounts) -> None:
    assert a.counts.shape == b.counts.shape
    assert (a.counts != b.counts).nnz == 0
    assert (a.counts_a != b.counts_a).nnz == 0
    assert np.array_equal(a.reach, b.reach) and np.array_equal(a.reach_a, b.reach_a)
    assert a.n_documents == b.n_documents
    assert sorted(a.sources) == sorted(b.sources)
    assert a.counts.dtype == np.int64 and a.reach.dtype == np.int64


class Faulty:
    """A tokenizers.Tokenizer-like wrapper that fails once on the batch holding SENTINEL:
    ``action="raise"`` raises, ``"kill"`` ends its process (a worker dying); the marker file
    (created atomically) makes it happen once across processes."""

    name = "bert-base-uncased"

    def __init__(self, marker: str, action: str) -> None:
        self.backend = Tokenizer.from_str(posgeo.default_tokenizer().backend_tokenizer.to_str())
        self.backend.no_truncation()
        self.backend.no_padding()
        self.marker, self.action = marker, action

    def encode_batch(self, texts, add_special_tokens=False):
        if any(SENTINEL in t for t in texts):
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                if self.action == "kill":
                    os._exit(17)
                raise RuntimeError("injected failure")
        return self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)

    def get_vocab_size(self, with_added_tokens=True):
        return self.backend.get_vocab_size(with_added_tokens=with_added_tokens)

    def to_str(self):
        return self.backend.to_str()


# ----------------------------------------------------------------------------- exactness


def test_counts_match_positional_marginals(corpus):
    c, seqs = corpus["reference"], corpus["seqs"]
    assert c.n_documents == len(corpus["texts"]) and c.vocab_size == seqs.vocab_size == 30522
    assert isinstance(c.counts, sparse.csr_array) and c.counts.shape == (N, 30522)
    assert np.array_equal(c.reach, position_counts(seqs, N))
    assert np.array_equal(c.marginals(), posgeo.positional_marginals(seqs, N, seqs.vocab_size))
    dense = np.rint(posgeo.positional_marginals(seqs, N, seqs.vocab_size) * c.reach[:, None])
    assert np.array_equal(c.counts.toarray(), dense)
    assert c.tokenizer == tokenizer_id() and c.tokenizer.startswith("bert-base-uncased@")
    assert c.sources == tuple(corpus["paths"])
    # the same ids counted from a Sequences: the same table
    assert (PositionalCounts.from_sequences(seqs, N).counts != c.counts).nnz == 0


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 12), min_size=1, max_size=30), V=st.sampled_from([1, 2, 7, 300, 32767]),
       n=st.integers(1, 10), seed=st.integers(0, 2**16), prefix_min_length=st.sampled_from([0, 1, 4, 64]))
def test_the_padded_and_the_sorted_counting_give_the_same_tables(lengths, V, n, seed, prefix_min_length):
    """The two ways of counting (one quicksort of 32-bit keys; radix sorts of a padded
    position-major uint16 table) give identical integer tables, both halves, empty documents
    and the largest vocabulary the padded table takes included; the padded table with its
    documents in their own order or longest first (rows sorted over their cells only), as the
    mean kept length is below or above ``_PREFIX_MIN_LENGTH``; and from whole documents with
    their starts (each cut to n) as from the kept ids alone."""
    import posgeo._count_kernels as counts_module
    from posgeo._count_kernels import count_ids

    rng = np.random.default_rng(seed)
    full = np.array(lengths, dtype=np.int64)
    klen = np.minimum(full, n)
    whole = rng.integers(0, V, size=int(full.sum())).astype(np.int32)  # whole documents, cut to n below
    starts = np.cumsum(full) - full
    tokens = np.concatenate([whole[a:a + k] for a, k in zip(starts, klen)] + [whole[:0]])
    in_b = rng.random(klen.size) < 0.5
    with mock.patch.object(counts_module, "_PREFIX_MIN_LENGTH", prefix_min_length):
        padded = count_ids(tokens, klen, in_b, n, V, method="padded")
        padded_cut = count_ids(whole, klen, in_b, n, V, method="padded", starts=starts)  # slices of whole documents
    by_sort = count_ids(tokens, klen, in_b, n, V, method="sort")
    sort_cut = count_ids(whole, klen, in_b, n, V, method="sort", starts=starts)
    for other in (padded, padded_cut, sort_cut):
        for a, b in zip(other[:2], by_sort[:2]):
            assert a.shape == b.shape == (n, V) and (a != b).nnz == 0
            assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
        for a, b in zip(other[2:], by_sort[2:]):
            assert np.array_equal(a, b)
    expected = np.zeros((n, V), dtype=np.int64)
    pos = np.concatenate([np.arange(k) for k in klen]) if klen.sum() else np.zeros(0, dtype=np.int64)
    np.add.at(expected, (pos.astype(np.int64), tokens.astype(np.int64)), 1)
    assert np.array_equal(padded[0].toarray(), expected)


def test_counting_picks_the_padded_table_only_where_it_applies(monkeypatch):
    """Only where numpy's quicksort is slow (AVX-512 loops on AMD Zen 4), and only for tables
    that fit: 2 V below the uint16 padding and at most three cells per kept token."""
    import posgeo._count_kernels as counts

    zen = "vendor_id\t: {}\ncpu family\t: {}\nmodel\t\t: 17\nflags\t\t: fpu sse2 avx2 {}\n"
    assert counts._is_zen4(zen.format("AuthenticAMD", 25, "avx512f avx512bw"))  # Zen 4
    assert not counts._is_zen4(zen.format("AuthenticAMD", 25, ""))  # Zen 3: no AVX-512
    assert not counts._is_zen4(zen.format("AuthenticAMD", 26, "avx512f"))  # Zen 5
    assert not counts._is_zen4(zen.format("GenuineIntel", 6, "avx512f")) and not counts._is_zen4("")
    monkeypatch.setattr(counts, "_quicksort_is_slow", lambda: True)
    calls = []
    monkeypatch.setattr(counts, "_count_ids_padded", lambda *a: calls.append(a[4]) or (counts._empty_csr(a[3], a[4]),) * 2)
    klen, in_b = np.array([4, 4]), np.array([False, True])
    counts.count_ids(np.zeros(8, dtype=np.int32), klen, in_b, 4, 30522)  # BERT's vocabulary, full documents
    counts.count_ids(np.zeros(8, dtype=np.int32), klen, in_b, 4, 50257)  # 2 V > 65534: 32-bit keys
    counts.count_ids(np.zeros(2, dtype=np.int32), np.array([1, 1]), in_b, 4, 300)  # mostly padding
    assert calls == [30522]
    assert counting_method(n_positions=4, vocab_size=30522, n_documents=2, n_tokens=8) == "padded"
    assert counting_method(n_positions=4, vocab_size=50257, n_documents=2, n_tokens=8) == "sort"
    monkeypatch.setattr(counts, "_quicksort_is_slow", lambda: False)  # a fast quicksort: always the sort
    counts.count_ids(np.zeros(8, dtype=np.int32), klen, in_b, 4, 30522)
    assert calls == [30522]
    assert counting_method(n_positions=4, vocab_size=30522, n_documents=2, n_tokens=8) == "sort"
    with pytest.raises(ValueError, match="n_tokens"):
        counting_method(n_positions=4, vocab_size=30522, n_documents=2, n_tokens=-1)
    with pytest.raises(TypeError, match="vocab_size"):
        counting_method(n_positions=4, vocab_size=3.5, n_documents=2, n_tokens=8)


def test_halves_are_a_deterministic_split(corpus):
    c = corpus["reference"]
    a, b = c.half_counts
    assert (a + b != c.counts).nnz == 0 and np.array_equal(sum(c.half_reach), c.reach)
    assert 0.4 < c.reach_a[0] / c.reach[0] < 0.6  # about half of the documents
    nf = c.noise_floor()
    assert nf.split_half.shape == (N,) and np.all(np.isfinite(nf.split_half)) and np.all(nf.bias_sq > 0)


def test_partitioning_does_not_change_counts(corpus):
    small, stats = _run(corpus["paths"], partition_rows=60, batch_size=37)
    # row groups of 150, 150, 100 rows in slices of <= 60 (3, 3, 2), each group's last slice cut
    # into a half and two quarters (+2 each), + 3 shards
    assert stats.partitions == 5 + 5 + 4 + 3
    assert_same(small, corpus["reference"])
    one, stats = _run(corpus["paths"], partition_rows=10_000)
    assert stats.partitions == 4  # the three row groups together
    assert_same(one, corpus["reference"])


@given(rows=st.integers(2, 5000), partition_rows=st.integers(1, 5000))
def test_slices_of_a_large_row_group_cover_it_and_end_small(rows, partition_rows):
    if rows <= partition_rows:
        partition_rows = max(1, rows - 1)
    bounds = _slices(rows, partition_rows)
    assert bounds[0][0] == 0 and bounds[-1][1] == rows
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, no row twice
    sizes = [hi - lo for lo, hi in bounds]
    assert min(sizes) >= 1 and max(sizes) <= partition_rows
    k = -(-rows // partition_rows)  # k equal slices; the last cut into 3 when it has >= 4 rows
    last = rows - round(rows * (k - 1) / k)
    assert len(bounds) == (k + 2 if last >= 4 else k)
    if last >= 4:
        assert sizes[-1] == sizes[-2] == last // 4 and sizes[-3] == last - 2 * (last // 4)
        assert set(sizes[:-3]) <= {last - 1, last, last + 1}  # the slices before it: equal up to rounding


def test_dask_runs_the_largest_partitions_first(corpus, tmp_path, monkeypatch):
    """One worker runs the partitions in decreasing estimated bytes to read, so the small pieces
    (the quarter slices, the small shards) run last: also when the tokenizer reaches the worker
    only after every partition was submitted (a loaded machine; here a slow tokenizer task),
    which once let the first partitions to reach the worker run first."""
    distributed = pytest.importorskip("distributed")
    import posgeo._count_run as counts_module

    def slow_identity(x):
        time.sleep(1.0)
        return x

    monkeypatch.setattr(counts_module, "_identity", slow_identity)
    key_cfg = {"column": "text", "n": N, "tokenizer": tokenizer_id(None), "drop_missing": False,
               "add_special_tokens": False, "clean_html": True}
    parts = plan_partitions(corpus["paths"], column="text", partition_rows=60, key_cfg=key_cfg, storage_options={})
    weight = {p.key: p.weight for p in parts}
    assert all(w > 0 for w in weight.values()) and len(set(weight.values())) > 3
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client, distributed.get_task_stream(client) as ts:
        c, _ = _run(corpus["paths"], client=client, partition_rows=60, workdir=tmp_path / "w")
    assert_same(c, corpus["reference"])
    started = sorted((t["startstops"][0]["start"], t["key"]) for t in ts.data if t["key"].startswith("posgeo-count-"))
    order = [weight[key[len("posgeo-count-"):].rsplit("-", 1)[0]] for _, key in started]
    assert len(order) == len(parts) and order == sorted(order, reverse=True)
    # every task is named after its role (benchmarks/bench_counts.py sorts the workers' time by it)
    kinds = [t["key"].split("-")[1] for t in ts.data]
    assert sorted(set(kinds)) == ["count", "merge", "tokenizer"] and kinds.count("merge") == len(parts) - 1


def test_dask_two_workers_same_counts(corpus, tmp_path):
    distributed = pytest.importorskip("distributed")

    (tmp_path / "broken.jsonl").write_text('{"text": "fine"}\n{"text": oops}\n')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        c, stats = _run(corpus["paths"], client=client, partition_rows=60, workdir=tmp_path / "w")
        assert stats.computed == stats.partitions == 17 and stats.resumed == 0
        assert_same(c, corpus["reference"])
        assert len(list((tmp_path / "w").glob("*.npz"))) == 17  # a given workdir is kept
        again, stats = _run(corpus["paths"], client=client, partition_rows=60, workdir=tmp_path / "w")
        assert (stats.resumed, stats.computed) == (17, 0)  # every partition read back
        assert_same(again, corpus["reference"])
        with pytest.raises(ValueError, match=r"line 2 of shard .*broken\.jsonl is not valid JSON"):
            _run(corpus["paths"] + [str(tmp_path / "broken.jsonl")], client=client, workdir=tmp_path / "w")


def test_the_tokenizer_reaches_dask_workers_as_its_json(corpus, tmp_path):
    """The scheduler unpickles every task: a pickled Rust tokenizer would be rebuilt there (76 ms
    for bert-base-uncased, measured; more for a larger JSON). It travels as its JSON, and each
    worker builds it once."""
    distributed = pytest.importorskip("distributed")
    backend = resolve_tokenizer(None).backend
    shipped = ship(backend)

    def pickled_names(obj) -> set[str]:  # the short strings of a pickle: its modules and classes
        return {arg for _, arg, _ in pickletools.genops(pickle.dumps(obj)) if isinstance(arg, str) and len(arg) < 200}

    assert "tokenizers" in pickled_names(backend)  # what the scheduler would rebuild
    assert "posgeo._tokenizers" in pickled_names(shipped) and "tokenizers" not in pickled_names(shipped)
    texts = ["Positions, geometry.", "un-tokenisable? no: ünïcödé <br /> and [CLS]", ""]
    assert [e.ids for e in backend_of(shipped).encode_batch(texts)] == [e.ids for e in backend.encode_batch(texts)]
    assert backend_of(shipped) is backend_of(ship(backend))  # built once per process
    duck = Faulty(str(tmp_path / "unused"), "none")
    assert ship(duck) is duck and backend_of(duck) is duck  # other tokenizer-like objects travel as they are

    _tokenizer_from_json.cache_clear()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        c, stats = _run(corpus["paths"], client=client, partition_rows=60)
    assert_same(c, corpus["reference"])
    info = _tokenizer_from_json.cache_info()  # the workers share this process (threads)
    assert info.currsize == 1 and info.hits + info.misses == stats.computed == stats.partitions


@pytest.mark.slow
def test_dask_worker_killed_mid_run(corpus, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    marker = tmp_path / "killed"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        c, stats = _run(corpus["paths"], client=client, tokenizer=Faulty(str(marker), "kill"),
                        partition_rows=100, workdir=tmp_path / "w")
    assert marker.exists()  # a worker died while counting shard c
    assert_same(c, corpus["reference"])
    assert stats.computed + stats.resumed == stats.partitions


# ----------------------------------------------------------------------------- resuming


def _snapshot(workdir: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in workdir.glob("*.npz")}


def test_interrupted_run_resumes_counting_only_missing_partitions(corpus, tmp_path):
    wd = tmp_path / "w"
    faulty = Faulty(str(tmp_path / "raised"), "raise")
    with pytest.raises(RuntimeError, match="injected"):
        _run(corpus["paths"], tokenizer=faulty, workdir=wd)
    before = _snapshot(wd)
    assert len(before) == 2  # the partitions before shard c: the parquet shard (its 3 row groups) and b.jsonl
    c, stats = _run(corpus["paths"], tokenizer=faulty, workdir=wd)
    assert (stats.resumed, stats.computed) == (len(before), stats.partitions - len(before))
    after = _snapshot(wd)
    assert all(after[k] == v for k, v in before.items())  # finished partitions untouched
    assert len(after) == stats.partitions
    assert_same(c, corpus["reference"])
    assert c.tokenizer == corpus["reference"].tokenizer
    again, stats = _run(corpus["paths"], workdir=wd)  # everything read back
    assert (stats.resumed, stats.computed) == (stats.partitions, 0)
    assert_same(again, corpus["reference"])


@pytest.mark.slow
def test_killed_process_resumes(corpus, tmp_path):
    wd = tmp_path / "w"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_counts import Faulty, N
        from posgeo._count_run import positional_counts
        positional_counts({corpus["paths"]!r}, column="text", n_positions=N, progress=False,
                          tokenizer=Faulty({str(tmp_path / "killed")!r}, "kill"), workdir={str(wd)!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr[-2000:]
    done = len(list(wd.glob("*.npz")))
    assert done == 2  # partitions finished before the kill: the parquet shard and b.jsonl
    assert not list(wd.glob(".*.tmp"))  # no half-written file left behind
    c, stats = _run(corpus["paths"], workdir=wd)
    assert (stats.resumed, stats.computed) == (done, stats.partitions - done)
    assert_same(c, corpus["reference"])


def test_corrupt_partial_is_recounted(corpus, tmp_path):
    wd = tmp_path / "w"
    _run(corpus["paths"][1:2], workdir=wd)
    (f,) = wd.glob("*.npz")
    f.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="unreadable partial"):
        c, stats = _run(corpus["paths"][1:2], workdir=wd)
    assert stats.computed == 1
    assert c.n_documents == SIZES["b.jsonl"]


# ----------------------------------------------------------------------------- files, merging


def test_save_load_round_trip(corpus, tmp_path):
    c = corpus["reference"]
    path = c.save(tmp_path / "counts.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["counts.npz"]  # one file, nothing left over
    with np.load(path, allow_pickle=False) as z:  # no pickle inside
        assert "counts_data" in z.files
    back = PositionalCounts.load(path)
    assert_same(back, c)
    assert (back.tokenizer, back.sources, back.options) == (c.tokenizer, c.sources, c.options)
    (tmp_path / "bad.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a posgeo counts file"):
        PositionalCounts.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ValueError, match="not a posgeo counts file"):
        PositionalCounts.load(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError):
        PositionalCounts.load(tmp_path / "missing.npz")


def test_merge_equals_counting_the_union(corpus):
    p = corpus["paths"]
    first = positional_counts(p[:2], column="text", n_positions=N, progress=False)
    second = positional_counts(p[2:], column="text", n_positions=N, progress=False)
    assert_same(first + second, corpus["reference"])
    assert_same(sum([first, second]), corpus["reference"])
    with pytest.raises(ValueError, match="count it twice"):
        first + first
    with pytest.raises(ValueError, match="shape"):
        first + second.truncate(N - 1)
    other = PositionalCounts(second.counts, second.reach, second.counts_a, second.reach_a, "x@0000", second.sources,
                             second.n_documents, second.options)
    with pytest.raises(ValueError, match="different tokenizers"):
        first + other
    raw = positional_counts(p[2:], column="text", n_positions=N, progress=False, clean_html=False)
    with pytest.raises(ValueError, match="different options"):
        first + raw


# ----------------------------------------------------------------------------- geometry


def test_sparse_geometry_matches_dense(corpus, monkeypatch):
    c = corpus["reference"]
    mu = c.marginals()
    for metric in ("chord", "fisher-rao"):
        assert np.allclose(c.hellinger_matrix(metric=metric), posgeo.hellinger_matrix(mu, metric=metric),
                           rtol=0, atol=1e-10)
    S = c.sqrt_marginals()
    assert sparse.issparse(S) and np.allclose(S.toarray(), np.sqrt(mu), rtol=0, atol=1e-15)
    exact = (S @ S.T).toarray()
    Sa, Sb = (sparse.csr_array(np.sqrt(h.toarray() / np.maximum(r, 1)[:, None])) for h, r in zip(c.half_counts, c.half_reach))
    cross = (Sa @ Sb.T).toarray()
    for frac in (0.0, 0.25, 2.0):  # all columns dense, mixed, all sparse
        assert np.allclose(_cross_products(S, None, dense_fraction=frac, block_bytes=2**16), exact, atol=1e-13)
        assert np.allclose(_cross_products(Sa, Sb, dense_fraction=frac, block_bytes=2**16), cross, atol=1e-13)
    monkeypatch.setattr("posgeo._estimators._TILE", 7)  # the in-place passes, tile by tile
    sym = _cross_products(S, None, dense_fraction=0.25, block_bytes=2**16)
    assert np.array_equal(sym, sym.T) and np.allclose(sym, exact, atol=1e-13)
    assert np.allclose(c.hellinger_matrix(), posgeo.hellinger_matrix(mu), rtol=0, atol=1e-10)
    M = c.matched_hellinger_matrix()
    assert M.shape == (N, N) and np.all(np.isfinite(M)) and np.allclose(M, M.T)
    F = c.first_order_hellinger_matrix()
    assert np.all(F <= c.hellinger_matrix() + 1e-12)
    with pytest.raises(ValueError, match="GiB"):
        c.marginals(max_bytes=1000)


def test_geometry_equals_the_in_memory_corpus_geometry(corpus):
    """The counts' geometry is posgeo.corpus_geometry's of the same texts, tokenised the same
    way (posgeo.tokenize): plug-in, hybrid (the corrected geometry), reach, flags, noise share."""
    c, seqs = corpus["reference"], corpus["seqs"]
    g = c.geometry()
    ref = posgeo.corpus_geometry(seqs, N, cache=False)
    assert isinstance(g, posgeo.CorpusGeometry) and g.metric == "chord" and g.name == "counts"
    for field in ("marginals", "distances", "hybrid"):
        np.testing.assert_allclose(getattr(g, field), getattr(ref, field), rtol=0, atol=1e-10, err_msg=field)
    np.testing.assert_array_equal(g.counts, ref.counts)
    np.testing.assert_array_equal(g.flagged, ref.flagged)
    assert posgeo.noise_share(g) == pytest.approx(posgeo.noise_share(ref), rel=0, abs=1e-10)
    hybrid = posgeo.hybrid_hellinger_matrix(seqs, N, seqs.vocab_size)
    np.testing.assert_allclose(c.hybrid(), hybrid, rtol=0, atol=1e-10)
    dense = np.rint(posgeo.positional_marginals(seqs, N, seqs.vocab_size) * c.reach[:, None])
    np.testing.assert_allclose(c.hybrid(squared=True), hybrid_hellinger_from_counts(dense, c.reach, squared=True),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(c.hellinger_matrix(), ref.distances, rtol=0, atol=1e-10)  # the sparse plug-in
    # the split-half fields: the same statistics on the stored split (another draw than corpus_geometry's)
    assert g.split_half.shape == g.bias_sq.shape == (N,) and np.all(np.isfinite(g.split_half))
    assert np.all(g.first_order <= g.distances + 1e-12) and g.matched.shape == (N, N)
    with pytest.raises(ValueError, match="GiB"):
        c.geometry(max_bytes=1000)
    with pytest.raises(ValueError, match="GiB"):
        c.hybrid(max_bytes=1000)


def test_geometry_of_positions_reached_by_one_document_is_nan_as_corpus_geometry():
    seqs = posgeo.Sequences.from_list([[0, 1, 2, 3], [1, 2, 0], [2, 0, 1], [3, 3]], vocab_size=4)
    g = PositionalCounts.from_sequences(seqs, 4).geometry()
    ref = posgeo.corpus_geometry(seqs, 4, cache=False)
    np.testing.assert_allclose(g.hybrid, ref.hybrid, rtol=0, atol=1e-12)  # NaN in the same places
    assert np.isnan(g.hybrid[3, 0]) and not np.isnan(g.hybrid[2, 0])


def test_split_half_estimators_are_the_dense_ones_on_the_stored_split(corpus):
    """noise_floor, matched and first-order from the counts are the dense formulas of
    posgeo._marginals applied to the one stored split (half A, half B) of the documents."""
    seqs = corpus["seqs"]
    V = seqs.vocab_size
    c = PositionalCounts.from_sequences(seqs, N, source="s")
    in_b = half_b(source_seed("s"), np.arange(len(seqs)))
    ra, rb = (np.sqrt(posgeo.positional_marginals(seqs.subset(np.flatnonzero(m)), N, V)) for m in (~in_b, in_b))
    split = np.sqrt(np.clip(1.0 - (ra * rb).sum(axis=1), 0.0, None))
    nf = c.noise_floor()
    np.testing.assert_allclose(nf.split_half, split, rtol=0, atol=1e-12)
    na, nb = c.half_reach
    np.testing.assert_allclose(nf.bias_sq, split**2 * na * nb / c.reach.astype(float) ** 2, rtol=1e-12)
    h2 = 1.0 - ra @ rb.T
    h2 = 0.5 * (h2 + h2.T)
    d = np.diag(h2).copy()
    matched = np.sqrt(np.clip(h2 - 0.5 * (d[:, None] + d[None, :]), 0.0, None))
    np.fill_diagonal(matched, 0.0)
    np.testing.assert_allclose(c.matched_hellinger_matrix(), matched, rtol=0, atol=1e-10)
    H = posgeo.hellinger_matrix(c.marginals())
    first = np.sqrt(np.clip(H**2 - nf.bias_sq[:, None] - nf.bias_sq[None, :], 0.0, None))
    np.fill_diagonal(first, 0.0)
    np.testing.assert_allclose(c.first_order_hellinger_matrix(), first, rtol=0, atol=1e-10)


def test_matches_tokenizer(corpus):
    c = corpus["reference"]
    assert c.matches_tokenizer(None) and c.matches_tokenizer(posgeo.default_tokenizer())
    assert c.matches_tokenizer(c.tokenizer) and c.matches_tokenizer("renamed@" + c.tokenizer.rsplit("@", 1)[1])
    assert not c.matches_tokenizer("other@0123456789abcdef")
    other = Tokenizer.from_str(posgeo.default_tokenizer().backend_tokenizer.to_str())
    other.add_tokens(["posgeo-new-token"])
    assert not c.matches_tokenizer(other)


def test_identical_rows_have_zero_distance():
    c = PositionalCounts.from_sequences([[0, 0, 1], [1, 1, 1], [0, 0, 1]], 3, vocab_size=2)
    H = c.hellinger_matrix()
    assert H[0, 1] == 0.0 and H[0, 2] > 0  # positions 0 and 1 both have (2/3, 1/3)


def test_from_sequences_synthetic_with_ragged_lengths():
    corpus = posgeo.synthetic_corpus(n_sequences=300, lengths=np.random.default_rng(0).integers(5, 33, 300))
    c = PositionalCounts.from_sequences(corpus, 20)
    assert np.array_equal(c.marginals(), posgeo.positional_marginals(corpus, 20, corpus.vocab_size))
    assert np.array_equal(c.reach, position_counts(corpus, 20))
    with pytest.raises(ValueError, match="reached by no document"):
        PositionalCounts.from_sequences(corpus, 40).marginals()
    assert PositionalCounts.from_sequences(corpus, 40).truncate(20).counts.shape == (20, corpus.vocab_size)


# ----------------------------------------------------------------------------- bad input


def test_missing_column_names_the_shard_and_columns(corpus):
    with pytest.raises(ValueError, match=r"a\.parquet has no column 'body'; its columns are \['text', 'label'\]"):
        positional_counts(corpus["paths"][0], column="body", n_positions=N, progress=False)
    with pytest.raises(ValueError, match=r"b\.jsonl has no column 'body' \(line 1 has keys \['id', 'text'\]\)"):
        positional_counts(corpus["paths"][1], column="body", n_positions=N, progress=False)
    with pytest.raises(TypeError, match="holds int64 values, not text"):
        positional_counts(corpus["paths"][0], column="label", n_positions=N, progress=False)


def test_empty_shards_are_skipped_with_a_warning(corpus, tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.txt").write_text("\n \n")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    extra = [str(tmp_path / n) for n in ("empty.jsonl", "blank.txt", "empty.parquet")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = positional_counts(corpus["paths"][1:2] + extra, column="text", n_positions=N, progress=False)
    messages = " | ".join(str(w.message) for w in caught)
    assert "empty.jsonl (0 bytes)" in messages and "empty.parquet (0 rows)" in messages
    assert "blank.txt holds no document" in messages
    assert c.n_documents == SIZES["b.jsonl"]
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="no documents to count"):
        positional_counts(extra[::2], column="text", n_positions=N, progress=False)


def test_unreadable_shards_are_named(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet at all PAR1")
    with pytest.raises(ValueError, match=r"cannot read shard .*bad\.parquet"):
        positional_counts(tmp_path / "bad.parquet", column="text", n_positions=4, progress=False)
    good = gzip.compress(b"".join(json.dumps({"text": f"review {i}"}).encode() + b"\n" for i in range(500)))
    (tmp_path / "cut.jsonl.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"cannot read shard .*cut\.jsonl\.gz"):
        positional_counts(tmp_path / "cut.jsonl.gz", column="text", n_positions=1, progress=False)
    (tmp_path / "broken.jsonl").write_text('{"text": "fine"}\n{"text": oops}\n')
    with pytest.raises(ValueError, match=r"line 2 of shard .*broken\.jsonl is not valid JSON"):
        positional_counts(tmp_path / "broken.jsonl", column="text", n_positions=1, progress=False)


def test_a_shard_that_is_not_utf8_is_named_with_the_fix(tmp_path):
    """A Latin-1 text or JSON-lines shard is "not UTF-8" (with an iconv command), not "truncated or corrupt"."""
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "latin1.jsonl").write_bytes('{"text": "caf\xe9"}\n'.encode("latin-1"))
    for name in ("latin1.txt", "latin1.jsonl"):
        with pytest.raises(ValueError, match=rf"^shard .*{name} is not UTF-8 text .*re-encode it, e.g. `iconv -f latin1 "
                                             rf"-t utf-8 .*{name} > latin1\.utf8\.txt`") as info:
            positional_counts(tmp_path / name, column="text", n_positions=1, progress=False)
        assert "corrupt" not in str(info.value) and "\n" not in str(info.value)


def test_missing_texts_refused_or_dropped(tmp_path):
    (tmp_path / "n.jsonl").write_text('{"text": "good film"}\n{"text": null}\n{"text": "bad"}\n')
    with pytest.raises(ValueError, match=r"n\.jsonl has 1 missing \(null\) text\(s\) \(rows 1\); pass drop_missing=True"):
        positional_counts(tmp_path / "n.jsonl", column="text", n_positions=1, progress=False)
    c = positional_counts(tmp_path / "n.jsonl", column="text", n_positions=1, progress=False, drop_missing=True)
    assert c.n_documents == 2


def test_bad_sources_and_arguments(corpus, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        positional_counts(tmp_path / "nope.parquet", column="text", n_positions=4, progress=False)
    with pytest.raises(FileNotFoundError, match="no shard matches"):
        positional_counts(str(tmp_path / "*.parquet"), column="text", n_positions=4, progress=False)
    (tmp_path / "x.csv").write_text("text\nhello\n")
    with pytest.raises(ValueError, match="cannot tell the format"):
        positional_counts(tmp_path / "x.csv", column="text", n_positions=4, progress=False)
    with pytest.raises(ValueError, match="listed twice"):
        positional_counts([corpus["paths"][1], str(corpus["dir"] / "*.jsonl")], column="text", n_positions=4,
                          progress=False)
    with pytest.raises(ValueError, match="n_positions must be an int >= 1"):
        positional_counts(corpus["paths"][1], column="text", n_positions=0, progress=False)
    with pytest.raises(TypeError, match="column must be"):
        positional_counts(corpus["paths"][1], column=None, n_positions=4, progress=False)
    with pytest.raises(TypeError, match="tokenizer must be"):
        positional_counts(corpus["paths"][1], column="text", n_positions=4, tokenizer=3, progress=False)


def test_glob_and_directory_sources(corpus):
    d = corpus["dir"]
    by_glob = positional_counts(str(d / "*.jsonl*"), column="text", n_positions=N, progress=False)
    assert [Path(s).name for s in by_glob.sources] == ["b.jsonl", "c.jsonl.gz"]
    by_dir = positional_counts(d, column="text", n_positions=N, progress=False)
    assert_same(by_dir, corpus["reference"])


def test_a_non_local_filesystem_through_fsspec(corpus, tmp_path):
    """The shards read through fsspec from another filesystem than the local one (``memory://``,
    standing in for ``s3://``, ``gs://`` and ``hf://``, which cannot be reached here): by glob, in
    this process and on two (threaded) Dask workers, resumed from a local work directory; the
    same table as the local shards (the half split differs: it hashes the source names)."""
    import fsspec

    distributed = pytest.importorskip("distributed")
    fs = fsspec.filesystem("memory")
    root = f"posgeo-test-{os.getpid()}"
    try:
        for path in corpus["paths"]:
            fs.pipe(f"{root}/{Path(path).name}", Path(path).read_bytes())
        remote, stats = _run(f"memory://{root}/*", partition_rows=60)
        assert remote.sources == tuple(f"memory:///{root}/{Path(p).name}" for p in corpus["paths"])
        assert stats.partitions == 17 and remote.n_documents == corpus["reference"].n_documents
        assert (remote.counts != corpus["reference"].counts).nnz == 0
        assert np.array_equal(remote.reach, corpus["reference"].reach)
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
                distributed.Client(cluster, set_as_default=False) as client:
            on_workers, stats = _run(f"memory://{root}/*", client=client, partition_rows=60, workdir=tmp_path / "w")
            assert_same(on_workers, remote)
            again, stats = _run(f"memory://{root}/*", client=client, partition_rows=60, workdir=tmp_path / "w")
            assert (stats.resumed, stats.computed) == (17, 0)
            assert_same(again, remote)
        fs.pipe(f"{root}/b.jsonl", b'{"text": "changed"}\n')  # new content: that shard is counted again
        changed, stats = _run(f"memory://{root}/*", partition_rows=60, workdir=tmp_path / "w")
        assert stats.computed == 1 and changed.n_documents == remote.n_documents - SIZES["b.jsonl"] + 1
        with pytest.raises(FileNotFoundError, match="no shard matches 'memory://.*csv'"):
            _run(f"memory://{root}/*.csv")
    finally:
        fs.rm(root, recursive=True)


def test_remote_sources_that_cannot_be_read_are_named(monkeypatch):
    """A protocol whose fsspec package is missing, and a listing that fails (network,
    credentials): the error names the source and the fix."""
    import importlib.util

    import posgeo._sources as counts_module

    if importlib.util.find_spec("s3fs") is None:
        with pytest.raises(ImportError, match=r"source 's3://bucket/shards/\*\.parquet': .*s3fs"):
            positional_counts("s3://bucket/shards/*.parquet", column="text", n_positions=N, progress=False)

    class Unreachable:
        protocol = "https"

        def glob(self, path):
            raise RuntimeError("Cannot connect to host example.org:443")

    monkeypatch.setattr(counts_module, "_url_to_fs", lambda spec, opts: (Unreachable(), spec))
    with pytest.raises(OSError, match=r"source 'https://example.org/\*\.jsonl' could not be listed "
                                      r"\(RuntimeError: Cannot connect.*storage_options"):
        positional_counts("https://example.org/*.jsonl", column="text", n_positions=N, progress=False)


def test_tokenizer_that_cannot_load_offline(corpus, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="cannot load tokenizer 'no-such-org/no-such-model' offline") as info:
        positional_counts(corpus["paths"][1], column="text", n_positions=4, tokenizer="no-such-org/no-such-model",
                          progress=False)
    assert "\n" not in str(info.value)


def test_scheduler_that_does_not_answer(corpus, monkeypatch):
    monkeypatch.setattr("posgeo._count_run._CONNECT_TIMEOUT_S", 1.0)  # 5 s by default
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"cannot connect to the Dask scheduler at 'tcp://127\.0\.0\.1:9' within 1 s"):
        positional_counts(corpus["paths"][1], column="text", n_positions=4, client="tcp://127.0.0.1:9", progress=False)
    assert time.perf_counter() - t0 < 10


# ----------------------------------------------------------------------------- command line


def test_count_main(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("posgeo._count_run._CONNECT_TIMEOUT_S", 1.0)
    out = tmp_path / "counts.npz"
    assert count_main([*corpus["paths"], "--column", "text", "--positions", str(N), "--out", str(out),
                       "--workers", "1", "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert_same(PositionalCounts.load(out), corpus["reference"])
    assert not (tmp_path / "counts.npz.parts").exists()  # partial counts removed after success
    assert count_main([corpus["paths"][0], "--column", "body", "--positions", "4", "--out", str(out),
                       "--workers", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posgeo count: error: shard ") and err.count("\n") == 1
    assert count_main([corpus["paths"][1], "--column", "text", "--positions", "4", "--out", str(out),
                       "--scheduler", "tcp://127.0.0.1:9", "--no-progress"]) == 2
    assert "cannot connect to the Dask scheduler" in capsys.readouterr().err
    assert count_main([corpus["paths"][1], "--column", "text", "--positions", "4",
                       "--out", str(tmp_path / "no" / "c.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert count_main([corpus["paths"][1], "--column", "text", "--positions", "4", "--out", str(out),
                       "--workers", "0"]) == 2
    assert "--workers must be >= 1, got 0" in capsys.readouterr().err


class _ClusterStarted(Exception):
    pass


@pytest.mark.parametrize("argv, expected", [([], "cores"), (["--workers", "3"], 3), (["--workers", "1"], None)])
def test_count_main_workers_default_to_one_per_core(corpus, tmp_path, monkeypatch, capsys, argv, expected):
    """By default `posgeo count` starts a LocalCluster of one worker per available core;
    --workers 1 counts in this process (no cluster)."""
    distributed = pytest.importorskip("distributed")
    started = []

    def fake_cluster(*, n_workers, threads_per_worker, **kw):
        started.append((n_workers, threads_per_worker))
        raise _ClusterStarted

    monkeypatch.setattr(distributed, "LocalCluster", fake_cluster)
    monkeypatch.setattr("posgeo._count_cli.os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    args = [corpus["paths"][1], "--column", "text", "--positions", "4", "--out", str(tmp_path / "c.npz"), "--no-progress"]
    if expected is None:
        assert count_main(args + argv) == 0
        assert started == []
    else:
        with pytest.raises(_ClusterStarted):
            count_main(args + argv)
        assert started == [(4 if expected == "cores" else expected, 1)]


@pytest.mark.slow
def test_count_main_with_local_workers(corpus, tmp_path, capsys):
    pytest.importorskip("distributed")
    out = tmp_path / "counts.npz"
    assert count_main([*corpus["paths"], "--column", "text", "--positions", str(N), "--out", str(out),
                       "--workers", "2", "--partition-rows", "100", "--no-progress"]) == 0
    assert_same(PositionalCounts.load(out), corpus["reference"])


# ----------------------------------------------------------------------------- Hugging Face datasets, streamed


@pytest.fixture(scope="module")
def hub_folder(corpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset folder as the Hub lays one out (data/train-0000k-of-00003.parquet, a test
    split), opened by datasets.load_dataset(folder, streaming=True) without the network."""
    d = tmp_path_factory.mktemp("hub") / "imdb-like"
    (d / "data").mkdir(parents=True)
    texts = corpus["texts"][:500]
    for k, (lo, hi) in enumerate(((0, 250), (250, 400), (400, 500))):
        pq.write_table(pa.table({"text": texts[lo:hi], "label": np.arange(hi - lo)}),
                       d / "data" / f"train-{k:05d}-of-00003.parquet", row_group_size=100)
    pq.write_table(pa.table({"text": texts[:10], "label": np.arange(10)}), d / "data" / "test-00000-of-00001.parquet")
    return d


def test_hub_dataset_source_names():
    assert HubDataset.parse("hub:org/name") == HubDataset("org/name", split="train")
    assert HubDataset.parse("hub:org/name@v1.0:en:validation") == HubDataset("org/name", split="validation", config="en",
                                                                           revision="v1.0")
    for bad in ("org/name", "hub:", "hub:a:b:c:d", "hub:a::train"):
        with pytest.raises(ValueError, match="Hub dataset source"):
            HubDataset.parse(bad)
    with pytest.raises(ValueError, match="split must be a non-empty str"):
        HubDataset("org/name", split="")


def test_hub_dataset_streamed_counts_equal_its_files(hub_folder, tmp_path):
    """The streamed dataset's counts are those of its three train files read as shards; its
    halves come from its own names (deterministic); a second run reads every shard back."""
    files = sorted(str(p) for p in (hub_folder / "data").glob("train-*.parquet"))
    as_files = positional_counts(files, column="text", n_positions=N, progress=False)
    streamed, stats = _run(HubDataset(str(hub_folder)), workdir=tmp_path / "w")  # one source
    assert stats.partitions == stats.computed == 3  # a shard of the stream per data file
    assert (streamed.counts != as_files.counts).nnz == 0 and np.array_equal(streamed.reach, as_files.reach)
    assert streamed.n_documents == 500 and streamed.sources == (f"hub:{hub_folder}:train",)
    assert 0.35 < streamed.reach_a[0] / streamed.reach[0] < 0.65
    import posgeo._sources as sources

    assert not sources._HUB_STREAMS  # forgotten after the run: the next run opens the dataset afresh
    again, stats = _run(f"hub:{hub_folder}:train", workdir=tmp_path / "w")  # one source, as a string
    assert (stats.resumed, stats.computed) == (3, 0)
    assert_same(again, streamed)


def test_hub_dataset_on_dask_workers(hub_folder, tmp_path):
    distributed = pytest.importorskip("distributed")

    reference, _ = _run([HubDataset(str(hub_folder))])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        c, stats = _run([HubDataset(str(hub_folder))], client=client, workdir=tmp_path / "w")
    assert stats.computed == 3
    assert_same(c, reference)


def test_hub_dataset_bad_input(hub_folder):
    with pytest.raises(ValueError, match=r"has no column 'body'; its columns are \['text', 'label'\]"):
        _run([HubDataset(str(hub_folder))], column="body")
    with pytest.raises(ValueError, match=r"cannot open the Hugging Face dataset .*validation.* in streaming mode"):
        _run([HubDataset(str(hub_folder), split="validation")])
    with pytest.raises(TypeError, match="or a HubDataset"):
        _run([3])


# ----------------------------------------------------------------------------- long documents: a bounded prefix


def _byte_level_bpe() -> Tokenizer:
    """A byte-level BPE (GPT-2's pre-tokeniser: a space belongs to the next word) trained here,
    offline, with <s> ... </s> as its special tokens."""
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" ".join(_WORDS)] * 50 + _texts(200), trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    return tok


_WORDS = ["the", "film", "Caf\u00e9", "na\u00efve", "don't", "<br />", "<BR>", "<br", "/>", "<br  />", "!", "?!", "...",
          "123", "4.5", "\u4e2d\u6587", "\U0001F600", "x" * 120, "a\u0301", "\u00a0", "\t", "\n", "", " ", "re-do",
          "\u3000", "e.g.", "--", "(", ")"]
_TOKENIZERS = {"wordpiece": lambda: Tokenizer.from_str(posgeo.default_tokenizer().backend_tokenizer.to_str()),
               "byte-level-bpe": _byte_level_bpe}


@pytest.fixture(scope="module", params=sorted(_TOKENIZERS))
def any_tokenizer(request) -> Tokenizer:
    tok = _TOKENIZERS[request.param]()
    tok.no_truncation()
    tok.no_padding()
    return tok


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(_WORDS), max_size=60), seps=st.lists(st.sampled_from([" ", "  ", " \t", "\n "]),
                                                                              min_size=60, max_size=60),
       n=st.integers(1, 8), chars=st.integers(1, 40), specials=st.booleans(), clean=st.booleans())
def test_the_first_ids_of_a_prefix_are_those_of_the_whole_text(any_tokenizer, words, seps, n, chars, specials, clean):
    """The first n ids from a prefix of whole words (tiny prefixes here: 1-40 characters,
    doubled while too short) are those of the whole text, for WordPiece and byte-level BPE,
    with and without special tokens and the cleaning of <br /> tags."""
    from posgeo._tokenizers import first_token_ids

    text = "".join(w + s for w, s in zip(words, seps)).strip(" ") if words else ""
    texts = [text, "short", text[::-1]]
    full = any_tokenizer.encode_batch([re.sub(r"<br\s*/?>", " ", t, flags=re.IGNORECASE) if clean else t for t in texts],
                                      add_special_tokens=specials)
    kept = first_token_ids(texts, any_tokenizer.encode_batch, n, add_special_tokens=specials, clean_html=clean,
                           chars=chars)
    assert kept == [e.ids[:n] for e in full]


def test_a_long_line_is_never_tokenised_whole(tmp_path):
    """A 3 MB line (one document of a text shard) reaches the tokenizer only as a prefix of
    whole words, and its counts are those of the whole line cut at n."""
    from posgeo._tokenizers import _PREFIX_CHARS

    words = _texts(40)
    lines = [words[0], " ".join(words) * 120 + " the end", "", words[1] + " <br />" * 5000]
    assert len(lines[1]) > 40 * _PREFIX_CHARS
    (tmp_path / "long.txt").write_text("\n".join(lines) + "\n")
    seen: list[int] = []

    class Recording(Faulty):
        def encode_batch(self, texts, add_special_tokens=False):
            seen.extend(len(t) for t in texts)
            return self.backend.encode_batch(texts, add_special_tokens=add_special_tokens)

    c, _ = _run(str(tmp_path / "long.txt"), tokenizer=Recording(str(tmp_path / "unused"), "raise"), n_positions=8)
    assert max(seen) <= 2 * _PREFIX_CHARS
    kept = [line for line in lines if line.strip()]
    ref = PositionalCounts.from_sequences(posgeo.tokenize(kept, progress=False), 8)
    assert (c.counts != ref.counts).nnz == 0 and np.array_equal(c.reach, ref.reach) and c.n_documents == 3


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak RSS from /proc (Linux)")
def test_a_long_line_is_counted_in_bounded_memory(tmp_path):
    """`posgeo count` of a 24 MB single-line document at --positions 64: peak RSS under 1 GB
    (3.3 GB before the prefix rule: over 100 bytes per character of the line)."""
    big = tmp_path / "big.txt"
    with open(big, "w") as fh:
        for _ in range(200):
            fh.write("a fine film, and a dull plot <br /> of the kind one forgets at once " * 1800)
        fh.write("\nthe second document\n")
    # the peak RSS of this process image (VmHWM: getrusage's ru_maxrss would include the forking parent's)
    code = ("import re, sys\nfrom posgeo._count_cli import count_main\nrc = count_main(sys.argv[1:])\n"
            "print('maxrss_kib', re.search(r'VmHWM:\\s*(\\d+) kB', open('/proc/self/status').read()).group(1))\n"
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(big), "--column", "text", "--positions", "64", "--workers", "1",
                           "--no-progress", "--out", str(tmp_path / "c.npz")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rss = int(proc.stdout.split("maxrss_kib")[1])
    assert rss < 1_000_000, f"peak RSS {rss / 1e6:.2f} GB"
    c = PositionalCounts.load(tmp_path / "c.npz")
    assert c.n_documents == 2 and c.reach.tolist()[:3] == [2, 2, 2] and c.reach[-1] == 1


# ----------------------------------------------------------------------------- a shard that changes during a run


@pytest.mark.parametrize("name", ["d.txt", "c.jsonl.gz", "a.parquet"])
def test_a_shard_rewritten_while_counting_is_refused_and_never_poisons_the_workdir(corpus, tmp_path, monkeypatch, name):
    """The issue's run: a shard is rewritten (same size) after the run was planned and before it
    is read, then restored. The run refuses it in one line naming it, stores nothing of it,
    keeps the other shards' partials; rerun in the same work directory, it equals a fresh count."""
    import posgeo._count_run as run_module

    shards = tmp_path / "shards"
    shards.mkdir()
    paths = []
    for p in corpus["paths"]:
        (shards / Path(p).name).write_bytes(Path(p).read_bytes())
        paths.append(str(shards / Path(p).name))
    target = shards / name
    original = target.read_bytes()
    if name == "a.parquet":
        texts = pq.read_table(target)["text"].to_pylist()
        pq.write_table(pa.table({"text": texts[::-1], "label": np.arange(len(texts))}), tmp_path / "other.parquet",
                       row_group_size=150)
        other = (tmp_path / "other.parquet").read_bytes()
    else:
        other = original.replace(b"e", b"a") if name == "d.txt" else gzip.compress(gzip.decompress(original)[::-1])
    assert other != original
    real_plan = run_module.plan_partitions

    def plan_then_rewrite(*args, **kwargs):
        parts = real_plan(*args, **kwargs)
        target.write_bytes(other)
        return parts

    wd = tmp_path / "w"
    monkeypatch.setattr(run_module, "plan_partitions", plan_then_rewrite)
    with pytest.raises(ValueError, match=rf"^shard {re.escape(str(target))} changed while it was being counted .*rerun") as info:
        _run(paths, workdir=wd, partition_rows=100)
    assert "\n" not in str(info.value)
    done = len(list(wd.glob("*.npz")))  # the partitions counted before it (none of the changed shard)
    assert done == {"d.txt": 11, "c.jsonl.gz": 10, "a.parquet": 0}[name]  # a.parquet: 9 partitions, b.jsonl: 1
    monkeypatch.setattr(run_module, "plan_partitions", real_plan)
    target.write_bytes(original)  # back to the bytes the run was planned on
    again, stats = _run(paths, workdir=wd, partition_rows=100)
    assert stats.resumed == done
    fresh, _ = _run(paths, partition_rows=100)
    assert_same(again, fresh)  # (not the reference's halves: they hash the shard names, other paths here)
    assert (again.counts != corpus["reference"].counts).nnz == 0 and np.array_equal(again.reach, corpus["reference"].reach)


def test_a_shard_changed_between_its_hash_and_its_footer_is_refused(corpus, tmp_path, monkeypatch):
    """A parquet shard's footer is read (at planning) through the digests just taken: a shard
    replaced in between is refused, not planned from another content's row groups."""
    import posgeo._sources as counts_module

    target = tmp_path / "a.parquet"
    target.write_bytes(Path(corpus["paths"][0]).read_bytes())
    real_blocks = counts_module._local_blocks

    def blocks_then_rewrite(path):
        blocks = real_blocks(path)
        texts = pq.read_table(target)["text"].to_pylist()
        pq.write_table(pa.table({"text": texts[:10], "label": np.arange(10)}), target)
        return blocks

    monkeypatch.setattr(counts_module, "_local_blocks", blocks_then_rewrite)
    with pytest.raises(ValueError, match=r"a\.parquet changed while it was being counted"):
        _run(str(target), partition_rows=100)


# ----------------------------------------------------------------------------- one run per --out


def _big_shard(path: Path, lines: int) -> Path:
    rng = np.random.default_rng(3)
    words = np.array("the a film movie was is good bad plot actor great boring fun scene and but of to it this".split())
    path.write_text("\n".join(" ".join(rng.choice(words, size=120)) for _ in range(lines)) + "\n")
    return path


def _posgeo(*args: str, **kw) -> subprocess.Popen:
    """`python -m posgeo ARGS`, with SIGINT at its default (a background parent may ignore it)."""
    import signal

    return subprocess.Popen([sys.executable, "-m", "posgeo", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw)


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.mark.slow  # a run in a fresh interpreter, and its reference: about 15 s
def test_a_second_count_with_the_same_out_stops_at_once_naming_the_first(tmp_path, capsys):
    """Two `posgeo count` runs with one --out: the second stops at once (exit 2, one line naming
    the first's pid), the first finishes untouched; the lock goes with it."""
    shard = _big_shard(tmp_path / "big.txt", 15_000)
    out = tmp_path / "c.npz"
    args = [str(shard), "--column", "text", "--positions", "16", "--workers", "1", "--no-progress", "--out", str(out)]
    first = _posgeo("count", *args)
    lock = tmp_path / "c.npz.lock"
    _wait_for(lambda: lock.is_file() and f'"pid": {first.pid}' in lock.read_text(), first, "the first run's lock")
    t0 = time.perf_counter()
    assert count_main(args) == 2
    assert time.perf_counter() - t0 < 5
    err = capsys.readouterr().err
    assert err.startswith(f"posgeo count: error: another posgeo count (pid {first.pid} on ") and err.count("\n") == 1
    assert "wait for it to finish, or pass another --out" in err
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert_same(PositionalCounts.load(out), positional_counts(shard, column="text", n_positions=16, progress=False))
    assert not lock.exists() and not (tmp_path / "c.npz.parts").exists()


def test_the_lock_of_a_killed_run_does_not_block(corpus, tmp_path, capsys):
    """A run killed with SIGKILL leaves its lock file, but not its lock: the next run takes it."""
    out = tmp_path / "c.npz"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, pathlib\nfrom posgeo._count_cli import _output_lock\n"
         "with _output_lock(pathlib.Path(sys.argv[1])):\n    print('locked', flush=True)\n    time.sleep(120)\n", str(out)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        args = [corpus["paths"][1], "--column", "text", "--positions", "4", "--workers", "1", "--no-progress", "--out", str(out)]
        assert count_main(args) == 2
        assert f"(pid {holder.pid} on " in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "c.npz.lock").is_file()  # left behind by the killed holder
    assert count_main(args) == 0
    assert out.is_file() and not (tmp_path / "c.npz.lock").exists()


# ----------------------------------------------------------------------------- bounds and bad input


def test_positions_whose_counts_cannot_fit_are_refused_before_reading(tmp_path, monkeypatch, capsys):
    """--positions is bounded by this machine's memory (64 bytes per position), before any
    source is listed or read: the one line says how much and the largest that fits."""
    monkeypatch.setattr("posgeo.validation.physical_memory", lambda: 2**30)  # a 1 GiB machine
    missing = str(tmp_path / "not-read.txt")  # listing it would fail with "does not exist"
    args = [missing, "--column", "text", "--positions", str(10**8), "--workers", "1", "--out", str(tmp_path / "c.npz")]
    assert count_main(args) == 2
    err = capsys.readouterr().err
    assert err == ("posgeo count: error: --positions = 100,000,000 would need 6.0 GiB for the counts (about 64 bytes "
                   "per position while counting), more than this machine's 1.0 GiB of memory; pass --positions "
                   "16,777,216 or fewer\n")
    with pytest.raises(ValueError, match=r"n_positions \(--positions\) = 100,000,000 would need 6\.0 GiB .*16,777,216"):
        positional_counts(missing, column="text", n_positions=10**8, progress=False)
    assert count_main([*args[:4], str(2**31), *args[5:]]) == 2
    assert "--positions must be an int <= 2147483647" in capsys.readouterr().err
    assert not (tmp_path / "c.npz.lock").exists()


def _tiny_bpe(size: int) -> Tokenizer:
    """A BPE over ``size`` symbols none of which is a letter: English comes out as no token."""
    from tokenizers import models

    return Tokenizer(models.BPE(vocab={chr(0x2500 + i): i for i in range(size)}, merges=[]))


def test_an_empty_tokenizer_is_refused_with_the_files_it_needs(corpus, tmp_path, capsys):
    """A tokenizer of a 1-token vocabulary, one that turns English into no token, and the one
    transformers builds for a model folder without tokenizer files: refused in one line naming
    where it came from and the files a tokenizer needs (it counted 0 tokens and exited 0)."""
    from tokenizers.models import WordLevel
    from transformers import BertConfig

    with pytest.raises(ValueError, match=r"the tokenizer of the tokenizers.Tokenizer given is empty \(a vocabulary of 1 "
                                         r"token\): .*tokenizer\.json, or vocab\.txt .* vocab\.json \+ merges\.txt"):
        positional_counts(corpus["paths"][1], column="text", n_positions=4, progress=False,
                          tokenizer=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    with pytest.raises(ValueError, match=r"is empty \(it turns 'The quick brown fox jumps over the lazy dog\.' into no "
                                         r"token; a vocabulary of 200\)"):
        positional_counts(corpus["paths"][1], column="text", n_positions=4, progress=False, tokenizer=_tiny_bpe(200))
    folder = tmp_path / "my-model"  # config.json only: transformers makes a tokenizer of its 5 special tokens
    BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32).save_pretrained(folder)
    args = [corpus["paths"][1], "--column", "text", "--positions", "4", "--workers", "1", "--no-progress",
            "--tokenizer", str(folder), "--out", str(tmp_path / "c.npz")]
    assert count_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"posgeo count: error: the tokenizer of {str(folder)!r} is empty (a vocabulary of ")
    assert "tokenizer_config.json" in err and err.count("\n") == 1
    assert not (tmp_path / "c.npz").exists()


def test_a_link_and_its_target_are_one_shard(corpus, tmp_path):
    target = Path(corpus["paths"][1])
    (tmp_path / "link.jsonl").symlink_to(target)
    os.link(corpus["paths"][3], tmp_path / "hard.txt")
    for pair, shown in (([str(target), str(tmp_path / "link.jsonl")], "link.jsonl"),
                        ([str(tmp_path / "hard.txt"), corpus["paths"][3]], "d.txt")):
        with pytest.raises(ValueError, match=rf"shards '.*' and '.*{shown}' are the same file \(.*\): it is listed "
                                             r"twice and would be counted twice; list it once"):
            positional_counts(pair, column="text", n_positions=4, progress=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="needs FIFOs and /dev/zero")
def test_a_device_or_a_pipe_is_not_a_shard(tmp_path):
    """/dev/zero and a FIFO (named like a shard) are named as what they are, without opening
    them (a FIFO would block): shards must be regular files."""
    os.mkfifo(tmp_path / "pipe.txt")
    (tmp_path / "zero.txt").symlink_to("/dev/zero")
    cases = [("/dev/zero", "a character device"), (str(tmp_path / "pipe.txt"), r"a named pipe \(FIFO\)"),
             (str(tmp_path / "zero.txt"), "a character device"), (str(tmp_path / "*.txt"), r"a named pipe \(FIFO\)")]
    for source, kind in cases:
        with pytest.raises(ValueError, match=rf"shard '.*' (\(from .*\) )?is {kind}, not a regular file; shards must "
                                             "be regular files"):
            positional_counts(source, column="text", n_positions=4, progress=False)


def test_counts_that_cannot_be_counts_of_documents_are_refused():
    """A negative cell, a half-A cell above its total, fewer documents than reach position 0."""
    good = PositionalCounts.from_sequences([[0, 1], [1], [1, 1]], 2, vocab_size=2)
    args = dict(counts=good.counts, reach=good.reach, counts_a=good.counts_a, reach_a=good.reach_a, tokenizer="t",
                sources=("s",), n_documents=3)
    PositionalCounts(**args)
    neg = sparse.csr_array(np.array([[4, -1], [0, 2]]))  # rows sum to reach = [3, 2]
    with pytest.raises(ValueError, match=r"counts has a negative cell \(counts\[0, 1\] = -1\)"):
        PositionalCounts(**{**args, "counts": neg})
    above = sparse.csr_array(np.array([[0, 1], [1, 0]]))  # counts = [[1, 2], [0, 2]]: counts_a[1, 0] = 1 > 0
    with pytest.raises(ValueError, match=r"counts_a\[1, 0\] = 1 is above counts\[1, 0\] = 0: half A is a subset"):
        PositionalCounts(**{**args, "counts_a": above, "reach_a": np.array([1, 1])})
    with pytest.raises(ValueError, match=r"n_documents = 2 is fewer than the 3 documents that reach position 0"):
        PositionalCounts(**{**args, "n_documents": 2})
    with pytest.raises(TypeError, match="n_documents must be an int"):
        PositionalCounts(**{**args, "n_documents": 3.5})


def test_out_of_memory_in_the_distance_matrix_says_how_much_and_the_fix(monkeypatch):
    import posgeo._estimators as counts_module

    c = PositionalCounts.from_sequences([[0, 1, 1], [1, 0, 1]], 3, vocab_size=2)

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(counts_module, "_cross_products", no_memory)
    for method, what in ((c.hellinger_matrix, r"the \(n, n\) Hellinger matrix"),
                         (c.matched_hellinger_matrix, r"the \(n, n\) matched Hellinger matrix"),
                         (c.first_order_hellinger_matrix, r"the \(n, n\) Hellinger matrix")):
        with pytest.raises(MemoryError, match=rf"^out of memory computing {what} of 3 positions \(about 0\.13 GiB and "
                                              r"temporaries\); truncate the counts to fewer positions \(counts\."
                                              r"truncate\(k\).*more$") as info:
            method()
        assert info.value.__cause__ is None and "\n" not in str(info.value)
    monkeypatch.setattr(sparse.csr_array, "toarray", no_memory)  # the dense (n, V) table
    with pytest.raises(MemoryError, match=r"^out of memory computing the dense marginals of 3 positions"):
        c.marginals()


@pytest.mark.slow  # a LocalCluster of two workers in a fresh interpreter: about 15 s
@pytest.mark.parametrize("parent_sigint", ["default", "ignored"])
def test_ctrl_c_with_two_workers_is_one_line(tmp_path, parent_sigint):
    """Ctrl-C (SIGINT to the whole process group: the workers too) while two Dask workers
    count: exit 130 and the one line, not the workers' tracebacks (67-96 lines before); the
    lock is released. Also when this test runs in the background (SIGINT ignored here: the
    child resets it)."""
    import signal

    shards = [str(_big_shard(tmp_path / f"s{k}.txt", 4000)) for k in range(8)]
    out = tmp_path / "c.npz"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if parent_sigint == "ignored" else signal.SIG_DFL)
    try:
        proc = _posgeo("count", *shards, "--column", "text", "--positions", "16", "--workers", "2", "--no-progress",
                       "--out", str(out), start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        _wait_for(lambda: any((tmp_path / "c.npz.parts").glob("*.npz")), proc, "a first partition")
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err == (f"posgeo count: interrupted; the finished partitions are kept in {tmp_path / 'c.npz.parts'}: rerun "
                   "the same command to resume\n")
    assert not (tmp_path / "c.npz.lock").exists() and not out.exists()


def test_a_file_system_without_locks_counts_unguarded_with_a_warning(corpus, tmp_path, monkeypatch, capsys):
    import errno
    import fcntl

    def no_locks(fd, how):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    out = tmp_path / "c.npz"
    with pytest.warns(UserWarning, match=r"cannot lock .*c\.npz\.lock \(\[Errno \d+\] No locks available\): two runs "
                                         r"with the same --out would delete each other's partial counts"):
        assert count_main([corpus["paths"][1], "--column", "text", "--positions", "4", "--workers", "1", "--no-progress",
                           "--out", str(out)]) == 0
    assert out.is_file()
