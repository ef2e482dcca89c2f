"""Per-device memory of converted dumps against what the original needed.

    python benchmarks/memory_benchmark.py [--maxtext]

For each dump: the converted module compiled for CPU by jaxlib (its memory analysis:
arguments, outputs, aliased, temporaries, and the total a device holds = arguments +
outputs - aliased + temporaries), beside the original's figures where the repository has
them: the TPU SPMD sample's buffer assignment (XLA's own file), and for the MaxText sample
the 80 GB of the H100s it ran on.  Also a few catalog programs against JAX's own CPU
executable of the same program.  Not a test: compiles take minutes on the big samples.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from converter.runtime.program import device_bytes  # noqa: E402

GIB = 1 << 30


def _row(name: str, ours: dict[str, int], original: str, ratio: str) -> None:
    print(f"{name:<44} {ours['argument_bytes'] / GIB:>8.3f} {ours['output_bytes'] / GIB:>8.3f} "
          f"{ours['alias_bytes'] / GIB:>8.3f} {ours['temp_bytes'] / GIB:>8.3f} {device_bytes(ours) / GIB:>8.3f}  "
          f"{original:<28} {ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--maxtext", action="store_true", help="also the 16-device MaxText sample (about a minute)")
    args = parser.parse_args()

    from converter.runtime.program import configure_cpu_devices

    configure_cpu_devices(16 if args.maxtext else 4)  # JAX fixes the count once: the most any dump needs
    from converter.tools.memory.analysis import summarize
    from converter.tools.memory.parser import load_buffer_assignment
    from converter.runtime.program import load

    print(f"{'dump (GiB per device)':<44} {'args':>8} {'outs':>8} {'aliased':>8} {'temps':>8} {'total':>8}  "
          f"{'original':<28} ours/original")
    sample = ROOT / "samples" / "tpu_spmd_mlp_async_collective_fusion.hlo"
    original = summarize(load_buffer_assignment(str(sample.with_suffix(".buffer_assignment.txt"))))
    ours = load(str(sample)).compile_only()
    _row(sample.stem, ours, f"temps {original.temp_bytes / GIB:.3f} (TPU buffer assignment)",
         f"temps {ours['temp_bytes'] / original.temp_bytes:.2f}x")
    if args.maxtext:
        maxtext = ROOT / "samples" / "gpu_maxtext_train_step_te_fused_attention.hlo"
        ours = load(str(maxtext)).compile_only()
        device = 80e9
        _row(maxtext.stem, ours, "80 GB H100", f"total {device_bytes(ours) / device:.2f}x")

    import jax
    import jax.numpy as jnp

    def mlp_step(w1, w2, x):
        def loss(w1, w2):
            return jnp.mean(jnp.tanh(x @ w1) @ w2)
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    def scan_layers(ws, x):
        def body(h, w):
            return jnp.tanh(h @ w), None
        return jax.lax.scan(body, x, ws)[0]

    import tempfile

    programs = {
        "mlp_step (donated weights)": (jax.jit(mlp_step, donate_argnums=(0, 1)),
                                       (jnp.ones((1024, 1024)), jnp.ones((1024, 1024)), jnp.ones((256, 1024)))),
        "scan_layers bf16": (jax.jit(scan_layers), (jnp.ones((8, 512, 512), jnp.bfloat16),
                                                    jnp.ones((128, 512), jnp.bfloat16))),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (fn, inputs) in programs.items():
            compiled = fn.lower(*inputs).compile()
            m = compiled.memory_analysis()
            theirs = {"argument_bytes": m.argument_size_in_bytes, "output_bytes": m.output_size_in_bytes,
                      "alias_bytes": m.alias_size_in_bytes, "temp_bytes": m.temp_size_in_bytes}
            path = pathlib.Path(tmp) / "dump.hlo"
            path.write_text(compiled.as_text())
            ours = load(str(path)).compile_only()
            _row(name, ours, f"JAX CPU total {device_bytes(theirs) / GIB:.3f}",
                 f"total {device_bytes(ours) / max(1, device_bytes(theirs)):.2f}x")


if __name__ == "__main__":
    main()
