"""The registry of named passes.

A pass is a function over an `ir.Module` (it rewrites the module in place) with a name
and a one-line description.  Passes that rewrite backend custom-calls list the targets
they handle, so that `inspect` and the unknown-target policy know what is supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from jaxlib.mlir import ir


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
# keeps what it knows of the module's ops); None or True: it may have changed it.
PassFn = Callable[[ir.Module, PassOptions], "bool | None"]


@dataclass(frozen=True)
class Pass:
    name: str
    doc: str
    run: PassFn
    # Custom-call targets (exact names, or prefixes ending in '*') the pass rewrites.
    targets: tuple[str, ...] = ()
    # Other ops the pass rewrites ("stablehlo.custom_call": any custom-call).  A pass that
    # names targets or ops has no work, and is skipped, when the module holds none; its
    # first walk (passes.lib.rewrite.walk / custom_calls) may be answered from the walk that
    # decided so, so it must find its ops before it changes the module.
    ops: tuple[str, ...] = ()
    # MLIR's own passes: C++ that assumes a valid module (and keeps it valid), so the
    # manager verifies what the passes before it wrote first.
    needs_valid_input: bool = False
    # The pass writes no custom-call of a target the module did not hold (it removes
    # calls, or rebuilds them, or writes plain ops), so the pass manager's list of the
    # module's targets stays a superset of them, enough to skip the passes that have none.
    keeps_targets: bool = False
    # The pass rewrites (or raises on) every custom-call of its targets, erases no other op,
    # and builds no custom-call, if, case, convolution or collective (KEPT_KINDS in
    # passes.lib.rewrite): those ops of the walk it read the module from, less its calls,
    # are all the module holds after it, and the pass manager hands them to the passes
    # after it that look for nothing else, instead of walking again (--verify-each checks
    # that against a new walk).
    erases_only_its_calls: bool = False
    # The pass cannot make a valid module invalid (it only deletes attributes that hold
    # their defaults): it adds nothing for the pass manager to verify after it.
    keeps_valid: bool = False
    # The pass changes attributes only (no op added or erased, no custom-call target or op
    # name changed): the walk it read the module from holds after it, and the pass manager
    # hands it to the passes after it (--verify-each checks that against a new walk).
    keeps_ops: bool = False
    # Whether the pass may drop a use, besides uses by custom-calls: may_drop_use(user,
    # value) is True where it may erase `user`, or rebuild it without that operand, and
    # leave `value` unused where nothing else uses it.  Read where an import merges
    # duplicate instructions for a pipeline that runs the pass before cse
    # (passes.lib.manager.merge_before_cse).  None: it drops none.
    may_drop_use: Callable[[ir.Operation, ir.Value], bool] | None = None


# name -> Pass.  Filled when the pass modules are imported (passes/__init__.py).
PASSES: dict[str, Pass] = {}


def register_pass(name: str, doc: str, targets: tuple[str, ...] = (), ops: tuple[str, ...] = (),
                  needs_valid_input: bool = False, keeps_targets: bool = False,
                  erases_only_its_calls: bool = False, keeps_valid: bool = False, keeps_ops: bool = False,
                  may_drop_use: Callable[[ir.Operation, ir.Value], bool] | None = None) -> Callable[[PassFn], PassFn]:
    if "\n" in doc:
        raise ValueError("a pass's description is one line")

    def register(fn: PassFn) -> PassFn:
        if name in PASSES:
            raise ValueError(f"two passes named '{name}'")
        PASSES[name] = Pass(name, doc, fn, targets, ops, needs_valid_input, keeps_targets, erases_only_its_calls,
                            keeps_valid, keeps_ops, may_drop_use)
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
