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
# # Introduction
#
# :::{admonition} In short
# :class: tip
# **The question.** A transformer reads a sentence as a set of tokens. How does it know
# word order, what does a corpus say about positions, and which positional encoding should
# it use? Two papers give answers: P1 {cite:p}`cirrincione2026geometry` derives the optimal
# encoding from the corpus itself; P2 {cite:p}`zuo2024position` finds position information
# in causal models that have no encoding at all.
#
# **The book's answer.** P1's mathematics holds (positions need a signal, the corpus
# defines an exactly Euclidean geometry of positions, classical MDS reproduces it), but its
# empirical claims mostly do not survive real text and honest uncertainty: most of a real
# corpus's positional geometry is sampling noise, the premise behind sinusoids fails, the
# layer-3 peak does not reproduce, and the encoding built from the corpus does not train a
# better model. P2's pattern reproduces, and its source is causal averaging. The
# {ref}`table of claims <sec-intro-claims>` gives every verdict with a link to its evidence.
#
# **You will learn** what each chapter asks and answers, how the book's central object (a
# corpus's geometry of positions) is built in a few lines, and how to run any chapter.
# :::
#
# A transformer's attention and feed-forward layers treat every position alike. Whatever a
# model knows about word order it gets from a **positional signal**: a table added to the
# token embeddings (sinusoidal {cite:p}`vaswani2017attention` or learned), a rotation of
# queries and keys ({term}`RoPE`), a bias on the attention scores ({term}`ALiBi`), or, in a
# causal model without any of these, the causal mask itself. This book asks what that signal
# should look like, and checks the two papers' answers by running their experiments: on two
# real corpora, SST-2 {cite:p}`socher2013sst` and IMDB {cite:p}`maas2011imdb`, on synthetic
# corpora whose answer is known in advance, and on trained and pretrained models.

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
import altair as alt
import numpy as np
import pandas as pd

import posgeo as pg

pg.notebook_setup()

# %% [markdown]
# (sec-intro-pipeline)=
# ## The central object: a corpus's geometry of positions
#
# P1's idea fits in five steps. Take a corpus, look at the tokens that occur at each
# position $i$, and call their distribution $\mu_i$. Measure how different two positions
# are by the {term}`Hellinger distance` between their distributions,
#
# $$
# d_H(\mu_i, \mu_j) = \sqrt{\tfrac{1}{2} \sum_{v} \left(\sqrt{\mu_i(v)} - \sqrt{\mu_j(v)}\right)^2}
# = \sqrt{1 - \textstyle\sum_v \sqrt{\mu_i(v)\,\mu_j(v)}} .
# $$
#
# A good encoding $P = (p_1, \dots, p_n)$ places the positions so that their Euclidean
# distances reproduce these. Its **{term}`stress`**,
#
# $$
# \operatorname{stress}(P) = \frac{\sum_{i<j} \left(\lVert p_i - p_j \rVert - d_H(\mu_i, \mu_j)\right)^2}{\sum_{i<j} d_H(\mu_i, \mu_j)^2},
# $$
#
# is 0 for a perfect copy. {term}`Classical MDS <classical MDS>` of the distance matrix
# builds such an encoding, P1's $P_{\mathrm{MDS}}$. Here are the five steps on a synthetic
# corpus of 4,000 sequences of 32 tokens, whose positions were generated on a ring:

# %%
corpus = pg.load_corpus("synthetic", n_sequences=4000, progress=False)
tokens = np.stack(list(corpus.sequences))[:, :32]                  # (sequences, positions)
counts = np.zeros((32, corpus.vocab_size))
np.add.at(counts, (np.arange(32)[None, :].repeat(len(tokens), 0), tokens), 1)
mu = counts / counts.sum(axis=1, keepdims=True)                    # 1. one distribution per position
R = np.sqrt(mu / 2)                                                # 2. Hellinger distances: Euclidean
D = np.sqrt(((R[:, None, :] - R[None, :, :]) ** 2).sum(axis=-1))   #    between the sqrt(mu_i / 2)
J = np.eye(32) - 1 / 32                                            # 3. classical MDS: double-centre,
eigenvalues, vectors = np.linalg.eigh(-0.5 * J @ D**2 @ J)         #    diagonalise,
P = vectors[:, ::-1] * np.sqrt(np.clip(eigenvalues[::-1], 0, None))  #  scale the eigenvectors
pd.Series({"marginals vs pg.positional_marginals": np.abs(mu - pg.positional_marginals(corpus, 32, corpus.vocab_size)).max(),
           "distances vs pg.hellinger_matrix": np.abs(D - pg.hellinger_matrix(mu)).max(),
           "stress of P (4. the score)": pg.stress(P, D)}, name="largest difference").round(12)  # 0: equal to rounding

