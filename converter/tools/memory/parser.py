"""Read XLA buffer-assignment dumps into `BufferAssignmentDump`.

The text is what `BufferAssignment::ToString()`, `HloValue::ToString()` and
`HloLiveRange::ToString()` print, in one file (older XLA, and the TPU sample) or split
over `*-buffer-assignment.txt`, `*-buffer-assignment-values.txt` and `*-live-range.txt`
(XLA since 2025; `load_buffer_assignment` reads the siblings of whichever it is given).
Errors point at the line and column: `path:line:col: error: expected X, found Y`.
"""

from __future__ import annotations

import os
import re

from converter.hlo.parser import HloParseError, parse_shape_prefix
from converter.tools.memory.model import (
    Allocation,
    AssignedValue,
    BufferAssignmentDump,
    LiveRange,
    PeakEntry,
    SourceLine,
    UsedValue,
    ValueKey,
    format_key,
)


class BufferAssignmentParseError(HloParseError):
    """A malformed or truncated buffer-assignment dump."""


_INT = r"(-?\d+)"
_INDEX = r"\{([\d,]*)\}"
# HloValue::ToShortString: <id name{index} (phi) @color>; the index only for values of
# tuple-shaped instructions, the color only when assigned.
_RE_VALUE_REF = re.compile(r"<(\d+) ([^\s<>{}]+)(?:" + _INDEX + r")?( \(phi\))?(?: @(\d+))?>")
_RE_ALLOCATION = re.compile(r"allocation (\d+): size (\d+)")
_RE_ASSIGNED = re.compile(r" value: (<[^>]*>) \(size=(\d+),offset=(\d+)\): ")
_RE_TOTAL = re.compile(r"Total bytes used: (\d+)(?: \(([^)]*)\))?$")
_RE_LIVE_HEADER = re.compile(r"HloLiveRange \(max (\d+)\):$")
_RE_SEQUENCE = re.compile(r"    (\d+):(\S+)$")
_RE_RANGE = re.compile(r"    ([^\s{}]+)" + _INDEX + r":" + _INT + "-" + _INT + "$")
_RE_PEAK_HEADER = re.compile(r"  Live ranges at " + _INT + r" \(peak\):$")
_RE_PEAK_ENTRY = re.compile(r"    ([^\s{}:]+)(?:" + _INDEX + r")?: (\d+) bytes(?: \(cumulative: (\d+) bytes\))?$")
_RE_STACK_HEADER = re.compile(r"  Stack trace breakdown for peak usage: ([\d ]+) bytes$")
_NO_PEAK = "  Peak memory could not be determined due to unbounded dynamic shape."

# Allocation attributes after `size N`, in the order BufferAllocation::ToString prints them
# (`page N`: newer XLA, jaxlib 0.12, prints the allocation's memory page on every line).
_ALLOCATION_CLAUSES: list[tuple[str, re.Pattern]] = [
    ("color", re.compile(r", color (\d+)")),
    ("page", re.compile(r", page (\d+)")),
    ("parameter", re.compile(r", parameter (\d+)(?:, shape \|([^|]*)\|)?(?: at ShapeIndex " + _INDEX + ")?")),
    ("output", re.compile(r", output shape is \|([^|]*)\|")),
    ("constant", re.compile(r", constant")),
    ("thread-local", re.compile(r", thread-local")),
    ("maybe-live-out", re.compile(r", maybe-live-out")),
    ("preallocated-temp", re.compile(r", preallocated-temp")),
]


