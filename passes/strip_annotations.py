"""strip-annotations: remove custom-calls that only annotate (sharding, host offload,
layout) and are the identity on values."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.registry import PassOptions, register_pass

ANNOTATION_TARGETS = (
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "LayoutConstraint", "InspectSharding",
)


@register_pass("strip-annotations",
               "remove annotation-only custom-calls (Sharding, SPMD*Shape, MoveTo*, LayoutConstraint, ...)",
               targets=ANNOTATION_TARGETS, keeps_targets=True, erases_only_its_calls=True)
def strip_annotations(module: ir.Module, options: PassOptions) -> None:
    for op in rewrite.custom_calls(module, ANNOTATION_TARGETS):
        target = rewrite.call_target(op)
        if target == "InspectSharding":  # a callback hook with no results
            if len(op.results) == 0:
                op.erase()
                continue
        operands, results = list(op.operands), list(op.results)
        if len(operands) != len(results) or any(a.type != r.type for a, r in zip(operands, results)):
            raise rewrite.op_error(op, "changes the shape of its operand, so it is not a pure annotation here "
                                  "(an SPMD shape change in a dump that was not partitioned?)")
        rewrite.replace(op, operands)
