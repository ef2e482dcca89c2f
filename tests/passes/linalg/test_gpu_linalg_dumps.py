"""Real optimized GPU dumps (tests/passes/linalg/dumps/jax010 and jax012, written by
generate_dumps.py for one H100, deviceless, with jax 0.10.2 and 0.12.0.1) of the programs in
cases.py: jaxlib's cuSOLVER/cuSPARSE/hybrid calls that the cusolver and cusparse passes
rewrite.  Each converts with the default pipeline and runs on CPU; the oracle is JAX running
the same program on CPU (its own LAPACK lowering).  Decompositions defined only up to a
unit factor per vector (eigenvectors, singular vectors) are compared by what is invariant:
values (in JAX's order: both sides are LAPACK here, which orders them alike), A·V = V·Λ,
U·Σ·Vᴴ = A, orthonormality, and the vectors after fixing each one's phase.

Tolerances: f32/c64 inputs of order ≤ 7 with O(1) entries; a backward-stable decomposition
has residuals of a few ulps (2^-23) times n·‖A‖, 1e-4·‖A‖ leaves ~100x; where both sides
run the same LAPACK routine on the same input, the outputs differ only by how XLA compiles
the code around the call, TOLERANCES' float32 allowance (2e-5 relative, 1e-5 absolute)
with 10x for the eigenvectors of nearly defective random matrices (their condition)."""

from __future__ import annotations

import pathlib
import re

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program
from tests.passes.linalg.cases import cases, random_inputs

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
# The dumps of the running jax's version run by default, the other version's as slow tests
# (both environments run both sets when slow tests are asked for).
OWN_VERSION = "jax{}{:02d}".format(*map(int, jax.__version__.split(".")[:2]))
# Forms the default run sees elsewhere too (the property test runs csr_matmat and coo_matvec
# on many patterns; svd_polar the same call as svd_polar_full): slow tests.
SLOW_CASES = {"csr_matvec", "coo_matmat", "coo_todense", "svd_polar_full", "eig_left_c64"}
CASES = [pytest.param(version, name, id=f"{version}-{name}",
                      marks=[] if version == OWN_VERSION and name not in SLOW_CASES else [pytest.mark.slow])
         for version, name in sorted((p.parent.name, p.stem) for p in DUMPS.glob("jax*/*.hlo"))]
RESIDUAL = 1e-4


def _run(text: str, inputs):
    program = convert_program(text)
    assert "custom_call @cu" not in str(program.module) and "custom_call @hip" not in str(program.module)
    return [np.asarray(x) for x in program(*inputs)]


def _phase_fixed(v: np.ndarray) -> np.ndarray:
    """Each column divided by the phase of its largest entry (eigen- and singular vectors
    are unique only up to that)."""
    rows = np.argmax(np.abs(v), axis=-2)
    top = np.take_along_axis(v, rows[..., None, :], axis=-2)
    return v * (np.abs(top) / top)


def _residual(x: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(x)) / max(float(np.max(np.abs(scale))), 1.0))


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def check(kind: str, inputs: list[np.ndarray], got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
    a = inputs[0].astype(np.complex128)
    if kind in ("eig", "eig_left"):
        w_got, *vectors = got
        assert_close(w_got, want[0], rtol=2e-5, atol=2e-5, what="eigenvalues")
        for i, v in enumerate(vectors):
            v = v.astype(np.complex128)
            lam = w_got.astype(np.complex128)[..., None, :]
            left = kind == "eig_left" and i == 0
            # right: A v = v λ; left (LAPACK's vl): vᴴ A = λ vᴴ, i.e. Aᴴ v = v conj(λ)
            r = (_adjoint(a) @ v - v * np.conj(lam)) if left else (a @ v - v * lam)
            assert _residual(r, a) < RESIDUAL, kind
            np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, rtol=1e-5)
            assert_close(_phase_fixed(v), _phase_fixed(want[1 + i].astype(np.complex128)), rtol=2e-4, atol=2e-4,
                         what="eigenvectors")
    elif kind == "eigvals":
        assert_close(got[0], want[0], rtol=2e-5, atol=2e-5)
    elif kind == "svd":
        u, s, vt = got  # lax.linalg.svd's order
        u, vt = u.astype(np.complex128), vt.astype(np.complex128)
        assert_close(s, want[1], rtol=2e-5, atol=2e-5, what="singular values")
        k = s.shape[-1]
        rebuilt = (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :]
        assert _residual(rebuilt - a, a) < RESIDUAL
        for q in (_adjoint(u) @ u, vt @ _adjoint(vt)):
            assert _residual(q - np.eye(q.shape[-1]), np.ones(1)) < RESIDUAL
        assert_close(_phase_fixed(u[..., :, :k]), _phase_fixed(want[0].astype(np.complex128)[..., :, :k]),
                     rtol=1e-4, atol=1e-4, what="left singular vectors")
    elif kind == "svd_values":
        assert_close(got[0], want[0], rtol=2e-5, atol=2e-5)
    elif kind == "tridiagonal_solve":
        dl, d, du, b = (x.astype(np.complex128) for x in inputs)
        x = got[0].astype(np.complex128)
        product = d[..., None] * x
        product[..., 1:, :] += dl[..., 1:, None] * x[..., :-1, :]
        product[..., :-1, :] += du[..., :-1, None] * x[..., 1:, :]
        assert _residual(product - b, b) < RESIDUAL
        assert_close(got[0], want[0], rtol=2e-5, atol=1e-5)
    elif kind == "syrk":
        # JAX on CPU computes the whole alpha·a·aᵀ + beta·c; cuBLAS syrk writes only the lower
        # triangle, the strictly upper one is c as it was (the aliased operand): f32 dots of
        # length ≤ 5, TOLERANCES' float32 allowance
        c = inputs[1]
        lower = np.tril(np.ones(c.shape[-2:], bool))
        assert_close(np.where(lower, got[0], 0), np.where(lower, want[0], 0), rtol=2e-5, atol=1e-5)
        np.testing.assert_array_equal(np.where(lower, 0, got[0]), np.where(lower, 0, c))
    elif kind == "sparse_spsolve":
        # f32 QR solve of a diagonally dominant 5x5 system against NumPy's f64 solve
        assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)
    else:  # tridiagonal, qr_pivoting, ormqr, plain: the same LAPACK routine on both sides
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol=2e-5, atol=1e-5, what=f"output {i}")


