"""Opcodes that reshape or rearrange data without arithmetic: broadcast, reshape,
transpose, bitcast, concatenate, pad, reverse, iota, dynamic dimension sizes."""

from __future__ import annotations

import math

from jaxlib.mlir import ir

from converter.hlo.ir import ELEMENT_BITS, Shape
from converter.mlir import builders
from converter.importer.registry import import_rule


@import_rule("broadcast", pure=True)
def import_broadcast(ctx, x):
    return builders.op1("stablehlo.broadcast_in_dim", ctx.result_type(), [x],
                 {"broadcast_dimensions": builders.i64_array(ctx.attrs.get("dimensions", []))})


@import_rule("reshape", pure=True)
def import_reshape(ctx, x):
    return builders.op1("stablehlo.reshape", ctx.result_type(), [x])


@import_rule("dynamic-reshape")
def import_dynamic_reshape(ctx, x, *sizes):
    i32 = ir.IntegerType.get_signless(32)
    parts = [builders.reshape(builders.convert(s, i32), [1]) for s in sizes]
    shape = builders.concatenate(parts, 0) if parts else builders.scalar_constant(0, i32, [0])
    return builders.op1("stablehlo.dynamic_reshape", ctx.result_type(), [x, shape])


@import_rule("transpose", pure=True)
def import_transpose(ctx, x):
    return builders.op1("stablehlo.transpose", ctx.result_type(), [x],
                        {"permutation": builders.i64_array(ctx.attrs["dimensions"])})


def _major_to_minor(shape: Shape) -> list[int]:
    if shape.layout is None or not shape.layout.minor_to_major:
        return list(range(shape.rank))
    return list(reversed(shape.layout.minor_to_major))


@import_rule("bitcast", pure=True)
def import_bitcast(ctx, x):
    """A bitcast reinterprets the operand's bytes, laid out by the operand's layout, as
    the result shape laid out by the result's layout: bring the operand to
    its physical (major-to-minor) order, reshape to the result's physical dims, then
    permute back to the result's logical order.  Memory space never changes which element
    lands where; tiling mostly does not, and where it does the bitcast follows the tiles."""
    src, dst = ctx.operand_shape(0), ctx.shape
    # The common case, what the general path below comes to: a reshape (none where the
    # dims agree).
    plain = _pair_fact(ctx, _plain_reshape, src, dst)
    if plain == "same":
        return x
    if plain == "reshape":  # static shapes: the operand's type is its shape's
        return builders.op1("stablehlo.reshape", ctx.result_type(), [x])
    if plain == "dynamic":
        return builders.reshape(x, list(dst.dims))
    src_bits, dst_bits = ELEMENT_BITS[src.element_type], ELEMENT_BITS[dst.element_type]
    if src_bits * src.num_elements() != dst_bits * dst.num_elements():
        if _same_tiled_storage(src, dst):
            return _resize_within_tiles(x, list(src.dims), list(dst.dims))
        if dst.num_elements() == 1 and src.num_elements() > 1 and src.element_type == dst.element_type:
            # TPU bitcasts a padded tile to the one element it holds (f32[1,3]{T(1,128)} →
            # f32[]): offset 0 holds index (0, ..., 0) in every layout, tiled or not.
            return builders.reshape(builders.slice_(x, [0] * src.rank, [1] * src.rank), list(dst.dims))
        if src_bits == dst_bits and _pair_fact(ctx, _regroups_tiles, src, dst):
            # e.g. an SPMD all-gather's f32[2,4,7]{T(4,128)} read as f32[7,7]{T(8,128)}:
            # both fill one 8x128 tile, rows 0..6 being the source's 2x4 rows.
            x = _bitcast_same_width(ctx, x, src, dst)
            return _apply_plan_inverse(_storage_plan(dst), _apply_plan(_storage_plan(src), x, _IR), _IR)
        raise ctx.error(f"bitcast from {src} to {dst} changes the number of bytes")
    if src_bits == dst_bits and _pair_fact(ctx, _tiles_reorder, src, dst):
        x = _bitcast_same_width(ctx, x, src, dst)
        return _apply_plan_inverse(_storage_plan(dst), _apply_plan(_storage_plan(src), x, _IR), _IR)
    src_order = _major_to_minor(src)
    dst_order = _major_to_minor(dst)
    dst_phys = [dst.dims[d] for d in dst_order]
    inverse = [0] * len(dst_order)
    for i, d in enumerate(dst_order):
        inverse[d] = i
    if src.element_type != dst.element_type and src_bits != dst_bits:
        return builders.transpose(_bitcast_bytes(ctx, builders.transpose(x, src_order), src_bits, dst_bits, dst_phys), inverse)
    x = _bitcast_same_width(ctx, x, src, dst)
    if _moves_only_unit_dims(src.dims, src_order) and _moves_only_unit_dims(dst_phys, inverse):
        # Physical order equals logical order up to size-1 dims: one reshape says it all.
        return builders.reshape(x, list(dst.dims))
    y = builders.transpose(x, src_order)
    y = builders.reshape(y, dst_phys)
    return builders.transpose(y, inverse)


