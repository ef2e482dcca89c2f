"""cublas-grouped-gemm: XLA GPU's `__cublas$lt$groupedMatmul` (a `ragged-dot` run as one
cuBLASLt/hipBLASLt grouped GEMM) → masked `stablehlo.dot_general` + plain ops.

The call is (lhs, rhs, group_sizes) → (out, s8 workspace) with a GpuBackendConfig holding
`grouped_gemm_backend_config` = {gemm_backend_config, ragged_dot_dimension_numbers}; its
meaning is the `ragged-dot` it replaced (XLA's xla/service/gpu/transforms/gemm_rewriter.cc,
the ragged-dot path, and its grouped-GEMM rewrite tests), in either mode (ragged rows with an
expert dim on rhs, or ragged contraction with the group dim first in the result).

Computed by converter.mlir.ragged_dot (shared with the `ragged-dot` import rule): the lhs
masked per group, one dot_general, in f32 for f16/bf16 operands (cuBLASLt's compute type),
rounded once to the output type.  Working set is groups × the lhs and output: fine for MoE
expert counts; a large program may want a blocked form (not done).

Refused by name: the ragged batch mode, alpha ≠ 1, beta ≠ 0, an epilogue, fp8 scales.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir

from converter.mlir import builders
from converter.mlir.ragged_dot import ragged_dot
from passes.cublas_gemm import _dimension_lists, _ints, _is_workspace, _number
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

GROUPED_MATMUL = "__cublas$lt$groupedMatmul"


@register_pass("cublas-grouped-gemm", "cuBLASLt grouped GEMM (ragged-dot: MoE experts) → masked dot_general",
               targets=(GROUPED_MATMUL,), preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_cublas_grouped_gemm(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(GROUPED_MATMUL):
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
    out_t = ir.RankedTensorType(results[0].type)
    with rewrite.at(op):
        try:
            y = ragged_dot(lhs, rhs, sizes, out_t, lhs_b, rhs_b, lhs_c, rhs_c, lhs_ragged[0], rhs_group)
        except ValueError as e:
            raise rewrite.op_error(op, f"ragged_dot_dimension_numbers: {e}") from None
    rest = [None if not rewrite.has_uses(r) else _zeros(op, r) for r in results[1:]]
    rewrite.replace(op, [y] + rest)


def _zeros(op: ir.Operation, result: ir.Value) -> ir.Value:
    with rewrite.at(op):
        return builders.zeros_like_type(result.type)
