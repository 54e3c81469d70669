"""One-line error messages: an exception's text, whitespace collapsed, shown inside posgeo's own messages."""

from __future__ import annotations

__all__: list[str] = []


def one_line(exc: BaseException, *, limit: int | None = 300) -> str:
    """The exception's message on one line, cut to ``limit`` characters (``None``: whole).

    >>> one_line(ValueError("no\\n  such   file"))
    'no such file'
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