@pytest.mark.parametrize("version, name", CASES)
def test_gpu_linalg_dump_matches_jax_on_cpu(version, name):
    case = cases()[name]
    text = (DUMPS / version / f"{name}.hlo").read_text()
    assert f'custom_call_target="{case.target}"' in text
    inputs = random_inputs(case)
    got = _run(text, inputs)
    if case.kind == "sparse_spsolve":  # JAX on CPU runs spsolve as a SciPy callback: NumPy's dense solve
        want = [np.asarray(x) for x in case.reference(*inputs)]
    else:
        want = [np.asarray(x) for x in jax.tree.leaves(jax.jit(case.reference or case.fn)(*inputs))]
    if case.kind == "cholesky_update":
        # jaxlib's GPU kernel rotates only the columns i ≥ k of row k (what is below the
        # diagonal stays as it was: zero); JAX's CPU fallback rotates them all, leaving
        # round-off below the diagonal.  Compare the factor, then RᵀR = A + wwᵀ.
        r, w = inputs
        assert np.all(np.tril(got[0], -1) == 0)
        assert_close(np.triu(got[0]), np.triu(want[0]), rtol=2e-5, atol=1e-5)
        a = r.T.astype(np.float64) @ r + np.outer(w, w)
        assert _residual(got[0].T.astype(np.float64) @ got[0] - a, a) < RESIDUAL
        return
    check(case.kind, inputs, got, want)


HIP_NAMES = {"cusolver_": "hipsolver_", "cuhybrid_": "hiphybrid_", "cusparse_": "hipsparse_", "cu_": "hip_"}


@pytest.mark.parametrize("name", ["svd_qr_wide_econ", "tridiagonal_solve", "cholesky_update", "syrk_f32",
                                  pytest.param("eig_f32", marks=pytest.mark.slow),
                                  pytest.param("qr_pivoting", marks=pytest.mark.slow),
                                  pytest.param("csr_matvec", marks=pytest.mark.slow)])
def test_hip_twins_convert_alike(name):
    """No ROCm compiler runs here: the hip twins are these dumps with the targets renamed
    (jaxlib registers the same handlers under the `hip` prefix), which must convert to the
    same numbers."""
    case = cases()[name]
    text = (DUMPS / "jax012" / f"{name}.hlo").read_text()
    hip = re.sub(r'custom_call_target="(cusolver_|cuhybrid_|cusparse_|cu_)',
                 lambda m: f'custom_call_target="{HIP_NAMES[m.group(1)]}', text)
    assert hip != text
    inputs = random_inputs(case)
    for g, w in zip(_run(hip, inputs), _run(text, inputs)):
        np.testing.assert_array_equal(g, w)


def test_geev_packs_conjugate_pairs_as_cusolver_does():
    """The real geev call's eigenvectors, read straight from the rewrite (before JAX's
    unpacking in the dump): LAPACK's packed form, columns (Re v, Im v) for a conjugate pair.
    A rotation block has eigenvalues ±i with v = (1, ∓i)/√2 (LAPACK: first of the pair +i)."""
    text = """HloModule geev
ENTRY main {
  a = f32[3,3]{0,1} parameter(0)
  e = (f32[3,3]{0,1}, c64[3]{0}, f32[3,3]{0,1}, f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="cusolver_geev_ffi", operand_layout_constraints={f32[3,3]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={left = false, right = true}
  w = c64[3]{0} get-tuple-element(e), index=1
  vr = f32[3,3]{0,1} get-tuple-element(e), index=3
  ROOT t = (c64[3]{0}, f32[3,3]{0,1}) tuple(w, vr)
}
"""
    a = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 2]], np.float32)
    w, vr = _run(text, [a])
    np.testing.assert_allclose(w, [1j, -1j, 2], atol=1e-6)
    s = np.sqrt(0.5)
    expected = np.array([[s, 0, 0], [0, -s, 0], [0, 0, 1]], np.float32)
    # LAPACK's vector for +i is (1, -i)/√2 up to a real sign: columns Re = (s, 0, 0), Im = (0, -s, 0)
    signs = np.sign(vr[np.argmax(np.abs(vr), axis=0), range(3)]) * np.sign(
        expected[np.argmax(np.abs(expected), axis=0), range(3)])
    np.testing.assert_allclose(vr * signs, expected, atol=1e-6)


