"""Sources of counts: shards and streamed Hugging Face datasets, planned into partitions and read.

Shards are parquet, JSON-lines or text files (optionally compressed), named by local paths,
globs, directories or :mod:`fsspec` URLs (``hf://``, ``s3://``, ``gs://``); a Hugging Face
dataset is read in streaming mode (:class:`HubDataset`, ``"hub:ID:SPLIT"``). Each is planned
into *partitions* (a JSON-lines or text shard; consecutive row groups, or a slice of one large
row group, of a parquet shard; one shard of a stream), each under a key of its content: a local
shard is hashed by blocks when the run is planned and read through those digests, so a shard
that changes during the run is refused, never counted under the key of other bytes.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import stat
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from ._messages import one_line
from ._tokenizers import prefix_chars

__all__ = ['HubDataset']

_KEY_VERSION = 2  # bump when the counting of a partition changes: old partials are then ignored
# (2: a local shard's fingerprint is the SHA-256 of its blocks' SHA-256s, checked as the shard is read)

_PARQUET_SUFFIXES = (".parquet", ".pq")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_TEXT_SUFFIXES = (".txt", ".text")


# --------------------------------------------------------------------------- sources and partitions
_HUB_PREFIX = "hub:"


@dataclass(frozen=True)
class HubDataset:
    """A Hugging Face dataset as a source of :func:`positional_counts`, read in streaming mode.

    The dataset is opened with ``datasets.load_dataset(name, config, split=split,
    revision=revision, streaming=True)``: its data files are read as they are iterated, never
    downloaded whole or converted. Each shard of the stream (``n_shards``, one per data file
    or group of them) is a partition: counted once, stored in the work directory under a key
    of the split's data files (their commit on the Hub, or the SHA-256 of local files),
    resumable, spread over Dask workers. A document's half is a hash of the dataset, its shard
    and its row in the shard. As a string: ``"hub:NAME:SPLIT"``, ``"hub:NAME:CONFIG:SPLIT"``,
    ``"hub:NAME@REVISION:SPLIT"`` (``"hub:NAME"``: the train split).

    Parameters
    ----------
    name : str
        A dataset id on the Hub (``"stanfordnlp/imdb"``) or a local folder of data files.
    split : str, default "train"
    config : str, optional
        The configuration (subset), if the dataset has several.
    revision : str, optional
        A branch, tag or commit of the dataset's repository.

    Examples
    --------
    >>> HubDataset.parse("hub:stanfordnlp/imdb:test")
    HubDataset(name='stanfordnlp/imdb', split='test', config=None, revision=None)
    >>> str(HubDataset("allenai/c4", split="validation", config="en", revision="main"))
    'hub:allenai/c4@main:en:validation'
    """

    name: str
    split: str = "train"
    config: str | None = None
    revision: str | None = None

    def __post_init__(self) -> None:
        for field_name in ("name", "split", "config", "revision"):
            value = getattr(self, field_name)
            if field_name in ("config", "revision") and value is None:
                continue
            if not isinstance(value, str) or not value or ":" in value:
                raise ValueError(f"HubDataset {field_name} must be a non-empty str without ':', got {value!r}")

    def __str__(self) -> str:
        name = self.name + (f"@{self.revision}" if self.revision else "")
        return _HUB_PREFIX + ":".join([name] + ([self.config] if self.config else []) + [self.split])

    @classmethod
    def parse(cls, text: str) -> "HubDataset":
        """The dataset named by ``"hub:NAME[@REVISION][:CONFIG][:SPLIT]"``."""
        if not isinstance(text, str) or not text.startswith(_HUB_PREFIX):
            raise ValueError(f"a Hub dataset source starts with {_HUB_PREFIX!r}, got {text!r}")
        fields = text[len(_HUB_PREFIX):].split(":")
        if len(fields) > 3 or not all(fields):
            raise ValueError(f"cannot read the Hub dataset source {text!r}; write hub:NAME:SPLIT or hub:NAME:CONFIG:SPLIT")
        name, _, revision = fields[0].partition("@")
        config = fields[1] if len(fields) == 3 else None
        return cls(name, split=fields[-1] if len(fields) > 1 else "train", config=config, revision=revision or None)


_HUB_STREAMS: dict[HubDataset, Any] = {}  # the opened streams of this process
_HUB_LOCK = threading.Lock()


def _hub_stream(hub: HubDataset) -> Any:
    """The dataset's split as an IterableDataset (opened once per process)."""
    with _HUB_LOCK:
        stream = _HUB_STREAMS.get(hub)
    if stream is None:
        try:
            import datasets
        except ImportError:  # pragma: no cover - datasets is a dependency
            raise ImportError("reading a Hub dataset needs the datasets package: pip install datasets") from None
        try:
            stream = datasets.load_dataset(hub.name, hub.config, split=hub.split, revision=hub.revision, streaming=True)
        except Exception as exc:
            raise ValueError(
                f"cannot open the Hugging Face dataset {str(hub)!r} in streaming mode ({type(exc).__name__}: "
                f"{one_line(exc)}); check the dataset id, its split and config, and the network (offline: pass a "
                "local folder of data files as the name, or the files themselves as shards)"
            ) from None
        with _HUB_LOCK:
            _HUB_STREAMS[hub] = stream
    return stream


