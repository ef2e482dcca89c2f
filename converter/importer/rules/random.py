"""Random number generation."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders as b
from converter.importer.registry import import_rule

DISTRIBUTIONS = {"rng_uniform": "UNIFORM", "rng_normal": "NORMAL"}
ALGORITHMS = {"rng_default": "DEFAULT", "rng_three_fry": "THREE_FRY", "rng_philox": "PHILOX"}


@import_rule("rng")
def import_rng(ctx, lo, hi, *shape_operand):
    """`rng(a, b)`, or `rng(a, b, shape)` with the result's dims as an operand (as XLA's
    importer tests and MHLO-exported modules write it; the result shape says the same)."""
    dist = ctx.attrs.get("distribution", "rng_uniform")
    if dist not in DISTRIBUTIONS:
        raise ctx.error(f"unknown rng distribution '{dist}'")
    if len(shape_operand) > 1:
        raise ctx.error(f"rng takes 2 operands (or 3 with the shape), got {2 + len(shape_operand)}")
    dims = list(ctx.shape.dims)
    i64 = ir.IntegerType.get_signless(64)
    if shape_operand:
        given = ctx.operand_shape(2)
        if given.is_tuple or given.rank != 1 or given.dims[0] != len(dims) or given.element_type[0] not in "su":
            raise ctx.error(f"rng's shape operand must be an integer vector of {len(dims)} dims, got {given}")
        source = ctx.operand_instruction(2)
        if source.opcode == "constant" and source.literal is not None:
            values = [int(v) for v in np.asarray(source.literal).reshape(-1)]
            if values != dims:
                raise ctx.error(f"rng's shape operand says {values} but its result is {ctx.shape}")
        shape = shape_operand[0]
        if given.element_type != "s64":
            shape = b.convert(shape, i64)
    else:
        shape = b.op1("stablehlo.constant", ir.RankedTensorType.get([len(dims)], i64), [],
                      {"value": b.i64_elements(dims, shape=(len(dims),))})
    return b.op1("stablehlo.rng", ctx.result_type(), [lo, hi, shape],
                 {"rng_distribution": stablehlo.RngDistributionAttr.get(DISTRIBUTIONS[dist])})


@import_rule("rng-bit-generator")
def import_rng_bit_generator(ctx, state):
    algorithm = ctx.attrs.get("algorithm", "rng_default")
    if algorithm not in ALGORITHMS:
        raise ctx.error(f"unknown rng algorithm '{algorithm}'")
    types = ctx.result_types()
    op = b.op("stablehlo.rng_bit_generator", types, [state],
              {"rng_algorithm": stablehlo.RngAlgorithmAttr.get(ALGORITHMS[algorithm])})
    return list(op.results)
