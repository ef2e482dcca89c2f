"""NumPy restatements of Transformer Engine's MXFP8 math and scale layout, the oracle for
the TE quantize / activation tests (written from TE's source, independent of the passes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.passes.te.te_hlo import fp8_cast


def numpy_e8m0(val):
    """Biased exponent of val (≥ 0) rounded toward +inf (cvt.rp.satfinite.ue8m0), from frexp."""
    val = val.astype(np.float64)
    mant, ex = np.frexp(val)  # val = mant · 2^ex, mant in [0.5, 1)
    e = np.where(mant == 0.5, ex - 1, ex) + 127
    e = np.where(val <= 2.0 ** -127, 0, np.maximum(e, 1))
    return np.where(val == 0, 0, e).astype(np.int64)


def te_block_scale_shape(data_shape, flatten_axis, colwise):
    """TE's padded MXFP8 scale shape (jax/quantize/scaling_modes.py BlockScalingModeMetadataImpl
    .get_scale_shape, block_dims (1, 32), alignment (128, 4), data_layout "NN"), restated;
    None where TE's own asserts refuse the shape."""
    axis = flatten_axis % len(data_shape)
    (block_y, block_x), (align_y, align_x) = ((1, 32), (128, 4)) if colwise else ((32, 1), (4, 128))
    if data_shape[axis - 1] % block_x or data_shape[-1] % block_y:
        return None

    def correct(dims_, n_blocks, block):  # _apply_scale_shape_correction
        if len(dims_) == 1:
            return (n_blocks,)
        last = dims_[-1] // block
        if dims_[-1] % block or n_blocks % last:
            return None
        n_blocks //= last
        out = (last,)
        for mid in reversed(dims_[1:-1]):
            if n_blocks % mid:
                return None
            out, n_blocks = (mid, *out), n_blocks // mid
        return (n_blocks, *out)

    first, rest = int(np.prod(data_shape[:axis])), int(np.prod(data_shape[axis:]))
    nx = -(-(first // block_x) // align_x) * align_x
    ny = -(-(rest // block_y) // align_y) * align_y
    a, b = correct(data_shape[:axis], nx, block_x), correct(data_shape[axis:], ny, block_y)
    return None if a is None or b is None else (*a, *b)


def mxfp8_reference(x32, fp8_t, along):
    """TE's MXFP8 math (common/cast/mxfp8/quantize_mxfp8.cuh) in NumPy over the 2-D x32:
    per 32-element block along axis `along` (1 rowwise, 0 colwise), e = the biased
    exponent of amax · (1/max) rounded up, data = saturate(x · 2^(127 − e)) cast to
    fp8_t.  Returns (data, e with the block axis reduced)."""
    xt = x32 if along == 1 else x32.T
    r, c = xt.shape
    amax = np.abs(xt).reshape(r, c // 32, 32).max(-1)
    e = numpy_e8m0((amax * np.float32(1.0 / float(ml_dtypes.finfo(fp8_t).max))).astype(np.float32))
    data = fp8_cast((xt.astype(np.float64) * np.repeat(2.0 ** (127 - e.astype(np.float64)), 32, axis=1))
                    .astype(np.float32), fp8_t)
    return (data, e) if along == 1 else (data.T, e.T)


def nvfp4_scale_shape(data_shape, flatten_axis, colwise):
    """TE's padded NVFP4 1-D scale shape (block_dims (1, 16), alignment (128, 4), data_layout
    "NT": the colwise scales are the rowwise scales of the transposed data), restated from
    BlockScalingModeMetadataImpl.get_scale_shape; None where TE's asserts refuse it."""
    axis = flatten_axis % len(data_shape)
    if colwise:
        data_shape = (*data_shape[axis:], *data_shape[:axis])
        axis = len(data_shape) - axis
    if data_shape[-1] % 16:
        return None
    first, rest = int(np.prod(data_shape[:axis])), int(np.prod(data_shape[axis:]))
    nx = -(-first // 128) * 128
    ny = -(-(rest // 16) // 4) * 4

    def correct(dims_, n_blocks, block):
        if len(dims_) == 1:
            return (n_blocks,)
        last = dims_[-1] // block
        if n_blocks % last:
            return None
        n_blocks //= last
        out = (last,)
        for mid in reversed(dims_[1:-1]):
            if n_blocks % mid:
                return None
            out, n_blocks = (mid, *out), n_blocks // mid
        return (n_blocks, *out)

    a, b = correct(data_shape[:axis], nx, 1), correct(data_shape[axis:], ny, 16)
    return None if a is None or b is None else (*a, *b)


def nvfp4_reference(x32, amax):
    """NVFP4 1-D quantization of the 2-D f32 x32 along its last axis, as TE's kernels compute
    it (common/cast/nvfp4/core_nvfp4.cuh, quantize_transpose_nvfp4*.cuh with the f32
    coefficient, ptx_arch_spec.cuh's round-to-nearest e2m1 cvt), each step one f32 operation
    in NumPy: S_enc = min(448·6 / amax, FLT_MAX) (1 for amax 0), S_dec = 1/S_enc;
    sf = e4m3(block_amax · (S_enc · f32(1/6))) saturated; coefficient = min(1/(sf · S_dec),
    FLT_MAX); data = e2m1(clip(x · coefficient, ±6)).  Returns (data, sf)."""
    f = np.float32
    fmax = np.finfo(f).max
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = f(448.0 * 6.0) / f(amax)
        s_enc = f(1) if (f(amax) == 0 or s_enc == 0) else min(s_enc, fmax)
        s_dec = f(1) / s_enc
        r, c = x32.shape
        bamax = np.abs(x32).reshape(r, c // 16, 16).max(-1)
        s_dec_b = np.minimum(bamax * (s_enc * (f(1) / f(6))), fmax).astype(f)
        sf = np.clip(s_dec_b, -448, 448).astype(ml_dtypes.float8_e4m3fn)
        coeff = np.minimum(f(1) / (sf.astype(f) * s_dec), fmax).astype(f)
        scaled = (x32 * np.repeat(coeff, 16, axis=1)).astype(f)
    return np.clip(scaled, -6, 6).astype(ml_dtypes.float4_e2m1fn), sf
