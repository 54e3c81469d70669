"""posgeo's one validation module: checks of sizes, scalars and arrays with errors that name the fix.

Every public function of the library and of :mod:`posgeo.experiments` validates its inputs
through these helpers, so the same mistake reads the same everywhere::

    >>> from posgeo.validation import check_int
    >>> check_int(3, "n")
    3
    >>> check_int(0, "n")
    Traceback (most recent call last):
    ...
    ValueError: n must be an int >= 1, got 0
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
import math
from typing import Any
import torch

__all__ = ['check_table', 'MAX_SIZE', 'check_int', 'check_float', 'check_real_array']


# --------------------------------------------------------------------------- statistics


def check_table(P: Any, what: str = "P") -> NDArray[np.float64]:
    if isinstance(P, torch.Tensor):
        P = P.detach().to("cpu", torch.float64).numpy()
    arr = np.asarray(P)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} must be a numeric (n, d) array, got dtype {arr.dtype}; pass a position table")
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a 2-d (n, d) position table, got shape {arr.shape}; pass one row per position")
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"{what} needs at least 2 positions and 1 dimension, got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contains NaN or infinite entries; a position table must be finite")
    return arr

MAX_SIZE = 2**31 - 1
"""Largest size (sequence length, vocabulary, count of draws) a check accepts by default."""


def check_int(value: Any, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` after checking its type and range.

    Parameters
    ----------
    value : object
        The candidate; ``bool`` is refused (``True`` is not a size).
    name : str
        The parameter's name, used in the message.
    minimum : int, keyword-only, default 1
    maximum : int, keyword-only, optional
        Default :data:`MAX_SIZE`.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an integer.
    ValueError
        ``value`` is outside ``[minimum, maximum]``.

    Examples
    --------
    >>> check_int(np.int64(4), "k", minimum=2)
    4
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    top = MAX_SIZE if maximum is None else maximum
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value}")
    if value > top:
        raise ValueError(f"{name} must be an int <= {top}, got {value}; pass a smaller value")
    return int(value)


def check_float(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` after checking its type and range.

    Parameters
    ----------
    value : object
        A real number (``bool`` and complex refused); NaN and infinities are refused.
    name : str
    minimum, maximum : float, keyword-only, optional
        Bounds (inclusive, unless ``strict_minimum``).
    strict_minimum : bool, keyword-only, default False
        Require ``value > minimum``.

    Returns
    -------
    float

    Raises
    ------
    TypeError, ValueError

    Examples
    --------
    >>> check_float(0.5, "p", minimum=0.0, maximum=1.0)
    0.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if minimum is not None and (v <= minimum if strict_minimum else v < minimum):
        raise ValueError(f"{name} must be {'>' if strict_minimum else '>='} {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_real_array(value: Any, name: str) -> np.ndarray:
    """Return ``value`` as a float64 array, refusing complex input (which ``astype`` would truncate).

    Parameters
    ----------
    value : array-like
    name : str

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    TypeError
        Complex, object or string input.

    Examples
    --------
    >>> check_real_array([1, 2], "x").dtype
    dtype('float64')
    >>> check_real_array([1j], "x")
    Traceback (most recent call last):
    ...
    TypeError: x must be real, got a complex array; pass its real part or its modulus explicitly
    """
    arr = np.asarray(value)
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got a complex array; pass its real part or its modulus explicitly")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)
