"""Tapping and extracting cuSOLVER's gesvd and geev calls themselves (`run --tap svd.N`, `extract --root
svd.N`): a tap reads every result leaf of the call, also those JAX never reads (the input
the kernel destroys; with compute_uv false the U/Vᴴ placeholders it never writes; geev's
eigenvectors it was not asked for; gesvdj's U and V with compute_uv false).  Those
leaves are NaN (passes/lib/rewrite.py `unspecified`), never made-up numbers; the others
are the decomposition.  geev's oracle: NumPy's eigenvalues and A·v = λ·v for the right
eigenvectors (unpacked from LAPACK's real form).

Oracles: NumPy's SVD (LAPACK gesdd in float64) of the call's tapped operand for the
singular values; for U and Vᴴ, which are unique only up to a unit factor per vector,
orthonormality (UᴴU = I, Vᴴ(Vᴴ)ᴴ = I) and U·diag(s)·Vᴴ = A.  XLA itself for extract
--verify: the written module's result bit for bit against the tap.

Tolerances: f32/c64 inputs of order ≤ 7 with O(1) entries; a backward-stable SVD has
errors of a few ulps (2^-23) times n·‖A‖ in each of these, so 1e-4·max(‖A‖, 1) leaves
~100x (as test_gpu_linalg_dumps.RESIDUAL); NumPy's float64 values are exact to that scale."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.hlo.parser import parse_hlo_file
from converter.importer.core import ImportOptions
from converter.importer.taps import TapRequest
from converter.runtime.convert import convert_module
from converter.runtime.program import program_from_module

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps"
OWN_VERSION = "jax{}{:02d}".format(*map(int, jax.__version__.split(".")[:2]))
RESIDUAL = 1e-4


def _solver_call(path: pathlib.Path, target: str = "cusolver_gesvd_ffi"):
    hlo = parse_hlo_file(str(path))
    call = next(i for c in hlo.computations for i in c.instructions
                if i.opcode == "custom-call" and i.attrs.get("custom_call_target") == target)
    return hlo, call


def _tapped_program(name: str, target: str = "cusolver_gesvd_ffi"):
    """The dump converted with taps on its solver call and the call's operand."""
    path = DUMPS / OWN_VERSION / f"{name}.hlo"
    hlo, call = _solver_call(path, target)
    operand = call.operands[0].split()[-1].lstrip("%")
    program = program_from_module(convert_module(hlo, import_options=ImportOptions(
        taps=TapRequest(names=[operand, call.name]))), hlo, str(path))
    return program, call, operand


def _taps(program, call_name: str, operand: str, inputs) -> tuple[np.ndarray, list[np.ndarray]]:
    by_key = {spec.name: np.asarray(o) for spec, o in zip(program.results, program(*inputs))}
    leaves = [by_key[k] for k in by_key if k.startswith(f"tap:{call_name}#")]
    return by_key[f"tap:{operand}"], leaves


def _check_decomposition(a: np.ndarray, leaves: list[np.ndarray], compute_uv: bool, transposed: bool) -> None:
    destroyed, s, slot2, slot3, info = leaves
    assert destroyed.shape == a.shape and np.isnan(destroyed).all(), "the destroyed input is not NaN"
    assert (info == 0).all()
    scale = max(float(np.max(np.abs(a))), 1.0)
    want = np.linalg.svd(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64), compute_uv=False)
    assert np.max(np.abs(s - want)) < RESIDUAL * scale, (s, want)
    if not compute_uv:
        assert slot2.shape == slot3.shape == () and np.isnan(slot2) and np.isnan(slot3)
        return
    # With `transposed` (m < n) the kernel factors Aᵀ: its third result is A's Vᴴ, its fourth A's U.
    u, vh = (slot3, slot2) if transposed else (slot2, slot3)
    k = s.shape[-1]
    eye = np.eye(k)
    uk, vhk = u[..., :, :k].astype(np.complex128), vh[..., :k, :].astype(np.complex128)
    assert np.max(np.abs(np.swapaxes(uk.conj(), -1, -2) @ uk - eye)) < RESIDUAL
    assert np.max(np.abs(vhk @ np.swapaxes(vhk.conj(), -1, -2) - eye)) < RESIDUAL
    full_u = u.astype(np.complex128)
    assert np.max(np.abs(np.swapaxes(full_u.conj(), -1, -2) @ full_u - np.eye(u.shape[-1]))) < RESIDUAL
    assert np.max(np.abs((uk * s[..., None, :]) @ vhk - a)) < RESIDUAL * scale


