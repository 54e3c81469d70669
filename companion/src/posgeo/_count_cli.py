"""The ``posgeo count`` command: sharded corpora counted into one ``counts.npz``, resumably,
one run at a time per output (a lock), on a local Dask cluster or a running scheduler."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from ._count_run import BYTES_PER_POSITION, count_sources
from ._messages import one_line
from .validation import check_positions

__all__: list[str] = []  # count_main is the CLI's (posgeo.__main__)

_COUNT_DESCRIPTION = """\
Count tokens per position over sharded text sources into one counts.npz file.

SOURCES are parquet, JSON-lines or text shards (optionally compressed), globs, directories or
fsspec URLs (hf://, s3://, gs://), or Hugging Face datasets read in streaming mode as
hub:NAME:SPLIT (hub:NAME:CONFIG:SPLIT, hub:NAME@REVISION:SPLIT; NAME a dataset id or a local
dataset folder). Documents are tokenised without truncation (and without
special tokens unless --add-special-tokens) and their first N tokens counted. The counts of
each finished partition are kept in --workdir (default OUT.parts, removed after success unless
--keep-parts): rerunning the same command after an interruption resumes where it stopped.
By default the partitions are spread over a LocalCluster of one Dask worker per available
core; --workers 1 counts in this process, --scheduler uses a running cluster. One run at a
time writes a given OUT: a second one stops at once, naming the first (OUT.lock).
"""


class _CountParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def _default_workers() -> int:
    """``posgeo count``'s default number of workers: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def _count_parser() -> argparse.ArgumentParser:
    p = _CountParser(prog="posgeo count", description=_COUNT_DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", nargs="+", metavar="SOURCES", help="shards, globs, directories, URLs or hub:NAME:SPLIT")
    p.add_argument("--column", required=True, metavar="COL", help="text column (parquet) or key (JSON lines)")
    p.add_argument("--positions", type=int, required=True, metavar="N", help="count positions 0..N-1")
    p.add_argument("--tokenizer", metavar="NAME_OR_PATH", default=None,
                   help="local folder, tokenizer.json or cached model name (default: bundled bert-base-uncased)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="K", default=None,
                       help=f"local Dask workers (a LocalCluster), one thread each (default: one per available core, "
                            f"{_default_workers()} here; 1 counts in this process, without Dask)")
    where.add_argument("--scheduler", metavar="ADDRESS", help="address of a running Dask scheduler (tcp://host:8786)")
    p.add_argument("--out", required=True, metavar="FILE", help="the counts file to write (.npz)")
    p.add_argument("--workdir", metavar="DIR", help="partial counts (default: OUT.parts)")
    p.add_argument("--keep-parts", action="store_true", help="keep the partial counts after success")
    p.add_argument("--partition-rows", type=int, default=16384, metavar="R", help="rows per parquet partition")
    p.add_argument("--batch-size", type=int, default=1000, metavar="B", help="texts per tokenizer batch")
    p.add_argument("--add-special-tokens", action="store_true", help="count [CLS]/[SEP] as positions")
    p.add_argument("--no-clean-html", action="store_true", help="keep <br /> tags")
    p.add_argument("--drop-missing", action="store_true", help="skip null texts instead of refusing them")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


class _OutputBusy(Exception):
    """Another ``posgeo count`` holds the lock of the same --out."""


@contextlib.contextmanager
def _output_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT.lock`` (an advisory ``fcntl.flock``, released by the system however the
    process ends) while counting into ``out``: a second run with the same ``--out`` would delete
    this run's partial counts. The file says who holds it (pid, host, start time) and is
    removed on the way out; a file left by a killed run holds no lock and is taken over.

    Raises :class:`_OutputBusy` (naming the other run) at once when the lock is held."""
    lock = out.with_name(out.name + ".lock")
    fd = _acquire(lock, out)
    if fd is None:  # no advisory locks here: unguarded
        yield
        return
    try:
        started = time.strftime("%Y-%m-%d %H:%M:%S %z")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "out": str(out)}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        yield
    finally:
        try:  # removed while still held: a run that opened it meanwhile sees another file and retries
            os.unlink(lock)
        except OSError:
            pass
        os.close(fd)


def _acquire(lock: Path, out: Path) -> int | None:
    """The descriptor of ``lock``, held (``flock``, not waiting); ``None`` where the platform or
    file system has no advisory locks (a warning says so)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise _OutputBusy(
                f"another posgeo count {holder} is writing {out} (it holds {lock}); wait for it to finish, or pass "
                "another --out"
            ) from None
        except OSError as exc:  # some network file systems
            os.close(fd)
            warnings.warn(f"cannot lock {lock} ({one_line(exc)}): two runs with the same --out would delete each "
                          "other's partial counts; run one at a time", stacklevel=4)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder may have removed the file between our open and flock: lock the one in place
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _lock_holder(fd: int) -> str:
    """Who holds a lock file, from what it says: ``"(pid 123 on host, started ...)"``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"(pid {int(info['pid'])} on {info['host']}, started {info['started']})"
    except Exception:  # being written, or not ours
        return "(pid unknown: it is starting)"


def _local_cluster(workers: int) -> tuple[Any, Any]:
    """A LocalCluster of ``workers`` processes (one thread each) and its client. Its processes
    ignore SIGINT (inherited at their start): a Ctrl-C reaches the whole process group, and
    this process stops them, instead of each printing its traceback."""
    from distributed import Client, LocalCluster

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread per worker
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    try:
        return cluster, Client(cluster, set_as_default=False)
    except BaseException:
        cluster.close()
        raise


def _quiet_distributed() -> None:
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _close_quietly(client: Any, cluster: Any) -> None:
    """Close a client and a cluster (either may be None; a scheduler address is not closed);
    a second Ctrl-C meanwhile is ignored (the processes stop with this one)."""
    for thing in (client, cluster):
        if thing is None or isinstance(thing, str):
            continue
        try:
            thing.close()
        except KeyboardInterrupt:
            _quiet_distributed()


def count_main(argv: Sequence[str] | None = None) -> int:
    """``posgeo count SOURCES... --column COL --positions N --out counts.npz [options]``.

    Exit status 0 on success, 2 for a usage or input error (one line on stderr; also when
    another run writes the same ``--out``: it holds ``OUT.lock``), 130 when interrupted (one
    line; the partial counts are kept: rerun the same command to resume).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``count`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.jsonl").write_text(json.dumps({"text": "Hello world"}))
    >>> count_main([str(d / "a.jsonl"), "--column", "text", "--positions", "2", "--out", str(d / "c.npz"),
    ...             "--workers", "1", "--no-progress"])
    counted 1 documents (2 tokens at positions < 2) from 1 shard(s) in 1 partition(s) (0 read back) in ... wrote .../c.npz
    0
    """
    args = _count_parser().parse_args(argv)

    def fail(message: str) -> int:
        print(f"posgeo count: error: {message}", file=sys.stderr)
        return 2

    out = Path(args.out)
    if not out.name or out.is_dir():
        return fail(f"--out {args.out!r} is a directory; pass a file name such as counts.npz")
    if not out.parent.resolve().is_dir():
        return fail(f"the directory of --out ({out.parent}) does not exist; create it first")
    if not os.access(out.parent.resolve(), os.W_OK):
        return fail(f"cannot write into {out.parent}; pass --out in a writable directory")
    workers = _default_workers() if args.workers is None else args.workers
    if workers < 1:
        return fail(f"--workers must be >= 1, got {workers} (1 counts in this process)")
    try:  # before anything is read or started
        check_positions(args.positions, "--positions", per_position=BYTES_PER_POSITION,
                        what=f"the counts (about {BYTES_PER_POSITION} bytes per position while counting)")
    except (TypeError, ValueError) as exc:
        return fail(one_line(exc, limit=None))
    workdir = Path(args.workdir) if args.workdir else out.with_name(out.name + ".parts")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_output_lock(out))
        except _OutputBusy as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"cannot lock --out {out} ({one_line(exc)}); pass --out in a writable local directory")
        cluster = client = None
        try:
            if args.scheduler:
                client = args.scheduler
            elif workers > 1:
                cluster, client = _local_cluster(workers)
            counts, stats = count_sources(
                args.sources, column=args.column, n_positions=args.positions, tokenizer=args.tokenizer,
                client=client, batch_size=args.batch_size, partition_rows=args.partition_rows, workdir=workdir,
                progress=not args.no_progress, add_special_tokens=args.add_special_tokens,
                clean_html=not args.no_clean_html, drop_missing=args.drop_missing, storage_options=None,
                remove_workdir=False,
            )
            counts.save(out)
            if not args.keep_parts and not args.workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        except KeyboardInterrupt:
            _quiet_distributed()  # closing a cluster whose tasks were cancelled logs their errors
            _close_quietly(client, cluster)
            client = cluster = None
            print(f"posgeo count: interrupted; the finished partitions are kept in {workdir}: rerun the same command "
                  "to resume", file=sys.stderr)
            return 130
        except (ValueError, TypeError, OSError) as exc:  # FileNotFoundError, ConnectionError are OSErrors
            return fail(one_line(exc, limit=None))  # whole: our messages end with the fix
        finally:
            _close_quietly(client, cluster)
    print(
        f"counted {counts.n_documents:,} documents ({counts.n_tokens:,} tokens at positions < {counts.n_positions}) "
        f"from {len(counts.sources)} shard(s) in {stats.partitions} partition(s) ({stats.resumed} read back) in "
        f"{stats.seconds:.1f} s: {counts.counts.nnz:,} nonzero counts, V = {counts.vocab_size}; wrote {out}"
    )
    return 0
