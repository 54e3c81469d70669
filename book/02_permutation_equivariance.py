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
# # Without positions, order is invisible
#
# Why does a transformer need a positional encoding at all? The first result of P1
# {cite:p}`cirrincione2026geometry`, its Theorem 1, answers it: **a transformer without
# positional signal is {term}`permutation-equivariant <permutation equivariance>`.** Shuffle the tokens of its input and its
# outputs come out shuffled the same way, and otherwise unchanged. Whatever such a model
# computes about a token, it computes regardless of where the token stands.
#
# This chapter states the theorem and sketches its proof, checks it numerically on a
# small encoder and on a pretrained one, and then trains encoders on tasks whose answer
# depends on order: without positions they stay at chance, with any positional signal
# they learn, with one instructive exception. It ends with the {term}`causal mask`, which breaks
# the symmetry with no positions at all.

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
import copy
import dataclasses

import numpy as np
import pandas as pd

import posgeo as pg
from posgeo.experiments import equivariance as ex

pg.notebook_setup()

# %% [markdown]
# ## The theorem
#
# Write the input as a matrix $X \in \mathbb{R}^{n \times d}$, one row per token, and a
# reordering of the tokens as an $n \times n$ permutation matrix $\pi$: $\pi X$ has the same
# rows as $X$ in another order. A map $f$ from $n \times d$ to $n \times d'$ matrices is
# **permutation-equivariant** when
#
# $$
# f(\pi X) = \pi f(X) \qquad \text{for every input } X \text{ and every permutation } \pi .
# $$
#
# **Theorem** (P1, Theorem 1). A transformer encoder (any depth, width and number of
# heads, pre- or post-LayerNorm, with residual connections) that receives no positional
# signal and uses no attention mask is permutation-equivariant.
#
# *Proof sketch.* The encoder is a composition of three kinds of maps; each is equivariant,
# and so are compositions and sums of equivariant maps (residual connections).
#
# 1. **Token-wise maps.** The embedding lookup, LayerNorm, the feed-forward block and every
#    linear projection apply one function $g$ to each row separately, so applying it
#    before or after reordering the rows gives the same result: $g(\pi X) = \pi g(X)$.
# 2. **Attention.** With $Q = XW_Q$, $K = XW_K$, $V = XW_V$ (token-wise), reordering the
#    input reorders all three: $\pi Q$, $\pi K$, $\pi V$. The score matrix becomes
#    $\pi Q (\pi K)^\top = \pi S \pi^\top$: rows *and* columns permuted the same way. The
#    softmax normalises each row on its own, and permuting the entries of a row permutes
#    its softmax, so $\operatorname{softmax}(\pi S \pi^\top) = \pi \operatorname{softmax}(S) \pi^\top$.
#    Multiplying by the values, $\pi A \pi^\top \pi V = \pi A V$, because $\pi^\top \pi = I$.
#    Concatenating heads is token-wise.
# 3. **Composition.** If $f$ and $g$ are equivariant, $f(g(\pi X)) = f(\pi g(X)) = \pi f(g(X))$
#    and $f(\pi X) + g(\pi X) = \pi (f(X) + g(X))$. $\square$
#
# **Corollary.** Mean pooling turns equivariance into *invariance*:
# $\tfrac1n \mathbf 1^\top \pi f(X) = \tfrac1n \mathbf 1^\top f(X)$, since
# $\mathbf 1^\top \pi = \mathbf 1^\top$. A classifier reading the mean of the outputs gives
# the same answer on every reordering of its input: it sees a *multiset* of tokens.
#
# What breaks the symmetry is anything that depends on the slot index $t$ of a token: an
# additive table ($\pi X + P \ne \pi(X + P)$ unless $P$ has equal rows), RoPE's rotation of
# queries and keys by an angle proportional to $t$ {cite:p}`su2021roformer`, ALiBi's bias
# $-m|i - j|$ on the scores {cite:p}`press2022alibi`, or a causal mask that lets slot $i$
# see only slots $j \le i$. Equivariance of self-attention is also the starting point of
# architectures built for sets {cite:p}`zaheer2017deepsets,lee2019set`, where it is wanted.

