"""Ops whose written result type differs from the type their operands compute in (XLA's
TPU "float_type_correction" inside fusions: f32 operands, a bf16 result): the importer
computes in the operands' type and converts the result (type_correction.FOLLOWS_OPERAND_0/1 and the
POSITIONAL ops).  Generated over the class: every elementwise and data-movement opcode of
FOLLOWS_OPERAND_0 that NumPy can compute, select and clamp (which follow operand 1), and a
reduce, each with f32 operands and a bf16 result.  Oracle: NumPy in f32, rounded to bf16
once at the end (XLA's CPU verifier rejects such modules, so XLA cannot be the oracle).
The operands are random f32 values, most not representable in bf16, so computing in bf16
(rounding the operands first) differs in the last bits: the correctly rounded ops (IEEE
arithmetic, sqrt, and the exact ones) are compared bit for bit; the transcendental ones
within bf16's tolerance (the f32 results of XLA's approximations and NumPy's may round to
neighbouring bf16 values)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.importer.type_correction import FOLLOWS_OPERAND_0
from tests.helpers import assert_close, run_ours
from tests.importer.hlo_snippets import binary_module, unary_module

BF16 = ml_dtypes.bfloat16
_RNG = np.random.default_rng(11)
X = (_RNG.standard_normal((2, 3)) * 3).astype(np.float32)
Y = (np.sign(_RNG.standard_normal((2, 3))) * _RNG.uniform(0.5, 4, (2, 3))).astype(np.float32)  # no zeros
# Correctly rounded in f32 on both sides (or exact): bit for bit after the one bf16 rounding.
EXACT = {"negate", "abs", "floor", "ceil", "sign", "round-nearest-even", "sqrt",
         "add", "subtract", "multiply", "divide", "maximum", "minimum"}

UNARY = {
    "negate": np.negative, "abs": np.abs, "exponential": np.exp, "tanh": np.tanh, "sine": np.sin,
    "cosine": np.cos, "floor": np.floor, "ceil": np.ceil, "sign": np.sign,
    "log": np.log, "sqrt": np.sqrt, "exponential-minus-one": np.expm1, "round-nearest-even": np.rint,
}
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2}
# Data movement: (the op text after the operand, NumPy).
MOVES = {
    "reshape": ("f32[2,3]", "bf16[3,2]", "", lambda a: a.reshape(3, 2)),
    "transpose": ("f32[2,3]", "bf16[3,2]", ", dimensions={1,0}", lambda a: a.T),
    "broadcast": ("f32[2,3]", "bf16[4,2,3]", ", dimensions={1,2}", lambda a: np.broadcast_to(a, (4, 2, 3))),
    "slice": ("f32[2,3]", "bf16[2,2]", ", slice={[0:2], [1:3]}", lambda a: a[:, 1:3]),
    "reverse": ("f32[2,3]", "bf16[2,3]", ", dimensions={1}", lambda a: a[:, ::-1]),
    "copy": ("f32[2,3]", "bf16[2,3]", "", lambda a: a),
}


def _check(opcode: str, out: np.ndarray, f32_result: np.ndarray) -> None:
    assert out.dtype == BF16
    want = np.asarray(f32_result, np.float32).astype(BF16)
    if opcode in EXACT:
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16), err_msg=opcode)
    else:
        assert_close(out, want, what=opcode)


def _unary_input(opcode: str) -> np.ndarray:
    return np.abs(X) + 0.5 if opcode in ("log", "sqrt") else X


def test_the_generated_class_covers_the_opcodes_numpy_can_compute():
    covered = set(UNARY) | set(BINARY) | set(MOVES)
    assert covered <= FOLLOWS_OPERAND_0
    assert len(covered) >= 25
    # The operands are not all bf16 values, so a bf16 computation would show.
    assert (X.astype(BF16).astype(np.float32) != X).mean() > 0.5


@pytest.mark.parametrize("opcode", sorted(UNARY))
def test_unary_with_f32_operand_and_bf16_result(opcode):
    x = _unary_input(opcode)
    (out,) = run_ours(unary_module(opcode, "f32", [2, 3], "bf16"), [x])
    _check(opcode, out, UNARY[opcode](x))


@pytest.mark.parametrize("opcode", sorted(BINARY))
def test_binary_with_f32_operands_and_bf16_result(opcode):
    (out,) = run_ours(binary_module(opcode, "f32", [2, 3], "bf16"), [X, Y])
    _check(opcode, out, BINARY[opcode](X, Y))


@pytest.mark.parametrize("opcode", sorted(MOVES))
def test_data_movement_with_f32_operand_and_bf16_result(opcode):
    operand, result, attrs, fn = MOVES[opcode]
    hlo = f"HloModule m\nENTRY e {{\n  x = {operand} parameter(0)\n  ROOT r = {result} {opcode}(x){attrs}\n}}\n"
    (out,) = run_ours(hlo, [X])
    np.testing.assert_array_equal(out.astype(np.float32), np.ascontiguousarray(fn(X)).astype(BF16).astype(np.float32))


def test_select_and_clamp_follow_operand_1_and_reduce_its_inputs():
    hlo = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = pred[2,3] parameter(0)
  x = f32[2,3] parameter(1)
  y = f32[2,3] parameter(2)
  lo = f32[] constant(-1)
  hi = f32[] constant(1.5)
  z = f32[] constant(0)
  s = bf16[2,3] select(p, x, y)
  c = bf16[2,3] clamp(lo, x, hi)
  w = f32[2,3] parameter(3)
  r = bf16[2] reduce(w, z), dimensions={1}, to_apply=add
  ROOT t = (bf16[2,3], bf16[2,3], bf16[2]) tuple(s, c, r)
}
"""
    p = np.array([[True, False, True], [False, True, False]])
    # 1 + 2^-8 + 2^-8 is 1 + 2^-7 in f32 (exact in bf16); accumulated in bf16 it stays 1
    # (1 + 2^-8 is a tie that rounds to even): the reduce must sum in its inputs' f32.
    w = np.array([[1, 2.0**-8, 2.0**-8], [-2, 2.0**-7, 2.0**-7]], np.float32)
    s, c, r = run_ours(hlo, [p, X, Y, w])
    np.testing.assert_array_equal(s.astype(np.float32), np.where(p, X, Y).astype(BF16).astype(np.float32))
    np.testing.assert_array_equal(c.astype(np.float32), np.clip(X, -1, 1.5).astype(BF16).astype(np.float32))
    np.testing.assert_array_equal(r.astype(np.float32), w.sum(axis=1).astype(BF16).astype(np.float32))
