"""Fault paths of posgeo's result cache (issue 16, "Nothing stale, nothing lost").

Each test stages one way a cache goes wrong and checks that no stale result is returned and no
finished result is lost: a data file replaced by another of the same size with its mtime kept,
a training run keyed on a lambda's name, two writers of one key, an interrupted or killed
writer, a wrong object in an entry, and a cache that cannot be written (a read-only
directory, a path that is a file, a full disk).

The subprocess tests load ``posgeo/_cache.py`` on its own (it needs only the standard library
and numpy), so that a child process starts in a fraction of a second instead of importing all
of posgeo and torch.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import posgeo._cache as cache_mod
from posgeo import (
    FirstMarkerTask,
    TrainConfig,
    TrainResult,
    TransformerConfig,
    cached,
    corpus_source,
)
from posgeo._cache import cache_key
from posgeo import load_corpus, torch_threads, train


@pytest.fixture(autouse=True)
def fresh_cache_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget, for this test only, which directories were warned about and when temps were purged."""
    monkeypatch.setattr(cache_mod, "_warned_dirs", set(), raising=False)
    monkeypatch.setattr(cache_mod, "_last_purge", {}, raising=False)


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


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.tmp*")) if directory.is_dir() else []


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def same_size_same_mtime(path: Path, write) -> None:
    """Replace ``path``'s content by ``write(path)`` keeping its size and modification time (``cp -p``)."""
    st = path.stat()
    write(path)
    assert path.stat().st_size == st.st_size, "the test needs a replacement of the same size"
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns


# ============================================================================ 1. stale data files
def write_sst2(root: Path, sentences: list[str]) -> Path:
    (root / "sst2").mkdir(parents=True, exist_ok=True)
    path = root / "sst2" / "train.parquet"
    labels = [k % 2 for k in range(len(sentences))]
    pd.DataFrame({"idx": np.arange(len(sentences), dtype=np.int32), "sentence": sentences, "label": labels}).to_parquet(path)
    return path


@pytest.mark.parametrize("how", ["in place", "renamed over"])
def test_load_corpus_sees_a_same_size_same_mtime_replacement(tmp_path, private_cache, how):
    data = tmp_path / "data"
    path = write_sst2(data, ["good movie", "bad movie", "fine"])
    first = load_corpus("sst2", data_dir=data, progress=False)
    before = corpus_source("sst2", data_dir=data)

    def replace(p: Path) -> None:
        if how == "in place":  # what `cp -p new old` does: same inode, rewritten
            write_sst2(data, ["dull movie", "sad movie", "okay"])
        else:  # what `rsync -a` does: a new file renamed over the old one
            other = tmp_path / "other"
            write_sst2(other, ["dull movie", "sad movie", "okay"])
            os.replace(other / "sst2" / "train.parquet", p)

    same_size_same_mtime(path, replace)
    assert corpus_source("sst2", data_dir=data) != before
    second = load_corpus("sst2", data_dir=data, progress=False)
    assert not np.array_equal(first.sequences.tokens, second.sequences.tokens)
    fresh = load_corpus("sst2", data_dir=data, progress=False, cache=False)
    np.testing.assert_array_equal(second.sequences.tokens, fresh.sequences.tokens)
    np.testing.assert_array_equal(second.sequences.lengths, fresh.sequences.lengths)


def text_lines(m: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    subjects = ["the cat", "a dog", "my friend", "the teacher", "our neighbour", "a child"]
    verbs = ["saw", "liked", "found", "followed", "heard", "painted"]
    objects = ["a bird", "the river", "an old film", "the red car", "some music", "a letter"]
    tails = ["in the park", "at noon", "yesterday", "with joy", "after lunch", "near the station", "again"]
    return [
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)} {rng.choice(tails)}"
        for _ in range(m)
    ]


