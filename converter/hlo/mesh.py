"""Device meshes of XLA's mesh ("V3") forms: mesh-axes replica groups and mesh shardings.

Both name axes of a mesh (`mesh['x'=2,'y'=4]`), possibly sub-axes of them
(`'x':(pre_size)size`, the middle factor of the axis seen as `[pre_size, size, rest]`).
Everything here works on the mesh's device array reshaped so that every (sub-)axis that
is referred to is a dimension of its own ("virtual axes"); then replica groups and tile
assignments are transposes of that array, as XLA computes them
(`replica_group.cc`, `HloSharding` V3→V2 conversion).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from converter.hlo import attrs


def _virtual_axes(mesh: attrs.Mesh, refs: Iterable[attrs.MeshAxisRef]) -> tuple[list[int], Callable[[attrs.MeshAxisRef], list[int]]]:
    """Sizes of the virtual axes (mesh order, each axis major part first) and a function
    giving the virtual axes an axis reference covers.  Axes of size 1 vanish."""
    names = mesh.axis_names
    sizes = mesh.axis_sizes
    bounds: list[set[int]] = [{1, n} for n in sizes]
    for ref in refs:
        if ref.name not in names:
            raise ValueError(f"axis '{ref.name}' is not an axis of the mesh {list(names)}")
        if ref.is_sub_axis:
            n = sizes[names.index(ref.name)]
            if ref.size < 1 or n % (ref.pre_size * ref.size):
                raise ValueError(f"sub-axis '{ref.name}':({ref.pre_size}){ref.size} does not divide its axis of size {n}")
            bounds[names.index(ref.name)] |= {ref.pre_size, ref.pre_size * ref.size}
    virtual: list[int] = []
    factors: list[list[tuple[int, int, int]]] = []  # per axis: (low bound, high bound, virtual index)
    for axis_bounds in bounds:
        b = sorted(axis_bounds)
        axis_factors = []
        for lo, hi in zip(b, b[1:]):
            if hi % lo:
                raise ValueError(f"sub-axes of sizes {b} do not nest")
            axis_factors.append((lo, hi, len(virtual)))
            virtual.append(hi // lo)
        factors.append(axis_factors)

    def covered(ref: attrs.MeshAxisRef) -> list[int]:
        axis = factors[names.index(ref.name)]
        if not ref.is_sub_axis:
            return [v for _, _, v in axis]
        lo, hi = ref.pre_size, ref.pre_size * ref.size
        return [v for a, b, v in axis if a >= lo and b <= hi]

    return virtual, covered


def _device_array(mesh: attrs.Mesh, virtual: list[int]) -> np.ndarray:
    devices = np.array(mesh.devices(), dtype=np.int64)
    if devices.size != int(np.prod(mesh.axis_sizes)):
        raise ValueError(f"{devices.size} device ids for a mesh of {int(np.prod(mesh.axis_sizes))} devices")
    return devices.reshape(virtual)


def replica_groups(mesh: attrs.Mesh, grouped: tuple[attrs.MeshAxisRef, ...]) -> tuple[tuple[int, ...], ...]:
    """`mesh[...] {'a', ...}`: move the grouped axes to the end (in the listed order, the
    others in mesh order) and cut the flattened device array into groups."""
    virtual, covered = _virtual_axes(mesh, grouped)
    # Sub-axes of one axis are grouped by pre_size (XLA sorts them), whatever the listing.
    first: dict[str, int] = {}
    for i, ref in enumerate(grouped):
        first.setdefault(ref.name, i)
    ordered = sorted(grouped, key=lambda r: (first[r.name], r.pre_size))
    group_axes: list[int] = []
    for ref in ordered:
        group_axes.extend(covered(ref))
    if len(set(group_axes)) != len(group_axes):
        raise ValueError("a mesh axis is listed twice")
    size = int(np.prod([virtual[v] for v in group_axes])) if group_axes else 1
    if size <= 1:
        raise ValueError("the listed mesh axes make groups of one device")
    rest = [v for v in range(len(virtual)) if v not in group_axes]
    array = _device_array(mesh, virtual).transpose(rest + group_axes).reshape(-1, size)
    return tuple(tuple(int(d) for d in row) for row in array)


def named_to_tiled(ns: attrs.NamedSharding, metadata: str = "") -> attrs.Sharding:
    """The HloSharding ("V2") equivalent of a mesh sharding, as XLA converts it:
    tile dims per tensor dimension (the product of its axes), then subgroup dims for the
    manual, unreduced and replicated axes (in that order; the replicated one only when
    larger than 1)."""
    if ns.kind == "maximal":
        return attrs.Sharding("maximal", device=ns.maximal_device, metadata=metadata, named=ns)
    if ns.kind in ("replicated", "manual", "unreduced") or ns.mesh is None:
        return attrs.Sharding(ns.kind or "replicated", metadata=metadata, named=ns)
    mesh = ns.mesh
    refs = [r for axes, _ in ns.dims for r in axes]
    refs += [*ns.manual_axes, *ns.unreduced_axes, *ns.replicated_axes]
    virtual, covered = _virtual_axes(mesh, refs)
    dim_axes = [[v for r in axes for v in covered(r)] for axes, _ in ns.dims]
    manual = [v for r in ns.manual_axes for v in covered(r)]
    unreduced = [v for r in ns.unreduced_axes for v in covered(r)]
    used = {v for axes in dim_axes for v in axes} | set(manual) | set(unreduced)
    if len(used) != sum(map(len, dim_axes)) + len(manual) + len(unreduced):
        raise ValueError("a mesh axis is used twice")
    replicated = [v for v in range(len(virtual)) if v not in used]

    def size(axes: list[int]) -> int:
        return int(np.prod([virtual[v] for v in axes])) if axes else 1

    tile_dims = [size(axes) for axes in dim_axes]
    subgroups: list[tuple[str, list[int]]] = []
    if manual:
        subgroups.append(("manual", manual))
    if unreduced:
        subgroups.append(("unreduced", unreduced))
    if size(replicated) > 1:
        subgroups.append(("replicated", replicated))
    if all(t == 1 for t in tile_dims) and len(subgroups) <= 1:
        kind = subgroups[0][0] if subgroups else "replicated"
        return attrs.Sharding(kind, metadata=metadata, named=ns)
    perm = [v for axes in dim_axes for v in axes] + [v for _, axes in subgroups for v in axes]
    devices = _device_array(mesh, virtual).transpose(perm).reshape(-1)
    tile_dims += [size(axes) for _, axes in subgroups]
    replicate_only = [t for t, _ in subgroups] == ["replicated"]
    return attrs.Sharding("tiled", tuple(tile_dims), tuple(int(d) for d in devices),
                      last_tile_dim_replicate=replicate_only,
                      last_tile_dims=() if replicate_only else tuple(t for t, _ in subgroups),
                      metadata=metadata, named=ns)
