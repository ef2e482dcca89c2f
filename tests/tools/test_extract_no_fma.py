"""extract --no-fma: a cut between a multiply and the add XLA's CPU compiler contracts it
into (an FMA in the full run, two roundings in the extracted module) gives the tap's bits
when both compiles run without contraction (converter/runtime/fp_contraction.py).

XLA reads the flag that turns contraction off once per process, so the commands run in
child processes; this pytest process keeps XLA's defaults."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.fp_contraction import FLAG, contraction_is_off, turn_contraction_off

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = os.path.join(ROOT, "tests", "dumps", "cpu", "elementwise_f32.hlo")
X86 = pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"),
                         reason="the flag names x86 instruction sets")


def _child(args: list[str], env_flags: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, XLA_FLAGS=env_flags)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@X86
def test_a_cut_inside_a_contracted_multiply_add_verifies_bit_for_bit_without_contraction(tmp_path):
    """%add.0 = mul.0 + add.1 in elementwise_f32's fusion: by default the full run computes it
    with one rounding and the extracted add (from mul.0's value) with two, so --verify finds
    them different and widens the cut to keep the multiply (--producers 1: exit 0 with the
    multiply's operand as input); with --no-fma both round twice and the plain cut's module
    is the tap bit for bit.  NumPy checks XLA's result of the module under the flag: the
    f32 sum of its two inputs."""
    out = tmp_path / "add.hlo"
    command = ["-m", "converter", "extract", DUMP, "--root", "add.0", "-o", str(out), "--verify"]
    default = _child(command)
    assert default.returncode == 0, default.stdout + default.stderr
    assert "not the tap bit for bit" in default.stdout and "again with --producers 1" in default.stdout
    fixed = _child(command + ["--no-fma"])
    assert "--producers 1" not in fixed.stdout
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "equals the tap bit for bit" in fixed.stdout and FLAG in fixed.stdout
    # XLA itself runs the written module under the flag; NumPy adds its inputs in f32.
    script = ("import sys, numpy as np; from converter.runtime.xla_oracle import run_with_xla; "
              "a = np.load(sys.argv[2]); (r,) = run_with_xla(open(sys.argv[1]).read(), [a['arg0'], a['arg1']]); "
              "np.save(sys.argv[3], r)")
    ran = _child(["-c", script, str(out), str(tmp_path / "add.inputs.npz"), str(tmp_path / "r.npy")], FLAG)
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "add.inputs.npz") as npz:
        expected = npz["arg0"] + npz["arg1"]
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), expected)


@X86
def test_a_process_whose_xla_read_its_flags_is_told_how_to_start(monkeypatch):
    """Here XLA has compiled already (the probe), with contraction on: adding the flag now
    changes nothing, and turn_contraction_off says so instead of returning."""
    assert not contraction_is_off()  # XLA's default in this process: one rounding
    monkeypatch.setenv("XLA_FLAGS", "")
    with pytest.raises(ConverterError, match=f"start it with XLA_FLAGS={FLAG}"):
        turn_contraction_off("extract --no-fma")


@X86
def test_no_fma_on_a_multi_device_dump(tmp_path):
    """The contraction probe starts JAX's CPU backend: it must start with the dump's four
    devices (it had started with one, and the run then failed).  Device 2's dot of the
    data-parallel step, verified bit for bit by XLA under the flag."""
    dump = os.path.join(ROOT, "tests", "dumps", "cpu", "sm_dp_train_step.hlo")
    done = _child(["-m", "converter", "extract", dump, "--root", "dot", "--device", "2", "-o", str(tmp_path / "d.hlo"),
                   "--verify", "--no-fma"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "equals the tap bit for bit" in done.stdout
