"""CHLO ops the rewrites left (erf, top_k, acosh, ...) become StableHLO through MLIR's own legalization."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


@register_pass("legalize-chlo", "rewrite remaining CHLO ops (erf, top_k, acosh, ...) into StableHLO",
               needs_valid_input=True, preserves={Fact.VALID})
def legalize_chlo(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    run_mlir_pipeline(module, "func.func(chlo-legalize-to-stablehlo)")
