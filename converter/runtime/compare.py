"""Comparing outputs of two runs: exact for integers and predicates, within a tolerance
fitted to the dtype for floats (used by `check`, `compare` and by the tests).

Relative error is measured against `max(|expected|, scale)`, where the scale is the
root-mean-square of the finite elements of both arrays: an element whose reference is
(near) zero is judged against the size of the values around it, which is what the
rounding of the ops that computed it is proportional to (a sum that cancels to 0 keeps
the absolute error of its terms).  Where both arrays are all zero the scale is 0 and
any difference is infinitely relative (it cannot happen: the difference is 0 then)."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
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

# `compare A B`'s default: an element differs when it is more than this many units in
# the last place of its dtype away, measured at max(|reference|, the tensor's RMS).  Two
# compilations of one program round differently (fused or reassociated sums, other
# transcendental kernels): measured on the CPU/TPU and before/after pairs of the tests,
# that stays under 16 ulps at the tensor's scale for f32.  A change a user cares about
# (a constant off by 1e-4 relative, a bf16 rounding of an f32 matmul) is hundreds of
# ulps or more.  Narrow types round to far fewer bits, each op by up to half an ulp of
# their own; their count is smaller (their ulps are 2^13 to 2^20 times larger than f32's).
DUMP_ULPS: dict[str, int] = {"float64": 64, "float32": 64, "complex128": 64, "complex64": 64,
                             "float16": 8, "bfloat16": 8, "default": 4}


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name, (1e-5, 1e-6))


def ulp_tolerance(dtype: np.dtype, ulps: float | None = None) -> tuple[float, float]:
    """(rtol, atol) of `ulps` units in the last place of a float dtype (its machine
    epsilon times `ulps`, by default DUMP_ULPS of the dtype), atol 0: used with the
    tensor-scale floor of `compare`.  Integers compare exactly whatever the tolerance."""
    dtype = np.dtype(dtype)
    if ulps is None:
        ulps = DUMP_ULPS.get(dtype.name, DUMP_ULPS["default"])
    if dtype.kind not in "fcV" and "float" not in dtype.name:
        return 0.0, 0.0
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)
    return float(ml_dtypes.finfo(dtype).eps) * ulps, 0.0


def is_exact(dtype: np.dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "biu" or dtype.name in ("int4", "uint4", "int2", "uint2")


@dataclass
class Difference:
    max_abs: float
    max_rel: float
    mismatches: int
    ok: bool


def _scale(*arrays: np.ndarray) -> float:
    """Root-mean-square of the finite elements of all `arrays` (0 when none)."""
    total, count = 0.0, 0
    for a in arrays:
        finite = np.abs(a[np.isfinite(a)])
        total += float(np.sum(finite.astype(np.float64) ** 2))
        count += finite.size
    return float(np.sqrt(total / count)) if count else 0.0


def compare(actual: np.ndarray, expected: np.ndarray, rtol: float | None = None,
            atol: float | None = None, scale_floor: bool = False) -> Difference:
    """How far `actual` is from `expected`.  max_rel is always measured against
    max(|expected|, the RMS scale of both arrays).  The pass test is
    |a - e| <= atol + rtol * |e|, or with `scale_floor`
    |a - e| <= atol + rtol * max(|e|, scale) (what `compare A B` uses)."""
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
    scale = _scale(a, e)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(a - e))
        diff = np.where(np.isnan(diff), np.inf, diff)
        magnitude = np.abs(np.where(np.isfinite(e), e, 0))
        floor = np.maximum(magnitude, scale)
        rel = np.where(diff > 0, diff / np.where(floor > 0, floor, 1.0) + np.where(floor > 0, 0.0, np.inf), 0.0)
    bound = atol + rtol * (floor if scale_floor else magnitude)
    bad = int((diff > bound).sum())
    return Difference(float(diff.max(initial=0)), float(rel.max(initial=0)), bad, bad == 0)
