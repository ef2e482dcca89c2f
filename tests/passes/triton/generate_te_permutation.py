"""Write deviceless H100 dumps of Transformer Engine's MoE permutation Triton kernels
(TE's public `transformer_engine/common/triton/permutation.py`: plain `@triton.jit`
functions needing only triton), called through jax-triton the way TE's JAX wrappers
(`transformer_engine/jax/triton_extensions/permutation.py`) call them: the same
arguments, sizes and strides as compile-time constants, grids, aliases and block sizes.
The oracle is NumPy (tests/passes/triton/test_te_permutation.py computes it).

    git -C TransformerEngine show HEAD:transformer_engine/common/triton/permutation.py > /tmp/te_permutation.py
    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \\
        HLO_ROUNDTRIP_GPU_TARGET=/path/to/gpu_target_h100.txtpb \\
        TRITON_PTXAS_PATH=$NVCC/bin/ptxas TRITON_PTXAS_BLACKWELL_PATH=$NVCC/bin/ptxas \\
        python -m tests.passes.triton.generate_te_permutation --te-source /tmp/te_permutation.py \\
            --out tests/passes/triton/dumps/te_permutation

(python and $NVCC as in generate_jax_triton.py.)  TE's file is read, not copied here.
TE's own lowering (`triton_extensions/utils.py` triton_call_lowering) writes the same
jax-triton proto but with an empty `ttir` (PTX only): such a call is refused by name
(test_te_permutation.py); jax-triton's `triton_call` keeps the IR, which is what these
dumps hold, so the kernels' Triton ops are checked.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib

import numpy as np

from tests.passes.triton.generate import h100_devices, npz_arrays, output_folder, relative_kernel_sources
from tests.passes.triton.generate_jax_triton import relativize_opaque
from tests.programs.generate import ROOT, relativize_source_paths

SEED = 0
TE_PATH = "transformer_engine/common/triton/permutation.py"
TOKENS, EXPERTS, HIDDEN, BLOCK = 12, 4, 48, 8  # two token blocks, the second ragged (12 = 8 + 4)


def routing_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    routing_map = rng.random((TOKENS, EXPERTS)) < 0.45
    routing_map[3] = False  # a token routed nowhere
    return [routing_map.astype(np.int32)]


def cases(te):
    import jax
    import jax_triton as jt
    import triton
    from jax._src.interpreters import partial_eval as pe
    from jax_triton import triton_lib

    # jax-triton 0.4.1's DCE rule, jax 0.12's signature (as generate_jax_triton.py).
    pe.dce_rules[triton_lib.triton_kernel_call_p] = lambda used, live, eqn: ([True] * len(eqn.invars), eqn)
    row_stride = 2 * EXPERTS + 1
    blocks = triton.cdiv(TOKENS, BLOCK)
    i32 = np.int32

    def row_id_map(routing_map):
        """TE's make_row_id_map: pass 1 (per-block cumsum and count), pass 2 (global row
        ids, in place), pass 3 (per token: routed row ids sorted descending by a bitonic
        argsort, their experts, the count; in place)."""
        m, ws = jt.triton_call(
            routing_map, kernel=te._row_id_map_pass_1_kernel,
            out_type=[jax.ShapeDtypeStruct((TOKENS, row_stride), i32), jax.ShapeDtypeStruct((EXPERTS * blocks,), i32)],
            grid=(EXPERTS, blocks), num_tokens=TOKENS, stride_routing_map_token=EXPERTS, stride_routing_map_expert=1,
            stride_row_id_map_token=row_stride, stride_row_id_map_expert=1, BLOCK_SIZE=BLOCK,
            compute_capability=90)
        m, ws = jt.triton_call(
            m, ws, kernel=te._row_id_map_pass_2_kernel,
            out_type=[jax.ShapeDtypeStruct(m.shape, i32), jax.ShapeDtypeStruct(ws.shape, i32)],
            grid=(EXPERTS, blocks), input_output_aliases={0: 0, 1: 1}, num_tokens=TOKENS,
            stride_row_id_map_token=row_stride, stride_row_id_map_expert=1,
            WORKSPACE_LOAD_WIDTH=triton.next_power_of_2(EXPERTS * blocks), BLOCK_SIZE=BLOCK, compute_capability=90)
        return jt.triton_call(
            m, kernel=te._row_id_map_pass_3_kernel, out_type=jax.ShapeDtypeStruct(m.shape, i32), grid=(TOKENS,),
            input_output_aliases={0: 0}, stride_row_id_map_token=row_stride, stride_row_id_map_expert=1,
            num_experts=EXPERTS, LOAD_SIZE=triton.next_power_of_2(EXPERTS), compute_capability=90)

    def permute(inp, routing_map, probs):
        """TE's permute_with_mask_map with probs (no padding, no scales): each token's row
        to each of its experts' slots, its prob beside it (a zero prob zeroes the row)."""
        m = row_id_map(routing_map)
        out_tokens = int(routing_inputs(np.random.default_rng(SEED))[0].sum())
        dummy = np.zeros((1,), np.float32)
        block = min(c.kwargs["BLOCK_SIZE"] for c in te._permute_kernel.configs)  # TE's _get_min_block_size
        return jt.triton_call(
            inp, m, probs, dummy, dummy, dummy.astype(i32), dummy, dummy, kernel=te._permute_kernel.fn,
            out_type=[jax.ShapeDtypeStruct((out_tokens, HIDDEN), np.float32),
                      jax.ShapeDtypeStruct((out_tokens,), np.float32)],
            grid=(TOKENS, triton.cdiv(HIDDEN, block)), scale_hidden_dim=0, num_tokens=TOKENS,
            num_out_tokens=out_tokens, stride_row_id_map_token=row_stride, stride_row_id_map_expert=1,
            stride_input_token=HIDDEN, stride_input_hidden=1, stride_output_token=HIDDEN, stride_output_hidden=1,
            stride_probs_token=EXPERTS, stride_probs_expert=1, stride_scale_token=HIDDEN, stride_scale_hidden=1,
            stride_permuted_probs_token=1, stride_permuted_scale_token=HIDDEN, stride_permuted_scale_hidden=1,
            num_experts=EXPERTS, hidden_size=HIDDEN, PERMUTE_PROBS=True, PERMUTE_SCALE=False, FUSION_PAD=False,
            BLOCK_SIZE=block, compute_capability=90)

    def permute_inputs(rng):
        (routing_map,) = routing_inputs(rng)
        inp = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
        probs = (rng.random((TOKENS, EXPERTS)) * routing_map).astype(np.float32)
        probs[0, np.argmax(routing_map[0])] = 0.0  # a routed slot with prob 0: TE zeroes its row
        return [inp, routing_map, probs]

    return {"te_row_id_map": (jax.jit(row_id_map), routing_inputs),
            "te_permute": (jax.jit(permute), permute_inputs)}


