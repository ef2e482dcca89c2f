"""Write deviceless H100 dumps of the Pallas GPU kernels in `kernels.py`, with their
interpret-mode oracle values (inputs and outputs, one .npz per kernel).

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        HLO_ROUNDTRIP_GPU_TARGET=/path/to/gpu_target_h100.txtpb \\
        python -m tests.passes.triton.generate --out tests/passes/triton/dumps/jax012

(`python` of an environment with jax[cuda12] of the jax to dump with; run from the repository root.)  Pallas' Triton
lowering asks the local GPU for its compute capability; deviceless, an H100's is given
(`gpu_info.get_gpu_info_from_version(GpuVersion.H100)`, DESIGN §7).  The oracle is the
same program with `interpret=True`, run on CPU by the same jax on the same inputs.
A case that does not lower with this jax is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import traceback

import numpy as np

from tests.passes.triton.kernels import BY_NAME, CASES
from tests.programs.generate import ROOT, h100_devices, relativize_source_paths

SEED = 0


def relative_kernel_sources() -> None:
    """Triton bytecode and IR carry their ops' source locations, where relativize_source_paths
    cannot reach: have JAX write them relative (the repository's files) or from the package
    root (jax's and the libraries' own kernels)."""
    import jax

    jax.config.update("jax_hlo_source_file_canonicalization_regex",
                      "^(" + re.escape(str(ROOT)) + "/|.*/site-packages/)")


def output_folder(path: str) -> pathlib.Path:
    out = pathlib.Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _give_pallas_an_h100() -> None:
    try:
        from jax._src.pallas.triton import gpu_info
    except ImportError:  # jax 0.10: without a GPU, Pallas' Triton lowering takes 9.0 (an H100's)
        return
    h100 = gpu_info.get_gpu_info_from_version(gpu_info.GpuVersion.H100)
    gpu_info.get_gpu_info = lambda: h100


def npz_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays as .npz holds them: a dtype NumPy cannot save (bfloat16) as its bits, with
    `<key>.dtype` naming it (`load_npz` undoes this)."""
    out = {}
    for key, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.kind == "V" or a.dtype.name in ("bfloat16",) or "float8" in a.dtype.name:
            out[key] = a.view(np.dtype(f"u{a.dtype.itemsize}"))
            out[f"{key}.dtype"] = np.array(a.dtype.name)
        else:
            out[key] = a
    return out


def load_npz(path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, outputs) of a kernel's .npz."""
    import ml_dtypes

    data = np.load(path)

    def get(key: str) -> np.ndarray:
        a = data[key]
        if f"{key}.dtype" in data.files:
            a = a.view(getattr(ml_dtypes, str(data[f"{key}.dtype"])))
        return a

    def series(prefix: str) -> list[np.ndarray]:
        n = sum(1 for f in data.files if f.startswith(prefix) and not f.endswith(".dtype"))
        return [get(f"{prefix}{k}") for k in range(n)]

    return series("input"), series("output")


def main() -> None:
    import jax
    import jaxlib._hlo as xla_hlo

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    relative_kernel_sources()
    _give_pallas_an_h100()
    # Four devices (the GPU recipe's 1x1x4) for the shard_map cases, four CPU devices for
    # their interpret-mode oracle; single-device cases use the first of each.
    jax.config.update("jax_num_cpu_devices", 4)
    devices = h100_devices(4)
    device = devices[0]
    out = output_folder(args.out)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for case in CASES if not args.only else [BY_NAME[n] for n in args.only]:
        inputs = case.inputs(np.random.default_rng(SEED))
        if case.devices > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            gpu_mesh = Mesh(np.array(devices[:case.devices]), ("d",))
            cpu_mesh = Mesh(np.array(jax.devices("cpu")[:case.devices]), ("d",))
            sharding = NamedSharding(gpu_mesh, PartitionSpec("d"))
            build = lambda interpret: case.build(interpret, cpu_mesh if interpret else gpu_mesh)  # noqa: E731
        else:
            sharding = jax.sharding.SingleDeviceSharding(device)
            build = case.build
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in inputs]
        try:
            compiled = build(False).lower(*specs).compile()
        except Exception:  # noqa: BLE001  (report and go on: this jax may lack the kernel)
            print(f"{case.name}: does not compile\n{traceback.format_exc(limit=3)}")
            continue
        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)  # noqa: SLF001
        (out / f"{case.name}.hlo").write_text(relativize_source_paths(text))
        arrays = {f"input{k}": a for k, a in enumerate(inputs)}
        try:
            with jax.default_device(jax.devices("cpu")[0]):
                results = jax.tree_util.tree_leaves(build(True)(*inputs))
        except Exception:  # noqa: BLE001
            print(f"{case.name}: interpret mode fails\n{traceback.format_exc(limit=3)}")
            continue
        arrays |= {f"output{k}": np.asarray(r) for k, r in enumerate(results)}
        np.savez_compressed(out / f"{case.name}.npz", **npz_arrays(arrays))
        manifest[case.name] = {"jax": jax.__version__, "seed": SEED, "triton": case.triton, "devices": case.devices,
                               "inputs": [{"shape": list(a.shape), "dtype": a.dtype.name} for a in inputs]}
        print(case.name, len(text))
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
