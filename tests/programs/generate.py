"""Write the optimized HLO dumps of the catalog's programs for one backend, and a manifest.

    python -m tests.programs.generate --backend cpu --out tests/dumps/cpu
    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 python \\
        -m tests.programs.generate --backend tpu --out tests/dumps/tpu
    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 XLA_FLAGS=--xla_gpu_enable_triton_gemm=false \\
        python -m tests.programs.generate --backend gpu --out tests/dumps/gpu

    # tests/dumps/gpu_triton: the same, with XLA's default Triton GEMM fusions (no XLA_FLAGS)
    # tests/dumps/gpu_h100: on a machine with a GPU, `--backend gpu-local` (real devices)

(the TPU and GPU environments have jax[tpu] / jax[cuda12] 0.10.2; any such venv works.
tests/dumps/*_jax012: the same commands with jax 0.12.0.1 (Python 3.12 environments); all of
CPU, and for TPU and GPU the collective programs (sm_*, sm2d_*, spmd_* but the LM step) and
a few of each family (attention, linalg, scans), to keep the committed size small.
GPU_TARGET_CONFIG names the H100 target description when the checkout has no ../shared.)
TPU dumps compile devicelessly for a TPU v5e 2x2 topology and GPU dumps for four H100s
(`jax.experimental.topologies`: TPU and GPU compilation without the device).  Dumps are printed with large constants (the
default printer elides them as `{...}`, which leaves nothing to run).

`manifest.json` in the output folder describes each dump: its devices and mesh, the seed of
its inputs, and each input's and output's global shape, per-device shape, dtype and
PartitionSpec (outputs: the shardings the backend's compiler chose).  `--only` regenerates
some programs and keeps the other entries whose dumps are still there.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import traceback
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The H100 target description lives beside the checkout; a checkout elsewhere (a git
# worktree) names it with HLO_ROUNDTRIP_GPU_TARGET.
GPU_TARGET = pathlib.Path(os.environ.get("HLO_ROUNDTRIP_GPU_TARGET", ROOT.parent / "shared" / "gpu_target_h100.txtpb"))
MANIFEST = "manifest.json"


def relativize_source_paths(text: str) -> str:
    """The dump with the repository's own absolute path taken out of its source locations
    (`source_file=`, the FileNames section), so committed dumps name files as the repository does."""
    return text.replace(f'"{ROOT}/', '"')


def h100_devices(count: int) -> list:
    """`count` deviceless H100s (DESIGN §7: the GPU recipe's target description)."""
    from jax.experimental import topologies

    topo = topologies.get_topology_desc("", "cuda", target_config=GPU_TARGET.read_text(), topology=f"1x1x{count}")
    return list(topo.devices)


def compiled_hlo_text(compiled) -> str:
    """A compiled JAX program's optimized HLO as the dumps hold it: large constants printed,
    the repository's paths relative."""
    import jaxlib._hlo as xla_hlo

    options = xla_hlo.HloPrintOptions()
    options.print_large_constants = True
    return relativize_source_paths(compiled._executable.xla_executable.hlo_modules()[0].to_string(options))


def versioned_dump_folder(here: pathlib.Path) -> pathlib.Path:
    """`here`/dumps/jax<major><minor> (jax 0.10.2: jax010), made if missing."""
    import jax

    major, minor = jax.__version__.split(".")[:2]
    out = here / "dumps" / f"jax{major}{int(minor):02d}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def backend_devices(backend: str) -> list:
    import jax

    if backend == "cpu":
        return jax.devices("cpu")[:4]
    from jax.experimental import topologies

    if backend == "tpu":
        return list(topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices)
    if backend == "gpu":
        target = pathlib.Path(os.environ.get("GPU_TARGET_CONFIG", GPU_TARGET))  # a checkout elsewhere names it
        topo = topologies.get_topology_desc("", "cuda", target_config=target.read_text(), topology="1x1x4")
        return list(topo.devices)
    if backend == "gpu-local":  # the GPUs of this machine (programs needing more are skipped)
        return jax.devices("gpu")
    raise SystemExit(f"unknown backend {backend}")


def _array_entry(shape, dtype, sharding) -> dict[str, Any]:
    from tests.programs.placement import spec_to_json

    return {"shape": list(shape), "device_shape": list(sharding.shard_shape(tuple(shape))),
            "dtype": np.dtype(dtype).name, "spec": spec_to_json(sharding.spec)}


def optimized_hlo(program, devices) -> tuple[str, dict[str, Any]]:
    """The optimized HLO text of the program compiled for `devices`, and its manifest entry."""
    import jax
    from jax.sharding import NamedSharding

    from tests.programs.placement import INPUT_SEED, input_specs, jitted, mesh_for

    mesh = mesh_for(program, devices)
    args = program.inputs(np.random.default_rng(INPUT_SEED))
    shardings = [NamedSharding(mesh, spec) for spec in input_specs(program, len(args))]
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype, sharding=s) for a, s in zip(args, shardings)]
    compiled = jitted(program, mesh, len(args)).lower(*specs).compile()
    text = compiled_hlo_text(compiled)
    outputs = jax.tree_util.tree_leaves(compiled.out_info)
    out_shardings = jax.tree_util.tree_leaves(compiled.output_shardings)
    entry = {
        "dump": f"{program.name}.hlo",
        "devices": program.devices,
        "mesh_shape": list(program.mesh_shape),
        "axis_names": list(program.axis_names),
        "kind": "shard_map" if "shard_map" in program.tags else "spmd" if "spmd" in program.tags else "single",
        "input_seed": INPUT_SEED,
        "inputs": [_array_entry(np.shape(a), np.asarray(a).dtype, s) for a, s in zip(args, shardings)],
        "outputs": [_array_entry(o.shape, o.dtype, s) for o, s in zip(outputs, out_shardings)],
    }
    return text, entry


