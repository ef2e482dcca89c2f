"""A second compiler for the portable module: IREE (`iree-base-compiler`, `iree-base-runtime`,
the optional extra `iree`), compiled for its `llvm-cpu` target and run with its local-task
driver.  Single-device modules only: IREE's collectives need its own multi-device setup,
which says nothing about the dump.

Agreement with jaxlib on the same module is the point ("portable" means more than "XLA
accepts it"); `run --engine iree` and tests/runtime/iree use it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from jaxlib.mlir import ir

from converter.common.errors import ConverterError
from converter.runtime.program import Program

# llvm-cpu for the machine it runs on: the artifact is not kept, so tune for the host.
COMPILE_FLAGS = ("--iree-llvmcpu-target-cpu=host",)


class IreeUnavailable(ConverterError):
    """The `iree` extra is not installed."""


def _iree():
    try:
        import iree.compiler as compiler
        import iree.runtime as runtime
    except ImportError:
        raise IreeUnavailable("the IREE engine needs the `iree` extra: pip install -e '.[iree]' "
                              "(iree-base-compiler and iree-base-runtime)") from None
    return compiler, runtime


def iree_available() -> bool:
    try:
        _iree()
    except IreeUnavailable:
        return False
    return True


def _entry_name(module: ir.Module) -> str:
    for op in module.body.operations:
        if op.operation.name == "func.func" and "sym_visibility" not in op.attributes:
            return ir.StringAttr(op.attributes["sym_name"]).value
    return "main"


def _refusals(program: Program) -> list[str]:
    """Why IREE cannot run this module faithfully (empty when it can try)."""
    reasons = []
    if program.num_devices > 1:
        reasons.append(f"the module runs on {program.num_devices} devices; the IREE engine runs single-device "
                       "modules (use the default jaxlib engine)")
    targets: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "stablehlo.custom_call":
            targets.add(ir.StringAttr(op.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    program.module.operation.walk(visit)
    if targets:
        reasons.append(f"custom-call(s) {', '.join(sorted(targets))} run only on jaxlib's CPU runtime")
    return reasons


@dataclass
class IreeProgram:
    """A Program's module compiled by IREE for llvm-cpu."""

    program: Program
    timings: dict[str, float] = field(default_factory=dict)
    _function: Any = None

    def compile(self, progress: Callable[[str], None] | None = None) -> None:
        if self._function is not None:
            return
        if progress:
            progress("compile (IREE)")
        compiler, runtime = _iree()
        reasons = _refusals(self.program)
        if reasons:
            raise ConverterError(f"error: {self.program.path or '<module>'}: " + "; ".join(reasons))
        module = self.program.module
        start = time.perf_counter()
        try:
            vmfb = compiler.compile_str(str(module), target_backends=["llvm-cpu"], input_type="stablehlo",
                                        extra_args=list(COMPILE_FLAGS))
        except compiler.CompilerToolError as e:
            raise ConverterError(f"error: {self.program.path or '<module>'}: IREE could not compile the module: "
                                 f"{_first_error(str(e))}") from None
        self.timings["compile"] = time.perf_counter() - start
        context = runtime.SystemContext(config=runtime.Config("local-task"))
        vm_module = runtime.VmModule.copy_buffer(context.instance, vmfb)
        context.add_vm_module(vm_module)
        self._function = context.modules[vm_module.name][_entry_name(module)]

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.execute(arrays)

    def execute(self, arrays: Sequence[np.ndarray], progress: Callable[[str], None] | None = None) -> list[np.ndarray]:
        self.compile(progress)
        inputs = self.program.check_inputs(arrays)
        if progress:
            progress("execute (IREE)")
        start = time.perf_counter()
        result = self._function(*inputs)
        results = list(result) if isinstance(result, (tuple, list)) else ([] if result is None else [result])
        outputs = [np.asarray(r.to_host()) if hasattr(r, "to_host") else np.asarray(r) for r in results]
        self.timings["execute"] = time.perf_counter() - start
        if len(outputs) != len(self.program.results):
            raise ConverterError(f"IREE returned {len(outputs)} outputs, the module has {len(self.program.results)}")
        for o, spec in zip(outputs, self.program.results):
            if o.dtype != spec.dtype or o.shape != spec.shape:
                raise ConverterError(f"IREE returned out{spec.index} as {o.dtype}{list(o.shape)}, the module "
                                     f"declares {spec.describe()}")
        return outputs


def _first_error(message: str) -> str:
    """The first `error:` line of IREE's diagnostics (and its location), not the command line."""
    lines = [line for line in message.splitlines() if "error:" in line]
    return lines[0].strip() if lines else message.strip().splitlines()[0] if message.strip() else "unknown error"
