"""What Transformer Engine's JAX calls share: their scaling modes, the fp8 cast TE's kernels
do (x · scale in f32, saturated to the fp8 type's largest finite value, rounded to
nearest even: common/util/vectorized_pointwise.h and the __nv_fp8 conversions with
__NV_SATFINITE), and the placeholder for results a rewrite does not compute
(workspaces, colwise copies)."""

from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir

from converter.mlir import builders
from passes.lib import rewrite

# JAXX_Scaling_Mode (transformer_engine/jax/csrc/extensions/misc.h)
NO_SCALING, DELAYED_TENSOR_SCALING, MXFP8_1D_SCALING, CURRENT_TENSOR_SCALING = 0, 1, 2, 3
NVFP4_1D_SCALING, NVFP4_2D_SCALING = 4, 5
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


def quantized_results(op: ir.Operation, y32: ir.Value, results: list[ir.Value], mode: int, scale: ir.Value,
                      amax_in: ir.Value, amax_when_no_scaling: bool, *, scale_axis: int = -1,
                      block_input_type: ir.Type | None = None, nvfp4: bool = False) -> list[ir.Value | None]:
    """(output, colwise_output, scale_inv, colwise_scale_inv, updated_amax) of a TE
    quantizing kernel from its f32 result `y32` ([m, n], collapsed at the flatten axis):
    NO_SCALING writes y in the output type; tensor scaling (delayed or current: TE's JAX
    side computes a current scale before the call, so the kernel reads `scale` in both)
    writes saturate(y · scale) in fp8, scale_inv = 1/scale shared by both layouts, and the
    colwise output is the transpose ([n, m], NVTE_DELAYED_TENSOR_SCALING's columnwise
    layout).  updated_amax (aliased to `amax_in`, max-ed atomically) = max(amax_in, max|y|)
    when tensor-scaled or asked for, else amax_in.  MXFP8: as mxfp8_both_layouts, the
    block scales' 2-D view split at `scale_axis` of their result (the FFI's flatten axis);
    `block_input_type` is the kernel's input type when y is computed in the kernel (an
    activation), which TE rounds y to before the block amax ("numerical truncation" in
    common/cast/mxfp8/quantize_mxfp8.cuh and gated_mxfp8.cuh).  NVFP4_1D_SCALING (only
    where the caller says TE's kernel takes it: `nvfp4`) as nvfp4_both_layouts, with
    amax_in as the tensor amax TE's JAX side computed before the call."""
    out, col_out, scale_inv, col_scale_inv, updated_amax = results
    out_element = ir.RankedTensorType(out.type).element_type
    values: list[ir.Value | None] = []
    if mode == NO_SCALING:
        if is_fp8(out_element):
            raise rewrite.op_error(op, f"an fp8 output ({out_element}) with scaling_mode NO_SCALING")
        values += [reshape_to(builders.convert(y32, out_element), out), placeholder(op, col_out),
                   placeholder(op, scale_inv), placeholder(op, col_scale_inv)]
    elif mode in TENSOR_SCALING:
        s = scalar_of(scale)
        q = fp8_cast(op, y32, s, out_element)
        values.append(builders.reshape(q, list(ir.RankedTensorType(out.type).shape)))
        col_shape = list(ir.RankedTensorType(col_out.type).shape)
        if rewrite.has_uses(col_out) and math.prod(col_shape) == math.prod(builders.shape_of(q)) and \
                ir.RankedTensorType(col_out.type).element_type == out_element:
            values.append(builders.reshape(builders.transpose(q, [1, 0]), col_shape))
        elif rewrite.has_uses(col_out):
            raise rewrite.op_error(op, f"a colwise output of shape {col_shape} that is not the transpose of {builders.shape_of(q)}")
        else:
            values.append(None)
        inv = builders.binary("divide", builders.scalar_constant(1.0, f32()), s)
        if math.prod(ir.RankedTensorType(scale_inv.type).shape) != 1:
            raise rewrite.op_error(op, f"tensor scaling with a scale_inv of type {scale_inv.type} (expected one f32)")
        values.append(reshape_to(broadcast_scalar(inv, [1]), scale_inv))
        values.append(placeholder(op, col_scale_inv))
    elif mode == MXFP8_1D_SCALING:
        if block_input_type is not None and str(block_input_type) != "f32":
            y32 = builders.convert(builders.convert(y32, block_input_type), f32())
        values += mxfp8_both_layouts(op, y32, out, col_out, scale_inv, col_scale_inv, scale_axis)
    elif mode == NVFP4_1D_SCALING and nvfp4:
        values += nvfp4_both_layouts(op, y32, scalar_of(amax_in), out, col_out, scale_inv, col_scale_inv, scale_axis)
    else:
        why = ("NVFP4 2-D (16×16 blocks) is not converted" if mode == NVFP4_2D_SCALING else
               "NVFP4 is converted for te_dbias_quantize_ffi only" if mode == NVFP4_1D_SCALING else "unknown mode")
        raise rewrite.op_error(op, f"scaling_mode {scaling_mode_name(mode)}: not converted ({why}; NO_SCALING, "
                               "tensor scaling and MXFP8 are)")
    if mode in TENSOR_SCALING or amax_when_no_scaling:
        new = builders.binary("maximum", scalar_of(amax_in), amax_of(y32))
        values.append(reshape_to(broadcast_scalar(new, [1]), updated_amax))
    else:
        values.append(reshape_to(amax_in, updated_amax))
    return values


