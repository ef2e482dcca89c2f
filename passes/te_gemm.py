"""te-gemm: Transformer Engine's JAX GEMM calls → dot_general.

`te_gemm_v2_ffi` (lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, alpha, beta) → (output,
workspace) with one dictionary attribute `config` {scaling_mode, collective_op,
lhs_axis_boundary, rhs_axis_boundary, lhs_transposed, rhs_transposed,
use_split_accumulator}; `te_gemm_ffi` (lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias,
gelu_input, alpha, beta) → (output, bias_grad, pre_gelu_out, workspace) with the same
fields as flat attributes plus fuse_bias, fuse_gelu, grad (TE 2.5 – 2.8: six operands,
no alpha/beta, and lhs_swizzled / rhs_swizzled results before the workspace).  As in NVIDIA/
TransformerEngine transformer_engine/jax/csrc/extensions/gemm.cpp (GemmV2FFI, GemmFFI,
xla_buffer_to_nvte_gemm_operand) and jax/cpp_extensions/gemm.py (GemmPrimitive):
each operand is collapsed to 2-D at its axis boundary; lhs is [M, K] ([K, M] when
lhs_transposed), rhs [K, N] ([N, K] when rhs_transposed); the output is lhs_2d · rhs_2d
in f32 (cuBLAS's compute type), times both inverse scales for tensor-scaled fp8, plus the
bias (non-empty bias = fused), converted to the output type, in the output's shape.
The gelu epilogue (TE ≤ 2.9 te_gemm_ffi with fuse_gelu, forward) writes the pre-gelu
value to pre_gelu_out and gelu (tanh form, cuBLASLt's) to the output.

MXFP8 (scaling_mode 2): fp8 operands, rowwise-quantized when K is their last collapsed dim
and colwise-quantized (not transposed) when it is their first, with e8m0 scales per 32 K
elements, swizzled for cuBLAS by TE's JAX side since TE 2.8 (passes.lib.te_common
.block_gemm_scales reads them back); each operand is dequantized (exact in f32) and the
dot is f32, as cuBLAS accumulates.  NVFP4 (scaling_mode 4 or 5, TE ≥ 2.9 with alpha): e2m1
operands, both rowwise, e4m3 scales per 16 K elements passed plain (the C++ swizzles
them), the output alpha · Σ (a·sa)(b·sb) with alpha the two global decode scales'
product (+ bias); beta multiplies the uninitialised output buffer, so TE passes 0.

Refused by name: collective (all-gather / reduce-scatter overlapped) GEMMs, and the backward epilogues
(grad with bias or gelu: bias-gradient and dgelu)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_common import (MXFP8_1D_SCALING, MXFP8_BLOCK, NO_SCALING, NVFP4_1D_SCALING, NVFP4_2D_SCALING, NVFP4_BLOCK,
                                  TENSOR_SCALING,
                                  attr, block_gemm_scales, broadcast_scalar, f32, is_fp8, placeholder, reshape_to,
                                  scalar_of, scaling_mode_name)

TARGETS = ("te_gemm_ffi", "te_gemm_v2_ffi")


def _collapse(x: ir.Value, boundary: int) -> ir.Value:
    shape = builders.shape_of(x)
    return builders.reshape(x, [math.prod(shape[:boundary]), math.prod(shape[boundary:])])


# scaling_mode → (operand types, scale type, block along K).
# NVFP4 2-D operands reach the GEMM with their 16×16 scales broadcast to 1-D (scaling_modes.py
# is_1d_block_scaling), so both NVFP4 modes read the same way.
BLOCK_SCALED = {MXFP8_1D_SCALING: (("f8E4M3FN", "f8E5M2"), "f8E8M0FNU", MXFP8_BLOCK),
                NVFP4_1D_SCALING: (("f4E2M1FN",), "f8E4M3FN", NVFP4_BLOCK),
                NVFP4_2D_SCALING: (("f4E2M1FN",), "f8E4M3FN", NVFP4_BLOCK)}


def _block_scaled_operand(op: ir.Operation, mode: int, x2: ir.Value, scale: ir.Value, boundary: int,
                          k_leading: bool, swizzled: bool, which: str) -> ir.Value:
    """The collapsed operand ([K, F] when `k_leading`, else [F, K]) as f32 [F, K], each
    K block times its scale (e8m0 2^(e − 127) for MXFP8, e4m3 for NVFP4; the products are
    exact in f32).  A K-leading operand is colwise-quantized (its scales [blocks', rows'])."""
    data_types, scale_type, block = BLOCK_SCALED[mode]
    if str(builders.element_type_of(x2)) not in data_types:
        raise rewrite.op_error(op, f"{which} of type {builders.element_type_of(x2)}: {scaling_mode_name(mode)} "
                               f"operands are {', '.join(data_types)}")
    if str(builders.element_type_of(scale)) != scale_type:
        raise rewrite.op_error(op, f"{which} scale_inv of type {builders.element_type_of(scale)}: "
                               f"{scaling_mode_name(mode)} scales are {scale_type}")
    fk = builders.transpose(x2, [1, 0]) if k_leading else x2
    f, k = builders.shape_of(fk)
    if k % block:
        raise rewrite.op_error(op, f"{which} contracting size {k} is not a multiple of the block of {block}")
    plain = block_gemm_scales(op, scale, boundary, k_leading, swizzled, f, k // block, block, which)
    return builders.block_dequantize(fk, plain, f32())


def _gelu_tanh(x: ir.Value) -> ir.Value:
    """0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), in x's (f32) type."""
    shape = builders.shape_of(x)

    def c(v: float) -> ir.Value:
        return builders.scalar_constant(v, f32(), shape)

    cube = builders.binary("multiply", x, builders.binary("multiply", x, x))
    inner = builders.binary("multiply", c(math.sqrt(2 / math.pi)),
                            builders.binary("add", x, builders.binary("multiply", c(0.044715), cube)))
    return builders.binary("multiply", builders.binary("multiply", c(0.5), x),
                           builders.binary("add", c(1.0), builders.unary("tanh", inner)))


