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
# # Auditing your own model
#
# The previous chapters asked one question of two corpora and one model: how well do the
# model's positions fit the positional geometry of the corpus? The corpus defines a
# distance between every two positions, the Hellinger distance between the token
# distributions seen there ({doc}`the geometry chapter <03_statistical_geometry>`); an encoding fits when the distances between its
# position vectors reproduce it, and *stress* scores the mismatch
# {cite:p}`cirrincione2026geometry` ({doc}`the MDS chapter <04_mds_and_stress>`). Around that number the book added the
# effective rank of the geometry, the best fit any encoding of a given dimension can
# reach, the noise in the plug-in distances, separation ({doc}`the separation chapter <05_positional_separation>`), monotonicity
# ({doc}`the monotonicity chapter <08_monotonicity_ntk>`) and what the layers do ({doc}`the layers chapter <09_layers>`).
#
# This chapter packages all of it into one command for a corpus and a model that you
# bring, `posgeo audit`, and runs it on SST-2 {cite:p}`socher2013sst` with the bundled
# all-MiniLM-L6-v2 {cite:p}`wang2020minilm,reimers2019sbert`.

# %% [markdown]
# ## The command
#
# ```bash
# posgeo audit sst2 --positions 48 --out audit-sst2
# posgeo audit reviews.parquet --column body --model ./my-bert --positions 128
# posgeo audit sentences.txt --positions 16 --max-sequences 5000
# python -m posgeo audit --help
# ```
#
# It writes two files into `--out`: `report.html`, one self-contained page, and
# `report.json` with the same numbers under stable keys. The page's charts are interactive
# (hover for values, click a legend entry to show one curve): they are Vega-Lite charts,
# like the book's, drawn by the JavaScript of Vega, Vega-Lite and vega-embed, which the file
# carries once inside itself. The page loads nothing from anywhere, so it opens offline and
# can be mailed; `--static` writes the charts as plain SVG images instead, with no
# JavaScript at all. The book ships
# <a href="../audit/sst2-minilm/report.html">the example report</a> produced by the
# first command above.
#
# **The corpus** is a `.parquet` file (the text column is `--column`, else `text` or
# `sentence`), any other file (UTF-8 text, one sequence per line), one of the book's
# corpora `sst2` and `imdb` (a local copy in `--data-dir` or `$POSGEO_DATA_DIR`, else the
# Hugging Face hub), or a hub dataset id with `--split`. It is tokenised with the
# *model's* tokenizer, without special tokens: position $i$ is the $i$-th token of a text.
#
# **The model** is a local folder, a hub id, or by default all-MiniLM-L6-v2. How its
# positions become vectors depends on how it encodes position:
#
# - a **learned absolute table** (BERT, RoBERTa, GPT-2, ...) is used as it is. Corpus
#   position $i$ is the table row $i + \text{offset}$, where the offset counts the special
#   tokens the tokenizer puts before the text (BERT's `[CLS]`: 1; GPT-2: 0) plus the
#   architecture's shift of position ids (RoBERTa numbers positions from
#   `padding_idx + 1`). The audit measures both and reports them;
# - **RoPE** {cite:p}`su2021roformer` and **ALiBi** {cite:p}`press2022alibi` act inside
#   attention; they get the vector forms of {doc}`the MDS chapter <04_mds_and_stress>` with the model's head size, rotated
#   dimensions and base, or its head count. Only the configuration and the tokenizer are
#   loaded, not the weights;
# - a model **without a positional signal** is reported as such: its input is a set
#   ({doc}`the equivariance chapter <02_permutation_equivariance>`), and the model-dependent numbers are left empty, with the reason.
#
# Inputs that cannot work fail with one line that says what to do: a column that does
# not exist (the message lists the columns), an empty file or split, a hub model that is
# not in the local cache while the hub is unreachable (pass a local folder, or download it
# first), or sequences shorter than `--positions` (the message gives the largest number of
# positions that at least 10 sequences reach). The exit status is then 2. A second run on
# the same inputs reads the whole result from the cache (`$POSGEO_CACHE_DIR`) and takes
# seconds.

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
import pandas as pd

import posgeo as pg
import posgeo.audit as au

pg.notebook_setup()

