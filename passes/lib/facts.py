"""What a pass keeps: the facts about a module that hold after a pass if they held before it.

As in MLIR (a pass marks the analyses it preserves, and the pass manager drops the rest), a
pass registers the facts it keeps (`register_pass(..., preserves=...)`); a pass that says
nothing keeps nothing, which is always correct and only slower.  This is the one place each
fact is described: what a pass promises by declaring it, who relies on it, and how a broken
promise is caught.
"""

from __future__ import annotations

import enum


class Fact(enum.Enum):
    # A module that verified before the pass verifies after it: the pass only deletes
    # attributes that hold their defaults, or is one of MLIR's own passes (C++ that keeps a
    # valid module valid).  Relied on by the pass manager, which verifies once, after the
    # last pass, and blames only the passes since the module last verified that do not keep
    # it valid.  Broken: --verify-each verifies after every pass that changed the module and
    # says the pass declared it.
    VALID = "valid"

    # The pass writes no custom-call of a target the module did not hold (it removes calls,
    # rebuilds them, or writes plain ops).  Relied on by the pass manager (WalkTracker): the
    # targets it knows of the module stay a superset of the module's, enough to skip a pass
    # whose targets the module does not hold without walking again.  Broken: --verify-each
    # compares a new walk's targets with what the tracker kept.
    CALL_TARGETS = "call-targets"

    # The pass changes attributes only: no op added or erased, no op name or custom-call
    # target changed.  Relied on by the pass manager (WalkTracker): the walk the pass read the
    # module from holds after it, and answers the walks of the passes after it.  Broken:
    # --verify-each compares that walk with a new one.
    OPS = "ops"

    # The pass rewrites (or refuses) every custom-call of its targets, erases no other op,
    # and builds no custom-call, if, case, convolution or collective (KEPT_KINDS in
    # passes.lib.walks): those ops of the walk it read the module from, less its calls, are
    # all of them the module holds after it.  Relied on by the pass manager (WalkTracker),
    # which hands them to the passes after it that look for nothing else instead of walking
    # again.  Broken: --verify-each compares them with a new walk.
    OPS_BUT_ITS_CALLS = "ops-but-its-calls"

    # The pass drops no use of a value (erases no user, rebuilds none without that operand)
    # other than uses by custom-calls and those its `may_drop_use` names, and builds no op
    # equal to one it did not build.  Relied on by the import (passes.lib.manager
    # merge_before_cse): duplicate pure instructions are merged at import, instead of by
    # cse, only for a pipeline whose passes before cse all keep it; a pipeline with a pass
    # that does not is imported faithfully.  Not checked at run time: the generated programs
    # of tests/importer/test_merge_duplicates.py compare the two imports byte for byte.
    USES = "uses"

    def __str__(self) -> str:
        return self.value


# What the rewrites of backend custom-calls keep: they write no call of a new target and
# drop no use but those of the calls they rewrite.
REWRITES_CALLS = frozenset({Fact.CALL_TARGETS, Fact.USES})