def lower_te_gemm(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    cfg = rewrite.backend_config(op)
    v2 = target == "te_gemm_v2_ffi"
    if v2:
        cfg = cfg.get("config") if isinstance(cfg.get("config"), dict) else None
        if cfg is None:
            raise rewrite.op_error(op, "backend_config has no 'config' dictionary")
    operands = list(op.operands)
    expected = 7 if v2 else 8
    if len(operands) != expected and not (not v2 and len(operands) == 6):
        raise rewrite.op_error(op, f"{len(operands)} operands; {target} takes {expected}"
                               + ("" if v2 else " (or 6 before alpha/beta were added)"))
    lhs, lhs_sinv, rhs, rhs_sinv, bias = operands[:5]
    gelu_input = None if v2 else operands[5]
    mode = int(attr(op, cfg, "scaling_mode"))
    collective = int(cfg.get("collective_op", 0))
    if collective != 0:
        raise rewrite.op_error(op, f"collective_op {collective} ({'ALL_GATHER' if collective == 1 else 'REDUCE_SCATTER'}"
                               "): TE's communication-overlapped GEMM needs its userbuffers communicator; "
                               "not converted (run the model with collective GEMM off)")
    if mode != NO_SCALING and mode not in TENSOR_SCALING and mode not in BLOCK_SCALED:
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: not converted (NO_SCALING, tensor "
                               "scaling, MXFP8 and NVFP4 are)")
    fuse_gelu = bool(cfg.get("fuse_gelu", False)) and not v2
    grad = bool(cfg.get("grad", False)) and not v2
    # te_gemm_ffi's writers (TE ≤ 2.9) fuse the bias only under fuse_bias: with the flag off a
    # non-empty bias is added by the caller after its reduction (GemmPrimitive's sharded
    # impl); te_gemm_v2_ffi fuses any non-empty bias.
    has_bias = math.prod(builders.shape_of(bias)) > 0 and (v2 or bool(cfg.get("fuse_bias", True)))
    if grad and (has_bias or fuse_gelu or (gelu_input is not None and math.prod(builders.shape_of(gelu_input)) > 0)):
        raise rewrite.op_error(op, "grad=true with a bias or gelu epilogue (cuBLASLt BGRAD / DGELU backward "
                               "epilogues): not converted")
    lt = bool(attr(op, cfg, "lhs_transposed"))
    rt = bool(attr(op, cfg, "rhs_transposed"))
    lb = int(attr(op, cfg, "lhs_axis_boundary"))
    rb = int(attr(op, cfg, "rhs_axis_boundary"))
    alpha = operands[5 if v2 else 6] if len(operands) == expected else None
    if mode in (NVFP4_1D_SCALING, NVFP4_2D_SCALING) and (alpha is None or lt or not rt):
        raise rewrite.op_error(op, "NVFP4 GEMM needs alpha (TE ≥ 2.9's operands) and both operands rowwise "
                               "(lhs_transposed=false, rhs_transposed=true), as gemm.cpp requires")
    results = list(op.results)
    out = results[0]
    out_type = ir.RankedTensorType(out.type)
    if is_fp8(builders.element_type_of(lhs)) != is_fp8(builders.element_type_of(rhs)) or \
            (mode == NO_SCALING and is_fp8(builders.element_type_of(lhs))):
        raise rewrite.op_error(op, f"operand types {builders.element_type_of(lhs)} × {builders.element_type_of(rhs)} "
                               f"do not fit scaling_mode {scaling_mode_name(mode)}")
    with rewrite.at(op):
        if mode in BLOCK_SCALED:
            # Both as [free, K], dequantized per K block.  MXFP8 scales arrive swizzled
            # from TE 2.8's JAX side (TE 2.6 – 2.7's te_gemm_ffi, six results, took them
            # plain); NVFP4's are plain (gemm.cpp swizzles them into the workspace).
            swizzled = mode == MXFP8_1D_SCALING and (v2 or len(results) != 6)
            a = _block_scaled_operand(op, mode, _collapse(lhs, lb), lhs_sinv, lb, lt, swizzled, "lhs")
            b = _block_scaled_operand(op, mode, _collapse(rhs, rb), rhs_sinv, rb, not rt, swizzled, "rhs")
            product = builders.dot_general(a, b, f32(), [], [], [1], [1])
            if mode in (NVFP4_1D_SCALING, NVFP4_2D_SCALING):
                # alpha = the product of both tensors' global decode scales (amax / (6 · 448),
                # gemm.py _get_nvfp4_tensor_scale_inv), cuBLAS's D = alpha · A·B (+ bias).
                m_, n_ = builders.shape_of(product)
                product = builders.binary("multiply", product, broadcast_scalar(scalar_of(alpha), [m_, n_]))
        else:
            a = builders.convert(_collapse(lhs, lb), f32())
            b = builders.convert(_collapse(rhs, rb), f32())
            # out[m, n] = Σ_k lhs[m, k] rhs[k, n], contracting the dim the flags name.
            product = builders.dot_general(a, b, f32(), [], [], [0 if lt else 1], [1 if rt else 0])
        m, n = builders.shape_of(product)
        if mode in TENSOR_SCALING:
            scale = builders.binary("multiply", scalar_of(lhs_sinv), scalar_of(rhs_sinv))
            product = builders.binary("multiply", product, broadcast_scalar(scale, [m, n]))
        if has_bias:
            bias_row = builders.convert(builders.reshape(bias, [n]), f32())
            product = builders.binary("add", product, builders.broadcast_in_dim(bias_row, [m, n], [1]))
        pre_gelu = product
        if fuse_gelu:
            product = _gelu_tanh(product)
        values: list[ir.Value | None] = [builders.convert(builders.reshape(product, list(out_type.shape)),
                                                          out_type.element_type)]
        if not v2:
            bias_grad, pre_gelu_out = results[1], results[2]
            values.append(placeholder(op, bias_grad))
            if fuse_gelu and math.prod(ir.RankedTensorType(pre_gelu_out.type).shape) == m * n:
                values.append(reshape_to(pre_gelu, pre_gelu_out))
            else:
                values.append(placeholder(op, pre_gelu_out))
        values.extend(placeholder(op, r) for r in results[len(values):])
    rewrite.replace(op, values)


@register_pass("te-gemm", "Transformer Engine GEMM calls (te_gemm_ffi, te_gemm_v2_ffi; bf16, fp8 tensor-scaled, MXFP8, NVFP4; "
               "bias/gelu epilogues) → dot_general", targets=TARGETS,
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_gemms(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    (calls,) = walks.custom_calls_of(TARGETS)
    for op in calls:
        lower_te_gemm(op)
