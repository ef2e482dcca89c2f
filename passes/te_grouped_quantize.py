"""te-grouped-quantize: Transformer Engine's `te_grouped_quantize_ffi` (one fp8 quantization
per MoE expert's rows) with tensor scaling → per-row scales, a saturating fp8 cast and, for
the colwise copy, a gather of each group's transpose.

Signature as in NVIDIA/TransformerEngine transformer_engine/jax/csrc/extensions/
quantization.cpp (GroupedQuantizeFFI and its handler) and jax/cpp_extensions/quantization.py
(GroupedQuantizePrimitive): (x, scale [G] f32, group_sizes [G] s32) → (output [numel],
colwise_output [numel] or [1], scale_inv [G], colwise_scale_inv, amax [G] f32, unused u8[0]),
attributes scaling_mode, q_layout (0 ROWWISE, 1 COLWISE, 2 ROWWISE_COLWISE), flatten_axis.
x is [m, n] at flatten_axis; group g has group_sizes[g] · prod(x.shape[1:flatten_axis])
consecutive rows.  Per non-empty group (nvte_multi_tensor_quantize, the delayed-tensor-scaling
cast of each group): rows saturate(x · scale[g]) in fp8, the colwise copy the group's [n, m_g]
transpose at the same flat offset.  The pointer walk of quantization.cpp is kept: scale is
read at the group's own index (its pointer moves past empty groups too), while scale_inv
(1/scale[g]) and amax (max |x| over the group) are written at the group's rank among the
non-empty groups (their pointers move only past non-empty groups) — the order the grouped
GEMM reads them back (passes/te_grouped_gemm.py).  Delayed scaling zeroes amax first, so its
entries past the non-empty groups are 0; TE leaves scale_inv's and the colwise scale_inv's
unwritten (here 0).  TE stops the program when the sizes do not add up to the rows; the
converted program cannot stop, and writes 0 past the groups.

Refused by name: MXFP8 (TE writes its scales pre-swizzled for cuBLAS), NVFP4, NO_SCALING
(TE rejects it), q_layout COLWISE with tensor scaling (TE's JAX side never emits it; the
shared scale_inv would not fit), current scaling's amax when something reads it (TE does not
zero it before its atomic max: its contents are undefined)."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_grouped import pick, row_groups, running_sums, s64, to_group_transposed
from passes.lib.te_common import CURRENT_TENSOR_SCALING, FP8_MAX, TENSOR_SCALING, attr, f32, placeholder, \
    reshape_to, scaling_mode_name

TARGET = "te_grouped_quantize_ffi"
ROWWISE, COLWISE, ROWWISE_COLWISE = 0, 1, 2


def _compacted(per_group: ir.Value, nonempty: ir.Value, rank: ir.Value) -> ir.Value:
    """[G] f32: entry j holds per_group[g] of the j-th non-empty group g, 0 past them."""
    (g,) = builders.shape_of(per_group)
    square = [g, g]  # [slot j, group g]
    hit = builders.binary("and", builders.broadcast_in_dim(nonempty, square, [1]),
                          builders.compare(builders.broadcast_in_dim(rank, square, [1]),
                                           builders.iota(s64(), square, 0), "EQ", "SIGNED"))
    return builders.reduce(builders.select(hit, builders.broadcast_in_dim(per_group, square, [1]),
                                           builders.scalar_constant(0.0, f32(), square)), [1])


def lower_te_grouped_quantize(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    if len(op.operands) != 3 or len(op.results) != 6:
        raise rewrite.op_error(op, f"{len(op.operands)} operands, {len(op.results)} results; {TARGET} (TE's "
                               "GroupedQuantizeFFI) takes x, scale, group_sizes and returns output, colwise_output, "
                               "scale_inv, colwise_scale_inv, amax, unused")
    x, scale, sizes = op.operands
    out, col_out, scale_inv, col_scale_inv, amax, unused = op.results
    mode = int(attr(op, cfg, "scaling_mode"))
    if mode not in TENSOR_SCALING:
        why = ("TE writes MXFP8 grouped scales pre-swizzled for cuBLAS" if mode == 2 else
               "TE rejects NO_SCALING here" if mode == 0 else "NVFP4 grouped quantization")
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: not converted ({why}); delayed and "
                               "current tensor scaling are")
    layout = int(attr(op, cfg, "q_layout"))
    if layout not in (ROWWISE, ROWWISE_COLWISE):
        raise rewrite.op_error(op, f"q_layout {layout} with tensor scaling: only ROWWISE (0) and ROWWISE_COLWISE (2) "
                               "are converted (TE's JAX side quantizes both layouts for a colwise-only request)")
    if mode == CURRENT_TENSOR_SCALING and rewrite.has_uses(amax):
        raise rewrite.op_error(op, "current scaling with its amax result used: TE does not zero that buffer before "
                               "its atomic max, so its contents are undefined")
    element = ir.RankedTensorType(out.type).element_type
    if str(element) not in FP8_MAX:
        raise rewrite.op_error(op, f"output type {element}: the fp8 types TE writes are {sorted(FP8_MAX)}")
    shape = builders.shape_of(x)
    axis = int(attr(op, cfg, "flatten_axis"))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 < axis < len(shape):
        raise rewrite.op_error(op, f"flatten_axis {axis} out of range for {shape}")
    m, n = math.prod(shape[:axis]), math.prod(shape[axis:])
    rows_per_size = math.prod(shape[1:axis])
    (groups,) = builders.shape_of(sizes)
    if math.prod(builders.shape_of(scale)) < groups:
        raise rewrite.op_error(op, f"scale has {math.prod(builders.shape_of(scale))} entries for {groups} groups")
    numel = m * n
    if math.prod(ir.RankedTensorType(out.type).shape) != numel:
        raise rewrite.op_error(op, f"output {ir.RankedTensorType(out.type).shape} does not hold x's {numel} elements")
    both = layout == ROWWISE_COLWISE
    if both and math.prod(ir.RankedTensorType(col_out.type).shape) != numel:
        raise rewrite.op_error(op, f"colwise output {ir.RankedTensorType(col_out.type).shape} does not hold x's "
                               f"{numel} elements")
    for name, r in (("scale_inv", scale_inv), ("amax", amax)):
        if math.prod(ir.RankedTensorType(r.type).shape) != groups:
            raise rewrite.op_error(op, f"{name} {r.type}: expected one entry per group ({groups})")
    with rewrite.at(op):
        x32 = builders.convert(builders.reshape(x, [m, n]), f32())
        rows = builders.binary("multiply", builders.convert(sizes, s64()),
                               builders.scalar_constant(rows_per_size, s64(), [groups]))
        grouped = row_groups(rows, m)
        scale_g = builders.convert(builders.slice_(builders.reshape(scale, [math.prod(builders.shape_of(scale))]),
                                                   [0], [groups]), f32())
        row_scale = pick(scale_g, grouped.group, f32())
        limit = FP8_MAX[str(element)]
        scaled = builders.binary("multiply", x32, builders.broadcast_in_dim(row_scale, [m, n], [0]))
        q = builders.convert(builders.clamp(builders.scalar_constant(-limit, f32()), scaled,
                                            builders.scalar_constant(limit, f32())), element)
        inside_mn = builders.broadcast_in_dim(grouped.inside, [m, n], [0])
        q = builders.select(inside_mn, q, builders.zeros_like_type(ir.RankedTensorType.get([m, n], element)))
        values: list[ir.Value | None] = [reshape_to(q, out)]
        values.append(reshape_to(to_group_transposed(q, grouped), col_out) if both else placeholder(op, col_out))
        nonempty = builders.compare(rows, builders.scalar_constant(0, s64(), [groups]), "GT", "SIGNED")
        rank = running_sums(builders.convert(nonempty, s64()), inclusive=False)
        inverse = builders.binary("divide", builders.scalar_constant(1.0, f32(), [groups]), scale_g)
        values.append(reshape_to(_compacted(inverse, nonempty, rank), scale_inv))
        values.append(placeholder(op, col_scale_inv))
        if rewrite.has_uses(amax):
            row_amax = builders.reduce(builders.unary("abs", x32), [1], "maximum", 0)
            in_group = builders.compare(builders.broadcast_in_dim(grouped.group, [groups, m], [1]),
                                        builders.iota(s64(), [groups, m], 0), "EQ", "SIGNED")
            group_amax = builders.reduce(builders.select(in_group, builders.broadcast_in_dim(row_amax, [groups, m], [1]),
                                                         builders.scalar_constant(0.0, f32(), [groups, m])),
                                         [1], "maximum", 0)
            values.append(reshape_to(_compacted(group_amax, nonempty, rank), amax))
        else:
            values.append(None)
        values.append(placeholder(op, unused))
    rewrite.replace(op, values)


@register_pass("te-grouped-quantize", "Transformer Engine grouped quantize (te_grouped_quantize_ffi: MoE experts, "
               "delayed and current tensor scaling, rowwise and colwise) → per-group fp8 casts",
               targets=(TARGET,), preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_grouped_quantizes(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    (calls,) = walks.custom_calls_of((TARGET,))
    for op in calls:
        lower_te_grouped_quantize(op)
