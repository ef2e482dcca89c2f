"""Passes over the imported StableHLO module, one module per pass at this level (the file
named after the pass); what they share (the registry, the pass manager, the rewriting
library, attention, collective folds, plug-ins) lives in passes.lib, the Pallas TPU kernel
translation in passes.mosaic and the shipped plug-in kernels in passes.kernels."""

from passes import (  # noqa: F401  (each module registers its passes)
    bounds_to_static,
    canonicalize,
    collective_cleanup,
    cublas_gemm,
    cublas_grouped_gemm,
    cudnn_block_scaled_dot,
    cudnn_conv,
    cudnn_conv_reorder,
    cudnn_fmha,
    cudnn_graph_conv,
    cudnn_norm,
    cudnn_rnn,
    cse,
    cub_scan,
    cub_sort,
    cusolver,
    cusparse,
    custom_call_plugins,
    custom_call_policy,
    drop_default_attributes,
    drop_unused_results,
    host_callbacks,
    gpu_assert,
    dynamic_shape_calls,
    inline,
    legalize_chlo,
    matmul_convolutions,
    ordered_reductions,
    pallas_tpu,
    triton_kernels,
    partitions_to_replicas,
    strip_annotations,
    sub_byte_collectives,
    symbol_dce,
    te_activation,
    te_fused_attention,
    te_gemm,
    te_grouped_gemm,
    te_grouped_quantize,
    te_norm,
    te_quantize,
    te_refused,
    te_softmax,
    threefry,
    topk,
    tpu_async_collectives,
    tpu_custom_calls,
    xla_builder_math,
)
from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.bounds_to_static import has_dynamic_entry
from passes.lib.errors import PassError
from passes.lib.manager import DEFAULT_PIPELINE, parse_pipeline, run_pipeline
from passes.lib.registry import PASSES, Pass, PassOptions, pass_for_target, register_pass
from passes.sub_byte_collectives import FOLDS, MOVES, is_sub_byte_collective
from converter.mlir.module_attributes import module_devices


def cpu_runtime_pipeline(module: ir.Module, reduction_order: str = "group") -> list[str]:
    """The passes XLA's CPU runtime needs before it can run `module`: collectives in
    cross-replica form and on byte-wide types, float sums in group order (the same bits in
    one process or several; reduction_order "native" leaves XLA's own), entry arrays of
    static size."""
    replicas, partitions = module_devices(module)
    n = replicas * partitions
    needed = ["partitions-to-replicas"] if n > 1 else []
    if any(is_sub_byte_collective(op) for op in rewrite.walk(module, MOVES + FOLDS)):
        needed = ["partitions-to-replicas", "sub-byte-collectives"]
    if n > 1 and reduction_order == "group":
        needed.append("ordered-reductions")
    if has_dynamic_entry(module):
        needed.append("bounds-to-static")
    return needed

__all__ = ["DEFAULT_PIPELINE", "PASSES", "cpu_runtime_pipeline", "Pass", "PassError", "PassOptions", "parse_pipeline",
           "pass_for_target", "register_pass", "run_pipeline"]
