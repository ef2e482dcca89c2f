"""cudnn-rnn: jax.experimental.rnn's cuDNN LSTM calls → a time loop per layer and direction.

Forms written by jaxlib/gpu_rnn.py (`_rnn_fwd_lowering`, `_rnn_bwd_lowering`; hip: `hipdnn_*`):
- `cudnn_rnn_ffi` (x [B,T,I], h_0 [L·D,B,H], c_0, weights [P], seq_lengths s32[B])
  → (y [B,T,D·H], h_n, c_n, workspace, reserve space);
- `cudnn_rnn_bwd_ffi` (dy, dh_n, dc_n, x, h_0, c_0, weights, y, reserve space, zeroed dw,
  seq_lengths) → (dx, dh_0, dc_0, dw, workspace); dw aliases the zeroed operand, into which
  cuDNN adds (CUDNN_WGRAD_MODE_ADD, jaxlib/gpu/rnn_kernels.cc).
The sizes are in `opaque`, jaxlib/gpu/rnn_kernels.h's RnnDescriptor (native layout, the same in
jaxlib 0.10.2 and 0.12): int input_size, hidden_size, num_layers, batch_size, max_seq_length;
float dropout; int bidirectional, cudnn_allow_tf32; size_t workspace_size, reserve_space_size.
Before February 2025 jaxlib wrote the same operands and results as the legacy calls `cudnn_rnn` /
`cudnn_rnn_bwd` (api_version 2, the descriptor as the raw backend_config string; jax commit
"Update RNN kernels to use FFI"), with earlier descriptor layouts, told apart by length: 40
bytes (int workspace/reserve sizes, until March 2025), 36 bytes (bool bidirectional at byte 24,
then a bool cudnn_allow_tf32 or padding, int sizes; before September 2023).

The meaning is jax.experimental.rnn's `lstm_ref` (jax/experimental/rnn.py): cuDNN's LSTM with
double bias, gates i, f, g, o in that order; the flat weights hold, per pseudo-layer (layer l,
direction d at l·D + d), W_ih [4H, in] then W_hh [4H, H], and after all of them b_ih [4H], b_hh
[4H] per pseudo-layer (`unpack_lstm_weights`).  Per step, with z = x_t W_ihᵀ + b_ih + h W_hhᵀ + b_hh:
i, f, o = σ(z_i, z_f, z_o), g = tanh(z_g), c' = f·c + i·g, h' = o·tanh(c').  Padding: batch row b
has seq_lengths[b] steps; its state stops changing after them (h_n, c_n are the state after its
last step), y is 0 past them, and the reverse direction starts at the row's own last step.  A
bidirectional layer's output is [forward, reverse] on the feature axis; the next layer reads it.
jax's own GPU test (tests/experimental_rnn_test.py) checks cuDNN's outputs and weight gradients
against lstm_ref with padded seq_lengths, 1 and 4 layers, both directions.  The hip twins (MIOpen)
read the gates from the buffer as i, f, o, g (that test swaps g and o with `swap_lstm_gates` before
calling MIOpen); it skips bidirectional LSTMs on ROCm, and so a bidirectional hipdnn call is refused.

The forward is a `while` over time per pseudo-layer (x W_ihᵀ for all steps as one dot before it).
The backward recomputes that forward from x, h_0, c_0 and the weights (the reserve space is
cuDNN's private record and is not read) and runs back-propagation through time: a reverse loop per
pseudo-layer carrying dh, dc, then dW_ih, dW_hh, the biases' and the layer input's gradients as
dots over all steps.  Computed in f32 (on a GPU with cudnn_allow_tf32 cuDNN may round the GEMM
operands to TF32; this is the f32 math of lstm_ref).  Refused, by name at the call's line:
dropout other than 0 (cuDNN's mask comes from its own generator state), element types other than
f32 (cuDNN is set to CUDNN_DATA_FLOAT), shapes that disagree with the descriptor, and a forward
whose workspace or reserve space is read by anything but a backward call (their bytes are
cuDNN's).  seq_lengths are checked at run time: cuDNN's cudnnSetRNNDataDescriptor bounds each
length by maxSeqLength (T) and rejects the call otherwise, so the GPU program stops; portable
StableHLO cannot stop, so where any length is outside 0..T every float result is NaN.  A length
of 0 is a row with no steps: its state stays h_0, c_0 and y is 0 (lstm_ref gives no meaning to
it: it takes the carry at index −1; whether cuDNN accepts 0 is not established here).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.mlir import builders as b
from passes.lib import rewrite
from passes.lib.descriptors import opaque_bytes
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

FORWARD = ("cudnn_rnn_ffi", "hipdnn_rnn_ffi", "cudnn_rnn", "hipdnn_rnn")
BACKWARD = ("cudnn_rnn_bwd_ffi", "hipdnn_rnn_bwd_ffi", "cudnn_rnn_bwd", "hipdnn_rnn_bwd")
TARGETS = FORWARD + BACKWARD
DESCRIPTOR = struct.Struct("=5if2i2Q")  # RnnDescriptor: 8 four-byte fields, 2 size_t (48 bytes, no padding)
# The layouts of older jaxlibs' RnnDescriptor (jaxlib/gpu/rnn_kernels.h in jax's history), by length
# (the field order is the same; tf32 and the sizes are not read): the input size, hidden, layers,
# batch, max_seq_length, dropout and bidirectional.
LEGACY_DESCRIPTORS = {40: struct.Struct("=5if2i2i"), 36: struct.Struct("=5if?3x2i")}


@dataclass(frozen=True)
class Lstm:
    input_size: int
    hidden: int
    layers: int
    batch: int
    seq: int
    dropout: float
    bidirectional: bool
    miopen: bool = False  # a hipdnn_* call: MIOpen's weight buffer holds the gates as i, f, o, g

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def layer_input_size(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.directions * self.hidden

    def weight_slices(self) -> tuple[list[tuple[int, int, int, int]], int]:
        """Per pseudo-layer (W_ih offset, W_ih width, W_hh offset, b_ih offset) in the flat
        buffer (b_hh follows b_ih), and the buffer's length: unpack_lstm_weights' layout."""
        h4, offset, linear = 4 * self.hidden, 0, []
        for p in range(self.layers * self.directions):
            width = self.layer_input_size(p // self.directions)
            linear.append((offset, width, offset + h4 * width))
            offset += h4 * width + h4 * self.hidden
        slices = [(w_ih, width, w_hh, offset + 2 * h4 * p) for p, (w_ih, width, w_hh) in enumerate(linear)]
        return slices, offset + 2 * h4 * len(linear)

    def num_params(self) -> int:
        return self.weight_slices()[1]


@register_pass("cudnn-rnn", "jax.experimental.rnn's cuDNN LSTM forward and backward calls → time loops "
                            "(backward: the forward recomputed, then back-propagation through time)",
               targets=TARGETS, preserves={Fact.USES})
def lower_cudnn_rnn(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    # Backward calls first: they are the only readers a forward's reserve space may have.
    for op in walks.custom_calls(BACKWARD):
        lower_backward(op)
    for op in walks.custom_calls(FORWARD):
        lower_forward(op)


def _opaque(op: ir.Operation) -> bytes:
    """The descriptor: `opaque` of a typed-FFI call, or the whole backend_config string of a
    legacy (api_version 2) call."""
    if not rewrite.call_target(op).endswith("_ffi"):
        attr = op.attributes["backend_config"] if "backend_config" in op.attributes else None
        if attr is None or not isinstance(attr, ir.StringAttr):
            raise rewrite.op_error(op, "a legacy cuDNN LSTM call without its descriptor as the backend_config string")
        return ir.StringAttr(attr).value_bytes
    return opaque_bytes(op)


def _descriptor(op: ir.Operation) -> Lstm:
    opaque = _opaque(op)
    legacy = not rewrite.call_target(op).endswith("_ffi")
    layouts = {DESCRIPTOR.size: DESCRIPTOR, **(LEGACY_DESCRIPTORS if legacy else {})}
    if len(opaque) not in layouts:
        sizes = " or ".join(str(n) for n in sorted(layouts, reverse=True))
        raise rewrite.op_error(op, f"the opaque RnnDescriptor has {len(opaque)} bytes; jaxlib's "
                                   f"(jaxlib/gpu/rnn_kernels.h) has {sizes}")
    input_size, hidden, layers, batch, seq, dropout, bidirectional = layouts[len(opaque)].unpack(opaque)[:7]
    miopen = rewrite.call_target(op).startswith("hip")
    lstm = Lstm(input_size, hidden, layers, batch, seq, dropout, bool(bidirectional), miopen)
    if min(input_size, hidden, layers, batch, seq) <= 0:
        raise rewrite.op_error(op, f"the RnnDescriptor's sizes are not positive: {lstm}")
    if dropout != 0.0:
        raise rewrite.op_error(op, f"the LSTM has dropout {dropout:g}: cuDNN draws its dropout mask from its own "
                                   "generator state, which the dump does not hold; only dropout=0 is supported")
    if miopen and lstm.bidirectional:
        raise rewrite.op_error(op, "a bidirectional LSTM on ROCm: jax does not vouch for MIOpen's bidirectional "
                                   "results (jax's tests/experimental_rnn_test.py skips them), so no meaning is "
                                   "given to it; unidirectional hipdnn LSTMs are supported")
    return lstm


def _check_operands(op: ir.Operation, lstm: Lstm, x: ir.Value, h0: ir.Value, c0: ir.Value, w: ir.Value,
                    lengths: ir.Value) -> None:
    f32, s32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    states = [lstm.layers * lstm.directions, lstm.batch, lstm.hidden]
    expected = [("x", x, [lstm.batch, lstm.seq, lstm.input_size], f32), ("h_0", h0, states, f32),
                ("c_0", c0, states, f32), ("weights", w, [lstm.num_params()], f32),
                ("seq_lengths", lengths, [lstm.batch], s32)]
    for name, value, shape, element in expected:
        if b.shape_of(value) != shape or b.element_type_of(value) != element:
            raise rewrite.op_error(op, f"operand {name} is {value.type}; the RnnDescriptor ({lstm}) gives "
                                       f"tensor<{'x'.join(map(str, shape))}x{element}> (only f32 LSTMs are supported)")


def _swap_g_o(m: ir.Value, lstm: Lstm) -> ir.Value:
    """Gate blocks (axis 0) between MIOpen's order i, f, o, g and cuDNN's i, f, g, o (either way):
    jax.experimental.rnn.swap_lstm_gates, which jax's ROCm test applies to the weights it gives
    MIOpen; the identity for cuDNN."""
    if not lstm.miopen:
        return m
    shape = b.shape_of(m)
    h = lstm.hidden
    blocks = [b.slice_(m, [k * h] + [0] * (len(shape) - 1), [(k + 1) * h] + shape[1:]) for k in range(4)]
    return b.concatenate([blocks[0], blocks[1], blocks[3], blocks[2]], 0)


def _weights(w: ir.Value, lstm: Lstm) -> list[tuple[ir.Value, ir.Value, ir.Value]]:
    """Per pseudo-layer: W_ih [4H, in], W_hh [4H, H], b_ih + b_hh [4H], gates in cuDNN's order."""
    h4 = 4 * lstm.hidden
    out = []
    for w_ih_at, width, w_hh_at, bias_at in lstm.weight_slices()[0]:
        w_ih = b.reshape(b.slice_(w, [w_ih_at], [w_ih_at + h4 * width]), [h4, width])
        w_hh = b.reshape(b.slice_(w, [w_hh_at], [w_hh_at + h4 * lstm.hidden]), [h4, lstm.hidden])
        bias = b.binary("add", b.slice_(w, [bias_at], [bias_at + h4]), b.slice_(w, [bias_at + h4], [bias_at + 2 * h4]))
        out.append((_swap_g_o(w_ih, lstm), _swap_g_o(w_hh, lstm), _swap_g_o(bias, lstm)))
    return out


