"""tpu-custom-calls: each TPU compiler custom-call in a small module, rewritten, run on CPU
and compared with a NumPy or JAX reference of what the call computes (see the pass's
docstring for where each meaning comes from).  The real TPU dumps that hold them
(tests/dumps/tpu: linalg_*, complex_*, fft_*, scan_rnn, ...) check them again in context.

Tolerances: f32 factorizations of well-conditioned matrices of order <= 8 agree with
float64 references to ~1e-5 relative.  LU is compared with jax.lax.linalg.lu on CPU (the
same LAPACK routine: to 1e-6) and QR with SciPy's geqrf (another build of LAPACK: 1e-5).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes.lib.errors import PassError
from tests.helpers import assert_close, convert_program


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))


def _module(params: list[str], body: str, root: str) -> str:
    lines = [f"  p{i} = {t} parameter({i})" for i, t in enumerate(params)]
    return "HloModule tpu\nENTRY main {\n" + "\n".join(lines) + "\n" + body + f"\n  ROOT {root}\n}}\n"


def _portable(text: str) -> None:
    """No TPU call left: only jaxlib's CPU LAPACK kernels, as in CPU dumps."""
    targets = re.findall(r"custom_call @(\w+)", str(convert_text(text, pipeline="default")))
    assert all(t.startswith("lapack_") for t in targets), targets


# ----------------------------------------------------------------- small helpers
def test_allocate_buffer_is_a_defined_buffer():
    text = _module(["f32[3]"], "  buf = f32[4,3] custom-call(), custom_call_target=\"AllocateBuffer\"\n"
                               "  b = f32[1,3] reshape(p0)\n  z = s32[] constant(0)\n"
                               "  up = f32[4,3] dynamic-update-slice(buf, b, z, z)",
                   "r = f32[4,3] add(up, up)")
    _portable(text)
    x = np.array([1, 2, 3], np.float32)
    (out,) = convert_program(text)(x)
    assert_close(out[0], 2 * x)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("target", ["AssumeGatherIndicesInBound", "GatherScatterIndicesBitpacked"])
def test_index_markers_are_identities(target):
    text = _module(["s32[6]"], "", f"r = s32[6] custom-call(p0), custom_call_target=\"{target}\"")
    _portable(text)
    x = np.array([5, 0, 3, 1, 4, 2], np.int32)
    (out,) = convert_program(text)(x)
    assert_close(out, x)


def test_x64_split_and_combine():
    """c64 as (real, imag), s64 as (low, high) 32-bit words, f64 as f32 head + f32 tail."""
    text = _module(["c64[4]", "s64[4]", "f64[4]"], "\n".join([
        '  cl = f32[4] custom-call(p0), custom_call_target="X64SplitLow"',
        '  ch = f32[4] custom-call(p0), custom_call_target="X64SplitHigh"',
        '  il = u32[4] custom-call(p1), custom_call_target="X64SplitLow"',
        '  ih = s32[4] custom-call(p1), custom_call_target="X64SplitHigh"',
        '  fl = f32[4] custom-call(p2), custom_call_target="X64SplitLow"',
        '  fh = f32[4] custom-call(p2), custom_call_target="X64SplitHigh"',
        '  c = c64[4] custom-call(cl, ch), custom_call_target="X64Combine"',
        '  i = s64[4] custom-call(il, ih), custom_call_target="X64Combine"',
        '  f = f64[4] custom-call(fl, fh), custom_call_target="X64Combine"']),
        "r = (f32[4], f32[4], u32[4], s32[4], f32[4], f32[4], c64[4], s64[4], f64[4]) "
        "tuple(cl, ch, il, ih, fl, fh, c, i, f)")
    _portable(text)
    c = np.array([1 + 2j, -3.5 + 0j, 0 - 1j, 7.25 + 8j], np.complex64)
    i = np.array([1, -1, 2**40 + 5, -(2**35) - 3], np.int64)
    f = np.array([1 / 3, -2.5e10 / 7, 1e-3 / 3, np.pi], np.float64)
    cl, ch, il, ih, fl, fh, c2, i2, f2 = convert_program(text)(c, i, f)
    assert_close(cl, c.real)
    assert_close(ch, c.imag)
    assert_close(il, (i & 0xFFFFFFFF).astype(np.uint32))
    assert_close(ih, (i >> 32).astype(np.int32))
    assert_close(fl, f.astype(np.float32))
    assert_close(fh, (f - f.astype(np.float32).astype(np.float64)).astype(np.float32))
    assert_close(c2, c)
    assert_close(i2, i)
    # head + tail carries ~48 bits of the f64: exact to f32's precision squared.
    assert_close(f2, f, rtol=1e-13, atol=0)


