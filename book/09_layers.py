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
# :::{admonition} In short
# :class: tip
# **The question.** P1 {cite:p}`cirrincione2026geometry` pushes a positional encoding
# through the query and key maps of each layer of a pretrained BERT {cite:p}`devlin2019bert`,
# scores the image against the corpus geometry by stress, and reports a sharp peak at
# layer 3, read as the layer that reorganises the positional signal. Is there such a peak,
# and what does it measure?
#
# **The book's answer.** The peak is not reproduced by all-MiniLM-L6-v2, a 6-layer BERT.
# Raw projected stress peaks at layer 1 and ranks the layers by the scale of their maps, not
# by what they do to the geometry ({ref}`raw stress <sec-ch09-raw>`). Scale-optimal stress
# varies across layers by a few hundredths, and random maps of the same shape, being
# near-isometries, leave it where it is ({ref}`the shape <sec-ch09-shape>`). On SST-2 the
# positional component of the hidden states drifts away from the corpus geometry with depth,
# with no early peak ({ref}`the hidden states <sec-ch09-hidden>`).
#
# **You will learn** to extract the positional input of a BERT layer stack, push it through
# a layer's query and key maps and score the image, and tell a statement about weight norms
# from one about geometry.
# :::
#
# Every layer compares positions through its query and key maps, which decide what
# distinctions between positions attention can see; P1 links its layer-3 peak to the
# syntactic specialisation of BERT's middle layers {cite:p}`tenney2019bert`. We make the
# measurement precise, compute it per layer and per head for all-MiniLM-L6-v2
# {cite:p}`wang2020minilm,reimers2019sbert` against the SST-2 ($n = 48$ positions) and IMDB
# ($n = 510$) geometries, and compare it with the positional component of the hidden states.
# Adjacency and probing views are in
# {doc}`the chapter on causal transformers <11_nope_adjacency>`.

# %% tags=["hide-input"]
# Colab only: install the companion package and fetch this chapter's helper module.
import subprocess
import sys
import urllib.request

if "google.colab" in sys.modules:
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "-q",
            "posgeo @ git+https://github.com/posgeo/geometry-of-positional-encodings#subdirectory=companion",
        ],
        check=True,
    )
    urllib.request.urlretrieve(
        "https://raw.githubusercontent.com/posgeo/geometry-of-positional-encodings/main/book/_ch09.py", "_ch09.py"
    )

# %% tags=["hide-cell"]
import numpy as np
import pandas as pd

import posgeo as pg
import _ch09 as ch

pg.notebook_setup()

# %% [markdown]
# The model (6 layers of width $d = 384$, 12 heads of size 32), the two corpora and their
# geometries, plug-in and noise-corrected ({doc}`the geometry chapter <03_statistical_geometry>`):

# %%
settings = ch.settings()
model = pg.load_pretrained(settings.model)
corpora = {name: pg.load_corpus(name, "train") for name in settings.n_positions}
geometries = {
    name: pg.corpus_geometry(corpora[name], n, min_count=1000) for name, n in settings.n_positions.items()
}
TARGETS = {"plug-in": "distances", "corrected": "hybrid"}  # the two distance matrices of a geometry

