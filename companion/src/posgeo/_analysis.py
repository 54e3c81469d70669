"""Corpus-level analyses shared by the chapters: the geometry of a corpus and stress tables."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal, Mapping

import numpy as np
import pandas as pd

from ._cache import cached
from ._encodings import alibi_encoding, random_encoding, rope_encoding, sinusoidal_encoding
from ._geometry import (
    check_distance_matrix,
    classical_mds,
    hellinger_matrix,
    scale_optimal_alpha,
    stress,
    stress_optimal_mds,
)
from ._marginals import hellinger_noise_floor, position_counts, positional_marginals

__all__ = [
    "PAPER_P1",
    "CorpusGeometry",
    "corpus_geometry",
    "corpus_summary",
    "geometry_summary",
    "distance_by_offset",
    "matched_hellinger_matrix",
    "noise_share",
    "standard_encodings",
    "model_encodings",
    "stress_comparison",
    "stress_table",
]

PAPER_P1: dict[str, float] = {
    "stress/sst2/alibi": 0.563,
    "stress/sst2/sinusoidal": 272.0,
    "stress/sst2/rope": 279.0,
    "stress/synthetic/pmds": 0.009,
    "stress/real/pmds": 0.0,
    "monotonicity/pmds": 0.22,
    "monotonicity/pretrained": 0.254,
    "monotonicity/random": 0.50,
    "lowrank/synthetic/stress_reduction": 0.998,
    "lowrank/synthetic/parameter_saving": 0.88,
}
"""Numbers reported in P1 (Cirrincione, 2026), printed beside ours in the chapters.