# %% [markdown]
# ## The same audit from Python
#
# `au.audit` is the function behind the command; it returns an `AuditReport` whose
# `write(out_dir)` produces the two files. The profile sets what this chapter audits (the
# `full` profile audits P1's `bert-base-uncased` instead of MiniLM; see the end of the
# chapter):

# %%
settings = au.audit_settings()
report = au.audit(
    settings.dataset,
    model=settings.model,
    n_positions=settings.n_positions,
    max_sequences=settings.max_sequences,
    progress=False,
)
pd.Series(report.model, name=report.parameters["dataset"])

# %% [markdown]
# MiniLM has a learned table of 512 rows; the bert-base-uncased tokenizer puts `[CLS]` in
# front, so the 48 positions of a sentence are rows 1 to 48. The headline numbers, with
# P1's reported value beside ours where P1 gives one:

# %%
summary = report.summary()
pg.display_table(summary, mixed=True)  # n/a: P1 reports nothing comparable for that row

# %% [markdown]
# ## Reading the report
#
# **The corpus.** Few SST-2 sentences are long: of 67,349, a few hundred reach position
# 47. The plug-in distances are therefore mostly sampling noise (the *noise share*, the part
# of the squared distances that the correction of {doc}`the geometry chapter <03_statistical_geometry>` removes, is about two thirds),
# and the geometry is far from low-rank: 90% of its spectral energy needs dozens of the 48
# dimensions, fewer after the noise correction.

# %%
corpus = report.corpus
assert corpus["noise_share"] > 0.5
ranks = pd.DataFrame(corpus["effective_rank"]).T.astype({"rank_90": int, "rank_99": int})
assert (ranks.loc["corrected"] < ranks.loc["plug-in"]).all() and ranks.loc["plug-in", "rank_90"] > 24
ranks

# %% [markdown]
# **The best fit.** Classical MDS at full rank, P1's $P_{\mathrm{MDS}}$, reproduces the
# chord Hellinger distance exactly ({doc}`the MDS chapter <04_mds_and_stress>`; P1 reports "$\approx 0$"), and at a fixed
# low dimension the stress-optimal embedding (SMACOF) is never worse than classical MDS.
# These are the floors an encoding can be held to.

# %%
plug_in, corrected = report.stress["plug-in"], report.stress["corrected"]
assert plug_in.loc["PMDS full", "raw"] < 1e-12 <= plug_in.loc["model", "raw"]
for k in report.parameters["mds_dims"]:
    for table in (plug_in, corrected):
        assert table.loc[f"SMACOF k={k}", "raw"] <= table.loc[f"PMDS k={k}", "raw"] + 1e-12
pd.concat({"plug-in": plug_in, "corrected": corrected}, axis=1).drop(index="PMDS full").xs("optimal", axis=1, level=1)

# %% [markdown]
# **The model.** Scale-optimal stress compares shapes ({doc}`the MDS chapter <04_mds_and_stress>`). Against the plug-in
# distances, MiniLM's 384-dimensional table beats a 3-dimensional stress-optimal embedding,
# but Gaussian random vectors of the same width beat the table: nearly equidistant random
# points imitate the noise, which is full-rank. Against the noise-corrected (hybrid)
# distances the order changes: the sinusoids fit best, and the table fits a little better
# than random vectors on the estimate, while the 3-dimensional embedding now trails them
# all (the corrected geometry keeps more dimensions than three); {numref}`fig-ch11-stress`
# shows both orders. Whether "a little better" holds is what the intervals below
# decide (the black lines of the figure). A model should be judged against the corrected
# geometry, with its intervals.

# %% mystnb={"figure": {"caption": "Scale-optimal stress of each encoding against SST-2's plug-in (blue) and noise-corrected (vermillion) distances (n = 48): classical MDS (PMDS) and SMACOF at k = 1, 2, 3, MiniLM's table, and sinusoidal and random vectors of its width. Black lines: 95% intervals of the corrected stresses (half-sample, widened by the gap to the jackknife over sentence groups, chapter 2's reference for SST-2's nested phrases). Hover a bar for its values.", "name": "fig-ch11-stress"}}
assert plug_in.loc["random", "optimal"] < plug_in.loc["model", "optimal"] < plug_in.loc["SMACOF k=3", "optimal"]
assert corrected.loc["sinusoidal", "optimal"] < corrected.loc["model", "optimal"] < corrected.loc["random", "optimal"]
assert corrected.loc["SMACOF k=3", "optimal"] > corrected.loc["random", "optimal"]
au.plot_audit_stress(report)