# name: (compute_uv, transposed), as the dumps' backend_config says (asserted below)
SVD_DUMPS = {"svd_qr_values": (False, True), "svd_qr_tall": (True, False), "svd_qr_wide_econ": (True, True),
             "svd_qr_c64": (True, False)}


@pytest.mark.parametrize("name", sorted(SVD_DUMPS))
def test_tap_of_the_gesvd_call_is_the_svd_and_nan_where_nothing_is_defined(name):
    program, call, operand = _tapped_program(name)
    compute_uv, transposed = SVD_DUMPS[name]
    config = call.attrs["backend_config"].raw
    assert f"compute_uv = {str(compute_uv).lower()}" in config and f"transposed = {str(transposed).lower()}" in config
    a, leaves = _taps(program, call.name, operand, program.random_inputs(0))
    _check_decomposition(a, leaves, compute_uv, transposed)


@pytest.fixture(scope="module")
def values_program():
    return _tapped_program("svd_qr_values")


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1e-3, 1.0, 1e3]), st.integers(0, 3))
def test_values_call_tap_for_any_input(values_program, seed, magnitude, rank_deficiency):
    """Inputs of any scale and rank (rows repeated: zero singular values) in the dump's 4x7."""
    program, call, operand = values_program
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((4, 7)) * magnitude).astype(np.float32)
    a[4 - rank_deficiency:] = a[0]  # the last rows copies of the first: rank ≤ 4 - rank_deficiency (≥ 1)
    tapped, leaves = _taps(program, call.name, operand, [a])
    np.testing.assert_array_equal(tapped, a)
    _check_decomposition(a, leaves, compute_uv=False, transposed=True)


