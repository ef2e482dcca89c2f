"""`xla.gpu.ext.cub_scan` in the form of XLA's EstimateCubScanScratchSize test (one operand,
(out, u8 scratch), vector/row/column lengths, kind, is_reverse), rewritten by the default
pipeline and checked against NumPy's cumsum over each physical row — the kernel test's own
expectation (rows of row_length contiguous elements, column_length of them).

No XLA oracle: the `scan` these calls replace is not an opcode jaxlib 0.10.2's or 0.12's XLA
parses. Tolerances: f32 prefix sums of ≤ 100 values ~1 in a possibly different order:
1e-5 relative plus 1e-5 absolute; integer sums exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program


def module(dtype: str, dims: tuple[int, ...], layout: str, row: int, column: int, target: str = "xla.gpu.ext.cub_scan",
           reverse: bool = False, ffi_dict: bool = False, operands: int = 1) -> str:
    shape = f"{dtype}[{','.join(map(str, dims))}]{{{layout}}}"
    if ffi_dict:
        config = (f"{{column_length = {column} : i64, is_reverse = {str(reverse).lower()}, kind = 1 : i32, "
                  f"row_length = {row} : i64, vector_length = 1 : i64}}")
    else:
        config = (f'{{"vector_length":1, "row_length":{row}, "column_length":{column}, "kind":1, '
                  f'"is_reverse":{str(reverse).lower()}}}')
    extra = f"\n  init = {dtype}[] parameter(1)" if operands == 2 else ""
    args = "input, init" if operands == 2 else "input"
    return f"""HloModule m
ENTRY main {{
  input = {shape} parameter(0){extra}
  c = ({shape}, u8[767]{{0}}) custom-call({args}), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={config}
  ROOT t = {shape} get-tuple-element(c), index=0
}}
"""


@pytest.mark.parametrize("ffi_dict", [False, True], ids=["json", "ffi_dict"])
def test_one_row_is_a_cumulative_sum(ffi_dict):
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    out = convert_program(module("f32", (100,), "0", 100, 1, ffi_dict=ffi_dict))(x)[0]
    assert_close(out, np.cumsum(x, dtype=np.float32), rtol=1e-5, atol=1e-5)


def test_rows_of_a_row_major_matrix_and_the_unassigned_form():
    x = np.random.default_rng(1).integers(-5, 6, (3, 5)).astype(np.int32)
    out = convert_program(module("s32", (3, 5), "1,0", 5, 3, target="xla.gpu.ext.cub_scan_unassigned_scratch_size"))(x)[0]
    assert_close(out, np.cumsum(x, axis=1).astype(np.int32))


def test_column_major_layout_scans_the_physically_minor_dimension():
    """f32[4,6]{0,1}: dim 0 is contiguous, so each of the 6 rows is a column of the array."""
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    out = convert_program(module("f32", (4, 6), "0,1", 4, 6))(x)[0]
    assert_close(out, np.cumsum(x, axis=0, dtype=np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,kwargs,message", [
    ("f32", {"reverse": True}, r"is_reverse=true: .*cub_scan_kernel_cuda_impl.*Only forward scan is supported"),
    ("f32", {"operands": 2}, r"2 operands: XLA's scan rewriter .*writes the input alone.*binds one argument"),
    ("c64", {}, r"element type complex<f32>: .*Unsupported element type for CUB scan"),
])
def test_calls_the_gpu_does_not_run_are_located_errors(dtype, kwargs, message):
    """Each form the GPU program would not run either is refused with the reason XLA gives."""
    with pytest.raises(ConverterError, match=r"<test>:\d+:\d+: .*" + message):
        convert_program(module(dtype, (8,), "0", 8, 1, **kwargs))
