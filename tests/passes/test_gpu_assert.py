"""gpu-assert: `__xla_gpu_assert` in the form XLA's runtime-intrinsics tests and TensorFlow's
CheckNumerics write it (a pred[] operand, token[] result, side effect, typed FFI, the
attribute dictionary as a string backend_config) is removed with a warning that names its
message and dump line; the rest of the program computes what XLA on CPU computes for the
same program without the call (the oracle: the dump with that line deleted)."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from passes.gpu_assert import UncheckedAssertWarning
from tests.helpers import convert_program, run_xla

CHECKED = """HloModule check_numerics

and_fn {
  a = pred[] parameter(0)
  c = pred[] parameter(1)
  ROOT r = pred[] and(a, c)
}

ENTRY main {
  x = f32[8]{0} parameter(0)
  finite = pred[8]{0} is-finite(x)
  t = pred[] constant(true)
  and = pred[] reduce(finite, t), dimensions={0}, to_apply=and_fn
  check = token[] custom-call(and), custom_call_target="__xla_gpu_assert", custom_call_has_side_effect=true, api_version=API_VERSION_TYPED_FFI, backend_config="{error_msg = \\"CheckNumerics failed: x\\"}"
  two = f32[] constant(2)
  b = f32[8]{0} broadcast(two), dimensions={}
  ROOT y = f32[8]{0} multiply(x, b)
}
"""


def test_assert_is_removed_with_a_located_warning_and_the_rest_computes_as_xla():
    with pytest.warns(UncheckedAssertWarning, match=r":14:\d+: %check: __xla_gpu_assert not checked .*"
                                                    r"'CheckNumerics failed: x'"):
        program = convert_program(CHECKED)
    assert "custom_call" not in str(program.module)
    x = np.array([1, -2, 3.5, 0, 1e30, -1e-30, 7, 8], np.float32)
    without = "\n".join(line for line in CHECKED.splitlines() if "__xla_gpu_assert" not in line)
    (got,) = program(x)
    (want,) = run_xla(without, [x])
    np.testing.assert_array_equal(got, want)


def test_a_token_taken_by_another_op_becomes_a_fresh_token():
    text = CHECKED.replace("  ROOT y = f32[8]{0} multiply(x, b)",
                           "  y = f32[8]{0} multiply(x, b)\n  joined = token[] after-all(check)\n"
                           "  ROOT out = (f32[8]{0}, token[]) tuple(y, joined)")
    with pytest.warns(UncheckedAssertWarning):
        module = str(convert_text(text))
    assert "__xla_gpu_assert" not in module and "stablehlo.after_all" in module


def test_an_assert_on_something_else_than_a_scalar_pred_is_refused():
    text = CHECKED.replace("custom-call(and)", "custom-call(finite)")
    with pytest.raises(Exception, match=r":14:\d+: error: .*__xla_gpu_assert.*expects one pred\[\] operand"):
        convert_text(text)


def _run_cli(tmp_path, text, x):
    from converter.tools.cli import main

    dump = tmp_path / "check.hlo"
    dump.write_text(text)
    np.savez(tmp_path / "in.npz", arg0=x)
    with pytest.warns(UncheckedAssertWarning):
        code = main(["run", str(dump), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")])
    with np.load(tmp_path / "out.npz", allow_pickle=False) as out:
        outputs = {k: out[k] for k in out.files}
    return code, outputs


@pytest.mark.parametrize("x, verdict", [
    (np.array([1, -2, 3.5, 0, 1e30, -1e-30, 7, 8], np.float32), "held"),
    (np.array([1, -2, np.inf, 0, 1, 2, 7, np.nan], np.float32), "failed (predicate false)"),
])
def test_run_reports_whether_the_assert_held(tmp_path, capsys, x, verdict):
    """The predicate is tapped (as a host callback's operand is): `run` prints the check's
    message and whether it held; a failed one also warns on stderr; the exit status stays 0
    and the outputs are those of the program without the check (XLA on CPU)."""
    code, outputs = _run_cli(tmp_path, CHECKED, x)
    captured = capsys.readouterr()
    assert code == 0
    assert f"assert 'CheckNumerics failed: x' (check): {verdict}" in captured.out
    failed = verdict.startswith("failed")
    assert ("FAILED (predicate false)" in captured.err) == failed
    # The tapped predicate is the reduce-and of is-finite: independent of the report.
    (pred_key,) = [k for k in outputs if "callback" in k]
    assert bool(outputs[pred_key]) == bool(np.all(np.isfinite(x)))
    without = "\n".join(line for line in CHECKED.splitlines() if "__xla_gpu_assert" not in line)
    (want,) = run_xla(without, [x])
    own = [k for k in outputs if "callback" not in k]
    np.testing.assert_array_equal(outputs[own[0]], want)