MXFP8_BLOCK = 32


def _u32(value: int, shape: list[int]) -> ir.Value:
    return builders.scalar_constant(value, ir.IntegerType.get_unsigned(32), shape)


def mxfp8_quantize(op: ir.Operation, x32: ir.Value, element: ir.Type,
                   dimension: str = "the quantized dimension") -> tuple[ir.Value, ir.Value]:
    """MXFP8 rowwise quantization of the f32 [m, n] `x32` as TE's kernels do it
    (common/cast/mxfp8/quantize_mxfp8.cuh, util/ptx_arch_spec.cuh float_to_e8m0,
    util/ptx.cuh exp2f_rcp): per block of 32 along n, e = float_to_e8m0(amax · (1/max)),
    the biased exponent rounded up (NaN 255, inf 254, values ≤ 2^-127 0); the data is
    saturate(x · 2^(127 − e)) in the fp8 type.  Returns (data [m, n], e as u8 [m, n/32])."""
    name = str(element)
    if name not in FP8_MAX:
        raise rewrite.op_error(op, f"MXFP8 output type {name}: expected one of {sorted(FP8_MAX)}")
    m, n = builders.shape_of(x32)
    if n % MXFP8_BLOCK:
        raise rewrite.op_error(op, f"MXFP8 blocks of {MXFP8_BLOCK}: {dimension} ({n}) is not a multiple (TE's "
                               "get_scale_shape asserts it)")
    nb = n // MXFP8_BLOCK
    blocks = builders.reshape(builders.unary("abs", x32), [m, nb, MXFP8_BLOCK])
    amax = builders.reduce(blocks, [2], "maximum", 0)
    rcp = float(np.float32(1.0 / FP8_MAX[name]))  # max_norm_rcp: 1/max in double, stored as float
    val = builders.binary("multiply", amax, builders.scalar_constant(rcp, f32(), [m, nb]))
    shape = [m, nb]
    bits = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get(shape, ir.IntegerType.get_unsigned(32)),
                        [val])
    exponent = builders.binary("shift_right_logical", bits, _u32(23, shape))
    mantissa = builders.binary("and", bits, _u32(0x7FFFFF, shape))
    up = builders.binary("and", builders.compare(mantissa, _u32(0, shape), "GT"),
                         builders.compare(exponent, _u32(0xFE, shape), "NE"))
    tiny = builders.binary("and", builders.compare(exponent, _u32(0, shape), "EQ"),
                           builders.compare(mantissa, _u32(0x400000, shape), "LE"))
    up = builders.binary("and", up, builders.unary("not", tiny))
    e = builders.select(up, builders.binary("add", exponent, _u32(1, shape)), exponent)
    is_inf = builders.compare(val, builders.scalar_constant(float("inf"), f32(), shape), "EQ")
    e = builders.select(is_inf, _u32(0xFE, shape), e)
    is_nan = builders.compare(val, val, "NE")
    e = builders.select(is_nan, _u32(0xFF, shape), e)
    # exp2f_rcp: 2^(127 − e) from its bits; e = 254 → 2^-127 (a subnormal), 255 → NaN.
    rcp_bits = builders.binary("shift_left", builders.binary("subtract", _u32(254, shape),
                                                            builders.binary("minimum", e, _u32(254, shape))),
                               _u32(23, shape))
    rcp_bits = builders.select(builders.compare(e, _u32(254, shape), "EQ"), _u32(0x00400000, shape), rcp_bits)
    rcp_bits = builders.select(is_nan, _u32(0x7FFFFFFF, shape), rcp_bits)
    block_rcp = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get(shape, f32()), [rcp_bits])
    per_element = builders.reshape(builders.broadcast_in_dim(block_rcp, [m, nb, MXFP8_BLOCK], [0, 1]), [m, n])
    scaled = builders.binary("multiply", x32, per_element)
    limit = FP8_MAX[name]
    data = builders.convert(builders.clamp(builders.scalar_constant(-limit, f32()), scaled,
                                           builders.scalar_constant(limit, f32())), element)
    return data, builders.convert(e, ir.IntegerType.get_unsigned(8))


