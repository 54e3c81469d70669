"""The known-truth calibration of the estimators of positional geometry (the calibration appendix)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, spearmanr

import posgeo as pg

REGIMES = ("smooth", "rare", "stationary")
ESTIMATORS = ("plug-in", "first-order", "matched", "hybrid")
# Zipf law with an exponential cut-off, p_r ~ r**-0.95 exp(-r / 10135) for frequency rank r, fitted
# (least squares on log frequency) to IMDB's unigram frequencies in bert-base-uncased ids.
ZIPF_EXPONENT, ZIPF_CUTOFF = 0.95, 10135.0
RARE_HEAD = 1000  # ranks the "rare" regime keeps fixed (76% of the mass)
STRENGTH = {"smooth": 1.3, "rare": 2.0, "stationary": 0.0}
NESTED_LENGTH = 80  # longest sentence of a nested corpus
# Sequences reaching each position: SST-2 train at positions 0-47 (exact), IMDB train at every
# 10th position and 509 (interpolated log-linearly in between), IMDB's last size at every position.
SST2_REACH = (
    67349, 65371, 60048, 53984, 48639, 43890, 39735, 36022, 32755, 29808, 27158, 24745, 22607,
    20657, 18880, 17219, 15704, 14331, 13046, 11914, 10808, 9762, 8853, 8033, 7227, 6494, 5802,
    5174, 4636, 4145, 3703, 3255, 2855, 2518, 2214, 1928, 1686, 1491, 1288, 1096, 941, 793, 663,
    574, 492, 407, 334, 279,
)
IMDB_REACH = (
    25000, 25000, 24995, 24980, 24943, 24810, 24520, 24180, 23790, 23397, 23043, 22664, 22273,
    21746, 20990, 19848, 18519, 17219, 16036, 14989, 14087, 13228, 12446, 11735, 11096, 10510,
    9956, 9466, 9032, 8620, 8190, 7793, 7451, 7115, 6780, 6501, 6221, 5933, 5702, 5464, 5238,
    4987, 4761, 4576, 4388, 4213, 4028, 3865, 3712, 3564, 3450, 3334,
)
SIZES = {
    "sst2": (48, tuple(range(48)), SST2_REACH),
    "imdb": (510, tuple(range(0, 510, 10)) + (509,), IMDB_REACH),
    "imdb-late": (510, (0, 509), (3334, 3334)),
}


def reach(size):
    """Sequences reaching each position of a calibration size (non-increasing)."""
    n, knots, counts = SIZES[size]
    curve = np.exp(np.interp(np.arange(n), knots, np.log(np.asarray(counts, dtype=np.float64))))
    return np.minimum.accumulate(np.round(curve).astype(np.int64))


def positions(size, max_positions=None):
    """All positions of a size, or max_positions of them spread evenly."""
    n = SIZES[size][0]
    if max_positions is None or max_positions >= n:
        return np.arange(n)
    return np.round(np.linspace(0, n - 1, max_positions)).astype(np.int64)


def calibration_truth(regime, *, n_positions, vocab_size=30522, seed=0, positions=None, strength=None):
    """True per-position distributions: a Zipf base drifted over a half circle of positions."""
    a = STRENGTH[regime] if strength is None else strength
    pos = np.arange(n_positions) if positions is None else np.asarray(positions, dtype=np.int64)
    r = np.arange(1, vocab_size + 1, dtype=np.float64)
    logp = -ZIPF_EXPONENT * np.log(r) - r / ZIPF_CUTOFF
    base = np.exp(logp - logp.max())
    base /= base.sum()
    if regime == "stationary":
        return np.tile(base, (pos.size, 1))
    phi = np.random.default_rng(seed).standard_normal((vocab_size, 2))
    x = np.log1p(pos.astype(np.float64)) / np.log(n_positions)
    u = np.stack([np.cos(np.pi * x), np.sin(np.pi * x)], axis=1) * (a / np.sqrt(2.0))
    head = 0 if regime == "smooth" else min(RARE_HEAD, vocab_size // 4)
    logw = u @ phi[head:].T
    logw -= logw.max(axis=1, keepdims=True)
    tail = base[head:] * np.exp(logw)
    tail *= base[head:].sum() / tail.sum(axis=1, keepdims=True)
    return np.hstack([np.broadcast_to(base[:head], (pos.size, head)), tail])


def sample_corpus(truth, *, reach, seed):
    """Sequences whose token at position i is an independent draw from truth[i]; reach[i] reach i."""
    rng = np.random.default_rng(seed)
    r = np.asarray(reach, dtype=np.int64)
    n, V = truth.shape
    lengths = np.searchsorted(-r, -np.arange(r[0]), side="left")  # #{i : r[i] > k}
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    tokens = np.empty(int(offsets[-1]), dtype=np.int32)
    ids = np.arange(V, dtype=np.int32)
    for i in range(n):
        draws = np.repeat(ids, rng.multinomial(int(r[i]), truth[i] / truth[i].sum()))
        rng.shuffle(draws)
        tokens[offsets[: r[i]] + i] = draws  # the first r[i] sequences are those longer than i
    return pg.Sequences(tokens=tokens, offsets=offsets, vocab_size=V)


def ranking_encodings(rows, n_total, D_true):
    """The five encodings ranked by stress: four standard ones and the truth's own classical MDS."""
    return {
        "sinusoidal": pg.sinusoidal_encoding(n_total, 64)[rows],
        "RoPE": pg.rope_encoding(n_total, 64, head_dim=16)[rows],
        "ALiBi": pg.alibi_encoding(n_total, 8)[rows],
        "random": pg.random_encoding(n_total, 64, seed=0)[rows],
        "PMDS k=3 (truth)": pg.classical_mds(D_true, min(3, len(rows))).coords,
    }


