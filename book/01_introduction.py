# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
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
# a rotation inside attention (RoPE), a bias on the attention scores (ALiBi), or, in a
# causal model with no encoding at all, something the causal mask itself creates.
#
# This book is an executable companion to two papers on the geometry of that signal.
# Every number and every figure in it is computed by the code you see, with the
# companion package `posgeo`, on real corpora (SST-2 and IMDB) and on synthetic ones whose
# answer is known in advance. Nothing is copied from the papers: where our numbers differ
# from theirs, the text says so.
#
# ## What the book shows
#
# **P1, Cirrincione (2026), *On the Geometry of Positional Encodings in Transformers***
# {cite:p}`cirrincione2026geometry`:
#
# - **Necessity (Theorem 1).** A transformer without a positional signal is
#   *permutation-equivariant*: permute the input tokens and the outputs are permuted the
#   same way. It cannot solve any task whose answer depends on word order.
# - **Separation (Theorem 4).** Under generic conditions (the token statistics change
#   with position, the task is order-sensitive, attention is non-degenerate) every global
#   minimiser of the training loss gives distinct positions distinct vectors: training
#   never collapses two positions.
# - **The optimal encoding (Proposition 6, Algorithm 1).** Let $\mu_i$ be the distribution
#   of tokens at position $i$ of the corpus. A good encoding $P = (p_1, \dots, p_n)$ places
#   positions so that their Euclidean distances reproduce the *statistical* distances
#   between these distributions, measured by the Hellinger distance (the chord distance
#   between the square-root distributions):
#
#   $$
#   d_H(\mu_i, \mu_j) = \sqrt{\tfrac{1}{2} \sum_{v} \left(\sqrt{\mu_i(v)} - \sqrt{\mu_j(v)}\right)^2}.
#   $$
#
#   How well an encoding does this is its **stress**,
#
#   $$
#   \operatorname{stress}(P) = \frac{\sum_{i<j} \left(\lVert p_i - p_j \rVert - d_H(\mu_i, \mu_j)\right)^2}{\sum_{i<j} d_H(\mu_i, \mu_j)^2},
#   $$
#
#   which is $0$ exactly when the encoding is an isometric copy of the corpus geometry.
#   Classical multidimensional scaling (MDS) on the matrix of Hellinger distances builds
#   the best such encoding, $P_{\mathrm{MDS}}$.
# - **Why sinusoids work.** When the positional statistics change slowly and smoothly
#   (a near-stationary corpus), the Gram matrix that MDS diagonalises is close to
#   circulant, and the eigenvectors of a circulant matrix are sinusoids: the encoding of
#   {cite:t}`vaswani2017attention` is then close to optimal.
# - **Low effective rank (Observation 8).** The optimal encoding has the rank of the
#   double-centred Gram matrix $B$, which is small for real corpora: $P = A B^\top$ with
#   $r(n + d)$ parameters instead of $n d$.
# - **Monotonicity (Conjecture 5, proved in the NTK regime).** If statistical distance
#   grows with the gap $|i - j|$, so does the distance between learned position vectors.
#
# **P2, Zuo, Guerzhoy and Guerzhoy (2024)** {cite:p}`zuo2024position`: a *causal*
# transformer with **no** positional encoding still knows where it is. Hidden states of
# nearby tokens are more similar than those of distant ones, an *adjacency pattern* that
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
#   `.venv/bin/jupyter lab book/02_statistical_geometry.ipynb`, or execute it in place with
#   `.venv/bin/jupyter nbconvert --to notebook --execute --inplace book/02_statistical_geometry.ipynb`.
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
# Everything the chapters compute goes through `posgeo`. Its public functions are pure
# (numpy arrays and torch tensors in, small frozen dataclasses out); randomness enters only
# through an explicit `seed=` argument, so a chapter gives the same numbers every time it
# runs. Here is the version this book was built with, and its public names grouped by
# module:

# %%
from types import ModuleType

import pandas as pd
from IPython.display import display

import posgeo

print(f"posgeo {posgeo.__version__}")

modules = {
    name.lstrip("_"): module
    for name, module in sorted(vars(posgeo).items())
    if name.startswith("_") and isinstance(module, ModuleType) and hasattr(module, "__all__")
}
api = pd.DataFrame(
    [
        {"module": name, "names": len(module.__all__), "public names": ", ".join(sorted(module.__all__))}
        for name, module in modules.items()
    ]
).set_index("module")
with pd.option_context("display.max_colwidth", None, "display.max_rows", None):
    display(api)

# %% [markdown]
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
