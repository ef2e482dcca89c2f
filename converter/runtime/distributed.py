"""Run one module across several processes (and hosts) on jax.distributed.

Each of P processes owns N/P of the module's N devices: device d (the flattened id
`replica * partitions + partition`) lives in process d // (N/P).  Every process compiles the
module once for the global device assignment and executes on arrays assembled from its own
devices' buffers; the collectives cross processes over gloo, JAX's CPU collectives.  The
files keep the single-process contract: every process reads the same inputs (only its own
devices' rows, memory-mapped) and process 0 writes all devices' outputs, or with
`outputs_per_process` each process writes its own rows to `OUT.p<i>.npz` with `device_ids`.

    hlo-roundtrip run DUMP --processes 4                       # 4 local processes
    hlo-roundtrip run DUMP --coordinator host0:9876 --num-processes 16 --process-id $I
    srun hlo-roundtrip run DUMP --cluster auto                 # SLURM / Open MPI, as JAX reads them
"""

from __future__ import annotations

import ctypes
import io
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from converter.common.errors import ConverterError, UsageError


@dataclass(frozen=True)
class ProcessGroup:
    """Where this process stands among the processes that run one module."""

    coordinator: str
    num_processes: int
    process_id: int


def detect_cluster() -> ProcessGroup:
    """Coordinator, process count and this process's id from a SLURM or Open MPI
    environment, by JAX's own cluster detection (jax.distributed.initialize reads the
    same variables)."""
    from jax._src import clusters

    try:
        coordinator, count, pid, _ = clusters.ClusterEnv.auto_detect_unset_distributed_params(
            None, None, None, None, None, 60)
    except Exception as e:  # a detected cluster whose variables are incomplete
        raise ConverterError(f"--cluster auto: {e}") from None
    if coordinator is None or count is None or pid is None:
        raise ConverterError("--cluster auto found no SLURM or Open MPI environment; give --coordinator, "
                             "--num-processes and --process-id")
    return ProcessGroup(coordinator, int(count), int(pid))


def local_device_indices(num_devices: int, group: ProcessGroup) -> list[int]:
    per = devices_per_process(num_devices, group.num_processes)
    return list(range(group.process_id * per, (group.process_id + 1) * per))


def devices_per_process(num_devices: int, num_processes: int) -> int:
    if num_processes < 1:
        raise ConverterError(f"the process count must be at least 1, got {num_processes}")
    if num_devices % num_processes:
        raise ConverterError(f"the module runs on {num_devices} devices, which {num_processes} processes "
                             f"cannot share evenly; use a process count that divides {num_devices}")
    return num_devices // num_processes


def initialize(group: ProcessGroup, num_devices: int, heartbeat_timeout: int = 30,
               initialization_timeout: int = 120) -> tuple[list, list[int]]:
    """Start jax.distributed for this process with its share of CPU devices, and return
    the module's devices in flattened-id order and the indices of this process's own."""
    import jax
    from jax._src import xla_bridge

    per = devices_per_process(num_devices, group.num_processes)
    if not 0 <= group.process_id < group.num_processes:
        raise ConverterError(f"process id {group.process_id} is not in 0..{group.num_processes - 1}")
    if xla_bridge.backends_are_initialized():
        raise ConverterError("JAX's CPU backend started before jax.distributed; run in a fresh process")
    jax.config.update("jax_num_cpu_devices", per)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    host, _, port = group.coordinator.rpartition(":")
    if not host or not port.isdigit():
        raise ConverterError(f"coordinator address {group.coordinator!r} is not HOST:PORT")
    # The coordinator listens on the address it is given, not on every interface.
    bind = group.coordinator if group.process_id == 0 else None
    try:
        jax.distributed.initialize(group.coordinator, group.num_processes, group.process_id,
                                   initialization_timeout=initialization_timeout,
                                   heartbeat_timeout_seconds=heartbeat_timeout,
                                   coordinator_bind_address=bind)
    except Exception as e:
        raise ConverterError(f"process {group.process_id} of {group.num_processes} could not join the "
                             f"coordinator at {group.coordinator} within {initialization_timeout} s: {e}") from None
    devices = sorted(jax.devices("cpu"), key=lambda d: (d.process_index, d.id))
    if len(devices) != num_devices:
        raise ConverterError(f"the processes have {len(devices)} CPU devices in all, the module runs on {num_devices}")
    return devices, local_device_indices(num_devices, group)


_joined: dict[tuple[ProcessGroup, int], tuple[list, list[int]]] = {}


def join(group: ProcessGroup, num_devices: int, heartbeat_timeout: int = 30) -> tuple[list, list[int]]:
    """`initialize` once per process: conversion joins as soon as it knows the device
    count (a plug-in's JAX lowering would otherwise start JAX's CPU backend first), and
    `prepare` finds the group joined."""
    key = (group, num_devices)
    if key not in _joined:
        if _joined:
            raise ConverterError(f"this process joined its group for {next(iter(_joined))[1]} devices; "
                                 f"the module runs on {num_devices}")
        _joined[key] = initialize(group, num_devices, heartbeat_timeout)
    return _joined[key]


