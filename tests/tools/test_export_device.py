"""`export DUMP --tap NAME --emit jax`: the README's few lines of plain JAX run the written
module and give the values `run --tap` gives, bit for bit, keyed alike.

Reference: the CPU run of the same dump (`run --tap --outputs`, whose taps tests/importer
and tests/tools/test_extract.py check against XLA itself), a route that shares nothing with
jax.export's.  (XLA compiling these optimized dumps directly aborts the process on
fori_loop, so it cannot be the reference here.)  Bit equality: the same StableHLO compiled
by the same XLA CPU compiler."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from converter.tools.cli import main

pytest.importorskip("flatbuffers", reason="jax.export serialization needs flatbuffers (the `test` extra installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = os.path.join(ROOT, "tests", "dumps", "cpu")


def readme_example() -> str:
    """The Python block the README marks as run by this test."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- README example run by tests/tools/test_export_device.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "README lost its export example"
    return m.group(1)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


# (dump, tap arguments): a loop with taps at every iteration; bf16 with four results;
# every entry instruction tapped (more than ten results, whose sorted keys are not in
# result order: out10 sorts before out2).
CASES = [
    ("fori_loop", ["--tap", "sin.5,mul.17", "--tap-iterations", "all"]),
    ("bf16_mlp_train_step", ["--tap-regex", "fusion"]),
    ("mlp_value_and_grad", ["--tap-all"]),
]


@pytest.mark.parametrize("dump,taps", CASES, ids=[c[0] for c in CASES])
def test_readme_lines_run_the_export_to_the_bits_of_run(dump, taps, tmp_path, monkeypatch):
    path = os.path.join(CPU, dump + ".hlo")
    monkeypatch.chdir(tmp_path)
    assert main(["run", path, *taps, "--save-inputs", "in.npz", "--outputs", "cpu.npz"]) == 0
    assert main(["export", path, *taps, "--emit", "jax", "-o", "step.jax"]) == 0
    exec(compile(readme_example(), "README.md", "exec"), {})
    with np.load("cpu.npz") as c, np.load("device.npz") as d, np.load("in.npz") as i:
        assert len(i.files) >= 1
        assert sorted(c.files) == sorted(d.files)
        assert any(k.startswith("tap:") for k in d.files)
        for key in c.files:
            assert c[key].shape == d[key].shape and bits(c[key]) == bits(d[key]), key


def test_portable_artifact_keeps_the_tap_names(tmp_path):
    from converter.importer.taps import tap_labels
    from converter.mlir.serialize import load_module

    out = tmp_path / "f.mlirbc"
    assert main(["export", os.path.join(CPU, "fori_loop.hlo"), "--tap", "sin.5", "--emit", "portable",
                 "-o", str(out)]) == 0
    assert tap_labels(load_module(out.read_bytes())) == ["sin.5"]


def test_a_multi_device_module_is_refused_by_name(tmp_path, capsys):
    rc = main(["export", os.path.join(CPU, "sm_psum_pmean_pmax.hlo"), "--emit", "jax", "-o", str(tmp_path / "x.jax")])
    assert rc == 1
    assert "single-device" in capsys.readouterr().err
