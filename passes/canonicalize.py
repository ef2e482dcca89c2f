"""MLIR's canonicalization of the whole module, run through jaxlib."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


@register_pass("canonicalize", "MLIR canonicalization (folds, simplifies; semantics-preserving)",
               needs_valid_input=True, preserves={Fact.CALL_TARGETS, Fact.VALID})
def canonicalize(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    run_mlir_pipeline(module, "canonicalize")
