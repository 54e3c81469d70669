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
# # The Geometry of Positional Encodings
#
# A transformer reads a sentence as a *set* of tokens: attention and the feed-forward
# layers treat every position alike. Whatever it knows about word order it learns from a
# **positional signal**: an encoding added to the token embeddings (sinusoidal, learned),
# a rotation inside attention ({term}`RoPE`), a bias on the attention scores ({term}`ALiBi`), or, in a
# causal model with no encoding at all, something the causal mask itself creates.
#
# This book is an executable companion to two papers on the geometry of that signal.
# Every table and figure in it is computed by the code you see, with the companion package
# `posgeo`, on real corpora (SST-2 and IMDB) and on synthetic ones whose answer is known in
# advance. The numbers in the prose are read off those outputs, and a claim drawn from
# them is checked by an assertion in a cell, so the tests fail if it stops holding. The
# numbers in exercise solutions come from running the code each exercise names; in this
# chapter a cell below the exercises recomputes and checks them. The papers' own numbers
# appear only beside ours, for comparison: where ours differ, the text says so.
#
# ## What the book shows
#
# **P1, Cirrincione (2026), *On the Geometry of Positional Encodings in Transformers***
# {cite:p}`cirrincione2026geometry`:
#
# - **Necessity (Theorem 1).** A transformer without a positional signal is
#   {term}`permutation-equivariant <permutation equivariance>`: permute the input tokens and the outputs are permuted the
#   same way. It cannot solve any task whose answer depends on word order.
# - **Separation (Theorem 4).** Under generic conditions (the token statistics change
#   with position, the task is order-sensitive, attention is non-degenerate) every global
#   minimiser of the training loss gives distinct positions distinct vectors: training
#   never collapses two positions.
# - **The optimal encoding (Proposition 6, Algorithm 1).** Let $\mu_i$ be the distribution
#   of tokens at position $i$ of the corpus. A good encoding $P = (p_1, \dots, p_n)$ places
#   positions so that their Euclidean distances reproduce the *statistical* distances
#   between these distributions, measured by the {term}`Hellinger distance` (the chord distance
#   between the square-root distributions):
#
#   $$
#   d_H(\mu_i, \mu_j) = \sqrt{\tfrac{1}{2} \sum_{v} \left(\sqrt{\mu_i(v)} - \sqrt{\mu_j(v)}\right)^2}.
#   $$
#
#   How well an encoding does this is its **{term}`stress`**,
#
#   $$
#   \operatorname{stress}(P) = \frac{\sum_{i<j} \left(\lVert p_i - p_j \rVert - d_H(\mu_i, \mu_j)\right)^2}{\sum_{i<j} d_H(\mu_i, \mu_j)^2},
#   $$
#
#   which is $0$ exactly when the encoding is an isometric copy of the corpus geometry.
#   {term}`Classical multidimensional scaling (MDS) <classical MDS>` on the matrix of Hellinger distances builds
#   the best such encoding, $P_{\mathrm{MDS}}$.
# - **Why sinusoids work.** When the positional statistics change slowly and smoothly
#   (a near-stationary corpus), the Gram matrix that MDS diagonalises is close to
#   {term}`circulant <circulant matrix>`, and the eigenvectors of a circulant matrix are sinusoids: the encoding of
#   {cite:t}`vaswani2017attention` is then close to optimal.
# - **Low effective rank (Observation 8).** The optimal encoding has the rank of the
#   double-centred Gram matrix $B$, which is small for real corpora: $P = A B^\top$ with
#   $r(n + d)$ parameters instead of $n d$.
# - **Monotonicity (Conjecture 5, proved in the NTK regime).** If statistical distance
#   grows with the gap $|i - j|$, so does the distance between learned position vectors.
#
# **P2, Zuo, Guerzhoy and Guerzhoy (2024)** {cite:p}`zuo2024position`: a *causal*
# transformer with **no** positional encoding still knows where it is. Hidden states of
# nearby tokens are more similar than those of distant ones, an {term}`adjacency pattern <adjacent pattern>` that
# appears already at random initialisation and survives training, and from which position
# can be read off.
#
# ## How to read it
#
# Each chapter is a Jupyter notebook. Prose states a claim, a code cell computes the
# evidence, and the output (a table or a chart) sits right below it. The code calls small,
# tested functions of `posgeo`; their source and docstrings are in `companion/src/posgeo`.
# The outputs you read were produced by running the notebook from top to bottom, and the
# test suite re-runs every notebook and checks that it still produces exactly these
# outputs.
#
# ## How to run a chapter
#
# - **Locally.** From the repository root, `make book` creates `.venv`, installs everything,
#   executes every chapter and builds this book into `_build/html`; `make test` runs the
#   whole test suite. To run one chapter, open it with
#   `.venv/bin/jupyter lab book/03_statistical_geometry.ipynb`, or execute it in place with
#   `.venv/bin/jupyter nbconvert --to notebook --execute --inplace book/03_statistical_geometry.ipynb`.
#   The corpora are read from the Hugging Face hub, or from a local directory named by the
#   environment variable `POSGEO_DATA_DIR` (with `sst2/` and `imdb/` parquet files).
# - **Binder or Colab.** The rocket icon at the top of each page opens the chapter on
#   Binder (the whole environment) or on Google Colab. On Colab, the first code cell
#   installs `posgeo`; elsewhere it does nothing.

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