# %% [markdown]
# ## Checking it numerically
#
# A proof can also be checked by computing. For a batch of random inputs $X$ (shape
# $(B, n, d)$) and many random permutations $\pi$, `equivariance_errors` measures
#
# $$
# e_\pi = \max \bigl| f(\pi X) - \pi f(X) \bigr|,
# $$
#
# the largest deviation over batch, tokens and features. We report it relative to the
# output scale $\max |f(X)|$, the unit in which rounding errors come: about
# $2 \times 10^{-16}$ per operation in float64 and $10^{-7}$ in float32
# (`np.finfo(...).eps`). An exactly equivariant map gives a few of those units; any
# positional signal gives a relative error of order one.
#
# The experiment sizes come from the {term}`profile` (`POSGEO_PROFILE`, default `small`, see the
# end of the chapter); models run on a GPU when there is one (`device="auto"`):

# %%
settings = ex.equivariance_settings()
device = pg.resolve_device(settings.device)
pd.Series({k: v for k, v in dataclasses.asdict(settings).items() if k != "variants"}, name=settings.profile).to_frame()

# %% [markdown]
# **The posgeo encoder.** We build the book's small transformer (`pg.Transformer`) once
# per positional signal, plus once with no positions and a causal mask, and run it in
# float64. The weights are random, drawn at a larger scale (`verify_init_std`) than the
# training default of 0.02: at that default every query attends almost uniformly, and a
# signal that acts inside attention (RoPE above all) barely shows. Equivariance is a
# property of the architecture, so trained weights are not needed; the trained models of
# the next section are checked too.

# %%
CHECKS = {
    "none": ("none", False),
    "none + causal mask": ("none", True),
    "sinusoidal": ("sinusoidal", False),
    "learned": ("learned", False),
    "lowrank": ("lowrank", False),
    "rope": ("rope", False),
    "alibi": ("alibi", False),
}
encoders = {
    name: pg.Transformer(settings.verification_config(position, causal=causal), seed=0).double().to(device).eval()
    for name, (position, causal) in CHECKS.items()
}
pd.Series({name: pg.count_parameters(model) for name, model in encoders.items()}, name="parameters").to_frame()

# %% tags=["stochastic"] tolerance={"atol": 1e-12, "rtol": 0}
# The errors of the equivariant model are float64 rounding, whose digits depend on the CPU's
# kernels: compared to 1e-12 (the bound asserted below), the other entries are of order one.
rng = np.random.default_rng(0)
X = rng.standard_normal((settings.batch_size, settings.seq_len, settings.verify_d_model))
errors = {
    f"posgeo, {name}": ex.equivariance_errors(ex.sequence_map(model), X, n_permutations=settings.n_permutations, seed=1)
    for name, model in encoders.items()
}
ex.equivariance_table(errors)

# %% [markdown]
# **A pretrained encoder.** The same check on a real model: all-MiniLM-L6-v2
# {cite:p}`wang2020minilm,reimers2019sbert`, a six-layer BERT-architecture encoder with a
# learned absolute position table (`pg.load_pretrained()`, bundled for offline use; eager
# attention). `without_position_embeddings` returns a copy whose table is all zeros; the
# token-type embedding stays, but with the default token types it adds the same vector at
# every slot, which commutes with any permutation. We feed random vectors as
# `inputs_embeds` (no tokenizer involved), in float32 as the model ships, and once more in
# float64 to show that the float32 error is rounding and nothing else.

