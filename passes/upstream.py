"""Upstream MLIR passes run through jaxlib's pass manager (not rewritten here)."""

from __future__ import annotations

from jaxlib.mlir import ir, passmanager

from passes.lib.registry import PassOptions, register_pass


def _run(module: ir.Module, pipeline: str) -> None:
    passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)


@register_pass("canonicalize", "MLIR canonicalization (folds, simplifies; semantics-preserving)")
def canonicalize(module: ir.Module, options: PassOptions) -> None:
    _run(module, "canonicalize")


@register_pass("cse", "common subexpression elimination")
def cse(module: ir.Module, options: PassOptions) -> None:
    _run(module, "cse")


@register_pass("symbol-dce", "remove private functions nothing calls")
def symbol_dce(module: ir.Module, options: PassOptions) -> None:
    _run(module, "symbol-dce")


@register_pass("inline", "inline every func.call (e.g. fusions kept by --keep-fusions), then drop private functions")
def inline(module: ir.Module, options: PassOptions) -> None:
    from passes.lib.rewrite import inline_calls

    inline_calls(module)
    _run(module, "symbol-dce")


@register_pass("legalize-chlo", "rewrite remaining CHLO ops (erf, top_k, acosh, ...) into StableHLO")
def legalize_chlo(module: ir.Module, options: PassOptions) -> None:
    _run(module, "func.func(chlo-legalize-to-stablehlo)")
