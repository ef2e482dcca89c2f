"""Compile a portable module with jaxlib for CPU and execute it.

    prog = converter.load("dump.hlo")        # parse, import, default passes
    outs = prog(*inputs)                      # numpy in, numpy out
    prog.memory()                             # argument / output / temp bytes

A module for N = replicas x partitions > 1 devices runs as N replicas on N CPU devices
(after `partitions-to-replicas`); every input and output then has a leading axis of N
holding device d's value at index d.
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from jaxlib.mlir import ir

from converter.hlo import dtypes
from converter.common.errors import ConverterError, SourceLocation, diagnostic
from converter.hlo.ir import Module
from converter.mlir.context import hlo_element_type
from converter.mlir.locations import location_name
from converter.mlir.module_attributes import elided_constants, module_devices
from converter.importer.taps import output_keys, tap_labels


class RuntimeInputError(ConverterError):
    pass


@dataclass(frozen=True)
class ArgSpec:
    """One flattened entry parameter or result."""

    index: int
    name: str
    shape: tuple[int, ...]
    element_type: str
    sharding: str | None = None

    @property
    def dtype(self) -> np.dtype:
        return dtypes.numpy_dtype(self.element_type)

    def describe(self) -> str:
        return f"{self.element_type}[{','.join(map(str, self.shape))}]"


# ---------------------------------------------------------------------- devices
# (converter/runtime/devices.py: what conversion needs before JAX starts, without numpy.)
from converter.runtime.devices import MAX_CPU_DEVICES, reserve_cpu_devices  # noqa: E402,F401


def configure_cpu_devices(n: int, path: str = "<module>") -> list[Any]:
    """N CPU devices in this process.  JAX fixes the count when its CPU backend starts,
    so this must run before anything else touches JAX in a process that needs N > 1."""
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        current = jax.config.jax_num_cpu_devices
        if current is None or current < n:
            jax.config.update("jax_num_cpu_devices", n)
    devices = jax.devices("cpu")
    if len(devices) < n:
        raise ConverterError(
            diagnostic(SourceLocation(path), f"the module runs on {n} devices but JAX started its CPU backend with {len(devices)} "
            f"in this process; "
            f"set jax.config.update('jax_num_cpu_devices', {n}) (or XLA_FLAGS="
            f"--xla_force_host_platform_device_count={n}) before JAX starts"))
    return devices[:n]


# ---------------------------------------------------------------------- program
def _entry(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise ConverterError("the module has no func.func @main")


def _specs(func_op: ir.Operation) -> tuple[list[ArgSpec], list[ArgSpec]]:
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    block = func_op.regions[0].blocks[0]

    def shardings(key: str, count: int) -> list[str | None]:
        out: list[str | None] = [None] * count
        if key in func_op.attributes:
            for i, d in enumerate(ir.ArrayAttr(func_op.attributes[key])):
                entries = {a.name: a.attr for a in ir.DictAttr(d)}
                for name in ("mhlo.sharding", "hlo.sharding"):
                    if name in entries:
                        out[i] = ir.StringAttr(entries[name]).value
        return out

    def spec(i: int, t: ir.Type, name: str, sharding: str | None) -> ArgSpec:
        if not isinstance(t, ir.RankedTensorType):
            raise ConverterError(f"entry {name} has type {t}; only tensors can be passed in or out")
        rt = ir.RankedTensorType(t)
        return ArgSpec(i, name, tuple(rt.shape), hlo_element_type(rt.element_type), sharding)

    arg_sh = shardings("arg_attrs", len(ftype.inputs))
    params = [spec(i, t, location_name(block.arguments[i].location) or f"arg{i}", arg_sh[i])
              for i, t in enumerate(ftype.inputs)]
    res_sh = shardings("res_attrs", len(ftype.results))
    results = [spec(i, t, f"out{i}", res_sh[i]) for i, t in enumerate(ftype.results)]
    return params, results


def _check_fp6_support(module_text: str) -> None:
    """jaxlib before 0.12 has the FP6 MLIR types but its CPU compiler cannot lower them
    (an f6 constant aborts the process): refuse by name instead."""
    import jaxlib

    found = sorted(set(re.findall(r"f6E[23]M[23]FN", module_text)))
    if found and tuple(int(x) for x in jaxlib.__version__.split(".")[:2]) < (0, 12):
        names = ", ".join(t.lower() for t in found)  # the HLO spelling
        raise ConverterError(f"the module holds {names} (FP6) arrays, which jaxlib {jaxlib.__version__}'s CPU "
                             "compiler cannot compile; run it with jaxlib >= 0.12")


@dataclass
class Program:
    """A converted module, compiled on first use, callable on numpy arrays."""

    module: ir.Module
    num_devices: int
    params: list[ArgSpec]
    results: list[ArgSpec]
    hlo: Module | None = None
    path: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    _executable: Any = None
    _devices: list[Any] | None = None
    # Global device indices (flattened ids) whose values this process holds: all of them in
    # one process; a process's share when several run the module (converter.runtime.distributed).
    local_devices: list[int] | None = None

    def use_devices(self, devices: Sequence[Any], local: Sequence[int]) -> None:
        """Compile for `devices` (device d of the module is devices[d]) and hold the values
        of the devices at indices `local` only: how each of several processes runs its share."""
        if len(devices) != self.num_devices:
            raise ConverterError(f"the module runs on {self.num_devices} devices, {len(devices)} were given")
        self._devices = list(devices)
        self.local_devices = list(local)
        self._executable = None

    @property
    def local(self) -> list[int]:
        return self.local_devices if self.local_devices is not None else list(range(self.num_devices))

    # ------------------------------------------------------------------ compile
    def compile(self, progress: Callable[[str], None] | None = None) -> Any:
        if self._executable is not None:
            return self._executable
        from jax.extend.backend import get_backend
        from jaxlib import xla_client as xc

        if len(self.local) > MAX_CPU_DEVICES:
            raise ConverterError(diagnostic(SourceLocation(self.path) if self.path else None, f"this process would hold {len(self.local)} of the "
                                 f"module's {self.num_devices} devices; jaxlib's CPU runtime runs at most "
                                 f"{MAX_CPU_DEVICES} in one process: run it over several processes (--processes, "
                                 "--coordinator/--num-processes/--process-id)"))
        if self._devices is None:
            self._devices = configure_cpu_devices(self.num_devices, self.path or "<module>")
        devices = self._devices
        if "lapack_" in str(self.module):
            # jaxlib's LAPACK kernels find their BLAS/LAPACK routines (SciPy's) only once
            # initialized; JAX does it when it first lowers a linalg op.  Without it a
            # lapack_*_ffi call jumps through a null pointer.
            from jax._src.lax.linalg import initialize_lapack

            initialize_lapack()
        _check_fp6_support(str(self.module))
        options = xc.CompileOptions()
        options.num_replicas = self.num_devices
        options.num_partitions = 1
        # A dump's converts to bf16/f16 are roundings the device performed (the dump is
        # already optimized).  XLA's default excess precision would let the CPU compiler
        # drop f32→bf16→f32 round trips (SimplifyFPConversions) and compute more
        # precisely than the dump did: e.g. the bf16 exp inside SiLU of the Qwen sample.
        # XLA's CPU while-loop invariant code motion hoists whole-tensor converts of stacked
        # bf16 layer activations out of training loops: one f32 copy of every stacked tensor
        # (7 GB each in the MaxText sample, 20 GiB of temporaries in all) that the original
        # never held.  XLA's CPU "concurrency optimized" scheduler (its default) orders
        # independent work to run in parallel and holds many large values at once (the
        # MaxText sample: 97 GiB of temporaries per device, 72 with the memory-minimizing
        # one); the dump ran within its device's memory, so the converted module is
        # scheduled for memory too (the runtime benchmark's ratios to JAX got no worse).
        options.env_option_overrides = [("xla_allow_excess_precision", False),
                                        ("xla_disable_hlo_passes", "while-loop-invariant-code-motion"),
                                        ("xla_cpu_scheduler_type", "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED")]
        options.device_assignment = xc.DeviceAssignment.create(
            np.array([[d.id] for d in devices], dtype=np.int64))
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        if progress:
            progress("compile")
        start = time.perf_counter()
        try:
            self._executable = get_backend("cpu").compile_and_load(
                buf.getvalue(), xc.DeviceList(tuple(devices)), options)
        except Exception as e:  # XlaRuntimeError: the message is the useful part
            raise ConverterError(f"jaxlib could not compile the module for CPU: {e}") from None
        self.timings["compile"] = time.perf_counter() - start
        return self._executable

    def compile_only(self) -> dict[str, int]:
        self.compile()
        return self.memory()

    def memory(self) -> dict[str, int]:
        """Per-device memory of the compiled module, from jaxlib's memory analysis."""
        stats = self.compile().get_compiled_memory_stats()
        return {
            "argument_bytes": int(stats.argument_size_in_bytes),
            "output_bytes": int(stats.output_size_in_bytes),
            "alias_bytes": int(stats.alias_size_in_bytes),
            "temp_bytes": int(stats.temp_size_in_bytes),
            "generated_code_bytes": int(stats.generated_code_size_in_bytes),
        }

    # ------------------------------------------------------------------- inputs
    def input_shape(self, spec: ArgSpec) -> tuple[int, ...]:
        """The shape of an input or output array as `run` passes it: a leading axis over
        this process's devices when the module runs on several."""
        return ((len(self.local),) if self.num_devices > 1 else ()) + spec.shape

    def random_inputs(self, seed: int = 0, indices: Sequence[int] | None = None) -> list[np.ndarray]:
        """Seeded inputs: floats normal (finite in every type), integers small and
        non-negative, predicates random.  Each device's value is drawn from its own stream
        (seed, parameter, device), in the parameter's own type (floats through float32 at
        most), so a process holding some of the devices draws exactly their values."""
        from converter.common.resources import array_bytes, check_fits

        # the arrays, and one device's float64/float32 draw at a time
        check_fits(sum(array_bytes(self.input_shape(s), s.dtype.itemsize) + array_bytes(s.shape, 8)
                       for s in self.params), "making random inputs")
        out = []
        for spec in self.params if indices is None else [self.params[i] for i in indices]:
            arr = np.empty(self.input_shape(spec), dtype=spec.dtype)
            rows = arr.reshape(len(self.local), -1)  # a view: one row per device
            for row, device in zip(rows, self.local):
                rng = np.random.default_rng([seed, spec.index, device])
                row[...] = _random_values(rng, spec, spec.shape).reshape(-1)
            out.append(arr)
        return out

    def check_inputs(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Check count, shape and dtype; reinterpret raw-void arrays (how np.savez stores
        bf16/fp8) by the parameter's element type."""
        if len(arrays) != len(self.params):
            raise RuntimeInputError(f"the module takes {len(self.params)} inputs, got {len(arrays)}")
        out = []
        for spec, arr in zip(self.params, arrays):
            arr = np.asarray(arr)
            want = self.input_shape(spec)
            what = f"arg{spec.index} ({spec.name}, {spec.describe()}"
            what += f" on each of {self.num_devices} devices)" if self.num_devices > 1 else ")"
            if arr.dtype != spec.dtype:
                if arr.dtype.kind == "V" and arr.dtype.itemsize == spec.dtype.itemsize:
                    arr = arr.view(spec.dtype)
                else:
                    raise RuntimeInputError(f"{what}: expected dtype {spec.dtype.name}, got {arr.dtype}")
            if tuple(arr.shape) != want:
                raise RuntimeInputError(f"{what}: expected shape {want}, got {tuple(arr.shape)}")
            out.append(arr)
        return out

    # ---------------------------------------------------------------- execution
    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.execute(arrays)

    def execute(self, arrays: Sequence[np.ndarray], progress: Callable[[str], None] | None = None) -> list[np.ndarray]:
        names = elided_constants(self.module)
        if names:
            raise ConverterError(
                f"the dump elides the values of constant(s) {', '.join(names[:8])}"
                f"{' …' if len(names) > 8 else ''}; the outputs would be made up.  Re-dump with "
                "XLA_FLAGS=--xla_dump_large_constants, or pass --elided-constants=zeros|random "
                "(ImportOptions(elided_constants=...)) to run anyway")
        from converter.common.resources import array_bytes, check_fits

        check_fits(sum(array_bytes(self.input_shape(s), s.dtype.itemsize) for s in self.results), "the outputs")
        checked = self.check_inputs(arrays)
        self.compile(progress)  # timed as "compile", not as the copy to the devices
        start = time.perf_counter()
        device_args = self.to_device(checked, progress)
        self.timings["to device"] = time.perf_counter() - start
        if progress:
            progress("execute")
        start = time.perf_counter()
        per_output = self.execute_on_device(device_args)
        self.timings["execute"] = time.perf_counter() - start
        if progress:
            progress("copy from device")
        start = time.perf_counter()
        out = []
        for outs in per_output:
            host = [np.asarray(o) for o in outs]
            out.append(np.stack(host) if self.num_devices > 1 else host[0])
        self.timings["from device"] = time.perf_counter() - start
        return out

    def to_device(self, arrays: Sequence[np.ndarray], progress: Callable[[str], None] | None = None) -> list[Any]:
        """Checked host inputs → one jax.Array per parameter holding each device's value."""
        self.compile(progress)
        import jax
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        devices = self._devices
        local = [devices[d] for d in self.local]
        sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec())
        args = []
        # 64-bit arrays must reach the device as they are: without x64, jax.device_put
        # would silently narrow f64/s64/u64/c128 to 32 bits.
        with jax.enable_x64(True):
            for spec, arr in zip(self.params, arrays):
                per_device = [arr[k] for k in range(len(local))] if self.num_devices > 1 else [arr]
                bufs = [jax.device_put(x, dev) for x, dev in zip(per_device, local)]
                args.append(jax.make_array_from_single_device_arrays(spec.shape, sharding, bufs))
        return args

    def execute_on_device(self, device_args: Sequence[Any]) -> list[list[Any]]:
        """Run on arrays already on the devices; per output, per device, on the devices
        (the part a benchmark times)."""
        results = self.compile().execute_sharded(list(device_args))
        per_output = results.disassemble_into_single_device_arrays()
        for outs in per_output:
            for o in outs:
                o.block_until_ready()
        return per_output


