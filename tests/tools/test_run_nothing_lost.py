"""`run` loses no work and says what it costs (issue 28, items 6-10 and 13): taps with
`--global` beside a before-optimizations sibling; SIGINT / SIGTERM stop a run at once with
no partial file and no orphan; output paths refused before any work; `--save-inputs`
repeats a run bit for bit; the stage table adds up to the wall time and an estimate is
printed up front; plug-ins that lower with JAX on multi-device dumps from the command line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from converter.runtime.sharding import split_global
from converter.tools.cli import main
from tests.helpers import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_ENV = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}


def cli_env(**extra: str) -> dict[str, str]:
    return dict(PYTHON_ENV, PYTHONPATH=ROOT, **extra)


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "converter", *args], capture_output=True, text=True,
                          env=cli_env(**extra), cwd=ROOT, timeout=300)


# A jitted function on a 2x2 mesh of 4 CPU devices, dumped by XLA itself (--xla_dump_to),
# as a user makes the pair: the optimized module and its before-optimizations sibling.
_GENERATE = textwrap.dedent("""
    import os, sys
    out = sys.argv[1]
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
    def f(w, x):
        h = jnp.tanh(x @ w)
        return h, jnp.sum(h * h)
    g = jax.jit(f, in_shardings=(NamedSharding(mesh, P(None, "y")), NamedSharding(mesh, P("x", None))),
                out_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P())))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    h, s = g(w, x)
    np.savez(os.path.join(out, "jax.npz"), w=w, x=x, h=np.asarray(h), s=np.asarray(s))
