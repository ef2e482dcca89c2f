"""TPU async collective fusions (AsyncCollectiveStart/Done) become one all-gather each.

The sample `tpu_spmd_mlp_async_collective_fusion.hlo` is run at a reduced size (every
dimension scaled down, the program text otherwise untouched) against a NumPy reference
of the MLP the dump computes; the full size is a slow test.
"""

import re

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from tests.conftest import SAMPLES
from tests.helpers import assert_close

SAMPLE = SAMPLES / "tpu_spmd_mlp_async_collective_fusion.hlo"
SCALE = {"32": "2", "512": "4", "4096": "16", "3584": "12", "14336": "48"}


def scaled_sample() -> str:
    def shrink(m: re.Match) -> str:
        dims = ",".join(SCALE.get(d, d) for d in m.group(2).split(",")) if m.group(2) else ""
        return m.group(1) + dims + "]"

    return re.sub(r"\b((?:f32|bf16|s32|u32|pred)\[)([\d,]*)\]", shrink, SAMPLE.read_text())


def mlp_reference(arg0, arg1, arg2, arg3):
    """Per device d: silu((x_d·W3ᵀ)·(x_d·W1ᵀ))·W0ᵀ, the weights converted to bf16 and
    all-gathered (W1, W3 along rows, W0 along columns), as the dump computes."""
    bf = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    w1 = np.concatenate([bf(a) for a in arg1], axis=0)
    w3 = np.concatenate([bf(a) for a in arg3], axis=0)
    w0 = np.concatenate([bf(a) for a in arg0], axis=1)
    outs = []
    for x in arg2.astype(np.float64):
        h = (x @ w3.T) * (x @ w1.T)
        g = h / (1 + np.exp(-h))
        outs.append(g @ w0.T)
    return np.stack(outs).astype(np.float32)


def _count(text: str, needle: str) -> int:
    return len(re.findall(needle, text))


def test_chains_become_one_all_gather_per_weight():
    module = convert_text(scaled_sample(), "scaled.hlo")
    text = str(module)
    assert "custom_call" not in text
    assert _count(text, r"stablehlo\.all_gather") == 3  # one per weight
    assert "AsyncCollective" not in text


def test_scaled_sample_matches_numpy_reference():
    program = program_from_module(convert_text(scaled_sample(), "scaled.hlo"))
    assert program.num_devices == 4
    inputs = program.random_inputs(seed=3)
    (out,) = program(*inputs)
    # f32 activations against bf16 weights (exact in f32) with f32 accumulation over
    # 16-48 terms; the reference accumulates in f64.
    assert_close(out, mlp_reference(*inputs), rtol=1e-4, atol=1e-4)


def test_flag_read_by_compute_is_an_error():
    text = scaled_sample().replace(
        "ROOT tuple = (f32[2,4,16]{2,1,0:T(8,128)}) tuple(fusion)",
        "flag = u32[]{:S(2)} get-tuple-element(async-collective-start), index=5\n"
        "  ROOT tuple = (f32[2,4,16]{2,1,0:T(8,128)}, u32[]{:S(2)}) tuple(fusion, flag)")
    with pytest.raises(Exception, match="flag result 5 is read by"):
        convert_text(text, "scaled.hlo")


@pytest.mark.slow
def test_full_size_sample_matches_numpy_reference():
    program = program_from_module(convert_text(SAMPLE.read_text(), str(SAMPLE)))
    inputs = program.random_inputs(seed=0)
    (out,) = program(*inputs)
    assert_close(out, mlp_reference(*inputs), rtol=2e-3, atol=2e-3)


def _two_chains(carried: str) -> str:
    """A Done carrying two all-gathers of one kind and shape from different chains: its own
    (chain 0, over Start's input) and another chain's (chain 1, over y)."""
    return f"""HloModule two_chains, replica_count=1, num_partitions=2

ENTRY main {{
  x = f32[2,4]{{1,0}} parameter(0)
  y = f32[2,4]{{1,0}} parameter(1)
  ag.x = f32[4,4]{{1,0}} all-gather(x), channel_id=1, replica_groups={{{{0,1}}}}, dimensions={{0}}, use_global_device_ids=true, frontend_attributes={{chain_id="0"}}
  start = (f32[2,4]{{1,0}}, f32[4,4]{{1,0}}, s32[2]{{0}}, u32[]) custom-call(ag.x), custom_call_target="AsyncCollectiveStart"
  gx = f32[2,4]{{1,0}} get-tuple-element(start), index=0
  buf = f32[4,4]{{1,0}} get-tuple-element(start), index=1
  f0 = s32[2]{{0}} get-tuple-element(start), index=2
  f1 = u32[] get-tuple-element(start), index=3
  ag.y = f32[4,4]{{1,0}} all-gather(y), channel_id=2, replica_groups={{{{0,1}}}}, dimensions={{0}}, use_global_device_ids=true, frontend_attributes={{chain_id="1"}}
  ag.x2 = f32[4,4]{{1,0}} all-gather(gx), channel_id=1, replica_groups={{{{0,1}}}}, dimensions={{0}}, use_global_device_ids=true, frontend_attributes={{chain_id="0"}}
  ROOT done = f32[4,4]{{1,0}} custom-call(gx, buf, {carried}, f0, f1), custom_call_target="AsyncCollectiveDone"
}}
"""


@pytest.mark.parametrize("carried", ["ag.y, ag.x2", "ag.x2, ag.y"])
def test_done_completes_the_collective_of_its_own_chain(carried):
    """Of two same-kind, same-shape collectives a Done carries, the one of Start's chain_id
    is its result, in either operand order: every device gets x gathered, never y."""
    program = program_from_module(convert_text(_two_chains(carried), "two_chains.hlo"))
    x = np.arange(16, dtype=np.float32).reshape(2, 2, 4)
    y = -x - 100
    (out,) = program(x, y)
    gathered = np.concatenate([x[0], x[1]])
    np.testing.assert_array_equal(out, np.stack([gathered, gathered]))  # moved bits: exact