# %% tags=["stochastic"] tolerance={"atol": 1e-05, "rtol": 0}
# Rounding errors again, now also float32 ones (other CPU kernel paths turned 5e-06 into
# 6e-06): compared to 1e-5, the bound asserted below.
pretrained = pg.load_pretrained(settings.pretrained)  # None: all-MiniLM-L6-v2 (shared: copy before moving)
pretrained_models = {
    "pretrained, positions removed": pg.without_position_embeddings(pretrained).to(device),
    "pretrained, positions removed, float64": pg.without_position_embeddings(pretrained).double().to(device),
    "pretrained": copy.deepcopy(pretrained).to(device),
}
X_pretrained = rng.standard_normal((settings.pretrained_batch_size, settings.pretrained_seq_len, pretrained.config.hidden_size))
errors |= {
    name: ex.equivariance_errors(ex.sequence_map(model), X_pretrained, n_permutations=settings.n_permutations, seed=1)
    for name, model in pretrained_models.items()
}
ex.equivariance_table(errors)

# %% [markdown]
# {numref}`fig-ch4-errors` shows every permutation's error, relative to the output scale, on
# a log axis, with the two bounds used below ($10^{-5}$ and $10^{-2}$) and the float64 and
# float32 machine epsilons as reference lines:

# %% mystnb={"figure": {"caption": "Relative equivariance error of each map under each random permutation (log axis; exact zeros drawn at 1e-18): a box plot per map, every permutation a dot, coloured by whether all of the map's errors lie below 1e-5. Reference lines: the bounds 1e-5 and 1e-2 and the float64 and float32 machine epsilons. Hover a dot for its permutation and error.", "name": "fig-ch4-errors"}} tags=["stochastic"] tolerance={"atol": 1e-05, "rtol": 0.001}
# The errors of the two tables above: float64 and float32 rounding where the map is
# equivariant, compared to 1e-5 like the second table (the bound asserted below); the errors
# near 1 of the maps that are not equivariant are float32 results shown to 4 digits, whose
# last digit other CPU kernel paths move (0.9959 -> 0.9958): compared to 0.1% of the value.
ex.plot_equivariance_errors(errors)

# %% [markdown]
# Without positions, the posgeo encoder is equivariant to within a few float64 epsilons,
# the pretrained encoder in float64 to within a few tens of them (accumulated over six
# layers), and the pretrained encoder in float32 to within float32 rounding (some tens of
# float32 epsilons). With any
# positional signal, and with a causal mask, the deviation is as large as the outputs
# themselves. The assertions encode the two groups:

# %%
relative = pd.Series({name: r.max_relative_error for name, r in errors.items()}, name="max relative error")
position_free = ["posgeo, none", "pretrained, positions removed", "pretrained, positions removed, float64"]
assert (relative[position_free] < 1e-5).all()
assert relative["posgeo, none"] < 1e-12 and relative["pretrained, positions removed, float64"] < 1e-12
assert (relative.drop(position_free) > 1e-2).all()
(relative < 1e-5).rename("equivariant").to_frame()

# %% [markdown]
# ## The consequence: order-sensitive tasks
#
# If a model cannot tell a sequence from its reorderings, it cannot learn anything that
# depends on order. Two tasks from `posgeo` make this concrete; in both, the answer
# depends on order but the multiset of tokens carries (almost) no information about it:
#
# - **first marker** (`FirstMarkerTask`): filler tokens with two markers A and B at random
#   slots; is A before B? Swapping the two markers gives a sequence with the same multiset,
#   the same probability and the opposite label. An order-blind classifier answers both
#   the same way, so it is right on exactly one of each pair: its expected accuracy is
#   exactly 1/2, *whatever its weights*.
# - **sorted** (`SortedTask`): random tokens; is the sequence non-decreasing? (Multisets
#   differ between the classes only through the rare sequences that cannot be shuffled
#   into an unsorted order, such as all tokens equal.)
#
# We train the encoder with mean pooling (which adds no positional preference of its own)
# once per positional signal, plus two variants with a causal mask, on both tasks, and
# evaluate each model on fresh sequences. "At chance" is decided by a binomial test: a
# classifier that guesses gets $K \sim \operatorname{Bin}(N, 1/2)$ of $N$ evaluation
# sequences right, and `chance_interval` gives the central 99% range of $K/N$:

# %%
chance = ex.chance_interval(settings.eval_samples, chance=0.5, level=0.99)
pd.DataFrame([dataclasses.asdict(chance)])

