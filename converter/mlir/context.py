"""The one place that creates MLIR contexts and maps HLO element types to MLIR types."""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _stablehlo
from jaxlib.mlir.dialects import chlo, stablehlo

_passes_registered = False


def make_context() -> ir.Context:
    """A context with func, stablehlo and chlo loaded and stablehlo's passes registered."""
    global _passes_registered  # registration is process-wide and must happen once
    if not _passes_registered:
        _stablehlo.register_stablehlo_passes()
        _passes_registered = True
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = ir.Context()
    # Single-threaded: the importer creates a type, attribute or location per op, and a
    # threaded context guards each of those with a lock (import ~7% slower); the passes
    # run over one main function, so MLIR's threads have nothing to share out.
    ctx.enable_multithreading(False)
    ctx.append_dialect_registry(registry)
    # Loaded: the dialects whose ops the importer and the passes build.  The rest of jaxlib's
    # (sdy, mhlo, Mosaic's tpu, arith, vector, ...) load when text that uses them is parsed
    # (loading them all costs 1.4 ms a context).
    ctx.dialects["func"]
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    return ctx


_ELEMENT_TYPES = {
    "pred": lambda: ir.IntegerType.get_signless(1),
    "s1": lambda: ir.IntegerType.get_signless(1),
    "s2": lambda: ir.IntegerType.get_signless(2),
    "s4": lambda: ir.IntegerType.get_signless(4),
    "s8": lambda: ir.IntegerType.get_signless(8),
    "s16": lambda: ir.IntegerType.get_signless(16),
    "s32": lambda: ir.IntegerType.get_signless(32),
    "s64": lambda: ir.IntegerType.get_signless(64),
    "u1": lambda: ir.IntegerType.get_unsigned(1),
    "u2": lambda: ir.IntegerType.get_unsigned(2),
    "u4": lambda: ir.IntegerType.get_unsigned(4),
    "u8": lambda: ir.IntegerType.get_unsigned(8),
    "u16": lambda: ir.IntegerType.get_unsigned(16),
    "u32": lambda: ir.IntegerType.get_unsigned(32),
    "u64": lambda: ir.IntegerType.get_unsigned(64),
    "f16": ir.F16Type.get,
    "bf16": ir.BF16Type.get,
    "f32": ir.F32Type.get,
    "f64": ir.F64Type.get,
    "c64": lambda: ir.ComplexType.get(ir.F32Type.get()),
    "c128": lambda: ir.ComplexType.get(ir.F64Type.get()),
    "f8e5m2": ir.Float8E5M2Type.get,
    "f8e4m3": ir.Float8E4M3Type.get,
    "f8e4m3fn": ir.Float8E4M3FNType.get,
    "f8e4m3fnuz": ir.Float8E4M3FNUZType.get,
    "f8e5m2fnuz": ir.Float8E5M2FNUZType.get,
    "f8e4m3b11fnuz": ir.Float8E4M3B11FNUZType.get,
    "f8e3m4": ir.Float8E3M4Type.get,
    "f8e8m0fnu": ir.Float8E8M0FNUType.get,
    "f4e2m1fn": ir.Float4E2M1FNType.get,
    "f6e2m3fn": ir.Float6E2M3FNType.get,
    "f6e3m2fn": ir.Float6E3M2FNType.get,
}


class NoMlirTypeError(ValueError):
    """An HLO element type with no MLIR type (XLA's buffer type, ...)."""

    def __init__(self, element_type: str):
        super().__init__(f"element type '{element_type}' has no MLIR equivalent")
        self.element_type = element_type


def mlir_element_type(element_type: str) -> ir.Type:
    """MLIR element type for an HLO element type (needs an active context)."""
    try:
        return _ELEMENT_TYPES[element_type]()
    except KeyError:
        raise NoMlirTypeError(element_type) from None


_MLIR_SPELLING = {
    "i1": "pred", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
    "complex<f32>": "c64", "complex<f64>": "c128", "f8E5M2": "f8e5m2", "f8E4M3": "f8e4m3",
    "f8E4M3FN": "f8e4m3fn", "f8E4M3FNUZ": "f8e4m3fnuz", "f8E5M2FNUZ": "f8e5m2fnuz",
    "f8E4M3B11FNUZ": "f8e4m3b11fnuz", "f8E3M4": "f8e3m4", "f8E8M0FNU": "f8e8m0fnu", "f4E2M1FN": "f4e2m1fn",
    "f6E2M3FN": "f6e2m3fn", "f6E3M2FN": "f6e3m2fn",
}


def hlo_element_type(t: ir.Type) -> str:
    """HLO element type name of an MLIR element type (no context needed)."""
    text = str(t)
    if text in _MLIR_SPELLING:
        return _MLIR_SPELLING[text]
    if text.startswith("ui") and text[2:].isdigit():
        return "u" + text[2:]
    if text.startswith("i") and text[1:].isdigit():
        return "s" + text[1:]
    raise ValueError(f"MLIR type {t} has no HLO element type")
