"""jaxDecomp's 3-D FFT (DifferentiableUniverseInitiative/jaxDecomp, on NVIDIA cuDecomp).

Two forms are published:
- `pfft_C64` / `pfft_C128` (typed FFI): operands (x, workspace s8[...]), one result;
  attributes gdims, pdims, transpose_comm_backend, halo_comm_backend, forward, adjoint,
  contiguous, decomposition.  The result has the output's (transposed) shape.
- `pfft3d` (the earlier opaque form): the same operands, the result declared with the
  input's shape and reshaped to the output's after the call; backend_config is the packed
  `fftDescriptor {bool adjoint, contiguous, forward; int32 gdims[3]; Decomposition
  decomposition; bool double_precision; cudecompGridDescConfig_t config}` (x86-64:
  adjoint@0, contiguous@1, forward@2, gdims@4, decomposition@16, double_precision@20).

Meaning (jaxDecomp's own reference for the op, `FFTPrimitive.impl` with `fft_utils.fftn`):
a forward transform is the 3-D FFT over axes (0, 1, 2); a backward one the unnormalized
inverse FFT (cuFFT's: ifftn times the number of elements); `adjoint` swaps the two; with
`contiguous` the result is transposed to (1, 2, 0) after a forward and (2, 0, 1) after a
backward transform (the pencil layout the next transform reads), else kept in order.

Distributed (slab or pencil) calls, typed-FFI form: in a partitioned dump each device calls
the kernel on its block and cuDecomp exchanges blocks inside the call.  The rewrite gathers
every device's block (an all_gather over the module's partitions), runs the global transform
and keeps the device's block of the result (the opaque `pfft3d` form stays refused when
distributed: its block rules changed across the versions that wrote it).  Which block is whose follows from the public
source (jaxDecomp `_src/cudecomp/fft.py`, `_src/pencil_utils.py`, docs 07; cuDecomp
`setProcessGridIndex`, `cudecompGetPencilInfo`):
- the call is the per-shard body of a custom_partitioning whose input sharding matches the
  mesh (`validate_spec_matches_mesh`): mesh axis 0 (size a) splits array axis 0 and mesh
  axis 1 (size b) array axis 1; JAX's NamedSharding numbers partitions by mesh position in
  row-major order, so partition p holds tile (p // b, p % b).  (cuDecomp's row-major rank
  order agrees with that tile only on the transposed device mesh its docs require.)
- the attribute `pdims` is the mesh shape reversed, (b, a), reversed once more for an XY slab
  with `contiguous` (get_lowering_args); `decomposition` is slab XY (b = 1), slab YZ (a = 1)
  or pencils;
- the result is the block of the global transform (fftn, or ifftn times the size, transposed
  as above) under the output sharding `get_output_specs(..., 'cudecomp')` gives; a backward
  call reads its input in the forward's output layout (the only one it round-trips), and
  for a YZ slab with `contiguous` the block arrives transposed (1, 2, 0) (per_shard_impl).
"""

from __future__ import annotations

import struct

import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite as rewriting
from converter.mlir.module_attributes import module_devices
from passes.lib.plugins import CallAttributes, enclosing_module, inline_jax, rewrite

SLAB_XY, SLAB_YZ, PENCILS, NO_DECOMP = 0, 1, 2, 3
_DECOMPOSITIONS = {0: "slab XY", 1: "slab YZ", 2: "pencils", 3: "none"}

# The array axis each mesh axis (0, 1) splits in the forward transform's result, by
# `contiguous` and decomposition (get_output_specs, cudecomp backend, applied to the input
# spec (axis 0, axis 1, none)); None where that mesh axis has size 1.
_FORWARD_RESULT_AXES = {
    True: {SLAB_XY: (1, None), SLAB_YZ: (None, 1), PENCILS: (0, 1)},
    False: {SLAB_XY: (1, None), SLAB_YZ: (None, 2), PENCILS: (1, 2)},
}
_INPUT_AXES = (0, 1)  # a forward call's input, and a backward call's result


def _transform(x, forward: bool, adjoint: bool, contiguous: bool):
    """The global transform (jaxDecomp's FFTPrimitive.impl)."""
    if x.ndim != 3:
        raise ValueError(f"expected a 3-D array, got {x.shape}")
    if forward != adjoint:  # a forward transform, or the adjoint of a backward one
        y = jnp.fft.fftn(x, axes=(0, 1, 2))
    else:
        y = jnp.fft.ifftn(x, axes=(2, 1, 0)) * np.prod(x.shape)
    if contiguous:
        y = jnp.transpose(y, (1, 2, 0) if forward else (2, 0, 1))
    return y.astype(x.dtype)


