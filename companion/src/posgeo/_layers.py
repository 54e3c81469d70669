r"""What the layers of a pretrained encoder do to positions: projected stress per layer and head.

P1 reports that when a positional encoding is pushed through the attention matrices of each
layer of BERT, the stress of the result against the corpus geometry peaks at layer 3. This
module makes that measurement precise for BERT-architecture models (all-MiniLM-L6-v2 by
default, ``bert-base-uncased`` in the full profile).

Definitions
-----------
*Positional input.* A BERT embedding layer outputs
:math:`\mathrm{LN}(w_t + p_i + s_0) = \gamma \odot (w_t + p_i + s_0 - m)/\sigma + \beta` for
token ``t`` at model position ``i`` (word, position and token-type embeddings; ``m`` and
:math:`\sigma` the mean and standard deviation over the ``d`` coordinates). Centring is
linear, so the part that depends on the position is
:math:`\gamma \odot (p_i - \bar p_i \mathbf 1)/\sigma`, up to the variation of
:math:`\sigma` from token to token. :func:`positional_input` returns that part with
:math:`\sigma` replaced by :math:`\bar\sigma`, the root mean square of :math:`\sigma` over
all (token, position) pairs (tokens of the whole vocabulary, positions of the table):

.. math:: \Pi_i = \gamma \odot (p_i - \bar p_i \mathbf 1) / \bar\sigma .

Our corpus position ``i`` is model row ``i + 1`` (BERT puts ``[CLS]`` at row 0).

*Projected stress.* Layer :math:`\ell` reads its input through the query and key maps
:math:`W_Q^\ell, W_K^\ell` (``d x d``; head ``h`` uses rows :math:`h d_h .. (h+1) d_h - 1`).
The projected configuration of head ``h`` is the ``(n, 2 d_h)`` matrix
:math:`Z^{\ell,h} = [\,\Pi W_Q^{\ell,h\top} \mid \Pi W_K^{\ell,h\top}\,]` and that of the
layer is :math:`Z^\ell = [\,\Pi W_Q^{\ell\top} \mid \Pi W_K^{\ell\top}\,]` (all heads). Its
squared distances are the sum of the query-side and key-side squared distances, so it
counts what the layer's attention can tell apart on either side. Biases shift every row
equally and drop out of distances. The projected stress is
:math:`\mathrm{stress}(Z, D)` (:func:`posgeo.stress`), raw or scale-optimal.

As in P1, the same positional input is pushed through every layer's maps: the probe asks
what layer :math:`\ell`'s query/key geometry does to a purely positional configuration,
not what positional signal actually reaches layer :math:`\ell` after the earlier layers.
The second view, :func:`positional_hidden_states`, measures the latter: the mean hidden
state per position over a corpus sample (averaging over many sequences removes most of
the token content).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._cache import cached
from ._geometry import check_distance_matrix, pairwise_distances, stress
from ._profiles import current_profile
from ._progress import progress_bar

__all__ = [
    "LayerSettings",
    "head_stress_table",
    "hidden_stress_table",
    "layer_stress_table",
    "layers_settings",
    "plot_head_stress",
    "plot_layer_stress",
    "positional_hidden_states",
    "positional_input",
    "positional_input_error",
    "projected_stress",
    "query_key_maps",
    "random_map_stress",
]


@dataclass(frozen=True)
class LayerSettings:
    """Sizes of the layer-wise analysis (see :func:`layers_settings`).

    Attributes
    ----------
    profile : str
    model : str or None
        What :func:`posgeo.load_pretrained` loads: ``None`` (all-MiniLM-L6-v2, bundled) or a
        hub id such as ``"bert-base-uncased"`` (needs the network or a local HF cache).
    n_positions : dict of str to int
        Positions analysed per corpus.
    hidden_sequences : dict of str to int
        Sequences averaged per corpus in :func:`positional_hidden_states`.
    batch_size : int
        Sequences per forward pass.
    """

    profile: str
    model: str | None
    n_positions: Mapping[str, int]
    hidden_sequences: Mapping[str, int]
    batch_size: int = 16


def layers_settings(profile: str | None = None) -> LayerSettings:
    """Settings of the layer-wise analysis for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default :func:`posgeo.current_profile`. ``"small"``: all-MiniLM-L6-v2 (6 layers,
        12 heads, offline), 256 SST-2 and 32 IMDB sequences for the hidden-state view.
        ``"full"``: ``bert-base-uncased`` (12 layers, the model of P1's claim; downloaded from
        the Hugging Face hub) and larger samples.

    Returns
    -------
    LayerSettings

    Examples
    --------
    >>> layers_settings("small").model is None, layers_settings("full").model
    (True, 'bert-base-uncased')
    """
    name = current_profile(profile)
    n_positions = {"sst2": 48, "imdb": 510}
    if name == "small":
        return LayerSettings(profile=name, model=None, n_positions=n_positions,
                             hidden_sequences={"sst2": 256, "imdb": 32})
    return LayerSettings(profile=name, model="bert-base-uncased", n_positions=n_positions,
                         hidden_sequences={"sst2": 279, "imdb": 1024})


# --------------------------------------------------------------------------- model access
def _bert_parts(model: Any) -> tuple[Any, Sequence[Any]]:
    emb = getattr(model, "embeddings", None)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if emb is None or layers is None or not hasattr(emb, "LayerNorm"):
        raise ValueError(
            f"{type(model).__name__} is not a BERT-architecture encoder (embeddings.LayerNorm and "
            "encoder.layer[...].attention.self.query/key); pass a BertModel such as load_pretrained()"
        )
    return emb, layers


def query_key_maps(model: Any) -> list[dict[str, np.ndarray]]:
    """The query and key maps of every layer of a BERT-architecture model.

    Parameters
    ----------
    model : transformers BertModel (or any model with the same module names)

    Returns
    -------
    list of dict, one per layer
        ``{"query": Q, "key": K}``, each a float64 array of shape ``(d_model, d_model)``
        oriented so that a configuration ``X (n, d_model)`` maps to ``X @ Q`` (the transpose
        of ``torch.nn.Linear.weight``); head ``h`` is columns ``h*d_h:(h+1)*d_h``.

    Raises
    ------
    ValueError
        For a model without BERT's module layout.

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> maps = query_key_maps(load_pretrained())
    >>> len(maps), maps[0]["query"].shape
    (6, (384, 384))
    """
    _, layers = _bert_parts(model)
    out = []
    for layer in layers:
        att = layer.attention.self
        out.append({
            "query": att.query.weight.detach().cpu().double().numpy().T.copy(),
            "key": att.key.weight.detach().cpu().double().numpy().T.copy(),
        })
    return out


def _n_heads(model: Any) -> int:
    return int(model.config.num_attention_heads)


def positional_input(model: Any, n: int, *, offset: int = 1) -> np.ndarray:
    r"""The positional part of a BERT embedding layer's output (see the module docstring).

    :math:`\Pi_i = \gamma \odot (p_{i+\mathrm{offset}} - \overline{p_{i+\mathrm{offset}}}\,\mathbf 1) / \bar\sigma`,
    with :math:`\gamma` the embedding LayerNorm's gain and :math:`\bar\sigma` the root mean
    square, over every vocabulary token ``t`` and every table row ``j``, of the standard
    deviation over coordinates of :math:`w_t + p_j + s_0`.

    Parameters
    ----------
    model : transformers BertModel
    n : int
        Number of positions.
    offset : int, keyword-only, default 1
        Model row of our position 0 (1: skip the ``[CLS]`` row).

    Returns
    -------
    numpy.ndarray, shape (n, d_model), float64

    Raises
    ------
    ValueError
        Too many positions for the table, or a model without BERT's layout.

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> Pi = positional_input(load_pretrained(), 4)
    >>> Pi.shape, bool(abs(Pi.mean()) < 0.05)
    ((4, 384), True)
    """
    emb, _ = _bert_parts(model)
    table = emb.position_embeddings.weight.detach().cpu().double().numpy()
    if n < 1 or offset < 0 or offset + n > table.shape[0]:
        raise ValueError(
            f"positions {offset}..{offset + n - 1} do not fit the table of {table.shape[0]} rows; "
            f"pass n <= {table.shape[0] - offset}"
        )
    words = emb.word_embeddings.weight.detach().cpu().double().numpy()
    a = words + emb.token_type_embeddings.weight.detach().cpu().double().numpy()[0]
    d = a.shape[1]
    # mean over (t, j) of var_coords(a_t + p_j), from first and second moments of a and p
    a_bar, p_bar = a.mean(axis=1), table.mean(axis=1)  # per-row coordinate means
    second = (np.mean((a * a).sum(axis=1)) + 2.0 * float(a.mean(axis=0) @ table.mean(axis=0))
              + np.mean((table * table).sum(axis=1))) / d
    mean_sq = np.mean(a_bar**2) + 2.0 * a_bar.mean() * p_bar.mean() + np.mean(p_bar**2)
    sigma_bar = float(np.sqrt(second - mean_sq))
    gamma = emb.LayerNorm.weight.detach().cpu().double().numpy()
    rows = table[offset : offset + n]
    return gamma * (rows - rows.mean(axis=1, keepdims=True)) / sigma_bar


def positional_input_error(model: Any, n: int, token_ids: Any, *, offset: int = 1) -> pd.Series:
    r"""How well :func:`positional_input` describes the embedding layer's real output.

    For each token ``t`` the embedding layer's output at positions ``offset..offset+n-1``
    (token type 0), centred over the positions, is compared with :math:`\Pi` centred the
    same way. Centring removes everything that does not depend on the position (the token's
    own vector); what remains is the positional configuration that distances see.

    Parameters
    ----------
    model : transformers BertModel
    n : int
    token_ids : array_like of int
        Tokens to test (e.g. the most frequent tokens of a corpus).
    offset : int, keyword-only

    Returns
    -------
    pandas.Series
        Over the tokens: ``median``, ``90%`` and ``max`` of the relative error
        :math:`\lVert X_t - \Pi\rVert_F / \lVert X_t\rVert_F` (both centred), and
        ``median cosine`` between the two centred configurations.

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> err = positional_input_error(load_pretrained(), 16, [1996, 2023, 1012])
    >>> bool(err["median"] < 0.5)
    True
    """
    import torch

    emb, _ = _bert_parts(model)
    ids = np.asarray(token_ids, dtype=np.int64).ravel()
    if ids.size == 0:
        raise ValueError("token_ids is empty; pass at least one token id")
    Pi = positional_input(model, n, offset=offset)
    Pi = Pi - Pi.mean(axis=0)
    positions = torch.arange(offset, offset + n)[None, :].expand(ids.size, n)
    with torch.no_grad():
        out = emb(input_ids=torch.as_tensor(ids)[:, None].expand(ids.size, n).contiguous(),
                  position_ids=positions.contiguous()).double().numpy()  # (T, n, d)
    X = out - out.mean(axis=1, keepdims=True)
    err = np.linalg.norm(X - Pi, axis=(1, 2)) / np.linalg.norm(X, axis=(1, 2))
    cos = (X * Pi).sum(axis=(1, 2)) / np.linalg.norm(X, axis=(1, 2)) / np.linalg.norm(Pi)
    return pd.Series({"median": float(np.median(err)), "90%": float(np.quantile(err, 0.9)),
                      "max": float(err.max()), "median cosine": float(np.median(cos))})


# --------------------------------------------------------------------------- stress
def projected_stress(
    P: Any, D: Any, projections: Any, *, scale: str = "raw"
) -> float:
    r"""Stress of a configuration after linear maps: :math:`\mathrm{stress}([P W_1 \mid \dots \mid P W_m], D)`.

    Parameters
    ----------
    P : array_like, shape (n, d)
        Positional configuration.
    D : array_like, shape (n, n)
        Target distances.
    projections : array_like (d, k) or sequence of them
        One map, or several whose images are concatenated (e.g. a head's query and key maps).
    scale : {"raw", "optimal"}, keyword-only
        As in :func:`posgeo.stress`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        When a map's input dimension is not ``d``, or for the reasons of :func:`posgeo.stress`.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.arange(8.0).reshape(4, 2); D = np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    >>> projected_stress(P, D, np.eye(2)) == stress(P, D)
    True
    >>> round(projected_stress(P, D, [np.eye(2), np.eye(2)], scale="optimal"), 6)
    0.0
    """
    X = np.asarray(P, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"P must have shape (n, d), got {X.shape}; pass one row per position")
    maps = [projections] if isinstance(projections, np.ndarray) and np.ndim(projections) == 2 else list(projections)
    if not maps:
        raise ValueError("projections is empty; pass at least one (d, k) matrix")
    parts = []
    for W in maps:
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2 or W.shape[0] != X.shape[1]:
            raise ValueError(
                f"each projection must have shape (d={X.shape[1]}, k), got {W.shape}; "
                "orient maps so that the configuration is P @ W"
            )
        parts.append(X @ W)
    Z = parts[0] if len(parts) == 1 else np.hstack(parts)
    return stress(Z, D, scale=scale)  # type: ignore[arg-type]


def random_map_stress(
    P: Any,
    D: Any,
    widths: Sequence[int],
    *,
    n_draws: int = 20,
    seed: int = 0,
    scale: str = "optimal",
) -> np.ndarray:
    """Projected stress under random Gaussian maps: the yardstick for a layer or head.

    Each draw maps ``P`` through independent matrices ``G_m (d, k_m)`` with i.i.d. standard
    normal entries, one per entry of ``widths``, and concatenates the images (as
    :func:`projected_stress` does with a query and a key map). A learned map whose projected
    stress lies within the spread of these values does to the positional geometry what a map
    with no structure would do; with ``scale="optimal"`` the Gaussian scale is irrelevant.

    Parameters
    ----------
    P : array_like, shape (n, d)
    D : array_like, shape (n, n)
    widths : sequence of int
        Output widths of the maps (e.g. ``(d_h, d_h)`` for a head's query and key).
    n_draws : int, keyword-only
    seed : int, keyword-only
    scale : {"raw", "optimal"}, keyword-only

    Returns
    -------
    numpy.ndarray, shape (n_draws,)

    Raises
    ------
    ValueError
        When ``widths`` is empty or holds a non-positive width, or ``n_draws < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.random.default_rng(1).normal(size=(10, 6)); D = pairwise_distances(P)
    >>> vals = random_map_stress(P, D, (6, 6), n_draws=5)
    >>> vals.shape, bool((vals >= 0).all() and (vals < 1).all())
    ((5,), True)
    """
    X = np.asarray(P, dtype=np.float64)
    ws = [int(w) for w in widths]
    if not ws or min(ws) < 1:
        raise ValueError(f"widths must be a non-empty sequence of positive ints, got {widths!r}; e.g. (32, 32)")
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    rng = np.random.default_rng(seed)
    return np.array([
        projected_stress(X, D, [rng.standard_normal((X.shape[1], w)) for w in ws], scale=scale)
        for _ in range(int(n_draws))
    ])


def layer_stress_table(
    model: Any, D: Any, *, encoding: Any | None = None, offset: int = 1
) -> pd.DataFrame:
    """Projected stress of every layer (all heads), query+key configuration.

    Parameters
    ----------
    model : transformers BertModel
    D : array_like, shape (n, n)
        Target distances (the corpus geometry).
    encoding : array_like, shape (n, d_model), keyword-only, optional
        The configuration pushed through the maps; default :func:`positional_input`.
    offset : int, keyword-only
        Passed to :func:`positional_input`.

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (1-based; 0 is the unprojected input); columns ``raw`` and
        ``optimal`` (scale-optimal) stress, and ``distance ratio``: the mean distance
        between projected positions over the mean target distance (the scale that raw
        stress mostly measures).

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> D = np.abs(np.subtract.outer(np.arange(8.0), np.arange(8.0))) / 8
    >>> layer_stress_table(load_pretrained(), D).index.tolist()
    [0, 1, 2, 3, 4, 5, 6]
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    X = positional_input(model, n, offset=offset) if encoding is None else np.asarray(encoding, dtype=np.float64)
    iu = np.triu_indices(n, k=1)
    d_mean = float(Dm[iu].mean())
    rows = {0: {"raw": stress(X, Dm), "optimal": stress(X, Dm, scale="optimal"),
                "distance ratio": float(pairwise_distances(X)[iu].mean()) / d_mean}}
    for layer, maps in enumerate(query_key_maps(model), start=1):
        pair = [maps["query"], maps["key"]]
        rows[layer] = {s: projected_stress(X, Dm, pair, scale=s) for s in ("raw", "optimal")}
        Z = np.hstack([X @ maps["query"], X @ maps["key"]])
        rows[layer]["distance ratio"] = float(pairwise_distances(Z)[iu].mean()) / d_mean
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "layer"
    return out


def head_stress_table(
    model: Any, D: Any, *, encoding: Any | None = None, offset: int = 1, scale: str = "optimal"
) -> pd.DataFrame:
    """Projected stress of every head of every layer (query+key configuration of the head).

    Parameters
    ----------
    model : transformers BertModel
    D : array_like, shape (n, n)
    encoding : array_like, shape (n, d_model), keyword-only, optional
        Default :func:`positional_input`.
    offset : int, keyword-only
    scale : {"raw", "optimal"}, keyword-only

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (1-based), columns ``head`` (0-based).

    Examples
    --------
    >>> from posgeo import load_pretrained
    >>> D = np.abs(np.subtract.outer(np.arange(8.0), np.arange(8.0))) / 8
    >>> head_stress_table(load_pretrained(), D).shape
    (6, 12)
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    X = positional_input(model, n, offset=offset) if encoding is None else np.asarray(encoding, dtype=np.float64)
    H = _n_heads(model)
    rows = {}
    for layer, maps in enumerate(query_key_maps(model), start=1):
        dh = maps["query"].shape[1] // H
        rows[layer] = {
            h: projected_stress(X, Dm, [maps["query"][:, h * dh:(h + 1) * dh], maps["key"][:, h * dh:(h + 1) * dh]], scale=scale)
            for h in range(H)
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "layer"
    out.columns.name = "head"
    return out


# --------------------------------------------------------------------------- hidden states
def positional_hidden_states(
    model: Any,
    corpus: Any,
    n: int,
    *,
    max_sequences: int = 256,
    seed: int = 0,
    batch_size: int = 16,
    cls_token_id: int = 101,
    sep_token_id: int = 102,
    model_name: str | None = None,
    progress: bool = True,
    cache: bool = True,
) -> np.ndarray:
    """Mean hidden state per position and layer over corpus sequences (the second view).

    A random sample of ``max_sequences`` sequences among those with at least ``n`` tokens
    is cut to its first ``n`` tokens, wrapped as ``[CLS] tokens [SEP]`` and run through the
    model; the hidden states of model positions ``1..n`` (our positions ``0..n-1``) are
    averaged over the sample, at the embedding output and after every layer. Every position
    is averaged over the same sequences, so the token content averages out equally
    everywhere (up to sampling noise that shrinks like ``1/sqrt(max_sequences)``).

    Parameters
    ----------
    model : transformers BertModel
    corpus : Corpus
        A text corpus tokenised with the model's vocabulary (:func:`posgeo.load_corpus`).
    n : int
        Positions.
    max_sequences : int, keyword-only
    seed : int, keyword-only
        Seed of the sample.
    batch_size : int, keyword-only
    cls_token_id, sep_token_id : int, keyword-only
        Ids of ``[CLS]`` and ``[SEP]``; defaults: those of the bert-base-uncased WordPiece
        vocabulary, which all-MiniLM-L6-v2 and the book's corpora use.
    model_name : str, keyword-only, optional
        Identifies the model in the cache key (default: its ``name_or_path``).
    progress : bool, keyword-only
    cache : bool, keyword-only
        Store/read the result with :func:`posgeo.cached`.

    Returns
    -------
    numpy.ndarray, shape (n_layers + 1, n, d_model), float64
        Row 0: embedding output; row l: output of layer l.

    Raises
    ------
    ValueError
        When no sequence has ``n`` tokens.
    """
    import torch

    _bert_parts(model)
    seqs = corpus.sequences
    lengths = np.diff(np.asarray(seqs.offsets))
    eligible = np.flatnonzero(lengths >= n)
    if eligible.size == 0:
        raise ValueError(f"no sequence of the corpus has {n} tokens; pass a smaller n")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(eligible, size=min(int(max_sequences), eligible.size), replace=False))
    cls_id, sep_id = int(cls_token_id), int(sep_token_id)
    name = model_name or str(getattr(model.config, "name_or_path", type(model).__name__))

    def compute() -> np.ndarray:
        total = None
        starts = list(range(0, pick.size, int(batch_size)))
        for s in progress_bar(starts, enabled=progress, desc="hidden states"):
            rows = [np.asarray(seqs.tokens[seqs.offsets[k]: seqs.offsets[k] + n], dtype=np.int64) for k in pick[s:s + batch_size]]
            ids = np.array([[cls_id, *r, sep_id] for r in rows], dtype=np.int64)
            with torch.no_grad():
                out = model(input_ids=torch.as_tensor(ids), output_hidden_states=True)
            hs = torch.stack(out.hidden_states)[:, :, 1:n + 1].double().sum(dim=1).numpy()  # (L+1, n, d)
            total = hs if total is None else total + hs
        assert total is not None
        return total / pick.size

    key = {"model": name, "corpus": repr(corpus), "options": getattr(corpus, "options", None),
           "n": int(n), "sample": int(pick.size), "seed": int(seed), "special": [cls_id, sep_id],
           "checksum": int(np.asarray(seqs.tokens[:: max(1, seqs.tokens.size // 10007)], dtype=np.int64).sum())}
    return cached("positional_hidden_states", key, compute, enabled=cache)


def hidden_stress_table(hidden: np.ndarray, D: Any) -> pd.DataFrame:
    """Stress of the mean hidden state per position, layer by layer.

    Parameters
    ----------
    hidden : numpy.ndarray, shape (L + 1, n, d)
        From :func:`positional_hidden_states`.
    D : array_like, shape (n, n)

    Returns
    -------
    pandas.DataFrame
        Index ``layer`` (0 = embedding output); columns ``raw`` and ``optimal``.

    Examples
    --------
    >>> D = np.abs(np.subtract.outer(np.arange(5.0), np.arange(5.0)))
    >>> H = np.stack([np.arange(5.0)[:, None] * [1.0, 0.0], np.arange(5.0)[:, None] * [2.0, 0.0]])
    >>> hidden_stress_table(H, D).round(3).to_dict("list")
    {'raw': [0.0, 1.0], 'optimal': [0.0, 0.0]}
    """
    H = np.asarray(hidden, dtype=np.float64)
    if H.ndim != 3:
        raise ValueError(f"hidden must have shape (L + 1, n, d), got {H.shape}; pass positional_hidden_states(...)")
    Dm = check_distance_matrix(D)
    rows = {layer: {"raw": stress(H[layer], Dm), "optimal": stress(H[layer], Dm, scale="optimal")} for layer in range(H.shape[0])}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "layer"
    return out


# --------------------------------------------------------------------------- plots
def plot_layer_stress(tables: Mapping[str, pd.DataFrame], *, column: str = "optimal", title: str = "") -> Figure:
    """Stress against the layer, one line per table.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        Label -> a table indexed by layer with a ``column`` column.
    column : str, keyword-only
    title : str, keyword-only

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(5.0, 3.2), dpi=96, layout="constrained")
    ax = fig.subplots()
    for c, (label, t) in enumerate(tables.items()):
        ax.plot(t.index, t[column], marker="o", color=f"C{c}", label=label)
    ax.set_xlabel("layer (0 = input)")
    ax.set_ylabel(f"{column} stress")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_head_stress(tables: Mapping[str, pd.DataFrame]) -> Figure:
    """Heatmaps of per-head projected stress (layers x heads), one panel per table.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        Label -> output of :func:`head_stress_table`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(4.2 * len(tables), 2.8), dpi=96, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(tables), squeeze=False)).ravel()
    vmax = max(float(np.nanmax(t.to_numpy())) for t in tables.values())
    im = None
    for ax, (label, t) in zip(axes, tables.items()):
        im = ax.imshow(t.to_numpy(), vmin=0.0, vmax=vmax, cmap="magma", aspect="auto")
        ax.set_yticks(range(t.shape[0]), [str(i) for i in t.index])
        ax.set_xticks(range(t.shape[1]), [str(c) for c in t.columns], fontsize=7)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label, fontsize=10)
    if im is not None:
        fig.colorbar(im, ax=list(axes), shrink=0.9, label="scale-optimal stress")
    return fig
