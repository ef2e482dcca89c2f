"""cudnn-rnn: jax.experimental.rnn's cuDNN LSTM call, in jaxlib/gpu_rnn.py's form (operands
x, h_0, c_0, weights, seq_lengths; results y, h_n, c_n, workspace, reserve space; the
descriptor in `opaque`), is refused at its line, naming the remedy."""

from __future__ import annotations

import pytest

from converter.runtime.convert import convert_text

RNN = """HloModule lstm
ENTRY main {
  x = f32[2,5,3]{2,1,0} parameter(0)
  h0 = f32[1,2,4]{2,1,0} parameter(1)
  c0 = f32[1,2,4]{2,1,0} parameter(2)
  w = f32[128]{0} parameter(3)
  lengths = s32[2]{0} parameter(4)
  rnn = (f32[2,5,4]{2,1,0}, f32[1,2,4]{2,1,0}, f32[1,2,4]{2,1,0}, u8[64]{0}, u8[64]{0}) custom-call(x, h0, c0, w, lengths), custom_call_target="TARGET", api_version=API_VERSION_TYPED_FFI, backend_config={opaque = "\\03\\00\\00\\00\\04\\00\\00\\00"}
  ROOT y = f32[2,5,4]{2,1,0} get-tuple-element(rnn), index=0
}
"""


@pytest.mark.parametrize("target", ["cudnn_rnn_ffi", "hipdnn_rnn_ffi", "cudnn_rnn_bwd_ffi"])
def test_cudnn_lstm_is_refused_at_its_line_with_the_remedy(target):
    with pytest.raises(Exception, match=rf":8:\d+: error: %rnn \(custom-call {target}\): .*no portable rewrite.*"
                                        r"lstm_ref"):
        convert_text(RNN.replace("TARGET", target))
