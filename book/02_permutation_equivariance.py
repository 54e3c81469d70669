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
# :::{admonition} In short
# :class: tip
# **The question.** Why does a transformer need a positional encoding at all? P1's first
# result, Theorem 1 {cite:p}`cirrincione2026geometry`, answers: without positional signal a
# transformer is {term}`permutation-equivariant <permutation equivariance>`, so it cannot
# tell a sentence from any reordering of its words.
#
# **The book's answer.** The theorem holds up to rounding: shuffling the input of a
# position-free encoder, ours or a pretrained one with its position table removed, changes
# its outputs by rounding error only ({ref}`the check <sec-ch02-check>`). Such an encoder
# stays at chance on order-sensitive tasks however long it trains, while every positional
# signal lets it learn them ({ref}`the tasks <sec-ch02-tasks>`). Two twists: a
# bidirectional ALiBi encoder keeps one symmetry and stays blind to a task that it flips
# ({ref}`ALiBi <sec-ch02-alibi>`), and a causal mask breaks the symmetry with no positions
# at all ({ref}`the mask <sec-ch02-causal>`).
#
# **You will learn** to write the permutation check for any encoder, to find the symmetry a
# positional signal leaves intact, and to tell an accuracy from guessing.
# :::
#
# Shuffle the words of "the dog bit the man" and you get another sentence with another
# meaning. A model that computes the same thing, shuffled, for every reordering cannot know
# which one it was given. A transformer without positions is such a model.

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
        "https://raw.githubusercontent.com/posgeo/geometry-of-positional-encodings/main/book/_ch02.py", "_ch02.py"
    )

# %% tags=["hide-cell"]
import copy
import itertools

import numpy as np
import pandas as pd
import torch
from scipy.stats import binom

import posgeo as pg
import _ch02 as ch

pg.notebook_setup()
torch.set_num_threads(1)  # these models are tiny: one thread is the fastest

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
# *Proof sketch.* The encoder composes three kinds of maps; each is equivariant, and so are
# compositions and sums (residual connections) of equivariant maps.
#
# 1. **Token-wise maps.** The embedding lookup, LayerNorm, the feed-forward block and every
#    linear projection apply one function $g$ to each row separately: $g(\pi X) = \pi g(X)$.
# 2. **Attention.** With $Q = XW_Q$, $K = XW_K$, $V = XW_V$ (token-wise), reordering the
#    input reorders all three: $\pi Q$, $\pi K$, $\pi V$. The score matrix becomes
#    $\pi Q (\pi K)^\top = \pi S \pi^\top$: rows *and* columns permuted the same way. The
#    row-wise softmax commutes with permuting a row's entries, so
#    $\operatorname{softmax}(\pi S \pi^\top) = \pi \operatorname{softmax}(S) \pi^\top$.
#    Multiplying by the values, $\pi A \pi^\top \pi V = \pi A V$, because $\pi^\top \pi = I$.
#    Concatenating heads is token-wise.
# 3. **Composition.** If $f$ and $g$ are equivariant, $f(g(\pi X)) = f(\pi g(X)) = \pi f(g(X))$
#    and $f(\pi X) + g(\pi X) = \pi (f(X) + g(X))$. $\square$
#
# **Corollary.** Mean pooling turns equivariance into *invariance*:
# $\tfrac1n \mathbf 1^\top \pi f(X) = \tfrac1n \mathbf 1^\top f(X)$, since
# $\mathbf 1^\top \pi = \mathbf 1^\top$. A classifier reading the mean of the outputs sees
# only the *multiset* of tokens.
#
# What breaks the symmetry is anything that depends on the slot index $t$ of a token: an
# additive table ($\pi X + P \ne \pi(X + P)$ unless $P$ has equal rows), RoPE's rotation of
# queries and keys by an angle proportional to $t$ {cite:p}`su2021roformer`, ALiBi's bias
# $-m|i - j|$ on the scores {cite:p}`press2022alibi`, or a causal mask that lets slot $i$
# see only slots $j \le i$. Architectures built for sets want this equivariance
# {cite:p}`zaheer2017deepsets,lee2019set`.

