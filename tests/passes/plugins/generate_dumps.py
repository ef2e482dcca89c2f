"""Writes the small dumps under tests/passes/plugins/dumps/: library custom-calls in the forms the
libraries emit, built without the libraries (none of them installs here).

- jax docs/gpu_ops RMSNorm: `mlir.custom_call` with the packed RMSNormDescriptor as its
  opaque backend_config and row-major layouts, as the example's lowering writes it.
- jaxDecomp: `pfft_C64`/`pfft_C128` through `jax.ffi.ffi_call` with its attributes, and the
  earlier `pfft3d` with the packed fftDescriptor, its result reshaped after the call.
- AWS Neuron: torch-neuronx writes HLO protos itself (no JAX): these are written as HLO text
  in its form (api_version=API_VERSION_UNSPECIFIED, no layouts, RmsNorm's eps an f32 constant
  operand and its dimension as decimal text in backend_config).

Run from the repository root: `python -m tests.passes.plugins.generate_dumps`.
"""

from __future__ import annotations

import os
import struct

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters import mlir
from jax.extend.core import Primitive
from jax._src import core

from tests.programs.generate import relativize_source_paths

HERE = os.path.dirname(os.path.abspath(__file__))
DUMPS = os.path.join(HERE, "dumps")

_ELEMENT = {jnp.bfloat16: 0, jnp.float16: 1, jnp.float32: 2, jnp.float64: 3}


def _hlo(fn, *specs) -> str:
    with jax.enable_x64(True):
        text = jax.jit(fn).lower(*specs).as_text(dialect="hlo")
    return relativize_source_paths(text)


def _opaque_primitive(name: str, target: str, abstract, *, reshape_to=None):
    """A primitive lowered to one `custom_call(target)` whose backend_config is the
    primitive's `opaque` parameter (bytes), with row-major layouts."""
    prim = Primitive(name)
    prim.multiple_results = True
    prim.def_abstract_eval(lambda *avals, opaque, **kw: abstract(*avals, **kw))

    def lowering(ctx, *args, opaque, **kw):
        outs = ctx.avals_out if reshape_to is None else [core.ShapedArray(a.shape, a.dtype) for a in ctx.avals_in[:1]]
        result_types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in outs]
        call = mlir.custom_call(target, result_types=result_types, operands=list(args), backend_config=opaque,
                                operand_layouts=[tuple(range(len(a.shape) - 1, -1, -1)) for a in ctx.avals_in],
                                result_layouts=[tuple(range(len(a.shape) - 1, -1, -1)) for a in outs],
                                has_side_effect=reshape_to is not None)
        results = list(call.results)
        if reshape_to is not None:  # jaxDecomp's pfft3d: the result reshaped after the call
            from jax._src.lib.mlir.dialects import hlo

            results = [hlo.reshape(mlir.aval_to_ir_type(ctx.module_context, ctx.avals_out[0]), results[0])]
        return results

    mlir.register_lowering(prim, lowering)
    return prim


def _rms_descriptor(n1, n2, eps, x_dtype, w_dtype, part) -> bytes:
    return struct.pack("<iidiii", n1, n2, eps, _ELEMENT[x_dtype], _ELEMENT[w_dtype], part) + b"\0" * 4


