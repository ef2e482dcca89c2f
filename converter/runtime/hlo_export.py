"""A converted (portable StableHLO) module written back as HLO text that XLA parses:
jaxlib's own StableHLO → HLO lowering (`mlir_module_to_xla_computation`, the same entry
point in jax 0.10 and 0.12), printed with its large constants (XLA's printer elides
them as `{...}` by default, which its parser cannot read back).

What the module holds after the conversion stays as it is: a jaxlib LAPACK call
(`lapack_*_ffi`) is written as an FFI custom-call, which XLA's CPU compiler runs in a
process where jaxlib registered those handlers (jaxlib does, and the runtime initializes
them: converter/runtime/program.py), and no plain `xla` command-line tool does.  Any
other custom-call left after the conversion (a Python callback's: its handler lives in
the converting process only) is refused with its location."""

from __future__ import annotations

import io
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.common.errors import ConverterError
from converter.mlir.locations import location_name

# Custom-call targets of a converted module that XLA's CPU compiler in a jaxlib process
# runs: jaxlib's LAPACK FFI handlers (registered when jaxlib loads; their BLAS/LAPACK
# routines are looked up by initialize_lapack(), which the runtime calls).
JAXLIB_CPU_TARGET_PREFIXES = ("lapack_",)


class HloExportError(ConverterError):
    pass


@dataclass(frozen=True)
class CustomCallLeft:
    target: str
    location: str  # the HLO instruction it came from, where the location names one


def custom_calls_left(module: ir.Module) -> list[CustomCallLeft]:
    """Every stablehlo.custom_call of `module` (any function, any region depth)."""
    found: list[CustomCallLeft] = []

    def walk(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    o = inner.operation
                    if o.name == "stablehlo.custom_call":
                        target = ir.StringAttr(o.attributes["call_target_name"]).value
                        found.append(CustomCallLeft(target, location_name(o.location) or ""))
                    walk(o)

    walk(module.operation)
    return found


def needs_jaxlib(module: ir.Module) -> list[str]:
    """The custom-call targets of `module` that only a jaxlib process runs (sorted, once each)."""
    return sorted({c.target for c in custom_calls_left(module) if c.target.startswith(JAXLIB_CPU_TARGET_PREFIXES)})


def check_exportable(module: ir.Module) -> None:
    """Raise naming every custom-call XLA's CPU compiler could not run even in a jaxlib process."""
    foreign = [c for c in custom_calls_left(module) if not c.target.startswith(JAXLIB_CPU_TARGET_PREFIXES)]
    if foreign:
        raise HloExportError("the converted module still holds custom-call(s) XLA's CPU compiler cannot run from HLO "
                             "text: " + ", ".join(f"{c.target!r}" + (f" (from %{c.location})" if c.location else "")
                                                   for c in foreign))


def main_result_count(module: ir.Module) -> int:
    """How many values the module's @main returns."""
    main = next((op for op in module.body.operations if "sym_name" in op.operation.attributes
                 and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main"), None)
    if main is None:
        raise HloExportError("the converted module has no @main function")
    return len(ir.FunctionType(ir.TypeAttr(main.operation.attributes["function_type"]).value).results)


def stablehlo_to_hlo_text(module: ir.Module, return_tuple: bool | None = None) -> str:
    """HLO text of a one-device StableHLO module as jaxlib lowers it: entry parameters in the
    order of @main's arguments (no tuple parameter); the result a tuple when @main returns
    more than one value (or as `return_tuple` says)."""
    import jaxlib._jax as jax_ext

    check_exportable(module)
    if return_tuple is None:
        return_tuple = main_result_count(module) != 1
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    try:
        computation = jax_ext.mlir.mlir_module_to_xla_computation(buffer.getvalue(), use_tuple_args=False,
                                                                  return_tuple=return_tuple)
    except Exception as e:  # XlaRuntimeError: the message says what jaxlib could not lower
        raise HloExportError(f"jaxlib could not lower the converted module to HLO: {e}") from None
    return computation.as_hlo_text(print_large_constants=True)
