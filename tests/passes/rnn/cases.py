"""The programs behind tests/passes/rnn/dumps/: jax.experimental.rnn's cuDNN LSTM (`rnn.lstm`),
forward only and forward + backward (`jax.grad`), for a few layer counts and directions.

Imports only jax and numpy: `generate_dumps.py` runs it in an environment with jax[cuda12]
(no project code); the tests import it with the project and use `jax.experimental.rnn.lstm_ref`
(and `jax.vjp` of it) on CPU as the oracle."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class LstmCase:
    name: str
    batch: int
    seq: int
    input_size: int
    hidden: int
    layers: int
    bidirectional: bool
    grad: bool  # the program is jax.grad of a loss of (y, h_n, c_n): the dump holds the backward call too
    dropout: float = 0.0

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def num_params(self) -> int:
        """jax.experimental.rnn.get_num_params_in_lstm, written out (no jax import needed)."""
        d, h = self.directions, self.hidden
        total = 0
        for layer in range(self.layers):
            width = self.input_size if layer == 0 else d * h
            total += d * (4 * h * width + 4 * h * h + 8 * h)
        return total

    def input_shapes(self) -> list[tuple[tuple[int, ...], str]]:
        states = (self.directions * self.layers, self.batch, self.hidden)
        return [((self.batch, self.seq, self.input_size), "float32"), (states, "float32"), (states, "float32"),
                ((self.num_params(),), "float32"), ((self.batch,), "int32")]


def random_inputs(case: LstmCase, seed: int = 0, seq_lengths: np.ndarray | None = None) -> list[np.ndarray]:
    """x, h_0, c_0, weights (U(-1/√H, 1/√H) as rnn.init_lstm_weight draws them), seq_lengths
    (random in 1..seq unless given)."""
    rng = np.random.default_rng(seed)
    shapes = case.input_shapes()
    x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s, _ in shapes[:3])
    k = 1.0 / np.sqrt(case.hidden)
    w = rng.uniform(-k, k, shapes[3][0]).astype(np.float32)
    if seq_lengths is None:
        seq_lengths = rng.integers(1, case.seq + 1, case.batch)
    return [x, h0, c0, w, np.asarray(seq_lengths, np.int32)]


def lstm_program(case: LstmCase) -> Callable:
    """The jitted function whose dump the case holds: y, h_n, c_n of rnn.lstm, or (grad) the
    gradients of a loss of them with respect to x, h_0, c_0 and the weights."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import rnn

    lstm = partial(rnn.lstm, input_size=case.input_size, hidden_size=case.hidden, num_layers=case.layers,
                   dropout=case.dropout, bidirectional=case.bidirectional)

    if not case.grad:
        return lambda x, h0, c0, w, lengths: lstm(x, h0, c0, w, lengths)

    def loss(x, h0, c0, w, lengths):
        y, h, c = lstm(x, h0, c0, w, lengths)
        return loss_of_outputs(jnp, y, h, c)

    return jax.grad(loss, argnums=(0, 1, 2, 3))


def loss_of_outputs(jnp, y, h, c):
    """A loss touching every output with distinct weights, so each cotangent is non-trivial."""
    return jnp.sum(jnp.sin(y)) + 0.5 * jnp.sum(h * h) + 0.25 * jnp.sum(jnp.cos(c))


def reference(case: LstmCase) -> Callable:
    """The oracle: jax.experimental.rnn.lstm_ref on the weights unpacked by unpack_lstm_weights
    (and jax.grad of the same loss of it)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import rnn

    def forward(x, h0, c0, w, lengths):
        W_ih, W_hh, b_ih, b_hh = rnn.unpack_lstm_weights(w, case.input_size, case.hidden, case.layers,
                                                         case.bidirectional)
        return rnn.lstm_ref(x, h0, c0, W_ih, W_hh, b_ih, b_hh, lengths, case.input_size, case.hidden,
                            case.layers, 0.0, case.bidirectional)

    if not case.grad:
        return forward

    def loss(x, h0, c0, w, lengths):
        return loss_of_outputs(jnp, *forward(x, h0, c0, w, lengths))

    return jax.grad(loss, argnums=(0, 1, 2, 3))


@cache
def cases() -> dict[str, LstmCase]:
    all_ = [
        LstmCase("lstm_l1", 3, 5, 4, 6, 1, False, False),
        LstmCase("lstm_l2_bidir", 3, 5, 4, 6, 2, True, False),
        LstmCase("lstm_l1_bidir_grad", 2, 4, 3, 5, 1, True, True),
        LstmCase("lstm_l2_grad", 2, 4, 3, 5, 2, False, True),
        LstmCase("lstm_l2_dropout", 2, 4, 3, 5, 2, False, False, dropout=0.5),
    ]
    return {c.name: c for c in all_}