# %% [markdown]
# (sec-ch02-check)=
# ## The permutation check
#
# **Shuffling the input of a position-free encoder shuffles its outputs and changes them by
# rounding error only.** The check computes the theorem's equation: feed a batch $X$ and its
# permuted copy $\pi X$, and measure the largest entry of $f(\pi X) - \pi f(X)$. We build
# the book's small transformer (`pg.Transformer`, 2 layers, width 32) with random weights in
# float64, once without positions and once with the sinusoidal table. The weights are drawn
# larger than at training time (`init_std=0.2`), so that attention is far from uniform.

# %% tags=["stochastic"] tolerance={"atol": 1e-12, "rtol": 1e-06} tolerance_reason="the equivariant error is a float64 rounding error (about 2e-15) compared at 1e-12, far below the errors of order one that signal a broken symmetry; the weights are drawn in float32 before the cast to float64, and torch's normal sampler rounds their last bit differently on other CPUs (AVX2 and scalar paths), which moved the broken-symmetry error 1.4431909 to 1.4431908: 7e-8 of the value, inside rtol 1e-6"
def encoder(position="none", causal=False):
    """The book's small transformer with random weights, in float64."""
    config = pg.TransformerConfig(
        vocab_size=2, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16, position=position,
        causal=causal, rank=2 if position == "lowrank" else None, init_std=0.2)
    return pg.Transformer(config, seed=0).double().eval()


def permutation_error(model, X, perm):
    """max |f(πX) - πf(X)| over batch, slots and features, for one permutation of the slots."""
    with torch.no_grad():
        f_X = model(inputs_embeds=X).last_hidden_state
        f_piX = model(inputs_embeds=X[:, perm]).last_hidden_state
    return (f_piX - f_X[:, perm]).abs().max().item()


rng = np.random.default_rng(0)
X = torch.from_numpy(rng.standard_normal((4, 16, 32)))  # 4 sequences of 16 vectors of width 32
perm = np.random.default_rng(1).permutation(16)
{position: permutation_error(encoder(position), X, perm) for position in ["none", "sinusoidal"]}

# %% [markdown]
# Without positions the difference is a few units of the last digit of a float64 (relative
# precision $2 \times 10^{-16}$); with the sinusoidal table it is as large as the outputs.
# The chapter's helper runs the same check over many permutations, in units of the output
# scale $\max |f(X)|$, and finds the same number here:

# %% tags=["stochastic"] tolerance={"atol": 1e-12, "rtol": 0} tolerance_reason="float64 rounding errors (about 2e-15) whose last digits depend on the CPU's floating-point kernels; 1e-12 is far below the errors of order one that signal a broken symmetry"
mine = permutation_error(encoder("none"), X, perm)
helper = ch.equivariance_errors(encoder("none"), X.numpy(), permutations=perm)
{"by hand": mine, "helper": float(helper.errors[0]), "difference": float(mine - helper.errors[0])}

# %% [markdown]
# ## Every positional signal breaks it, and a pretrained encoder obeys it
#
# **Over 200 random permutations, the position-free encoders stay within rounding error,
# while every positional signal, and the causal mask, move the outputs by as much as their
# size.** We check our encoder with each positional signal, and a real model:
# all-MiniLM-L6-v2 {cite:p}`wang2020minilm,reimers2019sbert`, a six-layer BERT encoder with a
# learned position table, bundled with the book. To remove its positions we zero a copy's
# table; its token-type embedding adds the same vector at every slot, which commutes with any
# permutation. MiniLM runs in float32 as it ships, and in float64 to show that its float32
# error is rounding.