def random_values(rng: np.random.Generator, spec: ArgSpec, shape: tuple[int, ...]) -> np.ndarray:
    """Values of `spec`'s element type and `shape` drawn as `random_inputs` draws them."""
    return _random_values(rng, spec, shape)


def _random_values(rng: np.random.Generator, spec: ArgSpec, shape: tuple[int, ...]) -> np.ndarray:
    if spec.element_type == "pred":
        return rng.integers(0, 2, size=shape, dtype=np.int8).astype(np.bool_)
    if spec.element_type[0] in "su":
        return rng.integers(0, 4, size=shape, dtype=np.int8).astype(spec.dtype)
    if spec.element_type in ("c64", "c128"):
        real = np.float64 if spec.element_type == "c128" else np.float32
        return rng.standard_normal(shape, dtype=real) + 1j * rng.standard_normal(shape, dtype=real)
    real = np.float64 if spec.element_type == "f64" else np.float32
    return rng.standard_normal(shape, dtype=real).astype(spec.dtype)


def program_from_module(module: ir.Module, hlo: Module | None = None, path: str = "",
                        timings: dict[str, float] | None = None, reduction_order: str = "group", *,
                        options=None, prepared: bool = False) -> Program:
    """A Program of a portable module: `prepare_for_cpu` (stage 3, the CPU runtime's
    pipeline, unless `prepared` says it ran) and the entry's parameters and results.
    `options` (a ConvertOptions) sets how the CPU pipeline runs; without it,
    `reduction_order`."""
    from converter.runtime.convert import convert_options, prepare_for_cpu

    timings = timings if timings is not None else {}
    if not prepared:
        options = options if options is not None else convert_options(reduction_order=reduction_order)
        prepare_for_cpu(module, options, path=path, timings=timings)
    return wrap_prepared(module, hlo, path, timings)


