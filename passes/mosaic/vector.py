"""vector and tpu compute ops: broadcasts, shape casts, reductions, iota, matmul,
transposes, slices, concatenation."""

from __future__ import annotations

import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import Translator, attr, int_list, rule, tensor_type

# vector.multi_reduction kinds → (StableHLO body op, identity for floats, for ints).
REDUCTIONS = {
    "add": ("add", 0.0, 0), "mul": ("multiply", 1.0, 1),
    "maximumf": ("maximum", float("-inf"), None), "minimumf": ("minimum", float("inf"), None),
    "maxnumf": ("maximum", float("-inf"), None), "minnumf": ("minimum", float("inf"), None),
    "maxsi": ("maximum", None, -(2 ** 31)), "minsi": ("minimum", None, 2 ** 31 - 1),
    "and": ("and", None, -1), "or": ("or", None, 0), "xor": ("xor", None, 0),
}


@rule("vector.broadcast", "vector.splat")
def _broadcast(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    out = tensor_type(op.results[0].type)
    rank, src_rank = len(out.shape), len(builders.shape_of(x))
    t.set(op.results[0], builders.broadcast_in_dim(x, list(out.shape), list(range(rank - src_rank, rank))))


@rule("vector.shape_cast", "tpu.reshape")
def _shape_cast(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.reshape(t.value(op.operands[0]), list(tensor_type(op.results[0].type).shape)))


@rule("vector.transpose", "tpu.transpose")
def _transpose(t: Translator, op: ir.Operation) -> None:
    t.set(op.results[0], builders.transpose(t.value(op.operands[0]), int_list(op.attributes["permutation"])))


def _kind(op: ir.Operation) -> str:
    m = re.search(r"<(\w+)>", str(op.attributes["kind"]))
    if not m or m.group(1) not in REDUCTIONS:
        raise KernelError(f"reduction kind {op.attributes['kind']} is not supported")
    return m.group(1)


@rule("vector.multi_reduction")
def _multi_reduction(t: Translator, op: ir.Operation) -> None:
    source, acc = (t.value(v) for v in op.operands)
    body, float_init, int_init = REDUCTIONS[_kind(op)]
    is_float = not isinstance(builders.element_type_of(source), ir.IntegerType)
    init = float_init if is_float else int_init
    if init is None:
        raise KernelError(f"reduction {_kind(op)} of element type {builders.element_type_of(source)}")
    reduced = builders.reduce(source, int_list(op.attributes["reduction_dims"]), body, init)
    t.set(op.results[0], builders.binary(body, reduced, acc))


@rule("tpu.iota")
def _iota(t: Translator, op: ir.Operation) -> None:
    out = tensor_type(op.results[0].type)
    dims = int_list(op.attributes["dimensions"]) if "dimensions" in op.attributes else [0]
    if len(dims) != 1:
        raise KernelError(f"tpu.iota over dimensions {dims}")
    t.set(op.results[0], builders.iota(out.element_type, list(out.shape), dims[0]))


def _round_to_bf16(x: ir.Value) -> ir.Value:
    et = builders.element_type_of(x)
    if not isinstance(et, ir.F32Type):
        return x
    return builders.convert(builders.convert(x, ir.BF16Type.get()), et)


def _dot_dimension_numbers(a: ir.Attribute) -> list[list[int]]:
    """`#tpu.dot_dimension_numbers<[lc], [rc], [lnc], [rnc], [out order pairs], [lb], [rb]>`."""
    groups = re.findall(r"\[([^\]]*)\]", str(a))
    if len(groups) != 7:
        raise KernelError(f"unexpected dot dimension numbers {a}")
    return [[int(x) for x in g.split(",") if x.strip()] for g in groups]


@rule("tpu.matmul")
def _matmul(t: Translator, op: ir.Operation) -> None:
    """acc + lhs·rhs.  The product is computed in f32 (precision HIGHEST), what Pallas'
    interpreter gives and `#tpu.contract_precision<fp32>` asks; `<bf16>` rounds f32
    operands to bf16 first, as the TPU's single-pass matmul does."""
    lhs, rhs, acc = (t.value(v) for v in op.operands)
    precision = attr(op, "precision")
    if precision is not None and "bf16" in str(precision):
        lhs, rhs = (_round_to_bf16(x) for x in (lhs, rhs))
    out_type = tensor_type(op.results[0].type)
    dn = attr(op, "dimension_numbers")
    if dn is not None:
        lc, rc, lnc, rnc, order, lb, rb = _dot_dimension_numbers(dn)
    else:  # the older form: plain 2-D matmul with optional transposes
        lc, rc, lnc, rnc, lb, rb = [1], [0], [0], [1], [], []
        if "transpose_lhs" in op.attributes and ir.BoolAttr(op.attributes["transpose_lhs"]).value:
            lc, lnc = [0], [1]
        if "transpose_rhs" in op.attributes and ir.BoolAttr(op.attributes["transpose_rhs"]).value:
            rc, rnc = [1], [0]
        order = [0, lnc[0], 1, rnc[0]]
    element = out_type.element_type
    product = builders.op1("stablehlo.dot_general", ir.RankedTensorType.get(
        [builders.shape_of(lhs)[i] for i in lb] + [builders.shape_of(lhs)[i] for i in lnc] + [builders.shape_of(rhs)[i] for i in rnc],
        element), [lhs, rhs], {
        "dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=lb, rhs_batching_dimensions=rb,
            lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc),
        "precision_config": ir.ArrayAttr.get([stablehlo.PrecisionAttr.get("HIGHEST")] * 2)})
    # Mosaic's verifier admits only dot_general's own output order: batch dims, lhs free
    # dims, rhs free dims.
    natural = [(0, d) for d in lb] + [(0, d) for d in lnc] + [(1, d) for d in rnc]
    pairs = list(zip(order[::2], order[1::2]))
    if pairs and pairs != natural:
        raise KernelError(f"tpu.matmul output order {pairs} differs from {natural}")
    t.set(op.results[0], builders.binary("add", acc, product))


