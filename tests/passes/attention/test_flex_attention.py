"""cuDNN flex attention (passes/lib/flex_attention.py, applied by the cudnn-fmha pass) run
alone on real GPU dumps of jax's `score_mod` attention (tests/passes/attention/dumps/flex_*):
the call goes, the score function it names is inlined into the entry, and the result is
NumPy's attention with that score function — for the dump's own score function and for
others substituted into the same dump (a temperature, a leaky score, one that mixes the
heads: a score function may read any entry of the score matrix).  The backward call,
with the score function's vjp, is checked against jax.vjp of JAX's XLA attention."""

from __future__ import annotations

import pathlib
import re

import jax
import ml_dtypes
import numpy as np
import pytest

from converter.runtime.program import program_from_module
from passes.lib.rewrite import custom_calls
from tests.passes.attention.cudnn_cases import SCALE, cases, random_inputs
from tests.helpers import convert_then, ops_named

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
INFERENCE = (DUMPS / "flex_softcap_gqa_inference.hlo").read_text()
S = "f32[2,4,16,16]{3,2,1,0}"  # the score matrix [B, N, T, S] the score function maps

# Score functions over (s, c) as HLO bodies, each with its NumPy meaning.
SCORES = {
    "softcap": (None, lambda s, c: (c * c + 2) * np.tanh(s / (c * c + 2))),  # the dump's own
    "temperature": (f"""  c = f32[] parameter(1)
  s = {S} parameter(0)
  cb = {S} broadcast(c), dimensions={{}}
  ROOT t = {S} multiply(s, cb)""", lambda s, c: s * c),
    "leaky": (f"""  c = f32[] parameter(1)
  s = {S} parameter(0)
  zero = f32[] constant(0)
  zb = {S} broadcast(zero), dimensions={{}}
  positive = pred[2,4,16,16]{{3,2,1,0}} compare(s, zb), direction=GT
  cb = {S} broadcast(c), dimensions={{}}
  scaled = {S} multiply(s, cb)
  ROOT t = {S} select(positive, s, scaled)""", lambda s, c: np.where(s > 0, s, s * c)),
    "head_mixing": (f"""  c = f32[] parameter(1)
  s = {S} parameter(0)
  zero = f32[] constant(0)
  heads = f32[2,16,16]{{2,1,0}} reduce(s, zero), dimensions={{1}}, to_apply=%flex_test_add
  hb = {S} broadcast(heads), dimensions={{0,2,3}}
  cb = {S} broadcast(c), dimensions={{}}
  mixed = {S} multiply(hb, cb)
  ROOT t = {S} add(s, mixed)""", lambda s, c: s + c * s.sum(axis=1, keepdims=True)),
}

ADD = """%flex_test_add (a: f32[], b: f32[]) -> f32[] {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

"""


def _with_score(name: str) -> str:
    body = SCORES[name][0]
    if body is None:
        return INFERENCE
    head = re.search(r"^%softcap\.1 \(.*\{\n", INFERENCE, re.M)
    end = INFERENCE.index("\n}\n", head.end())
    return INFERENCE[: head.start()] + ADD + head.group(0) + body + INFERENCE[end:]


def _numpy_attention(q, k, v, c, score) -> np.ndarray:
    """softmax(score(SCALE·Q·Kᵀ, c))·V with each KV head serving two query heads (GQA),
    in float64; q [B, T, 4, H], k and v [B, S, 2, H]."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = score(SCALE * np.einsum("btnh,bsnh->bnts", q, k), np.float64(c))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 16, 4, 16)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((2, 16, 2, 16)).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((2, 16, 2, 16)).astype(ml_dtypes.bfloat16)
    c = np.float32(0.7)
    dout = np.zeros((2, 16, 4, 16), ml_dtypes.bfloat16)  # a parameter the forward-only dump ignores
    return q, k, v, c, dout


def test_the_call_goes_and_its_score_function_is_inlined():
    before = convert_then(INFERENCE, [])
    (call,) = custom_calls(before)
    assert "called_computations" in call.attributes
    module = convert_then(INFERENCE, ["cudnn-fmha"])
    assert not custom_calls(module)
    main = next(f for f in ops_named(module, "func.func") if str(f.attributes["sym_name"]) == '"main"')
    inlined = [op.name for block in main.regions[0].blocks for op in block.operations]
    assert "func.call" not in inlined
    assert any(op.name == "stablehlo.tanh" and op.parent.name == "func.func"
               and str(op.parent.attributes["sym_name"]) == '"main"' for op in ops_named(module, "stablehlo.tanh"))


@pytest.mark.parametrize("name", list(SCORES))
def test_forward_is_numpys_attention_with_the_calls_score_function(name):
    module = convert_then(_with_score(name), ["cudnn-fmha"])
    assert not custom_calls(module)
    program = program_from_module(module)
    for seed in (0, 1):
        q, k, v, c, dout = _inputs(seed)
        (out,) = program(q, k, v, c, dout)
        want = _numpy_attention(q, k, v, c, SCORES[name][1])
        # Ours keeps the scores and probabilities in f32 and rounds the output to bf16
        # once: within one bf16 ulp (2^-8 relative) of the float64 result, plus the f32
        # round-off of a 16-term sum, far below it.  Outputs near zero: an ulp of the
        # largest output.
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=2.0**-8, atol=2.0**-8 * scale,
                                   err_msg=f"{name}, seed {seed}")


def test_backward_with_the_score_functions_vjp_matches_jax_vjp():
    """flex_alibi_causal: forward and backward calls, the backward naming alibi's vjp;
    the reference is jax.vjp of JAX's XLA attention with the same score function."""
    text = (DUMPS / "flex_alibi_causal.hlo").read_text()
    assert len(custom_calls(convert_then(text, []))) == 2
    module = convert_then(text, ["cudnn-fmha"])
    assert not custom_calls(module)
    case = cases()["flex_alibi_causal"]
    inputs = random_inputs(case)
    got = program_from_module(module)(*inputs)
    want = [np.asarray(w) for w in jax.tree.leaves(jax.jit(case.reference)(*inputs))]
    assert [g.shape for g in got] == [w.shape for w in want]
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = g.astype(np.float64), w.astype(np.float64)
        # Both round to bf16 once per output, but JAX's XLA path also rounds P to bf16
        # before its second matmuls: up to 4 bf16 ulps (2^-8) of the largest magnitude.
        assert np.max(np.abs(g - w)) <= 4 * 2.0**-8 * np.max(np.abs(w)), f"output {i}"
