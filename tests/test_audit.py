"""Tests for posgeo.audit (the audit of a model's positions) and the ``posgeo`` command line.

The command line is driven end to end in-process through ``posgeo.__main__.main`` on a
small text file and on SST-2 with all-MiniLM-L6-v2, and the numbers of its JSON are checked
against the library's functions recomputed independently. SST-2 needs
``$POSGEO_DATA_DIR`` (CI sets it; locally ``POSGEO_DATA_DIR=/work/shared/data``). RoPE, ALiBi,
RoBERTa-style, GPT-2-style and position-free models are tiny randomly initialised
transformers saved to a temporary folder with the bundled tokenizer: nothing is downloaded.
The steps of posgeo.audit.compute are also run one by one on tiny inputs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posgeo
from posgeo.audit import (
    AuditError,
    AuditReport,
    audit,
    audit_settings,
    plot_audit_heatmap,
    plot_audit_layers,
    plot_audit_maps,
    plot_audit_offsets,
    plot_audit_stress,
)
from posgeo import (
    alibi_encoding,
    classical_mds,
    default_model_path,
    default_tokenizer,
    effective_rank,
    hellinger_matrix,
    layer_stress_table,
    learned_position_table,
    load_corpus,
    load_pretrained,
    monotonicity_violation_rate,
    positional_marginals,
    random_encoding,
    rope_encoding,
    separation_stats,
    stress,
    stress_optimal_mds,
    tokenize,
)
from posgeo.audit import compute as audit_compute
from posgeo.audit import inputs as audit_inputs
from posgeo.audit import report as audit_report
from posgeo.experiments.papers import PAPER_P1
from posgeo.__main__ import build_parser, main

DATA_DIR = os.environ.get("POSGEO_DATA_DIR")
needs_sst2 = pytest.mark.skipif(
    not DATA_DIR or not (Path(DATA_DIR) / "sst2" / "train.parquet").is_file(),
    reason="set POSGEO_DATA_DIR to the data directory (e.g. /work/shared/data) to run the SST-2 audit",
)


# --------------------------------------------------------------------------- fixtures
def corpus_lines(m: int = 160, seed: int = 0) -> list[str]:
    """Sentences whose word classes depend on the position: a corpus with positional geometry."""
    rng = np.random.default_rng(seed)
    subjects = ["the cat", "a dog", "my friend", "the teacher", "our neighbour", "a child"]
    verbs = ["saw", "liked", "found", "followed", "heard", "painted"]
    objects = ["a bird", "the river", "an old film", "the red car", "some music", "a letter"]
    tails = ["in the park", "at noon", "yesterday", "with joy", "after lunch", "near the station", "again"]
    return [
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)} {rng.choice(tails)}"
        for _ in range(m)
    ]


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own result cache: tests neither pollute nor read the user cache."""
    path = tmp_path / "cache"
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(path))
    return path


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "sentences.txt"
    lines = corpus_lines()
    # blank lines are skipped
    path.write_text("\n".join(lines[:80]) + "\n\n  \n" + "\n".join(lines[80:]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def text_report(text_file: Path, tmp_path_factory: pytest.TempPathFactory) -> AuditReport:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSGEO_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return audit(text_file, n_positions=8, progress=False)


def text_geometry(path: Path, n: int) -> np.ndarray:
    """Plug-in Hellinger matrix of a text file, recomputed from scratch."""
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    seqs = tokenize(lines, progress=False)
    return hellinger_matrix(positional_marginals(seqs, n, seqs.vocab_size))


@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled bert-base-uncased tokenizer, saved on its own."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    AutoTokenizer.from_pretrained(str(default_model_path()), local_files_only=True).save_pretrained(folder)
    return folder


def model_folder(root: Path, name: str, config, tokenizer_dir: Path, *, weights: bool) -> Path:
    """A tiny model folder: config (and random weights), plus the tokenizer files."""
    import shutil

    import torch
    from transformers import AutoModel

    folder = root / name
    folder.mkdir()
    if weights:
        torch.manual_seed(0)
        AutoModel.from_config(config).save_pretrained(folder)
    else:
        config.save_pretrained(folder)
    for f in tokenizer_dir.iterdir():
        shutil.copy(f, folder / f.name)
    return folder


# --------------------------------------------------------------------------- end to end
def test_cli_on_a_text_file_matches_the_library(text_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    n = 8
    rc = main(["audit", str(text_file), "--positions", str(n), "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f"report: {out / 'report.html'}" in captured.out
    assert "learned-absolute" in captured.out
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["schema"] == "posgeo-audit/1" and data["posgeo_version"] == posgeo.__version__
    assert data["dataset"]["sequences"] == 160 and data["dataset"]["source"] == "text"

    D = text_geometry(text_file, n)
    np.testing.assert_allclose(np.array(data["corpus"]["hellinger"]), D, atol=1e-12)
    plug = data["stress"]["plug-in"]
    assert plug["PMDS full"]["raw"] < 1e-20
    for k in (1, 2, 3):
        assert plug[f"PMDS k={k}"]["raw"] == pytest.approx(stress(classical_mds(D, k).coords, D), rel=1e-9)
        assert plug[f"SMACOF k={k}"]["raw"] == pytest.approx(stress_optimal_mds(D, k).stress, rel=1e-9)
        assert plug[f"SMACOF k={k}"]["raw"] <= plug[f"PMDS k={k}"]["raw"] + 1e-12
    lam = classical_mds(D).eigenvalues
    assert data["corpus"]["effective_rank"]["plug-in"]["rank_90"] == effective_rank(lam, energy=0.9).rank_at_energy
    assert data["corpus"]["effective_rank"]["plug-in"]["entropy_rank"] == pytest.approx(effective_rank(lam).entropy_rank)

    # MiniLM: our position i is row i + 1 of the table ([CLS] takes row 0)
    assert data["model"]["position_offset"] == 1 and data["model"]["special_tokens_prepended"] == 1
    rows = learned_position_table()[1 : n + 1]
    assert plug["model"]["raw"] == pytest.approx(stress(rows, D), rel=1e-9)
    assert plug["model"]["optimal"] == pytest.approx(stress(rows, D, scale="optimal"), rel=1e-9)
    assert data["monotonicity"]["offset"]["model"] == pytest.approx(monotonicity_violation_rate(rows, progress=False))
    assert data["monotonicity"]["hellinger"]["model"] == pytest.approx(
        monotonicity_violation_rate(rows, reference=D, progress=False)
    )
    assert data["monotonicity"]["offset"]["corpus"] == pytest.approx(monotonicity_violation_rate(distances=D, progress=False))
    R = random_encoding(n, 384, seed=0)
    assert plug["random"]["optimal"] == pytest.approx(stress(R, D, scale="optimal"), rel=1e-9)
    assert data["separation"]["min_dist"] == pytest.approx(separation_stats(rows).min_dist)
    layers = layer_stress_table(load_pretrained(), D, offset=1)
    got = pd.DataFrame.from_dict(data["layers"]["plug-in"], orient="index").astype(float)
    np.testing.assert_allclose(got[["raw", "optimal"]].to_numpy(), layers[["raw", "optimal"]].to_numpy(), rtol=1e-9)
    assert (out / "report.html").stat().st_size > 10_000


@needs_sst2
def test_cli_on_sst2_with_minilm_matches_the_library(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sst2"
    n, m = 16, 2000
    rc = main(["audit", "sst2", "--positions", str(n), "--max-sequences", str(m), "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["command"] == f"posgeo audit sst2 --split train --positions {n} --max-sequences {m}"
    assert data["dataset"]["sequences"] == m and data["dataset"]["text_column"] == "sentence"

    corpus = load_corpus("sst2", "train", max_sequences=m, seed=0, cache=False, progress=False)
    D = hellinger_matrix(positional_marginals(corpus, n, corpus.vocab_size))
    np.testing.assert_allclose(np.array(data["corpus"]["hellinger"]), D, atol=1e-12)
    assert data["corpus"]["reach_last"] == int((corpus.sequences.lengths >= n).sum())
    plug = data["stress"]["plug-in"]
    rows = learned_position_table()[1 : n + 1]
    assert plug["model"]["raw"] == pytest.approx(stress(rows, D), rel=1e-9)
    assert plug["model"]["optimal"] == pytest.approx(stress(rows, D, scale="optimal"), rel=1e-9)
    assert plug["PMDS k=2"]["raw"] == pytest.approx(stress(classical_mds(D, 2).coords, D), rel=1e-9)
    assert data["monotonicity"]["offset"]["model"] == pytest.approx(monotonicity_violation_rate(rows, progress=False))
    assert data["paper"]["monotonicity/pretrained"] == PAPER_P1["monotonicity/pretrained"]
    assert data["paper"]["stress/sst2/rope"] == PAPER_P1["stress/sst2/rope"]  # SST-2 only
    assert data["layers"] is not None and len(data["layers"]["plug-in"]) == 7  # input + 6 layers


def test_json_is_plain_and_complete(text_report: AuditReport) -> None:
    data = text_report.to_dict()
    text = json.dumps(data, allow_nan=False)  # no NaN, no numpy types
    assert json.loads(text) == data
    assert set(data) == {"schema", "posgeo_version", "computed_on", "command", "parameters", "dataset", "model", "corpus",
                         "stress", "separation", "monotonicity", "layers", "paper", "verdict", "intervals", "notes",
                         "random_baseline"}
    assert set(data["random_baseline"]) == {"plug-in", "corrected", "monotonicity"}
    assert data["random_baseline"]["plug-in"]["tables"] == audit_compute.RANDOM_TABLES
    assert data["monotonicity"]["hellinger"] == {"model": pytest.approx(text_report.monotonicity.loc["model", "hellinger"]),
                                                 "random": pytest.approx(text_report.monotonicity.loc["random", "hellinger"])}
    assert "stress/sst2/rope" not in data["paper"]  # P1's encoder stresses are SST-2 numbers
    assert len(data["corpus"]["reach_per_position"]) == 8
    assert text_report.to_json() == text_report.to_json() and text_report.to_json().endswith("}\n")


def test_summary_has_every_headline_and_the_paper_values(text_report: AuditReport) -> None:
    s = text_report.summary()
    assert list(s.columns) == ["value", "P1"] and s.index.names == ["section", "quantity"]
    assert s.loc[("best fit", "PMDS full rank, raw stress"), "value"] == 0.0  # rounding level shown as 0
    assert s.loc[("model", "monotonicity violation rate (offset)"), "P1"] == PAPER_P1["monotonicity/pretrained"]
    assert s.loc[("model", "scale-optimal stress"), "value"] == pytest.approx(
        text_report.stress["plug-in"].loc["model", "optimal"]
    )
    assert s.loc[("layers", "peak layer, raw projected stress"), "P1"] == 3
    assert s["value"].dtype == float


CHART_NAMES = ["heatmap", "spectrum", "offsets", "maps", "stress", "layers"]
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script>", re.S)


def embedded_specs(page: str) -> dict[str, dict]:
    """The Vega-Lite spec of every ``vegaEmbed("#chart-NAME", SPEC, OPTIONS)`` call of a page."""
    specs = {}
    for _, body in SCRIPT.findall(page):
        m = re.match(r'vegaEmbed\("#chart-(\w+)", posgeoFit\(', body)
        if m:
            specs[m.group(1)], _ = json.JSONDecoder().raw_decode(body, m.end())
    return specs


def test_html_is_self_contained(text_report: AuditReport) -> None:
    page = text_report.to_html()
    assert page.startswith("<!DOCTYPE html>")
    scripts = SCRIPT.findall(page)
    assert all(attrs.strip() == "" for attrs, _ in scripts), "inline scripts only, none with src="
    bundles = [body for _, body in scripts if "window.vegaEmbed=" in body]
    assert len(bundles) == 1 and page.index(bundles[0]) < page.index("<body>"), "the Vega bundle, once, in the head"
    assert "BSD-3-Clause" in bundles[0] and "University of Washington Interactive Data Lab" in bundles[0]
    markup = SCRIPT.sub("", page)  # everything but the scripts' code
    assert "http://" not in markup and "https://" not in markup  # no URL of any kind
    for tag in ("<img", "<link", "<iframe", "@import"):
        assert tag not in markup
    assert not re.search(r'(?:src|href)="(?!#|data:)', markup), "only in-page references and data: URIs"
    specs = embedded_specs(page)
    assert list(specs) == CHART_NAMES, "one vegaEmbed call per chart, in the page's order"
    for name, spec in specs.items():
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v5"), name
        assert len(spec["description"]) > 40, f"{name}: no alt text"
        assert f'<div class="chart" id="chart-{name}"></div>' in page
    assert len(set(re.findall(r'\bid="([^"]+)"', markup))) == len(re.findall(r'\bid="([^"]+)"', markup)), "unique ids"
    for needle in (posgeo.__version__, text_report.command.replace("'", "&#x27;"), "How to read this", "0.254"):
        assert needle in page


def test_static_html_has_svg_charts_and_no_script(text_report: AuditReport) -> None:
    page = text_report.to_html(static=True)
    assert "<script" not in page and "<noscript" not in page
    assert "http://" not in page and "https://" not in page  # not even a namespace
    for tag in ("<img", "<link", "<iframe", "@import"):
        assert tag not in page
    assert not re.search(r'(?:src|href)="(?!#|data:)', page), "only in-page references and data: URIs"
    figures = re.findall(r'<figure id="fig-(\w+)"><svg\b([^>]*)>', page)
    assert [name for name, _ in figures] == CHART_NAMES
    assert all('role="img" aria-label="' in attrs for _, attrs in figures), "every SVG has its alt text"
    assert page.count("<svg") == page.count("</svg>") == len(CHART_NAMES)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "ids must be unique across the inline SVGs"
    refs = set(re.findall(r'href="#([^"]+)"', page)) | set(re.findall(r"url\(#([^)]+)\)", page))
    assert refs <= set(ids), f"dangling references: {sorted(refs - set(ids))[:5]}"
    assert "0.254" in page and "Every chart is an inline SVG image." in page


def test_rerun_gives_identical_bytes(text_file: Path, tmp_path: Path) -> None:
    first = main(["audit", str(text_file), "--positions", "8", "--out", str(tmp_path / "a"), "--no-progress"])
    second = main(["audit", str(text_file), "--positions", "8", "--out", str(tmp_path / "b"), "--no-progress", "--no-cache"])
    assert first == second == 0
    for name in ("report.html", "report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # --static: the same numbers, the charts as SVG and no script
    assert main(["audit", str(text_file), "--positions", "8", "--out", str(tmp_path / "c"), "--no-progress", "--static"]) == 0
    assert (tmp_path / "c" / "report.json").read_bytes() == (tmp_path / "a" / "report.json").read_bytes()
    static = (tmp_path / "c" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in static and static.count("<svg") == 6
    assert "<script" in (tmp_path / "a" / "report.html").read_text(encoding="utf-8")


def test_second_run_reads_the_cache(text_file: Path, monkeypatch: pytest.MonkeyPatch, private_cache: Path) -> None:
    first = audit(text_file, n_positions=6, progress=False)
    assert any(p.name.startswith("audit-report-") for p in private_cache.iterdir())

    def boom(*args, **kwargs):
        raise AssertionError("recomputed although the inputs are unchanged")

    monkeypatch.setattr(audit_compute, "compute_report", boom)
    again = audit(text_file, n_positions=6, progress=False)
    assert again.to_json() == first.to_json()
    with pytest.raises(AssertionError, match="recomputed"):
        audit(text_file, n_positions=6, progress=False, cache=False)
    with pytest.raises(AssertionError, match="recomputed"):  # another option is another key
        audit(text_file, n_positions=7, progress=False)


def test_a_changed_file_is_a_new_key(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(corpus_lines(60, seed=1)), encoding="utf-8")
    a = audit(path, n_positions=5, progress=False)
    path.write_text("\n".join(corpus_lines(70, seed=2)), encoding="utf-8")
    b = audit(path, n_positions=5, progress=False)
    assert (a.dataset["sequences"], b.dataset["sequences"]) == (60, 70)


@pytest.mark.slow
def test_progress_bars_follow_the_flag_and_tqdm_disable(text_file: Path, tmp_path: Path) -> None:
    # tqdm reads TQDM_DISABLE when it is imported, so each setting runs in a fresh process
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"} | {"POSGEO_CACHE_DIR": str(tmp_path / "c")}
    cmd = [sys.executable, "-m", "posgeo", "audit", str(text_file), "--positions", "5", "--no-cache", "--out", str(tmp_path / "o")]

    def stderr(extra: list[str], **more: str) -> str:
        proc = subprocess.run(cmd + extra, capture_output=True, text=True, env=env | more, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    assert "posgeo audit" in stderr([]) and "tokenising" in stderr([])
    quiet = stderr(["--no-progress"])
    assert "posgeo audit" not in quiet and "it/s" not in quiet, quiet
    assert "posgeo audit" not in stderr([], TQDM_DISABLE="1")


# --------------------------------------------------------------------------- datasets
def test_parquet_text_column_is_found_or_named(tmp_path: Path) -> None:
    lines = corpus_lines(60)
    path = tmp_path / "d.parquet"
    pd.DataFrame({"idx": range(60), "sentence": lines, "label": 1}).to_parquet(path)
    r = audit(path, n_positions=6, progress=False)
    assert r.dataset["text_column"] == "sentence" and r.dataset["source"] == "parquet"
    pd.DataFrame({"body": lines, "label": 1}).to_parquet(path)
    r = audit(path, column="body", n_positions=6, progress=False)
    assert r.dataset["text_column"] == "body" and r.command.endswith("--column body --positions 6")


def test_missing_column_names_the_available_ones(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"body": corpus_lines(20), "label": 1}).to_parquet(path)
    with pytest.raises(AuditError, match=r"no column 'text'.*\['body', 'label'\].*--column"):
        audit(path, column="text", n_positions=6, progress=False)
    with pytest.raises(AuditError, match=r"cannot tell which column.*\['body', 'label'\].*--column NAME"):
        audit(path, n_positions=6, progress=False)
    with pytest.raises(AuditError, match=r"'label' .* holds int values, not text"):
        audit(path, column="label", n_positions=6, progress=False)
    pd.DataFrame({"text": ["a b c"], "sentence": ["d e f"]}).to_parquet(path)
    with pytest.raises(AuditError, match="cannot tell which column"):
        audit(path, n_positions=6, progress=False)


def test_empty_inputs_are_reported(tmp_path: Path) -> None:
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\n", encoding="utf-8")
    with pytest.raises(AuditError, match="is empty"):
        audit(blank, progress=False)
    empty = tmp_path / "empty.parquet"
    pd.DataFrame({"text": pd.Series([], dtype=str)}).to_parquet(empty)
    with pytest.raises(AuditError, match="is empty"):
        audit(empty, progress=False)


def test_short_sequences_name_the_largest_n_that_works(tmp_path: Path) -> None:
    path = tmp_path / "short.txt"
    lines = corpus_lines(40)
    path.write_text("\n".join(lines), encoding="utf-8")
    lengths = tokenize(lines, progress=False).lengths
    best = int(np.sort(lengths)[::-1][9])  # the 10th longest
    with pytest.raises(AuditError, match=rf"reach position 47 .* is {best}: pass --positions {best}") as info:
        audit(path, n_positions=48, progress=False)
    assert "--positions" in str(info.value)
    assert audit(path, n_positions=best, progress=False).corpus["reach_last"] >= 10
    with pytest.raises(AuditError, match="--positions"):
        audit(path, n_positions=best + 1, progress=False)
    few = tmp_path / "few.txt"
    few.write_text("\n".join(lines[:5]), encoding="utf-8")
    with pytest.raises(AuditError, match="only 5 sequences"):
        audit(few, n_positions=4, progress=False)


def test_bad_dataset_specs(tmp_path: Path, text_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AuditError, match="no such file"):
        audit(tmp_path / "missing.txt", progress=False)
    with pytest.raises(AuditError, match="no such file"):
        audit("data/missing.parquet", progress=False)
    with pytest.raises(AuditError, match="is a directory"):
        audit(tmp_path, progress=False)
    with pytest.raises(AuditError, match="does not apply to the text file"):
        audit(text_file, column="text", progress=False)
    with pytest.raises(TypeError, match="dataset must be a str or a path"):
        audit(3, progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown split"):
        audit("sst2", split="dev", progress=False)
    with pytest.raises(AuditError, match="has the text column 'sentence'"):
        audit("sst2", column="body", progress=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AuditError, match=r"hub is unreachable.*to_parquet.*text file"):
        audit("someone/some-dataset", progress=False)


def test_bad_options(text_file: Path) -> None:
    for n in (2, 0, 4.0, True):
        with pytest.raises(AuditError, match="--positions"):
            audit(text_file, n_positions=n, progress=False)  # type: ignore[arg-type]
    with pytest.raises(AuditError, match="--max-sequences"):
        audit(text_file, max_sequences=0, progress=False)
    with pytest.raises(AuditError, match="mds_dims"):
        audit(text_file, n_positions=5, mds_dims=(6,), progress=False)


def test_max_sequences_subsets_with_the_seed(text_file: Path) -> None:
    a = audit(text_file, n_positions=5, max_sequences=50, progress=False)
    b = audit(text_file, n_positions=5, max_sequences=50, seed=1, progress=False)
    assert a.dataset["sequences"] == b.dataset["sequences"] == 50
    assert not np.allclose(a.hellinger, b.hellinger)


# --------------------------------------------------------------------------- models
def test_model_not_loadable_offline_names_the_fix(text_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AuditError, match=r"hub is unreachable.*pass --model with a local folder.*download"):
        audit(text_file, model="someone/no-such-model", n_positions=5, progress=False)
    with pytest.raises(AuditError, match="does not exist; pass --model with an existing local folder"):
        audit(text_file, model="./no/such/folder", n_positions=5, progress=False)


def test_model_folder_without_config(text_file: Path, tmp_path: Path) -> None:
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(AuditError, match="has no config.json"):
        audit(text_file, model=tmp_path / "empty-model", n_positions=5, progress=False)


def test_more_positions_than_the_table_holds(tmp_path: Path) -> None:
    path = tmp_path / "long.txt"
    words = " ".join(["word"] * 520)
    path.write_text("\n".join(f"{w} {words}" for w in ("alpha", "beta", "gamma") * 4), encoding="utf-8")
    with pytest.raises(AuditError, match=r"512 rows .* row 1, so at most 511 positions fit; pass --positions 511"):
        audit(path, n_positions=515, progress=False)


def test_a_model_folder_without_tokenizer_files_is_refused_naming_them(text_file: Path, tmp_path: Path) -> None:
    """Issue 46, defect 6: transformers builds an empty tokenizer (a vocabulary of 1) for a folder
    without tokenizer files; the audit blamed the dataset ("is empty: it has no tokens")."""
    import torch
    from transformers import AutoModel, GPT2Config

    torch.manual_seed(0)
    AutoModel.from_config(GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=32)).save_pretrained(
        tmp_path / "no-tokenizer")
    with pytest.raises(AuditError, match=r"tokenizer of the model .*no-tokenizer.* is empty .*tokenizer\.json") as err:
        audit(text_file, model=tmp_path / "no-tokenizer", n_positions=5, progress=False)
    assert "dataset" not in str(err.value)


def test_data_errors_come_before_any_weight_is_read(
    text_file: Path, tokenizer_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46, defect 7: the column, the split, the reach of --positions and the table's size are
    checked before the weights are read (a weights loader that fails the test if called), and a model
    folder without weights reports the data error first."""
    from transformers import BertConfig

    def no_weights(*args, **kwargs):
        pytest.fail("the weights were read before the data was checked")

    monkeypatch.setattr(posgeo, "load_pretrained", no_weights)
    parquet = tmp_path / "d.parquet"
    pd.DataFrame({"body": corpus_lines(40)}).to_parquet(parquet)
    with pytest.raises(AuditError, match="has no column 'text'"):
        audit(parquet, column="text", n_positions=5, progress=False)
    with pytest.raises(AuditError, match="cannot tell which column"):
        audit(parquet, n_positions=5, progress=False)
    with pytest.raises((ValueError, FileNotFoundError), match="split"):
        audit("sst2", split="no-such-split", n_positions=5, progress=False, data_dir=DATA_DIR or tmp_path)
    with pytest.raises(AuditError, match=r"reach position 29.*pass --positions"):
        audit(text_file, n_positions=30, progress=False)
    with pytest.raises(AuditError, match=r"512 rows .*so at most 511 positions fit"):
        audit(text_file, n_positions=600, progress=False)
    folder = model_folder(tmp_path, "bert-without-weights", BertConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32), tokenizer_files, weights=False)
    monkeypatch.undo()  # the real loader again: the folder has no weights to read
    with pytest.raises(AuditError, match="has no column 'text'"):
        audit(parquet, column="text", model=folder, n_positions=5, progress=False)
    with pytest.raises(AuditError, match="cannot load the weights"):
        audit(text_file, model=folder, n_positions=5, progress=False)


def test_positions_whose_tables_cannot_fit_are_refused_first(text_file: Path) -> None:
    """Issue 46: the audit's bound on --positions is the one `posgeo count` uses
    (posgeo.validation.check_positions), checked before anything is read."""
    with pytest.raises(AuditError, match=r"n_positions \(--positions\) = 100,000,000 would need .* pass n_positions"):
        audit(text_file, n_positions=10**8, progress=False)


@pytest.mark.slow
def test_a_huge_document_is_audited_in_bounded_memory(tmp_path: Path) -> None:
    """Issue 46, defect 5: one 50 MB line took 7.0 GB in `posgeo audit` (the whole line was
    tokenised, then cut); now a document is tokenised only as far as its first tokens."""
    small, huge = tmp_path / "small.txt", tmp_path / "huge.txt"
    small.write_text("\n".join(corpus_lines(40)) + "\n", encoding="utf-8")
    words = np.array(["the", "cat", "sat", "on", "a", "mat", "today", "with", "joy"])
    line = " ".join(words[np.random.default_rng(0).integers(0, 9, size=10_000_000)])  # about 40 MB
    huge.write_text(line + "\n" + small.read_text(encoding="utf-8"), encoding="utf-8")

    def peak(path: Path) -> tuple[int, int]:
        script = ("import resource; from posgeo.audit import audit; "
                  f"r = audit({str(path)!r}, n_positions=8, intervals=0, progress=False, cache=False); "
                  "print(r.dataset['max_length'], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert out.returncode == 0, out.stderr[-2000:]
        longest, kib = map(int, out.stdout.split()[-2:])
        return longest, kib

    (_, base), (longest, with_huge) = peak(small), peak(huge)
    assert longest == audit_inputs.MAX_DOCUMENT_TOKENS  # the huge line, cut to its first tokens
    # the model and libraries take the same in both runs; the 40 MB line may add its own bytes a few times over
    assert with_huge - base < 500_000, f"the huge line added {(with_huge - base) / 1e6:.2f} GB"


def test_a_device_or_a_pipe_is_not_taken_for_a_missing_file(tmp_path: Path) -> None:
    """Issue 46: /dev/zero or a FIFO given as the dataset (or as --counts) was reported as "no such file"."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for spec, kind in ((fifo, "named pipe"), ("/dev/zero", "character device")):
        with pytest.raises(AuditError, match=f"is a {kind}.*not a regular file"):
            audit(spec, n_positions=5, progress=False)
        with pytest.raises(AuditError, match=f"is a {kind}.*not a regular file"):
            audit(counts=spec, n_positions=5, progress=False)


def test_rope_model_uses_the_mds_chapter_vectors(text_file: Path, tokenizer_files: Path, tmp_path: Path) -> None:
    from transformers import GPTNeoXConfig, LlamaConfig

    n = 6
    llama = LlamaConfig(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        num_hidden_layers=1, intermediate_size=64)
    folder = model_folder(tmp_path, "llama", llama, tokenizer_files, weights=False)
    r = audit(text_file, model=folder, n_positions=n, progress=False)
    assert r.model["positional_kind"] == "rotary" and r.model["model_type"] == "llama"
    np.testing.assert_allclose(r.encoding, rope_encoding(n, 32, head_dim=8))
    D = text_geometry(text_file, n)
    assert r.stress["plug-in"].loc["model", "raw"] == pytest.approx(stress(rope_encoding(n, 32, head_dim=8), D))
    assert r.layers is None and "learned absolute" in r.notes["layers"]
    neox = GPTNeoXConfig(vocab_size=64, hidden_size=32, num_attention_heads=2, num_hidden_layers=1, intermediate_size=64,
                         rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.25})
    folder = model_folder(tmp_path, "neox", neox, tokenizer_files, weights=False)
    r = audit(text_file, model=folder, n_positions=n, progress=False)
    assert r.model["dimension"] == 2 * 4  # 2 heads x (16 x 0.25) rotated dimensions
    np.testing.assert_allclose(r.encoding, rope_encoding(n, 8, head_dim=4, base=500.0))


def test_alibi_model_uses_the_slopes(text_file: Path, tokenizer_files: Path, tmp_path: Path) -> None:
    from transformers import BloomConfig

    folder = model_folder(tmp_path, "bloom", BloomConfig(vocab_size=64, hidden_size=24, n_head=6, n_layer=1),
                          tokenizer_files, weights=False)
    r = audit(text_file, model=folder, n_positions=6, progress=False)
    assert r.model["positional_kind"] == "alibi"
    np.testing.assert_allclose(r.encoding, alibi_encoding(6, 6))
    assert r.stress["plug-in"].loc["model", "optimal"] == pytest.approx(
        stress(alibi_encoding(6, 6), r.hellinger, scale="optimal")
    )


def test_the_input_probe_tells_added_tables_from_attention_side_encodings() -> None:
    from transformers import BertConfig, LlamaConfig

    from posgeo._pretrained import _input_carries_position

    bert = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    llama = LlamaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        num_key_value_heads=2, intermediate_size=32)
    assert _input_carries_position(bert)  # a learned table is added to the token embeddings
    assert not _input_carries_position(llama)  # RoPE rotates inside attention: identical input rows


def test_a_config_that_disowns_an_added_table_is_checked_against_the_code(
    text_file: Path, tokenizer_files: Path, tmp_path: Path
) -> None:
    """BERT's position_embedding_type="none" is honoured by some transformers versions only."""
    from transformers import BertConfig

    from posgeo._pretrained import _input_carries_position

    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, position_embedding_type="none")
    folder = model_folder(tmp_path, "bert-none", config, tokenizer_files, weights=True)
    report = audit(str(text_file), model=str(folder), n_positions=6, progress=False, cache=False)
    if _input_carries_position(config):  # e.g. transformers 5: the table is added anyway
        assert report.model["positional_kind"] == "learned-absolute"
        assert "adds its learned position table anyway" in report.notes["declared"]
        assert report.separation is not None
    else:
        assert report.model["positional_kind"] == "none" and report.separation is None


def test_model_without_positions_is_reported_as_such(
    text_file: Path, tokenizer_files: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import BertConfig

    # A transformers version that honours position_embedding_type="none" (e.g. 4.x)
    import posgeo._pretrained

    monkeypatch.setattr(posgeo._pretrained, "_input_carries_position", lambda model: False)
    folder = model_folder(tmp_path, "nope", BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1,
                                                       num_attention_heads=2, intermediate_size=32,
                                                       position_embedding_type="none"),
                          tokenizer_files, weights=False)
    out = tmp_path / "out"
    rc = main(["audit", str(text_file), "--model", str(folder), "--positions", "6", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "note (model): no positional signal" in captured.out
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["model"]["positional_kind"] == "none"
    assert data["stress"]["plug-in"]["model"] is None and data["separation"] is None and data["layers"] is None
    assert data["monotonicity"]["offset"]["model"] is None
    assert "no positional signal" in data["notes"]["model"]
    assert data["stress"]["plug-in"]["PMDS k=1"]["raw"] > 0  # the corpus part is still there
    assert "no positional signal" in (out / "report.html").read_text(encoding="utf-8")


def test_roberta_positions_start_after_the_padding_index(text_file: Path, tokenizer_files: Path, tmp_path: Path) -> None:
    from transformers import RobertaConfig

    cfg = RobertaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=40, pad_token_id=1)
    folder = model_folder(tmp_path, "roberta", cfg, tokenizer_files, weights=True)
    n = 6
    r = audit(text_file, model=folder, n_positions=n, progress=False)
    # [CLS] before the text (1) + RoBERTa's position ids starting at padding_idx + 1 (2)
    assert (r.model["special_tokens_prepended"], r.model["position_id_shift"], r.model["position_offset"]) == (1, 2, 3)
    table = learned_position_table(load_pretrained(folder))
    np.testing.assert_array_equal(r.encoding, table[3 : 3 + n])
    assert r.layers is not None and list(r.layers["plug-in"].index) == [0, 1, 2]
    np.testing.assert_allclose(r.layers["plug-in"]["raw"], layer_stress_table(load_pretrained(folder), r.hellinger, offset=3)["raw"])
    long = tmp_path / "long.txt"  # sequences that reach position 37: the data passes, the table's rows do not
    long.write_text("\n".join(" ".join(corpus_lines(4, seed=k)) for k in range(12)), encoding="utf-8")
    with pytest.raises(AuditError, match="at most 37 positions fit; pass --positions 37"):
        audit(long, model=folder, n_positions=38, progress=False, min_reach=2)


def test_gpt2_style_model_without_prefix_and_without_layers(text_file: Path, tokenizer_files: Path, tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import GPT2Config, PreTrainedTokenizerFast

    backend = Tokenizer.from_file(str(tokenizer_files / "tokenizer.json"))
    backend.post_processor = None  # no [CLS]/[SEP]: a tokenizer that prepends nothing, like GPT-2's
    folder = tmp_path / "gpt2"
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    AutoModel.from_config(GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=32)).save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)
    r = audit(text_file, model=folder, n_positions=6, progress=False)
    assert (r.model["positional_kind"], r.model["position_offset"]) == ("learned-absolute", 0)
    np.testing.assert_array_equal(r.encoding, learned_position_table(load_pretrained(folder))[:6])
    assert r.layers is None and "BERT-architecture" in r.notes["layers"]


def test_position_shift_and_prefix_helpers() -> None:
    assert audit_compute._position_shift(SimpleNamespace(padding_idx=None)) == 0
    assert audit_compute._position_shift(SimpleNamespace(padding_idx=1)) == 2  # RoBERTa
    assert audit_compute._position_shift(SimpleNamespace(padding_idx=None, offset=2)) == 2  # OPT
    assert audit_compute._special_prefix(default_tokenizer()) == 1
    cfg = SimpleNamespace(rope_parameters={"full_attention": {"rope_theta": 1e6, "rope_type": "default"}})
    assert audit_compute._rope_parameters(cfg) == (1e6, 1.0, "default")
    cfg = SimpleNamespace(rope_parameters={"rope_theta": 5e5, "rope_type": "llama3", "partial_rotary_factor": 0.5})
    assert audit_compute._rope_parameters(cfg) == (5e5, 0.5, "llama3")


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(0, 60), min_size=1, max_size=80), n=st.integers(3, 70), min_reach=st.integers(2, 12))
def test_too_short_suggests_the_largest_workable_n(lengths: list[int], n: int, min_reach: int) -> None:
    arr = np.array(lengths)
    err = audit_compute._too_short(arr, n, min_reach, "it")
    assert isinstance(err, AuditError)
    found = re.search(r"pass --positions (\d+)", str(err))
    if len(lengths) < min_reach or np.sort(arr)[::-1][min_reach - 1] < 3:
        assert found is None  # nothing works: the message says what is missing instead
        return
    best = int(found.group(1))
    assert (arr >= best).sum() >= min_reach and (arr >= best + 1).sum() < min_reach


@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
              st.text(max_size=5), st.builds(np.float64, st.floats()), st.builds(np.int64, st.integers(-99, 99))),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=10,
))
def test_plain_values_are_strict_json(value) -> None:
    text = json.dumps(audit_report._plain(value), allow_nan=False)
    assert isinstance(json.loads(text), (type(None), bool, int, float, str, list, dict))


# --------------------------------------------------------------------------- the steps, one by one
def _config_only(config, kind: str) -> audit_inputs.LoadedModel:
    """A model known by its config and the bundled tokenizer only (no weights)."""
    return audit_inputs.LoadedModel(ref=audit_inputs.resolve_model(None), config=config,
                                    tokenizer=default_tokenizer(), module=None, kind=kind)


def test_position_vectors_of_each_kind() -> None:
    import dataclasses

    from transformers import BertConfig, BloomConfig, LlamaConfig

    llama = LlamaConfig(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        num_hidden_layers=1, intermediate_size=64)
    step = audit_compute.position_vectors(_config_only(llama, "rotary"), n_positions=5)
    assert isinstance(step, audit_compute.ModelStep) and step.notes == {}
    np.testing.assert_allclose(step.vectors, rope_encoding(5, 32, head_dim=8))
    assert (step.info["dimension"], step.info["position_offset"], step.width) == (32, 1, 32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.vectors = None  # type: ignore[misc]
    bloom = BloomConfig(vocab_size=64, hidden_size=24, n_head=6, n_layer=1)
    step = audit_compute.position_vectors(_config_only(bloom, "alibi"), n_positions=5)
    np.testing.assert_allclose(step.vectors, alibi_encoding(5, 6))
    bert = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    for kind, note in (("none", "no positional signal"), ("unknown", "cannot tell how this model")):
        step = audit_compute.position_vectors(_config_only(bert, kind), n_positions=5)
        assert step.vectors is None and note in step.notes["model"]
        assert step.width == 16  # the baselines fall back to the hidden size
    assert list(step.info) == ["model_type", "positional_kind", "encoding", "position_offset",
                               "special_tokens_prepended", "position_id_shift", "dimension", "hidden_size",
                               "n_heads", "head_dim", "n_layers", "table_rows"]


def test_model_step_reads_the_rows_after_cls() -> None:
    step = audit_compute.model_step(audit_inputs.resolve_model(None), n_positions=4)
    assert isinstance(step, audit_compute.ModelStep) and step.loaded.kind == "learned-absolute"
    np.testing.assert_array_equal(step.vectors, learned_position_table()[1:5])
    assert (step.info["table_rows"], step.info["position_id_shift"], step.width) == (512, 0, 384)


def test_data_step_tokenises_and_checks_the_reach(text_file: Path) -> None:
    ds = audit_inputs.resolve_dataset(text_file, split="train", column=None, data_dir=None)
    model = _config_only(None, "none")
    options = dict(min_reach=10, split="train", column=None, data_dir=None, max_sequences=None, seed=0,
                   cache=False, progress=False)
    step = audit_compute.data_step(ds, model, n_positions=8, **options)
    assert isinstance(step, audit_compute.DataStep)
    assert step.dataset["sequences"] == len(step.corpus) == 160 and step.dataset["source"] == "text"
    assert step.dataset["tokenizer"] == model.ref.label and step.dataset["vocab_size"] == 30522
    with pytest.raises(AuditError, match=r"reach position 99 .* pass --positions"):
        audit_compute.data_step(ds, model, n_positions=100, **options)


def test_geometry_step_on_a_synthetic_corpus() -> None:
    corpus = load_corpus("synthetic", n_sequences=300, n_positions=8, vocab_size=16)
    step = audit_compute.geometry_step(corpus, n_positions=6, seed=0, cache=False, name="synthetic")
    assert isinstance(step, audit_compute.GeometryStep)
    assert step.geometry.distances.shape == (6, 6) and step.numbers["n_positions"] == 6
    assert step.corrected and step.corrected_distances is step.geometry.hybrid
    assert step.numbers["reach_last"] == 300 and step.notes == {}
    flat = posgeo.Corpus(name="flat", split="-", sequences=posgeo.Sequences.from_list([[3, 3, 3, 3]] * 20, vocab_size=5),
                         labels=None, vocab_size=5, description="one token everywhere")
    with pytest.raises(AuditError, match="same token distribution"):
        audit_compute.geometry_step(flat, n_positions=4, seed=0, cache=False, name="flat")


def test_stress_step_with_and_without_vectors() -> None:
    D = hellinger_matrix(np.eye(5) * 0.5 + 0.1)
    bare = audit_compute.stress_step(D, None, None, n_positions=5, width=7, seed=0, mds_dims=(1, 2))
    assert isinstance(bare, audit_compute.StressStep)
    assert "model" not in bare.stress["plug-in"].index and bare.stress["corrected"] is None
    assert bare.separation is None and np.isnan(bare.monotonicity.loc["model", "offset"])
    assert bare.baselines["sinusoidal"].shape == (5, 8) and bare.baselines["random"].shape == (5, 7)
    P = random_encoding(5, 7, seed=3)
    step = audit_compute.stress_step(D, D, P, n_positions=5, width=7, seed=0, mds_dims=(1, 2))
    assert step.stress["plug-in"].loc["model", "raw"] == pytest.approx(stress(P, D))
    assert step.stress["corrected"] is not None and step.separation["min_dist"] == pytest.approx(separation_stats(P).min_dist)


def test_layers_step_applies_to_learned_tables_only() -> None:
    D = hellinger_matrix(np.eye(4) * 0.5 + 0.125)  # rows sum to 1
    minilm = audit_compute.model_step(audit_inputs.resolve_model(None), n_positions=4)
    step = audit_compute.layers_step(minilm, D, D)
    assert isinstance(step, audit_compute.LayersStep) and step.notes == {}
    assert list(step.layers) == ["plug-in", "corrected"] and list(step.layers["plug-in"].index) == list(range(7))
    none = audit_compute.ModelStep(loaded=minilm.loaded, vectors=None, info=minilm.info, notes={})
    step = audit_compute.layers_step(none, D, None)
    assert step.layers is None and step.notes == {"layers": "no position vectors, so no per-layer projection"}


def test_the_steps_compose_into_the_report(text_file: Path, text_report: AuditReport) -> None:
    ds = audit_inputs.resolve_dataset(text_file, split="train", column=None, data_dir=None)
    model = audit_compute.model_step(audit_inputs.resolve_model(None), n_positions=8)
    data = audit_compute.data_step(ds, model.loaded, n_positions=8, min_reach=10, split="train", column=None,
                                   data_dir=None, max_sequences=None, seed=0, cache=False, progress=False)
    geometry = audit_compute.geometry_step(data.corpus, n_positions=8, seed=0, cache=False, name=ds.spec)
    assert data.dataset == text_report.dataset and geometry.numbers == text_report.corpus
    np.testing.assert_array_equal(geometry.geometry.distances, text_report.hellinger)
    np.testing.assert_array_equal(model.vectors, text_report.encoding)
    params = text_report.parameters
    assert params == audit_inputs.AuditParameters(**{**params, "mds_dims": tuple(params["mds_dims"])}).as_dict()


def test_check_parameters_normalises_the_dimensions() -> None:
    dims = audit_inputs.check_parameters(n_positions=8, max_sequences=None, seed=0, min_reach=10,
                                         mds_dims=[np.int64(1), 3], split="train", column=None)
    assert dims == (1, 3) and all(type(k) is int for k in dims)
    with pytest.raises(AuditError, match="--split train"):
        audit_inputs.check_parameters(n_positions=8, max_sequences=None, seed=0, min_reach=10, mds_dims=[1],
                                      split="", column=None)
    with pytest.raises(TypeError, match="seed must be an int"):
        audit_inputs.check_parameters(n_positions=8, max_sequences=None, seed=0.5, min_reach=10, mds_dims=[1],
                                      split="train", column=None)


# --------------------------------------------------------------------------- charts, settings
def chart_rows(spec: dict) -> list[dict]:
    """Every data row of a chart spec (Altair puts them in ``datasets``)."""
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def marks(spec: dict) -> list[str]:
    """The mark types of a (layered / concatenated) spec, depth first."""
    if "mark" in spec:
        mark = spec["mark"]
        return [mark if isinstance(mark, str) else mark["type"]]
    return [m for key in ("layer", "concat", "hconcat", "vconcat") for part in spec.get(key, []) for m in marks(part)]


def test_plot_functions_return_altair_charts(text_report: AuditReport) -> None:
    import altair as alt

    r = text_report
    n = r.parameters["n_positions"]
    charts = {"heatmap": plot_audit_heatmap(r), "spectrum": audit_report._plot_spectrum(r),
              "offsets": plot_audit_offsets(r), "maps": plot_audit_maps(r), "stress": plot_audit_stress(r),
              "layers": plot_audit_layers(r)}
    specs = {}
    for name, chart in charts.items():
        assert isinstance(chart, alt.TopLevelMixin), name
        specs[name] = chart.to_dict()
        assert len(specs[name]["description"]) > 40, f"{name}: no alt text"
    # heatmaps: two panels of n x n cells on one colour scale with a colour bar; the diagonal is 0
    heat = specs["heatmap"]
    assert marks(heat) == ["rect", "rect"] and heat["resolve"]["scale"]["color"] == "shared"
    for panel in heat["concat"]:
        assert panel["encoding"]["color"]["field"] == "value" and panel["encoding"]["color"]["legend"]["type"] == "gradient"
        assert "stroke" not in panel["encoding"] and any(t["field"] == "value" for t in panel["encoding"]["tooltip"])
        values = panel["data"]["values"][0]["v"]
        assert len(values) == n * n and values[0] == 0
    plug_values = heat["concat"][0]["data"]["values"][0]["v"]
    assert plug_values[1] == pytest.approx(r.hellinger[0, 1], abs=1e-3)
    # distance by offset: bands, lines and tooltip points; the corpus curves and the rescaled model
    off = specs["offsets"]
    assert sorted(marks(off)) == ["area", "line", "point"]
    curves = {row["curve"] for row in chart_rows(off)}
    assert {"corpus, plug-in", "corpus, noise-corrected"} < curves and any(c.startswith("model (") for c in curves)
    first = next(row for row in chart_rows(off) if row["curve"] == "corpus, plug-in" and row["offset"] == 1)
    assert first["mean"] == pytest.approx(float(np.diagonal(r.hellinger, 1).mean()))
    line = next(layer for layer in off["layer"] if marks(layer) == ["line"])
    assert line["encoding"]["color"]["scale"]["range"][:2] == [posgeo.series_colour("plug-in"),
                                                               posgeo.series_colour("corrected")]
    # maps: corpus and model panels, points coloured by position on one colour bar, joined in order
    maps = specs["maps"]
    assert marks(maps) == ["line", "circle", "text"] * 2
    assert maps["concat"][0]["layer"][1]["encoding"]["color"]["field"] == "position"
    assert maps["concat"][0]["layer"][0]["encoding"]["order"]["field"] == "position"
    assert {row["position"] for row in chart_rows(maps)} == set(range(n))
    # stress: bars by encoding and target, error bars where the report has intervals
    st_spec = specs["stress"]
    assert marks(st_spec)[0] == "bar" and st_spec["layer"][0]["encoding"]["color"]["field"] == "target"
    rows = chart_rows(st_spec)
    model = next(row for row in rows if row["encoding"] == "model" and row["target"] == "corrected")
    assert model["stress"] == pytest.approx(r.stress["corrected"].loc["model", "optimal"])
    assert "PMDS full" not in {row["encoding"] for row in rows}
    if r.intervals is not None:
        assert marks(st_spec) == ["bar", "rule"]
        assert model["low"] == pytest.approx(r.intervals.loc["model", "low"])
    # layers: scale-optimal and raw projected stress, one line per target
    lay = specs["layers"]
    assert sorted(marks(lay)) == ["line", "line", "point", "point"]
    assert {row["target"] for row in chart_rows(lay)} == set(r.layers)
    assert {row["layer"] for row in chart_rows(lay)} == set(r.layers["plug-in"].index)
    # spectra: one legend with the 99% reference (dotted) in both panels' scales
    spec = specs["spectrum"]
    domains = [next(layer for layer in part["layer"] if marks(layer) == ["line"])["encoding"]["color"]["scale"]["domain"]
               for part in spec["concat"]]
    assert domains[0] == domains[1] and "99% reference" in domains[0]


def test_plot_layers_without_layers_raises(text_report: AuditReport) -> None:
    import dataclasses

    bare = dataclasses.replace(text_report, layers=None, notes={"layers": "none here"})
    with pytest.raises(ValueError, match="none here"):
        plot_audit_layers(bare)


def test_audit_settings_profiles() -> None:
    small, full = audit_settings("small"), audit_settings("full")
    assert (small.dataset, small.n_positions, small.model) == ("sst2", 48, None)
    assert full.model == "bert-base-uncased"
    with pytest.raises(ValueError):
        audit_settings("huge")


def test_write_refuses_a_file_as_out(text_report: AuditReport, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(AuditError, match="is a file"):
        text_report.write(target)
    # issue 46: under /proc os.access says yes (to root), and the write failed with a raw errno after the run
    with pytest.raises(AuditError, match=r"--out /proc/posgeo-x: cannot create files in /proc"):
        text_report.output_paths("/proc/posgeo-x")
    html, js = text_report.write(tmp_path / "new" / "dir")
    assert html.name == "report.html" and js.name == "report.json" and js.read_text().startswith("{")


# --------------------------------------------------------------------------- command line
def test_cli_errors_are_one_line_with_status_2(tmp_path: Path, capsys) -> None:
    assert main(["audit", str(tmp_path / "missing.txt"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posgeo audit: error: no such file") and err.count("\n") == 1 and "Traceback" not in err
    path = tmp_path / "d.parquet"
    pd.DataFrame({"body": ["a b c"] * 20}).to_parquet(path)
    assert main(["audit", str(path), "--no-progress"]) == 2
    assert "pass --column NAME" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "missing.txt"), "--out", "/proc/posgeo-x", "--no-progress"]) == 2
    assert "cannot create files in /proc" in capsys.readouterr().err  # before the dataset: nothing is computed
    assert main(["audit", str(path), "--positions", "x"]) == 2  # argparse usage error
    assert "invalid int value" in capsys.readouterr().err
    assert main([]) == 2
    assert "audit" in capsys.readouterr().err


def test_cli_help(capsys) -> None:
    assert main(["--help"]) == 0
    assert "audit" in capsys.readouterr().out
    assert main(["audit", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("DATASET", "--split", "--column", "--model", "--positions", "--max-sequences", "--data-dir",
                   "--out", "--static", "--no-cache", "--no-progress", "POSGEO_CACHE_DIR"):
        assert option in text
    args = build_parser().parse_args(["audit", "x.txt", "--no-cache", "--max-sequences", "9"])
    assert (args.no_cache, args.max_sequences, args.split, args.static) == (True, 9, "train", False)


def test_python_dash_m_posgeo(tmp_path: Path) -> None:
    env = {**os.environ, "POSGEO_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "posgeo", "audit", "--help"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0 and "DATASET" in proc.stdout and "--positions" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "posgeo", "audit", str(tmp_path / "missing.txt"), "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("posgeo audit: error: no such file") and proc.stderr.count("\n") == 1
    script = Path(sys.executable).with_name("posgeo")
    if script.is_file():  # the console script of `pip install -e companion`
        proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, timeout=120, check=False)
        assert proc.returncode == 0 and "audit" in proc.stdout


def test_verdict_judges_the_model_against_order_free_baselines(text_report: AuditReport) -> None:
    v = text_report.verdict()
    noise = text_report.corpus["noise_share"]
    assert v["target"] == ("corrected" if noise > 0.5 and text_report.stress.get("corrected") is not None else "plug-in")
    assert (noise > 0.5) == any("Sampling noise" in w for w in v["warnings"])
    names = [c["baseline"] for c in v["comparisons"]]
    assert names == ["random vectors", "sinusoidal vectors", "the regular simplex (no order)"]
    rnd, *others = v["comparisons"]
    row = text_report.random.loc[v["target"]]  # against the spread of the random tables, not one draw
    assert (rnd["low"], rnd["high"], rnd["stress"]) == (row["low"], row["high"], row["median"])
    assert rnd["verdict"] == ("fit better than" if row["margin high"] < 0 else
                              "fit worse than" if row["margin low"] > 0 else "fit no better than")
    for c in others:
        rel = (c["stress"] - c["model"]) / c["stress"]
        expected = "fit better than" if rel > 0.05 else ("fit worse than" if rel < -0.05 else "fit no better than")
        assert c["verdict"] == expected
    assert 0 < v["order"]["p"] <= 1 and len(v["sentences"]) == 4
    assert text_report.to_dict()["verdict"] == json.loads(json.dumps(v))
    html = text_report.to_html()
    assert html.index("<h2>Verdict</h2>") < html.index("<h2>At a glance</h2>")



def test_intervals_are_the_library_s_and_drive_the_verdict(text_report: AuditReport) -> None:
    """The report's corrected-stress intervals are posgeo.stress_intervals of the hybrid
    half-samples, and the verdict's words follow the paired intervals."""
    data = text_report.to_dict()
    if data["intervals"] is None:
        pytest.skip(f"no intervals for this corpus: {text_report.notes.get('intervals')}")
    iv = text_report.intervals
    assert list(iv.index)[0] == "regular simplex" and "model" in iv.index
    assert (iv["low"] <= iv["stress"]).all() and (iv["stress"] <= iv["high"]).all()
    corrected = text_report.stress["corrected"]
    assert iv.loc["model", "stress"] == pytest.approx(corrected.loc["model", "optimal"], rel=1e-9)
    v = text_report.verdict()
    if v["target"] == "corrected":
        paired = {c["baseline"]: c["verdict"] for c in v["comparisons"]}
        d = text_report.differences
        row = d[((d["better"] == "model") & (d["worse"] == "sinusoidal")) | ((d["worse"] == "model") & (d["better"] == "sinusoidal"))]
        expect = ("fit no better than" if not row["separated"].iloc[0]
                  else "fit better than" if row["better"].iloc[0] == "model" else "fit worse than")
        assert paired["sinusoidal vectors"] == expect


def test_intervals_are_widened_by_the_grouped_matched_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    import posgeo as pg
    from posgeo.audit import compute

    corpus = pg.load_corpus("synthetic", n_sequences=400, n_positions=8, vocab_size=16)
    enc = {"sinusoidal": pg.sinusoidal_encoding(6, 8), "random": pg.random_encoding(6, 8, seed=0)}
    step = compute.intervals_step(corpus, enc, n_positions=6, n_boot=4, seed=0)
    groups = pg.overlap_groups(corpus)
    boot = pg.bootstrap_geometry(corpus, 6, estimator="hybrid", n_boot=4, groups=groups, seed=0, progress=False)
    wide = boot.widened(pg.matched_hellinger_matrix(corpus, 6, corpus.vocab_size, seed=0, groups=groups))
    expected = pg.stress_intervals(wide, enc, n_permutations=100, seed=0)
    pd.testing.assert_frame_equal(step.stress, expected)
    plain = pg.stress_intervals(boot, enc, n_permutations=100, seed=0)
    assert ((step.stress["high"] - step.stress["low"]) >= (plain["high"] - plain["low"]) - 1e-12).all()
    assert list(step.notes) == ["reference"] and "matched" in step.notes["reference"]

    def fails(*args, **kwargs):  # fault injection: the matched estimate cannot be computed
        raise ValueError("position 5 is reached by fewer than 2 sequences")

    monkeypatch.setattr(compute, "matched_hellinger_matrix", fails)
    kept = compute.intervals_step(corpus, enc, n_positions=6, n_boot=4, seed=0)
    pd.testing.assert_frame_equal(kept.stress, plain)  # the sampling intervals are kept
    assert "not widened" in kept.notes["intervals"] and "fewer than 2" in kept.notes["intervals"]


def test_intervals_of_a_nested_corpus_are_widened_by_the_jackknife_over_its_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus in NESTED_SPLITS (SST-2's training split) is widened by the jackknifed hybrid
    over blocks of its overlap groups, chapter 3's best reference for nested phrases."""
    import posgeo as pg
    from posgeo.audit import compute

    corpus = pg.load_corpus("synthetic", n_sequences=400, n_positions=8, vocab_size=16)
    monkeypatch.setattr(compute, "NESTED_SPLITS", frozenset({(corpus.name, corpus.split)}))
    enc = {"sinusoidal": pg.sinusoidal_encoding(6, 8)}
    step = compute.intervals_step(corpus, enc, n_positions=6, n_boot=4, seed=0)
    groups = pg.overlap_groups(corpus)
    boot = pg.bootstrap_geometry(corpus, 6, estimator="hybrid", n_boot=4, groups=groups, seed=0, progress=False)
    jackknife = pg.hybrid_hellinger_matrix(corpus, 6, corpus.vocab_size, split="jackknife", groups=groups, seed=0)
    pd.testing.assert_frame_equal(step.stress, pg.stress_intervals(boot.widened(jackknife), enc, n_permutations=100, seed=0))
    assert "jackknife" in step.notes["reference"]


def test_intervals_option_is_checked_and_can_be_switched_off(tmp_path) -> None:
    from posgeo.audit import audit

    f = tmp_path / "lines.txt"
    f.write_text("\n".join(["the cat sat on the mat today", "a dog ran in the park at noon"] * 20))
    r = audit(f, n_positions=5, progress=False, cache=False, intervals=0)
    assert r.intervals is None and r.to_dict()["intervals"] is None and "--intervals 0" in r.command
    with pytest.raises(ValueError, match="intervals"):
        audit(f, n_positions=5, progress=False, cache=False, intervals=1)
    with pytest.raises((TypeError, ValueError), match="intervals"):
        audit(f, n_positions=5, progress=False, cache=False, intervals=-3)


# --------------------------------------------------------------------------- the random baseline
def test_random_tables_are_unit_distance_rows_of_their_own_gaussian_stream() -> None:
    E = audit_compute.random_tables(7, 5, seed=3, n_tables=60)
    assert E.shape == (60, 21) and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1, atol=1e-6)
    rng = np.random.default_rng([3, 0x52414E44])
    first = posgeo.pairwise_distances(rng.standard_normal((7, 5)))[np.triu_indices(7, 1)]
    np.testing.assert_allclose(E[0], first / np.linalg.norm(first), rtol=1e-6)
    single = posgeo.pairwise_distances(random_encoding(7, 5, seed=3))[np.triu_indices(7, 1)]
    assert not np.allclose(E[0], single / np.linalg.norm(single))  # not the table shown as "random"
    D = posgeo.pairwise_distances(np.arange(7.0)[:, None] ** 0.5)
    s = audit_compute.random_table_stresses(E, D)
    expected = [stress(rng.standard_normal((7, 5)), D, scale="optimal") for _ in range(2)]
    np.testing.assert_allclose(s[1:3], expected, atol=1e-6)
    assert audit_compute.random_tables(7, 5, seed=3, n_tables=10).shape[0] == 50  # never fewer than 50
    assert np.isnan(audit_compute.random_table_stresses(E, np.zeros((7, 7)))).all()


def test_the_random_baseline_is_the_spread_of_the_tables(text_report: AuditReport) -> None:
    r = text_report
    n, width = r.parameters["n_positions"], r.model["dimension"]
    rows = audit_compute.random_tables(n, width, seed=r.parameters["seed"])
    for target, D in (("plug-in", r.hellinger), ("corrected", r.hellinger_corrected)):
        theirs = audit_compute.random_table_stresses(rows, D)
        row = r.random.loc[target]
        assert row["tables"] == len(theirs) == audit_compute.RANDOM_TABLES
        assert (row["low"], row["high"]) == pytest.approx(tuple(np.quantile(theirs, [0.025, 0.975])))
        assert row["median"] == pytest.approx(np.median(theirs))
        assert row["model"] == pytest.approx(r.stress[target].loc["model", "optimal"], abs=1e-9)
        assert row["share below"] == pytest.approx(np.mean(theirs < row["model"]))
        if target == "corrected" and r.intervals is not None:  # the sampling interval only widens the margins
            assert row["margin high"] >= row["model"] - row["low"] - 1e-12
            assert row["margin low"] <= row["model"] - row["high"] + 1e-12
        else:
            assert (row["margin high"], row["margin low"]) == pytest.approx((row["model"] - row["low"], row["model"] - row["high"]))
    rates = [monotonicity_violation_rate(distances=pairwise_square(e.astype(np.float64)), progress=False) for e in rows[:20]]
    assert r.monotonicity.loc["random", "offset"] == pytest.approx(np.mean(rates))
    assert r.random_monotonicity["offset"] == pytest.approx((min(rates), max(rates)))
    assert "95% of them" in r.verdict()["sentences"][0] and "How to read this.</strong> Random vectors are not one draw" in r.to_html()


def pairwise_square(tri: np.ndarray) -> np.ndarray:
    n = int((1 + np.sqrt(1 + 8 * tri.size)) / 2)
    M = np.zeros((n, n))
    M[np.triu_indices(n, 1)] = tri
    return M + M.T


def noisy_lines(m: int, seed: int = 0, drift: float = 0.6) -> list[str]:
    """Lines of 40 common words whose distribution drifts slowly with the position (a Zipf law
    mixed with its reverse, the mixture's weight growing by ``drift`` over the line): a corpus
    with a positional geometry (a line) whose plug-in distances are mostly sampling noise, like
    the issue's 300 IMDB reviews."""
    rng = np.random.default_rng(seed)
    words = ("time people year way day man thing woman life child world school state family student group "
             "country problem hand part place case week company system program question work government number "
             "night point home water room mother area money story fact month lot right study book eye job word "
             "business issue side kind head house service friend father power hour game line end member law car "
             "city community name president team minute idea kid body information back parent face others level "
             "office door health person art war history party result change morning reason research girl guy "
             "moment air teacher force education").split()
    p = 1 / np.arange(1, len(words) + 1)
    p /= p.sum()
    w = drift * np.arange(40)[:, None] / 39
    P = (1 - w) * p + w * p[::-1]  # (position, word)
    cum = P.cumsum(axis=1)
    draws = (rng.random((m, 40, 1)) > cum[None]).sum(axis=2).clip(0, len(words) - 1)
    return [" ".join(words[k] for k in row) for row in draws]


def gpt2_folder(root: Path, tokenizer_files: Path, seed: int, table: np.ndarray | None = None) -> Path:
    """A GPT-2-style model (no special tokens prepended) whose position table is i.i.d. N(0, 0.02)
    (GPT-2's initialisation, drawn with ``seed``) or ``table``."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel, GPT2Config, PreTrainedTokenizerFast

    folder = root / f"gpt2-{seed}"
    torch.manual_seed(seed)
    model = AutoModel.from_config(GPT2Config(vocab_size=64, n_embd=64, n_layer=1, n_head=2, n_positions=64))
    if table is not None:
        with torch.no_grad():
            model.wpe.weight[: table.shape[0]] = torch.as_tensor(table, dtype=torch.float32)
    model.save_pretrained(folder)
    backend = Tokenizer.from_file(str(tokenizer_files / "tokenizer.json"))
    backend.post_processor = None
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_a_random_table_is_rarely_called_better_than_random_vectors(tokenizer_files: Path, tmp_path: Path) -> None:
    """Issue 46, defect 1: a GPT-2 table of i.i.d. N(0, 0.02) entries was called "better than random
    vectors" for 5 of 14 seeds (and "worse" for 1), because the interval covered the corpus sampling
    but not the draw of the one random baseline. Over 40 tables and seeds, "better" may come at most
    4 times (the rule's rate is at most 2.5%), and "worse" as rarely."""
    data = tmp_path / "noisy.txt"
    data.write_text("\n".join(noisy_lines(300)), encoding="utf-8")
    words = []
    for seed in range(40):
        r = audit(data, model=gpt2_folder(tmp_path, tokenizer_files, seed), n_positions=32, seed=seed, progress=False)
        assert r.verdict()["target"] == "corrected" and r.intervals is not None  # the issue's case: intervals
        words.append(r.verdict()["comparisons"][0]["verdict"])
    assert words.count("fit better than") <= 4 and words.count("fit worse than") <= 4, words


needs_imdb = pytest.mark.skipif(
    not DATA_DIR or not (Path(DATA_DIR) / "imdb" / "test.parquet").is_file(),
    reason="set POSGEO_DATA_DIR to the data directory (e.g. /work/shared/data) to run the IMDB audit",
)


@pytest.mark.slow
@needs_imdb
def test_the_issue_s_random_gpt2_on_imdb_is_no_better_than_random_vectors(tokenizer_files: Path, tmp_path: Path) -> None:
    """Issue 46's reproduction as it was reported: a 2-layer GPT-2 (width 768) with random weights,
    audited on 300 IMDB test reviews at 32 positions with --seed 0..13, was called better than random
    vectors 5 times and worse once; it must say "no better" at least 12 times of 14."""
    import torch
    from transformers import AutoModel, GPT2Config

    folder = gpt2_folder(tmp_path, tokenizer_files, 0)
    torch.manual_seed(0)
    AutoModel.from_config(GPT2Config(vocab_size=64, n_embd=768, n_layer=2, n_head=12)).save_pretrained(folder)
    words = [audit("imdb", split="test", model=folder, n_positions=32, max_sequences=300, seed=seed, data_dir=DATA_DIR,
                   progress=False).verdict()["comparisons"][0]["verdict"] for seed in range(14)]
    assert words.count("fit no better than") >= 12, words


def test_a_table_that_follows_the_corpus_is_still_called_better(tokenizer_files: Path, tmp_path: Path) -> None:
    """The calibrated rule keeps its power: a table built from the corpus geometry itself (classical
    MDS of its corrected distances, in 16 of the model's 64 dimensions, plus noise) fits better than
    random vectors, as it did under the old rule."""
    data = tmp_path / "noisy.txt"
    data.write_text("\n".join(noisy_lines(300)), encoding="utf-8")
    first = audit(data, model=gpt2_folder(tmp_path, tokenizer_files, 0), n_positions=32, progress=False)
    X = classical_mds(first.hellinger_corrected, 16).coords
    table = np.zeros((32, 64))
    table[:, :16] = X
    table += np.random.default_rng(1).normal(scale=0.01 * np.abs(X).mean(), size=table.shape)
    r = audit(data, model=gpt2_folder(tmp_path, tokenizer_files, 1, table), n_positions=32, progress=False)
    row = r.random.loc["corrected"]
    assert r.verdict()["comparisons"][0]["verdict"] == "fit better than" and row["margin high"] < 0 and row["share below"] == 0


# --------------------------------------------------------------------------- posgeo audit --counts
@pytest.fixture(scope="module")
def counted_parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small parquet file (two row groups) and its counts, written by `posgeo count`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("counted")
    path = d / "sentences.parquet"
    lines = corpus_lines(200, seed=1)
    pq.write_table(pa.table({"text": lines, "label": np.arange(len(lines))}), path, row_group_size=120)
    counts = d / "counts.npz"
    assert main(["count", str(path), "--column", "text", "--positions", "12", "--out", str(counts), "--workers", "1",
                 "--no-progress"]) == 0
    return path, counts


def _stress_values(data: dict) -> dict[tuple[str, str, str], float]:
    return {(t, row, k): v[k] for t, table in data["stress"].items() for row, v in table.items() if v for k in ("raw", "optimal")}


def test_audit_from_counts_matches_the_in_memory_audit(counted_parquet, tmp_path: Path, capsys) -> None:
    """`posgeo count` then `posgeo audit --counts` gives the plug-in and corrected geometry and
    the stresses of `posgeo audit` on the same file (to 1e-9), without sampling intervals."""
    path, counts = counted_parquet
    n = 8
    assert main(["audit", str(path), "--positions", str(n), "--out", str(tmp_path / "mem"), "--no-progress"]) == 0
    assert main(["audit", "--counts", str(counts), "--positions", str(n), "--out", str(tmp_path / "cnt"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "note (intervals): no sampling intervals" in out and "positional counts" in out
    mem = json.loads((tmp_path / "mem" / "report.json").read_text(encoding="utf-8"))
    cnt = json.loads((tmp_path / "cnt" / "report.json").read_text(encoding="utf-8"))
    for key in ("hellinger", "hellinger_corrected"):
        np.testing.assert_allclose(np.array(cnt["corpus"][key]), np.array(mem["corpus"][key]), rtol=0, atol=1e-9)
    assert cnt["corpus"]["reach_per_position"] == mem["corpus"]["reach_per_position"]
    for key in ("mean_distance", "mean_distance_corrected", "adjacent_distance", "adjacent_distance_corrected",
                "noise_share"):
        assert cnt["corpus"][key] == pytest.approx(mem["corpus"][key], rel=0, abs=1e-9), key
    assert cnt["corpus"]["effective_rank"]["plug-in"]["rank_90"] == mem["corpus"]["effective_rank"]["plug-in"]["rank_90"]
    a, b = _stress_values(mem), _stress_values(cnt)
    assert set(a) == set(b) and ("corrected", "model", "optimal") in a
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-9, abs=1e-12), k
    assert cnt["monotonicity"] == mem["monotonicity"] and cnt["separation"] == mem["separation"]
    for layer, row in mem["layers"]["corrected"].items():
        assert cnt["layers"]["corrected"][layer] == pytest.approx(row, rel=1e-9), layer
    # what the counts cannot give: no intervals, no lengths beyond the counted positions
    assert mem["intervals"] is not None and cnt["intervals"] is None and "intervals" in cnt["notes"]
    assert cnt["dataset"]["source"] == "counts" and cnt["dataset"]["sequences"] == mem["dataset"]["sequences"] == 200
    assert cnt["dataset"]["counted_positions"] == 12 and cnt["dataset"]["tokens"] is None
    assert cnt["parameters"]["counts"] is True and "counts" not in mem["parameters"]
    assert cnt["command"] == f"posgeo audit --counts {counts} --positions {n}"
    # the library: counts in memory give the same report numbers as the file
    report = audit(counts=posgeo.PositionalCounts.load(counts), n_positions=n, progress=False)
    np.testing.assert_array_equal(report.hellinger_corrected, np.array(cnt["corpus"]["hellinger_corrected"]))
    assert report.stress["corrected"].loc["model", "optimal"] == b[("corrected", "model", "optimal")]


def test_audit_from_counts_refuses_bad_inputs(counted_parquet, tmp_path: Path, capsys) -> None:
    path, counts = counted_parquet

    def fails(args: list[str], *expected: str) -> None:
        assert main(["audit", *args, "--no-progress", "--out", str(tmp_path / "o")]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("posgeo audit: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        for text in expected:
            assert text in err, (text, err)

    fails(["--counts", str(tmp_path / "missing.npz")], "no counts file", "posgeo count")
    fails(["--counts", str(path)], "not a posgeo counts file")
    fails(["--counts", str(counts), "--positions", "13"], "--positions 13 is more than the 12 positions counted",
          "--positions 12")
    fails(["--counts", str(counts), "--positions", "12", "--column", "text"], "--column", "do(es) not apply")
    fails([str(path), "--counts", str(counts)], "not both")
    fails([], "no DATASET given", "--counts FILE")
    seqs = tokenize(corpus_lines(40), progress=False)
    other = posgeo.PositionalCounts.from_sequences(seqs, 8, tokenizer="gpt2@0123456789abcdef").save(tmp_path / "gpt2.npz")
    fails(["--counts", str(other), "--positions", "8"], "were made with the tokenizer 'gpt2@0123456789abcdef'",
          "the digests differ")
    short = posgeo.Sequences.from_list([[2000 + i for i in range(10)]] * 5 + [[2000, 2001, 2002, 2003]] * 35,
                                       vocab_size=30522)
    short = posgeo.PositionalCounts.from_sequences(short, 10, tokenizer=None).save(tmp_path / "short.npz")
    fails(["--counts", str(short), "--positions", "8"], "only 5 of the 40 documents", "reach position 7",
          "the audit needs 10", "pass --positions 4")
    few = posgeo.PositionalCounts.from_sequences(seqs.subset(np.arange(5)), 8, tokenizer=None).save(tmp_path / "few.npz")
    fails(["--counts", str(few), "--positions", "8"], "hold only 5 documents")
    # issue 46: counts that name the model's tokenizer but hold another vocabulary (a forged or damaged digest)
    forged = posgeo.Sequences.from_list([[2000 + i for i in range(10)]] * 40, vocab_size=4000)
    forged = posgeo.PositionalCounts.from_sequences(forged, 10, tokenizer=None).save(tmp_path / "forged.npz")
    fails(["--counts", str(forged), "--positions", "8"], "vocabulary of 4,000 tokens", "30,522")
    special = tmp_path / "special.npz"
    assert main(["count", str(path), "--column", "text", "--positions", "12", "--add-special-tokens", "--out",
                 str(special), "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    fails(["--counts", str(special), "--positions", "8"], "special tokens", "without --add-special-tokens")
    with pytest.raises(AuditError, match="not both"):
        audit("sst2", counts=counts, progress=False)
    with pytest.raises(AuditError, match="pass a dataset"):
        audit(progress=False)


def test_report_says_when_it_was_computed(text_report: AuditReport, tmp_path, monkeypatch) -> None:
    import datetime as dt
    import re as _re

    assert _re.fullmatch(r"\d{4}-\d{2}-\d{2}", text_report.computed_on)
    assert text_report.to_dict()["computed_on"] == text_report.computed_on
    html, _ = text_report.write(tmp_path / "r")
    assert f"computed on {text_report.computed_on}" in html.read_text()
    from posgeo.audit import compute as audit_compute

    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(dt.datetime(2030, 1, 2, tzinfo=dt.timezone.utc).timestamp())))
    assert audit_compute._computed_on() == "2030-01-02"


def test_report_tables_use_readable_names(text_report: AuditReport, tmp_path) -> None:
    html, _ = text_report.write(tmp_path / "r2")
    text = html.read_text()
    for internal in ("<td>min_dist</td>", "<td>q05</td>", "<td>known</td>", "not set"):
        assert internal not in text
    assert "closest pair: distance" in text or text_report.separation is None
    # every "How to read this" comes before the first table of its section
    for section in text.split("<h2>")[1:]:
        if "How to read this" in section and "<table" in section:
            assert section.index("How to read this") < section.index("<table"), section[:60]


def test_monotonicity_intervals(text_report: AuditReport) -> None:
    mono = text_report.monotonicity_intervals
    if mono is None:
        pytest.skip(f"no intervals: {text_report.notes.get('intervals')}")
    assert (mono["low"] <= mono["estimate"]).all() and (mono["estimate"] <= mono["high"]).all()
    rnd = mono.loc["random vectors, pairs ordered by the corrected distances"]
    assert abs(rnd["estimate"] - 0.5) < 0.1  # random vectors are at chance whatever the order
    assert text_report.to_dict()["intervals"]["monotonicity"] is not None