# %% [markdown]
# Training: the same seed, steps, batch size and learning rate for every model (final
# training loss below; runs are cached under `POSGEO_CACHE_DIR`).

# %% tags=["stochastic"] tolerance={"atol": 0.2, "rtol": 0}
# Shown to 1 decimal, compared to 0.2: the final loss is one batch's, and other CPU kernel
# paths (same seed) moved it by up to 0.09.
runs = ex.train_order_tasks(settings)
pd.DataFrame(
    {task: {label: runs[task, label].final("loss") for label, _, _ in settings.variants} for task in settings.tasks()}
).rename_axis("final training loss").round(1)

# %% [markdown]
# The accuracies, whether each lies in the chance interval, and two symmetry checks on the
# trained first-marker models (random input embeddings, relative error below $10^{-5}$):
# equivariance under random permutations, and under one particular permutation, the
# **reversal** of the sequence.

# %% tags=["stochastic"] tolerance={"atol": 0.05, "rtol": 0}
# Shown to 2 decimals, compared to 0.05: an accuracy at chance is a Bin(N, 1/2)/N draw, and
# two such draws differ by up to 0.047 (3 sd); other CPU kernel paths moved the others by 0.015.
table = ex.order_task_table(runs, settings)
table.round(2)

# %% [markdown]
# What the table shows:
#
# - **No positions: at chance on both tasks.** Training cannot help: the position-free
#   model is exactly permutation-equivariant, so its mean-pooled output depends on the
#   multiset alone.
# - **Sinusoidal, learned, low-rank, RoPE: both tasks learned.** Each breaks the
#   permutation symmetry, and none is equivariant under reversal.
# - **ALiBi: the sorted task learned, the first-marker task at chance.** ALiBi breaks
#   permutation equivariance, but not all of it. Its bias $-m_h|i - j|$ is unchanged when
#   the sequence is read backwards, $|i - j| = |(n-1-i) - (n-1-j)|$, so a bidirectional
#   ALiBi encoder is exactly equivariant under reversal (the `reversal-equivariant`
#   column), and with mean pooling it gives the same answer on a sequence and on its
#   reversal. Reversal swaps the order of A and B and preserves the distribution of
#   first-marker sequences, so the swap argument above applies with reversal in place of
#   the marker swap: accuracy exactly 1/2 in expectation, whatever ALiBi learns. Sorting
#   survives because the reversal of a sorted sequence is non-*increasing*, a sequence the
#   task almost never shows, so giving both the same answer costs almost nothing.
# - **With a causal mask, both ALiBi and the position-free model learn both tasks.** The
#   mask breaks the reversal symmetry (and every other one), as the next section shows.
#
# The lesson goes beyond ALiBi: a positional signal helps only if it breaks the symmetry
# that relates the inputs the task must tell apart. (ALiBi was designed for causal
# language models {cite:p}`press2022alibi`, where the mask supplies the direction.)

# %% tags=["stochastic"] tolerance={"atol": 0.05, "rtol": 0}
accuracy = table.xs("accuracy", axis=1, level=1)
at_chance = table.xs("at chance", axis=1, level=1)
symmetry = table["symmetry"]
assert at_chance.loc["none"].all() and symmetry.loc["none"].all()
for label in ["sinusoidal", "learned", "lowrank", "rope", "alibi + causal mask", "none + causal mask"]:
    assert (accuracy.loc[label] > 0.9).all(), label
    assert not symmetry.loc[label].any(), label
assert at_chance.loc["alibi", "first marker"] and accuracy.loc["alibi", "sorted"] > 0.9
assert symmetry.loc["alibi", "reversal-equivariant"] and not symmetry.loc["alibi", "permutation-equivariant"]
accuracy.assign(chance_low=chance.low, chance_high=chance.high).round(2)  # the accuracies' tolerance, as above

