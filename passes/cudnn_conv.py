"""cudnn-conv: XLA GPU's cuDNN convolution custom-calls → `stablehlo.convolution` + plain ops.

The calls carry the *forward* convolution's `window`, `dim_labels` and group counts
(kept by the importer as `hlo.window`, `hlo.dim_labels`, ...), and a
`cudnn_conv_backend_config` (xla/service/gpu/backend_configs.proto,
CudnnConvBackendConfig; built by xla/service/gpu/transforms/conv_rewriter.cc and
cudnn_fused_conv_rewriter.cc; kinds in xla/service/gpu/cublas_cudnn.cc):
- `__cudnn$convForward(x, w)` → y = scale · conv(x, w);
- `__cudnn$convBackwardInput(dy, w)` → dx: the gradient of the forward convolution with
  respect to its input, i.e. a convolution of dy with the spatially reversed filter whose
  input/output feature dims are swapped, dy dilated by the forward stride, padded by
  (K−1−pad_low, K−1−pad_high + the stride remainder) where K is the dilated kernel size;
- `__cudnn$convBackwardFilter(x, dy)` → dw: the gradient with respect to the filter, a
  convolution of x (batch and feature dims swapped) with dy as the kernel, window stride
  = forward filter dilation, filter dilation = forward stride;
- `__cudnn$convBiasActivationForward(x, w, bias[, side_input])` →
  act(conv_result_scale · conv(x, w) + side_input_scale · side_input + bias), the bias
  along the output feature dim.
Results are (value, u8 workspace); the workspace carries nothing.
"""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.hlo import attrs as hlo_attrs
from converter.hlo.attribute_grammar import conv_dim_labels
from converter.hlo.parser import parse_window
from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

FORWARD, BACKWARD_INPUT, BACKWARD_FILTER, FUSED = (
    "__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter",
    "__cudnn$convBiasActivationForward")
TARGETS = (FORWARD, BACKWARD_INPUT, BACKWARD_FILTER, FUSED)


