"""xla-builder-math: `xla_builder.math.*` custom-calls (XLA's client math library kept as
named calls, as XLA's own HLO tests write them) → portable ops of the same function.

XLA's test pass (xla/hlo/tools/tests/hlo_opt_test_only_passes.cc) expands a call named
`xla_builder.math.<Fn>` into the HLO that `xla::<Fn>` of xla/hlo/builder/lib/math.h
builds, over the call's operands in order, and keeps it as the call's `to_apply`
computation.  Here:
- a call that carries its computation (called_computations) is that computation, inlined;
- otherwise the function is written with the op of the same definition: CHLO for the
  elementary and special functions CHLO has (legalized to StableHLO at once: CHLO's
  expansions are ports of math.cc), and JAX's lowering of the same lax function for the
  rest (lax.igamma_grad_a, lax.random_gamma_grad, lax.betainc, lax.igamma, lax.igammac,
  also ports of math.cc), whose StableHLO is cloned in.
"""

from __future__ import annotations

from jaxlib.mlir import ir, passmanager

from converter.hlo import dtypes
from converter.mlir.context import hlo_element_type
from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

PREFIX = "xla_builder.math."
# math.h function → (CHLO op, operand count).  Polygamma(n, x), Zeta(x, q) and
# NextAfter(from, to) take their operands in math.h's order, which is CHLO's.
CHLO = {
    "Acos": ("chlo.acos", 1), "Acosh": ("chlo.acosh", 1), "Asin": ("chlo.asin", 1), "Asinh": ("chlo.asinh", 1),
    "Atan": ("chlo.atan", 1), "Atanh": ("chlo.atanh", 1), "Cosh": ("chlo.cosh", 1), "Sinh": ("chlo.sinh", 1),
    "Tan": ("chlo.tan", 1), "Erf": ("chlo.erf", 1), "Erfc": ("chlo.erfc", 1), "ErfInv": ("chlo.erf_inv", 1),
    "Lgamma": ("chlo.lgamma", 1), "Digamma": ("chlo.digamma", 1), "BesselI1e": ("chlo.bessel_i1e", 1),
    "NextAfter": ("chlo.next_after", 2), "Polygamma": ("chlo.polygamma", 2), "Zeta": ("chlo.zeta", 2),
}
# math.h function → (jax.lax function name, operand count), same operand order.
LAX = {
    "IgammaGradA": ("igamma_grad_a", 2), "RandomGammaGrad": ("random_gamma_grad", 2),
    "RegularizedIncompleteBeta": ("betainc", 3), "Igamma": ("igamma", 2), "Igammac": ("igammac", 2),
}
TARGETS = tuple(PREFIX + name for name in sorted({**CHLO, **LAX}))


@register_pass("xla-builder-math", "xla_builder.math.* custom-calls (XLA client math) → CHLO/StableHLO of the same function",
               # Any name: a call that carries XLA's expansion is inlined whatever it computes.
               targets=TARGETS + (PREFIX + "*",), preserves={Fact.USES})
def lower_xla_builder_math(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    calls = walks.custom_calls(PREFIX + "*")
    if not calls:
        return
    for op in calls:
        _lower_one(module, op)
    passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(module.operation)
    run_mlir_pipeline(module, "symbol-dce")


def _lower_one(module: ir.Module, op: ir.Operation) -> None:
    name = rewrite.call_target(op)[len(PREFIX):]
    operands = list(op.operands)
    if len(op.results) != 1:
        raise rewrite.op_error(op, f"expected one result, found {len(op.results)}")
    result_type = op.results[0].type
    if "called_computations" in op.attributes:
        callee = ir.FlatSymbolRefAttr(ir.ArrayAttr(op.attributes["called_computations"])[0]).value
        with rewrite.at(op):
            values = rewrite.clone_function_body(rewrite.lookup_function(module, callee), operands)
        rewrite.replace(op, values)
        return
    if name in CHLO:
        chlo_name, arity = CHLO[name]
        _check_arity(op, name, arity)
        with rewrite.at(op):
            value = builders.op1(chlo_name, result_type, operands)
        rewrite.replace(op, [value])
        return
    if name in LAX:
        lax_name, arity = LAX[name]
        _check_arity(op, name, arity)
        with rewrite.at(op):
            value = _lax_function(lax_name, operands, result_type)
        rewrite.replace(op, [value])
        return
    raise rewrite.op_error(op, f"no portable form of xla::{name} (known: {', '.join(sorted({**CHLO, **LAX}))}), "
                          f"and the call carries no computation (to_apply) to inline")


def _check_arity(op: ir.Operation, name: str, arity: int) -> None:
    if len(op.operands) != arity:
        raise rewrite.op_error(op, f"xla::{name} takes {arity} operand(s), the call has {len(op.operands)}")


def _lax_function(lax_name: str, operands: list[ir.Value], result_type: ir.Type) -> ir.Value:
    """JAX's StableHLO for lax.<lax_name> on the operands' shapes and types, cloned at
    the insertion point (its private helpers inlined first)."""
    import jax
    from jax import lax

    specs = []
    for v in operands:
        t = ir.RankedTensorType(v.type)
        specs.append(jax.ShapeDtypeStruct(tuple(t.shape), dtypes.numpy_dtype(_hlo_type(t.element_type))))
    text = jax.jit(getattr(lax, lax_name)).lower(*specs).as_text()
    context = operands[0].type.context
    lowered = ir.Module.parse(text, context)
    rewrite.inline_calls(lowered)
    main = next(f.operation for f in lowered.body.operations
                if f.operation.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == "main")
    (value,) = rewrite.clone_function_body(main, operands)
    if value.type != result_type:
        raise rewrite.PassError(f"lax.{lax_name} gives {value.type}, the call declares {result_type}")
    return value


def _hlo_type(element: ir.Type) -> str:
    name = hlo_element_type(element)
    if name not in ("f16", "bf16", "f32", "f64"):
        raise rewrite.PassError(f"xla_builder math of element type {name}: only floating types are defined")
    return name
