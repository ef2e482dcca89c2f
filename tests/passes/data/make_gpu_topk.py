"""Write the `__gpu$TopK` dumps under tests/passes/data: jax.lax.top_k compiled devicelessly
for one H100 (the GPU compiler's TopkSpecializer writes the call), printed in full.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python \\
        -m tests.passes.data.make_gpu_topk

(`python`: an environment with jax[cuda] 0.10 installed; GPU_TARGET_CONFIG names the H100
target config when it is not where tests/programs/generate.py looks.)
"""

from __future__ import annotations

import os
import pathlib

import jax
import jax.numpy as jnp
import jaxlib._hlo as xla_hlo
import numpy as np
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tests.programs.generate import GPU_TARGET, relativize_source_paths

HERE = pathlib.Path(__file__).resolve().parent
# name -> (shape, dtype, k)
CASES = {"gpu_topk_f32_4x1024_k8": ((4, 1024), jnp.float32, 8),
         "gpu_topk_bf16_2048_k16": ((2048,), jnp.bfloat16, 16)}


def top_k_then_scale(x, k):
    values, indices = jax.lax.top_k(x, k)
    return values * 2, indices


def main() -> None:
    target = pathlib.Path(os.environ.get("GPU_TARGET_CONFIG", GPU_TARGET))
    topology = topologies.get_topology_desc("", "cuda", target_config=target.read_text(), topology="1x1x1")
    mesh = Mesh(np.array(topology.devices[:1]), ("x",))
    replicated = NamedSharding(mesh, PartitionSpec())
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    for name, (shape, dtype, k) in CASES.items():
        spec = jax.ShapeDtypeStruct(shape, dtype, sharding=replicated)
        compiled = jax.jit(lambda x: top_k_then_scale(x, k), in_shardings=replicated,
                           out_shardings=(replicated, replicated)).lower(spec).compile()
        text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)
        (HERE / f"{name}.hlo").write_text(relativize_source_paths(text))


if __name__ == "__main__":
    main()