# %% [markdown]
# The hand-built steps agree with the library's functions to rounding, and the encoding
# $P$ reproduces the distances exactly: its stress is 0. {numref}`fig-intro-pipeline` shows
# the pipeline, and step 5 beside it: the sinusoidal encoding of the original transformer,
# seen the same way.

# %% mystnb={"figure": {"caption": "The pipeline on a synthetic corpus of 32 positions. (a) The token distribution at each position (rows), over the 64 tokens. (b) The Hellinger distances between positions. (c) P_MDS: the positions placed by classical MDS, first two coordinates, joined in order. (d) The sinusoidal encoding (width 64) seen the same way: classical MDS of its distances. Colour: position. Hover for values.", "name": "fig-intro-pipeline"}} tags=["hide-input"]
def position_map(X, title):
    frame = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "position": np.arange(len(X))})
    line = alt.Chart(frame).mark_line(color="#999999", strokeWidth=1).encode(x="x:Q", y="y:Q", order="position:Q")
    dots = alt.Chart(frame).mark_circle(size=60).encode(
        x=alt.X("x:Q", title="coordinate 1"), y=alt.Y("y:Q", title="coordinate 2"),
        color=alt.Color("position:Q", scale=alt.Scale(scheme="viridis")), tooltip=["position:Q"])
    return (line + dots).properties(title=title, width=pg.PANEL_WIDTH, height=pg.PANEL_WIDTH)


tokens_long = pd.DataFrame(mu).reset_index(names="position").melt("position", var_name="token", value_name="share")
distributions = alt.Chart(tokens_long).mark_rect().encode(
    x=alt.X("token:O", axis=alt.Axis(labels=False, ticks=False)), y=alt.Y("position:O", axis=alt.Axis(labels=False)),
    color=alt.Color("share:Q", scale=alt.Scale(scheme="blues")), tooltip=["position:O", "token:O", alt.Tooltip("share:Q", format=".3f")],
).properties(title="(a) distribution at each position", width=pg.PANEL_WIDTH, height=pg.PANEL_WIDTH)
sinusoids = pg.classical_mds(pg.pairwise_distances(pg.sinusoidal_encoding(32, 64))).coords
pg.finish_chart(
    pg.panel_grid([distributions, pg.heatmap_chart(D, title="(b) Hellinger distances"),
                   position_map(P, "(c) P_MDS, classical MDS"), position_map(sinusoids, "(d) sinusoidal encoding")])
    .resolve_scale(color="independent"),
    description="Four panels: per-position token distributions, their Hellinger distance matrix, the positions placed "
                "by classical MDS (a ring), and the sinusoidal encoding placed the same way (a spiral-like curve).",
)