# %%
signals = ["none", "none + causal mask", "sinusoidal", "learned", "lowrank", "rope", "alibi"]
models = {f"posgeo, {s}": encoder(s.split(" ")[0], causal=s.endswith("mask")) for s in signals}

minilm = pg.load_pretrained()  # all-MiniLM-L6-v2
no_positions = copy.deepcopy(minilm)
no_positions.embeddings.position_embeddings.weight.data.zero_()
X_minilm = rng.standard_normal((2, 16, 384))  # 2 sequences of 16 vectors of width 384

# %% mystnb={"figure": {"caption": "Relative equivariance error of each map under each random permutation (log axis; exact zeros drawn at 1e-18): a box plot per map, every permutation a dot, coloured by whether all of the map's errors lie below 1e-5. Reference lines: the bounds 1e-5 and 1e-2 and the float64 and float32 machine epsilons. Hover a dot for its permutation and error.", "name": "fig-ch02-errors"}} tags=["stochastic"] tolerance={"atol": 1e-05, "rtol": 0.001} tolerance_reason="float64 and float32 rounding errors where the map is equivariant, compared to 1e-5 (other CPU kernel paths turned a float32 error of 5e-06 into 6e-06); the errors near 1 of the other maps are float32 results shown to 4 digits whose last digit other kernel paths move (0.9959 to 0.9958): 0.1% of the value"
errors = {name: ch.equivariance_errors(model, X.numpy(), n_permutations=200, seed=1) for name, model in models.items()}
errors |= {
    "MiniLM, positions removed": ch.equivariance_errors(no_positions, X_minilm, n_permutations=200, seed=1),
    "MiniLM, positions removed, float64": ch.equivariance_errors(
        copy.deepcopy(no_positions).double(), X_minilm, n_permutations=200, seed=1),
    "MiniLM": ch.equivariance_errors(minilm, X_minilm, n_permutations=200, seed=1),
}
ch.plot_equivariance_errors(errors)

# %% [markdown]
# {numref}`fig-ch02-errors` has two groups with nothing in between. Without positions, our
# encoder is equivariant to within a few float64 epsilons, and MiniLM, over six layers, to
# within a few tens of epsilons in either precision.

# %% tags=["remove-cell"]
relative = pd.Series({name: r.relative.max() for name, r in errors.items()})
position_free = ["posgeo, none", "MiniLM, positions removed", "MiniLM, positions removed, float64"]
assert (relative[position_free] < 1e-5).all()
assert relative["posgeo, none"] < 1e-12 and relative["MiniLM, positions removed, float64"] < 1e-12
assert (relative.drop(position_free) > 1e-2).all()
assert 4e-16 < relative["posgeo, none"] < 2e-14  # "a few float64 epsilons"
assert relative["MiniLM, positions removed"] < 100 * np.finfo(np.float32).eps  # "some tens of float32 epsilons"
assert abs(mine - helper.errors[0]) == 0.0

# %% [markdown]
# (sec-ch02-tasks)=
# ## Without positions, order-sensitive tasks stay at chance
#
# **A position-free encoder trained on a task whose answer depends on order stays at
# chance, and the same encoder with any positional signal learns it.** In both of our tasks
# the answer depends on order but the multiset of tokens says (almost) nothing about it:
#
# - **first marker** (`pg.FirstMarkerTask`): filler tokens with two markers A and B at random
#   slots; is A before B? Swapping the two markers gives a sequence with the same multiset,
#   the same probability and the opposite label. An order-blind classifier answers both alike
#   and is right on exactly one: its expected accuracy is exactly 1/2, *whatever its weights*.
# - **sorted** (`ch.SortedTask`): random tokens; is the sequence non-decreasing? The classes'
#   multisets differ only through rare sequences that no shuffle can unsort (all tokens equal).
#
# Here are four first-marker sequences (A = 8, B = 9, filler 0 to 7) and their labels:

