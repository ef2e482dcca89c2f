"""strip-annotations: remove custom-calls that only annotate (sharding, host offload,
layout, Shardy's round-trip markers) and are the identity on values."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

# Shardy (jax >= 0.4.3x with jax_use_shardy_partitioner, the default from jax 0.7) writes
# its annotations into HLO as custom-calls named in XLA's
# xla/service/spmd/shardy/constants.h: FuncResultSharding and PropagationBarrier pass
# their operand through; ShardingGroup has no result (it ties values into one sharding
# group).  Its shardings on other instructions are frontend attributes
# (xla.sdy.sharding, xla.sdy.meshes), which the importer does not read as values.
SDY_IDENTITY_TARGETS = ("xla.sdy.FuncResultSharding", "xla.sdy.PropagationBarrier")
# Calls with no value to pass on: erased.
NO_RESULT_TARGETS = ("InspectSharding", "xla.sdy.ShardingGroup")
# A shard_map's boundary before SPMD partitioning (a `call` of
# `xla.sdy.manual_computation_body` between them): the identity only where the operand
# and result shapes agree (every manual axis of size 1, or nothing split).
SDY_MANUAL_TARGETS = ("xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape")

ANNOTATION_TARGETS = (
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "LayoutConstraint", "InspectSharding",
    *SDY_IDENTITY_TARGETS, "xla.sdy.ShardingGroup", *SDY_MANUAL_TARGETS,
)


@register_pass("strip-annotations",
               "remove annotation-only custom-calls (Sharding, SPMD*Shape, MoveTo*, LayoutConstraint, "
               "xla.sdy.*, ...)",
               targets=ANNOTATION_TARGETS, preserves={Fact.CALL_TARGETS, Fact.OPS_BUT_ITS_CALLS, Fact.USES})
def strip_annotations(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(ANNOTATION_TARGETS):
        target = rewrite.call_target(op)
        if target in NO_RESULT_TARGETS and not any(rewrite.has_uses(r) for r in op.results):
            op.erase()
            continue
        operands, results = list(op.operands), list(op.results)
        if len(operands) != len(results) or any(a.type != r.type for a, r in zip(operands, results)):
            if target in SDY_MANUAL_TARGETS:
                raise rewrite.op_error(
                    op, "a shard_map (Shardy manual computation) in a module SPMD partitioning has not run on: "
                        "its body computes per-device pieces, which only XLA's partitioner lays out; convert "
                        "the partitioned (optimized) dump instead")
            raise rewrite.op_error(op, "changes the shape of its operand, so it is not a pure annotation here "
                                  "(an SPMD shape change in a dump that was not partitioned?)")
        rewrite.replace(op, operands)
