"""Small builders shared by the import rules (and by passes that build StableHLO).

All ops are created with explicit result types through `ir.Operation.create`: no type
inference runs, which keeps import fast and the types exactly those of the dump.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo


def op(name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
       attributes: dict[str, ir.Attribute] | None = None, regions: int = 0) -> ir.Operation:
    return ir.Operation.create(name, results=list(results), operands=list(operands),
                               attributes=attributes, regions=regions)


def op1(name: str, result: ir.Type, operands: Sequence[ir.Value],
        attributes: dict[str, ir.Attribute] | None = None) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=list(operands), attributes=attributes).result


def i64_array(values: Iterable[int]) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def bool_array(values: Iterable[bool]) -> ir.Attribute:
    return ir.DenseBoolArrayAttr.get([bool(v) for v in values])


def i64_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def i32_attr(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def i64_elements(values: np.ndarray | Sequence[Sequence[int]], shape: Sequence[int] | None = None) -> ir.Attribute:
    arr = np.asarray(values, dtype=np.int64)
    if shape is not None:
        arr = arr.reshape(shape)
    t = ir.RankedTensorType.get(list(arr.shape), ir.IntegerType.get_signless(64))
    if arr.size == 0:
        return ir.DenseElementsAttr.get(np.zeros(arr.shape, np.int64), type=t.element_type, shape=list(arr.shape))
    return ir.DenseIntElementsAttr.get(arr, type=t)


def tensor_type_like(value: ir.Value, shape: Sequence[int] | None = None, element: ir.Type | None = None) -> ir.Type:
    t = ir.RankedTensorType(value.type)
    return ir.RankedTensorType.get(list(t.shape) if shape is None else list(shape),
                                   t.element_type if element is None else element)


def bounded_type(dims: list[int], dynamic: list[bool], element: ir.Type) -> ir.Type:
    """A ranked tensor type whose `dynamic` dimensions are bounded by `dims` (a negative
    bound: unbounded, `?`)."""
    if not any(dynamic):
        return ir.RankedTensorType.get(dims, element)
    unknown = ir.ShapedType.get_dynamic_size()
    shape = [unknown if d else s for s, d in zip(dims, dynamic)]
    bounds = ", ".join(str(s) if d and s >= 0 else "?" for s, d in zip(dims, dynamic))
    return ir.RankedTensorType.get(shape, element, ir.Attribute.parse(f"#stablehlo.bounds<{bounds}>"))


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def element_type_of(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def reshape(x: ir.Value, dims: Sequence[int]) -> ir.Value:
    if shape_of(x) == list(dims):
        return x
    return op1("stablehlo.reshape", tensor_type_like(x, dims), [x])


def transpose(x: ir.Value, perm: Sequence[int]) -> ir.Value:
    """Transpose, written as a reshape when it only moves dimensions of size 1."""
    perm = list(perm)
    if perm == list(range(len(perm))):
        return x
    dims = shape_of(x)
    new_dims = [dims[p] for p in perm]
    if [p for p in perm if dims[p] != 1] == sorted(p for p in perm if dims[p] != 1):
        return reshape(x, new_dims)
    return op1("stablehlo.transpose", tensor_type_like(x, new_dims), [x], {"permutation": i64_array(perm)})


def broadcast_in_dim(x: ir.Value, dims: Sequence[int], broadcast_dimensions: Sequence[int]) -> ir.Value:
    return op1("stablehlo.broadcast_in_dim", tensor_type_like(x, dims), [x],
               {"broadcast_dimensions": i64_array(broadcast_dimensions)})


def convert(x: ir.Value, element: ir.Type) -> ir.Value:
    source = element_type_of(x)
    if source == element:
        return x
    if _sign_change(source, element):
        # s32 <-> u32 (any width): a convert wraps modulo 2^n, which is the same bits.
        # bitcast_convert says so, and IREE compiles it where it miscompiles the convert.
        return op1("stablehlo.bitcast_convert", tensor_type_like(x, element=element), [x])
    return op1("stablehlo.convert", tensor_type_like(x, element=element), [x])


def _sign_change(source: ir.Type, target: ir.Type) -> bool:
    if not (isinstance(source, ir.IntegerType) and isinstance(target, ir.IntegerType)):
        return False
    s, t = ir.IntegerType(source), ir.IntegerType(target)
    return s.width == t.width and s.width > 1


def real_part(x: ir.Value) -> ir.Value:
    """The real part of a complex tensor."""
    return op1("stablehlo.real", _part_type(x), [x])


def imag_part(x: ir.Value) -> ir.Value:
    """The imaginary part of a complex tensor."""
    return op1("stablehlo.imag", _part_type(x), [x])


def _part_type(x: ir.Value) -> ir.Type:
    t = ir.RankedTensorType(x.type)
    return ir.RankedTensorType.get(list(t.shape), ir.ComplexType(t.element_type).element_type)


def mask_constant(mask: np.ndarray) -> ir.Value:
    """A pred constant holding a NumPy boolean array."""
    i1 = ir.IntegerType.get_signless(1)
    return op1("stablehlo.constant", ir.RankedTensorType.get(list(mask.shape), i1), [], {
        "value": ir.DenseElementsAttr.get(np.asarray(mask, dtype=bool), type=i1, shape=list(mask.shape))})


def layout_attr(minor_to_major: Sequence[int]) -> ir.Attribute:
    """A layout as custom-call operand/result layouts hold it (minor to major, index type)."""
    t = ir.RankedTensorType.get([len(minor_to_major)], ir.IndexType.get())
    return ir.DenseElementsAttr.get(np.asarray(list(minor_to_major), dtype=np.int64), type=t)


def slice_(x: ir.Value, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None) -> ir.Value:
    strides = list(strides) if strides is not None else [1] * len(start)
    dims = [(hi - lo + s - 1) // s for lo, hi, s in zip(start, limit, strides)]
    return op1("stablehlo.slice", tensor_type_like(x, dims), [x], {
        "start_indices": i64_array(start), "limit_indices": i64_array(limit), "strides": i64_array(strides)})


def concatenate(values: Sequence[ir.Value], dimension: int) -> ir.Value:
    if len(values) == 1:
        return values[0]
    dims = shape_of(values[0])
    dims[dimension] = sum(shape_of(v)[dimension] for v in values)
    return op1("stablehlo.concatenate", tensor_type_like(values[0], dims), values, {"dimension": i64_attr(dimension)})


def binary(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return op1(f"stablehlo.{name}", a.type, [a, b])


def unary(name: str, a: ir.Value) -> ir.Value:
    return op1(f"stablehlo.{name}", a.type, [a])


def compare(a: ir.Value, b: ir.Value, direction: str, compare_type: str | None = None) -> ir.Value:
    attrs = {"comparison_direction": stablehlo.ComparisonDirectionAttr.get(direction)}
    if compare_type:
        attrs["compare_type"] = stablehlo.ComparisonTypeAttr.get(compare_type)
    return op1("stablehlo.compare", tensor_type_like(a, element=ir.IntegerType.get_signless(1)), [a, b], attrs)


def select(pred: ir.Value, on_true: ir.Value, on_false: ir.Value) -> ir.Value:
    return op1("stablehlo.select", on_true.type, [pred, on_true, on_false])


def integer_attr(element: ir.Type, value: int | bool) -> ir.Attribute:
    """An integer attribute of any width and signedness: unsigned and pred values are
    taken modulo 2^width, and passed to the binding as the signed 64-bit value of the
    same bits (it refuses a Python int above 2^63 - 1: u64 max)."""
    width = ir.IntegerType(element).width
    v = int(value)
    if ir.IntegerType(element).is_unsigned or width == 1:
        v &= (1 << width) - 1
        if width == 64 and v >= 1 << 63:
            v -= 1 << 64
    return ir.IntegerAttr.get(element, v)


def scalar_constant(value: float | int | bool, element: ir.Type, shape: Sequence[int] = ()) -> ir.Value:
    """A splat constant of any element type."""
    t = ir.RankedTensorType.get(list(shape), element)
    if isinstance(element, ir.IntegerType):
        attr = integer_attr(element, value)
    elif isinstance(element, ir.ComplexType):
        inner = ir.ComplexType(element).element_type
        dtype = np.complex64 if isinstance(inner, ir.F32Type) else np.complex128
        return op1("stablehlo.constant", t, [], {
            "value": ir.DenseElementsAttr.get(np.full(list(shape) or [], value, dtype=dtype), type=element)})
    else:
        attr = ir.FloatAttr.get(element, float(value))
    return op1("stablehlo.constant", t, [], {"value": ir.DenseElementsAttr.get_splat(t, attr)})


def zeros_like_type(t: ir.Type) -> ir.Value:
    """A zero of a tensor type (or a fresh token for the token type)."""
    if isinstance(t, stablehlo.TokenType):
        return op1("stablehlo.after_all", t, [])
    rt = ir.RankedTensorType(t)
    return scalar_constant(0, rt.element_type, rt.shape)


def iota(element: ir.Type, shape: Sequence[int], dimension: int) -> ir.Value:
    return op1("stablehlo.iota", ir.RankedTensorType.get(list(shape), element), [], {"iota_dimension": i64_attr(dimension)})


def replica_groups_attr(groups: Sequence[Sequence[int]]) -> ir.Attribute:
    """Replica groups as StableHLO writes them: a 2-D i64 tensor, short groups padded
    with -1; no groups (XLA's `{}`: everyone in one group) is a 0x0 tensor."""
    if not groups:
        t = ir.RankedTensorType.get([0, 0], ir.IntegerType.get_signless(64))
        return ir.DenseElementsAttr.get(np.zeros((0, 0), np.int64), type=t.element_type, shape=[0, 0])
    width = max(len(g) for g in groups)
    arr = np.full((len(groups), width), -1, dtype=np.int64)
    for i, g in enumerate(groups):
        arr[i, : len(g)] = g
    return i64_elements(arr)


def channel_handle(handle: int, kind: int = 1) -> ir.Attribute:
    """`#stablehlo.channel_handle`; kind 1 is DEVICE_TO_DEVICE, 2/3 host transfers."""
    return stablehlo.ChannelHandle.get(int(handle), int(kind))


def reduce(x: ir.Value, dimensions: Sequence[int], body: str = "add", init: float | int = 0) -> ir.Value:
    """Reduce `x` over `dimensions` with a binary StableHLO op (add, maximum, ...)."""
    et = element_type_of(x)
    dims = shape_of(x)
    out_dims = [d for i, d in enumerate(dims) if i not in set(dimensions)]
    scalar = ir.RankedTensorType.get([], et)
    reduce_op = op("stablehlo.reduce", [ir.RankedTensorType.get(out_dims, et)],
                   [x, scalar_constant(init, et)], {"dimensions": i64_array(sorted(dimensions))}, regions=1)
    block = reduce_op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        op("stablehlo.return", [], [binary(body, block.arguments[0], block.arguments[1])])
    return reduce_op.result


def while_loop(init: Sequence[ir.Value], cond, body) -> list[ir.Value]:
    """`stablehlo.while` over loop values `init`: `cond(*values) -> i1 scalar value` and
    `body(*values) -> list of new values`, both building at the insertion point they get."""
    types = [v.type for v in init]
    loop = op("stablehlo.while", types, list(init), regions=2)
    cond_block = loop.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        op("stablehlo.return", [], [cond(*cond_block.arguments)])
    body_block = loop.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        op("stablehlo.return", [], body(*body_block.arguments))
    return list(loop.results)


def dynamic_slice(x: ir.Value, starts: Sequence[ir.Value], sizes: Sequence[int]) -> ir.Value:
    return op1("stablehlo.dynamic_slice", tensor_type_like(x, sizes), [x, *starts],
               {"slice_sizes": i64_array(sizes)})


def dynamic_update_slice(x: ir.Value, update: ir.Value, starts: Sequence[ir.Value]) -> ir.Value:
    return op1("stablehlo.dynamic_update_slice", x.type, [x, update, *starts])


def dot_operands(lhs: ir.Value, rhs: ir.Value, result_element: ir.Type, batched: bool) -> tuple[ir.Value, ir.Value]:
    """The operands a dot_general gets.  XLA's CPU runtime has no kernel for batched
    bf16 x bf16 -> f32 dots in many dimension orders (jaxlib 0.10.2: "Unsupported element
    type for DotThunk::Execute: BF16 x BF16 = F32", e.g. for the [splits, k, m] operands of
    a GPU split-K GEMM); with f32 operands every order runs.  Converting is exact: bf16
    values and the products of two of them are exact in f32, so the f32 dot accumulates
    the same products in f32, which is what the bf16 dot with an f32 result means."""
    bf16, f32 = ir.BF16Type.get(), ir.F32Type.get()
    if batched and result_element == f32 and element_type_of(lhs) == bf16 and element_type_of(rhs) == bf16:
        return convert(lhs, f32), convert(rhs, f32)
    return lhs, rhs


def dot_general(lhs: ir.Value, rhs: ir.Value, result_element: ir.Type, lhs_batch: Sequence[int],
                rhs_batch: Sequence[int], lhs_contract: Sequence[int], rhs_contract: Sequence[int]) -> ir.Value:
    """dot_general with its natural result order (batch, lhs free, rhs free)."""
    lhs, rhs = dot_operands(lhs, rhs, result_element, bool(lhs_batch))
    ls, rs = shape_of(lhs), shape_of(rhs)
    free_l = [d for i, d in enumerate(ls) if i not in lhs_batch and i not in lhs_contract]
    free_r = [d for i, d in enumerate(rs) if i not in rhs_batch and i not in rhs_contract]
    out = ir.RankedTensorType.get([ls[i] for i in lhs_batch] + free_l + free_r, result_element)
    return op1("stablehlo.dot_general", out, [lhs, rhs], {
        "dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
            lhs_contracting_dimensions=list(lhs_contract), rhs_contracting_dimensions=list(rhs_contract))})


