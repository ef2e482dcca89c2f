"""triton-kernels: deviceless H100 dumps of Pallas GPU kernels (tests/passes/triton/dumps/jax010
and jax012, made by tests/passes/triton/generate.py with jax[cuda12] 0.10.2 and
0.12.0.1) converted, run on CPU, and compared with the same pallas_call run by Pallas'
interpreter on CPU by the jax that made the dump (the .npz beside each dump).

Triton bytecode is readable only by the jaxlib that wrote it (measured both ways), so each
environment converts its own jax's dumps and checks that the other jax's are refused with
the writer, the installed jax and the route named."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes.triton.kernel import PRODUCERS, bytecode_producer, installed_producer
from tests.passes.triton.generate import load_npz

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
FOLDERS = ["jax010", "jax012"]
MOSAIC_GPU = {("jax010", "mosaic_gpu_default")}  # jax 0.10's default GPU backend

# Kernels that sum in another order than the interpreter (a pairwise tree for tt.reduce,
# log-step scans, XLA's dot): f32 rounding of sums of ≤ 512 terms, a few ulps of the
# output's scale.
REORDERED = {"cumsum", "reductions", "softmax_rows", "softmax", "layer_norm", "rms_norm", "matmul_f32",
             "matmul_bf16", "layer_norm_grad", "rms_norm_grad"}
# Each kernel costs ~2-3 s here (the while loop's XLA compile, the bytecode check in a
# child process): the default run keeps one kernel per op family, the slow run has all.
SLOW = {"add", "matmul_f32", "matmul_bf16", "softmax_rows", "mixed_dtypes", "layer_norm", "mha_causal",
        "reductions", "rms_norm", "math_zoo", "mosaic_gpu_default", "strided", "int_ops", "layer_norm_grad",
        "rms_norm_grad", "mha_causal_grad", "decode_mqa", "paged_attention", "grid2d", "cumsum", "atomic_add",
        "mha_segments_grad"}
TF32 = {"matmul_tf32", "mha_causal", "mha_segments"}
# Attention kernels whose dots (default precision: TF32) chain through a softmax (decode,
# paged) or through the backward pass (dq, dk, dv: up to four dots deep).  Each TF32 dot
# moves its result by ≤ 2·2^-11 of the sum of its |terms|; through the chain that is an
# estimate of 16·2^-11 ≈ 8e-3 of the output's scale (measured: 0.6e-3 to 1.8e-3).
TF32_CHAINED = {"mha_causal_grad", "decode_mqa", "paged_attention", "mha_segments_grad", "paged_attention_quantized"}


def _cases(folder: str) -> list[str]:
    return sorted(json.loads((DUMPS / folder / "manifest.json").read_text()))


def _kernel_bytes(text: str) -> bytes:
    from converter.hlo.mlir_dicts import parse_mlir_dict

    m = re.search(r'custom_call_target="__gpu\$xla\.gpu\.triton".*?backend_config=(\{.*?\})(?:, [a-z_]+=|\n)', text)
    assert m, "no Triton call in the dump"
    return parse_mlir_dict(m.group(1))["ir"]


def _readable(folder: str, name: str) -> bool:
    return bytecode_producer(_kernel_bytes((DUMPS / folder / f"{name}.hlo").read_text())) == installed_producer()


def _tf32_bound(name: str, inputs: list[np.ndarray]) -> np.ndarray | float:
    """How far a TF32 kernel may be from the interpreter's exact-f32 result: each f32
    operand of a dot rounded to 10 mantissa bits (relative error ≤ 2^-11 each, so a
    product's ≤ 2·2^-11 + 2^-22), plus f32 rounding of the sums."""
    u = 2.0 ** -11
    if name == "matmul_tf32":
        a, b = (np.abs(x.astype(np.float64)) for x in inputs)
        return (2 * u + 2.0 ** -22) * (a @ b) + 32 * 2.0 ** -24 * (a @ b) + 1e-6
    # mha_causal, mha_segments (masks only drop terms): scores s = 0.25·q·kᵀ off by ≤ δ = 2.1u·0.25·max Σ|q||k| (per row and
    # head); softmax weights p then move by a relative e^{2δ} - 1, and p·v (p and v in
    # TF32 too) by 2.1u more: |Δo| ≤ max|v| · (e^{2δ} - 1 + 2.1u).
    q, k, v = (np.abs(x.astype(np.float64)) for x in inputs[:3])
    qk = np.einsum("bqhd,bkhd->bhqk", q, k).max()
    delta = 2.1 * u * 0.25 * qk
    return float(v.max() * (np.expm1(2 * delta) + 2.1 * u)) + 1e-6


def _params():
    out = []
    for folder in FOLDERS:
        for name in _cases(folder):
            if (folder, name) in MOSAIC_GPU:
                continue
            marks = [pytest.mark.slow] if name in SLOW else []
            out.append(pytest.param(folder, name, marks=marks, id=f"{folder}-{name}"))
    return out


@pytest.mark.parametrize("folder,name", _params())
def test_kernel_matches_interpret_mode(folder: str, name: str):
    text = (DUMPS / folder / f"{name}.hlo").read_text()
    if not _readable(folder, name):
        pytest.skip("written by another jaxlib: test_other_jaxlibs_kernels_are_refused_by_name")
    inputs, want = load_npz(DUMPS / folder / f"{name}.npz")
    module = convert_text(text, f"{name}.hlo")
    assert "__gpu$xla.gpu.triton" not in str(module)
    devices = json.loads((DUMPS / folder / "manifest.json").read_text())[name].get("devices", 1)
    if devices > 1:
        # A shard_map case (tests/passes/triton/kernels.py `Case.devices`): device d's
        # shard of each array is its d-th slice on axis 0; the module runs as `devices`
        # replicas, each input and output with a leading device axis.
        inputs = [np.stack(np.split(x, devices)) for x in inputs]
        got = [np.concatenate(list(g)) for g in program_from_module(module)(*inputs)]
    else:
        got = program_from_module(module)(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if name == "masked_other":
            # Elements no program stores: Pallas' interpreter fills them with NaN, this
            # conversion leaves zeros (the GPU leaves whatever memory held).
            unwritten = np.arange(w64.size) >= 50
            assert np.array_equal(np.isnan(w64), unwritten)
            g64, w64 = g64[~unwritten], w64[~unwritten]
        if name in TF32:
            np.testing.assert_array_less(np.abs(g64 - w64), _tf32_bound(name, inputs))
        elif name in TF32_CHAINED:
            np.testing.assert_allclose(g64, w64, rtol=0, atol=16 * 2.0 ** -11 * max(1.0, float(np.abs(w64).max())))
        elif name in REORDERED:
            np.testing.assert_allclose(g64, w64, rtol=0, atol=2e-6 * max(1.0, float(np.abs(w64).max())))
        else:
            # The same operations in the same order as the interpreter: equal up to the
            # last bit of f32 (exp/tanh/pow may come from different CPU kernels).
            np.testing.assert_allclose(g64, w64, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("folder", FOLDERS)
def test_other_jaxlibs_kernels_are_refused_by_name(folder: str):
    """A kernel whose bytecode this jaxlib cannot read names who wrote it, what is
    installed and how to convert it."""
    import jax

    for name in ("add", "mha_causal"):
        text = (DUMPS / folder / f"{name}.hlo").read_text()
        producer = bytecode_producer(_kernel_bytes(text))
        if producer == installed_producer():
            continue
        with pytest.raises(ConverterError) as e:
            convert_text(text, f"{name}.hlo")
        message = str(e.value)
        writer = PRODUCERS[producer]
        assert re.match(rf"{name}\.hlo:\d+:\d+: error: ", message)
        assert f"was written by {writer}" in message and f"this jax {jax.__version__}" in message
        assert f"pip install 'jax=={writer.split()[1]}'" in message
        assert "not stable across jaxlib versions" in message


@pytest.mark.parametrize("folder,name", sorted(MOSAIC_GPU))
def test_mosaic_gpu_kernels_are_refused_with_routes(folder: str, name: str):
    text = (DUMPS / folder / f"{name}.hlo").read_text()
    assert 'custom_call_target="mosaic_gpu_v2"' in text
    with pytest.raises(ConverterError) as e:
        convert_text(text, f"{name}.hlo")
    message = str(e.value)
    assert re.match(rf"{name}\.hlo:\d+:\d+: error: %pallas_call", message)
    assert "Pallas Mosaic GPU kernel 'kernel' (mosaic_gpu_v2)" in message
    assert "JAX_PALLAS_USE_MOSAIC_GPU=0" in message and "--custom-calls" in message


def _own_folder() -> str:
    for folder in FOLDERS:
        if _readable(folder, "ragged"):
            return folder
    pytest.skip("no dumps written by this jaxlib")


def _with_kernel(text: str, edit) -> str:
    """The dump with its Triton kernel edited as IR text and written back as bytecode by
    this jaxlib (a test-only kernel; committed dumps are never edited)."""
    import io

    from jaxlib.mlir import ir

    from passes.triton.kernel import new_context

    data = _kernel_bytes(text)
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(edit(ir.Module.parse(data).operation.get_asm(enable_debug_info=True)))
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    escaped = "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:02X}" for b in buf.getvalue())
    return re.sub(r'ir = "(?:[^"\\]|\\.)*"', lambda _: f'ir = "{escaped}"', text, count=1)


def test_an_op_without_a_rule_is_located():
    folder = _own_folder()
    text = (DUMPS / folder / "ragged.hlo").read_text()
    edited = _with_kernel(text, lambda ir_text: ir_text.replace('symbol = "__nv_expf"', 'symbol = "__nv_j0f"'))
    with pytest.raises(ConverterError) as e:
        convert_text(edited, "ragged.hlo")
    message = str(e.value)
    assert re.match(r"ragged\.hlo:\d+:\d+: error: %pallas_call", message)
    assert "Triton kernel 'kernel': tt.extern_elementwise __nv_j0f (libdevice) has no StableHLO equivalent" in message
    assert "at tests/passes/triton/kernels.py:" in message


def test_a_corrupt_kernel_body_is_an_error_not_a_crash():
    folder = _own_folder()
    text = (DUMPS / folder / "ragged.hlo").read_text()
    broken = text.replace('ir = "ML\\EFR', 'ir = "ML\\EFR\\FF\\FF', 1)
    assert broken != text
    with pytest.raises(ConverterError) as e:
        convert_text(broken, "ragged.hlo")
    assert "Triton kernel 'kernel': the kernel body" in str(e.value)


def test_inspect_lists_each_kernel_with_its_grid_and_ops():
    from converter.hlo.parser import parse_hlo
    from converter.tools.inspect import format_summary, summarize

    for folder in FOLDERS:
        text = (DUMPS / folder / "softmax.hlo").read_text()
        summary = summarize(parse_hlo(text, "softmax.hlo"))
        [kernel] = summary["triton_kernels"]
        assert kernel["name"] == "_vmappable_softmax_kernel" and kernel["grid"] == "8x1x1"
        if _readable(folder, "softmax"):
            assert {"tt.reduce", "tt.load", "tt.store", "tt.extern_elementwise"} <= set(kernel["ops"])
        else:
            assert "not stable across jaxlib versions" in kernel["unreadable"]
        assert "_vmappable_softmax_kernel  8x1x1" in format_summary(summary)
