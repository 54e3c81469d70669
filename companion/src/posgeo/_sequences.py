"""Token sequences and labelled corpora: the containers every estimator takes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
import numpy as np

__all__ = ['Sequences', 'Corpus', 'overlap_groups']


# --------------------------------------------------------------------------------------
# Ragged arrays
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Sequences:
    """A ragged array of token-id sequences in CSR form.

    Sequence ``k`` is ``tokens[offsets[k]:offsets[k + 1]]``.

    Parameters
    ----------
    tokens : numpy.ndarray, shape (total,)
        All token ids, concatenated (integer dtype).
    offsets : numpy.ndarray, shape (m + 1,)
        Start of every sequence plus the end of the last one; ``offsets[0] == 0``,
        non-decreasing, ``offsets[-1] == total``.
    vocab_size : int
        Number of token ids; every id lies in ``[0, vocab_size)``.

    Raises
    ------
    TypeError
        If ``tokens`` or ``offsets`` are not integer arrays.
    ValueError
        If the shapes or offsets are inconsistent, or an id lies outside ``[0, vocab_size)``.

    Examples
    --------
    >>> s = Sequences.from_list([[1, 2, 3], [4], []], vocab_size=5)
    >>> len(s), s.lengths.tolist(), s.offsets.tolist()
    (3, [3, 1, 0], [0, 3, 4, 4])
    >>> [x.tolist() for x in s]
    [[1, 2, 3], [4], []]
    """

    tokens: np.ndarray
    offsets: np.ndarray
    vocab_size: int

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens)
        offsets = np.asarray(self.offsets)
        if tokens.size == 0 and tokens.dtype.kind not in "iu":
            tokens = tokens.astype(np.int32)
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise TypeError(
                f"tokens must be a 1-d integer array, got dtype {tokens.dtype} and shape {tokens.shape}; "
                "pass concatenated integer token ids"
            )
        if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.size < 1:
            raise TypeError(
                f"offsets must be a non-empty 1-d integer array, got dtype {offsets.dtype} and shape "
                f"{offsets.shape}; pass offsets of length (number of sequences + 1)"
            )
        offsets = offsets.astype(np.int64, copy=False)
        if offsets[0] != 0 or offsets[-1] != tokens.size or np.any(np.diff(offsets) < 0):
            raise ValueError(
                "offsets must start at 0, be non-decreasing and end at len(tokens) "
                f"(= {tokens.size}), got offsets[0]={offsets[0]}, offsets[-1]={offsets[-1]}; "
                "build the ragged array with Sequences.from_list"
            )
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, (int, np.integer)) or self.vocab_size <= 0:
            raise ValueError(f"vocab_size must be a positive int, got {self.vocab_size!r}")
        if tokens.size:
            lo, hi = int(tokens.min()), int(tokens.max())
            if lo < 0 or hi >= self.vocab_size:
                bad = lo if lo < 0 else hi
                raise ValueError(
                    f"token id {bad} is outside [0, vocab_size={self.vocab_size}); "
                    "pass the vocab_size of the tokenizer that produced the ids"
                )
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "vocab_size", int(self.vocab_size))

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def __iter__(self) -> Iterator[np.ndarray]:
        tokens, offsets = self.tokens, self.offsets
        for k in range(len(self)):
            yield tokens[offsets[k] : offsets[k + 1]]

    def __getitem__(self, k: int) -> np.ndarray:
        m = len(self)
        if not isinstance(k, (int, np.integer)):
            raise TypeError(f"index must be an int, got {type(k).__name__}; use .subset(indices) for many")
        if k < 0:
            k += m
        if not 0 <= k < m:
            raise IndexError(f"sequence index {k} out of range for {m} sequences")
        return self.tokens[self.offsets[k] : self.offsets[k + 1]]

    def __repr__(self) -> str:
        return f"Sequences(n_sequences={len(self)}, total_tokens={self.tokens.size}, vocab_size={self.vocab_size})"

    @property
    def lengths(self) -> np.ndarray:
        """Length of every sequence, shape (m,), int64."""
        return np.diff(self.offsets)

    @classmethod
    def from_list(cls, seqs: Iterable[Sequence[int] | np.ndarray], vocab_size: int) -> "Sequences":
        """Build a ragged array from a list of integer sequences.

        Parameters
        ----------
        seqs : iterable of sequences of int
            One sequence of token ids per item (lists, numpy arrays, ...).
        vocab_size : int
            Number of token ids.

        Returns
        -------
        Sequences

        Raises
        ------
        TypeError
            If a sequence is not a 1-d array of integers.

        Examples
        --------
        >>> Sequences.from_list([[0, 1], [2]], vocab_size=3).tokens.tolist()
        [0, 1, 2]
        """
        arrays = []
        for k, s in enumerate(seqs):
            a = np.asarray(s)
            if a.size == 0:
                a = a.reshape(0).astype(np.int64)
            if a.ndim != 1 or a.dtype.kind not in "iu":
                raise TypeError(
                    f"sequence {k} must be a 1-d sequence of integer token ids, got dtype {a.dtype} "
                    f"and shape {a.shape}; convert tokens to int ids first"
                )
            arrays.append(a)
        lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tokens = np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64)
        if tokens.size and int(tokens.max()) <= np.iinfo(np.int32).max and int(tokens.min()) >= 0:
            tokens = tokens.astype(np.int32)
        return cls(tokens=tokens, offsets=offsets, vocab_size=vocab_size)

    def subset(self, indices: Sequence[int] | np.ndarray) -> "Sequences":
        """Return the sequences at ``indices`` (in that order) as a new ragged array.

        Parameters
        ----------
        indices : array-like of int, shape (k,)
            Sequence indices.

        Returns
        -------
        Sequences

        Examples
        --------
        >>> s = Sequences.from_list([[1, 2, 3], [4], [0, 0]], vocab_size=5)
        >>> [x.tolist() for x in s.subset([2, 0])]
        [[0, 0], [1, 2, 3]]
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        lengths = self.lengths[idx]
        offsets = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        starts = self.offsets[:-1][idx]
        gather = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1] - starts, lengths)
        return Sequences(tokens=self.tokens[gather], offsets=offsets, vocab_size=self.vocab_size)