@rewrite
def pfft_ffi(op: ir.Operation, attrs: CallAttributes) -> list[ir.Value]:
    c = attrs.config
    missing = [k for k in ("forward", "adjoint", "contiguous", "decomposition", "pdims") if k not in c]
    if missing:
        raise ValueError(f"the call has no {', '.join(missing)} attribute")
    forward, adjoint, contiguous = bool(c["forward"]), bool(c["adjoint"]), bool(c["contiguous"])
    decomposition = int(c["decomposition"])
    x = op.operands[0]
    if decomposition == NO_DECOMP:
        return inline_jax(op, attrs, lambda v: _transform(v, forward, adjoint, contiguous), [x])
    if decomposition not in _DECOMPOSITIONS:
        raise ValueError(f"unknown decomposition {decomposition}")
    a, b = _mesh_shape(decomposition, [int(p) for p in c["pdims"]])
    replicas, partitions = module_devices(enclosing_module(op))
    if a * b != partitions:
        raise ValueError(f"pdims {list(c['pdims'])} ({_DECOMPOSITIONS[decomposition]}) make a {a}x{b} mesh, "
                         f"but the module has {partitions} partitions")
    forward_result = _FORWARD_RESULT_AXES[contiguous][decomposition]
    in_axes, out_axes = (_INPUT_AXES, forward_result) if forward else (forward_result, _INPUT_AXES)
    pre_transposed = not forward and contiguous and decomposition == SLAB_YZ
    shape = rewriting.tensor_shape(x)
    # Every partition's block, in partition order, within this replica's partitions.
    groups = [[r * partitions + k for k in range(partitions)] for r in range(replicas)]
    blocks = builders.op1("stablehlo.all_gather", ir.RankedTensorType.get([partitions, *shape], builders.element_type_of(x)),
                     [builders.reshape(x, [1, *shape])],
                     {"all_gather_dim": builders.i64_attr(0), "replica_groups": builders.replica_groups_attr(groups),
                      "channel_handle": builders.channel_handle(_free_channel(op)),
                      "use_global_device_ids": ir.UnitAttr.get()})
    pid = builders.op1("stablehlo.partition_id", ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32)), [], {})
    result_shape = attrs.result_shapes[0]
    gdims = [int(g) for g in c.get("gdims", ())]

    def block_of_global(tiles, p):
        x = _assemble(tiles.reshape(a, b, *shape), in_axes, pre_transposed)
        if gdims and sorted(gdims) != sorted(x.shape):
            raise ValueError(f"the blocks make a {x.shape} array; the call's gdims are {gdims}")
        y = _transform(x, forward, adjoint, contiguous)
        return _block(y, out_axes, (a, b), result_shape, p.astype(jnp.int32))

    return inline_jax(op, attrs, block_of_global, [blocks, pid])


def _mesh_shape(decomposition: int, pdims: list[int]) -> tuple[int, int]:
    """The mesh shape (a, b) from the call's pdims (get_pdims_from_mesh, get_lowering_args)."""
    if len(pdims) != 2:
        raise ValueError(f"pdims {pdims} is not two numbers")
    if decomposition == PENCILS:
        return pdims[1], pdims[0]
    if min(pdims) != 1:
        raise ValueError(f"pdims {pdims} is not a slab")
    n = pdims[0] * pdims[1]
    return (n, 1) if decomposition == SLAB_XY else (1, n)


def _assemble(tiles, axes: tuple[int | None, int | None], pre_transposed: bool):
    """The global array from the (a, b, ...) tiles; mesh axis k splits array axis axes[k]."""
    if pre_transposed:  # each block was transposed (1, 2, 0) before the call
        tiles = jnp.transpose(tiles, (0, 1, 4, 2, 3))
    a, b = tiles.shape[:2]
    rows = [jnp.concatenate([tiles[i, j] for j in range(b)], axis=axes[1]) if b > 1 else tiles[i, 0]
            for i in range(a)]
    return jnp.concatenate(rows, axis=axes[0]) if a > 1 else rows[0]


def _block(y, axes: tuple[int | None, int | None], mesh: tuple[int, int], shape, p):
    """Partition p's block (tile (p // b, p % b)) of y; mesh axis k splits array axis axes[k]."""
    a, b = mesh
    expected = list(y.shape)
    starts = [jnp.int32(0)] * y.ndim
    for axis, size, index in ((axes[0], a, p // b), (axes[1], b, p % b)):
        if size > 1:
            expected[axis] //= size
            starts[axis] = index * expected[axis]
    if tuple(expected) != tuple(shape):
        raise ValueError(f"the call's result {tuple(shape)} is not a block {tuple(expected)} of the "
                         f"{y.shape} transform")
    return lax.dynamic_slice(y, starts, shape)


def _free_channel(op: ir.Operation) -> int:
    used = [0]
    for o in rewriting.walk(enclosing_module(op).opview):
        if "channel_handle" in o.attributes:
            used.append(_channel(o.attributes["channel_handle"]))
    return max(used) + 1


def _channel(attr: ir.Attribute) -> int:
    from jaxlib.mlir.dialects import stablehlo

    return int(stablehlo.ChannelHandle(attr).handle)


def pfft3d(x, workspace, attrs: CallAttributes):
    data = attrs.opaque
    if len(data) < 21:
        raise ValueError(f"backend_config holds {len(data)} bytes, too few for jaxDecomp's fftDescriptor")
    adjoint, contiguous, forward = (bool(b) for b in data[:3])
    gdims = struct.unpack_from("<3i", data, 4)
    decomposition, = struct.unpack_from("<i", data, 16)
    if decomposition != NO_DECOMP:
        raise ValueError(
            f"a distributed FFT ({_DECOMPOSITIONS.get(decomposition, decomposition)} decomposition) in the "
            "opaque pfft3d form: jaxDecomp wrote this form in versions whose block rules differ (whether a "
            "YZ-slab backward block reaches the call transposed, per_shard_impl, came in 2024-10) and the "
            "descriptor does not record the version; the typed pfft_C64/pfft_C128 form is converted")
    if int(np.prod(gdims)) != x.size:
        raise ValueError(f"descriptor gdims {gdims} do not hold the {x.shape} input")
    y = _transform(x, forward, adjoint, contiguous)
    # The call writes the transposed array into a buffer of the input's shape; the lowering
    # reshapes it after the call.
    return y.reshape(x.shape)