@register_pass("cudnn-conv", "cuDNN convolution custom-calls (forward, backward input/filter, bias+activation) → "
                             "stablehlo.convolution", targets=TARGETS, preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_conv(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        lower_cudnn_conv_call(op)


def _window(op: ir.Operation, rank: int) -> hlo_attrs.Window:
    if "hlo.window" not in op.attributes:
        return hlo_attrs.Window(tuple(hlo_attrs.WindowDim() for _ in range(rank)))
    window = parse_window(ir.StringAttr(op.attributes["hlo.window"]).value)
    return window if window.dims else hlo_attrs.Window(tuple(hlo_attrs.WindowDim() for _ in range(rank)))


def _int_attr(op: ir.Operation, name: str, default: int) -> int:
    return int(ir.StringAttr(op.attributes[name]).value) if name in op.attributes else default


def _convolution(out_t, lhs, rhs, labels: hlo_attrs.ConvDimLabels, window: list[hlo_attrs.WindowDim], groups: int = 1, batch_groups: int = 1,
                 lhs_dilation=None, rhs_dilation=None, strides=None, padding=None, reversal=None) -> ir.Value:
    rank = len(window)
    attrs = {
        "dimension_numbers": builders.conv_dimension_numbers(labels),
        "feature_group_count": builders.i64_attr(groups), "batch_group_count": builders.i64_attr(batch_groups),
        "window_strides": builders.i64_array(strides if strides is not None else [d.stride for d in window]),
        "padding": builders.i64_elements(padding if padding is not None else [[d.pad_low, d.pad_high] for d in window],
                                  shape=(rank, 2)),
        "lhs_dilation": builders.i64_array(lhs_dilation if lhs_dilation is not None else [d.lhs_dilation for d in window]),
        "rhs_dilation": builders.i64_array(rhs_dilation if rhs_dilation is not None else [d.rhs_dilation for d in window]),
        "window_reversal": builders.bool_array(reversal if reversal is not None else [d.reversal for d in window]),
    }
    return builders.op1("stablehlo.convolution", out_t, [lhs, rhs], attrs)


def lower_cudnn_conv_call(op: ir.Operation) -> None:
    target = rewrite.call_target(op)
    if "hlo.dim_labels" not in op.attributes:
        raise rewrite.op_error(op, "has no dim_labels")
    text = ir.StringAttr(op.attributes["hlo.dim_labels"]).value
    if "?" in text:
        # XLA's cudnn_vectorize_convolutions.cc vectorizes only int8 → int8 convolutions (a vector
        # dim split off the features, the filter possibly in cuDNN's reordered order): the s8
        # result is cuDNN's conversion of its s32/f32 accumulator, whose rounding and saturation
        # cuDNN does not document (cudnn-frontend's errata even lists int8x32 engine numerics).
        result_element = ir.RankedTensorType(op.results[0].type).element_type
        raise rewrite.op_error(op, f"an int8 vectorized convolution (dim_labels={text}, {result_element} result) is "
                                   "not supported: XLA vectorizes only int8 → int8 cuDNN convolutions "
                                   "(cudnn_vectorize_convolutions.cc), and cuDNN does not document how it rounds and "
                                   "saturates the accumulator to int8, so no portable meaning can be given; make the "
                                   "convolution's result s32 or f32 (convert after it in the program), which XLA does "
                                   "not vectorize, and re-dump")
    labels = conv_dim_labels(text)
    rank = len(labels.input_spatial)
    window = list(_window(op, rank).dims)
    groups = _int_attr(op, "hlo.feature_group_count", 1)
    batch_groups = _int_attr(op, "hlo.batch_group_count", 1)
    cfg = rewrite.backend_config(op).get("cudnn_conv_backend_config", {})
    scale = float(cfg.get("conv_result_scale", 1) or 1)
    out_t = ir.RankedTensorType(op.results[0].type)
    operands = list(op.operands)
    if any(d.lhs_dilation != 1 for d in window) and target != FORWARD:
        raise rewrite.op_error(op, "a backward or fused cuDNN convolution with lhs dilation")
    if isinstance(out_t.element_type, ir.IntegerType) and (
            out_t.element_type.width < 32 or target == FUSED or scale != 1):
        # cuDNN's int8 convolutions accumulate in s32, scale, add bias and side input and apply
        # the activation in f32, then round and saturate to the result type: a convolution
        # computed in the narrow result type would overflow silently.
        raise rewrite.op_error(op, f"an integer cuDNN convolution with a {out_t.element_type} result"
                                   + (" and a fused bias/activation" if target == FUSED else "")
                                   + (f" and conv_result_scale {scale}" if scale != 1 else "")
                                   + " is not supported (cuDNN's rounding and saturation to the result type "
                                     "are not in the dump); s32 results of a plain convolution are")
    with rewrite.at(op):
        if target in (FORWARD, FUSED):
            acc_t = out_t
            y = _convolution(acc_t, operands[0], operands[1], labels, window, groups, batch_groups)
        elif target == BACKWARD_INPUT:
            y = _backward_input(op, out_t, operands[0], operands[1], labels, window, groups, batch_groups)
        else:
            y = _backward_filter(op, out_t, operands[0], operands[1], labels, window, groups, batch_groups)
        if scale != 1:
            y = builders.binary("multiply", y, builders.scalar_constant(scale, out_t.element_type, out_t.shape))
        if target == FUSED:
            y = _bias_side_activation(op, y, operands, labels, cfg)
    rest: list[ir.Value | None] = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in list(op.results)[1:]]
    rewrite.replace(op, [y] + rest)


def _backward_input(op, out_t, dy, w, labels: hlo_attrs.ConvDimLabels, window, groups, batch_groups) -> ir.Value:
    """dx: the forward conv's input gradient (its result has the forward input's shape)."""
    if batch_groups != 1:
        raise rewrite.op_error(op, f"a backward-input convolution with batch_group_count={batch_groups}")
    dx_shape = out_t.shape
    dy_shape = builders.shape_of(dy)
    w_shape = builders.shape_of(w)
    padding = []
    for i, d in enumerate(window):
        n = dx_shape[labels.input_spatial[i]]
        m = dy_shape[labels.output_spatial[i]]
        k = w_shape[labels.kernel_spatial[i]]
        dilated = (k - 1) * d.rhs_dilation + 1
        low = dilated - 1 - d.pad_low
        high = n + dilated - 2 - (m - 1) * d.stride - low
        padding.append([low, high])
    # dy plays the input (its features are the forward outputs), the filter is used with
    # input and output feature dims exchanged and reversed in space, and the result has the
    # forward input's dims.
    kernel_in, kernel_out, kernel_spatial = labels.kernel_output_feature, labels.kernel_input_feature, \
        list(labels.kernel_spatial)
    if groups > 1:
        w, kernel_in, kernel_out, kernel_spatial = _regroup_filter(w, labels, groups)
    dnums = hlo_attrs.ConvDimLabels(
        input_batch=labels.output_batch, input_feature=labels.output_feature, input_spatial=labels.output_spatial,
        kernel_input_feature=kernel_in, kernel_output_feature=kernel_out, kernel_spatial=tuple(kernel_spatial),
        output_batch=labels.input_batch, output_feature=labels.input_feature, output_spatial=labels.input_spatial,
        text="")
    return _convolution(out_t, dy, w, dnums, window, groups=groups, lhs_dilation=[d.stride for d in window],
                        rhs_dilation=[d.rhs_dilation for d in window], strides=[1] * len(window), padding=padding,
                        reversal=[not d.reversal for d in window])


def _regroup_filter(w: ir.Value, labels: hlo_attrs.ConvDimLabels, groups: int) -> tuple[ir.Value, int, int, list[int]]:
    """The filter of a grouped forward conv, [O, C/G, spatial...] in its own dim order,
    as the filter of the grouped transposed conv: [O/G, C, spatial...] with
    w'[o, g·C/G + c] = w[g·O/G + o, c] (group g's outputs are dy's features of group g).
    Returns it with its input-feature, output-feature and spatial dims."""
    order = [labels.kernel_output_feature, labels.kernel_input_feature, *labels.kernel_spatial]
    w = builders.transpose(w, order)
    out_features, in_per_group, *spatial = builders.shape_of(w)
    w = builders.reshape(w, [groups, out_features // groups, in_per_group, *spatial])
    perm = [1, 0, 2, *range(3, 3 + len(spatial))]
    w = builders.transpose(w, perm)
    w = builders.reshape(w, [out_features // groups, groups * in_per_group, *spatial])
    return w, 0, 1, list(range(2, 2 + len(spatial)))


def _backward_filter(op, out_t, x, dy, labels: hlo_attrs.ConvDimLabels, window, groups, batch_groups) -> ir.Value:
    """dw: the forward conv's filter gradient, a convolution over the batch."""
    if batch_groups != 1:
        raise rewrite.op_error(op, f"a backward-filter convolution with batch_group_count={batch_groups}")
    if any(d.reversal for d in window):
        raise rewrite.op_error(op, "a backward-filter convolution of a reversed window")
    x_shape = builders.shape_of(x)
    dy_shape = builders.shape_of(dy)
    w_shape = out_t.shape
    padding = []
    for i, d in enumerate(window):
        n = x_shape[labels.input_spatial[i]]
        m = dy_shape[labels.output_spatial[i]]
        k = w_shape[labels.kernel_spatial[i]]
        high = (k - 1) * d.rhs_dilation + (m - 1) * d.stride + 1 - n - d.pad_low
        padding.append([d.pad_low, high])
    # Batch and feature swap roles: the forward input's features become the "batch" of
    # the result (the filter's input feature dim), dy's features its "feature" (the
    # filter's output feature dim), and the sum runs over the batch.
    dnums = hlo_attrs.ConvDimLabels(
        input_batch=labels.input_feature, input_feature=labels.input_batch, input_spatial=labels.input_spatial,
        kernel_input_feature=labels.output_batch, kernel_output_feature=labels.output_feature,
        kernel_spatial=labels.output_spatial, output_batch=labels.kernel_input_feature,
        output_feature=labels.kernel_output_feature, output_spatial=labels.kernel_spatial, text="")
    # A grouped forward conv's filter gradient pairs input-feature group g with output
    # group g: a batch-grouped convolution (XLA's own ConvolutionGroupConverter form).
    return _convolution(out_t, x, dy, dnums, window, batch_groups=groups, lhs_dilation=[1] * len(window),
                        rhs_dilation=[d.stride for d in window], strides=[d.rhs_dilation for d in window],
                        padding=padding, reversal=[False] * len(window))


def _bias_side_activation(op, y: ir.Value, operands, labels: hlo_attrs.ConvDimLabels, cfg: dict) -> ir.Value:
    shape = builders.shape_of(y)
    et = builders.element_type_of(y)
    if len(operands) >= 4:
        side_scale = float(cfg.get("side_input_scale", 0) or 0)
        if side_scale != 0:
            side = builders.convert(operands[3], et)
            y = builders.binary("add", y, builders.binary("multiply", side, builders.scalar_constant(side_scale, et, shape)))
    if len(operands) >= 3:
        bias = builders.convert(operands[2], et)
        y = builders.binary("add", y, builders.broadcast_in_dim(builders.reshape(bias, [math.prod(builders.shape_of(bias))]), shape,
                                                  [labels.output_feature]))
    mode = str(cfg.get("activation_mode", "kNone"))
    zero = builders.scalar_constant(0.0, et, shape)
    if mode in ("kNone", "0"):
        return y
    if mode in ("kRelu", "2"):
        return builders.binary("maximum", y, zero)
    if mode in ("kRelu6", "3"):
        return builders.op1("stablehlo.clamp", y.type, [zero, y, builders.scalar_constant(6.0, et, shape)])
    if mode in ("kTanh", "5"):
        return builders.unary("tanh", y)
    if mode in ("kSigmoid", "1"):
        return builders.unary("logistic", y)
    if mode in ("kElu", "7"):
        return builders.select(builders.compare(y, zero, "GT", "FLOAT"), y, builders.unary("exponential_minus_one", y))
    if mode in ("kLeakyRelu", "8"):
        alpha = builders.scalar_constant(float(cfg.get("leakyrelu_alpha", 0) or 0), et, shape)
        return builders.select(builders.compare(y, zero, "GT", "FLOAT"), y, builders.binary("multiply", y, alpha))
    raise rewrite.op_error(op, f"activation_mode {mode} is not supported (kNone, kRelu, kRelu6, kTanh, kSigmoid, "
                          "kElu, kLeakyRelu are)")


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
