"""topk: the `TopK` custom-call (XLA CPU/GPU) and the GPU compiler's `__gpu$TopK` → a
stable sort and a slice.

XLA writes `custom-call(x), custom_call_target="TopK", called_computations={cmp}` with a
result tuple (values[..., k], indices[..., k] s32): the k first elements along the last
dimension in the order of the comparator `cmp` over (value, index) pairs — XLA's is
"greater than" in total order, so NaN counts as largest — with ties kept in index order
(xla/service/topk_rewriter.cc, TopkDecomposer: a stable sort of (values, iota) by `cmp`,
then slices).  The rewrite is exactly that, using the dump's own comparator.

XLA's GPU compiler writes `__gpu$TopK` (TopkSpecializer, a typed-FFI call to its TopK
kernel) in the same form: one operand of rank 1 or 2, results (values, s32 indices),
`called_computations={comparator}`.  Its kernel does not promise an order among equal
values; the portable meaning is lax.top_k's (and the decomposer's): ties by lower index.
jax 0.12's XLA writes `__gpu$TopK` without `called_computations`: the typed-FFI
backend_config `{is_stable = true, order = "TOTAL"}` stands for the comparator it replaced,
"greater than" in IEEE total order (+NaN above +inf, +0.0 above -0.0, -NaN below -inf:
stablehlo.compare with compare_type TOTALORDER) with ties by lower index (is_stable).
Another order, or an unstable TopK, is refused by name: its order among ties or NaNs is
not lax.top_k's.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

TARGETS = ("TopK", "__gpu$TopK")


@register_pass("topk", "TopK / __gpu$TopK custom-calls → stable sort by the dump's comparator (or its TOTAL order), then slices",
               targets=TARGETS, preserves={Fact.USES})
def lower_topk(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    calls = walks.custom_calls(TARGETS)
    if not calls:
        return
    for op in calls:
        _lower_one(module, op)
    run_mlir_pipeline(module, "symbol-dce")  # the comparator functions, now cloned into sort regions


def _lower_one(module: ir.Module, op: ir.Operation) -> None:
    if len(op.operands) != 1 or len(op.results) != 2:
        raise rewrite.op_error(op, "expected one operand and (values, indices) results")
    x = op.operands[0]
    values_t, indices_t = (ir.RankedTensorType(r.type) for r in op.results)
    shape = builders.shape_of(x)
    k = values_t.shape[-1]
    comparator = None
    if "called_computations" in op.attributes:
        comparator = rewrite.lookup_function(module, ir.FlatSymbolRefAttr(
            ir.ArrayAttr(op.attributes["called_computations"])[0]).value)
    else:
        config = rewrite.backend_config(op)
        if config.get("order") != "TOTAL" or config.get("is_stable") is not True:
            raise rewrite.op_error(op, "has no comparator (called_computations) and its backend_config is not "
                                       f"{{is_stable = true, order = \"TOTAL\"}} (found {dict(config)}): the order "
                                       "it sorts by is unknown")
    rank = len(shape)
    et = builders.element_type_of(x)
    it = indices_t.element_type
    with rewrite.at(op):
        iota = builders.iota(it, shape, rank - 1)
        sort = builders.op("stablehlo.sort", [x.type, iota.type], [x, iota],
                    {"dimension": builders.i64_attr(rank - 1), "is_stable": ir.BoolAttr.get(True)}, regions=1)
        scalar, iscalar = ir.RankedTensorType.get([], et), ir.RankedTensorType.get([], it)
        block = sort.regions[0].blocks.append(scalar, scalar, iscalar, iscalar)
        with ir.InsertionPoint(block):
            if comparator is not None:
                stablehlo.ReturnOp(rewrite.clone_function_body(comparator, list(block.arguments)))
            else:
                stablehlo.ReturnOp([_greater_total_order(block.arguments[0], block.arguments[1])])
        limit = shape[:-1] + [k]
        values = builders.slice_(sort.results[0], [0] * rank, limit)
        indices = builders.slice_(sort.results[1], [0] * rank, limit)
    rewrite.replace(op, [values, indices])


def _greater_total_order(a: ir.Value, b: ir.Value) -> ir.Value:
    """a > b in the order `order = "TOTAL"` names: IEEE total order for floats, the
    integers' own order otherwise."""
    et = builders.element_type_of(a)
    if isinstance(et, ir.IntegerType):
        kind = "UNSIGNED" if et.is_unsigned or et.width == 1 else "SIGNED"
        return builders.compare(a, b, "GT", kind)
    return builders.compare(a, b, "GT", "TOTALORDER")