# %% [markdown]
# (sec-ch09-build)=
# ## Projected stress, built by hand
#
# A BERT embedding layer adds word, position and token-type vectors and normalises the sum,
#
# $$
# x_{t,i} = \mathrm{LN}(w_t + p_i + s_0) = \gamma \odot \frac{w_t + p_i + s_0 - m_{t,i}\mathbf 1}{\sigma_{t,i}} + \beta,
# $$
#
# with $m_{t,i}$ and $\sigma_{t,i}$ the mean and standard deviation of the sum over the $d$
# coordinates. Centring is linear, so the part that depends on the position is
# $\gamma \odot (p_i - \bar p_i \mathbf 1)/\sigma_{t,i}$; only the division couples position
# and token, and $\sigma_{t,i}$ varies little. Replacing it by its root mean square
# $\bar\sigma$ over all (token, position) pairs gives the **{term}`positional input`**
#
# $$
# \Pi_i = \gamma \odot (p_{i+1} - \bar p_{i+1} \mathbf 1)/\bar\sigma ,
# $$
#
# the configuration the first layer receives, at the scale it receives it (our position $i$
# is the model's row $i + 1$, after `[CLS]`). Layer $\ell$ reads it through its query and key
# maps $W_Q^\ell, W_K^\ell$ ($d \times d$). Pushing $\Pi$ through both and concatenating,
#
# $$
# Z^\ell = \bigl[\,\Pi\, W_Q^{\ell\top} \;\big|\; \Pi\, W_K^{\ell\top}\,\bigr],
# \qquad
# \lVert z^\ell_i - z^\ell_j\rVert^2 = \lVert W_Q^\ell(\pi_i - \pi_j)\rVert^2 + \lVert W_K^\ell(\pi_i - \pi_j)\rVert^2 ,
# $$
#
# puts two positions far apart when the layer's queries or keys tell them apart (biases
# drop out). The **{term}`projected stress`** of layer $\ell$ is the stress of $Z^\ell$
# against the corpus distances $D$, raw or scale-optimal
# ({doc}`the MDS chapter <04_mds_and_stress>`). As in P1, the same $\Pi$ goes through every layer's maps. Here are
# $\bar\sigma$, $\Pi$ and the image through layer 3, from the model's weights:

# %%
array = lambda weight: weight.detach().double().numpy()
emb = model.embeddings
w = array(emb.word_embeddings.weight) + array(emb.token_type_embeddings.weight)[0]  # w_t + s_0, one row per token
p = array(emb.position_embeddings.weight)  # p_j, one row per model position
wc, pc = w - w.mean(axis=1, keepdims=True), p - p.mean(axis=1, keepdims=True)  # centred over the d coordinates
d = w.shape[1]
# mean over all pairs (t, j) of var(w_t + p_j) = mean var(w_t) + mean var(p_j) + 2 mean cov(w_t, p_j)
sigma_bar = np.sqrt((wc**2).mean() + (pc**2).mean() + 2 * wc.mean(axis=0) @ pc.mean(axis=0) / d)
n = settings.n_positions["sst2"]
Pi = array(emb.LayerNorm.weight) * pc[1 : n + 1] / sigma_bar

attention = model.encoder.layer[2].attention.self  # layer 3 (layers count from 1)
Z = np.hstack([Pi @ array(attention.query.weight).T, Pi @ array(attention.key.weight).T])  # (n, 2d)
D = geometries["sst2"].distances
Z.shape

# %% tags=["stochastic"] tolerance={"atol": 1e-09, "rtol": 1e-09} tolerance_reason="the differences are float64 rounding errors (1e-16 to 1e-12) whose digits depend on the floating-point kernels; 1e-9 is far below any real disagreement"
maps = pg.query_key_maps(model)[2]  # layer 3's maps, oriented so that the image is Pi @ W
print(f"Pi: largest difference from pg.positional_input: {np.abs(Pi - pg.positional_input(model, n)).max():.1e}")
for scale in ("raw", "optimal"):
    mine = pg.stress(Z, D, scale=scale)
    library = pg.projected_stress(pg.positional_input(model, n), D, [maps["query"], maps["key"]], scale=scale)
    print(f"{scale} projected stress of layer 3: {mine:.4f} by hand, {library:.4f} from the library ({mine - library:.1e})")

# %% [markdown]
# The library computes the same, and from here on the chapter uses `pg.positional_input`,
# `pg.query_key_maps` and `pg.projected_stress`. How good is the constant $\bar\sigma$? For
# the 500 most frequent SST-2 tokens, the embedding layer's real output at the 48 positions
# against $\Pi$, both centred over positions (relative errors, and the cosine between the two
# configurations):

# %%
tokens = corpora["sst2"].sequences.tokens
frequent = np.argsort(-np.bincount(tokens, minlength=corpora["sst2"].vocab_size), kind="stable")[:500]  # ties by id
linearisation = ch.positional_input_error(model, n, frequent)
linearisation

