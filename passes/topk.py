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
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.registry import PassOptions, register_pass
from passes.symbol_dce import symbol_dce

TARGETS = ("TopK", "__gpu$TopK")


@register_pass("topk", "TopK / __gpu$TopK custom-calls → stable sort by the dump's comparator, then slices", targets=TARGETS)
def lower_topk(module: ir.Module, options: PassOptions) -> None:
    calls = rewrite.custom_calls(module, TARGETS)
    if not calls:
        return
    for op in calls:
        _lower_one(module, op)
    symbol_dce(module, options)  # the comparator functions, now cloned into sort regions


def _lower_one(module: ir.Module, op: ir.Operation) -> None:
    if len(op.operands) != 1 or len(op.results) != 2:
        raise rewrite.op_error(op, "expected one operand and (values, indices) results")
    x = op.operands[0]
    values_t, indices_t = (ir.RankedTensorType(r.type) for r in op.results)
    shape = builders.shape_of(x)
    k = values_t.shape[-1]
    if "called_computations" not in op.attributes:
        raise rewrite.op_error(op, "has no comparator (called_computations)")
    comparator = rewrite.lookup_function(module, ir.FlatSymbolRefAttr(
        ir.ArrayAttr(op.attributes["called_computations"])[0]).value)
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
            stablehlo.ReturnOp(rewrite.clone_function_body(comparator, list(block.arguments)))
        limit = shape[:-1] + [k]
        values = builders.slice_(sort.results[0], [0] * rank, limit)
        indices = builders.slice_(sort.results[1], [0] * rank, limit)
    rewrite.replace(op, [values, indices])
