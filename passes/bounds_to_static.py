"""bounds-to-static: run a module whose entry takes bounded dynamic arrays
(`f32[<=4]`, `tensor<?xf32, #stablehlo.bounds<4>>`) at the bounds.

XLA lays a bounded dimension out at its bound, and its CPU compiler cannot take dynamic
arrays at the entry (it asks for the `PadToStatic` call it does not implement).  The
entry's arguments get their bound as static size and StableHLO's shape refinement
carries the static shapes through the body (a `get_dimension_size` of such an argument
becomes the bound), so inputs are arrays of the bound's size, as `run` makes them.
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.errors import PassError
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


def bound_shape(t: ir.Type) -> list[int] | None:
    """The static shape of a ranked tensor type at its bounds; None where the type is
    static already.  Raises ValueError for a dynamic dimension without a bound."""
    if not isinstance(t, ir.RankedTensorType):
        return None
    rt = ir.RankedTensorType(t)
    if not any(ir.ShapedType.is_dynamic_size(d) for d in rt.shape):
        return None
    m = re.fullmatch(r"#stablehlo\.bounds<(.*)>", str(rt.encoding)) if rt.encoding is not None else None
    bounds = [b.strip() for b in m.group(1).split(",")] if m else []
    dims = []
    for k, d in enumerate(rt.shape):
        if not ir.ShapedType.is_dynamic_size(d):
            dims.append(d)
        elif k < len(bounds) and bounds[k].isdigit():
            dims.append(int(bounds[k]))
        else:
            raise ValueError(f"dimension {k} of {t} is dynamic without a bound: it has no size to run at")
    return dims


def _main(module: ir.Module) -> ir.Operation | None:
    try:
        return rewrite.lookup_function(module, "main")
    except PassError:
        return None


def has_dynamic_entry(module: ir.Module) -> bool:
    """Whether the entry takes an array of dynamic size."""
    main = _main(module)
    if main is None:
        return False
    # Dynamic results alone are fine: XLA's CPU runtime returns their bounded buffers.
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    return any(isinstance(t, ir.RankedTensorType) and not ir.RankedTensorType(t).has_static_shape
               for t in ftype.inputs)


# Ops that set a dynamic size from data: with them a size can be below its bound, so
# the module runs at its bounds only where shape refinement makes those sizes constant.
SIZE_SETTERS = ("stablehlo.set_dimension_size", "stablehlo.dynamic_reshape", "stablehlo.real_dynamic_slice",
                "stablehlo.dynamic_pad", "stablehlo.dynamic_iota", "stablehlo.dynamic_broadcast_in_dim",
                "stablehlo.dynamic_gather", "stablehlo.dynamic_conv")


def _to_bounds(module: ir.Module, path: str) -> None:
    """Every bounded dynamic type at its bound: values, block arguments, function types."""
    def static(t: ir.Type) -> ir.Type:
        try:
            dims = bound_shape(t)
        except ValueError as e:
            raise PassError(f"{path}: {e}") from None
        return t if dims is None else ir.RankedTensorType.get(dims, ir.RankedTensorType(t).element_type)

    with module.context, ir.Location.unknown():
        for op in rewrite.walk(module):
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        arg.set_type(static(arg.type))
            for result in op.results:
                result.set_type(static(result.type))
            if op.name == "func.func":
                ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
                op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                    [static(t) for t in ftype.inputs], [static(t) for t in ftype.results]))


def _refine(module: ir.Module, path: str) -> None:
    """StableHLO's shape refinement from static entry arguments (it folds constant sizes
    given to the ops that set them)."""
    import io

    import jaxlib._jax as jax_ext

    from converter.mlir.serialize import load_module

    main = _main(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    block = main.regions[0].blocks[0]
    inputs = []
    with module.context, ir.Location.unknown():
        for i, arg in enumerate(block.arguments):
            try:
                dims = bound_shape(arg.type)
            except ValueError as e:
                raise PassError(f"{path}: entry argument {i}: {e}") from None
            if dims is not None:
                arg.set_type(ir.RankedTensorType.get(dims, ir.RankedTensorType(arg.type).element_type))
            inputs.append(arg.type)
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, ftype.results))
    data = io.BytesIO()
    module.operation.write_bytecode(data)
    try:
        refined = jax_ext.mlir.refine_polymorphic_shapes(data.getvalue(), enable_shape_assertions=False,
                                                         validate_static_shapes=True)
    except Exception as e:  # the refinement names what stays dynamic
        raise PassError(f"{path}: the module sets dynamic sizes from values, so it cannot run at its "
                        f"bounds: {e}") from None
    new = load_module(refined, path, module.context)
    body = module.body
    for op in list(body.operations):
        op.operation.erase()
    for op in list(new.body.operations):
        body.append(op.operation)


@register_pass("bounds-to-static",
               "run bounded dynamic entry arrays at their bounds: every bounded dynamic type at its bound")
def bounds_to_static(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    if _main(module) is None or not has_dynamic_entry(module):
        return
    path = options.path or "<module>"
    # At the bounds every dynamic size is its bound unless an op sets one from data.
    if walks.walk(SIZE_SETTERS):
        _refine(module, path)
    else:
        _to_bounds(module, path)