@dataclass(frozen=True, eq=False)
class Corpus:
    """A tokenised corpus.

    Attributes
    ----------
    name : str
        ``"synthetic"``, ``"sst2"`` or ``"imdb"``.
    split : str
        Which split (``"train"``, ``"validation"``, ``"test"``).
    sequences : Sequences
        The token ids, one sequence per text.
    labels : numpy.ndarray or None, shape (m,)
        Class labels (SST-2's test split has label -1: unlabelled), ``None`` for synthetic data.
    vocab_size : int
        Number of token ids.
    description : str
        One line saying what this is.
    true_marginals : numpy.ndarray or None, shape (n_positions, vocab_size)
        The true per-position token distributions (synthetic corpus only).
    options : dict
        The options the corpus was built with.
    """

    name: str
    split: str
    sequences: Sequences
    labels: np.ndarray | None
    vocab_size: int
    description: str
    true_marginals: np.ndarray | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sequences)

    def __repr__(self) -> str:
        return (
            f"Corpus(name={self.name!r}, split={self.split!r}, n_sequences={len(self)}, "
            f"vocab_size={self.vocab_size})"
        )


def overlap_groups(sequences: Any, *, window: int = 8) -> np.ndarray:
    """Group sequences that share a run of ``window`` consecutive tokens.

    SST-2's training set holds the phrases of the parse trees of its sentences, each
    nested in its sentence, so its sequences are not independent. Two sequences that share
    ``window`` consecutive tokens (a phrase and the sentence it comes from, or two phrases
    of one sentence that overlap) join a group, and groups that share a sequence merge
    (connected components). Sequences shorter than ``window`` tokens, and those sharing no
    run with another, are groups of their own: a short phrase cannot be traced to one
    sentence from its tokens alone (it may occur in many), which is the limit of this view.
    Two different texts sharing a run of ``window`` tokens are grouped too, which only makes
    a grouped bootstrap more cautious.

    Parameters
    ----------
    sequences : Sequences or Corpus
    window : int, keyword-only, default 8
        Length of the shared runs, >= 1.

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
        Group id of every sequence, 0..G-1, numbered by first appearance.

    Examples
    --------
    >>> seqs = Sequences.from_list([[1, 2, 3, 4], [2, 3, 4], [9, 9], [7, 2, 3, 4, 5]], vocab_size=10)
    >>> overlap_groups(seqs, window=3).tolist()
    [0, 0, 1, 0]
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from .validation import check_int

    if isinstance(sequences, Corpus):
        sequences = sequences.sequences
    if not isinstance(sequences, Sequences):
        raise TypeError(
            f"sequences must be a posgeo Sequences or Corpus, got {type(sequences).__name__}; "
            "build one with Sequences.from_list or load_corpus"
        )
    w = check_int(window, "window", minimum=1, hint="the length of a shared run of tokens, e.g. 8")
    offsets = np.asarray(sequences.offsets, dtype=np.int64)
    tokens = np.asarray(sequences.tokens, dtype=np.uint64)
    m = offsets.size - 1
    lengths = np.diff(offsets)
    n_win = np.maximum(lengths - w + 1, 0)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(m), n_win)
    starts = np.repeat(offsets[:-1], n_win) + (np.arange(owner.size) - np.repeat(np.cumsum(n_win) - n_win, n_win))
    # a 64-bit polynomial hash of each run (wrapping arithmetic), then exact ids of the hashes
    h = np.zeros(owner.size, dtype=np.uint64)
    base = np.uint64(1_000_003)
    with np.errstate(over="ignore"):
        for j in range(w):
            h = h * base + tokens[starts + j] + np.uint64(1)
    _, win_id = np.unique(h, return_inverse=True)
    n_ids = int(win_id.max()) + 1 if win_id.size else 0
    graph = coo_matrix((np.ones(owner.size), (owner, m + win_id.reshape(-1))), shape=(m + n_ids, m + n_ids))
    _, labels = connected_components(graph, directed=False)
    _, first = np.unique(labels[:m], return_index=True)
    order = np.empty(first.size, dtype=np.int64)
    order[np.argsort(first)] = np.arange(first.size)
    _, inv = np.unique(labels[:m], return_inverse=True)
    return order[inv.reshape(-1)]


# -------------------------------------------------------------------------------------- halves
def stratified_halves(
    lengths: Any, *, seed: int | np.random.Generator, groups: Any = None
) -> np.ndarray:
    """A random split of sequences into two halves, balanced at every position.

    The one split-half routine of the package's random estimators (the split-half noise
    floor, the matched half-sample estimator, the half-sample bootstrap). Units (sequences,
    or groups of them) are sorted by length, longest first, in random order among equal
    lengths, and dealt to the halves alternately, starting with a random half: each half
    then holds ``floor`` or ``ceil`` of half of the units that reach every position.
    (:class:`posgeo.PositionalCounts` splits differently on purpose: by a hash of each
    document's source and index, so that its halves do not depend on how a corpus is
    partitioned across workers.)

    Parameters
    ----------
    lengths : array-like of int, shape (m,)
        Length of each sequence.
    seed : int or numpy.random.Generator, keyword-only
        An int seeds a fresh generator; a generator is consumed (successive calls give
        successive independent splits).
    groups : array-like of int, shape (m,), keyword-only, optional
        Group id per sequence (e.g. :func:`overlap_groups`): a group goes to one half as a
        whole, and counts as long as its longest sequence.

    Returns
    -------
    numpy.ndarray of bool, shape (m,)
        True for the sequences of the first half.

    Examples
    --------
    >>> half = stratified_halves([5, 5, 3, 3, 1], seed=0)
    >>> int(half.sum()) in (2, 3), bool(half[:2].sum() == 1)
    (True, True)
    >>> stratified_halves([4, 4, 2, 2], seed=1, groups=[0, 0, 1, 1]).tolist() in ([True, True, False, False], [False, False, True, True])
    True
    """
    rng, order, inverse = _longest_first(lengths, seed, groups)
    half = np.empty(order.size, dtype=bool)
    half[order] = (np.arange(order.size) % 2) == int(rng.integers(2))
    return half if inverse is None else half[inverse]


def stratified_blocks(
    lengths: Any, n_blocks: int, *, seed: int | np.random.Generator, groups: Any = None
) -> np.ndarray:
    """A random partition of sequences into ``n_blocks`` blocks, balanced at every position.

    The blocks of a delete-a-block jackknife (``hybrid_hellinger_matrix(...,
    split="jackknife")``), dealt like :func:`stratified_halves`: units (sequences, or
    groups of them) sorted by length, longest first, in random order among equal lengths,
    and dealt to the blocks in turn from a random first block, so that every block holds
    ``floor`` or ``ceil`` of ``1 / n_blocks`` of the units that reach any position.

    Parameters
    ----------
    lengths : array-like of int, shape (m,)
        Length of each sequence.
    n_blocks : int
        Number of blocks (>= 2).
    seed : int or numpy.random.Generator, keyword-only
    groups : array-like of int, shape (m,), keyword-only, optional
        Group id per sequence: a group goes to one block as a whole, and counts as long as
        its longest sequence.

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
        The block of every sequence, in ``0..n_blocks-1``.

    Raises
    ------
    TypeError, ValueError
        Bad lengths, groups or seed; ``n_blocks`` below 2 or above the number of units.

    Examples
    --------
    >>> b = stratified_blocks([9, 9, 9, 5, 5, 5, 2], 3, seed=0)
    >>> sorted(b[:3].tolist()), sorted(b[3:6].tolist())
    ([0, 1, 2], [0, 1, 2])
    >>> b = stratified_blocks([4, 4, 2, 2], 2, seed=1, groups=[0, 0, 1, 1])
    >>> bool(b[0] == b[1] and b[2] == b[3] and b[0] != b[2])
    True
    """
    from posgeo.validation import check_int

    rng, order, inverse = _longest_first(lengths, seed, groups)
    k = check_int(n_blocks, "n_blocks", minimum=2)
    if k > order.size:
        raise ValueError(
            f"n_blocks={k} exceeds the {order.size} units (sequences or groups) to deal; pass at most {order.size}"
        )
    block = np.empty(order.size, dtype=np.int64)
    block[order] = (np.arange(order.size) + int(rng.integers(k))) % k
    return block if inverse is None else block[inverse]


def _longest_first(
    lengths: Any, seed: int | np.random.Generator, groups: Any
) -> tuple[np.random.Generator, np.ndarray, np.ndarray | None]:
    """Checked inputs of the stratified splits: the generator, the units in dealing order
    (longest first, random among equal lengths) and each sequence's unit (None: itself)."""
    from posgeo.validation import check_groups

    lens = np.asarray(lengths)
    if lens.ndim != 1 or lens.dtype.kind not in "iu":
        raise TypeError(f"lengths must be a 1-d integer array (one length per sequence), got dtype {lens.dtype} and shape {lens.shape}")
    if not isinstance(seed, np.random.Generator) and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int or a numpy Generator, got {type(seed).__name__}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(int(seed))
    if groups is None:
        unit_len, inverse, n_units = lens, None, lens.size
    else:
        inverse, n_units = check_groups(groups, lens.size)
        unit_len = np.zeros(n_units, dtype=lens.dtype)
        np.maximum.at(unit_len, inverse, lens)
    return rng, np.lexsort((rng.random(n_units), -unit_len)), inverse
