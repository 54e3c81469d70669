# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The statistical geometry of positions
#
# Before asking what a positional encoding *should* look like, P1
# {cite:p}`cirrincione2026geometry` asks what the corpus says about positions. Take every
# sequence of a corpus and look only at position $i$: the tokens found there form a
# probability distribution over the vocabulary, the {term}`positional marginal`
#
# $$
# \mu_i(v) = \Pr[\text{token at position } i = v \mid \text{the sequence reaches position } i].
# $$
#
# Two positions are *statistically close* when their distributions are close. P1 measures
# this with the {term}`Hellinger distance`, the Euclidean (chord) distance between the
# square-root distributions,
#
# $$
# d_H(\mu_i, \mu_j) = \sqrt{\tfrac12 \sum_v \bigl(\sqrt{\mu_i(v)} - \sqrt{\mu_j(v)}\bigr)^2}
# = \sqrt{1 - \mathrm{BC}(\mu_i, \mu_j)}, \qquad \mathrm{BC}(p, q) = \sum_v \sqrt{p_v q_v},
# $$
#
# a true metric with values in $[0, 1]$: $0$ for identical distributions, $1$ for
# disjoint supports. Its curved cousin, the {term}`Fisher–Rao geodesic distance <Fisher–Rao distance>`
# $2 \arccos \mathrm{BC}(\mu_i, \mu_j)$, measures the same angle along the sphere instead of
# across it; the next chapter shows why the difference matters.
#
# This chapter computes $\mu_i$ and the matrix $D_{ij} = d_H(\mu_i, \mu_j)$ for three corpora:
# a synthetic corpus whose true distributions we know, the sentences of SST-2 and the movie
# reviews of IMDB. It also measures something P1 leaves out: how much of each distance is
# sampling noise.

# %% tags=["hide-input"]
# Colab only: install the companion package (and nothing else) into the Colab runtime.
import subprocess
import sys

if "google.colab" in sys.modules:
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "-q",
            "posgeo @ git+https://github.com/posgeo/geometry-of-positional-encodings#subdirectory=companion",
        ],
        check=True,
    )

# %% tags=["hide-cell"]
import dataclasses

import numpy as np
import pandas as pd

import posgeo as pg
from posgeo.experiments import statistics as ex
from posgeo.experiments import calibration as ex_cal
from posgeo.experiments import BOOK_CORPORA

pg.notebook_setup()

# %% [markdown]
# ## Three corpora
#
# - **synthetic**: P1's controlled setting, $n = 32$ positions over a 64-token vocabulary.
#   The token at position $i$ is drawn from a known distribution: a bump that travels
#   around a ring of tokens as $i$ grows (a *stationary* geometry, where the distance
#   between positions depends only on their offset), mixed with a non-stationary component
#   whose weight is a tunable knob (`nonstationarity`; later chapters sweep it).
# - **SST-2** (train split): 67,349 sentences and phrases from movie reviews, mostly short.
#   The phrases are constituents of the parse trees of the sentences, so many sequences
#   share their opening or closing tokens with another one: the sequences are not
#   independent draws, which the noise floor and the corrections below assume. Every SST-2
#   number in this book uses all 67,349 sequences as they are.
# - **IMDB** (train split): 25,000 full movie reviews, long. The reviews contain HTML line
#   breaks (`<br />`); `load_corpus` removes them before tokenising (`pg.tokenize(...,
#   clean_html=True)`, the default; `clean_html=False` keeps them), so they are not
#   counted as tokens.
#
# SST-2 and IMDB are tokenised with the bert-base-uncased WordPiece vocabulary (30,522
# tokens). Positions count *content* tokens: `add_special_tokens=False`, so position 0 is
# the first word piece. A BERT model reading the same text puts `[CLS]` at its position 0,
# so our position $i$ is the model's position $i + 1$; for IMDB we analyse $n = 510$
# positions, the most a 512-position BERT can hold between `[CLS]` and `[SEP]`. SST-2 is
# analysed up to $n = 48$: no sequence in it is longer than 64 word pieces, and fewer than
# 300 reach position 48.

# %%
N_POSITIONS = dict(BOOK_CORPORA)
corpora = {
    "synthetic": pg.load_corpus("synthetic", "train"),
    "sst2": pg.load_corpus("sst2", "train"),
    "imdb": pg.load_corpus("imdb", "train"),
}
ex.corpus_summary(corpora, N_POSITIONS)

# %% [markdown]
# ## Per-position distributions and their Hellinger distances
#
# `corpus_geometry` counts tokens per position (one vectorised `bincount` over the whole
# corpus), normalises the counts into $\mu_i$, and computes all pairwise Hellinger
# distances. It also measures the {term}`noise floor` described below.

# %% mystnb={"figure": {"caption": "Chord Hellinger distance between the token distributions of positions i and j (plug-in), per corpus, beside its mean at each offset |i - j| (band: minimum to maximum over the pairs at that offset). IMDB's 510 positions are shown as means of 4 x 4 blocks. Hover a cell for its positions and value (its offset is marked on the curve); hover the curve to light up the cells at that offset.", "name": "fig-ch2-heatmaps"}}
geometries = {name: pg.corpus_geometry(c, N_POSITIONS[name], min_count=1000) for name, c in corpora.items()}
pg.plot_distance_heatmaps({name: g.distances for name, g in geometries.items()}, profiles=True)

# %% [markdown]
# Three different geometries ({numref}`fig-ch2-heatmaps`). The synthetic corpus shows a band around the diagonal that
# wraps around at the corners: the ring structure. SST-2 separates its first few positions
# sharply from the rest (sentences open differently from how they continue), and the
# distances grow with position. IMDB looks almost uniform: after the opening tokens, every
# position is at roughly the same distance from every other.
#
# The curves beside the heatmaps give the same picture as distance against offset $|i - j|$.
# {numref}`fig-ch2-offsets` adds to them the corrected distances and the noise floor:

