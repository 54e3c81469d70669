"""Tests for posgeo._progress: progress bars honour ``enabled=`` and ``TQDM_DISABLE``.

tqdm reads ``TQDM_*`` environment variables once, when it is imported, so what the test
process inherited decides its defaults. The tests that depend on the environment therefore
run a fresh interpreter that loads ``_progress.py`` on its own (it needs only tqdm), with a
controlled environment.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

import posgeo._progress as progress_mod
from posgeo import progress_bar

MODULE = progress_mod.__file__


def run_fresh(body: str, *, tqdm_disable: str | None) -> subprocess.CompletedProcess:
    """Run ``body`` in a new interpreter with ``progress_bar`` loaded from _progress.py."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    if tqdm_disable is not None:
        env["TQDM_DISABLE"] = tqdm_disable
    prelude = f"""
        import importlib.util, io, os, sys
        spec = importlib.util.spec_from_file_location("posgeo_progress_under_test", {MODULE!r})
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        progress_bar = mod.progress_bar
    """
    code = textwrap.dedent(prelude) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)


def test_progress_bar_is_the_modules_one_public_name():
    # public so that posgeo.experiments and posgeo.audit use the library's bars, not their own
    assert progress_mod.__all__ == ["progress_bar"]
    import posgeo

    assert posgeo.progress_bar is progress_mod.progress_bar


def test_passes_items_through_in_order():
    buf = io.StringIO()
    assert list(progress_bar(iter([3, 1, 2]), enabled=False, file=buf)) == [3, 1, 2]
    assert sum(progress_bar(range(5), enabled=True, file=buf, desc="x")) == 10


def test_disabled_bar_writes_nothing():
    buf = io.StringIO()
    bar = progress_bar(range(50), enabled=False, file=buf, desc="quiet")
    assert bar.disable is True
    list(bar)
    assert buf.getvalue() == ""


def test_enabled_bar_draws_when_the_environment_allows():
    r = run_fresh(
        """
        buf = io.StringIO()
        bar = progress_bar(range(7), enabled=True, file=buf, desc="work", mininterval=0)
        disable = bar.disable  # read before iterating: closing a bar sets disable=True
        list(bar)
        print(repr(disable), repr(buf.getvalue()))
        """,
        tqdm_disable=None,
    )
    disable, drawn = r.stdout.split(" ", 1)
    assert disable == "False"
    assert "work" in drawn and "7/7" in drawn


def test_tqdm_disable_set_before_import_silences_an_enabled_bar():
    r = run_fresh(
        """
        buf = io.StringIO()
        list(progress_bar(range(7), enabled=True, file=buf, desc="work"))
        print(repr(buf.getvalue()))
        """,
        tqdm_disable="1",
    )
    assert r.stdout.strip() == "''"


def test_tqdm_disable_set_after_import_silences_an_enabled_bar():
    # What a notebook does: import posgeo, then notebook_setup() sets TQDM_DISABLE=1.
    r = run_fresh(
        """
        os.environ["TQDM_DISABLE"] = "1"
        buf = io.StringIO()
        list(progress_bar(range(7), enabled=True, file=buf, desc="work"))
        print(repr(buf.getvalue()))
        """,
        tqdm_disable=None,
    )
    assert r.stdout.strip() == "''"


@pytest.mark.parametrize("kwargs", [{"total": 3}, {"total": 11, "leave": False}])
def test_keyword_arguments_reach_tqdm(kwargs):
    bar = progress_bar(range(3), enabled=False, file=io.StringIO(), **kwargs)
    for key, value in kwargs.items():
        assert getattr(bar, key) == value


def test_desc_reaches_tqdm():
    r = run_fresh(
        """
        buf = io.StringIO()
        list(progress_bar(range(2), file=buf, desc="named-bar", unit="batch", mininterval=0))
        print(repr(buf.getvalue()))
        """,
        tqdm_disable=None,
    )
    assert "named-bar" in r.stdout and "batch" in r.stdout