def test_cholesky_is_the_lower_factor():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 5, 5))
    a = (a @ np.swapaxes(a, -1, -2) + 5 * np.eye(5)).astype(np.float32)
    text = _module(["f32[2,5,5]"], "", 'r = f32[2,5,5] custom-call(p0), custom_call_target="Cholesky"')
    _portable(text)
    (out,) = convert_program(text)(a)
    assert_close(np.tril(out), np.linalg.cholesky(a.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lower", [True, False])
def test_invert_diagonal_blocks(lower):
    """Order 200: two diagonal blocks (128 and 72) inverted, the rest zero."""
    n = 200
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, n, n)) * 0.1 + 4 * np.eye(n)
    a = (np.tril(a) if lower else np.triu(a)).astype(np.float32)
    target = "InvertDiagBlocksLowerTriangular" if lower else "InvertDiagBlocksUpperTriangular"
    text = _module([f"f32[1,{n},{n}]"], "", f'r = f32[1,{n},{n}] custom-call(p0), custom_call_target="{target}"')
    _portable(text)
    (out,) = convert_program(text)(a)
    want = np.zeros((1, n, n))
    for lo, hi in ((0, 128), (128, n)):
        want[0, lo:hi, lo:hi] = np.linalg.inv(a[0, lo:hi, lo:hi].astype(np.float64))
    assert_close(out, want.astype(np.float32), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- linear algebra
# jax 0.12's libtpu names the real kernel LuRealDecompositionBlock (same operands, results).
@pytest.mark.parametrize("target", ["LuDecompositionBlock", "LuRealDecompositionBlock"])
@pytest.mark.parametrize("shape", [(6, 6), (7, 4), (3, 5, 5)])
def test_lu_block_matches_jax_lu(shape, target):
    *batch, m, n = shape
    k = min(m, n)
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shape).astype(np.float32)
    result = f"(f32[{_dims(shape)}], s32[{_dims((*batch, k))}], s32[{_dims((*batch, m))}])"
    text = _module([f"f32[{_dims(shape)}]"], "", f'r = {result} custom-call(p0), custom_call_target="{target}"')
    _portable(text)
    lu, pivots, perm = convert_program(text)(a)
    want_lu, want_pivots, want_perm = jax.lax.linalg.lu(jnp.asarray(a))
    assert_close(lu, np.asarray(want_lu), rtol=1e-6, atol=1e-6)
    assert_close(pivots, np.asarray(want_pivots))
    assert_close(perm, np.asarray(want_perm))
    # And what LU means: P A = L U.
    lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    upper = np.triu(lu[..., :k, :])
    permuted = np.take_along_axis(a, perm[..., :, None], axis=-2)
    assert_close((lower @ upper).astype(np.float32), permuted, rtol=1e-5, atol=1e-5)


def test_lu_block_named_complex_must_have_real_and_imaginary_parts():
    text = _module(["f32[4,4]"], "", 'r = (f32[4,4], s32[4], s32[4]) custom-call(p0), '
                   'custom_call_target="LuComplexDecompositionBlock"')
    with pytest.raises(PassError, match="LuComplexDecompositionBlock with 1 operand"):
        convert_program(text)


