"""Projected stress of hidden states: how well each layer's positional component keeps the
corpus geometry (P1 section 8); the per-layer table the audit and chapter 9 show."""

from __future__ import annotations

from typing import Any
import numpy as np
import pandas as pd
from ._geometry import check_distance_matrix, pairwise_distances, stress
from ._pretrained import positional_input, query_key_maps

__all__ = ['projected_stress', 'layer_stress_table']


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
