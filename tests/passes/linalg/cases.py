"""The programs behind tests/passes/linalg/dumps/: jaxlib's GPU linear-algebra calls that the
cusolver and cusparse passes rewrite (non-symmetric eig, SVD by QR and polar iteration, the
tridiagonal reduction and solves, ormqr, pivoted QR, Cholesky update).

Imports only jax and numpy: `generate_dumps.py` runs it in an environment with jax[cuda12]
(no project code), the tests import it with the project and run each function with JAX on
CPU as the oracle.  Each case names the GPU call its dump must hold."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    inputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype name)
    target: str  # the GPU custom-call its dump holds
    kind: str  # how the test compares outputs (see test_gpu_linalg_dumps.py)
    reference: Callable | None = None  # the oracle where JAX on CPU cannot run `fn` itself


def random_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    if case.kind.startswith("sparse_"):
        return sparse_inputs(case, seed)
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in case.inputs:
        x = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal(shape)
        out.append(x.astype(dtype))
    if case.kind == "tridiagonal_solve":  # diagonally dominant: a well-conditioned system
        dl, d, du, b = out
        d = (np.abs(dl) + np.abs(du) + 2 + np.abs(d)).astype(d.dtype)
        out = [dl, d, du, b]
    if case.kind == "cholesky_update":  # an upper Cholesky factor with a positive diagonal
        r, w = out
        r = (np.triu(r) + 3 * np.eye(r.shape[-1])).astype(r.dtype)
        out = [r, w]
    return out


@cache  # one function per case: jax.jit caches its compilations by function
def cases() -> dict[str, Case]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    svd = lax.linalg.svd
    algo = lax.linalg.SvdAlgorithm
    all_ = [
        Case("eig_f32", lambda a: jnp.linalg.eig(a), (((5, 5), "float32"),), "cusolver_geev_ffi", "eig"),
        Case("eigvals_f32", lambda a: (jnp.linalg.eigvals(a),), (((2, 4, 4), "float32"),), "cusolver_geev_ffi",
             "eigvals"),
        Case("eig_c64", lambda a: jnp.linalg.eig(a), (((2, 3, 3), "complex64"),), "cusolver_geev_ffi", "eig"),
        Case("eig_left_f32", lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True),
             (((4, 4), "float32"),), "cuhybrid_eig_real", "eig_left"),
        Case("eig_left_c64", lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True),
             (((3, 3), "complex64"),), "cuhybrid_eig_comp", "eig_left"),
        Case("svd_qr_tall", lambda a: svd(a, full_matrices=True, algorithm=algo.QR), (((6, 4), "float32"),),
             "cusolver_gesvd_ffi", "svd"),
        Case("svd_qr_wide_econ", lambda a: svd(a, full_matrices=False, algorithm=algo.QR),
             (((2, 3, 5), "float32"),), "cusolver_gesvd_ffi", "svd"),
        Case("svd_qr_values", lambda a: (svd(a, compute_uv=False, algorithm=algo.QR),), (((4, 7), "float32"),),
             "cusolver_gesvd_ffi", "svd_values"),
        Case("svd_qr_c64", lambda a: svd(a, full_matrices=False, algorithm=algo.QR), (((5, 3), "complex64"),),
             "cusolver_gesvd_ffi", "svd"),
        # JAX's CPU lowering has no polar SVD: the oracle is its default (LAPACK gesdd)
        Case("svd_polar", lambda a: svd(a, full_matrices=False, algorithm=algo.POLAR), (((5, 3), "float32"),),
             "cusolver_gesvdp_ffi", "svd", lambda a: svd(a, full_matrices=False)),
        Case("svd_polar_full", lambda a: svd(a, full_matrices=True, algorithm=algo.POLAR), (((3, 4), "float32"),),
             "cusolver_gesvdp_ffi", "svd", lambda a: svd(a, full_matrices=True)),
        Case("tridiagonal_f32", lambda a: lax.linalg.tridiagonal(a, lower=True), (((5, 5), "float32"),),
             "cusolver_sytrd_ffi", "tridiagonal"),
        Case("tridiagonal_upper_c64", lambda a: lax.linalg.tridiagonal(a, lower=False), (((2, 4, 4), "complex64"),),
             "cusolver_sytrd_ffi", "tridiagonal"),
        Case("tridiagonal_solve", lambda dl, d, du, b: (lax.linalg.tridiagonal_solve(dl, d, du, b),),
             (((2, 6), "float32"), ((2, 6), "float32"), ((2, 6), "float32"), ((2, 6, 3), "float32")),
             "cusparse_gtsv2_ffi", "tridiagonal_solve"),
        Case("tridiagonal_solve_perturbed",
             lambda dl, d, du, b: (lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True),),
             (((5,), "float32"), ((5,), "float32"), ((5,), "float32"), ((5, 2), "float32")),
             "cu_tridiagonal_solve_perturbed", "tridiagonal_solve"),
        Case("ormqr", lambda a, taus, c: (lax.linalg.ormqr(a, taus, c, left=True, transpose=True),
                                          lax.linalg.ormqr(a, taus, c.T, left=False, transpose=False)),
             (((5, 3), "float32"), ((3,), "float32"), ((5, 4), "float32")), "cusolver_ormqr_ffi", "plain"),
        Case("qr_pivoting", lambda a: jax.scipy.linalg.qr(a, pivoting=True), (((5, 4), "float32"),),
             "cuhybrid_geqp3", "qr_pivoting"),
        Case("cholesky_update", lambda r, w: (lax.linalg.cholesky_update(r, w),),
             (((4, 4), "float32"), ((4,), "float32")), "cu_cholesky_update_ffi", "cholesky_update"),
        # symmetric_product on GPU: cuBLAS syrk writes the lower triangle (row-major), the
        # strictly upper one keeps c (the aliased operand)
        Case("syrk_f32", lambda a, c: (lax.linalg.symmetric_product(a, c, alpha=0.5, beta=2.0),),
             (((2, 4, 3), "float32"), ((2, 4, 4), "float32")), "cusolver_syrk_ffi", "syrk"),
        Case("syrk_symmetrized",
             lambda a, c: (lax.linalg.symmetric_product(a, c, alpha=1.0, beta=0.0, symmetrize_output=True),),
             (((3, 5), "float32"), ((3, 3), "float32")), "cusolver_syrk_ffi", "plain"),
    ] + sparse_cases()
    return {case.name: case for case in all_}


# jax.experimental.sparse's CSR and COO on GPU: the cuSPARSE calls (their descriptors are
# packed at lowering time by jaxlib, which needs a GPU: generate_dumps.py packs them itself).
# Inputs: a 5x6 matrix with 7 stored entries, sorted by row then column (what cuSPARSE's COO
# calls require), one entry stored twice (summed), and for COO/CSR products a vector or
# matrix operand.
SPARSE_SHAPE = (5, 6)
SPARSE_ROWS = np.array([0, 0, 1, 3, 3, 3, 4], np.int32)
SPARSE_COLS = np.array([1, 4, 0, 2, 2, 5, 3], np.int32)
SPARSE_INDPTR = np.array([0, 2, 3, 3, 6, 7], np.int32)


# spsolve's square CSR matrix: a diagonal (made dominant by the inputs) and 6 entries off it
SPSOLVE_ROWS = np.array([0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4], np.int32)
SPSOLVE_COLS = np.array([0, 3, 1, 4, 0, 2, 4, 1, 3, 2, 4], np.int32)
SPSOLVE_INDPTR = np.array([0, 2, 4, 7, 9, 11], np.int32)


def spsolve_reference(data, indices, indptr, b):
    """NumPy's dense solve of the CSR system (JAX on CPU runs spsolve as a SciPy callback)."""
    dense = np.zeros((len(b), len(b)), np.float64)
    rows = np.repeat(np.arange(len(b)), np.diff(indptr))
    np.add.at(dense, (rows, indices), data)
    return np.linalg.solve(dense, b.astype(np.float64)).astype(b.dtype)


