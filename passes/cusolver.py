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
- `cusolver_gesvdp_ffi` (polar SVD; same operands, results and V as gesvdj) → `lapack_?gesdd_ffi`.

The calls below become the LAPACK call JAX's own CPU lowering writes for the same
primitive (jax/_src/lax/linalg.py; operands, attributes and results read in jaxlib's
jaxlib/gpu/solver_kernels_ffi.cc, hybrid_kernels.cc and linalg_kernels.cu.cc):
- `cusolver_geev_ffi` (a) {left, right} → (a, w, vl, vr, info): `lapack_?geev_ffi`.  For
  real a, cuSOLVER returns LAPACK's packed real eigenvectors (a conjugate pair j, j+1 as
  columns Re v_j, Im v_j) where jaxlib's CPU kernel returns them complex; packed column k
  is Re v_k, or −Im v_k where Im w_k < 0 (the second of a pair: v_k = conj v_{k−1}).
- `cuhybrid_eig_real` / `cuhybrid_eig_comp` (jaxlib's host-LAPACK or MAGMA geev, for left
  eigenvectors) {magma, left, right}: LAPACK geev's own results → `lapack_?geev_ffi`.
- `cusolver_gesvd_ffi` / `hipsolver_gesdd_ffi` (a) {full_matrices, compute_uv, transposed}
  → (a, s, u, vt, info): `lapack_?gesvd_ffi` / `?gesdd`.  With `transposed` (m < n) the
  kernel factors the row-major buffer, Aᵀ, so its third result is Vᴴ of A and its fourth U.
- `cusolver_sytrd_ffi` (a) {lower} → (a, d, e, tau, info): `lapack_?sytrd_ffi` / `?hetrd`.
- `cusolver_ormqr_ffi` (a, tau, c) {left, transpose} → c: `lapack_?ormqr_ffi` / `?unmqr`.
- `cuhybrid_geqp3` (a, jpvt) {magma} → (a, jpvt, tau): `lapack_?geqp3_ffi`.
- `cu_tridiagonal_solve_perturbed` (dl, d, du, b) → x: jaxlib's CPU kernel of the same
  algorithm (jaxlib/tridiagonal_solve_perturbed.h), `tridiagonal_solve_perturbed_ffi`.
- `cu_cholesky_update_ffi` (r, w) → (r, w): Givens rotations in plain ops (below).
- `cusolver_syrk_ffi` (a, c, alpha, beta) {transpose} → c' (lax.linalg.symmetric_product,
  hip: `hipsolver_syrk_ffi`): the kernel copies c into c' and calls cuBLAS syrk on each
  batch element with the upper triangle of the column-major C, which is the lower
  triangle (diagonal included) of the row-major matrix: there
  c'[i,j] = alpha·(a aᵀ)[i,j] + beta·c[i,j] (transpose: aᵀa; no conjugation for complex,
  syrk is not herk); the strictly upper triangle keeps c.  cuBLAS does not read C where
  beta = 0 (its documentation of syrk), so there c's values (NaN included) do not enter.
