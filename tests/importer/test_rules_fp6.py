"""FP6 element types (f6e2m3fn, f6e3m2fn, the MX formats newer XLA prints): parsed, mapped to
ml_dtypes, imported as MLIR's Float6 types, converted to and from wider floats, read and
written through the .npz files.  Running needs jaxlib >= 0.12 (0.10's CPU compiler cannot
lower FP6: an f6 constant aborts it), where XLA itself and ml_dtypes' casts are the oracles;
with older jaxlib running such a module is a clear error.  jaxlib 0.12's CPU compiler
quantizes to FP6, widens constants and moves FP6 arrays, but cannot yet compute with FP6
values inside fusions (test_fp6_arithmetic_is_jaxlibs_compile_error_or_right)."""

from __future__ import annotations

import jaxlib
import ml_dtypes
import numpy as np
import pytest

from converter.hlo import dtypes
from converter.runtime.convert import convert_text
from converter.common.errors import ConverterError
from converter.hlo.parser import parse_hlo
from converter.runtime.program import read_inputs, write_outputs
from tests.helpers import convert_program, run_ours
from tests.importer.hlo_snippets import SPECIAL_FLOATS, differential_by_output

FP6 = {"f6e2m3fn": ml_dtypes.float6_e2m3fn, "f6e3m2fn": ml_dtypes.float6_e3m2fn}
JAXLIB_RUNS_FP6 = tuple(int(x) for x in jaxlib.__version__.split(".")[:2]) >= (0, 12)
needs_fp6_cpu = pytest.mark.skipif(not JAXLIB_RUNS_FP6, reason=f"jaxlib {jaxlib.__version__}'s CPU compiler "
                                   "cannot lower FP6 (test_older_jaxlib_refuses_fp6_by_name covers it)")


def _round_trip_module(t: str, n: int) -> str:
    """f32 → FP6 → f32, the FP6 value itself, and FP6 constants (the largest finite value,
    a subnormal and a negative) widened to bf16."""
    big = float(ml_dtypes.finfo(FP6[t]).max)
    sub = float(ml_dtypes.finfo(FP6[t]).smallest_subnormal)
    return f"""HloModule fp6_{t}
ENTRY main {{
  x = f32[{n}] parameter(0)
  q = {t}[{n}] convert(x)
  back = f32[{n}] convert(q)
  c = {t}[3] constant({{{big}, {sub}, -1.5}})
  cw = bf16[3] convert(c)
  ROOT r = (f32[{n}], {t}[{n}], bf16[3]) tuple(back, q, cw)
}}
"""


@pytest.mark.parametrize("t", sorted(FP6))
def test_fp6_parses_and_imports_as_mlir_float6(t):
    text = _round_trip_module(t, 4)
    module = parse_hlo(text, "fp6")
    c = module.entry.by_name["c"]
    assert c.shape.element_type == t
    assert dtypes.numpy_dtype(t) == np.dtype(FP6[t]) and dtypes.element_type_of(np.dtype(FP6[t])) == t
    assert np.dtype(FP6[t]).kind == "V"  # ml_dtypes' own type: np.savez stores it as raw bytes
    mlir = str(convert_text(text, "fp6", pipeline="default"))
    assert f"tensor<3x{'f6E2M3FN' if t == 'f6e2m3fn' else 'f6E3M2FN'}>" in mlir


def _values(t: str) -> np.ndarray:
    finite = [v for v in SPECIAL_FLOATS if np.isfinite(v) and abs(v) <= float(ml_dtypes.finfo(FP6[t]).max)]
    # XLA's CPU flushes f32 subnormal inputs: leave those out of the ml_dtypes comparison.
    return np.array([v for v in finite if v == 0 or abs(v) >= np.finfo(np.float32).tiny] + [0.3, -0.7, 2.2, 5.9],
                    np.float32)


@needs_fp6_cpu
@pytest.mark.parametrize("t", sorted(FP6))
def test_fp6_quantize_as_xla_and_ml_dtypes_do(t):
    x = _values(t)
    text = f"""HloModule q
ENTRY main {{
  x = f32[{len(x)}] parameter(0)
  ROOT q = {t}[{len(x)}] convert(x)
}}
"""
    (ours,) = differential_by_output(text, [x], ["q"], exact=[True])
    # Independent of XLA: ml_dtypes' round-to-nearest-even cast.
    np.testing.assert_array_equal(ours.view(np.uint8), x.astype(FP6[t]).view(np.uint8))