# %% [markdown]
# ## The companion package
#
# Everything the chapters compute goes through `posgeo`, in three parts:
#
# - **the library**, `import posgeo as pg`: one flat namespace of reusable tools (corpora
#   and marginals, the geometry estimators, Hellinger distances, MDS and stress, encodings,
#   a small transformer and its one training loop, metrics, pretrained models). Its
#   functions are pure (numpy arrays and torch tensors in, small frozen dataclasses out);
#   randomness enters only through an explicit `seed=` argument, so a chapter gives the same
#   numbers every time it runs;
# - **the experiments**, `from posgeo.experiments import <topic> as ex`: each chapter's
#   recipe (its settings, runs, tables and plots), built only from the library's public
#   names. In a chapter, `pg.` is a tool you can reuse and `ex.` is that chapter's recipe;
# - **the audit**, `posgeo.audit` and the `posgeo audit` command ({doc}`12_audit`).
#
# Here is the version this book was built with, and its public names, part by part:

# %%
import importlib

import pandas as pd
from IPython.display import display

import posgeo
import posgeo.audit
import posgeo.experiments

print(f"posgeo {posgeo.__version__}: {len(posgeo.__all__) - 1} names in the library namespace")

EXPERIMENTS = ("statistics", "calibration", "stress", "equivariance", "separation", "circulant", "lowrank", "ntk", "layers",
               "nope", "tasks", "constructive", "papers")  # in the order of the chapters
parts = [("library", f"posgeo ({m.__name__.removeprefix('posgeo.')})", m) for m in posgeo.LIBRARY_MODULES]
parts += [("library", "posgeo.validation", importlib.import_module("posgeo.validation"))]
parts += [("experiments", f"posgeo.experiments.{t}", importlib.import_module(f"posgeo.experiments.{t}")) for t in EXPERIMENTS]
parts += [("audit", "posgeo.audit", posgeo.audit)]
api = pd.DataFrame(
    [
        {"part": part, "module": name, "names": len(module.__all__), "public names": ", ".join(sorted(module.__all__))}
        for part, name, module in parts
    ]
).set_index(["part", "module"])
with pd.option_context("display.max_colwidth", None, "display.max_rows", None):
    display(api)

