"""Charts for the book: each function returns a matplotlib Figure (displayed once in a notebook).

Figures are built with :class:`matplotlib.figure.Figure` directly, not through pyplot, so a
notebook shows a returned figure exactly once and no global pyplot state is touched.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
import os
from typing import Any, Mapping, Sequence

__all__ = [
    'new_figure',
    'symlog_axis',
    'notebook_setup',
    'plot_distance_heatmaps',
    'plot_offset_profiles',
    'plot_noise_floor',
    'plot_spectra',
    'plot_stress_bars',
]


# --------------------------------------------------------------------------- plots
def symlog_axis(ax: object, values: Sequence[float]) -> None:
    """Symmetric-log x axis for non-negative values that include 0: ticks at 0 and powers of ten."""
    from matplotlib.ticker import NullLocator

    x = np.asarray(values, dtype=float)
    positive = x[x > 0]
    if positive.size == 0:
        return
    lo, hi = float(positive.min()), float(positive.max())
    ax.set_xscale("symlog", linthresh=lo, linscale=0.6)  # type: ignore[attr-defined]
    ax.set_xlim(-0.15 * lo, hi * 1.5)  # type: ignore[attr-defined]
    ticks = [0.0] + [10.0**k for k in range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)]
    if len(ticks) == 1 or ticks[1] > lo * 1.5:
        ticks.insert(1, lo)
    ax.set_xticks(ticks)  # type: ignore[attr-defined]
    ax.xaxis.set_minor_locator(NullLocator())  # type: ignore[attr-defined]

_QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
}


def notebook_setup(*, quiet: bool = True, precision: int = 4) -> pd.DataFrame:
    """Prepare a chapter: quiet progress output, compact tables, PNG charts.

    Called explicitly in each chapter's first cell (importing posgeo changes nothing). Sets
    the environment variables that silence progress bars (so notebook outputs are
    reproducible), pandas' display precision, and the inline figure format.

    Parameters
    ----------
    quiet : bool, keyword-only
        Silence tqdm / Hugging Face progress bars (``setdefault``: an explicit user setting wins).
    precision : int, keyword-only
        Digits pandas shows for floats.

    Returns
    -------
    pandas.DataFrame
        The versions of the main libraries, for the record.
    """
    if quiet:
        for key, value in _QUIET_ENV.items():
            os.environ.setdefault(key, value)
    pd.set_option("display.precision", precision)
    pd.set_option("display.max_columns", 20)
    pd.set_option("display.width", 120)
    try:  # pragma: no cover - only inside IPython
        from IPython import get_ipython

        if get_ipython() is not None:
            # Figures are built without pyplot: register the PNG formatter so that a Figure
            # returned by a cell is displayed as an image.
            from matplotlib_inline.backend_inline import set_matplotlib_formats

            set_matplotlib_formats("png")
    except ImportError:  # pragma: no cover - plain Python: nothing to display
        pass
    import matplotlib
    import torch

    from . import __version__

    return pd.DataFrame(
        {"package": ["posgeo", "numpy", "pandas", "matplotlib", "torch"],
         "version": [__version__, np.__version__, pd.__version__, matplotlib.__version__, torch.__version__.split("+")[0]]}
    ).set_index("package")


def new_figure(
    ncols: int = 1, nrows: int = 1, *, width: float = 4.2, height: float = 3.4, grid: bool = False
) -> tuple[Figure, np.ndarray]:
    """The book's one figure helper: a constrained-layout figure of ``nrows x ncols`` panels.

    Built on :class:`matplotlib.figure.Figure` directly (no pyplot state), at 96 dpi.

    Parameters
    ----------
    ncols, nrows : int, default 1
    width, height : float, keyword-only, default 4.2 and 3.4
        Size of one panel in inches.
    grid : bool, keyword-only, default False
        Return the axes as an ``(nrows, ncols)`` array instead of a flat one.

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : numpy.ndarray of Axes, shape (nrows * ncols,) or (nrows, ncols)

    Examples
    --------
    >>> fig, axes = new_figure(3, 2, grid=True)
    >>> axes.shape, fig.get_size_inches().round(1).tolist()
    ((2, 3), [12.6, 6.8])
    """
    fig = Figure(figsize=(width * ncols, height * nrows), dpi=96, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False))
    return fig, (axes if grid else axes.ravel())


def plot_distance_heatmaps(
    matrices: Mapping[str, np.ndarray], *, vmax: float | None = 1.0, cmap: str = "viridis", label: str = "Hellinger distance"
) -> Figure:
    """Heatmaps of distance matrices side by side.

    Parameters
    ----------
    matrices : mapping of str to (n, n) arrays
        Title -> matrix.
    vmax : float or None
        Upper end of the colour scale (shared); None lets each panel scale itself.
    cmap : str
    label : str
        Colour-bar label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(len(matrices), width=3.6, height=3.3)
    im = None
    for ax, (title, M) in zip(axes, matrices.items()):
        im = ax.imshow(np.asarray(M), cmap=cmap, vmin=0.0, vmax=vmax, interpolation="antialiased")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("position j")
        ax.set_ylabel("position i")
    if im is not None:
        fig.colorbar(im, ax=list(axes), shrink=0.8, label=label)
    return fig


