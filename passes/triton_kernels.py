"""triton-kernels: Pallas GPU kernels (`__gpu$xla.gpu.triton`, Triton IR as MLIR bytecode
in the backend_config's `ir`) → StableHLO that computes the same values on CPU; Mosaic GPU
kernels (`mosaic_gpu_v2`, `mosaic_gpu`) are refused by name with the routes that work.

The grid runs as one `stablehlo.while` over grid_x·grid_y·grid_z programs, x fastest
(program p has ids x = p mod gx, y = (p div gx) mod gy, z = p div (gx·gy)).  The GPU runs
programs concurrently; for kernels whose programs write disjoint elements (every Pallas
kernel with an output BlockSpec) the order does not matter, and for the others a fixed
order is the one deterministic choice.  Memory is one flat buffer per kernel argument:
the call's operands, then its results (XLA passes them to the kernel in that order).  A
result aliased to an operand (`output_operand_aliases`, Pallas' input_output_aliases) is
that operand's buffer, as on the GPU, so it starts with the operand's values and reads
of the operand see the kernel's writes.  A result no alias covers starts as zeros: its
elements no program stores are zeros here (uninitialized memory on the GPU, so any value
is faithful; zeros make such reads deterministic).
"""

from __future__ import annotations

import re
from typing import Sequence

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker
from passes.mosaic.kernel import KernelError
from passes.triton import jax_triton_call
from passes.triton.kernel import TritonKernel, read_kernel, read_text_kernel

TARGET = "__gpu$xla.gpu.triton"
MOSAIC_GPU = ("mosaic_gpu_v2", "mosaic_gpu")


@register_pass("triton-kernels", "Pallas GPU kernels (__gpu$xla.gpu.triton, Triton IR) and jax-triton's "
               "triton_kernel_call(_ffi) → StableHLO loops over the grid; Mosaic GPU kernels refused by name",
               targets=(TARGET,) + MOSAIC_GPU + jax_triton_call.TARGETS, preserves={Fact.USES})
def lower_triton_kernels(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    triton_calls, mosaic_calls, jax_triton_calls = walks.custom_calls_of(TARGET, MOSAIC_GPU, jax_triton_call.TARGETS)
    for op in mosaic_calls:
        raise rewrite.op_error(op, mosaic_gpu_refusal(op))
    for op in jax_triton_calls:
        name = None
        try:
            call = jax_triton_call.decode(_opaque(op))
            name = call.name
            kernel = read_text_kernel(call.name, call.ttir, call.grid)
            with rewrite.at(op):
                values = lower_call(op, kernel, call.parameters)
        except KernelError as e:
            raise rewrite.op_error(op, _located(e, f"jax-triton kernel '{name}': " if name else "")) from None
        rewrite.replace(op, values)
    for op in triton_calls:
        config = call_config(op)
        name = config.get("name") if isinstance(config.get("name"), str) else None
        kernel = None
        try:
            kernel = read_kernel(config)
            with rewrite.at(op):
                values = lower_call(op, kernel)
        except KernelError as e:
            raise rewrite.op_error(op, _located(e, f"Triton kernel '{name}': " if name else "")) from None
        rewrite.replace(op, values)


def _located(e: KernelError, label: str) -> str:
    """The error with its kernel's label, and the Triton op and its Python source line."""
    where = ""
    if e.op is not None and e.op.name not in ("tt.func", "builtin.module"):
        where = "" if e.op.name in str(e) else f" (Triton op {e.op.name})"
        source = rewrite.kernel_source_location(e.op)
        where += f" at {source}" if source else ""
    return f"{label}{e}{where}"


def _opaque(op: ir.Operation) -> bytes:
    """A jax-triton call's compressed proto: the FFI dictionary's `opaque`, or (the older
    `triton_kernel_call`) the whole backend_config string, as exact bytes."""
    attrs = op.attributes
    data: object = None
    for key in ("mhlo.backend_config", "backend_config"):
        a = attrs[key] if key in attrs else None
        if isinstance(a, ir.DictAttr):
            data = call_config(op).get("opaque")
        elif isinstance(a, ir.StringAttr) and ir.StringAttr(a).value_bytes:
            data = ir.StringAttr(a).value_bytes
        if data is not None:
            break
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes) or not data:
        raise KernelError("the jax-triton call has no opaque (its compressed kernel proto)")
    return data


def call_config(op: ir.Operation) -> dict:
    """The call's MLIR-dictionary config with strings as Python strings, or as their exact
    bytes where they are not UTF-8 (the bytecode in `ir`)."""
    attrs = op.attributes
    config = attrs["mhlo.backend_config"] if "mhlo.backend_config" in attrs else None
    if config is None or not isinstance(config, ir.DictAttr):
        return rewrite.backend_config(op)
    out = {}
    for entry in ir.DictAttr(config):
        a = entry.attr
        if isinstance(a, ir.StringAttr):
            data = a.value_bytes
            try:
                out[entry.name] = data.decode("utf-8")
            except UnicodeDecodeError:
                out[entry.name] = data
        else:
            out[entry.name] = rewrite.attr_to_python(a)
    return out


