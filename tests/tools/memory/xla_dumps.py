"""Compile small JAX programs on CPU with XLA's dump flags and keep what XLA writes: the
buffer assignment (split into -buffer-assignment, -values and -live-range files), the
optimized HLO, and jaxlib's memory analysis of the same executable (the oracle).

    python -m tests.tools.memory.xla_dumps OUT_DIR

writes OUT_DIR/xla/... and OUT_DIR/memory_analysis.json ({program: {argument_bytes, ...}}).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys


def _programs():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def mlp(x, w, b):
        h = jnp.tanh(x @ w + b)
        return (h @ w.T).sum(0), h

    def donated(state, g):
        return state - 0.1 * g, jnp.sum(g * g)

    def loop(x, w):
        def body(i, carry):
            a, s = carry
            a = jnp.tanh(a @ w) + i
            return a, s + a.sum()
        return lax.fori_loop(0, 5, body, (x, jnp.float32(0)))

    def softmax_xent(logits, labels):
        logp = jax.nn.log_softmax(logits.astype(jnp.float32))
        order = jnp.argsort(logits, axis=-1)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean(), order

    f32 = jnp.float32
    return {
        "mlp": (jax.jit(mlp), (jnp.ones((64, 128), f32), jnp.ones((128, 128), f32), jnp.ones((128,), f32))),
        "donated": (jax.jit(donated, donate_argnums=0), (jnp.ones((256, 256), f32), jnp.ones((256, 256), f32))),
        "loop": (jax.jit(loop), (jnp.ones((32, 64), f32), jnp.ones((64, 64), f32) / 64)),
        "softmax_xent": (jax.jit(softmax_xent), (jnp.ones((16, 1000), jnp.bfloat16), jnp.zeros((16,), jnp.int32))),
    }


def _main(out: pathlib.Path) -> None:
    stats = {}
    for name, (fn, args) in _programs().items():
        compiled = fn.lower(*args).compile()
        m = compiled.memory_analysis()
        stats[name] = {"argument_bytes": m.argument_size_in_bytes, "output_bytes": m.output_size_in_bytes,
                       "alias_bytes": m.alias_size_in_bytes, "temp_bytes": m.temp_size_in_bytes}
    (out / "memory_analysis.json").write_text(json.dumps(stats, indent=1) + "\n")


def generate(out: pathlib.Path) -> dict[str, dict[str, int]]:
    """Run the programs in a fresh process (XLA reads its flags once) and return the
    memory analysis; the dumps land in out/xla."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={out / 'xla'} --xla_dump_hlo_as_text")
    root = pathlib.Path(__file__).resolve().parents[3]
    subprocess.run([sys.executable, "-m", "tests.tools.memory.xla_dumps", str(out)], cwd=root, env=env, check=True)
    return json.loads((out / "memory_analysis.json").read_text())


def buffer_assignment_path(xla_dir: pathlib.Path, program: str) -> pathlib.Path:
    (path,) = sorted(xla_dir.glob(f"module_*.jit_{program}.*after_optimizations-buffer-assignment.txt"))
    return path


if __name__ == "__main__":
    _main(pathlib.Path(sys.argv[1]))
