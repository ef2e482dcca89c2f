"""ConvertOptions: the one value that decides what a dump converts to (the CLI builds it from
its flags, a Python caller from keywords), and the CPU runtime's pipeline as a stage of its own."""

from __future__ import annotations

import os

import pytest

from converter.runtime.convert import ConvertOptions, convert_options
from converter.runtime.program import load
from converter.tools.cli import build_parser
from converter.tools.options import convert_options_from_args, run_options_from_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOUR_REPLICAS = os.path.join(ROOT, "samples", "tpu_mlp_allreduce_4_replicas.hlo")


def test_keywords_reach_the_options_they_belong_to():
    options = convert_options(pipeline="none", keep_fusions=True, allow_custom_calls={"x"}, reduction_order="native")
    assert options.pipeline == "none"
    assert options.import_options.keep_fusions
    assert options.pass_options.allow_custom_calls == {"x"} and options.pass_options.reduction_order == "native"
    # The value it started from is unchanged (frozen, replaced field by field).
    assert ConvertOptions().import_options.keep_fusions is False


def test_an_unknown_keyword_is_refused_by_name():
    with pytest.raises(TypeError, match="keep_fusion"):
        convert_options(keep_fusion=True)


def test_the_command_line_builds_the_same_value_as_keywords():
    args = build_parser().parse_args(["run", FOUR_REPLICAS, "--pipeline", "none", "--keep-fusions",
                                      "--allow-custom-call", "x", "--reduction-order", "native", "--seed", "3",
                                      "--tap", "a,b"])
    options = run_options_from_args(args)
    assert options.seed == 3 and options.input == FOUR_REPLICAS
    convert = options.convert
    assert convert == convert_options_from_args(args)
    assert convert.pipeline == "none" and convert.import_options.keep_fusions and convert.import_options.seed == 3
    assert convert.pass_options.allow_custom_calls == {"x"} and convert.pass_options.reduction_order == "native"
    assert convert.import_options.taps.names == ["a", "b"]


def test_preparing_for_cpu_is_a_named_pipeline_written_with_dump_dir(tmp_path):
    # 4 replicas with a float all-reduce: the CPU runtime's pipeline folds it in group order.
    program = load(FOUR_REPLICAS, dump_dir=str(tmp_path))
    assert "prepare for CPU" in program.timings and "pass:ordered-reductions" in program.timings
    written = sorted(os.listdir(tmp_path / "prepare-for-CPU"))
    assert any("ordered-reductions" in name for name in written), written
    # The conversion's own pipeline is written beside it, not mixed in.
    assert not any("ordered-reductions" in name for name in os.listdir(tmp_path))
