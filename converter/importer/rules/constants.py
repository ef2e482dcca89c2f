"""Constants: array and tuple literals (elided `{...}` literals as the import options say)."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.hlo.ir import Shape
from converter.hlo.printer import shape_to_text
from converter.mlir import builders
from converter.importer.core import dense_elements
from converter.importer.registry import import_rule


@import_rule("constant", pure=True)
def import_constant(ctx):
    instr = ctx.instr
    if instr.shape.is_tuple:
        return [_array_constant(ctx, v, s) for v, s in zip(_flatten(instr.literal), instr.shape.leaves())]
    return _array_constant(ctx, instr.literal, instr.shape)


def _flatten(literal):
    if isinstance(literal, tuple):
        return [x for item in literal for x in _flatten(item)]
    return [literal]


def _array_constant(ctx, value, shape: Shape) -> ir.Value:
    from converter.hlo import dtypes

    if shape.is_token:
        return builders.op1("stablehlo.after_all", stablehlo.TokenType.get(), [])
    if value is None:
        policy = ctx.module_importer.options.elided_constants
        if policy == "mark":
            ctx.module_importer.elided_constants.append(ctx.instr.name)
            policy = "zeros"
        if policy == "error":
            raise ctx.error(
                f"the dump elides this constant's {shape.num_elements()} values ('{{...}}'); re-dump with "
                "XLA_FLAGS=--xla_dump_large_constants (or print with print_large_constants), or pass "
                "--elided-constants=zeros|random to run with made-up values")
        dtype = dtypes.numpy_dtype(shape.element_type)
        if ctx.module_importer.elided_constants and ctx.module_importer.elided_constants[-1] == ctx.instr.name:
            # Marked: execution refuses, so the zeros are never materialized; a splat
            # holds them in constant space whatever the size.
            return builders.op1("stablehlo.constant", ctx.result_type(shape), [],
                         {"value": dense_elements(np.zeros((), dtype), shape.element_type, shape.dims)})
        from converter.common.resources import check_fits

        # Made-up values to run with: XLA materializes them, and so does NumPy for random ones.
        check_fits(shape.byte_size() * (1 if policy == "zeros" else 3),
                   f"constant '{ctx.instr.name}' ({shape_to_text(shape, False)}, elided in the dump) made up as {policy}")
        if policy == "zeros":
            return builders.op1("stablehlo.constant", ctx.result_type(shape), [],
                         {"value": dense_elements(np.zeros((), dtype), shape.element_type, shape.dims)})
        else:
            rng = ctx.module_importer._rng
            if dtype.kind in "iu":
                value = rng.integers(0, 8, size=shape.dims).astype(dtype)
            elif dtype.kind == "b":
                value = rng.integers(0, 2, size=shape.dims).astype(bool)
            else:
                value = rng.standard_normal(size=shape.dims).astype(dtype)
    value = np.asarray(value)
    if value.size == 1:
        # Scalars and splats repeat (zeros, ones, -inf): their attribute is made once.
        key = (shape.element_type, shape.dims, value.dtype.str, value.tobytes())
        attr = ctx.module_importer.splat_constants.get(key)
        if attr is None:
            attr = ctx.module_importer.splat_constants[key] = dense_elements(value.reshape(shape.dims), shape.element_type)
    else:
        attr = dense_elements(value.reshape(shape.dims), shape.element_type)
    return builders.op1("stablehlo.constant", ctx.result_type(shape), [], {"value": attr})
