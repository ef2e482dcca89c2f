"""The custom-call import rule (rules/custom_call.py) is faithful: with `pipeline="none"`
each HLO custom-call becomes one stablehlo.custom_call that keeps its target, operands,
flattened results, api_version, backend_config (string, opaque bytes, or typed-FFI
dictionary), side effect flag, output-to-operand aliasing, layouts, called computations,
frontend attributes and sharding.  XLA cannot run backend custom-calls, so the oracle is
the HLO text itself: every attribute is read back from the MLIR module and compared with
what the dump says.  Annotation calls that passes make portable are then run and
compared with NumPy (identity: exact)."""

from __future__ import annotations

import numpy as np
import pytest
from jaxlib.mlir import ir

from converter.runtime.convert import convert_text
from tests.helpers import run_ours


def _custom_calls(hlo: str) -> list[ir.Operation]:
    module = convert_text(hlo, "<test>", pipeline="none")
    found: list[ir.Operation] = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "stablehlo.custom_call":
                        found.append(inner.operation)
                    walk(inner.operation)
    walk(module.operation)
    # Keep the module (and its context) alive while callers read the operations.
    _custom_calls.last_module = module
    return found


def _string(op: ir.Operation, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value


def _layouts(op: ir.Operation, name: str) -> list[list[int]]:
    """`[dense<[1, 0]> : tensor<2xindex>, ...]` as [[1, 0], ...]."""
    out = []
    for attr in ir.ArrayAttr(op.attributes[name]):
        text = str(attr)
        inner = text[text.index("<") + 1:text.index(">")].strip("[]")
        out.append([int(v) for v in inner.split(",") if v.strip()])
    return out


def _api_version(op: ir.Operation) -> int:
    text = str(op.attributes["api_version"])
    return int(text.split(":")[0].strip()) if ":" in text else int(text)


API_CASES = [
    ("API_VERSION_ORIGINAL", 1), ("API_VERSION_STATUS_RETURNING", 2), ("API_VERSION_STATUS_RETURNING_UNIFIED", 3),
]


@pytest.mark.parametrize("api_name,api_number", API_CASES)
def test_target_operands_results_and_string_backend_config(api_name, api_number):
    hlo = f"""HloModule custom_call
ENTRY main {{
  x = f32[2,3] parameter(0)
  y = s32[4] parameter(1)
  ROOT c = (f32[3,2], s32[], bf16[5]) custom-call(x, y), custom_call_target="my$target", api_version={api_name}, backend_config="{{\\"alpha\\":1.5,\\"name\\":\\"k\\"}}"
}}
"""
    (op,) = _custom_calls(hlo)
    assert _string(op, "call_target_name") == "my$target"
    assert _api_version(op) == api_number
    assert _string(op, "backend_config") == '{"alpha":1.5,"name":"k"}'
    assert [str(v.type) for v in op.operands] == ["tensor<2x3xf32>", "tensor<4xi32>"]
    # The tuple result is flattened into three results.
    assert [str(r.type) for r in op.results] == ["tensor<3x2xf32>", "tensor<i32>", "tensor<5xbf16>"]
    assert "has_side_effect" not in op.attributes or str(op.attributes["has_side_effect"]) == "false"


def test_typed_ffi_dictionary_backend_config_and_side_effect():
    hlo = """HloModule custom_call_ffi
ENTRY main {
  x = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(x), custom_call_target="ffi_target", api_version=API_VERSION_TYPED_FFI, custom_call_has_side_effect=true, backend_config={attn_heads = 48 : i64, scale = 1.250000e-01 : f32, mode = "causal"}
}
"""
    (op,) = _custom_calls(hlo)
    # As JAX writes a typed-FFI call (XLA reads it back as API_VERSION_TYPED_FFI), and as a
    # portable artifact can carry it (no inherent dictionary).
    assert _api_version(op) == 1 and _string(op, "backend_config") == ""
    config = ir.DictAttr(op.attributes["mhlo.backend_config"])
    assert ir.IntegerAttr(config["attn_heads"]).value == 48
    assert ir.FloatAttr(config["scale"]).value == 0.125
    assert ir.StringAttr(config["mode"]).value == "causal"
    assert ir.BoolAttr(op.attributes["has_side_effect"]).value is True


def test_typed_ffi_with_a_json_config_keeps_its_text():
    hlo = """HloModule custom_call_ffi_json
ENTRY main {
  x = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(x), custom_call_target="ffi_json", api_version=API_VERSION_TYPED_FFI, backend_config="{\\"k\\":2}"
}
"""
    (op,) = _custom_calls(hlo)
    assert "backend_config" not in op.attributes
    assert _string(op, "mhlo.backend_config") == '{"k":2}'


def test_output_operand_aliases_layouts_and_called_computations():
    hlo = """HloModule custom_call_aliases
helper {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3,2]{0,1} parameter(1)
  ROOT c = (f32[2,3]{1,0}, f32[3,2]{0,1}) custom-call(x, y), custom_call_target="inplace", output_to_operand_aliasing={{0}: (0, {}), {1}: (1, {})}, operand_layout_constraints={f32[2,3]{1,0}, f32[3,2]{0,1}}, called_computations={helper}
}
"""
    (op,) = _custom_calls(hlo)
    aliases = [str(a) for a in ir.ArrayAttr(op.attributes["output_operand_aliases"])]
    assert aliases == [
        "#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>",
        "#stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>"]
    # Layouts as minor-to-major index lists, operands and results.
    assert _layouts(op, "operand_layouts") == [[1, 0], [0, 1]]
    assert _layouts(op, "result_layouts") == [[1, 0], [0, 1]]
    called = [str(s) for s in ir.ArrayAttr(op.attributes["called_computations"])]
    assert called == ["@helper"]


def _alias(output: list[int], operand: int) -> str:
    return (f"#stablehlo.output_operand_alias<output_tuple_indices = {output}, operand_index = {operand}, "
            "operand_tuple_indices = []>")


# (result shape, operand shapes, aliasing, expected aliases between flat leaves): the
# imported call's operands and results are the flattened tuple leaves, so an HLO alias
# between nested tuple indices becomes one between flat positions (worked out by hand).
TUPLE_ALIASES = [
    ("(f32[4])", ["f32[4]"], "{{0}: (0, {})}", [_alias([], 0)]),
    ("(f32[4], f32[4])", ["f32[4]", "(f32[4], f32[2])"], "{{0}: (1, {0}), {1}: (0, {})}",
     [_alias([0], 1), _alias([1], 0)]),
    ("((f32[2], f32[4]), f32[4])", ["f32[3]", "(f32[2], (f32[4], f32[4]))"], "{{0,1}: (1, {1,0}), {1}: (1, {1,1})}",
     [_alias([1], 2), _alias([2], 3)]),
    ("((f32[4], f32[2]), s32[])", ["(f32[4], f32[2])"], "{{0}: (0, {})}", [_alias([0], 0), _alias([1], 1)]),
    ("f32[4]", ["f32[3]", "(f32[2], f32[4])"], "{{}: (1, {1})}", [_alias([], 2)]),
]


@pytest.mark.parametrize("result,operands,aliasing,expected", TUPLE_ALIASES, ids=[c[2] for c in TUPLE_ALIASES])
def test_tuple_aliases_become_aliases_between_flat_leaves(result, operands, aliasing, expected):
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(operands))
    args = ", ".join(f"p{i}" for i in range(len(operands)))
    hlo = f"""HloModule tuple_aliases
ENTRY main {{
{params}
  ROOT c = {result} custom-call({args}), custom_call_target="inplace", output_to_operand_aliasing={aliasing}
}}
"""
    (op,) = _custom_calls(hlo)  # the module verifies
    assert [str(a) for a in ir.ArrayAttr(op.attributes["output_operand_aliases"])] == expected