def _hub_fingerprint(hub: HubDataset, storage_options: Mapping[str, Any]) -> str:
    """A key of the split's data files: their names with their commit (Hub) or content (local)."""
    import datasets

    try:
        files = datasets.load_dataset_builder(hub.name, hub.config, revision=hub.revision).config.data_files
    except Exception as exc:
        raise ValueError(f"cannot list the data files of {str(hub)!r} ({type(exc).__name__}: {one_line(exc)})") from None
    if not files or hub.split not in files:
        raise ValueError(f"the dataset {str(hub)!r} has no split {hub.split!r}; its splits are {sorted(files or {})}")
    prints = []
    for name in files[hub.split]:
        fs, path = _url_to_fs(str(name), storage_options)
        prints.append([str(name), _fingerprint(fs, path, str(name), fs.info(path))])
    return "hub:" + hashlib.sha256(json.dumps(prints).encode("utf-8")).hexdigest()


def _plan_hub(name: str, column: str, key_cfg: Mapping[str, Any], storage_options: Mapping[str, Any]) -> list["Partition"]:
    """One partition per shard of the stream; the column checked against its features."""
    hub = HubDataset.parse(name)
    stream = _hub_stream(hub)
    columns = list(stream.column_names or (stream.features or {}).keys())
    if columns and column not in columns:
        raise ValueError(f"the dataset {name} has no column {column!r}; its columns are {columns}: pass column= (--column) one of them")
    fp = _hub_fingerprint(hub, storage_options)
    k = int(stream.n_shards)
    return [Partition(name, "hub", _content_key(name, 0, fp, {"shard": i, "shards": k}, key_cfg), rows=(i, k))
            for i in range(k)]


@dataclass(frozen=True)
class Partition:
    """One unit of counting work: a shard, or some row groups or a slice of a parquet shard, or one
    shard of a stream; ``key`` names its partial counts in the work directory."""

    source: str  # the shard's name (absolute local path or URL)
    fmt: str  # "parquet", "jsonl" or "text"
    key: str  # content key: file name of the partial counts
    row_groups: tuple[int, ...] = ()
    rows: tuple[int, int] | None = None  # a slice of the single row group; a stream's (shard, shards)
    first_row: int = 0  # row index (in the shard) of the partition's first row
    shard: str = ""  # key of the shard's content (name, size, fingerprint)
    group_bytes: int = 0  # uncompressed size of a sliced row group
    weight: int = 0  # estimated bytes to read (the order of Dask's tasks: largest first); 0: unknown
    blocks: _Blocks | None = None  # a local shard's block digests, checked as it is read


