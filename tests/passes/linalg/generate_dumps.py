"""Write tests/passes/linalg/dumps/<jax version>/*.hlo: optimized GPU HLO of the programs in
cases.py, compiled devicelessly for one H100 (jax.experimental.topologies), so the tests need
no CUDA packages.

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 HLO_ROUNDTRIP_GPU_TARGET=.../gpu_target_h100.txtpb \\
        <venv with jax[cuda12]>/bin/python tests/passes/linalg/generate_dumps.py [--only NAME,...]

(jax 0.10.2 writes dumps/jax010, jax 0.12 dumps/jax012.)  The hip twins of these calls
(`hipsolver_*`, `hipsparse_*`, `hip_*`) are the same calls for ROCm; no ROCm compiler
runs here, so the tests rename the targets of these dumps.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GPU_TARGET = pathlib.Path(os.environ.get("HLO_ROUNDTRIP_GPU_TARGET", ROOT.parent / "shared" / "gpu_target_h100.txtpb"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args()

    import jax
    import jaxlib._hlo as xla_hlo
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    sys.path.insert(0, str(ROOT))
    from tests.passes.linalg.cases import cases
    from tests.programs.generate import relativize_source_paths

    topology = topologies.get_topology_desc("", "cuda", target_config=GPU_TARGET.read_text(), topology="1x1x1")
    sharding = SingleDeviceSharding(topology.devices[0])
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    major, minor = jax.__version__.split(".")[:2]
    out = HERE / "dumps" / f"jax{major}{int(minor):02d}"
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    for case in cases().values():
        if only and case.name not in only:
            continue
        specs = [jax.ShapeDtypeStruct(shape, np.dtype(dtype), sharding=sharding) for shape, dtype in case.inputs]
        compiled = jax.jit(case.fn).lower(*specs).compile()
        text = relativize_source_paths(compiled._executable.xla_executable.hlo_modules()[0].to_string(options))
        if f'custom_call_target="{case.target}"' not in text:
            raise SystemExit(f"{case.name}: the dump has no {case.target} call")
        (out / f"{case.name}.hlo").write_text(text)
        print(f"{case.name}: {len(text)} bytes")


if __name__ == "__main__":
    main()
