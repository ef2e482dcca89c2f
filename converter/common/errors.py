"""The error types users see, and the one formatter of located diagnostics.  Every error is
reported by the CLI as one message (no traceback unless --debug) with exit status 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A place in a file: a dump's `file:line:col`, a Python source's `file:line` (col None),
    or a whole file (line None).  Lines and columns count from 1, as compilers print them."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}" if self.col is None else f"{self.file}:{self.line}:{self.col}"


def diagnostic(where: SourceLocation | None, message: str, severity: Severity = "error") -> str:
    """`file:line:col: error: message`, the way every located message begins (the form
    compilers use, so editors jump to the place); `error: message` when there is no place."""
    return f"{where}: {severity}: {message}" if where is not None else f"{severity}: {message}"


class ConverterError(Exception):
    """Base class for errors about the user's input (bad or unsupported dump, inputs)."""


class UsageError(ConverterError):
    """A bad command line (an unknown pass name, an unknown file extension): exit 2."""
class ConverterWarning(UserWarning):
    """Something the user should know about their input that does not stop the conversion
    (an attribute kept as raw text under --allow-unknown-attributes, ...).  The CLI prints
    the message alone on stderr."""
