"""The run/check interface of the peers (per-argument inputs, literals, iterations,
tolerances, --version, --debug anywhere, progress lines, inspect's bytes and elided
constants, the imported module in --print-ir-after-all) and bad paths and streams:
one clear message, exit 1 (2 for a bad command line), never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOOP = "tests/dumps/cpu/while_dynamic.hlo"  # while c[0] < n: c[1] *= 1.1; returns (count, x * 1.1**n)


def cli(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-m", "converter", *args], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=300, **kwargs)


def expected_loop(x: np.ndarray, n: int) -> np.ndarray:
    for _ in range(n):
        x = (x * np.float32(1.1)).astype(np.float32)
    return x


def test_per_argument_inputs_literals_and_iterations(tmp_path):
    x = np.array([0.5, -2.0, 3.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "o.npz"
    r = cli("run", LOOP, "--input", f"arg0=@{tmp_path / 'x.npy'}", "--input", "n.1=s32=4", "--iterations", "4",
            "--print-literals", "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as d:
        assert d["out0"] == 4
        np.testing.assert_array_equal(d["out1"], expected_loop(x, 4))
    assert "execute x 4: min" in r.stdout and "median" in r.stdout
    assert "out1: float32[3]" in r.stdout
    # The literal form, and an npz for the rest with one argument overridden.
    np.savez(tmp_path / "in.npz", arg0=x, arg1=np.int32(2))
    r = cli("run", LOOP, "--inputs", str(tmp_path / "in.npz"), "--input", "arg0=3xf32=1,2,4", "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as d:
        np.testing.assert_array_equal(d["out1"], expected_loop(np.array([1, 2, 4], np.float32), 2))
    r = cli("run", LOOP, "--input", "arg0=3xf32=1,2")
    assert r.returncode == 1 and "2 value(s) for a 3xf32 array of 3" in r.stderr
    r = cli("run", LOOP, "--input", "zz=f32=1")
    assert r.returncode == 1 and "no parameter zz" in r.stderr
    assert cli("run", LOOP, "--iterations", "0").returncode == 2


def test_print_literals_summary_and_full(tmp_path):
    r = cli("run", "tests/dumps/cpu/elementwise_f32.hlo", "--print-literals")
    assert r.returncode == 0 and "out0: float32[8, 16]" in r.stdout
    full = cli("run", "tests/dumps/cpu/elementwise_f32.hlo", "--print-literals=full")
    # 2 x 128 values printed whole: more numbers than a summary would show.
    assert full.returncode == 0 and full.stdout.count(",") >= 2 * 127 > r.stdout.count(",")


def test_check_tolerances_and_outputs(tmp_path):
    out = tmp_path / "c.npz"
    r = cli("check", LOOP, "--rtol", "0", "--atol", "0", "--outputs", str(out), "--seed", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    run = tmp_path / "r.npz"
    assert cli("run", LOOP, "--seed", "3", "--outputs", str(run)).returncode == 0
    with np.load(out) as c, np.load(run) as d:
        assert c.files == d.files
        for k in c.files:
            np.testing.assert_array_equal(c[k], d[k])


def test_version_debug_anywhere_and_progress(tmp_path):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("hlo-roundtrip ")
    r = cli("run", "no_such.hlo", "--debug")
    assert r.returncode == 1 and "Traceback" in r.stderr
    r = cli("run", "no_such.hlo")
    assert r.returncode == 1 and "Traceback" not in r.stderr and "no_such.hlo: no such file" in r.stderr
    # Not a terminal: lines with the elapsed time while a stage lasts.
    r = cli("run", LOOP, env={"HLO_ROUNDTRIP_PROGRESS_SECONDS": "0.05"})
    assert r.returncode == 0 and "s elapsed" in r.stderr


def test_a_failed_run_leaves_no_progress_line_behind(tmp_path, monkeypatch, capsys):
    """The elapsed-time beat stops however `run` ends: a run that fails while loading
    must not go on writing 'elapsed' lines into whatever the process does next (a
    leaked beat once wrote into a later command's error message)."""
    import threading
    import time

    from converter.tools.cli import main

    monkeypatch.setenv("HLO_ROUNDTRIP_PROGRESS_SECONDS", "0.02")
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constnt(1)\n}\n")
    before = set(threading.enumerate())
    assert main(["run", str(bad)]) == 1
    time.sleep(0.1)
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
    capsys.readouterr()
    time.sleep(0.1)
    assert "elapsed" not in capsys.readouterr().err


