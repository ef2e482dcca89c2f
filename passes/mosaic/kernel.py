"""A Pallas TPU kernel read from a `tpu_custom_call`'s backend_config.

The body is MLIR bytecode in Mosaic's serialized form (base64 in
`custom_call_config.body`); Mosaic's own `mosaic-serde` pass (registered by
`jax._src.tpu_custom_call`) turns it back into current Mosaic IR.  The kernel is parsed in
a context of its own (the TPU dialect registered, arith/vector/... read as unregistered
ops); `translate` reads its ops and builds StableHLO in the module's context.
"""

from __future__ import annotations

import base64
import binascii
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache

from jaxlib.mlir import ir


class KernelError(Exception):
    """The kernel cannot be read or lowered; `op` (a Mosaic op) names where, if known."""

    def __init__(self, message: str, op: ir.Operation | None = None):
        super().__init__(message)
        self.op = op


@dataclass
class WindowParam:
    """One window operand (an input or output of the pallas_call)."""

    transform: str | None  # the transform_indices function's name; None: block index 0
    bounds: list[int] | None  # window_bounds; None: the whole array (memory space ANY/SMEM)


WHOLE = WindowParam(None, None)


@dataclass
class Kernel:
    name: str
    version: int
    func: ir.Operation  # the kernel's func.func
    functions: dict[str, ir.Operation]
    iteration_bounds: list[int]
    scalar_prefetch: int
    scratch_operands: int
    windows: list[WindowParam] | None  # None: no window_params (no grid), every operand whole
    context: ir.Context = field(repr=False)
    module: ir.Module = field(repr=False)

    @property
    def arguments(self) -> list[ir.Value]:
        return list(self.func.regions[0].blocks[0].arguments)


# Parses kernel bytecode as read_kernel does, in a process of its own: exit 0 when it
# parses, 3 with MLIR's first line when it does not.
_PARSE_CHILD = """
import sys
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _tpu_ext
from jax._src.interpreters.mlir import upstream_dialects
context = ir.Context()
context.append_dialect_registry(upstream_dialects)
_tpu_ext.register_dialect(context)
context.allow_unregistered_dialects = True
with context, ir.Location.unknown():
    try:
        ir.Module.parse(sys.stdin.buffer.read())
    except Exception as e:
        sys.stdout.write((str(e).splitlines() or [type(e).__name__])[0])
        sys.exit(3)
"""


@lru_cache(maxsize=64)
def _bytecode_verdict(data: bytes) -> str | None:
    """None when jaxlib's MLIR parses the kernel bytecode, else why not.  Tried in a
    child process first: on bytecode whose strings are not UTF-8 (a corrupted body), the
    diagnostic jaxlib makes of them throws inside nanobind and aborts the process
    (`terminate called ... str_from_cstr_and_size(): conversion error`), which no
    exception handler here could catch."""
    status, why = parse_in_child(_PARSE_CHILD, data)
    if status == 0:
        return None
    return f"the kernel body does not parse as Mosaic IR: {why}" if status == 3 else why


def parse_in_child(script: str, data: bytes) -> tuple[int, str]:
    """Run a child's parse `script` on kernel bytecode `data` (on its stdin): (0, "") when it
    parses; (3, MLIR's message) when the script says it does not; otherwise the child died
    (status, why, said to the user as a corrupt body)."""
    child = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True, timeout=300)
    if child.returncode in (0, 3):
        return child.returncode, child.stdout.decode("utf-8", "replace").strip() if child.returncode else ""
    how = (f"signal {signal.Signals(-child.returncode).name}" if child.returncode < 0
           else f"exit status {child.returncode}")
    last = (child.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1].strip()
    return child.returncode, (f"the kernel body is corrupt: reading it ends jaxlib's MLIR parser "
                              f"({how}{': ' + last if last else ''})")


