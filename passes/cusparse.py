"""cusparse: jaxlib's GPU cuSPARSE calls → jaxlib's CPU LAPACK calls or plain StableHLO.

`cusparse_gtsv2_ffi` (dl, d, du, b) → x (lax.linalg.tridiagonal_solve on GPU, hip:
`hipsparse_gtsv2_ffi`): the tridiagonal system with sub-, main and super-diagonals dl, d,
du (dl[0] and du[m−1] not read) for each column of b, as jaxlib's jaxlib/gpu/sparse_kernels.cc
calls cuSPARSE's gtsv2.  JAX's CPU lowering of the same primitive is LAPACK's gtsv
(`lapack_?gtsv_ffi`, which reads dl from dl[1], as cuSPARSE does) with the solution NaN
where gtsv reports a singular system; the rewrite is that call.  (cuSPARSE does not report
singularity: its result for a singular system is whatever its divisions by zero give.)
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.lapack import jaxlib_cpu_call, lapack_letter
from passes.lib.registry import PassOptions, register_pass

GTSV2_TARGETS = ("cusparse_gtsv2_ffi", "hipsparse_gtsv2_ffi")


@register_pass("cusparse", "cuSPARSE calls: tridiagonal solves (gtsv2) → jaxlib's CPU LAPACK gtsv",
               targets=GTSV2_TARGETS)
def lower_cusparse(module: ir.Module, options: PassOptions) -> None:
    for op in rewrite.custom_calls(module, GTSV2_TARGETS):
        lower_gtsv2(op)


def lower_gtsv2(op: ir.Operation) -> None:
    dl, d, du, b = list(op.operands)
    letter = lapack_letter(op, b)
    *batch, m, _ = builders.shape_of(b)
    if any(builders.shape_of(v) != [*batch, m] for v in (dl, d, du)):
        raise rewrite.op_error(op, f"expects diagonals of shape {[*batch, m]} for b of type {b.type}")
    s32 = ir.IntegerType.get_signless(32)
    types = [v.type for v in (dl, d, du, b)] + [ir.RankedTensorType.get(batch, s32)]
    with rewrite.at(op):
        *_, x, info = jaxlib_cpu_call(f"lapack_{letter}gtsv_ffi", [dl, d, du, b], types,
                                      aliases={0: 0, 1: 1, 2: 2, 3: 3})
        ok = builders.compare(info, builders.scalar_constant(0, s32, batch), "EQ", "SIGNED")
        rank = len(batch) + 2
        nan = builders.scalar_constant(float("nan"), builders.element_type_of(b), builders.shape_of(b)) \
            if letter in "sd" else _complex_nan(b)
        x = builders.select(builders.broadcast_in_dim(ok, builders.shape_of(b), list(range(rank - 2))), x, nan)
    rewrite.replace(op, [x])


def _complex_nan(like: ir.Value) -> ir.Value:
    shape = builders.shape_of(like)
    part = ir.ComplexType(builders.element_type_of(like)).element_type
    nan = builders.scalar_constant(float("nan"), part, shape)
    return builders.op1("stablehlo.complex", like.type, [nan, nan])
