"""Tiny HLO modules and inputs for the import-rule tests (tests/importer/test_rules_*.py).

Each builder returns the text of a module with one or a few instructions, so that a
failing case names the rule at fault."""

from __future__ import annotations

from typing import Sequence

import ml_dtypes
import numpy as np

from converter.hlo import dtypes

# Float values where rules go wrong: signed zeros, infinities, NaN, halves (rounding),
# values near the integer types' limits, subnormals and large magnitudes.
SPECIAL_FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0, 3.7, -3.7, 127.5, -128.5,
                  255.5, 300.0, -300.0, 65504.0, 1e-40, -1e-40, 1e30, -1e30, 2.0 ** 31, -(2.0 ** 31),
                  2.0 ** 32, 2.0 ** 63, np.inf, -np.inf, np.nan, -np.nan]


def shape_text(element_type: str, dims: Sequence[int]) -> str:
    return f"{element_type}[{','.join(str(d) for d in dims)}]"


def unary_module(opcode: str, operand_type: str, dims: Sequence[int], result_type: str | None = None,
                 attrs: str = "") -> str:
    result_type = result_type or operand_type
    return f"""HloModule {opcode.replace('-', '_')}
ENTRY main {{
  x = {shape_text(operand_type, dims)} parameter(0)
  ROOT r = {shape_text(result_type, dims)} {opcode}(x){attrs}
}}
"""


def binary_module(opcode: str, lhs_type: str, dims: Sequence[int], result_type: str | None = None,
                  attrs: str = "", rhs_type: str | None = None) -> str:
    result_type = result_type or lhs_type
    rhs_type = rhs_type or lhs_type
    return f"""HloModule {opcode.replace('-', '_')}
ENTRY main {{
  x = {shape_text(lhs_type, dims)} parameter(0)
  y = {shape_text(rhs_type, dims)} parameter(1)
  ROOT r = {shape_text(result_type, dims)} {opcode}(x, y){attrs}
}}
"""


def special_values(element_type: str) -> np.ndarray:
    """SPECIAL_FLOATS (floats, cast with the type's rounding) or the integer type's
    extremes and small values of both signs."""
    dtype = dtypes.numpy_dtype(element_type)
    if element_type == "pred":
        return np.array([False, True, True, False])
    if element_type.startswith(("s", "u")):
        info = integer_info(element_type)
        values = {int(info.min), int(info.max), int(info.min) + 1, int(info.max) - 1, 0, 1, 2, 3, 7}
        values |= {v for v in (-1, -2, -3, -7) if v >= int(info.min)}
        wide = np.uint64 if element_type.startswith("u") else np.int64
        return np.array(sorted(values), dtype=wide).astype(dtype)
    if element_type.startswith("c"):
        re = np.array(SPECIAL_FLOATS[:20], dtype=np.float64)
        return (re + 1j * np.roll(re, 3)).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(SPECIAL_FLOATS, dtype=np.float64).astype(np.float32).astype(dtype)


def integer_info(element_type: str):
    """np.iinfo, also for the sub-byte types (ml_dtypes.iinfo)."""
    dtype = dtypes.numpy_dtype(element_type)
    return np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.iinfo(dtype)


def pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of `values`, as two flat arrays (lhs, rhs)."""
    lhs, rhs = np.meshgrid(values, values, indexing="ij")
    return lhs.reshape(-1), rhs.reshape(-1)


def elementwise_module(name: str, operand_types: Sequence[str], count: int,
                       ops: Sequence[tuple[str, str, str]]) -> str:
    """A module whose parameters are rank-1 arrays of `count` elements of
    `operand_types`, and whose result is the tuple of one instruction per entry of `ops`
    = (result element type, opcode, attribute text), each applied to every parameter.
    One module checks many opcodes (compiles are the slow part of a test); a mismatch
    still names its opcode (see differential_by_output)."""
    params = "\n".join(f"  p{i} = {t}[{count}] parameter({i})" for i, t in enumerate(operand_types))
    args = ", ".join(f"p{i}" for i in range(len(operand_types)))
    lines = "\n".join(f"  r{i} = {rt}[{count}] {opcode}({args}){attrs}" for i, (rt, opcode, attrs) in enumerate(ops))
    result = ", ".join(f"{rt}[{count}]" for rt, _, _ in ops)
    names = ", ".join(f"r{i}" for i in range(len(ops)))
    return f"""HloModule {name}
