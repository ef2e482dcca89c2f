"""The library kernels hlo-roundtrip ships as plug-ins, on dumps in the forms the libraries
emit (tests/passes/plugins/dumps, from generate_dumps.py), against NumPy and JAX references."""

from __future__ import annotations

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from converter.tools.cli import main
from converter.common.errors import ConverterError
from tests.helpers import assert_close, convert_program, random_array, run_ours
from tests.passes.plugins import generate_dumps as gen

DUMPS = pathlib.Path(__file__).parent / "dumps"


def _run(name: str, inputs):
    return run_ours((DUMPS / name).read_text(), inputs)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


# --- AWS Neuron -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_neuron_activations_and_rms_norm(dtype):
    rng = np.random.default_rng(0)
    np_dtype = np.float32 if dtype == "f32" else ml_dtypes.bfloat16
    x = (3 * rng.standard_normal((2, 3, 16))).astype(np_dtype)
    w = rng.standard_normal(16).astype(np_dtype)
    g = rng.standard_normal((2, 3, 16)).astype(np_dtype)
    gelu, dgelu, gelu_tanh, rms, sm, dsm = _run(f"neuron_activations_{dtype}.hlo", [x, w, g])
    x64 = x.astype(np.float64)
    # bf16 results are rounded once from an f32 computation: one bf16 ulp (2^-8 relative).
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "f32" else dict(rtol=2 ** -7, atol=2 ** -9)
    # Exact GELU, x·Φ(x), in float64 NumPy.
    assert_close(gelu, (0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)))).astype(np_dtype), **tol, what="gelu")
    # GeluBackward is GELU'(x): JAX's own derivative of its exact GELU.
    ref = jax.vmap(jax.grad(lambda v: jax.nn.gelu(v, approximate=False)))(x64.reshape(-1).astype(np.float32))
    assert_close(dgelu, np.asarray(ref).reshape(x.shape).astype(np_dtype), **tol, what="gelu'")
    assert_close(gelu_tanh, np.asarray(jax.nn.gelu(x64.astype(np.float32), approximate=True)).astype(np_dtype),
                 **tol, what="gelu tanh")
    # RmsNorm over dimension 2, eps 1e-6, weight along it (through TransferWithStaticRing).
    ref = x64 / np.sqrt(np.mean(x64 ** 2, axis=2, keepdims=True) + 1e-6) * w.astype(np.float64)
    assert_close(rms, ref.astype(np_dtype), **tol, what="rms norm")
    # Softmax over dimension 1 and its backward against jax.nn.softmax and jax.vjp (f32).  In
    # bf16 both are computed in bf16 as torch-neuronx's reference does (XLA may keep f32
    # between steps): a few bf16 ulps of the largest term, and the backward subtracts a sum
    # from grad, so its error scales with max|grad|.
    sm_tol = tol if dtype == "f32" else dict(rtol=2 ** -5, atol=2 ** -7)
    ref_sm, vjp = jax.vjp(lambda v: jax.nn.softmax(v, axis=1), x.astype(np.float32))
    assert_close(sm, np.asarray(ref_sm).astype(np_dtype), **sm_tol, what="softmax")
    (ref_dsm,) = vjp(g.astype(np.float32))
    dsm_tol = tol if dtype == "f32" else dict(rtol=2 ** -5, atol=2 ** -6 * float(np.abs(g.astype(np.float32)).max()))
    assert_close(dsm, np.asarray(ref_dsm).astype(np_dtype), **dsm_tol, what="softmax'")


