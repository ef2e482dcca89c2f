"""Check .npy / .npz headers before loading: a header that claims more data than the file
holds (a 10^6 x 10^6 array in a 1 kB file) is an error naming the array, not an attempt
to allocate terabytes."""

from __future__ import annotations

import os
import re
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


def npz_argument_keys(path: str, keys: list[str], params: list, shapes: dict[str, tuple[int, ...]],
                      num_devices: int = 1) -> list[str]:
    """The key of each argument (arg0..argN, in order) in an .npz holding `keys`.  Besides
    `argN`, two keyings name every argument one way only, and are read as such:
    `arr_0..arr_N` (what `np.savez(f, *arrays)` writes: positional, like argN) and the
    entry parameters' own names (`params[i].name`, when they are distinct).  Any other keying
    is an error naming the keys found, the arguments expected, and how to rename them."""
    n = len(params)
    found = set(keys)
    for keying in ([f"arg{i}" for i in range(n)], [f"arr_{i}" for i in range(n)], [p.name for p in params]):
        if found == set(keying) and len(set(keying)) == n:
            return keying
    expected = [f"arg{i}" for i in range(n)]
    if any(re.fullmatch(r"arg\d+", k) for k in keys):  # argN keys, some missing or extra
        missing = [k for k in expected if k not in found]
        extra = sorted(found - set(expected))
        if missing:
            spec = params[int(missing[0][3:])]
            raise ArrayFileError(f"{path}: missing {', '.join(missing)} (arg{spec.index} is {spec.name}, "
                                 f"{spec.describe()})")
        raise ArrayFileError(f"{path}: unexpected key(s) {', '.join(extra)}; inputs are {expected[0]}..{expected[-1]}")
    described = ", ".join(f"arg{i} = {p.name} {p.describe()}" for i, p in enumerate(params[:6]))
    shown = ", ".join(sorted(keys)[:8]) + (", ..." if len(keys) > 8 else "")
    message = (f"{path}: holds {len(keys)} array(s) keyed {shown}, which name none of the module's {n} "
               f"argument(s) ({described}{', ...' if n > 6 else ''}); key them arg0..arg{n - 1} in "
               f"parameter order (np.savez(f, arg0=..., arg1=...)), arr_0..arr_{n - 1} (np.savez(f, *arrays)) "
               "or by the parameters' names")
    # Where each argument's shape is held by exactly one key, say which key that is.
    by_shape = []
    for i, p in enumerate(params):
        fits = [k for k in keys if shapes.get(k) in (tuple(p.shape), (num_devices, *p.shape))]
        if len(fits) == 1:
            by_shape.append(f"{fits[0]} -> arg{i}")
    if by_shape and len(keys) == n:
        message += f"; by shape: {', '.join(by_shape)}"
    raise ArrayFileError(message)
