"""te-grouped-gemm: Transformer Engine's `te_grouped_gemm_ffi` (GroupedDense: one GEMM per
MoE expert) → a ragged dot (converter.mlir.ragged_dot) in f32.

Signature (TE 2.15 on) as in NVIDIA/TransformerEngine transformer_engine/jax/csrc/extensions/gemm.cpp
(GroupedGemmFFI and its handler) and jax/cpp_extensions/gemm.py (GroupedGemmPrimitive):
(lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, lhs_first_dims, lhs_last_dims,
rhs_first_dims, rhs_last_dims, out_first_dims, out_last_dims, group_offset) → (output,
workspace), flat attributes lhs_is_trans, rhs_is_trans, scaling_mode, has_bias,
use_async_d2h_group_sizes, lhs/rhs_axis_boundary, lhs/rhs_left_size, lhs/rhs_right_size.
The group sizes are the first non-empty dims buffer (in that order); lhs is [left, right]
and rhs likewise (the sizes say so).
- forward (an lhs dims buffer): lhs [M, K] (rows in consecutive groups), rhs G stacked
  [K, N] ([N, K] when rhs_is_trans) matrices; out[r] = lhs[r] · rhs[g] (+ bias[g]) for row r
  of group g, rows past the groups' sum 0.
- wgrad (an rhs dims buffer): lhs [K, M] (lhs_is_trans), rhs [K, N], K in consecutive
  groups; out[g] = Σ over group g's k of lhs[k]ᵀ rhs[k], [G, M, N]; empty groups are 0.
Tensor-scaled fp8 (delayed or current): each non-empty group's product times its two
inverse scales; gemm.cpp advances the scale pointers only past non-empty groups, so group g
reads scale number (non-empty groups before g), as here.  Computed in f32 (cuBLAS's compute
type), bias added, rounded once to the output type.

The wgrad's untransposed lhs / transposed rhs are per-group [M, k_g] / [N, k_g] blocks
(gemm.cpp's lhs_shape_i / rhs_shape_i), each read back to [K, M] / [K, N] rows first.
Refused by name: MXFP8 / NVFP4 scaling (scales pre-swizzled for cuBLAS), the forward with
lhs_is_trans, the wgrad with a bias, both sides ragged.

`te_grouped_gemm_v2_ffi` (GroupedGemmV2FFI: nvte_grouped_gemm, CUDA-graph safe): the same
first eleven operands, then alpha and beta [G] f32 instead of group_offset; results output
and three workspaces; attributes those of the v1 call less has_bias and
use_async_d2h_group_sizes.  D_g = alpha_g · A_g·B_g + beta_g · C_g with no C given (so C is
the uninitialized output: beta must be a constant 0, as grouped_gemm passes it, else the call
is refused) and no bias (its operand is ignored, as TE does); NO_SCALING only (MXFP8 refused).

The TE 2.5–2.14 form of te_grouped_gemm_ffi (7 operands: one group_sizes buffer and the
attributes M, N, K, is_grouped_dense_wgrad) is mapped onto the same forward / wgrad.

`te_grouped_gemm_d2h_group_sizes_ffi` (group_sizes) → group_sizes {num_gemms}
(GroupedGemmD2HGroupSizesFFI, GroupedGemmCopySizesPrimitive): it starts a copy of the sizes
to a host buffer of TE's process and writes nothing to its result, which XLA aliases to the
operand (operand_output_aliases {0: 0}); so its result is its operand.  A grouped GEMM with
use_async_d2h_group_sizes reads that host copy, made by the latest such call, instead of
its own sizes operand; TE's API passes both the same sizes, and the rewrite uses the operand
(with a warning naming the call when the sizes do not come from a copy call in the same
program, whose values the dump cannot show)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from jaxlib.mlir import ir

from converter.mlir import builders
from converter.mlir.ragged_dot import ragged_dot
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.te_grouped import from_group_transposed, pick, row_groups, running_sums, s64
from passes.lib.te_common import NO_SCALING, TENSOR_SCALING, attr, f32, is_fp8, placeholder, scaling_mode_name

TARGET = "te_grouped_gemm_ffi"
TARGET_V2 = "te_grouped_gemm_v2_ffi"
COPY_SIZES = "te_grouped_gemm_d2h_group_sizes_ffi"


class HostGroupSizesWarning(UserWarning):
    """A grouped GEMM that reads group sizes another program copied to TE's host buffer."""
_DIMS = ("lhs_first_dims", "lhs_last_dims", "rhs_first_dims", "rhs_last_dims")


