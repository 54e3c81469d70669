"""Tests for posgeo._profiles: choosing the experiment profile."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posgeo import current_profile
from posgeo._profiles import PROFILE_ENV_VAR, PROFILES


def test_constants():
    assert PROFILE_ENV_VAR == "POSGEO_PROFILE"
    assert PROFILES == ("small", "full")


def test_default_is_small(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV_VAR, raising=False)
    assert current_profile() == "small"


@pytest.mark.parametrize("name", ["small", "full"])
def test_environment_selects_the_profile(monkeypatch, name):
    monkeypatch.setenv(PROFILE_ENV_VAR, name)
    assert current_profile() == name


def test_explicit_argument_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV_VAR, "full")
    assert current_profile("small") == "small"
    monkeypatch.setenv(PROFILE_ENV_VAR, "small")
    assert current_profile("full") == "full"


def test_environment_is_read_at_call_time(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV_VAR, "small")
    assert current_profile() == "small"
    monkeypatch.setenv(PROFILE_ENV_VAR, "full")
    assert current_profile() == "full"


def test_unknown_argument_is_rejected_with_the_choices(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV_VAR, raising=False)
    with pytest.raises(ValueError, match=r"unknown profile 'medium'.*small.*full"):
        current_profile("medium")


def test_unknown_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV_VAR, "huge")
    with pytest.raises(ValueError, match=r"'huge'.*POSGEO_PROFILE"):
        current_profile()
    # an explicit valid argument still works
    assert current_profile("full") == "full"


@given(name=st.text(max_size=8).filter(lambda s: s not in PROFILES))
def test_every_other_name_is_rejected(name):
    with pytest.raises(ValueError, match="unknown profile"):
        current_profile(name)
