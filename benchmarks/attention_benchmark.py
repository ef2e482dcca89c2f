"""Portable attention at the MaxText sample's real shape, on this CPU.

    python benchmarks/attention_benchmark.py [--seq 8192] [--compare-seq 2048]

Builds the sample's Transformer Engine calls (q [1,4,S,48,128], k/v [1,4,S,8,128], bf16,
causal, GQA 6:1), converts them with the default pipeline, and runs one forward and one
backward on random inputs, in a child process whose peak resident memory is reported
(a full score matrix per head would need 4·48·S²·4 bytes: 51.5 GB at S = 8192).  Then, at
--compare-seq, times the same forward+backward against jax.nn.dot_product_attention
(implementation='xla') and its jax.vjp.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def te_module(seq: int, batch: int = 4, heads: int = 48, groups: int = 8, dim: int = 128,
              backward: bool = True) -> str:
    cfg = (f"{{attn_heads = {heads} : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, "
           f"deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = {batch} : i64, "
           f"is_training = true, kv_max_seqlen = {seq} : i64, mask_type = 2 : i64, max_segments_per_seq = 1 : i64, "
           f"num_gqa_groups = {groups} : i64, q_max_seqlen = {seq} : i64, qk_head_dim = {dim} : i64, qkv_layout = 9 : i64, "
           f"scaling_factor = 0.088388347648318433 : f64, v_head_dim = {dim} : i64, window_size_left = -1 : i64, "
           f"window_size_right = -1 : i64}}")
    q = f"bf16[1,{batch},{seq},{heads},{dim}]"
    kv = f"bf16[1,{batch},{seq},{groups},{dim}]"
    aux = f"f32[1,{batch},{heads},{seq},1]"
    return f"""HloModule attention_bench
ENTRY main {{
  q = {q} parameter(0)
  k = {kv} parameter(1)
  v = {kv} parameter(2)
  dout = {q} parameter(3)
  bias = bf16[0] constant({{}})
  seed = u32[2] constant({{0, 0}})
  cu = s32[{batch * 8 + 1}] constant({{{', '.join(['0'] * (batch * 8 + 1))}}})
  e = f32[0] constant({{}})
  fwd = ({q}, {aux}, u32[2,4], u8[1]) custom-call(q, k, v, bias, seed, cu, cu, e, e, e, e, e, e), custom_call_target="te_fused_attn_forward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={cfg}
  o = {q} get-tuple-element(fwd), index=0
  lse = {aux} get-tuple-element(fwd), index=1
  rng = u32[2,4] get-tuple-element(fwd), index=2
  {backward_text(q, kv, cfg) if backward else f"ROOT t = ({q}, {aux}) tuple(o, lse)"}
}}
"""


def backward_text(q: str, kv: str, cfg: str) -> str:
    return f"""bwd = ({q}, {kv}, {kv}, bf16[0], u8[1616904192]) custom-call(q, k, v, bias, lse, rng, o, dout, cu, cu, e, e, e, e, e, e), custom_call_target="te_fused_attn_backward_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={cfg}
  dq = {q} get-tuple-element(bwd), index=0
  dk = {kv} get-tuple-element(bwd), index=1
  dv = {kv} get-tuple-element(bwd), index=2
  ROOT t = ({q}, {q}, {kv}, {kv}) tuple(o, dq, dk, dv)"""


def run_ours(seq: int, backward: bool) -> dict:
    """In this (child) process: convert, compile, run once; times and peak RSS."""
    from converter.runtime.convert import convert_text
    from converter.runtime.program import program_from_module

    start = time.perf_counter()
    program = program_from_module(convert_text(te_module(seq, backward=backward), "attention_bench.hlo"))
    convert = time.perf_counter() - start
    program.compile()
    inputs = program.random_inputs(seed=0)
    device_args = program.to_device(program.check_inputs(inputs))
    start = time.perf_counter()
    program.execute_on_device(device_args)
    run = time.perf_counter() - start
    return {"seq": seq, "convert_s": convert, "compile_s": program.timings["compile"], "run_s": run,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def run_jax(seq: int, batch: int = 4, heads: int = 48, groups: int = 8, dim: int = 128) -> float:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    q, do = (jnp.asarray(rng.standard_normal((batch, seq, heads, dim)), jnp.bfloat16) for _ in range(2))
    k, v = (jnp.asarray(rng.standard_normal((batch, seq, groups, dim)), jnp.bfloat16) for _ in range(2))

    @jax.jit
    def fwd_bwd(q, k, v, do):
        out, vjp = jax.vjp(lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, scale=0.088388347648318433, is_causal=True, implementation="xla"), q, k, v)
        return (out, *vjp(do))

    jax.block_until_ready(fwd_bwd(q, k, v, do))
    start = time.perf_counter()
    jax.block_until_ready(fwd_bwd(q, k, v, do))
    return time.perf_counter() - start


def child(seq: int, backward: bool) -> dict:
    """One measurement in a fresh process, so that its peak RSS is its own."""
    args = [sys.executable, __file__, "--child", str(seq)] + ([] if backward else ["--forward-only"])
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr[-3000:])
        raise SystemExit(f"the child run at seq {seq} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--compare-seq", type=int, default=2048)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--forward-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_ours(args.child, backward=not args.forward_only)))
        return
    for seq, compare in ((args.seq, False), (args.compare_seq, True)):
        forward = child(seq, backward=False)
        both = child(seq, backward=True)
        line = (f"seq {seq}: ours forward {forward['run_s']:.1f} s (peak RSS {forward['peak_rss_gb']:.2f} GB), "
                f"forward+backward {both['run_s']:.1f} s (peak RSS {both['peak_rss_gb']:.2f} GB; "
                f"convert {both['convert_s']:.2f} s, compile {both['compile_s']:.1f} s)")
        if compare:
            line += f"; jax.nn.dot_product_attention (xla) forward+backward {run_jax(seq):.1f} s"
        print(line, flush=True)


if __name__ == "__main__":
    main()