def _format_of(name: str) -> str | None:
    from fsspec.utils import infer_compression

    low = name.lower()
    if infer_compression(low) is not None:
        low = low.rsplit(".", 1)[0]
    for fmt, suffixes in (("parquet", _PARQUET_SUFFIXES), ("jsonl", _JSONL_SUFFIXES), ("text", _TEXT_SUFFIXES)):
        if low.endswith(suffixes):
            return fmt
    return None


_KNOWN = "parquet (.parquet, .pq), JSON lines (.jsonl, .ndjson, .json) or text (.txt, .text), optionally compressed (.gz, .bz2, .xz, ...)"


def _url_to_fs(name: str, storage_options: Mapping[str, Any]) -> tuple[Any, str]:
    from fsspec.core import url_to_fs

    return url_to_fs(name, **dict(storage_options))


def _display(fs: Any, path: str) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        return os.path.abspath(path)
    return fs.unstrip_protocol(path)


def _list_source(spec: str, storage_options: Mapping[str, Any]) -> list[str]:
    """The shards one path, URL, glob or directory names; errors name the source."""
    try:
        fs, path = _url_to_fs(spec, storage_options)
        if any(c in path for c in "*?["):
            found = sorted(p for p in fs.glob(path) if not fs.isdir(p))
            kind = "glob"
        elif fs.isdir(path):
            found = sorted(p for p in fs.find(path) if _format_of(p) is not None)
            kind = "directory"
        else:
            found = [path] if fs.exists(path) else []
            kind = "file"
    except ImportError as exc:  # fsspec names the package a protocol needs
        raise ImportError(f"source {spec!r}: {exc} (pip install it, or copy the shards locally)") from exc
    except Exception as exc:  # network, credentials, a malformed URL: fsspec's clients raise their own errors
        raise OSError(f"source {spec!r} could not be listed ({type(exc).__name__}: {one_line(exc)}); check the URL, "
                      "the network and storage_options (credentials)") from exc
    if not found:
        if kind == "file" and _is_local(fs) and os.path.lexists(path):  # fsspec says no to a pipe or device
            _check_regular(path, spec)
        raise FileNotFoundError({"glob": f"no shard matches {spec!r}; check the pattern",
                                 "directory": f"directory {spec!r} holds no shard ({_KNOWN})",
                                 "file": f"shard {spec!r} does not exist; check the path or URL"}[kind])
    if _is_local(fs):
        for p in found:
            _check_regular(p, spec)
    return [_display(fs, p) for p in found]


