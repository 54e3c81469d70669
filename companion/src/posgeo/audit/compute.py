r"""The audit's computation: five steps, from the model and the corpus to the report.

:func:`audit` checks and resolves its inputs (:mod:`posgeo.audit.inputs`), then reads the
report from the posgeo cache or runs :func:`compute_report`, which calls five steps in this
order, each a function of explicit inputs returning a small frozen dataclass:

1. :func:`data_step` (:class:`DataStep`): with the model's configuration and tokenizer
   (:func:`~posgeo.audit.inputs.load_model` with ``weights=False``; a learned table's
   configured size is checked against ``n_positions`` first), tokenise the corpus and check
   that enough sequences reach the last position; or, auditing stored counts
   (``posgeo audit --counts``), :func:`counts_step` (:class:`CountsStep`): load them, check
   that they were made with the model's tokenizer and reach the last position. The data
   comes before the weights, so that a wrong column, split or length fails before any
   weight is read;
2. :func:`model_step` (:class:`ModelStep`): read the weights where the positions are a
   table (:func:`~posgeo.audit.inputs.load_weights`) and the position vectors
   (:func:`position_vectors`);
3. :func:`geometry_step` (:class:`GeometryStep`): the corpus geometry (chapter 3), plug-in and
   noise-corrected, and its effective rank (chapter 4);
4. :func:`stress_step` (:class:`StressStep`): the best fit any encoding can reach (PMDS and
   SMACOF), the model's fit, its separation and monotonicity, and two baselines of the
   model's width (chapters 4, 5, 8);
5. :func:`layers_step` (:class:`LayersStep`): projected stress through every layer
   (chapter 9), for BERT-architecture encoders;

and assembles their results into an :class:`~posgeo.audit.report.AuditReport`.

Position vectors of a model
---------------------------
- *Learned absolute table* (BERT, RoBERTa, GPT-2, ...): the rows of the table that the model
  adds at our positions. Corpus position ``i`` is the ``i``-th token of a text tokenised
  **without** special tokens, and the model sees it at table row ``i + offset`` where
  ``offset`` is the number of special tokens the tokenizer prepends (``[CLS]`` for BERT: 1;
  GPT-2: 0; ``<s>`` for RoBERTa: 1) plus the architecture's position-id shift
  (RoBERTa-style tables start at ``padding_idx + 1``: 2 for RoBERTa; OPT adds 2). The
  prefix is measured by tokenising a probe sentence with and without special tokens; the
  shift is read from the position embedding module (``padding_idx``, ``offset``).
- *RoPE* (Llama, Mistral, GPT-NeoX, ...): the vector form of chapter 4,
  :func:`posgeo.rope_encoding` with the model's head size, rotated dimensions (partial
  rotary factor) and base :math:`\theta`. Its distances depend on the offset only, so the
  offset above does not matter. RoPE scaling variants (linear, YaRN, Llama 3) are not
  modelled: the unscaled frequencies are used.
- *ALiBi* (BLOOM, MPT): :func:`posgeo.alibi_encoding` with the model's head count.
- *No positional signal*, or a scheme posgeo cannot read: the model-dependent numbers are
  left empty (``null`` in the JSON) and the report says why.

For RoPE and ALiBi models only the configuration and the tokenizer are loaded, never the
weights.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from posgeo import Corpus, CorpusGeometry, cached, corpus_geometry, noise_share, progress_bar, stress_table
from posgeo import PositionalCounts, tokenizer_id
from posgeo import (NESTED_SPLITS, bootstrap_geometry, hybrid_hellinger_matrix, matched_hellinger_matrix, overlap_groups,
                    stress_differences, stress_intervals)
from posgeo.validation import check_int
from posgeo import alibi_encoding, random_encoding, rope_encoding, sinusoidal_encoding
from posgeo import classical_mds, effective_rank, layer_stress_table, separation_stats, tokenize
from posgeo import find_position_embedding, learned_position_table, monotonicity_violation_rate, pairwise_distances

from .inputs import (
    AuditError,
    MAX_DOCUMENT_TOKENS,
    AuditParameters,
    DatasetRef,
    LoadedModel,
    ModelRef,
    check_dataset,
    check_parameters,
    load_counts,
    load_data,
    load_model,
    load_weights,
    resolve_counts,
    resolve_dataset,
    resolve_model,
)
from .report import AuditReport

__all__ = [
    'audit',
    'compute_report',
    'ModelStep',
    'model_step',
    'position_vectors',
    'DataStep',
    'data_step',
    'CountsStep',
    'counts_step',
    'GeometryStep',
    'geometry_step',
    'StressStep',
    'stress_step',
    'RANDOM_TABLES',
    'random_tables',
    'random_table_stresses',
    'LayersStep',
    'layers_step',
]

_MIN_COUNT = 100  # positions reached by fewer sequences are flagged (as in corpus_geometry)
_STEPS = (
    "loading the tokenizer and the data",
    "loading the model's weights",
    "corpus geometry",
    "stress, separation, monotonicity",
    "layers",
    "sampling intervals",
)


# --------------------------------------------------------------------------- 1. the model
@dataclass(frozen=True, eq=False)
class ModelStep:
    """The model and its position vectors (see :func:`model_step`).

    Attributes
    ----------
    loaded : LoadedModel
    vectors : numpy.ndarray or None, shape (n_positions, k)
        The position vectors of corpus positions ``0..n-1`` (``None`` without a positional
        signal posgeo can read).
    info : dict
        The report's ``model`` section without its ``label``: ``model_type``,
        ``positional_kind``, ``encoding``, ``position_offset``, ``special_tokens_prepended``,
        ``position_id_shift``, ``dimension``, ``hidden_size``, ``n_heads``, ``head_dim``,
        ``n_layers``, ``table_rows``.
    notes : dict of str to str
        Notes of this step (``"declared"``, ``"offset"``, ``"rope"``, ``"model"``).
    """

    loaded: LoadedModel
    vectors: np.ndarray | None
    info: dict[str, Any]
    notes: dict[str, str]

    @property
    def width(self) -> int:
        """Width of the baselines: the vectors' dimension, else the hidden size, else 384."""
        return self.info["dimension"] or self.info["hidden_size"] or 384


def _special_prefix(tokenizer: Any) -> int | None:
    """Number of special tokens the tokenizer puts before the text (None if undetermined)."""
    probe = "the position of a word in a sentence"
    a = tokenize([probe], tokenizer=tokenizer, add_special_tokens=True, progress=False)[0].tolist()
    b = tokenize([probe], tokenizer=tokenizer, add_special_tokens=False, progress=False)[0].tolist()
    for start in range(len(a) - len(b) + 1):
        if a[start : start + len(b)] == b:
            return start
    return None


def _position_shift(embedding: Any) -> int:
    """Row of the table used for position id 0: RoBERTa-style ``padding_idx + 1``, OPT's ``offset``."""
    shift = 0
    pad = getattr(embedding, "padding_idx", None)
    if pad is not None:
        shift += int(pad) + 1
    off = getattr(embedding, "offset", None)
    if isinstance(off, (int, np.integer)) and not isinstance(off, bool):
        shift += int(off)
    return shift


