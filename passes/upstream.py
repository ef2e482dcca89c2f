"""Upstream MLIR passes run through jaxlib's pass manager (not rewritten here)."""

from __future__ import annotations

from jaxlib.mlir import ir, passmanager

from passes.registry import PassOptions, register_pass


def _run(module: ir.Module, pipeline: str) -> None:
    pm = passmanager.PassManager.parse(f"builtin.module({pipeline})")
    # MLIR's passes keep a valid module valid; the pass manager verifies their input.
    pm.enable_verifier(False)
    pm.run(module.operation)


@register_pass("canonicalize", "MLIR canonicalization (folds, simplifies; semantics-preserving)",
               needs_valid_input=True, keeps_targets=True)
def canonicalize(module: ir.Module, options: PassOptions) -> None:
    _run(module, "canonicalize")


@register_pass("cse", "common subexpression elimination", needs_valid_input=True, keeps_targets=True)
def cse(module: ir.Module, options: PassOptions) -> None:
    _run(module, "cse")


@register_pass("symbol-dce", "remove private functions nothing calls", needs_valid_input=True, keeps_targets=True)
def symbol_dce(module: ir.Module, options: PassOptions) -> None:
    _run(module, "symbol-dce")


@register_pass("inline", "inline every func.call (e.g. fusions kept by --keep-fusions), then drop private functions",
               needs_valid_input=True)
def inline(module: ir.Module, options: PassOptions) -> None:
    from passes.rewrite import inline_calls

    inline_calls(module)
    _run(module, "symbol-dce")


@register_pass("legalize-chlo", "rewrite remaining CHLO ops (erf, top_k, acosh, ...) into StableHLO",
               needs_valid_input=True)
def legalize_chlo(module: ir.Module, options: PassOptions) -> None:
    _run(module, "func.func(chlo-legalize-to-stablehlo)")
