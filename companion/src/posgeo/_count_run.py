"""Counting sharded corpora: :func:`positional_counts`, in one process or on Dask workers.

The run plans the sources into partitions (:mod:`posgeo._sources`), counts each one
(:mod:`posgeo._tokenizers` tokenises its documents' prefixes, :mod:`posgeo._count_kernels`
counts the ids) and stores its counts in a work directory under a key of its content,
atomically, so that a run that is killed resumes where it stopped and counts every partition
exactly once. With a ``dask.distributed`` client the partitions are spread over the workers and
summed by a tree of merges; the integer counts are the same whatever the partitioning and
however many workers.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ._count_kernels import Partial, TreeSum, count_ids, half_b, load_partial, merge, save_partial, source_seed
from ._counts import PositionalCounts
from ._messages import one_line
from ._progress import progress_bar
from ._sources import Partition, expand_sources, plan_partitions, read_partition, release_readers
from ._tokenizers import backend_of, prefix_fit, resolve_tokenizer, ship, tokenize_kept
from .validation import check_int, check_positions

__all__ = ['positional_counts']

_log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 5.0
BYTES_PER_POSITION = 64  # memory per counted position (reach, halves, row pointers, merges): measured 64


@dataclass(frozen=True)
class _Config:
    n: int
    V: int
    column: str
    batch_size: int
    add_special_tokens: bool
    clean_html: bool
    drop_missing: bool
    workdir: str
    storage_options: dict[str, Any]


# --------------------------------------------------------------------------- one partition (in this process or on a Dask worker)


def _count_partition(part: Partition, backend: Any, cfg: _Config) -> Partial:
    """The counts of one partition: read back from the work directory, or counted and stored.

    Stored under ``part.key`` only if every byte read was a byte of the content that key
    names (the shard is read through its planned block digests; a shard that changed raises,
    and nothing is stored)."""
    path = Path(cfg.workdir) / f"{part.key}.npz"
    done = load_partial(path, part.key, cfg.n, cfg.V)
    if done is not None:
        return done
    backend = backend_of(backend)
    fit = prefix_fit(backend, cfg.n, add_special_tokens=cfg.add_special_tokens, clean_html=cfg.clean_html)
    texts, rows = read_partition(part, column=cfg.column, storage_options=cfg.storage_options,
                                 drop_missing=cfg.drop_missing, n=cfg.n, fit=fit)
    tokens, klen = tokenize_kept(texts, backend, cfg.n, cfg.V, batch_size=cfg.batch_size,
                                 add_special_tokens=cfg.add_special_tokens, clean_html=cfg.clean_html)
    del texts
    seed_name = f"{part.source}#{part.rows[0]}/{part.rows[1]}" if part.fmt == "hub" else part.source
    in_b = half_b(source_seed(seed_name), rows)
    counts, counts_a, reach, reach_a = count_ids(tokens, klen, in_b, cfg.n, cfg.V)
    p = Partial(counts, counts_a, reach, reach_a, docs={part.source: int(klen.size)}, computed=1)
    save_partial(path, p, part.key, cfg.n, cfg.V)
    return p


def _identity(x: Any) -> Any:
    return x


# --------------------------------------------------------------------------- running: in this process or on Dask


def _run_local(parts: list[Partition], backend: Any, cfg: _Config, progress: bool) -> Partial:
    acc = TreeSum()
    for part in progress_bar(parts, enabled=progress, desc="counting", unit="partition"):
        acc.add(_count_partition(part, backend, cfg))
    return acc.result()


def _connect(address: str) -> Any:
    from distributed import Client

    t0 = time.perf_counter()
    try:
        return Client(address, timeout=_CONNECT_TIMEOUT_S, set_as_default=False)
    except Exception as exc:
        raise ConnectionError(
            f"cannot connect to the Dask scheduler at {address!r} within {_CONNECT_TIMEOUT_S:g} s "
            f"({type(exc).__name__}: {one_line(exc)}; gave up after {time.perf_counter() - t0:.1f} s); check the "
            "address (e.g. tcp://host:8786) and that `dask scheduler` runs there, or count in this process "
            "(client=None; --workers 1 on the command line)"
        ) from None


def _run_dask(client: Any, parts: list[Partition], backend: Any, cfg: _Config, progress: bool) -> Partial:
    """Partitions as pure tasks, summed by merges as they complete (a tree); only the
    partials not yet merged are held, so the cluster's memory stays O(workers x partial)."""
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]  # keys of this run: a cancelled earlier run cannot shadow them
    # the tokenizer travels once (as its JSON: see posgeo._tokenizers.ship), inside a task that the
    # scheduler can rerun if its worker dies
    tok = client.submit(_identity, ship(backend), key=f"posgeo-tokenizer-{run}")
    # largest first, so that the small pieces fill the end of the run, when some workers would
    # otherwise wait for the last large one. The order is explicit (priorities), and the
    # partitions are submitted once the tokenizer is on a worker: submitted before, they all
    # became ready at once when it arrived, and a worker started whichever reached it first
    # (seen on a loaded machine: three small partitions ran before the largest). Merges come
    # first of all, so that the partials are summed as they complete.
    tok.exception()  # waits until it ran, without fetching it (an error reaches every partition)
    order = sorted(parts, key=lambda part: -part.weight)
    futures = [client.submit(_count_partition, part, tok, cfg, key=f"posgeo-count-{part.key}-{run}",
                             priority=len(order) - i) for i, part in enumerate(order)]
    part_keys = {f.key for f in futures}
    ac = as_completed(futures, loop=client.loop)  # this client, also when it is not the default
    del futures
    bar = progress_bar(None, enabled=progress, total=len(parts), desc="counting", unit="partition")
    pending: list[Any] = []
    merges = 0
    try:
        for fut in ac:
            if fut.status == "error":
                fut.result()  # raises the worker's exception (it names the shard)
            if fut.key in part_keys:
                bar.update(1)
            pending.append(fut)
            while len(pending) >= 2:  # merged on a worker; the inputs are released once it ran
                merges += 1
                ac.add(client.submit(merge, pending.pop(), pending.pop(), key=f"posgeo-merge-{merges}-{run}",
                                     priority=len(order) + 1))
            del fut
        result = pending[0].result()
        client.run(release_readers)  # the workers' last row group and opened streams
    except BaseException:
        client.cancel(list(ac.futures) + pending + [tok])
        raise
    finally:
        bar.close()
    return result


