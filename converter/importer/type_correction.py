"""Element-type correction: the element types an op computes in, where the dump's differ.

XLA's TPU compiler changes element types inside fusions ("float_type_correction"): a pad
or reshape of f32 values that yields bf16, a reduce of f32 inputs with bf16 results.  No
StableHLO op changes element type so, so the importer builds such an op in its operands'
element type (the shape `computed_shape` gives; its rule sees that shape as `ctx.shape`)
and converts each result leaf to the dump's type (`to_dump_types`), which is what the
fused op does.  Kept apart from the importer loop (converter/importer/core.py), which
asks only for opcodes in CORRECTED.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.hlo.ir import Shape

# Ops whose results carry their operands' element type: result leaves follow operand 0,
# or (POSITIONAL) result leaf i follows operand i.
FOLLOWS_OPERAND_0 = frozenset({
    "reshape", "broadcast", "transpose", "slice", "reverse", "copy", "pad", "concatenate", "dynamic-slice",
    "dynamic-update-slice", "gather", "negate", "abs", "exponential", "log", "tanh", "logistic", "sqrt", "rsqrt",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "sine", "cosine",
    "exponential-minus-one", "log-plus-one", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "sign",
    "cbrt", "erf", "tan", "atan2", "and", "or", "xor", "not", "reduce-precision",
})
FOLLOWS_OPERAND_1 = frozenset({"select", "clamp"})
# opcode -> the operand whose element type the result follows.
FOLLOWS_OPERAND = {**dict.fromkeys(FOLLOWS_OPERAND_0, 0), **dict.fromkeys(FOLLOWS_OPERAND_1, 1)}
POSITIONAL = frozenset({"reduce", "reduce-window", "sort", "scatter", "all-reduce", "all-gather", "reduce-scatter",
                        "all-to-all", "collective-permute"})
# The opcodes whose results may be corrected (any other's shape is the dump's).
CORRECTED = frozenset(FOLLOWS_OPERAND) | POSITIONAL
# Element types of shapes that are not arrays (Shape.is_array, without its three calls).
NOT_ARRAYS = frozenset({"tuple", "token", "buffer"})


def computed_shape(opcode: str, shape: Shape, operand_shapes: list[Shape]) -> Shape | None:
    """The result shape of an instruction of `opcode` (one of CORRECTED) in the element
    types its op computes in, where that differs from the dump's `shape`; None in the
    common case, where they agree."""
    followed = FOLLOWS_OPERAND.get(opcode)
    if followed is None:
        return _positional_computed_shape(shape, operand_shapes) if opcode in POSITIONAL else None
    element_type = shape.element_type
    if element_type not in NOT_ARRAYS and len(operand_shapes) > followed:
        source = operand_shapes[followed].element_type
        # complex → real (abs of c64 is f32) is the op's own type change.
        if source != element_type and source not in NOT_ARRAYS and source[0] != "c":
            return Shape(source, shape.dims, shape.dynamic, shape.layout)
    return None


def _positional_computed_shape(shape: Shape, operand_shapes: list[Shape]) -> Shape | None:
    """For a POSITIONAL op: the result whose leaf i has operand i's element type, where
    any differs from the dump's (None otherwise)."""
    leaves = shape.leaves()
    sources = operand_shapes[: len(leaves)]
    if len(sources) == len(leaves) and all(s.is_array for s in sources) and \
            any(s.element_type != leaf.element_type for s, leaf in zip(sources, leaves)):
        computed = [Shape(s.element_type, leaf.dims, leaf.dynamic, leaf.layout) for s, leaf in zip(sources, leaves)]
        return computed[0] if not shape.is_tuple else Shape("tuple", tuple_shapes=tuple(computed))
    return None


def to_dump_types(values: list[ir.Value], types: list[ir.Type]) -> list[ir.Value]:
    """A corrected op's result leaves converted to the dump's element types `types` (at
    the current location and insertion point)."""
    return [_convert(v, t) for v, t in zip(values, types)]


def _convert(value: ir.Value, t: ir.Type) -> ir.Value:
    if value.type == t:
        return value
    return ir.Operation.create("stablehlo.convert", results=[t], operands=[value]).result
