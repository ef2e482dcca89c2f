"""Comparing outputs of two runs: exact for integers and predicates, within a tolerance
fitted to the dtype for floats (used by `check` and by the tests)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# (rtol, atol) per dtype for results computed by different code paths (op order and
# fusion may differ): a few units in the last place of the type, since each side rounds
# once per op.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-12),
    "float32": (2e-5, 1e-5),
    "complex64": (2e-5, 1e-5),
    "complex128": (1e-12, 1e-12),
    "float16": (4e-3, 2e-3),
    "bfloat16": (3e-2, 1e-2),
    "float8_e4m3fn": (1.3e-1, 2e-2),
    "float8_e4m3": (1.3e-1, 2e-2),
    "float8_e5m2": (2.6e-1, 4e-2),
}


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name, (1e-5, 1e-6))


def is_exact(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "biu" or dtype.name in ("int4", "uint4", "int2", "uint2")


@dataclass
class Difference:
    max_abs: float
    max_rel: float
    mismatches: int
    ok: bool


def compare(actual: np.ndarray, expected: np.ndarray, rtol: float | None = None,
            atol: float | None = None) -> Difference:
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Difference(float("inf"), float("inf"), max(actual.size, expected.size), False)
    if is_exact(actual.dtype):
        a, e = actual.astype(np.int64), expected.astype(np.int64)
        diff = np.abs(a - e)
        bad = int((diff != 0).sum())
        return Difference(float(diff.max(initial=0)), float(bad > 0), bad, bad == 0)
    default_rtol, default_atol = tolerance(actual.dtype)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    wide = np.complex128 if actual.dtype.kind == "c" else np.float64
    a, e = actual.astype(wide), expected.astype(wide)
    both_nan = np.isnan(a) & np.isnan(e)
    same_inf = np.isinf(a) & np.isinf(e) & (a == e)
    with np.errstate(invalid="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(a - e))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    bad = int((diff > atol + rtol * np.abs(np.where(np.isfinite(e), e, 0))).sum())
    return Difference(float(diff.max(initial=0)), float(np.where(diff > 0, rel, 0).max(initial=0)), bad, bad == 0)
