"""cublas-grouped-gemm: XLA GPU's `__cublas$lt$groupedMatmul` (a `ragged-dot` run as one
cuBLASLt/hipBLASLt grouped GEMM) → masked `stablehlo.dot_general` + plain ops.

The call is (lhs, rhs, group_sizes) → (out, s8 workspace) with a GpuBackendConfig holding
`grouped_gemm_backend_config` = {gemm_backend_config, ragged_dot_dimension_numbers}; its
meaning is the `ragged-dot` it replaced (XLA's xla/service/gpu/transforms/gemm_rewriter.cc,
the ragged-dot path, and its tests in gemm_rewriter grouped-GEMM tests):

- ragged non-contracting (the lhs ragged dim is a free dim; rhs has a group dim): row r of
  the ragged dim belongs to group g when start[g] ≤ r < start[g] + group_sizes[g]
  (start = the exclusive running sum), out[.., r, ..] = lhs[.., r, ..] · rhs[g]; rows in no
  group (the sizes sum to less than the rows) are 0.
- ragged contracting (the ragged dim is contracted; no rhs group dim): out[g] = the dot over
  the contracted indices of group g only; the result has the group dim first.
Group sizes are [g] or [lhs batch dims..., g] (one set per batch element).

Computed as: the lhs masked per group (a select, so Inf/NaN in rows of other groups does not
leak), one dot_general with the group as a batch (or free) dim, in f32 for f16/bf16 operands
(cuBLASLt's compute type; products of two f16/bf16 values are exact in f32), then for the
non-contracting mode a sum over groups (each element has at most one non-zero term: exact),
rounded once to the output type.  Working set is groups × the lhs and output: fine for MoE
expert counts; a large program may want the blocked form (not done).

Refused by name: the ragged batch mode, alpha ≠ 1, beta ≠ 0, an epilogue, fp8 scales.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.cublas_gemm import _dimension_lists, _ints, _is_workspace, _number
from passes.lib import rewrite
from passes.lib.registry import PassOptions, register_pass

GROUPED_MATMUL = "__cublas$lt$groupedMatmul"


@register_pass("cublas-grouped-gemm", "cuBLASLt grouped GEMM (ragged-dot: MoE experts) → masked dot_general",
               targets=(GROUPED_MATMUL,), keeps_targets=True)
def lower_cublas_grouped_gemm(module: ir.Module, options: PassOptions) -> None:
    for op in rewrite.custom_calls(module, GROUPED_MATMUL):
        lower_grouped_matmul(op)


def _grouped_config(op: ir.Operation) -> tuple[dict[str, Any], dict[str, Any]]:
    grouped = rewrite.backend_config(op).get("grouped_gemm_backend_config")
    if not isinstance(grouped, dict):
        raise rewrite.op_error(op, "backend_config has no grouped_gemm_backend_config")
    gemm = grouped.get("gemm_backend_config") or {}
    ragged = grouped.get("ragged_dot_dimension_numbers")
    if not isinstance(ragged, dict):
        raise rewrite.op_error(op, "grouped_gemm_backend_config has no ragged_dot_dimension_numbers")
    return gemm, ragged


def _check_plain(op: ir.Operation, gemm: dict[str, Any]) -> None:
    alpha = _number(op, gemm, "alpha_real", 1.0)
    alpha_imag = _number(op, gemm, "alpha_imag", 0.0)
    beta = _number(op, gemm, "beta", 0.0)
    epilogue = gemm.get("epilogue", "DEFAULT")
    if alpha != 1 or alpha_imag != 0:
        raise rewrite.op_error(op, f"gemm_backend_config.alpha_real={alpha}, alpha_imag={alpha_imag}: a grouped "
                              "GEMM with alpha ≠ 1 is not supported")
    if beta != 0:
        raise rewrite.op_error(op, f"gemm_backend_config.beta={beta}: a grouped GEMM with an addend is not supported")
    if epilogue not in ("DEFAULT", 0):
        raise rewrite.op_error(op, f"gemm_backend_config.epilogue {epilogue}: a grouped GEMM epilogue is not supported")
    if gemm.get("damax_output"):
        raise rewrite.op_error(op, "gemm_backend_config.damax_output: an fp8 grouped GEMM is not supported")


def lower_grouped_matmul(op: ir.Operation) -> None:
    gemm, ragged = _grouped_config(op)
    _check_plain(op, gemm)
    operands, results = list(op.operands), list(op.results)
    if len(operands) != 3:
        raise rewrite.op_error(op, f"expected operands (lhs, rhs, group_sizes); found {len(operands)}")
    if not results or any(not _is_workspace(r) for r in results[1:]):
        raise rewrite.op_error(op, "expected results (out, s8 workspace)")
    lhs, rhs, sizes = operands
    lhs_b, rhs_b, lhs_c, rhs_c = _dimension_lists(ragged)
    lhs_ragged = _ints(ragged.get("lhs_ragged_dimensions"))
    rhs_group = _ints(ragged.get("rhs_group_dimensions"))
    if len(lhs_ragged) != 1:
        raise rewrite.op_error(op, f"ragged_dot_dimension_numbers.lhs_ragged_dimensions={lhs_ragged}: exactly one "
                              "is supported")
    ragged_dim = lhs_ragged[0]
    out_t = ir.RankedTensorType(results[0].type)
    lhs_shape, sizes_shape = builders.shape_of(lhs), builders.shape_of(sizes)
    groups = sizes_shape[-1]
    if sizes_shape[:-1] and sizes_shape[:-1] != [lhs_shape[d] for d in lhs_b]:
        raise rewrite.op_error(op, f"group_sizes of shape {sizes_shape}: only [groups] and [lhs batch dims..., "
                              "groups] are supported")
    if ragged_dim in lhs_b:
        raise rewrite.op_error(op, "a ragged batch dimension (ragged_dot mode 3) is not supported")
    contracting = ragged_dim in lhs_c
    if contracting == bool(rhs_group):
        raise rewrite.op_error(op, f"ragged_dot_dimension_numbers: lhs ragged dim {ragged_dim} "
                              f"{'is' if contracting else 'is not'} contracted but rhs_group_dimensions={rhs_group}")
    f32 = ir.F32Type.get()
    compute = out_t.element_type
    if isinstance(compute, (ir.BF16Type, ir.F16Type)):
        compute = f32
    with rewrite.at(op):
        masked = _masked_lhs(lhs, sizes, ragged_dim, lhs_b, groups)  # [g, lhs dims...]
        lhs_et = builders.element_type_of(masked)
        if lhs_et != compute:
            masked = builders.convert(masked, compute)
        if builders.element_type_of(rhs) != compute:
            rhs = builders.convert(rhs, compute)
        shifted_b = [d + 1 for d in lhs_b]
        shifted_c = [d + 1 for d in lhs_c]
        if contracting:
            # Natural order: lhs batch, then lhs free dims (the group dim first), rhs free.
            y = builders.dot_general(masked, rhs, compute, shifted_b, rhs_b, shifted_c, rhs_c)
            nb = len(lhs_b)
            perm = [nb] + list(range(nb)) + list(range(nb + 1, len(builders.shape_of(y))))
            y = builders.transpose(y, perm)
        else:
            # The group dim pairs with rhs's group dim as the leading batch dim; then sum
            # over it (one non-zero term per element).
            y = builders.dot_general(masked, rhs, compute, [0] + shifted_b, rhs_group + rhs_b, shifted_c, rhs_c)
            y = builders.reduce(y, [0])
        if builders.shape_of(y) != list(out_t.shape):
            raise rewrite.op_error(op, f"the ragged dot computes shape {builders.shape_of(y)}, the call's result is "
                                  f"{list(out_t.shape)}")
        if compute != out_t.element_type:
            y = builders.convert(y, out_t.element_type)
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[1:]]
    rewrite.replace(op, [y] + rest)


def _masked_lhs(lhs: ir.Value, sizes: ir.Value, ragged_dim: int, lhs_batch: list[int], groups: int) -> ir.Value:
    """[g, lhs dims...]: lhs where the ragged index lies in group g, else 0."""
    lhs_shape = builders.shape_of(lhs)
    sizes_shape = builders.shape_of(sizes)
    s64 = ir.IntegerType.get_signless(64)
    sizes = builders.convert(sizes, s64)
    # ends[..., g] = Σ_{j ≤ g} sizes[..., j] (a masked sum over a [.., g, j] square).
    lead = sizes_shape[:-1]
    square = lead + [groups, groups]
    nl = len(lead)
    spread = builders.broadcast_in_dim(sizes, square, list(range(nl)) + [nl + 1])
    upto = builders.compare(builders.iota(s64, square, nl + 1), builders.iota(s64, square, nl), "LE", "SIGNED")
    ends = builders.reduce(builders.select(upto, spread, builders.scalar_constant(0, s64, square)), [nl + 1])
    starts = builders.binary("subtract", ends, sizes)
    # Mask [g, lhs dims...]: starts[b.., g] ≤ index along the ragged dim < ends[b.., g].
    full = [groups] + lhs_shape
    bdims = [1 + d for d in lhs_batch] + [0] if lead else [0]
    index = builders.iota(s64, full, 1 + ragged_dim)
    inside = builders.binary(
        "and",
        builders.compare(builders.broadcast_in_dim(starts, full, bdims), index, "LE", "SIGNED"),
        builders.compare(index, builders.broadcast_in_dim(ends, full, bdims), "LT", "SIGNED"))
    spread_lhs = builders.broadcast_in_dim(lhs, full, list(range(1, len(full))))
    return builders.select(inside, spread_lhs, builders.zeros_like_type(spread_lhs.type))


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