def manifest_json(manifest: dict[str, Any]) -> str:
    """JSON with one line per program (diffs of a regenerated manifest stay readable)."""
    head = {k: v for k, v in manifest.items() if k != "programs"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    programs = [f"    {json.dumps(name)}: {json.dumps(entry)}" for name, entry in manifest["programs"].items()]
    return "{\n" + "\n".join(lines) + '\n  "programs": {\n' + ",\n".join(programs) + "\n  }\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "tpu", "gpu", "gpu-local"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", help="comma-separated program names")
    args = parser.parse_args()
    import jax

    if args.backend == "cpu":
        jax.config.update("jax_num_cpu_devices", 4)
    sys.path.insert(0, str(ROOT))
    from tests.programs.catalog import BY_NAME, PROGRAMS

    devices = backend_devices(args.backend)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    if only and only - set(BY_NAME):
        raise SystemExit(f"unknown program(s): {', '.join(sorted(only - set(BY_NAME)))}")
    manifest_path = out / MANIFEST
    old = json.loads(manifest_path.read_text())["programs"] if manifest_path.exists() else {}
    entries: dict[str, Any] = {}
    failures = 0
    for program in PROGRAMS:
        if program.devices > len(devices):
            continue
        if only and program.name not in only:
            if program.name in old and (out / old[program.name]["dump"]).exists():
                entries[program.name] = old[program.name]
            continue
        try:
            text, entry = optimized_hlo(program, devices)
        except Exception as e:  # a program this backend cannot compile: report, go on
            failures += 1
            print(f"{program.name}: cannot compile for {args.backend}: {type(e).__name__}: {str(e)[:300]}")
            if os.environ.get("DEBUG"):
                traceback.print_exc()
            continue
        (out / entry["dump"]).write_text(text)
        entries[program.name] = entry
        print(f"{program.name}: {len(text)} bytes")
    manifest = {
        "backend": args.backend,
        "target": {"cpu": "host CPU, 4 devices", "tpu": "TPU v5e 2x2 (deviceless)",
                   "gpu": "4 x H100 (deviceless)", "gpu-local": f"{len(devices)} local GPU(s)"}[args.backend],
        "device_kind": getattr(devices[0], "device_kind", ""),
        "jax_version": jax.__version__,
        "programs": entries,
    }
    manifest_path.write_text(manifest_json(manifest))
    print(f"{len(entries)} program(s) in {manifest_path}; {failures} failure(s)")


if __name__ == "__main__":
    main()