@pytest.mark.parametrize("name", ["svd_qr_values", "svd_qr_wide_econ"])
def test_extract_of_the_gesvd_call_verifies(tmp_path, capsys, name):
    """`extract --root` of the call: the cut (converted, a LAPACK FFI call) run by XLA gives
    the tap's bits, the NaN leaves included."""
    from converter.tools.cli import main

    path = DUMPS / OWN_VERSION / f"{name}.hlo"
    _, call = _solver_call(path)
    out = tmp_path / "svd.hlo"
    assert main(["extract", str(path), "--root", call.name, "--verify", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verified:" in printed and "cusolver_gesvd_ffi" in printed, printed


def _unpacked(packed: np.ndarray, wi: np.ndarray) -> np.ndarray:
    """LAPACK's real packed eigenvectors as complex ones: a conjugate pair j, j+1 (Im w_j > 0)
    is stored as columns Re v_j, Im v_j."""
    v = packed.astype(np.complex128)
    for j in range(packed.shape[-1] - 1):
        if wi[j] > 0:
            v[:, j] = packed[:, j] + 1j * packed[:, j + 1]
            v[:, j + 1] = np.conj(v[:, j])
    return v


def test_tap_of_the_geev_call_is_nan_where_nothing_is_computed():
    """eig_f32 (jnp.linalg.eig: right eigenvectors only): the tap's destroyed input and left
    eigenvectors are NaN (LAPACK's uninitialized output had shown as numbers), the rest the
    eigendecomposition; extract --root of the call verifies bit for bit."""
    from converter.tools.cli import main

    program, call, operand = _tapped_program("eig_f32", "cusolver_geev_ffi")
    assert "left = false" in call.attrs["backend_config"].raw
    a, (destroyed, w, vl, vr, info) = _taps(program, call.name, operand, program.random_inputs(3))
    assert np.isnan(destroyed).all() and np.isnan(vl).all() and info == 0
    a64 = a.astype(np.float64)
    want = np.linalg.eigvals(a64)
    assert np.max(np.abs(np.sort_complex(w.astype(np.complex128)) - np.sort_complex(want))) < RESIDUAL * np.abs(a).max()
    v = _unpacked(vr, w.imag)
    assert np.max(np.abs(a64 @ v - v * w.astype(np.complex128))) < RESIDUAL * max(np.abs(a).max(), 1.0)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = DUMPS / OWN_VERSION / "eig_f32.hlo"
        assert main(["extract", str(path), "--root", call.name, "--verify", "-o", f"{tmp}/eig.hlo"]) == 0


def test_hybrid_eig_without_left_vectors_reads_nan_for_them():
    """cuhybrid_eig_real with left = false (the eig_left_f32 dump so edited): the left
    eigenvectors, which the program reads, are NaN, not the LAPACK call's uninitialized
    output; the right ones are unchanged."""
    from tests.helpers import convert_program

    text = (DUMPS / OWN_VERSION / "eig_left_f32.hlo").read_text()
    edited = text.replace("left = true", "left = false")
    assert edited != text
    inputs = [np.asarray(x) for x in convert_program(text).random_inputs(1)]
    full = [np.asarray(x) for x in convert_program(text)(*inputs)]
    got = [np.asarray(x) for x in convert_program(edited)(*inputs)]
    vl_outputs = [i for i, (g, f) in enumerate(zip(got, full)) if np.isnan(g).all() and not np.isnan(f).any()]
    assert vl_outputs, "no output became NaN"
    for i, (g, f) in enumerate(zip(got, full)):
        if i not in vl_outputs:
            np.testing.assert_array_equal(g, f)


def test_gesvdj_without_vectors_reads_nan_for_u_and_v():
    """cuSOLVER's gesvdj with compute_uv false (JAX allocates U and V, the kernel does not
    write them): the whole call read, as a tap reads it, has NaN for the destroyed input, U
    and V (LAPACK gesdd in mode 'N' leaves them uninitialized), NumPy's singular values."""
    from tests.helpers import convert_program

    text = """HloModule gesvdj
ENTRY main {
  a = f32[4,3]{0,1} parameter(0)
  ROOT e = (f32[4,3]{0,1}, f32[3]{0}, f32[4,4]{0,1}, f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="cusolver_gesvdj_ffi", operand_layout_constraints={f32[4,3]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={compute_uv = false, full_matrices = true}
}
"""
    a = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    destroyed, s, u, v, info = [np.asarray(x) for x in convert_program(text)(a)]
    assert np.isnan(destroyed).all() and np.isnan(u).all() and np.isnan(v).all() and info == 0
    assert u.shape == (4, 4) and v.shape == (3, 3)
    assert np.max(np.abs(s - np.linalg.svd(a.astype(np.float64), compute_uv=False))) < RESIDUAL * max(np.abs(a).max(), 1.0)


def test_reading_an_unspecified_integer_result_is_a_located_refusal():
    """A result with no NaN (here an s32 buffer) that something reads cannot say it holds
    nothing: the rewrite refuses at the call's line, naming the result."""
    from jaxlib.mlir import ir

    from passes.lib import rewrite
    from passes.lib.errors import PassError
    from tests.helpers import convert_then

    text = """HloModule scratch
ENTRY main {
  a = f32[3]{0} parameter(0)
  c = (f32[3]{0}, s32[5]{0}) custom-call(a), custom_call_target="some_kernel"
  ROOT w = s32[5]{0} get-tuple-element(c), index=1
}
"""
    module = convert_then(text, [])
    with module.context:
        (op,) = rewrite.custom_calls(module, "some_kernel")
        assert rewrite.unspecified(op, 0, "unread") is None
        with pytest.raises(PassError, match=r":4:\d+: error: .*some_kernel.*result 1 \(a scratch buffer\).*no NaN"):
            rewrite.unspecified(op, 1, "a scratch buffer")
        assert isinstance(op.results[0].type, ir.RankedTensorType)
