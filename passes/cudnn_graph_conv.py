"""cudnn-graph-conv: XLA GPU's `__cudnn$convForwardGraph` (a cuDNN convolution with a fused
graph of pointwise ops, written for fp8 convolutions) → `stablehlo.convolution` + plain ops.

XLA's xla/service/gpu/transforms/cudnn_fused_conv_rewriter.cc (GraphString, F8GraphConv,
CaptureConvGraphRecursive) writes `cudnn_conv_backend_config.serialized_graph` as
"UID:[type]op(in-graph operand UIDs);..." with the convolution first ("UID:[f32]conv();"),
each op after its in-graph operands, and operand UIDs outside the graph elided. The call's
operands are (input, filter, then one external operand per op that takes one, in graph
order); its results are (the graph's tensor result, one scalar per `amax`, workspace).

Ops (their meaning in the rewriter's matched HLO):
  conv()        the convolution (window, dim_labels, groups of the call), fp8 operands
                widened exactly, accumulated in the op's type
  add(a[,b])    a + b (b external: a tensor of the result's shape)
  scale(a)      a · s (s external, a scalar)       invscale(a)  a / s
  relu(a)       max(a, 0)                          elu(a)       a > 0 ? a : expm1(a)
  min(a[,b])    min(a, b)                          max(a[,b])   max(a, b)
  amax(a)       max |a| over all elements (an f32 scalar result)
Each op computes in its [type]; an fp8 type on the last op is the rewriter's saturating
cast (clamp to the type's finite range, then round). An op name not listed is refused by
name, as is a graph whose operands or results do not add up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.hlo.attribute_grammar import conv_dim_labels
from converter.mlir import builders
from converter.mlir.context import NoMlirTypeError, hlo_element_type, mlir_element_type
from passes.cublas_gemm import FP8_OUTPUT_MAX
from passes.cudnn_conv import _convolution, _int_attr, _window
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

CONV_FORWARD_GRAPH = "__cudnn$convForwardGraph"
UNARY = ("relu", "elu", "amax")
BINARY = ("add", "scale", "invscale", "min", "max")
_OP = re.compile(r"(\d+):\[([a-z0-9]+)\]([a-z_]+)\(([\d,\s]*)\)")


@dataclass(frozen=True)
class GraphOp:
    uid: int
    type_name: str
    name: str
    inputs: tuple[int, ...]


@register_pass("cudnn-graph-conv", "cuDNN convolution with a serialized pointwise graph (fp8 convs) → "
                                   "stablehlo.convolution + plain ops", targets=(CONV_FORWARD_GRAPH,),
               preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cudnn_graph_conv(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(CONV_FORWARD_GRAPH):
        lower_graph_conv(op)


def parse_graph(op: ir.Operation, text: str) -> list[GraphOp]:
    """The serialized graph's ops in order; a malformed entry or unknown op is an error."""
    graph: list[GraphOp] = []
    for entry in [e.strip() for e in text.split(";") if e.strip()]:
        m = _OP.fullmatch(entry)
        if not m:
            raise rewrite.op_error(op, f"serialized_graph entry {entry!r} is not UID:[type]op(operands)")
        uid, type_name, name, inputs = m.groups()
        if name != "conv" and name not in UNARY + BINARY:
            raise rewrite.op_error(op, f"serialized_graph op {name!r} ({entry}) is not supported (conv, "
                                  f"{', '.join(UNARY + BINARY)} are)")
        graph.append(GraphOp(int(uid), type_name, name, tuple(int(i) for i in inputs.split(",") if i.strip())))
    if not graph or graph[0].name != "conv" or graph[0].inputs:
        raise rewrite.op_error(op, f"serialized_graph {text!r} does not start with the convolution")
    return graph