# %%
tasks = {"first marker": pg.FirstMarkerTask(seq_len=12, n_filler=8), "sorted": ch.SortedTask(vocab_size=16, seq_len=12)}
batch = tasks["first marker"].sample(4, torch.Generator().manual_seed(0))
pd.DataFrame(batch.tokens.numpy()).assign(label=batch.targets.numpy())

# %% [markdown]
# We train the encoder of the check, with token embeddings and a two-class head on the mean
# of its outputs, once per positional signal on each task: 300 AdamW steps of 64 fresh
# sequences, learning rate 0.003, one seed.

# %%
def classifier(task, position, causal=False):
    return pg.TransformerConfig(
        vocab_size=task.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=task.seq_len,
        position=position, rank=2 if position == "lowrank" else None, causal=causal, n_classes=2, pooling="mean")


training = pg.TrainConfig(steps=300, batch_size=64, lr=3e-3, device="auto", log_every=50, seed=0)
runs = {
    (name, signal): pg.train(classifier(task, signal.split(" ")[0], signal.endswith("mask")), training, task, progress=False)
    for name, task in tasks.items() for signal in signals
}

# %% [markdown]
# Each model is evaluated on $N = 2048$ fresh sequences. A guessing classifier gets
# $K \sim \operatorname{Bin}(N, 1/2)$ of them right, so its accuracy $K/N$ lands in the
# central 99% range:

# %%
N = 2048
chance = binom.ppf([0.005, 0.995], N, 0.5) / N
chance.round(4)

# %% mystnb={"figure": {"caption": "Accuracy of the encoder trained with each positional signal on the two order-sensitive tasks, with its 95% interval over the 2048 evaluation sequences (exact binomial). The grey band is where a classifier that guesses lands with probability 99%. Hover a dot for its numbers.", "name": "fig-ch02-accuracy"}} tags=["stochastic"] tolerance={"atol": 0.05, "rtol": 0} tolerance_reason="accuracies and their interval bounds: a chance-level accuracy is a Bin(N, 1/2)/N draw, two such draws differ by up to 0.047 (3 sd), and other CPU kernel paths moved the trained accuracies by up to 0.015"
rows = []
for (name, signal), run in runs.items():
    accuracy = pg.evaluate(run.model(), tasks[name], n_batches=8, batch_size=256, seed=12345)
    low, high = ch.clopper_pearson(round(accuracy * N), N)
    rows.append({"positional signal": signal, "task": name, "accuracy": accuracy, "low": low, "high": high})
accuracies = pd.DataFrame(rows)
ch.plot_accuracies(accuracies, chance)

# %% [markdown]
# The position-free encoder is at chance on both tasks: its mean-pooled output depends on the
# multiset alone, and no training can change that. Every other encoder learns both tasks,
# except ALiBi, which stays at chance on the first-marker task.

# %% tags=["remove-cell"]
acc = accuracies.set_index(["positional signal", "task"])["accuracy"].unstack()
inside = lambda a: chance[0] <= a <= chance[1]  # noqa: E731
assert inside(acc.loc["none", "first marker"]) and inside(acc.loc["none", "sorted"])
for signal in ["sinusoidal", "learned", "lowrank", "rope", "none + causal mask"]:
    assert (acc.loc[signal] > 0.9).all(), signal
    assert (accuracies.query("`positional signal` == @signal")["low"] > chance[1]).all(), signal
assert inside(acc.loc["alibi", "first marker"]) and acc.loc["alibi", "sorted"] > 0.9
assert (accuracies["low"] >= 0).all() and (accuracies["high"] <= 1).all()

