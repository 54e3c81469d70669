"""Positional counts: sparse token counts per position of a corpus, with a deterministic half.

:class:`PositionalCounts` holds, for every position ``i < n`` and token ``v``, how many documents
hold ``v`` at ``i`` (sparse, ``n x V``, int64), how many documents reach each position, and the
same two tables for a deterministic half of the documents (chosen by a hash of the shard's name
and the row: independent of partitioning): the sufficient statistics of the positional
marginals. A 128k-token vocabulary at 8192 positions costs memory in proportion to the distinct
(position, token) pairs seen, never ``n * V``. From them it derives the marginals, their
Hellinger geometry from sparse square-root products, the split-half noise floor and the
first-order, matched and hybrid estimators (the functions of :mod:`posgeo._estimators`), and the
:class:`posgeo.CorpusGeometry` that ``posgeo audit --counts`` audits. Counts of shards add;
:func:`posgeo.positional_counts` counts sharded corpora.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from scipy import sparse

from ._cache import array_digest
from ._count_kernels import atomic_savez, count_ids, csr_arrays, csr_load, half_b, meta_array, source_seed
from ._estimators import (
    dense_marginals,
    ensure_reached,
    first_order_correction,
    hellinger_from_counts,
    hybrid_hellinger_from_counts,
    matched_hellinger_from_halves,
    noise_floor_from_halves,
    root_marginals,
)
from ._geometry import hellinger_matrix
from ._marginals import CorpusGeometry, NoiseFloor
from ._messages import one_line
from ._sequences import Corpus, Sequences
from ._tokenizers import TOKENIZER_ID_RE, same_tokenizer, tokenizer_id
from .validation import check_int

__all__ = ['PositionalCounts']

_FORMAT = "posgeo.PositionalCounts"
_FORMAT_VERSION = 1
_DEFAULT_MAX_BYTES = 2**31  # dense marginals larger than this (2 GiB) are refused


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
        in_b = half_b(source_seed(source), np.arange(len(seqs), dtype=np.int64))
        counts, counts_a, reach, reach_a = count_ids(seqs.tokens, klen, in_b, n, V, starts=starts)
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
        if not same_tokenizer(self.tokenizer, other.tokenizer):
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
        arrays = {"meta": meta_array(meta), "reach": self.reach, "reach_a": self.reach_a}
        arrays.update(csr_arrays("counts", self.counts))
        arrays.update(csr_arrays("counts_a", self.counts_a))
        atomic_savez(path, arrays)
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
                    csr_load(z, "counts", shape), np.asarray(z["reach"]), csr_load(z, "counts_a", shape),
                    np.asarray(z["reach_a"]), meta["tokenizer"], tuple(meta["sources"]), meta["n_documents"],
                    meta.get("options", {}),
                )
        except (ValueError, KeyError, OSError, EOFError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise
            raise ValueError(
                f"{path} is not a posgeo counts file ({one_line(exc)}); write one with PositionalCounts.save "
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
        ensure_reached(self.reach)
        return dense_marginals(self.counts, self.reach)

    def sqrt_marginals(self) -> Any:
        """Square roots of the marginals as a sparse (n, V) float64 CSR array.

        Examples
        --------
        >>> c = PositionalCounts.from_sequences([[0], [1], [1], [1]], 1, vocab_size=2)
        >>> c.sqrt_marginals().toarray().round(3).tolist()
        [[0.5, 0.866]]
        """
        ensure_reached(self.reach)
        return root_marginals(self.counts, self.reach)

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
        return hellinger_from_counts(self.counts, self.reach, metric=metric)

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
        split, bias = noise_floor_from_halves(self.counts_a, self.reach_a, self.counts_b, self.reach_b)
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
        sequences, it applies the same formula (``posgeo._estimators.matched_squared``) to
        ``n_splits`` random halvings of them, through dense (n, V) tables per half, and averages;
        counts keep no sequences, only the stored split, whose cross products are taken from
        the sparse halves (memory O(nnz + n^2)). The numbers differ by the draw of the split(s).

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
        return matched_hellinger_from_halves(self.counts_a, self.reach_a, self.counts_b, self.reach_b)

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

        ``posgeo._estimators.hybrid_hellinger_from_counts`` of :attr:`counts` and :attr:`reach` (no
        copy of the estimator): the same matrix as ``posgeo.hybrid_hellinger_matrix`` (its
        default ``split="none"``) on the documents' token ids, bit for bit.

        Parameters
        ----------
        squared, resolved_count, reference_floor, n_bins : keyword-only
            As for :func:`posgeo.hybrid_hellinger_matrix`; ``squared=True``: the squared distances
            before clipping at 0.
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
        if isinstance(tokenizer, str) and TOKENIZER_ID_RE.fullmatch(tokenizer):
            other = tokenizer
        else:
            other = tokenizer_id(tokenizer)
        return same_tokenizer(self.tokenizer, other)

    def _check_dense(self, max_bytes: int, what: str) -> None:
        need = 8 * self.n_positions * self.vocab_size
        if need > max_bytes:
            raise ValueError(
                f"{what} would take {need / 2**30:.2f} GiB ({self.n_positions} x {self.vocab_size} float64), over "
                f"max_bytes={max_bytes / 2**30:.2f} GiB; truncate() to fewer positions, use hellinger_matrix() "
                "(sparse) for the plug-in distances alone, or pass a larger max_bytes"
            )
