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
# # What the layers do to positions
#
# The previous chapters scored position tables as they enter the model. Inside, every layer
# reads its input through query and key maps, and those maps decide which distinctions
# between positions attention can see. P1 {cite:p}`cirrincione2026geometry` pushes a
# positional encoding through the attention matrices of each layer of a pretrained BERT
# {cite:p}`devlin2019bert`, scores the result against the corpus geometry by stress, and
# reports a sharp peak at layer 3. It reads the peak as an aggressive reorganisation of the
# positional signal, in line with the syntactic specialisation of BERT's middle layers
# {cite:p}`tenney2019bert`.
#
# This chapter defines that measurement precisely, computes it per layer and per head for
# the pretrained all-MiniLM-L6-v2 {cite:p}`wang2020minilm,reimers2019sbert` (6 layers, 12
# heads of size 32, a BERT architecture) against SST-2 ($n = 48$) and IMDB ($n = 510$), and
# compares it with a second view: the positional component of the hidden states
# themselves. The layer-wise *adjacency* and *probing* views of positional information are
# in {doc}`11_nope_adjacency`.

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
import numpy as np
import pandas as pd

import posgeo as pg
from posgeo.experiments import layers as ex

pg.notebook_setup()

# %% [markdown]
# The model, the corpora and their geometries (plug-in and noise-corrected, {doc}`the geometry chapter <03_statistical_geometry>`).
# The profile decides the model: all-MiniLM-L6-v2 in the default `small` profile,
# `bert-base-uncased`, P1's model, in the `full` profile (see the end of the chapter).

# %%
settings = ex.layers_settings()
model = pg.load_pretrained(settings.model)
corpora = {name: pg.load_corpus(name, "train") for name in settings.n_positions}
geometries = {
    name: pg.corpus_geometry(corpora[name], n, min_count=1000) for name, n in settings.n_positions.items()
}
pd.Series(
    {
        "layers": model.config.num_hidden_layers,
        "heads": model.config.num_attention_heads,
        "d_model": model.config.hidden_size,
        "head size": model.config.hidden_size // model.config.num_attention_heads,
        "positions (table)": model.config.max_position_embeddings,
    },
    name=settings.model or pg.MINILM,
)

# %% [markdown]
# ## The positional input of the first layer
#
# A BERT embedding layer adds word, position and token-type vectors and normalises the sum:
#
# $$
# x_{t,i} = \mathrm{LN}(w_t + p_i + s_0) = \gamma \odot \frac{w_t + p_i + s_0 - m_{t,i}\mathbf 1}{\sigma_{t,i}} + \beta,
# $$
#
# with $m_{t,i}$ and $\sigma_{t,i}$ the mean and standard deviation of the sum over the $d$
# coordinates. Centring is linear, so the term that depends on the position is
# $\gamma \odot (p_i - \bar p_i \mathbf 1) / \sigma_{t,i}$. Only the division couples
# position and token, through $\sigma_{t,i}$, which varies little. Replacing it by one
# constant $\bar\sigma$, the root mean square of $\sigma$ over all (token, position) pairs,
# gives the **{term}`positional input`**
#
# $$
# \Pi_i = \gamma \odot (p_{i+1} - \bar p_{i+1} \mathbf 1)/\bar\sigma ,
# $$
#
# (`pg.positional_input`; our position $i$ is the model's row $i + 1$, after `[CLS]`). This
# choice, rather than the raw table $p_i$ or $\mathrm{LN}(p_i)$ alone, is the configuration
# the first layer actually receives, at the scale it receives it: the LayerNorm gain
# $\gamma$ reweights coordinates (which changes distances) and $\bar\sigma$ sets the scale
# (which raw stress depends on), while normalising $p_i$ on its own would divide each row
# by its own norm, something the model never does.
#
# How good is the approximation? For the 500 most frequent SST-2 tokens, the embedding
# layer's real output at the 48 positions, centred over positions, against $\Pi$ centred the
# same way (`ex.positional_input_error`):

# %%
frequent = ex.frequent_tokens(corpora["sst2"].sequences.tokens, 500, vocab_size=corpora["sst2"].vocab_size)
linearisation = ex.positional_input_error(model, settings.n_positions["sst2"], frequent)
linearisation