def gather(operand: ir.Value, start_indices: ir.Value, result_shape: Sequence[int], *, offset_dims: Sequence[int],
           collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int], index_vector_dim: int,
           slice_sizes: Sequence[int], indices_are_sorted: bool = False) -> ir.Value:
    """`stablehlo.gather` (no batching dims); the caller states the result shape."""
    dims = stablehlo.GatherDimensionNumbers.get(
        offset_dims=list(offset_dims), collapsed_slice_dims=list(collapsed_slice_dims), operand_batching_dims=[],
        start_indices_batching_dims=[], start_index_map=list(start_index_map), index_vector_dim=index_vector_dim)
    return op1("stablehlo.gather", tensor_type_like(operand, result_shape), [operand, start_indices], {
        "dimension_numbers": dims, "slice_sizes": i64_array(slice_sizes),
        "indices_are_sorted": ir.BoolAttr.get(indices_are_sorted)})


def pad(x: ir.Value, low: Sequence[int], high: Sequence[int], value: ir.Value | None = None,
        interior: Sequence[int] | None = None) -> ir.Value:
    """`stablehlo.pad` with `value` (a scalar; zero of x's type when None)."""
    interior = list(interior) if interior is not None else [0] * len(low)
    dims = [lo + d + hi + max(d - 1, 0) * it for d, lo, hi, it in zip(shape_of(x), low, high, interior)]
    value = value if value is not None else scalar_constant(0, element_type_of(x))
    return op1("stablehlo.pad", tensor_type_like(x, dims), [x, value], {
        "edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high), "interior_padding": i64_array(interior)})


def clamp(lo: ir.Value, x: ir.Value, hi: ir.Value) -> ir.Value:
    """`stablehlo.clamp`: lo and hi are scalars or of x's shape."""
    return op1("stablehlo.clamp", x.type, [lo, x, hi])


def conv_dimension_numbers(labels) -> ir.Attribute:
    """`#stablehlo.conv<...>` from HLO dim_labels (a converter.hlo.attrs.ConvDimLabels)."""
    return stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=labels.input_batch, input_feature_dimension=labels.input_feature,
        input_spatial_dimensions=list(labels.input_spatial),
        kernel_input_feature_dimension=labels.kernel_input_feature,
        kernel_output_feature_dimension=labels.kernel_output_feature,
        kernel_spatial_dimensions=list(labels.kernel_spatial),
        output_batch_dimension=labels.output_batch, output_feature_dimension=labels.output_feature,
        output_spatial_dimensions=list(labels.output_spatial))


def cholesky(a: ir.Value, lower: bool = True) -> ir.Value:
    """The Cholesky factor of a batch of Hermitian positive-definite matrices in plain ops:
    one loop step per column, L[:, j] = (A[:, j] - L · conj(L[j, :])) / L[j, j] below the
    diagonal.  Reads only the `lower` (else upper) triangle; the other one of the result is
    zero.  Equivalent to `stablehlo.cholesky`, which not every StableHLO compiler takes
    (IREE does not); a matrix that is not positive definite gets NaNs from its first
    failing column on, as XLA's expansion gives."""
    shape = shape_of(a)
    *batch, n, _ = shape
    nb = len(batch)
    et = element_type_of(a)
    is_complex = isinstance(et, ir.ComplexType)
    swap = list(range(nb)) + [nb + 1, nb]

    def adjoint(x: ir.Value) -> ir.Value:
        x = transpose(x, swap)
        return conj(x) if is_complex else x

    if not lower:  # the upper triangle of A is the conjugated lower one of Aᴴ
        a = adjoint(a)
    s32 = ir.IntegerType.get_signless(32)
    zero = scalar_constant(0, s32)
    rows = iota(s32, batch + [n], nb)

    def cond(j, factor):
        return compare(j, scalar_constant(n, s32), "LT", "SIGNED")

    def body(j, factor):
        row = reshape(dynamic_slice(factor, [zero] * nb + [j, zero], batch + [1, n]), batch + [n])
        row = conj(row) if is_complex else row
        done = dot_general(factor, row, et, list(range(nb)), list(range(nb)), [nb + 1], [nb])
        column = reshape(dynamic_slice(a, [zero] * nb + [zero, j], batch + [n, 1]), batch + [n])
        v = binary("subtract", column, done)
        pivot = reshape(dynamic_slice(v, [zero] * nb + [j], batch + [1]), batch)
        if is_complex:  # the pivot of a Hermitian matrix is real
            root = unary("sqrt", real_part(pivot))
            diag = op1("stablehlo.complex", pivot.type, [root, zeros_like_type(root.type)])
        else:
            diag = unary("sqrt", pivot)
        spread = broadcast_in_dim(diag, batch + [n], list(range(nb)))
        at = broadcast_in_dim(j, batch + [n], [])
        new = select(compare(rows, at, "GT", "SIGNED"), binary("divide", v, spread),
                     select(compare(rows, at, "EQ", "SIGNED"), spread, scalar_constant(0, et, batch + [n])))
        factor = dynamic_update_slice(factor, reshape(new, batch + [n, 1]), [zero] * nb + [zero, j])
        return [binary("add", j, scalar_constant(1, s32)), factor]

    _, factor = while_loop([zero, scalar_constant(0, et, shape)], cond, body)
    return factor if lower else adjoint(factor)


def conj(x: ir.Value) -> ir.Value:
    """The complex conjugate."""
    return op1("stablehlo.complex", x.type, [real_part(x), unary("negate", imag_part(x))])


def triangular_solve(a: ir.Value, rhs: ir.Value, *, left_side: bool, lower: bool, transpose_a: str = "NO_TRANSPOSE",
                     unit_diagonal: bool = False) -> ir.Value:
    """`stablehlo.triangular_solve` in plain ops: op(A) X = B (left_side) or X op(A) = B,
    op one of NO_TRANSPOSE, TRANSPOSE, ADJOINT, reading only A's `lower` (else upper)
    triangle, its diagonal taken as ones when `unit_diagonal`.  Brought to a lower,
    left-sided solve (transposes and index reversals) and solved by forward substitution,
    one loop step per row; for compilers that do not take triangular_solve (IREE)."""
    *batch, m, _ = shape_of(a)
    nb = len(batch)
    et = element_type_of(a)
    swap = list(range(nb)) + [nb + 1, nb]
    if transpose_a in ("TRANSPOSE", "ADJOINT"):
        a = transpose(a, swap)
        if transpose_a == "ADJOINT" and isinstance(et, ir.ComplexType):
            a = conj(a)
        lower = not lower
    elif transpose_a != "NO_TRANSPOSE":
        raise ValueError(f"transpose_a {transpose_a}")
    if not left_side:  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        a, rhs, lower = transpose(a, swap), transpose(rhs, swap), not lower
    flip = not lower  # J A J is lower for an upper A (J reverses the order)
    if flip:
        a = op1("stablehlo.reverse", a.type, [a], {"dimensions": i64_array([nb, nb + 1])})
        rhs = op1("stablehlo.reverse", rhs.type, [rhs], {"dimensions": i64_array([nb])})
    k = shape_of(rhs)[-1]
    s32 = ir.IntegerType.get_signless(32)
    full = batch + [m, m]
    rows, cols = iota(s32, full, nb), iota(s32, full, nb + 1)
    strict = select(compare(rows, cols, "GT", "SIGNED"), a, scalar_constant(0, et, full))
    zero = scalar_constant(0, s32)
    spread = list(range(nb))

    def cond(i, x):
        return compare(i, scalar_constant(m, s32), "LT", "SIGNED")

    def body(i, x):
        row = reshape(dynamic_slice(strict, [zero] * nb + [i, zero], batch + [1, m]), batch + [m])
        known = dot_general(row, x, et, spread, spread, [nb], [nb])  # rows past i of x are still zero
        b_i = reshape(dynamic_slice(rhs, [zero] * nb + [i, zero], batch + [1, k]), batch + [k])
        x_i = binary("subtract", b_i, known)
        if not unit_diagonal:
            diag = reshape(dynamic_slice(a, [zero] * nb + [i, i], batch + [1, 1]), batch)
            x_i = binary("divide", x_i, broadcast_in_dim(diag, batch + [k], spread))
        x = dynamic_update_slice(x, reshape(x_i, batch + [1, k]), [zero] * nb + [i, zero])
        return [binary("add", i, scalar_constant(1, s32)), x]

    _, x = while_loop([zero, scalar_constant(0, et, shape_of(rhs))], cond, body)
    if flip:
        x = op1("stablehlo.reverse", x.type, [x], {"dimensions": i64_array([nb])})
    return x if left_side else transpose(x, swap)


def match_float(x: ir.Value, element: ir.Type) -> ir.Value:
    """`x` converted to the floating-point type `element` when it holds another one.  The
    TPU compiler's fusions mix precisions (an f32 padding value for a bf16 pad, an f32
    update into a bf16 buffer, a bf16 operand of an f32 add), which XLA converts
    implicitly and StableHLO requires written out."""
    source = element_type_of(x)
    if source != element and isinstance(source, ir.FloatType) and isinstance(element, ir.FloatType):
        return convert(x, element)
    return x


def block_dequantize(x: ir.Value, scale: ir.Value, element: ir.Type) -> ir.Value:
    """x · scale in `element`, where scale has x's rank and each of its dimensions either
    equals x's or divides it: scale[..., j, ...] then covers the block x[..., j*B:(j+1)*B,
    ...] of B = x_dim / scale_dim consecutive elements (a dimension of size 1 covers all
    of x's).  The MX block-scaled formats' dequantization.  Raises ValueError when the
    shapes do not block."""
    x_shape, s_shape = shape_of(x), shape_of(scale)
    if len(s_shape) != len(x_shape) or any(s == 0 or d % s for s, d in zip(s_shape, x_shape)):
        raise ValueError(f"scale of shape {s_shape} does not block operand {x_shape}")
    # Each scale dimension i becomes (s_i, B_i): broadcast a block axis after it, merge.
    blocked, positions = [], []
    for s, d in zip(s_shape, x_shape):
        positions.append(len(blocked))
        blocked += [s, d // s]
    expanded = broadcast_in_dim(convert(scale, element), blocked, positions)
    return binary("multiply", convert(x, element), reshape(expanded, x_shape))
