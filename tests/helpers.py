"""Shared test helpers: run HLO through this converter and through XLA, compare with
tolerances fitted to the dtype."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from converter.runtime.convert import convert_text
from converter.runtime.program import Program, program_from_module
from converter.runtime.xla_oracle import run_with_xla

# (rtol, atol) per dtype, owned by the tests (not the converter's `check` table, which is
# code under test).  Two paths that compute the same ops (ours and XLA's, or ours and
# JAX's) may order, fuse and contract them differently, and each side rounds once per
# op: the allowance is a few units in the last place (ulp = 2^-mantissa bits) of the
# type, relative, with an absolute floor of the same order for results near zero.
TOLERANCES: dict[str, tuple[float, float]] = {
    # 2^-52 ulp: 1e-12 leaves ~4500 ulps, enough for reassociated sums over thousands of
    # terms and LAPACK vs. XLA's own decompositions.
    "float64": (1e-12, 1e-12),
    # 2^-23 = 1.2e-7 ulp: 2e-5 is ~170 ulps; transcendental functions (XLA's polynomial
    # approximations vs. libm), reductions reassociated into vectors, and FMA contraction
    # each cost a few ulps per op along a chain of ops.
    "float32": (2e-5, 1e-5),
    # Each part a float32 (above); a complex product adds two rounded products.
    "complex64": (2e-5, 1e-5),
    # Each part a float64 (above).
    "complex128": (1e-12, 1e-12),
    # 2^-10 = 9.8e-4 ulp: 4e-3 is 4 ulps (one rounding per side and one per intermediate
    # cast to float16 that only one side does).
    "float16": (4e-3, 2e-3),
    # 2^-7 = 7.8e-3 ulp: 3e-2 is ~4 ulps, as for float16.
    "bfloat16": (3e-2, 1e-2),
    # 2^-3 ulp (3 mantissa bits): 1.3e-1 is one ulp: one side may round a value the other
    # keeps in a wider type before the final cast.
    "float8_e4m3fn": (1.3e-1, 2e-2),
    "float8_e4m3": (1.3e-1, 2e-2),
    # 2^-2 ulp (2 mantissa bits): 2.6e-1 is one ulp, as for the e4m3 types.
    "float8_e5m2": (2.6e-1, 4e-2),
}
# A float type not listed: a few float32 ulps; a test comparing a narrower type
# (fp8 variants, fp6, fp4) passes a tolerance of its own.
DEFAULT_TOLERANCE = (1e-5, 1e-6)


def stack_frame_tables(files: Sequence[str], functions: Sequence[str], locations: Sequence[Sequence[int] | str],
                       frames: Sequence[Sequence[int] | str]) -> str:
    """HLO text's four stack-frame tables, entries numbered from 1, each table followed by
    a blank line (what goes between the module's header and its computations).  A
    location is (file_name_id, function_name_id, line, end_line, column, end_column), a
    frame (file_location_id, parent_frame_id as printed), or either the text of its
    braces (to write a malformed entry)."""
    def entry(fields: Sequence[int] | str, names: Sequence[str]) -> str:
        return fields if isinstance(fields, str) else "{" + " ".join(f"{k}={v}" for k, v in zip(names, fields)) + "}"

    tables = (("FileNames", [f'"{name}"' for name in files]), ("FunctionNames", [f'"{name}"' for name in functions]),
              ("FileLocations", [entry(e, ("file_name_id", "function_name_id", "line", "end_line", "column",
                                           "end_column")) for e in locations]),
              ("StackFrames", [entry(e, ("file_location_id", "parent_frame_id")) for e in frames]))
    return "".join(title + "\n" + "".join(f"{i} {v}\n" for i, v in enumerate(items, 1)) + "\n"
                   for title, items in tables)


def tolerance(dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name, DEFAULT_TOLERANCE)


def convert_program(hlo_text: str, pipeline: str = "default", **kwargs) -> Program:
    return program_from_module(convert_text(hlo_text, "<test>", pipeline=pipeline, **kwargs))


def convert_then(hlo_text: str, passes: Sequence[str], before: str = "none", options=None, **kwargs):
    """The module imported from `hlo_text` (then the pipeline `before`), after running the
    passes `passes` on it alone: how a test looks at one pass's rewrite."""
    from passes import PassOptions, run_pipeline

    module = convert_text(hlo_text, "<test>", pipeline=before, **kwargs)
    run_pipeline(module, list(passes), options or PassOptions(path="<test>"))
    return module


def ops_named(module, name: str) -> list:
    """The operations called `name` anywhere in `module`."""
    from passes.lib import rewrite

    return list(rewrite.walk(module, name))


def run_ours(hlo_text: str, inputs: Sequence[np.ndarray], pipeline: str = "default", **kwargs) -> list[np.ndarray]:
    return convert_program(hlo_text, pipeline, **kwargs)(*inputs)


def run_xla(hlo_text: str, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return run_with_xla(hlo_text, inputs)


def assert_close(actual, expected, rtol: float | None = None, atol: float | None = None, what: str = "") -> None:
    """Exact for integers and predicates; dtype tolerance (or the given one) for floats.
    NaNs must match NaNs."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    name = actual.dtype.name
    if actual.dtype.kind in "biu" or name in ("int4", "uint4", "int2", "uint2"):
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    default_rtol, default_atol = tolerance(actual.dtype)
    a = actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64)
    e = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    np.testing.assert_allclose(a, e, rtol=rtol if rtol is not None else default_rtol,
                               atol=atol if atol is not None else default_atol, equal_nan=True, err_msg=what)


def assert_all_close(actual: Sequence, expected: Sequence, **kwargs) -> None:
    assert len(actual) == len(expected), f"{len(actual)} outputs != {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, e, what=f"output {i}", **kwargs)


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype) -> np.ndarray:
    """Inputs with the ranges a test wants: floats normal, ints small (may be negative for
    signed types), predicates random."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        lo = -8 if dtype.kind == "i" else 0
        return rng.integers(lo, 8, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def differential(hlo_text: str, inputs: Sequence[np.ndarray], **kwargs) -> list[np.ndarray]:
    """Run through both paths and assert the outputs agree; returns ours."""
    ours = run_ours(hlo_text, inputs)
    theirs = run_xla(hlo_text, inputs)
    assert_all_close(ours, theirs, **kwargs)
    return ours


__all__ = ["TOLERANCES", "assert_all_close", "assert_close", "tolerance", "convert_program", "convert_then",
           "differential", "ops_named",
           "random_array", "run_ours", "run_xla"]