@pytest.mark.parametrize("shape", [(6, 4), (4, 4), (2, 5, 3)])
def test_qr_block_matches_lapack_geqrf(shape):
    """Against SciPy's geqrf (`qr(mode="raw")`: Householder vectors below the diagonal, R on
    and above it, and the taus), matrix by matrix."""
    import scipy.linalg

    *batch, m, n = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(np.float32)
    result = f"(f32[{_dims(shape)}], f32[{_dims((*batch, min(m, n)))}])"
    text = _module([f"f32[{_dims(shape)}]"], "", f'r = {result} custom-call(p0), custom_call_target="QrDecompositionBlock"')
    _portable(text)
    qr, taus = convert_program(text)(a)
    for index in np.ndindex(*batch):
        (want_qr, want_taus), _ = scipy.linalg.qr(a[index], mode="raw")
        assert_close(qr[index], np.asarray(want_qr, np.float32), rtol=1e-5, atol=1e-5)
        assert_close(taus[index], np.asarray(want_taus, np.float32), rtol=1e-5, atol=1e-5)


def _compact_wy_reference(y: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """XLA's QrExpander::CompactWYRepresentation, as its comment writes it in NumPy."""
    n = y.shape[-1]
    t = np.eye(n) * -taus
    vtv = -taus[None, :] * np.triu(y.T @ y, 1) + np.eye(n)
    for i in range(1, n):
        t[:, i] = t @ vtv[:, i]
    return t


def test_compact_wy_helper():
    """The operand is what TPU dumps compute before the call: (triu(YᵀY, 1) + I)·diag(-taus)."""
    m, n = 7, 5
    rng = np.random.default_rng(4)
    y = np.tril(rng.standard_normal((m, n)), -1) + np.eye(m, n)
    taus = rng.uniform(0.5, 1.5, n)
    operand = ((np.triu(y.T @ y, 1) + np.eye(n)) * -taus[None, :]).astype(np.float32)
    text = _module([f"f32[{n},{n}]"], "", f'r = f32[{n},{n}] custom-call(p0), custom_call_target="CompactWyHelper"')
    _portable(text)
    (t,) = convert_program(text)(operand)
    want = _compact_wy_reference(y, taus)
    assert_close(t, want.astype(np.float32), rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # And what T is for: I + Y T Yᵀ is the product of the reflectors H_i = I - tau_i y_i y_iᵀ.
    product = np.eye(m)
    for i in range(n):
        product = product @ (np.eye(m) - taus[i] * np.outer(y[:, i], y[:, i]))
    assert_close((np.eye(m) + y @ t @ y.T).astype(np.float32), product.astype(np.float32), rtol=1e-4, atol=1e-4)


def _eigh_module(n: int) -> str:
    """As TPU dumps call EighTpu: the matrix cut into quadrants of order k = ceil(n/2),
    the ones past row/column n padded with zeros."""
    k = (n + 1) // 2
    p = 2 * k - n
    lines = ["  zero = f32[] constant(0)",
             f"  tl = f32[{k},{k}] slice(p0), slice={{[0:{k}], [0:{k}]}}",
             f"  tr0 = f32[{k},{n - k}] slice(p0), slice={{[0:{k}], [{k}:{n}]}}",
             f"  bl0 = f32[{n - k},{k}] slice(p0), slice={{[{k}:{n}], [0:{k}]}}",
             f"  br0 = f32[{n - k},{n - k}] slice(p0), slice={{[{k}:{n}], [{k}:{n}]}}",
             f"  tr = f32[{k},{k}] pad(tr0, zero), padding=0_0x0_{p}",
             f"  bl = f32[{k},{k}] pad(bl0, zero), padding=0_{p}x0_0",
             f"  br = f32[{k},{k}] pad(br0, zero), padding=0_{p}x0_{p}"]
    result = f"(f32[{k}], f32[{k}], f32[{k},{k}], f32[{k},{k}], f32[{k},{k}], f32[{k},{k}])"
    return _module([f"f32[{n},{n}]"], "\n".join(lines),
                   f'r = {result} custom-call(tl, tr, bl, br), custom_call_target="EighTpu"')


@pytest.mark.parametrize("n", [5, 6, 1])
def test_eigh_tpu(n):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((n, n))
    a = ((a + a.T) / 2).astype(np.float32)
    text = _eigh_module(n)
    _portable(text)
    w_top, w_bottom, v_tl, v_tr, v_bl, v_br = convert_program(text)(a)
    k = (n + 1) // 2
    w = np.concatenate([w_top, w_bottom])
    rows = np.block([[v_tl, v_tr], [v_bl, v_br]])  # eigenvectors as rows
    want_w = np.linalg.eigvalsh(a.astype(np.float64))
    assert_close(np.sort(w[:n]), want_w.astype(np.float32), rtol=1e-5, atol=1e-5)
    for i in range(n):  # each row an eigenvector of its eigenvalue, in the first n columns
        assert_close((a.astype(np.float64) @ rows[i, :n]).astype(np.float32),
                     (w[i] * rows[i, :n]).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert_close((rows[:n, :n] @ rows[:n, :n].T).astype(np.float32), np.eye(n, dtype=np.float32), atol=1e-5)
    # The padded pair stays in place, as Jacobi leaves a zero row and column.
    for j in range(n, 2 * k):
        assert w[j] == 0 and np.array_equal(rows[j], np.eye(2 * k)[j])


def test_eigh_tpu_padding_hidden_in_a_kept_fusion_is_an_error():
    """With --keep-fusions the pad that makes the bottom-right block sits in a private
    function: the order of the matrix cannot be read, so the rewrite refuses by name
    rather than mixing the padding's eigenpairs into the result."""
    text = """HloModule eigh_fused
blocks {
  m = f32[5,5] parameter(0)
  zero = f32[] constant(0)
  tl = f32[3,3] slice(m), slice={[0:3], [0:3]}
  tr0 = f32[3,2] slice(m), slice={[0:3], [3:5]}
  bl0 = f32[2,3] slice(m), slice={[3:5], [0:3]}
  br0 = f32[2,2] slice(m), slice={[3:5], [3:5]}
  tr = f32[3,3] pad(tr0, zero), padding=0_0x0_1
  bl = f32[3,3] pad(bl0, zero), padding=0_1x0_0
  br = f32[3,3] pad(br0, zero), padding=0_1x0_1
  ROOT t = (f32[3,3], f32[3,3], f32[3,3], f32[3,3]) tuple(tl, tr, bl, br)
}
ENTRY main {
  p0 = f32[5,5] parameter(0)
  f = (f32[3,3], f32[3,3], f32[3,3], f32[3,3]) fusion(p0), kind=kLoop, calls=blocks
  q0 = f32[3,3] get-tuple-element(f), index=0
  q1 = f32[3,3] get-tuple-element(f), index=1
  q2 = f32[3,3] get-tuple-element(f), index=2
  q3 = f32[3,3] get-tuple-element(f), index=3
  ROOT r = (f32[3], f32[3], f32[3,3], f32[3,3], f32[3,3], f32[3,3]) custom-call(q0, q1, q2, q3), custom_call_target="EighTpu"
}
"""
    from converter.common.errors import ConverterError

    _portable(text)  # inlined fusions: the pad is visible and the call is rewritten
    with pytest.raises(ConverterError, match=r"EighTpu.*kept fusion"):
        convert_text(text, pipeline="default", keep_fusions=True)


# ----------------------------------------------------------------------- ConcatBitcast
@pytest.mark.parametrize("layouts,result_layout", [
    (["{1,0}", "{1,0}", "{1,0}"], "{1,0}"),     # row slices joined: a concatenation along dim 0
    (["{0,1}", "{0,1}", "{0,1}"], "{0,1}"),     # column-major buffers: along dim 1
    (["{1,0}", "{0,1}", "{1,0}"], "{1,0}")])    # mixed: each operand read in its own order
def test_concat_bitcast_lays_buffers_end_to_end(layouts, result_layout):
    """NumPy oracle of the byte-level meaning: each operand flattened in its physical
    order (row-major for {1,0}, column-major for {0,1}), concatenated, and the result's
    buffer read back in the result's layout.  Values only move: exact."""
    shapes = [(2, 6), (4, 6), (2, 6)]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = [f"f32[{_dims(s)}]{lay}" for s, lay in zip(shapes, layouts)]
    root = (f"r = f32[8,6]{result_layout} custom-call(p0, p1, p2), custom_call_target=\"ConcatBitcast\"")
    (ours,) = convert_program(_module(params, "", root))(*xs)
    flat = np.concatenate([x.ravel(order="C" if lay == "{1,0}" else "F") for x, lay in zip(xs, layouts)])
    expected = flat.reshape((8, 6), order="C" if result_layout == "{1,0}" else "F")
    np.testing.assert_array_equal(ours, expected)


def test_concat_bitcast_of_a_real_tpu_dump_matches_jax():
    """tests/passes/data/tpu_concat_bitcast_mlp.hlo (make_tpu_concat_bitcast.py): relu(x @ w1)
    @ w2 on 4 TPU devices, the local w2 prefetched in four row slices joined by
    ConcatBitcast.  Oracle: JAX's own CPU result of the program at highest precision (the
    dump was compiled at highest precision too); f32 sums of 512 and 2048 products: 1e-5."""
    import pathlib

    dump = (pathlib.Path(__file__).resolve().parent / "data" / "tpu_concat_bitcast_mlp.hlo").read_text()
    assert "ConcatBitcast" in dump
    program = convert_program(dump)
    assert "custom_call" not in str(program.module)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    w1 = (rng.standard_normal((512, 2048)) / 20).astype(np.float32)
    w2 = (rng.standard_normal((2048, 512)) / 40).astype(np.float32)
    # Device d holds rows d of x and w2 and columns d of w1 (the dump's shardings).
    (out,) = program(x.reshape(4, 32, 512), np.stack(np.split(w1, 4, axis=1)), w2.reshape(4, 512, 512))
    with jax.default_matmul_precision("highest"):
        want = np.asarray(jax.jit(lambda a, b, c: jax.nn.relu(a @ b) @ c)(x, w1, w2))
    np.testing.assert_allclose(out.reshape(128, 512), want, rtol=1e-5, atol=1e-5)


def test_prepare_async_call_token_used_becomes_a_fresh_token():
    """The prepare pair's token (libtpu 0.0.42's SparseCore offloads) holds no value: where
    it is used it becomes `after_all()`, and the s32[] handle, which only the done read, goes.
    (tests/sweep/test_sweep_regressions.py runs the real dumps and a generated offload.)"""
    text = _module(["s32[3]"], "  h = s32[] custom-call(), custom_call_target=\"PrepareAsyncCallStart\"\n"
                               "  t = token[] custom-call(h), custom_call_target=\"PrepareAsyncCallDone\"",
                   "r = (s32[3], token[]) tuple(p0, t)")
    mlir = str(convert_text(text, pipeline="default"))
    assert "PrepareAsyncCall" not in mlir and "stablehlo.after_all" in mlir


def test_prepare_async_call_done_of_another_value_is_refused():
    """A done must turn a prepare-start's handle into the token: anything else is not the
    pair whose data flow shows it carries no value."""
    text = _module(["s32[]"], "", "r = token[] custom-call(p0), custom_call_target=\"PrepareAsyncCallDone\"")
    with pytest.raises(PassError, match=r"<string>:5:3: error: %r .*PrepareAsyncCallDone.*the handle of a PrepareAsyncCallStart"):
        convert_text(text, pipeline="default")
