"""Write tests/passes/data/cublaslt_bias_gelu_h100.hlo: gelu_tanh(x @ w + b) compiled
devicelessly for one H100 by XLA's GPU compiler, which fuses the bias and the GELU into a
cuBLASLt call's epilogue (`"epilogue":"BIAS_GELU"`), printed in full.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 XLA_FLAGS=--xla_gpu_enable_triton_gemm=false \\
        python -m tests.passes.data.make_cublaslt_bias_gelu

(`python`: an environment with jax[cuda12] 0.12 installed; GPU_TARGET_CONFIG names the H100
target config when it is not where tests/programs/generate.py looks.)
"""

from __future__ import annotations

import os
import pathlib

import jax
import jax.numpy as jnp
import jaxlib._hlo as xla_hlo
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

from tests.programs.generate import GPU_TARGET, relativize_source_paths

HERE = pathlib.Path(__file__).resolve().parent
SHAPES = [(64, 32), (32, 48), (48,)]


def gelu_linear(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=True)


def main() -> None:
    target = pathlib.Path(os.environ.get("GPU_TARGET_CONFIG", GPU_TARGET)).read_text()
    device = topologies.get_topology_desc("", "cuda", target_config=target, topology="1x1x1").devices[0]
    sharding = SingleDeviceSharding(device)
    specs = [jax.ShapeDtypeStruct(s, jnp.float32, sharding=sharding) for s in SHAPES]
    compiled = jax.jit(gelu_linear).lower(*specs).compile()
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)
    assert '"epilogue":"BIAS_GELU"' in text, "XLA did not fuse the GELU into the GEMM's epilogue"
    (HERE / "cublaslt_bias_gelu_h100.hlo").write_text(relativize_source_paths(text))


if __name__ == "__main__":
    main()