# %% [markdown]
# ## The causal mask breaks the symmetry without positions
#
# The row `posgeo, none + causal mask` in {numref}`fig-ch4-errors` has no positional signal, yet its
# error is as large as its outputs. A causal mask lets slot $i$ attend only to slots
# $j \le i$: the mask matrix $M$ is lower-triangular, and $\pi M \pi^\top = M$ holds for the
# identity permutation only. Concretely, the output at slot $i$ is a function of the
# token at slot $i$ and of the *prefix* $x_1, \dots, x_i$ (as a set, in the first layer).
# A permutation changes which tokens form each prefix, so it changes the outputs beyond
# reordering them: the first slot sees only itself, the last sees everything, and the
# model can tell them apart by how much they see. That is enough to learn both tasks
# above, with no positional encoding at all.
#
# Decoder-only models without positional encodings ({term}`NoPE`) rely on exactly this: the mask
# is a positional signal in disguise {cite:p}`haviv2022transformer,zuo2024position`. A later
# chapter measures how much position such a model recovers.

# %% [markdown]
# ## The full profile
#
# The numbers above come from the `small` profile, sized for two CPU cores (the chapter
# runs in a few minutes). The `full` profile runs the same code at paper scale: a larger
# verification encoder (4 layers, width 256) and 1,000 permutations; bert-base-uncased
# {cite:p}`devlin2019bert` as the pretrained model, on longer inputs; trained encoders of
# width 128 with 4 layers on sequences of 32 tokens for 3,000 steps, evaluated on 16,384
# sequences. Every size is in `ex.equivariance_settings("full")`. It needs a GPU for the
# training and the Hugging Face hub for bert-base-uncased. Locally:
#
# ```bash
# POSGEO_PROFILE=full jupyter nbconvert --to notebook --execute book/02_permutation_equivariance.ipynb
# ```
#
# On Colab, select a GPU runtime and set the profile before the first code cell runs:
#
# ```python
# import os
# os.environ["POSGEO_PROFILE"] = "full"
# ```
#
# The assertions are the same in both profiles, so a full run also checks that the claims
# hold at scale.