def _i32(value: int) -> ir.Value:
    return b.scalar_constant(value, ir.IntegerType.get_signless(32))


def _matmul_t(a: ir.Value, w: ir.Value) -> ir.Value:
    """a [..., k] · wᵀ (w [n, k]) → [..., n]."""
    rank = len(b.shape_of(a))
    return b.dot_general(a, w, ir.F32Type.get(), [], [], [rank - 1], [1])


def _step_index(i: ir.Value, reverse: bool, seq: int) -> ir.Value:
    return b.binary("subtract", _i32(seq - 1), i) if reverse else i


def _at_step(stack: ir.Value, t: ir.Value) -> ir.Value:
    """stack [T, B, N] at step t → [B, N]."""
    _, batch, n = b.shape_of(stack)
    return b.reshape(b.dynamic_slice(stack, [t, _i32(0), _i32(0)], [1, batch, n]), [batch, n])


def _put_step(stack: ir.Value, value: ir.Value, t: ir.Value) -> ir.Value:
    batch, n = b.shape_of(value)
    return b.dynamic_update_slice(stack, b.reshape(value, [1, batch, n]), [t, _i32(0), _i32(0)])


def _valid(lengths: ir.Value, t: ir.Value, width: int) -> ir.Value:
    """[B, width] i1: step t is within each row's sequence."""
    batch = b.shape_of(lengths)[0]
    return b.broadcast_in_dim(b.compare(b.broadcast_in_dim(t, [batch], []), lengths, "LT", "SIGNED"),
                              [batch, width], [0])


