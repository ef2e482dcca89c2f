"""What the pass manager knows of a module's ops between passes, and the walks of a pass.

Walking a large module costs as much as most rewrites, so the pass manager keeps one
`WalkTracker` per pipeline run and hands it to every pass: a pass finds its ops through it
(`walks.custom_calls(TARGETS)`, `walks.walk(NAMES)`), the tracker answers a pass's first walk
from what it already knows, and after the pass it keeps only what the pass declared it keeps
(passes.lib.facts): nothing, unless the pass says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from jaxlib.mlir import ir

from passes.lib.errors import PassError
from passes.lib.facts import Fact
from passes.lib.registry import target_matches
from passes.lib.rewrite import COLLECTIVE_OPS, call_target

if TYPE_CHECKING:
    from passes.lib.registry import Pass

_CUSTOM_CALL = "stablehlo.custom_call"
# The ops an index derived after a pass that keeps Fact.OPS_BUT_ITS_CALLS holds: those such
# a pass never builds.
KEPT_KINDS = frozenset({_CUSTOM_CALL, "stablehlo.if", "stablehlo.case", "stablehlo.convolution", *COLLECTIVE_OPS})


class OpIndex:
    """The ops of a module in pre-order, with their names and (custom-calls) targets, from
    one walk: which ops a module holds, for deciding which passes have work.

    Walking: every op (`keep` None), or only the ops named in `keep` (with the names of
    all: `names` is complete, `kinds` is `keep`, and the index answers walks for those
    names alone).  Or (`ops` given) the ops of `kinds`, kept from an earlier index (see
    `kept_after_own_calls`)."""

    def __init__(self, module: ir.Module, ops: list[tuple[ir.Operation, str, str]] | None = None,
                 kinds: frozenset[str] | None = None, *, keep: frozenset[str] | None = None):
        self.module = module
        self.kinds = kinds
        names: set[str] | None = None
        if ops is None:
            ops = []
            append = ops.append
            advance = ir.WalkResult.ADVANCE  # looked up once: the walk calls visit per op
            if keep is None:
                def visit(op: ir.Operation) -> ir.WalkResult:
                    name = op.name
                    append((op, name, call_target(op) if name == _CUSTOM_CALL else ""))
                    return advance
            else:
                # Most ops are of no kind a pass looks for: their names only.
                self.kinds = keep
                names = set()
                add = names.add

                def visit(op: ir.Operation) -> ir.WalkResult:
                    name = op.name
                    add(name)
                    if name in keep:
                        append((op, name, call_target(op) if name == _CUSTOM_CALL else ""))
                    return advance

            module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        self.ops = ops
        self.names = names if names is not None else {name for _, name, _ in self.ops}
        self.targets = {target for _, name, target in self.ops if name == _CUSTOM_CALL}

    def answers(self, kinds: set[str] | frozenset[str] | None) -> bool:
        """Whether this index holds every op of the names `kinds` (None: of every name)."""
        return self.kinds is None or (kinds is not None and self.kinds.issuperset(kinds))

    def kept_after_own_calls(self, own: Sequence[str], kept_targets: frozenset[str]) -> OpIndex:
        """The ops of KEPT_KINDS in this index that are left after a pass that keeps
        Fact.OPS_BUT_ITS_CALLS for its targets `own` (the calls of `kept_targets`, which no
        pass finds, stay), in order.  Read from this index alone: nothing touches the ops
        (an erased op's Python object may outlive it)."""
        kept = [entry for entry in self.ops if entry[1] in KEPT_KINDS
                and not (entry[1] == _CUSTOM_CALL and _target_in(entry[2], own, kept_targets))]
        return OpIndex(self.module, kept, KEPT_KINDS)


def _target_in(target: str, patterns: Sequence[str], kept_targets: frozenset[str]) -> bool:
    return target not in kept_targets and any(target_matches(p, target) for p in patterns)


def indexed_kinds() -> frozenset[str]:
    """The ops a walk keeps by default: the kinds passes look for (those the registered
    passes name, KEPT_KINDS, calls), so that an index answers the walks of the passes
    after it without holding every op."""
    from passes.lib.registry import PASSES

    return frozenset({"func.call", *KEPT_KINDS, *(op for p in PASSES.values() for op in p.ops)})


class WalkTracker:
    """The walk cache of one pipeline run over `module`, owned by the pass manager.

    Between passes it holds the index of the module's ops it last walked or derived (or
    none) and a superset of the module's custom-call targets (or none).  While a pass runs,
    the pass's first walk is answered from that index (every pass reads before it rewrites),
    and the index that first walk used or made is what the pass read the module from; what
    holds after the pass follows the facts it keeps (`after_pass`).  `kept_targets`: the
    targets the user keeps as they are (--allow-custom-call), which no pass's lookup finds."""

    def __init__(self, module: ir.Module, kept_targets: set[str] | frozenset[str] = frozenset()):
        self.module = module
        self.kept_targets = frozenset(kept_targets)
        self._index: OpIndex | None = None
        self._targets: set[str] | None = None
        # The current pass: the index its first walk may use (handed out once), and the
        # index its first walk used or made.
        self._offered: OpIndex | None = None
        self._read_offer: OpIndex | None = None
        self._first: OpIndex | None = None

    # -- what a pass calls -------------------------------------------------------------

    def walk(self, names: str | Sequence[str] | None = None) -> list[ir.Operation]:
        """All ops (optionally only those named `names`) in pre-order.  A list: callers may
        rewrite while iterating."""
        wanted = {names} if isinstance(names, str) else set(names) if names else None
        if wanted is None:
            return [op for op, _, _ in self._ops(None)]
        return [op for op, name, _ in self._ops(wanted) if name in wanted]

    def custom_calls(self, targets: str | Sequence[str] | None = None) -> list[ir.Operation]:
        """`stablehlo.custom_call` ops whose target is in `targets` (exact, or prefix*), less
        those of the targets the user keeps; no `targets`: every call, kept ones too."""
        pats = [targets] if isinstance(targets, str) else list(targets or [])
        return [op for op, name, target in self._ops({_CUSTOM_CALL}) if name == _CUSTOM_CALL
                and (not pats or self.target_in(target, pats))]

    def custom_calls_of(self, *groups: str | Sequence[str]) -> list[list[ir.Operation]]:
        """`custom_calls(group)` for each group, from one walk (so valid for a pass whose
        rewrites of one group write no calls of a later group)."""
        calls = [(op, target) for op, name, target in self._ops({_CUSTOM_CALL}) if name == _CUSTOM_CALL]
        pats = [[g] if isinstance(g, str) else list(g) for g in groups]
        return [[op for op, target in calls if self.target_in(target, p)] for p in pats]

    def target_in(self, target: str, patterns: Sequence[str]) -> bool:
        """Whether a custom-call target is one of `patterns` (exact names, or prefix*), and
        not one the user keeps as it is."""
        return _target_in(target, patterns, self.kept_targets)

    def _ops(self, kinds: set[str] | frozenset[str] | None) -> list[tuple[ir.Operation, str, str]]:
        index, self._offered = self._offered, None
        if index is None or not index.answers(kinds):
            index = OpIndex(self.module, keep=None if kinds is None else indexed_kinds() | frozenset(kinds))
        if self._first is None:
            self._first = index
        return index.ops

    # -- what the pass manager calls ---------------------------------------------------

    def has_work(self, p: Pass) -> bool:
        """Whether the module may hold an op or a call `p` rewrites (a pass that names none
        may have work anywhere).  Walks only when what the tracker knows does not answer."""
        if not (p.targets or p.ops):
            return True
        index, targets = self._index, self._targets
        if (index is None and (targets is None or any(o != _CUSTOM_CALL for o in p.ops))) or \
                (index is not None and not index.answers(frozenset(p.ops))):
            index = self._index = OpIndex(self.module, keep=indexed_kinds())
            targets = self._targets = index.targets
        present = index.names if index is not None else {_CUSTOM_CALL} if targets else set()
        return any(o in present for o in p.ops) or any(target_matches(t, c) for t in p.targets for c in targets)

    def before_pass(self, p: Pass) -> None:
        """`p` is about to run: its first walk may use what the tracker knows (only a pass
        that names what it rewrites, which walks before it rewrites)."""
        self._offered = self._index if p.ops or p.targets else None
        self._read_offer, self._index, self._first = self._index, None, None

    def after_pass(self, p: Pass, changed: bool | None) -> OpIndex | None:
        """`p` ran (`changed` False: it says it left the module as it was).  Keeps what the
        facts `p` keeps let it keep, and drops the rest; returns the index it derived from
        what `p` read, for `check` to compare with a new walk."""
        offered, first = self._read_offer, self._first
        self._offered = self._read_offer = self._first = None
        # What the pass read the module from: the index it was offered, or its own walk.
        read = offered if offered is not None else first
        if changed is False:  # what it saw holds
            self._index = read
            if read is not None:
                self._targets = read.targets
            return None
        derived = None
        if p.keeps(Fact.OPS_BUT_ITS_CALLS) and first is not None:
            derived = first.kept_after_own_calls(p.targets, self.kept_targets)
        elif p.keeps(Fact.OPS):  # it changed attributes only: what it read holds
            derived = read
        if not p.keeps(Fact.CALL_TARGETS):
            self._targets = None
        if derived is not None:
            self._index, self._targets = derived, derived.targets
        return derived

    def check(self, p: Pass, derived: OpIndex | None) -> None:
        """After `p` changed the module (--verify-each): what the tracker kept by the facts
        `p` declared against a new walk; a difference is a broken declaration, named."""
        if derived is None and (self._targets is None or not p.keeps(Fact.CALL_TARGETS)):
            return
        walk = OpIndex(self.module)
        if derived is not None:
            kinds = derived.kinds if derived.kinds is not None else walk.names
            walked = [(op, op_name, target) for op, op_name, target in walk.ops if op_name in kinds]
            if len(walked) != len(derived.ops) or any(a != b for a, b in zip(walked, derived.ops)):
                if p.keeps(Fact.OPS_BUT_ITS_CALLS):
                    promise = "erasing only its own custom-calls and building no " + ", ".join(sorted(kinds))
                    expected = "what it read less what it erased"
                else:
                    promise, expected = "keeping every op", "what it read"
                raise PassError(f"pass '{p.name}' is registered as {promise}, but the module's differ from {expected} "
                                f"({len(walked)} found, {len(derived.ops)} expected)")
        if self._targets is not None and p.keeps(Fact.CALL_TARGETS) and not walk.targets <= self._targets:
            new = ", ".join(f"'{t}'" for t in sorted(walk.targets - self._targets))
            raise PassError(f"pass '{p.name}' is registered as keeping Fact.CALL_TARGETS (writing no custom-call of a "
                            f"target the module did not hold), but it wrote calls of {new}")
