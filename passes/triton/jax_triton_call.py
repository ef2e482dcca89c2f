"""jax-triton's calls (`triton_kernel_call_ffi`, typed FFI, and the older
`triton_kernel_call`): the backend_config (the FFI dictionary's `opaque`, or the whole
backend_config string in the older form) is a zlib-compressed `jax_triton.TritonAnyKernelCall`
proto (jaxlib/gpu/triton.proto): one kernel call, or an autotuned set of them, each with
its kernel (name, num_warps, shared memory, PTX, and the Triton IR as *text* in `ttir`),
its grid and its parameters (an array pointer, or a scalar of a given type, in the kernel's
argument order).

The message classes are built at run time from a descriptor matching triton.proto (field
numbers as there); protobuf is already a dependency (converter/hlo/proto), imported when a
call is read (every conversion registers this module's targets; few hold such a call).  An autotuned
set is read as its first config: each config computes the same values (the autotuner
times them and keeps the fastest); the config's description is kept for messages.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from passes.mosaic.kernel import KernelError

if TYPE_CHECKING:
    from google.protobuf import descriptor_pool

TARGETS = ("triton_kernel_call_ffi", "triton_kernel_call")
_PACKAGE = "jax_triton"

# Scalar parameter kinds: the oneof field of TritonKernelCall.Parameter → (number, proto
# type (a FieldDescriptorProto.Type name), the kernel argument type it passes).
SCALAR_KINDS = {"bool_": (2, "TYPE_BOOL", "i1"), "i32": (3, "TYPE_INT32", "i32"), "u32": (4, "TYPE_UINT32", "i32"),
                "i64": (5, "TYPE_INT64", "i64"), "u64": (6, "TYPE_UINT64", "i64"), "f32": (7, "TYPE_FLOAT", "f32"),
                "f64": (8, "TYPE_DOUBLE", "f64")}


def _field(msg, name: str, number: int, kind: int, type_name: str = "", repeated: bool = False,
           oneof: int | None = None, proto3_optional: bool = False):
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    f = msg.field.add(name=name, number=number, type=kind,
                      label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        f.type_name = f".{_PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof
    if proto3_optional:
        f.proto3_optional = True
    return f


@lru_cache(maxsize=1)
def _pool() -> descriptor_pool.DescriptorPool:
    from google.protobuf import descriptor_pb2, descriptor_pool

    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="hlo_roundtrip_jax_triton.proto", package=_PACKAGE, syntax="proto3")
    kernel = fd.message_type.add(name="TritonKernel")
    for name, number, kind in (("kernel_name", 1, F.TYPE_STRING), ("num_warps", 2, F.TYPE_UINT32),
                               ("shared_mem_bytes", 3, F.TYPE_UINT32), ("ptx", 4, F.TYPE_STRING),
                               ("ttir", 5, F.TYPE_STRING), ("compute_capability", 6, F.TYPE_UINT32)):
        _field(kernel, name, number, kind)
    kernel.oneof_decl.add(name="_num_ctas")
    _field(kernel, "num_ctas", 10, F.TYPE_UINT32, oneof=0, proto3_optional=True)

    call = fd.message_type.add(name="TritonKernelCall")
    param = call.nested_type.add(name="Parameter")
    array = param.nested_type.add(name="Array")
    _field(array, "bytes_to_zero", 1, F.TYPE_UINT64)
    _field(array, "ptr_divisibility", 2, F.TYPE_UINT64)
    param.oneof_decl.add(name="value")
    _field(param, "array", 1, F.TYPE_MESSAGE, "TritonKernelCall.Parameter.Array", oneof=0)
    for name, (number, kind, _) in SCALAR_KINDS.items():
        _field(param, name, number, getattr(F, kind), oneof=0)
    _field(call, "kernel", 1, F.TYPE_MESSAGE, "TritonKernel")
    for k in range(3):
        _field(call, f"grid_{k}", 2 + k, F.TYPE_UINT32)
    _field(call, "parameters", 5, F.TYPE_MESSAGE, "TritonKernelCall.Parameter", repeated=True)

    tuned = fd.message_type.add(name="TritonAutotunedKernelCall")
    config = tuned.nested_type.add(name="Config")
    _field(config, "kernel_call", 1, F.TYPE_MESSAGE, "TritonKernelCall")
    _field(config, "description", 2, F.TYPE_STRING)
    alias = tuned.nested_type.add(name="InputOutputAlias")
    _field(alias, "input_buffer_idx", 1, F.TYPE_UINT32)
    _field(alias, "output_buffer_idx", 2, F.TYPE_UINT32)
    _field(alias, "buffer_size_bytes", 3, F.TYPE_UINT64)
    _field(tuned, "name", 1, F.TYPE_STRING)
    _field(tuned, "configs", 2, F.TYPE_MESSAGE, "TritonAutotunedKernelCall.Config", repeated=True)
    _field(tuned, "input_output_aliases", 3, F.TYPE_MESSAGE, "TritonAutotunedKernelCall.InputOutputAlias",
           repeated=True)

    anycall = fd.message_type.add(name="TritonAnyKernelCall")
    anycall.oneof_decl.add(name="value")
    _field(anycall, "kernel_call", 1, F.TYPE_MESSAGE, "TritonKernelCall", oneof=0)
    _field(anycall, "autotuned_kernel_call", 2, F.TYPE_MESSAGE, "TritonAutotunedKernelCall", oneof=0)
    _field(anycall, "metadata", 3, F.TYPE_BYTES)
    _field(anycall, "name", 4, F.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return pool


def message_class(name: str):
    """The class of message `jax_triton.<name>` (TritonAnyKernelCall, TritonKernelCall, ...)."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{_PACKAGE}.{name}"))


