"""pallas-tpu: Pallas TPU kernels (`tpu_custom_call`, a Mosaic kernel in the
backend_config) → StableHLO with Pallas' semantics.

The grid runs as one `stablehlo.while` over the product of `iteration_bounds`, in
row-major order (the last grid axis fastest), as Pallas runs it.  Each step computes the
block indices with the kernel's `transform_*` functions (grid indices and scalar-prefetch
operands as arguments), slices every windowed input and output at block index ×
window_bounds, runs the translated body (passes.mosaic) on those windows, and writes the
output windows back.  The outputs, the scratch buffers and the scalar-prefetch operands
are loop values, so an output block revisited over consecutive steps (accumulation over
a reduction axis) keeps its value and scratch persists across steps, as on the TPU.  An
output aliased to an input starts as that input; other outputs start as zeros (the TPU
leaves them undefined until written).  Arrays whose size is not a multiple of the block
are padded to whole blocks, as Pallas pads the edge blocks, and cut back afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.mosaic.kernel import WHOLE, Kernel, KernelError, read_kernel
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

if TYPE_CHECKING:  # the translator loads when a module holds a kernel, not at registration
    from passes.mosaic import translate as tr

TARGET = "tpu_custom_call"


@register_pass("pallas-tpu", "Pallas TPU kernels (tpu_custom_call, Mosaic bodies) → StableHLO loops over the grid",
               targets=(TARGET,), preserves={Fact.USES})
def lower_pallas_tpu(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGET):
        kernel = None
        try:
            kernel = read_kernel(rewrite.backend_config(op))
            with rewrite.at(op):
                values = lower_call(op, kernel)
        except KernelError as e:
            name = f"kernel {kernel.name}: " if kernel is not None else ""
            where = ""
            if e.op is not None and e.op.name != "func.func":
                where = "" if e.op.name in str(e) else f" (Mosaic op {e.op.name})"
                source = rewrite.kernel_source_location(e.op)
                where += f" at {source}" if source else ""
            raise rewrite.op_error(op, f"{name}{e}{where}") from None
        rewrite.replace(op, values)




def _blocks(shape: list[int], bounds: list[int]) -> list[int]:
    return [-(-s // w) * w for s, w in zip(shape, bounds)]


def lower_call(op: ir.Operation, kernel: Kernel) -> list[ir.Value]:
    from passes.mosaic import translate as tr

    i32 = tr.i32()
    grid = kernel.iteration_bounds
    # A grid axis whose size is only known at run time (a negative bound in the kernel)
    # takes its size from the call's leading scalar operands, one per such axis.
    n_dynamic = sum(1 for g in grid if g < 0)
    dynamic_bounds = [tr.as_i32(builders.reshape(v, [])) for v in list(op.operands)[:n_dynamic]]
    operands = list(op.operands)[n_dynamic:]
    n_prefetch = kernel.scalar_prefetch
    inputs = operands[n_prefetch:]
    out_types = [ir.RankedTensorType(r.type) for r in op.results]
    args = kernel.arguments
    n_windows = len(inputs) + len(out_types)
    if kernel.windows is None:
        kernel.windows = [WHOLE] * n_windows
    if len(kernel.windows) != n_windows:
        raise KernelError(f"{len(kernel.windows)} window parameters for {len(inputs)} inputs and "
                          f"{len(out_types)} outputs")
    if len(args) != len(grid) + n_prefetch + n_windows + kernel.scratch_operands:
        raise KernelError(f"the kernel takes {len(args)} arguments; the call gives {len(grid)} grid indices, "
                          f"{n_prefetch} scalar-prefetch operands, {n_windows} windows and "
                          f"{kernel.scratch_operands} scratch buffers")
    window_args = args[len(grid) + n_prefetch:len(grid) + n_prefetch + n_windows]
    scratch_args = args[len(grid) + n_prefetch + n_windows:]

    # Arrays carried through the grid loop: prefetch operands, inputs, outputs (padded to
    # whole blocks), scratch (semaphores carry nothing).
    aliases = rewrite.output_operand_aliases(op)
    operand_args = args[len(grid):len(grid) + n_prefetch + n_windows]
    arrays: list[ir.Value] = [_as_kernel_type(x, a) for x, a in zip(operands[:n_prefetch], operand_args)]
    for k, x in enumerate(inputs):
        arrays.append(_pad_to_blocks(_as_kernel_type(x, window_args[k]), kernel.windows[k].bounds))
    for k, t in enumerate(out_types):
        init = operands[aliases[k] - n_dynamic] if k in aliases else builders.zeros_like_type(t)
        arrays.append(_pad_to_blocks(_as_kernel_type(init, window_args[len(inputs) + k]),
                                     kernel.windows[len(inputs) + k].bounds))
    scratch_slots = []
    for a in scratch_args:
        mt = ir.MemRefType(a.type)
        if "semaphore" in str(mt.element_type):
            scratch_slots.append(None)
            continue
        scratch_slots.append(len(arrays))
        arrays.append(builders.zeros_like_type(ir.RankedTensorType.get(list(mt.shape), tr.element_type(mt.element_type))))
    dynamic = iter(dynamic_bounds)
    sizes = [next(dynamic) if g < 0 else builders.scalar_constant(g, i32) for g in grid]
    strides = [builders.scalar_constant(1, i32)]
    for size in reversed(sizes[1:]):
        strides.insert(0, builders.binary("multiply", size, strides[0]))
    total = builders.binary("multiply", sizes[0], strides[0]) if sizes else builders.scalar_constant(1, i32)
    t = tr.Translator()
    t.grid_sizes = sizes

    def cond(step, *_):
        return builders.compare(step, total, "LT", "SIGNED")

    def body(step, *values):
        values = list(values)
        t.buffers = []
        indices = [builders.binary("remainder", builders.binary("divide", step, stride), size)
                   for stride, size in zip(strides, sizes)]
        refs: list[tr.Ref] = []
        for k in range(n_prefetch):
            refs.append(_whole(t, values[k], args[len(grid) + k]))
        windows = []  # (array slot, element offsets) of windowed operands
        for k, param in enumerate(kernel.windows):
            slot = n_prefetch + k
            arg = window_args[k]
            if param.bounds is None:
                refs.append(_whole(t, values[slot], arg))
                windows.append(None)
                continue
            if param.transform is not None:
                fn = kernel.functions.get(param.transform)
                if fn is None:
                    raise KernelError(f"the transform function @{param.transform} is missing")
                block = t.run_block(fn.regions[0].blocks[0], indices + refs[:n_prefetch])
            else:
                block = [builders.scalar_constant(0, i32)] * len(param.bounds)
            offsets = [builders.binary("multiply", tr.as_i32(x), builders.scalar_constant(w, i32))
                       for x, w in zip(block, param.bounds)]
            buffer = builders.dynamic_slice(values[slot], offsets, param.bounds)
            shape = list(ir.MemRefType(arg.type).shape)
            dims = tr.squeeze_dims(param.bounds, shape)
            if dims is None:
                raise KernelError(f"window {param.bounds} does not match the kernel's memref {shape}")
            refs.append(tr.Ref(t.new_buffer(buffer), [0] * len(param.bounds), shape, dims))
            windows.append((slot, offsets))
        for a, slot in zip(scratch_args, scratch_slots):
            refs.append(tr.Ref(None, [], [], []) if slot is None else _whole(t, values[slot], a))
        t.run_block(kernel.func.regions[0].blocks[0], indices + refs)
        new = list(values)
        for k in range(n_prefetch):
            new[k] = t.buffers[refs[k].buffer]
        for k, w in enumerate(windows):
            ref = refs[n_prefetch + k]
            if w is None:
                new[n_prefetch + k] = t.buffers[ref.buffer]
            elif k >= len(inputs):  # an output window is written back; input windows are not
                slot, offsets = w
                new[slot] = builders.dynamic_update_slice(values[slot], t.buffers[ref.buffer], offsets)
        for j, slot in enumerate(scratch_slots):
            if slot is not None:
                new[slot] = t.buffers[refs[n_prefetch + n_windows + j].buffer]
        return [builders.binary("add", step, builders.scalar_constant(1, i32))] + new

    results = builders.while_loop([builders.scalar_constant(0, i32)] + arrays, cond, body)[1:]
    outs = results[n_prefetch + len(inputs):n_prefetch + len(inputs) + len(out_types)]
    return [_retype(_unpad(v, ot), ot.element_type) for v, ot in zip(outs, out_types)]


def _as_kernel_type(x: ir.Value, arg: ir.Value) -> ir.Value:
    """An operand in the element type of the kernel's memref: Mosaic integers are
    signless (an HLO u32 is an i32 there), and a bool may be stored wider."""
    from passes.mosaic import translate as tr

    return _retype(x, tr.element_type(ir.MemRefType(arg.type).element_type))


def _retype(x: ir.Value, element: ir.Type) -> ir.Value:
    have = builders.element_type_of(x)
    if have == element:
        return x
    if isinstance(have, ir.IntegerType) and isinstance(element, ir.IntegerType) \
            and ir.IntegerType(have).width == ir.IntegerType(element).width:
        return builders.op1("stablehlo.bitcast_convert", builders.tensor_type_like(x, element=element), [x])
    if ir.IntegerType.get_signless(1) in (have, element):
        return builders.convert(x, element)
    raise KernelError(f"an operand of element type {have} given to the kernel as {element}")


def _whole(t: tr.Translator, array: ir.Value, arg: ir.Value) -> tr.Ref:
    """A Ref to a whole array (memory space ANY or SMEM, scratch)."""
    from passes.mosaic import translate as tr

    shape = list(ir.MemRefType(arg.type).shape)
    full = builders.shape_of(array)
    dims = tr.squeeze_dims(full, shape)
    if dims is None:
        raise KernelError(f"an operand of shape {full} given as a memref of shape {shape}")
    return tr.Ref(t.new_buffer(array), [0] * len(full), shape, dims)


def _pad_to_blocks(x: ir.Value, bounds: list[int] | None) -> ir.Value:
    if bounds is None:
        return x
    shape = builders.shape_of(x)
    if len(shape) != len(bounds):
        raise KernelError(f"window {bounds} for an operand of shape {shape}")
    padded = _blocks(shape, bounds)
    if padded == shape:
        return x
    return builders.pad(x, [0] * len(shape), [p - s for p, s in zip(padded, shape)])


def _unpad(x: ir.Value, t: ir.RankedTensorType) -> ir.Value:
    shape = builders.shape_of(x)
    if shape == list(t.shape):
        return x
    return builders.slice_(x, [0] * len(shape), list(t.shape))