def mxfp8_both_layouts(op: ir.Operation, y32: ir.Value, out: ir.Value, col_out: ir.Value, scale_inv: ir.Value,
                       col_scale_inv: ir.Value, scale_axis: int) -> list[ir.Value | None]:
    """(output, colwise_output, scale_inv, colwise_scale_inv) of MXFP8 quantization of the
    f32 [m, n] `y32`.  A layout TE did not request has a (1,)-shaped data result
    (get_scale_shape_2x / the primitives' abstract); a requested one has x's size and is
    computed when it or its scales are used.  Rowwise:
    blocks of 32 along n, scales [round_up(m, 128), round_up(n/32, 4)].  Colwise (TE's
    MXFP8 data_layout "NN": not transposed, unlike tensor scaling): the same data shape
    [m, n] with blocks of 32 down the columns, scales [round_up(m/32, 4), round_up(n, 128)]
    (BlockScalingModeMetadataImpl.get_scale_shape with block (32, 1), alignment (4, 128);
    the kernel's colwise scale index is row_block · stride + column)."""
    m, n = builders.shape_of(y32)

    def requested(data: ir.Value, scales: ir.Value) -> bool:
        return math.prod(ir.RankedTensorType(data.type).shape) == m * n and \
            (rewrite.has_uses(data) or rewrite.has_uses(scales))

    def data_as(data: ir.Value, result: ir.Value) -> ir.Value:
        return builders.reshape(data, list(ir.RankedTensorType(result.type).shape))

    values: list[ir.Value | None] = []
    if requested(out, scale_inv):
        data, exponents = mxfp8_quantize(op, y32, ir.RankedTensorType(out.type).element_type,
                                         "the rowwise-quantized (last, flattened) dimension")
        values += [data_as(data, out), None, block_scales_as(op, exponents, scale_inv, scale_axis)]
    else:
        values += [placeholder(op, out), None, placeholder(op, scale_inv)]
    if requested(col_out, col_scale_inv):
        data_t, exponents_t = mxfp8_quantize(op, builders.transpose(y32, [1, 0]),
                                             ir.RankedTensorType(col_out.type).element_type,
                                             "the colwise-quantized (leading, flattened) dimension")
        values[1] = data_as(builders.transpose(data_t, [1, 0]), col_out)
        values.append(block_scales_as(op, builders.transpose(exponents_t, [1, 0]), col_scale_inv, scale_axis))
    else:
        values[1] = placeholder(op, col_out)
        values.append(placeholder(op, col_scale_inv))
    return values


