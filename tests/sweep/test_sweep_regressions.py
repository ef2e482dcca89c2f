"""Regressions found by the breadth sweep (tests/sweep/generate.py): each with the dump that
exposed it (tests/dumps/sweep/) and an independent oracle."""

from __future__ import annotations

import pathlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import assert_all_close, run_ours, run_xla

DUMPS = pathlib.Path(__file__).resolve().parents[1] / "dumps" / "sweep"


def test_tpu_rng_bit_generator_without_state_result_matches_jax():
    """TPU v6e, jax 0.12: `u32[16] rng-bit-generator(u64[2])` with the new state dropped (not a
    tuple) from jax.random's rbg keys. Oracle: JAX's own CPU result for the program
    (tests/sweep/generate.py random_rbg); both use the platform-default bit generator, which
    XLA's CPU backend and jaxlib's StableHLO compile both implement as Philox."""
    import jax

    key_data = np.array([1, 2, 3, 4], np.uint32)
    key = jax.random.wrap_key_data(key_data, impl="rbg")
    expected = [np.asarray(jax.random.uniform(key, (8, 8))),
                np.asarray(jax.random.bits(jax.random.fold_in(key, 3), (16,), jax.numpy.uint32))]
    text = (DUMPS / "tpu_v6e_jax012_random_rbg.hlo").read_text()
    assert_all_close(run_ours(text, [key_data]), expected)


@settings(max_examples=6, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       algorithm=st.sampled_from(["rng_philox", "rng_three_fry", "rng_default"]),
       seed=st.integers(0, 2**32 - 1))
def test_rng_bit_generator_output_only_matches_xla(shape, algorithm, seed):
    """The output-only form of rng-bit-generator for any shape and algorithm: XLA on CPU runs
    the same module (it accepts the non-tuple form) and is the oracle."""
    state_len = 3 if algorithm == "rng_philox" else 2
    dims = ",".join(map(str, shape))
    layout = ",".join(map(str, reversed(range(len(shape)))))
    text = f"""HloModule rbg_output_only

ENTRY %main (state: u64[{state_len}]) -> u32[{dims}] {{
  %state = u64[{state_len}]{{0}} parameter(0)
  ROOT %bits = u32[{dims}]{{{layout}}} rng-bit-generator(%state), algorithm={algorithm}
}}
"""
    state = np.random.default_rng(seed).integers(0, 2**63, state_len, dtype=np.uint64)
    assert_all_close(run_ours(text, [state]), run_xla(text, [state]))


def test_tpu_spmd_bitcast_of_padded_tiles_matches_numpy():
    """TPU v6e, jax 0.12, 2x4 mesh: with_sharding_constraint puts 7 columns on the 2 devices
    of axis "a"; the partitioner all-gathers f32[2,4,7]{T(4,128)} and bitcasts it to
    f32[7,7]{T(8,128)} (56 elements to 49: both one 8x128 tile). Oracle: NumPy in float64
    of the program (tests/sweep/generate.py named_sharding_uneven), dumped at "highest"
    matmul precision, so f32 rounding alone separates them (1e-5 relative on sums of 12
    products of tanh values, 6-term dots inside)."""
    from converter.runtime.program import load

    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 6)).astype(np.float32)
    w = rng.standard_normal((6, 8)).astype(np.float32)
    # device i of the mesh (a, b) = (i // 4, i % 4): x split by rows over "b", w by columns over "a"
    xs = np.stack([x[3 * (i % 4): 3 * (i % 4) + 3] for i in range(8)])
    ws = np.stack([w[:, 4 * (i // 4): 4 * (i // 4) + 4] for i in range(8)])
    y = np.tanh(x.astype(np.float64) @ w.astype(np.float64))[:, :7]
    gram, running = y.T @ y, np.cumsum(x.astype(np.float64), axis=0)
    got = load(str(DUMPS / "tpu_v6e_jax012_named_sharding_uneven.hlo"))(xs, ws)
    assert len(got) == 2
    for i in range(8):
        np.testing.assert_allclose(got[0][i], gram, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1][i], running[3 * (i % 4): 3 * (i % 4) + 3], rtol=1e-5, atol=1e-5)
