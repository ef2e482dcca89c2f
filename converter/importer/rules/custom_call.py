"""`custom-call`, imported faithfully: target, operands, flattened results,
backend_config, api_version, side effects, called computations, layouts and
output-to-operand aliasing.  Passes later make backend targets portable."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.hlo.attrs import INSTRUCTION_ATTRS
from converter.hlo.printer import attr_to_text, sharding_to_text
from converter.mlir import builders
from converter.importer.core import frontend_attributes
from converter.importer.registry import import_rule

CONVOLUTION_ATTRS = ("window", "dim_labels", "feature_group_count", "batch_group_count", "operand_precision")

API_VERSIONS = {
    "API_VERSION_UNSPECIFIED": 0, "API_VERSION_ORIGINAL": 1, "API_VERSION_STATUS_RETURNING": 2,
    "API_VERSION_STATUS_RETURNING_UNIFIED": 3, "API_VERSION_TYPED_FFI": 4,
}


def _layout_attr(shape) -> ir.Attribute:
    m2m = list(shape.layout.minor_to_major) if shape.layout is not None and shape.layout.minor_to_major \
        else list(range(shape.rank - 1, -1, -1))
    return builders.layout_attr(m2m)


def _leaf_aliases(ctx, aliases) -> list[ir.Attribute]:
    """HLO aliases name (nested) tuple indices of the result and of one operand; the
    imported call's results and operands are the flattened leaves, so each alias becomes
    one alias per leaf it covers, between flat result and flat operand positions."""
    out = []
    operand_count = len(ctx.instr.operands)
    results = ctx.shape.leaf_count()
    for al in aliases:
        if not 0 <= al.operand < operand_count:
            raise ctx.error(f"output_to_operand_aliasing names operand {al.operand} of a call with "
                            f"{operand_count} operands")
        operand_shape = ctx.operand_shape(al.operand)
        try:
            out_lo, out_hi = ctx.shape.leaf_span(tuple(al.output_index))
            in_lo, in_hi = operand_shape.leaf_span(tuple(al.operand_index))
        except IndexError:
            raise ctx.error(f"output_to_operand_aliasing {{{','.join(map(str, al.output_index))}}}: "
                            f"({al.operand}, {{{','.join(map(str, al.operand_index))}}}) names a tuple "
                            "index the shapes do not have") from None
        if out_hi - out_lo != in_hi - in_lo:
            raise ctx.error(f"output_to_operand_aliasing pairs {out_hi - out_lo} result leaves with "
                            f"{in_hi - in_lo} leaves of operand {al.operand}")
        base = sum(ctx.operand_shape(i).leaf_count() for i in range(al.operand))
        for k in range(out_hi - out_lo):
            out.append(stablehlo.OutputOperandAlias.get([out_lo + k] if results > 1 else [], base + in_lo + k, []))
    return out


@import_rule("custom-call")
def import_custom_call(ctx, *operands):
    leaves = []
    for x in operands:
        leaves.extend(x if isinstance(x, list) else [x])
    a = ctx.attrs
    target = a.get("custom_call_target")
    if target is None:
        raise ctx.error("custom-call without custom_call_target")
    api_name = a.get("api_version", "API_VERSION_ORIGINAL")
    if api_name not in API_VERSIONS:
        raise ctx.error(f"unknown api_version {api_name}")
    api = API_VERSIONS[api_name]
    attrs: dict[str, ir.Attribute] = {
        "call_target_name": ir.StringAttr.get(target),
        "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), api),
    }
    config = a.get("backend_config")
    if config is not None:
        if api == 4:
            # As JAX writes typed-FFI calls (jax's mlir.custom_call): the attribute
            # dictionary in `mhlo.backend_config` with api_version 1 and an empty string
            # config, which XLA reads back as API_VERSION_TYPED_FFI, and which a portable
            # artifact can carry (VHLO holds the inherent backend_config only as a string).
            if config.form == "mlir":
                attrs["mhlo.backend_config"] = ir.Attribute.parse(config.raw)
                attrs["api_version"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
                attrs["backend_config"] = ir.StringAttr.get("")
            else:  # a JSON config of an FFI call (GPU targets that passes rewrite): kept as text
                attrs["mhlo.backend_config"] = ir.StringAttr.get(config.text())
        else:
            # Bytes, not text: an opaque config may be a binary struct (not UTF-8).
            attrs["backend_config"] = ir.StringAttr.get(config.data())
    if a.get("custom_call_has_side_effect"):
        attrs["has_side_effect"] = ir.BoolAttr.get(True)
    called = a.get("called_computations") or ([a["to_apply"]] if "to_apply" in a else a.get("calls"))
    if called:
        symbols = []
        for name in called:
            comp = ctx.computation(name)
            arg_types = [t for p in comp.parameters for t in ctx.module_importer.leaf_types(p.shape)]
            symbol, _ = ctx.module_importer.fusion_function(comp, arg_types)
            symbols.append(ir.FlatSymbolRefAttr.get(symbol))
        attrs["called_computations"] = ir.ArrayAttr.get(symbols)
    aliases = a.get("output_to_operand_aliasing")
    if aliases:
        attrs["output_operand_aliases"] = ir.ArrayAttr.get(_leaf_aliases(ctx, aliases))
    constraints = a.get("operand_layout_constraints")
    if constraints:
        attrs["operand_layouts"] = ir.ArrayAttr.get([_layout_attr(s) for s in constraints])
        attrs["result_layouts"] = ir.ArrayAttr.get([_layout_attr(s) for s in ctx.shape.leaves()])
    else:
        # The dump's physical layouts, as information for passes: a backend call's meaning
        # can depend on them (cuBLAS adds a GEMM's bias along the output's minor dims).
        attrs["hlo.operand_layouts"] = ir.ArrayAttr.get(
            [_layout_attr(s) for i in range(len(ctx.instr.operands)) for s in ctx.operand_shape(i).leaves()])
        attrs["hlo.result_layouts"] = ir.ArrayAttr.get([_layout_attr(s) for s in ctx.shape.leaves()])
    frontend = a.get("frontend_attributes")
    if frontend:
        attrs["mhlo.frontend_attributes"] = frontend_attributes(frontend)
    sharding = a.get("sharding")
    if sharding is not None:
        attrs["mhlo.sharding"] = ir.StringAttr.get(sharding_to_text(sharding))
    # Convolution-shaped calls (cuDNN convolutions) carry the convolution's window and
    # dimension labels as instruction attributes: keep them, as HLO text, for passes.
    for key in CONVOLUTION_ATTRS:
        if key in a:
            attrs[f"hlo.{key}"] = ir.StringAttr.get(attr_to_text(key, a[key], INSTRUCTION_ATTRS).split("=", 1)[1])
    op = builders.op("stablehlo.custom_call", ctx.result_types(), leaves, attrs)
    return list(op.results)
