"""The table of import rules, one per HLO opcode (or family), in the style of JAX's
lowering rules: `@import_rule("add", "subtract")` registers a function

    rule(ctx: RuleContext, *operands) -> ir.Value | Sequence[ir.Value]

where each operand is an `ir.Value` (or the list of leaf values for a tuple-shaped
operand) and `ctx` (a fresh one per instruction, as JAX's lowering rules get one per
equation) carries the instruction, its attributes and result shape, and the importer
(types, regions, inlining, errors).  The rule builds ops at the current insertion
point and location (the instruction's; none is made for a rule registered
`builds_ops=False` or `located=False`, see UNLOCATED), and returns the values of the
instruction's flattened result leaves.
"""

from __future__ import annotations

from typing import Any, Callable

ImportRule = Callable[..., Any]

# opcode -> rule.  Filled at import time of converter.importer.rules; never mutated after.
RULES: dict[str, ImportRule] = {}
# Opcodes whose rules build no op (they hand existing values on: tuple, get-tuple-element),
# so the importer makes no location for them.
VALUE_ONLY: set[str] = set()
# Those, and the opcodes whose rules build no op at the instruction's location: the ops of
# the computation they inline each carry their own instruction's location, and an op of
# their own (a call kept as a call) they build under `ModuleImporter.location` themselves.
UNLOCATED: set[str] = set()
# Opcodes whose rules are pure: what they build depends only on the operand values and
# shapes, the result shape and the attributes (the literal, for constant), and is
# side-effect-free ops without regions at the insertion point, each of which MLIR's CSE
# merges with its equal.  An instruction equal to an earlier one of its block can take
# that one's values (ImportOptions.merge_duplicates).
PURE: set[str] = set()


def import_rule(*opcodes: str, builds_ops: bool = True, located: bool = True,
                pure: bool = False) -> Callable[[ImportRule], ImportRule]:
    def register(rule: ImportRule) -> ImportRule:
        for opcode in opcodes:
            if opcode in RULES:
                raise ValueError(f"two import rules for opcode '{opcode}'")
            RULES[opcode] = rule
            if not builds_ops:
                VALUE_ONLY.add(opcode)
            if not builds_ops or not located:
                UNLOCATED.add(opcode)
            if pure:
                PURE.add(opcode)
        return rule

    return register


# Rules made on demand for a family of opcodes no table entry names (the `-start`/`-done`
# that XLA prints for an async-wrapped op): each returns the rule for an opcode, or None.
RULE_FACTORIES: list[Callable[[str], ImportRule | None]] = []


def rule_factory(factory: Callable[[str], ImportRule | None]) -> Callable[[str], ImportRule | None]:
    RULE_FACTORIES.append(factory)
    return factory


def find_rule(opcode: str) -> ImportRule | None:
    rule = RULES.get(opcode)
    if rule is None:
        for factory in RULE_FACTORIES:
            rule = factory(opcode)
            if rule is not None:
                break
    return rule
