"""Tests for posgeo._cache: the on-disk cache of expensive results."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posgeo._cache as cache_mod
from posgeo import cached, file_digest
from posgeo._cache import CACHE_ENV_VAR, cache_dir, cache_key, function_digest


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
    assert files[0].stem == cache_key("thing", {"n": 1}, compute=f)  # f is defined here, outside posgeo
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


def test_edited_package_code_is_a_miss_and_unchanged_code_a_hit(cdir, tmp_path, monkeypatch):
    """Issue 47: the README told readers to clear the cache after editing posgeo; a reader who
    edited a function got the old result. The key now holds a hash of posgeo's sources."""
    import shutil

    copy = tmp_path / "posgeo-copy"
    shutil.copytree(Path(cache_mod.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__", "results"))
    monkeypatch.setattr(cache_mod, "_code_digest", lambda: cache_mod._tree_digest(str(copy)))
    f = Counter()
    cached("thing", {"n": 1}, f)
    cached("thing", {"n": 1}, f)
    assert f.calls == 1  # unchanged code: read back
    module = copy / "_geometry.py"
    module.write_text(module.read_text() + "\n# an edit\n")
    cache_mod._tree_digest.cache_clear()
    cached("thing", {"n": 1}, f)
    assert f.calls == 2  # edited code: recomputed


def test_a_helper_module_outside_the_package_is_part_of_the_key(cdir, tmp_path, monkeypatch):
    assert cache_key("k", {}, compute=np.mean) == cache_key("k", {})  # an installed library's function: no file hash
    """A chapter's helper module (outside posgeo) that computes a cached result: editing it recomputes."""
    import importlib
    import sys

    helper = tmp_path / "chapter_helper.py"
    helper.write_text("calls = []\ndef compute():\n    calls.append(1)\n    return 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("chapter_helper")
    assert cached("helped", {"n": 1}, mod.compute) == 41 and cached("helped", {"n": 1}, mod.compute) == 41
    assert mod.calls == [1]
    helper.write_text("calls = []\ndef compute():\n    calls.append(1)\n    return 42\n")
    os.utime(helper, ns=(1, 2))  # a new modification time, whatever the clock's resolution
    mod = importlib.reload(mod)
    assert cached("helped", {"n": 1}, mod.compute) == 42
    sys.modules.pop("chapter_helper", None)


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
    path = cdir / f"{cache_key('thing', {'n': 1}, compute=f)}.pkl"
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


# ----------------------------------------------------------------------------- resume=


def _count(limit, state, *, die_at=None, log=None):
    """Counts to ``limit``, saving after each number; raises KeyboardInterrupt at ``die_at``."""
    done = state.load() or 0
    if log is not None:
        log.append(done)
    for i in range(done, limit):
        if i == die_at:
            raise KeyboardInterrupt
        state.save(i + 1)
    return done


def test_resume_continues_an_interrupted_computation_and_then_forgets_its_state(cdir):
    starts = []
    with pytest.raises(KeyboardInterrupt):
        cached("count", {"to": 5}, lambda st: _count(5, st, die_at=3, log=starts), resume=True)
    assert [p.name.endswith(".partial.pkl") for p in cdir.iterdir()] == [True]
    assert cached("count", {"to": 5}, lambda st: _count(5, st, log=starts), resume=True) == 3
    assert starts == [0, 3]
    assert [p.name.endswith(".partial.pkl") for p in cdir.iterdir()] == [False]  # only the entry is left
    assert cached("count", {"to": 5}, lambda st: _count(5, st, log=starts), resume=True) == 3  # a hit
    assert starts == [0, 3]


def test_resume_state_is_keyed_like_the_entry(cdir):
    with pytest.raises(KeyboardInterrupt):
        cached("count", {"to": 5}, lambda st: _count(5, st, die_at=3), resume=True)
    assert cached("count", {"to": 6}, lambda st: _count(6, st), resume=True) == 0  # another key: from scratch
    assert cached("count", {"to": 5}, lambda st: _count(5, st), resume=True) == 3


def test_resume_without_the_cache_saves_nothing(cdir):
    with pytest.raises(KeyboardInterrupt):
        cached("count", {"to": 5}, lambda st: _count(5, st, die_at=3), resume=True, enabled=False)
    assert cached("count", {"to": 5}, lambda st: _count(5, st), resume=True, enabled=False) == 0
    assert not cdir.exists()


@pytest.mark.parametrize("garbage", [b"", b"not a pickle", pickle.dumps({"x": 1})[:-3]])
def test_a_corrupt_saved_state_is_discarded_and_the_computation_starts_over(cdir, garbage):
    with pytest.raises(KeyboardInterrupt):
        cached("count", {"to": 5}, lambda st: _count(5, st, die_at=3), resume=True)
    (partial,) = cdir.iterdir()
    partial.write_bytes(garbage)
    assert cached("count", {"to": 5}, lambda st: _count(5, st), resume=True) == 0


def test_a_finished_entry_clears_a_leftover_state(cdir):
    cached("count", {"to": 5}, lambda st: _count(5, st), resume=True)
    (entry,) = cdir.iterdir()
    leftover = entry.with_name(entry.stem + ".partial.pkl")
    leftover.write_bytes(pickle.dumps(2))  # e.g. another process stored the entry while this one ran
    assert cached("count", {"to": 5}, lambda st: _count(5, st), resume=True) == 0  # the stored result
    assert not leftover.exists()


def test_resume_must_be_a_bool(cdir):
    with pytest.raises(TypeError, match="resume must be True or False"):
        cached("count", {"to": 5}, lambda st: 0, resume=1)


# ----------------------------------------------------------------------------- expect=
def test_expect_must_be_a_type_or_tuple_of_types(cdir):
    for bad in ("list", (), (list, "x"), 3):
        with pytest.raises(TypeError, match="expect must be a type"):
            cached("thing", {"n": 1}, Counter(), expect=bad)


def test_a_computed_result_of_the_wrong_type_raises_and_is_not_stored(cdir):
    with pytest.raises(TypeError, match="returned a dict, not the expected list or tuple"):
        cached("thing", {"n": 1}, Counter(), expect=(list, tuple))
    assert not cdir.exists() or not any(cdir.glob("*.pkl"))
    with pytest.raises(TypeError, match="expected list"):
        cached("thing", {"n": 1}, Counter(), expect=list, enabled=False)


class DictSubclass(dict):
    pass


def test_expect_accepts_subclasses(cdir):
    assert cached("thing", {"n": 1}, lambda: {"a": 1}, expect=dict) == {"a": 1}
    assert cached("thing", {"n": 1}, lambda: pytest.fail("a hit"), expect=(dict, list)) == {"a": 1}
    assert isinstance(cached("other", {"n": 1}, DictSubclass, expect=dict), DictSubclass)
    assert isinstance(cached("other", {"n": 1}, lambda: pytest.fail("a hit"), expect=dict), DictSubclass)


# ----------------------------------------------------------------------------- writing
def test_keyboard_interrupt_while_writing_leaves_no_temp_file(cdir):
    class Interrupts:
        def __reduce__(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached("thing", {"n": 1}, lambda: [b"x" * 200_000, Interrupts()])
    assert list(cdir.iterdir()) == []


def test_an_unpicklable_result_is_returned_with_a_warning(cdir, monkeypatch):
    monkeypatch.setattr(cache_mod, "_warned_dirs", set())
    result = {"f": lambda: 1}
    with pytest.warns(UserWarning, match="cannot be pickled"):
        assert cached("thing", {"n": 1}, lambda: result) is result
    assert list(cdir.iterdir()) == []


def test_temp_names_are_unique_and_recognised(cdir, monkeypatch):
    names = []
    real_open = open

    def spy(file, mode="r", *args, **kwargs):
        if "x" in mode:
            names.append(Path(file).name)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(cache_mod, "open", spy, raising=False)
    for _ in range(3):
        cached("thing", {"n": 1}, Counter(), enabled=True, directory=cdir / "x")
        (cdir / "x" / f"{cache_key('thing', {'n': 1}, compute=Counter())}.pkl").unlink()
    assert len(set(names)) == 3
    stem = cache_key("thing", {"n": 1}, compute=Counter())
    assert all(cache_mod._TEMP_NAME.search(n) and n.startswith(stem + ".pkl.tmp-") for n in names)
    assert not cache_mod._TEMP_NAME.search(f"{cache_key('x.tmp-a-1-2-ab', {})}.pkl")  # entries never look like temps


def test_entries_whose_name_contains_tmp_are_not_purged(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "_last_purge", {})
    cached("data.tmp1", {"n": 1}, Counter(), directory=tmp_path)
    (entry,) = tmp_path.iterdir()
    os.utime(entry, (0, 0))  # very old
    monkeypatch.setattr(cache_mod, "_last_purge", {})
    cached("data.tmp1", {"n": 2}, Counter(), directory=tmp_path)
    assert entry.exists()


# ----------------------------------------------------------------------------- file_digest
def test_file_digest_is_the_sha256_of_the_bytes(tmp_path):
    import hashlib

    f = tmp_path / "f.bin"
    data = np.random.default_rng(0).bytes(3 * (1 << 20) + 17)  # several chunks
    f.write_bytes(data)
    assert file_digest(f) == file_digest(str(f)) == hashlib.sha256(data).hexdigest()
    link = tmp_path / "link"
    link.symlink_to(f)
    assert file_digest(link) == file_digest(f)


def test_file_digest_hashes_a_settled_file_once(tmp_path, monkeypatch):
    f = tmp_path / "f.txt"
    f.write_bytes(b"abc")
    calls = []
    real = cache_mod._hash_file
    monkeypatch.setattr(cache_mod, "_hash_file", lambda fh: calls.append(1) or real(fh))
    monkeypatch.setattr(cache_mod, "_RACY_NS", 0)  # treat the file as settled at once
    first = file_digest(f)
    assert file_digest(f) == first and len(calls) == 1
    st = f.stat()
    f.write_bytes(b"abd")  # same size, in place, then the old mtime restored
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert file_digest(f) != first and len(calls) == 2


def test_file_digest_rehashes_a_file_changed_just_now(tmp_path, monkeypatch):
    f = tmp_path / "f.txt"
    f.write_bytes(b"abc")
    calls = []
    real = cache_mod._hash_file
    monkeypatch.setattr(cache_mod, "_hash_file", lambda fh: calls.append(1) or real(fh))
    file_digest(f), file_digest(f)
    assert len(calls) == 2  # within the racy window nothing is remembered


def test_file_digest_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        file_digest(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a regular file"):
        file_digest(tmp_path)


# ----------------------------------------------------------------------------- function_digest
FACTOR = 2


def uses_global(x):
    return FACTOR * x


def test_function_digest_sees_constants_defaults_closures_and_nested_code():
    d = function_digest
    assert d(lambda m: {"a": 1.0}) == d(lambda m: {"a": 1.0})
    assert d(lambda m: {"a": 1.0}) != d(lambda m: {"a": 2.0})
    assert d(lambda m: m + 1) != d(lambda m: m - 1)  # bytecode
    assert d(lambda m, k=1: m + k) != d(lambda m, k=2: m + k)  # defaults
    assert d(lambda m, *, k=1: m + k) != d(lambda m, *, k=2: m + k)  # keyword defaults

    def make(v):
        return lambda m: m + v

    assert d(make(1)) == d(make(1)) and d(make(1)) != d(make(2))  # closure cells
    assert d(make([1, 2])) != d(make([1, 3])) and d(make(np.arange(3))) != d(make(np.arange(4)))
    assert d(make(torch.zeros(3))) != d(make(torch.ones(3)))
    assert d(lambda m: [m + 1 for _ in range(2)]) != d(lambda m: [m + 2 for _ in range(2)])  # nested code


def test_function_digest_sees_the_globals_it_reads(monkeypatch):
    before = function_digest(uses_global)
    monkeypatch.setitem(globals(), "FACTOR", 3)
    assert function_digest(uses_global) != before


def test_function_digest_names_library_functions_and_handles_recursion():
    import functools

    from posgeo import train

    assert function_digest(train) == function_digest(train)
    assert function_digest(np.mean) != function_digest(np.median)
    assert function_digest(functools.partial(uses_global, 1)) != function_digest(functools.partial(uses_global, 2))

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    assert len(function_digest(fact)) == 16
    assert function_digest(len) != function_digest(abs)


def test_function_digest_of_objects_and_dataclasses():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Scale:
        c: float

        def __call__(self, x):
            return self.c * x

    assert function_digest(Scale(1.0)) == function_digest(Scale(1.0)) != function_digest(Scale(2.0))

    class Shift:
        def __init__(self, c):
            self.c = c

        def apply(self, x):
            return x + self.c

    assert function_digest(Shift(1).apply) != function_digest(Shift(2).apply)
    lin = torch.nn.Linear(2, 2)
    before = function_digest(lambda x: lin(x))
    with torch.no_grad():
        lin.weight.add_(1.0)
    assert function_digest(lambda x: lin(x)) != before  # a module by its weights, not its repr


@pytest.mark.parametrize("value", [np.random.default_rng(0), threading.Lock(), iter([1, 2])],
                         ids=["generator", "lock", "iterator"])
def test_function_digest_refuses_what_it_cannot_see(value):
    with pytest.raises(ValueError, match=r"closure variable 'value'.*pass cache=False"):
        function_digest(lambda: value)
    with pytest.raises(TypeError, match="needs a callable"):
        function_digest(3)


def test_function_digest_is_the_same_in_every_process():
    import subprocess
    import sys

    script = (  # _cache.py alone (it needs only numpy): a child starts in a fraction of a second
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('posgeo_cache_under_test', {cache_mod.__file__!r})\n"
        "cache = importlib.util.module_from_spec(spec); sys.modules[spec.name] = cache; spec.loader.exec_module(cache)\n"
        "f = lambda x, k={'a', 'b', 'c'}: (x in {'p', 'q', 'r'}, k, {'z': 1}, cache.array_digest)\n"
        "print(cache.function_digest(f))\n"
    )
    outs = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and len(outs.pop()) == 16
