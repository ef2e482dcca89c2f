"""StableHLO → HLO text through jaxlib (`hlo-roundtrip export`)."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.common.errors import ConverterError
from converter.mlir.serialize import module_to_bytes


def export_hlo_text(module: ir.Module) -> str:
    """HLO text of a StableHLO module, as XLA's own converter writes it.  Functions the
    entry calls (fusions kept as functions, called computations) come along."""
    import jaxlib._jax as jax_ext

    text = module_to_bytes(module, "mlir", debug_info=True)
    try:
        computation = jax_ext.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    except Exception as e:  # XlaRuntimeError: its message says which op XLA refused
        raise ConverterError(f"jaxlib cannot convert this module to HLO: {e}") from None
    # Large constants printed in full: `{...}` would leave a module that cannot run.
    hlo = computation.as_hlo_text(print_large_constants=True)
    # XLA's converter drops the device counts, which decide how the module runs.
    from converter.mlir.module_attributes import module_devices

    replicas, partitions = module_devices(module)
    head, _, rest = hlo.partition("\n")
    extra = (f", replica_count={replicas}" if replicas > 1 and "replica_count=" not in head else "") + \
            (f", num_partitions={partitions}" if partitions > 1 and "num_partitions=" not in head else "")
    return head + extra + "\n" + rest


# ---------------------------------------------------------------- for the device
# `export DUMP --tap NAME --emit jax`: the converted module (taps as extra results) as a
# serialized `jax.export.Exported`, which plain JAX deserializes and calls on any
# backend; results come back as a dict keyed like `run --outputs` (out0.., tap:NAME).

def _main_func(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise ConverterError("the module has no func.func @main")


def _permute_results(module: ir.Module, order: list[int]) -> None:
    """Reorder @main's results in place: result k becomes old result order[k]."""
    from jaxlib.mlir.dialects import func

    main = _main_func(module)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    block = main.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    with module.context, ret.location, ir.InsertionPoint(ret):
        func.ReturnOp([ret.operands[i] for i in order])
        ret.erase()
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), [ftype.results[i] for i in order]))
        if "res_attrs" in main.attributes:
            attrs = list(ir.ArrayAttr(main.attributes["res_attrs"]))
            main.attributes["res_attrs"] = ir.ArrayAttr.get([attrs[i] for i in order])


def cpu_only_targets(module: ir.Module) -> list[str]:
    """Custom-call targets the module keeps that only jaxlib's CPU runtime runs."""
    targets: set[str] = set()

    def walk(op) -> "ir.WalkResult":
        if op.name == "stablehlo.custom_call" and "hlo.cpu_only" in op.attributes:
            targets.add(ir.StringAttr(op.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(walk)
    return sorted(targets)


def jax_exported_bytes(module: ir.Module, target_version: str | None = None) -> bytes:
    """A serialized `jax.export.Exported` of a converted single-device module.

    jax.export has no public constructor from StableHLO, so the Exported of a stand-in
    function with the same inputs and outputs (made by `jax.export.export`, so that every
    field is what this JAX version writes) gets the module's portable artifact in place of
    the stand-in's.  Its results are a dict keyed as `run --outputs` writes them; a dict's
    leaves are in sorted-key order, so the module's results are put in that order.  The
    platform check is disabled: the module is portable StableHLO, which runs on whichever
    backend calls it (CPU-only custom-calls aside: `export` warns of them)."""
    import dataclasses

    import jax
    import jax.numpy as jnp
    from jax import export as jax_export

    from converter.importer.taps import output_keys, tap_labels
    from converter.mlir.module_attributes import module_devices
    from converter.mlir.serialize import load_module
    from converter.runtime.program import _specs

    replicas, partitions = module_devices(module)
    if replicas * partitions != 1:
        raise ConverterError(f"error: --emit jax takes single-device modules; this one runs on {replicas * partitions} "
                             "devices (write --emit portable and call it with the devices' shardings)")
    params, results = _specs(_main_func(module))
    keys = output_keys(len(results), tap_labels(module))
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    copy = load_module(module_to_bytes(module, "bytecode"), context=module.context)
    _permute_results(copy, order)
    artifact = module_to_bytes(copy, "portable", target_version=target_version)

    out_specs = {keys[i]: results[i] for i in order}

    def stand_in(*args):
        return {k: jnp.zeros(s.shape, s.dtype) for k, s in out_specs.items()}

    stand = jax_export.export(jax.jit(stand_in, keep_unused=True), platforms=["cpu"],
                              disabled_checks=[jax_export.DisabledSafetyCheck.platform()])(
        *[jax.ShapeDtypeStruct(p.shape, p.dtype) for p in params])
    exported = dataclasses.replace(stand, fun_name="hlo_roundtrip_main", mlir_module_serialized=artifact,
                                   module_kept_var_idx=tuple(range(len(params))), uses_global_constants=False)
    return bytes(exported.serialize())


def export_for_device(module: ir.Module, emit: str, target_version: str | None = None) -> bytes:
    """`export --emit portable|jax`: the bytes to write, after warning of custom-calls
    that only jaxlib's CPU runtime runs (a TPU/GPU refuses them)."""
    import sys

    targets = cpu_only_targets(module)
    if targets:
        print(f"warning: the module keeps custom-calls only jaxlib's CPU runtime runs ({', '.join(targets)}); "
              "a TPU or GPU will refuse them", file=sys.stderr)
    if emit == "jax":
        return jax_exported_bytes(module, target_version)
    return module_to_bytes(module, "portable", target_version=target_version)
