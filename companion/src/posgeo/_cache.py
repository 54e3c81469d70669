"""A small on-disk cache for expensive results, keyed on inputs and package version."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar
import numpy as np
from typing import Any

__all__ = ['CACHE_ENV_VAR', 'cache_dir', 'cache_key', 'cached', 'array_digest']


CACHE_ENV_VAR = "POSGEO_CACHE_DIR"
"""Environment variable naming the cache directory (default ``~/.cache/posgeo``)."""

T = TypeVar("T")


def cache_dir() -> Path:
    """Return the cache directory (not created until something is stored).

    Returns
    -------
    pathlib.Path
        ``$POSGEO_CACHE_DIR`` when set, else ``~/.cache/posgeo``.

    Examples
    --------
    >>> import os
    >>> old = os.environ.get("POSGEO_CACHE_DIR")
    >>> os.environ["POSGEO_CACHE_DIR"] = "/tmp/posgeo-doctest-cache"
    >>> str(cache_dir())
    '/tmp/posgeo-doctest-cache'
    >>> if old is None:
    ...     del os.environ["POSGEO_CACHE_DIR"]
    ... else:
    ...     os.environ["POSGEO_CACHE_DIR"] = old
    """
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "posgeo"


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("posgeo")
    except PackageNotFoundError:  # pragma: no cover
        return "0.0.0"


def cache_key(name: str, key: dict[str, Any]) -> str:
    """Hash a result's name, its inputs and the package version into a file stem.

    Parameters
    ----------
    name : str
        What is cached (e.g. ``"marginals"``); becomes the file-name prefix.
    key : dict
        JSON-serialisable description of every input that determines the result.

    Returns
    -------
    str
        ``"<name>-<16 hex digits>"``.

    Examples
    --------
    >>> cache_key("demo", {"n": 3}) == cache_key("demo", {"n": 3})
    True
    >>> cache_key("demo", {"n": 3}) == cache_key("demo", {"n": 4})
    False
    """
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"cache name must be a non-empty string without '/', got {name!r}")
    try:
        blob = json.dumps({"key": key, "version": _package_version()}, sort_keys=True, default=str)
    except TypeError as exc:  # pragma: no cover - default=str handles most things
        raise TypeError(f"cache key for {name!r} is not serialisable: {exc}; pass plain values") from exc
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def cached(
    name: str,
    key: dict[str, Any],
    compute: Callable[[], T],
    *,
    enabled: bool = True,
    directory: str | os.PathLike[str] | None = None,
) -> T:
    """Return ``compute()``, reading it from the cache when an identical call was stored.

    Parameters
    ----------
    name : str
        What is cached; file-name prefix.
    key : dict
        Every input that determines the result (JSON-serialisable; other objects via ``str``).
    compute : callable
        Zero-argument function producing a picklable result.
    enabled : bool, default True
        ``False`` bypasses the cache entirely (always computes, never writes).
    directory : path, optional
        Cache directory; default :func:`cache_dir`.

    Returns
    -------
    object
        The (possibly cached) result.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> calls = []
    >>> f = lambda: calls.append(1) or 42
    >>> cached("answer", {"q": 1}, f, directory=d), cached("answer", {"q": 1}, f, directory=d)
    (42, 42)
    >>> len(calls)
    1
    """
    if not enabled:
        return compute()
    root = Path(directory) if directory is not None else cache_dir()
    path = root / f"{cache_key(name, key)}.pkl"
    if path.exists():
        try:
            with path.open("rb") as fh:
                return pickle.load(fh)  # noqa: S301 - our own cache files
        except Exception:  # corrupt or incompatible entry: recompute
            path.unlink(missing_ok=True)
    result = compute()
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("wb") as fh:
        pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return result


# --------------------------------------------------------------------------- tasks


def array_digest(*arrays: np.ndarray) -> str:
    """A short content hash of arrays (dtype, shape and bytes): identifies data in cache keys and names.

    Parameters
    ----------
    *arrays : numpy.ndarray

    Returns
    -------
    str
        16 hex digits.

    Examples
    --------
    >>> array_digest(np.zeros(3)) == array_digest(np.zeros(3)), array_digest(np.zeros(3)) == array_digest(np.zeros(4))
    (True, False)
    """
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]
