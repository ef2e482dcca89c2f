"""Multiply-add contraction (FMA) off for XLA's CPU compiler in this process.

XLA's CPU compiler lets LLVM fuse a multiply into the add that uses it (one rounding instead
of two) wherever both land in one kernel.  Two compiles that cut a program differently (the
full run and a module extracted from it) then round differently in the last bit.  No
per-compile option turns it off (jaxlib 0.10/0.12 accept `xla_cpu_max_isa` in
CompileOptions.env_option_overrides but the CPU client's target machine ignores it; the
LLVM option `-fp-contract` is not registered in XLA, and `xla_backend_extra_options`
naming it ends the process).  What does: `--xla_cpu_max_isa=AVX` in XLA_FLAGS, read once
when XLA first parses its flags — the CPU target then has no FMA instructions, so every
multiply and add rounds on its own, in every compile of the process (measured: x*x+1 in
one fused kernel gives NumPy's two-rounding bits with it, the one-rounding bits without).
"""
from __future__ import annotations

import os
import platform

import numpy as np

from converter.common.errors import ConverterError

FLAG = "--xla_cpu_max_isa=AVX"

_PROBE = """HloModule fma_probe
ENTRY e {
  x = f32[64] parameter(0)
  m = f32[64] multiply(x, x)
  one = f32[] constant(1)
  b = f32[64] broadcast(one), dimensions={}
  ROOT a = f32[64] add(m, b)
}"""


def contraction_is_off() -> bool:
    """Whether XLA's CPU compiler rounds a multiply and the add using it separately here:
    x*x+1 compiled by XLA against NumPy's product and sum, each rounded to f32."""
    from converter.runtime.xla_oracle import run_with_xla

    # Values where one rounding and two differ (some do, for 64 random normals: 8 of them).
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    two_roundings = x * x + np.float32(1)
    one_rounding = (x.astype(np.float64) ** 2 + 1).astype(np.float32)
    assert (two_roundings != one_rounding).any()
    return bool((run_with_xla(_PROBE, [x])[0] == two_roundings).all())


def turn_contraction_off(what: str, devices: int = 1) -> None:
    """Add FLAG to XLA_FLAGS before XLA reads them, and check it took (a probe compile).
    The probe starts JAX's CPU backend, which fixes its device count: `devices`, the most
    the process will run a module on, are made first.  Raises ConverterError naming what to do when it cannot: XLA read its flags already in
    this process (set XLA_FLAGS before starting), or the host is not x86 (the flag names
    x86 instruction sets)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        raise ConverterError(f"{what}: turning multiply-add contraction off needs an x86 host "
                             f"(XLA's {FLAG.lstrip('-')} names x86 instruction sets); this one is {platform.machine()}")
    flags = os.environ.get("XLA_FLAGS", "")
    if FLAG not in flags.split():
        os.environ["XLA_FLAGS"] = (flags + " " + FLAG).strip()
    from converter.runtime.program import configure_cpu_devices

    configure_cpu_devices(devices)
    if not contraction_is_off():
        raise ConverterError(f"{what}: XLA's CPU compiler still contracts multiply-adds in this process (it read "
                             f"its flags before); start it with XLA_FLAGS={FLAG}")
