"""Runs MLIR's own passes (canonicalize, cse, ...) through jaxlib's pass manager."""

from __future__ import annotations

from jaxlib.mlir import ir, passmanager


def run_mlir_pipeline(module: ir.Module, pipeline: str) -> None:
    """Run an MLIR textual pipeline nested under the module, e.g. "canonicalize"."""
    pm = passmanager.PassManager.parse(f"builtin.module({pipeline})")
    # MLIR's passes keep a valid module valid; the pass manager verifies their input.
    pm.enable_verifier(False)
    pm.run(module.operation)
