"""Helpers of the chapter "Why sinusoids? Circulant matrices and Fourier modes" (06_sinusoids_circulant)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

import posgeo as pg

MEASURES = ("circulant distance (B)", "Toeplitz distance (B)", "Toeplitz distance (D)", "DFT alignment", "sinusoid alignment")


# ----------------------------------------------------------------------------- circulant and Toeplitz
def _diagonal_means(B, kind):
    B = np.asarray(B, dtype=np.float64)
    i = np.arange(B.shape[0])
    idx = (i[None, :] - i[:, None]) % len(i) if kind == "circulant" else i[None, :] - i[:, None] + len(i) - 1
    return np.bincount(idx.ravel(), weights=B.ravel()) / np.bincount(idx.ravel()), idx


def nearest(B, kind="circulant"):
    """The circulant (or Toeplitz) matrix nearest to B: each wrapped (or plain) diagonal replaced by its mean."""
    means, idx = _diagonal_means(B, kind)
    return means[idx]


def circulant_distance(B, kind="circulant"):
    """||B - nearest(B)||_F / ||B||_F (0 for an all-zero B)."""
    B = np.asarray(B, dtype=np.float64)
    norm = float(np.linalg.norm(B))
    return 0.0 if norm == 0.0 else float(np.linalg.norm(B - nearest(B, kind)) / norm)


def toeplitz_profile(M):
    """Mean of M along each superdiagonal k = 0..n-1: the kernel of a Toeplitz matrix."""
    means, _ = _diagonal_means(M, "toeplitz")
    return means[len(M) - 1:]


def toeplitz_floor_report(D, d=384, n_heads=12):
    """The Toeplitz floor of D beside the scale-optimal stress of sinusoidal, per-head RoPE and ALiBi encodings."""
    D = pg.check_distance_matrix(D)
    n = D.shape[0]
    encodings = {f"sinusoidal d={d}": pg.sinusoidal_encoding(n, d),
                 f"RoPE d={d} (head {d // n_heads})": pg.rope_encoding(n, d, head_dim=d // n_heads),
                 f"ALiBi {n_heads} heads": pg.alibi_encoding(n, n_heads)}
    values = {"Toeplitz floor": circulant_distance(D, kind="toeplitz") ** 2}
    with pg.small_blas(n):
        values.update({name: pg.stress(P, D, scale="optimal") for name, P in encodings.items()})
    return pd.Series(values, dtype=np.float64)


# ----------------------------------------------------------------------------- Fourier alignment
def frequency_energy(V):
    """Share of each column's squared norm in each DFT frequency pair f = 0..n//2 (rows)."""
    V = np.asarray(V, dtype=np.float64)
    V = (V[:, None] if V.ndim == 1 else V) / np.linalg.norm(V, axis=0)
    n = V.shape[0]
    P = np.abs(np.fft.fft(V, axis=0)) ** 2 / n
    E = P[: n // 2 + 1].copy()
    f = np.arange(1, n // 2 + 1)
    paired = n - f != f
    E[f[paired]] += P[n - f[paired]]
    return E


def _dft_fits(V, freqs):
    F = np.fft.fft(V, axis=0)
    keep, cols = np.zeros_like(F), np.arange(V.shape[1])
    for rows in (freqs, (V.shape[0] - freqs) % V.shape[0]):
        keep[rows, cols] = F[rows, cols]
    return np.real(np.fft.ifft(keep, axis=0))


def _sinusoid_energy(V, omega):
    """Energy share of unit columns V in span{cos(w c), sin(w c)}, c centred, for each w."""
    c = np.arange(V.shape[0]) - (V.shape[0] - 1) / 2.0
    C, S = np.cos(np.outer(omega, c)), np.sin(np.outer(omega, c))
    cc, ss = np.einsum("ij,ij->i", C, C), np.einsum("ij,ij->i", S, S)
    tiny = 1e-12 * V.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.where(cc[:, None] > tiny, (C @ V) ** 2 / cc[:, None], 0.0)
                + np.where(ss[:, None] > tiny, (S @ V) ** 2 / ss[:, None], 0.0))


def _sinusoid_fits(V):
    """Best sinusoid of any frequency in (0, pi] and phase: a grid of 8n frequencies, then a bounded search."""
    n, k = V.shape
    grid = 8 * n
    omega = np.pi * np.arange(1, grid + 1) / grid
    E = _sinusoid_energy(V, omega)
    energy, best = np.empty(k), np.empty(k)
    for j in range(k):
        g = int(np.argmax(E[:, j]))
        w, e = omega[g], E[g, j]
        lo, hi = omega[max(g - 1, 0)], omega[min(g + 1, grid - 1)]
        if hi > lo:
            res = minimize_scalar(lambda x: -float(_sinusoid_energy(V[:, j:j + 1], np.array([x]))[0, 0]),
                                  bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * np.pi})
            if -res.fun > e:
                w, e = float(res.x), float(-res.fun)
        energy[j], best[j] = min(e, 1.0), w
    c = np.arange(n) - (n - 1) / 2.0
    fits = np.empty_like(V)
    for j in range(k):
        basis = np.stack([np.cos(best[j] * c), np.sin(best[j] * c)], axis=1)
        fits[:, j] = basis @ np.linalg.lstsq(basis, V[:, j], rcond=None)[0]
    return energy, best * n / (2.0 * np.pi), fits


