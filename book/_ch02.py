"""Helpers of the chapter "Without positions, order is invisible" (02_permutation_equivariance)."""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import numpy as np
import pandas as pd
import torch
from scipy.stats import beta

import posgeo as pg


@dataclass(frozen=True)
class SortedTask:
    """Is the sequence non-decreasing? Label 1: a sorted draw; label 0: an unsorted one."""

    vocab_size: int = 16
    seq_len: int = 8
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=True, init=False)

    def sample(self, batch_size: int, generator: torch.Generator) -> pg.Batch:
        """``batch_size`` labelled sequences, balanced in expectation."""
        labels = torch.randint(0, 2, (batch_size,), generator=generator)
        tokens = torch.randint(0, self.vocab_size, (batch_size, self.seq_len), generator=generator)
        tokens = torch.where(labels[:, None] == 1, tokens.sort(dim=1).values, tokens)
        bad = (labels == 0) & _is_sorted(tokens)
        while bool(bad.any()):  # an unsorted row came out sorted: redraw it
            tokens[bad] = torch.randint(0, self.vocab_size, (int(bad.sum()), self.seq_len), generator=generator)
            bad = (labels == 0) & _is_sorted(tokens)
        return pg.Batch(tokens, labels, "cls")

    def cache_key(self) -> dict:
        """Class name and parameters."""
        return {"task": "SortedTask", "vocab_size": self.vocab_size, "seq_len": self.seq_len}


def _is_sorted(tokens: torch.Tensor) -> torch.Tensor:
    return (tokens[:, 1:] >= tokens[:, :-1]).all(dim=1)


@dataclass(frozen=True)
class Errors:
    """Equivariance errors of one model: one per permutation, and the output scale max |f(X)|."""

    errors: np.ndarray
    permutations: np.ndarray
    scale: float

    @property
    def relative(self) -> np.ndarray:
        """Errors in units of the largest output."""
        return self.errors / self.scale


def outputs(model: torch.nn.Module, X) -> np.ndarray:
    """Per-token outputs ``f(X)`` (float64 numpy) of a posgeo or Hugging Face encoder fed ``inputs_embeds``."""
    param = next(model.parameters())
    with torch.no_grad():
        out = model(inputs_embeds=torch.as_tensor(X).to(param.device, param.dtype)).last_hidden_state
    return out.to("cpu", torch.float64).numpy()


