"""The four synthetic character-level tasks of P2 (Zuo et al. 2024), as seeded generators.

P2 trains causal transformers without positional encodings on four tasks that need position
information. The summary we work from gives one example and a *maximum input length* per
task; this module reads "input length" as the number of characters of the prompt, ``=``
included, which the indexing example ``"wherex(134504392,4)="`` (exactly 20 characters, the
stated maximum) confirms. Formats (``L`` = number of digits of the sequence):

==========  ==========================  ===========  ===========  =====================
task        prompt                      answer       P2 max_len   prompt length
==========  ==========================  ===========  ===========  =====================
addition    ``"123+456="``              ``"579"``    9            ``da + db + 2``
reversal    ``"rev(1234)="``            ``"4321"``   22           ``L + 6``
indexing    ``"wherex(134504392,4)="``  ``"2"``      20           ``L + 11``
sorting     ``"sort(3142,4213)="``      ``"2310"``   18           ``2 L + 8``
==========  ==========================  ===========  ===========  =====================

* **addition**: two non-negative integers without leading zeros (``da, db >= 1`` digits);
  the answer is their decimal sum, not reversed.
* **reversal**: a digit string (any digits) and its reverse.
* **indexing**: a digit string and a digit that occurs in it (the digit at a uniformly
  drawn position, so digits that occur often are asked more); the answer is the *0-based*
  position of its first occurrence (P2's example answers ``"2"`` for ``4`` in
  ``134504392``, which fixes the 0-based convention).
* **sorting**: P2 gives only "an original sequence and a reordered sequence; output the new
  order of the indices". We use a source string ``S`` of ``L`` *distinct* digits (so every
  index is unambiguous and ``L <= 10``) and a random permutation ``T`` of it; the answer lists,
  for each character of ``T``, its 0-based index in ``S`` (one digit each). In
  ``"sort(3142,4213)="`` -> ``"2310"``: ``4`` is at index 2 of ``3142``, ``2`` at 3, ``1`` at
  1 and ``3`` at 0.
  The ``sort(...)`` wrapper is our choice, in the style of ``rev`` and ``wherex``.

With P2's maximum lengths this gives at most 7 operand digits for addition (e.g.
``"1234+567="``), 16 digits for reversal, 9 for indexing and 5 for sorting (prompt lengths of
sorting are even). Other formats of the sorting prompt would shift that last bound.

Lengths are sampled so that the prompt length is between ``min_len`` and ``max_len``: the
size ``L`` (for addition, the total number of operand digits ``da + db``) is uniform over the
feasible sizes, and for addition ``da`` is then uniform in ``1 .. L - 1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence
import numpy as np
import torch

__all__ = [
    'TASKS',
    'TaskSample',
    'TaskVocab',
    'task_length_range',
    'make_task_samples',
    'answer_is_correct',
    'encode_task_batch',
]


TASKS: tuple[str, ...] = ("addition", "reversal", "indexing", "sorting")
"""Names of the four synthetic tasks of P2."""

# P2's maximum input (prompt) lengths, in characters.
_DEFAULT_MAX_LEN = {"addition": 9, "reversal": 22, "indexing": 20, "sorting": 18}
# prompt length = _SLOPE * size + _OFFSET; sizes from _MIN_SIZE to _MAX_SIZE (None: unbounded)
_SLOPE = {"addition": 1, "reversal": 1, "indexing": 1, "sorting": 2}
_OFFSET = {"addition": 2, "reversal": 6, "indexing": 11, "sorting": 8}
_MIN_SIZE = {"addition": 2, "reversal": 1, "indexing": 1, "sorting": 1}
_MAX_SIZE: dict[str, int | None] = {
    "addition": None,
    "reversal": None,
    "indexing": None,
    "sorting": 10,
}

_PATTERNS = {
    "addition": re.compile(r"^(0|[1-9][0-9]*)\+(0|[1-9][0-9]*)=$"),
    "reversal": re.compile(r"^rev\(([0-9]+)\)=$"),
    "indexing": re.compile(r"^wherex\(([0-9]+),([0-9])\)=$"),
    "sorting": re.compile(r"^sort\(([0-9]+),([0-9]+)\)=$"),
}

_CHARS = "0123456789+=(),ehorstvwx"


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


@dataclass(frozen=True)
class TaskSample:
    """One example of a synthetic task.

    Attributes
    ----------
    prompt : str
        The input, ending in ``"="`` (e.g. ``"rev(1234)="``).
    answer : str
        The expected continuation (e.g. ``"4321"``), without end-of-sequence marker.
    """

    prompt: str
    answer: str

    @property
    def task(self) -> str | None:
        """The task whose prompt format this sample matches (``None`` if none)."""
        for name, pat in _PATTERNS.items():
            if pat.match(self.prompt):
                return name
        return None


class TaskVocab:
    """Character vocabulary shared by the four tasks, plus padding and end-of-sequence.

    Token ids: ``0`` = padding (``"<pad>"``), ``1`` = end of sequence (``"<eos>"``), then one
    id per character of ``"0123456789+=(),ehorstvwx"`` in that order (26 tokens in all).

    Examples
    --------
    >>> v = TaskVocab()
    >>> len(v), v.pad_id, v.eos_id
    (26, 0, 1)
    >>> ids = v.encode("rev(12)=", add_eos=True)
    >>> ids
    [20, 17, 23, 14, 3, 4, 15, 13, 1]
    >>> v.decode(ids)
    'rev(12)='
    """

    pad_token = "<pad>"
    eos_token = "<eos>"
    pad_id = 0
    eos_id = 1

    def __init__(self) -> None:
        self.chars: str = _CHARS
        self._to_id = {c: i + 2 for i, c in enumerate(self.chars)}
        self.tokens: tuple[str, ...] = (self.pad_token, self.eos_token, *self.chars)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def size(self) -> int:
        """Number of tokens (the embedding table size)."""
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"TaskVocab(size={self.size})"

    def encode(self, text: str, *, add_eos: bool = False) -> list[int]:
        """Map characters to token ids.

        Parameters
        ----------
        text : str
            Characters from :attr:`chars`.
        add_eos : bool, default False
            Append the end-of-sequence id.

        Returns
        -------
        list of int
            Token ids, ``len(text)`` (+1 with ``add_eos``) of them.

        Raises
        ------
        ValueError
            If ``text`` holds a character outside the vocabulary.
        """
        try:
            ids = [self._to_id[c] for c in text]
        except KeyError as exc:
            raise ValueError(
                f"character {exc.args[0]!r} is not in the task vocabulary {self.chars!r}; "
                "encode only task prompts and answers"
            ) from None
        return ids + [self.eos_id] if add_eos else ids

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Map token ids back to text, dropping padding and stopping at end-of-sequence.

        Parameters
        ----------
        ids : sequence of int or 1-D torch.Tensor
            Token ids.

        Returns
        -------
        str
            The decoded characters.

        Raises
        ------
        ValueError
            If an id is outside ``[0, len(self))``.
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if i == self.pad_id:
                continue
            if not 2 <= i < len(self.tokens):
                raise ValueError(f"token id {i} is outside the vocabulary [0, {len(self)})")
            out.append(self.tokens[i])
        return "".join(out)


def task_length_range(task: str) -> tuple[int, int | None]:
    """Return the shortest and longest possible prompt length of a task.

    Parameters
    ----------
    task : str
        One of :data:`TASKS`.

    Returns
    -------
    tuple of (int, int or None)
        Minimum and maximum prompt length in characters (``None``: unbounded).

    Raises
    ------
    ValueError
        If ``task`` is unknown.

    Examples
    --------
    >>> [task_length_range(t) for t in TASKS]
    [(4, None), (7, None), (12, None), (10, 28)]
    """
    _check_task(task)
    lo = _SLOPE[task] * _MIN_SIZE[task] + _OFFSET[task]
    hi_size = _MAX_SIZE[task]
    return lo, (None if hi_size is None else _SLOPE[task] * hi_size + _OFFSET[task])


def _digits(rng: np.random.Generator, n: int, *, leading_zero: bool = True) -> str:
    d = rng.integers(0, 10, size=n)
    if not leading_zero and n > 1:
        d[0] = rng.integers(1, 10)
    return "".join(map(str, d.tolist()))


def _one_sample(task: str, size: int, rng: np.random.Generator) -> TaskSample:
    if task == "addition":
        da = int(rng.integers(1, size))  # 1 .. size-1
        a = _digits(rng, da, leading_zero=False)
        b = _digits(rng, size - da, leading_zero=False)
        return TaskSample(f"{a}+{b}=", str(int(a) + int(b)))
    if task == "reversal":
        s = _digits(rng, size)
        return TaskSample(f"rev({s})=", s[::-1])
    if task == "indexing":
        s = _digits(rng, size)
        x = s[int(rng.integers(0, size))]  # a digit that occurs
        return TaskSample(f"wherex({s},{x})=", str(s.index(x)))
    # sorting
    src = "".join(map(str, rng.permutation(10)[:size].tolist()))
    perm = rng.permutation(size)
    tgt = "".join(src[p] for p in perm.tolist())
    return TaskSample(f"sort({src},{tgt})=", "".join(map(str, perm.tolist())))


def make_task_samples(
    task: str,
    n_samples: int,
    *,
    max_len: int | None = None,
    min_len: int | None = None,
    seed: int = 0,
) -> list[TaskSample]:
    """Generate ``n_samples`` random examples of one of P2's synthetic tasks.

    Parameters
    ----------
    task : {"addition", "reversal", "indexing", "sorting"}
        The task (see the module docstring for the formats).
    n_samples : int
        Number of samples (``>= 1``).
    max_len : int, optional
        Longest prompt, in characters with ``"="``. Default: P2's maximum input length
        (addition 9, reversal 22, indexing 20, sorting 18). For sorting it is capped at 28
        (ten distinct digits).
    min_len : int, optional
        Shortest prompt; default the task's minimum (:func:`task_length_range`).
    seed : int, default 0
        Seed of the ``numpy.random.default_rng`` generator; equal seeds give equal samples.

    Returns
    -------
    list of TaskSample
        Samples whose prompt lengths lie in ``[min_len, max_len]``, sizes drawn uniformly
        over the feasible ones.

    Raises
    ------
    ValueError
        If ``task`` is unknown, ``n_samples < 1``, ``min_len`` is below the task's minimum,
        ``max_len < min_len``, or no prompt length of the task falls in the range.

    Examples
    --------
    >>> for s in make_task_samples("indexing", 2, seed=1):
    ...     print(s.prompt, s.answer)
    wherex(79018,8)= 4
    wherex(23842,2)= 0
    >>> make_task_samples("sorting", 1, min_len=14, max_len=14, seed=0)
    [TaskSample(prompt='sort(462,426)=', answer='021')]
    """
    _check_task(task)
    if isinstance(n_samples, bool) or int(n_samples) != n_samples or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    lo, hi = task_length_range(task)
    if min_len is None:
        min_len = lo
    if max_len is None:
        max_len = _DEFAULT_MAX_LEN[task]
    if min_len < lo:
        raise ValueError(
            f"min_len={min_len} is below the shortest {task} prompt ({lo} characters); "
            f"pass min_len >= {lo}"
        )
    if max_len < min_len:
        raise ValueError(
            f"max_len={max_len} is below min_len={min_len}; pass max_len >= min_len "
            f"(the shortest {task} prompt has {lo} characters)"
        )
    if hi is not None:
        max_len = min(max_len, hi)
    slope, off = _SLOPE[task], _OFFSET[task]
    sizes = [
        s
        for s in range(_MIN_SIZE[task], (max_len - off) // slope + 1)
        if min_len <= slope * s + off <= max_len
    ]
    if not sizes:
        raise ValueError(
            f"no {task} prompt has a length in [{min_len}, {max_len}]; {task} prompts have "
            f"length {slope} * size + {off} (size >= {_MIN_SIZE[task]}), widen the range"
        )
    rng = np.random.default_rng(seed)
    drawn = rng.choice(np.asarray(sizes), size=int(n_samples))
    return [_one_sample(task, int(s), rng) for s in drawn.tolist()]


def answer_is_correct(sample: TaskSample) -> bool:
    """Check a sample by re-deriving its answer from the prompt, independently of the generator.

    Parameters
    ----------
    sample : TaskSample
        A sample of any task.

    Returns
    -------
    bool
        True when the prompt is well formed for one of the tasks (including the task's
        constraints: the digit occurs for indexing; distinct digits and a true permutation for
        sorting) and the answer is the correct one.

    Examples
    --------
    >>> answer_is_correct(TaskSample("wherex(134504392,4)=", "2"))
    True
    >>> answer_is_correct(TaskSample("123+456=", "578"))
    False
    """
    p, ans = sample.prompt, sample.answer
    m = _PATTERNS["addition"].match(p)
    if m:
        return ans == str(int(m.group(1)) + int(m.group(2)))
    m = _PATTERNS["reversal"].match(p)
    if m:
        return ans == "".join(reversed(m.group(1)))
    m = _PATTERNS["indexing"].match(p)
    if m:
        s, x = m.group(1), m.group(2)
        first = next((i for i, c in enumerate(s) if c == x), None)
        return first is not None and ans == str(first)
    m = _PATTERNS["sorting"].match(p)
    if m:
        src, tgt = m.group(1), m.group(2)
        if len(set(src)) != len(src) or sorted(src) != sorted(tgt):
            return False
        pos = {c: i for i, c in enumerate(src)}
        return ans == "".join(str(pos[c]) for c in tgt)
    return False


def encode_task_batch(
    samples: Sequence[TaskSample],
    vocab: TaskVocab,
    *,
    max_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode samples as ``prompt + answer + <eos>``, right-padded, with an answer mask.

    Parameters
    ----------
    samples : sequence of TaskSample
        The samples (at least one).
    vocab : TaskVocab
        The vocabulary.
    max_len : int, optional
        Padded sequence length ``L``; default the longest encoded sample.

    Returns
    -------
    tokens : torch.LongTensor of shape (B, L)
        Token ids; positions after ``<eos>`` hold ``vocab.pad_id``.
    loss_mask : torch.BoolTensor of shape (B, L)
        True at the *target* positions: the answer characters and the final ``<eos>``. For a
        next-token loss, ``logits[:, :-1]`` predict ``tokens[:, 1:]`` and are weighted by
        ``loss_mask[:, 1:]`` (the prompt, including ``"="``, is context only).

    Raises
    ------
    ValueError
        If ``samples`` is empty, or a sample is longer than ``max_len`` (pass a larger
        ``max_len``), or holds a character outside the vocabulary.

    Examples
    --------
    >>> v = TaskVocab()
    >>> tokens, mask = encode_task_batch([TaskSample("rev(12)=", "21")], v, max_len=12)
    >>> tokens.tolist()
    [[20, 17, 23, 14, 3, 4, 15, 13, 4, 3, 1, 0]]
    >>> mask.int().tolist()
    [[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0]]
    """
    if len(samples) == 0:
        raise ValueError("samples is empty; pass at least one TaskSample")
    seqs, n_prompt = [], []
    for s in samples:
        ids = vocab.encode(s.prompt) + vocab.encode(s.answer, add_eos=True)
        seqs.append(ids)
        n_prompt.append(len(s.prompt))
    longest = max(len(x) for x in seqs)
    if max_len is None:
        max_len = longest
    if longest > max_len:
        raise ValueError(
            f"a sample encodes to {longest} tokens (prompt + answer + <eos>) but max_len="
            f"{max_len}; pass max_len >= {longest}"
        )
    tokens = torch.full((len(seqs), max_len), vocab.pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), max_len), dtype=torch.bool)
    for b, (ids, npr) in enumerate(zip(seqs, n_prompt)):
        tokens[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[b, npr : len(ids)] = True
    return tokens, mask