def prepare(program, group: ProcessGroup, heartbeat_timeout: int = 30) -> None:
    """Join the process group and set `program` to run this process's share of its devices.
    (The runtime has already written float all-reduces and reduce-scatters to fold in group
    order, `ordered-reductions`, so gloo's own summation order does not enter.)"""
    devices, local = join(group, program.num_devices, heartbeat_timeout)
    program.use_devices(devices, local)


def shutdown() -> None:
    import jax

    jax.distributed.shutdown()


def worker_argv(argv: Sequence[str]) -> list[str]:
    """The command line of each launched process: the launcher's, less its own options."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--processes", "--timeout", "--coordinator", "--num-processes", "--process-id", "--cluster"):
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def finish(outputs: list[np.ndarray] | None, program, group: ProcessGroup, per_process_out: str | None
           ) -> list[np.ndarray] | None:
    """After a process ran its share: write its rows (`per_process_out`), or gather every
    process's rows to process 0.  Returns the whole outputs on process 0 when gathering,
    else None; leaves jax.distributed."""
    from converter.runtime.program import write_outputs

    try:
        if outputs is None:  # compile only
            return None
        if per_process_out:
            path = per_process_path(per_process_out, group.process_id)
            write_outputs(path, outputs, keys=[spec.name for spec in program.results],
                          extra={"device_ids": np.asarray(program.local, dtype=np.int64)})
            print(f"process {group.process_id}: wrote {path} (devices {program.local[0]}..{program.local[-1]})")
            return None
        return gather_to_process_0(outputs, group)
    finally:
        shutdown()


# --------------------------------------------------------------------- outputs
_CHUNK = 1 << 20  # bytes per key-value entry: the coordination service passes messages, not bulk data


def _client():
    from jax._src import distributed

    return distributed.global_state.client


def gather_to_process_0(outputs: Sequence[np.ndarray], group: ProcessGroup, timeout_s: int = 600) -> list[np.ndarray] | None:
    """All processes' rows of every output, assembled in device order on process 0 (None
    on the others).  The rows travel through the coordination service's key-value store."""
    client = _client()
    prefix = "hlo_roundtrip/outputs"
    if group.process_id != 0:
        buf = io.BytesIO()
        np.savez(buf, **{f"out{k}": np.asarray(o) for k, o in enumerate(outputs)})
        data = buf.getvalue()
        chunks = [data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)] or [b""]
        for c, chunk in enumerate(chunks):
            client.key_value_set_bytes(f"{prefix}/{group.process_id}/{c}", chunk)
        client.key_value_set(f"{prefix}/{group.process_id}/count", str(len(chunks)))
        client.wait_at_barrier("hlo_roundtrip_outputs_read", timeout_s * 1000)
        return None
    parts: list[list[np.ndarray]] = [list(outputs)]
    for pid in range(1, group.num_processes):
        count = int(client.blocking_key_value_get(f"{prefix}/{pid}/count", timeout_s * 1000))
        data = b"".join(client.blocking_key_value_get_bytes(f"{prefix}/{pid}/{c}", timeout_s * 1000)
                        for c in range(count))
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            parts.append([npz[f"out{k}"] for k in range(len(outputs))])
    client.wait_at_barrier("hlo_roundtrip_outputs_read", timeout_s * 1000)
    return [np.concatenate([p[k] for p in parts]) for k in range(len(outputs))]


def per_process_path(path: str, process_id: int) -> str:
    root, ext = os.path.splitext(path)
    return f"{root}.p{process_id}{ext or '.npz'}"


# --------------------------------------------------------------------- launcher
def free_loopback_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the launcher dies, so no process outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def launch_local(worker_argv: Sequence[str], processes: int, timeout_s: float | None = None,
                 grace_s: float = 5.0) -> int:
    """Run `python -m converter <worker_argv> --coordinator ... --num-processes P --process-id i`
    in P local processes on loopback and wait for all of them.  When one fails, or the
    whole run passes `timeout_s`, the others are stopped (SIGTERM, then SIGKILL after
    `grace_s`), and the exit status says which failed."""
    coordinator = free_loopback_address()
    children: list[subprocess.Popen] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # the coordination service's INFO lines, once per process
    try:
        for i in range(processes):
            argv = [sys.executable, "-m", "converter", *worker_argv, "--coordinator", coordinator,
                    "--num-processes", str(processes), "--process-id", str(i)]
            children.append(subprocess.Popen(argv, env=env, preexec_fn=_die_with_parent))
        start = time.monotonic()
        while True:
            codes = [c.poll() for c in children]
            failed = [(i, code) for i, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                i, code = failed[0]
                what = f"signal {-code}" if code < 0 else f"exit status {code}"
                print(f"error: process {i} of {processes} stopped with {what}; stopping the others",
                      file=sys.stderr)
                return 1
            if all(code == 0 for code in codes):
                return 0
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                running = [i for i, code in enumerate(codes) if code is None]
                print(f"error: the run passed its time limit of {timeout_s:g} s with process(es) "
                      f"{', '.join(map(str, running))} still running; stopping them", file=sys.stderr)
                return 1
            time.sleep(0.1)
    finally:
        _stop(children, grace_s)


def _stop(children: Sequence[subprocess.Popen], grace_s: float) -> None:
    for c in children:
        if c.poll() is None:
            c.terminate()
    deadline = time.monotonic() + grace_s
    for c in children:
        try:
            c.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
