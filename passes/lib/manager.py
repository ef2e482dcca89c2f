"""Runs a pipeline of registered passes: skips those with nothing to rewrite, verifies the
result (naming the pass that broke the module), times each pass, and can write or print
the module after each.  What it knows of the module between passes (its ops, whether it
verifies) follows what each pass declares it keeps (passes.lib.facts)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

from jaxlib.mlir import ir

from converter.common.files import write_atomic
from converter.common.suggest import did_you_mean
from passes.lib.errors import PassError, UnknownPassError
from passes.lib.facts import Fact
from passes.lib.registry import PASSES, Pass, PassOptions
from passes.lib.walks import WalkTracker

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
    "te-grouped-quantize",
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
    """For a pipeline that runs MLIR's cse with only passes that keep Fact.USES before it
    (rewrites of custom-calls and of the ops they name, which build no duplicate of an op
    they did not build): those passes' tests of whether they may drop a use of a value
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
    if "cse" not in names or any(name not in PASSES for name in names):
        return None
    before = [PASSES[name] for name in names[: names.index("cse")]]
    if not all(p.keeps(Fact.USES) for p in before):
        return None
    return tuple(p.may_drop_use for p in before if p.may_drop_use is not None)


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
            declared = " (it is registered as keeping Fact.VALID)" if passes[0] in PASSES and \
                PASSES[passes[0]].keeps(Fact.VALID) else ""
            error = PassError(f"pass '{passes[0]}' produced an invalid module{declared}:\n{e}")
        else:
            names = ", ".join(f"'{n}'" for n in passes)
            error = PassError(f"one of the passes {names} produced an invalid module (--verify-each names "
                              f"which):\n{e}")
        error.input_unverified = input_unverified
        raise error from None


class IRPrinter:
    """The module written after each step of a pipeline (the import, then every pass,
    also one skipped for having nothing to do): `--dump-dir` files NN-name.mlir, and
    `--print-ir-after-all` sections as mlir-opt prints them."""

    def __init__(self, dump_dir: str | None, stream: TextIO | None):
        self.dump_dir, self.stream = dump_dir, stream
        if dump_dir:
            os.makedirs(dump_dir, exist_ok=True)

    @property
    def active(self) -> bool:
        return bool(self.dump_dir) or self.stream is not None

    def after(self, module: ir.Module, step: int, name: str, skipped: bool = False) -> None:
        """After step `step` (0: the import) named `name`."""
        if self.dump_dir:
            write_atomic(os.path.join(self.dump_dir, f"{step:02d}-{name}.mlir"),
                         module.operation.get_asm(enable_debug_info=True, large_elements_limit=None))
        if self.stream is not None:
            what = "import" if step == 0 else f"{name} (nothing to do)" if skipped else name
            self.stream.write(f"// -----// IR after {what} //----- //\n{module}\n")


class Verifier:
    """When the module is verified, and whom a failure blames.  Verifying a large module
    costs as much as most rewrites: once, after the last pass, unless asked after each
    pass (or the module is written after each: a module written for debugging has
    verified), or a pass needs a valid module; the passes that keep Fact.VALID are not
    blamed."""

    def __init__(self, module: ir.Module, each: bool, verified_input: bool):
        self.module, self.each = module, each
        # The passes that ran since the module last verified.
        self.unverified: list[str] = [] if verified_input else [UNVERIFIED_INPUT]

    def before(self, p: Pass) -> None:
        if p.needs_valid_input and self.unverified:
            self.now()

    def after(self, p: Pass) -> None:
        """After `p` changed the module."""
        if not p.keeps(Fact.VALID):
            self.unverified.append(p.name)
        if self.each:  # every pass that changed the module, whatever it declares
            self.unverified = self.unverified if p.name in self.unverified else [*self.unverified, p.name]
            self.now()

    def now(self) -> None:
        verify(self.module, self.unverified)
        self.unverified = []


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
    pipeline_passes = _resolve(pipeline)
    options = options or PassOptions()
    report = PipelineReport()
    printer = IRPrinter(dump_dir, print_ir_after_all)
    verifier = Verifier(module, options.verify_each or printer.active, verified_input)
    walks = WalkTracker(module, options.allow_custom_calls)
    printer.after(module, 0, "import")  # as mlir-opt does: the input before the first pass
    with module.context, ir.Location.unknown():
        for step, p in enumerate(pipeline_passes, start=1):
            if progress:
                progress(p.name)
            start = time.perf_counter()
            skipped = not walks.has_work(p)
            if not skipped:
                _run_pass(module, p, options, walks, verifier)
            report.timings.append((p.name, time.perf_counter() - start))
            printer.after(module, step, p.name, skipped)
        if verifier.unverified:
            start = time.perf_counter()
            verifier.now()
            report.timings.append(("verify", time.perf_counter() - start))
    return report


def _resolve(pipeline: str | list[str] | None) -> list[Pass]:
    names = parse_pipeline(pipeline) if isinstance(pipeline, (str, type(None))) else list(pipeline)
    for name in names:
        if name not in PASSES:
            raise UnknownPassError(f"unknown pass '{name}'{did_you_mean(name, PASSES, quote=chr(39))} "
                                   f"(known passes: {', '.join(sorted(PASSES))})")
    return [PASSES[name] for name in names]


def _run_pass(module: ir.Module, p: Pass, options: PassOptions, walks: WalkTracker, verifier: Verifier) -> None:
    """Run one pass; what the tracker and the verifier know afterwards follows what it
    declares it keeps (passes.lib.facts)."""
    verifier.before(p)
    walks.before_pass(p)
    try:
        changed = p.run(module, options, walks)
    except PassError:
        raise
    except ir.MLIRError as e:
        raise PassError(f"pass '{p.name}' failed: {e}") from None
    derived = walks.after_pass(p, changed)
    if changed is False:  # the pass says it left the module as it was
        return
    verifier.after(p)
    if verifier.each:
        walks.check(p, derived)