# %% [markdown]
# **Which differences hold.** The audit halves the corpus 20 times (keeping SST-2's
# phrases with their sentences, `pg.overlap_groups`) and recomputes every corrected stress
# on each half. Each 95% sampling interval is then widened on both sides by the gap
# between the stress against the hybrid estimate and against a second noise correction:
# for SST-2's training split (`pg.NESTED_SPLITS`: phrases nested in their sentences) the
# jackknifed hybrid over blocks of sentence groups, the reference that covered a known
# truth best in {doc}`the geometry chapter <03_statistical_geometry>`'s calibration on nested phrases (for other corpora, the matched
# estimate; the report's notes name the one used). {doc}`The geometry chapter <03_statistical_geometry>` and {doc}`the MDS chapter <04_mds_and_stress>` show that on SST-2
# the two estimates disagree by more than the sampling noise. With them come the order-free baselines (the regular
# simplex, and the table with its rows shuffled) and the paired intervals of the
# differences, which the verdict uses:

# %%
report.intervals[["stress", "low", "high", "permuted mean", "gain", "p"]]

# %% [markdown]
# **Random vectors are a distribution, not one draw.** One random table can land anywhere
# in the spread of random tables, so comparing a model with a single draw calls a table
# that is itself random "better" or "worse" far more often than the 5% a 95% interval
# promises. The verdict therefore draws 100 Gaussian random tables of the model's width
# (scale-optimal stress ignores their scale) and calls the model *better than random
# vectors* only if its stress lies below their 2.5% quantile, *worse* only if above their
# 97.5% quantile; with sampling intervals, the whole widened interval of that margin must
# lie on the same side of 0. A random table is then called better at most about one time in
# forty. The row below is MiniLM's place among the 100 tables, against both targets:

# %%
report.random

# %%
verdict = report.verdict()
paired = report.differences.set_index(["better", "worse"])
rnd = report.random.loc["corrected"]
assert rnd["low"] <= rnd["model"] <= rnd["high"] and rnd["margin high"] > 0 > rnd["margin low"]
assert verdict["comparisons"][0]["verdict"] == "fit no better than" and not paired.loc[("model", "regular simplex"), "separated"]
assert not paired.loc[("sinusoidal", "model"), "separated"] and report.intervals.loc["model", "p"] < 0.05
pd.Series(verdict["sentences"], name="verdict")

# %% [markdown]
# So on SST-2 MiniLM's table fits the corrected geometry *no better than* random vectors
# (its stress lies inside the middle 95% of the random tables'), an order-free simplex or
# plain sinusoids, within the widened intervals. (With sampling intervals alone the
# sinusoids' lead held; it does not survive the disagreement between the two noise
# corrections.) Yet its order shows against the hybrid estimate: every one of 100 shuffles
# of its rows fits worse.

# %% [markdown]
# The distance-by-offset curves ({numref}`fig-ch11-offsets`) show why the table fits as
# well as it does: rescaled by the scale-optimal factor, its distances rise with the
# offset, as the corpus's do, with an oscillation that the corpus lacks.

# %% mystnb={"figure": {"caption": "Mean distance against offset |i - j| on SST-2: the corpus's plug-in (blue) and noise-corrected (vermillion, dashed) distances, and MiniLM's position vectors times the scale-optimal factor (wine); bands span the minimum to the maximum over the pairs at each offset. Click a legend entry to show one curve; drag to pan, scroll to zoom.", "name": "fig-ch11-offsets"}}
au.plot_audit_offsets(report)

# %% [markdown]
# In two dimensions ({numref}`fig-ch11-maps`) the corpus geometry is a smooth arc from the
# first position to the last, while the table's first two MDS axes split the positions into
# early and late groups and scatter them within each:

