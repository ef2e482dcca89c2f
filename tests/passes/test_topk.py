"""TopK custom-calls as XLA's CPU compiler writes them, against NumPy's top-k with ties
kept in index order and NaN counted as the largest value."""

import jax
import numpy as np
import pytest

from converter.api import convert_text
from tests.helpers import assert_close, convert_program


def numpy_top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    # Stable descending order with NaN first: sort keys (not-NaN, -x) ascending.
    order = np.lexsort((-np.where(np.isnan(x), 0, x), ~np.isnan(x)), axis=-1) if x.dtype.kind == "f" \
        else np.argsort(-x.astype(np.int64), axis=-1, kind="stable")
    idx = order[..., :k].astype(np.int32)
    return np.take_along_axis(x, idx, axis=-1), idx


@pytest.mark.parametrize("dtype, shape, k", [(np.float32, (4, 10), 3), (np.float32, (2, 3, 17), 5),
                                             (np.int32, (12,), 4), (np.float32, (6,), 6)])
def test_topk_custom_call_matches_numpy(dtype, shape, k):
    rng = np.random.default_rng(0)
    x = (rng.integers(-3, 4, size=shape) if dtype == np.int32 else rng.integers(-3, 4, size=shape) / 2).astype(dtype)
    if dtype == np.float32:
        x.reshape(-1)[1] = np.nan  # NaN is the largest in the comparator's total order
    dump = jax.jit(lambda a: jax.lax.top_k(a, k)).lower(x).compile().as_text()
    text = str(convert_text(dump))
    assert "custom_call" not in text and "func.call" not in text
    values, indices = convert_program(dump)(x)
    want_values, want_indices = numpy_top_k(x, k)
    np.testing.assert_array_equal(indices, want_indices)  # ties (there are many) by index
    assert_close(values, want_values)
