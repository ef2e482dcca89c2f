"""What a buffer assignment says about memory: totals by kind and color, the live set at
the peak and its largest buffers, live bytes over the schedule.

Where the file states a figure (`Total bytes used`, `Live ranges at T (peak)`), the same
figure is recomputed here from the allocations and live ranges, the way XLA computes it,
and any difference is reported: the recomputation is what makes the other numbers (the
curve, the largest buffers) trustworthy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from converter.hlo.ir import ELEMENT_BITS, Shape
from converter.hlo.parser import parse_shape_prefix
from converter.tools.memory.model import Allocation, AssignedValue, BufferAssignmentDump, ValueKey, format_key

KINDS = ("parameter", "constant", "maybe-live-out", "preallocated-temp", "thread-local")
_POINTER_BYTES = 8  # XLA sizes a tuple as a table of 8-byte pointers in these reports
_RE_DEFINITION = re.compile(r"(?:ROOT )?%?([^\s=]+) = ")
_RE_OPCODE = re.compile(r"\s*([\w-]+)\(")
_RE_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_RE_ATTR = re.compile(r"\b(kind|custom_call_target|calls)=(\"[^\"]*\"|[%\w.\-]+)")


def byte_size_of(shape: Shape, pointer_size: int = _POINTER_BYTES) -> int:
    """XLA's ShapeUtil::ByteSizeOf: logical elements (tiling padding excluded), sub-byte
    types packed only when the layout says so (E(n)), a tuple as its pointer table."""
    if shape.is_tuple:
        return pointer_size * len(shape.tuple_shapes)
    if shape.is_token:
        return 0
    if shape.is_buffer:
        return byte_size_of(shape.tuple_shapes[0], pointer_size)
    bits = ELEMENT_BITS[shape.element_type]
    packed = shape.layout.element_size_bits if shape.layout is not None else 0
    if packed:
        return (shape.num_elements() * packed + 7) // 8
    return shape.num_elements() * max(1, (bits + 7) // 8)


@dataclass(frozen=True, slots=True)
class Definition:
    """What the text of a value's defining instruction tells: its shape and opcode."""

    name: str
    shape: Shape
    opcode: str
    op_name: str = ""
    attrs: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        parts = [self.opcode] + [f"{k}={v}" for k, v in self.attrs]
        if self.op_name:
            parts.append(f'"{self.op_name}"')
        return " ".join(parts)


def parse_definition(text: str) -> Definition | None:
    """`%fusion.10 = (f32[..]{..}, ...) fusion(...), kind=kOutput, ...` -> Definition."""
    m = _RE_DEFINITION.match(text)
    if m is None:
        return None
    try:
        shape, end = parse_shape_prefix(text, m.end())
    except ValueError:
        return None
    om = _RE_OPCODE.match(text, end)
    if om is None:
        return None
    op_name = _RE_OP_NAME.search(text)
    attrs = tuple((k, v.strip('"')) for k, v in _RE_ATTR.findall(text[om.end():]))
    return Definition(m.group(1), shape, om.group(1), op_name.group(1) if op_name else "", attrs)


@dataclass(slots=True)
class KindTotal:
    count: int = 0
    bytes: int = 0


@dataclass(slots=True)
class LiveBuffer:
    """A value live at the peak, with what is known of it."""

    key: ValueKey
    bytes: int  # ByteSizeOf(value shape)
    assigned: tuple[Allocation, AssignedValue] | None
    definition: Definition | None


