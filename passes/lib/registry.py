"""The registry of named passes.

A pass is a function over an `ir.Module` (it rewrites the module in place) with a name
and a one-line description.  Passes that rewrite backend custom-calls list the targets
they handle, so that `inspect` and the unknown-target policy know what is supported; every
pass declares what it keeps of the module (passes.lib.facts).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from jaxlib.mlir import ir

from passes.lib.facts import Fact

if TYPE_CHECKING:
    from passes.lib.walks import WalkTracker


@dataclass
class PassOptions:
    """Settings some passes read; every pass receives them."""

    # Custom-call targets to keep as they are (--allow-custom-call).
    allow_custom_calls: set[str] = field(default_factory=set)
    # Treat CPU-only targets that jaxlib can run (LAPACK, DUCC FFT) as errors.
    strict_portable: bool = False
    # Source file of the module, for error messages.
    path: str = ""
    # Query/key block size of the portable attention (0: chosen from the shapes).  Tests
    # set it small to exercise the blockwise loops on small shapes.
    attention_block: int = 0
    # Bytes of a GEMM's CPU working set above which cublas-gemm computes it in blocks
    # (0: its default).  Tests set it small to exercise the blocked loop on small shapes.
    gemm_block_bytes: int = 0
    # Verify the module after every pass (the pass manager otherwise verifies once, at the
    # end, and names every pass that ran when it does not verify).
    verify_each: bool = False
    # How the runtime sums floats across devices (all-reduce, reduce-scatter): "group",
    # folded in group order by `ordered-reductions` (the same bits in one process or
    # several), or "native", XLA's own collectives (XLA's bits; one process only).
    reduction_order: str = "group"


# A pass may return False to say that it left the module as it was (the pass manager then
# keeps what it knows of the module's ops); None or True: it may have changed it.  Its walks
# go through the WalkTracker the pass manager hands it (passes.lib.walks), which knows the
# module's ops from the passes before and leaves out the targets the user keeps.
PassFn = Callable[[ir.Module, PassOptions, "WalkTracker"], "bool | None"]


@dataclass(frozen=True)
class Pass:
    name: str
    doc: str
    run: PassFn
    # Custom-call targets (exact names, or prefixes ending in '*') the pass rewrites.
    targets: tuple[str, ...] = ()
    # Other ops the pass rewrites ("stablehlo.custom_call": any custom-call).  A pass that
    # names targets or ops has no work, and is skipped, when the module holds none; its
    # first walk through the tracker may be answered from the walk that decided so, so it
    # must find its ops before it changes the module.
    ops: tuple[str, ...] = ()
    # What the pass keeps (passes.lib.facts, where each fact is described); nothing: it keeps
    # nothing, and the pass manager walks and verifies again after it.
    preserves: frozenset[Fact] = frozenset()
    # MLIR's own passes: C++ that assumes a valid module, so the manager verifies what the
    # passes before it wrote first.
    needs_valid_input: bool = False
    # Where a pass keeps Fact.USES but drops some uses besides those by custom-calls:
    # may_drop_use(user, value) is True where it may erase `user`, or rebuild it without that
    # operand, and leave `value` unused where nothing else uses it.
    may_drop_use: Callable[[ir.Operation, ir.Value], bool] | None = None

    def keeps(self, fact: Fact) -> bool:
        return fact in self.preserves

    def contract(self) -> str:
        """What the pass declares, in words (`hlo-roundtrip passes --verbose`)."""
        kept = ", ".join(str(f) for f in Fact if f in self.preserves) or "nothing"
        uses = " (drops some uses: may_drop_use)" if self.may_drop_use is not None else ""
        return f"keeps {kept}{uses}" + ("; needs a valid module" if self.needs_valid_input else "")


# name -> Pass.  Filled when the pass modules are imported (passes/__init__.py).
PASSES: dict[str, Pass] = {}


def register_pass(name: str, doc: str, targets: tuple[str, ...] = (), ops: tuple[str, ...] = (), *,
                  preserves: Iterable[Fact] = (), needs_valid_input: bool = False,
                  may_drop_use: Callable[[ir.Operation, ir.Value], bool] | None = None) -> Callable[[PassFn], PassFn]:
    if "\n" in doc:
        raise ValueError("a pass's description is one line")
    kept = frozenset(preserves)
    if not all(isinstance(f, Fact) for f in kept):
        raise TypeError(f"pass '{name}': preserves= takes passes.lib.facts.Fact values, not {sorted(map(str, kept))}")
    if may_drop_use is not None and Fact.USES not in kept:
        raise ValueError(f"pass '{name}': may_drop_use names the uses a pass that keeps Fact.USES drops")
    if Fact.OPS_BUT_ITS_CALLS in kept and not targets:
        raise ValueError(f"pass '{name}': Fact.OPS_BUT_ITS_CALLS is about the calls of the targets it names")

    def register(fn: PassFn) -> PassFn:
        if name in PASSES:
            raise ValueError(f"two passes named '{name}'")
        try:
            inspect.signature(fn).bind(None, None, None)
        except TypeError:
            raise TypeError(f"pass '{name}': a pass is called as fn(module, options, walks)") from None
        PASSES[name] = Pass(name, doc, fn, targets, ops, kept, needs_valid_input, may_drop_use)
        return fn

    return register


def target_matches(pattern: str, target: str) -> bool:
    return target.startswith(pattern[:-1]) if pattern.endswith("*") else target == pattern


def pass_for_target(target: str) -> Pass | None:
    """The registered pass that rewrites custom-call `target`, if any."""
    for p in PASSES.values():
        if any(target_matches(t, target) for t in p.targets):
            return p
    return None
