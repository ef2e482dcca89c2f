"""input_output_alias (buffer donation) reaches the converted module: XLA's CPU compiler
then writes each aliased output into its parameter's buffer, so the converted program needs
no more memory than the dump did.  Oracles: JAX's own executable of the same program (its
memory analysis and its outputs), and for tuple parameters a mapping worked out by hand."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from converter.common.errors import ConverterError
from tests.helpers import convert_program


def _donating_step(state, grad, aux):
    return (state - 0.1 * grad, aux * 2), jnp.sum(grad * grad)


def test_jax_donation_aliases_the_same_bytes_and_keeps_values():
    args = (jnp.ones((256, 256)), jnp.ones((256, 256)), jnp.ones((64,), jnp.bfloat16))
    compiled = jax.jit(_donating_step, donate_argnums=(0, 2)).lower(*args).compile()
    text = compiled.as_text()
    assert "input_output_alias" in text.splitlines()[0]
    program = convert_program(text)
    assert program.memory()["alias_bytes"] == compiled.memory_analysis().alias_size_in_bytes == 256 * 256 * 4 + 64 * 2
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((256, 256), np.float32), rng.standard_normal((256, 256), np.float32),
              rng.standard_normal(64, np.float32).astype(jnp.bfloat16)]
    expected = jax.tree.leaves(jax.jit(_donating_step)(*inputs))
    for _ in range(2):  # donated device buffers are consumed: each call uploads its own
        for got, want in zip(program(*inputs), expected):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


TUPLE_PARAMETER = """
HloModule tuple_donation, input_output_alias={ {1}: (0, {1}, may-alias), {0}: (1, {}, may-alias) }

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = (f32[4], f32[8]) parameter(0)
  q = f32[3] parameter(1)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[8] get-tuple-element(p), index=1
  nb = f32[8] negate(b)
  zero = f32[] constant(0)
  sa = f32[] reduce(a, zero), dimensions={0}, to_apply=add
  q2 = f32[3] add(q, q)
  ROOT t = (f32[3], f32[8], f32[]) tuple(q2, nb, sa)
}
"""


def test_tuple_parameter_alias_maps_flattened_leaves():
    program = convert_program(TUPLE_PARAMETER)
    main = next(op for op in program.module.body.operations if op.operation.name == "func.func")
    attrs = [str(a) for a in main.attributes["arg_attrs"]]
    # leaves: arg0 = p{0} f32[4], arg1 = p{1} f32[8], arg2 = q; outputs: out0 q2, out1 nb, out2 sa
    assert attrs == ["{}", "{tf.aliasing_output = 1 : i32}", "{tf.aliasing_output = 0 : i32}"]
    assert program.memory()["alias_bytes"] == 8 * 4 + 3 * 4
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(4, np.float32), rng.standard_normal(8, np.float32), rng.standard_normal(3, np.float32)]
    for got, want in zip(program(*inputs), [inputs[2] * 2, -inputs[1], inputs[0].sum()]):
        np.testing.assert_allclose(got, want, rtol=1e-6)  # f32 sum of 4 terms: a few ulps


@pytest.mark.parametrize("alias, message", [
    ("{0}: (2, {}, may-alias)", "parameter the entry computation does not have"),
    ("{2}: (1, {}, may-alias)", "different shapes"),
])
def test_inconsistent_alias_is_a_located_error(alias, message):
    text = TUPLE_PARAMETER.replace("{ {1}: (0, {1}, may-alias), {0}: (1, {}, may-alias) }", "{ " + alias + " }")
    with pytest.raises(ConverterError, match=message):
        convert_program(text)
