"""cusparse: jaxlib's GPU cuSPARSE calls → jaxlib's CPU LAPACK calls or plain StableHLO.

`cusparse_gtsv2_ffi` (dl, d, du, b) → x (lax.linalg.tridiagonal_solve on GPU, hip:
`hipsparse_gtsv2_ffi`): the tridiagonal system with sub-, main and super-diagonals dl, d,
du (dl[0] and du[m−1] not read) for each column of b, as jaxlib's jaxlib/gpu/sparse_kernels.cc
calls cuSPARSE's gtsv2.  JAX's CPU lowering of the same primitive is LAPACK's gtsv
(`lapack_?gtsv_ffi`, which reads dl from dl[1], as cuSPARSE does) with the solution NaN
where gtsv reports a singular system; the rewrite is that call.  (cuSPARSE does not report
singularity: its result for a singular system is whatever its divisions by zero give.)

jax.experimental.sparse's CSR and COO calls (`cusparse_{csr,coo}_{todense,fromdense,matvec,
matmat}_ffi`, hip: `hipsparse_*`) carry their meaning partly in `opaque`, the descriptor
jaxlib packs (jaxlib/gpu/sparse_kernels.h; native 4-byte ints): SparseMatDescriptor (value
type, index type, rows, cols, nnz, batch count, batch stride), then for matvec two
DenseVecDescriptors (type, size) and the cuSPARSE operation (0: A, 1: Aᵀ), for matmat two
DenseMatDescriptors (type, rows, cols, batch count, batch stride) and the operation.  The
last result is cuSPARSE's workspace (must be unused).  In plain StableHLO:
- todense: a scatter-add of data at (row, col) into zeros (entries stored twice are summed;
  CSR rows from indptr: entry j is in row r where indptr[r] <= j < indptr[r+1]; entries
  outside [indptr[0], indptr[rows]) or out of bounds are not stored);
- matvec / matmat: the dense matrix (as todense) times the operand, or its transpose;
- fromdense: the nonzeros in row-major order (a stable sort of positions by "is zero"), the
  first nnz of them; cuSPARSE leaves the slots past the matrix's count of nonzeros unwritten:
  here they hold data 0 and indices 0, as JAX's CPU implementation writes them
  (jax/experimental/sparse/coo.py, csr.py `_*_fromdense_impl`); CSR's indptr counts the kept
  entries per row.
"""

from __future__ import annotations

import struct

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.lapack import jaxlib_cpu_call, lapack_letter
from passes.lib.registry import PassOptions, register_pass

GTSV2_TARGETS = ("cusparse_gtsv2_ffi", "hipsparse_gtsv2_ffi")
SPARSE_KINDS = ("todense", "fromdense", "matvec", "matmat")
SPARSE_TARGETS = tuple(f"{vendor}_{fmt}_{kind}_ffi" for vendor in ("cusparse", "hipsparse") for fmt in ("csr", "coo")
                       for kind in SPARSE_KINDS)
SPARSE_MAT_BYTES, DENSE_VEC_BYTES, DENSE_MAT_BYTES = 28, 8, 20


@register_pass("cusparse", "cuSPARSE calls: tridiagonal solves (gtsv2) → jaxlib's CPU LAPACK gtsv; CSR/COO "
                           "to/from dense and products → scatters, sorts and dots",
               targets=GTSV2_TARGETS + SPARSE_TARGETS)
def lower_cusparse(module: ir.Module, options: PassOptions) -> None:
    for op in rewrite.custom_calls(module, GTSV2_TARGETS):
        lower_gtsv2(op)
    for op in rewrite.custom_calls(module, SPARSE_TARGETS):
        lower_sparse(op)


def _descriptor(op: ir.Operation) -> bytes:
    for key in ("mhlo.backend_config", "backend_config"):
        if key in op.attributes and isinstance(op.attributes[key], ir.DictAttr):
            config = ir.DictAttr(op.attributes[key])
            if "opaque" in config:
                return ir.StringAttr(config["opaque"]).value_bytes
    raise rewrite.op_error(op, "has no `opaque` descriptor in its backend_config")