def rms_norm_dumps() -> dict[str, str]:
    def fwd_abstract(x, w):
        iv = jnp.float32 if x.dtype in (jnp.float16, jnp.bfloat16) else x.dtype
        n2 = int(np.prod(w.shape))
        return core.ShapedArray(x.shape, w.dtype), core.ShapedArray((x.size // n2,), iv)

    def bwd_abstract(g, iv, x, w):
        n2 = int(np.prod(w.shape))
        return (core.ShapedArray(x.shape, x.dtype), core.ShapedArray(w.shape, w.dtype),
                core.ShapedArray((16, n2), iv.dtype))

    fwd = _opaque_primitive("rms_fwd", "rms_forward_affine_mixed_dtype", fwd_abstract)
    bwd = _opaque_primitive("rms_bwd", "rms_backward_affine", bwd_abstract)
    dumps = {}
    for name, x_dtype, w_dtype, x_shape, w_shape in [
        ("f32", jnp.float32, jnp.float32, (4, 8, 32), (32,)),
        ("bf16_f32w", jnp.bfloat16, jnp.float32, (3, 5, 16), (16,)),
        ("f16_2d_weight", jnp.float16, jnp.float16, (2, 4, 8), (4, 8)),
        ("f64", jnp.float64, jnp.float64, (70, 24), (24,)),
    ]:
        n2 = int(np.prod(w_shape))
        n1 = int(np.prod(x_shape)) // n2
        iv = jnp.float64 if x_dtype == jnp.float64 else jnp.float32

        def step(x, w, g, n1=n1, n2=n2):
            out, invvar = fwd.bind(x, w, opaque=_rms_descriptor(n1, n2, 1e-5, x_dtype, w_dtype, 0))
            gx, gw, part = bwd.bind(g, invvar, x, w, opaque=_rms_descriptor(n1, n2, 1e-5, x_dtype, w_dtype, 16))
            return out, invvar, gx, gw, part

        dumps[f"rms_norm_{name}.hlo"] = _hlo(step, jax.ShapeDtypeStruct(x_shape, x_dtype),
                                             jax.ShapeDtypeStruct(w_shape, w_dtype),
                                             jax.ShapeDtypeStruct(x_shape, w_dtype))
        del iv
    return dumps


def _fft_descriptor(adjoint, contiguous, forward, gdims, decomposition, double) -> bytes:
    head = struct.pack("<???x3iI?", adjoint, contiguous, forward, *gdims, decomposition, double)
    return head + b"\0" * (64 - len(head))  # the cuDecomp grid config follows; its bytes are not read


def pfft_dumps() -> dict[str, str]:
    dumps = {}
    order = {True: (1, 2, 0), False: (2, 0, 1)}
    for dtype, target in [(jnp.complex64, "pfft_C64"), (jnp.complex128, "pfft_C128")]:
        for forward in (True, False):
            for adjoint in (False, True):
                for contiguous in (True, False):
                    shape = (4, 6, 8)
                    out_shape = tuple(shape[i] for i in order[forward]) if contiguous else shape

                    def f(x, forward=forward, adjoint=adjoint, contiguous=contiguous, out_shape=out_shape):
                        workspace = jnp.zeros((64,), jnp.int8)
                        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape, x.dtype))(
                            x, workspace, gdims=np.array(shape[::-1], np.int64), pdims=np.array([1, 1], np.int64),
                            transpose_comm_backend=np.int64(0), halo_comm_backend=np.int64(0), forward=forward,
                            adjoint=adjoint, contiguous=contiguous, decomposition=np.int64(3))

                    tag = f"{target}_{'fwd' if forward else 'bwd'}{'_adj' if adjoint else ''}{'' if contiguous else '_noncontig'}"
                    dumps[f"{tag}.hlo"] = _hlo(f, jax.ShapeDtypeStruct(shape, dtype))

    def pfft3d_abstract(x, ws, *, out_shape):
        return (core.ShapedArray(out_shape, x.dtype),)

    prim = _opaque_primitive("pfft3d", "pfft3d", pfft3d_abstract, reshape_to=True)
    for forward in (True, False):
        shape = (4, 6, 8)
        out_shape = tuple(shape[i] for i in order[forward])

        def g(x, forward=forward, out_shape=out_shape):
            ws = jnp.zeros((64,), jnp.int8)
            (y,) = prim.bind(x, ws, opaque=_fft_descriptor(False, True, forward, shape[::-1], 3, False),
                             out_shape=out_shape)
            return y

        dumps[f"pfft3d_{'fwd' if forward else 'bwd'}.hlo"] = _hlo(g, jax.ShapeDtypeStruct(shape, jnp.complex64))
    # A distributed one (2 x 2 pencils): refused by name.
    def dist(x):
        ws = jnp.zeros((64,), jnp.int8)
        (y,) = prim.bind(x, ws, opaque=_fft_descriptor(False, True, True, (16, 12, 8), 2, False), out_shape=(3, 8, 4))
        return y

    dumps["pfft3d_pencils.hlo"] = _hlo(dist, jax.ShapeDtypeStruct((4, 3, 8), jnp.complex64))
    return dumps


# Distributed pfft_C64 calls: (name, mesh shape (a, b), decomposition), on a (4, 8, 12) array.
PFFT_MESHES = [("xy2", (2, 1), 0), ("yz2", (1, 2), 1), ("xy4", (4, 1), 0), ("yz4", (1, 4), 1),
               ("pencils4", (2, 2), 2)]
PFFT_GLOBAL = (4, 8, 12)


