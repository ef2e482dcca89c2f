"""Shared test helpers: run HLO through this converter and through XLA, compare with
tolerances fitted to the dtype."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from converter.runtime.convert import convert_text
from converter.runtime.program import Program, program_from_module
from converter.runtime.xla_oracle import run_with_xla

from converter.runtime.compare import TOLERANCES  # noqa: E402  (one table for tests and `check`)


def convert_program(hlo_text: str, pipeline: str = "default", **kwargs) -> Program:
    return program_from_module(convert_text(hlo_text, "<test>", pipeline=pipeline, **kwargs))


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
    default_rtol, default_atol = TOLERANCES.get(name, (1e-5, 1e-6))
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


__all__ = ["TOLERANCES", "assert_all_close", "assert_close", "convert_program", "differential",
           "random_array", "run_ours", "run_xla"]
