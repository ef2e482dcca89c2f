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
DenseMatDescriptors (type, rows, cols, batch count, batch stride) and the operation
(jaxlib writes 0 or 1; 2, Aᴴ, is Aᵀ of the conjugated entries).  Only the COO matmat sets a
strided batch (jaxlib/gpu/sparse_kernels.cc): entries, B and C packed back to back per batch,
or one B for all (`_batched_coo_product`).  The last result is cuSPARSE's workspace (must be
unused).  In plain StableHLO:
- todense: a scatter-add of data at (row, col) into zeros (entries stored twice are summed;
  CSR rows from indptr by binary search: entry j is in row r where indptr[r] <= j <
  indptr[r+1]; entries outside [indptr[0], indptr[rows]) or out of bounds are not stored);
- matvec / matmat: each entry's data times the operand's row `col`, scatter-added into the
  result's row `row` (Aᵀ: row and col exchanged), O(nnz) without a dense A;
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
from passes.lib.descriptors import opaque_bytes
from passes.lib.lapack import jaxlib_cpu_call, lapack_letter
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

GTSV2_TARGETS = ("cusparse_gtsv2_ffi", "hipsparse_gtsv2_ffi")
SPARSE_KINDS = ("todense", "fromdense", "matvec", "matmat")
SPARSE_TARGETS = tuple(f"{vendor}_{fmt}_{kind}_ffi" for vendor in ("cusparse", "hipsparse") for fmt in ("csr", "coo")
                       for kind in SPARSE_KINDS)
SPARSE_MAT_BYTES, DENSE_VEC_BYTES, DENSE_MAT_BYTES = 28, 8, 20


@register_pass("cusparse", "cuSPARSE calls: tridiagonal solves (gtsv2) → jaxlib's CPU LAPACK gtsv; CSR/COO "
                           "to/from dense and products → scatter-adds, gathers and a sort",
               targets=GTSV2_TARGETS + SPARSE_TARGETS, preserves={Fact.USES})