def _check_regular(path: str, spec: str) -> None:
    """Refuse a local source that is not a regular file (a device, a pipe, a socket), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a broken link or a race: reported as a missing shard
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    shown = f"shard {path!r}" if os.path.abspath(path) == os.path.abspath(spec) else f"shard {path!r} (from {spec!r})"
    raise ValueError(
        f"{shown} is {kind}, not a regular file; shards must be regular files (they are hashed, then read "
        "again): save the data to a file and pass that"
    )


def expand_sources(sources: Any, storage_options: Mapping[str, Any]) -> list[str]:
    """Expand paths, globs and directories into shard names (in order, without duplicates)."""
    if isinstance(sources, (str, os.PathLike, HubDataset)):
        items = [sources]
    else:
        try:
            items = list(sources)
        except TypeError:
            raise TypeError(
                f"sources must be a path, URL, glob or HubDataset, or a list of them, got {type(sources).__name__}"
            ) from None
    if not items:
        raise ValueError("sources is empty; pass shard paths, globs or URLs")
    names: list[str] = []
    for item in items:
        if isinstance(item, HubDataset) or (isinstance(item, str) and item.startswith(_HUB_PREFIX)):
            names.append(str(item if isinstance(item, HubDataset) else HubDataset.parse(item)))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"each source must be a path, URL or glob (str) or a HubDataset, got {type(item).__name__} {item!r}")
        names.extend(_list_source(os.fspath(item), storage_options))
    seen: set[str] = set()
    files: dict[tuple[int, int], str] = {}  # a local shard's device and inode: a link and its target are one file
    for name in names:
        if name in seen:
            raise ValueError(f"shard {name!r} is listed twice (by two sources or globs); it would be counted twice")
        seen.add(name)
        if not name.startswith(_HUB_PREFIX) and "://" not in name and os.path.isabs(name):
            try:
                st = os.stat(name)
            except OSError:
                continue
            other = files.setdefault((st.st_dev, st.st_ino), name)
            if other != name:
                raise ValueError(
                    f"shards {other!r} and {name!r} are the same file ({os.path.realpath(name)}, through a link): "
                    "it is listed twice and would be counted twice; list it once"
                )
    return names


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


_BLOCK_MIN = 2**22  # a local shard is hashed (and checked as it is read) in blocks of 4 MiB or more
_BLOCKS_MAX = 1024  # ... at most this many (32 KiB of digests travel with each partition)
_RACY_NS = 2_000_000_000  # a file changed this recently may change again unseen by its times: hashed again


@dataclass(frozen=True)
class _Blocks:
    """A local shard's content as hashed when the run was planned: its size, the SHA-256 of each
    block of ``block`` bytes (concatenated), and the fingerprint of the partition keys (the
    SHA-256 of those digests)."""

    size: int
    block: int
    digests: bytes

    @property
    def fingerprint(self) -> str:
        return f"sha256-blocks-{self.block}:" + hashlib.sha256(self.digests).hexdigest()

    def digest(self, k: int) -> bytes:
        return self.digests[32 * k : 32 * k + 32]


_BLOCKS_SEEN: dict[tuple[Any, ...], _Blocks] = {}  # this process's hashed shards, by (path, inode, size, times)
_BLOCKS_LOCK = threading.Lock()


def _file_state(path: str, st: os.stat_result) -> tuple[Any, ...]:
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _local_blocks(path: str) -> _Blocks:
    """Hash a local shard block by block, in one pass (remembered in this process while its
    path, inode, size and times are unchanged, as :func:`posgeo.file_digest` does)."""
    resolved = os.path.realpath(path)
    with open(resolved, "rb") as fh:
        before = os.fstat(fh.fileno())
        state = _file_state(resolved, before)
        with _BLOCKS_LOCK:
            known = _BLOCKS_SEEN.get(state)
        if known is not None:
            return known
        block = _BLOCK_MIN
        while before.st_size > block * _BLOCKS_MAX:
            block *= 2
        digests, size = [], 0
        while chunk := fh.read(block):
            digests.append(hashlib.sha256(chunk).digest())
            size += len(chunk)
        after = os.fstat(fh.fileno())
    blocks = _Blocks(size, block, b"".join(digests))
    settled = time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) > _RACY_NS
    if settled and state == _file_state(resolved, after) and size == before.st_size:
        with _BLOCKS_LOCK:
            if len(_BLOCKS_SEEN) >= 65536:
                _BLOCKS_SEEN.clear()
            _BLOCKS_SEEN[state] = blocks
    return blocks


class _ShardChanged(ValueError):
    """A shard whose bytes, as read for counting, are not those hashed when the run was planned."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"shard {name} changed while it was being counted (its bytes differ from those hashed when the run "
            "was planned): nothing of it was stored; rerun the same command once it no longer changes (the "
            "finished partitions are kept)"
        )