def sparse_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    kind = case.kind.split("_", 1)[1]
    data = rng.standard_normal(7).astype(np.float32)
    out = []
    for shape, dtype in case.inputs:
        out.append(rng.standard_normal(shape).astype(dtype))
    if kind == "fromdense":
        dense = out[0] * (rng.random(SPARSE_SHAPE) < 0.3)
        return [dense.astype(np.float32)]
    if kind == "spsolve":
        data = (rng.standard_normal(len(SPSOLVE_COLS)) + 4 * (SPSOLVE_COLS == SPSOLVE_ROWS)).astype(np.float32)
        return [data, SPSOLVE_COLS, SPSOLVE_INDPTR] + out
    fmt = case.name.split("_")[0]
    head = [data, SPARSE_COLS, SPARSE_INDPTR] if fmt == "csr" else [data, SPARSE_ROWS, SPARSE_COLS]
    return head + out


def sparse_cases() -> list[Case]:
    from jax.experimental import sparse
    from jax.experimental.sparse.linalg import spsolve

    def csr(d, i, p):
        return sparse.CSR((d, i, p), shape=SPARSE_SHAPE)

    def coo(d, r, c):
        return sparse.COO((d, r, c), shape=SPARSE_SHAPE, rows_sorted=True)

    return [
        Case("csr_todense", lambda d, i, p: (csr(d, i, p).todense(),), (), "cusparse_csr_todense_ffi",
             "sparse_todense"),
        Case("coo_todense", lambda d, r, c: (coo(d, r, c).todense(),), (), "cusparse_coo_todense_ffi",
             "sparse_todense"),
        Case("csr_matvec", lambda d, i, p, x, y: (csr(d, i, p) @ x, csr(d, i, p).T @ y),
             (((6,), "float32"), ((5,), "float32")), "cusparse_csr_matvec_ffi", "sparse_product"),
        Case("csr_matmat", lambda d, i, p, x, y: (csr(d, i, p) @ x, csr(d, i, p).T @ y),
             (((6, 3), "float32"), ((5, 2), "float32")), "cusparse_csr_matmat_ffi", "sparse_product"),
        Case("coo_matvec", lambda d, r, c, x, y: (coo(d, r, c) @ x, coo(d, r, c).T @ y),
             (((6,), "float32"), ((5,), "float32")), "cusparse_coo_matvec_ffi", "sparse_product"),
        Case("coo_matmat", lambda d, r, c, x, y: (coo(d, r, c) @ x, coo(d, r, c).T @ y),
             (((6, 3), "float32"), ((5, 2), "float32")), "cusparse_coo_matmat_ffi", "sparse_product"),
        Case("csr_fromdense", lambda a: tuple(sparse.CSR.fromdense(a, nse=12)._bufs), (((5, 6), "float32"),),
             "cusparse_csr_fromdense_ffi", "sparse_fromdense"),
        Case("coo_fromdense", lambda a: tuple(sparse.COO.fromdense(a, nse=12)._bufs), (((5, 6), "float32"),),
             "cusparse_coo_fromdense_ffi", "sparse_fromdense"),
        # spsolve's matrix: 5x5 with 11 stored entries (SPSOLVE_*), nonsingular
        Case("csr_spsolve", lambda d, i, p, b: (spsolve(d, i, p, b, tol=1e-6),), (((5,), "float32"),),
             "cusolver_csrlsvqr_ffi", "sparse_spsolve", lambda d, i, p, b: (spsolve_reference(d, i, p, b),)),
    ]
