"""collective-cleanup: remove collectives whose results nothing reads and merge identical
collectives on the same operands.

MLIR's DCE and CSE leave collectives alone because they communicate.  A dump is an SPMD
program — every device runs the same code — so dropping or merging a collective drops or
merges it on every device at once, and no device waits for a partner that never comes.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

COLLECTIVES = rewrite.COLLECTIVE_OPS


def _attrs_key(op: ir.Operation) -> tuple:
    """The op's attributes by name.  MLIR makes one attribute (and one type) per distinct
    value in a context, so equal values are equal objects, compared without printing."""
    return tuple(sorted(op.attributes.items(), key=lambda item: item[0]))


def _block_key(block: ir.Block) -> tuple:
    """The computation a reduction body does, by structure: printing the block instead
    would print (and number) the whole function around it, once per collective."""
    number: dict[ir.Value, int] = {arg: i for i, arg in enumerate(block.arguments)}
    ops = []
    for inner in block.operations:
        inner = inner.operation
        operands = tuple(number.get(v, -1) for v in inner.operands)
        for r in inner.results:
            number[r] = len(number)
        ops.append((inner.name, operands, _attrs_key(inner), tuple(r.type for r in inner.results)))
    return tuple(a.type for a in block.arguments), tuple(ops)


def _key(op: ir.Operation) -> tuple:
    regions = tuple(_block_key(r.blocks[0]) for r in op.regions if len(r.blocks))
    return (op.name, tuple(op.operands), _attrs_key(op), regions, tuple(r.type for r in op.results))


@register_pass("collective-cleanup", "remove unused collectives and merge identical ones (SPMD-safe)",
               ops=COLLECTIVES, preserves={Fact.CALL_TARGETS})
def collective_cleanup(module: ir.Module, options: PassOptions, walks: WalkTracker) -> bool:
    changed = True
    rounds = 0
    while changed:  # erasing one collective can leave the one feeding it unused
        changed = False
        seen: dict[tuple, list[ir.Operation]] = {}
        for op in walks.walk(COLLECTIVES):
            if not any(rewrite.has_uses(r) for r in op.results):
                op.erase()
                changed = True
                continue
            same = seen.setdefault(_key(op), [])
            first = next((f for f in same if f.block == op.block and f.is_before_in_block(op)), None)
            if first is not None:
                rewrite.replace(op, list(first.results))
                changed = True
            else:
                same.append(op)
        rounds += 1
    return rounds > 1  # the last round changed nothing: any before it did