P1 reports PMDS stress "≈ 0" on the real corpora; we store it as 0.0.
"""


@dataclass(frozen=True, eq=False)
class CorpusGeometry:
    """The statistical geometry of a corpus' positions.

    Attributes
    ----------
    name : str
        Corpus name.
    marginals : numpy.ndarray, shape (n, V)
        Empirical per-position token distributions.
    distances : numpy.ndarray, shape (n, n)
        Plug-in distances between the marginals (``metric``).
    debiased : numpy.ndarray, shape (n, n)
        Noise-corrected distances from :func:`matched_hellinger_matrix` (same metric).
    first_order : numpy.ndarray, shape (n, n)
        The first-order correction ``sqrt(max(0, d^2 - b_i - b_j))`` (same metric), which
        assumes the noise shrinks like 1/N.
    counts : numpy.ndarray, shape (n,)
        Sequences reaching each position.
    split_half : numpy.ndarray, shape (n,)
        Split-half chord Hellinger distance per position (the noise floor).
    bias_sq : numpy.ndarray, shape (n,)
        Estimated squared chord-Hellinger bias per position.
    flagged : numpy.ndarray, shape (n,), bool
        Positions reached by fewer than ``min_count`` sequences.
    metric : str
        ``"chord"`` or ``"fisher-rao"``.
    """

    name: str
    marginals: np.ndarray
    distances: np.ndarray
    debiased: np.ndarray
    first_order: np.ndarray
    counts: np.ndarray
    split_half: np.ndarray
    bias_sq: np.ndarray
    flagged: np.ndarray
    metric: str

    @property
    def n_positions(self) -> int:
        """Number of positions n."""
        return int(self.distances.shape[0])


def _sequences_digest(seqs: Any) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(seqs.tokens, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(seqs.offsets, dtype=np.int64).tobytes())
    return h.hexdigest()


def _chord_to_metric(H: np.ndarray, metric: str) -> np.ndarray:
    if metric == "chord":
        return H
    out = 2.0 * np.arccos(np.clip(1.0 - H**2, -1.0, 1.0))
    np.fill_diagonal(out, 0.0)
    return out


def corpus_geometry(
    corpus: Any,
    n_positions: int,
    *,
    metric: Literal["chord", "fisher-rao"] = "chord",
    min_count: int = 100,
    n_splits: int = 5,
    seed: int = 0,
    cache: bool = True,
) -> CorpusGeometry:
    r"""Per-position marginals, their Hellinger distances, and the sampling-noise floor.

    Parameters
    ----------
    corpus : Corpus
        From :func:`load_corpus` (its ``sequences`` and ``vocab_size`` are used).
    n_positions : int
        Positions 0..n-1 analysed; every one must be reached by some sequence.
    metric : {"chord", "fisher-rao"}, keyword-only
    min_count : int, keyword-only
        Positions reached by fewer sequences are flagged as unreliable.
    n_splits : int, keyword-only
        Random half-splits for the noise floor.
    seed : int, keyword-only
        Seed of the half-splits.
    cache : bool, keyword-only
        Store/read the result in the posgeo cache (keyed on the corpus' name, split, options and size).

    Returns
    -------
    CorpusGeometry

    Examples
    --------
    >>> from posgeo import load_corpus
    >>> g = corpus_geometry(load_corpus("synthetic", n_sequences=500), 32, cache=False)
    >>> g.distances.shape, bool(g.flagged.any())
    ((32, 32), False)
    """
    if metric not in ("chord", "fisher-rao"):
        raise ValueError(f"unknown metric {metric!r}; use 'chord' or 'fisher-rao'")
    seqs = getattr(corpus, "sequences", corpus)
    vocab = int(getattr(corpus, "vocab_size", getattr(seqs, "vocab_size", 0)))
    if vocab <= 0:
        raise TypeError("corpus must be a posgeo Corpus or Sequences (with a vocab_size); use load_corpus(...)")

    def compute() -> CorpusGeometry:
        mu = positional_marginals(seqs, n_positions, vocab)
        nf = hellinger_noise_floor(seqs, n_positions, vocab, n_splits=n_splits, seed=seed, min_count=min_count)
        H = hellinger_matrix(mu)
        H2 = np.clip(H**2 - nf.bias_sq[:, None] - nf.bias_sq[None, :], 0.0, None)
        Hf = np.sqrt(H2)
        np.fill_diagonal(Hf, 0.0)
        Hm = matched_hellinger_matrix(seqs, n_positions, vocab, n_splits=n_splits, seed=seed)
        return CorpusGeometry(
            name=str(getattr(corpus, "name", "corpus")),
            marginals=mu,
            distances=_chord_to_metric(H, metric),
            debiased=_chord_to_metric(Hm, metric),
            first_order=_chord_to_metric(Hf, metric),
            counts=nf.counts,
            split_half=nf.split_half,
            bias_sq=nf.bias_sq,
            flagged=nf.flagged,
            metric=metric,
        )

    key = {
        "corpus": repr(corpus),
        "options": getattr(corpus, "options", None),
        "tokens": int(seqs.tokens.size) if hasattr(seqs, "tokens") else None,
        "checksum": _sequences_digest(seqs) if hasattr(seqs, "tokens") else None,
        "n": n_positions,
        "metric": metric,
        "min_count": min_count,
        "n_splits": n_splits,
        "seed": seed,
    }
    return cached("corpus_geometry", key, compute, enabled=cache and hasattr(seqs, "tokens"))


def distance_by_offset(D: object, *, max_offset: int | None = None) -> pd.DataFrame:
    """Mean, min and max of ``D[i, i+k]`` for every offset k (the Toeplitz profile).

    Parameters
    ----------
    D : array_like, shape (n, n)
    max_offset : int, optional
        Largest offset reported (default n-1).

    Returns
    -------
    pandas.DataFrame
        Columns ``offset``, ``mean``, ``min``, ``max``, ``pairs``.

    Examples
    --------
    >>> distance_by_offset([[0, 1, 2], [1, 0, 1], [2, 1, 0]])["mean"].tolist()
    [1.0, 2.0]
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    kmax = n - 1 if max_offset is None else min(int(max_offset), n - 1)
    rows = []
    for k in range(1, kmax + 1):
        diag = np.diagonal(Dm, offset=k)
        rows.append({"offset": k, "mean": diag.mean(), "min": diag.min(), "max": diag.max(), "pairs": diag.size})
    return pd.DataFrame(rows, columns=["offset", "mean", "min", "max", "pairs"])


def noise_share(geometry: CorpusGeometry) -> float:
    r"""Share of the squared plug-in distances that the noise correction removes.

    :math:`1 - \sum_{i<j} \tilde d_{ij}^2 / \sum_{i<j} \hat d_{ij}^2`, with :math:`\hat d` the
    plug-in and :math:`\tilde d` the noise-corrected distances (``geometry.debiased``).
    0 means no detectable noise; 1 means the measured geometry is all noise.

    Parameters
    ----------
    geometry : CorpusGeometry

    Returns
    -------
    float
    """
    iu = np.triu_indices(geometry.n_positions, k=1)
    den = float((geometry.distances[iu] ** 2).sum())
    if den == 0:
        return float("nan")
    return float(np.clip(1.0 - float((geometry.debiased[iu] ** 2).sum()) / den, 0.0, 1.0))


def matched_hellinger_matrix(
    sequences: Any, n_positions: int, vocab_size: int, *, n_splits: int = 5, seed: int = 0
) -> np.ndarray:
    r"""Chord Hellinger distances corrected for sampling noise by matched half-samples.

    Split the sequences at random into halves A and B (by sequence, so the halves are
    independent) and estimate the marginals :math:`a_i` and :math:`b_i` of every position on
    each half. The cross-half squared distance :math:`H^2(a_i, b_j)` carries the true
    :math:`H^2(\mu_i, \mu_j)` plus the noise of two half-samples, and the *same-position*
    cross-half distance :math:`s_i^2 = H^2(a_i, b_i)` carries that noise alone (its true
    value is 0). Hence

    .. math:: \tilde H^2_{ij} = \overline{H^2(a_i, b_j)} - \tfrac12 \bigl(\overline{s_i^2} + \overline{s_j^2}\bigr),

    averaged over ``n_splits`` random splits (symmetrised), clipped at 0. Unlike a
    correction that assumes the noise shrinks like 1/N, this compares samples of matched
    size, so it holds also in the heavy-tailed regime of a 30,000-token vocabulary, where
    most tokens are seen once or never. Two positions with identical true distributions get
    :math:`\tilde H \approx 0` (up to fluctuation).

    It under-corrects slightly: for two *different* positions the cross-half noise exceeds
    the average same-position noise by a non-negative term (of the order of the squared
    mismatch between the two positions' sampling errors), so the result is an upper
    estimate of the true distance, and where the noise is already small (well sampled, small
    vocabulary) it can be slightly worse than the plug-in. Its strength is the heavy-tailed
    regime, where a correction that assumes 1/N noise fails.

    Parameters
    ----------
    sequences : Sequences or Corpus
        The corpus.
    n_positions : int
        Positions 0..n-1; each must be reached by at least 2 sequences.
    vocab_size : int
    n_splits : int, keyword-only
        Random half-splits averaged.
    seed : int, keyword-only

    Returns
    -------
    numpy.ndarray, shape (n_positions, n_positions)
        Symmetric, non-negative, zero diagonal.

    Examples
    --------
    >>> from posgeo import load_corpus, hellinger_matrix
    >>> c = load_corpus("synthetic", n_sequences=400)
    >>> D = matched_hellinger_matrix(c, 32, 64)
    >>> truth = hellinger_matrix(c.true_marginals)
    >>> plug_in = hellinger_matrix(positional_marginals(c, 32, 64))
    >>> bool(np.linalg.norm(D - truth) < np.linalg.norm(plug_in - truth))
    True
    """
    seqs = getattr(sequences, "sequences", sequences)
    if not hasattr(seqs, "tokens"):
        raise TypeError("sequences must be a posgeo Sequences or Corpus; build one with load_corpus or Sequences.from_list")
    n = int(n_positions)
    V = int(vocab_size)
    counts = position_counts(seqs, n)
    if counts.min() < 2:
        raise ValueError(
            f"position {int(np.argmax(counts < 2))} is reached by fewer than 2 sequences; "
            "pass a smaller n_positions"
        )
    if n_splits < 1:
        raise ValueError(f"n_splits must be >= 1, got {n_splits}")
    tokens = np.asarray(seqs.tokens, dtype=np.int64)
    offsets = np.asarray(seqs.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    m = lengths.size
    pos = np.arange(tokens.size, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    seq_id = np.repeat(np.arange(m), lengths)
    keep = pos < n
    flat = pos[keep] * V + tokens[keep]
    sid = seq_id[keep]
    rng = np.random.default_rng(seed)
    acc = np.zeros((n, n))
    for _ in range(int(n_splits)):
        in_a = (rng.random(m) < 0.5)[sid]
        roots = []
        for mask in (in_a, ~in_a):
            c = np.bincount(flat[mask], minlength=n * V).reshape(n, V).astype(np.float64)
            tot = c.sum(axis=1, keepdims=True)
            roots.append(np.sqrt(np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)))
        h2 = 1.0 - roots[0] @ roots[1].T
        h2 = 0.5 * (h2 + h2.T)
        d = np.diag(h2).copy()
        acc += h2 - 0.5 * (d[:, None] + d[None, :])
    out = np.sqrt(np.clip(acc / n_splits, 0.0, None))
    out = 0.5 * (out + out.T)
    np.fill_diagonal(out, 0.0)
    return out


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


def stress_table(
    D: object,
    encodings: Mapping[str, object],
    *,
    mds_dims: tuple[int, ...] = (),
    smacof_max_iter: int = 300,
) -> pd.DataFrame:
    """Raw and scale-optimal stress of several encodings against one distance matrix.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Target distances.
    encodings : mapping of str to array (n, k)
        Encodings to score.
    mds_dims : tuple of int
        Also score classical MDS (``PMDS k=…``, plus ``PMDS full``) and SMACOF (``SMACOF k=…``)
        at these dimensions.
    smacof_max_iter : int
        Iteration cap for SMACOF.

    Returns
    -------
    pandas.DataFrame
        Index: encoding; columns ``dim``, ``raw``, ``optimal``, ``alpha`` (the scale-optimal factor).

    Examples
    --------
    >>> D = [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    >>> stress_table(D, {"line": np.arange(3.0)[:, None]})[["raw", "optimal"]].round(3).to_dict("records")
    [{'raw': 0.0, 'optimal': 0.0}]
    """
    Dm = check_distance_matrix(D)
    rows: dict[str, dict[str, float]] = {}
    if mds_dims:
        full = classical_mds(Dm)
        rows["PMDS full"] = {"dim": full.dim, "raw": full.stress, "optimal": stress(full.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(full.coords, Dm)}
    for k in mds_dims:
        cm = classical_mds(Dm, k)
        sm = stress_optimal_mds(Dm, k, max_iter=smacof_max_iter)
        rows[f"PMDS k={k}"] = {"dim": k, "raw": cm.stress, "optimal": stress(cm.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(cm.coords, Dm)}
        rows[f"SMACOF k={k}"] = {"dim": k, "raw": sm.stress, "optimal": stress(sm.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(sm.coords, Dm)}
    for name, P in encodings.items():
        P = np.asarray(P, dtype=np.float64)
        rows[name] = {
            "dim": P.shape[1] if P.ndim == 2 else 1,
            "raw": stress(P, Dm),
            "optimal": stress(P, Dm, scale="optimal"),
            "alpha": scale_optimal_alpha(P, Dm),
        }
    df = pd.DataFrame.from_dict(rows, orient="index", columns=["dim", "raw", "optimal", "alpha"])
    df["dim"] = df["dim"].astype(int)
    df.index.name = "encoding"
    return df


def corpus_summary(corpora: Mapping[str, Any], n_positions: Mapping[str, int]) -> pd.DataFrame:
    """One row per corpus: size, vocabulary, lengths, and how many sequences reach the last position.

    Parameters
    ----------
    corpora : mapping of str to Corpus
    n_positions : mapping of str to int
        Positions analysed per corpus.

    Returns
    -------
    pandas.DataFrame
        Columns ``sequences``, ``tokens``, ``vocab_size``, ``distinct_tokens``, ``median_length``,
        ``max_length``, ``n_positions``, ``reach_last`` (sequences reaching position n-1).

    Examples
    --------
    >>> from posgeo import load_corpus
    >>> corpus_summary({"syn": load_corpus("synthetic", n_sequences=100)}, {"syn": 32})["reach_last"].tolist()
    [100]
    """
    rows = {}
    for name, c in corpora.items():
        seqs = c.sequences
        lengths = np.diff(seqs.offsets)
        n = int(n_positions[name])
        rows[name] = {
            "sequences": int(lengths.size),
            "tokens": int(lengths.sum()),
            "vocab_size": int(c.vocab_size),
            "distinct_tokens": int(np.unique(seqs.tokens).size),
            "median_length": float(np.median(lengths)),
            "max_length": int(lengths.max()),
            "n_positions": n,
            "reach_last": int((lengths >= n).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def geometry_summary(geometries: Mapping[str, CorpusGeometry]) -> pd.DataFrame:
    """One row per corpus: typical distances, the noise floor, and its share.

    Parameters
    ----------
    geometries : mapping of str to CorpusGeometry

    Returns
    -------
    pandas.DataFrame
        Columns ``adjacent`` (mean plug-in distance at offset 1), ``mean`` (mean over pairs),
        ``adjacent_corrected`` and ``mean_corrected`` (the same for ``debiased``),
        ``adjacent_first_order`` (the first-order correction at offset 1),
        ``noise_floor_first`` / ``noise_floor_last`` (split-half distance at the first and last
        position), ``flagged`` (positions with too few sequences), ``noise_share``
        (see :func:`noise_share`).
    """
    rows = {}
    for name, g in geometries.items():
        iu = np.triu_indices(g.n_positions, k=1)
        rows[name] = {
            "adjacent": float(np.diagonal(g.distances, 1).mean()),
            "mean": float(g.distances[iu].mean()),
            "adjacent_corrected": float(np.diagonal(g.debiased, 1).mean()),
            "mean_corrected": float(g.debiased[iu].mean()),
            "adjacent_first_order": float(np.diagonal(g.first_order, 1).mean()),
            "noise_floor_first": float(g.split_half[0]),
            "noise_floor_last": float(g.split_half[-1]),
            "flagged": int(g.flagged.sum()),
            "noise_share": noise_share(g),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


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
    target: Literal["distances", "debiased"] = "distances",
    mds_dims: tuple[int, ...] = (1, 2, 3),
    smacof_max_iter: int = 300,
) -> pd.DataFrame:
    """Stress of every encoding on every corpus, raw and scale-optimal, in one table.

    Parameters
    ----------
    geometries : mapping of corpus name to CorpusGeometry
    encodings : mapping of corpus name to {encoding name: (n, k) array}
        The encodings to score on that corpus (rows = that corpus' positions).
    target : {"distances", "debiased"}
        Score against the plug-in distances (P1's) or the noise-corrected ones.
    mds_dims : tuple of int
        Dimensions at which classical MDS and SMACOF are fitted (plus full-rank PMDS).
    smacof_max_iter : int

    Returns
    -------
    pandas.DataFrame
        Index: encoding; columns: MultiIndex (corpus, ``raw`` | ``optimal``).
    """
    if target not in ("distances", "debiased"):
        raise ValueError(f"target must be 'distances' or 'debiased', got {target!r}")
    parts = {}
    for name, g in geometries.items():
        D = getattr(g, target)
        parts[name] = stress_table(D, encodings.get(name, {}), mds_dims=mds_dims, smacof_max_iter=smacof_max_iter)[["raw", "optimal"]]
    return pd.concat(parts, axis=1)