def _config_int(config: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def _rope_parameters(config: Any) -> tuple[float, float, str]:
    """RoPE base, partial rotary factor and scaling type from a (transformers 4 or 5) config."""
    params = getattr(config, "rope_parameters", None)
    params = dict(params) if isinstance(params, Mapping) else {}
    if params and not {"rope_theta", "rope_type", "partial_rotary_factor"} & set(params):
        first = next(iter(params.values()))  # per-layer-type parameters (e.g. Gemma 3): take the first
        params = dict(first) if isinstance(first, Mapping) else {}
    theta = params.get("rope_theta", getattr(config, "rope_theta", None)) or 10000.0
    factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    if factor is None:
        factor = getattr(config, "rotary_pct", None)
    rope_type = str(params.get("rope_type", params.get("type", "default")) or "default")
    scaling = getattr(config, "rope_scaling", None)
    if rope_type == "default" and isinstance(scaling, Mapping) and scaling:
        rope_type = str(scaling.get("rope_type", scaling.get("type", "default")))
    return float(theta), 1.0 if factor is None else float(factor), rope_type


def position_vectors(loaded: LoadedModel, *, n_positions: int) -> ModelStep:
    """The position vectors of a loaded model for corpus positions ``0..n_positions-1``.

    How they are obtained for each kind of model is in the module docstring.

    Parameters
    ----------
    loaded : LoadedModel
        Its ``module`` is needed for a learned table only.
    n_positions : int
        Number of corpus positions.

    Returns
    -------
    ModelStep

    Raises
    ------
    AuditError
        The learned table has fewer than ``offset + n_positions`` rows (the message says how
        many positions fit).

    Examples
    --------
    >>> from transformers import LlamaConfig
    >>> from posgeo import default_tokenizer
    >>> from posgeo.audit.inputs import LoadedModel, resolve_model
    >>> config = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2)
    >>> rope = LoadedModel(ref=resolve_model(None), config=config, tokenizer=default_tokenizer(),
    ...                    module=None, kind="rotary")
    >>> step = position_vectors(rope, n_positions=6)
    >>> step.vectors.shape, step.info["head_dim"], step.notes
    ((6, 32), 8, {})
    """
    n = n_positions
    notes: dict[str, str] = {}
    config = loaded.config
    hidden = _config_int(config, "hidden_size", "d_model", "n_embd", "dim")
    heads = _config_int(config, "num_attention_heads", "n_head", "n_heads")
    head_dim = _config_int(config, "head_dim") or (hidden // heads if hidden and heads and hidden % heads == 0 else None)
    info: dict[str, Any] = {
        "model_type": str(getattr(config, "model_type", "") or "unknown"),
        "positional_kind": loaded.kind,
        "encoding": None,
        "position_offset": None,
        "special_tokens_prepended": None,
        "position_id_shift": None,
        "dimension": None,
        "hidden_size": hidden,
        "n_heads": heads,
        "head_dim": head_dim,
        "n_layers": _config_int(config, "num_hidden_layers", "n_layer", "n_layers", "num_layers"),
        "table_rows": None,
    }

    def done(vectors: np.ndarray | None) -> ModelStep:
        return ModelStep(loaded=loaded, vectors=vectors, info=info, notes=notes)

    kind = loaded.kind
    if loaded.declared_kind is not None:
        notes["declared"] = (
            f"the model's config declares no position encoding (position_embedding_type "
            f"{getattr(config, 'position_embedding_type', None)!r}), but the installed transformers adds its "
            "learned position table anyway (the same token gets different input vectors at different positions), "
            "so the audit uses that table"
        )
    prefix = _special_prefix(loaded.tokenizer)
    info["special_tokens_prepended"] = prefix
    if kind == "learned-absolute":
        module = loaded.module
        emb = find_position_embedding(module)
        try:
            table = learned_position_table(module)
        except ValueError as exc:
            notes["model"] = f"no position vectors: {exc}"
            return done(None)
        shift = _position_shift(emb)
        if prefix is None:
            prefix = 0
            notes["offset"] = (
                "could not tell how many special tokens the tokenizer prepends (the probe sentence was not "
                "found inside its encoding); assumed 0"
            )
        offset = prefix + shift
        rows = table.shape[0]
        if offset + n > rows:
            raise AuditError(
                f"the model's position table has {rows} rows and corpus position 0 is its row {offset}, so at most "
                f"{rows - offset} positions fit; pass --positions {rows - offset} (n_positions={rows - offset}) or fewer"
            )
        info.update(
            position_offset=offset, position_id_shift=shift, dimension=int(table.shape[1]), table_rows=int(rows),
            encoding=f"rows {offset}..{offset + n - 1} of the learned absolute position table ({rows} x {table.shape[1]})",
        )
        return done(table[offset : offset + n].copy())
    if kind == "rotary":
        if not heads or not head_dim:
            notes["model"] = "RoPE model whose head count or head size cannot be read from its config; no position vectors"
            return done(None)
        theta, factor, rope_type = _rope_parameters(config)
        rot = _config_int(config, "rotary_dim") or int(head_dim * factor)
        rot -= rot % 2
        if rot < 2:
            notes["model"] = f"RoPE rotates fewer than 2 dimensions per head (head size {head_dim}, factor {factor}); no position vectors"
            return done(None)
        P = rope_encoding(n, heads * rot, head_dim=rot, base=theta)
        info.update(
            position_offset=prefix, position_id_shift=0, dimension=int(P.shape[1]),
            encoding=(f"RoPE vectors R_m u (chapter 4): {heads} heads x {rot} rotated dimensions, base {theta:g}"
                      + (f" (partial rotary factor {factor:g})" if rot != head_dim else "")),
        )
        if rope_type not in ("default", "None"):
            notes["rope"] = (f"the model uses RoPE scaling {rope_type!r}, which the vectors do not model: they use the "
                             "unscaled frequencies")
        return done(P)
    if kind == "alibi":
        if not heads:
            notes["model"] = "ALiBi model whose head count cannot be read from its config; no position vectors"
            return done(None)
        P = alibi_encoding(n, heads)
        info.update(
            position_offset=prefix, position_id_shift=0, dimension=int(P.shape[1]),
            encoding=f"ALiBi vectors p_i = i (m_1, ..., m_H) (chapter 4) with the standard slopes of {heads} heads",
        )
        return done(P)
    if kind == "none":
        notes["model"] = (
            "no positional signal: the model's config declares no position encoding (position_embedding_type "
            f"{getattr(config, 'position_embedding_type', None)!r}) and the installed code agrees (one token gets the "
            "same input vector at every position); its positions are indistinguishable at the input "
            "(chapter 2), so the model-dependent numbers are empty"
        )
    else:
        notes["model"] = (
            f"posgeo cannot tell how this model ({info['model_type']}) encodes position (model_positional_kind "
            "returned 'unknown': e.g. relative-position BERT variants or DistilBERT's sinusoidal table); the "
            "model-dependent numbers are empty"
        )
    return done(None)


def _check_table_rows(loaded: LoadedModel, n: int) -> None:
    """Refuse, before the weights are read, more positions than a learned table's configured
    size holds (:func:`position_vectors` checks the exact rows, with the position-id shift)."""
    if loaded.kind != "learned-absolute":
        return
    rows = _config_int(loaded.config, "max_position_embeddings", "n_positions", "n_ctx")
    prefix = _special_prefix(loaded.tokenizer) or 0
    if rows is not None and prefix + n > rows:
        raise AuditError(
            f"the model's position table has {rows} rows (its config) and corpus position 0 is at least its row "
            f"{prefix}, so at most {rows - prefix} positions fit; pass --positions {rows - prefix} "
            f"(n_positions={rows - prefix}) or fewer"
        )


def model_step(ref: ModelRef, *, n_positions: int) -> ModelStep:
    """Step 1: load the model (:func:`~posgeo.audit.inputs.load_model`) and read its position vectors.

    Parameters
    ----------
    ref : ModelRef
    n_positions : int
        Number of corpus positions.

    Returns
    -------
    ModelStep
        See :func:`position_vectors`.

    Raises
    ------
    AuditError
        The model cannot be loaded, or its table cannot serve ``n_positions`` positions.

    Examples
    --------
    >>> from posgeo.audit.inputs import resolve_model
    >>> step = model_step(resolve_model(None), n_positions=4)
    >>> step.vectors.shape, step.info["position_offset"], step.width
    ((4, 384), 1, 384)
    """
    return position_vectors(load_model(ref), n_positions=n_positions)


# --------------------------------------------------------------------------- 2. the data
@dataclass(frozen=True, eq=False)
class DataStep:
    """The tokenised corpus (see :func:`data_step`).

    Attributes
    ----------
    corpus : posgeo.Corpus
    dataset : dict
        The report's ``dataset`` section: ``description``, ``source``, ``text_column``,
        ``sequences``, ``tokens``, ``median_length``, ``max_length``, ``vocab_size``,
        ``tokenizer``.
    """

    corpus: Corpus
    dataset: dict[str, Any]


def _too_short(lengths: np.ndarray, n: int, min_reach: int, what: str) -> AuditError:
    m = int(lengths.size)
    reach = int((lengths >= n).sum())
    if m < min_reach:
        return AuditError(
            f"{what} has only {m} sequences; the audit needs at least {min_reach} sequences reaching the last "
            "position: pass a larger dataset (or a larger --max-sequences)"
        )
    best = int(np.sort(lengths)[::-1][min_reach - 1])
    if best < 3:
        return AuditError(
            f"{what} is too short: fewer than {min_reach} of its {m} sequences have 3 tokens; pass longer sequences"
        )
    return AuditError(
        f"only {reach} of the {m} sequences of {what} reach position {n - 1} (n_positions={n}); the audit needs "
        f"{min_reach}. The largest number of positions that {min_reach} sequences reach is {best}: pass --positions "
        f"{best} (n_positions={best}) or fewer"
    )


def data_step(
    ds: DatasetRef,
    model: LoadedModel,
    *,
    n_positions: int,
    min_reach: int,
    split: str,
    column: str | None,
    data_dir: str | os.PathLike[str] | None,
    max_sequences: int | None,
    seed: int,
    cache: bool,
    progress: bool,
    drop_empty: bool = False,
) -> DataStep:
    """Step 2: tokenise the dataset with the model's tokenizer; check that it reaches ``n_positions``.

    Parameters
    ----------
    ds : DatasetRef
    model : LoadedModel
        Its tokenizer tokenises; its reference names it.
    n_positions : int
        At least ``min_reach`` sequences must have ``n_positions`` tokens.
    min_reach : int
    split, column, data_dir, max_sequences, seed, cache, progress, drop_empty
        As in :func:`audit` (see :func:`~posgeo.audit.inputs.load_data`).

    Returns
    -------
    DataStep

    Raises
    ------
    AuditError
        Too few sequences reach the last position (the message names the largest
        ``n_positions`` that works), and see :func:`~posgeo.audit.inputs.load_data`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo import default_tokenizer
    >>> from posgeo.audit.inputs import LoadedModel, resolve_dataset, resolve_model
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("the cat sat on the mat\\n" * 12)
    >>> ds = resolve_dataset(f, split="train", column=None, data_dir=None)
    >>> bert = LoadedModel(ref=resolve_model(None), config=None, tokenizer=default_tokenizer(), module=None, kind="none")
    >>> step = data_step(ds, bert, n_positions=6, min_reach=10, split="train", column=None, data_dir=None,
    ...                  max_sequences=None, seed=0, cache=False, progress=False)
    >>> step.dataset["sequences"], step.dataset["max_length"]
    (12, 6)
    """
    data = load_data(ds, tokenizer=model.tokenizer, tokenizer_id=model.ref.identifier, split=split, column=column,
                     data_dir=data_dir, max_sequences=max_sequences, seed=seed, cache=cache, progress=progress,
                     drop_empty=drop_empty, max_tokens=max(MAX_DOCUMENT_TOKENS, n_positions + 64))
    seqs = data.corpus.sequences
    lengths = seqs.lengths
    if int((lengths >= n_positions).sum()) < min_reach:
        raise _too_short(lengths, n_positions, min_reach, f"the dataset {ds.spec!r}")
    dataset = {
        "description": data.description,
        "source": ds.kind,
        "text_column": data.text_column,
        "sequences": int(len(seqs)),
        "tokens": int(seqs.tokens.size),
        "median_length": float(np.median(lengths)),
        "max_length": int(lengths.max()),
        "vocab_size": int(data.vocab_size),
        "tokenizer": model.ref.label,
    }
    return DataStep(corpus=data.corpus, dataset=dataset)


# --------------------------------------------------------------------------- 2'. stored counts
_NO_INTERVALS_FROM_COUNTS = (
    "no sampling intervals: the audit's intervals halve the corpus by sequence many times (keeping overlapping "
    "texts together) and recompute the corrected geometry on each half; stored counts keep no sequences and only "
    "one fixed half-split, which cannot give an interval; audit the dataset itself for them"
)


@dataclass(frozen=True, eq=False)
class CountsStep:
    """Stored positional counts, checked for the model (see :func:`counts_step`).

    Attributes
    ----------
    counts : posgeo.PositionalCounts
        Truncated to ``n_positions``.
    dataset : dict
        The report's ``dataset`` section, as :class:`DataStep`'s (``source`` ``"counts"``;
        ``tokens``, ``median_length``, ``max_length`` and ``text_column`` are ``None``: the
        counts keep no lengths beyond their last position, nor the column) plus
        ``counted_positions`` and ``shards``.
    notes : dict of str to str
        ``"counts"``: what was audited; ``"intervals"``: why there are no intervals.
    """

    counts: PositionalCounts
    dataset: dict[str, Any]
    notes: dict[str, str]


def counts_step(ds: DatasetRef, model: LoadedModel, *, n_positions: int, min_reach: int) -> CountsStep:
    """Step 2 from stored counts: load them, check the tokenizer and the reach, truncate.

    Parameters
    ----------
    ds : DatasetRef
        Of kind ``"counts"`` (:func:`~posgeo.audit.inputs.resolve_counts`).
    model : LoadedModel
        Its tokenizer must be the one the counts were made with (same
        :func:`posgeo.tokenizer_id` digest).
    n_positions : int
        At most the counts' ``n_positions``; at least ``min_reach`` documents must reach
        position ``n_positions - 1``.
    min_reach : int

    Returns
    -------
    CountsStep

    Raises
    ------
    AuditError
        An unreadable counts file, counts of another tokenizer (or of another vocabulary
        size) or counted with special tokens, more positions than were counted, or too few documents reaching the last
        position (the message names the fix).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo import default_tokenizer, positional_counts
    >>> from posgeo.audit.inputs import LoadedModel, resolve_counts, resolve_model
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "lines.txt").write_text("the cat sat on the mat\\n" * 12)
    >>> f = positional_counts(d / "lines.txt", column="text", n_positions=8, progress=False).save(d / "c.npz")
    >>> bert = LoadedModel(ref=resolve_model(None), config=None, tokenizer=default_tokenizer(), module=None, kind="none")
    >>> step = counts_step(resolve_counts(f), bert, n_positions=6, min_reach=10)
    >>> step.counts.n_positions, step.dataset["sequences"], step.dataset["counted_positions"]
    (6, 12, 8)
    """
    counts = load_counts(ds)
    spec, n = ds.spec, n_positions
    if counts.options.get("add_special_tokens"):
        raise AuditError(
            f"the counts {spec!r} were made with special tokens ([CLS], ...) counted as positions; the audit's position "
            "0 is the first token of a text: count again without --add-special-tokens"
        )
    if not counts.matches_tokenizer(model.tokenizer):
        raise AuditError(
            f"the counts {spec!r} were made with the tokenizer {counts.tokenizer!r}, but the model {model.ref.label} "
            f"has {tokenizer_id(model.tokenizer)!r} (the digests differ): count again with the model's tokenizer "
            "(`posgeo count ... --tokenizer MODEL_FOLDER_OR_ID`), or audit the model whose tokenizer made them"
        )
    sizes = {int(len(model.tokenizer))}
    backend = getattr(model.tokenizer, "backend_tokenizer", None)
    if backend is not None:
        sizes.add(int(backend.get_vocab_size(with_added_tokens=True)))
    if counts.vocab_size not in sizes:  # the digest matched: a forged or damaged counts file
        raise AuditError(
            f"the counts {spec!r} have a vocabulary of {counts.vocab_size:,} tokens but the model's tokenizer has "
            f"{max(sizes):,}, although they name the same tokenizer: the file is damaged or was not written by "
            "`posgeo count`; count again with the model's tokenizer"
        )
    if n > counts.n_positions:
        raise AuditError(
            f"--positions {n} is more than the {counts.n_positions} positions counted in {spec!r}; pass --positions "
            f"{counts.n_positions} (n_positions={counts.n_positions}) or fewer, or count again with --positions {n}"
        )
    reach = counts.reach
    if int(reach[n - 1]) < min_reach:
        best = int((reach >= min_reach).sum())  # reach does not increase
        if counts.n_documents < min_reach:
            raise AuditError(
                f"the counts {spec!r} hold only {counts.n_documents} documents; the audit needs at least {min_reach} "
                "documents reaching the last position: count a larger corpus"
            )
        if best < 3:
            raise AuditError(
                f"the counts {spec!r} are too short: fewer than {min_reach} of their {counts.n_documents} documents "
                "have 3 tokens; pass longer documents"
            )
        raise AuditError(
            f"only {int(reach[n - 1])} of the {counts.n_documents} documents of the counts {spec!r} reach position "
            f"{n - 1} (n_positions={n}); the audit needs {min_reach}. The largest number of positions that {min_reach} "
            f"documents reach is {best}: pass --positions {best} (n_positions={best}) or fewer"
        )
    kept = counts.truncate(n)
    shards = len(counts.sources)
    dataset = {
        "description": (f"positional counts {spec} ({shards} shard(s), {counts.n_documents} documents, positions "
                        f"0..{counts.n_positions - 1} counted, vocabulary of {counts.vocab_size})"),
        "source": "counts",
        "text_column": None,
        "sequences": int(counts.n_documents),
        "tokens": None,
        "median_length": None,
        "max_length": None,
        "vocab_size": int(counts.vocab_size),
        "tokenizer": model.ref.label,
        "counted_positions": int(counts.n_positions),
        "shards": shards,
    }
    notes = {
        "counts": (
            f"audited from stored positional counts ({spec}, made by `posgeo count` with the tokenizer "
            f"{counts.tokenizer}): the corpus geometry is computed from the per-position token counts, without "
            f"re-tokenising; the counts keep no lengths beyond position {counts.n_positions - 1}, so the dataset's "
            "token total and median and maximum lengths are left empty"
        ),
        "intervals": _NO_INTERVALS_FROM_COUNTS,
    }
    return CountsStep(counts=kept, dataset=dataset, notes=notes)


# --------------------------------------------------------------------------- 3. the geometry
@dataclass(frozen=True, eq=False)
class GeometryStep:
    """The corpus geometry (see :func:`geometry_step`).

    Attributes
    ----------
    geometry : posgeo.CorpusGeometry
        Plug-in (``distances``) and noise-corrected (``hybrid``) chord Hellinger
        distances, shape (n, n), and the ``counts`` of sequences reaching each position.
    corrected : bool
        Whether the noise correction leaves a positive distance (else the corrected numbers
        are empty).
    numbers : dict
        The report's ``corpus`` section (see :class:`~posgeo.audit.report.AuditReport`).
    notes : dict of str to str
        Notes of this step (``"corrected"``, ``"flagged"``).
    """

    geometry: CorpusGeometry
    corrected: bool
    numbers: dict[str, Any]
    notes: dict[str, str]

    @property
    def corrected_distances(self) -> np.ndarray | None:
        """The noise-corrected distances, shape (n, n), or ``None`` when :attr:`corrected` is false."""
        return self.geometry.hybrid if self.corrected else None


def _spectrum(D: np.ndarray) -> dict[str, float]:
    lam = classical_mds(D).eigenvalues
    return {
        "rank_90": effective_rank(lam, energy=0.9).rank_at_energy,
        "rank_99": effective_rank(lam, energy=0.99).rank_at_energy,
        "entropy_rank": effective_rank(lam).entropy_rank,
    }


def geometry_step(
    corpus: Corpus | PositionalCounts, *, n_positions: int, seed: int, cache: bool, name: str
) -> GeometryStep:
    """Step 3: the corpus geometry of positions ``0..n_positions-1`` and its effective rank.

    Parameters
    ----------
    corpus : posgeo.Corpus or posgeo.PositionalCounts
        A tokenised corpus (:func:`posgeo.corpus_geometry`), or its counts of exactly
        ``n_positions`` positions (:meth:`posgeo.PositionalCounts.geometry`: the same
        plug-in and corrected distances, reach and flags).
    n_positions : int
    seed : int
        Seed of the noise floor's half-splits (:func:`posgeo.corpus_geometry`; counts have
        their one stored split).
    cache : bool
        Cache the geometry (of a corpus).
    name : str
        The dataset, as error messages name it.

    Returns
    -------
    GeometryStep

    Raises
    ------
    AuditError
        Every position has the same token distribution (no geometry to audit).

    Examples
    --------
    >>> from posgeo import load_corpus
    >>> corpus = load_corpus("synthetic", n_sequences=300, n_positions=8, vocab_size=16)
    >>> step = geometry_step(corpus, n_positions=6, seed=0, cache=False, name="synthetic")
    >>> step.geometry.distances.shape, step.numbers["reach_last"], step.corrected
    ((6, 6), 300, True)
    """
    n = n_positions
    notes: dict[str, str] = {}
    if isinstance(corpus, PositionalCounts):
        if corpus.n_positions != n:
            raise ValueError(f"the counts have {corpus.n_positions} positions, not n_positions={n}; truncate() them")
        g = corpus.geometry(min_count=_MIN_COUNT, name=name)
    else:
        g = corpus_geometry(corpus, n, min_count=_MIN_COUNT, seed=seed, cache=cache)
    D, Dc = g.distances, g.hybrid
    iu = np.triu_indices(n, k=1)
    if not np.any(D[iu] > 0):
        raise AuditError(
            f"every one of the first {n} positions of {name!r} has the same token distribution (all "
            "distances are 0): there is no positional geometry to audit; pass a dataset of varied text"
        )
    corrected_ok = bool(np.any(Dc[iu] > 0))
    if not corrected_ok:
        notes["corrected"] = (
            "the noise correction leaves no positive distance: with this many sequences the positions cannot be "
            "told apart from sampling noise; the corrected numbers are empty (use more sequences)"
        )
    flagged = int(g.flagged.sum())
    if flagged:
        notes["flagged"] = (
            f"{flagged} of the {n} positions are reached by fewer than {_MIN_COUNT} sequences: their distances are "
            "dominated by sampling noise (compare the noise-corrected numbers)"
        )
    numbers = {
        "metric": "chord Hellinger",
        "n_positions": n,
        "reach_first": int(g.counts[0]),
        "reach_last": int(g.counts[-1]),
        "flagged_positions": flagged,
        "mean_distance": float(D[iu].mean()),
        "adjacent_distance": float(np.diagonal(D, 1).mean()),
        "mean_distance_corrected": float(Dc[iu].mean()),
        "adjacent_distance_corrected": float(np.diagonal(Dc, 1).mean()),
        "noise_share": noise_share(g),
        "effective_rank": {"plug-in": _spectrum(D), "corrected": _spectrum(Dc) if corrected_ok else None},
    }
    return GeometryStep(geometry=g, corrected=corrected_ok, numbers=numbers, notes=notes)


# --------------------------------------------------------------------------- 4. stress
@dataclass(frozen=True, eq=False)
class StressStep:
    """Stress, separation and monotonicity (see :func:`stress_step`).

    Attributes
    ----------
    stress : dict of str to pandas.DataFrame or None
        ``"plug-in"`` and ``"corrected"`` (``None`` without corrected distances):
        :func:`posgeo.stress_table` rows ``PMDS full``, ``PMDS k=…``, ``SMACOF k=…``,
        ``model`` (when there are position vectors), ``sinusoidal``, ``random``.
    separation : dict or None
        :meth:`posgeo.SeparationStats.as_dict` of the position vectors.
    monotonicity : pandas.DataFrame
        Index ``corpus``, ``model``, ``random``; columns ``offset``, ``hellinger``.
    baselines : dict of str to numpy.ndarray
        ``"sinusoidal"`` and ``"random"`` vectors, shape (n, width) (sinusoidal: the even
        width at or above). ``"random"`` is one draw, shown in the tables and charts; the
        verdict uses :attr:`random_rows`.
    random_rows : numpy.ndarray, shape (k, n * (n - 1) // 2)
        :func:`random_tables` of the model's width: the verdict's random baseline.
    random_monotonicity : dict of str to tuple of float
        Range (min, max) of the random tables' violation rates behind the ``random`` row of
        :attr:`monotonicity` (its mean), per column.
    """

    stress: dict[str, pd.DataFrame | None]
    separation: dict[str, Any] | None
    monotonicity: pd.DataFrame
    baselines: dict[str, np.ndarray]
    random_rows: np.ndarray | None = None
    random_monotonicity: dict[str, tuple[float, float]] | None = None


def _square(tri: np.ndarray, n: int) -> np.ndarray:
    M = np.zeros((n, n))
    M[np.triu_indices(n, 1)] = tri
    return M + M.T


def _monotonicity_table(
    D: np.ndarray, P: np.ndarray | None, rows: np.ndarray
) -> tuple[pd.DataFrame, dict[str, tuple[float, float]]]:
    """Violation rates of the corpus, the model and random tables (the mean over the first
    :data:`_MONOTONICITY_TABLES` of ``rows``, with their range)."""
    rate = monotonicity_violation_rate
    nan = float("nan")
    n = D.shape[0]
    random = np.array([(rate(distances=R, progress=False), rate(distances=R, reference=D, progress=False))
                       for R in (_square(r.astype(np.float64), n) for r in rows[:_MONOTONICITY_TABLES])])
    table = {
        "corpus": {"offset": rate(distances=D, progress=False), "hellinger": nan},
        "model": {"offset": rate(P, progress=False) if P is not None else nan,
                  "hellinger": rate(P, reference=D, progress=False) if P is not None else nan},
        "random": {"offset": float(random[:, 0].mean()), "hellinger": float(random[:, 1].mean())},
    }
    out = pd.DataFrame.from_dict(table, orient="index", columns=["offset", "hellinger"])
    out.index.name = "encoding"
    spread = {col: (float(random[:, j].min()), float(random[:, j].max())) for j, col in enumerate(("offset", "hellinger"))}
    return out, spread


def stress_step(
    distances: np.ndarray,
    corrected: np.ndarray | None,
    vectors: np.ndarray | None,
    *,
    n_positions: int,
    width: int,
    seed: int,
    mds_dims: Sequence[int],
) -> StressStep:
    """Step 4: the best fits, the model's fit and two baselines, against both distances.

    Parameters
    ----------
    distances : numpy.ndarray, shape (n_positions, n_positions)
        Plug-in distances.
    corrected : numpy.ndarray or None, shape (n_positions, n_positions)
        Noise-corrected distances, or ``None`` (no corrected table).
    vectors : numpy.ndarray or None, shape (n_positions, k)
        The model's position vectors, or ``None``.
    n_positions : int
    width : int
        Width of the baselines (:attr:`ModelStep.width`).
    seed : int
        Seed of the random baseline.
    mds_dims : sequence of int
        Dimensions of the PMDS and SMACOF fits.

    Returns
    -------
    StressStep

    Examples
    --------
    >>> from posgeo import hellinger_matrix
    >>> D = hellinger_matrix(np.eye(5) * 0.5 + 0.1)  # 5 distributions over 5 tokens
    >>> step = stress_step(D, None, None, n_positions=5, width=8, seed=0, mds_dims=(1, 2))
    >>> list(step.stress["plug-in"].index), step.stress["corrected"], step.separation
    (['PMDS full', 'PMDS k=1', 'SMACOF k=1', 'PMDS k=2', 'SMACOF k=2', 'sinusoidal', 'random'], None, None)
    """
    baselines = {"sinusoidal": sinusoidal_encoding(n_positions, width + width % 2),
                 "random": random_encoding(n_positions, width, seed=seed)}
    encodings = ({"model": vectors} if vectors is not None else {}) | baselines
    dims = tuple(mds_dims)
    stress = {
        "plug-in": stress_table(distances, encodings, mds_dims=dims),
        "corrected": stress_table(corrected, encodings, mds_dims=dims) if corrected is not None else None,
    }
    separation = separation_stats(vectors).as_dict() if vectors is not None else None
    rows = random_tables(n_positions, width, seed=seed)
    monotonicity, spread = _monotonicity_table(distances, vectors, rows)
    return StressStep(stress=stress, separation=separation, monotonicity=monotonicity, baselines=baselines,
                      random_rows=rows, random_monotonicity=spread)


# --------------------------------------------------------------------------- 4'. the random baseline
RANDOM_TABLES = 100
"""Gaussian random tables drawn for the verdict's random baseline (its null distribution)."""
_RANDOM_QUANTILES = (0.025, 0.975)  # "better" below the first, "worse" above the second
_RANDOM_TABLE_BYTES = 2**29  # the unit distance rows of the tables, float32, at most this (fewer tables beyond)
_MONOTONICITY_TABLES = 20  # random tables averaged for the monotonicity baseline


def _random_stream(seed: int) -> np.random.Generator:
    """The random tables' own stream: ``seed`` and a tag, so that it never repeats the single
    ``random`` baseline of :func:`stress_step` (``random_encoding(seed=seed)``)."""
    return np.random.default_rng([int(seed), 0x52414E44])  # "RAND"


def random_tables(n_positions: int, width: int, *, seed: int, n_tables: int = RANDOM_TABLES) -> np.ndarray:
    """Distances of Gaussian random tables, each row normalised to unit length.

    Scale-optimal stress does not depend on a table's scale, so the entries' variance does
    not matter. Fewer than ``n_tables`` (never fewer than 50) are drawn when the rows would
    exceed 512 MiB.

    Parameters
    ----------
    n_positions, width : int
        Shape of each table.
    seed : int, keyword-only
    n_tables : int, keyword-only, default :data:`RANDOM_TABLES`

    Returns
    -------
    numpy.ndarray, shape (k, n_positions * (n_positions - 1) // 2), float32
        The upper triangle (``numpy.triu_indices(n, 1)``) of each table's pairwise
        distances, unit norm.

    Examples
    --------
    >>> E = random_tables(6, 8, seed=0, n_tables=50)
    >>> E.shape, bool(np.allclose(np.linalg.norm(E, axis=1), 1, atol=1e-6))
    ((50, 15), True)
    """
    n, width = check_int(n_positions, "n_positions", minimum=2), check_int(width, "width")
    pairs = n * (n - 1) // 2
    k = max(50, min(check_int(n_tables, "n_tables", minimum=2), _RANDOM_TABLE_BYTES // (4 * pairs)))
    iu = np.triu_indices(n, 1)
    rng = _random_stream(seed)
    out = np.empty((k, pairs), dtype=np.float32)
    for t in range(k):
        d = pairwise_distances(rng.standard_normal((n, width)))[iu]
        out[t] = d / np.linalg.norm(d)
    return out


def random_table_stresses(rows: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Scale-optimal stress of every random table against a distance matrix.

    Parameters
    ----------
    rows : numpy.ndarray, shape (k, n * (n - 1) // 2)
        From :func:`random_tables` (any unit-norm distance triangles).
    distances : numpy.ndarray, shape (n, n), or its upper triangle

    Returns
    -------
    numpy.ndarray, shape (k,)
        ``1 - (e . d)^2 / (d . d)`` for each unit row ``e``, as :func:`posgeo.stress` with
        ``scale="optimal"`` gives (NaN against an all-zero matrix).

    Examples
    --------
    >>> from posgeo import stress
    >>> D = pairwise_distances(np.arange(6.0)[:, None])
    >>> s = random_table_stresses(random_tables(6, 8, seed=0, n_tables=50), D)
    >>> P = np.random.default_rng([0, 0x52414E44]).standard_normal((6, 8))  # the first table
    >>> bool(np.isclose(s[0], stress(P, D, scale="optimal"), atol=1e-6))
    True
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim == 2:
        d = d[np.triu_indices(d.shape[0], 1)]
    dd = float(d @ d)
    if dd == 0.0:
        return np.full(rows.shape[0], np.nan)
    return np.clip(1.0 - (rows.astype(np.float64) @ d) ** 2 / dd, 0.0, None)


def _unit_triangle(P: np.ndarray) -> np.ndarray:
    d = pairwise_distances(np.asarray(P, dtype=np.float64))[np.triu_indices(P.shape[0], 1)]
    norm = float(np.linalg.norm(d))
    return (d / norm if norm > 0 else d)[None, :]


def _margins(model: np.ndarray, rows: np.ndarray):  # type: ignore[no-untyped-def]
    """The statistic of the random-baseline verdict on a distance triangle: the model's stress
    minus the random tables' 2.5% and 97.5% quantiles (``model``: :func:`_unit_triangle`)."""

    def statistic(d: np.ndarray) -> np.ndarray:
        mine = random_table_stresses(model, d)[0]
        return mine - np.quantile(random_table_stresses(rows, d), _RANDOM_QUANTILES)

    return statistic


def random_baseline_table(
    targets: Mapping[str, np.ndarray | None],
    vectors: np.ndarray | None,
    rows: np.ndarray,
    margins: Mapping[str, tuple[float, float]] | None = None,
) -> pd.DataFrame | None:
    """Where the model lies among random tables, per target distance matrix (the verdict's
    random baseline; ``None`` without position vectors).

    Columns: ``tables``; ``median``, ``low``, ``high`` (the 2.5% and 97.5% quantiles of the
    tables' scale-optimal stress); ``model``; ``share below`` (tables fitting better than the
    model); ``margin high``, the upper end of the 95% interval of ``model - low`` (the model
    fits better than random tables where it is below 0); ``margin low``, the lower end of that
    of ``model - high`` (worse where it is above 0). Without ``margins`` (no sampling
    intervals) the margins are the estimates themselves.
    """
    if vectors is None:
        return None
    mine = _unit_triangle(vectors)
    records = {}
    for target, D in targets.items():
        if D is None:
            continue
        d = np.asarray(D, dtype=np.float64)[np.triu_indices(D.shape[0], 1)]
        theirs = random_table_stresses(rows, d)
        model = float(random_table_stresses(mine, d)[0])
        low, high = (float(q) for q in np.quantile(theirs, _RANDOM_QUANTILES))
        hi_margin, lo_margin = (margins or {}).get(target, (model - low, model - high))
        records[target] = {"tables": int(rows.shape[0]), "median": float(np.median(theirs)), "low": low,
                           "high": high, "model": model, "share below": float(np.mean(theirs < model)),
                           "margin high": float(hi_margin), "margin low": float(lo_margin)}
    table = pd.DataFrame.from_dict(records, orient="index")
    table.index.name = "target"
    return table


# --------------------------------------------------------------------------- 4b. intervals
@dataclass(frozen=True, eq=False)
class IntervalsStep:
    """Sampling intervals of the corrected stresses (see :func:`intervals_step`).

    Attributes
    ----------
    stress : pandas.DataFrame or None
        :func:`posgeo.stress_intervals` of the regular simplex, the model (when it has
        position vectors), ``sinusoidal`` and ``random``: columns ``stress``, ``low``,
        ``high``, ``permuted mean`` ... ``p``.
    differences : pandas.DataFrame or None
        :func:`posgeo.stress_differences` of the same encodings (paired intervals).
    monotonicity : pandas.DataFrame or None
        Monotonicity violation rates that depend on the corpus geometry, with their 95%
        intervals (columns ``estimate``, ``low``, ``high``): the corrected corpus distances'
        own in offset order, and the model's and random vectors' with pairs ordered by the
        corrected distances.
    n_boot : int
        Halvings (0: no intervals).
    notes : dict of str to str
        Why there are no intervals, when there are none.
    random_margins : dict or None
        ``{"corrected": (margin high, margin low)}``: the upper end of the 95% interval of
        the model's stress minus the random tables' 2.5% quantile, and the lower end of that
        of its stress minus their 97.5% quantile (see :func:`random_baseline_table`).
    """

    stress: pd.DataFrame | None
    differences: pd.DataFrame | None
    n_boot: int
    notes: dict[str, str]
    monotonicity: pd.DataFrame | None = None
    random_margins: dict[str, tuple[float, float]] | None = None


def intervals_step(
    corpus: Corpus,
    encodings: Mapping[str, np.ndarray],
    *,
    n_positions: int,
    n_boot: int,
    seed: int,
    progress: bool = False,
    random_rows: np.ndarray | None = None,
) -> IntervalsStep:
    """Step 4b: 95% intervals of the scale-optimal stresses against the corrected (hybrid)
    geometry, with paired intervals of their differences.

    The corpus is halved ``n_boot`` times (:func:`posgeo.bootstrap_geometry`,
    ``estimator="hybrid"``), keeping sequences that share a run of 8 tokens together
    (:func:`posgeo.overlap_groups`: duplicated or nested texts, such as SST-2's phrases).
    Each half-sample interval is then widened by the disagreement with a second
    estimator (:meth:`posgeo.BootstrapGeometry.widened`): a sampling interval cannot hold
    an estimator's own bias, and chapter 3 measures that the widened intervals hold a
    known truth where the sampling ones do not. The second estimator is the one that
    covers best in chapter 3's calibration for the corpus's kind: the matched estimator
    (half-splits keeping the same groups together) for independent texts, and for a
    corpus of phrases nested in their sentences (:data:`posgeo.NESTED_SPLITS`: SST-2's
    training split) the jackknifed hybrid over blocks of the same groups. The note
    ``reference`` names it; where it cannot be computed the sampling intervals are kept
    and a note says so.

    Parameters
    ----------
    corpus : posgeo.Corpus
    encodings : mapping of str to numpy.ndarray, shape (n_positions, k)
        ``model`` (if any), ``sinusoidal``, ``random``.
    n_positions : int
    n_boot : int
        Halvings; 0 skips the step.
    seed : int
    progress : bool, default False
    random_rows : numpy.ndarray, optional
        :func:`random_tables`: with a ``model`` encoding, the interval of its margins to the
        random tables' quantiles (:attr:`IntervalsStep.random_margins`).

    Returns
    -------
    IntervalsStep

    Examples
    --------
    >>> from posgeo import load_corpus, sinusoidal_encoding
    >>> corpus = load_corpus("synthetic", n_sequences=400, n_positions=8, vocab_size=16)
    >>> step = intervals_step(corpus, {"sinusoidal": sinusoidal_encoding(6, 8)}, n_positions=6, n_boot=4, seed=0)
    >>> list(step.stress.index), step.n_boot
    (['regular simplex', 'sinusoidal'], 4)
    """
    if n_boot == 0:
        return IntervalsStep(stress=None, differences=None, n_boot=0, notes={"intervals": "not computed (--intervals 0)"})
    groups = overlap_groups(corpus)
    try:
        boot = bootstrap_geometry(corpus, n_positions, estimator="hybrid", n_boot=n_boot, groups=groups,
                                  seed=seed, progress=progress)
    except ValueError as err:
        return IntervalsStep(stress=None, differences=None, n_boot=0,
                             notes={"intervals": f"no sampling intervals: {err}"})
    notes: dict[str, str] = {}
    if (corpus.name, corpus.split) in NESTED_SPLITS:
        what = "the jackknifed hybrid estimator over blocks of sentence groups (phrases nested in their sentences)"
        reference = partial(hybrid_hellinger_matrix, corpus, n_positions, corpus.vocab_size, split="jackknife",
                            groups=groups, seed=seed)
    else:
        what = "the matched half-sample estimator"
        reference = partial(matched_hellinger_matrix, corpus, n_positions, corpus.vocab_size, seed=seed, groups=groups)
    try:
        boot = boot.widened(reference())
        notes["reference"] = f"intervals widened by the gap to {what}"
    except ValueError as err:
        notes["intervals"] = f"sampling intervals only, not widened by {what}: {err}"
    rate = monotonicity_violation_rate
    rates: dict[str, Any] = {"corrected corpus distances, offset order": lambda D: rate(distances=D, progress=False)}
    for name, label in (("model", "model"), ("random", "random vectors")):
        if name in encodings:
            P = np.asarray(encodings[name], dtype=np.float64)
            rates[f"{label}, pairs ordered by the corrected distances"] = (
                lambda D, P=P: rate(P, reference=D, progress=False))
    mono = pd.DataFrame({label: dict(zip(("estimate", "low", "high"), boot.interval(f))) for label, f in rates.items()}).T
    mono.index.name = "violation rate"
    margins = None
    if random_rows is not None and "model" in encodings:
        _, low, high = boot.interval(_margins(_unit_triangle(encodings["model"]), random_rows), triangle=True)
        margins = {"corrected": (float(high[0]), float(low[1]))}
    return IntervalsStep(
        stress=stress_intervals(boot, encodings, n_permutations=100, seed=seed),
        differences=stress_differences(boot, encodings),
        n_boot=n_boot,
        notes=notes,
        monotonicity=mono,
        random_margins=margins,
    )


# --------------------------------------------------------------------------- 5. the layers
@dataclass(frozen=True, eq=False)
class LayersStep:
    """Projected stress through the layers (see :func:`layers_step`).

    Attributes
    ----------
    layers : dict of str to pandas.DataFrame or None
        ``"plug-in"`` (and ``"corrected"``): :func:`posgeo.layer_stress_table`; ``None``
        when it does not apply (the reason is in :attr:`notes`).
    notes : dict of str to str
        ``{"layers": why}`` when :attr:`layers` is ``None``, else empty.
    """

    layers: dict[str, pd.DataFrame] | None
    notes: dict[str, str]


def layers_step(model: ModelStep, distances: np.ndarray, corrected: np.ndarray | None) -> LayersStep:
    """Step 5: projected stress of the positional input through every layer's query and key maps.

    Parameters
    ----------
    model : ModelStep
        Applies to a learned absolute table of a BERT-architecture encoder (its rows from
        ``info["position_offset"]`` on).
    distances : numpy.ndarray, shape (n, n)
        Plug-in distances.
    corrected : numpy.ndarray or None, shape (n, n)
        Noise-corrected distances, or ``None``.

    Returns
    -------
    LayersStep

    Examples
    --------
    >>> from posgeo import hellinger_matrix
    >>> from posgeo.audit.inputs import resolve_model
    >>> D = hellinger_matrix(np.eye(4) * 0.5 + 0.125)  # 4 distributions over 4 tokens
    >>> step = layers_step(model_step(resolve_model(None), n_positions=4), D, None)
    >>> list(step.layers), list(step.layers["plug-in"].index), step.notes
    (['plug-in'], [0, 1, 2, 3, 4, 5, 6], {})
    """
    loaded = model.loaded
    if model.vectors is None or loaded.module is None:
        why = (
            "per-layer projected stress pushes an additive position vector through each layer's query and key "
            f"maps; it applies to learned absolute tables, and this model's positions are {loaded.kind!r}"
            if model.vectors is not None else "no position vectors, so no per-layer projection"
        )
        return LayersStep(layers=None, notes={"layers": why})
    offset = model.info["position_offset"]
    try:
        tables = {"plug-in": layer_stress_table(loaded.module, distances, offset=offset)}
        if corrected is not None:
            tables["corrected"] = layer_stress_table(loaded.module, corrected, offset=offset)
    except ValueError as exc:
        return LayersStep(
            layers=None,
            notes={"layers": f"per-layer projected stress is implemented for BERT-architecture encoders only: {exc}"},
        )
    return LayersStep(layers=tables, notes={})


# --------------------------------------------------------------------------- the audit
def _computed_on() -> str:
    """Today's UTC date, or ``$SOURCE_DATE_EPOCH``'s (reproducible builds)."""
    import datetime as _dt

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch and epoch.isdigit() else \
        _dt.datetime.now(_dt.timezone.utc)
    return when.strftime("%Y-%m-%d")


def _version() -> str:
    from posgeo import __version__

    return str(__version__)


def compute_report(
    ds: DatasetRef, ref: ModelRef, params: AuditParameters, *, progress: bool, cache: bool
) -> AuditReport:
    """Run the five steps of an audit and assemble the report (no report cache at this level).

    Parameters
    ----------
    ds : DatasetRef
    ref : ModelRef
    params : AuditParameters
        Checked options; each step gets the ones it uses by name.
    progress : bool
        A progress bar over the steps (and the tokenisation).
    cache : bool
        Cache the tokens and the geometry.

    Returns
    -------
    AuditReport

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from posgeo.audit.inputs import AuditParameters, resolve_dataset, resolve_model
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("\\n".join(["the cat sat on the mat today", "a dog ran in the park at noon"] * 20))
    >>> params = AuditParameters(dataset=str(f), split="train", column=None, model=None, n_positions=5,
    ...                          max_sequences=None, seed=0, min_reach=10, mds_dims=(1, 2), data_dir=None)
    >>> r = compute_report(resolve_dataset(f, split="train", column=None, data_dir=None), resolve_model(None),
    ...                    params, progress=False, cache=False)
    >>> r.parameters["n_positions"], r.dataset["sequences"], r.encoding.shape
    (5, 40, (5, 384))
    """
    n = params.n_positions
    from_counts = ds.kind == "counts"
    with progress_bar(None, enabled=progress, total=len(_STEPS), desc="posgeo audit", unit="step") as bar:
        bar.set_postfix_str(_STEPS[0])
        # the configuration and the tokenizer first, the data next, the weights last: a data error
        # (a column, a split, too short sequences) shows before any weight is read
        loaded = load_model(ref, weights=False)
        _check_table_rows(loaded, n)
        data: DataStep | CountsStep
        if from_counts:
            data = counts_step(ds, loaded, n_positions=n, min_reach=params.min_reach)
            source: Corpus | PositionalCounts = data.counts
        else:
            data = data_step(ds, loaded, n_positions=n, min_reach=params.min_reach, split=params.split,
                             column=params.column, data_dir=params.data_dir, max_sequences=params.max_sequences,
                             seed=params.seed, cache=cache, progress=progress, drop_empty=params.drop_empty)
            source = data.corpus
        bar.update()
        bar.set_postfix_str(_STEPS[1])
        model = position_vectors(load_weights(loaded), n_positions=n)
        bar.update()
        bar.set_postfix_str(_STEPS[2])
        geometry = geometry_step(source, n_positions=n, seed=params.seed, cache=cache, name=ds.spec)
        g = geometry.geometry
        bar.update()
        bar.set_postfix_str(_STEPS[3])
        stress = stress_step(g.distances, geometry.corrected_distances, model.vectors, n_positions=n,
                             width=model.width, seed=params.seed, mds_dims=params.mds_dims)
        bar.update()
        bar.set_postfix_str(_STEPS[4])
        layers = layers_step(model, g.distances, geometry.corrected_distances)
        bar.update()
        bar.set_postfix_str(_STEPS[5])
        encodings = ({"model": model.vectors} if model.vectors is not None else {}) | stress.baselines
        if isinstance(data, CountsStep):
            intervals = IntervalsStep(None, None, 0, {})  # the reason is in data.notes
        elif geometry.corrected:
            intervals = intervals_step(data.corpus, encodings, n_positions=n, n_boot=params.intervals,
                                       seed=params.seed, progress=progress, random_rows=stress.random_rows)
        else:
            intervals = IntervalsStep(None, None, 0, {"intervals": "no corrected geometry to give intervals for"})
        bar.update()
    return AuditReport(
        parameters=params.as_dict(),
        dataset=data.dataset,
        model={"label": ref.label, **model.info},
        corpus=geometry.numbers,
        stress=stress.stress,
        separation=stress.separation,
        monotonicity=stress.monotonicity,
        layers=layers.layers,
        notes={**model.notes, **(data.notes if isinstance(data, CountsStep) else {}), **geometry.notes,
               **layers.notes, **intervals.notes},
        hellinger=np.asarray(g.distances, dtype=np.float64),
        hellinger_corrected=np.asarray(g.hybrid, dtype=np.float64),
        counts=np.asarray(g.counts, dtype=np.int64),
        encoding=model.vectors,
        version=_version(),
        intervals=intervals.stress,
        differences=intervals.differences,
        monotonicity_intervals=intervals.monotonicity,
        computed_on=_computed_on(),
        random=random_baseline_table({"plug-in": g.distances, "corrected": geometry.corrected_distances},
                                     model.vectors, stress.random_rows, intervals.random_margins),
        random_monotonicity=stress.random_monotonicity,
    )


def audit(
    dataset: str | os.PathLike[str] | None = None,
    *,
    counts: str | os.PathLike[str] | PositionalCounts | None = None,
    model: str | os.PathLike[str] | None = None,
    split: str = "train",
    column: str | None = None,
    n_positions: int = 48,
    max_sequences: int | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    min_reach: int = 10,
    mds_dims: Sequence[int] = (1, 2, 3),
    progress: bool = True,
    cache: bool = True,
    drop_empty: bool = False,
    intervals: int = 20,
) -> AuditReport:
    """Audit how well a model's positions fit the positional geometry of a corpus.

    Tokenises the corpus with the model's tokenizer (no special tokens: position 0 is the
    first token of a text), measures the corpus geometry of positions ``0..n-1``, the best
    fit any encoding can reach, and the fit of the model's own position vectors (see
    :mod:`posgeo.audit.compute` for how they are obtained and how corpus positions map to
    table rows).

    Parameters
    ----------
    dataset : str or path, optional
        Resolved in this order: an existing ``.parquet`` file (the text column is
        ``column``, else the one of ``"text"``/``"sentence"`` it has); any other existing file
        (UTF-8 text, one sequence per line, blank lines skipped); ``"sst2"`` or ``"imdb"``
        (:func:`posgeo.load_texts`: ``data_dir``, else ``$POSGEO_DATA_DIR``, else the hub);
        anything else is a Hugging Face hub dataset id (needs the network). Omitted when
        ``counts`` is given.
    counts : str, path or posgeo.PositionalCounts, keyword-only, optional
        Audit stored positional counts instead of a dataset (``posgeo audit --counts``): a
        file written by ``posgeo count`` (:meth:`posgeo.PositionalCounts.save`) or the
        counts themselves, made with the model's tokenizer (checked: same
        :func:`posgeo.tokenizer_id` digest) and at least ``n_positions`` positions (truncated
        to them). Nothing is re-tokenised: the plug-in and corrected distances, reach, noise
        share and effective rank are those of the same texts audited directly
        (:meth:`posgeo.PositionalCounts.geometry`), and so are the stresses. There are no
        sampling intervals (they halve the sequences, which counts do not keep; the note
        ``"intervals"`` says so), and ``split``, ``column``, ``max_sequences``, ``data_dir``,
        ``drop_empty`` do not apply.
    model : str or path, optional
        A local model folder, a hub id (the network or the local Hugging Face cache), or
        ``None`` for the bundled all-MiniLM-L6-v2.
    split : str, default "train"
        Split of a known or hub dataset (ignored for local files).
    column : str, optional
        Text column of a parquet or hub dataset.
    n_positions : int, default 48
        Positions ``0..n-1`` audited (at least 3); at least ``min_reach`` sequences must
        reach the last one.
    max_sequences : int, optional
        Audit a random subset of this many sequences (``np.random.default_rng(seed)``).
    data_dir : path, optional
        Local data directory for ``"sst2"``/``"imdb"`` (see :func:`posgeo.load_texts`).
    seed : int, default 0
        Seed of the subset, the noise-floor half-splits and the random baseline.
    min_reach : int, default 10
        Sequences that must reach position ``n-1``.
    mds_dims : sequence of int, default (1, 2, 3)
        Dimensions of the low-rank PMDS and SMACOF fits.
    progress : bool, default True
        Progress bars (tokenisation and every step; ``TQDM_DISABLE=1`` silences them).
    cache : bool, default True
        Read and store the tokens and the whole report in the posgeo cache
        (``$POSGEO_CACHE_DIR``), keyed on the dataset (a hash of the file's bytes,
        :func:`posgeo.file_digest`, or the hub id, split and column), the model (a hash of
        each file of its folder, or its id), every option and the posgeo version: a second
        run on the same inputs reads the report, and a file replaced by another (even of the
        same size and modification time) is recomputed.
    drop_empty : bool, default False
        Drop missing (null) and empty texts of the dataset instead of refusing them
        (``--drop-empty``; see :func:`posgeo.validation.check_texts`).
    intervals : int, default 20
        Halvings of the 95% intervals (half-sample, widened) of the corrected stresses and
        of their paired differences (:func:`intervals_step`; ``--intervals``); 0 skips them. The
        verdict uses them where it judges against the corrected distances.

    Returns
    -------
    AuditReport

    Raises
    ------
    AuditError
        (a ``ValueError``) A missing file or column, an empty dataset, a model that cannot
        be loaded (offline), too few sequences reaching ``n_positions``, more positions
        than the model's table holds, or an invalid option; with ``counts``: a missing or
        unreadable counts file, counts of another tokenizer, more positions than were
        counted, or both or neither of ``dataset`` and ``counts``; the message says what to do.
    TypeError
        ``dataset`` is neither a string nor a path, or the tokenizer is not a fast tokenizer.
    FileNotFoundError, posgeo.CorpusUnavailableError
        ``"sst2"``/``"imdb"`` without a local copy (see :func:`posgeo.load_texts`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "lines.txt"
    >>> _ = f.write_text("\\n".join(["the cat sat on the mat today", "a dog ran in the park at noon"] * 20))
    >>> r = audit(f, n_positions=5, progress=False, cache=False)
    >>> r.model["positional_kind"], r.model["position_offset"], r.dataset["sequences"]
    ('learned-absolute', 1, 40)
    >>> bool(r.stress["plug-in"].loc["PMDS full", "raw"] < 1e-12)
    True
    """
    dims = check_parameters(n_positions=n_positions, max_sequences=max_sequences, seed=seed, min_reach=min_reach,
                            mds_dims=mds_dims, split=split, column=column)
    if (dataset is None) == (counts is None):
        raise AuditError(
            "pass a dataset (DATASET) or stored counts (--counts FILE, counts=) to audit" if dataset is None else
            "pass a dataset (DATASET) or stored counts (--counts FILE, counts=), not both: the counts name their shards"
        )
    if counts is not None:
        given = [opt for opt, value in (("--column (column=)", column), ("--max-sequences (max_sequences=)", max_sequences),
                                        ("--data-dir (data_dir=)", data_dir), ("--drop-empty (drop_empty=)", drop_empty or None))
                 if value is not None]
        if given:
            raise AuditError(
                f"{', '.join(given)} do(es) not apply to stored counts, which were read and tokenised by `posgeo count`; "
                "drop it, or audit the dataset itself"
            )
        ds = resolve_counts(counts)
    else:
        ds = resolve_dataset(dataset, split=split, column=column, data_dir=data_dir)
        check_dataset(ds, column=column, split=split)  # the column and the hub now, before any model file is read
    ref = resolve_model(model)
    params = AuditParameters(
        dataset=ds.spec,
        split=split,
        column=column,
        model=None if model is None else os.fspath(model),
        n_positions=int(n_positions),
        max_sequences=None if max_sequences is None else int(max_sequences),
        seed=int(seed),
        min_reach=int(min_reach),
        mds_dims=dims,
        data_dir=None if data_dir is None else os.fspath(data_dir),
        drop_empty=bool(drop_empty),
        intervals=check_int(intervals, "intervals", minimum=0, maximum=10_000,
                            hint="the number of half-sample halvings, e.g. 20; 0 for no intervals"),
        counts=counts is not None,
    )
    if params.counts:  # none can be drawn from counts (see counts_step's note)
        from dataclasses import replace

        params = replace(params, intervals=0)
    if params.intervals == 1:
        raise AuditError("--intervals must be 0 (none) or at least 2 halvings (20 is usual)")
    model_key = ref.fingerprint
    if ref.is_local and "files" in model_key:  # a local folder: its files' bytes, never their mtimes
        from pathlib import Path

        from posgeo import file_digest

        folder = Path(ref.identifier)
        model_key = {**model_key, "files": [(name, size, file_digest(folder / name)) for name, size, *_ in model_key["files"]]}
    key = {"data": ds.fingerprint, "model": model_key, **{k: v for k, v in params.as_dict().items() if k != "data_dir"},
           "report": "intervals, differences, monotonicity intervals, computed_on, random",  # what an entry holds
           # the random baseline: how many tables, their stream and the quantiles that decide
           "random tables": [RANDOM_TABLES, _MONOTONICITY_TABLES, "rng([seed, 0x52414E44])", list(_RANDOM_QUANTILES)],
           "widening": "matched; jackknife over groups for NESTED_SPLITS",  # how its intervals are widened
           # the rule behind its rates: the default tie tolerance, read where it is set
           "monotonicity ties": inspect.signature(monotonicity_violation_rate).parameters["tie_rtol"].default}
    return cached(
        "audit-report",
        key,
        lambda: compute_report(ds, ref, params, progress=progress, cache=cache),
        enabled=cache,
        expect=AuditReport,
    )
