"""TopK custom-calls as XLA's CPU compiler writes them (and __gpu$TopK as its GPU compiler
does), against NumPy's top-k with ties kept in index order and NaN counted as the largest
value."""

import pathlib

import jax
import numpy as np
import pytest

from converter.runtime.convert import convert_text
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


GPU_DUMPS = pathlib.Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("name", ["gpu_topk_f32_4x1024_k8", "gpu_topk_bf16_2048_k16"])
def test_gpu_topk_custom_call_from_a_real_dump_matches_numpy_and_jax(name):
    """`__gpu$TopK` as XLA's GPU compiler writes it (tests/passes/data/make_gpu_topk.py:
    top_k(x, k), values doubled), against NumPy's stable top-k and jax.lax.top_k on CPU.
    Inputs are small integers, so ties are everywhere: indices must follow lax.top_k's
    lower-index-first order."""
    dump = (GPU_DUMPS / f"{name}.hlo").read_text()
    assert "__gpu$TopK" in dump
    program = convert_program(dump)
    assert "custom_call" not in str(program.module)
    x = program.random_inputs(0)[0]
    x = np.random.default_rng(1).integers(-20, 20, size=x.shape).astype(x.dtype)
    values, indices = program(x)
    k = values.shape[-1]
    want_values, want_indices = numpy_top_k(x.astype(np.float32), k)
    np.testing.assert_array_equal(indices, want_indices)
    # Doubling small integers is exact in bf16 and f32.
    np.testing.assert_array_equal(values.astype(np.float32), 2 * want_values)
    jax_values, jax_indices = jax.lax.top_k(x, k)
    np.testing.assert_array_equal(indices, np.asarray(jax_indices))
    np.testing.assert_array_equal(values, 2 * np.asarray(jax_values))
