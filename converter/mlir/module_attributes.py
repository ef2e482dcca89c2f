"""Attributes of the converted module that the importer writes and passes, the runtime
and the exporter read: the device counts the module runs on, and the constants whose
values the dump elided."""

from __future__ import annotations

from jaxlib.mlir import ir

NUM_REPLICAS = "mhlo.num_replicas"
NUM_PARTITIONS = "mhlo.num_partitions"
ELIDED_CONSTANTS = "hlo.elided_constants"


def module_devices(module: ir.Module) -> tuple[int, int]:
    """(replicas, partitions) of the module: 1 where it does not say."""
    attrs = module.operation.attributes
    replicas = int(ir.IntegerAttr(attrs[NUM_REPLICAS]).value) if NUM_REPLICAS in attrs else 1
    partitions = int(ir.IntegerAttr(attrs[NUM_PARTITIONS]).value) if NUM_PARTITIONS in attrs else 1
    return replicas, partitions


def set_module_devices(module: ir.Module, replicas: int, partitions: int) -> None:
    with module.context:
        i32 = ir.IntegerType.get_signless(32)
        attrs = module.operation.attributes
        attrs[NUM_PARTITIONS] = ir.IntegerAttr.get(i32, partitions)
        attrs[NUM_REPLICAS] = ir.IntegerAttr.get(i32, replicas)


def elided_constants(module: ir.Module) -> list[str]:
    """Names of the constants the dump printed as `{...}` (imported with made-up values)."""
    attrs = module.operation.attributes
    if ELIDED_CONSTANTS not in attrs:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[ELIDED_CONSTANTS])]


def set_elided_constants(module: ir.Module, names: list[str]) -> None:
    with module.context:
        module.operation.attributes[ELIDED_CONSTANTS] = ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])