def _affine_results(a: ir.Attribute) -> list[int]:
    """The dims an indexing map `affine_map<(d0, d1, d2) -> (d0, d2)>` selects."""
    m = re.fullmatch(r"affine_map<\(([^)]*)\) -> \(([^)]*)\)>", str(a).strip())
    if not m:
        raise KernelError(f"indexing map {a} is not a projection")
    names = [x.strip() for x in m.group(1).split(",") if x.strip()]
    try:
        return [names.index(x.strip()) for x in m.group(2).split(",") if x.strip()]
    except ValueError:
        raise KernelError(f"indexing map {a} is not a projection") from None


@rule("vector.contract")
def _contract(t: Translator, op: ir.Operation) -> None:
    """acc + Σ lhs·rhs over the reduction iterators, dims named by the indexing maps
    (the form older Pallas versions emit for dots)."""
    lhs, rhs, acc = (t.value(v) for v in op.operands[:3])
    if len(op.operands) > 3:
        raise KernelError("a masked vector.contract is not supported")
    if "kind" in op.attributes and "add" not in str(op.attributes["kind"]):
        raise KernelError(f"vector.contract of kind {op.attributes['kind']}")
    lmap, rmap, amap = (_affine_results(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"]))
    reductions = {i for i, it in enumerate(ir.ArrayAttr(op.attributes["iterator_types"])) if "reduction" in str(it)}
    batch = [d for d in lmap if d in rmap and d not in reductions]
    contract = [d for d in lmap if d in rmap and d in reductions]
    if any(d in reductions for d in amap) or set(lmap) & reductions - set(rmap) or set(rmap) & reductions - set(lmap):
        raise KernelError("vector.contract reducing a dim of only one operand")
    product = builders.dot_general(lhs, rhs, builders.element_type_of(acc), [lmap.index(d) for d in batch],
                            [rmap.index(d) for d in batch], [lmap.index(d) for d in contract],
                            [rmap.index(d) for d in contract])
    natural = batch + [d for d in lmap if d not in rmap] + [d for d in rmap if d not in lmap]
    if sorted(natural) != sorted(amap):
        raise KernelError("vector.contract whose result dims are not its operands' free dims")
    if natural != amap:
        product = builders.transpose(product, [natural.index(d) for d in amap])
    t.set(op.results[0], builders.binary("add", acc, product))


@rule("vector.extract_strided_slice")
def _extract_strided_slice(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    offsets, sizes = int_list(op.attributes["offsets"]), int_list(op.attributes["sizes"])
    strides = int_list(op.attributes["strides"])
    shape = builders.shape_of(x)
    n = len(offsets)
    start = offsets + [0] * (len(shape) - n)
    limit = [o + (s - 1) * st + 1 for o, s, st in zip(offsets, sizes, strides)] + shape[n:]
    t.set(op.results[0], builders.slice_(x, start, limit, strides + [1] * (len(shape) - n)))


@rule("vector.insert_strided_slice")
def _insert_strided_slice(t: Translator, op: ir.Operation) -> None:
    source, dest = (t.value(v) for v in op.operands)
    offsets = int_list(op.attributes["offsets"])
    if any(s != 1 for s in int_list(op.attributes["strides"])):
        raise KernelError("vector.insert_strided_slice with strides")
    src_shape, dest_shape = builders.shape_of(source), builders.shape_of(dest)
    source = builders.reshape(source, [1] * (len(dest_shape) - len(src_shape)) + src_shape)
    starts = [builders.scalar_constant(o, ir.IntegerType.get_signless(32)) for o in offsets]
    t.set(op.results[0], builders.dynamic_update_slice(dest, source, starts))


@rule("vector.extract")
def _extract(t: Translator, op: ir.Operation) -> None:
    x = t.value(op.operands[0])
    position = int_list(op.attributes["static_position"])
    if len(op.operands) > 1 or any(p < 0 for p in position):
        raise KernelError("vector.extract at a dynamic position")
    shape = builders.shape_of(x)
    n = len(position)
    piece = builders.slice_(x, position + [0] * (len(shape) - n), [p + 1 for p in position] + shape[n:])
    t.set(op.results[0], builders.reshape(piece, list(tensor_type(op.results[0].type).shape)))


@rule("tpu.concatenate")
def _concatenate(t: Translator, op: ir.Operation) -> None:
    dim = int(ir.IntegerAttr(op.attributes["dimension"]).value)
    t.set(op.results[0], builders.concatenate([t.value(v) for v in op.operands], dim))


@rule("tpu.dynamic_rotate")
def _rotate(t: Translator, op: ir.Operation) -> None:
    """Roll by `amount` along `dimension` (jnp.roll's direction): a window of the
    operand repeated twice."""
    x = t.value(op.operands[0])
    dim = int(ir.IntegerAttr(op.attributes["dimension"]).value)
    if "stride" in op.attributes:
        raise KernelError("a strided rotate is not supported")
    n = builders.shape_of(x)[dim]
    amount = t.value(op.operands[1])
    i32 = ir.IntegerType.get_signless(32)
    shift = builders.binary("remainder", builders.convert(amount, i32) if builders.element_type_of(amount) != i32 else amount,
                     builders.scalar_constant(n, i32))
    start = builders.binary("remainder", builders.binary("subtract", builders.scalar_constant(n, i32), shift), builders.scalar_constant(n, i32))
    zero = builders.scalar_constant(0, i32)
    starts = [start if d == dim else zero for d in range(len(builders.shape_of(x)))]
    t.set(op.results[0], builders.dynamic_slice(builders.concatenate([x, x], dim), starts, builders.shape_of(x)))
