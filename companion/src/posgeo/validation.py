"""posgeo's one validation module: checks of sizes, scalars and arrays with errors that name the fix.

Every public function of the library and of :mod:`posgeo.experiments` validates its inputs
through these helpers, so the same mistake reads the same everywhere::

    >>> from posgeo.validation import check_int
    >>> check_int(3, "n")
    3
    >>> check_int(0, "n")
    Traceback (most recent call last):
    ...
    ValueError: n must be an int >= 1, got 0
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
import math
import sys
from typing import Any, Sequence

__all__ = ['check_table', 'MAX_SIZE', 'check_int', 'check_float', 'check_real_array', 'check_not_complex', 'check_texts', 'suggest_name', 'check_groups', "physical_memory", "check_fits_in_memory",
           "check_positions", "check_tokenizer"]


# --------------------------------------------------------------------------- statistics


def check_table(P: Any, what: str = "P") -> NDArray[np.float64]:
    """Return a position table as a finite float64 ``(n, d)`` array (n >= 2, d >= 1).

    Parameters
    ----------
    P : array-like or torch.Tensor, shape (n, d)
        One row per position (a tensor is detached and copied to the CPU).
    what : str, default "P"
        The name used in the messages.

    Returns
    -------
    numpy.ndarray of float64, shape (n, d)

    Raises
    ------
    TypeError
        Non-numeric input.
    ValueError
        Not 2-D, fewer than 2 rows, or NaN/infinite entries.

    Examples
    --------
    >>> check_table([[0, 1], [1, 0]]).dtype
    dtype('float64')
    """
    torch = sys.modules.get("torch")  # a tensor implies torch is imported: never import it here
    if torch is not None and isinstance(P, torch.Tensor):
        P = P.detach().to("cpu", torch.float64).numpy()
    arr = np.asarray(P)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} must be a numeric (n, d) array, got dtype {arr.dtype}; pass a position table")
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a 2-d (n, d) position table, got shape {arr.shape}; pass one row per position")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"{what} needs at least 2 positions and 1 dimension, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contains NaN or infinite entries; a position table must be finite")
    return arr

MAX_SIZE = 2**31 - 1
"""Largest size (sequence length, vocabulary, count of draws) a check accepts by default."""


def check_int(
    value: Any, name: str, *, minimum: int = 1, maximum: int | None = None, hint: str | None = None
) -> int:
    """Return ``value`` as an ``int`` after checking its type and range.

    Parameters
    ----------
    value : object
        The candidate; ``bool`` is refused (``True`` is not a size).
    name : str
        The parameter's name, used in the message.
    minimum : int, keyword-only, default 1
    maximum : int, keyword-only, optional
        Default :data:`MAX_SIZE`.
    hint : str, keyword-only, optional
        Appended to every error message (after ``"; "``), e.g. why the bound exists.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an integer.
    ValueError
        ``value`` is outside ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(np.int64(4), "k", minimum=2)
    4
    >>> check_int(10**9, "n_init", minimum=0, maximum=1000, hint="each start runs a full optimisation")
    Traceback (most recent call last):
    ...
    ValueError: n_init must be an int <= 1000, got 1000000000; pass a smaller value; each start runs a full optimisation
    """
    tail = f"; {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}{tail}")
    top = MAX_SIZE if maximum is None else maximum
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}{tail}")
    if value > top:
        raise ValueError(f"{name} must be an int <= {top}, got {value}; pass a smaller value{tail}")
    return int(value)


def check_float(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
    hint: str | None = None,
) -> float:
    """Return ``value`` as a finite ``float`` after checking its type and range.

    Parameters
    ----------
    value : object
        A real number (``bool`` and complex refused); NaN and infinities are refused.
    name : str
    minimum, maximum : float, keyword-only, optional
        Bounds (inclusive, unless ``strict_minimum``).
    strict_minimum : bool, keyword-only, default False
        Require ``value > minimum``.
    hint : str, keyword-only, optional
        Appended to every error message (after ``"; "``), e.g. the usual value.

    Returns
    -------
    float

    Raises
    ------
    TypeError, ValueError

    Examples
    --------
    >>> check_float(0.5, "p", minimum=0.0, maximum=1.0)
    0.5
    >>> check_float(float("nan"), "base", minimum=1.0, strict_minimum=True, hint="the usual value is 10000")
    Traceback (most recent call last):
    ...
    ValueError: base must be finite, got nan; the usual value is 10000
    """
    tail = f"; {hint}" if hint else ""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}{tail}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}{tail}")
    if minimum is not None and (v <= minimum if strict_minimum else v < minimum):
        raise ValueError(f"{name} must be {'>' if strict_minimum else '>='} {minimum}, got {v}{tail}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}{tail}")
    return v


def check_not_complex(value: Any, name: str) -> None:
    """Refuse a complex numpy array or torch tensor, which float conversions would truncate.

    For callers that keep their input's array library (a torch tensor stays on its device);
    :func:`check_real_array` calls it before converting to float64.

    Parameters
    ----------
    value : array-like or torch.Tensor
    name : str

    Raises
    ------
    TypeError
        ``value`` has a complex dtype.

    Examples
    --------
    >>> import torch
    >>> check_not_complex(torch.ones(2), "X")
    >>> check_not_complex(torch.ones(2, dtype=torch.complex64), "X")
    Traceback (most recent call last):
    ...
    TypeError: X must be real, got a complex array; pass its real part or its modulus explicitly
    """
    torch = sys.modules.get("torch")
    is_tensor = torch is not None and isinstance(value, torch.Tensor)
    complex_ = value.is_complex() if is_tensor else np.iscomplexobj(value)
    if complex_:
        raise TypeError(f"{name} must be real, got a complex array; pass its real part or its modulus explicitly")


def check_real_array(value: Any, name: str) -> np.ndarray:
    """Return ``value`` as a float64 array, refusing complex input (which ``astype`` would truncate).

    Parameters
    ----------
    value : array-like
    name : str

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    TypeError
        Complex, object or string input.

    Examples
    --------
    >>> check_real_array([1, 2], "x").dtype
    dtype('float64')
    >>> check_real_array([1j], "x")
    Traceback (most recent call last):
    ...
    TypeError: x must be real, got a complex array; pass its real part or its modulus explicitly
    """
    arr = np.asarray(value)
    check_not_complex(arr, name)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


# --------------------------------------------------------------------------- texts


def _is_missing(value: Any) -> bool:
    """``None``, a float NaN, ``pandas.NA`` or ``pandas.NaT`` (without importing pandas)."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return type(value).__name__ in ("NAType", "NaTType")


