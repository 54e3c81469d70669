"""Intervals over training seeds: the one place where the book turns runs into claims.

A result drawn from training (an accuracy, a violation rate, a separation) changes with the
seed and, by a smaller amount, with the CPU's floating-point kernels. Each chapter that
draws a conclusion from training therefore trains several seeds and reports

- :func:`seed_interval`: the mean over seeds with a Student-t interval;
- :func:`seed_difference`: the difference of two configurations' means, with a Welch
  interval (independent seeds) or a paired one (runs that share their seed, hence their
  initialisation and batches);
- :func:`seed_summary`: the same for every group of a tidy table of runs.

A claim "A is larger than B" is made only where the interval of the difference excludes 0
(:attr:`SeedInterval.excludes_zero`); "at chance" only where the interval contains chance.

    >>> iv = seed_interval([0.50, 0.52, 0.49, 0.51, 0.50])
    >>> round(iv.mean, 3), iv.contains(0.5), iv.n_seeds
    (0.504, True, 5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from posgeo.validation import check_float

__all__ = ['SeedInterval', 'seed_interval', 'seed_difference', 'seed_summary', 'interval_table']


@dataclass(frozen=True)
class SeedInterval:
    """A mean over seeds (or a difference of two means) with its confidence interval.

    Attributes
    ----------
    mean : float
        The mean over seeds (for a difference: mean of ``a`` minus mean of ``b``).
    low, high : float
        The ends of the ``level`` interval (Student t; Welch for unpaired differences).
    sd : float
        The standard deviation over seeds (ddof = 1); for a difference, its standard error
        times the square root of the number of seeds.
    n_seeds : int
        Seeds behind the mean (for an unpaired difference: the smaller of the two).
    level : float
        The confidence level, in (0, 1).

    Examples
    --------
    >>> iv = SeedInterval(mean=0.2, low=0.1, high=0.3, sd=0.05, n_seeds=5, level=0.95)
    >>> iv.excludes_zero, iv.contains(0.25), iv.half_width
    (True, True, 0.1)
    """

    mean: float
    low: float
    high: float
    sd: float
    n_seeds: int
    level: float

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return round((self.high - self.low) / 2, 15)

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies strictly on one side of 0 (the difference is significant)."""
        return bool(self.low > 0 or self.high < 0)

    def contains(self, value: float) -> bool:
        """True when ``low <= value <= high``."""
        v = check_float(value, "value")
        return bool(self.low <= v <= self.high)

    def as_dict(self) -> dict[str, float]:
        """``{"mean", "low", "high", "sd", "seeds"}``, for a table row."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "sd": self.sd, "seeds": self.n_seeds}


def _check_level(level: Any) -> float:
    lv = check_float(level, "level", hint="a confidence level, e.g. 0.95")
    if not 0 < lv < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {lv}; e.g. 0.95 for a 95% interval")
    return lv


def _values(values: Any, name: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or np.isscalar(values):
        raise TypeError(f"{name} must be a sequence of per-seed values (one number per seed), got {type(values).__name__}")
    arr = np.asarray(values)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers (one per seed), got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per seed), got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if arr.size < 2:
        raise ValueError(
            f"{name}: an interval over seeds needs at least 2 seeds, got {arr.size}; train more seeds "
            "(the chapters' settings have a `seeds` field; the book uses 5)"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} has NaN or infinite values (seed positions {np.flatnonzero(~np.isfinite(arr)).tolist()}); "
                         "a diverged run must be reported, not averaged")
    return arr


def _t(level: float, dof: float) -> float:
    from scipy.stats import t as student_t

    return float(student_t.ppf((1 + level) / 2, dof))


def _check_bounds(bounds: Any) -> tuple[float, float]:
    if bounds is None:
        return (-math.inf, math.inf)
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise TypeError(f"bounds must be a (lower, upper) pair (None for no bound), got {bounds!r}; e.g. (0, 1) for an accuracy")
    lo, hi = (-math.inf if bounds[0] is None else check_float(bounds[0], "bounds[0]"),
              math.inf if bounds[1] is None else check_float(bounds[1], "bounds[1]"))
    if lo >= hi:
        raise ValueError(f"bounds must have lower < upper, got {bounds!r}")
    return lo, hi


def seed_interval(
    values: Sequence[float] | np.ndarray, *, level: float = 0.95, bounds: tuple[float | None, float | None] | None = None
) -> SeedInterval:
    """Mean of a per-seed result with its Student-t interval.

    Parameters
    ----------
    values : sequence of float, shape (n_seeds,)
        One value per seed; at least 2, all finite.
    level : float, keyword-only, default 0.95
        Confidence level, in (0, 1).
    bounds : (float or None, float or None), keyword-only, optional
        The range the quantity cannot leave, e.g. ``(0, 1)`` for an accuracy or a rate,
        ``(0, None)`` for a stress: the interval is cut to it (the mean lies inside, so the
        cut loses no coverage). Values outside the bounds are an error.

    Returns
    -------
    SeedInterval

    Raises
    ------
    TypeError
        Non-numeric values, or a scalar.
    ValueError
        Fewer than 2 seeds, a non-finite value, or ``level`` outside (0, 1).

    Examples
    --------
    >>> iv = seed_interval([1.0, 2.0, 3.0])
    >>> iv.mean, round(iv.low, 3), round(iv.high, 3)
    (2.0, -0.484, 4.484)
    """
    lv = _check_level(level)
    x = _values(values, "values")
    lo, hi = _check_bounds(bounds)
    if (x < lo).any() or (x > hi).any():
        raise ValueError(f"values lie outside bounds {bounds!r} (min {x.min():g}, max {x.max():g}); "
                         "the bounds are the range the quantity cannot leave")
    n = x.size
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    half = _t(lv, n - 1) * sd / math.sqrt(n)
    return SeedInterval(mean=mean, low=max(mean - half, lo), high=min(mean + half, hi), sd=sd, n_seeds=n, level=lv)


def seed_difference(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    paired: bool = False,
    level: float = 0.95,
) -> SeedInterval:
    """Difference of two configurations' means over seeds, ``mean(a) - mean(b)``, with its interval.

    Parameters
    ----------
    a, b : sequence of float, shape (n_a,) and (n_b,)
        Per-seed values of the two configurations (at least 2 each).
    paired : bool, keyword-only, default False
        True when ``a[s]`` and ``b[s]`` share seed ``s`` (same initialisation and batches,
        e.g. frozen against full attention): the interval is the paired t interval of
        ``a - b`` (``n_a == n_b`` required). False: Welch's interval for independent samples.
    level : float, keyword-only, default 0.95

    Returns
    -------
    SeedInterval
        ``mean`` is the difference; ``excludes_zero`` tells whether it is significant.

    Raises
    ------
    ValueError
        Fewer than 2 seeds on a side, paired samples of different sizes, non-finite values,
        ``level`` outside (0, 1).

    Examples
    --------
    >>> d = seed_difference([0.9, 0.91, 0.92, 0.9, 0.91], [0.5, 0.52, 0.49, 0.5, 0.51])
    >>> round(d.mean, 3), d.excludes_zero
    (0.404, True)
    >>> seed_difference([1.0, 2.0, 3.0], [1.1, 2.2, 2.9], paired=True).excludes_zero
    False
    """
    lv = _check_level(level)
    x, y = _values(a, "a"), _values(b, "b")
    if not isinstance(paired, (bool, np.bool_)):
        raise TypeError(f"paired must be True or False, got {paired!r}")
    if paired:
        if x.size != y.size:
            raise ValueError(f"paired differences need one value per seed on both sides, got {x.size} and {y.size} values; "
                             "pass paired=False for independent runs")
        return seed_interval(x - y, level=lv)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    diff = float(x.mean() - y.mean())
    if se == 0:
        return SeedInterval(mean=diff, low=diff, high=diff, sd=0.0, n_seeds=int(min(x.size, y.size)), level=lv)
    dof = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = _t(lv, dof) * se
    n = int(min(x.size, y.size))
    return SeedInterval(mean=diff, low=diff - half, high=diff + half, sd=se * math.sqrt(n), n_seeds=n, level=lv)


def seed_summary(
    runs: Any,
    *,
    by: str | Sequence[str],
    metrics: str | Sequence[str],
    seed: str = "seed",
    level: float = 0.95,
    bounds: Mapping[str, tuple[float | None, float | None]] | None = None,
) -> Any:
    """Mean and interval over seeds of each metric, for every group of a tidy table of runs.

    Parameters
    ----------
    runs : pandas.DataFrame
        One row per run: the grouping columns, a ``seed`` column and the metric columns.
    by : str or sequence of str, keyword-only
        Columns that identify a configuration.
    metrics : str or sequence of str, keyword-only
        Columns to summarise.
    seed : str, keyword-only, default "seed"
        The column holding the seed; a seed may occur once per configuration.
    level : float, keyword-only, default 0.95
    bounds : mapping of str to (lower, upper), keyword-only, optional
        Per metric, the range it cannot leave (see :func:`seed_interval`), e.g.
        ``{"accuracy": (0, 1)}``.

    Returns
    -------
    pandas.DataFrame
        Index: the groups (in order of first appearance); columns: a two-level index
        ``(metric, statistic)`` with statistics ``mean``, ``low``, ``high``, ``sd``, ``seeds``.

    Raises
    ------
    ValueError
        A missing column, a seed repeated within a configuration, fewer than 2 seeds in a
        configuration, non-finite values, ``level`` outside (0, 1).

    Examples
    --------
    >>> import pandas as pd
    >>> runs = pd.DataFrame({"task": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
    ...                      "acc": [0.9, 0.8, 0.85, 0.5, 0.55, 0.45]})
    >>> seed_summary(runs, by="task", metrics="acc")[("acc", "mean")].round(3).tolist()
    [0.85, 0.5]
    """
    import pandas as pd

    if not isinstance(runs, pd.DataFrame):
        raise TypeError(f"runs must be a pandas DataFrame with one row per run, got {type(runs).__name__}")
    keys = [by] if isinstance(by, str) else list(by)
    cols = [metrics] if isinstance(metrics, str) else list(metrics)
    if not keys or not cols:
        raise ValueError("seed_summary needs at least one `by` column and one metric")
    missing = [c for c in [*keys, seed, *cols] if c not in runs.columns]
    if missing:
        raise ValueError(f"runs has no column(s) {missing}; its columns are {list(runs.columns)}")
    lv = _check_level(level)
    limits = dict(bounds or {})
    unknown = sorted(set(limits) - set(cols))
    if unknown:
        raise ValueError(f"bounds names {unknown}, which are not among the metrics {cols}")
    repeated = runs.duplicated([*keys, seed])
    if repeated.any():
        first = runs.loc[repeated, [*keys, seed]].iloc[0].to_dict()
        raise ValueError(f"seed repeated within a configuration: {first}; each (configuration, seed) must be one run")
    grouped = runs.groupby(keys if len(keys) > 1 else keys[0], sort=False)
    rows: dict[Any, dict[tuple[str, str], float]] = {}
    for key, group in grouped:
        row: dict[tuple[str, str], float] = {}
        for c in cols:
            try:
                iv = seed_interval(group[c].to_numpy(), level=lv, bounds=limits.get(c))
            except ValueError as err:
                raise ValueError(f"{key!r}, {c}: {err}") from None
            for stat, value in iv.as_dict().items():
                row[(c, stat)] = value
        rows[key] = row
    out = pd.DataFrame(list(rows.values()))
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["metric", "statistic"])
    out.index = grouped.size().index  # pandas' own group index: levels in order of appearance, as unstack keeps them
    return out


def interval_table(summary: Any, *, digits: int = 2) -> Any:
    """One readable cell per metric, ``"mean [low, high]"``, from :func:`seed_summary`.

    Parameters
    ----------
    summary : pandas.DataFrame
        Columns ``(metric, statistic)`` with at least ``mean``, ``low`` and ``high`` per metric
        (as :func:`seed_summary` returns them).
    digits : int, keyword-only, default 2
        Decimals shown; choose what the seed spread resolves.

    Returns
    -------
    pandas.DataFrame
        Same index, one text column per metric.

    Raises
    ------
    ValueError
        A metric without ``mean``, ``low`` or ``high``.

    Examples
    --------
    >>> import pandas as pd
    >>> runs = pd.DataFrame({"task": ["a"] * 3, "seed": [0, 1, 2], "acc": [0.9, 0.8, 0.85]})
    >>> interval_table(seed_summary(runs, by="task", metrics="acc"))
                        acc
    task
    a     0.85 [0.73, 0.97]
    """
    import pandas as pd

    from posgeo.validation import check_int

    d = check_int(digits, "digits", minimum=0)
    if not isinstance(summary, pd.DataFrame) or summary.columns.nlevels != 2:
        raise TypeError("summary must be a DataFrame with (metric, statistic) columns, as seed_summary returns")
    out = {}
    for metric in dict.fromkeys(summary.columns.get_level_values(0)):
        part = summary[metric]
        absent = [c for c in ("mean", "low", "high") if c not in part.columns]
        if absent:
            raise ValueError(f"summary[{metric!r}] lacks {absent}; pass the output of seed_summary")
        out[metric] = [f"{m:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]" for m, lo, hi in zip(part["mean"], part["low"], part["high"])]
    return pd.DataFrame(out, index=summary.index)
