r"""Monotonicity of learned position tables, and P1's NTK regime made executable.

P1 (Conjecture 5) conjectures that a learned encoder is *monotone*: when the Hellinger
distance between positional marginals grows with the offset,
:math:`|i-j| \le |i-k| \Rightarrow d_H(\mu_i, \mu_j) \le d_H(\mu_i, \mu_k)`, the learned
vectors satisfy :math:`\lVert p_i - p_j\rVert \le \lVert p_i - p_k\rVert` as well. Its
Appendix A proves this in the neural-tangent-kernel (NTK) regime, where the attention
weights stay (nearly) at their initial values and the gradient flow of the position table
is linear.

This module runs that regime instead of assuming it. On a synthetic corpus whose true
Hellinger distances grow with the offset (:func:`posgeo.synthetic_marginals` with
``geometry="line"``, see :func:`ntk_marginals`) it trains the learned position table of a small
:class:`posgeo.Transformer`

* with every attention parameter frozen at its initial value (``regime="frozen"``: the
  attention map is the fixed one of the linearised dynamics), and
* with everything trainable (``regime="full"``),

for two objectives of P1's proof: masked-language modelling (``"mlm"``) and sequence
classification read from a ``[CLS]`` token (``"cls"``, :class:`OrderDetectionTask`). It
then measures the monotonicity violation rate of the learned tables
(:func:`posgeo.monotonicity_violations`), how far full training departs from the frozen
solution, and how that departure changes with the width ``d_model``.

Everything is seeded and cached (training through :func:`posgeo.train`). Training runs
single-threaded (:func:`torch.set_num_threads` is set to 1 for the duration of a run and
restored afterwards): for models this small, thread synchronisation costs more than it
saves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence
import altair as alt
import numpy as np
import pandas as pd
import torch

import posgeo as pg
from posgeo import torch_threads as _torch_threads
from posgeo import pairwise_distances, stress
from posgeo import TransformerConfig, Transformer
from posgeo import encoding_distances, monotonicity_violations
from posgeo import current_profile
from posgeo import progress_bar
from posgeo import MarginalSampler, synthetic_marginals
from posgeo import Batch, FirstMarkerTask, MLMTask, TrainConfig, train
from posgeo.validation import check_int

__all__ = [
    'NTKSettings',
    'ntk_settings',
    'ntk_marginals',
    'OrderDetectionTask',
    'attention_prefixes',
    'NTKRun',
    'ntk_task',
    'train_position_table',
    'local_violation_rate',
    'monotonicity_table',
    'violation_intervals',
    'ntk_comparison',
    'width_sweep',
    'width_learning_rate',
    'metric_bounds',
    'from_scratch_tables',
    'from_scratch_text_tables',
    'plot_anchor_distances',
    'plot_width_sweep',
]


Objective = Literal["mlm", "cls"]
Regime = Literal["frozen", "full"]
_OBJECTIVES = ("mlm", "cls")
_REGIMES = ("frozen", "full")


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class NTKSettings:
    """Sizes of the NTK experiments (see :func:`ntk_settings`).

    Attributes
    ----------
    profile : str
        ``"small"`` or ``"full"``.
    n_positions : int
        Positions of the line corpus (rows of the learned table that are scored).
    vocab_size : int
        Tokens of the line corpus.
    concentration : float
        Bump concentration of :func:`posgeo.synthetic_marginals` (smaller: wider bumps, so
        that Hellinger distances keep growing across the whole line instead of saturating).
    d_model : int
        Width of the main comparison.
    widths : tuple of int
        Widths of the sweep.
    n_heads : int
        Attention heads (fixed across widths: the head dimension grows with the width).
    layers : dict of str to int
        Transformer blocks per objective (``"mlm"``, ``"cls"``).
    ff_mult : int
        Feed-forward width ``d_ff = ff_mult * d_model``.
    steps : int
        AdamW steps of every run.
    batch_size : int
    lr : float
        Learning rate at width ``d_model``; the width sweep scales it (see :func:`width_sweep`).
    seeds : tuple of int
        Seeds of every training run: the main comparison and the width sweep train each
        configuration once per seed and report the mean and its interval over them
        (:func:`posgeo.seed_summary`). The recipes that return one table per corpus
        (:func:`from_scratch_tables`) use the first.
    device : str
        ``"cpu"`` (small) or ``"auto"`` (full: a GPU when available).
    """

    profile: str
    n_positions: int = 32
    vocab_size: int = 64
    concentration: float = 1.0
    d_model: int = 32
    widths: tuple[int, ...] = (8, 16, 32, 64)
    n_heads: int = 2
    layers: Mapping[str, int] = field(default_factory=lambda: {"mlm": 1, "cls": 2})
    ff_mult: int = 2
    steps: int = 300
    batch_size: int = 32
    lr: float = 1e-3
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    device: str = "cpu"


def ntk_settings(profile: str | None = None) -> NTKSettings:
    """Experiment sizes for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default :func:`posgeo.current_profile` (``$POSGEO_PROFILE``, else ``"small"``).
        ``"small"`` trains every model of the chapter in about a minute of CPU time;
        ``"full"`` trains longer and sweeps widths up to 512 (meant for a GPU). Both train
        five seeds of every configuration.

    Returns
    -------
    NTKSettings

    Raises
    ------
    ValueError
        For an unknown profile.

    Examples
    --------
    >>> s = ntk_settings("small")
    >>> s.widths, s.n_positions, s.layers["cls"]
    ((8, 16, 32, 64), 32, 2)
    >>> ntk_settings("full").widths[-1]
    512
    """
    name = current_profile(profile)
    if name == "small":
        return NTKSettings(profile="small")
    return NTKSettings(
        profile="full",
        widths=(16, 32, 64, 128, 256, 512),
        steps=3000,
        batch_size=128,
        device="auto",
    )


def ntk_marginals(settings: NTKSettings) -> np.ndarray:
    """True marginals of the line corpus of the NTK experiments.

    Parameters
    ----------
    settings : NTKSettings

    Returns
    -------
    numpy.ndarray, shape (n_positions, vocab_size)
        :func:`posgeo.synthetic_marginals` with ``geometry="line"``, ``nonstationarity=0``.
        Hellinger distances grow with the offset, except that the bumps are truncated at
        the ends of the line, so a few comparisons near the ends flip (offset-order
        violation rate about 0.3% at the default ``concentration=1``; exactly 0 for peaked
        bumps such as ``concentration=4``, whose distances saturate at 1 instead).

    Examples
    --------
    >>> ntk_marginals(ntk_settings("small")).shape
    (32, 64)
    """
    return synthetic_marginals(
        settings.n_positions,
        settings.vocab_size,
        nonstationarity=0.0,
        geometry="line",
        concentration=settings.concentration,
    )


def _marginals_key(mu: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(mu, dtype=np.float64).tobytes()).hexdigest()[:16]


# --------------------------------------------------------------------------- [CLS] task
@dataclass(frozen=True, eq=False)
class OrderDetectionTask:
    """[CLS] classification: is a sequence in its corpus order, or shuffled?

    A sequence of ``n`` tokens is drawn from per-position marginals (token ``i`` from
    ``marginals[i]``, independently). With probability 1/2 it is kept (label 1); otherwise its
    tokens are put in a uniformly random order (label 0; the identity permutation can occur,
    with probability ``1/n!``). A ``[CLS]`` token (id ``vocab_size - 1``) is prepended, so
    corpus position ``i`` is model position ``i + 1``, as in BERT. Both labels have exactly the
    same multiset of tokens, so a model blind to order cannot beat chance; train it with
    ``pooling="first"`` to read the decision from ``[CLS]``, as in P1's [CLS] objective.

    Parameters
    ----------
    marginals : numpy.ndarray, shape (n, V)
        Per-position token distributions (rows sum to 1).
    name : str
        Names the marginals in cache keys (a hash of ``marginals`` is added).

    Examples
    --------
    >>> mu = ntk_marginals(ntk_settings("small"))
    >>> task = OrderDetectionTask(mu, name="line")
    >>> b = task.sample(4, torch.Generator().manual_seed(0))
    >>> task.vocab_size, task.seq_len, tuple(b.tokens.shape), bool((b.tokens[:, 0] == 64).all())
    (65, 33, (4, 33), True)
    """

    marginals: np.ndarray
    name: str
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        mu = np.asarray(self.marginals, dtype=np.float64)
        if mu.ndim != 2 or mu.shape[0] < 2 or mu.shape[1] < 1:
            raise ValueError(
                f"marginals must have shape (n, V) with n >= 2, got {mu.shape}; pass one distribution per position"
            )
        if not np.all(np.isfinite(mu)) or np.any(mu < 0) or not np.allclose(mu.sum(axis=1), 1.0, atol=1e-8):
            raise ValueError("marginals must be finite, non-negative, with rows summing to 1; normalise each row")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("name must be a non-empty string identifying the marginals (used in cache keys)")
        object.__setattr__(self, "marginals", mu)

    @property
    def vocab_size(self) -> int:
        """``V + 1``: the corpus tokens, then ``[CLS]``."""
        return int(self.marginals.shape[1]) + 1

    @property
    def seq_len(self) -> int:
        """``n + 1``: ``[CLS]`` and the ``n`` corpus positions."""
        return int(self.marginals.shape[0]) + 1

    @property
    def cls_token(self) -> int:
        """Token id of ``[CLS]``."""
        return int(self.marginals.shape[1])

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` labelled sequences using only ``generator``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        B = int(batch_size)
        n = self.seq_len - 1
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        tokens = torch.as_tensor(MarginalSampler(self.marginals)(B, seed))
        labels = torch.randint(0, 2, (B,), generator=generator)
        perm = torch.rand(B, n, generator=generator).argsort(dim=1)
        shuffled = torch.gather(tokens, 1, perm)
        tokens = torch.where(labels[:, None] == 1, tokens, shuffled)
        cls = torch.full((B, 1), self.cls_token, dtype=torch.long)
        return Batch(torch.cat([cls, tokens], dim=1), labels, "cls")

    def cache_key(self) -> dict[str, Any]:
        """Class name, name and a hash of the marginals."""
        return {"task": type(self).__name__, "name": self.name, "marginals": _marginals_key(self.marginals)}


# --------------------------------------------------------------------------- training
def attention_prefixes(n_layers: int) -> tuple[str, ...]:
    """Parameter-name prefixes of every attention weight of a :class:`posgeo.Transformer`.

    The attention of block ``l`` holds ``blocks.l.attn.qkv`` (the stacked query, key and
    value maps, weight and bias) and ``blocks.l.attn.out`` (the output map). The trailing dot
    keeps ``blocks.1.attn.`` from also matching ``blocks.10.attn``.

    Parameters
    ----------
    n_layers : int
        Number of blocks.

    Returns
    -------
    tuple of str
        For :attr:`posgeo.TrainConfig.freeze`.

    Raises
    ------
    ValueError
        If ``n_layers < 1``.

    Examples
    --------
    >>> attention_prefixes(2)
    ('blocks.0.attn.', 'blocks.1.attn.')
    """
    if isinstance(n_layers, bool) or not isinstance(n_layers, (int, np.integer)) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive int, got {n_layers!r}")
    return tuple(f"blocks.{layer}.attn." for layer in range(int(n_layers)))


@dataclass(frozen=True)
class NTKRun:
    """A trained position table and what training did to the attention.

    Attributes
    ----------
    objective : str
        ``"mlm"`` or ``"cls"``.
    regime : str
        ``"frozen"`` (attention fixed at initialisation) or ``"full"``.
    d_model : int
    seed : int
    table : numpy.ndarray, shape (n_positions, d_model)
        The learned rows of the corpus positions (for ``"cls"``: model rows ``1..n``, after
        ``[CLS]``).
    initial_table : numpy.ndarray, shape (n_positions, d_model)
        The same rows at initialisation.
    attention_change : float
        :math:`\\lVert W_T - W_0\\rVert_F / \\lVert W_0\\rVert_F` over all attention weight
        matrices together (query/key/value and output maps; biases start at 0 and are left out).
    attention_unchanged : bool
        Whether every attention parameter (weights and biases) is bitwise equal to its
        initial value.
    final_loss : float
        Training loss at the last step.
    accuracy : float
        Accuracy on fresh batches at the end (masked-token accuracy or class accuracy).
    """

    objective: str
    regime: str
    d_model: int
    seed: int
    table: np.ndarray
    initial_table: np.ndarray
    attention_change: float
    attention_unchanged: bool
    final_loss: float
    accuracy: float


def ntk_task(settings: NTKSettings, objective: Objective = "mlm") -> Any:
    """The task of an NTK experiment on the line corpus.

    Parameters
    ----------
    settings : NTKSettings
    objective : {"mlm", "cls"}
        ``"mlm"``: :class:`posgeo.MLMTask` on sequences drawn from :func:`ntk_marginals`;
        ``"cls"``: :class:`OrderDetectionTask` on the same marginals.

    Returns
    -------
    MLMTask or OrderDetectionTask

    Raises
    ------
    ValueError
        Unknown objective.

    Examples
    --------
    >>> s = ntk_settings("small")
    >>> ntk_task(s, "mlm").seq_len, ntk_task(s, "cls").seq_len
    (32, 33)
    """
    if objective not in _OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; use 'mlm' or 'cls'")
    mu = ntk_marginals(settings)
    name = f"ntk-line-n{settings.n_positions}-V{settings.vocab_size}-c{settings.concentration:g}"
    if objective == "mlm":
        return MLMTask(MarginalSampler(mu), n_tokens=settings.vocab_size, seq_len=settings.n_positions,
                       name=f"{name}-{_marginals_key(mu)}")
    return OrderDetectionTask(mu, name=name)


def _model_config(settings: NTKSettings, objective: str, d_model: int) -> TransformerConfig:
    task = ntk_task(settings, objective)
    return TransformerConfig(
        vocab_size=task.vocab_size,
        d_model=int(d_model),
        n_heads=settings.n_heads,
        n_layers=int(settings.layers[objective]),
        d_ff=settings.ff_mult * int(d_model),
        max_len=task.seq_len,
        position="learned",
        n_classes=2 if objective == "cls" else None,
        pooling="first",
    )


def train_position_table(
    settings: NTKSettings,
    *,
    objective: Objective = "mlm",
    regime: Regime = "frozen",
    d_model: int | None = None,
    steps: int | None = None,
    lr: float | None = None,
    seed: int | None = None,
    progress: bool = True,
    cache: bool = True,
) -> NTKRun:
    """Train a learned position table on the line corpus, attention frozen or not.

    Parameters
    ----------
    settings : NTKSettings
    objective : {"mlm", "cls"}, keyword-only
        Masked-token prediction (:class:`posgeo.MLMTask`) or order detection read from
        ``[CLS]`` (:class:`OrderDetectionTask`, ``pooling="first"``).
    regime : {"frozen", "full"}, keyword-only
        ``"frozen"`` freezes :func:`attention_prefixes` (query, key, value and output maps of
        every block); everything else (token embeddings, position table, feed-forward layers,
        LayerNorms, heads) trains in both regimes.
    d_model : int, keyword-only, optional
        Width; default ``settings.d_model``.
    steps : int, keyword-only, optional
        Default ``settings.steps``.
    lr : float, keyword-only, optional
        Default ``settings.lr``.
    seed : int, keyword-only, optional
        Initialisation and batches; default ``settings.seeds[0]``. The two regimes with the
        same seed start from the same weights and see the same batches.
    progress : bool, keyword-only
        Progress bar of the training loop.
    cache : bool, keyword-only
        Read/write the training run through :func:`posgeo.train`'s cache.

    Returns
    -------
    NTKRun

    Raises
    ------
    ValueError
        Unknown objective or regime.

    Examples
    --------
    >>> s = ntk_settings("small")
    >>> run = train_position_table(s, regime="frozen", d_model=8, steps=5, progress=False, cache=False)
    >>> run.table.shape, run.attention_unchanged, run.attention_change
    ((32, 8), True, 0.0)
    """
    if objective not in _OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; use 'mlm' or 'cls'")
    if regime not in _REGIMES:
        raise ValueError(f"unknown regime {regime!r}; use 'frozen' (attention fixed) or 'full'")
    d = settings.d_model if d_model is None else int(d_model)
    s = settings.seeds[0] if seed is None else int(seed)
    task = ntk_task(settings, objective)
    cfg = _model_config(settings, objective, d)
    prefixes = attention_prefixes(cfg.n_layers)
    tc = TrainConfig(
        steps=settings.steps if steps is None else int(steps),
        batch_size=settings.batch_size,
        lr=settings.lr if lr is None else float(lr),
        seed=s,
        device=settings.device,
        log_every=50,
        freeze=prefixes if regime == "frozen" else (),
    )
    with _torch_threads(1):
        result = train(cfg, tc, task, progress=progress, cache=cache)
        initial = Transformer(cfg, seed=s)
        model = result.model()
        from posgeo import evaluate

        accuracy = evaluate(model, task, n_batches=4, batch_size=256, seed=12345)
    rows = slice(1, None) if objective == "cls" else slice(0, None)
    init_state = initial.state_dict()
    final_state = result.state_dict
    attn_keys = [k for k in init_state if k.startswith(prefixes)]
    unchanged = all(torch.equal(init_state[k], final_state[k].to(init_state[k].dtype)) for k in attn_keys)
    num = sum(float((final_state[k].double() - init_state[k].double()).pow(2).sum()) for k in attn_keys if k.endswith("weight"))
    den = sum(float(init_state[k].double().pow(2).sum()) for k in attn_keys if k.endswith("weight"))
    table = model.position_table()
    table0 = initial.position_table()
    assert table is not None and table0 is not None
    return NTKRun(
        objective=objective,
        regime=regime,
        d_model=d,
        seed=s,
        table=table[rows],
        initial_table=table0[rows],
        attention_change=float(np.sqrt(num / den)),
        attention_unchanged=bool(unchanged),
        final_loss=float(result.final("loss")),
        accuracy=float(accuracy),
    )


# --------------------------------------------------------------------------- measures
def local_violation_rate(
    P: Any, *, max_offset: int, reference: Any | None = None, ties: str = "half"
) -> float:
    """Monotonicity violation rate restricted to pairs within ``max_offset`` of the anchor.

    As :func:`posgeo.monotonicity_violations` (same definition and tie policy), but for
    anchor ``i`` only positions ``j, k`` with ``|i - j|, |i - k| <= max_offset`` take part. It
    separates local order (near neighbours closer than farther ones) from the global shape
    (whether far positions stay far). With ``max_offset >= n - 1`` it equals the global rate.

    Parameters
    ----------
    P : array_like, shape (n, d)
        The encoding.
    max_offset : int
        Largest offset taken into account (``>= 2``: pairs need two distinct offsets).
    reference : array_like, shape (n, n), optional
        Reference dissimilarity ordering the pairs (default the offset ``|i - j|``).
    ties : {"half", "violation", "ignore"}
        See :func:`posgeo.monotonicity_violations`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``max_offset < 1``, or for the reasons of :func:`posgeo.monotonicity_violations`.

    Examples
    --------
    >>> import numpy as np
    >>> arc = np.c_[np.cos(np.linspace(0, 1.9 * np.pi, 20)), np.sin(np.linspace(0, 1.9 * np.pi, 20))]
    >>> round(local_violation_rate(arc, max_offset=5), 3), round(local_violation_rate(arc, max_offset=19), 3)
    (0.0, 0.185)
    """
    E = encoding_distances(P)  # the same distances as monotonicity_violations(P): same ties
    n = E.shape[0]
    if isinstance(max_offset, bool) or not isinstance(max_offset, (int, np.integer)) or max_offset < 1:
        raise ValueError(f"max_offset must be a positive int, got {max_offset!r}; e.g. max_offset=4")
    R = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(np.float64)
    ref = R if reference is None else np.asarray(reference, dtype=np.float64)
    if ref.shape != E.shape:
        raise ValueError(f"reference has shape {ref.shape} but P has {n} rows; pass an ({n}, {n}) matrix")
    far = R > max_offset
    # Far positions are moved out of every comparison by making their encoding distance and
    # reference equal to a common sentinel: pairs between two far positions tie in the
    # reference (not comparable); pairs of a near and a far position are counted by subtracting
    # the counts of the sentinel-only comparisons below.
    big_ref = float(np.max(ref)) + 1.0
    big_e = float(np.max(E)) + 1.0
    R2 = np.where(far, big_ref, ref)
    E2 = np.where(far, big_e, E)
    res = monotonicity_violations(distances=E2, reference=R2, ties=ties, progress=False)  # type: ignore[arg-type]
    # near-vs-far pairs are always comparable and never violations or ties: remove them
    near = (~far).sum(axis=1) - 1  # near positions per anchor, excluding the anchor itself
    n_far = far.sum(axis=1)
    extra = int((near * n_far).sum())
    comparable = res.comparable - extra
    if comparable <= 0:
        return float("nan")
    if ties == "half":
        return float((res.violations + 0.5 * res.ties) / comparable)
    if ties == "violation":
        return float((res.violations + res.ties) / comparable)
    den = comparable - res.ties
    return float(res.violations / den) if den > 0 else float("nan")


def monotonicity_table(
    geometries: Mapping[str, Any],
    encodings: Mapping[str, Mapping[str, Any]],
    *,
    orders: Sequence[str] = ("offset", "hellinger", "corrected"),
    progress: bool = True,
) -> pd.DataFrame:
    """Violation rates of encodings on corpora, under several orderings of the pairs.

    Parameters
    ----------
    geometries : mapping of corpus name to CorpusGeometry
    encodings : mapping of corpus name to {encoding name: array (n, k)}
        The encodings scored on that corpus (rows = that corpus' positions).
    orders : sequence of {"offset", "hellinger", "corrected"}
        Order pairs by the offset ``|i - j|``, by the plug-in Hellinger distances
        (``geometry.distances``) or by the noise-corrected ones (``geometry.hybrid``, the
        hybrid estimator).
    progress : bool
        Progress bar over corpora.

    Returns
    -------
    pandas.DataFrame
        Index: encoding; columns: MultiIndex (corpus, order); ``NaN`` where an encoding is
        not given for a corpus.

    Raises
    ------
    ValueError
        For an unknown order.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> D = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0)))
    >>> g = SimpleNamespace(distances=D, hybrid=D)
    >>> t = monotonicity_table({"toy": g}, {"toy": {"line": np.arange(6.0)[:, None]}}, progress=False)
    >>> t.loc["line"].tolist()
    [0.0, 0.0, 0.0]
    """
    for o in orders:
        if o not in ("offset", "hellinger", "corrected"):
            raise ValueError(f"unknown order {o!r}; use 'offset', 'hellinger' or 'corrected'")
    parts = {}
    for corpus in progress_bar(list(geometries), enabled=progress, desc="monotonicity"):
        g = geometries[corpus]
        refs = {"offset": None, "hellinger": g.distances, "corrected": g.hybrid}
        rows = {}
        for enc, P in encodings.get(corpus, {}).items():
            rows[enc] = {
                o: monotonicity_violations(np.asarray(P, dtype=np.float64), reference=refs[o], progress=False).rate
                for o in orders
            }
        parts[corpus] = pd.DataFrame.from_dict(rows, orient="index", columns=list(orders))
    out = pd.concat(parts, axis=1)
    names = list(dict.fromkeys(e for c in encodings.values() for e in c))
    out = out.reindex(names)
    out.index.name = "encoding"
    return out


def _run_row(run: NTKRun, D: np.ndarray, frozen: NTKRun | None) -> dict[str, float]:
    row = {
        "rate (offset)": monotonicity_violations(run.table, progress=False).rate,
        "rate (Hellinger)": monotonicity_violations(run.table, reference=D, progress=False).rate,
        "local rate (offset <= 4)": local_violation_rate(run.table, max_offset=4),
        "initial rate": monotonicity_violations(run.initial_table, progress=False).rate,
        "stress* vs corpus": stress(run.table, D, scale="optimal"),
        "attention change": run.attention_change,
        "accuracy": run.accuracy,
    }
    if frozen is not None:
        row["stress* vs frozen"] = stress(run.table, pairwise_distances(frozen.table), scale="optimal")
    row["farthest from 0"] = int(np.argmax(pairwise_distances(run.table)[0]))
    return row


def violation_intervals(
    boot: Any,
    encodings: Mapping[str, Any],
    *,
    differences: Sequence[tuple[str, str]] = (),
) -> pd.DataFrame:
    """Violation rates in the corrected order, with the sampling intervals of the geometry.

    A fixed encoding's rate in *offset* order has no sampling error (it uses the encoding
    alone), but its rate with pairs ordered by the corpus's corrected distances inherits the
    noise of those distances. The half-sample replicates of ``boot`` give each rate, and each
    requested difference of two rates, its interval (``boot.interval``: the rates are
    computed on the estimate and on every half, once per matrix, so a difference is paired).

    Parameters
    ----------
    boot : BootstrapGeometry
        From :func:`posgeo.bootstrap_geometry` (``estimator="hybrid"`` for the book's
        corrected geometry); its :attr:`estimate` orders the pairs of the estimate row.
    encodings : mapping of str to array (n, k)
        Tables whose rows are the n positions of ``boot``.
    differences : sequence of (str, str), keyword-only
        Pairs ``(a, b)`` of encoding names: adds a row ``"a - b"`` (rate of a minus rate of b).

    Returns
    -------
    pandas.DataFrame
        Index ``encoding`` (the encodings, then the differences); columns ``rate``, ``low``,
        ``high`` (at ``boot.level``) and ``separated`` (for a difference: whether its interval
        excludes 0; for a rate: whether it excludes 0.5, the rate of random vectors).

    Raises
    ------
    ValueError
        An encoding with the wrong number of rows, or a difference naming an unknown encoding.

    Examples
    --------
    >>> from posgeo import bootstrap_geometry, synthetic_corpus, random_encoding
    >>> boot = bootstrap_geometry(synthetic_corpus(n_sequences=400, n_positions=12, nonstationarity=2.0), 12,
    ...                           n_boot=6, estimator="hybrid", progress=False)
    >>> t = violation_intervals(boot, {"line": np.arange(12.0)[:, None], "random": random_encoding(12, 16, seed=0)},
    ...                         differences=[("line", "random")])
    >>> list(t.index), list(t.columns)
    (['line', 'random', 'line - random'], ['rate', 'low', 'high', 'separated'])
    """
    n = boot.n_positions
    tables = {}
    for name, P in encodings.items():
        P = np.asarray(P, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] != n:
            raise ValueError(f"violation_intervals: encoding {name!r} has shape {P.shape}; it needs one row per position ({n})")
        tables[name] = P
    names = list(tables)
    for a, b in differences:
        for name in (a, b):
            if name not in tables:
                raise ValueError(f"violation_intervals: difference ({a!r}, {b!r}) names {name!r}, not one of {names}")

    def statistic(D: np.ndarray) -> np.ndarray:
        rates = {name: pg.monotonicity_violation_rate(P, reference=D, progress=False) for name, P in tables.items()}
        return np.array([rates[name] for name in names] + [rates[a] - rates[b] for a, b in differences])

    est, low, high = boot.interval(statistic)
    index = names + [f"{a} - {b}" for a, b in differences]
    out = pd.DataFrame({"rate": est, "low": low, "high": high}, index=pd.Index(index, name="encoding"))
    null = np.r_[np.full(len(names), 0.5), np.zeros(len(differences))]
    out["separated"] = (out["low"] > null) | (out["high"] < null)
    return out


def ntk_comparison(settings: NTKSettings, *, progress: bool = True) -> pd.DataFrame:
    """Frozen-attention versus full training, for both objectives, at ``settings.d_model``,
    once per seed of ``settings.seeds``.

    Parameters
    ----------
    settings : NTKSettings
    progress : bool, keyword-only

    Returns
    -------
    pandas.DataFrame
        One row per run, index (objective, regime, seed); summarise over seeds with
        ``posgeo.seed_summary(table.reset_index(), by=["objective", "regime"], metrics=...)``.
        Columns: ``rate (offset)`` and ``rate (Hellinger)``
        (violation rates, pairs ordered by the offset or by the true Hellinger distances of
        the line corpus), ``local rate (offset <= 4)`` (:func:`local_violation_rate`), ``initial rate`` (the
        same table at initialisation), ``stress* vs corpus`` (scale-optimal stress against the
        true Hellinger distances of the line corpus), ``attention change`` (relative
        Frobenius change of the attention weights), ``accuracy``, ``stress* vs frozen``
        (scale-optimal stress of the table against the distances of the frozen-attention
        table of the same objective and seed: 0 when full training reproduces the frozen
        geometry up to scale) and ``farthest from 0`` (the position whose row is farthest
        from row 0: ``n_positions - 1`` for a table that does not fold back).
    """
    from posgeo import hellinger_matrix

    D = hellinger_matrix(ntk_marginals(settings))
    rows = {}
    jobs = [(o, r, seed) for o in _OBJECTIVES for seed in settings.seeds for r in _REGIMES]
    runs: dict[tuple[str, str, int], NTKRun] = {}
    for o, r, seed in progress_bar(jobs, enabled=progress, desc="NTK runs"):
        runs[(o, r, seed)] = train_position_table(settings, objective=o, regime=r, seed=seed, progress=False)  # type: ignore[arg-type]
    for (o, r, seed), run in runs.items():
        rows[(o, r, seed)] = _run_row(run, D, runs[(o, "frozen", seed)])
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["objective", "regime", "seed"])
    return out


def width_sweep(
    settings: NTKSettings,
    *,
    objective: Objective = "cls",
    lr_scaling: Literal["inverse", "constant"] = "inverse",
    progress: bool = True,
) -> pd.DataFrame:
    """How far full training departs from frozen-attention training, as the width grows.

    For every width ``d`` in ``settings.widths`` and seed in ``settings.seeds``, both regimes
    are trained from the same initialisation on the same batches. The learning rate is
    ``settings.lr * settings.d_model / d`` (``lr_scaling="inverse"``) or ``settings.lr`` at
    every width (``"constant"``); the two coincide at ``d = settings.d_model``.

    Why the scaling matters: the NTK limit is reached by a particular parametrisation and
    step size, under which every weight moves by ``O(1/sqrt(d))`` of its size. AdamW moves
    every coordinate by about ``lr`` per step whatever the width, so at a constant ``lr``
    the relative change of a weight matrix initialised at a fixed scale does not vanish as
    ``d`` grows; shrinking ``lr`` like ``1/d`` is the AdamW analogue of the NTK step size.

    Parameters
    ----------
    settings : NTKSettings
    objective : {"mlm", "cls"}, keyword-only
        Default ``"cls"``, whose solution depends on attention (on the line corpus the tokens
        are independent across positions, so an MLM's attention carries no information).
    lr_scaling : {"inverse", "constant"}, keyword-only
    progress : bool, keyword-only

    Returns
    -------
    pandas.DataFrame
        One row per run, index (``d_model``, ``seed``); summarise over seeds with
        :func:`posgeo.seed_summary`. Columns: ``lr factor`` (the learning rate
        divided by ``settings.lr``), ``attention change`` (full
        training's relative Frobenius change of the attention weights), ``rate frozen`` and
        ``rate full`` (violation rates, offset order), ``stress* full vs frozen``
        (scale-optimal stress of the full-training table against the distances of the
        frozen-attention table: 0 when the two geometries agree up to scale), ``accuracy
        frozen`` and ``accuracy full``.

    Raises
    ------
    ValueError
        Unknown ``lr_scaling``.
    """
    # every rate before any training (and settings.d_model's, so a bad lr_scaling raises even with no widths)
    lr_at = {d: width_learning_rate(settings, d, lr_scaling=lr_scaling) for d in (settings.d_model, *settings.widths)}
    jobs = [(d, s, r) for d in settings.widths for s in settings.seeds for r in _REGIMES]
    runs: dict[tuple[int, int, str], NTKRun] = {}
    for d, s, r in progress_bar(jobs, enabled=progress, desc="width sweep"):
        runs[(d, s, r)] = train_position_table(
            settings, objective=objective, regime=r, d_model=d, lr=lr_at[d], seed=s,  # type: ignore[arg-type]
            progress=False,
        )
    rows = []
    for d in settings.widths:
        for s in settings.seeds:
            fr, fu = runs[(d, s, "frozen")], runs[(d, s, "full")]
            rows.append({
                "d_model": d,
                "seed": s,
                "lr factor": lr_at[d] / settings.lr,
                "attention change": fu.attention_change,
                "rate frozen": monotonicity_violations(fr.table, progress=False).rate,
                "rate full": monotonicity_violations(fu.table, progress=False).rate,
                "stress* full vs frozen": stress(fu.table, pairwise_distances(fr.table), scale="optimal"),
                "accuracy frozen": fr.accuracy,
                "accuracy full": fu.accuracy,
            })
    return pd.DataFrame(rows).set_index(["d_model", "seed"])


def width_learning_rate(
    settings: NTKSettings, d_model: int, *, lr_scaling: Literal["inverse", "constant"] = "inverse"
) -> float:
    """The learning rate :func:`width_sweep` trains width ``d_model`` with.

    ``settings.lr * settings.d_model / d_model`` (``lr_scaling="inverse"``, the AdamW analogue
    of the NTK step size) or ``settings.lr`` (``"constant"``); the two coincide at
    ``d_model == settings.d_model``, where both scalings train the same runs.

    Parameters
    ----------
    settings : NTKSettings
    d_model : int
        The width, at least 1.
    lr_scaling : {"inverse", "constant"}, keyword-only

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Unknown ``lr_scaling`` or a width below 1.

    Examples
    --------
    >>> s = ntk_settings("small")
    >>> width_learning_rate(s, 2 * s.d_model) == s.lr / 2
    True
    >>> width_learning_rate(s, 2 * s.d_model, lr_scaling="constant") == s.lr
    True
    """
    if lr_scaling not in ("inverse", "constant"):
        raise ValueError(f"unknown lr_scaling {lr_scaling!r}; use 'inverse' (lr ~ 1/width) or 'constant'")
    d = check_int(d_model, "d_model", minimum=1)
    return settings.lr * (settings.d_model / d if lr_scaling == "inverse" else 1.0)


# The range of every column of ntk_comparison and width_sweep: violation rates and accuracies are
# fractions; stresses, changes, the learning-rate factor and a position index cannot be negative.
_FRACTION_METRICS = ("rate (offset)", "rate (Hellinger)", "local rate (offset <= 4)", "initial rate", "accuracy",
                     "rate frozen", "rate full", "accuracy frozen", "accuracy full")
_NONNEGATIVE_METRICS = ("stress* vs corpus", "attention change", "stress* vs frozen", "farthest from 0",
                        "lr factor", "stress* full vs frozen")


def metric_bounds(metrics: str | Sequence[str]) -> dict[str, tuple[float, float | None]]:
    """The range each metric of :func:`ntk_comparison` and :func:`width_sweep` cannot leave.

    For :func:`posgeo.seed_summary`'s ``bounds``, so that an interval over seeds is cut to
    what the metric can take: violation rates and accuracies to ``[0, 1]``; stresses,
    relative changes, the learning-rate factor and ``farthest from 0`` to ``[0, inf)``.

    Parameters
    ----------
    metrics : str or sequence of str
        Column names of :func:`ntk_comparison` or :func:`width_sweep` (a table's ``columns``
        will do).

    Returns
    -------
    dict
        ``{metric: (lower, upper)}``, ``upper`` None where there is none.

    Raises
    ------
    TypeError
        ``metrics`` is not a string or a sequence of strings.
    ValueError
        A name that is not a column of either table (the message lists those that are).

    Examples
    --------
    >>> metric_bounds(["accuracy", "attention change"])
    {'accuracy': (0.0, 1.0), 'attention change': (0.0, None)}
    """
    try:
        names = [metrics] if isinstance(metrics, str) else list(metrics)
    except TypeError:
        names = [None]
    if not all(isinstance(m, str) for m in names):
        raise TypeError(f"metrics must be a column name or a sequence of column names, got {metrics!r}")
    unknown = [m for m in names if m not in _FRACTION_METRICS + _NONNEGATIVE_METRICS]
    if unknown:
        raise ValueError(f"no known range for {unknown}: not a column of ntk_comparison or width_sweep, whose "
                         f"columns are {list(_FRACTION_METRICS + _NONNEGATIVE_METRICS)}")
    return {m: (0.0, 1.0) if m in _FRACTION_METRICS else (0.0, None) for m in names}


# --------------------------------------------------------------------------- from scratch
def from_scratch_tables(
    settings: NTKSettings, *, d_model: int = 32, progress: bool = True
) -> dict[str, np.ndarray]:
    """Position tables trained from scratch on two order-sensitive tasks.

    * ``"MLM from scratch"``: masked-token prediction on the book's synthetic corpus
      (:func:`posgeo.synthetic_corpus` defaults: ring geometry, ``nonstationarity=0.5``,
      32 positions, 64 tokens), one block, everything trainable.
    * ``"classifier from scratch"``: :class:`posgeo.FirstMarkerTask` (does marker A precede
      marker B?) on 32 positions, mean pooling, one block.

    Parameters
    ----------
    settings : NTKSettings
        Supplies ``steps``, ``batch_size``, ``lr``, the first seed and the device.
    d_model : int, keyword-only
    progress : bool, keyword-only

    Returns
    -------
    dict of str to numpy.ndarray, each (32, d_model)
    """
    from posgeo import synthetic_corpus

    mu = synthetic_corpus("train", n_sequences=1).true_marginals
    assert mu is not None
    n, V = mu.shape
    mlm = MLMTask(MarginalSampler(mu), n_tokens=V, seq_len=n, name=f"synthetic-default-{_marginals_key(mu)}")
    cls = FirstMarkerTask(seq_len=n, n_filler=8)
    out = {}
    for label, task in progress_bar([("MLM from scratch", mlm), ("classifier from scratch", cls)],
                                    enabled=progress, desc="from scratch"):
        cfg = TransformerConfig(
            vocab_size=task.vocab_size, d_model=d_model, n_heads=settings.n_heads, n_layers=1,
            d_ff=settings.ff_mult * d_model, max_len=n, position="learned",
            n_classes=2 if task.kind == "cls" else None,
        )
        tc = TrainConfig(steps=settings.steps, batch_size=settings.batch_size, lr=settings.lr,
                         seed=settings.seeds[0], device=settings.device, log_every=50)
        with _torch_threads(1):
            table = train(cfg, tc, task, progress=progress).model().position_table()
        assert table is not None
        out[label] = table
    return out


def from_scratch_text_tables(
    corpora: Mapping[str, Any], settings: Any = None, *, progress: bool = True
) -> dict[str, np.ndarray]:
    """Position tables of the positional-separation chapter's text MLM runs, one per corpus.

    Each table comes from the run that chapter 5 makes for its ``<text> MLM`` experiment
    (:func:`posgeo.separation_experiments` with ``text=corpus``, trained by
    :func:`posgeo.run_separation_experiments` with plain AdamW, no weight decay): masked-token
    prediction on the first ``settings.text_seq_len`` tokens of the sentences that have at
    least that many, with the ``settings.top_k`` most frequent tokens (plus UNK and PAD), an
    encoder of ``settings.n_layers`` blocks with a learned table of ``text_seq_len`` rows.
    Same settings, same task, same cache key: for SST-2 this *is* chapter 5's run (read from
    the cache when chapter 5 ran first); for any other corpus it is the same recipe.

    Parameters
    ----------
    corpora : mapping of str to Corpus
        E.g. ``{"sst2": load_corpus("sst2"), "imdb": load_corpus("imdb")}``.
    settings : SeparationSettings, optional
        Default :func:`posgeo.separation_settings` of the current profile.
    progress : bool, keyword-only
        Progress bar over corpora.

    Returns
    -------
    dict of str to numpy.ndarray, each (settings.text_seq_len, settings.d_model)
        The trained position tables, keyed like ``corpora``.

    Raises
    ------
    TypeError
        When ``settings`` is not a SeparationSettings or a corpus is not a posgeo Corpus.

    Examples
    --------
    >>> import dataclasses
    >>> from posgeo import load_corpus
    >>> from posgeo.experiments.separation import separation_settings
    >>> s = dataclasses.replace(separation_settings("small"), d_model=8, n_heads=2, d_ff=16, steps=2,
    ...                         snapshot_every=1, text_seq_len=6, top_k=10)
    >>> toy = load_corpus("synthetic", n_sequences=50)
    >>> tables = from_scratch_text_tables({"toy": toy}, s, progress=False)
    >>> tables["toy"].shape
    (6, 8)
    """
    from posgeo import Corpus
    from .separation import (
        SeparationSettings,
        run_separation_experiments,
        separation_experiments,
        separation_settings,
    )

    s = separation_settings() if settings is None else settings
    if not isinstance(s, SeparationSettings):
        raise TypeError(f"settings must be a SeparationSettings (see separation_settings()), got {type(s).__name__}")
    out = {}
    for label in progress_bar(list(corpora), enabled=progress, desc="text MLM runs"):
        corpus = corpora[label]
        if not isinstance(corpus, Corpus):
            raise TypeError(f"corpora[{label!r}] must be a posgeo Corpus (load_corpus(...)), got {type(corpus).__name__}")
        name = f"{corpus.name} MLM"
        experiment = separation_experiments(s, text=corpus)[name]
        run = run_separation_experiments({name: experiment}, s, progress=False)[name]
        table = run.model().position_table()
        assert table is not None  # learned tables only
        out[label] = table
    return out


# --------------------------------------------------------------------------- plots
_PANEL_HEIGHT = 220  # px, as the book's other panels


def plot_anchor_distances(
    tables: Mapping[str, np.ndarray], *, anchors: Sequence[int] = (0, 15), reference: np.ndarray | None = None
) -> Any:
    """Distance from a few anchor positions to every position, one panel per anchor.

    Each curve is rescaled to maximum 1, so that encodings of different scale share an axis;
    a monotone encoding gives a V-shaped curve around the anchor. A grey rule marks the
    anchor.

    Parameters
    ----------
    tables : mapping of str to (n, d) arrays
    anchors : sequence of int, keyword-only
    reference : (n, n) array, keyword-only, optional
        A target distance matrix drawn as a black dotted reference line (e.g. the true
        Hellinger distances).

    Returns
    -------
    altair chart
    """
    if not tables:
        raise ValueError("plot_anchor_distances: no tables given")
    distances = {name: pairwise_distances(P) for name, P in tables.items()}
    panels = []
    for a in anchors:
        parts = []
        for name, E in distances.items():
            e = np.asarray(E[a], dtype=float)
            parts.append(pd.DataFrame({"position": np.arange(e.size), "distance": e / e.max(), "table": name}))
        if reference is not None:
            r = np.asarray(reference, dtype=float)[a]
            parts.append(pd.DataFrame({"position": np.arange(r.size), "distance": r / r.max(),
                                       "table": "true Hellinger distance (reference)"}))
        frame = pd.concat(parts, ignore_index=True)
        lines = pg.series_chart(frame, x="position", y="distance", series="table", points=True,
                                x_title="position j", y_title="distance to the anchor / its maximum",
                                series_title="table", title=f"anchor position {a} (grey rule)",
                                x_scale={"domain": [0, int(frame["position"].max())], "nice": False},
                                y_scale={"domain": [0, 1]}, width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)
        rule = alt.Chart(pd.DataFrame({"anchor": [a]})).mark_rule(color="#888888", strokeWidth=1).encode(
            x="anchor:Q", tooltip=[alt.Tooltip("anchor:Q", title="anchor position")])
        panels.append(lines + rule)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description=("Distance from an anchor position to every position, rescaled to a maximum of 1, one panel per "
                     f"anchor, for the tables {', '.join(tables)}"
                     + (" and the true Hellinger distance (dotted reference)." if reference is not None else ".")),
    )


def plot_width_sweep(sweeps: Mapping[str, pd.DataFrame], *, level: float = 0.95) -> Any:
    """Attention change and departure from the frozen solution against width, over seeds.

    Parameters
    ----------
    sweeps : mapping of str to pandas.DataFrame
        Label (e.g. the learning-rate scaling) -> output of :func:`width_sweep` (one row per
        width and seed, at least 2 seeds).
    level : float, keyword-only, default 0.95
        The bands' confidence level.

    Returns
    -------
    altair chart
        Left: relative change of the attention weights under full training; right: the
        scale-optimal stress (stress*) of the full-training table against the distances of
        the frozen-attention table. Widths on a log-2 axis (one tick per width), values on a
        log axis: each line is the geometric mean over seeds, its band the t interval of the
        logarithms (an interval that stays positive on a log axis).
    """
    from posgeo import seed_summary

    if not sweeps:
        raise ValueError("plot_width_sweep: no sweeps given")
    parts = []
    for label, sweep in sweeps.items():
        if "seed" not in sweep.index.names:
            raise ValueError("plot_width_sweep: each sweep must be width_sweep's per-seed table (index d_model, seed)")
        tidy = sweep.reset_index()
        for column, name in (("attention change", "attention change"), ("stress* full vs frozen", "stress*")):
            logs = tidy[["d_model", "seed"]].assign(value=np.log10(tidy[column].to_numpy(dtype=float)))
            summary = seed_summary(logs, by="d_model", metrics="value", level=level)["value"]
            parts.append(pd.DataFrame({
                "d_model": summary.index.to_numpy(dtype=int), "quantity": name, "learning rate": label,
                "value": 10 ** summary["mean"].to_numpy(), "low": 10 ** summary["low"].to_numpy(),
                "high": 10 ** summary["high"].to_numpy(), "seeds": summary["seeds"].to_numpy(dtype=int),
            }))
    frame = pd.concat(parts, ignore_index=True)
    widths = sorted(int(d) for d in frame["d_model"].unique())
    x_scale = {"type": "log", "base": 2, "domain": [widths[0] / 1.25, widths[-1] * 1.25], "nice": False}
    panels = []
    for quantity, y_title, title in (
        ("attention change", "relative change of the attention weights", "attention weights under full training"),
        ("stress*", "stress* (scale-optimal) of full vs frozen table", "departure from the frozen-attention table"),
    ):
        part = frame[frame["quantity"] == quantity]
        chart = pg.series_chart(part, x="d_model", y="value", series="learning rate", lower="low", upper="high",
                                points=True, zoom=False, x_title="width d_model", y_title=y_title,
                                series_title="learning rate", title=title, x_scale=x_scale, y_scale={"type": "log"},
                                width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT, tooltip=("seeds",))
        for layer in chart.layer:
            layer.encoding.x.axis = alt.Axis(values=widths, format="d")
        panels.append(chart)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description=("Against the model width (log scale): the relative change of the attention weights under full "
                     "training (left) and the scale-optimal stress (stress*) between the full-training and the "
                     "frozen-attention position tables (right), for each learning-rate scaling: geometric mean over "
                     f"seeds with its {level:.0%} interval as a band."),
    )
