"""Files the CLI writes (whole or not at all) and the messages for files it cannot read
or write: they name the user's path, never an internal temporary file."""

from __future__ import annotations

import errno
import os
from typing import Callable, IO

from converter.common.errors import ConverterError


def describe_os_error(e: OSError, path: str | None = None) -> str:
    path = path or e.filename or "?"
    if isinstance(e, IsADirectoryError) or (e.errno == errno.EISDIR) or os.path.isdir(path):
        return f"{path}: is a directory, not a file"
    if isinstance(e, FileNotFoundError):
        return f"{path}: no such file"
    if isinstance(e, PermissionError):
        return f"{path}: permission denied"
    return f"{path}: {e.strerror or e}"


def partial_file(path: str, pid: int | None = None) -> str:
    """The temporary file `write_atomic` writes beside `path` in process `pid` (this one by
    default) before renaming it: what to remove when that process is stopped midway."""
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid() if pid is None else pid}")


def output_path_problem(path: str, directory_ok: bool = False) -> str | None:
    """Why `path` cannot be written (None when it can), checked before any work so that a
    typo in a folder does not cost a whole run: its folder must exist and be writable, and
    it must not be a folder itself (`directory_ok`: it is a folder to create or fill, whose
    parent must then exist)."""
    if not path:
        return "an empty path"
    if directory_ok:
        if os.path.isdir(path):
            return None if os.access(path, os.W_OK | os.X_OK) else "the directory is not writable"
        if os.path.exists(path):
            return "it exists and is not a directory"
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            return f"directory {parent} does not exist"
        return None if os.access(parent, os.W_OK | os.X_OK) else f"directory {parent} is not writable"
    if os.path.isdir(path):
        return "it is a directory"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"directory {directory} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable"
    return None


def write_atomic(path: str, data: bytes | str | Callable[[IO[bytes]], None]) -> None:
    """Write `data` (or what the callable writes into a binary file) to `path`, whole or
    not at all: into a temporary file beside it, then renamed."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConverterError(f"error: cannot write {path}: it is a directory")
    if not os.path.isdir(directory):
        raise ConverterError(f"error: cannot write {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ConverterError(f"error: cannot write {path}: directory {directory} is not writable")
    tmp = partial_file(path)
    try:
        with open(tmp, "w" if isinstance(data, str) else "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        raise ConverterError(f"error: cannot write {path}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
