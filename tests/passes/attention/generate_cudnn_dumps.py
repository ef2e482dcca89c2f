"""Write tests/passes/attention/dumps/*.hlo: optimized GPU HLO of the programs in cudnn_cases.py,
compiled devicelessly for one H100 (jax.experimental.topologies), so the tests need no CUDA packages.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        <venv with jax[cuda12]==0.10.2>/bin/python tests/passes/attention/generate_cudnn_dumps.py [--only NAME,...]

The flex_* cases (score_mod) need jax[cuda12] 0.12 (Python 3.12).

jax checks the GPU's compute capability before choosing cuDNN attention; there is no GPU
here, so the check is replaced by the target's (sm_90, from gpu_target_h100.txtpb).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
GPU_TARGET = HERE.parents[3] / "shared" / "gpu_target_h100.txtpb"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--out", default=str(HERE / "dumps"))
    args = parser.parse_args()

    import jax
    import jaxlib._hlo as xla_hlo
    import numpy as np
    from jax._src.cudnn import fused_attention_stablehlo as fa
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parents[2]))
    from cudnn_cases import cases

    from tests.programs.generate import relativize_source_paths

    fa.check_compute_capability = lambda capability: True  # the target is an H100 (sm_90)
    target = pathlib.Path(os.environ.get("GPU_TARGET_CONFIG", GPU_TARGET))  # a checkout elsewhere names it
    topology = topologies.get_topology_desc("", "cuda", target_config=target.read_text(), topology="1x1x1")
    sharding = SingleDeviceSharding(topology.devices[0])
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    for case in cases().values():
        if only and case.name not in only:
            continue
        specs = [jax.ShapeDtypeStruct(shape, np.dtype(dtype) if dtype != "bfloat16" else jax.numpy.bfloat16,
                                      sharding=sharding) for shape, dtype in case.inputs]
        compiled = jax.jit(case.cudnn, keep_unused=True).lower(*specs).compile()
        text = relativize_source_paths(compiled._executable.xla_executable.hlo_modules()[0].to_string(options))
        if "__cudnn$fmha" not in text:
            raise SystemExit(f"{case.name}: XLA did not keep a cuDNN attention call")
        (out / f"{case.name}.hlo").write_text(text)
        print(f"{case.name}: {len(text)} bytes")


if __name__ == "__main__":
    main()
