"""Typed, in-memory HLO IR: what the parser produces and the importer consumes.

The IR mirrors XLA's HloModule / HloComputation / HloInstruction closely enough that
`to_text()` can print it back, but it only models what the text holds: no verifier, no
shape inference.  Attribute values are typed Python values (see `converter.hlo.attrs`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from converter.common.errors import SourceLocation
from converter.hlo.collectives import implied_device_counts
from converter.hlo.escapes import c_unescape

# Element types as XLA spells them, with their width in bits.
ELEMENT_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4, "f6e2m3fn": 6, "f6e3m2fn": 6,
    "token": 0, "opaque": 0,
}
FLOAT_TYPES = frozenset(
    t for t in ELEMENT_BITS if t.startswith(("f", "bf")) and t not in ("f",)
)
SIGNED_TYPES = frozenset(t for t in ELEMENT_BITS if t.startswith("s"))

# A dynamic dimension whose bound is unknown (`?` in the text).
UNBOUNDED = -1


@dataclass(frozen=True, slots=True)
class Tile:
    """One `T(...)` tile of a layout; `*` (combine) dims are written as -1."""

    dims: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SplitConfig:
    """One `SC(dim:i,j,...)` split of a layout: `dimension` is split at `split_indices`."""

    dimension: int
    split_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    """A shape's physical layout: `{1,0:T(8,128)(2,1)L(1024)#(u16)*(u32)E(4)S(1)SC(0:1)M(8)}`.

    `minor_to_major` and the tiles decide how a `bitcast` reinterprets bytes; the other
    fields (element size, memory space, ...) never change logical values.  Every field
    XLA's layout grammar has is kept, so printing loses nothing; 0 / "" / () mean "not
    written" (XLA's defaults).
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[Tile, ...] = ()
    element_size_bits: int = 0  # E(n)
    memory_space: int = 0  # S(n)
    # D(D,C+~,...): per-dimension level types of sparse arrays ("D" dense, "C" compressed,
    # "S" singleton, "H" loose compressed; "+" non-unique, "~" unordered).
    dim_level_types: tuple[str, ...] = ()
    tail_padding_alignment: int = 0  # L(n), in elements
    index_type: str = ""  # #(u32): index primitive type of sparse arrays
    pointer_type: str = ""  # *(u64): pointer primitive type of sparse arrays
    split_configs: tuple[SplitConfig, ...] = ()  # SC(0:1,2)(1:2)
    physical_shape: "Shape | None" = None  # P(shape), sparse arrays only
    dynamic_shape_metadata_prefix_bytes: int = 0  # M(n)

    def is_default(self) -> bool:
        """Row-major: the last dimension the most minor."""
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
    def is_buffer(self) -> bool:
        """`b(f32[4])`: a buffer holding an array (tuple_shapes holds that array)."""
        return self.element_type == "buffer"

    @property
    def is_array(self) -> bool:
        return not self.is_tuple and not self.is_token and not self.is_buffer

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        return True in self.dynamic

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

    def leaf_span(self, index: tuple[int, ...]) -> tuple[int, int]:
        """Range of flattened leaves covered by the nested tuple element `index`."""
        start, s = 0, self
        for i in index:
            start += s.leaf_range(i)[0]
            s = s.tuple_shapes[i]
        return start, start + s.leaf_count()

    def without_layout(self) -> "Shape":
        if self.is_tuple or self.is_buffer:
            return Shape(self.element_type, tuple_shapes=tuple(s.without_layout() for s in self.tuple_shapes))
        return Shape(self.element_type, self.dims, self.dynamic)

    def compatible(self, other: "Shape") -> bool:
        """Same element types and dimensions, layouts and dynamic-ness ignored (what XLA's
        parser asks of a shape written in front of an operand)."""
        if self is other:  # the parser shares one Shape per shape text
            return True
        if self.element_type != other.element_type:
            return False
        if self.tuple_shapes or other.tuple_shapes:
            return len(self.tuple_shapes) == len(other.tuple_shapes) and all(
                a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes))
        return self.dims == other.dims

    def __str__(self) -> str:
        return shape_to_text(self)


def split_operand(name: str) -> tuple[str, tuple[int, ...]]:
    """`x#1#0` → ("x", (1, 0)); a plain name → (name, ()).

    Newer XLA dumps (`xla_dump_compact_gte`) write a get-tuple-element feeding an operand
    as `%x#1` instead of a separate instruction.  Instruction names cannot hold `#`, so
    the operand keeps that spelling in `Instruction.operands` and resolves here.
    """
    if "#" not in name:
        return name, ()
    base, *index = name.split("#")
    return base, tuple(int(i) for i in index)


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

    def producer(self, operand: str) -> Instruction:
        """The instruction an operand name refers to (`x` for a compact `x#1` operand)."""
        instr = self.by_name.get(operand)
        return instr if instr is not None else self.by_name[split_operand(operand)[0]]

    def operand_shape(self, operand: str) -> Shape:
        """The shape of an operand: its producer's, or a tuple element of it for `x#1`."""
        instr = self.by_name.get(operand)
        if instr is not None:
            return instr.shape
        base, index = split_operand(operand)
        return self.by_name[base].shape.subshape(index)


