"""HLO element types ↔ numpy dtypes (ml_dtypes for bf16, fp8 and sub-byte types)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

_NUMPY: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8), "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32), "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "s4": np.dtype(ml_dtypes.int4), "u4": np.dtype(ml_dtypes.uint4),
    "s2": np.dtype(ml_dtypes.int2), "u2": np.dtype(ml_dtypes.uint2),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8e4m3b11fnuz": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "f8e3m4": np.dtype(ml_dtypes.float8_e3m4),
    "f8e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "f4e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
    "f6e2m3fn": np.dtype(ml_dtypes.float6_e2m3fn),  # MX formats of newer XLA (jaxlib 0.12)
    "f6e3m2fn": np.dtype(ml_dtypes.float6_e3m2fn),
}
_ELEMENT_TYPE = {v: k for k, v in _NUMPY.items()}


class UnsupportedElementType(ValueError):
    pass


def numpy_dtype(element_type: str) -> np.dtype:
    try:
        return _NUMPY[element_type]
    except KeyError:
        raise UnsupportedElementType(f"element type {element_type} has no numpy equivalent") from None


def element_type_of(dtype: np.dtype) -> str:
    try:
        return _ELEMENT_TYPE[np.dtype(dtype)]
    except KeyError:
        raise UnsupportedElementType(f"numpy dtype {dtype} has no HLO element type") from None