def lower_sparse(op: ir.Operation) -> None:
    _, fmt, kind, _ = rewrite.call_target(op).split("_")
    opaque = _descriptor(op)
    if len(opaque) < SPARSE_MAT_BYTES:
        raise rewrite.op_error(op, f"descriptor of {len(opaque)} bytes, expected at least {SPARSE_MAT_BYTES}")
    _, _, rows, cols, nnz, batch_count, _ = struct.unpack_from("=7i", opaque)
    if batch_count != 1:
        raise rewrite.op_error(op, f"batched cuSPARSE calls (batch count {batch_count}) are not supported")
    results = list(op.results)
    if rewrite.has_uses(results[-1]):
        raise rewrite.op_error(op, "its workspace result (the last) is used")
    with rewrite.at(op):
        if kind == "fromdense":
            values = _fromdense(op, fmt, rows, cols, nnz)
        else:
            data, first, second, *rest = list(op.operands)
            row, col = (_csr_rows(first, second, rows), first) if fmt == "csr" else (first, second)
            dense = _scatter_add(data, row, col, rows, cols)
            if kind == "todense":
                values = [dense]
            else:
                offset = SPARSE_MAT_BYTES + 2 * (DENSE_VEC_BYTES if kind == "matvec" else DENSE_MAT_BYTES)
                if len(opaque) < offset + 4:
                    raise rewrite.op_error(op, f"descriptor of {len(opaque)} bytes, expected {offset + 4}")
                (operation,) = struct.unpack_from("=i", opaque, offset)
                if operation not in (0, 1):
                    raise rewrite.op_error(op, f"cuSPARSE operation {operation} (conjugate transpose) is not supported")
                (x,) = rest
                values = [_product(dense, x, transpose=operation == 1, result_type=results[0].type)]
    rewrite.replace(op, values + [None])


def _csr_rows(indices: ir.Value, indptr: ir.Value, rows: int) -> ir.Value:
    """The row of each stored entry j: #{r in 0..rows : indptr[r] <= j} − 1 (rows where j is
    past indptr[rows], −1 before indptr[0]: both out of bounds, so not stored)."""
    (nnz,) = builders.shape_of(indices)
    s32 = ir.IntegerType.get_signless(32)
    ptr = builders.convert(indptr, s32)
    j = builders.iota(s32, [nnz, rows + 1], 0)
    started = builders.compare(builders.broadcast_in_dim(ptr, [nnz, rows + 1], [1]), j, "LE", "SIGNED")
    count = builders.reduce(builders.convert(started, s32), [1], "add", 0)
    return builders.convert(builders.binary("subtract", count, builders.scalar_constant(1, s32, [nnz])),
                            builders.element_type_of(indices))


def _scatter_add(data: ir.Value, row: ir.Value, col: ir.Value, rows: int, cols: int) -> ir.Value:
    """zeros[rows, cols] with data[j] added at (row[j], col[j]); out-of-bounds entries dropped."""
    (nnz,) = builders.shape_of(data)
    element = builders.element_type_of(data)
    s32 = ir.IntegerType.get_signless(32)
    row, col = builders.convert(row, s32), builders.convert(col, s32)
    valid = None
    for index, bound in ((row, rows), (col, cols)):
        inside = builders.binary("and", builders.compare(index, builders.scalar_constant(0, s32, [nnz]), "GE", "SIGNED"),
                                 builders.compare(index, builders.scalar_constant(bound, s32, [nnz]), "LT", "SIGNED"))
        valid = inside if valid is None else builders.binary("and", valid, inside)
    zero_i = builders.scalar_constant(0, s32, [nnz])
    row, col = builders.select(valid, row, zero_i), builders.select(valid, col, zero_i)
    data = builders.select(valid, data, builders.scalar_constant(0, element, [nnz]))
    indices = builders.concatenate([builders.reshape(row, [nnz, 1]), builders.reshape(col, [nnz, 1])], 1)
    zeros = builders.scalar_constant(0, element, [rows, cols])
    numbers = stablehlo.ScatterDimensionNumbers.get(
        update_window_dims=[], inserted_window_dims=[0, 1], input_batching_dims=[], scatter_indices_batching_dims=[],
        scattered_dims_to_operand_dims=[0, 1], index_vector_dim=1)
    scatter = builders.op("stablehlo.scatter", [zeros.type], [zeros, indices, data],
                          {"scatter_dimension_numbers": numbers, "indices_are_sorted": ir.BoolAttr.get(False),
                           "unique_indices": ir.BoolAttr.get(False)}, regions=1)
    scalar_t = ir.RankedTensorType.get([], element)
    block = scatter.regions[0].blocks.append(scalar_t, scalar_t)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp([builders.binary("add", block.arguments[0], block.arguments[1])])
    return scatter.results[0]


def _product(dense: ir.Value, x: ir.Value, *, transpose: bool, result_type: ir.Type) -> ir.Value:
    """op(A) · x for a vector or matrix x (cuSPARSE's TRANSPOSE: Aᵀ, not conjugated)."""
    numbers = stablehlo.DotDimensionNumbers.get(lhs_batching_dimensions=[], rhs_batching_dimensions=[],
                                                lhs_contracting_dimensions=[0 if transpose else 1],
                                                rhs_contracting_dimensions=[0])
    return builders.op1("stablehlo.dot_general", result_type, [dense, x], {"dot_dimension_numbers": numbers})