def _gate(z: ir.Value, k: int, hidden: int) -> ir.Value:
    batch = b.shape_of(z)[0]
    return b.slice_(z, [0, k * hidden], [batch, (k + 1) * hidden])


def _one_minus(v: ir.Value) -> ir.Value:
    return b.binary("subtract", b.scalar_constant(1.0, ir.F32Type.get(), b.shape_of(v)), v)


@dataclass
class Direction:
    """One pseudo-layer's forward: outputs [T, B, H] (0 past each row's length), final state,
    and (for the backward) per step the state it read and its activations."""
    ys: ir.Value
    h_n: ir.Value
    c_n: ir.Value
    h_prev: ir.Value | None = None  # [T, B, H]
    c_prev: ir.Value | None = None
    acts: ir.Value | None = None  # [T, B, 4H]: σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
    c_new: ir.Value | None = None


def _run_direction(inp: ir.Value, lengths: ir.Value, h0: ir.Value, c0: ir.Value,
                   weights: tuple[ir.Value, ir.Value, ir.Value], reverse: bool, keep: bool) -> Direction:
    w_ih, w_hh, bias = weights
    seq, batch, _ = b.shape_of(inp)
    hidden = b.shape_of(w_hh)[1]
    f32 = ir.F32Type.get()
    xz = b.binary("add", _matmul_t(inp, w_ih), b.broadcast_in_dim(bias, [seq, batch, 4 * hidden], [2]))
    zeros_h = b.scalar_constant(0.0, f32, [seq, batch, hidden])
    init = [_i32(0), h0, c0, zeros_h]
    if keep:
        init += [zeros_h, zeros_h, b.scalar_constant(0.0, f32, [seq, batch, 4 * hidden]), zeros_h]

    def cond(i, *_):
        return b.compare(i, _i32(seq), "LT", "SIGNED")

    def body(i, h, c, ys, *kept):
        t = _step_index(i, reverse, seq)
        z = b.binary("add", _at_step(xz, t), _matmul_t(h, w_hh))
        ig, fg, og = (b.unary("logistic", _gate(z, k, hidden)) for k in (0, 1, 3))
        gg = b.unary("tanh", _gate(z, 2, hidden))
        c_new = b.binary("add", b.binary("multiply", fg, c), b.binary("multiply", ig, gg))
        h_new = b.binary("multiply", og, b.unary("tanh", c_new))
        valid = _valid(lengths, t, hidden)
        y = b.select(valid, h_new, b.scalar_constant(0.0, f32, [batch, hidden]))
        out = [b.binary("add", i, _i32(1)), b.select(valid, h_new, h), b.select(valid, c_new, c), _put_step(ys, y, t)]
        if keep:
            h_prev, c_prev, acts, c_news = kept
            out += [_put_step(h_prev, h, t), _put_step(c_prev, c, t),
                    _put_step(acts, b.concatenate([ig, fg, gg, og], 1), t), _put_step(c_news, c_new, t)]
        return out

    results = b.while_loop(init, cond, body)
    return Direction(results[3], results[1], results[2], *results[4:]) if keep else \
        Direction(results[3], results[1], results[2])