def _compact_index(sizes: ir.Value) -> ir.Value:
    """[G] s64: for each group, how many groups before it are non-empty."""
    g = builders.shape_of(sizes)[0]
    nonempty = builders.compare(builders.convert(sizes, s64()), builders.scalar_constant(0, s64(), [g]), "GT",
                                "SIGNED")
    return running_sums(builders.convert(nonempty, s64()), inclusive=False)


def _per_group(sinv: ir.Value, index: ir.Value) -> ir.Value:
    """[G] f32: sinv (flattened) at each group's index (0 past its end)."""
    flat = builders.convert(builders.reshape(sinv, [math.prod(builders.shape_of(sinv))]), f32())
    return pick(flat, index, f32())


def _copied_sizes(sizes: ir.Value) -> bool:
    """Whether `sizes` is the result of a group-size copy call (converted or not yet)."""
    owner = sizes.owner
    if isinstance(owner, ir.Block):
        return False
    producer = owner.operation
    return producer.name == "stablehlo.custom_call" and rewrite.call_target(producer) == COPY_SIZES


def lower_copy_sizes(op: ir.Operation) -> None:
    if len(op.operands) != 1 or len(op.results) != 1 or op.operands[0].type != op.results[0].type:
        raise rewrite.op_error(op, f"{COPY_SIZES} takes group_sizes and returns it (aliased): expected one operand "
                               "and one result of its type")
    rewrite.replace(op, [op.operands[0]])


def _is_zero_constant(value: ir.Value) -> bool:
    """Whether `value` is a constant 0 (through broadcasts, reshapes and converts)."""
    while not isinstance(value.owner, ir.Block):
        producer = value.owner.operation
        if producer.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert"):
            value = producer.operands[0]
            continue
        if producer.name != "stablehlo.constant":
            return False
        dense = ir.DenseElementsAttr(producer.attributes["value"])
        return bool(np.all(np.asarray(dense) == 0))
    return False


def _alpha(op: ir.Operation, alpha: ir.Value, beta: ir.Value, groups: int) -> ir.Value:
    """[G] f32: each group's alpha of D = alpha·A·B + beta·C (nvte_grouped_gemm: per group on
    Blackwell, one scalar on Hopper).  GroupedGemmV2FFI passes no C, so cuBLAS reads C from
    the output buffer, which XLA does not initialize: only beta = 0 (grouped_gemm's
    jnp.zeros) is defined, and converted."""
    if not _is_zero_constant(beta):
        raise rewrite.op_error(op, "beta is not a constant 0: TE's v2 grouped GEMM passes no C, so beta·C reads the "
                               "uninitialized output buffer; not converted")
    count = math.prod(builders.shape_of(alpha))
    if count not in (1, groups):
        raise rewrite.op_error(op, f"alpha has {count} entries; nvte_grouped_gemm takes 1 or one per group ({groups})")
    flat = builders.convert(builders.reshape(alpha, [count]), f32())
    return flat if count == groups else builders.broadcast_in_dim(builders.reshape(flat, []), [groups], [])


def _ragged_dims(op: ir.Operation, cfg: dict, operands: list[ir.Value]) -> tuple[ir.Value, str, bool, list[int]]:
    """TE 2.15 on: the group sizes are the first non-empty dims buffer; lhs and rhs are
    [left, right] as the size attributes say.  → (sizes, its name, wgrad, the four sizes)."""
    dims = dict(zip(_DIMS, operands[5:9]))
    active = [n for n, v in dims.items() if math.prod(builders.shape_of(v)) > 0]
    if not active:
        raise rewrite.op_error(op, "every group-size buffer is empty (TE needs one to know the groups)")
    if any(n.startswith("lhs") for n in active) and any(n.startswith("rhs") for n in active):
        raise rewrite.op_error(op, f"both lhs and rhs group sizes given ({', '.join(active)}): not supported by TE")
    left_right = [int(attr(op, cfg, n)) for n in ("lhs_left_size", "lhs_right_size", "rhs_left_size",
                                                   "rhs_right_size")]
    return dims[active[0]], active[0], active[0].startswith("rhs"), left_right


