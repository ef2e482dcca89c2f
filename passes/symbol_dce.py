"""MLIR's symbol DCE: private functions nothing calls are removed."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.registry import PassOptions, register_pass


@register_pass("symbol-dce", "remove private functions nothing calls", needs_valid_input=True, keeps_targets=True)
def symbol_dce(module: ir.Module, options: PassOptions) -> None:
    run_mlir_pipeline(module, "symbol-dce")
