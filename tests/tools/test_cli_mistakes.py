"""A newcomer's mistakes get a suggestion (issue 28, item 11): a misspelled flag, command or
choice on every subcommand (exit 2), a pass name typed with '_' (exit 2), a tap name typed
with '_' for '.', an .npz keyed otherwise than arg0..argN (read when its keying names each
argument one way only, else the keys found and how to map them), a file of the wrong kind
(says what it is and what was expected, exit 1), `--processes` that does not divide the
devices (refused once, before any process starts), and an unknown custom-call (one line per
target and one line of fix; the known targets behind `passes --targets`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from converter.tools.cli import build_parser, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")

ADD = """HloModule add, entry_computation_layout={(f32[2,3]{1,0}, f32[3]{0})->f32[2,3]{1,0}}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[3]{0} parameter(1)
  b = f32[2,3]{1,0} broadcast(y), dimensions={1}
  ROOT tanh.3 = f32[2,3]{1,0} add(x, b)
}
"""


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _typos(flag: str) -> list[str]:
    """Adjacent transpositions and single deletions inside the name (after '--')."""
    name = flag[2:]
    out = {name[:i] + name[i + 1] + name[i] + name[i + 2:] for i in range(len(name) - 1)}
    out |= {name[:i] + name[i + 1:] for i in range(1, len(name))}
    return sorted("--" + t for t in out if t != name)


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_every_misspelled_flag_of_every_subcommand_is_refused_with_a_suggestion(capsys):
    """Exhaustive over the options of each subcommand: a typo (a transposition or a deleted
    letter) that argparse does not itself take (another option, or a prefix of one) is exit 2
    naming the typo and suggesting an option of that subcommand, the intended one for
    nearly all (a deletion can land nearer another option: `--inputs` minus 's')."""
    checked = suggested_intended = 0
    for command, sub in _subparsers().items():
        flags = [o for o in sub._option_string_actions if o.startswith("--") and o != "--help"]
        for flag in flags:
            for typo in _typos(flag)[:2]:
                if any(f.startswith(typo) for f in flags) or typo in ("--help", "--debug", "--version"):
                    continue  # argparse takes it (an option or an abbreviation)
                argv = [command, "x.hlo", typo] if command not in ("passes", "rules") else [command, typo]
                if command == "compare":
                    argv.insert(2, "y.hlo")
                err = _usage_error(argv, capsys)
                last = err.strip().splitlines()[-1]
                assert f"hlo-roundtrip {command}: error: unrecognized arguments: {typo}" in last, last
                assert "did you mean --" in last, last
                suggested = last.split("did you mean ")[1].rstrip("?)")
                assert suggested in flags, (typo, suggested)
                checked += 1
                suggested_intended += suggested == flag
    assert checked > 100
    assert suggested_intended > 0.9 * checked, (suggested_intended, checked)


def test_the_flag_of_the_issue_and_misspelled_commands_and_choices(capsys):
    err = _usage_error(["run", "x.hlo", "--ouputs", "o.npz"], capsys)
    # The misspelled option is named (its value is not an argument of its own).
    assert "unrecognized arguments: --ouputs (--ouputs: did you mean --outputs?)" in err
    err = _usage_error(["run", "x.hlo", "--ouputs=o.npz"], capsys)
    assert "did you mean --outputs?" in err
    assert "did you mean run?" in _usage_error(["rnu", "x.hlo"], capsys)
    assert "did you mean bytecode?" in _usage_error(["convert", "x.hlo", "--emit", "bytecod"], capsys)


def test_a_pass_name_with_underscores_is_suggested_with_dashes(tmp_path, capsys):
    dump = tmp_path / "add.hlo"
    dump.write_text(ADD)
    assert main(["convert", str(dump), "--pipeline", "cse,cublas_gemm"]) == 2
    err = capsys.readouterr().err
    assert "unknown pass 'cublas_gemm' in --pipeline; did you mean 'cublas-gemm'?" in err


def test_a_tap_name_typed_with_an_underscore_is_suggested(tmp_path, capsys):
    dump = tmp_path / "add.hlo"
    dump.write_text(ADD)
    assert main(["run", str(dump), "--tap", "tanh_3"]) == 1
    assert "--tap tanh_3: no instruction of that name; did you mean tanh.3?" in capsys.readouterr().err


@pytest.mark.parametrize("keying", ["positional", "parameter names"])
def test_npz_keyed_positionally_or_by_parameter_names_is_read(tmp_path, keying):
    """np.savez(f, *arrays) writes arr_0..arr_N: positional, as argN is; parameter names
    name each argument once.  Both are read; the result is NumPy's x + y."""
    dump = tmp_path / "add.hlo"
    dump.write_text(ADD)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.7)
    y = np.array([1.5, -2.25, 3.0], np.float32)
    inputs = tmp_path / "in.npz"
    if keying == "positional":
        np.savez(inputs, x, y)
    else:
        np.savez(inputs, y=y, x=x)
    out = tmp_path / "o.npz"
    assert main(["run", str(dump), "--inputs", str(inputs), "--outputs", str(out)]) == 0
    with np.load(out) as d:
        np.testing.assert_array_equal(d["out0"], x + y)  # one f32 add: exact


