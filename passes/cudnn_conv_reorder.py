"""cudnn-conv-reorder: XLA GPU's `__cudnn$convReorderFilter` / `__cudnn$convReorderFilterAndBias`
(cudnnReorderFilterAndBias, emitted beside an int8x32 vectorized convolution) → the exact
reshape/transpose/reshape XLA itself uses in place of the cuDNN call.

The call takes the int8x32 filter s8[O, I/32, H, W, 32] (and, AndBias, the f32[O] bias) and
returns the same shapes (a tuple with the bias), the bytes in cuDNN's reordered order
(xla/backends/gpu/runtime ThunkEmitter::EmitConvolutionReorderThunk checks that shape).
XLA's xla/service/gpu/cudnn_support_utils.cc (CudnnInferTransposeForFilterReordering on a
rank-5 "oihw?" filter with a vector of 32; CudnnInferTransposeForBiasReordering) writes the
same permutation as plain HLO:
- filter: split O into (O/8, 4, 2) and the 32 lanes into (8, 4); transpose to
  [I/32, H, W, O/8, 2, 8, 4, 4]; reshape back to [O, I/32, H, W, 32];
- bias: [O/32, 4, 2, 4] → transpose (0, 2, 1, 3) → [O].
Both act on the buffer in row-major order: a filter or bias with another layout is refused."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

REORDER_FILTER, REORDER_FILTER_AND_BIAS = "__cudnn$convReorderFilter", "__cudnn$convReorderFilterAndBias"
TARGETS = (REORDER_FILTER, REORDER_FILTER_AND_BIAS)

# The filter's split shape as [O/8, 4, 2, I/32, H, W, 8, 4] and the order cuDNN stores it in.
FILTER_PERMUTATION = (3, 4, 5, 0, 2, 6, 1, 7)
BIAS_PERMUTATION = (0, 2, 1, 3)


def reorder_filter(w: ir.Value) -> ir.Value:
    o, ic, h, wd, lanes = builders.shape_of(w)
    split = builders.reshape(w, [o // 8, 4, 2, ic, h, wd, 8, 4])
    return builders.reshape(builders.transpose(split, FILTER_PERMUTATION), [o, ic, h, wd, lanes])


def reorder_bias(b: ir.Value) -> ir.Value:
    (o,) = builders.shape_of(b)
    return builders.reshape(builders.transpose(builders.reshape(b, [o // 32, 4, 2, 4]), BIAS_PERMUTATION), [o])


def _check_row_major(op: ir.Operation, index: int, rank: int) -> None:
    if rewrite.dump_layout(op, "operand", index, rank) != list(range(rank - 1, -1, -1)):
        raise rewrite.op_error(op, f"operand {index} has layout {rewrite.dump_layout(op, 'operand', index, rank)}: "
                               "the reorder permutes the row-major buffer; other layouts are not supported")


def lower_reorder(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    operands = list(op.operands)
    expected = 2 if target == REORDER_FILTER_AND_BIAS else 1
    if len(operands) != expected:
        raise rewrite.op_error(op, f"{len(operands)} operands; {target} takes {expected}")
    w = operands[0]
    shape = builders.shape_of(w)
    if len(shape) != 5 or shape[4] != 32 or shape[0] % 32:
        raise rewrite.op_error(op, f"filter shape {shape}: cuDNN's reorder takes [O, I/32, H, W, 32] with O a "
                               "multiple of 32")
    _check_row_major(op, 0, 5)
    with rewrite.at(op):
        values: list[ir.Value | None] = [reorder_filter(w)]
        if expected == 2:
            b = operands[1]
            if builders.shape_of(b) != [shape[0]]:
                raise rewrite.op_error(op, f"bias shape {builders.shape_of(b)}: expected [{shape[0]}] (the filter's O)")
            _check_row_major(op, 1, 1)
            values.append(reorder_bias(b))
    results = list(op.results)
    if len(results) != len(values) or any(v.type != r.type for v, r in zip(values, results)):
        raise rewrite.op_error(op, f"results {[str(r.type) for r in results]}: expected the operands' types")
    rewrite.replace(op, values)


@register_pass("cudnn-conv-reorder", "cuDNN int8x32 filter/bias reorder (__cudnn$convReorderFilter[AndBias]) → "
               "XLA's reshape/transpose of it", targets=TARGETS, preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_conv_reorders(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        lower_reorder(op)
