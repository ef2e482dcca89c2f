"""cusparse pass on hand-written calls in jaxlib's forms (the real dumps are checked in
tests/passes/linalg/test_gpu_linalg_dumps.py): gtsv2 in complex types against NumPy's dense
solve, and the CSR/COO calls refused, at their line, where the descriptor asks for what the
rewrite does not do.

Tolerance: c64 tridiagonal systems of order 6, diagonally dominant (condition < 10): the
solution agrees with NumPy's c128 dense solve to a few c64 ulps (2^-23); 2e-5 relative."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program


def gtsv2_module(dtype: str, batch: int, m: int, n: int) -> str:
    d, b = f"{dtype}[{batch},{m}]{{1,0}}", f"{dtype}[{batch},{m},{n}]{{1,2,0}}"
    return f"""HloModule gtsv2
ENTRY main {{
  dl = {d} parameter(0)
  d = {d} parameter(1)
  du = {d} parameter(2)
  b = {b} parameter(3)
  ROOT x = {b} custom-call(dl, d, du, b), custom_call_target="cusparse_gtsv2_ffi", operand_layout_constraints={{{d}, {d}, {d}, {b}}}, output_to_operand_aliasing={{{{}}: (3, {{}})}}, api_version=API_VERSION_TYPED_FFI, backend_config={{}}
}}
"""


@pytest.mark.parametrize("dtype, np_dtype", [("c64", np.complex64), ("f64", np.float64)])
def test_gtsv2_solves_like_numpy(dtype, np_dtype):
    rng = np.random.default_rng(3)
    batch, m, n = 2, 6, 3

    def draw(*shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if np.dtype(np_dtype).kind == "c" else x

    dl, du, b = draw(batch, m), draw(batch, m), draw(batch, m, n)
    d = np.abs(dl) + np.abs(du) + 2 + draw(batch, m)
    dl[:, 0] = 99  # not read (cuSPARSE and LAPACK both start dl at index 1)
    du[:, -1] = 99
    text = gtsv2_module(dtype, batch, m, n)
    assert "cusparse" not in str(convert_text(text))
    (x,) = convert_program(text)(*(v.astype(np_dtype) for v in (dl, d, du, b)))
    a = np.zeros((batch, m, m), np.complex128)
    for i in range(m):
        a[:, i, i] = d[:, i]
        if i:
            a[:, i, i - 1] = dl[:, i]
        if i < m - 1:
            a[:, i, i + 1] = du[:, i]
    want = np.linalg.solve(a, b)
    if np.dtype(np_dtype).kind == "f":
        want = want.real
    tol = 2e-5 if dtype == "c64" else 1e-12
    assert_close(x, want.astype(np_dtype), rtol=tol, atol=tol)


def csr_matvec_module(operation: int, *, use_workspace: bool = False, opaque: bytes | None = None,
                      rows: int = 5, cols: int = 6, nnz: int = 7) -> str:
    """jaxlib's CSR matvec call, its descriptor packed as jaxlib/gpu/sparse_kernels.h lays it out."""
    x_size, y_size = (rows, cols) if operation == 1 else (cols, rows)
    if opaque is None:
        opaque = (struct.pack("=7i", 0, 2, rows, cols, nnz, 1, 0) + struct.pack("=2i", 0, x_size)
                  + struct.pack("=2i", 0, y_size) + struct.pack("=i", operation))
    escaped = "".join(f"\\{b:02X}" for b in opaque)
    root = "w" if use_workspace else "y"
    return f"""HloModule csr
ENTRY main {{
  data = f32[{nnz}]{{0}} parameter(0)
  indices = s32[{nnz}]{{0}} parameter(1)
  indptr = s32[{rows + 1}]{{0}} parameter(2)
  x = f32[{x_size}]{{0}} parameter(3)
  c = (f32[{y_size}]{{0}}, s8[256]{{0}}) custom-call(data, indices, indptr, x), custom_call_target="cusparse_csr_matvec_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{opaque = "{escaped}"}}
  y = f32[{y_size}]{{0}} get-tuple-element(c), index=0
  w = s8[256]{{0}} get-tuple-element(c), index=1
  ROOT r = {"s8[256]{0}" if use_workspace else f"f32[{y_size}]{{0}}"} copy({root})
}}
"""


def test_csr_matvec_from_a_hand_packed_descriptor():
    data = np.arange(1, 8, dtype=np.float32)
    indices = np.array([1, 4, 0, 2, 3, 5, 3], np.int32)
    indptr = np.array([0, 2, 3, 3, 6, 7], np.int32)
    x = np.arange(6, dtype=np.float32) - 2
    dense = np.zeros((5, 6), np.float32)
    for r in range(5):
        for j in range(indptr[r], indptr[r + 1]):
            dense[r, indices[j]] += data[j]
    (y,) = convert_program(csr_matvec_module(0))(data, indices, indptr, x)
    np.testing.assert_array_equal(y, dense @ x)


@pytest.mark.parametrize("operation", [0, 1])
def test_large_csr_products_need_no_dense_matrix(operation):
    """A 40000 x 30000 CSR matrix with 80000 entries: its dense form would take 4.8 GB; the
    rewrite gathers and scatter-adds per entry.  Against SciPy-free NumPy: np.add.at of the
    same products (float64 sums, compared at f32 tolerance: rows of ~2 entries)."""
    rng = np.random.default_rng(11)
    rows, cols, nnz = 40000, 30000, 80000
    row = np.sort(rng.integers(0, rows, nnz))
    indptr = np.searchsorted(row, np.arange(rows + 1)).astype(np.int32)
    indices = rng.integers(0, cols, nnz).astype(np.int32)
    data = rng.standard_normal(nnz).astype(np.float32)
    x = rng.standard_normal(rows if operation else cols).astype(np.float32)
    (y,) = convert_program(csr_matvec_module(operation, rows=rows, cols=cols, nnz=nnz))(data, indices, indptr, x)
    want = np.zeros(cols if operation else rows)
    src, dst = (row, indices) if operation else (indices, row)
    np.add.at(want, dst, data.astype(np.float64) * x[src])
    assert_close(y, want.astype(np.float32), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("module, message", [
    (csr_matvec_module(2), r"cuSPARSE operation 2 \(conjugate transpose\) is not supported"),
    (csr_matvec_module(0, use_workspace=True), r"its workspace result \(the last\) is used"),
    (csr_matvec_module(0, opaque=struct.pack("=7i", 0, 2, 5, 6, 7, 3, 0) + bytes(20)),
     r"batched cuSPARSE calls \(batch count 3\)"),
    (csr_matvec_module(0, opaque=bytes(12)), r"descriptor of 12 bytes"),
])
def test_csr_calls_the_rewrite_cannot_give_a_meaning_are_refused_at_their_line(module, message):
    with pytest.raises(Exception, match=r":7:\d+: error: .*cusparse_csr_matvec_ffi.*" + message):
        convert_text(module)
