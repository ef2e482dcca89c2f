"""Round trip: StableHLO back to HLO text through jaxlib, versioned artifacts, `check`.
The oracle is XLA running the original HLO (and NumPy), never the first conversion alone;
the `check` command (a self-comparison tool by design) is tested on what it reports, with
its XLA column on in the default run."""

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.tools.check import check_dump
from converter.tools.cli import main
from converter.tools.export import export_hlo_text
from converter.runtime.program import program_from_module
from converter.mlir.serialize import load_module, module_to_bytes
from tests.conftest import SAMPLES
from tests.helpers import assert_all_close, run_xla

SMALL = """HloModule small, replica_count=1
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,6]{1,0} parameter(0)
  i = s32[4]{0} parameter(1)
  e = f32[4,6]{1,0} exponential(x)
  z = f32[] constant(0)
  r = f32[4]{0} reduce(e, z), dimensions={1}, to_apply=add
  c = s32[4]{0} multiply(i, i)
  ROOT t = (f32[4]{0}, s32[4]{0}) tuple(r, c)
}
"""


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 6)).astype(np.float32), rng.integers(-5, 5, 4).astype(np.int32)]


def test_export_then_convert_again_computes_xlas_numbers():
    first = convert_text(SMALL)
    second_text = export_hlo_text(first)
    assert second_text.startswith("HloModule")
    inputs = _inputs()
    again = program_from_module(convert_text(second_text))(*inputs)
    assert_all_close(again, run_xla(SMALL, inputs))
    # and NumPy's: a row sum of exponentials (f32, 6 terms), a square of small integers
    assert_all_close(again, [np.exp(inputs[0]).sum(axis=1), inputs[1] * inputs[1]])


@pytest.mark.parametrize("emit", ["bytecode", "portable"])
def test_serialized_forms_load_back_print_identically_and_compute_xlas_numbers(emit):
    module = convert_text(SMALL)
    data = module_to_bytes(module, emit)
    again = load_module(data)
    assert str(again) == str(load_module(module_to_bytes(module, "mlir").encode()))
    inputs = _inputs()
    assert_all_close(program_from_module(again)(*inputs), run_xla(SMALL, inputs))


def test_check_reports_a_table_with_xlas_column(capsys, tmp_path):
    path = tmp_path / "small.hlo"
    path.write_text(SMALL)
    assert main(["check", str(path), "--against-xla"]) == 0
    out = capsys.readouterr().out
    assert "xla max abs" in out and "out0" in out and "out1" in out and "verdict: the outputs agree" in out


# A full-size sample through `check` (a self-comparison: the second conversion's outputs
# against the first's; XLA cannot run a TPU dump): slow.
@pytest.mark.slow
def test_check_passes_on_a_sample_and_reports_a_table(capsys):
    assert main(["check", str(SAMPLES / "tpu_mlp_allreduce_4_replicas.hlo")]) == 0
    out = capsys.readouterr().out
    assert "out0" in out and "verdict: the outputs agree" in out


def test_check_against_xla(tmp_path):
    path = tmp_path / "small.hlo"
    path.write_text(SMALL)
    report = check_dump(str(path), against_xla=True)
    assert report.ok and report.xla_ran == "the dump itself" and not report.xla_not_compared
    assert all(r.xla is not None and r.xla.ok for r in report.rows)


def test_check_reports_a_deliberate_mismatch(tmp_path, monkeypatch, capsys):
    """A converter bug that changes numbers on the second conversion must fail `check`."""
    path = tmp_path / "small.hlo"
    path.write_text(SMALL)
    import converter.tools.check as check

    real = check.export_hlo_text

    def corrupt(module):  # the exported HLO multiplies instead of adding in the reducer
        return real(module).replace(" add(", " multiply(", 1)

    monkeypatch.setattr(check, "export_hlo_text", corrupt)
    assert main(["check", str(path)]) == 3  # they differ (DESIGN.md §4)
    out = capsys.readouterr().out
    assert "DIFFERS" in out and "outputs differ beyond the dtype tolerance: out0" in out


@pytest.mark.parametrize("dump,keep_fusions", [("tpu/scan_reverse_nested.hlo", False), ("tpu/cond_switch.hlo", True),
                                               ("tpu/sort_multi.hlo", True), ("gpu/lm_train_step.hlo", False)])
def test_module_text_is_what_the_binding_prints(dump, keep_fusions):
    """The MLIR text written through MLIR's IR printing (C++ into a file) is byte for byte
    the binding's get_asm, with and without locations, and printing leaves the module as
    it was."""
    from converter.runtime.convert import convert_file
    from converter.mlir.serialize import module_text
    from tests.conftest import ROOT

    module = convert_file(str(ROOT / "tests" / "dumps" / dump), pipeline="none", keep_fusions=keep_fusions)
    for debug_info in (True, False):
        expected = module.operation.get_asm(enable_debug_info=debug_info, large_elements_limit=None)
        assert module_text(module, debug_info) == expected
        assert module.operation.get_asm(enable_debug_info=debug_info, large_elements_limit=None) == expected


def test_module_text_without_a_temporary_directory_prints_through_the_binding(monkeypatch):
    import tempfile

    from converter.mlir.serialize import module_text

    module = convert_text(SMALL)
    expected = module.operation.get_asm(enable_debug_info=True, large_elements_limit=None)

    def refuse(*args, **kwargs):
        raise OSError("no temporary directory")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", refuse)
    assert module_text(module) == expected