# %% tags=["stochastic"] tolerance={"atol": 0, "rtol": 1e-06}
# No training here, but float32 rounding: other CPU kernel paths change the trailing digits
# (by 7e-8 of the value), so compared to 1e-6 of it.
assert linearisation["median"] < 0.1 and linearisation["median cosine"] > 0.99
assert linearisation[["median", "90%", "max"]].round(2).tolist() == [0.05, 0.11, 0.19]  # the text's 5%, 11%, 19%
linearisation["median"]

# %% [markdown]
# The positional configuration seen through a token agrees with $\Pi$ to within 5% for
# the median token (11% at the 90th percentile, 19% at worst), mostly in scale.
#
# ## Projected stress
#
# Layer $\ell$ compares positions through its query and key maps $W_Q^\ell, W_K^\ell$
# ($d \times d$; head $h$ owns $d_h = 32$ of the output coordinates). We push $\Pi$ through
# both and concatenate,
#
# $$
# Z^\ell = \bigl[\,\Pi\, W_Q^{\ell\top} \;\big|\; \Pi\, W_K^{\ell\top}\,\bigr] \in \mathbb R^{n \times 2d},
# \qquad
# \lVert z^\ell_i - z^\ell_j\rVert^2 = \lVert W_Q^\ell(\pi_i - \pi_j)\rVert^2 + \lVert W_K^\ell(\pi_i - \pi_j)\rVert^2 ,
# $$
#
# so two positions are far apart in $Z^\ell$ when the layer's queries or keys can tell them
# apart. Biases add the same vector to every row and drop out of all distances. The
# **{term}`projected stress`** of layer $\ell$ is $\mathrm{stress}(Z^\ell, D)$ against the corpus
# distances $D$, raw or scale-optimal (`pg.projected_stress`); for head $h$, the same
# with the head's $d_h$ columns of each map. As in P1, the *same* $\Pi$ is pushed through
# every layer's maps: the measurement describes the maps, how each layer's attention would
# see the positional signal if it arrived unchanged. What actually arrives at layer $\ell$
# is the second view, below.
#
# A projection that changes nothing must change nothing: with the identity map the
# projected stress *is* the stress (exactly; the unit tests check it for arbitrary inputs).

# %%
D_sst2 = geometries["sst2"].distances
Pi_sst2 = pg.positional_input(model, settings.n_positions["sst2"])
identity_check = pd.Series(
    {
        "stress(Pi, D)": pg.stress(Pi_sst2, D_sst2),
        "projected stress, identity map": pg.projected_stress(Pi_sst2, D_sst2, np.eye(Pi_sst2.shape[1])),
    }
)
assert identity_check.iloc[0] == identity_check.iloc[1]
identity_check

# %% [markdown]
# ## Layer by layer
#
# Projected stress of every layer (layer 0: $\Pi$ itself), on both corpora, against the
# plug-in distances (P1's target) and the noise-corrected ones. `distance ratio` is the
# mean distance between projected positions over the mean corpus distance.