# %% [markdown]
# ## Summary
#
# - Without positional signal and without a mask, a transformer encoder is
#   permutation-equivariant, $f(\pi X) = \pi f(X)$ (P1, Theorem 1): token-wise layers and
#   attention commute with permutation matrices. With mean pooling its sequence-level
#   output is permutation-invariant.
# - Numerically: relative errors at the level of float64 (posgeo encoder, pretrained
#   MiniLM in float64) or float32 rounding (MiniLM as shipped) without positions, of order
#   one with any positional signal or a causal mask (`equivariance_errors`,
#   `sequence_map`).
# - Consequently a position-free encoder stays at chance on order-sensitive tasks,
#   whatever it is trained for; every positional signal lets it learn them, provided it
#   breaks the relevant symmetry. A bidirectional ALiBi encoder is still
#   reversal-equivariant and stays at chance on a task that reversal flips.
# - A causal mask breaks equivariance on its own: decoders without positional encodings
#   can still learn order.
#
# ## Exercises
#
# 1. **First-token pooling.** Train the position-free encoder on the first-marker task with
#    `pooling="first"` (`dataclasses.replace(settings.model_config(task, "none"),
#    pooling="first")`). Show that its accuracy cannot exceed $\tfrac12 + \tfrac1n$ for
#    sequences of length $n$ (hint: what does the output at slot 0 know when the token
#    there is a marker, and when it is not?), and compare with what training reaches.
#
# ```{admonition} Solution
# :class: dropdown
# Without positions and mask the encoder is equivariant, so its output at slot 0 is a
# function of the token at slot 0 and of the multiset of all tokens. When slot 0 holds a
# filler, swapping A and B gives a sequence with the same token at slot 0, the same
# multiset, the same probability and the opposite label: the model is right on at most one
# of the two, so on these sequences its accuracy is at most $\tfrac12$. When slot 0 holds a
# marker, that marker comes first and the model can always be right. Slot 0 holds a marker
# with probability $2/n$, so the accuracy is at most
# $\tfrac2n \cdot 1 + (1 - \tfrac2n)\cdot\tfrac12 = \tfrac12 + \tfrac1n$: 0.5833 for this
# chapter's $n = 12$. Trained with the chapter's settings
# (`task = settings.tasks()["first marker"]`, `run = pg.train(cfg, settings.train_config(), task)`
# with the configuration above) and evaluated like the table
# (`pg.evaluate(run.model(), task, n_batches=8, batch_size=256, seed=12345)`), the model
# reaches 0.582: it learns the whole bound, reading a marker at slot 0 and guessing
# otherwise. That is outside the chance interval (0.4717 to 0.5283), although the model
# knows nothing about order beyond slot 0: beating chance does not show that a model
# uses order.
# ```
# 2. **ALiBi's symmetries.** Show that for $n \ge 3$ the only permutations $\pi$ with
#    $\pi B \pi^\top = B$ for $B_{ij} = -|i - j|$ are the identity and the reversal. Check
#    it with `equivariance_errors(..., permutations=...)` on the posgeo ALiBi encoder.
#    RoPE's scores also depend only on $i - j$: why is a bidirectional RoPE encoder *not*
#    reversal-equivariant?
#
# ```{admonition} Solution
# :class: dropdown
# $\pi B \pi^\top = B$ means $|\pi(i) - \pi(j)| = |i - j|$ for all $i, j$: $\pi$ is an
# isometry of the points $0, \dots, n-1$ on a line. The only pair at distance $n - 1$ is
# $\{0, n-1\}$, so $\pi(0)$ is $0$ or $n - 1$. Then $|\pi(i) - \pi(0)| = i$ leaves a single
# choice for every $i$: $\pi(i) = i$ if $\pi(0) = 0$, and $\pi(i) = n - 1 - i$ if
# $\pi(0) = n - 1$. These are the identity and the reversal. Numerically, for the
# ALiBi encoder of this chapter on random inputs of 4 slots, passing all 24 permutations
# (`permutations=np.array(list(itertools.permutations(range(4))))`), only the identity
# (relative error 0) and the reversal ($5 \cdot 10^{-16}$) are below $10^{-5}$; every other
# permutation gives at least 0.04. RoPE's score between slots $i$ and $j$ is
# $q_i^\top R_{j-i} k_j$: it depends on the *signed* offset. Reversal turns $j - i$ into
# $i - j$, and $R_{-t} = R_t^\top \ne R_t$, so the scores change; the RoPE encoder's relative
# error under reversal (`permutations=np.arange(16)[::-1]`) is about 0.6, against
# $10^{-15}$ for ALiBi.
# ```
# 3. **What a causal model still cannot see.** For a one-layer causal encoder without
#    positions, show that the output at the last slot does not change when the first
#    $n - 1$ tokens are permuted. Measure it, then repeat with two layers. What does the
#    answer mean for a classifier with `pooling="last"`?
#
# ```{admonition} Solution
# :class: dropdown
# In one layer the last slot's query comes from its own token and it attends to the keys
# and values of all $n$ tokens; softmax attention over a set does not depend on the order
# of its elements, and the rest of the layer is token-wise. So the last output is a
# function of the last token and of the multiset of the others. To measure it, build
# `cfg = dataclasses.replace(settings.verification_config("none", causal=True), n_layers=1)`,
# `fn = ex.sequence_map(pg.Transformer(cfg, seed=0).double().eval())`, and compare
# `fn(X[:, perm])[:, -1]` with `fn(X)[:, -1]` for permutations `perm` that keep slot 15 in
# place: over 50 of them the largest change is $10^{-15}$ ($4 \cdot 10^{-16}$ of the output
# scale), rounding. With two layers it is about 0.3 of the output scale: the first layer's
# outputs at the earlier slots depend on their prefixes, which the permutation changes. A
# one-layer causal classifier with `pooling="last"` is therefore exactly as blind as the
# first-token classifier of exercise 1 (at most $\tfrac12 + \tfrac1n$ on the first-marker
# task); only from two layers on can it use the order the mask reveals.
# ```
#
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
