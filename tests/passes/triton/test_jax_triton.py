"""triton-kernels on jax-triton's calls: deviceless H100 dumps written by jax-triton 0.4.1
(Triton 3.9, jax 0.12.0.1; tests/passes/triton/generate_jax_triton.py) converted, run on
CPU and compared with NumPy on the same inputs (jax-triton has no interpret mode).  The
kernel is Triton IR *text* inside the compressed proto, which both supported jaxlibs read,
so every dump runs in both environments."""

from __future__ import annotations

import pathlib
import re
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.common.errors import ConverterError
from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes.triton.jax_triton_call import decode, message_class
from tests.passes.triton.generate import load_npz

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps" / "jax_triton"
CASES = ["jt_scaled_add", "jt_accumulate", "jt_autotuned"]


def _opaque_span(text: str) -> re.Match:
    m = re.search(r'backend_config=\{opaque = ("(?:[^"\\]|\\.)*")\}', text)
    assert m, "no jax-triton call in the dump"
    return m


def _opaque(text: str) -> bytes:
    from converter.hlo.mlir_dicts import parse_mlir_dict

    return parse_mlir_dict("{opaque = " + _opaque_span(text).group(1) + "}")["opaque"]


def _with_opaque(text: str, data: bytes, octal: bool = False) -> str:
    """The dump with another compressed proto: in the FFI dictionary (hex escapes, as XLA
    prints MLIR strings), or (`octal`) as the older `triton_kernel_call`'s whole
    backend_config string (C escapes, as XLA prints it)."""
    escape = (lambda b: f"\\{b:03o}") if octal else (lambda b: f"\\{b:02X}")
    escaped = "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else escape(b) for b in data)
    m = _opaque_span(text)
    if octal:
        text = text[:m.start()] + f'backend_config="{escaped}"' + text[m.end():]
        return text.replace('custom_call_target="triton_kernel_call_ffi"', 'custom_call_target="triton_kernel_call"') \
            .replace("api_version=API_VERSION_TYPED_FFI", "api_version=API_VERSION_STATUS_RETURNING")
    return text[:m.start(1)] + f'"{escaped}"' + text[m.end(1):]


def _run(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    module = convert_text(text, "jt.hlo")
    assert "triton_kernel_call" not in str(module)
    return program_from_module(module)(*inputs)


# x + scale·y may be contracted to one fused multiply-add by XLA's CPU backend (NumPy
# rounds the product first): apart by the product's rounding, ≤ 2^-24·|scale·y|, which
# for these O(1) inputs (|scale·y| < 20) is < 2e-6.
RTOL, ATOL = 2e-6, 2e-6


@pytest.mark.parametrize("name", CASES)
def test_dump_matches_numpy(name: str):
    inputs, want = load_npz(DUMPS / f"{name}.npz")
    got = _run((DUMPS / f"{name}.hlo").read_text(), inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)


def test_autotuned_set_runs_its_first_config():
    call = decode(_opaque((DUMPS / "jt_autotuned.hlo").read_text()))
    assert call.configs == 2 and call.config.startswith("BLOCK: 32,") and call.grid == (4, 1, 1)
    assert [p.kind for p in call.parameters] == ["array", "i32", "array"] and call.parameters[1].value == 100


def test_older_triton_kernel_call_form():
    """`triton_kernel_call` (custom-call API v2): the compressed proto is the whole backend_config."""
    text = (DUMPS / "jt_scaled_add.hlo").read_text()
    inputs, want = load_npz(DUMPS / "jt_scaled_add.npz")
    got = _run(_with_opaque(text, _opaque(text), octal=True), inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=RTOL, atol=ATOL)


def _edited(text: str, edit) -> str:
    message = message_class("TritonAnyKernelCall")()
    message.ParseFromString(zlib.decompress(_opaque(text)))
    edit(message)
    return _with_opaque(text, zlib.compress(message.SerializeToString()))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 100), scale=st.floats(-4, 4, width=32), blocks=st.integers(1, 4))
def test_scalar_parameters_and_grid_bind_as_the_proto_says(n: int, scale: float, blocks: int):
    """The real kernel with other scalar values (n: how many elements the mask lets
    through; scale) and grid sizes written into its proto: elements past n or past the
    grid's blocks stay zero (no program stores them; outputs start as zeros)."""
    text = (DUMPS / "jt_scaled_add.hlo").read_text()

    def edit(message):
        call = message.kernel_call
        call.grid_0 = blocks
        call.parameters[2].i32 = n
        call.parameters[3].f32 = scale

    rng = np.random.default_rng(n)
    x, y = (rng.standard_normal(100).astype(np.float32) for _ in range(2))
    [got] = _run(_edited(text, edit), [x, y])
    want = np.zeros(100, np.float32)
    live = min(n, 32 * blocks)
    want[:live] = x[:live] + np.float32(scale) * y[:live]
    # The product's rounding (see RTOL) plus each side's rounding of the sum:
    # ≤ 2^-24·|scale·y| + 2·2^-24·|result|; elements past `live` exactly zero.
    bound = 2.0 ** -23 * (np.abs(np.float32(scale) * y) + np.abs(want)) * (np.arange(100) < live)
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound), (got, want)