""")


@pytest.fixture(scope="module")
def dump_pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("xla_dump")
    subprocess.run([sys.executable, "-c", _GENERATE, str(out)], check=True, env=PYTHON_ENV, timeout=300,
                   capture_output=True)
    optimized = [p for p in os.listdir(out) if re.fullmatch(r"module_\d+\.jit_f\.cpu_after_optimizations\.txt", p)]
    assert len(optimized) == 1, os.listdir(out)
    dump = out / optimized[0]
    assert (out / optimized[0].replace("cpu_after_optimizations", "before_optimizations")).exists()
    with np.load(out / "jax.npz") as d:
        return dump, {k: d[k] for k in d.files}


# ------------------------------------------------------------------- item 6
def test_global_taps_beside_a_before_optimizations_sibling(dump_pair, tmp_path, capsys):
    """Taps are not results of the module the sibling describes: the entry still matches;
    parameter taps come out whole (their sharding), other taps per device."""
    dump, ref = dump_pair
    np.savez(tmp_path / "in.npz", arg0=ref["w"], arg1=ref["x"])
    before = str(dump).replace("cpu_after_optimizations", "before_optimizations")
    for extra in (["--tap-all"], ["--tap-all", "--shardings-from", before]):
        out = tmp_path / "out.npz"
        assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out),
                     *extra]) == 0, capsys.readouterr().err
        with np.load(out) as d:
            got = {k: d[k] for k in d.files}
        assert_close(got["out0"], ref["h"])  # JAX's own result for the program
        assert_close(got["out1"], ref["s"])
        taps = {k: v for k, v in got.items() if k.startswith("tap:")}
        assert len(taps) >= 4
        # the entry parameters' taps, whole: exactly the inputs given
        wholes = [v for v in taps.values() if v.shape in ((8, 6), (4, 8))]
        assert sorted(v.shape for v in wholes) == [(4, 8), (8, 6)]
        for v in wholes:
            np.testing.assert_array_equal(v, ref["w"] if v.shape == (8, 6) else ref["x"])
        # tanh(x @ w) per device: device d's tile of JAX's result (2x2 tiles over the mesh)
        pieces = split_global(ref["h"], (2, 3), "{devices=[2,2]<=[4]}", 4)
        assert any(v.shape == (4, 2, 3) and np.allclose(v, pieces, rtol=1e-5, atol=1e-6) for v in taps.values())
    # one named tap, the sibling found by itself
    name = next(k for k, v in taps.items() if v.shape == (4, 2, 3))[len("tap:"):]
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--tap", name.split("#")[0]]) == 0
    assert "is it the same module" not in capsys.readouterr().err


# ------------------------------------------------------------------- item 8
@pytest.mark.parametrize("argv", [
    ["run", "X", "--outputs", "{missing}/out.npz"],
    ["run", "X", "--save-inputs", "{missing}/in.npz"],
    ["run", "X", "--outputs", "{dir}"],
    ["run", "X", "--dump-dir", "{missing}/passes"],
    ["convert", "X", "-o", "{missing}/out.mlir"],
    ["convert", "X", "--output", "{dir}"],
    ["convert", "X", "--dump-dir", "{file}"],
    ["check", "X", "--outputs", "{missing}/out.npz"],
    ["compare", "X", "X", "--dump-dir", "{missing}/d"],
    ["export", "X", "-o", "{missing}/out.hlo"],
    ["memory", "X", "--plot", "{missing}/live.png"],
    ["memory", "X", "--dump-dir", "{missing}/d"],
])
def test_unwritable_output_paths_are_refused_before_any_work(argv, tmp_path, capsys):
    """Exit 2 naming the flag, the path and why, before the input is even read (the input
    here does not exist: had the work started, it would be exit 1 'no such file')."""
    (tmp_path / "file").write_text("")
    values = {"missing": str(tmp_path / "no_such_dir"), "dir": str(tmp_path), "file": str(tmp_path / "file")}
    args = [a.format(**values) if "{" in a else str(tmp_path / "input.hlo") if a == "X" else a for a in argv]
    start = time.perf_counter()
    assert main(args) == 2
    err = capsys.readouterr().err
    flag = next(a for a in argv if a.startswith("-"))
    path = next(a for a in args if a.startswith(str(tmp_path)) and not a.endswith("input.hlo"))
    assert path in err and (flag in err or flag == "-o" and "--output" in err), err
    assert re.search(r"does not exist|is a directory|is not a directory", err), err
    assert time.perf_counter() - start < 2


# ------------------------------------------------------------------- item 9
def _run_twice(tmp_path, dump: str, *extra: str) -> tuple[dict, dict, dict]:
    saved, first, second = tmp_path / "in.npz", tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", dump, "--seed", "7", "--save-inputs", str(saved), "--outputs", str(first), *extra]) == 0
    assert main(["run", dump, "--inputs", str(saved), "--outputs", str(second), *extra]) == 0
    load = lambda p: (lambda d: {k: d[k] for k in d.files})(np.load(p))  # noqa: E731
    return load(saved), load(first), load(second)


def _same_bits(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        assert a[k].tobytes() == b[k].tobytes(), k


def test_save_inputs_repeats_the_run_bit_for_bit(dump_pair, tmp_path, capsys):
    # bf16 parameters, saved as np.savez stores them (raw void of the same width)
    inputs, first, second = _run_twice(tmp_path, "tests/dumps/cpu/bf16_math.hlo")
    assert list(inputs) == ["arg0"] and inputs["arg0"].dtype == np.dtype("V2") and inputs["arg0"].shape == (64,)
    _same_bits(first, second)
    # four devices, per device: a leading axis of 4
    dump, ref = dump_pair
    inputs, first, second = _run_twice(tmp_path, str(dump))
    assert inputs["arg0"].shape == (4, 8, 3) and inputs["arg1"].shape == (4, 2, 8)
    _same_bits(first, second)
    # --global: whole arrays; random ones drawn whole, so the replicated halves agree
    inputs, first, second = _run_twice(tmp_path, str(dump), "--global")
    assert inputs["arg0"].shape == (8, 6) and inputs["arg1"].shape == (4, 8)
    _same_bits(first, second)
    import jax
    import jax.numpy as jnp

    h = np.asarray(jax.jit(lambda w, x: jnp.tanh(x @ w))(inputs["arg0"], inputs["arg1"]))
    assert_close(first["out0"], h)  # JAX's result on the saved inputs


# ------------------------------------------------------------------- item 10
def test_stage_table_adds_up_to_the_wall_time_and_an_estimate_comes_first(tmp_path):
    out = tmp_path / "o.npz"
    start = time.time()
    r = cli("run", "tests/dumps/cpu/while_dynamic.hlo", "--outputs", str(out), "--save-inputs", str(tmp_path / "i.npz"))
    wall = time.time() - start
    assert r.returncode == 0, r.stderr
    cost = re.search(r"cost: ([\d.e+-]+) GFLOP and .* accessed by XLA's cost analysis; estimated execution", r.stderr)
    assert cost, r.stderr
    assert "1 while loop(s): counted once each" in r.stderr
    rows = re.findall(r"^(\S.*?)\s{2,}(\d+\.\d{3}) s$", r.stdout, re.M)
    names = [n for n, _ in rows]
    for stage in ("start-up (Python, imports)", "parse", "import", "passes", "compile", "inputs", "save inputs",
                  "to device", "execute", "from device", "write outputs", "total"):
        assert stage in names, r.stdout
    assert names[-1] == "total"
    seconds = [float(t) for _, t in rows]
    assert abs(sum(seconds[:-1]) - seconds[-1]) <= 0.001 * len(seconds), r.stdout
    # the total is the command's wall time, less the report's printing and the interpreter's exit
    assert 0.6 * wall <= seconds[-1] <= wall + 0.05, (wall, r.stdout)
    other = dict(zip(names, seconds))["other"]
    assert other <= 0.25 * seconds[-1], r.stdout


# ------------------------------------------------------------------- item 7
_FOREVER = """HloModule forever, entry_computation_layout={(f32[256]{0})->f32[256]{0}}