def _forward(lstm: Lstm, x: ir.Value, h0: ir.Value, c0: ir.Value, w: ir.Value, lengths: ir.Value,
             keep: bool) -> tuple[list[Direction], list[ir.Value]]:
    """Every pseudo-layer's forward, and each layer's input [T, B, in] (seq-first)."""
    weights = _weights(w, lstm)
    inp = b.transpose(x, [1, 0, 2])
    runs, inputs = [], []
    for layer in range(lstm.layers):
        inputs.append(inp)
        outs = []
        for d in range(lstm.directions):
            p = layer * lstm.directions + d
            h, c = (b.reshape(b.slice_(s, [p, 0, 0], [p + 1, lstm.batch, lstm.hidden]), [lstm.batch, lstm.hidden])
                    for s in (h0, c0))
            run = _run_direction(inp, lengths, h, c, weights[p], reverse=d == 1, keep=keep)
            runs.append(run)
            outs.append(run.ys)
        inp = outs[0] if len(outs) == 1 else b.concatenate(outs, 2)
    inputs.append(inp)  # the last layer's output
    return runs, inputs


def _stack_states(values: list[ir.Value], lstm: Lstm) -> ir.Value:
    return b.concatenate([b.reshape(v, [1, lstm.batch, lstm.hidden]) for v in values], 0)


