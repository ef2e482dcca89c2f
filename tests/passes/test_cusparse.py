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
                      rows: int = 5, cols: int = 6, nnz: int = 7, dtype: str = "f32") -> str:
    """jaxlib's CSR matvec call, its descriptor packed as jaxlib/gpu/sparse_kernels.h lays it out
    (cudaDataType_t: 0 f32, 4 c64)."""
    x_size, y_size = (rows, cols) if operation else (cols, rows)
    code = {"f32": 0, "c64": 4}[dtype]
    if opaque is None:
        opaque = (struct.pack("=7i", code, 2, rows, cols, nnz, 1, 0) + struct.pack("=2i", code, x_size)
                  + struct.pack("=2i", code, y_size) + struct.pack("=i", operation))
    escaped = "".join(f"\\{b:02X}" for b in opaque)
    root = "w" if use_workspace else "y"
    return f"""HloModule csr
ENTRY main {{
  data = {dtype}[{nnz}]{{0}} parameter(0)
  indices = s32[{nnz}]{{0}} parameter(1)
  indptr = s32[{rows + 1}]{{0}} parameter(2)
  x = {dtype}[{x_size}]{{0}} parameter(3)
  c = ({dtype}[{y_size}]{{0}}, s8[256]{{0}}) custom-call(data, indices, indptr, x), custom_call_target="cusparse_csr_matvec_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{opaque = "{escaped}"}}
  y = {dtype}[{y_size}]{{0}} get-tuple-element(c), index=0
  w = s8[256]{{0}} get-tuple-element(c), index=1
  ROOT r = {"s8[256]{0}" if use_workspace else f"{dtype}[{y_size}]{{0}}"} copy({root})
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
    (csr_matvec_module(3), r"cuSPARSE operation 3 is none of 0 \(A\), 1 \(Aᵀ\), 2 \(Aᴴ\)"),
    (csr_matvec_module(0, use_workspace=True), r"its workspace result \(the last\) is used"),
    (csr_matvec_module(0, opaque=struct.pack("=7i", 0, 2, 5, 6, 7, 3, 0) + bytes(20)),
     r"batched cuSPARSE calls \(batch count 3\) are not supported: jaxlib batches only the COO matmat"),
    (csr_matvec_module(0, opaque=bytes(12)), r"descriptor of 12 bytes"),
])
def test_csr_calls_the_rewrite_cannot_give_a_meaning_are_refused_at_their_line(module, message):
    with pytest.raises(Exception, match=r":7:\d+: error: .*cusparse_csr_matvec_ffi.*" + message):
        convert_text(module)


@pytest.mark.parametrize("operation", [1, 2])
def test_complex_csr_matvec_transpose_and_conjugate_transpose(operation):
    """cuSPARSE's operation 1 is Aᵀ x, 2 is Aᴴ x (no conjugation of x): against NumPy on the
    dense matrix (c64 sums of ≤ 3 products, TOLERANCES' complex64 allowance)."""
    rng = np.random.default_rng(operation)
    data = (rng.standard_normal(7) + 1j * rng.standard_normal(7)).astype(np.complex64)
    indices = np.array([1, 4, 0, 2, 3, 5, 3], np.int32)
    indptr = np.array([0, 2, 3, 3, 6, 7], np.int32)
    x = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
    dense = np.zeros((5, 6), np.complex128)
    np.add.at(dense, (np.repeat(np.arange(5), np.diff(indptr)), indices), data)
    op_a = dense.T if operation == 1 else dense.conj().T
    (y,) = convert_program(csr_matvec_module(operation, dtype="c64"))(data, indices, indptr, x)
    assert_close(y, (op_a @ x).astype(np.complex64), rtol=2e-5, atol=1e-5)


def batched_coo_matmat_module(batch: int, rows: int, cols: int, nnz: int, ccols: int, transpose: bool,
                              shared_b: bool = False, a_stride: int | None = None) -> str:
    """jaxlib's COO matmat with a strided batch, its descriptor as
    jax/experimental/sparse/_lowerings.py `_coo_spmm_gpu_lowering` packs it for shape
    (batch, rows, cols): A stride nnz, B stride B_rows·Ccols (0: one shared B), C packed."""
    b_rows, c_rows = (rows, cols) if transpose else (cols, rows)
    opaque = (struct.pack("=7i", 0, 2, rows, cols, nnz, batch, nnz if a_stride is None else a_stride)
              + struct.pack("=5i", 0, b_rows, ccols, batch, 0 if shared_b else b_rows * ccols)
              + struct.pack("=5i", 0, c_rows, ccols, batch, c_rows * ccols) + struct.pack("=i", int(transpose)))
    escaped = "".join(f"\\{b:02X}" for b in opaque)
    x_rows = b_rows if shared_b else batch * b_rows
    return f"""HloModule coo
ENTRY main {{
  data = f32[{batch * nnz}]{{0}} parameter(0)
  row = s32[{batch * nnz}]{{0}} parameter(1)
  col = s32[{batch * nnz}]{{0}} parameter(2)
  x = f32[{x_rows},{ccols}]{{1,0}} parameter(3)
  c = (f32[{batch * c_rows},{ccols}]{{1,0}}, s8[256]{{0}}) custom-call(data, row, col, x), custom_call_target="cusparse_coo_matmat_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={{opaque = "{escaped}"}}
  ROOT y = f32[{batch * c_rows},{ccols}]{{1,0}} get-tuple-element(c), index=0
}}
"""


@pytest.mark.parametrize("transpose, shared_b", [(False, False), (True, False), (False, True)])
def test_batched_coo_matmat_is_one_product_per_batch(transpose, shared_b):
    """3 batches of a 4x5 COO matrix with 6 entries (one out of bounds, dropped as
    jax.experimental.sparse drops it), each times its own B (or one shared B): against
    jax.experimental.sparse's COO product on CPU, batch by batch (f32, ≤ 6-term sums)."""
    from jax.experimental import sparse

    batch, rows, cols, nnz, ccols = 3, 4, 5, 6, 2
    rng = np.random.default_rng(int(transpose) + 2 * int(shared_b))
    data = rng.standard_normal(batch * nnz).astype(np.float32)
    row = np.sort(rng.integers(0, rows, (batch, nnz)), axis=1).astype(np.int32)
    col = rng.integers(0, cols, (batch, nnz)).astype(np.int32)
    col[1, -1] = cols  # out of bounds: not stored
    b_rows, c_rows = (rows, cols) if transpose else (cols, rows)
    x = rng.standard_normal(((1 if shared_b else batch) * b_rows, ccols)).astype(np.float32)
    text = batched_coo_matmat_module(batch, rows, cols, nnz, ccols, transpose, shared_b)
    (y,) = convert_program(text)(data, row.ravel(), col.ravel(), x)
    for i in range(batch):
        keep = col[i] < cols
        mat = sparse.COO((data.reshape(batch, nnz)[i][keep], row[i][keep], col[i][keep]), shape=(rows, cols))
        xi = x if shared_b else x[i * b_rows:(i + 1) * b_rows]
        want = np.asarray((mat.T if transpose else mat) @ xi)
        assert_close(y[i * c_rows:(i + 1) * c_rows], want, rtol=2e-5, atol=1e-5, what=f"batch {i}")


def test_batched_coo_matmat_with_other_strides_is_refused():
    text = batched_coo_matmat_module(3, 4, 5, 6, 2, False, a_stride=8)
    with pytest.raises(Exception, match=r":7:\d+: error: .*cusparse_coo_matmat_ffi.*strides A 8"):
        convert_text(text)