cond {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  limit = s32[] constant(2000000000)
  ROOT lt = pred[] compare(i, limit), direction=LT
}

body {
  p = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[256] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  y = f32[256] sine(x)
  ROOT t = (s32[], f32[256]) tuple(next, y)
}

ENTRY main {
  x = f32[256] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[256]) tuple(zero, x)
  w = (s32[], f32[256]) while(t), condition=cond, body=body
  ROOT r = f32[256] get-tuple-element(w), index=1
}
"""


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("when,signum", [("executing", signal.SIGINT),
                                         pytest.param("executing", signal.SIGTERM, marks=pytest.mark.slow),
                                         ("converting", signal.SIGTERM)])
def test_a_signal_stops_the_run_at_once(tmp_path, when, signum):
    """A while loop of 2e9 iterations: the signal stops it within seconds, exit 130/143,
    'interrupted', no output file and no process left."""
    dump = tmp_path / "forever.hlo"
    dump.write_text(_FOREVER)
    out = tmp_path / "out.npz"
    p = subprocess.Popen([sys.executable, "-m", "converter", "run", str(dump), "--outputs", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env=cli_env(HLO_ROUNDTRIP_PROGRESS_SECONDS="0.4"))
    try:
        deadline = time.time() + 120
        children: list[int] = []
        while not children and time.time() < deadline:
            children = _children(p.pid)
            time.sleep(0.05)
        assert children, "the work runs in a child process"
        if when == "executing":
            # the cost line is printed after compiling, just before the inputs and execution
            lines = []
            while time.time() < deadline:
                line = p.stderr.readline()
                lines.append(line)
                if line.startswith("hlo-roundtrip: cost:") or not line:
                    break
            assert any("cost:" in line for line in lines), lines
            time.sleep(1.5)
        else:
            time.sleep(0.3)
        start = time.time()
        p.send_signal(signum)
        code = p.wait(timeout=30)
        took = time.time() - start
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert code == (130 if signum == signal.SIGINT else 143), err
    assert took < 3, took
    assert "interrupted" in err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == ["forever.hlo"]  # no output, no partial file
    if when == "executing":  # progress measured against the estimate, the while loop named as the unknown
        assert re.search(r"executing for \d+ s, past the estimate of .* \(while loops make it longer\)", err), err
    assert not any(_alive(c) for c in children)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_signal_stops_find_nonfinite_at_once(tmp_path):
    """`run --find-nonfinite` runs where a signal stops it too: the same 2e9-iteration loop,
    SIGINT once its work is running in the child, exit 130 within seconds, nothing left."""
    dump = tmp_path / "forever.hlo"
    dump.write_text(_FOREVER)
    p = subprocess.Popen([sys.executable, "-m", "converter", "run", str(dump), "--find-nonfinite"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env())
    try:
        deadline = time.time() + 120
        children: list[int] = []
        while not children and time.time() < deadline:
            children = _children(p.pid)
            time.sleep(0.05)
        assert children, "the work runs in a child process"
        time.sleep(8)  # converted, compiled, executing: the loop alone lasts far longer
        assert p.poll() is None, p.stderr.read()
        start = time.time()
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=30)
        took = time.time() - start
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert code == 130, err
    assert took < 3, took
    assert "interrupted" in err and "Traceback" not in err
    assert not any(_alive(c) for c in children)


_PARTIAL = textwrap.dedent("""
    import sys, time
    from converter.common.files import partial_file
    from converter.tools.stoppable import run_stoppable
    out = sys.argv[1]
    def work():
        with open(partial_file(out), "wb") as f:  # what write_atomic writes before renaming
            f.write(b"half")
            f.flush()
            time.sleep(60)
        return 0
    sys.exit(run_stoppable(work, [out], "test"))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_half_written_output_is_removed_when_stopped(tmp_path):
    out = tmp_path / "out.npz"
    p = subprocess.Popen([sys.executable, "-c", _PARTIAL, str(out)], stderr=subprocess.PIPE, text=True,
                         cwd=ROOT, env=cli_env())
    deadline = time.time() + 60
    while not [f for f in os.listdir(tmp_path) if ".tmp" in f] and time.time() < deadline:
        time.sleep(0.05)
    assert [f for f in os.listdir(tmp_path) if ".tmp" in f]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 143
    assert "interrupted" in p.stderr.read()
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ item 13
def _with_partitions(src: str, dst, partitions: int = 2) -> str:
    """The dump as a module of `partitions` devices (each computes the same thing)."""
    with open(os.path.join(ROOT, src)) as f:
        text = f.read()
    first, rest = text.split("\n", 1)
    first = re.sub(r"^(HloModule [^,\s]+)", rf"\1, num_partitions={partitions}", first)
    dst.write_text(first + "\n" + rest)
    return str(dst)


