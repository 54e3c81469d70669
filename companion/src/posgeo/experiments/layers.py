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
import altair as alt
import numpy as np
import pandas as pd

import posgeo as pg
from posgeo import check_distance_matrix, pairwise_distances, stress  # noqa: F401 (pairwise_distances: the doctests)
from posgeo import current_profile
from posgeo import encoder_parts, num_attention_heads, positional_input, projected_stress, query_key_maps
from posgeo.validation import check_int

__all__ = [
    'LayerSettings',
    'layers_settings',
    'frequent_tokens',
    'positional_input_error',
    'random_map_stress',
    'head_stress_table',
    'hidden_stress_table',
    'plot_layer_stress',
    'plot_head_stress',
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


def frequent_tokens(tokens: Any, k: int, *, vocab_size: int) -> np.ndarray:
    """The ``k`` most frequent token ids, most frequent first; ties by ascending id.

    The tie order is fixed (a stable sort), so the same ids come out on every CPU: an unstable
    ``np.argsort`` orders equal counts by its SIMD loops (on SST-2, two of the four ids with
    the 500th count differ between numpy's AVX-512 and AVX2 sorts).

    Parameters
    ----------
    tokens : array_like of int, shape (T,)
        Token ids (e.g. ``corpus.sequences.tokens``).
    k : int
        How many ids (at most ``vocab_size``).
    vocab_size : int, keyword-only

    Returns
    -------
    numpy.ndarray of int64, shape (k,)

    Examples
    --------
    >>> frequent_tokens([5, 3, 3, 5, 1, 7], 3, vocab_size=8).tolist()
    [3, 5, 1]
    """
    V = check_int(vocab_size, "vocab_size")
    k = check_int(k, "k")
    if k > V:
        raise ValueError(f"k={k} is more than the vocabulary's {V} ids; pass k <= vocab_size")
    ids = np.asarray(tokens)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integer token ids, got dtype {ids.dtype}; pass corpus.sequences.tokens")
    if ids.size and int(ids.min()) < 0:
        raise ValueError(f"token id {int(ids.min())} is negative; pass token ids in [0, vocab_size)")
    counts = np.bincount(ids.astype(np.int64, copy=False).ravel(), minlength=V)
    if counts.size > V:
        raise ValueError(f"token id {counts.size - 1} is outside [0, vocab_size={V}); pass the right vocab_size")
    return np.argsort(-counts, kind="stable")[:k].astype(np.int64)


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

    emb, _ = encoder_parts(model)
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
    H = num_attention_heads(model)
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
def plot_layer_stress(tables: Mapping[str, pd.DataFrame], *, column: str = "optimal", title: str = "", log: bool = False) -> Any:
    """Stress against the layer, one line per table.

    Labels naming a corpus take its colour, and a noise-corrected target is dashed
    (``"sst2, corrected"``), as everywhere in the book.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        Label -> a table indexed by layer with a ``column`` column.
    column : str, keyword-only
        ``"optimal"`` (scale-optimal stress) or ``"raw"``.
    title : str, keyword-only
    log : bool, keyword-only, default False
        Logarithmic stress axis (for targets whose stresses differ by more than a decade).

    Returns
    -------
    altair chart
    """
    if not tables:
        raise ValueError("plot_layer_stress: no tables given")
    frame = pd.concat(
        [pd.DataFrame({"layer": np.asarray(t.index, dtype=int), "stress": t[column].to_numpy(dtype=float), "target": label})
         for label, t in tables.items()],
        ignore_index=True,
    )
    measure = {"optimal": "scale-optimal stress", "raw": "raw stress"}.get(column, f"{column} stress")
    layers = sorted(int(x) for x in frame["layer"].unique())
    chart = pg.series_chart(frame, x="layer", y="stress", series="target", points=True, zoom=False,
                            x_title="layer (0 = input)", y_title=measure, series_title="corpus, target",
                            title=title or None, x_scale={"domain": [layers[0], layers[-1]], "nice": False},
                            y_scale={"type": "log"} if log else None)
    for layer in chart.layer:
        layer.encoding.x.axis = alt.Axis(values=layers, format="d")
    if log:
        for layer in chart.layer:
            layer.encoding.y.axis = alt.Axis(format="~g")
    return pg.finish_chart(
        chart,
        description=(f"{measure.capitalize()}{' (log scale)' if log else ''} against the layer, layer 0 being the input"
                     + (f" ({title})" if title else "") + f", for {', '.join(tables)}; "
                     "corrected targets are dashed in their corpus colour."),
    )


def plot_head_stress(tables: Mapping[str, pd.DataFrame], *, value_title: str = "scale-optimal stress") -> Any:
    """Heatmaps of per-head projected stress (layers x heads), one panel per table, one colour bar.

    Hover a cell for its layer, head and value.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        Label -> output of :func:`head_stress_table` (index layer, columns head).
    value_title : str, keyword-only
        Title of the colour bar.

    Returns
    -------
    altair chart
    """
    if not tables:
        raise ValueError("plot_head_stress: no tables given")
    vmax = max(float(np.nanmax(t.to_numpy(dtype=float))) for t in tables.values())
    colour = alt.Scale(scheme="magma", domain=[0.0, vmax])
    panels = []
    for label, t in tables.items():
        long = pd.DataFrame(
            [{"layer": int(layer), "head": int(head), "stress": float(t.loc[layer, head])} for layer in t.index for head in t.columns]
        )
        heads = [int(h) for h in t.columns]
        panels.append(
            alt.Chart(long, title=str(label)).mark_rect(stroke="white", strokeWidth=0.5).encode(
                x=alt.X("head:O", title="head", sort=heads, axis=alt.Axis(labelAngle=0)),
                y=alt.Y("layer:O", title="layer", sort=[int(x) for x in t.index]),
                color=alt.Color("stress:Q", title=value_title, scale=colour,
                                legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=260)),
                tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("stress:Q", title=value_title, format=".4f")],
            ).properties(width=pg.PANEL_WIDTH, height=max(120, 24 * len(t.index)))
        )
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared"),
        description=(f"Heatmaps of the per-head {value_title} (rows: layers, columns: heads), one panel each for "
                     f"{', '.join(tables)}, on one colour scale; hover a cell for its value."),
    )
