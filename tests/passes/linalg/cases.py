"""The programs behind tests/passes/linalg/dumps/: jaxlib's GPU linear-algebra calls that the
cusolver and cusparse passes rewrite (non-symmetric eig, SVD by QR and polar iteration, the
tridiagonal reduction and solves, ormqr, pivoted QR, Cholesky update).

Imports only jax and numpy: `generate_dumps.py` runs it in an environment with jax[cuda12]
(no project code), the tests import it with the project and run each function with JAX on
CPU as the oracle.  Each case names the GPU call its dump must hold."""

from __future__ import annotations

from dataclasses import dataclass
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
    ]
    return {case.name: case for case in all_}
