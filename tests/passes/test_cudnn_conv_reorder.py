"""cuDNN's int8x32 filter/bias reorder calls (`__cudnn$convReorderFilter[AndBias]`) against a
NumPy oracle written from XLA's own description of the permutation
(xla/service/gpu/cudnn_support_utils.h comments and cudnn_support_utils_test.cc): the element
at filter index (o, c, h, w, z) lands at position (c, h, w, o // 8, o % 2, z // 4, (o // 2) % 4,
z % 4) of an [I/32, H, W, O/8, 2, 8, 4, 4] buffer ("O(4) precedes O(2), I(4) follows I(8)"),
read back as [O, I/32, H, W, 32]; the bias element o lands at (o // 32, (o // 4) % 2, o // 8 % 4,
o % 4) of [O/32, 2, 4, 4]."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.common.errors import ConverterError
from tests.helpers import convert_program


def filter_oracle(w: np.ndarray) -> np.ndarray:
    """A scatter of each element to the position XLA's comments give (independent of the
    pass's reshape/transpose gather)."""
    o_n, c_n, h_n, w_n, _ = w.shape
    dest_shape = (c_n, h_n, w_n, o_n // 8, 2, 8, 4, 4)
    out = np.empty(w.size, w.dtype)
    o, c, h, x, z = np.indices(w.shape)
    flat = np.ravel_multi_index((c, h, x, o // 8, o % 2, z // 4, (o // 2) % 4, z % 4), dest_shape)
    out[flat.ravel()] = w.ravel()
    return out.reshape(w.shape)


def bias_oracle(b: np.ndarray) -> np.ndarray:
    o = np.arange(b.size)
    # [O/32, 4, 2, 4] indices (o//32, (o//8)%4, (o//4)%2, o%4) transposed to (0, 2, 1, 3).
    flat = np.ravel_multi_index((o // 32, (o // 4) % 2, (o // 8) % 4, o % 4), (b.size // 32, 2, 4, 4))
    out = np.empty_like(b)
    out[flat] = b
    return out


def dims(shape) -> str:
    return ",".join(map(str, shape))


@settings(max_examples=6, deadline=None)
@given(o32=st.integers(1, 2), ic=st.integers(1, 2), h=st.integers(1, 3), w=st.integers(1, 3))
def test_reorder_filter_matches_xlas_documented_permutation(o32, ic, h, w):
    shape = (32 * o32, ic, h, w, 32)
    text = f"""HloModule reorder
ENTRY main {{
  w = s8[{dims(shape)}]{{4,3,2,1,0}} parameter(0)
  ROOT r = s8[{dims(shape)}]{{4,3,2,1,0}} custom-call(w), custom_call_target="__cudnn$convReorderFilter"
}}
"""
    filt = np.random.default_rng(o32 * 100 + ic * 10 + h + w).integers(-128, 128, shape).astype(np.int8)
    (got,) = convert_program(text)(filt)
    # A permutation of integers: exact.
    np.testing.assert_array_equal(np.asarray(got), filter_oracle(filt))


def test_reorder_filter_and_bias_matches_xlas_documented_permutation():
    shape = (64, 1, 3, 3, 32)
    text = f"""HloModule reorder
ENTRY main {{
  w = s8[{dims(shape)}]{{4,3,2,1,0}} parameter(0)
  b = f32[64]{{0}} parameter(1)
  c = (s8[{dims(shape)}]{{4,3,2,1,0}}, f32[64]{{0}}) custom-call(w, b), custom_call_target="__cudnn$convReorderFilterAndBias"
  r = s8[{dims(shape)}]{{4,3,2,1,0}} get-tuple-element(c), index=0
  s = f32[64]{{0}} get-tuple-element(c), index=1
  ROOT t = (s8[{dims(shape)}]{{4,3,2,1,0}}, f32[64]{{0}}) tuple(r, s)
}}
"""
    rng = np.random.default_rng(5)
    filt = rng.integers(-128, 128, shape).astype(np.int8)
    bias = rng.standard_normal(64).astype(np.float32)
    got_w, got_b = convert_program(text)(filt, bias)
    np.testing.assert_array_equal(np.asarray(got_w), filter_oracle(filt))
    np.testing.assert_array_equal(np.asarray(got_b), bias_oracle(bias))
    # Not the identity (the oracle moves elements).
    assert not np.array_equal(filter_oracle(filt), filt) and not np.array_equal(bias_oracle(bias), bias)


@pytest.mark.parametrize("shape, layout, message", [
    ((32, 1, 3, 3, 16), "4,3,2,1,0", "filter shape"),
    ((32, 1, 3, 3, 32), "3,4,2,1,0", "layout"),
])
def test_unsupported_reorders_are_located_errors(shape, layout, message):
    text = f"""HloModule reorder
ENTRY main {{
  w = s8[{dims(shape)}]{{{layout}}} parameter(0)
  ROOT r = s8[{dims(shape)}]{{4,3,2,1,0}} custom-call(w), custom_call_target="__cudnn$convReorderFilter", operand_layout_constraints={{s8[{dims(shape)}]{{{layout}}}}}
}}
"""
    with pytest.raises(ConverterError, match=r"<test>:4:\d+: .*convReorderFilter.*" + message):
        convert_program(text)
