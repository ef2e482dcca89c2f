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
