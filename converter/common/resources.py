"""What this machine can hold: checks made before an allocation too large to succeed, so
that the user gets a message naming what asked for it instead of a MemoryError, or XLA
aborting the process."""

from __future__ import annotations

import os

from converter.common.errors import ConverterError


def available_bytes() -> int:
    """Memory the process can still get: MemAvailable (Linux), else physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.3g} GiB" if nbytes >= 1 << 30 else f"{nbytes / (1 << 20):.3g} MiB"


def array_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of a dense array; 0 when a dimension is dynamic (negative: unknown here)."""
    n = itemsize
    for d in shape:
        if d < 0:
            return 0
        n *= d
    return n


def check_fits(nbytes: int, what: str) -> None:
    """Refuse (ConverterError) to allocate `nbytes` for `what` when the machine has less."""
    free = available_bytes()
    if nbytes > free:
        raise ConverterError(f"error: {what} needs {gib(nbytes)}; this machine has {gib(free)} of memory available")
