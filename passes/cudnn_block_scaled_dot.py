"""cudnn-block-scaled-dot: XLA GPU's `__cudnn$blockScaledDot` (MXFP8 / NVFP4 block-scaled
GEMM on cuDNN) → dequantize + `stablehlo.dot_general`.

Form (XLA's xla/service/gpu/transforms/block_scaling_rewriter.cc, the cuDNN path, and its
test CudnnScaledDotTransforms): operands lhs [B, M, K], rhs [B, N, K] (M, N padded to
multiples of 128), lhs_scale [B, M', K'] and rhs_scale [B, N', K'] in cuDNN's swizzled
128×4 layout; result (out [B, M, N], workspace). The rewriter swizzles a plain scale
s [B, R, C] (R a multiple of 128, C of 4, padding appended) as
reshape → [B, R/128, 4, 32, C/4, 4], transpose {0,1,4,3,2,5}, reshape → [B, R, C]; that
transpose is its own inverse, so the same three steps read the plain scale back.

    out[b, m, n] = Σ_k lhs[b,m,k]·ls[b,m,k/bs] · rhs[b,n,k]·rs[b,n,k/bs]

with bs = 32 for f8 operands with f8e8m0fnu scales (MXFP8) and 16 for f4e2m1fn operands
with f8e4m3fn scales (NVFP4); products and sums in f32 (dequantized values are exact in
f32), rounded once to the output type. Other operand/scale types, a fifth (global scale)
operand, K not a multiple of bs or scales that do not cover the operands are refused by name.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from converter.mlir.context import hlo_element_type
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

BLOCK_SCALED_DOT = "__cudnn$blockScaledDot"
# (operand type, scale type) → block size; block_scaling_rewriter's kBlockSizeMXFP8/NVFP4.
BLOCK_SIZES = {("f8e4m3fn", "f8e8m0fnu"): 32, ("f8e5m2", "f8e8m0fnu"): 32, ("f4e2m1fn", "f8e4m3fn"): 16}


@register_pass("cudnn-block-scaled-dot", "cuDNN block-scaled dot (MXFP8, NVFP4; swizzled scales) → dequantize + "
                                         "dot_general", targets=(BLOCK_SCALED_DOT,), preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_block_scaled_dot(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(BLOCK_SCALED_DOT):
        lower_block_scaled_dot(op)


def unswizzle(scale: ir.Value) -> ir.Value:
    """cuDNN's 128×4-swizzled scale [B, R, C] back in plain row-major order."""
    b, r, c = builders.shape_of(scale)
    tiles = builders.reshape(scale, [b, r // 128, c // 4, 32, 4, 4])
    return builders.reshape(builders.transpose(tiles, [0, 1, 4, 3, 2, 5]), [b, r, c])


def _block_size(op: ir.Operation, x: ir.Value, scale: ir.Value, which: str) -> int:
    key = (hlo_element_type(builders.element_type_of(x)), hlo_element_type(builders.element_type_of(scale)))
    if key not in BLOCK_SIZES:
        raise rewrite.op_error(op, f"{which} of type {key[0]} with scales of type {key[1]} is not a block-scaled "
                              f"format cuDNN runs here ({', '.join(f'{a}/{s}' for a, s in BLOCK_SIZES)} are)")
    return BLOCK_SIZES[key]


def _plain_scale(op: ir.Operation, x: ir.Value, scale: ir.Value, block: int, which: str) -> ir.Value:
    b, rows, k = builders.shape_of(x)
    sb, srows, sblocks = builders.shape_of(scale)
    if k % block:
        raise rewrite.op_error(op, f"{which} contracting size {k} is not a multiple of the block size {block}")
    if sb != b or srows % 128 or sblocks % 4 or srows < rows or sblocks < k // block:
        raise rewrite.op_error(op, f"{which} scale of shape {[sb, srows, sblocks]} is not cuDNN's swizzled layout "
                              f"covering an operand of shape {[b, rows, k]} in blocks of {block}")
    plain = unswizzle(scale)
    return builders.slice_(plain, [0, 0, 0], [b, rows, k // block])


def lower_block_scaled_dot(op: ir.Operation) -> None:
    operands, results = list(op.operands), list(op.results)
    if len(operands) != 4:
        raise rewrite.op_error(op, f"expected operands (lhs, rhs, lhs_scale, rhs_scale); found {len(operands)} "
                              "(a global scale operand is not supported)")
    lhs, rhs, lhs_scale, rhs_scale = operands
    if any(len(builders.shape_of(v)) != 3 for v in operands):
        raise rewrite.op_error(op, "operands and scales must have rank 3 ([batch, rows, contracting])")
    out_t = ir.RankedTensorType(results[0].type)
    f32 = ir.F32Type.get()
    with rewrite.at(op):
        sides = []
        for x, scale, which in ((lhs, lhs_scale, "lhs"), (rhs, rhs_scale, "rhs")):
            block = _block_size(op, x, scale, which)
            sides.append(builders.block_dequantize(x, _plain_scale(op, x, scale, block, which), f32))
        y = builders.dot_general(sides[0], sides[1], f32, [0], [0], [2], [2])
        if builders.shape_of(y) != list(out_t.shape):
            raise rewrite.op_error(op, f"the dot computes shape {builders.shape_of(y)}, the call's result is "
                                  f"{list(out_t.shape)}")
        if out_t.element_type != f32:
            y = builders.convert(y, out_t.element_type)
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[1:]]
    rewrite.replace(op, [y] + rest)


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