@dataclass(slots=True)
class MemorySummary:
    dump: BufferAssignmentDump
    by_kind: dict[str, KindTotal]
    by_color: dict[int, KindTotal]
    other: KindTotal  # allocations of none of XLA's kinds
    # The figures jaxlib's memory analysis reports, computed from the allocations the way
    # XLA computes CompiledMemoryStats.
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    # Live ranges (None without an HloLiveRange section).
    peak_time: int | None = None
    peak_source: str = ""  # "file" (stated), "recomputed" (XLA's rule), "curve" (maximum)
    curve: list[int] = field(default_factory=list)  # live bytes (value sizes) at each position
    curve_by_color: dict[int, list[int]] = field(default_factory=dict)
    live_at_peak: list[LiveBuffer] = field(default_factory=list)
    xla_peak_bytes: int | None = None  # the live set at the peak as XLA sizes it (file's figure)
    recomputed_peak_time: int | None = None
    recomputed_xla_peak_bytes: int | None = None
    unsized: list[ValueKey] = field(default_factory=list)  # values whose shape is unknown
    mismatches: list[str] = field(default_factory=list)

    @property
    def live_bytes_at_peak(self) -> int:
        return sum(b.bytes for b in self.live_at_peak)


def _definitions(dump: BufferAssignmentDump, extra: dict[str, Shape] | None) -> dict[str, Definition]:
    out: dict[str, Definition] = {}
    for value in dump.used_values.values():
        name = value.key[0]
        if name not in out and value.instruction_text:
            d = parse_definition(value.instruction_text)
            if d is not None:
                out[name] = d
    for name, shape in (extra or {}).items():
        out.setdefault(name, Definition(name, shape, "?"))
    return out


def _instruction_shape(name: str, definitions: dict[str, Definition],
                       assigned: dict[ValueKey, tuple[Allocation, AssignedValue]]) -> Shape | None:
    if name in definitions:
        return definitions[name].shape
    # The value at index {} of an instruction has the instruction's shape.
    hit = assigned.get((name, ()))
    return hit[1].shape if hit is not None else None


def summarize(dump: BufferAssignmentDump, instruction_shapes: dict[str, Shape] | None = None) -> MemorySummary:
    """`instruction_shapes` (from the HLO dump, when the user gives it) fills in shapes
    that the buffer-assignment text does not print."""
    by_kind = {k: KindTotal() for k in KINDS}
    by_color: dict[int, KindTotal] = {}
    other = KindTotal()
    argument = output = alias = temp = 0
    for alloc in dump.allocations:
        kinds = alloc.kinds
        for k in kinds:
            by_kind[k].count += 1
            by_kind[k].bytes += alloc.size
        if not kinds:
            other.count += 1
            other.bytes += alloc.size
        color = by_color.setdefault(alloc.color, KindTotal())
        color.count += 1
        color.bytes += alloc.size
        if alloc.parameter is not None:
            argument += alloc.size
        if alloc.maybe_live_out:
            output += alloc.size
            if alloc.parameter is not None:
                alias += alloc.size
        if alloc.preallocated_temp:
            temp += alloc.size
    s = MemorySummary(dump, by_kind, dict(sorted(by_color.items())), other, argument, output, alias, temp)
    if dump.stated_total_bytes is not None and dump.allocations and dump.stated_total_bytes != dump.total_bytes:
        s.mismatches.append(f"the allocations sum to {dump.total_bytes} bytes, the file states "
                            f"{dump.stated_total_bytes}")
    if dump.live_range is not None:
        _live_analysis(s, instruction_shapes)
    return s