def test_inspect_bytes_elided_constants_and_ir_after_import(tmp_path):
    dump = tmp_path / "elided.hlo"
    dump.write_text("HloModule m\n\nENTRY %e (p: f32[4,8]) -> f32[4,8] {\n  %p = f32[4,8]{1,0} parameter(0)\n"
                    "  %c = f32[4,8]{1,0} constant({...})\n  ROOT %a = f32[4,8]{1,0} add(%p, %c)\n}\n")
    r = cli("inspect", str(dump))
    assert r.returncode == 0, r.stderr
    assert "128 B" in r.stdout and "total 128 B per device" in r.stdout
    assert "elided constants (1" in r.stdout and "%c" not in r.stdout.split("elided constants")[0]
    r = cli("convert", LOOP, "--print-ir-after-all", "-o", str(tmp_path / "o.mlir"))
    assert r.returncode == 0
    assert r.stderr.index("IR after import") < r.stderr.index("IR after drop-unused-results")


def _huge_npz(path):
    """An npz whose arg0 header claims a 10^6 x 10^6 f32 array over a few bytes."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("arg0.npy", header.getvalue() + b"\0" * 16)
        buf = io.BytesIO()
        np.save(buf, np.int32(1))
        z.writestr("arg1.npy", buf.getvalue())


def test_bad_paths_and_streams(tmp_path):
    cases = [
        (["run", "tests"], "is a directory"),
        (["run", LOOP, "--inputs", "tests"], "is a directory"),
    ]
    # an output path that cannot be written is a bad command line, refused before any work
    for args, message in [(["run", LOOP, "--outputs", str(tmp_path / "missing" / "o.npz")], "does not exist"),
                          (["run", LOOP, "--outputs", str(tmp_path)], "is a directory")]:
        r = cli(*args)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    cases.append((["run", LOOP, "--inputs", str(tmp_path / "x.npy")], "--input arg0=@"))
    _huge_npz(tmp_path / "huge.npz")
    cases.append((["run", LOOP, "--inputs", str(tmp_path / "huge.npz")], "claims a float32[1000000, 1000000]"))
    for args, message in cases:
        r = cli(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert ".tmp" not in r.stderr
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        r = cli("run", LOOP, "--outputs", str(ro / "o.npz"))
        assert r.returncode == 2 and "not writable" in r.stderr


def test_broken_pipe_and_usage_errors():
    p = subprocess.Popen(f"{sys.executable} -m converter inspect samples/tpu_mlp_allreduce_4_replicas.hlo | head -1",
                         shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), executable="/bin/bash")
    out, err = p.communicate(timeout=300)
    assert out.count("\n") == 1 and "Traceback" not in err and "Exception ignored" not in err
    r = cli("convert", LOOP, "--pipeline", "no-such-pass")
    assert r.returncode == 2 and "unknown pass 'no-such-pass'" in r.stderr
    r = cli("memory", "samples/tpu_spmd_mlp_async_collective_fusion.buffer_assignment.txt", "--plot", "x.gif")
    assert r.returncode == 2 and "must end in .png" in r.stderr


def test_output_dash_is_standard_output(tmp_path):
    """`-o -` writes to stdout, as with no -o (not to a file named '-'), for convert and
    export alike."""
    for args in (["convert", LOOP], ["export", LOOP]):
        plain, dash = cli(*args), cli(*args, "-o", "-")
        assert plain.returncode == dash.returncode == 0, dash.stderr
        assert dash.stdout == plain.stdout and ("module @" in dash.stdout or "HloModule" in dash.stdout)
    assert not os.path.exists(os.path.join(ROOT, "-"))
