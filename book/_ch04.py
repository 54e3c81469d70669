"""The MDS chapter's interval of the fitted tables and its stress chart."""

from __future__ import annotations

from dataclasses import replace

import altair as alt
import numpy as np
import pandas as pd

import posgeo as pg


def fitted_stress_intervals(boot, ranks=(1, 2, 3), smacof_replicates=None):
    """Scale-optimal stress of PMDS (ranks and full) and SMACOF (ranks), refitted on every halving, and SMACOF - PMDS."""
    m = boot.n_boot if smacof_replicates is None else smacof_replicates
    classical = [f"PMDS k={k}" for k in ranks] + ["PMDS full"]
    smacof = [f"SMACOF k={k}" for k in ranks] + [f"SMACOF k={k} - PMDS k={k}" for k in ranks]

    def fitted(D, with_classical, with_smacof):
        if not np.isfinite(D).all():  # a halving that left a position empty
            return np.full(len(classical) * with_classical + len(smacof) * with_smacof, np.nan)
        full = pg.classical_mds(D)
        pmds = [pg.stress(full.coords[:, :k], D, scale="optimal") for k in ranks]
        out = pmds + [pg.stress(full.coords, D, scale="optimal")] if with_classical else []
        if with_smacof:
            fits = [pg.stress(pg.stress_optimal_mds(D, k, init=full.coords[:, :k]).coords, D, scale="optimal") for k in ranks]
            out += fits + [s - pg.stress(full.coords[:, :k], D, scale="optimal") for s, k in zip(fits, ranks)]
        return np.array(out)

    if m == boot.n_boot:  # one pass: one classical MDS per matrix for every table
        parts = [(classical + smacof, boot, lambda D: fitted(D, True, True))]
    else:  # SMACOF on the first m halvings only
        head = replace(boot, n_boot=m, replicates=boot.replicates[:m],
                       complements=None if boot.complements is None else boot.complements[:m])
        parts = [(classical, boot, lambda D: fitted(D, True, False)), (smacof, head, lambda D: fitted(D, False, True))]
    frames = []
    for names, geometry, statistic in parts:
        est, low, high = geometry.interval(statistic)
        difference = np.array([" - " in name for name in names])
        frames.append(pd.DataFrame({"stress": est, "low": np.where(difference, low, np.clip(low, 0.0, None)),
                                    "high": high, "replicates": geometry.n_boot}, index=names))
    return pd.concat(frames)


def plot_stress(table):
    """Dots of scale-optimal stress on a log axis: encodings (rows) by corpus (columns).

    Dots, not bars: a bar on a log axis has no baseline to start from.
    """
    long = table.rename_axis(index="encoding", columns="corpus").stack().rename("stress").reset_index()
    long["encoding"], long["corpus"] = long["encoding"].astype(str), long["corpus"].astype(str)
    corpora = list(dict.fromkeys(long["corpus"]))
    chart = alt.Chart(long).mark_point(filled=True, size=90, opacity=1).encode(
        x=alt.X("encoding:N", sort=list(dict.fromkeys(long["encoding"])), title=None, axis=alt.Axis(labelAngle=-35)),
        xOffset=alt.XOffset("corpus:N", sort=corpora),
        y=alt.Y("stress:Q", title="optimal stress (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("corpus:N", scale=pg.colour_scale(corpora), title="corpus"),
        shape=alt.Shape("corpus:N", sort=corpora, title="corpus"),
        tooltip=["encoding", "corpus", alt.Tooltip("stress:Q", format=".4f")],
    ).properties(width=pg.COLUMN_WIDTH, height=240)
    return pg.finish_chart(chart, description="Optimal stress of each encoding (dots, log scale) against each corpus (colours and shapes); lower fits better.")
