"""The audit's report: :class:`AuditReport`, its JSON and HTML, and the charts of the page.

:class:`AuditReport` holds every number of an audit (:func:`posgeo.audit.audit` returns one)
and the matrices behind its charts. :meth:`AuditReport.to_json` writes the numbers
(``schema`` ``"posgeo-audit/1"``), :meth:`AuditReport.to_html` a self-contained page that loads
nothing: inline CSS, and every chart (``plot_audit_*``, Altair) drawn in the page by vega-embed,
whose JavaScript (with Vega and Vega-Lite) is inlined once; ``to_html(static=True)`` draws the
charts as inline SVG instead and has no script. The bytes of both depend only on the report.
"""

from __future__ import annotations

import functools
import html as _html
import json
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

import posgeo as pg
from posgeo import classical_mds, distance_by_offset, order_free_baselines, pairwise_distances
from posgeo.experiments.papers import PAPER_P1

from .inputs import AuditError

__all__ = [
    'AuditReport',
    'plot_audit_heatmap',
    'plot_audit_offsets',
    'plot_audit_maps',
    'plot_audit_stress',
    'plot_audit_layers',
]

_SCHEMA = "posgeo-audit/1"
_TARGETS = ("plug-in", "corrected")


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
        ``max_sequences``, ``seed``, ``min_reach``, ``mds_dims`` (and ``counts: true``
        when ``dataset`` is a counts file, ``--counts``).
    dataset : dict
        ``description``, ``source`` (``"known"``, ``"parquet"``, ``"text"``, ``"hub"`` or
        ``"counts"``), ``text_column``, ``sequences`` (analysed), ``tokens``,
        ``median_length``, ``max_length``, ``vocab_size``, ``tokenizer``; from counts,
        ``tokens``, the lengths and ``text_column`` are ``None`` and ``counted_positions``
        and ``shards`` are added.
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
    intervals : pandas.DataFrame or None
        95% intervals of the scale-optimal stress against the corrected distances
        (:func:`posgeo.stress_intervals`; half-sample, widened by the disagreement with a
        second estimator, :func:`posgeo.audit.compute.intervals_step`): rows ``regular simplex``, ``model``,
        ``sinusoidal``, ``random``; ``None`` without them (``--intervals 0``, or no
        corrected geometry).
    differences : pandas.DataFrame or None
        Paired intervals of their differences (:func:`posgeo.stress_differences`).
    monotonicity_intervals : pandas.DataFrame or None
        95% intervals (widened as ``intervals``) of the violation rates that depend on the corpus geometry
        (index: ``corrected corpus distances, offset order``, ``model, pairs ordered by the
        corrected distances``, ``random vectors, ...``; columns ``estimate``, ``low``, ``high``).
    computed_on : str or None
        UTC date (``YYYY-MM-DD``) the numbers were computed (a cached report keeps its date);
        ``$SOURCE_DATE_EPOCH`` fixes it for reproducible builds.
    random : pandas.DataFrame or None
        The verdict's random baseline (:func:`posgeo.audit.compute.random_baseline_table`):
        per target (``plug-in``, ``corrected``), the spread of the scale-optimal stress of
        100 Gaussian random tables of the model's width (``tables``, ``median``, ``low``,
        ``high``), the model's stress, the share of tables below it, and the two margins
        that decide "better" and "worse". ``None`` without position vectors.
    random_monotonicity : dict or None
        ``{"offset" | "hellinger": (min, max)}``: the range of the random tables' violation
        rates whose mean is the ``random`` row of :attr:`monotonicity`.
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
    intervals: pd.DataFrame | None = None
    differences: pd.DataFrame | None = None
    computed_on: str | None = None
    monotonicity_intervals: pd.DataFrame | None = None
    random: pd.DataFrame | None = None
    random_monotonicity: dict[str, tuple[float, float]] | None = None

    # ----------------------------------------------------------------- derived values
    @property
    def command(self) -> str:
        """The ``posgeo audit`` command line that reproduces this report."""
        p = self.parameters
        if p.get("counts"):  # stored counts: no split (nor column, subset, data directory, intervals)
            args = ["posgeo", "audit", "--counts", str(p["dataset"])]
        else:
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
        if p.get("drop_empty"):
            args += ["--drop-empty"]
        if p.get("intervals", 20) != 20 and not p.get("counts"):
            args += ["--intervals", str(p["intervals"])]
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

    def verdict(self) -> dict[str, Any]:
        """The report's conclusion: does the model's table fit better than order-free baselines?

        The comparison uses the noise-corrected distances when sampling noise is more than
        half of the squared plug-in distances (and a correction exists), else the plug-in
        ones. The model's scale-optimal stress is compared with three baselines:

        - **random vectors**: 100 Gaussian random tables of the model's width
          (:attr:`random`). "Better" needs the model's stress below the tables' 2.5%
          quantile, "worse" above their 97.5% quantile; where there are sampling intervals
          the whole 95% interval of the margin must lie on that side of 0. A table that is
          itself random is called better about 2.5% of the time or less, worse as often.
        - **sinusoids** of its width and **the regular simplex** (every position equidistant:
          no order), which are not random: "better" or "worse" needs the 95% paired interval
          of the difference (:attr:`differences`) to exclude 0; without intervals a
          difference under 5% of the baseline's stress reads "no better than".

        Whether the table's *order* matters is tested against 100 random row permutations of
        the table itself (:func:`posgeo.order_free_baselines`).

        Returns
        -------
        dict
            ``target`` ("plug-in" or "corrected"), ``warnings`` (list of str),
            ``comparisons`` (list of {baseline, stress, model, verdict}; for random vectors
            ``stress`` is the tables' median and ``low``, ``high``, ``margin_high``,
            ``margin_low`` are added), ``order`` ({p, permuted_mean, model} or None) and
            ``sentences`` (list of str).
        """
        c = self.corpus
        noise, reach_last = float(c["noise_share"]), int(c["reach_last"])
        warnings: list[str] = []
        if noise > 0.5:
            warnings.append(
                f"Sampling noise is {noise:.0%} of the squared plug-in distances: the plug-in comparison mostly "
                "measures noise, so the verdict uses the noise-corrected distances."
            )
        if reach_last < 100:
            warnings.append(
                f"Only {reach_last} sequences reach the last position: distances there rest on few samples; use "
                "fewer --positions or a larger corpus."
            )
        corrected = self.stress.get("corrected")
        target = "corrected" if (noise > 0.5 and corrected is not None) else "plug-in"
        out: dict[str, Any] = {"target": target, "warnings": warnings, "comparisons": [], "order": None, "sentences": []}
        table = self.stress[target]
        if self.encoding is None or table is None or "model" not in table.index:
            out["sentences"].append(f"The model has no position vectors to judge: {self.notes.get('model', '')}")
            return out
        D = self.hellinger_corrected if target == "corrected" else self.hellinger
        ofb = order_free_baselines(D, {"model": self.encoding}, n_permutations=100, seed=int(self.parameters.get("seed", 0)))
        model = float(table.loc["model", "optimal"])
        paired = self._paired() if target == "corrected" else {}
        if self.random is not None and target in self.random.index:
            out["comparisons"].append(self._random_comparison(target))
            out["sentences"].append(out["comparisons"][-1].pop("sentence"))
        baselines = [("sinusoidal vectors", "sinusoidal", float(table.loc["sinusoidal", "optimal"])),
                     ("the regular simplex (no order)", "regular simplex", float(ofb.loc["regular simplex", "optimal"]))]
        for name, key, value in baselines:
            if key in paired:  # the 95% paired interval of stress(model) - stress(baseline)
                lo, hi = paired[key]
                word = "fit better than" if hi < 0 else ("fit worse than" if lo > 0 else "fit no better than")
                why = f"; 95% interval of the difference {lo:+.3g} to {hi:+.3g}"
            else:
                rel = (value - model) / value if value > 0 else 0.0
                word = "fit better than" if rel > 0.05 else ("fit worse than" if rel < -0.05 else "fit no better than")
                why = "; no sampling interval: a difference under 5% counts as none"
            out["comparisons"].append({"baseline": name, "stress": value, "model": model, "verdict": word})
            out["sentences"].append(
                f"Against the {target} distances the model's positions {word} {name} "
                f"(scale-optimal stress {model:.3g} vs {value:.3g}{why})."
            )
        pval, perm = float(ofb.loc["model", "p"]), float(ofb.loc["model", "permuted mean"])
        out["order"] = {"p": pval, "permuted_mean": perm, "model": float(ofb.loc["model", "optimal"])}
        if pval < 0.05:
            out["sentences"].append(
                f"Its positional order matters: none of 100 random row permutations of its table fits as well "
                f"(permuted mean {perm:.3g}, p = {pval:.2g})." if pval <= 1 / 101 + 1e-12 else
                f"Its positional order matters: few row permutations of its table fit as well (p = {pval:.2g})."
            )
        else:
            out["sentences"].append(
                f"Its positional order does not show in the fit: row permutations of its table fit as well "
                f"(permuted mean {perm:.3g}, p = {pval:.2g})."
            )
        return out

    def _random_comparison(self, target: str) -> dict[str, Any]:
        """The verdict against random tables (see :meth:`verdict`), with its sentence."""
        r = self.random.loc[target]  # type: ignore[union-attr]
        k, model, low, high = int(r["tables"]), float(r["model"]), float(r["low"]), float(r["high"])
        hi_margin, lo_margin = float(r["margin high"]), float(r["margin low"])
        with_intervals = target == "corrected" and self.intervals is not None
        word = "fit better than" if hi_margin < 0 else ("fit worse than" if lo_margin > 0 else "fit no better than")
        spread = f"{k} Gaussian random tables of its width: median {float(r['median']):.3g}, 95% of them {low:.3g} to {high:.3g}"
        if word == "fit no better than" and (model < low or model > high):
            side, margin = ("below", hi_margin) if model < low else ("above", lo_margin)
            why = (f"{spread}; it lies {side} that range on the estimate, but not across its sampling interval "
                   f"(margin {margin:+.3g})")
        elif with_intervals and word != "fit no better than":
            margin = hi_margin if word == "fit better than" else lo_margin
            why = f"{spread}; the 95% interval of its margin to that range ends at {margin:+.3g}"
        else:
            why = spread
        sentence = (f"Against the {target} distances the model's positions {word} random vectors "
                    f"(scale-optimal stress {model:.3g}; {why}).")
        return {"baseline": "random vectors", "stress": float(r["median"]), "model": model, "verdict": word,
                "low": low, "high": high, "margin_high": hi_margin, "margin_low": lo_margin, "sentence": sentence}

    def _paired(self) -> dict[str, tuple[float, float]]:
        """Interval of stress(model) - stress(baseline) for each baseline, from :attr:`differences`."""
        out: dict[str, tuple[float, float]] = {}
        if self.differences is None:
            return out
        for row in self.differences.itertuples(index=False):
            if row.better == "model":
                out[str(row.worse)] = (float(row.low), float(row.high))
            elif row.worse == "model":
                out[str(row.better)] = (-float(row.high), -float(row.low))
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every number of the report as plain JSON-able Python (floats, ints, str, None).

        Keys (stable; ``schema`` names the layout):

        - ``schema`` (``"posgeo-audit/1"``), ``posgeo_version``, ``computed_on`` (UTC date),
          ``command``;
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
        - ``verdict``: :meth:`verdict` (the conclusion and its warnings);
        - ``random_baseline``: ``{"plug-in" | "corrected": {"tables", "median", "low", "high",
          "model", "share_below", "margin_high", "margin_low"}}`` (:attr:`random`) and
          ``"monotonicity"``: ``{"offset" | "hellinger": [min, max]}``, or ``null``;
        - ``intervals``: ``{"level", "halvings", "target", "stress": {row: {"stress", "low",
          "high", "permuted mean", ...}}, "differences": [{"better", "worse", "difference",
          "low", "high", "separated"}]}`` or ``null``;
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
            "computed_on": self.computed_on,
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
            "verdict": self.verdict(),
            "random_baseline": None if self.random is None else {
                **_table_records(self.random),  # type: ignore[dict-item]
                "monotonicity": {k: list(v) for k, v in (self.random_monotonicity or {}).items()},
            },
            "intervals": None if self.intervals is None else {
                "level": 0.95,
                "halvings": int(self.parameters.get("intervals", 0)),
                "target": "corrected",
                "stress": _table_records(self.intervals),
                "differences": self.differences.to_dict(orient="records") if self.differences is not None else None,
                "monotonicity": _table_records(self.monotonicity_intervals),
            },
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
            ("baselines", "random (median of the tables), scale-optimal stress",
             self.random.loc["plug-in", "median"] if self.random is not None else plug.loc["random", "optimal"], None),
            ("baselines", "random (mean of the tables), monotonicity violation rate (offset)",
             self.monotonicity.loc["random", "offset"], paper["monotonicity/random"]),
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

    def to_html(self, *, static: bool = False) -> str:
        """A self-contained HTML page that loads nothing: inline CSS and interactive charts.

        Each chart is a Vega-Lite spec drawn in the page by vega-embed (tooltips, legends
        that pick a curve); the JavaScript of Vega, Vega-Lite and vega-embed is inlined
        once, in the page's head. With ``static`` every chart is an inline SVG drawn
        beforehand (by vl-convert) and the page has no script at all. The bytes depend only
        on the report (no timestamp), so the same inputs give the same page.

        Parameters
        ----------
        static : bool, keyword-only, default False
            Charts as inline SVG, no JavaScript (``posgeo audit --static``).

        Returns
        -------
        str
        """
        return _render_html(self, static=static)

    @staticmethod
    def output_paths(out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
        """The paths :meth:`write` writes into ``out_dir``, checked (nothing is left behind: a
        temporary file shows that its nearest existing directory takes files).

        The command line calls it before computing, so that an unusable ``--out`` fails
        at once rather than after the audit.

        Parameters
        ----------
        out_dir : path

        Returns
        -------
        tuple of pathlib.Path
            The paths of ``report.html`` and ``report.json``.

        Raises
        ------
        AuditError
            ``out_dir`` is empty or a file, lies under a file, is not writable, or holds a
            ``report.html`` / ``report.json`` that is not a regular file (a directory).

        Examples
        --------
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> [p.name for p in AuditReport.output_paths(d / "new")]
        ['report.html', 'report.json']
        >>> (d / "x" / "report.json").mkdir(parents=True)
        >>> AuditReport.output_paths(d / "x")
        Traceback (most recent call last):
        ...
        posgeo.audit.inputs.AuditError: --out .../x: .../x/report.json is a directory; remove it or pass another --out
        """
        if not os.fspath(out_dir).strip():
            raise AuditError("--out is empty; pass a directory for report.html and report.json")
        out = Path(out_dir).expanduser()
        if out.exists() and not out.is_dir():
            raise AuditError(f"--out {str(out)!r} is a file; pass a directory for report.html and report.json")
        html_path, json_path = out / "report.html", out / "report.json"
        for path in (json_path, html_path):
            if path.is_dir() or (path.exists() and not path.is_file()):
                kind = "a directory" if path.is_dir() else "not a regular file"
                raise AuditError(f"--out {out}: {path} is {kind}; remove it or pass another --out")
        parent = out
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise AuditError(f"--out {out}: {parent} is a file, not a directory; pass another --out")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise AuditError(f"--out {out}: cannot write into {parent} (permission denied); pass a writable directory")
        import tempfile

        try:  # os.access says yes to root everywhere, /proc included: a real file says whether it can be made
            with tempfile.TemporaryFile(dir=parent, prefix=".posgeo-probe-"):
                pass
        except OSError as exc:
            raise AuditError(f"--out {out}: cannot create files in {parent} ({exc.strerror or exc}); pass a directory "
                             "on a writable file system") from exc
        return html_path, json_path

    def write(self, out_dir: str | os.PathLike[str], *, static: bool = False) -> tuple[Path, Path]:
        """Write ``report.html`` and ``report.json`` into ``out_dir`` (created if needed), atomically.

        Both are rendered first, written to temporary files beside their targets and moved
        into place with :func:`os.replace`, the JSON first: a failure at any point leaves
        no temporary file and never a ``report.html`` without its ``report.json`` (a stale
        ``report.html`` is removed if the new one cannot be moved into place).

        Parameters
        ----------
        out_dir : path
        static : bool, keyword-only, default False
            Charts as inline SVG and no JavaScript (:meth:`to_html`).

        Returns
        -------
        tuple of pathlib.Path
            The paths of ``report.html`` and ``report.json``.

        Raises
        ------
        AuditError
            See :meth:`output_paths`.
        OSError
            Writing failed (e.g. the disk is full).
        """
        html_path, json_path = self.output_paths(out_dir)
        texts = {json_path: self.to_json(), html_path: self.to_html(static=static)}  # rendered before anything is written
        html_path.parent.mkdir(parents=True, exist_ok=True)
        temps: dict[Path, Path] = {}
        try:
            for path, text in texts.items():
                temp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
                with open(temp, "x", encoding="utf-8") as f:
                    temps[path] = temp
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(temps.pop(json_path), json_path)  # the JSON first: never an HTML without it
            try:
                os.replace(temps[html_path], html_path)
            except OSError:
                if html_path.is_file():
                    html_path.unlink()  # no stale report.html beside the new report.json
                raise
            temps.pop(html_path)
        finally:
            for temp in temps.values():
                temp.unlink(missing_ok=True)
        return html_path, json_path

    def __repr__(self) -> str:
        return (
            f"AuditReport(dataset={self.parameters['dataset']!r}, model={self.model['label']!r}, "
            f"kind={self.model['positional_kind']!r}, n_positions={self.parameters['n_positions']})"
        )


# --------------------------------------------------------------------------- charts


def _title(report: AuditReport) -> str:
    return f"{report.parameters['dataset']}, n = {report.parameters['n_positions']}"


def _model_name(report: AuditReport) -> str:
    """The model's label without the provenance in brackets (``"all-MiniLM-L6-v2"``)."""
    return str(report.model["label"]).split(" (")[0]


def plot_audit_heatmap(report: AuditReport) -> Any:
    """Heatmaps of the corpus's Hellinger distances, plug-in and noise-corrected, with one colour bar.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    altair chart
        Two panels (plug-in, noise-corrected) sharing one colour scale from 0 to the
        largest distance; hover a cell for its positions and value.
    """
    vmax = float(max(np.nanmax(report.hellinger), np.nanmax(report.hellinger_corrected)))
    domain = (0.0, vmax if vmax > 0 else 1.0)
    n = report.hellinger.shape[0]
    # whole pixels per cell: the side heatmap_chart bins to (128 at most), times the cell size that fits a panel
    side = math.ceil(n / math.ceil(n / 128))
    width = side * max(1, pg.PANEL_WIDTH // side)
    panels = []
    for title, M in ((f"plug-in ({_title(report)})", report.hellinger),
                     ("corrected for sampling noise", report.hellinger_corrected)):
        panel = pg.heatmap_chart(M, title=title, value_title="chord Hellinger distance", domain=domain, width=width)
        panel = panel.mark_rect(strokeWidth=0, aria=False)  # no screen-reader label per cell (the description says what it is)
        panels.append(panel)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared"),
        description=(f"Two heatmaps of the chord Hellinger distance between positions i (rows) and j (columns) of "
                     f"{report.parameters['dataset']}: plug-in (left) and corrected for sampling noise (right), on one "
                     "colour scale; dark is close, yellow far. Hover a cell for its value."),
        canvas=n > 64,
    )


def _alpha(report: AuditReport, name: str = "model") -> float:
    return float(report.stress["plug-in"].loc[name, "alpha"])  # type: ignore[union-attr]


def _offset_frame(M: np.ndarray, name: str) -> pd.DataFrame:
    prof = distance_by_offset(M)
    prof["curve"] = name
    return prof[["offset", "mean", "min", "max", "pairs", "curve"]]


def plot_audit_offsets(report: AuditReport) -> Any:
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
    altair chart
        One line per curve (legend: click to show one alone), bands from min to max,
        tooltips with the values and the number of pairs.
    """
    parts = [_offset_frame(report.hellinger, "corpus, plug-in"),
             _offset_frame(report.hellinger_corrected, "corpus, noise-corrected")]
    if report.encoding is not None:
        alpha = _alpha(report)
        parts.append(_offset_frame(alpha * pairwise_distances(report.encoding),
                                   f"model ({_model_name(report)}) x {alpha:.3g}"))
    chart = pg.series_chart(
        pd.concat(parts, ignore_index=True), x="offset", y="mean", series="curve", lower="min", upper="max",
        x_title="offset |i - j| (positions)", y_title="mean distance (chord Hellinger scale)", series_title="curve",
        title=f"distance by offset ({_title(report)})", tooltip=["pairs"], height=280,
    )
    what = "the corpus's plug-in and noise-corrected distances"
    if report.encoding is not None:
        what += " and the model's position vectors rescaled by the scale-optimal factor"
    return pg.finish_chart(
        chart,
        description=(f"Mean distance between two positions against their offset |i - j|, for {what}; "
                     "the bands span the minimum to the maximum over the pairs at each offset."),
    )


def plot_audit_maps(report: AuditReport) -> Any:
    """Two-dimensional maps of the positions: the corpus (PMDS, k = 2) and the model.

    The model's map is classical MDS (k = 2) of its position vectors' distances, rescaled
    by the scale-optimal factor, so both panels are on the Hellinger scale (and drawn on
    the same axes' range). Points are coloured by position (one colour bar) and joined in
    order; the first and the last position are labelled.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    altair chart
    """
    maps = [("corpus: PMDS (k = 2)", classical_mds(report.hellinger, 2).coords)]
    if report.encoding is not None:
        E = _alpha(report) * pairwise_distances(report.encoding)
        maps.append((f"model ({_model_name(report)}): MDS (k = 2) of its vectors", classical_mds(E, 2).coords))
    frames = []
    for title, X in maps:
        X = np.asarray(X, dtype=float)
        y = X[:, 1] if X.shape[1] > 1 else np.zeros(X.shape[0])
        frames.append((title, pd.DataFrame({"position": np.arange(X.shape[0]), "axis 1": X[:, 0], "axis 2": y})))
    reach = max(float(np.abs(f[["axis 1", "axis 2"]].to_numpy()).max()) for _, f in frames)
    reach = reach * 1.08 if reach > 0 else 1.0
    axis = alt.Scale(domain=[-reach, reach], nice=False, zero=False)
    n = report.hellinger.shape[0]
    colour = alt.Color("position:Q", title="position", scale=alt.Scale(scheme="viridis", domain=[0, n - 1]),
                       legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=260))
    panels = []
    for title, frame in frames:
        base = alt.Chart(frame).encode(x=alt.X("axis 1:Q", title="MDS axis 1 (Hellinger scale)", scale=axis),
                                       y=alt.Y("axis 2:Q", title="MDS axis 2 (Hellinger scale)", scale=axis))
        path = base.mark_line(color="#bbbbbb", strokeWidth=1).encode(order="position:Q")
        points = base.mark_circle(size=42, opacity=1).encode(
            color=colour,
            tooltip=[alt.Tooltip("position:Q"), alt.Tooltip("axis 1:Q", format=".4~g"),
                     alt.Tooltip("axis 2:Q", format=".4~g")])
        ends = frame.iloc[[0, -1]].assign(label=lambda f: [f"position {int(p)}" for p in f["position"]])
        labels = alt.Chart(ends).mark_text(align="left", dx=6, dy=-6, fontSize=11, color="#333333").encode(
            x=alt.X("axis 1:Q", scale=axis), y=alt.Y("axis 2:Q", scale=axis), text="label:N",
            tooltip=[alt.Tooltip("label:N", title="point")])
        panels.append(alt.layer(path, points, labels).properties(title=title, width=pg.PANEL_WIDTH,
                                                                  height=pg.PANEL_WIDTH))
    chart = pg.panel_grid(panels, columns=2)
    if len(panels) > 1:
        chart = chart.resolve_scale(color="shared")
    which = "the corpus geometry (classical MDS of the plug-in distances)"
    if report.encoding is not None:
        which += " and the model's position vectors (classical MDS of their rescaled distances), on the same scale"
    return pg.finish_chart(
        chart,
        description=(f"Positions 0 to {n - 1} placed in two dimensions, coloured by position and joined in order: "
                     f"{which}. Hover a point for its position."),
    )


def plot_audit_stress(report: AuditReport) -> Any:
    """Scale-optimal stress of every fitted and compared encoding, against both targets.

    Bars are grouped by encoding and coloured by the target distances (plug-in,
    noise-corrected); where the report has 95% intervals (the corrected
    target), they are drawn as error bars.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    altair chart
    """
    rows = []
    for target, df in report.stress.items():
        if df is None:
            continue
        for name, row in df.drop(index="PMDS full").iterrows():
            rows.append({"encoding": str(name), "target": target, "stress": float(row["optimal"]),
                         "raw stress": float(row["raw"]), "dim": int(row["dim"])})
    long = pd.DataFrame(rows)
    if report.intervals is not None:
        ints = report.intervals[["low", "high"]]
        hit = (long["target"] == "corrected") & long["encoding"].isin(ints.index)
        long["low"] = np.where(hit, long["encoding"].map(ints["low"]), np.nan)
        long["high"] = np.where(hit, long["encoding"].map(ints["high"]), np.nan)
    encodings = list(dict.fromkeys(long["encoding"]))
    targets = list(dict.fromkeys(long["target"]))
    top = float(np.nanmax(long[["stress", "high"] if "high" in long else ["stress"]].to_numpy(dtype=float)))
    x = alt.X("encoding:N", sort=encodings, title=None, axis=alt.Axis(labelAngle=-35))
    offset = alt.XOffset("target:N", sort=targets)
    tips = [alt.Tooltip("encoding:N"), alt.Tooltip("target:N", title="target distances"),
            alt.Tooltip("stress:Q", title="scale-optimal stress", format=".4~g"),
            alt.Tooltip("raw stress:Q", format=".4~g"), alt.Tooltip("dim:Q", title="dimension")]
    if "low" in long:
        tips += [alt.Tooltip("low:Q", title="95% interval, low", format=".4~g"),
                 alt.Tooltip("high:Q", title="95% interval, high", format=".4~g")]
    bars = alt.Chart(long).mark_bar().encode(
        x=x, xOffset=offset, y=alt.Y("stress:Q", title="scale-optimal stress (0 = perfect fit)",
                                     scale=alt.Scale(domainMax=top * 1.04, nice=True)),
        color=alt.Color("target:N", scale=pg.colour_scale(targets), title="target distances",
                        sort=targets),
        tooltip=tips,
    )
    layers = [bars]
    if "low" in long and long["low"].notna().any():
        bounded = long[long["low"].notna()].assign(interval="95% widened interval")
        layers.append(alt.Chart(bounded).mark_rule(strokeWidth=1.5, color="#000000").encode(
            x=x, xOffset=offset, y=alt.Y("low:Q"), y2="high:Q",
            strokeDash=alt.StrokeDash("interval:N", title=None,
                                      scale=alt.Scale(domain=["95% widened interval"], range=[[1, 0]])),
            tooltip=tips))
    chart = alt.layer(*layers).properties(width=pg.COLUMN_WIDTH, height=260,
                                           title=f"scale-optimal stress ({_title(report)}; lower is better)")
    return pg.finish_chart(
        chart,
        description=("Grouped bars of the scale-optimal stress of each encoding (classical MDS and SMACOF at low "
                     "dimension, the model, sinusoidal and random baselines) against the plug-in and the "
                     "noise-corrected distances; black lines are 95% widened intervals where the report has "
                     "them. Lower fits better."),
    )


def plot_audit_layers(report: AuditReport) -> Any:
    """Projected stress per layer (scale-optimal and raw), against both targets.

    Parameters
    ----------
    report : AuditReport

    Returns
    -------
    altair chart
        Two panels: scale-optimal (left) and raw (right; logarithmic when it spans more
        than a factor 50) projected stress against the layer, one line per target.

    Raises
    ------
    ValueError
        When the report has no per-layer numbers (the reason is in ``report.notes``).
    """
    if report.layers is None:
        raise ValueError(f"this report has no per-layer numbers: {report.notes.get('layers', '')}")
    long = pd.concat([t.rename_axis("layer").reset_index().assign(target=str(label))
                      for label, t in report.layers.items()], ignore_index=True)
    long["layer"] = long["layer"].astype(int)
    raw = long["raw"].to_numpy(dtype=float)
    log = bool(np.all(raw > 0) and raw.max() > 50 * raw.min())
    panels = []
    for column, name in (("optimal", "scale-optimal"), ("raw", "raw")):
        panels.append(pg.series_chart(
            long, x="layer", y=column, series="target", x_title="layer (0 = the positional input)",
            y_title=f"{name} projected stress" + (" (log scale)" if column == "raw" and log else ""),
            series_title="target distances", title=f"{name} projected stress", points=True, zoom=False,
            y_scale={"type": "log"} if column == "raw" and log else None, tooltip=["distance ratio"],
            width=pg.PANEL_WIDTH, height=pg.PANEL_HEIGHT,
        ))
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2),
        description=("Projected stress of the positional input through each layer's query and key maps against the "
                     "layer (0 is the input itself): scale-optimal (left) and raw (right), one line per target "
                     "distances (plug-in, noise-corrected)."),
    )


def _plot_spectrum(report: AuditReport) -> Any:
    """Eigen-spectra of the double-centred Gram matrices (classical MDS) of both targets.

    Left: ``|eigenvalue| / sum |eigenvalues|`` of the leading 40 (log scale); right: the
    share of the positive eigenvalues' sum held by the top r (log r), with the 99% line.
    Both panels share one legend (the reference line is in it).
    """
    spectra = {"plug-in": classical_mds(report.hellinger).eigenvalues}
    if report.stress.get("corrected") is not None:
        spectra["noise-corrected"] = classical_mds(report.hellinger_corrected).eigenvalues
    n = report.hellinger.shape[0]
    top, reference = min(40, n), "99% reference"
    left, right = [], []
    for name, lam in spectra.items():
        lam = np.asarray(lam, dtype=float)
        k = np.arange(1, min(top, lam.size) + 1)
        left.append(pd.DataFrame({"index": k, "share": np.abs(lam[: k.size]) / np.abs(lam).sum(), "spectrum": name}))
        pos = np.clip(lam, 0, None)
        right.append(pd.DataFrame({"rank": np.arange(1, lam.size + 1), "energy": np.cumsum(pos) / pos.sum(),
                                   "spectrum": name}))
    ranks = int(max(len(f) for f in right))
    right.append(pd.DataFrame({"rank": [1, ranks], "energy": [0.99, 0.99], "spectrum": reference}))
    # the reference's name also in the left panel's data (no value: nothing drawn), so that both panels
    # have the same colour and dash scales and one legend shows them all
    left.append(pd.DataFrame({"index": [1], "share": [np.nan], "spectrum": [reference]}))
    a = pg.series_chart(pd.concat(left, ignore_index=True), x="index", y="share", series="spectrum", points=True,
                        x_title="eigenvalue index", y_title="|eigenvalue| / sum |eigenvalues| (log scale)",
                        y_scale={"type": "log"}, series_title="spectrum", width=pg.PANEL_WIDTH, height=pg.PANEL_HEIGHT,
                        title="leading eigenvalues", zoom=False)
    b = pg.series_chart(pd.concat(right, ignore_index=True), x="rank", y="energy", series="spectrum",
                        x_title="rank r (log scale)", y_title="share of the energy in the top r",
                        x_scale={"type": "log", "domain": [1, ranks], "nice": False}, series_title="spectrum",
                        width=pg.PANEL_WIDTH, height=pg.PANEL_HEIGHT, title="cumulative energy", zoom=False)
    return pg.finish_chart(
        pg.panel_grid([a, b], columns=2),
        description=("Eigen-spectra of the double-centred Gram matrix of the " + " and the ".join(spectra)
                     + " distances: the leading eigenvalues' shares (log scale, left) and the cumulative share of "
                     "the positive eigenvalues in the top r (right), with a dotted line at 99%."),
    )


# --------------------------------------------------------------------------- HTML
_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1d2330; background: #fff; }
main { max-width: 1000px; margin: 0 auto; padding: 1.5em 1.2em 3em; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #d6dae3; padding-bottom: 0.2em; }
.sub { color: #5a6275; margin-top: 0; }
code, pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.92em; }
pre { background: #f4f6fa; padding: 0.6em 0.8em; overflow-x: auto; border-radius: 4px; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.92em; display: block; max-width: 100%; overflow-x: auto; }
th, td { border-bottom: 1px solid #e3e6ee; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f6fa; }
.read { background: #f7f9fc; border-left: 3px solid #6b8fd6; padding: 0.5em 0.9em; margin: 0.8em 0; }
.note { background: #fff8e6; border-left: 3px solid #e0a800; padding: 0.5em 0.9em; margin: 0.8em 0; }
figure { margin: 0.8em 0; }
figure svg { max-width: 100%; height: auto; }
.chart { max-width: 100%; overflow-x: auto; }
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


# Readable names for the report's tables (the JSON keeps the keys).
_LABELS = {
    "description": "description", "source": "source", "text_column": "text column", "sequences": "sequences",
    "tokens": "tokens", "median_length": "median length (tokens)", "max_length": "longest (tokens)",
    "vocab_size": "vocabulary size", "tokenizer": "tokenizer", "label": "model", "model_type": "architecture",
    "positional_kind": "positional signal", "encoding": "position vectors", "position_offset": "table row of position 0",
    "special_tokens_prepended": "special tokens before the text", "position_id_shift": "position-id shift",
    "dimension": "width of the position vectors", "hidden_size": "hidden size", "n_heads": "attention heads",
    "head_dim": "head size", "n_layers": "layers", "table_rows": "rows of the position table",
    "min_dist": "closest pair: distance", "normalised": "closest pair: distance / mean norm",
    "relative": "closest pair: distance / mean distance", "mean_dist": "mean distance between rows",
    "mean_norm": "mean row norm", "q05": "distance, 5% quantile", "q25": "distance, 25% quantile",
    "q50": "distance, median", "q75": "distance, 75% quantile", "q95": "distance, 95% quantile",
    "i": "closest pair: position i", "j": "closest pair: position j", "metric": "metric",
    "n_positions": "positions", "reach_first": "sequences reaching the first position",
    "reach_last": "sequences reaching the last position", "flagged_positions": "positions reached by fewer than 100",
    "mean_distance": "mean distance (plug-in)", "adjacent_distance": "mean distance at offset 1 (plug-in)",
    "mean_distance_corrected": "mean distance (corrected)",
    "adjacent_distance_corrected": "mean distance at offset 1 (corrected)", "noise_share": "noise share",
}
_VALUES = {("source", "known"): "a corpus posgeo knows (sst2/imdb)", ("source", "parquet"): "a parquet file",
           ("source", "text"): "a text file, one sequence per line", ("source", "hub"): "a Hugging Face hub dataset",
           ("source", "counts"): "stored positional counts (posgeo count)"}


def _labelled(items: Any) -> list[list[Any]]:
    """``[label, value]`` rows for a dict shown in the report, with readable names."""
    return [[_LABELS.get(k, k.replace("_", " ")), _VALUES.get((k, v), v) if isinstance(v, str) else v]
            for k, v in items]


def _frame_table(df: pd.DataFrame, index_name: str) -> str:
    header = [index_name] + [str(c) for c in df.columns]
    rows = [[str(idx)] + [(None if isinstance(v, float) and not math.isfinite(v) else v) for v in row]
            for idx, row in zip(df.index, df.itertuples(index=False))]
    return _table(header, rows)


# --------------------------------------------------------------------------- charts in the page
#: Vega-Lite version of the specs Altair writes ("5.20"); the bundled JavaScript is of this version.
_VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
# vega-embed's menu keeps the exports (drawn in the page) and drops the links to the online editor.
_ACTIONS = {"export": True, "source": False, "compiled": False, "editor": False}
# What the inlined JavaScript is (vl-convert's bundle) and the notices its licences ask for.
_LICENCE_NOTE = """/*! Vega, Vega-Lite and vega-embed (with vega-tooltip, vega-themes and vega-schema-url-parser),
bundled by vl-convert (Copyright 2023 Jon Mease; BSD-3-Clause). Vega, Vega-Lite, vega-embed, vega-tooltip,
vega-themes: Copyright (c) 2015-2023, University of Washington Interactive Data Lab; all rights reserved;
BSD-3-Clause. Included: d3 modules and delaunator (ISC; Copyright Mike Bostock, Mapbox), lodash.debounce
and json-stringify-pretty-compact (MIT; Copyright OpenJS Foundation, Simon Lydell), robust-predicates
(Unlicense).
BSD-3-Clause: Redistribution and use in source and binary forms, with or without modification, are
permitted provided that the following conditions are met: 1. Redistributions of source code must retain the
above copyright notice, this list of conditions and the following disclaimer. 2. Redistributions in binary
form must reproduce the above copyright notice, this list of conditions and the following disclaimer in the
documentation and/or other materials provided with the distribution. 3. Neither the name of the copyright
holder nor the names of its contributors may be used to endorse or promote products derived from this
software without specific prior written permission. THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND
CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED
WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE
COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF
USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE. */"""


# A grid of panels (pg.panel_grid) becomes one column on a narrow screen (a phone), as in the book.
_FIT_JS = ("function posgeoFit(spec) { return spec.concat && spec.columns > 1 && "
           "document.documentElement.clientWidth < 760 ? Object.assign({}, spec, {columns: 1}) : spec; }")


def _script_json(value: Any) -> str:
    """JSON safe inside an inline ``<script>``: no ``<`` (so no ``</script>``, no ``<!--``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


@functools.lru_cache(maxsize=1)
def _javascript() -> str:
    """Vega, Vega-Lite and vega-embed as one script (vl-convert's bundle; it defines ``vegaEmbed``)."""
    import vl_convert as vlc

    bundle = vlc.javascript_bundle(vl_version=_VL_VERSION)
    if "</script" in bundle.lower():  # pragma: no cover - it would end the inline script early
        raise RuntimeError("the Vega bundle of vl-convert contains '</script'; it cannot be inlined")
    return _LICENCE_NOTE + "\n" + bundle


_DIGITS = re.compile(r"-?\d+\.\d{3,}(?:e-?\d+)?")
_SVG_DROP = [
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.S),
    re.compile(r'\s+xmlns(:\w+)?="[^"]*"'),
]


def _svg(spec: Mapping[str, Any], name: str) -> str:
    """The chart as an inline ``<svg>`` element (vl-convert): deterministic, ids prefixed with ``name``."""
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(dict(spec), vl_version=_VL_VERSION)
    for pattern in _SVG_DROP:
        svg = pattern.sub("", svg)
    # coordinates to 0.01 px (Vega writes 6.6000000000000005): a third of the size of a heatmap
    svg = re.sub(r'\b(d|transform|points)="([^"]*)"',
                 lambda m: f'{m.group(1)}="{_DIGITS.sub(lambda x: f"{float(x.group(0)):.2f}".rstrip("0").rstrip("."), m.group(2))}"',
                 svg)
    prefix = f"{name}-"
    seen: dict[str, int] = {}

    def rename(match: re.Match[str]) -> str:  # prefix every id; number repeats
        ident = match.group(1)
        seen[ident] = seen.get(ident, 0) + 1
        suffix = "" if seen[ident] == 1 else f"-{seen[ident]}"
        return f'id="{prefix}{ident}{suffix}"'

    svg = re.sub(r'\bid="([^"]+)"', rename, svg)
    svg = re.sub(r'((?:xlink:)?href)="#([^"]+)"', lambda m: f'{m.group(1)}="#{prefix}{m.group(2)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return svg.strip()


def _figure(chart: Any, name: str, caption: str, *, static: bool = False) -> str:
    """One chart with its caption: a ``<div>`` that a tiny script fills with :func:`vegaEmbed`
    (interactive: tooltips, legends), or with ``static`` an inline SVG and no script."""
    spec = pg.chart_spec(chart)  # machine-independent: rounded numbers, renumbered names
    if static:  # the description as the image's alt text (vega-embed puts it on the chart's container)
        label = f' role="img" aria-label="{_esc(spec.get("description", ""))}"'
        body = re.sub(r"^<svg\b", lambda m: "<svg" + label, _svg(spec, name), count=1)
    else:
        renderer = spec.get("usermeta", {}).get("embedOptions", {}).get("renderer", "svg")
        options = {"renderer": renderer, "actions": _ACTIONS, "downloadFileName": f"posgeo-audit-{name}"}
        body = (f'<div class="chart" id="chart-{name}"></div><script>vegaEmbed("#chart-{name}", '
                f"posgeoFit({_script_json(spec)}), {_script_json(options)}).catch(console.error);</script>")
    return f'<figure id="fig-{name}">{body}<figcaption>{_esc(caption)}</figcaption></figure>'


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
        rnd = r.random.loc[target] if r.random is not None and target in r.random.index else None
        random_text = (f"random vectors {rnd['median']:.3g} (median of {int(rnd['tables'])} tables; 95% of them "
                       f"{rnd['low']:.3g} to {rnd['high']:.3g})" if rnd is not None else
                       f"random vectors {table.loc['random', 'optimal']:.3g}")
        lines.append(
            f"Baselines of the same width: {random_text}, sinusoidal "
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


def _render_html(r: AuditReport, *, static: bool = False) -> str:
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
    add(f"<title>{_esc(title)}</title><style>{_CSS}</style>")
    if not static:  # Vega, Vega-Lite and vega-embed, once; each chart below is a tiny script calling vegaEmbed
        add(f"<script>{_javascript()}</script>")
        add(f"<script>{_FIT_JS}</script>")
    add("</head><body><main>")
    if not static:
        add('<noscript><p class="note">The charts of this page are drawn by JavaScript, which is switched off: '
            "<code>posgeo audit ... --static</code> writes them as plain SVG images.</p></noscript>")

    def _fig(chart: Any, name: str, caption: str, hint: str = "") -> str:  # hint: how to interact (not in static)
        return _figure(chart, name, caption if static or not hint else f"{caption} {hint}", static=static)

    add(f"<h1>{_esc(title)}</h1>")
    when = f" &middot; computed on {_esc(r.computed_on)}" if r.computed_on else ""
    add(f'<p class="sub">posgeo {_esc(r.version)}{when} &middot; {_esc(r.dataset["description"])}</p>')
    add("<p>How well do this model's positions fit the positional geometry of this corpus? The corpus "
        "defines a distance between every two positions: the chord Hellinger distance between the token "
        "distributions seen there. An encoding fits when the distances between its position vectors reproduce "
        "those distances; <em>stress</em> scores the mismatch (0 is a perfect fit). This report gives the "
        "corpus geometry, the best fit any encoding can reach, the model's own fit, and what its layers do.</p>")
    v = r.verdict()
    add("<h2>Verdict</h2>")
    for w in v["warnings"]:
        add(f'<p class="note"><strong>Warning:</strong> {_esc(w)}</p>')
    add("<ul>" + "".join(f"<li>{_esc(line)}</li>" for line in v["sentences"]) + "</ul>")
    if r.random is not None:
        k = int(r.random["tables"].iloc[0])
        add('<p class="read"><strong>How to read this.</strong> Random vectors are not one draw: the model is '
            f"compared with {k} tables of Gaussian random vectors of its width. It fits <em>better</em> than random "
            "vectors only if its scale-optimal stress lies below 97.5% of theirs (their 2.5% quantile, "
            "<em>low</em>), and <em>worse</em> only if above 97.5% of them (<em>high</em>). With sampling "
            "intervals (corrected distances) the whole 95% interval of the margin must lie on that side: "
            "<em>margin high</em> is the upper end of the interval of the model's stress minus <em>low</em> "
            "(below 0: better), <em>margin low</em> the lower end of its stress minus <em>high</em> (above 0: "
            "worse). A table that is itself random is called better at most about one time in forty. Sinusoids "
            "and the regular simplex are not random: against them a difference counts where its paired 95% "
            "interval excludes 0, or, without intervals, where it exceeds 5% of the baseline's stress.</p>")
        add(_frame_table(r.random, "random tables"))
    add("<h2>At a glance</h2>")
    add("<ul>" + "".join(f"<li>{_esc(line)}</li>" for line in _glance(r)) + "</ul>")
    if r.notes:
        add("<h2>Notes</h2>")
        for key, text in r.notes.items():
            add(f'<p class="note"><strong>{_esc(key)}:</strong> {_esc(text)}</p>')

    # summary
    add("<h2>Summary</h2>")
    add('<p class="read"><strong>How to read this.</strong> Raw stress is P1\'s criterion; it compares distances on '
        "an absolute scale, so long vectors score badly whatever their shape. Scale-optimal stress multiplies the "
        "vectors by the best factor first and compares shapes (0 to 1). A monotonicity violation rate of 0 means "
        "that nearer positions always get nearer vectors; random vectors score about 0.5. The P1 column holds the "
        "values reported by Cirrincione (2026) where a comparable one exists (its stress values for sinusoidal, "
        "RoPE and ALiBi were measured on SST-2; its pretrained model is BERT-base).</p>")
    summary = r.summary()
    rows = [[f"{s}: {q}", v if math.isfinite(v) else None, pv if math.isfinite(pv) else ""]
            for (s, q), (v, pv) in zip(summary.index, summary.itertuples(index=False))]
    add(_table(["quantity", "value", "P1 reports"], rows))

    # dataset and model
    add("<h2>Dataset and model</h2>")
    add('<p class="read"><strong>How to read this.</strong> Corpus position <em>i</em> is the <em>i</em>-th token of a '
        "text tokenised without special tokens. For a learned table it is row <em>i</em> + position_offset of the "
        "table: the special tokens the tokenizer prepends (BERT's [CLS]) plus the architecture's position-id shift "
        "(RoBERTa starts at padding_idx + 1). RoPE and ALiBi act inside attention; their vectors are the "
        "constructions of the book's MDS chapter, whose distances depend on the offset only.</p>")
    add(_table(["dataset", "value"], _labelled(r.dataset.items())))
    add(_table(["model", "value"], _labelled(m.items())))

    # corpus geometry
    add("<h2>The corpus geometry</h2>")
    add('<p class="read"><strong>How to read this.</strong> Distances near 0 mean two positions see the same '
        "tokens; near 1, disjoint tokens. Plug-in distances include sampling noise, which inflates them and adds a "
        "full-rank random component; the noise share is the part of the squared distances that the correction "
        "removes. The effective rank is how many dimensions an encoding needs to reproduce the geometry: P1 "
        "(Observation 8) expects it to be small. A curve that rises with the offset is a geometry an ordered "
        "encoding can follow; a flat one says that, beyond the first positions, positions look alike.</p>")
    add(_fig(plot_audit_heatmap(r), "heatmap",
                f"Chord Hellinger distance between the token distributions of positions 0..{n - 1}: plug-in (left) "
                "and corrected for sampling noise (right), on one colour scale (dark: close).",
                "Hover a cell for its positions and value."))
    geo_rows = _labelled((k, v) for k, v in c.items() if k != "effective_rank")
    add(_table(["corpus", "value"], geo_rows))
    er_rows = [[t, v["rank_90"], v["rank_99"], v["entropy_rank"]] for t, v in c["effective_rank"].items() if v is not None]
    add(_table(["target", "rank (90% energy)", "rank (99% energy)", "entropy rank"], er_rows))
    add(_fig(_plot_spectrum(r), "spectrum", "Eigenvalues of the double-centred Gram matrix (classical MDS) and the "
                "energy held by the top r: plug-in (solid) and noise-corrected (dashed), with the 99% line (dotted)."))
    add(_fig(plot_audit_offsets(r), "offsets",
                "Mean distance at every offset |i - j| (band: min to max over pairs): the corpus, plug-in (solid) and "
                "noise-corrected (dashed), and the model's vectors times the scale-optimal factor.",
                "Click a legend entry to show one curve; drag to pan, scroll to zoom."))

    # best fit
    add("<h2>The best possible fit</h2>")
    add('<p class="read"><strong>How to read this.</strong> PMDS (P1\'s Algorithm 1, classical MDS) at full rank '
        f"reproduces the chord Hellinger distance exactly, because that distance is Euclidean: P1 reports "
        f"{_fmt(paper['stress/real/pmds'])} on real corpora. At a fixed low dimension SMACOF minimises stress "
        "directly and is never worse than PMDS. These rows are the floor: no encoding of that dimension can do "
        "better. alpha is the scale-optimal factor.</p>")
    add(_fig(plot_audit_maps(r), "maps", "Positions in two dimensions, coloured by position and joined in order: "
                "the corpus geometry (PMDS, left) and the model's vectors (right), on the same scale."))
    for target, df in r.stress.items():
        if df is None:
            continue
        add(f"<h3>Stress against the {_esc(target)} distances</h3>")
        add(_frame_table(df, "encoding"))
    if r.intervals is not None:
        add("<h3>Which differences hold (95% widened intervals, corrected distances)</h3>")
        add('<p class="read"><strong>How to read this.</strong> The corpus is split into random halves '
            f"{_esc(p.get('intervals', 20))} times, and each stress is recomputed on each half: the interval is the "
            "sampling uncertainty of the stress against the corrected geometry. Each interval is then widened on both "
            "sides by the gap between the stress against the corrected (hybrid) distances and against a second "
            "noise correction (the matched half-sample estimate; for phrases nested in their sentences, such as "
            "SST-2's training split, the jackknife over sentence groups, chapter 3): a sampling interval cannot hold an estimator's "
            "own bias, and where two corrections with different biases disagree, that gap measures it. Two stresses differ only where the paired interval of their difference "
            "excludes 0. The regular simplex puts every position at the same distance (no order at all); "
            "\"permuted\" is the mean stress of the same vectors with their rows shuffled, and gain what the "
            "order of the rows buys.</p>")
        add(_frame_table(r.intervals[["stress", "low", "high", "permuted mean", "gain", "p"]], "encoding"))
        if r.differences is not None:
            add(_frame_table(r.differences.set_index(["better", "worse"])[["difference", "low", "high", "separated"]]
                             .reset_index(level=1), "better"))
    add(_fig(plot_audit_stress(r), "stress", "Scale-optimal stress of each encoding (PMDS and SMACOF at k = "
                + ", ".join(map(str, p["mds_dims"])) + "; the model; sinusoidal and random baselines of the model's width) "
                "against the plug-in and the noise-corrected distances"
                + ("; black lines: 95% widened intervals (corrected distances)." if r.intervals is not None else ".")))

    # model
    add("<h2>The model's positions</h2>")
    add('<p class="read"><strong>How to read this.</strong> Separation (P1, Theorem 4): a trained model should keep '
        "distinct positions apart; min_dist is the closest pair's distance, relative divides it by the mean "
        "distance. Monotonicity (P1, Conjecture 5): the share of comparisons in which a position nearer to an "
        "anchor gets a farther vector, with pairs ordered by the offset |i - j| or by the corpus distance. The "
        f"corpus row is the rate of the corpus distances themselves (PMDS at full rank has the same); P1 reports "
        f"{_fmt(paper['monotonicity/pmds'])} for PMDS, {_fmt(paper['monotonicity/pretrained'])} for a pretrained "
        f"model and {_fmt(paper['monotonicity/random'])} for random vectors, without saying at which n: rates grow "
        "with the range of positions."
        + ("" if not r.random_monotonicity else
           " The random row is the mean over 20 Gaussian random tables of the model's width (offset order: "
           f"{_fmt(r.random_monotonicity['offset'][0])} to {_fmt(r.random_monotonicity['offset'][1])}).")
        + "</p>")
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
        add(_table(["separation of the position vectors", "value"], _labelled(sep.items())))
    add(_frame_table(r.monotonicity, "monotonicity violation rate"))
    if r.monotonicity_intervals is not None:
        add(_frame_table(r.monotonicity_intervals, "violation rate, 95% widened interval"))

    # layers
    add("<h2>The layers</h2>")
    if r.layers is not None:
        add('<p class="read"><strong>How to read this.</strong> The positional part of the embedding layer\'s output '
            "is pushed through every layer's query and key maps, and the result is scored by stress. P1 reports a "
            "peak of raw stress at layer 3 of BERT-base. Raw projected stress mostly measures how much a layer's maps "
            "stretch (see the distance ratio); scale-optimal stress compares the shape that each layer's attention "
            "sees.</p>")
        add(_fig(plot_audit_layers(r), "layers", "Projected stress of the positional input through each layer's "
                    "query and key maps (layer 0: the input itself), against the plug-in (solid) and the noise-corrected "
                    "(dashed) distances."))
        for target, df in r.layers.items():
            add(f"<h3>Projected stress against the {_esc(target)} distances</h3>")
            add(_frame_table(df, "layer"))
    else:
        add(f'<p class="note">{_esc(r.notes.get("layers", "no per-layer numbers"))}</p>')

    add("<h2>Reproduce</h2>")
    add(f"<pre>{_esc(r.command)}</pre>")
    defaults = {"model": "the bundled all-MiniLM-L6-v2", "column": "the default (text or sentence)",
                "max_sequences": "all", "data_dir": "$POSGEO_DATA_DIR"}
    add(_table(["parameter", "value"], [[k.replace("_", " "), defaults.get(k, "none") if v is None else
                                         ", ".join(map(str, v)) if isinstance(v, list) else v] for k, v in p.items()]))

    add("<h2>Reference values (P1)</h2>")
    add(_table(["key", "reported"], [[k, v] for k, v in paper.items()]))
    add(f"<footer>Generated by posgeo {_esc(r.version)} (<code>{_esc(r.command)}</code>). The same numbers are in "
        "report.json. " + ("Every chart is an inline SVG image." if static else
                           "The charts are drawn by Vega-Lite, whose JavaScript is included once in this file (hover "
                           "for values, click a legend entry to show one curve).")
        + " This page loads nothing from anywhere.</footer>")
    add("</main></body></html>")
    return "\n".join(parts) + "\n"