_LOWERING_CASES = {  # name: (a dump of 2 devices, or a one-device dump to declare on 2)
    "pfft": ("tests/passes/plugins/dumps/pfft_dist_xy2_fwd.hlo", None),
    "neuron": (None, "tests/passes/plugins/dumps/neuron_activations_f32.hlo"),
    "lapack": (None, "tests/dumps/cpu_jax012/linalg_qr.hlo"),
    "cusolver": (None, "tests/dumps/gpu_jax012/linalg_qr.hlo"),
    "mlir": (None, "tests/passes/plugins/dumps/neuron_activations_f32.hlo"),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("lapack", "cusolver", "mlir") else n
                                  for n in _LOWERING_CASES])
def test_multi_device_dumps_that_lower_with_jax_run_from_the_command_line(name, tmp_path):
    """A fresh process, as a user runs it: a plug-in's JAX lowering (jaxDecomp's
    distributed FFT; AWS Neuron's activations and RMSNorm), a LAPACK call kept for the CPU
    runtime (the custom-call policy asks jaxlib which targets it has), a cuSOLVER call
    rewritten to LAPACK, and the Neuron module given as StableHLO (the passes run on the
    .mlir), on modules of 2 devices.  Device 0's values equal the one-device run's."""
    from converter.runtime import program as runtime

    two_device, one_device = _LOWERING_CASES[name]
    dump = two_device or _with_partitions(one_device, tmp_path / f"{name}2.hlo")
    if name == "mlir":
        mlir = tmp_path / "neuron2.mlir"
        r = cli("convert", dump, "--pipeline", "none", "-o", str(mlir))
        assert r.returncode == 0, r.stderr
        dump = str(mlir)
    out = tmp_path / "out.npz"
    r = cli("run", dump, "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    assert "JAX started its CPU backend" not in r.stderr
    with np.load(out) as d:
        got = [d[f"out{i}"] for i in range(sum(k.startswith("out") for k in d.files))]
    assert got and all(g.shape[0] == 2 for g in got)
    if one_device is None:
        return
    single = runtime.load(os.path.join(ROOT, one_device))
    want = single(*single.random_inputs(0))
    for g, w in zip(got, want):
        # device 0 draws the one-device run's random inputs (seed, parameter, device 0)
        np.testing.assert_array_equal(g[0], w)


@pytest.mark.slow
def test_a_plugin_dump_runs_over_several_processes(tmp_path):
    """Each process joins its group (its share of CPU devices) before the plug-in's JAX
    lowering could start JAX: the same bits as one process."""
    dump = _LOWERING_CASES["pfft"][0]
    r = cli("run", dump, "--processes", "2", "--outputs", str(tmp_path / "p2.npz"))
    assert r.returncode == 0, r.stderr
    r = cli("run", dump, "--outputs", str(tmp_path / "p1.npz"))
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "p2.npz") as a, np.load(tmp_path / "p1.npz") as b:
        np.testing.assert_array_equal(a["out0"], b["out0"])
