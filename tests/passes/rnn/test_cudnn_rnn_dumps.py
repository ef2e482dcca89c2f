"""Real optimized GPU dumps (tests/passes/rnn/dumps/jax010 and jax012, written by
generate_dumps.py for one H100, deviceless, with jax 0.10.2 and 0.12.0.1) of jax.experimental.rnn's
cuDNN LSTM (cases.py): forward programs (`cudnn_rnn_ffi`) and jax.grad programs (the forward and
`cudnn_rnn_bwd_ffi`), one and two layers, one and two directions.  Each converts with the default
pipeline and runs on CPU; the oracle is jax.experimental.rnn.lstm_ref on CPU with the weights
unpacked by unpack_lstm_weights (and jax.grad of the same loss of it), on random values and random
padded seq_lengths (hypothesis, in 1..T).

Tolerance: the rewrite computes lstm_ref's f32 math with the same operations but in another order
(x·W_ihᵀ for all steps as one dot, both biases added first, the backward's weight gradients as
dots over all steps where JAX's transpose of the scan accumulates step by step), so the two differ
by f32 rounding: O(10) ulps of values that are O(1) here (tanh/σ outputs; the gradients sum ≤ 2·T·B
terms of O(1)); measured ≤ 2e-7 relative to the largest output.  TOLERANCES' float32 allowance
(2e-5 relative, 1e-5 absolute) leaves ~50x."""

from __future__ import annotations

import functools
import pathlib

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from converter.runtime.convert import convert_text
from tests.helpers import assert_close, convert_program
from tests.passes.rnn.cases import cases, random_inputs, reference

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
# The running jax's smallest forward program runs by default, the rest (the other version's, the
# gradient programs: compiling jax.grad of lstm_ref for the oracle takes 30-60 s on this CPU) as
# slow tests.
OWN_VERSION = "jax{}{:02d}".format(*map(int, jax.__version__.split(".")[:2]))
DEFAULT_CASES = {"lstm_l1"}
CASES = [pytest.param(version, name, id=f"{version}-{name}",
                      marks=[] if version == OWN_VERSION and name in DEFAULT_CASES else [pytest.mark.slow])
         for version, name in sorted((p.parent.name, p.stem) for p in DUMPS.glob("jax*/*.hlo"))
         if not cases()[name].dropout]


@functools.cache
def _converted(version: str, name: str):
    program = convert_program((DUMPS / version / f"{name}.hlo").read_text())
    text = str(program.module)
    assert "cudnn_rnn" not in text and "custom_call" not in text
    return program


@functools.cache
def _oracle(name: str):
    return jax.jit(reference(cases()[name]))  # seq_lengths are an argument: one compilation per case


@pytest.mark.parametrize("version,name", CASES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), data=st.data())
def test_cudnn_lstm_dump_matches_lstm_ref(version, name, seed, data):
    case = cases()[name]
    lengths = data.draw(st.lists(st.integers(1, case.seq), min_size=case.batch, max_size=case.batch))
    inputs = random_inputs(case, seed, np.array(lengths))
    got = [np.asarray(x) for x in _converted(version, name)(*inputs)]
    want = [np.asarray(x) for x in _oracle(name)(*inputs)]
    assert len(got) == len(want) == (4 if case.grad else 3)
    for what, g, w in zip(("dx dh_0 dc_0 dw" if case.grad else "y h_n c_n").split(), got, want):
        assert g.shape == w.shape and g.dtype == w.dtype == np.float32
        assert_close(g, w, what=f"{name} {what} (seq_lengths {lengths})")


@pytest.mark.parametrize("version", sorted(p.name for p in DUMPS.glob("jax*")))
def test_cudnn_lstm_with_dropout_is_refused_at_its_line(version):
    text = (DUMPS / version / "lstm_l2_dropout.hlo").read_text()
    line = next(i for i, s in enumerate(text.splitlines(), 1) if 'custom_call_target="cudnn_rnn_ffi"' in s)
    with pytest.raises(Exception, match=rf":{line}:\d+: error: %rnn_fwd\.\d+ \(custom-call cudnn_rnn_ffi\): the LSTM "
                                        r"has dropout 0\.5: cuDNN draws its dropout mask"):
        convert_text(text)


@pytest.mark.slow  # jax.grad of lstm_ref compiles for tens of seconds
def test_hip_twins_forward_and_backward_read_and_write_miopen_gate_order():
    """The gradient dump with its calls renamed to the hip twins: MIOpen's buffer holds the gates
    as i, f, o, g (rnn.swap_lstm_gates of cuDNN's), for the weights read and for dw written."""
    from jax.experimental import rnn

    name = "lstm_l2_grad"
    case = cases()[name]
    text = (DUMPS / "jax012" / f"{name}.hlo").read_text().replace('"cudnn_rnn_ffi"', '"hipdnn_rnn_ffi"')
    text = text.replace('"cudnn_rnn_bwd_ffi"', '"hipdnn_rnn_bwd_ffi"')
    swap = functools.partial(rnn.swap_lstm_gates, input_size=case.input_size, hidden_size=case.hidden,
                             num_layers=case.layers, bidirectional=case.bidirectional)
    x, h0, c0, w, lengths = random_inputs(case, 5, np.array([4, 2]))
    dx, dh0, dc0, dw = (np.asarray(v) for v in convert_program(text)(x, h0, c0, np.asarray(swap(w)), lengths))
    want = [np.asarray(v) for v in _oracle(name)(x, h0, c0, w, lengths)]
    for what, g, v in zip(("dx", "dh_0", "dc_0", "dw"), (dx, dh0, dc0, dw), want[:3] + [np.asarray(swap(want[3]))]):
        assert_close(g, v, what=what)