def _index(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


class _Reader:
    """Walks the lines of one file; `error` builds a located message."""

    def __init__(self, text: str, path: str):
        self.path = path
        self.lines = text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()
        self.i = 0  # index of the current line

    def at_end(self) -> bool:
        return self.i >= len(self.lines)

    def peek(self) -> str:
        return self.lines[self.i]

    def next(self) -> str:
        line = self.lines[self.i]
        self.i += 1
        return line

    def skip_blank(self) -> None:
        while not self.at_end() and not self.peek().strip():
            self.i += 1

    def here(self) -> SourceLine:
        return SourceLine(self.path, self.i + 1)

    def error(self, expected: str, line_index: int | None = None, col: int = 1,
              found: str | None = None) -> BufferAssignmentParseError:
        i = self.i if line_index is None else line_index
        if i >= len(self.lines):
            last = self.lines[-1] if self.lines else ""
            return BufferAssignmentParseError(
                self.path, max(len(self.lines), 1), len(last) + 1,
                f"expected {expected}, found end of file (is the dump truncated?)", last)
        line = self.lines[i]
        if found is None:
            rest = line[col - 1 :]
            found = repr(rest[:40] + ("..." if len(rest) > 40 else "")) if rest else "end of line"
        return BufferAssignmentParseError(self.path, i + 1, col, f"expected {expected}, found {found}", line)


def _value_ref(r: _Reader, text: str, line_index: int, col: int) -> tuple[int, ValueKey, bool, int]:
    m = _RE_VALUE_REF.fullmatch(text)
    if m is None:
        raise r.error("a value `<id name{index} @color>`", line_index, col)
    color = int(m.group(5)) if m.group(5) is not None else 0
    return int(m.group(1)), (m.group(2), _index(m.group(3))), bool(m.group(4)), color


def _allocation_header(r: _Reader) -> Allocation:
    line_index = r.i
    line = r.next()
    m = _RE_ALLOCATION.match(line)
    if m is None:
        raise r.error("`allocation N: size S, ...:`", line_index)
    alloc = Allocation(index=int(m.group(1)), size=int(m.group(2)), source=SourceLine(r.path, line_index + 1))
    pos = m.end()
    clause = 0
    while not line.startswith(":", pos):
        for k in range(clause, len(_ALLOCATION_CLAUSES)):
            kind, rx = _ALLOCATION_CLAUSES[k]
            cm = rx.match(line, pos)
            if cm is not None:
                break
        else:
            raise r.error("an allocation attribute (', color N', ', page N', ', parameter N', ', output shape is |..|', "
                          "', constant', ', thread-local', ', maybe-live-out', ', preallocated-temp') or ':'",
                          line_index, pos + 1)
        clause = k + 1
        if kind == "page":
            alloc.page = int(cm.group(1))
        elif kind == "color":
            alloc.color = int(cm.group(1))
        elif kind == "parameter":
            alloc.parameter = int(cm.group(1))
            alloc.parameter_shape = cm.group(2) or ""
            alloc.parameter_index = _index(cm.group(3))
        elif kind == "output":
            alloc.output_shape = cm.group(1)
        elif kind == "constant":
            alloc.constant = True
        elif kind == "thread-local":
            alloc.thread_local = True
        elif kind == "maybe-live-out":
            alloc.maybe_live_out = True
        else:
            alloc.preallocated_temp = True
        pos = cm.end()
    if pos != len(line) - 1:
        raise r.error("the end of the allocation line after ':'", line_index, pos + 2)
    return alloc


def _assigned_value(r: _Reader, alloc: Allocation) -> AssignedValue:
    line_index = r.i
    line = r.next()
    m = _RE_ASSIGNED.match(line)
    if m is None:
        raise r.error("` value: <id name @color> (size=N,offset=M): shape`", line_index)
    vid, key, phi, color = _value_ref(r, m.group(1), line_index, 9)
    size, offset = int(m.group(2)), int(m.group(3))
    try:
        shape, end = parse_shape_prefix(line, m.end())
    except ValueError as e:  # the HLO shape parser's own "expected X, found Y"
        raise BufferAssignmentParseError(r.path, line_index + 1, m.end() + 1, f"{e} (the value's shape)",
                                         line) from None
    if line[end:].strip():
        raise r.error("the end of the line after the shape", line_index, end + 1)
    if offset + size > alloc.size:
        raise r.error(f"a value inside allocation {alloc.index} (size {alloc.size})", line_index, m.start(2) + 1,
                      found=f"offset {offset} + size {size} = {offset + size}")
    return AssignedValue(vid, key, color, phi, size, offset, line[m.end():end], shape,
                         SourceLine(r.path, line_index + 1))


def _allocations(r: _Reader, dump: BufferAssignmentDump) -> None:
    r.next()  # BufferAssignment:
    while not r.at_end():
        line = r.peek()
        if line.startswith("allocation "):
            alloc = _allocation_header(r)
            if alloc.index != len(dump.allocations):
                raise r.error(f"allocation {len(dump.allocations)}", r.i - 1, 12, found=f"allocation {alloc.index}")
            dump.allocations.append(alloc)
        elif line.startswith(" value: "):
            if not dump.allocations:
                raise r.error("`allocation N: size S, ...:`")
            dump.allocations[-1].values.append(_assigned_value(r, dump.allocations[-1]))
        else:
            return


def _used_value(r: _Reader) -> UsedValue:
    line_index = r.i
    header = r.next()
    vid, key, phi, color = _value_ref(r, header, line_index, 1)
    value = UsedValue(vid, key, color, phi, source=SourceLine(r.path, line_index + 1))
    if r.at_end() or r.peek() != " positions:":
        raise r.error("' positions:'")
    r.next()
    while not r.at_end() and r.peek().startswith("  "):
        value.positions.append(r.next()[2:])
    if r.at_end():
        raise r.error("' uses:'")
    if r.peek() == " uses are not initialized yet.":
        r.next()
    elif r.peek() == " uses:":
        r.next()
        while not r.at_end() and r.peek().startswith("  "):
            use = r.next()[2:]
            if use != "(none)":
                value.uses.append(use)
    else:
        raise r.error("' uses:'")
    if r.at_end() or not r.peek().startswith(" from instruction:"):
        raise r.error("' from instruction: ...'")
    value.instruction_text = r.next()[len(" from instruction:"):].strip()
    return value


def _used_values(r: _Reader, dump: BufferAssignmentDump) -> None:
    r.next()  # Used values:
    while not r.at_end() and r.peek().startswith("<"):
        value = _used_value(r)
        dump.used_values[value.key] = value


def _live_range(r: _Reader, dump: BufferAssignmentDump) -> None:
    line_index = r.i
    m = _RE_LIVE_HEADER.match(r.next())
    assert m is not None
    live = LiveRange(schedule_end=int(m.group(1)), source=SourceLine(r.path, line_index + 1))
    dump.live_range = live
    if r.at_end() or r.peek() != "  InstructionSequence:":
        raise r.error("'  InstructionSequence:'")
    r.next()
    while not r.at_end() and r.peek().startswith("    "):
        sm = _RE_SEQUENCE.match(r.peek())
        if sm is None or int(sm.group(1)) != len(live.sequence):
            raise r.error(f"'    {len(live.sequence)}:<instruction name>'", col=5)
        live.sequence.append(sm.group(2))
        r.next()
    if len(live.sequence) != live.schedule_end:
        raise r.error(f"instruction {len(live.sequence)} of the {live.schedule_end} in the schedule "
                      f"(HloLiveRange max {live.schedule_end})")
    if r.at_end() or r.peek() != "  BufferLiveRange:":
        raise r.error("'  BufferLiveRange:'")
    r.next()
    while not r.at_end() and r.peek().startswith("    "):
        rm = _RE_RANGE.match(r.peek())
        if rm is None:
            raise r.error("'    name{index}:start-end'", col=5)
        start, end = int(rm.group(3)), int(rm.group(4))
        if not 0 <= start <= end <= live.schedule_end:
            raise r.error(f"a live range within [0, {live.schedule_end}]", col=5, found=f"{start}-{end}")
        live.ranges[(rm.group(1), _index(rm.group(2)))] = (start, end)
        r.next()
    if r.at_end():
        raise r.error("'  Live ranges at T (peak):'")
    if r.peek() == _NO_PEAK:
        r.next()
        return
    pm = _RE_PEAK_HEADER.match(r.peek())
    if pm is None:
        raise r.error("'  Live ranges at T (peak):'")
    live.stated_peak_time = int(pm.group(1))
    r.next()
    cumulative = 0
    while not r.at_end() and r.peek().startswith("    "):
        em = _RE_PEAK_ENTRY.match(r.peek())
        if em is None:
            raise r.error("'    name: N bytes'", col=5)
        nbytes = int(em.group(3))
        cumulative += nbytes
        if em.group(4) is not None and int(em.group(4)) != cumulative:
            raise r.error(f"cumulative {cumulative} bytes", col=em.start(4) + 1, found=em.group(4))
        index = _index(em.group(2)) if em.group(2) is not None else None
        live.stated_peak.append(PeakEntry(em.group(1), index, nbytes, r.here()))
        r.next()
    if not r.at_end() and r.peek().startswith("  Stack trace breakdown"):
        sm = _RE_STACK_HEADER.match(r.peek())
        if sm is None:
            raise r.error("'  Stack trace breakdown for peak usage: N bytes'")
        live.stated_stack_trace_bytes = int(sm.group(1).replace(" ", ""))
        if live.stated_stack_trace_bytes != cumulative:
            raise r.error(f"{cumulative} bytes (the sum of the live ranges at the peak)",
                          col=sm.start(1) + 1, found=sm.group(1))
        r.next()
        while not r.at_end() and r.peek().startswith("    "):
            r.next()  # the per-op_name tree: derived from the entries above


def _parse_into(dump: BufferAssignmentDump, text: str, path: str) -> None:
    r = _Reader(text, path)
    if r.at_end():
        raise r.error("'BufferAssignment:', 'Total bytes used:', 'Used values:' or 'HloLiveRange (max N):'")
    while True:
        r.skip_blank()
        if r.at_end():
            break
        line = r.peek()
        if line == "BufferAssignment:":
            _allocations(r, dump)
        elif line.startswith("Total bytes used:"):
            tm = _RE_TOTAL.match(line)
            if tm is None:
                raise r.error("'Total bytes used: N (size)'")
            dump.stated_total_bytes = int(tm.group(1))
            if dump.allocations and dump.total_bytes != dump.stated_total_bytes:
                raise r.error(f"Total bytes used: {dump.total_bytes} (the sum of the allocations above)",
                              col=19, found=tm.group(1))
            r.next()
        elif line == "Used values:":
            _used_values(r, dump)
        elif _RE_LIVE_HEADER.match(line):
            _live_range(r, dump)
        else:
            raise r.error("'BufferAssignment:', 'allocation N: ...', 'Total bytes used:', 'Used values:', "
                          "'<id name @color>' or 'HloLiveRange (max N):'")


def _check_complete(dump: BufferAssignmentDump, texts: dict[str, str]) -> None:
    """Cross-section checks that catch a dump cut at a line boundary."""
    if dump.allocations and dump.used_values:
        assigned = dump.assigned()
        missing = [k for k in assigned if k not in dump.used_values]
        if missing:
            path = next(p for p in dump.paths if "Used values:" in texts[p])
            r = _Reader(texts[path], path)
            r.i = len(r.lines)
            raise r.error(f"a used value for each of the {len(assigned)} assigned values "
                          f"({format_key(missing[0])} has none)")


def parse_buffer_assignment(text: str, path: str = "<string>") -> BufferAssignmentDump:
    dump = BufferAssignmentDump(paths=[path])
    _parse_into(dump, text, path)
    _check_complete(dump, {path: text})
    return dump


def sibling_paths(path: str) -> list[str]:
    """The files newer XLA splits one buffer assignment into, in reading order, that exist
    beside `path` (always including `path` itself)."""
    stems = ("-buffer-assignment.txt", "-buffer-assignment-values.txt", "-live-range.txt")
    for stem in stems:
        if path.endswith(stem):
            base = path[: -len(stem)]
            return [p for p in (base + s for s in stems) if p == path or os.path.exists(p)]
    return [path]


def load_buffer_assignment(path: str) -> BufferAssignmentDump:
    """Read a buffer-assignment dump, with its split-off siblings when it has them."""
    paths = sibling_paths(path)
    dump = BufferAssignmentDump(paths=paths)
    texts: dict[str, str] = {}
    for p in paths:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                texts[p] = f.read()
        except OSError as e:
            raise BufferAssignmentParseError(p, 1, 1, f"cannot read the file: {e.strerror}") from None
        _parse_into(dump, texts[p], p)
    _check_complete(dump, texts)
    return dump
