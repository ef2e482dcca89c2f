"""cu_threefry2x32 custom-calls, bit for bit against JAX's own Threefry-2x32 on CPU."""

import jax
import numpy as np
import pytest
from jax.extend.random import threefry_2x32

from converter.runtime.convert import convert_text
from tests.helpers import convert_program


def _dump(target: str, shape: str, api: str) -> str:
    return f"""HloModule threefry
ENTRY main {{
  k0 = u32[{shape}] parameter(0)
  k1 = u32[{shape}] parameter(1)
  x0 = u32[{shape}] parameter(2)
  x1 = u32[{shape}] parameter(3)
  ROOT r = (u32[{shape}], u32[{shape}]) custom-call(k0, k1, x0, x1), custom_call_target="{target}"{api}
}}
"""


@pytest.mark.parametrize("target, api", [
    ("cu_threefry2x32_ffi", ", api_version=API_VERSION_TYPED_FFI, backend_config={}"),
    ("cu_threefry2x32", ', backend_config="\\006\\000\\000\\000\\000\\000\\000\\000"'),
    ("hip_threefry2x32_ffi", ", api_version=API_VERSION_TYPED_FFI, backend_config={}"),
])
@pytest.mark.parametrize("shape", ["2,3", "7", ""])
def test_threefry_custom_call_is_bit_exact(target, api, shape):
    dims = tuple(int(d) for d in shape.split(",") if d)
    rng = np.random.default_rng(len(shape))
    key = rng.integers(0, 2**32, size=2, dtype=np.uint64).astype(np.uint32)
    count = rng.integers(0, 2**32, size=(2, *dims), dtype=np.uint64).astype(np.uint32)
    text = _dump(target, shape, api)
    assert "custom_call" not in str(convert_text(text))
    k0, k1 = (np.full(dims, k, np.uint32) for k in key)
    y0, y1 = convert_program(text)(k0, k1, count[0], count[1])
    # JAX's threefry_2x32 hashes a flat count: first half of the words → x0, second → x1.
    want = np.asarray(threefry_2x32(jax.numpy.asarray(key), jax.numpy.asarray(count.reshape(-1))))
    n = count[0].size
    np.testing.assert_array_equal(y0.reshape(-1), want[:n])
    np.testing.assert_array_equal(y1.reshape(-1), want[n:])