def lower_cusparse(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(GTSV2_TARGETS):
        lower_gtsv2(op)
    for op in walks.custom_calls(SPARSE_TARGETS):
        lower_sparse(op)


def lower_sparse(op: ir.Operation) -> None:
    _, fmt, kind, _ = rewrite.call_target(op).split("_")
    opaque = opaque_bytes(op)
    if len(opaque) < SPARSE_MAT_BYTES:
        raise rewrite.op_error(op, f"descriptor of {len(opaque)} bytes, expected at least {SPARSE_MAT_BYTES}")
    _, _, rows, cols, nnz, batch_count, _ = struct.unpack_from("=7i", opaque)
    if batch_count != 1 and (fmt, kind) != ("coo", "matmat"):
        # jaxlib's kernels set a strided batch only on the COO matmat (jaxlib/gpu/sparse_kernels.cc)
        raise rewrite.op_error(op, f"batched cuSPARSE calls (batch count {batch_count}) are not supported: jaxlib "
                                   f"batches only the COO matmat")
    results = list(op.results)
    if rewrite.has_uses(results[-1]):
        raise rewrite.op_error(op, "its workspace result (the last) is used")
    with rewrite.at(op):
        if kind == "fromdense":
            values = _fromdense(op, fmt, rows, cols, nnz)
        else:
            data, first, second, *rest = list(op.operands)
            row, col = (csr_rows(first, second, rows), first) if fmt == "csr" else (first, second)
            if kind == "todense":
                values = [scatter_add(data, [row, col], [rows, cols])]
            else:
                offset = SPARSE_MAT_BYTES + 2 * (DENSE_VEC_BYTES if kind == "matvec" else DENSE_MAT_BYTES)
                if len(opaque) < offset + 4:
                    raise rewrite.op_error(op, f"descriptor of {len(opaque)} bytes, expected {offset + 4}")
                (operation,) = struct.unpack_from("=i", opaque, offset)
                if operation not in (0, 1, 2):
                    raise rewrite.op_error(op, f"cuSPARSE operation {operation} is none of 0 (A), 1 (Aᵀ), 2 (Aᴴ)")
                (x,) = rest
                if operation == 2 and isinstance(builders.element_type_of(data), ir.ComplexType):
                    data = builders.conj(data)  # Aᴴ: Aᵀ of the conjugated entries
                if batch_count != 1:
                    values = [_batched_coo_product(op, opaque, data, row, col, x, rows, cols, nnz, batch_count,
                                                   transposed=operation != 0)]
                else:
                    if operation != 0:  # Aᵀ: the stored entry (r, c) is (c, r)
                        row, col, rows, cols = col, row, cols, rows
                    values = [_product(data, row, col, x, rows, cols)]
    rewrite.replace(op, values + [None])


def _batched_coo_product(op: ir.Operation, opaque: bytes, data: ir.Value, row: ir.Value, col: ir.Value, x: ir.Value,
                         rows: int, cols: int, nnz: int, batch: int, transposed: bool) -> ir.Value:
    """cuSPARSE's strided-batch COO SpMM as jaxlib sets it up (cusparseCooSetStridedBatch and
    cusparseDnMatSetStridedBatch, jaxlib/gpu/sparse_kernels.cc; row-major B and C): batch i
    takes entries [i·stride_A, i·stride_A + nnz) of data/row/col (indices local to its
    rows×cols matrix), B at element offset i·stride_B and writes C at i·stride_C.  The form
    jax.experimental.sparse's lowering packs (stride_A = nnz, B and C packed back to back)
    and a B shared by all batches (stride_B = 0) become one product over the block-diagonal
    matrix: entry j of batch i at (row + i·rows, col + i·cols); other strides are refused."""
    mat = SPARSE_MAT_BYTES
    _, _, a_stride = struct.unpack_from("=7i", opaque)[4:]
    _, b_rows, b_cols, b_batch, b_stride = struct.unpack_from("=5i", opaque, mat)
    _, c_rows, c_cols, c_batch, c_stride = struct.unpack_from("=5i", opaque, mat + DENSE_MAT_BYTES)
    out_rows, in_rows = (cols, rows) if transposed else (rows, cols)
    packed = (a_stride == nnz and b_batch == batch and c_batch == batch and b_stride in (b_rows * b_cols, 0)
              and c_stride == c_rows * c_cols and (b_rows, c_rows, c_cols) == (in_rows, out_rows, b_cols))
    if not packed:
        raise rewrite.op_error(op, f"batched COO matmat with strides A {a_stride}, B {b_stride}, C {c_stride} and "
                                   f"batch counts {batch}/{b_batch}/{c_batch} for {rows}x{cols} A, {b_rows}x{b_cols} B, "
                                   f"{c_rows}x{c_cols} C: only entries, B (or one shared B) and C packed back to back "
                                   f"are supported")
    total = batch * nnz
    x_size = (batch if b_stride else 1) * b_rows * b_cols
    result_size = 1
    for d in builders.shape_of(op.results[0]):
        result_size *= d
    sizes = [builders.shape_of(v) for v in (data, row, col)]
    if any(s != [total] for s in sizes) or _size(x) != x_size or result_size != batch * c_rows * c_cols:
        raise rewrite.op_error(op, f"batch {batch} of {nnz} entries, B {b_rows}x{b_cols}, C {c_rows}x{c_cols}: "
                                   f"operands {[str(v.type) for v in (data, row, col, x)]} and result "
                                   f"{op.results[0].type} do not hold them")
    s32 = ir.IntegerType.get_signless(32)
    which = builders.binary("divide", builders.iota(s32, [total], 0), builders.scalar_constant(nnz, s32, [total]))
    row, col = builders.convert(row, s32), builders.convert(col, s32)
    if transposed:
        row, col, rows, cols = col, row, cols, rows

    def placed(index: ir.Value, bound: int) -> ir.Value:
        """index + batch·bound, or −1 (dropped) where index is outside [0, bound)."""
        inside = builders.binary("and", builders.compare(index, builders.scalar_constant(0, s32, [total]), "GE", "SIGNED"),
                                 builders.compare(index, builders.scalar_constant(bound, s32, [total]), "LT", "SIGNED"))
        shifted = builders.binary("add", index, builders.binary("multiply", which, builders.scalar_constant(bound, s32, [total])))
        return builders.select(inside, shifted, builders.scalar_constant(-1, s32, [total]))

    out_row = placed(row, rows)
    if b_stride:
        in_col = placed(col, cols)
        x2 = builders.reshape(x, [batch * b_rows, b_cols])
        in_cols = batch * cols
    else:  # one B for every batch: columns stay local
        inside = builders.binary("and", builders.compare(col, builders.scalar_constant(0, s32, [total]), "GE", "SIGNED"),
                                 builders.compare(col, builders.scalar_constant(cols, s32, [total]), "LT", "SIGNED"))
        in_col = builders.select(inside, col, builders.scalar_constant(-1, s32, [total]))
        x2 = builders.reshape(x, [b_rows, b_cols])
        in_cols = cols
    product = _product(data, out_row, in_col, x2, batch * rows, in_cols)
    return builders.reshape(product, builders.shape_of(op.results[0]))


def _size(x: ir.Value) -> int:
    n = 1
    for d in builders.shape_of(x):
        n *= d
    return n


def csr_rows(indices: ir.Value, indptr: ir.Value, rows: int) -> ir.Value:
    """The row of each stored entry j: #{r in 0..rows : indptr[r] <= j} − 1, by a binary
    search of the (nondecreasing) indptr: rows where j is past indptr[rows] and −1 before
    indptr[0], both out of bounds, so not stored."""
    (nnz,) = builders.shape_of(indices)
    s32 = ir.IntegerType.get_signless(32)
    count = _upper_bound(builders.convert(indptr, s32), builders.iota(s32, [nnz], 0))
    return builders.convert(builders.binary("subtract", count, builders.scalar_constant(1, s32, [nnz])),
                            builders.element_type_of(indices))


def _upper_bound(sorted_values: ir.Value, queries: ir.Value) -> ir.Value:
    """For each query q: #{i : sorted_values[i] <= q} (s32), by ⌈log2(n+1)⌉ halving steps
    of a binary search (a loop)."""
    (n,) = builders.shape_of(sorted_values)
    (m,) = builders.shape_of(queries)
    s32 = ir.IntegerType.get_signless(32)
    if n == 0:
        return builders.scalar_constant(0, s32, [m])
    steps = max(n, 1).bit_length()

    def cond(i, lo, hi):
        return builders.compare(i, builders.scalar_constant(steps, s32), "LT", "SIGNED")

    def body(i, lo, hi):
        one = builders.scalar_constant(1, s32, [m])
        mid = builders.binary("shift_right_logical", builders.binary("add", lo, hi), one)
        probe = builders.binary("minimum", mid, builders.scalar_constant(n - 1, s32, [m]))
        at_mid = builders.gather(sorted_values, builders.reshape(probe, [m, 1]), [m], offset_dims=[],
                                 collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1])
        searching = builders.compare(lo, hi, "LT", "SIGNED")
        go_right = builders.binary("and", searching, builders.compare(at_mid, queries, "LE", "SIGNED"))
        go_left = builders.binary("and", searching, builders.unary("not", go_right))
        return [builders.binary("add", i, builders.scalar_constant(1, s32)),
                builders.select(go_right, builders.binary("add", mid, one), lo), builders.select(go_left, mid, hi)]

    # a loop, not unrolled steps: XLA would fold the first steps' constant arrays at compile time
    _, lo, _ = builders.while_loop([builders.scalar_constant(0, s32), builders.scalar_constant(0, s32, [m]),
                                    builders.scalar_constant(n, s32, [m])], cond, body)
    return lo


