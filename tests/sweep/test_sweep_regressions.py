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
