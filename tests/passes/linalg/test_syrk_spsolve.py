"""cuBLAS syrk (`cusolver_syrk_ffi`, lax.linalg.symmetric_product on GPU) and cuSOLVER's sparse
QR solve (`cusolver_csrlsvqr_ffi`, jax.experimental.sparse.linalg.spsolve) beyond the dumps of
test_gpu_linalg_dumps.py: both `transpose` forms with alpha and beta as runtime operands,
beta = 0 (cuBLAS does not read C), and the singular systems for which the GPU program stops
(NaN here).  Oracles: NumPy in f64 (the products and solves), and the triangle rule read in
jaxlib's jaxlib/gpu/solver_kernels_ffi.cc (SyrkImpl: uplo upper of the column-major C)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program
from tests.passes.linalg.cases import SPSOLVE_COLS, SPSOLVE_INDPTR, SPSOLVE_ROWS, spsolve_reference

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"

SYRK = """HloModule syrk
ENTRY main {{
  a = f32[2,{rows},{cols}]{{2,1,0}} parameter(0)
  c = f32[2,{n},{n}]{{2,1,0}} parameter(1)
  alpha = f32[] parameter(2)
  beta = f32[] parameter(3)
  ROOT s = f32[2,{n},{n}]{{2,1,0}} custom-call(a, c, alpha, beta), custom_call_target="cusolver_syrk_ffi", output_to_operand_aliasing={{{{}}: (1, {{}})}}, api_version=API_VERSION_TYPED_FFI, backend_config={{transpose = {transpose}}}
}}
"""


@pytest.fixture(scope="module")
def syrk_programs():
    return {transpose: convert_program(SYRK.format(rows=4, cols=3, n=3 if transpose else 4,
                                                   transpose=str(transpose).lower()))
            for transpose in (False, True)}


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_syrk_writes_the_lower_triangle(syrk_programs, data):
    """Lower triangle (diagonal included) = alpha·a·aᵀ + beta·c (transpose: aᵀ·a), strictly
    upper = c unchanged; with beta = 0, c's values are not read (NaN and ∞ included).
    f32 dots of length ≤ 4 against NumPy's f64: TOLERANCES' float32 allowance."""
    transpose = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    alpha = np.float32(data.draw(st.sampled_from([0.0, 1.0, -0.5, 3.0])))
    beta = np.float32(data.draw(st.sampled_from([0.0, 1.0, 2.0, -1.5])))
    n = 3 if transpose else 4
    a = rng.standard_normal((2, 4, 3)).astype(np.float32)
    c = rng.standard_normal((2, n, n)).astype(np.float32)
    if beta == 0:
        c[0, -1, 0] = np.nan
        c[1, 0, 0] = np.inf
    got = np.asarray(syrk_programs[transpose](a, c, alpha, beta)[0])
    a64 = a.astype(np.float64)
    product = np.swapaxes(a64, -1, -2) @ a64 if transpose else a64 @ np.swapaxes(a64, -1, -2)
    want_lower = alpha * product + (beta * c.astype(np.float64) if beta != 0 else 0)
    lower = np.tril(np.ones((n, n), bool))
    assert np.isfinite(np.where(lower, got, 0)).all()
    assert_close(np.where(lower, got, 0), np.where(lower, want_lower, 0).astype(np.float32), rtol=2e-5, atol=1e-5)
    np.testing.assert_array_equal(np.where(lower, 0, got), np.where(lower, 0, c))


def test_syrk_with_a_wrong_c_shape_is_refused_at_its_line():
    text = SYRK.format(rows=4, cols=3, n=3, transpose="false")  # a aᵀ is 4x4, c is 3x3
    with pytest.raises(Exception, match=r":7:\d+: error: .*cusolver_syrk_ffi.*expects c and the result of shape"):
        convert_text(text)


def _spsolve_inputs(seed: int):
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal(len(SPSOLVE_COLS)) + 4 * (SPSOLVE_COLS == SPSOLVE_ROWS)).astype(np.float32)
    return data, rng.standard_normal(5).astype(np.float32)


@pytest.fixture(scope="module")
def spsolve_program():
    return convert_program((DUMPS / "jax012" / "csr_spsolve.hlo").read_text())


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.5, 8.0))
def test_spsolve_matches_numpy(spsolve_program, seed, diagonal):
    """Any values on the dump's pattern with a diagonal shift in [0.5, 8] (condition numbers up
    to a few hundred): against NumPy's f64 solve, f32 residual-level agreement (1e-3
    relative to the solution's scale, for κ ≤ ~300 times f32's 6e-8)."""
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal(len(SPSOLVE_COLS)) + diagonal * (SPSOLVE_COLS == SPSOLVE_ROWS)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    dense = np.zeros((5, 5))
    np.add.at(dense, (SPSOLVE_ROWS, SPSOLVE_COLS), data)
    if np.linalg.cond(dense) > 300:
        return
    got = np.asarray(spsolve_program(data, SPSOLVE_COLS, SPSOLVE_INDPTR, b)[0])
    want = spsolve_reference(data, SPSOLVE_COLS, SPSOLVE_INDPTR, b)
    assert_close(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.max(np.abs(want)))))


def test_spsolve_of_a_singular_matrix_is_nan(spsolve_program):
    """Row 3 and column 3 zero: R has a zero on its diagonal; the GPU program stops there
    ("Singular matrix in linear solve."), the converted one answers NaN."""
    data, b = _spsolve_inputs(1)
    data[(SPSOLVE_ROWS == 3) | (SPSOLVE_COLS == 3)] = 0
    got = np.asarray(spsolve_program(data, SPSOLVE_COLS, SPSOLVE_INDPTR, b)[0])
    assert np.isnan(got).all()


def test_spsolve_sums_entries_stored_twice():
    """Two stored entries at one position add up (as scipy's CSR, the CPU lowering's, does)."""
    text = (DUMPS / "jax012" / "csr_spsolve.hlo").read_text()
    program = convert_program(text)
    data, b = _spsolve_inputs(2)
    cols = SPSOLVE_COLS.copy()
    cols[1] = 0  # row 0: (0,0) stored twice
    got = np.asarray(program(data, cols, SPSOLVE_INDPTR, b)[0])
    assert_close(got, spsolve_reference(data, cols, SPSOLVE_INDPTR, b), rtol=1e-4, atol=1e-5)


def test_gesvdj_with_too_few_results_is_refused_at_its_line():
    """A malformed gesvdj call (4 results, no info) is a located error, not an IndexError."""
    text = """HloModule gesvdj
