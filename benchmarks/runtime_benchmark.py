"""Execution speed of converted dumps against JAX's own CPU program.

    python benchmarks/runtime_benchmark.py [--repeat 20] [--only NAME,...]

For each JAX program: compile it with jax.jit for CPU, dump its optimized HLO, convert the
dump with hlo-roundtrip (default pipeline) and compile it with jaxlib; then time only the
execution of both on the same inputs already on the device (best of --repeat, after a
warm-up) and print the ratio (ours / JAX).  The target is a ratio of at most 1.1.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def _mlp(x, w1, w2, w3):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def _attention(q, k, v):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    mask = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e30), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)


def _conv(x, w):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y).mean(axis=(1, 2))


def _layernorm_gelu(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return jax.nn.gelu((x - m) * jax.lax.rsqrt(v + 1e-5) * g + b)


def _scan_rnn(h, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()
    return jax.lax.scan(step, h, xs)


def _sort_topk(x):
    return jnp.sort(x, axis=-1), jax.lax.top_k(x, 16)


def _mlp_grad(x, w1, w2, w3):
    return jax.grad(lambda *a: _mlp(*a).sum(), argnums=(1, 2, 3))(x, w1, w2, w3)


def _bf16_matmul(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32)


def programs() -> dict[str, tuple[Callable, list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    bf16 = lambda *s: rng.standard_normal(s).astype(jnp.bfloat16)  # noqa: E731
    return {
        "mlp": (_mlp, [f32(256, 1024), f32(1024, 2048), f32(2048, 1024), f32(1024, 2048)]),
        "mlp_grad": (_mlp_grad, [f32(128, 512), f32(512, 1024), f32(1024, 512), f32(512, 1024)]),
        "attention": (_attention, [f32(4, 256, 8, 64), f32(4, 256, 8, 64), f32(4, 256, 8, 64)]),
        "conv": (_conv, [f32(8, 64, 64, 32), f32(3, 3, 32, 64)]),
        "layernorm_gelu": (_layernorm_gelu, [f32(2048, 1024), f32(1024), f32(1024)]),
        "scan_rnn": (_scan_rnn, [f32(32, 256), f32(64, 32, 256), f32(256, 256)]),
        "sort_topk": (_sort_topk, [f32(512, 1024)]),
        "bf16_matmul": (_bf16_matmul, [bf16(512, 1024), bf16(1024, 512)]),
    }


def best_of(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", help="comma-separated program names")
    args = parser.parse_args()

    from converter.runtime.program import load

    selected = set(args.only.split(",")) if args.only else None
    print(f"{'program':<16} {'jax ms':>9} {'ours ms':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (fn, inputs) in programs().items():
            if selected and name not in selected:
                continue
            jitted = jax.jit(fn)
            compiled = jitted.lower(*inputs).compile()
            dump = pathlib.Path(tmp) / f"{name}.hlo"
            dump.write_text(compiled.as_text())
            on_device = [jax.device_put(x) for x in inputs]
            t_jax = best_of(lambda: jax.block_until_ready(compiled(*on_device)), args.repeat)
            program = load(str(dump))
            device_args = program.to_device(program.check_inputs(inputs))
            t_ours = best_of(lambda: program.execute_on_device(device_args), args.repeat)
            print(f"{name:<16} {t_jax * 1e3:>9.3f} {t_ours * 1e3:>9.3f} {t_ours / t_jax:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
