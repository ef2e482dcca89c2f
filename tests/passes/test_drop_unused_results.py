"""drop-unused-results (passes/drop_unused_results.py) run alone on imported modules: an
unread GPU workspace result and unread results of stablehlo.if / stablehlo.case go (the
branches stop returning them), read ones stay, and the numbers are XLA's for the same HLO
(conditionals) or NumPy's (a GEMM call, once the cuBLAS rewrite has run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converter.runtime.program import program_from_module
from passes.lib.rewrite import custom_calls
from tests.helpers import assert_all_close, assert_close, convert_then, ops_named, run_xla

_BRANCH = """{name} {{
  p = (f32[4]{{0}}, f32[4]{{0}}) parameter(0)
  a = f32[4]{{0}} get-tuple-element(p), index=0
  b = f32[4]{{0}} get-tuple-element(p), index=1
  r0 = f32[4]{{0}} {op0}(a, b)
  r1 = f32[4]{{0}} {op1}(a, b)
  r2 = f32[4]{{0}} {op2}(a)
  ROOT t = (f32[4]{{0}}, f32[4]{{0}}, f32[4]{{0}}) tuple(r0, r1, r2)
}}
"""
BRANCHES = (_BRANCH.format(name="first", op0="add", op1="multiply", op2="exponential")
            + _BRANCH.format(name="second", op0="subtract", op1="divide", op2="negate")
            + _BRANCH.format(name="third", op0="maximum", op1="minimum", op2="abs"))


def conditional(selector: str, used: list[int]) -> str:
    """A 3-result conditional of which the entry reads the results `used`."""
    if selector == "pred":
        head = "  c = pred[] parameter(0)"
        call = "conditional(c, p, p), true_computation=first, false_computation=second"
    else:
        head = "  c = s32[] parameter(0)"
        call = "conditional(c, p, p, p), branch_computations={first, second, third}"
    reads = "\n".join(f"  g{i} = f32[4]{{0}} get-tuple-element(r), index={i}" for i in used)
    root = ", ".join(f"g{i}" for i in used)
    return f"""HloModule branches
{BRANCHES}
ENTRY main {{
{head}
  x = f32[4]{{0}} parameter(1)
  y = f32[4]{{0}} parameter(2)
  p = (f32[4]{{0}}, f32[4]{{0}}) tuple(x, y)
  r = (f32[4]{{0}}, f32[4]{{0}}, f32[4]{{0}}) {call}
{reads}
  ROOT o = ({", ".join(["f32[4]{0}"] * len(used))}) tuple({root})
}}
"""


def _branch_op(module):
    (op,) = ops_named(module, "stablehlo.if") + ops_named(module, "stablehlo.case")
    return op


@pytest.mark.parametrize("selector, used", [("pred", [1]), ("pred", [2, 0]), ("index", [0, 2]), ("index", [1]),
                                            ("index", [0, 1, 2])])
def test_unread_branch_results_are_dropped_and_the_numbers_are_xlas(selector, used):
    hlo = conditional(selector, used)
    assert len(_branch_op(convert_then(hlo, [])).results) == 3
    module = convert_then(hlo, ["drop-unused-results"])
    op = _branch_op(module)
    assert len(op.results) == len(set(used))
    for region in op.regions:  # every branch returns only what is read
        assert len(list(region.blocks[0].operations)[-1].operands) == len(set(used))
    program = program_from_module(module)
    rng = np.random.default_rng(len(used))
    x, y = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32) + 3
    # Every branch, and an out-of-range index (runs the last branch, as XLA does).
    choices = [np.bool_(True), np.bool_(False)] if selector == "pred" else [np.int32(i) for i in (0, 1, 2, 7, -1)]
    for c in choices:
        inputs = [np.asarray(c), x, y]
        assert_all_close(program(*inputs), run_xla(hlo, inputs))


def _gemm(results: str, root: str, extra: str = "") -> str:
    config = json.dumps({"gemm_backend_config": {
        "alpha_real": 1.0, "alpha_imag": 0.0, "beta": 0.0,
        "dot_dimension_numbers": {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
                                  "lhs_batch_dimensions": [], "rhs_batch_dimensions": []},
        "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"], "algorithm": "ALG_UNSET"},
        "epilogue": "DEFAULT"}}, separators=(",", ":"))
    return f"""HloModule gemm
ENTRY main {{
  a = f32[3,4]{{1,0}} parameter(0)
  b = f32[4,5]{{1,0}} parameter(1)
  g = {results} custom-call(a, b), custom_call_target="__cublas$gemm"{extra}, backend_config={config}
  {root}
}}
"""


GEMM = _gemm("(f32[3,5]{1,0}, s8[1024]{0})", "ROOT d = f32[3,5]{1,0} get-tuple-element(g), index=0")


def test_an_unread_workspace_is_dropped_and_the_gemm_still_computes_a_times_b():
    before = custom_calls(convert_then(GEMM, []))
    assert [len(op.results) for op in before] == [2]
    module = convert_then(GEMM, ["drop-unused-results"])
    (op,) = custom_calls(module)
    assert [str(r.type) for r in op.results] == ["tensor<3x5xf32>"]
    if "result_layouts" in op.attributes:  # one layout per remaining result
        assert len(op.attributes["result_layouts"]) == 1
    from passes import run_pipeline

    run_pipeline(module, ["cublas-gemm"])
    assert not custom_calls(module)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(program_from_module(module)(a, b)[0], a @ b)


def test_a_read_workspace_and_other_calls_stay():
    read = _gemm("(f32[3,5]{1,0}, s8[1024]{0})", "ROOT w = s8[1024]{0} get-tuple-element(g), index=1")
    (op,) = custom_calls(convert_then(read, ["drop-unused-results"]))
    assert len(op.results) == 2
    # A trailing s8 vector of a target that is no GPU library call is a real result.
    other = GEMM.replace("__cublas$gemm", "__my_backend$op")
    (op,) = custom_calls(convert_then(other, ["drop-unused-results"]))
    assert len(op.results) == 2