def _group_sizes_form(op: ir.Operation, cfg: dict, operands: list[ir.Value], lt: bool,
                      rt: bool) -> tuple[ir.Value, str, bool, list[int]]:
    """TE 2.5 to 2.14 (gemm.cpp GroupedGemmFFI of those releases): (lhs, lhs_scale_inv, rhs,
    rhs_scale_inv, bias, group_sizes, group_offset) {M, N, K, lhs_is_trans, rhs_is_trans,
    scaling_mode, has_bias, is_grouped_dense_wgrad[, use_async_d2h_group_sizes]}.  Its loop
    over groups is the one of the 12-operand form: forward lhs [M, K] with M ragged, rhs G
    stacked [K, N] ([N, K] when rhs_is_trans); wgrad (is_grouped_dense_wgrad) lhs [K, M]
    ([M, K] untransposed), rhs [K, N] ([N, K]) with K ragged, out [G, M, N]; the scale
    pointers move only past non-empty groups.  → the same (sizes, name, wgrad, sizes)."""
    sizes = operands[5]
    (groups,) = builders.shape_of(sizes)
    m, n, k = (int(attr(op, cfg, name)) for name in ("M", "N", "K"))
    wgrad = bool(attr(op, cfg, "is_grouped_dense_wgrad"))
    if wgrad:
        left_right = [k, m] if lt else [m, k]
        left_right += [n, k] if rt else [k, n]
    else:
        left_right = [m, k] + ([groups * n, k] if rt else [groups * k, n])
    return sizes, "group_sizes", wgrad, left_right


def lower_te_grouped_gemm(op: ir.Operation) -> None:
    cfg = rewrite.backend_config(op)
    operands = list(op.operands)
    if rewrite.call_target(op) == TARGET_V2:
        return _lower(op, cfg, operands, v2=True)
    if len(operands) not in (12, 7):
        raise rewrite.op_error(op, f"{len(operands)} operands; {TARGET} (TE's GroupedGemmFFI) takes 12 (TE 2.15 on: "
                               "lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, the six dims buffers, group_offset) or "
                               "7 (TE 2.5 to 2.14: ..., bias, group_sizes, group_offset)")
    return _lower(op, cfg, operands, v2=False)