def scatter_add(updates: ir.Value, indices: list[ir.Value], bounds: list[int]) -> ir.Value:
    """zeros[*bounds, *tail] with updates[j] ([nnz, *tail]) added at (indices[0][j], ...);
    entries with an index out of bounds are dropped."""
    nnz, *tail = builders.shape_of(updates)
    element = builders.element_type_of(updates)
    s32 = ir.IntegerType.get_signless(32)
    indices = [builders.convert(i, s32) for i in indices]
    valid = None
    for index, bound in zip(indices, bounds):
        inside = builders.binary("and", builders.compare(index, builders.scalar_constant(0, s32, [nnz]), "GE", "SIGNED"),
                                 builders.compare(index, builders.scalar_constant(bound, s32, [nnz]), "LT", "SIGNED"))
        valid = inside if valid is None else builders.binary("and", valid, inside)
    zero_i = builders.scalar_constant(0, s32, [nnz])
    index = builders.concatenate([builders.reshape(builders.select(valid, i, zero_i), [nnz, 1]) for i in indices], 1)
    shape = [nnz, *tail]
    updates = builders.select(builders.broadcast_in_dim(valid, shape, [0]), updates,
                              builders.scalar_constant(0, element, shape))
    zeros = builders.scalar_constant(0, element, [*bounds, *tail])
    k = len(bounds)
    numbers = stablehlo.ScatterDimensionNumbers.get(
        update_window_dims=list(range(1, 1 + len(tail))), inserted_window_dims=list(range(k)), input_batching_dims=[],
        scatter_indices_batching_dims=[], scattered_dims_to_operand_dims=list(range(k)), index_vector_dim=1)
    scatter = builders.op("stablehlo.scatter", [zeros.type], [zeros, index, updates],
                          {"scatter_dimension_numbers": numbers, "indices_are_sorted": ir.BoolAttr.get(False),
                           "unique_indices": ir.BoolAttr.get(False)}, regions=1)
    scalar_t = ir.RankedTensorType.get([], element)
    block = scatter.regions[0].blocks.append(scalar_t, scalar_t)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp([builders.binary("add", block.arguments[0], block.arguments[1])])
    return scatter.results[0]


