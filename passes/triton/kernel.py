"""A Triton kernel read from a `__gpu$xla.gpu.triton` call's backend_config.

The body (`ir`) is the Triton module as MLIR bytecode, written by the Triton dialect
that jaxlib ships (jax/_src/pallas/triton/pallas_call_registration.py writes it with
`module_op.write_bytecode`).  It is read in a context of its own with that dialect and
the upstream dialects registered, as Pallas builds it (jax/_src/pallas/triton/lowering.py
`_new_ir_context`).

Triton bytecode is not stable across jaxlib versions, in either direction (measured:
jaxlib 0.10.2 cannot read jax 0.12's kernels, "expected mlir::triton::EvictionPolicyAttr,
but got: false", nor jaxlib 0.12 jax 0.10.2's, "expected mlir::BoolAttr, but got: 1 :
i32").  A kernel written by another MLIR than this jaxlib's is read if it parses; where it
does not, the refusal names the MLIR (and the jax, where known) that wrote it, the one
installed, and how to get the matching install.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from functools import lru_cache

from jaxlib.mlir import ir

from passes.mosaic.kernel import KernelError, parse_in_child

# The MLIR producer string each jax release's jaxlib writes in bytecode headers (measured
# on the kernels of tests/passes/triton/dumps/jax010 and jax012).
PRODUCERS = {"MLIR23.0.0git": "jax 0.10.2", "MLIR24.0.0git": "jax 0.12.0.1"}
_PYTHON_FOR = {"jax 0.10.2": "Python 3.11", "jax 0.12.0.1": "Python 3.12"}


@dataclass
class TritonKernel:
    name: str
    grid: tuple[int, int, int]
    func: ir.Operation  # the tt.func
    context: ir.Context = field(repr=False)
    module: ir.Module = field(repr=False)

    @property
    def arguments(self) -> list[ir.Value]:
        return list(self.func.regions[0].blocks[0].arguments)


def new_context() -> ir.Context:
    """A context with the dialects a Triton module holds: the upstream ones jaxlib
    registers for JAX (arith, scf, math, ...) and Triton's."""
    from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _triton_ext

    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    context = ir.Context()
    context.append_dialect_registry(registry)
    _triton_ext.register_dialect(context)
    context.load_all_available_dialects()
    return context


def bytecode_producer(data: bytes) -> str | None:
    """The producer string of MLIR bytecode (`MLIR24.0.0git`): after the magic `ML\\xefR`
    and the version (a varint), up to a NUL."""
    if not data.startswith(b"ML\xefR"):
        return None
    pos = 4
    while pos < len(data) and data[pos] & 0x80:
        pos += 1
    end = data.find(b"\0", pos + 1)
    if end < 0:
        return None
    try:
        return data[pos + 1:end].decode("ascii")
    except UnicodeDecodeError:
        return None


@lru_cache(maxsize=1)
def installed_producer() -> str:
    """The producer string this jaxlib writes."""
    with ir.Context(), ir.Location.unknown():
        buf = io.BytesIO()
        ir.Module.create().operation.write_bytecode(buf)
    return bytecode_producer(buf.getvalue()) or "unknown"


def _installed_jax() -> str:
    import jax

    return f"jax {jax.__version__}"


# Parses kernel bytecode as read_kernel does, in a process of its own: exit 0 when it
# parses, 3 with MLIR's message when it does not.
_PARSE_CHILD = """
import sys
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _triton_ext
registry = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(registry)
context = ir.Context()
context.append_dialect_registry(registry)
_triton_ext.register_dialect(context)
context.load_all_available_dialects()
with context, ir.Location.unknown():
    try:
        ir.Module.parse(sys.stdin.buffer.read())
    except Exception as e:
        lines = [l.strip() for l in str(e).splitlines() if l.strip() and not l.startswith("Unable to parse")]
        sys.stdout.write("; ".join(lines[:2]) or type(e).__name__)
        sys.exit(3)
"""


@lru_cache(maxsize=64)
def _bytecode_verdict(data: bytes) -> str | None:
    """None when the kernel bytecode parses, else why not.  Tried in a child process
    first: bytecode whose strings are not UTF-8 (a corrupted body) makes jaxlib's
    diagnostic throw inside nanobind and abort the process (see passes/mosaic/kernel.py)."""
    status, why = parse_in_child(_PARSE_CHILD, data)
    if status == 0:
        return None
    return _unreadable(data, why) if status == 3 else why


