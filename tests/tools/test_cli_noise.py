"""No noise where a user reads results (issue 28, item 12): gloo's `[Gloo] Rank ...` lines
of a --processes run go to stderr, not into the table on stdout; importing `converter` and
running a module keeps jaxlib's INFO logs off; `--print-literals` prints small arrays whole;
`--allow-custom-call` keeps a call a pass would rewrite; `--target-version` without
`--emit portable` is a bad command line.  (Kept reductions named by kind:
tests/passes/test_ordered_reductions.py; the memory report's two maxima:
tests/tools/memory/test_memory.py and tests/tools/test_memory_plot.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.runtime.inputs import SUMMARY_WHOLE_UP_TO, format_literals
from converter.tools.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMM = "tests/dumps/gpu_jax012/matmul_bf16_f32acc.hlo"  # one __cublas$lt$matmul

ALL_REDUCE_2 = """HloModule ar, replica_count=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT r = f32[4]{0} all-reduce(x), replica_groups={{0,1}}, to_apply=add
}
"""


def _python(*args: str, cwd: str = ROOT, timeout: int = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # what a user's shell has: nothing set
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_gloo_lines_of_a_multi_process_run_stay_out_of_stdout(tmp_path):
    dump = tmp_path / "ar.hlo"
    dump.write_text(ALL_REDUCE_2)
    out = tmp_path / "o.npz"
    np.savez(tmp_path / "in.npz", arg0=np.array([[1, 2, 3, 4], [0.5, 0.25, -1, 8]], np.float32))
    r = _python("-m", "converter", "run", str(dump), "--processes", "2", "--inputs", str(tmp_path / "in.npz"),
                "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    assert "[Gloo]" not in r.stdout and "Rank" not in r.stdout
    assert re.search(r"^out0\s+2x4\s+f32", r.stdout, re.M)  # the table is still on stdout
    with np.load(out) as d:  # a two-term f32 sum: exact
        np.testing.assert_array_equal(d["out0"], np.tile(np.array([1.5, 2.25, 2, 12], np.float32), (2, 1)))


def test_importing_converter_keeps_jaxlibs_info_logs_off(tmp_path):
    dump = tmp_path / "ar.hlo"
    dump.write_text(ALL_REDUCE_2)
    code = (f"import converter\nprog = converter.load({str(dump)!r})\n"
            "print(prog(*prog.random_inputs(0))[0].shape)")
    r = _python("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 4)"
    assert not re.search(r"^I\d{4} ", r.stderr, re.M), r.stderr  # absl's INFO prefix: I<month><day>
    assert "pjrt_client" not in r.stderr


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 12), min_size=1, max_size=3).filter(
    lambda s: int(np.prod(s)) <= SUMMARY_WHOLE_UP_TO), seed=st.integers(0, 2**16))
def test_small_arrays_print_whole(shape, seed):
    """Every value of an array of up to SUMMARY_WHOLE_UP_TO elements is printed (no '...')."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    text = format_literals(["out0"], [a], "summary")
    assert "..." not in text
    body = text.split("\n", 1)[1]
    assert len(re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", body)) == a.size


def test_a_large_array_prints_by_its_corners():
    text = format_literals(["out0"], [np.zeros((8, 16), np.float32)], "summary")
    assert "..." in text


@pytest.mark.parametrize("allow", [False, True])
def test_allow_custom_call_keeps_a_call_that_a_pass_rewrites(tmp_path, allow, capsys):
    out = tmp_path / "o.mlir"
    argv = ["convert", os.path.join(ROOT, GEMM), "-o", str(out), "--no-debug-info"]
    if allow:
        argv += ["--allow-custom-call", "__cublas$lt$matmul"]
    assert main(argv) == 0, capsys.readouterr().err
    text = out.read_text()
    calls = re.findall(r"custom_call @([\w$.]+)", text)
    if allow:
        assert calls == ["__cublas$lt$matmul"]  # kept as it is, and no dot_general made for it
        assert "stablehlo.dot_general" not in text
    else:
        assert calls == [] and "stablehlo.dot_general" in text


def test_target_version_without_emit_portable_is_a_bad_command_line(tmp_path, capsys):
    dump = tmp_path / "ar.hlo"
    dump.write_text(ALL_REDUCE_2)
    for emit in ("mlir", "bytecode"):
        assert main(["convert", str(dump), "--emit", emit, "--target-version", "1.0.0", "-o",
                     str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert f"--target-version applies to --emit portable only (got --emit {emit})" in err
        assert not (tmp_path / "o").exists()
    assert main(["convert", str(dump), "--target-version", "1.0.0", "-o", str(tmp_path / "o")]) == 2