def block_scales_as(op: ir.Operation, exponents: ir.Value, result: ir.Value, split: int = -1) -> ir.Value:
    """The u8 biased exponents [r, c] as `result` (e8m0 or u8), whose 2-D view is its
    dims before / from `split` (TE's FFI: product(dims, 0, flatten_axis), product(dims,
    flatten_axis, ndim)), padded past r × c as get_scale_shape pads (rowwise to 128 × 4,
    colwise to 4 × 128): the padding, which TE's kernel never writes, is 0."""
    t = ir.RankedTensorType(result.type)
    r, c = builders.shape_of(exponents)
    shape = list(t.shape)
    split = split + len(shape) if split < 0 else split
    if not 0 <= split <= len(shape):
        raise rewrite.op_error(op, f"block-scale result {shape}: no 2-D view at axis {split}")
    rows, cols = math.prod(shape[:split]), math.prod(shape[split:])
    if rows < r or cols < c:
        raise rewrite.op_error(op, f"block-scale result {shape} smaller than the {r}×{c} scales")
    padded = builders.pad(exponents, [0, 0], [rows - r, cols - c])
    element = t.element_type
    if str(element) == "f8E8M0FNU":
        padded = builders.op1("stablehlo.bitcast_convert", ir.RankedTensorType.get([rows, cols], element), [padded])
    elif str(element) not in ("ui8", "i8"):
        raise rewrite.op_error(op, f"block-scale result type {element}: expected f8E8M0FNU or u8")
    else:
        padded = builders.convert(padded, element)
    return builders.reshape(padded, shape)