# %% [markdown]
# ## Summary
#
# - A transformer sees word order only through a positional signal: an added table
#   (sinusoidal or learned), a rotation of queries and keys (RoPE), a bias on the scores
#   (ALiBi), or the causal mask of a decoder. Without one it is permutation-equivariant
#   ({doc}`02_permutation_equivariance`).
# - P1 asks a good encoding to reproduce the statistical geometry of positions: the
#   Hellinger distances between the per-position token distributions of a corpus
#   ({doc}`03_statistical_geometry`), scored by stress and approximated by classical MDS
#   ({doc}`04_mds_and_stress`). The following chapters test its claims on separation
#   ({doc}`05_positional_separation`), sinusoids ({doc}`06_sinusoids_circulant`), low rank
#   ({doc}`07_low_rank`), monotonicity ({doc}`08_monotonicity_ntk`) and the layers of a
#   pretrained model ({doc}`09_layers`), and whether the encoding built from the corpus
#   trains a better model ({doc}`10_constructive`).
# - P2 shows that a causal decoder without any encoding still knows where it is: nearby
#   hidden states are more similar than distant ones ({doc}`11_nope_adjacency`).
# - `posgeo audit` asks the book's question of any corpus and model you bring, and writes
#   a self-contained report ({doc}`12_audit`).
# - Every table and figure in the book is computed by `posgeo`, the claims drawn from them
#   are asserted in the cells, the stored outputs are re-checked by the tests, and where
#   our numbers differ from the papers' the chapters say so and why.
#   The {doc}`glossary` defines the terms, the {doc}`bibliography` lists every cited work,
#   the {doc}`api_reference` documents every `posgeo` function and the {doc}`benchmarks`
#   page reports how fast they are against the obvious baselines.
#
# ## Exercises
#
# These warm-ups use the two formulas above with `pg.hellinger_matrix`,
# `pg.classical_mds`, `pg.stress_optimal_mds`, `pg.stress`, `pg.sinusoidal_encoding` and
# `pg.pairwise_distances` (after `import numpy as np` and `import posgeo as pg`).
#
# 1. Three positions have token distributions over a three-token vocabulary,
#    $\mu_0 = (\tfrac12, \tfrac12, 0)$, $\mu_1 = (0, \tfrac12, \tfrac12)$ and
#    $\mu_2 = (0, 0, 1)$. Compute their three Hellinger distances by hand, then with
#    `pg.hellinger_matrix(np.array([[.5, .5, 0], [0, .5, .5], [0, 0, 1]]))`. Which pair is
#    farthest apart, and why can no pair be farther?
#
# ```{admonition} Solution
# :class: dropdown
# $\mathrm{BC}(\mu_0, \mu_1) = \sqrt{\tfrac12 \cdot \tfrac12} = \tfrac12$, so
# $d_H = \sqrt{1 - \tfrac12} = 0.7071$; $\mathrm{BC}(\mu_1, \mu_2) = \sqrt{\tfrac12} = 0.7071$,
# so $d_H = \sqrt{1 - 0.7071} = 0.5412$; $\mathrm{BC}(\mu_0, \mu_2) = 0$, so $d_H = 1$.
# `pg.hellinger_matrix` returns the same matrix,
# `[[0, 0.7071, 1], [0.7071, 0, 0.5412], [1, 0.5412, 0]]` (rounded). Positions 0 and 2 are
# farthest apart: their supports are disjoint, the Bhattacharyya coefficient is 0, and
# $d_H = \sqrt{1 - \mathrm{BC}}$ cannot exceed 1 because $\mathrm{BC} \ge 0$.
# ```
#
# 2. Build an encoding with stress 0 for these three positions with
#    `P = pg.classical_mds(D).coords` ($D$ the matrix of exercise 1) and check it with
#    `pg.stress(P, D)`. What is the stress of $2P$? Can a one-dimensional encoding reach
#    stress 0 (try `pg.stress_optimal_mds(D, 1)`)?
#
# ```{admonition} Solution
# :class: dropdown
# Three points realise any triangle in the plane: `classical_mds` returns two positive
# eigenvalues (0.5087 and 0.0889; the third is 0 up to rounding) and `pg.stress(P, D)` is 0 up
# to rounding. If $P$ reproduces $D$ exactly, every distance of $cP$ is $c$ times the target,
# so $\operatorname{stress}(cP) = \sum (c D_{ij} - D_{ij})^2 / \sum D_{ij}^2 = (c - 1)^2$:
# `pg.stress(2 * P, D)` is 1. Stress as P1 defines it compares absolute distances, which is
# why {doc}`the MDS chapter <04_mds_and_stress>` also uses a scale-optimal version (`pg.stress(2 * P, D, scale="optimal")` is
# 0 up to rounding). On a line three points need the largest distance to equal the sum of
# the other two, and $0.7071 + 0.5412 = 1.2483 \ne 1$: no one-dimensional encoding is
# exact. The best line, `pg.stress_optimal_mds(D, 1).stress`, has stress 0.0115; the line of
# classical MDS, `pg.classical_mds(D, dim=1).stress`, 0.0195.
# ```
#
# 3. An additive table breaks the permutation symmetry only if its rows differ. With
#    `P = pg.sinusoidal_encoding(512, 768)` (BERT-base's size) and
#    `D = pg.pairwise_distances(P)`, find the smallest distance between two rows and the
#    pairs that attain it. Why does every row have the same norm, and why does $D_{ij}$
#    depend only on $|i - j|$?
#
# ```{admonition} Solution
# :class: dropdown
# Row $m$ holds the $d/2$ pairs $(\sin m\omega_k, \cos m\omega_k)$, each of unit length, so
# $\lVert p_m\rVert^2 = d/2$ and every norm is $\sqrt{384} = 19.60$. Expanding,
# $\lVert p_m - p_n\rVert^2 = \sum_k 2\bigl(1 - \cos((m - n)\omega_k)\bigr)$, a function of
# the offset alone: `np.allclose(D[1:, 1:], D[:-1, :-1])` is `True`. The smallest
# off-diagonal distance is 4.523, attained at offset 1 (by all 511 pairs of neighbours, up to
# rounding), and the
# largest is 24.10, at offset 510. All rows are distinct, so the sinusoidal table does break
# the symmetry, with a margin of 4.5 against norms of 19.6.
# ```
#
# The numbers these solutions quote, recomputed with the code they name (the output is
# folded, so as not to give the answers away):