# %% [markdown]
# (sec-ch02-alibi)=
# ## ALiBi keeps one symmetry: reversal
#
# **A bidirectional ALiBi encoder is exactly equivariant under reversal, and a task that
# reversal flips stays at chance for it.** ALiBi's bias $-m_h|i - j|$ is unchanged when the
# sequence is read backwards, $|i - j| = |(n-1-i) - (n-1-j)|$, so the proof above goes
# through for the reversal $\rho$, and for no other permutation but the identity:
# $f(\rho X) = \rho f(X)$. With mean pooling the ALiBi classifier answers a sequence and its
# reversal alike. Reversal swaps the order of A and B and preserves the distribution of
# first-marker sequences, so the swap argument applies: accuracy exactly 1/2 in expectation,
# whatever ALiBi learns. The sorted task survives because the reversal of a sorted sequence
# is non-*increasing*, a sequence the task almost never shows.
#
# The permutation check on the trained first-marker models shows which symmetries each
# keeps, over 200 random permutations and under the reversal alone (equivariant: relative
# error below $10^{-5}$).

# %%
X_trained = torch.randn(4, 12, 32, generator=torch.Generator().manual_seed(12345))
reversal = np.arange(12)[::-1]
symmetry = pd.DataFrame({
    signal: {
        "permutation-equivariant": ch.equivariance_errors(
            runs["first marker", signal].model(), X_trained, n_permutations=200, seed=12345).relative.max() < 1e-5,
        "reversal-equivariant": ch.equivariance_errors(
            runs["first marker", signal].model(), X_trained, permutations=reversal).relative.max() < 1e-5,
    } for signal in signals
}).T.rename_axis("positional signal")
symmetry

# %% [markdown]
# The lesson goes beyond ALiBi: **a positional signal helps only if it breaks the symmetry
# that relates the inputs the task must tell apart.** ALiBi was designed
# for causal language models {cite:p}`press2022alibi`, where the mask supplies the direction.

# %% tags=["remove-cell"]
assert symmetry["permutation-equivariant"].tolist() == [s == "none" for s in signals]
assert symmetry["reversal-equivariant"].tolist() == [s in ("none", "alibi") for s in signals]