class _VerifiedFile(io.RawIOBase):
    """A local shard read through blocks checked against the digests taken when the run was
    planned: every byte that reaches a parser is a byte of the content the partition's key
    names (or :class:`_ShardChanged` is raised). Keeps the last few blocks read."""

    _KEEP = 4

    def __init__(self, path: str, name: str, blocks: _Blocks) -> None:
        super().__init__()
        self._fh = open(path, "rb", buffering=0)
        self._name, self._blocks, self._pos = name, blocks, 0
        self._cache: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        if os.fstat(self._fh.fileno()).st_size != blocks.size:
            self._fh.close()
            raise _ShardChanged(name)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._blocks.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def _block(self, k: int) -> bytes:
        data = self._cache.get(k)
        if data is not None:
            self._cache.move_to_end(k)
            return data
        b = self._blocks.block
        want = min(b, self._blocks.size - k * b)
        self._fh.seek(k * b)
        parts, got = [], 0
        while got < want and (chunk := self._fh.read(want - got)):
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        if len(data) != want or hashlib.sha256(data).digest() != self._blocks.digest(k):
            raise _ShardChanged(self._name)
        self._cache[k] = data
        if len(self._cache) > self._KEEP:
            self._cache.popitem(last=False)
        return data

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        done, b = 0, self._blocks.block
        while done < len(out) and self._pos < self._blocks.size:
            k, off = divmod(self._pos, b)
            data = memoryview(self._block(k))[off:]
            m = min(len(out) - done, len(data))
            out[done : done + m] = data[:m]
            done += m
            self._pos += m
        return done

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, self._blocks.size - self._pos)
        buffer = bytearray(min(size, max(0, self._blocks.size - self._pos)))
        return bytes(memoryview(buffer)[: self.readinto(buffer)])

    def close(self) -> None:
        self._fh.close()
        self._cache.clear()
        super().close()


def _fingerprint(fs: Any, path: str, name: str, info: Mapping[str, Any]) -> str:
    """The SHA-256 of a local file's block digests (:class:`_Blocks`); a remote checksum (ETag,
    sha256, ...) plus mtime otherwise."""
    if _is_local(fs):
        return _local_blocks(path).fingerprint
    parts = []
    for k in ("sha256", "ETag", "etag", "md5Hash", "crc32c", "checksum", "blob_id", "last_commit", "mtime",
              "LastModified", "last_modified", "updated", "created"):
        if info.get(k) is not None:
            parts.append(f"{k}={info[k]}")
    lfs = info.get("lfs")
    if isinstance(lfs, Mapping) and lfs.get("sha256"):
        parts.append(f"lfs={lfs['sha256']}")
    return "remote:" + ";".join(str(p) for p in parts)


