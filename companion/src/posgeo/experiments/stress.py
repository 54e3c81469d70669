"""Corpus-level analyses shared by the chapters: the geometry of a corpus and stress tables."""

from __future__ import annotations

from typing import Literal, Mapping
import numpy as np
import pandas as pd
from posgeo import alibi_encoding, random_encoding, rope_encoding, sinusoidal_encoding
from posgeo import BootstrapGeometry, CorpusGeometry, order_free_baselines, pairwise_distances, stress_table
from posgeo.validation import check_int

__all__ = ['standard_encodings', 'model_encodings', 'stress_comparison', 'stress_intervals', 'stress_differences']


def standard_encodings(
    n: int,
    *,
    d: int = 384,
    n_heads: int = 12,
    seed: int = 0,
    learned: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The fixed encodings compared in the MDS chapter, for positions 0..n-1.

    Parameters
    ----------
    n : int
        Number of positions.
    d : int
        Model dimension (sinusoidal, RoPE, random).
    n_heads : int
        Heads: RoPE's head size is ``d // n_heads``; ALiBi's slopes are for ``n_heads``.
    seed : int
        Seed of the random Gaussian encoding.
    learned : numpy.ndarray, shape (n, d'), optional
        A learned table (e.g. MiniLM's rows for these positions), included as ``"learned"``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``sinusoidal``, ``rope``, ``alibi``, ``random`` (and ``learned``).

    Examples
    --------
    >>> sorted(standard_encodings(8, d=16, n_heads=4))
    ['alibi', 'random', 'rope', 'sinusoidal']
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, (int, np.integer)) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    if d % n_heads:
        raise ValueError(f"d={d} is not divisible by n_heads={n_heads}; pass a d that splits into heads")
    out = {
        "sinusoidal": sinusoidal_encoding(n, d),
        "rope": rope_encoding(n, d, head_dim=d // n_heads),
        "alibi": alibi_encoding(n, n_heads),
        "random": random_encoding(n, d, seed=seed),
    }
    if learned is not None:
        L = np.asarray(learned, dtype=np.float64)
        if L.ndim != 2 or L.shape[0] != n:
            raise ValueError(f"learned must have shape (n={n}, d'), got {L.shape}; slice the table's rows first")
        out["learned"] = L
    return out


def model_encodings(n: int, *, learned: np.ndarray | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The encodings of the MDS chapter's comparison, at two model sizes.

    ``sinusoidal``/``RoPE``/``random`` at d = 384 (MiniLM's width, 12 heads of 32) and
    d = 768 (BERT-base, 12 heads of 64), ``ALiBi`` with 12 heads, and an optional learned table.

    Parameters
    ----------
    n : int
        Number of positions.
    learned : numpy.ndarray, shape (n, d'), optional
        Rows of a learned table for these positions.
    seed : int
        Seed of the random encodings.

    Returns
    -------
    dict of str to numpy.ndarray

    Examples
    --------
    >>> list(model_encodings(4))
    ['sinusoidal d=384', 'sinusoidal d=768', 'RoPE d=384 (head 32)', 'RoPE d=768 (head 64)', 'ALiBi 12 heads', 'random d=384']
    """
    small = standard_encodings(n, d=384, n_heads=12, seed=seed)
    large = standard_encodings(n, d=768, n_heads=12, seed=seed)
    out = {
        "sinusoidal d=384": small["sinusoidal"],
        "sinusoidal d=768": large["sinusoidal"],
        "RoPE d=384 (head 32)": small["rope"],
        "RoPE d=768 (head 64)": large["rope"],
        "ALiBi 12 heads": small["alibi"],
        "random d=384": small["random"],
    }
    if learned is not None:
        out["MiniLM learned"] = np.asarray(learned, dtype=np.float64)
    return out


def stress_comparison(
    geometries: Mapping[str, CorpusGeometry],
    encodings: Mapping[str, Mapping[str, np.ndarray]],
    *,
    target: Literal["distances", "matched", "hybrid"] = "distances",
    mds_dims: tuple[int, ...] = (1, 2, 3),
    smacof_max_iter: int = 300,
) -> pd.DataFrame:
    """Stress of every encoding on every corpus, raw and scale-optimal, in one table.

    Parameters
    ----------
    geometries : mapping of corpus name to CorpusGeometry
    encodings : mapping of corpus name to {encoding name: (n, k) array}
        The encodings to score on that corpus (rows = that corpus' positions).
    target : {"distances", "matched", "hybrid"}
        Score against the plug-in distances (P1's) or a noise-corrected estimate (the
        hybrid one is the book's "corrected" geometry).
    mds_dims : tuple of int
        Dimensions at which classical MDS and SMACOF are fitted (plus full-rank PMDS).
    smacof_max_iter : int

    Returns
    -------
    pandas.DataFrame
        Index: encoding; columns: MultiIndex (corpus, ``raw`` | ``optimal``).
    """
    if target not in ("distances", "matched", "hybrid"):
        raise ValueError(
            f"target must be 'distances' (plug-in), 'hybrid' or 'matched' (noise-corrected), got {target!r}"
        )
    parts = {}
    for name, g in geometries.items():
        D = getattr(g, target)
        parts[name] = stress_table(D, encodings.get(name, {}), mds_dims=mds_dims, smacof_max_iter=smacof_max_iter)[["raw", "optimal"]]
    return pd.concat(parts, axis=1)


def _optimal_stress_rows(encodings: Mapping[str, np.ndarray], n: int) -> tuple[list[str], np.ndarray]:
    """Unit-norm upper triangles of each encoding's distances, with the regular simplex
    (all distances equal) first: scale-optimal stress against d is ``1 - (E d)^2 / d.d``."""
    iu = np.triu_indices(n, 1)
    names = ["regular simplex"]
    rows = [np.ones(iu[0].size)]
    for name, P in encodings.items():
        P = np.asarray(P, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] != n:
            raise ValueError(f"encoding {name!r} has shape {P.shape}; pass one row per position (n={n})")
        names.append(str(name))
        rows.append(pairwise_distances(P)[iu])
    E = np.array(rows)
    norms = np.linalg.norm(E, axis=1)
    E = np.divide(E, norms[:, None], out=np.zeros_like(E), where=norms[:, None] > 0)
    return names, E


def _stress_statistic(E: np.ndarray):
    def statistic(d: np.ndarray) -> np.ndarray:
        dd = float(d @ d)
        if dd == 0.0:
            return np.full(E.shape[0], np.nan)
        return np.clip(1.0 - (E @ d) ** 2 / dd, 0.0, None)

    return statistic


def stress_intervals(
    boot: BootstrapGeometry,
    encodings: Mapping[str, np.ndarray],
    *,
    n_permutations: int = 100,
    seed: int = 0,
) -> pd.DataFrame:
    """Scale-optimal stress of each encoding against a bootstrapped geometry, with its
    sampling interval and the order-free baselines.

    Parameters
    ----------
    boot : BootstrapGeometry
        From :func:`~posgeo.bootstrap_geometry` (e.g. ``estimator="hybrid"``).
    encodings : mapping of str to numpy.ndarray, shape (n, d)
        Position vectors for the geometry's n positions.
    n_permutations : int, keyword-only, default 100
        Row permutations of each encoding (:func:`~posgeo.order_free_baselines`).
    seed : int, keyword-only, default 0
        Seed of the permutations.

    Returns
    -------
    pandas.DataFrame
        Index: ``"regular simplex"`` then the encodings. Columns: ``stress``
        (scale-optimal, against ``boot.estimate``), ``low``, ``high`` (its interval at
        ``boot.level``, from the replicates), ``permuted mean``, ``permuted low``,
        ``permuted high`` (over row permutations, against the estimate), ``gain``
        (``permuted mean - stress``: what positional order buys) and ``p`` (share of
        permutations fitting at least as well).

    Examples
    --------
    >>> import posgeo as pg
    >>> bg = pg.bootstrap_geometry(pg.synthetic_corpus(n_sequences=400), 8, estimator="hybrid",
    ...                            n_boot=5, progress=False)
    >>> t = stress_intervals(bg, {"sinusoidal": pg.sinusoidal_encoding(8, 16)}, n_permutations=20)
    >>> list(t.index), bool((t["low"] <= t["stress"]).all())
    (['regular simplex', 'sinusoidal'], True)
    """
    if not isinstance(boot, BootstrapGeometry):
        raise TypeError(f"boot must be a BootstrapGeometry (from posgeo.bootstrap_geometry), got {type(boot).__name__}")
    n = boot.n_positions
    names, E = _optimal_stress_rows(encodings, n)
    est, low, high = boot.interval(_stress_statistic(E), triangle=True)
    table = pd.DataFrame({"stress": est, "low": np.clip(low, 0.0, None), "high": high}, index=names)
    base = order_free_baselines(boot.estimate, encodings, n_permutations=n_permutations, seed=seed)
    base = base.rename(index=str)
    for col in ("permuted mean", "permuted low", "permuted high", "gain", "p"):
        table[col] = base[col].reindex(table.index).to_numpy()
    return table


def stress_differences(
    boot: BootstrapGeometry,
    encodings: Mapping[str, np.ndarray],
) -> pd.DataFrame:
    """Which encoding fits better, with paired intervals: for every pair (A, B), the
    difference of their scale-optimal stresses against the same replicates.

    A claim "A fits better than B" holds at ``boot.level`` where the interval of
    ``stress(A) - stress(B)`` lies below 0; two intervals of the stresses themselves may
    overlap while the paired difference is still clear (both move together with the
    sample).

    Parameters
    ----------
    boot : BootstrapGeometry
    encodings : mapping of str to numpy.ndarray, shape (n, d)
        The regular simplex is added as ``"regular simplex"``.

    Returns
    -------
    pandas.DataFrame
        One row per ordered pair (A better on the estimate): columns ``better``,
        ``worse``, ``difference`` (stress(better) - stress(worse), <= 0), ``low``,
        ``high`` and ``separated`` (``high < 0``).

    Examples
    --------
    >>> import posgeo as pg
    >>> bg = pg.bootstrap_geometry(pg.synthetic_corpus(n_sequences=400), 8, estimator="hybrid",
    ...                            n_boot=5, progress=False)
    >>> t = stress_differences(bg, {"sinusoidal": pg.sinusoidal_encoding(8, 16)})
    >>> t[["better", "worse"]].shape
    (1, 2)
    """
    if not isinstance(boot, BootstrapGeometry):
        raise TypeError(f"boot must be a BootstrapGeometry (from posgeo.bootstrap_geometry), got {type(boot).__name__}")
    names, E = _optimal_stress_rows(encodings, boot.n_positions)
    k = len(names)
    ia, ib = np.triu_indices(k, 1)
    base = _stress_statistic(E)
    est, low, high = boot.interval(lambda d: (lambda s: s[ia] - s[ib])(base(d)), triangle=True)
    rows = []
    for a, b, e, lo, hi in zip(ia, ib, np.atleast_1d(est), np.atleast_1d(low), np.atleast_1d(high)):
        if e > 0:  # b is the better one: flip
            a, b, e, lo, hi = b, a, -e, -hi, -lo
        rows.append({"better": names[a], "worse": names[b], "difference": e, "low": lo, "high": hi, "separated": bool(hi < 0)})
    return pd.DataFrame(rows)
