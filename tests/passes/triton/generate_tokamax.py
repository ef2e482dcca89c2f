"""Write deviceless H100 dumps of tokamax's Triton kernels, with oracle values from
tokamax's own XLA implementation (or NumPy) on CPU (one .npz each).

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        HLO_ROUNDTRIP_GPU_TARGET=/path/to/gpu_target_h100.txtpb \\
        TRITON_PTXAS_PATH=$NVCC/bin/ptxas TRITON_PTXAS_BLACKWELL_PATH=$NVCC/bin/ptxas \\
        python -m tests.passes.triton.generate_tokamax --out tests/passes/triton/dumps/tokamax

(python: jax[cuda12] 0.12.0.1's with `pip install tokamax` (0.0.17; it needs jax ≥ 0.11,
and jax-triton and triton for its jax-triton kernels); $NVCC as in generate_jax_triton.py.)
tokamax's attention is a Pallas Triton kernel (`__gpu$xla.gpu.triton`, bytecode); its
layer norm and ragged dot are `@triton.jit` kernels called through jax-triton
(`triton_kernel_call_ffi`, IR text).  Deviceless, tokamax's own "cross compile" switch
(`tokamax.config.cross_compile`) turns off its has-a-GPU checks, and each op gets an
explicit block config where its heuristics would ask the local GPU for its core count.
The Triton implementation is forced (`implementation=` the op object, or "triton"); the two
`_grad` cases differentiate through tokamax's own Triton backward kernels (its default VJPs).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from tests.passes.triton.generate import (_give_pallas_an_h100, h100_devices, npz_arrays, output_folder,
                                          relative_kernel_sources)
from tests.passes.triton.generate_jax_triton import relativize_opaque
from tests.programs.generate import ROOT, relativize_source_paths

SEED = 0
GROUP_SIZES = np.array([10, 21, 3, 30], np.int32)  # rows of lhs per group (64): ragged block edges


def cases():
    """name → (build(triton: bool), inputs, oracle note)."""
    import jax
    from jax.experimental.pallas import triton as _  # noqa: F401  (registers Pallas' Triton lowering)
    from jax._src.interpreters import partial_eval as pe
    from jax_triton import triton_lib

    import tokamax
    from tokamax._src.ops.attention import pallas_triton as tk_attention
    from tokamax._src.ops.attention import pallas_triton_vjp as tk_attention_vjp
    from tokamax._src.ops.gated_linear_unit import triton as tk_glu
    from tokamax._src.ops.normalization import triton as tk_norm
    from tokamax._src.ops.normalization import triton_config as tk_norm_config
    from tokamax._src.ops.normalization import triton_vjp_config as tk_norm_vjp_config
    from tokamax._src.ops.ragged_dot import triton as tk_ragged

    # jax-triton 0.4.1's DCE rule, jax 0.12's signature (as generate_jax_triton.py).
    pe.dce_rules[triton_lib.triton_kernel_call_p] = lambda used, live, eqn: ([True] * len(eqn.invars), eqn)
    highest = jax.lax.Precision.HIGHEST

    def layer_norm(triton):
        if not triton:
            return jax.jit(lambda x, s, o: tokamax.layer_norm(x, s, o, implementation="xla"))
        # tokamax.layer_norm ignores an op object in `implementation` (only names select
        # one): the op is called directly, with layer_norm's defaults.
        op = tk_norm.TritonNormalization(config=tk_norm_config.Config(block_m=4, block_n=None, num_warps=4))
        return jax.jit(lambda x, s, o: op(x=x, scale=s, offset=o, axis=-1, epsilon=1e-6, scale_offset=0.0,
                                          subtract_mean=True))

    def ragged_dot(triton):
        impl = (tk_ragged.TritonRaggedDot(config=tk_ragged.Config(block_m=16, block_n=16, block_k=16, num_warps=4,
                                                                  num_stages=1))
                if triton else "xla")
        return jax.jit(lambda a, b, g: tokamax.ragged_dot(a, b, g, precision=highest, implementation=(impl,)))

    def attention(triton):
        impl = (tk_attention.PallasTritonFlashAttention(config=tk_attention.Config(block_q=16, block_k=16,
                                                                                   num_stages=1, num_warps=4))
                if triton else "xla")

        def fn(q, k, v):
            if triton:
                return impl(q, k, v, is_causal=True, precision=highest)
            return tokamax.dot_product_attention(q, k, v, is_causal=True, precision=highest, implementation=impl)

        return jax.jit(fn)

    def layer_norm_grad(triton):
        """The gradient through tokamax's Triton backward kernel (its default VJP), given an
        explicit block config (its heuristics read the GPU)."""
        if triton:
            vjp = tk_norm.TritonNormalizationVjp(config=tk_norm_vjp_config.Config(block_m=4, block_n=None, num_warps=4))
            op = tk_norm.TritonNormalization(config=tk_norm_config.Config(block_m=4, block_n=None, num_warps=4), vjp=vjp)

            def forward(x, s, o):
                return op(x=x, scale=s, offset=o, axis=-1, epsilon=1e-6, scale_offset=0.0, subtract_mean=True)
        else:
            def forward(x, s, o):
                return tokamax.layer_norm(x, s, o, implementation="xla")
        return jax.jit(jax.grad(lambda x, s, o, w: (forward(x, s, o) * w).sum(), argnums=(0, 1, 2)))

    def attention_grad(triton):
        """The gradient through tokamax's Pallas Triton backward kernels (dq, then dk/dv)."""
        if triton:
            vjp = tk_attention_vjp.PallasTritonFlashAttentionVjp(config=tk_attention_vjp.Config(
                block_m1=16, block_n1=16, block_m2=16, block_n2=16, num_stages=1, num_warps=4))
            impl = tk_attention.PallasTritonFlashAttention(
                config=tk_attention.Config(block_q=16, block_k=16, num_stages=1, num_warps=4), vjp=vjp)

            def forward(q, k, v):
                return impl(q, k, v, is_causal=True, precision=highest)
        else:
            def forward(q, k, v):
                return tokamax.dot_product_attention(q, k, v, is_causal=True, precision=highest, implementation="xla")
        return jax.jit(jax.grad(lambda q, k, v, w: (forward(q, k, v) * w).sum(), argnums=(0, 1, 2)))

    def ragged_dot_grad(triton):
        """d/d(lhs, rhs) through tokamax's Triton ragged dots: its VJP runs the same kernel for
        dlhs (ragged rows) and drhs (ragged contraction), each given the explicit config."""
        import functools

        from tokamax._src.ops.ragged_dot import base as tk_ragged_base

        if triton:
            config = tk_ragged.Config(block_m=16, block_n=16, block_k=16, num_warps=4, num_stages=1)
            inner = lambda *a, **kw: tk_ragged.TritonRaggedDot(config=config)(*a, **kw)  # noqa: E731
            op = tk_ragged.TritonRaggedDot(config=config, vjp=functools.partial(
                tk_ragged_base.vjp, dlhs_ragged_dot=inner, drhs_ragged_dot=inner))
            forward = lambda a, b, g: op(a, b, group_sizes=g, precision=highest)  # noqa: E731
        else:
            forward = lambda a, b, g: tokamax.ragged_dot(a, b, g, precision=highest,  # noqa: E731
                                                         implementation="xla")
        return jax.jit(jax.grad(lambda a, b, g, w: (forward(a, b, g) * w).sum(), argnums=(0, 1)))

    def gated_linear_unit(triton):
        """swish(x @ w[:, 0]) * (x @ w[:, 1]), tokamax's Triton kernel (a jax-triton call)."""
        if triton:
            op = tk_glu.TritonGatedLinearUnit(config=tk_glu.Config(block_m=16, block_n=16, block_k=16, num_warps=4,
                                                                   num_stages=1))
            return jax.jit(lambda x, w: op(x, w, activation=jax.nn.swish, precision=highest))
        return jax.jit(lambda x, w: tokamax.gated_linear_unit(x, w, activation=jax.nn.swish, precision=highest,
                                                             implementation="xla"))

    def f32(*shapes):
        return lambda rng: [rng.standard_normal(s).astype(np.float32) for s in shapes]

    return {
        "tk_layer_norm": (layer_norm, f32((8, 64), 64, 64)),
        "tk_ragged_dot": (ragged_dot, lambda rng: [*f32((64, 32), (4, 32, 48))(rng), GROUP_SIZES]),
        "tk_attention": (attention, f32((1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16))),
        "tk_layer_norm_grad": (layer_norm_grad, f32((8, 64), 64, 64, (8, 64))),
        "tk_attention_grad": (attention_grad, f32((1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16), (1, 32, 2, 16))),
        "tk_gated_linear_unit": (gated_linear_unit, f32((32, 32), (32, 2, 32))),
        "tk_ragged_dot_grad": (ragged_dot_grad,
                               lambda rng: [*f32((64, 32), (4, 32, 48))(rng), GROUP_SIZES, f32((64, 48))(rng)[0]]),
    }