def _pair_fact(ctx, fact, src: Shape, dst: Shape):
    """fact(src, dst), computed once per module for each pair of Shape objects (a dump
    bitcasts the same shapes in many fusions; _tiles_reorder may compare index arrays).
    Keyed by the shapes' ids: the entry holds them, so no other object takes those ids."""
    cache = ctx.module_importer.attribute_cache
    key = (fact.__name__, id(src), id(dst))
    known = cache.get(key)
    if known is None:
        known = cache[key] = (src, dst, fact(src, dst))
    return known[2]


def _plain_reshape(src: Shape, dst: Shape) -> str | None:
    """How a bitcast between untiled row-major layouts of one element type and count
    reads: "same" (static, equal dims), "reshape" (static), "dynamic" (bounded dims); None
    for any other bitcast."""
    if src.element_type != dst.element_type or not _row_major(src) or not _row_major(dst) \
            or src.num_elements() != dst.num_elements():
        return None
    if src.is_dynamic or dst.is_dynamic:
        return "dynamic"
    return "same" if src.dims == dst.dims else "reshape"


def _row_major(shape: Shape) -> bool:
    """An untiled layout whose physical order is the logical one (or none)."""
    return shape.layout is None or (not shape.layout.tiles and shape.layout.is_default())


def _bitcast_same_width(ctx, x, src: Shape, dst: Shape):
    if src.element_type == dst.element_type:
        return x
    return builders.op1("stablehlo.bitcast_convert",
                 builders.tensor_type_like(x, element=ir.RankedTensorType(ctx.result_type()).element_type), [x])


# ---- tiled layouts.  XLA stores a tiled array (`{2,1,0:T(8,128)}`) tile by tile: in
# physical (major-to-minor) order, the tile covers the minor dims, each padded to a whole
# number of tiles; tiles are laid out in row-major order of their positions, each tile's
# elements in row-major order; a further tile (`(2,1)`) tiles the shape that the previous
# tiling produced, again on its minor dims.  A bitcast between tiled layouts keeps bytes
# in place, so where tiling orders elements differently from the untiled reading (a tile
# row of 128 wider than the dim it splits, e.g. f32[8,64,256] → f32[128,8,128] under
# T(8,128)), the bitcast moves elements the untiled reading would not.
#
# A storage plan takes a logical array to its flat storage, as steps that a NumPy array
# (to decide) or an MLIR value (to build) can take: ("transpose", perm), ("reshape",
# dims), ("pad", dims before, dims after).  Its inverse takes storage back (slicing the
# padding away).

_MAX_CHECKED_ELEMENTS = 1 << 22  # the element orders are compared on indices up to this size


