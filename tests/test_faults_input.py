"""Fault cases of the inputs and the command line (issue 16, "Nothing stale, nothing lost").

Text that is not text (an integer column, null sentences, a bare string), a one-sequence
corpus, a token id beyond int64, a corrupt parquet file, a misspelt corpus name, and the
``posgeo audit`` command line interrupted, writing to a closed or full stdout, or given an
unusable ``--out``. Each case once failed in a misleading way (digit tokens and "too short",
the words "nan"/"none", one-character sequences, UFuncTypeError, a negative id, a raw
ArrowInvalid, a hub lookup of "sst3", a traceback, HTML without JSON).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import posgeo
import posgeo.audit
from posgeo import (
    Sequences,
    corpus_geometry,
    hellinger_noise_floor,
    load_corpus,
    load_texts,
    positional_marginals,
    tokenize,
)
from posgeo._marginals import first_order_hellinger_matrix, position_counts
from posgeo.__main__ import main
from posgeo.audit import AuditError, AuditReport, audit
from posgeo.audit import inputs as audit_inputs
from posgeo.validation import check_positions, check_texts, check_tokenizer, suggest_name


def lines(m: int = 40) -> list[str]:
    return [f"the cat number {k} sat on the mat today" for k in range(m)]


def write_sst2(root: Path, split: str, sentences: list, labels: list[int] | None = None) -> Path:
    (root / "sst2").mkdir(parents=True, exist_ok=True)
    path = root / "sst2" / f"{split}.parquet"
    labels = list(range(len(sentences))) if labels is None else labels
    pd.DataFrame({"idx": np.arange(len(sentences), dtype=np.int32), "sentence": sentences, "label": labels}).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "lines.txt"
    path.write_text("\n".join(lines()) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def report(text_file: Path, cache_dir: Path) -> AuditReport:
    """A real report (computed once; also fills ``cache_dir`` for the subprocess tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POSGEO_CACHE_DIR", str(cache_dir))
        return audit(text_file, n_positions=6, progress=False)


def env_with(cache: Path) -> dict[str, str]:
    env = {**os.environ, "POSGEO_CACHE_DIR": str(cache)}
    env.pop("TQDM_DISABLE", None)
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "posgeo", "audit", *args]


def default_sigint() -> None:
    """``preexec_fn`` of a child that must see SIGINT: a process started in the background
    (``make test &``, nohup) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(params=["default", "ignored"])
def parent_sigint(request):
    """Run the test with SIGINT at its default here, and ignored as in a background run (restored after)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL if request.param == "default" else signal.SIG_IGN)
    yield request.param
    signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- check_texts
def test_check_texts_accepts_strings_and_returns_a_list() -> None:
    assert check_texts(["a b", "c"], "texts") == ["a b", "c"]
    out = check_texts(np.array(["x", "y z"]), "texts")  # numpy str_ items become str
    assert out == ["x", "y z"] and all(type(t) is str for t in out)
    assert check_texts(pd.Series(["a", "b"], index=[7, 3]), "col") == ["a", "b"]
    assert check_texts(iter(["a"]), "texts") == ["a"]
    assert check_texts([], "texts") == []


@pytest.mark.parametrize(
    "values, pattern",
    [
        (["ok", 3], r"texts holds int values, not text \(row 1: 3\)"),
        ([b"bytes"], r"row 0: b'bytes'.*decode"),
        (["ok", "fine", ["a"]], r"holds list values.*row 2"),
        ("hello world", r"a single str.*pass a list of texts, e\.g\. \[text\]"),
        (b"raw", r"bytes.*list of texts"),
        (3, r"must be an iterable of str.*got int"),
        (pd.DataFrame({"text": ["a"]}), r"DataFrame.*one column.*df\['text'\]"),
    ],
)
def test_check_texts_type_errors_name_the_row_and_type(values, pattern) -> None:
    with pytest.raises(TypeError, match=pattern):
        check_texts(values, "texts")


