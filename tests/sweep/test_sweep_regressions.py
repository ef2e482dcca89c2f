"""Regressions found by the breadth sweep (tests/sweep/generate.py): each with the dump that
exposed it (tests/dumps/sweep/) and an independent oracle."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
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


def test_xla_oracle_keeps_listed_mesh_devices_matches_numpy():
    """CPU, jax 0.10.2, 2x4 mesh: the sort along a dimension sharded over "b" and the rfft
    along one over "a" all-gather with `replica_groups=mesh['axis_0'=4,'axis_1'=2],
    device_ids=([2,4]T(1,0)) {...}`.  XLA's importer drops the device ids from the sdy.mesh
    it writes, so `check --against-xla` ran other groups and called the (right) conversion
    wrong.  Oracle: NumPy on the whole arrays (tests/sweep/generate.py
    named_sharding_conv_sort_fft); the conversion and XLA must both match it."""
    from converter.runtime.program import load
    from converter.runtime.xla_oracle import run_dump_with_xla

    path = DUMPS / "cpu_jax010_named_sharding_conv_sort_fft.hlo"
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6, 6, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    s = rng.standard_normal((8, 16)).astype(np.float32)
    # device d = (a, b) = (d // 4, d % 4): x's batch over "a" and channels over "b", w's
    # output channels over "b", s's rows over "b" and columns over "a"
    xs = np.stack([x[2 * (d // 4): 2 * (d // 4) + 2, ..., 2 * (d % 4): 2 * (d % 4) + 2] for d in range(8)])
    ws = np.stack([w[..., 2 * (d % 4): 2 * (d % 4) + 2] for d in range(8)])
    ss = np.stack([s[2 * (d % 4): 2 * (d % 4) + 2, 8 * (d // 4): 8 * (d // 4) + 8] for d in range(8)])
    ordered = np.sort(s, axis=0)
    spectrum = np.fft.rfft(s.astype(np.float64), axis=1)
    sorted_shards = np.stack([ordered[2 * (d % 4): 2 * (d % 4) + 2, 8 * (d // 4): 8 * (d // 4) + 8] for d in range(8)])
    spectrum_shards = np.stack([spectrum[2 * (d % 4): 2 * (d % 4) + 2] for d in range(8)])
    for got in (load(str(path))(xs, ws, ss), run_dump_with_xla(path.read_text(), [xs, ws, ss]).outputs):
        np.testing.assert_array_equal(got[1], sorted_shards)
        np.testing.assert_array_equal(got[2], np.stack([np.argmax(s, axis=0)[8 * (d // 4): 8 * (d // 4) + 8]
                                                        for d in range(8)]))
        # f32 FFT of 16 points: a few ulps of the largest term
        np.testing.assert_allclose(got[3], spectrum_shards, rtol=1e-5, atol=1e-5)


@settings(max_examples=4, deadline=None)
@given(axes=st.sampled_from([(("a", 4), ("b", 2)), (("a", 2), ("b", 4)), (("a", 2), ("b", 2), ("c", 2))]),
       data=st.data())
def test_xla_oracle_all_gather_over_listed_mesh_devices_matches_numpy(axes, data):
    """all-gather over mesh-axes groups of any mesh whose devices are a transposed iota:
    `run_dump_with_xla` (what `check --against-xla` runs) gathers in the groups NumPy
    computes from the mesh: devices equal on the other axes, in the listed axes' order."""

    from converter.runtime.xla_oracle import run_dump_with_xla

    sizes = [n for _, n in axes]
    reshape = data.draw(st.sampled_from([sizes, [2, 4], [4, 2], [2, 2, 2]]))
    perm = data.draw(st.permutations(range(len(reshape))))
    grouped = data.draw(st.sampled_from([[a] for a, _ in axes] + [[a for a, _ in axes[:2]][::-1]]))
    devices = np.arange(8).reshape(reshape).transpose(perm).reshape(sizes)
    names = [a for a, _ in axes]
    order = [names.index(a) for a in names if a not in grouped] + [names.index(a) for a in grouped]
    groups = np.transpose(devices, order).reshape(-1, int(np.prod([sizes[names.index(a)] for a in grouped])))
    n = groups.shape[1]
    mesh = "mesh[" + ",".join(f"'{a}'={k}" for a, k in axes) + "]"
    ids = f"device_ids=([{','.join(map(str, reshape))}]T({','.join(map(str, perm))}))"
    refs = "{" + ",".join(f"'{a}'" for a in grouped) + "}"
    text = f"""HloModule gather_listed_mesh, num_partitions=8

ENTRY %main (p: f32[2]) -> f32[{2 * n}] {{
  %p = f32[2]{{0}} parameter(0)
  ROOT %ag = f32[{2 * n}]{{0}} all-gather(%p), channel_id=1, replica_groups={mesh}, {ids} {refs}, dimensions={{0}}, use_global_device_ids=true
}}
"""
    shards = np.arange(16, dtype=np.float32).reshape(8, 2)
    got = run_dump_with_xla(text, [shards]).outputs[0]
    for group in groups:
        for d in group:
            np.testing.assert_array_equal(got[d], np.concatenate([shards[m] for m in group]), err_msg=f"device {d}")