def _lower(op: ir.Operation, cfg: dict, operands: list[ir.Value], v2: bool) -> None:
    if v2 and len(operands) != 13:
        raise rewrite.op_error(op, f"{len(operands)} operands; {TARGET_V2} (TE's GroupedGemmV2FFI) takes 13: lhs, "
                               "lhs_scale_inv, rhs, rhs_scale_inv, bias, the six dims buffers, alpha, beta")
    lhs, lsinv, rhs, rsinv, bias = operands[:5]
    mode = int(attr(op, cfg, "scaling_mode"))
    if v2 and mode != NO_SCALING:
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: TE's v2 grouped GEMM takes NO_SCALING "
                               "(converted) or MXFP8 with scales pre-swizzled for cuBLAS (not converted)")
    if mode != NO_SCALING and mode not in TENSOR_SCALING:
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: block-scaled grouped GEMMs receive "
                               "their scales pre-swizzled for cuBLAS; not converted (tensor scaling and NO_SCALING are)")
    lhs_el, rhs_el = builders.element_type_of(lhs), builders.element_type_of(rhs)
    if is_fp8(lhs_el) != is_fp8(rhs_el) or (mode == NO_SCALING and is_fp8(lhs_el)):
        raise rewrite.op_error(op, f"operand types {lhs_el} × {rhs_el} do not fit scaling_mode "
                               f"{scaling_mode_name(mode)}")
    lt, rt = bool(attr(op, cfg, "lhs_is_trans")), bool(attr(op, cfg, "rhs_is_trans"))
    # The v2 call hands cuBLAS no bias (GroupedGemmV2FFI ignores its bias operand).
    has_bias = False if v2 else bool(attr(op, cfg, "has_bias"))
    if len(operands) in (12, 13):
        sizes, sizes_name, wgrad, left_right = _ragged_dims(op, cfg, operands)
    else:
        sizes, sizes_name, wgrad, left_right = _group_sizes_form(op, cfg, operands, lt, rt)
    if bool(cfg.get("use_async_d2h_group_sizes", False)) and not _copied_sizes(sizes):
        warnings.warn(f"{rewrite.location_text(op)}: {TARGET} with use_async_d2h_group_sizes reads the group sizes "
                      f"that the latest {COPY_SIZES} copied to TE's host buffer, not in this program; converted "
                      f"with its own {sizes_name} operand (TE's API passes both the same sizes)",
                      HostGroupSizesWarning, stacklevel=2)
    groups = builders.shape_of(sizes)[0]
    out = op.results[0]
    out_t = ir.RankedTensorType(out.type)
    ll, lr, rl, rr = left_right
    if math.prod(builders.shape_of(lhs)) != ll * lr or math.prod(builders.shape_of(rhs)) != rl * rr:
        raise rewrite.op_error(op, f"lhs/rhs sizes {builders.shape_of(lhs)}, {builders.shape_of(rhs)} do not match "
                               f"lhs_left/right_size {ll}×{lr}, rhs_left/right_size {rl}×{rr}")
    with rewrite.at(op):
        a = builders.convert(builders.reshape(lhs, [ll, lr]), f32())
        b = builders.convert(builders.reshape(rhs, [rl, rr]), f32())
        scale = None
        if mode in TENSOR_SCALING:
            index = _compact_index(sizes)
            scale = builders.binary("multiply", _per_group(lsinv, index), _per_group(rsinv, index))
        if v2:
            scale = _alpha(op, operands[11], operands[12], groups)
        if not wgrad:
            if lt:
                raise rewrite.op_error(op, "lhs_is_trans=true in the forward (lhs-ragged) grouped GEMM: not converted")
            n = rl // groups if rt else rr
            if (rt and rl % groups) or groups * n * lr != rl * rr:
                raise rewrite.op_error(op, f"rhs {rl}×{rr} is not {groups} stacked {lr}×{n} matrices")
            k = lr
            b = builders.reshape(b, [groups, n, k] if rt else [groups, k, n])
            if scale is not None:
                b = builders.binary("multiply", b, builders.broadcast_in_dim(scale, builders.shape_of(b), [0]))
            if has_bias:
                # The bias rides as one more contracted index: lhs gets a ones column, rhs group g the row bias[g].
                bias_g = builders.convert(builders.reshape(bias, [groups, n]), f32())
                a = builders.concatenate([a, builders.scalar_constant(1.0, f32(), [ll, 1])], 1)
                b = builders.concatenate([b, builders.reshape(bias_g, [groups, n, 1] if rt else [groups, 1, n])],
                                         2 if rt else 1)
            y_t = ir.RankedTensorType.get([ll, n], f32())
            y = ragged_dot(a, b, sizes, y_t, [], [], [1], [2 if rt else 1], 0, [0])
        else:
            if has_bias:
                raise rewrite.op_error(op, "wgrad (rhs-ragged) grouped GEMM with has_bias: not converted")
            # lhs is [K, M] when transposed, else per-group [M, k_g] blocks (TE's pointer walk);
            # rhs [K, N] untransposed, else per-group [N, k_g] blocks (the colwise output of the
            # grouped quantize, which fp8 GEMMs on Hopper take: lhs_is_trans=false, rhs_is_trans=true).
            (kl, lr), (kr, rr) = (ll, lr) if lt else (lr, ll), (rl, rr) if not rt else (rr, rl)
            if kl != kr:
                raise rewrite.op_error(op, f"wgrad: lhs has {kl} contracted rows, rhs {kr}")
            if not (lt and not rt):
                k_groups = row_groups(builders.convert(sizes, s64()), kl)
                if not lt:
                    a = from_group_transposed(builders.reshape(a, [kl * lr]), k_groups, lr)
                if rt:
                    b = from_group_transposed(builders.reshape(b, [kr * rr]), k_groups, rr)
            y_t = ir.RankedTensorType.get([groups, lr, rr], f32())
            y = ragged_dot(a, b, sizes, y_t, [], [], [0], [0], 0, [])
            if scale is not None:
                y = builders.binary("multiply", y, builders.broadcast_in_dim(scale, builders.shape_of(y), [0]))
        if math.prod(builders.shape_of(y)) != math.prod(out_t.shape):
            raise rewrite.op_error(op, f"the grouped GEMM computes {builders.shape_of(y)}; the output is "
                                   f"{list(out_t.shape)}")
        value = builders.convert(builders.reshape(y, list(out_t.shape)), out_t.element_type)
        rest = [placeholder(op, r) for r in list(op.results)[1:]]
    rewrite.replace(op, [value] + rest)


@register_pass("te-grouped-gemm", "Transformer Engine grouped GEMM (te_grouped_gemm_ffi: MoE experts, forward and "
               "wgrad, bf16/f16/f32 and tensor-scaled fp8; te_grouped_gemm_v2_ffi bf16 with alpha) → ragged dot; the "
               "group-size copy → the sizes",
               targets=(TARGET, TARGET_V2, COPY_SIZES), preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_te_grouped_gemms(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    # The GEMMs first: they look at whether their sizes come from a copy call.
    gemms, copies = walks.custom_calls_of((TARGET, TARGET_V2), (COPY_SIZES,))
    for op in gemms:
        lower_te_grouped_gemm(op)
    for op in copies:
        lower_copy_sizes(op)
