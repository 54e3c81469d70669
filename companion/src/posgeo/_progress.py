"""Progress bars that honour both a function's ``progress=`` flag and ``TQDM_DISABLE``."""

from __future__ import annotations

import os
from typing import Any, Iterable
from tqdm import tqdm

__all__ = ['progress_bar']




def progress_bar(iterable: Iterable[Any], *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """Wrap ``iterable`` in a tqdm bar.

    ``enabled=False`` disables the bar; ``enabled=True`` leaves the decision to tqdm, so the
    environment variable ``TQDM_DISABLE=1`` (set by the book's notebooks and the test
    suite) still silences it. Passing ``disable=False`` to tqdm directly would override that
    variable.

    Parameters
    ----------
    iterable : iterable
    enabled : bool, keyword-only
    **kwargs
        Passed to :class:`tqdm.tqdm` (``desc``, ``total``, ``unit``, ...).

    Returns
    -------
    tqdm.tqdm

    Examples
    --------
    >>> sum(progress_bar(range(3), enabled=False))
    3
    """
    if not enabled or os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes", "on"):
        kwargs["disable"] = True
    return tqdm(iterable, **kwargs)
