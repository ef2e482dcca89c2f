"""te-softmax: Transformer Engine's JAX scaled softmax calls → portable softmax.

`te_scaled_softmax_forward_ffi` (x), `te_scaled_masked_softmax_forward_ffi` (x, mask),
`te_scaled_upper_triang_masked_softmax_forward_ffi` (x) → y, and their
`*_backward_ffi` (dy, y) → dx, each with {scale_factor: f64}; x is [..., heads, s_q,
s_k] (NVIDIA/TransformerEngine transformer_engine/jax/csrc/extensions/softmax.cpp).
The kernels (common/fused_softmax/scaled_*softmax.cu) compute in f32: masked elements
(mask == 1, the mask [pad_batch, 1, s_q, s_k] broadcast over heads and, when pad_batch is
1, over the batch) are set to -10000 and a row whose max is -10000 writes zeros; the
upper-triangular form masks j > i (zeros there); backward dx = scale · y · (dy − Σ dy·y)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_common import attr, f32

KINDS = ("scaled", "scaled_masked", "scaled_upper_triang_masked")
FORWARD = tuple(f"te_{k}_softmax_forward_ffi" for k in KINDS)
BACKWARD = tuple(f"te_{k}_softmax_backward_ffi" for k in KINDS)
MASKED_VALUE = -10000.0


def _rows4(x: ir.Value) -> tuple[ir.Value, list[int]]:
    shape = builders.shape_of(x)
    b = math.prod(shape[:-3]) if len(shape) > 3 else 1
    dims = [b, shape[-3], shape[-2], shape[-1]]
    return builders.convert(builders.reshape(x, dims), f32()), dims


def _row_reduce(x: ir.Value, dims: list[int], body: str, init: float) -> ir.Value:
    return builders.broadcast_in_dim(builders.reduce(x, [3], body, init), dims, [0, 1, 2])


def lower_forward(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    scale = float(attr(op, rewrite.backend_config(op), "scale_factor"))
    x = op.operands[0]
    if len(builders.shape_of(x)) < 3:
        raise rewrite.op_error(op, "the input must be [..., heads, s_q, s_k]")
    out = op.results[0]
    with rewrite.at(op):
        xf, dims = _rows4(x)
        s = builders.binary("multiply", xf, builders.scalar_constant(scale, f32(), dims))
        masked = None
        if target.startswith("te_scaled_masked"):
            mask = op.operands[1]
            mshape = builders.shape_of(mask)
            pad = math.prod(mshape[:-3]) if len(mshape) > 3 else 1
            if pad not in (1, dims[0]) or mshape[-2:] != dims[2:]:
                raise rewrite.op_error(op, f"mask {mshape} does not broadcast to the input {builders.shape_of(x)}")
            m3 = builders.reshape(mask, [pad, dims[2], dims[3]])
            is_masked = builders.compare(m3, builders.scalar_constant(1, builders.element_type_of(m3), [pad, *dims[2:]]),
                                         "EQ")
            if pad == dims[0]:
                masked = builders.broadcast_in_dim(is_masked, dims, [0, 2, 3])
            else:
                masked = builders.broadcast_in_dim(builders.reshape(is_masked, dims[2:]), dims, [2, 3])
            s = builders.select(masked, builders.scalar_constant(MASKED_VALUE, f32(), dims), s)
        elif target.startswith("te_scaled_upper_triang"):
            rows = builders.iota(ir.IntegerType.get_signless(32), dims, 2)
            cols = builders.iota(ir.IntegerType.get_signless(32), dims, 3)
            masked = builders.compare(cols, rows, "GT")
            s = builders.select(masked, builders.scalar_constant(-math.inf, f32(), dims), s)
        row_max = _row_reduce(s, dims, "maximum", -math.inf)
        e = builders.unary("exponential", builders.binary("subtract", s, row_max))
        y = builders.binary("divide", e, _row_reduce(e, dims, "add", 0))
        if target.startswith("te_scaled_masked"):
            empty = builders.compare(row_max, builders.scalar_constant(MASKED_VALUE, f32(), dims), "EQ")
            y = builders.select(empty, builders.scalar_constant(0.0, f32(), dims), y)
        t = ir.RankedTensorType(out.type)
        value = builders.convert(builders.reshape(y, list(t.shape)), t.element_type)
    rewrite.replace(op, [value])


def lower_backward(op: ir.Operation) -> None:
    scale = float(attr(op, rewrite.backend_config(op), "scale_factor"))
    dy, y = op.operands[:2]
    if len(builders.shape_of(dy)) < 3:
        raise rewrite.op_error(op, "the gradient must be [..., heads, s_q, s_k]")
    out = op.results[0]
    with rewrite.at(op):
        dyf, dims = _rows4(dy)
        yf, _ = _rows4(y)
        dot = _row_reduce(builders.binary("multiply", dyf, yf), dims, "add", 0)
        dx = builders.binary("multiply", builders.scalar_constant(scale, f32(), dims),
                             builders.binary("multiply", yf, builders.binary("subtract", dyf, dot)))
        t = ir.RankedTensorType(out.type)
        value = builders.convert(builders.reshape(dx, list(t.shape)), t.element_type)
    rewrite.replace(op, [value])


@register_pass("te-softmax", "Transformer Engine scaled / masked / upper-triangular softmax forward and backward "
               "calls → portable softmax", targets=FORWARD + BACKWARD,
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_softmax(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    forward, backward = walks.custom_calls_of(FORWARD, BACKWARD)
    for op in forward:
        lower_forward(op)
    for op in backward:
        lower_backward(op)