def test_check_texts_reports_and_drops_missing_and_blank() -> None:
    values = ["a", None, "b", "", float("nan"), "  ", pd.NA, "c"]
    with pytest.raises(ValueError, match=r"texts has 5 missing or empty texts \(rows 1, 3, 4, 5, 6\).*drop_empty=True") as info:
        check_texts(values, "texts")
    assert "\n" not in str(info.value)
    assert check_texts(values, "texts", drop_empty=True) == ["a", "b", "c"]
    # allow_empty keeps empty strings (they are texts), but not nulls
    assert check_texts(["a", "", " "], "texts", allow_empty=True) == ["a", "", " "]
    with pytest.raises(ValueError, match=r"1 missing or empty text \(row 1\)"):
        check_texts(["a", None], "texts", allow_empty=True)
    many = [None] * 12
    with pytest.raises(ValueError, match=r"12 missing or empty texts \(rows 0, 1, 2, 3, 4, \.\.\.\)"):
        check_texts(many, "texts")
    with pytest.raises(ValueError, match="pass --drop-empty"):
        check_texts(["a", ""], "column 'text'", drop_hint="pass --drop-empty to skip them")


def test_check_texts_on_pandas_string_columns() -> None:
    s = pd.Series(["a", None, "b"], dtype="string")
    with pytest.raises(ValueError, match=r"1 missing or empty text \(row 1\)"):
        check_texts(s, "col")
    assert check_texts(s, "col", drop_empty=True) == ["a", "b"]
    with pytest.raises(TypeError, match=r"holds int values, not text \(row 0: 1\)"):
        check_texts(pd.Series([1, 2]), "column 'label'")


def test_check_positions_bounds_the_tables_by_the_memory(monkeypatch) -> None:
    monkeypatch.setattr("posgeo.validation.physical_memory", lambda: 2**30)  # a 1 GiB machine
    assert check_positions(2**24, per_position=64, what="the counts") == 2**24  # exactly 1 GiB
    with pytest.raises(ValueError, match=r"^n_positions = 16,777,217 would need 1\.0 GiB for the counts, more than this "
                                         r"machine's 1\.0 GiB of memory; pass n_positions 16,777,216 or fewer$"):
        check_positions(2**24 + 1, per_position=64, what="the counts")
    # an (n, n) float64 matrix: the largest n with 8 n^2 + 8 n <= 2^30 is 11,584
    with pytest.raises(ValueError, match=r"^n_positions \(--positions\) = 20,000 would need 3\.0 GiB for the distances, "
                                         r".*; pass n_positions \(--positions\) 11,584 or fewer$"):
        check_positions(20_000, per_position=8, per_pair=8, what="the distances", option="--positions")
    assert 8 * 11_584**2 + 8 * 11_584 <= 2**30 < 8 * 11_585**2 + 8 * 11_585
    with pytest.raises(ValueError, match="n_positions must be an int >= 3, got 2"):
        check_positions(2, per_position=1, what="x", minimum=3)
    with pytest.raises(TypeError, match="n_positions must be an int"):
        check_positions(8.0, per_position=1, what="x")
    monkeypatch.setattr("posgeo.validation.physical_memory", lambda: 0)  # unknown: no bound but MAX_SIZE
    assert check_positions(2**31 - 1, per_position=2**40, what="x") == 2**31 - 1


def test_check_tokenizer_refuses_empty_tokenizers() -> None:
    from tokenizers import Tokenizer, models

    check_tokenizer(posgeo.default_tokenizer(), where="bert")  # a transformers tokenizer
    check_tokenizer(posgeo.default_tokenizer().backend_tokenizer, where="bert")  # a tokenizers.Tokenizer
    tiny = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match=r"^the tokenizer of './m' is empty \(a vocabulary of 2 tokens\): a tokenizer "
                                         r"needs its files beside the model: tokenizer\.json, or vocab\.txt \(WordPiece\) "
                                         r"or vocab\.json \+ merges\.txt \(BPE\), with tokenizer_config\.json"):
        check_tokenizer(tiny, where="'./m'")
    silent = Tokenizer(models.BPE(vocab={chr(0x2500 + i): i for i in range(120)}, merges=[]))  # no letters: no token
    with pytest.raises(ValueError, match=r"it turns 'The quick brown fox jumps over the lazy dog\.' into no token"):
        check_tokenizer(silent, where="x")


