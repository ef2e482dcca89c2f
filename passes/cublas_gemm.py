"""cublas-gemm: XLA GPU's BLAS custom-calls → `stablehlo.dot_general` plus plain ops,
computing what XLA's GPU runtime computes.

Targets: `__cublas$gemm` (legacy cuBLAS), `__cublas$lt$matmul` (cuBLASLt with epilogues),
`__cublas$lt$matmul$f8` (scaled FP8), `__cublas$triangularSolve`.

    P   = dot_general(A, B)  per gemm_backend_config.dot_dimension_numbers; the call's
          logical output is always dot_general's natural order (batch, lhs free, rhs free)
    X   = alpha · [a_scale · b_scale ·] P          alpha = alpha_real + i·alpha_imag
    X  += beta · [c_scale ·] C                     only when beta ≠ 0 (operand 2)
    X  += bias                                     BIAS* epilogues; bias runs along the
                                                   output's physically minor dimensions
    AUX = X                                        *_AUX epilogues, rounded to D's type
    X   = act(X)     RELU max(x,0); GELU tanh approximation; SILU x·sigmoid(x)
    AMAX= max|X|                                   $f8 with damax_output, before d_scale
    X   = clamp(±max, d_scale · X)                 $f8 with an fp8 D (saturating output)
    D   = convert(X, D's type)                     one rounding, from f32 (f64, complex)

The result tuple is (D, [AUX], [AMAX], s8 workspace); the workspace carries nothing.

Portable meaning vs the GPU: f32 GEMMs at DEFAULT/HIGH precision run in TF32 on CUDA by
default, and fp8 GEMMs at DEFAULT use cuBLASLt's fast accumulation; the rewrite computes
them at full f32 precision — the op's meaning, without the GPU's speed shortcut.  Exact
in-kernel rounding order is cuBLAS's and not specified; results agree to a few ulps.

Sources (openxla/xla): xla/service/gpu/transforms/gemm_rewriter.cc (GemmRewriterVisitor:
HandleDot, HandleMultiply, FuseMatrixBiasAdd, FuseVectorBiasAdd, FuseReluActivation,
FuseGeluActivation, CreateF8CustomCall, F8ConvertD, F8AddDAmax, GemmWorkspaceRewriteVisitor),
xla/service/gpu/backend_configs.proto (GemmBackendConfig), xla/service/gpu/matmul_utils.cc
(GemmConfig::For, RunGemm), xla/service/gpu/thunk_emitter.cc (EmitCublasLtMatmulThunk[F8]),
xla/stream_executor/cuda/cuda_blas_lt.cc (MatmulPlan::DoMatmul),
xla/service/gpu/transforms/triangular_solve_rewriter.cc.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from passes import rewrite as rw
from passes.registry import PassOptions, register_pass

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8")
TRIANGULAR_SOLVE = "__cublas$triangularSolve"
EPILOGUES = {
    # name: (adds vector bias, activation, has aux output)
    "DEFAULT": (False, None, False), "BIAS": (True, None, False),
    "RELU": (False, "relu", False), "BIAS_RELU": (True, "relu", False),
    "GELU": (False, "gelu", False), "BIAS_GELU": (True, "gelu", False),
    "GELU_AUX": (False, "gelu", True), "BIAS_GELU_AUX": (True, "gelu", True),
    "SILU": (False, "silu", False), "BIAS_SILU": (True, "silu", False),
}
FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0, "f8E4M3FNUZ": 240.0, "f8E5M2FNUZ": 57344.0}
PRECISIONS = {"DEFAULT", "HIGH", "HIGHEST"}


@dataclass
class GemmCall:
    """The parts of one GEMM custom-call, by role."""

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
               "cuBLAS/cuBLASLt GEMM custom-calls (epilogues, alpha/beta, fp8 scales) → dot_general + plain ops",
               targets=GEMM_TARGETS + (TRIANGULAR_SOLVE,))
def lower_cublas_gemm(module: ir.Module, options: PassOptions) -> None:
    for op in rw.custom_calls(module, GEMM_TARGETS):
        lower_gemm_call(op)
    for op in rw.custom_calls(module, TRIANGULAR_SOLVE):
        lower_cublas_triangular_solve(op)


def _ints(values) -> list[int]:
    return [int(v) for v in values or []]


def _is_workspace(value: ir.Value) -> bool:
    t = ir.RankedTensorType(value.type)
    return t.rank == 1 and isinstance(t.element_type, ir.IntegerType) and ir.IntegerType(t.element_type).width == 8


def _layout(op: ir.Operation, key: str, index: int, rank: int) -> list[int]:
    """minor_to_major of operand/result `index` as the dump printed it (default row-major)."""
    if key in op.attributes:
        layouts = ir.ArrayAttr(op.attributes[key])
        if index < len(layouts):
            m2m = [int(x) for x in np.array(ir.DenseElementsAttr(layouts[index]), dtype=np.int64).reshape(-1)] \
                if ir.DenseElementsAttr(layouts[index]).type.shape[0] else []
            if len(m2m) == rank:
                return m2m
    return list(range(rank - 1, -1, -1))


def _operands(op: ir.Operation, target: str, beta: float, adds_bias: bool, d_type: ir.Type) -> GemmCall:
    ops = list(op.operands)
    call = GemmCall(ops[0], ops[1])
    k = 2
    if beta != 0:
        if len(ops) <= k:
            raise rw.op_error(op, f"beta={beta} but no addend operand C")
        call.c = ops[k]
        k += 1
    if target == "__cublas$lt$matmul$f8":
        rank0 = [ir.RankedTensorType(v.type).rank == 0 for v in ops]
        old_layout = len(ops) >= k + 4 and all(rank0[k:k + 4])
        if old_layout:  # older XLA: a, b, c, d scales, then the bias
            call.a_scale, call.b_scale, call.c_scale, call.d_scale = ops[k:k + 4]
            k += 4
            if adds_bias:
                call.bias, call.bias_index = ops[k], k
                k += 1
        else:  # a_scale, b_scale, [bias], [d_scale]; d_scale is the last operand
            if len(ops) < k + 2:
                raise rw.op_error(op, "an fp8 GEMM needs a_scale and b_scale operands")
            call.a_scale, call.b_scale = ops[k], ops[k + 1]
            k += 2
            if adds_bias:
                call.bias, call.bias_index = ops[k], k
                k += 1
            if str(d_type) in FP8_MAX:
                # The runtime reads d_scale as the last operand when D is fp8.  F8ConvertD
                # appends one (constant 1 when nothing matched); without it, the last
                # operand is read all the same (gemm_rewriter_fp8_test's
                # UnscaledABUnscaledDF8: b_scale) — reproduced literally.
                if len(ops) == k + 1:
                    k += 1
                call.d_scale = ops[-1]
                if not rank0[-1]:
                    raise rw.op_error(op, "an fp8 output needs a scalar d_scale as the last operand")
    elif adds_bias:
        if len(ops) <= k:
            raise rw.op_error(op, "the epilogue adds a bias but the call has no bias operand")
        call.bias, call.bias_index = ops[k], k
        k += 1
    if k != len(ops):
        raise rw.op_error(op, f"has {len(ops)} operands; beta={beta} and the epilogue account for {k}")
    return call


def lower_gemm_call(op: ir.Operation) -> None:
    b = rw.build
    target = rw.call_target(op)
    config = rw.backend_config(op)
    gemm = config.get("gemm_backend_config", config)
    epilogue = gemm.get("epilogue", "DEFAULT")
    if epilogue not in EPILOGUES:
        raise rw.op_error(op, f"epilogue {epilogue} is not one this pass knows ({', '.join(EPILOGUES)})")
    adds_bias, activation, has_aux = EPILOGUES[epilogue]
    alpha_real = float(gemm.get("alpha_real", 1.0))
    alpha_imag = float(gemm.get("alpha_imag", 0.0))
    beta = float(gemm.get("beta", 0.0))
    has_amax = bool(gemm.get("damax_output", False))
    dims = gemm.get("dot_dimension_numbers", {})
    results = list(op.results)
    n_values = 1 + has_aux + has_amax
    if len(results) < n_values or any(not _is_workspace(r) for r in results[n_values:]):
        raise rw.op_error(op, f"expected results (D{', AUX' if has_aux else ''}{', AMAX' if has_amax else ''}, "
                              f"workspace), found {len(results)}")
    d_t = ir.RankedTensorType(results[0].type)
    d_elem = d_t.element_type
    call = _operands(op, target, beta, adds_bias, d_elem)

    complex_out = isinstance(d_elem, ir.ComplexType)
    if alpha_imag != 0 and not complex_out:
        raise rw.op_error(op, f"alpha_imag={alpha_imag} with a real output type {d_elem}")
    integer_out = isinstance(d_elem, ir.IntegerType)
    a_elem = b.element_type_of(call.a)
    if isinstance(d_elem, ir.F64Type) or complex_out:
        acc = d_elem
    elif integer_out or isinstance(a_elem, ir.IntegerType):
        acc = ir.IntegerType.get_signless(32)
    else:
        acc = ir.F32Type.get()

    with rw.at(op):
        lhs, rhs = call.a, call.b
        if str(a_elem).startswith("f8") or str(b.element_type_of(rhs)).startswith("f8"):
            lhs, rhs = b.convert(lhs, acc), b.convert(rhs, acc)  # exact: every f8 value is an f32
        attrs = {"dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=_ints(dims.get("lhs_batch_dimensions")),
            rhs_batching_dimensions=_ints(dims.get("rhs_batch_dimensions")),
            lhs_contracting_dimensions=_ints(dims.get("lhs_contracting_dimensions")),
            rhs_contracting_dimensions=_ints(dims.get("rhs_contracting_dimensions")))}
        precisions = (gemm.get("precision_config") or {}).get("operand_precision")
        if precisions and all(p in PRECISIONS for p in precisions):
            attrs["precision_config"] = ir.ArrayAttr.get([stablehlo.PrecisionAttr.get(p) for p in precisions])
        product_t = ir.RankedTensorType.get(d_t.shape, acc)
        try:
            x = b.op1("stablehlo.dot_general", product_t, [lhs, rhs], attrs)
        except ir.MLIRError as e:
            raise rw.op_error(op, f"dot dimension numbers do not give the output shape {d_t}: {e}") from None
        if integer_out or isinstance(acc, ir.IntegerType):
            if alpha_real != 1 or beta != 0 or activation or adds_bias:
                raise rw.op_error(op, "integer GEMMs with alpha/beta or an epilogue are not defined by XLA")
            d = b.convert(x, d_elem)
            _replace(op, [d], n_values)
            return
        shape = d_t.shape
        if target == "__cublas$gemm" and alpha_real == 0 and alpha_imag == 0 and beta == 0:
            # RunGemm writes zeros without reading A or B (NaN/Inf in them do not matter).
            _replace(op, [b.scalar_constant(0, d_elem, shape)], n_values)
            return
        if alpha_real != 1 or alpha_imag != 0:
            alpha = complex(alpha_real, alpha_imag) if complex_out else alpha_real
            x = b.binary("multiply", x, b.scalar_constant(alpha, acc, shape))
        if call.a_scale is not None:
            scale = b.binary("multiply", b.convert(call.a_scale, acc), b.convert(call.b_scale, acc))
            x = b.binary("multiply", x, b.broadcast_in_dim(scale, shape, []))
        if call.c is not None:
            c = b.convert(call.c, acc)
            if call.c_scale is not None:
                c = b.binary("multiply", c, b.broadcast_in_dim(b.convert(call.c_scale, acc), shape, []))
            if beta != 1:
                c = b.binary("multiply", c, b.scalar_constant(beta, acc, shape))
            x = b.binary("add", x, c)
        if call.bias is not None:
            x = b.binary("add", x, _broadcast_bias(op, call, b.convert(call.bias, acc), d_t))
        values = []
        aux = b.convert(x, d_elem) if has_aux else None
        x = _activation(x, activation)
        amax = None
        if has_amax:
            amax = b.reduce(b.unary("abs", x), list(range(len(shape))), "maximum", 0.0)
            amax = b.convert(amax, ir.RankedTensorType(results[1 + has_aux].type).element_type)
        if call.d_scale is not None:
            fmax = FP8_MAX[str(d_elem)]
            x = b.binary("multiply", x, b.broadcast_in_dim(b.convert(call.d_scale, acc), shape, []))
            x = b.op1("stablehlo.clamp", x.type, [b.scalar_constant(-fmax, acc, shape), x,
                                                  b.scalar_constant(fmax, acc, shape)])
        values.append(b.convert(x, d_elem))
        if aux is not None:
            values.append(aux)
        if amax is not None:
            values.append(amax)
    _replace(op, values, n_values)


def _replace(op: ir.Operation, values: list[ir.Value], n_values: int) -> None:
    rest: list[ir.Value | None] = []
    for r in list(op.results)[n_values:]:
        if rw.has_uses(r):  # a workspace someone reads: its contents are undefined; zeros
            with rw.at(op):
                rest.append(rw.build.zeros_like_type(r.type))
        else:
            rest.append(None)
    rw.replace(op, values + rest)


def _broadcast_bias(op: ir.Operation, call: GemmCall, bias: ir.Value, d_t: ir.RankedTensorType) -> ir.Value:
    """cuBLASLt adds the bias vector along D's physically most-minor dimensions: bias
    dimension bias_m2m[i] runs along D dimension d_m2m[i] (FuseVectorBiasAdd's check)."""
    b = rw.build
    bias_rank = ir.RankedTensorType(bias.type).rank
    d_rank = d_t.rank
    d_m2m = _layout(op, "hlo.result_layouts", 0, d_rank)
    bias_m2m = _layout(op, "hlo.operand_layouts", call.bias_index, bias_rank)
    dims = [0] * bias_rank
    for i in range(bias_rank):
        dims[bias_m2m[i]] = d_m2m[i]
    for i, d in enumerate(dims):
        if b.shape_of(bias)[i] != d_t.shape[d]:
            raise rw.op_error(op, f"bias of shape {b.shape_of(bias)} does not run along output dims {dims} of {d_t}")
    return b.broadcast_in_dim(bias, d_t.shape, dims)


def _activation(x: ir.Value, activation: str | None) -> ir.Value:
    b = rw.build
    shape = b.shape_of(x)
    et = b.element_type_of(x)
    if activation is None:
        return x
    if activation == "relu":
        return b.binary("maximum", x, b.scalar_constant(0.0, et, shape))
    if activation == "silu":
        return b.binary("multiply", x, b.unary("logistic", x))
    # GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    c = lambda v: b.scalar_constant(v, et, shape)  # noqa: E731
    cube = b.binary("multiply", x, b.binary("multiply", x, x))
    inner = b.binary("multiply", c(math.sqrt(2 / math.pi)), b.binary("add", x, b.binary("multiply", c(0.044715), cube)))
    return b.binary("multiply", b.binary("multiply", c(0.5), x), b.binary("add", c(1.0), b.unary("tanh", inner)))


def lower_cublas_triangular_solve(op: ir.Operation) -> None:
    """`__cublas$triangularSolve(a, b)` → stablehlo.triangular_solve with the options XLA
    stored at the top level of backend_config (TriangularSolveRewriter::Run)."""
    b = rw.build
    config = rw.backend_config(op)
    if len(op.operands) != 2 or len(op.results) < 1:
        raise rw.op_error(op, "expected (a, b) → (x, workspace)")
    transpose = config.get("transpose_a", "NO_TRANSPOSE")
    if isinstance(transpose, int):
        transpose = ["TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"][transpose]
    with rw.at(op):
        x = b.op1("stablehlo.triangular_solve", op.results[0].type, list(op.operands), {
            "left_side": ir.BoolAttr.get(bool(config.get("left_side", False))),
            "lower": ir.BoolAttr.get(bool(config.get("lower", False))),
            "unit_diagonal": ir.BoolAttr.get(bool(config.get("unit_diagonal", False))),
            "transpose_a": stablehlo.TransposeAttr.get(transpose),
        })
    _replace(op, [x], 1)