class _H100Cores:
    """jax as tokamax's grid grouping sees it (tokamax/_src/pallas/grid.py reads
    `jax.devices()[0].core_count` to group program ids, also in kernels without heuristics):
    an H100 SXM's 132 SMs.  The grouping only orders the programs; every order computes
    the same values."""

    def __getattr__(self, name):
        import jax

        return getattr(jax, name)

    def devices(self, *args):
        from types import SimpleNamespace

        return [SimpleNamespace(core_count=132)]


def main() -> None:
    import jax
    import jaxlib._hlo as xla_hlo

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    relative_kernel_sources()
    _give_pallas_an_h100()
    import tokamax

    sharding = jax.sharding.SingleDeviceSharding(h100_devices(1)[0])
    out = output_folder(args.out)
    manifest = {}
    import jax_triton
    import triton

    for name, (build, make_inputs) in cases().items():
        inputs = make_inputs(np.random.default_rng(SEED))
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in inputs]
        from tokamax._src.pallas import grid

        real_jax, grid.jax = grid.jax, _H100Cores()
        try:
            with tokamax.config.cross_compile(True):
                compiled = build(True).lower(*specs).compile()
        finally:
            grid.jax = real_jax
        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        text = compiled._executable.xla_executable.hlo_modules()[0].to_string(options)  # noqa: SLF001
        text = relativize_opaque(relativize_source_paths(text))
        assert str(ROOT) not in text
        (out / f"{name}.hlo").write_text(text)
        with jax.default_device(jax.devices("cpu")[0]):
            want = jax.tree_util.tree_leaves(build(False)(*inputs))
        arrays = {f"input{k}": a for k, a in enumerate(inputs)}
        arrays |= {f"output{k}": np.asarray(r) for k, r in enumerate(want)}
        np.savez_compressed(out / f"{name}.npz", **npz_arrays(arrays))
        manifest[name] = {"jax": jax.__version__, "tokamax": tokamax.__version__, "jax_triton": jax_triton.__version__,
                          "triton": triton.__version__, "seed": SEED, "oracle": "tokamax implementation='xla' on CPU"}
        print(name, len(text))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