def pfft_split_axes(forward: bool, contiguous: bool, decomposition: int, operand: bool) -> tuple:
    """The array axis mesh axes 0 and 1 split in a call's operand or result, written out from
    jaxDecomp's get_output_specs (cudecomp backend) on the input spec (axis 0, axis 1, none)."""
    forward_result = {True: {0: (1, None), 1: (None, 1), 2: (0, 1)},
                      False: {0: (1, None), 1: (None, 2), 2: (1, 2)}}[contiguous][decomposition]
    return (0, 1) if forward == operand else forward_result


def pfft_global_shape(forward: bool, contiguous: bool, operand: bool) -> tuple:
    order = (1, 2, 0) if contiguous else (0, 1, 2)
    transposed = tuple(PFFT_GLOBAL[i] for i in order)
    return PFFT_GLOBAL if forward == operand else transposed


def _tile_shape(shape, axes, mesh):
    out = list(shape)
    for axis, size in zip(axes, mesh):
        if size > 1:
            out[axis] //= size
    return tuple(out)


def pfft_distributed_name(mesh_name: str, forward: bool, contiguous: bool, adjoint: bool = False,
                          target: str = "pfft_C64") -> str:
    return (f"pfft_dist_{mesh_name}_{'fwd' if forward else 'bwd'}{'_adj' if adjoint else ''}"
            f"{'' if contiguous else '_noncontig'}{'' if target == 'pfft_C64' else '_c128'}.hlo")


def _pfft_distributed_dump(mesh, decomposition, forward, contiguous, adjoint, target) -> str:
    """What one partition of a jaxDecomp program runs (the SPMD partitioner's output): its
    block through the typed-FFI call with the attributes FFTPrimitive.lowering writes (pdims
    and gdims as get_lowering_args forms them), in a module of a * b partitions."""
    a, b = mesh
    gin = pfft_global_shape(forward, contiguous, operand=True)
    tile = _tile_shape(gin, pfft_split_axes(forward, contiguous, decomposition, True), mesh)
    gout = pfft_global_shape(forward, contiguous, operand=False)
    out = _tile_shape(gout, pfft_split_axes(forward, contiguous, decomposition, False), mesh)
    pdims = (b, a)  # get_pdims_from_mesh: the mesh shape reversed
    back = (0, 1, 2)
    if contiguous:
        if decomposition == 0:
            pdims = pdims[::-1]
            back = (1, 2, 0) if forward else (0, 1, 2)
        elif not forward:
            back = (2, 0, 1)
    gdims = tuple(gin[i] for i in back)[::-1]
    pre = not forward and contiguous and decomposition == 1  # per_shard_impl

    def f(x):
        if pre:
            x = x.transpose(1, 2, 0)
        workspace = jnp.zeros((64,), jnp.int8)
        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out, x.dtype))(
            x, workspace, gdims=np.array(gdims, np.int64), pdims=np.array(pdims, np.int64),
            transpose_comm_backend=np.int64(0), halo_comm_backend=np.int64(0), forward=forward,
            adjoint=adjoint, contiguous=contiguous, decomposition=np.int64(decomposition))

    dtype = jnp.complex64 if target == "pfft_C64" else jnp.complex128
    head, rest = _hlo(f, jax.ShapeDtypeStruct(tile, dtype)).split("\n", 1)
    return f"{head}, num_partitions={a * b}\n{rest}"


# Besides every mesh, direction and layout: the adjoint (jaxDecomp's VJP calls) and the
# double-precision target, on pencils and on the pre-transposed YZ slab.
PFFT_EXTRA = [("pencils4", True, True, True, "pfft_C64"), ("pencils4", False, True, True, "pfft_C64"),
              ("yz4", False, True, True, "pfft_C64"), ("pencils4", True, True, False, "pfft_C128"),
              ("yz4", False, True, False, "pfft_C128")]


def pfft_distributed_dumps() -> dict[str, str]:
    meshes = {name: (mesh, decomposition) for name, mesh, decomposition in PFFT_MESHES}
    cases = [(name, forward, contiguous, False, "pfft_C64") for name in meshes
             for forward in (True, False) for contiguous in (True, False)] + PFFT_EXTRA
    return {pfft_distributed_name(name, forward, contiguous, adjoint, target):
            _pfft_distributed_dump(*meshes[name], forward, contiguous, adjoint, target)
            for name, forward, contiguous, adjoint, target in cases}


_NEURON = """HloModule SyncTensorsGraph.{n}, entry_computation_layout={{({t}[{dims}]{{{layout}}}{extra_params})->({results})}}

ENTRY %SyncTensorsGraph.{n} ({params}) -> ({results}) {{
{body}
}}
"""