def _product(data: ir.Value, row: ir.Value, col: ir.Value, x: ir.Value, rows: int, cols: int) -> ir.Value:
    """A · x for the stored entries (row, col, data) of A [rows, cols] and a vector or matrix
    x: each entry's data times x's row `col`, added into the result's row `row` (the
    products of entries out of bounds are dropped; no dense A is formed)."""
    (nnz,) = builders.shape_of(data)
    _, *tail = builders.shape_of(x)
    s32 = ir.IntegerType.get_signless(32)
    col = builders.convert(col, s32)
    safe_col = builders.clamp(builders.scalar_constant(0, s32), col, builders.scalar_constant(max(cols - 1, 0), s32))
    gathered = builders.gather(x, builders.reshape(safe_col, [nnz, 1]), [nnz, *tail], offset_dims=list(range(1, 1 + len(tail))),
                               collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1, *tail])
    products = builders.binary("multiply", builders.broadcast_in_dim(data, [nnz, *tail], [0]), gathered)
    in_cols = builders.binary("and", builders.compare(col, builders.scalar_constant(0, s32, [nnz]), "GE", "SIGNED"),
                              builders.compare(col, builders.scalar_constant(cols, s32, [nnz]), "LT", "SIGNED"))
    out_row = builders.select(in_cols, builders.convert(row, s32), builders.scalar_constant(-1, s32, [nnz]))
    return scatter_add(products, [out_row], [rows])


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
    # indptr[r] = #{kept entries in rows < r} = #{kept_row <= r − 1}: the kept rows are
    # nondecreasing (row-major order), the unkept ones are set past the last row
    kept_row = builders.select(kept, row, builders.scalar_constant(rows, s32, [nnz]))
    indptr = _upper_bound(kept_row, builders.binary("subtract", builders.iota(s32, [rows + 1], 0),
                                                    builders.scalar_constant(1, s32, [rows + 1])))
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
