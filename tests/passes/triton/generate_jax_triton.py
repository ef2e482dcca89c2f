"""Write deviceless H100 dumps of jax-triton kernels (`triton_kernel_call_ffi`: Triton IR
text in a zlib-compressed jax_triton proto), with NumPy oracle values (one .npz each).

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        HLO_ROUNDTRIP_GPU_TARGET=/path/to/gpu_target_h100.txtpb \\
        TRITON_PTXAS_PATH=$NVCC/bin/ptxas TRITON_PTXAS_BLACKWELL_PATH=$NVCC/bin/ptxas \\
        python -m tests.passes.triton.generate_jax_triton --out tests/passes/triton/dumps/jax_triton

(python: jax[cuda12] 0.12.0.1's; $NVCC: its site-packages/nvidia/cuda_nvcc.)  XLA's
deviceless compile assembles each kernel's PTX with jaxlib's ptxas, which rejects the
newer PTX version Triton 3.9's own ptxas allows; pointing Triton at jaxlib's ptxas makes
Triton write a PTX version that one reads.

Needs jax-triton and triton in that environment (pip install jax-triton: jax ≥ 0.11).
Triton compiles each kernel to PTX here (its bundled ptxas needs no GPU); the compute
capability is an H100's (9.0).  jax-triton passes a kernel its operands (arrays and
scalars, in call order) and then its outputs that alias no operand.  The oracle is NumPy on the same inputs: jax-triton has no
interpret mode.
"""

from __future__ import annotations

import argparse
import json
import re

import numpy as np

from tests.passes.triton.generate import h100_devices, npz_arrays, output_folder, relative_kernel_sources
from tests.programs.generate import ROOT, relativize_source_paths