def _storage_plan(shape: Shape, tiled: bool = True) -> list[tuple]:
    order = _major_to_minor(shape)
    dims = [shape.dims[d] for d in order]
    plan: list[tuple] = [("transpose", order, list(shape.dims))]
    tiles = shape.layout.tiles if (tiled and shape.layout is not None) else ()
    for tile in tiles:
        t = list(tile.dims)
        if len(t) > len(dims):
            plan.append(("reshape", [1] * (len(t) - len(dims)) + dims, dims))
            dims = [1] * (len(t) - len(dims)) + dims
        k, lead = len(t), dims[: len(dims) - len(t)]
        minor = dims[len(lead):]
        padded = [-(-d // n) * n for d, n in zip(minor, t)]
        if padded != minor:
            plan.append(("pad", lead + padded, dims))
        split = lead + [v for q, n in zip(padded, t) for v in (q // n, n)]
        plan.append(("reshape", split, lead + padded))
        n = len(lead)
        perm = list(range(n)) + [n + 2 * i for i in range(k)] + [n + 2 * i + 1 for i in range(k)]
        plan.append(("transpose", perm, split))
        dims = [split[p] for p in perm]
    plan.append(("reshape", [math.prod(dims)], dims))
    return plan


class _NumpyOps:
    @staticmethod
    def transpose(x, perm):
        return x.transpose(perm)

    @staticmethod
    def reshape(x, dims):
        return x.reshape(dims)

    @staticmethod
    def pad(x, dims):  # padding is -1: no element index
        import numpy as np

        return np.pad(x, [(0, d - c) for d, c in zip(dims, x.shape)], constant_values=-1)

    @staticmethod
    def slice(x, dims):
        return x[tuple(slice(0, d) for d in dims)]


class _IR:
    transpose = staticmethod(builders.transpose)
    reshape = staticmethod(builders.reshape)

    @staticmethod
    def pad(x, dims):
        # Tile padding holds no element; zeros here (its bytes are undefined in XLA).
        return builders.pad(x, [0] * len(dims), [d - c for d, c in zip(dims, builders.shape_of(x))])

    @staticmethod
    def slice(x, dims):
        return builders.slice_(x, [0] * len(dims), list(dims))


def _apply_plan(plan, x, ops):
    for kind, arg, _ in plan:
        x = getattr(ops, kind)(x, arg)
    return x


def _apply_plan_inverse(plan, x, ops):
    for kind, arg, before in reversed(plan):
        if kind == "transpose":
            inverse = [0] * len(arg)
            for i, p in enumerate(arg):
                inverse[p] = i
            x = ops.transpose(x, inverse)
        elif kind == "reshape":
            x = ops.reshape(x, before)
        else:
            x = ops.slice(x, before)
    return x


def _tiles_reorder(src: Shape, dst: Shape) -> bool:
    """Whether reading the bitcast through its tiles gives another element order than
    reading it without them (both storages the same size)."""
    if not any(s.layout is not None and s.layout.tiles for s in (src, dst)):
        return False
    if any(n <= 0 for s in (src, dst) if s.layout is not None for t in s.layout.tiles for n in t.dims):
        return False  # `*` (combine) tiles: read without tiles, as before
    src_plan, dst_plan = _storage_plan(src), _storage_plan(dst)
    if src_plan[-1][1] != dst_plan[-1][1]:
        return False  # different storage sizes: the resize-within-tiles reading applies
    src_digits, dst_digits = _tile_digits(src), _tile_digits(dst)
    if src_digits is not None and dst_digits is not None:
        return src_digits != dst_digits
    if src.num_elements() > _MAX_CHECKED_ELEMENTS:
        # Not compared (the index arrays would take too much memory): read without tiles,
        # as the bitcasts of the TPU dumps here all read alike when their tiles pad.
        return False
    import numpy as np

    index = np.arange(src.num_elements(), dtype=np.int64).reshape(src.dims)
    tiled = _apply_plan_inverse(dst_plan, _apply_plan(src_plan, index, _NumpyOps), _NumpyOps)
    plain = _apply_plan_inverse(_storage_plan(dst, tiled=False),
                                _apply_plan(_storage_plan(src, tiled=False), index, _NumpyOps), _NumpyOps)
    return not np.array_equal(tiled, plain)


def _tile_digits(shape: Shape) -> tuple | None:
    """Where tiling moves each element, relative to the untiled row-major storage, as a
    canonical digit permutation: the untiled offset written in mixed radix (each physical
    dim's digits, split where tiles cut it) and the order in which the tiled storage
    lists those digits, with unit digits dropped and digits that stay neighbours merged.
    Two layouts order storage alike iff these agree.  None when a tile pads its dim (the
    storage then has holes; the caller compares element orders instead)."""
    phys = [shape.dims[d] for d in _major_to_minor(shape)]
    digits: list[list[int]] = [[n] for n in phys]  # per physical dim, radices major→minor
    axes: list[list[tuple[int, int]]] = [[(d, 0)] for d in range(len(phys))]  # (dim, digit) per axis

    def split_digit(dim, index, minor):
        radix = digits[dim][index]
        digits[dim][index:index + 1] = [radix // minor, minor]
        for axis in axes:
            for k, (d, i) in enumerate(axis):
                if d == dim and i > index:
                    axis[k] = (d, i + 1)
            for k, (d, i) in enumerate(list(axis)):
                if (d, i) == (dim, index):
                    axis[k:k + 1] = [(dim, index), (dim, index + 1)]
                    break

    def size(axis):
        return math.prod(digits[d][i] for d, i in axis)

    for tile in shape.layout.tiles if shape.layout is not None else ():
        t = list(tile.dims)
        if len(t) > len(axes):
            axes[:0] = [[] for _ in range(len(t) - len(axes))]
        lead, tiled = axes[: len(axes) - len(t)], axes[len(axes) - len(t):]
        outer, inner = [], []
        for axis, n in zip(tiled, t):
            if size(axis) % n:
                return None
            # Cut the axis so that its minor digits multiply to n.
            rest, k = n, len(axis)
            while rest > 1:
                d, i = axis[k - 1]
                radix = digits[d][i]
                if radix <= rest:
                    if rest % radix:
                        return None
                    rest //= radix
                    k -= 1
                else:
                    if radix % rest:
                        return None
                    split_digit(d, i, rest)  # its minor half, now at k, starts the tile
                    rest = 1
            outer.append(axis[:k])
            inner.append(axis[k:])
        axes = lead + outer + inner
    source = [(d, i) for d in range(len(phys)) for i in range(len(digits[d])) if digits[d][i] != 1]
    target = [(d, i) for axis in axes for d, i in axis if digits[d][i] != 1]
    # Merge digits that are neighbours (in order) in both orders.
    merged = True
    radix = {key: digits[key[0]][key[1]] for key in source}
    while merged:
        merged = False
        for a, c in zip(source, source[1:]):
            k = target.index(a)
            if k + 1 < len(target) and target[k + 1] == c:
                radix[a] *= radix.pop(c)
                source.remove(c)
                target.remove(c)
                merged = True
                break
    return tuple(radix[key] for key in source), tuple(source.index(key) for key in target)


def _bitcast_bytes(ctx, x, src_bits: int, dst_bits: int, dst_phys: list[int]):
    """Reinterpret x (in physical order) as elements of another width, in physical order
    `dst_phys`: StableHLO's bitcast_convert splits a wide element into a trailing dim of
    narrow ones (or joins that dim), in memory order, as the bytes lie."""
    dst_element = ir.RankedTensorType(ctx.result_type()).element_type
    flat = builders.reshape(x, [math.prod(builders.shape_of(x))])
    n = builders.shape_of(flat)[0]
    if src_bits > dst_bits:
        ratio = src_bits // dst_bits
        y = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get([n, ratio], dst_element), [flat])
    else:
        ratio = dst_bits // src_bits
        grouped = builders.reshape(flat, [n // ratio, ratio])
        y = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get([n // ratio], dst_element), [grouped])
    return builders.reshape(y, dst_phys)


def _same_tiled_storage(src: Shape, dst: Shape) -> bool:
    """Whether two shapes of one element type and layout occupy the same tiled storage:
    XLA's TPU bitcasts may then change a tiled dimension within its tile padding (e.g.
    f32[8,5] → f32[7,5] under T(8,128)).  Element (i, j, ...) sits at the same offset in
    both when every tiled dimension spans the same number of tiles and the untiled ones
    are equal, so such a bitcast is a slice (or a pad into the padding)."""
    if (src.element_type != dst.element_type or src.layout is None or dst.layout is None
            or src.rank != dst.rank or src.layout.minor_to_major != dst.layout.minor_to_major
            or src.layout.tiles != dst.layout.tiles or not src.layout.tiles):
        return False
    order = _major_to_minor(src)
    tile = src.layout.tiles[0].dims
    if len(tile) > src.rank or any(t <= 0 for t in tile):
        return False
    tiled = order[src.rank - len(tile):]
    for d in range(src.rank):
        if d in tiled:
            t = tile[tiled.index(d)]
            if -(-src.dims[d] // t) != -(-dst.dims[d] // t):
                return False
        elif src.dims[d] != dst.dims[d]:
            return False
    return True


def _regroups_tiles(src: Shape, dst: Shape) -> bool:
    """Whether a bitcast between element counts that differ only by tile padding reads
    every result element from an element of the operand (never from its padding): TPU
    SPMD dumps bitcast padded shards so (f32[2,4,7]{T(4,128)} → f32[7,7]{T(8,128)}).
    Decided on index arrays, so only for shapes small enough to enumerate."""
    if not all(s.layout is not None and s.layout.tiles for s in (src, dst)):
        return False
    if any(n <= 0 for s in (src, dst) for t in s.layout.tiles for n in t.dims):
        return False
    src_plan, dst_plan = _storage_plan(src), _storage_plan(dst)
    if src_plan[-1][1] != dst_plan[-1][1] or max(src_plan[-1][1][0], dst.num_elements()) > _MAX_CHECKED_ELEMENTS:
        return False
    import numpy as np

    index = np.arange(src.num_elements(), dtype=np.int64).reshape(src.dims)
    read = _apply_plan_inverse(dst_plan, _apply_plan(src_plan, index, _NumpyOps), _NumpyOps)
    return bool((read >= 0).all())  # padding reads as -1


def _resize_within_tiles(x, src_dims: list[int], dst_dims: list[int]):
    common = [min(a, c) for a, c in zip(src_dims, dst_dims)]
    if common != src_dims:
        x = builders.slice_(x, [0] * len(common), common)
    if common != dst_dims:
        # Elements beyond the source's extent are its tile padding: undefined, zeros here.
        zero = builders.scalar_constant(0, builders.element_type_of(x))
        x = builders.op1("stablehlo.pad", builders.tensor_type_like(x, dst_dims), [x, zero], {
            "edge_padding_low": builders.i64_array([0] * len(dst_dims)),
            "edge_padding_high": builders.i64_array([c - m for c, m in zip(dst_dims, common)]),
            "interior_padding": builders.i64_array([0] * len(dst_dims))})
    return x


def _moves_only_unit_dims(dims, perm) -> bool:
    kept = [p for p in perm if dims[p] != 1]
    return kept == sorted(kept)


@import_rule("concatenate", pure=True)
def import_concatenate(ctx, *xs):
    element = ir.RankedTensorType(ctx.result_type()).element_type
    return builders.op1("stablehlo.concatenate", ctx.result_type(), [builders.match_float(x, element) for x in xs],
                 {"dimension": builders.i64_attr(ctx.attrs["dimensions"][0])})


@import_rule("pad", pure=True)
def import_pad(ctx, x, value):
    pads = ctx.attrs.get("padding", [])
    if len(pads) != len(builders.shape_of(x)):
        raise ctx.error(f"padding has {len(pads)} dimensions, the operand {len(builders.shape_of(x))}")
    value = builders.match_float(value, builders.element_type_of(x))
    return builders.op1("stablehlo.pad", ctx.result_type(), [x, value], {
        "edge_padding_low": builders.i64_array(p.low for p in pads),
        "edge_padding_high": builders.i64_array(p.high for p in pads),
        "interior_padding": builders.i64_array(p.interior for p in pads),
    })


@import_rule("reverse", pure=True)
def import_reverse(ctx, x):
    return builders.op1("stablehlo.reverse", ctx.result_type(), [x],
                 {"dimensions": builders.i64_array(ctx.attrs.get("dimensions", []))})


@import_rule("iota", pure=True)
def import_iota(ctx):
    return builders.op1("stablehlo.iota", ctx.result_type(), [], {"iota_dimension": builders.i64_attr(ctx.attrs["iota_dimension"])})


@import_rule("get-dimension-size")
def import_get_dimension_size(ctx, x):
    return builders.op1("stablehlo.get_dimension_size", ctx.result_type(), [x],
                 {"dimension": builders.i64_attr(ctx.attrs["dimensions"][0])})


@import_rule("set-dimension-size")
def import_set_dimension_size(ctx, x, size):
    return builders.op1("stablehlo.set_dimension_size", ctx.result_type(), [x, size],
                 {"dimension": builders.i64_attr(ctx.attrs["dimensions"][0])})