# %% tags=["remove-cell"]
assert linearisation["median"] < 0.1 and linearisation["median cosine"] > 0.99
assert linearisation[["median", "90%", "max"]].round(2).tolist() == [0.05, 0.11, 0.19]  # the text's 5%, 11%, 19%

# %% [markdown]
# For the median token $\Pi$ is within 5% of the real output, 19% at worst, mostly in
# scale.
#
# (sec-ch09-raw)=
# ## Raw projected stress measures the scale of the maps
#
# **Raw projected stress peaks at layer 1 on both corpora and both targets, and ranks the
# layers exactly as the size of their images.** Every layer's projected stress (layer 0:
# $\Pi$ itself) and the `distance ratio`, the mean distance between projected positions over
# the mean corpus distance:

# %%
layer_tables = {
    (name, target): pg.layer_stress_table(model, getattr(g, attr))
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
by_layer = pd.concat(layer_tables, axis=1, names=["corpus", "target", "measure"])
by_layer

# %% tags=["remove-cell"]
raw_rank = by_layer.xs("raw", axis=1, level="measure").drop(index=0).rank()
ratio_rank = by_layer.xs("distance ratio", axis=1, level="measure").drop(index=0).rank()
assert (raw_rank == ratio_rank).all().all()
for measure, quoted in (("raw", [38, 218168]), ("distance ratio", [7, 690])):  # the text's ranges
    values = by_layer.xs(measure, axis=1, level="measure").to_numpy()
    assert np.round([values.min(), values.max()]).tolist() == quoted
peaks = pd.DataFrame(
    {m: by_layer.xs(m, axis=1, level="measure").drop(index=0).idxmax() for m in ("raw", "optimal")}
)
assert (peaks["raw"] == 1).all() and peaks["optimal"].isin([4, 5]).all()

# %% [markdown]
# Raw stress runs from 38 to 218,168 because the projected positions lie 7 to 690 times
# farther apart than Hellinger distances allow, and stress is then roughly the square of
# that ratio. Multiplying $W_Q$ by $c$ and $W_K$ by $1/c$ leaves every attention score
# unchanged and moves raw stress anywhere (exercise 3). Raw projected stress measures the norms of $W_Q$ and $W_K$, not a geometry.
#
# (sec-ch09-shape)=
# ## Scale-optimal stress barely moves
#
# **Scale-optimal stress, which compares shapes, varies across layers by a few hundredths,
# and its maximum lies in layer 4 or 5, not in layer 1 or 3** ({numref}`fig-ch9-projected`).

# %% mystnb={"figure": {"caption": "Scale-optimal projected stress (log scale) of each layer of MiniLM (layer 0: the positional input itself), on SST-2 (vermillion) and IMDB (green), against the plug-in distances (solid) and the noise-corrected ones (dashed). Hover a point for its value.", "name": "fig-ch9-projected"}}
ch.plot_layer_stress(
    {f"{name}, {target}": t for (name, target), t in layer_tables.items()},
    title="scale-optimal projected stress",
    log=True,
)

# %% [markdown]
# Is a few hundredths large? A yardstick is the projected stress of $\Pi$ under *random*
# Gaussian maps of the same shape (two $d \times d$ maps, concatenated, 20 draws;
# `ch.random_map_stress`). Each squared distance of the image is a sum of $2d$ independent
# terms, so such a map is nearly an isometry up to scale (exercise 1) and the band is, up to
# its small spread, the stress of $\Pi$ itself:

# %%
d_model = model.config.hidden_size
bands = {
    (name, target): ch.random_map_stress(pg.positional_input(model, g.n_positions), getattr(g, attr), (d_model, d_model))
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
yardstick = pd.DataFrame(
    {
        key: {
            "input (layer 0)": layer_tables[key].loc[0, "optimal"],
            "random maps, min": band.min(),
            "random maps, mean": band.mean(),
            "random maps, max": band.max(),
            "layers, min": layer_tables[key]["optimal"].drop(index=0).min(),
            "layers, max": layer_tables[key]["optimal"].drop(index=0).max(),
        }
        for key, band in bands.items()
    }
).T
yardstick

# %% tags=["remove-cell"]
centre = yardstick["random maps, mean"] - yardstick["input (layer 0)"]
spread = yardstick["layers, max"] - yardstick["layers, min"]
assert (centre.abs() < 0.02 * yardstick["input (layer 0)"]).all() and (centre.abs() < 0.1 * spread).all()
assert [round(spread.min(), 3), round(spread.max(), 3)] == [0.011, 0.030]  # "a spread of 0.011 to 0.030"
plug = yardstick.xs("plug-in", level=1)
assert (plug["layers, min"] > plug["random maps, max"]).all()
corrected = yardstick.xs("corrected", level=1)
assert corrected.loc["sst2", "layers, min"] > corrected.loc["sst2", "random maps, max"]  # every layer above the band
below = layer_tables[("imdb", "corrected")]["optimal"].drop(index=0) < corrected.loc["imdb", "random maps, min"]
assert below[below].index.tolist() == [4, 6]  # "two layers (4 and 6) fall below the band"

# %% [markdown]
# The band's centre lies within 2% of $\Pi$'s own stress, so "above the band" means "worse
# than the input". Against the plug-in targets and the corrected SST-2 target every layer
# lies above it, moving the positional geometry a little further from the corpus than $\Pi$
# already is, most in layers 4 to 6; against the corrected IMDB target layers 4 and 6 fall
# below it. The effects are real but small, a spread of 0.011 to 0.030 across layers, far
# from a "very high peak".
#
# (sec-ch09-heads)=
# ## Heads differ more than layers
#
# **A few heads, most of them in layer 1, distort the positional geometry about twice as
# much as the typical head** ({numref}`fig-ch9-heads`). A head's projected stress uses its
# own $d_h$ columns of each map, $2 d_h = 64$ coordinates in all:

# %%
def head_stress_table(model, D):
    """Scale-optimal projected stress of every head (columns) of every layer (rows)."""
    Pi, H = pg.positional_input(model, len(D)), model.config.num_attention_heads
    rows = {}
    for layer, maps in enumerate(pg.query_key_maps(model), start=1):
        dh = maps["query"].shape[1] // H  # head h owns columns h*dh .. (h+1)*dh - 1
        heads = [[maps[m][:, h * dh : (h + 1) * dh] for m in ("query", "key")] for h in range(H)]
        rows[layer] = [pg.projected_stress(Pi, D, pair, scale="optimal") for pair in heads]
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(index="layer", columns="head")


head_tables = {name: head_stress_table(model, g.distances) for name, g in geometries.items()}

# %% mystnb={"figure": {"caption": "Scale-optimal projected stress of every head (columns) of every layer (rows) against the plug-in distances, SST-2 left and IMDB right, on one colour scale. Hover a cell for its value.", "name": "fig-ch9-heads"}}
ch.plot_head_stress(head_tables)

# %% tags=["remove-cell"]
assert all(t.mean(axis=1).idxmax() == 1 for t in head_tables.values())
assert all((t.max(axis=1) > 1.5 * t.median(axis=1)).any() for t in head_tables.values())
assert [t.stack().idxmax() for t in head_tables.values()] == [(1, 0), (1, 1)]

# %% [markdown]
# The per-head mean is highest in layer 1, and the largest single value is a layer-1 head on
# both corpora. Concatenating the heads of a layer averages these differences away. Heads
# are narrower than layers, so their random-map band lies higher (exercise 1).
#
# (sec-ch09-hidden)=
# ## The hidden states drift away from the corpus geometry
#
# **On SST-2 the positional component of the hidden states moves away from the corpus
# geometry with depth; on neither corpus is there a clear peak in the early-middle
# layers.** What reaches a layer is not $\Pi$ but the residual stream, which mixes position
# with content. Averaging the hidden state at each position over the same sequences removes
# most of the content and leaves the positional component
# $\bar h^\ell_i = \mathbb E[h^\ell_{i+1}]$ (`pg.positional_hidden_states`). Its stress,
# layer by layer (layer 0: the embedding output), and below it the scale-optimal stress of
# random Gaussian vectors, which have no order:

# %% tags=["stochastic"] tolerance={"atol": 0.0001, "rtol": 1e-06} tolerance_reason="float32 rounding of the hidden states: other CPU kernel paths moved the last digit shown (5163.8589 to 5163.8590, 4347.0453 to 4347.0454), so 1e-6 of the value plus one unit of the last digit"
hidden = {
    name: pg.positional_hidden_states(
        model, corpora[name], g.n_positions, max_sequences=settings.hidden_sequences[name],
        batch_size=settings.batch_size, model_name=settings.model or pg.MINILM,
    )
    for name, g in geometries.items()
}
hidden_tables = {
    (name, target): pd.DataFrame(
        {scale: [pg.stress(h, getattr(g, attr), scale=scale) for h in hidden[name]] for scale in ("raw", "optimal")}
    ).rename_axis("layer")
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}
pd.concat(hidden_tables, axis=1, names=["corpus", "target", "measure"])

# %%
rng = np.random.default_rng(0)
random_vectors = pd.Series(
    {
        (name, target): pg.stress(rng.standard_normal((g.n_positions, d_model)), getattr(g, attr), scale="optimal")
        for name, g in geometries.items()
        for target, attr in TARGETS.items()
    },
    name="random vectors, scale-optimal",
)
random_vectors

# %% mystnb={"figure": {"caption": "Scale-optimal stress (log scale) of the positional component of the hidden states (the mean hidden state at each position) after each layer (layer 0: the embedding output), on SST-2 (vermillion) and IMDB (green), against the plug-in (solid) and noise-corrected (dashed) distances.", "name": "fig-ch9-hidden"}} tags=["stochastic"] tolerance={"atol": 0.001, "rtol": 1e-06} tolerance_reason="float32 rounding of the hidden states, as in their table; the chart keeps 4 significant digits, which that rounding can flip: 0.001 (ten units of the fourth digit of these stresses below 1) plus 1e-6"
ch.plot_layer_stress(
    {f"{name}, {target}": t for (name, target), t in hidden_tables.items()},
    title="positional component of the hidden states",
    log=True,
)

# %% tags=["remove-cell"]
L = model.config.num_hidden_layers
hidden_raw = pd.concat(hidden_tables, axis=1).xs("raw", axis=1, level=2)
assert (hidden_raw.loc[L] < hidden_raw.loc[1]).all()
assert hidden_raw.loc[L].round(1).tolist() == [0.5, 3.1, 4.7, 229.5]  # "0.5 to 4.7; 230"
opt = pd.concat(hidden_tables, axis=1).xs("optimal", axis=1, level=2)
assert opt[("sst2", "plug-in")].idxmax() == L and opt[("sst2", "corrected")].idxmax() == L
assert opt[("sst2", "corrected")].round(3)[[0, 4, 5, L]].tolist() == [0.036, 0.045, 0.045, 0.073]
assert opt[("imdb", "corrected")].round(2)[[0, L]].tolist() == [0.56, 0.50] and (opt[("imdb", "corrected")] > 0.45).all()
for key, level in random_vectors.items():  # "poor fits": random vectors do as well
    if key[1] == "plug-in":
        assert (opt[key] > level).all(), key
    else:
        assert (opt[key] - level).abs().max() < 0.06, key
    assert layer_tables[key].loc[0, "optimal"] > level - 0.001, key  # and about as well as Pi (Limits)
imdb_plug = opt[("imdb", "plug-in")]
assert imdb_plug.idxmax() == 3 and imdb_plug.max() - imdb_plug.loc[4:].max() < 0.002  # "one or two thousandths"

# %% [markdown]
# After the first layer the raw stress *falls* through the network as the mean hidden
# states of different positions draw together. The scale-optimal stress
# ({numref}`fig-ch9-hidden`) grows with depth on SST-2 against both targets, with its
# maximum at the last layer. On IMDB the plug-in curve changes little, its maximum at
# layer 3 one or two thousandths above the later layers, which 32 reviews cannot resolve;
# against the corrected distances the layers come slightly closer.
#
# All of these are poor fits: random vectors, which carry no order, fit the plug-in
# distances better than every layer and come within a few hundredths on the corrected ones,
# and no layer stands out.
#
# (sec-ch09-paper)=
# ## Beside the paper
#
# | | P1 | this chapter |
# |---|---|---|
# | model | BERT-base: 12 layers, $d = 768$, 12 heads of 64 | all-MiniLM-L6-v2: 6 layers, $d = 384$, 12 heads of 32 |
# | configuration pushed through the maps | the sinusoidal encoding | $\Pi$, the model's own positional input, and the sinusoidal encoding |
# | stress | raw | raw and scale-optimal |
# | peak | "very high" at layer 3 (no values given) | raw: layer 1; scale-optimal: layer 4 or 5 for $\Pi$, 1 or 2 for sinusoids, within a few hundredths |
#
# P1 projects the *sinusoidal* encoding, although BERT never sees sinusoids. The same tables
# with `encoding=pg.sinusoidal_encoding(n, d)` in place of $\Pi$ give the peak layers below:

# %%
sinusoid_tables = {
    (name, target): pg.layer_stress_table(
        model, getattr(g, attr), encoding=pg.sinusoidal_encoding(g.n_positions, d_model)
    )
    for name, g in geometries.items()
    for target, attr in TARGETS.items()
}


def peak_layers(tables):
    """The layer with the largest raw and scale-optimal projected stress, per (corpus, target)."""
    return pd.DataFrame({key: t.drop(index=0)[["raw", "optimal"]].idxmax() for key, t in tables.items()}).T


pd.concat({"Pi": peak_layers(layer_tables), "sinusoids": peak_layers(sinusoid_tables)}, axis=1, names=["encoding", "peak layer"])

# %% tags=["remove-cell"]
sin_opt = pd.concat(sinusoid_tables, axis=1).xs("optimal", axis=1, level=2)
sin_raw = pd.concat(sinusoid_tables, axis=1).xs("raw", axis=1, level=2)
assert (sin_raw.drop(index=0).idxmax() == 1).all()
assert ((sin_opt.drop(index=0).max() - sin_opt.drop(index=0).min()) < 0.035).all()  # "nearly flat": a few hundredths
assert sin_opt.drop(index=0).idxmax().isin([1, 2]).all()
all_peaks = pd.concat([peaks, sin_raw.drop(index=0).idxmax(), sin_opt.drop(index=0).idxmax()], axis=1)
assert (all_peaks != 3).all().all()

# %% [markdown]
# With sinusoids the raw peak is again layer 1, the map norms, and scale-optimal stress is
# nearly flat. No variant puts MiniLM's peak at layer 3 or gives one not explained by the
# norms of the maps or by differences of a few hundredths. MiniLM, distilled from a larger
# teacher and fine-tuned for sentence embeddings, need not match BERT layer for layer:
# nothing here refutes a layer-3 peak in BERT-base. The same chapter run on
# `bert-base-uncased`, P1's model, is one of {doc}`the full-scale runs <appendix_full_scale>`.
#
# :::{admonition} Limits
# :class: warning
# - The model is all-MiniLM-L6-v2, not P1's BERT-base; the full profile that loads BERT-base
#   has not been run.
# - $\Pi$ replaces each token's $\sigma_{t,i}$ by one constant: 5% off for the median
#   token, 19% at worst, mostly in scale.
# - Projected stress pushes the same $\Pi$ through every layer, as P1 does: it describes the
#   maps, not the signal that reaches each layer. Concatenating $W_Q$ and $W_K$ is one choice;
#   attention scores depend only on $W_Q^\top W_K$, and neither stress is invariant to a
#   rebalancing of the two (exercise 3).
# - Against these targets random vectors, which carry no order, fit about as well as $\Pi$
#   and every layer, or better ({ref}`the hidden states <sec-ch09-hidden>`;
#   {doc}`the audit chapter <12_audit>` finds the same for MiniLM's table): the layers are
#   compared with each other, among poor fits.
# - The hidden-state view averages 256 SST-2 sentences and only 32 IMDB reviews; the IMDB
#   rows carry sampling noise at every position and are the least reliable numbers here.
# - The sample of the hidden-state view holds long sequences only (exercise 4).
# :::
#
# ## Summary
#
# - The positional input of a BERT layer stack is $\Pi = \gamma \odot (p - \bar p)/\bar\sigma$,
#   the linear part of the embedding LayerNorm; projected stress pushes it through a layer's
#   query and key maps and scores the image against the corpus distances.
# - Raw projected stress peaks at layer 1 of MiniLM because it measures the scale of each
#   layer's maps.
# - Scale-optimal stress varies by a few hundredths across layers, largest in layer 4 or 5;
#   random maps of the same shape are near-isometries and leave it at $\Pi$'s own stress.
#   Heads differ more than layers.
# - The hidden states' positional component drifts away from the corpus geometry with depth
#   on SST-2. P1's layer-3 peak is not reproduced by MiniLM under any of these measures.
#
# ## Exercises
#
# 1. **A random map, by hand.** Draw two $d \times d$ matrices $G_Q, G_K$ with standard
#    normal entries (`np.random.default_rng(1)`), form $[\,\Pi G_Q \mid \Pi G_K\,]$ for SST-2,
#    and compute its scale-optimal stress against the plug-in distances. Compare with $\Pi$'s
#    own stress, and look at the ratios of image distances to $\Pi$'s distances: their mean
#    and their relative spread. Then repeat with two $d \times 32$ maps, the shape of one
#    head. Predict first: does a narrower map distort more or less?
#
# :::{admonition} Solution
# :class: dropdown
# ```python
# rng = np.random.default_rng(1)
# image = np.hstack([Pi @ rng.standard_normal((d, d)), Pi @ rng.standard_normal((d, d))])
# pg.stress(image, D, scale="optimal"), pg.stress(Pi, D, scale="optimal")   # 0.0492, 0.0470
# iu = np.triu_indices(n, 1)
# ratio = pg.pairwise_distances(image)[iu] / pg.pairwise_distances(Pi)[iu]
# ratio.mean(), ratio.std() / ratio.mean()                                 # 27.4, 0.026
# band = ch.random_map_stress(Pi, D, (32, 32), n_draws=50)                  # maps of one head's shape
# band.min(), band.max(), (head_tables["sst2"] > band.max()).sum().sum()    # 0.048, 0.061, 52
# ```
# Every distance is multiplied by about $\sqrt{2d} = 27.7$, within a few percent: the map is
# an isometry up to scale, and the scale-optimal stress moves by two thousandths (0.0492
# against 0.0470, a little above the yardstick's 20 draws, 0.0457 to 0.0487). With $d_h = 32$
# columns per map the image has 64 coordinates instead of 768; its squared distances are sums
# of fewer terms and scatter more, so a narrower map distorts more: 50 draws give 0.048 to
# 0.061, above the layer band. Heads must be compared with this band, not the layer's;
# 52 of the 72 SST-2 heads lie above it: most heads reshape the positional geometry more than
# a random map of their shape would.
# :::
#
# 2. **Modify and predict.** Multiply layer 3's query map by 2 and leave the key map alone.
#    Predict whether the raw and the scale-optimal projected stress against the SST-2 plug-in
#    distances go up, go down or stay, and roughly by how much. Then multiply both maps by 2.
#
# :::{admonition} Solution
# :class: dropdown
# ```python
# Q, K = maps["query"], maps["key"]
# for pair in ([Q, K], [2 * Q, K], [2 * Q, 2 * K]):
#     print([round(pg.projected_stress(Pi, D, pair, scale=s), 4) for s in ("raw", "optimal")])
# # [1393.6262, 0.0497]   [3309.3587, 0.0506]   [5720.8667, 0.0497]
# ```
# The projected distances are already about 38 times too large, so raw stress is about the
# squared excess: doubling the query half multiplies each squared distance by between 1 and
# 4, and raw stress rises to 3,309; doubling both doubles every distance, and raw stress
# about quadruples (5,721). Scale-optimal stress ignores a common factor, so doubling both
# leaves it exactly where it was; doubling one half reweights queries against keys, a change
# of shape, and moves it by a thousandth (0.0497 to 0.0506).
# :::
#
# 3. Show that raw projected stress can be made arbitrarily large or small by rescaling
#    $W_Q$ and $W_K$ in a way that leaves every attention score unchanged. Is scale-optimal
#    stress safe from this?
#
# ```{admonition} Solution
# :class: dropdown
# Attention scores are $q_i^\top k_j = \pi_i^\top W_Q^\top W_K \pi_j$ (plus bias terms).
# Replacing $W_Q$ by $c\,W_Q$ and $W_K$ by $W_K / c$ leaves $W_Q^\top W_K$, hence every
# score, unchanged, but scales the query half of $Z^\ell$ by $c$ and the key half by $1/c$.
# As $c \to \infty$ (or $0$) the projected distances, and the raw stress, grow without
# bound. Scale-optimal stress is invariant to a common rescaling but not to this
# rebalancing: with $c = 2$ layer 3's value moves from 0.0497 to 0.0513 (exercise 2's
# code with `[2 * Q, K / 2]`). A fully invariant measure would use the bilinear form
# $W_Q^\top W_K$ itself.
# ```
#
# 4. Why does the hidden-state view use the same sequences at every position instead of all
#    sequences that reach each position?
#
# ```{admonition} Solution
# :class: dropdown
# With different samples per position, the mean at position $i$ carries the sampling noise
# of its own sample, independent across positions, and the number of sequences falls
# steeply with $i$ (on SST-2, fewer than 300 of 67,349 sentences reach position 48). The
# distances between mean hidden states would then grow with $i$ through noise alone, the
# plug-in bias of {doc}`the geometry chapter <03_statistical_geometry>`. One common sample
# gives every position the same content, so differences between positions come from the
# positions. The price is that the sample holds long sequences only.
# ```

# %% tags=["remove-cell"]
rng = np.random.default_rng(1)
image = np.hstack([Pi @ rng.standard_normal((d, d)), Pi @ rng.standard_normal((d, d))])
assert round(pg.stress(image, D, scale="optimal"), 4) == 0.0492 and round(pg.stress(Pi, D, scale="optimal"), 4) == 0.0470
iu = np.triu_indices(n, 1)
ratio = pg.pairwise_distances(image)[iu] / pg.pairwise_distances(Pi)[iu]
assert round(ratio.mean(), 1) == 27.4 and round(ratio.std() / ratio.mean(), 3) == 0.026 and round(np.sqrt(2 * d), 1) == 27.7
assert np.round([bands[("sst2", "plug-in")].min(), bands[("sst2", "plug-in")].max()], 4).tolist() == [0.0457, 0.0487]
head_band = ch.random_map_stress(Pi, D, (32, 32), n_draws=50)
assert np.round([head_band.min(), head_band.max()], 3).tolist() == [0.048, 0.061]
assert (head_tables["sst2"] > head_band.max()).sum().sum() == 52 and head_tables["sst2"].size == 72
Q, K = maps["query"], maps["key"]
quoted = {"QK": (1393.6262, 0.0497), "2Q K": (3309.3587, 0.0506), "2Q 2K": (5720.8667, 0.0497)}
for label, pair in zip(quoted, ([Q, K], [2 * Q, K], [2 * Q, 2 * K])):
    assert tuple(round(pg.projected_stress(Pi, D, pair, scale=s), 4) for s in ("raw", "optimal")) == quoted[label], label
assert round(pg.projected_stress(Pi, D, [2 * Q, K / 2], scale="optimal"), 4) == 0.0513
lengths = np.diff(np.asarray(corpora["sst2"].sequences.offsets))
assert (lengths >= 48).sum() < 300 and lengths.size == 67_349

# %% [markdown]
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
