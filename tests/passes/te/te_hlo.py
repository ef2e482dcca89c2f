"""What the Transformer Engine call tests share: HLO type names, shapes as HLO prints them,
converting and running a dump, and the split of cases between the default run and -m slow."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module

T = {np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
     np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn", np.dtype(ml_dtypes.float8_e5m2): "f8e5m2",
     np.dtype(ml_dtypes.float4_e2m1fn): "f4e2m1fn"}


def dims(shape) -> str:
    return ",".join(map(str, shape))


def run(text: str, inputs, name: str = "te.hlo") -> list[np.ndarray]:
    """Convert with the default pipeline (no TE call may remain) and run on CPU."""
    module = convert_text(text, name)
    assert "custom_call" not in str(module)
    return [np.asarray(v) for v in program_from_module(module)(*inputs)]


def sweep(values, keep):
    """The cases outside `keep` run with `pytest -m slow` (the default run keeps one of each
    kind, within the suite's time budget)."""
    return [v if i in keep else pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=pytest.mark.slow)
            for i, v in enumerate(values)]


def fp8_cast(v, fp8_t):
    """TE's fp8 cast: clamp to ±max (the __NV_SATFINITE conversion), round to nearest even."""
    limit = float(ml_dtypes.finfo(fp8_t).max)
    return np.clip(np.asarray(v, np.float32), -limit, limit).astype(fp8_t)
