"""strip-annotations (passes/strip_annotations.py) run alone on imported modules: every
annotation-only custom-call goes, its users read its operand, and the numbers are those
of the same program without the annotations (NumPy); a shape-changing one is refused."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.program import program_from_module
from passes import PassError
from passes.lib.rewrite import custom_calls
from passes.strip_annotations import ANNOTATION_TARGETS, NO_RESULT_TARGETS
from tests.helpers import assert_close, convert_then

# The attributes XLA writes on each annotation (a sharding, a placement) — the pass must
# not depend on them.
_EXTRA = {"Sharding": ", sharding={replicated}", "SPMDFullToShardShape": ", sharding={manual}",
          "SPMDShardToFullShape": ", sharding={replicated}",
          "annotate_device_placement": ', frontend_attributes={_xla_buffer_placement="device"}'}


def _annotated(targets: list[str], dtype: str = "f32") -> str:
    """y = exp(x) * x with each annotation in `targets` wrapped in turn around the
    exponential's result (a chain), and one on the parameter."""
    lines = [f"  x = {dtype}[3,5]{{1,0}} parameter(0)",
             f'  x0 = {dtype}[3,5]{{1,0}} custom-call(x), custom_call_target="{targets[0]}"{_EXTRA.get(targets[0], "")}',
             f"  a0 = {dtype}[3,5]{{1,0}} exponential(x0)"]
    last = "a0"
    for i, t in enumerate(targets, start=1):
        lines.append(f'  a{i} = {dtype}[3,5]{{1,0}} custom-call({last}), custom_call_target="{t}"{_EXTRA.get(t, "")}')
        last = f"a{i}"
    lines.append(f"  ROOT y = {dtype}[3,5]{{1,0}} multiply({last}, x0)")
    return "HloModule annotated\nENTRY main {\n" + "\n".join(lines) + "\n}\n"


SHAPE_PRESERVING = [t for t in ANNOTATION_TARGETS if t not in NO_RESULT_TARGETS]


@pytest.mark.parametrize("target", SHAPE_PRESERVING)
def test_each_annotation_is_removed_and_the_program_is_unchanged(target):
    module = convert_then(_annotated([target]), ["strip-annotations"])
    assert not custom_calls(module), str(module)
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    assert_close(program_from_module(module)(x)[0], np.exp(x) * x)


def test_a_chain_of_every_annotation_on_a_bf16_value():
    hlo = _annotated(SHAPE_PRESERVING + SHAPE_PRESERVING[::-1], dtype="bf16")
    before = convert_then(hlo, [])
    assert len(custom_calls(before)) == 2 * len(SHAPE_PRESERVING) + 1
    module = convert_then(hlo, ["strip-annotations"])
    assert not custom_calls(module)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(ml_dtypes.bfloat16)
    # bf16 ops round once each: exp, then the product.
    want = (np.exp(x.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
            * x.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert_close(program_from_module(module)(x)[0], want)


def test_inspect_sharding_without_results_is_erased():
    hlo = """HloModule inspect
ENTRY main {
  x = f32[4]{0} parameter(0)
  c = () custom-call(x), custom_call_target="InspectSharding", custom_call_has_side_effect=true
  ROOT n = f32[4]{0} negate(x)
}
"""
    assert custom_calls(convert_then(hlo, []))
    module = convert_then(hlo, ["strip-annotations"])
    assert not custom_calls(module)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(program_from_module(module)(x)[0], -x)


def test_annotations_of_other_targets_stay():
    """Only the listed targets are annotations: any other custom-call is left for the
    passes (or the policy) after it."""
    hlo = """HloModule other
ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} custom-call(x), custom_call_target="Sharding", sharding={replicated}
  ROOT b = f32[4]{0} custom-call(a), custom_call_target="ShardingLike"
}
"""
    module = convert_then(hlo, ["strip-annotations"])
    targets = [str(op.attributes["call_target_name"]) for op in custom_calls(module)]
    assert targets == ['"ShardingLike"']


def test_a_shape_changing_annotation_is_refused_naming_it():
    hlo = """HloModule spmd
ENTRY main {
  x = f32[4,2]{1,0} parameter(0)
  ROOT s = f32[2,2]{1,0} custom-call(x), custom_call_target="SPMDFullToShardShape", sharding={manual}
}
"""
    with pytest.raises(PassError, match=r"<test>:4:3: .*SPMDFullToShardShape.*changes the shape of its operand"):
        convert_then(hlo, ["strip-annotations"])


def test_shardy_sharding_group_is_erased_and_function_result_sharding_passes_through():
    """The forms jax 0.10-0.12 write before SPMD partitioning (checked on their
    `--xla_dump_to` dumps of jit with shardings and of shard_map)."""
    hlo = """HloModule sdy, num_partitions=2, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2]>}}
ENTRY main {
  x = f32[4]{0} parameter(0), sharding={devices=[2]<=[2]}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}]>"}
  g = () custom-call(x), custom_call_target="xla.sdy.ShardingGroup", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding_group_id="0"}
  n = f32[4]{0} negate(x)
  ROOT r = f32[4]{0} custom-call(n), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}]>]>"}
}
"""
    assert len(custom_calls(convert_then(hlo, []))) == 2
    module = convert_then(hlo, ["strip-annotations"])
    assert not custom_calls(module)


def test_a_shard_map_boundary_that_splits_is_refused_naming_it():
    hlo = """HloModule sm, num_partitions=2
ENTRY main {
  x = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}
  ROOT s = f32[4,4]{1,0} custom-call(x), custom_call_target="xla.sdy.GlobalToLocalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.manual_axes="#sdy<manual_axes{\\"x\\"}>"}
}
"""
    with pytest.raises(PassError, match=r"<test>:4:3: .*xla.sdy.GlobalToLocalShape.*shard_map"):
        convert_then(hlo, ["strip-annotations"])
