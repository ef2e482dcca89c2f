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


RESHAPED_DONATION = """
HloModule torchxla_style_donation, input_output_alias={ {0}: (1, {}, may-alias), {1}: (0, {}, may-alias) }

ENTRY main {
  w = f32[2,6] parameter(0)
  v = f32[6,2] parameter(1)
  wt = f32[6,2] transpose(w), dimensions={1,0}
  s = f32[6,2] subtract(wt, v)
  r = f32[3,4] reshape(v)
  ROOT t = (f32[6,2], f32[3,4]) tuple(s, r)
}
"""


@pytest.mark.parametrize("shapes", [((2, 6), (6, 2)), ((3, 5), (5, 3)), ((4, 4), (4, 4))])
def test_alias_of_equal_size_different_shape_is_kept_as_xla_allows(shapes):
    """torch-xla donates a parameter to an output of another shape with the same bytes (XLA
    checks only the byte size): the pair is aliased and the values are the outputs'.
    Oracles: XLA itself on the same text, and NumPy."""
    from tests.helpers import run_xla

    (a, b), (c, d) = shapes
    text = (RESHAPED_DONATION.replace("f32[2,6]", f"f32[{a},{b}]").replace("f32[6,2]", f"f32[{c},{d}]")
            .replace("f32[3,4]", f"f32[{d},{c}]"))
    program = convert_program(text)
    main = next(op for op in program.module.body.operations if op.operation.name == "func.func")
    assert [str(x) for x in main.attributes["arg_attrs"]] == ["{tf.aliasing_output = 1 : i32}",
                                                               "{tf.aliasing_output = 0 : i32}"]
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((a, b), np.float32), rng.standard_normal((c, d), np.float32)]
    expected = [inputs[0].T - inputs[1], inputs[1].reshape(d, c)]
    for got, xla, want in zip(program(*inputs), run_xla(text, inputs), expected):
        np.testing.assert_array_equal(got, want)  # a transpose, a subtraction, a reshape: exact
        np.testing.assert_array_equal(xla, want)


def test_alias_of_different_sizes_names_both_shapes():
    """out1 is f32[3,4] (48 bytes), parameter 0 f32[2,6] (48 bytes) would do, but out0's
    f32[6,2] is aliased to a parameter made f32[2,5] (40 bytes): XLA refuses such a pair."""
    text = (RESHAPED_DONATION.replace("input_output_alias={ {0}: (1, {}, may-alias), {1}: (0, {}, may-alias) }",
                                      "input_output_alias={ {0}: (0, {}, may-alias) }")
            .replace("w = f32[2,6] parameter(0)", "w0 = f32[2,5] parameter(0)\n  w = f32[2,6] pad(w0, "
                     "f32[] constant(0)), padding=0_0x0_1"))
    with pytest.raises(ConverterError, match=r"different shapes and sizes \(f32\[6,2\].* vs\. f32\[2,5\]"):
        convert_program(text)