def _upstream_dialects():
    """The dialects a kernel written as text (not bytecode) spells in their custom syntax
    (func, arith, memref, scf, vector, ...): XLA's own TPU kernels, such as the ragged dot's
    metadata kernel, are text."""
    from jax._src.interpreters.mlir import upstream_dialects

    return upstream_dialects


def _serde_registered() -> None:
    import jax._src.tpu_custom_call  # noqa: F401  (registers the mosaic-serde pass)


def read_kernel(config: dict) -> Kernel:
    """The kernel of a `tpu_custom_call` from its backend_config dict."""
    from jaxlib.mlir import passmanager
    from jaxlib.mlir._mlir_libs import _tpu_ext

    call_config = config.get("custom_call_config") or {}
    if call_config.get("has_communication"):
        raise KernelError("the kernel communicates with other devices (remote DMAs or semaphores); "
                          "that is not supported")
    body = call_config.get("body")
    if not isinstance(body, str):
        raise KernelError("backend_config has no custom_call_config.body")
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise KernelError("custom_call_config.body is not base64") from None
    verdict = _bytecode_verdict(data)
    if verdict is not None:
        raise KernelError(verdict)
    _serde_registered()
    context = ir.Context()
    context.append_dialect_registry(_upstream_dialects())
    _tpu_ext.register_dialect(context)
    context.allow_unregistered_dialects = True
    with context, ir.Location.unknown():
        try:
            module = ir.Module.parse(data)
        except Exception as e:  # noqa: BLE001  (MLIR raises its own error types)
            raise KernelError(f"the kernel body does not parse as Mosaic IR: {str(e).splitlines()[0]}") from None
        version_attr = module.operation.attributes["stable_mosaic.version"] \
            if "stable_mosaic.version" in module.operation.attributes else None
        version = int(ir.IntegerAttr(version_attr).value) if version_attr is not None else 0
        try:
            # a body without a version is not serialized: XLA's own kernels, written as text
            if version_attr is not None:
                passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        except Exception as e:  # noqa: BLE001
            raise KernelError(f"Mosaic serialization version {version} is not readable by this jaxlib's "
                              f"mosaic-serde pass ({str(e).splitlines()[0]})") from None
        functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                     for op in module.body.operations if op.operation.name == "func.func"}
        kernels = [f for f in functions.values() if "iteration_bounds" in f.attributes or "window_params" in f.attributes]
        if not kernels and len(functions) == 1:  # a kernel without a grid has neither attribute
            kernels = list(functions.values())
        if len(kernels) != 1:
            raise KernelError(f"expected one kernel function (with iteration_bounds), found {len(kernels)}")
        func = kernels[0]
        attrs = func.attributes
        name = ir.StringAttr(attrs["sym_name"]).value
        bounds = list(ir.DenseI64ArrayAttr(attrs["iteration_bounds"])) if "iteration_bounds" in attrs else []
        windows = None
        if "window_params" in attrs:
            windows = []
            for entry in ir.ArrayAttr(attrs["window_params"]):
                d = ir.DictAttr(entry)
                keys = {d[i].name for i in range(len(d))}
                unknown = keys - {"transform_indices", "window_bounds", "pipeline_mode"}
                if unknown:
                    raise KernelError(f"kernel {name}: window parameter with {sorted(unknown)} is not supported",
                                      func)
                windows.append(WindowParam(
                    ir.FlatSymbolRefAttr(d["transform_indices"]).value if "transform_indices" in keys else None,
                    list(ir.DenseI64ArrayAttr(d["window_bounds"])) if "window_bounds" in keys else None))
        return Kernel(name=name, version=version, func=func, functions=functions, iteration_bounds=bounds,
                      scalar_prefetch=_int_attr(attrs, "scalar_prefetch"),
                      scratch_operands=_int_attr(attrs, "scratch_operands"), windows=windows,
                      context=context, module=module)


def _int_attr(attrs, name: str) -> int:
    return int(ir.IntegerAttr(attrs[name]).value) if name in attrs else 0
