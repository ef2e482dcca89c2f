"""How a catalog program is laid out on devices: the mesh, the input and output shardings,
the jitted function — one definition for the dump generator (any backend) and for the test's
JAX oracle (CPU), so both compile exactly the same program.  Also the JSON form of
PartitionSpecs that the dump manifests use."""

from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from tests.programs.catalog import Program

# Inputs of every program come from np.random.default_rng(INPUT_SEED) (recorded in the
# manifest, so a dump and the inputs it was checked with can be rebuilt later).
INPUT_SEED = 0

SpecJson = list[None | str | list[str]]


def mesh_for(program: Program, devices: Sequence[Any]) -> Mesh:
    """The program's mesh over the first N devices in order: mesh position d (row-major)
    is the dump's logical device d (its position in the device assignment)."""
    return Mesh(np.array(list(devices)[: program.devices]).reshape(program.mesh_shape), program.axis_names)


def input_specs(program: Program, count: int) -> list[P]:
    specs = program.in_specs if program.in_specs is not None else [P()] * count
    if isinstance(specs, P):
        specs = [specs]
    return list(specs)


def jitted(program: Program, mesh: Mesh, count: int, out_specs: Sequence[P] | None = None):
    """jax.jit of the program with its input shardings; the output shardings of `spmd`
    programs are pinned (explicitly given, or `out_specs` when the caller knows them)."""
    kwargs: dict[str, Any] = {"in_shardings": tuple(NamedSharding(mesh, s) for s in input_specs(program, count))}
    if out_specs is not None:
        kwargs["out_shardings"] = tuple(NamedSharding(mesh, s) for s in out_specs)
    elif program.out_specs is not None and "spmd" in program.tags:
        out = program.out_specs
        kwargs["out_shardings"] = (NamedSharding(mesh, out) if isinstance(out, P)
                                   else tuple(NamedSharding(mesh, o) for o in out))
    return jax.jit(program.build(mesh), **kwargs)


def spec_to_json(spec: P) -> SpecJson:
    return [list(e) if isinstance(e, tuple) else e for e in spec]


def spec_from_json(entries: SpecJson) -> P:
    return P(*[tuple(e) if isinstance(e, list) else e for e in entries])