# %% mystnb={"figure": {"caption": "Mean distance against offset |i - j| for the first 64 offsets: plug-in (band: minimum to maximum over the pairs at that offset), corrected (hybrid estimator, dashed) and the noise floor (dotted). Click a legend entry to show one curve; drag to pan, scroll to zoom.", "name": "fig-ch2-offsets"}}
pg.plot_offset_profiles(list(geometries.values()), max_offset=64)

# %% [markdown]
# The {term}`plug-in <plug-in estimate>` curves (blue) for the real corpora sit on top of a large noise floor (black,
# dotted), explained in the next section; the corrected curves (vermillion, dashed) remove it.

# %% [markdown]
# ## How much of it is noise?
#
# An empirical distribution estimated from $N$ tokens over a vocabulary of 30,522 word
# pieces is far from its true distribution: most tokens are absent or over-represented by
# chance. Two positions whose *true* distributions are identical still show a positive
# plug-in distance, and the fewer sequences reach a position, the larger it is. The
# plug-in Hellinger distance is biased upwards.
#
# **The noise floor.** For each position we split the sequences that reach it into two
# random halves and compute the Hellinger distance between the halves' token
# distributions (root mean square over five random splits). Both halves come from the
# *same* distribution, so this split-half distance $s_i$ is pure noise. {numref}`fig-ch2-floor`
# shows $s_i$ per position and, below it, the number of sequences that reach the position
# (log scale); black triangles flag positions reached by fewer than 1,000 sequences.

# %% mystnb={"figure": {"caption": "The noise floor: split-half distance of each position (top of each panel) and the number of sequences reaching it (below, log scale). Triangles: positions reached by fewer than 1,000 sequences.", "name": "fig-ch2-floor"}}
pg.plot_noise_floor(list(geometries.values()))

# %% [markdown]
# The noise floor rises with position in both real corpora, because fewer and fewer
# sequences are long enough. It is already about 0.3 at position 0, where every sequence
# contributes a token: with a Zipfian vocabulary, tens of thousands of samples still
# leave most of the tail unseen.
#
# **Two corrections.** The textbook first-order correction subtracts an estimated bias
# $b_i$ per position from the squared distance,
# $\hat d^2(i, j) - b_i - b_j$, with $b_i = s_i^2 / 4$ because a half-sample's bias is
# twice the full sample's *if the noise shrinks like $1/N$*. For a heavy-tailed
# vocabulary it does not (a token seen once or never contributes about the same noise
# at any sample size), and that correction removes too little. We therefore use a
# {term}`matched estimator` (`matched_hellinger_matrix`): split the sequences into halves A and
# B, compare position $i$ in A with position $j$ in B, and subtract the same-position
# comparison $s_i^2$, $s_j^2$, which carries the noise of two half-samples and nothing else:
#
# $$
# \tilde d^2(i, j) = \overline{H^2(a_i, b_j)} - \tfrac12\bigl(\overline{s_i^2} + \overline{s_j^2}\bigr).
# $$
#
# No assumption about how noise scales with $N$ enters: both terms compare half-samples.
# In the figure above, the vermillion dashed curves are the corrected distance (the hybrid
# estimator, a refinement of this one chosen by the calibration below), the black dotted
# curves the noise floor $\sqrt{(s_i^2 + s_j^2)/2}$.
#
# The table puts the typical distances beside the noise: `adjacent` and `mean` (plug-in,
# at offset 1 and over all pairs), `*_corrected` (the hybrid estimator),
# `adjacent_first_order` (the $1/N$ correction), the split-half distance at the first and
# last analysed position, the number of flagged positions, and `noise_share`, the share of
# the squared plug-in distances $\sum_{i<j} \hat d^2_{ij}$ that the correction removes.

# %%
summary = ex.geometry_summary(geometries)
summary

# %% [markdown]
# On the synthetic corpus (20,000 sequences over 64 tokens) the noise is small: half a
# percent of the squared distances (`noise_share` 0.005). The matched estimator alone does
# not resolve shares that small (it reports 0), because it slightly
# *under*-corrects: for two different positions
# the cross-half noise is a little larger than the same-position noise it subtracts. Its
# corrected distances are therefore, if anything, still too large, and its noise shares
# are lower bounds here (on 64 tokens; the calibration below shows they are not at the
# real vocabulary size). On the real corpora the noise dominates. In IMDB, adjacent positions deep inside a review are, after
# correction, almost indistinguishable: the plug-in distance there is essentially all
# noise, and what remains is a slow drift over hundreds of positions and a distinct
# opening. In SST-2 a real geometry survives the correction: the first positions differ
# from the rest, and distance grows with offset. Any stress computed against plug-in
# distances, P1's and ours in the next chapter, inherits this noise; the next chapter
# computes stress against both.
#
# The assertions below are the claims of this section; the chapter fails if the data stop
# supporting them.

# %%
assert summary.loc["synthetic", "noise_share"] < 0.05
assert round(summary.loc["synthetic", "noise_share"], 3) == 0.005  # "half a percent"
assert pg.noise_share(dataclasses.replace(geometries["synthetic"], hybrid=None)) == 0  # the matched estimator's
# exercise 3's numbers: IMDB's adjacent distance, first-order (0.27) and corrected (0.030)
assert [round(summary.loc["imdb", c], p) for c, p in (("adjacent_first_order", 2), ("adjacent_corrected", 3))] == [0.27, 0.030]
assert summary.loc["sst2", "noise_share"] > 0.2 and summary.loc["imdb", "noise_share"] > 0.5
assert summary.loc["imdb", "adjacent_corrected"] < 0.5 * summary.loc["imdb", "adjacent_first_order"]
for name in ("sst2", "imdb"):
    floor = geometries[name].split_half
    assert floor[-1] > floor[0], name  # the noise floor rises with position