# %% mystnb={"figure": {"caption": "Positions 0 to 47 in two dimensions, coloured by position (colour bar: dark early, yellow late) and joined in order: SST-2's plug-in geometry by classical MDS (left) and MiniLM's position vectors, rescaled, by classical MDS of their distances (right), on the same axes. Hover a point for its position.", "name": "fig-ch11-maps"}}
au.plot_audit_maps(report)

# %% [markdown]
# **Separation and monotonicity.** No two of the 48 rows coincide (P1, Theorem 4): the
# closest pair is still about 45% of the mean distance apart. In offset order, the
# table's monotonicity violation rate (P1, Conjecture 5) is far below the 50% of random
# vectors and close to the rate of the corpus distances themselves; ordered by the corpus
# distances instead, it is much closer to chance.

# %%
mono = report.monotonicity
assert report.separation["relative"] > 0.2
assert mono.loc["model", "offset"] < 0.4 < mono.loc["random", "offset"]
assert abs(mono.loc["model", "offset"] - mono.loc["corpus", "offset"]) < 0.05
assert mono.loc["model", "offset"] < mono.loc["model", "hellinger"]
pg.display_table(mono)  # n/a: the corpus ordered by its own distances has no violation to count

# %% [markdown]
# ## Beside P1's numbers
#
# The rows of the summary for which P1 reports a value:

# %%
beside = summary.dropna(subset=["P1"])
beside

# %% [markdown]
# - **PMDS** is exact, as P1 reports for real corpora.
# - **Monotonicity.** P1's 25.4% for a pretrained model and 22% for $P_{\mathrm{MDS}}$ lie
#   a few points below ours (28% for MiniLM, 29% for the corpus distances, which PMDS at
#   full rank reproduces); random vectors agree at 50%. P1 does not state its $n$, and
#   {doc}`the monotonicity chapter <08_monotonicity_ntk>` showed that the rate grows with the range of positions; its pretrained model
#   is BERT-base, not MiniLM.
# - **Sinusoidal raw stress** is in the hundreds, as in P1 (272); raw stress measures
#   mostly the scale of the vectors ({doc}`the MDS chapter <04_mds_and_stress>`), so the exact value depends on $d$.
# - **Layers.** P1 reports a peak of projected stress at layer 3 of BERT-base; MiniLM's raw
#   projected stress peaks at layer 1, because raw projected stress measures how much each
#   layer's query and key maps stretch ({doc}`the layers chapter <09_layers>`).

# %%
assert beside.loc[("best fit", "PMDS full rank, raw stress"), "value"] == 0.0
assert abs(beside.loc[("baselines", "random, monotonicity violation rate (offset)"), "value"] - 0.5) < 0.03
assert 100 < beside.loc[("baselines", "sinusoidal, raw stress"), "value"] < 1000
assert summary.loc[("layers", "peak layer, raw projected stress"), "value"] == 1
(beside["value"] - beside["P1"]).rename("ours - P1")

# %% [markdown]
# ## Auditing your own
#
# Any text works, provided enough sequences reach the positions you ask for: a file with
# one sentence per line, `posgeo audit my_sentences.txt --positions 16`, or a parquet
# export of a hub dataset. For a model of your own, save it with `save_pretrained` (the
# tokenizer too) and pass the folder: `--model ./my-model`. For a hub model, download it
# once where the hub is reachable; the audit then finds it in the local Hugging Face
# cache.
#
# The `full` profile audits `bert-base-uncased`, the model of P1's experiments, downloaded
# from the Hugging Face hub (on Colab: `import os; os.environ["POSGEO_PROFILE"] = "full"` in
# the first cell):
#
# ```bash
# POSGEO_PROFILE=full POSGEO_DATA_DIR=/path/to/data \
#     jupyter nbconvert --to notebook --execute book/12_audit.ipynb
# posgeo audit sst2 --model bert-base-uncased --positions 48    # the same, from the shell
# ```
#
# The assertions above encode what MiniLM shows; they fail loudly where BERT-base differs.

# %%
pd.DataFrame({p: vars(au.audit_settings(p)) for p in ("small", "full")})