@dataclass(frozen=True)
class FourierAlignment:
    """Top-k eigenpairs of B, each eigenvector's best frequency, its energy there and its fit."""

    basis: str
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    energy: np.ndarray
    frequency: np.ndarray
    fits: np.ndarray
    trace: float

    @property
    def variance_share(self):
        """Eigenvalues over the trace of B."""
        return self.eigenvalues / self.trace

    @property
    def mean_energy(self):
        """Mean energy over the k eigenvectors."""
        return float(np.mean(self.energy))


def canonical_ties(lam, V, rtol=1e-8):
    """Replace the basis of each group of tied eigenvalues by the orthonormalised projections of e_0, e_1, ..."""
    V = np.array(V, dtype=np.float64, copy=True)
    scale = max(float(np.abs(lam).max(initial=0.0)), np.finfo(float).tiny)
    start = 0
    while start < lam.size:
        stop = start + 1
        while stop < lam.size and abs(lam[stop] - lam[start]) <= rtol * scale:
            stop += 1
        if stop - start > 1:
            P = V[:, start:stop] @ V[:, start:stop].T
            basis = []
            for j in range(V.shape[0]):
                v = P[:, j].copy()
                for b in basis:
                    v -= (b @ v) * b
                if np.linalg.norm(v) > 1e-6:
                    basis.append(v / np.linalg.norm(v))
                if len(basis) == stop - start:
                    break
            V[:, start:stop] = np.column_stack(basis)
        start = stop
    return V


def _top_eigenpairs(A, k):
    A = 0.5 * (A + A.T)
    lam, V = pg.top_eigenpairs(A, min(k + 1, A.shape[0]))
    return lam[:k], canonical_ties(lam, V)[:, :k]


def _alignment(lam, V, basis, trace):
    k = V.shape[1]
    if basis == "dft":
        E = frequency_energy(V)
        freqs = np.argmax(E, axis=0)
        energy, frequency, fits = E[freqs, np.arange(k)], freqs.astype(np.float64), _dft_fits(V, freqs)
    else:
        energy, frequency, fits = _sinusoid_fits(V)
    return FourierAlignment(basis, lam, V, np.clip(energy, 0.0, 1.0), frequency, fits, trace)


def fourier_alignment(B, k=4, basis="dft"):
    """Energy of B's top-k eigenvectors in their best DFT frequency pair (or best sinusoid of any frequency)."""
    A = np.asarray(B, dtype=np.float64)
    A = 0.5 * (A + A.T)
    with pg.small_blas(A.shape[0]):
        lam, V = _top_eigenpairs(A, k)
        return _alignment(lam, V, basis, float(np.trace(A)))