summary[["noise_share"]].T

# %% [markdown]
# ### Checking the estimators where the truth is known
#
# The synthetic corpus comes with its true distributions (`corpus.true_marginals`), so we
# can compare plug-in and corrected distances with the truth, for the full sample and for
# a deliberately small one (300 sequences). The errors are relative Frobenius norms,
# $\lVert \hat D - D \rVert_F / \lVert D \rVert_F$.

# %%
truth = pg.hellinger_matrix(corpora["synthetic"].true_marginals)
small = pg.corpus_geometry(pg.load_corpus("synthetic", "train", max_sequences=300), 32, cache=False)
rel_error = lambda M: np.linalg.norm(M - truth) / np.linalg.norm(truth)  # noqa: E731
errors = pd.DataFrame(
    {
        label: {"plug-in": rel_error(g.distances), "first-order": rel_error(g.first_order), "matched": rel_error(g.matched)}
        for label, g in {"20,000 sequences": geometries["synthetic"], "300 sequences": small}.items()
    }
).T
errors

# %% [markdown]
# With a small sample the plug-in distances overshoot and both corrections remove much of
# the excess; with the full sample all three are close to the truth, and the matched
# estimator is slightly the worst of them (it works on half-samples and under-corrects a
# little, as explained above). (The synthetic
# vocabulary has 64 tokens, the regime where the $1/N$ argument holds; the real corpora are
# not in it.)

# %%
assert errors.loc["300 sequences", "matched"] < errors.loc["300 sequences", "plug-in"]
assert errors.loc["20,000 sequences", "plug-in"] < 0.05
errors["matched"] / errors["plug-in"]

# %% [markdown]
# ### Calibration on vocabularies the size of the real ones
#
# The synthetic check above has 64 tokens. The real corpora have 30,522 word pieces,
# most of them rare, and the per-position samples of SST-2 and IMDB. `ex_cal` generates
# corpora with a *known* geometry at those sizes: a Zipfian vocabulary fitted to IMDB, with
# positions that differ smoothly (`smooth`), only in rare tokens (`rare`), or not at all
# (`stationary`: every true distance is 0), and with exactly the real number of sequences
# reaching each position (all 48 positions of SST-2; 48 of IMDB's 510, each with its real
# sample size). Each estimator is scored against the truth over two simulated corpora:
# bias and RMSE of the distances, the relative bias of their mean, the noise share it
# implies against the true one, and Kendall's tau between the ranking of five encodings
# by stress against the estimate and against the truth (1: the same order). Besides the
# plug-in, first-order and matched estimators, `pg.hybrid_hellinger_matrix` treats
# well-sampled tokens with bias-corrected square roots and the tail through
# collision counts, after Jiao et al. (2015) and Valiant and Valiant (2011).

# %%
calibration = pd.concat(
    {
        (size, regime): ex_cal.calibrate_estimators(regime, size, n_replicates=2, seed=0, **options).summary.set_index("estimator")
        for size, options in (("sst2", {}), ("imdb", {"max_positions": 48}))
        for regime in ex_cal.CALIBRATION_REGIMES
    },
    names=["size", "regime"],
)[["bias", "rmse", "rel_bias_mean", "noise_share", "true_noise_share", "ranking_tau"]]
pg.display_table(calibration)  # n/a: undefined in the stationary regime (below)

# %% [markdown]
# (In the stationary regime every true distance is 0, so the relative bias and the rank
# correlation with the truth are undefined: n/a.) The mean plug-in distance is 2.5 to 4
# times the true one at these sizes, and they rank
# the encodings almost backwards (negative tau): a table that ranks encodings by plug-in
# stress on SST-2 or IMDB can be wrong about which encoding fits better. The matched
# estimator removes most of the bias and gets the ranking right in all but one case, but it
# turns the unequal sample sizes of positions into distance: on a stationary corpus with
# SST-2's sizes it reports a mean distance of about 0.15 where the truth is 0. Its noise
# shares are below the true ones on SST-2, but not always on IMDB (rare tokens), so they
# are not lower bounds in general; with equal, small samples at every position it
# over-corrects (see the `calibration` module). The hybrid estimator has the smallest bias
# in every case and the true ranking in every non-stationary one; its RMSE is the lowest on
# SST-2, and on IMDB slightly above the matched one in the `smooth` and `rare` regimes and
# half of it in the `stationary` one. From here on, the book's "corrected"
# geometry is the hybrid estimate (`corpus_geometry(...).hybrid`).

# %%
for (size, regime), g in calibration.groupby(level=["size", "regime"]):
    g = g.droplevel(["size", "regime"])
    assert abs(g.loc["hybrid", "bias"]) <= abs(g.loc["matched", "bias"]), (size, regime)
    assert g.loc["hybrid", "rmse"] < g.loc["plug-in", "rmse"] / 2, (size, regime)
    if regime != "stationary":
        assert 1.5 < g.loc["plug-in", "rel_bias_mean"] < 3 and g.loc["plug-in", "ranking_tau"] < 0, (size, regime)
        assert g.loc["hybrid", "ranking_tau"] > 0.99, (size, regime)  # 5 encodings: the next value is 0.8
    # RMSE: the hybrid's lowest on SST-2; on IMDB above the matched one except in the stationary regime (half of it)
    ratio = g.loc["hybrid", "rmse"] / g.loc["matched", "rmse"]
    assert (g["rmse"].idxmin() == "hybrid") if size == "sst2" else (ratio < 0.5 if regime == "stationary" else ratio > 1), (size, regime)