# --------------------------------------------------------------------------- the entry point


@dataclass(frozen=True)
class _RunStats:
    """What a run did: partitions planned, counted and read back, its work directory and duration."""

    partitions: int
    computed: int
    resumed: int
    workdir: str
    seconds: float


def count_sources(
    sources: Any,
    *,
    column: str,
    n_positions: int,
    tokenizer: Any,
    client: Any,
    batch_size: int,
    partition_rows: int,
    workdir: str | os.PathLike[str] | None,
    progress: bool,
    add_special_tokens: bool,
    clean_html: bool,
    drop_missing: bool,
    storage_options: Mapping[str, Any] | None,
    remove_workdir: bool | None = None,
) -> tuple[PositionalCounts, _RunStats]:
    """:func:`positional_counts` (all arguments given), with the run's statistics; ``remove_workdir``
    (default: remove a temporary one) decides whether the work directory is removed after success."""
    t0 = time.perf_counter()
    n = check_positions(n_positions, "n_positions", per_position=BYTES_PER_POSITION, option="--positions",
                        what=f"the counts (about {BYTES_PER_POSITION} bytes per position while counting)")
    batch_size = check_int(batch_size, "batch_size")
    partition_rows = check_int(partition_rows, "partition_rows")
    if not isinstance(column, str) or not column:
        raise TypeError(f"column must be the name (str) of the text column, got {column!r}")
    so = dict(storage_options or {})
    if client is not None and not isinstance(client, str) and not hasattr(client, "submit"):
        raise TypeError(f"client must be None, a dask.distributed.Client or a scheduler address, got {type(client).__name__}")
    tok = resolve_tokenizer(tokenizer)
    names = expand_sources(sources, so)
    options = {"add_special_tokens": bool(add_special_tokens), "clean_html": bool(clean_html)}
    key_cfg = {"column": column, "n": n, "tokenizer": tok.id, "drop_missing": bool(drop_missing), **options}
    parts = plan_partitions(names, column=column, partition_rows=partition_rows, key_cfg=key_cfg, storage_options=so)
    if not parts:
        raise ValueError(f"no documents to count: all {len(names)} shard(s) are empty")
    temp = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="posgeo-counts-")) if temp else Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    cfg = _Config(n, tok.vocab_size, column, batch_size, bool(add_special_tokens), bool(clean_html),
                  bool(drop_missing), str(wd.resolve()), so)
    own_client = None
    try:
        if client is None:
            total = _run_local(parts, tok.backend, cfg, progress)
        else:
            if isinstance(client, str):
                own_client = client = _connect(client)
            total = _run_dask(client, parts, tok.backend, cfg, progress)
    except BaseException as exc:
        release_readers()
        if temp and any(wd.glob("*.npz")):
            exc.add_note(f"the counts of the finished partitions are kept in {wd}: pass workdir={str(wd)!r} to resume")
        elif temp:
            shutil.rmtree(wd, ignore_errors=True)
        raise
    finally:
        if own_client is not None:
            own_client.close()
    release_readers()
    if temp if remove_workdir is None else remove_workdir:
        shutil.rmtree(wd, ignore_errors=True)
    for name in names:
        if name in total.docs and total.docs[name] == 0:
            warnings.warn(f"shard {name} holds no document (only blank lines or dropped rows)", stacklevel=3)
    counted = tuple(name for name in names if name in total.docs)
    result = PositionalCounts(
        total.counts, total.reach, total.counts_a, total.reach_a, tok.id, counted,
        sum(total.docs.values()), options,
    )
    _log.info("counted %d partitions, %d read back from %s", total.computed, total.resumed, wd)
    stats = _RunStats(len(parts), total.computed, total.resumed, str(wd), time.perf_counter() - t0)
    return result, stats