@dataclass(slots=True)
class StackFrames:
    """The `FileNames` / `FunctionNames` / `FileLocations` / `StackFrames` tables.

    Ids are 1-based positions in each table (XLA ignores the numbers printed in front of
    the entries; the parser numbers entries by position).  A frame's `parent_frame_id`
    is kept as printed, which is the parent's id **plus one**: XLA prints
    `parent_frame_id() + 1` and subtracts 1 when it parses, so a printed 1 means "no
    parent" and a printed k means frame k-1 (see `is_valid`).
    """

    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    # id -> {file_name_id, function_name_id, line, end_line, column, end_column}
    file_locations: dict[int, dict[str, int]] = field(default_factory=dict)
    # id -> {file_location_id, parent_frame_id (as printed: parent id + 1)}
    frames: dict[int, dict[str, int]] = field(default_factory=dict)

    def is_valid(self, frame_id: int) -> bool:
        """Whether XLA keeps frame `frame_id` (it drops, from the metadata naming it, a
        frame any of whose ids names no entry, or whose callers loop): every frame from it
        to the outermost has its file location, file name and function name, and a
        printed parent_frame_id of 1 (none) or one more than another frame's id."""
        seen: set[int] = set()
        while frame_id not in seen:
            seen.add(frame_id)
            frame = self.frames.get(frame_id)
            loc = self.file_locations.get(frame["file_location_id"]) if frame is not None else None
            if loc is None or loc["file_name_id"] not in self.file_names \
                    or loc["function_name_id"] not in self.function_names or frame["parent_frame_id"] < 1:
                return False
            frame_id = frame["parent_frame_id"] - 1
            if frame_id == 0:
                return True
        return False  # callers in a loop

    def frame(self, frame_id: int) -> tuple[str, str, int, int] | None:
        """(file, function, line, column) of frame `frame_id` alone, None where XLA would
        drop it (`is_valid`)."""
        if not self.is_valid(frame_id):
            return None
        loc = self.file_locations[self.frames[frame_id]["file_location_id"]]
        return (self.file_names[loc["file_name_id"]], self.function_names[loc["function_name_id"]],
                loc["line"], loc["column"])

    def location(self, frame_id: int) -> tuple[str, int, int] | None:
        """(file, line, column) of the innermost frame `frame_id`."""
        entry = self.frame(frame_id)
        return None if entry is None else (entry[0], entry[2], entry[3])

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

    # (replicas, partitions) the collectives imply where the header is silent.
    _implied_devices: tuple[int, int] | None = field(default=None, repr=False, compare=False)

    def _device_counts(self) -> tuple[int, int]:
        if self._implied_devices is None:
            given = [int(self.attrs[k]) if k in self.attrs else None for k in ("replica_count", "num_partitions")]
            self._implied_devices = implied_device_counts(
                (i for c in self.computations for i in c.instructions), *given)
        return self._implied_devices

    @property
    def num_partitions(self) -> int:
        """The header's count, or where it has none the count the collectives imply."""
        return self._device_counts()[1]

    @property
    def replica_count(self) -> int:
        """The header's count, or where it has none the count the collectives imply
        (XLA's own test modules leave it to the runner)."""
        return self._device_counts()[0]

    @property
    def num_devices(self) -> int:
        return self.num_partitions * self.replica_count

    def computation(self, name: str) -> Computation:
        return self.by_name[name]

    def location_of(self, node: Instruction | Computation) -> SourceLocation:
        """Where an instruction or computation is in this dump (`path:line:col`)."""
        return SourceLocation(self.path, node.line, node.col)


# ----------------------------------------------------------------------- text
# The metadata of an instruction, read when first asked for (`Instruction.metadata`):
# quoted, bare, braced or single-quoted values, one pattern over the whole text.  Quoted
# values as unrolled loops (runs of plain characters, then one escape): the same strings
# as `"((?:[^"\\]|\\.)*)"`, ~4x faster in `re` on a long op_name.
_RE_METADATA_ANY_KV = re.compile(
    r'([A-Za-z_]\w*)=(?:"([^"\\]*+(?:\\.[^"\\]*+)*+)"|(\{[^{}]*\}|[^\s"\'{}]+)|\'([^\'\\]*+(?:\\.[^\'\\]*+)*+)\')')


