"""Check .npy / .npz headers before loading: a header that claims more data than the file
holds (a 10^6 x 10^6 array in a 1 kB file) is an error naming the array, not an attempt
to allocate terabytes."""

from __future__ import annotations

import os
import zipfile
from typing import IO

import numpy as np

from converter.common.errors import ConverterError


class ArrayFileError(ConverterError):
    pass


def read_npy_header(f: IO[bytes]) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran order) of the .npy stream at `f`, which is left at the data."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    return tuple(shape), np.dtype(dtype), fortran


def _check(what: str, shape: tuple[int, ...], dtype: np.dtype, available: int) -> None:
    if dtype.hasobject:
        raise ArrayFileError(f"error: {what}: holds Python objects, which are not read (allow_pickle is off)")
    claimed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if claimed > available:
        raise ArrayFileError(f"error: {what}: the header claims a {dtype.name}{list(shape)} array "
                             f"({claimed} bytes) but only {available} bytes of data follow")


def check_npy_header(path: str) -> None:
    """Raise ArrayFileError when `path` (.npy or .npz) claims data it does not hold."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    if not info.filename.endswith(".npy"):
                        continue
                    with z.open(info) as f:
                        shape, dtype, _ = read_npy_header(f)
                        start = f.tell()
                    _check(f"{path}: {info.filename[:-4]}", shape, dtype, info.file_size - start)
            return
        with open(path, "rb") as f:
            shape, dtype, _ = read_npy_header(f)
            start = f.tell()
        _check(path, shape, dtype, os.path.getsize(path) - start)
    except ArrayFileError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, IsADirectoryError) or os.path.isdir(path):
            raise ArrayFileError(f"error: {path}: is a directory, not an .npy/.npz file") from None
        if isinstance(e, FileNotFoundError):
            raise ArrayFileError(f"error: {path}: no such file") from None
        kind = ".npz" if path.endswith(".npz") else ".npy" if path.endswith(".npy") else ".npy/.npz"
        raise ArrayFileError(f"error: {path}: not a readable {kind} file ({e})") from None
