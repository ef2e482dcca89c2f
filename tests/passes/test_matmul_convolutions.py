"""matmul-convolutions: one-element-window convolutions become dot_general, others stay.
The values are checked against XLA and a NumPy convolution in
tests/importer/test_rules_linalg.py (its pointwise cases run through this pass); here, that
the rewrite happens where it should and only there, on the TPU sample's matmuls too."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from converter.runtime.convert import convert_file
from tests.helpers import convert_program, run_xla

ROOT = pathlib.Path(__file__).resolve().parents[2]

MODULE = """HloModule convs
ENTRY main {
  x = f32[6,4,5] parameter(0)
  k = f32[3,5,1] parameter(1)
  k3 = f32[3,5,2] parameter(2)
  pointwise = f32[6,4,3] convolution(x, k), window={size=1}, dim_labels=0bf_oi0->0bf
  strided = f32[3,4,3] convolution(x, k), window={size=1 stride=2}, dim_labels=0bf_oi0->0bf
  wide = f32[5,4,3] convolution(x, k3), window={size=2}, dim_labels=0bf_oi0->0bf
  ROOT t = (f32[6,4,3], f32[3,4,3], f32[5,4,3]) tuple(pointwise, strided, wide)
}
"""


def test_only_one_element_windows_become_dots():
    program = convert_program(MODULE)
    text = str(program.module)
    assert text.count("stablehlo.dot_general") == 1
    assert text.count("stablehlo.convolution") == 2  # the strided and the wide window stay
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in [(6, 4, 5), (3, 5, 1), (3, 5, 2)]]
    for got, want in zip(program(*inputs), run_xla(MODULE, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # sums of 5-10 f32 products


def test_tpu_sample_matmuls_are_dots():
    text = str(convert_file(str(ROOT / "samples" / "tpu_spmd_mlp_async_collective_fusion.hlo")))
    assert "stablehlo.convolution" not in text
    assert text.count("stablehlo.dot_general") == 3


GATED_MLP = """HloModule gated
ENTRY main {
  x = f32[4,6,8] parameter(0)
  wg = f32[5,8,1] parameter(1)
  wu = f32[5,8,1] parameter(2)
  wd = f32[8,5,1] parameter(3)
  g = f32[4,6,5] convolution(x, wg), window={size=1}, dim_labels=0bf_oi0->0bf
  u = f32[4,6,5] convolution(x, wu), window={size=1}, dim_labels=0bf_oi0->0bf
  m = f32[4,6,5] multiply(g, u)
  s = f32[4,6,5] logistic(m)
  h = f32[4,6,5] multiply(m, s)
  ROOT d = f32[4,6,8] convolution(h, wd), window={size=1}, dim_labels=0bf_oi0->0bf
}
"""


def test_elementwise_chain_between_matmuls_runs_in_their_2d_shape():
    program = convert_program(GATED_MLP)
    text = str(program.module)
    assert "stablehlo.logistic %" in text and "tensor<24x5xf32>" in text.split("stablehlo.logistic")[1].split("\n")[0]
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in [(4, 6, 8), (5, 8, 1), (5, 8, 1), (8, 5, 1)]]
    (got,), (want,) = program(*inputs), run_xla(GATED_MLP, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # two chained f32 matmuls of depth 8 and 5


def _generated_pointwise_cases(count: int, seed: int) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """One-element-window convolutions in generated layouts: every operand and output
    labelled in a random order, 0 to 2 spatial dimensions, random sizes."""
    rng = np.random.default_rng(seed)

    def order(labels: str) -> str:
        return "".join(rng.permutation(list(labels)))

    cases = []
    for _ in range(count):
        spatial = "01"[: rng.integers(0, 3)]
        dim_labels = f"{order('bf' + spatial)}_{order('oi' + spatial)}->{order('bf' + spatial)}"
        lhs = (int(rng.integers(1, 4)), int(rng.integers(1, 6)), *[int(rng.integers(1, 5)) for _ in spatial])
        rhs = (int(rng.integers(1, 6)), lhs[1], *[1] * len(spatial))
        cases.append((dim_labels, lhs, rhs))
    return cases


@pytest.mark.parametrize("dim_labels, lhs_logical, rhs_logical", _generated_pointwise_cases(24, seed=7))
def test_generated_pointwise_layouts_match_numpy_and_become_dots(dim_labels, lhs_logical, rhs_logical):
    """The rewrite over the class of pointwise convolutions in any labelling, against the
    convolution's definition in NumPy (float64), not against the converter."""
    from tests.importer.test_rules_linalg import _conv_case, _dims, _numpy_convolution

    lhs_shape, rhs_shape, attrs, conv = _conv_case(dim_labels, lhs_logical, rhs_logical)
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal(lhs_shape).astype(np.float32)
    rhs = rng.standard_normal(rhs_shape).astype(np.float32)
    want = _numpy_convolution(lhs, rhs, *conv)
    text = f"""HloModule pointwise
ENTRY main {{
  l = f32[{_dims(lhs_shape)}] parameter(0)
  k = f32[{_dims(rhs_shape)}] parameter(1)
  ROOT c = f32[{_dims(want.shape)}] convolution(l, k){attrs}
}}
"""
    program = convert_program(text)
    assert "stablehlo.convolution" not in str(program.module)
    (got,) = program(lhs, rhs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # sums of at most 5 f32 products
