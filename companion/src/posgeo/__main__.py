"""The ``posgeo`` command line: ``posgeo audit DATASET [options]`` (also ``python -m posgeo``),
``posgeo audit --counts counts.npz [options]`` and ``posgeo count SOURCES... [options]``.

``posgeo audit`` runs :func:`posgeo.audit.audit` and writes ``report.html`` (self-contained: it
loads nothing from anywhere) and ``report.json`` (the same numbers) into ``--out``. Input
problems (a missing file or column, an empty split, a model that cannot be loaded offline,
sequences shorter than ``--positions``, text that is not text, an unusable ``--out``, a
usage error) are reported in one line on stderr, with exit status 2 and no traceback;
``--out`` is checked before anything is computed, and the two files are written
atomically (never an HTML report without its JSON).

Exit statuses: 0 success; 2 a usage or input error, or stdout that cannot be written (a
full disk: one line on stderr); 130 interrupted (Ctrl-C, SIGINT: one line on stderr);
141 stdout closed by its reader (``posgeo audit ... | head``): nothing more is printed, as a
tool killed by SIGPIPE (128 + 13) would exit, so that ``set -o pipefail`` still sees it
(the report files are already written by then).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import NoReturn, Sequence

__all__ = ['build_parser', 'main']


_EXIT_USAGE = 2
_EXIT_INTERRUPTED = 130  # 128 + SIGINT
_EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE

_DESCRIPTION = "The geometry of positional encodings: tools of the companion package of the book."

_AUDIT_DESCRIPTION = textwrap.dedent(
    """\
    Audit how well a model's positions fit the positional geometry of a corpus.

    Measures the corpus geometry of positions 0..N-1 (chord Hellinger distances between the
    token distributions of the positions, plug-in and noise-corrected, and their effective
    rank), the best fit any encoding can reach (PMDS and stress-optimal SMACOF), and the fit
    of the model's own positions: raw and scale-optimal stress, separation, monotonicity
    violation rate, and per-layer projected stress (BERT-architecture encoders). Writes
    report.html (self-contained) and report.json (the same numbers) into --out.

    DATASET is one of:
      a .parquet file          the text column is --column, else 'text' or 'sentence'
      any other file           UTF-8 text, one sequence per line (blank lines skipped)
      sst2, imdb               the book's corpora: local copy in --data-dir or $POSGEO_DATA_DIR,
                               else the Hugging Face hub
      a hub dataset id         e.g. stanfordnlp/sst2 (needs the network)

    or, with --counts FILE instead of DATASET, the positional counts that `posgeo count`
    wrote (sharded corpora, counted once, in parallel): audited without re-tokenising,
    with the same geometry and stresses as the texts audited directly. They must have been
    made with the model's tokenizer and at least N positions; there are no sampling
    intervals (they need the sequences), and --split, --column, --max-sequences,
    --data-dir and --drop-empty do not apply.

    The model (--model) is a local folder (config.json, weights, tokenizer), a hub id (the
    network or the local Hugging Face cache), or by default the bundled all-MiniLM-L6-v2.
    Learned absolute tables are used as they are; RoPE and ALiBi models get the vector
    constructions of the book's MDS chapter (only their config and tokenizer are loaded).

    A second run on the same inputs reads the result from the cache ($POSGEO_CACHE_DIR,
    default ~/.cache/posgeo). Progress bars go to stderr (--no-progress or TQDM_DISABLE=1
    silences them).
    """
)

_AUDIT_EPILOG = textwrap.dedent(
    """\
    examples:
      posgeo audit sst2 --positions 48 --out audit-sst2
      posgeo audit reviews.parquet --column body --model ./my-bert --positions 128
      posgeo audit sentences.txt --positions 16 --max-sequences 5000
      posgeo count 'shards/*.parquet' --column text --positions 128 --workers 2 --out counts.npz
      posgeo audit --counts counts.npz --positions 128

    exit status: 0 on success, 2 for a usage or input error or an unwritable stdout (one
    line on stderr), 130 when interrupted (Ctrl-C), 141 when stdout is closed early (as by
    `| head`; quietly, like a tool killed by SIGPIPE).
    """
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (with where to find the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(_EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``posgeo`` command.

    Returns
    -------
    argparse.ArgumentParser

    Examples
    --------
    >>> args = build_parser().parse_args(["audit", "sst2", "--positions", "16"])
    >>> args.command, args.dataset, args.positions, args.model
    ('audit', 'sst2', 16, None)
    """
    parser = _Parser(
        prog="posgeo",
        description=_DESCRIPTION,
        epilog="Run `posgeo audit --help` for the audit's options.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"posgeo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # `posgeo count` is dispatched by main() before this parser runs; listed here for --help.
    sub.add_parser("count", add_help=False,
                   help="count tokens per position in sharded corpora, sparse and resumable (posgeo count --help)")
    p = sub.add_parser(
        "audit",
        help="audit a model's positions against a corpus's positional geometry (HTML + JSON report)",
        description=_AUDIT_DESCRIPTION,
        epilog=_AUDIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", metavar="DATASET", nargs="?", default=None,
                   help="a .parquet or text file, sst2/imdb, or a hub dataset id (omitted with --counts)")
    p.add_argument("--counts", metavar="FILE",
                   help="audit the positional counts written by `posgeo count` instead of a DATASET (no re-tokenising)")
    p.add_argument("--split", default="train", help="split of sst2/imdb or a hub dataset (default: train)")
    p.add_argument("--column", metavar="NAME", help="text column of a parquet or hub dataset (default: text or sentence)")
    p.add_argument("--model", metavar="ID_OR_PATH",
                   help="local model folder or hub id (default: the bundled all-MiniLM-L6-v2)")
    p.add_argument("--positions", type=int, default=48, metavar="N",
                   help="audit positions 0..N-1 (default: 48; at least 10 sequences must reach N tokens)")
    p.add_argument("--max-sequences", type=int, metavar="M", help="audit a random subset of M sequences")
    p.add_argument("--seed", type=int, default=0, help="seed of the subset, noise estimate and random baseline (default: 0)")
    p.add_argument("--data-dir", metavar="DIR", help="local data directory for sst2/imdb (default: $POSGEO_DATA_DIR)")
    p.add_argument("--out", metavar="DIR",
                   help="output directory for report.html and report.json (default: posgeo-audit-DATASET-MODEL)")
    p.add_argument("--drop-empty", action="store_true",
                   help="drop missing (null) and empty texts instead of refusing them (default: refuse, naming the rows)")
    p.add_argument("--intervals", type=int, default=20, metavar="K",
                   help="halvings of the 95%% sampling intervals of the corrected stresses (default: 20; 0: none)")
    p.add_argument("--static", action="store_true",
                   help="charts of report.html as plain SVG images, no JavaScript (default: interactive charts)")
    p.add_argument("--no-cache", action="store_true", help="recompute everything and store nothing in the cache")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _slug(text: str) -> str:
    name = Path(text.rstrip("/\\")).name or text
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "x"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _error(message: str) -> int:
    print(f"posgeo audit: error: {message}", file=sys.stderr)
    return _EXIT_USAGE


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's last flush of what is
    still buffered neither fails again nor prints "Exception ignored"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a replaced sys.stdout)
        pass


