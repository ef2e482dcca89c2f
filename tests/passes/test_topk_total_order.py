"""`__gpu$TopK` as jax 0.12's XLA writes it for an H100 (deviceless): no comparator, a
typed-FFI backend_config `{is_stable = true, order = "TOTAL"}` instead
(tests/dumps/callbacks/gpu_topk_total_order_jax012.hlo: top_k(f32[32,1024], k=16), cuBLAS
GEMMs off).  Oracle: jax.lax.top_k on CPU, bit for bit, values and indices — with ties,
NaN and -NaN, +0.0 and -0.0, and infinities in the rows."""

from __future__ import annotations

import pathlib

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.runtime.convert import convert_text
from passes.lib.errors import PassError
from tests.helpers import convert_program

DUMP = pathlib.Path(__file__).resolve().parents[1] / "dumps" / "callbacks" / "gpu_topk_total_order_jax012.hlo"
SPECIALS = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, 1.0, -1.0], np.float32)


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Equal, NaN signs and zero signs included."""
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def _with_specials(rng: np.random.Generator, shape) -> np.ndarray:
    x = rng.integers(-4, 5, size=shape).astype(np.float32) / 2  # many ties
    flat = x.reshape(-1)
    where = rng.choice(flat.size, size=min(flat.size, 3 * len(SPECIALS)), replace=False)
    flat[where] = np.resize(SPECIALS, len(where))
    return x


def test_dump_of_jax012_gpu_topk_matches_lax_top_k():
    program = convert_program(DUMP.read_text())
    rng = np.random.default_rng(0)
    x = _with_specials(rng, (32, 1024))
    x[3, :40] = np.nan  # more NaNs than k in a row: k of them, by index
    x[4, 7:30] = -0.0
    x[4, 30:] = -1.0
    values, indices = program(x)
    want_values, want_indices = jax.lax.top_k(x, 16)
    np.testing.assert_array_equal(indices, np.asarray(want_indices))
    _same_bits(values, np.asarray(want_values))


_GPU_TOPK = """HloModule m, is_scheduled=true
ENTRY %main (x: {t}[{rows},{n}]) -> ({t}[{rows},{k}], s32[{rows},{k}]) {{
  %x = {t}[{rows},{n}]{{1,0}} parameter(0)
  ROOT %topk = ({t}[{rows},{k}]{{1,0}}, s32[{rows},{k}]{{1,0}}) custom-call(%x), custom_call_target="__gpu$TopK", api_version=API_VERSION_TYPED_FFI, backend_config={{{config}}}
}}
"""
_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "s32": np.int32, "u8": np.uint8}


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(_DTYPES)), st.integers(1, 3), st.integers(1, 40), st.data())
def test_total_order_topk_matches_lax_top_k_for_any_type_and_shape(t, rows, n, data):
    k = data.draw(st.integers(1, n))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    x = _with_specials(rng, (rows, n))
    dtype = _DTYPES[t]
    x = (np.abs(np.nan_to_num(x, nan=3.0, posinf=4.0, neginf=-4.0)) * 2 if t == "u8" else
         np.nan_to_num(x, nan=3.0, posinf=4.0, neginf=-4.0) * 2 if t == "s32" else x).astype(dtype)
    text = _GPU_TOPK.format(t=t, rows=rows, n=n, k=k, config='is_stable = true, order = "TOTAL"')
    values, indices = convert_program(text)(x)
    want_values, want_indices = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(indices, np.asarray(want_indices))
    _same_bits(values, np.asarray(want_values))


@pytest.mark.parametrize("config", ['is_stable = false, order = "TOTAL"', 'is_stable = true, order = "PARTIAL"', ""])
def test_other_orders_are_refused_by_name(config):
    with pytest.raises(PassError, match=r"m\.hlo:4:3: error: %topk .*__gpu\$TopK.*the order it sorts by is unknown"):
        convert_text(_GPU_TOPK.format(t="f32", rows=1, n=8, k=2, config=config), "m.hlo")
