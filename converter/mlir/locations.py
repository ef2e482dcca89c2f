"""Reading an op's MLIR location as a value: which dump instruction it came from (its name and
`path:line:col`) and the source its metadata named (op_name, `file:line`).

The importer (converter.importer.core, ModuleImporter.location) writes every op's location in
one shape:

    name(%instr, file(dump, line, col))                      an instruction without metadata
    fused[name(%instr, file(dump, line, col)), SOURCE]        one with op_name / source metadata

where SOURCE is `name(op_name, file(source_file, line, col))`, `name(op_name)` (no file) or
`file(source_file, line, col)` (no op_name); a computation's func.func and its module are
at `file(dump, line, col)` alone.  MLIR passes keep these inside larger locations: the inliner
puts them in `callsite(callee at caller)`, CSE and canonicalization fuse the locations of the
ops they merge (FusedLoc flattens nested fused locations, so a merged op's location is
`fused[instr1, SOURCE1, instr2, ...]`).

The reader walks the location as MLIR prints it (a name before its child, a fused location's
parts in order, a call site's callee before its caller), through the typed location classes
both supported jaxlib versions (0.10.2, 0.12) return from `op.location`: FileLineColLoc
(filename, start_line, start_col), NameLoc (name_str, child_loc), FusedLoc (locations),
CallSiteLoc (callee, caller) and UnknownLoc.  Neither version has upstream MLIR's newer
`Location.is_a_file()`-style predicates, so the class is tested with isinstance; a location
of another class (OpaqueLoc, which nothing here makes) has no parts and holds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from jaxlib.mlir import ir

from converter.common.errors import SourceLocation


@dataclass(frozen=True, slots=True)
class OpLocation:
    """What the importer recorded in an op's location.  Empty fields where the location does
    not say (an op a pass built at an unknown location, an instruction without metadata)."""

    instruction: str = ""                 # the dump instruction's name, without `%`
    at: SourceLocation | None = None      # where that instruction is in the dump
    op_name: str = ""                     # the metadata's op_name (`jit(f)/jit(main)/dot_general`)
    source: SourceLocation | None = None  # the metadata's source (stack frame or source_file:line)

    @property
    def is_instruction(self) -> bool:
        return self.at is not None


def walk(loc: ir.Location) -> Iterator[ir.Location]:
    """`loc` and every location inside it, in the order MLIR prints them."""
    yield loc
    if isinstance(loc, ir.NameLoc):
        yield from walk(loc.child_loc)
    elif isinstance(loc, ir.FusedLoc):
        for part in loc.locations:
            yield from walk(part)
    elif isinstance(loc, ir.CallSiteLoc):
        yield from walk(loc.callee)
        yield from walk(loc.caller)


def file_location(loc: ir.Location) -> SourceLocation | None:
    """`loc` itself as `file:line:col`, if it is a file location."""
    if isinstance(loc, ir.FileLineColLoc):
        return SourceLocation(loc.filename, loc.start_line, loc.start_col)
    return None


def first_file_location(loc: ir.Location) -> SourceLocation | None:
    """The first `file:line:col` inside `loc`: where a kernel compiler (Pallas' Mosaic, Triton)
    recorded a kernel op's Python source line, whatever it wrapped it in."""
    for part in walk(loc):
        found = file_location(part)
        if found is not None:
            return found
    return None


def _instruction(loc: ir.Location) -> tuple[str, SourceLocation] | None:
    """(%name, dump place) if `loc` is an instruction's `name(%instr, file(dump, line, col))`."""
    if isinstance(loc, ir.NameLoc):
        at = file_location(loc.child_loc)
        if at is not None and loc.name_str and at.file:
            return loc.name_str, at
    return None


def op_location(loc: ir.Location) -> OpLocation:
    """The first instruction location inside `loc`, with the source the importer fused beside
    it.  In a location fused from several instructions' the source is the part right after the
    first instruction unless that part is itself an instruction (a name around a place in the
    same dump: no metadata source names the dump it was written into)."""
    for part in walk(loc):
        if isinstance(part, ir.FusedLoc):
            parts = list(part.locations)
            first = _instruction(parts[0]) if parts else None
            if first is None:
                continue
            source = parts[1] if len(parts) > 1 else None
            other = _instruction(source) if source is not None else None
            if source is None or (other is not None and other[1].file == first[1].file):
                return OpLocation(first[0], first[1])
            return _with_source(first, source)
        found = _instruction(part)
        if found is not None:
            return OpLocation(found[0], found[1])
    return OpLocation()


def _with_source(instruction: tuple[str, SourceLocation], source: ir.Location) -> OpLocation:
    if isinstance(source, ir.NameLoc):
        return OpLocation(instruction[0], instruction[1], source.name_str, file_location(source.child_loc))
    return OpLocation(instruction[0], instruction[1], "", file_location(source))


def location_name(loc: ir.Location) -> str | None:
    """The name a location gives its value: `name(...)`'s, or the first part's of a fused
    location (the importer names an entry parameter's block argument after its instruction;
    JAX names a function's arguments so)."""
    if isinstance(loc, ir.FusedLoc):
        parts = list(loc.locations)
        loc = parts[0] if parts else loc
    return loc.name_str if isinstance(loc, ir.NameLoc) and loc.name_str else None
