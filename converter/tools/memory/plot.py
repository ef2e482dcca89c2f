"""`memory --plot`: live bytes over the schedule, the peak marked (matplotlib, the `plot` extra)."""

from __future__ import annotations

import os

from converter.common.errors import ConverterError, UsageError
from converter.tools.memory.analysis import MemorySummary
from converter.common.textfmt import human_bytes


def check_plot_path(out: str) -> None:
    """A bad --plot file name is a bad command line, found before any work is done."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--plot {out}: the file name must end in .png, .svg or .pdf")


_PEAK_SOURCE = {
    "file": "XLA's peak moment, as the file states it",
    "recomputed": "XLA's peak moment, by XLA's rule over the live ranges",
    "curve": "the maximum of this curve (no instruction shapes: XLA's own count cannot be made)",
}


def binary_tick_step(vmax: float, most: int = 8) -> int:
    """A power of two of bytes giving at most `most` ticks up to `vmax` (256 MiB, 512 MiB,
    1 GiB rather than 300 MB or 1.07e9)."""
    step = 1
    while vmax / step > most:
        step *= 2
    return step


def build_figure(s: MemorySummary):
    """The figure (matplotlib's, Agg backend) and its axes: the live-bytes curve, one
    curve per memory color that holds bytes, the peak marked with what it means."""
    live = s.dump.live_range
    if live is None or not s.curve:
        raise ConverterError(f"{s.dump.paths[0]}: no live ranges in this dump (no `HloLiveRange` section); "
                             "there is nothing to plot")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display on the machines this runs on
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, MultipleLocator
    except ImportError:
        raise ConverterError("--plot needs matplotlib: pip install 'hlo-roundtrip[plot]'") from None

    xs = list(range(len(s.curve)))
    fig, ax = plt.subplots(figsize=(13, 4.5))
    ax.step(xs, s.curve, where="post", color="black", linewidth=1.5, label="live bytes by buffer size, all colors")
    # A color with no bytes would be a flat line at zero and a legend entry for nothing.
    holding = {c: row for c, row in s.curve_by_color.items() if any(row)}
    if len(holding) > 1:
        for color, row in holding.items():
            ax.step(xs, row, where="post", linewidth=1, alpha=0.8, label=f"color {color}")
    highest = max(xs, key=s.curve.__getitem__)
    if s.peak_time is not None:
        t = s.peak_time
        name = live.sequence[t] if t < len(live.sequence) else "end of the schedule"
        xla = f"{human_bytes(s.xla_peak_bytes)} live as XLA sizes it, " if s.xla_peak_bytes is not None else ""
        ax.axvline(t, color="tab:red", linestyle="--", linewidth=1,
                   label=f"{_PEAK_SOURCE.get(s.peak_source, 'peak')}: position {t}")
        ax.annotate(f"{_PEAK_SOURCE.get(s.peak_source, 'peak')}\nat position {t}, the definition of {name}\n"
                    f"{xla}{human_bytes(s.curve[t])} on this curve",
                    xy=(t, s.curve[t]), xytext=(0.02, 0.95), textcoords="axes fraction", va="top",
                    arrowprops={"arrowstyle": "->", "color": "tab:red"}, color="tab:red", fontsize=8)
        if highest != t:
            # XLA sizes each value by its instruction's whole shape and counts a value
            # from its definition to one past its last use; the curve sizes values by
            # their own shape: the two maxima need not coincide, and the picture says so.
            other = live.sequence[highest] if highest < len(live.sequence) else "end of the schedule"
            ax.axvline(highest, color="tab:gray", linestyle=":", linewidth=1,
                       label=f"maximum of this curve (live bytes by buffer size), not XLA's peak: "
                             f"position {highest} ({other})")
    ax.set_xlabel("schedule position")
    ax.set_ylabel("live bytes (by buffer size)")
    ax.yaxis.set_major_locator(MultipleLocator(binary_tick_step(max(s.curve) or 1)))
    # Round binary values read best without decimals: "512 MiB", "1.50 GiB" only if it is.
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v).replace(".00 ", " ")))
    ax.set_xlim(0, max(1, len(s.curve) - 1))
    ax.set_ylim(bottom=0)
    ax.set_title(os.path.basename(s.dump.paths[0]), fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the curve, not over it
    fig.tight_layout()
    return fig, ax


def plot_live_bytes(s: MemorySummary, out: str) -> None:
    check_plot_path(out)
    fig, _ = build_figure(s)
    try:
        fig.savefig(out)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
