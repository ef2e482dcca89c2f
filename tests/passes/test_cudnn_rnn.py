"""cudnn-rnn on cuDNN LSTM calls written here in jaxlib/gpu_rnn.py's form for generated sizes
(operands x, h_0, c_0, weights, seq_lengths; results y, h_n, c_n, workspace, reserve space; the
RnnDescriptor packed as jaxlib/gpu/rnn_kernels.h lays it out), and the refusals: dropout, element
types other than f32, a descriptor of another length, a workspace or reserve space read by
anything but the backward call.  The real dumps of jax 0.10.2 and 0.12 are in tests/passes/rnn.

Oracle: jax.experimental.rnn.lstm_ref on CPU (weights unpacked by unpack_lstm_weights); the
tolerance is TOLERANCES' float32 one, for the reason given in tests/passes/rnn/test_cudnn_rnn_dumps.py
(same f32 math, other operation order)."""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program
from tests.passes.rnn.cases import LstmCase, random_inputs, reference

DUMPS = pathlib.Path(__file__).resolve().parent / "rnn" / "dumps"


def _opaque(case: LstmCase, dropout: float = 0.0, extra: bytes = b"") -> str:
    packed = struct.pack("=5if2i2Q", case.input_size, case.hidden, case.layers, case.batch, case.seq, dropout,
                         int(case.bidirectional), 1, 256, 1024) + extra
    return "".join(f"\\{byte:02X}" for byte in packed)


def lstm_hlo(case: LstmCase, *, dropout: float = 0.0, element: str = "f32", root: str = "tuple",
             target: str = "cudnn_rnn_ffi", extra: bytes = b"") -> str:
    (xs, _), (hs, _), _, (ws, _), _ = case.input_shapes()
    dims = lambda shape: ",".join(map(str, shape))  # noqa: E731
    y = (case.batch, case.seq, case.directions * case.hidden)
    roots = {"tuple": "ROOT out = (E[Y]{2,1,0}, E[H]{2,1,0}, E[H]{2,1,0}) tuple(y, hn, cn)",
             "reserve": "ROOT reserve = f32[1024]{0} get-tuple-element(rnn), index=4",
             "workspace": "ROOT workspace = f32[256]{0} get-tuple-element(rnn), index=3"}
    text = f"""HloModule lstm
ENTRY main {{
  x = E[X]{{2,1,0}} parameter(0)
  h0 = E[H]{{2,1,0}} parameter(1)
  c0 = E[H]{{2,1,0}} parameter(2)
  w = E[W]{{0}} parameter(3)
  lengths = s32[{case.batch}]{{0}} parameter(4)
  rnn = (E[Y]{{2,1,0}}, E[H]{{2,1,0}}, E[H]{{2,1,0}}, f32[256]{{0}}, f32[1024]{{0}}) custom-call(x, h0, c0, w, lengths), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={{opaque = "{_opaque(case, dropout, extra)}"}}
  y = E[Y]{{2,1,0}} get-tuple-element(rnn), index=0
  hn = E[H]{{2,1,0}} get-tuple-element(rnn), index=1
  cn = E[H]{{2,1,0}} get-tuple-element(rnn), index=2
  {roots[root]}
}}
"""
    return (text.replace("E[", f"{element}[").replace("[X]", f"[{dims(xs)}]").replace("[H]", f"[{dims(hs)}]")
            .replace("[W]", f"[{dims(ws)}]").replace("[Y]", f"[{dims(y)}]"))


SMALL = LstmCase("small", 2, 3, 2, 3, 1, False, False)
RNN_LINE = 8  # the custom-call's line in lstm_hlo's text


@pytest.mark.slow  # each example compiles an LSTM program and its oracle: seconds each on CPU
@settings(max_examples=6, deadline=None)
@given(batch=st.integers(1, 3), seq=st.integers(1, 4), input_size=st.integers(1, 4), hidden=st.integers(1, 4),
       layers=st.integers(1, 2), bidirectional=st.booleans(), seed=st.integers(0, 2**16))