stationary = calibration.xs("stationary", level="regime")
assert 0.1 < stationary.loc[("sst2", "matched"), "bias"] < 0.2  # distance out of unequal sample sizes ("about 0.15")
assert calibration.loc[("imdb", "rare", "matched"), "noise_share"] > calibration.loc[("imdb", "rare", "matched"), "true_noise_share"]
pg.display_table(calibration.xs("hybrid", level="estimator"))

# %% [markdown]
# ### Sampling intervals, and why the plug-in cannot have them
#
# `pg.bootstrap_geometry` resamples whole sequences (reweighting their counts, without
# re-tokenising) and recomputes the distances. Here are the 95% percentile intervals of two
# statistics of the plug-in matrices (50 replicates), and the share of the 1,128 (SST-2)
# and 129,795 (IMDB) pairs whose interval contains the estimate itself:

# %%
def bootstrap_summary(name):
    boot = pg.bootstrap_geometry(corpora[name], N_POSITIONS[name], estimator="plugin", n_boot=50, seed=0, progress=False)
    upper = np.triu_indices(N_POSITIONS[name], k=1)
    rows = {
        label: dict(zip(("estimate", "low", "high"), boot.interval(f)))
        for label, f in (("mean adjacent distance", lambda D: float(np.diag(D, 1).mean())),
                         ("mean distance", lambda D: float(D[upper].mean())))
    }
    inside = (boot.low[upper] <= boot.estimate[upper]) & (boot.estimate[upper] <= boot.high[upper])
    rows["pairs whose interval holds the estimate"] = {"estimate": float(inside.mean())}
    return pd.DataFrame(rows).T


intervals = pd.concat({name: bootstrap_summary(name) for name in ("sst2", "imdb")})
intervals.map(lambda v: "" if pd.isna(v) else f"{v:.4f}")

# %% [markdown]
# No interval holds its own estimate: resampling a sample adds the same sampling noise
# again, so the replicates of a plug-in distance lie above the estimate. A percentile
# bootstrap measures the spread of the plug-in estimator but inherits its bias, and here
# the bias (the mean distance 2.5 to 4 times the truth, above) is far larger than the spread. On
# simulated corpora with known truth (`tests/test_bootstrap.py`) the nominal 95% intervals
# cover the truth on average at least 90% of the time only where positions are well sampled, and almost
# never where the plug-in is biased.

# %%
share = intervals.xs("pairs whose interval holds the estimate", level=1)["estimate"]
assert (share < 0.05).all()
for name in ("sst2", "imdb"):
    assert intervals.loc[(name, "mean distance"), "low"] > intervals.loc[(name, "mean distance"), "estimate"]
share

# %% [markdown]
# ### Half-sample intervals for the hybrid estimator
#
# Resampling with replacement cannot serve the hybrid estimator either: a sequence drawn
# twice makes its tokens collide with themselves. `bootstrap_geometry(...,
# estimator="hybrid")` uses **half-sampling** instead: 25 random halvings of the corpus
# into two disjoint halves A and B (stratified, so that each half holds about half of the
# sequences reaching every position); for any statistic $s$ of the distances,
# $\mathrm{se}^2 = \frac1B \sum_b \bigl(s(D_{A_b}) - s(D_{B_b})\bigr)^2/4$, which matches
# the variance of the full-sample estimate when it falls like $1/N$ and overstates it when
# it falls faster; the interval is $s(\hat D) \pm t_{0.975, 24}\,\mathrm{se}$. Per pair the
# interval is formed on the squared distance, where the estimator is nearly unbiased, and
# mapped back.
#
# **Which view of SST-2.** Its phrases are nested in their sentences, so `pg.overlap_groups`
# joins sequences that share a run of 8 tokens (a phrase and its sentence, overlapping
# phrases) and the halvings keep each group together. The estimates themselves use every
# phrase, as P1 does; the intervals use the groups. Here is what the grouping finds:

# %%
sst2_groups = pg.overlap_groups(corpora["sst2"])
lengths = np.diff(corpora["sst2"].sequences.offsets)
group_size = np.bincount(sst2_groups)[sst2_groups]
pd.Series({
    "sequences": lengths.size,
    "groups": int(sst2_groups.max()) + 1,
    "groups of 2 or more": int((np.bincount(sst2_groups) >= 2).sum()),
    "share of sequences of 16+ tokens in a shared group": float((group_size[lengths >= 16] > 1).mean()),
    "groups reaching position 47": np.unique(sst2_groups[lengths >= 48]).size,
}, dtype=object)

# %% [markdown]
# The grouping matters for the noise floor too. Split as independent sequences, a sentence
# and its phrases land in both halves and make them look alike; split by groups, they stay
# together. SST-2's split-half distance, mean over three ranges of positions, both ways:

