"""Batch-norm import rules (rules/batchnorm.py): batch-norm-training, -inference and
-grad, checked against XLA (which expands them with its BatchNormExpander) and against
the textbook formulas in NumPy (float64).

Tolerances: against XLA, exact: the rules follow the expander's formulas op for op
(and the rewrites XLA's simplifier applies to them), so the compiled code rounds
identically; against NumPy, the formulas differ in how they round (XLA takes E[x²] − E[x]²), so
the bound is a few ulps of the type times the conditioning of that difference (inputs
have mean 0.5 and unit deviation: a factor of about 2)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.hlo import dtypes
from tests.helpers import assert_close
from tests.importer.hlo_snippets import differential_by_output

# (rtol, atol) against the float64 NumPy formulas, per element type.
NUMPY_TOLERANCE = {"f32": (1e-4, 1e-4), "f64": (1e-10, 1e-10), "f16": (2e-2, 2e-2), "bf16": (1e-1, 1e-1)}


def _numpy_batch_norm(x, scale, offset, mean, var, grad, feature_index, epsilon):
    axes = tuple(i for i in range(x.ndim) if i != feature_index)
    shape = [1] * x.ndim
    shape[feature_index] = -1

    def f(v):
        return v.reshape(shape)
    batch_mean = x.mean(axes)
    batch_var = x.var(axes)
    training = (x - f(batch_mean)) / np.sqrt(f(batch_var) + epsilon) * f(scale) + f(offset)
    inference = (x - f(mean)) / np.sqrt(f(var) + epsilon) * f(scale) + f(offset)
    n = x.size // x.shape[feature_index]
    centered = x - f(mean)
    rs = 1 / np.sqrt(f(var) + epsilon)
    grad_offset = grad.sum(axes)
    grad_scale = (grad * centered).sum(axes) * rs.reshape(-1)
    grad_x = f(scale) * rs * (grad - f(grad_offset) / n - centered * f((grad * centered).sum(axes)) / n
                              / (f(var) + epsilon))
    return [training, batch_mean, batch_var, inference, grad_x, grad_scale, grad_offset]


@pytest.mark.parametrize("element_type", ["f32", "bf16", "f16", "f64"])
@pytest.mark.parametrize("shape,feature_index", [((4, 3, 5, 2), 1), ((6, 4), 0), ((2, 3, 3, 4), 3)])
def test_batch_norm_training_inference_and_grad(element_type, shape, feature_index):
    t = element_type
    dtype = dtypes.numpy_dtype(t)
    features = shape[feature_index]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32).astype(dtype)
    grad = rng.standard_normal(shape).astype(np.float32).astype(dtype)
    scale = rng.uniform(0.5, 2, features).astype(np.float32).astype(dtype)
    offset = rng.standard_normal(features).astype(np.float32).astype(dtype)
    mean = (rng.standard_normal(features) * 0.2 + 0.5).astype(np.float32).astype(dtype)
    var = rng.uniform(0.5, 1.5, features).astype(np.float32).astype(dtype)
    dims = ",".join(map(str, shape))
    a, f = f"{t}[{dims}]", f"{t}[{features}]"
    hlo = f"""HloModule batch_norm
ENTRY main {{
  x = {a} parameter(0)
  scale = {f} parameter(1)
  offset = {f} parameter(2)
  mean = {f} parameter(3)
  var = {f} parameter(4)
  dy = {a} parameter(5)
  tr = ({a}, {f}, {f}) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index={feature_index}
  y = {a} get-tuple-element(tr), index=0
  m = {f} get-tuple-element(tr), index=1
  v = {f} get-tuple-element(tr), index=2
  infer = {a} batch-norm-inference(x, scale, offset, mean, var), epsilon=0.001, feature_index={feature_index}
  gr = ({a}, {f}, {f}) batch-norm-grad(x, scale, mean, var, dy), epsilon=0.001, feature_index={feature_index}
  gx = {a} get-tuple-element(gr), index=0
  gs = {f} get-tuple-element(gr), index=1
  go = {f} get-tuple-element(gr), index=2
  ROOT r = ({a}, {f}, {f}, {a}, {a}, {f}, {f}) tuple(y, m, v, infer, gx, gs, go)
}}
"""
    labels = ["normalized", "batch mean", "batch variance", "inference", "grad x", "grad scale", "grad offset"]
    outs = differential_by_output(hlo, [x, scale, offset, mean, var, grad], labels, [True] * len(labels))
    wide = [v.astype(np.float64) for v in (x, scale, offset, mean, var, grad)]
    # XLA stores epsilon as f32.
    expected = _numpy_batch_norm(*wide, feature_index, float(np.float32(0.001)))
    rtol, atol = NUMPY_TOLERANCE[t]
    for out, want, label in zip(outs, expected, labels):
        assert_close(out.astype(np.float64), want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max())),
                     what=label)


def test_batch_norm_follows_xla_bit_for_bit_in_bf16():
    """In bf16 the precision matters: XLA computes a bf16 batch norm in f32 and rounds
    only its results (its CPU pipeline normalizes the op to f32 before expanding it);
    rounding every step to bf16 instead is off by several ulps.  Exact."""
    rng = np.random.default_rng(1)
    shape = (8, 16, 4)
    x = (rng.standard_normal(shape) * 2 + 3).astype(ml_dtypes.bfloat16)
    scale = rng.uniform(0.5, 2, 16).astype(ml_dtypes.bfloat16)
    offset = rng.standard_normal(16).astype(ml_dtypes.bfloat16)
    mean = (rng.standard_normal(16) + 3).astype(ml_dtypes.bfloat16)
    var = rng.uniform(2, 6, 16).astype(ml_dtypes.bfloat16)
    hlo = """HloModule batch_norm_bf16