def lower_graph_conv(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op).get("cudnn_conv_backend_config", {})
    text = cfg.get("serialized_graph")
    if not isinstance(text, str) or not text:
        raise rewrite.op_error(op, "cudnn_conv_backend_config has no serialized_graph")
    graph = parse_graph(op, text)
    if float(cfg.get("conv_result_scale", 1) or 1) != 1 or str(cfg.get("activation_mode", "kNone")) not in ("kNone", "0"):
        raise rewrite.op_error(op, "a graph convolution with conv_result_scale ≠ 1 or an activation_mode outside "
                              "its graph is not supported")
    if "hlo.dim_labels" not in op.attributes:
        raise rewrite.op_error(op, "has no dim_labels")
    labels = conv_dim_labels(ir.StringAttr(op.attributes["hlo.dim_labels"]).value)
    window = list(_window(op, len(labels.input_spatial)).dims)
    groups = _int_attr(op, "hlo.feature_group_count", 1)
    batch_groups = _int_attr(op, "hlo.batch_group_count", 1)
    operands, results = list(op.operands), list(op.results)
    out_t = ir.RankedTensorType(results[0].type)
    n_external = sum(1 for g in graph if g.name in BINARY and len(g.inputs) < 2)
    n_amax = sum(1 for g in graph if g.name == "amax")
    if len(operands) != 2 + n_external:
        raise rewrite.op_error(op, f"serialized_graph takes {n_external} operands besides input and filter; the call "
                              f"has {len(operands) - 2}")
    if len(results) < 1 + n_amax:
        raise rewrite.op_error(op, f"serialized_graph has {n_amax} amax results; the call returns {len(results)} values")
    values: dict[int, ir.Value] = {}
    external = iter(operands[2:])
    amaxes: list[ir.Value] = []
    last_tensor: GraphOp = graph[0]
    with rewrite.at(op):
        for g in graph:
            et = _element_type(op, g)
            compute = ir.F32Type.get() if _is_fp8(et) else et
            if g.name == "conv":
                x, w = (builders.convert(v, compute) for v in operands[:2])
                values[g.uid] = _convolution(ir.RankedTensorType.get(list(out_t.shape), compute), x, w, labels, window,
                                             groups, batch_groups)
                continue
            args = []
            for uid in g.inputs:
                if uid not in values:
                    raise rewrite.op_error(op, f"serialized_graph op {g.uid} reads {uid}, which no earlier op defines")
                args.append(builders.convert(values[uid], compute))
            if g.name in BINARY and len(args) < 2:
                args.append(_spread(op, next(external), list(out_t.shape), compute))
            if len(args) != (1 if g.name in UNARY else 2):
                raise rewrite.op_error(op, f"serialized_graph op {g.name} ({g.uid}) has {len(args)} operands")
            value = _apply(g.name, args, compute)
            if g.name == "amax":
                amaxes.append(value)
                continue
            if _is_fp8(et):
                value = _saturate(op, value, et)
            values[g.uid] = value
            last_tensor = g
        y = values[last_tensor.uid]
        if builders.element_type_of(y) != out_t.element_type:
            y = builders.convert(y, out_t.element_type)
        outs = [y]
        for value, result in zip(amaxes, results[1:]):
            t = ir.RankedTensorType(result.type)
            outs.append(builders.convert(builders.reshape(value, list(t.shape)), t.element_type))
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[len(outs):]]
    rewrite.replace(op, outs + rest)


def _element_type(op: ir.Operation, g: GraphOp) -> ir.Type:
    try:
        return mlir_element_type(g.type_name)
    except NoMlirTypeError:
        raise rewrite.op_error(op, f"serialized_graph op {g.uid} has type [{g.type_name}], not an XLA type") from None


def _is_fp8(t: ir.Type) -> bool:
    return isinstance(t, ir.FloatType) and ir.FloatType(t).width == 8


def _spread(op: ir.Operation, v: ir.Value, shape: list[int], et: ir.Type) -> ir.Value:
    """An external operand (a scalar, a one-element tensor or a tensor of the result's
    shape) at the result's shape and type."""
    vs = builders.shape_of(v)
    v = builders.convert(v, et)
    if vs == shape:
        return v
    if all(d == 1 for d in vs):
        return builders.broadcast_in_dim(builders.reshape(v, []), shape, [])
    raise rewrite.op_error(op, f"a graph operand of shape {vs} is neither a scalar nor of the result's shape {shape}")


def _apply(name: str, args: list[ir.Value], et: ir.Type) -> ir.Value:
    a = args[0]
    shape = builders.shape_of(a)
    if name == "add":
        return builders.binary("add", a, args[1])
    if name == "scale":
        return builders.binary("multiply", a, args[1])
    if name == "invscale":
        return builders.binary("divide", a, args[1])
    if name == "min":
        return builders.binary("minimum", a, args[1])
    if name == "max":
        return builders.binary("maximum", a, args[1])
    if name == "relu":
        return builders.binary("maximum", a, builders.scalar_constant(0.0, et, shape))
    if name == "elu":
        zero = builders.scalar_constant(0.0, et, shape)
        return builders.select(builders.compare(a, zero, "GT", "FLOAT"), a, builders.unary("exponential_minus_one", a))
    # amax: the rewriter's reduce(max, init ≤ 0) of |a| (or of relu(a), already ≥ 0).
    return builders.reduce(builders.unary("abs", a), list(range(len(shape))), body="maximum", init=0.0)


def _saturate(op: ir.Operation, v: ir.Value, fp8: ir.Type) -> ir.Value:
    """The rewriter's saturating cast: clamp to the fp8 type's finite range, then round."""
    name = hlo_element_type(fp8)
    limit = {"f8e4m3fn": FP8_OUTPUT_MAX["f8E4M3FN"], "f8e5m2": FP8_OUTPUT_MAX["f8E5M2"]}.get(name)
    if limit is None:
        raise rewrite.op_error(op, f"serialized_graph output type {name} is not supported (f8e4m3fn, f8e5m2 are)")
    shape = builders.shape_of(v)
    et = builders.element_type_of(v)
    clamped = builders.clamp(builders.scalar_constant(-limit, et, shape), v, builders.scalar_constant(limit, et, shape))
    return builders.convert(clamped, fp8)


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