def test_neuron_rms_norm_backward_is_refused_with_its_reason(capsys):
    path = DUMPS / "neuron_rms_norm_backward.hlo"
    assert main(["convert", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:8:3: error: %custom-call.5 (custom-call AwsNeuronRmsNormBackward): plug-in "
                          "hlo-roundtrip kernels.neuron: refused: its operands are the forward's output"), err
    assert main(["inspect", str(path), "--json"]) == 0
    support = json.loads(capsys.readouterr().out)["custom_call_targets"]["AwsNeuronRmsNormBackward"]["support"]
    assert support.startswith("refused (hlo-roundtrip kernels.neuron): its operands are")


# --- jax gpu_ops RMSNorm --------------------------------------------------------------------


def _reference_rms(x, w, eps=1e-5):
    """RMSNorm as a JAX function of x and the flattened weight, in float64."""
    n2 = w.size
    rows = x.reshape(-1, n2)
    return (rows / jnp.sqrt(jnp.mean(rows * rows, axis=1, keepdims=True) + eps) * w.reshape(1, n2)).reshape(x.shape)


@pytest.mark.parametrize("name,x_dtype,w_dtype,x_shape,w_shape", [
    ("f32", np.float32, np.float32, (4, 8, 32), (32,)),
    ("bf16_f32w", ml_dtypes.bfloat16, np.float32, (3, 5, 16), (16,)),
    ("f16_2d_weight", np.float16, np.float16, (2, 4, 8), (4, 8)),
    ("f64", np.float64, np.float64, (70, 24), (24,)),
])
def test_gpu_ops_rms_norm_forward_and_backward(name, x_dtype, w_dtype, x_shape, w_shape):
    rng = np.random.default_rng(1)
    x = random_array(rng, x_shape, x_dtype)
    w = random_array(rng, w_shape, w_dtype)
    g = random_array(rng, x_shape, w_dtype)
    out, invvar, gx, gw, part = _run(f"rms_norm_{name}.hlo", [x, w, g])
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    n2 = w.size
    rows = x64.reshape(-1, n2)
    ref_invvar = 1 / np.sqrt(np.mean(rows ** 2, axis=1) + 1e-5)
    acc = np.float64 if x_dtype == np.float64 else np.float32
    # Tolerances: f64 exact to rounding; f32 accumulation; the 16-bit outputs are rounded
    # to their type twice (normalized value, then times gamma): two ulps.
    low = {np.dtype(np.float16): 2 ** -9, np.dtype(ml_dtypes.bfloat16): 2 ** -6}
    tol = lambda dt: (dict(rtol=1e-12, atol=1e-12) if np.dtype(dt) == np.float64 else  # noqa: E731
                      dict(rtol=2e-5, atol=2e-5) if np.dtype(dt) == np.float32 else
                      dict(rtol=2 * low[np.dtype(dt)], atol=2 * low[np.dtype(dt)]))
    assert_close(invvar, ref_invvar.astype(acc), **tol(acc), what="invvar")
    # The output, and the gradients against jax.vjp of the float64 reference (independent
    # of the kernel's closed form).
    with jax.enable_x64(True):
        assert_close(out, np.asarray(_reference_rms(x64, w64)).astype(w_dtype), **tol(w_dtype), what="out")
        _, vjp = jax.vjp(_reference_rms, x64, w64)
        ref_gx, ref_gw = (np.asarray(a) for a in vjp(g64))
    scale = max(1.0, float(np.abs(ref_gw).max()))
    assert_close(gx, ref_gx.astype(x_dtype), **tol(x_dtype), what="grad input")
    gw_tol = tol(w_dtype)
    assert_close(gw, ref_gw.astype(w_dtype), rtol=gw_tol["rtol"] * 4, atol=gw_tol["atol"] * scale * 4, what="grad gamma")
    # part_grad: the kernel's partial sums over its row segments, summing to grad gamma.
    n1 = rows.shape[0]
    per_row = g64.reshape(-1, n2) * rows * ref_invvar[:, None]
    seg = -(-(-(-n1 // 16)) // 16) * 16
    ref_part = np.stack([per_row[b * seg:(b + 1) * seg].sum(axis=0) for b in range(16)])
    assert_close(part, ref_part.astype(acc), rtol=tol(acc)["rtol"] * 4, atol=tol(acc)["atol"] * scale * 4,
                 what="part grad")


# --- jaxDecomp ------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["pfft_C64", "pfft_C128"])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("contiguous", [True, False])
def test_jaxdecomp_pfft_ffi(target, forward, adjoint, contiguous):
    dtype = np.complex64 if target == "pfft_C64" else np.complex128
    x = random_array(np.random.default_rng(2), (4, 6, 8), dtype)
    name = f"{target}_{'fwd' if forward else 'bwd'}{'_adj' if adjoint else ''}{'' if contiguous else '_noncontig'}.hlo"
    (y,) = _run(name, [x])
    # cuFFT: forward unnormalized, backward unnormalized (ifftn · N); adjoint swaps them.
    ref = np.fft.fftn(x) if forward != adjoint else np.fft.ifftn(x) * x.size
    if contiguous:
        ref = ref.transpose((1, 2, 0) if forward else (2, 0, 1))
    # Sums of 192 terms of unit size: f32 rounding grows with sqrt(N)·log N.
    rtol, atol = (1e-5, 1e-4) if dtype == np.complex64 else (1e-12, 1e-11)
    assert_close(y, ref.astype(dtype), rtol=rtol, atol=atol)


@pytest.mark.parametrize("forward", [True, False])
def test_jaxdecomp_pfft3d_opaque_form(forward):
    x = random_array(np.random.default_rng(3), (4, 6, 8), np.complex64)
    (y,) = _run(f"pfft3d_{'fwd' if forward else 'bwd'}.hlo", [x])
    ref = np.fft.fftn(x).transpose(1, 2, 0) if forward else (np.fft.ifftn(x) * x.size).transpose(2, 0, 1)
    assert_close(y, ref.astype(np.complex64), rtol=1e-5, atol=1e-4)


def test_jaxdecomp_distributed_pfft_is_refused_by_name():
    from converter.runtime.convert import convert_file

    path = str(DUMPS / "pfft3d_pencils.hlo")
    with pytest.raises(ConverterError) as e:
        convert_file(path)
    message = str(e.value)
    assert f"{path}:7:3: error: %pfft3d.2 (custom-call pfft3d)" in message
    assert "pencils decomposition" in message and 'custom_call_target="pfft3d"' in message


def _tiles(x: np.ndarray, axes, mesh) -> np.ndarray:
    """Partition p's block (mesh position (p // b, p % b); mesh axis k splits array axis
    axes[k]) stacked along a leading device axis, as JAX's NamedSharding hands them out."""
    a, b = mesh
    out = []
    for p in range(a * b):
        index = [slice(None)] * x.ndim
        for axis, size, i in ((axes[0], a, p // b), (axes[1], b, p % b)):
            if size > 1:
                step = x.shape[axis] // size
                index[axis] = slice(i * step, (i + 1) * step)
        out.append(x[tuple(index)])
    return np.stack(out)


_MESHES = {name: (mesh, decomposition) for name, mesh, decomposition in gen.PFFT_MESHES}
_DIST_CASES = [(name, forward, contiguous, False, "pfft_C64") for name in _MESHES
               for forward in (True, False) for contiguous in (True, False)] + gen.PFFT_EXTRA


@pytest.mark.parametrize("mesh_name,forward,contiguous,adjoint,target", _DIST_CASES,
                         ids=[gen.pfft_distributed_name(*c)[10:-4] for c in _DIST_CASES])
def test_jaxdecomp_distributed_pfft(mesh_name, forward, contiguous, adjoint, target):
    mesh, decomposition = _MESHES[mesh_name]
    dtype = np.complex64 if target == "pfft_C64" else np.complex128
    gin = gen.pfft_global_shape(forward, contiguous, operand=True)
    x = random_array(np.random.default_rng(4), gin, dtype)
    name = gen.pfft_distributed_name(mesh_name, forward, contiguous, adjoint, target)
    (y,) = _run(name, [_tiles(x, gen.pfft_split_axes(forward, contiguous, decomposition, True), mesh)])
    # The global transform in float64 NumPy (cuFFT's unnormalized inverse; adjoint swaps the
    # kernel, not the layouts), split as jaxDecomp's get_output_specs says.
    x128 = x.astype(np.complex128)
    ref = np.fft.fftn(x128) if forward != adjoint else np.fft.ifftn(x128) * x.size
    if contiguous:
        ref = ref.transpose((1, 2, 0) if forward else (2, 0, 1))
    expected = _tiles(ref, gen.pfft_split_axes(forward, contiguous, decomposition, False), mesh)
    # Sums of 384 unit-size terms rounded in the dtype: error ~ sqrt(N)·log N ulps of the
    # result's scale (~20).
    rtol, atol = (1e-5, 2e-4) if dtype == np.complex64 else (1e-12, 1e-11)
    assert_close(y, expected.astype(dtype), rtol=rtol, atol=atol)


def test_jaxdecomp_distributed_pfft_mesh_must_match_partitions():
    text = (DUMPS / "pfft_dist_pencils4_fwd.hlo").read_text().replace("num_partitions=4", "num_partitions=2")
    with pytest.raises(ConverterError) as e:
        convert_program(text)
    message = str(e.value)
    assert "(custom-call pfft_C64)" in message and "make a 2x2 mesh, but the module has 2 partitions" in message