def _close_progress_bars() -> None:
    """Close the open tqdm bars (each ends its line), so that a last message starts a line."""
    tqdm_module = sys.modules.get("tqdm")
    bars = list(getattr(getattr(tqdm_module, "tqdm", None), "_instances", ()))
    # transient bars (leave=False, which end with "\r") first, kept ones (which end with "\n") last
    for bar in sorted(bars, key=lambda b: getattr(b, "leave", True) is not False):
        try:
            bar.close()
        except Exception:  # a bar interrupted in its constructor may lack attributes
            pass


def _print_summary(report: object, html_path: Path, json_path: Path) -> None:
    import pandas as pd

    with pd.option_context("display.precision", 4, "display.width", 120, "display.max_colwidth", 60):
        table = report.summary().to_string(na_rep="")  # type: ignore[attr-defined]
    print(f"audited {report.model['label']} ({report.model['positional_kind']}) on {report.dataset['description']}")  # type: ignore[attr-defined]
    print(table)
    for key, text in report.notes.items():  # type: ignore[attr-defined]
        print(f"note ({key}): {text}")
    print(f"report: {html_path}")
    print(f"json:   {json_path}")
    sys.stdout.flush()  # a full or closed stdout fails here, not at the interpreter's exit


def _run_audit(args: argparse.Namespace) -> int:
    from posgeo import CorpusUnavailableError
    from posgeo.audit import AuditReport, audit  # lazily: `posgeo --help` needs none of it

    if args.no_progress:  # also the bars of transformers (loading weights); this process is ours
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if args.out is not None and not args.out.strip():
        return _error("--out is empty; pass a directory for report.html and report.json, or omit --out for "
                      "the default posgeo-audit-DATASET-MODEL")
    if args.dataset is None and args.counts is None:
        return _error("no DATASET given; pass a .parquet or text file, sst2/imdb or a hub dataset id, or --counts FILE "
                      "(counts written by `posgeo count`)")
    if args.dataset is not None and args.counts is not None:
        return _error(f"pass DATASET ({args.dataset!r}) or --counts FILE, not both: the counts name the shards they count")
    name = args.dataset if args.counts is None else Path(args.counts).stem
    out = args.out or f"posgeo-audit-{_slug(name)}-{_slug(args.model) if args.model else 'all-MiniLM-L6-v2'}"
    try:
        AuditReport.output_paths(out)  # before computing: an unusable --out fails now, not after the audit
        report = audit(
            args.dataset,
            counts=args.counts,
            model=args.model,
            split=args.split,
            column=args.column,
            n_positions=args.positions,
            max_sequences=args.max_sequences,
            data_dir=args.data_dir,
            seed=args.seed,
            progress=not args.no_progress,
            cache=not args.no_cache,
            drop_empty=args.drop_empty,
            intervals=args.intervals,
        )
        html_path, json_path = report.write(out, static=args.static)
    except (ValueError, TypeError, OSError, CorpusUnavailableError) as exc:
        return _error(_one_line(exc))
    try:
        _print_summary(report, html_path, json_path)
    except BrokenPipeError:  # the reader went away (`| head`): quietly, as SIGPIPE would
        _silence_stdout()
        return _EXIT_BROKEN_PIPE
    except OSError as exc:  # e.g. ENOSPC: stdout redirected to a full disk
        _silence_stdout()
        return _error(f"cannot write to stdout ({exc.strerror or _one_line(exc)}); the reports are written: "
                      f"{html_path} and {json_path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``posgeo`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success; 2 for a usage or input error, or a stdout that
        cannot be written (reported on stderr in one line); 130 when interrupted (Ctrl-C:
        one line on stderr); 141 when stdout is closed by its reader (nothing printed, as
        a tool killed by SIGPIPE).

    Examples
    --------
    >>> main(["audit", "no-such-file.txt", "--no-progress"])
    2
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "count":  # posgeo count SOURCES... (sparse positional counts; posgeo._count_cli)
        from ._count_cli import count_main

        return count_main(args[1:])
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _close_progress_bars()
        print("posgeo audit: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `posgeo audit --help | head -1`
        _silence_stdout()
        return _EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (printed in one line)
        return int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else _EXIT_USAGE)
    if args.command is None:
        print("posgeo: error: no command given; run `posgeo audit DATASET` (see `posgeo --help`)", file=sys.stderr)
        return _EXIT_USAGE
    if args.command == "audit":
        return _run_audit(args)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse rejects it first
    return _EXIT_USAGE  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