def mosaic_gpu_kernel_name(config: dict) -> str | None:
    """The Pallas kernel's name in a Mosaic GPU call: Mosaic GPU names the module's entry
    function `<kernel>_mosaic_gpu` (jax/experimental/mosaic/gpu/core.py), a string of the
    bytecode's string section (NUL-terminated there).  None where it is not found."""
    module = config.get("module")
    if isinstance(module, str):
        module = module.encode("utf-8")
    if not isinstance(module, bytes):
        return None
    # `stable_mosaic_gpu` is the name of Mosaic GPU's dialect, also in the table.
    names = [m.decode("ascii") for m in re.findall(rb"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)_mosaic_gpu\0", module)
             if m != b"stable"]
    return names[0] if len(set(names)) == 1 else None


def mosaic_gpu_refusal(op: ir.Operation) -> str:
    target = rewrite.call_target(op)
    name = mosaic_gpu_kernel_name(call_config(op))
    kernel = f"Pallas Mosaic GPU kernel '{name}'" if name else "Pallas Mosaic GPU kernel"
    return (f"{kernel} ({target}): its body is a GPU module already lowered for the CUDA "
            "plug-in, which jaxlib alone cannot read or run, so it has no portable rewrite. Routes: register the "
            "kernel's reference implementation as a plug-in for this target (--custom-calls FILE.py, README), or re-dump the "
            "program with Pallas' Triton backend (compiler_params=plgpu.CompilerParams / "
            "jax.experimental.pallas.triton.CompilerParams; in jax 0.10 a plain pl.pallas_call lowers to Mosaic "
            "GPU unless JAX_PALLAS_USE_MOSAIC_GPU=0 or jax.config.update('jax_pallas_use_mosaic_gpu', False)), "
            "which triton-kernels converts")




def _pointee(arg: ir.Value) -> ir.Type:
    """The element type a kernel pointer argument points to, in the module's context."""
    from passes.triton import translate as tr

    m = re.fullmatch(r"!tt\.ptr<([^,>]+)(?:,\s*\d+)?>", str(arg.type))
    if m is None:
        raise KernelError(f"kernel argument of type {arg.type} (only pointers are supported)")
    return tr.mosaic.element_type(ir.Type.parse(m.group(1), arg.type.context))


def _flat_buffer(x: ir.Value, element: ir.Type) -> ir.Value:
    """An operand as the flat buffer a kernel pointer sees: row-major, in the pointer's
    element type (same-width integers of another signedness are bitcast), with one more
    element at the end for masked-off stores."""
    have = builders.element_type_of(x)
    if have != element:
        if isinstance(have, ir.IntegerType) and isinstance(element, ir.IntegerType) \
                and ir.IntegerType(have).width == ir.IntegerType(element).width:
            x = builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=element), [x])
        else:
            raise KernelError(f"an operand of element type {have} given to the kernel as {element}")
    n = 1
    for d in builders.shape_of(x):
        n *= d
    return builders.pad(builders.reshape(x, [n]), [0], [1])


def _warn_unchecked_asserts(op: ir.Operation, kernel: TritonKernel) -> None:
    """A kernel's `tt.assert`s (Pallas' checkify / debug_check, `tl.device_assert`) stop
    the GPU program where they fail; the converted kernel cannot stop, so each is named in
    one warning (the translator drops them), as gpu-assert does for XLA's own checks."""
    import warnings

    from passes.gpu_assert import UncheckedAssertWarning

    messages: list[str] = []

    def visit(o: ir.Operation) -> None:
        if o.name == "tt.assert":
            messages.append(ir.StringAttr(o.attributes["message"]).value if "message" in o.attributes else "")
        for region in o.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)

    visit(kernel.func)
    if messages:
        listed = "; ".join(repr(m) for m in messages)
        warnings.warn(UncheckedAssertWarning(
            f"{rewrite.location_text(op)}: Triton kernel '{kernel.name}': {len(messages)} device assertion(s) not checked "
            f"(portable StableHLO cannot stop a program; the GPU program would stop where one fails): {listed}"),
            stacklevel=2)