def stresses(encodings, D):
    """Scale-optimal stress of each encoding against D (NaN when D is 0)."""
    if not np.any(D > 0):
        return np.full(len(encodings), np.nan)
    return np.array([pg.stress(P, D, scale="optimal") for P in encodings.values()])


def kendall(a, b):
    return np.nan if np.isnan(a).any() or np.isnan(b).any() else float(kendalltau(a, b).statistic)


def spearman(a, b):
    return np.nan if np.ptp(a) == 0 or np.ptp(b) == 0 else float(spearmanr(a, b).statistic)


def known_truth(regime, size, max_positions=None, vocab_size=30522, seed=0):
    """Positions, their reach, the true distributions and distances, the test encodings, their true stresses."""
    pos = positions(size, max_positions)
    n_total = SIZES[size][0]
    truth = calibration_truth(regime, n_positions=n_total, vocab_size=vocab_size, seed=seed, positions=pos)
    D_true = pg.hellinger_matrix(truth)
    enc = ranking_encodings(pos, n_total, D_true)
    return SimpleNamespace(positions=pos, reach=reach(size)[pos], truth=truth, D=D_true, encodings=enc,
                           stress=stresses(enc, D_true))


def estimate(name, seqs, n, V, seed):
    """One estimator's distance matrix."""
    if name == "plug-in":
        return pg.hellinger_matrix(pg.positional_marginals(seqs, n, V))
    if name == "first-order":  # subtract the bias b_i + b_j, b_i = s_i^2 / 4, from the squared plug-in
        b = pg.hellinger_noise_floor(seqs, n, V, seed=seed).bias_sq
        D = np.sqrt(np.clip(pg.hellinger_matrix(pg.positional_marginals(seqs, n, V)) ** 2 - b[:, None] - b[None, :], 0, None))
        np.fill_diagonal(D, 0.0)
        return D
    if name == "matched":
        return pg.matched_hellinger_matrix(seqs, n, V, seed=seed)
    return pg.hybrid_hellinger_matrix(seqs, n, V)


def _seeds(seed, k):
    """Two seeds below 2**31 for each of k replicates."""
    return [tuple(int(x) >> 1 for x in c.generate_state(2, dtype=np.uint32)) for c in np.random.SeedSequence(seed).spawn(k)]


