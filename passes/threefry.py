"""threefry: JAX's GPU Threefry-2x32 kernels (`cu_threefry2x32[_ffi]`, `hip_threefry2x32[_ffi]`)
→ the same hash in plain StableHLO integer ops, bit for bit.

The call takes (key0, key1, x0, x1) u32 arrays of one shape and returns the two hashed
words.  Threefry-2x32 with 20 rounds as JAX defines it (jax/_src/prng.py,
`_threefry2x32_lowering`; jaxlib/gpu/prng_kernels.cu.cc): key schedule
ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA), five groups of four rounds
(v0 += v1; v1 = rotl(v1, r); v1 ^= v0) with rotations (13, 15, 26, 6) and
(17, 29, 16, 24) alternating, and a key injection (plus the group number) after each.
"""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

TARGETS = ("cu_threefry2x32", "cu_threefry2x32_ffi", "hip_threefry2x32", "hip_threefry2x32_ffi")
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KEY_PARITY = 0x1BD11BDA


def threefry2x32(k0: ir.Value, k1: ir.Value, x0: ir.Value, x1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Emit Threefry-2x32 over u32 tensors of one shape at the current insertion point."""
    shape = builders.shape_of(x0)
    u32 = builders.element_type_of(x0)

    def const(v: int) -> ir.Value:
        return builders.scalar_constant(v, u32, shape)

    def add(a, c):
        return builders.binary("add", a, c)  # wraps modulo 2^32, as the kernel's uint32 adds do

    def rotl(v, r):
        return builders.binary("or", builders.binary("shift_left", v, const(r)), builders.binary("shift_right_logical", v, const(32 - r)))

    ks = (k0, k1, builders.binary("xor", builders.binary("xor", k0, k1), const(KEY_PARITY)))
    v0, v1 = add(x0, ks[0]), add(x1, ks[1])
    for group in range(5):
        for r in ROTATIONS[group % 2]:
            v0 = add(v0, v1)
            v1 = builders.binary("xor", rotl(v1, r), v0)
        v0 = add(v0, ks[(group + 1) % 3])
        v1 = add(add(v1, ks[(group + 2) % 3]), const(group + 1))
    return v0, v1


@register_pass("threefry", "cu_threefry2x32 / hip_threefry2x32 custom-calls → the Threefry-2x32 hash in integer ops",
               targets=TARGETS, preserves={Fact.CALL_TARGETS, Fact.USES})
def lower_threefry(module: ir.Module, options: PassOptions, walks: WalkTracker) -> None:
    for op in walks.custom_calls(TARGETS):
        operands = list(op.operands)
        if len(operands) != 4 or len(op.results) != 2:
            raise rewrite.op_error(op, f"expected (key0, key1, x0, x1) → (y0, y1), found {len(operands)} operands "
                                  f"and {len(op.results)} results")
        types = {str(v.type) for v in operands} | {str(r.type) for r in op.results}
        if len(types) != 1 or builders.element_type_of(operands[0]) != ir.IntegerType.get_unsigned(32):
            raise rewrite.op_error(op, f"expects u32 operands and results of one shape, found {sorted(types)}")
        with rewrite.at(op):
            y0, y1 = threefry2x32(*operands)
        rewrite.replace(op, [y0, y1])
