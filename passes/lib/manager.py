"""Runs a pipeline of registered passes: skips those with nothing to rewrite, verifies the
result (naming the pass that broke the module), times each pass, and can write or print
the module after each."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

from jaxlib.mlir import ir

from converter.common.files import write_atomic
from converter.common.suggest import did_you_mean
from passes.lib.errors import PassError, UnknownPassError
from passes.lib.registry import PASSES, PassOptions, target_matches
from passes.lib.rewrite import OpIndex, PassWalks, indexed_kinds, keeping_targets

# The default pipeline: a faithful import becomes a portable module.  The
# backend rewrites come first, then the cleanups that remove what they left unused.
DEFAULT_PIPELINE: tuple[str, ...] = (
    "strip-annotations",
    # First: a plug-in registered with override=True replaces a built-in rewrite.
    "custom-call-plugins",
    "tpu-async-collectives",
    "tpu-custom-calls",
    "pallas-tpu",
    "triton-kernels",
    "topk",
    "host-callbacks",
    "cub-sort",
    "gpu-assert",
    "xla-builder-math",
    "dynamic-shape-calls",
    "threefry",
    "cublas-gemm",
    "cudnn-conv-reorder",
    "cudnn-conv",
    "cublas-grouped-gemm",
    "cudnn-norm",
    "cudnn-graph-conv",
    "cudnn-block-scaled-dot",
    "cub-scan",
    "cusolver",
    "cusparse",
    "te-fused-attention",
    "te-gemm",
    "te-grouped-gemm",
    "te-norm",
    "te-softmax",
    "te-activation",
    "te-quantize",
    "te-refused",
    "cudnn-fmha",
    "cudnn-rnn",
    "drop-unused-results",
    "custom-call-policy",
    "matmul-convolutions",
    "cse",
    "canonicalize",
    "collective-cleanup",
    "drop-default-attributes",
)


@dataclass
class PipelineReport:
    timings: list[tuple[str, float]] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(t for _, t in self.timings)


def parse_pipeline(spec: str | None) -> list[str]:
    """'default', 'none' or a comma-separated list of pass names (which may include
    'default' to splice the default pipeline in)."""
    if spec is None or spec.strip() in ("", "default"):
        return [p for p in DEFAULT_PIPELINE if p in PASSES]
    if spec.strip() == "none":
        return []
    names: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name == "default":
            names.extend(p for p in DEFAULT_PIPELINE if p in PASSES)
        elif name not in PASSES:
            known = ", ".join(sorted(PASSES))
            raise UnknownPassError(f"unknown pass '{name}' in --pipeline{did_you_mean(name, PASSES, quote=chr(39))}"
                                   f" (known passes: {known})")
        else:
            names.append(name)
    return names


def merge_before_cse(pipeline: str | list[str] | None) -> tuple[Callable[[ir.Operation, ir.Value], bool], ...] | None:
    """For a pipeline that runs MLIR's cse with only passes of the default pipeline before
    it (rewrites of custom-calls and of the ops they name, which build no duplicate of an
    op they did not build): those passes' tests of whether they may drop a use of a value
    (Pass.may_drop_use; uses by custom-calls, which they rewrite, count as dropped in any
    case).  Such a pipeline writes the same module whether the import merged duplicate
    pure instructions or cse erased them, if the import merges an instruction only into
    one whose values a use that lasts keeps alive up to cse (ImportOptions.merge_duplicates).
    None for any other pipeline, and for one naming an unknown pass (running it says
    which)."""
    try:
        names = parse_pipeline(pipeline) if isinstance(pipeline, (str, type(None))) else list(pipeline)
    except UnknownPassError:
        return None
    if "cse" not in names:
        return None
    before = names[: names.index("cse")]
    if not set(before) <= set(DEFAULT_PIPELINE[: DEFAULT_PIPELINE.index("cse")]):
        return None
    return tuple(PASSES[name].may_drop_use for name in before if PASSES[name].may_drop_use is not None)


# What `run_pipeline(verified_input=False)` counts as the first unverified step.
UNVERIFIED_INPUT = "<input>"


def verify(module: ir.Module, after: list[str]) -> None:
    """Verify the module, blaming the passes that ran since it last verified.  Where that
    includes the pipeline's unverified input (UNVERIFIED_INPUT first), the error blames the
    passes and sets `input_unverified`: the caller, who built the input, can tell."""
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        input_unverified = bool(after) and after[0] == UNVERIFIED_INPUT
        passes = after[1:] if input_unverified else after
        if not passes:
            error = PassError(f"the module does not verify before the first pass:\n{e}")
        elif len(passes) == 1:
            error = PassError(f"pass '{passes[0]}' produced an invalid module:\n{e}")
        else:
            names = ", ".join(f"'{n}'" for n in passes)
            error = PassError(f"one of the passes {names} produced an invalid module (--verify-each names "
                              f"which):\n{e}")
        error.input_unverified = input_unverified
        raise error from None


def run_pipeline(
    module: ir.Module,
    pipeline: str | list[str] | None = "default",
    options: PassOptions | None = None,
    *,
    dump_dir: str | None = None,
    print_ir_after_all: TextIO | None = None,
    progress: Callable[[str], None] | None = None,
    verified_input: bool = True,
) -> PipelineReport:
    """Run the passes `pipeline` names over `module` in place.  `verified_input=False`: the
    module has not verified since it was built; the first verification the pipeline does
    covers it too, and a failure there is a PassError with `input_unverified` set."""
    names = parse_pipeline(pipeline) if isinstance(pipeline, (str, type(None))) else list(pipeline)
    for name in names:
        if name not in PASSES:
            raise UnknownPassError(f"unknown pass '{name}'{did_you_mean(name, PASSES, quote=chr(39))} "
                                   f"(known passes: {', '.join(sorted(PASSES))})")
    options = options or PassOptions()
    report = PipelineReport()
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
        _write(module, os.path.join(dump_dir, "00-import.mlir"))
    # Verifying a large module costs as much as most rewrites: the module is verified once,
    # after the last pass, unless asked after each (or written after each: a module
    # written for debugging has verified).
    verify_each = options.verify_each or bool(dump_dir) or print_ir_after_all is not None
    # The passes that ran since the module last verified (MLIR's own keep it valid).
    unverified: list[str] = [] if verified_input else [UNVERIFIED_INPUT]
    # The module's ops, known since the last pass that ran.  A pass that rewrites only ops
    # or custom-call targets the module does not hold is skipped: walking a large module
    # costs as much as most rewrites.  The next pass that runs reads its ops from it.
    index: OpIndex | None = None
    # A superset of the module's custom-call targets: the index's, kept through the passes
    # that write no call of a new target (which only remove calls or rebuild them).
    targets: set[str] | None = None
    if print_ir_after_all is not None:  # as mlir-opt does: the input before the first pass
        print_ir_after_all.write(f"// -----// IR after import //----- //\n{module}\n")
    with module.context, ir.Location.unknown(), keeping_targets(options.allow_custom_calls):
        for i, name in enumerate(names, start=1):
            if progress:
                progress(name)
            start = time.perf_counter()
            p = PASSES[name]
            if p.targets or p.ops:
                if (index is None and (targets is None or any(o != "stablehlo.custom_call" for o in p.ops))) or \
                        (index is not None and not index.answers(frozenset(p.ops))):
                    index = OpIndex(module, keep=indexed_kinds())
                    targets = index.targets
                present = index.names if index is not None else {"stablehlo.custom_call"} if targets else set()
                if not any(o in present for o in p.ops) and \
                        not any(target_matches(t, c) for t in p.targets for c in targets):
                    report.timings.append((name, time.perf_counter() - start))
                    if dump_dir:
                        _write(module, os.path.join(dump_dir, f"{i:02d}-{name}.mlir"))
                    if print_ir_after_all is not None:  # every pass of the pipeline, as --dump-dir
                        print_ir_after_all.write(f"// -----// IR after {name} (nothing to do) //----- //\n{module}\n")
                    continue
            if p.needs_valid_input and unverified:
                verify(module, unverified)
                unverified = []
            offered, index = index, None
            # Only to the passes that name what they rewrite: those walk before they rewrite.
            walks = PassWalks(offered if p.ops or p.targets else None)
            try:
                with walks.active():
                    changed = p.run(module, options)
            except PassError:
                raise
            except ir.MLIRError as e:
                raise PassError(f"pass '{name}' failed: {e}") from None
            seen = walks.first
            # What the pass read the module from: the index it was offered, or its own walk.
            read = offered if offered is not None else seen if seen is not None and seen.module is module else None
            if changed is False:  # the pass says it left the module as it was: what it saw holds
                index = read
                if index is not None:
                    targets = index.targets
            else:
                derived = None
                if p.erases_only_its_calls and seen is not None and seen.module is module:
                    derived = seen.kept_after_own_calls(p.targets)
                elif p.keeps_ops:  # it changed attributes only: what it read holds
                    derived = read
                if not p.keeps_targets:
                    targets = None
                if not p.needs_valid_input and not p.keeps_valid:
                    unverified.append(name)
                if verify_each:  # every pass that changed the module, whatever it promises
                    verify(module, unverified if name in unverified else [*unverified, name])
                    unverified = []
                    if derived is not None:
                        _check_derived_index(module, derived, name)
                if derived is not None:
                    index, targets = derived, derived.targets
            report.timings.append((name, time.perf_counter() - start))
            if dump_dir:
                _write(module, os.path.join(dump_dir, f"{i:02d}-{name}.mlir"))
            if print_ir_after_all is not None:
                print_ir_after_all.write(f"// -----// IR after {name} //----- //\n{module}\n")
        if unverified:
            start = time.perf_counter()
            verify(module, unverified)
            report.timings.append(("verify", time.perf_counter() - start))
    return report


def _check_derived_index(module: ir.Module, derived: OpIndex, name: str) -> None:
    """What a pass registered as erasing only its own calls (or as keeping every op) left:
    the same ops of the derived index's kinds, in the same order, as a new walk finds."""
    walk = OpIndex(module)
    kinds = derived.kinds if derived.kinds is not None else walk.names
    walked = [(op, op_name, target) for op, op_name, target in walk.ops if op_name in kinds]
    if len(walked) != len(derived.ops) or any(a != b for a, b in zip(walked, derived.ops)):
        if PASSES[name].keeps_ops:
            promise, expected = "keeping every op", "what it read"
        else:
            promise = "erasing only its own custom-calls and building no " + ", ".join(sorted(kinds))
            expected = "what it read less what it erased"
        raise PassError(f"pass '{name}' is registered as {promise}, but the module's differ from {expected} "
                        f"({len(walked)} found, {len(derived.ops)} expected)")


def _write(module: ir.Module, path: str) -> None:
    write_atomic(path, module.operation.get_asm(enable_debug_info=True, large_elements_limit=None))