def neuron_dumps() -> dict[str, str]:
    dumps = {}
    for t in ("f32", "bf16"):
        dims, layout = "2,3,16", "2,1,0"
        shape = f"{t}[{dims}]{{{layout}}}"
        body = "\n".join([
            f"  %p0.1 = {shape} parameter(0)",
            f"  %custom-call.2 = {shape} custom-call({shape} %p0.1), custom_call_target=\"AwsNeuronGelu\", "
            "api_version=API_VERSION_UNSPECIFIED, metadata={op_type=\"xla___op_GeluForwardImpl\" "
            "op_name=\"xla___op_GeluForwardImpl\"}",
            f"  %custom-call.3 = {shape} custom-call({shape} %p0.1), custom_call_target=\"AwsNeuronGeluBackward\", "
            "api_version=API_VERSION_UNSPECIFIED",
            f"  %custom-call.4 = {shape} custom-call({shape} %p0.1), custom_call_target=\"AwsNeuronGeluApprxTanh\", "
            "api_version=API_VERSION_UNSPECIFIED",
            f"  %p1.5 = {t}[16]{{0}} parameter(1)",
            f"  %custom-call.6 = {t}[16]{{0}} custom-call({t}[16]{{0}} %p1.5), "
            "custom_call_target=\"AwsNeuronTransferWithStaticRing\", api_version=API_VERSION_UNSPECIFIED",
            "  %constant.7 = f32[] constant(1e-06)",
            f"  %custom-call.8 = {shape} custom-call({shape} %p0.1, {t}[16]{{0}} %custom-call.6, f32[] %constant.7), "
            "custom_call_target=\"AwsNeuronRmsNorm\", api_version=API_VERSION_UNSPECIFIED, backend_config=\"2\"",
            f"  %custom-call.10 = {shape} custom-call({shape} %p0.1), custom_call_target=\"AwsNeuronSoftmax\", "
            "api_version=API_VERSION_UNSPECIFIED, backend_config=\"1\"",
            f"  %p2.11 = {shape} parameter(2)",
            f"  %custom-call.12 = {shape} custom-call({shape} %p2.11, {shape} %custom-call.10), "
            "custom_call_target=\"AwsNeuronSoftmaxBackward\", api_version=API_VERSION_UNSPECIFIED, backend_config=\"1\"",
            f"  ROOT %tuple.9 = ({shape}, {shape}, {shape}, {shape}, {shape}, {shape}) tuple({shape} %custom-call.2, "
            f"{shape} %custom-call.3, {shape} %custom-call.4, {shape} %custom-call.8, {shape} %custom-call.10, "
            f"{shape} %custom-call.12)",
        ])
        dumps[f"neuron_activations_{t}.hlo"] = _NEURON.format(
            n=10, t=t, dims=dims, layout=layout, extra_params=f", {t}[16]{{0}}, {shape}",
            results=", ".join([shape] * 6), params=f"p0.1: {shape}, p1.5: {t}[16], p2.11: {shape}", body=body)
    shape = "f32[2,16]{1,0}"
    body = "\n".join([
        f"  %p0.1 = {shape} parameter(0)",
        f"  %p1.2 = {shape} parameter(1)",
        "  %p2.3 = f32[16]{0} parameter(2)",
        "  %constant.4 = f32[] constant(1e-06)",
        f"  ROOT %custom-call.5 = ({shape}, f32[16]{{0}}) custom-call({shape} %p0.1, {shape} %p1.2, f32[16]{{0}} %p2.3, "
        "f32[] %constant.4), custom_call_target=\"AwsNeuronRmsNormBackward\", api_version=API_VERSION_UNSPECIFIED, "
        "backend_config=\"1\"",
    ])
    dumps["neuron_rms_norm_backward.hlo"] = _NEURON.format(
        n=6, t="f32", dims="2,16", layout="1,0", extra_params=", f32[2,16]{1,0}, f32[16]{0}",
        results=f"{shape}, f32[16]{{0}}", params=f"p0.1: f32[2,16], p1.2: f32[2,16], p2.3: f32[16]", body=body)
    return dumps


def main() -> None:
    os.makedirs(DUMPS, exist_ok=True)
    for name, text in {**rms_norm_dumps(), **pfft_dumps(), **pfft_distributed_dumps(), **neuron_dumps()}.items():
        with open(os.path.join(DUMPS, name), "w") as f:
            f.write(text)
        print("wrote", name)


if __name__ == "__main__":
    main()