def block_gemm_scales(op: ir.Operation, scale: ir.Value, boundary: int, colwise: bool, swizzled: bool,
                      rows: int, blocks: int, block: int, which: str) -> ir.Value:
    """A block-scaled (MXFP8, NVFP4) GEMM operand's scales as the plain [rows, blocks]
    matrix (non-contracting index × `block`-element block of the contracting dim).  The call's scale
    operand is viewed 2-D at the operand's axis boundary (gemm.cpp
    xla_buffer_to_nvte_gemm_operand) as [a, b]: a rowwise-quantized operand's [rows', blocks']
    or a colwise one's [blocks', rows'] (padded to 128 × 4 / 4 × 128, padding unread).
    Since TE 2.8 (jax/cpp_extensions/gemm.py swizzled_scale, the JAX transpose before the
    call) it arrives swizzled for cuBLAS: the plain [R, C] (colwise ones transposed first)
    reshaped [R/128, 4, 32, C/4, 4], axes 1 and 3 swapped — a permutation that is its own
    inverse, so the same steps read it back.  Before (te_gemm_ffi with lhs_swizzled /
    rhs_swizzled results) the C++ swizzled into those results and the operand is plain."""
    shape = builders.shape_of(scale)
    if not 0 < boundary < len(shape):
        raise rewrite.op_error(op, f"{which} scale_inv {shape}: no 2-D view at axis boundary {boundary}")
    a, b = math.prod(shape[:boundary]), math.prod(shape[boundary:])
    plain = builders.reshape(scale, [a, b])
    r, c = (b, a) if colwise else (a, b)
    if r % 128 or c % 4 or r < rows or c < blocks:
        raise rewrite.op_error(op, f"{which} scale_inv {shape} (2-D {[a, b]}{', colwise' if colwise else ''}) is not "
                               f"TE's padded block-scale layout covering {rows} rows × {blocks} blocks of {block}")
    if swizzled:
        # swizzled_scale transposes a colwise [blocks', rows'] to [rows', blocks'] before
        # the swizzle, so the buffer holds the swizzled [r, c].
        tiles = builders.reshape(scale, [r // 128, c // 4, 32, 4, 4])
        plain = builders.reshape(builders.transpose(tiles, [0, 3, 2, 1, 4]), [r, c])
    elif colwise:
        plain = builders.transpose(plain, [1, 0])
    return builders.slice_(plain, [0, 0], [rows, blocks])


NVFP4_BLOCK = 16
FLT_MAX = float(np.finfo(np.float32).max)


def nvfp4_quantize(op: ir.Operation, x32: ir.Value, s_enc: ir.Value, s_dec: ir.Value, element: ir.Type,
                   dimension: str) -> tuple[ir.Value, ir.Value]:
    """NVFP4 1-D quantization of the f32 [r, c] `x32` along c, as TE's kernels do it
    (common/cast/nvfp4/core_nvfp4.cuh compute_decoding_scaling_factor,
    quantize_transpose_nvfp4.cuh / specialized/quantize_transpose_nvfp4_tuned_1D.cuh with
    the f32 scaling coefficient, util/ptx_arch_spec.cuh mul_cvt_*_to_fp4 round to nearest),
    every step one f32 operation: per block of 16, sf = e4m3_satfinite(block_amax · (S_enc
    · f32(1/6))); coefficient = min(1 / (f32(sf) · S_dec), FLT_MAX); data =
    e2m1_satfinite(x · coefficient), round to nearest even.  Returns (data [r, c] in
    `element`, sf [r, c/16] f8E4M3FN)."""
    if str(element) != "f4E2M1FN":
        raise rewrite.op_error(op, f"NVFP4 output type {element}: expected f4E2M1FN")
    r, c = builders.shape_of(x32)
    if c % NVFP4_BLOCK:
        raise rewrite.op_error(op, f"NVFP4 blocks of {NVFP4_BLOCK}: {dimension} ({c}) is not a multiple")
    nb = c // NVFP4_BLOCK
    shape = [r, nb]
    amax = builders.reduce(builders.reshape(builders.unary("abs", x32), [r, nb, NVFP4_BLOCK]), [2], "maximum", 0)
    sixth = builders.binary("multiply", s_enc, builders.scalar_constant(float(np.float32(1.0) / np.float32(6.0)), f32()))
    s_dec_b = builders.binary("multiply", amax, broadcast_scalar(sixth, shape))
    s_dec_b = builders.binary("minimum", s_dec_b, builders.scalar_constant(FLT_MAX, f32(), shape))
    sf = builders.convert(builders.clamp(builders.scalar_constant(-448.0, f32()), s_dec_b,
                                         builders.scalar_constant(448.0, f32())), ir.Float8E4M3FNType.get())
    denom = builders.binary("multiply", builders.convert(sf, f32()), broadcast_scalar(s_dec, shape))
    coeff = builders.binary("minimum", builders.binary("divide", builders.scalar_constant(1.0, f32(), shape), denom),
                            builders.scalar_constant(FLT_MAX, f32(), shape))
    per_element = builders.reshape(builders.broadcast_in_dim(coeff, [r, nb, NVFP4_BLOCK], [0, 1]), [r, c])
    scaled = builders.binary("multiply", x32, per_element)
    data = builders.convert(builders.clamp(builders.scalar_constant(-6.0, f32()), scaled,
                                           builders.scalar_constant(6.0, f32())), element)
    return data, sf


def nvfp4_global_scales(amax: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(S_enc, S_dec) from the 0-d f32 tensor amax: core_nvfp4.cuh
    compute_global_encode_scaling_factor_FP4, S_enc = fminf(448 · 6 / amax, FLT_MAX) (fminf
    of a NaN gives FLT_MAX), 1 where amax is 0 or S_enc is 0; S_dec = 1 / S_enc."""
    ratio = builders.binary("divide", builders.scalar_constant(448.0 * 6.0, f32()), amax)
    big = builders.scalar_constant(FLT_MAX, f32())
    s_enc = builders.select(builders.compare(ratio, ratio, "NE"), big, builders.binary("minimum", ratio, big))
    zero = builders.scalar_constant(0.0, f32())
    one = builders.scalar_constant(1.0, f32())
    degenerate = builders.binary("or", builders.compare(amax, zero, "EQ"), builders.compare(s_enc, zero, "EQ"))
    s_enc = builders.select(degenerate, one, s_enc)
    return s_enc, builders.binary("divide", one, s_enc)


def nvfp4_both_layouts(op: ir.Operation, y32: ir.Value, amax: ir.Value, out: ir.Value, col_out: ir.Value,
                       scale_inv: ir.Value, col_scale_inv: ir.Value, scale_axis: int) -> list[ir.Value | None]:
    """(output, colwise_output, scale_inv, colwise_scale_inv) of NVFP4 1-D quantization of
    the f32 [m, n] `y32` with the tensor amax `amax` (0-d f32).  Rowwise: blocks of 16 along
    n, e4m3 scales [round_up(m, 128), round_up(n/16, 4)].  Colwise (TE's NVFP4 data_layout
    "NT"): the transpose [n, m] quantized rowwise with the same S_enc (the kernel's
    columnwise amax is unset in this FFI), scales [round_up(n, 128), round_up(m/16, 4)],
    whose 2-D view splits at rank − flatten_axis (quantization.cpp colwise_flatten_axis).
    A layout TE did not request has a (1,)-shaped data result."""
    m, n = builders.shape_of(y32)
    s_enc, s_dec = nvfp4_global_scales(amax)

    def requested(data: ir.Value, scales: ir.Value) -> bool:
        return math.prod(ir.RankedTensorType(data.type).shape) == m * n and \
            (rewrite.has_uses(data) or rewrite.has_uses(scales))

    values: list[ir.Value | None] = []
    for data_r, scale_r, transposed in ((out, scale_inv, False), (col_out, col_scale_inv, True)):
        if not requested(data_r, scale_r):
            values += [placeholder(op, data_r), placeholder(op, scale_r)]
            continue
        x = builders.transpose(y32, [1, 0]) if transposed else y32
        data, sf = nvfp4_quantize(op, x, s_enc, s_dec, ir.RankedTensorType(data_r.type).element_type,
                                  "the colwise-quantized (leading, flattened) dimension" if transposed else
                                  "the rowwise-quantized (last, flattened) dimension")
        rank = len(ir.RankedTensorType(scale_r.type).shape)
        split = (rank - (scale_axis % rank)) if transposed else scale_axis
        values += [builders.reshape(data, list(ir.RankedTensorType(data_r.type).shape)),
                   fp8_scales_as(op, sf, scale_r, split)]
    out_v, out_s, col_v, col_s = values
    return [out_v, col_v, out_s, col_s]


def fp8_scales_as(op: ir.Operation, sf: ir.Value, result: ir.Value, split: int) -> ir.Value:
    """The e4m3 block scales [r, c] as `result` (f8E4M3FN), whose 2-D view splits its dims
    at `split`, zero past r × c (padding TE's kernel does not write)."""
    t = ir.RankedTensorType(result.type)
    if str(t.element_type) != "f8E4M3FN":
        raise rewrite.op_error(op, f"NVFP4 block-scale result type {t.element_type}: expected f8E4M3FN")
    shape = list(t.shape)
    split = split + len(shape) if split < 0 else split
    rows, cols = math.prod(shape[:split]), math.prod(shape[split:])
    r, c = builders.shape_of(sf)
    if rows < r or cols < c:
        raise rewrite.op_error(op, f"block-scale result {shape} (2-D {[rows, cols]}) smaller than the {r}×{c} scales")
    padded = builders.pad(sf, [0, 0], [rows - r, cols - c])
    return builders.reshape(padded, shape)