def _unreadable(data: bytes, why: str) -> str:
    producer = bytecode_producer(data)
    mine = installed_producer()
    if producer is None:
        return f"the kernel body is not MLIR bytecode ({why})"
    if producer == mine:
        return f"the kernel body does not parse as Triton IR: {why}"
    writer = PRODUCERS.get(producer)
    wrote = f"{writer} (bytecode from {producer})" if writer else f"a jaxlib whose bytecode comes from {producer}"
    route = (f"convert this dump with {writer} installed (pip install 'jax=={writer.split()[1]}', "
             f"{_PYTHON_FOR[writer]})" if writer else "convert this dump with the jax that wrote it installed")
    return (f"the kernel's Triton IR was written by {wrote}, and this {_installed_jax()} (bytecode from {mine}) cannot "
            f"read it: Triton bytecode is not stable across jaxlib versions ({why}); {route}, or re-dump the "
            f"program with {_installed_jax()}")


def read_kernel(config: dict) -> TritonKernel:
    """The kernel of a `__gpu$xla.gpu.triton` call from its backend_config dict (`ir` as
    the exact bytes of the bytecode)."""
    data = config.get("ir")
    name = config.get("name") if isinstance(config.get("name"), str) else "?"
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes) or not data:
        raise KernelError("backend_config has no Triton IR (`ir`)")
    grid = tuple(int(config.get(f"grid_{a}", 1)) for a in "xyz")
    if any(g < 1 for g in grid):
        raise KernelError(f"grid {grid} is not a grid")
    verdict = _bytecode_verdict(data)
    if verdict is not None:
        raise KernelError(verdict)
    context = new_context()
    with context, ir.Location.unknown():
        try:
            module = ir.Module.parse(data)
        except Exception as e:  # noqa: BLE001  (MLIR raises its own error types)
            raise KernelError(f"the kernel body does not parse as Triton IR: {str(e).splitlines()[-1]}") from None
        funcs = [op.operation for op in module.body.operations if op.operation.name == "tt.func"]
        public = [f for f in funcs if "sym_visibility" not in f.attributes
                  or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"]
        if len(public) != 1:
            raise KernelError(f"expected one public tt.func in the kernel {name}, found {len(public)}")
        return TritonKernel(name=name, grid=grid, func=public[0], context=context, module=module)  # type: ignore[arg-type]


def read_text_kernel(name: str, text: str, grid: tuple[int, int, int]) -> TritonKernel:
    """A kernel given as Triton IR text (jax-triton's `ttir`): text, unlike bytecode, is read
    by the Triton dialect of either supported jaxlib (measured: Triton 3.9's ttir parses with
    jaxlib 0.10.2 and 0.12.0.1).  The entry is the public tt.func named `name`."""
    block_pointer_ops = sorted(set(re.findall(r"\btt\.(?:make_tensor_ptr|advance)\b", text)))
    if block_pointer_ops:
        # Measured: neither supported jaxlib's Triton dialect (0.10.2, 0.12.0.1) defines
        # these ops, so the text cannot be parsed, and rewriting them as text (pointer
        # types change through loops and calls) would be a guess.
        raise KernelError(f"the kernel uses block pointers ({', '.join(block_pointer_ops)}, from tl.make_block_ptr), "
                          "which jaxlib's Triton dialect cannot read; routes: write the kernel's loads and stores "
                          "with pointer tensors (offsets from tl.arange, masks for the edges) and re-dump, or "
                          "register the call's reference implementation as a plug-in (--custom-calls FILE.py, "
                          "README)")
    context = new_context()
    with context, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except Exception as e:  # noqa: BLE001  (MLIR raises its own error types)
            lines = [l.strip() for l in str(e).splitlines() if l.strip() and not l.startswith("Unable to parse")]
            raise KernelError(f"the kernel's Triton IR text does not parse with this jaxlib's Triton dialect: "
                              f"{'; '.join(lines[:2])}") from None
        funcs = [op.operation for op in module.body.operations if op.operation.name == "tt.func"]
        named = [f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == name]
        if len(named) != 1:
            raise KernelError(f"the kernel's Triton IR has no tt.func named '{name}'")
        return TritonKernel(name=name, grid=grid, func=named[0], context=context, module=module)  # type: ignore[arg-type]


def describe_kernel(config: dict) -> dict:
    """What `inspect` shows of a Triton call: the kernel's name, grid and the ops it uses
    (`ops`), or why its body cannot be read (`unreadable`)."""
    name = config.get("name") if isinstance(config.get("name"), str) else "?"
    grid = "x".join(str(config.get(f"grid_{a}", 1)) for a in "xyz")
    try:
        kernel = read_kernel(config)
    except KernelError as e:
        return {"name": name, "grid": grid, "unreadable": str(e)}
    return {"name": name, "grid": grid, "ops": kernel_ops(kernel)}


def kernel_ops(kernel: TritonKernel) -> list[str]:
    """The names of the ops a kernel's body uses, sorted."""
    names: set[str] = set()

    def visit(o: ir.Operation) -> ir.WalkResult:
        names.add(o.name)
        return ir.WalkResult.ADVANCE

    kernel.func.walk(visit)
    return sorted(names - {"tt.func", "tt.return"})
