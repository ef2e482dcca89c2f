"""Typed, in-memory HLO IR: what the parser produces and the importer consumes.

The IR mirrors XLA's HloModule / HloComputation / HloInstruction closely enough that
`to_text()` can print it back, but it only models what the text holds: no verifier, no
shape inference.  Attribute values are typed Python values (see `converter.hlo.attrs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

# Element types as XLA spells them, with their width in bits.
ELEMENT_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4,
    "token": 0, "opaque": 0,
}
FLOAT_TYPES = frozenset(
    t for t in ELEMENT_BITS if t.startswith(("f", "bf")) and t not in ("f",)
)
COMPLEX_TYPES = frozenset({"c64", "c128"})
SIGNED_TYPES = frozenset(t for t in ELEMENT_BITS if t.startswith("s"))
UNSIGNED_TYPES = frozenset(t for t in ELEMENT_BITS if t.startswith("u"))
INTEGER_TYPES = SIGNED_TYPES | UNSIGNED_TYPES

# A dynamic dimension whose bound is unknown (`?` in the text).
UNBOUNDED = -1


@dataclass(frozen=True, slots=True)
class Tile:
    """One `T(...)` tile of a layout; `*` (combine) dims are written as -1."""

    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """A shape's physical layout: `{1,0:T(8,128)(2,1)S(1)}`.

    Only `minor_to_major` changes how a `bitcast` reinterprets bytes; tiles, element size
    and memory space never change logical values.  Fields the IR does not model are kept
    verbatim in `extra` (e.g. `L(2)`, `#(s4)`, `*(...)`) so printing loses nothing.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[Tile, ...] = ()
    element_size_bits: int = 0
    memory_space: int = 0
    extra: tuple[str, ...] = ()

    def is_default(self) -> bool:
        n = len(self.minor_to_major)
        return self.minor_to_major == tuple(range(n - 1, -1, -1))

    def major_to_minor(self) -> tuple[int, ...]:
        return tuple(reversed(self.minor_to_major))


@dataclass(frozen=True, slots=True)
class Shape:
    """An array shape (`f32[2,<=8]{1,0}`), a tuple shape, or `token[]`.

    `dims` holds the static size, or the bound of a bounded dynamic dimension (whose
    `dynamic` flag is set), or UNBOUNDED for `?`.
    """

    element_type: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def is_array(self) -> bool:
        return not self.is_tuple and not self.is_token

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    def num_elements(self) -> int:
        return math.prod(self.dims)

    def byte_size(self) -> int:
        if self.is_tuple:
            return sum(s.byte_size() for s in self.tuple_shapes)
        return (self.num_elements() * ELEMENT_BITS[self.element_type] + 7) // 8

    def leaves(self) -> list["Shape"]:
        """Array and token leaves in depth-first order (how tuples are flattened)."""
        if not self.is_tuple:
            return [self]
        out: list[Shape] = []
        for s in self.tuple_shapes:
            out.extend(s.leaves())
        return out

    def leaf_count(self) -> int:
        if not self.is_tuple:
            return 1
        return sum(s.leaf_count() for s in self.tuple_shapes)

    def leaf_range(self, index: int) -> tuple[int, int]:
        """Range of flattened leaves covered by tuple element `index`."""
        start = sum(s.leaf_count() for s in self.tuple_shapes[:index])
        return start, start + self.tuple_shapes[index].leaf_count()

    def subshape(self, index: tuple[int, ...]) -> "Shape":
        s = self
        for i in index:
            s = s.tuple_shapes[i]
        return s

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape("tuple", tuple_shapes=tuple(s.without_layout() for s in self.tuple_shapes))
        return Shape(self.element_type, self.dims, self.dynamic)

    def __str__(self) -> str:
        from converter.hlo.printer import shape_to_text

        return shape_to_text(self)


@dataclass(slots=True)
class Metadata:
    """`metadata={op_type=... op_name=... source_file=... source_line=...}`."""

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    stack_frame_id: int = 0
    # Every other field (source_end_line, scheduling_name, deduplicated_name, ...),
    # kept in order with its printed value.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Instruction:
    name: str
    opcode: str
    shape: Shape
    operands: list[str]
    attrs: dict[str, Any]
    line: int
    col: int
    is_root: bool = False
    # `metadata={...}`: the checked text between the braces; `metadata` parses it on
    # first use (most consumers of a 100 MB dump never look at most of it).
    metadata_text: str | None = None
    _metadata: Metadata | None = None
    # `constant(...)`: a numpy array, a tuple of literals, or None when the dump elided
    # the values as `{...}`.
    literal: Any = None
    literal_elided: bool = False
    # `parameter(N)`.
    parameter_number: int = -1
    # Shapes written in front of operands (`f32[4]{0} %x`), None where absent.
    operand_shapes: list[Shape | None] | None = None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    @property
    def metadata(self) -> Metadata | None:
        if self._metadata is None and self.metadata_text is not None:
            from converter.hlo.parser import parse_metadata

            self._metadata = parse_metadata(self.metadata_text)
        return self._metadata

    @metadata.setter
    def metadata(self, value: Metadata | None) -> None:
        self._metadata = value
        self.metadata_text = None


@dataclass(slots=True)
class Computation:
    name: str
    instructions: list[Instruction]
    line: int
    col: int
    is_entry: bool = False
    # `(p: f32[]) -> f32[]` where the text has one: parameter names and shapes, result.
    signature: tuple[list[tuple[str, Shape]], Shape] | None = None
    execution_thread: str = ""
    by_name: dict[str, Instruction] = field(default_factory=dict)
    root: Instruction | None = None
    parameters: list[Instruction] = field(default_factory=list)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)


@dataclass(slots=True)
class StackFrames:
    """The `FileNames` / `FunctionNames` / `FileLocations` / `StackFrames` tables."""

    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    # id -> (file_name_id, function_name_id, line, end_line, column, end_column)
    file_locations: dict[int, dict[str, int]] = field(default_factory=dict)
    # id -> (file_location_id, parent_frame_id)
    frames: dict[int, dict[str, int]] = field(default_factory=dict)

    def location(self, frame_id: int) -> tuple[str, int, int] | None:
        """(file, line, column) of the innermost frame `frame_id`."""
        frame = self.frames.get(frame_id)
        if frame is None:
            return None
        loc = self.file_locations.get(frame.get("file_location_id", 0))
        if loc is None:
            return None
        file = self.file_names.get(loc.get("file_name_id", 0), "")
        return file, loc.get("line", 0), loc.get("column", 0)

    def is_empty(self) -> bool:
        return not (self.file_names or self.function_names or self.file_locations or self.frames)


@dataclass(slots=True)
class Module:
    name: str
    computations: list[Computation]
    # Header attributes, typed (see converter.hlo.attrs.MODULE_ATTRS).
    attrs: dict[str, Any]
    stack_frames: StackFrames = field(default_factory=StackFrames)
    path: str = "<string>"
    by_name: dict[str, Computation] = field(default_factory=dict)
    entry: Computation | None = None
    # Parser warnings (unknown attributes kept raw), each reported once.
    warnings: list[str] = field(default_factory=list)

    @property
    def num_partitions(self) -> int:
        return int(self.attrs.get("num_partitions", 1))

    @property
    def replica_count(self) -> int:
        return int(self.attrs.get("replica_count", 1))

    @property
    def num_devices(self) -> int:
        return self.num_partitions * self.replica_count

    def computation(self, name: str) -> Computation:
        return self.by_name[name]

    def to_text(self) -> str:
        from converter.hlo.printer import module_to_text

        return module_to_text(self)
