"""Corpus-level analyses shared by the chapters: the geometry of a corpus and stress tables."""

from __future__ import annotations

from typing import Literal, Mapping
import numpy as np
import pandas as pd
from posgeo import alibi_encoding, random_encoding, rope_encoding, sinusoidal_encoding
from posgeo import CorpusGeometry, stress_table

__all__ = ['standard_encodings', 'model_encodings', 'stress_comparison']


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