def _check_unread(op: ir.Operation, result: ir.Value, name: str) -> None:
    if rewrite.has_uses(result):
        raise rewrite.op_error(op, f"the LSTM's {name} is read by something other than the LSTM backward call "
                                   "(it holds cuDNN's private bytes, which the rewrite does not reproduce)")


def _call(op: ir.Operation, what: str, operand_count: int) -> tuple[Lstm, list[ir.Value], list[ir.Value]]:
    """The descriptor, operands and results of a call of jaxlib's form (5 results each way)."""
    lstm = _descriptor(op)
    operands, results = list(op.operands), list(op.results)
    if (len(operands), len(results)) != (operand_count, 5):
        raise rewrite.op_error(op, f"jaxlib's cuDNN LSTM {what} has {operand_count} operands and 5 results; found "
                                   f"{len(operands)} and {len(results)}")
    return lstm, operands, results


def lower_forward(op: ir.Operation) -> None:
    lstm, operands, results = _call(op, "forward", 5)
    x, h0, c0, w, lengths = operands
    _check_operands(op, lstm, x, h0, c0, w, lengths)
    _check_unread(op, results[3], "workspace")
    _check_unread(op, results[4], "reserve space")
    with rewrite.at(op):
        runs, inputs = _forward(lstm, x, h0, c0, w, lengths, keep=False)
        y = b.transpose(inputs[-1], [1, 0, 2])
        values = [y, _stack_states([r.h_n for r in runs], lstm), _stack_states([r.c_n for r in runs], lstm)]
        values = _nan_where_lengths_out_of_range(values, lengths, lstm.seq)
    rewrite.replace(op, values + [None, None])