# %% tags=["hide-output"]
import numpy as np

import posgeo as pg

D = pg.hellinger_matrix(np.array([[0.5, 0.5, 0], [0, 0.5, 0.5], [0, 0, 1]]))
mds = pg.classical_mds(D)
S = pg.pairwise_distances(pg.sinusoidal_encoding(512, 768))
i, j = np.triu_indices(512, 1)
nearest_pairs = np.isclose(S[i, j], S[i, j].min())
quoted = pd.DataFrame(
    [
        (1, "BC(mu_0, mu_1)", "0.5", 1 - D[0, 1] ** 2),
        (1, "BC(mu_1, mu_2)", "0.7071", 1 - D[1, 2] ** 2),
        (1, "BC(mu_0, mu_2)", "0", 1 - D[0, 2] ** 2),
        (1, "d_H(mu_0, mu_1)", "0.7071", D[0, 1]),
        (1, "d_H(mu_1, mu_2)", "0.5412", D[1, 2]),
        (1, "d_H(mu_0, mu_2)", "1", D[0, 2]),
        (2, "eigenvalue 1", "0.5087", mds.eigenvalues[0]),
        (2, "eigenvalue 2", "0.0889", mds.eigenvalues[1]),
        (2, "eigenvalue 3", "0", mds.eigenvalues[2]),
        (2, "stress(P, D)", "0", pg.stress(mds.coords, D)),
        (2, "stress(2P, D)", "1", pg.stress(2 * mds.coords, D)),
        (2, "stress(2P, D), scale-optimal", "0", pg.stress(2 * mds.coords, D, scale="optimal")),
        (2, "d_H(mu_0, mu_1) + d_H(mu_1, mu_2)", "1.2483", D[0, 1] + D[1, 2]),
        (2, "best line (SMACOF)", "0.0115", pg.stress_optimal_mds(D, 1).stress),
        (2, "line of classical MDS", "0.0195", pg.classical_mds(D, dim=1).stress),
        (3, "row norm, smallest", "19.60", np.linalg.norm(pg.sinusoidal_encoding(512, 768), axis=1).min()),
        (3, "row norm, largest", "19.60", np.linalg.norm(pg.sinusoidal_encoding(512, 768), axis=1).max()),
        (3, "smallest distance", "4.523", S[i, j].min()),
        (3, "pairs at the smallest distance", "511", nearest_pairs.sum()),
        (3, "their offset", "1", np.unique(j[nearest_pairs] - i[nearest_pairs]).item()),
        (3, "largest distance", "24.10", S[i, j].max()),
        (3, "its offset", "510", (j - i)[np.argmax(S[i, j])]),
    ],
    columns=["exercise", "quantity", "quoted", "computed"],
).set_index(["exercise", "quantity"])
# six significant digits; a value within 1e-12 of 0 is float64 rounding of an exact 0, whose
# digits differ between machines, and shows as 0
quoted.assign(computed=quoted["computed"].map(lambda x: f"{round(float(x), 12) + 0.0:.6g}"))

# %%
decimals = quoted["quoted"].str.partition(".")[2].str.len()
tolerance = np.where(decimals > 0, 0.5 * 10.0 ** -decimals, 1e-9)  # half a unit of the last quoted digit; exact otherwise
assert (np.abs(quoted["computed"].astype(float) - quoted["quoted"].astype(float)) <= tolerance).all()
assert sorted(np.unravel_index(np.argmax(D), D.shape)) == [0, 2] and (mds.eigenvalues[:2] > 0).all()  # 0 and 2 farthest apart
assert np.allclose(S[1:, 1:], S[:-1, :-1])  # D_ij depends on |i - j| only
len(quoted)

# %% [markdown]
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