def stationarity_measures(D, k=4):
    """The MEASURES of one distance matrix D, with B its double-centred Gram matrix."""
    D = pg.check_distance_matrix(D)
    B = pg.double_centered_gram(D)
    with pg.small_blas(B.shape[0]):
        lam, V = _top_eigenpairs(B, k)
        dft, sin = (_alignment(lam, V, basis, float(np.trace(B))) for basis in ("dft", "sinusoid"))
    values = [circulant_distance(B), circulant_distance(B, "toeplitz"), circulant_distance(D, "toeplitz"),
              dft.mean_energy, sin.mean_energy]
    return pd.Series(values, index=list(MEASURES), dtype=np.float64)


def stationarity_sweep(knobs, geometry="ring", marginals="true", n=32, vocab_size=64, n_sequences=20000, seed=0):
    """stationarity_measures of the synthetic corpus at each knob, on its true or its sampled marginals."""
    rows = []
    for knob in knobs:
        mu = pg.synthetic_marginals(n, vocab_size, nonstationarity=float(knob), geometry=geometry, seed=seed)
        if marginals == "sampled":
            mu = pg.positional_marginals(pg.sample_synthetic_sequences(mu, n_sequences, seed=seed), n, vocab_size)
        rows.append(stationarity_measures(pg.hellinger_matrix(mu)))
    return pd.DataFrame(rows, index=pd.Index(np.asarray(knobs, dtype=np.float64), name="knob"))


def equivalent_knob(sweep, column, value):
    """The knob at which the sweep's column reaches value (linear interpolation; inf beyond the last knob)."""
    x, y = np.asarray(sweep.index, dtype=np.float64), sweep[column].to_numpy(dtype=np.float64)
    sign = 1.0 if y[-1] > y[0] else -1.0
    if sign * (value - y[0]) <= 0:
        return float(x[0])
    for j in range(1, x.size):
        if sign * (value - y[j]) <= 0:
            return float(x[j - 1] + (value - y[j - 1]) / (y[j] - y[j - 1]) * (x[j] - x[j - 1]))
    return math.inf


# ----------------------------------------------------------------------------- charts
_PANEL_HEIGHT = 220
_DASHES = ([1, 0], [7, 3], [2, 2], [10, 3, 2, 3], [4, 4])
_SWEEP_DASHES = ([1, 0], [4, 2], [10, 3, 2, 3])


def _key(*parts):
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:6]


def _symlog_ticks(values):
    """Ticks 0, the smallest positive value and the powers of ten between; the symlog constant."""
    x = np.asarray(values, dtype=np.float64)
    lo, hi = float(x[x > 0].min()), float(x[x > 0].max())
    ticks = [10.0**k for k in range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)]
    if not ticks or ticks[0] > lo * 1.5:
        ticks.insert(0, lo)
    return ([0.0] if x.min() <= 0 else []) + ticks, lo