# %% [markdown]
# (sec-ch02-causal)=
# ## The causal mask breaks the symmetry without positions
#
# **A causal mask alone, with no positional encoding, breaks equivariance and lets the
# encoder learn both tasks.** The row `posgeo, none + causal mask` of
# {numref}`fig-ch02-errors` has an error as large as its outputs, and the model learns both
# tasks in {numref}`fig-ch02-accuracy`. A causal mask lets slot $i$ attend only to
# slots $j \le i$: the mask matrix $M$ is lower-triangular, and $\pi M \pi^\top = M$ holds for
# the identity permutation only. The output at slot $i$ depends on the *prefix*
# $x_1, \dots, x_i$, and a permutation changes which tokens form each prefix: the first slot
# sees only itself, the last sees everything.
#
# Decoder-only models without positional encodings ({term}`NoPE`) rely on exactly this: the
# mask is a positional signal in disguise {cite:p}`haviv2022transformer,zuo2024position`.
# {doc}`The NoPE chapter <11_nope_adjacency>` measures how much position such a model
# recovers.
#
# ## Beside the paper
#
# P1 proves Theorem 1 and concludes that a positional signal is necessary for any task in
# which word order changes the answer; it reports no numbers for it. The book agrees with
# the theorem on every encoder it covers, and with its consequence on both tasks. Two
# qualifications remain. *Necessary* holds for bidirectional encoders without a mask: a causal
# decoder learns order with no encoding. And a positional signal is not *sufficient*: it must
# break the symmetry the task depends on, which bidirectional ALiBi does not.
#
# :::{admonition} Limits
# :class: warning
# - "Exactly" means up to floating-point rounding: the check bounds the relative error by
#   $10^{-12}$ in float64 and $10^{-5}$ in float32, where the theorem says zero.
# - The trained models are small (2 layers, width 32, 300 steps), one seed each; the
#   intervals cover the evaluation sample, not the spread over training seeds. The two
#   at-chance results hold for any weights.
# - The pretrained check feeds random vectors as input embeddings, not tokenised text, and
#   covers one small model (all-MiniLM-L6-v2); the proof does not depend on size.
# - Invariance needs a pooling that treats every slot alike: a classifier that reads the
#   first slot beats chance on the first-marker task without using order (exercise 1).
# :::
#
# ## Summary
#
# - Without positional signal and without a mask, a transformer encoder is
#   permutation-equivariant, $f(\pi X) = \pi f(X)$ (P1, Theorem 1); with mean pooling its
#   output is permutation-invariant.
# - The permutation check confirms it to rounding error on the book's encoder and on MiniLM
#   with its position table zeroed; any positional signal or a causal mask gives errors of
#   the order of the outputs.
# - A position-free encoder therefore stays at chance on order-sensitive tasks; a positional
#   signal lets it learn them only if it breaks the relevant symmetry, which bidirectional
#   ALiBi does not for a task that reversal flips.
# - A causal mask breaks equivariance on its own: decoders without positional encodings can
#   still learn order.
#
# ## Exercises
#
# 1. **First-token pooling.** Train the position-free encoder on the first-marker task with
#    `pooling="first"` (`dataclasses.replace(classifier(task, "none"), pooling="first")`).
#    Show that its accuracy cannot exceed $\tfrac12 + \tfrac1n$ for sequences of length $n$
#    (hint: what does the output at slot 0 know when the token there is a marker, and when it
#    is not?), and compare with what training reaches.
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
# $\tfrac2n \cdot 1 + (1 - \tfrac2n)\cdot\tfrac12 = \tfrac12 + \tfrac1n$: 0.5833 for
# $n = 12$. Trained like the others
# (`pg.train(dataclasses.replace(classifier(task, "none"), pooling="first"), training, task)`)
# and evaluated the same way, the model reaches 0.582: it learns the whole bound, reading a
# marker at slot 0 and guessing otherwise. That is outside the chance range (0.4717 to
# 0.5283), although the model knows nothing about order beyond slot 0: beating chance does
# not show that a model uses order.
# ```
#
# 2. **Build it for one attention layer.** Write single-head softmax self-attention in
#    numpy, $f(X) = \operatorname{softmax}(XW_Q (XW_K)^\top / \sqrt{d})\, XW_V$ with random
#    $W_Q, W_K, W_V$, and the permutation check for it. Then add ALiBi's bias $-|i - j|$ to
#    the scores and compare a random permutation with the reversal.
#
# :::{admonition} Solution
# :class: dropdown
# ```python
# rng = np.random.default_rng(0)
# W_Q, W_K, W_V = rng.standard_normal((3, 8, 8))
# def attention(X, bias=0.0):
#     S = (X @ W_Q) @ (X @ W_K).T / np.sqrt(8) + bias
#     A = np.exp(S - S.max(axis=1, keepdims=True))
#     return (A / A.sum(axis=1, keepdims=True)) @ (X @ W_V)
# X = rng.standard_normal((10, 8))
# alibi = -np.abs(np.subtract.outer(np.arange(10), np.arange(10)))
# check = lambda f, p: np.abs(f(X[p]) - f(X)[p]).max()
# perm, rev = rng.permutation(10), np.arange(10)[::-1]
# check(attention, perm), check(lambda Z: attention(Z, alibi), perm), check(lambda Z: attention(Z, alibi), rev)
# ```
# Plain attention is equivariant up to rounding (a few times $10^{-15}$); with the ALiBi bias
# a random permutation moves the outputs by 11.6, more than their largest entry (8.9), and
# the reversal by a few times $10^{-15}$ again: the same split as in the trained models.
# :::
#
# 3. **ALiBi's symmetries.** Show that for $n \ge 3$ the only permutations $\pi$ with
#    $\pi B \pi^\top = B$ for $B_{ij} = -|i - j|$ are the identity and the reversal. Check it
#    with the chapter's ALiBi encoder on all 24 permutations of 4 slots. RoPE's scores also
#    depend only on $i - j$: why is a bidirectional RoPE encoder *not* reversal-equivariant?
#
# ```{admonition} Solution
# :class: dropdown
# $\pi B \pi^\top = B$ means $|\pi(i) - \pi(j)| = |i - j|$ for all $i, j$: $\pi$ is an
# isometry of the points $0, \dots, n-1$ on a line. The only pair at distance $n - 1$ is
# $\{0, n-1\}$, so $\pi(0)$ is $0$ or $n - 1$. Then $|\pi(i) - \pi(0)| = i$ leaves a single
# choice for every $i$: $\pi(i) = i$ if $\pi(0) = 0$, and $\pi(i) = n - 1 - i$ if
# $\pi(0) = n - 1$. These are the identity and the reversal. Numerically, with
# `ch.equivariance_errors(encoder("alibi"), X[:, :4].numpy(), permutations=list(itertools.permutations(range(4))))`,
# only the identity (relative error 0) and the reversal (below $10^{-15}$) are below
# $10^{-5}$; every other permutation gives at least 0.03. RoPE's score between slots $i$ and
# $j$ is $q_i^\top R_{j-i} k_j$: it depends on the *signed* offset. Reversal turns $j - i$
# into $i - j$, and $R_{-t} = R_t^\top \ne R_t$, so the scores change; the RoPE encoder's
# relative error under reversal (`permutations=np.arange(16)[::-1]`) is 0.8, against
# below $10^{-15}$ for ALiBi.
# ```
#
# 4. **Modify and predict: a causal mask on ALiBi.** Add a causal mask to the ALiBi
#    classifier (`classifier(task, "alibi", causal=True)`). Before training it, predict its
#    first-marker accuracy: at chance like bidirectional ALiBi, or near 1? Then train and
#    evaluate it as above.
#
# ```{admonition} Solution
# :class: dropdown
# Near 1. Bidirectional ALiBi stays at chance only because of the reversal symmetry, and the
# mask breaks it: under the mask slot 0 sees one token and slot 11 sees all twelve, so
# reading a sequence backwards changes what every slot computes. Besides, the position-free
# encoder with a causal mask already learns the task, and ALiBi only adds information. Trained
# with the chapter's settings, the causal ALiBi encoder reaches 1.00 on the first-marker task
# (its relative error under reversal is about 0.2, far above rounding).
# ```
#
# 5. **What a causal model still cannot see.** For a one-layer causal encoder without
#    positions, show that the output at the last slot does not change when the first $n - 1$
#    tokens are permuted. Measure it, then repeat with two layers. What does the answer mean
#    for a classifier with `pooling="last"`?
#
# ```{admonition} Solution
# :class: dropdown
# In one layer the last slot's query comes from its own token and it attends to the keys
# and values of all $n$ tokens; softmax attention over a set does not depend on the order
# of its elements, and the rest of the layer is token-wise. So the last output is a
# function of the last token and of the multiset of the others. To measure it, build
# `model = encoder("none", causal=True)` with `n_layers=1` in its configuration and compare
# the outputs at slot 15 of `X[:, perm]` and `X` for 50 permutations `perm` that keep slot
# 15 in place: the largest change is below $10^{-15}$ of the output scale, rounding. With two
# layers it is about 0.5 of the output scale: the first layer's outputs at the earlier slots
# depend on their prefixes, which the permutation changes. A one-layer causal classifier with
# `pooling="last"` is therefore exactly as blind as the first-token classifier of exercise 1
# (at most $\tfrac12 + \tfrac1n$ on the first-marker task); only from two layers on can it use
# the order the mask reveals.
# ```

