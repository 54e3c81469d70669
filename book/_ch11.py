"""Helper of the chapter on position without positional encodings (P2): tasks, runs, measurements, charts."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import altair as alt
import numpy as np
import pandas as pd
import scipy.stats
import torch
from torch import nn
import torch.nn.functional as F

import posgeo as pg
from posgeo.experiments.papers import P2_MAX_LEN, P2_REPORTED

TASKS = ("addition", "reversal", "indexing", "sorting")
CONTROL = "counting"  # not P2's: a control task whose answer needs no position (invariant to permuting the digits)
LEARNED_TASKS = TASKS + (CONTROL,)
MAX_LEN = {**P2_MAX_LEN, CONTROL: P2_MAX_LEN["indexing"]}  # longest prompt; counting: as long as indexing's
MAX_COUNT = 5  # counting: the answer (one digit)
TOKENS = ("<pad>", "<eos>", *"0123456789+=(),ehorstvwx")
PAD, EOS = 0, 1
SCORE = {"include_diagonal": False, "ties": "half", "progress": False}  # the chapter's convention

SMALL = dict(
    d_model=64, n_layers=2, n_heads=4, d_ff=128, steps=300, batch_size=64, lr=2e-3, seeds=(0, 1, 2, 3, 4),
    seed_tasks=("sorting",), n_train=5000, n_test=1000, n_analysis=128, init_seeds=(0, 1, 2),
    sweep_layers=(1, 2, 4), sweep_widths=(32, 64, 128, 384), init_means=(0.0, 4.0, 8.0), init_stds=(0.002, 0.02, 0.2),
    ablation_steps=150, ablation_train_means=(0.0,), ablation_task="indexing", probe_steps=300, probe_hidden=32,
)
FULL = SMALL | dict(  # P2's scale (10.7M parameters), for a GPU: POSGEO_PROFILE=full
    d_model=384, n_layers=6, n_heads=6, d_ff=1536, steps=5000, batch_size=128, lr=5e-4, seed_tasks=TASKS,
    n_train=20_000, n_test=20_000, n_analysis=512, init_seeds=(0, 1, 2, 3, 4), sweep_layers=(6, 12, 24),
    sweep_widths=(192, 384, 768), ablation_steps=2000, ablation_train_means=(0.0, 4.0, 8.0),
    ablation_task="reversal", probe_steps=2000, probe_hidden=128,
)

LEARNED = dict(  # the decoder trained until it learns every task, on the CPU: python _ch11.py learned OUT.csv --jobs 2
    tasks=LEARNED_TASKS, seeds=(0, 1, 2), d_model=128, n_layers=3, n_heads=8, d_ff=256, steps=4000, batch_size=64,
    lr=1e-3, warmup=200, min_lr=0.1, segment=50, weight_decay=0.1, grad_clip=1.0, n_train=20_000, n_test=2000,
    curve_every=400,
)

LONG_RUNS = dict(tasks=("addition", "indexing", "sorting"), steps=10_000)  # the same runs 2.5 times longer (make p2-learned-long)
FULL_LEARNED = LEARNED | dict(  # P2's scale, on a GPU: python _ch11.py full --device cuda (10.7M parameters, 5 seeds)
    seeds=(0, 1, 2, 3, 4), d_model=384, n_layers=6, n_heads=6, d_ff=1536, steps=5000, batch_size=128, lr=5e-4, curve_every=500,
)
FULL_SWEEP = dict(layers=(6, 12, 24), widths=(192, 384, 768), tasks=("addition",), seeds=(0,))  # P2's trained sweep (head dim 64)


def settings(profile=None):
    """The experiment sizes of a profile (``POSGEO_PROFILE``; default small)."""
    return SimpleNamespace(**(FULL if pg.current_profile(profile) == "full" else SMALL))


# ============================================================================ the tasks

# prompt length = slope * size + offset, sizes from min_size to max_size (sorting: ten distinct digits)
_FORMAT = {"addition": (1, 2, 2, None), "reversal": (1, 6, 1, None), "indexing": (1, 11, 1, None), "sorting": (2, 8, 1, 10),
           "counting": (1, 8, 1, None)}


def encode(text):
    """Token ids of a string of task characters."""
    return [TOKENS.index(c) for c in text]


def decode(ids):
    """The characters of token ids, up to the first <eos>, padding dropped."""
    out = []
    for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
        if i == EOS:
            break
        if i != PAD:
            out.append(TOKENS[i])
    return "".join(out)


def _digits(rng, n, leading_zero=True):
    d = rng.integers(0, 10, size=n)
    if not leading_zero and n > 1:
        d[0] = rng.integers(1, 10)
    return "".join(map(str, d.tolist()))


def _sample(task, size, rng):
    if task == "addition":
        da = int(rng.integers(1, size))
        a, b = _digits(rng, da, False), _digits(rng, size - da, False)
        return f"{a}+{b}=", str(int(a) + int(b))
    if task == "reversal":
        s = _digits(rng, size)
        return f"rev({s})=", s[::-1]
    if task == "indexing":
        s = _digits(rng, size)
        x = s[int(rng.integers(0, size))]
        return f"wherex({s},{x})=", str(s.index(x))
    if task == "counting":  # how often digit x occurs in the string: tot(31415926,1)= 2; the count is uniform on 1..min(size, 5)
        k, x = int(rng.integers(1, min(size, MAX_COUNT) + 1)), int(rng.integers(0, 10))
        s = (x + rng.integers(1, 10, size=size)) % 10  # digits other than x, then x at k random places
        s[rng.permutation(size)[:k]] = x
        return f"tot({''.join(map(str, s.tolist()))},{x})=", str(k)
    src = "".join(map(str, rng.permutation(10)[:size].tolist()))
    perm = rng.permutation(size)
    return f"sort({src},{''.join(src[p] for p in perm.tolist())})=", "".join(map(str, perm.tolist()))


def make_samples(task, n, *, min_len=None, max_len=None, seed=0):
    """``n`` seeded (prompt, answer) pairs with prompts of ``min_len`` to ``max_len`` characters (default: P2's maximum)."""
    slope, off, lo, hi = _FORMAT[task]
    max_len = MAX_LEN[task] if max_len is None else max_len
    if hi is not None:
        max_len = min(max_len, slope * hi + off)
    min_len = slope * lo + off if min_len is None else min_len
    sizes = [s for s in range(lo, (max_len - off) // slope + 1) if min_len <= slope * s + off <= max_len]
    rng = np.random.default_rng(seed)
    return [_sample(task, int(s), rng) for s in rng.choice(np.asarray(sizes), size=int(n)).tolist()]


def correct_answer(prompt):
    """The answer to a prompt, re-derived from the prompt alone (independently of the generator)."""
    body = prompt[prompt.index("(") + 1:-2] if "(" in prompt else prompt[:-1]
    if prompt.startswith("rev("):
        return body[::-1]
    if prompt.startswith("wherex("):
        s, x = body.split(",")
        return str(s.index(x))
    if prompt.startswith("tot("):
        s, x = body.split(",")
        return str(sum(c == x for c in s))
    if prompt.startswith("sort("):
        src, tgt = body.split(",")
        return "".join(str(src.index(c)) for c in tgt)
    a, b = body.split("+")
    return str(int(a) + int(b))


def max_encoded_length(task, max_len):
    """Longest ``prompt + answer + <eos>`` of a task whose prompts have at most ``max_len`` characters."""
    if task == "addition":
        return max_len + (max_len - 2) + 1
    if task == "reversal":
        return max_len + (max_len - 6) + 1
    if task == "indexing":
        return max_len + len(str(max(max_len - 12, 0))) + 1
    if task == "counting":
        return max_len + 2
    size = min((max_len - 8) // 2, 10)
    return (2 * size + 8) + size + 1


@dataclass(frozen=True, eq=False)
class P2Task:
    """A pool of one task's samples as a causal-LM task for ``pg.train``: the loss is on the answer and <eos> only."""

    task: str
    n_samples: int = 20_000
    max_len: int | None = None
    min_len: int | None = None
    seed: int = 0
    kind: str = field(default="lm", init=False)
    n_classes: None = field(default=None, init=False)
    order_sensitive: bool = field(default=True, init=False)
    vocab_size: int = field(default=len(TOKENS), init=False)
    seq_len: int = field(default=0, init=False)
    samples: tuple = field(default=(), init=False, repr=False)
    tokens: torch.Tensor = field(default=None, init=False, repr=False)
    answer_mask: torch.Tensor = field(default=None, init=False, repr=False)

    def __post_init__(self):
        max_len = MAX_LEN[self.task] if self.max_len is None else int(self.max_len)
        samples = make_samples(self.task, self.n_samples, max_len=max_len, min_len=self.min_len, seed=self.seed)
        slope, off, _, hi = _FORMAT[self.task]
        seq_len = max_encoded_length(self.task, max_len if hi is None else min(max_len, slope * hi + off))
        tokens = torch.full((len(samples), seq_len), PAD, dtype=torch.long)
        answer = torch.zeros((len(samples), seq_len), dtype=torch.bool)
        for row, (prompt, ans) in enumerate(samples):
            ids = encode(prompt) + encode(ans) + [EOS]
            tokens[row, :len(ids)] = torch.tensor(ids)
            answer[row, len(prompt):len(ids)] = True
        for name, value in (("seq_len", seq_len), ("samples", tuple(samples)), ("tokens", tokens), ("answer_mask", answer)):
            object.__setattr__(self, name, value)

    def batch(self, rows=None):
        """Pool rows as a ``pg.Batch``: position ``i`` predicts token ``i + 1`` where that is an answer token or <eos>."""
        idx = torch.arange(len(self.samples)) if rows is None else torch.as_tensor(rows, dtype=torch.long)
        tokens, answer = self.tokens[idx], self.answer_mask[idx]
        targets = torch.full_like(tokens, pg.IGNORE_INDEX)
        targets[:, :-1] = torch.where(answer[:, 1:], tokens[:, 1:], torch.full_like(tokens[:, 1:], pg.IGNORE_INDEX))
        return pg.Batch(tokens, targets, "lm", tokens != PAD)

    def sample(self, batch_size, generator):
        """``batch_size`` pool rows drawn with replacement."""
        return self.batch(torch.randint(0, len(self.samples), (int(batch_size),), generator=generator))

    def cache_key(self):
        """What determines the pool."""
        return {"task": "P2Task", "name": self.task, "n_samples": int(self.n_samples), "max_len": self.max_len,
                "min_len": self.min_len, "seed": int(self.seed), "seq_len": self.seq_len}


def analysis_tokens(task, n, *, seed=123):
    """``n`` sequences whose prompts all have P2's maximum length, cut to the shortest ``prompt + answer + <eos>``."""
    length = MAX_LEN[task]
    samples = make_samples(task, n, min_len=length, max_len=length, seed=seed)
    cut = min(len(p) + len(a) + 1 for p, a in samples)
    return torch.tensor([(encode(p) + encode(a) + [EOS])[:cut] for p, a in samples])


def random_tokens(n, length, *, seed=7):
    """I.i.d. uniform character tokens (no padding, no <eos>)."""
    return torch.randint(2, len(TOKENS), (n, length), generator=torch.Generator().manual_seed(seed))


# ============================================================================ the model and its training


def model_config(s, max_len, **overrides):
    """The NoPE causal decoder of settings ``s``; a new width keeps the head dimension and the MLP ratio."""
    if "d_model" in overrides:
        d = overrides["d_model"]
        overrides = {"n_heads": max(1, d // (s.d_model // s.n_heads)), "d_ff": d * (s.d_ff // s.d_model), **overrides}
    return pg.TransformerConfig(**{"vocab_size": len(TOKENS), "d_model": s.d_model, "n_heads": s.n_heads,
                                   "n_layers": s.n_layers, "d_ff": s.d_ff, "max_len": max_len, "position": "none",
                                   "causal": True, **overrides})


def train_config(s, steps, seed):
    """AdamW settings of ``s``, logging 20 times per run."""
    return pg.TrainConfig(steps=steps, batch_size=s.batch_size, lr=s.lr, seed=seed, log_every=max(1, steps // 20))


def train(task, s, *, seed=0, steps=None, **overrides):
    """Train the decoder on one task's pool (seed ``seed``: pool, weights and batches); cached."""
    pool = P2Task(task, n_samples=s.n_train, seed=seed)
    steps = s.steps if steps is None else steps
    return pg.train(model_config(s, pool.seq_len, **overrides), train_config(s, steps, seed), pool, progress=False)


def with_embedding_init(model, *, mean, std, seed):
    """A copy of ``model`` whose token embeddings alone are redrawn i.i.d. N(mean, std^2)."""
    twin = pg.Transformer(model.config)
    twin.load_state_dict(model.state_dict())
    with torch.no_grad():
        w = twin.tok.weight
        w.copy_(torch.randn(w.shape, generator=torch.Generator().manual_seed(int(seed))) * float(std) + float(mean))
    return twin.train(model.training)


def train_with_embedding_init(cfg, tcfg, pool, *, mean, std):
    """``pg.train`` from token embeddings drawn N(mean, std^2); cached."""
    mean, std = float(mean), float(std)
    return pg.train(cfg, tcfg, pool, prepare=lambda m: with_embedding_init(m, mean=mean, std=std, seed=tcfg.seed),
                    cache_namespace="train-embinit", cache_options={"embedding_init": [mean, std]},
                    desc=f"train (mean={mean}, std={std})", progress=False)


def _on(model, batch):
    """``batch`` (a ``pg.Batch``) on ``model``'s device."""
    return batch.to(next(model.parameters()).device)


@torch.no_grad()
def accuracy(model, pool, batch_size=512):
    """Teacher-forced exact match (every answer token and <eos> right) and token accuracy on a pool."""
    rows, n_tok, n_ok = [], 0, 0
    with pg.eval_mode(model):
        for start in range(0, len(pool.samples), batch_size):
            b = _on(model, pool.batch(torch.arange(start, min(start + batch_size, len(pool.samples)))))
            pred = model(b.tokens, attention_mask=b.attention_mask).logits.argmax(-1)
            keep = b.targets != pg.IGNORE_INDEX
            rows.append(((pred == b.targets) | ~keep).all(dim=1))
            n_tok, n_ok = n_tok + int(keep.sum()), n_ok + int(((pred == b.targets) & keep).sum())
    return float(torch.cat(rows).float().mean()), n_ok / max(n_tok, 1)


def constant_answer(pool, test=None):
    """Exact match of always answering ``pool``'s most common answer (on ``test``, default the pool itself)."""
    answers = pd.Series([a for _, a in pool.samples]).value_counts()
    return float(np.mean([a == answers.index[0] for _, a in (test or pool).samples]))


def accuracy_row(res, task, s, test_seed=1000):
    """Exact match, token accuracy and the constant-answer baseline of a run, on a fresh test pool."""
    test = P2Task(task, n_samples=s.n_test, seed=test_seed)
    exact, token = accuracy(res.model(), test)
    return {"exact match": exact, "token accuracy": token, "final train loss": res.final("loss"),
            "best constant answer": constant_answer(P2Task(task, n_samples=s.n_train, seed=res.train_config.seed), test)}


# ============================================================================ the measurements


@torch.no_grad()
def hidden_states(model, tokens):
    """Hidden states of every layer, shape (layers + 1, B, n, d), float64: layer 0 is the token embedding."""
    with pg.eval_mode(model):
        hs = model(tokens.to(next(model.parameters()).device), return_hidden=True).hidden_states
    return np.stack([h.to("cpu", torch.float64).numpy() for h in hs])


def layer_scores(H, **options):
    """Adjacency score of every layer of ``hidden_states``."""
    return np.array([pg.adjacency_score(pg.cosine_similarity_matrix(h), **{**SCORE, **options}) for h in H])


def profile(model, tokens):
    """Batch-mean cosine matrix and adjacency score of every layer."""
    C = np.stack([pg.cosine_similarity_matrix(h) for h in hidden_states(model, tokens)])
    return SimpleNamespace(mean_similarity=C.mean(axis=1), scores=np.array([pg.adjacency_score(c, **SCORE) for c in C]))


def cosine_by_offset(C):
    """Mean cosine ``C[k, k - t]`` at each offset ``t >= 0`` (batches averaged first)."""
    A = C.mean(axis=0) if C.ndim == 3 else C
    return np.array([np.diagonal(A, offset=-t).mean() for t in range(A.shape[0])])


@torch.no_grad()
def first_attention_output(model, tokens):
    """The first attention sublayer's output alone (``h_1 = e + a + mlp``), captured with a hook."""
    out = []
    handle = model.blocks[0].attn.register_forward_hook(lambda mod, inp, o: out.append(o[0]))
    try:
        with pg.eval_mode(model):
            model(tokens.to(next(model.parameters()).device))
    finally:
        handle.remove()
    return out[0].to("cpu", torch.float64).numpy()


@torch.no_grad()
def attention_to_uniform(model, tokens):
    """Mean total-variation distance of the first layer's attention rows from uniform causal attention."""
    with pg.eval_mode(model):
        a = model(tokens, return_attention=True).attentions[0].double()
    n = a.shape[-1]
    uniform = torch.tril(torch.ones(n, n, dtype=torch.float64)) / torch.arange(1, n + 1, dtype=torch.float64)[:, None]
    return float(0.5 * (a - uniform).abs().sum(-1).mean())


def averaging_table(init_model, trained_model, tokens, seed=0):
    """Scores of the inputs, the first attention output and layer 1: uniform causal means beside real first layers."""
    B, n = tokens.shape

    def score(X):
        return pg.adjacency_score(pg.cosine_similarity_matrix(X), **SCORE)

    def mean(X):
        return np.cumsum(X, axis=1) / np.arange(1, n + 1)[None, :, None]

    E = np.random.default_rng(seed).normal(size=(B, n, init_model.config.d_model))
    H0 = hidden_states(init_model, tokens)[0]
    rows = {"uniform mean of N(0, I)": (score(E), score(mean(E)), score(mean(E)), 0.0),
            "uniform mean of token embeddings": (score(H0), score(mean(H0)), score(mean(H0)), 0.0)}
    for label, m in (("1-layer model, init", init_model), ("1-layer model, trained", trained_model)):
        H = hidden_states(m, tokens)
        rows[label] = (score(H[0]), score(first_attention_output(m, tokens)), score(H[1]), attention_to_uniform(m, tokens))
    return pd.DataFrame(rows, index=["inputs", "attention output", "layer 1", "attention TV to uniform"]).T


def _update_ratio(H):
    """Mean ``|h_1 - h_0| / |h_0|``: the first block's update relative to the token embedding."""
    return float((np.linalg.norm(H[1] - H[0], axis=-1) / np.linalg.norm(H[0], axis=-1)).mean())


def init_ablation_runs(s, tokens):
    """Layer scores for token embeddings N(mean, std^2) over the grid and the seeds; the means of
    ``ablation_train_means`` also trained from the same initialisation (paired)."""
    task = s.ablation_task
    cfg = model_config(s, max(tokens.shape[1], P2Task(task, n_samples=1).seq_len))
    rows = []
    for mean in s.init_means:
        for std in s.init_stds:
            for seed in s.seeds:
                H = hidden_states(with_embedding_init(pg.Transformer(cfg, seed=seed), mean=mean, std=std, seed=seed), tokens)
                sc = layer_scores(H)
                row = {"mean": mean, "std": std, "seed": seed, "layer 0": sc[0], "layer 1": sc[1], "last layer": sc[-1],
                       "update/embedding": _update_ratio(H)}
                if mean in s.ablation_train_means:
                    pool = P2Task(task, n_samples=s.n_train, seed=seed)
                    trained = train_with_embedding_init(cfg, train_config(s, s.ablation_steps, seed), pool,
                                                        mean=mean, std=std).model()
                    sct = layer_scores(hidden_states(trained, tokens))
                    row |= {"layer 1 (trained)": sct[1], "last layer (trained)": sct[-1],
                            "exact match (trained)": accuracy(trained, pool)[0], "best constant answer": constant_answer(pool)}
                rows.append(row)
    return pd.DataFrame(rows)


def depth_width_sweep(s, tokens):
    """Scores of untrained decoders of every depth and width, averaged over ``init_seeds``."""
    rows = []
    for L in s.sweep_layers:
        for w in s.sweep_widths:
            cfg = model_config(s, tokens.shape[1], n_layers=L, d_model=w)
            per_seed = []
            for seed in s.init_seeds:
                H = hidden_states(pg.Transformer(cfg, seed=seed), tokens)
                sc = layer_scores(H)
                per_seed.append([sc[0], sc[1], sc[-1], sc[1:].mean(), _update_ratio(H)])
            rows.append({"layers": L, "width": w, "parameters": pg.count_parameters(pg.Transformer(cfg)),
                         **dict(zip(["layer 0", "layer 1", "last layer", "mean over layers >= 1", "update/embedding"],
                                    np.mean(per_seed, axis=0)))})
    return pd.DataFrame(rows).set_index(["layers", "width"])


# ============================================================================ the decoder trained until it learns

TEST_SEED = 1000  # the held-out pool (as in accuracy_row)


def learned_settings(**overrides):
    """``LEARNED`` as a namespace, ``overrides`` replacing fields (or adding ``init_std``, the token embeddings' std)."""
    unknown = sorted(set(overrides) - set(LEARNED) - {"init_std"})
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(unknown)}; the settings are {', '.join(sorted(LEARNED))} and init_std")
    return SimpleNamespace(**(LEARNED | overrides))


def settings_digest(s):
    """Digest of what determines a ``learned_run`` besides its task and seed: every setting but ``tasks`` and
    ``seeds``, the vocabulary, the task formats and the held-out pool's seed."""
    what = {"settings": {k: v for k, v in sorted(vars(s).items()) if k not in ("tasks", "seeds")}, "tokens": TOKENS,
            "formats": _FORMAT, "max_len": MAX_LEN, "max_count": MAX_COUNT, "test_seed": TEST_SEED}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=list).encode()).hexdigest()[:12]


def learning_rate(s, step):
    """The schedule: linear warmup over ``s.warmup`` steps, then a cosine from ``s.lr`` to ``s.lr * s.min_lr`` at the last step."""
    warm = min(1.0, (step + 1) / s.warmup) if s.warmup else 1.0
    frac = min(1.0, max(0.0, (step - s.warmup) / max(1, s.steps - s.warmup)))
    return s.lr * warm * (s.min_lr + (1 - s.min_lr) * 0.5 * (1 + math.cos(math.pi * frac)))


def segment_learning_rates(s):
    """The rate ``learned_run`` uses in each segment of ``s.segment`` steps: the schedule at the segment's middle step."""
    return [learning_rate(s, start + s.segment // 2) for start in range(0, s.steps, s.segment)]


def random_permutation_level(samples):
    """Exact match of answering a sorting prompt with a random valid permutation of the right length: the mean of 1/m!
    over the (prompt, answer) ``samples``, m the answer's length."""
    return float(np.mean([1.0 / math.factorial(len(answer)) for _, answer in samples]))


def clopper_pearson(k, n, level=0.95):
    """Exact (Clopper-Pearson) interval of the binomial proportion ``k / n``."""
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(scipy.stats.beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(scipy.stats.beta.ppf(1 - a, k + 1, n - k))
    return low, high


class _Pause(Exception):
    """Raised by ``learned_run``'s checkpoint hook: ``pg.optimize`` stops at a segment's end and hands over AdamW's state."""

    def __init__(self, optimizer_state):
        super().__init__("segment done")
        self.optimizer_state = optimizer_state


def learned_run(task, seed, s, *, checkpoint=None, stop_if=None, device="cpu"):
    """Train the NoPE decoder of settings ``s`` on one task (``seed``: its training pool, weights and batches) as
    ``pg.train`` does, but under the schedule of ``segment_learning_rates``: ``pg.optimize`` runs one segment at a time,
    resumed from its AdamW state at the next segment's rate (at a constant rate the weights are ``pg.train``'s, bit for bit).

    At step 0 and every ``s.curve_every`` steps it measures ``accuracy`` (teacher-forced exact match and token accuracy)
    on the held-out pool of ``s.n_test`` prompts (seed ``TEST_SEED``) beside the mean training-batch loss since the last
    measurement; there, with ``checkpoint`` (a path), it saves what a resumed run needs, and a run that finds that file
    resumes from it with the same result. ``stop_if()``, asked after each segment, stops the run (``SystemExit``).
    ``device``: where it trains (the weights are drawn and the batches sampled on the CPU, so only the arithmetic moves).
    Returns ``(row, curve rows, model)``, the model on the CPU."""
    if s.steps % s.segment or s.curve_every % s.segment:
        raise ValueError(f"steps ({s.steps}) and curve_every ({s.curve_every}) must be multiples of segment ({s.segment})")
    digest, rates = settings_digest(s), segment_learning_rates(s)
    pool, test = P2Task(task, n_samples=s.n_train, seed=seed), P2Task(task, n_samples=s.n_test, seed=TEST_SEED)
    ckpt = None if checkpoint is None else Path(checkpoint)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        extra = {"init_std": s.init_std} if hasattr(s, "init_std") else {}  # the token embeddings' std (default 0.02)
        model = pg.Transformer(model_config(s, pool.seq_len, **extra), seed=seed).to(device)
        params = list(model.parameters())
        g = torch.Generator().manual_seed(seed + 1)  # batches: as pg.train draws them
        state = {"done": 0, "optimizer": None, "wall": 0.0, "curve": [], "losses": []}
        if ckpt is not None and ckpt.exists():
            saved = torch.load(ckpt, weights_only=False, map_location="cpu")
            if (saved["task"], saved["seed"], saved["settings"]) != (task, seed, digest):
                raise ValueError(f"{ckpt} is the checkpoint of {saved['task']}, seed {saved['seed']}, settings {saved['settings']}")
            model.load_state_dict(saved["model"])
            g.set_state(saved["generator"])
            torch.set_rng_state(saved["rng"])
            state = saved["state"]
        model.train()
        clock = time.perf_counter()

        def measure():
            exact, token = accuracy(model, test)
            loss = float(np.mean(state["losses"])) if state["losses"] else float("nan")
            state["curve"].append({"step": state["done"], "train loss": loss, "exact match": exact, "token accuracy": token})
            state["losses"] = []

        def step_loss(step):  # next-token loss on the answer tokens, and their accuracy
            batch = pool.sample(s.batch_size, g).to(device)
            logits = model(batch.tokens, attention_mask=batch.attention_mask).logits.flatten(0, 1)
            targets, keep = batch.targets.flatten(), batch.targets.flatten() != pg.IGNORE_INDEX
            loss = F.cross_entropy(logits, targets, ignore_index=pg.IGNORE_INDEX)
            return loss, (logits.argmax(-1)[keep] == targets[keep]).float().mean()

        def pause(done, optimizer_state):
            raise _Pause(optimizer_state)

        if not state["curve"]:
            measure()
        while state["done"] < s.steps:
            start, opt_state = state["done"], state["optimizer"]
            lr = rates[start // s.segment]
            for group in (opt_state or {}).get("param_groups", []):
                group["lr"] = lr
            log = []
            try:
                pg.optimize([{"params": params, "weight_decay": float(s.weight_decay)}], step_loss, steps=s.steps, lr=lr,
                            grad_clip=s.grad_clip, clip_parameters=params, log_every=1, history=log, progress=False,
                            start=start, optimizer_state=opt_state, checkpoint=pause, checkpoint_every=s.segment)
                state["optimizer"] = None
            except _Pause as paused:
                state["optimizer"] = paused.optimizer_state
            state["done"] = start + len(log)
            state["losses"] += [r["loss"] for r in log]
            if state["done"] % s.curve_every == 0 or state["done"] == s.steps:
                measure()
            now = time.perf_counter()
            state["wall"], clock = state["wall"] + now - clock, now
            if ckpt is not None and state["done"] % s.curve_every == 0 and state["done"] < s.steps:
                ckpt.parent.mkdir(parents=True, exist_ok=True)
                tmp = ckpt.with_name(ckpt.name + ".tmp")
                torch.save({"task": task, "seed": seed, "settings": digest, "model": model.state_dict(),
                            "generator": g.get_state(), "rng": torch.get_rng_state(), "state": state}, tmp)
                os.replace(tmp, ckpt)
            if stop_if is not None and state["done"] < s.steps and stop_if():
                raise SystemExit(f"{task}, seed {seed}: stopped at step {state['done']}")
    model.cpu().eval()
    last, n = state["curve"][-1], len(test.samples)
    seen = {p for p, _ in pool.samples}
    row = {"task": task, "seed": seed, "settings": digest, "parameters": pg.count_parameters(model), "steps": s.steps,
           "n test": n, "exact match": last["exact match"],
           **dict(zip(("exact match low", "exact match high"), clopper_pearson(round(last["exact match"] * n), n))),
           "token accuracy": last["token accuracy"], "best constant answer": constant_answer(pool, test),
           "test prompts seen in training": float(np.mean([p in seen for p, _ in test.samples])),
           "final train loss": last["train loss"], "wall seconds": round(state["wall"], 1)}
    return row, [{"task": task, "seed": seed, "settings": digest, **c} for c in state["curve"]], model


def learned_curves_path(out):
    """Where ``learned_runs`` writes the learning curves beside its table ``out``: ``<stem>_curves.csv``."""
    out = Path(out)
    return out.with_name(f"{out.stem}_curves.csv")


def learned_checkpoint(task, seed, digest):
    """The checkpoint file of a run in progress (in the posgeo cache directory; removed once the run is recorded)."""
    root = Path(os.environ.get("POSGEO_CACHE_DIR") or Path.home() / ".cache" / "posgeo")
    return root / "ch11-learned" / f"{task}-{seed}-{digest}.pt"


def _past(deadline):
    return deadline is not None and time.time() >= deadline


def _learned_job(job):
    out, task, seed, s, parent, device, deadline = job
    if _past(deadline):
        return None
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("high")  # TF32 on a GPU; nothing changes on the CPU
    orphaned = (lambda: False) if parent is None else (lambda: os.getppid() != parent)  # the command was killed
    try:
        row, curves, model = learned_run(task, seed, s, checkpoint=learned_checkpoint(task, seed, settings_digest(s)),
                                         stop_if=lambda: orphaned() or _past(deadline), device=device)
    except SystemExit:
        if orphaned():
            raise
        return None  # past the deadline: its checkpoint resumes it next time
    _keep_model(task, seed, settings_digest(s), model)
    return out, s, row, curves


def _write_atomically(frame, path):
    order = {t: i for i, t in enumerate(LEARNED_TASKS)}
    keys = ["task", "seed"] + (["step"] if "step" in frame else [])
    frame = frame.sort_values(keys, key=lambda c: c.map(order) if c.name == "task" else c, kind="stable")
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _read_runs(path, digest):
    if not path.exists():
        return pd.DataFrame()
    frame = pd.read_csv(path)
    other = sorted(set(frame["settings"]) - {digest})
    if other:
        raise ValueError(f"{path} holds runs trained under other settings ({', '.join(other)}; these are {digest}): "
                         "write to another file, or remove it to train every run again")
    return frame


def learned_runs(out, s=None, *, jobs=1, log=print, device="cpu", deadline=None):
    """Train every (task, seed) run of settings ``s`` (default ``LEARNED``) that the table ``out`` does not hold yet,
    ``jobs`` at a time (one thread each), and record each as it finishes: its row in ``out`` and its learning curve in
    ``learned_curves_path(out)``, each file rewritten atomically (a temporary file renamed). A killed command resumes
    where it stopped, a run cut short from its last checkpoint. A file holding runs of other settings is an error
    (``settings_digest``). ``device``: where the runs train; ``deadline`` (``time.time()`` seconds): no run starts after
    it and a running one stops at its next segment (to resume later). Returns the (task, seed) pairs it set out to train."""
    return [(task, seed) for _, task, seed in learned_plans([(out, s)], jobs=jobs, log=log, device=device, deadline=deadline)]


def learned_plans(plans, *, jobs=1, log=print, device="cpu", deadline=None):
    """``learned_runs`` for several tables at once: ``plans`` a list of ``(out, settings)``, their runs ``jobs`` at a time
    in the plans' order (each plan's tasks for its first seed first). Returns the (out, task, seed) it set out to train."""
    todo = []
    for out, s in plans:
        s = learned_settings() if s is None else s
        out, digest = Path(out), settings_digest(s)
        table = _read_runs(out, digest)
        _read_runs(learned_curves_path(out), digest)
        finished = set(zip(table["task"], table["seed"])) if len(table) else set()
        todo += [(out, task, seed, s) for seed in s.seeds for task in s.tasks if (task, seed) not in finished]

    def record(out, s, row, curve):
        _record_run(out, s, row, curve)
        if log is not None:
            n = len(pd.read_csv(out))
            log(f"{row['task']}, seed {row['seed']}: exact match {row['exact match']:.3f} "
                f"[{row['exact match low']:.3f}, {row['exact match high']:.3f}], constant answer {row['best constant answer']:.3f}, "
                f"{row['wall seconds']:.0f} s ({n}/{len(s.tasks) * len(s.seeds)} in {out})")

    parent = os.getpid() if jobs > 1 else None
    _run_jobs(_learned_job, [] if _past(deadline) else [(out, task, seed, s, parent, device, deadline) for out, task, seed, s in todo],
              jobs, record)
    return [(out, task, seed) for out, task, seed, _ in todo]


def _record_run(out, s, row, curve):
    """Add a finished run to its table ``out`` and its curve to ``learned_curves_path(out)``; remove its checkpoint."""
    digest, curves_file = settings_digest(s), learned_curves_path(out)
    table, curves = _read_runs(out, digest), _read_runs(curves_file, digest)
    if len(curves):  # a run recorded there but not in the table (killed in between): its new curve replaces it
        curves = curves[~((curves["task"] == row["task"]) & (curves["seed"] == row["seed"]))]
    _write_atomically(pd.concat([curves, pd.DataFrame(curve)], ignore_index=True) if len(curves) else pd.DataFrame(curve),
                      curves_file)
    _write_atomically(pd.concat([table, pd.DataFrame([row])], ignore_index=True) if len(table) else pd.DataFrame([row]), out)
    learned_checkpoint(row["task"], row["seed"], digest).unlink(missing_ok=True)


def _run_jobs(job, args, jobs, record):
    """``record(*job(a))`` for every ``a`` of ``args`` whose job returns a result (``None``: nothing to record), ``jobs``
    processes at a time (spawned, one run each) or in turn."""
    if jobs > 1 and len(args) > 1:
        with multiprocessing.get_context("spawn").Pool(min(jobs, len(args)), maxtasksperchild=1) as workers:
            for result in workers.imap_unordered(job, args):
                if result is not None:
                    record(*result)
    else:
        for a in args:
            result = job(a)
            if result is not None:
                record(*result)


def read_learned(path):
    """The table and the learning curves written by ``learned_runs`` (``python _ch11.py learned OUT.csv``)."""
    return pd.read_csv(path), pd.read_csv(learned_curves_path(path))


def learned_summary(table):
    """Per task: the mean exact match over seeds with its 95% interval (Student t, cut to [0, 1]), the lowest seed's
    exact match and its Clopper-Pearson interval, and the constant-answer baseline (mean over seeds)."""
    rows = []
    for task, g in table.groupby("task", sort=False):
        iv = pg.seed_interval(g["exact match"].to_numpy(), bounds=(0, 1)) if len(g) > 1 else None
        worst = g.loc[g["exact match"].idxmin()]
        rows.append({"task": task, "seeds": len(g), "exact match": g["exact match"].mean(),
                     "low": iv.low if iv else np.nan, "high": iv.high if iv else np.nan,
                     "lowest seed": worst["exact match"], "lowest seed low": worst["exact match low"],
                     "lowest seed high": worst["exact match high"], "best constant answer": g["best constant answer"].mean(),
                     "wall seconds (mean)": g["wall seconds"].mean()})
    return pd.DataFrame(rows).set_index("task")


def learned_model_path(task, seed, digest):
    """Where a finished learned run's final weights are kept (the posgeo cache directory, never the book)."""
    return learned_checkpoint(task, seed, digest).with_name(f"{task}-{seed}-{digest}-final.pt")


def learned_model(task, seed, s, *, device="cpu"):
    """The final model of the learned run (task, seed) of settings ``s``: its kept weights, or trained again (resumable,
    on ``device``) and kept. Returns ``(model on the CPU, row or None)``: the row when it was trained here."""
    digest = settings_digest(s)
    path = learned_model_path(task, seed, digest)
    if path.exists():
        saved = torch.load(path, weights_only=False, map_location="cpu")
        if (saved["task"], saved["seed"], saved["settings"]) != (task, seed, digest):
            raise ValueError(f"{path} holds the weights of {saved['task']}, seed {saved['seed']}, settings {saved['settings']}; remove it")
        model = pg.Transformer(pg.TransformerConfig(**saved["config"]))
        model.load_state_dict(saved["model"])
        return model.eval(), None
    row, _, model = learned_run(task, seed, s, checkpoint=learned_checkpoint(task, seed, digest), device=device)
    _keep_model(task, seed, digest, model)
    learned_checkpoint(task, seed, digest).unlink(missing_ok=True)
    return model, row


def _keep_model(task, seed, digest, model):
    path = learned_model_path(task, seed, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"task": task, "seed": seed, "settings": digest, "config": model.config.to_dict(), "model": model.state_dict()}, tmp)
    os.replace(tmp, path)


def learned_analysis_path(out):
    """Where ``learned_analyses`` writes the analysis beside the table ``out``: ``<stem>_analysis.csv``."""
    out = Path(out)
    return out.with_name(f"{out.stem}_analysis.csv")


def _analysis_job(job):
    out, task, seed, s, device, deadline = job
    if _past(deadline):
        return None
    torch.set_num_threads(1)
    model, row = learned_model(task, seed, s, device=device)
    return out, s, task, seed, row, analyse_learned(model.to(device), task, seed, s)


def learned_analyses(out, s=None, *, jobs=1, log=print, device="cpu", deadline=None):
    """``analyse_learned`` for every run of the table ``out`` (written by ``learned_runs``) not analysed yet, written to
    ``learned_analysis_path(out)`` as each finishes (atomically; resumable). A run retrained here must reproduce its row's
    exact match. A file of another analysis (``analysis_digest``) is an error. ``device`` and ``deadline`` as in
    ``learned_runs`` (a started analysis runs to its end). Returns the (task, seed) pairs it set out to analyse."""
    return [(t, sd) for _, t, sd in analysis_plans([(out, s)], jobs=jobs, log=log, device=device, deadline=deadline)]


def _analysed(out, s):
    path, digest = learned_analysis_path(out), analysis_digest(s)
    done = pd.read_csv(path) if path.exists() else pd.DataFrame()
    if len(done) and set(done["analysis"]) != {digest}:
        raise ValueError(f"{path} holds another analysis ({', '.join(sorted(set(done['analysis'])))}; this one is {digest}): "
                         "write beside another table, or remove it to analyse every run again")
    return done


def analysis_plans(plans, *, jobs=1, log=print, device="cpu", deadline=None):
    """``learned_analyses`` for several tables: ``plans`` a list of ``(out, settings)``. Returns the (out, task, seed)."""
    todo = []
    for out, s in plans:
        s = learned_settings() if s is None else s
        out = Path(out)
        table, done = _read_runs(out, settings_digest(s)), _analysed(out, s)
        finished = set(zip(done["task"], done["seed"])) if len(done) else set()
        if len(table):
            todo += [(out, t, sd, s) for t, sd in zip(table["task"], table["seed"]) if (t, sd) not in finished and t in s.tasks]

    def record(out, s, task, seed, row, rows):
        table, done = _read_runs(out, settings_digest(s)), _analysed(out, s)
        if row is not None:
            want = float(table.loc[(table["task"] == task) & (table["seed"] == seed), "exact match"].iloc[0])
            if abs(row["exact match"] - want) > 0.02:
                warnings.warn(f"{task}, seed {seed} retrained to exact match {row['exact match']:.4f}, the table says {want:.4f}")
        new = pd.DataFrame(rows).assign(settings=settings_digest(s), analysis=analysis_digest(s))
        done = pd.concat([done, new], ignore_index=True) if len(done) else new
        _write_atomically(done, learned_analysis_path(out))
        if log is not None:
            log(f"{task}, seed {seed} analysed ({len(set(zip(done['task'], done['seed'])))}/{len(table)} in "
                f"{learned_analysis_path(out)})")

    _run_jobs(_analysis_job, [] if _past(deadline) else [(out, t, sd, s, device, deadline) for out, t, sd, s in todo], jobs, record)
    return [(out, t, sd) for out, t, sd, _ in todo]


def full_plans(into=None):
    """The runs of P2's scale, as ``(out, settings)`` plans for ``learned_plans``: ``FULL_LEARNED`` (every task, 5 seeds)
    into ``<into>/ch11_full.csv`` and ``FULL_SWEEP``'s other layers x widths into
    ``<into>/ch11_full_sweep/layers<L>_width<W>.csv``, the deepest first (``into`` default: the book's data folder)."""
    into = DATA if into is None else Path(into)
    sweep = [(into / "ch11_full_sweep" / f"layers{L}_width{W}.csv",
              learned_settings(**(FULL_LEARNED | {"tasks": FULL_SWEEP["tasks"], "seeds": FULL_SWEEP["seeds"], "n_layers": L,
                                                  "d_model": W, "n_heads": W // 64, "d_ff": 4 * W})))
             for L in sorted(FULL_SWEEP["layers"], reverse=True) for W in sorted(FULL_SWEEP["widths"], reverse=True)
             if (L, W) != (FULL_LEARNED["n_layers"], FULL_LEARNED["d_model"])]  # that one is ch11_full.csv's addition, seed 0
    deepest = [plan for plan in sweep if plan[1].n_layers == max(FULL_SWEEP["layers"])]
    return deepest + [(into / "ch11_full.csv", learned_settings(**FULL_LEARNED))] + [p for p in sweep if p not in deepest]


def full_profile(plans, *, jobs, device, budget, analysis_share=0.3, log=print):
    """Train, then analyse, every run of ``plans`` not done yet within ``budget`` seconds: training starts no run and
    stops at its next segment after ``(1 - analysis_share) * budget`` (a checkpoint keeps it), the analysis starts none after
    ``budget - 120`` s. A second call resumes. Returns ``(trained, analysed)``, the (out, task, seed) each set out to do."""
    start = time.time()
    for out, _ in plans:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    trained = learned_plans(plans, jobs=jobs, log=log, device=device, deadline=start + (1 - analysis_share) * budget)
    analysed = analysis_plans(plans, jobs=jobs, log=log, device=device, deadline=start + budget - 120)
    return trained, analysed


def read_learned_analysis(path, s=None):
    """The analysis written by ``learned_analyses`` beside the table ``path``; refuses a file of other settings, another
    analysis or another posgeo version (``analysis_digest``)."""
    s = learned_settings() if s is None else s
    frame = pd.read_csv(learned_analysis_path(path))
    if set(frame["analysis"]) != {analysis_digest(s)}:
        raise ValueError(f"{learned_analysis_path(path)} was made by another command or version (analysis "
                         f"{', '.join(sorted(set(frame['analysis'])))}, expected {analysis_digest(s)}): run "
                         f"python _ch11.py analyse {path} again")
    return frame


# ============================================================================ probes and the mask


def probe_features(H, kind):
    """Per token: its row of the cosine matrix without the diagonal (``"cosine"``), or its variance over coordinates."""
    B, n, _ = H.shape
    if kind == "variance":
        return H.var(axis=-1)[..., None]
    return pg.cosine_similarity_matrix(H)[:, ~np.eye(n, dtype=bool)].reshape(B, n, n - 1)


def _mlp(n_in, hidden, depth, generator):
    layers, width = [], n_in
    for _ in range(depth - 1):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    net = nn.Sequential(*layers, nn.Linear(width, 1))
    with torch.no_grad():
        for m in net:
            if isinstance(m, nn.Linear):
                m.weight.copy_((torch.rand(m.weight.shape, generator=generator) * 2 - 1) * (1.0 / math.sqrt(m.in_features)))
                m.bias.zero_()
    return net


def train_position_probe(X, *, hidden=64, depth=4, steps=400, lr=3e-3, seed=0, test_fraction=0.25, first=0):
    """A ``depth``-layer MLP predicting each token's position (``first`` + its index in ``X``'s second axis) from its
    features, early-stopped on held-out sequences; returns the test NRMSE (1: no better than the mean position) and
    Pearson R."""
    B, n, f = X.shape
    n_test = int(round(B * test_fraction))
    n_val = int(round((B - n_test) / 5))
    order = np.random.default_rng(seed).permutation(B)
    test, val, fit = order[:n_test], order[n_test:n_test + n_val], order[n_test + n_val:]
    pos = np.broadcast_to(first + np.arange(n, dtype=np.float64), (B, n))
    mu, sd = X[fit].reshape(-1, f).mean(0), X[fit].reshape(-1, f).std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    ymu, ysd = pos[fit].mean(), pos[fit].std()

    def tensors(rows):
        return (torch.as_tensor((X[rows].reshape(-1, f) - mu) / sd, dtype=torch.float32),
                torch.as_tensor((pos[rows].reshape(-1) - ymu) / ysd, dtype=torch.float32))

    (xf, yf), (xv, yv), (xt, _) = tensors(fit), tensors(val), tensors(test)
    net = _mlp(f, hidden, depth, torch.Generator().manual_seed(seed))
    opt = torch.optim.Adam(net.parameters(), lr=lr)

    def val_loss():
        with torch.no_grad():
            return float(((net(xv).squeeze(-1) - yv) ** 2).mean())

    best, best_state = val_loss(), {k: v.clone() for k, v in net.state_dict().items()}
    for step in range(steps):
        loss = ((net(xf).squeeze(-1) - yf) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 10 == 0 or step + 1 == steps:
            v = val_loss()
            if v < best:
                best, best_state = v, {k: t.clone() for k, t in net.state_dict().items()}
    net.load_state_dict(best_state)
    with torch.no_grad():
        pred = net(xt).squeeze(-1).double().numpy() * ysd + ymu
    truth = pos[test].reshape(-1)
    r = float(np.corrcoef(pred, truth)[0, 1]) if pred.std() > 1e-12 else float("nan")
    return float(np.sqrt(np.mean((pred - truth) ** 2)) / truth.std()), r


def causal_contrast(model, tokens, seed=0):
    """Layer scores of the same weights with and without the causal mask, and whether the model is
    permutation-equivariant (one random permutation of the positions)."""
    perm = torch.as_tensor(np.random.default_rng(seed).permutation(tokens.shape[1]))
    rows = {}
    for label, causal in (("causal mask", True), ("no mask", False)):
        twin = pg.Transformer(dataclasses.replace(model.config, causal=causal))
        twin.load_state_dict(model.state_dict())
        H, Hp = hidden_states(twin, tokens), hidden_states(twin, tokens[:, perm])
        err = np.abs(Hp[-1] - H[-1][:, perm.numpy()]).max() / np.abs(H[-1]).max()
        rows[label] = {**{f"layer {i}": v for i, v in enumerate(layer_scores(H))}, "equivariant": bool(err < 1e-4)}
    return pd.DataFrame(rows).T


# ============================================================================ what the learned models use

ANALYSIS = dict(n_prompts=256, n_random=256, visible_k=4, probe_steps=300, probe_hidden=32, test_n=2000)
PROBE_KINDS = ("hidden state", "direction", "norm", "top-k earlier", "k random earlier", "cosine row")
INTERVENTIONS = ("none", "equal norms after layer 1", "equal attention norms in layer 1", "another prompt's prefix in layer 1")


def analysis_digest(s):
    """Digest of a learned run's analysis: the run's ``settings_digest``, ``ANALYSIS`` and posgeo's version."""
    what = {"settings": settings_digest(s), "analysis": ANALYSIS, "kinds": PROBE_KINDS, "interventions": INTERVENTIONS,
            "posgeo": pg.__version__}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]


def visible_set_feature(H, k, *, draw=None):
    """Per position t >= k of hidden states ``H`` (B, n, d), from its cosines to the earlier positions as a set: the k
    largest, sorted, and their mean over all earlier positions (``draw=None``), or the cosines to k earlier positions
    drawn at random (``draw``: a seed), sorted. Shape (B, n - k, k + 1) or (B, n - k, k); permuting the earlier
    positions leaves the first unchanged and the second unchanged in distribution."""
    C = pg.cosine_similarity_matrix(H)
    B, n, _ = C.shape
    rng = None if draw is None else np.random.default_rng(draw)
    out = np.empty((B, n - k, k + (draw is None)))
    for t in range(k, n):
        earlier = C[:, t, :t]
        if rng is None:
            out[:, t - k, :k] = -np.sort(-earlier, axis=1)[:, :k]
            out[:, t - k, k] = earlier.mean(axis=1)
        else:
            pick = np.argsort(rng.random((B, t)), axis=1)[:, :k]
            out[:, t - k] = -np.sort(-np.take_along_axis(earlier, pick, axis=1), axis=1)
    return out


def layout_free_features(H, kind, k, *, seed=0):
    """The probe features of positions k, k + 1, ... of ``H`` (B, n, d): the hidden state, its direction, its norm,
    ``visible_set_feature`` (``"top-k earlier"``; ``"k random earlier"`` with ``draw=seed``) or, for comparison, the
    cosine row without the diagonal, which a probe can read by layout."""
    if kind == "hidden state":
        return H[:, k:]
    norm = np.linalg.norm(H, axis=-1, keepdims=True)
    if kind == "direction":
        return (H / norm)[:, k:]
    if kind == "norm":
        return norm[:, k:]
    if kind == "top-k earlier":
        return visible_set_feature(H, k)
    if kind == "k random earlier":
        return visible_set_feature(H, k, draw=seed)
    if kind == "cosine row":
        return probe_features(H, "cosine")[:, k:]
    raise ValueError(f"unknown probe feature {kind!r}; choose from {', '.join(PROBE_KINDS)}")


def prompt_positions(tokens):
    """(B, n) bool: the positions before each sequence's ``=`` (its prompt, without ``=``)."""
    eq = tokens == encode("=")[0]
    return torch.cumsum(eq.int(), dim=1) == 0


@dataclass
class Intervention:
    """A forward hook on the first block: ``kind`` one of ``INTERVENTIONS``; ``scale`` the norm the norm interventions set
    (the mean over the prompt positions, ``intervention_scales``); ``where`` (B, n) bool, the positions it changes."""

    kind: str
    scale: float = 1.0
    where: torch.Tensor | None = None

    def __post_init__(self):
        if self.kind not in INTERVENTIONS:
            raise ValueError(f"unknown intervention {self.kind!r}; choose from {', '.join(INTERVENTIONS)}")

    def _change(self, x, new):
        keep = self.where[..., None] if self.where is not None else torch.ones(x.shape[:2] + (1,), dtype=torch.bool, device=x.device)
        return torch.where(keep, new, x)

    def on_attention(self, module, args, out):
        a, probs = out
        if self.kind == "equal attention norms in layer 1":
            a = self._change(a, a / a.norm(dim=-1, keepdim=True).clamp_min(1e-12) * self.scale)
        elif self.kind == "another prompt's prefix in layer 1":  # the norms kept, the directions of the next prompt in the batch
            other = a.roll(1, dims=0)
            a = self._change(a, other / other.norm(dim=-1, keepdim=True).clamp_min(1e-12) * a.norm(dim=-1, keepdim=True))
        return a, probs

    def on_block(self, module, args, out):
        x, probs = out
        if self.kind == "equal norms after layer 1":
            x = self._change(x, x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12) * self.scale)
        return x, probs


@torch.no_grad()
def intervention_scales(model, tokens):
    """Mean norms over the prompt positions of ``tokens``: the first attention's output and the state after layer 1."""
    where = prompt_positions(tokens)
    a = torch.as_tensor(first_attention_output(model, tokens))
    with pg.eval_mode(model):
        h1 = model(tokens.to(next(model.parameters()).device), return_hidden=True).hidden_states[1].cpu()
    return {"attention": float(a.norm(dim=-1)[where].mean()), "layer 1": float(h1.norm(dim=-1)[where].mean())}


@torch.no_grad()
def intervened_accuracy(model, pool, kind, scales, batch_size=500):
    """``accuracy`` (exact match, token accuracy) with the intervention ``kind`` applied to the prompt positions."""
    rows, n_tok, n_ok = [], 0, 0
    with pg.eval_mode(model):
        for start in range(0, len(pool.samples), batch_size):
            b = _on(model, pool.batch(torch.arange(start, min(start + batch_size, len(pool.samples)))))
            hook = Intervention(kind, scales["layer 1" if kind == "equal norms after layer 1" else "attention"],
                                where=prompt_positions(b.tokens))
            handles = [model.blocks[0].attn.register_forward_hook(hook.on_attention),
                       model.blocks[0].register_forward_hook(hook.on_block)]
            try:
                pred = model(b.tokens, attention_mask=b.attention_mask).logits.argmax(-1)
            finally:
                for h in handles:
                    h.remove()
            keep = b.targets != pg.IGNORE_INDEX
            rows.append(((pred == b.targets) | ~keep).all(dim=1))
            n_tok, n_ok = n_tok + int(keep.sum()), n_ok + int(((pred == b.targets) & keep).sum())
    return float(torch.cat(rows).float().mean()), n_ok / max(n_tok, 1)


@torch.no_grad()
def prefix_permuted_attention(attn, x, seed=0):
    """The causal attention sublayer ``attn`` (a block's ``.attn``) on its input ``x`` (B, n, d), query t reading its
    prefix 0..t in a random order of its own (one permutation per query; keys and values permuted together)."""
    B, n, d = x.shape
    heads, hd = attn.cfg.n_heads, attn.cfg.head_dim
    q, k, v = attn.qkv(x).view(B, n, 3, heads, hd).permute(2, 0, 3, 1, 4)  # each (B, heads, n, hd)
    rng, out = np.random.default_rng(seed), torch.empty_like(x)
    for t in range(n):
        order = torch.as_tensor(rng.permutation(t + 1))
        w = (q[:, :, t:t + 1] @ k[:, :, order].transpose(-1, -2) / math.sqrt(hd)).softmax(dim=-1)
        out[:, t] = attn.out((w @ v[:, :, order]).transpose(1, 2).reshape(B, d))
    return out


def ou_kernel(n):
    """The cosine of causal means of i.i.d. vectors at 1-based positions 1..n: sqrt(min(k, l) / max(k, l))."""
    k = np.arange(1, n + 1, dtype=np.float64)
    return np.sqrt(np.minimum.outer(k, k) / np.maximum.outer(k, k))


def kernel_fit(C, K):
    """Pearson r and RMSE between the off-diagonal entries of a mean cosine matrix ``C`` and a kernel ``K``."""
    off = ~np.eye(len(K), dtype=bool)
    return float(np.corrcoef(C[off], K[off])[0, 1]), float(np.sqrt(np.mean((C[off] - K[off]) ** 2)))


def analyse_learned(model, task, seed, s):
    """What a learned run's model does with position: rows of (task, seed, measure, input, layer, feature, value)."""
    a = SimpleNamespace(**ANALYSIS)
    prompts, rand = analysis_tokens(task, a.n_prompts), random_tokens(a.n_random, analysis_tokens(task, 1).shape[1])
    rows = []

    def add(measure, value, **where):
        rows.append({"task": task, "seed": seed, "measure": measure, "input": where.get("input", ""),
                     "layer": where.get("layer", -1), "feature": where.get("feature", ""), "value": float(value)})

    for name, tokens in (("prompts", prompts), ("random tokens", rand)):
        H = hidden_states(model, tokens)
        for layer, score in enumerate(layer_scores(H)):
            add("adjacency score", score, input=name, layer=layer)
        K = ou_kernel(tokens.shape[1])
        for label, X in (("layer 1", H[1]), ("first attention output", first_attention_output(model, tokens))):
            r, rmse = kernel_fit(pg.cosine_similarity_matrix(X).mean(axis=0), K)
            add("kernel r", r, input=name, feature=label)
            add("kernel rmse", rmse, input=name, feature=label)
        if name == "random tokens":
            for layer, h in enumerate(H):
                for kind in PROBE_KINDS:
                    X = layout_free_features(h, kind, a.visible_k, seed=seed)
                    nrmse, r = train_position_probe(X, hidden=a.probe_hidden, steps=a.probe_steps, seed=seed, first=a.visible_k)
                    add("probe NRMSE", nrmse, input=name, layer=layer, feature=kind)
                    add("probe R", r, input=name, layer=layer, feature=kind)
    test = P2Task(task, n_samples=a.test_n, seed=TEST_SEED)
    scales = intervention_scales(model, prompts)
    for kind in INTERVENTIONS:
        exact, token = (accuracy(model, test) if kind == "none" else intervened_accuracy(model, test, kind, scales))
        add("exact match", exact, input="test prompts", feature=kind)
        add("token accuracy", token, input="test prompts", feature=kind)
    return rows


# ============================================================================ the learned runs' analysis, as the chapter shows it

DATA = Path(__file__).resolve().parent / "data"


def analysis_runs(frame, measure, *, by, input=None, feature=None, layer=None):
    """One row per (task, seed) of the analysis ``frame`` and one column per value of ``by`` (``"layer"`` or
    ``"feature"``), holding ``measure``; rows of one ``input``/``feature``/``layer`` only, where given."""
    f = frame[frame["measure"] == measure]
    for column, value in (("input", input), ("feature", feature), ("layer", layer)):
        if value is not None:
            f = f[f[column] == value]
    wide = f.pivot_table(index=["task", "seed"], columns=by, values="value", sort=False).reset_index()
    wide.columns.name = None
    return wide


def summary_over_seeds(wide, columns, bounds=(0, 1)):
    """``pg.seed_summary`` by task of the columns of an ``analysis_runs`` table, tasks in ``LEARNED_TASKS``' order."""
    summary = pg.seed_summary(wide, by="task", metrics=list(columns), bounds={c: bounds for c in columns})
    return summary.reindex([t for t in LEARNED_TASKS if t in summary.index])


def paired_drops(wide, base, others):
    """Per task, the paired difference over seeds ``others - base`` (``pg.seed_difference``) as "mean [low, high]"."""
    rows = {}
    for task, g in wide.groupby("task", sort=False):
        g = g.sort_values("seed")
        rows[task] = {c: pg.seed_difference(g[c].to_numpy(), g[base].to_numpy(), paired=True) for c in others}
    return rows


def plot_learned_layers(summaries):
    """Adjacency score by layer (mean over seeds with its 95% band), one line per task, one panel per input."""
    panels = []
    for title, summary in summaries.items():
        layers = [c for c in summary.columns.get_level_values(0).unique()]
        rows = [{"series": task, "layer": int(layer), "value": summary.loc[task, (layer, "mean")],
                 "low": summary.loc[task, (layer, "low")], "high": summary.loc[task, (layer, "high")]}
                for task in summary.index for layer in layers]
        panels.append(pg.series_chart(pd.DataFrame(rows), x="layer", y="value", series="series", lower="low", upper="high",
                                      x_title="layer (0 = token embeddings)", y_title="adjacency score", series_title="task",
                                      title=title, width=pg.PANEL_WIDTH, height=220, series_order=list(summary.index)))
    return pg.finish_chart(alt.hconcat(*panels).resolve_scale(color="shared", strokeDash="shared", y="shared"), description=(
        "Adjacency score of every layer of the learned decoders, one line per task: the mean over seeds with its 95% "
        "interval, on held-out prompts and on random tokens."))


# ============================================================================ charts


def _upright(chart):
    for layer in chart.layer:
        if getattr(layer.encoding.x, "shorthand", "").endswith(":O"):
            layer.encoding.x.axis = alt.Axis(labelAngle=0)
    return chart


def plot_similarity_grid(profiles):
    """Batch-mean cosine matrices, one panel per (layer, model), on one diverging scale from -1 to 1."""
    panels = []
    first = next(iter(profiles.values()))
    for layer in range(len(first.scores)):
        for label, p in profiles.items():
            chart = pg.heatmap_chart(p.mean_similarity[layer], title=f"{label}, layer {layer}: score {p.scores[layer]:.3f}",
                                     value_title="cosine similarity (batch mean)", domain=(-1.0, 1.0), scheme="blueorange")
            panels.append(chart.encode(stroke=alt.Stroke("value:Q", scale=alt.Scale(scheme="blueorange", domain=[-1.001, 1.001]),
                                                         legend=None)))
    return pg.finish_chart(pg.panel_grid(panels).resolve_scale(color="shared"), canvas=True, description=(
        "Heatmaps of the batch-mean cosine similarity between the hidden states of positions i (rows) and j (columns), "
        f"one panel per layer and model ({', '.join(profiles)}), on one colour scale from -1 (blue) to 1 (orange)."))


def plot_offset_decay(curves):
    """Mean cosine against the offset ``k - i``, one line per curve."""
    frame = pd.concat([pd.DataFrame({"offset": np.arange(len(y)), "cosine": y, "curve": label}) for label, y in curves.items()])
    return pg.finish_chart(pg.series_chart(frame, x="offset", y="cosine", series="curve", x_title="offset k - i (positions)",
                                           y_title="mean cosine C[k, i]", series_title="curve", height=280), description=(
        "Mean cosine similarity between the hidden states of positions k and i against their offset k - i, one line per "
        f"construction or layer ({', '.join(curves)})."))


def plot_init_ablation(table, columns):
    """Score against the embedding std, one line per (column, mean), with its 95% interval (a ``pg.seed_summary`` table)."""
    parts = []
    for c in columns:
        part = table[c].dropna().rename_axis(["μ", "σ"]).reset_index()
        parts.append(pd.DataFrame({"std": part["σ"], "score": part["mean"], "low": part["low"], "high": part["high"],
                                   "series": [f"{c}, mean {m:g}" for m in part["μ"]]}))
    frame = pd.concat([*parts, pd.DataFrame({"std": sorted(set(table.index.get_level_values("std"))), "score": 0.5,
                                             "series": "chance"})], ignore_index=True)
    return pg.finish_chart(_upright(pg.series_chart(
        frame, x="std", y="score", series="series", lower="low", upper="high", x_type="ordinal", points=True,
        x_title="token-embedding std σ (log-spaced grid)", y_title="adjacency score", series_title="score, embedding mean μ",
        height=280)), description=("Adjacency score against the standard deviation of the token-embedding initialisation, "
                                   "one line per embedding mean, with the 95% interval over seeds as a band; chance dotted."))


def plot_learned_curves(curves):
    """Held-out exact match and training loss against step (``learned_runs``' curves): each task's mean over seeds
    with its 95% band (Student t), or its one seed's line."""
    panels, order = [], []
    for metric, title in (("exact match", "held-out exact match (teacher-forced)"), ("train loss", "training loss (answer tokens)")):
        parts = []
        for task, group in curves.dropna(subset=[metric]).groupby("task", sort=False):
            seeds = group["seed"].nunique()
            label = f"{task} (mean of {seeds} seeds)" if seeds > 1 else f"{task} (seed {group['seed'].iloc[0]})"
            part = group.groupby("step", sort=True)[metric].agg(list).reset_index()
            ivs = [pg.seed_interval(v, bounds=(0, 1) if metric == "exact match" else (0, None)) if len(v) > 1 else None
                   for v in part[metric]]
            part = pd.DataFrame({"step": part["step"], "value": [iv.mean if iv else v[0] for iv, v in zip(ivs, part[metric])],
                                 "low": [iv.low if iv else np.nan for iv in ivs], "high": [iv.high if iv else np.nan for iv in ivs]})
            parts.append(part.assign(series=label))
            order += [label] if label not in order else []
        panels.append(pg.series_chart(pd.concat(parts, ignore_index=True), x="step", y="value", series="series", lower="low",
                                      upper="high", x_title="training step", y_title=title, series_title="task", title=title,
                                      width=pg.PANEL_WIDTH, height=220, series_order=order))
    return pg.finish_chart(alt.hconcat(*panels).resolve_scale(color="shared", strokeDash="shared"), description=(
        "Held-out teacher-forced exact match (left) and the mean training loss since the previous point (right) against "
        "the training step, one line per task: the mean over seeds with its 95% interval, or the one seed's line."))


if __name__ == "__main__":  # the data files, one thread per process:
    torch.set_num_threads(1)
    cli = argparse.ArgumentParser(description="Write a data file of the chapter.")  # python _ch11.py learned OUT.csv --jobs 2
    cli.add_argument("what", choices=("learned", "analyse", "full"))
    cli.add_argument("out", type=Path, help="learned, analyse: the table; full: the folder of its files (e.g. data)")
    cli.add_argument("--jobs", type=int, default=1, help="runs trained or analysed at once (one process each)")
    cli.add_argument("--device", default="cpu", help="where the runs train and the analysis runs, e.g. cuda")
    cli.add_argument("--budget", type=float, help="full: seconds (default: no limit; a second call resumes)")
    cli.add_argument("--tasks", nargs="+", choices=LEARNED_TASKS, help="learned, analyse: these tasks only")
    cli.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                     help="learned, analyse: settings other than LEARNED's, e.g. n_layers=6 or init_std=0.2 (JSON values)")
    cli_args = cli.parse_args()
    changed = {k: json.loads(v) for k, v in (item.split("=", 1) for item in cli_args.set)}
    if cli_args.tasks:
        changed["tasks"] = tuple(cli_args.tasks)
    LEARNED_RUN = learned_settings(**changed)
    stamp = lambda line: print(time.strftime("%H:%M:%S"), line, flush=True)  # noqa: E731
    if cli_args.what == "full":  # P2's scale: FULL_LEARNED and FULL_SWEEP (--tasks and --set do not apply)
        if changed:
            cli.error("full takes neither --tasks nor --set: its settings are FULL_LEARNED and FULL_SWEEP")
        full_profile(full_plans(cli_args.out), jobs=cli_args.jobs, device=cli_args.device,
                     budget=float("inf") if cli_args.budget is None else cli_args.budget, log=stamp)
    elif cli_args.what == "analyse":  # every run of OUT (written by learned) not yet in OUT's <stem>_analysis.csv
        learned_analyses(cli_args.out, LEARNED_RUN, jobs=cli_args.jobs, device=cli_args.device, log=stamp)
    else:  # LEARNED: every task and seed not yet in OUT (and its learning curves in OUT's <stem>_curves.csv)
        learned_runs(cli_args.out, LEARNED_RUN, jobs=cli_args.jobs, device=cli_args.device, log=stamp)