def test_an_unknown_parameter_kind_is_refused_by_name():
    text = (DUMPS / "jt_scaled_add.hlo").read_text()

    def edit(message):
        message.kernel_call.parameters[2].Clear()

    with pytest.raises(ConverterError) as e:
        convert_text(_edited(text, edit), "jt.hlo")
    assert re.match(r"jt\.hlo:\d+:\d+: error: ", str(e.value))
    assert "parameter 2 of jax-triton kernel 'scaled_add' is of a kind this reader does not know" in str(e.value)


def test_a_kernel_without_triton_ir_is_refused():
    text = (DUMPS / "jt_scaled_add.hlo").read_text()

    def edit(message):
        message.kernel_call.kernel.ttir = ""

    with pytest.raises(ConverterError) as e:
        convert_text(_edited(text, edit), "jt.hlo")
    assert "jax-triton kernel 'scaled_add' carries no Triton IR (ttir), only PTX" in str(e.value)


def test_block_pointers_are_refused_at_parse_time():
    """jaxlib's Triton dialect (0.10.2 and 0.12.0.1) has no tt.make_tensor_ptr / tt.advance
    (block pointers), so a kernel using them cannot be read: refused naming the op."""
    text = (DUMPS / "jt_scaled_add.hlo").read_text()
    block_ptr_kernel = """
module {
  tt.func public @scaled_add(%x: !tt.ptr<f32>) {
    %c0 = arith.constant 0 : i32
    %n = arith.constant 100 : i64
    %s = arith.constant 1 : i64
    %p = tt.make_tensor_ptr %x, [%n], [%s], [%c0] {order = array<i32: 0>} : <tensor<32xf32>>
    tt.return
  }
}"""

    def edit(message):
        message.kernel_call.kernel.ttir = block_ptr_kernel

    with pytest.raises(ConverterError) as e:
        convert_text(_edited(text, edit), "jt.hlo")
    message = str(e.value)
    assert re.match(r"jt\.hlo:\d+:\d+: error: ", message)
    assert "jax-triton kernel 'scaled_add': the kernel uses block pointers (tt.make_tensor_ptr, from " \
           "tl.make_block_ptr), which jaxlib's Triton dialect cannot read" in message
    assert "with pointer tensors" in message and "--custom-calls" in message


def test_inspect_lists_jax_triton_kernels():
    from converter.hlo.parser import parse_hlo
    from converter.tools.inspect import format_summary, summarize

    text = (DUMPS / "jt_autotuned.hlo").read_text()
    [kernel] = summarize(parse_hlo(text, "jt_autotuned.hlo"))["triton_kernels"]
    assert kernel["name"] == "autotuned_square (config 1 of 2)" and kernel["grid"] == "4x1x1"
    assert {"tt.load", "tt.store", "tt.get_program_id"} <= set(kernel["ops"])
    older = _with_opaque(text, _opaque(text), octal=True)
    summary = summarize(parse_hlo(older, "old.hlo"))
    assert summary["triton_kernels"][0]["name"] == "autotuned_square (config 1 of 2)"
    assert "autotuned_square (config 1 of 2)  4x1x1" in format_summary(summary)


def test_fp8_dot_is_exact_products_summed_in_f32():
    """tl.dot of two e4m3fn tiles with an f32 accumulator (a jax-triton kernel: a Pallas
    fp8 dot aborts XLA's deviceless compile).  Each product of two fp8 values is exact in
    f32 (4-bit significands); the K = 32 products are summed in f32, in some order: within
    (K + 1)·2^-24 of Σ|a||b| of the exact sum (NumPy in f64)."""
    import ml_dtypes

    inputs, _ = load_npz(DUMPS / "jt_fp8_dot.npz")
    a, b = inputs
    assert a.dtype == b.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    got = _run((DUMPS / "jt_fp8_dot.hlo").read_text(), inputs)[0]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert got.dtype == np.float32
    bound = (a.shape[1] + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    np.testing.assert_array_less(np.abs(got - a64 @ b64), bound)