# %% [markdown]
# On this corpus the geometry *is* a ring, and MDS recovers it; the sinusoids trace a
# different curve through the same 32 positions. Whether real text has such a geometry, and
# whether an encoding that copies it helps a model, is what the chapters test.
#
# (sec-intro-claims)=
# ## The claims and the book's verdicts
#
# | Claim | The book's answer | Evidence |
# |---|---|---|
# | **P1, Theorem 1.** Without a positional signal a transformer is permutation-equivariant. | Holds exactly, to rounding; a position-free encoder stays at chance on order-sensitive tasks, and a causal mask alone breaks the symmetry. | {doc}`02_permutation_equivariance` |
# | **P1.** Positions have a statistical geometry: Hellinger distances between per-position token distributions. | Yes, but on real text most of the plug-in distance is sampling noise; a calibrated correction is needed before any distance is read. | {doc}`03_statistical_geometry`, {doc}`appendix_calibration` |
# | **P1, Proposition 6, Algorithm 1.** $P_{\mathrm{MDS}}$ is the optimal encoding, judged by stress. | Exact at full rank, because the chord Hellinger distance is Euclidean; at low rank a stress-optimal embedding (SMACOF) fits better, and raw stress mostly measures scale. | {doc}`04_mds_and_stress` |
# | **P1, Theorem 4.** Training separates positions. | P1's check cannot fail; a probe that can fail confirms separation where the theorem's conditions hold, at every strength on synthetic data, only modestly on SST-2, where a strong pull erases the contrast; in a trained model, merging two positions costs more the more their token distributions differ. | {doc}`05_positional_separation`, {doc}`10_constructive` |
# | **P1.** Sinusoids are near-optimal for near-stationary corpora. | True on a synthetic ring; SST-2 and IMDB are far from stationary, so the premise fails on text. | {doc}`06_sinusoids_circulant` |
# | **P1, Observation 8.** The optimal encoding has low effective rank. | Literally rank $n - 1$; after the noise correction a few dimensions on the synthetic corpus, dozens on SST-2 and over a hundred on IMDB, where a trained rank-2 table keeps about 5% of what a free table gains. | {doc}`07_low_rank` |
# | **P1, Conjecture 5.** Trained encodings are monotone in offset (proved in the NTK regime). | Trained tables are far more monotone than random, not monotone, and so is the proof's own linearised model trained by gradient descent. | {doc}`08_monotonicity_ntk` |
# | **P1.** The positional geometry peaks at layer 3 of BERT. | Not reproduced with MiniLM: raw projected stress measures the scale of each layer's maps. | {doc}`09_layers` |
# | **P1.** An encoding that fits the corpus geometry trains better. | Only among tables of one spectrum: at matched rank and norm a table that fits trains better than the same rows permuted, but at the same scale sinusoids and learned tables train far better than any corpus table. | {doc}`10_constructive` |
# | **P2.** A causal decoder without encodings shows an adjacency pattern after its first layer. | Reproduced; its source is causal averaging, whose cosines have a closed form; the small models studied here learn their tasks only partly. | {doc}`11_nope_adjacency` |
#
# The last two chapters turn to practice: {doc}`12_audit` asks the book's question of your
# own corpus and model with one command, and {doc}`13_choosing_an_encoding` says what the
# evidence means when you choose an encoding.
#
# ## Before you start
#
# You need linear algebra (eigenvectors, Euclidean distance), probability (a distribution, a
# sample, a 95% interval), Python with numpy, and an idea of what attention computes. The
# {doc}`glossary` defines the book's terms. Every chapter opens with its question and its
# short answer, builds its central object in a few lines of numpy in front of you, checks it
# against the library, and then uses the library; caveats are gathered in one "Limits" box.
#
# ## How to run a chapter
#
# - **Online**: read it here; every number and chart was computed by the code above it.
# - **Binder**: the rocket button at the top of a chapter opens it in JupyterLab with
#   everything installed; run the cells, change them, run them again.
# - **Colab**: the same button opens it in Google Colab; the first (hidden) cell installs
#   `posgeo` there.
# - **Locally**: clone the repository and run `make book` (it creates `.venv`, installs
#   everything, runs every chapter and builds this book), or open a chapter with
#   `.venv/bin/jupyter lab book/03_statistical_geometry.ipynb`. The corpora come from the
#   Hugging Face hub, or from a local folder named by `POSGEO_DATA_DIR`.
#
# Every chapter runs in a few minutes on a laptop's CPU. The tools the chapters share live
# in the companion package `posgeo` ({doc}`api_reference`); the code one chapter needs lives
# in that chapter.
#
# ## Exercises
#
# 1. **Build the pipeline for sentences.** Write a function that takes a list of sentences,
#    splits them into words, and returns the matrix of per-position word distributions for
#    the first $n$ positions (skip sentences shorter than a position). Apply it to
#    `["the cat sat", "the dog ran", "a cat ran"]` with $n = 3$, compute the Hellinger
#    matrix, and say which two positions are farthest apart and why.
#
# ```{admonition} Solution
# :class: dropdown
# ```python
# def word_marginals(sentences, n):
#     words = sorted({w for s in sentences for w in s.split()})
#     index = {w: k for k, w in enumerate(words)}
#     counts = np.zeros((n, len(words)))
#     for s in sentences:
#         for i, w in enumerate(s.split()[:n]):
#             counts[i, index[w]] += 1
#     return counts / counts.sum(axis=1, keepdims=True)
#
# D = pg.hellinger_matrix(word_marginals(["the cat sat", "the dog ran", "a cat ran"], 3))
# ```
# Position 0 holds "the" twice and "a" once; position 2 holds "sat" once and "ran" twice.
# They share no word, so their Bhattacharyya coefficient is 0 and $d_H = 1$, the largest
# possible: positions 0 and 2 are farthest apart (and so are 0 and 1, which share no word
# either). Positions 1 and 2 share none too: all three distances are 1. A corpus whose
# positions never share a word is a regular simplex, with no order at all.
# ```
#
# 2. **Modify and predict.** The synthetic corpus has a knob, `nonstationarity=` (0.5 by
#    default), that mixes a component changing along the sequence into the ring. Predict
#    what happens to the share of the MDS spectrum held by the first two eigenvalues (the
#    ring's plane) when the knob goes from 0 to 2, then rerun the pipeline with
#    `pg.load_corpus("synthetic", n_sequences=4000, nonstationarity=k)` and check.
#
# ```{admonition} Solution
# :class: dropdown
# The ring lives in two dimensions; the non-stationary component adds others. The share of
# the positive spectrum in the first two eigenvalues falls from 0.83 at knob 0 to 0.71 at
# 0.5 and 0.61 at 2: the more the statistics drift along the sequence, the less the
# geometry is a circle, which is the premise {doc}`06_sinusoids_circulant` examines.
# ```
#
# 3. **Why the sinusoids separate positions.** With `P = pg.sinusoidal_encoding(512, 768)`
#    (BERT-base's size) and `D = pg.pairwise_distances(P)`, find the smallest distance
#    between two rows and the pairs that attain it. Why does every row have the same norm,
#    and why does $D_{ij}$ depend only on $|i - j|$?
#
# ```{admonition} Solution
# :class: dropdown
# Row $m$ holds the $d/2$ pairs $(\sin m\omega_k, \cos m\omega_k)$, each of unit length, so
# $\lVert p_m\rVert^2 = d/2$ and every norm is $\sqrt{384} = 19.60$. Expanding,
# $\lVert p_m - p_n\rVert^2 = \sum_k 2\bigl(1 - \cos((m - n)\omega_k)\bigr)$, a function of
# the offset alone. The smallest off-diagonal distance is 4.523, at offset 1 (all 511 pairs
# of neighbours), and the largest 24.10, at offset 510: every row differs from every other,
# with a margin of 4.5 against norms of 19.6.
# ```

