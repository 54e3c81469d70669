"""Counting kernels: sparse (position, token) count tables of token ids, and partial counts.

:func:`count_ids` counts the kept ids of a batch of documents, for all of them and for half A
(a deterministic half: :func:`half_b`), into (n, V) int64 CSR tables, by one sort of 32- or
64-bit keys or by radix sorts of a padded table of 16-bit keys (:func:`counting_method`): the
same integer tables either way. A :class:`Partial` holds the counts of one partition or a
merge of several (:func:`merge`, :class:`TreeSum`), stored atomically as ``.npz`` files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from ._messages import one_line
from .validation import check_int

__all__: list[str] = []

_PARTIAL_FORMAT = "posgeo.PositionalCounts.partial"


# --------------------------------------------------------------------------- counting token ids (vectorised)


def _reach(klen: np.ndarray, n: int) -> np.ndarray:
    """``reach[i] = #{k : klen[k] > i}`` for kept lengths ``klen <= n``."""
    ends = np.bincount(klen, minlength=n + 1)
    return ends[::-1].cumsum()[::-1][1:].astype(np.int64)


def half_b(seed: int, rows: np.ndarray) -> np.ndarray:
    """Deterministic half of each row: the top bit of splitmix64(seed + (row + 1) * golden)."""
    z = (rows.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(63)).astype(bool)


def source_seed(source: str) -> int:
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
    """:func:`count_ids`'s tables from a position-major (n, documents) uint16 table of the keys
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


def count_ids(tokens: np.ndarray, klen: np.ndarray, in_b: np.ndarray, n: int, V: int, *,
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


# --------------------------------------------------------------------------- partial counts (one partition, or a merge of several)


@dataclass(frozen=True, eq=False)
class Partial:
    """The counts of one partition, or of several merged: both tables, both reaches, documents per source."""

    counts: Any
    counts_a: Any
    reach: np.ndarray
    reach_a: np.ndarray
    docs: dict[str, int]  # documents read per source
    computed: int = 0  # partitions counted in this run
    resumed: int = 0  # partitions read back from the work directory


def merge(p: Partial, q: Partial) -> Partial:
    """The sum of two partials (a task of the Dask run)."""
    docs = dict(p.docs)
    for k, v in q.docs.items():
        docs[k] = docs.get(k, 0) + v
    return Partial(
        counts=p.counts + q.counts,
        counts_a=p.counts_a + q.counts_a,
        reach=p.reach + q.reach,
        reach_a=p.reach_a + q.reach_a,
        docs=docs,
        computed=p.computed + q.computed,
        resumed=p.resumed + q.resumed,
    )


class TreeSum:
    """Sum partials pairwise as they arrive (a binary counter): O(nnz log P) work in all."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, Partial]] = []

    def add(self, p: Partial) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, q = self._stack.pop()
            p = merge(q, p)
            level += 1
        self._stack.append((level, p))

    def result(self) -> Partial:
        if not self._stack:
            raise ValueError("nothing to sum")
        p = self._stack.pop()[1]
        while self._stack:
            p = merge(self._stack.pop()[1], p)
        return p


def csr_arrays(prefix: str, m: Any) -> dict[str, np.ndarray]:
    """A CSR table's arrays for an ``.npz`` file (read back by :func:`csr_load`)."""
    return {f"{prefix}_data": m.data, f"{prefix}_indices": m.indices, f"{prefix}_indptr": m.indptr}


def csr_load(z: Any, prefix: str, shape: tuple[int, int]) -> Any:
    m = sparse.csr_array((z[f"{prefix}_data"], z[f"{prefix}_indices"], z[f"{prefix}_indptr"]), shape=shape)
    return m


def meta_array(meta: dict[str, Any]) -> np.ndarray:
    """A JSON header as a uint8 array (an ``.npz`` holds no pickle)."""
    return np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8)


def atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
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


def save_partial(path: Path, p: Partial, key: str, n: int, V: int) -> None:
    meta = {"format": _PARTIAL_FORMAT, "key": key, "shape": [n, V], "docs": p.docs}
    arrays = {"meta": meta_array(meta), "reach": p.reach, "reach_a": p.reach_a}
    arrays.update(csr_arrays("counts", p.counts))
    arrays.update(csr_arrays("counts_a", p.counts_a))
    atomic_savez(path, arrays)


def load_partial(path: Path, key: str, n: int, V: int) -> Partial | None:
    """The partial stored at ``path`` for ``key``, or None (absent, or unreadable: recounted)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
            if meta.get("format") != _PARTIAL_FORMAT or meta.get("key") != key or meta.get("shape") != [n, V]:
                raise ValueError("not the partial counts of this partition")
            p = Partial(
                counts=csr_load(z, "counts", (n, V)),
                counts_a=csr_load(z, "counts_a", (n, V)),
                reach=np.asarray(z["reach"], dtype=np.int64),
                reach_a=np.asarray(z["reach_a"], dtype=np.int64),
                docs={str(k): int(v) for k, v in meta["docs"].items()},
                resumed=1,
            )
    except Exception as exc:
        warnings.warn(f"ignoring unreadable partial counts {path} ({one_line(exc)}); counting the partition again",
                      stacklevel=2)
        return None
    return p
