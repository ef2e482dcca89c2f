"""XLA's cuDNN fused attention custom-calls (`__cudnn$fmha*`), as jax 0.10.2 writes them for
`jax.nn.dot_product_attention(implementation="cudnn")`, forward and backward.

The HLO is produced on this CPU by exporting the cuDNN path for CUDA (jax.export) and
converting that module to HLO text with jaxlib; the rewrite's results are compared with
JAX's own XLA implementation of the same attention and its jax.vjp."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import jaxlib._jax as jax_ext
import numpy as np
import pytest
from jax import export
from jax._src.cudnn import fused_attention_stablehlo as fa

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from passes import PassOptions
from tests.helpers import assert_close

TARGETS = ["__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaScaleBiasSoftmax",
           "__cudnn$fmhaScaleBiasSoftmaxBackward"]
SCALE = 0.3
FLEX_API = "score_mod" in inspect.signature(fa._dot_product_attention_fwd_impl).parameters


def cudnn_hlo(mask, bias, window, layout, shapes) -> str:
    """HLO text of fwd + vjp through jax's cuDNN attention lowering (cotangent = the output)."""
    def f(q, k, v, b, ql, kl):
        nu = jnp.zeros(0, q.dtype)

        def fwd(q, k, v, b):
            head = (q, k, v, b if bias else nu, ql, kl, nu, nu, nu, nu)
            if FLEX_API:  # jax 0.12: score_mod_args after the page tables, score_mod before the version
                return fa._dot_product_attention(*head, (), SCALE, 42, 0.0, (bias, bias), mask, layout.value,
                                                 window, None, 91300, False)
            return fa._dot_product_attention(*head, SCALE, 42, 0.0, (bias, bias), mask, layout.value, window,
                                             91000, False)
        out, vjp = jax.vjp(fwd, q, k, v, b)
        return out, vjp(out)

    specs = [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in shapes[:4]] + \
        [jax.ShapeDtypeStruct(shapes[4], jnp.int32)] * 2
    exp = export.export(jax.jit(f, keep_unused=True), platforms=["cuda"],
                        disabled_checks=[export.DisabledSafetyCheck.custom_call(n) for n in TARGETS])(*specs)
    computation = jax_ext.mlir.mlir_module_to_xla_computation(exp.mlir_module(), use_tuple_args=False,
                                                              return_tuple=False)
    return computation.as_hlo_text()


def reference(q, k, v, b, ql, kl, mask, window, layout):
    """jax.nn.dot_product_attention (implementation='xla') and its vjp, same cotangent."""
    to_btnh = (lambda x: x.transpose(0, 2, 1, 3)) if layout == fa.AttentionLayout.BNTH else (lambda x: x)
    padded = mask in (fa.MaskType.PADDING, fa.MaskType.PADDING_CAUSAL)
    causal = mask in (fa.MaskType.CAUSAL, fa.MaskType.PADDING_CAUSAL)

    t = q.shape[1] if layout == fa.AttentionLayout.BTNH else q.shape[2]
    # cuDNN (and the rewrite) write 0 to padded query rows; JAX's XLA path leaves a mean of
    # V there.  Zero them in the reference so the outputs, and the cotangent (= the output),
    # mean the same thing.
    rows = (np.arange(t)[None, :] < np.asarray(ql)[:, None]) if padded else np.ones((q.shape[0], t), bool)
    rows = jnp.asarray(rows, q.dtype)[:, :, None, None]

    def f(q, k, v, b):
        out = jax.nn.dot_product_attention(
            to_btnh(q), to_btnh(k), to_btnh(v), bias=b if b.size else None, scale=SCALE, is_causal=causal,
            query_seq_lengths=ql if padded else None, key_value_seq_lengths=kl if padded else None,
            local_window_size=(window - 1, 0) if window else None, implementation="xla")
        return to_btnh(out * rows)

    out, vjp = jax.vjp(f, q, k, v, b)
    return [out, *vjp(out)]


CASES = {
    "causal": (fa.MaskType.CAUSAL, False, None, fa.AttentionLayout.BTNH, 4, 4),
    "no_mask_bias": (fa.MaskType.NO_MASK, True, None, fa.AttentionLayout.BTNH, 4, 4),
    "padding_causal_gqa": (fa.MaskType.PADDING_CAUSAL, False, None, fa.AttentionLayout.BTNH, 4, 2),
    "padding": (fa.MaskType.PADDING, False, None, fa.AttentionLayout.BTNH, 2, 2),
    "window": (fa.MaskType.CAUSAL, False, 5, fa.AttentionLayout.BTNH, 2, 1),
    "bnth_causal": (fa.MaskType.CAUSAL, False, None, fa.AttentionLayout.BNTH, 4, 2),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("block", [4])  # the default block size: test_cudnn_dumps.py
def test_cudnn_fmha_forward_and_backward_match_jax(name, block):
    mask, bias, window, layout, heads, kv_heads = CASES[name]
    b, t, d = 2, 12, 8
    if layout == fa.AttentionLayout.BTNH:
        qs, ks = (b, t, heads, d), (b, t, kv_heads, d)
    else:
        qs, ks = (b, heads, t, d), (b, kv_heads, t, d)
    bs = (1, heads, t, t) if bias else (0,)
    text = cudnn_hlo(mask, bias, window, layout, [qs, ks, ks, bs, (b,)])
    assert "__cudnn$fmha" in text
    module = convert_text(text, "cudnn.hlo", pass_options=PassOptions(attention_block=block))
    assert "custom_call" not in str(module)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s).astype(jnp.bfloat16) for s in (qs, ks, ks))
    bb = rng.standard_normal(bs).astype(jnp.bfloat16)
    ql = np.array([t, 7], np.int32)
    kl = np.array([t, 9], np.int32)
    ours = program_from_module(module)(q, k, v, bb, ql, kl)
    want = reference(q, k, v, bb, ql, kl, mask, window, layout)
    for i, (got, w) in enumerate(zip(ours, want)):
        # bf16 in and out, f32 inside both; JAX's XLA path rounds P (and dP) to bf16 before
        # the second matmul, the rewrite does not: a few bf16 ulps on outputs of size ~1.
        assert_close(got.astype(np.float32), np.asarray(w).astype(np.float32), rtol=5e-2, atol=5e-2,
                     what=f"{name} output {i}")
