"""cusolver_potrf_ffi (jax.lax.linalg.cholesky on GPU) → a Cholesky loop + info, run on
CPU and checked against NumPy's Cholesky; info against the LAPACK/cuSOLVER definition (the
order of the first leading minor that is not positive definite).

Tolerance: f32 Cholesky of well-conditioned (diagonally dominated) matrices of order 5 agrees
with NumPy's f64 result to ~1e-6 relative; 1e-5 leaves room for the algorithm's order."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program


def potrf_module(batch: tuple[int, ...], n: int, lower: bool, layout: str) -> str:
    dims = ",".join(map(str, (*batch, n, n)))
    info_dims = ",".join(map(str, batch))
    info_layout = "{" + ",".join(map(str, reversed(range(len(batch))))) + "}" if batch else ""
    return f"""HloModule potrf
ENTRY main {{
  a = f32[{dims}]{{{layout}}} parameter(0)
  c = (f32[{dims}]{{{layout}}}, s32[{info_dims}]{info_layout}) custom-call(a), custom_call_target="cusolver_potrf_ffi", output_to_operand_aliasing={{{{0}}: (0, {{}})}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims="{len(batch)}"}}, backend_config={{lower = {str(lower).lower()}}}
  f = f32[{dims}]{{{layout}}} get-tuple-element(c), index=0
  i = s32[{info_dims}]{info_layout} get-tuple-element(c), index=1
  ROOT r = (f32[{dims}]{{{layout}}}, s32[{info_dims}]{info_layout}) tuple(f, i)
}}
"""


def spd(rng: np.random.Generator, batch: tuple[int, ...], n: int) -> np.ndarray:
    a = rng.standard_normal((*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch, layout", [((), "0,1"), ((3,), "1,2,0"), ((2, 2), "3,2,1,0")])
def test_factor_matches_numpy(batch, layout, lower):
    rng = np.random.default_rng(len(batch))
    a = spd(rng, batch, 5)
    text = potrf_module(batch, 5, lower, layout)
    assert "custom_call" not in str(convert_text(text))
    factor, info = convert_program(text)(a)
    want = np.linalg.cholesky(a.astype(np.float64))
    if lower:
        got = np.tril(factor)
    else:  # the upper factor U with A = Uᴴ U is the transposed lower one
        got, want = np.triu(factor), np.swapaxes(want, -1, -2)
    assert_close(got, want.astype(np.float32), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(info, np.zeros(batch, np.int32))


@pytest.mark.parametrize("lower", [True, False])
def test_complex_factor_matches_numpy(lower):
    """c64: the factor of a Hermitian matrix, A = L Lᴴ (lower) or Uᴴ U (upper)."""
    rng = np.random.default_rng(7)
    z = rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))
    a = (z @ np.conj(np.swapaxes(z, -1, -2)) + 4 * np.eye(4)).astype(np.complex64)
    text = potrf_module((2,), 4, lower, "1,2,0").replace("f32[", "c64[")
    assert "custom_call" not in str(convert_text(text))
    factor, info = convert_program(text)(a)
    want = np.linalg.cholesky(a.astype(np.complex128))
    if lower:
        got = np.tril(factor)
    else:
        got, want = np.triu(factor), np.conj(np.swapaxes(want, -1, -2))
    assert_close(got, want.astype(np.complex64), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(info, np.zeros((2,), np.int32))
    a[1, 2, 2] = -50.0  # leading minors 1 and 2 stay positive definite, minor 3 does not
    _, info = convert_program(text)(a)
    np.testing.assert_array_equal(info, [0, 3])


def test_info_names_the_first_minor_that_is_not_positive_definite():
    rng = np.random.default_rng(5)
    a = spd(rng, (3,), 4)
    a[1, 2, 2] = -50.0  # leading minors 1 and 2 stay positive definite, minor 3 does not
    a[2, 0, 0] = -1.0  # minor 1 fails
    factor, info = convert_program(potrf_module((3,), 4, True, "1,2,0"))(a)
    np.testing.assert_array_equal(info, [0, 3, 1])
    assert_close(np.tril(factor[0]), np.linalg.cholesky(a[0].astype(np.float64)).astype(np.float32),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_lu_pivots_to_permutation_matches_jax(batch):
    """cu_lu_pivots_to_permutation against jax.lax.linalg.lu_pivots_to_permutation (CPU),
    with pivots past the permutation's size, which the kernel skips."""
    import jax

    rng = np.random.default_rng(1)
    k, size = 5, 7
    pivots = np.stack([rng.integers(i, size, np.prod(batch, dtype=int)) for i in range(k)], -1)
    pivots = pivots.reshape(*batch, k).astype(np.int32)
    dims = ",".join(map(str, (*batch, k)))
    out_dims = ",".join(map(str, (*batch, size)))
    text = f"""HloModule pivots
ENTRY main {{
  p = s32[{dims}] parameter(0)
  ROOT q = s32[{out_dims}] custom-call(p), custom_call_target="cu_lu_pivots_to_permutation", api_version=API_VERSION_TYPED_FFI, backend_config={{}}
}}
"""
    assert "custom_call" not in str(convert_text(text))
    (got,) = convert_program(text)(pivots)
    want = jax.lax.linalg.lu_pivots_to_permutation(pivots, size)
    np.testing.assert_array_equal(got, np.asarray(want))
