r"""Minimal parametrisation: effective rank, rank-r MDS, and low-rank learned encodings (P1, Observation 8).

P1 (Cirrincione, 2026) observes that the optimal encoding has effective rank
:math:`r = \mathrm{rank}(B)` (:math:`B` the double-centred Gram matrix of the Hellinger
distances), so a factorised table :math:`P = A B^\top`, :math:`A \in \mathbb{R}^{n\times r}`,
:math:`B \in \mathbb{R}^{d\times r}`, needs only :math:`r(n + d)` parameters instead of
:math:`nd`. This module provides:

- :func:`lowrank_parameter_count` and :func:`positional_parameter_count`;
- :func:`top_eigenpairs`: the top-k eigenpairs of a symmetric matrix by a full or a partial
  eigendecomposition (``benchmarks/bench_rank.py`` compares them);
- :func:`rank_r_stress_curve`: stress of the rank-r classical-MDS and SMACOF encodings
  against r, with the spectral energy they keep; :func:`lowrank_claim_table`: P1's synthetic
  claim beside ours;
- :func:`lowrank_settings`, :func:`lowrank_training_runs`, :func:`lowrank_training_sweep`:
  masked-token training of the posgeo transformer on the synthetic corpus with no,
  sinusoidal, low-rank and free position tables (one row per run and seed, or the mean over
  seeds), scored by accuracy against the Bayes optimum and by the stress of the learned
  tables against the corpus geometry;
- plots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd
import torch
from posgeo import eval_mode
from posgeo import torch_threads as _torch_threads
from posgeo import sinusoidal_encoding
from posgeo import (
    check_distance_matrix,
    double_centered_gram,
    effective_rank,
    hellinger_matrix,
    stress,
    stress_optimal_mds,
)
from posgeo import Transformer, TransformerConfig
from posgeo import current_profile
from posgeo import progress_bar
from posgeo import MarginalSampler, synthetic_marginals
from posgeo import POSITION_PARAMETERS, IGNORE_INDEX, MLMTask, TrainConfig, train
from posgeo import resolve_eig_method, small_blas, top_eigenpairs
from .papers import PAPER_P1_LOWRANK
from posgeo.validation import check_int
import posgeo as pg

__all__ = [
    'lowrank_parameter_count',
    'positional_parameter_count',
    'gram_spectra',
    'effective_rank_table',
    'rank_r_stress_curve',
    'lowrank_claim_table',
    'LowRankSettings',
    'lowrank_settings',
    'synthetic_mlm_task',
    'mlm_marginal_metrics',
    'lowrank_encodings',
    'lowrank_training_runs',
    'lowrank_training_sweep',
    'plot_rank_stress_curves',
    'plot_accuracy_vs_parameters',
]


# --------------------------------------------------------------------------- parameter counts


def lowrank_parameter_count(n: int, d: int, r: int) -> int:
    r"""Parameters of a rank-r factorised position table :math:`P = A B^\top`: :math:`r(n + d)`.

    Parameters
    ----------
    n : int
        Positions (rows of the table).
    d : int
        Model width (columns).
    r : int
        Rank, ``1 <= r <= min(n, d)`` (beyond that a free table is smaller).

    Returns
    -------
    int

    Raises
    ------
    TypeError
        Non-integer sizes.
    ValueError
        Non-positive sizes or ``r > min(n, d)``.

    Examples
    --------
    P1's example: n = 32, d = 128, r = 3 against a free 32 x 128 table.

    >>> lowrank_parameter_count(32, 128, 3), 32 * 128
    (480, 4096)
    """
    n, d, r = check_int(n, "n"), check_int(d, "d"), check_int(r, "r")
    if r > min(n, d):
        raise ValueError(f"r={r} exceeds min(n, d) = {min(n, d)}; a rank-r factorisation needs r <= min(n, d)")
    return r * (n + d)


def positional_parameter_count(model: torch.nn.Module) -> int:
    """Trainable parameters of a posgeo :class:`Transformer`'s position table.

    ``learned``: the ``max_len x d_model`` table ``pos``; ``lowrank``: the factors ``pos_a``
    (``max_len x r``) and ``pos_b`` (``d_model x r``); every other kind: 0 (sinusoidal
    tables are fixed buffers, RoPE and ALiBi have no parameters).

    Parameters
    ----------
    model : Transformer

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``model`` is not a posgeo Transformer.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=8, d_model=16, n_heads=2, n_layers=1, d_ff=16, max_len=10,
    ...                         position="lowrank", rank=2)
    >>> positional_parameter_count(Transformer(cfg)) == lowrank_parameter_count(10, 16, 2)
    True
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a posgeo Transformer, got {type(model).__name__}")
    return sum(p.numel() for name, p in model.named_parameters() if name in POSITION_PARAMETERS and p.requires_grad)