@pytest.mark.parametrize("aliasing,message", [
    ("{{0}: (2, {})}", "names operand 2 of a call with 1 operands"),
    ("{{0}: (0, {3})}", "names a tuple index"),
    ("{{}: (0, {})}", "pairs 2 result leaves with 1 leaves"),
])
def test_impossible_aliases_are_refused_by_line(aliasing, message):
    hlo = f"""HloModule bad_alias
ENTRY main {{
  p = f32[4] parameter(0)
  ROOT c = (f32[4], f32[4]) custom-call(p), custom_call_target="inplace", output_to_operand_aliasing={aliasing}
}}
"""
    with pytest.raises(Exception, match=message) as err:
        convert_text(hlo, "alias.hlo", pipeline="none")
    assert "alias.hlo:4:" in str(err.value)


def test_an_aliased_lapack_call_computes_what_the_plain_call_does():
    """Aliasing says where the result is written, never what it is: a CPU LAPACK
    Cholesky (jaxlib's typed-FFI target) with and without its alias gives the same
    factor, and both match XLA running the aliased module."""
    from converter.runtime.xla_oracle import run_with_xla

    aliased = """HloModule aliased_potrf
ENTRY main {
  a = f32[3,3]{0,1} parameter(0)
  ROOT c = (f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
}
"""
    plain = aliased.replace(", output_to_operand_aliasing={{0}: (0, {})}", "")
    m = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)
    ours, no_alias, xla = run_ours(aliased, [m]), run_ours(plain, [m]), run_with_xla(aliased, [m])
    for got in (ours, xla):
        np.testing.assert_array_equal(got[0], no_alias[0])
        assert int(got[1]) == 0
    # Lower factor (uplo = 'L'): L @ L.T is the input to f32 rounding.
    np.testing.assert_allclose(np.tril(ours[0]) @ np.tril(ours[0]).T, m, rtol=1e-6, atol=1e-6)


def test_dump_layouts_frontend_attributes_and_sharding_are_kept():
    hlo = """HloModule custom_call_layouts
ENTRY main {
  x = f32[4,2]{0,1} parameter(0)
  ROOT c = f32[2,4]{1,0} custom-call(x), custom_call_target="layouty", frontend_attributes={_xla_stream="1"}, sharding={replicated}
}
"""
    (op,) = _custom_calls(hlo)
    # Without operand_layout_constraints the dump's layouts are kept as information.
    assert _layouts(op, "hlo.operand_layouts") == [[0, 1]]
    assert _layouts(op, "hlo.result_layouts") == [[1, 0]]
    assert ir.StringAttr(ir.DictAttr(op.attributes["mhlo.frontend_attributes"])["_xla_stream"]).value == "1"
    assert _string(op, "mhlo.sharding") == "{replicated}"


@pytest.mark.parametrize("target", ["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost",
                                    "MoveToDevice", "LayoutConstraint"])
def test_annotation_custom_calls_run_as_the_identity(target):
    """Annotations (sharding, layout-constraint custom-calls) are identities on values once passes make the module
    portable: the numbers come back unchanged."""
    hlo = f"""HloModule annotation
ENTRY main {{
  x = f32[2,3] parameter(0)
  c = f32[2,3] custom-call(x), custom_call_target="{target}", sharding={{replicated}}
  ROOT n = f32[2,3] negate(c)
}}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, -x)