SEED = 0


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def scaled_add(x_ptr, y_ptr, n, scale, o_ptr, BLOCK: tl.constexpr):
        """o = x + scale·y on the first n elements (a ragged last block: masked)."""
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(o_ptr + offs, x + scale * y, mask=mask)

    @triton.jit
    def accumulate(x_ptr, acc_ptr, BLOCK: tl.constexpr):
        """acc += 2·x in place (the output aliases acc: jax-triton passes no pointer of
        its own for it); a 2-D grid over (rows, column blocks)."""
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * 64 + cols)
        a = tl.load(acc_ptr + row * 64 + cols)
        tl.store(acc_ptr + row * 64 + cols, a + 2.0 * x)

    @triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)],
                     key=["n"])
    @triton.jit
    def autotuned_square(x_ptr, n, o_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(o_ptr + offs, x * x, mask=mask)

    @triton.jit
    def fp8_dot(a_ptr, b_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        """o = a·b with fp8 (e4m3fn) a and b and an f32 accumulator (tl.dot of fp8 inputs:
        a Pallas fp8 dot aborts XLA's deviceless compile, this route dumps one)."""
        rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
        tl.store(o_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, out_dtype=tl.float32))

    return scaled_add, accumulate, autotuned_square, fp8_dot


def cases():
    """name → (build, inputs, numpy oracle)."""
    import jax
    import jax_triton as jt
    from jax._src.interpreters import partial_eval as pe
    from jax_triton import triton_lib

    # jax-triton 0.4.1's DCE rule takes (used_outputs, eqn); jax 0.12 calls DCE rules with
    # (used_outputs, live_inputs, eqn).  Same rule (keep every input), jax 0.12's signature.
    pe.dce_rules[triton_lib.triton_kernel_call_p] = lambda used, live, eqn: ([True] * len(eqn.invars), eqn)

    scaled_add, accumulate, autotuned_square, fp8_dot = _kernels()

    def build_scaled_add():
        def fn(x, y):
            return jt.triton_call(x, y, 100, 2.5, kernel=scaled_add,
                                  out_type=jax.ShapeDtypeStruct((100,), np.float32),
                                  grid=(4,), BLOCK=32, compute_capability=90)
        return jax.jit(fn)

    def build_accumulate():
        def fn(x, acc):
            return jt.triton_call(x, acc, kernel=accumulate, out_type=jax.ShapeDtypeStruct((8, 64), np.float32),
                                  grid=(8, 2), BLOCK=32, input_output_aliases={1: 0}, compute_capability=90)
        return jax.jit(fn)

    def build_autotuned():
        def fn(x):
            return jt.triton_call(x, 100, kernel=autotuned_square,
                                  out_type=jax.ShapeDtypeStruct((100,), np.float32),
                                  grid=lambda meta: (-(-100 // meta["BLOCK"]),), compute_capability=90)
        return jax.jit(fn)

    def build_fp8_dot():
        def fn(a, b):
            return jt.triton_call(a, b, kernel=fp8_dot, out_type=jax.ShapeDtypeStruct((16, 16), np.float32),
                                  grid=(1,), M=16, N=16, K=32, compute_capability=90)
        return jax.jit(fn)

    def fp8_inputs(rng):
        import ml_dtypes

        return [(rng.standard_normal(s) * 4).astype(ml_dtypes.float8_e4m3fn) for s in ((16, 32), (32, 16))]

    def fp8_oracle(a, b):
        # fp8 products are exact in f32 (4-bit significands); the f32 sum of K = 32 terms
        # is the GPU's, here in f64 and rounded once (the test's tolerance covers the order)
        return [(a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)]

    def f32(*shapes):
        return lambda rng: [rng.standard_normal(s).astype(np.float32) for s in shapes]

    return {
        "jt_scaled_add": (build_scaled_add, f32(100, 100), lambda x, y: [x + np.float32(2.5) * y]),
        "jt_accumulate": (build_accumulate, f32((8, 64), (8, 64)), lambda x, a: [a + np.float32(2.0) * x]),
        "jt_autotuned": (build_autotuned, f32(100), lambda x: [x * x]),
        "jt_fp8_dot": (build_fp8_dot, fp8_inputs, fp8_oracle),
    }


def relativize_opaque(text: str, renames: dict[str, str] | None = None) -> str:
    """The dump with the repository's and site-packages' absolute paths taken out of each
    call's Triton IR and PTX (Triton records its kernels' source files there, inside the compressed proto,
    where relativize_source_paths cannot reach): decoded, edited, re-encoded as the same
    message (passes/triton/jax_triton_call.py's schema) and recompressed."""
    import zlib

    from converter.hlo.mlir_dicts import parse_mlir_dict
    from passes.triton.jax_triton_call import message_class

    def fix(m: re.Match) -> str:
        message = message_class("TritonAnyKernelCall")()
        message.ParseFromString(zlib.decompress(parse_mlir_dict("{" + m.group(0) + "}")["opaque"]))
        calls = ([message.kernel_call] if message.HasField("kernel_call")
                 else [c.kernel_call for c in message.autotuned_kernel_call.configs])
        for call in calls:
            # the repository's files relative to it, an installed package's (tokamax's)
            # from site-packages, as the Pallas dumps' locations are written
            for field in ("ttir", "ptx"):
                value = getattr(call.kernel, field).replace(str(ROOT) + "/", "")
                for path, name in (renames or {}).items():  # files outside both (a caller's)
                    value = value.replace(path, name)
                setattr(call.kernel, field, re.sub(r'(["\s])/[^"\s]*/site-packages/', r"\1", value))
        data = zlib.compress(message.SerializeToString())
        escaped = "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:02X}" for b in data)
        return f'opaque = "{escaped}"'

    return re.sub(r'opaque = "(?:[^"\\]|\\.)*"', fix, text)


def main() -> None:
    import jax
    import jaxlib._hlo as xla_hlo

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    relative_kernel_sources()
    sharding = jax.sharding.SingleDeviceSharding(h100_devices(1)[0])
    out = output_folder(args.out)
    manifest = {}
    import jax_triton
    import triton

    for name, (build, make_inputs, oracle) in cases().items():
        inputs = make_inputs(np.random.default_rng(SEED))
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in inputs]
        compiled = build().lower(*specs).compile()
        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)  # noqa: SLF001
        text = relativize_opaque(relativize_source_paths(text))
        assert str(ROOT) not in text
        (out / f"{name}.hlo").write_text(text)
        arrays = {f"input{k}": a for k, a in enumerate(inputs)}
        arrays |= {f"output{k}": r for k, r in enumerate(oracle(*inputs))}
        np.savez_compressed(out / f"{name}.npz", **npz_arrays(arrays))
        manifest[name] = {"jax": jax.__version__, "jax_triton": jax_triton.__version__, "triton": triton.__version__,
                          "seed": SEED, "oracle": "numpy"}
        print(name, len(text))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
