"""te-quantize: Transformer Engine's JAX quantize / dequantize calls → portable casts.

`te_dbias_quantize_ffi` (x, scale, amax, sr_rng_state, post_rht_amax, rht_matrix) →
(output, colwise_output, scale_inv, colwise_scale_inv, updated_amax, dbias, workspace)
{scaling_mode, q_layout, is_dbias, flatten_axis, stochastic_rounding, use_rht} and
`te_dequantize_ffi` (x, amax, scale, scale_inv) → output, as in NVIDIA/TransformerEngine
transformer_engine/jax/csrc/extensions/quantization.cpp (DBiasQuantizeFFI, DequantizeFFI)
and jax/cpp_extensions/quantization.py: x is collapsed to [m, n] at flatten_axis; tensor
scaling (delayed, or current with the scale TE's JAX side computed from amax before the
call) writes saturate(x · scale) in fp8 (passes.lib.te_common), dbias = Σ_rows x in f32;
MXFP8 writes e8m0 block scales over 32 elements and the fp8 data, rowwise (blocks along
n) and / or colwise (blocks down m, data not transposed) as q_layout asks
(passes.lib.te_common.mxfp8_both_layouts); NVFP4 1-D (e2m1 data, e4m3 scales per 16,
the tensor amax operand's global scale; colwise transposed) rounds to nearest as TE's
kernels (passes.lib.te_common.nvfp4_both_layouts); the dequantize call (a TensorWrapper
of one scale_inv: tensor scaling) writes x · scale_inv.  Refused by name: NVFP4 2-D,
stochastic rounding and the random Hadamard transform (their random bits / sign vector
are not in the dump)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_common import attr, broadcast_scalar, f32, is_fp8, placeholder, quantized_results, reshape_to, \
    scalar_of

QUANTIZE = ("te_dbias_quantize_ffi",)
DEQUANTIZE = ("te_dequantize_ffi",)


def lower_quantize(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    if len(op.operands) != 6 or len(op.results) != 7:
        raise rewrite.op_error(op, "expected 6 operands (x, scale, amax, sr_rng_state, post_rht_amax, rht_matrix) "
                               "and 7 results")
    for flag in ("stochastic_rounding", "use_rht"):
        if bool(cfg.get(flag, False)):
            raise rewrite.op_error(op, f"{flag}=true (NVFP4 only): not converted — "
                                   + ("its random bits are drawn in the kernel (Philox from sr_rng_state, one "
                                      "stream per thread of TE's launch geometry), which the dump does not "
                                      "describe" if flag == "stochastic_rounding" else
                                      "the random Hadamard transform's sign vector and its fused colwise cast "
                                      "are not converted") + "; NVFP4 with round-to-nearest and no RHT is")
    x, scale, amax = op.operands[:3]
    shape = builders.shape_of(x)
    axis = int(attr(op, cfg, "flatten_axis"))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 < axis < len(shape):
        raise rewrite.op_error(op, f"flatten_axis {axis} out of range for {shape}")
    results = list(op.results)
    with rewrite.at(op):
        x2 = builders.convert(builders.reshape(x, [math.prod(shape[:axis]), math.prod(shape[axis:])]), f32())
        values = quantized_results(op, x2, results[:5], int(attr(op, cfg, "scaling_mode")), scale, amax, False,
                                   scale_axis=axis, nvfp4=True)
        if bool(cfg.get("is_dbias", False)):
            values.append(reshape_to(builders.reduce(x2, [0], "add", 0), results[5]))
        else:
            values.append(placeholder(op, results[5]))
        values.append(placeholder(op, results[6]))
    rewrite.replace(op, values)


def lower_dequantize(op: ir.Operation) -> None:
    if len(op.operands) != 4:
        raise rewrite.op_error(op, "expected 4 operands (x, amax, scale, scale_inv)")
    x, _, _, scale_inv = op.operands
    if not is_fp8(builders.element_type_of(x)):
        raise rewrite.op_error(op, f"input type {builders.element_type_of(x)}: the dequantized types are fp8")
    if math.prod(builders.shape_of(scale_inv)) != 1:
        raise rewrite.op_error(op, f"scale_inv {builders.shape_of(scale_inv)}: only one tensor scale is converted")
    out = op.results[0]
    with rewrite.at(op):
        shape = builders.shape_of(x)
        x32 = builders.convert(x, f32())
        y = builders.binary("multiply", x32, broadcast_scalar(scalar_of(scale_inv), shape))
        value = reshape_to(y, out)
    rewrite.replace(op, [value])


@register_pass("te-quantize", "Transformer Engine quantize (te_dbias_quantize_ffi: tensor scaling, MXFP8, NVFP4 1-D) and dequantize "
               "calls → portable casts", targets=QUANTIZE + DEQUANTIZE,
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_quantize(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    quantize, dequantize = walks.custom_calls_of(QUANTIZE, DEQUANTIZE)
    for op in quantize:
        lower_quantize(op)
    for op in dequantize:
        lower_dequantize(op)