def calibrate(regime, size, *, n_replicates=2, seed=0, estimators=ESTIMATORS, max_positions=None, vocab_size=30522):
    """Each estimator against the truth, averaged over replicate corpora: one row per estimator."""
    kt = known_truth(regime, size, max_positions, vocab_size, seed)
    k, iu = kt.positions.size, np.triu_indices(kt.positions.size, 1)
    t = kt.D[iu]
    names = ["plug-in"] + [e for e in estimators if e != "plug-in"]
    rows = []
    for s_corpus, s_est in _seeds(seed, n_replicates):
        seqs = sample_corpus(kt.truth, reach=kt.reach, seed=s_corpus)
        D = {e: estimate(e, seqs, k, vocab_size, s_est) for e in names}
        plug2 = float((D["plug-in"][iu] ** 2).sum())
        for e in names:
            d = D[e][iu]
            rows.append({
                "estimator": e, "bias": float((d - t).mean()), "mse": float(((d - t) ** 2).mean()),
                "rel_bias_mean": float((d.mean() - t.mean()) / t.mean()) if t.mean() > 0 else np.nan,
                "mean_distance": float(d.mean()), "true_mean_distance": float(t.mean()),
                "noise_share": 1.0 - float((d**2).sum()) / plug2, "true_noise_share": 1.0 - float((t**2).sum()) / plug2,
                "spearman": spearman(d, t), "ranking_tau": kendall(kt.stress, stresses(kt.encodings, D[e])),
            })
    summary = pd.DataFrame(rows).groupby("estimator", sort=False).mean()
    summary.insert(1, "rmse", np.sqrt(summary.pop("mse")))
    return summary


def _inside(geometry, D_true, iu):
    return (geometry.low[iu] <= D_true[iu]) & (D_true[iu] <= geometry.high[iu])


def interval_coverage(regime, size, *, n_corpora=2, n_boot=25, seed=0, max_positions=None, vocab_size=30522):
    """How often the hybrid's half-sample intervals, plain and widened by the matched estimate, hold the truth."""
    kt = known_truth(regime, size, max_positions, vocab_size, seed)
    k, iu = kt.positions.size, np.triu_indices(kt.positions.size, 1)
    ea, eb = np.triu_indices(len(kt.encodings), 1)  # every pair of test encodings
    out = {key: [] for key in ("pairs", "per", "width", "pairs_w", "per_w", "width_w", "stress")}
    diffs = {w: {"hits": [], "claims": 0, "wrong": 0} for w in ("", "_widened")}
    for s_corpus, s_boot in _seeds(seed, n_corpora):
        seqs = sample_corpus(kt.truth, reach=kt.reach, seed=s_corpus)
        bg = pg.bootstrap_geometry(seqs, k, vocab_size=vocab_size, estimator="hybrid", n_boot=n_boot, seed=s_boot,
                                   progress=False)
        wide = bg.widened(pg.matched_hellinger_matrix(seqs, k, vocab_size, seed=s_boot))
        for g, w in ((bg, ""), (wide, "_w")):
            ok = _inside(g, kt.D, iu)
            out["pairs" + w].append(ok)
            out["per" + w].append(float(ok.mean()))
            out["width" + w].append(g.high[iu] - g.low[iu])
        if np.isfinite(kt.stress).all():
            _, lo, hi = bg.interval(lambda D: stresses(kt.encodings, D))
            out["stress"].extend((lo <= kt.stress) & (kt.stress <= hi))
            d_true = kt.stress[ea] - kt.stress[eb]
            for g, w in ((bg, ""), (wide, "_widened")):
                _, lo, hi = g.interval(lambda D: (lambda v: v[ea] - v[eb])(stresses(kt.encodings, D)))
                separated = (hi < 0) | (lo > 0)
                diffs[w]["hits"].extend((lo <= d_true) & (d_true <= hi))
                diffs[w]["claims"] += int(separated.sum())
                diffs[w]["wrong"] += int((separated & (np.sign(lo + hi) != np.sign(d_true))).sum())
    row = {"regime": regime, "size": size,
           "pairs": float(np.concatenate(out["pairs"]).mean()), "pairs_min": min(out["per"]),
           "stress": float(np.mean(out["stress"])) if out["stress"] else np.nan,
           "median_width": float(np.median(np.concatenate(out["width"]))),
           "pairs_widened": float(np.concatenate(out["pairs_w"]).mean()), "pairs_widened_min": min(out["per_w"]),
           "median_width_widened": float(np.median(np.concatenate(out["width_w"])))}
    for w, d in diffs.items():
        row |= {"differences" + w: float(np.mean(d["hits"])) if d["hits"] else np.nan,
                "claims" + w: d["claims"], "wrong_claims" + w: d["wrong"]}
    return row | {"n_pairs": len(diffs[""]["hits"])}