# %%
TARGETS = {"plug-in": "distances", "corrected": "hybrid"}
layer_tables = {
    (name, target): pg.layer_stress_table(model, getattr(g, attr))
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
by_layer = pd.concat(layer_tables, axis=1, names=["corpus", "target", "measure"])
by_layer

# %% [markdown]
# Two different stories:
#
# - **Raw stress** runs from tens to hundreds of thousands (38 to 218,168) and peaks at
#   **layer 1**. It follows the distance ratio rank for rank: the projected positions lie
#   7 to 690 times farther apart than Hellinger distances allow, and the layer whose maps stretch the most scores
#   worst. Raw projected stress measures the norms of $W_Q$ and $W_K$, not a geometry.
# - **Scale-optimal stress** compares shapes. It varies far less across layers, and its
#   maximum is not at layer 1 ({numref}`fig-ch9-projected`).

# %%
raw_rank = by_layer.xs("raw", axis=1, level="measure").drop(index=0).rank()
ratio_rank = by_layer.xs("distance ratio", axis=1, level="measure").drop(index=0).rank()
assert (raw_rank == ratio_rank).all().all()
# the text's ranges: raw stress 38 to 218,168, projected distances 7 to 690 times the corpus's
for measure, quoted in (("raw", [38, 218168]), ("distance ratio", [7, 690])):
    values = by_layer.xs(measure, axis=1, level="measure").to_numpy()
    assert np.round([values.min(), values.max()]).tolist() == quoted
peaks = pd.DataFrame(
    {
        measure: by_layer.xs(measure, axis=1, level="measure").drop(index=0).idxmax()
        for measure in ("raw", "optimal")
    }
).rename(columns=lambda m: f"peak layer ({m})")
peaks

# %% mystnb={"figure": {"caption": "Scale-optimal projected stress (log scale) of each layer of MiniLM (layer 0: the positional input itself), on SST-2 (vermillion) and IMDB (green), against the plug-in distances (solid) and the noise-corrected ones (dashed). Hover a point for its value.", "name": "fig-ch9-projected"}}
assert (peaks["peak layer (raw)"] == 1).all()
assert (peaks["peak layer (optimal)"] >= 4).all()
ex.plot_layer_stress(
    {f"{name}, {target}": t for (name, target), t in layer_tables.items()},
    title="scale-optimal projected stress",
    log=True,
)

# %% [markdown]
# ### Is the variation across layers large?
#
# A yardstick: the projected stress of $\Pi$ under *random* Gaussian maps of the same
# shape (two $d \times d$ maps, concatenated; `ex.random_map_stress`, 20 draws). A layer
# whose value lies inside this band does to the positional geometry what a map without
# structure does, and that is almost nothing. A Gaussian map from $d$ to $2d$ dimensions
# is close to an isometry up to scale: each squared distance of the image is a sum of
# $2d$ independent terms and concentrates around a common multiple of the original one,
# which scale-optimal stress ignores. So the band is, up to a small spread, the stress of
# $\Pi$ itself (layer 0 of the table above); it is a yardstick for "does this layer change
# the input's stress", not a model of unstructured attention.

# %%
d_model = model.config.hidden_size
bands = {
    (name, target): ex.random_map_stress(pg.positional_input(model, g.n_positions), getattr(g, attr), (d_model, d_model))
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
yardstick = pd.DataFrame(
    {
        key: {
            "random maps, min": band.min(),
            "random maps, max": band.max(),
            "layers, min": layer_tables[key]["optimal"].drop(index=0).min(),
            "layers, max": layer_tables[key]["optimal"].drop(index=0).max(),
        }
        for key, band in bands.items()
    }
).T
yardstick

# %% [markdown]
# On every target the band's centre lies within 2% of $\Pi$'s own stress, and within a
# tenth of the spread across layers (the first cell below), so "above the band" means
# "worse than the input". Against the plug-in targets, *every* layer lies above it: each layer's maps move
# the positional geometry further from the plug-in target than $\Pi$ already is, most in
# layers 4–6. Against the noise-corrected SST-2 target every layer lies above it too.
# Against the noise-corrected IMDB target two layers (4 and 6) fall below the band, that
# is, closer to the corpus geometry than $\Pi$ itself, and the others lie in it or above it. The effects
# are real but small, a few hundredths of scale-optimal stress, far from a "very high
# peak".

# %%
band_vs_input = pd.DataFrame(
    {
        key: {"input (layer 0)": layer_tables[key].loc[0, "optimal"], "random maps, mean": band.mean()}
        for key, band in bands.items()
    }
).T
band_vs_input["centre - input"] = band_vs_input["random maps, mean"] - band_vs_input["input (layer 0)"]
assert (band_vs_input["centre - input"].abs() < 0.02 * band_vs_input["input (layer 0)"]).all()
assert (band_vs_input["centre - input"].abs() < 0.1 * (yardstick["layers, max"] - yardstick["layers, min"])).all()
band_vs_input

# %%
plug = yardstick.xs("plug-in", level=1)
assert (plug["layers, min"] > plug["random maps, max"]).all()
corrected = yardstick.xs("corrected", level=1)
assert corrected.loc["sst2", "layers, min"] > corrected.loc["sst2", "random maps, max"]  # every layer above the band
below = layer_tables[("imdb", "corrected")]["optimal"].drop(index=0) < corrected.loc["imdb", "random maps, min"]
assert below[below].index.tolist() == [4, 6]  # "two layers (4 and 6) fall below the band"
(yardstick["layers, max"] - yardstick["layers, min"]).rename("spread across layers")

# %% [markdown]
# ### Head by head
#
# The same measurement per head ($2 d_h = 64$ projected coordinates), scale-optimal,
# against the plug-in distances:

# %% mystnb={"figure": {"caption": "Scale-optimal projected stress of every head (columns) of every layer (rows) against the plug-in distances, SST-2 left and IMDB right, on one colour scale. Hover a cell for its value.", "name": "fig-ch9-heads"}}
head_tables = {name: ex.head_stress_table(model, g.distances) for name, g in geometries.items()}
ex.plot_head_stress(head_tables)

# %%
head_summary = pd.concat(
    {name: pd.DataFrame({"mean": t.mean(axis=1), "max": t.max(axis=1)}) for name, t in head_tables.items()}, axis=1
)
head_summary

# %% [markdown]
# Individual heads differ more than layers ({numref}`fig-ch9-heads`): a few heads, most of them in the first layer,
# distort the positional geometry about twice as much as the typical head, and the
# per-head mean is highest in layer 1. Concatenating the heads of a layer averages these
# differences away.

# %%
assert all(t.mean(axis=1).idxmax() == 1 for t in head_tables.values())
assert all((t.max(axis=1) > 1.5 * t.median(axis=1)).any() for t in head_tables.values())
pd.Series({name: t.stack().idxmax() for name, t in head_tables.items()}, name="(layer, head) with the largest stress")

# %% [markdown]
# ### P1's variant: projecting the sinusoidal encoding
#
# P1 describes its layer-wise analysis as projecting the *sinusoidal* encoding through the
# attention matrices, although BERT never sees sinusoids. The same table with
# `encoding=pg.sinusoidal_encoding(n, d)` in place of $\Pi$:

# %%
sinusoid_tables = {
    (name, target): pg.layer_stress_table(
        model, getattr(g, attr), encoding=pg.sinusoidal_encoding(g.n_positions, model.config.hidden_size)
    )
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
sinusoid_peaks = pd.DataFrame(
    {
        measure: pd.concat(sinusoid_tables, axis=1).xs(measure, axis=1, level=2).drop(index=0).idxmax()
        for measure in ("raw", "optimal")
    }
).rename(columns=lambda m: f"peak layer ({m})")
sinusoid_peaks

# %% [markdown]
# With sinusoids the raw peak is again layer 1 (the map norms), and the scale-optimal
# stress is nearly flat, with its maximum in different layers on different targets. No
# variant of the measurement puts MiniLM's peak at layer 3, and none yields a peak that
# is not explained either by the norms of the maps (raw stress) or by differences of a
# few hundredths (scale-optimal stress).

# %%
assert (sinusoid_peaks["peak layer (raw)"] == 1).all()
assert (peaks != 3).all().all() and (sinusoid_peaks != 3).all().all()
pd.concat(sinusoid_tables, axis=1).xs("optimal", axis=1, level=2).agg(["min", "max"])

# %% [markdown]
# ## The second view: the positional component of the hidden states
#
# Projected stress pushes the *input* positional signal through later layers' maps. What
# reaches a layer is different: the residual stream after $\ell$ layers mixes position with
# content. Averaging the hidden state at each position over many sequences removes most of
# the content and leaves the positional component
# $\bar h^\ell_i = \mathbb E[h^\ell_{i+1}]$ (`pg.positional_hidden_states`: sequences
# with at least $n$ tokens, cut to $n$, wrapped in `[CLS] ... [SEP]`; every position
# averaged over the same 256 SST-2 sentences, or the same 32 IMDB reviews, with cached
# results). Its stress, layer by layer (layer 0: the embedding output):

# %% tags=["stochastic"] tolerance={"atol": 0.0001, "rtol": 1e-06}
# Float32 rounding of the hidden states: other CPU kernel paths moved the last digit shown
# (5163.8589 -> 5163.8590), so compared to 1e-6 of the value plus one unit of the last digit.
hidden = {
    name: pg.positional_hidden_states(
        model, corpora[name], g.n_positions, max_sequences=settings.hidden_sequences[name],
        batch_size=settings.batch_size, model_name=settings.model or pg.MINILM,
    )
    for name, g in geometries.items()
}
hidden_tables = {
    (name, target): ex.hidden_stress_table(hidden[name], getattr(g, attr))
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
pd.concat(hidden_tables, axis=1, names=["corpus", "target", "measure"])

# %% mystnb={"figure": {"caption": "Scale-optimal stress (log scale) of the positional component of the hidden states (the mean hidden state at each position) after each layer (layer 0: the embedding output), on SST-2 (vermillion) and IMDB (green), against the plug-in (solid) and noise-corrected (dashed) distances.", "name": "fig-ch9-hidden"}} tags=["stochastic"] tolerance={"atol": 0.001, "rtol": 1e-06}
# Float32 rounding of the hidden states, as in the table above; the chart keeps 4 significant
# digits, which that rounding can flip: compared to 0.001 (ten units of the fourth digit of
# these stresses below 1) plus 1e-6.
ex.plot_layer_stress(
    {f"{name}, {target}": t for (name, target), t in hidden_tables.items()},
    title="positional component of the hidden states",
    log=True,
)

# %% [markdown]
# After the first layer the raw stress of the hidden states *falls* through the network
# (the table; {numref}`fig-ch9-hidden` shows the scale-optimal stress):
# the mean hidden states of different positions draw together (the positional component
# shrinks), until at the last layer their raw stress is of order 1 (0.5 to 4.7; 230 against
# corrected IMDB, whose distances are small). The scale-optimal stress against the plug-in distances grows with depth on SST-2,
# with its maximum at the last layer: the deeper the layer, the less its positional
# component resembles the (noisy) plug-in geometry; on IMDB it changes little. Against the
# noise-corrected (hybrid) distances SST-2 behaves the same way, moving away with depth
# (0.036 at the embedding output, 0.045 in layers 4–5, 0.073 at the last), while IMDB's
# layers come slightly closer (0.56 to 0.50), but every IMDB value sits at the stress of
# random vectors against the same distances (0.56, {doc}`the MDS chapter <04_mds_and_stress>`): on IMDB this view cannot
# tell the layers from noise. Only on IMDB against the plug-in distances is the maximum in
# a middle layer (layer 3, 0.036, against 0.035 at layer 4 and at the last), a difference
# of one or two thousandths that 32 reviews cannot resolve; nowhere is there a clear peak in the
# early-middle layers.
#
# (The 32 IMDB reviews leave sampling noise in the means at every position; the IMDB rows
# of this view are the least reliable numbers of the chapter. The full profile averages
# 1,024 reviews.)

# %% tags=["stochastic"] tolerance={"atol": 0.0001, "rtol": 1e-06}
# Rows of the hidden-state table above, so compared to its tolerance (float32 rounding of the hidden
# states: emulated arm64 moved 4347.0453 to 4347.0454).
hidden_raw = pd.concat(hidden_tables, axis=1).xs("raw", axis=1, level=2)
assert (hidden_raw.loc[model.config.num_hidden_layers] < hidden_raw.loc[1]).all()
sst2_opt = hidden_tables[("sst2", "plug-in")]["optimal"]
assert sst2_opt.idxmax() == model.config.num_hidden_layers
corrected_opt = pd.concat(hidden_tables, axis=1).xs("optimal", axis=1, level=2).xs("corrected", axis=1, level=1)
assert corrected_opt.loc[0, "sst2"] < corrected_opt.loc[4:5, "sst2"].min() and corrected_opt["sst2"].idxmax() == model.config.num_hidden_layers
assert corrected_opt["imdb"].iloc[-1] < corrected_opt.loc[0, "imdb"] and (corrected_opt["imdb"] > 0.45).all()
imdb_plug = hidden_tables[("imdb", "plug-in")]["optimal"]
assert imdb_plug.idxmax() == 3 and imdb_plug.max() - imdb_plug.loc[4:].max() < 0.002  # "one or two thousandths"
assert hidden_raw.loc[model.config.num_hidden_layers].round(1).tolist() == [0.5, 3.1, 4.7, 229.5]  # "0.5 to 4.7; 230"
hidden_raw.loc[[0, model.config.num_hidden_layers]]

# %% [markdown]
# ## Where is MiniLM's peak, and what would check P1's claim
#
# - **Raw projected stress** peaks at **layer 1** of MiniLM, on both corpora and both
#   targets, for the learned positional input and for sinusoids alike; it ranks layers
#   exactly by the scale of their query/key maps.
# - **Scale-optimal projected stress** varies little across layers; its maximum is in
#   layers 4–6, a few hundredths above the stress of $\Pi$ itself (where random maps,
#   near-isometries at this width, leave it).
# - **The hidden-state view** shows no clear early peak either (IMDB's plug-in maximum at
#   layer 3 is one or two thousandths above the later layers); on SST-2 the positional
#   component departs from the corpus geometry steadily with depth.
#
# P1's claim concerns BERT-base (12 layers, $d = 768$, heads of 64), a different network:
# MiniLM was distilled from a larger teacher and then fine-tuned for sentence embeddings,
# so its layer 3 need not correspond to BERT's. Nothing here refutes a layer-3 peak in
# BERT-base; it does show that the answer depends on the measure. A raw-stress peak is a
# statement about weight norms. To check the claim on BERT-base itself, run this chapter
# in the **full profile**, which loads `bert-base-uncased` from the Hugging Face hub (or
# its local cache) and uses larger hidden-state samples:
#
# ```bash
# POSGEO_PROFILE=full POSGEO_DATA_DIR=/path/to/data \
#     jupyter nbconvert --to notebook --execute book/09_layers.ipynb
# ```
#
# (on Colab: `import os; os.environ["POSGEO_PROFILE"] = "full"` in the first cell). All
# functions of this chapter accept any BERT-architecture model, so the tables and
# assertions are recomputed for 12 layers; assertions that encode MiniLM's findings (the
# raw peak at layer 1, the scale-optimal peak in late layers) will then fail loudly if
# BERT behaves differently, which is the point.

# %%
pd.DataFrame({p: vars(ex.layers_settings(p)) for p in ("small", "full")})

# %% [markdown]
# ## Summary
#
# - The positional input of a BERT layer stack is $\Pi = \gamma \odot (p - \bar p)/\bar\sigma$,
#   the linear part of the embedding LayerNorm; it matches the embedding layer's real
#   positional configuration to within 5% for the median token (19% at worst).
# - Projected stress pushes $\Pi$ through a layer's query and key maps and scores the
#   concatenated image against the corpus distances; the identity map gives the plain
#   stress exactly.
# - For MiniLM, raw projected stress peaks at layer 1 because it measures the scale of the
#   maps; scale-optimal stress varies by a few hundredths and is largest in layers 4–6,
#   slightly above the stress of $\Pi$ itself. Random maps of the same shape are
#   near-isometries and leave that stress where it is, so they add no separate yardstick.
#   Heads differ more than layers.
# - The hidden states' positional component drifts away from the corpus geometry with
#   depth (SST-2). P1's layer-3 peak for BERT-base is not reproduced by MiniLM under any
#   of these measures; checking it on BERT-base needs the full profile.
#
# ## Exercises
#
# 1. Show that raw projected stress can be made arbitrarily large or small by rescaling
#    $W_Q$ and $W_K$ in a way that leaves every attention score unchanged.
#
# ```{admonition} Solution
# :class: dropdown
# Attention scores are $q_i^\top k_j = \pi_i^\top W_Q^\top W_K \pi_j$ (plus bias terms).
# Replacing $W_Q$ by $c\,W_Q$ and $W_K$ by $W_K / c$ leaves $W_Q^\top W_K$, hence every
# score, unchanged, but scales the query half of $Z^\ell$ by $c$ and the key half by
# $1/c$. As $c \to \infty$ (or $0$) the projected distances, and the raw stress, grow
# without bound. Raw projected stress is therefore not a property of the attention
# function; the scale-optimal version is invariant to a common rescaling, though not to
# this rebalancing either. A fully invariant measure would use the bilinear form
# $W_Q^\top W_K$ itself.
# ```
#
# 2. Compute the per-head random-map band ($2 d_h = 64$ coordinates) for SST-2 and count
#    the heads above it.
#
# ```{admonition} Solution
# :class: dropdown
# `band = ex.random_map_stress(Pi_sst2, D_sst2, (32, 32), n_draws=50)` gives the band;
# `(head_tables["sst2"] > band.max()).sum().sum()` counts the heads above it. Narrow maps
# distort more than wide ones (a random 64-dimensional image of a 384-dimensional
# configuration loses more of its geometry than a 768-dimensional one), so the band lies
# higher than the layer band, and the comparison must be made at the same width.
# ```
#
# 3. Why does the hidden-state view use the same sequences at every position instead of
#    all sequences that reach each position?
#
# ```{admonition} Solution
# :class: dropdown
# With different samples per position, the mean at position $i$ carries the sampling noise
# of its own sample, independent across positions, and the number of sequences falls
# steeply with $i$ (on SST-2, fewer than 300 of 67,349 sentences reach position 48). The
# distances between mean hidden states would then grow with $i$ through noise alone,
# exactly the plug-in bias of {doc}`the geometry chapter <03_statistical_geometry>`. One common sample gives every position the same
# content, so differences between positions come from the positions. The price is that
# the sample consists of long sequences only.
# ```
#
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