def test_suggest_name() -> None:
    assert suggest_name("sst3", ["synthetic", "sst2", "imdb"]) == "sst2"
    assert suggest_name("SST2", ["sst2", "imdb"]) == "sst2"
    assert suggest_name("imbd", ["sst2", "imdb"]) == "imdb"
    assert suggest_name("sst2", ["sst2", "imdb"]) is None  # an exact name needs no suggestion
    assert suggest_name("wikitext", ["sst2", "imdb"]) is None
    assert suggest_name("someone/sst2", ["sst2"]) is None


# --------------------------------------------------------------------------- 1. text that is not text
def test_integer_column_is_a_type_error_not_digit_tokens(tmp_path: Path) -> None:
    write_sst2(tmp_path, "train", [11, 22, 33])
    with pytest.raises(TypeError, match=r"column 'sentence' of .*sst2/train\.parquet holds int values, not text \(row 0: 11\)"):
        load_texts("sst2", "train", data_dir=tmp_path)
    path = tmp_path / "ints.parquet"
    pd.DataFrame({"text": np.arange(40)}).to_parquet(path)
    with pytest.raises(AuditError, match=r"column 'text' of the parquet file .*holds int values, not text \(row 0: 0\)"):
        audit(path, n_positions=4, progress=False, cache=False)


