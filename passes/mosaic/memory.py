"""Memory ops: vector/tpu loads and stores (indices, strides, masks), scalar memref
loads and stores (SMEM), memref views (slice, squeeze), and local DMAs as copies."""

from __future__ import annotations

import math
from typing import Sequence

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.mosaic.kernel import KernelError
from passes.mosaic.translate import (Ref, Reshaped, Translator, attr, index_value, int_list, rule, segments,
                                     squeeze_dims)


def _starts(t: Translator, ref: Ref, indices: Sequence[ir.Value]) -> list[ir.Value]:
    """Buffer start indices: the view's offsets plus the access's indices (one per view dim)."""
    if len(indices) != len(ref.dims):
        raise KernelError(f"{len(indices)} indices into a memref of rank {len(ref.dims)}")
    starts = list(ref.offsets)
    for i, d in enumerate(ref.dims):
        starts[d] = _add(index_value(starts[d]), t.value(indices[i]))
    return [index_value(s) for s in starts]


def _add(x: ir.Value, y: ir.Value) -> ir.Value:
    return builders.binary("add", x, y if y.type == x.type else builders.convert(y, builders.element_type_of(x)))


def _window(ref: Ref, shape: Sequence[int], strides: Sequence[int]) -> tuple[list[int], list[int]]:
    """Sizes of the buffer slice an access of vector `shape` covers (the vector spans the
    trailing view dims), and the buffer shape of the vector before reshaping."""
    rank = len(ref.dims)
    vec = [1] * (rank - len(shape)) + list(shape)
    strides = [1] * (rank - len(strides)) + list(strides) if strides else [1] * rank
    spans = [(n - 1) * s + 1 for n, s in zip(vec, strides)]
    buffer_sizes = [1] * len(ref.offsets)
    for i, d in enumerate(ref.dims):
        buffer_sizes[d] = spans[i]
    return buffer_sizes, strides


def _view_starts(ref: Ref) -> list[ir.Value]:
    return [index_value(s) for s in ref.offsets]


def load_view(t: Translator, ref: Ref) -> ir.Value:
    """The whole of a view, in its memref shape."""
    sizes = [1] * len(ref.offsets)
    for i, d in enumerate(ref.dims):
        sizes[d] = ref.shape[i]
    return builders.reshape(builders.dynamic_slice(t.read_buffer(ref.buffer), _view_starts(ref), sizes), ref.shape)


def store_view(t: Translator, ref: Ref, value: ir.Value) -> None:
    """Replace the whole of a view by `value` (of its memref shape)."""
    sizes = [1] * len(ref.offsets)
    for i, d in enumerate(ref.dims):
        sizes[d] = ref.shape[i]
    buffer = t.read_buffer(ref.buffer)
    t.write_buffer(ref.buffer, builders.dynamic_update_slice(buffer, builders.reshape(value, sizes), _view_starts(ref)))


def load(t: Translator, ref: Ref, indices: Sequence[ir.Value], result: ir.RankedTensorType,
         strides: Sequence[int] = ()) -> ir.Value:
    buffer = t.read_buffer(ref.buffer)
    sizes, strides = _window(ref, result.shape, strides)
    piece = builders.dynamic_slice(buffer, _starts(t, ref, indices), sizes)
    if any(s != 1 for s in strides):
        full = [1] * len(ref.offsets)
        for i, d in enumerate(ref.dims):
            full[d] = strides[i]
        piece = builders.slice_(piece, [0] * len(sizes), sizes, full)
    return builders.reshape(piece, list(result.shape))


