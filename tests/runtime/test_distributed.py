"""`run` across several processes (jax.distributed, gloo on loopback): the same outputs, bit
for bit, as the single-process run of the same dump on the same inputs, for every kind of
collective; failures stop every process with a message.  The single-process run is itself
checked against JAX and XLA elsewhere (tests/test_real_dumps.py), so agreement here means
the multi-process run computes what JAX computes."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.program import check_memory_fits, load

ROOT = pathlib.Path(__file__).resolve().parents[2]
CPU = ROOT / "tests" / "dumps" / "cpu"


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "converter", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _same_bits(a: np.lib.npyio.NpzFile, b: np.lib.npyio.NpzFile) -> None:
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        x, y = a[key], b[key]
        assert x.shape == y.shape and x.dtype == y.dtype, key
        assert x.tobytes() == y.tobytes(), f"{key} differs between one process and several"


# One dump per collective kind: all-reduce (sum/mean/max), all-gather, reduce-scatter,
# all-to-all, collective-permute on a 2-D mesh, integer collectives, an SPMD train step,
# and a 4-replica TPU sample with tiled layouts.
CASES = [
    (CPU / "sm_psum_pmean_pmax.hlo", 2),
    (CPU / "sm_all_gather.hlo", 2),
    (CPU / "sm_psum_scatter.hlo", 4),
    (CPU / "sm_all_to_all.hlo", 2),
    (CPU / "sm2d_ppermute_a2a.hlo", 4),
    (CPU / "sm_collectives_int.hlo", 2),
    (CPU / "spmd_mlp_train_step.hlo", 2),
    (ROOT / "samples" / "tpu_mlp_allreduce_4_replicas.hlo", 2),
]


@pytest.mark.parametrize("dump, processes", CASES, ids=[f"{d.stem}-p{p}" for d, p in CASES])
def test_several_processes_give_the_single_process_bits(dump, processes, tmp_path):
    single, multi = tmp_path / "single.npz", tmp_path / "multi.npz"
    r = _cli("run", str(dump), "--seed", "3", "--outputs", str(single))
    assert r.returncode == 0, r.stderr
    r = _cli("run", str(dump), "--seed", "3", "--outputs", str(multi), "--processes", str(processes))
    assert r.returncode == 0, r.stderr
    with np.load(single) as a, np.load(multi) as b:
        _same_bits(a, b)


PERMUTED_GROUPS = """
HloModule permuted_groups, replica_count=4

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p = f32[6] parameter(0)
  r = f32[6] all-reduce(p), replica_groups={{2,0,3,1}}, to_apply=add
  q = f32[6] all-reduce(p), replica_groups={{3,0},{1,2}}, to_apply=add
  rs = f32[3] reduce-scatter(p), replica_groups={{3,0},{1,2}}, dimensions={0}, to_apply=add
  ROOT t = (f32[6], f32[6], f32[3]) tuple(r, q, rs)
}
"""


def test_float_sums_round_as_in_one_process_whatever_the_group_order(tmp_path):
    """Values whose f32 sum depends on the order of the terms, in groups not in id order."""
    dump = tmp_path / "groups.hlo"
    dump.write_text(PERMUTED_GROUPS)
    x = np.array([[1e8, 1, 1, 1, 3e-8, 1], [1, 1e8, -1e8, 1, 1, 1],
                  [-1e8, -1e8, 1, 1e8, 1, 1e8], [1, 1, 1e8, -1e8, 1, -1e8]], np.float32)
    np.savez(tmp_path / "in.npz", arg0=x)
    single, multi = tmp_path / "single.npz", tmp_path / "multi.npz"
    r = _cli("run", str(dump), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(single))
    assert r.returncode == 0, r.stderr
    r = _cli("run", str(dump), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(multi), "--processes", "2")
    assert r.returncode == 0, r.stderr
    with np.load(single) as a, np.load(multi) as b:
        _same_bits(a, b)
        # the fold in group order, worked by NumPy: ((x2 + x0) + x3) + x1 on every device
        want = ((x[2] + x[0]) + x[3]) + x[1]
        assert a["out0"].tobytes() == np.stack([want] * 4).tobytes()


def test_inputs_file_global_arrays_and_per_process_outputs(tmp_path):
    """An SPMD dump with inputs given as whole arrays, split by its shardings in each process
    (each reads only its devices' pieces), outputs written per process with device_ids."""
    dump = CPU / "spmd_reduce_scatter.hlo"
    program = load(str(dump))
    rng = np.random.default_rng(0)
    from converter.runtime.sharding import assemble_global

    whole = {}
    for spec in program.params:
        per_device = rng.standard_normal((program.num_devices, *spec.shape)).astype(spec.dtype)
        whole[f"arg{spec.index}"] = assemble_global(per_device, spec.sharding)
        assert whole[f"arg{spec.index}"] is not None
    np.savez(tmp_path / "in.npz", **whole)
    single, multi = tmp_path / "single.npz", tmp_path / "multi.npz"
    r = _cli("run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(single))
    assert r.returncode == 0, r.stderr
    r = _cli("run", str(dump), "--inputs", str(tmp_path / "in.npz"), "--global", "--outputs", str(multi),
             "--processes", "2", "--outputs-per-process")
    assert r.returncode == 0, r.stderr
    # per-device single-process values, to compare with each process's rows
    per_device = tmp_path / "per_device.npz"
    r = _cli("run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(per_device))
    assert r.returncode == 0, r.stderr
    parts = [np.load(tmp_path / f"multi.p{i}.npz") for i in range(2)]
    assert [list(p["device_ids"]) for p in parts] == [[0, 1], [2, 3]]
    with np.load(single) as whole_out:
        for key in whole_out.files:
            rows = np.concatenate([p[key] for p in parts])
            reference = whole_out[key]
            spec = program.results[int(key[3:])]
            if spec.sharding is None:  # written per device by both runs
                assert rows.tobytes() == reference.tobytes()
            else:
                assert assemble_global(rows, spec.sharding).tobytes() == reference.tobytes()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_process_that_dies_stops_all_of_them():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    launcher = subprocess.Popen([sys.executable, "-m", "converter", "run", str(CPU / "sm_all_gather.hlo"),
                                 "--processes", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    children: list[int] = []
    while len(children) < 2 and time.monotonic() < deadline:
        children = _children(launcher.pid)
        time.sleep(0.02)
    assert len(children) == 2
    os.kill(children[1], signal.SIGKILL)
    start = time.monotonic()
    _, err = launcher.communicate(timeout=60)
    assert time.monotonic() - start < 30
    assert launcher.returncode == 1
    assert "process 1 of 2 stopped with signal 9; stopping the others" in err
    assert "Traceback" not in err
    assert not any(_alive(pid) for pid in children)


def test_time_limit_stops_every_process():
    r = _cli("run", str(CPU / "sm_all_gather.hlo"), "--processes", "2", "--timeout", "0.5")
    assert r.returncode == 1
    assert "passed its time limit of 0.5 s" in r.stderr


@pytest.mark.parametrize("args, code, message", [
    (["--num-processes", "2"], 2, "needs --coordinator, --num-processes and --process-id together"),
    (["--coordinator", "127.0.0.1:1", "--num-processes", "3", "--process-id", "0"], 1,
     "4 devices, which 3 processes cannot share evenly"),
])
def test_impossible_process_groups_are_refused(args, code, message):
    r = _cli("run", str(CPU / "sm_all_gather.hlo"), *args)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_memory_preflight_refuses_with_the_numbers(monkeypatch):
    program = load(str(CPU / "spmd_mlp_train_step.hlo"))
    import converter.common.resources as resources
    import converter.runtime.program as runtime

    monkeypatch.setattr(resources, "available_bytes", lambda: 1000)
    with pytest.raises(ConverterError, match=r"executing needs about .* in this process \(4 of 4 device\(s\).*"
                                             r"is available.*--skip-memory-check"):
        check_memory_fits(program)
    monkeypatch.setattr(resources, "available_bytes", lambda: runtime.memory_needed_bytes(program) // 2)
    with pytest.raises(ConverterError, match="it would fit on 2 hosts like this one"):
        check_memory_fits(program)


def test_random_inputs_of_a_share_are_the_rows_of_the_whole():
    program = load(str(CPU / "spmd_mlp_train_step.hlo"))
    whole = program.random_inputs(5)
    program.local_devices = [2, 3]
    share = program.random_inputs(5)
    for w, s in zip(whole, share):
        assert w[2:].tobytes() == s.tobytes()


def _multi_device_catalog_dumps() -> list[pathlib.Path]:
    import json

    out = []
    for folder in sorted((ROOT / "tests" / "dumps").iterdir()):
        manifest = folder / "manifest.json"
        if manifest.exists():
            programs = json.loads(manifest.read_text())["programs"]
            out += [folder / entry["dump"] for entry in programs.values()
                    if entry.get("devices", 1) > 1 and (folder / entry["dump"]).exists()]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dump", _multi_device_catalog_dumps(), ids=lambda d: f"{d.parent.name}/{d.stem}")
def test_every_multi_device_catalog_dump_across_processes(dump, tmp_path):
    single, multi = tmp_path / "single.npz", tmp_path / "multi.npz"
    r = _cli("run", str(dump), "--outputs", str(single), timeout=900)
    if r.returncode != 0:
        pytest.skip(f"does not run in one process here: {r.stderr.strip().splitlines()[-1]}")
    r = _cli("run", str(dump), "--outputs", str(multi), "--processes", "2", timeout=900)
    assert r.returncode == 0, r.stderr
    with np.load(single) as a, np.load(multi) as b:
        _same_bits(a, b)
