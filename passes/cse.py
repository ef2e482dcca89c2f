"""MLIR's common subexpression elimination, run through jaxlib."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.registry import PassOptions, register_pass


@register_pass("cse", "common subexpression elimination", needs_valid_input=True, keeps_targets=True)
def cse(module: ir.Module, options: PassOptions) -> None:
    run_mlir_pipeline(module, "cse")