def positional_counts(
    sources: Any,
    *,
    column: str,
    n_positions: int,
    tokenizer: Any = None,
    client: Any = None,
    batch_size: int = 1000,
    partition_rows: int = 16384,
    workdir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    add_special_tokens: bool = False,
    clean_html: bool = True,
    drop_missing: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> PositionalCounts:
    """Count tokens per position over sharded text sources, exactly, optionally on Dask.

    Every document (a row of a parquet shard, a line of a JSON-lines shard, a non-blank line
    of a text shard) is tokenised without truncation or special tokens (by default) and its
    first ``n_positions`` ids are counted; shorter documents reach fewer positions. The
    result equals :func:`posgeo.positional_marginals` times :func:`posgeo.position_counts`
    on ``posgeo.tokenize`` of the same texts, whatever the partitioning or the number of
    workers.

    Parameters
    ----------
    sources : str, path, HubDataset, or list of them
        Shards: local paths, globs (``data/*.parquet``), directories (every shard inside,
        recursively) or fsspec URLs (``hf://datasets/...``, ``s3://...``, ``gs://...``).
        Formats by suffix: ``.parquet``/``.pq``; ``.jsonl``/``.ndjson``/``.json`` (one JSON
        object per line); ``.txt``/``.text`` (one document per line, blank lines skipped);
        compressed ones (``.gz``, ``.bz2``, ``.xz``, ...) are read through fsspec. A
        Hugging Face dataset read in streaming mode: a :class:`HubDataset` or its string
        ``"hub:NAME:SPLIT"`` (one partition per shard of the stream).
    column : str, keyword-only
        The text column (parquet) or key (JSON lines); ignored for text shards.
    n_positions : int, keyword-only
        Count positions ``0..n-1``.
    tokenizer : None, str, path or fast tokenizer, keyword-only
        ``None``: the bundled bert-base-uncased WordPiece (:func:`posgeo.default_tokenizer`);
        a local folder or ``tokenizer.json``; a model name in the local Hugging Face cache
        (loaded offline); a ``transformers`` fast tokenizer or ``tokenizers.Tokenizer``.
    client : None, dask.distributed.Client or str, keyword-only
        ``None`` counts in this process. A client spreads the partitions over its workers
        (pure tasks: a lost worker's partitions are recomputed, or read back from
        ``workdir``). A scheduler address (``"tcp://host:8786"``) is connected to (a clear
        ``ConnectionError`` within 5 s when nothing answers) and closed afterwards.
    batch_size : int, keyword-only, default 1000
        Texts per call to the batch encoder.
    partition_rows : int, keyword-only, default 16384
        Rows per partition of a parquet shard: consecutive row groups are grouped up to
        this many rows and larger row groups are cut into equal slices, the last one into a
        half and two quarters. JSON-lines and text shards are one partition each. Dask
        workers take the partitions largest first (by the bytes to read), so that they
        finish together.
    workdir : path, keyword-only, optional
        Where the counts of each partition are stored (one ``.npz`` per partition, named by
        a key of its content: shard name, size and SHA-256 of a local file (of its 4 MiB
        blocks' digests, against which it is read) or a remote checksum, rows, column,
        ``n``, tokenizer and options; written atomically). A run
        with the same ``workdir`` reads finished partitions back, so an interrupted run
        resumes and counts every partition exactly once. Kept afterwards. With a Dask
        cluster on several machines it must be a directory the workers share. Default: a
        temporary directory, removed after success (on failure the error says where it is).
    progress : bool, keyword-only, default True
        A progress bar over partitions (``TQDM_DISABLE=1`` silences it).
    add_special_tokens : bool, keyword-only, default False
        Count ``[CLS]``/``[SEP]`` (or the tokenizer's specials) as positions.
    clean_html : bool, keyword-only, default True
        Replace ``<br />`` tags by spaces, as :func:`posgeo.tokenize`.
    drop_missing : bool, keyword-only, default False
        Skip null texts instead of refusing them (the error names the shard and rows).
    storage_options : dict, keyword-only, optional
        Passed to fsspec (credentials, endpoints).

    Returns
    -------
    PositionalCounts

    Raises
    ------
    FileNotFoundError
        A source, glob or directory that matches no shard.
    ValueError
        A shard without ``column`` (the message names the shard and its columns), an
        unreadable or corrupt shard (named), a text shard that is not UTF-8, a source that
        is a device or a pipe, null texts without ``drop_missing``, a shard listed twice
        (also through a link), a local shard that changed while it was counted (nothing of
        it is stored: rerun), a tokenizer that cannot be loaded offline or is empty (one
        line), ``n_positions`` whose counts cannot fit in memory (checked first), no
        documents at all. Empty shards (0 bytes, 0 rows) are skipped with a warning.
    TypeError
        A non-text column, bad argument types.
    ConnectionError
        A scheduler address that does not answer within 5 s.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text("\\n".join(json.dumps({"text": t}) for t in ["Hello world", "Hello"]))
    >>> c = positional_counts(d / "a.jsonl", column="text", n_positions=2, progress=False)
    >>> c.reach.tolist(), c.n_documents, c.counts.nnz
    ([2, 1], 2, 2)
    """
    result, _ = count_sources(
        sources, column=column, n_positions=n_positions, tokenizer=tokenizer, client=client,
        batch_size=batch_size, partition_rows=partition_rows, workdir=workdir, progress=progress,
        add_special_tokens=add_special_tokens, clean_html=clean_html, drop_missing=drop_missing,
        storage_options=storage_options,
    )
    return result
