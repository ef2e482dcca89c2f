"""A typed model of XLA's buffer-assignment dumps.

XLA writes one module's buffer assignment as `BufferAssignment::ToString()` (the
allocations, `Total bytes used`, `Used values`) followed by `HloLiveRange::ToString()`
(the schedule, each value's live range and the live set at the peak).  Newer XLA splits
the same text over `*-buffer-assignment.txt`, `*-buffer-assignment-values.txt` and
`*-live-range.txt`; the model is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from converter.hlo.ir import Shape

# A value is named by its defining instruction and the index into that instruction's
# shape: ("fusion.10", (0,)) is `fusion.10{0}`; an array-shaped instruction's value has ().
ValueKey = tuple[str, tuple[int, ...]]


def format_key(key: ValueKey) -> str:
    name, index = key
    return name + ("{" + ",".join(map(str, index)) + "}" if index else "")


@dataclass(frozen=True, slots=True)
class SourceLine:
    """Where something was read: for messages that point back into the dump."""

    path: str
    line: int


@dataclass(slots=True)
class AssignedValue:
    """One ` value: <id name{index} @color> (size=N,offset=M): shape` line of an allocation."""

    id: int
    key: ValueKey
    color: int
    phi: bool
    size: int
    offset: int
    shape_text: str
    shape: Shape
    source: SourceLine


@dataclass(slots=True)
class Allocation:
    """`allocation N: size S, ...:` and the values placed in it."""

    index: int
    size: int
    page: int | None = None  # `page N` (newer XLA); None where the dump has no pages
    color: int = 0
    parameter: int | None = None  # entry parameter number
    parameter_shape: str = ""  # `shape |...|` (no layout), as printed
    parameter_index: tuple[int, ...] = ()  # `at ShapeIndex {...}`
    output_shape: str = ""  # `output shape is |...|`
    constant: bool = False
    thread_local: bool = False
    maybe_live_out: bool = False
    preallocated_temp: bool = False
    values: list[AssignedValue] = field(default_factory=list)
    source: SourceLine | None = None

    @property
    def kinds(self) -> list[str]:
        """The kinds XLA's BufferAssignment stats count this allocation under."""
        out = []
        if self.parameter is not None:
            out.append("parameter")
        if self.constant:
            out.append("constant")
        if self.maybe_live_out:
            out.append("maybe-live-out")
        if self.preallocated_temp:
            out.append("preallocated-temp")
        if self.thread_local:
            out.append("thread-local")
        return out


@dataclass(slots=True)
class UsedValue:
    """A `Used values:` entry: the value, where it appears, who reads it, and the text of
    its defining instruction."""

    id: int
    key: ValueKey
    color: int
    phi: bool
    positions: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    instruction_text: str = ""  # `from instruction: ...`, as printed
    source: SourceLine | None = None


@dataclass(slots=True)
class PeakEntry:
    """A line under `Live ranges at T (peak):`.  Older XLA names only the instruction and
    sizes it by the instruction's shape; newer XLA gives the index and the value's size."""

    name: str
    index: tuple[int, ...] | None  # None when the line names only the instruction
    bytes: int
    source: SourceLine


@dataclass(slots=True)
class LiveRange:
    """`HloLiveRange (max N):` — the flattened schedule and each value's [start, end]."""

    schedule_end: int
    sequence: list[str] = field(default_factory=list)  # position -> instruction name
    ranges: dict[ValueKey, tuple[int, int]] = field(default_factory=dict)
    stated_peak_time: int | None = None  # None: the file states no peak
    stated_peak: list[PeakEntry] = field(default_factory=list)
    stated_stack_trace_bytes: int | None = None
    source: SourceLine | None = None


@dataclass(slots=True)
class BufferAssignmentDump:
    paths: list[str]
    allocations: list[Allocation] = field(default_factory=list)
    stated_total_bytes: int | None = None
    used_values: dict[ValueKey, UsedValue] = field(default_factory=dict)
    live_range: LiveRange | None = None

    @property
    def total_bytes(self) -> int:
        return sum(a.size for a in self.allocations)

    def assigned(self) -> dict[ValueKey, tuple[Allocation, AssignedValue]]:
        out: dict[ValueKey, tuple[Allocation, AssignedValue]] = {}
        for alloc in self.allocations:
            for value in alloc.values:
                out[value.key] = (alloc, value)
        return out
