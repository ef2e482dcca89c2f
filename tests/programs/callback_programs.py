"""JAX programs with host callbacks, for tests/dumps/callbacks (issue 27).  Each is built
around a `sink` (the debug callback's Python function) so that the generator can dump it
and the test can run it with a sink that records what JAX hands the callback — the oracle
for the values `run` reports.

    PYTHONPATH=$PWD python -m tests.programs.callback_programs tests/dumps/callbacks

writes NAME_jax010.hlo / NAME_jax012.hlo (by the running jax's version) on 4 CPU devices,
source paths relative to the repository.  `hlo-roundtrip run` reports a callback in a
loop as its last iteration's values, so the oracle keeps the last call of each site."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

# Formats jax.debug.print is given (the test compares the text JAX prints with the same
# format applied to the values `run` reports).
LOOP_FMT = "step {i}: carry {c}"
TOTAL_FMT = "total {t}"


@dataclass(frozen=True)
class CallbackProgram:
    name: str
    build: Callable  # build(sink, devices=None) -> (function to jit, in_shardings or None); devices: the mesh's
    inputs: Callable[[], list[np.ndarray]]
    devices: int = 1
    on_tpu: bool = True  # JAX lowers it for TPU (partitioned and buffer callbacks it does not)


def _loop(sink, devices=None):
    import jax
    import jax.numpy as jnp

    def f(x, w):
        jax.debug.print(TOTAL_FMT, t=jnp.sum(x))

        def body(i, c):
            jax.debug.print(LOOP_FMT, i=i, c=c)
            return jnp.tanh(c @ w) + i.astype(c.dtype)

        y = jax.lax.fori_loop(0, 3, body, x)
        jax.debug.callback(sink, y, jnp.argmax(y, axis=-1))
        return y * 2.0

    return f, None


def _scan_ordered(sink, devices=None):
    import jax
    import jax.numpy as jnp

    def f(xs, h0):
        def step(h, x):
            h = jnp.sin(h * x) + x
            jax.debug.callback(sink, h, ordered=True)
            return h, h.sum()

        h, ys = jax.lax.scan(step, h0, xs)
        jax.debug.print(TOTAL_FMT, t=ys, ordered=True)
        return h, ys

    return f, None


def _shard_map(sink, devices=None):
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(devices or jax.devices("cpu")[:4]), ("d",))

    @partial(shard_map, mesh=mesh, in_specs=(P("d"),), out_specs=P("d"))
    def per_device(x):
        s = jnp.cumsum(x, axis=0) * jax.lax.axis_index("d").astype(x.dtype)
        jax.debug.callback(sink, s)
        return jax.lax.psum(s, "d")

    return per_device, None


def _jit_sharded(sink, devices=None):
    """A jit over 4 devices with a sharded input: XLA's SPMD partitioner gathers the
    callbacks' operands and calls them in a conditional branch taken on device 0."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(devices or jax.devices("cpu")[:4]), ("d",))

    def f(x):
        y = jnp.sin(x) * 2.0
        jax.debug.print(TOTAL_FMT, t=y)
        jax.debug.callback(sink, y.sum(axis=0))
        return y

    return f, (NamedSharding(mesh, P("d")),)


