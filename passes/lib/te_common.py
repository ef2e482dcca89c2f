"""What Transformer Engine's JAX calls share: their scaling modes, the fp8 cast TE's kernels
do (x · scale in f32, saturated to the fp8 type's largest finite value, rounded to
nearest even: common/util/vectorized_pointwise.h and the __nv_fp8 conversions with
__NV_SATFINITE), and the placeholder for results a rewrite does not compute
(workspaces, colwise copies)."""

from __future__ import annotations

from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite

# JAXX_Scaling_Mode (transformer_engine/jax/csrc/extensions/misc.h)
NO_SCALING, DELAYED_TENSOR_SCALING, MXFP8_1D_SCALING, CURRENT_TENSOR_SCALING = 0, 1, 2, 3
SCALING_MODE_NAMES = {0: "NO_SCALING", 1: "DELAYED_TENSOR_SCALING", 2: "MXFP8_1D_SCALING",
                      3: "CURRENT_TENSOR_SCALING", 4: "NVFP4_1D_SCALING", 5: "NVFP4_2D_SCALING"}
TENSOR_SCALING = (DELAYED_TENSOR_SCALING, CURRENT_TENSOR_SCALING)

# Largest finite value of each fp8 type TE writes.
FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}


def scaling_mode_name(mode: int) -> str:
    return SCALING_MODE_NAMES.get(mode, f"scaling_mode {mode} (unknown)")


def is_fp8(element: ir.Type) -> bool:
    return str(element) in FP8_MAX


def f32() -> ir.Type:
    return ir.F32Type.get()


def scalar_of(value: ir.Value) -> ir.Value:
    """The first element of a [1]-shaped (or any-shaped) f32 buffer as a 0-d f32 value."""
    shape = builders.shape_of(value)
    if shape and any(d != 1 for d in shape):
        value = builders.slice_(value, [0] * len(shape), [1] * len(shape))
    return builders.convert(builders.reshape(value, []), f32())


def broadcast_scalar(scalar: ir.Value, shape: list[int]) -> ir.Value:
    return builders.broadcast_in_dim(scalar, shape, [])


def fp8_cast(op: ir.Operation, x32: ir.Value, scale: ir.Value, element: ir.Type) -> ir.Value:
    """TE's quantization of the f32 `x32` with the 0-d f32 `scale`: saturate(x · scale)
    converted (round to nearest even) to the fp8 `element`; NaN stays NaN."""
    name = str(element)
    if name not in FP8_MAX:
        raise rewrite.op_error(op, f"quantized output type {name}: the fp8 types TE writes are {sorted(FP8_MAX)}")
    shape = builders.shape_of(x32)
    scaled = builders.binary("multiply", x32, broadcast_scalar(scale, shape))
    limit = FP8_MAX[name]
    clamped = builders.clamp(builders.scalar_constant(-limit, f32()), scaled, builders.scalar_constant(limit, f32()))
    return builders.convert(clamped, element)


def amax_of(x32: ir.Value) -> ir.Value:
    """max |x| over all elements, 0-d f32."""
    absolute = builders.unary("abs", x32)
    return builders.reduce(absolute, list(range(len(builders.shape_of(x32)))), "maximum", 0)


def reshape_to(value: ir.Value, result: ir.Value) -> ir.Value:
    """`value` reshaped (and converted) to `result`'s type."""
    t = ir.RankedTensorType(result.type)
    return builders.convert(builders.reshape(value, list(t.shape)), t.element_type)


def placeholder(op: ir.Operation, result: ir.Value) -> ir.Value | None:
    """A result the rewrite does not compute (workspace, an unrequested copy): dropped when
    unused, else zeros (its contents are scratch in TE)."""
    if not rewrite.has_uses(result):
        return None
    return builders.zeros_like_type(result.type)


def attr(op: ir.Operation, config: dict, name: str):
    if name not in config:
        raise rewrite.op_error(op, f"backend_config has no '{name}'")
    return config[name]
