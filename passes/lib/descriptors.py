"""The `opaque` byte string of a custom-call: the C struct jaxlib packs at lowering time
(jaxlib/gpu/sparse_kernels.h, rnn_kernels.h, ...), kept by the importer in the call's
backend_config dictionary (typed FFI) or in `mhlo.backend_config`."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite


def opaque_bytes(op: ir.Operation) -> bytes:
    for key in ("mhlo.backend_config", "backend_config"):
        if key in op.attributes and isinstance(op.attributes[key], ir.DictAttr):
            config = ir.DictAttr(op.attributes[key])
            if "opaque" in config:
                return ir.StringAttr(config["opaque"]).value_bytes
    raise rewrite.op_error(op, "has no `opaque` descriptor in its backend_config")
