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


def _legacy(text: str, packed: bytes, target: str = "cudnn_rnn") -> str:
    """The FFI call of `text` in the legacy form jaxlib wrote before February 2025: target
    without `_ffi`, api_version 2, the descriptor as the raw backend_config string."""
    import re

    escaped = "".join(f"\\{byte:03o}" for byte in packed)
    new = re.sub(r'custom_call_target="cudnn_rnn_ffi", api_version=API_VERSION_TYPED_FFI, '
                 r'backend_config=\{opaque = "[^"]*"\}',
                 f'custom_call_target="{target}", api_version=API_VERSION_STATUS_RETURNING, backend_config="{escaped}"',
                 text)
    assert new != text
    return new


@pytest.mark.parametrize("layout", ["=5if2i2i", "=5if?3x2i"], ids=["40-byte", "36-byte"])
def test_legacy_calls_are_the_ffi_calls(layout):
    """`cudnn_rnn` with the older RnnDescriptor layouts (int sizes; bool bidirectional) takes
    the FFI call's operands and results: the same numbers as the FFI form, against lstm_ref."""
    case = LstmCase("bidir", 2, 3, 2, 3, 1, True, False)
    fields = (case.input_size, case.hidden, case.layers, case.batch, case.seq, 0.0)
    packed = struct.pack(layout, *fields, *((1, 1, 256, 1024) if layout == "=5if2i2i" else (True, 256, 1024)))
    inputs = random_inputs(case, 4, np.array([3, 2]))
    got = [np.asarray(v) for v in convert_program(_legacy(lstm_hlo(case), packed))(*inputs)]
    ffi = [np.asarray(v) for v in convert_program(lstm_hlo(case))(*inputs)]
    want = [np.asarray(v) for v in reference(case)(*inputs)]
    for what, g, f, w in zip(("y", "h_n", "c_n"), got, ffi, want):
        np.testing.assert_array_equal(g, f)
        assert_close(g, w, what=what)


def test_legacy_descriptor_of_another_length_is_refused():
    text = _legacy(lstm_hlo(SMALL), bytes(44))
    with pytest.raises(Exception, match=rf":{RNN_LINE}:\d+: error: %rnn \(custom-call cudnn_rnn\): the opaque "
                                        r"RnnDescriptor has 44 bytes; jaxlib's \(jaxlib/gpu/rnn_kernels.h\) has 48 or 40 or 36"):
        convert_text(text)


@pytest.fixture(scope="module")
def small_lstm():
    return convert_program(lstm_hlo(SMALL))


@pytest.mark.parametrize("lengths", [[4, 1], [-1, 2], [3, 2**31 - 1]])
def test_seq_lengths_outside_0_to_t_give_nan(small_lstm, lengths):
    """cuDNN rejects a length outside 0..T (the GPU program stops): every result is NaN."""
    x, h0, c0, w, _ = random_inputs(SMALL, 6)
    for value in small_lstm(x, h0, c0, w, np.array(lengths, np.int32)):
        assert np.isnan(np.asarray(value)).all()


def test_seq_lengths_at_the_bounds(small_lstm):
    """T: against lstm_ref.  0: a row with no steps (state h_0, c_0; y 0); lstm_ref has no
    meaning for it (it takes the carry at index −1), so that row is checked by its definition."""
    x, h0, c0, w, lengths = random_inputs(SMALL, 7, np.array([0, 3]))
    got = [np.asarray(v) for v in small_lstm(x, h0, c0, w, lengths)]
    want = [np.asarray(v) for v in reference(SMALL)(x, h0, c0, w, lengths)]
    assert_close(got[0][1], want[0][1], what="y")
    for what, g, v in zip(("h_n", "c_n"), got[1:], want[1:]):
        assert_close(g[:, 1], v[:, 1], what=what)
    np.testing.assert_array_equal(got[0][0], 0)
    np.testing.assert_array_equal(got[1][:, 0], h0[:, 0])
    np.testing.assert_array_equal(got[2][:, 0], c0[:, 0])


def test_backward_with_a_length_past_t_gives_nan():
    """The jax.grad dump (forward and backward calls): a length past T makes every gradient NaN,
    where cuDNN rejects the call."""
    from tests.passes.rnn.cases import cases

    case = cases()["lstm_l2_grad"]
    x, h0, c0, w, _ = random_inputs(case, 8)
    program = convert_program((DUMPS / "jax012" / "lstm_l2_grad.hlo").read_text())
    for value in program(x, h0, c0, w, np.array([2, case.seq + 1], np.int32)):
        assert np.isnan(np.asarray(value)).all()