def test_audit_sees_a_same_size_same_mtime_replacement(tmp_path, private_cache):
    from posgeo.audit import audit

    lines = text_lines(60, seed=1)
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    first = audit(path, n_positions=5, progress=False)
    assert first.dataset["sequences"] == 60
    # the same bytes but every other newline a space: same size, half the lines
    joined = "".join(line + ("\n" if k % 2 else " ") for k, line in enumerate(lines))[:-1]
    same_size_same_mtime(path, lambda p: p.write_text(joined, encoding="utf-8"))
    second = audit(path, n_positions=5, progress=False)
    assert second.dataset["sequences"] == 30
    assert second.to_json() == audit(path, n_positions=5, progress=False, cache=False).to_json()


@pytest.mark.slow  # two more audits, through the command line
def test_cli_audit_sees_a_same_size_same_mtime_replacement(tmp_path, private_cache, capsys):
    import json

    from posgeo.__main__ import main

    lines = text_lines(40, seed=3)
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(lines), encoding="utf-8")
    args = ["audit", str(path), "--positions", "5", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    joined = "".join(line + ("\n" if k % 2 else " ") for k, line in enumerate(lines))[:-1]
    same_size_same_mtime(path, lambda p: p.write_text(joined, encoding="utf-8"))
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    counts = [json.loads((tmp_path / d / "report.json").read_text())["dataset"]["sequences"] for d in "ab"]
    assert counts == [40, 20]


# ============================================================================ 2. train keyed on code
def tiny_run(**kw):
    task = FirstMarkerTask(seq_len=6, n_filler=4)
    cfg = TransformerConfig(vocab_size=task.vocab_size, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6,
                            n_classes=2)
    tcfg = TrainConfig(steps=2, batch_size=8, lr=1e-3, device="cpu", eval_every=2)
    return train(cfg, tcfg, task, progress=False, **kw)


def test_train_tells_two_lambdas_apart(private_cache):
    with torch_threads(1):
        one = tiny_run(eval_fn=lambda m: {"a": 1.0})
        two = tiny_run(eval_fn=lambda m: {"a": 2.0})
        assert (one.final("eval_a"), two.final("eval_a")) == (1.0, 2.0)
        again = tiny_run(eval_fn=lambda m: {"a": 2.0})  # the same code: read from the cache
    assert again.wall_time == two.wall_time and again.final("eval_a") == 2.0
    assert len(list(private_cache.glob("train-*.pkl"))) == 2


def test_train_tells_two_closures_apart(private_cache):
    def make(value):
        return lambda m: {"a": value}

    with torch_threads(1):
        assert [tiny_run(eval_fn=make(v)).final("eval_a") for v in (1.0, 2.0, 1.0)] == [1.0, 2.0, 1.0]
    assert len(list(private_cache.glob("train-*.pkl"))) == 2


def test_train_refuses_to_cache_an_unhashable_eval_fn(private_cache):
    rng = np.random.default_rng(0)  # a generator has no stable content hash

    def noisy(model):
        return {"a": float(rng.random())}

    with pytest.raises(ValueError, match="cache=False"):
        tiny_run(eval_fn=noisy)
    assert "eval_a" in tiny_run(eval_fn=noisy, cache=False).history[-1]
    assert not private_cache.exists() or not list(private_cache.glob("train-*.pkl"))


def test_train_key_has_the_torch_thread_count(private_cache):
    with torch_threads(1):
        one = tiny_run()
    with torch_threads(2):
        two = tiny_run()
    assert len(list(private_cache.glob("train-*.pkl"))) == 2
    assert one.wall_time != two.wall_time  # two runs, not one read twice


# ============================================================================ 3. concurrent writers
def test_two_threads_on_one_key(tmp_path):
    expected = {"value": list(range(200_000))}
    for round_ in range(5):
        barrier = threading.Barrier(2)
        results, errors = [], []

        def compute():
            barrier.wait(timeout=10)  # both compute, then both write at once
            return {"value": list(range(200_000))}

        def worker():
            try:
                results.append(cached("race", {"round": round_}, compute, directory=tmp_path))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not errors, errors
        assert results == [expected, expected]
    assert temp_files(tmp_path) == []
    assert len(entries(tmp_path)) == 5
    assert cached("race", {"round": 0}, lambda: pytest.fail("should be a hit"), directory=tmp_path) == expected


PRELUDE = textwrap.dedent(f"""
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("posgeo_cache_under_test", {cache_mod.__file__!r})
    cache = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = cache
    spec.loader.exec_module(cache)
""")


def run_child(script: str, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), *args], capture_output=True,
                          text=True, timeout=timeout, **kw)