ENTRY main {
  x = bf16[8,16,4] parameter(0)
  scale = bf16[16] parameter(1)
  offset = bf16[16] parameter(2)
  mean = bf16[16] parameter(3)
  var = bf16[16] parameter(4)
  tr = (bf16[8,16,4], bf16[16], bf16[16]) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=1
  y = bf16[8,16,4] get-tuple-element(tr), index=0
  v = bf16[16] get-tuple-element(tr), index=2
  infer = bf16[8,16,4] batch-norm-inference(x, scale, offset, mean, var), epsilon=0.001, feature_index=1
  ROOT r = (bf16[8,16,4], bf16[16], bf16[8,16,4]) tuple(y, v, infer)
}
"""
    differential_by_output(hlo, [x, scale, offset, mean, var], ["normalized", "variance", "inference"],
                           [True, True, True])


_CANCELLING = """HloModule bn_cancelling
ENTRY e {
  x = {t}[4,{c},3,3] parameter(0)
  s = {t}[{c}] parameter(1)
  o = {t}[{c}] parameter(2)
  dy = {t}[4,{c},3,3] parameter(3)
  t = ({t}[4,{c},3,3], {t}[{c}], {t}[{c}]) batch-norm-training(x, s, o), epsilon={eps}, feature_index=1
  y = {t}[4,{c},3,3] get-tuple-element(t), index=0
  m = {t}[{c}] get-tuple-element(t), index=1
  v = {t}[{c}] get-tuple-element(t), index=2
  g = ({t}[4,{c},3,3], {t}[{c}], {t}[{c}]) batch-norm-grad(x, s, m, v, dy), epsilon={eps}, feature_index=1
  gx = {t}[4,{c},3,3] get-tuple-element(g), index=0
  gs = {t}[{c}] get-tuple-element(g), index=1
  go = {t}[{c}] get-tuple-element(g), index=2
  ROOT r = ({t}[4,{c},3,3], {t}[{c}], {t}[{c}], {t}[4,{c},3,3], {t}[{c}], {t}[{c}]) tuple(y, m, v, gx, gs, go)
}
"""


# grad_operand's ulps from XLA: 0 (bit for bit) but with ε = 0, where XLA's simplifier
# folds var + 0 in its own expansion and then orders that product differently: found
# up to 10 ulps at 11 of 1728 elements, all at features whose variance is ~1e-7 (values ~1e3).
@pytest.mark.parametrize("element_type,seed,epsilon,grad_ulps", [("f32", 0, "1e-05", 0), ("f32", 1, "0", 16),
                                                                  ("f16", 2, "0.001", 0)])
def test_batch_norm_cancelling_variance_matches_xla_including_nan_positions(element_type, seed, epsilon, grad_ulps):
    """Issue 28 item 5: a training step's batch-norm results with NaN/Inf at a few features
    on one side only.  E[x²] − E[x]² cancels when a feature's values sit far from 0 with a
    tiny (or no) spread, and rounds below zero at some features; jaxlib 0.12's XLA clamps
    that variance at 0, jaxlib 0.10.2's did not (rsqrt(var + ε) is NaN there).  The rule
    clamps.  Compared with XLA: every feature where XLA's variance is not negative bit
    for bit (all of them with jaxlib >= 0.12), and where it is (jaxlib 0.10.2), the rule's
    variance is 0 and its results finite.  Generated features: offsets ~100, spreads 0 to 1e-3."""
    import jaxlib

    from tests.helpers import run_ours, run_xla

    channels = 48
    dtype = dtypes.numpy_dtype(element_type)
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(channels) * 100
    spread = np.where(rng.random(channels) < 0.25, 0, rng.random(channels) * 1e-3)
    shape = (4, channels, 3, 3)
    x = (base[None, :, None, None] + spread[None, :, None, None] * rng.standard_normal(shape)).astype(dtype)
    scale, offset = rng.standard_normal(channels).astype(dtype), rng.standard_normal(channels).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    hlo = _CANCELLING.replace("{t}", element_type).replace("{c}", str(channels)).replace("{eps}", epsilon)
    ours, xla = run_ours(hlo, [x, scale, offset, dy]), run_xla(hlo, [x, scale, offset, dy])
    x64 = x.astype(np.float64)
    cancels = (x64 ** 2).mean((0, 2, 3)) - x64.mean((0, 2, 3)) ** 2 < 10 * np.finfo(dtype).eps * base ** 2
    assert cancels.sum() >= 5, "the inputs must make some features' variance cancel"
    negative = xla[2] < 0  # features where this XLA does not clamp
    if tuple(int(v) for v in jaxlib.__version__.split(".")[:2]) >= (0, 12):
        assert not negative.any(), "jaxlib >= 0.12's XLA clamps the variance at 0"
    assert (ours[2][negative] == 0).all()
    names = ["output", "mean", "variance", "grad_operand", "grad_scale", "grad_offset"]
    keep = ~negative
    for name, got, want in zip(names, ours, xla):
        got, want = (got[:, keep], want[:, keep]) if got.ndim == 4 else (got[keep], want[keep])
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want), err_msg=f"{name}: non-finite positions")
        if name == "grad_operand" and grad_ulps:
            finite = np.isfinite(want)
            np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=grad_ulps)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
