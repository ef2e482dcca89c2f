"""cudnn-rnn: jax.experimental.rnn's cuDNN LSTM calls are refused by name, with what to do.

`cudnn_rnn_ffi` (x, h_0, c_0, weights, seq_lengths) → (y, h_n, c_n, workspace, reserve) and
`cudnn_rnn_bwd_ffi` (its gradient; hip: `hipdnn_rnn_ffi`, `hipdnn_rnn_bwd_ffi`), written by
jaxlib/gpu_rnn.py.  The layer sizes, bidirectionality and dropout are in the call's `opaque`
descriptor and the weights are one flat buffer in cuDNN's own packing; no rewrite of the
LSTM is written, so the call is an error at its line that says how to give it a meaning: a
plug-in (`--custom-call`) computing it with jax.experimental.rnn's reference LSTM
(`unpack_lstm_weights` and `lstm_ref`).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

TARGETS = ("cudnn_rnn_ffi", "cudnn_rnn_bwd_ffi", "hipdnn_rnn_ffi", "hipdnn_rnn_bwd_ffi")


@register_pass("cudnn-rnn", "jax.experimental.rnn's cuDNN LSTM calls → refused by name with the remedy",
               targets=TARGETS, preserves={Fact.USES})
def refuse_cudnn_rnn(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        raise rewrite.op_error(
            op, "jax.experimental.rnn's cuDNN LSTM has no portable rewrite (its sizes are in the opaque cuDNN "
                "descriptor and its weights in cuDNN's packing); give it a CPU meaning with a plug-in "
                f"(--custom-call {rewrite.call_target(op)}=MODULE:FUNCTION) built on jax.experimental.rnn's "
                "unpack_lstm_weights and lstm_ref")
