"""Token sequences and labelled corpora: the containers every estimator takes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
import numpy as np

__all__ = ['Sequences', 'Corpus']


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
