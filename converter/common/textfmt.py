"""Plain-text tables and byte counts for the CLI's reports."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """1536 -> '1.50 KiB' (binary units, as XLA prints them)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def table(rows: list[list[str]], header: list[str], right: set[int] | frozenset[int] = frozenset()) -> str:
    """Columns padded to their widest cell; the columns in `right` are right-aligned."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