@dataclass(frozen=True)
class Parameter:
    """One kernel argument: `kind` "array" (the next buffer) or a scalar kind of
    SCALAR_KINDS with its `value`; `zero_bytes`: an array's leading bytes jax-triton
    zeroes before the kernel runs (its zeroed_outputs)."""

    kind: str
    value: int | float | bool | None = None
    zero_bytes: int = 0


@dataclass(frozen=True)
class JaxTritonCall:
    name: str  # the kernel's name (the tt.func)
    ttir: str  # the Triton module as text
    grid: tuple[int, int, int]
    parameters: tuple[Parameter, ...]
    config: str  # which config of an autotuned set ("" for a single kernel call)
    configs: int  # how many configs the set holds (1 for a single call)


def decode(data: bytes) -> JaxTritonCall:
    """The call a zlib-compressed TritonAnyKernelCall describes (its first config where
    it is an autotuned set)."""
    try:
        raw = zlib.decompress(data)
    except zlib.error as e:
        raise KernelError(f"the jax-triton call's opaque is not zlib data ({e})") from None
    message = message_class("TritonAnyKernelCall")()
    try:
        message.ParseFromString(raw)
    except Exception as e:  # noqa: BLE001  (protobuf's DecodeError and the upb backend's own)
        raise KernelError(f"the jax-triton call's opaque is not a TritonAnyKernelCall proto ({e})") from None
    which = message.WhichOneof("value")
    if which == "kernel_call":
        call, config, configs = message.kernel_call, "", 1
    elif which == "autotuned_kernel_call":
        tuned = message.autotuned_kernel_call
        if not tuned.configs:
            raise KernelError(f"the autotuned jax-triton call '{tuned.name}' holds no kernel")
        call, config, configs = tuned.configs[0].kernel_call, tuned.configs[0].description, len(tuned.configs)
    else:
        raise KernelError("the jax-triton call's proto holds no kernel call")
    params = []
    for k, p in enumerate(call.parameters):
        kind = p.WhichOneof("value")
        if kind is None:
            # Newer jaxlibs add parameter kinds (TMA descriptors) this schema lacks.
            raise KernelError(f"parameter {k} of jax-triton kernel '{call.kernel.kernel_name}' is of a kind this "
                              "reader does not know (only arrays and scalars are supported; a TMA descriptor?)")
        if kind == "array":
            params.append(Parameter(kind, zero_bytes=p.array.bytes_to_zero))
        else:
            params.append(Parameter(kind, getattr(p, kind)))
    if not call.kernel.ttir:
        raise KernelError(f"jax-triton kernel '{call.kernel.kernel_name}' carries no Triton IR (ttir), only PTX")
    grid = (max(call.grid_0, 1), max(call.grid_1, 1), max(call.grid_2, 1))
    return JaxTritonCall(name=call.kernel.kernel_name, ttir=call.kernel.ttir, grid=grid, parameters=tuple(params),
                         config=config, configs=configs)


def describe(data: bytes) -> dict:
    """What `inspect` shows of a jax-triton call: its kernel's name, grid and ops (and,
    for an autotuned set, how many configs it holds), or why it cannot be read."""
    from passes.triton.kernel import kernel_ops, read_text_kernel

    try:
        call = decode(data)
        grid = "x".join(map(str, call.grid))
        kernel = read_text_kernel(call.name, call.ttir, call.grid)
    except KernelError as e:
        return {"name": "?", "grid": "?", "unreadable": str(e)}
    name = call.name if call.configs == 1 else f"{call.name} (config 1 of {call.configs})"
    return {"name": name, "grid": grid, "ops": kernel_ops(kernel)}
