"""cub-sort: XLA's GPU CUB radix-sort calls → a stable `stablehlo.sort` in CUB's key order.

XLA's SortRewriter (xla/service/gpu/transforms/sort_rewriter.cc) replaces a sort along the
minor dimension whose comparator is a plain comparison of one operand by a call to CUB's
DeviceRadixSort; the forms are
- `__cub$DeviceRadixSort` (until March 2026): operands keys[, values], results (keys[,
  values], u8[scratch]), backend_config the SortOptions proto as JSON (`{"descending":true}`;
  `{}` ascending);
- `xla.gpu.ext.cub_sort_keys` / `xla.gpu.ext.cub_sort_pairs` (typed FFI, written by
  EstimateCubScratchSize): the same operands and results, attributes `descending` (bool) and
  `batch_size` (i64).
Keys and values are row-major [batch_size, n] (XLA forces default layouts on these calls);
each row is sorted on its own, stably in both directions (equal keys keep their input
order: a radix sort), by the key's bits as CUB orders them: integers by value, floats in
IEEE total order (−NaN < −inf < … < +inf < +NaN, NaN payloads by their bits) except that −0
and +0 are equal.  The rewrite is that: a stable sort of each row, the comparator a strict
TOTALORDER comparison (greater-than for descending) of the keys with −0 read as +0; the
scratch result must be unused.  (For NumPy-order sorts XLA itself materializes unsigned
synthetic keys before the call, so the call sorts integers.)
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

LEGACY_TARGET = "__cub$DeviceRadixSort"
FFI_TARGETS = ("xla.gpu.ext.cub_sort_keys", "xla.gpu.ext.cub_sort_pairs")
TARGETS = (LEGACY_TARGET,) + FFI_TARGETS


@register_pass("cub-sort", "XLA's CUB radix-sort calls (__cub$DeviceRadixSort, xla.gpu.ext.cub_sort_keys/pairs) → "
                           "a stable sort in CUB's key order", targets=TARGETS, preserves={Fact.USES})
def lower_cub_sort(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        lower_sort(op)


def lower_sort(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    operands = list(op.operands)
    results = list(op.results)
    if len(operands) not in (1, 2) or len(results) != len(operands) + 1:
        raise rewrite.op_error(op, f"expects keys[, values] and their sorted copies plus a scratch result, got "
                                   f"{len(operands)} operand(s) and {len(results)} result(s)")
    if target == "xla.gpu.ext.cub_sort_pairs" and len(operands) != 2 or \
            target == "xla.gpu.ext.cub_sort_keys" and len(operands) != 1:
        raise rewrite.op_error(op, f"{len(operands)} operand(s) for {target}")
    if rewrite.has_uses(results[-1]):
        raise rewrite.op_error(op, "its scratch result (the last) is used")
    shape = builders.shape_of(operands[0])
    for i, value in enumerate(operands):
        if builders.shape_of(value) != shape or results[i].type != value.type:
            raise rewrite.op_error(op, f"operand {i} {value.type} does not match the keys {operands[0].type} "
                                       f"and result {results[i].type}")
        if rewrite.dump_layout(op, "operand", i, len(shape)) != list(range(len(shape) - 1, -1, -1)):
            raise rewrite.op_error(op, f"operand {i} is not row-major: CUB sorts rows of the buffer, which a "
                                       "non-default layout does not make rows of the array")
    element = builders.element_type_of(operands[0])
    if not isinstance(element, (ir.IntegerType, ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)):
        raise rewrite.op_error(op, f"CUB sorts integer and float keys, not {element}")
    config = rewrite.backend_config(op)
    descending = bool(config.get("descending", False))
    total = 1
    for d in shape:
        total *= d
    batch = int(config.get("batch_size", total // shape[-1] if shape and shape[-1] else 1))
    if total == 0:
        rewrite.replace(op, operands + [None])
        return
    if batch <= 0 or total % batch:
        raise rewrite.op_error(op, f"batch_size {batch} does not divide the {total} keys")
    rows = [batch, total // batch]
    with rewrite.at(op):
        flat = [builders.reshape(v, rows) for v in operands]
        key_t = ir.RankedTensorType.get([], builders.element_type_of(operands[0]))
        value_ts = [ir.RankedTensorType.get([], builders.element_type_of(v)) for v in operands]
        sort = builders.op("stablehlo.sort", [v.type for v in flat], flat,
                           {"dimension": builders.i64_attr(1), "is_stable": ir.BoolAttr.get(True)}, regions=1)
        block = sort.regions[0].blocks.append(*[t for t in value_ts for _ in range(2)])
        with ir.InsertionPoint(block):
            lhs, rhs = block.arguments[0], block.arguments[1]
            stablehlo.ReturnOp([_before(lhs, rhs, key_t, descending)])
        values = [builders.reshape(v, shape) for v in sort.results]
    rewrite.replace(op, values + [None])


def _before(lhs: ir.Value, rhs: ir.Value, key_t: ir.Type, descending: bool) -> ir.Value:
    """lhs sorts strictly before rhs in CUB's order."""
    element = ir.RankedTensorType(key_t).element_type
    direction = "GT" if descending else "LT"
    if isinstance(element, ir.IntegerType):
        integer = ir.IntegerType(element)
        order = "UNSIGNED" if integer.is_unsigned or integer.width == 1 else "SIGNED"
        return builders.compare(lhs, rhs, direction, order)
    zero = builders.scalar_constant(0, element)

    def canonical(x: ir.Value) -> ir.Value:  # −0 → +0: CUB does not tell them apart
        return builders.select(builders.compare(x, zero, "EQ", "FLOAT"), zero, x)

    return builders.compare(canonical(lhs), canonical(rhs), direction, "TOTALORDER")
