"""Generated Pallas GPU kernels: random array and block shapes (ragged edges: masked loads
and stores), index maps (forward, reversed, transposed blocks), grids of one to three
axes and elementwise bodies, lowered by the installed jax's Pallas Triton lowering for
CUDA (lowering only: no GPU and no CUDA packages are needed, the HLO holds the same
`__gpu$xla.gpu.triton` call a GPU dump does), converted, run on CPU and compared with the
same pallas_call in Pallas' interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module


def _give_pallas_an_h100() -> None:
    try:
        from jax._src.pallas.triton import gpu_info
    except ImportError:  # jax 0.10: without a GPU the lowering takes compute capability 9.0
        return
    h100 = gpu_info.get_gpu_info_from_version(gpu_info.GpuVersion.H100)
    gpu_info.get_gpu_info = lambda: h100


def _masks_ragged_columns() -> bool:
    """Whether this jax's Pallas Triton lowering masks the loads and stores of 2-D blocks
    that run past the array's last column.  jax 0.10.2's does not (measured: a [5, 5]
    array in [4, 4] blocks gets unmasked tt.load/tt.store, so lanes past column 4 wrap
    into the next row and programs race on the GPU: the kernel itself has no defined
    result there, and the conversion keeps the grid's order); jax 0.12 masks them."""
    import jax

    return tuple(int(x) for x in jax.__version__.split(".")[:2]) >= (0, 12)


@st.composite
def kernels(draw):
    rank = draw(st.integers(1, 2))
    blocks = [draw(st.sampled_from([4, 8, 16])) for _ in range(rank)]
    # Array sizes of one to three blocks, often not a multiple of the block (ragged edges).
    shape = [draw(st.integers(b // 2 + 1, 3 * b)) for b in blocks]
    body = draw(st.sampled_from(["add", "exp_mul", "where", "rowsum"]))
    if rank == 2 and not _masks_ragged_columns():
        shape[1] = blocks[1] * draw(st.integers(1, 2))
    if body == "rowsum":
        # A sum over a ragged block would add the lanes past the edge, which a GPU leaves
        # undefined: rows are whole blocks.
        shape[-1] = blocks[-1] * draw(st.integers(1, 2))
    grid = [-(-s // b) for s, b in zip(shape, blocks)]
    reverse = draw(st.booleans())
    extra_axis = draw(st.booleans())  # a grid axis the blocks do not depend on (revisits)
    return rank, blocks, shape, grid, reverse, body, extra_axis


def _build(rank, blocks, shape, grid, reverse, body, extra_axis, interpret):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    def index_map(*ids):
        ids = ids[:rank]
        if reverse:
            ids = tuple(g - 1 - i for g, i in zip(grid, ids))
        return ids

    def kernel(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        if body == "add":
            out = x + y * 2.0
        elif body == "exp_mul":
            out = jnp.exp(x * 0.5) * y
        elif body == "where":
            out = jnp.where(x > y, x - y, jnp.maximum(x, 0.25))
        else:
            out = x + jnp.sum(y, axis=-1, keepdims=True)
        o_ref[...] = out + pl.program_id(0).astype(jnp.float32)

    spec = pl.BlockSpec(tuple(blocks), index_map)
    full_grid = tuple(grid) + ((2,) if extra_axis else ())
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(tuple(shape), np.float32), grid=full_grid,
                          in_specs=[spec, spec], out_specs=spec, interpret=interpret,
                          compiler_params=None if interpret else pltriton.CompilerParams(num_warps=4, num_stages=1))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernels())
def test_generated_kernel_matches_interpret_mode(params):
    import jax

    _give_pallas_an_h100()
    rank, blocks, shape, grid, reverse, body, extra_axis = params
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    lowered = jax.jit(_build(*params, interpret=False)).trace(x, y).lower(lowering_platforms=("cuda",))
    text = lowered.as_text(dialect="hlo")
    assert "__gpu$xla.gpu.triton" in text
    got = program_from_module(convert_text(text, "generated.hlo"))(x, y)[0]
    want = np.asarray(jax.jit(_build(*params, interpret=True))(x, y))
    # Elementwise bodies: the interpreter's operations in its order (exp may come from
    # another CPU kernel: a few ulps); a row sum in another order (≤ 16 terms).
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=4e-6)


def test_the_generator_makes_ragged_blocks():
    """The strategy reaches array sizes that are not a multiple of the block."""
    ragged = []

    @settings(max_examples=30, deadline=None, database=None, derandomize=True)  # a fixed sample: both kinds, every run
    @given(kernels())
    def collect(params):
        _, blocks, shape, *_ = params
        ragged.append(any(s % b for s, b in zip(shape, blocks)))

    collect()
    assert any(ragged) and not all(ragged)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