def main() -> None:
    import jax
    import jaxlib._hlo as xla_hlo

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--te-source", required=True, help="TE's transformer_engine/common/triton/permutation.py")
    parser.add_argument("--te-commit", default="", help="the TE commit the file is from (recorded)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("transformer_engine_permutation", args.te_source)
    te = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(te)  # type: ignore[union-attr]
    relative_kernel_sources()
    sharding = jax.sharding.SingleDeviceSharding(h100_devices(1)[0])
    out = output_folder(args.out)
    manifest = {}
    import jax_triton
    import triton

    for name, (fn, make_inputs) in cases(te).items():
        inputs = make_inputs(np.random.default_rng(SEED))
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in inputs]
        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        text = fn.lower(*specs).compile()._executable.xla_executable.hlo_modules()[0].to_string(options)  # noqa: SLF001
        # TE's file sits outside the repository: its locations name it by its path in TE
        source = str(pathlib.Path(args.te_source).resolve())
        text = relativize_opaque(relativize_source_paths(text), {source: TE_PATH})
        assert str(ROOT) not in text and source not in text
        (out / f"{name}.hlo").write_text(text)
        np.savez_compressed(out / f"{name}.npz", **npz_arrays({f"input{k}": a for k, a in enumerate(inputs)}))
        manifest[name] = {"jax": jax.__version__, "jax_triton": jax_triton.__version__, "triton": triton.__version__,
                          "transformer_engine": args.te_commit, "seed": SEED, "oracle": "numpy (in the test)"}
        print(name, len(text))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