def test_generated_lstm_matches_lstm_ref(batch, seq, input_size, hidden, layers, bidirectional, seed):
    case = LstmCase("generated", batch, seq, input_size, hidden, layers, bidirectional, False)
    inputs = random_inputs(case, seed)
    got = [np.asarray(v) for v in convert_program(lstm_hlo(case))(*inputs)]
    want = [np.asarray(v) for v in reference(case)(*inputs)]
    for what, g, w in zip(("y", "h_n", "c_n"), got, want):
        assert_close(g, w, what=f"{case} {what} (seq_lengths {inputs[4]})")


def test_hip_twin_reads_miopen_gate_order():
    """MIOpen's buffer holds the gates as i, f, o, g: jax's ROCm test gives MIOpen the weights
    through rnn.swap_lstm_gates and compares with lstm_ref on the unswapped ones; so here."""
    from jax.experimental import rnn

    x, h0, c0, w, lengths = random_inputs(SMALL, 3, np.array([3, 1]))
    swapped = np.asarray(rnn.swap_lstm_gates(w, SMALL.input_size, SMALL.hidden, SMALL.layers, SMALL.bidirectional))
    assert not np.array_equal(swapped, w)
    got = convert_program(lstm_hlo(SMALL, target="hipdnn_rnn_ffi"))(x, h0, c0, swapped, lengths)
    want = reference(SMALL)(x, h0, c0, w, lengths)
    for what, g, v in zip(("y", "h_n", "c_n"), got, want):
        assert_close(np.asarray(g), np.asarray(v), what=what)


@pytest.mark.parametrize("kwargs,message", [
    ({"dropout": 0.25}, r"the LSTM has dropout 0\.25: cuDNN draws its dropout mask from its own generator state"),
    ({"element": "f64"}, r"operand x is tensor<2x3x2xf64>; the RnnDescriptor .* gives tensor<2x3x2xf32> "
                         r"\(only f32 LSTMs are supported\)"),
    ({"extra": b"\0\0\0\0"}, r"the opaque RnnDescriptor has 52 bytes; jaxlib's \(jaxlib/gpu/rnn_kernels.h\) has 48"),
    ({"root": "reserve"}, r"the LSTM's reserve space is read by something other than the LSTM backward call"),
    ({"root": "workspace"}, r"the LSTM's workspace is read by something other than the LSTM backward call"),
    ({"target": "hipdnn_rnn_ffi", "bidirectional": True}, r"a bidirectional LSTM on ROCm: jax does not vouch for "
                                                          r"MIOpen's bidirectional results"),
])
def test_refusals_name_the_call_at_its_line(kwargs, message):
    kwargs = dict(kwargs)
    case = LstmCase("bidir", 2, 3, 2, 3, 1, True, False) if kwargs.pop("bidirectional", False) else SMALL
    target = kwargs.get("target", "cudnn_rnn_ffi")
    with pytest.raises(Exception, match=rf":{RNN_LINE}:\d+: error: %rnn \(custom-call {target}\): {message}"):
        convert_text(lstm_hlo(case, **kwargs))


def test_backward_whose_workspace_is_read_is_refused():
    text = (DUMPS / "jax012" / "lstm_l2_grad.hlo").read_text()
    text = text.replace("ROOT %tuple.1.0 = (f32[2,4,3]{2,1,0}, f32[2,2,5]{2,1,0}, f32[2,2,5]{2,1,0}, f32[440]{0}) "
                        "tuple(%rnn_bwd.9.0, %rnn_bwd.10.0, %rnn_bwd.11.0, %rnn_bwd.12.0)",
                        "ROOT %ws = f32[256]{0} get-tuple-element(%rnn_bwd.8), index=4")
    text = text.replace("-> (f32[2,4,3], f32[2,2,5], f32[2,2,5], f32[440]) {", "-> f32[256] {")
    text = text.replace("->(f32[2,4,3]{2,1,0}, f32[2,2,5]{2,1,0}, f32[2,2,5]{2,1,0}, f32[440]{0})}", "->f32[256]{0}}")
    assert "ROOT %ws" in text and "-> f32[256] {" in text
    with pytest.raises(Exception, match=r"error: %rnn_bwd\.8 \(custom-call cudnn_rnn_bwd_ffi\): the LSTM backward's "
                                        r"workspace is read"):
        convert_text(text)
