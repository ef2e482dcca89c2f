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