def lower_call(op: ir.Operation, kernel: TritonKernel,
               parameters: Sequence[jax_triton_call.Parameter] | None = None) -> list[ir.Value]:
    """The call's results.  `parameters` (jax-triton): the kernel's arguments, arrays bound
    to the call's operands and then its results, scalars as constants; None (Pallas): every
    argument is a pointer, operands then results."""
    from passes.triton import translate as tr

    _warn_unchecked_asserts(op, kernel)
    operands = list(op.operands)
    out_types = [ir.RankedTensorType(r.type) for r in op.results]
    args = kernel.arguments
    aliases = rewrite.output_operand_aliases(op)
    if parameters is None:
        pointer_args = list(range(len(args)))
        results_passed = list(range(len(out_types)))
    else:
        if len(parameters) != len(args):
            raise KernelError(f"the kernel takes {len(args)} arguments; the call's proto gives {len(parameters)}")
        pointer_args = [k for k, p in enumerate(parameters) if p.kind == "array"]
        # jax-triton ≥ 0.4 passes an output that aliases an operand only once (as the
        # operand); older ones pass every output.
        unaliased = [k for k in range(len(out_types)) if k not in aliases]
        results_passed = unaliased if len(pointer_args) == len(operands) + len(unaliased) else list(range(len(out_types)))
    if len(pointer_args) != len(operands) + len(results_passed):
        raise KernelError(f"the kernel takes {len(pointer_args)} pointer arguments; the call gives {len(operands)} "
                          f"operands and {len(out_types)} results")
    elements = [_pointee(args[k]) for k in pointer_args]
    result_element = {r: elements[len(operands) + j] for j, r in enumerate(results_passed)}
    buffers: list[ir.Value] = [_flat_buffer(x, e) for x, e in zip(operands, elements)]
    arg_buffer = list(range(len(operands)))
    result_buffer = []
    for k, t in enumerate(out_types):
        element = result_element.get(k, elements[aliases[k]] if k in aliases else None)
        if k in aliases:
            slot = aliases[k]
            if element != elements[slot]:
                raise KernelError(f"result {k} aliases operand {slot} of another element type")
        else:
            slot = len(buffers)
            buffers.append(_flat_buffer(builders.zeros_like_type(ir.RankedTensorType.get(list(t.shape), element)),
                                        element))
        if k in results_passed:
            arg_buffer.append(slot)
        result_buffer.append(slot)
    zeroed = [(arg_buffer[j], parameters[k].zero_bytes) for j, k in enumerate(pointer_args)
              if parameters is not None and parameters[k].zero_bytes]
    for slot, nbytes in zeroed:
        # jax-triton zeroes these leading bytes before the kernel runs (zeroed_outputs).
        element = builders.element_type_of(buffers[slot])
        width = (ir.IntegerType(element).width if isinstance(element, ir.IntegerType) else ir.FloatType(element).width)
        count = min(nbytes // max(width // 8, 1), builders.shape_of(buffers[slot])[0])
        head = builders.zeros_like_type(ir.RankedTensorType.get([count], element))
        buffers[slot] = builders.dynamic_update_slice(buffers[slot], head, [builders.scalar_constant(0, tr.mosaic.i32())])
    sizes = [builders.shape_of(b)[0] - 1 for b in buffers]
    i32 = tr.mosaic.i32()
    gx, gy, gz = kernel.grid
    total = gx * gy * gz

    def cond(step, *_):
        return builders.compare(step, builders.scalar_constant(total, i32), "LT", "SIGNED")

    def body(step, *values):
        x = builders.binary("remainder", step, builders.scalar_constant(gx, i32))
        y = builders.binary("remainder", builders.binary("divide", step, builders.scalar_constant(gx, i32)),
                            builders.scalar_constant(gy, i32))
        z = builders.binary("divide", step, builders.scalar_constant(gx * gy, i32))
        t = tr.Translator([x, y, z], kernel.grid)
        t.buffers = list(values)
        t.sizes = sizes
        zero = builders.scalar_constant(0, tr.i64())
        block_args: list[object] = [None] * len(args)
        for k, slot in zip(pointer_args, arg_buffer):
            block_args[k] = tr.Ptr(slot, zero)
        for k, p in enumerate(parameters or ()):
            if p.kind != "array":
                block_args[k] = builders.scalar_constant(p.value, tr.mosaic.element_type(args[k].type))
        t.run_block(kernel.func.regions[0].blocks[0], block_args)
        return [builders.binary("add", step, builders.scalar_constant(1, i32))] + list(t.buffers)

    results = builders.while_loop([builders.scalar_constant(0, i32)] + buffers, cond, body)[1:]
    outs = []
    for k, t in enumerate(out_types):
        flat = builders.slice_(results[result_buffer[k]], [0], [sizes[result_buffer[k]]])
        value = builders.reshape(flat, list(t.shape))
        if builders.element_type_of(value) != t.element_type:
            value = builders.op1("stablehlo.bitcast_convert", t, [value])
        outs.append(value)
    return outs