def _nan_where_lengths_out_of_range(values: list[ir.Value], lengths: ir.Value, seq: int) -> list[ir.Value]:
    """Every value NaN where some seq_lengths[b] is outside 0..seq (cuDNN rejects the call)."""
    s32 = ir.IntegerType.get_signless(32)
    (batch,) = b.shape_of(lengths)
    outside = b.binary("or", b.compare(lengths, b.scalar_constant(0, s32, [batch]), "LT", "SIGNED"),
                       b.compare(lengths, b.scalar_constant(seq, s32, [batch]), "GT", "SIGNED"))
    any_outside = b.reduce(outside, [0], "or", 0)
    out = []
    for v in values:
        shape = b.shape_of(v)
        nan = b.scalar_constant(float("nan"), b.element_type_of(v), shape)
        out.append(b.select(b.broadcast_in_dim(any_outside, shape, []), nan, v))
    return out


def _backprop_direction(run: Direction, inp: ir.Value, dys: ir.Value, lengths: ir.Value, dh_n: ir.Value,
                        dc_n: ir.Value, weights: tuple[ir.Value, ir.Value, ir.Value],
                        reverse: bool) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value, ir.Value]:
    """Back-propagation through one pseudo-layer's loop: (d input [T, B, in], dh_0, dc_0,
    dW_ih [4H, in], dW_hh [4H, H], d bias [4H])."""
    w_ih, w_hh, _ = weights
    seq, batch, hidden = b.shape_of(dys)
    f32 = ir.F32Type.get()
    init = [_i32(0), dh_n, dc_n, b.scalar_constant(0.0, f32, [seq, batch, 4 * hidden])]

    def cond(i, *_):
        return b.compare(i, _i32(seq), "LT", "SIGNED")

    def body(i, dh, dc, dzs):
        # Steps in the reverse of the order the forward took them.
        t = _step_index(i, not reverse, seq)
        acts = _at_step(run.acts, t)
        ig, fg, gg, og = (_gate(acts, k, hidden) for k in range(4))
        tanh_c = b.unary("tanh", _at_step(run.c_new, t))
        valid = _valid(lengths, t, hidden)
        dh_out = b.binary("add", dh, _at_step(dys, t))
        mul = lambda u, v: b.binary("multiply", u, v)  # noqa: E731
        dc_tot = b.binary("add", dc, mul(mul(dh_out, og), _one_minus(mul(tanh_c, tanh_c))))
        dzi = mul(mul(dc_tot, gg), mul(ig, _one_minus(ig)))
        dzf = mul(mul(dc_tot, _at_step(run.c_prev, t)), mul(fg, _one_minus(fg)))
        dzg = mul(mul(dc_tot, ig), _one_minus(mul(gg, gg)))
        dzo = mul(mul(dh_out, tanh_c), mul(og, _one_minus(og)))
        dz = b.concatenate([dzi, dzf, dzg, dzo], 1)
        dh_prev = b.dot_general(dz, w_hh, f32, [], [], [1], [0])
        dc_prev = mul(dc_tot, fg)
        zero_z = b.scalar_constant(0.0, f32, [batch, 4 * hidden])
        dz = b.select(_valid(lengths, t, 4 * hidden), dz, zero_z)
        # Past a row's length the state passed through unchanged: so do its gradients.
        return [b.binary("add", i, _i32(1)), b.select(valid, dh_prev, dh), b.select(valid, dc_prev, dc),
                _put_step(dzs, dz, t)]

    _, dh0, dc0, dzs = b.while_loop(init, cond, body)
    d_inp = b.dot_general(dzs, w_ih, f32, [], [], [2], [0])
    dw_ih = b.dot_general(dzs, inp, f32, [], [], [0, 1], [0, 1])
    dw_hh = b.dot_general(dzs, run.h_prev, f32, [], [], [0, 1], [0, 1])
    d_bias = b.reduce(dzs, [0, 1])
    return d_inp, dh0, dc0, dw_ih, dw_hh, d_bias


