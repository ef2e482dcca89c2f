"""Optimized dumps that XLA wrote for ordinary JAX programs (tests/programs/catalog.py) on
CPU, TPU (v5e 2x2, deviceless) and GPU (4 x H100, deviceless), converted and run on CPU,
against JAX's own CPU results for the same program and inputs, device by device."""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from converter.runtime.program import load
from tests.helpers import assert_close
from tests.programs.catalog import BY_NAME

DUMPS = pathlib.Path(__file__).parent / "dumps"
# The catalog's dumps (a folder with its manifest); others (callbacks/) have their own tests.
CASES = sorted((p.parent.name, p.stem) for p in DUMPS.glob("*/*.hlo") if (p.parent / "manifest.json").exists())

# TPU dumps of f32 programs compute matmuls and convolutions at the TPU's DEFAULT
# precision (bf16 operands, f32 accumulation).  The error of such a product is a few bf16
# ulps (2^-8) of its operands' magnitudes, not of each output element (sums cancel), so
# the absolute tolerance scales with the output's largest magnitude.
BACKEND_TOLERANCE = {"tpu": 3e-2}
# Programs whose f32 outputs are computed from bf16 intermediates: backends round a bf16
# convolution's f32 accumulation at different points (cuDNN in its epilogue, XLA's CPU
# after its own), so the statistics over it agree to a bf16 ulp (2^-7) of their magnitude.
PROGRAM_TOLERANCE = {"conv_bn_relu_bf16": 2.0 ** -7}
# f32 GEMMs with K up to 4096 that the GPU splits along K: partial sums, then a sum over
# the splits, is another order of the same f32 additions.  Reassociation error grows like
# sqrt(K) f32 ulps (2^-24) of the sum of |products|, about the output's largest
# magnitude: 64 * 2^-24 = 2^-18 of it.
PROGRAM_TOLERANCE.update({name: 2.0 ** -18 for name in (
    "spmd_splitk_mlp_silu_bf16w", "spmd_splitk_swiglu_tp", "spmd_splitk_dp_grads", "spmd_splitk_tp_row_parallel",
    "spmd_splitk_fsdp_grads", "spmd_splitk_2d_data_model")})

# Dumps holding a call no pass rewrites yet: they must fail with a clear error (strict
# xfail: the entry goes when the rewrite lands).
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def _svd_signs_fixed(u: np.ndarray, s: np.ndarray, vt: np.ndarray) -> list[np.ndarray]:
    """An SVD is unique only up to the sign of each singular pair (u_i, v_i): TPU's
    QDWH-and-eigh SVD and LAPACK's gesdd pick different ones.  Make each u_i's largest
    entry positive and flip v_i with it; then both are comparable."""
    rows = np.argmax(np.abs(u), axis=-2)
    signs = np.sign(np.take_along_axis(u, rows[..., None, :], axis=-2))[..., 0, :]
    return [u * signs[..., None, :], s, vt * signs[..., :, None]]


def _phase_fixed(v: np.ndarray) -> np.ndarray:
    """Eigenvectors are unique only up to a unit factor (a sign, or a complex phase):
    divide each column by the phase of its largest entry."""
    rows = np.argmax(np.abs(v), axis=-2)
    top = np.take_along_axis(v, rows[..., None, :], axis=-2)
    return v * (np.abs(top) / top)


# Outputs defined only up to an equivalence: both sides brought to one representative.
# (TPU computes complex eigh with its own algorithm, not the Jacobi kernel or LAPACK.)
CANONICAL_FORM = {
    "linalg_svd": _svd_signs_fixed,
    "linalg_complex": lambda w, v, *rest: [w, _phase_fixed(v), *rest],
}


def _per_device(arr: jax.Array, mesh: Mesh) -> np.ndarray:
    """Device d's value at index d, d = position of the device in the mesh (the dump's
    logical device id)."""
    order = {dev.id: i for i, dev in enumerate(mesh.devices.flat)}
    shards = sorted(arr.addressable_shards, key=lambda s: order[s.device.id])
    return np.stack([np.asarray(s.data) for s in shards])


