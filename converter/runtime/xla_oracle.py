"""XLA itself as the oracle: parse HLO text with XLA's C++ parser, import it with XLA's
own HLO→StableHLO importer, compile and run it with jaxlib on CPU.  It works
for modules XLA's CPU compiler accepts: unfused HLO without backend custom-calls."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from converter.common.errors import ConverterError
from converter.mlir.module_attributes import module_devices, set_module_devices


def xla_stablehlo_text(hlo_text: str) -> str:
    """XLA's own import of HLO text (raises ConverterError when XLA rejects it, or when its
    parser crashes: the text is parsed in a separate process, converter.runtime.xla_parser)."""
    import jaxlib._hlo as hlo
    import jaxlib._jax as jax_ext

    from converter.runtime.xla_parser import XlaParserCrashed, xla_parse

    try:
        computation = hlo.XlaComputation(xla_parse(hlo_text).proto)
        return jax_ext.mlir.xla_computation_to_mlir_module(computation)
    except XlaParserCrashed:
        raise
    except Exception as e:
        raise ConverterError(f"XLA cannot import this HLO: {e}") from None


def run_with_xla(hlo_text: str, inputs: Sequence[np.ndarray], num_replicas: int = 1) -> list[np.ndarray]:
    """Outputs of the HLO module as XLA computes them (flattened result leaves).  With
    num_replicas > 1 the inputs and outputs carry a leading per-device axis."""
    return xla_program(hlo_text, num_replicas)(*inputs)


def xla_program(hlo_text: str, num_replicas: int = 1):
    """The HLO module as XLA imports it, ready to compile and run (a
    converter.runtime.program.Program): call it on several inputs to compile once."""
    from converter.mlir.context import make_context
    from converter.runtime.program import program_from_module
    from converter.mlir.serialize import load_module

    from jaxlib.mlir.dialects import mhlo

    text = xla_stablehlo_text(hlo_text)
    context = make_context()
    mhlo.register_mhlo_dialect(context)  # XLA's importer leaves mhlo ops (bitcast, ...)
    module = load_module(text.encode(), "<xla import>", context)
    if num_replicas > 1:
        set_module_devices(module, num_replicas, module_devices(module)[1])
    return program_from_module(module)