def test_used_workspace_result_is_nan():
    """The first result of cuSOLVER's gesvd is its overwritten input: nothing defines it, so a
    program that reads it (a tap of the call does) gets NaN, not made-up numbers."""
    text = """HloModule gesvd
ENTRY main {
  a = f32[4,3]{0,1} parameter(0)
  e = (f32[4,3]{0,1}, f32[3]{0}, f32[4,4]{0,1}, f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="cusolver_gesvd_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_uv = true, full_matrices = true, transposed = false}
  ROOT w = f32[4,3]{0,1} get-tuple-element(e), index=0
}
"""
    (got,) = _run(text, [np.arange(12, dtype=np.float32).reshape(4, 3)])
    assert got.shape == (4, 3) and np.isnan(got).all()


@pytest.fixture(scope="module")
def sparse_programs():
    """The jax 0.12 CSR/COO dumps, converted once."""
    return {name: convert_program((DUMPS / "jax012" / f"{name}.hlo").read_text())
            for name in ("csr_matmat", "coo_matvec", "csr_fromdense", "coo_fromdense")}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_sparse_dumps_match_jax_for_any_pattern(sparse_programs, data):
    """Any stored pattern in the dumps' 5x6, 7-entry shape: repeated entries (summed), entries
    in any order (the CSR rows from any nondecreasing indptr, empty rows included), and
    dense matrices with any count of nonzeros, fewer or more than the 12 slots
    (fromdense keeps the first 12 in row-major order); against JAX's CPU result."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    values = rng.standard_normal(7).astype(np.float32)
    cols = rng.integers(0, 6, 7).astype(np.int32)
    rows = np.sort(rng.integers(0, 5, 7)).astype(np.int32)
    indptr = np.searchsorted(rows, np.arange(6)).astype(np.int32)  # CSR of the same rows
    x, y = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
    v, w = rng.standard_normal(6).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    dense = (rng.standard_normal((5, 6)) * (rng.random((5, 6)) < data.draw(st.floats(0, 1)))).astype(np.float32)
    for name, inputs in (("csr_matmat", [values, cols, indptr, x, y]), ("coo_matvec", [values, rows, cols, v, w]),
                         ("csr_fromdense", [dense]), ("coo_fromdense", [dense])):
        case = cases()[name]
        got = [np.asarray(g) for g in sparse_programs[name](*inputs)]
        want = [np.asarray(t) for t in jax.tree.leaves(jax.jit(case.fn)(*inputs))]
        for i, (g, t) in enumerate(zip(got, want)):
            assert_close(g, t, rtol=2e-5, atol=1e-5, what=f"{name} output {i}")


def test_singular_tridiagonal_system_gives_nan_as_jax_on_cpu():
    """gtsv2 does not report a singular system; JAX on CPU (LAPACK gtsv) answers NaN for it,
    and so does the rewrite (a zero column makes the matrix singular)."""
    case = cases()["tridiagonal_solve"]
    dl, d, du, b = random_inputs(case)
    dl[1, 3], d[1, 3], du[1, 3] = 0, 0, 0  # row 3 of system 1 is zero
    dl[1, 4] = du[1, 2] = 0
    d[1, 3] = 0
    got = _run((DUMPS / "jax012" / "tridiagonal_solve.hlo").read_text(), [dl, d, du, b])[0]
    want = np.asarray(jax.jit(case.fn)(dl, d, du, b)[0])
    assert np.isnan(want[1]).all() and np.isnan(got[1]).all()
    assert_close(got[0], want[0], rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["svd_qr_tall", "svd_qr_c64"])
def test_hipsolver_gesdd_is_lapacks_gesdd(name):
    """`hipsolver_gesdd_ffi` (SvdAlgorithm.DIVIDE_AND_CONQUER, ROCm only) takes gesvd's
    operands and attributes with transposed = false: the gesvd dumps with that target, against
    JAX's CPU SVD (invariants, as for gesvd)."""
    case = cases()[name]
    text = (DUMPS / "jax012" / f"{name}.hlo").read_text().replace('"cusolver_gesvd_ffi"', '"hipsolver_gesdd_ffi"')
    assert "hipsolver_gesdd_ffi" in text and "transposed = false" in text
    inputs = random_inputs(case)
    program = convert_program(text)
    assert "lapack_sgesdd_ffi" in str(program.module) or "lapack_cgesdd_ffi" in str(program.module)
    got = [np.asarray(x) for x in program(*inputs)]
    check("svd", inputs, got, [np.asarray(x) for x in jax.tree.leaves(jax.jit(case.fn)(*inputs))])
