"""Every func.call inlined (fusions kept as functions by --keep-fusions, called
computations), then the private functions nothing calls removed."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib.mlir_pipeline import run_mlir_pipeline
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.lib.rewrite import inline_calls


@register_pass("inline", "inline every func.call (e.g. fusions kept by --keep-fusions), then drop private functions",
               needs_valid_input=True, preserves={Fact.VALID})
def inline(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    inline_calls(module)
    run_mlir_pipeline(module, "symbol-dce")