def equivariance_errors(model, X, *, n_permutations=None, seed=0, permutations=None, chunk=32) -> Errors:
    """``max |f(X[:, p]) - f(X)[:, p]|`` for random (seeded) or given permutations ``p``, 32 per forward pass."""
    n = X.shape[1]
    if permutations is None:
        rng = np.random.default_rng(seed)
        permutations = np.stack([rng.permutation(n) for _ in range(n_permutations)])
    perms = np.atleast_2d(np.asarray(permutations, dtype=np.int64))
    reference = outputs(model, X)
    errors = []
    for start in range(0, len(perms), chunk):
        block = perms[start : start + chunk]
        out = outputs(model, np.concatenate([np.asarray(X)[:, p] for p in block]))
        errors += [np.abs(o - reference[:, p]).max() for o, p in zip(np.split(out, len(block)), block)]
    return Errors(np.array(errors), perms, float(np.abs(reference).max()))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for an accuracy of ``k`` right out of ``n`` (inside [0, 1])."""
    a = (1 - level) / 2
    return (float(beta.ppf(a, k, n - k + 1)) if k > 0 else 0.0, float(beta.ppf(1 - a, k + 1, n - k)) if k < n else 1.0)


def plot_equivariance_errors(results: dict, *, thresholds=(1e-5, 1e-2), floor: float = 1e-18, seed: int = 0):
    """Each map's relative error under each permutation: a box plot and jittered dots, log axis, reference lines."""
    rng = np.random.default_rng(seed)
    ok, bad = f"all below {thresholds[0]:.0e}", f"some above {thresholds[0]:.0e}"
    labels = list(results)
    errors = pd.concat([pd.DataFrame({
        "map": label, "permutation": np.arange(r.errors.size), "relative error": r.relative,
        "jitter": rng.uniform(-0.3, 0.3, size=r.errors.size), "group": ok if r.relative.max() < thresholds[0] else bad,
    }) for label, r in results.items()], ignore_index=True)
    lines = [(f"equivariant below {thresholds[0]:.0e}", thresholds[0]), (f"not equivariant above {thresholds[1]:.0e}", thresholds[1])]
    lines += [(f"reference: {np.dtype(t).name} eps", float(np.finfo(t).eps)) for t in (np.float64, np.float32)]
    references = pd.DataFrame({"reference line": [name for name, _ in lines], "value": [v for _, v in lines]})
    values = [*np.maximum(errors["relative error"], floor), *references["value"]]
    scale = alt.Scale(type="log", domain=[min(values) / 10, max(values) * 10], nice=False)
    x = alt.X("drawn at:Q", title="max |f(πX) − πf(X)| / max |f(X)| per permutation (log scale)", scale=scale,
              axis=alt.Axis(format=".0e", tickCount=10, grid=True))
    y = alt.Y("map:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260))
    names = list(references["reference line"])
    rules = alt.Chart(references).mark_rule(strokeWidth=1.5, color="#444444").encode(
        x=alt.X("value:Q", scale=scale),
        strokeDash=alt.StrokeDash("reference line:N", sort=names,
                                  scale=alt.Scale(domain=names, range=[[6, 3], [10, 2, 2, 2], [2, 2], [1, 4]]),
                                  legend=alt.Legend(symbolType="stroke", columns=2, title="reference line")),
        tooltip=[alt.Tooltip("reference line:N"), alt.Tooltip("value:Q", format=".3~e")],
    )
    base = alt.Chart(errors).transform_calculate(**{"drawn at": f"max(datum['relative error'], {floor!r})"})
    boxes = base.mark_boxplot(extent=1.5, outliers=False, size=18, color="#777777", opacity=0.45,
                              median={"color": "black"}, rule={"color": "#444444"}, ticks=False).encode(x=x, y=y)
    dots = base.mark_point(filled=True, size=14, opacity=0.55).encode(
        x=x, y=y, yOffset=alt.YOffset("jitter:Q", scale=alt.Scale(domain=[-1, 1])),
        color=alt.Color("group:N", title="the map's errors", scale=pg.colour_scale([ok, bad]), sort=[ok, bad]),
        tooltip=[alt.Tooltip("map:N"), alt.Tooltip("permutation:Q"), alt.Tooltip("relative error:Q", format=".3~e"),
                 alt.Tooltip("group:N", title="the map's errors")],
    )
    chart = alt.layer(rules, boxes, dots).properties(width=pg.COLUMN_WIDTH - 120, height=max(160, 30 * len(labels)))
    return pg.finish_chart(chart, description=(
        "Equivariance error of each map under each random permutation (relative error, log axis): a box plot per map "
        "with every permutation as a dot, coloured by whether all of the map's errors lie below the first threshold, "
        "and vertical reference lines at the thresholds and at the float64 and float32 machine epsilons."))


def plot_accuracies(table: pd.DataFrame, chance: tuple[float, float]):
    """Accuracy of each model on each task with its interval, beside the band where guessing lands."""
    band = pd.DataFrame({"low": [chance[0]], "high": [chance[1]], "what": ["a guess lands here (99%)"]})
    scale = alt.Scale(domain=[0.4, 1.0])
    x = alt.X("accuracy:Q", scale=scale, title="accuracy on fresh sequences")
    y = alt.Y("positional signal:N", sort=list(dict.fromkeys(table["positional signal"])), title=None)
    chance_band = alt.Chart(band).mark_rect(opacity=0.25, color="#999999").encode(
        x=alt.X("low:Q", scale=scale), x2="high:Q", tooltip=[alt.Tooltip("what:N", title=" ")])
    bars = alt.Chart(table).mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", scale=scale), x2="high:Q", y=y, color=alt.Color("task:N"), yOffset="task:N")
    dots = alt.Chart(table).mark_point(filled=True, size=50).encode(
        x=x, y=y, color=alt.Color("task:N", title="task"), yOffset="task:N",
        tooltip=["positional signal:N", "task:N", alt.Tooltip("accuracy:Q", format=".3f"),
                 alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f")])
    chart = alt.layer(chance_band, bars, dots).properties(width=pg.COLUMN_WIDTH - 160, height=260)
    return pg.finish_chart(chart, description=(
        "Accuracy of the encoder trained with each positional signal on the two order-sensitive tasks, each with its "
        "interval, over a grey band: the range where a classifier that guesses lands with probability 99%."))
