"""posgeo._seeds: intervals over training seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posgeo as pg


def test_interval_matches_the_t_formula():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    iv = pg.seed_interval(x, level=0.9)
    from scipy.stats import t

    half = t.ppf(0.95, 3) * x.std(ddof=1) / 2
    assert iv.mean == pytest.approx(3.5)
    assert (iv.low, iv.high) == pytest.approx((3.5 - half, 3.5 + half))
    assert iv.n_seeds == 4 and iv.level == 0.9 and iv.sd == pytest.approx(x.std(ddof=1))


def test_interval_covers_a_known_mean_at_its_level():
    # Normal draws with a known mean: the 95% interval covers it in about 95% of samples.
    rng = np.random.default_rng(0)
    hits = sum(pg.seed_interval(rng.normal(0.3, 0.1, size=5)).contains(0.3) for _ in range(4000))
    assert 0.935 < hits / 4000 < 0.965
    # and a 50% interval covers it about half the time (the level is used, not ignored)
    hits = sum(pg.seed_interval(rng.normal(0.3, 0.1, size=5), level=0.5).contains(0.3) for _ in range(4000))
    assert 0.47 < hits / 4000 < 0.53


def test_constant_values_give_a_point_interval():
    iv = pg.seed_interval([0.5] * 5)
    assert iv.low == iv.high == 0.5 and iv.contains(0.5) and not iv.contains(0.51)


@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=12), st.floats(0.5, 0.99))
@settings(max_examples=60, deadline=None)
def test_interval_holds_the_mean_and_widens_with_the_level(values, level):
    iv = pg.seed_interval(values, level=level)
    wider = pg.seed_interval(values, level=min(0.999, level + 0.005))
    assert iv.low <= iv.mean <= iv.high
    assert wider.low <= iv.low + 1e-9 and wider.high >= iv.high - 1e-9


def test_welch_difference_separates_distinct_groups_and_not_equal_ones():
    a = [0.9, 0.91, 0.92, 0.9, 0.91]
    b = [0.5, 0.52, 0.49, 0.5, 0.51]
    d = pg.seed_difference(a, b)
    assert d.mean == pytest.approx(np.mean(a) - np.mean(b)) and d.excludes_zero
    assert not pg.seed_difference(a, list(reversed(a))).excludes_zero
    # Welch's degrees of freedom: unequal variances give a wider interval than the pooled t
    from scipy.stats import ttest_ind

    x, y = [1.0, 1.1, 0.9, 1.05, 0.95], [0.0, 2.0, -1.0, 3.0, 1.0]
    d = pg.seed_difference(x, y)
    p = ttest_ind(x, y, equal_var=False).pvalue
    assert (p < 0.05) == d.excludes_zero


def test_paired_difference_uses_the_pairing():
    # a shared per-seed offset hides the difference from Welch but not from the paired test
    base = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    a, b = base + 0.1, base
    assert pg.seed_difference(a, b, paired=True).excludes_zero
    assert not pg.seed_difference(a, b).excludes_zero
    with pytest.raises(ValueError, match="one value per seed on both sides"):
        pg.seed_difference([1.0, 2.0, 3.0], [1.0, 2.0], paired=True)


@pytest.mark.parametrize(
    ("values", "kwargs", "error", "match"),
    [
        ([0.5], {}, ValueError, "at least 2 seeds"),
        ([], {}, ValueError, "at least 2 seeds"),
        ([0.5, float("nan"), 0.4], {}, ValueError, "NaN or infinite"),
        ([0.5, 0.6], {"level": 1.0}, ValueError, "strictly between 0 and 1"),
        ([0.5, 0.6], {"level": 0}, ValueError, "strictly between 0 and 1"),
        ([[0.5, 0.6]], {}, ValueError, "1-D"),
        (0.5, {}, TypeError, "sequence of per-seed values"),
        (["a", "b"], {}, TypeError, "real numbers"),
    ],
)
def test_bad_input_is_named(values, kwargs, error, match):
    with pytest.raises(error, match=match):
        pg.seed_interval(values, **kwargs)


def test_summary_groups_runs_and_rejects_repeated_seeds():
    runs = pd.DataFrame(
        {"task": ["b"] * 3 + ["a"] * 3, "seed": [0, 1, 2] * 2, "acc": [0.5, 0.55, 0.45, 0.9, 0.8, 0.85],
         "loss": [1.0, 1.1, 0.9, 0.2, 0.3, 0.25]}
    )
    out = pg.seed_summary(runs, by="task", metrics=["acc", "loss"])
    assert list(out.index) == ["b", "a"]  # order of first appearance
    assert out.loc["a", ("acc", "mean")] == pytest.approx(0.85)
    iv = pg.seed_interval([0.9, 0.8, 0.85])
    assert out.loc["a", ("acc", "low")] == pytest.approx(iv.low)
    assert out.loc["b", ("loss", "seeds")] == 3
    two = pg.seed_summary(runs.assign(obj="x"), by=["task", "obj"], metrics="acc")
    assert two.index.names == ["task", "obj"] and math.isclose(two.loc[("b", "x"), ("acc", "mean")], 0.5)
    with pytest.raises(ValueError, match="seed repeated"):
        pg.seed_summary(pd.concat([runs, runs.iloc[:1]]), by="task", metrics="acc")
    with pytest.raises(ValueError, match="no column"):
        pg.seed_summary(runs, by="task", metrics="accuracy")
    with pytest.raises(ValueError, match="'a', acc: .*at least 2 seeds"):
        pg.seed_summary(runs[runs["seed"] != 1].iloc[[0, 1, 2]], by="task", metrics="acc")
    with pytest.raises(TypeError, match="DataFrame"):
        pg.seed_summary({"acc": [1, 2]}, by="task", metrics="acc")


def test_interval_table_formats_each_metric():
    runs = pd.DataFrame({"task": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2, "acc": [0.9, 0.8, 0.85, 0.5, 0.5, 0.5]})
    out = pg.interval_table(pg.seed_summary(runs, by="task", metrics="acc"), digits=3)
    iv = pg.seed_interval([0.9, 0.8, 0.85])
    assert out.loc["a", "acc"] == f"0.850 [{iv.low:.3f}, {iv.high:.3f}]"
    assert out.loc["b", "acc"] == "0.500 [0.500, 0.500]"
    with pytest.raises(ValueError, match="lacks"):
        pg.interval_table(pg.seed_summary(runs, by="task", metrics="acc").drop(columns=[("acc", "low")]))
    with pytest.raises(TypeError, match="statistic"):
        pg.interval_table(runs)


def test_bounds_cut_the_interval_to_the_quantity_range():
    acc = [0.99, 1.0, 0.8, 1.0, 0.95]
    free, cut = pg.seed_interval(acc), pg.seed_interval(acc, bounds=(0, 1))
    assert free.high > 1 and cut.high == 1.0 and cut.low == free.low and cut.mean == free.mean
    assert pg.seed_interval([0.01, 0.0, 0.2], bounds=(0, None)).low == 0.0
    with pytest.raises(ValueError, match="outside bounds"):
        pg.seed_interval([0.5, 1.2], bounds=(0, 1))
    with pytest.raises(ValueError, match="lower < upper"):
        pg.seed_interval([0.5, 0.6], bounds=(1, 0))
    with pytest.raises(TypeError, match="pair"):
        pg.seed_interval([0.5, 0.6], bounds=1.0)
    runs = pd.DataFrame({"task": "a", "seed": range(5), "acc": acc})
    out = pg.seed_summary(runs, by="task", metrics="acc", bounds={"acc": (0, 1)})
    assert out.loc["a", ("acc", "high")] == 1.0
    with pytest.raises(ValueError, match="not among the metrics"):
        pg.seed_summary(runs, by="task", metrics="acc", bounds={"loss": (0, None)})