def plot_stationarity_sweep(sweeps, columns, corpora, knob):
    """One panel per measure against the knob (symlog), the corpora as horizontal lines, a menu marking one knob."""
    cols = list(columns)
    lines = pd.concat([sw[cols].rename_axis("knob").reset_index().melt("knob", var_name="measure", value_name="value")
                       .assign(series=str(label)) for label, sw in sweeps.items()], ignore_index=True)
    sweep_names, corpus_names = [str(label) for label in sweeps], [str(name) for name in corpora.index]
    names = sweep_names + corpus_names
    refs = corpora[cols].rename_axis("series").reset_index().melt("series", var_name="measure", value_name="value")
    refs["series"] = refs["series"].astype(str)
    shades = ["#0072B2", "#56B4E9", "#332288", "#44AA99"]  # the synthetic corpus' blue and shades of it
    scale = alt.Scale(domain=names, range=shades[: len(sweep_names)] + list(pg.colour_scale(corpus_names).range))
    dashes = [_SWEEP_DASHES[j] for j in range(len(sweep_names))]
    dashes += [_DASHES[1] if "corrected" in name.lower() else _DASHES[2] for name in corpus_names]
    key = _key("sweep", tuple(names), tuple(cols), len(lines))
    pick = alt.selection_point(fields=["series"], bind="legend", name=f"pick_sweep_{key}")
    title = "synthetic sweep (dots) or corpus (horizontal line)"
    colour = alt.Color("series:N", scale=scale, sort=names, title=title,
                       legend=alt.Legend(symbolType="stroke", columns=3, symbolStrokeWidth=2.5, titleLimit=500))
    dash = alt.StrokeDash("series:N", sort=names, title=title, scale=alt.Scale(domain=names, range=dashes))
    knobs = sorted(float(v) for v in set(lines["knob"]))
    marked = alt.param(name=f"knob_{key}", value=float(knob), bind=alt.binding_select(options=knobs, name="mark the knob γ = "))
    ticks, constant = _symlog_ticks(knobs)
    x = alt.X("knob:Q", title="non-stationarity knob γ (symlog scale)",
              scale=alt.Scale(type="symlog", constant=constant, domain=[min(knobs), max(knobs)], nice=False),
              axis=alt.Axis(values=ticks, format="~r", labelFlush=True))
    y = alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.1))
    tips = [alt.Tooltip("series:N", title="sweep or corpus"), alt.Tooltip("measure:N"), alt.Tooltip("knob:Q", title="knob γ"),
            alt.Tooltip("value:Q", format=".4~g")]
    at_knob = f"datum.knob == {marked.name}"
    panels = []
    for k, col in enumerate(cols):
        base = alt.Chart(lines).transform_filter(alt.datum.measure == col).properties(width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)
        layers = [
            base.mark_line(strokeWidth=2).encode(x=x, y=alt.Y("value:Q", title=col, scale=alt.Scale(domain=[0, 1])),
                                                 color=colour, strokeDash=dash, opacity=faded).add_params(pick),
            base.mark_point(filled=True, size=30).encode(x=x, y=y, color=colour, opacity=faded, tooltip=tips),
            alt.Chart(refs).transform_filter(alt.datum.measure == col).mark_rule(strokeWidth=1.8).encode(
                y=y, color=colour, strokeDash=dash, opacity=faded,
                tooltip=[alt.Tooltip("series:N", title="corpus"), alt.Tooltip("measure:N"), alt.Tooltip("value:Q", format=".4~g")]),
            alt.Chart(pd.DataFrame({"knob": knobs})).transform_filter(at_knob).mark_rule(
                color="#666666", strokeWidth=1, strokeDash=[3, 3]).encode(x=x, tooltip=[alt.Tooltip("knob:Q", title="marked knob γ")]),
            base.transform_filter(at_knob).mark_point(size=120, filled=False, strokeWidth=2).encode(
                x=x, y=y, color=colour, opacity=faded, tooltip=tips),
        ]
        if k == 0:
            layers[0] = layers[0].add_params(marked)
        panels.append(alt.layer(*layers))
    chart = pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared")
    return pg.finish_chart(chart, description=(
        f"Stationarity measures ({', '.join(cols)}) against the non-stationarity knob of the synthetic corpus, "
        f"one panel per measure, one line per sweep ({', '.join(sweep_names)}); "
        f"the corpora ({', '.join(corpus_names)}) as horizontal reference lines."))