def test_two_processes_on_one_key(tmp_path):
    script = """
        import os, sys, time
        directory, go = sys.argv[1], sys.argv[2]
        def compute():
            deadline = time.time() + 20
            while not os.path.exists(go) and time.time() < deadline:
                time.sleep(0.005)
            return {"value": list(range(300_000))}
        out = cache.cached("race", {"k": 1}, compute, directory=directory)
        print(out == {"value": list(range(300_000))})
    """
    go = tmp_path / "go"
    children = [
        subprocess.Popen([sys.executable, "-c", PRELUDE + textwrap.dedent(script), str(tmp_path / "c"), str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    time.sleep(0.5)  # both start and wait inside compute
    go.touch()
    outs = [c.communicate(timeout=60) for c in children]
    assert [c.returncode for c in children] == [0, 0], [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["True", "True"]
    assert temp_files(tmp_path / "c") == []
    assert len(entries(tmp_path / "c")) == 1


# ============================================================================ 3. interrupted writers
SLOW_WRITER = """
    import pathlib, sys, time
    directory, marker, mode = sys.argv[1:4]
    class Slow:
        def __reduce__(self):
            pathlib.Path(marker).write_text("writing")
            time.sleep(60)
            return (str, ("late",))
    def compute():
        return [b"x" * 300_000, Slow() if mode == "slow" else "fast"]
    print(cache.cached("interrupted", {"k": 1}, compute, directory=directory)[1])
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_writer_interrupted_mid_write(tmp_path, sig, parent_sigint):
    directory, marker = tmp_path / "c", tmp_path / "writing"
    child = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(SLOW_WRITER), str(directory), str(marker), "slow"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )
    deadline = time.time() + 30
    while not marker.exists():
        assert child.poll() is None, child.communicate()
        assert time.time() < deadline, "the child never started writing"
        time.sleep(0.01)
    assert temp_files(directory), "the child should be half-way through writing its entry"
    child.send_signal(sig)
    _, err = child.communicate(timeout=30)
    assert not list(directory.glob("*.pkl"))  # nothing half-written under the entry's name
    if sig == signal.SIGINT:
        assert child.returncode != 0 and "KeyboardInterrupt" in err
        assert temp_files(directory) == []  # removed on the way out
    else:
        assert child.returncode == -signal.SIGKILL
        assert temp_files(directory)  # SIGKILL cannot be caught: the next writer purges it
    rerun = run_child(SLOW_WRITER, str(directory), str(marker), "fast")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.strip() == "fast"
    assert temp_files(directory) == []
    assert len(entries(directory)) == 1


def test_stale_temp_files_are_purged_by_age(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    old = tmp_path / "thing-0123456789abcdef.pkl.tmp-otherhost-1234-5678-abcd1234"
    young = tmp_path / "thing-fedcba9876543210.pkl.tmp-otherhost-1234-5678-dcba4321"
    legacy = tmp_path / "thing-00000000000000ff.tmp4242"  # the name older versions used
    for p in (old, young, legacy):
        p.write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    os.utime(legacy, (two_hours_ago, two_hours_ago))
    cached("thing", {"n": 1}, lambda: 1, directory=tmp_path)
    assert temp_files(tmp_path) == [young.name]  # another host's writer may still be at work


# ============================================================================ 4. wrong object in an entry
def test_a_wrong_type_entry_is_purged_and_recomputed(tmp_path):
    compute = lambda: [1, 2]  # noqa: E731 - defined here, in a file outside posgeo: part of the key
    path = tmp_path / f"{cache_key('typed', {'n': 1}, compute=compute)}.pkl"
    path.write_bytes(pickle.dumps({"not": "a list"}))
    assert cached("typed", {"n": 1}, compute, directory=tmp_path, expect=list) == [1, 2]
    assert pickle.loads(path.read_bytes()) == [1, 2]
    assert cached("typed", {"n": 1}, lambda: pytest.fail("should be a hit"), directory=tmp_path, expect=(list, tuple)) == [1, 2]


def test_train_purges_a_wrong_type_entry(private_cache):
    with torch_threads(1):
        first = tiny_run()
        (entry,) = private_cache.glob("train-*.pkl")
        entry.write_bytes(pickle.dumps({"state_dict": "not a TrainResult"}))
        second = tiny_run()
    assert isinstance(second, TrainResult)
    for name, value in first.state_dict.items():
        torch.testing.assert_close(second.state_dict[name], value, rtol=0, atol=0)
    assert isinstance(pickle.loads(entry.read_bytes()), TrainResult)


# ============================================================================ 5. unwritable cache
def check_not_cached(directory: Path, where: Path, calls: list[int] | None = None) -> None:
    with pytest.warns(UserWarning, match="POSGEO_CACHE_DIR") as record:
        assert cached("thing", {"n": 1}, lambda: {"big": b"y" * 200_000}, directory=directory) == {"big": b"y" * 200_000}
    assert str(directory) in str(record[0].message)
    assert temp_files(where) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: the second failure is silent
        assert cached("thing", {"n": 2}, lambda: 2, directory=directory) == 2


def test_cache_path_is_a_regular_file(tmp_path):
    path = tmp_path / "cache"
    path.write_text("not a directory")
    check_not_cached(path, tmp_path)
    assert path.read_text() == "not a directory"


def test_read_only_cache_directory(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        probe = directory / "probe"
        try:
            probe.write_text("x")
        except PermissionError:
            pass
        else:
            probe.unlink()
            pytest.skip("running as root: chmod 0o500 does not stop writes (see the simulated and tmpfs tests)")
        check_not_cached(directory, directory)
    finally:
        directory.chmod(0o700)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.ENOSPC], ids=["EACCES", "EROFS", "ENOSPC"])
def test_opening_the_temp_file_fails(tmp_path, monkeypatch, code):
    real_open = open

    def failing_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wxa"):
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(cache_mod, "open", failing_open, raising=False)
    check_not_cached(tmp_path / "c", tmp_path / "c")


def test_disk_full_at_the_rename(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr(cache_mod.os, "replace", full)
    check_not_cached(tmp_path / "c", tmp_path / "c")


class DiskFills:
    """Pickles into a few hundred kB, then fails as a full disk would."""

    def __reduce__(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_half_way_through_the_write(tmp_path):
    result = [b"z" * 300_000, DiskFills()]
    with pytest.warns(UserWarning, match="POSGEO_CACHE_DIR"):
        assert cached("thing", {"n": 1}, lambda: result, directory=tmp_path) is result
    assert entries(tmp_path) == []  # neither an entry nor a partial temp file


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """Mount a 64 kB tmpfs at ``tmp_path / 'mnt'`` with the given options (skipped where mounting is not allowed)."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], capture_output=True)


def test_a_real_full_disk(tiny_tmpfs):
    point = tiny_tmpfs("size=64k")
    check_not_cached(point, point)
    small = f"{cache_key('thing', {'n': 2}, compute=check_not_cached)}.pkl"  # this file's hash is in the key
    assert entries(point) in ([], [small])  # the small one may fit


def test_a_real_read_only_filesystem(tiny_tmpfs):
    point = tiny_tmpfs("ro,size=64k")
    check_not_cached(point / "cache", point)
