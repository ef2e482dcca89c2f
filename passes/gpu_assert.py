"""gpu-assert: XLA's `__xla_gpu_assert` runtime check → removed, with a warning naming it.

`__xla_gpu_assert(pred[]) -> token[]` (side-effecting, typed FFI, backend_config
`{error_msg = "..."}`; xla/backends/gpu/runtime/runtime_intrinsics.cc, written for
example by TensorFlow's CheckNumerics on GPU) stops the GPU program with `error_msg` when its
operand is false, and does nothing else.  Portable StableHLO has no operation that stops a
program, so the check cannot come along: the call is removed (its token, where something
takes it, becomes a fresh `after_all`) and a warning names each removed check, its message
and its dump line.  Where every check holds, the results are those of the GPU program; where
one would fail, the GPU program stops and the converted one runs on.  `run` reports, per
check, whether its predicate held in the run (the importer taps it as a host callback's
operand: converter/importer/callbacks.py) and warns loudly on stderr for each that failed.
"""

from __future__ import annotations

import warnings

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

TARGET = "__xla_gpu_assert"


class UncheckedAssertWarning(UserWarning):
    """A GPU runtime check the converted program does not make."""


@register_pass("gpu-assert", "XLA's __xla_gpu_assert runtime checks → removed, each named in a warning (run reports "
               "whether each held)",
               targets=(TARGET,), preserves={Fact.USES})
def lower_gpu_assert(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls((TARGET,)):
        lower_assert(op)


def lower_assert(op: ir.Operation) -> None:
    if len(op.operands) != 1 or str(builders.element_type_of(op.operands[0])) != "i1" or \
            builders.shape_of(op.operands[0]) != []:
        raise rewrite.op_error(op, f"expects one pred[] operand, got {[str(v.type) for v in op.operands]}")
    message = _error_message(op)
    where = rewrite.location_text(op)
    warnings.warn(f"{where}: {TARGET} not checked (portable StableHLO cannot stop a program; the GPU program "
                  f"would stop where it fails; `run` reports whether it held): {message!r}", UncheckedAssertWarning, stacklevel=2)
    values: list[ir.Value | None] = []
    for result in op.results:
        if not rewrite.has_uses(result):
            values.append(None)
            continue
        if not isinstance(result.type, ir.Type) or "token" not in str(result.type):
            raise rewrite.op_error(op, f"its result of type {result.type} is used; the call returns a token")
        with rewrite.at(op):
            values.append(builders.op1("stablehlo.after_all", result.type, []))
    rewrite.replace(op, values)


def _error_message(op: ir.Operation) -> str:
    """`error_msg` of the call's attributes: a typed-FFI dictionary, or the text of one (XLA's
    tests and TensorFlow write the dictionary as a string backend_config)."""
    for key in ("mhlo.backend_config", "backend_config"):
        if key not in op.attributes:
            continue
        attr = op.attributes[key]
        if isinstance(attr, ir.StringAttr) and attr.value.strip().startswith("{"):
            try:
                attr = ir.Attribute.parse(attr.value)
            except ValueError as e:
                raise rewrite.op_error(op, f"backend_config is not an attribute dictionary: {e}") from None
        if isinstance(attr, ir.DictAttr) and "error_msg" in attr:
            return ir.StringAttr(attr["error_msg"]).value
    return ""
