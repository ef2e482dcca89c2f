"""Write tests/passes/data/tpu_concat_bitcast_mlp.hlo: relu(x @ w1) @ w2 compiled
devicelessly for a TPU v5e 2x2 with async collective fusion, x and w2 sharded on rows
and w1 on columns.  The compiler prefetches the local w2 into faster memory in four
row slices and joins them with a `ConcatBitcast` custom-call.

    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 LIBTPU_INIT_ARGS="--xla_tpu_enable_async_collective_fusion=true \\
        --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true \\
        --xla_tpu_enable_async_collective_fusion_multiple_steps=true" \\
        python -m tests.passes.data.make_tpu_concat_bitcast

(`python`: an environment with jax[tpu] 0.10, libtpu included.)
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import jaxlib._hlo as xla_hlo
import numpy as np
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tests.programs.generate import relativize_source_paths

HERE = pathlib.Path(__file__).resolve().parent
BATCH, MODEL, HIDDEN = 128, 512, 2048
# (shape, PartitionSpec) of x, w1, w2 over the mesh axis "x" of 4 devices.
INPUTS = [((BATCH, MODEL), PartitionSpec("x", None)), ((MODEL, HIDDEN), PartitionSpec(None, "x")),
          ((HIDDEN, MODEL), PartitionSpec("x", None))]


def mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def main() -> None:
    devices = topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices
    mesh = Mesh(np.array(devices).reshape(4), ("x",))
    specs = [jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec)) for shape, spec in INPUTS]
    # Highest precision: the TPU would otherwise round the f32 operands to bf16.
    with jax.default_matmul_precision("highest"):
        compiled = jax.jit(mlp, out_shardings=NamedSharding(mesh, INPUTS[0][1])).lower(*specs).compile()
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)
    (HERE / "tpu_concat_bitcast_mlp.hlo").write_text(relativize_source_paths(text))


if __name__ == "__main__":
    main()
