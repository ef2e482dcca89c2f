"""The text `hlo-roundtrip memory` prints."""

from __future__ import annotations

from converter.tools.memory.analysis import KINDS, MemorySummary
from converter.tools.memory.model import format_key
from converter.common.textfmt import human_bytes, table


def _b(n: int) -> str:
    return f"{n:,} ({human_bytes(n)})"


def format_summary(s: MemorySummary, top: int = 10) -> str:
    dump = s.dump
    out = [", ".join(dump.paths)]
    stated = ""
    if dump.stated_total_bytes is not None:
        stated = ", as the file states" if dump.stated_total_bytes == dump.total_bytes else \
            f", the file states {dump.stated_total_bytes:,}"
    out.append(f"total bytes used: {_b(dump.total_bytes)} in {len(dump.allocations)} allocations{stated}")

    rows = [[k, str(s.by_kind[k].count), f"{s.by_kind[k].bytes:,}", human_bytes(s.by_kind[k].bytes)]
            for k in KINDS if s.by_kind[k].count]
    if s.other.count:
        rows.append(["(none of these)", str(s.other.count), f"{s.other.bytes:,}", human_bytes(s.other.bytes)])
    out += ["", "by kind (an allocation can be of several: a donated parameter is also maybe-live-out):",
            _indent(table(rows, ["kind", "allocations", "bytes", ""], right={1, 2}))]
    rows = [[f"{c}" + (" (default)" if c == 0 else ""), str(t.count), f"{t.bytes:,}", human_bytes(t.bytes)]
            for c, t in s.by_color.items()]
    out += ["", "by memory color:", _indent(table(rows, ["color", "allocations", "bytes", ""], right={1, 2}))]
    out += ["", "as jaxlib's memory analysis would count them: "
            f"arguments {_b(s.argument_bytes)}, outputs {_b(s.output_bytes)}, "
            f"aliased {_b(s.alias_bytes)}, temps {_b(s.temp_bytes)}"]

    live = dump.live_range
    if live is None:
        out += ["", "no live ranges in this dump (no `HloLiveRange` section): the peak cannot be placed"]
    elif s.peak_time is None:
        out += ["", "XLA could not determine the peak (unbounded dynamic shapes)"]
    else:
        t = s.peak_time
        at = live.sequence[t] if t < len(live.sequence) else "end of schedule"
        how = {"file": "as the file states it", "recomputed": "by XLA's rule (the file states none)",
               "curve": "the maximum of live bytes (instruction shapes unknown)"}[s.peak_source]
        # Two maxima, each named for what it is: XLA's peak (its own count, values sized by
        # their instruction's shape) and the maximum of the curve `--plot` draws (values sized
        # by their buffers); they need not fall at one position.
        out += ["", f"XLA's peak: schedule position {t} of {live.schedule_end} ({at}), {how}"]
        if s.xla_peak_bytes is not None:
            check = ""
            if s.recomputed_xla_peak_bytes is not None:
                check = ("; recomputed from the live ranges: the same" if s.recomputed_xla_peak_bytes == s.xla_peak_bytes
                         else f"; recomputed from the live ranges: {s.recomputed_xla_peak_bytes:,}")
            out.append(f"  live at the peak as XLA sizes it: {_b(s.xla_peak_bytes)} in {len(live.stated_peak)} values{check}")
            if any(e.index is None for e in live.stated_peak):
                out.append("  (this XLA sizes each value by its instruction's shape: an element of a tuple-shaped "
                           "instruction counts as the tuple's pointer table)")
        out.append(f"  live at XLA's peak by buffer size (the plotted curve there): {_b(s.live_bytes_at_peak)} in "
                   f"{len(s.live_at_peak)} values")
        if s.curve:
            m = max(range(len(s.curve)), key=s.curve.__getitem__)
            if s.curve[m] > s.curve[t]:
                name = live.sequence[m] if m < len(live.sequence) else "end"
                out.append(f"maximum of the plotted curve (live bytes by buffer size): {_b(s.curve[m])} at position "
                           f"{m} ({name}), not XLA's peak: XLA sizes each value by its instruction's shape")
            else:
                out.append("maximum of the plotted curve (live bytes by buffer size): at XLA's peak")
        rows = []
        for b in s.live_at_peak[:top]:
            alloc = f"{b.assigned[0].index} @{b.assigned[1].offset}" if b.assigned else "-"
            shape = b.assigned[1].shape_text if b.assigned else "-"
            rows.append([f"{b.bytes:,}", format_key(b.key), _short(shape, 48), alloc,
                         _short(b.definition.describe(), 90) if b.definition else "-"])
        out += ["", f"largest buffers live at XLA's peak ({min(top, len(s.live_at_peak))} of {len(s.live_at_peak)}):",
                _indent(table(rows, ["bytes", "value", "shape", "allocation", "defined by"], right={0}))]
    if s.unsized:
        out += ["", f"note: {len(s.unsized)} values have no shape in this dump (counted as 0 bytes), e.g. "
                + ", ".join(format_key(k) for k in s.unsized[:5]) + "; --dump DUMP.hlo supplies them"]
    for m in s.mismatches:
        out.append(f"warning: {m}")
    return "\n".join(out)


def format_comparison(s: MemorySummary, compiled: dict[str, int], devices: int) -> str:
    """The original's figures beside jaxlib's memory analysis of the recompiled module."""
    rows = []
    for label, mine, key in [("arguments", s.argument_bytes, "argument_bytes"),
                             ("outputs", s.output_bytes, "output_bytes"),
                             ("aliased", s.alias_bytes, "alias_bytes"),
                             ("temps", s.temp_bytes, "temp_bytes")]:
        theirs = compiled[key]
        ratio = f"{theirs / mine:.2f}x" if mine else "-"
        rows.append([label, f"{mine:,}", human_bytes(mine), f"{theirs:,}", human_bytes(theirs), ratio])
    per = " per device" if devices > 1 else ""
    return "\n".join([f"memory{per}: the original buffer assignment and the module recompiled for CPU (jaxlib)",
                      _indent(table(rows, ["", "original", "", "CPU", "", "CPU/original"], right={1, 3, 5}))])


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