def _fromdense(op: ir.Operation, fmt: str, rows: int, cols: int, nnz: int) -> list[ir.Value]:
    (mat,) = list(op.operands)
    if builders.shape_of(mat) != [rows, cols]:
        raise rewrite.op_error(op, f"descriptor says {rows}x{cols}, the operand is {mat.type}")
    element = builders.element_type_of(mat)
    index_t = builders.element_type_of(op.results[1])
    s32 = ir.IntegerType.get_signless(32)
    size = rows * cols
    flat = builders.reshape(mat, [size])
    nonzero = builders.compare(flat, builders.scalar_constant(0, element, [size]), "NE")
    count = builders.reduce(builders.convert(nonzero, s32), [0], "add", 0)
    # positions of the nonzeros first, in order: a stable sort of (is zero, position) by the first
    is_zero = builders.convert(builders.unary("not", nonzero), s32)
    sort = builders.op("stablehlo.sort", [is_zero.type, is_zero.type], [is_zero, builders.iota(s32, [size], 0)],
                       {"dimension": builders.i64_attr(0), "is_stable": ir.BoolAttr.get(True)}, regions=1)
    scalar_t = ir.RankedTensorType.get([], s32)
    block = sort.regions[0].blocks.append(scalar_t, scalar_t, scalar_t, scalar_t)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp([builders.compare(block.arguments[0], block.arguments[1], "LT", "SIGNED")])
    positions = sort.results[1]
    if nnz <= size:
        positions = builders.slice_(positions, [0], [nnz])
    else:
        positions = builders.pad(positions, [0], [nnz - size], builders.scalar_constant(0, s32))
    kept = builders.compare(builders.iota(s32, [nnz], 0), builders.broadcast_in_dim(count, [nnz], []), "LT", "SIGNED")
    zero_i = builders.scalar_constant(0, s32, [nnz])
    positions = builders.select(kept, positions, zero_i)
    data = builders.gather(flat, builders.reshape(positions, [nnz, 1]), [nnz], offset_dims=[], collapsed_slice_dims=[0],
                           start_index_map=[0], index_vector_dim=1, slice_sizes=[1])
    data = builders.select(kept, data, builders.scalar_constant(0, element, [nnz]))
    row = builders.binary("divide", positions, builders.scalar_constant(cols, s32, [nnz]))
    col = builders.binary("remainder", positions, builders.scalar_constant(cols, s32, [nnz]))
    if fmt == "coo":
        return [data, builders.convert(row, index_t), builders.convert(col, index_t)]
    # indptr[r] = #{kept entries in rows < r}
    kept_row = builders.select(kept, row, builders.scalar_constant(rows, s32, [nnz]))
    r = builders.iota(s32, [rows + 1, nnz], 0)
    before = builders.compare(builders.broadcast_in_dim(kept_row, [rows + 1, nnz], [1]), r, "LT", "SIGNED")
    indptr = builders.reduce(builders.convert(before, s32), [1], "add", 0)
    return [data, builders.convert(col, index_t), builders.convert(indptr, index_t)]


def lower_gtsv2(op: ir.Operation) -> None:
    dl, d, du, b = list(op.operands)
    letter = lapack_letter(op, b)
    *batch, m, _ = builders.shape_of(b)
    if any(builders.shape_of(v) != [*batch, m] for v in (dl, d, du)):
        raise rewrite.op_error(op, f"expects diagonals of shape {[*batch, m]} for b of type {b.type}")
    s32 = ir.IntegerType.get_signless(32)
    types = [v.type for v in (dl, d, du, b)] + [ir.RankedTensorType.get(batch, s32)]
    with rewrite.at(op):
        *_, x, info = jaxlib_cpu_call(f"lapack_{letter}gtsv_ffi", [dl, d, du, b], types,
                                      aliases={0: 0, 1: 1, 2: 2, 3: 3})
        ok = builders.compare(info, builders.scalar_constant(0, s32, batch), "EQ", "SIGNED")
        rank = len(batch) + 2
        nan = builders.scalar_constant(float("nan"), builders.element_type_of(b), builders.shape_of(b)) \
            if letter in "sd" else _complex_nan(b)
        x = builders.select(builders.broadcast_in_dim(ok, builders.shape_of(b), list(range(rank - 2))), x, nan)
    rewrite.replace(op, [x])


def _complex_nan(like: ir.Value) -> ir.Value:
    shape = builders.shape_of(like)
    part = ir.ComplexType(builders.element_type_of(like)).element_type
    nan = builders.scalar_constant(float("nan"), part, shape)
    return builders.op1("stablehlo.complex", like.type, [nan, nan])