# The same pairs for a text without backslashes, single quotes or braces (what XLA prints
# for most instructions): only double-quoted values (holding no escape) and bare ones.
_RE_METADATA_PLAIN_KV = re.compile(r'([A-Za-z_]\w*)=(?:"([^"]*+)"|([^\s"\'{}]++))')


def parse_metadata(text: str) -> Metadata:
    """A Metadata record from the text inside `metadata={...}`."""
    # One pass of one pattern: the values are quoted, bare, braced or single-quoted.
    pairs = _RE_METADATA_ANY_KV.findall(text)
    md = Metadata()
    for key, quoted, bare, single in pairs:
        if single:
            quoted = single
        if key == "op_type":
            md.op_type = c_unescape(quoted)
        elif key == "op_name":
            md.op_name = c_unescape(quoted)
        elif key == "source_file":
            md.source_file = c_unescape(quoted)
        elif key in ("source_line", "stack_frame_id") and _is_small_count(bare or quoted):
            setattr(md, key, int(bare or quoted))
        else:
            md.extra[key] = c_unescape(quoted) if bare == "" else (int(bare) if bare.isdecimal() else Raw(bare))
    return md


def _is_small_count(value: str) -> bool:
    """A source_line or stack_frame_id: decimal digits below 2^31 (isdecimal, not
    isdigit: int() refuses superscript digits)."""
    return value.isdecimal() and int(value) < 1 << 31


def metadata_source(text: str) -> tuple[int, str, int, str]:
    """(stack_frame_id, source_file, source_line, op_name) of `parse_metadata(text)`: what
    an instruction's location is made from, read without building the record where the
    text holds no backslash, single quote or brace (_RE_METADATA_PLAIN_KV finds the same
    pairs there, and no value needs unescaping)."""
    if "\\" in text or "'" in text or "{" in text:
        md = parse_metadata(text)
        return md.stack_frame_id, md.source_file, md.source_line, md.op_name
    op_name = source_file = ""
    source_line = stack_frame_id = 0
    for key, quoted, bare in _RE_METADATA_PLAIN_KV.findall(text):
        if key == "op_name":
            op_name = quoted
        elif key == "source_file":
            source_file = quoted
        elif key == "source_line":
            if _is_small_count(bare or quoted):
                source_line = int(bare or quoted)
        elif key == "stack_frame_id":
            if _is_small_count(bare or quoted):
                stack_frame_id = int(bare or quoted)
    return stack_frame_id, source_file, source_line, op_name


@dataclass(frozen=True, slots=True)
class Raw:
    """An attribute value kept as the exact text of the dump."""

    text: str


def layout_to_text(layout: Layout) -> str:
    """`{1,0:T(8,128)(2,1)E(4)S(1)}`: the fields in the one order XLA reads them,
    D T L # * E S SC P M."""
    parts = [",".join(str(d) for d in layout.minor_to_major)]
    fields = []
    if layout.dim_level_types:
        fields.append("D(" + ",".join(layout.dim_level_types) + ")")
    if layout.tiles:
        fields.append("T" + "".join("(" + ",".join("*" if d == -1 else str(d) for d in t.dims) + ")" for t in layout.tiles))
    if layout.tail_padding_alignment:
        fields.append(f"L({layout.tail_padding_alignment})")
    if layout.index_type:
        fields.append(f"#({layout.index_type})")
    if layout.pointer_type:
        fields.append(f"*({layout.pointer_type})")
    if layout.element_size_bits:
        fields.append(f"E({layout.element_size_bits})")
    if layout.memory_space:
        fields.append(f"S({layout.memory_space})")
    if layout.split_configs:
        fields.append("SC" + "".join(f"({sc.dimension}:" + ",".join(map(str, sc.split_indices)) + ")"
                                     for sc in layout.split_configs))
    if layout.physical_shape is not None:
        fields.append("P(" + shape_to_text(layout.physical_shape) + ")")
    if layout.dynamic_shape_metadata_prefix_bytes:
        fields.append(f"M({layout.dynamic_shape_metadata_prefix_bytes})")
    if fields:
        parts.append(":" + "".join(fields))
    return "{" + "".join(parts) + "}"


def shape_to_text(shape: Shape, with_layout: bool = True) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(shape_to_text(s, with_layout) for s in shape.tuple_shapes) + ")"
    if shape.is_buffer:
        return "b(" + shape_to_text(shape.tuple_shapes[0], with_layout) + ")"
    dims = ",".join(
        "?" if d == UNBOUNDED else ("<=" if dyn else "") + str(d)
        for d, dyn in zip(shape.dims, shape.dynamic or (False,) * len(shape.dims))
    )
    text = f"{shape.element_type}[{dims}]"
    if with_layout and shape.layout is not None:
        text += layout_to_text(shape.layout)
    return text
