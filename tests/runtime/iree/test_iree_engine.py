"""The portable modules under a second compiler: IREE's llvm-cpu target (the `iree` extra),
against jaxlib's CPU client on the same converted module and inputs.

Tolerances are the dtype's (tests.helpers.assert_close): IREE lowers transcendental
functions to its own polynomial approximations and fuses and reorders differently, so
agreement is to a few ulps, not bits; integer and predicate outputs must match exactly.
IREE_ACCEPTED lists the single-device dumps IREE runs and matches; IREE_REFUSED the ones
it refuses today, with its reason (checked too, so a new IREE that accepts them shows up)."""

from __future__ import annotations

import pathlib

import pytest

from converter.common.errors import ConverterError
from converter.runtime.program import load
from tests.helpers import assert_close

iree_engine = pytest.importorskip("converter.runtime.iree_engine")
if not iree_engine.iree_available():
    pytest.skip("the `iree` extra is not installed", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[3]
DUMPS = ROOT / "tests" / "dumps"

IREE_ACCEPTED = [
    "cpu/attention_block", "cpu/attention_grad", "cpu/bool_logic", "cpu/broadcast_iota_tricks",
    "cpu/complex_linear", "cpu/cond_switch", "cpu/conv_grad", "cpu/convert_types", "cpu/cumulative",
    "cpu/dynamic_slicing", "cpu/einsum_layouts", "cpu/elementwise_f32", "cpu/float_remainder_pow",
    "cpu/fori_loop", "cpu/gather_take", "cpu/int_ops", "cpu/layernorm_grad", "cpu/map_vmap_cond",
    "cpu/matmul_int8_bf16", "cpu/mlp_grad", "cpu/nan_inf_semantics", "cpu/pooling", "cpu/reductions",
    "cpu/scan_rnn", "cpu/scatter_ops", "cpu/segment_sum", "cpu/signed_div_rem", "cpu/softmax_layernorm",
    "cpu/uint8_bool", "cpu/while_binary_search",
    # Accepted since the importer writes unit-window scatters with inserted dims and
    # same-width sign changes as bitcast_convert (IREE 3.13 rejected or miscompiled both).
    "cpu/maxpool_grad", "cpu/scatter_advanced", "cpu/random_threefry", "cpu/random_more",
    # Cholesky and triangular solves written as loops of plain ops (IREE has neither op).
    "gpu/cholesky_solve",
    "gpu/conv_grad", "gpu/depthwise_conv_grad", "gpu/mlp_value_and_grad", "gpu/random_threefry",
    "gpu/complex_math",
]

# What IREE 3.13 refuses in modules the converter writes .
IREE_REFUSED = {
    "cpu/fft_family": "stablehlo.fft",
    "cpu/linalg_qr": "lapack_sgeqrf_ffi",
}


@pytest.mark.parametrize("name", IREE_ACCEPTED)
def test_iree_matches_jaxlib(name):
    program = load(str(DUMPS / f"{name}.hlo"))
    inputs = program.random_inputs(0)
    want = program(*inputs)
    got = iree_engine.IreeProgram(program)(*inputs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what=f"{name} out{i}")


def test_the_single_device_sample_runs_under_iree():
    """The Qwen decode step (bf16, cuBLAS GEMMs rewritten).  jaxlib rounds to bf16 after
    every op as the dump does; IREE keeps f32 inside its fusions and rounds once.  The
    difference is a few bf16 ulps (2^-8) of the magnitudes entering each sum, not of each
    output element (sums cancel), so the absolute tolerance scales with the output's
    largest magnitude."""
    import numpy as np

    program = load(str(ROOT / "samples" / "gpu_torchxla_qwen_decode_cublas.hlo"))
    inputs = program.random_inputs(0)
    want = program(*inputs)
    got = iree_engine.IreeProgram(program)(*inputs)
    for i, (g, w) in enumerate(zip(got, want)):
        scale = float(np.max(np.abs(w.astype(np.float32))))
        assert_close(g, w, rtol=2e-2, atol=1e-2 * scale, what=f"qwen out{i}")


@pytest.mark.parametrize("name", sorted(IREE_REFUSED))
def test_iree_refusals_are_reported_by_name(name):
    program = load(str(DUMPS / f"{name}.hlo"))
    with pytest.raises(ConverterError, match=IREE_REFUSED[name].replace(".", r"\.")):
        iree_engine.IreeProgram(program).compile()


def test_multi_device_modules_are_refused_with_the_reason():
    program = load(str(ROOT / "samples" / "tpu_mlp_allreduce_4_replicas.hlo"))
    with pytest.raises(ConverterError, match="4 devices; the IREE engine runs single-device modules"):
        iree_engine.IreeProgram(program).compile()
