"""Tests for posgeo._cache: the on-disk cache of expensive results."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posgeo._cache as cache_mod
from posgeo import CACHE_ENV_VAR, cache_dir, cache_key, cached


class Counter:
    """A compute function that records how often it ran."""

    def __init__(self, value=None):
        self.calls = 0
        self.value = value

    def __call__(self):
        self.calls += 1
        return {"value": self.value, "call": self.calls}


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    d = tmp_path / "posgeo-cache"
    monkeypatch.setenv(CACHE_ENV_VAR, str(d))
    return d


# ----------------------------------------------------------------------------- cache_dir
def test_env_var_name():
    assert CACHE_ENV_VAR == "POSGEO_CACHE_DIR"


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(CACHE_ENV_VAR, "~/c")
    assert cache_dir() == tmp_path / "home" / "c"


def test_cache_dir_default_is_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "posgeo"
    monkeypatch.setenv(CACHE_ENV_VAR, "")  # empty means unset
    assert cache_dir() == tmp_path / ".cache" / "posgeo"


def test_cache_dir_is_not_created_by_asking(cdir):
    cache_dir()
    assert not cdir.exists()


# ----------------------------------------------------------------------------- cache_key
def test_cache_key_format_and_determinism():
    k = cache_key("demo", {"n": 3, "name": "x"})
    prefix, digest = k.rsplit("-", 1)
    assert prefix == "demo" and len(digest) == 16
    int(digest, 16)  # hexadecimal
    assert cache_key("demo", {"name": "x", "n": 3}) == k  # key order does not matter


def test_cache_key_changes_with_every_input(monkeypatch):
    base = cache_key("demo", {"n": 3, "opts": {"a": 1}})
    assert cache_key("other", {"n": 3, "opts": {"a": 1}}) != base
    assert cache_key("demo", {"n": 4, "opts": {"a": 1}}) != base
    assert cache_key("demo", {"n": 3, "opts": {"a": 2}}) != base
    assert cache_key("demo", {"n": 3, "opts": {"a": 1}, "extra": None}) != base
    monkeypatch.setattr(cache_mod, "_package_version", lambda: "999.0")
    assert cache_key("demo", {"n": 3, "opts": {"a": 1}}) != base


@settings(max_examples=50, deadline=None)
@given(a=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
       b=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_cache_key_is_injective_on_plain_dicts(a, b):
    assert (cache_key("p", a) == cache_key("p", b)) == (a == b)


@pytest.mark.parametrize("bad", ["", "a/b", 3, None])
def test_cache_key_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="cache name"):
        cache_key(bad, {})


# ----------------------------------------------------------------------------- cached
def test_miss_then_hit(cdir):
    f = Counter("v")
    first = cached("thing", {"n": 1}, f)
    assert f.calls == 1 and first == {"value": "v", "call": 1}
    files = list(cdir.glob("thing-*.pkl"))
    assert len(files) == 1
    assert files[0].stem == cache_key("thing", {"n": 1})
    second = cached("thing", {"n": 1}, f)
    assert f.calls == 1 and second == first


def test_different_key_is_a_miss(cdir):
    f = Counter()
    cached("thing", {"n": 1}, f)
    cached("thing", {"n": 2}, f)
    cached("other", {"n": 1}, f)
    assert f.calls == 3
    assert len(list(cdir.glob("*.pkl"))) == 3


def test_new_package_version_is_a_miss(cdir, monkeypatch):
    f = Counter()
    cached("thing", {"n": 1}, f)
    monkeypatch.setattr(cache_mod, "_package_version", lambda: "999.0")
    cached("thing", {"n": 1}, f)
    assert f.calls == 2


def test_numpy_results_round_trip(cdir):
    arr = np.random.default_rng(0).normal(size=(5, 3))
    out = cached("arr", {"k": 1}, lambda: arr)
    again = cached("arr", {"k": 1}, lambda: pytest.fail("should have been read from the cache"))
    np.testing.assert_array_equal(out, arr)
    np.testing.assert_array_equal(again, arr)
    assert again.dtype == arr.dtype


@pytest.mark.parametrize("garbage", [b"", b"not a pickle", pickle.dumps({"x": 1})[:-3]])
def test_corrupt_entry_is_recomputed_and_replaced(cdir, garbage):
    f = Counter("fresh")
    cdir.mkdir(parents=True)
    path = cdir / f"{cache_key('thing', {'n': 1})}.pkl"
    path.write_bytes(garbage)
    assert cached("thing", {"n": 1}, f) == {"value": "fresh", "call": 1}
    assert f.calls == 1
    with path.open("rb") as fh:
        assert pickle.load(fh) == {"value": "fresh", "call": 1}
    # and the repaired entry is now a hit
    assert cached("thing", {"n": 1}, f)["call"] == 1 and f.calls == 1


def test_disabled_bypasses_reading_and_writing(cdir):
    f = Counter()
    cached("thing", {"n": 1}, f, enabled=False)
    assert not cdir.exists()
    cached("thing", {"n": 1}, f)  # stores call 2
    assert f.calls == 2
    assert cached("thing", {"n": 1}, f, enabled=False)["call"] == 3  # ignores the stored entry
    assert cached("thing", {"n": 1}, f)["call"] == 2


def test_directory_argument_overrides_the_environment(cdir, tmp_path):
    other = tmp_path / "elsewhere"
    f = Counter()
    cached("thing", {"n": 1}, f, directory=other)
    assert len(list(other.glob("thing-*.pkl"))) == 1
    assert not cdir.exists()
    cached("thing", {"n": 1}, f, directory=str(other))
    assert f.calls == 1


def test_environment_variable_is_read_at_call_time(tmp_path, monkeypatch):
    f = Counter()
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "one"))
    cached("thing", {"n": 1}, f)
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "two"))
    cached("thing", {"n": 1}, f)
    assert f.calls == 2
    assert len(list((tmp_path / "one").iterdir())) == 1 and len(list((tmp_path / "two").iterdir())) == 1


def test_failed_compute_stores_nothing(cdir):
    def boom():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        cached("thing", {"n": 1}, boom)
    assert not cdir.exists() or not any(cdir.iterdir())


def test_no_temporary_files_left_behind(cdir):
    for n in range(3):
        cached("thing", {"n": n}, Counter())
    names = sorted(p.name for p in Path(cdir).iterdir())
    assert len(names) == 3 and all(name.endswith(".pkl") for name in names)
