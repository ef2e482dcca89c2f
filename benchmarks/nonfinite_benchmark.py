"""`run --find-nonfinite` (exhaustive) and `--find-nonfinite=escaping` against a plain run.

    python benchmarks/nonfinite_benchmark.py [--only NAME,...] [--layers 24] [--plant-layer 17]

For each dump: a plain run (convert, compile for CPU, execute), the exhaustive search
(every instruction checked, fused ones included) and the escaping one (fusions checked as
whole values; a second compile only when a NaN/Inf leaves a fusion), each timed from the
parsed dump to the origins, with its compiles apart (XLA's CPU compile is what the checks
slow down).  The dumps: the catalog's biggest (tests/dumps) with random inputs (seed 0),
and a generated transformer of --layers layers (JAX's own optimized CPU HLO, unrolled:
thousands of fused instructions) whose layer --plant-layer takes rsqrt of a negative
number: both searches must name the same instruction there.  Not a test: minutes.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402

CATALOG = ["tpu/complex_linear", "tpu/linalg_complex", "tpu/lm_train_step", "gpu/lm_train_step",
           "tpu/spmd_lm_train_step"]


def transformer_dump(layers: int, plant_layer: int, directory: str, backend: str = "cpu") -> tuple[str, list[np.ndarray]]:
    """A pre-norm transformer of `layers` unrolled layers (attention and a GELU MLP) as XLA's
    optimized CPU HLO, and inputs whose per-layer norm offset makes layer `plant_layer`'s
    variance negative: rsqrt of it is NaN, and that NaN leaves its fusion."""
    import jax
    import jax.numpy as jnp

    d, heads, seq, ff = 64, 4, 32, 128

    def norm(x, offset):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5 - offset)

    def model(x, wqkv, wo, w1, w2, offsets):
        for layer in range(layers):
            h = norm(x, offsets[layer])
            q, k, v = jnp.split(h @ wqkv[layer], 3, -1)
            q, k, v = (t.reshape(seq, heads, d // heads) for t in (q, k, v))
            s = jnp.einsum("qhd,khd->hqk", q, k) / np.sqrt(d // heads)
            p = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -1e30), -1)
            x = x + jnp.einsum("hqk,khd->qhd", p, v).reshape(seq, d) @ wo[layer]
            x = x + jax.nn.gelu(norm(x, offsets[layer]) @ w1[layer]) @ w2[layer]
        return x

    rng = np.random.default_rng(0)
    scale = lambda *s: (rng.standard_normal(s) / np.sqrt(s[-2])).astype(np.float32)  # noqa: E731
    offsets = np.zeros(layers, np.float32)
    offsets[plant_layer] = 1e3
    inputs = [rng.standard_normal((seq, d)).astype(np.float32), scale(layers, d, 3 * d), scale(layers, d, d),
              scale(layers, d, ff), scale(layers, ff, d), offsets]
    if backend == "cpu":
        text = jax.jit(model).lower(*inputs).compile().as_text()
    else:  # four H100s described by the target file, compiled without them (DESIGN §7); one used
        from jax.experimental import topologies
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        target = pathlib.Path(os.environ.get("HLO_ROUNDTRIP_GPU_TARGET", ROOT.parent / "shared" / "gpu_target_h100.txtpb"))
        devices = topologies.get_topology_desc("", "cuda", target_config=target.read_text(), topology="1x1x4").devices
        sharding = NamedSharding(Mesh(np.array(devices[:1]), ("x",)), PartitionSpec())
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in inputs]
        text = jax.jit(model).lower(*specs).compile().as_text()
    path = os.path.join(directory, f"transformer_{backend}_{layers}.hlo")
    pathlib.Path(path).write_text(text)
    return path, inputs


def measure(path: str, inputs: list[np.ndarray] | None) -> dict:
    from converter.hlo.parser import parse_hlo
    from converter.importer.core import ImportOptions
    from converter.importer.nonfinite_monitor import EXHAUSTIVE, FUSIONS_WHOLE, monitor_plan
    from converter.runtime.convert import convert_module
    from converter.runtime.inputs import build_inputs
    from converter.runtime.program import program_from_module
    from converter.tools.nonfinite import find_escaping_nonfinite, find_nonfinite

    hlo = parse_hlo(pathlib.Path(path).read_text(), path)
    compiles: list[float] = []

    def converted_with(scope):
        program = program_from_module(convert_module(hlo, import_options=ImportOptions(find_nonfinite=scope)), hlo, path)
        start = time.perf_counter()
        program.compile()
        compiles.append(time.perf_counter() - start)
        return program

    row = {"instructions": sum(len(c.instructions) for c in hlo.computations),
           "fused rows": sum(i.fusion is not None for i in monitor_plan(hlo, EXHAUSTIVE).items),
           "escaping rows": len(monitor_plan(hlo, FUSIONS_WHOLE).items)}
    start = time.perf_counter()
    plain = program_from_module(convert_module(hlo), hlo, path)
    t = time.perf_counter()
    plain.compile()
    row["plain compile"] = time.perf_counter() - t
    arrays = inputs if inputs is not None else build_inputs(plain, [], None, 0, False)[0]
    plain.execute(arrays)
    row["plain total"] = time.perf_counter() - start

    start = time.perf_counter()
    found = find_nonfinite(converted_with(EXHAUSTIVE), arrays, scope=EXHAUSTIVE)
    row["exhaustive compile"] = compiles.pop()
    row["exhaustive total"] = time.perf_counter() - start
    row["exhaustive first"] = _first(found)

    start = time.perf_counter()
    found = find_escaping_nonfinite(converted_with(FUSIONS_WHOLE), arrays, converted_with)
    row["escaping compiles"] = " + ".join(f"{c:.2f} s" for c in compiles)
    compiles.clear()
    row["escaping total"] = time.perf_counter() - start
    row["escaping first"] = _first(found)
    return row


def _first(found) -> str:
    if not found:
        return "none"
    o = found[0]
    return f"%{o.name} ({o.opcode})" + (f" it {','.join(map(str, o.iterations))}" if o.loops else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated names (catalog 'tpu/complex_linear' or 'transformer')")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--plant-layer", type=int, default=17)
    parser.add_argument("--gpu-python", help="also the transformer dumped for an H100 (deviceless) by this "
                                             "Python, which has jax[cuda12] (e.g. /opt/envs/cuda012/bin/python)")
    parser.add_argument("--write-gpu-dump", metavar="DIR", help=argparse.SUPPRESS)  # what --gpu-python runs
    args = parser.parse_args()
    if args.write_gpu_dump:
        path, inputs = transformer_dump(args.layers, args.plant_layer, args.write_gpu_dump, "gpu")
        np.savez(path + ".inputs.npz", *inputs)
        return
    only = set(args.only.split(",")) if args.only else None
    cases: list[tuple[str, str, list | None]] = [(name, str(ROOT / "tests" / "dumps" / f"{name}.hlo"), None)
                                                 for name in CATALOG if only is None or name in only]
    with tempfile.TemporaryDirectory() as tmp:
        if only is None or "transformer" in only:
            path, inputs = transformer_dump(args.layers, args.plant_layer, tmp)
            cases.append((f"transformer, CPU ({args.layers} layers, NaN in layer {args.plant_layer})", path, inputs))
        if args.gpu_python and (only is None or "transformer-gpu" in only):
            import subprocess

            env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1",
                       XLA_FLAGS="--xla_gpu_enable_triton_gemm=false")
            subprocess.run([args.gpu_python, __file__, "--layers", str(args.layers), "--plant-layer",
                            str(args.plant_layer), "--write-gpu-dump", tmp], check=True, env=env)
            path = os.path.join(tmp, f"transformer_gpu_{args.layers}.hlo")
            with np.load(path + ".inputs.npz") as npz:
                inputs = [npz[f"arr_{i}"] for i in range(len(npz.files))]
            cases.append((f"transformer, H100 ({args.layers} layers, NaN in layer {args.plant_layer})", path, inputs))
        print("| dump | instructions | rows: fused / escaping mode | plain: compile / total | exhaustive: "
              "compile / total | escaping: compile(s) / total | first origin: exhaustive / escaping |")
        print("|---|---|---|---|---|---|---|")
        for name, path, inputs in cases:
            r = measure(path, inputs)
            print(f"| {name} | {r['instructions']} | {r['fused rows']} / {r['escaping rows']} | "
                  f"{r['plain compile']:.2f} s / {r['plain total']:.2f} s | "
                  f"{r['exhaustive compile']:.2f} s / {r['exhaustive total']:.2f} s | "
                  f"{r['escaping compiles']} / {r['escaping total']:.2f} s | "
                  f"{r['exhaustive first']} / {r['escaping first']} |", flush=True)


if __name__ == "__main__":
    main()