def test_npz_keyed_otherwise_names_the_keys_and_the_mapping(tmp_path, capsys):
    dump = tmp_path / "add.hlo"
    dump.write_text(ADD)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, bias=np.zeros(3, np.float32), acts=np.zeros((2, 3), np.float32))
    assert main(["run", str(dump), "--inputs", str(inputs)]) == 1
    err = capsys.readouterr().err
    assert "keyed acts, bias" in err and "arg0 = x f32[2,3], arg1 = y f32[3]" in err
    assert "np.savez(f, *arrays)" in err and "by shape: acts -> arg0, bias -> arg1" in err
    # Some argN keys: the missing one is named as before.
    np.savez(inputs, arg0=np.zeros((2, 3), np.float32))
    assert main(["run", str(dump), "--inputs", str(inputs)]) == 1
    assert "missing arg1 (arg1 is y, f32[3])" in capsys.readouterr().err


def _write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


def test_a_file_of_the_wrong_kind_says_what_it_is_and_what_was_expected(tmp_path, capsys):
    readme = os.path.join(ROOT, "README.md")
    buffers = os.path.join(SAMPLES, "tpu_spmd_mlp_async_collective_fusion.buffer_assignment.txt")
    hlo = os.path.join(SAMPLES, "tpu_mlp_allreduce_4_replicas.hlo")
    np.savez(tmp_path / "a.npz", x=np.zeros(2))
    cases = [
        (["run", readme], "this is a Markdown document; `run` reads an HLO dump"),
        (["inspect", readme], "this is a Markdown document; `inspect` reads an HLO dump"),
        (["convert", str(tmp_path / "a.npz")], "this is a zip archive (an .npz of arrays?)"),
        (["run", _write(tmp_path / "junk.pb", bytes(range(256)) * 4)], "this is a binary file that is none of XLA's"),
        (["run", _write(tmp_path / "hello.pb", b"hello\n")], "this is a .pb file that is none of XLA's"),
        (["run", buffers], "this is an XLA buffer-assignment dump (read by `hlo-roundtrip memory`)"),
        (["memory", hlo], "this is an HLO text dump; `memory` reads XLA's buffer assignment"),
        (["memory", buffers, "--dump", buffers], "this is an XLA buffer-assignment dump"),
        (["check", _write(tmp_path / "k.py", b"import numpy as np\n")], "this is a Python source file"),
        (["run", _write(tmp_path / "c.json", b'{"a": 1}')], "this is a JSON document"),
    ]
    for argv, expected in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert expected in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "give it to `memory` with --dump" in (main(["memory", hlo]), capsys.readouterr().err)[1]


def test_a_process_count_that_does_not_divide_the_devices_is_refused_once_before_any_process():
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "converter", "run", "samples/tpu_mlp_allreduce_4_replicas.hlo",
                        "--processes", "3"], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert r.returncode == 1
    assert r.stderr.count("cannot share evenly") == 1 and "--processes 3" in r.stderr
    assert "process 2 of 3" not in r.stderr and r.stdout == ""
    assert time.monotonic() - start < 30  # no worker (a JAX start each) was launched


def test_passes_targets_lists_what_each_target_is_rewritten_by(capsys):
    assert main(["passes", "--targets"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows["__cublas$gemm"].startswith("cublas-gemm (passes/cublas_gemm.py): ")
    assert rows["AsyncCollectiveDone"].startswith("tpu-async-collectives")