def plot_offset_profiles(geometries: Sequence[Any], *, max_offset: int | None = 64, debiased: bool = True) -> Figure:
    """Distance versus offset ``|i - j|``, one panel per corpus, with the noise floor.

    Each panel shows the mean plug-in distance at every offset (band: min to max over pairs),
    the noise-corrected mean (``g.matched``), and the noise floor: the mean over pairs of
    ``sqrt((s_i^2 + s_j^2) / 2)``, with ``s_i`` the split-half distance of position i: the
    distance between two half-samples of one and the same distribution.

    Parameters
    ----------
    geometries : sequence of CorpusGeometry
    max_offset : int or None
    debiased : bool
        Also draw the bias-corrected curve.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ._geometry import distance_by_offset

    fig, axes = new_figure(len(geometries), width=3.8, height=3.0)
    for ax, g in zip(axes, geometries):
        prof = distance_by_offset(g.distances, max_offset=max_offset)
        ax.fill_between(prof["offset"], prof["min"], prof["max"], alpha=0.2, color="C0", lw=0)
        ax.plot(prof["offset"], prof["mean"], color="C0", label="plug-in")
        if debiased:
            dprof = distance_by_offset(g.matched, max_offset=max_offset)
            ax.plot(dprof["offset"], dprof["mean"], color="C2", label="noise-corrected")
        s2 = g.split_half**2
        floor = np.sqrt(0.5 * (s2[:, None] + s2[None, :]))
        np.fill_diagonal(floor, 0.0)
        fprof = distance_by_offset(floor, max_offset=max_offset)
        ax.plot(fprof["offset"], fprof["mean"], color="C3", ls="--", label="noise floor")
        ax.set_title(f"{g.name} (n={g.n_positions})", fontsize=10)
        ax.set_xlabel("offset |i - j|")
        ax.set_ylim(0, None)
    axes[0].set_ylabel(f"{geometries[0].metric} distance")
    axes[0].legend(fontsize=8, loc="lower right")
    return fig


def plot_noise_floor(geometries: Sequence[Any]) -> Figure:
    """Per-position noise floor (split-half distance) and the number of sequences reaching it.

    Parameters
    ----------
    geometries : sequence of CorpusGeometry

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(len(geometries), width=3.8, height=3.0)
    for ax, g in zip(axes, geometries):
        pos = np.arange(g.n_positions)
        ax.plot(pos, g.split_half, color="C3", label="split-half distance")
        if g.flagged.any():
            ax.scatter(pos[g.flagged], g.split_half[g.flagged], color="k", s=8, zorder=3, label="too few sequences")
        ax.set_ylim(0, 1)
        ax.set_xlabel("position")
        ax.set_title(g.name, fontsize=10)
        ax2 = ax.twinx()
        ax2.plot(pos, g.counts, color="C7", lw=1)
        ax2.set_yscale("log")
        ax2.set_ylabel("sequences reaching it", color="C7", fontsize=8)
    axes[0].set_ylabel("chord Hellinger")
    axes[0].legend(fontsize=8, loc="upper left")
    return fig


def plot_spectra(spectra: Mapping[str, np.ndarray], *, top: int = 40) -> Figure:
    """Eigen-spectra of double-centred Gram matrices: normalised eigenvalues and cumulative energy.

    Parameters
    ----------
    spectra : mapping of str to (n,) arrays
        Eigenvalues, descending (negatives allowed).
    top : int
        How many leading eigenvalues to draw.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax1, ax2) = new_figure(2, width=4.2, height=3.2)
    for i, (name, lam) in enumerate(spectra.items()):
        lam = np.asarray(lam, dtype=float)
        scale = np.abs(lam).sum()
        k = np.arange(1, min(top, lam.size) + 1)
        ax1.semilogy(k, np.abs(lam[: k.size]) / scale, marker="o", ms=3, color=f"C{i}", label=name)
        pos = np.clip(lam, 0, None)
        ax2.plot(np.arange(1, lam.size + 1), np.cumsum(pos) / pos.sum(), color=f"C{i}", label=name)
    ax1.set_xlabel("eigenvalue index")
    ax1.set_ylabel("|eigenvalue| / sum |eigenvalues|")
    ax1.legend(fontsize=8)
    ax2.set_xscale("log")
    ax2.set_xlabel("rank r")
    ax2.set_ylabel("energy in top r")
    ax2.axhline(0.99, color="k", lw=0.5, ls=":")
    return fig


def plot_stress_bars(table: pd.DataFrame, *, column: str = "optimal", log: bool = False) -> Figure:
    """Grouped bars of stress: encodings (rows) by corpus (columns of a pivoted table).

    Parameters
    ----------
    table : pandas.DataFrame
        Index: encoding; columns: corpora; values: stress.
    column : str
        Label for the y axis.
    log : bool
        Logarithmic y axis (raw stress spans orders of magnitude).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax,) = new_figure(1, width=7.5, height=3.2)
    n_enc, n_corp = table.shape
    width = 0.8 / n_corp
    x = np.arange(n_enc)
    for j, corpus in enumerate(table.columns):
        ax.bar(x + j * width - 0.4 + width / 2, table[corpus].to_numpy(dtype=float), width, label=str(corpus), color=f"C{j}")
    ax.set_xticks(x, [str(i) for i in table.index], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"{column} stress")
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    return fig
