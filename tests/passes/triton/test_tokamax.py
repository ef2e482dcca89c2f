"""triton-kernels on tokamax 0.0.17's Triton kernels: deviceless H100 dumps
(tests/passes/triton/dumps/tokamax, made by tests/passes/triton/generate_tokamax.py with jax
0.12.0.1) converted, run on CPU and compared with tokamax's own XLA implementation of the
same op run on CPU by that jax (the .npz beside each dump).

Layer norm, ragged dot and the gated linear unit are jax-triton calls (IR text, with helper
functions called by tt.call, an early `return` as cf.cond_br, ub.poison and `dense<true>`
masks): both supported jaxlibs convert them.  The `_grad` dumps differentiate through
tokamax's own Triton backward kernels (its default VJPs), checked against the gradients of
its XLA implementation.  (tokamax 0.0.17's plain-Triton flash attention raises
NotImplementedError in its forward: it ships no kernel to dump.)  Attention is a Pallas Triton kernel (bytecode): jax 0.12
converts it, jax 0.10.2 refuses it naming the writer (Triton bytecode is not stable across
jaxlib versions)."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes.triton.kernel import bytecode_producer, installed_producer
from tests.passes.triton.generate import load_npz

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps" / "tokamax"
CASES = sorted(json.loads((DUMPS / "manifest.json").read_text()))
TARGETS = {"tk_layer_norm": "triton_kernel_call_ffi", "tk_ragged_dot": "triton_kernel_call_ffi",
           "tk_attention": "__gpu$xla.gpu.triton",
           # Gradients through tokamax's own Triton backward kernels (its default VJPs): the
           # forward kernel with residuals, then the backward kernel(s), (dx, dscale, doffset)
           # and (dq, dk, dv) of sum(f(...) * w).
           "tk_layer_norm_grad": "triton_kernel_call_ffi", "tk_attention_grad": "__gpu$xla.gpu.triton",
           # swish(x @ w_gate) * (x @ w_up): tokamax's gated linear unit kernel.
           "tk_gated_linear_unit": "triton_kernel_call_ffi",
           # (dlhs, drhs): the same Triton ragged dot with ragged rows, then ragged contraction.
           "tk_ragged_dot_grad": "triton_kernel_call_ffi"}
EPS = 2.0 ** -24


def _pallas_bytecode(text: str) -> bytes:
    from converter.hlo.mlir_dicts import parse_mlir_dict

    m = re.search(r'custom_call_target="__gpu\$xla\.gpu\.triton".*?backend_config=(\{.*?\})(?:, [a-z_]+=|\n)', text)
    assert m
    return parse_mlir_dict(m.group(1))["ir"]


def _ragged_dot_bound(lhs: np.ndarray, rhs: np.ndarray, group_sizes: np.ndarray) -> np.ndarray:
    """f32 dot of K terms (precision HIGHEST: IEEE products) summed in another order than
    XLA's: each output within (K + 1)·2^-24 of Σ|a||b| over its row's group."""
    group_of_row = np.repeat(np.arange(len(group_sizes)), group_sizes)
    a, b = np.abs(lhs.astype(np.float64)), np.abs(rhs.astype(np.float64))
    magnitude = np.einsum("mk,mkn->mn", a, b[group_of_row])
    return (lhs.shape[1] + 1) * EPS * magnitude + 1e-30


@pytest.mark.parametrize("name", CASES)
def test_tokamax_kernel_matches_its_xla_implementation(name: str):
    text = (DUMPS / f"{name}.hlo").read_text()
    assert f'custom_call_target="{TARGETS[name]}"' in text
    if TARGETS[name].startswith("__gpu") and bytecode_producer(_pallas_bytecode(text)) != installed_producer():
        with pytest.raises(ConverterError) as e:
            convert_text(text, f"{name}.hlo")
        assert re.search(r"Triton kernel 'pallas_flash_attention\w*'", str(e.value))
        assert "not stable across jaxlib versions" in str(e.value)
        return
    inputs, want = load_npz(DUMPS / f"{name}.npz")
    module = convert_text(text, f"{name}.hlo")
    assert TARGETS[name] not in str(module)
    got = program_from_module(module)(*inputs)
    assert len(got) == len(want) == {"tk_ragged_dot_grad": 2}.get(name, 3 if name.endswith("_grad") else 1)
    for result, expected in zip(got, want):
        g, w = np.asarray(result, np.float64), np.asarray(expected, np.float64)
        assert result.shape == expected.shape and result.dtype == expected.dtype
        if name == "tk_ragged_dot":
            np.testing.assert_array_less(np.abs(g - w), _ragged_dot_bound(*inputs))
        else:
            # Layer norm (mean and variance: sums of 64 terms), attention (precision
            # HIGHEST: f32 dots of 16 terms, softmax sums of ≤ 32) and their gradients (the
            # same sums again, and reductions over 8 rows or 32 positions) sum in another
            # order than tokamax's XLA implementation: f32 rounding, a few ulps of the
            # output's scale (measured ≤ 4.8e-7 at scale 5.5 forward, ≤ 9.6e-7 at scale
            # 10.3 for the layer norm's dscale; the gated linear unit's f32 dots of 32 terms
            # 4.6e-5 at scale 223; the ragged dot's gradients, sums of ≤ 48 products,
            # 4.3e-6 at scale 26).
            np.testing.assert_allclose(g, w, rtol=0, atol=2e-6 * max(1.0, float(np.abs(w).max())))