- `cusolver_csrlsvqr_ffi` (data, indices, indptr, b) {reorder, tol} → x
  (jax.experimental.sparse.linalg.spsolve; CUDA only): cuSOLVER's sparse QR solve of the n×n
  CSR system A x = b.  The rewrite densifies A (entries stored twice are summed, as in
  the cusparse pass's todense) and solves it by jaxlib's CPU LAPACK QR (geqrf, then ormqr
  for Qᴴb and a triangular solve by R).  The kernel fails the GPU program ("Singular matrix
  in linear solve.") where cuSOLVER reports a singular R, i.e. |R(j,j)| ≤ tol for some j;
  portable StableHLO cannot stop, so there x is NaN.  `reorder` (a fill-reducing
  permutation of A) changes only round-off; with reorder ≠ 0 cuSOLVER's R is that of the
  permuted matrix, so for a matrix within round-off of the tolerance the two may decide
  differently (the test of the criterion here is R's diagonal of A itself).
The result that holds the overwritten input (cuSOLVER's workspace) has no meaning (JAX never
reads it), nor have gesvd's U/Vᴴ placeholders with compute_uv false: where a tap or an
extracted cut of the call reads one, it is NaN (rewrite.unspecified), not made-up numbers;
so are gesvdj/gesvdp's U and V with compute_uv false (allocated, not written) and geev's
eigenvectors it was not asked for (LAPACK leaves them uninitialized).  hip twins (`hipsolver_*`, `hiphybrid_*`, `hip_*`) alike.

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
from passes.cusparse import csr_rows, scatter_add
from passes.lib import rewrite
from passes.lib.lapack import jaxlib_cpu_call, lapack_char, lapack_letter, pivots_to_permutation
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

POTRF_TARGETS = ("cusolver_potrf_ffi", "hipsolver_potrf_ffi")
PIVOTS_TARGETS = ("cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation")
# GPU target → (LAPACK routine for real types, for complex types).
LAPACK_EQUIVALENT = {
    "getrf_ffi": ("getrf", "getrf"), "getrf_batched_ffi": ("getrf", "getrf"),
    "geqrf_ffi": ("geqrf", "geqrf"), "geqrf_batched_ffi": ("geqrf", "geqrf"),
    "orgqr_ffi": ("orgqr", "ungqr"), "syevd_ffi": ("syevd", "heevd"), "gesvdj_ffi": ("gesdd", "gesdd"),
    "gesvdp_ffi": ("gesdd", "gesdd"),
}
# LAPACK routine → the results of the GPU call it replaces (jaxlib's solver_kernels_ffi.cc)
LAPACK_RESULTS = {"getrf": "(lu, pivots, info)", "geqrf": "(a, tau)", "orgqr": "(q)", "ungqr": "(q)",
                  "syevd": "(v, w, info)", "heevd": "(v, w, info)", "gesdd": "(a, s, u, v, info)"}
LAPACK_TARGETS = tuple(f"{prefix}_{suffix}" for suffix in LAPACK_EQUIVALENT for prefix in (
    ("cublas", "hipblas") if "batched" in suffix else ("cusolver", "hipsolver")))
GEEV_TARGETS = ("cusolver_geev_ffi", "hipsolver_geev_ffi")
HYBRID_EIG_TARGETS = ("cuhybrid_eig_real", "cuhybrid_eig_comp", "hiphybrid_eig_real", "hiphybrid_eig_comp")
GESVD_TARGETS = ("cusolver_gesvd_ffi", "hipsolver_gesvd_ffi", "cusolver_gesdd_ffi", "hipsolver_gesdd_ffi")
SYTRD_TARGETS = ("cusolver_sytrd_ffi", "hipsolver_sytrd_ffi")
ORMQR_TARGETS = ("cusolver_ormqr_ffi", "hipsolver_ormqr_ffi")
GEQP3_TARGETS = ("cuhybrid_geqp3", "hiphybrid_geqp3")
PERTURBED_TARGETS = ("cu_tridiagonal_solve_perturbed", "hip_tridiagonal_solve_perturbed")
CHOLESKY_UPDATE_TARGETS = ("cu_cholesky_update_ffi", "hip_cholesky_update_ffi")
SYRK_TARGETS = ("cusolver_syrk_ffi", "hipsolver_syrk_ffi")
CSRLSVQR_TARGETS = ("cusolver_csrlsvqr_ffi",)


@register_pass("cusolver", "jaxlib's GPU linear algebra: Cholesky, its update and LU pivots → loops in plain ops; "
                           "LU/QR/eig/eigh/SVD/tridiagonal/ormqr/pivoted QR/sparse QR solve → jaxlib's CPU LAPACK calls; "
                           "syrk → a dot into the lower triangle",
               targets=POTRF_TARGETS + PIVOTS_TARGETS + LAPACK_TARGETS + GEEV_TARGETS + HYBRID_EIG_TARGETS
               + GESVD_TARGETS + SYTRD_TARGETS + ORMQR_TARGETS + GEQP3_TARGETS + PERTURBED_TARGETS
               + CHOLESKY_UPDATE_TARGETS + SYRK_TARGETS + CSRLSVQR_TARGETS, preserves={Fact.USES})
def lower_cusolver(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(POTRF_TARGETS):
        lower_potrf(op)
    for op in walks.custom_calls(PIVOTS_TARGETS):
        lower_lu_pivots_to_permutation(op)
    for op in walks.custom_calls(LAPACK_TARGETS):
        retarget_to_lapack(op)
    for targets, lower in ((GEEV_TARGETS, lower_geev), (HYBRID_EIG_TARGETS, lower_hybrid_eig),
                           (GESVD_TARGETS, lower_gesvd), (SYTRD_TARGETS, lower_sytrd), (ORMQR_TARGETS, lower_ormqr),
                           (GEQP3_TARGETS, lower_geqp3), (PERTURBED_TARGETS, lower_tridiagonal_solve_perturbed),
                           (CHOLESKY_UPDATE_TARGETS, lower_cholesky_update), (SYRK_TARGETS, lower_syrk),
                           (CSRLSVQR_TARGETS, lower_csrlsvqr)):
        for op in walks.custom_calls(targets):
            lower(op)


def _result_types(op: ir.Operation) -> list[ir.Type]:
    return [r.type for r in op.results]


def _bool_config(op: ir.Operation, name: str) -> bool:
    config = rewrite.backend_config(op)
    if name not in config:
        raise rewrite.op_error(op, f"backend_config has no '{name}'")
    return bool(config[name])


def _eigenvector_mode(compute: bool) -> ir.Attribute:
    return lapack_char("V" if compute else "N")


def lower_geev(op: ir.Operation) -> None:
    """cuSOLVER's geev → LAPACK's; real input: eigenvectors packed back into LAPACK's real form."""
    (a,) = list(op.operands)
    letter = lapack_letter(op, a)
    _, w_t, vl_t, vr_t, info_t = _result_types(op)
    left, right = _bool_config(op, "left"), _bool_config(op, "right")
    modes = {"compute_left": _eigenvector_mode(left), "compute_right": _eigenvector_mode(right)}
    with rewrite.at(op):
        if letter in "cz":
            w, vl, vr, info = jaxlib_cpu_call(f"lapack_{letter}geev_ffi", [a], [w_t, vl_t, vr_t, info_t], modes)
        else:
            real_t = ir.RankedTensorType.get(ir.RankedTensorType(w_t).shape, builders.element_type_of(a))
            complex_v = ir.RankedTensorType.get(ir.RankedTensorType(vr_t).shape, ir.ComplexType(
                ir.RankedTensorType(w_t).element_type))
            wr, wi, vl_c, vr_c, info = jaxlib_cpu_call(f"lapack_{letter}geev_ffi", [a],
                                                       [real_t, real_t, complex_v, complex_v, info_t], modes)
            w = builders.op1("stablehlo.complex", w_t, [wr, wi])
            vl, vr = _pack_conjugate_pairs(vl_c, wi), _pack_conjugate_pairs(vr_c, wi)
    vl, vr = _unwritten_eigenvectors(op, [vl, vr], left, right)
    rewrite.replace(op, [rewrite.unspecified(op, 0, "the input the kernel destroys"), w, vl, vr, info])


def _unwritten_eigenvectors(op: ir.Operation, vectors: list[ir.Value], left: bool, right: bool) -> list[ir.Value | None]:
    """geev's (vl, vr), the last results but info: those it was not asked for (jobvl/jobvr
    'N') are buffers neither cuSOLVER nor LAPACK writes, so they are unspecified, not the
    uninitialized memory of the LAPACK call's output."""
    n = len(op.results)
    return [v if wanted else rewrite.unspecified(op, n - 3 + i, f"the {side} eigenvectors, which were not computed")
            for i, (v, wanted, side) in enumerate(zip(vectors, (left, right), ("left", "right")))]


def _pack_conjugate_pairs(v: ir.Value, wi: ir.Value) -> ir.Value:
    """LAPACK's real packed eigenvectors from complex ones: column k is Re v_k, or −Im v_k
    where Im w_k < 0 (then v_k = conj v_{k−1}, whose imaginary part the column holds)."""
    shape = builders.shape_of(v)
    rank = len(shape)
    second_of_pair = builders.compare(wi, builders.scalar_constant(0, builders.element_type_of(wi), builders.shape_of(wi)),
                                      "LT", "FLOAT")
    mask = builders.broadcast_in_dim(second_of_pair, shape, list(range(rank - 2)) + [rank - 1])
    return builders.select(mask, builders.unary("negate", builders.imag_part(v)), builders.real_part(v))


def lower_hybrid_eig(op: ir.Operation) -> None:
    """jaxlib's hybrid eig runs LAPACK's (or MAGMA's) geev and returns its results as they are."""
    (a,) = list(op.operands)
    letter = lapack_letter(op, a)
    config = rewrite.backend_config(op)
    left, right = bool(config.get("left", False)), bool(config.get("right", True))
    modes = {"compute_left": _eigenvector_mode(left), "compute_right": _eigenvector_mode(right)}
    with rewrite.at(op):
        values: list[ir.Value | None] = list(jaxlib_cpu_call(f"lapack_{letter}geev_ffi", [a], _result_types(op), modes))
    values[-3:-1] = _unwritten_eigenvectors(op, values[-3:-1], left, right)
    rewrite.replace(op, values)


def lower_gesvd(op: ir.Operation) -> None:
    """cuSOLVER's gesvd (hipSOLVER's gesdd) of logical A → LAPACK's gesvd (gesdd) of A."""
    (a,) = list(op.operands)
    letter = lapack_letter(op, a)
    routine = "gesdd" if rewrite.call_target(op).endswith("gesdd_ffi") else "gesvd"
    full_matrices, compute_uv = _bool_config(op, "full_matrices"), _bool_config(op, "compute_uv")
    transposed = bool(rewrite.backend_config(op).get("transposed", False))
    a_t, s_t, _, _, info_t = _result_types(op)
    *batch, m, n = builders.shape_of(a)
    k = min(m, n)
    element = builders.element_type_of(a)
    u_t = ir.RankedTensorType.get([*batch, m, m if full_matrices else k], element)
    vt_t = ir.RankedTensorType.get([*batch, n if full_matrices else k, n], element)
    mode = "N" if not compute_uv else ("A" if full_matrices else "S")
    with rewrite.at(op):
        _, s, u, vt, info = jaxlib_cpu_call(f"lapack_{letter}{routine}_ffi", [a], [a_t, s_t, u_t, vt_t, info_t],
                                            {"mode": lapack_char(mode)}, aliases={0: 0})
    destroyed = rewrite.unspecified(op, 0, "the input the kernel destroys")
    if not compute_uv:  # the U/Vᴴ results are placeholders (f32[] in JAX's lowering) the kernel never writes
        rewrite.replace(op, [destroyed, s, rewrite.unspecified(op, 2, "a U placeholder the kernel does not write"),
                             rewrite.unspecified(op, 3, "a Vᴴ placeholder the kernel does not write"), info])
    elif transposed:  # the kernel factored Aᵀ = V Σ Uᴴ: its "u" is A's Vᴴ (transposed back), its "vt" A's U
        rewrite.replace(op, [destroyed, s, vt, u, info])
    else:
        rewrite.replace(op, [destroyed, s, u, vt, info])


def lower_sytrd(op: ir.Operation) -> None:
    (a,) = list(op.operands)
    letter = lapack_letter(op, a)
    uplo = lapack_char("L" if _bool_config(op, "lower") else "U")
    with rewrite.at(op):
        values = jaxlib_cpu_call(f"lapack_{letter}{'hetrd' if letter in 'cz' else 'sytrd'}_ffi", [a],
                                 _result_types(op), {"uplo": uplo}, aliases={0: 0})
    rewrite.replace(op, values)


def lower_ormqr(op: ir.Operation) -> None:
    a, tau, c = list(op.operands)
    letter = lapack_letter(op, a)
    flags = {name: ir.BoolAttr.get(_bool_config(op, name)) for name in ("left", "transpose")}
    with rewrite.at(op):
        values = jaxlib_cpu_call(f"lapack_{letter}{'unmqr' if letter in 'cz' else 'ormqr'}_ffi", [a, tau, c],
                                 _result_types(op), flags, aliases={0: 2})
    rewrite.replace(op, values)


def lower_geqp3(op: ir.Operation) -> None:
    a, jpvt = list(op.operands)
    with rewrite.at(op):
        values = jaxlib_cpu_call(f"lapack_{lapack_letter(op, a)}geqp3_ffi", [a, jpvt], _result_types(op),
                                 aliases={0: 0, 1: 1})
    rewrite.replace(op, values)


def lower_tridiagonal_solve_perturbed(op: ir.Operation) -> None:
    lapack_letter(op, op.operands[-1])  # the kernel's types: f32, f64, c64, c128
    with rewrite.at(op):
        values = jaxlib_cpu_call("tridiagonal_solve_perturbed_ffi", list(op.operands), _result_types(op))
    rewrite.replace(op, values)


def lower_cholesky_update(op: ir.Operation) -> None:
    """R (upper, RᵀR = A) and w → R' with R'ᵀR' = A + wwᵀ, and the rotated w, as jaxlib's
    kernel computes them: for k in 0..n−1, a Givens rotation (c, s) from (R[k,k], w[k])
    (c, s = 1, 0 where w[k] = 0; else both scaled by max(|R[k,k]|, |w[k]|) first), applied to
    row k of R and to w in columns i ≥ k: R[k,i], w[i] ← c·R[k,i] − s·w[i], s·R[k,i] + c·w[i]."""
    r, w = list(op.operands)
    shape = builders.shape_of(r)
    element = builders.element_type_of(r)
    if len(shape) != 2 or shape[0] != shape[1] or builders.shape_of(w) != shape[:1] or str(element) not in ("f32", "f64"):
        raise rewrite.op_error(op, f"expects an f32/f64 matrix [n,n] and vector [n], got {r.type} and {w.type}")
    n = shape[0]
    s32 = ir.IntegerType.get_signless(32)

    def scalar(x: ir.Value, k: ir.Value) -> ir.Value:
        return builders.reshape(builders.dynamic_slice(x, [k], [1]), [])

    def cond(k, r_k, w_k):
        return builders.compare(k, builders.scalar_constant(n, s32), "LT", "SIGNED")

    def body(k, r_k, w_k):
        row = builders.reshape(builders.dynamic_slice(r_k, [k, zero_i], [1, n]), [n])
        x, y = scalar(row, k), scalar(w_k, k)
        denominator = builders.binary("maximum", builders.unary("abs", x), builders.unary("abs", y))
        xs, ys = builders.binary("divide", x, denominator), builders.binary("divide", y, denominator)
        rh = builders.unary("rsqrt", builders.binary("add", builders.binary("multiply", xs, xs),
                                                     builders.binary("multiply", ys, ys)))
        no_rotation = builders.compare(y, builders.scalar_constant(0, element), "EQ", "FLOAT")
        c = builders.select(no_rotation, builders.scalar_constant(1, element), builders.binary("multiply", xs, rh))
        s = builders.select(no_rotation, builders.scalar_constant(0, element),
                            builders.unary("negate", builders.binary("multiply", ys, rh)))
        cb, sb = (builders.broadcast_in_dim(v, [n], []) for v in (c, s))
        new_row = builders.binary("subtract", builders.binary("multiply", cb, row), builders.binary("multiply", sb, w_k))
        new_w = builders.binary("add", builders.binary("multiply", sb, row), builders.binary("multiply", cb, w_k))
        active = builders.compare(builders.iota(s32, [n], 0), builders.broadcast_in_dim(k, [n], []), "GE", "SIGNED")
        new_row, new_w = builders.select(active, new_row, row), builders.select(active, new_w, w_k)
        r_k = builders.dynamic_update_slice(r_k, builders.reshape(new_row, [1, n]), [k, zero_i])
        return [builders.binary("add", k, builders.scalar_constant(1, s32)), r_k, new_w]

    with rewrite.at(op):
        zero_i = builders.scalar_constant(0, s32)
        _, r_out, w_out = builders.while_loop([zero_i, r, w], cond, body)
    rewrite.replace(op, [r_out, w_out])


def _scalar_operand(op: ir.Operation, x: ir.Value, name: str) -> ir.Value:
    shape = builders.shape_of(x)
    if any(d != 1 for d in shape):
        raise rewrite.op_error(op, f"its {name} operand must be a scalar, got {x.type}")
    return builders.reshape(x, [])


def lower_syrk(op: ir.Operation) -> None:
    """c' = c with its lower triangle (row-major, diagonal included) alpha·a·aᵀ + beta·c
    (aᵀ·a with `transpose`); beta = 0 does not read c there."""
    if len(op.operands) != 4 or len(op.results) != 1:
        raise rewrite.op_error(op, f"expects operands (a, c, alpha, beta) and one result, got "
                               f"{len(op.operands)} operands and {len(op.results)} results")
    a, c, alpha, beta = list(op.operands)
    lapack_letter(op, a)  # cuBLAS syrk's types: f32, f64, c64, c128
    transpose = _bool_config(op, "transpose")
    *batch, rows, cols = builders.shape_of(a)
    size = cols if transpose else rows
    element = builders.element_type_of(a)
    if builders.shape_of(c) != [*batch, size, size] or list(builders.shape_of(op.results[0])) != [*batch, size, size]:
        raise rewrite.op_error(op, f"expects c and the result of shape {[*batch, size, size]} for a of type {a.type}, "
                               f"got {c.type} and {op.results[0].type}")
    nb = len(batch)
    full = [*batch, size, size]
    with rewrite.at(op):
        alpha_s, beta_s = _scalar_operand(op, alpha, "alpha"), _scalar_operand(op, beta, "beta")
        free = nb + (0 if transpose else 1)  # the contracted dimension of a
        product = builders.dot_general(a, a, element, list(range(nb)), list(range(nb)), [free], [free])
        scaled = builders.binary("multiply", builders.broadcast_in_dim(alpha_s, full, []), product)
        beta_zero = builders.compare(beta_s, builders.scalar_constant(0, element), "EQ")
        beta_c = builders.select(builders.broadcast_in_dim(beta_zero, full, []), builders.scalar_constant(0, element, full),
                                 builders.binary("multiply", builders.broadcast_in_dim(beta_s, full, []), c))
        s32 = ir.IntegerType.get_signless(32)
        lower = builders.compare(builders.iota(s32, full, nb), builders.iota(s32, full, nb + 1), "GE", "SIGNED")
        out = builders.select(lower, builders.binary("add", scaled, beta_c), c)
    rewrite.replace(op, [out])


def lower_csrlsvqr(op: ir.Operation) -> None:
    """x of A x = b for the CSR matrix A (n×n): dense A, LAPACK QR, Qᴴb, R⁻¹; NaN where
    some |R(j,j)| ≤ tol (where the GPU program stops)."""
    if len(op.operands) != 4 or len(op.results) != 1:
        raise rewrite.op_error(op, f"expects operands (data, indices, indptr, b) and one result, got "
                               f"{len(op.operands)} operands and {len(op.results)} results")
    data, indices, indptr, b = list(op.operands)
    letter = lapack_letter(op, b)
    shapes = [builders.shape_of(v) for v in (data, indices, indptr, b)]
    if any(len(s) != 1 for s in shapes) or shapes[0] != shapes[1] or shapes[2] != [shapes[3][0] + 1] or \
            builders.element_type_of(data) != builders.element_type_of(b):
        raise rewrite.op_error(op, f"expects data[nnz], indices[nnz], indptr[n+1] and b[n] of one element type, got "
                               f"{', '.join(str(v.type) for v in (data, indices, indptr, b))}")
    config = rewrite.backend_config(op)
    if "tol" not in config:
        raise rewrite.op_error(op, "backend_config has no 'tol'")
    tol = float(config["tol"])
    (n,) = shapes[3]
    element = builders.element_type_of(b)
    is_complex = letter in "cz"
    real_t = ir.ComplexType(element).element_type if is_complex else element
    s32 = ir.IntegerType.get_signless(32)
    with rewrite.at(op):
        rows = csr_rows(indices, indptr, n)
        a = scatter_add(data, [rows, indices], [n, n])
        a_t = ir.RankedTensorType.get([n, n], element)
        tau_t = ir.RankedTensorType.get([n], element)
        qr, tau = jaxlib_cpu_call(f"lapack_{letter}geqrf_ffi", [a], [a_t, tau_t], aliases={0: 0})
        column = builders.reshape(b, [n, 1])
        (qh_b,) = jaxlib_cpu_call(f"lapack_{letter}{'unmqr' if is_complex else 'ormqr'}_ffi", [qr, tau, column],
                                  [column.type], {"left": ir.BoolAttr.get(True), "transpose": ir.BoolAttr.get(True)},
                                  aliases={0: 2})
        x = builders.reshape(builders.triangular_solve(qr, qh_b, left_side=True, lower=False), [n])
        diagonal = builders.gather(qr, builders.concatenate([builders.reshape(builders.iota(s32, [n], 0), [n, 1])] * 2, 1),
                                   [n], offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[0, 1],
                                   index_vector_dim=1, slice_sizes=[1, 1])
        magnitude = builders.op1("stablehlo.abs", ir.RankedTensorType.get([n], real_t), [diagonal])
        # not (|R(j,j)| > tol) for some j: a NaN on R's diagonal counts as singular too
        small = builders.unary("not", builders.compare(magnitude, builders.scalar_constant(tol, real_t, [n]), "GT",
                                                       "FLOAT"))
        singular = builders.reduce(small, [0], "or", 0) if n else builders.scalar_constant(False, ir.IntegerType.get_signless(1))
        nan = builders.scalar_constant(float("nan"), real_t, [n])
        nan = builders.op1("stablehlo.complex", x.type, [nan, nan]) if is_complex else nan
        x = builders.select(builders.broadcast_in_dim(singular, [n], []), nan, x)
    rewrite.replace(op, [x])


def retarget_to_lapack(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    suffix = target.split("_", 1)[1]
    letter = lapack_letter(op, op.operands[0])
    routine = LAPACK_EQUIVALENT[suffix][letter in "cz"]
    expected = LAPACK_RESULTS[routine]
    if len(op.results) != expected.count(",") + 1:
        raise rewrite.op_error(op, f"expects {expected.count(',') + 1} results {expected}, got {len(op.results)}")
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
        values: list[ir.Value | None] = list(new.results)
        if routine == "gesdd" and config.get("compute_uv", True):
            vt = values[3]  # LAPACK returns Vᴴ where cuSOLVER's gesvdj returns V
            rank = len(builders.shape_of(vt))
            v = builders.transpose(vt, list(range(rank - 2)) + [rank - 1, rank - 2])
            values[3] = v if letter in "sd" else builders.conj(v)
    if routine == "gesdd":  # gesvdj/gesvdp destroy A; with compute_uv false U and V are allocated, not written
        values[0] = rewrite.unspecified(op, 0, "the input the kernel destroys")
        if not config.get("compute_uv", True):
            values[2] = rewrite.unspecified(op, 2, "U, which was not computed")
            values[3] = rewrite.unspecified(op, 3, "V, which was not computed")
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