def store(t: Translator, ref: Ref, indices: Sequence[ir.Value], value: ir.Value, mask: ir.Value | None = None,
          strides: Sequence[int] = (), add: bool = False) -> None:
    buffer = t.read_buffer(ref.buffer)
    sizes, strides = _window(ref, builders.shape_of(value), strides)
    starts = _starts(t, ref, indices)
    full_strides = [1] * len(sizes)
    for i, d in enumerate(ref.dims):
        full_strides[d] = strides[i]
    vector_sizes = [(n - 1) // s + 1 for n, s in zip(sizes, full_strides)]
    piece = builders.reshape(value, vector_sizes)
    strided = any(s != 1 for s in full_strides)
    if strided:  # the values spread over the span, the elements between them kept
        piece = builders.pad(piece, [0] * len(sizes), [0] * len(sizes), interior=[s - 1 for s in full_strides])
        hit = builders.pad(builders.scalar_constant(True, ir.IntegerType.get_signless(1), vector_sizes), [0] * len(sizes),
                    [0] * len(sizes), builders.scalar_constant(False, ir.IntegerType.get_signless(1)),
                    interior=[s - 1 for s in full_strides])
        mask = hit if mask is None else builders.binary("and", hit, builders.pad(
            builders.reshape(mask, vector_sizes), [0] * len(sizes), [0] * len(sizes),
            builders.scalar_constant(False, ir.IntegerType.get_signless(1)), interior=[s - 1 for s in full_strides]))
    elif mask is not None:
        mask = builders.reshape(mask, sizes)
    if mask is not None or add:
        old = builders.dynamic_slice(buffer, starts, sizes)
        if add:
            piece = builders.binary("add", old, piece)
        if mask is not None:
            piece = builders.select(mask, piece, old)
    t.write_buffer(ref.buffer, builders.dynamic_update_slice(buffer, piece, starts))


def _result_type(op: ir.Operation) -> ir.RankedTensorType:
    from passes.mosaic.translate import tensor_type

    return tensor_type(op.results[0].type)


def _strides(op: ir.Operation) -> list[int]:
    a = attr(op, "strides")
    return int_list(a) if a is not None else []


@rule("vector.load", "tpu.load", "tpu.strided_load")
def _load(t: Translator, op: ir.Operation) -> None:
    base, *indices = op.operands
    if op.name == "tpu.load" and "sublane_stride" in op.attributes \
            and int(ir.IntegerAttr(op.attributes["sublane_stride"]).value) != 1:
        raise KernelError("tpu.load with a sublane stride")
    # tpu.load's sublane mask leaves masked rows undefined: loading them all is valid.
    t.set(op.results[0], load(t, t.ref(base), indices, _result_type(op), _strides(op)))


@rule("memref.load")
def _memref_load(t: Translator, op: ir.Operation) -> None:
    base, *indices = op.operands
    t.set(op.results[0], load(t, t.ref(base), indices, _result_type(op)))


def _target_of_store(op: ir.Operation) -> ir.Value:
    return op.operands[1]  # (value, base, indices...) in every store


@rule("vector.store", "tpu.vector_store", "tpu.store", "tpu.strided_store", "memref.store", writes=_target_of_store)
def _store(t: Translator, op: ir.Operation) -> None:
    if "operandSegmentSizes" in op.attributes:  # tpu.vector_store / tpu.store: an optional mask
        groups = segments(op)
        value, base, indices = groups[0][0], groups[1][0], groups[2]
        mask = groups[3][0] if len(groups) > 3 and groups[3] else None
    else:
        value, base, *indices = op.operands
        mask = None
    mask_value = t.value(mask) if mask is not None else None
    if op.name == "tpu.store":
        if "sublane_stride" in op.attributes and int(ir.IntegerAttr(op.attributes["sublane_stride"]).value) != 1:
            raise KernelError("tpu.store with a sublane stride")
        rows = [bool(x) for x in ir.DenseBoolArrayAttr(op.attributes["sublane_mask"])] \
            if "sublane_mask" in op.attributes else []
        if rows and not all(rows):
            mask_value = _sublane_mask(builders.shape_of(t.value(value)), rows, mask_value)
    add = "add" in op.attributes and ir.BoolAttr(op.attributes["add"]).value
    store(t, t.ref(base), indices, t.value(value), mask_value, _strides(op), add)


def _sublane_mask(shape: Sequence[int], rows: Sequence[bool], mask: ir.Value | None) -> ir.Value:
    """A mask over the second-minor dim, repeating per 8-row tile (the sublanes)."""
    import numpy as np

    keep = np.array([rows[i % len(rows)] for i in range(shape[-2])])[:, None]
    full = builders.broadcast_in_dim(builders.mask_constant(np.broadcast_to(keep, (shape[-2], shape[-1])).copy()),
                              list(shape), [len(shape) - 2, len(shape) - 1])
    return full if mask is None else builders.binary("and", full, mask)


@rule("tpu.memref_slice")
def _memref_slice(t: Translator, op: ir.Operation) -> None:
    base, indices, dynamic_sizes = segments(op)
    if dynamic_sizes:
        raise KernelError("tpu.memref_slice with dynamic sizes")
    ref = t.ref(base[0])
    offsets = list(ref.offsets)
    for i, d in enumerate(ref.dims):
        offsets[d] = _add(index_value(offsets[d]), t.value(indices[i]))
    shape = list(ir.MemRefType(op.results[0].type).shape)
    t.set(op.results[0], Ref(ref.buffer, offsets, shape, list(ref.dims)))


@rule("tpu.memref_squeeze", "tpu.memref_reshape")
def _memref_squeeze(t: Translator, op: ir.Operation) -> None:
    ref = t.ref(op.operands[0])
    shape = list(ir.MemRefType(op.results[0].type).shape)
    kept = squeeze_dims(ref.shape, shape)
    if kept is not None:  # only unit dims dropped: the same buffer, fewer view dims
        t.set(op.results[0], Ref(ref.buffer, ref.offsets, shape, [ref.dims[k] for k in kept]))
        return
    if op.name == "tpu.memref_squeeze" or math.prod(shape) != math.prod(ref.shape):
        raise KernelError(f"a memref reshape from {ref.shape} to {shape}")
    t.set(op.results[0], Ref(Reshaped(ref, shape), [0] * len(shape), shape, list(range(len(shape)))))


def _dma_target(op: ir.Operation) -> ir.Value:
    return segments(op)[2][0]


@rule("tpu.enqueue_dma", writes=_dma_target)
def _enqueue_dma(t: Translator, op: ir.Operation) -> None:
    """A local DMA copies when it starts: a kernel may only read the target after the
    matching wait, so copying early reads the same source values."""
    source, _source_sem, target, _target_sem, device_id, *rest = segments(op) + [[]] * 3
    if device_id or any(rest[:2]):
        raise KernelError("a remote DMA (to another device or core) is not supported")
    src, dst = t.ref(source[0]), t.ref(target[0])
    if src.shape != dst.shape:
        raise KernelError(f"a DMA from {src.shape} to {dst.shape}")
    store_view(t, dst, load_view(t, src))


@rule("tpu.wait_dma", "tpu.wait_dma2")
def _wait_dma(t: Translator, op: ir.Operation) -> None:
    groups = segments(op)
    if any(g for g in groups[3:]):
        raise KernelError("waiting on a remote DMA is not supported")