def wrap_prepared(module: ir.Module, hlo: Module | None = None, path: str = "",
                  timings: dict[str, float] | None = None) -> Program:
    """A Program of a module `prepare_for_cpu` has made ready for XLA's CPU runtime."""
    replicas, partitions = module_devices(module)
    params, results = _specs(_entry(module))
    keys = output_keys(len(results), tap_labels(module))
    results = [ArgSpec(s.index, key, s.shape, s.element_type, s.sharding) for s, key in zip(results, keys)]
    return Program(module, replicas * partitions, params, results, hlo=hlo, path=path,
                   timings=timings if timings is not None else {})


def load(path: str, options=None, *, context: ir.Context | None = None, **changes) -> Program:
    """A Program from an HLO dump (converted with `pipeline`) or a StableHLO file (.mlir
    text, bytecode or portable artifact; the pipeline runs over it too, which is a no-op
    for a module that is already portable): stages 1-3 of a run.  `options` is a
    ConvertOptions; keyword `changes` as in ConvertOptions.replace (`pipeline=...`)."""
    from converter.runtime.convert import convert_options, load_module_file

    options = convert_options(options, **changes)
    loaded = load_module_file(path, options, context=context)
    return program_from_module(loaded.module, loaded.hlo, path, loaded.timings, options=options)


