"""Tests for posgeo/__init__.py: the flat namespace, loaded lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time

import posgeo


def test_export_table_matches_every_modules_all():
    for module, names in posgeo._EXPORTS_BY_MODULE.items():
        mod = importlib.import_module(f"posgeo.{module}")
        assert tuple(mod.__all__) == names, f"posgeo/__init__.py's table for {module} differs from its __all__"
    assert len(posgeo.__all__) == len(set(posgeo.__all__)), "a name is exported by two modules"


def test_every_public_name_resolves_to_its_module():
    for name in posgeo.__all__:
        value = getattr(posgeo, name)
        if name != "__version__" and hasattr(value, "__module__") and callable(value):
            assert value.__module__.startswith("posgeo."), name


def test_unknown_names_raise_attribute_error():
    try:
        posgeo.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("posgeo.no_such_name did not raise")


def test_import_is_cheap_and_imports_no_heavy_module():
    code = "import sys, posgeo; print(sorted(m for m in ('torch', 'transformers', 'scipy', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"import posgeo imported {out}"


def test_cli_help_answers_in_well_under_a_second():
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "posgeo", "audit", "--help"], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0 and "--positions" in proc.stdout
    assert elapsed < 1.5, f"posgeo audit --help took {elapsed:.2f} s (python start-up included)"
    code = "import sys, posgeo.__main__ as m; m.build_parser(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
