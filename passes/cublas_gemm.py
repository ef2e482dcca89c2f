"""cublas-gemm: XLA GPU's BLAS custom-calls → `stablehlo.dot_general` plus plain ops,
computing what XLA's GPU runtime computes.

Targets: `__cublas$gemm` (legacy cuBLAS), `__cublas$lt$matmul` (cuBLASLt with epilogues),
`__cublas$lt$matmul$f8` (scaled FP8), `__cublas$lt$matmul$mx` (block-scaled MX dot, ROCm
hipBLASLt) and `__cublas$triangularSolve` (not a GEMM; it shares the prefix and workspace).

    P   = dot_general(A, B)  per gemm_backend_config.dot_dimension_numbers; the call's
          logical output is always dot_general's natural order (batch, lhs free, rhs free)
    X   = alpha · [a_scale · b_scale ·] P          alpha = alpha_real + i·alpha_imag
    X  += beta · [c_scale ·] C                     only when beta ≠ 0 (then operand 2)
    X  += bias                                     BIAS* epilogues; the bias runs along the
                                                   output's physically minor dimensions
    AUX = X                                        *_AUX epilogues, rounded to AUX's type
    X   = act(X)     RELU max(x,0); GELU tanh approximation; SILU x·sigmoid(x)
    AMAX= max|X|                                   $f8 with damax_output, before d_scale
    X   = clamp(±max, d_scale · X)                 $f8 with an fp8 D (saturating output)
    D   = convert(X, D's type)                     one rounding
    result = (D, [AUX], [AMAX], s8 workspace)      the workspace carries nothing

A GEMM whose CPU working set exceeds GEMM_BLOCK_BYTES is computed in blocks of one output
dimension (a loop; the same result bit for bit but for GELU/SiLU epilogues under newer
jaxlib, see "Blocked GEMMs" below): XLA's CPU
compiler runs bf16 dots on f32 copies of the operands, which cuBLAS never held.

Everything between P and D is computed in the cuBLAS "scale type": f32 for f8/f16/bf16/
f32 outputs, f64 for f64, the complex type for c64/c128 (alpha and beta are rounded from
the config's doubles to it, as the runtime casts them).  Products are exact (f8/f16/bf16
operands are widened to f32 exactly; s8 operands accumulate in s32).  Legacy
`__cublas$gemm` with alpha = beta = 0 writes zeros without reading A or B (RunGemm).

Choices where the GPU's behaviour is not written down anywhere:
- Precision: f32 GEMMs at DEFAULT/HIGH precision run in TF32 on CUDA (and an explicit
  ALG_DOT_TF32_TF32_F32 always does); fp8 GEMMs at DEFAULT precision use cuBLASLt's fast
  accumulation.  The rewrite computes them with full f32 products and accumulation: the
  portable meaning of the op, without the GPU's speed shortcut (TF32's input rounding mode
  is not specified by NVIDIA, so it could not be reproduced bit for bit anyway).  Results
  agree with the GPU to TF32 precision in those cases, to a few ulps otherwise.
- Rounding order inside the kernel (alpha, scales, beta·C, bias, activation): computed in
  the scale type in the order above; cuBLAS's own order can differ by an ulp of the scale
  type before the final rounding.
- NaN through RELU: `maximum(x, 0)` propagates NaN, the semantics of the HLO `maximum` that
  XLA's rewriter fused into the epilogue.  A kernel built on `fmaxf` would return 0.
- AMAX with NaN in the output: NaN (XLA's `maximum` reduction).
- SILU epilogues are hipBLASLt-only in XLA (CUDA's runtime refuses them), yet a CUDA dump
  carries them (the MaxText sample); x·sigmoid(x) in f32 is the epilogue's definition.
- GELU is the tanh approximation (the only form XLA's rewriter fuses, and cuBLASLt's).

Not made exact, so refused with an error naming the attribute: precision_config.algorithm
ALG_DOT_F16_F16_F16 (f16 accumulation) and ALG_DOT_BF16_BF16_F32 on non-bf16 operands
(cuBLAS rounds them internally in an unspecified way), algorithms cuBLAS does not run;
fp8 FNUZ outputs (ROCm; XLA never writes them); integer GEMMs with alpha ≠ 1, beta ≠ 0
or an epilogue (XLA never fuses into them).

Sources (openxla/xla):
xla/service/gpu/transforms/gemm_rewriter.cc — GemmRewriterVisitor::{HandleDot,
HandleMultiply, HandleAdd, HandleMaximum, FuseMatrixBiasAdd, FuseVectorBiasAdd,
FuseReluActivation, FuseGeluActivation, FuseSwishActivation, CreateF8CustomCall, F8ScaleD,
F8ConvertD, F8AddDAmax, TurnDotIntoConvertAndDotForBF16BF16F32},
GemmWorkspaceRewriteVisitor::HandleCustomCall;
xla/service/gpu/backend_configs.proto — GemmBackendConfig;
xla/service/gpu/cublas_cudnn.h — the target names;
xla/service/gpu/matmul_utils.cc — GemmConfig::For, MatrixLayout::For, RunGemm,
gpublas_lt::{EpilogueAddsVectorBias, EpilogueHasAuxiliaryOutput, AsBlasLtEpilogue};
xla/service/gpu/thunk_emitter.cc — ThunkEmitter::{EmitGemmThunk, EmitCublasLtMatmulThunk,
EmitCublasLtMatmulThunkF8} (older: ir_emitter_unnested.cc, four fp8 scales);
xla/stream_executor/gpu/gpu_blas_lt.{h,cc} — GetBlasComputationType, GetScaleType;
xla/stream_executor/cuda/cuda_blas_lt.cc — AsCublasLtEpilogue, IsFastAccumEnabled,
MatmulPlan::{DoMatmul, ExecuteOnStream};
xla/service/algorithm_util.cc — GetBlasComputationType, IsSupportedByCublasOrCublasLt;
xla/service/gpu/transforms/block_scaling_rewriter.cc — GetBlockSize, BuildDequantize,
BuildHipblasltScaledDot; xla/backends/gpu/autotuner/hipblaslt.cc — ApplyConfig;
xla/service/gpu/transforms/triangular_solve_rewriter.cc — TriangularSolveRewriter::Run;
tests: xla/service/gpu/transforms/cublas_gemm_rewriter_test.cc, gemm_rewriter_fp8_test.cc.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from converter.hlo.ir import ELEMENT_BITS, FLOAT_TYPES
from converter.mlir.context import hlo_element_type
from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

LEGACY_GEMM = "__cublas$gemm"
LT_MATMUL = "__cublas$lt$matmul"
LT_MATMUL_F8 = "__cublas$lt$matmul$f8"
LT_MATMUL_MX = "__cublas$lt$matmul$mx"
GEMM_TARGETS = (LEGACY_GEMM, LT_MATMUL, LT_MATMUL_F8)
TRIANGULAR_SOLVE = "__cublas$triangularSolve"


@dataclass(frozen=True)
class Epilogue:
    adds_bias: bool
    activation: str | None  # None, "relu", "gelu", "silu"
    has_aux: bool


# GemmBackendConfig.Epilogue (backend_configs.proto); the proto prints enum names, and an
# older dump may print the number.
EPILOGUES: dict[str, Epilogue] = {
    "DEFAULT": Epilogue(False, None, False), "BIAS": Epilogue(True, None, False),
    "RELU": Epilogue(False, "relu", False), "BIAS_RELU": Epilogue(True, "relu", False),
    "GELU": Epilogue(False, "gelu", False), "GELU_AUX": Epilogue(False, "gelu", True),
    "BIAS_GELU": Epilogue(True, "gelu", False), "BIAS_GELU_AUX": Epilogue(True, "gelu", True),
    "SILU": Epilogue(False, "silu", False), "BIAS_SILU": Epilogue(True, "silu", False),
}
EPILOGUE_NUMBERS = ["DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "GELU_AUX", "BIAS_GELU", "BIAS_GELU_AUX",
                    "SILU", "BIAS_SILU"]

# Largest finite values of the fp8 output types cuBLASLt writes (CUDA): its conversion
# saturates, which is why F8ConvertD may drop the HLO's clamp(±max).
FP8_OUTPUT_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}

# precision_config.algorithm values whose cuBLAS compute type is f32 (or f64, or exact for
# the operand types involved), per algorithm_util::GetBlasComputationType; the TF32 and
# fast-accumulation ones are computed at full precision (see the module doc).
FULL_PRECISION_ALGORITHMS = {
    "ALG_UNSET", "ALG_DOT_F32_F32_F32", "ALG_DOT_F64_F64_F64", "ALG_DOT_F16_F16_F32",
    "ALG_DOT_TF32_TF32_F32", "ALG_DOT_TF32_TF32_F32_X3", "ALG_DOT_BF16_BF16_F32_X3",
    "ALG_DOT_BF16_BF16_F32_X6", "ALG_DOT_BF16_BF16_F32_X9", "ALG_DOT_ANY_F8_ANY_F8_F32",
    "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM",
}
PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


@dataclass
class GemmOperands:
    """The operands of one GEMM custom-call, by role (positions depend on beta, the
    epilogue and, for $f8, the XLA version that wrote the dump)."""

    a: ir.Value
    b: ir.Value
    c: ir.Value | None = None
    bias: ir.Value | None = None
    bias_index: int = -1
    a_scale: ir.Value | None = None
    b_scale: ir.Value | None = None
    c_scale: ir.Value | None = None
    d_scale: ir.Value | None = None


@register_pass("cublas-gemm",
               "cuBLAS/cuBLASLt GEMM custom-calls (epilogues, alpha/beta, fp8 scales, MX) → dot_general + plain ops",
               targets=GEMM_TARGETS + (LT_MATMUL_MX, TRIANGULAR_SOLVE),
               preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def lower_cublas_gemm(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    # One walk: the lowerings write no calls of these targets.
    gemms, mx, solves = walks.custom_calls_of(GEMM_TARGETS, LT_MATMUL_MX, TRIANGULAR_SOLVE)
    for op in gemms:
        lower_cublas_matmul(op, options.gemm_block_bytes)
    for op in mx:
        lower_cublas_lt_matmul_mx(op)
    for op in solves:
        lower_cublas_triangular_solve(op)


# ---------------------------------------------------------------------------------------
# Reading the call


def gemm_backend_config(op: ir.Operation) -> dict[str, Any]:
    config = rewrite.backend_config(op)
    gemm = config.get("gemm_backend_config")
    if not isinstance(gemm, dict):
        raise rewrite.op_error(op, "backend_config has no gemm_backend_config")
    return gemm


def _number(op: ir.Operation, gemm: dict[str, Any], key: str, default: float) -> float:
    value = gemm.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise rewrite.op_error(op, f"gemm_backend_config.{key} is not a number: {value!r}") from None


def _epilogue(op: ir.Operation, gemm: dict[str, Any]) -> Epilogue:
    name = gemm.get("epilogue", "DEFAULT")
    if isinstance(name, int) and 0 <= name < len(EPILOGUE_NUMBERS):
        name = EPILOGUE_NUMBERS[name]
    if name not in EPILOGUES:
        raise rewrite.op_error(op, f"gemm_backend_config.epilogue {name} is not one XLA defines "
                              f"({', '.join(EPILOGUES)})")
    return EPILOGUES[name]


def _ints(values) -> list[int]:
    return [int(v) for v in values or []]


def _dimension_lists(gemm: dict[str, Any]) -> tuple[list[int], list[int], list[int], list[int]]:
    """gemm_backend_config.dot_dimension_numbers: lhs batch, rhs batch, lhs contracting,
    rhs contracting dimensions."""
    dims = gemm.get("dot_dimension_numbers") or {}
    return (_ints(dims.get("lhs_batch_dimensions")), _ints(dims.get("rhs_batch_dimensions")),
            _ints(dims.get("lhs_contracting_dimensions")), _ints(dims.get("rhs_contracting_dimensions")))


def _dimension_numbers(gemm: dict[str, Any]) -> stablehlo.DotDimensionNumbers:
    lhs_b, rhs_b, lhs_c, rhs_c = _dimension_lists(gemm)
    return stablehlo.DotDimensionNumbers.get(lhs_batching_dimensions=lhs_b, rhs_batching_dimensions=rhs_b,
                                             lhs_contracting_dimensions=lhs_c, rhs_contracting_dimensions=rhs_c)


def _is_workspace(value: ir.Value) -> bool:
    t = ir.RankedTensorType(value.type)
    return t.rank == 1 and isinstance(t.element_type, ir.IntegerType) and ir.IntegerType(t.element_type).width == 8


def _is_fp8(t: ir.Type) -> bool:
    """An 8-bit float type (every `f8...` type; read without printing the type)."""
    return isinstance(t, ir.FloatType) and ir.FloatType(t).width == 8


def _split_operands(op: ir.Operation, target: str, beta: float, epilogue: Epilogue,
                    d_elem: ir.Type) -> GemmOperands:
    """Operand roles by position (ThunkEmitter::EmitCublasLtMatmulThunk[F8], EmitGemmThunk)."""
    ops = list(op.operands)
    if len(ops) < 2:
        raise rewrite.op_error(op, f"a GEMM needs operands A and B; found {len(ops)}")
    call = GemmOperands(ops[0], ops[1])
    k = 2
    if beta != 0:
        if len(ops) <= k:
            raise rewrite.op_error(op, f"gemm_backend_config.beta={beta} but the call has no addend operand C")
        call.c = ops[k]
        k += 1
    if target == LT_MATMUL_F8:
        rank0 = [ir.RankedTensorType(v.type).rank == 0 for v in ops]
        if len(ops) >= k + 4 and all(rank0[k:k + 4]):
            # Older XLA (IrEmitterUnnested): A, B, [C], a, b, c, d scales, [bias].
            call.a_scale, call.b_scale, call.c_scale, call.d_scale = ops[k:k + 4]
            k += 4
            if epilogue.adds_bias:
                if len(ops) <= k:
                    raise rewrite.op_error(op, "the epilogue adds a bias but the call has no bias operand")
                call.bias, call.bias_index = ops[k], k
                k += 1
        else:
            # Current XLA: A, B, [C], a_scale, b_scale, [bias], [d_scale].
            if len(ops) < k + 2 or not all(rank0[k:k + 2]):
                raise rewrite.op_error(op, "an fp8 GEMM needs scalar a_scale and b_scale operands after A, B"
                                      + (" and C" if beta != 0 else ""))
            call.a_scale, call.b_scale = ops[k], ops[k + 1]
            k += 2
            if epilogue.adds_bias:
                if len(ops) <= k or rank0[k]:
                    raise rewrite.op_error(op, "the epilogue adds a bias but the call has no bias operand")
                call.bias, call.bias_index = ops[k], k
                k += 1
            if _is_fp8(d_elem):
                # The runtime takes d_scale from the last operand whenever D is fp8.
                # F8ConvertD appends one (constant 1 when nothing matched); without it the
                # last operand is read all the same (gemm_rewriter_fp8_test's
                # UnscaledABUnscaledDF8 reads b_scale) — reproduced literally.
                if len(ops) == k + 1:
                    k += 1
                call.d_scale = ops[-1]
                if not rank0[-1]:
                    raise rewrite.op_error(op, "an fp8 output needs a scalar d_scale as the last operand")
        if not _is_fp8(d_elem):
            call.d_scale = None  # the runtime reads d_scale only for an fp8 D
    elif epilogue.adds_bias:
        if len(ops) <= k:
            raise rewrite.op_error(op, "the epilogue adds a bias but the call has no bias operand")
        call.bias, call.bias_index = ops[k], k
        k += 1
    if k != len(ops):
        raise rewrite.op_error(op, f"has {len(ops)} operands; beta={beta} and the epilogue account for {k}")
    return call


def _check_algorithm(op: ir.Operation, gemm: dict[str, Any], a_elem: ir.Type, b_elem: ir.Type) -> None:
    algorithm = (gemm.get("precision_config") or {}).get("algorithm", "ALG_UNSET")
    if algorithm in FULL_PRECISION_ALGORITHMS:
        return
    if algorithm == "ALG_DOT_BF16_BF16_F32":
        # XLA rounds f32 operands to bf16 with HLO converts before the call
        # (TurnDotIntoConvertAndDotForBF16BF16F32): on bf16 operands this is exact f32 math.
        if isinstance(a_elem, ir.BF16Type) and isinstance(b_elem, ir.BF16Type):
            return
        raise rewrite.op_error(op, f"precision_config.algorithm {algorithm} on {a_elem} x {b_elem} operands: cuBLAS "
                              "rounds them to bf16 internally, in a way it does not specify")
    if algorithm == "ALG_DOT_F16_F16_F16":
        raise rewrite.op_error(op, f"precision_config.algorithm {algorithm}: cuBLAS accumulates in f16 in an "
                              "unspecified order, which has no exact portable equivalent")
    raise rewrite.op_error(op, f"precision_config.algorithm {algorithm} is not one cuBLAS runs "
                          "(algorithm_util::IsSupportedByCublasOrCublasLt)")


def _precision_attr(gemm: dict[str, Any]) -> ir.Attribute | None:
    precisions = (gemm.get("precision_config") or {}).get("operand_precision")
    if precisions and len(precisions) == 2 and all(p in PRECISIONS for p in precisions):
        return ir.ArrayAttr.get([stablehlo.PrecisionAttr.get(p) for p in precisions])
    return None


# ---------------------------------------------------------------------------------------
# Building the replacement


def lower_cublas_matmul(op: ir.Operation, block_bytes: int = 0) -> None:
    """`__cublas$gemm`, `__cublas$lt$matmul`, `__cublas$lt$matmul$f8` → dot_general and
    the epilogue as plain ops (module doc); one whose CPU working set exceeds
    `block_bytes` (0: GEMM_BLOCK_BYTES) in blocks (`_block_plan`)."""
    target = rewrite.call_target(op)
    gemm = gemm_backend_config(op)
    epilogue = _epilogue(op, gemm)
    if target == LEGACY_GEMM and epilogue != EPILOGUES["DEFAULT"]:
        raise rewrite.op_error(op, f"gemm_backend_config.epilogue {gemm.get('epilogue')}: legacy cuBLAS GEMMs "
                              "run no epilogue (XLA fuses them only into cuBLASLt calls)")
    alpha_real = _number(op, gemm, "alpha_real", 1.0)
    alpha_imag = _number(op, gemm, "alpha_imag", 0.0)
    beta = _number(op, gemm, "beta", 0.0)
    has_amax = bool(gemm.get("damax_output", False))
    results = list(op.results)
    n_values = 1 + epilogue.has_aux + has_amax
    if len(results) < n_values or any(not _is_workspace(r) for r in results[n_values:]):
        raise rewrite.op_error(op, f"expected results (D{', AUX' if epilogue.has_aux else ''}"
                              f"{', AMAX' if has_amax else ''}, workspace); found {len(results)}")
    d_type = ir.RankedTensorType(results[0].type)
    d_elem = d_type.element_type
    shape = list(d_type.shape)
    if _is_fp8(d_elem) and str(d_elem) not in FP8_OUTPUT_MAX:
        raise rewrite.op_error(op, f"an fp8 output of type {d_elem}: XLA writes fp8 GEMM outputs only on CUDA "
                              f"({', '.join(FP8_OUTPUT_MAX)}); its conversion is not defined here")
    call = _split_operands(op, target, beta, epilogue, d_elem)
    a_elem, b_elem = builders.element_type_of(call.a), builders.element_type_of(call.b)
    _check_algorithm(op, gemm, a_elem, b_elem)

    complex_out = isinstance(d_elem, ir.ComplexType)
    if alpha_imag != 0 and not complex_out:
        raise rewrite.op_error(op, f"gemm_backend_config.alpha_imag={alpha_imag} with a real output type {d_elem} "
                              "(GemmConfig::For rejects it)")
    integer_in = isinstance(a_elem, ir.IntegerType)
    integer_out = isinstance(d_elem, ir.IntegerType)
    # The scale type (GetScaleType): everything after the product is computed in it.
    if isinstance(d_elem, ir.F64Type) or complex_out or integer_out:
        scale_t = d_elem
    else:
        scale_t = ir.F32Type.get()
    if integer_out and (alpha_real != 1 or beta != 0 or epilogue != EPILOGUES["DEFAULT"]):
        raise rewrite.op_error(op, f"an integer GEMM with gemm_backend_config alpha_real={alpha_real}, beta={beta}, "
                              f"epilogue={gemm.get('epilogue', 'DEFAULT')}: XLA never fuses into these")
    if call.c is not None and builders.shape_of(call.c) != shape:
        raise rewrite.op_error(op, f"the addend C has shape {builders.shape_of(call.c)}, not D's {shape}")
    spec = _GemmSpec(op, gemm, call, epilogue, d_type, scale_t,
                     # s8 x s8 accumulates exactly in s32; everything else in the scale type.
                     ir.IntegerType.get_signless(32) if integer_in else scale_t,
                     complex(alpha_real, alpha_imag) if complex_out else alpha_real, beta,
                     [ir.RankedTensorType(r.type).element_type for r in results[1:n_values]],
                     _bias_dims(op, call, d_type) if call.bias is not None else [])
    with rewrite.at(op):
        if target == LEGACY_GEMM and alpha_real == 0 and alpha_imag == 0 and beta == 0:
            # RunGemm writes zeros without reading A or B (NaN/Inf in them do not matter).
            _replace(op, [builders.scalar_constant(0, d_elem, shape)], n_values)
            return
        plan = _block_plan(spec, block_bytes or GEMM_BLOCK_BYTES)
        if plan is None:
            values = _gemm_values(spec, _operand_values(spec), shape)
        else:
            values = _blocked_gemm_values(spec, *plan)
    _replace(op, values, n_values)


@dataclass
class _GemmSpec:
    """One GEMM call as read from the dump: what `_gemm_values` computes from operands."""

    op: ir.Operation
    gemm: dict[str, Any]
    call: GemmOperands
    epilogue: Epilogue
    d_type: ir.RankedTensorType
    scale_t: ir.Type
    product_elem: ir.Type
    alpha: float | complex
    beta: float
    extra_elems: list[ir.Type]  # AUX's, AMAX's element types (those the call has)
    bias_dims: list[int]  # D's dimension along which each bias dimension runs


# Operand roles of GemmOperands in the order `_operand_values` lists them.
_ROLES = ("a", "b", "c", "bias", "a_scale", "b_scale", "c_scale", "d_scale")


def _operand_values(spec: _GemmSpec) -> dict[str, ir.Value]:
    return {role: getattr(spec.call, role) for role in _ROLES if getattr(spec.call, role) is not None}


def _gemm_values(spec: _GemmSpec, v: dict[str, ir.Value], shape: list[int]) -> list[ir.Value]:
    """D, [AUX], [AMAX] of the GEMM of operands `v` (keyed by role) whose output has shape
    `shape`: the whole call, or one block of it (`_blocked_gemm_values`)."""
    scale_t, d_elem = spec.scale_t, spec.d_type.element_type
    lhs, rhs = v["a"], v["b"]
    if _is_fp8(builders.element_type_of(lhs)) or _is_fp8(builders.element_type_of(rhs)):
        # Every fp8 value is an f32 value: products and sums as cuBLASLt's f32 compute type.
        lhs, rhs = builders.convert(lhs, scale_t), builders.convert(rhs, scale_t)
    x = _dot_general(spec.op, lhs, rhs, spec.gemm, ir.RankedTensorType.get(shape, spec.product_elem))
    x = builders.convert(x, scale_t)
    if isinstance(d_elem, ir.IntegerType):
        return [x]
    if spec.alpha != 1:
        x = builders.binary("multiply", x, builders.scalar_constant(spec.alpha, scale_t, shape))
    if "a_scale" in v:
        # Both scales multiply the product (the rewriter inverts divisors into them).
        scale = builders.binary("multiply", builders.convert(v["a_scale"], scale_t), builders.convert(v["b_scale"], scale_t))
        x = builders.binary("multiply", x, builders.broadcast_in_dim(scale, shape, []))
    if "c" in v:
        c = builders.convert(v["c"], scale_t)
        if "c_scale" in v:
            c = builders.binary("multiply", c, builders.broadcast_in_dim(builders.convert(v["c_scale"], scale_t), shape, []))
        if spec.beta != 1:
            c = builders.binary("multiply", c, builders.scalar_constant(spec.beta, scale_t, shape))
        x = builders.binary("add", x, c)
    if "bias" in v:
        x = builders.binary("add", x, builders.broadcast_in_dim(builders.convert(v["bias"], scale_t), shape, spec.bias_dims))
    extra = iter(spec.extra_elems)
    aux = builders.convert(x, next(extra)) if spec.epilogue.has_aux else None
    x = _activation(x, spec.epilogue.activation)
    amax = None
    if bool(spec.gemm.get("damax_output", False)):
        amax = builders.convert(builders.reduce(builders.unary("abs", x), list(range(len(shape))), "maximum", 0.0), next(extra))
    if "d_scale" in v:
        fmax = FP8_OUTPUT_MAX[str(d_elem)]
        x = builders.binary("multiply", x, builders.broadcast_in_dim(builders.convert(v["d_scale"], scale_t), shape, []))
        x = builders.clamp(builders.scalar_constant(-fmax, scale_t), x, builders.scalar_constant(fmax, scale_t))
    return [builders.convert(x, d_elem)] + ([aux] if aux is not None else []) + ([amax] if amax is not None else [])


# ---------------------------------------------------------------------------------------
# Blocked GEMMs
#
# XLA's CPU compiler runs a bf16/f16 dot on f32 copies of its operands, and the rewrite's
# product lives in the scale type before its rounding to D: a GEMM that cuBLAS ran on
# bf16 tensors holds, on the CPU, f32 copies up to three times its bf16 size (the MaxText
# sample: f32[65536,32768] for one operand).  Such a GEMM is computed in blocks of one
# output dimension (a batch dimension, or a free dimension of the larger operand): a loop
# slices the operands, runs the same dot and epilogue on the block and writes it into D.
# Each element is the same dot product over the same k, and the blocks start at multiples
# of BLOCK_ALIGN rows, so every row keeps its place in the CPU kernel's register tiles
# (Eigen and YNNPACK tile rows by 8 or 16 lanes and treat a partial tile differently): the
# result is the unblocked one bit for bit, except that jaxlib 0.11+'s CPU compiler may
# evaluate a GELU or SiLU epilogue's tanh/exp by another approximation in the loop body
# than in the whole GEMM's fusion (a few ulps of f32).

# Bytes of a GEMM's working set on the CPU (operands as the dot reads them, the product
# in its element type) above which it is computed in blocks of about this size.
GEMM_BLOCK_BYTES = 256 << 20
# Blocks are multiples of this many rows (a multiple of every CPU vector width in elements).
BLOCK_ALIGN = 64


def _cpu_bytes(t: ir.Type) -> int:
    """Bytes per element of a dot operand or product as XLA's CPU dot holds it: floats
    narrower than 32 bits widened to f32."""
    name = hlo_element_type(t)
    bits = ELEMENT_BITS[name]
    if name in FLOAT_TYPES:
        bits = max(bits, 32)
    return max(1, bits // 8)


def _output_dim_sources(spec: _GemmSpec) -> list[tuple[int | None, int | None]]:
    """For each dimension of D (dot_general's order: batch, lhs free, rhs free), the
    dimension of A and of B it comes from (None: not in that operand)."""
    lhs_b, rhs_b, lhs_c, rhs_c = _dimension_lists(spec.gemm)
    free_a = [i for i in range(len(builders.shape_of(spec.call.a))) if i not in lhs_b and i not in lhs_c]
    free_b = [i for i in range(len(builders.shape_of(spec.call.b))) if i not in rhs_b and i not in rhs_c]
    return list(zip(lhs_b, rhs_b)) + [(i, None) for i in free_a] + [(None, i) for i in free_b]


def _block_plan(spec: _GemmSpec, block_bytes: int) -> tuple[int, int, list[tuple[int | None, int | None]]] | None:
    """(dimension of D, block size, `_output_dim_sources(spec)`) when the GEMM's CPU
    working set exceeds `block_bytes`: the dimension whose blocking leaves the fewest
    bytes whole (the larger operand's), in blocks of about `block_bytes`, a multiple of
    BLOCK_ALIGN (a divisor of the dimension where one is near); None to compute it whole."""
    a, bm = spec.call.a, spec.call.b
    sizes = {"a": math.prod(builders.shape_of(a)) * _cpu_bytes(builders.element_type_of(a)),
             "b": math.prod(builders.shape_of(bm)) * _cpu_bytes(builders.element_type_of(bm)),
             "d": math.prod(spec.d_type.shape) * _cpu_bytes(spec.product_elem)}
    sources = _output_dim_sources(spec)
    if sum(sizes.values()) <= block_bytes or len(spec.d_type.shape) != len(sources):
        return None
    best = None
    for dim, (in_a, in_b) in enumerate(sources):
        extent = spec.d_type.shape[dim]
        if extent < 2 * BLOCK_ALIGN:
            continue
        sliced = sizes["d"] + (sizes["a"] if in_a is not None else 0) + (sizes["b"] if in_b is not None else 0)
        key = (sum(sizes.values()) - sliced, -extent)
        if best is None or key < best[0]:
            best = (key, dim, sliced)
    if best is None:
        return None
    _, dim, sliced = best
    extent = spec.d_type.shape[dim]
    rows = extent * block_bytes // sliced  # rows of about block_bytes
    size = max(BLOCK_ALIGN, rows - rows % BLOCK_ALIGN)
    for candidate in range(size, size // 2, -BLOCK_ALIGN):
        if extent % candidate == 0:
            return dim, candidate, sources
    return (dim, size, sources) if size < extent else None


def _blocked_gemm_values(spec: _GemmSpec, dim: int, size: int,
                         sources: list[tuple[int | None, int | None]]) -> list[ir.Value]:
    """The GEMM in blocks of `size` along D's dimension `dim` (`sources`: those of
    `_output_dim_sources`): a loop over the whole blocks, then the rows left (fewer than
    `size`, from a multiple of `size`) as one more block of their own size."""
    i32 = ir.IntegerType.get_signless(32)
    shape = list(spec.d_type.shape)
    extent = shape[dim]
    blocks, tail = divmod(extent, size)
    in_a, in_b = sources[dim]
    operands = _operand_values(spec)
    roles = list(operands)
    # Per role: the operand dimension that runs along D's `dim` (None: not sliced).
    along: dict[str, int | None] = {role: None for role in roles}
    along["a"], along["b"] = in_a, in_b
    if "c" in operands:
        along["c"] = dim
    if "bias" in operands and dim in spec.bias_dims:
        along["bias"] = spec.bias_dims.index(dim)
    has_amax = bool(spec.gemm.get("damax_output", False))
    values = [builders.zeros_like_type(ir.RankedTensorType.get(shape, spec.d_type.element_type))]
    if spec.epilogue.has_aux:
        values.append(builders.zeros_like_type(ir.RankedTensorType.get(shape, spec.extra_elems[0])))
    if has_amax:
        values.append(builders.scalar_constant(0, spec.extra_elems[-1]))
    n = len(values)

    def block(start: ir.Value, rows: int, acc: list[ir.Value], v: list[ir.Value]) -> list[ir.Value]:
        zero = builders.scalar_constant(0, i32)
        sliced: dict[str, ir.Value] = {}
        for role, value in zip(roles, v):
            d = along[role]
            full = builders.shape_of(value)
            sliced[role] = value if d is None else builders.dynamic_slice(
                value, [start if k == d else zero for k in range(len(full))], full[:d] + [rows] + full[d + 1:])
        new = _gemm_values(spec, sliced, shape[:dim] + [rows] + shape[dim + 1:])
        starts = [start if k == dim else zero for k in range(len(shape))]
        out = [builders.dynamic_update_slice(whole, part, starts) for whole, part in zip(acc[:n - has_amax], new)]
        if has_amax:
            # max is exact: the maximum of the blocks' maxima is D's.
            out.append(builders.binary("maximum", acc[-1], new[-1]))
        return out

    def cond(i, *rest):
        return builders.compare(i, builders.scalar_constant(blocks, i32), "LT", "SIGNED")

    def body(i, *rest):
        start = builders.binary("multiply", i, builders.scalar_constant(size, i32))
        return [builders.binary("add", i, builders.scalar_constant(1, i32)), *block(start, size, list(rest[:n]), list(rest[n:])),
                *rest[n:]]

    results = builders.while_loop([builders.scalar_constant(0, i32), *values, *operands.values()], cond, body)[1:1 + n]
    if tail:
        results = block(builders.scalar_constant(blocks * size, i32), tail, results, list(operands.values()))
    return results


def _dot_general(op: ir.Operation, lhs: ir.Value, rhs: ir.Value, gemm: dict[str, Any],
                 result_type: ir.RankedTensorType) -> ir.Value:
    numbers = _dimension_numbers(gemm)
    attrs = {"dot_dimension_numbers": numbers}
    lhs, rhs = builders.dot_operands(lhs, rhs, result_type.element_type, bool(numbers.lhs_batching_dimensions))
    precision = _precision_attr(gemm)
    if precision is not None:
        attrs["precision_config"] = precision
    dot = builders.op("stablehlo.dot_general", [result_type], [lhs, rhs], attrs)
    try:
        dot.verify()
    except ir.MLIRError as e:
        raise rewrite.op_error(op, f"gemm_backend_config.dot_dimension_numbers do not give the output {result_type} "
                              f"from {lhs.type} x {rhs.type}: {e}") from None
    return dot.result


def _replace(op: ir.Operation, values: list[ir.Value], n_values: int) -> None:
    """Replace the value results; a workspace that something reads becomes zeros (its
    contents are undefined), an unread one needs no replacement."""
    rest: list[ir.Value | None] = []
    for r in list(op.results)[n_values:]:
        if rewrite.has_uses(r):
            with rewrite.at(op):
                rest.append(builders.zeros_like_type(r.type))
        else:
            rest.append(None)
    rewrite.replace(op, values + rest)


def _bias_dims(op: ir.Operation, call: GemmOperands, d_type: ir.RankedTensorType) -> list[int]:
    """cuBLASLt adds the bias vector along D's physically most-minor dimensions: bias
    dimension bias_m2m[i] runs along D dimension d_m2m[i] (FuseVectorBiasAdd's check,
    MakeOutputColumnMajor); it is broadcast over every other dimension, batch included.
    The D dimension of each bias dimension."""
    bias_shape = builders.shape_of(call.bias)
    if len(bias_shape) > d_type.rank:
        raise rewrite.op_error(op, f"bias of shape {bias_shape} has more dimensions than the output {d_type}")
    d_m2m = rewrite.dump_layout(op, "result", 0, d_type.rank)
    bias_m2m = rewrite.dump_layout(op, "operand", call.bias_index, len(bias_shape))
    dims = [0] * len(bias_shape)
    for i in range(len(bias_shape)):
        dims[bias_m2m[i]] = d_m2m[i]
    if any(bias_shape[i] != d_type.shape[d] for i, d in enumerate(dims)):
        raise rewrite.op_error(op, f"bias of shape {bias_shape} does not run along the physically minor dimensions "
                              f"{dims} of the output {d_type} (layout {d_m2m})")
    return dims


def _activation(x: ir.Value, activation: str | None) -> ir.Value:
    if activation is None:
        return x
    shape = builders.shape_of(x)
    et = builders.element_type_of(x)

    def const(v: float) -> ir.Value:
        return builders.scalar_constant(v, et, shape)

    if activation == "relu":
        return builders.binary("maximum", x, const(0.0))
    if activation == "silu":
        return builders.binary("multiply", x, builders.unary("logistic", x))
    # GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    cube = builders.binary("multiply", x, builders.binary("multiply", x, x))
    inner = builders.binary("multiply", const(math.sqrt(2 / math.pi)), builders.binary("add", x, builders.binary("multiply", const(0.044715), cube)))
    return builders.binary("multiply", builders.binary("multiply", const(0.5), x), builders.binary("add", const(1.0), builders.unary("tanh", inner)))


# ---------------------------------------------------------------------------------------
# Block-scaled (MX) dot


def lower_cublas_lt_matmul_mx(op: ir.Operation) -> None:
    """`__cublas$lt$matmul$mx(lhs, rhs, lhs_scale, rhs_scale)` (ROCm hipBLASLt, written by
    BlockScalingRewriter / HipblasLtBackend::ApplyConfig) → the dequantized dot of
    BlockScalingRewriter's reference expansion (BuildDequantize): each scale multiplies a
    block of `K / scale.shape[k]` consecutive elements along the contracting dimension.
    Dequantizing in f32 is exact (the e8m0 scales are powers of two); the dot accumulates
    in f32 and the output is rounded once to D's type."""
    config = rewrite.backend_config(op)
    gemm = config.get("gemm_backend_config") or {}
    if len(op.operands) != 4:
        raise rewrite.op_error(op, f"expected operands (lhs, rhs, lhs_scale, rhs_scale); found {len(op.operands)}")
    if _number(op, gemm, "beta", 0.0) != 0 or _epilogue(op, gemm) != EPILOGUES["DEFAULT"]:
        raise rewrite.op_error(op, "gemm_backend_config beta/epilogue: XLA writes MX calls with beta=0 and no epilogue")
    alpha = _number(op, gemm, "alpha_real", 1.0)
    results = list(op.results)
    if not results or any(not _is_workspace(r) for r in results[1:]):
        raise rewrite.op_error(op, "expected results (D, workspace)")
    d_type = ir.RankedTensorType(results[0].type)
    lhs, rhs, lhs_scale, rhs_scale = op.operands
    rank = len(builders.shape_of(lhs))
    dims = gemm.get("dot_dimension_numbers")
    if dims:
        lhs_c, rhs_c = _ints(dims.get("lhs_contracting_dimensions")), _ints(dims.get("rhs_contracting_dimensions"))
        lhs_b, rhs_b = _ints(dims.get("lhs_batch_dimensions")), _ints(dims.get("rhs_batch_dimensions"))
    else:
        # block_scaling_rewriter: contracting = the last dimension, batch = dimension 0 of rank 3.
        lhs_c, rhs_c = [rank - 1], [len(builders.shape_of(rhs)) - 1]
        lhs_b = rhs_b = [0] if rank == 3 else []
    if len(lhs_c) != 1 or len(rhs_c) != 1:
        raise rewrite.op_error(op, "gemm_backend_config.dot_dimension_numbers: a block-scaled dot has one contracting dimension")
    f32 = ir.F32Type.get()
    with rewrite.at(op):
        lhs_f32 = _dequantize(op, lhs, lhs_scale, lhs_c[0], f32)
        rhs_f32 = _dequantize(op, rhs, rhs_scale, rhs_c[0], f32)
        x = _dot_general(op, lhs_f32, rhs_f32, {"dot_dimension_numbers": {
            "lhs_contracting_dimensions": lhs_c, "rhs_contracting_dimensions": rhs_c,
            "lhs_batch_dimensions": lhs_b, "rhs_batch_dimensions": rhs_b}},
            ir.RankedTensorType.get(list(d_type.shape), f32))
        if alpha != 1:
            x = builders.binary("multiply", x, builders.scalar_constant(alpha, f32, list(d_type.shape)))
        d = builders.convert(x, d_type.element_type)
    _replace(op, [d], 1)


def _dequantize(op: ir.Operation, x: ir.Value, scale: ir.Value, k_dim: int, f32: ir.Type) -> ir.Value:
    x_shape, s_shape = builders.shape_of(x), builders.shape_of(scale)
    if len(s_shape) != len(x_shape) or any(s != d for i, (s, d) in enumerate(zip(s_shape, x_shape)) if i != k_dim) \
            or s_shape[k_dim] == 0 or x_shape[k_dim] % s_shape[k_dim]:
        raise rewrite.op_error(op, f"scale of shape {s_shape} does not block operand {x_shape} along dimension {k_dim}")
    return builders.block_dequantize(x, scale, f32)


# ---------------------------------------------------------------------------------------
# Triangular solve


def lower_cublas_triangular_solve(op: ir.Operation) -> None:
    """`__cublas$triangularSolve(a, b)` → a triangular solve (a loop of plain ops, which
    every StableHLO compiler takes) with the options XLA stored at the top level of
    backend_config (TriangularSolveRewriter::Run)."""
    config = rewrite.backend_config(op)
    if len(op.operands) != 2 or len(op.results) < 1:
        raise rewrite.op_error(op, "expected (a, b) → (x, workspace)")
    transpose = config.get("transpose_a", "NO_TRANSPOSE")
    if isinstance(transpose, int):
        transpose = ["TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"][transpose]
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise rewrite.op_error(op, f"backend_config.transpose_a {transpose} is not a triangular-solve option")
    with rewrite.at(op):
        x = builders.triangular_solve(*op.operands, left_side=bool(config.get("left_side", False)),
                               lower=bool(config.get("lower", False)), transpose_a=transpose,
                               unit_diagonal=bool(config.get("unit_diagonal", False)))
    _replace(op, [x], 1)
