"""A small on-disk cache for expensive results, keyed on inputs and on the code that computes them.

What the cache promises (issue 16, "nothing stale, nothing lost"):

- *Nothing stale.* Keys hold the code: a hash of every source file of the installed posgeo
  (:func:`_code_digest`), and of the file that defines the computation when it lies outside
  the package (a chapter's helper module), so that edited code recomputes and unchanged code
  reads its results back. Keys describe inputs by content: local files by a hash of their bytes
  (:func:`file_digest`), arrays by their bytes (:func:`array_digest`), functions by their
  code, closure and referenced globals (:func:`function_digest`). An entry that does not
  unpickle, or holds an object of the wrong type (``expect=``), is deleted and recomputed.
- *Nothing lost.* A result that was computed is returned even when it cannot be stored (a
  read-only or full disk, a cache path that is a file): :func:`cached` warns once per
  directory and process and goes on. Entries are written to a uniquely named temporary file
  and renamed into place (:func:`os.replace`, atomic), so concurrent writers of one key (threads
  or processes) never see a half-written entry; the temporary file is removed on every way
  out, and the leftovers of a killed writer are purged by the next writer.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import dis
import enum
import functools
import hashlib
import importlib.metadata
import json
import os
import pickle
import re
import secrets
import socket
import stat
import sys
import threading
import time
import types
import warnings
from pathlib import Path, PurePath
from typing import Callable, TypeVar
import numpy as np
from typing import Any

__all__ = ['cached', 'array_digest', 'file_digest']


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


@functools.lru_cache(maxsize=None)
def _tree_digest(root: str) -> str:
    h = hashlib.sha256()
    base = Path(root)
    for path in sorted(base.rglob("*.py")):
        h.update(path.relative_to(base).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _code_digest() -> str:
    """A hash of every Python source file of the installed posgeo package.

    Part of every cache key: a result cached by other code (an edited function, another
    version) is never returned.

    Returns
    -------
    str
        16 hex digits (computed once per process).

    Examples
    --------
    >>> len(_code_digest()), _code_digest() == _code_digest()
    (16, True)
    """
    return _tree_digest(str(Path(__file__).resolve().parent))


@functools.lru_cache(maxsize=256)
def _file_sha(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _defining_file_digest(compute: Callable[..., Any]) -> str | None:
    """A hash of the source file that defines ``compute`` when it is not part of posgeo (a
    chapter's helper module); ``None`` for posgeo's own code (in :func:`_code_digest`) and for
    code without a file (a notebook cell)."""
    fn: Any = compute
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    name = getattr(fn, "__module__", None) or ""
    if name.partition(".")[0] != "posgeo" and _provider_version(name) is not None:
        return None  # an installed library's code: its version is what identifies it
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        return None
    path = Path(file).resolve()
    if Path(__file__).resolve().parent in path.parents:
        return None
    try:
        st = path.stat()
        return _file_sha(str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def cache_key(name: str, key: dict[str, Any], *, compute: Callable[..., Any] | None = None) -> str:
    """Hash a result's name, its inputs, the package version and its code into a file stem.

    Parameters
    ----------
    name : str
        What is cached (e.g. ``"marginals"``); becomes the file-name prefix.
    key : dict
        JSON-serialisable description of every input that determines the result.
    compute : callable, keyword-only, optional
        The computation, as given to :func:`cached`: when it is defined in a source file
        outside posgeo (a chapter's helper module), that file's hash joins the key.

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
    helper = None if compute is None else _defining_file_digest(compute)
    if helper is not None:
        key = {"inputs": key, "helper": helper}
    try:
        blob = json.dumps({"key": key, "version": _package_version(), "code": _code_digest()}, sort_keys=True,
                          default=str)
    except TypeError as exc:  # pragma: no cover - default=str handles most things
        raise TypeError(f"cache key for {name!r} is not serialisable: {exc}; pass plain values") from exc
    return f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def cached(
    name: str,
    key: dict[str, Any],
    compute: Callable[..., T],
    *,
    enabled: bool = True,
    directory: str | os.PathLike[str] | None = None,
    expect: type | tuple[type, ...] | None = None,
    resume: bool = False,
) -> T:
    """Return ``compute()``, reading it from the cache when an identical call was stored.

    An entry that cannot be unpickled, or (with ``expect``) holds an object of another type,
    is deleted and recomputed. The result is written to a temporary file named after the
    process, thread and a random token, then renamed over the entry (:func:`os.replace`), so
    that concurrent writers of one key (threads or processes) each return their own result
    and readers never see half an entry; the temporary file is removed on every way out
    (exceptions and ``KeyboardInterrupt`` included). A process killed mid-write leaves its
    temporary file behind: the next write to the directory deletes those of dead processes of
    this host and any older than an hour. A result that cannot be stored (read-only or full
    disk, a cache path that is a file, an unpicklable result) is still returned, with one
    :class:`UserWarning` per directory and process.

    Parameters
    ----------
    name : str
        What is cached; file-name prefix.
    key : dict
        Every input that determines the result (JSON-serialisable; other objects via ``str``).
        Describe local files with :func:`file_digest`, arrays with :func:`array_digest` and
        functions with :func:`function_digest`, never by a path or a name alone.
    compute : callable
        Zero-argument function producing a picklable result (one argument with ``resume=True``).
    enabled : bool, default True
        ``False`` bypasses the cache entirely (always computes, never writes).
    directory : path, optional
        Cache directory; default :func:`cache_dir`.
    expect : type or tuple of types, optional
        The type(s) of a valid result: a stored entry of another type is purged and
        recomputed, and a computed result of another type raises ``TypeError``.
    resume : bool, default False
        For long computations that can continue from a saved state (training): ``compute`` is
        then called with one argument, a handle whose ``load()`` returns the state the last
        interrupted computation of this key saved (``None`` if none) and whose ``save(state)``
        stores a picklable state beside the entry (atomically, like an entry), under the same key:
        a state is only ever resumed by an identical call. The state is deleted once the result
        is stored; a state that does not unpickle is deleted and ``load()`` returns ``None``.
        With ``enabled=False`` nothing is saved and ``load()`` returns ``None``.

    Returns
    -------
    object
        The (possibly cached) result.

    Raises
    ------
    TypeError
        ``expect`` is not a type or tuple of types, or ``compute()`` returned another type.
    ValueError
        A bad ``name`` (see :func:`cache_key`).

    Warns
    -----
    UserWarning
        Once per directory and process, when a result cannot be written to the cache
        (the message names the directory and ``POSGEO_CACHE_DIR``).

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
    >>> cached("answer", {"q": 1}, lambda: [42], directory=d, expect=list)  # the stored int is purged
    [42]

    A computation that saves its state as it goes resumes where an interrupted call stopped:

    >>> def count_to(limit, state):
    ...     done = state.load() or 0
    ...     for i in range(done, limit):
    ...         if i == 3 and not calls:
    ...             calls.append("interrupted")
    ...             raise KeyboardInterrupt
    ...         state.save(i + 1)
    ...     return f"counted from {done}"
    >>> calls.clear()
    >>> try:
    ...     cached("count", {"to": 5}, lambda state: count_to(5, state), directory=d, resume=True)
    ... except KeyboardInterrupt:
    ...     pass
    >>> cached("count", {"to": 5}, lambda state: count_to(5, state), directory=d, resume=True)
    'counted from 3'
    """
    expect = _check_expect(expect)
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {resume!r}")
    if not enabled:
        return _checked(compute(_Resume(None, name)) if resume else compute(), expect, name)
    root = Path(directory) if directory is not None else cache_dir()
    path = root / f"{cache_key(name, key, compute=compute)}.pkl"  # compute: a chapter helper's own source
    state = _Resume(root, name, path.with_name(path.stem + ".partial.pkl")) if resume else None
    hit, value = _load(path, expect)
    if hit:
        if state is not None:
            state.clear()  # a finished computation's leftover state (another process stored the entry)
        return value
    result = _checked(compute(state) if state is not None else compute(), expect, name)
    _store(root, path, result, name)
    if state is not None:
        state.clear()
    return result


class _Resume:
    """The handle :func:`cached` passes to a resumable computation: its saved state, by key.

    ``root=None``: a disabled cache (nothing saved, nothing loaded).
    """

    def __init__(self, root: Path | None, name: str, path: Path | None = None) -> None:
        self._root, self._name, self._path = root, name, path

    def load(self) -> Any:
        """The state saved by the last interrupted computation of this key, or ``None``."""
        if self._path is None:
            return None
        hit, value = _load(self._path, None)
        return value if hit else None

    def save(self, state: Any) -> None:
        """Store ``state`` (picklable) atomically; a failure to write warns once and is not raised."""
        if self._root is not None and self._path is not None:
            _store(self._root, self._path, state, f"{self._name} (saved state)")

    def clear(self) -> None:
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)


# --------------------------------------------------------------------------- reading and writing entries

_STALE_TEMP_SECONDS = 3600.0
"""A temporary file older than this is a dead writer's leftover (no live write takes an hour)."""
_PURGE_INTERVAL_SECONDS = 600.0
"""How often a process scans a cache directory for stale temporary files (at its next write)."""
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"
_TEMP_NAME = re.compile(r"\.pkl\.tmp-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-\d+-[0-9a-f]+$")
"""``<entry>.pkl.tmp-<host>-<pid>-<thread id>-<random hex>``: the temporary files of :func:`cached`."""
_LEGACY_TEMP_NAME = re.compile(r"\.tmp\d+$")
"""``<entry stem>.tmp<pid>``: the temporary files of posgeo versions before issue 16."""
_state_lock = threading.Lock()
_warned_dirs: set[str] = set()
"""Directories (and unpicklable result names) already warned about in this process."""
_last_purge: dict[str, float] = {}
"""When this process last purged stale temporary files from each directory (``time.time()``)."""


def _check_expect(expect: Any) -> type | tuple[type, ...] | None:
    if expect is None or isinstance(expect, type):
        return expect
    if isinstance(expect, tuple) and expect and all(isinstance(t, type) for t in expect):
        return expect
    raise TypeError(f"expect must be a type or a non-empty tuple of types, got {expect!r}; e.g. expect=dict")


def _type_names(expect: type | tuple[type, ...]) -> str:
    types_ = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(t.__qualname__ for t in types_)


def _checked(result: T, expect: type | tuple[type, ...] | None, name: str) -> T:
    if expect is not None and not isinstance(result, expect):
        raise TypeError(
            f"the computation cached as {name!r} returned a {type(result).__qualname__}, not the expected "
            f"{_type_names(expect)}; fix compute() or the expect= argument"
        )
    return result


def _load(path: Path, expect: type | tuple[type, ...] | None) -> tuple[bool, Any]:
    """``(True, value)`` for a valid entry; ``(False, None)`` for none, an unreadable or an invalid one (deleted)."""
    try:
        fh = open(path, "rb")
    except OSError:  # no entry (or an unreadable cache): compute
        return False, None
    with fh:
        try:
            value = pickle.load(fh)  # noqa: S301 - our own cache files
        except Exception:  # corrupt, truncated or incompatible entry: recompute
            _discard(path, fh)
            return False, None
        if expect is not None and not isinstance(value, expect):  # a valid pickle of the wrong object
            _discard(path, fh)
            return False, None
    return True, value


def _discard(path: Path, fh: Any) -> None:
    """Delete the invalid entry read through ``fh``, unless another writer already replaced it."""
    with contextlib.suppress(OSError):
        read, now = os.fstat(fh.fileno()), os.stat(path)
        if (read.st_dev, read.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(path)


def _store(root: Path, path: Path, result: Any, name: str) -> None:
    """Write ``result`` to ``path`` atomically; warn (once) instead of raising when that fails."""
    tmp: str | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        _purge_stale_temps(root)
        candidate = f"{path}.tmp-{_HOST}-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
        fh = open(candidate, "xb")  # exclusive: never another writer's file
        tmp = candidate
        with fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:  # read-only, full, or not a directory: keep the result, say why it is not stored
        _warn_once(
            str(root),
            f"cannot write to the posgeo cache directory {root} ({exc}); the result of {name!r} is returned but "
            f"not stored, and will be recomputed next time. Set {CACHE_ENV_VAR} to a writable directory with free "
            "space, or pass cache=False to skip the cache.",
        )
    except Exception as exc:  # noqa: BLE001 - an unpicklable result: keep it, say why it is not stored
        _warn_once(
            f"unpicklable:{root}:{name}",
            f"the result of {name!r} cannot be pickled ({type(exc).__name__}: {exc}), so it is not stored in the "
            f"posgeo cache directory {root} ({CACHE_ENV_VAR}); return picklable values from the computation, "
            "or pass cache=False.",
        )
    finally:  # every way out, KeyboardInterrupt included: no partial temporary file
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _warn_once(what: str, message: str) -> None:
    with _state_lock:
        if what in _warned_dirs:
            return
        _warned_dirs.add(what)
    warnings.warn(message, UserWarning, stacklevel=4)


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # pragma: no cover - os.kill(pid, 0) is not a probe on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists
        return True
    return True


def _purge_stale_temps(root: Path) -> None:
    """Delete temporary files of dead writers of this host, and any older than an hour (SIGKILL leftovers)."""
    now = time.time()
    with _state_lock:
        last = _last_purge.get(str(root))
        if last is not None and now - last < _PURGE_INTERVAL_SECONDS:
            return
        _last_purge[str(root)] = now
    try:
        scan = os.scandir(root)
    except OSError:
        return
    with scan:
        for entry in scan:
            m = _TEMP_NAME.search(entry.name)
            if m is None and _LEGACY_TEMP_NAME.search(entry.name) is None:
                continue  # an entry (they end in .pkl) or someone else's file
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    continue
                dead = (
                    m is not None and m["host"] == _HOST and int(m["pid"]) != os.getpid()
                    and not _pid_alive(int(m["pid"]))
                )
                if dead or now - st.st_mtime > _STALE_TEMP_SECONDS:
                    os.unlink(entry.path)


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


# --------------------------------------------------------------------------- content digests of files

_FILE_CHUNK = 1 << 20
"""Bytes read at a time by :func:`file_digest` (it never holds a whole file in memory)."""
_RACY_NS = 2_000_000_000
"""A file changed less than this long ago is hashed again at every call (see :func:`file_digest`)."""
_file_digests: dict[tuple[Any, ...], str] = {}
_file_digest_lock = threading.Lock()


def _file_state(path: str, st: os.stat_result) -> tuple[Any, ...]:
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _hash_file(fh: Any) -> str:
    h = hashlib.sha256()
    while chunk := fh.read(_FILE_CHUNK):
        h.update(chunk)
    return h.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes: identifies a local file in cache keys by its content.

    A path, size and modification time do not identify a file: ``cp -p``, ``rsync -a`` and
    restores from backups replace a file by another of the same size and keep its mtime.
    The bytes are read in chunks of 1 MiB. Within a process the digest is remembered per
    (resolved path, device, inode, size, mtime, ctime), so a run hashes each file once; the
    inode-change time ``ctime`` cannot be set from user space (``os.utime`` updates it), and a
    file changed in the last two seconds is hashed again at every call, since a rewrite within
    one tick of the file system's clock can leave all of these unchanged.

    Parameters
    ----------
    path : str or path
        A regular file (symbolic links are followed).

    Returns
    -------
    str
        64 hex digits, the same as ``sha256sum`` prints.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is a directory, a device or a pipe, not a regular file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "data.txt"
    >>> _ = f.write_bytes(b"abc")
    >>> file_digest(f)
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'
    >>> _ = f.write_bytes(b"abd")  # same size, new content
    >>> file_digest(f)[:16]
    'a52d159f262b2c6d'
    """
    resolved = os.path.realpath(os.fspath(path))
    st = os.stat(resolved)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(
            f"{os.fspath(path)!r} is not a regular file; file_digest hashes the bytes of a file: "
            "pass a file, not a directory, device or pipe"
        )
    with _file_digest_lock:
        known = _file_digests.get(_file_state(resolved, st))
    if known is not None:
        return known
    with open(resolved, "rb") as fh:
        before = os.fstat(fh.fileno())
        digest = _hash_file(fh)
        after = os.fstat(fh.fileno())
    state = _file_state(resolved, before)
    settled = time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) > _RACY_NS
    if settled and state == _file_state(resolved, after):  # unchanged while read, and not just written
        with _file_digest_lock:
            if len(_file_digests) >= 65536:
                _file_digests.clear()
            _file_digests[state] = digest
    return digest


# --------------------------------------------------------------------------- content digests of functions


class _Unhashable(Exception):
    """A value reached by :func:`function_digest` has no stable content hash."""


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented), range, slice)
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType,
    types.MethodDescriptorType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
    types.MemberDescriptorType,
)
_GLOBAL_OPS = frozenset({
    "LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME", "DELETE_NAME",
    "LOAD_FROM_DICT_OR_GLOBALS",
})
_SKIPPED_CLASS_ATTRIBUTES = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "_abc_impl"})
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class created by a class statement (or type())


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@functools.lru_cache(maxsize=None)
def _provider_version(module_name: str | None) -> str | None:
    """``"<distribution>-<version>"`` (or Python's version for the standard library) of the
    code that defines ``module_name``; ``None`` for a user's own code (``__main__``, scripts,
    test modules), whose functions are hashed by their code instead."""
    if not module_name:
        return None
    top = module_name.partition(".")[0]
    if top == "__main__":
        return None
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return "python-" + ".".join(map(str, sys.version_info[:3]))
    for dist in _packages_distributions().get(top, ()):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return f"{dist}-{importlib.metadata.version(dist)}"
    return None


def _reachable(obj: Any) -> bool:
    """Whether ``obj`` is what its module and qualified name name (not a lambda or a local function)."""
    qualname = getattr(obj, "__qualname__", "")
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None or not qualname or "<" in qualname:
        return False
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target is obj


def _python_defined(cls: type) -> bool:
    """Whether every class of ``cls``'s MRO (but ``object``) is Python source, so an instance's
    whole state lies in its ``__dict__`` and slots (no state of a C type the cache cannot see)."""
    for c in cls.__mro__[:-1]:
        if not c.__flags__ & _HEAPTYPE:
            return False
        if c.__module__ == "__main__":
            continue
        file = getattr(sys.modules.get(c.__module__), "__file__", None)
        if not (isinstance(file, str) and file.endswith(".py")):
            return False
    return True


def _short_repr(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - only for a message
        text = f"<{type(obj).__qualname__}>"
    return text if len(text) <= 60 else text[:57] + "..."


class _Hasher:
    """One traversal of :func:`function_digest`: content hashes of the values a function reaches."""

    def __init__(self) -> None:
        self.memo: dict[int, str] = {}
        self.active: set[int] = set()
        self.keep: list[Any] = []  # keeps hashed objects alive, so that their ids stay theirs
        self.path: list[str] = []

    def digest(self, obj: Any, where: str) -> str:
        key = id(obj)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:  # a cycle (a recursive function, a self-referencing container)
            return "cycle"
        self.active.add(key)
        self.path.append(where)
        try:
            parts = self.parts(obj)
        finally:
            self.active.discard(key)
            self.path.pop()
        out = hashlib.sha256(repr(parts).encode()).hexdigest()
        self.memo[key] = out
        self.keep.append(obj)
        return out

    def refuse(self, obj: Any, why: str = "") -> None:
        where = " of ".join(reversed(self.path[1:])) or "it"
        raise _Unhashable(
            f"{where} is a {type(obj).__module__}.{type(obj).__qualname__} ({_short_repr(obj)}), "
            f"which has no stable content hash{why}"
        )

    def parts(self, obj: Any) -> tuple[Any, ...]:  # noqa: C901 - one case per kind of value
        t = type(obj)
        torch = sys.modules.get("torch")
        pandas = sys.modules.get("pandas")
        if isinstance(obj, enum.Enum):
            return ("enum", self.digest(t, "its class"), obj.name)
        if t in _PLAIN_TYPES:
            return ("plain", t.__name__, repr(obj))
        if isinstance(obj, np.generic):
            return ("numpy scalar", obj.dtype.str, obj.tobytes().hex())
        if isinstance(obj, (bool, int, float, complex, str, bytes)):  # a subclass of a plain type
            return ("plain subclass", self.digest(t, "its class"), repr(obj))
        if isinstance(obj, np.ndarray):
            if isinstance(obj, np.ma.MaskedArray):
                return ("masked array", self.digest(obj.data, "its data"), self.digest(np.ma.getmaskarray(obj), "its mask"))
            if obj.dtype.hasobject:
                return ("object array", obj.shape, tuple(self.digest(x, f"element {i}") for i, x in enumerate(obj.ravel().tolist())))
            return ("array", t.__qualname__, array_digest(obj))
        if torch is not None and isinstance(obj, torch.Tensor):
            try:
                flat = obj.detach().cpu().contiguous().reshape(-1)
                raw = flat.view(torch.uint8).numpy().tobytes()
            except Exception as exc:  # noqa: BLE001 - sparse, quantized, meta tensors...
                self.refuse(obj, f" (its bytes cannot be read: {exc})")
            return ("tensor", t.__qualname__, str(obj.dtype), tuple(obj.shape), bool(obj.requires_grad),
                    hashlib.sha256(raw).hexdigest())
        if torch is not None and isinstance(obj, (torch.dtype, torch.device)):
            return ("torch", t.__qualname__, str(obj))
        if isinstance(obj, np.dtype):
            return ("dtype", obj.str, str(obj))
        if isinstance(obj, (tuple, list)):
            kind = t.__name__ if t in (tuple, list) else self.digest(t, "its class")
            return ("sequence", kind, tuple(self.digest(x, f"item {i}") for i, x in enumerate(obj)))
        if isinstance(obj, dict):  # insertion order is kept: iterating over a dict depends on it
            kind = t.__name__ if t is dict else self.digest(t, "its class")
            factory = self.digest(getattr(obj, "default_factory", None), "its default_factory")
            items = tuple((self.digest(k, "a key"), self.digest(v, f"item {k!r}")) for k, v in obj.items())
            return ("dict", kind, factory, items)
        if isinstance(obj, (set, frozenset)):  # iteration order varies with hash randomisation: sort
            kind = t.__name__ if t in (set, frozenset) else self.digest(t, "its class")
            return ("set", kind, tuple(sorted(self.digest(x, "an element") for x in obj)))
        if isinstance(obj, types.FunctionType):
            return self.function(obj)
        if isinstance(obj, types.MethodType):
            return ("method", self.digest(obj.__func__, "its function"), self.digest(obj.__self__, "its object"))
        if isinstance(obj, functools.partial):
            return ("partial", self.digest(obj.func, "its function"), self.digest(obj.args, "its arguments"),
                    self.digest(obj.keywords, "its keywords"))
        if isinstance(obj, functools._lru_cache_wrapper):  # type: ignore[attr-defined]
            return ("lru_cache", self.digest(obj.__wrapped__, "the function it wraps"))
        if isinstance(obj, (staticmethod, classmethod)):
            return (t.__name__, self.digest(obj.__func__, "its function"))
        if isinstance(obj, property):
            return ("property", *(self.digest(f, name) for f, name in ((obj.fget, "getter"), (obj.fset, "setter"), (obj.fdel, "deleter"))))
        if isinstance(obj, _BUILTIN_CALLABLES) or isinstance(obj, np.ufunc):
            return self.builtin(obj)
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__, _provider_version(obj.__name__) or "")
        if isinstance(obj, type):
            return self.cls(obj)
        if isinstance(obj, types.CodeType):
            return self.code(obj, {})
        if isinstance(obj, PurePath):
            return ("path", t.__qualname__, str(obj))
        if pandas is not None and isinstance(obj, (pandas.DataFrame, pandas.Series, pandas.Index)):
            try:
                hashed = pandas.util.hash_pandas_object(obj, index=not isinstance(obj, pandas.Index)).to_numpy()
            except Exception as exc:  # noqa: BLE001 - unhashable cells
                self.refuse(obj, f" (pandas cannot hash it: {exc})")
            labels = [str(c) for c in obj.columns] if isinstance(obj, pandas.DataFrame) else [str(obj.name)]
            dtypes = [str(d) for d in obj.dtypes] if isinstance(obj, pandas.DataFrame) else [str(obj.dtype)]
            return ("pandas", t.__qualname__, obj.shape, tuple(labels), tuple(dtypes), array_digest(hashed))
        if dataclasses.is_dataclass(obj):
            fields = tuple((f.name, self.digest(getattr(obj, f.name), f"field {f.name!r}")) for f in dataclasses.fields(obj))
            return ("dataclass", self.digest(t, "its class"), fields)
        module = getattr(obj, "__module__", None)
        if callable(obj) and isinstance(module, str) and _provider_version(module) and _reachable(obj):
            return ("library callable", module, obj.__qualname__, _provider_version(module))  # e.g. numpy's dispatchers
        if _python_defined(t):
            state = dict(getattr(obj, "__dict__", {}))
            for c in t.__mro__:
                slots = c.__dict__.get("__slots__", ())
                for slot in (slots,) if isinstance(slots, str) else slots:
                    if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                        state[f"slot {slot}"] = getattr(obj, slot)
            return ("object", self.digest(t, "its class"), self.digest(state, "its attributes"))
        self.refuse(obj)
        raise AssertionError("unreachable")  # pragma: no cover

    def builtin(self, obj: Any) -> tuple[Any, ...]:
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or ""
        owner = getattr(obj, "__objclass__", None)
        bound = getattr(obj, "__self__", None)
        module = getattr(obj, "__module__", None)
        if isinstance(obj, np.ufunc):
            return ("ufunc", obj.__name__, _provider_version("numpy") or "")
        if bound is None or isinstance(bound, types.ModuleType):
            module = module or getattr(bound, "__name__", None) or ""
            return ("builtin", module, name, _provider_version(module) or "")
        if isinstance(bound, type):  # e.g. dict.fromkeys
            return ("builtin classmethod", self.digest(bound, "its class"), name)
        if owner is not None and not isinstance(obj, (types.BuiltinFunctionType, types.MethodWrapperType)):
            return ("descriptor", self.digest(owner, "its class"), name)
        return ("bound builtin", name, self.digest(bound, "its object"))  # e.g. a list's append

    def function(self, fn: types.FunctionType) -> tuple[Any, ...]:
        version = _provider_version(fn.__module__)
        if version is not None and _reachable(fn):  # a library's function: its name and version
            return ("library function", fn.__module__, fn.__qualname__, version)
        closure = tuple(
            (name, self.cell(cell, name)) for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
        )
        return (
            "function",
            self.code(fn.__code__, fn.__globals__),
            self.digest(fn.__defaults__, "its defaults"),
            self.digest(fn.__kwdefaults__, "its keyword defaults"),
            closure,
        )

    def cell(self, cell: types.CellType, name: str) -> str:
        try:
            value = cell.cell_contents
        except ValueError:  # not yet assigned
            return "empty cell"
        return self.digest(value, f"the closure variable {name!r}")

    def code(self, co: types.CodeType, globals_: dict[str, Any]) -> tuple[Any, ...]:
        consts = tuple(
            ("code", self.code(c, globals_)) if isinstance(c, types.CodeType) else self.digest(c, "a constant")
            for c in co.co_consts
        )
        names: set[str] = set()
        imports: set[str] = set()
        for ins in dis.get_instructions(co):
            if ins.opname in _GLOBAL_OPS:
                names.add(ins.argval)
            elif ins.opname == "IMPORT_NAME":
                imports.add(ins.argval)
        space = globals_.get("__builtins__", builtins)
        builtin_names = space if isinstance(space, dict) else vars(space)
        refs = []
        for name in sorted(names):
            if name in globals_:
                refs.append((name, self.digest(globals_[name], f"the global {name!r}")))
            elif name in builtin_names:
                refs.append((name, "builtin", self.digest(builtin_names[name], f"the builtin {name!r}")))
            else:
                refs.append((name, "undefined"))
        return (
            co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags,
            co.co_code.hex(), getattr(co, "co_exceptiontable", b"").hex(),
            co.co_names, co.co_varnames, co.co_freevars, co.co_cellvars,
            consts, tuple(refs), tuple(sorted((m, _provider_version(m) or "") for m in imports)),
        )

    def cls(self, cls: type) -> tuple[Any, ...]:
        if cls.__module__ == "builtins":
            return ("class", "builtins", cls.__qualname__)
        version = _provider_version(cls.__module__)
        if version is not None and _reachable(cls):  # a library's class: its name and version
            return ("library class", cls.__module__, cls.__qualname__, version)
        if not cls.__flags__ & _HEAPTYPE:
            self.refuse(cls, " (a class of compiled code outside any installed distribution)")
        members = []
        for name, value in vars(cls).items():  # definition order: deterministic
            if name in _SKIPPED_CLASS_ATTRIBUTES:
                continue
            if name.startswith("__") and name.endswith("__") and not (
                callable(value) or isinstance(value, (staticmethod, classmethod, property))
            ):
                continue  # bookkeeping (__annotations__, __dataclass_fields__, __slots__, ...)
            members.append((name, self.digest(value, f"the attribute {name!r}")))
        bases = tuple(self.digest(b, "a base class") for b in cls.__bases__ if b is not object)
        return ("class", cls.__qualname__, bases, tuple(members))


def function_digest(fn: Callable[..., Any]) -> str:
    """A content hash of a function: identifies what it computes in cache keys.

    A qualified name does not identify a function: every lambda of a script is
    ``__main__.<lambda>``, and two closures of one factory share their code. The digest covers
    the bytecode, constants and names of the function and, recursively, of the functions
    nested in it; its defaults; the values in its closure cells; and the values of the global
    names it reads. Values are hashed by content: plain values and containers, numpy arrays and
    scalars, torch tensors, pandas objects, dataclasses, enums, paths, and instances of classes
    written in Python (their attributes); functions, methods and ``functools.partial`` objects
    recursively, except that functions and classes of installed distributions (numpy, torch,
    posgeo itself) and of the standard library count by name and distribution version.
    Modules count by name and version: a user's own module that the function calls into is not
    hashed (pass what matters as arguments or defaults). Line numbers and file names do not
    enter, so moving a function does not change its digest.

    Parameters
    ----------
    fn : callable
        A function, lambda, closure, bound method, ``functools.partial`` or callable object.

    Returns
    -------
    str
        16 hex digits, the same in every process for the same code and values.

    Raises
    ------
    TypeError
        ``fn`` is not callable.
    ValueError
        ``fn`` reaches a value with no stable content hash (e.g. a random generator, a lock,
        an open file, an object of a compiled class): its result may depend on state that a
        cache key cannot describe. The message names the value; compute without the cache
        (``cache=False``).

    Examples
    --------
    >>> function_digest(lambda m: {"a": 1.0}) == function_digest(lambda m: {"a": 1.0})
    True
    >>> function_digest(lambda m: {"a": 1.0}) == function_digest(lambda m: {"a": 2.0})
    False
    >>> def scale(c):
    ...     return lambda x: c * x
    >>> function_digest(scale(2)) == function_digest(scale(3))
    False
    >>> rng = np.random.default_rng(0)
    >>> function_digest(lambda: rng.random())
    Traceback (most recent call last):
    ...
    ValueError: cannot hash ...<lambda> for a cache key: the global 'rng' is a numpy.random._generator.Generator (...), which has no stable content hash, so a cached result could be stale. To compute without the cache, pass cache=False; ...
    """
    if not callable(fn):
        raise TypeError(f"function_digest needs a callable, got {type(fn).__qualname__}")
    label = f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    try:
        return _Hasher().digest(fn, label)[:16]
    except _Unhashable as exc:
        raise ValueError(
            f"cannot hash {label} for a cache key: {exc}, so a cached result could be stale. "
            "To compute without the cache, pass cache=False; to cache, make the function depend only on "
            "plain values, arrays, tensors, dataclasses and functions"
        ) from None
    except RecursionError:
        raise ValueError(
            f"cannot hash {label} for a cache key: the values it reaches are nested too deeply; pass cache=False"
        ) from None
