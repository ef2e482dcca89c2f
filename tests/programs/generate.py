"""Write the optimized HLO dumps of the catalog's programs for one backend.

    python -m tests.programs.generate --backend cpu --out tests/dumps/cpu
    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 <venv with jax[tpu]==0.10.2>/bin/python \\
        -m tests.programs.generate --backend tpu --out tests/dumps/tpu
    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 XLA_FLAGS=--xla_gpu_enable_triton_gemm=false \\
        <venv with jax[cuda12]==0.10.2>/bin/python -m tests.programs.generate --backend gpu --out tests/dumps/gpu

TPU dumps compile devicelessly for a TPU v5e 2x2 topology and GPU dumps for four H100s
(`jax.experimental.topologies`, DESIGN §7).  Dumps are printed with large constants (the
default printer elides them as `{...}`, which leaves nothing to run).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
GPU_TARGET = ROOT.parent / "shared" / "gpu_target_h100.txtpb"


def backend_devices(backend: str) -> list:
    import jax

    if backend == "cpu":
        return jax.devices("cpu")[:4]
    from jax.experimental import topologies

    if backend == "tpu":
        return list(topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices)
    if backend == "gpu":
        topo = topologies.get_topology_desc("", "cuda", target_config=GPU_TARGET.read_text(), topology="1x1x4")
        return list(topo.devices)
    raise SystemExit(f"unknown backend {backend}")


def optimized_hlo(program, devices) -> str:
    import jax
    import jaxlib._hlo as xla_hlo
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(devices[: program.devices]).reshape(program.mesh_shape), program.axis_names)
    args = program.inputs(np.random.default_rng(0))
    in_specs = program.in_specs or [P()] * len(args)
    if not isinstance(in_specs, (list, tuple)):
        in_specs = [in_specs]
    shardings = [NamedSharding(mesh, spec) for spec in in_specs]
    kwargs = {"in_shardings": tuple(shardings)}
    if program.out_specs is not None and "spmd" in program.tags:
        out = program.out_specs
        kwargs["out_shardings"] = (NamedSharding(mesh, out) if isinstance(out, P)
                                   else tuple(NamedSharding(mesh, o) for o in out))
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype, sharding=s) for a, s in zip(args, shardings)]
    compiled = jax.jit(program.build(mesh), **kwargs).lower(*specs).compile()
    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    return compiled._executable.xla_executable.hlo_modules()[0].to_string(options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "tpu", "gpu"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="comma-separated program names")
    args = parser.parse_args()
    if args.backend == "cpu":
        import jax

        jax.config.update("jax_num_cpu_devices", 4)
    sys.path.insert(0, str(ROOT))
    from tests.programs.catalog import PROGRAMS

    devices = backend_devices(args.backend)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    failures = 0
    for program in PROGRAMS:
        if only and program.name not in only:
            continue
        try:
            text = optimized_hlo(program, devices)
        except Exception as e:  # a program this backend cannot compile: report, go on
            failures += 1
            print(f"{program.name}: cannot compile for {args.backend}: {type(e).__name__}: {str(e)[:300]}")
            if os.environ.get("DEBUG"):
                traceback.print_exc()
            continue
        (out / f"{program.name}.hlo").write_text(text)
        print(f"{program.name}: {len(text)} bytes")
    print(f"{failures} failure(s)")


if __name__ == "__main__":
    main()