def plot_fourier_modes(alignments, k=3):
    """The top k eigenvectors of B (dots) beside their best sinusoids (lines), one panel per matrix."""
    modes = [f"eigenvector {j + 1}" for j in range(k)]
    key = _key("modes", tuple(alignments), k)
    pick = alt.selection_point(fields=["eigenvector"], bind="legend", name=f"pick_modes_{key}")
    colour = alt.Color("eigenvector:N", scale=pg.colour_scale(modes), sort=modes, title="dots: eigenvector of B; lines: best sinusoid",
                       legend=alt.Legend(symbolType="circle", columns=3, titleLimit=400))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.08))

    def drawn(v):  # entries at float64 rounding (a node of a sine) are drawn as 0
        return np.where(np.abs(v) <= 1e-12 * np.abs(v).max(initial=0.0), 0.0, v)

    panels = []
    for label, fa in alignments.items():
        n = fa.eigenvectors.shape[0]
        frame = pd.concat([pd.DataFrame({"position": np.arange(n), "eigenvector": modes[j], "entry": drawn(fa.eigenvectors[:, j]),
                                         "sinusoid": drawn(fa.fits[:, j]), "frequency (cycles)": float(fa.frequency[j]),
                                         "energy": float(fa.energy[j])}) for j in range(k)], ignore_index=True)
        subtitle = [f"v{j + 1}: best frequency {fa.frequency[j]:.2f} cycles, energy {fa.energy[j]:.2f}" for j in range(k)]
        x = alt.X("position:Q", title="position i", scale=alt.Scale(domain=[0, n - 1], nice=False))
        base = alt.Chart(frame).properties(width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT,
                                           title=alt.TitleParams(f"{label} (n = {n})", subtitle=subtitle))
        fit = base.mark_line(strokeWidth=1.6).encode(x=x, y=alt.Y("sinusoid:Q", title="entry of the eigenvector"),
                                                     color=colour, opacity=faded).add_params(pick)
        dots = base.mark_point(filled=True, size=22 if n <= 64 else 6).encode(
            x=x, y="entry:Q", color=colour, opacity=faded,
            tooltip=[alt.Tooltip("eigenvector:N"), alt.Tooltip("position:Q", title="position i"),
                     alt.Tooltip("entry:Q", format=".4~g"), alt.Tooltip("sinusoid:Q", title="best sinusoid", format=".4~g"),
                     alt.Tooltip("frequency (cycles):Q", format=".3~g"), alt.Tooltip("energy:Q", format=".3f")])
        panels.append(alt.layer(fit, dots))
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared"),
        description=(f"The top {k} eigenvectors of the double-centred Gram matrix B (dots) and their best-matching "
                     f"sinusoids (lines) against the position, one panel per matrix ({', '.join(alignments)}), "
                     "one colour per eigenvector."),
        canvas=sum(a.eigenvectors.shape[0] for a in alignments.values()) * k > 2000)


def plot_offset_kernels(encodings):
    """The Gram kernel of each encoding against the offset, normalised to 1 at offset 0."""
    names, frames = [str(name) for name in encodings], []
    for name, P in zip(names, encodings.values()):
        profile = toeplitz_profile(P @ P.T)
        frames.append(pd.DataFrame({"offset": np.arange(len(P)), "kernel": profile / profile[0], "encoding": name}))
    frame = pd.concat(frames, ignore_index=True)
    dashes = [_DASHES[j % len(_DASHES)] for j in range(len(names))]  # one dash per line: coinciding lines show through
    key = _key("kernels", tuple(names), len(frame))
    pick = alt.selection_point(fields=["encoding"], bind="legend", name=f"pick_kernels_{key}")
    colour = alt.Color("encoding:N", scale=pg.colour_scale(names), sort=names, title="encoding",
                       legend=alt.Legend(symbolType="stroke", columns=2, symbolStrokeWidth=2.5))
    dash = alt.StrokeDash("encoding:N", sort=names, title="encoding", scale=alt.Scale(domain=names, range=dashes))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.1))
    x = alt.X("offset:Q", title="offset |i − j| (positions)", scale=alt.Scale(domain=[0, int(frame["offset"].max())], nice=False))
    y = alt.Y("kernel:Q", title="kernel <p_i, p_j> / <p_i, p_i>")
    base = alt.Chart(frame).properties(width=pg.COLUMN_WIDTH, height=260)
    line = base.mark_line(strokeWidth=2.2).encode(x=x, y=y, color=colour, strokeDash=dash, opacity=faded).add_params(
        pick, alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_kernels_{key}"))
    points = base.mark_point(filled=True, size=40).encode(
        x=x, y=y, color=colour, opacity=alt.condition(pick, alt.value(0.01), alt.value(0.0)),
        tooltip=[alt.Tooltip("encoding:N"), alt.Tooltip("offset:Q"), alt.Tooltip("kernel:Q", format=".4~g")])
    return pg.finish_chart(alt.layer(line, points), description=(
        f"The Gram kernel of each encoding ({', '.join(names)}) against the offset |i - j|, "
        "normalised to 1 at offset 0; variants of one encoding share its colour and differ by dash."))