def _case(backend: str, name: str):
    gap = KNOWN_GAPS.get((backend, name))
    marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
    return pytest.param(backend, name, id=f"{backend}-{name}", marks=marks)


def jax_case(backend: str, name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The inputs of catalog program `name` as the dump in tests/dumps/<backend> takes them
    (with a leading device axis for a multi-device dump) and JAX's own CPU outputs for
    them, laid out alike: the independent oracle for anything computed from that dump."""
    program = BY_NAME[name]
    mesh = Mesh(np.array(jax.devices()[: program.devices]).reshape(program.mesh_shape), program.axis_names)
    args = program.inputs(np.random.default_rng(0))
    in_specs = program.in_specs or [P()] * len(args)
    if not isinstance(in_specs, (list, tuple)):
        in_specs = [in_specs]
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, in_specs)]
    kwargs = {}
    if program.out_specs is not None and "spmd" in program.tags:
        out = program.out_specs
        kwargs["out_shardings"] = NamedSharding(mesh, out) if isinstance(out, P) else \
            tuple(NamedSharding(mesh, o) for o in out)
    want = jax.tree_util.tree_leaves(jax.jit(program.build(mesh), **kwargs)(*placed))
    if program.devices > 1:
        return [_per_device(a, mesh) for a in placed], [_per_device(w, mesh) for w in want]
    return [np.asarray(a) for a in args], [np.asarray(w) for w in want]


def assert_like_jax(backend: str, name: str, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Outputs of the dump `backend/name` (however converted and run) against JAX's, with
    the tolerances above for what the backend computes differently."""
    assert len(got) == len(want)
    if name in CANONICAL_FORM:
        got, want = CANONICAL_FORM[name](*got), CANONICAL_FORM[name](*want)
    # tests/dumps/<backend>_jax012: the same catalog dumped by jax 0.12 for the same target
    tol = max(BACKEND_TOLERANCE.get(backend.split("_")[0], 0.0), PROGRAM_TOLERANCE.get(name, 0.0)) or None
    for i, (g, w) in enumerate(zip(got, want)):
        if tol is not None and w.dtype.kind in "fc" and w.size:
            magnitude = np.abs(w.astype(np.complex128 if w.dtype.kind == "c" else np.float64))
            finite = magnitude[np.isfinite(magnitude)]  # NaN/inf outputs must match as such, not widen atol
            scale = float(finite.max()) if finite.size else 1.0
            assert_close(g, w, rtol=tol, atol=tol * max(scale, 1.0), what=f"{backend}/{name} output {i}")
        else:
            assert_close(g, w, what=f"{backend}/{name} output {i}")


@pytest.mark.parametrize("backend, name", [_case(b, n) for b, n in CASES])
def test_dump_matches_jax(backend, name):
    inputs, want = jax_case(backend, name)
    dump = load(str(DUMPS / backend / f"{name}.hlo"))
    assert_like_jax(backend, name, dump(*inputs), want)


SPLIT_K_DUMPS = sorted(p.stem for p in (DUMPS / "gpu_triton").glob("spmd_splitk_*.hlo"))


@pytest.mark.parametrize("name", SPLIT_K_DUMPS)
def test_split_k_programs_are_split_in_their_triton_dumps(name):
    """The catalog's split-K programs have no batched matmul: a dot with a batch
    dimension in their GPU dump is XLA's split over K, and a reduce over an array led by
    that many splits sums the partial products.  A regenerated dump without them would
    no longer test split-K."""
    from converter.hlo.parser import parse_hlo

    module = parse_hlo((DUMPS / "gpu_triton" / f"{name}.hlo").read_text())
    instructions = [i for c in module.computations for i in c.instructions]
    splits = {i.shape.dims[0] for i in instructions if i.opcode == "dot" and i.attrs.get("lhs_batch_dims")}
    assert splits, f"{name}: no dot with a split (batch) dimension"
    reduced = {c.by_name[i.operands[0]].shape.dims[0]
               for c in module.computations for i in c.instructions
               if i.opcode == "reduce" and list(i.attrs.get("dimensions", [])) == [0]}
    assert splits & reduced, f"{name}: no reduce over the {sorted(splits)} splits"
