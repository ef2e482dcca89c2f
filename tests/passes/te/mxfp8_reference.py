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
