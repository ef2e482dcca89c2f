"""cusolver: jaxlib's GPU linear-algebra FFI calls → StableHLO, or jaxlib's CPU LAPACK calls.

StableHLO has Cholesky and triangular solves but no LU, QR, eigen- or singular-value
decomposition; on CPU JAX itself calls LAPACK through jaxlib's `lapack_*_ffi` targets.
The GPU calls whose operands, results and layouts (column-major, as cuSOLVER's) are
LAPACK's become those targets (kept, marked cpu_only by custom-call-policy):
- `cusolver_getrf_ffi` / `cublas_getrf_batched_ffi` (a) → (lu, 1-based pivots, info):
  `lapack_?getrf_ffi`;
- `cusolver_geqrf_ffi` / `cublas_geqrf_batched_ffi` (a) → (a, tau): `lapack_?geqrf_ffi`;
- `cusolver_orgqr_ffi` (a, tau) → q: `lapack_?orgqr_ffi` / `lapack_?ungqr_ffi`;
- `cusolver_syevd_ffi` (a) {lower} → (v, w ascending, info): `lapack_?syevd_ffi` /
  `?heevd` with mode 'V' (cuSOLVER's syevd always computes vectors);
- `cusolver_gesvdj_ffi` (a) {compute_uv, full_matrices} → (a, s, u, V, info):
  `lapack_?gesdd_ffi` in mode 'A', 'S' or 'N', whose last matrix is Vᴴ (adjoint taken).
`cu_lu_pivots_to_permutation` (0-based pivots) → permutation is a StableHLO loop of swaps.

`cusolver_potrf_ffi(a)` (jax.lax.linalg.cholesky on GPU; hip: `hipsolver_potrf_ffi`)
returns (factor, info): cuSOLVER's POTRF writes the factor into the requested triangle
and `info` = 0, or the 1-based order of the leading minor that is not positive definite.
JAX turns a non-zero info into NaNs and keeps only the triangle, so the rewrite is a
Cholesky factorization (a loop over columns in plain ops: `stablehlo.cholesky` is not
taken by every StableHLO compiler) and cuSOLVER's info.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.lapack import lapack_letter, pivots_to_permutation
from passes.lib.registry import PassOptions, register_pass

POTRF_TARGETS = ("cusolver_potrf_ffi", "hipsolver_potrf_ffi")
PIVOTS_TARGETS = ("cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation")
# GPU target → (LAPACK routine for real types, for complex types).
LAPACK_EQUIVALENT = {
    "getrf_ffi": ("getrf", "getrf"), "getrf_batched_ffi": ("getrf", "getrf"),
    "geqrf_ffi": ("geqrf", "geqrf"), "geqrf_batched_ffi": ("geqrf", "geqrf"),
    "orgqr_ffi": ("orgqr", "ungqr"), "syevd_ffi": ("syevd", "heevd"), "gesvdj_ffi": ("gesdd", "gesdd"),
}
LAPACK_TARGETS = tuple(f"{prefix}_{suffix}" for suffix in LAPACK_EQUIVALENT for prefix in (
    ("cublas", "hipblas") if "batched" in suffix else ("cusolver", "hipsolver")))


@register_pass("cusolver", "cuSOLVER/cuBLAS linear algebra: Cholesky and LU pivots → loops in plain ops, "
                           "LU/QR/eigh/SVD → jaxlib's CPU LAPACK calls",
               targets=POTRF_TARGETS + PIVOTS_TARGETS + LAPACK_TARGETS)
def lower_cusolver(module: ir.Module, options: PassOptions) -> None:
    for op in rewrite.custom_calls(module, POTRF_TARGETS):
        lower_potrf(op)
    for op in rewrite.custom_calls(module, PIVOTS_TARGETS):
        lower_lu_pivots_to_permutation(op)
    for op in rewrite.custom_calls(module, LAPACK_TARGETS):
        retarget_to_lapack(op)


def retarget_to_lapack(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    suffix = target.split("_", 1)[1]
    letter = lapack_letter(op, op.operands[0])
    routine = LAPACK_EQUIVALENT[suffix][letter in "cz"]
    config = rewrite.backend_config(op)
    attrs = {name: op.attributes[name] for name in op.attributes}
    attrs["call_target_name"] = ir.StringAttr.get(f"lapack_{letter}{routine}_ffi")
    u8 = ir.IntegerType.get_unsigned(8)
    ffi_attrs: dict[str, ir.Attribute] = {}
    if routine in ("syevd", "heevd"):
        ffi_attrs = {"mode": ir.IntegerAttr.get(u8, ord("V")),
                     "uplo": ir.IntegerAttr.get(u8, ord("L" if config.get("lower", True) else "U"))}
    elif routine == "gesdd":
        mode = "N" if not config.get("compute_uv", True) else ("A" if config.get("full_matrices", True) else "S")
        ffi_attrs = {"mode": ir.IntegerAttr.get(u8, ord(mode))}
    attrs["mhlo.backend_config"] = ir.DictAttr.get(ffi_attrs)  # a typed-FFI call as JAX writes it
    attrs["backend_config"] = ir.StringAttr.get("")
    attrs["api_version"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)
    with rewrite.at(op):
        new = ir.Operation.create("stablehlo.custom_call", results=[r.type for r in op.results],
                                  operands=list(op.operands), attributes=attrs)
        values = list(new.results)
        if routine == "gesdd" and config.get("compute_uv", True):
            vt = values[3]  # LAPACK returns Vᴴ where cuSOLVER's gesvdj returns V
            rank = len(builders.shape_of(vt))
            v = builders.transpose(vt, list(range(rank - 2)) + [rank - 1, rank - 2])
            values[3] = v if letter in "sd" else builders.conj(v)
    rewrite.replace(op, values)


def lower_lu_pivots_to_permutation(op: ir.Operation) -> None:
    (pivots,) = list(op.operands)
    out_t = ir.RankedTensorType(op.results[0].type)
    with rewrite.at(op):
        perm = pivots_to_permutation(pivots, out_t.shape[-1], out_t.element_type)
    rewrite.replace(op, [perm])


def lower_potrf(op: ir.Operation) -> None:
    config = rewrite.backend_config(op)
    lower = bool(config.get("lower", True))
    (a,) = list(op.operands)
    a_t = ir.RankedTensorType(a.type)
    shape = list(a_t.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise rewrite.op_error(op, f"expects a batch of square matrices, got {a_t}")
    n = shape[-1]
    batch = shape[:-2]
    with rewrite.at(op):
        factor = builders.cholesky(a, lower)
        results = [factor]
        if len(op.results) > 1:
            results.append(_info(op, a, factor, batch, n, lower))
    rewrite.replace(op, results)


def _info(op: ir.Operation, a: ir.Value, factor: ir.Value, batch: list[int], n: int, lower: bool) -> ir.Value:
    """s32[batch]: 0 where the factorization succeeded, else the order of the first leading
    minor that is not positive definite.  A failed factor holds NaNs from the failing
    column on, but so can a factor of an input with NaNs, so only when some factor is not finite is the order found
    by an unblocked factorization (a loop of n rank-1 updates) of the input."""
    info_t = ir.RankedTensorType(op.results[1].type)
    s32 = ir.IntegerType.get_signless(32)
    i1 = ir.IntegerType.get_signless(1)
    rank = len(batch) + 2
    if isinstance(builders.element_type_of(factor), ir.ComplexType):
        finite = builders.binary("and", *[builders.op1("stablehlo.is_finite", builders.tensor_type_like(v, element=i1), [v])
                                  for v in (builders.real_part(factor), builders.imag_part(factor))])
    else:
        finite = builders.op1("stablehlo.is_finite", builders.tensor_type_like(factor, element=i1), [factor])
    all_finite = builders.reduce(finite, list(range(rank)), "and", 1)
    branch = builders.op("stablehlo.if", [ir.RankedTensorType.get(batch, s32)], [all_finite], regions=2)
    with ir.InsertionPoint(branch.regions[0].blocks.append()):
        stablehlo.ReturnOp([builders.scalar_constant(0, s32, batch)])
    with ir.InsertionPoint(branch.regions[1].blocks.append()):
        stablehlo.ReturnOp([_first_failing_minor(a, batch, n, lower)])
    info = branch.results[0]
    if info_t.element_type != s32 or list(info_t.shape) != batch:
        info = builders.reshape(builders.convert(info, info_t.element_type), list(info_t.shape))
    return info


def _first_failing_minor(a: ir.Value, batch: list[int], n: int, lower: bool) -> ir.Value:
    s32 = ir.IntegerType.get_signless(32)
    rank = len(batch) + 2
    et = builders.element_type_of(a)
    is_complex = isinstance(et, ir.ComplexType)
    real_t = ir.ComplexType(et).element_type if is_complex else et
    full = batch + [n, n]
    rows, cols = builders.iota(s32, full, rank - 2), builders.iota(s32, full, rank - 1)
    # The Hermitian matrix the requested triangle describes (cuSOLVER reads only that one).
    keep = builders.compare(rows, cols, "GE" if lower else "LE", "SIGNED")
    tri = builders.select(keep, a, builders.scalar_constant(0, et, full))
    perm = list(range(len(batch))) + [rank - 1, rank - 2]
    strict = builders.select(builders.compare(rows, cols, "EQ", "SIGNED"), builders.scalar_constant(0, et, full), tri)
    mirrored = builders.transpose(strict, perm)
    sym = builders.binary("add", tri, builders.conj(mirrored) if is_complex else mirrored)
    zero_i = builders.scalar_constant(0, s32)

    def cond(k, m, info):
        return builders.compare(k, builders.scalar_constant(n, s32), "LT", "SIGNED")

    def body(k, m, info):
        starts = [zero_i] * len(batch)
        pivot = builders.reshape(builders.dynamic_slice(m, starts + [k, k], batch + [1, 1]), batch)
        if is_complex:  # the diagonal of a Hermitian matrix is real
            pivot = builders.real_part(pivot)
        failed = builders.unary("not", builders.compare(pivot, builders.scalar_constant(0, real_t, batch), "GT", "FLOAT"))
        first = builders.binary("and", failed, builders.compare(info, builders.scalar_constant(0, s32, batch), "EQ", "SIGNED"))
        k1 = builders.binary("add", k, builders.scalar_constant(1, s32))
        info = builders.select(first, builders.broadcast_in_dim(k1, batch, []), info)
        root = builders.unary("sqrt", builders.select(failed, builders.scalar_constant(1, real_t, batch), pivot))
        if is_complex:
            root = builders.op1("stablehlo.complex", ir.RankedTensorType.get(batch, et),
                         [root, builders.scalar_constant(0, real_t, batch)])
        column = builders.reshape(builders.dynamic_slice(m, starts + [zero_i, k], batch + [n, 1]), batch + [n])
        below = builders.compare(builders.iota(s32, batch + [n], len(batch)), builders.broadcast_in_dim(k, batch + [n], []), "GT",
                          "SIGNED")
        scaled = builders.binary("divide", column, builders.broadcast_in_dim(root, batch + [n], list(range(len(batch)))))
        col = builders.select(below, scaled, builders.scalar_constant(0, et, batch + [n]))
        outer = builders.binary("multiply", builders.broadcast_in_dim(col, full, list(range(len(batch))) + [rank - 2]),
                         builders.broadcast_in_dim(builders.conj(col) if is_complex else col, full,
                                            list(range(len(batch))) + [rank - 1]))
        return [k1, builders.binary("subtract", m, outer), info]

    _, _, info = builders.while_loop([zero_i, sym, builders.scalar_constant(0, s32, batch)], cond, body)
    return info