ENTRY main {{
{params}
{lines}
  ROOT t = ({result}) tuple({names})
}}
"""


def differential_by_output(hlo_text: str, inputs: Sequence[np.ndarray], labels: Sequence[str],
                           exact: Sequence[bool] | None = None) -> list[np.ndarray]:
    """Run through the converter and through XLA; compare output i (named labels[i])
    exactly where exact[i], else within the dtype's tolerance.  Returns ours."""
    from tests.helpers import assert_close, run_ours, run_xla

    ours = run_ours(hlo_text, inputs)
    theirs = run_xla(hlo_text, inputs)
    assert len(ours) == len(theirs) == len(labels)
    failures = []
    for i, (a, e, label) in enumerate(zip(ours, theirs, labels)):
        kwargs = {"rtol": 0.0, "atol": 0.0} if exact is not None and exact[i] else {}
        try:
            assert_close(a, e, what=label, **kwargs)
        except AssertionError as err:
            failures.append(str(err))
    assert not failures, "\n".join(failures)
    return ours


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """XLA's CPU runtime computes with denormals flushed to zero (inputs read as zero):
    a NumPy oracle for float ops must see the same operands."""
    x = np.array(x, copy=True)
    if x.dtype.kind == "f" or x.dtype.name in ("bfloat16",):
        tiny = {2: np.float16(6.1035e-05), 4: np.finfo(np.float32).tiny, 8: np.finfo(np.float64).tiny}
        limit = np.finfo(np.float32).tiny if x.dtype.name == "bfloat16" else tiny[x.dtype.itemsize]
        wide = x.astype(np.float64)
        x[np.abs(wide) < float(limit)] = 0
    return x


def differential_runs(hlo_text: str, input_sets: Sequence[Sequence[np.ndarray]], labels: Sequence[str],
                      exact: Sequence[bool] | None = None) -> list[list[np.ndarray]]:
    """differential_by_output for several inputs of one module, each side compiled once
    (selector and index sweeps).  Returns ours, one list of outputs per input set."""
    from converter.runtime.xla_oracle import xla_program
    from tests.helpers import assert_close, convert_program

    ours_program, xla = convert_program(hlo_text), xla_program(hlo_text)
    results = []
    for inputs in input_sets:
        ours, theirs = ours_program(*inputs), xla(*inputs)
        assert len(ours) == len(theirs) == len(labels)
        for i, (a, e, label) in enumerate(zip(ours, theirs, labels)):
            kwargs = {"rtol": 0.0, "atol": 0.0} if exact is not None and exact[i] else {}
            assert_close(a, e, what=f"{label} for inputs {[np.asarray(x).tolist() for x in inputs][:3]}", **kwargs)
        results.append(ours)
    return results


def xla_integer_division(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """XLA defines what C leaves undefined: x / 0 is -1 (all bits set) and x % 0 is x;
    INT_MIN / -1 is INT_MIN and INT_MIN % -1 is 0; otherwise division truncates toward
    zero and the remainder takes the dividend's sign."""
    dtype = x.dtype
    info = np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.iinfo(dtype)
    signed = int(info.min) < 0
    quotients, remainders = [], []
    for a, d in zip(x.tolist(), y.tolist()):
        if d == 0:
            quotients.append(-1 if signed else int(info.max))
            remainders.append(a)
        elif signed and a == int(info.min) and d == -1:
            quotients.append(int(info.min))
            remainders.append(0)
        else:
            q = abs(a) // abs(d) * (1 if (a >= 0) == (d >= 0) else -1)
            quotients.append(q)
            remainders.append(a - q * d)
    wide = np.int64 if signed else np.uint64
    return np.array(quotients, dtype=wide).astype(dtype), np.array(remainders, dtype=wide).astype(dtype)


def xla_integer_power_is_the_old_one() -> bool:
    """Whether the installed XLA raises integers to powers as the import rule does.  XLA
    changed the semantics between jaxlib 0.10 and 0.12: 0.10.2 uses the low 6 bits of the
    exponent and reads unsigned exponents of 8 bits or more as signed (u8 254 is -2); 0.12
    uses the whole exponent and reads unsigned exponents as unsigned.  The rule follows
    0.10.2 (checked on every s8 and u8 pair); against a newer XLA, integer `power` is left out
    of the differential tests rather than compared with a semantics it does not claim."""
    import jaxlib

    return tuple(int(x) for x in jaxlib.__version__.split(".")[:2]) < (0, 11)


def check_exact(hlo: str, inputs, expected: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Ours == XLA and ours == NumPy, exactly, for each labelled output."""
    outs = differential_by_output(hlo, inputs, list(expected), [True] * len(expected))
    for out, (label, want) in zip(outs, expected.items()):
        assert out.dtype == want.dtype, f"{label}: dtype {out.dtype} != {want.dtype}"
        np.testing.assert_array_equal(out, want, err_msg=label)
    return outs