# %%
floor_views = pd.DataFrame({
    view: pd.Series(pg.hellinger_noise_floor(corpora["sst2"], N_POSITIONS["sst2"], corpora["sst2"].vocab_size,
                                             groups=groups).split_half).groupby(np.arange(N_POSITIONS["sst2"]) // 16).mean()
    for view, groups in (("phrases independent", None), ("grouped by overlap", sst2_groups))
}).rename(index=lambda k: f"positions {16 * k}-{16 * k + 15}")
floor_views.assign(ratio=floor_views["grouped by overlap"] / floor_views["phrases independent"])

# %% [markdown]
# Treating SST-2's phrases as independent understates its noise floor by about a sixth.
# The plug-in distances, the noise floor and the corrected estimates of this chapter use
# every phrase, as P1 does (so the noise floor above is a little optimistic for SST-2);
# the sampling intervals below use the groups.

# %%
ratio = floor_views["grouped by overlap"] / floor_views["phrases independent"]
assert (ratio > 1.1).all() and (ratio < 1.25).all()  # "about a sixth"
ratio.rename("grouped / independent")

# %%
def hybrid_intervals(name):
    boot = ex.corpus_bootstrap(name, N_POSITIONS[name], progress=False)
    upper = np.triu_indices(N_POSITIONS[name], k=1)
    plug_sq = float((geometries[name].distances[upper] ** 2).sum())
    statistics = {"mean distance": lambda d: float(d.mean()), "noise share": lambda d: 1.0 - float(d @ d) / plug_sq}
    rows = {label: dict(zip(("estimate", "low", "high"), boot.interval(f, triangle=True))) for label, f in statistics.items()}
    rows["median width of a pair's interval"] = {"estimate": float(np.median((boot.high - boot.low)[upper]))}
    return pd.DataFrame(rows).T


hybrid_table = pd.concat({name: hybrid_intervals(name) for name in ("sst2", "imdb")})
hybrid_table.map(lambda v: "" if pd.isna(v) else f"{v:.4f}")

# %% [markdown]
# Do these intervals hold the truth? The same known-truth corpora as above answer it
# (two corpora per case, 25 halvings each): the share of pairs whose 95% interval holds
# the true distance, the share of the (encoding, corpus) cases whose interval of the
# scale-optimal stress holds the true stress, and the median width of a pair's interval
# (`pairs_min`: the lower of the two corpora's shares). The `widened` columns do the same for the intervals widened on both sides by the gap
# between the hybrid and the matched estimates (`boot.widened(pg.matched_hellinger_matrix(...))`):
# two estimators whose biases differ disagree about as much as they err.

# %%
coverage_all = pd.concat(
    [
        ex_cal.interval_coverage(regime, size, n_corpora=2, n_boot=25, seed=0, **options).summary
        for size, options in (("sst2", {}), ("imdb", {"max_positions": 48}))
        for regime in ex_cal.CALIBRATION_REGIMES
    ]
).set_index(["size", "regime"])
coverage = coverage_all[["pairs", "pairs_min", "stress", "median_width",
                                 "pairs_widened", "pairs_widened_min", "median_width_widened"]]
coverage.rename(columns={"median_width": "width", "pairs_widened": "pairs, widened", "pairs_widened_min": "min, widened",
                         "median_width_widened": "width, widened"}).map(lambda v: "" if pd.isna(v) else f"{v:.3f}")

# %% [markdown]
# Per pair, the intervals reach their nominal 95% only in IMDB's stationary case. Elsewhere
# they hold the truth for 60 to 86% of the pairs: the estimator's systematic error (the
# bias column of the calibration) is not part of a sampling interval. Coverage is lowest in
# the `rare` regime, whose differences sit in the tail that the hybrid estimator sees only
# through its reference approximation. That is below this book's target of 90% in every
# case but one: a sampling interval alone is not enough.
#
# Widened by the disagreement with the matched estimator, the intervals hold the true
# distance for at least 94% of the pairs in every case, at 1.5 to 2.1 times the width.
# (This widening was chosen among three tried on these same cases, so this table is not
# an independent test of it; the other two were a half-sample bias correction and the gap
# to the hybrid estimator on cross halves.) The later chapters use the widened intervals
# (`ex.corpus_bootstrap(..., widened=True)`); for SST-2, whose sequences are not
# independent, the reference is another estimator, chosen in the next section.
#
# The stress intervals (not widened) cover the true stress far less
# often: noise in the distances raises the stress of every encoding, so the stress
# against an estimate sits above the stress against the truth by more than its spread.
# The later chapters therefore state differences of stress with paired intervals
# (`pg.stress_differences`), and read a stress value itself as "against the hybrid
# estimate", not as the stress against the unknown truth.

# %%
others = coverage.drop(index=[("imdb", "stationary")])
assert (others["pairs"] > 0.55).all() and (others["pairs"] < 0.9).all()  # "60 to 86%"
assert coverage.loc[("imdb", "stationary"), "pairs"] > 0.9
assert (coverage["stress"].dropna() < 0.5).all()
assert (coverage["pairs_widened"] >= 0.94).all()  # "at least 94% of the pairs in every case"
widening = coverage["median_width_widened"] / coverage["median_width"]
assert ((widening > 1.45) & (widening < 2.15)).all()  # "1.5 to 2.1 times the width"
coverage[["pairs", "pairs_widened"]].assign(width_ratio=widening)

# %% [markdown]
# Do the paired intervals of a difference of stresses (`pg.stress_differences`) get the
# *order* of two encodings right? For the ten pairs of the five test encodings in each
# calibration corpus (none in the stationary cases, whose true stresses are undefined):
# the share of cases whose paired interval holds the true difference, the number of
# intervals that exclude 0 (claims that one encoding fits better) and how many of those
# claims have the wrong sign, for the sampling and for the widened intervals.

# %%
orders = coverage_all[["differences", "claims", "wrong_claims", "differences_widened", "claims_widened",
                   "wrong_claims_widened", "n_pairs"]].dropna()
assert (orders["wrong_claims"] == 0).all() and (orders["wrong_claims_widened"] == 0).all()
assert (orders["differences"] < 0.5).all() and (orders["differences_widened"] > orders["differences"]).all()
assert orders["claims_widened"].sum() >= 0.8 * orders["n_pairs"].sum()
orders.astype({c: int for c in ("claims", "wrong_claims", "claims_widened", "wrong_claims_widened", "n_pairs")})

# %% [markdown]
# A paired sampling interval rarely holds the true *value* of a difference (the estimate
# of a stress is biased upwards, and the bias differs between encodings), but in these
# calibrations not one interval that excluded 0 had the wrong sign, widened or not.
# Widening costs few claims: most pairs stay separated. That is the evidence behind the
# later chapters' orderings, with two limits: it covers two regimes of independent
# sequences (`smooth` and `rare`, at both sizes; the `stationary` one has no true order)
# and these five encodings, and a claim's sign being right in every case here
# bounds its error rate only to a few percent.

# %% [markdown]
# ### When sequences are not independent: nested phrases
#
# Every corpus above draws independent sequences. SST-2's training split does not: it is
# parse-tree phrases nested in their sentences, so a sentence and its phrases share their
# tokens. `ex_cal.nested_corpus` builds that shape with a known truth: sentences drawn
# from the calibration truth (8,000 of them, median length 22), each with seven random
# constituents of a random binary bracketing as sequences of their own, starting at
# position 0. The true distribution at position $i$ is the mean of the sentence
# distributions at the positions that sequences reaching $i$ start from. Two corpora per
# regime, and intervals from 10 halvings of whole sentences; `pairs` is the coverage of
# the hybrid estimator's sampling intervals (hybrid row) and of the same intervals widened
# by the gap to each other estimate (the other rows).
#
# Two of the estimators are built for this case. The matched estimator can halve whole
# sentences (`groups=`). The **jackknifed hybrid**
# (`pg.hybrid_hellinger_matrix(..., split="jackknife", groups=...)`) keeps the hybrid
# estimator's split of the vocabulary into resolved tokens and tail, but estimates the
# plug-in of both parts and removes its bias with a delete-a-block jackknife: the
# sentences are dealt to 20 blocks (`pg.stratified_blocks`, balanced at every position),
# the statistic is recomputed without each block, and $H^2 = K\,T - (K-1)\,\overline{T_{(k)}}$
# with $K = 20$. A bias of order $1/N$, with $N$ counted in sentences, cancels whatever
# the dependence inside a sentence, because a block removes a sentence with all its
# phrases:

# %%
nested = pd.concat({regime: ex_cal.nested_calibration(regime, n_corpora=2, n_boot=10, seed=0)
                    for regime in ex_cal.CALIBRATION_REGIMES}, names=["regime", "estimator"])
nested[["rel_bias_mean", "rmse", "spearman", "ranking_tau", "pairs"]].round(3)

# %% [markdown]
# Nesting makes every estimator that ignores it overstate the distances, the plug-in by
# far the most, and the hybrid estimator (which counts a token shared by a phrase and its
# sentence as two draws) by about a third; it ranks the five test encodings wrongly in
# the `rare` regime. Grouping is what helps, not the jackknife as such: with blocks of
# single sequences the jackknife is the hybrid estimator again. With blocks of whole
# sentences it errs least in mean distance (5% too short in the `smooth` regime, a fifth
# too short in the `rare` one, against a fifth and a third too long for the grouped
# matched estimator), has the smallest RMSE (tied with the grouped matched one in the
# `rare` regime) and ranks the encodings right in both regimes; in the stationary case
# its distances are less than half of any other's. It is noisier: it orders the pairs of
# positions less well than the grouped matched estimator (rank correlation 0.91 against
# 0.95, and 0.75 against 0.90). Widened by the gap to it, the hybrid intervals hold the
# truth for about 97% of the pairs where positions differ (the grouped matched
# reference: 89 to 93%; the sampling intervals: under 70%), and for two thirds in the
# stationary case, where no other reference reaches one half. The later chapters
# therefore widen SST-2's intervals by the jackknife over sentence groups
# (`ex.corpus_bootstrap(..., widened=True)` uses `pg.overlap_groups` as the sentences).
#
# Two limits. These corpora are nested like SST-2 but are not SST-2, and the jackknife
# was designed after the matched estimator was seen to fall short on them, so the table
# is not an independent test of it. And on SST-2 itself the four corrections are far
# apart (next table).

# %%
grouped, hybrid, ungrouped = "matched, halves of sentences", "hybrid", "matched, halves of sequences"
jackknife, jk_ungrouped = "jackknife, blocks of sentences", "jackknife, blocks of sequences"
for regime in ("smooth", "rare"):
    t = nested.loc[regime]
    assert t.loc[jackknife, "rmse"] <= t.drop(index="plug-in")["rmse"].min() + 0.002  # smallest, or tied
    assert abs(t.loc[jackknife, "rel_bias_mean"]) < t.loc[grouped, "rel_bias_mean"] < t.loc[hybrid, "rel_bias_mean"]
    assert t.loc[hybrid, "rel_bias_mean"] > 0.3 and t.loc[jackknife, "ranking_tau"] > 0.999  # 1 up to rounding
    assert t.loc[jackknife, "spearman"] < t.loc[grouped, "spearman"]  # "noisier"
    assert t.loc[jackknife, "pairs"] > 0.95 and 0.85 < t.loc[grouped, "pairs"] < 0.95 and t.loc[hybrid, "pairs"] < 0.7
    assert abs(t.loc[jk_ungrouped, "mean_distance"] / t.loc[hybrid, "mean_distance"] - 1) < 0.05
assert nested.loc[("rare", hybrid), "ranking_tau"] < 0.5
stationary = nested.loc["stationary"]
assert stationary.loc[jackknife, "mean_distance"] < stationary.drop(index=jackknife)["mean_distance"].min() / 2
assert 0.6 < stationary.loc[jackknife, "pairs"] < 0.7 and stationary.drop(index=jackknife)["pairs"].max() < 0.5
# the numbers in the text: "5% too short", "a fifth too short", "a fifth and a third too long",
# "0.91 against 0.95, and 0.75 against 0.90", "about 97%", "89 to 93%"
bias = nested["rel_bias_mean"]
assert -0.07 < bias[("smooth", jackknife)] < -0.03 and -0.25 < bias[("rare", jackknife)] < -0.17
assert 0.17 < bias[("smooth", grouped)] < 0.23 and 0.29 < bias[("rare", grouped)] < 0.37
rho = nested["spearman"]
for (regime, name), quoted in {("smooth", jackknife): 0.91, ("smooth", grouped): 0.95,
                               ("rare", jackknife): 0.75, ("rare", grouped): 0.90}.items():
    assert abs(rho[(regime, name)] - quoted) < 0.01, (regime, name)
covered = nested["pairs"]
assert all(0.95 < covered[(r, jackknife)] < 0.99 and 0.885 < covered[(r, grouped)] < 0.935 for r in ("smooth", "rare"))
nested.xs(jackknife, level="estimator")[["rel_bias_mean", "rmse", "ranking_tau", "pairs"]].round(3)

# %% [markdown]
# SST-2 by four corrections (`ex.estimator_comparison`): the mean distance over all pairs
# of positions, over the pairs with position 0, and over the pairs inside each later run
# of 16 positions; and the share of those pairs that the jackknife puts at 0 (its squared
# estimate is negative there: no difference it can tell from none):

# %%
sst2_estimates = ex.estimator_comparison("sst2", N_POSITIONS["sst2"])
sst2_estimates.round(3)

# %% [markdown]
# Position 0 stands apart by every estimate (0.39 to 0.48). Inside the later ranges the
# estimators split in two. The two that ignore the nesting (hybrid, and matched with
# halves of sequences) put the positions of a range 0.2 to 0.37 apart on average; the
# two that keep a sentence with its phrases put them a third to a half as far apart in
# positions 1-16 and a fifth to a twelfth as far beyond, the jackknife lowest, at 0 for
# about half of the pairs beyond position 16. If the calibration's
# verdict carries over to SST-2, SST-2 past its first position is close to stationary
# inside each range, and most of the geometry that the hybrid estimator sees there comes
# from phrases that repeat their sentence. The widened intervals of the later chapters
# carry this disagreement: for SST-2 they reach from about the jackknife estimate to
# beyond the hybrid one, so a claim about SST-2 that they separate holds under either
# reading.

# %%
grouped_cols = ["matched, halves of sentence groups", "jackknife, blocks of sentence groups"]
later = sst2_estimates.index[2:]
first = sst2_estimates.loc["pairs with position 0"]
assert first.drop("jackknife at 0").between(0.38, 0.49).all() and first["jackknife at 0"] == 0
ratio = sst2_estimates.loc[later, grouped_cols].div(sst2_estimates.loc[later, "hybrid"], axis=0)
assert ratio.iloc[0].between(0.3, 0.5).all() and ratio.iloc[1:].to_numpy().max() < 0.21  # "a third to a half", "a fifth"
assert (sst2_estimates.loc[later, grouped_cols[1]] < sst2_estimates.loc[later, grouped_cols[0]]).all()
assert sst2_estimates.loc[later[1:], "jackknife at 0"].between(0.4, 0.65).all()  # "about half"
ignoring = sst2_estimates.loc[later, ["hybrid", "matched, halves of sequences"]]
assert ignoring.to_numpy().min() > 0.19 and ignoring.to_numpy().max() < 0.38  # "0.2 to 0.37 apart"
assert ratio.iloc[1:].to_numpy().min() > 1 / 12  # "to a twelfth"
ratio.rename(columns=lambda c: f"{c} / hybrid").round(3)

# %% [markdown]
# ## Chord or geodesic?
#
# The Fisher–Rao distance is a monotone function of the Hellinger distance,
# $d_{FR} = 2 \arccos(1 - d_H^2)$, so the two metrics order pairs of positions identically
# and differ only in how they stretch large distances. For a near pair $d_{FR} \approx
# 2\sqrt2\, d_H$; for disjoint supports $d_{FR} = \pi$ while $d_H = 1$. Here is the
# ratio $d_{FR} / d_H$ over all pairs of each corpus:

# %%
def fisher_rao_over_chord(g):
    upper = np.triu_indices(g.n_positions, k=1)
    ratio = pg.hellinger_matrix(g.marginals, metric="fisher-rao")[upper] / g.distances[upper]
    return {"min ratio": ratio.min(), "max ratio": ratio.max()}


pd.DataFrame({name: fisher_rao_over_chord(g) for name, g in geometries.items()}).T

# %% [markdown]
# The stretch is mild and nearly uniform, but it is not a rescaling: the chord distance
# is *exactly* Euclidean (the points $\sqrt{\mu_i}/\sqrt2$ realise it), while the geodesic
# generally is not. The next chapter shows what that does to the claim that no encoding
# can reproduce the corpus geometry exactly.
#
# ## Summary
#
# - The per-position token distributions $\mu_i$ of a corpus define a geometry of
#   positions; `posgeo` computes it in one vectorised pass (`positional_marginals`,
#   `hellinger_matrix`, `corpus_geometry`).
# - The three corpora differ: a ring on the synthetic corpus, a sharp sentence-start effect
#   and growing distances on SST-2, a near-uniform geometry after the first tokens on IMDB.
# - On real corpora a large share of the plug-in Hellinger distances is sampling noise,
#   growing with position as fewer sequences reach it; on IMDB it is most of it. Measure
#   the noise floor before reading a distance (`hellinger_noise_floor`) and use a corrected
#   estimate: on corpora with a known truth the hybrid estimator
#   (`hybrid_hellinger_matrix`, `corpus_geometry(...).hybrid`) has the smallest bias and
#   ranks encodings in the true order; the matched one turns unequal sample sizes into
#   distance.
# - Sampling intervals: percentile bootstraps of the plug-in hold not even their own
#   estimate; half-sample intervals of the hybrid estimator (`bootstrap_geometry(...,
#   estimator="hybrid")`, SST-2 resampled by `overlap_groups`) are honest about sampling
#   but not about the estimator's bias, and hold the truth less often than 95% wherever
#   positions differ. Widened by the disagreement with the matched estimator
#   (`boot.widened(...)`), they hold it for at least 94% of the pairs in every case, and
#   their paired intervals of stress differences ordered every pair of encodings they
#   separated correctly.
# - Where sequences are nested in one another (SST-2's phrases), every estimator that
#   treats them as independent overstates the distances; the jackknifed hybrid over
#   blocks of whole sentences (`split="jackknife"`) errs least, and widening by it keeps
#   the coverage near 97% where positions differ. On SST-2 it finds the positions past
#   the first few much closer together than the other corrections do.
#
# ## Exercises
#
# 1. The table of ratios $d_{FR}/d_H$ has its minimum just above $2\sqrt2 \approx 2.828$ and
#    its maximum well below $\pi$ on every corpus. Show that the ratio is an increasing
#    function of $d_H$ alone, and read off the smallest and largest Hellinger distance of
#    each corpus from the table. Check with `g.distances` for each `g` in `geometries`.
#
# ```{admonition} Solution
# :class: dropdown
# With $\theta = \arccos \mathrm{BC} = \arccos(1 - d_H^2) \in [0, \pi/2]$ we have
# $d_H = \sqrt{1 - \cos\theta} = \sqrt2 \sin(\theta/2)$ and $d_{FR} = 2\theta$, so
#
# $$
# \frac{d_{FR}}{d_H} = 2\sqrt2\,\frac{t}{\sin t}, \qquad t = \theta/2 \in (0, \pi/4],
# $$
#
# and $t/\sin t$ increases with $t$: the ratio runs from $2\sqrt2$ ($d_H \to 0$) to $\pi$
# ($d_H = 1$, disjoint supports). The minimum and maximum ratios of a corpus are therefore
# those of its closest and farthest pair. Over the pairs $i < j$, `g.distances` ranges from
# 0.1002 to 0.8477 on the synthetic corpus, 0.2662 to 0.7925 on SST-2 and 0.3380 to 0.6999
# on IMDB, and $2\arccos(1 - x^2)/x$ at these values gives exactly the table's 2.8308 and
# 3.0330, 2.8454 and 3.0024, 2.8561 and 2.9588. No two positions have disjoint supports, so
# no ratio reaches $\pi$.
# ```
#
# 2. Derive the first-order correction. For a distribution over $V$ tokens whose expected
#    counts are all large, the plug-in estimate $\hat\mu$ from $M$ tokens satisfies
#    $\mathbb E \sum_v (\sqrt{\hat\mu(v)} - \sqrt{\mu(v)})^2 \approx (V - 1)/(4M)$ (delta method,
#    $\operatorname{Var}\hat\mu(v) = \mu(v)(1 - \mu(v))/M$). Deduce the split-half distance
#    $s$ of a position reached by $N$ sequences and the bias $b$ of a plug-in $\hat d^2(i, j)$,
#    and show that $b_i = s_i^2/4$. Compare the prediction for the synthetic corpus
#    ($V = 64$, $N = 20{,}000$) with `geometries["synthetic"].split_half`.
#
# ```{admonition} Solution
# :class: dropdown
# Two independent estimates of the same distribution from $M_A$ and $M_B$ tokens have
# $\mathbb E\, d_H^2 = \tfrac12 \mathbb E \lVert \sqrt{\hat\mu_A} - \sqrt{\hat\mu_B}\rVert^2
# \approx \tfrac12\bigl(\tfrac{V-1}{4M_A} + \tfrac{V-1}{4M_B}\bigr)$. Two halves of
# $N/2$ sequences give $s^2 \approx (V - 1)/(2N)$. Two different positions estimated from
# all $N_i$ and $N_j$ sequences carry the noise $\tfrac{V-1}{8N_i} + \tfrac{V-1}{8N_j} = b_i + b_j$,
# with $b_i = (V - 1)/(8N_i) = s_i^2/4$. For the synthetic corpus the prediction is
# $s = \sqrt{63/40{,}000} = 0.040$; `split_half` is about 0.041 at every position (0.0421 at
# the first, 0.0420 at the last, 0.041 on average). The approximation assumes every expected
# count is large; some tokens of the synthetic corpus have expected counts below 1 in a
# half-sample (the smallest true probability is $1.7 \cdot 10^{-5}$), where it is not exact.
# ```
#
# 3. Real vocabularies are Zipfian. Take $V = 30{,}522$ tokens with $\mu(v) \propto 1/v$, draw
#    two half-samples of $N/2$ tokens with `rng.multinomial` (`rng = np.random.default_rng(0)`),
#    normalise them and compute their distance with `pg.hellinger_matrix`, for
#    $N = 10^3, 10^4, 10^5, 10^6$. Does $s$ fall like $1/\sqrt N$? What does this mean for
#    the column `adjacent_first_order` of the summary table?
#
# ```{admonition} Solution
# :class: dropdown
# Root mean square over five draws per $N$ (seed 0): $s = 0.75, 0.59, 0.39, 0.14$, against
# $\sqrt{(V - 1)/(2N)} = 3.9, 1.2, 0.39, 0.12$ from the $1/N$ law, which is meaningless
# (above 1) for small $N$. Ten times more tokens shrink $s$ by a factor 1.27 from $10^3$ to
# $10^4$ and 1.53 from $10^4$ to $10^5$, instead of $\sqrt{10} = 3.16$. Most of a Zipfian
# vocabulary has expected counts below 1, and such tokens add about the same noise whatever
# $N$ is. (The same draw over a uniform vocabulary of 64 tokens follows the law within 5%.)
# In this regime a full sample is barely less noisy than a half-sample, its bias
# is close to $s_i^2/2$ per position rather than $s_i^2/4$, and the first-order correction
# removes too little: on IMDB `adjacent_first_order` (0.27) stays far above the corrected
# (hybrid) estimate `adjacent_corrected` (0.030).
# ```
#
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