# %% [markdown]
# ## A sharded corpus, counted with Dask
#
# A corpus too large for one process comes in shards. `posgeo count` (in Python
# `pg.positional_counts`) reads parquet, JSON-lines or text shards, tokenises them and
# counts, for every position, how often each token occurs there: the sufficient statistics
# of the positional marginals, sparse, and exact however the shards are split into
# partitions, in one process or on the workers of a Dask cluster. `posgeo audit --counts`
# then audits the counts without tokenising anything again:
#
# ```bash
# posgeo count 'shards/*.parquet' --column text --positions 48 --workers 2 --out counts.npz
# posgeo audit --counts counts.npz --positions 48
# ```
#
# The counts must be made with the model's tokenizer (the audit checks the digest the
# counts store) and reach at least the audited positions. Here SST-2's training split is
# written as four parquet shards and counted by two worker processes:

# %%
import logging
import tempfile
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster

texts = pg.load_texts("sst2", "train")
with tempfile.TemporaryDirectory() as tmp:
    shards = Path(tmp)
    for k, rows in enumerate(np.array_split(np.arange(len(texts)), 4)):
        texts.iloc[rows][["text"]].to_parquet(shards / f"train-{k}.parquet", index=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster, set_as_default=False) as client:
        counts = pg.positional_counts(str(shards / "*.parquet"), column="text", n_positions=settings.n_positions,
                                      tokenizer=settings.model, client=client, progress=False)
    counted = au.audit(counts=counts.save(shards / "counts.npz"), model=settings.model,
                       n_positions=settings.n_positions, progress=False, cache=False)
counts

# %% [markdown]
# The audit from the counts gives the numbers of the audit above, computed from the texts
# in memory: the same plug-in and corrected (hybrid) distances, so the same stresses.

# %%
headline = {
    "plug-in mean distance": lambda r: r.corpus["mean_distance"],
    "corrected mean distance": lambda r: r.corpus["mean_distance_corrected"],
    "model, scale-optimal stress (plug-in)": lambda r: r.stress["plug-in"].loc["model", "optimal"],
    "model, scale-optimal stress (corrected)": lambda r: r.stress["corrected"].loc["model", "optimal"],
}
same = pd.DataFrame({"in memory": {k: f(report) for k, f in headline.items()},
                     "from counts": {k: f(counted) for k, f in headline.items()}})
assert (same["from counts"] - same["in memory"]).abs().max() < 1e-9
assert counted.dataset["sequences"] == report.dataset["sequences"] and counted.counts.tolist() == report.counts.tolist()
same["agree to 1e-9"] = (same["from counts"] - same["in memory"]).abs() < 1e-9
same

# %% [markdown]
# A corpus on the Hugging Face Hub need not be downloaded first: written `hub:NAME:SPLIT`
# (in Python `pg.HubDataset`), it is read in streaming mode, each shard of the stream a
# partition, counted once and resumable like a file:
#
# ```bash
# posgeo count hub:stanfordnlp/sst2:train --column sentence --positions 48 --workers 2 --out counts.npz
# ```
#
# The Hub cannot be reached from the machines that build this book, so here the same code
# path streams a local folder laid out as a dataset repository (`data/train-0000k-of-00004.parquet`).
# Its counts are those of the four shards above:

# %%
with tempfile.TemporaryDirectory() as tmp:
    repo = Path(tmp) / "sst2-like"
    (repo / "data").mkdir(parents=True)
    for k, rows in enumerate(np.array_split(np.arange(len(texts)), 4)):
        texts.iloc[rows][["text"]].to_parquet(repo / "data" / f"train-{k:05d}-of-00004.parquet", index=False)
    streamed = pg.positional_counts(pg.HubDataset(str(repo), split="train"), column="text",
                                    n_positions=settings.n_positions, tokenizer=settings.model, progress=False)
assert (streamed.counts != counts.counts).nnz == 0 and np.array_equal(streamed.reach, counts.reach)
pd.DataFrame({"documents": [counts.n_documents, streamed.n_documents],
              "nonzero counts": [counts.counts.nnz, streamed.counts.nnz],
              "same counts": ["", "yes"]}, index=["four parquet shards, 2 Dask workers", "the dataset, streamed"])

