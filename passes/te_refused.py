"""te-refused: Transformer Engine JAX calls (NVIDIA/TransformerEngine
transformer_engine/jax/csrc/extensions/pybind.cpp registrations) that are not converted,
each refused by name with its reason, so a TE dump fails on the first such call with what
the user can do rather than as an unknown target."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

_EP = ("expert-parallel token exchange (ep.cpp): dispatch/combine move tokens between GPUs through TE's NCCL-EP "
       "communicator, whose routing state lives in the process, not in the dump; run the model without "
       "TE expert parallelism (tokens routed by JAX collectives) to convert it")
_GROUPED_QUANTIZE_V2 = ("grouped MXFP8 quantize v2 (nvte_group_quantize, scales written pre-swizzled for cuBLAS): not "
                        "converted; te_grouped_quantize_ffi with delayed or current tensor scaling is")

REASONS: dict[str, str] = {
    "te_ep_prepare_ffi": _EP, "te_ep_dispatch_ffi": _EP, "te_ep_combine_ffi": _EP,
    "te_ep_dispatch_bwd_ffi": _EP, "te_ep_combine_bwd_ffi": _EP,
    "te_grouped_quantize_v2_ffi": _GROUPED_QUANTIZE_V2,
    "te_rht_amax_ffi": "NVFP4's random-Hadamard-transform amax: the random Hadamard transform is not converted "
                       "(NVFP4 quantization without it is)",
}


@register_pass("te-refused", "Transformer Engine calls not converted (te_ep_*, grouped MXFP8 quantize v2, RHT amax): "
               "refused by name with the reason", targets=tuple(REASONS), preserves={Fact.CALL_TARGETS, Fact.USES})
def refuse_te_calls(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    (calls,) = walks.custom_calls_of(tuple(REASONS))
    for op in calls:
        raise rewrite.op_error(op, f"not converted: {REASONS[rewrite.call_target(op)]}")