def lower_backward(op: ir.Operation) -> None:
    lstm, operands, results = _call(op, "backward", 11)
    dy, dhn, dcn, x, h0, c0, w, y, _reserve, zeroed_dw, lengths = operands
    _check_operands(op, lstm, x, h0, c0, w, lengths)
    for name, value, like in (("dy", dy, y), ("dh_n", dhn, h0), ("dc_n", dcn, c0), ("zeroed dw", zeroed_dw, w)):
        if value.type != like.type:
            raise rewrite.op_error(op, f"operand {name} is {value.type}, not {like.type}")
    if b.shape_of(y) != [lstm.batch, lstm.seq, lstm.directions * lstm.hidden]:
        raise rewrite.op_error(op, f"operand y is {y.type}; the RnnDescriptor ({lstm}) disagrees")
    if rewrite.has_uses(results[4]):
        raise rewrite.op_error(op, "the LSTM backward's workspace is read (it holds cuDNN's private bytes)")
    with rewrite.at(op):
        runs, inputs = _forward(lstm, x, h0, c0, w, lengths, keep=True)
        weights = _weights(w, lstm)
        p_count = lstm.layers * lstm.directions
        d_out = b.transpose(dy, [1, 0, 2])  # gradient of the top layer's output, [T, B, D·H]
        dh0s: list[ir.Value] = [None] * p_count  # type: ignore[list-item]
        dc0s: list[ir.Value] = [None] * p_count  # type: ignore[list-item]
        dws: list[tuple[ir.Value, ir.Value, ir.Value]] = [None] * p_count  # type: ignore[list-item]
        for layer in reversed(range(lstm.layers)):
            d_in = None
            for d in range(lstm.directions):
                p = layer * lstm.directions + d
                dys = b.slice_(d_out, [0, 0, d * lstm.hidden], [lstm.seq, lstm.batch, (d + 1) * lstm.hidden])
                dh_n, dc_n = (b.reshape(b.slice_(s, [p, 0, 0], [p + 1, lstm.batch, lstm.hidden]),
                                        [lstm.batch, lstm.hidden]) for s in (dhn, dcn))
                d_inp, dh0s[p], dc0s[p], dw_ih, dw_hh, d_bias = _backprop_direction(
                    runs[p], inputs[layer], dys, lengths, dh_n, dc_n, weights[p], reverse=d == 1)
                dws[p] = (_swap_g_o(dw_ih, lstm), _swap_g_o(dw_hh, lstm), _swap_g_o(d_bias, lstm))
                d_in = d_inp if d_in is None else b.binary("add", d_in, d_inp)
            d_out = d_in
        dx = b.transpose(d_out, [1, 0, 2])
        # dw in the flat layout: every pseudo-layer's W_ih, W_hh, then every one's b_ih, b_hh
        # (both biases get the same gradient: they are summed into each gate).
        flat = [b.reshape(m, [b.shape_of(m)[0] * b.shape_of(m)[1]]) for dw_ih, dw_hh, _ in dws for m in (dw_ih, dw_hh)]
        flat += [bias for _, _, d_bias in dws for bias in (d_bias, d_bias)]
        dw = b.binary("add", zeroed_dw, b.concatenate(flat, 0))  # cuDNN adds into the aliased operand
        values = [dx, _stack_states(dh0s, lstm), _stack_states(dc0s, lstm), dw]
        values = _nan_where_lengths_out_of_range(values, lengths, lstm.seq)
    rewrite.replace(op, values + [None])
