"""Random number generation."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.importer import build as b
from converter.importer.registry import import_rule

DISTRIBUTIONS = {"rng_uniform": "UNIFORM", "rng_normal": "NORMAL"}
ALGORITHMS = {"rng_default": "DEFAULT", "rng_three_fry": "THREE_FRY", "rng_philox": "PHILOX"}


@import_rule("rng")
def import_rng(ctx, lo, hi):
    dist = ctx.attrs.get("distribution", "rng_uniform")
    if dist not in DISTRIBUTIONS:
        raise ctx.error(f"unknown rng distribution '{dist}'")
    dims = list(ctx.shape.dims)
    shape = b.op1("stablehlo.constant", ir.RankedTensorType.get([len(dims)], ir.IntegerType.get_signless(64)), [],
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
