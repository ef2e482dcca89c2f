"""Duplicate merging: an instruction equal to an earlier one of its block takes its values.

Optimized dumps repeat instructions (each fusion inlined at its call site rebuilds its own
broadcasts, constants and iotas), and a pipeline whose first pass is MLIR's CSE would
build all of them only to erase most.  With `ImportOptions.merge_duplicates` set (convert
sets it from passes.lib.manager.merge_before_cse for such a pipeline), an instruction of
a PURE opcode (converter.importer.registry) equal to an earlier one of the same block
(same opcode, operand values and shapes, result shape, attributes, and for a constant
its literal) builds nothing and takes that one's values: the module is what CSE makes of
the faithful import, built without the ops CSE would erase.  Two rules keep it so:
- only within one block: an earlier op of the same block dominates every later one, and
  no value crosses into a region or out of it (CSE, which also reuses values of enclosing
  blocks, merges the rest);
- only into an instruction whose values are already used by an op that lasts until cse
  (see `_used`): CSE keeps the first *used* one of equal ops, where it stands, with its
  location; an unused first one is erased, so merging into it would move the op.
Kept apart from the importer loop (converter/importer/core.py), which asks a block's
`DuplicateMerger` before building a PURE instruction and tells it what it built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from jaxlib.mlir import ir

from converter.hlo import attrs as hlo_attrs
from converter.hlo.ir import Instruction, Shape

Values = list[ir.Value]
# A use that a pass before cse may drop (passes.lib.manager.merge_before_cse): such a use
# does not keep the values alive until cse.
MayDrop = Callable[[ir.Operation, ir.Value], bool]

# Literals up to this size are compared (a larger constant builds its op; CSE merges it).
_MERGED_LITERAL_BYTES = 4096


@dataclass(slots=True)
class ImportedInstruction:
    """A PURE instruction imported into the block, which later equal ones may take the
    values of."""

    values: Values
    # Whether the values are known to be used by an op whose use lasts until cse (else
    # asked of the IR when a later instruction matches; see _used).
    used: bool
    attrs: dict[str, Any]
    # attrs' value key once a later instruction's attributes are compared with them (None:
    # not yet, or of a kind not known to compare by value; see same_attributes).
    attrs_key: tuple | None
    # What the merge key names by id: held so that no other object takes one of those ids
    # while the entry lives.
    operands: list[Any]
    operand_shapes: list[Shape]
    shape: Shape

    def same_attributes(self, attrs: dict[str, Any]) -> bool:
        """Whether `attrs` are this instruction's, compared by their value keys
        (attrs.value_key; False where either holds a value of a kind not known to compare
        by value)."""
        if not attrs and not self.attrs:
            return True
        if self.attrs_key is None:
            self.attrs_key = hlo_attrs.value_key(self.attrs)
        return self.attrs_key is not None and self.attrs_key == hlo_attrs.value_key(attrs)


class DuplicateMerger:
    """The PURE instructions imported so far into one block, by merge key."""

    __slots__ = ("may_drop", "imported")

    def __init__(self, may_drop: Sequence[MayDrop]):
        self.may_drop = may_drop
        self.imported: dict[tuple, ImportedInstruction] = {}

    def find(self, instr: Instruction, shape: Shape, operand_shapes: list[Shape],
             operands: list[Any]) -> tuple[tuple | None, Values | None]:
        """(the key to `record` the instruction under once built, or None where it is not
        merged; the values of an earlier equal instruction that it takes instead, or None).

        The key is what makes the import of a PURE instruction equal to another's, less the
        attributes (compared when a key matches): its opcode, the identity of its result
        and operand shapes (the parser makes one Shape object per shape text: equal shapes
        from two texts only miss a merge) and of its operand values (one shape per
        operand: the ids line up), and for a constant its literal."""
        opcode = instr.opcode
        literal = None
        if opcode == "constant":
            literal = _literal_key(instr)
            if literal is None:
                return None, None
        key: tuple | None = (opcode, id(shape), *map(id, operand_shapes), *map(id, operands), literal)
        imported = self.imported
        earlier = imported.get(key)
        if earlier is not None and not earlier.same_attributes(instr.attrs):
            # Another instruction of these operands and shapes: keyed with its attributes.
            key = _attributes_key(key, instr.attrs)
            earlier = imported.get(key) if key is not None else None
        if earlier is not None and (earlier.used or _used(earlier.values, self.may_drop)):
            earlier.used = True
            return key, earlier.values
        return key, None

    def record(self, key: tuple, values: Values, instr: Instruction, operands: list[Any],
               operand_shapes: list[Shape], shape: Shape) -> None:
        """An instruction `find` keyed is built: later equal ones may take its `values`."""
        # A rule that handed an operand on built nothing to erase: those values are used.
        first = values[0]
        passed_on = False
        for x in operands:
            if x is first:
                passed_on = True
                break
        self.imported[key] = ImportedInstruction(values, passed_on, instr.attrs, None, operands, operand_shapes, shape)


class BlockMergers:
    """One DuplicateMerger per block of a module being imported."""

    __slots__ = ("may_drop", "by_block")

    def __init__(self, may_drop: Sequence[MayDrop]):
        self.may_drop = may_drop
        self.by_block: dict[ir.Block, DuplicateMerger] = {}

    def current(self) -> DuplicateMerger | None:
        """The merger of the block being built at the current insertion point; None where
        ops are not being appended at the end of a block."""
        point = ir.InsertionPoint.current
        if point.ref_operation is not None:
            return None
        block = point.block
        merger = self.by_block.get(block)
        if merger is None:
            merger = self.by_block[block] = DuplicateMerger(self.may_drop)
        return merger


def _used(values: Values, may_drop: Sequence[MayDrop]) -> bool:
    """Whether an earlier equal instruction's values are used by an op whose use lasts
    until cse: not a custom-call (passes rewrite them) nor a use that a pass before cse
    `may_drop`.  CSE erases an op that nothing uses rather than keep it for the equal ops
    after it: the first used one is kept, where it stands, with its location.  So an
    instruction is merged only into one that is used already (and stays used without the
    merge); until then it builds its own ops, and becomes the one later instructions are
    merged into."""
    for value in values:
        for use in value.uses:
            user = use.owner
            if user.name != "stablehlo.custom_call" and not any(drop(user, value) for drop in may_drop):
                return True
    return False


def _literal_key(instr: Instruction) -> tuple | None:
    """A constant's literal in a merge key; None where it is not merged: an elided or
    tuple literal (made up per instruction), one over _MERGED_LITERAL_BYTES."""
    value = instr.literal
    if type(value) is not np.ndarray or value.nbytes > _MERGED_LITERAL_BYTES or instr.literal_elided:
        return None
    return (value.dtype, value.shape, value.tobytes())


def _attributes_key(key: tuple, attrs: dict[str, Any]) -> tuple | None:
    """A merge key that also holds the attributes (for the instructions after the first
    whose key matched another's but whose attributes did not); None where an attribute
    is of a kind not known to compare by value."""
    frozen = hlo_attrs.value_key(attrs)
    return None if frozen is None else (key, frozen)