# ------------------------------------------------------------------ preflight
def memory_needed_bytes(program: Program) -> int:
    """What executing takes in this process: per device the compiled module's arguments,
    outputs not aliased to an argument, and temporaries (jaxlib's memory analysis), for
    each of this process's devices, plus the host copies of those devices' inputs and
    outputs."""
    mem = program.memory()
    host = mem["argument_bytes"] + mem["output_bytes"]
    return (device_bytes(mem) + host) * len(program.local)


def device_bytes(mem: dict[str, int]) -> int:
    """What one device holds while the module runs, from `Program.memory()`: arguments,
    outputs not aliased to an argument, temporaries (the figure to set against the memory
    of the device the dump ran on)."""
    return mem["argument_bytes"] + mem["output_bytes"] - mem["alias_bytes"] + mem["temp_bytes"]


def check_memory_fits(program: Program, processes: int = 1) -> None:
    """Refuse, before any input is allocated, a run whose memory estimate exceeds what this
    machine has available, saying how many processes (or hosts like this one) would do."""
    from converter.common import resources
    from converter.common.textfmt import human_bytes

    available = resources.available_bytes()
    needed = memory_needed_bytes(program)
    if needed <= available:
        return
    per_device = needed // max(1, len(program.local))
    fit = available // max(1, per_device)  # devices' shares that fit this host
    n = program.num_devices
    counts = [p for p in range(1, n + 1) if n % p == 0 and n // p <= fit]
    advice = (f"it would fit on {counts[0]} hosts like this one ({n // counts[0]} devices each): run with "
              f"--coordinator HOST:PORT --num-processes {counts[0]} --process-id I on each (or --cluster auto "
              f"under SLURM / Open MPI)" if counts else
              f"even one device's share ({human_bytes(per_device)}) does not fit this host")
    raise ConverterError(
        f"{program.path or 'the module'}: executing needs about {human_bytes(needed)} in this process "
        f"({len(program.local)} of {n} device(s) x {human_bytes(per_device)}: arguments, outputs, temporaries "
        f"and host copies, from the compiled module's memory analysis); {human_bytes(available)} is available. "
        f"{advice}; or --skip-memory-check to try anyway")


# -------------------------------------------------------------------- npz files
def _npz_members(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file without reading them: members stored uncompressed (what
    np.savez writes) are memory-mapped, so a process reads only the rows it takes; a
    compressed member is read whole.  (converter.runtime.npzcheck checks the headers first.)"""
    from converter.runtime.npzcheck import read_npy_header

    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            key = info.filename[:-4]
            with archive.open(info) as member:
                shape, dtype, fortran = read_npy_header(member)
                header_size = member.tell()
            if info.compress_type != zipfile.ZIP_STORED:
                with archive.open(info) as member:
                    out[key] = np.lib.format.read_array(member, allow_pickle=False)
                continue
            with open(path, "rb") as f:  # the member's data starts after its local file header
                f.seek(info.header_offset + 26)
                name_len, extra_len = np.frombuffer(f.read(4), dtype="<u2")
            offset = info.header_offset + 30 + int(name_len) + int(extra_len) + header_size
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            out[key] = (np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                                  order="F" if fortran else "C") if count else np.empty(shape, dtype))
    return out


def read_inputs(path: str, program: Program, per_device: bool = True) -> list[np.ndarray]:
    """`arg{i}` arrays of an .npz file.  Per-device arrays of a multi-device module: only
    the rows of this process's devices are read (`per_device=False`: whole arrays)."""
    from converter.runtime.npzcheck import check_npy_header

    check_npy_header(path)
    if not zipfile.is_zipfile(path):
        raise RuntimeInputError(f"{path}: a single .npy array; --inputs takes an .npz keyed arg0..argN "
                                f"(for one argument: --input arg0=@{path})")
    try:
        arrays = _npz_members(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise RuntimeInputError(f"{path}: not a readable .npz file ({e})") from None
    from converter.runtime.npzcheck import npz_argument_keys

    expected = npz_argument_keys(path, list(arrays), program.params, {k: a.shape for k, a in arrays.items()},
                                 program.num_devices)
    out = []
    for key in expected:
        arr = arrays[key]
        if per_device and program.num_devices > 1 and program.local != list(range(program.num_devices)) \
                and arr.ndim and arr.shape[0] == program.num_devices:
            arr = arr[program.local]
        out.append(np.array(arr))  # read into memory (a 0-d member stays 0-d)
    return out


def write_outputs(path: str, outputs: Sequence[np.ndarray], keys: Sequence[str] | None = None,
                  extra: dict[str, np.ndarray] | None = None) -> None:
    """`out{i}` arrays (or `keys`: a program's result names, taps included), and `extra`
    ones, written whole or not at all (bf16/fp8 as np.savez stores them)."""
    from converter.common.files import write_atomic

    keys = keys or [f"out{i}" for i in range(len(outputs))]
    arrays = {k: np.asarray(a) for k, a in zip(keys, outputs)}
    write_atomic(path, lambda f: np.savez(f, **arrays, **(extra or {})))