ENTRY main {
  a = f32[4,3]{1,0} parameter(0)
  e = (f32[4,3]{1,0}, f32[3]{0}, f32[4,4]{1,0}, f32[3,3]{1,0}) custom-call(a), custom_call_target="cusolver_gesvdj_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_uv = true, full_matrices = true}
  ROOT s = f32[3]{0} get-tuple-element(e), index=1
}
"""
    with pytest.raises(Exception, match=r":4:\d+: error: .*cusolver_gesvdj_ffi.*expects 5 results \(a, s, u, v, info\), got 4"):
        convert_text(text)


def test_complex_syrk_does_not_conjugate():
    """cuBLAS csyrk is a·aᵀ, not herk's a·aᴴ (JAX's lowering takes real types only; the kernel
    takes c64/c128 too): against NumPy in c128, TOLERANCES' complex64 allowance."""
    text = SYRK.format(rows=4, cols=3, n=4, transpose="false").replace("f32[", "c64[")
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((2, 4, 3)) + 1j * rng.standard_normal((2, 4, 3))).astype(np.complex64)
    c = (rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))).astype(np.complex64)
    alpha, beta = np.complex64(0.5 - 1j), np.complex64(2.0)
    got = np.asarray(convert_program(text)(a, c, alpha, beta)[0])
    a128 = a.astype(np.complex128)
    want = alpha * (a128 @ np.swapaxes(a128, -1, -2)) + beta * c
    lower = np.tril(np.ones((4, 4), bool))
    assert_close(np.where(lower, got, 0), np.where(lower, want, 0).astype(np.complex64), rtol=2e-5, atol=1e-5)
    np.testing.assert_array_equal(np.where(lower, 0, got), np.where(lower, 0, c))
