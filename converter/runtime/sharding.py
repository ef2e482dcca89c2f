"""Whole (global) arrays ↔ per-device arrays by an HloSharding (`run --global`)."""

from __future__ import annotations

import os
import re

import numpy as np

from converter.common.errors import ConverterError
from converter.hlo import attrs
from converter.hlo.parser import parse_sharding
from converter.importer.taps import ITERATIONS


def _parse(text: str | None) -> attrs.Sharding | None:
    return parse_sharding(text) if text else None


def _tile_grid(sh: attrs.Sharding) -> np.ndarray:
    return np.array(sh.devices, dtype=np.int64).reshape(sh.tile_dims)


def split_global(array: np.ndarray, local_shape: tuple[int, ...], sharding_text: str | None, n: int,
                 what: str = "input", devices: list[int] | None = None) -> np.ndarray:
    """Device d's piece of a global array at index d of the result ([n, *local_shape]);
    uneven shards are zero-padded as XLA pads them.  With `devices`, only those devices'
    pieces, in that order (a process's share of a run over several processes)."""
    sh = _parse(sharding_text)
    devices = list(range(n)) if devices is None else devices
    row = {d: k for k, d in enumerate(devices)}
    array = np.asarray(array)
    if sh is None and tuple(array.shape) != tuple(local_shape):
        raise ConverterError(
            f"{what}: the dump gives no sharding for this parameter, so a global array of shape {array.shape} "
            f"cannot be split into the per-device shape {local_shape} (newer XLA's optimized dumps drop "
            "the entry's shardings: give the before-optimizations dump with --shardings-from, or per-device inputs)")
    if sh is None or sh.kind in ("replicated", "maximal"):
        if tuple(array.shape) != tuple(local_shape):
            raise ConverterError(f"{what}: a replicated value must have shape {local_shape}, got {array.shape}")
        return np.broadcast_to(np.asarray(array), (len(devices), *local_shape)).copy()
    if sh.kind != "tiled":
        raise ConverterError(f"{what}: a {sh.kind} sharding cannot split a global array; give per-device inputs")
    rank = len(local_shape)
    tiles = sh.data_tile_dims
    if len(tiles) != rank or array.ndim != rank:
        raise ConverterError(f"{what}: sharding {sharding_text} does not fit a rank-{array.ndim} array")
    for g, t, l in zip(array.shape, tiles, local_shape):
        if -(-g // t) != l:
            raise ConverterError(f"{what}: global shape {array.shape} split {list(tiles)} ways does not give "
                                 f"the per-device shape {local_shape}")
    out = np.zeros((len(devices), *local_shape), dtype=array.dtype)
    grid = _tile_grid(sh)
    for index in np.ndindex(*grid.shape):
        d = int(grid[index])
        if d >= n:
            raise ConverterError(f"{what}: sharding names device {d}, the module has {n}")
        if d not in row:
            continue
        block = array[tuple(slice(c * l, (c + 1) * l) for c, l in zip(index[:rank], local_shape))]
        out[(row[d], *tuple(slice(0, s) for s in block.shape))] = block
    return out


def global_shape(local_shape: tuple[int, ...], sharding_text: str | None) -> tuple[int, ...] | None:
    """The shape of the whole array whose device pieces have `local_shape` under the
    sharding (padding of uneven shards included: the dump does not say the unpadded
    size); None for a sharding that has no whole-array form (manual, unknown)."""
    sh = _parse(sharding_text)
    if sh is None or sh.kind in ("replicated", "maximal"):
        return tuple(local_shape)
    if sh.kind != "tiled" or len(sh.data_tile_dims) != len(local_shape):
        return None
    return tuple(l * t for l, t in zip(local_shape, sh.data_tile_dims))


def assemble_global(per_device: np.ndarray, sharding_text: str | None) -> np.ndarray | None:
    """The global array from device pieces ([n, *local]); padding of uneven shards is
    kept (the dump does not say the unpadded size).  None when the dump gives no
    sharding for the output (optimized dumps often drop the root's): only the per-device
    values are known then."""
    sh = _parse(sharding_text)
    if sh is None or sh.kind in ("manual", "unknown"):
        return None
    if sh.kind == "replicated":
        return per_device[0]
    if sh.kind == "maximal":
        if not 0 <= sh.device < per_device.shape[0]:  # XLA's parser takes any integer, -1 too
            raise ConverterError(f"error: sharding {sharding_text}: device {sh.device} is not one of the "
                                 f"{per_device.shape[0]} devices the module runs on")
        return per_device[sh.device]
    if sh.kind != "tiled":
        return per_device[0]
    local = per_device.shape[1:]
    tiles = sh.data_tile_dims
    out = np.zeros(tuple(l * t for l, t in zip(local, tiles)), dtype=per_device.dtype)
    grid = _tile_grid(sh)
    done = set()
    for index in np.ndindex(*grid.shape):
        coords = index[: len(local)]
        if coords in done:
            continue
        done.add(coords)
        out[tuple(slice(c * l, (c + 1) * l) for c, l in zip(coords, local))] = per_device[int(grid[index])]
    return out


def before_optimizations_sibling(path: str) -> str | None:
    """The module's before-optimizations dump that `--xla_dump_to` writes beside the
    optimized one (`module_N.NAME.<backend>_after_optimizations.txt` →
    `module_N.NAME.before_optimizations.txt`), if it is there."""
    m = re.fullmatch(r"(.*)\.[A-Za-z0-9_]*after_optimizations\.txt", path)
    if m is None:
        return None
    sibling = m.group(1) + ".before_optimizations.txt"
    return sibling if os.path.exists(sibling) else None


def entry_shardings(path: str) -> tuple[list[str | None], list[str | None]]:
    """The shardings of an HLO dump's entry parameters and results, one per leaf (as the
    converted module's arguments and results are), as HloSharding text; None where the
    dump gives none.  jax 0.12's optimized CPU dumps keep them only in the
    before-optimizations module (in mesh form)."""
    from converter.hlo.parser import parse_hlo_file
    from converter.hlo.printer import sharding_to_text
    from converter.importer.core import _leaf_shardings

    entry = parse_hlo_file(path).entry

    def texts(instr) -> list[str | None]:
        leaves = _leaf_shardings(instr.attrs.get("sharding"), instr.shape.leaf_count())
        return [sharding_to_text(sh) if sh is not None else None for sh in leaves]

    params = [t for p in entry.parameters for t in texts(p)]
    return params, texts(entry.root)


def shardings_with_fallback(program, source: str | None) -> tuple[list[str | None], list[str | None]]:
    """The shardings of the program's parameters and results, those it lacks taken from
    `source` (the same module before optimizations), whose entry must match the dump's own
    entry.  Taps (`run --tap`, results keyed `tap:NAME` after the module's own) are not
    results of the module `source` describes: they are left out of the match and given
    the sharding their instruction carries in the dump, if any (`tap_shardings`)."""
    params = [spec.sharding for spec in program.params]
    own = [spec for spec in program.results if not spec.name.startswith(("tap:", ITERATIONS))]
    results = [spec.sharding for spec in own]
    tapped = program.results[len(own):]
    if source is not None and not all(s is not None for s in params + results):
        found_params, found_results = entry_shardings(source)
        if len(found_params) != len(params) or len(found_results) != len(results):
            raise ConverterError(
                f"{source}: its entry has {len(found_params)} parameter(s) and {len(found_results)} result(s), "
                f"the dump {len(params)} and {len(results)}"
                + (f" (and {len(tapped)} tap(s), not counted)" if tapped else "") + ": is it the same module?")
        params = [s if s is not None else f for s, f in zip(params, found_params)]
        results = [s if s is not None else f for s, f in zip(results, found_results)]
    return params, results + tap_shardings(program, tapped, params)


def tap_shardings(program, taps, param_shardings: list[str | None] | None = None) -> list[str | None]:
    """The sharding a tapped instruction carries in the (partitioned) dump, as HloSharding
    text, for each tap result: only an instruction the partitioner left a `sharding=` on
    (entry parameters, the root, a few others) says how its per-device values make a whole
    array, and an entry parameter has its parameter's sharding (`param_shardings`, per
    flattened parameter, those taken from the before-optimizations module included); None
    for the rest, whose values are written per device."""
    from converter.hlo.printer import sharding_to_text
    from converter.importer.core import _leaf_shardings

    hlo = getattr(program, "hlo", None)
    out: list[str | None] = []
    for spec in taps:
        label = spec.name[len("tap:"):]
        name, _, leaf = label.partition("#")
        instr = None
        if hlo is not None:
            for comp in hlo.computations:
                instr = next((i for i in comp.instructions if i.name == name), None)
                if instr is not None:
                    break
        position = next((k for k, p in enumerate(hlo.entry.parameters) if p is instr), None) if hlo else None
        if position is not None and param_shardings is not None:
            first = sum(p.shape.leaf_count() for p in hlo.entry.parameters[:position])
            index = first + (int(leaf) if leaf else 0)
            if index < len(param_shardings) and param_shardings[index] is not None:
                out.append(param_shardings[index])
                continue
        if instr is None or instr.attrs.get("sharding") is None:
            out.append(None)
            continue
        leaves = _leaf_shardings(instr.attrs.get("sharding"), instr.shape.leaf_count())
        sh = leaves[int(leaf) if leaf else 0] if leaves else None
        out.append(sharding_to_text(sh) if sh is not None else None)
    return out