# %% tags=["remove-cell"]
# The numbers the solutions quote, recomputed.
import dataclasses

# 1. first-token pooling
task = tasks["first marker"]
first = pg.train(dataclasses.replace(classifier(task, "none"), pooling="first"), training, task, progress=False)
first_acc = pg.evaluate(first.model(), task, n_batches=8, batch_size=256, seed=12345)
assert first_acc <= 0.5 + 1 / 12 + 3 * np.sqrt(0.25 / N) and abs(first_acc - 0.582) < 0.03, first_acc
assert not inside(first_acc) and np.allclose(chance, [0.4717, 0.5283], atol=1e-4)

# 2. one attention layer, by hand
rng = np.random.default_rng(0)
W_Q, W_K, W_V = rng.standard_normal((3, 8, 8))


def attention(Z, bias=0.0):
    S = (Z @ W_Q) @ (Z @ W_K).T / np.sqrt(8) + bias
    A = np.exp(S - S.max(axis=1, keepdims=True))
    return (A / A.sum(axis=1, keepdims=True)) @ (Z @ W_V)


Z = rng.standard_normal((10, 8))
alibi_bias = -np.abs(np.subtract.outer(np.arange(10), np.arange(10)))
check = lambda f, p: np.abs(f(Z[p]) - f(Z)[p]).max()  # noqa: E731
p_rand, p_rev = rng.permutation(10), np.arange(10)[::-1]
e_plain, e_alibi, e_rev = check(attention, p_rand), check(lambda z: attention(z, alibi_bias), p_rand), check(lambda z: attention(z, alibi_bias), p_rev)
assert e_plain < 1e-14 and e_rev < 1e-14 and round(e_alibi, 1) == 11.6 and round(np.abs(attention(Z)).max(), 1) == 8.9

