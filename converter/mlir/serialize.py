"""Module ↔ bytes in the three forms the CLI reads and writes: MLIR text, MLIR bytecode,
and StableHLO's versioned portable artifact."""

from __future__ import annotations

import io
import os
import re
import tempfile

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs import _stablehlo

from converter.common.errors import ConverterError
from converter.mlir.context import make_context

# Magic bytes: MLIR bytecode starts with 'ML\xefR'; a portable artifact is bytecode too
# (of the vhlo dialect), told apart by parsing.
_BYTECODE_MAGIC = b"ML\xefR"


def module_to_bytes(module: ir.Module, emit: str = "mlir", *, debug_info: bool = True,
                    target_version: str | None = None) -> str | bytes:
    if emit == "mlir":
        return module_text(module, debug_info)
    if emit == "bytecode":
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        return buf.getvalue()
    if emit == "portable":
        version = target_version or default_target_version()
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        try:
            # The string form works on a copy; serializing the ir.Module itself would turn
            # the caller's module into VHLO in place.
            return _stablehlo.serialize_portable_artifact_str(buf.getvalue(), version)
        except Exception as e:  # the binding raises plain errors for unknown versions
            raise ConverterError(f"cannot write a StableHLO {version} artifact: {e}") from None
    raise ValueError(f"unknown --emit {emit}")


# What MLIR's IR printing writes in front of the module it prints before a pass.
_DUMP_HEADER = b"// -----// IR Dump Before "


def module_text(module: ir.Module, debug_info: bool = True) -> str:
    """The module's MLIR text, exactly as `get_asm(enable_debug_info=debug_info,
    large_elements_limit=None)` writes it, several times faster: the binding's printer
    hands the text to a Python callback a token at a time (one call per ~2 bytes), where
    MLIR's pass manager, asked to print the module before a pass into a directory, writes
    it in C++ into a file.  The pass (topological-sort: it reorders only graph regions,
    whose order has no meaning) runs after the text is written."""
    try:
        with tempfile.TemporaryDirectory(prefix="hlo-roundtrip-print-") as tmp:
            with module.context:
                pm = passmanager.PassManager.parse("builtin.module(topological-sort)")
            pm.enable_ir_printing(print_before_all=True, print_after_all=False, enable_debug_info=debug_info,
                                  large_elements_limit=None, tree_printing_dir_path=tmp)
            pm.enable_verifier(False)
            pm.run(module.operation)
            files = [os.path.join(d, f) for d, _, names in os.walk(tmp) for f in names]
            if len(files) == 1:
                with open(files[0], "rb") as f:
                    data = f.read()
                newline = data.find(b"\n")
                if data.startswith(_DUMP_HEADER) and newline > 0 and data.endswith(b"\n\n\n"):
                    return data[newline + 1 : -2].decode("utf-8")
    except (OSError, ir.MLIRError, UnicodeDecodeError):
        pass
    # The same text through the binding's printer: slower, and needs no temporary files.
    return module.operation.get_asm(enable_debug_info=debug_info, large_elements_limit=None)


def default_target_version() -> str:
    """The StableHLO version a portable artifact targets unless told otherwise: what
    consumers built in the last 12 weeks can read (jax export uses 4 weeks).  The
    minimum version (0.9.0) lacks ops real dumps need, such as variadic all_reduce."""
    return _stablehlo.get_version_from_compatibility_requirement(
        _stablehlo.StablehloCompatibilityRequirement.WEEK_12)


def load_module(data: bytes, path: str = "<bytes>", context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text, MLIR bytecode or a portable artifact."""
    context = context or make_context()
    with context:
        if data.startswith(_BYTECODE_MAGIC):
            try:
                return _stablehlo.deserialize_portable_artifact(context, data)
            except Exception:
                pass
            try:
                return ir.Module.parse(data)
            except ir.MLIRError as e:
                raise ConverterError(f"{path}: not a StableHLO module: {e}") from None
        try:
            return ir.Module.parse(data.decode("utf-8"))
        except (ir.MLIRError, UnicodeDecodeError) as e:
            raise ConverterError(f"{path}: not a StableHLO module: {e}") from None


# What MLIR files start with, after comments: `module`, an attribute or type alias
# (`#loc = ...`, `!t = ...`), a generic op (`"func.func"() ...`), file metadata (`{-#`),
# or a dialect op written at the top level (`func.func @main`, `sdy.mesh @m = ...`): a
# dotted name then a symbol or a keyword.  HLO text never does: it starts with
# `HloModule`, `ENTRY`, a computation (`name {`, `name (p: f32[]) -> f32[] {`), the
# stack-frame tables or, headerless, an instruction (`%x = f32[] ...`).
_RE_TRIVIA = re.compile(rb"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_RE_MLIR_START = re.compile(rb'module\b|[#!"]|\{-#|[A-Za-z_][\w$]*(?:\.[\w$]+)+[ \t]+[@A-Za-z_]')


def is_hlo_text(data: bytes) -> bool:
    """Whether `data` is HLO text rather than MLIR (text, bytecode or a portable
    artifact), judged by its first token as XLA's parser would read it: HLO with or
    without the `HloModule` header, however its header is laid out.  Whatever is neither
    (empty, binary garbage) counts as HLO, whose parser says what is wrong and where."""
    if data.startswith(_BYTECODE_MAGIC):
        return False
    start = _RE_TRIVIA.match(data).end()
    return _RE_MLIR_START.match(data, start) is None