@pytest.mark.parametrize("dump", ["tpu_v6e_jax012_moe_top2_ragged.hlo", "tpu_v6e_jax010_moe_top2_ragged.hlo"])
def test_tpu_sparsecore_scatter_and_text_mosaic_kernel_match_jax(dump):
    """TPU v6e: top-2 MoE routing (tests/sweep/generate.py moe_top2_ragged).  The
    bincount is a SparseCore scatter offload: with jax 0.12 a `call-start()` with no
    operands whose operands come in its `call-update`; with jax 0.10.2 a `call-start` whose
    last operand is the token of a PrepareAsyncCallStart/Done pair (passes/tpu_custom_calls.py).
    The ragged dot's group metadata is XLA's own
    `tpu_custom_call` kernel written as MLIR text (func/memref/scf), not Mosaic bytecode.
    Oracle: JAX's own CPU result for the program at "highest" matmul precision (f32
    rounding of 8-term dots: 1e-5)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from converter.runtime.program import load

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    wr = (rng.standard_normal((8, 4)) * 0.5).astype(np.float32)
    we = (rng.standard_normal((4, 8, 12)) * 0.3).astype(np.float32)

    def moe(x, wr, we):
        gates, experts = lax.top_k(jax.nn.softmax(x @ wr), 2)
        flat = experts.reshape(-1)
        order = jnp.argsort(flat, stable=True)
        sizes = jnp.bincount(flat, length=4).astype(jnp.int32)
        y = lax.ragged_dot(jnp.repeat(x, 2, axis=0)[order], we, sizes)
        y = jnp.zeros_like(y).at[order].set(y).reshape(16, 2, 12)
        return jnp.sum(y * gates[..., None], axis=1), sizes

    with jax.default_matmul_precision("highest"):
        want = [np.asarray(a) for a in jax.jit(moe)(x, wr, we)]
    got = load(str(DUMPS / dump))(x, wr, we)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def _offloaded_bincount(n: int, length: int, with_token: bool = False) -> str:
    """`%offloaded`: the SparseCore scatter-add of ones (a bincount) of `n` ids into
    `length` zeros; with_token: libtpu 0.0.42's form, a last parameter token[] it never reads."""
    token = ", ready: token[]" if with_token else ""
    token_param = "\n  %ready = token[] parameter(2)" if with_token else ""
    return f"""%add (a: s32[], b: s32[]) -> s32[] {{
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %sum = s32[] add(%a, %b)
}}

%offloaded (zeros: s32[{length}], ids: s32[{n}]{token}) -> s32[{length}] {{{token_param}
  %zeros = s32[{length}]{{0}} parameter(0)
  %ids = s32[{n}]{{0}} parameter(1)
  %ones = s32[{n}]{{0}} broadcast(s32[] constant(1)), dimensions={{}}
  ROOT %counts = s32[{length}]{{0}} scatter(%zeros, %ids, %ones), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=%add
}}, execution_thread="sparsecore"
""".rstrip()


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 40), length=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_call_start_with_operands_in_its_update_matches_numpy(n, length, seed):
    """The SparseCore offload form for any sizes: `call-start()` starts a call of a
    computation taking two parameters, `call-update` hands them over, `call-done` takes
    the result (here a scatter-add of ones: a bincount).  Oracle: NumPy's bincount."""
    text = f"""HloModule sparsecore_late_operands

{_offloaded_bincount(n, length)}

ENTRY %main (ids: s32[{n}]) -> s32[{length}] {{
  %ids = s32[{n}]{{0}} parameter(0)
  %start = ((), (), (s32[1]{{0}})) call-start(), async_execution_thread="sparsecore", to_apply=%offloaded
  %zeros = s32[{length}]{{0}} broadcast(s32[] constant(0)), dimensions={{}}
  %update = ((s32[{length}]{{0}}, s32[{n}]{{0}}), s32[{length}]{{0}}) call-update(%start, %zeros, %ids)
  ROOT %done = s32[{length}]{{0}} call-done(%update)
}}
"""
    ids = np.random.default_rng(seed).integers(0, length, n).astype(np.int32)
    np.testing.assert_array_equal(run_ours(text, [ids])[0], np.bincount(ids, minlength=length))