# 3. ALiBi's symmetries on 4 slots; RoPE under reversal
all_perms = np.array(list(itertools.permutations(range(4))))
alibi4 = ch.equivariance_errors(encoder("alibi"), X[:, :4].numpy(), permutations=all_perms)
small = alibi4.relative < 1e-5
assert [tuple(p) for p in all_perms[small]] == [(0, 1, 2, 3), (3, 2, 1, 0)]
assert alibi4.relative[0] == 0.0 and alibi4.relative[-1] < 1e-15 and alibi4.relative[~small].min() > 0.03
rev16 = np.arange(16)[::-1]
rope_rev = ch.equivariance_errors(encoder("rope"), X.numpy(), permutations=rev16).relative.max()
alibi_rev = ch.equivariance_errors(encoder("alibi"), X.numpy(), permutations=rev16).relative.max()
assert round(rope_rev, 1) == 0.8 and alibi_rev < 1e-15, (rope_rev, alibi_rev)

# 4. a causal mask on ALiBi
causal_alibi = pg.train(classifier(task, "alibi", causal=True), training, task, progress=False)
assert pg.evaluate(causal_alibi.model(), task, n_batches=8, batch_size=256, seed=12345) >= 0.995
causal_rev = ch.equivariance_errors(causal_alibi.model(), X_trained, permutations=reversal).relative.max()
assert 0.1 < causal_rev < 0.4, causal_rev  # "about 0.2"

# 5. the last slot of a causal encoder
def last_slot_change(n_layers):
    config = dataclasses.replace(encoder("none", causal=True).config, n_layers=n_layers)
    model = pg.Transformer(config, seed=0).double().eval()
    rng = np.random.default_rng(2)
    perms = [np.append(rng.permutation(15), 15) for _ in range(50)]
    with torch.no_grad():
        ref = model(inputs_embeds=X).last_hidden_state
        change = max((model(inputs_embeds=X[:, p]).last_hidden_state - ref)[:, -1].abs().max().item() for p in perms)
    return change / ref.abs().max().item()


one_layer, two_layers = last_slot_change(1), last_slot_change(2)
assert one_layer < 1e-15 and round(two_layers, 1) == 0.5, (one_layer, two_layers)

# %% [markdown]
# ## References
#
# ```{bibliography}
# :filter: docname in docnames
# ```