def nested_corpus(regime, *, n_sentences=8000, phrases_per_sentence=7, n_positions=48, vocab_size=30522, seed=0):
    """Sentences drawn from a known truth, each followed by random constituents of a random bracketing."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5E77]))
    mu = calibration_truth(regime, n_positions=NESTED_LENGTH, vocab_size=vocab_size, seed=seed)
    lengths = np.clip(np.round(np.exp(rng.normal(np.log(20.0), 0.5, size=n_sentences))) + 2, 2, NESTED_LENGTH)
    reach_s = np.array([(lengths > j).sum() for j in range(int(lengths.max()))], dtype=np.int64)
    sentences = sample_corpus(mu[: reach_s.size], reach=reach_s, seed=int(rng.integers(2**31)))
    s_tok, s_off = np.asarray(sentences.tokens), np.asarray(sentences.offsets)
    pieces, groups, starts = [], [], []
    for s, L in enumerate(np.diff(s_off)):
        spans, stack = [], [(0, int(L))]
        while stack:  # a random binary bracketing of [0, L)
            a, b = stack.pop()
            if b - a >= 2:
                cut = int(rng.integers(a + 1, b))
                spans += [(a, cut), (cut, b)]
                stack += [(a, cut), (cut, b)]
        for a, b in [(0, int(L))] + [spans[i] for i in rng.permutation(len(spans))[:phrases_per_sentence]]:
            pieces.append(s_tok[s_off[s] + a: s_off[s] + b])
            groups.append(s)
            starts.append(a)
    starts, lens = np.array(starts, dtype=np.int64), np.array([p.size for p in pieces])
    truth = np.empty((n_positions, vocab_size))
    for i in range(n_positions):  # the mean of the sentence distributions where the sequences reaching i stand
        w = np.bincount(starts[lens > i] + i, minlength=NESTED_LENGTH).astype(np.float64)
        truth[i] = (w @ mu) / w.sum()
    D_true = pg.hellinger_matrix(truth)
    D_true[D_true < 1e-9] = 0.0  # identical mixtures (stationary): exactly 0
    return SimpleNamespace(sequences=pg.Sequences.from_list(pieces, vocab_size=vocab_size),
                           groups=np.array(groups, dtype=np.int64), starts=starts, truth=truth, true_distances=D_true)


def nested_calibration(regime, *, n_corpora=2, n_boot=10, seed=0, **corpus_options):
    """Six estimates on nested corpora against the truth, and the coverage of the widened hybrid intervals."""
    rows = {}
    for c in range(n_corpora):
        corpus = nested_corpus(regime, seed=seed + c, **corpus_options)
        seqs, D_true, g = corpus.sequences, corpus.true_distances, corpus.groups
        n, V = D_true.shape[0], seqs.vocab_size
        iu = np.triu_indices(n, 1)
        enc = ranking_encodings(np.arange(n), NESTED_LENGTH, D_true)
        s_true = stresses(enc, D_true)
        boot = pg.bootstrap_geometry(seqs, n, vocab_size=V, estimator="hybrid", n_boot=n_boot, groups=g,
                                     seed=seed + c, progress=False)
        estimates = {
            "plug-in": pg.hellinger_matrix(pg.positional_marginals(seqs, n, V)),
            "hybrid": boot.estimate,
            "matched, halves of sequences": pg.matched_hellinger_matrix(seqs, n, V, seed=seed + c),
            "matched, halves of sentences": pg.matched_hellinger_matrix(seqs, n, V, seed=seed + c, groups=g),
            "jackknife, blocks of sequences": pg.hybrid_hellinger_matrix(seqs, n, V, split="jackknife", seed=seed + c),
            "jackknife, blocks of sentences": pg.hybrid_hellinger_matrix(seqs, n, V, split="jackknife", seed=seed + c,
                                                                         groups=g),
        }
        for name, D in estimates.items():
            err, t = D[iu] - D_true[iu], float(D_true[iu].mean())
            pairs = np.nan if name == "plug-in" else float(_inside(boot if name == "hybrid" else boot.widened(D),
                                                                   D_true, iu).mean())
            rows.setdefault(name, []).append({
                "mean_distance": float(D[iu].mean()), "true_mean_distance": t,
                "rel_bias_mean": float(err.mean()) / t if t > 0 else np.nan, "rmse": float(np.sqrt(np.mean(err**2))),
                "spearman": spearman(D[iu], D_true[iu]), "ranking_tau": kendall(stresses(enc, D), s_true),
                "pairs": pairs})
    return pd.DataFrame({name: pd.DataFrame(r).mean() for name, r in rows.items()}).T