# %% tags=["remove-cell"]
# The numbers the solutions quote, recomputed (half a unit of the last quoted digit).
def word_marginals(sentences, n):
    words = sorted({w for s in sentences for w in s.split()})
    index = {w: k for k, w in enumerate(words)}
    counts = np.zeros((n, len(words)))
    for s in sentences:
        for i, w in enumerate(s.split()[:n]):
            counts[i, index[w]] += 1
    return counts / counts.sum(axis=1, keepdims=True)


W = pg.hellinger_matrix(word_marginals(["the cat sat", "the dog ran", "a cat ran"], 3))
assert np.allclose(W[np.triu_indices(3, 1)], 1)
shares = {}
for knob in (0.0, 0.5, 2.0):
    c = pg.load_corpus("synthetic", n_sequences=4000, nonstationarity=knob, progress=False)
    lam = pg.classical_mds(pg.hellinger_matrix(pg.positional_marginals(c, 32, c.vocab_size))).eigenvalues
    shares[knob] = lam[:2].sum() / lam[lam > 0].sum()
assert [round(shares[k], 2) for k in (0.0, 0.5, 2.0)] == [0.83, 0.71, 0.61]
S = pg.pairwise_distances(pg.sinusoidal_encoding(512, 768))
i, j = np.triu_indices(512, 1)
nearest = np.isclose(S[i, j], S[i, j].min())
assert round(S[i, j].min(), 3) == 4.523 and nearest.sum() == 511 and set(j[nearest] - i[nearest]) == {1}
assert round(S[i, j].max(), 2) == 24.10 and (j - i)[np.argmax(S[i, j])] == 510
assert np.allclose(np.linalg.norm(pg.sinusoidal_encoding(512, 768), axis=1), np.sqrt(384))
assert np.allclose(S[1:, 1:], S[:-1, :-1])
# the pipeline cell's claims: the hand-built steps equal the library's, and P_MDS is exact
assert np.allclose(mu, pg.positional_marginals(corpus, 32, corpus.vocab_size), atol=1e-12)
assert np.allclose(D, pg.hellinger_matrix(mu), atol=1e-12) and pg.stress(P, D) < 1e-12

# %% [markdown]
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
