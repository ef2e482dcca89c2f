"""Where each imported op comes from: an HLO instruction's MLIR location.

An op's location is its instruction's name at the dump's line:col, fused with the source
its metadata names (op_name around a stack frame or a source file and line), so that
errors, `view` and the CPU runtime's messages point at both the dump and the user's code.
Thousands of instructions share a few hundred sources, and most metadata texts differ
only in their scheduling name, so sources are made once per text less that name (the
metadata is then mostly never parsed) and once per (frame, file, line, op_name).  Kept
apart from the importer loop (converter/importer/core.py), which only asks for an
instruction's location.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.hlo.ir import Instruction, Module, metadata_source

_MISSING = object()
# Looked up once: InstructionLocations.location makes two or three locations per instruction.
_name_location, _file_location, _fused_location = ir.Location.name, ir.Location.file, ir.Location.fused


def _source_key(metadata_text: str) -> str:
    """The metadata's text less its scheduling name, in which the instructions of one
    source differ: two texts with the same key have the same op_name, source file and
    line and stack frame.  The text is `key=value` items (the parser refuses anything
    else, as XLA's does).  Only in a text without escapes or single quotes, where a
    double quote opens or closes a value: the first `scheduling_name="` at the text's
    start or after whitespace (not the end of a longer key, which allow_unknown_attributes
    keeps) with an even number of quotes before it (outside every quoted value) is that
    item, and its value ends at the next quote.  Any other text is its own key."""
    start = metadata_text.find('scheduling_name="')
    if start < 0 or "\\" in metadata_text or "'" in metadata_text or \
            (start and not metadata_text[start - 1].isspace()) or metadata_text.count('"', 0, start) & 1:
        return metadata_text
    end = metadata_text.find('"', start + 17)
    if end < 0:
        return metadata_text
    if end == len(metadata_text) - 1:  # the last item, as XLA prints it: one slice
        return metadata_text[:start]
    return metadata_text[:start] + metadata_text[end + 1 :]


class InstructionLocations:
    """The locations of one module's instructions (in the MLIR context current when asked)."""

    def __init__(self, hlo: Module):
        self.hlo = hlo
        # The source part of instruction locations (op_name, stack frame or source file),
        # shared by many instructions: (stack_frame_id, source_file, source_line, op_name) -> location.
        self._sources: dict[tuple, ir.Location | None] = {}
        # The same by the metadata's text less its scheduling name (see _source_key).
        self._sources_by_text: dict[str, ir.Location | None] = {}
        # id(root instruction) -> (instruction, location): see location.
        self._root_locations: dict[int, tuple[Instruction, ir.Location]] = {}

    def location(self, instr: Instruction) -> ir.Location:
        """The instruction's name at its line:col, fused with its metadata's source.  A
        computation's root's is made once: a region's return takes it too, and a reducer
        is imported with every reduce that calls it (the entry holds the instruction: no
        other takes its id)."""
        if instr.is_root:
            known = self._root_locations.get(id(instr))
            if known is None:
                known = self._root_locations[id(instr)] = (instr, self._new_location(instr))
            return known[1]
        return self._new_location(instr)

    def _new_location(self, instr: Instruction) -> ir.Location:
        loc = _name_location(instr.name, childLoc=_file_location(self.hlo.path, instr.line, instr.col))
        # The metadata as the dump wrote it, where the parser keeps it unparsed until used.
        text = instr.metadata_text
        if text is not None:
            if "op_name" not in text and "source_file" not in text and "stack_frame_id" not in text:
                return loc  # metadata without a source (only scheduling names, ...): not worth parsing
            key = _source_key(text)
            source = self._sources_by_text.get(key, _MISSING)
            if source is _MISSING:
                source = self._sources_by_text[key] = self._source(metadata_source(text))
        else:  # metadata given as a record (or none)
            md = instr.metadata
            if md is None:
                return loc
            source = self._source((md.stack_frame_id, md.source_file, md.source_line, md.op_name))
        return _fused_location([loc, source]) if source is not None else loc

    def _source(self, key: tuple[int, str, int, str]) -> ir.Location | None:
        """The location of (stack_frame_id, source_file, source_line, op_name)."""
        try:
            return self._sources[key]
        except KeyError:
            source = self._sources[key] = self._source_location(*key)
            return source

    def _source_location(self, stack_frame_id: int, source_file: str, source_line: int,
                         op_name: str) -> ir.Location | None:
        """Where the metadata says an instruction comes from: its op_name around its stack
        frame's (or source file's) position."""
        source = None
        if stack_frame_id:
            frame = self.hlo.stack_frames.location(stack_frame_id)
            if frame is not None:
                source = ir.Location.file(frame[0], frame[1], frame[2])
        if source is None and source_file:
            source = ir.Location.file(source_file, source_line, 0)
        if op_name:
            source = ir.Location.name(op_name, childLoc=source) if source is not None else ir.Location.name(op_name)
        return source