def _shown(value: Any, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def check_texts(
    values: Any,
    name: str,
    *,
    drop_empty: bool = False,
    allow_empty: bool = False,
    drop_hint: str | None = None,
) -> list[str]:
    """Return a column of texts as a list of ``str``, refusing what is not text.

    The one check of text input, used by every loader (:func:`posgeo.load_texts`,
    :func:`posgeo.tokenize`, the audit's readers): nothing is converted with ``str()``, so
    an integer column is not turned into digit tokens and a null into the word ``"nan"``.

    Parameters
    ----------
    values : iterable of str
        A list, tuple, numpy array or pandas Series of texts (numpy ``str_`` items are
        returned as ``str``). A bare ``str`` or ``bytes``, a DataFrame or a non-iterable is
        refused.
    name : str
        What the values are (e.g. ``"column 'sentence' of train.parquet"``), used in messages.
    drop_empty : bool, keyword-only, default False
        Drop missing values (``None``, NaN, ``pandas.NA``) and empty or blank strings
        instead of raising.
    allow_empty : bool, keyword-only, default False
        Keep empty or blank strings (a tokeniser makes them empty sequences); missing values
        are still reported (or dropped with ``drop_empty``).
    drop_hint : str, keyword-only, optional
        How the caller drops missing or empty texts, replacing ``"pass drop_empty=True to
        drop them, or fill them in"`` in the message (e.g. a command-line flag).

    Returns
    -------
    list of str
        The texts in order, without the dropped ones.

    Raises
    ------
    TypeError
        ``values`` is a single string, a DataFrame or not iterable, or an item is neither
        text nor missing (the message names the first such row, 0-based, and its type).
    ValueError
        Missing or empty texts and ``drop_empty=False``: the message gives their count,
        their first rows (0-based) and how to drop them.

    Examples
    --------
    >>> check_texts(["a fine film", "dull"], "texts")
    ['a fine film', 'dull']
    >>> check_texts(["a fine film", None, ""], "texts", drop_empty=True)
    ['a fine film']
    >>> check_texts(["a fine film", None, ""], "texts")
    Traceback (most recent call last):
    ...
    ValueError: texts has 2 missing or empty texts (rows 1, 2); pass drop_empty=True to drop them, or fill them in
    >>> check_texts([3, 4], "column 'label'")
    Traceback (most recent call last):
    ...
    TypeError: column 'label' holds int values, not text (row 0: 3); pass strings: pick the column that holds the text, or convert the values yourself
    >>> check_texts("hello world", "texts")
    Traceback (most recent call last):
    ...
    TypeError: texts is a single str ('hello world'), not a list of texts; pass a list of texts, e.g. [text]
    """
    if isinstance(values, str):
        raise TypeError(f"{name} is a single str ({_shown(values)}), not a list of texts; pass a list of texts, e.g. [text]")
    if isinstance(values, (bytes, bytearray)):
        raise TypeError(
            f"{name} is bytes, not a list of texts; decode it and pass a list of texts, e.g. [data.decode('utf-8')]"
        )
    if hasattr(values, "columns") and hasattr(values, "iloc"):
        raise TypeError(f"{name} is a DataFrame, not a list of texts; pass one column of it, e.g. df['text']")
    try:
        items = list(values)
    except TypeError:
        raise TypeError(
            f"{name} must be an iterable of str (a list, array or pandas Series of texts), got {type(values).__name__}"
        ) from None
    texts: list[str] = []
    empty: list[int] = []
    for k, v in enumerate(items):
        if isinstance(v, str):
            if not allow_empty and not v.strip():
                empty.append(k)
            else:
                texts.append(v if type(v) is str else str(v))
        elif _is_missing(v):
            empty.append(k)
        else:
            fix = (
                "decode them first (value.decode('utf-8'))"
                if isinstance(v, (bytes, bytearray))
                else "pass strings: pick the column that holds the text, or convert the values yourself"
            )
            raise TypeError(f"{name} holds {type(v).__name__} values, not text (row {k}: {_shown(v)}); {fix}")
    if empty and not drop_empty:
        shown = ", ".join(str(k) for k in empty[:5]) + (", ..." if len(empty) > 5 else "")
        plural = "s" if len(empty) > 1 else ""
        hint = drop_hint or "pass drop_empty=True to drop them, or fill them in"
        raise ValueError(f"{name} has {len(empty)} missing or empty text{plural} (row{plural} {shown}); {hint}")
    return texts


def _edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, adjacent swaps."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def check_groups(groups: Any, n_items: int, *, what: str = "sequence") -> tuple[NDArray[np.int64], int]:
    """Check one group id per item and number the groups ``0..G-1``.

    Parameters
    ----------
    groups : array-like of int, shape (n_items,)
        Any integer ids (e.g. :func:`posgeo.overlap_groups`).
    n_items : int
        How many ids there must be.
    what : str, keyword-only, default "sequence"
        The item, as the messages name it.

    Returns
    -------
    (inverse, n_groups)
        ``inverse[k]`` in ``0..n_groups-1`` is item k's group (numbered in the order of
        the sorted ids), and ``n_groups`` the number of distinct ids.

    Raises
    ------
    TypeError
        Not a 1-d integer array.
    ValueError
        The wrong number of ids.

    Examples
    --------
    >>> inverse, n = check_groups([7, 3, 7], 3)
    >>> inverse.tolist(), n
    ([1, 0, 1], 2)
    >>> check_groups([0, 1], 3)
    Traceback (most recent call last):
    ...
    ValueError: groups has 2 entries but the corpus has 3 sequences; pass one group id per sequence
    """
    g = np.asarray(groups)
    if g.ndim != 1 or g.dtype.kind not in "iu":
        raise TypeError(
            f"groups must be a 1-d integer array (one group id per {what}), got dtype {g.dtype} and "
            f"shape {g.shape}; pass e.g. posgeo.overlap_groups(corpus)"
        )
    if g.size != n_items:
        raise ValueError(
            f"groups has {g.size} entries but the corpus has {n_items} {what}s; pass one group id per {what}"
        )
    if g.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    _, inverse = np.unique(g, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    return inverse, int(inverse.max()) + 1


def suggest_name(value: str, choices: Any, *, max_distance: int = 2) -> str | None:
    """The choice that ``value`` most likely misspells, for a "did you mean" hint.

    Compared without case by edit distance (insertions, deletions, substitutions and swaps
    of adjacent letters each count 1).

    Parameters
    ----------
    value : str
        The name as given.
    choices : iterable of str
        The valid names, in order of preference (the first of equally close ones wins).
    max_distance : int, keyword-only, default 2
        Largest distance still suggested.

    Returns
    -------
    str or None
        The closest choice within ``max_distance`` that differs from ``value``; ``None``
        when ``value`` is itself a choice or nothing is close.

    Examples
    --------
    >>> suggest_name("sst3", ["synthetic", "sst2", "imdb"])
    'sst2'
    >>> suggest_name("wikitext", ["sst2", "imdb"]) is None
    True
    """
    names = [str(c) for c in choices]
    if not isinstance(value, str) or value in names:
        return None
    best: tuple[int, str] | None = None
    for c in names:
        d = _edit_distance(value.lower(), c.lower())
        if d <= max_distance and (best is None or d < best[0]):
            best = (d, c)
    return None if best is None else best[1]


def _bytes_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def physical_memory() -> int:
    """This machine's physical memory in bytes (0 where the platform does not say).

    Examples
    --------
    >>> physical_memory() >= 0
    True
    """
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - non-POSIX
        return 0


def check_fits_in_memory(shape: Sequence[int], name: str, *, itemsize: int = 8) -> None:
    """Refuse an array that could not fit in this machine's memory, saying how much it needs.

    Parameters
    ----------
    shape : sequence of int
        The array's shape (each already checked by :func:`check_int`).
    name : str
        What the array is, for the message.
    itemsize : int, keyword-only, default 8
        Bytes per entry (8 for float64).

    Raises
    ------
    ValueError
        When ``prod(shape) * itemsize`` exceeds the physical memory.

    Examples
    --------
    >>> check_fits_in_memory((3, 4), "a table")
    >>> check_fits_in_memory((2**40, 2**20), "a table")
    Traceback (most recent call last):
    ...
    ValueError: a table of shape (1099511627776, 1048576) would need 8.0 EiB, more than this machine's ...
    """
    need = float(itemsize)
    for s in shape:
        need *= float(s)
    total = physical_memory()
    if total and need > total:
        raise ValueError(
            f"{name} of shape {tuple(int(s) for s in shape)} would need {_bytes_text(need)}, more than this "
            f"machine's {_bytes_text(total)} of memory; pass smaller sizes"
        )


def check_positions(
    value: Any,
    name: str = "n_positions",
    *,
    per_position: float,
    per_pair: float = 0.0,
    what: str,
    option: str | None = None,
    minimum: int = 1,
) -> int:
    """Return a number of positions after checking that its tables can fit in this machine's memory.

    The one bound on ``n_positions`` (``--positions``) of the tools that count or compare
    positions: ``per_position * n + per_pair * n**2`` bytes (linear tables such as the
    counts' reach and row pointers; ``(n, n)`` float64 matrices at 8 bytes a pair) must not
    exceed the physical memory (:func:`physical_memory`), so that a value that cannot fit
    is refused before anything is read, with the largest value that fits.

    Parameters
    ----------
    value : int
        The number of positions (checked by :func:`check_int`).
    name : str, default "n_positions"
        The parameter's name, used in the messages.
    per_position : float, keyword-only
        Bytes needed per position.
    per_pair : float, keyword-only, default 0
        Bytes needed per pair of positions (8 for one ``(n, n)`` float64 matrix).
    what : str, keyword-only
        What needs the memory, for the message (e.g. ``"the counts"``).
    option : str, keyword-only, optional
        The command-line option that sets it (``"--positions"``), named in the fix.
    minimum : int, keyword-only, default 1

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an int.
    ValueError
        ``value`` is below ``minimum``, above :data:`MAX_SIZE`, or its tables cannot fit.

    Examples
    --------
    >>> check_positions(512, per_position=64, what="the counts")
    512
    >>> check_positions(2**31 - 1, per_position=64, per_pair=8, what="the distance matrix", option="--positions")
    Traceback (most recent call last):
    ...
    ValueError: n_positions (--positions) = 2,147,483,647 would need 32.0 EiB for the distance matrix, more than this machine's ... of memory; pass n_positions (--positions) ... or fewer
    """
    n = check_int(value, name, minimum=minimum)
    need = float(per_position) * n + float(per_pair) * n * n
    total = physical_memory()
    if total and need > total:
        a, b = float(per_pair), float(per_position)  # the largest n with a n^2 + b n <= total
        largest = int(total // b) if a == 0 else int((-b + math.sqrt(b * b + 4 * a * total)) / (2 * a))
        while largest > 0 and a * largest * largest + b * largest > total:  # exact, whatever the rounding
            largest -= 1
        while a * (largest + 1) ** 2 + b * (largest + 1) <= total:
            largest += 1
        shown = f"{name} ({option})" if option else name
        fix = f"pass {shown} {largest:,} or fewer" if largest >= minimum else "run on a machine with more memory"
        raise ValueError(
            f"{shown} = {n:,} would need {_bytes_text(need)} for {what}, more than this machine's "
            f"{_bytes_text(total)} of memory; {fix}"
        )
    return n


_PROBE = "The quick brown fox jumps over the lazy dog."
_MIN_VOCAB = 100


def check_tokenizer(tokenizer: Any, *, where: str) -> None:
    """Refuse a tokenizer that is empty: a tiny vocabulary, or no token for an English sentence.

    ``transformers`` builds such a tokenizer for a model folder that lacks its tokenizer
    files; counting or auditing with it would give a vocabulary of one and no tokens.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer, transformers tokenizer, or tokenizer-like
        Anything with ``get_vocab_size()`` or ``len()``, and ``encode()`` or ``encode_batch()``.
    where : str, keyword-only
        Where it was loaded from (the model folder or name), named in the message.

    Raises
    ------
    ValueError
        A vocabulary of fewer than 100 tokens, or ``"The quick brown fox jumps over the lazy
        dog."`` tokenised to nothing (one line: ``where`` and the files a tokenizer needs).

    Examples
    --------
    >>> from tokenizers import Tokenizer
    >>> from tokenizers.models import WordLevel
    >>> check_tokenizer(Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")), where="./my-model")
    Traceback (most recent call last):
    ...
    ValueError: the tokenizer of ./my-model is empty (a vocabulary of 1 token): ...
    """
    try:
        size = tokenizer.get_vocab_size(with_added_tokens=True)
    except TypeError:
        size = tokenizer.get_vocab_size()
    except AttributeError:
        size = len(tokenizer)
    size = int(size)
    files = ("a tokenizer needs its files beside the model: tokenizer.json, or vocab.txt (WordPiece) or "
             "vocab.json + merges.txt (BPE), with tokenizer_config.json; copy them from the model's source, "
             "or pass a folder or name that has them")
    if size < _MIN_VOCAB:
        raise ValueError(
            f"the tokenizer of {where} is empty (a vocabulary of {size} token{'s' if size != 1 else ''}): {files}"
        )
    if hasattr(tokenizer, "encode"):
        out = tokenizer.encode(_PROBE, add_special_tokens=False)
    else:
        out = tokenizer.encode_batch([_PROBE], add_special_tokens=False)[0]
    ids = getattr(out, "ids", out)
    if len(ids) == 0:
        raise ValueError(
            f"the tokenizer of {where} is empty (it turns {_PROBE!r} into no token; a vocabulary of {size:,}): {files}"
        )
