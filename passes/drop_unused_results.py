"""drop-unused-results: remove results nothing reads — the scratch workspace that GPU
library calls return, and unused results of stablehlo.if / stablehlo.case."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

# GPU library calls whose trailing 1-D i8/u8 result is a workspace the library scribbles on.
WORKSPACE_TARGETS = ("__cublas$*", "__cudnn$*", "te_fused_attn_*", "__cusolver$*")


def _is_workspace(value: ir.Value) -> bool:
    t = ir.RankedTensorType(value.type)
    et = t.element_type
    return t.rank == 1 and isinstance(et, ir.IntegerType) and ir.IntegerType(et).width == 8


def _rebuild_without(op: ir.Operation, keep: list[int]) -> None:
    """Recreate `op` with only the results in `keep` (regions and per-result
    attributes follow)."""
    attrs = {name: op.attributes[name] for name in op.attributes}
    for key in ("result_layouts", "hlo.result_layouts"):  # one layout per result: keep them aligned
        if key in attrs:
            layouts = list(ir.ArrayAttr(attrs[key]))
            attrs[key] = ir.ArrayAttr.get([layouts[i] for i in keep])
    with rewrite.at(op):
        new = ir.Operation.create(op.name, results=[op.results[i].type for i in keep],
                                  operands=list(op.operands), attributes=attrs, regions=len(op.regions))
    for old_region, new_region in zip(op.regions, new.regions):
        for block in list(old_region.blocks):
            block.append_to(new_region)
    for new_index, old_index in enumerate(keep):
        op.results[old_index].replace_all_uses_with(new.results[new_index])
    op.erase()


@register_pass("drop-unused-results", "remove unused GPU workspace results and unused if/case results",
               ops=("stablehlo.custom_call", "stablehlo.if", "stablehlo.case"),
               # The returns of an if/case whose results it drops: their operands lose those uses.
               may_drop_use=lambda user, value: user.name == "stablehlo.return",
               preserves={Fact.CALL_TARGETS, Fact.USES})
def drop_unused_results(module: ir.Module, options: PassOptions, walks: WalkTracker) -> bool:
    # One walk for both rewrites: rebuilding a custom-call moves no if/case.
    ops = [(op, op.name) for op in walks.walk(("stablehlo.custom_call", "stablehlo.if", "stablehlo.case"))]
    changed = False  # False: the pass manager keeps what the walk found
    for op, name in ops:
        if name != "stablehlo.custom_call" or not walks.target_in(rewrite.call_target(op), WORKSPACE_TARGETS):
            continue
        results = list(op.results)
        if results and _is_workspace(results[-1]) and not rewrite.has_uses(results[-1]) and "output_operand_aliases" not in op.attributes:
            _rebuild_without(op, list(range(len(results) - 1)))
            changed = True
    for op, name in ops:
        if name == "stablehlo.custom_call":
            continue
        keep = [i for i, r in enumerate(op.results) if rewrite.has_uses(r)]
        if len(keep) == len(op.results):
            continue
        changed = True
        for region in op.regions:
            for block in region.blocks:
                term = list(block.operations)[-1]
                with term.location, ir.InsertionPoint(term):
                    ir.Operation.create("stablehlo.return", operands=[term.operands[i] for i in keep])
                term.erase()
        _rebuild_without(op, keep)
    return changed