def test_integer_column_in_the_cli_is_named_not_too_short(tmp_path: Path, capsys) -> None:
    write_sst2(tmp_path, "train", list(range(40)))  # sst2 whose sentences are integers
    args = ["audit", "sst2", "--data-dir", str(tmp_path), "--positions", "4", "--no-progress", "--no-cache"]
    assert main(args + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "holds int values, not text (row 0: 0)" in err and "reach position" not in err and err.count("\n") == 1


def test_null_sentences_are_reported_or_dropped(tmp_path: Path, private_cache: Path) -> None:
    write_sst2(tmp_path, "validation", ["a fine film", None, "dull", ""], [1, 0, 0, 1])
    with pytest.raises(ValueError, match=r"2 missing or empty texts \(rows 1, 3\).*drop_empty=True") as info:
        load_texts("sst2", "validation", data_dir=tmp_path)
    assert "sst2/validation.parquet" in str(info.value)
    df = load_texts("sst2", "validation", data_dir=tmp_path, drop_empty=True)
    assert df["text"].tolist() == ["a fine film", "dull"] and df["label"].tolist() == [1, 0]
    assert not set(df["text"]) & {"nan", "None", "none", "<NA>"}
    with pytest.raises(ValueError, match="drop_empty=True"):
        load_corpus("sst2", "validation", data_dir=tmp_path, progress=False)
    c = load_corpus("sst2", "validation", data_dir=tmp_path, drop_empty=True, progress=False)
    assert len(c) == 2 and c.labels.tolist() == [1, 0] and c.options["drop_empty"] is True
    # the default key is unchanged: a run without drop_empty does not read the dropped tokens
    with pytest.raises(ValueError, match="drop_empty=True"):
        load_corpus("sst2", "validation", data_dir=tmp_path, progress=False)


def test_null_texts_in_the_audit_need_drop_empty(tmp_path: Path, private_cache: Path, capsys) -> None:
    path = tmp_path / "nulls.parquet"
    texts = lines(30)
    texts[3] = None
    texts[7] = ""
    pd.DataFrame({"text": texts}).to_parquet(path)
    with pytest.raises(AuditError, match=r"2 missing or empty texts \(rows 3, 7\).*--drop-empty"):
        audit(path, n_positions=4, progress=False)
    out = tmp_path / "out"
    args = ["audit", str(path), "--positions", "4", "--no-progress", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--drop-empty" in err and err.count("\n") == 1
    assert main(args + ["--drop-empty"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["sequences"] == 28 and report["parameters"]["drop_empty"] is True
    params = audit_inputs.AuditParameters(dataset="x", split="train", column=None, model=None, n_positions=4,
                                          max_sequences=None, seed=0, min_reach=10, mds_dims=(1,), data_dir=None)
    assert "drop_empty" not in params.as_dict()  # reports (and cache keys) without the option are unchanged


def test_tokens_dropped_once_are_not_served_to_a_run_that_refuses_empties(tmp_path: Path, private_cache: Path) -> None:
    path = tmp_path / "nulls.parquet"
    texts = lines(30)
    texts[3] = None
    pd.DataFrame({"text": texts}).to_parquet(path)
    assert audit(path, n_positions=4, progress=False, drop_empty=True).dataset["sequences"] == 29
    with pytest.raises(AuditError, match="--drop-empty"):
        audit(path, n_positions=4, progress=False)


def test_tokenize_refuses_a_bare_string_and_nulls() -> None:
    with pytest.raises(TypeError, match=r"pass a list of texts, e\.g\. \[text\]"):
        tokenize("hello world", progress=False)
    with pytest.raises(ValueError, match=r"1 missing or empty text \(row 1\)"):
        tokenize(["hello", None], progress=False)
    assert tokenize(["hello", ""], progress=False).lengths.tolist() == [1, 0]  # an empty text is a text


# --------------------------------------------------------------------------- 2. a one-sequence corpus
def test_one_sequence_corpus_gives_nan_not_ufunc_errors() -> None:
    seqs = [[1, 2, 3]]
    nf = hellinger_noise_floor(seqs, 3, 5)
    assert np.isnan(nf.split_half).all() and (nf.bias_sq == 0).all() and nf.counts.tolist() == [1, 1, 1]
    D = first_order_hellinger_matrix(seqs, 3, 5)
    assert D.shape == (3, 3) and np.isfinite(D).all()
    g = corpus_geometry(Sequences.from_list(seqs, vocab_size=5), 3, cache=False)
    assert np.isnan(g.split_half).all()
    off = ~np.eye(3, dtype=bool)
    assert np.isnan(g.matched[off]).all() and (np.diag(g.matched) == 0).all()
    assert np.isfinite(g.distances).all()


def test_positions_reached_once_get_nan_matched_distances() -> None:
    seqs = Sequences.from_list([[0, 1, 2], [1, 1]], vocab_size=3)
    g = corpus_geometry(seqs, 3, cache=False)
    assert np.isfinite(g.matched[:2, :2]).all()
    assert np.isnan(g.matched[2, :2]).all() and np.isnan(g.matched[:2, 2]).all() and g.matched[2, 2] == 0
    full = posgeo.matched_hellinger_matrix(seqs, 2, 3)
    np.testing.assert_array_equal(g.matched[:2, :2], full)


# --------------------------------------------------------------------------- 3. token id 2**63
def test_token_id_beyond_int64_is_reported_with_its_value() -> None:
    big = np.array([2**63], dtype=np.uint64)
    for seqs in ([big], [np.array([1]), big], [[2**63]]):
        with pytest.raises(ValueError, match=r"token id 9223372036854775808 is outside \[0, vocab_size=5\)"):
            positional_marginals(seqs, 1, 5)
        with pytest.raises(ValueError, match="9223372036854775808"):
            hellinger_noise_floor(seqs, 1, 5)
    with pytest.raises(ValueError, match="18446744073709551615"):
        first_order_hellinger_matrix([np.array([2**64 - 1], dtype=np.uint64)], 1, 5)
    assert position_counts([big], 1).tolist() == [1]


# --------------------------------------------------------------------------- 4. the command line
@pytest.mark.slow  # a fresh interpreter (torch, transformers) per run: about 10 s each
def test_sigint_exits_130_with_one_line(text_file: Path, tmp_path: Path, parent_sigint: str) -> None:
    proc = subprocess.Popen(cli(str(text_file), "--positions", "6", "--out", str(tmp_path / "out")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with(tmp_path / "cache"),
                            preexec_fn=default_sigint)
    try:
        first = proc.stderr.read(1)  # the progress bar: the audit has started
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    finally:
        proc.kill()
    err = (first + rest).decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    # one line, the last: progress bars (\r-redrawn) may precede it, nothing follows it
    assert err.endswith("posgeo audit: interrupted\n") and err.count("interrupted") == 1
    assert err.rstrip("\n").split("\n")[-1].lstrip("\r") == "posgeo audit: interrupted"


@pytest.mark.slow
def test_closed_stdout_exits_quietly_with_141(text_file: Path, report: AuditReport, cache_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(cli(str(text_file), "--positions", "6", "--no-progress", "--out", str(tmp_path / "o")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_with(cache_dir))
    proc.stdout.close()  # the reader went away (as `posgeo audit ... | head -0`)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b"", err
    assert (tmp_path / "o" / "report.json").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_stdout_is_one_line_with_status_2(text_file: Path, report: AuditReport, cache_dir: Path, tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(cli(str(text_file), "--positions", "6", "--no-progress", "--out", str(tmp_path / "o")),
                              stdout=full, stderr=subprocess.PIPE, env=env_with(cache_dir), timeout=120, check=False)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.startswith("posgeo audit: error: cannot write to stdout") and "No space left" in err
    assert err.count("\n") == 1 and "Traceback" not in err


class _Stdout:
    def __init__(self, exc: OSError) -> None:
        self.exc = exc

    def write(self, text: str) -> int:
        raise self.exc

    def flush(self) -> None:
        raise self.exc


@pytest.mark.parametrize("exc, status", [(BrokenPipeError(errno.EPIPE, "Broken pipe"), 141),
                                         (OSError(errno.ENOSPC, "No space left on device"), 2)])
def test_stdout_errors_in_process(exc, status, report: AuditReport, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(posgeo.audit, "audit", lambda *a, **k: report)
    monkeypatch.setattr(sys, "stdout", _Stdout(exc))
    assert main(["audit", "whatever.txt", "--no-progress", "--out", str(tmp_path / "o")]) == status
    err = capsys.readouterr().err
    if status == 141:
        assert err == ""
    else:
        assert err.startswith("posgeo audit: error: cannot write to stdout (No space left on device)")
        assert err.count("\n") == 1 and "report.json" in err


def _must_not_compute(*args, **kwargs):
    raise AssertionError("the audit must not run when the output cannot be written")


def test_empty_out_is_refused(text_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(posgeo.audit, "audit", _must_not_compute)
    for value in ("", "  "):
        assert main(["audit", str(text_file), "--no-progress", "--out", value]) == 2
        err = capsys.readouterr().err
        assert err.startswith("posgeo audit: error: --out is empty") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_report_json_as_a_directory_is_refused_before_computing(text_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    (out / "report.json").mkdir(parents=True)
    monkeypatch.setattr(posgeo.audit, "audit", _must_not_compute)
    assert main(["audit", str(text_file), "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "report.json" in err and "is a directory" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]  # no HTML without JSON
    (out / "report.json").rmdir()
    (out / "report.html").mkdir()
    assert main(["audit", str(text_file), "--no-progress", "--out", str(out)]) == 2
    assert "report.html" in capsys.readouterr().err
    file_out = tmp_path / "file"
    file_out.write_text("x")
    assert main(["audit", str(text_file), "--no-progress", "--out", str(file_out)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_write_is_atomic_json_with_html_or_nothing(report: AuditReport, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    (out / "report.json").mkdir(parents=True)
    with pytest.raises(AuditError, match="report.json.*is a directory"):
        report.write(out)
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    (out / "report.json").rmdir()
    html, js = report.write(out)
    assert html.read_text(encoding="utf-8") == report.to_html() and js.read_text(encoding="utf-8") == report.to_json()
    old = js.read_bytes()

    def broken() -> str:
        raise RuntimeError("disk gone")

    monkeypatch.setattr(AuditReport, "to_html", lambda self, **options: broken())
    with pytest.raises(RuntimeError, match="disk gone"):
        report.write(out)
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json"]  # no temp file left
    assert js.read_bytes() == old

    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith("report.html"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.undo()
    new = tmp_path / "new"
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        report.write(new)
    assert not (new / "report.html").exists() and not [p for p in new.iterdir() if p.name.startswith(".")]


def test_usage_errors_are_one_line(capsys) -> None:
    assert main(["audit", "x.txt", "--positions", "x"]) == 2
    err = capsys.readouterr().err
    assert "invalid int value" in err and err.count("\n") == 1 and "--help" in err
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "audit" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- 5. corrupt parquet, near-miss names
def test_truncated_parquet_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = write_sst2(tmp_path, "train", lines(200))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"sst2/train\.parquet.*truncated or corrupt.*re-download") as info:
        load_texts("sst2", "train", data_dir=tmp_path)
    assert "\n" not in str(info.value)
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(data[: len(data) // 3])
    with pytest.raises(AuditError, match=r"mine\.parquet.*truncated or corrupt.*re-write"):
        audit(mine, n_positions=4, progress=False, cache=False)


def test_near_miss_corpus_names_suggest_the_known_one(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"unknown corpus 'sst3'.*did you mean 'sst2'\?"):
        load_corpus("sst3")
    with pytest.raises(ValueError, match=r"did you mean 'synthetic'\?"):
        load_corpus("synthetc")
    with pytest.raises(ValueError, match=r"did you mean 'imdb'\?"):
        load_texts("imbd")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AuditError, match=r"'sst3'.*did you mean 'sst2'\?") as info:
        audit("sst3", progress=False)
    assert "hub is unreachable" in str(info.value)
    with pytest.raises(AuditError) as info:  # a name that is no near miss gets no suggestion
        audit("someone/some-dataset", progress=False)
    assert "did you mean" not in str(info.value)


def test_near_miss_name_when_the_hub_load_fails(monkeypatch, tmp_path: Path) -> None:
    import types

    fake = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise FileNotFoundError("Dataset 'sst3' doesn't exist on the Hub")

    fake.load_dataset = load_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    monkeypatch.setattr(audit_inputs, "hub_unreachable_reason", lambda *a, **k: None)
    ds = audit_inputs.resolve_dataset("sst3", split="train", column=None, data_dir=None)
    assert ds.kind == "hub"
    with pytest.raises(AuditError, match=r"loading 'sst3'.*failed.*did you mean 'sst2'\?"):
        audit_inputs.read_texts(ds, split="train", column=None)


@pytest.mark.parametrize(
    "call",
    [
        lambda: posgeo.sinusoidal_encoding(10**12, 4),
        lambda: posgeo.sinusoidal_encoding(2**30, 2**30),
        lambda: posgeo.rope_encoding(2**30, 2**24),
        lambda: posgeo.random_encoding(2**30, 2**30, seed=0),
        lambda: posgeo.alibi_encoding(2**31 - 1, 2**16),
        lambda: posgeo.synthetic_marginals(2**30, 2**30),
        lambda: posgeo.positional_marginals([[1, 2, 3]] * 4, 2, 2**40),
    ],
    ids=["n=1e12", "sinusoidal", "rope", "random", "alibi", "synthetic", "marginals"],
)
def test_sizes_that_cannot_fit_are_a_value_error_naming_the_size(call) -> None:
    with pytest.raises(ValueError, match=r"would need .*iB|must be an int <="):
        call()