def _content_key(name: str, size: int, fp: str, part: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    blob = json.dumps({"v": _KEY_VERSION, "source": name, "size": size, "fingerprint": fp, "part": part, **cfg},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:40]


def _unreadable(name: str, exc: BaseException) -> ValueError:
    return ValueError(
        f"cannot read shard {name} ({type(exc).__name__}: {one_line(exc)}); it is probably truncated or corrupt: "
        "re-download or re-write it, or leave it out of the sources"
    )


def _slices(rows: int, partition_rows: int) -> list[tuple[int, int]]:
    """Row bounds of the slices of a row group larger than ``partition_rows``: equal slices,
    the last one cut into a half and two quarters. Workers that run the slices take the small
    pieces last (largest first: see ``posgeo._count_run``), so they finish within a quarter slice of
    each other instead of one running a whole slice alone (13 equal slices on 2 workers: 7 and 6).

    >>> _slices(100, 40)  # 3 slices of 33-34 rows, the last as 17 + 8 + 8
    [(0, 33), (33, 67), (67, 84), (84, 92), (92, 100)]
    """
    k = -(-rows // partition_rows)
    bounds = [int(b) for b in np.linspace(0, rows, k + 1).round()]
    lo, hi = bounds[-2], bounds[-1]
    if hi - lo >= 4:
        q = (hi - lo) // 4
        bounds[-1:] = [hi - 2 * q, hi - q, hi]
    return list(zip(bounds[:-1], bounds[1:]))


def plan_partitions(
    names: list[str], *, column: str, partition_rows: int, key_cfg: Mapping[str, Any], storage_options: Mapping[str, Any]
) -> list[Partition]:
    """Partitions of the shards; empty shards are skipped with a warning."""
    parts: list[Partition] = []
    for name in names:
        if name.startswith(_HUB_PREFIX):
            parts.extend(_plan_hub(name, column, key_cfg, storage_options))
            continue
        fmt = _format_of(name)
        if fmt is None:
            raise ValueError(f"cannot tell the format of shard {name!r} from its name; shards are {_KNOWN}")
        fs, path = _url_to_fs(name, storage_options)
        if _is_local(fs):  # hashed once, by blocks: the partitions are read through these digests
            blocks = _local_blocks(path)
            size, fp = blocks.size, blocks.fingerprint
        else:
            info = fs.info(path)
            blocks, size = None, int(info.get("size") or 0)
            fp = _fingerprint(fs, path, name, info) if size else ""
        if size == 0:
            warnings.warn(f"skipping empty shard {name} (0 bytes)", stacklevel=3)
            continue
        if fmt != "parquet":
            parts.append(Partition(name, fmt, _content_key(name, size, fp, {"whole": True}, key_cfg), weight=size,
                                    blocks=blocks))
            continue
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with _open_binary(fs, path, name, blocks) as fh:  # the footer of the bytes just hashed
                meta = pq.ParquetFile(fh).metadata
                schema = meta.schema.to_arrow_schema()
        except _ShardChanged:
            raise
        except Exception as exc:
            raise _unreadable(name, exc) from exc
        if column not in schema.names:
            raise ValueError(
                f"shard {name} has no column {column!r}; its columns are {schema.names}: pass column= (--column) one of them"
            )
        kind = schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or getattr(pa.types, "is_string_view", lambda t: False)(kind)):
            raise TypeError(
                f"column {column!r} of shard {name} holds {kind} values, not text; pass column= (--column) the column that holds the text"
            )
        if meta.num_rows == 0:
            warnings.warn(f"skipping empty shard {name} (0 rows)", stacklevel=3)
            continue
        groups: list[int] = []
        rows_in, first, start, weight = 0, 0, 0, 0

        def flush() -> None:
            nonlocal groups, rows_in, first, weight
            if groups:
                spec = {"row_groups": groups}
                parts.append(Partition(name, "parquet", _content_key(name, size, fp, spec, key_cfg),
                                        row_groups=tuple(groups), first_row=first, weight=weight, blocks=blocks))
            groups, rows_in, weight = [], 0, 0

        for g in range(meta.num_row_groups):
            r = meta.row_group(g).num_rows
            group_bytes = int(meta.row_group(g).total_byte_size)
            if r == 0:
                continue
            if r > partition_rows:  # a large row group: slices of it
                flush()
                shard = _content_key(name, size, fp, {}, {})
                for lo, hi in _slices(r, partition_rows):
                    spec = {"row_groups": [g], "rows": [lo, hi]}
                    parts.append(Partition(name, "parquet", _content_key(name, size, fp, spec, key_cfg),
                                            row_groups=(g,), rows=(lo, hi), first_row=start + lo,
                                            shard=shard, group_bytes=group_bytes, weight=group_bytes * (hi - lo) // r,
                                            blocks=blocks))
            else:
                if rows_in + r > partition_rows:
                    flush()
                if not groups:
                    first = start
                groups.append(g)
                rows_in += r
                weight += group_bytes
            start += r
        flush()
    return parts


# --------------------------------------------------------------------------- reading one partition (in this process or on a Dask worker)


def _check_values(values: list[Any], rows: np.ndarray, name: str, column: str, drop_missing: bool) -> tuple[list[str], np.ndarray]:
    bad = [k for k, v in enumerate(values) if not isinstance(v, str)]
    if not bad:
        return values, rows
    missing = [k for k in bad if values[k] is None or (isinstance(values[k], float) and np.isnan(values[k]))]
    other = sorted(set(bad) - set(missing))
    if other:
        k = other[0]
        raise TypeError(
            f"column {column!r} of shard {name} holds {type(values[k]).__name__} values, not text (row {int(rows[k])}: "
            f"{values[k]!r:.40}); pass column= (--column) the column that holds the text"
        )
    if not drop_missing:
        shown = ", ".join(str(int(rows[k])) for k in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise ValueError(
            f"column {column!r} of shard {name} has {len(missing)} missing (null) text(s) (rows {shown}); "
            "pass drop_missing=True (--drop-missing) to skip them, or fill them in"
        )
    keep = np.ones(len(values), dtype=bool)
    keep[missing] = False
    return [v for v, k in zip(values, keep) if k], rows[keep]


_GROUP_CACHE: dict[tuple[str, int, str], Any] = {}  # the last row group read (slices of it follow)
_GROUP_CACHE_LOCK = threading.Lock()
_GROUP_CACHE_MAX_BYTES = 2**28


def release_readers() -> None:
    """Forget this process's cached row group and opened dataset streams (at the end of a run:
    the next run reads its sources afresh)."""
    _GROUP_CACHE.clear()
    with _HUB_LOCK:
        _HUB_STREAMS.clear()


def _open_binary(fs: Any, path: str, name: str, blocks: _Blocks | None) -> Any:
    """A shard opened for binary reading: through its planned block digests where it is local
    (:class:`_VerifiedFile`), as fsspec opens it otherwise."""
    if blocks is not None:
        return _VerifiedFile(path, name, blocks)
    return fs.open(path, "rb")


def _open_stream(fs: Any, path: str, name: str, blocks: _Blocks | None, *, text: bool) -> Any:
    """A JSON-lines (binary) or text (UTF-8, universal newlines) shard, decompressed by its suffix."""
    if blocks is None:
        return fs.open(path, "rt" if text else "rb", compression="infer", **({"encoding": "utf-8"} if text else {}))
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    fh: Any = io.BufferedReader(_VerifiedFile(path, name, blocks), buffer_size=2**20)
    compression = infer_compression(path)
    if compression is not None:
        fh = compr[compression](fh, mode="rb")
    return io.TextIOWrapper(fh, encoding="utf-8") if text else fh


def _row_group(fs: Any, path: str, part: Partition, column: str) -> Any:
    """One row group's text column, kept (if under 256 MiB) for the next slices of it in this process."""
    import pyarrow.parquet as pq

    key = (part.shard, part.row_groups[0], column)
    with _GROUP_CACHE_LOCK:
        table = _GROUP_CACHE.get(key)
    if table is None:
        with _open_binary(fs, path, part.source, part.blocks) as fh:
            table = pq.ParquetFile(fh).read_row_group(part.row_groups[0], columns=[column])
        if part.group_bytes <= _GROUP_CACHE_MAX_BYTES:
            with _GROUP_CACHE_LOCK:
                _GROUP_CACHE.clear()
                _GROUP_CACHE[key] = table
    return table


def _not_utf8(name: str, exc: BaseException) -> ValueError:
    stem = Path(name).name.split(".")[0] or "shard"
    return ValueError(
        f"shard {name} is not UTF-8 text ({one_line(exc, limit=120)}); re-encode it, e.g. "
        f"`iconv -f latin1 -t utf-8 {name} > {stem}.utf8.txt` (with its actual encoding after -f), "
        "or leave it out of the sources"
    )


def _text_lines(fh: Any, fit: Callable[[str], str | None] | None, limit: int) -> Iterator[str]:
    """The lines of a text shard (without their newline), each read at most ``limit``
    characters at a time: a longer line is read on (doubling) only until ``fit`` returns a
    prefix of it that is enough (the rest of the line is then skipped in chunks, never held),
    or to its end. Without ``fit``, whole lines."""
    while True:
        line = fh.readline(limit) if fit is not None else fh.readline()
        if not line:
            return
        if fit is not None and not line.endswith("\n") and len(line) >= limit:
            chunks, size = [line], len(line)
            while True:
                head = "".join(chunks)
                enough = fit(head)
                if enough is not None:  # skip the rest of the line
                    while (rest := fh.readline(limit)) and not rest.endswith("\n"):
                        pass
                    line = enough
                    break
                more = fh.readline(size)
                chunks = [head, more]
                size += len(more)
                if not more or more.endswith("\n"):  # the whole line, after all
                    line = "".join(chunks)
                    break
        yield line.rstrip("\r\n")


def read_partition(part: Partition, *, column: str, storage_options: Mapping[str, Any], drop_missing: bool, n: int,
                   fit: Callable[[str], str | None] | None = None) -> tuple[list[str], np.ndarray]:
    """Texts of a partition and their row index in the shard (line number for JSON lines and text).

    A local shard is read through the block digests taken when the run was planned
    (:class:`_VerifiedFile`). With ``fit`` (see :func:`_text_lines`), a line of a text shard
    longer than ``prefix_chars(n)`` characters is kept only as far as ``fit`` needs."""
    name = part.source
    if part.fmt == "hub":
        name = f"{part.source} (shard {part.rows[0] + 1} of {part.rows[1]})"
    try:
        if part.fmt == "hub":
            return _read_hub_shard(part, column, drop_missing, name)
        fs, path = _url_to_fs(name, storage_options)
        if part.fmt == "parquet":
            import pyarrow.parquet as pq

            if part.rows is not None:
                lo, hi = part.rows
                table = _row_group(fs, path, part, column).slice(lo, hi - lo)
            else:
                with _open_binary(fs, path, name, part.blocks) as fh:
                    table = pq.ParquetFile(fh).read_row_groups(list(part.row_groups), columns=[column])
            values = table.column(0).to_pylist()
            rows = part.first_row + np.arange(len(values), dtype=np.int64)
            return _check_values(values, rows, name, column, drop_missing)
        values, line_no = [], []
        if part.fmt == "jsonl":
            with _open_stream(fs, path, name, part.blocks, text=False) as fh:
                for i, line in enumerate(fh):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except UnicodeDecodeError as exc:
                        raise _not_utf8(name, exc) from None
                    except ValueError as exc:
                        raise ValueError(
                            f"line {i + 1} of shard {name} is not valid JSON ({one_line(exc)}); a JSON-lines "
                            "shard holds one JSON object per line"
                        ) from None
                    if not isinstance(rec, dict):
                        raise ValueError(
                            f"line {i + 1} of shard {name} is a JSON {type(rec).__name__}, not an object; a "
                            "JSON-lines shard holds one object (with the text column) per line"
                        )
                    if column not in rec:
                        raise ValueError(
                            f"shard {name} has no column {column!r} (line {i + 1} has keys {sorted(rec)[:20]}); "
                            "pass column= (--column) one of them"
                        )
                    values.append(rec[column])
                    line_no.append(i)
        else:  # text: one document per line, blank lines skipped
            with _open_stream(fs, path, name, part.blocks, text=True) as fh:
                try:
                    for i, line in enumerate(_text_lines(fh, fit, prefix_chars(n))):
                        if line.strip():
                            values.append(line)
                            line_no.append(i)
                except UnicodeDecodeError as exc:
                    raise _not_utf8(name, exc) from None
        return _check_values(values, np.asarray(line_no, dtype=np.int64), name, column, drop_missing)
    except _ShardChanged:
        raise
    except (ValueError, TypeError) as exc:
        if part.source in str(exc):
            raise
        raise _unreadable(name, exc) from exc
    except MemoryError:
        raise
    except Exception as exc:
        raise _unreadable(name, exc) from exc


def _read_hub_shard(part: Partition, column: str, drop_missing: bool, name: str) -> tuple[list[str], np.ndarray]:
    """Texts of one shard of a streamed dataset and their row in the shard."""
    i, k = part.rows
    shard = _hub_stream(HubDataset.parse(part.source)).shard(num_shards=k, index=i)
    try:
        shard = shard.select_columns([column])
        values = [row[column] for row in shard]
    except (KeyError, ValueError) as exc:
        if column not in str(exc):
            raise
        raise ValueError(f"shard {name} has no column {column!r} ({one_line(exc)}); pass column= (--column) the text column") from None
    return _check_values(values, np.arange(len(values), dtype=np.int64), name, column, drop_missing)