# %% [markdown]
# What the counts cannot give are the sampling intervals: they halve the corpus by
# sequence, and counts keep no sequences (only one fixed half-split), so the report says
# so in a note. Its verdict then judges random vectors by the random tables' spread on the
# estimate alone, and the other baselines by the 5% rule. For intervals, audit the texts.

# %%
assert counted.intervals is None
counted.notes["intervals"]

# %% [markdown]
# ## Summary
#
# - `posgeo audit DATASET [--model ...] [--positions N]` (and `au.audit`) measures the
#   positional geometry of a corpus and how well a model's positions fit it, and writes a
#   self-contained HTML report and a JSON file of the same numbers.
# - Corpus positions are mapped to the model's table rows through the tokenizer's special
#   tokens and the architecture's position-id shift; RoPE and ALiBi get the vector forms of
#   {doc}`the MDS chapter <04_mds_and_stress>`; a model without a positional signal is reported as such.
# - On SST-2 with MiniLM ($n = 48$): plug-in distances are mostly noise and nearly
#   full-rank; against them random vectors fit best. Against the noise-corrected geometry,
#   with 95% intervals widened by the disagreement of two noise corrections, the learned
#   table fits no better than random vectors (judged against the spread of 100 random
#   tables, not one draw), the order-free simplex or sinusoids,
#   although shuffling its rows makes it fit worse. The table separates its positions and violates offset monotonicity about as
#   often as the corpus distances themselves (28% against 50% for random vectors).
#
# ## Exercises
#
# 1. Audit IMDB {cite:p}`maas2011imdb` at $n = 128$ (`au.audit("imdb", n_positions=128)`).
#    How do noise share, effective rank and the ranking of the encodings change?
#
# ```{admonition} Solution
# :class: dropdown
# Almost every review reaches position 127, but the vocabulary is spread over long
# reviews, so the plug-in distances are even noisier: the noise share is about 0.9 and
# 90% of the plug-in energy needs over a hundred of the 128 dimensions, against about two
# dozen after the correction. Against the plug-in distances random vectors fit best again
# (scale-optimal stress about 0.01, the table about 0.04). Against the corrected distances
# a *one*-dimensional SMACOF embedding already reaches about 0.03 (the corrected IMDB
# geometry is close to a line, as in {doc}`the MDS chapter <04_mds_and_stress>`), while the MiniLM table (about 0.62) fits
# no better than random vectors: on the estimate it lies below all 100 random tables
# (0.619 to 0.626 for the middle 95%), but the widened interval of that margin reaches
# +0.004, so the lead does not survive the disagreement of the two noise corrections. It
# fits worse than sinusoids (about 0.59): over 128 positions of long reviews the table
# hardly follows the corpus geometry.
# ```
#
# 2. Save a tiny RoPE model, `transformers.LlamaConfig(hidden_size=64,
#    num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=1,
#    intermediate_size=128).save_pretrained(folder)`, copy the bundled tokenizer into the
#    folder (`pg.default_model_path()`), and audit SST-2 with `model=folder`. Why does the
#    position offset not matter here, and why are there no per-layer numbers?
#
# ```{admonition} Solution
# :class: dropdown
# The audit reads the configuration only (no weights are needed) and builds RoPE's
# vectors $r_m = R_m u$ with head size 16. Their distances depend on $m - n$ alone, so
# shifting every position by the tokenizer's `[CLS]` changes no distance and no stress.
# Per-layer projected stress pushes an additive position vector through the query and key
# maps; RoPE adds no vector to the input (it rotates queries and keys inside attention),
# so the probe does not apply, and the report says so instead of computing something else.
# ```
#
# 3. Audit SST-2 at $n = 16$, 32 and 48 and compare MiniLM's monotonicity violation rate
#    in offset order. What does it say about comparing a rate with P1's 25.4%?
#
# ```{admonition} Solution
# :class: dropdown
# `{n: au.audit("sst2", n_positions=n, progress=False).monotonicity.loc["model", "offset"] for n in (16, 32, 48)}`
# gives about 0.267, 0.285 and 0.281: the rate depends on how many positions are compared
# ({doc}`the monotonicity chapter <08_monotonicity_ntk>` follows it to $n = 510$, where it reaches 39%). A violation rate is only
# comparable at the same $n$, ordering and tie rule, which P1 does not state.
# ```
#
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
