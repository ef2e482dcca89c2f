"""Lowered Pallas GPU (Triton) flash attention against jax.nn.dot_product_attention on this CPU.

    # once, with jax[cuda12] 0.12.0.1 installed (deviceless H100 compile):
    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 HLO_ROUNDTRIP_GPU_TARGET=/path/to/gpu_target_h100.txtpb \\
        /path/to/cuda-venv/bin/python benchmarks/pallas_gpu_attention_benchmark.py --write-dump [--block 64]
    # then, with the project's environment of the same jax (Triton bytecode is per jaxlib):
    python benchmarks/pallas_gpu_attention_benchmark.py [--repeat 3] [--block 64]

The dump is jax.experimental.pallas.ops.gpu.attention.mha (causal, forward) compiled for an
H100; the triton-kernels pass lowers its Triton kernel to a StableHLO loop over the grid,
which jaxlib compiles for CPU.  The comparison is jax.nn.dot_product_attention
(implementation='xla', causal) on the same inputs, jitted for CPU.  The kernel's dots are
TF32 (Pallas' default precision on GPU) and are rounded so here: the outputs differ by
TF32 rounding.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from runtime_benchmark import best_of  # noqa: E402  (one timer for the benchmarks: warm-up, then the best of N)

SHAPE = (1, 2048, 8, 128)  # batch, sequence, heads, head dim (mha's layout)
SCALE = 1.0 / 128 ** 0.5


def dump_path(block: int) -> pathlib.Path:
    return ROOT / "benchmarks" / "data" / f"pallas_gpu_attention_s2048_b{block}.hlo"


def write_dump(block: int) -> None:
    import jax
    import jax.numpy as jnp
    import jaxlib._hlo as xla_hlo
    from jax.experimental import topologies
    from jax.experimental.pallas.ops.gpu import attention

    from tests.passes.triton.generate import _give_pallas_an_h100
    from tests.programs.generate import GPU_TARGET, relativize_source_paths

    jax.config.update("jax_hlo_source_file_canonicalization_regex",
                      "^(" + re.escape(str(ROOT)) + "/|.*/site-packages/)")
    _give_pallas_an_h100()
    device = topologies.get_topology_desc("", "cuda", target_config=GPU_TARGET.read_text(), topology="1x1x1").devices[0]
    sizes = attention.BlockSizes(block_q=block, block_k=block)

    def f(q, k, v):
        return attention.mha(q, k, v, None, sm_scale=SCALE, causal=True, block_sizes=sizes)

    spec = jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=jax.sharding.SingleDeviceSharding(device))
    compiled = jax.jit(f).lower(spec, spec, spec).compile()
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    path = dump_path(block)
    path.parent.mkdir(exist_ok=True)
    path.write_text(relativize_source_paths(compiled._executable.xla_executable.hlo_modules()[0].to_string(options)))
    print(f"wrote {path.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-dump", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--block", type=int, default=64, help="the kernel's q/k block size")
    args = parser.parse_args()
    if args.write_dump:
        write_dump(args.block)
        return
    dump = dump_path(args.block)
    import jax
    import numpy as np

    from converter.runtime.convert import convert_text
    from converter.runtime.program import program_from_module

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(3))
    start = time.perf_counter()
    program = program_from_module(convert_text(dump.read_text(), dump.name))
    device_args = program.to_device([q, k, v])
    convert_s = time.perf_counter() - start
    ours_out = None

    def ours():
        nonlocal ours_out
        ours_out = program.execute_on_device(device_args)
        jax.block_until_ready(ours_out)

    reference = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=SCALE, is_causal=True,
                                                                     implementation="xla"))
    jq, jk, jv = (jax.device_put(x) for x in (q, k, v))
    ref_out = None

    def ref():
        nonlocal ref_out
        ref_out = reference(jq, jk, jv)
        jax.block_until_ready(ref_out)

    t_ours = best_of(ours, args.repeat)
    t_ref = best_of(ref, args.repeat)
    got = np.asarray(jax.tree_util.tree_leaves(ours_out)[0]).reshape(SHAPE)
    diff = float(np.abs(got - np.asarray(ref_out)).max())
    print(f"shape {SHAPE} f32 causal, Pallas blocks {args.block}: conversion+compile {convert_s:.2f} s")
    print(f"lowered Pallas GPU attention:  {t_ours * 1e3:8.1f} ms")
    print(f"jax.nn.dot_product_attention:  {t_ref * 1e3:8.1f} ms")
    print(f"ratio (ours / jax): {t_ours / t_ref:.2f}   max |difference| {diff:.2e} (TF32 dots in the kernel)")


if __name__ == "__main__":
    main()