def _live_analysis(s: MemorySummary, instruction_shapes: dict[str, Shape] | None) -> None:
    dump, live = s.dump, s.dump.live_range
    assert live is not None
    assigned = dump.assigned()
    definitions = _definitions(dump, instruction_shapes)

    value_bytes: dict[ValueKey, int] = {}
    color_of: dict[ValueKey, int] = {}
    instr_bytes: dict[ValueKey, int] = {}
    for key in live.ranges:
        name, index = key
        shape = None
        if key in assigned:
            shape = assigned[key][1].shape
            color_of[key] = assigned[key][1].color
        ishape = _instruction_shape(name, definitions, assigned)
        if shape is None and ishape is not None:
            try:
                shape = ishape.subshape(index)
            except IndexError:  # an index the instruction's shape does not have
                shape = None
        if shape is None:
            s.unsized.append(key)
        else:
            value_bytes[key] = byte_size_of(shape)
        if ishape is not None:
            instr_bytes[key] = byte_size_of(ishape)

    # Live bytes at each position: +size at a value's start, -size after its end, summed
    # (linear in values plus positions; a large module has 1e5 of each).
    n = live.schedule_end
    steps: dict[int, np.ndarray] = {}
    for key, (start, end) in live.ranges.items():
        row = steps.setdefault(color_of.get(key, 0), np.zeros(n + 2, dtype=np.int64))
        size = value_bytes.get(key, 0)
        row[start] += size
        row[end + 1] -= size
    by_color = {c: np.cumsum(row)[: n + 1] for c, row in sorted(steps.items())}
    s.curve = [int(v) for v in sum(by_color.values(), np.zeros(n + 1, dtype=np.int64))]
    s.curve_by_color = {c: [int(v) for v in row] for c, row in by_color.items()}

    # XLA's HloLiveRange::ComputePeakMemoryMoment: events sorted by (time, is_end), a
    # value ending at `end` leaves at end+1, each value sized by its *instruction's* shape;
    # the peak is the first time the running sum reaches its maximum.
    if len(instr_bytes) == len(live.ranges):
        events = sorted([(st, False, k) for k, (st, _) in live.ranges.items()]
                        + [(en + 1, True, k) for k, (_, en) in live.ranges.items()],
                        key=lambda e: (e[0], e[1]))
        usage = peak = 0
        peak_time = None
        for time, is_end, key in events:
            usage += -instr_bytes[key] if is_end else instr_bytes[key]
            if usage > peak:
                peak, peak_time = usage, time
        s.recomputed_peak_time = peak_time if peak_time is not None else 0

    if live.stated_peak_time is not None:
        s.peak_time, s.peak_source = live.stated_peak_time, "file"
        if s.recomputed_peak_time is not None and s.recomputed_peak_time != live.stated_peak_time:
            s.mismatches.append(f"the live ranges put XLA's peak at position {s.recomputed_peak_time}, "
                                f"the file states {live.stated_peak_time}")
    elif s.recomputed_peak_time is not None:
        s.peak_time, s.peak_source = s.recomputed_peak_time, "recomputed"
    elif s.curve:
        s.peak_time, s.peak_source = max(range(len(s.curve)), key=s.curve.__getitem__), "curve"
    if s.peak_time is None:
        return

    t = s.peak_time
    live_keys = [k for k, (st, en) in live.ranges.items() if st <= t <= en]
    s.live_at_peak = sorted(
        (LiveBuffer(k, value_bytes.get(k, 0), assigned.get(k), definitions.get(k[0])) for k in live_keys),
        key=lambda b: (-b.bytes, b.key))
    if live.stated_peak:
        s.xla_peak_bytes = sum(e.bytes for e in live.stated_peak)
        old_style = any(e.index is None for e in live.stated_peak)
        # Older XLA lists each live value under its instruction's name, sized by the
        # instruction's shape; newer XLA names the index and sizes the value itself.
        if old_style:
            mine = sorted((k[0], instr_bytes[k]) for k in live_keys if k in instr_bytes)
            stated = sorted((e.name, e.bytes) for e in live.stated_peak)
        else:
            mine = sorted((format_key(k), value_bytes[k]) for k in live_keys if k in value_bytes)
            stated = sorted((format_key((e.name, e.index or ())), e.bytes) for e in live.stated_peak)
        if len(mine) == len(live_keys):
            s.recomputed_xla_peak_bytes = sum(b for _, b in mine)
            if mine != stated:
                extra = sorted(set(mine) - set(stated))[:3]
                lacking = sorted(set(stated) - set(mine))[:3]
                s.mismatches.append(f"the live set at {t} differs from the file's: recomputed but not stated "
                                    f"{extra}, stated but not recomputed {lacking}")