# --------------------------------------------------------------------------- effective rank
def gram_spectra(matrices: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Eigenvalues (descending) of the double-centred Gram matrix of each distance matrix.

    Parameters
    ----------
    matrices : mapping of str to (n, n) arrays
        Label -> distance matrix ``D``.

    Returns
    -------
    dict of str to numpy.ndarray, shape (n,)
        Label -> eigenvalues of ``double_centered_gram(D)``, descending (negative ones kept),
        e.g. for :func:`plot_spectra`.

    Examples
    --------
    >>> gram_spectra({"pair": [[0.0, 2.0], [2.0, 0.0]]})["pair"].round(6).tolist()
    [2.0, 0.0]
    """
    out = {}
    for label, D in matrices.items():
        B = double_centered_gram(check_distance_matrix(D))
        with small_blas(B.shape[0]):
            out[label] = np.sort(np.linalg.eigvalsh(B))[::-1] + 0.0
    return out


def effective_rank_table(
    matrices: Mapping[str, object],
    *,
    energies: Sequence[float] = (0.9, 0.99),
    top: int = 3,
) -> pd.DataFrame:
    r"""Exact and effective ranks of the double-centred Gram matrices of several distance matrices.

    Parameters
    ----------
    matrices : mapping of str to (n, n) arrays
        Label -> distance matrix ``D``; ``B = double_centered_gram(D)``.
    energies : sequence of float, keyword-only
        Thresholds for :func:`effective_rank` (share of the positive spectral mass).
    top : int, keyword-only
        Also report the share of the positive mass in the top ``top`` eigenvalues.

    Returns
    -------
    pandas.DataFrame
        One row per matrix: ``n``; ``exact rank`` (positive eigenvalues above ``1e-10`` times
        the largest magnitude; P1's :math:`r = \mathrm{rank}(B)` when ``B`` is positive
        semi-definite); ``rank <e>%`` for each energy;
        ``entropy rank``; ``energy top <top>``; ``negative share`` (share of absolute
        eigenvalue mass on negative eigenvalues, 0 for a Euclidean ``D``).

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    >>> effective_rank_table({"square": D})[["n", "exact rank", "rank 99%"]].to_dict("records")
    [{'n': 4, 'exact rank': 2, 'rank 99%': 2}]
    """
    rows = {}
    for label, D in matrices.items():
        B = double_centered_gram(check_distance_matrix(D))
        with small_blas(B.shape[0]):
            lam = np.sort(np.linalg.eigvalsh(B))[::-1]
        summary = effective_rank(lam)
        tol = 1e-10 * max(float(np.abs(lam).max()), 1e-300)
        row: dict[str, float] = {"n": B.shape[0], "exact rank": int(np.sum(lam > tol))}
        for e in energies:
            row[f"rank {100 * e:g}%"] = effective_rank(lam, energy=e).rank_at_energy
        row["entropy rank"] = summary.entropy_rank
        row[f"energy top {top}"] = float(summary.cumulative_energy[min(top, lam.size) - 1])
        total = float(np.abs(lam).sum())
        row["negative share"] = max(0.0, float(-lam[lam < -tol].sum() / total)) if total > 0 else 0.0
        rows[label] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    int_cols = ["n", "exact rank"] + [f"rank {100 * e:g}%" for e in energies]
    out[int_cols] = out[int_cols].astype(int)
    return out


# --------------------------------------------------------------------------- rank-r stress
def _check_ranks(ranks: Sequence[int], n: int) -> list[int]:
    rs = [check_int(r, "rank") for r in ranks]
    if not rs:
        raise ValueError("ranks must be a non-empty sequence of ints")
    if max(rs) > n:
        raise ValueError(f"rank {max(rs)} exceeds the number of positions n={n}; pass ranks <= n")
    if len(set(rs)) != len(rs):
        raise ValueError(f"ranks must be distinct, got {list(ranks)}")
    return sorted(rs)


def rank_r_stress_curve(
    D: object,
    ranks: Sequence[int],
    *,
    smacof: bool = True,
    smacof_max_iter: int = 300,
    method: str = "auto",
    progress: bool = True,
    intervals: Any = None,
) -> pd.DataFrame:
    r"""Stress of the rank-r MDS encoding of ``D`` against r, with the spectral energy it keeps.

    Rank-r classical MDS is :math:`V_r \Lambda_r^{1/2}` from the top-r eigenpairs of
    :math:`B = -\tfrac12 J D^{\circ 2} J` (one partial eigendecomposition serves every r);
    SMACOF (:func:`stress_optimal_mds`) minimises raw stress in r dimensions from that start.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Distance matrix.
    ranks : sequence of int
        Distinct ranks, each in [1, n].
    smacof : bool, keyword-only, default True
        Also fit SMACOF at every rank (slower: O(n^2 r) per iteration).
    smacof_max_iter : int, keyword-only
    method : {"auto", "full", "subset", "arpack"}, keyword-only
        Eigensolver (:func:`top_eigenpairs`).
    progress : bool, keyword-only
    intervals : BootstrapGeometry, optional, keyword-only
        Bootstrapped geometry whose estimate is ``D`` (e.g.
        :func:`posgeo.experiments.statistics.corpus_bootstrap`): adds the sampling interval
        of each scale-optimal stress (:func:`posgeo.stress_intervals`: the encoding fitted to
        ``D`` held fixed, the geometry resampled) as ``"<column> low"`` and ``"<column> high"``.

    Returns
    -------
    pandas.DataFrame
        Index ``rank``; columns ``energy`` (share of the positive spectral mass in the top r
        eigenvalues; with a partial eigensolver the mass is :math:`\mathrm{tr}\,B`, exact when
        :math:`B` is positive semi-definite, as for the chord Hellinger distance),
        ``classical raw``, ``classical optimal`` and, with ``smacof``, ``SMACOF raw``,
        ``SMACOF optimal`` (raw and scale-optimal stress, :func:`stress`).

    Raises
    ------
    ValueError
        ``D`` not a distance matrix; bad ranks.

    Examples
    --------
    Four corners of a unit square: two dimensions reproduce it exactly.

    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    >>> curve = rank_r_stress_curve(D, [1, 2], progress=False)
    >>> curve["energy"].round(3).tolist(), bool(curve.loc[2, "classical raw"] < 1e-20)
    ([0.5, 1.0], True)
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    rs = _check_ranks(ranks, n)
    if intervals is not None:
        from posgeo import BootstrapGeometry

        if not isinstance(intervals, BootstrapGeometry):
            raise TypeError(f"intervals must be a BootstrapGeometry (corpus_bootstrap(...)), got {type(intervals).__name__}")
        if intervals.n_positions != n or not np.allclose(intervals.estimate, Dm, rtol=0, atol=1e-12):
            raise ValueError("rank_r_stress_curve: intervals.estimate must be D itself (the bootstrap of the same geometry)")
    encodings: dict[str, np.ndarray] = {}
    with small_blas(n):
        out = _rank_curve(Dm, rs, smacof=smacof, smacof_max_iter=smacof_max_iter, method=method, progress=progress,
                          keep=encodings if intervals is not None else None)
        if intervals is not None:
            table = pg.stress_intervals(intervals, encodings, n_permutations=1)
            for col in [c for c in ("classical optimal", "SMACOF optimal") if c in out.columns]:
                method_name = col.split()[0]
                out[f"{col} low"] = [float(table.loc[f"{method_name} {r}", "low"]) for r in out.index]
                out[f"{col} high"] = [float(table.loc[f"{method_name} {r}", "high"]) for r in out.index]
    return out


def _rank_curve(Dm: np.ndarray, rs: list[int], *, smacof: bool, smacof_max_iter: int, method: str, progress: bool,
                keep: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    n = Dm.shape[0]
    B = double_centered_gram(Dm)
    kmax = max(rs)
    resolved = resolve_eig_method(method, n, kmax)
    if resolved == "full":
        all_lam = np.linalg.eigvalsh(B)
        mass = float(np.clip(all_lam, 0.0, None).sum())
    else:
        mass = float(np.trace(B))
    lam, V = top_eigenpairs(B, kmax, method=resolved)
    rows = {}
    for r in progress_bar(rs, enabled=progress, desc="rank-r MDS"):
        coords = V[:, :r] * np.sqrt(np.clip(lam[:r], 0.0, None))
        row = {
            "energy": float(np.clip(lam[:r], 0.0, None).sum() / mass) if mass > 0 else np.nan,
            "classical raw": stress(coords, Dm),
            "classical optimal": stress(coords, Dm, scale="optimal"),
        }
        if smacof:
            sm = stress_optimal_mds(Dm, r, init=coords, max_iter=smacof_max_iter)
            row["SMACOF raw"] = sm.stress
            row["SMACOF optimal"] = stress(sm.coords, Dm, scale="optimal")
            if keep is not None:
                keep[f"SMACOF {r}"] = sm.coords
        if keep is not None:
            keep[f"classical {r}"] = coords
        rows[r] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "rank"
    return out


def lowrank_claim_table(
    D: object,
    *,
    n_positions: int | None = None,
    d: int = 128,
    rank: int = 3,
    smacof_max_iter: int = 1000,
) -> pd.DataFrame:
    """P1's low-rank claim (Observation 8) beside ours, on one distance matrix.

    Compares the rank-r encodings (classical MDS and SMACOF) with the sinusoidal encoding of
    width ``d`` (:func:`sinusoidal_encoding`, unscaled), by raw and by scale-optimal stress,
    and the parameters of a rank-r factorisation with those of a free n x d table.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Target distances (P1: its synthetic corpus).
    n_positions : int, optional, keyword-only
        Must equal n when given (a guard against passing the wrong matrix).
    d : int, keyword-only, default 128
        Width of the sinusoidal encoding and of the free table (P1: 128).
    rank : int, keyword-only, default 3
        P1: 3.
    smacof_max_iter : int, keyword-only

    Returns
    -------
    pandas.DataFrame
        Index: ``stress reduction (raw)``, ``stress reduction (scale-optimal)``,
        ``parameter saving``, ``parameters (rank r)``, ``parameters (free table)``,
        ``stress rank r (raw)``, ``stress sinusoidal (raw)``, ``stress rank r (scale-optimal)``,
        ``stress sinusoidal (scale-optimal)``; columns ``P1`` (NaN where P1 reports nothing),
        ``classical MDS``, ``SMACOF``. A stress reduction is ``1 - stress(rank r) / stress(sinusoidal)``;
        the parameter saving is ``1 - r (n + d) / (n d)``.

    Raises
    ------
    ValueError
        ``D`` not a distance matrix, ``n_positions`` different from n, or a bad rank.

    Examples
    --------
    >>> mu = synthetic_marginals(32, 64, nonstationarity=0.5)
    >>> t = lowrank_claim_table(hellinger_matrix(mu), n_positions=32, smacof_max_iter=50)
    >>> int(t.loc["parameters (rank r)", "SMACOF"]), int(t.loc["parameters (free table)", "SMACOF"])
    (480, 4096)
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    if n_positions is not None and n_positions != n:
        raise ValueError(f"D has n={n} positions but n_positions={n_positions}; pass the matching distance matrix")
    params_r = lowrank_parameter_count(n, d, rank)
    params_free = n * d
    sin = sinusoidal_encoding(n, d)
    curve = rank_r_stress_curve(Dm, [rank], smacof=True, smacof_max_iter=smacof_max_iter, progress=False)
    s_raw, s_opt = stress(sin, Dm), stress(sin, Dm, scale="optimal")
    cols = {}
    for label, prefix in (("classical MDS", "classical"), ("SMACOF", "SMACOF")):
        raw = float(curve.loc[rank, f"{prefix} raw"])
        opt = float(curve.loc[rank, f"{prefix} optimal"])
        cols[label] = {
            "stress reduction (raw)": 1.0 - raw / s_raw,
            "stress reduction (scale-optimal)": 1.0 - opt / s_opt,
            "parameter saving": 1.0 - params_r / params_free,
            "parameters (rank r)": float(params_r),
            "parameters (free table)": float(params_free),
            "stress rank r (raw)": raw,
            "stress sinusoidal (raw)": s_raw,
            "stress rank r (scale-optimal)": opt,
            "stress sinusoidal (scale-optimal)": s_opt,
        }
    paper = {key: np.nan for key in cols["SMACOF"]}
    paper["stress reduction (raw)"] = PAPER_P1_LOWRANK["stress_reduction"]
    paper["parameter saving"] = PAPER_P1_LOWRANK["parameter_saving"]
    if (n, d, rank) == (PAPER_P1_LOWRANK["n_positions"], PAPER_P1_LOWRANK["d_model"], PAPER_P1_LOWRANK["rank"]):
        paper["parameters (rank r)"] = float(lowrank_parameter_count(32, 128, 3))
        paper["parameters (free table)"] = float(32 * 128)
    return pd.DataFrame({"P1": paper, **cols})


# --------------------------------------------------------------------------- training sweep
@dataclass(frozen=True)
class LowRankSettings:
    """Settings of the low-rank training sweep (see :func:`lowrank_settings`).

    Attributes
    ----------
    n_positions, vocab_size, nonstationarity, concentration, corpus_seed
        The synthetic corpus (:func:`synthetic_marginals`, ring geometry); the defaults are
        those of ``load_corpus("synthetic")``.
    d_model, n_heads, n_layers, d_ff : int
        Transformer size.
    ranks : tuple of int
        Ranks of the ``lowrank`` tables.
    steps, batch_size : int
    lr : float
    mask_prob : float
    seeds : tuple of int
        Training seeds (model init and batches), five in both profiles. The encodings of
        ``seed_encodings`` are trained with every seed (for means with intervals over seeds,
        :func:`posgeo.seed_summary`); the others with ``seeds[0]`` only.
    seed_encodings : tuple of str or None
        Labels (:func:`lowrank_encodings`: ``"none"``, ``"sinusoidal"``, ``"rank r"``,
        ``"learned"``) of the encodings trained with every seed; ``None``: all of them. The
        small profile trains ``("rank 2", "learned")`` over the seeds (the contrast its text
        draws, within its time budget), the full profile every encoding.
    eval_batches, eval_batch_size : int
        Evaluation on fresh masked batches.

    Examples
    --------
    >>> LowRankSettings(ranks=(1,), seed_encodings=("rank 2",))
    Traceback (most recent call last):
    ...
    ValueError: seed_encodings names 'rank 2', which is not one of the sweep's encodings ['none', 'sinusoidal', 'rank 1', 'learned']
    """

    n_positions: int = 32
    vocab_size: int = 64
    nonstationarity: float = 0.5
    concentration: float = 4.0
    corpus_seed: int = 0
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 64
    ranks: tuple[int, ...] = (1, 2, 3, 8)
    steps: int = 400
    batch_size: int = 64
    lr: float = 5e-3
    mask_prob: float = 0.15
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    seed_encodings: tuple[str, ...] | None = ("rank 2", "learned")
    eval_batches: int = 8
    eval_batch_size: int = 256

    def __post_init__(self) -> None:
        for name in ("n_positions", "vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "steps", "batch_size",
                     "eval_batches", "eval_batch_size"):
            check_int(getattr(self, name), name)
        object.__setattr__(self, "ranks", tuple(int(r) for r in self.ranks))
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if not self.ranks or max(self.ranks) > min(self.n_positions, self.d_model) or min(self.ranks) < 1:
            raise ValueError(f"ranks must lie in [1, min(n_positions, d_model)] = [1, {min(self.n_positions, self.d_model)}], got {self.ranks}")
        if not self.seeds:
            raise ValueError("seeds must be a non-empty tuple of ints")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {self.seeds}")
        if self.seed_encodings is not None:
            if isinstance(self.seed_encodings, str):
                raise TypeError(f"seed_encodings must be a tuple of labels or None, got the string {self.seed_encodings!r}")
            object.__setattr__(self, "seed_encodings", tuple(str(e) for e in self.seed_encodings))
            labels = ["none", "sinusoidal", *(f"rank {r}" for r in self.ranks), "learned"]  # lowrank_encodings
            for e in self.seed_encodings:
                if e not in labels:
                    raise ValueError(f"seed_encodings names {e!r}, which is not one of the sweep's encodings {labels}")


_SETTINGS = {
    "small": LowRankSettings(),
    "full": LowRankSettings(
        d_model=128, n_heads=4, n_layers=2, d_ff=256, ranks=(1, 2, 3, 4, 8, 16, 32), steps=4000,
        batch_size=128, lr=2e-3, seeds=(0, 1, 2, 3, 4), seed_encodings=None, eval_batches=32,
    ),
}


def lowrank_settings(profile: str | None = None) -> LowRankSettings:
    """Settings of the low-rank training sweep for an experiment profile.

    ``small`` (2 CPU cores, about a minute and a half): d_model 32, one layer, 400 steps,
    ranks 1, 2, 3, 8; rank 2 and the free table over five seeds, the other encodings over
    seed 0 (15 runs). ``full`` (paper scale, a GPU or a patient CPU): d_model 128 (P1's d),
    2 layers, 4000 steps of 128 sequences, ranks 1, 2, 3, 4, 8, 16, 32, every encoding over
    five seeds (50 runs).

    Parameters
    ----------
    profile : str, optional
        ``"small"`` or ``"full"``; default :func:`current_profile`.

    Returns
    -------
    LowRankSettings

    Examples
    --------
    >>> lowrank_settings("small").ranks, lowrank_settings("full").d_model
    ((1, 2, 3, 8), 128)
    >>> lowrank_settings("small").seeds, lowrank_settings("small").seed_encodings
    ((0, 1, 2, 3, 4), ('rank 2', 'learned'))
    """
    return _SETTINGS[current_profile(profile)]


def synthetic_mlm_task(settings: LowRankSettings) -> tuple[MLMTask, np.ndarray]:
    """The masked-token task on the synthetic corpus of ``settings``, and its true marginals.

    Parameters
    ----------
    settings : LowRankSettings

    Returns
    -------
    task : MLMTask
    marginals : numpy.ndarray, shape (n_positions, vocab_size)

    Examples
    --------
    >>> task, mu = synthetic_mlm_task(lowrank_settings("small"))
    >>> task.vocab_size, mu.shape
    (65, (32, 64))
    """
    s = settings
    mu = synthetic_marginals(
        s.n_positions, s.vocab_size, nonstationarity=s.nonstationarity, concentration=s.concentration,
        seed=s.corpus_seed, geometry="ring",
    )
    name = (
        f"synthetic-ring-n{s.n_positions}-V{s.vocab_size}-ns{s.nonstationarity:g}-c{s.concentration:g}-seed{s.corpus_seed}"
    )
    task = MLMTask(MarginalSampler(mu), n_tokens=s.vocab_size, seq_len=s.n_positions, name=name, mask_prob=s.mask_prob)
    return task, mu


def mlm_marginal_metrics(
    model: Transformer,
    task: MLMTask,
    marginals: np.ndarray,
    *,
    n_batches: int = 8,
    batch_size: int = 256,
    seed: int = 12345,
) -> dict[str, float]:
    r"""Masked-token accuracy and excess loss, computed against the *true* marginals.

    The synthetic corpus draws every position independently from :math:`\mu_i`, so the
    Bayes-optimal prediction at a masked position i is :math:`\mu_i` itself. For each masked
    position of fresh batches (predicted distribution :math:`q`), this returns the expected
    accuracy :math:`\mu_i(\arg\max q)` (the average over the true distribution of the
    masked token, which has less variance than counting hits) and the excess loss
    :math:`\mathrm{KL}(\mu_i \,\|\, q)` in nats (0 for the Bayes-optimal model).

    Parameters
    ----------
    model : Transformer
    task : MLMTask
        Its sampler draws from ``marginals``.
    marginals : numpy.ndarray, shape (n, V)
    n_batches, batch_size, seed : int, keyword-only

    Returns
    -------
    dict
        ``accuracy``, ``excess_loss``.

    Examples
    --------
    >>> task, mu = synthetic_mlm_task(lowrank_settings("small"))
    >>> cfg = TransformerConfig(vocab_size=65, d_model=16, n_heads=2, n_layers=1, d_ff=16, max_len=32, position="none")
    >>> m = mlm_marginal_metrics(Transformer(cfg), task, mu, n_batches=1, batch_size=8)
    >>> sorted(m), bool(m["excess_loss"] > 0)
    (['accuracy', 'excess_loss'], True)
    """
    mu = np.asarray(marginals, dtype=np.float64)
    if mu.shape != (task.seq_len, task.n_tokens):
        raise ValueError(f"marginals must have shape (seq_len, n_tokens) = {(task.seq_len, task.n_tokens)}, got {mu.shape}")
    g = torch.Generator().manual_seed(int(seed))
    mu_t = torch.as_tensor(mu)
    log_mu = torch.log(mu_t.clamp_min(1e-300))
    acc, kl, count = 0.0, 0.0, 0
    with eval_mode(model):
        with torch.no_grad():
            for _ in range(int(n_batches)):
                batch = task.sample(int(batch_size), g)
                logits = model(batch.tokens).logits.to(torch.float64)  # (B, n, V + 1): the mask id too
                masked = batch.targets != IGNORE_INDEX
                pos = torch.nonzero(masked)[:, 1]
                logq = torch.log_softmax(logits, dim=-1)[masked][:, : task.n_tokens]
                pred = logq.argmax(-1)
                p = mu_t[pos]
                acc += float(p[torch.arange(pos.numel()), pred].sum())
                kl += float((p * (log_mu[pos] - logq)).sum())
                count += int(pos.numel())
    return {"accuracy": acc / count, "excess_loss": kl / count}


def _table_rank(P: np.ndarray, energy: float = 0.99) -> int:
    Pc = P - P.mean(axis=0)
    sv = np.linalg.svd(Pc, compute_uv=False)
    return effective_rank(sv**2, energy=energy).rank_at_energy


def _train_and_score(
    s: LowRankSettings, task: MLMTask, mu: np.ndarray, D: np.ndarray, kind: str, rank: int | None, seed: int, cache: bool
) -> dict[str, float]:
    cfg = TransformerConfig(
        vocab_size=task.vocab_size, d_model=s.d_model, n_heads=s.n_heads, n_layers=s.n_layers, d_ff=s.d_ff,
        max_len=s.n_positions, position=kind, rank=rank,
    )
    tc = TrainConfig(
        steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=seed, device="auto",
        log_every=max(1, s.steps // 10), snapshot_every=s.steps if kind in ("learned", "lowrank", "sinusoidal") else 0,
    )
    res = train(cfg, tc, task, progress=False, cache=cache)
    model = res.model()
    metrics = mlm_marginal_metrics(model, task, mu, n_batches=s.eval_batches, batch_size=s.eval_batch_size)
    row: dict[str, float] = {"parameters": float(positional_parameter_count(model)), **metrics}
    table = model.position_table()
    if table is not None:
        P = table[: s.n_positions]
        row["stress"] = stress(P, D, scale="optimal")
        row["raw stress"] = stress(P, D)
        row["stress at init"] = stress(res.snapshots[0][: s.n_positions], D, scale="optimal")
        row["table rank 99%"] = float(_table_rank(P))
    return row


def lowrank_encodings(settings: LowRankSettings) -> list[tuple[str, str, int | None]]:
    """The encodings of the sweep, in order: ``(label, position kind, rank)``.

    ``none``, ``sinusoidal``, ``rank r`` for every rank of ``settings.ranks`` (kind
    ``lowrank``), ``learned`` (rank ``None`` where the table is not factorised).

    Parameters
    ----------
    settings : LowRankSettings

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> [label for label, _, _ in lowrank_encodings(lowrank_settings("small"))]
    ['none', 'sinusoidal', 'rank 1', 'rank 2', 'rank 3', 'rank 8', 'learned']
    """
    specs: list[tuple[str, str, int | None]] = [("none", "none", None), ("sinusoidal", "sinusoidal", None)]
    specs += [(f"rank {r}", "lowrank", r) for r in settings.ranks]
    specs.append(("learned", "learned", None))
    return specs


def _references(mu: np.ndarray) -> dict[str, float]:
    blind = mu.mean(axis=0)
    return {
        "bayes_accuracy": float(mu.max(axis=1).mean()),
        "blind_accuracy": float(mu[:, int(np.argmax(blind))].mean()),
        "mutual_information": float(np.mean(np.sum(mu * (np.log(mu) - np.log(blind)), axis=1))),
    }


_RUN_COLUMNS = ["encoding", "position", "rank", "seed", "parameters", "accuracy", "excess_loss", "information", "stress",
                "stress at init", "raw stress", "table rank 99%"]


def lowrank_training_runs(
    settings: LowRankSettings,
    *,
    threads: int | None = 1,
    progress: bool = True,
    cache: bool = True,
) -> pd.DataFrame:
    r"""Train the posgeo transformer on the synthetic masked-token task: one row per encoding and seed.

    Encodings (:func:`lowrank_encodings`): ``none`` (no positional signal), ``sinusoidal``
    (fixed, no parameters), ``lowrank`` at every rank of ``settings.ranks``
    (:math:`P = A B^T`), and ``learned`` (a free ``n x d`` table). The encodings of
    ``settings.seed_encodings`` are trained with every seed of ``settings.seeds``, the
    others with ``settings.seeds[0]`` (all of them with every seed when ``seed_encodings``
    is None). Each run is trained with :func:`train` (cached; seed 0 of the small profile is
    the chapter's original one-seed run), then scored by :func:`mlm_marginal_metrics` and by
    the stress of its position table against the true Hellinger geometry of the corpus
    (before and after training).

    Parameters
    ----------
    settings : LowRankSettings
    threads : int or None, keyword-only, default 1
        Torch intra-op threads while training and evaluating (restored afterwards). The small
        profile's models are tiny: extra threads do not speed them up, and on a busy
        machine they slow them down many times over; one thread also makes the results
        independent of ``OMP_NUM_THREADS``. ``None`` keeps torch's setting (use it on a GPU
        or for the full profile on a many-core CPU).
    progress : bool, keyword-only
    cache : bool, keyword-only
        Passed to :func:`train`.

    Returns
    -------
    pandas.DataFrame
        One row per run (encodings in sweep order, then seeds): ``encoding`` (label),
        ``position``, ``rank`` (0 when not factorised), ``seed``, ``parameters`` (trainable
        positional parameters, counted on the model), ``accuracy``, ``excess_loss`` (see
        :func:`mlm_marginal_metrics`), ``information`` (``1 - excess_loss /
        mutual_information``: the share of the positional information the model uses; 0 for
        a position-blind model, 1 for the Bayes optimum), ``stress`` (scale-optimal, trained
        table), ``stress at init``, ``raw stress``, ``table rank 99%`` (spectral rank of the
        centred table); NaN for the model without a table. ``attrs`` holds the references
        ``bayes_accuracy`` (predicting :math:`\mu_i`), ``blind_accuracy`` (the best
        position-independent prediction) and ``mutual_information`` (the excess loss of the
        best position-blind model, in nats).

    Raises
    ------
    TypeError
        ``settings`` not a :class:`LowRankSettings`.

    Examples
    --------
    >>> import dataclasses
    >>> s = dataclasses.replace(lowrank_settings("small"), d_model=16, n_layers=1, d_ff=16, steps=2,
    ...                         ranks=(2,), seeds=(0, 1), seed_encodings=("learned",), eval_batches=1,
    ...                         eval_batch_size=8)
    >>> runs = lowrank_training_runs(s, progress=False, cache=False)
    >>> runs[["encoding", "seed"]].values.tolist()
    [['none', 0], ['sinusoidal', 0], ['rank 2', 0], ['learned', 0], ['learned', 1]]
    """
    if not isinstance(settings, LowRankSettings):
        raise TypeError(f"settings must be LowRankSettings (see lowrank_settings()), got {type(settings).__name__}")
    s = settings
    task, mu = synthetic_mlm_task(s)
    D = hellinger_matrix(mu)
    if threads is not None:
        check_int(threads, "threads")
    seeded = None if s.seed_encodings is None else set(s.seed_encodings)
    jobs = [((label, kind, rank), seed) for label, kind, rank in lowrank_encodings(s)
            for seed in (s.seeds if seeded is None or label in seeded else s.seeds[:1])]
    rows = []
    with _torch_threads(threads):
        for (label, kind, rank), seed in progress_bar(jobs, enabled=progress, desc="low-rank sweep"):
            row = _train_and_score(s, task, mu, D, kind, rank, seed, cache)
            rows.append({"encoding": label, "position": kind, "rank": int(rank or 0), "seed": int(seed), **row})
    refs = _references(mu)
    out = pd.DataFrame(rows)
    out["parameters"] = out["parameters"].astype(int)
    out["information"] = 1.0 - out["excess_loss"] / refs["mutual_information"]
    out = out.reindex(columns=_RUN_COLUMNS)
    out.attrs.update(refs)
    return out


def lowrank_training_sweep(
    settings: LowRankSettings,
    *,
    threads: int | None = 1,
    progress: bool = True,
    cache: bool = True,
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    r"""The training sweep of :func:`lowrank_training_runs`, one row per encoding (mean over its seeds).

    Parameters
    ----------
    settings : LowRankSettings
    threads, progress, cache : keyword-only
        As for :func:`lowrank_training_runs`.
    runs : pandas.DataFrame, optional, keyword-only
        The result of :func:`lowrank_training_runs` for ``settings``, if already computed
        (nothing is trained then).

    Returns
    -------
    pandas.DataFrame
        One row per encoding (mean over the seeds it was trained with): ``position``,
        ``rank``, ``parameters``, ``accuracy``, ``excess_loss``, ``information``, ``stress``,
        ``stress at init``, ``raw stress``, ``table rank 99%`` (as in
        :func:`lowrank_training_runs`) and ``seeds`` (how many). Index: the encoding's label.
        ``attrs``: the reference accuracies and mutual information, as there.

    Examples
    --------
    >>> import dataclasses
    >>> s = dataclasses.replace(lowrank_settings("small"), d_model=16, n_layers=1, d_ff=16, steps=2,
    ...                         ranks=(2,), seeds=(0,), seed_encodings=None, eval_batches=1, eval_batch_size=8)
    >>> table = lowrank_training_sweep(s, progress=False, cache=False)
    >>> table["parameters"].to_dict()
    {'none': 0, 'sinusoidal': 0, 'rank 2': 96, 'learned': 512}
    """
    if runs is None:
        runs = lowrank_training_runs(settings, threads=threads, progress=progress, cache=cache)
    elif not isinstance(runs, pd.DataFrame) or "encoding" not in runs.columns:
        raise TypeError("runs must be the DataFrame of lowrank_training_runs(settings)")
    metrics = [c for c in _RUN_COLUMNS[4:] if c in runs.columns]
    grouped = runs.groupby("encoding", sort=False)
    out = grouped[metrics].mean()
    out.insert(0, "rank", grouped["rank"].first())
    out.insert(0, "position", grouped["position"].first())
    out["seeds"] = grouped["seed"].count()
    out["parameters"] = out["parameters"].round().astype(int)
    out.index.name = None
    out.attrs.update(runs.attrs)
    return out


_PANEL_HEIGHT = 220  # px, as the book's other panels
_PANEL_TITLES = {"classical optimal": "classical MDS", "SMACOF optimal": "SMACOF", "classical raw": "classical MDS (raw)",
                 "SMACOF raw": "SMACOF (raw)"}


def plot_rank_stress_curves(
    curves: Mapping[str, pd.DataFrame],
    *,
    columns: Sequence[str] = ("classical optimal", "SMACOF optimal"),
    intervals: Mapping[str, pd.DataFrame] | None = None,
) -> Any:
    """Stress of rank-r encodings against r, one panel per method, with the energy left out.

    One panel per stress column (one line per geometry, coloured by corpus, dashed for the
    noise-corrected geometries), and a last panel with the spectral energy the rank-r
    encoding leaves out, ``1 - energy``. Both axes are logarithmic; values below 1e-8 (below
    SMACOF's convergence tolerance, not the geometry) are left out.

    Parameters
    ----------
    curves : mapping of str to pandas.DataFrame
        Label (e.g. ``"sst2 corrected"``) -> :func:`rank_r_stress_curve` result.
    columns : sequence of str, keyword-only
        Stress columns to draw, one panel each.
    intervals : mapping of str to pandas.DataFrame, optional, keyword-only
        Label -> a table indexed by rank with ``"<column> low"`` and ``"<column> high"``
        columns, drawn as a band around that geometry's curve. By default the curve's own
        such columns (``rank_r_stress_curve(..., intervals=boot)``), where it has them.

    Returns
    -------
    altair chart
    """
    if not curves:
        raise ValueError("plot_rank_stress_curves: no curves given")
    intervals = dict(intervals or {})
    labels = list(curves)
    ranks = sorted({int(r) for curve in curves.values() for r in curve.index})
    r_min, r_max = ranks[0], ranks[-1]
    r_ticks = [r for r in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512) if r_min <= r <= r_max]
    panels = []
    for col in [*columns, "energy"]:
        parts = []
        for label, curve in curves.items():
            if col != "energy" and col not in curve.columns:
                continue
            r = np.asarray(curve.index, dtype=int)
            y = (1.0 - curve["energy"].to_numpy(dtype=float)) if col == "energy" else curve[col].to_numpy(dtype=float)
            part = pd.DataFrame({"rank": r, "value": y, "geometry": label, "low": np.nan, "high": np.nan})
            band = intervals.get(label, curve)
            if col != "energy" and f"{col} low" in band.columns:
                # on the log axis a lower end of 0 is drawn at the chart's floor, 1e-8
                part["low"] = np.clip(band[f"{col} low"].reindex(r).to_numpy(dtype=float), 1e-8, None)
                part["high"] = band[f"{col} high"].reindex(r).to_numpy(dtype=float)
            parts.append(part[part["value"] > 1e-8])
        if not parts:
            continue
        frame = pd.concat(parts, ignore_index=True)
        has_band = bool(frame["low"].notna().any())
        energy = col == "energy"
        panels.append(pg.series_chart(
            frame, x="rank", y="value", series="geometry", lower="low" if has_band else None,
            upper="high" if has_band else None, points=True, x_title="rank r",
            y_title="1 - energy (share of spectral mass left out)" if energy else f"{col.split()[-1].replace('optimal', 'scale-optimal')} stress",
            series_title="geometry", title="spectral energy left out" if energy else _PANEL_TITLES.get(col, col),
            x_scale={"type": "log", "domain": [r_min, r_max], "nice": False}, y_scale={"type": "log"},
            width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT))
        for layer in panels[-1].layer:
            layer.encoding.x.axis = alt.Axis(values=r_ticks, format="~g")
            if layer.mark.type == "area":  # the legend shows the lines, not the faint bands
                layer.encoding.color.legend = None
            layer.encoding.y.axis = alt.Axis(format="~e" if frame["value"].min() < 1e-3 else "~g")
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description=("Stress of the rank-r encoding against the rank r, one panel per method (log-log), and the "
                     f"share of spectral energy it leaves out, for {', '.join(labels)}; "
                     "corrected geometries are dashed in their corpus colour."),
    )


def _symlog_ticks(values: Sequence[float]) -> tuple[float, list[float]]:
    """The linear threshold and the ticks of a symmetric-log axis for non-negative ``values``:
    0, then 1, 2 and 5 times the powers of ten from the threshold to the largest value."""
    x = np.asarray([float(v) for v in values if np.isfinite(v)], dtype=float)
    positive = x[x > 0]
    if positive.size == 0:
        return 1.0, [0.0, 1.0]
    constant = float(positive.min()) / 2
    top = float(positive.max())
    ticks = [0.0] + [m * 10.0**k for k in range(int(np.floor(np.log10(constant))), int(np.ceil(np.log10(top))) + 1)
                     for m in (1, 2, 5) if constant <= m * 10.0**k <= top * 1.15]
    return constant, ticks


def plot_accuracy_vs_parameters(table: pd.DataFrame) -> Any:
    """Accuracy, information used and table stress of trained encodings against their parameter count.

    Three panels sharing a symmetric-log x axis (0 for the tables without parameters): the
    low-rank tables as one line through their ranks, the other encodings as points, and the
    Bayes and position-blind optima (accuracy) and the full and no information (information
    used) as dotted reference lines.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`lowrank_training_sweep` (uses ``position``, ``parameters``, ``accuracy``,
        ``information``, ``stress`` and the ``attrs`` reference accuracies).

    Returns
    -------
    altair chart
    """
    kinds = table["position"].astype(str) if "position" in table.columns else pd.Series(table.index, index=table.index)
    base = pd.DataFrame({
        "encoding": np.where(kinds == "lowrank", "low-rank (rank r)", kinds),
        "table": [str(i) for i in table.index],
        "parameters": table["parameters"].to_numpy(dtype=float),
    })
    x_max = float(base["parameters"].max())
    constant, ticks = _symlog_ticks(base["parameters"])
    x_scale = {"type": "symlog", "constant": constant, "domain": [0, max(x_max * 1.15, 1.0)], "nice": False}
    panels = []
    specs = [("accuracy", "masked-token accuracy (expected)", "accuracy"),
             ("information", "information used (share)", "information used"),
             ("stress", "scale-optimal stress of the table", "table stress vs the true geometry")]
    refs = {"accuracy": [("Bayes optimum (reference)", table.attrs.get("bayes_accuracy")),
                         ("position-blind optimum (chance)", table.attrs.get("blind_accuracy"))],
            "information": [("all information (reference)", 1.0), ("no information (chance)", 0.0)]}
    for col, y_title, title in specs:
        if col not in table.columns:
            continue
        frame = base.assign(value=table[col].to_numpy(dtype=float))
        frame = frame[np.isfinite(frame["value"])]
        for name, level in refs.get(col, []):
            if level is not None:
                frame = pd.concat([frame, pd.DataFrame({"encoding": name, "table": name, "parameters": [0.0, x_max * 1.15],
                                                        "value": float(level)})], ignore_index=True)
        chart = pg.series_chart(frame, x="parameters", y="value", series="encoding", points=True, zoom=False,
                                x_title="positional parameters", y_title=y_title, series_title="encoding", title=title,
                                x_scale=x_scale, tooltip=["table"], width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)
        for layer in chart.layer:  # the ticks of a symmetric-log axis: 0 and the powers of ten
            layer.encoding.x.axis = alt.Axis(values=ticks, format="d")
            if layer.mark.type == "line":  # two legend columns: the panel's legend fits below it
                layer.encoding.color.legend = alt.Legend(symbolType="stroke", columns=2)
        panels.append(chart)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="independent", strokeDash="independent"),
        description=("Masked-token accuracy, share of the positional information used, and scale-optimal stress of the "
                     "trained position table against its number of positional parameters (symmetric-log axis), for no, "
                     "sinusoidal, low-rank and free tables, with the Bayes and position-blind optima as references."),
    )
