"""Experiment profiles: ``small`` (2-core CPU, what the book and CI run) and ``full`` (paper scale)."""

from __future__ import annotations

import os

__all__ = ['current_profile']


PROFILE_ENV_VAR = "POSGEO_PROFILE"
"""Environment variable selecting the profile of every chapter (default ``small``)."""

PROFILES = ("small", "full")
"""The profile names: ``small`` (2-core CPU, what the book and CI run) and ``full`` (paper scale)."""


def current_profile(profile: str | None = None) -> str:
    """Resolve the experiment profile.

    Parameters
    ----------
    profile : str, optional
        ``"small"`` or ``"full"``; default ``$POSGEO_PROFILE`` or ``"small"``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For an unknown profile name.

    Examples
    --------
    >>> current_profile("full")
    'full'
    """
    name = profile if profile is not None else os.environ.get(PROFILE_ENV_VAR, "small")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; use one of {PROFILES} (e.g. POSGEO_PROFILE=small)")
    return name
