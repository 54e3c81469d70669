"""``posgeo audit``: how well do a model's positions fit a corpus's positional geometry?

    >>> import posgeo.audit as au
    >>> au.audit_settings("small").n_positions
    48

The command line is ``posgeo audit`` (:mod:`posgeo.__main__`); chapter 11 explains every number.
"""

from __future__ import annotations

from ._core import *  # noqa: F401,F403
from ._core import __all__  # noqa: F401