def _pure_io(sink, devices=None):
    import jax
    import jax.numpy as jnp
    from jax.experimental import io_callback

    def f(x):
        y = jax.pure_callback(pure_fn, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        z = io_callback(io_fn, jax.ShapeDtypeStruct(x.shape, x.dtype), y, ordered=True)
        jax.debug.callback(sink, z)
        return z + 1.0

    return f, None


def pure_fn(a):
    """The pure_callback's function: written with jax.numpy, so that it is also the
    plug-in that gives the dump's call its meaning."""
    import jax.numpy as jnp

    return jnp.sin(a) * 3.0


def io_fn(a):
    import jax.numpy as jnp

    return jnp.cumsum(a, axis=-1) - a.max()


def _partitioned(sink, devices=None):
    """debug.callback(partitioned=True) in a sharded jit: called on each device's shard
    (`xla_ffi_partitioned_python_cpu_callback`), not gathered to device 0."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(devices or jax.devices("cpu")[:4]), ("d",))

    def f(x):
        y = jnp.sin(x) * 2.0
        jax.debug.callback(sink, y, partitioned=True)
        return y

    return f, (NamedSharding(mesh, P("d")),)


def _buffer(sink, devices=None):
    """jax.experimental.buffer_callback: the callback writes its result buffers
    (`xla_buffer_python_cpu_callback`); the dump holds the call only."""
    import jax
    from jax.experimental.buffer_callback import buffer_callback

    def f(x):
        return buffer_callback(sink, jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1.0

    return f, None


def _rng(seed: int):
    return np.random.default_rng(seed)


PROGRAMS = [
    CallbackProgram("debug_print_loop", _loop, lambda: [_rng(1).standard_normal((2, 3), np.float32),
                                                        _rng(2).standard_normal((3, 3), np.float32)]),
    CallbackProgram("debug_callback_scan_ordered", _scan_ordered,
                    lambda: [_rng(3).standard_normal((5, 4), np.float32), _rng(4).standard_normal(4).astype(np.float32)]),
    CallbackProgram("debug_callback_shard_map", _shard_map,
                    lambda: [_rng(5).standard_normal((8, 3), np.float32)], devices=4),
    CallbackProgram("debug_print_jit_sharded", _jit_sharded, lambda: [_rng(7).standard_normal((8, 3), np.float32)],
                    devices=4),
    CallbackProgram("debug_callback_partitioned", _partitioned,
                    lambda: [_rng(8).standard_normal((8, 3), np.float32)], devices=4, on_tpu=False),
    CallbackProgram("buffer_callback", _buffer, lambda: [_rng(9).standard_normal((2, 5), np.float32)], on_tpu=False),
    CallbackProgram("pure_io_callback", _pure_io, lambda: [_rng(6).standard_normal((3, 4), np.float32)]),
]
BY_NAME = {p.name: p for p in PROGRAMS}


def jax_suffix() -> str:
    import jax

    return "jax012" if tuple(int(v) for v in jax.__version__.split(".")[:2]) >= (0, 12) else "jax010"


def main(out: str, platform: str = "cpu") -> None:
    import pathlib

    import jax
    import jaxlib._hlo as xla_hlo

    jax.config.update("jax_num_cpu_devices", 4)
    from tests.programs.generate import relativize_source_paths

    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for program in PROGRAMS:
        if platform == "tpu" and not program.on_tpu:
            continue
        if platform == "gpu" and program.name == "buffer_callback":
            continue  # its GPU form needs the GPU client's buffer handler, absent deviceless
        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        if platform in ("tpu", "gpu"):
            hlo = _deviceless_module(program, platform)
            suffix = f"{platform}_{jax_suffix()}"
        else:
            fn, in_shardings = program.build(lambda *a: None)
            compiled = jax.jit(fn, in_shardings=in_shardings).lower(*program.inputs()).compile()
            hlo = compiled._executable.xla_executable.hlo_modules()[0]
            suffix = jax_suffix()
        text = relativize_source_paths(hlo.to_string(options))
        path = folder / f"{program.name}_{suffix}.hlo"
        path.write_text(text)
        print(f"{path}: {len(text)} bytes")


def _deviceless_module(program: CallbackProgram, platform: str):
    """The program compiled deviceless (DESIGN §7) for a TPU v5e 2x2 or four H100s, its
    optimized HLO.  JAX lowers a callback only with the platform's client at hand: for TPU
    as sends to and recvs from the host (callback.py _emit_tpu_python_callback), registering
    the Python function with the client; for GPU as `xla_ffi_python_gpu_callback`.  A
    deviceless process has no such client, so the CPU client stands in (it only keeps the
    function; nothing runs).  Matmuls at HIGHEST precision, so that JAX's f32 CPU run is
    the oracle (DESIGN §7, TPU default precision; TF32 on GPU)."""
    import jax
    from jax._src.interpreters import mlir
    from jax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

    from tests.programs.generate import backend_devices

    from jax._src import compiler

    cpu_client = jax.devices("cpu")[0].client
    get_backend, compile_and_load = mlir.ModuleContext.get_backend, compiler.backend_compile_and_load
    mlir.ModuleContext.get_backend = lambda self: cpu_client
    if platform == "gpu":
        # A GPU callback names its function by index ({index = N}); the compile-only client
        # takes no Python functions (they are called only when the program runs).
        compiler.backend_compile_and_load = lambda backend, module, devices, options, host_callbacks: \
            compile_and_load(backend, module, devices, options, ())
    try:
        devices = backend_devices(platform)
        fn, in_shardings = program.build(lambda *a: None, devices)
        inputs = program.inputs()
        if in_shardings is None:
            if program.devices > 1:  # shard_map over the 4 chips: inputs split along the mesh
                mesh = jax.sharding.Mesh(np.array(devices), ("d",))
                in_shardings = tuple(NamedSharding(mesh, P("d")) for _ in inputs)
            else:
                in_shardings = tuple(SingleDeviceSharding(devices[0]) for _ in inputs)
        args = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s) for x, s in zip(inputs, in_shardings)]
        with jax.default_matmul_precision("highest"):
            lowered = jax.jit(fn, in_shardings=in_shardings).trace(*args).lower(
                lowering_platforms=("tpu" if platform == "tpu" else "cuda",))
        return lowered.compile()._executable.xla_executable.hlo_modules()[0]
    finally:
        mlir.ModuleContext.get_backend, compiler.backend_compile_and_load = get_backend, compile_and_load


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:])
