"""CHLO ops the rewrites left (erf, top_k, acosh, ...) become StableHLO through MLIR's own legalization."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.registry import PassOptions, register_pass


@register_pass("legalize-chlo", "rewrite remaining CHLO ops (erf, top_k, acosh, ...) into StableHLO",
               needs_valid_input=True)
def legalize_chlo(module: ir.Module, options: PassOptions) -> None:
    run_mlir_pipeline(module, "func.func(chlo-legalize-to-stablehlo)")