def test_tpu_jax010_sparsecore_scatters_with_prepare_tokens_match_jax():
    """TPU v6e, jax 0.10.2 (libtpu 0.0.42): jnp.unique's counts and inverse
    (tests/sweep/generate.py unique_counts_inverse) are two SparseCore scatter offloads,
    each `call-start(operands..., token)` with the token of a PrepareAsyncCallStart/Done
    pair.  Oracles: JAX's CPU result recorded with the dump (jax 0.10.2) and jnp.unique
    run now on CPU; integer results, so exact."""
    import jax.numpy as jnp

    from converter.runtime.program import load

    stem = DUMPS / "tpu_v6e_jax010_unique_counts_inverse"
    (x,) = np.load(f"{stem}.in.npz").values()
    recorded = [np.load(f"{stem}.expected.npz")[f"out{i}"] for i in range(4)]
    live = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True, size=8, fill_value=-1)
    got = load(f"{stem}.hlo")(x)
    assert len(got) == 4
    for out, want, again in zip(got, recorded, live):
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(out, np.asarray(again).reshape(want.shape))


def _prepared_offload(n: int, length: int, root: str) -> str:
    """libtpu 0.0.42's SparseCore offload form: a token made by PrepareAsyncCallStart/Done
    is the call-start's last operand, and the offloaded computation's last parameter."""
    return f"""HloModule sparsecore_prepared_call

{_offloaded_bincount(n, length, with_token=True)}

ENTRY %main (ids: s32[{n}]) -> s32[{length}] {{
  %ids = s32[{n}]{{0}} parameter(0)
  %handle = s32[] custom-call(), custom_call_target="PrepareAsyncCallStart"
  %zeros = s32[{length}]{{0}} broadcast(s32[] constant(0)), dimensions={{}}
  %ready = token[] custom-call(%handle), custom_call_target="PrepareAsyncCallDone"
  %start = ((s32[{length}]{{0}}, s32[{n}]{{0}}, token[]), s32[{length}]{{0}}) call-start(%zeros, %ids, %ready), async_execution_thread="sparsecore", to_apply=%offloaded
  {root}
}}
"""


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 40), length=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_call_start_with_a_prepared_token_matches_numpy(n, length, seed):
    """The jax 0.10.2 SparseCore offload form for any sizes: the prepare pair's token
    carries no value, so the call is the scatter-add of ones it wraps (a bincount).
    Oracle: NumPy's bincount."""
    text = _prepared_offload(n, length, f"ROOT %done = s32[{length}]{{0}} call-done(%start)")
    ids = np.random.default_rng(seed).integers(0, length, n).astype(np.int32)
    np.testing.assert_array_equal(run_ours(text, [ids])[0], np.bincount(ids, minlength=length))


def test_prepare_async_call_handle_read_elsewhere_is_refused():
    """The prepare-start's s32[] handle holds whatever the TPU runtime writes there: a
    program that reads it other than through PrepareAsyncCallDone is refused at its line."""
    from converter.common.errors import ConverterError

    text = _prepared_offload(3, 4, "%done = s32[4]{0} call-done(%start)\n"
                                   "  %spread = s32[4]{0} broadcast(%handle), dimensions={}\n"
                                   "  ROOT %sum = s32[4]{0} add(%done, %spread)")
    with pytest.raises(ConverterError, match=r"<test>:19:3: error: %handle .*PrepareAsyncCallStart.*"
                                             r"read by stablehlo.broadcast_in_dim \(<test>:24:3: %spread\)"):
        run_ours(text, [np.zeros(3, np.int32)])


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_tpu_cholesky_of_split_complex_matches_numpy(n, seed):
    """TPU v6e, jax 0.12 (tests/sweep/generate.py linalg_complex_chol_inv): the TPU keeps a
    complex matrix as (real, imaginary) f32 arrays, and its `Cholesky` custom-call takes
    and returns those pairs.  Oracle: NumPy's complex Cholesky of a Hermitian positive
    definite matrix (the factor's lower triangle; XLA leaves the rest unspecified), f32
    rounding of n-term sums relative to the diagonal shift."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    h = (z @ z.conj().T + n * np.eye(n)).astype(np.complex64)
    text = f"""HloModule tpu_cholesky_split_complex

ENTRY %main (re: f32[{n},{n}], im: f32[{n},{n}]) -> (f32[{n},{n}], f32[{n},{n}]) {{
  %re = f32[{n},{n}]{{1,0}} parameter(0)
  %im = f32[{n},{n}]{{1,0}} parameter(1)
  ROOT %factor = (f32[{n},{n}]{{1,0}}, f32[{n},{n}]{{1,0}}) custom-call(%re, %im), custom_call_target="Cholesky"
}}
"""
    re_, im_ = run_ours(text, [h.real.copy(), h.imag.copy()])
    want = np.linalg.cholesky(h.astype(np.complex128))
    np.testing.assert_allclose(np.tril(re_ + 1j * im_), want, rtol=1e-4, atol=1e-4 * np.sqrt(n))