@needs_fp6_cpu
@pytest.mark.parametrize("t", sorted(FP6))
def test_fp6_constants_widen_as_ml_dtypes_does(t):
    big = float(ml_dtypes.finfo(FP6[t]).max)
    sub = float(ml_dtypes.finfo(FP6[t]).smallest_subnormal)
    text = f"""HloModule dq
ENTRY main {{
  c = {t}[3] constant({{{big}, {sub}, -1.5}})
  ROOT cw = bf16[3] convert(c)
}}
"""
    # XLA's own parser (jaxlib 0.12.0.1) aborts on this FP6 literal, so ml_dtypes is the oracle.
    (cw,) = run_ours(text, [])
    np.testing.assert_array_equal(cw, np.array([big, sub, -1.5], FP6[t]).astype(ml_dtypes.bfloat16))


@needs_fp6_cpu
def test_fp6_inputs_and_outputs_through_npz(tmp_path):
    """FP6 parameters pass through and FP6 results come back, bit for bit, via .npz files
    (np.savez stores them as raw bytes; read_inputs reinterprets them by the parameter)."""
    program = convert_program("""HloModule fp6_io
ENTRY main {
  a = f6e2m3fn[5] parameter(0)
  b = f6e3m2fn[5] parameter(1)
  x = f32[5] parameter(2)
  q = f6e3m2fn[5] convert(x)
  ROOT r = (f6e3m2fn[5], f6e2m3fn[5], f6e3m2fn[5]) tuple(b, a, q)
}
""")
    a = np.array([0.5, -1.25, 7.5, 0, 3], ml_dtypes.float6_e2m3fn)
    b = np.array([28, -0.25, 1.5, 4, -12], ml_dtypes.float6_e3m2fn)
    # in range: out-of-range values have no FP6 encoding (no inf, no NaN) and XLA's CPU and
    # ml_dtypes disagree on them (-0 against saturation)
    x = np.array([0.3, -20, 2.6, 1e-3, 27], np.float32)
    np.savez(tmp_path / "in.npz", arg0=a, arg1=b, arg2=x)
    outs = program(*read_inputs(str(tmp_path / "in.npz"), program))
    write_outputs(str(tmp_path / "out.npz"), outs)
    with np.load(tmp_path / "out.npz") as f:
        got = [f[f"out{i}"].view(np.uint8) for i in range(3)]
    for g, want in zip(got, [b, a, x.astype(ml_dtypes.float6_e3m2fn)]):
        np.testing.assert_array_equal(g, want.view(np.uint8))


@needs_fp6_cpu
@pytest.mark.parametrize("t", sorted(FP6))
def test_fp6_arithmetic_is_jaxlibs_compile_error_or_right(t):
    """jaxlib 0.12.0.1's CPU fusion emitter cannot lower an FP6 value that is computed
    with (widening a parameter, f32 → FP6 → f32 in one fusion): "Failed to translate module
    to LLVM IR".  That is reported as jaxlib's compile error; a jaxlib that compiles it
    must give ml_dtypes' numbers."""
    x = _values(t)
    program = convert_program(_round_trip_module(t, len(x)))
    try:
        back, q, _ = program(x)
    except ConverterError as e:
        assert "jaxlib could not compile the module for CPU" in str(e)
        return
    np.testing.assert_array_equal(q.view(np.uint8), x.astype(FP6[t]).view(np.uint8))
    np.testing.assert_array_equal(back, x.astype(FP6[t]).astype(np.float32))


@pytest.mark.skipif(JAXLIB_RUNS_FP6, reason="this jaxlib runs FP6")
def test_older_jaxlib_refuses_fp6_by_name():
    program = convert_program(_round_trip_module("f6e2m3fn", 2))
    with pytest.raises(ConverterError, match=r"f6e2m3fn \(FP6\).*jaxlib >= 0\.12"):
        program(np.zeros(2, np.float32))
